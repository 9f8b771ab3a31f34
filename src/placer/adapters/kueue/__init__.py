"""Kueue's own objects to placer's queue model (SPEC §8).
"""
from __future__ import annotations

# The names of the module this package replaced (placer.adapters.kueue), kept where users import them.
from placer.adapters.kueue.objects import (  # noqa: F401
    KueueObjects,
    Source,
    read_kueue,
)

__all__ = ['KueueObjects', 'Source', 'read_kueue']
