"""A replay over time through Kueue ClusterQueues (SPEC §9, issue #16 items 3 and 4): the
runs of ``placer simulate --timeline``.

:func:`run_spec` is one run of ``placer simulate --timeline``: openb jobs at an offered GPU
load (:func:`~placer.replay.arrivals.jobs_at_load`) on the cluster or a share of its nodes
(:func:`~placer.replay.arrivals.shrink_cluster`), in the queues of a set-up
(:func:`parse_queue_setup`); :func:`write_timeline_outputs` writes ``timeline.csv``,
``queues.md`` and the plots of one or more runs.

The event loop, :func:`run_timeline`, is :mod:`placer.replay.timeline_loop`'s (its names
are re-exported here).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Optional, Sequence

from msgspec import Struct
from msgspec.structs import replace

from placer import policies
from placer.text.files import PathLike, write_text_atomic
from placer.placement.cluster import Cluster
from placer.exceptions import InvalidInputError
from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S, RunsInterrupted, grid_results, local_workers, progress_bar
from placer.model import ClusterSnapshot
from placer.replay.arrivals import Arrivals, TimelineJob, TracePod, jobs_at_load, offered_load, shrink_cluster
from placer.replay.metrics import (
    CSV_COLUMNS,
    TimelineRun,
    timeline_csv,
    write_queues_md,
    write_timeline_plot,
)
from placer.replay.timeline_queues import TimelineQueues, qos_queues, team_queues
from placer.replay.timeline_loop import EVENT_KINDS, Progress, TimelineEvent, TimelineOutcome, configure_queues, run_timeline

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

MAX_TEAMS = 1000
"""The most synthetic teams ``teams:N`` may ask for."""


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
