"""The role of every field of the documents, declared once beside each Struct.

Each document Struct (:mod:`placer.model`, :mod:`placer.schema.documents`) is followed by
one :func:`declare` call giving each of its fields a :class:`Role`. What restates field
lists elsewhere is derived from these declarations: the eligibility class key of the
kernel (:func:`eligibility_fields`), the pods the compiled readers may treat as plain, the
shape of a pod (:func:`placer.model.shape_key`), the fields a request entry carries into
its :class:`~placer.model.PodRequest` (:func:`counterparts`), and ``to_dict`` of the pod
(:func:`written`). ``docs/adding-a-field.md`` says what each role costs.

This module imports nothing of placer: every layer may read it.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable

import msgspec

__all__ = [
    "Role",
    "SHAPE_ROLES",
    "STATIC_ROLES",
    "declare",
    "roles_of",
    "declared",
    "unassigned",
    "fields_with",
    "counterparts",
    "defaults",
    "eligibility_fields",
    "canonical",
    "written",
]


class Role(enum.Enum):
    """What a field does in placement; every field of a document Struct has exactly one."""

    IDENTITY = "identity"
    """Names the object (a pod, a node): results refer to it; it never decides a placement."""
    RESOURCE = "resource"
    """An amount a pod takes or holds on a node, or a node offers: it decides fit."""
    GATED = "gated resource"
    """A resource that some nodes lack altogether (NICs, an extended resource, GPU slots):
    it decides fit and, before any fit, which nodes are eligible."""
    FILTER = "filter"
    """Decides which nodes are eligible and takes nothing (selectors, tolerations, models)."""
    GROUPING = "grouping"
    """Ties objects together: a gang, topology domains, replicas of one entry."""
    RELATIONAL = "relational"
    """Decides eligibility together with the other pods (inter-pod affinity and
    anti-affinity, topology spread) or makes a pod count in other pods' rules (its labels):
    which nodes qualify changes as pods are placed."""
    ORDER = "order"
    """Decides who comes first: placed first, or evicted last (priority, start time)."""
    SPECIAL = "special"
    """Read by one feature under its own rule (preemption policy, nomination, a node's type
    and hardware, the document's header)."""
    OUTPUT = "output"
    """Written by placer in a result; never read to decide a placement."""


SHAPE_ROLES = frozenset({Role.RESOURCE, Role.GATED, Role.FILTER, Role.RELATIONAL})
"""The roles of the fields that make a pod's shape: pods equal in them are interchangeable."""

STATIC_ROLES = frozenset({Role.GATED, Role.FILTER})
"""The roles of the fields that the kernel's static eligibility of a pod reads."""

_ROLES: dict[type, Mapping[str, Role]] = {}
_COUNTERPARTS: dict[type, Mapping[str, str]] = {}


def declare(
    cls: type,
    like: type | None = None,
    renamed: Mapping[str, str] | None = None,
    **roles: Role,
) -> None:
    """Declare the role of each field of ``cls`` (a :class:`msgspec.Struct`).

    Parameters
    ----------
    cls : type
        The Struct.
    like : type, optional
        A declared Struct whose fields ``cls`` repeats (a document and the model object it
        becomes): a field of ``cls`` that ``like`` has, or that ``renamed`` maps to one of
        its fields, takes that field's role and is its counterpart (:func:`counterparts`).
    renamed : mapping, optional
        Field of ``cls`` -> its counterpart's name in ``like``.
    **roles : Role
        Field -> role, for the fields not taken from ``like`` (or to give another role).

    Raises
    ------
    TypeError
        A role given for a field that ``cls`` does not have, or a ``renamed`` field that
        is missing on either side (a misspelt declaration). A field of ``cls`` left
        without a role is not refused here: :func:`unassigned` names it, and
        ``tests/test_fields.py`` fails on it.
    """
    names = _field_names(cls)
    given = dict(roles)
    pairs: dict[str, str] = {}
    if like is not None:
        theirs = roles_of(like)
        their_names = _field_names(like)
        renamed = dict(renamed or {})
        for mine, other in renamed.items():
            if mine not in names or other not in their_names:
                raise TypeError(f"{cls.__name__}.{mine} -> {like.__name__}.{other}: no such field")
        for name in names:
            other = renamed.get(name, name)
            if other in their_names:
                pairs[name] = other
                if other in theirs:
                    given.setdefault(name, theirs[other])
    elif renamed:
        raise TypeError("renamed needs like")
    stale = sorted(set(given) - set(names))
    if stale:
        raise TypeError(f"{cls.__name__} has no field {', '.join(stale)} (a role is declared for it)")
    bad = [name for name, role in given.items() if not isinstance(role, Role)]
    if bad:
        raise TypeError(f"{cls.__name__}.{bad[0]}: a role is a placer.model.roles.Role")
    _ROLES[cls] = MappingProxyType({name: given[name] for name in names if name in given})
    _COUNTERPARTS[cls] = MappingProxyType(pairs)


def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(cls))


def roles_of(cls: type) -> Mapping[str, Role]:
    """Field -> role of a declared Struct, in field order.

    Raises
    ------
    KeyError
        ``cls`` is not declared.
    """
    found = _ROLES.get(cls)
    if found is None:
        raise KeyError(f"{cls.__name__}: no roles declared (placer.model.roles.declare)")
    return found


def declared() -> tuple[type, ...]:
    """Every Struct with declared roles, in the order of declaration."""
    return tuple(_ROLES)


def unassigned(cls: type) -> list[str]:
    """The fields of ``cls`` that have no role (every field when ``cls`` is not declared)."""
    known = _ROLES.get(cls, {})
    return [name for name in _field_names(cls) if name not in known]


def fields_with(cls: type, *roles: Role) -> tuple[str, ...]:
    """The fields of ``cls`` whose role is one of ``roles``, in field order."""
    return tuple(name for name, role in roles_of(cls).items() if role in roles)


def counterparts(cls: type) -> Mapping[str, str]:
    """Field of ``cls`` -> the field of the Struct it was declared ``like`` that it becomes."""
    roles_of(cls)
    return _COUNTERPARTS[cls]


def defaults(cls: type) -> dict[str, Any]:
    """Field -> default of the fields of ``cls`` that have one."""
    found: dict[str, Any] = {}
    for f in msgspec.structs.fields(cls):
        if f.default is not msgspec.NODEFAULT:
            found[f.name] = f.default
        elif f.default_factory is not msgspec.NODEFAULT:
            found[f.name] = f.default_factory()
    return found


def eligibility_fields(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` that the kernel's static eligibility reads (:data:`STATIC_ROLES`)."""
    return fields_with(cls, *STATIC_ROLES)


_AS_THEY_ARE = frozenset({type(None), bool, int, float, str})


def canonical(value: Any) -> Any:
    """A hashable form of a field's value that ignores what a field's meaning ignores: the
    order of a mapping's entries, and of a tuple of names (models are a set)."""
    if type(value) in _AS_THEY_ARE or value == ():  # most fields of most pods: no ABC check
        return value
    if isinstance(value, Mapping):
        return tuple(sorted(value.items()))
    if isinstance(value, msgspec.Struct) or (type(value) is tuple and value and isinstance(value[0], msgspec.Struct)):
        try:
            hash(value)
        except TypeError:  # a Struct holding mappings (a label selector)
            return msgspec.json.encode(value)
        return value
    if type(value) is tuple and value and all(type(x) is str for x in value):
        return tuple(sorted(value))
    return value


def _builtin(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return value.to_dict()  # type: ignore[attr-defined]
    if isinstance(value, Mapping):
        return {str(k): _builtin(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_builtin(x) for x in value]
    return value


def written(cls: type, json_names: Mapping[str, str]) -> Callable[[Any], dict[str, Any]]:
    """A ``to_dict`` for ``cls``: every field whose value is not its default, under its JSON
    name (``json_names``, else camelCase), model objects by their ``to_dict``, in field order.

    The fields without a default are always written.
    """
    fallback = defaults(cls)
    plan = tuple(
        (name, json_names.get(name) or _camel(name), name in fallback, fallback.get(name))
        for name in _field_names(cls)
    )

    def to_dict(obj: Any) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for name, key, optional, default in plan:
            value = getattr(obj, name)
            if optional and (value is default or value == default):
                continue
            d[key] = _builtin(value)
        return d

    return to_dict


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)
