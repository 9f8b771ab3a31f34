"""Issue #32, kube scores: one request of pods placed under the ``kube`` policies beside
``best-fit``, wall clock of ``Cluster.schedule`` in one process.

The cluster: ``--nodes`` nodes of 8 GPUs, 64 cores, 256 GiB, in 10 zones, every 7th tainted
``spot:PreferNoSchedule``, each running one pod; the request: ``--pods`` one-GPU pods with
labels, and with ``--rules`` a preferred node affinity (zone), a preferred pod anti-affinity
(zone) and a ``ScheduleAnyway`` spread over hostnames, so that every plugin scores.

Run: ``python bench/bench_kube_scores.py --nodes 10000 --pods 1000 --rounds 3 [--rules]``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import msgspec

from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest, RunningPod, Taint
from placer.model.affinity import Affinity, TopologySpreadConstraint
from placer.placement.cluster import Cluster

HOST = "kubernetes.io/hostname"
RULES = {
    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1", "z2"]}]}}]},
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}}]},
}
SPREAD = {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway",
          "labelSelector": {"matchLabels": {"app": "web"}}}


def cluster(n: int) -> ClusterSnapshot:
    hardware = NodeType(gpus=8, gpu_model="G", cpu_milli=64000, memory_mib=256000)
    return ClusterSnapshot(nodes=tuple(
        Node(name=f"n{i}", hardware=hardware, labels={"zone": f"z{i % 10}", HOST: f"n{i}"},
             taints=(Taint(key="spot", effect="PreferNoSchedule"),) if i % 7 == 0 else (),
             pods=(RunningPod(name=f"r{i}", cpu_milli=1000 * (i % 5), memory_mib=4000, labels={"app": "old"}),))
        for i in range(n)
    ))


def request(n: int, policy: str, rules: bool) -> PlacementRequest:
    affinity = msgspec.convert(RULES, Affinity) if rules else None
    spread = (msgspec.convert(SPREAD, TopologySpreadConstraint),) if rules else ()
    pods = tuple(PodRequest(f"p{k}", gpus=1, cpu_milli=2000, memory_mib=8000, labels={"app": "web"},
                            affinity=affinity, topology_spread_constraints=spread) for k in range(n))
    return PlacementRequest(pods=pods, policy=policy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rules", action="store_true")
    args = parser.parse_args()
    snapshot = cluster(args.nodes)
    for policy in ("best-fit", "kube", "kube-most-allocated", "kube-requested-to-capacity-ratio"):
        the_request = request(args.pods, policy, args.rules)
        times = []
        for _ in range(args.rounds):
            c = Cluster(snapshot)
            start = time.perf_counter()
            result = c.schedule(the_request)
            times.append(time.perf_counter() - start)
        per_pod = statistics.median(times) / args.pods * 1e3
        print(f"{policy}: {len(result.assignments)} placed, median {statistics.median(times):.2f} s, {per_pod:.2f} ms a pod")


if __name__ == "__main__":
    main()
