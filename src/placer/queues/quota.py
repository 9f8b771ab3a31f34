"""Quota arithmetic of ClusterQueues and cohorts, as Kueue's scheduler cache does it.

Every ClusterQueue and cohort is a node of a tree. A node's *subtree quota* of a flavor and
resource is its own nominal quota plus what its children lend it (a child keeps
``subtree − lendingLimit`` for itself); its *usage* is what its workloads use, and a child's
usage beyond what it keeps is also the parent's usage. A ClusterQueue may use what is free
in its subtree and, up to its ``borrowingLimit``, what is free further up.

The functions follow Kueue's ``pkg/cache/scheduler/resource_node.go`` (available,
potentialAvailable, addUsage, removeUsage) and its fair-sharing dominant resource share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Optional

from placer.queues.model import QueueConfig, ResourceGroup, ResourceQuota

__all__ = ["FlavorResource", "QuotaNode", "QuotaTree", "DominantShare", "compare_shares"]

FlavorResource = tuple[str, str]
"""``(flavor, resource)``."""

NO_QUOTA = ResourceQuota(nominal=0)


@dataclass(eq=False)
class QuotaNode:
    """One ClusterQueue (``is_queue``) or cohort of the quota tree."""

    name: str
    is_queue: bool
    quotas: dict[FlavorResource, ResourceQuota]
    fair_weight: float = 1.0
    parent: Optional["QuotaNode"] = None
    child_cohorts: list["QuotaNode"] = field(default_factory=list)
    child_queues: list["QuotaNode"] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    def quota(self, fr: FlavorResource) -> ResourceQuota:
        return self.quotas.get(fr, NO_QUOTA)

    def local_quota(self, fr: FlavorResource) -> int:
        """What the node keeps for itself: ``subtree − lendingLimit`` (0 without a limit)."""
        lending = self.quota(fr).lending_limit
        return max(0, self.subtree.get(fr, 0) - lending) if lending is not None else 0

    def local_available(self, fr: FlavorResource) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FlavorResource, amount: int) -> bool:
        """Whether usage plus ``amount`` exceeds the node's nominal (a cohort: its subtree)."""
        limit = self.quota(fr).nominal if self.is_queue else self.subtree.get(fr, 0)
        return self.usage.get(fr, 0) + amount > limit

    def within_nominal(self, frs: Iterable[FlavorResource]) -> bool:
        return all(self.usage.get(fr, 0) <= self.subtree.get(fr, 0) for fr in frs)

    def ancestors(self) -> Iterator["QuotaNode"]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> "QuotaNode":
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree_queues(self) -> list["QuotaNode"]:
        found = list(self.child_queues)
        for child in self.child_cohorts:
            found.extend(child.subtree_queues())
        return found

    def height(self) -> int:
        """Kueue's height of a cohort: 1 over ClusterQueues, one more per cohort level."""
        h = min(len(self.child_cohorts) + len(self.child_queues), 1)
        for child in self.child_cohorts:
            h = max(h, child.height() + 1)
        return h


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """What ``node`` may still use of ``fr``, through its ancestors (may be negative)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    from_parent = available(node.parent, fr)
    borrowing_limit = node.quota(fr).borrowing_limit
    if borrowing_limit is not None:
        kept = node.local_quota(fr)
        stored_in_parent = node.subtree.get(fr, 0) - kept
        used_in_parent = max(0, node.usage.get(fr, 0) - kept)
        from_parent = min(stored_in_parent - used_in_parent + borrowing_limit, from_parent)
    return node.local_available(fr) + from_parent


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """What ``node`` could use of ``fr`` if nothing else used any."""
    if node.parent is None:
        return node.subtree.get(fr, 0)
    most = node.local_quota(fr) + potential_available(node.parent, fr)
    borrowing_limit = node.quota(fr).borrowing_limit
    if borrowing_limit is not None:
        most = min(node.subtree.get(fr, 0) + borrowing_limit, most)
    return most


def add_usage(node: QuotaNode, fr: FlavorResource, amount: int) -> None:
    local = node.local_available(fr)
    node.usage[fr] = node.usage.get(fr, 0) + amount
    if node.parent is not None and amount > local:
        add_usage(node.parent, fr, amount - local)


def remove_usage(node: QuotaNode, fr: FlavorResource, amount: int) -> None:
    stored_in_parent = node.usage.get(fr, 0) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, 0) - amount
    if stored_in_parent > 0 and node.parent is not None:
        remove_usage(node.parent, fr, min(amount, stored_in_parent))


@dataclass(frozen=True)
class DominantShare:
    """Kueue's DominantResourceShare of a node: borrowed over lendable, per 1000, of the
    resource where that ratio is largest, divided by the node's fair weight."""

    weight: float
    ratio: float = 0.0
    resource: str = ""
    borrowing: bool = False
    borrowed: frozenset[FlavorResource] = frozenset()

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.ratio != 0

    def weighted(self) -> float:
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def value(self) -> int:
        """The share as Kueue reports it: rounded up; the largest int64 for a zero weight."""
        if self.zero_weight_borrows:
            return 2**63 - 1
        return int(math.ceil(self.weighted()))

    def borrows_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


def compare_shares(a: DominantShare, b: DominantShare) -> int:
    """-1, 0 or 1 as Kueue's CompareDRS: zero-weight borrowers last, by unweighted ratio."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        x, y = a.ratio, b.ratio
    elif a.zero_weight_borrows:
        return 1
    elif b.zero_weight_borrows:
        return -1
    else:
        x, y = a.weighted(), b.weighted()
    return (x > y) - (x < y)


def dominant_share(node: QuotaNode, extra: Mapping[FlavorResource, int] | None = None) -> DominantShare:
    """The node's dominant resource share, with ``extra`` usage added first."""
    share = DominantShare(weight=node.fair_weight)
    if node.parent is None:
        return share
    borrowed_by_resource: dict[str, int] = {}
    borrowed: set[FlavorResource] = set()
    for fr, quota in node.subtree.items():
        over = (extra or {}).get(fr, 0) + node.usage.get(fr, 0) - quota
        if over > 0:
            borrowed_by_resource[fr[1]] = borrowed_by_resource.get(fr[1], 0) + over
            borrowed.add(fr)
    if not borrowed_by_resource:
        return share
    root = node.root()
    lendable: dict[str, int] = {}
    for fr in root.subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + potential_available(node.parent, fr)
    ratio, dominant = 0.0, ""
    for resource in sorted(borrowed_by_resource):
        if lendable.get(resource, 0) > 0:
            r = borrowed_by_resource[resource] * 1000.0 / lendable[resource]
            if r > ratio:
                ratio, dominant = r, resource
    return DominantShare(node.fair_weight, ratio, dominant, True, frozenset(borrowed))


def _quotas(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, ResourceQuota]:
    return {
        (flavor.name, resource): quota
        for group in groups
        for flavor in group.flavors
        for resource, quota in flavor.resources.items()
    }


class QuotaTree:
    """The quota tree of a :class:`QueueConfig`: ClusterQueues and cohorts with their usage.

    Cohorts a ClusterQueue names but no Cohort object defines exist without quota of their
    own, as in Kueue.
    """

    def __init__(self, config: QueueConfig) -> None:
        self.queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        for cohort in config.cohorts.values():
            self.cohorts[cohort.name] = QuotaNode(cohort.name, False, _quotas(cohort.resource_groups), cohort.fair_weight)
        for cohort in config.cohorts.values():
            if cohort.parent is not None:
                self._link(self.cohorts[cohort.name], self._cohort(cohort.parent), queue=False)
        for cq in config.cluster_queues.values():
            node = QuotaNode(cq.name, True, _quotas(cq.resource_groups), cq.fair_weight)
            self.queues[cq.name] = node
            if cq.cohort is not None:
                self._link(node, self._cohort(cq.cohort), queue=True)
        for node in self.cohorts.values():
            if node.parent is None:
                self._compute_subtree(node)
        for node in self.queues.values():
            if node.parent is None:
                node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}

    def _cohort(self, name: str) -> QuotaNode:
        if name not in self.cohorts:
            self.cohorts[name] = QuotaNode(name, False, {})
        return self.cohorts[name]

    @staticmethod
    def _link(child: QuotaNode, parent: QuotaNode, queue: bool) -> None:
        child.parent = parent
        (parent.child_queues if queue else parent.child_cohorts).append(child)

    def _compute_subtree(self, cohort: QuotaNode) -> None:
        cohort.subtree = {fr: q.nominal for fr, q in cohort.quotas.items()}
        children = list(cohort.child_cohorts)
        for child in cohort.child_cohorts:
            self._compute_subtree(child)
        for child in cohort.child_queues:
            child.subtree = {fr: q.nominal for fr, q in child.quotas.items()}
        for child in children + cohort.child_queues:
            for fr, quota in child.subtree.items():
                cohort.subtree[fr] = cohort.subtree.get(fr, 0) + quota - child.local_quota(fr)

    def nodes(self) -> Iterator[QuotaNode]:
        yield from self.queues.values()
        yield from self.cohorts.values()

    def usage_state(self) -> list[dict[FlavorResource, int]]:
        """A copy of every node's usage, for :meth:`restore_usage`."""
        return [dict(node.usage) for node in self.nodes()]

    def restore_usage(self, state: list[dict[FlavorResource, int]]) -> None:
        for node, usage in zip(self.nodes(), state):
            node.usage = dict(usage)

    def add(self, queue: str, usage: Mapping[FlavorResource, int]) -> None:
        node = self.queues[queue]
        for fr, amount in usage.items():
            add_usage(node, fr, amount)

    def remove(self, queue: str, usage: Mapping[FlavorResource, int]) -> None:
        node = self.queues[queue]
        for fr, amount in usage.items():
            remove_usage(node, fr, amount)

    def fits(self, queue: str, usage: Mapping[FlavorResource, int]) -> bool:
        node = self.queues[queue]
        return all(amount <= max(0, available(node, fr)) for fr, amount in usage.items())

    def borrowing(self, queue: str) -> bool:
        """Whether the ClusterQueue uses more than its nominal quota of anything."""
        node = self.queues[queue]
        return any(node.borrowing_with(fr, 0) for fr in node.usage)

    def share(self, name: str) -> DominantShare:
        """The dominant resource share of a ClusterQueue or cohort."""
        node = self.queues.get(name) or self.cohorts[name]
        return dominant_share(node)

    def borrowing_level(self, queue: str, fr: FlavorResource, amount: int) -> tuple[int, bool]:
        """Kueue's height of the lowest subtree where ``amount`` more of ``fr`` fits without
        borrowing (0: within the ClusterQueue's nominal), and whether that subtree has a
        parent to reclaim from."""
        node = self.queues[queue]
        if not node.borrowing_with(fr, amount) or node.parent is None:
            return 0, node.parent is not None
        remaining = amount - node.local_available(fr)
        for ancestor in node.ancestors():
            if not ancestor.borrowing_with(fr, remaining):
                return ancestor.height(), ancestor.parent is not None
            remaining -= ancestor.local_available(fr)
        assert node.parent is not None
        return node.parent.root().height(), False
