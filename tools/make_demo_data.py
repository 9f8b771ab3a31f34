"""Generate the bundled demo documents of ``placer demo``.

Writes ``src/placer/data/demo_snapshot.json`` and ``src/placer/data/demo_request.json``.
The output depends only on the seed, so running this again reproduces the bundled files
byte for byte (``tests/test_demo.py`` checks that).

The story (issue #4, item 5): 32 DGX A100 nodes in four racks of eight; 16 of them, four
in every rack, still hold 4-6 GPUs each in the leftover pods of a failed job
(``failed-job/worker-<i>``), so no rack has eight free nodes and the 64-GPU gang
``team-a/llm`` (8 pods x 8 GPUs, one rack required) is pending. Once the leftovers are
released, one rack is whole again and the gang fits inside it.

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
LEFTOVER_NODES_PER_RACK = 4
GPUS = 8
GPU_MEMORY_MIB = 81920
NODE_TYPE = {
    "gpuModel": "A100-SXM4-80GB",
    "gpus": GPUS,
    "gpuMemoryMiB": GPU_MEMORY_MIB,
    "cpuMilli": 256000,
    "memoryMiB": 2000000,
    "maxPods": 110,
    "gpuTopology": {"nvswitch": True},
}
GANG = "team-a/llm"
DATA_DIR = Path(__file__).resolve().parent.parent / "src" / "placer" / "data"
SNAPSHOT_FILE = "demo_snapshot.json"
REQUEST_FILE = "demo_request.json"
NODE_KEYS = ("name", "type", "topology", "labels", "taints", "unschedulable", "unhealthyGpus", "pods")


def build_snapshot(seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Return the demo ClusterSnapshot document.

    32 ``dgx-a100`` nodes (8 x A100-SXM4-80GB on NVSwitch) in four racks of eight. In
    every rack four nodes hold a leftover worker of a failed job (4-6 whole GPUs each).
    Racks a-c also carry everyday blemishes on idle nodes — one cordoned, one tainted for
    maintenance, one with an unhealthy GPU — and two shared inference pods sit on leftover
    nodes of racks a and b. Rack d has only leftovers: once they are gone it is whole.

    Parameters
    ----------
    seed : int
        Seed of the generator; the same seed gives the same document.
    """
    rng = random.Random(seed)
    nodes: list[dict[str, Any]] = []
    leftover: dict[str, list[dict[str, Any]]] = {}
    idle: dict[str, list[dict[str, Any]]] = {}
    for r, rack in enumerate(RACKS):
        taken = set(rng.sample(range(NODES_PER_RACK), LEFTOVER_NODES_PER_RACK))
        leftover[rack], idle[rack] = [], []
        for k in range(NODES_PER_RACK):
            node: dict[str, Any] = {
                "name": f"node-{r * NODES_PER_RACK + k + 1:02d}",
                "type": "dgx-a100",
                "topology": {"rack": rack},
                "labels": {"pool": "train", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            }
            nodes.append(node)
            (leftover[rack] if k in taken else idle[rack]).append(node)

    worker = 0
    for rack in RACKS:
        for node in leftover[rack]:
            held = rng.randint(4, 6)
            node["pods"] = [
                {
                    "name": f"failed-job/worker-{worker}",
                    "gpus": sorted(rng.sample(range(GPUS), held)),
                    "cpuMilli": held * 12000,
                    "memoryMiB": held * 98304,
                    "priority": 100,
                }
            ]
            worker += 1

    for i, (rack, milli, mib) in enumerate((("rack-a", 500, 40960), ("rack-b", 250, 16384))):
        node = rng.choice(leftover[rack])
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

    rng.choice(idle["rack-a"])["unschedulable"] = True
    rng.choice(idle["rack-b"])["taints"] = [
        {"key": "nvidia.com/gpu", "value": "maintenance", "effect": "NoSchedule"}
    ]
    rng.choice(idle["rack-c"])["unhealthyGpus"] = [rng.randrange(GPUS)]

    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "topologyLevels": ["rack"],
        "nodeTypes": {"dgx-a100": dict(NODE_TYPE)},
        "nodes": [{k: node[k] for k in NODE_KEYS if k in node} for node in nodes],
    }


def build_request() -> dict[str, Any]:
    """Return the demo PlacementRequest document (policy best-fit, seed 0).

    First the gang ``team-a/llm``: 8 pods x 8 GPUs, all inside one rack (``required`` at
    level ``rack``); then a few ordinary pods of 1, 2 and 4 GPUs and two shared
    inference pods.
    """
    def pod(name: str, gpus: int, cpu: int, mem: int, **extra: Any) -> dict[str, Any]:
        return {"name": name, "gpus": gpus, **extra, "cpuMilli": cpu, "memoryMiB": mem}

    pods = [
        pod(GANG, 8, 96000, 1048576, replicas=8, gang=GANG, nodeSelector={"pool": "train"}, priority=1000),
        pod("team-a/notebook-alice", 1, 8000, 65536),
        pod("team-b/eval-harness", 2, 16000, 131072),
        pod("team-b/rl-actor", 4, 32000, 262144),
        pod("team-infer/chat-canary", 1, 4000, 32768, gpuMilli=500, gpuMemoryMiB=40960),
        pod("team-infer/embed-0", 1, 2000, 16384, gpuMilli=250, gpuMemoryMiB=16384),
    ]
    return {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "policy": "best-fit",
        "seed": 0,
        "pods": pods,
        "gangs": {GANG: {"topology": {"mode": "required", "level": "rack"}}},
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
