"""HAMi's GPU-sharing expectations restated as placer cases (issue #34, sharing subset).

HAMi (``pkg/device/nvidia``): ``nvidia.com/gpucores: 100`` asks for a GPU's whole compute, so
no other share may sit on that GPU, and such a pod cannot go on a GPU another share already
uses. In placer a pod with ``gpus: 1`` and ``gpuMilli: 1000`` is that exclusive use: it takes
a whole GPU, which no share can then enter, and it never lands on a partly used GPU.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer import check_placement, place
from placer.model import (
    ClusterSnapshot,
    Node,
    NodeType,
    PlacementRequest,
    PodRequest,
    RunningPod,
)
from reference import ReferenceCluster

POLICIES = ("best-fit", "first-fit", "fgd", "fgd-pack")


def node(name: str, gpus: int, *pods: RunningPod) -> Node:
    return Node(name, NodeType(gpus=gpus, gpu_model="A100", gpu_memory_mib=40960), pods=pods)


def share(name: str, milli: int) -> PodRequest:
    return PodRequest(name, gpus=1, gpu_milli=milli)


def held_milli(snapshot: ClusterSnapshot, result, request: PlacementRequest) -> dict:
    """Per (node, GPU): the list of (pod, milli) every pod, running or placed, holds there."""
    held: dict = {}
    for n in snapshot.nodes:
        for p in n.pods:
            for g in p.gpus:
                held.setdefault((n.name, g), []).append((p.name, 1000))
            for g, m in p.gpu_shares.items():
                held.setdefault((n.name, int(g)), []).append((p.name, m))
    for a in result.assignments:
        milli = a.gpu_milli if a.gpu_milli is not None else 1000
        for g in a.gpus:
            held.setdefault((a.node, g), []).append((a.pod, milli))
    return held


def assert_exclusive_alone(snapshot, request, result) -> None:
    """Every GPU held at 1000 milli by one pod holds no other pod (checked from the output)."""
    for (n, g), pods in held_milli(snapshot, result, request).items():
        if any(m == 1000 for _, m in pods):
            assert len(pods) == 1, f"{n} GPU {g} holds an exclusive pod and others: {pods}"


@pytest.mark.parametrize("policy", POLICIES)
def test_exclusive_pod_skips_the_gpu_a_share_uses(policy):
    # HAMi: a gpucores-100 pod does not fit a device that already has a share on it
    snap = ClusterSnapshot(nodes=(node("n0", 1, RunningPod("s", gpu_shares={0: 200})),
                                  node("n1", 1)))
    req = PlacementRequest(pods=(share("x", 1000),))
    result = place(snap, req, policy=policy)
    assert check_placement(snap, req, result) == []
    assert [(a.pod, a.node) for a in result.assignments] == [("x", "n1")]


@pytest.mark.parametrize("policy", POLICIES)
def test_share_does_not_enter_a_gpu_held_exclusively(policy):
    # HAMi: once a device is used exclusively (gpucores 100), no share is added to it
    snap = ClusterSnapshot(nodes=(node("n0", 2),))
    req = PlacementRequest(pods=(share("x", 1000), share("a", 100), share("b", 100)))
    result = place(snap, req, policy=policy)
    assert check_placement(snap, req, result) == []
    gpu_of = {a.pod: a.gpus for a in result.assignments}
    assert set(gpu_of) == {"x", "a", "b"}
    assert gpu_of["a"] == gpu_of["b"] != gpu_of["x"]
    assert_exclusive_alone(snap, req, result)


@pytest.mark.parametrize("policy", POLICIES)
def test_exclusive_pod_is_turned_away_when_every_gpu_is_shared(policy):
    snap = ClusterSnapshot(nodes=(node("n0", 2, RunningPod("s", gpu_shares={0: 100, 1: 100})),))
    req = PlacementRequest(pods=(share("x", 1000),))
    result = place(snap, req, policy=policy)
    assert check_placement(snap, req, result) == []
    assert result.assignments == () and [u.pod for u in result.unschedulable] == ["x"]


@settings(max_examples=40, deadline=None)
@given(gpus=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       millis=st.lists(st.sampled_from((100, 300, 500, 1000)), min_size=1, max_size=8))
def test_exclusive_and_shares_match_the_reference(gpus, millis):
    snap = ClusterSnapshot(nodes=tuple(node(f"n{i}", g) for i, g in enumerate(gpus)))
    req = PlacementRequest(pods=tuple(share(f"p{i}", m) for i, m in enumerate(millis)))
    result = place(snap, req, policy="best-fit")
    reference = ReferenceCluster(snap).schedule(req)
    assert check_placement(snap, req, result) == []
    assert check_placement(snap, req, reference) == []
    assert_exclusive_alone(snap, req, result)
    assert {a.pod for a in result.assignments} == {a.pod for a in reference.assignments}
