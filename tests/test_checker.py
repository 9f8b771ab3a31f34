"""placer.diagnostics.check.check_placement: accepts valid placements, names every violation."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings

from placer.diagnostics.check import check_placement
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    Node,
    NodeType,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    RunningPod,
    SliceSpec,
    Taint,
    Toleration,
    Unschedulable,
)
from placer.testing import scenarios
from placer.model import replace
from reference import ReferenceCluster

# --------------------------------------------------------------------------- generated

@settings(max_examples=50, deadline=None)
@given(scenarios())
def test_reference_placements_are_valid(case):
    snapshot, request = case
    result = ReferenceCluster(snapshot).schedule(request)
    assert check_placement(snapshot, request, result) == []


@settings(max_examples=50, deadline=None)
@given(scenarios(levels=("block", "rack"), max_nodes=6))
def test_reference_placements_are_valid_two_levels(case):
    snapshot, request = case
    result = ReferenceCluster(snapshot).schedule(request)
    assert check_placement(snapshot, request, result) == []
    if result.assignments:
        dropped = replace(result, assignments=result.assignments[1:])
        pod = result.assignments[0].pod
        assert any(v.startswith(f"pod {pod}: missing") for v in check_placement(snapshot, request, dropped))


@settings(max_examples=50, deadline=None)
@given(scenarios(levels=("block", "rack")))
def test_generated_inputs_are_valid_documents_and_dicts_are_accepted(case):
    snapshot, request = case
    assert ClusterSnapshot.from_dict(snapshot.to_dict()) == snapshot
    assert PlacementRequest.from_dict(request.to_dict()) == request
    result = ReferenceCluster(snapshot).schedule(request)
    assert check_placement(snapshot.to_dict(), request.to_dict(), result.to_dict()) == []


# --------------------------------------------------------------------------- hand-made case

TOL = (Toleration(key="dedicated", operator="Exists"),)


def hw(gpus=0, model=None, **kw) -> NodeType:
    return NodeType(gpus=gpus, gpu_model=model, **kw)


SNAP = ClusterSnapshot(
    topology_levels=("rack",),
    nodes=(
        Node("n0", hw(8, "A100", gpu_memory_mib=40960, cpu_milli=16000, memory_mib=65536, max_pods=8),
             topology={"rack": "r0"},
             pods=(RunningPod("run-a", gpus=(0,)),
                   RunningPod("run-b", gpu_shares={1: 600}, gpu_memory_mib={1: 20000}, cpu_milli=2000))),
        Node("n1", hw(4, "H100", cpu_milli=16000, memory_mib=65536), topology={"rack": "r1"},
             labels={"pool": "train"}, taints=(Taint("dedicated", "NoSchedule", "x"),)),
        Node("n2", hw(4, "A100"), topology={"rack": "r0"}, unschedulable=True),
        Node("n3", hw(3, "A100"), topology={"rack": "r1"}, labels={"pool": "train"}, unhealthy_gpus=(1,)),
        Node("n4", hw(cpu_milli=16000, memory_mib=65536, max_pods=1)),
    ),
)

PODS = {
    "w": PodRequest("w", gpus=2, cpu_milli=4000, memory_mib=40000),
    "s": PodRequest("s", gpus=1, gpu_milli=300, gpu_memory_mib=10000),
    "c": PodRequest("c", cpu_milli=12000, memory_mib=30000),
    "t": PodRequest("t", gpus=1, tolerations=TOL, node_selector={"pool": "train"}, gpu_models=("H100",)),
    "g-0": PodRequest("g-0", gpus=1, tolerations=TOL, gang="g"),
    "g-1": PodRequest("g-1", gpus=1, tolerations=TOL, gang="g"),
    "u": PodRequest("u", cpu_milli=100),
}
GANG = GangSpec("g", mode="required", level="rack", same_gpu_model=False)
REQ = PlacementRequest(pods=tuple(PODS.values()), gangs={"g": GANG})
RESULT = PlacementResult(
    assignments=(
        Assignment("w", "n0", (2, 3)),
        Assignment("s", "n0", (1,), gpu_milli=300),
        Assignment("c", "n4"),
        Assignment("t", "n1", (0,)),
        Assignment("g-0", "n1", (1,), gang="g"),
        Assignment("g-1", "n3", (0,), gang="g"),
    ),
    unschedulable=(Unschedulable("u", "0/5 nodes are available: 1 Too many pods."),),
    gangs=(GangResult("g", True),),
)


def moved(pod: str, result: PlacementResult = RESULT, **changes) -> PlacementResult:
    return replace(result, assignments=tuple(
        replace(a, **changes) if a.pod == pod else a for a in result.assignments))


def dropped(pod: str, result: PlacementResult = RESULT) -> PlacementResult:
    return replace(result, assignments=tuple(a for a in result.assignments if a.pod != pod))


def with_pod(**changes) -> PlacementRequest:
    name = changes.pop("name")
    pods = tuple(replace(p, **changes) if p.name == name else p for p in REQ.pods)
    return replace(REQ, pods=pods)


def with_gang(**changes) -> PlacementRequest:
    return replace(REQ, gangs={"g": replace(GANG, **changes)})


def violations(result=RESULT, request=REQ, snapshot=SNAP) -> list[str]:
    return check_placement(snapshot, request, result)


def has(vs: list[str], *parts: str) -> bool:
    return any(all(p in v for p in parts) for v in vs)


def test_hand_made_result_is_valid():
    assert violations() == []


@pytest.mark.parametrize(
    "result, request_, parts",
    [
        # GPUs
        (moved("w", gpus=(0, 3)), REQ, ("node n0 GPU 0", "held whole by run-a", "w")),
        (moved("g-1", node="n1", gpus=(0,)), REQ, ("node n1 GPU 0", "held whole by t", "g-1")),
        (moved("s", gpus=(2,)), REQ, ("node n0 GPU 2", "held whole by w", "s")),
        (moved("s", gpu_milli=200), REQ, ("pod s on node n0", "gpuMilli 200")),
        (moved("s", gpu_milli=500), with_pod(name="s", gpu_milli=500), ("node n0 GPU 1", "1100 milli", "s=500")),
        (RESULT, with_pod(name="s", gpu_memory_mib=25000), ("node n0 GPU 1", "GPU memory 45000 MiB > 40960")),
        (RESULT, with_pod(name="w", gpu_memory_mib=50000), ("pod w on node n0", "50000 MiB per GPU")),
        (moved("g-1", gpus=(1,)), REQ, ("pod g-1 on node n3", "GPU 1 is unhealthy")),
        (moved("g-1", gpus=(7,)), REQ, ("pod g-1 on node n3", "GPU 7 out of range")),
        (moved("w", gpus=(2,)), REQ, ("pod w on node n0", "got 1 GPU(s)", "asks for 2")),
        (moved("w", gpus=(2, 2)), REQ, ("pod w on node n0", "GPU indices repeat")),
        (moved("w", gpu_milli=500), REQ, ("pod w on node n0", "gpuMilli 500")),
        # node capacity
        (moved("c", node="n0"), REQ, ("node n0", "cpuMilli over capacity (18000 > 16000)", "c")),
        (moved("c", node="n0"), REQ, ("node n0", "memoryMiB over capacity (70000 > 65536)", "c")),
        (replace(RESULT, assignments=RESULT.assignments + (Assignment("u", "n4"),), unschedulable=()),
         REQ, ("node n4", "pods over capacity (2 > 1)", "u")),
        # filters
        (moved("c", node="n2"), REQ, ("pod c on node n2", "cordoned")),
        (moved("c", node="n1"), REQ, ("pod c on node n1", "taint dedicated=x:NoSchedule is not tolerated")),
        (moved("t", node="n0", gpus=(4,)), REQ, ("pod t on node n0", "nodeSelector pool=train")),
        (moved("t", node="n3", gpus=(2,)), REQ, ("pod t on node n3", "GPU model 'A100' is not one of ['H100']")),
        (moved("c", node="n9"), REQ, ("pod c on node n9", "no such node")),
        # every pod once
        (dropped("c"), REQ, ("pod c: missing",)),
        (replace(RESULT, unschedulable=RESULT.unschedulable + (Unschedulable("c", "x"),)), REQ,
         ("pod c: reported unschedulable but already assigned to node n4",)),
        (replace(RESULT, assignments=RESULT.assignments + (Assignment("c", "n0"),)), REQ,
         ("pod c: assigned to node n0 but already assigned to node n4",)),
        (replace(RESULT, assignments=RESULT.assignments + (Assignment("ghost", "n0"),)), REQ,
         ("pod ghost", "not in the request")),
        (replace(RESULT, unschedulable=(Unschedulable("u", ""),)), REQ, ("pod u", "without a reason")),
        # gangs
        (replace(dropped("g-1"), unschedulable=RESULT.unschedulable + (Unschedulable("g-1", "x"),)),
         REQ, ("gang g: only 1 of 2", "g-0 on node n1", "not assigned: g-1")),
        (moved("g-1", node="n0", gpus=(4,)), REQ, ("gang g required rack", "g-1 on node n0 is in rack r0", "r1")),
        (moved("g-1", node="n4", gpus=()), REQ, ("gang g required rack", "g-1 on node n4", "no rack domain")),
        (RESULT, with_gang(level="node"), ("gang g required node", "g-1 on node n3", "g-0 on node n1")),
        (RESULT, with_gang(same_gpu_model=True), ("gang g: sameGpuModel", "H100: g-0 on node n1", "A100: g-1")),
        (RESULT, with_gang(mode="unconstrained", slices=(SliceSpec("node", 2),)),
         ("gang g slice 0 (node, size 2)", "g-1 on node n3")),
        (moved("c", gang="g"), REQ, ("pod c on node n4", "gang 'g'")),
        (moved("g-0", gang=None), REQ, ("pod g-0 on node n1", "gang None")),
        (replace(RESULT, gangs=(GangResult("g", False),)), REQ, ("gang g: reported placed=False",)),
    ],
)
def test_each_violation_is_reported(result, request_, parts):
    vs = violations(result, request_)
    assert has(vs, *parts), vs


def test_unconstrained_gang_in_two_racks_and_size_one_slices_are_fine():
    assert violations(moved("g-1", node="n0", gpus=(4,)), with_gang(mode="unconstrained")) == []
    assert violations(RESULT, with_gang(slices=(SliceSpec("rack", 2), SliceSpec("node", 1)))) == []


def test_partial_gang_is_the_only_complaint_when_nothing_else_is_wrong():
    r = replace(dropped("g-1"), unschedulable=RESULT.unschedulable + (Unschedulable("g-1", "x"),),
                            gangs=(GangResult("g", False),))
    assert len(violations(r)) == 1


def test_domains_are_whole_paths():
    snap = ClusterSnapshot(
        topology_levels=("block", "rack"),
        nodes=(Node("a", hw(1), topology={"block": "b0", "rack": "r0"}),
               Node("b", hw(1), topology={"block": "b1", "rack": "r0"}),
               Node("c", hw(1), topology={"block": "b0", "rack": "r0"})),
    )
    pods = tuple(PodRequest(f"g-{i}", gpus=1, gang="g") for i in range(2))
    request = PlacementRequest(pods=pods, gangs={"g": GangSpec("g", mode="required", level="rack")})
    ok = PlacementResult(assignments=(Assignment("g-0", "a", (0,), gang="g"), Assignment("g-1", "c", (0,), gang="g")))
    assert check_placement(snap, request, ok) == []
    bad = moved("g-1", ok, node="b")
    assert has(check_placement(snap, request, bad), "gang g required rack", "rack b1/r0", "b0/r0")


def test_checker_is_linear_on_10k_pods_and_10k_nodes():
    nodes = tuple(
        Node(f"n{i}", hw(8, "H100", cpu_milli=64000, memory_mib=512000, max_pods=8),
             topology={"rack": f"r{i // 16}"}, pods=(RunningPod(f"run{i}", gpus=(0,)),))
        for i in range(10_000)
    )
    snap = ClusterSnapshot(nodes=nodes, topology_levels=("rack",))
    pods = tuple(PodRequest(f"p{i}", gpus=1, cpu_milli=1000, gang=f"g{i // 4}") for i in range(10_000))
    gangs = {f"g{j}": GangSpec(f"g{j}", mode="required", level="rack") for j in range(2_500)}
    request = PlacementRequest(pods=pods, gangs=gangs)
    result = PlacementResult(assignments=tuple(
        Assignment(f"p{i}", f"n{i // 4 * 4}", (1 + i % 4,), gang=f"g{i // 4}") for i in range(10_000)))
    t0 = time.perf_counter()
    assert check_placement(snap, request, result) == []
    assert time.perf_counter() - t0 < 10
