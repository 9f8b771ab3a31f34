"""Seeded synthetic clusters and pod batches for the benchmarks."""
from __future__ import annotations

import random

from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest, RunningPod
from placer.model.topology import GpuTopology
from placer.model import replace
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


A100_DGX1_TOPOLOGY = replace(A100, gpu_topology=dgx1_volta())


def topology_cluster(n_nodes: int, seed: int = 1) -> ClusterSnapshot:
    """:func:`cluster` with the DGX-1 V100 link matrix as the node type's ``gpu_topology``.

    Everything else (type fields, held GPUs, CPU) is the same as ``cluster(n_nodes, seed)``.
    """
    return cluster(n_nodes, seed, hardware=A100_DGX1_TOPOLOGY)


# --- gangs over topology levels (issue #4) -------------------------------------------------

GANG_LEVELS = ("block", "rack", "nvlDomain")
H100 = NodeType(gpus=8, gpu_model="H100-SXM5-80GB", gpu_memory_mib=81559, cpu_milli=224000,
                memory_mib=2_000_000, max_pods=110)


def _topology_of(i: int, sizes: tuple[int, ...], levels: tuple[str, ...]) -> dict[str, str]:
    """Domains of node ``i`` when the outermost level groups ``sizes[0]`` nodes, the next
    ``sizes[1]`` nodes inside it, and so on (index order; the last group may be short)."""
    out = {}
    rest = i
    for level, size in zip(levels, sizes):
        out[level] = f"{level[0]}{rest // size}"
        rest %= size
    return out


def gang_cluster(n_nodes: int, sizes: tuple[int, ...] = (1000, 40, 8), busy: float = 0.0,
                 seed: int = 11, shared: float = 0.0, hardware: NodeType = A100) -> ClusterSnapshot:
    """``n_nodes`` 8-GPU nodes in nested topology domains (:data:`GANG_LEVELS`).

    ``sizes`` are the nodes per block, per rack and per NVLink domain (10,000 nodes with the
    default: 10 blocks × 25 racks × 5 NVLink domains × 8 nodes). Every GPU is held with
    probability ``busy`` (seeded, independently, so the held GPUs are scattered over the
    indices): held whole by one running pod per node (16 cores and 100 GB per GPU), or,
    with probability ``shared`` among the held ones, a 250–750 milli share held by a
    pod of its own. ``busy=0``: every node is free.
    """
    rng = random.Random(seed)
    nodes = []
    for i in range(n_nodes):
        whole, pods = [], []
        for g in range(hardware.gpus):
            if rng.random() >= busy:
                continue
            if shared and rng.random() < shared:
                milli = rng.choice((250, 500, 750))
                pods.append(RunningPod(name=f"share-{i}-{g}", gpu_shares={g: milli}, cpu_milli=4000,
                                       memory_mib=16_000))
            else:
                whole.append(g)
        if whole:
            pods.append(RunningPod(name=f"run-{i}", gpus=tuple(whole), cpu_milli=len(whole) * 16000,
                                   memory_mib=len(whole) * 100_000))
        nodes.append(Node(name=f"node-{i:06d}", hardware=hardware, type="gpu8", pods=tuple(pods),
                          topology=_topology_of(i, sizes, GANG_LEVELS)))
    return ClusterSnapshot(nodes=tuple(nodes), node_types={"gpu8": hardware}, topology_levels=GANG_LEVELS)


def gang_pods(count: int, gpus: int = 8, prefix: str = "w", gpu_milli: int = 1000,
              cpu_per_gpu: int = 8000) -> list[PodRequest]:
    """``count`` identical pods of ``gpus`` GPUs (8 cores and 32 GB per GPU; CPU only: 8 cores)."""
    cpu = cpu_per_gpu * max(gpus, 1)
    return [PodRequest(name=f"{prefix}-{j}", gpus=gpus, gpu_milli=gpu_milli, cpu_milli=cpu,
                       memory_mib=32000 * max(gpus, 1)) for j in range(count)]


def mixed_gang_pods(workers: int = 24, worker_gpus: int = 4, shared: int = 0,
                    shared_milli: int = 500) -> list[PodRequest]:
    """A CPU-only launcher, ``workers`` whole-GPU workers and ``shared`` GPU-share pods."""
    pods = [PodRequest(name="launcher", cpu_milli=8000, memory_mib=16384)]
    pods += [PodRequest(name=f"worker-{j}", gpus=worker_gpus, gpu_memory_mib=40000, cpu_milli=32000,
                        memory_mib=65536) for j in range(workers)]
    pods += [PodRequest(name=f"share-{j}", gpus=1, gpu_milli=shared_milli, gpu_memory_mib=20000,
                        cpu_milli=4000, memory_mib=8192) for j in range(shared)]
    return pods


def gang_instance(seed: int) -> tuple[ClusterSnapshot, list[PodRequest], dict]:
    """A small random gang problem: 40–200 nodes, 2 or 3 levels, random occupancy and shape.

    Returns the snapshot, the gang's pods and the gang's fields (``mode``, ``level``,
    ``slices`` as ``[(level, size)]``, and ``kind``, a label of the gang's shape).
    """
    rng = random.Random(f"gang-{seed}")
    n = rng.randint(40, 200)
    three = rng.random() < 0.6
    nvl = rng.choice((2, 4, 8))
    rack = nvl * rng.choice((2, 3, 4)) if three else rng.choice((4, 8, 10))
    block = rack * rng.choice((2, 3, 5))
    levels = GANG_LEVELS if three else GANG_LEVELS[:2]
    sizes = (block, rack, nvl) if three else (block, rack)
    busy = rng.uniform(0.1, 0.6)
    share_frac = rng.choice((0.0, 0.2, 0.4))
    two_models = rng.random() < 0.25
    nodes = []
    for i in range(n):
        hw = H100 if two_models and (i // rack) % 2 else A100
        whole, pods = [], []
        for g in range(8):
            if rng.random() >= busy:
                continue
            if rng.random() < share_frac:
                pods.append(RunningPod(name=f"share-{i}-{g}", gpu_shares={g: rng.choice((250, 500, 750))},
                                       cpu_milli=4000, memory_mib=16_000))
            else:
                whole.append(g)
        if whole:
            pods.append(RunningPod(name=f"run-{i}", gpus=tuple(whole),
                                   cpu_milli=len(whole) * rng.choice((8000, 16000, 24000)),
                                   memory_mib=len(whole) * 100_000))
        nodes.append(Node(name=f"n{i:04d}", hardware=hw, type="h100" if hw is H100 else "a100",
                          pods=tuple(pods), topology=_topology_of(i, sizes, levels)))
    types = {"a100": A100, "h100": H100} if two_models else {"a100": A100}
    snapshot = ClusterSnapshot(nodes=tuple(nodes), node_types=types, topology_levels=levels)

    all_levels = levels + ("node",)
    if rng.random() < 0.5:
        mode, level = "required", rng.choice(levels[:2])
    else:
        mode, level = "preferred", rng.choice(all_levels[1:-1])
    # GPUs wholly free per node, summed per domain of the gang's level (required) or over
    # the cluster (preferred): the gang's size is drawn against that, so that most
    # instances fit and a few (drawn up to 5 % over it) may not.
    depth = levels.index(level) + 1 if mode == "required" else 0
    per_domain: dict[str, list[int]] = {}
    for node in nodes:
        held = {g for p in node.pods for g in (*p.gpus, *p.gpu_shares)}
        key = "/".join(node.topology[lv] for lv in levels[:depth])
        per_domain.setdefault(key, []).append(8 - len(held))

    def room(g: int) -> int:  # pods of g whole GPUs the best domain holds (GPUs only)
        return max(sum(f // g for f in frees) for frees in per_domain.values())

    kind = rng.choice(("whole", "whole", "sliced", "mixed", "mixed-shared", "shared"))
    slices: list[tuple[str, int]] = []
    if kind in ("whole", "sliced"):
        g = rng.choice((1, 2, 4, 8))
        count = max(2, int(room(g) * rng.uniform(0.1, 1.05)))
        if kind == "sliced":
            inner = [lv for lv in all_levels[all_levels.index(level):] if lv != "node" or g <= 4]
            at = rng.choice(inner)
            size = rng.choice([s for s in (2, 4) if at != "node" or s * g <= 8])
            count = max(size, count - count % size)
            slices = [(at, size)]
        pods = gang_pods(count, g)
    elif kind == "shared":
        pods = gang_pods(rng.randint(4, 40), 1, gpu_milli=rng.choice((250, 500)), cpu_per_gpu=2000)
    else:
        workers = max(2, int(room(4) * rng.uniform(0.1, 1.05)))
        pods = mixed_gang_pods(workers, 4, rng.randint(2, 12) if kind == "mixed-shared" else 0,
                               rng.choice((250, 500)))
    return snapshot, pods, {"mode": mode, "level": level, "slices": slices, "kind": kind}
