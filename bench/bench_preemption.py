"""Issue #15: preemption at scale.

1. One 8-GPU pod on a full cluster of 10,000 8-GPU nodes: placer's greedy (kube's rules on
   every node, visited by the per-node lower bound of :func:`placer.preemption.victims.lowest_levels`)
   against a plain Python kube-style search over dicts, in the same process, alternating;
   both must pick the same node and victims.
2. A 64-GPU gang (8 pods × 8 GPUs) required in one rack of a 1,000-node cluster: the
   greedy's victims (kube's reprieve per rack) against CP-SAT's (the lexicographic
   objective), each checked by ``placer.check_placement``.

Run: ``python bench/bench_preemption.py [--nodes 10000] [--repeat 5] [--gang-nodes 1000]``.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

import placer
from placer.preemption import victims as preemption
from placer.preemption import exact as preemption_exact

PRIORITIES = (0, 10, 100, 1000)


def full_cluster(n_nodes: int, seed: int = 7, rack_size: int = 16) -> dict:
    """Every GPU held: 1-4 pods per node of mixed priorities and start times."""
    rng = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        pods, left, k = [], list(range(8)), 0
        while left:
            take = min(len(left), rng.choice((1, 2, 4, 8)))
            held, left = left[:take], left[take:]
            pods.append({"name": f"ns/p{i}-{k}", "gpus": held, "cpuMilli": 4000 * take,
                         "priority": rng.choice(PRIORITIES), "startTime": rng.randrange(10**6)})
            k += 1
        nodes.append({"name": f"n{i:05d}", "gpus": 8, "cpuMilli": 128000, "maxPods": 32,
                      "topology": {"rack": f"r{i // rack_size:04d}"}, "pods": pods})
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": nodes}


def kube_style(snapshot: dict, gpus: int, cpu: int, priority: int) -> tuple[str, list[str]] | None:
    """kube's DefaultPreemption on plain dicts: per node remove every lower-priority pod,
    reprieve most important first, rank nodes by kube's keys (no PDBs here)."""
    best = None
    for node in snapshot["nodes"]:
        pods = node["pods"]
        lower = [p for p in pods if p["priority"] < priority]
        stay = [p for p in pods if p["priority"] >= priority]
        free_gpus = node["gpus"] - sum(len(p["gpus"]) for p in stay)
        free_cpu = node["cpuMilli"] - sum(p["cpuMilli"] for p in stay)
        slots = node["maxPods"] - len(stay)
        if free_gpus < gpus or free_cpu < cpu or slots < 1:
            continue
        victims = []
        for p in sorted(lower, key=lambda p: (-p["priority"], p["startTime"])):
            if free_gpus - len(p["gpus"]) >= gpus and free_cpu - p["cpuMilli"] >= cpu and slots - 1 >= 1:
                free_gpus -= len(p["gpus"])
                free_cpu -= p["cpuMilli"]
                slots -= 1
            else:
                victims.append(p)
        top = max(p["priority"] for p in victims)
        key = (0, top, sum(p["priority"] + 2**31 for p in victims), len(victims),
               -min(p["startTime"] for p in victims if p["priority"] == top))
        if best is None or key < best[0]:
            best = (key, node["name"], [p["name"] for p in victims])
    return None if best is None else (best[1], best[2])


def single_pod(n_nodes: int, repeat: int) -> None:
    snapshot = full_cluster(n_nodes)
    cluster = placer.Cluster(snapshot)
    pod = placer.PodRequest(name="x", gpus=8, cpu_milli=32000, priority=500)
    ours, cold, theirs = [], [], []
    for _ in range(repeat):
        cluster.session.views.clear()  # as after a bind: the running pods' columns are rebuilt
        start = time.perf_counter()
        preemption.choose(cluster.session, cluster.snapshot, pod)
        cold.append(time.perf_counter() - start)
        start = time.perf_counter()
        best, _ = preemption.choose(cluster.session, cluster.snapshot, pod)
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        expected = kube_style(snapshot, 8, 32000, 500)
        theirs.append(time.perf_counter() - start)
    got = (cluster.node_names[best.node], [p.name for p in best.victim_pods])
    assert expected is not None and got[0] == expected[0] and sorted(got[1]) == sorted(expected[1]), (got, expected)
    a, c, b = statistics.median(ours), statistics.median(cold), statistics.median(theirs)
    print(f"single 8-GPU pod, {n_nodes} full nodes ({sum(len(n['pods']) for n in snapshot['nodes'])} pods): "
          f"placer greedy median {a * 1000:.1f} ms ({c * 1000:.1f} ms with the running pods' columns rebuilt), "
          f"plain Python kube-style {b * 1000:.1f} ms; ratios {b / a:.1f}x and {b / c:.1f}x; "
          f"node {got[0]}, victims {got[1]}")


def gang(n_nodes: int) -> None:
    snapshot = full_cluster(n_nodes)
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "greedy",
               "pods": [{"name": "train", "replicas": 8, "gang": "train", "gpus": 8, "cpuMilli": 32000,
                         "priority": 500}],
               "gangs": {"train": {"topology": {"mode": "required", "level": "rack"}}}}
    for mode in ("greedy", "exact"):
        start = time.perf_counter()
        result = placer.preempt(snapshot, {**request, "preemption": mode})
        seconds = time.perf_counter() - start
        assert placer.check_placement(snapshot, request, result) == []
        pre = result.preemptions[0]
        cluster = placer.Cluster(snapshot)
        running = list(cluster.session.running())
        evictable = [u for u in preemption.units(running) if u.priority < 500]
        ranks = preemption.Ranks.of(cluster.snapshot, running, evictable)
        victims = [u for u in evictable if u.names[0] in set(pre.victims)]
        print(f"64-GPU gang, rack required, {n_nodes} nodes, {mode}: {len(pre.victims)} victims, "
              f"key {ranks.key(victims)}, rack {result.gangs[0].domains['rack'][0]}, {pre.solver}/{pre.status}, "
              f"{seconds:.2f} s (whole call)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gang-nodes", type=int, default=1_000)
    args = parser.parse_args()
    np.random.seed(0)
    single_pod(args.nodes, args.repeat)
    gang(args.gang_nodes)


if __name__ == "__main__":
    main()
