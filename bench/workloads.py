"""Seeded synthetic clusters and pod batches for the benchmarks."""
from __future__ import annotations

import dataclasses
import random

from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest, RunningPod
from placer.topology import GpuTopology
from topologies import dgx2_nvswitch, nvlink_bridged_pairs_16, pcie_tree_16, upstream_topology

A100 = NodeType(gpus=8, gpu_model="A100-SXM4-80GB", gpu_memory_mib=81920, cpu_milli=256000,
                memory_mib=2_000_000, max_pods=110)
SHAPES = {"1gpu": (1, 1000), "2gpu": (2, 1000), "4gpu": (4, 1000), "8gpu": (8, 1000), "shared": (1, 350)}


def cluster(n_nodes: int, seed: int = 1, racks: int = 0, hardware: NodeType = A100) -> ClusterSnapshot:
    """``n_nodes`` 8-GPU nodes, each with 0-7 GPUs and some CPU held by one running pod.

    ``hardware`` replaces the A100 type (same draws, so the same held GPUs and CPU).
    """
    A100 = hardware  # noqa: N806 - the default keeps the issue-#2 clusters unchanged
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


# --- GPU topologies inside a node (issue #3) ----------------------------------------------

def dgx1_volta() -> GpuTopology:
    """DGX-1 V100: 8 GPUs, hybrid cube-mesh NVLink (NV1/NV2) over a two-socket PCIe tree."""
    return upstream_topology("DGX1Volta")


GPU_TOPOLOGIES = {
    "dgx1-v100": dgx1_volta,
    "pcie-tree-16": pcie_tree_16,
    "bridged-pairs-16": nvlink_bridged_pairs_16,
    "dgx2-nvswitch": dgx2_nvswitch,
}


def free_gpus(n: int, kind: str, seed: int = 3) -> list[int]:
    """Free GPU indices of an ``n``-GPU node: ``"all"``, or ``"random"`` (a seeded 2/3 of them)."""
    if kind == "all":
        return list(range(n))
    rng = random.Random(f"{seed}-{n}")
    return sorted(rng.sample(range(n), round(n * 2 / 3)))


A100_DGX1_TOPOLOGY = dataclasses.replace(A100, gpu_topology=dgx1_volta())


def topology_cluster(n_nodes: int, seed: int = 1) -> ClusterSnapshot:
    """:func:`cluster` with the DGX-1 V100 link matrix as the node type's ``gpu_topology``.

    Everything else (type fields, held GPUs, CPU) is the same as ``cluster(n_nodes, seed)``.
    """
    return cluster(n_nodes, seed, hardware=A100_DGX1_TOPOLOGY)
