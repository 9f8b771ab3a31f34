"""Flavor assignment: which flavor of each resource group a pending workload's pod sets
take, and whether they fit there, need preemption, or fit nowhere (Kueue's flavor
assigner with flavor fungibility).

For every pod set and resource group, flavors are tried in the ClusterQueue's order. A
flavor is skipped when its ``nodeTaints`` are not tolerated or the pod's node selector or
required node affinity contradicts its labels. In a flavor, each resource is *fit* (free quota, at a borrowing
level: 0 within nominal quota, else the height of the lowest cohort subtree where it
fits), *preempt* or *reclaim* (victims would make room), *no candidates* or *no fit*.
``whenCanBorrow`` / ``whenCanPreempt`` decide whether a flavor that needs borrowing or
preemption ends the search (``MayStopSearch``) or the next is tried (``TryNextFlavor``),
the best found being kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from placer.model import PodRequest, first_untolerated_taint
from placer.model.affinity import node_affinity_matches, required_on_keys
from placer.queues.entries import QueuedWorkload
from placer.queues.model import ClusterQueue, FlavorFungibility, QueueConfig, ResourceFlavor, ResourceGroup
from placer.queues.quota import FlavorResource, QuotaTree, available, potential_available

__all__ = ["NO_FIT", "NO_CANDIDATES", "PREEMPT", "RECLAIM", "FIT", "FlavorAssignment", "assign_flavors"]

NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
WORST = (NO_FIT, 1 << 30)
BEST = (FIT, 0)

Oracle = Callable[[QueuedWorkload, FlavorResource, int], tuple[int, int]]
"""``(workload, fr, amount) -> (mode, borrowing level after preemption)``."""


def _preferred(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Kueue's isPreferred with the default preference (borrowing over preemption)."""
    if a[0] == NO_FIT:
        return False
    if b[0] == NO_FIT:
        return True
    if (a[0] == NO_CANDIDATES) != (b[0] == NO_CANDIDATES):
        return a[0] != NO_CANDIDATES
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _try_next(mode: tuple[int, int], fungibility: FlavorFungibility) -> bool:
    if mode[0] in (NO_FIT, NO_CANDIDATES):
        return True
    if mode[0] in (PREEMPT, RECLAIM) and fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return mode[1] > 0 and fungibility.when_can_borrow == "TryNextFlavor"


@dataclass
class FlavorAssignment:
    """The flavors of one workload: per pod set and resource, the flavor and its mode."""

    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    modes: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    borrowing: int = 0
    no_fit: bool = False
    reasons: list[str] = field(default_factory=list)

    @property
    def mode(self) -> str:
        """``Fit``, ``Preempt`` or ``NoFit``, as Kueue's representative mode."""
        if self.no_fit:
            return "NoFit"
        if any(m != FIT for m in self.modes.values()):
            return "Preempt"
        return "Fit"

    def needs_preemption(self) -> set[FlavorResource]:
        return {fr for fr, m in self.modes.items() if m != FIT}

    @property
    def reason(self) -> str:
        return "; ".join(dict.fromkeys(self.reasons)) or "does not fit"


def flavor_matches(pod: Optional[PodRequest], flavor: ResourceFlavor) -> Optional[str]:
    """Why a pod set cannot take ``flavor`` (None: it can), in Kueue's words.

    Kueue's ``checkFlavorForPodSets``: a ``NoSchedule`` or ``NoExecute`` taint of the
    flavor's ``nodeTaints`` that neither the pod nor the flavor tolerates, then the pod's
    ``nodeSelector`` and required node affinity on the flavor's ``nodeLabels``, read on
    the keys those labels name only (:func:`placer.model.affinity.required_on_keys`).
    """
    tolerations = (pod.tolerations if pod is not None else ()) + flavor.tolerations
    taint = first_untolerated_taint(flavor.node_taints, tolerations)
    if taint is not None:
        # Kueue prints the v1.Taint struct: {key value effect timeAdded}
        added = "<nil>" if taint.time_added is None else taint.time_added
        return f"untolerated taint {{{taint.key} {taint.value} {taint.effect} {added}}} in flavor {flavor.name}"
    if pod is not None:
        selector, affinity = required_on_keys(pod.node_selector, pod.affinity, flavor.node_labels)
        if not node_affinity_matches(selector, affinity, flavor.node_labels, ""):
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


class _Assigner:
    def __init__(self, config: QueueConfig, tree: QuotaTree, oracle: Oracle, fair_sharing: bool) -> None:
        self.config = config
        self.tree = tree
        self.oracle = oracle
        self.fair_sharing = fair_sharing

    def _can_preempt_while_borrowing(self, queue: ClusterQueue) -> bool:
        p = queue.preemption
        return p.borrow_within_cohort != "Never" or (self.fair_sharing and p.reclaim_within_cohort != "Never")

    def _fits_quota(self, wl: QueuedWorkload, queue: ClusterQueue, fr: FlavorResource, amount: int,
                    reasons: list[str]) -> tuple[int, int]:
        node = self.tree.queues[queue.name]
        free = max(0, available(node, fr))
        if amount > potential_available(node, fr):
            reasons.append(f"insufficient quota for {fr[1]} in flavor {fr[0]}, request > maximum capacity")
            return NO_FIT, 0
        level, may_reclaim = self.tree.borrowing_level(queue.name, fr, amount)
        if amount <= free:
            return FIT, level
        reasons.append(f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, {amount - free} more needed")
        if node.quota(fr).nominal >= amount or may_reclaim or self._can_preempt_while_borrowing(queue):
            return self.oracle(wl, fr, amount)
        return NO_FIT, level

    def _group(self, wl: QueuedWorkload, queue: ClusterQueue, pod: Optional[PodRequest], group: ResourceGroup,
               requests: Mapping[str, int], assumed: Mapping[FlavorResource, int], reasons: list[str]
               ) -> tuple[Optional[dict[str, tuple[str, int, int]]], tuple[int, int]]:
        wanted = {r: v for r, v in requests.items() if r in group.covered_resources}
        best: Optional[dict[str, tuple[str, int, int]]] = None
        best_mode = WORST
        for flavor_quotas in group.flavors:
            flavor = self.config.flavors.get(flavor_quotas.name) or ResourceFlavor(flavor_quotas.name)
            mismatch = flavor_matches(pod, flavor)
            if mismatch is not None:
                reasons.append(mismatch)
                continue
            chosen: dict[str, tuple[str, int, int]] = {}
            mode = BEST
            for resource, amount in wanted.items():
                fr = (flavor.name, resource)
                res_mode, level = self._fits_quota(wl, queue, fr, assumed.get(fr, 0) + amount, reasons)
                if _preferred(mode, (res_mode, level)):
                    mode = (res_mode, level)
                if mode[0] == NO_FIT:
                    break
                chosen[resource] = (flavor.name, res_mode, level)
            if not _try_next(mode, queue.flavor_fungibility):
                return chosen, mode
            if _preferred(mode, best_mode):
                best, best_mode = chosen, mode
        return best, best_mode

    def assign(self, wl: QueuedWorkload) -> FlavorAssignment:
        queue = self.config.cluster_queues[wl.cluster_queue]
        out = FlavorAssignment()
        for ps, requests in zip(wl.workload.pod_sets, wl.requests):
            flavors: dict[str, str] = {}
            for resource, amount in requests.items():
                if resource in flavors:
                    continue
                group = next((g for g in queue.resource_groups if resource in g.covered_resources), None)
                if group is None:
                    if amount == 0:
                        continue
                    out.reasons.append(f"resource {resource} unavailable in ClusterQueue")
                    out.no_fit = True
                    return out
                chosen, mode = self._group(wl, queue, ps.pod, group, requests, out.usage, out.reasons)
                if not chosen or mode[0] == NO_FIT:
                    out.no_fit = True
                    return out
                for res, (flavor, res_mode, level) in chosen.items():
                    flavors[res] = flavor
                    fr = (flavor, res)
                    out.usage[fr] = out.usage.get(fr, 0) + requests[res]
                    out.modes[fr] = min(out.modes.get(fr, FIT), res_mode)
                    out.borrowing = max(out.borrowing, level)
            out.flavors[ps.name] = flavors
        return out


def assign_flavors(config: QueueConfig, tree: QuotaTree, wl: QueuedWorkload, oracle: Oracle,
                   fair_sharing: bool = False) -> FlavorAssignment:
    """The flavor assignment of a pending workload against the tree's current usage.

    ``oracle`` answers whether preemption could free ``amount`` of a flavor and resource
    (mode :data:`PREEMPT`, :data:`RECLAIM` or :data:`NO_CANDIDATES`) and the borrowing
    level afterwards.
    """
    return _Assigner(config, tree, oracle, fair_sharing).assign(wl)
