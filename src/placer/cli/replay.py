"""``placer simulate`` (the FGD replay, or ``--timeline`` the replay over time) and ``placer
sweep``: the options read and the figures printed; the replays are
:mod:`placer.replay.runner`'s and :func:`placer.replay.sweep.run_sweep`'s."""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from placer import policies
from placer.cli.options import POLICY_CHOICES, positive_int, seconds
from placer.cli.output import EXIT_OK, EXIT_VIOLATIONS, emit, removed_note
from placer.exceptions import InvalidInputError
from placer.text.files import STDIN
from placer.text.lines import aligned

if TYPE_CHECKING:
    from placer.replay.executors import TaskFailure

_SIMULATE_EXAMPLES = """\
examples:
  placer simulate                                   # default trace, all policies, seeds 42-51
  placer simulate --policy fgd,best-fit --seeds 42-44 --out /tmp/sim
  placer simulate --pods openb_pod_list_gpushare40.csv --jobs 4
"""


def _simulate_epilog() -> str:
    """Which policies ``--policy all`` runs, which have published values, and the examples."""
    from placer.replay.simulate import ALL_POLICIES, STUDY_POLICIES

    by_name = [name for name in policies.names() if name not in ALL_POLICIES]
    return (
        f"policies: all runs {', '.join(ALL_POLICIES)};\n"
        f"published values: {', '.join(STUDY_POLICIES)} (the FGD study's);\n"
        f"by name only: {', '.join(by_name)}.\n\n" + _SIMULATE_EXAMPLES
    )


def add_simulate(sub: Any, summary: str) -> None:
    """``placer simulate``."""
    s = sub.add_parser(
        "simulate", help=summary,
        description=(
            "Replay a GPU trace the FGD study's way (Weng et al., USENIX ATC '23): per seed, shuffle the pods,\n"
            "inflate them to 130 % of the cluster's GPU capacity, place them one at a time; write\n"
            "DIR/curves.csv, DIR/table.md (unallocated GPU % at 90..130 % arrived beside the\n"
            "published values) and DIR/curves.png. The protocol: placer.replay.simulate's docstring and the\n"
            "README, \"Fragmentation and trace replay\"."
        ),
        epilog=_simulate_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--nodes", metavar="CSV", help="openb node list (default: the bundled 1213 GPU nodes)")
    s.add_argument(
        "--pods", metavar="CSV",
        help="openb pod list (default: the bundled default trace); workload name from "
        "openb_pod_list_<name>.csv, else the file's stem",
    )
    s.add_argument(
        "--policy", metavar="P", default="all",
        help=f"a policy, a comma-separated list, or all (default: fgd-pack and the study's six); "
        f"policies: {POLICY_CHOICES}",
    )
    s.add_argument("--seeds", metavar="LIST", default="42-51", help="42-51 (default) or 1,2,3")
    s.add_argument("--out", metavar="DIR", default="simulate-out", help="output directory (default: ./simulate-out)")
    s.add_argument("--jobs", metavar="N", help="worker processes (default: the CPU count; with --executor ray and "
                   "no --address, the CPUs of the local Ray)")
    s.add_argument("--executor", metavar="E", default="local",
                   help="local (default: processes on this machine) or ray (pip install 'placer[ray]')")
    s.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster for --executor ray (e.g. ray://head:10001; default: a local Ray)")
    _connect_timeout_argument(s)
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--no-plot", action="store_true", help="skip curves.png (and importing matplotlib)")
    t = s.add_argument_group(
        "replay over time (--timeline)",
        "jobs arrive and leave (openb creation time, lifetime = deletion - scheduled time), wait in Kueue "
        "ClusterQueues and run where placer places them; writes DIR/timeline.csv, DIR/queues.md and a plot",
    )
    t.add_argument("--timeline", action="store_true", help="replay over time through queues instead of the FGD replay")
    t.add_argument("--load", metavar="LIST", default="0.9",
                   help="offered GPU load(s), e.g. 0.9 or 0.7,0.9,1.1 (default: 0.9)")
    t.add_argument("--queues", metavar="SETUP", default="qos",
                   help="qos (inference: LS+Guaranteed, training: BE+Burstable; default) or teams:N")
    t.add_argument("--strategy", metavar="S", default="BestEffortFIFO",
                   help="queueing strategy, a list allowed: BestEffortFIFO (default), StrictFIFO")
    t.add_argument("--preemption", metavar="ON", default="on", help="on (default), off, or on,off")
    t.add_argument("--horizon", metavar="T", default="6h", help="length of the replay: 3600, 90m, 6h, 1d (default: 6h)")
    t.add_argument("--shrink", metavar="F", default="1", help="keep this fraction of the nodes (default: 1)")
    s.set_defaults(handler=run_simulate)


def add_sweep(sub: Any, summary: str) -> None:
    """``placer sweep``."""
    sw = sub.add_parser(
        "sweep", help=summary,
        description=(
            "Run every combination of a Sweep spec's workloads, policies, seeds (and, for the\n"
            "timeline replay, loads, queue set-ups, strategies and preemption; for fgd-pack its\n"
            "weights). Writes DIR/results.csv (one row per run, grid values then figures),\n"
            "DIR/summary.md (medians and spreads over the seeds) and DIR/summary.png. Runs already\n"
            "in DIR/results.csv are not run again."
        ),
        epilog="examples:\n  placer sweep fgd-study --out fgd-study/          # the bundled FGD grid, 1,020 runs\n"
               "  placer sweep my-sweep.yaml --out out/ --executor ray --address ray://head:10001",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sw.add_argument("spec", metavar="SPEC", help="a Sweep spec (JSON or YAML), or a bundled one by name: fgd-study")
    sw.add_argument("--out", metavar="DIR", required=True, help="output directory (created; reused to resume)")
    sw.add_argument("--executor", metavar="E", default="local", help="local (default) or ray")
    sw.add_argument("--address", metavar="ADDR", help="the Ray cluster for --executor ray (default: a local Ray)")
    _connect_timeout_argument(sw)
    sw.add_argument("--jobs", metavar="N", help="worker processes (default: the CPU count), or a local Ray's CPUs")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.add_argument("--no-plot", action="store_true", help="skip summary.png")
    sw.set_defaults(handler=run_sweep_command)


PARSERS: dict[str, Callable[[Any, str], None]] = {"simulate": add_simulate, "sweep": add_sweep}


def _connect_timeout_argument(parser: argparse.ArgumentParser) -> None:
    from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S

    parser.add_argument("--connect-timeout", metavar="SECONDS", default=str(DEFAULT_CONNECT_TIMEOUT_S),
                        help=f"give up when the Ray cluster at --address has not answered within this many "
                        f"seconds (default: {DEFAULT_CONNECT_TIMEOUT_S:g})")


def _executor_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--executor``, ``--address``, ``--connect-timeout`` and ``--jobs`` checked, as the
    keyword arguments of a grid of runs: Ray importable when asked for, and the cluster at
    ``--address`` answering."""
    from placer.replay.executors import EXECUTORS, check_ray_address, require_ray

    jobs = positive_int(args.jobs, "--jobs") if args.jobs is not None else None
    if args.executor not in EXECUTORS:
        raise InvalidInputError("--executor", f"expected one of {', '.join(EXECUTORS)}, got {args.executor!r}")
    if args.address is not None and args.executor != "ray":
        raise InvalidInputError("--address", "is for --executor ray")
    connect_timeout = seconds(args.connect_timeout, "--connect-timeout", positive=True)
    if args.executor == "ray":
        require_ray(address=args.address)
        check_ray_address(args.address, connect_timeout)
    return {"executor": str(args.executor), "jobs": jobs, "address": args.address, "connect_timeout": connect_timeout}


def _report_failures(command: str, failures: Sequence[TaskFailure], run: Callable[[Any], str]) -> None:
    """One stderr line per run that failed twice, naming it by ``run(key)``."""
    for failure in failures:
        sys.stderr.write(f"placer: {command}: run {run(failure.key)} failed twice: {failure.error}\n")


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run ``placer sweep``: exit 1 when a run failed."""
    from placer.replay import sweep
    from placer.replay.runner import check_out_dir

    spec = args.spec
    if spec != STDIN and not os.path.exists(spec) and os.sep not in spec and "." not in spec:
        spec = str(sweep.bundled_sweep(spec))
    where = _executor_options(args)
    check_out_dir(args.out)
    outcome = sweep.run_sweep(spec, args.out, progress=not args.quiet, plot=not args.no_plot,
                              on_removed=removed_note("sweep"), **where)
    _report_failures("sweep", outcome.failures, lambda key: " ".join(v for v in key if v))
    emit(
        f"{outcome.ran} run(s) done, {outcome.skipped} already in results.csv, {len(outcome.failures)} failed, "
        f"{outcome.wall_s:.1f} s\nwrote " + ", ".join(str(p) for p in outcome.paths) + "\n"
    )
    return EXIT_VIOLATIONS if outcome.failures else EXIT_OK


def _trace_files(args: argparse.Namespace) -> tuple[Any, Any]:
    """The openb node and pod files of ``simulate`` (the bundled ones by default)."""
    from placer.adapters import openb

    nodes_path = args.nodes if args.nodes is not None else openb.data_path(openb.DEFAULT_NODES)
    pods_path = args.pods if args.pods is not None else openb.data_path(openb.DEFAULT_PODS)
    return nodes_path, pods_path


def run_simulate(args: argparse.Namespace) -> int:
    """Run ``placer simulate``: exit 1 when a run failed."""
    if args.timeline:
        return _run_timeline(args)
    from placer.adapters import openb
    from placer.replay.runner import check_out_dir, run_simulation, simulation_policies
    from placer.replay.simulate import parse_seeds, summary_rows, workload_name_from_path

    seeds = parse_seeds(args.seeds, "--seeds")
    chosen, skipped = simulation_policies(args.policy)
    where = _executor_options(args)
    check_out_dir(args.out)
    nodes_path, pods_path = _trace_files(args)
    snapshot = openb.read_nodes(nodes_path)
    pods = openb.read_pods(pods_path)
    name = workload_name_from_path(pods_path)
    if skipped:
        sys.stderr.write(f"placer: simulate: skipped {', '.join(skipped)} (not available yet)\n")
        sys.stderr.flush()
    outcome = run_simulation(snapshot, pods, chosen, seeds, args.out, name=name, progress=not args.quiet,
                             plot=not args.no_plot, on_removed=removed_note("simulate"), **where)
    _report_failures("simulate", outcome.failures, lambda key: "{} {} seed {}".format(*key))
    if not outcome.runs:
        sys.stderr.write("placer: simulate: every run failed; nothing written\n")
        return EXIT_VIOLATIONS

    def cell(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.2f}"

    first = outcome.runs[0]
    lines = [
        f"workload {name}: {len(snapshot.nodes)} nodes, {first.capacity_milli // 1000} GPUs, "
        f"{first.original_pods} pods inflated to 130 % of GPU capacity; {len(seeds)} seed(s)",
        "unallocated GPU % at 100 % arrived (ours over the seeds; published: the FGD study, 10 seeds):",
    ]
    rows = [["policy", "median", "mean", "sd", "published mean", "published median"]]
    for r in summary_rows(outcome.runs):
        rows.append(
            [r["policy"], cell(r["median"]), cell(r["mean"]), cell(r["sd"]),
             cell(r["published_mean"]), cell(r["published_median"])]
        )
    lines += aligned(rows, right=frozenset((1, 2, 3, 4, 5)), indent="  ")
    lines.append("wrote " + ", ".join(str(p) for p in outcome.paths))
    emit("\n".join(lines) + "\n")
    return EXIT_VIOLATIONS if outcome.failures else EXIT_OK


def _run_timeline(args: argparse.Namespace) -> int:
    """``placer simulate --timeline``."""
    from placer.adapters import openb
    from placer.replay.metrics import at_least
    from placer.replay.runner import check_out_dir, run_timeline_grid, timeline_grid
    from placer.replay.simulate import parse_seeds
    from placer.replay.timeline import parse_choices, parse_duration, parse_fractions, parse_queue_setup

    loads = parse_fractions(args.load, "--load", 10.0)
    (shrink,) = parse_fractions(args.shrink, "--shrink", 1.0)
    horizon = parse_duration(args.horizon, "--horizon")
    strategies = parse_choices(args.strategy, "--strategy", {"BestEffortFIFO": "BestEffortFIFO", "StrictFIFO": "StrictFIFO"})
    preemption = parse_choices(args.preemption, "--preemption", {"on": True, "off": False})
    placement = [policies.REGISTRY[policies.DEFAULT].name] if args.policy == "all" else [
        policies.get(p.strip(), "--policy").name for p in args.policy.split(",")]
    seeds = parse_seeds("42" if args.seeds == "42-51" else args.seeds, "--seeds")
    parse_queue_setup(args.queues)
    where = _executor_options(args)
    check_out_dir(args.out)
    nodes_path, pods_path = _trace_files(args)
    snapshot = openb.read_nodes(nodes_path)
    trace = openb.read_timed_pods(pods_path)
    specs = timeline_grid(placement, strategies, preemption, loads, seeds, queues=args.queues, horizon_s=horizon,
                          shrink=shrink)
    outcome = run_timeline_grid(snapshot, trace, specs, args.out, progress=not args.quiet, plot=not args.no_plot,
                                **where)
    _report_failures("simulate", outcome.failures, lambda key: key[1])
    if not outcome.runs:
        sys.stderr.write("placer: simulate: every run failed; nothing written\n")
        return EXIT_VIOLATIONS
    lines = []
    for run in outcome.runs:
        m = run.outcome.metrics
        lines.append(f"{run.spec.title}: {run.arrivals_summary}")
        rows = []
        for q in (*m.queues, m.cluster):
            p50 = "-" if q.delay_p50_s is None else at_least(q.delay_p50_lower_bound, f"{q.delay_p50_s:.0f} s")
            p99 = "-" if q.delay_p99_s is None else at_least(q.delay_p99_lower_bound, f"{q.delay_p99_s:.0f} s")
            if q.never_admitted:
                p99 += f" ({q.never_admitted} of {q.delay_jobs} never admitted)"
            rows.append([
                q.queue,
                f"delay p50 {p50:>8}, p99 {p99:>8}; mean GPUs {q.mean_running_gpus:8.1f}; "
                f"unallocated while waiting {q.unallocated_gpu_hours_while_waiting:8.1f} GPU-h; "
                f"borrowing {100 * q.borrowing_fraction:5.1f} %; preempted {q.preemptions_suffered}",
            ])
        lines += aligned(rows, indent="  ")
    lines.append("wrote " + ", ".join(str(p) for p in outcome.paths))
    emit("\n".join(lines) + "\n")
    return EXIT_VIOLATIONS if outcome.failures else EXIT_OK
