"""GPU-set tables of one pair-score matrix, built by the kernel once per set size.

Keyed by :class:`~placer.model.topology.GpuTopology` (its hash is cached and its equality is its
pair scores), so every node kind with the same scores shares one set of tables.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.kernel._core import MAX_TABLE_GPUS, gpu_choice_tables, gpu_choose, gpu_split_table, gpu_subset_scores
from placer.model.topology import GpuTopology

__all__ = ["MAX_TABLE_GPUS", "GpuTables", "tables_for", "choose_gpus", "clear_tables"]


@dataclass(frozen=True)
class GpuTables:
    """Lookup tables of one pair-score matrix and one set size.

    ``tiling[m]`` and ``best_set[m]`` are the chosen GPU masks for free mask ``m`` (0 when
    ``m`` has fewer than ``size`` GPUs); ``split[m]`` is the best split value of ``m``.
    """

    size: int
    pair: np.ndarray
    subset_score: np.ndarray
    split: np.ndarray
    tiling: np.ndarray
    best_set: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held by the size-specific tables (the subset scores are shared)."""
        return self.split.nbytes + self.tiling.nbytes + self.best_set.nbytes


# Keyed by GpuTopology, whose hash is cached and whose equality is its pair scores.
_subset_scores: dict[GpuTopology, np.ndarray] = {}
_tables: dict[tuple[GpuTopology, int], GpuTables] = {}


def tables_for(topology: GpuTopology, size: int) -> GpuTables:
    """The tables of ``topology`` for sets of ``size`` GPUs, built on first use.

    Tables are shared by every topology with the same pair scores.
    """
    found = _tables.get((topology, size))
    if found is not None:
        return found
    if topology.gpus > MAX_TABLE_GPUS:
        raise ValueError(f"tables cover nodes of at most {MAX_TABLE_GPUS} GPUs")
    pair = topology.score_matrix()
    score = _subset_scores.get(topology)
    if score is None:
        score = _subset_scores[topology] = gpu_subset_scores(pair)
    split = gpu_split_table(score, topology.gpus, size)
    tiling, best = gpu_choice_tables(score, split, pair, size)
    for a in (pair, score, split, tiling, best):
        a.flags.writeable = False
    found = _tables[(topology, size)] = GpuTables(size, pair, score, split, tiling, best)
    return found


def choose_gpus(tables: GpuTables, free: int, required: int, objective: int) -> int:
    """The chosen GPU mask among ``free`` that holds ``required`` (objective 0: tiling,
    1: best-set); 0 when no set of the tables' size holds them."""
    return int(gpu_choose(tables.subset_score, tables.split, tables.pair, tables.size, free, required, objective))


def clear_tables() -> None:
    """Forget every table built so far (the next use builds them again)."""
    _tables.clear()
    _subset_scores.clear()
