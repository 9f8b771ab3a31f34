"""Which admitted workloads a pending one may preempt, and the fewest it needs (Kueue's
classical preemption).

Candidates come from three places, in this order: ClusterQueues of the cohort tree that
borrow where the preemptor has a hierarchical advantage (its own subtree's quota),
other borrowing ClusterQueues of the cohort (``reclaimWithinCohort``), and the preemptor's
own ClusterQueue (``withinClusterQueue``); inside each, lower priority first, then the most
recently admitted. Victims are taken in that order until the preemptor fits, then given
back, last-but-one first, while it still fits. The first attempt allows the preemptor to
borrow when ``borrowWithinCohort`` lets it, as Kueue's ``classicalPreemptions`` does.

With fair sharing, :func:`find_fair_targets` follows Kueue's ``fairPreemptions``: target
ClusterQueues are visited from the one with the highest dominant resource share down,
and a workload is taken from another queue only when a strategy
(``LessThanOrEqualToFinalShare``, ``LessThanInitialShare``) holds between the preemptor's
and the target's shares at their almost-lowest common ancestors.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from placer.queues.entries import QueuedWorkload
from placer.queues.model import ClusterQueue
from placer.queues.quota import (
    DominantShare,
    FlavorResource,
    QuotaNode,
    QuotaTree,
    available,
    compare_shares,
    dominant_share,
)

__all__ = ["ByPriority", "Target", "priority_prefilter", "satisfies_policy", "find_targets", "find_fair_targets"]

WITHIN_QUEUE = "InClusterQueue"
RECLAIM = "InCohortReclamation"
RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
FAIR_SHARING = "InCohortFairSharing"
NEGATIVE_SHARE = DominantShare(weight=1.0, ratio=-1.0)


@dataclass(frozen=True, eq=False)
class Target:
    """A workload to evict and Kueue's reason for it."""

    victim: QueuedWorkload
    reason: str


class ByPriority(Sequence[QueuedWorkload]):
    """A ClusterQueue's admitted workloads, lowest priority first: the candidates of a
    priority-limited policy are a prefix."""

    def __init__(self, workloads: Iterable[QueuedWorkload]) -> None:
        self._workloads = sorted(workloads, key=lambda w: w.priority)
        self._priorities = [w.priority for w in self._workloads]

    def __len__(self) -> int:
        return len(self._workloads)

    def __getitem__(self, index: Any) -> Any:
        return self._workloads[index]

    def below(self, priority: int, inclusive: bool) -> list[QueuedWorkload]:
        """Those of a priority below ``priority`` (or equal, when ``inclusive``)."""
        end = (bisect_right if inclusive else bisect_left)(self._priorities, priority)
        return self._workloads[:end]


def priority_prefilter(preemptor: QueuedWorkload, workloads: Sequence[QueuedWorkload], policy: str
                       ) -> Sequence[QueuedWorkload]:
    """``workloads`` less those whose priority alone rules them out under ``policy``."""
    if policy == "Any":
        return workloads
    if policy == "Never":
        return ()
    inclusive = policy != "LowerPriority"
    if isinstance(workloads, ByPriority):
        return workloads.below(preemptor.priority, inclusive)
    limit = preemptor.priority
    return [w for w in workloads if w.priority < limit or (inclusive and w.priority == limit)]


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

    def _variant(self, candidate: QueuedWorkload, advantage: bool, policy: str) -> Optional[tuple[str, bool]]:
        if not satisfies_policy(self.preemptor, candidate, policy) or not candidate.uses_any(self.frs_need):
            return None
        if candidate.cluster_queue == self.preemptor.cluster_queue:
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
        own = name == self.preemptor.cluster_queue
        policy = self.queue.preemption.within_cluster_queue if own else self.queue.preemption.reclaim_within_cohort
        for wl in priority_prefilter(self.preemptor, self.admitted.get(name, ()), policy):
            variant = self._variant(wl, advantage, policy)
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


def _order_key(preemptor_queue: str):
    def key(w: QueuedWorkload) -> tuple:
        return (w.cluster_queue == preemptor_queue, w.priority, -(w.reserved_at or 0.0), w.key)

    return key


class _FairOrdering:
    """Kueue's TargetClusterQueueOrdering: the next ClusterQueue to take a victim from."""

    def __init__(self, tree: QuotaTree, preemptor: QuotaNode, candidates: Sequence[QueuedWorkload]) -> None:
        self.tree = tree
        self.preemptor = preemptor
        self.on_path = {id(a) for a in preemptor.ancestors()}
        self.by_queue: dict[str, list[QueuedWorkload]] = {}
        for c in candidates:
            self.by_queue.setdefault(c.cluster_queue, []).append(c)
        self.pruned: set[int] = set()
        self.order = _order_key(preemptor.name)

    def has_workload(self, node: QuotaNode) -> bool:
        return bool(self.by_queue.get(node.name))

    def pop(self, node: QuotaNode) -> QueuedWorkload:
        return self.by_queue[node.name].pop(0)

    def drop(self, node: QuotaNode) -> None:
        self.pruned.add(id(node))

    def __iter__(self):
        if self.preemptor.parent is None:
            while id(self.preemptor) not in self.pruned and self.has_workload(self.preemptor):
                yield self.preemptor
            return
        root = self.preemptor.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> Optional[QuotaNode]:
        best_queue, best_queue_share = None, NEGATIVE_SHARE
        for cq in cohort.child_queues:
            if id(cq) in self.pruned:
                continue
            share = dominant_share(cq)
            if (not share.borrowing and cq is not self.preemptor) or not self.has_workload(cq):
                self.pruned.add(id(cq))
                continue
            c = compare_shares(share, best_queue_share)
            if c == 0 and best_queue is not None:
                if self.order(self.by_queue[cq.name][0]) < self.order(self.by_queue[best_queue.name][0]):
                    best_queue = cq
            elif c > 0:
                best_queue, best_queue_share = cq, share
        best_cohort, best_cohort_share = None, NEGATIVE_SHARE
        for child in cohort.child_cohorts:
            if id(child) in self.pruned:
                continue
            share = dominant_share(child)
            if not share.borrowing and id(child) not in self.on_path:
                self.pruned.add(id(child))
            elif compare_shares(share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, share
        if best_cohort is None and best_queue is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and compare_shares(best_cohort_share, best_queue_share) >= 0:
            return self._next(best_cohort)
        return best_queue

    def shares(self, target: QuotaNode) -> tuple[DominantShare, DominantShare]:
        """The preemptor's and the target's shares at their almost-lowest common ancestors."""
        lca = next(a for a in target.ancestors() if id(a) in self.on_path)
        return dominant_share(_almost(self.preemptor, lca)), dominant_share(_almost(target, lca))


def _almost(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    below = node
    for ancestor in node.ancestors():
        if ancestor is lca:
            return below
        below = ancestor
    raise AssertionError("no common ancestor")


def _passes(strategy: str, preemptor_new: DominantShare, target_old: DominantShare, target_new: DominantShare) -> bool:
    if strategy == "LessThanInitialShare":
        return compare_shares(preemptor_new, target_old) < 0
    return compare_shares(preemptor_new, target_new) <= 0


def find_fair_targets(
    tree: QuotaTree,
    queues: Mapping[str, ClusterQueue],
    admitted: Mapping[str, Sequence[QueuedWorkload]],
    preemptor: QueuedWorkload,
    frs_need: set[FlavorResource],
    usage: Mapping[FlavorResource, int],
    strategies: Sequence[str] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
    also_fits: Optional[Callable[[Sequence[QueuedWorkload]], bool]] = None,
) -> list[Target]:
    """:func:`find_targets` under fair sharing (Kueue's ``fairPreemptions``)."""
    search = _Search(tree, queues, admitted, preemptor, frs_need, usage, also_fits)
    queue, node = search.queue, search.node
    candidates: list[QueuedWorkload] = []
    if queue.preemption.within_cluster_queue != "Never":
        policy = queue.preemption.within_cluster_queue
        candidates += [w for w in priority_prefilter(preemptor, admitted.get(queue.name, ()), policy)
                       if satisfies_policy(preemptor, w, queue.preemption.within_cluster_queue) and w.uses_any(frs_need)]
    if node.parent is not None and queue.preemption.reclaim_within_cohort != "Never":
        for other in node.root().subtree_queues():
            if other is node or not any(other.borrowing_with(fr, 0) for fr in frs_need):
                continue
            policy = queue.preemption.reclaim_within_cohort
            candidates += [w for w in priority_prefilter(preemptor, admitted.get(other.name, ()), policy)
                           if satisfies_policy(preemptor, w, queue.preemption.reclaim_within_cohort)
                           and w.uses_any(frs_need)]
    if not candidates:
        return []
    candidates.sort(key=_order_key(queue.name))
    taken: list[Target] = []

    def take(w: QueuedWorkload, reason: str) -> bool:
        """Evict ``w`` in the tree; whether the preemptor now fits (its own usage aside)."""
        tree.remove(w.cluster_queue, w.usage)
        taken.append(Target(w, reason))
        tree.remove(queue.name, usage)
        try:
            return search.fits(True, [t.victim for t in taken])
        finally:
            tree.add(queue.name, usage)

    tree.add(queue.name, usage)
    within_nominal = all(not node.borrowing_with(fr, 0) for fr in frs_need)  # with its own usage, as Kueue
    fits = False
    retry: list[QueuedWorkload] = []
    ordering = _FairOrdering(tree, node, candidates)
    for target in ordering:
        if target is node:
            fits = take(ordering.pop(target), WITHIN_QUEUE)
        elif within_nominal:
            fits = take(ordering.pop(target), RECLAIM)
        else:
            preemptor_new, target_old = ordering.shares(target)
            if preemptor_new.weight == 0 and preemptor_new.ratio != 0 and not target_old.zero_weight_borrows:
                while ordering.has_workload(target):
                    retry.append(ordering.pop(target))
                continue
            while ordering.has_workload(target):
                w = ordering.pop(target)
                tree.remove(w.cluster_queue, w.usage)
                target_new = ordering.shares(target)[1]
                tree.add(w.cluster_queue, w.usage)
                if _passes(strategies[0], preemptor_new, target_old, target_new):
                    fits = take(w, FAIR_SHARING)
                    break
                retry.append(w)
        if fits:
            break
    if not fits and len(strategies) > 1:
        second = _FairOrdering(tree, node, retry)
        for target in second:
            preemptor_new, target_old = second.shares(target)
            w = second.pop(target)
            if _passes("LessThanInitialShare", preemptor_new, target_old, target_old):
                fits = take(w, FAIR_SHARING)
                if fits:
                    break
            second.drop(target)
    tree.remove(queue.name, usage)
    if fits:
        kept: list[Target] = []
        for i in range(len(taken) - 2, -1, -1):
            t = taken[i]
            tree.add(t.victim.cluster_queue, t.victim.usage)
            rest = taken[:i] + taken[i + 1:]
            if search.fits(True, [r.victim for r in rest]):
                taken = rest
            else:
                tree.remove(t.victim.cluster_queue, t.victim.usage)
        kept = taken
    else:
        kept = []
    for t in taken:
        tree.add(t.victim.cluster_queue, t.victim.usage)
    return kept
