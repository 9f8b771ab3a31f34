"""A workload as the admission engine tracks it: its ClusterQueue, its requests in quota
terms and, once it holds quota, its flavors, usage and bound pods."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from placer.model import Assignment
from placer.queues.model import PODS, ClusterQueue, Workload
from placer.queues.quota import FlavorResource

__all__ = ["QueuedWorkload", "podset_requests"]


def podset_requests(workload: Workload, queue: ClusterQueue) -> list[dict[str, int]]:
    """Per pod set, the requests of all its pods; ``pods`` counts pods when the
    ClusterQueue covers it (Kueue adds it then, and only then)."""
    counts_pods = any(PODS in group.covered_resources for group in queue.resource_groups)
    out = []
    for ps in workload.pod_sets:
        total = {r: v * ps.count for r, v in ps.requests.items() if r != PODS}
        if counts_pods:
            total[PODS] = ps.count
        out.append(total)
    return out


@dataclass(eq=False)
class QueuedWorkload:
    """One workload in the engine, pending or holding quota."""

    workload: Workload
    cluster_queue: str
    requests: list[dict[str, int]]
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    reserved_at: Optional[float] = None
    placed: tuple[Assignment, ...] = ()
    parked: bool = False
    stamp: int = 0
    """Which entry of its ClusterQueue's heap of waiting workloads is current."""
    key: str = field(init=False)
    priority: int = field(init=False)
    created: float = field(init=False)

    def __post_init__(self) -> None:
        # Read on every comparison of the cycle and the preemption search: copied once from
        # the (frozen) workload.
        self.key, self.priority, self.created = self.workload.key, self.workload.priority, self.workload.created

    @property
    def admitted(self) -> bool:
        return self.reserved_at is not None

    def uses_any(self, frs: Mapping[FlavorResource, object] | set[FlavorResource]) -> bool:
        return not self.usage.keys().isdisjoint(frs)

    def queue_order(self) -> tuple[int, float, str]:
        """Kueue's order in a ClusterQueue: higher priority, then older."""
        return (-self.priority, self.created, self.key)
