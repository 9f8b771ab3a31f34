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
from itertools import chain
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from placer.model.domains import Hierarchy
from placer.kernel import KernelSession
from placer.kernel.free import NodeFree
from placer.kernel.holdings import Evicted
from placer.model import ClusterSnapshot, PodDisruptionBudget, PodRequest, RunningPod
from placer.model.ports import any_conflict

__all__ = [
    "Unit", "Candidate", "GangCandidate", "Ranks", "units", "start_of", "room", "eligible", "candidates", "pick",
    "choose", "gang_candidates", "level_domains", "lowest_levels", "fewest_victims", "evict", "KUBE_PRIORITY_OFFSET",
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
    _key: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def victim_pods(self) -> list[RunningPod]:
        return [p for u in self.victims for _, p in u.pods]

    def key(self) -> tuple:
        """kube's pickOneNodeForPreemption keys, smaller first."""
        if self._key is None:
            self._key = self._keys()
        return self._key

    def _keys(self) -> tuple:
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


class _Room:
    """What a node offers a pod while units are taken away and given back: free CPU,
    memory, pod slots, extended resources and per-GPU milli, and the pods holding a host
    port the pod needs (kube's NodePorts: a victim's ports are freed), updated in place."""

    def __init__(self, session: KernelSession, pod: PodRequest, node: int, free: NodeFree) -> None:
        self.pod = pod
        self.port_clashes = len(session.port_holders(pod, node)) if pod.host_ports else 0
        self.cpu = free.cpu_milli
        self.mem = free.memory_mib
        self.slots = free.pods
        self.milli = list(free.gpu_milli)
        self.gpu_mem = list(free.gpu_memory_mib)
        self.extended = {name: session.extended_free(name, node) for name in pod.resources}

    def change(self, gone: Sequence[RunningPod], sign: int) -> None:
        """Take ``gone`` away (``sign`` 1: what they hold is free) or give them back (-1)."""
        for p in gone:
            if p.host_ports and self.pod.host_ports and any_conflict(self.pod.host_ports, p.host_ports):
                self.port_clashes -= sign
            if self.cpu is not None:
                self.cpu += sign * p.cpu_milli
            if self.mem is not None:
                self.mem += sign * p.memory_mib
            if self.slots is not None:
                self.slots += sign
            for name in self.extended:
                self.extended[name] += sign * p.resources.get(name, 0)
            for g in p.gpus:
                self.milli[g] += sign * 1000
            for g, m in p.gpu_shares.items():
                self.milli[g] += sign * m
            for g, m in p.gpu_memory_mib.items():
                if self.gpu_mem[g] is not None:
                    self.gpu_mem[g] += sign * m

    def fits(self) -> bool:
        pod = self.pod
        if self.port_clashes:
            return False
        if self.slots is not None and self.slots < 1:
            return False
        if self.cpu is not None and self.cpu < pod.cpu_milli:
            return False
        if self.mem is not None and self.mem < pod.memory_mib:
            return False
        if any(self.extended[name] < count for name, count in pod.resources.items()):
            return False
        if not pod.gpus:
            return True
        if pod.shared:
            return any(m >= pod.gpu_milli and (mib is None or mib >= pod.gpu_memory_mib)
                       for m, mib in zip(self.milli, self.gpu_mem))
        return sum(1 for m in self.milli if m == 1000) >= pod.gpus


@dataclass
class Running:
    """Every running or bound pod as columns, and the budgets' counts; built once per change
    of who holds what (``KernelSession.held_version``). Eviction units are numbered
    (a running gang is one unit) and made into :class:`Unit` objects only when asked for."""

    pods: list[RunningPod]
    node: np.ndarray  # per pod (the columns below too)
    unit_of: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    gpu_pod: np.ndarray  # one row per GPU a pod holds: the pod, the GPU, the milli it frees
    gpu_index: np.ndarray
    gpu_milli: np.ndarray
    unit_priority: np.ndarray  # per unit
    unit_preemptible: np.ndarray  # per unit: every pod of it may be evicted
    by_unit: np.ndarray  # pods sorted by unit
    unit_start: np.ndarray  # by_unit[unit_start[k]:unit_start[k + 1]] are unit k's pods
    by_node: np.ndarray  # pods sorted by node
    node_start: np.ndarray  # by_node[node_start[n]:node_start[n + 1]] are node n's pods
    budgets: "_Budgets"
    _units: dict[int, Unit] = field(default_factory=dict)

    def unit(self, k: int) -> Unit:
        """Unit ``k`` as a :class:`Unit`."""
        found = self._units.get(k)
        if found is None:
            members = [(int(self.node[i]), self.pods[i])
                       for i in self.by_unit[self.unit_start[k]:self.unit_start[k + 1]].tolist()]
            first = members[0][1]
            found = Unit(members, int(self.unit_priority[k]), min(start_of(p) for _, p in members),
                         first.gang or first.name)
            self._units[k] = found
        return found

    def units_on(self, node: int) -> np.ndarray:
        """The units with a pod on ``node``."""
        return np.unique(self.unit_of[self.by_node[self.node_start[node]:self.node_start[node + 1]]])


def running_view(session: KernelSession, snapshot: ClusterSnapshot) -> Running:
    """The session's :class:`Running` view, cached until the next change of holdings."""
    cached = session.views.get("preemption")
    if cached is not None and cached[0] == session.held_version:
        return cached[1]
    running = list(session.running())
    n_pods = len(running)
    pods = [p for _, p in running]
    node = np.fromiter((n for n, _ in running), dtype=np.int64, count=n_pods)
    gang_names = [p.gang for p in pods]
    if gang_names.count(None) == n_pods:
        unit_of = np.arange(n_pods, dtype=np.int64)
    else:
        first: dict[str, int] = {}
        unit_of = np.fromiter((i if g is None else first.setdefault(g, i) for i, g in enumerate(gang_names)),
                              dtype=np.int64, count=n_pods)
    _, unit_of = np.unique(unit_of, return_inverse=True)
    n_units = int(unit_of.max()) + 1 if n_pods else 0
    priority = np.fromiter((p.priority for p in pods), dtype=np.int64, count=n_pods)
    unit_priority = np.full(n_units, np.iinfo(np.int64).min)
    np.maximum.at(unit_priority, unit_of, priority)
    unit_preemptible = np.ones(n_units, dtype=bool)
    np.logical_and.at(unit_preemptible, unit_of, np.fromiter((p.preemptible for p in pods), dtype=bool, count=n_pods))
    held = np.fromiter((len(p.gpus) for p in pods), dtype=np.int64, count=n_pods)
    shared = np.fromiter((len(p.gpu_shares) for p in pods), dtype=np.int64, count=n_pods)
    gpu_pod = np.concatenate((np.repeat(np.arange(n_pods), held), np.repeat(np.arange(n_pods), shared)))
    gpu_index = np.concatenate((
        np.fromiter(chain.from_iterable(p.gpus for p in pods), dtype=np.int64, count=int(held.sum())),
        np.fromiter(chain.from_iterable(p.gpu_shares for p in pods), dtype=np.int64, count=int(shared.sum())),
    ))
    gpu_milli = np.concatenate((
        np.full(int(held.sum()), 1000, dtype=np.int64),
        np.fromiter(chain.from_iterable(p.gpu_shares.values() for p in pods), dtype=np.int64,
                    count=int(shared.sum())),
    ))
    by_node = np.argsort(node, kind="stable")
    by_unit = np.argsort(unit_of, kind="stable")
    view = Running(
        pods=pods, node=node, unit_of=unit_of,
        cpu=np.fromiter((p.cpu_milli for p in pods), dtype=np.int64, count=n_pods),
        mem=np.fromiter((p.memory_mib for p in pods), dtype=np.int64, count=n_pods),
        gpu_pod=gpu_pod, gpu_index=gpu_index, gpu_milli=gpu_milli,
        unit_priority=unit_priority, unit_preemptible=unit_preemptible,
        by_unit=by_unit, unit_start=np.searchsorted(unit_of[by_unit], np.arange(n_units + 1)),
        by_node=by_node, node_start=np.searchsorted(node[by_node], np.arange(session.n_nodes + 1)),
        budgets=_Budgets.of(snapshot, running),
    )
    session.views["preemption"] = (session.held_version, view)
    return view


def lowest_levels(session: KernelSession, pod: PodRequest, view: Running, evictable: np.ndarray) -> np.ndarray:
    """Per node, the lowest priority ``p`` such that evicting every evictable unit
    (``evictable``: bool per unit) of priority <= ``p`` there lets ``pod`` fit (by CPU,
    memory, pod slots and GPUs), or +inf.

    Any victims that make the pod fit on a node include a unit of at least this priority,
    so it bounds kube's second key from below; counted for every node at once, one pass per
    priority level.
    """
    free = session.free
    n = session.n_nodes
    out = np.full(n, np.inf)
    mine = evictable[view.unit_of]
    at = view.node[mine]
    level = view.unit_priority[view.unit_of][mine]
    cpu, mem = view.cpu[mine], view.mem[mine]
    rows = mine[view.gpu_pod]
    g_node, g_index, g_milli = view.node[view.gpu_pod[rows]], view.gpu_index[rows], view.gpu_milli[rows]
    g_level = view.unit_priority[view.unit_of[view.gpu_pod[rows]]]
    for p in np.unique(level).tolist():
        gone = level <= p
        ok = free.pod_slots.astype(np.int64) + np.bincount(at[gone], minlength=n) >= 1
        if pod.cpu_milli:
            ok &= free.cpu_milli + np.bincount(at[gone], weights=cpu[gone], minlength=n).astype(np.int64) >= pod.cpu_milli
        if pod.memory_mib:
            ok &= free.memory_mib + np.bincount(at[gone], weights=mem[gone], minlength=n).astype(np.int64) >= pod.memory_mib
        if pod.gpus:
            milli = free.gpu_milli.astype(np.int64).copy()
            sel = g_level <= p
            np.add.at(milli, (g_node[sel], g_index[sel]), g_milli[sel])
            if pod.shared:
                ok &= (milli >= pod.gpu_milli).any(axis=1)
            else:
                ok &= (milli == 1000).sum(axis=1) >= pod.gpus
        out[ok & np.isinf(out)] = p
    return out


def fewest_victims(session: KernelSession, pod: PodRequest, view: Running, evictable: np.ndarray) -> np.ndarray:
    """Per node, a lower bound on the victims (pods) any eviction that fits a whole-GPU
    ``pod`` there needs: the fewest evictable pods whose whole GPUs, with the free ones,
    reach its GPU count (shares never free a whole GPU alone, so they are left out). Zeros
    for a pod without whole GPUs."""
    n = session.n_nodes
    out = np.zeros(n, dtype=np.int64)
    if not pod.gpus or pod.shared:
        return out
    short = pod.gpus - session.free.whole_gpus.astype(np.int64)
    whole = view.gpu_milli == 1000
    rows = whole & evictable[view.unit_of[view.gpu_pod]]
    holder = view.gpu_pod[rows]
    sizes = np.bincount(holder, minlength=len(view.node))  # whole GPUs per evictable pod
    pods = np.flatnonzero(sizes)
    at = view.node[pods]
    order = np.lexsort((-sizes[pods], at))
    at, size = at[order], sizes[pods][order]
    starts = np.searchsorted(at, np.arange(n))
    running = np.cumsum(size) - np.concatenate(([0], np.cumsum(size)))[starts[at]]
    rank = np.arange(len(at)) - starts[at] + 1  # 1 for a node's largest pod
    need = np.where(running >= short[at], rank, np.iinfo(np.int64).max)
    best = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(best, at, need)
    out = np.where(short > 0, best, 0)
    return out


def _victims_on(node: int, movable: list[Unit], room: _Room, budgets: "_Budgets") -> Candidate | None:
    """kube's SelectVictimsOnNode: with every unit of ``movable`` gone the pod must fit;
    then units come back most important first, PDB-violating ones first, while it fits."""
    movable = sorted(movable, key=_important_first)
    for unit in movable:
        room.change(unit.on(node), 1)
    if not room.fits():
        return None
    violating, fine = budgets.split(movable)
    victims: list[Unit] = []
    violations = 0
    for unit in violating:
        room.change(unit.on(node), -1)
        if not room.fits():
            room.change(unit.on(node), 1)
            victims.append(unit)
            violations += 1
    for unit in fine:
        room.change(unit.on(node), -1)
        if not room.fits():
            room.change(unit.on(node), 1)
            victims.append(unit)
    if violating and fine:
        victims.sort(key=_important_first)
    return Candidate(node, victims, violations)


def candidates(
    session: KernelSession, snapshot: ClusterSnapshot, pod: PodRequest, allowed: np.ndarray | None = None,
    prune: bool = False,
) -> list[Candidate]:
    """Every node where ``pod`` fits after evicting lower-priority units, with kube's
    victims there (SelectVictimsOnNode), in node order. ``allowed``: a bool mask of the
    nodes to consider (default: those the pod's static filters allow).

    ``prune``: only what :func:`pick` needs. Nodes are visited by the bound of
    :func:`lowest_levels`; once a candidate without PDB violations is found, nodes whose
    bound exceeds its highest victim priority cannot rank first and are skipped.
    """
    view = running_view(session, snapshot)
    if allowed is None:
        allowed, _ = session.eligibility(pod)
        if pod.gpus and not pod.shared:
            allowed = allowed & (session.free.gpu_memory_capacity >= pod.gpu_memory_mib)
    evictable = (view.unit_priority < pod.priority) & view.unit_preemptible
    low = int(view.unit_priority[evictable].min()) if evictable.any() else 0
    has = np.zeros(session.n_nodes, dtype=bool)
    has[view.node[evictable[view.unit_of]]] = True
    has &= allowed
    bound = None
    fewest = None
    if prune:
        bound = lowest_levels(session, pod, view, evictable)
        fewest = fewest_victims(session, pod, view, evictable)
        has &= np.isfinite(bound)
        at = np.flatnonzero(has)
        visit = at[np.lexsort((at, fewest[at], bound[at]))].tolist()
    else:
        visit = np.flatnonzero(has).tolist()
    out: list[Candidate] = []
    best: tuple | None = None
    for node in visit:
        if bound is not None and fewest is not None and best is not None and best[0] == 0:
            # kube's keys from (PDB violations, highest priority, sum of priority + 2**31):
            # the sum is at least the fewest victims times the least such term
            least = (fewest[node], bound[node])
            if least[1] > best[1] or (least[1] == best[1] and least[0] * (KUBE_PRIORITY_OFFSET + low) > best[2]):
                if least[1] > best[1]:
                    break
                continue
        movable = [view.unit(k) for k in view.units_on(node).tolist() if evictable[k]]
        found = _victims_on(node, movable, _Room(session, pod, node, session.node_free(node)), view.budgets)
        if found is None:
            continue
        out.append(found)
        key = found.key()
        if best is None or key < best:
            best = key
    return sorted(out, key=lambda c: c.node)


def pick(found: Sequence[Candidate]) -> Candidate | None:
    """The candidate kube's keys rank first (None when there is none)."""
    return min(found, key=Candidate.key, default=None)


def choose(session: KernelSession, snapshot: ClusterSnapshot, pod: PodRequest) -> tuple[Candidate | None, str]:
    """The node and victims for ``pod``, or None with why not."""
    # the pods running are read only for a nominated node's (session.running() builds them all)
    why = eligible(pod, session.running() if pod.nominated_node is not None else (), session.node_index)
    if why:
        return None, why
    best = pick(candidates(session, snapshot, pod, prune=True))
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


def level_domains(h: Hierarchy, level: int, n_nodes: int) -> tuple[np.ndarray, int, np.ndarray]:
    """Per node its domain of ``level`` (-1: the whole cluster, one domain), the number of
    domains, and which nodes lie in one."""
    if level < 0:
        return np.zeros(n_nodes, dtype=np.int64), 1, np.ones(n_nodes, dtype=bool)
    domain_of = h.ids[level]
    return domain_of, len(h.names[level]), (domain_of >= 0) & h.complete


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
    domain_of, n_domains, inside = level_domains(h, level, n)
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
