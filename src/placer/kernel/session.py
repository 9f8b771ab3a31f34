"""One cluster's kernel state behind one typed front: the only owner of what is free.

A :class:`KernelSession` packs a snapshot once and then answers every question the rest of
placer asks the kernel: place a run of pods, place pods on chosen nodes, score nodes, take
or give back what a pod holds, read what is free. Nothing outside this package sees a dtype
or a kernel array by name. The session holds the lock and delegates each concern to its
module of ``placer.kernel``:

* :mod:`~placer.kernel.free` -- what is free (:class:`FreeState`, :class:`NodeFree`);
* :mod:`~placer.kernel.runs` -- runs of pods, node scores and reasons (:class:`Run`);
* :mod:`~placer.kernel.guides` -- the workload, packing guide and node order the policies
  are told (:func:`fgd_rank`);
* :mod:`~placer.kernel.mig_placing` -- MIG pods (the slices: :mod:`~placer.kernel.mig`);
* :mod:`~placer.kernel.holdings` -- who holds what: bind, release, evict, restore
  (:class:`Evicted`);
* :mod:`~placer.kernel.relations` -- the inter-pod rules of a batch, compiled for the
  kernel, and the pods on the nodes they count (:class:`~placer.kernel.relations.Occupants`).
"""
from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from placer._serial import serialised
from placer.kernel import pack
from placer.kernel._core import Kernel
from placer.kernel.free import FreeState, NodeFree, extended_free, free_state, node_free
from placer.kernel.guides import Guides, fgd_rank, gpus_per_model
from placer.kernel.holdings import Evicted, Holdings, slot_counts
from placer.kernel.mig import MigState
from placer.kernel.mig_placing import MigPlacing
from placer.kernel.pack import PackedCluster, mask_to_indices
from placer.kernel.relations import Occupants
from placer.kernel.runs import BatchPlacer, Run
from placer.model import ClusterSnapshot, MigInstance, MigUse, PodRequest, RunningPod
from placer.model.affinity import NodeSelectorTerm
from placer.policies import Policy
from placer.workload.fragmentation import Fragmentation, Workload
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, PackingGuide, PackingLearner

__all__ = ["KernelSession", "FreeState", "NodeFree", "Run", "Evicted", "fgd_rank", "slot_counts"]


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
        kernel = Kernel(p.arrays, len(p.model_names))
        for t, kind in enumerate(p.kinds):
            if kind.nics:
                kernel.set_nics(t, kind.nic_classes())
        self.mig = MigState(snapshot, p.mig_nodes)
        self.free = free_state(p)
        self.views: dict[str, tuple[int, Any]] = {}  # name -> (held_version, view) of derived views
        occupants = Occupants.of(p.holdings)
        self._holdings = Holdings(snapshot, p, kernel, self.mig, self.free, occupants)
        self._guides = Guides(p, kernel, self.free, self._holdings)
        self._runs = BatchPlacer(p, kernel, self.free, self._guides, occupants)
        self._mig_placing = MigPlacing(p, self.mig, self._holdings)

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

    def label_column(self, key: str) -> tuple[np.ndarray, Mapping[str, int]]:
        """Per node, its value of label ``key`` as a code into the key's distinct values
        (-1: the node lacks the label), and those values with their codes (cached per key)."""
        return self._packed.label_column(key)

    def term_nodes(self, term: NodeSelectorTerm) -> np.ndarray:
        """The nodes (bool per node) a node selector term matches (an empty term: none)."""
        return self._packed.term_nodes(term)

    def node_affinity_nodes(self, pod: PodRequest) -> np.ndarray:
        """The nodes (bool per node) kube-scheduler's NodeAffinity filter lets ``pod`` use:
        its ``nodeSelector`` and its required node affinity."""
        return self._packed.node_affinity_nodes(pod)

    def static_reasons(self, pod: PodRequest) -> dict[str, int]:
        """Nodes per reason that the pod's static filters turn away."""
        return dict(self._packed.eligibility(pod).static_reasons)

    def resource_turned(self, pod: PodRequest) -> tuple[np.ndarray, np.ndarray]:
        """The nodes the pod's static filters turn away for a resource they lack, and per
        node that reason (:meth:`placer.kernel.pack.EligibilityClass.resource_turned`)."""
        return self._packed.eligibility(pod).resource_turned()

    def gpus_per_model(self) -> dict[str, int]:
        """GPUs of the cluster per GPU model."""
        return gpus_per_model(self._packed)

    def nic_names(self, node: int, nic_mask: int) -> tuple[str, ...]:
        """The names of the NICs of a mask the kernel chose on ``node``."""
        if not nic_mask:
            return ()
        names = self._packed.kinds[int(self._packed.arrays["kind_of"][node])].nics
        return tuple(names[j].name for j in mask_to_indices(nic_mask))

    def node_free(self, node: int) -> NodeFree:
        """What is free on node ``node`` now."""
        return node_free(self._packed, self.snapshot, node)

    def state_bytes(self) -> int:
        """Bytes held by the kernel's state arrays."""
        return sum(a.nbytes for a in self._packed.arrays.values())

    def extended_free(self, name: str, node: int) -> int:
        """Free count of the extended resource ``name`` on ``node`` (0 where not offered)."""
        return extended_free(self._packed, name, node)

    # ------------------------------------------------------------------ policies (guides.py)

    def prepare(self, policy: Policy, pods: Sequence[PodRequest], seed: int) -> None:
        """Set up what ``policy`` needs before placing ``pods``: the fragmentation workload
        (of these pods, the first time, unless one was set), the packing guide (the first
        time: :meth:`learn_packing` from the told workload, never from ``pods``), the MIG
        demand mix of the ``aware`` choice, the seeded node order, and the MIG pods still to
        place that the MIG start choice looks ahead to (:meth:`MigState.set_pending`)."""
        self._guides.prepare(policy, pods, seed)
        if self.mig.n_rows:
            self.mig.set_pending(pods)
        if policy.mig_choice == "aware" and not self._mig_placing.has_demand and self.mig.n_rows:
            self._mig_placing.set_demand(pods)

    def fragmentation(self, workload: Workload, told: bool = True) -> Fragmentation:
        """The cluster's fragment F(M) now (FGD measure; ``placer.workload.fragmentation``).

        The first call for a workload computes every node's fragment in the kernel; from
        then on each bind or release updates only its node. ``told``: the caller gave this
        workload (not derived from pods to place), so :meth:`prepare` may start the packing
        guide from it.
        """
        return self._guides.fragmentation(workload, told)

    @property
    def workload(self) -> Workload | None:
        """The workload of the fragment measure, once set."""
        return self._guides.workload

    def node_fragment(self, node: int) -> float:
        """F_n(M) of one node for the current workload."""
        return self._guides.node_fragment(node)

    def set_packing_weights(self, regret: float = REGRET_WEIGHT, pressure: float = PRESSURE_WEIGHT) -> None:
        """The weights of ``fgd-pack``'s regret and model-pressure terms (defaults:
        :data:`placer.workload.packing.REGRET_WEIGHT`, :data:`placer.workload.packing.PRESSURE_WEIGHT`)."""
        self._guides.set_packing_weights(regret, pressure)

    def set_packing(self, guide: PackingGuide) -> None:
        """Use ``guide`` for ``fgd-pack`` from now on, as it is (no learning)."""
        self._guides.set_packing(guide)

    def learn_packing(self, prior: Workload | None = None) -> PackingGuide:
        """Let ``fgd-pack`` learn its guide from now on (:class:`placer.workload.packing.PackingLearner`).

        The guide starts from ``prior`` (counted as :data:`placer.workload.packing.PRIOR_PODS` pods)
        and the pods the cluster holds now, and follows the pods placed with ``learn``
        (:meth:`place`, :meth:`observe`). Returns the starting guide.
        """
        return self._guides.learn_packing(prior)

    def observe(self, pods: Sequence[PodRequest]) -> None:
        """Count pods as arrived for a learning guide (each name once)."""
        self._guides.observe(pods)

    def refresh_packing(self) -> bool:
        """Refresh a learning guide when due (:attr:`PackingLearner.due`); whether the
        guide in force changed."""
        return self._guides.refresh_packing()

    @property
    def packing(self) -> PackingGuide | None:
        """The packing guide of ``fgd-pack`` now, once set."""
        return self._guides.packing

    @property
    def packing_learner(self) -> PackingLearner | None:
        """The learner behind the guide, when it learns (:meth:`learn_packing`)."""
        return self._guides.learner

    # ------------------------------------------------------------------ placing (runs.py)

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
        return self._runs.place(pods, policy, rng, groups, only, trace, reasons, learn)

    def place_on(
        self, pods: Sequence[PodRequest], nodes: Sequence[int], policy: Policy, rng: np.ndarray
    ) -> tuple[list[int], list[int]] | None:
        """Place pod j on node ``nodes[j]``, its GPUs (and NICs) chosen there by ``policy``;
        all or nothing. Returns the GPU and NIC masks, or ``None`` with nothing bound."""
        return self._runs.place_on(pods, nodes, policy, rng)

    def node_scores(self, pod: PodRequest, policy: Policy) -> np.ndarray:
        """Every node's score for ``pod`` under ``policy``, higher is better (nothing is
        bound; ``Kernel.node_scores``); the lowest int64 where the pod may not go."""
        return self._runs.node_scores(pod, policy)

    def node_reasons(self, pod: PodRequest, nodes: Sequence[int] | np.ndarray) -> list[str]:
        """Why each of ``nodes`` cannot take ``pod`` (no MIG, no ``gpuSlots``) now, in
        kube-scheduler's words: the first static filter that turns it away, in kube's order
        (NodeAffinity's PreFilter of node names, unschedulable, node name, taint, node
        affinity/selector, then GPU model), else a host port a pod there holds
        (:data:`placer.model.reasons.PORTS`, kube's NodePorts), else the first resource it lacks (pod slots, CPU,
        memory, an extended resource, GPU memory, GPUs), else the first inter-pod rule it fails
        (:data:`placer.model.reasons.RELATIONAL_REASONS`: spread, affinity, anti-affinity,
        existing pods' anti-affinity). A node that fails nothing of these turns the pod away
        for its GPU sets or NICs (``Insufficient nvidia.com/gpu`` or
        :data:`placer.model.reasons.NICS`)."""
        return self._runs.node_reasons(pod, nodes)

    def ports_blocked(self, pod: PodRequest) -> np.ndarray:
        """The nodes (bool per node) where a pod on the node holds a host port ``pod``
        needs now (kube's NodePorts filter; bound pods included)."""
        return self._runs.ports_blocked(pod)

    def port_holders(self, pod: PodRequest, node: int) -> list[str]:
        """The pods on ``node`` now that hold a host port ``pod`` needs."""
        return self._runs.port_holders(pod, node)

    def inter_pod_failures(self, pod: PodRequest) -> dict[int, str]:
        """Node -> kube's inter-pod reason (spread, affinity, anti-affinity, existing pods'
        anti-affinity) that turns ``pod`` away now, for the nodes that do (the paths of MIG
        and ``gpuSlots`` pods, which the kernel's batches do not place, read it)."""
        return self._runs.inter_pod_failures(pod)

    # ------------------------------------------------------------------ MIG (mig_placing.py)

    def set_mig_demand(self, pods: Sequence[PodRequest]) -> None:
        """Weigh MIG profiles by how often ``pods`` ask for them (the ``aware`` choice's
        demand mix, which the MIG start choice of every policy also looks ahead to); without
        MIG pods, every non-media profile weighs the same."""
        self._mig_placing.set_demand(pods, told=True)

    def mig_allowed(self, pod: PodRequest, only: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int]]:
        """Nodes a MIG pod may use before its MIG fit (static filters, CPU, memory, pod
        slots, GPU models), and per reason the nodes turned away; ``only``: among these
        nodes (a bool mask)."""
        return self._mig_placing.allowed(pod, only)

    def place_mig(
        self, pod: PodRequest, policy: Policy, only: np.ndarray | None = None
    ) -> tuple[int, list[MigUse]] | dict[str, int]:
        """Place one MIG pod with ``policy``'s MIG choice and bind it: (node, instances),
        or, when no node can take it, the nodes per reason (nothing bound). ``only``: a
        bool mask of the nodes it may use (the reasons count only these)."""
        return self._mig_placing.place(pod, policy, only)

    def mig_shortfall(self, request: Any, nodes: np.ndarray) -> dict[str, int]:
        """Per MIG reason, how many of ``nodes`` cannot give the request's instances now."""
        return self._mig_placing.shortfall(request, nodes)

    def take_mig(self, pod: PodRequest, node: int, uses: Sequence[MigUse]) -> None:
        """Bind a MIG pod on ``node`` with these instances; no checks."""
        self._holdings.take_mig(pod, node, uses)

    def mig_uses(self, name: str) -> tuple[MigUse, ...]:
        """The instances a pod uses, ``create`` where placer created them for it."""
        return self.mig.uses_of(name)

    def mig_instances(self, node: int) -> tuple[MigInstance, ...]:
        """The instances that exist on a node now, free or in use, by GPU and start."""
        return self.mig.instances_on(node)

    # ------------------------------------------------------------------ holding (holdings.py)

    @property
    def held_version(self) -> int:
        """Counts changes of who holds what (a cache key for :attr:`views` of it)."""
        return self._holdings.version

    def take(self, pod: PodRequest, node: int, mask: int) -> None:
        """Bind ``pod`` on ``node`` with GPU ``mask`` (whole GPUs, or the shared GPU); no checks.
        A pod of ``gpuSlots`` takes one slot on each GPU of ``mask`` (:meth:`take_slots`
        places slots that stack)."""
        self._holdings.take(pod, node, mask)

    def give_back(self, pod: PodRequest, node: int, mask: int) -> None:
        """Undo :meth:`take`."""
        self._holdings.give_back(pod, node, mask)

    def give_back_all(self, placed: Sequence[tuple[PodRequest, int, int]]) -> None:
        """Undo :meth:`take` of each ``(pod, node, mask)`` of ``placed``, last first (one
        call for a run of pods a call placed and keeps not)."""
        self._holdings.give_back_all(placed)

    def take_slots(self, pod: PodRequest, node: int, slots: Sequence[int]) -> int:
        """Bind a pod of ``gpuSlots`` on a sharing node, slot ``j`` on GPU ``slots[j]``; no
        checks. Returns the mask of its GPUs (what :meth:`give_back` and :meth:`hold` take)."""
        return self._holdings.take_slots(pod, node, slots)

    def slot_list(self, name: str) -> tuple[int, ...]:
        """The GPU of each slot a bound pod of ``gpuSlots`` holds, ascending (a GPU repeats
        when the pod's slots stack on it)."""
        return self._holdings.slot_list(name)

    def hold(self, pod: PodRequest, node: int, mask: int) -> None:
        """Record that ``pod`` (already taken) now holds ``mask`` on ``node``."""
        self._holdings.hold(pod, node, mask)

    def hold_all(self, placed: Iterable[tuple[PodRequest, int, int]]) -> None:
        """:meth:`hold` each (pod, node, GPU mask).

        The batch is filed by pod name when the holdings are next read: a cluster placed
        once and dropped (:func:`placer.place`) never files it.
        """
        self._holdings.hold_all(placed)

    def first_held(self, pods: Sequence[PodRequest]) -> int:
        """The position of the first of ``pods`` that is bound or running now, -1 for none."""
        return self._holdings.first_held(pods)

    def held_among(self, names: Iterable[str]) -> set[str]:
        """Which of ``names`` are pods that are bound or running now."""
        return self._holdings.held_among(names)

    def holds(self, name: str) -> bool:
        """Whether a pod of this name is bound or running."""
        return self._holdings.holds(name)

    def misfit(self, pod: PodRequest, node: int, gpus: Sequence[int], mig: Sequence[MigUse] = ()) -> str:
        """Why ``pod`` cannot hold exactly ``gpus`` and the MIG instances ``mig`` on ``node``
        now ("" when it can)."""
        return self._holdings.misfit(pod, node, gpus, mig)

    def bind_all(
        self, items: Sequence[tuple[PodRequest, int, Sequence[int], Sequence[MigUse]]]
    ) -> tuple[str, str] | None:
        """Take and hold each (pod, node, GPU indices, MIG instances), all or nothing.

        For a pod of ``gpuSlots`` the indices name the GPU of each slot (a GPU repeats when
        slots stack on it). Returns None when every pod was bound, else (pod name, why) for
        the first that did not fit, with nothing bound.
        """
        return self._holdings.bind_all(items)

    def release(self, name: str) -> None:
        """Give back everything a bound or running pod holds."""
        self._holdings.release(name)

    def evict(self, name: str) -> Evicted:
        """Release a bound or running pod and return what :meth:`restore` needs to put it
        back exactly (its GPUs, shares, slots and MIG instances)."""
        return self._holdings.evict(name)

    def restore(self, evicted: Evicted) -> None:
        """Undo :meth:`evict`: the pod holds again what it held."""
        self._holdings.restore(evicted)

    def holding(self, name: str) -> tuple[int, RunningPod] | None:
        """(node, record) of the pod of this name when it holds resources now, as
        :meth:`running` gives it; None when it holds nothing."""
        return self._holdings.holding(name)

    def running(self) -> list[tuple[int, RunningPod]]:
        """(node, record) of every pod that holds resources now, bound ones included."""
        return self._holdings.running()
