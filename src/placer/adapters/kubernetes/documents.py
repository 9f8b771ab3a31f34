"""Kubernetes objects read from JSON or YAML files, with every fault located.

The Kubernetes importers (:mod:`placer.adapters.kubernetes.snapshot` for nodes and pods,
:mod:`placer.adapters.kubernetes.workloads` for workload manifests) read their files
here: :func:`read_documents` gives the documents of a file as :class:`Document` objects,
:func:`document_objects` the objects inside them (looking into ``List`` kinds), and the
``field_*`` functions check one field's type, failing at the field.

A :class:`Document` names a place in it by the path of keys and list indices that leads
there: ``"<file>:<line>"`` for YAML (the message then starts with the JSON path, e.g.
``items[3].status.allocatable.cpu: ...``) and ``"<file>: <JSON path>"`` for JSON. A JSON
or YAML syntax error always gives ``"<file>:<line>"``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator, NoReturn, Sequence, Union

import yaml

from placer.text.files import read_utf8, source_name
from placer.schema.errors import describe
from placer.schema.files import check_yaml_nesting, decode_json_generic
from placer.exceptions import InvalidInputError

__all__ = [
    "Document",
    "read_documents",
    "document_objects",
    "show",
    "field_map",
    "field_list",
    "field_string",
    "field_integer",
    "field_str_map",
]

PathLike = Union[str, "os.PathLike[str]"]

_TEMPLATE_SUFFIXES = (".tftpl", ".tpl", ".tmpl", ".gotmpl", ".j2", ".jinja", ".jinja2")
_TEMPLATE_MARK = re.compile(r"(?<!\$)\$\{[^}\n]{0,60}\}?|\{\{[^\n]{0,60}?\}\}|\{\{")


def show(v: Any) -> str:
    """A short description of a value for error messages.

    As the snapshot decoder describes values (``'abc'``, ``a mapping``, ...), but an
    integer is written out whole up to 200 bits.

    Parameters
    ----------
    v : object
        A value read from a document.

    Returns
    -------
    str
    """
    if isinstance(v, int) and v is not True and v is not False:
        return str(v) if v.bit_length() < 200 else "a huge integer"
    return describe(v)


# ----------------------------------------------------------------------------- reading


class _Placeholder(Exception):
    def __init__(self, line: int, text: str) -> None:
        super().__init__(text)
        self.line = line
        self.text = text


class _BadScalar(Exception):
    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


_YAML_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_YAML_BASE):  # type: ignore[misc, valid-type]
    """Safe YAML loader that remembers the line of every mapping key and list item,
    refuses duplicate keys and unquoted ``${...}`` template placeholders."""

    spans: dict[int, tuple[Any, int, Any]]


def _line(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _construct_map(loader: Any, node: Any) -> Iterator[dict[Any, Any]]:
    data: dict[Any, Any] = {}
    yield data
    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            k = (key_node.tag, key_node.value)
            if k in seen:
                raise _BadScalar(
                    _line(key_node),
                    f"duplicate key {key_node.value!r} (first on line {seen[k]})",
                )
            seen[k] = _line(key_node)
    loader.flatten_mapping(node)
    lines: dict[Any, int] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=False)
        try:
            hash(key)
        except TypeError:
            raise _BadScalar(_line(key_node), "a mapping key must be a plain value") from None
        data[key] = loader.construct_object(value_node, deep=False)
        lines[key] = _line(key_node)
    loader.spans[id(data)] = (data, _line(node), lines)


def _construct_seq(loader: Any, node: Any) -> Iterator[list[Any]]:
    data: list[Any] = []
    yield data
    data.extend(loader.construct_object(child, deep=False) for child in node.value)
    loader.spans[id(data)] = (data, _line(node), [_line(child) for child in node.value])


def _construct_str(loader: Any, node: Any) -> str:
    value = loader.construct_scalar(node)
    if not node.style and "${" in value:
        raise _Placeholder(_line(node), value)
    return value


def _construct_int(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:
        raise _BadScalar(_line(node), f"not a usable integer: {node.value[:40]!r}") from None


def _construct_float(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    except ValueError:
        raise _BadScalar(_line(node), f"not a usable number: {node.value[:40]!r}") from None


def _construct_timestamp(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


def _path_str(path: Sequence[Any]) -> str:
    out: list[str] = []
    for step in path:
        if isinstance(step, int):
            out.append(f"[{step}]")
        else:
            out.append(f".{step}" if out else str(step))
    return "".join(out)


class Document:
    """One parsed document of a file, and how to name a place in it.

    A place is given by its path: the keys and list indices that lead to it from the
    document's top (``("items", 3, "status", "allocatable", "cpu")``).

    Parameters
    ----------
    source : str
        The file, as errors name it.
    data : object
        The parsed document.
    spans : dict or None
        For YAML, the line of every mapping key and list item (by ``id`` of the container);
        ``None`` for JSON, whose places are named by path instead of line.
    line : int
        The line the document starts on.
    """

    __slots__ = ("source", "data", "spans", "line")

    def __init__(
        self, source: str, data: Any, spans: dict[int, tuple[Any, int, Any]] | None, line: int
    ) -> None:
        self.source = source
        self.data = data
        self.spans = spans
        self.line = line

    def _line_of(self, path: Sequence[Any]) -> int:
        assert self.spans is not None
        line = self.line
        obj = self.data
        for step in path:
            entry = self.spans.get(id(obj))
            if entry is None or entry[0] is not obj:
                break
            line = entry[1]
            sub = entry[2]
            try:
                if isinstance(step, int):
                    if not isinstance(sub, list) or not 0 <= step < len(sub):
                        break
                    line = sub[step]
                else:
                    if not isinstance(sub, dict) or step not in sub:
                        break
                    line = sub[step]
                obj = obj[step]
            except (KeyError, IndexError, TypeError):
                break
        return line

    def where(self, path: Sequence[Any]) -> str:
        """The location of ``path``: ``"<file>:<line>"`` (YAML, or the document itself)
        or ``"<file>: <JSON path>"`` (JSON)."""
        if self.spans is None:
            return f"{self.source}: {_path_str(path)}" if path else f"{self.source}:{self.line}"
        return f"{self.source}:{self._line_of(path)}"

    def error(self, path: Sequence[Any], what: str) -> InvalidInputError:
        """The error ``what`` at ``path`` (for YAML, ``what`` starts with the JSON path)."""
        if self.spans is not None and path:
            what = f"{_path_str(path)}: {what}"
        return InvalidInputError(self.where(path), what)

    def fail(self, path: Sequence[Any], what: str) -> NoReturn:
        """Raise :meth:`error` of ``path`` and ``what``.

        Raises
        ------
        InvalidInputError
            Always.
        """
        raise self.error(path, what)

    def note(self, path: Sequence[Any], what: str) -> str:
        """The text of :meth:`error` of ``path`` and ``what`` (``"<where>: <what>"``), for
        a message that is not raised."""
        e = self.error(path, what)
        return f"{e.where}: {e.what}"


def _parse_yaml(text: str, source: str) -> list[Document]:
    check_yaml_nesting(text, source)
    loader = _Loader(text)
    loader.spans = {}
    docs: list[Document] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = loader.construct_document(node)
            if data is not None:
                docs.append(Document(source, data, loader.spans, _line(node)))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise InvalidInputError(
            f"{source}:{line}", f"invalid YAML: {e.problem or e.context or 'unparseable'}"
        ) from None
    except yaml.YAMLError as e:
        pos = getattr(e, "position", None)
        line = text.count("\n", 0, pos) + 1 if isinstance(pos, int) else 1
        raise InvalidInputError(f"{source}:{line}", f"invalid YAML: {e}") from None
    except _Placeholder as e:
        raise InvalidInputError(
            f"{source}:{e.line}",
            f"unrendered template placeholder in {e.text[:60]!r}; render the template first "
            "and import its output",
        ) from None
    except _BadScalar as e:
        raise InvalidInputError(f"{source}:{e.line}", f"invalid YAML: {e.what}") from None
    except RecursionError:
        raise InvalidInputError(f"{source}:1", "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return docs


def _parse_json(raw: bytes, source: str) -> list[Document]:
    data = decode_json_generic(raw, source)  # a repeated key is refused, not the last one kept
    return [] if data is None else [Document(source, data, None, 1)]


def read_documents(path: PathLike) -> list[Document]:
    """The non-empty documents of a JSON or YAML file.

    ``.json`` files are read as JSON; ``.yaml``/``.yml`` as (multi-document) YAML; any
    other name as JSON when it starts with ``{`` or ``[``, else as YAML. Template files
    (``.tftpl``, ``.tpl``, ``.j2``, ...) with a ``${...}`` or ``{{`` placeholder are
    refused at the placeholder's line, as is an unquoted ``${...}`` in any YAML.

    Parameters
    ----------
    path : str or os.PathLike
        The file; errors name it as given.

    Returns
    -------
    list of Document
        In file order; empty YAML documents (and a JSON ``null``) are left out.

    Raises
    ------
    InvalidInputError
        At ``"<file>:<line>"`` for an empty or unreadable file, a JSON or YAML syntax
        error, a repeated key, nesting deeper than
        :data:`~placer.schema.files.MAX_NESTING` levels, a scalar YAML cannot use, or a
        template placeholder.
    TypeError
        When ``path`` is not a path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a file path, got {type(path).__name__}")
    source = source_name(path)
    raw = read_utf8(path)
    text = raw.decode("utf-8")
    if not text.strip():
        raise InvalidInputError(f"{source}:1", "empty file, expected Kubernetes objects (JSON or YAML)")
    ext = os.path.splitext(source)[1].lower()
    if ext in _TEMPLATE_SUFFIXES:
        m = _TEMPLATE_MARK.search(text)
        if m is not None:
            line = text.count("\n", 0, m.start()) + 1
            raise InvalidInputError(
                f"{source}:{line}",
                f"a {ext} template with placeholder {m.group(0)!r}; render the template first "
                "and import its output",
            )
    if ext == ".json":
        return _parse_json(raw, source)
    if ext in (".yaml", ".yml") or text.lstrip()[0] not in "{[":
        return _parse_yaml(text, source)
    try:
        return _parse_json(raw, source)
    except InvalidInputError as json_error:
        try:
            return _parse_yaml(text, source)
        except InvalidInputError:
            raise json_error from None


def document_objects(doc: Document) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """``(path, object)`` for each object of a document, looking inside Lists.

    A top-level list, and the ``items`` of a mapping without ``kind`` or whose ``kind``
    ends in ``List`` (``List``, ``NodeList``, ...), are walked into (at most three levels
    deep); anything else is one object.

    Parameters
    ----------
    doc : Document

    Yields
    ------
    (tuple, object)
        The path of the object in ``doc`` and the object itself (not checked).
    """

    def walk(path: tuple[Any, ...], obj: Any, depth: int) -> Iterator[tuple[tuple[Any, ...], Any]]:
        if isinstance(obj, list) and depth == 0:
            for i, x in enumerate(obj):
                yield from walk((*path, i), x, depth + 1)
            return
        if isinstance(obj, dict) and depth < 3:
            kind = obj.get("kind")
            items = obj.get("items")
            is_list = kind is None or (isinstance(kind, str) and kind.endswith("List"))
            if isinstance(items, list) and is_list:
                for i, x in enumerate(items):
                    yield from walk((*path, "items", i), x, depth + 1)
                return
        yield path, obj

    yield from walk((), doc.data, 0)


# ----------------------------------------------------------------------------- field access


def field_map(doc: Document, path: tuple[Any, ...], v: Any, required: bool = False) -> dict[Any, Any]:
    """The mapping ``v`` found at ``path``; ``{}`` for a missing (``None``) one.

    Parameters
    ----------
    doc : Document
        Where ``v`` was read.
    path : tuple
        The place of ``v`` in ``doc``.
    v : object
        The value.
    required : bool
        A missing value is an error.

    Returns
    -------
    dict

    Raises
    ------
    InvalidInputError
        At ``path`` when ``v`` is not a mapping (or is missing and ``required``).
    """
    if v is None:
        if required:
            doc.fail(path, "expected a mapping, got nothing")
        return {}
    if not isinstance(v, dict):
        doc.fail(path, f"expected a mapping, got {show(v)}")
    return v


def field_list(doc: Document, path: tuple[Any, ...], v: Any) -> list[Any]:
    """The list ``v`` found at ``path``; ``[]`` for a missing (``None``) one.

    Raises
    ------
    InvalidInputError
        At ``path`` when ``v`` is not a list.
    """
    if v is None:
        return []
    if not isinstance(v, list):
        doc.fail(path, f"expected a list, got {show(v)}")
    return v


def field_string(
    doc: Document, path: tuple[Any, ...], v: Any, required: bool = False, empty: bool = False
) -> str | None:
    """The string ``v`` found at ``path``; ``None`` for a missing one.

    Parameters
    ----------
    doc, path, v
        As for :func:`field_map`.
    required : bool
        A missing value is an error.
    empty : bool
        ``""`` is allowed.

    Returns
    -------
    str or None

    Raises
    ------
    InvalidInputError
        At ``path`` when ``v`` is not a string, is empty without ``empty``, or is missing
        and ``required``.
    """
    if v is None:
        if required:
            doc.fail(path, "expected a non-empty string, got nothing")
        return None
    if not isinstance(v, str) or (not v and not empty):
        doc.fail(path, f"expected a {'' if empty else 'non-empty '}string, got {show(v)}")
    return v


def field_integer(
    doc: Document, path: tuple[Any, ...], v: Any, lo: int | None = None, hi: int | None = None
) -> int | None:
    """The integer ``v`` found at ``path``; ``None`` for a missing one.

    Parameters
    ----------
    doc, path, v
        As for :func:`field_map`.
    lo, hi : int, optional
        The bounds ``v`` must lie in (inclusive).

    Returns
    -------
    int or None

    Raises
    ------
    InvalidInputError
        At ``path`` when ``v`` is not an integer (a bool is not) or is out of bounds.
    """
    if v is None:
        return None
    out_of_range = isinstance(v, int) and ((lo is not None and v < lo) or (hi is not None and v > hi))
    if isinstance(v, bool) or not isinstance(v, int) or out_of_range:
        bounds = f" >= {lo}" if lo is not None and hi is None else f" {lo}..{hi}" if lo is not None else ""
        doc.fail(path, f"expected an integer{bounds}, got {show(v)}")
    return v


def field_str_map(doc: Document, path: tuple[Any, ...], v: Any, what: str) -> dict[str, str]:
    """The mapping of strings to strings ``v`` found at ``path`` (labels, annotations,
    node selectors); ``{}`` for a missing one.

    Parameters
    ----------
    doc, path, v
        As for :func:`field_map`.
    what : str
        What the mapping is, for errors (``"labels"``).

    Returns
    -------
    dict of str to str

    Raises
    ------
    InvalidInputError
        At ``path`` when ``v`` is not a mapping or has a key that is not a non-empty
        string, at the entry for a value that is not a string.
    """
    m = field_map(doc, path, v)
    for k, x in m.items():
        if not isinstance(k, str) or not k:
            doc.fail(path, f"expected {what} with non-empty string keys, got key {show(k)}")
        if not isinstance(x, str):
            doc.fail((*path, k), f"expected a string (quote it), got {show(x)}")
    return m
