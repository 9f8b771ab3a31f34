"""Saying what is wrong: the independent placement check, why work is pending, what a
cluster can still run, zombie GPUs, and one node's topology.
"""
from __future__ import annotations

# The names of the module this package replaced (placer.diagnostics), kept where users import them.
from placer.diagnostics.check import (  # noqa: F401
    check_placement,
)

__all__ = ['check_placement']
