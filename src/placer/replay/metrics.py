"""What a replay over time measures, per queue, and the files it writes (SPEC §9).

The event loop tells a :class:`TimelineRecorder` what happens to each workload
(:meth:`~TimelineRecorder.submitted`, :meth:`~TimelineRecorder.admitted`,
:meth:`~TimelineRecorder.finished`, :meth:`~TimelineRecorder.evicted`) and, once the events
of a time are done, calls :meth:`~TimelineRecorder.sample`. The recorder keeps each
queue's running GPUs and pending pods itself, from the events; the sample adds what only
the admission engine knows (which ClusterQueues borrow) and, optionally, the cluster's own
count of unallocated GPUs.

Definitions (window ``[start, end]``; the state of a sample holds until the next sample,
the last one until ``end``; before the first sample nothing runs and nothing waits):

* **queueing delay** of a job: the time it spent pending before its last admission,
  summed over its waits — a preempted job waits again from its eviction and both waits
  count. A job still pending at ``end`` (*waiting at end*; *never admitted* when it was
  never admitted at all) is counted at its wait so far, censored at ``end`` (its delay is at
  least that), so that a queue that admits little does not show small delays. p50, p99
  and the mean are over the queue's jobs submitted ``measured`` (numpy's
  linear-interpolation percentiles); a figure that a censored delay can raise is a lower
  bound, flagged ``*_lower_bound`` (shown ``≥``).
* **mean GPUs allocated**: the time-weighted mean of the queue's running GPUs (a shared
  GPU counts ``gpu_milli / 1000``).
* **GPU-hours unallocated while waiting**: the integral of the cluster's unallocated GPUs
  over the times when the queue has a pending pod (for the cluster, when any queue has
  one), in GPU-hours.
* **borrowing**: the fraction of the window during which the ClusterQueue borrows (for
  the cluster, during which any queue borrows).
* **preemptions suffered / caused**: evictions of the queue's workloads, and evictions
  done for them.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from msgspec import Struct

from placer.text.files import PathLike, write_bytes_atomic, write_text_atomic

__all__ = [
    "ALL_QUEUES",
    "CSV_COLUMNS",
    "TimelineRecorder",
    "TimelineSeries",
    "QueueMetrics",
    "TimelineMetrics",
    "TimelineRun",
    "timeline_csv",
    "write_timeline_csv",
    "queues_markdown",
    "write_queues_md",
    "timeline_figure",
    "write_timeline_plot",
    "format_duration",
    "at_least",
]

ALL_QUEUES = "all"
"""The name of the cluster-wide row of :class:`TimelineMetrics`."""

CSV_COLUMNS = (
    "time_s",
    "queue",
    "running_gpus",
    "pending_pods",
    "borrowing",
    "unallocated_gpus",
    "unallocated_gpus_while_waiting",
)

_PENDING, _RUNNING, _FINISHED = 0, 1, 2


class _Job:
    __slots__ = ("queue", "milli", "pods", "measured", "state", "pending_since", "waited", "admissions")

    def __init__(self, queue: str, milli: int, pods: int, measured: bool, t: float) -> None:
        self.queue = queue
        self.measured = measured
        self.milli = milli
        self.pods = pods
        self.state = _PENDING
        self.pending_since = t
        self.waited = 0.0
        self.admissions = 0


@dataclass(frozen=True)
class TimelineSeries:
    """The samples of a replay: at ``times[i]``, per queue (columns in ``queues`` order)
    the running GPUs, pending pods and borrowing flag, and the cluster's unallocated GPUs."""

    queues: tuple[str, ...]
    times: np.ndarray
    running_gpus: np.ndarray
    pending_pods: np.ndarray
    borrowing: np.ndarray
    unallocated_gpus: np.ndarray
    cluster_gpus: float


class QueueMetrics(Struct, frozen=True):
    """The figures of one queue (or of the whole cluster, ``queue`` = :data:`ALL_QUEUES`)
    over a window; the module docstring defines them. Delays are ``None`` when the queue
    had no measured job. ``delay_jobs`` counts the measured jobs (those the delays are
    over), ``never_admitted`` those of them never admitted and ``delays_censored`` those
    still pending at the end (their delay is their wait until then)."""

    queue: str
    submitted: int
    admitted: int
    finished: int
    waiting_at_end: int
    delay_p50_s: Optional[float]
    delay_p99_s: Optional[float]
    delay_mean_s: Optional[float]
    mean_running_gpus: float
    gpu_hours: float
    unallocated_gpu_hours_while_waiting: float
    borrowing_fraction: float
    admitted_borrowing: int
    preemptions_suffered: int
    preemptions_caused: int
    delay_jobs: int = 0
    never_admitted: int = 0
    delays_censored: int = 0
    delay_p50_lower_bound: bool = False
    delay_p99_lower_bound: bool = False
    delay_mean_lower_bound: bool = False


class TimelineMetrics(Struct, frozen=True):
    """Per queue and cluster-wide figures of the window ``[start, end]``."""

    start: float
    end: float
    cluster_gpus: float
    queues: tuple[QueueMetrics, ...]
    cluster: QueueMetrics
    mean_unallocated_gpus: float

    def queue(self, name: str) -> QueueMetrics:
        """The figures of one queue by name (:data:`ALL_QUEUES` for the cluster)."""
        if name == ALL_QUEUES:
            return self.cluster
        for q in self.queues:
            if q.queue == name:
                return q
        raise KeyError(name)


class TimelineRun(Struct, frozen=True):
    """One run of a replay for ``queues.md``: a title, the offered GPU load it ran at, its
    figures, and an optional line under the title (e.g. :meth:`Arrivals.summary
    <placer.replay.arrivals.Arrivals.summary>`)."""

    title: str
    offered_load: float
    metrics: TimelineMetrics
    note: str = ""


class TimelineRecorder:
    """Collects a replay's events and state samples; computes :class:`TimelineMetrics`.

    Times must not go back: each call's ``t`` is at least the latest one seen. Workload
    keys are unique over the replay. A call out of turn (admitting a workload that is not
    pending, finishing one that is not running, an unknown key or queue) raises
    ``ValueError``: it is a fault of the event loop.

    Parameters
    ----------
    queues : sequence of str
        The ClusterQueues, in the order of reports.
    cluster_gpus : float
        The cluster's GPUs (unallocated = this − the GPUs running, unless a sample says).
    start : float
        The start of the window.
    """

    def __init__(self, queues: Sequence[str], cluster_gpus: float, start: float = 0.0) -> None:
        if not queues or len(set(queues)) != len(queues):
            raise ValueError(f"expected distinct queue names, got {list(queues)!r}")
        if ALL_QUEUES in queues:
            raise ValueError(f"{ALL_QUEUES!r} names the cluster-wide row, not a queue")
        self.queues = tuple(queues)
        self.cluster_gpus = float(cluster_gpus)
        self.start = float(start)
        self._column = {q: i for i, q in enumerate(self.queues)}
        self._jobs: dict[str, _Job] = {}
        self._running_milli = [0] * len(self.queues)
        self._pending_pods = [0] * len(self.queues)
        self._suffered = [0] * len(self.queues)
        self._caused = [0] * len(self.queues)
        self._admitted_borrowing = [0] * len(self.queues)
        self._now = self.start
        self._times: list[float] = []
        self._rows: list[tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...], float]] = []

    # ------------------------------------------------------------------ events

    def submitted(
        self, t: float, key: str, queue: str, gpus: float, pods: int = 1, measured: bool = True
    ) -> None:
        """Workload ``key`` of ClusterQueue ``queue`` arrives, asking for ``gpus`` GPUs in
        all (a shared GPU as its fraction) over ``pods`` pods, and waits.

        ``measured=False`` leaves its delay out of the delay figures (for a job that was
        already running when the replay started, whose admission at the start is no
        queueing); it counts in everything else."""
        self._advance(t)
        if key in self._jobs:
            raise ValueError(f"{key} is submitted twice")
        if queue not in self._column:
            raise ValueError(f"{key}: unknown queue {queue!r}")
        if not gpus >= 0 or pods < 1:
            raise ValueError(f"{key}: expected gpus >= 0 and pods >= 1, got {gpus!r} and {pods!r}")
        job = _Job(queue, round(gpus * 1000), pods, measured, t)
        self._jobs[key] = job
        self._pending_pods[self._column[queue]] += pods

    def admitted(self, t: float, key: str, borrowing: bool = False) -> None:
        """Pending workload ``key`` is admitted and starts; ``borrowing``: its ClusterQueue
        borrows once it runs."""
        self._advance(t)
        job = self._job(key, _PENDING, "admitted")
        column = self._column[job.queue]
        job.state = _RUNNING
        job.waited += t - job.pending_since
        job.admissions += 1
        self._pending_pods[column] -= job.pods
        self._running_milli[column] += job.milli
        if borrowing:
            self._admitted_borrowing[column] += 1

    def finished(self, t: float, key: str) -> None:
        """Running workload ``key`` ends and frees its GPUs."""
        self._advance(t)
        job = self._job(key, _RUNNING, "finished")
        job.state = _FINISHED
        self._running_milli[self._column[job.queue]] -= job.milli

    def evicted(self, t: float, key: str, by: Optional[str] = None) -> None:
        """Running workload ``key`` is preempted (for workload ``by``, when known) and waits
        again from ``t``."""
        self._advance(t)
        job = self._job(key, _RUNNING, "evicted")
        column = self._column[job.queue]
        job.state = _PENDING
        job.pending_since = t
        self._running_milli[column] -= job.milli
        self._pending_pods[column] += job.pods
        self._suffered[column] += 1
        if by is not None:
            if by not in self._jobs:
                raise ValueError(f"{key} is evicted by an unknown workload {by!r}")
            self._caused[self._column[self._jobs[by].queue]] += 1

    def sample(
        self,
        t: float,
        borrowing: Optional[Mapping[str, bool]] = None,
        unallocated_gpus: Optional[float] = None,
    ) -> None:
        """Record the state after the events at ``t``: each queue's running GPUs and pending
        pods (from the events), which queues borrow (``borrowing``, missing ones do not),
        and the cluster's unallocated GPUs (``unallocated_gpus``, or ``cluster_gpus`` − all
        running GPUs). A second sample at the same time replaces the first."""
        self._advance(t)
        flags = [False] * len(self.queues)
        for queue, flag in (borrowing or {}).items():
            if queue not in self._column:
                raise ValueError(f"borrowing names an unknown queue {queue!r}")
            flags[self._column[queue]] = bool(flag)
        if unallocated_gpus is None:
            unallocated_gpus = self.cluster_gpus - sum(self._running_milli) / 1000
        row = (tuple(self._running_milli), tuple(self._pending_pods), tuple(flags), float(unallocated_gpus))
        if self._times and self._times[-1] == t:
            self._rows[-1] = row
        else:
            self._times.append(float(t))
            self._rows.append(row)

    # ------------------------------------------------------------------ results

    def series(self) -> TimelineSeries:
        """The samples so far, as arrays."""
        n, q = len(self._rows), len(self.queues)
        return TimelineSeries(
            queues=self.queues,
            times=np.array(self._times, dtype=np.float64),
            running_gpus=np.array([r[0] for r in self._rows], dtype=np.float64).reshape(n, q) / 1000,
            pending_pods=np.array([r[1] for r in self._rows], dtype=np.int64).reshape(n, q),
            borrowing=np.array([r[2] for r in self._rows], dtype=bool).reshape(n, q),
            unallocated_gpus=np.array([r[3] for r in self._rows], dtype=np.float64),
            cluster_gpus=self.cluster_gpus,
        )

    def metrics(self, end: Optional[float] = None) -> TimelineMetrics:
        """The figures of the window ``[start, end]`` (``end`` defaults to the latest time
        seen and may not be earlier)."""
        end = self._now if end is None else float(end)
        if end < self._now:
            raise ValueError(f"end {end} is before the latest time recorded, {self._now}")
        s = self.series()
        # Each sample holds until the next one (the last until end); before the first
        # sample, an idle segment: nothing running, nothing pending, no borrowing.
        bounds = np.append(s.times, end)
        dt = np.diff(bounds)
        length = end - self.start
        idle = (s.times[0] if len(s.times) else end) - self.start
        waiting = s.pending_pods > 0
        any_waiting = waiting.any(axis=1)
        unalloc_while = s.unallocated_gpus[:, None] * waiting
        per_queue_jobs: dict[str, list[_Job]] = {q: [] for q in self.queues}
        for job in self._jobs.values():
            per_queue_jobs[job.queue].append(job)

        def share(seconds: float) -> float:
            return seconds / length if length > 0 else 0.0

        rows = []
        for i, name in enumerate(self.queues):
            rows.append(
                _queue_row(
                    name,
                    per_queue_jobs[name],
                    end,
                    mean_running=share(float(np.dot(s.running_gpus[:, i], dt))),
                    gpu_hours=float(np.dot(s.running_gpus[:, i], dt)) / 3600,
                    unallocated_while=float(np.dot(unalloc_while[:, i], dt)) / 3600,
                    borrowing=share(float(np.dot(s.borrowing[:, i], dt))),
                    admitted_borrowing=self._admitted_borrowing[i],
                    suffered=self._suffered[i],
                    caused=self._caused[i],
                )
            )
        total_running = s.running_gpus.sum(axis=1)
        cluster = _queue_row(
            ALL_QUEUES,
            list(self._jobs.values()),
            end,
            mean_running=share(float(np.dot(total_running, dt))),
            gpu_hours=float(np.dot(total_running, dt)) / 3600,
            unallocated_while=float(np.dot(s.unallocated_gpus * any_waiting, dt)) / 3600,
            borrowing=share(float(np.dot(s.borrowing.any(axis=1), dt))),
            admitted_borrowing=sum(self._admitted_borrowing),
            suffered=sum(self._suffered),
            caused=sum(self._caused),
        )
        mean_unallocated = share(float(np.dot(s.unallocated_gpus, dt)) + self.cluster_gpus * float(idle))
        return TimelineMetrics(
            start=self.start,
            end=end,
            cluster_gpus=self.cluster_gpus,
            queues=tuple(rows),
            cluster=cluster,
            mean_unallocated_gpus=mean_unallocated,
        )

    # ------------------------------------------------------------------ helpers

    def _advance(self, t: float) -> None:
        if not t >= self._now:
            raise ValueError(f"time goes back: {t} after {self._now}")
        self._now = float(t)

    def _job(self, key: str, state: int, event: str) -> _Job:
        job = self._jobs.get(key)
        if job is None:
            raise ValueError(f"{key} is {event} but was never submitted")
        if job.state != state:
            expected = "pending" if state == _PENDING else "running"
            raise ValueError(f"{key} is {event} but is not {expected}")
        return job


def _delay_of(job: _Job, end: float) -> float:
    """The job's queueing delay; for a job pending at ``end``, its wait until then."""
    return job.waited + (end - job.pending_since if job.state == _PENDING else 0.0)


def _percentile_lower_bounds(delays: np.ndarray, censored: np.ndarray, qs: Sequence[float]) -> list[bool]:
    """Per percentile in ``qs`` (0-100), whether the censored delays, were they longer, would
    raise it: it moves when they are all put above every delay."""
    if not censored.any():
        return [False] * len(qs)
    longer = np.where(censored, delays.max() + 1.0, delays)
    return [bool(x != y) for x, y in zip(np.percentile(delays, qs), np.percentile(longer, qs))]


def _queue_row(
    name: str,
    jobs: Sequence[_Job],
    end: float,
    *,
    mean_running: float,
    gpu_hours: float,
    unallocated_while: float,
    borrowing: float,
    admitted_borrowing: int,
    suffered: int,
    caused: int,
) -> QueueMetrics:
    measured = [j for j in jobs if j.measured]
    delays = np.array([_delay_of(j, end) for j in measured], dtype=np.float64)
    censored = np.array([j.state == _PENDING for j in measured], dtype=bool)
    p50 = p99 = mean = None
    p50_low = p99_low = False
    if len(delays):
        p50, p99 = (float(x) for x in np.percentile(delays, [50, 99]))
        p50_low, p99_low = _percentile_lower_bounds(delays, censored, [50, 99])
        mean = float(delays.mean())
    return QueueMetrics(
        queue=name,
        submitted=len(jobs),
        admitted=sum(1 for j in jobs if j.admissions),
        finished=sum(1 for j in jobs if j.state == _FINISHED),
        waiting_at_end=sum(1 for j in jobs if j.state == _PENDING),
        delay_p50_s=p50,
        delay_p99_s=p99,
        delay_mean_s=mean,
        mean_running_gpus=mean_running,
        gpu_hours=gpu_hours,
        unallocated_gpu_hours_while_waiting=unallocated_while,
        borrowing_fraction=borrowing,
        admitted_borrowing=admitted_borrowing,
        preemptions_suffered=suffered,
        preemptions_caused=caused,
        delay_jobs=len(measured),
        never_admitted=sum(1 for j in measured if not j.admissions),
        delays_censored=int(censored.sum()),
        delay_p50_lower_bound=p50_low,
        delay_p99_lower_bound=p99_low,
        delay_mean_lower_bound=bool(censored.any()),
    )


# ---------------------------------------------------------------------- timeline.csv


def timeline_csv(series: TimelineSeries) -> str:
    """``timeline.csv``: one row per sample and queue, columns :data:`CSV_COLUMNS` (times
    in seconds, GPUs to the thousandth, borrowing 0 or 1; ``unallocated_gpus_while_waiting``
    is the cluster's unallocated GPUs when the queue has a pending pod, else 0)."""
    out = [",".join(CSV_COLUMNS)]
    for i, t in enumerate(series.times):
        unallocated = float(series.unallocated_gpus[i])
        for j, queue in enumerate(series.queues):
            pending = int(series.pending_pods[i, j])
            out.append(
                f"{t:.3f},{queue},{series.running_gpus[i, j]:.3f},{pending},{int(series.borrowing[i, j])},"
                f"{unallocated:.3f},{unallocated if pending else 0.0:.3f}"
            )
    return "\n".join(out) + "\n"


def write_timeline_csv(series: TimelineSeries, path: PathLike) -> None:
    """Write :func:`timeline_csv` to ``path`` atomically."""
    write_text_atomic(path, timeline_csv(series))


# ---------------------------------------------------------------------- queues.md

_TABLE_HEADER = (
    "| queue | jobs | admitted | waiting at end | delay p50 | delay p99 | mean GPUs allocated "
    "| GPU-h unallocated while waiting | borrowing | preemptions suffered | preemptions caused |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def queues_markdown(runs: Sequence[TimelineRun]) -> str:
    """``queues.md``: per run, a heading, the offered GPU load, and a table of the queues
    and the cluster (:class:`QueueMetrics`); delays as ``s``, ``min`` or ``h``."""
    parts = ["# Queues over time\n"]
    for run in runs:
        m = run.metrics
        lines = [
            f"## {run.title}",
            "",
            f"Offered GPU load **{run.offered_load:.3f}** on {_gpus(m.cluster_gpus)} GPUs; "
            f"window {m.start / 3600:.2f}–{m.end / 3600:.2f} h; "
            f"mean unallocated GPUs {m.mean_unallocated_gpus:.1f}.",
        ]
        if run.note:
            lines += ["", run.note]
        lines += ["", _TABLE_HEADER]
        for q in (*m.queues, m.cluster):
            name = "**all**" if q.queue == ALL_QUEUES else q.queue
            lines.append(
                f"| {name} | {q.submitted} | {q.admitted} | {q.waiting_at_end} "
                f"| {at_least(q.delay_p50_lower_bound, format_duration(q.delay_p50_s), '≥ ')} "
                f"| {at_least(q.delay_p99_lower_bound, format_duration(q.delay_p99_s), '≥ ')} | {q.mean_running_gpus:.1f} "
                f"| {q.unallocated_gpu_hours_while_waiting:.1f} | {100 * q.borrowing_fraction:.1f} % "
                f"| {q.preemptions_suffered} | {q.preemptions_caused} |"
            )
        c = m.cluster
        if c.delays_censored:
            lines += ["", f"Delays are over the {c.delay_jobs} jobs submitted in the window; the {c.delays_censored} "
                      f"still waiting at the end ({c.never_admitted} never admitted) count at their wait so far: "
                      "a delay marked ≥ is a lower bound."]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def write_queues_md(runs: Sequence[TimelineRun], path: PathLike) -> None:
    """Write :func:`queues_markdown` to ``path`` atomically."""
    write_text_atomic(path, queues_markdown(runs))


def format_duration(seconds: Optional[float], hour_digits: int = 1) -> str:
    """``42 s``, ``7.5 min`` or ``1.6 h`` (``—`` for None)."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.{hour_digits}f} h"


def at_least(lower_bound: bool, text: str, sign: str = ">= ") -> str:
    """``text`` marked as a lower bound (``sign`` before it) when ``lower_bound``."""
    return sign + text if lower_bound else text


def _gpus(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---------------------------------------------------------------------- timeline.png


def _extended(series: TimelineSeries, end: float) -> TimelineSeries:
    """The series with its last state repeated at ``end``."""
    return TimelineSeries(
        queues=series.queues,
        times=np.append(series.times, end),
        running_gpus=np.vstack([series.running_gpus, series.running_gpus[-1:]]),
        pending_pods=np.vstack([series.pending_pods, series.pending_pods[-1:]]),
        borrowing=np.vstack([series.borrowing, series.borrowing[-1:]]),
        unallocated_gpus=np.append(series.unallocated_gpus, series.unallocated_gpus[-1]),
        cluster_gpus=series.cluster_gpus,
    )


def timeline_figure(series: TimelineSeries, title: str = "", end: Optional[float] = None) -> Any:
    """The matplotlib figure of :func:`write_timeline_plot` (matplotlib is imported here,
    with the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if end is not None and len(series.times) and end > series.times[-1]:
        series = _extended(series, end)
    hours = series.times / 3600
    fig, (alloc, pending, idle) = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True)
    try:
        base = np.zeros(len(hours))
        for j, queue in enumerate(series.queues):
            top = base + series.running_gpus[:, j]
            alloc.fill_between(hours, base, top, step="post", alpha=0.7, lw=0, label=queue)
            base = top
        alloc.axhline(series.cluster_gpus, color="black", lw=0.8, ls="--", label="cluster GPUs")
        alloc.set_ylabel("GPUs allocated")
        alloc.legend(loc="upper right", fontsize=8)
        for j, queue in enumerate(series.queues):
            pending.step(hours, series.pending_pods[:, j], where="post", lw=1.0, label=queue)
        pending.set_ylabel("pending pods")
        pending.legend(loc="upper right", fontsize=8)
        waiting = series.pending_pods.sum(axis=1) > 0
        idle.step(hours, series.unallocated_gpus, where="post", color="0.6", lw=0.8, label="unallocated GPUs")
        idle.fill_between(
            hours, 0, series.unallocated_gpus * waiting, step="post", color="tab:red", alpha=0.6, lw=0,
            label="unallocated while work waits",
        )
        idle.set_ylabel("GPUs")
        idle.set_xlabel("time (h)")
        idle.legend(loc="upper right", fontsize=8)
        for ax in (alloc, pending, idle):
            ax.grid(True, alpha=0.3)
            ax.set_ylim(bottom=0)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def write_timeline_plot(
    series: TimelineSeries, path: PathLike, title: str = "", end: Optional[float] = None
) -> None:
    """Write ``timeline.png`` atomically: GPUs allocated per queue (stacked) with the
    cluster's GPUs, pending pods per queue, and the unallocated GPUs with the part of
    them left idle while work waits; time in hours, the last sample drawn until ``end``
    when given."""
    fig = timeline_figure(series, title, end)
    import matplotlib.pyplot as plt

    try:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100)
        write_bytes_atomic(path, png.getvalue())
    finally:
        plt.close(fig)
