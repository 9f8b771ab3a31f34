"""Preemption: which running pods to evict so that a pending pod fits (rules:
``docs/placement-rules.md``, "Preemption").

For one pod, kube-scheduler's DefaultPreemption, on every node rather than a sample: on
each node that the pod's static filters allow, remove every unit of lower priority; if the
pod then fits, give units back (reprieve) most important first — those whose eviction
would break a PodDisruptionBudget before the others — keeping each that still lets the
pod fit. The node is then chosen by kube's keys: fewest PDB violations, lowest highest
victim priority, smallest sum of victim priorities, fewest victims, latest start of the
highest-priority victims, lowest node index.

A *unit* is what is evicted together: one pod, or every pod of a running gang (``gang`` on
running pods), wherever they run. A unit is a candidate only when all its pods are
preemptible and of lower priority than the preemptor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from placer.domains import Hierarchy
from placer.kernel import KernelSession
from placer.kernel.session import Evicted, NodeFree
from placer.model import ClusterSnapshot, PodDisruptionBudget, PodRequest, RunningPod

__all__ = [
    "Unit", "Candidate", "GangCandidate", "Ranks", "units", "start_of", "room", "eligible", "candidates", "pick",
    "choose", "gang_candidates", "evict", "KUBE_PRIORITY_OFFSET",
]

KUBE_PRIORITY_OFFSET = 2**31  # kube sums priority + MaxInt32 + 1, so every term is positive
_NOW = math.inf  # a pod without a start time started "now": the newest of all


@dataclass
class Unit:
    """Pods evicted together: one pod, or a running gang (all of its pods, every node)."""

    pods: list[tuple[int, RunningPod]]  # (node, pod)
    priority: int
    start: float  # the earliest start of its pods (inf: unknown, read as now)
    name: str

    @property
    def names(self) -> list[str]:
        return [p.name for _, p in self.pods]

    def on(self, node: int) -> list[RunningPod]:
        """Its pods on ``node``."""
        return [p for n, p in self.pods if n == node]


@dataclass
class Candidate:
    """A node where the pod fits once ``victims`` (units, most important first) are gone."""

    node: int
    victims: list[Unit]
    pdb_violations: int

    @property
    def victim_pods(self) -> list[RunningPod]:
        return [p for u in self.victims for _, p in u.pods]

    def key(self) -> tuple:
        """kube's pickOneNodeForPreemption keys, smaller first."""
        pods = self.victim_pods
        if not pods:
            return (self.pdb_violations, -math.inf, 0, 0, 0.0, self.node)
        highest = max(p.priority for p in pods)
        earliest = min(start_of(p) for p in pods if p.priority == highest)
        return (
            self.pdb_violations,
            highest,
            sum(p.priority + KUBE_PRIORITY_OFFSET for p in pods),
            len(pods),
            -earliest,
            self.node,
        )


def start_of(pod: RunningPod) -> float:
    """A pod's start in epoch seconds; inf when unknown (kube reads it as now: the newest)."""
    started = pod.started_at
    return _NOW if started is None else started


def _important_first(unit: Unit) -> tuple:
    """kube's MoreImportantPod: higher priority first, then the earlier start."""
    return (-unit.priority, unit.start, unit.name)


def units(running: Iterable[tuple[int, RunningPod]]) -> list[Unit]:
    """The running pods as eviction units (a running gang is one unit)."""
    by_gang: dict[str, Unit] = {}
    out: list[Unit] = []
    for node, pod in running:
        if pod.gang is not None and pod.gang in by_gang:
            unit = by_gang[pod.gang]
            unit.pods.append((node, pod))
            unit.priority = max(unit.priority, pod.priority)
            unit.start = min(unit.start, start_of(pod))
            continue
        unit = Unit([(node, pod)], pod.priority, start_of(pod), pod.gang or pod.name)
        if pod.gang is not None:
            by_gang[pod.gang] = unit
        out.append(unit)
    return out


def eligible(pod: PodRequest, running: Iterable[tuple[int, RunningPod]], node_index: Mapping[str, int]) -> str:
    """Why ``pod`` may not preempt ("" when it may): kube's PodEligibleToPreemptOthers."""
    if pod.preemption_policy == "Never":
        return "not eligible due to preemptionPolicy=Never."
    if pod.nominated_node is not None:
        nominated = node_index.get(pod.nominated_node)
        for node, p in running:
            if (node == nominated and p.priority < pod.priority and p.terminating
                    and p.disruption_target == "PreemptionByScheduler"):
                return "not eligible due to a terminating pod on the nominated node."
    return ""


@dataclass
class _Budgets:
    """What each PodDisruptionBudget still allows, counted as kube does."""

    budgets: Sequence[PodDisruptionBudget]
    allowed: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, running: Sequence[tuple[int, RunningPod]]) -> "_Budgets":
        budgets = snapshot.pod_disruption_budgets
        allowed = [b.allowed(sum(1 for _, p in running if b.matches(p))) for b in budgets]
        return cls(budgets, allowed)

    def split(self, victims: Sequence[Unit]) -> tuple[list[Unit], list[Unit]]:
        """kube's filterPodsWithPDBViolation over units in order: (violating, not violating)."""
        left = list(self.allowed)
        violating: list[Unit] = []
        fine: list[Unit] = []
        for unit in victims:
            broken = False
            for _, pod in unit.pods:
                if not pod.labels:
                    continue
                for i, b in enumerate(self.budgets):
                    if not b.matches(pod) or pod.name in b.disrupted_pods:
                        continue
                    left[i] -= 1
                    if left[i] < 0:
                        broken = True
            (violating if broken else fine).append(unit)
        return violating, fine


class _Fit:
    """Does a pod fit on a node once some pods are gone: the kernel's free state plus what
    the removed pods hold."""

    def __init__(self, session: KernelSession, pod: PodRequest) -> None:
        self.session = session
        self.pod = pod

    def __call__(self, node: int, free: NodeFree, gone: Sequence[RunningPod]) -> bool:
        pod = self.pod
        if free.pods is not None and free.pods + len(gone) < 1:
            return False
        if free.cpu_milli is not None and free.cpu_milli + sum(p.cpu_milli for p in gone) < pod.cpu_milli:
            return False
        if free.memory_mib is not None and free.memory_mib + sum(p.memory_mib for p in gone) < pod.memory_mib:
            return False
        for name, count in pod.resources.items():
            if self.session.extended_free(name, node) + sum(p.resources.get(name, 0) for p in gone) < count:
                return False
        if not pod.gpus:
            return True
        milli = list(free.gpu_milli)
        memory = list(free.gpu_memory_mib)
        for p in gone:
            for g in p.gpus:
                milli[g] = 1000
            for g, m in p.gpu_shares.items():
                milli[g] += m
            for g, m in p.gpu_memory_mib.items():
                if memory[g] is not None:
                    memory[g] += m
        if pod.shared:
            return any(
                milli[g] >= pod.gpu_milli and (memory[g] is None or memory[g] >= pod.gpu_memory_mib)
                for g in range(len(milli))
            )
        return sum(1 for m in milli if m == 1000) >= pod.gpus


def candidates(
    session: KernelSession, snapshot: ClusterSnapshot, pod: PodRequest, allowed: np.ndarray | None = None
) -> list[Candidate]:
    """Every node where ``pod`` fits after evicting lower-priority units, with kube's
    victims there (SelectVictimsOnNode), in node order. ``allowed``: a bool mask of the
    nodes to consider (default: those the pod's static filters allow)."""
    running = list(session.running())
    all_units = units(running)
    if allowed is None:
        allowed, _ = session.eligibility(pod)
        if pod.gpus and not pod.shared:
            allowed = allowed & (session.free.gpu_memory_capacity >= pod.gpu_memory_mib)
    evictable = [u for u in all_units if u.priority < pod.priority and all(p.preemptible for _, p in u.pods)]
    on_node: dict[int, list[Unit]] = {}
    for unit in evictable:
        for node in {n for n, _ in unit.pods}:
            if allowed[node]:
                on_node.setdefault(node, []).append(unit)
    budgets = _Budgets.of(snapshot, running)
    fit = _Fit(session, pod)
    out: list[Candidate] = []
    for node in sorted(on_node):
        free = session.node_free(node)
        movable = sorted(on_node[node], key=_important_first)
        if not fit(node, free, [p for u in movable for p in u.on(node)]):
            continue
        violating, fine = budgets.split(movable)
        kept: set[int] = set()  # ids of the units given back
        victims: list[Unit] = []
        violations = 0

        def gone() -> list[RunningPod]:
            return [p for u in movable if id(u) not in kept for p in u.on(node)]

        for unit in violating:
            kept.add(id(unit))
            if not fit(node, free, gone()):
                kept.discard(id(unit))
                victims.append(unit)
                violations += 1
        for unit in fine:
            kept.add(id(unit))
            if not fit(node, free, gone()):
                kept.discard(id(unit))
                victims.append(unit)
        if violating and fine:
            victims.sort(key=_important_first)
        out.append(Candidate(node, victims, violations))
    return out


def pick(found: Sequence[Candidate]) -> Candidate | None:
    """The candidate kube's keys rank first (None when there is none)."""
    return min(found, key=Candidate.key, default=None)


def choose(session: KernelSession, snapshot: ClusterSnapshot, pod: PodRequest) -> tuple[Candidate | None, str]:
    """The node and victims for ``pod``, or None with why not."""
    why = eligible(pod, session.running(), session.node_index)
    if why:
        return None, why
    best = pick(candidates(session, snapshot, pod))
    if best is None:
        return None, "preemption: no node fits the pod even with every pod of lower priority evicted"
    return best, ""


def evict(session: KernelSession, victims: Sequence[Unit]) -> list[Evicted]:
    """Evict every pod of ``victims`` (all or nothing); returns what restores them."""
    done: list[Evicted] = []
    for unit in victims:
        for _, pod in unit.pods:
            done.append(session.evict(pod.name))
    return done


# ----------------------------------------------------------------------------- gangs


@dataclass
class Ranks:
    """The lexicographic objective of a set of victims (``docs/placement-rules.md``):
    PDB overdraft, highest victim priority, sum of victim priority ranks, victims, then
    the newest first (sum of age ranks, 0 for the newest start)."""

    priority_rank: dict[int, int]
    age_rank: dict[float, int]
    budgets: Sequence[PodDisruptionBudget]
    allowed: list[int]

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, running: Sequence[tuple[int, RunningPod]], evictable: Sequence[Unit]
           ) -> "Ranks":
        pods = [p for u in evictable for _, p in u.pods]
        priorities = sorted({p.priority for p in pods})
        starts = sorted({start_of(p) for p in pods}, reverse=True)
        budgets = _Budgets.of(snapshot, running)
        return cls({v: i for i, v in enumerate(priorities)}, {v: i for i, v in enumerate(starts)},
                   budgets.budgets, budgets.allowed)

    def overdraft(self, pods: Sequence[RunningPod]) -> int:
        """Evictions beyond what the budgets allow, summed over budgets."""
        total = 0
        for b, allowed in zip(self.budgets, self.allowed):
            hit = sum(1 for p in pods if b.matches(p) and p.name not in b.disrupted_pods)
            total += max(hit - allowed, 0)
        return total

    def key(self, victims: Sequence[Unit]) -> tuple[int, int, int, int, int]:
        """(overdraft, highest priority rank + 1 (0: no victim), Σ ranks, victims, Σ age ranks)."""
        pods = [p for u in victims for _, p in u.pods]
        if not pods:
            return (0, 0, 0, 0, 0)
        return (
            self.overdraft(pods),
            max(self.priority_rank[p.priority] for p in pods) + 1,
            sum(self.priority_rank[p.priority] for p in pods),
            len(pods),
            sum(self.age_rank[start_of(p)] for p in pods),
        )


def room(fit_pod: PodRequest, free: NodeFree, gone: Sequence[RunningPod], limit: int) -> int:
    """How many pods like ``fit_pod`` fit on a node (free state ``free``) once ``gone`` are
    gone, at most ``limit``."""
    count = limit
    if free.pods is not None:
        count = min(count, free.pods + len(gone))
    if fit_pod.cpu_milli and free.cpu_milli is not None:
        count = min(count, (free.cpu_milli + sum(p.cpu_milli for p in gone)) // fit_pod.cpu_milli)
    if fit_pod.memory_mib and free.memory_mib is not None:
        count = min(count, (free.memory_mib + sum(p.memory_mib for p in gone)) // fit_pod.memory_mib)
    if fit_pod.gpus:
        milli = list(free.gpu_milli)
        memory = list(free.gpu_memory_mib)
        for p in gone:
            for g in p.gpus:
                milli[g] = 1000
            for g, m in p.gpu_shares.items():
                milli[g] += m
            for g, m in p.gpu_memory_mib.items():
                if memory[g] is not None:
                    memory[g] += m
        if fit_pod.shared:
            per_gpu = [
                min(m // fit_pod.gpu_milli, mem // fit_pod.gpu_memory_mib if mem is not None and fit_pod.gpu_memory_mib
                    else limit)
                for m, mem in zip(milli, memory)
            ]
            count = min(count, sum(per_gpu))
        else:
            count = min(count, sum(1 for m in milli if m == 1000) // fit_pod.gpus)
    return max(count, 0)


@dataclass
class GangCandidate:
    """A domain where the gang fits once ``victims`` are gone (by count of each shape)."""

    domain: int  # index at the gang's level (-1: the whole cluster)
    nodes: np.ndarray  # bool per node: the domain
    victims: list[Unit]
    key: tuple


def gang_candidates(
    session: KernelSession,
    snapshot: ClusterSnapshot,
    h: "Hierarchy",
    pods: Sequence[PodRequest],
    level: int,
    shapes: Sequence[tuple[PodRequest, int, np.ndarray]],
) -> tuple[list[GangCandidate], Ranks, list[Unit]]:
    """Domains of ``level`` (-1: the whole cluster) where the gang fits once lower-priority
    units are evicted, with greedy victims there (kube's reprieve, PDB-violating units
    first), best first by :class:`Ranks`. ``shapes``: (pod, count, allowed nodes) per shape.

    Victims lie inside the domain: a unit with a pod outside it (a running gang that spans
    domains) is not evicted for it. Domains that cannot hold the gang even with every
    evictable unit gone are pruned first.
    """
    priority = max(p.priority for p in pods)
    running = list(session.running())
    evictable = [u for u in units(running) if u.priority < priority and all(p.preemptible for _, p in u.pods)]
    ranks = Ranks.of(snapshot, running, evictable)
    budgets = _Budgets.of(snapshot, running)
    n = session.n_nodes
    on_node: dict[int, list[Unit]] = {}
    for unit in evictable:
        for node in {m for m, _ in unit.pods}:
            on_node.setdefault(node, []).append(unit)
    free = {node: session.node_free(node) for node in range(n)}
    total = len(pods)

    def rooms(node: int, gone: Sequence[RunningPod]) -> list[int]:
        return [room(pod, free[node], gone, total) if allowed[node] else 0 for pod, _, allowed in shapes]

    everything = np.array([rooms(node, [p for u in on_node.get(node, ()) for p in u.on(node)])
                           for node in range(n)], dtype=np.int64).reshape(n, len(shapes))
    if level < 0:
        domain_of = np.zeros(n, dtype=np.int64)
        n_domains = 1
        inside = np.ones(n, dtype=bool)
    else:
        domain_of = h.ids[level]
        n_domains = len(h.names[level])
        inside = (domain_of >= 0) & h.complete
    out: list[GangCandidate] = []
    for d in range(n_domains):
        nodes = inside & (domain_of == d)
        counts = everything[nodes].sum(axis=0)
        if any(counts[k] < count for k, (_, count, _) in enumerate(shapes)):
            continue  # pruned: not even with every evictable unit gone
        members = sorted({id(u): u for node in np.flatnonzero(nodes).tolist() for u in on_node.get(node, ())}.values(),
                         key=_important_first)
        kept: set[int] = {id(u) for u in members if not all(nodes[m] for m, _ in u.pods)}  # never evicted here
        members = [u for u in members if id(u) not in kept]
        current = everything.copy()
        if kept:
            for m in {m for u in members for m, _ in u.pods} | {
                m for node in np.flatnonzero(nodes).tolist() for u in on_node.get(node, ()) if id(u) in kept
                for m, _ in u.pods if nodes[m]
            }:
                current[m] = rooms(m, [p for u in on_node.get(m, ()) if id(u) not in kept for p in u.on(m)])
            if any(current[nodes].sum(axis=0)[k] < count for k, (_, count, _) in enumerate(shapes)):
                continue
        victims: list[Unit] = []
        violating, fine = budgets.split(members)

        def fits_without(unit: Unit) -> bool:
            touched = sorted({m for m, _ in unit.pods if nodes[m]})
            trial = {m: rooms(m, [p for u in on_node.get(m, ()) if id(u) not in kept and u is not unit
                                  for p in u.on(m)]) for m in touched}
            counts = current[nodes].sum(axis=0)
            for m, r in trial.items():
                counts = counts - current[m] + np.array(r)
            if any(counts[k] < count for k, (_, count, _) in enumerate(shapes)):
                return False
            for m, r in trial.items():
                current[m] = r
            return True

        for unit in [*violating, *fine]:
            if fits_without(unit):
                kept.add(id(unit))
            else:
                victims.append(unit)
        victims.sort(key=_important_first)
        out.append(GangCandidate(d, nodes, victims, ranks.key(victims)))
    out.sort(key=lambda c: (c.key, c.domain))
    return out, ranks, evictable
