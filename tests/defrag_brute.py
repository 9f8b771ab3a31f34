"""Brute-force "make room by moving" on tiny clusters: the oracle :mod:`placer.preemption.defrag` is
tested against.

Plain loops, no kernel and nothing of :mod:`placer.preemption.defrag` or :mod:`placer.preemption.moves`: a
breadth-first search over every sequence of moves (any movable pod, any node, any GPUs
with room at that point; a pod may move more than once and within its node), level by
level, keeping per state the least GPU milli moved to reach it. The first level at which
the pending pod fits somewhere gives the fewest moves, and the least milli moved among
plans of that many moves. Nodes are alike (one GPU model, no taints); capacities tracked:
GPUs (whole or milli) and CPU. Meant for ≤ 4 nodes of ≤ 4 GPUs and ≤ 5 movable pods.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Iterator, Optional

FULL = 1000

# A pod's position: (node, GPUs it holds). A state: the position of every movable pod.
Position = tuple[int, tuple[int, ...]]


@dataclass(frozen=True)
class TinyPod:
    """A running pod: ``gpus`` whole GPUs, or a share ``milli`` of one GPU (``gpus`` 1)."""

    name: str
    node: int
    held: tuple[int, ...]
    milli: int  # per GPU: 1000 for whole GPUs
    cpu: int
    movable: bool

    @property
    def moved_milli(self) -> int:
        return self.milli * len(self.held)


@dataclass(frozen=True)
class TinyCluster:
    gpus: tuple[int, ...]  # per node
    cpu: tuple[int, ...]  # per node
    pods: tuple[TinyPod, ...]


def _usage(cluster: TinyCluster, state: tuple[Position, ...], skip: Optional[int] = None):
    """Per node: milli used per GPU, whether each GPU is held whole, CPU used."""
    used = [[0] * g for g in cluster.gpus]
    whole = [[False] * g for g in cluster.gpus]
    cpu = [0] * len(cluster.gpus)
    for i, (pod, (node, held)) in enumerate(zip(cluster.pods, state)):
        if i == skip:
            continue
        cpu[node] += pod.cpu
        for g in held:
            used[node][g] += pod.milli
            whole[node][g] = whole[node][g] or pod.milli == FULL
    return used, whole, cpu


def _places(cluster: TinyCluster, state, gpus: int, milli: int, cpu: int, skip: Optional[int] = None) -> Iterator[Position]:
    """Every (node, GPUs) where a pod of ``gpus`` × ``milli`` and ``cpu`` fits."""
    used, whole, cpu_used = _usage(cluster, state, skip)
    for node, count in enumerate(cluster.gpus):
        if cpu_used[node] + cpu > cluster.cpu[node]:
            continue
        if gpus == 0:
            yield node, ()
        elif milli == FULL:
            free = [g for g in range(count) if used[node][g] == 0]
            for chosen in combinations(free, gpus):
                yield node, chosen
        else:
            for g in range(count):
                if not whole[node][g] and used[node][g] + milli <= FULL:
                    yield node, (g,)


def fewest_moves(cluster: TinyCluster, gpus: int, milli: int, cpu: int, max_moves: int) -> Optional[tuple[int, int]]:
    """(moves, GPU milli moved) of the best plan after which the pod fits, or None when no
    plan of at most ``max_moves`` moves exists."""
    start = tuple((p.node, p.held) for p in cluster.pods)
    level = {start: 0}
    seen = {start}
    for moves in range(max_moves + 1):
        fits = [m for s, m in level.items() if next(_places(cluster, s, gpus, milli, cpu), None) is not None]
        if fits:
            return moves, min(fits)
        following: dict = {}
        for state, spent in level.items():
            for i, pod in enumerate(cluster.pods):
                if not pod.movable:
                    continue
                for where in _places(cluster, state, len(pod.held), pod.milli, pod.cpu, skip=i):
                    if where == state[i]:
                        continue
                    nxt = state[:i] + (where,) + state[i + 1 :]
                    if nxt in seen:
                        continue
                    cost = spent + pod.moved_milli
                    if cost < following.get(nxt, cost + 1):
                        following[nxt] = cost
        seen.update(following)
        level = following
        if not level:
            return None
    return None


def snapshot_of(cluster: TinyCluster) -> dict:
    """The cluster as a placer/v1 ClusterSnapshot document."""
    nodes = []
    for n, (gpus, cpu) in enumerate(zip(cluster.gpus, cluster.cpu)):
        pods = []
        for p in cluster.pods:
            if p.node != n:
                continue
            doc = {"name": p.name, "cpuMilli": p.cpu, "movable": p.movable}
            if p.milli == FULL:
                doc["gpus"] = list(p.held)
            else:
                doc["gpuShares"] = {str(p.held[0]): p.milli}
            pods.append(doc)
        nodes.append({"name": f"n{n}", "gpus": gpus, "gpuModel": "T4", "cpuMilli": cpu, "pods": pods})
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": nodes}
