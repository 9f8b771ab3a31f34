"""The counting behind a gang's greedy placement over topology levels (rules:
``docs/placement-rules.md``), on arrays alone (no kernel, no binding).

Capacity is counted bottom-up (:func:`domain_capacities`, in whole slices of each level:
:func:`slice_units`); :func:`fewest_inside` gives, per domain, the fewest domains of each
inner level that hold the gang; :func:`choose_counts` divides the gang among the children
of the chosen domain (largest first, the remainder to the child needing fewest children of
its own; or the largest children of all the domains kept, pooled, when that needs fewer).
:mod:`placer.placement.gangs` places and binds with these counts.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from placer.model import GangSpec
from placer.model.domains import Hierarchy

__all__ = [
    "slice_units", "domain_capacities", "UNREACHABLE", "fewest_inside", "allocate", "domain_vector", "pooled_nodes",
    "choose_counts", "candidate_levels",
]


def slice_units(levels: Sequence[str], spec: GangSpec) -> list[int]:
    """Per level (topology levels then node), the multiple of pods each domain must hold."""
    units = [1] * len(levels)
    for sl in spec.slices:
        # a domain of the slice's level, or of any level outside it, holds whole slices
        for j in range(levels.index(sl.level) + 1):
            units[j] = max(units[j], sl.size)
    return units


def domain_capacities(h: Hierarchy, node_cap: np.ndarray, units: Sequence[int]) -> list[np.ndarray]:
    """Capacity of every domain per level, bottom-up, in whole units of that level."""
    caps: list[np.ndarray] = [np.zeros(0)] * len(h.levels)
    node_level = len(h.levels) - 1
    cap = np.where(h.complete, node_cap, 0)
    cap = cap - cap % units[node_level]
    caps[node_level] = cap
    for lv in range(node_level - 1, -1, -1):
        child = caps[lv + 1]
        parent = h.parent_of(lv + 1)
        summed = np.bincount(parent, weights=child, minlength=len(h.names[lv])).astype(np.int64)
        caps[lv] = summed - summed % units[lv]
    return caps


UNREACHABLE = 1 << 40  # fewer domains than this always exist: "cannot hold the pods"


def fewest_inside(h: Hierarchy, caps: list[np.ndarray], at: int, need: int) -> np.ndarray:
    """For each domain of level ``at`` (-1: the root), per level inside it, the fewest of
    that level's domains in it whose capacities sum to ``need``.

    A row per domain of ``at`` and a column per level; columns of ``at`` and outside it
    hold 1, and :data:`UNREACHABLE` marks a level whose domains together fall short.
    Whatever the placement inside a domain, it uses at least this many domains per level.
    """
    groups = 1 if at < 0 else len(h.names[at])
    out = np.ones((groups, len(h.levels)), dtype=np.int64)
    for lv in range(at + 1, len(h.levels)):
        cap = caps[lv]
        owner = h.ancestor(lv, at)
        order = np.lexsort((-cap, owner))
        sorted_cap, sorted_owner = cap[order], owner[order]
        before = np.cumsum(sorted_cap) - sorted_cap  # capacity ahead of each domain, all groups
        first = np.searchsorted(sorted_owner, np.arange(groups))
        offset = np.concatenate(([0], np.cumsum(sorted_cap)))[first]
        short = (before - offset[sorted_owner]) < need
        counted = np.bincount(sorted_owner, weights=short, minlength=groups).astype(np.int64)
        total = np.bincount(owner, weights=cap, minlength=groups)
        out[:, lv] = np.where(total >= need, counted, UNREACHABLE)
    return out


def _fewest_children(h: Hierarchy, caps: list[np.ndarray], level: int, domain: int, need: int) -> int:
    """The fewest children of ``domain`` (of ``level``) whose capacities sum to ``need``."""
    if level == len(h.levels) - 1:
        return 0
    order, start = h.children(level + 1)
    kids = order[start[domain]:start[domain + 1]]
    if level + 1 == len(h.levels) - 1:
        kids = kids[h.complete[kids]]
    reach = np.cumsum(np.sort(caps[level + 1][kids])[::-1])
    return int(np.searchsorted(reach, need)) + 1


def allocate(
    h: Hierarchy, caps: list[np.ndarray], raw: list[np.ndarray], level: int, domain: int, need: int
) -> dict[int, int]:
    """Pods per node for ``need`` pods inside ``domain`` of ``level`` (-1: the root).

    Children are taken largest first; the remainder goes to the child holding it that
    needs the fewest children of its own for it, then the tightest.
    """
    node_level = len(h.levels) - 1
    if level == node_level:
        return {domain: need}
    child_level = level + 1
    if level < 0:
        children = np.arange(len(h.names[0]))
    else:
        order_, start = h.children(child_level)
        children = order_[start[domain]:start[domain + 1]]
        if child_level == node_level:
            children = children[h.complete[children]]
    child_caps = caps[child_level][children]
    child_raw = raw[child_level][children]
    out: dict[int, int] = {}
    left = need
    used: set[int] = set()
    for j in np.lexsort((children, child_raw, -child_caps)).tolist():
        cap = int(child_caps[j])
        if cap <= 0:
            break
        if cap >= left:
            fits = [x for x in np.nonzero(child_caps >= left)[0].tolist() if x not in used]
            best = fits[0] if len(fits) == 1 else min(fits, key=lambda x: (
                _fewest_children(h, caps, child_level, int(children[x]), left),
                child_caps[x], child_raw[x], children[x],
            ))
            _descend(h, caps, raw, child_level, int(children[best]), left, out)
            left = 0
            break
        used.add(j)
        _descend(h, caps, raw, child_level, int(children[j]), cap, out)
        left -= cap
    if left > 0:
        raise AssertionError("allocation below the counted capacity")
    return out


def _descend(
    h: Hierarchy, caps: list[np.ndarray], raw: list[np.ndarray], level: int, domain: int, need: int,
    out: dict[int, int],
) -> None:
    if level == len(h.levels) - 1:
        out[domain] = need
    else:
        out.update(allocate(h, caps, raw, level, domain, need))


def domain_vector(h: Hierarchy, nodes: Sequence[int]) -> tuple[int, ...]:
    """Domains ``nodes`` use per level, outermost first (nodes last)."""
    picked = np.fromiter(nodes, dtype=np.int64)
    return tuple(len(np.unique(ids[picked])) for ids in h.ids)


def pooled_nodes(h: Hierarchy, caps: list[np.ndarray], raw: list[np.ndarray], level: int, domain: int,
                 need: int) -> np.ndarray:
    """The nodes a pooled choice keeps for ``need`` pods inside ``domain`` of ``level``.

    Level by level inward, the fewest domains whose capacities reach ``need`` are kept,
    largest first (then uncapped capacity, then first appearance), among the children of
    the domains kept one level out: the children of all of them compete together.
    """
    kept = np.array([domain]) if level >= 0 else np.zeros(1, dtype=np.int64)
    for lv in range(level + 1, len(h.levels)):
        if lv == level + 1 and level < 0:
            pool = np.arange(len(h.names[0]))
        else:
            order, start = h.children(lv)
            pool = np.concatenate([order[start[p]:start[p + 1]] for p in kept])
        if lv == len(h.levels) - 1:
            pool = pool[h.complete[pool]]
        pool = pool[np.lexsort((pool, raw[lv][pool], -caps[lv][pool]))]
        reach = np.cumsum(caps[lv][pool])
        kept = pool[: int(np.searchsorted(reach, need)) + 1]
    return kept


def choose_counts(h: Hierarchy, node_cap: np.ndarray, units: Sequence[int], caps: list[np.ndarray],
                  raw: list[np.ndarray], level: int, domain: int, need: int,
                  fewest: tuple[int, ...]) -> dict[int, int]:
    """Pods per node for ``need`` pods inside ``domain`` of ``level`` (-1: the root).

    :func:`allocate` decides, unless its domains per level exceed ``fewest`` (the counting
    bound inside the domain): then :func:`allocate` also runs on the nodes of
    :func:`pooled_nodes` alone, and the answer with fewer domains, level by level, wins.
    """
    counts = allocate(h, caps, raw, level, domain, need)
    plain = domain_vector(h, counts)
    if plain == fewest:
        return counts
    keep = np.zeros(len(node_cap), dtype=bool)
    keep[pooled_nodes(h, caps, raw, level, domain, need)] = True
    kept_cap = np.where(keep, node_cap, 0)
    kept_caps = domain_capacities(h, kept_cap, units)
    scope = kept_caps[0].sum() if level < 0 else kept_caps[level][domain]
    if scope < need:  # whole slices no longer fit in the kept nodes
        return counts
    pooled = allocate(h, kept_caps, domain_capacities(h, kept_cap, [1] * len(units)), level, domain, need)
    return pooled if domain_vector(h, pooled) < plain else counts


def candidate_levels(levels: Sequence[str], spec: GangSpec) -> list[int]:
    """Levels to try, innermost first: the gang's level, then (preferred) each enclosing one."""
    if spec.mode == "unconstrained" or spec.level is None:
        return [-1]
    k = levels.index(spec.level)
    if spec.mode == "required":
        return [k]
    return list(range(k, -1, -1)) + [-1]
