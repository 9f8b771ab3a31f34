"""Topology domains of a snapshot: each node's domain path per level, and domain ids.

A domain is named by its whole path (``b1/r07`` is not ``b2/r07``); the node itself is the
innermost level, ``node``. A node without a value for a level is in no domain of it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from placer.model import ClusterSnapshot

__all__ = ["Domains", "Hierarchy"]


class Hierarchy:
    """Domain ids per level for the nodes of a cluster (outermost level first)."""

    def __init__(self, levels: Sequence[str], paths: Sequence[Sequence[str | None]]) -> None:
        self.levels = list(levels)  # topology levels, then "node"
        self.names: list[list[str]] = []
        self.ids: list[np.ndarray] = []  # per level: domain index per node, -1 when none
        for level_paths in paths:
            index: dict[str, int] = {}
            ids = np.full(len(level_paths), -1, dtype=np.int64)
            for n, path in enumerate(level_paths):
                if path is not None:
                    ids[n] = index.setdefault(path, len(index))
            self.names.append(list(index))
            self.ids.append(ids)
        complete = np.ones(len(paths[0]) if paths else 0, dtype=bool)
        for ids in self.ids:
            complete &= ids >= 0
        self.complete = complete  # nodes with a domain at every level
        self._parents: dict[int, np.ndarray] = {}
        self._children: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def parent_of(self, level: int) -> np.ndarray:
        """For each domain of ``level``, its domain at ``level - 1`` (level 0: 0, the root)."""
        found = self._parents.get(level)
        if found is None:
            ids = self.ids[level]
            found = np.zeros(len(self.names[level]), dtype=np.int64)
            if level > 0:
                ok = (ids >= 0) & self.complete
                found[ids[ok]] = self.ids[level - 1][ok]
            self._parents[level] = found
        return found

    def ancestor(self, level: int, at: int) -> np.ndarray:
        """For each domain of ``level``, its domain at the outer level ``at`` (-1: 0, the root)."""
        found = np.zeros(len(self.names[level]), dtype=np.int64)
        if at >= 0:
            found = np.arange(len(self.names[level]))
            for lv in range(level, at, -1):
                found = self.parent_of(lv)[found]
        return found

    def children(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """The domains of ``level`` grouped by parent: ``order[start[p]:start[p + 1]]`` are
        the children of domain ``p`` of ``level - 1``."""
        found = self._children.get(level)
        if found is None:
            parent = self.parent_of(level)
            order = np.argsort(parent, kind="stable")
            n_parents = len(self.names[level - 1]) if level > 0 else 1
            start = np.searchsorted(parent[order], np.arange(n_parents + 1))
            found = self._children[level] = (order, start)
        return found


class Domains:
    """The domains of a snapshot's topology levels, worked out on first use.

    Parameters
    ----------
    snapshot : ClusterSnapshot
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.levels: tuple[str, ...] = (*snapshot.topology_levels, "node")
        self._paths: dict[str, list[str | None]] = {}
        self._hierarchy: Hierarchy | None = None

    def paths(self, level: str) -> list[str | None]:
        """Each node's domain path at ``level`` (``None`` when the node has no such domain)."""
        found = self._paths.get(level)
        if found is not None:
            return found
        if level == "node":
            found = [node.name for node in self.snapshot.nodes]
        else:
            levels = self.snapshot.topology_levels
            upto = levels[: levels.index(level) + 1]
            found = []
            for node in self.snapshot.nodes:
                values = [node.topology.get(lv) for lv in upto]
                found.append(None if any(v is None for v in values) else "/".join(values))  # type: ignore[arg-type]
        self._paths[level] = found
        return found

    def all_paths(self) -> list[list[str | None]]:
        """:meth:`paths` of every level, outermost first, ``node`` last."""
        return [self.paths(level) for level in self.levels]

    def hierarchy(self) -> Hierarchy:
        """Domain ids per level (:class:`Hierarchy`)."""
        if self._hierarchy is None:
            self._hierarchy = Hierarchy(self.levels, self.all_paths())
        return self._hierarchy

    def used(self, nodes: Sequence[int]) -> dict[str, tuple[str, ...]]:
        """The domains ``nodes`` lie in, per level where every node has one, in first use order."""
        out: dict[str, tuple[str, ...]] = {}
        for level in self.levels:
            paths = self.paths(level)
            used = dict.fromkeys(paths[n] for n in nodes)
            if None not in used:
                out[level] = tuple(p for p in used if p is not None)
        return out
