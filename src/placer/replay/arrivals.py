"""Jobs over time from an openb trace, at an offered GPU load the caller sets (SPEC §9).

A :class:`TimelineJob` is one pod of the trace as a job: when it arrives, how long it runs
once started (``deletion_time − scheduled_time`` of its trace row), what it asks for and
its ``qos``. :func:`trace_jobs` takes the trace's own arrivals; :func:`jobs_at_load`
resamples the trace to a chosen load; :func:`shrink_cluster` is the other way to raise the
load, a smaller cluster with the same mix of node types.

Offered GPU load
----------------
A job's GPU demand is ``gpus`` whole GPUs, or ``gpu_milli / 1000`` of a GPU for a shared
one (0 for a CPU-only job). Over a window ``[0, H)`` on a cluster of ``C`` GPUs::

    offered load = Σ_jobs demand_j × |[a_j, a_j + d_j) ∩ [0, H)|  /  (C × H)

with ``a_j`` the job's arrival and ``d_j`` its duration: the mean number of GPUs the jobs
would hold during the window if each started on arrival (on a cluster without limit), as a
fraction of the cluster's GPUs. Work beyond ``H`` is not counted, so the load of a window
says what that window asks for however long the jobs' lifetimes are.

Why a stationary start: openb's lifetimes are heavy-tailed (median about 10 minutes, yet
the 1 % of jobs that run longer than a day carry most of the GPU-seconds). A replay that
starts on an empty cluster would fill up over months, not hours. :func:`jobs_at_load`
therefore starts the Poisson process in its steady state: at time 0 the cluster already
has the jobs that a process running since long before would still have in progress (their
number is Poisson with mean ``rate × mean duration``; each drawn in proportion to its
duration, at a uniform age). With that start, the expected offered load of any window is
the requested load.
"""
from __future__ import annotations

import math
from typing import Optional, Protocol, Sequence

import numpy as np
from msgspec import Struct, structs

from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PodRequest

__all__ = [
    "TracePod",
    "INFERENCE",
    "TRAINING",
    "QOS_JOB_CLASS",
    "TimelineJob",
    "TraceJobs",
    "Arrivals",
    "job_class",
    "trace_jobs",
    "offered_load",
    "offered_gpu_seconds",
    "jobs_at_load",
    "shrink_cluster",
    "largest_remainder",
]

INFERENCE = "inference"
TRAINING = "training"
QOS_JOB_CLASS = {"LS": INFERENCE, "Guaranteed": INFERENCE, "BE": TRAINING, "Burstable": TRAINING}
"""The job class of each openb ``qos``: latency-sensitive and Guaranteed pods serve
(inference), best-effort and Burstable pods are batch work (training)."""


class TracePod(Protocol):
    """A pod of a trace with its times, as :class:`placer.adapters.openb.TimedPod` has them
    (the adapters are not imported here: core modules do not depend on readers)."""

    @property
    def pod(self) -> PodRequest: ...

    @property
    def qos(self) -> str: ...

    @property
    def creation_time(self) -> int: ...

    @property
    def lifetime(self) -> Optional[int]: ...


def job_class(qos: str) -> str:
    """:data:`INFERENCE` or :data:`TRAINING` for an openb ``qos`` (:data:`QOS_JOB_CLASS`).

    Raises
    ------
    InvalidInputError
        ``where`` = ``"qos"`` for a value outside :data:`QOS_JOB_CLASS`.
    """
    try:
        return QOS_JOB_CLASS[qos]
    except KeyError:
        raise InvalidInputError("qos", f"expected one of {', '.join(QOS_JOB_CLASS)}, got {qos!r}") from None


class TimelineJob(Struct, frozen=True, gc=False):
    """One job of a replay over time: a single pod that arrives, waits for admission, runs
    for ``duration`` seconds once started, and leaves.

    ``pod`` is what placer places (named ``name``); ``source`` is the name of the trace pod
    it was drawn from. ``initial`` marks a job already in progress when the replay starts
    (:func:`jobs_at_load`'s stationary start): it arrives at 0 and ``duration`` is what is
    left of its lifetime.
    """

    name: str
    arrival: float
    duration: float
    qos: str
    pod: PodRequest
    source: str
    initial: bool = False

    @property
    def gpus(self) -> int:
        """Whole GPUs, or 1 for a shared GPU (``num_gpu``); 0 for a CPU-only job."""
        return self.pod.gpus

    @property
    def gpu_milli(self) -> int:
        """Thousandths of each GPU (1000 unless the GPU is shared); 0 for a CPU-only job."""
        return self.pod.gpu_milli if self.pod.gpus else 0

    @property
    def gpu_demand(self) -> float:
        """GPUs held: ``gpus``, or ``gpu_milli / 1000`` for a shared GPU."""
        return self.pod.gpus * self.pod.gpu_milli / 1000 if self.pod.gpus else 0.0

    @property
    def cpu_milli(self) -> int:
        """CPU in millicores."""
        return self.pod.cpu_milli

    @property
    def memory_mib(self) -> int:
        """Memory in MiB."""
        return self.pod.memory_mib

    @property
    def job_class(self) -> str:
        """:data:`INFERENCE` or :data:`TRAINING`, by ``qos``."""
        return QOS_JOB_CLASS[self.qos]


class TraceJobs(Struct, frozen=True):
    """The jobs of a trace at its own times, and what was left out.

    ``horizon_s`` runs from the first arrival to the last end (arrival + duration);
    ``dropped`` counts the rows without a positive lifetime (never scheduled, no deletion
    time, or deleted no later than scheduled).
    """

    jobs: tuple[TimelineJob, ...]
    dropped: int
    horizon_s: float


class Arrivals(Struct, frozen=True):
    """Jobs drawn at a requested offered GPU load, and the load they achieve.

    ``offered_load`` is the achieved load of the window ``[0, horizon_s)`` (module
    docstring); ``rate_per_s`` the Poisson rate of new arrivals; ``dropped`` the trace rows
    left out of the pool (no positive lifetime); ``initial`` the jobs in progress at 0.
    """

    jobs: tuple[TimelineJob, ...]
    requested_load: float
    offered_load: float
    horizon_s: float
    cluster_gpus: float
    rate_per_s: float
    seed: int
    dropped: int
    initial: int

    def summary(self) -> str:
        """One line to print with every result, e.g. ``offered GPU load 0.903 (requested
        0.900) over 24.0 h on 6212 GPUs: 25123 jobs (6310 in progress at the start), Poisson
        rate 0.219/s, seed 1; 897 trace rows without a positive lifetime left out``."""
        return (
            f"offered GPU load {self.offered_load:.3f} (requested {self.requested_load:.3f}) over "
            f"{self.horizon_s / 3600:.1f} h on {_number(self.cluster_gpus)} GPUs: {len(self.jobs)} jobs "
            f"({self.initial} in progress at the start), Poisson rate {self.rate_per_s:.4g}/s, seed {self.seed}; "
            f"{self.dropped} trace rows without a positive lifetime left out"
        )


def trace_jobs(pods: Sequence[TracePod]) -> TraceJobs:
    """The trace's own jobs: arrival ``creation_time``, duration ``deletion_time −
    scheduled_time``, in order of arrival (then file order).

    Pods without a positive lifetime are left out and counted.
    """
    jobs: list[TimelineJob] = []
    dropped = 0
    for timed in pods:
        lifetime = timed.lifetime
        if lifetime is None or lifetime <= 0:
            dropped += 1
            continue
        jobs.append(
            TimelineJob(
                name=timed.pod.name,
                arrival=float(timed.creation_time),
                duration=float(lifetime),
                qos=timed.qos,
                pod=timed.pod,
                source=timed.pod.name,
            )
        )
    jobs.sort(key=lambda j: j.arrival)
    horizon = 0.0
    if jobs:
        horizon = max(j.arrival + j.duration for j in jobs) - jobs[0].arrival
    return TraceJobs(jobs=tuple(jobs), dropped=dropped, horizon_s=horizon)


def offered_gpu_seconds(jobs: Sequence[TimelineJob], start: float, end: float) -> float:
    """``Σ gpu_demand × |[arrival, arrival + duration) ∩ [start, end)|`` over the jobs: the
    GPU-seconds they would hold within the window if each started on arrival."""
    total = 0.0
    for job in jobs:
        overlap = min(job.arrival + job.duration, end) - max(job.arrival, start)
        if overlap > 0:
            total += job.gpu_demand * overlap
    return total


def offered_load(jobs: Sequence[TimelineJob], cluster_gpus: float, horizon_s: float, start: float = 0.0) -> float:
    """The offered GPU load of the window ``[start, start + horizon_s)`` on a cluster of
    ``cluster_gpus`` GPUs (the module docstring defines it).

    Raises
    ------
    InvalidInputError
        ``cluster_gpus`` or ``horizon_s`` not a positive finite number.
    """
    _positive(cluster_gpus, "cluster_gpus")
    _positive(horizon_s, "horizon_s")
    return offered_gpu_seconds(jobs, start, start + horizon_s) / (cluster_gpus * horizon_s)


def jobs_at_load(
    pods_with_times: Sequence[TracePod],
    cluster_gpus: float,
    load: float,
    *,
    seed: int,
    horizon_s: Optional[float] = None,
    n_jobs: Optional[int] = None,
    stationary_start: bool = True,
) -> Arrivals:
    """Jobs drawn from a trace so that they offer ``load`` × the cluster's GPUs.

    The pool is the trace's pods with a positive lifetime (:func:`trace_jobs`). Jobs are
    drawn from it uniformly with replacement, each keeping its pod's shape, lifetime and
    ``qos``; they arrive as a Poisson process of rate ``load × cluster_gpus / mean(demand
    × duration)`` over the pool, so that the expected offered load is ``load``. With
    ``stationary_start`` (the default) the jobs in progress at time 0 are drawn too
    (module docstring), as jobs of arrival 0 with their remaining duration, named first.

    Give exactly one of ``horizon_s`` (arrivals in ``[0, horizon_s)``) and ``n_jobs`` (that
    many new arrivals; the window then ends at the next arrival of the process). Jobs are
    named ``job-<n>`` in order of arrival. The same arguments give the same jobs.

    Parameters
    ----------
    pods_with_times : sequence of TracePod
        The trace (:func:`placer.adapters.openb.read_timed_pods`).
    cluster_gpus : float
        The cluster's GPUs, the load's denominator.
    load : float
        The offered GPU load asked for, > 0 (1.0: as many GPUs as the cluster has).
    seed : int
        Seeds numpy's default generator.
    horizon_s, n_jobs : float or int, optional
        The length of the window, or the number of new arrivals.
    stationary_start : bool
        Begin with the steady state's jobs in progress (True) or on an empty cluster.

    Returns
    -------
    Arrivals
        The jobs in order of arrival and the load they achieve over the window.

    Raises
    ------
    InvalidInputError
        ``load``, ``cluster_gpus`` or ``horizon_s`` not a positive finite number,
        ``n_jobs`` not an integer >= 1, both or neither of them given, or a pool without
        GPU demand (``pods``).
    """
    _positive(load, "load")
    _positive(cluster_gpus, "cluster_gpus")
    if (horizon_s is None) == (n_jobs is None):
        raise InvalidInputError("horizon_s", "give exactly one of horizon_s and n_jobs")
    if horizon_s is not None:
        _positive(horizon_s, "horizon_s")
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1):
        raise InvalidInputError("n_jobs", f"expected an integer >= 1, got {n_jobs!r}")
    trace = trace_jobs(pods_with_times)
    pool = trace.jobs
    demand = np.array([j.gpu_demand for j in pool], dtype=np.float64)
    duration = np.array([j.duration for j in pool], dtype=np.float64)
    mean_work = float(np.mean(demand * duration)) if pool else 0.0
    if mean_work <= 0.0:
        raise InvalidInputError("pods", "no pod with a positive lifetime requests a GPU: no load to offer")
    rate = load * cluster_gpus / mean_work
    rng = np.random.default_rng(seed)

    initial: list[tuple[int, float]] = []
    if stationary_start:
        in_progress = int(rng.poisson(rate * float(duration.sum()) / len(pool)))
        picks = rng.choice(len(pool), size=in_progress, p=duration / duration.sum())
        ages = rng.random(in_progress) * duration[picks]
        initial = [(int(i), float(duration[i] - age)) for i, age in zip(picks, ages)]
        initial = [(i, left) for i, left in initial if left > 0.0]

    if n_jobs is not None:
        times = np.cumsum(rng.exponential(1.0 / rate, size=n_jobs + 1))
        window = float(times[-1])
        times = times[:-1]
    else:
        assert horizon_s is not None
        window = float(horizon_s)
        expected = rate * window
        chunk = max(16, int(expected + 6.0 * math.sqrt(expected)) + 16)
        times = np.cumsum(rng.exponential(1.0 / rate, size=chunk))
        while times[-1] < window:  # rarely: more arrivals than drawn
            times = np.concatenate([times, times[-1] + np.cumsum(rng.exponential(1.0 / rate, size=chunk))])
        times = times[times < window]
    picks = rng.integers(0, len(pool), size=len(times))

    width = len(str(max(len(initial) + len(times) - 1, 0)))
    jobs: list[TimelineJob] = []
    for i, left in initial:
        jobs.append(_drawn(pool[i], f"job-{len(jobs):0{width}d}", 0.0, left, initial=True))
    for i, t in zip(picks, times):
        jobs.append(_drawn(pool[int(i)], f"job-{len(jobs):0{width}d}", float(t), pool[int(i)].duration))
    achieved = offered_gpu_seconds(jobs, 0.0, window) / (cluster_gpus * window)
    return Arrivals(
        jobs=tuple(jobs),
        requested_load=float(load),
        offered_load=achieved,
        horizon_s=window,
        cluster_gpus=float(cluster_gpus),
        rate_per_s=rate,
        seed=seed,
        dropped=trace.dropped,
        initial=len(initial),
    )


def shrink_cluster(snapshot: ClusterSnapshot, fraction: float, seed: int) -> ClusterSnapshot:
    """A cluster of ``fraction`` of the nodes, node types kept in proportion.

    The kept total is ``round(fraction × nodes)`` (at least 1); it is shared among the node
    types in proportion to their counts by largest remainder (ties to the type seen
    first); which nodes of a type stay is a seeded draw. Nodes keep their order, and node
    types no kept node uses are dropped.

    Raises
    ------
    InvalidInputError
        ``fraction`` not in (0, 1].
    """
    if not (isinstance(fraction, (int, float)) and 0.0 < fraction <= 1.0):
        raise InvalidInputError("fraction", f"expected a number in (0, 1], got {fraction!r}")
    by_type: dict[str, list[int]] = {}
    for index, node in enumerate(snapshot.nodes):
        by_type.setdefault(node.type if node.type is not None else repr(node.hardware), []).append(index)
    total = max(1, round(fraction * len(snapshot.nodes)))
    counts = largest_remainder(total, [len(v) for v in by_type.values()])
    rng = np.random.default_rng(seed)
    kept: list[int] = []
    for indices, count in zip(by_type.values(), counts):
        kept.extend(int(i) for i in rng.choice(indices, size=count, replace=False))
    nodes = tuple(snapshot.nodes[i] for i in sorted(kept))
    used = {n.type for n in nodes}
    types = {name: t for name, t in snapshot.node_types.items() if name in used}
    return structs.replace(snapshot, nodes=nodes, node_types=types)


def largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split into non-negative integers in proportion to ``weights`` (Hamilton's
    method: floors, then one more to the largest remainders, ties to the earlier weight);
    equal shares when every weight is 0. The parts sum to ``total``."""
    if not weights:
        return []
    w = [max(0.0, float(x)) for x in weights]
    s = sum(w)
    if s <= 0.0:
        w, s = [1.0] * len(w), float(len(w))
    exact = [total * x / s for x in w]
    parts = [math.floor(e) for e in exact]
    short = total - sum(parts)
    order = sorted(range(len(w)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:short]:
        parts[i] += 1
    return parts


def _drawn(job: TimelineJob, name: str, arrival: float, duration: float, *, initial: bool = False) -> TimelineJob:
    return TimelineJob(
        name=name,
        arrival=arrival,
        duration=duration,
        qos=job.qos,
        pod=structs.replace(job.pod, name=name),
        source=job.source,
        initial=initial,
    )


def _positive(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise InvalidInputError(name, f"expected a positive number, got {value!r}")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
