"""The valid layouts of one MIG GPU model, and which of them a GPU's instances still reach.

A **layout** is a set of instances on one GPU, valid by the model's bundled table: each at
one of its profile's starts, none overlapping, at most one media (``+me``) instance, at
most ``maxCount`` of a profile, compute slices within the GPU's. :class:`LayoutTable`
enumerates every layout of a model once (a few thousand on 8-slice GPUs, the empty one
included).

:class:`LayoutReach` answers the look-ahead questions of the MIG start choice. The GPU's
instances now form one of those layouts, ``k``; a **target** is a multiset of profiles (a
count per profile) the GPU may end up holding, and ``k`` still reaches it when the target
contains ``k``'s instances and the rest of the target can be placed on the slices ``k``
leaves free (``placeable[busy, rest]``, precomputed for every busy mask and every multiset
some layout has). :meth:`LayoutReach.pending_values` scores a layout by the slices a
request's pending instances can still take beside it; :meth:`LayoutReach.mix_values` by the
targets a told demand mix makes likely; :attr:`LayoutReach.default_values`, with nothing
known, by how many NVIDIA-valid layouts of the model it reaches, each counted once: the
maximal multisets, and each profile alone as many times as it fits, which is how
``nvidia-mig-parted``'s named ``all-*`` configurations are made.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable

import numpy as np

from placer.model.mig_profiles import MigProfile, MigTable, per_model

__all__ = ["MigLayout", "LayoutTable", "layout_table", "LayoutReach", "layout_reach"]


@dataclass(frozen=True)
class MigLayout:
    """Instances on one GPU: (profile name, start) pairs by start."""

    instances: tuple[tuple[str, int], ...]

    def counts(self) -> dict[str, int]:
        """Instances per profile, in order of first start (``nvidia-mig-parted``'s ``mig-devices``)."""
        out: dict[str, int] = {}
        for name, _ in self.instances:
            out[name] = out.get(name, 0) + 1
        return out

    def to_text(self) -> str:
        """``[3g.40gb@0, 3g.40gb@4]``; ``[]`` for a GPU without instances."""
        return "[" + ", ".join(f"{name}@{start}" for name, start in self.instances) + "]"

    def to_list(self) -> list[dict[str, Any]]:
        return [{"profile": name, "start": start} for name, start in self.instances]


class LayoutTable:
    """Every valid layout of one GPU model, as arrays over layouts.

    Attributes
    ----------
    table : MigTable
    layouts : list of tuple of (int, int)
        Per layout, its instances as (profile index, start), by start.
    counts : ndarray of int64, shape (layouts, profiles)
        Instances of each profile per layout.
    covered, compute : ndarray of int64, shape (layouts,)
        Slices the layout's instances cover, and compute slices they use.
    """

    def __init__(self, table: MigTable) -> None:
        self.table = table
        starting: list[list[MigProfile]] = [[] for _ in range(table.slices)]
        for p in table.profiles:
            for s in p.starts:
                starting[s].append(p)
        found: list[tuple[tuple[int, int], ...]] = []
        counts = [0] * len(table.profiles)

        def extend(slice_: int, chosen: list[tuple[int, int]], media: bool, compute: int) -> None:
            if slice_ >= table.slices:
                found.append(tuple(chosen))
                return
            extend(slice_ + 1, chosen, media, compute)  # slice_ left without an instance
            for p in starting[slice_]:
                if (counts[p.index] >= p.max_count or (p.media and media)
                        or compute + p.compute_slices > table.compute_slices):
                    continue
                counts[p.index] += 1
                chosen.append((p.index, slice_))
                extend(slice_ + p.memory_slices, chosen, media or p.media, compute + p.compute_slices)
                chosen.pop()
                counts[p.index] -= 1

        extend(0, [], False, 0)
        self.layouts = found
        self.counts = np.zeros((len(found), len(table.profiles)), dtype=np.int64)
        self.covered = np.zeros(len(found), dtype=np.int64)
        self.compute = np.zeros(len(found), dtype=np.int64)
        for k, layout in enumerate(found):
            for index, _ in layout:
                p = table.profiles[index]
                self.counts[k, index] += 1
                self.covered[k] += p.memory_slices
                self.compute[k] += p.compute_slices

    def layout(self, k: int) -> MigLayout:
        """Layout ``k`` by profile name."""
        return MigLayout(tuple((self.table.profiles[i].name, s) for i, s in self.layouts[k]))

    def best(self, profile: MigProfile, copies: int, current: np.ndarray, demand: np.ndarray) -> int:
        """The layout holding ``copies`` instances of ``profile`` that ranks first (module notes).

        Parameters
        ----------
        profile : MigProfile
            The pending pod's profile.
        copies : int
            Instances of it the layout must hold for the pod.
        current : ndarray of int, shape (profiles,)
            The GPU's instances per profile now.
        demand : ndarray of int, shape (profiles,)
            Instances per profile the later pending pods ask for.

        Returns
        -------
        int
            The layout's index; -1 when no layout holds ``copies`` of ``profile``.
        """
        ok = np.flatnonzero(self.counts[:, profile.index] >= copies)
        if not len(ok):
            return -1
        counts = self.counts[ok]
        spare = counts.copy()
        spare[:, profile.index] -= copies
        served = np.minimum(spare, demand).sum(axis=1)
        kept = np.minimum(counts, current).sum(axis=1)
        keys = (ok, -self.compute[ok], -counts[:, profile.index], -self.covered[ok], -kept, -served)
        return int(ok[np.lexsort(keys)[0]])


layout_table = per_model(LayoutTable)
"""The (cached) layouts of a GPU model."""

class LayoutReach:
    """Which targets (multisets of profiles) each layout of a GPU model still reaches.

    Attributes
    ----------
    layouts : LayoutTable
    vectors : ndarray of int64, shape (multisets, profiles)
        Every distinct multiset of profiles some layout holds, by code.
    most : ndarray of int64, shape (profiles,)
        The most instances of each profile one layout holds.
    placeable : ndarray of bool, shape (2**slices, multisets)
        Whether multiset ``v`` can be placed on the slices busy mask ``b`` leaves free.
    after : ndarray of int32, shape (layouts + 1, profiles, starts)
        The layout that layout ``k`` becomes with one more instance of profile ``p`` at its
        ``j``-th start, -1 when that is not a valid layout; row -1 (a GPU whose instances
        form no layout of the table) stays -1.
    """

    def __init__(self, table: MigTable) -> None:
        self.table = table
        self.layouts = layouts = layout_table(table)
        counts = layouts.counts
        self._radix = np.array([p.max_count + 1 for p in table.profiles], dtype=np.int64)
        self._place = np.concatenate(([1], np.cumprod(self._radix)[:-1])).astype(np.int64)
        codes = counts @ self._place
        self._codes, vector_of = np.unique(codes, return_inverse=True)
        self.vectors = np.zeros((len(self._codes), len(table.profiles)), dtype=np.int64)
        self.vectors[vector_of] = counts
        self.most = self.vectors.max(axis=0)
        self.layout_vector = vector_of.astype(np.int64)
        self.layout_mask = np.zeros(len(layouts.layouts) + 1, dtype=np.int64)
        self.index: dict[tuple[tuple[int, int], ...], int] = {}
        for k, layout in enumerate(layouts.layouts):
            self.index[layout] = k
            self.layout_mask[k] = sum(table.profiles[i].masks[table.profiles[i].starts.index(s)] for i, s in layout)
        busy = np.arange(1 << table.slices, dtype=np.int64)
        fits = (self.layout_mask[None, :-1] & busy[:, None]) == 0
        self.placeable = np.zeros((len(busy), len(self._codes)), dtype=bool)
        for b in range(len(busy)):
            self.placeable[b, vector_of[fits[b]]] = True
        n_starts = max(len(p.starts) for p in table.profiles)
        self.after = np.full((len(layouts.layouts) + 1, len(table.profiles), n_starts), -1, dtype=np.int32)
        for k, layout in enumerate(layouts.layouts):
            for p in table.profiles:
                for j, s in enumerate(p.starts):
                    found = self.index.get(tuple(sorted((*layout, (p.index, s)), key=lambda x: x[1])))
                    if found is not None:
                        self.after[k, p.index, j] = found

    def state_of(self, instances: Iterable[tuple[int, int]]) -> int:
        """The layout of these (profile index, start) instances, -1 when none of the table."""
        return self.index.get(tuple(sorted(instances, key=lambda x: x[1])), -1)

    def vector_id(self, vectors: np.ndarray) -> np.ndarray:
        """The index in :attr:`vectors` of each row of ``vectors``, -1 where none."""
        codes = vectors @ self._place
        at = np.minimum(np.searchsorted(self._codes, codes), len(self._codes) - 1)
        ok = (self._codes[at] == codes) & (vectors >= 0).all(axis=-1)
        return np.where(ok, at, -1)

    def reach(self, targets: np.ndarray) -> np.ndarray:
        """Whether each layout still reaches each target, shape (layouts + 1, targets); the
        last row (no layout) reaches none."""
        counts = self.layouts.counts
        rest = targets[None, :, :] - counts[:, None, :]
        rest_id = self.vector_id(rest)
        out = np.zeros((len(counts) + 1, len(targets)), dtype=bool)
        ok = rest_id >= 0
        out[:-1] = ok & self.placeable[self.layout_mask[:-1, None], np.maximum(rest_id, 0)]
        return out

    def values(self, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Σ over targets of weight × reached, per layout (the last entry: no layout, 0)."""
        if not len(targets):
            return np.zeros(len(self.layout_mask))
        return self.reach(targets).astype(np.float64) @ weights.astype(np.float64)

    def maximal(self, among: np.ndarray) -> np.ndarray:
        """The rows of ``among`` (multisets) that no other row of it contains."""
        if not len(among):
            return among
        ge: np.ndarray = np.all(among[None, :, :] >= among[:, None, :], axis=2)  # ge[i, j]: j contains i
        np.fill_diagonal(ge, False)
        return among[~np.any(ge, axis=1)]

    @cached_property
    def default_targets(self) -> np.ndarray:
        """Every NVIDIA-valid layout of the model as a multiset: the maximal multisets and,
        for each profile, as many copies of it alone as fit on an empty GPU."""
        alone = []
        for p in self.table.profiles:
            only = self.vectors[(self.vectors.sum(axis=1) == self.vectors[:, p.index])]
            alone.append(only[np.argmax(only[:, p.index])])
        found = np.unique(np.concatenate([self.maximal(self.vectors), np.array(alone)]), axis=0)
        return found

    @cached_property
    def default_values(self) -> np.ndarray:
        """Per layout, how many of :attr:`default_targets` it still reaches."""
        return self.values(self.default_targets, np.ones(len(self.default_targets)))

    def pending_values(self, rest: np.ndarray) -> np.ndarray:
        """Per layout, the most memory slices that instances of ``rest`` (per profile, what a
        request still has to place) can still take beside it: when all of them fit on one
        GPU, only a start that keeps them all placeable scores their every slice, so one is
        always found."""
        within = self.vectors[(self.vectors <= rest).all(axis=1)]
        slices = within @ np.array([p.memory_slices for p in self.table.profiles], dtype=np.int64)
        counts = self.layouts.counts
        valid = self.vector_id(counts[:, None, :] + within[None, :, :]) >= 0
        ok = valid & self.placeable[self.layout_mask[:-1, None], self.vector_id(within)[None, :]]
        out = np.zeros(len(self.layout_mask))
        out[:-1] = np.where(ok, slices[None, :], -1).max(axis=1)
        return out

    def mix_values(self, mix: np.ndarray) -> np.ndarray:
        """Per layout, the probability that a GPU filled by draws from ``mix`` (a weight per
        profile) ends as a layout it still reaches: the targets are the largest layouts of
        the profiles the mix draws, each weighed as a multinomial draw of its instances."""
        mix = np.asarray(mix, dtype=np.float64)
        within = self.vectors[(self.vectors[:, mix <= 0] == 0).all(axis=1)]
        targets = self.maximal(within)
        if not len(targets):
            return np.zeros(len(self.layout_mask))
        share = mix / mix.sum()
        weights = np.array([
            math.factorial(int(t.sum())) / math.prod(math.factorial(int(c)) for c in t)
            * math.prod(float(share[i]) ** int(c) for i, c in enumerate(t) if c)
            for t in targets
        ])
        return self.values(targets, weights / weights.sum())


layout_reach = per_model(LayoutReach)
"""The (cached) look-ahead tables of a GPU model."""
