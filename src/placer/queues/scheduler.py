"""Kueue's scheduling cycle over placer's placement (SPEC §8).

A cycle takes the head of every ClusterQueue (highest priority, then oldest; under
``BestEffortFIFO`` workloads found inadmissible are parked until quota is freed, under
``StrictFIFO`` the head stays and blocks its queue), assigns flavors against one state of
the quota tree, and processes the heads in Kueue's order: workloads borrowing less first,
then higher priority, then older (with fair sharing: a tournament of dominant resource
shares in every cohort). A head that still fits is admitted and, when the workload has pods
and a cluster is given, placed there as one gang; a quota fit whose placement fails is
treated as needing preemption, then as not fitting. A head that needs preemption evicts its
victims and is admitted in a later cycle; eviction takes effect when the cycle ends.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Optional, Sequence

import msgspec
from msgspec.structs import replace

from placer import policies
from placer.placement.cluster import Cluster
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import Workload as TargetWorkload
from placer.model import Assignment, ClusterSnapshot, GangSpec, PodRequest, load_snapshot
from placer.queues.entries import QueuedWorkload, podset_requests
from placer.queues.flavors import FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FlavorAssignment, assign_flavors
from placer.queues.model import QueueConfig, ResourceFlavor, Workload
from placer.queues.preemption import ByPriority, Target, find_fair_targets, find_targets
from placer.queues.quota import DominantShare, FlavorResource, QuotaNode, QuotaTree, compare_shares, dominant_share
from placer.queues.result import AdmissionResult, AdmittedWorkload, PendingWorkload, PreemptedWorkload

__all__ = ["QueueScheduler", "admit"]

WAITING = "waiting behind the head of its ClusterQueue"
_SHAPE = msgspec.msgpack.Encoder(enc_hook=lambda obj: dict(obj) if isinstance(obj, Mapping) else str(obj))


@dataclass(eq=False)
class _Entry:
    """A head in one cycle."""

    queued: QueuedWorkload
    assignment: FlavorAssignment
    targets: list[Target] = field(default_factory=list)
    outcome: str = ""  # admitted | preempting | parked | skipped
    reason: str = ""
    placed: tuple[Assignment, ...] = ()


class QueueScheduler:
    """ClusterQueues, their workloads and (optionally) the cluster their pods run on.

    Parameters
    ----------
    config : QueueConfig
        Flavors, ClusterQueues, cohorts and LocalQueues (:func:`placer.queues.load_queues`).
    snapshot : ClusterSnapshot, dict or path, optional
        The cluster; without it workloads are admitted on quota only.
    policy : str
        The placement policy of admitted pods (:data:`placer.policies.REGISTRY`).
    target : placer.workload.fragmentation.Workload, optional
        The typical pods (the fragment measure's target workload) of the policies that
        need one (``fgd``, ``fgd-pack``: :meth:`Cluster.fragmentation` and
        :meth:`Cluster.learn_packing`); without it they take it from the first pods placed.

    Examples
    --------
    >>> s = QueueScheduler(config, snapshot)          # doctest: +SKIP
    >>> s.submit(workload); result = s.cycle(now=0)   # doctest: +SKIP
    """

    def __init__(
        self,
        config: QueueConfig,
        snapshot: ClusterSnapshot | Mapping | str | None = None,
        *,
        policy: str = policies.DEFAULT,
        target: Optional[TargetWorkload] = None,
    ) -> None:
        self.config = config
        self.tree = QuotaTree(config)
        record = policies.get(policy, "policy")
        self.policy = record.name
        self.cluster = Cluster(load_snapshot(snapshot)) if snapshot is not None else None
        if self.cluster is not None and target is not None:
            if record.needs_workload:
                self.cluster.fragmentation(target)
            if record.needs_packing_guide:
                self.cluster.learn_packing(target)
        self.now = 0.0
        self._all: dict[str, QueuedWorkload] = {}
        self._pending: dict[str, dict[str, QueuedWorkload]] = {name: {} for name in config.cluster_queues}
        self._parked: dict[str, dict[str, QueuedWorkload]] = {name: {} for name in config.cluster_queues}
        self._waiting: dict[str, list[tuple[int, float, str, int]]] = {name: [] for name in config.cluster_queues}
        """Per ClusterQueue, a heap in queue order of the pending workloads not parked (an
        entry whose stamp is not the workload's is stale and skipped)."""
        self._stamps = 0
        self._admitted: dict[str, dict[str, QueuedWorkload]] = {name: {} for name in config.cluster_queues}
        self._unqueued: dict[str, tuple[Workload, str]] = {}
        self._candidates: dict[str, ByPriority] = {}
        """Per ClusterQueue, the workloads admitted before the running cycle: preemption
        candidates come from these only (Kueue's cycle adds what it admits to the snapshot's
        usage, not to the workloads its preemption looks at); victims leave when it ends."""
        self._changed: set[str] = set(config.cluster_queues)
        """ClusterQueues whose admitted workloads changed since ``_candidates`` was built."""
        self._cluster_version = 0
        """Counts binds and releases: a placement that failed is not tried again for the
        same pods before the cluster changes."""
        self._failed: dict[bytes, tuple[int, str]] = {}
        self._sticky: dict[str, str] = {}
        """Per BestEffortFIFO ClusterQueue, the workload waiting for its victims: it stays the
        head until admitted or gone, so a workload unparked by the eviction cannot take the
        head and let the victim back in first (Kueue's sticky preemptor workload)."""

    # ------------------------------------------------------------------ workloads in and out

    def _queue_of(self, workload: Workload) -> tuple[Optional[str], str]:
        if workload.admission is not None:
            name = workload.admission.cluster_queue
        elif workload.cluster_queue is not None:
            name = workload.cluster_queue
        elif workload.queue is not None:
            local = self.config.local_queues.get(f"{workload.namespace}/{workload.queue}")
            if local is None:
                return None, f"LocalQueue {workload.queue} doesn't exist"
            name = local.cluster_queue
        else:
            return None, "the workload names no queue"
        if name not in self.config.cluster_queues:
            return None, f"ClusterQueue {name} doesn't exist"
        return name, ""

    def submit(self, workload: Workload) -> None:
        """Add a workload: pending, or holding quota when it carries an admission (its pods,
        if any run, are the snapshot's)."""
        key = workload.key
        if key in self._all or key in self._unqueued:
            raise InvalidInputError(key, "workload is already known")
        name, problem = self._queue_of(workload)
        if name is None:
            self._unqueued[key] = (workload, problem)
            return
        queued = QueuedWorkload(workload, name, podset_requests(workload, self.config.cluster_queues[name]))
        self._all[key] = queued
        if workload.admission is None:
            self._enqueue(queued)
            return
        self._hold(queued, {ps: dict(m) for ps, m in workload.admission.flavors.items()},
                   workload.admission.reserved_at if workload.admission.reserved_at is not None else workload.created)

    def _hold(self, queued: QueuedWorkload, flavors: dict[str, dict[str, str]], at: float) -> None:
        usage: dict[FlavorResource, int] = {}
        for ps, requests in zip(queued.workload.pod_sets, queued.requests):
            by_resource = flavors.get(ps.name, {})
            for resource, amount in requests.items():
                flavor = by_resource.get(resource)
                if flavor is not None and amount:
                    usage[(flavor, resource)] = usage.get((flavor, resource), 0) + amount
        queued.flavors, queued.usage, queued.reserved_at = flavors, usage, at
        self._forget_sticky(queued)
        self.tree.add(queued.cluster_queue, usage)
        self._changed.add(queued.cluster_queue)
        self._leave_queue(queued)
        self._admitted[queued.cluster_queue][queued.key] = queued

    def _release(self, queued: QueuedWorkload) -> None:
        """Give back quota and pods; the workload is then neither pending nor admitted."""
        if queued.admitted:
            self.tree.remove(queued.cluster_queue, queued.usage)
            del self._admitted[queued.cluster_queue][queued.key]
            self._changed.add(queued.cluster_queue)
            if self.cluster is not None and queued.placed:
                for a in queued.placed:
                    self.cluster.release(a.pod)
                self._cluster_version += 1
            queued.placed, queued.usage, queued.flavors, queued.reserved_at = (), {}, {}, None
        else:
            self._leave_queue(queued)
            self._forget_sticky(queued)

    def _enqueue(self, queued: QueuedWorkload) -> None:
        """The workload is pending and the next cycle may try it."""
        self._pending[queued.cluster_queue][queued.key] = queued
        self._parked[queued.cluster_queue].pop(queued.key, None)
        self._stamps += 1
        queued.parked, queued.stamp = False, self._stamps
        heapq.heappush(self._waiting[queued.cluster_queue], (*queued.queue_order(), queued.stamp))

    def _park(self, queued: QueuedWorkload) -> None:
        """The workload waits for quota to be freed in its cohort tree."""
        queued.parked = True
        self._parked[queued.cluster_queue][queued.key] = queued

    def _leave_queue(self, queued: QueuedWorkload) -> None:
        self._pending[queued.cluster_queue].pop(queued.key, None)
        self._parked[queued.cluster_queue].pop(queued.key, None)
        queued.parked = False

    def _forget_sticky(self, queued: QueuedWorkload) -> None:
        if self._sticky.get(queued.cluster_queue) == queued.key:
            del self._sticky[queued.cluster_queue]

    def finish(self, key: str) -> None:
        """A workload leaves (finished or deleted): its quota and pods are freed and the
        parked workloads of its cohort tree are tried again."""
        if key in self._unqueued:
            del self._unqueued[key]
            return
        queued = self._all.pop(key, None)
        if queued is None:
            raise InvalidInputError(key, "unknown workload")
        was_admitted = queued.admitted
        self._release(queued)
        if was_admitted:
            self._unpark(queued.cluster_queue)

    def _unpark(self, queue: str) -> None:
        root = self.tree.queues[queue].root()
        names = [n.name for n in root.subtree_queues()] if not root.is_queue else [queue]
        for name in names:
            for queued in list(self._parked[name].values()):
                self._enqueue(queued)

    # ------------------------------------------------------------------ views

    @property
    def active_count(self) -> int:
        """Pending workloads the next cycle may still try (parked ones wait for an event)."""
        return sum(len(pending) - len(self._parked[name]) for name, pending in self._pending.items())

    @property
    def pending_count(self) -> int:
        return sum(len(q) for q in self._pending.values()) + len(self._unqueued)

    def is_admitted(self, key: str) -> bool:
        queued = self._all.get(key)
        return queued is not None and queued.admitted

    def borrowing(self, queue: str) -> bool:
        """Whether the ClusterQueue uses more than its nominal quota of anything now."""
        return self.tree.borrowing(queue)

    def share(self, name: str) -> DominantShare:
        """The dominant resource share of a ClusterQueue or cohort now."""
        return self.tree.share(name)

    def placed(self, key: str) -> tuple[Assignment, ...]:
        queued = self._all.get(key)
        return () if queued is None else queued.placed

    # ------------------------------------------------------------------ one cycle

    def _targets(self, wl: QueuedWorkload, frs: set[FlavorResource], usage: Mapping[FlavorResource, int],
                 also_fits: Optional[Callable[[Sequence[QueuedWorkload]], bool]] = None) -> list[Target]:
        if self.config.fair_sharing:
            return find_fair_targets(self.tree, self.config.cluster_queues, self._candidates, wl, frs, usage,
                                     self.config.preemption_strategies, also_fits)
        return find_targets(self.tree, self.config.cluster_queues, self._candidates, wl, frs, usage, also_fits)

    def _oracle(self, wl: QueuedWorkload, fr: FlavorResource, amount: int) -> tuple[int, int]:
        targets = self._targets(wl, {fr}, {fr: amount})
        if not targets:
            return NO_CANDIDATES, 0
        for t in targets:
            self.tree.remove(t.victim.cluster_queue, t.victim.usage)
        level, _ = self.tree.borrowing_level(wl.cluster_queue, fr, amount)
        for t in targets:
            self.tree.add(t.victim.cluster_queue, t.victim.usage)
        own = any(t.victim.cluster_queue == wl.cluster_queue for t in targets)
        return (PREEMPT if own else RECLAIM), level

    def _heads(self) -> list[QueuedWorkload]:
        heads = []
        for name in self.config.cluster_queues:
            sticky = self._pending[name].get(self._sticky.get(name, ""))
            if sticky is not None and not sticky.parked:
                heads.append(sticky)
                continue
            waiting, pending = self._waiting[name], self._pending[name]
            while waiting:
                queued = pending.get(waiting[0][2])
                if queued is not None and queued.stamp == waiting[0][3] and not queued.parked:
                    heads.append(queued)
                    break
                heapq.heappop(waiting)
        return heads

    def _nominate(self, head: QueuedWorkload) -> _Entry:
        assignment = assign_flavors(self.config, self.tree, head, self._oracle, self.config.fair_sharing)
        entry = _Entry(head, assignment)
        if assignment.mode == "Preempt":
            entry.targets = self._targets(head, assignment.needs_preemption(), assignment.usage)
        return entry

    def _classical_order(self, entries: list[_Entry]) -> list[_Entry]:
        return sorted(entries, key=lambda e: (e.assignment.borrowing, -e.queued.priority, e.queued.created,
                                              e.queued.key))

    def _fair_pop(self, remaining: list[_Entry]) -> _Entry:
        first = remaining[0]
        node = self.tree.queues[first.queued.cluster_queue]
        if node.parent is None:
            return first
        root = node.root()
        by_queue = {e.queued.cluster_queue: e for e in remaining}
        shares: dict[tuple[str, str], DominantShare] = {}
        for cq in root.subtree_queues():
            entry = by_queue.get(cq.name)
            if entry is None:
                continue
            self.tree.add(cq.name, entry.assignment.usage)
            share = dominant_share(cq)
            for ancestor in cq.ancestors():
                shares[(ancestor.name, entry.queued.key)] = share
                share = dominant_share(ancestor)
            self.tree.remove(cq.name, entry.assignment.usage)

        def less(a: _Entry, b: _Entry, parent: str) -> bool:
            sa, sb = shares[(parent, a.queued.key)], shares[(parent, b.queued.key)]
            ba, bb = sa.borrows_on(a.assignment.usage), sb.borrows_on(b.assignment.usage)
            if ba != bb:
                return not ba
            c = compare_shares(sa, sb)
            if c:
                return c < 0
            if a.queued.priority != b.queued.priority:
                return a.queued.priority > b.queued.priority
            return (a.queued.created, a.queued.key) < (b.queued.created, b.queued.key)

        def tournament(cohort: QuotaNode) -> Optional[_Entry]:
            found = [w for w in (tournament(c) for c in cohort.child_cohorts) if w is not None]
            found += [by_queue[q.name] for q in cohort.child_queues if q.name in by_queue]
            if not found:
                return None
            best = found[0]
            for other in found[1:]:
                if less(other, best, cohort.name):
                    best = other
            return best

        winner = tournament(root)
        assert winner is not None
        return winner

    def _pods(self, queued: QueuedWorkload, flavors: Mapping[str, Mapping[str, str]]) -> tuple[list[PodRequest], Optional[GangSpec]]:
        pods: list[PodRequest] = []
        required = preferred = None
        for ps in queued.workload.pod_sets:
            if ps.pod is None:
                continue
            selector = dict(ps.pod.node_selector)
            tolerations = list(ps.pod.tolerations)
            for flavor_name in dict.fromkeys(flavors.get(ps.name, {}).values()):
                flavor = self.config.flavors.get(flavor_name) or ResourceFlavor(flavor_name)
                selector.update(flavor.node_labels)
                tolerations.extend(flavor.tolerations)
            base = replace(ps.pod, node_selector=selector, tolerations=tuple(tolerations), gang=None,
                           priority=queued.priority)
            pods.extend(replace(base, name=f"{queued.key}/{ps.name}-{i}") for i in range(ps.count))
            required = required or ps.required_level
            preferred = preferred or ps.preferred_level
        if len(pods) <= 1 and required is None:
            return pods, None
        if required is not None:
            return pods, GangSpec(queued.key, mode="required", level=required)
        if preferred is not None:
            return pods, GangSpec(queued.key, mode="preferred", level=preferred)
        return pods, GangSpec(queued.key)

    def _try_place(self, queued: QueuedWorkload, flavors: Mapping[str, Mapping[str, str]], *, remember: bool = True
                   ) -> tuple[Optional[tuple[Assignment, ...]], str]:
        """Where the workload's pods would go now (``()`` when it has none to place), or
        None and the reason they do not fit. A failure is remembered, for workloads of the
        same pods, until the cluster changes."""
        if self.cluster is None:
            return (), ""
        pods, gang = self._pods(queued, flavors)
        if not pods:
            return (), ""
        shape = b""
        if remember:
            shape = _SHAPE.encode(
                ([(ps.count, ps.pod and replace(ps.pod, name=""), ps.required_level, ps.preferred_level)
                  for ps in queued.workload.pod_sets], flavors, queued.priority))
            failed = self._failed.get(shape)
            if failed is not None and failed[0] == self._cluster_version:
                return None, failed[1]
        result = self.cluster.place(pods, gang=gang, policy=self.policy)
        if result.unschedulable or len(result.assignments) != len(pods):
            reason = result.unschedulable[0].reason if result.unschedulable else "does not fit"
            if remember:
                if len(self._failed) > 4096:
                    self._failed.clear()
                self._failed[shape] = (self._cluster_version, reason)
            return None, reason
        return result.assignments, ""

    def _fits_without(self, queued: QueuedWorkload, flavors: Mapping[str, Mapping[str, str]],
                      gone: Sequence[QueuedWorkload]) -> bool:
        assert self.cluster is not None
        released = [a for w in gone for a in w.placed]
        for a in released:
            self.cluster.release(a.pod)
        try:
            placed, _ = self._try_place(queued, flavors, remember=False)
        finally:
            if released:
                self.cluster.bind(released)
        return placed is not None

    def _quota_fits(self, entry: _Entry, gone: Iterable[QueuedWorkload]) -> bool:
        removed = [w for w in dict.fromkeys(gone)]
        for w in removed:
            self.tree.remove(w.cluster_queue, w.usage)
        try:
            return self.tree.fits(entry.queued.cluster_queue, entry.assignment.usage)
        finally:
            for w in removed:
                self.tree.add(w.cluster_queue, w.usage)

    def _reserved(self, entry: _Entry) -> dict[FlavorResource, int]:
        """What a workload waiting for its victims holds in this cycle (Kueue's
        quotaResourcesToReserve)."""
        node = self.tree.queues[entry.queued.cluster_queue]
        out = {}
        for fr, amount in entry.assignment.usage.items():
            quota = node.quota(fr)
            used = node.usage.get(fr, 0)
            if entry.assignment.borrowing > 0:
                out[fr] = amount if quota.borrowing_limit is None else min(amount, quota.nominal + quota.borrowing_limit - used)
            else:
                out[fr] = max(0, min(amount, quota.nominal - used))
        return out

    def cycle(self, now: Optional[float] = None, *, report_waiting: bool = True) -> AdmissionResult:
        """Run one scheduling cycle.

        Admitted workloads hold their quota (and their pods are bound) at once; victims of
        preemption are evicted when the cycle ends and are pending again. ``report_waiting``
        lists the pending workloads that were not heads too.
        """
        if now is not None:
            self.now = float(now)
        for name in self._changed:
            self._candidates[name] = ByPriority(self._admitted[name].values())
        self._changed = set()
        entries = [self._nominate(head) for head in self._heads()]
        preempted: dict[str, tuple[QueuedWorkload, str, str]] = {}
        reserved: list[tuple[str, dict[FlavorResource, int]]] = []
        admitted: list[AdmittedWorkload] = []
        order = list(entries) if self.config.fair_sharing else self._classical_order(entries)
        while order:
            entry = self._fair_pop(order) if self.config.fair_sharing else order[0]
            order.remove(entry)
            self._process(entry, preempted, reserved, admitted)
        for queue, usage in reserved:
            self.tree.remove(queue, usage)
        evicted: list[PreemptedWorkload] = []
        for victim, by, reason in preempted.values():
            self._release(victim)
            self._enqueue(victim)
            evicted.append(PreemptedWorkload(victim.key, by, reason))
        for victim, _, _ in preempted.values():
            self._unpark(victim.cluster_queue)
        for entry in entries:
            if entry.outcome == "parked" and self.config.cluster_queues[entry.queued.cluster_queue].queueing_strategy == "BestEffortFIFO":
                self._park(entry.queued)
        return AdmissionResult(tuple(admitted), self._pending_results(entries, report_waiting), tuple(evicted))

    def _process(self, entry: _Entry, preempted: dict[str, tuple[QueuedWorkload, str, str]],
                 reserved: list[tuple[str, dict[FlavorResource, int]]], admitted: list[AdmittedWorkload]) -> None:
        a = entry.assignment
        queued = entry.queued
        if a.mode == "NoFit":
            entry.outcome, entry.reason = "parked", a.reason
            return
        if a.mode == "Preempt" and not entry.targets:
            entry.outcome, entry.reason = "parked", a.reason
            return
        if any(t.victim.key in preempted for t in entry.targets):
            entry.outcome, entry.reason = "skipped", "has overlapping preemption targets with another workload"
            return
        gone = [v for v, _, _ in preempted.values()] + [t.victim for t in entry.targets]
        if not self._quota_fits(entry, gone):
            entry.outcome, entry.reason = "skipped", "no longer fits after processing another workload"
            return
        if a.mode == "Fit":
            placed, why = self._try_place(queued, a.flavors)
            if placed is None:
                entry.targets = self._targets(queued, set(a.usage), a.usage,
                                              lambda removed: self._fits_without(queued, a.flavors, removed))
                entry.targets = [t for t in entry.targets if t.victim.key not in preempted]
                if not entry.targets:
                    entry.outcome, entry.reason = "parked", f"does not fit on the cluster: {why}"
                    return
            else:
                self._hold(queued, a.flavors, self.now)
                if placed and self.cluster is not None:
                    self.cluster.bind(placed)
                    self._cluster_version += 1
                queued.placed = placed
                node = self.tree.queues[queued.cluster_queue]
                borrows = any(node.usage.get(fr, 0) > node.quota(fr).nominal for fr in queued.usage)
                entry.outcome = "admitted"
                admitted.append(AdmittedWorkload(queued.key, queued.cluster_queue, a.flavors, borrows, placed))
                return
        usage = self._reserved(entry)
        self.tree.add(queued.cluster_queue, usage)
        reserved.append((queued.cluster_queue, usage))
        for t in entry.targets:
            preempted[t.victim.key] = (t.victim, queued.key, t.reason)
        if self.config.cluster_queues[queued.cluster_queue].queueing_strategy == "BestEffortFIFO":
            self._sticky[queued.cluster_queue] = queued.key
        entry.outcome = "preempting"
        entry.reason = "waiting for " + ", ".join(t.victim.key for t in entry.targets) + " to be preempted"

    def _pending_results(self, entries: list[_Entry], report_waiting: bool) -> tuple[PendingWorkload, ...]:
        out = []
        heads = {e.queued.key for e in entries}
        for e in entries:
            if e.outcome in ("parked", "skipped", "preempting"):
                parked = e.outcome == "parked" and e.queued.parked
                out.append(PendingWorkload(e.queued.key, e.reason, e.queued.cluster_queue, inadmissible=parked,
                                           needs_preemption=e.outcome == "preempting"))
        if report_waiting:
            for name, waiting in self._pending.items():
                for queued in sorted(waiting.values(), key=QueuedWorkload.queue_order):
                    if queued.key in heads:
                        continue
                    if queued.parked:
                        out.append(PendingWorkload(queued.key, "inadmissible until quota is freed", name, inadmissible=True))
                    else:
                        out.append(PendingWorkload(queued.key, WAITING, name))
            for key, (_, problem) in self._unqueued.items():
                out.append(PendingWorkload(key, problem, None, inadmissible=True))
        return tuple(out)


def admit(
    snapshot: ClusterSnapshot | Mapping | str | None,
    queues: QueueConfig,
    workloads: Iterable[Workload],
    *,
    policy: str | None = None,
) -> AdmissionResult:
    """One Kueue scheduling cycle (SPEC §8).

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict, path or None
        Where admitted pods go; None admits on quota only.
    queues : QueueConfig
        From :func:`placer.queues.load_queues`.
    workloads : iterable of Workload
        Pending workloads and admitted ones (those carrying an admission).
    policy : str, optional
        Placement policy of admitted pods (default: placer's default).

    Returns
    -------
    AdmissionResult
        Admitted workloads with flavors and placements, pending ones with the reason, and
        the workloads preempted for them.
    """
    scheduler = QueueScheduler(queues, snapshot, policy=policy or policies.DEFAULT)
    for workload in workloads:
        scheduler.submit(workload)
    return scheduler.cycle()
