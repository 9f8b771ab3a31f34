"""The JSON Schema (draft 2020-12) of each placer/v1 document, generated from the Structs
that decode it (:mod:`placer.schema.documents`) by ``msgspec.json.schema``.

The schema states what each field is (type, range, enum, the Kubernetes shape of
``affinity`` and ``topologySpreadConstraints``) and that unknown fields are refused. The
rules that span fields (names unique, GPUs held once, capacities, references between
fields) are the decoder's only (:mod:`placer.schema`), and the decoder also reads ``null``
as an absent key, which the schema allows only where a field is optional. The generated
files are in ``docs/schema/`` (a test keeps them equal to :func:`document_schema`);
``placer schema snapshot|request|result`` prints them.
"""
from __future__ import annotations

import contextlib
from types import MappingProxyType
from typing import Any, Iterator

import msgspec
import msgspec._json_schema as _msgspec_schema

from placer.exceptions import InvalidInputError
from placer.schema.documents import RequestDoc, ResultDoc, SnapshotDoc

__all__ = ["SCHEMA_DIALECT", "DOCUMENT_KINDS", "document_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect the schemas declare (``$schema``)."""

DOCUMENT_KINDS: dict[str, tuple[str, type]] = {
    "snapshot": ("ClusterSnapshot", SnapshotDoc),
    "request": ("PlacementRequest", RequestDoc),
    "result": ("PlacementResult", ResultDoc),
}
"""The documents by short name: their ``kind`` and the Struct that decodes them."""


def _plain(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise NotImplementedError(type(value).__name__)


@contextlib.contextmanager
def _defaults_as_builtins() -> Iterator[None]:
    """msgspec writes each field's default into the schema with ``to_builtins``, which
    knows no read-only mapping (the Structs' empty-mapping default): convert those."""
    original = _msgspec_schema.to_builtins

    def to_builtins(obj: Any, **kw: Any) -> Any:
        return original(obj, enc_hook=_plain, **kw)

    _msgspec_schema.to_builtins = to_builtins
    try:
        yield
    finally:
        _msgspec_schema.to_builtins = original


def document_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one placer/v1 document.

    Parameters
    ----------
    kind : {"snapshot", "request", "result"}
        The ClusterSnapshot, PlacementRequest or PlacementResult document.

    Returns
    -------
    dict
        The schema: ``$schema``, ``title`` (``placer/v1 <Kind>``), and
        msgspec's ``$ref`` to the document's definition among ``$defs``.

    Raises
    ------
    InvalidInputError
        ``where`` = ``kind`` for a name not in :data:`DOCUMENT_KINDS`.
    """
    if kind not in DOCUMENT_KINDS:
        raise InvalidInputError("kind", f"expected one of {', '.join(DOCUMENT_KINDS)}, got {kind!r}")
    name, struct = DOCUMENT_KINDS[kind]
    with _defaults_as_builtins():
        generated = msgspec.json.decode(msgspec.json.encode(msgspec.json.schema(struct)))  # tuples as lists
    return {"$schema": SCHEMA_DIALECT, "title": f"placer/v1 {name}", **generated}
