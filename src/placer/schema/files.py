"""Reading documents: bytes, JSON or YAML, into typed Structs, with errors at file:line.

JSON goes straight from bytes into the document's Structs (msgspec); YAML is parsed by
PyYAML's C loader and then converted. Either way a repeated key is refused (decoders keep
the last one silently), and the file's name is put before every error's path.
"""
from __future__ import annotations

import gc
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, TypeVar, Union

import msgspec
import yaml

from placer._io import read_utf8, source_name
from placer.exceptions import InvalidInputError
from placer.schema._jsonkeys import first_duplicate_key
from placer.schema.errors import (
    HugeInt,
    Labels,
    bad,
    first_fault,
    from_msgspec,
    msgspec_path,
    strip_nulls,
    value_at,
)

__all__ = [
    "read_bytes",
    "load_document",
    "decode_source",
    "decode_object",
    "first_duplicate_key",
    "gc_paused",
    "PathLike",
]

PathLike = Union[str, "os.PathLike[str]"]
Check = Callable[[Any], None]
_T = TypeVar("_T")
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_INT_DIGITS = 4000  # longer integer literals are reported, never converted
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


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


def _yaml_generic(text: str, name: str) -> Any:
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
        doc = _yaml_generic(raw.decode("utf-8"), name)
    else:
        try:
            doc = json_generic(raw, name)
            check_json_keys(raw, name)
        except InvalidInputError as json_error:
            if fmt == "json":
                raise
            try:
                doc = _yaml_generic(raw.decode("utf-8"), name)
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
) -> _T:
    """``data`` (plain Python data: a caller's dict, parsed YAML) as a ``doc_type``.

    A ``null`` value is the same as an absent key. ``precheck`` runs first on ``data``
    (the document's kind is checked before anything in it). ``failed`` is msgspec's error
    when the same document was already decoded from its bytes and refused.

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
        return decode_object(generic, doc_type, labels, precheck, failed), True
    except InvalidInputError as e:
        raise e.within(name) from None

