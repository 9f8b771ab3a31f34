"""Issue #32: the inter-pod rules in the kernel cost little beside the batch without them.

10,000 nodes (8 GPUs each, ten zones, half of them ``pool: gpu``), a batch of 1,000 one-GPU
pods placed in one kernel session call, three ways, in one process:

* ``plain``: no rule;
* ``selector``: ``nodeSelector: {pool: gpu}`` (the static part, node affinity's stand-in);
* ``anti``: the selector and one required anti-affinity rule (``app: web`` by
  ``kubernetes.io/hostname``, which every pod matches: one pod per node).

Each repetition times :meth:`placer.kernel.KernelSession.place` on a fresh session (the
session's packing is not timed; the rules' compilation and the per-cluster caches they fill
are: the selector's label match, the topology key's domains), and ``warm`` again on one
session per way whose pods are given back after each call (as a long-lived ``placer
serve`` session meets batch after batch). Prints the medians per way, the ratios to
``plain`` and the peak memory (tracemalloc) of one call.

Run: ``python bench/bench_kube_interpod.py --repeat 7``.
"""
from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from typing import Any

import numpy as np

from placer import policies
from placer.kernel import KernelSession
from placer.model import ClusterSnapshot, PlacementRequest

ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}


def snapshot(n_nodes: int) -> ClusterSnapshot:
    nodes = [{"name": f"n{i}", "type": "g8", "labels": {"zone": f"z{i % 10}", "kubernetes.io/hostname": f"n{i}",
                                                       "pool": "gpu" if i % 2 else "cpu"}}
             for i in range(n_nodes)]
    return ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodeTypes": {"g8": {"gpus": 8, "gpuModel": "A100", "gpuMemoryMiB": 81920, "cpuMilli": 96000,
                             "memoryMiB": 1 << 20}},
        "nodes": nodes,
    })


def batch(n_pods: int, way: str) -> list[Any]:
    pod: dict[str, Any] = {"name": "web", "replicas": n_pods, "gpus": 1, "cpuMilli": 4000, "memoryMiB": 16384,
                           "labels": {"app": "web"}}
    if way in ("selector", "anti"):
        pod["nodeSelector"] = {"pool": "gpu"}
    if way == "anti":
        pod["affinity"] = ANTI
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [pod]}
    return list(PlacementRequest.from_dict(doc).pods)


def place_once(snap: ClusterSnapshot, pods: list[Any], policy: str) -> tuple[float, list[int]]:
    session = KernelSession(snap)
    started = time.perf_counter()
    run = session.place(pods, policies.get(policy), np.zeros(1, dtype=np.uint64))
    return time.perf_counter() - started, run.nodes


def place_warm(session: KernelSession, pods: list[Any], policy: str) -> float:
    started = time.perf_counter()
    run = session.place(pods, policies.get(policy), np.zeros(1, dtype=np.uint64))
    took = time.perf_counter() - started
    session.give_back_all([(p, n, m) for p, n, m in zip(pods, run.nodes, run.masks) if n >= 0])
    return took


def arguments(description: str) -> argparse.ArgumentParser:
    """The options of the issue #32 batch benchmarks: ``--nodes``, ``--pods``, ``--repeat``, ``--policy``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--policy", default="best-fit")
    return parser


def main() -> None:
    args = arguments(__doc__.splitlines()[0]).parse_args()
    snap = snapshot(args.nodes)
    ways = ("plain", "selector", "anti")
    pods = {way: batch(args.pods, way) for way in ways}
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.repeat):
        for way in ways:  # alternating, so that drift hits every way alike
            took, nodes = place_once(snap, pods[way], args.policy)
            times[way].append(took)
            placed = [n for n in nodes if n >= 0]
            assert len(placed) == args.pods, f"{way}: {len(placed)} placed"
            if way == "anti":
                assert len(set(placed)) == len(placed), "anti-affinity: two pods on one node"
    medians = {way: statistics.median(t) for way, t in times.items()}
    sessions = {way: KernelSession(snap) for way in ways}
    warm: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.repeat + 1):
        for way in ways:
            warm[way].append(place_warm(sessions[way], pods[way], args.policy))
    warm_medians = {way: statistics.median(t[1:]) for way, t in warm.items()}  # the first fills the caches
    for way in ways:
        tracemalloc.start()
        place_once(snap, pods[way], args.policy)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{way:9s} median {medians[way] * 1e3:8.2f} ms  ({medians[way] / args.pods * 1e6:6.1f} us/pod)  "
              f"x{medians[way] / medians['plain']:.2f} of plain  peak {peak / 2**20:.1f} MiB;  warm "
              f"{warm_medians[way] * 1e3:7.2f} ms  x{warm_medians[way] / warm_medians['plain']:.2f}")
    print(f"anti / selector: x{medians['anti'] / medians['selector']:.2f}, "
          f"warm x{warm_medians['anti'] / warm_medians['selector']:.2f}")


if __name__ == "__main__":
    main()
