"""Issue #15, item 5: how many more pods of 1, 2, 4 and 8 GPUs fit on the openb replay at
100 % arrived after k moves of shared (fractional-GPU) pods.

For each policy and seed: the FGD study's protocol (:func:`placer.replay.simulate.arrival_order`
of the bundled default trace: shuffle, inflate) replayed by :meth:`placer.Cluster.replay`
and stopped at 100 % arrived (the last pod whose arrival keeps the GPU request at most
the cluster's capacity); then every running shared pod is marked ``movable``. For each
shape (g GPUs, the median CPU and memory of the trace's g-GPU pods), pods of the shape are
placed one at a time with :meth:`placer.Cluster.defrag` — the fewest moves for each — and
the moves made real (:meth:`Cluster.move`, :meth:`Cluster.bind`) until a pod needs more
moves than are left of :data:`MAX_MOVES`. As each pod takes the fewest moves, the pods
placed by the time the moves made reach k are what a budget of k moves places: one run
gives every k of :data:`BUDGETS`.

Run: ``python bench/bench_defrag.py --seeds 42-44 --json out.json`` (a few minutes on
the 2-core machine). Printed: per policy and shape, the mean over seeds of the pods that
fit with no move and the extra pods after 1, 5, 20 moves; the median time of one plan,
and the share of plans proven fewest (``optimal``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Sequence

import placer
from placer.adapters import openb
from placer.workload.fragmentation import target_workload
from placer.model import ClusterSnapshot, PlacementRequest, PodRequest, replace
from placer.replay.simulate import arrival_order, gpu_capacity_milli, parse_seeds, pod_gpu_milli

SHAPES = (1, 2, 4, 8)
BUDGETS = (0, 1, 5, 20)
MAX_MOVES = BUDGETS[-1]
POLICIES = ("best-fit", "fgd")


def replay_to(
    snapshot: ClusterSnapshot, pods: Sequence[PodRequest], policy: str, seed: int, arrived_pct: int = 100
) -> ClusterSnapshot:
    """The cluster at ``arrived_pct`` % arrived under ``policy`` and ``seed``, shared pods
    movable."""
    capacity = gpu_capacity_milli(snapshot) * arrived_pct // 100
    order = arrival_order(pods, seed, capacity)
    arrived, cut = 0, len(order)
    for i, pod in enumerate(order):
        if arrived + pod_gpu_milli(pod) > capacity:
            cut = i
            break
        arrived += pod_gpu_milli(pod)
    cluster = placer.Cluster(snapshot)
    workload = target_workload(pods)
    cluster.fragmentation(workload)
    cluster.replay(order[:cut], policy, seed, workload)
    full = cluster.to_snapshot()
    nodes = tuple(
        replace(node, pods=tuple(replace(p, movable=True) if p.gpu_shares else p for p in node.pods))
        for node in full.nodes
    )
    return replace(full, nodes=nodes)


def shape_pod(pods: Sequence[PodRequest], gpus: int, name: str) -> PodRequest:
    """A pod of ``gpus`` whole GPUs with the median CPU and memory of the trace's such pods."""
    alike = [p for p in pods if p.gpus == gpus and p.gpu_milli == 1000]
    return PodRequest(
        name=name, gpus=gpus, cpu_milli=int(statistics.median(p.cpu_milli for p in alike)),
        memory_mib=int(statistics.median(p.memory_mib for p in alike)),
    )


def fill(snapshot: ClusterSnapshot, template: PodRequest, policy: str, seed: int) -> dict[str, Any]:
    """Place copies of ``template`` with moves until one needs more than are left."""
    cluster = placer.Cluster(snapshot)
    moves_after: list[int] = []  # moves made once each pod is placed
    plan_seconds: list[float] = []
    statuses: list[str] = []
    used = 0
    while True:
        pod = replace(template, name=f"{template.name}-{len(moves_after)}")
        started = time.perf_counter()
        result = cluster.defrag(PlacementRequest(pods=(pod,), policy=policy, seed=seed), max_moves=MAX_MOVES - used)
        elapsed = time.perf_counter() - started
        if result.rooms:
            plan_seconds.append(elapsed)
            statuses.append(result.rooms[0].status)
        if not result.assignments:
            break
        cluster.move(result.moves)
        cluster.bind(result)
        used += len(result.moves)
        moves_after.append(used)
    return {
        "fit": {k: sum(1 for m in moves_after if m <= k) for k in BUDGETS},
        "plan_seconds": plan_seconds,
        "statuses": statuses,
        "moves": used,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="42-44")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--arrived", type=int, default=100, help="stop the replay at this arrived %% (default 100)")
    parser.add_argument("--cpu", type=int, help="the pods' CPU in milli (default: the trace's median per shape)")
    parser.add_argument("--json", help="write every run here")
    args = parser.parse_args(argv)
    snapshot, pods = openb.load_default()
    runs = []
    for policy in args.policies.split(","):
        for seed in parse_seeds(args.seeds):
            full = replay_to(snapshot, pods, policy, seed, args.arrived)
            for gpus in SHAPES:
                template = shape_pod(pods, gpus, f"extra-{gpus}gpu")
                if args.cpu is not None:
                    template = replace(template, cpu_milli=args.cpu, memory_mib=0)
                run = fill(full, template, policy, seed)
                run.update(policy=policy, seed=seed, gpus=gpus, arrived=args.arrived, cpu=template.cpu_milli)
                runs.append(run)
                print(policy, seed, gpus, run["fit"], f"{statistics.median(run['plan_seconds'] or [0]) * 1e3:.1f} ms",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
