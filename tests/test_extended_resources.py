"""Extended resources (MIG profiles and the like) and GPUs held at unknown indices."""
from __future__ import annotations

import pytest

import placer
from placer.exceptions import InvalidInputError
from placer.model import Assignment, PlacementResult

MIG = "nvidia.com/mig-1g.10gb"


def snapshot():
    return placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodes": [
            {"name": "a", "cpuMilli": 16000, "resources": {MIG: {"capacity": 7, "allocatable": 2}},
             "pods": [{"name": "old", "resources": {MIG: 1}, "cpuMilli": 1000}]},
            {"name": "b", "cpuMilli": 16000, "resources": {MIG: {"capacity": 3, "allocatable": 3}}},
            {"name": "c", "cpuMilli": 16000},
        ],
    })


def mig_request(n, policy="best-fit"):
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": policy,
            "pods": [{"name": f"m{i}", "cpuMilli": 1000, "resources": {MIG: 1}} for i in range(n)]}


@pytest.mark.parametrize("policy", ["best-fit", "first-fit", "spread", "fgd"])
def test_pods_take_what_is_left_and_no_more(policy):
    snap = snapshot()
    result = placer.place(snap, mig_request(6, policy))
    per_node = {}
    for a in result.assignments:
        per_node[a.node] = per_node.get(a.node, 0) + 1
    assert per_node == {"a": 1, "b": 3}  # a has 2 allocatable, 1 held already; c offers none
    assert [u.pod for u in result.unschedulable] == ["m4", "m5"]
    assert result.unschedulable[0].reason == (
        f"0/3 nodes are available: 3 Insufficient {MIG}."
    )
    assert placer.check_placement(snap, mig_request(6, policy), result) == []


def test_checker_catches_a_node_over_allocatable():
    snap = snapshot()
    forged = PlacementResult(
        assignments=(Assignment("m0", "a"), Assignment("m1", "a")), unschedulable=(), gangs=()
    )
    problems = placer.check_placement(snap, mig_request(2), forged)
    assert problems == [f"node a: {MIG} over allocatable (3 > 2) with pod(s) m0, m1"]


def test_bind_release_and_place_without_binding():
    cluster = placer.Cluster(snapshot())
    decided = cluster.place([{"name": "x", "resources": {MIG: 3}}])
    assert [a.node for a in decided.assignments] == ["b"]
    again = cluster.place([{"name": "y", "resources": {MIG: 3}}])  # place() kept nothing
    assert [a.node for a in again.assignments] == ["b"]
    cluster.bind(decided)
    blocked = cluster.place([{"name": "z", "resources": {MIG: 1}}])
    assert [a.node for a in blocked.assignments] == ["a"]
    cluster.release("x")
    cluster.release("old")
    freed = cluster.place([{"name": "w", "resources": {MIG: 2}}])
    assert [a.node for a in freed.assignments] in (["a"], ["b"])
    assert cluster.to_snapshot().nodes[1].pods == ()


def test_gang_pods_with_extended_resources_are_refused():
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest",
               "pods": [{"name": "g", "replicas": 2, "gang": "g", "resources": {MIG: 1}}], "gangs": {"g": {}}}
    with pytest.raises(InvalidInputError) as err:
        placer.place(snapshot(), request)
    assert err.value.where == "pods[0].resources"


@pytest.mark.parametrize(
    "node, where",
    [
        ({"name": "a", "resources": {MIG: 3}}, "nodes[0].resources.nvidia.com/mig-1g.10gb"),
        ({"name": "a", "resources": {MIG: {"capacity": 1}}}, "nodes[0].resources.nvidia.com/mig-1g.10gb.allocatable"),
        ({"name": "a", "resources": {MIG: {"capacity": 1, "allocatable": -1}}},
         "nodes[0].resources.nvidia.com/mig-1g.10gb.allocatable"),
        ({"name": "a", "pods": [{"name": "p", "resources": {MIG: "1"}}]}, "nodes[0].pods[0].resources.nvidia.com/mig-1g.10gb"),
        ({"name": "a", "gpus": 2, "pods": [{"name": "p", "unknownGpus": 3}]}, "nodes[0].pods[0].unknownGpus"),
        ({"name": "a", "gpus": 2, "pods": [{"name": "p", "unknownGpus": -1}]}, "nodes[0].pods[0].unknownGpus"),
    ],
)
def test_bad_documents_name_the_path(node, where):
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [node]}
    with pytest.raises(InvalidInputError) as err:
        placer.ClusterSnapshot.from_dict(doc)
    assert err.value.where == where


def test_unknown_gpu_indices_take_the_highest_free_ones_and_round_trip():
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{
        "name": "a", "gpus": 8, "unhealthyGpus": [7],
        "pods": [{"name": "k8s-pod", "unknownGpus": 2}, {"name": "known", "gpus": [6]},
                 {"name": "share", "gpuShares": {"5": 500}}],
    }]}
    snap = placer.ClusterSnapshot.from_dict(doc)
    held = {p.name: (p.gpus, p.gpu_indices_known) for p in snap.nodes[0].pods}
    assert held["k8s-pod"] == ((3, 4), False)  # 7 unhealthy, 6 held, 5 shared
    assert held["known"] == ((6,), True)
    assert snap.to_dict()["nodes"][0]["pods"][0] == {"name": "k8s-pod", "unknownGpus": 2}
    result = placer.place(snap, {"apiVersion": "placer/v1", "kind": "PlacementRequest",
                                 "pods": [{"name": "new", "gpus": 3}]})
    assert result.assignments[0].gpus == (0, 1, 2)
