"""Queues and quotas: Kueue's objects, one admission cycle, and replay over time."""
from __future__ import annotations

from placer.queues.model import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    pod_for_requests,
)
from placer.queues.loaders import load_queues, load_workloads, read_kueue
from placer.queues.result import AdmissionResult, AdmittedWorkload, PendingWorkload, PreemptedWorkload
from placer.queues.scheduler import QueueScheduler, admit

__all__ = [
    "Admission",
    "AdmissionResult",
    "AdmittedWorkload",
    "ClusterQueue",
    "ClusterQueuePreemption",
    "Cohort",
    "FlavorFungibility",
    "FlavorQuotas",
    "LocalQueue",
    "PendingWorkload",
    "PodSet",
    "PreemptedWorkload",
    "QueueConfig",
    "QueueScheduler",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "Workload",
    "admit",
    "load_queues",
    "load_workloads",
    "pod_for_requests",
    "read_kueue",
]
