"""Which admitted workloads a pending one may preempt, and the fewest it needs (Kueue's
classical preemption).

Candidates come from three places, in this order: ClusterQueues of the cohort tree that
borrow where the preemptor has a hierarchical advantage (its own subtree's quota),
other borrowing ClusterQueues of the cohort (``reclaimWithinCohort``), and the preemptor's
own ClusterQueue (``withinClusterQueue``); inside each, lower priority first, then the most
recently admitted. Victims are taken in that order until the preemptor fits, then given
back, last-but-one first, while it still fits. The first attempt allows the preemptor to
borrow when ``borrowWithinCohort`` lets it, as Kueue's ``classicalPreemptions`` does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence

from placer.queues.entries import QueuedWorkload
from placer.queues.model import ClusterQueue
from placer.queues.quota import FlavorResource, QuotaNode, QuotaTree, available

__all__ = ["Target", "satisfies_policy", "find_targets"]

WITHIN_QUEUE = "InClusterQueue"
RECLAIM = "InCohortReclamation"
RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


@dataclass(frozen=True, eq=False)
class Target:
    """A workload to evict and Kueue's reason for it."""

    victim: QueuedWorkload
    reason: str


def satisfies_policy(preemptor: QueuedWorkload, candidate: QueuedWorkload, policy: str) -> bool:
    """Whether ``policy`` (``LowerPriority``, ``LowerOrNewerEqualPriority``, ``Any``) lets
    ``preemptor`` preempt ``candidate``."""
    if policy == "Any":
        return True
    if policy == "LowerPriority":
        return candidate.priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority and preemptor.created < candidate.created
        )
    return False


@dataclass(frozen=True, eq=False)
class _Candidate:
    workload: QueuedWorkload
    lca: Optional[QuotaNode]
    reason: str
    borrowing_allowed: bool  # False: Kueue's ReclaimWithoutBorrowing variant


def _within_nominal(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    return node.within_nominal(frs)


def _fit_in_quota(node: QuotaNode, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
    fits = True
    remaining = {}
    for fr, amount in requests.items():
        if node.subtree.get(fr, 0) < node.usage.get(fr, 0) + amount:
            fits = False
        remaining[fr] = max(0, amount - node.local_available(fr))
    return fits, remaining


class _Search:
    """One search for the victims of one preemptor."""

    def __init__(
        self,
        tree: QuotaTree,
        queues: Mapping[str, ClusterQueue],
        admitted: Mapping[str, Sequence[QueuedWorkload]],
        preemptor: QueuedWorkload,
        frs_need: set[FlavorResource],
        usage: Mapping[FlavorResource, int],
        also_fits: Optional[Callable[[Sequence[QueuedWorkload]], bool]],
    ) -> None:
        self.tree = tree
        self.admitted = admitted
        self.preemptor = preemptor
        self.queue = queues[preemptor.cluster_queue]
        self.node = tree.queues[preemptor.cluster_queue]
        self.frs_need = frs_need
        self.usage = usage
        self.also_fits = also_fits
        policy = self.queue.preemption
        self.borrow_forbidden = policy.borrow_within_cohort == "Never"
        self.threshold = policy.max_priority_threshold

    def _variant(self, candidate: QueuedWorkload, advantage: bool) -> Optional[tuple[str, bool]]:
        if not candidate.uses_any(self.frs_need):
            return None
        own = candidate.cluster_queue == self.preemptor.cluster_queue
        policy = self.queue.preemption.within_cluster_queue if own else self.queue.preemption.reclaim_within_cohort
        if not satisfies_policy(self.preemptor, candidate, policy):
            return None
        if own:
            return WITHIN_QUEUE, True
        if advantage:
            return RECLAIM, True
        if self.borrow_forbidden:
            return RECLAIM, False
        if candidate.priority >= self.preemptor.priority or (
            self.threshold is not None and candidate.priority > self.threshold
        ):
            return RECLAIM, False
        return RECLAIM_WHILE_BORROWING, True

    def _from_queue(self, name: str, lca: Optional[QuotaNode], advantage: bool) -> list[_Candidate]:
        found = []
        for wl in self.admitted.get(name, ()):
            variant = self._variant(wl, advantage)
            if variant is not None:
                found.append(_Candidate(wl, lca, variant[0], variant[1]))
        return found

    def _in_subtree(self, current: QuotaNode, root: QuotaNode, skip: Optional[QuotaNode], advantage: bool,
                    out: list[_Candidate]) -> None:
        for child in current.child_cohorts:
            if child is skip or _within_nominal(child, self.frs_need):
                continue
            self._in_subtree(child, root, skip, advantage, out)
        for child in current.child_queues:
            if child is self.node or _within_nominal(child, self.frs_need):
                continue
            out.extend(self._from_queue(child.name, root, advantage))

    def candidates(self) -> tuple[list[_Candidate], bool, bool]:
        """All candidates in order, whether none is from another queue, and whether none
        has a hierarchical advantage."""
        own: list[_Candidate] = []
        if self.queue.preemption.within_cluster_queue != "Never":
            own = self._from_queue(self.preemptor.cluster_queue, None, False)
        hierarchy: list[_Candidate] = []
        by_priority: list[_Candidate] = []
        if self.node.parent is not None and self.queue.preemption.reclaim_within_cohort != "Never":
            advantage, remaining = _fit_in_quota(self.node, self.usage)
            previous: Optional[QuotaNode] = None
            for root in self.node.ancestors():
                self._in_subtree(root, root, previous, advantage, hierarchy if advantage else by_priority)
                fits, remaining = _fit_in_quota(root, remaining)
                advantage = advantage or fits
                previous = root
        mine = self.preemptor.cluster_queue

        def order(c: _Candidate) -> tuple:
            w = c.workload
            return (w.cluster_queue == mine, w.priority, -(w.reserved_at or 0.0), w.key)

        ordered = sorted(hierarchy, key=order) + sorted(by_priority, key=order) + sorted(own, key=order)
        return ordered, not hierarchy and not by_priority, not hierarchy

    def _valid(self, c: _Candidate, allow_borrowing: bool) -> bool:
        if c.workload.cluster_queue == self.preemptor.cluster_queue:
            return True
        if allow_borrowing and not c.borrowing_allowed:
            return False
        node = self.tree.queues[c.workload.cluster_queue]
        if _within_nominal(node, self.frs_need):
            return False
        for ancestor in node.ancestors():
            if ancestor is c.lca:
                break
            if _within_nominal(ancestor, self.frs_need):
                return False
        return True

    def fits(self, allow_borrowing: bool, removed: Sequence[QueuedWorkload]) -> bool:
        for fr, amount in self.usage.items():
            if not allow_borrowing and self.node.borrowing_with(fr, amount):
                return False
            if amount > max(0, available(self.node, fr)):
                return False
        return self.also_fits is None or self.also_fits(removed)

    def _under_nominal(self) -> bool:
        return all(self.node.quota(fr).nominal > self.node.usage.get(fr, 0) for fr in self.frs_need)

    def run(self) -> list[Target]:
        ordered, none_from_others, none_hierarchical = self.candidates()
        if none_from_others or (self.borrow_forbidden and not self._under_nominal()):
            attempts = [True]
        elif self.borrow_forbidden and none_hierarchical:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for allow_borrowing in attempts:
            taken: list[_Candidate] = []
            for c in ordered:
                if not self._valid(c, allow_borrowing):
                    continue
                self.tree.remove(c.workload.cluster_queue, c.workload.usage)
                taken.append(c)
                if self.fits(allow_borrowing, [t.workload for t in taken]):
                    taken = self._fill_back(taken, allow_borrowing)
                    for t in taken:
                        self.tree.add(t.workload.cluster_queue, t.workload.usage)
                    return [Target(t.workload, t.reason) for t in taken]
            for t in taken:
                self.tree.add(t.workload.cluster_queue, t.workload.usage)
        return []

    def _fill_back(self, taken: list[_Candidate], allow_borrowing: bool) -> list[_Candidate]:
        for i in range(len(taken) - 2, -1, -1):
            c = taken[i]
            self.tree.add(c.workload.cluster_queue, c.workload.usage)
            rest = taken[:i] + taken[i + 1:]
            if self.fits(allow_borrowing, [t.workload for t in rest]):
                taken = rest
            else:
                self.tree.remove(c.workload.cluster_queue, c.workload.usage)
        return taken


def find_targets(
    tree: QuotaTree,
    queues: Mapping[str, ClusterQueue],
    admitted: Mapping[str, Sequence[QueuedWorkload]],
    preemptor: QueuedWorkload,
    frs_need: set[FlavorResource],
    usage: Mapping[FlavorResource, int],
    also_fits: Optional[Callable[[Sequence[QueuedWorkload]], bool]] = None,
) -> list[Target]:
    """The workloads to evict so that ``usage`` of ``preemptor`` fits (none: it cannot).

    ``admitted`` lists each ClusterQueue's admitted workloads; ``frs_need`` are the flavor
    and resource pairs that need preemption; ``also_fits`` is a further check with the
    victims gone (placement on the cluster). The tree is left as it was found.
    """
    return _Search(tree, queues, admitted, preemptor, frs_need, usage, also_fits).run()
