"""The replays of ``placer simulate``, from the cluster and trace read to the files written.

:func:`run_simulation` replays one workload per policy and seed the FGD study's way
(:func:`placer.replay.simulate.simulate`) and writes ``curves.csv``, ``table.md`` and
``curves.png``; :func:`run_timeline_grid` runs a grid of replays over time
(:func:`timeline_grid`, :func:`placer.replay.timeline.run_specs`) and writes
``timeline.csv``, ``queues.md`` and the plots. A run that fails twice is left out and
reported in the outcome; on Ctrl-C the finished runs are written before
:class:`~placer.replay.executors.RunsInterrupted` goes on up. A sweep's counterpart, which
resumes, is :func:`placer.replay.sweep.run_sweep`.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Callable, Generic, Iterable, Iterator, Sequence, TypeVar

from placer import policies as _registry
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PodRequest
from placer.replay.arrivals import TracePod
from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S, RunsInterrupted, TaskFailure
from placer.replay.simulate import ALL_POLICIES, Curve, available_policies, simulate, write_outputs
from placer.replay.timeline import TimelineRunResult, TimelineSpec, run_specs, write_timeline_outputs
from placer.text.files import PathLike

Run = TypeVar("Run")


@dataclass(frozen=True)
class GridOutcome(Generic[Run]):
    """What a grid of replays gave.

    Attributes
    ----------
    runs : list
        The finished runs in grid order (:class:`~placer.replay.simulate.Curve` or
        :class:`~placer.replay.timeline.TimelineRunResult`).
    failures : list of TaskFailure
        The runs that failed twice, left out of ``runs``.
    paths : list of Path
        The files written; none when every run failed.
    """

    runs: list[Run]
    failures: list[TaskFailure]
    paths: list[Path]


def check_out_dir(path: PathLike, where: str = "--out") -> None:
    """Refuse an output directory that cannot be made, before any replay runs.

    Raises
    ------
    InvalidInputError
        ``where``: ``path`` is a file, not writable, or under no writable directory.
    """
    path = os.fspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InvalidInputError(where, f"{path} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InvalidInputError(where, f"{path} is not writable")
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInputError(where, f"cannot create {path}: {parent} is not a writable directory")


def simulation_policies(text: str, where: str = "--policy") -> tuple[list[str], list[str]]:
    """The policies a simulation runs, from ``all`` or a comma-separated list of names.

    Returns
    -------
    tuple of (list of str, list of str)
        The policies to run, by registered name, and, for ``all``, the study's policies
        skipped as not available.

    Raises
    ------
    InvalidInputError
        ``where``: an unknown or unavailable policy, one listed twice, or none available.
    """
    ready = available_policies()
    if text.strip() == "all":
        chosen = [p for p in ALL_POLICIES if p in ready]
        if not chosen:
            raise InvalidInputError(where, "none of the study's policies is available yet")
        return chosen, [p for p in ALL_POLICIES if p not in ready]
    chosen = []
    for item in text.split(","):
        name = _registry.get(item.strip(), where).name
        if name not in ready:
            raise InvalidInputError(
                where, f"policy {name!r} is not available yet (available: {', '.join(ready)}, or all)"
            )
        if name in chosen:
            raise InvalidInputError(where, f"policy {name!r} is listed twice")
        chosen.append(name)
    return chosen, []


def run_simulation(
    snapshot: ClusterSnapshot,
    pods: Sequence[PodRequest],
    policies: Iterable[str],
    seeds: Iterable[int],
    out_dir: PathLike,
    *,
    name: str = "trace",
    jobs: int | None = None,
    executor: str = "local",
    address: str | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    progress: bool = True,
    plot: bool = True,
    on_removed: Callable[[Path], None] | None = None,
) -> GridOutcome[Curve]:
    """Replay the workload ``pods`` on ``snapshot`` per policy and seed, and write the curves
    into ``out_dir`` (:func:`placer.replay.simulate.write_outputs`).

    Parameters
    ----------
    snapshot, pods, policies, seeds, name, jobs, executor, address, connect_timeout, progress
        As in :func:`placer.replay.simulate.simulate`.
    out_dir : path
        Created if needed.
    plot : bool
        Draw ``curves.png``; without it, one of an earlier run is removed and handed to
        ``on_removed``.

    Raises
    ------
    RunsInterrupted
        On Ctrl-C, once the curves of the finished replays are written.
    """
    failures: list[TaskFailure] = []
    with _written_when_interrupted(lambda curves: write_outputs(curves, out_dir, plot=plot)):
        curves = simulate(snapshot, pods, policies, seeds, jobs=jobs, progress=progress, name=name,
                          executor=executor, address=address, on_failure=failures.append,
                          connect_timeout=connect_timeout)
    paths = write_outputs(curves, out_dir, plot=plot, on_removed=on_removed) if curves else []
    return GridOutcome(curves, failures, paths)


def timeline_grid(
    policies: Sequence[str],
    strategies: Sequence[str],
    preemption: Sequence[bool],
    loads: Sequence[float],
    seeds: Sequence[int],
    *,
    queues: str,
    horizon_s: float,
    shrink: float,
) -> list[TimelineSpec]:
    """Every combination of the values, in this order: policy, strategy, preemption, load,
    then seed (the last varying fastest)."""
    return [
        TimelineSpec(load=load, seed=seed, policy=policy, queues=queues, strategy=strategy,
                     preemption=preempt, horizon_s=horizon_s, shrink=shrink)
        for policy, strategy, preempt, load, seed in product(policies, strategies, preemption, loads, seeds)
    ]


def run_timeline_grid(
    snapshot: ClusterSnapshot,
    trace: Sequence[TracePod],
    specs: Sequence[TimelineSpec],
    out_dir: PathLike,
    *,
    jobs: int | None = None,
    executor: str = "local",
    address: str | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    progress: bool = True,
    plot: bool = True,
) -> GridOutcome[TimelineRunResult]:
    """Run the replays over time of ``specs`` on ``snapshot`` with jobs drawn from ``trace``
    (:func:`placer.replay.timeline.run_specs`), and write them into ``out_dir``
    (:func:`placer.replay.timeline.write_timeline_outputs`).

    Raises
    ------
    RunsInterrupted
        On Ctrl-C, once the finished runs are written.
    """
    failures: list[TaskFailure] = []
    with _written_when_interrupted(lambda runs: write_timeline_outputs(runs, out_dir, plot=plot)):
        runs = run_specs(snapshot, trace, specs, executor=executor, jobs=jobs, address=address,
                         on_failure=failures.append, progress=progress, connect_timeout=connect_timeout)
    paths = write_timeline_outputs(runs, out_dir, plot=plot) if runs else []
    return GridOutcome(runs, failures, paths)


@contextmanager
def _written_when_interrupted(write: Callable[[list], object]) -> Iterator[None]:
    """On :class:`RunsInterrupted` inside, ``write`` the runs it kept (if any), then let it go on."""
    try:
        yield
    except RunsInterrupted as stop:
        if stop.results:
            write(list(stop.results))
        raise
