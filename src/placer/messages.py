"""Words for values in error messages: what came instead (``got 8.0 (a float)``).

Imports nothing from placer, so every layer (the policy registry at the bottom, the schema,
the adapters) words a value the same way.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MISSING", "HugeInt", "describe"]

MISSING: Any = object()
"""Stands for an absent value in messages (``got nothing``)."""

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
        text = str(v)
        return text if len(text) <= 40 else f"{text[:20]}... (an integer of {len(text)} digits)"
    if isinstance(v, float):
        return f"{v!r} (a float)"
    if isinstance(v, str):
        if not v:
            return "an empty string"
        return f"{v[:60]!r}... (a string)" if len(v) > 60 else f"{v!r} (a string)"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        return "a list"
    return f"a {type(v).__name__}"
