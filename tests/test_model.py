"""Round trips of the placer/v1 model objects: ``from_dict(x.to_dict()) == x``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.exceptions import InvalidInputError
from placer.model.topology import Nic
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    PlacementRequest,
    PlacementResult,
    Unschedulable,
    load_request,
    load_result,
    load_snapshot,
)

DATA = Path(__file__).parent / "data" / "validation"

SNAPSHOT: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "topologyLevels": ["block", "rack", "nvlDomain"],
    "nodeTypes": {
        "dgx-h100": {
            "gpuModel": "H100-SXM5-80GB",
            "gpus": 8,
            "gpuMemoryMiB": 81559,
            "cpuMilli": 224000,
            "memoryMiB": 2000000,
            "maxPods": 110,
            "gpuTopology": {
                "matrix": [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
            },
            "nics": [{"name": "mlx5_0", "matrix": ["PIX", "PXB"] + ["SYS"] * 6}],
        },
        "cpu": {"cpuMilli": 64000},
        "anon": {"gpus": 2},
    },
    "nodes": [
        {
            "name": "node-0001",
            "type": "dgx-h100",
            "topology": {"block": "b1", "rack": "r07", "nvlDomain": "nvl-a"},
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "empty": ""},
            "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "maintenance", "effect": "PreferNoSchedule"},
            ],
            "unhealthyGpus": [3],
            "pods": [
                {
                    "name": "team-a/train-0",
                    "gpus": [0, 1],
                    "cpuMilli": 16000,
                    "memoryMiB": 131072,
                    "priority": 100,
                },
                {
                    "name": "team-b/infer-3",
                    "gpuShares": {"2": 500, "4": 250},
                    "gpuMemoryMiB": {"2": 20000},
                    "cpuMilli": 4000,
                },
                {"name": "team-b/infer-4", "gpuShares": {"2": 500}, "priority": -5},
            ],
        },
        {
            "name": "node-0002",
            "type": "dgx-h100",
            "cpuMilli": 112000,
            "maxPods": 10,
            "gpuTopology": {"nvswitch": True},
            "topology": {"block": "b1", "rack": "r08"},
            "unschedulable": True,
        },
        {
            "name": "node-0003",
            "gpus": 4,
            "gpuModel": "A100",
            "memoryMiB": 512000,
            "nics": [{"name": "eth0", "matrix": ["NODE", "NODE", "SYS", "SYS"]}],
        },
        {"name": "node-0004", "type": "cpu"},
        {"name": "node-0005", "type": "anon", "pods": [{"name": "x", "gpus": [1]}]},
        {"name": "node-0006"},
    ],
}

REQUEST: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "PlacementRequest",
    "policy": "fgd",
    "seed": 7,
    "solver": "greedy",
    "timeLimitS": 2.5,
    "pods": [
        {
            "name": "team-c/dev-1",
            "gpus": 1,
            "gpuMilli": 300,
            "gpuMemoryMiB": 16000,
            "cpuMilli": 4000,
            "memoryMiB": 16384,
        },
        {
            "name": "team-a/llm",
            "replicas": 8,
            "gang": "team-a/llm",
            "gpus": 8,
            "cpuMilli": 96000,
            "gpuModels": ["H100-SXM5-80GB", "H200"],
            "nodeSelector": {"pool": "train"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "maintenance", "value": "soon"},
                {"operator": "Exists"},
            ],
            "priority": 1000,
            "nics": 2,
        },
        {"name": "tiny", "priority": -1, "replicas": 2, "gang": "pair"},
    ],
    "gangs": {
        "team-a/llm": {
            "topology": {"mode": "required", "level": "rack"},
            "slices": [{"level": "rack", "size": 8}, {"level": "nvlDomain", "size": 4}],
            "sameGpuModel": True,
            "solver": "exact",
            "timeLimitS": 30,
        },
        "pair": {"topology": {"mode": "preferred", "level": "node"}, "sameGpuModel": False},
    },
}

RESULT: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "PlacementResult",
    "assignments": [
        {"pod": "team-c/dev-1", "node": "node-0007", "gpus": [5], "gpuMilli": 300},
        {
            "pod": "team-a/llm-0",
            "node": "node-0012",
            "gpus": [0, 1, 2, 3, 4, 5, 6, 7],
            "gang": "team-a/llm",
            "nics": ["mlx5_0"],
        },
        {"pod": "cpu-only", "node": "node-0001", "gpus": []},
    ],
    "unschedulable": [
        {"pod": "team-x/big", "reason": "0/32 nodes are available: 16 Insufficient nvidia.com/gpu."}
    ],
    "gangs": [
        {
            "name": "team-a/llm",
            "placed": True,
            "solver": "cp-sat",
            "status": "optimal",
            "domains": {"rack": ["b1/r07"], "nvlDomain": ["b1/r07/nvl-a", "b1/r07/nvl-b"]},
            "domainCounts": {"rack": 1, "nvlDomain": 2},
            "domainBounds": {"rack": 1, "nvlDomain": 2},
            "objective": 12.0,
            "bound": 12.0,
        },
        {"name": "pair", "placed": False, "solver": "greedy", "status": "infeasible"},
    ],
}


def test_snapshot_round_trip() -> None:
    snap = ClusterSnapshot.from_dict(SNAPSHOT)
    again = ClusterSnapshot.from_dict(snap.to_dict())
    assert again == snap
    assert json.loads(json.dumps(snap.to_dict())) == snap.to_dict()
    n2 = snap.nodes[1]
    assert n2.overrides == {"cpuMilli": 112000, "maxPods": 10, "gpuTopology": {"nvswitch": True}}
    assert n2.hardware.gpu_topology.nvswitch and n2.hardware.cpu_milli == 112000
    assert n2.hardware.gpu_topology.to_dict() == {"nvswitch": True}
    assert n2.hardware.gpu_model == "H100-SXM5-80GB" and n2.hardware.nics == (
        Nic("mlx5_0", ("PIX", "PXB") + ("SYS",) * 6),
    )
    assert snap.nodes[0].pods[1].gpu_shares == {2: 500, 4: 250}
    assert again.nodes[0].hardware == snap.node_types["dgx-h100"]


def test_snapshot_to_dict_keeps_the_document() -> None:
    out = ClusterSnapshot.from_dict(SNAPSHOT).to_dict()
    assert out["nodes"][1] == {k: v for k, v in SNAPSHOT["nodes"][1].items()}
    assert out["nodes"][0]["pods"][1] == SNAPSHOT["nodes"][0]["pods"][1]
    assert out["nodeTypes"]["anon"] == {"gpuModel": "gpu", "gpus": 2}


def test_request_round_trip() -> None:
    req = PlacementRequest.from_dict(REQUEST)
    assert len(req.pods) == 1 + 8 + 2
    assert [p.name for p in req.pods[-2:]] == ["tiny-0", "tiny-1"]
    again = PlacementRequest.from_dict(req.to_dict())
    assert again == req
    assert "replicas" not in json.dumps(req.to_dict())
    assert req.gangs["team-a/llm"].time_limit_s == 30.0
    assert [s.size for s in again.gangs["team-a/llm"].slices] == [8, 4]


def test_request_round_trip_with_defaults() -> None:
    req = PlacementRequest.from_dict(
        {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "a"}]}
    )
    assert PlacementRequest.from_dict(req.to_dict()) == req
    assert req.to_dict()["policy"] == "best-fit"


def test_result_round_trip() -> None:
    res = PlacementResult.from_dict(RESULT)
    assert PlacementResult.from_dict(res.to_dict()) == res
    assert res.to_dict() == RESULT


def test_result_domain_counts_must_match_the_domains_listed() -> None:
    doc = json.loads(json.dumps(RESULT))
    doc["gangs"][0]["domainCounts"]["nvlDomain"] = 3
    with pytest.raises(InvalidInputError) as e:
        PlacementResult.from_dict(doc)
    assert e.value.where == "gangs[0].domainCounts.nvlDomain"
    assert "says 3 domain(s), `domains` lists 2" in str(e.value)


def test_result_built_in_python_round_trips() -> None:
    res = PlacementResult(
        assignments=(Assignment(pod="a", node="n", gpus=(2,), gpu_milli=500),),
        unschedulable=(
            Unschedulable(pod="b", reason="0/1 nodes are available: 1 Insufficient cpu."),
        ),
        gangs=(GangResult(name="g", placed=False, status="unknown"),),
    )
    assert PlacementResult.from_dict(res.to_dict()) == res


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_load_functions_read_files(tmp_path: Path, suffix: str) -> None:
    dump = json.dumps if suffix == ".json" else yaml.safe_dump
    for name, doc, load, cls in [
        ("snapshot", SNAPSHOT, load_snapshot, ClusterSnapshot),
        ("request", REQUEST, load_request, PlacementRequest),
        ("result", RESULT, load_result, PlacementResult),
    ]:
        path = tmp_path / f"{name}{suffix}"
        path.write_text(dump(doc))
        assert load(path) == cls.from_dict(doc)
        assert load(str(path)) == cls.from_dict(doc)


def test_load_snapshot_json_and_yaml_equal() -> None:
    a = load_snapshot(DATA / "snapshot.json")
    b = load_snapshot(DATA / "snapshot.yaml")
    assert a == b
    assert ClusterSnapshot.from_file(DATA / "snapshot.yaml") == a
    assert [n.name for n in a.nodes] == ["node-0001", "node-0002", "node-0003"]
