"""Every input check of placer.schema: the error type, its JSON path and message."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

import placer
from placer import schema as V
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, NodeType, PlacementRequest, PlacementResult

DATA = Path(__file__).parent / "data" / "validation"

Mutation = Callable[[dict], None]


# ----------------------------------------------------------------------------- documents


def snapshot_doc() -> dict[str, Any]:
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "topologyLevels": ["block", "rack"],
        "nodeTypes": {
            "dgx": {
                "gpuModel": "H100",
                "gpus": 8,
                "gpuMemoryMiB": 81920,
                "cpuMilli": 100000,
                "memoryMiB": 1000000,
                "maxPods": 4,
            }
        },
        "nodes": [
            {
                "name": "n0",
                "type": "dgx",
                "topology": {"block": "b1", "rack": "r1"},
                "labels": {"pool": "train"},
                "taints": [{"key": "gpu", "value": "present", "effect": "NoSchedule"}],
                "unhealthyGpus": [7],
                "pods": [
                    {"name": "p0", "gpus": [0, 1], "cpuMilli": 1000, "memoryMiB": 1000},
                    {"name": "p1", "gpuShares": {"2": 500}, "gpuMemoryMiB": {"2": 20000}},
                ],
            },
            {"name": "n1", "gpus": 4, "gpuModel": "A100", "cpuMilli": 64000},
            {"name": "cpu0"},
        ],
    }


def request_doc() -> dict[str, Any]:
    return {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "pods": [
            {"name": "dev", "gpus": 1, "gpuMilli": 300, "gpuMemoryMiB": 1000, "cpuMilli": 100},
            {
                "name": "llm",
                "replicas": 4,
                "gang": "g",
                "gpus": 8,
                "gpuModels": ["H100"],
                "nodeSelector": {"pool": "train"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        ],
        "gangs": {
            "g": {
                "topology": {"mode": "required", "level": "block"},
                "slices": [{"level": "rack", "size": 2}],
            }
        },
    }


def result_doc() -> dict[str, Any]:
    return {
        "apiVersion": "placer/v1",
        "kind": "PlacementResult",
        "assignments": [{"pod": "a", "node": "n0", "gpus": [0, 1]}],
        "unschedulable": [{"pod": "b", "reason": "0/3 nodes are available: 3 Insufficient cpu."}],
        "gangs": [
            {
                "name": "g",
                "placed": True,
                "solver": "greedy",
                "status": "optimal",
                "domains": {"rack": ["b1/r1"]},
            }
        ],
    }


# ----------------------------------------------------------------------------- mutations


def _walk(d: Any, path: tuple) -> Any:
    for k in path:
        d = d[k]
    return d


def put(*path_and_value: Any) -> Mutation:
    *path, value = path_and_value

    def f(d: dict) -> None:
        _walk(d, tuple(path[:-1]))[path[-1]] = copy.deepcopy(value)

    return f


def drop(*path: Any) -> Mutation:
    def f(d: dict) -> None:
        del _walk(d, path[:-1])[path[-1]]

    return f


def add(*path_and_value: Any) -> Mutation:
    *path, value = path_and_value

    def f(d: dict) -> None:
        _walk(d, tuple(path)).append(copy.deepcopy(value))

    return f


def both(*fs: Mutation) -> Mutation:
    def f(d: dict) -> None:
        for g in fs:
            g(d)

    return f


def case(id_: str, mutate: Mutation, where: str, what: str) -> Any:
    return pytest.param(mutate, where, what, id=id_)


def expect_error(build: Callable[[Any], Any], doc: Any, where: str, what: str) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as info:
        build(doc)
    assert info.value.where == where
    assert what in info.value.what
    return info.value


# ----------------------------------------------------------------------------- header


@pytest.mark.parametrize(
    "build, make, kind",
    [
        pytest.param(V.snapshot_from_dict, snapshot_doc, "ClusterSnapshot", id="snapshot"),
        pytest.param(V.request_from_dict, request_doc, "PlacementRequest", id="request"),
        pytest.param(V.result_from_dict, result_doc, "PlacementResult", id="result"),
    ],
)
@pytest.mark.parametrize(
    "mutate, where, what",
    [
        case(
            "wrong-apiVersion",
            put("apiVersion", "placer/v2"),
            "apiVersion",
            "expected 'placer/v1', got 'placer/v2'",
        ),
        case("missing-apiVersion", drop("apiVersion"), "apiVersion", "got nothing"),
        case("wrong-kind", put("kind", "Pod"), "kind", "got 'Pod'"),
        case("missing-kind", drop("kind"), "kind", "got nothing"),
    ],
)
def test_header(
    build: Callable, make: Callable, kind: str, mutate: Mutation, where: str, what: str
) -> None:
    doc = make()
    mutate(doc)
    err = expect_error(build, doc, where, what)
    if where == "kind":
        assert repr(kind) in err.what


@pytest.mark.parametrize("build", [V.snapshot_from_dict, V.request_from_dict, V.result_from_dict])
def test_top_level_not_a_mapping(build: Callable) -> None:
    expect_error(build, [1, 2], "", "got a list")


# ----------------------------------------------------------------------------- snapshot

N0 = ("nodes", 0)
P0 = (*N0, "pods", 0)
P1 = (*N0, "pods", 1)

SNAPSHOT_ERRORS = [
    # topologyLevels
    case(
        "levels-not-list", put("topologyLevels", "rack"), "topologyLevels", "got 'rack' (a string)"
    ),
    case(
        "levels-empty-name",
        put("topologyLevels", ["block", ""]),
        "topologyLevels[1]",
        "a non-empty string",
    ),
    case(
        "levels-duplicate",
        put("topologyLevels", ["block", "block"]),
        "topologyLevels[1]",
        "duplicate level 'block'",
    ),
    case(
        "levels-node",
        put("topologyLevels", ["block", "rack", "node"]),
        "topologyLevels[2]",
        "'node' is implicit",
    ),
    # nodeTypes
    case("types-not-mapping", put("nodeTypes", ["dgx"]), "nodeTypes", "got a list"),
    case(
        "type-not-mapping", put("nodeTypes", "dgx", 8), "nodeTypes.dgx", "expected a mapping, got 8"
    ),
    case(
        "type-gpus-bool",
        put("nodeTypes", "dgx", "gpus", True),
        "nodeTypes.dgx.gpus",
        "got true (a boolean)",
    ),
    case(
        "type-gpus-float",
        put("nodeTypes", "dgx", "gpus", 8.0),
        "nodeTypes.dgx.gpus",
        "got 8.0 (a float)",
    ),
    case(
        "type-gpus-string",
        put("nodeTypes", "dgx", "gpus", "8"),
        "nodeTypes.dgx.gpus",
        "got '8' (a string)",
    ),
    case(
        "type-gpus-over-64",
        put("nodeTypes", "dgx", "gpus", 65),
        "nodeTypes.dgx.gpus",
        "an integer in 0..64, got 65",
    ),
    case("type-gpus-negative", put("nodeTypes", "dgx", "gpus", -1), "nodeTypes.dgx.gpus", "got -1"),
    case(
        "type-gpuModel-empty",
        put("nodeTypes", "dgx", "gpuModel", ""),
        "nodeTypes.dgx.gpuModel",
        "a non-empty string",
    ),
    case(
        "type-gpuModel-int",
        put("nodeTypes", "dgx", "gpuModel", 100),
        "nodeTypes.dgx.gpuModel",
        "got 100",
    ),
    case(
        "type-gpuMemoryMiB-negative",
        put("nodeTypes", "dgx", "gpuMemoryMiB", -3),
        "nodeTypes.dgx.gpuMemoryMiB",
        "expected an integer >= 0, got -3",
    ),
    case(
        "type-cpuMilli-negative",
        put("nodeTypes", "dgx", "cpuMilli", -3),
        "nodeTypes.dgx.cpuMilli",
        "expected an integer >= 0, got -3",
    ),
    case(
        "type-memoryMiB-float",
        put("nodeTypes", "dgx", "memoryMiB", 1.5),
        "nodeTypes.dgx.memoryMiB",
        "got 1.5 (a float)",
    ),
    case(
        "type-maxPods-negative",
        put("nodeTypes", "dgx", "maxPods", -1),
        "nodeTypes.dgx.maxPods",
        "got -1",
    ),
    case(
        "type-gpuTopology-not-mapping",
        put("nodeTypes", "dgx", "gpuTopology", "nvswitch"),
        "nodeTypes.dgx.gpuTopology",
        "expected a mapping",
    ),
    case(
        "type-nics-not-list",
        put("nodeTypes", "dgx", "nics", {"name": "mlx5_0"}),
        "nodeTypes.dgx.nics",
        "a list of mappings",
    ),
    case(
        "type-nics-item",
        put("nodeTypes", "dgx", "nics", [{"name": "mlx5_0"}, "mlx5_1"]),
        "nodeTypes.dgx.nics[1]",
        "expected a mapping",
    ),
    # nodes
    case("nodes-missing", drop("nodes"), "nodes", "got nothing"),
    case("nodes-not-list", put("nodes", {"n0": {}}), "nodes", "a list of nodes, got a mapping"),
    case("node-not-mapping", put("nodes", 1, "n1"), "nodes[1]", "a node mapping"),
    case("node-name-missing", drop("nodes", 1, "name"), "nodes[1].name", "got nothing"),
    case("node-name-int", put("nodes", 1, "name", 7), "nodes[1].name", "a non-empty string, got 7"),
    case(
        "node-name-duplicate",
        put("nodes", 2, "name", "n0"),
        "nodes[2].name",
        "duplicate node name 'n0', first at nodes[0]",
    ),
    case(
        "node-type-unknown",
        put("nodes", 0, "type", "hgx"),
        "nodes[0].type",
        "unknown node type 'hgx'; nodeTypes has: dgx",
    ),
    case("node-type-not-string", put("nodes", 0, "type", ["dgx"]), "nodes[0].type", "got a list"),
    case("node-inline-gpus-negative", put("nodes", 1, "gpus", -4), "nodes[1].gpus", "got -4"),
    case(
        "node-inline-cpu-bool",
        put("nodes", 1, "cpuMilli", False),
        "nodes[1].cpuMilli",
        "got false (a boolean)",
    ),
    case(
        "node-topology-not-mapping",
        put(*N0, "topology", ["b1"]),
        "nodes[0].topology",
        "a mapping of level to domain name",
    ),
    case(
        "node-topology-unknown-level",
        put(*N0, "topology", "zone", "z1"),
        "nodes[0].topology.zone",
        "unknown topology level 'zone'; topologyLevels is: block, rack",
    ),
    case(
        "node-topology-node-level",
        put(*N0, "topology", "node", "n0"),
        "nodes[0].topology.node",
        "unknown topology level 'node'",
    ),
    case(
        "node-topology-value",
        put(*N0, "topology", "rack", 7),
        "nodes[0].topology.rack",
        "a non-empty domain name, got 7",
    ),
    case(
        "node-labels-not-mapping",
        put(*N0, "labels", ["pool=train"]),
        "nodes[0].labels",
        "got a list",
    ),
    case(
        "node-labels-value",
        put(*N0, "labels", "pool", 1),
        "nodes[0].labels.pool",
        "expected a string, got 1",
    ),
    case(
        "node-taints-not-list",
        put(*N0, "taints", {"key": "gpu"}),
        "nodes[0].taints",
        "a list of taints",
    ),
    case(
        "node-taint-not-mapping",
        put(*N0, "taints", ["gpu"]),
        "nodes[0].taints[0]",
        "expected a mapping",
    ),
    case(
        "node-taint-key-missing",
        drop(*N0, "taints", 0, "key"),
        "nodes[0].taints[0].key",
        "got nothing",
    ),
    case(
        "node-taint-effect-missing",
        drop(*N0, "taints", 0, "effect"),
        "nodes[0].taints[0].effect",
        "one of NoSchedule, PreferNoSchedule, NoExecute, got nothing",
    ),
    case(
        "node-taint-effect-bad",
        put(*N0, "taints", 0, "effect", "Never"),
        "nodes[0].taints[0].effect",
        "got 'Never'",
    ),
    case(
        "node-taint-value-int",
        put(*N0, "taints", 0, "value", 1),
        "nodes[0].taints[0].value",
        "expected a string, got 1",
    ),
    case(
        "node-unschedulable-string",
        put(*N0, "unschedulable", "yes"),
        "nodes[0].unschedulable",
        "true or false, got 'yes'",
    ),
    case(
        "node-unhealthy-not-list",
        put(*N0, "unhealthyGpus", 7),
        "nodes[0].unhealthyGpus",
        "a list of GPU indices",
    ),
    case(
        "node-unhealthy-out-of-range",
        put(*N0, "unhealthyGpus", [7, 8]),
        "nodes[0].unhealthyGpus[1]",
        "GPU index 8 out of range 0..7",
    ),
    case(
        "node-unhealthy-negative",
        put(*N0, "unhealthyGpus", [-1]),
        "nodes[0].unhealthyGpus[0]",
        "GPU index -1 out of range 0..7",
    ),
    case(
        "node-unhealthy-duplicate",
        put(*N0, "unhealthyGpus", [7, 6, 7]),
        "nodes[0].unhealthyGpus[2]",
        "GPU 7 listed twice",
    ),
    case(
        "node-unhealthy-not-int",
        put(*N0, "unhealthyGpus", ["7"]),
        "nodes[0].unhealthyGpus[0]",
        "got '7' (a string)",
    ),
    case(
        "node-unhealthy-no-gpus",
        put("nodes", 2, "unhealthyGpus", [0]),
        "nodes[2].unhealthyGpus[0]",
        "the node has no GPUs",
    ),
    # running pods
    case("pods-not-list", put(*N0, "pods", {"p0": {}}), "nodes[0].pods", "a list of pods"),
    case("pod-not-mapping", put(*P1, "p1"), "nodes[0].pods[1]", "expected a mapping"),
    case("pod-name-missing", drop(*P1, "name"), "nodes[0].pods[1].name", "got nothing"),
    case(
        "pod-name-duplicate-same-node",
        put(*P1, "name", "p0"),
        "nodes[0].pods[1].name",
        "duplicate pod name 'p0', first at nodes[0].pods[0]",
    ),
    case(
        "pod-name-duplicate-across-nodes",
        put("nodes", 1, "pods", [{"name": "p1"}]),
        "nodes[1].pods[0].name",
        "duplicate pod name 'p1', first at nodes[0].pods[1]",
    ),
    case(
        "pod-gpus-not-list",
        put(*P0, "gpus", 2),
        "nodes[0].pods[0].gpus",
        "a list of GPU indices, got 2",
    ),
    case(
        "pod-gpu-out-of-range",
        put(*P0, "gpus", [0, 9]),
        "nodes[0].pods[0].gpus[1]",
        "GPU index 9 out of range 0..7",
    ),
    case(
        "pod-gpu-bool", put(*P0, "gpus", [True]), "nodes[0].pods[0].gpus[0]", "got true (a boolean)"
    ),
    case(
        "pod-gpu-on-gpuless-node",
        put("nodes", 2, "pods", [{"name": "x", "gpus": [0]}]),
        "nodes[2].pods[0].gpus[0]",
        "out of range: the node has no GPUs",
    ),
    case(
        "pod-gpu-listed-twice",
        put(*P0, "gpus", [0, 1, 0]),
        "nodes[0].pods[0].gpus[2]",
        "GPU 0 listed twice",
    ),
    case(
        "pod-gpu-held-by-two-pods",
        add(*N0, "pods", {"name": "p2", "gpus": [3, 1]}),
        "nodes[0].pods[2].gpus[1]",
        "GPU 1 is already held by pod 'p0'",
    ),
    case(
        "pod-gpu-already-shared",
        add(*N0, "pods", {"name": "p2", "gpus": [2]}),
        "nodes[0].pods[2].gpus[0]",
        "GPU 2 is already shared by pod 'p1'",
    ),
    case(
        "pod-shares-not-mapping",
        put(*P1, "gpuShares", [2]),
        "nodes[0].pods[1].gpuShares",
        "a mapping of GPU index to gpuMilli",
    ),
    case(
        "pod-shares-bad-key",
        put(*P1, "gpuShares", {"two": 500}),
        "nodes[0].pods[1].gpuShares.two",
        "GPU index keys, got 'two'",
    ),
    case(
        "pod-shares-negative-key",
        put(*P1, "gpuShares", {"-1": 500}),
        "nodes[0].pods[1].gpuShares.-1",
        "GPU index keys",
    ),
    case(
        "pod-shares-key-out-of-range",
        both(put(*P1, "gpuShares", {"9": 500}), drop(*P1, "gpuMemoryMiB")),
        "nodes[0].pods[1].gpuShares.9",
        "GPU index 9 out of range 0..7",
    ),
    case(
        "pod-shares-zero",
        put(*P1, "gpuShares", "2", 0),
        "nodes[0].pods[1].gpuShares.2",
        "an integer in 1..1000, got 0",
    ),
    case(
        "pod-shares-over-1000",
        put(*P1, "gpuShares", "2", 1001),
        "nodes[0].pods[1].gpuShares.2",
        "an integer in 1..1000, got 1001",
    ),
    case(
        "pod-shares-float",
        put(*P1, "gpuShares", "2", 0.5),
        "nodes[0].pods[1].gpuShares.2",
        "got 0.5 (a float)",
    ),
    case(
        "pod-shares-on-whole-gpu",
        put(*P1, "gpuShares", {"2": 500, "1": 200}),
        "nodes[0].pods[1].gpuShares.1",
        "GPU 1 is held whole by pod 'p0'",
    ),
    case(
        "pod-shares-sum-over-1000",
        add(*N0, "pods", {"name": "p2", "gpuShares": {"2": 700}}),
        "nodes[0].pods[2].gpuShares.2",
        "GPU 2 would hold 1200 milli, over 1000",
    ),
    case(
        "pod-gpumem-not-mapping",
        put(*P1, "gpuMemoryMiB", 20000),
        "nodes[0].pods[1].gpuMemoryMiB",
        "a mapping of GPU index to MiB",
    ),
    case(
        "pod-gpumem-negative",
        put(*P1, "gpuMemoryMiB", "2", -1),
        "nodes[0].pods[1].gpuMemoryMiB.2",
        "expected an integer >= 0, got -1",
    ),
    case(
        "pod-gpumem-without-share",
        put(*P1, "gpuMemoryMiB", {"2": 1, "3": 1}),
        "nodes[0].pods[1].gpuMemoryMiB.3",
        "GPU 3 has no gpuShares entry",
    ),
    case(
        "pod-gpumem-sum-over-node",
        add(*N0, "pods", {"name": "p2", "gpuShares": {"2": 100}, "gpuMemoryMiB": {"2": 70000}}),
        "nodes[0].pods[2].gpuMemoryMiB.2",
        "GPU 2 would hold 90000 MiB of GPU memory, over the node's gpuMemoryMiB 81920",
    ),
    case(
        "pod-cpu-negative",
        put(*P0, "cpuMilli", -3),
        "nodes[0].pods[0].cpuMilli",
        "expected an integer >= 0, got -3",
    ),
    case(
        "pod-memory-float",
        put(*P0, "memoryMiB", 10.0),
        "nodes[0].pods[0].memoryMiB",
        "got 10.0 (a float)",
    ),
    case(
        "pod-priority-string",
        put(*P0, "priority", "high"),
        "nodes[0].pods[0].priority",
        "an integer, got 'high'",
    ),
]


@pytest.mark.parametrize("mutate, where, what", SNAPSHOT_ERRORS)
def test_snapshot_errors(mutate: Mutation, where: str, what: str) -> None:
    doc = snapshot_doc()
    mutate(doc)
    expect_error(V.snapshot_from_dict, doc, where, what)


def test_snapshot_base_document_is_valid() -> None:
    snap = V.snapshot_from_dict(snapshot_doc())
    assert [n.name for n in snap.nodes] == ["n0", "n1", "cpu0"]
    assert snap.topology_levels == ("block", "rack")


def test_snapshot_nulls_are_ignored() -> None:
    doc = snapshot_doc()
    doc["nodes"][1]["memoryMiB"] = None
    doc["nodes"][2]["labels"] = None
    doc["nodes"][0]["pods"][0]["priority"] = None
    snap = V.snapshot_from_dict(doc)
    assert snap == V.snapshot_from_dict(snapshot_doc())


@pytest.mark.parametrize(
    "mutate, where, what",
    [
        case("top", put("futureField", {"x": 1}), "", 'unknown field "futureField"'),
        case("node", put("nodes", 0, "gpu", 8), "nodes[0]", 'unknown field "gpu" (did you mean "gpus"?)'),
        case("pod", put(*P0, "cpumilli", 1), "nodes[0].pods[0]", 'unknown field "cpumilli" (did you mean "cpuMilli"?)'),
        case("type", put("nodeTypes", "dgx", "gpuModels", "H100"), "nodeTypes.dgx", '(did you mean "gpuModel"?)'),
        case("taint", put(*N0, "taints", 0, "operator", "Exists"), "nodes[0].taints[0]", 'unknown field "operator"'),
        case("hardware", put("nodes", 1, "hardware", {"gpus": 8}), "nodes[1]", 'unknown field "hardware"'),
    ],
)
def test_snapshot_unknown_fields_are_errors(mutate: Mutation, where: str, what: str) -> None:
    doc = snapshot_doc()
    mutate(doc)
    expect_error(V.snapshot_from_dict, doc, where, what)


def test_snapshot_hardware_semantics() -> None:
    doc = snapshot_doc()
    doc["nodeTypes"]["bare"] = {"gpus": 2}
    doc["nodeTypes"]["cpu"] = {"cpuMilli": 8000}
    doc["nodes"] += [
        {"name": "n3", "type": "bare"},
        {"name": "n4", "type": "cpu"},
        {"name": "n5", "type": "dgx", "cpuMilli": 5000, "maxPods": 9},
        {"name": "n6", "type": "dgx", "cpuMilli": 5000, "maxPods": 9},
        {"name": "n7", "type": "dgx"},
    ]
    snap = V.snapshot_from_dict(doc)
    nodes = {n.name: n for n in snap.nodes}
    assert snap.node_types["bare"].gpu_model == "gpu"
    assert snap.node_types["cpu"].gpu_model is None
    assert nodes["cpu0"].hardware == NodeType()
    assert nodes["cpu0"].hardware.gpus == 0
    assert nodes["n1"].hardware == NodeType(gpus=4, gpu_model="A100", cpu_milli=64000)
    assert nodes["n1"].overrides == {"gpus": 4, "gpuModel": "A100", "cpuMilli": 64000}
    n5 = nodes["n5"]
    assert n5.hardware.cpu_milli == 5000 and n5.hardware.max_pods == 9
    assert (
        n5.hardware.gpus == 8
        and n5.hardware.gpu_model == "H100"
        and n5.hardware.memory_mib == 1000000
    )
    assert n5.overrides == {"cpuMilli": 5000, "maxPods": 9}
    assert nodes["n7"].hardware is snap.node_types["dgx"]
    assert nodes["n0"].hardware is snap.node_types["dgx"]
    assert nodes["n0"].overrides == {}
    assert nodes["n5"].hardware is nodes["n6"].hardware


def test_snapshot_running_pod_fields() -> None:
    snap = V.snapshot_from_dict(snapshot_doc())
    p0, p1 = snap.nodes[0].pods
    assert p0.gpus == (0, 1) and p0.cpu_milli == 1000 and p0.memory_mib == 1000
    assert p1.gpu_shares == {2: 500} and p1.gpu_memory_mib == {2: 20000}
    assert snap.nodes[0].unhealthy_gpus == (7,)
    assert snap.nodes[0].taints[0].key == "gpu" and snap.nodes[0].taints[0].value == "present"


def test_snapshot_int_share_keys_from_yaml() -> None:
    doc = snapshot_doc()
    doc["nodes"][0]["pods"][1]["gpuShares"] = {2: 500}
    doc["nodes"][0]["pods"][1]["gpuMemoryMiB"] = {2: 20000}
    assert V.snapshot_from_dict(doc) == V.snapshot_from_dict(snapshot_doc())


def test_snapshot_shares_may_fill_a_gpu_exactly() -> None:
    doc = snapshot_doc()
    doc["nodes"][0]["pods"].append({"name": "p2", "gpuShares": {"2": 500}})
    snap = V.snapshot_from_dict(doc)
    assert sum(p.gpu_shares.get(2, 0) for p in snap.nodes[0].pods) == 1000


# ----------------------------------------------------------------------------- request

R0 = ("pods", 0)
R1 = ("pods", 1)
G = ("gangs", "g")

REQUEST_ERRORS = [
    case("policy-unknown", put("policy", "worst-fit"), "policy", "one of best-fit, first-fit"),
    case("policy-not-string", put("policy", 1), "policy", "got 1"),
    case("seed-negative", put("seed", -1), "seed", "got -1"),
    case("seed-bool", put("seed", True), "seed", "got true (a boolean)"),
    case("seed-float", put("seed", 4.0), "seed", "got 4.0 (a float)"),
    case("seed-too-big", put("seed", 2**64), "seed", "an integer in 0..18446744073709551615"),
    case(
        "solver-unknown",
        put("solver", "cp-sat"),
        "solver",
        "one of auto, greedy, exact, got 'cp-sat'",
    ),
    case("timeLimitS-zero", put("timeLimitS", 0), "timeLimitS", "a finite number > 0, got 0"),
    case("timeLimitS-negative", put("timeLimitS", -1.5), "timeLimitS", "got -1.5"),
    case("timeLimitS-string", put("timeLimitS", "10"), "timeLimitS", "got '10' (a string)"),
    case("timeLimitS-bool", put("timeLimitS", True), "timeLimitS", "got true (a boolean)"),
    case("timeLimitS-nan", put("timeLimitS", float("nan")), "timeLimitS", "a finite number > 0"),
    case("pods-missing", drop("pods"), "pods", "got nothing"),
    case("pods-not-list", put("pods", {"dev": {}}), "pods", "a list of pods, got a mapping"),
    case("pod-not-mapping", put("pods", 0, "dev"), "pods[0]", "a pod mapping, got 'dev'"),
    case("pod-name-missing", drop(*R0, "name"), "pods[0].name", "got nothing"),
    case("pod-name-empty", put(*R0, "name", ""), "pods[0].name", "got an empty string"),
    case(
        "pod-name-duplicate",
        add("pods", {"name": "dev"}),
        "pods[2].name",
        "duplicate pod name 'dev', first at pods[0]",
    ),
    case(
        "pod-name-duplicate-after-replicas",
        add("pods", {"name": "llm-2"}),
        "pods[2].name",
        "duplicate pod name 'llm-2', first at pods[1]",
    ),
    case(
        "pod-name-duplicate-by-replicas",
        put(*R0, "name", "llm-3"),
        "pods[1].name",
        "duplicate pod name 'llm-3', first at pods[0]",
    ),
    case("replicas-zero", put(*R1, "replicas", 0), "pods[1].replicas", "an integer >= 1, got 0"),
    case("replicas-float", put(*R1, "replicas", 2.0), "pods[1].replicas", "got 2.0 (a float)"),
    case("gpus-negative", put(*R1, "gpus", -1), "pods[1].gpus", "an integer in 0..64, got -1"),
    case("gpus-over-64", put(*R1, "gpus", 65), "pods[1].gpus", "got 65"),
    case("gpus-bool", put(*R0, "gpus", True), "pods[0].gpus", "got true (a boolean)"),
    case(
        "gpuMilli-zero", put(*R0, "gpuMilli", 0), "pods[0].gpuMilli", "an integer in 1..1000, got 0"
    ),
    case("gpuMilli-over-1000", put(*R0, "gpuMilli", 1500), "pods[0].gpuMilli", "got 1500"),
    case(
        "gpuMilli-shared-needs-one-gpu",
        put(*R0, "gpus", 2),
        "pods[0].gpuMilli",
        "gpuMilli below 1000 (a shared GPU) needs gpus: 1, got gpus: 2",
    ),
    case(
        "gpuMilli-shared-without-gpus",
        drop(*R0, "gpus"),
        "pods[0].gpuMilli",
        "needs gpus: 1, got gpus: 0",
    ),
    case(
        "gpuMemoryMiB-negative",
        put(*R0, "gpuMemoryMiB", -1),
        "pods[0].gpuMemoryMiB",
        "an integer >= 0, got -1",
    ),
    case(
        "gpuModels-not-list",
        put(*R1, "gpuModels", "H100"),
        "pods[1].gpuModels",
        "a list of strings, got 'H100'",
    ),
    case(
        "gpuModels-entry",
        put(*R1, "gpuModels", ["H100", 100]),
        "pods[1].gpuModels[1]",
        "a non-empty string, got 100",
    ),
    case(
        "cpuMilli-negative",
        put(*R0, "cpuMilli", -100),
        "pods[0].cpuMilli",
        "an integer >= 0, got -100",
    ),
    case("memoryMiB-float", put(*R0, "memoryMiB", 0.5), "pods[0].memoryMiB", "got 0.5 (a float)"),
    case(
        "nodeSelector-not-mapping",
        put(*R1, "nodeSelector", ["pool=train"]),
        "pods[1].nodeSelector",
        "a mapping of strings to strings",
    ),
    case(
        "nodeSelector-value",
        put(*R1, "nodeSelector", "pool", True),
        "pods[1].nodeSelector.pool",
        "a string, got true",
    ),
    case(
        "tolerations-not-list",
        put(*R1, "tolerations", {"key": "gpu"}),
        "pods[1].tolerations",
        "a list of tolerations",
    ),
    case(
        "toleration-not-mapping",
        put(*R1, "tolerations", ["gpu"]),
        "pods[1].tolerations[0]",
        "expected a mapping",
    ),
    case(
        "toleration-operator",
        put(*R1, "tolerations", 0, "operator", "In"),
        "pods[1].tolerations[0].operator",
        "one of Equal, Exists, got 'In'",
    ),
    case(
        "toleration-effect",
        put(*R1, "tolerations", 0, "effect", "Always"),
        "pods[1].tolerations[0].effect",
        "got 'Always'",
    ),
    case(
        "toleration-exists-with-value",
        put(*R1, "tolerations", 0, "value", "present"),
        "pods[1].tolerations[0].value",
        "operator Exists takes no value, got 'present'",
    ),
    case(
        "toleration-equal-without-key",
        put(*R1, "tolerations", [{"operator": "Equal", "value": "x"}]),
        "pods[1].tolerations[0].key",
        "needs operator Exists",
    ),
    case(
        "toleration-key-not-string",
        put(*R1, "tolerations", 0, "key", 5),
        "pods[1].tolerations[0].key",
        "a string, got 5",
    ),
    case(
        "priority-string",
        put(*R1, "priority", "1000"),
        "pods[1].priority",
        "an integer, got '1000'",
    ),
    case("gang-unknown", put(*R1, "gang", "h"), "pods[1].gang", "unknown gang 'h'; gangs has: g"),
    case(
        "gang-without-gangs",
        both(drop("gangs"), put(*R1, "gang", "g")),
        "pods[1].gang",
        "unknown gang 'g'; gangs has: (none)",
    ),
    case("gang-not-string", put(*R1, "gang", 1), "pods[1].gang", "got 1"),
    case("nics-negative", put(*R1, "nics", -1), "pods[1].nics", "an integer >= 0, got -1"),
    # gangs
    case("gangs-not-mapping", put("gangs", ["g"]), "gangs", "a mapping of gang names to gangs"),
    case("gang-not-mapping", put(*G, 4), "gangs.g", "expected a mapping, got 4"),
    case("gang-no-pods", put("gangs", "lonely", {}), "gangs.lonely", "the gang has no pods"),
    case(
        "gang-topology-not-mapping",
        put(*G, "topology", "rack"),
        "gangs.g.topology",
        "expected a mapping",
    ),
    case(
        "gang-mode-unknown",
        put(*G, "topology", "mode", "strict"),
        "gangs.g.topology.mode",
        "one of required, preferred, unconstrained, got 'strict'",
    ),
    case(
        "gang-required-without-level",
        drop(*G, "topology", "level"),
        "gangs.g.topology.level",
        "mode 'required' needs a level",
    ),
    case(
        "gang-preferred-without-level",
        put(*G, "topology", {"mode": "preferred"}),
        "gangs.g.topology.level",
        "mode 'preferred' needs a level",
    ),
    case(
        "gang-level-not-string",
        put(*G, "topology", "level", 3),
        "gangs.g.topology.level",
        "a non-empty string, got 3",
    ),
    case(
        "gang-slices-not-list",
        put(*G, "slices", {"level": "rack"}),
        "gangs.g.slices",
        "a list of slices",
    ),
    case(
        "gang-slices-too-many",
        put(*G, "slices", [{"level": "rack", "size": 1}] * 4),
        "gangs.g.slices",
        "at most 3 slice layers, got 4",
    ),
    case(
        "gang-slice-not-mapping",
        put(*G, "slices", ["rack"]),
        "gangs.g.slices[0]",
        "expected a mapping",
    ),
    case(
        "gang-slice-level-missing",
        drop(*G, "slices", 0, "level"),
        "gangs.g.slices[0].level",
        "got nothing",
    ),
    case(
        "gang-slice-size-missing",
        drop(*G, "slices", 0, "size"),
        "gangs.g.slices[0].size",
        "an integer >= 1, got nothing",
    ),
    case(
        "gang-slice-size-zero",
        put(*G, "slices", 0, "size", 0),
        "gangs.g.slices[0].size",
        "an integer >= 1, got 0",
    ),
    case(
        "gang-slice-inner-not-dividing",
        put(*G, "slices", [{"level": "rack", "size": 4}, {"level": "node", "size": 3}]),
        "gangs.g.slices[1].size",
        "size 3 does not divide the enclosing slice's size 4",
    ),
    case(
        "gang-pods-not-multiple-of-slice",
        put(*G, "slices", [{"level": "rack", "size": 3}]),
        "gangs.g.slices[0].size",
        "the gang has 4 pod(s), not a multiple of the outermost slice size 3",
    ),
    case(
        "gang-sameGpuModel-not-bool",
        put(*G, "sameGpuModel", "yes"),
        "gangs.g.sameGpuModel",
        "true or false, got 'yes'",
    ),
    case(
        "gang-solver-unknown",
        put(*G, "solver", "cp-sat"),
        "gangs.g.solver",
        "one of auto, greedy, exact",
    ),
    case(
        "gang-timeLimitS-zero",
        put(*G, "timeLimitS", 0),
        "gangs.g.timeLimitS",
        "a finite number > 0, got 0",
    ),
    case(
        "gang-name-not-string", put("gangs", 5, {}), "gangs", "non-empty string gang names, got 5"
    ),
]


@pytest.mark.parametrize("mutate, where, what", REQUEST_ERRORS)
def test_request_errors(mutate: Mutation, where: str, what: str) -> None:
    doc = request_doc()
    mutate(doc)
    expect_error(V.request_from_dict, doc, where, what)


def test_request_defaults_and_expansion() -> None:
    req = V.request_from_dict(request_doc())
    assert (req.policy, req.seed, req.solver, req.time_limit_s) == ("best-fit", 0, "auto", 10.0)
    assert [p.name for p in req.pods] == ["dev", "llm-0", "llm-1", "llm-2", "llm-3"]
    dev, llm0 = req.pods[0], req.pods[1]
    assert dev.shared and dev.gpu_milli == 300 and dev.gang is None
    assert llm0.gpu_milli == 1000 and llm0.gang == "g" and llm0.gpu_models == ("H100",)
    assert llm0.tolerations[0].operator == "Exists" and llm0.tolerations[0].effect == "NoSchedule"
    assert all(p == llm0.__class__(**{**_fields(llm0), "name": p.name}) for p in req.pods[1:])
    g = req.gangs["g"]
    assert (g.name, g.mode, g.level, g.same_gpu_model, g.solver, g.time_limit_s) == (
        "g",
        "required",
        "block",
        True,
        None,
        None,
    )
    assert [(s.level, s.size) for s in g.slices] == [("rack", 2)]


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__struct_fields__}


def test_request_explicit_settings() -> None:
    doc = request_doc()
    doc.update(policy="fgd", seed=2**64 - 1, solver="exact", timeLimitS=3)
    doc["gangs"]["g"].update(sameGpuModel=False, solver="greedy", timeLimitS=0.5)
    doc["pods"][0]["tolerations"] = [{"key": "gpu", "value": "present"}]
    req = V.request_from_dict(doc)
    assert (req.policy, req.seed, req.solver, req.time_limit_s) == ("fgd", 2**64 - 1, "exact", 3.0)
    assert isinstance(req.time_limit_s, float)
    g = req.gangs["g"]
    assert (g.same_gpu_model, g.solver, g.time_limit_s) == (False, "greedy", 0.5)
    assert req.pods[0].tolerations[0].operator == "Equal"


def test_request_empty_pod_list_is_valid() -> None:
    doc = request_doc()
    doc["pods"] = []
    del doc["gangs"]
    assert V.request_from_dict(doc).pods == ()


def test_request_unconstrained_gang_needs_no_level() -> None:
    doc = request_doc()
    doc["gangs"]["g"] = {}
    assert V.request_from_dict(doc).gangs["g"].mode == "unconstrained"


def test_request_nested_slices_that_divide() -> None:
    doc = request_doc()
    doc["pods"][1]["replicas"] = 8
    doc["gangs"]["g"]["slices"] = [
        {"level": "block", "size": 8},
        {"level": "rack", "size": 4},
        {"level": "node", "size": 2},
    ]
    assert [s.size for s in V.request_from_dict(doc).gangs["g"].slices] == [8, 4, 2]


# ----------------------------------------------------------------------------- request against snapshot


def _cross(mutate: Mutation | None = None) -> PlacementRequest:
    """The request of :func:`request_doc` (changed by ``mutate``), checked against :func:`snapshot_doc`."""
    doc = request_doc()
    if mutate is not None:
        mutate(doc)
    request = V.request_from_dict(doc)
    V.check_request_against_snapshot(request, V.snapshot_from_dict(snapshot_doc()))
    return request


CROSS_ERRORS = [
    case(
        "resources-in-a-gang",
        put(*R1, "resources", {"nvidia.com/mig-1g.10gb": 1}),
        "pods[1].resources",
        "pod 'llm-0' of gang 'g' asks for extended resources",
    ),
    case(
        "unknown-gang-level",
        put(*G, "topology", "level", "zone"),
        "gangs.g.topology.level",
        "unknown topology level 'zone'; the snapshot has: block, rack, node",
    ),
    case(
        "unknown-slice-level",
        put(*G, "slices", 0, "level", "nvlDomain"),
        "gangs.g.slices[0].level",
        "unknown topology level 'nvlDomain'",
    ),
    case(
        "slices-not-inward",
        put(*G, "slices", [{"level": "rack", "size": 4}, {"level": "block", "size": 2}]),
        "gangs.g.slices[1].level",
        "not inside the enclosing slice's level 'rack'",
    ),
]


@pytest.mark.parametrize("mutate, where, what", CROSS_ERRORS)
def test_request_against_snapshot_errors(mutate: Mutation, where: str, what: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        _cross(mutate)
    assert info.value.where == where
    assert what in info.value.what


def test_request_against_snapshot_accepts_known_names() -> None:
    sliced = _cross(put(*G, "slices", [{"level": "rack", "size": 2}, {"level": "node", "size": 1}]))
    assert [(s.level, s.size) for s in sliced.gangs["g"].slices] == [("rack", 2), ("node", 1)]
    assert _cross(put(*G, "topology", "level", "node")).gangs["g"].level == "node"
    models = _cross(put(*R1, "gpuModels", ["A100", "H100"]))
    assert {p.gpu_models for p in models.pods if p.gang == "g"} == {("A100", "H100")}


def test_request_against_snapshot_index_counts_expanded_pods() -> None:
    doc = request_doc()
    doc["gangs"]["h"] = {}
    doc["pods"].append({"name": "late", "gang": "h", "resources": {"example.com/x": 1}})
    with pytest.raises(InvalidInputError) as info:
        V.check_request_against_snapshot(
            V.request_from_dict(doc), V.snapshot_from_dict(snapshot_doc())
        )
    assert info.value.where == "pods[5].resources"
    assert "pod 'late'" in info.value.what


def test_a_gpu_model_no_node_has_is_no_input_error() -> None:
    doc = request_doc()
    doc["pods"][0]["gpuModels"] = ["B200"]
    assert _cross(put(*R0, "gpuModels", ["B200"])).pods[0].gpu_models == ("B200",)
    result = placer.place(snapshot_doc(), doc)  # accepted: the pod stays pending when placed
    assert [u.pod for u in result.unschedulable if "B200" in u.reason] == ["dev"]


# ----------------------------------------------------------------------------- result

A0 = ("assignments", 0)
RG = ("gangs", 0)

RESULT_ERRORS = [
    case("assignments-not-list", put("assignments", {}), "assignments", "a list, got a mapping"),
    case(
        "assignment-not-mapping", put("assignments", 0, "a"), "assignments[0]", "a mapping, got 'a'"
    ),
    case("assignment-pod-missing", drop(*A0, "pod"), "assignments[0].pod", "got nothing"),
    case("assignment-node-not-string", put(*A0, "node", 3), "assignments[0].node", "got 3"),
    case(
        "assignment-gpus-not-list",
        put(*A0, "gpus", 0),
        "assignments[0].gpus",
        "a list of GPU indices, got 0",
    ),
    case("assignment-gpu-negative", put(*A0, "gpus", [0, -1]), "assignments[0].gpus[1]", "got -1"),
    case(
        "assignment-gpu-bool",
        put(*A0, "gpus", [False]),
        "assignments[0].gpus[0]",
        "got false (a boolean)",
    ),
    case(
        "assignment-gpuMilli-zero",
        put(*A0, "gpuMilli", 0),
        "assignments[0].gpuMilli",
        "an integer in 1..1000, got 0",
    ),
    case(
        "assignment-gang-not-string", put(*A0, "gang", ["g"]), "assignments[0].gang", "got a list"
    ),
    case(
        "assignment-nics-entry",
        put(*A0, "nics", ["mlx5_0", 1]),
        "assignments[0].nics[1]",
        "a non-empty string, got 1",
    ),
    case("unschedulable-not-list", put("unschedulable", "b"), "unschedulable", "a list, got 'b'"),
    case(
        "unschedulable-reason-missing",
        drop("unschedulable", 0, "reason"),
        "unschedulable[0].reason",
        "got nothing",
    ),
    case(
        "unschedulable-pod-int", put("unschedulable", 0, "pod", 1), "unschedulable[0].pod", "got 1"
    ),
    case("gangs-not-list", put("gangs", {"g": {}}), "gangs", "a list, got a mapping"),
    case(
        "gang-placed-missing", drop(*RG, "placed"), "gangs[0].placed", "true or false, got nothing"
    ),
    case("gang-placed-int", put(*RG, "placed", 1), "gangs[0].placed", "true or false, got 1"),
    case("gang-name-missing", drop(*RG, "name"), "gangs[0].name", "got nothing"),
    case(
        "gang-solver-unknown",
        put(*RG, "solver", "exact"),
        "gangs[0].solver",
        "one of greedy, cp-sat, got 'exact'",
    ),
    case(
        "gang-status-unknown",
        put(*RG, "status", "done"),
        "gangs[0].status",
        "one of optimal, feasible, infeasible, unknown",
    ),
    case(
        "gang-domains-not-mapping",
        put(*RG, "domains", ["b1/r1"]),
        "gangs[0].domains",
        "a mapping of level to domain names",
    ),
    case(
        "gang-domains-entry",
        put(*RG, "domains", "rack", ["b1/r1", 2]),
        "gangs[0].domains.rack[1]",
        "a non-empty string, got 2",
    ),
    case(
        "gang-objective-string",
        put(*RG, "objective", "1.5"),
        "gangs[0].objective",
        "a finite number, got '1.5'",
    ),
    case("gang-bound-bool", put(*RG, "bound", True), "gangs[0].bound", "got true (a boolean)"),
]


@pytest.mark.parametrize("mutate, where, what", RESULT_ERRORS)
def test_result_errors(mutate: Mutation, where: str, what: str) -> None:
    doc = result_doc()
    mutate(doc)
    expect_error(V.result_from_dict, doc, where, what)


def test_result_fields() -> None:
    doc = result_doc()
    doc["assignments"][0].update(gpuMilli=300, gang="g", nics=["mlx5_0"])
    doc["gangs"][0].update(objective=3, bound=2.5)
    res = V.result_from_dict(doc)
    a = res.assignments[0]
    assert (a.pod, a.node, a.gpus, a.gpu_milli, a.gang, a.nics) == (
        "a",
        "n0",
        (0, 1),
        300,
        "g",
        ("mlx5_0",),
    )
    assert res.unschedulable[0].reason.startswith("0/3 nodes")
    g = res.gangs[0]
    assert (g.placed, g.solver, g.status, dict(g.domains), g.objective, g.bound) == (
        True,
        "greedy",
        "optimal",
        {"rack": ("b1/r1",)},
        3.0,
        2.5,
    )


def test_result_lists_may_be_left_out() -> None:
    res = V.result_from_dict({"apiVersion": "placer/v1", "kind": "PlacementResult"})
    assert res == PlacementResult()


# ----------------------------------------------------------------------------- files


def test_file_empty() -> None:
    path = DATA / "empty.json"
    expect_error(V.load_document, path, f"{path}:1", "empty file")


def test_file_whitespace_only(tmp_path: Path) -> None:
    path = tmp_path / "blank.yaml"
    path.write_text("\n  \n\n")
    expect_error(V.load_document, path, f"{path}:1", "empty file")


def test_file_yaml_comments_only(tmp_path: Path) -> None:
    path = tmp_path / "comments.yaml"
    path.write_text("# nothing here\n")
    expect_error(V.load_document, path, f"{path}:1", "empty document")


def test_file_truncated_json() -> None:
    path = DATA / "truncated.json"
    expect_error(V.load_document, path, f"{path}:6", "invalid JSON")


def test_file_json_error_line(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '{\n  "apiVersion": "placer/v1",\n  "kind": "ClusterSnapshot"\n  "nodes": []\n}\n'
    )
    expect_error(V.load_document, path, f"{path}:4", "Expecting ',' delimiter")


def test_file_bad_yaml() -> None:
    path = DATA / "bad.yaml"
    expect_error(V.load_document, path, f"{path}:6", "invalid YAML")


def test_file_bad_yaml_tab(tmp_path: Path) -> None:
    path = tmp_path / "s.yml"
    path.write_text("apiVersion: placer/v1\nkind: ClusterSnapshot\nnodes:\n\t- name: n0\n")
    expect_error(V.load_document, path, f"{path}:4", "invalid YAML")


def test_file_missing(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    expect_error(V.load_document, path, str(path), "no such file")


def test_file_directory(tmp_path: Path) -> None:
    expect_error(V.load_document, tmp_path, str(tmp_path), "got a directory")


def test_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b'{\n"kind": "\xff"}\n')
    expect_error(V.load_document, path, f"{path}:2", "expected UTF-8 text, got byte 0xff")


def test_file_top_level_not_mapping(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("[1, 2]")
    expect_error(V.load_document, path, str(path), "a mapping at the top level, got a list")


def test_file_yaml_equals_json() -> None:
    from_json = V.coerce_snapshot(DATA / "snapshot.json")
    from_yaml = V.coerce_snapshot(DATA / "snapshot.yaml")
    assert from_yaml == from_json
    assert from_json.nodes[0].pods[1].gpu_shares == {2: 500}
    assert from_json.nodes[1].hardware.cpu_milli == 112000


@pytest.mark.parametrize("source", ["snapshot.json", "snapshot.yaml"])
def test_file_other_extension_is_sniffed(tmp_path: Path, source: str) -> None:
    path = tmp_path / "snapshot.txt"
    path.write_bytes((DATA / source).read_bytes())
    assert V.coerce_snapshot(path) == V.coerce_snapshot(DATA / "snapshot.json")


def test_file_other_extension_reports_json_error_for_json_text(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    path.write_text('{"a": 1,\n "b": [1,\n')
    expect_error(V.load_document, path, f"{path}:3", "invalid JSON")


def test_file_other_extension_falls_back_to_yaml_flow_style(tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    path.write_text("{a: 1, b: [x]}\n")
    assert V.load_document(path) == {"a": 1, "b": ["x"]}


def test_file_errors_get_the_file_name(tmp_path: Path) -> None:
    path = DATA / "bad-gpu-index.json"
    err = expect_error(
        V.coerce_snapshot,
        path,
        f"{path}: nodes[0].pods[0].gpus[1]",
        "GPU index 9 out of range 0..7",
    )
    assert str(err) == f"{path}: nodes[0].pods[0].gpus[1]: GPU index 9 out of range 0..7"


def test_file_wrong_kind_gets_the_file_name() -> None:
    path = DATA / "snapshot.json"
    expect_error(
        V.coerce_request,
        str(path),
        f"{path}: kind",
        "expected 'PlacementRequest', got 'ClusterSnapshot'",
    )


def test_file_request_and_result(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(request_doc()))
    (tmp_path / "o.json").write_text(json.dumps(result_doc()))
    assert V.coerce_request(tmp_path / "r.yaml") == V.request_from_dict(request_doc())
    assert V.coerce_result(str(tmp_path / "o.json")) == V.result_from_dict(result_doc())


# ----------------------------------------------------------------------------- coerce and CLI helpers


def test_coerce_returns_model_objects_as_they_are() -> None:
    snap = V.snapshot_from_dict(snapshot_doc())
    req = V.request_from_dict(request_doc())
    res = V.result_from_dict(result_doc())
    assert V.coerce_snapshot(snap) is snap
    assert V.coerce_request(req) is req
    assert V.coerce_result(res) is res
    assert isinstance(V.coerce_snapshot(snapshot_doc()), ClusterSnapshot)
    assert isinstance(V.coerce_request(request_doc()), PlacementRequest)


def test_coerce_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="got int"):
        V.coerce_snapshot(3)


def test_check_policy() -> None:
    assert V.check_policy("fgd", "--policy") == "fgd"
    expect_error(lambda v: V.check_policy(v, "--policy"), "fastest", "--policy", "one of best-fit")


def test_check_solver() -> None:
    assert V.check_solver("greedy") == "greedy"
    expect_error(V.check_solver, "cp-sat", "solver", "one of auto, greedy, exact")


@pytest.mark.parametrize("value, expected", [(0, 0), ("42", 42), (2**64 - 1, 2**64 - 1)])
def test_check_seed_accepts(value: Any, expected: int) -> None:
    assert V.check_seed(value, "--seed") == expected


@pytest.mark.parametrize(
    "value, got",
    [
        (-1, "got -1"),
        ("-1", "got '-1'"),
        (True, "true (a boolean)"),
        (1.0, "1.0 (a float)"),
        (2**64, str(2**64)),
        ("x", "'x'"),
    ],
)
def test_check_seed_rejects(value: Any, got: str) -> None:
    expect_error(lambda v: V.check_seed(v, "--seed"), value, "--seed", got)


def test_check_time_limit() -> None:
    assert V.check_time_limit(2) == 2.0
    assert V.check_time_limit("0.5", "--time-limit") == 0.5
    expect_error(V.check_time_limit, 0, "timeLimitS", "a finite number > 0, got 0")
    expect_error(
        lambda v: V.check_time_limit(v, "--time-limit"),
        "inf",
        "--time-limit",
        "a finite number > 0",
    )


@pytest.mark.parametrize(
    "mutate, where, what",
    [
        case("pod", put(*R0, "gpu", 1), "pods[0]", 'unknown field "gpu" (did you mean "gpus"?)'),
        case("gang", put(*G, "slice", []), "gangs.g", '(did you mean "slices"?)'),
        case("top", put("polcy", "fgd"), "", '(did you mean "policy"?)'),
    ],
)
def test_request_unknown_fields_are_errors(mutate: Mutation, where: str, what: str) -> None:
    doc = request_doc()
    mutate(doc)
    expect_error(V.request_from_dict, doc, where, what)
