"""Issue #32: kube's NodePorts filter, a pod with host ports placed as a step of its own.

A DaemonSet-like request: ``--pods`` replicas of one CPU pod with ``hostPort: 9100`` on
``--nodes`` nodes, each running a pod that holds one of 50 other host ports (so every node
has port holders, none of 9100), against the same request without ``hostPorts`` (one
kernel run). Each repetition times :meth:`placer.Cluster.schedule` on a fresh cluster (its
packing is not timed); prints the medians and the ratio.

Run: ``python bench/bench_kube_ports.py --repeat 5``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import placer
from placer.model import ClusterSnapshot, PlacementRequest


def snapshot(n_nodes: int) -> ClusterSnapshot:
    nodes = [{"name": f"n{i}", "cpuMilli": 64000, "memoryMiB": 262144,
              "pods": [{"name": f"r{i}", "cpuMilli": 100, "hostPorts": [{"hostPort": 8000 + i % 50}]}]}
             for i in range(n_nodes)]
    return ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": nodes})


def request(n_pods: int, ports: bool) -> PlacementRequest:
    entry = {"name": "agent", "replicas": n_pods, "cpuMilli": 100}
    if ports:
        entry["hostPorts"] = [{"hostPort": 9100}]
    return PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [entry]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    snap = snapshot(args.nodes)
    requests = {way: request(args.pods, way == "hostPorts") for way in ("plain", "hostPorts")}
    times: dict[str, list[float]] = {way: [] for way in requests}
    for _ in range(args.repeat):
        for way, req in requests.items():  # alternated, so load changes hit both ways alike
            cluster = placer.Cluster(snap)
            start = time.perf_counter()
            result = cluster.schedule(req)
            times[way].append(time.perf_counter() - start)
            assert len(result.assignments) == min(args.pods, args.nodes) or way == "plain"
    plain = statistics.median(times["plain"])
    for way, got in times.items():
        median = statistics.median(got)
        print(f"{way:10s} {median * 1000:9.1f} ms  x{median / plain:6.1f}")


if __name__ == "__main__":
    main()
