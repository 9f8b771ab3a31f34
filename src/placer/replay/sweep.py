"""``placer sweep``: a grid of replays from one spec, run locally or on Ray (SPEC §10).

A spec (``apiVersion: placer/v1``, ``kind: Sweep``, JSON or YAML) names a replay — ``fgd``,
the FGD study's protocol (:func:`placer.replay.simulate.run_replay`), or ``timeline``, the replay
over time through Kueue queues (:func:`placer.replay.timeline.run_spec`) — and the values of
each grid axis: workloads (bundled openb traces by name, or CSV paths relative to the spec),
policies, seeds, for the timeline loads, queue set-ups, queueing strategies and preemption,
and for ``fgd-pack`` its two weights. Every combination is one run.

The sweep writes into its output directory:

* ``results.csv``: one row per finished run, in grid order — the grid values
  (:data:`GRID_COLUMNS`), then the run's figures (:data:`FGD_METRICS` or
  :data:`TIMELINE_METRICS`). It is rewritten whole after every run, so an interrupted sweep
  keeps what finished, and a sweep started again on the same directory skips the runs
  already there. Wall times are not in it (``timings.csv`` has them): the same spec and
  seeds give the same ``results.csv`` on any executor.
* ``summary.md``: per combination of grid values other than the seed, the median of each
  headline figure over the seeds, with the lowest and highest (the spread);
* ``summary.png``: the headline figure's median as a heat map, policies across.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Mapping, Optional, Sequence, Union

from msgspec import Meta, Struct, field

from placer import policies as _registry
from placer.text.files import PathLike, read_text, remove_stale, write_bytes_atomic, write_text_atomic
from placer.exceptions import InvalidInputError
from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S, RunsInterrupted, TaskFailure, grid_results, interrupts_deferred
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT

__all__ = [
    "SweepSpec",
    "SweepRun",
    "SweepOutcome",
    "GRID_COLUMNS",
    "FGD_METRICS",
    "TIMELINE_METRICS",
    "load_sweep",
    "sweep_runs",
    "run_figures",
    "run_sweep",
    "bundled_sweep",
]

GRID_COLUMNS = ("replay", "workload", "policy", "seed", "load", "queues", "strategy", "preemption",
                "regret_weight", "pressure_weight")
"""The grid values of a run, the first columns of ``results.csv`` (empty where they do not apply)."""

FGD_METRICS = ("unallocated_pct_90", "unallocated_pct_100", "unallocated_pct_110", "unallocated_pct_120",
               "unallocated_pct_130", "frag_pct_100", "original_pods", "arrived_pods", "placed_pods")
"""The figures of an ``fgd`` run: unallocated GPU % at 90..130 % arrived, fragment % at 100 %."""

TIMELINE_METRICS = ("offered_load", "jobs", "delay_p50_s", "delay_p99_s", "delay_mean_s", "waiting_at_end",
                    "mean_allocated_pct", "unallocated_gpu_hours_while_waiting", "borrowing_pct", "preemptions",
                    "never_admitted")
"""The figures of a ``timeline`` run (all queues together; delays count the jobs waiting at the
end at their wait so far, :mod:`placer.replay.metrics`)."""

HEADLINE = {"fgd": ("unallocated_pct_100", "frag_pct_100"),
            "timeline": ("delay_p99_s", "waiting_at_end", "mean_allocated_pct")}
MAX_RUNS = 100_000


class _Doc(Struct, forbid_unknown_fields=True, rename="camel"):
    pass


class PackingWeights(_Doc):
    """The ``fgd-pack`` weights to sweep (each a list)."""

    regret_weight: list[Annotated[float, Meta(ge=0)]] = field(default_factory=lambda: [REGRET_WEIGHT])
    pressure_weight: list[Annotated[float, Meta(ge=0)]] = field(default_factory=lambda: [PRESSURE_WEIGHT])


class SweepSpec(_Doc):
    """A sweep as written (module docstring)."""

    api_version: Literal["placer/v1"]
    kind: Literal["Sweep"]
    replay: Literal["fgd", "timeline"] = "fgd"
    workloads: list[str] = field(default_factory=lambda: ["default"])
    nodes: Optional[str] = None
    policies: Union[Literal["all"], list[str]] = field(default_factory=lambda: ["fgd-pack"])
    seeds: Union[str, list[int]] = "42"
    loads: list[Annotated[float, Meta(gt=0, le=10)]] = field(default_factory=lambda: [0.9])
    queues: list[str] = field(default_factory=lambda: ["qos"])
    strategies: list[Literal["BestEffortFIFO", "StrictFIFO"]] = field(default_factory=lambda: ["BestEffortFIFO"])
    preemption: list[bool] = field(default_factory=lambda: [True])
    horizon: str = "3h"
    shrink: Annotated[float, Meta(gt=0, le=1)] = 1.0
    fgd_pack: Optional[PackingWeights] = None


@dataclass(frozen=True)
class SweepRun:
    """One run of the grid: its values as ``results.csv`` writes them."""

    replay: str
    workload: str
    policy: str
    seed: int
    load: Optional[float] = None
    queues: Optional[str] = None
    strategy: Optional[str] = None
    preemption: Optional[bool] = None
    regret_weight: Optional[float] = None
    pressure_weight: Optional[float] = None

    def key(self) -> tuple[str, ...]:
        """The grid values as text, the identity of the run in ``results.csv``."""
        return tuple(_cell(getattr(self, c)) for c in GRID_COLUMNS)


@dataclass(frozen=True)
class LoadedSweep:
    """A checked spec: the runs and what they read."""

    spec: SweepSpec
    runs: tuple[SweepRun, ...]
    nodes_path: Path
    traces: dict[str, Path]  # workload name -> file
    horizon_s: float


@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did."""

    ran: int
    skipped: int
    failures: list[TaskFailure]
    paths: list[Path]
    wall_s: float


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def bundled_sweep(name: str) -> Path:
    """A sweep spec shipped with placer (``fgd-study``: the FGD study's 17 workloads × 6
    policies × 10 seeds)."""
    from placer.text.files import bundled_file

    path = bundled_file("sweeps", f"{name}.yaml")
    if path is None:
        raise InvalidInputError(name, "no such bundled sweep (bundled: fgd-study)")
    return path


def load_sweep(path: PathLike) -> LoadedSweep:
    """Read and check a sweep spec; its runs in grid order.

    Raises
    ------
    InvalidInputError
        Naming the file and the field as written (``sweep.yaml: policies[1]``).
    """
    from placer.adapters import openb
    from placer.replay.timeline import parse_duration, parse_queue_setup
    from placer.schema.files import decode_source
    from placer.replay.simulate import parse_seeds, workload_name_from_path
    from placer.replay.study import ALL_POLICIES

    name = os.fspath(path)
    spec, _ = decode_source(name, SweepSpec, {})
    base = Path(name).resolve().parent

    seeds_text = spec.seeds if isinstance(spec.seeds, str) else ",".join(str(s) for s in spec.seeds)
    try:
        seeds = parse_seeds(seeds_text, "seeds")
    except InvalidInputError as e:
        raise e.within(name) from None
    names = list(ALL_POLICIES) if spec.policies == "all" else list(spec.policies)
    if not names:
        raise InvalidInputError(f"{name}: policies", "expected at least one policy")
    for i, p in enumerate(names):
        if p not in _registry.REGISTRY:
            raise InvalidInputError(f"{name}: policies[{i}]",
                                    f"unknown policy {p!r}; known: {', '.join(_registry.REGISTRY)}")
    if len(set(names)) != len(names):
        raise InvalidInputError(f"{name}: policies", "a policy is named twice")
    if not spec.workloads:
        raise InvalidInputError(f"{name}: workloads", "expected at least one workload")
    traces: dict[str, Path] = {}
    for i, w in enumerate(spec.workloads):
        if w in openb.STUDY_WORKLOADS:
            key, path_w = w, openb.trace_path(w)
        else:
            path_w = (base / w) if not os.path.isabs(w) else Path(w)
            if not path_w.is_file():
                raise InvalidInputError(f"{name}: workloads[{i}]", f"neither a bundled trace "
                                        f"({', '.join(openb.STUDY_WORKLOADS)}) nor a file: {w}")
            key = workload_name_from_path(path_w)
        if key in traces:
            raise InvalidInputError(f"{name}: workloads[{i}]", f"workload {key} is named twice")
        traces[key] = path_w
    if spec.nodes is None:
        nodes_path = openb.data_path(openb.DEFAULT_NODES)
    else:
        nodes_path = Path(spec.nodes) if os.path.isabs(spec.nodes) else base / spec.nodes
        if not nodes_path.is_file():
            raise InvalidInputError(f"{name}: nodes", f"no such file: {spec.nodes}")
    horizon_s = 0.0
    if spec.replay == "timeline":
        try:
            horizon_s = parse_duration(spec.horizon, "horizon")
            for j, q in enumerate(spec.queues):
                parse_queue_setup(q, f"queues[{j}]")
        except InvalidInputError as e:
            raise e.within(name) from None
        if spec.fgd_pack is not None:
            raise InvalidInputError(f"{name}: fgdPack", "the fgd-pack weights are swept in the fgd replay only")
        for axis in ("loads", "queues", "strategies", "preemption"):
            if not getattr(spec, axis):
                raise InvalidInputError(f"{name}: {axis}", "expected at least one value")
    weights: list[tuple[Optional[float], Optional[float]]] = [(None, None)]
    if spec.fgd_pack is not None:
        if "fgd-pack" not in names:
            raise InvalidInputError(f"{name}: fgdPack", "fgd-pack is not among the policies")
        weights = [(float(r), float(p)) for r in spec.fgd_pack.regret_weight for p in spec.fgd_pack.pressure_weight]
        if not weights:
            raise InvalidInputError(f"{name}: fgdPack", "expected at least one value of each weight")
    per_seed = 1 if spec.replay == "fgd" else (len(spec.loads) * len(spec.queues) * len(spec.strategies)
                                                 * len(spec.preemption))
    size = len(traces) * len(seeds) * per_seed * (len(names) - 1 + len(weights) if "fgd-pack" in names else len(names))
    if size > MAX_RUNS:
        raise InvalidInputError(name, f"the grid has {size} runs, more than {MAX_RUNS}")
    runs: list[SweepRun] = []
    for workload, policy in itertools.product(traces, names):
        own = weights if policy == "fgd-pack" else [(None, None)]
        if spec.replay == "fgd":
            for (r, p), seed in itertools.product(own, seeds):
                runs.append(SweepRun("fgd", workload, policy, seed, regret_weight=r, pressure_weight=p))
        else:
            for load, queues, strategy, preempt, seed in itertools.product(
                    spec.loads, spec.queues, spec.strategies, spec.preemption, seeds):
                runs.append(SweepRun("timeline", workload, policy, seed, float(load), queues, strategy, preempt))
    return LoadedSweep(spec, tuple(runs), nodes_path, traces, horizon_s)


def sweep_runs(path: PathLike) -> tuple[SweepRun, ...]:
    """The runs of a spec, in grid order."""
    return load_sweep(path).runs


# ---------------------------------------------------------------------- one run


def run_figures(shared: Mapping[str, Any], run: SweepRun) -> dict[str, str]:
    """The figures of one run, as ``results.csv`` writes them (the task :func:`run_sweep`
    gives its workers).

    Parameters
    ----------
    shared : mapping
        What every run of the sweep reads: ``nodes`` (a snapshot), ``traces`` (workload
        name -> pods), ``horizon_s`` and ``shrink`` (of a timeline replay).
    run : SweepRun

    Returns
    -------
    dict
        Metric column -> value as text: :data:`FGD_METRICS` or :data:`TIMELINE_METRICS`.
    """
    if run.replay == "fgd":
        from placer.replay.simulate import run_replay

        weights = None if run.regret_weight is None else (run.regret_weight, run.pressure_weight)
        curve = run_replay(shared["nodes"], shared["traces"][run.workload], run.policy, run.seed,
                           name=run.workload, packing_weights=weights)
        figures: dict[str, Any] = {f"unallocated_pct_{k}": curve.at(k) for k in (90, 100, 110, 120, 130)}
        figures.update(frag_pct_100=curve.frag_at(100), original_pods=curve.original_pods,
                       arrived_pods=curve.arrived_pods, placed_pods=curve.placed_pods)
        return {k: _cell(v) for k, v in figures.items()}
    from placer.replay.timeline import TimelineSpec, run_spec

    spec = TimelineSpec(load=run.load or 0.0, seed=run.seed, policy=run.policy, queues=run.queues or "qos",
                        strategy=run.strategy or "BestEffortFIFO", preemption=bool(run.preemption),
                        horizon_s=shared["horizon_s"], shrink=shared["shrink"])
    result = run_spec(shared["nodes"], shared["traces"][run.workload], spec)
    c = result.outcome.metrics.cluster
    figures = {
        "offered_load": result.arrivals.offered_load, "jobs": len(result.arrivals.jobs),
        "delay_p50_s": c.delay_p50_s, "delay_p99_s": c.delay_p99_s, "delay_mean_s": c.delay_mean_s,
        "waiting_at_end": c.waiting_at_end,
        "mean_allocated_pct": 100.0 * c.mean_running_gpus / result.cluster_gpus,
        "unallocated_gpu_hours_while_waiting": c.unallocated_gpu_hours_while_waiting,
        "borrowing_pct": 100.0 * c.borrowing_fraction, "preemptions": c.preemptions_suffered,
        "never_admitted": c.never_admitted,
    }
    return {k: _cell(v) for k, v in figures.items()}


def _timed(shared: Mapping[str, Any], run: SweepRun) -> tuple[dict[str, str], float]:
    started = time.perf_counter()
    figures = run_figures(shared, run)
    return figures, time.perf_counter() - started


# ---------------------------------------------------------------------- the sweep


def _read_results(path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    if not path.exists():
        return []
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != tuple(columns):
        raise InvalidInputError(str(path), "written by a sweep with other columns: use another --out")
    return list(reader)


def _csv(columns: Sequence[str], rows: Sequence[Mapping[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def run_sweep(
    spec_path: PathLike,
    out_dir: PathLike,
    *,
    executor: str = "local",
    jobs: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
    plot: bool = True,
    on_failure: Optional[Callable[[TaskFailure], None]] = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    on_removed: Optional[Callable[[Path], None]] = None,
) -> SweepOutcome:
    """Run the runs of a spec not yet in ``out_dir/results.csv`` (module docstring).

    ``progress`` shows a bar over the runs with the time left (on a terminal); a run that
    failed twice is told to ``on_failure``; ``executor``, ``jobs``, ``address`` and
    ``connect_timeout`` are :func:`placer.replay.executors.run_tasks`'s.

    Without ``plot`` (or without a row to draw), a ``summary.png`` of an earlier run is
    removed, and handed to ``on_removed``.

    Raises
    ------
    InvalidInputError
        A bad spec, or a ``results.csv`` of another sweep in ``out_dir``.
    RunsInterrupted
        On Ctrl-C: ``results.csv`` holds every run finished until then (``kept`` of the
        grid's ``total``), and the same call on the same directory resumes.
    """
    from placer.adapters import openb

    started = time.perf_counter()
    loaded = load_sweep(spec_path)
    replay = loaded.spec.replay
    columns = GRID_COLUMNS + (FGD_METRICS if replay == "fgd" else TIMELINE_METRICS)
    out = Path(out_dir)
    results_path, timings_path = out / "results.csv", out / "timings.csv"
    existing = _read_results(results_path, columns)
    by_key = {tuple(row[c] for c in GRID_COLUMNS): row for row in existing}
    todo = [r for r in loaded.runs if r.key() not in by_key]
    timings = _read_results(timings_path, GRID_COLUMNS + ("wall_s",))
    order = {r.key(): i for i, r in enumerate(loaded.runs)}

    def in_grid_order() -> list[dict[str, str]]:
        return sorted(by_key.values(), key=lambda row: order.get(tuple(row[c] for c in GRID_COLUMNS), len(order)))

    out.mkdir(parents=True, exist_ok=True)
    failures: list[TaskFailure] = []
    if todo:
        needed = {r.workload for r in todo}
        read = openb.read_pods if replay == "fgd" else openb.read_timed_pods
        shared = {"nodes": openb.read_nodes(loaded.nodes_path),
                  "traces": {w: read(p) for w, p in loaded.traces.items() if w in needed},
                  "horizon_s": loaded.horizon_s, "shrink": loaded.spec.shrink}
        tasks = [(r.key(), (r,)) for r in todo]
        try:
            for result in grid_results(_timed, shared, tasks, "sweep", progress, executor=executor, jobs=jobs,
                                       address=address, connect_timeout=connect_timeout):
                if result.failure is not None:
                    failures.append(result.failure)
                    if on_failure is not None:
                        on_failure(result.failure)
                    continue
                figures, wall = result.value
                by_key[result.key] = {**dict(zip(GRID_COLUMNS, result.key)), **figures}
                timings.append({**dict(zip(GRID_COLUMNS, result.key)), "wall_s": f"{wall:.3f}"})
                with interrupts_deferred():
                    write_text_atomic(results_path, _csv(columns, in_grid_order()))
                    write_text_atomic(timings_path, _csv(GRID_COLUMNS + ("wall_s",), timings))
        except KeyboardInterrupt:
            on_disk = {tuple(row[c] for c in GRID_COLUMNS) for row in _read_results(results_path, columns)}
            raise RunsInterrupted(sum(1 for r in loaded.runs if r.key() in on_disk), len(loaded.runs)) from None
    rows = in_grid_order()
    if not results_path.exists():
        write_text_atomic(results_path, _csv(columns, []))
    paths = [results_path, out / "summary.md"]
    write_text_atomic(paths[1], summary_markdown(replay, rows))
    if plot and rows:
        paths.append(out / "summary.png")
        write_summary_plot(replay, rows, paths[-1])
    elif remove_stale(out / "summary.png") and on_removed is not None:
        on_removed(out / "summary.png")
    return SweepOutcome(len(todo) - len(failures), len(loaded.runs) - len(todo), failures, paths,
                        time.perf_counter() - started)


# ---------------------------------------------------------------------- summary


def _groups(rows: Sequence[Mapping[str, str]]) -> dict[tuple[str, ...], list[Mapping[str, str]]]:
    """Rows by their grid values other than the seed, in first-seen order."""
    out: dict[tuple[str, ...], list[Mapping[str, str]]] = {}
    for row in rows:
        out.setdefault(tuple(row[c] for c in GRID_COLUMNS if c != "seed"), []).append(row)
    return out


def _spread(values: Sequence[str]) -> str:
    nums = [float(v) for v in values if v != ""]
    if not nums:
        return "—"
    mid = statistics.median(nums)
    if len(nums) == 1:
        return f"{mid:.2f}"
    return f"{mid:.2f} ({min(nums):.2f}–{max(nums):.2f})"


def summary_markdown(replay: str, rows: Sequence[Mapping[str, str]]) -> str:
    """``summary.md``: per group of runs differing only in the seed, the median of each
    headline figure with its lowest and highest value."""
    shown = [c for c in GRID_COLUMNS if c != "seed" and any(row[c] for row in rows)]
    headline = HEADLINE[replay]
    lines = [f"# Sweep summary ({replay} replay, {len(rows)} runs)", "",
             "Median over the seeds (lowest–highest).", "",
             "| " + " | ".join(shown + ["seeds"] + list(headline)) + " |",
             "|" + "---|" * len(shown) + "---:|" * (1 + len(headline))]
    for _, group in _groups(rows).items():
        cells = [group[0][c] for c in shown] + [str(len(group))]
        cells += [_spread([row[h] for row in group]) for h in headline]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_summary_plot(replay: str, rows: Sequence[Mapping[str, str]], path: PathLike) -> None:
    """``summary.png``: the first headline figure's median per group of seeds, a row per
    workload (and timeline setting), a column per policy (and fgd-pack weights)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metric = HEADLINE[replay][0]
    across = ("policy", "regret_weight", "pressure_weight")
    down = ("workload", "load", "queues", "strategy", "preemption")

    def label(row: Mapping[str, str], columns: Sequence[str], names: Sequence[str]) -> str:
        return " ".join(f"{n}{row[c]}" for c, n in zip(columns, names) if row[c])

    cols = list(dict.fromkeys(label(r, across, ("", "r=", "p=")) for r in rows))
    lines = list(dict.fromkeys(label(r, down, ("", "load ", "", "", "preemption ")) for r in rows))
    grid = np.full((len(lines), len(cols)), np.nan)
    for group in _groups(rows).values():
        values = [float(r[metric]) for r in group if r[metric] != ""]
        if values:
            first = group[0]
            grid[lines.index(label(first, down, ("", "load ", "", "", "preemption "))),
                 cols.index(label(first, across, ("", "r=", "p=")))] = statistics.median(values)
    fig, ax = plt.subplots(figsize=(max(5.0, 2.5 + 1.1 * len(cols)), max(2.5, 1.2 + 0.35 * len(lines))))
    try:
        image = ax.imshow(grid, aspect="auto", cmap="viridis_r")
        ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
        ax.set_yticks(range(len(lines)), lines)
        for (i, j), v in np.ndenumerate(grid):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white")
        fig.colorbar(image, ax=ax, label=metric)
        ax.set_title(f"{replay} sweep: median over seeds")
        fig.tight_layout()
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=100)
        write_bytes_atomic(path, png.getvalue())
    finally:
        plt.close(fig)
