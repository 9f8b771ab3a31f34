"""Kueue's queueing objects as frozen value objects, in placer's terms.

A :class:`QueueConfig` holds what Kueue's controllers read: ResourceFlavors, ClusterQueues,
Cohorts, LocalQueues and the fair-sharing switch of Kueue's ``Configuration``. A
:class:`Workload` is one unit of admission: pod sets with counts and per-pod requests, a
priority, a creation time and, once admitted, its :class:`Admission`.

Amounts are integers in Kueue's own accounting units: ``cpu`` in millicores, ``memory`` in
bytes, every other resource (``nvidia.com/gpu``, ``pods``, MIG profiles, …) as a count.
:func:`pod_for_requests` turns a pod set's per-pod requests into the
:class:`placer.PodRequest` placer places.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from msgspec import Struct

from placer.model import EMPTY, MigRequest, PodRequest, Taint, Toleration

__all__ = [
    "CPU",
    "MEMORY",
    "GPU",
    "PODS",
    "MIG_PREFIX",
    "MIB",
    "QUEUEING_STRATEGIES",
    "PREEMPTION_POLICIES",
    "FUNGIBILITY_POLICIES",
    "ResourceQuota",
    "FlavorQuotas",
    "ResourceGroup",
    "ClusterQueuePreemption",
    "FlavorFungibility",
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "QueueConfig",
    "PodSet",
    "Admission",
    "Workload",
    "pod_for_requests",
]

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
PODS = "pods"
MIG_PREFIX = "nvidia.com/mig-"
MIB = 1 << 20

QUEUEING_STRATEGIES = ("StrictFIFO", "BestEffortFIFO")
PREEMPTION_POLICIES = {
    "withinClusterQueue": ("Never", "LowerPriority", "LowerOrNewerEqualPriority"),
    "reclaimWithinCohort": ("Never", "LowerPriority", "Any"),
    "borrowWithinCohort": ("Never", "LowerPriority"),
}
FUNGIBILITY_POLICIES = {
    "whenCanBorrow": ("MayStopSearch", "TryNextFlavor", "Borrow"),
    "whenCanPreempt": ("MayStopSearch", "TryNextFlavor", "Preempt"),
}


class ResourceQuota(Struct, frozen=True, gc=False):
    """The quota of one resource in one flavor; a limit of ``None`` is no limit."""

    nominal: int
    borrowing_limit: Optional[int] = None
    lending_limit: Optional[int] = None


class FlavorQuotas(Struct, frozen=True, gc=False):
    """One flavor of a resource group, with the quota of each covered resource."""

    name: str
    resources: Mapping[str, ResourceQuota]


class ResourceGroup(Struct, frozen=True, gc=False):
    """Resources that are assigned flavors together, with the flavors in order of preference."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


class ClusterQueuePreemption(Struct, frozen=True, gc=False):
    """Which admitted workloads a ClusterQueue's pending workloads may preempt (Kueue's
    ``spec.preemption``); ``max_priority_threshold`` belongs to ``borrowWithinCohort``."""

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: Optional[int] = None


class FlavorFungibility(Struct, frozen=True, gc=False):
    """Whether flavor assignment goes on to the next flavor when the current one would
    need borrowing or preemption (Kueue's ``spec.flavorFungibility``)."""

    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"


class ResourceFlavor(Struct, frozen=True, gc=False):
    """A kind of node: the labels its nodes carry, the taints its pods tolerate
    (``tolerations``, added to the pods admitted on it), and the taints a pod set must
    tolerate to be assigned it (``node_taints``, Kueue's ``spec.nodeTaints``)."""

    name: str
    node_labels: Mapping[str, str] = EMPTY
    tolerations: tuple[Toleration, ...] = ()
    topology_name: Optional[str] = None
    node_taints: tuple[Taint, ...] = ()


class ClusterQueue(Struct, frozen=True, gc=False):
    """A pool of quota that workloads are admitted against."""

    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: Optional[str] = None
    queueing_strategy: str = "BestEffortFIFO"
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_weight: float = 1.0


class Cohort(Struct, frozen=True, gc=False):
    """A group of ClusterQueues (and cohorts) that lend each other unused quota; it may hold
    quota of its own and belong to a parent cohort."""

    name: str
    parent: Optional[str] = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: float = 1.0


class LocalQueue(Struct, frozen=True, gc=False):
    """A namespace's entry point into a ClusterQueue."""

    namespace: str
    name: str
    cluster_queue: str


class QueueConfig(Struct, frozen=True, gc=False):
    """Everything Kueue's scheduler reads besides the workloads; names are unique per kind."""

    flavors: Mapping[str, ResourceFlavor] = EMPTY
    cluster_queues: Mapping[str, ClusterQueue] = EMPTY
    cohorts: Mapping[str, Cohort] = EMPTY
    local_queues: Mapping[str, LocalQueue] = EMPTY
    """Keyed by ``namespace/name``."""
    fair_sharing: bool = False
    preemption_strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


class PodSet(Struct, frozen=True, gc=False):
    """``count`` identical pods of a workload.

    ``requests`` are one pod's requests in accounting units; ``pod`` is that pod as placer
    places it (``None`` when the workload is accounted for quota only). A required or
    preferred topology level is a node label key, as in Kueue's podset annotations.
    """

    name: str
    count: int
    requests: Mapping[str, int]
    pod: Optional[PodRequest] = None
    required_level: Optional[str] = None
    preferred_level: Optional[str] = None


class Admission(Struct, frozen=True, gc=False):
    """Where an admitted workload holds quota: its ClusterQueue and, per pod set and
    resource, the flavor."""

    cluster_queue: str
    flavors: Mapping[str, Mapping[str, str]]
    reserved_at: Optional[float] = None
    """When quota was reserved (seconds, as ``Workload.created``); preemption takes the
    most recently admitted first. ``None``: the workload's creation time stands in."""


class Workload(Struct, frozen=True, gc=False):
    """One unit of admission: all its pod sets are admitted together or not at all.

    ``queue`` is the LocalQueue name in ``namespace``; ``cluster_queue`` is the
    ClusterQueue it resolves to (set directly when there are no LocalQueues). ``created``
    is in seconds (epoch or any common origin); older workloads go first among equals.
    """

    name: str
    pod_sets: tuple[PodSet, ...]
    namespace: str = "default"
    queue: Optional[str] = None
    cluster_queue: Optional[str] = None
    priority: int = 0
    created: float = 0.0
    admission: Optional[Admission] = None

    @property
    def key(self) -> str:
        """``namespace/name``, the workload's name in results."""
        return f"{self.namespace}/{self.name}"

    def total_requests(self) -> dict[str, dict[str, int]]:
        """Per pod set, the requests of all its pods."""
        return {ps.name: {r: v * ps.count for r, v in ps.requests.items()} for ps in self.pod_sets}


def pod_for_requests(name: str, requests: Mapping[str, int], **fields: Any) -> PodRequest:
    """The pod placer places for one pod's Kueue requests.

    ``cpu`` (millicores) and ``memory`` (bytes, rounded up to MiB) go to ``cpu_milli`` and
    ``memory_mib``, ``nvidia.com/gpu`` to ``gpus``, one ``nvidia.com/mig-<profile>`` to
    ``mig``; ``pods`` is not a request of the pod; any other resource stays an extended
    resource. ``fields`` are further :class:`PodRequest` fields (``node_selector``, …).
    """
    extended: dict[str, int] = {}
    mig: MigRequest | None = None
    for resource, amount in requests.items():
        if resource in (CPU, MEMORY, GPU, PODS) or amount == 0:
            continue
        if resource.startswith(MIG_PREFIX) and mig is None:
            mig = MigRequest(profile=resource[len(MIG_PREFIX):], count=amount)
        else:
            extended[resource] = amount
    return PodRequest(
        name=name,
        cpu_milli=requests.get(CPU, 0),
        memory_mib=-(-requests.get(MEMORY, 0) // MIB),
        gpus=requests.get(GPU, 0),
        mig=mig,
        resources=extended or EMPTY,
        **fields,
    )
