"""Issue #32, static filters: 1,000 pods on 10,000 nodes with required node affinity, against
the same batch without it, in one run (``placer.place``, the snapshot decoded once).

Each pod's affinity: two ORed terms, one of ``In`` (two zones) ANDed with ``Gt`` (a
generation label), one of ``NotIn`` (its rack). ``--kinds K`` gives the batch K distinct
affinities (pods of one Deployment share theirs); ``--kinds 0``, one per pod (the worst
case: every pod its own eligibility class). Prints the best of ``--rounds`` calls of each
batch and their ratio.

Run: ``python bench/bench_kube_filters.py --kinds 0 20 --rounds 5``.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import placer

NODES = 10_000
PODS = 1_000


def snapshot() -> placer.ClusterSnapshot:
    nodes = [{"name": f"n{i}", "type": "t", "labels": {"zone": f"z{i % 20}", "rack": f"r{i % 400}", "gen": str(i % 7)}}
             for i in range(NODES)]
    return placer.load_snapshot({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodeTypes": {"t": {"gpus": 8, "gpuModel": "A100", "cpuMilli": 64000, "memoryMiB": 512000}},
        "nodes": nodes,
    })


def affinity(k: int) -> dict[str, Any]:
    terms = [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": [f"z{k % 20}", f"z{(k + 1) % 20}"]},
                              {"key": "gen", "operator": "Gt", "values": [str(k % 5)]}]},
        {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": [f"r{k % 400}"]}]},
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def request(kinds: int | None) -> placer.PlacementRequest:
    """The batch; ``kinds`` None: without affinity, 0: one affinity per pod."""
    pods = []
    for j in range(PODS):
        pod: dict[str, Any] = {"name": f"p{j}", "gpus": 1 + j % 4, "cpuMilli": 1000}
        if kinds is not None:
            pod["affinity"] = affinity(j % kinds if kinds else j)
        pods.append(pod)
    return placer.load_request({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods})


def best_of(snap: placer.ClusterSnapshot, req: placer.PlacementRequest, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        placer.place(snap, req)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", type=int, nargs="+", default=[0, 20])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    snap = snapshot()
    plain = best_of(snap, request(None), args.rounds)
    print(f"without affinity: {plain * 1000:.0f} ms")
    for kinds in args.kinds:
        took = best_of(snap, request(kinds), args.rounds)
        label = "one per pod" if kinds == 0 else f"{kinds} kinds"
        print(f"node affinity, {label}: {took * 1000:.0f} ms, {took / plain:.1f}x")


if __name__ == "__main__":
    main()
