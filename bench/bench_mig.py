"""Issue #14, item 9: the openb trace replayed on MIG GPUs, and the CP-SAT optimum on small instances.

Mapping (:func:`mig_pod`). The trace gives a pod's GPU share in milli-GPU and no GPU
memory, so a shared pod (``gpu_milli < 1000``, one GPU) asks for that share of an 80 GB
GPU's memory, ``{"memoryMiB": ceil(gpu_milli / 1000 × 81,920)}``, which placer resolves
to the smallest profile that holds it on the node's model (``MigTable.smallest_holding``);
on the A100-80GB and the H100-80GB every share of the trace resolves to the same profile
(checked): 50–110 milli → ``1g.10gb`` (1 slice), 140–230 → ``1g.20gb`` (2), 270–480 →
``3g.40gb`` (4), 550–810 → ``7g.80gb`` (8). A pod of k whole GPUs asks for k ×
``7g.80gb`` on one node (``{"profile": "7g.80gb", "count": k}``): whole GPUs compete for
the same GPUs as shares do, as they would on a cluster whose every GPU is in MIG mode.
CPU-only pods are left out: no MIG choice places them. CPU and memory as in the trace.

Cluster (:func:`mig_snapshot`). The 1213 GPU nodes of the trace, GPU counts, CPU and
memory as they are; the i-th node's GPUs are A100-SXM4-80GB for even i, H100-80GB for odd
i; every GPU in MIG mode, dynamic. Capacity: 6212 GPUs × 8 memory slices.

Protocol (:func:`replay`): the FGD study's (:func:`placer.replay.simulate.arrival_order`) with
the demand counted in memory slices: the MIG pods sorted by name, shuffled by the seed,
inflated by draws with replacement until the next would take the arrived slices over 130 %
of the capacity; placed one at a time by ``Cluster.schedule`` (each MIG pod is a step of
its own), never released; unallocated slices % per integer arrived % as the study
computes it (:func:`placer.replay.simulate.curve_metrics`). The MIG-aware choice (policy ``fgd``)
is told the demand mix of the original pod list (``set_mig_demand``), as FGD is told its
workload.

Small instances (:func:`small_instance`): a few nodes of that cluster drawn by the seed
(4–8 GPUs), the trace's MIG pods sampled by the same protocol until ``--small-ratio``
(default 2.0) × the instance's slices have arrived, so that it saturates; each policy's
allocated slices against :func:`placer.mig.exact.solve_mig` (the most slices the same pods
can take together, any subset, any layout: a bound no online order reaches past).

Speed (:func:`speed`): per-pod cost of ``Cluster.schedule`` on the MIG pods of one
arrival order (its first 2,000 pods, and all of it), against :func:`naive_first_fit`, a
pure-Python scan of nodes, GPUs and starts that stops at the first fit, in the same process
on the same pods; the scan must decide as ``first-fit`` does.

Variants: ``--pods all`` (every GPU pod, the default), ``shared`` (the shared pods
alone) or ``partial`` (the shared pods of less than a whole GPU, :data:`VARIANTS`);
``--slices-only`` drops the pods' CPU and memory, so that the MIG layout alone limits them.

Run: ``python bench/bench_mig.py --seeds 42-51 --json /tmp/mig.json`` (add ``--only
trace``, ``--only small`` or ``--only speed``); the tables go to stdout, the progress to
stderr.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import placer
from placer.adapters import openb
from placer.mig.exact import solve_mig
from placer.model.mig_profiles import MigProfile, table_for
from placer.model import ClusterSnapshot, MigRequest, MigUse, PlacementRequest, PodRequest, load_snapshot, replace
from placer.replay.simulate import arrival_order, curve_metrics, parse_seeds
from report import _markdown_table

GPU_MEMORY_MIB = 81_920
"""The memory of an 80 GB GPU that a pod's milli-GPU share is a share of."""

MIG_MODELS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")
"""The GPU model of even and of odd nodes."""

WHOLE_GPU_PROFILE = "7g.80gb"
POLICIES = ("first-fit", "best-fit", "fgd")
VARIANTS = ("all", "shared", "partial")
"""Which pods are replayed: every GPU pod (whole GPUs as ``7g.80gb`` instances), the
shared pods alone (the issue's "shared-GPU pods"), or the shared pods whose profile is
less than a whole GPU (``1g.10gb``, ``1g.20gb``, ``3g.40gb``: where the start matters)."""
CURVE_ARRIVED = (90, 100, 110, 120, 130)
TABLES = [table_for(m) for m in MIG_MODELS]


# ------------------------------------------------------------------------- the mapping


def mig_pod(pod: PodRequest) -> PodRequest | None:
    """The MIG pod an openb pod becomes (None: a CPU-only pod, left out)."""
    if not pod.gpus:
        return None
    if pod.gpu_milli < 1000:
        request = MigRequest(memory_mib=math.ceil(pod.gpu_milli * GPU_MEMORY_MIB / 1000))
    else:
        request = MigRequest(profile=WHOLE_GPU_PROFILE, count=pod.gpus)
    return replace(pod, gpus=0, gpu_milli=1000, mig=request)


def profile_of(pod: PodRequest) -> MigProfile:
    """The profile a MIG pod gets; the same on both models (raises otherwise)."""
    request = pod.mig
    assert request is not None
    found = {
        (t.profile(request.profile) if request.profile else t.smallest_holding(request.memory_mib)).name
        for t in TABLES
    }
    if len(found) != 1:
        raise ValueError(f"{pod.name}: {request} means {sorted(found)} on {MIG_MODELS}")
    profile = TABLES[0].profile(found.pop())
    assert profile is not None
    return profile


def slices_of(pod: PodRequest) -> int:
    """The memory slices a MIG pod asks for (all its instances)."""
    return profile_of(pod).memory_slices * pod.mig.count


def mig_pods(pods: Sequence[PodRequest], variant: str = "all") -> list[PodRequest]:
    """The trace's GPU pods as MIG pods (every one's profile checked on both models);
    ``variant``: which (:data:`VARIANTS`)."""
    kept = [p for p in pods if variant == "all" or (p.gpus == 1 and p.gpu_milli < 1000)]
    out = [m for m in map(mig_pod, kept) if m is not None]
    if variant == "partial":
        out = [m for m in out if profile_of(m).name != WHOLE_GPU_PROFILE]
    for pod in out:
        profile_of(pod)
    return out


def mig_snapshot(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The GPU nodes, alternately A100-80GB and H100-80GB, every GPU MIG, dynamic."""
    nodes = []
    for i, node in enumerate(n for n in snapshot.nodes if n.hardware.gpus):
        hw = node.hardware
        nodes.append({
            "name": node.name, "gpus": hw.gpus, "gpuModel": MIG_MODELS[i % 2], "cpuMilli": hw.cpu_milli,
            "memoryMiB": hw.memory_mib, "maxPods": hw.max_pods, "mig": {"gpus": "all", "mode": "dynamic"},
        })
    return load_snapshot({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": nodes})


def capacity_slices(snapshot: ClusterSnapshot) -> int:
    """Memory slices of every GPU of the cluster."""
    return sum(node.hardware.gpus * table_for(node.hardware.gpu_model).slices for node in snapshot.nodes)


def load(variant: str, slices_only: bool = False) -> tuple[ClusterSnapshot, list[PodRequest]]:
    """The MIG cluster and the MIG pods of the bundled default trace; ``slices_only``: the
    pods ask for no CPU and memory, so that only the MIG layout limits them."""
    snapshot, pods = openb.load_default()
    out = mig_pods(pods, variant)
    if slices_only:
        out = [replace(p, cpu_milli=0, memory_mib=0) for p in out]
    return mig_snapshot(snapshot), out


# ------------------------------------------------------------------------- the replay


def place_in_order(
    snapshot: ClusterSnapshot, order: Sequence[PodRequest], policy: str, seed: int, told: Sequence[PodRequest]
) -> tuple[placer.Cluster, placer.PlacementResult, PlacementRequest]:
    """``order`` placed one at a time by ``Cluster.schedule``; the aware choice told ``told``."""
    cluster = placer.Cluster(snapshot)
    if placer.policies.get(policy).mig_choice == "aware":
        cluster.session.set_mig_demand(told)
    request = PlacementRequest(pods=tuple(order), policy=policy, seed=seed)
    return cluster, cluster.schedule(request), request


def allocated(result: placer.PlacementResult) -> dict[str, int]:
    """Memory slices per placed pod."""
    return {a.pod: sum(_slices(u) for u in a.mig) for a in result.assignments}


def _slices(use: MigUse) -> int:
    profile = TABLES[0].profile(use.profile)
    assert profile is not None
    return profile.memory_slices


def replay(snapshot: ClusterSnapshot, pods: Sequence[PodRequest], policy: str, seed: int) -> dict[str, Any]:
    """One seed of the protocol: unallocated slices % per integer arrived %."""
    started = time.perf_counter()
    capacity = capacity_slices(snapshot)
    order = arrival_order(pods, seed, capacity, stop="total", demand=slices_of)
    _, result, _ = place_in_order(snapshot, order, policy, seed, pods)
    got = allocated(result)
    asked = np.array([slices_of(p) for p in order], dtype=np.int64)
    taken = np.array([got.get(p.name, 0) for p in order], dtype=np.int64)
    arrived = np.concatenate(([0], np.cumsum(asked)))
    alloc = np.concatenate(([0], np.cumsum(taken)))
    k, unalloc, _ = curve_metrics(arrived, alloc, np.zeros(len(arrived)), capacity)
    return {
        "policy": policy, "seed": seed, "pods": len(order), "placed": len(got),
        "seconds": time.perf_counter() - started,
        "curve": {str(a): float(u) for a, u in zip(k, unalloc)},
    }


# ------------------------------------------------------------------------- small instances


def small_instance(
    snapshot: ClusterSnapshot, pods: Sequence[PodRequest], seed: int, ratio: float
) -> tuple[ClusterSnapshot, list[PodRequest]]:
    """Nodes of the cluster drawn by ``seed`` until 4–8 GPUs, and the arrivals of the
    protocol on them up to ``ratio`` × their slices."""
    rng = random.Random(seed)
    nodes = list(snapshot.nodes)
    chosen, gpus = [], 0
    while gpus < 4:
        node = nodes[rng.randrange(len(nodes))]
        if node not in chosen and gpus + node.hardware.gpus <= 8:
            chosen.append(node)
            gpus += node.hardware.gpus
    small = replace(snapshot, nodes=tuple(chosen))
    order = arrival_order(pods, seed, capacity_slices(small), ratio=ratio, stop="total", demand=slices_of)
    return small, order


def small_gaps(
    snapshot: ClusterSnapshot, pods: Sequence[PodRequest], seeds: Sequence[int], ratio: float, limit_s: float
) -> list[dict[str, Any]]:
    """Per seed: each policy's allocated slices (checked) and the CP-SAT optimum's."""
    rows = []
    for seed in seeds:
        small, order = small_instance(snapshot, pods, seed, ratio)
        row: dict[str, Any] = {"seed": seed, "gpus": sum(n.hardware.gpus for n in small.nodes),
                               "nodes": len(small.nodes), "pods": len(order),
                               "capacity": capacity_slices(small), "arrived": sum(map(slices_of, order))}
        for policy in POLICIES:
            _, result, request = place_in_order(small, order, policy, seed, pods)
            assert placer.check_placement(small, request, result) == [], policy
            row[policy] = sum(allocated(result).values())
        best = solve_mig(placer.Cluster(small), order, time_limit_s=limit_s)
        assert placer.check_placement(small, PlacementRequest(pods=tuple(order)), best.result()) == []
        row.update(optimum=best.slices, bound=best.bound, status=best.status, exact_s=best.seconds,
                   variables=best.num_variables)
        rows.append(row)
        print(f"small seed {seed}: {row}", file=sys.stderr)
    return rows


def where_left(snapshot: ClusterSnapshot, pods: Sequence[PodRequest], seed: int) -> list[dict[str, Any]]:
    """Per policy, at 100 % arrived: free slices on empty GPUs and on partly used ones."""
    capacity = capacity_slices(snapshot)
    order = arrival_order(pods, seed, capacity, stop="total", demand=slices_of)
    arrived = np.cumsum([slices_of(p) for p in order])
    order = order[: int(np.searchsorted(arrived, capacity, side="right"))]
    rows = []
    for policy in POLICIES:
        cluster, result, _ = place_in_order(snapshot, order, policy, seed, pods)
        mig = cluster.session.mig
        free = np.array([8 - bin(int(b)).count("1") for b in mig.busy])
        rows.append({"seed": seed, "policy": policy, "free": int(free.sum()),
                     "on_empty": int(free[free == 8].sum()), "on_partial": int(free[free < 8].sum()),
                     "failed": len(result.unschedulable)})
    return rows


# ------------------------------------------------------------------------- speed


def naive_first_fit(snapshot: ClusterSnapshot, order: Sequence[PodRequest]) -> dict[str, tuple[str, list[MigUse]]]:
    """A pure-Python first-fit: for each pod, the first node (in order) with CPU, memory,
    a pod slot and ``count`` instances free, taking the lowest GPU and start each time."""
    nodes = snapshot.nodes
    busy = [[0] * n.hardware.gpus for n in nodes]
    cpu = [n.hardware.cpu_milli for n in nodes]
    memory = [n.hardware.memory_mib for n in nodes]
    slots = [n.hardware.max_pods for n in nodes]
    tables = [table_for(n.hardware.gpu_model) for n in nodes]
    out: dict[str, tuple[str, list[MigUse]]] = {}
    for pod in order:
        request = pod.mig
        for i, node in enumerate(nodes):
            if cpu[i] < pod.cpu_milli or memory[i] < pod.memory_mib or slots[i] < 1:
                continue
            table = tables[i]
            profile = table.profile(request.profile) if request.profile else table.smallest_holding(request.memory_mib)
            taken = list(busy[i])
            uses: list[MigUse] = []
            for g in range(len(taken)):
                for start, mask in zip(profile.starts, profile.masks):
                    while len(uses) < request.count and not taken[g] & mask:
                        taken[g] |= mask
                        uses.append(MigUse(gpu=g, profile=profile.name, start=start, create=True))
            if len(uses) == request.count:
                busy[i] = taken
                cpu[i] -= pod.cpu_milli
                memory[i] -= pod.memory_mib
                slots[i] -= 1
                out[pod.name] = (node.name, uses)
                break
    return out


def speed(snapshot: ClusterSnapshot, pods: Sequence[PodRequest], count: int, rounds: int) -> dict[str, Any]:
    """Per-pod seconds of each policy and of :func:`naive_first_fit` on the first ``count``
    pods of seed 42's order (0: all of it), alternating, ``rounds`` times; the medians."""
    order = arrival_order(pods, 42, capacity_slices(snapshot), stop="total", demand=slices_of)
    order = order[:count] if count else order
    times: dict[str, list[float]] = {name: [] for name in (*POLICIES, "naive first-fit")}
    for _ in range(rounds):
        for policy in POLICIES:
            started = time.perf_counter()
            _, result, _ = place_in_order(snapshot, order, policy, 42, pods)
            times[policy].append((time.perf_counter() - started) / len(order))
            if policy == "first-fit":
                placed = {a.pod: (a.node, list(a.mig)) for a in result.assignments}
        started = time.perf_counter()
        naive = naive_first_fit(snapshot, order)
        times["naive first-fit"].append((time.perf_counter() - started) / len(order))
        assert naive == placed, "the naive scan decides otherwise than first-fit"
    return {"pods": len(order), "rounds": rounds, "per_pod_s": {k: statistics.median(v) for k, v in times.items()},
            "all_s": times}


# ------------------------------------------------------------------------- tables


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def print_trace(runs: list[dict[str, Any]]) -> None:
    """Unallocated slices % at 100 % arrived and the curve, per policy (medians over seeds)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by.setdefault(run["policy"], []).append(run)
    rows = []
    for policy in POLICIES:
        if policy not in by:
            continue
        at100 = [r["curve"]["100"] for r in by[policy]]
        curve = [statistics.median(r["curve"].get(str(k), math.nan) for r in by[policy]) for k in CURVE_ARRIVED]
        rows.append([policy, _spread(at100), f"{statistics.mean(at100):.2f} ± {statistics.pstdev(at100):.2f}",
                     *(f"{c:.2f}" for c in curve),
                     f"{statistics.median(r['seconds'] for r in by[policy]):.1f}"])
    _markdown_table(
        f"Unallocated slices % ({len(next(iter(by.values())))} seeds)",
        ["policy", "at 100 %: median (min–max)", "mean ± sd", *(f"median at {k} %" for k in CURVE_ARRIVED),
         "s per replay"], set(range(1, 4 + len(CURVE_ARRIVED))), rows)
    if "fgd" in by and "first-fit" in by:
        ff = {r["seed"]: r["curve"]["100"] for r in by["first-fit"]}
        diffs = [r["curve"]["100"] - ff[r["seed"]] for r in by["fgd"] if r["seed"] in ff]
        print(f"Aware − first-fit at 100 % per seed: median {statistics.median(diffs):+.2f} points, "
              f"worst {max(diffs):+.2f}, better on {sum(d < 0 for d in diffs)} of {len(diffs)} seeds.\n")


def print_small(rows: list[dict[str, Any]]) -> None:
    """Each policy's allocated slices against the optimum, over the small instances."""
    optimal = [r for r in rows if r["status"] == "optimal"]
    table = []
    for policy in POLICIES:
        gaps = [(r["optimum"] - r[policy]) / r["capacity"] * 100 for r in optimal]
        share = [r[policy] / r["optimum"] * 100 for r in optimal if r["optimum"]]
        table.append([policy, f"{statistics.median(gaps):.2f} ({max(gaps):.2f})",
                      f"{statistics.median(share):.1f}", f"{sum(r[policy] == r['optimum'] for r in optimal)}"])
    table.append(["CP-SAT optimum", "0", "100.0", str(len(optimal))])
    _markdown_table(
        f"Small instances: allocated slices against the CP-SAT optimum ({len(optimal)} of {len(rows)} optimal)",
        ["policy", "gap, points of the instance's slices: median (max)", "% of the optimum (median)",
         "instances at the optimum"], {1, 2, 3}, table)
    print(f"Instances: {min(r['gpus'] for r in rows)}–{max(r['gpus'] for r in rows)} GPUs, "
          f"{min(r['pods'] for r in rows)}–{max(r['pods'] for r in rows)} arrivals "
          f"(median {statistics.median(r['pods'] for r in rows):.0f}); CP-SAT median "
          f"{statistics.median(r['exact_s'] for r in rows) * 1e3:.0f} ms (max {max(r['exact_s'] for r in rows) * 1e3:,.0f} ms), "
          f"up to {max(r['variables'] for r in rows):,} variables.\n")


def print_where(rows: list[dict[str, Any]]) -> None:
    """Free slices at 100 % arrived, on empty and on partly used GPUs (medians over seeds)."""
    table = []
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy]
        table.append([policy, *(f"{statistics.median(r[k] for r in mine):.0f}"
                                for k in ("free", "on_empty", "on_partial", "failed"))])
    _markdown_table(f"Where the free slices are at 100 % arrived (medians of {len(rows) // len(POLICIES)} seeds)",
                    ["policy", "free slices", "on empty GPUs", "on partly used GPUs", "pods failed"],
                    {1, 2, 3, 4}, table)


def print_speed(results: list[dict[str, Any]]) -> None:
    """Per-pod medians and the naive scan's time over each policy's."""
    rows = []
    for result in results:
        per = result["per_pod_s"]
        naive = per["naive first-fit"]
        rows += [[f"{result['pods']:,}", name, f"{s * 1e6:,.0f}", f"{naive / s:.1f}×"] for name, s in per.items()]
    _markdown_table(
        f"Per-pod MIG placement, seed 42's arrival order (medians of {results[0]['rounds']} rounds)",
        ["pods (from the first)", "placer", "µs per pod", "naive scan / this"], {0, 2, 3}, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--small-seeds", default="1-30")
    parser.add_argument("--small-ratio", type=float, default=2.0)
    parser.add_argument("--exact-limit", type=float, default=60.0, help="CP-SAT seconds per small instance")
    parser.add_argument("--speed-pods", default="2000,0", help="prefixes of the order timed (0: all of it)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("trace", "small", "speed", "where"))
    parser.add_argument("--pods", choices=VARIANTS, default="all", help="which trace pods become MIG pods")
    parser.add_argument("--slices-only", action="store_true", help="pods ask for no CPU or memory")
    parser.add_argument("--json", type=Path, help="write every figure here (and read the parts not run)")
    args = parser.parse_args()
    snapshot, pods = load(args.pods, args.slices_only)
    out: dict[str, Any] = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    if args.only in (None, "trace"):
        out["trace"] = []
        for seed in parse_seeds(args.seeds):
            for policy in POLICIES:
                run = replay(snapshot, pods, policy, seed)
                out["trace"].append(run)
                print(f"{policy} seed {seed}: {run['curve']['100']:.2f} % at 100 % ({run['seconds']:.1f} s)",
                      file=sys.stderr)
    if args.only in (None, "small"):
        out["small"] = small_gaps(snapshot, pods, parse_seeds(args.small_seeds), args.small_ratio, args.exact_limit)
    if args.only in (None, "where"):
        out["where"] = [row for seed in parse_seeds(args.seeds) for row in where_left(snapshot, pods, seed)]
    if args.only in (None, "speed"):
        out["speed"] = [speed(snapshot, pods, int(n), args.rounds) for n in args.speed_pods.split(",")]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"MIG cluster: {len(snapshot.nodes)} nodes, {capacity_slices(snapshot):,} slices; "
          f"{len(pods):,} MIG pods in the trace.\n")
    if out.get("trace"):
        print_trace(out["trace"])
    if out.get("small"):
        print_small(out["small"])
    if out.get("where"):
        print_where(out["where"])
    if out.get("speed"):
        print_speed(out["speed"])


if __name__ == "__main__":
    main()
