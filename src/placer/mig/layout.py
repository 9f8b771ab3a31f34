"""Lay out MIG instances on GPUs when a source counts them but does not say where they are.

The device plugin's mixed strategy (``nvidia.com/mig-1g.10gb: 4``), GFD's
``nvidia.com/mig-<profile>.count`` labels and Slurm's typed GRES (``gpu:1g.10gb:4``) say
how many instances of each profile a node has, not on which GPU or at which start. A
snapshot needs both (``migInstances``); :func:`layout_instances` picks them
deterministically and validly: GPU by GPU in index order, each GPU gets the fullest
set of the instances still to place that it can hold (ties: more of the larger profiles),
laid out largest profile first at the lowest valid starts; when the rest no longer fits on
the GPUs left, the search goes back and gives an earlier GPU another set (a depth-first
search over one GPU's possible sets, which remembers the states that failed, so a count
that cannot be laid out is found out quickly). Media (``+me``) instances: one per GPU.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from placer.model.mig_profiles import MigProfile, MigTable

__all__ = ["LaidOut", "layout_instances", "fewest_gpus"]

LaidOut = tuple[int, MigProfile, int]
"""One instance of a layout: (GPU index, profile, start slice)."""


def layout_instances(
    table: MigTable, counts: Mapping[MigProfile, int], gpus: Sequence[int]
) -> list[LaidOut] | None:
    """A valid layout of ``counts[p]`` instances of each profile ``p`` on ``gpus``.

    Parameters
    ----------
    table : MigTable
        The GPUs' MIG table (every profile of ``counts`` is one of its profiles).
    counts : Mapping of MigProfile to int
        How many instances of each profile exist.
    gpus : sequence of int
        The indices of the GPUs in MIG mode, in the order they are filled.

    Returns
    -------
    list of (int, MigProfile, int) or None
        (GPU, profile, start) per instance, ordered by GPU then start; None when the
        instances cannot all be laid out on ``gpus`` without overlap.
    """
    profiles = tuple(sorted((p for p, n in counts.items() if n > 0), key=_largest_first))
    if not profiles:
        return []
    wanted = tuple(counts[p] for p in profiles)
    fillings = _fillings(table, profiles)
    failed: set[tuple[int, tuple[int, ...]]] = set()
    chosen: list[tuple[tuple[int, int], ...]] = []

    def fill(g: int, left: tuple[int, ...]) -> bool:
        if not any(left):
            return True
        slices = sum(n * p.memory_slices for n, p in zip(left, profiles))
        if g == len(gpus) or slices > (len(gpus) - g) * table.slices or (g, left) in failed:
            return False
        for vector, layout in fillings:
            if all(v <= n for v, n in zip(vector, left)):
                chosen.append(layout)
                if fill(g + 1, tuple(n - v for v, n in zip(vector, left))):
                    return True
                chosen.pop()
        failed.add((g, left))
        return False

    if not fill(0, wanted):
        return None
    return [(gpus[g], profiles[k], start) for g, layout in enumerate(chosen) for k, start in layout]


def _largest_first(p: MigProfile) -> tuple[int, int, int]:
    return (-p.memory_slices, -p.compute_slices, p.index)


def _fillings(
    table: MigTable, profiles: tuple[MigProfile, ...]
) -> list[tuple[tuple[int, ...], tuple[tuple[int, int], ...]]]:
    """Every count vector of ``profiles`` one GPU can hold, with the first layout found for
    it (options taken largest profile first, lowest start first), fullest vectors first;
    the empty vector last."""
    options = [(k, start, mask) for k, p in enumerate(profiles) for start, mask in zip(p.starts, p.masks)]
    first: dict[tuple[int, ...], tuple[tuple[int, int], ...]] = {}
    picked: list[tuple[int, int]] = []

    def walk(i: int, busy: int, media: bool) -> None:
        vector = [0] * len(profiles)
        for k, _ in picked:
            vector[k] += 1
        first.setdefault(tuple(vector), tuple(sorted(picked, key=lambda x: x[1])))
        for j in range(i, len(options)):
            k, start, mask = options[j]
            if busy & mask or (media and profiles[k].media):
                continue
            picked.append((k, start))
            walk(j + 1, busy | mask, media or profiles[k].media)
            picked.pop()

    walk(0, 0, False)
    used = {v: sum(n * p.memory_slices for n, p in zip(v, profiles)) for v in first}
    order = sorted(first, key=lambda v: (-used[v], [-n for n in v]))
    return [(v, first[v]) for v in order]


def fewest_gpus(table: MigTable, counts: Mapping[MigProfile, int], most: int) -> int | None:
    """The fewest GPUs (at most ``most``) that ``counts`` can be laid out on, or None.

    Parameters
    ----------
    table : MigTable
        The GPUs' MIG table.
    counts : Mapping of MigProfile to int
        How many instances of each profile exist.
    most : int
        The largest GPU count tried.

    Returns
    -------
    int or None
        0 for no instances.
    """
    slices = sum(p.memory_slices * n for p, n in counts.items())
    least = -(-slices // table.slices)
    for n in range(least, most + 1):
        if layout_instances(table, counts, range(n)) is not None:
            return n
    return None
