"""One cluster's kernel state behind one typed front: the only owner of what is free.

A :class:`KernelSession` packs a snapshot once and then answers every question the rest of
placer asks the kernel: place a run of pods, place pods on chosen nodes, score nodes, take
or give back what a pod holds, read what is free. It keeps the packed arrays, the GPU-set
tables, the fragmentation workload, the packing guide and the ranked policies' node order,
and it knows which pod holds what. Nothing outside this package sees a dtype or a kernel
array by name.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from placer.model import reasons
from placer._serial import serialised
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import Fragmentation, Workload, target_workload
from placer.kernel import pack
from placer.kernel.tables import MAX_TABLE_GPUS, tables_for
from placer.kernel._core import Kernel, PodBatch
from placer.kernel.mig import MigState
from placer.kernel.pack import EligibilityClass, PackedCluster, indices_to_mask, mask_to_indices
from placer.model import EMPTY, ClusterSnapshot, MigInstance, MigUse, PodRequest, RunningPod
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, Demand, PackingGuide, PackingLearner
from placer.policies import Policy

__all__ = ["KernelSession", "FreeState", "NodeFree", "Run", "Evicted", "fgd_rank", "slot_counts"]

_SCORE_CACHE_CELLS = 1 << 24  # (shape, node) scores kept per batch, at most


@dataclass(frozen=True, slots=True)
class NodeFree:
    """What is free on one node now; ``None`` where the capacity is not tracked."""

    cpu_milli: int | None
    memory_mib: int | None
    pods: int | None
    gpu_milli: tuple[int, ...]
    gpu_memory_mib: tuple[int | None, ...]


@dataclass(frozen=True)
class FreeState:
    """What is free on every node, as read-only arrays indexed by node (and GPU).

    An untracked capacity reads as a number at least :attr:`untracked_quantity` (CPU,
    memory) or :attr:`untracked_count` (pod slots, GPU memory): larger than any request.
    """

    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    pod_slots: np.ndarray
    gpu_milli: np.ndarray  # [node, gpu]
    gpu_memory_mib: np.ndarray  # [node, gpu]
    whole_gpus: np.ndarray  # fully free healthy GPUs per node
    free_gpu_milli: np.ndarray  # free milli summed over a node's GPUs
    gpu_count: np.ndarray
    gpu_memory_capacity: np.ndarray  # per node, one GPU's memory
    model_id: np.ndarray  # the node's GPU model (0: no GPU), an index into model_names
    cpu_tracked: np.ndarray  # bool
    untracked_quantity: int
    untracked_count: int
    slot_replicas: np.ndarray  # slots per GPU of a node that shares its GPUs (0: it does not)
    slot_milli: np.ndarray  # the gpuMilli one slot holds (0: the node does not share)
    slot_mps: np.ndarray  # bool: the node shares by MPS (one slot per pod)

    def gpu_slots_free(self, node: int) -> np.ndarray:
        """Free slots per GPU of ``node`` (zeros when it does not share its GPUs).

        A GPU holding ``j`` slots has ``1000 - j * slot_milli`` milli free, so it has
        ``replicas - j`` slots free; an unhealthy GPU (0 milli free) has none.
        """
        replicas = int(self.slot_replicas[node])
        g = int(self.gpu_count[node])
        if not replicas:
            return np.zeros(g, dtype=np.int64)
        held = (1000 - self.gpu_milli[node, :g].astype(np.int64)) // int(self.slot_milli[node])
        return np.maximum(replicas - held, 0)


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

    def reason_key(self, k: int) -> tuple[int, bytes]:
        """Equal for pods that :meth:`reasons` counts alike (same class, same counts)."""
        return int(self._klass[k]), self._counts[k].tobytes()

    def reasons(self, k: int) -> dict[str, int]:
        """Nodes per reason that turned pod ``k`` (a ``failed_at`` index) away."""
        ec = self._classes[int(self._klass[k])]
        if self._only is None:
            merged = dict(ec.static_reasons)
        else:
            inside = np.unpackbits(self._only.view(np.uint8), bitorder="little")[: self._n_nodes].astype(bool)
            merged = ec.reasons_among(inside)
        for name, count in zip(reasons.RESOURCE_REASONS, self._counts[k].tolist()):
            if count:
                merged[name] = merged.get(name, 0) + count
        return merged


@dataclass(frozen=True)
class Evicted:
    """A pod :meth:`KernelSession.evict` released: where it ran and what it held."""

    name: str
    node: int
    what: Any  # its RunningPod record, or (request, GPU mask) for a pod bound here
    mig: tuple[MigUse, ...] = ()
    slots: tuple[int, ...] = ()


def fgd_rank(n_nodes: int, seed: int) -> np.ndarray:
    """The tie order of nodes under the ranked policies (:attr:`Policy.ranked`): nodes
    sorted by the request's SplitMix64 draws.

    Draw ``n_nodes`` values from a fresh SplitMix64 stream started at ``seed``; node i gets
    the i-th; the node with the smaller draw wins a tie (rank 0 first).
    """
    mask = (1 << 64) - 1
    state = seed
    draws = np.empty(n_nodes, dtype=np.uint64)
    for i in range(n_nodes):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        draws[i] = z ^ (z >> 31)
    rank = np.empty(n_nodes, dtype=pack.INDEX)
    rank[np.argsort(draws, kind="stable")] = np.arange(n_nodes, dtype=pack.INDEX)
    return rank


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


@serialised
class KernelSession:
    """The kernel state of one cluster: packed arrays, runs, GPU-set tables, holdings.

    Every public method and property holds :attr:`lock` while it runs, the kernel's
    ``nogil`` loops included, so threads may share a session; the arrays of :attr:`free`
    are live views, consistent when read under the lock.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        The cluster as it is now; its running pods hold their resources from the start.

    Attributes
    ----------
    lock : threading.RLock
        Held by every public method and property; hold it to make several calls one step.
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.lock = threading.RLock()
        self.snapshot = snapshot
        self._packed: PackedCluster = pack.pack_snapshot(snapshot)
        p = self._packed
        self._kernel = Kernel(p.arrays, len(p.model_names))
        for t, kind in enumerate(p.kinds):
            if kind.nics:
                self._kernel.set_nics(t, kind.nic_classes())
        # pod name -> (node, what it holds): a running pod's record, or (request, GPU mask);
        # read through _holdings(), which files the batches of hold_all() first
        self._held: dict[str, tuple[int, Any]] = p.holdings
        self._unheld: list[list[tuple[PodRequest, int, int]]] = []  # batches held, not filed yet
        self._workload: Workload | None = None
        self._told: Workload | None = None
        self._packing: PackingGuide | None = None
        self._weights = (REGRET_WEIGHT, PRESSURE_WEIGHT)
        self._learner: PackingLearner | None = None
        self._seen: set[str] = set()  # pods the learner has counted, by name
        self._rank: np.ndarray | None = None
        self._ranks: dict[int, np.ndarray] = {}  # fgd_rank by seed: a loop over the nodes
        self._node_frag = np.zeros(0, dtype=pack.REAL)
        self.mig = MigState(snapshot, p.mig_nodes)
        self.held_version = 0  # counts changes of who holds what (a cache key for views of it)
        self.views: dict[str, tuple[int, Any]] = {}  # name -> (held_version, view) of derived views
        self._mig_values: dict[int, np.ndarray] | None = None
        a = p.arrays
        self.free = FreeState(
            cpu_milli=_read_only(a["cpu_free"]),
            memory_mib=_read_only(a["mem_free"]),
            pod_slots=_read_only(a["pods_free"]),
            gpu_milli=_read_only(a["gpu_free_milli"]),
            gpu_memory_mib=_read_only(a["gpu_free_mem"]),
            whole_gpus=_read_only(a["free_count"]),
            free_gpu_milli=_read_only(a["free_milli_sum"]),
            gpu_count=_read_only(a["gpu_count"]),
            gpu_memory_capacity=_read_only(a["gpu_mem_cap"]),
            model_id=_read_only(a["model_id"]),
            cpu_tracked=_read_only(a["cpu_tracked"].view(bool)),
            untracked_quantity=int(pack.UNTRACKED_BIG) // 2,
            untracked_count=int(pack.UNTRACKED_INT) // 2,
            slot_replicas=_read_only(p.slot_replicas),
            slot_milli=_read_only(p.slot_milli),
            slot_mps=_read_only(p.slot_mps),
        )
        # pod name -> the GPU of each of its slots (ascending), for pods of gpuSlots bound here
        self._slot_lists: dict[str, tuple[int, ...]] = {}

    # ------------------------------------------------------------------ the cluster

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return self._packed.n_nodes

    @property
    def node_names(self) -> list[str]:
        """Node names in index order."""
        return self._packed.node_names

    @property
    def node_index(self) -> Mapping[str, int]:
        """Node index by name."""
        return self._packed.node_index

    @property
    def model_names(self) -> list[str]:
        """GPU model names by model id (id 0, ``""``: no GPU)."""
        return self._packed.model_names

    def nodes_bitset(self, nodes: np.ndarray) -> np.ndarray:
        """A boolean node mask as the kernel's node bitset (for ``only``)."""
        return pack.node_bitset(nodes, self._packed.n_words)

    def eligibility(self, pod: PodRequest) -> tuple[np.ndarray, int]:
        """Nodes the pod's static filters let it use (bool per node), and its allowed GPU
        models as a bitmask of model ids."""
        ec = self._packed.eligibility(pod)
        return pack.bitset_nodes(ec.bits, self.n_nodes), ec.model_mask

    def static_reasons(self, pod: PodRequest) -> dict[str, int]:
        """Nodes per reason that the pod's static filters turn away."""
        return dict(self._packed.eligibility(pod).static_reasons)

    def gpus_per_model(self) -> dict[str, int]:
        """GPUs of the cluster per GPU model."""
        a = self._packed.arrays
        names = self._packed.model_names
        out: dict[str, int] = {}
        for model, count in zip(a["model_id"].tolist(), a["gpu_count"].tolist()):
            if count:
                out[names[model]] = out.get(names[model], 0) + count
        return out

    def nic_names(self, node: int, nic_mask: int) -> tuple[str, ...]:
        """The names of the NICs of a mask the kernel chose on ``node``."""
        if not nic_mask:
            return ()
        names = self._packed.kinds[int(self._packed.arrays["kind_of"][node])].nics
        return tuple(names[j].name for j in mask_to_indices(nic_mask))

    def node_free(self, node: int) -> NodeFree:
        """What is free on node ``node`` now."""
        a = self._packed.arrays
        hw = self.snapshot.nodes[node].hardware
        g = int(a["gpu_count"][node])
        tracked_mem = hw.gpu_memory_mib is not None
        unhealthy = set(self.snapshot.nodes[node].unhealthy_gpus)
        return NodeFree(
            cpu_milli=int(a["cpu_free"][node]) if hw.cpu_milli is not None else None,
            memory_mib=int(a["mem_free"][node]) if hw.memory_mib is not None else None,
            pods=int(a["pods_free"][node]) if hw.max_pods is not None else None,
            gpu_milli=tuple(a["gpu_free_milli"][node, :g].tolist()),
            gpu_memory_mib=tuple(
                (0 if k in unhealthy else int(a["gpu_free_mem"][node, k])) if tracked_mem else None for k in range(g)
            ),
        )

    def state_bytes(self) -> int:
        """Bytes held by the kernel's state arrays."""
        return sum(a.nbytes for a in self._packed.arrays.values())

    def extended_free(self, name: str, node: int) -> int:
        """Free count of the extended resource ``name`` on ``node`` (0 where not offered)."""
        free = self._packed.extended_free.get(name)
        return 0 if free is None else int(free[node])

    # ------------------------------------------------------------------ policies

    def prepare(self, policy: Policy, pods: Sequence[PodRequest], seed: int) -> None:
        """Set up what ``policy`` needs before placing ``pods``: the fragmentation workload
        (of these pods, the first time, unless one was set), the packing guide (the first
        time: :meth:`learn_packing` from the told workload, never from ``pods``) and the
        seeded node order."""
        if policy.needs_workload and self._workload is None:
            self.fragmentation(target_workload(pods), told=False)
        if policy.needs_packing_guide and self._packing is None:
            self.learn_packing(self._told)
        if policy.mig_choice == "aware" and self._mig_values is None and self.mig.n_rows:
            self.set_mig_demand(pods)
        self._rank = None
        if policy.ranked:
            self._rank = self._ranks.get(seed)
            if self._rank is None:
                if len(self._ranks) >= 64:
                    self._ranks.clear()
                self._rank = self._ranks[seed] = fgd_rank(self.n_nodes, seed)

    def fragmentation(self, workload: Workload, told: bool = True) -> Fragmentation:
        """The cluster's fragment F(M) now (FGD measure; ``placer.workload.fragmentation``).

        The first call for a workload computes every node's fragment in the kernel; from
        then on each bind or release updates only its node. ``told``: the caller gave this
        workload (not derived from pods to place), so :meth:`prepare` may start the packing
        guide from it.
        """
        if told:
            self._told = workload
        if self._workload is not workload:
            self._node_frag = np.zeros(self.n_nodes, dtype=pack.REAL)
            self._kernel.set_workload(*pack.workload_arrays(self._packed, workload, self._node_frag))
            self._workload = workload
        return Fragmentation(
            total=float(self._node_frag.sum()),
            idle_gpu_milli=int(self.free.free_gpu_milli.sum()),
            gpu_capacity_milli=int(self.free.gpu_count.sum(dtype=np.int64)) * 1000,
        )

    @property
    def workload(self) -> Workload | None:
        """The workload of the fragment measure, once set."""
        return self._workload

    def node_fragment(self, node: int) -> float:
        """F_n(M) of one node for the current workload."""
        if self._workload is None:
            raise InvalidInputError("workload", "call fragmentation(workload) first")
        return float(self._node_frag[node])

    def set_packing_weights(self, regret: float = REGRET_WEIGHT, pressure: float = PRESSURE_WEIGHT) -> None:
        """The weights of ``fgd-pack``'s regret and model-pressure terms (defaults:
        :data:`placer.workload.packing.REGRET_WEIGHT`, :data:`placer.workload.packing.PRESSURE_WEIGHT`)."""
        self._weights = (float(regret), float(pressure))
        if self._packing is not None:
            self._push(self._packing)

    def set_packing(self, guide: PackingGuide) -> None:
        """Use ``guide`` for ``fgd-pack`` from now on, as it is (no learning)."""
        self._learner = None
        self._push(guide)

    def learn_packing(self, prior: Workload | None = None) -> PackingGuide:
        """Let ``fgd-pack`` learn its guide from now on (:class:`placer.workload.packing.PackingLearner`).

        The guide starts from ``prior`` (counted as :data:`placer.workload.packing.PRIOR_PODS` pods)
        and the pods the cluster holds now, and follows the pods placed with ``learn``
        (:meth:`place`, :meth:`observe`). Returns the starting guide.
        """
        learner = PackingLearner(self.gpus_per_model(), None if prior is None else Demand.of_workload(prior))
        held = [what for _, what in self._holdings().values()]
        learner.observe(Demand.of_running([w for w in held if isinstance(w, RunningPod)]))
        learner.observe([w[0] for w in held if not isinstance(w, RunningPod)])
        self._seen.update(self._holdings())
        self._learner = learner
        guide = learner.refresh()
        self._push(guide)
        return guide

    def observe(self, pods: Sequence[PodRequest]) -> None:
        """Count pods as arrived for a learning guide (each name once)."""
        if self._learner is None:
            return
        seen = self._seen
        new = [p for p in pods if p.name not in seen]
        seen.update(p.name for p in new)
        self._learner.observe(new)

    def refresh_packing(self) -> bool:
        """Refresh a learning guide when due (:attr:`PackingLearner.due`); whether the
        guide in force changed."""
        if self._learner is None or not self._learner.due:
            return False
        guide = self._learner.refresh()
        if guide is self._packing:
            return False
        self._push(guide)
        return True

    def _push(self, guide: PackingGuide) -> None:
        self._kernel.set_packing(
            guide.cpu_per_gpu_milli,
            np.ascontiguousarray(guide.regret, dtype=pack.REAL).ravel(),
            guide.pressure_by_id(self._packed.model_names),
            *self._weights,
        )
        self._packing = guide

    @property
    def packing(self) -> PackingGuide | None:
        """The packing guide of ``fgd-pack`` now, once set."""
        return self._packing

    @property
    def packing_learner(self) -> PackingLearner | None:
        """The learner behind the guide, when it learns (:meth:`learn_packing`)."""
        return self._learner

    # ------------------------------------------------------------------ placing

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
        if len(kinds) * self.n_nodes > _SCORE_CACHE_CELLS:
            return None
        return index.reshape(-1).astype(pack.INT)

    def place(
        self,
        pods: Sequence[PodRequest],
        policy: Policy,
        rng: np.ndarray,
        groups: Sequence[int] | None = None,
        only: np.ndarray | None = None,
        trace: np.ndarray | None = None,
        reasons: bool = True,
        learn: bool = False,
    ) -> Run:
        """Place ``pods`` in order with ``policy``, binding each; groups all or nothing.

        Parameters
        ----------
        pods : sequence of PodRequest
        policy : Policy
        rng : ndarray of uint64, shape (1,)
            The request's SplitMix64 state, advanced in place.
        groups : sequence of int, optional
            Per pod, the end of its all-or-nothing group (default: each pod alone).
        only : ndarray, optional
            A node bitset (:meth:`nodes_bitset`): only these nodes may be used.
        trace : ndarray of float64, optional
            Filled with the fragment F(M) after each pod (needs a workload).
        reasons : bool
            Count, for a pod that fails, the nodes per reason.
        learn : bool
            The pods arrive: a learning ``fgd-pack`` guide counts them (:meth:`observe`)
            and is refreshed before any group once due, so no pod is placed with a guide
            that counted it or a pod after it.
        """
        batch, classes, with_resources = self._batch(pods, groups)
        shapes = self._shapes(batch, policy)
        if learn and policy.needs_packing_guide and self._learner is not None:
            nodes, masks, failed_at, counts, nics = self._place_learning(
                pods, batch, policy, rng, only, trace, reasons, shapes
            )
        else:
            nodes, masks, failed_at, counts, nics = self._kernel.place_batch(
                batch, policy.code, rng, only, reasons, self._rank, trace, shapes
            )
        placed_on = nodes.tolist()
        for j in with_resources:
            if placed_on[j] >= 0:
                self._packed.use_resources(placed_on[j], pods[j].resources, 1)
        return Run(placed_on, masks.tolist(), nics.tolist(), failed_at.tolist(), counts, classes,
                   batch.klass, only, self.n_nodes)

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
    ) -> tuple[np.ndarray, ...]:
        """:meth:`place` in parts, each ending where the learner falls due."""
        learner = self._learner
        assert learner is not None
        n = len(pods)
        seen = self._seen
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
            cells = (int(shapes.max()) + 1) * self.n_nodes
            cache = (np.zeros(cells, dtype=pack.INT), np.zeros(cells, dtype=pack.INT))
        parts = []
        start = 0
        while start < n:
            if self.refresh_packing() and cache is not None:
                cache[0][:] = 0
            before = int(arrived[start - 1]) if start else 0
            room = max(learner.every - learner.pending, 1)
            stop = min(int(np.searchsorted(arrived, before + room)) + 1, n)
            stop = int(group_end[stop - 1])
            part = PodBatch(
                *(c[start:stop] for c in columns[:8]), group_end[start:stop] - start, columns[9]
            )
            out = self._kernel.place_batch(
                part, policy.code, rng, only, reasons, self._rank,
                None if trace is None else trace[start:stop],
                None if shapes is None else shapes[start:stop], cache,
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
            return self._kernel.place_batch(batch, policy.code, rng, only, reasons, self._rank, trace, shapes)
        return tuple(np.concatenate(col) for col in zip(*parts))

    def place_on(
        self, pods: Sequence[PodRequest], nodes: Sequence[int], policy: Policy, rng: np.ndarray
    ) -> tuple[list[int], list[int]] | None:
        """Place pod j on node ``nodes[j]``, its GPUs (and NICs) chosen there by ``policy``;
        all or nothing. Returns the GPU and NIC masks, or ``None`` with nothing bound."""
        batch, _, with_resources = self._batch(pods, None)
        gpus, nics, failed = self._kernel.place_on(batch, np.asarray(nodes, dtype=pack.INDEX), policy.code, rng)
        if failed >= 0:
            return None
        for j in with_resources:
            self._packed.use_resources(int(nodes[j]), pods[j].resources, 1)
        return gpus.tolist(), nics.tolist()

    def node_scores(self, pod: PodRequest, policy: Policy) -> np.ndarray:
        """Every node's score for ``pod`` under ``policy``, higher is better (nothing is
        bound; ``Kernel.node_scores``); the lowest int64 where the pod may not go."""
        batch, _, _ = self._batch([pod], None)
        return self._kernel.node_scores(batch, policy.code)

    def node_reasons(self, pod: PodRequest, nodes: Sequence[int] | np.ndarray) -> list[str]:
        """Why each of ``nodes`` cannot take ``pod`` (no MIG, no ``gpuSlots``) now, in
        kube-scheduler's words: the static filter that turns it away (unschedulable, taint,
        selector, GPU model), else the first resource it lacks (pod slots, CPU, memory, an
        extended resource, GPU memory, GPUs). A node that lacks nothing of these turns the
        pod away for its GPU sets or NICs (``Insufficient nvidia.com/gpu`` or
        :data:`placer.model.reasons.NICS`)."""
        at = np.asarray(nodes, dtype=np.intp)
        ec = self._packed.eligibility(pod)
        free = self.free
        words = list(ec.reason_names)
        code = ec.reason_of[at].astype(np.int64)

        def first(lacking: np.ndarray | bool, reason: str) -> None:
            todo = (code < 0) & lacking
            if np.any(todo):
                words.append(reason)
                code[todo] = len(words) - 1

        first(free.pod_slots[at] < 1, reasons.RESOURCE_REASONS[2])
        first(free.cpu_milli[at] < pod.cpu_milli, reasons.RESOURCE_REASONS[0])
        first(free.memory_mib[at] < pod.memory_mib, reasons.RESOURCE_REASONS[1])
        for name, count in pod.resources.items():
            have = np.array([self.extended_free(name, int(n)) for n in at], dtype=np.int64)
            first(have < count, reasons.insufficient(name))
        if pod.gpus:
            first(free.gpu_memory_capacity[at] < pod.gpu_memory_mib, reasons.RESOURCE_REASONS[4])
            first(True if pod.shared else free.whole_gpus[at] < pod.gpus, reasons.NO_GPU)
        first(True, reasons.NICS if pod.nics else reasons.NO_GPU)
        return [words[c] for c in code.tolist()]

    # ------------------------------------------------------------------ MIG

    def set_mig_demand(self, pods: Sequence[PodRequest]) -> None:
        """Weigh MIG profiles by how often ``pods`` ask for them (the ``aware`` choice's
        demand mix); without MIG pods, every non-media profile weighs the same."""
        weights = [np.zeros(len(t.table.profiles)) for t in self.mig.tables]
        asked = [pod.mig for pod in pods if pod.mig is not None]
        for request in asked:
            for t, profile in enumerate(self.mig.profiles_for(request)):
                if profile is not None:
                    weights[t][profile.index] += request.count
        for t, w in enumerate(weights):
            if not w.any():
                w[:] = [0.0 if p.media else 1.0 for p in self.mig.tables[t].table.profiles]
            w /= w.sum()
        self._mig_values = {t: self.mig.tables[t].value(w) for t, w in enumerate(weights)}

    def mig_allowed(self, pod: PodRequest, only: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int]]:
        """Nodes a MIG pod may use before its MIG fit (static filters, CPU, memory, pod
        slots, GPU models), and per reason the nodes turned away; ``only``: among these
        nodes (a bool mask)."""
        ec = self._packed.eligibility(pod)
        allowed = pack.bitset_nodes(ec.bits, self.n_nodes)
        if only is None:
            counts = dict(ec.static_reasons)
        else:
            counts = ec.reasons_among(only)
            allowed &= only
        a = self._packed.arrays

        def reject(mask: np.ndarray, reason: str) -> None:
            hit = allowed & mask
            if hit.any():
                counts[reason] = counts.get(reason, 0) + int(hit.sum())
                allowed[hit] = False

        if pod.gpu_models:
            mask = self._packed.model_mask(pod.gpu_models, 1)
            reject(~((mask >> a["model_id"]) & 1).astype(bool), reasons.GPU_MODEL)
        reject(a["cpu_free"] < pod.cpu_milli, reasons.RESOURCE_REASONS[0])
        reject(a["mem_free"] < pod.memory_mib, reasons.RESOURCE_REASONS[1])
        reject(a["pods_free"] < 1, reasons.RESOURCE_REASONS[2])
        return allowed, counts

    def place_mig(
        self, pod: PodRequest, policy: Policy, only: np.ndarray | None = None
    ) -> tuple[int, list[MigUse]] | dict[str, int]:
        """Place one MIG pod with ``policy``'s MIG choice and bind it: (node, instances),
        or, when no node can take it, the nodes per reason (nothing bound). ``only``: a
        bool mask of the nodes it may use (the reasons count only these)."""
        request = pod.mig
        assert request is not None
        allowed, counts = self.mig_allowed(pod, only)
        if self._mig_values is None and policy.mig_choice == "aware":
            self.set_mig_demand([pod])
        found = self.mig.choose(request, allowed, policy.mig_choice, self._mig_values)
        if found is None:
            counts.update(self.mig_shortfall(request, allowed))
            return counts
        node, uses = found
        self.take_mig(pod, node, uses)
        return node, uses

    def mig_shortfall(self, request: Any, nodes: np.ndarray) -> dict[str, int]:
        """Per MIG reason, how many of ``nodes`` cannot give the request's instances now."""
        table = self.mig.node_table
        short = nodes & (self.mig.node_capacity(request) < request.count)
        none = short & (table < 0)
        out = {reasons.NO_MIG: int(none.sum())}
        has = np.array([p is not None for p in self.mig.profiles_for(request)] + [False], dtype=bool)
        missing = short & (table >= 0) & ~has[table]
        out[reasons.mig_profile_missing(request.profile, request.memory_mib)] = int(missing.sum())
        out[reasons.insufficient(reasons.mig_resource(request.profile, request.memory_mib))] = int(
            (short & ~none & ~missing).sum()
        )
        return {k: v for k, v in out.items() if v}

    def take_mig(self, pod: PodRequest, node: int, uses: Sequence[MigUse]) -> None:
        """Bind a MIG pod on ``node`` with these instances; no checks."""
        self._apply(pod, node, 0, 1)
        self.mig.take(node, uses, pod.name)

    def mig_uses(self, name: str) -> tuple[MigUse, ...]:
        """The instances a pod uses, ``create`` where placer created them for it."""
        return tuple(
            MigUse(gpu=i.gpu, profile=i.profile.name, start=i.start, create=i.created) for i in self.mig.holdings(name)
        )

    def mig_instances(self, node: int) -> tuple[MigInstance, ...]:
        """The instances that exist on a node now, free or in use, by GPU and start."""
        return tuple(
            MigInstance(gpu=i.gpu, profile=i.profile.name, start=i.start, device=i.device)
            for i in sorted(self.mig.node_instances(node), key=lambda i: (i.gpu, i.start))
        )

    # ------------------------------------------------------------------ holding

    def take(self, pod: PodRequest, node: int, mask: int) -> None:
        """Bind ``pod`` on ``node`` with GPU ``mask`` (whole GPUs, or the shared GPU); no checks.
        A pod of ``gpuSlots`` takes one slot on each GPU of ``mask`` (:meth:`take_slots`
        places slots that stack)."""
        if pod.gpu_slots:
            self.take_slots(pod, node, mask_to_indices(mask))
            return
        self._apply(pod, node, mask, 1)

    def give_back(self, pod: PodRequest, node: int, mask: int) -> None:
        """Undo :meth:`take`."""
        self._apply(pod, node, mask, -1)

    def _apply(self, pod: PodRequest, node: int, mask: int, sign: int) -> None:
        if sign < 0 and pod.mig is not None:
            self.mig.give_back(pod.name)
        self._packed.use_resources(node, pod.resources, sign)
        if pod.gpu_slots:
            slots = self._slot_lists[pod.name] if sign > 0 else self._slot_lists.pop(pod.name)
            self._apply_slots(node, slot_counts(slots), pod.gpu_memory_mib, sign)
            self._kernel.bind(node, 0, 0, pod.cpu_milli, pod.memory_mib, 0, sign, 1, False)
            return
        self._kernel.bind(node, pod.gpu_milli, pod.gpu_memory_mib, pod.cpu_milli, pod.memory_mib, mask, sign, 1, pod.shared)

    def _apply_slots(self, node: int, counts: Mapping[int, int], gpu_memory_mib: int, sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) slots per GPU on a sharing node, with
        ``gpu_memory_mib`` on each GPU (once per GPU, however many slots it holds there)."""
        slot = int(self._packed.slot_milli[node])
        for gpu, count in counts.items():
            self._kernel.bind(node, count * slot, gpu_memory_mib, 0, 0, 1 << gpu, sign, 0, True)

    def take_slots(self, pod: PodRequest, node: int, slots: Sequence[int]) -> int:
        """Bind a pod of ``gpuSlots`` on a sharing node, slot ``j`` on GPU ``slots[j]``; no
        checks. Returns the mask of its GPUs (what :meth:`give_back` and :meth:`hold` take)."""
        self._slot_lists[pod.name] = tuple(sorted(slots))
        mask = indices_to_mask(slots)
        self._apply(pod, node, mask, 1)
        return mask

    def slot_list(self, name: str) -> tuple[int, ...]:
        """The GPU of each slot a bound pod of ``gpuSlots`` holds, ascending (a GPU repeats
        when the pod's slots stack on it)."""
        return self._slot_lists[name]

    def hold(self, pod: PodRequest, node: int, mask: int) -> None:
        """Record that ``pod`` (already taken) now holds ``mask`` on ``node``."""
        self._holdings()[pod.name] = (node, (pod, mask))
        self.held_version += 1

    def hold_all(self, placed: Iterable[tuple[PodRequest, int, int]]) -> None:
        """:meth:`hold` each (pod, node, GPU mask).

        The batch is filed by pod name when the holdings are next read: a cluster placed
        once and dropped (:func:`placer.place`) never files it.
        """
        self._unheld.append(placed if isinstance(placed, list) else list(placed))
        self.held_version += 1

    def _holdings(self) -> dict[str, tuple[int, Any]]:
        """Pod name -> (node, what it holds), the batches of :meth:`hold_all` filed."""
        if self._unheld:
            for placed in self._unheld:
                pack.hold_placed(self._held, placed)
            self._unheld.clear()
        return self._held

    def first_held(self, pods: Sequence[PodRequest]) -> int:
        """The position of the first of ``pods`` that is bound or running now, -1 for none."""
        return pack.first_held(self._holdings(), pods)

    def held_among(self, names: Iterable[str]) -> set[str]:
        """Which of ``names`` are pods that are bound or running now."""
        return self._holdings().keys() & set(names)

    def holds(self, name: str) -> bool:
        """Whether a pod of this name is bound or running."""
        return name in self._holdings()

    def misfit(self, pod: PodRequest, node: int, gpus: Sequence[int], mig: Sequence[MigUse] = ()) -> str:
        """Why ``pod`` cannot hold exactly ``gpus`` and the MIG instances ``mig`` on ``node``
        now ("" when it can)."""
        free = self.node_free(node)
        if free.pods is not None and free.pods < 1:
            return "no pod slot left"
        if free.cpu_milli is not None and free.cpu_milli < pod.cpu_milli:
            return reasons.RESOURCE_REASONS[0]
        if free.memory_mib is not None and free.memory_mib < pod.memory_mib:
            return reasons.RESOURCE_REASONS[1]
        for name, count in pod.resources.items():
            if self.extended_free(name, node) < count:
                return reasons.insufficient(name)
        problem = self.mig.misfit(node, mig, pod.mig)
        if problem:
            return problem
        if pod.gpu_slots:
            return self._slot_misfit(pod, node, gpus)
        if len(gpus) != pod.gpus or any(not 0 <= g < len(free.gpu_milli) for g in gpus) or len(set(gpus)) != len(gpus):
            return f"needs {pod.gpus} GPU index(es) on the node, got {list(gpus)}"
        for g in gpus:
            if pod.shared:
                mib = free.gpu_memory_mib[g]
                if free.gpu_milli[g] < pod.gpu_milli or (mib is not None and mib < pod.gpu_memory_mib):
                    return f"GPU {g} lacks the share"
            elif free.gpu_milli[g] != 1000:
                return f"GPU {g} is not free"
        return ""

    def _slot_misfit(self, pod: PodRequest, node: int, slots: Sequence[int]) -> str:
        """Why a pod of ``gpuSlots`` cannot hold slot j on GPU ``slots[j]`` ("" when it can)."""
        if not self.free.slot_replicas[node]:
            return "the node does not share its GPUs (no gpuSharing)"
        if len(slots) != pod.gpu_slots:
            return f"needs {pod.gpu_slots} slot(s), got {len(slots)}"
        if self.free.slot_mps[node] and len(slots) > 1:
            return "an MPS-shared node gives one slot per pod"
        free_slots = self.free.gpu_slots_free(node)
        mib = self.node_free(node).gpu_memory_mib
        for gpu, count in slot_counts(slots).items():
            if not 0 <= gpu < len(free_slots):
                return f"GPU index {gpu} out of range"
            if free_slots[gpu] < count:
                return f"GPU {gpu} has {int(free_slots[gpu])} free slot(s), {count} needed"
            if mib[gpu] is not None and mib[gpu] < pod.gpu_memory_mib:
                return f"GPU {gpu} lacks {pod.gpu_memory_mib} MiB of GPU memory"
        return ""

    def bind_all(
        self, items: Sequence[tuple[PodRequest, int, Sequence[int], Sequence[MigUse]]]
    ) -> tuple[str, str] | None:
        """Take and hold each (pod, node, GPU indices, MIG instances), all or nothing.

        For a pod of ``gpuSlots`` the indices name the GPU of each slot (a GPU repeats when
        slots stack on it). Returns None when every pod was bound, else (pod name, why) for
        the first that did not fit, with nothing bound.
        """
        done: list[tuple[PodRequest, int, int]] = []
        for pod, node, gpus, mig in items:
            problem = self.misfit(pod, node, gpus, mig)
            if problem:
                for p, n, m in reversed(done):
                    self.give_back(p, n, m)
                return pod.name, f"does not fit on {self.node_names[node]}: {problem}"
            if pod.mig is not None:
                mask = 0
                self.take_mig(pod, node, mig)
            elif pod.gpu_slots:
                mask = self.take_slots(pod, node, gpus)
            else:
                mask = indices_to_mask(gpus)
                self.take(pod, node, mask)
            done.append((pod, node, mask))
        for pod, node, mask in done:
            self.hold(pod, node, mask)
        return None

    def release(self, name: str) -> None:
        """Give back everything a bound or running pod holds."""
        found = self._holdings().pop(name, None)
        self.held_version += 1
        if found is None:
            raise InvalidInputError(name, "no bound or running pod of this name")
        node, what = found
        if isinstance(what, RunningPod):
            self.mig.give_back(name)
            self._packed.use_resources(node, what.resources, -1)
            self._kernel.bind(node, 1000, 0, what.cpu_milli, what.memory_mib, indices_to_mask(what.gpus), -1, 1, False)
            for gpu, milli in what.gpu_shares.items():
                self._kernel.bind(node, milli, what.gpu_memory_mib.get(gpu, 0), 0, 0, 1 << gpu, -1, 0, True)
            slot = int(self._packed.slot_milli[node])
            for gpu, count in what.gpu_slots.items():
                self._kernel.bind(node, count * slot, what.gpu_memory_mib.get(gpu, 0), 0, 0, 1 << gpu, -1, 0, True)
        else:
            pod, mask = what
            self.give_back(pod, node, mask)

    def evict(self, name: str) -> Evicted:
        """Release a bound or running pod and return what :meth:`restore` needs to put it
        back exactly (its GPUs, shares, slots and MIG instances)."""
        found = self._holdings().get(name)
        if found is None:
            raise InvalidInputError(name, "no bound or running pod of this name")
        node, what = found
        uses = self.mig_uses(name)
        slots = self._slot_lists.get(name, ())
        self.release(name)
        return Evicted(name, node, what, uses, slots)

    def restore(self, evicted: Evicted) -> None:
        """Undo :meth:`evict`: the pod holds again what it held."""
        node, what = evicted.node, evicted.what
        if isinstance(what, RunningPod):
            self._packed.use_resources(node, what.resources, 1)
            self._kernel.bind(node, 1000, 0, what.cpu_milli, what.memory_mib, indices_to_mask(what.gpus), 1, 1, False)
            for gpu, milli in what.gpu_shares.items():
                self._kernel.bind(node, milli, what.gpu_memory_mib.get(gpu, 0), 0, 0, 1 << gpu, 1, 0, True)
            slot = int(self._packed.slot_milli[node])
            for gpu, count in what.gpu_slots.items():
                self._kernel.bind(node, count * slot, what.gpu_memory_mib.get(gpu, 0), 0, 0, 1 << gpu, 1, 0, True)
            self.mig.take(node, evicted.mig, evicted.name)
            self._holdings()[evicted.name] = (node, what)
            self.held_version += 1
            return
        pod, mask = what
        if pod.mig is not None:
            self.take_mig(pod, node, evicted.mig)
        elif pod.gpu_slots:
            self.take_slots(pod, node, evicted.slots)
        else:
            self.take(pod, node, mask)
        self.hold(pod, node, mask)

    def holding(self, name: str) -> tuple[int, RunningPod] | None:
        """(node, record) of the pod of this name when it holds resources now, as
        :meth:`running` gives it; None when it holds nothing."""
        found = self._holdings().get(name)
        return None if found is None else (found[0], self._as_record(found[1]))

    def _as_record(self, what: RunningPod | tuple[PodRequest, int]) -> RunningPod:
        if isinstance(what, RunningPod):
            return what
        pod, mask = what
        if pod.gpu_slots:
            return _slot_record(pod, self._slot_lists[pod.name])
        mig = tuple(MigInstance(gpu=u.gpu, profile=u.profile, start=u.start) for u in self.mig_uses(pod.name))
        return _record(pod, mask, mig)

    def running(self) -> list[tuple[int, RunningPod]]:
        """(node, record) of every pod that holds resources now, bound ones included."""
        return [(node, self._as_record(what)) for node, what in self._holdings().values()]


def slot_counts(slots: Sequence[int]) -> dict[int, int]:
    """Slots per GPU of a slot list (the GPU of each slot), by ascending GPU index."""
    counts: dict[int, int] = {}
    for gpu in sorted(slots):
        counts[gpu] = counts.get(gpu, 0) + 1
    return counts


def _slot_record(pod: PodRequest, slots: Sequence[int]) -> RunningPod:
    """What a bound pod of ``gpuSlots`` holds, as a snapshot's running pod."""
    counts = slot_counts(slots)
    return RunningPod(
        name=pod.name,
        gpu_slots=counts,
        gpu_memory_mib={gpu: pod.gpu_memory_mib for gpu in counts} if pod.gpu_memory_mib else EMPTY,
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        priority=pod.priority,
        resources=pod.resources,
    )


def _record(pod: PodRequest, mask: int, mig: tuple[MigInstance, ...] = ()) -> RunningPod:
    """What a bound pod holds, as a snapshot's running pod."""
    if mig:
        return RunningPod(
            name=pod.name, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, priority=pod.priority,
            resources=pod.resources, mig=mig,
        )
    gpus = mask_to_indices(mask)
    if pod.shared:
        gpu = gpus[0]
        return RunningPod(
            name=pod.name,
            gpu_shares={gpu: pod.gpu_milli},
            gpu_memory_mib={gpu: pod.gpu_memory_mib} if pod.gpu_memory_mib else EMPTY,
            cpu_milli=pod.cpu_milli,
            memory_mib=pod.memory_mib,
            priority=pod.priority,
            resources=pod.resources,
        )
    return RunningPod(
        name=pod.name, gpus=gpus, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, priority=pod.priority,
        resources=pod.resources,
    )
