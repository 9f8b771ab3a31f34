"""The event loop of a replay over time through Kueue ClusterQueues (SPEC §9, issue #16
items 3 and 4).

:func:`run_timeline` is the event loop. Jobs (:class:`~placer.replay.arrivals.TimelineJob`)
arrive, wait in their ClusterQueue as Kueue Workloads, are admitted by a
:class:`~placer.queues.scheduler.QueueScheduler` that places their pods on the cluster,
run for their duration and leave:

* events are taken in order of time; at one time, departures go before arrivals;
* after the events of a time, scheduling cycles run at that time until nothing changes:
  no workload is left that a cycle would try (``active_count == 0``), or a cycle admits
  nothing, preempts nothing and parks nothing (the same state gives the same cycle);
* eviction is instantaneous; the engine keeps a preemptor at the head of its queue until it
  is admitted (Kueue's sticky preemptor), but should a victim still be admitted again, at
  the same time, before the workload that preempted it and be preempted again for it, the
  cycles would go round for ever. A cycle that repeats an eviction of that time (the same
  victim for the same workload) therefore ends the cycles of that time; such times are
  counted (:attr:`TimelineOutcome.stalls`);
* an admitted job's departure is due at its admission time plus its duration; a preempted
  job loses its run (its departure is cancelled, it waits again and, once admitted again,
  runs its whole duration);
* a :class:`~placer.replay.metrics.TimelineRecorder` hears every event and takes a sample
  after each time, with which ClusterQueues borrow; the replay stops at the horizon.

:mod:`placer.replay.timeline` runs it for ``placer simulate --timeline``.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from msgspec import Struct
from msgspec.structs import replace

from placer import policies
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import target_workload
from placer.model import Assignment, ClusterSnapshot, load_snapshot
from placer.replay.arrivals import Arrivals, TimelineJob
from placer.replay.metrics import TimelineMetrics, TimelineRecorder, TimelineSeries
from placer.queues.model import QUEUEING_STRATEGIES, ClusterQueuePreemption, QueueConfig
from placer.replay.timeline_queues import TimelineQueues

__all__ = ["EVENT_KINDS", "Progress", "TimelineEvent", "TimelineOutcome", "configure_queues", "run_timeline"]

EVENT_KINDS = ("submitted", "admitted", "evicted", "finished")
"""The kinds of :class:`TimelineEvent`, in the order a workload meets them."""
Progress = Callable[[float], None]
"""Called as the replay goes with the simulated seconds since its start."""


class TimelineEvent(Struct, frozen=True, gc=False):
    """One thing that happened to a workload (kept when :func:`run_timeline` is asked to).

    ``kind`` is one of :data:`EVENT_KINDS`; ``by`` is the preemptor of an eviction;
    ``assignments`` are where an admitted workload's pods went.
    """

    time: float
    kind: str
    workload: str
    by: Optional[str] = None
    assignments: tuple[Assignment, ...] = ()


@dataclass(frozen=True)
class TimelineOutcome:
    """What a replay over time measured.

    Attributes
    ----------
    metrics : TimelineMetrics
        Per queue and cluster-wide figures of the window ``[start, end]``.
    series : TimelineSeries
        The samples (one per event time).
    start, end : float
        The window, in seconds.
    cycles : int
        Scheduling cycles run.
    event_times : int
        Distinct times at which events were processed.
    admissions, evictions, finished : int
        Workloads admitted (a re-admission counts again), preempted, and finished.
    running_at_end, pending_at_end : int
        Workloads running, and waiting, when the replay stopped.
    stalls : int
        Times whose cycles ended on a repeated eviction (module docstring).
    wall_s : float
        Seconds the replay took.
    log : tuple of TimelineEvent
        Every event in order (empty unless ``keep_log``).
    """

    metrics: TimelineMetrics
    series: TimelineSeries
    start: float
    end: float
    cycles: int
    event_times: int
    admissions: int
    evictions: int
    finished: int
    running_at_end: int
    pending_at_end: int
    stalls: int
    wall_s: float
    log: tuple[TimelineEvent, ...] = ()


def configure_queues(
    config: QueueConfig, *, preemption: Optional[bool] = None, strategy: Optional[str] = None
) -> QueueConfig:
    """The configuration with preemption turned off and/or one queueing strategy everywhere.

    Parameters
    ----------
    config : QueueConfig
        The ClusterQueues as a set-up built them.
    preemption : bool, optional
        ``False`` sets every ClusterQueue's ``preemption`` to ``Never`` throughout;
        ``True`` and ``None`` keep each ClusterQueue's own settings (the set-up says what
        "on" means, e.g. :func:`~placer.replay.timeline_queues.qos_queues`).
    strategy : str, optional
        ``StrictFIFO`` or ``BestEffortFIFO`` for every ClusterQueue; ``None`` keeps theirs.

    Raises
    ------
    InvalidInputError
        ``where`` = ``"strategy"`` for a strategy outside
        :data:`~placer.queues.model.QUEUEING_STRATEGIES`.
    """
    if strategy is not None and strategy not in QUEUEING_STRATEGIES:
        raise InvalidInputError("strategy", f"expected one of {', '.join(QUEUEING_STRATEGIES)}, got {strategy!r}")
    if preemption is not False and strategy is None:
        return config
    cluster_queues = {}
    for name, cq in config.cluster_queues.items():
        if preemption is False:
            cq = replace(cq, preemption=ClusterQueuePreemption())
        if strategy is not None:
            cq = replace(cq, queueing_strategy=strategy)
        cluster_queues[name] = cq
    return replace(config, cluster_queues=cluster_queues)


class _Loop:
    """The state of one replay: the engine, the recorder, the pending departures."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        jobs: Sequence[TimelineJob],
        queues: TimelineQueues,
        config: QueueConfig,
        policy: str,
        start: float,
        keep_log: bool,
        max_cycles_per_time: int,
    ) -> None:
        from placer.queues.scheduler import QueueScheduler  # the engine; imported when a replay runs

        # The fragment measure's typical pods are the jobs' mix, as the FGD replay takes its
        # trace's (the mix, not the order of arrivals).
        self.scheduler = QueueScheduler(config, snapshot=snapshot, policy=policy,
                                        target=target_workload([job.pod for job in jobs]))
        self.queue_names = tuple(config.cluster_queues)
        gpus = float(sum(node.hardware.gpus for node in snapshot.nodes))
        self.recorder = TimelineRecorder(self.queue_names, gpus, start=start)
        self.jobs = sorted(jobs, key=lambda j: j.arrival)  # stable: equal arrivals keep their order
        self.workloads = queues.workloads(self.jobs)
        self.duration = {w.key: j.duration for w, j in zip(self.workloads, self.jobs)}
        if len(self.duration) != len(self.jobs):
            raise InvalidInputError("jobs", "job names must be unique")
        self.next_arrival = 0
        self.departures: list[tuple[float, int, str]] = []  # (due, run number, workload key)
        self.run_of: dict[str, int] = {}  # the run number of each running workload's departure
        self.runs = 0
        self.keep_log = keep_log
        self.log: list[TimelineEvent] = []
        self.max_cycles = max_cycles_per_time
        self.cycles = self.admissions = self.evictions = self.finished = self.stalls = 0

    def next_time(self) -> float:
        """The time of the next event (infinite when there is none)."""
        while self.departures and self.run_of.get(self.departures[0][2]) != self.departures[0][1]:
            heapq.heappop(self.departures)  # a cancelled run
        due = self.departures[0][0] if self.departures else math.inf
        arrival = self.jobs[self.next_arrival].arrival if self.next_arrival < len(self.jobs) else math.inf
        return min(due, arrival)

    def events_at(self, t: float) -> None:
        """Departures due at ``t``, then arrivals at ``t``."""
        while self.departures and self.departures[0][0] <= t:
            _, run, key = heapq.heappop(self.departures)
            if self.run_of.get(key) != run:
                continue
            del self.run_of[key]
            self.scheduler.finish(key)
            self.recorder.finished(t, key)
            self.finished += 1
            self._log(t, "finished", key)
        while self.next_arrival < len(self.jobs) and self.jobs[self.next_arrival].arrival <= t:
            job, workload = self.jobs[self.next_arrival], self.workloads[self.next_arrival]
            self.next_arrival += 1
            self.scheduler.submit(workload)
            self.recorder.submitted(t, workload.key, workload.cluster_queue or "", job.gpu_demand,
                                    measured=not job.initial)
            self._log(t, "submitted", workload.key)

    def cycles_at(self, t: float) -> None:
        """Scheduling cycles at ``t`` until nothing changes."""
        done = 0
        evicted_here: set[tuple[str, str]] = set()
        while self.scheduler.active_count:
            if done == self.max_cycles:
                raise RuntimeError(
                    f"the admission cycles at t = {t:g} s still change something after {done} cycles; "
                    "preemption may go round in circles"
                )
            before = self.scheduler.active_count
            result = self.scheduler.cycle(now=t, report_waiting=False)
            done += 1
            for admitted in result.admitted:
                key = admitted.workload
                self.recorder.admitted(t, key, borrowing=admitted.borrowing)
                self.runs += 1
                self.run_of[key] = self.runs
                heapq.heappush(self.departures, (t + self.duration[key], self.runs, key))
                self.admissions += 1
                self._log(t, "admitted", key, assignments=admitted.assignments)
            repeated = False
            for preempted in result.preempted:
                key = preempted.workload
                self.run_of.pop(key, None)  # its departure is cancelled: the run is lost
                self.recorder.evicted(t, key, by=preempted.by)
                self.evictions += 1
                self._log(t, "evicted", key, by=preempted.by)
                pair = (key, preempted.by)
                repeated = repeated or pair in evicted_here
                evicted_here.add(pair)
            if repeated:
                self.stalls += 1
                break
            if not result.admitted and not result.preempted and self.scheduler.active_count >= before:
                break
        self.cycles += done

    def sample(self, t: float) -> None:
        borrowing = {name: self.scheduler.borrowing(name) for name in self.queue_names}
        self.recorder.sample(t, borrowing=borrowing)

    def _log(self, t: float, kind: str, key: str, **fields: object) -> None:
        if self.keep_log:
            self.log.append(TimelineEvent(t, kind, key, **fields))  # type: ignore[arg-type]


def run_timeline(
    snapshot: Union[ClusterSnapshot, Mapping[str, Any], str],
    jobs: Union[Arrivals, Sequence[TimelineJob]],
    queues: TimelineQueues,
    *,
    policy: str = policies.DEFAULT,
    preemption: Optional[bool] = None,
    strategy: Optional[str] = None,
    horizon_s: Optional[float] = None,
    start: Optional[float] = None,
    progress: Optional[Progress] = None,
    keep_log: bool = False,
    max_cycles_per_time: int = 1_000_000,
) -> TimelineOutcome:
    """Replay jobs over time through Kueue ClusterQueues on a cluster (module docstring).

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
        The cluster the admitted pods are placed on, normally with nothing running (pods
        of the snapshot keep their resources but are not counted as allocated).
    jobs : Arrivals or sequence of TimelineJob
        The jobs; names unique. Jobs marked ``initial`` (in progress when the replay
        starts) are left out of the delay figures.
    queues : TimelineQueues
        The ClusterQueues and the queue of each job
        (:func:`~placer.replay.timeline_queues.qos_queues`, :func:`team_queues
        <placer.replay.timeline_queues.team_queues>` or made by hand).
    policy : str
        Placement policy of admitted pods (:data:`placer.policies.REGISTRY`).
    preemption, strategy : optional
        Applied to the configuration first (:func:`configure_queues`).
    horizon_s : float, optional
        The length of the window: events at ``start + horizon_s`` or later are not
        processed, and the figures cover ``[start, start + horizon_s]``. Default: the
        window of ``Arrivals``; for a plain sequence, until no event is left (the window
        then ends at the last event).
    start : float, optional
        The start of the window: 0 for ``Arrivals``, else the earliest arrival (0 without
        jobs). No job may arrive before it.
    progress : callable, optional
        Called with the time (seconds) after the events of each time.
    keep_log : bool
        Keep every event in :attr:`TimelineOutcome.log`.
    max_cycles_per_time : int
        Cycles allowed at one time before the replay gives up. With the repeated-eviction
        rule the cycles of a time always end (each cycle admits, evicts or parks, and an
        eviction may not repeat), so reaching this is a fault of the engine.

    Returns
    -------
    TimelineOutcome
        The metrics, the samples and the counts of the replay.

    Raises
    ------
    InvalidInputError
        An unknown policy or strategy, a non-positive horizon, duplicate job names, a
        job arriving before ``start``.
    RuntimeError
        When the cycles at one time never settle.
    """
    began = time.perf_counter()
    arrivals = jobs if isinstance(jobs, Arrivals) else None
    job_list: Sequence[TimelineJob] = arrivals.jobs if arrivals is not None else list(jobs)
    if horizon_s is None and arrivals is not None:
        horizon_s = arrivals.horizon_s
    if horizon_s is not None and not (isinstance(horizon_s, (int, float)) and 0 < horizon_s < math.inf):
        raise InvalidInputError("horizon_s", f"expected a positive number, got {horizon_s!r}")
    if start is None:
        start = 0.0 if arrivals is not None or not job_list else min(j.arrival for j in job_list)
    if job_list and min(j.arrival for j in job_list) < start:
        raise InvalidInputError("jobs", f"a job arrives before the start of the window, {start:g} s")
    snapshot = load_snapshot(snapshot)
    policy = policies.get(policy, "policy").name
    config = configure_queues(queues.config, preemption=preemption, strategy=strategy)
    loop = _Loop(snapshot, job_list, queues, config, policy, float(start), keep_log, max_cycles_per_time)
    stop = math.inf if horizon_s is None else start + float(horizon_s)
    times = 0
    last = float(start)
    while True:
        t = loop.next_time()
        if t == math.inf or t >= stop:
            break
        loop.events_at(t)
        loop.cycles_at(t)
        loop.sample(t)
        times += 1
        last = t
        if progress is not None:
            progress(t - start)
    end = stop if horizon_s is not None else last
    metrics = loop.recorder.metrics(end=end)
    return TimelineOutcome(
        metrics=metrics,
        series=loop.recorder.series(),
        start=float(start),
        end=float(end),
        cycles=loop.cycles,
        event_times=times,
        admissions=loop.admissions,
        evictions=loop.evictions,
        finished=loop.finished,
        running_at_end=len(loop.run_of),
        pending_at_end=metrics.cluster.waiting_at_end,
        stalls=loop.stalls,
        wall_s=time.perf_counter() - began,
        log=tuple(loop.log),
    )
