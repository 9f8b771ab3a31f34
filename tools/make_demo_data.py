"""Generate the bundled demo documents of ``placer demo``.

Writes ``src/placer/data/demo_snapshot.json`` and ``src/placer/data/demo_request.json``.
The output depends only on the seed, so running this again reproduces the bundled files
byte for byte (``tests/test_demo.py`` checks that).

Usage: ``python tools/make_demo_data.py [--seed N] [--out DIR]``
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

DEFAULT_SEED = 0
RACKS = ("rack-a", "rack-b", "rack-c", "rack-d")
NODES_PER_RACK = 8
GPUS = 8
GPU_MEMORY_MIB = 81920
NODE_TYPE = {
    "gpuModel": "A100-SXM4-80GB",
    "gpus": GPUS,
    "gpuMemoryMiB": GPU_MEMORY_MIB,
    "cpuMilli": 256000,
    "memoryMiB": 2000000,
    "maxPods": 110,
}
DATA_DIR = Path(__file__).resolve().parent.parent / "src" / "placer" / "data"
SNAPSHOT_FILE = "demo_snapshot.json"
REQUEST_FILE = "demo_request.json"


def build_snapshot(seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Return the demo ClusterSnapshot document.

    32 ``dgx-a100`` nodes (8 x A100-SXM4-80GB) in four racks of eight. In every rack four
    nodes still hold leftover workers of a failed job (4-6 whole GPUs each) and some of
    them also run shared inference pods; of the idle nodes, one is cordoned, one is
    tainted for maintenance and one has an unhealthy GPU.

    Parameters
    ----------
    seed : int
        Seed of the generator; the same seed gives the same document.
    """
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []
    busy: list[dict[str, Any]] = []
    idle: dict[str, list[dict[str, Any]]] = {}
    for r, rack in enumerate(RACKS):
        taken = set(rng.sample(range(NODES_PER_RACK), 4))
        idle[rack] = []
        for k in range(NODES_PER_RACK):
            node: dict[str, Any] = {
                "name": f"node-{r * NODES_PER_RACK + k + 1:02d}",
                "type": "dgx-a100",
                "topology": {"rack": rack},
                "labels": {"pool": "train", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            }
            nodes.append(node)
            (busy if k in taken else idle[rack]).append(node)

    for worker, node in enumerate(busy):
        held = rng.randint(4, 6)
        gpus = sorted(rng.sample(range(GPUS), held))
        node["pods"] = [
            {
                "name": f"team-old/failed-job-worker-{worker}",
                "gpus": gpus,
                "cpuMilli": held * 12000,
                "memoryMiB": held * 98304,
                "priority": 100,
            }
        ]

    shares = ((500, 40960), (250, 16384), (500, 40960), (250, 16384), (250, 20480))
    for i, (node, (milli, mib)) in enumerate(zip(rng.sample(busy, len(shares)), shares)):
        held = set(node["pods"][0]["gpus"])
        gpu = rng.choice([g for g in range(GPUS) if g not in held])
        node["pods"].append(
            {
                "name": f"team-infer/chat-serve-{i}",
                "gpuShares": {str(gpu): milli},
                "gpuMemoryMiB": {str(gpu): mib},
                "cpuMilli": 4000,
                "memoryMiB": 32768,
                "priority": 500,
            }
        )

    cordoned = rng.choice(idle["rack-b"])
    cordoned["unschedulable"] = True
    tainted = rng.choice(idle["rack-c"])
    tainted["taints"] = [{"key": "nvidia.com/gpu", "value": "maintenance", "effect": "NoSchedule"}]
    broken = rng.choice(idle["rack-d"])
    broken["unhealthyGpus"] = [rng.randrange(GPUS)]

    ordered = []
    for node in nodes:
        ordered.append({k: node[k] for k in (
            "name", "type", "topology", "labels", "taints", "unschedulable", "unhealthyGpus", "pods",
        ) if k in node})
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "topologyLevels": ["rack"],
        "nodeTypes": {"dgx-a100": dict(NODE_TYPE)},
        "nodes": ordered,
    }


def build_request() -> dict[str, Any]:
    """Return the demo PlacementRequest document (policy best-fit, seed 0).

    Whole-GPU pods of 1, 2, 4 and 8 GPUs, shared inference pods, a ``replicas`` pod, a
    pod whose nodeSelector no node matches, and an unconstrained gang of 2 x 4 GPUs.
    """
    def pod(name: str, gpus: int, cpu: int, mem: int, **extra: Any) -> dict[str, Any]:
        return {"name": name, "gpus": gpus, **extra, "cpuMilli": cpu, "memoryMiB": mem}

    pods = [
        pod("team-a/notebook-alice", 1, 8000, 65536),
        pod("team-a/notebook-bob", 1, 8000, 65536),
        pod("team-b/eval-harness", 2, 16000, 131072),
        pod("team-c/finetune", 2, 24000, 196608, replicas=4),
        pod("team-d/bench-full-node", 8, 96000, 1000000),
        pod("team-b/rl-actor", 4, 32000, 262144),
        pod("team-infer/chat-canary", 1, 4000, 32768, gpuMilli=500, gpuMemoryMiB=40960),
        pod("team-infer/embed-0", 1, 2000, 16384, gpuMilli=250, gpuMemoryMiB=16384),
        pod("team-infer/embed-1", 1, 2000, 16384, gpuMilli=250, gpuMemoryMiB=16384),
        pod("team-x/batch-infer", 1, 4000, 65536, nodeSelector={"pool": "inference"}),
        pod("team-g/ddp", 4, 48000, 393216, replicas=2, gang="team-g/ddp"),
        pod("team-e/render-farm", 8, 96000, 1000000),
        pod("team-f/vision-4g", 4, 32000, 262144),
        pod("team-infer/rerank", 1, 2000, 16384, gpuMilli=250, gpuMemoryMiB=20480),
        pod("team-h/debug-shell", 1, 2000, 16384),
        pod("team-c/tokenize", 0, 16000, 65536),
    ]
    return {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "policy": "best-fit",
        "seed": 0,
        "pods": pods,
        "gangs": {"team-g/ddp": {"topology": {"mode": "unconstrained"}}},
    }


def render(doc: dict[str, Any]) -> str:
    """Return ``doc`` as the bundled files store it (JSON, indent 2, trailing newline)."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the demo snapshot and request into ``--out`` (default: the package data)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, doc in ((SNAPSHOT_FILE, build_snapshot(args.seed)), (REQUEST_FILE, build_request())):
        (args.out / name).write_text(render(doc), encoding="utf-8")
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
