"""Placing runs of pods in a kernel session: the kernel's batches, its GPU-set tables and
score cache, and why nodes turn a pod away.

:class:`BatchPlacer` is behind :class:`~placer.kernel.KernelSession`'s ``place``,
``place_on``, ``node_scores`` and ``node_reasons``; :class:`Run` is what a run gives back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Sequence

import numpy as np

from placer.kernel import pack
from placer.kernel._core import Kernel, PodBatch, Relations
from placer.kernel.free import FreeState, extended_free
from placer.kernel.guides import Guides
from placer.kernel.pack import EligibilityClass, PackedCluster
from placer.kernel.relations import REASON_CODES, Occupants, compile_relations
from placer.kernel.tables import MAX_TABLE_GPUS, tables_for
from placer.model import PodRequest, reasons
from placer.model.fit import short_of
from placer.policies import Policy
from placer.workload.packing import Demand

__all__ = ["BatchPlacer", "Run"]

_SCORE_CACHE_CELLS = 1 << 24  # (shape, node) scores kept per batch, at most
_COUNTED_REASONS = reasons.RESOURCE_REASONS + reasons.RELATIONAL_REASONS  # the kernel's counters in order


@dataclass(frozen=True)
class Run:
    """The outcome of one run of pods: node (-1: not placed), GPU and NIC masks per pod.

    For a pod of a failed group, ``failed_at`` is the index of the pod that found no node
    and :meth:`reasons` counts, per reason, the nodes that turned that pod away.
    """

    nodes: list[int]
    masks: list[int]
    nics: list[int]
    failed_at: list[int]
    _counts: np.ndarray
    _classes: list[EligibilityClass]
    _klass: np.ndarray
    _only: np.ndarray | None
    _n_nodes: int
    _ports_blocked: np.ndarray | None = None  # bool per node: NodePorts turned the (one) pod away
    _more_shortfalls: dict[int, dict[str, int]] = field(default_factory=dict)  # by failed_at index

    def reason_key(self, k: int) -> tuple[int, bytes, tuple[tuple[str, int], ...]]:
        """Equal for pods that :meth:`reasons` counts alike (same class, same counts)."""
        return int(self._klass[k]), self._counts[k].tobytes(), tuple(sorted(self._more_shortfalls.get(k, {}).items()))

    def reasons(self, k: int) -> dict[str, int]:
        """Nodes per reason that turned pod ``k`` (a ``failed_at`` index) away."""
        ec = self._classes[int(self._klass[k])]
        if self._only is None:
            merged = dict(ec.static_reasons)
        else:
            inside = np.unpackbits(self._only.view(np.uint8), bitorder="little")[: self._n_nodes].astype(bool)
            merged = ec.reasons_among(inside)
        if self._ports_blocked is not None:
            _count_ports(ec, self._ports_blocked, merged)
        for name, count in zip(_COUNTED_REASONS, self._counts[k].tolist()):
            if count:
                merged[name] = merged.get(name, 0) + count
        for name, count in self._more_shortfalls.get(k, {}).items():
            merged[name] = merged.get(name, 0) + count
        return merged


def _ports_first(ec: EligibilityClass, blocked: np.ndarray) -> np.ndarray:
    """The nodes of ``blocked`` that NodePorts turns away: those the static filters pass,
    and those they turn away for a resource (kube's NodeResourcesFit comes after NodePorts)."""
    passing = ec.reason_of < 0
    for code, name in enumerate(ec.reason_names):
        if reasons.is_resource_reason(name):
            passing |= ec.reason_of == code
    return blocked & passing


def _count_ports(ec: EligibilityClass, blocked: np.ndarray, merged: dict[str, int]) -> None:
    """Count NodePorts' nodes in ``merged`` (static reasons of the nodes ``blocked`` is among),
    taking them out of the resource reasons they were counted under."""
    turned = _ports_first(ec, blocked)
    if not turned.any():
        return
    merged[reasons.PORTS] = int(np.count_nonzero(turned))
    codes = ec.reason_of[turned]
    for code, count in zip(*np.unique(codes[codes >= 0], return_counts=True)):
        name = ec.reason_names[int(code)]
        merged[name] -= int(count)
        if not merged[name]:
            del merged[name]


class BatchPlacer:
    """Runs of pods through one session's kernel.

    Parameters
    ----------
    packed : PackedCluster
    kernel : Kernel
        The kernel over ``packed``'s arrays; it binds what it places.
    free : FreeState
    guides : Guides
        The node order and packing guide the policies are told.
    occupants : Occupants
        The pods on the nodes, which the inter-pod rules count; the pods placed here join.
    """

    def __init__(
        self, packed: PackedCluster, kernel: Kernel, free: FreeState, guides: Guides, occupants: Occupants
    ) -> None:
        self._packed = packed
        self._kernel = kernel
        self._free = free
        self._guides = guides
        self._occupants = occupants

    def relations(self, pods: Sequence[PodRequest]) -> Relations | None:
        """The inter-pod rules of ``pods`` placed in this order now (None: there are none)."""
        return compile_relations(self._packed, pods, self._occupants)

    def inter_pod_failures(self, pod: PodRequest) -> dict[int, str]:
        """Node -> the inter-pod reason that turns ``pod`` away now, for the nodes that do."""
        relations = self.relations([pod])
        if relations is None:
            return {}
        words = dict(zip(REASON_CODES, reasons.RELATIONAL_REASONS))
        codes = relations.failures(0)
        return {n: words[code] for n, code in zip(np.flatnonzero(codes >= 0).tolist(), codes[codes >= 0].tolist())}

    def _occupy(self, pods: Sequence[PodRequest], nodes: Sequence[int]) -> None:
        """The pods placed join the occupants (later pods' rules count them)."""
        for pod, node in zip(pods, nodes):
            if node >= 0:
                self._occupants.add(node, pod)

    def _batch(
        self, pods: Sequence[PodRequest], groups: Sequence[int] | None
    ) -> tuple[PodBatch, list[EligibilityClass], list[int]]:
        """The kernel's batch of ``pods``, its eligibility classes, and the positions of
        the pods that ask for extended resources."""
        batch, classes, with_resources = pack.pack_pods(self._packed, pods, groups)
        self._ensure_tables(batch.gpus)
        return batch, classes, with_resources

    def _ensure_tables(self, pod_gpus: np.ndarray) -> None:
        """Give the kernel the GPU-set tables of every node kind for the batch's set sizes."""
        kinds = self._packed.kinds
        if not kinds:
            return
        for k in np.unique(pod_gpus).tolist():
            if k < 1:
                continue
            for t, kind in enumerate(kinds):
                g = kind.topology.gpus
                if k > g or g > MAX_TABLE_GPUS or self._kernel.has_gpu_tables(t, k):
                    continue
                tables = tables_for(kind.topology, k)
                top = int(tables.subset_score[int(tables.best_set[(1 << g) - 1])])
                self._kernel.set_gpu_tables(t, k, tables.pair, tables.subset_score, tables.split, tables.tiling, top)

    def _shapes(self, batch: PodBatch, policy: Policy) -> np.ndarray | None:
        """Shape index per pod for the kernel's score cache (:attr:`Policy.cached`), or None
        when the cache would not pay (one pod) or would be too large."""
        if not policy.cached or batch.size < 2:
            return None
        kinds, index = np.unique(batch.shape_columns(), axis=0, return_inverse=True)
        if len(kinds) * self._packed.n_nodes > _SCORE_CACHE_CELLS:
            return None
        return index.reshape(-1).astype(pack.INT)

    def place(
        self, pods: Sequence[PodRequest], policy: Policy, rng: np.ndarray, groups: Sequence[int] | None,
        only: np.ndarray | None, trace: np.ndarray | None, reasons: bool, learn: bool,
    ) -> Run:
        """Place ``pods`` in order with ``policy``, binding each (see :meth:`KernelSession.place`)."""
        batch, classes, with_resources = self._batch(pods, groups)
        shapes = self._shapes(batch, policy)
        relations = self.relations(pods)
        blocked = self._ports_blocked(pods)
        given = only
        if blocked is not None:  # the nodes free of conflicts are the kernel's ``only``
            allowed = np.ones(len(blocked), dtype=bool) if given is None else pack.bitset_nodes(given, len(blocked))
            blocked &= allowed
            only = pack.node_bitset(allowed & ~blocked, self._packed.n_words)
        if learn and policy.needs_packing_guide and self._guides.learner is not None:
            nodes, masks, failed_at, counts, nics = self._place_learning(
                pods, batch, policy, rng, only, trace, reasons, shapes, relations
            )
        else:
            nodes, masks, failed_at, counts, nics = self._kernel.place_batch(
                batch, policy.code, rng, only, reasons, self._guides.rank, trace, shapes, None, relations
            )
        placed_on = nodes.tolist()
        self._occupy(pods, placed_on)
        for j in with_resources:
            if placed_on[j] >= 0:
                self._packed.use_resources(placed_on[j], pods[j].resources, 1)
        failed = failed_at.tolist()
        more = {}
        if reasons:
            for k in set(failed) - {-1}:
                later = [(pods[j], placed_on[j]) for j in range(k + 1, len(pods)) if placed_on[j] >= 0]
                more[k] = self._more_shortfalls(pods[k], classes[int(batch.klass[k])], given, blocked, later)
        return Run(placed_on, masks.tolist(), nics.tolist(), failed, counts, classes,
                   batch.klass, given, self._packed.n_nodes, blocked, more)

    def _more_shortfalls(
        self, pod: PodRequest, ec: EligibilityClass, only: np.ndarray | None, blocked: np.ndarray | None,
        later: Sequence[tuple[PodRequest, int]],
    ) -> dict[str, int]:
        """The resources, besides its static reason, that each node the static filters turn
        away for a resource (no GPUs, an extended resource short) lacks for ``pod``, counted
        per reason: kube's NodeResourcesFit gives a node every resource it lacks. Read after
        the run, with what the pods placed ``later`` in it took given back."""
        turned, own_reason = ec.resource_turned()
        if not turned.any():
            return {}
        if only is not None:
            turned &= pack.bitset_nodes(only, self._packed.n_nodes)
        if blocked is not None:  # NodePorts turned these away before NodeResourcesFit
            turned &= ~blocked
        at = np.flatnonzero(turned)
        own = own_reason[at]
        free = self._free
        slots, cpu, memory = (free.pod_slots[at].astype(np.int64), free.cpu_milli[at].astype(np.int64),
                              free.memory_mib[at].astype(np.int64))
        position = {int(n): i for i, n in enumerate(at.tolist())}
        for other, node in later:
            i = position.get(node)
            if i is not None:
                slots[i] += 1
                cpu[i] += other.cpu_milli
                memory[i] += other.memory_mib
        counts: dict[str, int] = {}

        def count(lacking: np.ndarray, reason: str) -> None:
            found = int(np.count_nonzero(lacking & (own != reason)))
            if found:
                counts[reason] = found

        count(slots < 1, reasons.RESOURCE_REASONS[2])
        count(short_of(cpu, pod.cpu_milli), reasons.RESOURCE_REASONS[0])
        count(short_of(memory, pod.memory_mib), reasons.RESOURCE_REASONS[1])
        for name, amount in pod.resources.items():
            have = self._packed.extended_free.get(name)
            count(np.zeros(len(at), dtype=bool) if amount <= 0 else
                  (np.ones(len(at), dtype=bool) if have is None else have[at] < amount), reasons.insufficient(name))
        if pod.gpus and not pod.shared:
            count(free.whole_gpus[at] < pod.gpus, reasons.NO_GPU)
        return counts

    def ports_blocked(self, pod: PodRequest) -> np.ndarray:
        """The nodes (bool per node) where ``pod``'s host ports conflict with a pod's there now."""
        return self._occupants.ports_blocked(pod.host_ports, self._packed.n_nodes)

    def port_holders(self, pod: PodRequest, node: int) -> list[str]:
        """The pods on ``node`` holding a host port ``pod`` needs."""
        return self._occupants.port_holders_on(node, pod.host_ports)

    def _ports_blocked(self, pods: Sequence[PodRequest]) -> np.ndarray | None:
        """NodePorts of a batch: the nodes its one pod with host ports may not use (None: no
        pod has host ports). Such a pod is a batch of its own: what it may use depends on
        the ports the pods before it took."""
        with_ports = [pod for pod in pods if pod.host_ports]
        if not with_ports:
            return None
        if len(pods) > 1:
            raise ValueError(f"pod {with_ports[0].name} has host ports: it is placed in a batch of its own")
        return self.ports_blocked(with_ports[0])

    def _place_learning(
        self,
        pods: Sequence[PodRequest],
        batch: PodBatch,
        policy: Policy,
        rng: np.ndarray,
        only: np.ndarray | None,
        trace: np.ndarray | None,
        reasons: bool,
        shapes: np.ndarray | None,
        relations: Relations | None,
    ) -> tuple[np.ndarray, ...]:
        """:meth:`place` in parts, each ending where the learner falls due."""
        learner = self._guides.learner
        assert learner is not None
        n = len(pods)
        seen = self._guides.seen
        names = list(map(attrgetter("name"), pods))
        fresh = np.zeros(n, dtype=bool)  # a name's first time
        first: set[str] = set()
        for i, name in enumerate(names):
            if name not in seen and name not in first:
                first.add(name)
                fresh[i] = True
        arrived = np.cumsum(fresh)  # new pods among the first i + 1
        columns = batch.arrays
        group_end = columns[8]
        named = np.zeros(n, dtype=bool)  # pods that name GPU models
        named[[i for i, pod in enumerate(pods) if pod.gpu_models]] = True
        cache = None
        if shapes is not None:
            cells = (int(shapes.max()) + 1) * self._packed.n_nodes
            cache = (np.zeros(cells, dtype=pack.INT), np.zeros(cells, dtype=pack.INT))
        parts = []
        start = 0
        while start < n:
            if self._guides.refresh_packing() and cache is not None:
                cache[0][:] = 0
            before = int(arrived[start - 1]) if start else 0
            room = max(learner.every - learner.pending, 1)
            stop = min(int(np.searchsorted(arrived, before + room)) + 1, n)
            stop = int(group_end[stop - 1])
            part = PodBatch(
                *(c[start:stop] for c in columns[:8]), group_end[start:stop] - start, columns[9]
            )
            out = self._kernel.place_batch(
                part, policy.code, rng, only, reasons, self._guides.rank,
                None if trace is None else trace[start:stop],
                None if shapes is None else shapes[start:stop], cache, relations, start,
            )
            out[2][out[2] >= 0] += start
            parts.append(out)
            seen.update(names[start:stop])
            new = fresh[start:stop]
            arrivals = Demand()
            arrivals.add_columns(
                columns[0][start:stop][new], columns[1][start:stop][new], columns[3][start:stop][new],
                [pods[i] for i in np.flatnonzero(new & named[start:stop]) + start],
            )
            learner.observe(arrivals)
            start = stop
        if not parts:
            return self._kernel.place_batch(
                batch, policy.code, rng, only, reasons, self._guides.rank, trace, shapes, None, relations
            )
        return tuple(np.concatenate(col) for col in zip(*parts))

    def place_on(
        self, pods: Sequence[PodRequest], nodes: Sequence[int], policy: Policy, rng: np.ndarray
    ) -> tuple[list[int], list[int]] | None:
        """Place pod j on node ``nodes[j]``, its GPUs (and NICs) chosen there by ``policy``;
        all or nothing. Returns the GPU and NIC masks, or ``None`` with nothing bound."""
        if any(pod.host_ports and self.ports_blocked(pod)[node] for pod, node in zip(pods, nodes)):
            return None
        batch, _, with_resources = self._batch(pods, None)
        relations = self.relations(pods)
        gpus, nics, failed = self._kernel.place_on(
            batch, np.asarray(nodes, dtype=pack.INDEX), policy.code, rng, relations
        )
        if failed >= 0:
            return None
        self._occupy(pods, nodes)
        for j in with_resources:
            self._packed.use_resources(int(nodes[j]), pods[j].resources, 1)
        return gpus.tolist(), nics.tolist()

    def node_scores(self, pod: PodRequest, policy: Policy) -> np.ndarray:
        """Every node's score for ``pod`` under ``policy``, higher is better (nothing is
        bound; ``Kernel.node_scores``); the lowest int64 where the pod may not go."""
        batch, _, _ = self._batch([pod], None)
        scores = self._kernel.node_scores(batch, policy.code)
        if pod.host_ports:
            scores[self.ports_blocked(pod)] = np.iinfo(scores.dtype).min
        relations = self.relations([pod])
        if relations is not None:  # spread, pod (anti-)affinity, existing pods' anti-affinity
            scores[relations.failures(0) >= 0] = np.iinfo(scores.dtype).min
        return scores

    def node_reasons(self, pod: PodRequest, nodes: Sequence[int] | np.ndarray) -> list[str]:
        """Why each of ``nodes`` cannot take ``pod`` now, in kube-scheduler's words: the
        static filter, else the first resource it lacks (see :meth:`KernelSession.node_reasons`)."""
        at = np.asarray(nodes, dtype=np.intp)
        ec = self._packed.eligibility(pod)
        free = self._free
        words = list(ec.reason_names)
        code = ec.reason_of[at].astype(np.int64)

        def first(lacking: np.ndarray | bool, reason: str) -> None:
            todo = (code < 0) & lacking
            if np.any(todo):
                words.append(reason)
                code[todo] = len(words) - 1

        if pod.host_ports:
            turned = _ports_first(ec, self.ports_blocked(pod))[at]
            code[turned] = -1
            first(turned, reasons.PORTS)
        first(free.pod_slots[at] < 1, reasons.RESOURCE_REASONS[2])
        first(short_of(free.cpu_milli[at], pod.cpu_milli), reasons.RESOURCE_REASONS[0])
        first(short_of(free.memory_mib[at], pod.memory_mib), reasons.RESOURCE_REASONS[1])
        for name, count in pod.resources.items():
            have = np.array([extended_free(self._packed, name, int(n)) for n in at], dtype=np.int64)
            first(have < count, reasons.insufficient(name))
        if pod.gpus:
            first(free.gpu_memory_capacity[at] < pod.gpu_memory_mib, reasons.RESOURCE_REASONS[4])
            first(True if pod.shared else free.whole_gpus[at] < pod.gpus, reasons.NO_GPU)
        relations = self.relations([pod])
        if relations is not None:
            failing = relations.failures(0)[at]
            for k, reason in zip(REASON_CODES, reasons.RELATIONAL_REASONS):
                first(failing == k, reason)
        first(True, reasons.NICS if pod.nics else reasons.NO_GPU)
        return [words[c] for c in code.tolist()]

