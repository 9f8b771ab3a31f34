"""A replay over time through Kueue ClusterQueues (SPEC §9, issue #16 items 3 and 4).

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

:func:`run_spec` is one run of ``placer simulate --timeline``: openb jobs at an offered GPU
load (:func:`~placer.replay.arrivals.jobs_at_load`) on the cluster or a share of its nodes
(:func:`~placer.replay.arrivals.shrink_cluster`), in the queues of a set-up
(:func:`parse_queue_setup`); :func:`write_timeline_outputs` writes ``timeline.csv``,
``queues.md`` and the plots of one or more runs.
"""
from __future__ import annotations

import heapq
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Optional, Sequence, Union

from msgspec import Struct
from msgspec.structs import replace

from placer import policies
from placer.text.files import PathLike, write_text_atomic
from placer.placement.cluster import Cluster
from placer.exceptions import InvalidInputError
from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S, RunsInterrupted, grid_results, local_workers, progress_bar
from placer.workload.fragmentation import target_workload
from placer.model import Assignment, ClusterSnapshot, load_snapshot
from placer.replay.arrivals import Arrivals, TimelineJob, TracePod, jobs_at_load, offered_load, shrink_cluster
from placer.replay.metrics import (
    CSV_COLUMNS,
    TimelineMetrics,
    TimelineRecorder,
    TimelineRun,
    TimelineSeries,
    timeline_csv,
    write_queues_md,
    write_timeline_plot,
)
from placer.queues.model import QUEUEING_STRATEGIES, ClusterQueuePreemption, QueueConfig
from placer.replay.timeline_queues import TimelineQueues, qos_queues, team_queues

__all__ = [
    "EVENT_KINDS",
    "MAX_TEAMS",
    "TimelineEvent",
    "TimelineOutcome",
    "QueueSetup",
    "TimelineSpec",
    "TimelineRunResult",
    "configure_queues",
    "run_timeline",
    "parse_queue_setup",
    "parse_duration",
    "parse_fractions",
    "parse_choices",
    "placeable_jobs",
    "run_spec",
    "run_specs",
    "write_timeline_outputs",
]

EVENT_KINDS = ("submitted", "admitted", "evicted", "finished")
MAX_TEAMS = 1000
"""The most synthetic teams ``teams:N`` may ask for."""

Progress = Callable[[float], None]


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


# ---------------------------------------------------------------------- placer simulate --timeline


class QueueSetup(Struct, frozen=True):
    """A queue set-up by name: ``qos`` (inference and training) or ``teams`` (``n_teams``)."""

    kind: Literal["qos", "teams"]
    n_teams: int = 0

    def build(
        self,
        jobs: Sequence[TimelineJob],
        snapshot: ClusterSnapshot,
        *,
        strategy: str,
        preemption: bool,
        seed: int,
        horizon_s: Optional[float],
    ) -> TimelineQueues:
        """The queues of this set-up for ``jobs`` on ``snapshot`` (quotas follow the jobs'
        demand inside the horizon)."""
        if self.kind == "qos":
            return qos_queues(jobs, snapshot, strategy=strategy, preemption=preemption, horizon_s=horizon_s)
        return team_queues(jobs, snapshot, self.n_teams, strategy=strategy, preemption=preemption, seed=seed,
                           horizon_s=horizon_s)


def parse_queue_setup(text: str, where: str = "--queues") -> QueueSetup:
    """``qos`` or ``teams:N`` (1 ≤ N ≤ :data:`MAX_TEAMS`) as a :class:`QueueSetup`.

    Parameters
    ----------
    text : str
        The set-up as written on the command line.
    where : str
        Where the text came from, for the error.

    Raises
    ------
    InvalidInputError
        ``where`` for anything else.
    """
    value = text.strip()
    if value == "qos":
        return QueueSetup("qos")
    match = re.fullmatch(r"teams:([0-9]+)", value)
    if match is None:
        raise InvalidInputError(where, f"expected qos or teams:N (e.g. teams:4), got {text!r}")
    n = int(match.group(1))
    if not 1 <= n <= MAX_TEAMS:
        raise InvalidInputError(where, f"expected between 1 and {MAX_TEAMS} teams, got {n}")
    return QueueSetup("teams", n)


def parse_duration(text: str, where: str = "--horizon") -> float:
    """Seconds of ``3600``, ``90m``, ``6h`` or ``1d`` (above 0, at most 366 days).

    Raises
    ------
    InvalidInputError
        ``where`` for anything else.
    """
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    body, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1.0)
    try:
        value = float(body) * unit
    except ValueError:
        raise InvalidInputError(where, f"expected a duration like 3600, 90m, 6h or 1d, got {text!r}") from None
    if not 0 < value <= 366 * 86400:
        raise InvalidInputError(where, f"expected a duration above 0 and at most 366 days, got {text!r}")
    return value


def parse_fractions(text: str, where: str, upper: float) -> list[float]:
    """Comma-separated numbers in (0, ``upper``], e.g. loads ``0.7,0.9,1.1``.

    Raises
    ------
    InvalidInputError
        ``where`` for anything else.
    """
    out: list[float] = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise InvalidInputError(where, f"expected numbers like 0.9 or 0.7,0.9,1.1, got {text!r}") from None
        if not 0 < value <= upper:
            raise InvalidInputError(where, f"expected values above 0 and at most {upper:g}, got {item.strip()!r}")
        out.append(value)
    return out


def parse_choices(text: str, where: str, allowed: Mapping[str, Any]) -> list[Any]:
    """Comma-separated names, each one of ``allowed``, as their values.

    Raises
    ------
    InvalidInputError
        ``where`` naming the allowed names.
    """
    out = []
    for item in text.split(","):
        if item.strip() not in allowed:
            raise InvalidInputError(where, f"expected one of {', '.join(allowed)}, got {item.strip()!r}")
        out.append(allowed[item.strip()])
    return out


class TimelineSpec(Struct, frozen=True):
    """One run of ``placer simulate --timeline``.

    Attributes
    ----------
    load : float
        The offered GPU load asked for (1.0: as many GPUs as the cluster has).
    seed : int
        Seeds the arrivals, the shrunk cluster's nodes and the teams.
    policy : str
        Placement policy.
    queues : str
        The set-up, ``qos`` or ``teams:N`` (:func:`parse_queue_setup`).
    strategy : str
        ``BestEffortFIFO`` or ``StrictFIFO`` in every ClusterQueue.
    preemption : bool
        The set-up's preemption on, or every ClusterQueue ``Never``.
    horizon_s : float
        The length of the replay.
    shrink : float
        The fraction of the nodes kept (1: the whole cluster).
    """

    load: float
    seed: int = 42
    policy: str = policies.DEFAULT
    queues: str = "qos"
    strategy: str = "BestEffortFIFO"
    preemption: bool = True
    horizon_s: float = 6 * 3600.0
    shrink: float = 1.0

    @property
    def title(self) -> str:
        """E.g. ``load 0.9, qos queues, fgd-pack, BestEffortFIFO, preemption on, seed 42,
        6 h, 10 % of the nodes``."""
        nodes = "all nodes" if self.shrink >= 1 else f"{100 * self.shrink:g} % of the nodes"
        return (
            f"load {self.load:g}, {self.queues} queues, {self.policy}, {self.strategy}, "
            f"preemption {'on' if self.preemption else 'off'}, seed {self.seed}, {_hours(self.horizon_s)}, {nodes}"
        )

    @property
    def slug(self) -> str:
        """The title as a file-name part, e.g. ``load0.9-qos-fgd-pack-besteffortfifo-preempt-on-seed42``."""
        text = (
            f"load{self.load:g}-{self.queues}-{self.policy}-{self.strategy}-"
            f"preempt-{'on' if self.preemption else 'off'}-seed{self.seed}"
        )
        return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class TimelineRunResult:
    """One run of :func:`run_spec`.

    Attributes
    ----------
    spec : TimelineSpec
        What was run.
    outcome : TimelineOutcome
        What the replay measured.
    arrivals : Arrivals
        The jobs replayed and the offered GPU load they make.
    arrivals_summary : str
        One line with the offered load, printed with every result.
    nodes, cluster_gpus : int, float
        The size of the (shrunk) cluster.
    left_out : int
        Drawn jobs that no node of the cluster could hold even when empty.
    """

    spec: TimelineSpec
    outcome: TimelineOutcome
    arrivals: Arrivals
    arrivals_summary: str
    nodes: int
    cluster_gpus: float
    left_out: int = 0


def placeable_jobs(snapshot: ClusterSnapshot, jobs: Sequence[TimelineJob], policy: str = policies.DEFAULT
                   ) -> tuple[list[TimelineJob], int]:
    """The jobs whose pod fits some node of the cluster with nothing running, and how many
    do not (a job that never fits would wait for ever, and under StrictFIFO block its queue).

    Each distinct pod request is tried once, on the nodes with their running pods removed.

    Returns
    -------
    tuple of (list of TimelineJob, int)
        The jobs that fit, in the order given, and the number left out.
    """
    empty = replace(snapshot, nodes=tuple(replace(n, pods=()) for n in snapshot.nodes))
    cluster = Cluster(empty)
    fits: dict[str, bool] = {}
    kept: list[TimelineJob] = []
    for job in jobs:
        probe = replace(job.pod, name="probe")
        shape = repr(probe)  # the whole request; mappings inside are not hashable
        if shape not in fits:
            result = cluster.place(probe, policy=policy)
            fits[shape] = not result.unschedulable and len(result.assignments) == 1
        if fits[shape]:
            kept.append(job)
    return kept, len(jobs) - len(kept)


def run_spec(
    snapshot: ClusterSnapshot,
    trace: Sequence[TracePod],
    spec: TimelineSpec,
    progress: Optional[Progress] = None,
    *,
    keep_log: bool = False,
) -> TimelineRunResult:
    """One run of ``placer simulate --timeline``.

    The cluster keeps ``spec.shrink`` of its nodes (seeded by ``spec.seed``); jobs are drawn
    from ``trace`` at ``spec.load`` × its GPUs over ``spec.horizon_s``
    (:func:`~placer.replay.arrivals.jobs_at_load`, stationary start); jobs no node can hold
    are left out (:func:`placeable_jobs`) and the offered load is that of the jobs kept;
    the set-up's queues get quotas in proportion to the kept jobs' demand inside the
    horizon; then :func:`run_timeline`.

    Raises
    ------
    InvalidInputError
        A bad set-up, policy, strategy, load, shrink or horizon.
    """
    setup = parse_queue_setup(spec.queues, "queues")
    policy = policies.get(spec.policy, "policy").name
    cluster = shrink_cluster(snapshot, spec.shrink, seed=spec.seed) if spec.shrink < 1 else snapshot
    gpus = float(sum(n.hardware.gpus for n in cluster.nodes))
    if gpus <= 0:
        raise InvalidInputError("snapshot", "the cluster has no GPUs: no load to offer")
    drawn = jobs_at_load(trace, gpus, spec.load, seed=spec.seed, horizon_s=spec.horizon_s)
    kept, left_out = placeable_jobs(cluster, drawn.jobs, policy)
    arrivals = drawn
    if left_out:
        arrivals = replace(
            drawn,
            jobs=tuple(kept),
            offered_load=offered_load(kept, gpus, drawn.horizon_s),
            initial=sum(1 for j in kept if j.initial),
        )
    queues = setup.build(kept, cluster, strategy=spec.strategy, preemption=spec.preemption, seed=spec.seed,
                         horizon_s=spec.horizon_s)
    outcome = run_timeline(cluster, arrivals, queues, policy=policy, preemption=spec.preemption,
                           strategy=spec.strategy, horizon_s=spec.horizon_s, progress=progress, keep_log=keep_log)
    summary = arrivals.summary() + f"; {len(cluster.nodes)} nodes"
    if left_out:
        summary += f"; {left_out} drawn jobs that no node can hold left out"
    return TimelineRunResult(spec, outcome, arrivals, summary, len(cluster.nodes), gpus, left_out)


def _spec_task(shared: tuple[ClusterSnapshot, Sequence[TracePod]], spec: TimelineSpec, hours_bar: Optional[str]
               ) -> TimelineRunResult:
    """One run of :func:`run_specs`; ``hours_bar``: the description of a bar over its simulated
    hours (only for runs in the caller's process: bars of parallel workers would interleave)."""
    if hours_bar is None:
        return run_spec(shared[0], shared[1], spec)
    with progress_bar(round(spec.horizon_s / 3600, 2), hours_bar, unit="h",
                      bar_format="{l_bar}{bar}| {n:.1f}/{total} h") as bar:
        return run_spec(shared[0], shared[1], spec, progress=_HoursDone(bar))


class _HoursDone:
    """A :data:`Progress` callback moving a bar to the simulated hour reached."""

    def __init__(self, bar: Any) -> None:
        self._bar = bar
        self._done = 0.0

    def __call__(self, now: float) -> None:
        hours = round(now / 3600, 2)
        if hours > self._done:
            self._bar.update(hours - self._done)
            self._done = hours


def run_specs(
    snapshot: ClusterSnapshot,
    trace: Sequence[TracePod],
    specs: Sequence[TimelineSpec],
    *,
    executor: str = "local",
    jobs: Optional[int] = None,
    address: Optional[str] = None,
    on_failure: Optional[Callable[[Any], None]] = None,
    progress: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> list[TimelineRunResult]:
    """Several :func:`run_spec` runs on local processes or Ray (:func:`placer.replay.executors.run_tasks`).

    ``progress`` shows, on a terminal, a bar over the runs with the time left and, for runs
    in this process (``jobs=1``, or one run), a bar over each run's simulated hours.

    Returns
    -------
    list of TimelineRunResult
        In the order of ``specs``; a run that failed twice is left out and told to
        ``on_failure`` (a :class:`placer.replay.executors.TaskFailure` keyed by its index and
        title); without ``on_failure`` it raises :class:`RuntimeError` once all have ended.

    Raises
    ------
    RunsInterrupted
        On Ctrl-C, with the results of the runs that had finished (in the order of ``specs``).
    """
    here = progress and executor == "local" and local_workers(jobs, len(specs)) == 1
    done: dict[Any, TimelineRunResult] = {}
    failures = []
    tasks = [((i, spec.title), (spec, f"run {i + 1}/{len(specs)} load {spec.load:g}" if here else None))
             for i, spec in enumerate(specs)]

    def in_order() -> list[TimelineRunResult]:
        return [done[key] for key, _ in tasks if key in done]

    try:
        for result in grid_results(_spec_task, (snapshot, trace), tasks, "timeline", progress and len(specs) > 1,
                                   executor=executor, jobs=jobs, address=address, connect_timeout=connect_timeout):
            if result.failure is None:
                done[result.key] = result.value
            elif on_failure is not None:
                on_failure(result.failure)
            else:
                failures.append(result.failure)
    except KeyboardInterrupt:
        kept = in_order()
        raise RunsInterrupted(len(kept), len(specs), kept) from None
    if failures:
        raise RuntimeError(f"{len(failures)} run(s) failed; {failures[0].key[1]}: {failures[0].error}")
    return in_order()


def write_timeline_outputs(runs: Sequence[TimelineRunResult], out_dir: PathLike, plot: bool = True) -> list[Path]:
    """Create ``out_dir`` if needed and write ``timeline.csv`` (a leading ``run`` column:
    each run's :attr:`TimelineSpec.slug`), ``queues.md`` (one section per run, titled with
    its load) and, with ``plot``, ``timeline.png`` (one run) or ``timeline-<slug>.png``
    (one per run).

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    ValueError
        No runs.
    """
    if not runs:
        raise ValueError("no runs to write")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    slugs = _unique([run.spec.slug for run in runs])
    lines = ["run," + ",".join(CSV_COLUMNS)]
    for slug, run in zip(slugs, runs):
        body = timeline_csv(run.outcome.series).splitlines()[1:]
        lines.extend(f"{slug},{row}" for row in body)
    paths = [out / "timeline.csv", out / "queues.md"]
    write_text_atomic(paths[0], "\n".join(lines) + "\n")
    write_queues_md(
        [TimelineRun(run.spec.title, run.arrivals.offered_load, run.outcome.metrics, note=_note(run)) for run in runs],
        paths[1],
    )
    if plot:
        for slug, run in zip(slugs, runs):
            path = out / ("timeline.png" if len(runs) == 1 else f"timeline-{slug}.png")
            title = f"{run.spec.title}\noffered GPU load {run.arrivals.offered_load:.3f}"
            write_timeline_plot(run.outcome.series, path, title=title, end=run.outcome.end)
            paths.append(path)
    return paths


def _note(run: TimelineRunResult) -> str:
    o = run.outcome
    return (
        f"{run.arrivals_summary}. Replay: {o.admissions} admissions, {o.evictions} evictions, {o.finished} finished, "
        f"{o.running_at_end} running and {o.pending_at_end} waiting at the end; "
        f"{o.cycles} admission cycles at {o.event_times} event times"
        + (f" ({o.stalls} of them ended on a repeated eviction)" if o.stalls else "")
        + f", {o.wall_s:.1f} s."
    )


def _unique(names: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:g} h" if hours >= 1 else f"{seconds / 60:g} min"
