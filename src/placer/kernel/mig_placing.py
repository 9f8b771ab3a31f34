"""Placing MIG pods in a kernel session: which nodes may take one, why the others cannot,
and the bind of the instances the policy's MIG choice picks (:class:`MigPlacing`; the
slices themselves are :class:`~placer.kernel.mig.MigState`'s)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from placer.kernel import pack
from placer.kernel.holdings import Holdings
from placer.kernel.mig import MigState
from placer.kernel.pack import PackedCluster
from placer.model import MigUse, PodRequest, reasons
from placer.model.fit import short_of
from placer.policies import Policy

__all__ = ["MigPlacing"]


class MigPlacing:
    """MIG pods through one session: node filters, shortfall reasons, the MIG choice.

    Parameters
    ----------
    packed : PackedCluster
    mig : MigState
        The cluster's MIG GPUs and instances.
    holdings : Holdings
        Who holds what; a placed MIG pod is taken there.
    """

    def __init__(self, packed: PackedCluster, mig: MigState, holdings: Holdings) -> None:
        self._packed = packed
        self._mig = mig
        self._holdings = holdings
        self._values: dict[int, np.ndarray] | None = None  # per MIG table: the demand mix's value per mask

    @property
    def has_demand(self) -> bool:
        """Whether the ``aware`` choice's demand mix is set (:meth:`set_demand`)."""
        return self._values is not None

    def set_demand(self, pods: Sequence[PodRequest], told: bool = False) -> None:
        """Weigh MIG profiles by how often ``pods`` ask for them (the ``aware`` choice's
        demand mix); without MIG pods, every non-media profile weighs the same. ``told``:
        the caller's workload, not the pods being placed, so the start choice looks ahead
        to the layouts it makes likely (:meth:`MigState.set_mix`)."""
        mig = self._mig
        weights = [np.zeros(len(t.table.profiles)) for t in mig.tables]
        asked = [pod.mig for pod in pods if pod.mig is not None]
        for request in asked:
            for t, profile in enumerate(mig.profiles_for(request)):
                if profile is not None:
                    weights[t][profile.index] += request.count
        for t, w in enumerate(weights):
            if not w.any():
                w[:] = [0.0 if p.media else 1.0 for p in mig.tables[t].table.profiles]
            w /= w.sum()
        self._values = {t: mig.tables[t].value(w) for t, w in enumerate(weights)}
        if told:
            mig.set_mix(weights)

    def allowed(self, pod: PodRequest, only: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int]]:
        """Nodes a MIG pod may use before its MIG fit, and per reason the nodes turned
        away (see :meth:`KernelSession.mig_allowed`)."""
        ec = self._packed.eligibility(pod)
        allowed = pack.bitset_nodes(ec.bits, self._packed.n_nodes)
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
        reject(short_of(a["cpu_free"], pod.cpu_milli), reasons.RESOURCE_REASONS[0])
        reject(short_of(a["mem_free"], pod.memory_mib), reasons.RESOURCE_REASONS[1])
        reject(a["pods_free"] < 1, reasons.RESOURCE_REASONS[2])
        return allowed, counts

    def place(
        self, pod: PodRequest, policy: Policy, only: np.ndarray | None = None
    ) -> tuple[int, list[MigUse]] | dict[str, int]:
        """Place one MIG pod and bind it (see :meth:`KernelSession.place_mig`)."""
        request = pod.mig
        assert request is not None
        allowed, counts = self.allowed(pod, only)
        if self._values is None and policy.mig_choice == "aware":
            self.set_demand([pod])
        found = self._mig.choose(request, allowed, policy.mig_choice, self._values)
        if found is None:
            counts.update(self.shortfall(request, allowed))
            return counts
        node, uses = found
        self._holdings.take_mig(pod, node, uses)
        return node, uses

    def shortfall(self, request: Any, nodes: np.ndarray) -> dict[str, int]:
        """Per MIG reason, how many of ``nodes`` cannot give the request's instances now."""
        mig = self._mig
        table = mig.node_table
        short = nodes & (mig.node_capacity(request) < request.count)
        none = short & (table < 0)
        out = {reasons.NO_MIG: int(none.sum())}
        has = np.array([p is not None for p in mig.profiles_for(request)] + [False], dtype=bool)
        missing = short & (table >= 0) & ~has[table]
        out[reasons.mig_profile_missing(request.profile, request.memory_mib)] = int(missing.sum())
        out[reasons.insufficient(reasons.mig_resource(request.profile, request.memory_mib))] = int(
            (short & ~none & ~missing).sum()
        )
        return {k: v for k, v in out.items() if v}
