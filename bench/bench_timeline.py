"""Issue #16, item 4: queue policies side by side on the same timeline.

The openb default trace is replayed over time (:func:`placer.replay.timeline.run_spec`)
through the ``qos`` queues (inference: LS and Guaranteed; training: BE and Burstable) on a
share of the bundled cluster's nodes, at offered GPU loads 0.7, 0.9 and 1.1, one seed. For
each load the same jobs run under four configurations, each changing one thing from the
first:

* ``fgd-pack`` placement, ``BestEffortFIFO``, preemption on (inference reclaims its quota
  from training);
* ``best-fit`` placement instead;
* ``StrictFIFO`` instead;
* preemption off instead.

(``--factorial`` runs all eight combinations.) It prints a markdown table — per
configuration and load: the offered load achieved, queueing delay p50, p99 and mean (jobs
admitted in the window; those in progress at the start are left out) and the inference
queue's p99, jobs waiting at the end (of them inference jobs), mean GPUs allocated, GPU-hours left unallocated while
work waits, preemptions (and the event times that ended on a repeated eviction) and the
wall time — and then the wall time of the baseline run at load 0.9.

Run: ``python bench/bench_timeline.py [--shrink 0.25] [--hours 3] [--seed 42]`` (about two and a
half minutes on one core, most of it at load 1.1); ``--shrink 1 --loads 0.9 --baseline-only``
times the baseline on the whole cluster.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from typing import Optional, Sequence

from placer.adapters import openb
from placer.replay.metrics import QueueMetrics, format_duration
from placer.replay.timeline import TimelineRunResult, TimelineSpec, run_spec

LOADS = (0.7, 0.9, 1.1)
BASELINE = ("fgd-pack", "BestEffortFIFO", True)
VARIANTS = (BASELINE, ("best-fit", "BestEffortFIFO", True), ("fgd-pack", "StrictFIFO", True),
            ("fgd-pack", "BestEffortFIFO", False))


def configs(factorial: bool) -> list[tuple[str, str, bool]]:
    """(placement, strategy, preemption) in table order."""
    if not factorial:
        return list(VARIANTS)
    return list(itertools.product(("fgd-pack", "best-fit"), ("BestEffortFIFO", "StrictFIFO"), (True, False)))


def duration(seconds: Optional[float]) -> str:
    return format_duration(seconds, hour_digits=2)


def row(run: TimelineRunResult) -> str:
    spec, o = run.spec, run.outcome
    c: QueueMetrics = o.metrics.cluster
    gpus = run.cluster_gpus
    inference = o.metrics.queue("inference")
    return (
        f"| {spec.policy} | {spec.strategy} | {'on' if spec.preemption else 'off'} | {spec.load:g} "
        f"| {run.arrivals.offered_load:.3f} | {duration(c.delay_p50_s)} | {duration(c.delay_p99_s)} "
        f"| {duration(c.delay_mean_s)} | {duration(inference.delay_p99_s)} | {c.waiting_at_end} ({inference.waiting_at_end}) "
        f"| {c.mean_running_gpus:.1f} ({100 * c.mean_running_gpus / gpus:.1f} %) "
        f"| {c.unallocated_gpu_hours_while_waiting:.1f} | {c.preemptions_suffered} ({o.stalls}) | {o.wall_s:.1f} s |"
    )


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shrink", type=float, default=0.25, help="fraction of the nodes kept (default 0.25)")
    parser.add_argument("--hours", type=float, default=3.0, help="length of each replay (default 3)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--loads", default=",".join(f"{x:g}" for x in LOADS))
    parser.add_argument("--factorial", action="store_true", help="all eight combinations, not four")
    parser.add_argument("--baseline-only", action="store_true", help="only the first configuration")
    args = parser.parse_args(argv)
    snapshot = openb.read_nodes(openb.data_path(openb.DEFAULT_NODES))
    trace = openb.read_timed_pods(openb.data_path(openb.DEFAULT_PODS))
    loads = [float(x) for x in args.loads.split(",")]
    runs: list[TimelineRunResult] = []
    started = time.perf_counter()
    for policy, strategy, preemption in configs(args.factorial)[:1 if args.baseline_only else None]:
        for load in loads:
            spec = TimelineSpec(load=load, seed=args.seed, policy=policy, queues="qos", strategy=strategy,
                                preemption=preemption, horizon_s=args.hours * 3600, shrink=args.shrink)
            run = run_spec(snapshot, trace, spec)
            runs.append(run)
            o = run.outcome
            print(f"{spec.title}: {o.wall_s:.1f} s, {o.cycles} cycles, {o.stalls} stalls", file=sys.stderr)
    first = runs[0]
    print(f"Cluster: {first.nodes} of the {len(snapshot.nodes)} openb nodes ({first.cluster_gpus:g} GPUs, "
          f"--shrink {args.shrink:g}), qos queues, {args.hours:g} h per replay, seed {args.seed}; jobs in "
          "progress at the start (stationary start) are left out of the delays.\n")
    print("| placement | queueing | preemption | load | offered load | delay p50 | delay p99 | delay mean "
          "| inference p99 | waiting at end (inference) | mean GPUs allocated | GPU-h unallocated while work waits "
          "| preemptions (stalls) | wall |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        print(row(run))
    base = [r for r in runs if (r.spec.policy, r.spec.strategy, r.spec.preemption) == BASELINE and r.spec.load == 0.9]
    if base:
        b = base[0]
        print(f"\nOne seed at load 0.9 ({b.spec.title}): {b.outcome.wall_s:.1f} s wall "
              f"({len(b.arrivals.jobs)} jobs, {b.outcome.cycles} admission cycles at {b.outcome.event_times} "
              f"event times).")
    print("\nStalls: event times whose admission cycles ended on a repeated eviction (the same victim for "
          "the same workload at one time; placer.replay.timeline).")
    print(f"\nAll {len(runs)} runs: {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
