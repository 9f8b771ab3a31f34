"""Reading documents: bytes, JSON or YAML, into typed Structs, with errors at file:line.

JSON goes straight from bytes into the document's Structs (msgspec); YAML is parsed by
PyYAML's C loader and then converted. Either way a repeated key is refused (decoders keep
the last one silently), so is nesting deeper than :data:`MAX_NESTING` levels (decoders and
walkers recurse once per level: deep input would crash them), and the file's name is put
before every error's path.
"""
from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, TypeVar, Union

import msgspec
import yaml

from placer.text.files import read_utf8, source_name
from placer.exceptions import InvalidInputError
from placer.schema._jsonkeys import first_duplicate_key
from placer.schema.errors import (
    HugeInt,
    Labels,
    bad,
    first_fault,
    from_msgspec,
    join_path,
    msgspec_path,
    strip_nulls,
    value_at,
)

__all__ = [
    "MAX_NESTING",
    "MAX_ALIASED_NODES",
    "read_bytes",
    "load_document",
    "decode_source",
    "decode_object",
    "first_duplicate_key",
    "check_json_nesting",
    "check_yaml_nesting",
    "check_data_nesting",
    "decode_json_generic",
    "yaml_generic",
    "gc_paused",
    "PathLike",
]

PathLike = Union[str, "os.PathLike[str]"]
Check = Callable[[Any], None]
_T = TypeVar("_T")
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_INT_DIGITS = 4000  # longer integer literals are reported, never converted
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}

MAX_NESTING = 64
"""The deepest nesting of lists and mappings a document may have (its top level is level 1);
no placer, Kubernetes or Kueue document comes near it."""
MAX_ALIASED_NODES = 100_000
"""The most nodes the aliases of one YAML text may stand for (each alias counts the nodes of
the node it repeats): data shared that way is walked once per alias by every reader."""


def read_bytes(path: PathLike) -> bytes:
    """The bytes of a UTF-8 file (a leading byte-order mark dropped; ``-`` is standard input).

    Raises
    ------
    InvalidInputError
        Naming the path when the file is missing or unreadable, and ``path:line`` for
        bytes that are not UTF-8.
    """
    return read_utf8(path)


class gc_paused:  # noqa: N801 - used as a context manager, like contextlib's
    """Pause the cyclic garbage collector while large acyclic structures are built.

    Building a 100,000-node document allocates millions of containers; each collection
    the allocations trigger walks all of them, which roughly doubles the time.
    """

    __slots__ = ("was_enabled",)

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


# ----------------------------------------------------------------------------- JSON


def _parse_int(text: str) -> Any:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= _MAX_INT_DIGITS else HugeInt(digits)


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def json_generic(raw: bytes, name: str) -> Any:
    """Plain Python data of a JSON text (the error path: stdlib messages and line numbers)."""
    try:
        return json.loads(raw, parse_int=_parse_int, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{name}:{e.lineno}", f"invalid JSON: {e.msg} (column {e.colno})") from None
    except ValueError as e:
        raise InvalidInputError(name, f"invalid JSON: {e}") from None
    except RecursionError:
        raise InvalidInputError(name, "invalid JSON: nested too deeply") from None


class _DuplicateKey(Exception):
    def __init__(self, key: Any) -> None:
        self.key = key


def _pairs_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def check_json_keys(raw: bytes, name: str) -> None:
    """Refuse a JSON text in which some object repeats a key."""
    found = first_duplicate_key(raw)
    if found is None:
        return
    second, first = found
    if second == "escaped":
        try:
            json.loads(raw, object_pairs_hook=_pairs_without_repeats, parse_int=_parse_int)
        except _DuplicateKey as e:
            raise InvalidInputError(name, f"duplicate key {e.key!r} in an object") from None
        except ValueError:
            json_generic(raw, name)  # raises at the line where the text breaks
        return
    end = raw.index(b'"', second + 1)
    key = raw[second + 1: end].decode("utf-8", "replace")
    line = raw.count(b"\n", 0, second) + 1
    first_line = raw.count(b"\n", 0, first) + 1
    raise InvalidInputError(f"{name}:{line}", f"duplicate key {key!r}, first at line {first_line}")


# ----------------------------------------------------------------------------- nesting

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_SAME_BRACKETS = bytes.maketrans(b"[]", b"{}")
_STRING_LEFT = re.compile(rb'"[^"]*"')
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _too_deep(text: bytes) -> bool:
    """Whether a JSON text nests more than :data:`MAX_NESTING` levels: C-speed byte passes
    (no Python loop per byte), for every text read."""
    if b"\\" in text:
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")  # escapes gone, quotes pair up
    structure = text.translate(None, _NOT_STRUCTURE)
    if structure.count(b"[") + structure.count(b"{") <= MAX_NESTING:
        return False
    # removing '""' (close-open or open-close) keeps the quotes paired: strings without brackets vanish
    brackets = _STRING_LEFT.sub(b"", structure.replace(b'""', b"")).translate(_SAME_BRACKETS)
    for _ in range(MAX_NESTING):  # each round removes the innermost level
        if not brackets:
            return False
        brackets = brackets.replace(b"{}", b"")
    return bool(brackets)


def _nesting_error(where: str, detail: str = "") -> InvalidInputError:
    return InvalidInputError(where, f"nesting deeper than {MAX_NESTING} levels of lists and mappings{detail}")


def check_json_nesting(raw: bytes, name: str) -> None:
    """Refuse a JSON text that nests lists and objects more than :data:`MAX_NESTING` deep.

    Raises
    ------
    InvalidInputError
        At ``name:line``, with the column of the bracket that opens the level too many.
    """
    if not _too_deep(raw):
        return
    depth = 0
    for token in _JSON_TOKEN.finditer(raw):
        c = raw[token.start()]
        if c in b"[{":
            depth += 1
            if depth > MAX_NESTING:
                line = raw.count(b"\n", 0, token.start()) + 1
                column = token.start() - raw.rfind(b"\n", 0, token.start())
                raise _nesting_error(f"{name}:{line}", f" (column {column})")
        elif c in b"]}":
            depth -= 1
    # unbalanced brackets counted deeper than the text nests: the decoder says where it breaks


def check_data_nesting(data: Any, where: str = "") -> None:
    """Refuse plain data (a caller's mapping) nested more than :data:`MAX_NESTING` deep, or
    holding itself.

    Raises
    ------
    InvalidInputError
        At the JSON path of the list or mapping one level too deep (after ``where``).
    """
    if not isinstance(data, (Mapping, list, tuple)):
        return
    deepest_seen: dict[int, int] = {}  # a container shared by several parents is walked once per depth
    pending: list[tuple[Any, int, Any, Any]] = [(data, 1, None, None)]  # (value, depth, parent entry, key)
    while pending:
        entry = pending.pop()
        value, depth = entry[0], entry[1]
        if depth > MAX_NESTING:
            raise _nesting_error(_entry_path(entry, where))
        if deepest_seen.get(id(value), 0) >= depth:
            continue
        deepest_seen[id(value)] = depth
        steps = value.items() if isinstance(value, Mapping) else enumerate(value)
        pending.extend((v, depth + 1, entry, k) for k, v in steps if isinstance(v, (Mapping, list, tuple)))


def _entry_path(entry: tuple[Any, int, Any, Any], where: str) -> str:
    """The JSON path of an entry of :func:`check_data_nesting` (its keys up to the top)."""
    steps: list[Any] = []
    while entry[2] is not None:
        steps.append(entry[3])
        entry = entry[2]
    path = where
    for step in reversed(steps):
        path = f"{path}[{step}]" if type(step) is int else join_path(path, str(step))
    return path


class _Node:
    """What the nesting check keeps of a node: the levels of collections it spans (0 for a
    scalar) and how many nodes it stands for with its aliases expanded."""

    __slots__ = ("anchor", "height", "size")

    def __init__(self, anchor: str | None, height: int = 0, size: int = 1) -> None:
        self.anchor = anchor
        self.height = height
        self.size = size

    def holds(self, child: "_Node") -> None:
        self.height = max(self.height, child.height + 1)
        self.size += child.size


def check_yaml_nesting(text: str, name: str) -> None:
    """Refuse a YAML text nested more than :data:`MAX_NESTING` deep (aliases counted as the
    node they stand for), whose alias stands for a node that holds it, or whose aliases
    expand to more than :data:`MAX_ALIASED_NODES` nodes (a "billion laughs").

    Only the parser's events are read: the composer recurses in C (a segfault on deep text)
    and must not see such a text. A syntax error is left to the loader that reads the text.

    Raises
    ------
    InvalidInputError
        At ``name:line`` of the collection or alias at fault.
    """
    parser = _BASE_LOADER(text)
    open_nodes: list[_Node] = []
    anchored: dict[str, _Node | None] = {}  # None: the anchored collection is still open
    aliased = 0
    try:
        while True:
            event = parser.get_event()
            if event is None:
                return
            kind = type(event)
            if kind is yaml.ScalarEvent and event.anchor is None:  # most events: kept short
                if open_nodes:
                    open_nodes[-1].size += 1
                continue
            at = f"{name}:{event.start_mark.line + 1}"  # only collections, anchors and aliases get here
            node: _Node | None = None
            if kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                open_nodes.append(_Node(event.anchor, height=1))
                if event.anchor is not None:
                    anchored[event.anchor] = None
                if len(open_nodes) > MAX_NESTING:
                    raise _nesting_error(at)
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                node = open_nodes.pop()
            elif kind is yaml.ScalarEvent:
                node = _Node(event.anchor)
            elif kind is yaml.AliasEvent:
                node = anchored.get(event.anchor, _Node(None))
                if node is None:
                    raise InvalidInputError(at, f"alias *{event.anchor} inside the node it stands for")
                if len(open_nodes) + node.height > MAX_NESTING:
                    raise _nesting_error(at, f" (through alias *{event.anchor})")
                aliased += node.size
                if aliased > MAX_ALIASED_NODES:
                    raise InvalidInputError(at, f"aliases that stand for more than {MAX_ALIASED_NODES} nodes in all")
                node = _Node(None, node.height, node.size)
            if node is None:
                continue
            if node.anchor is not None:
                anchored[node.anchor] = node
            if open_nodes:
                open_nodes[-1].holds(node)
    except yaml.YAMLError:
        return
    finally:
        parser.dispose()


def decode_json_generic(raw: bytes, name: str) -> Any:
    """Plain Python data of a JSON text, its nesting and keys checked.

    Raises
    ------
    InvalidInputError
        At ``name:line`` for text that does not parse, nests too deeply or repeats a key.
    """
    check_json_nesting(raw, name)
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        data = json_generic(raw, name)  # raises with the line and column (or holds huge integers)
    check_json_keys(raw, name)
    return data


# ----------------------------------------------------------------------------- YAML


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader that refuses a mapping with a repeated key."""


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # merged keys may be overridden: that is YAML's rule, not a repeat
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:
            continue  # an unhashable key: construct_mapping refuses it
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}, first at line {first + 1}", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def yaml_generic(text: str, name: str) -> Any:
    """Plain Python data of a YAML text, its nesting and keys checked (errors at ``name:line``)."""
    check_yaml_nesting(text, name)
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = e.problem or e.context or "unparseable"
        raise InvalidInputError(f"{name}:{line}", f"invalid YAML: {problem}") from None
    except yaml.YAMLError as e:
        pos = getattr(e, "position", None)
        line = text.count("\n", 0, pos) + 1 if isinstance(pos, int) else 1
        raise InvalidInputError(f"{name}:{line}", f"invalid YAML: {e}") from None
    except RecursionError:
        raise InvalidInputError(name, "invalid YAML: nested too deeply") from None


# ----------------------------------------------------------------------------- documents


def _format(name: str, raw: bytes) -> str:
    ext = Path(name).suffix.lower()
    if ext == ".json":
        return "json"
    if ext in (".yaml", ".yml"):
        return "yaml"
    return "sniff"


def _generic(raw: bytes, name: str) -> Any:
    """Plain data of a JSON or YAML file, keys checked for repeats."""
    if not raw.strip():
        raise InvalidInputError(f"{name}:1", "empty file, expected a JSON or YAML document")
    fmt = _format(name, raw)
    if fmt == "yaml":
        doc = yaml_generic(raw.decode("utf-8"), name)
    else:
        try:
            doc = decode_json_generic(raw, name)
        except InvalidInputError as json_error:
            if fmt == "json":
                raise
            try:
                doc = yaml_generic(raw.decode("utf-8"), name)
            except InvalidInputError as yaml_error:
                raise (json_error if raw.lstrip()[:1] in (b"{", b"[") else yaml_error) from None
    if doc is None:
        raise InvalidInputError(f"{name}:1", "empty document, expected a mapping")
    return doc


def load_document(path: PathLike) -> Any:
    """Read a JSON or YAML document whose top level is a mapping.

    The format follows the extension (``.json``; ``.yaml``/``.yml``); any other extension
    is tried as JSON, then as YAML. A mapping that repeats a key is refused.

    Raises
    ------
    InvalidInputError
        If the file is missing or unreadable (``where`` is the file name), empty or
        unparseable (``where`` is ``file:line``), or its top level is not a mapping.
    """
    name = source_name(path)
    doc = _generic(read_bytes(path), name)
    if not isinstance(doc, Mapping):
        raise bad(name, "a mapping at the top level", doc)
    return doc


def _decoder(doc_type: type[_T]) -> "msgspec.json.Decoder[_T]":
    found = _DECODERS.get(doc_type)
    if found is None:
        found = _DECODERS[doc_type] = msgspec.json.Decoder(doc_type)
    return found


def decode_object(
    data: Any,
    doc_type: type[_T],
    labels: Labels,
    precheck: Check | None = None,
    failed: msgspec.ValidationError | None = None,
    nesting_checked: bool = False,
) -> _T:
    """``data`` (plain Python data: a caller's dict, parsed YAML) as a ``doc_type``.

    A ``null`` value is the same as an absent key. ``precheck`` runs first on ``data``
    (the document's kind is checked before anything in it). ``failed`` is msgspec's error
    when the same document was already decoded from its bytes and refused;
    ``nesting_checked``: the text ``data`` was read from had its nesting bounded already.

    Raises
    ------
    InvalidInputError
        At the first fault in document order, with its path as written.
    """
    if precheck is not None:
        precheck(data)
    if failed is None:
        try:
            return msgspec.convert(data, doc_type, str_keys=True)
        except msgspec.ValidationError as e:
            failed = e
    if not nesting_checked:
        check_data_nesting(data)  # the walks below recurse once per level
    if value_at(data, msgspec_path(failed)) is None:
        data = strip_nulls(data)  # a null where the type takes none: null means absent
        try:
            return msgspec.convert(data, doc_type, str_keys=True)
        except msgspec.ValidationError as e:
            failed = e
    fault = first_fault(data, doc_type, labels, failed)
    raise (fault if fault is not None else from_msgspec(failed)) from None


def decode_source(
    source: PathLike, doc_type: type[_T], labels: Labels, precheck: Check | None = None
) -> tuple[_T, bool]:
    """A file as a ``doc_type``: JSON decoded from its bytes, YAML parsed then converted.

    Returns
    -------
    (document, bool)
        The document, and whether any string in it may hold a control character (False
        only for JSON text without a single escape).

    Raises
    ------
    InvalidInputError
        With the file's name before the path (``cluster.json: nodes[3].name``) or at
        ``file:line`` for text that does not parse or repeats a key.
    """
    name = source_name(source)
    raw = read_bytes(source)
    if _format(name, raw) != "yaml" and raw.lstrip()[:1] == b"{":
        failed: msgspec.ValidationError | None = None
        try:
            doc = _decoder(doc_type).decode(raw)
        except msgspec.ValidationError as e:
            failed = e
            check_json_nesting(raw, name)  # the typed decoding stopped at the fault, maybe above deep text
            try:
                generic = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                generic = _generic(raw, name)  # malformed after all: says where the text breaks
            except msgspec.ValidationError:
                generic = json_generic(raw, name)  # integers msgspec cannot hold
            check_json_keys(raw, name)
        except msgspec.DecodeError:
            generic = _generic(raw, name)  # says where the text breaks (or reads it as YAML)
        else:
            check_json_keys(raw, name)
            return doc, b"\\" in raw
    else:
        failed = None
        generic = _generic(raw, name)
    if not isinstance(generic, Mapping):
        raise bad(name, "a mapping at the top level", generic)
    try:
        # every branch above bounded the text's nesting (check_json_nesting, yaml_generic)
        return decode_object(generic, doc_type, labels, precheck, failed, nesting_checked=True), True
    except InvalidInputError as e:
        raise e.within(name) from None

