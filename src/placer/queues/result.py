"""What one admission cycle decides (SPEC §8's JSON output)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from msgspec import Struct

from placer.model import Assignment

__all__ = ["PREEMPTION_REASONS", "AdmittedWorkload", "PendingWorkload", "PreemptedWorkload", "AdmissionResult"]

PREEMPTION_REASONS = ("InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing", "InCohortFairSharing")


class AdmittedWorkload(Struct, frozen=True, gc=False):
    """A workload admitted in this cycle: its flavors per pod set and resource, whether its
    ClusterQueue borrows after admitting it, and where its pods go (empty when admitted on
    quota only)."""

    workload: str
    cluster_queue: str
    flavors: Mapping[str, Mapping[str, str]]
    borrowing: bool = False
    assignments: tuple[Assignment, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "clusterQueue": self.cluster_queue,
            "flavors": {ps: dict(by_resource) for ps, by_resource in self.flavors.items()},
            "borrowing": self.borrowing,
            "assignments": [a.to_dict() for a in self.assignments],
        }


class PendingWorkload(Struct, frozen=True, gc=False):
    """A workload left pending, and why. ``inadmissible``: parked until quota is freed
    (Kueue's inadmissible list); otherwise it is tried again next cycle.
    ``needs_preemption``: victims were evicted for it and it is admitted once they are gone."""

    workload: str
    reason: str
    cluster_queue: Optional[str] = None
    inadmissible: bool = False
    needs_preemption: bool = False

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"workload": self.workload, "reason": self.reason}
        if self.cluster_queue is not None:
            d["clusterQueue"] = self.cluster_queue
        d["inadmissible"] = self.inadmissible
        if self.needs_preemption:
            d["needsPreemption"] = True
        return d


class PreemptedWorkload(Struct, frozen=True, gc=False):
    """An admitted workload evicted in this cycle, for which workload and under which of
    Kueue's reasons (:data:`PREEMPTION_REASONS`)."""

    workload: str
    by: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "by": self.by, "reason": self.reason}


class AdmissionResult(Struct, frozen=True):
    """The outcome of one cycle: admitted, still pending, and preempted workloads."""

    admitted: tuple[AdmittedWorkload, ...] = ()
    pending: tuple[PendingWorkload, ...] = ()
    preempted: tuple[PreemptedWorkload, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "admitted": [a.to_dict() for a in self.admitted],
            "pending": [p.to_dict() for p in self.pending],
            "preempted": [p.workload for p in self.preempted],
            "preemptions": [p.to_dict() for p in self.preempted],
        }
