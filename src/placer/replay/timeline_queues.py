"""Queue configurations for a replay over time, and the Workload of each job (SPEC §9).

Two set-ups, each a :class:`~placer.queues.model.QueueConfig` of ClusterQueues in one
cohort (:data:`COHORT`) with one ResourceFlavor (:data:`FLAVOR`, every node) covering
``cpu``, ``memory`` and the GPU resource:

* :func:`qos_queues` — ``inference`` (openb qos LS and Guaranteed) and ``training`` (BE
  and Burstable);
* :func:`team_queues` — N synthetic teams.

Nominal quotas split the cluster's capacity among the queues in proportion to their demand
(resource × seconds, :func:`demand`), resource by resource (GPUs by GPU demand, cpu by cpu
demand, memory by memory demand, so that no queue borrows cpu merely because its jobs need
more cpu per GPU), and sum to the capacity exactly (largest remainder); borrowing and lending are unlimited inside the cohort. Jobs of the inference class
have a higher priority than those of the training class (:data:`CLASS_PRIORITY`) in both.

GPU accounting
--------------
Kueue counts ``nvidia.com/gpu`` in whole devices, so a pod holding 46 % of one GPU would be
charged a whole GPU and the quotas would run out long before the GPUs do. By default
(``gpu_accounting="milli"``) the quota resource is :data:`GPU_MILLI`, thousandths of a GPU,
and a job is charged its real share (``gpus × gpu_milli``); ``gpu_accounting="devices"``
charges ``nvidia.com/gpu`` = ``gpus`` as Kueue would for a device-plugin request (for a
queue file written in those terms). The placement is the same either way: the pod of each
PodSet carries the job's own ``gpus`` and ``gpu_milli``.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

import numpy as np
from msgspec import Struct

from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot
from placer.replay.arrivals import INFERENCE, TRAINING, TimelineJob, largest_remainder
from placer.queues.model import (
    CPU,
    GPU,
    MEMORY,
    MIB,
    QUEUEING_STRATEGIES,
    ClusterQueue,
    ClusterQueuePreemption,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    pod_for_requests,
)

__all__ = [
    "COHORT",
    "FLAVOR",
    "GPU_MILLI",
    "GPU_ACCOUNTINGS",
    "CLASS_PRIORITY",
    "POD_SET",
    "TimelineQueues",
    "gpu_resource",
    "cluster_capacity",
    "job_requests",
    "demand",
    "qos_queues",
    "team_queues",
    "job_workload",
]

COHORT = "cluster"
FLAVOR = "default"
POD_SET = "main"
GPU_MILLI = "placer.io/gpu-milli"
"""The quota resource of ``gpu_accounting="milli"``: thousandths of a GPU."""
GPU_ACCOUNTINGS = ("milli", "devices")
CLASS_PRIORITY = {INFERENCE: 1000, TRAINING: 0}
"""Workload (and pod) priority of each job class."""

Capacity = Union[ClusterSnapshot, Mapping[str, int]]


class TimelineQueues(Struct, frozen=True):
    """A queue set-up: the configuration, and the ClusterQueue of each job (by name)."""

    config: QueueConfig
    queue_of: Mapping[str, str]
    gpu_accounting: str = "milli"

    def workloads(self, jobs: Sequence[TimelineJob]) -> list[Workload]:
        """The Workload of each job (:func:`job_workload`), in the order given."""
        return [job_workload(job, self.queue_of[job.name], gpu_accounting=self.gpu_accounting) for job in jobs]


def gpu_resource(gpu_accounting: str = "milli") -> str:
    """The quota resource of GPUs: :data:`GPU_MILLI` or ``nvidia.com/gpu``.

    Raises
    ------
    InvalidInputError
        ``where`` = ``"gpu_accounting"`` for a value outside :data:`GPU_ACCOUNTINGS`.
    """
    if gpu_accounting == "milli":
        return GPU_MILLI
    if gpu_accounting == "devices":
        return GPU
    raise InvalidInputError("gpu_accounting", f"expected one of {', '.join(GPU_ACCOUNTINGS)}, got {gpu_accounting!r}")


def cluster_capacity(snapshot: ClusterSnapshot, gpu_accounting: str = "milli") -> dict[str, int]:
    """The cluster's totals in Kueue's accounting units: ``cpu`` millicores, ``memory``
    bytes and GPUs (:func:`gpu_resource`)."""
    gpus = sum(n.hardware.gpus for n in snapshot.nodes)
    return {
        CPU: sum(n.hardware.cpu_milli for n in snapshot.nodes),
        MEMORY: sum(n.hardware.memory_mib for n in snapshot.nodes) * MIB,
        gpu_resource(gpu_accounting): gpus * 1000 if gpu_accounting == "milli" else gpus,
    }


def job_requests(job: TimelineJob, gpu_accounting: str = "milli") -> dict[str, int]:
    """One job's quota requests in accounting units (zero amounts left out)."""
    gpu = job.gpus * job.gpu_milli if gpu_accounting == "milli" else job.gpus
    requests = {CPU: job.cpu_milli, MEMORY: job.memory_mib * MIB, gpu_resource(gpu_accounting): gpu}
    return {r: v for r, v in requests.items() if v}


def demand(
    jobs: Sequence[TimelineJob], gpu_accounting: str = "milli", horizon_s: Optional[float] = None
) -> dict[str, float]:
    """``Σ request × duration`` per quota resource over the jobs (e.g. milli-GPU-seconds);
    with ``horizon_s``, only the seconds of each job's run ``[arrival, arrival + duration)``
    inside ``[0, horizon_s)`` count."""
    totals = {CPU: 0.0, MEMORY: 0.0, gpu_resource(gpu_accounting): 0.0}
    for job in jobs:
        seconds = job.duration
        if horizon_s is not None:
            seconds = max(0.0, min(job.arrival + job.duration, horizon_s) - max(job.arrival, 0.0))
        for resource, amount in job_requests(job, gpu_accounting).items():
            totals[resource] += amount * seconds
    return totals


def qos_queues(
    jobs: Sequence[TimelineJob],
    capacity: Capacity,
    *,
    strategy: str = "BestEffortFIFO",
    preemption: bool = True,
    gpu_accounting: str = "milli",
    horizon_s: Optional[float] = None,
) -> TimelineQueues:
    """Two ClusterQueues, ``inference`` (qos LS, Guaranteed) and ``training`` (BE,
    Burstable), quotas in proportion to each class's demand.

    With ``preemption``, inference reclaims its quota from training
    (``reclaimWithinCohort: Any``) and preempts lower-priority work of its own
    (``withinClusterQueue: LowerPriority``); training preempts nothing. Without, neither
    preempts (``Never``).

    Parameters
    ----------
    jobs : sequence of TimelineJob
        The jobs of the replay (their demand sets the quotas).
    capacity : ClusterSnapshot or mapping
        The cluster, or its totals in accounting units (:func:`cluster_capacity`).
    strategy : str
        The queueing strategy of both queues, ``BestEffortFIFO`` or ``StrictFIFO``.
    preemption : bool
        Whether inference may preempt.
    gpu_accounting : str
        ``"milli"`` or ``"devices"`` (module docstring).
    horizon_s : float, optional
        Count each job's demand only inside ``[0, horizon_s)`` (:func:`demand`): with
        openb's heavy-tailed lifetimes, a job in progress for months would otherwise weigh
        months in the split of a one-day replay.

    Raises
    ------
    InvalidInputError
        A strategy or accounting outside the known ones, or a capacity without one of the
        covered resources.
    """
    queue_of = {job.name: job.job_class for job in jobs}
    reclaim = ClusterQueuePreemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
    policies = {INFERENCE: reclaim if preemption else ClusterQueuePreemption(), TRAINING: ClusterQueuePreemption()}
    return _queues(jobs, queue_of, (INFERENCE, TRAINING), policies, capacity, strategy, gpu_accounting, horizon_s)


def team_queues(
    jobs: Sequence[TimelineJob],
    capacity: Capacity,
    n_teams: int,
    *,
    strategy: str = "BestEffortFIFO",
    preemption: bool = True,
    seed: int = 0,
    gpu_accounting: str = "milli",
    horizon_s: Optional[float] = None,
) -> TimelineQueues:
    """``n_teams`` ClusterQueues ``team-1`` … ``team-N``, quotas in proportion to each
    team's demand.

    Each trace pod a job was drawn from (its ``source``) belongs to one team, drawn
    uniformly with numpy's generator seeded by ``seed`` in order of first appearance, so a
    team keeps submitting the same kinds of jobs. With ``preemption`` every team reclaims
    its quota (``reclaimWithinCohort: Any``) and lets its inference jobs preempt its
    training jobs (``withinClusterQueue: LowerPriority``); without, ``Never``.

    Raises
    ------
    InvalidInputError
        ``n_teams`` not an integer >= 1, and as :func:`qos_queues`.

    Other parameters are those of :func:`qos_queues`.
    """
    if isinstance(n_teams, bool) or not isinstance(n_teams, int) or n_teams < 1:
        raise InvalidInputError("n_teams", f"expected an integer >= 1, got {n_teams!r}")
    width = len(str(n_teams))
    names = tuple(f"team-{i:0{width}d}" for i in range(1, n_teams + 1))
    sources = list(dict.fromkeys(job.source for job in jobs))
    draws = np.random.default_rng(seed).integers(0, n_teams, size=len(sources))
    team_of_source = {source: names[int(d)] for source, d in zip(sources, draws)}
    queue_of = {job.name: team_of_source[job.source] for job in jobs}
    policy = (
        ClusterQueuePreemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
        if preemption
        else ClusterQueuePreemption()
    )
    return _queues(jobs, queue_of, names, {n: policy for n in names}, capacity, strategy, gpu_accounting, horizon_s)


def job_workload(job: TimelineJob, cluster_queue: str, *, gpu_accounting: str = "milli") -> Workload:
    """The Workload of one job: one PodSet (:data:`POD_SET`) of one pod with the job's
    requests (:func:`job_requests`), ``cluster_queue`` set, the priority of its class
    (:data:`CLASS_PRIORITY`, on the pod too) and ``created`` = its arrival.

    The pod is :func:`~placer.queues.model.pod_for_requests` of the job's cpu, memory and
    ``gpus``, with its ``gpu_milli`` and GPU models.
    """
    priority = CLASS_PRIORITY[job.job_class]
    placed = {CPU: job.cpu_milli, MEMORY: job.memory_mib * MIB, GPU: job.gpus}
    pod = pod_for_requests(
        job.name, placed, gpu_milli=job.pod.gpu_milli, gpu_models=job.pod.gpu_models, priority=priority
    )
    pod_set = PodSet(name=POD_SET, count=1, requests=job_requests(job, gpu_accounting), pod=pod)
    return Workload(
        name=job.name, pod_sets=(pod_set,), cluster_queue=cluster_queue, priority=priority, created=job.arrival
    )


def _queues(
    jobs: Sequence[TimelineJob],
    queue_of: Mapping[str, str],
    names: Sequence[str],
    policies: Mapping[str, ClusterQueuePreemption],
    capacity: Capacity,
    strategy: str,
    gpu_accounting: str,
    horizon_s: Optional[float],
) -> TimelineQueues:
    if strategy not in QUEUEING_STRATEGIES:
        raise InvalidInputError("strategy", f"expected one of {', '.join(QUEUEING_STRATEGIES)}, got {strategy!r}")
    gpu = gpu_resource(gpu_accounting)
    totals = cluster_capacity(capacity, gpu_accounting) if isinstance(capacity, ClusterSnapshot) else dict(capacity)
    resources = (gpu, CPU, MEMORY)
    for resource in resources:
        if resource not in totals:
            raise InvalidInputError("capacity", f"no {resource} amount (expected {', '.join(resources)})")
    by_queue: dict[str, list[TimelineJob]] = {name: [] for name in names}
    for job in jobs:
        by_queue[queue_of[job.name]].append(job)
    demands = [demand(by_queue[name], gpu_accounting, horizon_s) for name in names]
    quotas = {
        resource: largest_remainder(int(totals[resource]), [d[resource] for d in demands]) for resource in resources
    }
    cluster_queues = {}
    for i, name in enumerate(names):
        flavor = FlavorQuotas(name=FLAVOR, resources={r: ResourceQuota(nominal=quotas[r][i]) for r in resources})
        cluster_queues[name] = ClusterQueue(
            name=name,
            resource_groups=(ResourceGroup(covered_resources=resources, flavors=(flavor,)),),
            cohort=COHORT,
            queueing_strategy=strategy,
            preemption=policies[name],
        )
    config = QueueConfig(flavors={FLAVOR: ResourceFlavor(name=FLAVOR)}, cluster_queues=cluster_queues)
    return TimelineQueues(config=config, queue_of=queue_of, gpu_accounting=gpu_accounting)
