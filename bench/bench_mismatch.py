"""Issue #13, item 11: ``fgd-pack`` and ``fgd`` told a workload other than the one that arrives.

For each replayed trace (rows) and each workload told (columns: the trace's own, the
default trace's, gpuspec33's), the unallocated GPU % at 100 % arrived of
:func:`placer.replay.simulate.run_replay` (the study's protocol), mean over seeds, one process.

Traces:

* ``default``, ``gpuspec33`` and ``cpu250``: the openb pod lists (``--data``: the
  directory of the study's trace files; the default one is bundled);
* ``spec-other``: a synthetic mix built here (:func:`spec_other`) — the default trace
  with 12 % of its GPU pods (a seeded draw) restricted to the models gpuspec33 presses
  least per GPU: G3, the V100s or P100, drawn in proportion to their GPUs. Nothing of it
  is T4-only, where gpuspec33 puts a third of its GPU pods.

Run: ``python bench/bench_mismatch.py --seeds 1-10 --json out.json`` (add
``--compare before.json`` to print the table of both runs side by side;
``--no-learning --policies fgd-pack`` keeps fgd-pack's guide at the workload told).
``--speed 9`` instead times one replay of the default trace (seed 42, told its own
workload, as bench/test_bench_replay.py) under ``fgd`` and ``fgd-pack``, alternating, and
prints the medians and their ratio; it runs on a tree before this change too.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from placer.adapters import openb
from placer.workload.fragmentation import target_workload
from placer.model import PodRequest, replace
from placer.replay.simulate import parse_seeds, run_replay

TRACES = ("default", "gpuspec33", "cpu250", "spec-other")
TOLD = ("own", "default", "gpuspec33")
POLICIES = ("fgd-pack", "fgd")
OTHER_MODELS = ((("G3",), 312), (("V100M16", "V100M32"), 399), (("P100",), 265))


def spec_other(pods: Sequence[PodRequest], share: float = 0.12, seed: int = 13) -> list[PodRequest]:
    """The default pods with ``share`` of the GPU pods restricted to G3, the V100s or P100."""
    rng = random.Random(seed)
    choices = [m for m, _ in OTHER_MODELS]
    weights = [w for _, w in OTHER_MODELS]
    out = []
    for pod in pods:
        if pod.gpus and rng.random() < share:
            pod = replace(pod, gpu_models=rng.choices(choices, weights)[0])
        out.append(pod)
    return out


def load_traces(data: Path) -> dict[str, list[PodRequest]]:
    """Pod list per trace name."""
    default = openb.read_pods(openb.data_path(openb.DEFAULT_PODS))
    return {
        "default": default,
        "gpuspec33": openb.read_pods(data / "openb_pod_list_gpuspec33.csv"),
        "cpu250": openb.read_pods(data / "openb_pod_list_cpu250.csv"),
        "spec-other": spec_other(default),
    }


def run(
    data: Path, seeds: list[int], traces: Sequence[str], policies: Sequence[str] = POLICIES
) -> dict[str, list[float]]:
    """``"trace|told|policy"`` → unallocated % at 100 % arrived per seed."""
    snapshot = openb.read_nodes(openb.data_path(openb.DEFAULT_NODES))
    pods = load_traces(data)
    workloads = {name: target_workload(p) for name, p in pods.items()}
    out: dict[str, list[float]] = {}
    for trace in traces:
        for told in TOLD:
            if told != "own" and told == trace:
                continue
            workload = workloads[trace if told == "own" else told]
            for policy in policies:
                key = f"{trace}|{told}|{policy}"
                started = time.perf_counter()
                out[key] = [run_replay(snapshot, pods[trace], policy, s, workload, name=trace).at(100) for s in seeds]
                print(f"{key}: {statistics.fmean(out[key]):.2f} ({time.perf_counter() - started:.0f} s)",
                      file=sys.stderr)
    return out


def speed(rounds: int) -> str:
    """Medians of ``rounds`` replays per policy, alternating, in this process."""
    import placer
    from placer.replay.simulate import arrival_order, gpu_capacity_milli

    snapshot, pods = openb.load_default()
    workload = target_workload(pods)
    order = arrival_order(pods, 42, gpu_capacity_milli(snapshot))
    times: dict[str, list[float]] = {"fgd": [], "fgd-pack": []}
    for _ in range(rounds):
        for policy, runs in times.items():
            cluster = placer.Cluster(snapshot)
            cluster.fragmentation(workload)
            started = time.perf_counter()
            cluster.replay(order, policy, 42, workload)
            runs.append(time.perf_counter() - started)
    med = {p: statistics.median(v) for p, v in times.items()}
    return (f"fgd {med['fgd'] * 1000:.0f} ms, fgd-pack {med['fgd-pack'] * 1000:.0f} ms, "
            f"ratio {med['fgd-pack'] / med['fgd']:.2f} (medians of {rounds})")


def cell(results: dict[str, list[float]], trace: str, told: str, policy: str) -> float | None:
    key = f"{trace}|{'own' if told == trace else told}|{policy}"
    values = results.get(key)
    return statistics.fmean(values) if values else None


def table(after: dict[str, list[float]], before: dict[str, list[float]] | None) -> str:
    """Markdown: per trace and workload told, fgd-pack and fgd (before → after when given)."""
    def fmt(trace: str, told: str, policy: str) -> str:
        a = cell(after, trace, told, policy)
        if a is None:
            return "–"
        b = cell(before, trace, told, policy) if before else None
        return f"{a:.2f}" if b is None else f"{b:.2f} → {a:.2f}"

    traces = [t for t in TRACES if any(k.startswith(t + "|") for k in after)]
    head = "| replayed trace | " + " | ".join(f"told {t}: fgd-pack | told {t}: fgd" for t in TOLD) + " |"
    lines = [head, "|---|" + "---:|" * (2 * len(TOLD))]
    for trace in traces:
        cells = []
        for told in TOLD:
            cells += [fmt(trace, told, "fgd-pack"), fmt(trace, told, "fgd")]
        lines.append(f"| {trace} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).parent.parent.parent / "shared" / "data" / "openb")
    parser.add_argument("--seeds", default="1-10")
    parser.add_argument("--traces", default=",".join(TRACES))
    parser.add_argument("--json", type=Path, help="write the per-seed figures here")
    parser.add_argument("--compare", type=Path, help="per-seed figures of an earlier run (shown as before)")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--no-learning", action="store_true", help="never refresh a learned guide")
    parser.add_argument("--speed", type=int, metavar="ROUNDS", help="time fgd and fgd-pack replays only")
    args = parser.parse_args()
    if args.speed:
        print(speed(args.speed))
        return
    if args.no_learning:
        from placer.workload.packing import PackingLearner

        start = PackingLearner.__init__

        def never(self: PackingLearner, *a: Any, **k: Any) -> None:
            start(self, *a, **k)
            self.every = 1 << 62

        PackingLearner.__init__ = never  # type: ignore[method-assign]
    results = run(args.data, parse_seeds(args.seeds), args.traces.split(","), args.policies.split(","))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    before = json.loads(args.compare.read_text()) if args.compare else None
    print(table(results, before))


if __name__ == "__main__":
    main()
