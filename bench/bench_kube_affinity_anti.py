"""Issue #32's figure: 1,000 pods with required node affinity and one required anti-affinity
rule on 10,000 nodes against the same batch without them, through :meth:`placer.Cluster.place`.

The nodes are :func:`bench_kube_interpod.snapshot`'s (8 GPUs each, ten zones, half of them
``pool: gpu``). The batch: 1,000 one-GPU pods labelled ``app: web``, two variants:

* ``pool``: one entry of 1,000 replicas, each with the required node affinity
  ``pool In [gpu]`` (half the nodes: the pool case) and the anti-affinity ``app: web`` by
  ``kubernetes.io/hostname`` (which every pod matches: one pod per node);
* ``pool10``: ten entries of 100 replicas, ten distinct affinities (``pool In [gpu]`` and
  ``zone NotIn [z<k>]``), the same anti-affinity;

each against its batch with neither rule (``plain``, ``plain10``). Two ways, alternated in
one process: *cold*, a fresh :class:`placer.Cluster` per call (its construction is not
timed; the per-cluster caches the rules fill are), and *warm*, one held Cluster per batch
called again and again (as a user's loop or ``placer serve``). Prints medians, the ratios
to the plain batch and the peak memory (tracemalloc) of one cold call; ``--profile pool``
prints cProfile's top functions of that batch, cold and warm.

Run: ``PYTHONPATH=src:bench python bench/bench_kube_affinity_anti.py --repeat 15``.
"""
from __future__ import annotations

import cProfile
import os
import pstats
import statistics
import sys
import time
import tracemalloc
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))

import placer  # noqa: E402
from bench_kube_interpod import ANTI, arguments, snapshot  # noqa: E402

BATCHES = ("plain", "pool", "plain10", "pool10")


def affinity(zone_out: int | None) -> dict[str, Any]:
    """``pool In [gpu]`` (and ``zone NotIn [z<zone_out>]``) required, and :data:`ANTI`."""
    expressions: list[dict[str, Any]] = [{"key": "pool", "operator": "In", "values": ["gpu"]}]
    if zone_out is not None:
        expressions.append({"key": "zone", "operator": "NotIn", "values": [f"z{zone_out}"]})
    node = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    return {"nodeAffinity": node, **ANTI}


def batch(n_pods: int, name: str) -> list[placer.PodRequest]:
    """The batch ``name`` of :data:`BATCHES`: ``n_pods`` pods in one entry or ten."""
    kinds = 10 if name.endswith("10") else 1
    pods = []
    for k in range(kinds):
        pod: dict[str, Any] = {"name": f"web{k}", "replicas": n_pods // kinds, "gpus": 1, "cpuMilli": 4000,
                               "memoryMiB": 16384, "labels": {"app": "web"}}
        if name.startswith("pool"):
            pod["affinity"] = affinity(k if kinds > 1 else None)
        pods.append(pod)
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods}
    return list(placer.load_request(doc).pods)


def timed_place(cluster: placer.Cluster, pods: list[placer.PodRequest], policy: str) -> tuple[float, Any]:
    started = time.perf_counter()
    result = cluster.place(pods, policy=policy)
    return time.perf_counter() - started, result


def check(result: Any, name: str, n_pods: int) -> None:
    nodes = [a.node for a in result.assignments]
    assert len(nodes) == n_pods, f"{name}: {len(nodes)} placed"
    if name.startswith("pool"):
        assert len(set(nodes)) == n_pods, "anti-affinity: two pods on one node"


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=BATCHES, help="print cProfile's top functions of this batch")
    args = parser.parse_args()
    snap = snapshot(args.nodes)
    pods = {name: batch(args.pods, name) for name in BATCHES}
    held = {name: placer.Cluster(snap) for name in BATCHES}
    cold: dict[str, list[float]] = {name: [] for name in BATCHES}
    warm: dict[str, list[float]] = {name: [] for name in BATCHES}
    for name in BATCHES:  # the held clusters' first call fills their caches
        timed_place(held[name], pods[name], args.policy)
    for _ in range(args.repeat):
        for name in BATCHES:  # alternated, so that drift hits every batch alike
            took, result = timed_place(placer.Cluster(snap), pods[name], args.policy)
            check(result, name, args.pods)
            cold[name].append(took)
            took, result = timed_place(held[name], pods[name], args.policy)
            check(result, name, args.pods)
            warm[name].append(took)
    cold_median = {name: statistics.median(t) for name, t in cold.items()}
    warm_median = {name: statistics.median(t) for name, t in warm.items()}
    for name in BATCHES:
        fresh = placer.Cluster(snap)
        tracemalloc.start()
        timed_place(fresh, pods[name], args.policy)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        plain = "plain10" if name.endswith("10") else "plain"
        print(f"{name:8s} cold {cold_median[name] * 1e3:7.2f} ms x{cold_median[name] / cold_median[plain]:.2f}   "
              f"warm {warm_median[name] * 1e3:7.2f} ms x{warm_median[name] / warm_median[plain]:.2f}   "
              f"peak {peak / 2**20:.1f} MiB")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.profile:
        for label, make in (("cold", lambda: placer.Cluster(snap)), ("warm", lambda: held[args.profile])):
            clusters = [make() for _ in range(args.repeat)]
            profile = cProfile.Profile()
            profile.enable()
            for cluster in clusters:
                cluster.place(pods[args.profile], policy=args.policy)
            profile.disable()
            print(f"--- {args.profile}, {label}, {args.repeat} calls")
            pstats.Stats(profile).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
