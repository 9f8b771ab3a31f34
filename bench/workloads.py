"""Seeded synthetic clusters and pod batches for the benchmarks."""
from __future__ import annotations

import random

from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest, RunningPod

A100 = NodeType(gpus=8, gpu_model="A100-SXM4-80GB", gpu_memory_mib=81920, cpu_milli=256000,
                memory_mib=2_000_000, max_pods=110)
SHAPES = {"1gpu": (1, 1000), "2gpu": (2, 1000), "4gpu": (4, 1000), "8gpu": (8, 1000), "shared": (1, 350)}


def cluster(n_nodes: int, seed: int = 1, racks: int = 0) -> ClusterSnapshot:
    """``n_nodes`` 8-GPU nodes, each with 0-7 GPUs and some CPU held by one running pod."""
    rng = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        held = rng.randint(0, 7)
        pods = (RunningPod(name=f"run-{i}", gpus=tuple(range(held)), cpu_milli=held * 16000,
                           memory_mib=held * 100_000),) if held else ()
        topology = {"rack": f"r{i // 32}"} if racks else {}
        nodes.append(Node(name=f"node-{i:06d}", hardware=A100, type="a100", pods=pods, topology=topology))
    return ClusterSnapshot(nodes=tuple(nodes), node_types={"a100": A100},
                           topology_levels=("rack",) if racks else ())


def request(shape: str, count: int, policy: str) -> PlacementRequest:
    gpus, milli = SHAPES[shape]
    pods = tuple(
        PodRequest(name=f"p-{j}", gpus=gpus, gpu_milli=milli, cpu_milli=8000 * gpus, memory_mib=32000)
        for j in range(count)
    )
    return PlacementRequest(pods=pods, policy=policy)
