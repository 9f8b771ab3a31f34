"""Every user-facing input check of placer: placer/v1 documents decoded by msgspec.

A document is decoded once, into typed Structs, by msgspec (types, ranges, unknown fields);
a dict's plain nodes and pod entries (the common case) are read straight into the same
Structs, with the types and ranges msgspec would check, and msgspec decodes the rest. The
rules msgspec cannot express (names unique, GPUs held once, capacities, references
between fields) are checked here after it, and the result is model objects. Every fault is an
:class:`~placer.exceptions.InvalidInputError` whose ``where`` is the JSON path as written in
the document (``nodes[3].pods[0].gpus[1]``), preceded by the file's name when it came from a
file, or ``file:line`` for text that does not parse or repeats a key. ``null`` is the same as
an absent key.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Callable, TypeVar

import msgspec

from placer import model
from placer.text.files import source_name
from placer.exceptions import InvalidInputError
from placer.limits import MAX_GPUS, MAX_SLICES, MILLI, SEED_MAX
from placer.model import API_VERSION, ClusterSnapshot, PlacementRequest, PlacementResult
from placer.policies import Policy
from placer.schema.checks import (
    check_gpu_request,
    check_policy,
    check_preemption,
    check_seed,
    check_solver,
    check_time_limit,
)
from placer.schema.documents import LABELS, RequestDoc, ResultDoc, SnapshotDoc
from placer.schema.errors import MISSING, bad, describe
from placer.schema.files import decode_object, decode_source, gc_paused, load_document, read_bytes
from placer.schema.request import (
    SnapshotFacts,
    check_request_against_snapshot,
    check_scoring,
    refuse_bound,
    snapshot_facts,
    plain_pods,
    request_document,
    request_from_doc,
    request_from_plain_pods,
    request_of_objects,
)
from placer.schema.json_schema import DOCUMENT_KINDS, document_schema
from placer.schema.result import result_from_doc
from placer.schema.snapshot import DEFAULT_GPU_MODEL, merge_hardware, plain_nodes, snapshot_from_doc, snapshot_gpu_models

__all__ = [
    "MAX_GPUS",
    "MAX_SLICES",
    "MILLI",
    "SEED_MAX",
    "DEFAULT_GPU_MODEL",
    "SnapshotFacts",
    "describe",
    "load_document",
    "read_bytes",
    "snapshot_from_dict",
    "request_from_dict",
    "result_from_dict",
    "coerce_snapshot",
    "coerce_request",
    "coerce_result",
    "request_for_pods",
    "snapshot_facts",
    "refuse_bound",
    "snapshot_gpu_models",
    "check_request_against_snapshot",
    "check_scoring",
    "check_policy",
    "check_solver",
    "check_seed",
    "check_preemption",
    "check_gpu_request",
    "check_time_limit",
    "merge_hardware",
    "DOCUMENT_KINDS",
    "document_schema",
]

_T = TypeVar("_T")
_KINDS = {SnapshotDoc: "ClusterSnapshot", RequestDoc: "PlacementRequest", ResultDoc: "PlacementResult"}


def _header(data: Any, doc_type: type) -> None:
    """The kind of document is checked before anything in it."""
    kind = _KINDS[doc_type]
    if not isinstance(data, Mapping):
        raise bad("", f"a {kind} mapping", data)
    v = data.get("apiVersion", MISSING)
    if type(v) is not str or v != API_VERSION:
        raise bad("apiVersion", repr(API_VERSION), v)
    v = data.get("kind", MISSING)
    if type(v) is not str or v != kind:
        raise bad("kind", repr(kind), v)


def _from_object(data: Any, doc_type: type[_T]) -> _T:
    return decode_object(data, doc_type, LABELS, lambda d: _header(d, doc_type))


def snapshot_from_dict(data: Mapping[str, Any]) -> ClusterSnapshot:
    """Validate a ClusterSnapshot document (SPEC §1) and build it.

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault.
    """
    with gc_paused():
        quick = _plain_snapshot(data)
        return quick if quick is not None else snapshot_from_doc(_from_object(data, SnapshotDoc))


def _plain_part(
    data: Any, key: str, read: Callable[[Any], list[Any] | None], doc_type: type[_T]
) -> tuple[_T, list[Any]] | None:
    """When ``data`` is a dict whose ``key`` entries ``read`` takes (plain entries read
    straight from the dicts): the document decoded by msgspec without them, and what
    ``read`` made of them. None leaves the document to the whole decoding."""
    if type(data) is not dict:
        return None
    entries = read(data.get(key))
    if entries is None:
        return None
    rest = dict(data)
    rest[key] = []
    return _from_object(rest, doc_type), entries


def _plain_snapshot(data: Any) -> ClusterSnapshot | None:
    """A snapshot document whose nodes are all plain (:func:`plain_nodes`); its rules are
    checked as for any document."""
    found = _plain_part(data, "nodes", plain_nodes, SnapshotDoc)
    return None if found is None else snapshot_from_doc(msgspec.structs.replace(found[0], nodes=found[1]))


def request_from_dict(data: Mapping[str, Any], against: SnapshotFacts | None = None) -> PlacementRequest:
    """Validate a PlacementRequest document (SPEC §2) and build it, expanding ``replicas``.

    With ``against`` (:func:`snapshot_facts`), also check it against the snapshot it will
    be placed on.

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault (``pods[i]`` indexes the document's list).
    """
    quick = _plain_request(data, against)
    return quick if quick is not None else request_from_doc(_from_object(data, RequestDoc), against)


def _plain_request(data: Any, against: SnapshotFacts | None) -> PlacementRequest | None:
    """A request document whose pod entries are all plain (:func:`plain_pods`)."""
    found = _plain_part(data, "pods", plain_pods, RequestDoc)
    return None if found is None else request_from_plain_pods(found[0], found[1], against)


def result_from_dict(data: Mapping[str, Any]) -> PlacementResult:
    """Validate a PlacementResult document (SPEC §3) structurally and build it.

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault.
    """
    return result_from_doc(_from_object(data, ResultDoc))


def _coerce(source: Any, cls: type[_T], doc_type: type, build: Callable[[Any, bool], _T]) -> _T:
    if isinstance(source, cls):
        return source
    if isinstance(source, Mapping):
        with gc_paused():
            return build(_from_object(source, doc_type), True)
    if isinstance(source, (str, os.PathLike)):
        name = source_name(source)
        with gc_paused():
            doc, may_hold_control = decode_source(source, doc_type, LABELS, lambda d: _header(d, doc_type))
            try:
                return build(doc, may_hold_control)
            except InvalidInputError as e:
                raise e.within(name) from None
    raise TypeError(f"expected a {cls.__name__}, a mapping or a file path, got {type(source).__name__}")


def coerce_snapshot(source: Any) -> ClusterSnapshot:
    """Return a ClusterSnapshot from a ClusterSnapshot (as is), a mapping or a JSON/YAML path.

    Raises
    ------
    InvalidInputError
        If the document is invalid; errors from a file have its name before the path.
    TypeError
        If ``source`` is none of the accepted types.
    """
    if type(source) is dict:
        with gc_paused():
            quick = _plain_snapshot(source)
        if quick is not None:
            return quick
    return _coerce(source, ClusterSnapshot, SnapshotDoc, snapshot_from_doc)


def coerce_request(source: Any, against: SnapshotFacts | None = None) -> PlacementRequest:
    """Return a PlacementRequest from a PlacementRequest, a mapping or a JSON/YAML path.

    With ``against``, a request decoded here is also checked against the snapshot, naming
    its pods as written; a PlacementRequest object is returned as it is.

    Raises
    ------
    InvalidInputError
        If the document is invalid; errors from a file have its name before the path.
    TypeError
        If ``source`` is none of the accepted types.
    """
    if type(source) is dict:
        with gc_paused():
            quick = _plain_request(source, against)
        if quick is not None:
            return quick
    return _coerce(source, PlacementRequest, RequestDoc, lambda doc, _: request_from_doc(doc, against))


def coerce_result(source: Any) -> PlacementResult:
    """Return a PlacementResult from a PlacementResult, a mapping or a JSON/YAML path.

    Raises
    ------
    InvalidInputError
        If the document is invalid; errors from a file have its name before the path.
    TypeError
        If ``source`` is none of the accepted types.
    """
    return _coerce(source, PlacementResult, ResultDoc, lambda doc, _: result_from_doc(doc))


def request_for_pods(
    pods: Any, gang: Any, policy: Policy, seed: Any, against: SnapshotFacts | None = None
) -> PlacementRequest:
    """The request behind ``Cluster.place``: one pod or a list, optionally forming ``gang``.

    Pods are PodRequest objects, taken as they are (:func:`request_of_objects`), or pod
    mappings (SPEC §2), decoded as a document; ``gang`` is a GangSpec or a gang mapping
    with a ``name``; ``policy`` is the record the caller looked up.
    """
    objects = request_of_objects(pods, gang, policy.name, seed, against)
    if objects is not None:
        return objects
    document = request_document(pods, gang, policy.name, seed)
    del document["policy"]  # looked up by the caller: decoded as the default, then replaced
    request = request_from_dict(document, against)
    return request if request.policy == policy.name else msgspec.structs.replace(request, policy=policy.name)


model.set_decoders(
    snapshot_from_dict=snapshot_from_dict,
    request_from_dict=request_from_dict,
    result_from_dict=result_from_dict,
    coerce_snapshot=coerce_snapshot,
    coerce_request=coerce_request,
    coerce_result=coerce_result,
)
