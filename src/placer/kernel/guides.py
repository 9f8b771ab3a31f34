"""What the scored policies are told in a kernel session: the fragment measure's workload,
``fgd-pack``'s packing guide (given, or learned from the pods that arrive) and the ranked
policies' seeded node order (:func:`fgd_rank`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from placer.exceptions import InvalidInputError
from placer.kernel import pack
from placer.kernel._core import Kernel
from placer.kernel.free import FreeState
from placer.kernel.holdings import Holdings
from placer.kernel.pack import PackedCluster
from placer.model import PodRequest, RunningPod
from placer.policies import Policy
from placer.workload.fragmentation import Fragmentation, Workload, target_workload
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, Demand, PackingGuide, PackingLearner

__all__ = ["Guides", "fgd_rank", "gpus_per_model"]

_RANKS_KEPT = 64  # seeded node orders kept, at most


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


def gpus_per_model(packed: PackedCluster) -> dict[str, int]:
    """GPUs of a packed cluster per GPU model."""
    a = packed.arrays
    names = packed.model_names
    out: dict[str, int] = {}
    for model, count in zip(a["model_id"].tolist(), a["gpu_count"].tolist()):
        if count:
            out[names[model]] = out.get(names[model], 0) + count
    return out


class Guides:
    """The workload, packing guide and node order one session's policies are told.

    Parameters
    ----------
    packed : PackedCluster
    kernel : Kernel
        The kernel over ``packed``'s arrays; it is told each guide as it changes.
    free : FreeState
    holdings : Holdings
        Who holds what: a learned guide starts from the pods held.

    Attributes
    ----------
    rank : ndarray or None
        The node order of the last :meth:`prepare` (None: its policy is not ranked).
    learner : PackingLearner or None
        The learner behind the guide, when it learns (:meth:`learn_packing`).
    seen : set of str
        The pods the learner has counted, by name.
    """

    def __init__(self, packed: PackedCluster, kernel: Kernel, free: FreeState, holdings: Holdings) -> None:
        self._packed = packed
        self._kernel = kernel
        self._free = free
        self._holdings = holdings
        self._workload: Workload | None = None
        self._told: Workload | None = None
        self._packing: PackingGuide | None = None
        self._weights = (REGRET_WEIGHT, PRESSURE_WEIGHT)
        self.learner: PackingLearner | None = None
        self.seen: set[str] = set()
        self.rank: np.ndarray | None = None
        self._ranks: dict[int, np.ndarray] = {}  # fgd_rank by seed: a loop over the nodes
        self._node_frag = np.zeros(0, dtype=pack.REAL)

    def prepare(self, policy: Policy, pods: Sequence[PodRequest], seed: int) -> None:
        """The workload (of ``pods``, the first time, unless one was set), the packing guide
        (the first time: learned from the told workload, never from ``pods``) and the
        seeded node order that ``policy`` needs."""
        if policy.needs_workload and self._workload is None:
            self.fragmentation(target_workload(pods), told=False)
        if policy.needs_packing_guide and self._packing is None:
            self.learn_packing(self._told)
        self.rank = None
        if policy.ranked:
            self.rank = self._ranks.get(seed)
            if self.rank is None:
                if len(self._ranks) >= _RANKS_KEPT:
                    self._ranks.clear()
                self.rank = self._ranks[seed] = fgd_rank(self._packed.n_nodes, seed)

    # ------------------------------------------------------------------ fragmentation

    def fragmentation(self, workload: Workload, told: bool = True) -> Fragmentation:
        """The cluster's fragment F(M) now (see :meth:`KernelSession.fragmentation`)."""
        if told:
            self._told = workload
        if self._workload is not workload:
            self._node_frag = np.zeros(self._packed.n_nodes, dtype=pack.REAL)
            self._kernel.set_workload(*pack.workload_arrays(self._packed, workload, self._node_frag))
            self._workload = workload
        return Fragmentation(
            total=float(self._node_frag.sum()),
            idle_gpu_milli=int(self._free.free_gpu_milli.sum()),
            gpu_capacity_milli=int(self._free.gpu_count.sum(dtype=np.int64)) * 1000,
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

    # ------------------------------------------------------------------ packing guide

    def set_packing_weights(self, regret: float = REGRET_WEIGHT, pressure: float = PRESSURE_WEIGHT) -> None:
        """The weights of ``fgd-pack``'s regret and model-pressure terms."""
        self._weights = (float(regret), float(pressure))
        if self._packing is not None:
            self._push(self._packing)

    def set_packing(self, guide: PackingGuide) -> None:
        """Use ``guide`` for ``fgd-pack`` from now on, as it is (no learning)."""
        self.learner = None
        self._push(guide)

    def learn_packing(self, prior: Workload | None = None) -> PackingGuide:
        """Let ``fgd-pack`` learn its guide from now on, starting from ``prior`` and the
        pods held now (see :meth:`KernelSession.learn_packing`); the starting guide."""
        learner = PackingLearner(gpus_per_model(self._packed), None if prior is None else Demand.of_workload(prior))
        held_now = self._holdings.held()
        held = [what for _, what in held_now.values()]
        learner.observe(Demand.of_running([w for w in held if isinstance(w, RunningPod)]))
        learner.observe([w[0] for w in held if not isinstance(w, RunningPod)])
        self.seen.update(held_now)
        self.learner = learner
        guide = learner.refresh()
        self._push(guide)
        return guide

    def observe(self, pods: Sequence[PodRequest]) -> None:
        """Count pods as arrived for a learning guide (each name once)."""
        if self.learner is None:
            return
        seen = self.seen
        new = [p for p in pods if p.name not in seen]
        seen.update(p.name for p in new)
        self.learner.observe(new)

    def refresh_packing(self) -> bool:
        """Refresh a learning guide when due (:attr:`PackingLearner.due`); whether the
        guide in force changed."""
        if self.learner is None or not self.learner.due:
            return False
        guide = self.learner.refresh()
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
