"""Error messages of the schema: what a value is, what a field expects, where it is.

msgspec decides *whether* a document is valid while decoding it; when it is not, this module
finds the first fault in document order by walking the document against the same declared
types (:func:`first_fault`) and words it as the contract asks: a path as written in the file
(``nodes[3].pods[0].gpus[1]``, ``nodeTypes.dgx.gpus``), what was expected, what came instead,
and for an unknown field the known one it was probably meant to be.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Iterable, Iterator, Sequence

import msgspec
from msgspec import inspect as mi

from placer.exceptions import InvalidInputError
from placer.text.messages import MISSING, HugeInt, describe, quoted, unknown_field

__all__ = [
    "MISSING",
    "HugeInt",
    "describe",
    "bad",
    "one_of",
    "listing",
    "nest",
    "join_path",
    "first_fault",
    "from_msgspec",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def bad(where: str, expected: str, v: Any) -> InvalidInputError:
    """``where: expected <expected>, got <what v is>``."""
    return InvalidInputError(where, f"expected {expected}, got {describe(v)}")


def one_of(choices: Iterable[str]) -> str:
    """``one of a, b, c``."""
    return "one of " + ", ".join(choices)


def listing(names: Iterable[str], limit: int = 12) -> str:
    """Names for a message, at most ``limit`` of them."""
    names = list(names)
    if not names:
        return "(none)"
    text = ", ".join(names[:limit])
    return text + f", ... ({len(names)} in all)" if len(names) > limit else text


def join_path(prefix: str, where: str) -> str:
    """``prefix`` then ``where`` as one JSON path (``a`` + ``b`` → ``a.b``, ``a`` + ``[0]``)."""
    if not where:
        return prefix
    if not prefix:
        return where
    return prefix + where if where[0] == "[" else f"{prefix}.{where}"


def nest(e: InvalidInputError, prefix: str) -> InvalidInputError:
    """The same error with ``prefix`` put before its path."""
    return InvalidInputError(join_path(prefix, e.where), e.what)


_CHOICE_ORDER: dict[frozenset[Any], tuple[Any, ...]] = {}


def choices_in_order(*choices: tuple[Any, ...]) -> None:
    """Name a Literal's values in this order in messages (msgspec reports them sorted)."""
    for values in choices:
        _CHOICE_ORDER[frozenset(values)] = tuple(values)


def _int_desc(lo: int | None, hi: int | None) -> str:
    if lo is None:
        return "an integer" if hi is None else f"an integer <= {hi}"
    if hi is None:
        return f"an integer >= {lo}"
    return f"an integer in {lo}..{hi}"


def _unwrap(t: mi.Type) -> mi.Type:
    while isinstance(t, mi.Metadata):
        t = t.type
    return t


def _optional(t: mi.Type) -> tuple[mi.Type, bool]:
    """(the type without ``None``, whether ``None`` is allowed)."""
    t = _unwrap(t)
    if isinstance(t, mi.UnionType):
        rest = [_unwrap(x) for x in t.types if not isinstance(_unwrap(x), mi.NoneType)]
        if len(rest) == 1:
            return rest[0], len(rest) < len(t.types)
    return t, isinstance(t, mi.NoneType)


_TECHNICAL = 2**30 - 1  # bounds this large are what the kernel holds, not part of the contract


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what msgspec decodes into an int at all


def _int_bounds(t: mi.IntType) -> tuple[int, int]:
    lo = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else _INT_MIN)
    hi = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else _INT_MAX)
    return lo, hi


def _int_expected(t: mi.IntType, v: Any) -> str:
    lo, hi = _int_bounds(t)
    lo_said = lo if lo is not None and abs(lo) < _TECHNICAL else None
    hi_said = hi if hi is not None and abs(hi) < _TECHNICAL else None
    if type(v) is int and ((lo_said is None and lo is not None and v < lo) or (hi_said is None and hi is not None and v > hi)):
        return _int_desc(lo, hi)  # past what the kernel holds: give the whole range
    return _int_desc(lo_said, hi_said)


def expected(t: mi.Type, label: str | None = None, v: Any = MISSING) -> str:
    """What a value of type ``t`` must be, in words (``label`` wins where given).

    An integer's range is given without bounds that only say what the kernel can hold
    (``an integer >= 0``), unless ``v`` is past one of them.
    """
    if label:
        return label
    t, _ = _optional(t)
    if isinstance(t, mi.IntType):
        return _int_expected(t, v)
    if isinstance(t, mi.FloatType):
        return "a finite number > 0" if t.gt == 0 else "a finite number"
    if isinstance(t, mi.StrType):
        return "a non-empty string" if t.min_length else "a string"
    if isinstance(t, mi.BoolType):
        return "true or false"
    if isinstance(t, mi.LiteralType):
        if len(t.values) == 1:
            return repr(t.values[0])
        values = _CHOICE_ORDER.get(frozenset(t.values), t.values)
        return one_of(str(v) for v in values)
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.TupleType, mi.SetType, mi.FrozenSetType)):
        return "a list"
    if isinstance(t, (mi.DictType, mi.StructType)):
        return "a mapping"
    return "a valid value"


# ----------------------------------------------------------------------------- locating a fault
# ``Labels`` maps (Struct class, JSON field name) to the words for that field, and
# (class, name, "item" | "key" | "value") to the words for its items, keys or values.
Labels = Mapping[tuple[Any, ...], str]


class _Fault(Exception):
    def __init__(self, where: str, what: str) -> None:
        self.where = where
        self.what = what


def _bad_value(where: str, t: mi.Type, v: Any, label: str | None) -> _Fault:
    return _Fault(where, f"expected {expected(t, label, v)}, got {describe(v)}")


def _check_scalar(where: str, t: mi.Type, v: Any, label: str | None) -> None:
    if isinstance(t, mi.AnyType):
        return
    if isinstance(t, mi.IntType):
        lo, hi = _int_bounds(t)
        ok = type(v) is int and lo <= v <= hi
    elif isinstance(t, mi.FloatType):
        ok = type(v) in (int, float) and math.isfinite(v) and (t.gt is None or v > t.gt) and (
            t.ge is None or v >= t.ge
        ) and (t.le is None or v <= t.le)
    elif isinstance(t, mi.StrType):
        ok = type(v) is str and (t.min_length is None or len(v) >= t.min_length) and (
            t.max_length is None or len(v) <= t.max_length
        )
        if ok and t.pattern is not None and not re.search(t.pattern, v):
            ok = False
    elif isinstance(t, mi.BoolType):
        ok = v is True or v is False
    elif isinstance(t, mi.LiteralType):
        ok = any(type(v) is type(x) and v == x for x in t.values)
    elif isinstance(t, mi.NoneType):
        ok = v is None
    else:  # pragma: no cover - the schema uses no other scalar type
        ok = True
    if not ok:
        raise _bad_value(where, t, v, label)


def _dict_key(where: str, t: mi.Type, k: Any, label: str | None) -> None:
    t, _ = _optional(t)
    if isinstance(t, mi.IntType) and type(k) is str and k.isascii() and k.isdigit():
        k = int(k)
    try:
        _check_scalar(where, t, k, label)
    except _Fault:
        shown = f"{where}.{k}" if type(k) is str and k and not _CONTROL.search(k) else where
        raise _Fault(shown, f"expected {label or expected(t) + ' keys'}, got {describe(k)}") from None


def _walk(
    where: str, t: mi.Type, v: Any, labels: Labels, label: str | None, owner: tuple[Any, ...],
    focus: Sequence[Any] = (),
) -> None:
    """Raise a :class:`_Fault` at the first fault of ``v`` against ``t``.

    ``focus`` (a path of field names and list indices, as msgspec reports it) limits the
    walk to that branch: the fault is known to lie there.
    """
    inner, nullable = _optional(t)
    if v is None and nullable:
        return
    t = inner
    step, rest = (focus[0], focus[1:]) if focus else (None, ())
    if isinstance(t, mi.StructType):
        if not isinstance(v, Mapping):
            raise _bad_value(where, t, v, label or labels.get((t.cls,)))
        fields = {f.encode_name: f for f in t.fields}
        for key, value in v.items():
            f = fields.get(key) if type(key) is str else None
            if f is None:
                if t.forbid_unknown_fields or type(key) is not str:
                    raise _Fault(where, unknown_field(key, fields))
                continue
            if value is None and not f.required:
                continue  # null is the same as an absent key
            if step is not None and key != step:
                continue
            _walk(join_path(where, key), f.type, value, labels, labels.get((t.cls, key)), (t.cls, key), rest)
        for name, f in fields.items():
            if f.required and (name not in v or v[name] is None):
                raise _Fault(join_path(where, name), f"expected {expected(f.type, labels.get((t.cls, name)))}, got "
                             f"{describe(v.get(name, MISSING))}")
        return
    if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        if not isinstance(v, (list, tuple)):
            raise _bad_value(where, t, v, label)
        if t.max_length is not None and len(v) > t.max_length:
            raise _Fault(where, f"expected at most {t.max_length} items, got {len(v)}")
        item_label = labels.get((*owner, "item"))
        items = enumerate(v) if type(step) is not int or not 0 <= step < len(v) else [(step, v[step])]
        for j, x in items:
            _walk(f"{where}[{j}]", t.item_type, x, labels, item_label, (*owner, "item"), rest)
        return
    if isinstance(t, mi.DictType):
        if not isinstance(v, Mapping):
            raise _bad_value(where, t, v, label)
        key_label = labels.get((*owner, "key"))
        value_label = labels.get((*owner, "value"))
        for k, x in v.items():
            _dict_key(where, t.key_type, k, key_label)
            _walk(join_path(where, str(k)), t.value_type, x, labels, value_label, (*owner, "value"))
        return
    _check_scalar(where, t, v, label)


def first_fault(
    raw: Any, tp: Any, labels: Labels = {}, near: msgspec.ValidationError | None = None
) -> InvalidInputError | None:
    """The first fault of ``raw`` against the type ``tp``, in document order, or None.

    ``raw`` is the document as plain Python data (parsed JSON or YAML, or the caller's
    dict); the path of the error is relative to it. ``near``, msgspec's own error on the
    same data, points at the branch to search (msgspec stops at the first fault in
    document order); the whole document is searched when that branch holds none.
    """
    info = mi.type_info(tp)
    focus = msgspec_path(near) if near is not None else ()
    for attempt in ((focus,) if not focus else (focus, ())):
        try:
            _walk("", info, raw, labels, labels.get((tp,)), (tp,), attempt)
        except _Fault as f:
            return InvalidInputError(f.where, f.what)
    return None


_MSGSPEC_PATH = re.compile(r" - at (?:`key` in )?`\$(?P<path>[^`]*)`$")
_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def msgspec_path(exc: msgspec.MsgspecError) -> tuple[Any, ...]:
    """The steps of the path in a msgspec error (field names, list indices), up to the
    first mapping value it does not name (``[...]``)."""
    m = _MSGSPEC_PATH.search(str(exc))
    if m is None:
        return ()
    steps: list[Any] = []
    for name, index in _PATH_STEP.findall(m.group("path")):
        if index == "...":
            break
        steps.append(name if name else int(index))
    return tuple(steps)


def value_at(raw: Any, steps: Sequence[Any]) -> Any:
    """The value at ``steps`` in ``raw``; :data:`MISSING` where the path leads nowhere."""
    v = raw
    for step in steps:
        if isinstance(step, int) and isinstance(v, (list, tuple)) and 0 <= step < len(v):
            v = v[step]
        elif isinstance(step, str) and isinstance(v, Mapping) and step in v:
            v = v[step]
        else:
            return MISSING
    return v


def from_msgspec(exc: msgspec.MsgspecError) -> InvalidInputError:
    """msgspec's own message, with its path in placer's style (the fallback)."""
    text = str(exc)
    m = _MSGSPEC_PATH.search(text)
    where = ""
    if m is not None:
        where = m.group("path").lstrip(".")
        text = text[: m.start()]
    return InvalidInputError(where, text[:1].lower() + text[1:])


def strip_nulls(v: Any) -> Any:
    """``v`` with every ``null`` mapping value removed, recursively (null means absent)."""
    if isinstance(v, Mapping):
        return {k: strip_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [strip_nulls(x) for x in v]
    return v


def iter_control(names: Iterable[str]) -> Iterator[str]:
    """The names that hold a control character."""
    return (n for n in names if _CONTROL.search(n))


def without_control(text: str) -> str:
    """``text`` with each control character turned into a space (free text a tool printed,
    such as a Slurm node's ``Reason``, kept readable as a label value)."""
    return _CONTROL.sub(" ", text)


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (U+0000–U+001F, U+007F)."""
    return _CONTROL.search(text) is not None


def control_error(where: str, name: str) -> InvalidInputError:
    """The error for a name with a control character."""
    ch = _CONTROL.search(name)
    assert ch is not None
    return InvalidInputError(
        where, f"expected a name without control characters, got {quoted(name)} (U+{ord(ch.group()):04X})"
    )
