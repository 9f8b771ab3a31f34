"""Words for values in error messages: what came instead (``got 8.0 (a float)``), and the
bound on how much of an input a message repeats (:func:`bounded`).

Imports nothing from placer, so every layer (the policy registry at the bottom, the schema,
the adapters, :class:`~placer.exceptions.InvalidInputError` itself) words a value the same way.
"""
from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MISSING",
    "HugeInt",
    "ECHO_LIMIT",
    "bounded",
    "closest",
    "describe",
    "quoted",
    "shorten",
    "unknown_field",
    "FIELD_CONFUSIONS",
]

ECHO_LIMIT = 60
"""The most characters of one input value (a name, a key, a line) a message repeats."""
_WORD_LIMIT = 200  # a longer run without spaces is an echoed value, not a file path or a word
_MESSAGE_LIMIT = 2000
_STR_BITS = 14_000  # an integer of 4,215 digits at most: below Python's default limit of 4,300
_LONG_WORD = re.compile(r"\S{%d,}" % (_WORD_LIMIT + 1))

FIELD_CONFUSIONS: Mapping[str, tuple[str, str]] = {
    "gpuMilli": ("gpuShares", 'a running pod holds GPU shares as gpuShares: {"<GPU index>": milli}; '
                              "gpuMilli is what a request asks"),
    "gpuShares": ("gpuMilli", "a request asks a share of a GPU as gpuMilli (with gpus: 1); gpuShares is what a "
                              "running pod holds"),
    "unknownGpus": ("gpus", "a request asks a number of gpus; unknownGpus is for a running pod whose GPU "
                            "indices the source did not give"),
    "unknownGpuSlots": ("gpuSlots", "a request asks a number of gpuSlots; unknownGpuSlots is for a running pod"),
}
"""Fields of a request pod written in a running pod (or the other way round): the field
meant instead, and why, when the document's fields have it (:func:`unknown_field`)."""

MISSING: Any = object()
"""Stands for an absent value in messages (``got nothing``)."""


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text``, or its first ``limit`` characters, ``...`` and its length when longer."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def quoted(v: Any) -> str:
    """``v`` as Python writes it (``'text'``, ``8``, ``None``), a string cut to its first
    characters, ``...`` and its length; what any other value is (:func:`describe`)."""
    if isinstance(v, str):
        return repr(v) if len(v) <= ECHO_LIMIT else f"{v[:ECHO_LIMIT]!r}... ({len(v)} characters)"
    if v is None or isinstance(v, float) or (isinstance(v, int) and v.bit_length() <= 128):
        return repr(v)
    return describe(v)


def bounded(message: Any) -> Any:
    """``message`` with every run of more than 200 characters without a space (an echoed
    name, key or line) cut by :func:`shorten`, and the whole cut after 2,000 characters:
    an input of megabytes never makes a message of megabytes. Anything but a string is
    returned as it is."""
    if not isinstance(message, str) or len(message) <= _WORD_LIMIT:
        return message
    message = _LONG_WORD.sub(lambda m: shorten(m.group()), message)
    return message if len(message) <= _MESSAGE_LIMIT else shorten(message, _MESSAGE_LIMIT)


class HugeInt:
    """An integer literal too long to convert, as read on the error path (its digit count)."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def describe(v: Any) -> str:
    """What ``v`` is, for ``got …`` in a message (long values shortened)."""
    if v is MISSING:
        return "nothing"
    if v is None:
        return "null"
    if v is True or v is False:
        return f"{str(v).lower()} (a boolean)"
    if isinstance(v, HugeInt):
        return f"an integer of {v.digits} digits"
    if isinstance(v, int):
        if v.bit_length() > _STR_BITS:  # str() refuses it (sys.get_int_max_str_digits)
            return f"an integer of about {int(v.bit_length() * math.log10(2)) + 1} digits"
        text = str(v)
        return text if len(text) <= 40 else f"{text[:20]}... (an integer of {len(text)} digits)"
    if isinstance(v, float):
        return f"{v!r} (a float)"
    if isinstance(v, str):
        if not v:
            return "an empty string"
        return f"{quoted(v)} (a string)"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        return "a list"
    return f"a {type(v).__name__}"


def unknown_field(key: Any, fields: Iterable[str]) -> str:
    """``unknown field "gpu" (did you mean "gpus"?)``: the known field it was probably meant to be."""
    if type(key) is not str:
        return f"unknown field {describe(key)}"
    text = f'unknown field "{key}"'
    fields = list(fields)
    meant = FIELD_CONFUSIONS.get(key)
    if meant is not None and meant[0] in fields:
        return f'{text} (did you mean "{meant[0]}"? {meant[1]})'
    close = closest(key, fields)
    return text + (f' (did you mean "{close}"?)' if close is not None else "")


def closest(word: str, names: Iterable[str]) -> str | None:
    """The name ``word`` was probably meant to be (a close spelling, or the same letters in
    another case), for "did you mean ...?"; None when no name is close."""
    names = list(names)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    return {n.lower(): n for n in names}.get(word.lower())
