"""The order in which a request's pods are placed: by priority, or found by a joint search.

A *unit* is what is placed in one go: a pod of no gang, or a whole gang (its pods in
request order). Rules: ``docs/placement-rules.md``, "Order".
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

from placer.kernel.pack import any_prioritized
from placer.model import PodRequest

__all__ = ["by_priority", "units", "priority_score", "search_order"]

Unit = list[PodRequest]

MAX_ORDERS = 200
"""At most this many orders are tried by :func:`search_order`."""


def units(pods: Sequence[PodRequest]) -> list[Unit]:
    """The pods as units, in order: a gang at the position of its first pod."""
    out: list[Unit] = []
    gang_unit: dict[str, Unit] = {}
    for pod in pods:
        if pod.gang is None:
            out.append([pod])
        elif pod.gang in gang_unit:
            gang_unit[pod.gang].append(pod)
        else:
            gang_unit[pod.gang] = [pod]
            out.append(gang_unit[pod.gang])
    return out


def _priority(unit: Unit) -> int:
    return max(pod.priority for pod in unit)


def by_priority(pods: Sequence[PodRequest]) -> Sequence[PodRequest]:
    """The pods in placement order: by priority, highest first, then request order.

    A gang goes as one, with the highest priority among its pods, at the position of its
    first pod; without priorities the order is the request's.
    """
    if not any_prioritized(pods):
        return pods
    ranked = sorted(units(pods), key=_priority, reverse=True)  # stable: ties keep request order
    return [pod for unit in ranked for pod in unit]


def priority_score(pods: Sequence[PodRequest], placed: set[str]) -> tuple[int, ...]:
    """Placed pods per priority, highest priority first: compared as tuples, more placed
    pods of a higher priority beat any number of a lower one."""
    levels = sorted({pod.priority for pod in pods}, reverse=True)
    return tuple(sum(1 for pod in pods if pod.priority == level and pod.name in placed) for level in levels)


def search_order(
    start: list[Unit], placed_by: Callable[[list[Unit]], set[str]], deadline: float,
    max_orders: int = MAX_ORDERS,
) -> list[Unit]:
    """An order of ``start``'s units that places at least as many priority-weighted pods.

    ``placed_by(order)`` places the units in that order (and takes them back) and returns
    the names of the pods placed. Starting from ``start``, a unit that is not placed is
    moved earlier, to the first position (then the next ones) where that raises
    :func:`priority_score`; this repeats until no move helps, ``max_orders`` orders have
    been tried, or ``time.perf_counter()`` passes ``deadline``.
    """
    pods = [pod for unit in start for pod in unit]
    best = list(start)
    best_placed = placed_by(best)
    best_score = priority_score(pods, best_placed)
    tried = 1
    improved = True
    while improved:
        improved = False
        for i, unit in enumerate(best):
            if all(pod.name in best_placed for pod in unit):
                continue
            for j in range(i):
                if tried >= max_orders or time.perf_counter() > deadline:
                    return best
                order = best[:j] + [unit] + best[j:i] + best[i + 1:]
                placed = placed_by(order)
                tried += 1
                score = priority_score(pods, placed)
                if score > best_score:
                    best, best_placed, best_score = order, placed, score
                    improved = True
                    break
            if improved:
                break
    return best
