"""The kernel's batch placement against the reference, the checker, and itself."""
from __future__ import annotations


import hypothesis.strategies as st
import pytest
from hypothesis import given

from placer import place
from placer.placement.cluster import Cluster
from placer.diagnostics.check import check_placement
from placer.model import ClusterSnapshot
from placer.testing import placement_requests, snapshots
from placer.model import replace
from reference import ReferenceCluster


@st.composite
def cases(draw):
    snapshot = draw(snapshots(max_nodes=8))
    request = draw(placement_requests(snapshot))
    return snapshot, request


@given(cases())
def test_schedule_matches_reference_and_passes_checker(case):
    snapshot, request = case
    cluster = Cluster(snapshot)
    got = cluster.schedule(request)
    reference = ReferenceCluster(snapshot)
    want = reference.schedule(request)
    assert got.assignments == want.assignments
    assert got.unschedulable == want.unschedulable
    assert [(g.name, g.placed) for g in got.gangs] == [(g.name, g.placed) for g in want.gangs]
    assert check_placement(snapshot, request, got) == []
    for node in snapshot.nodes:
        mine = cluster.node_free(node.name)
        theirs = reference.node_free(node.name)
        assert (mine.cpu_milli, mine.memory_mib, mine.pods) == (
            theirs["cpu_milli"], theirs["memory_mib"], theirs["pods"])
        assert mine.gpu_milli == tuple(theirs["gpu_milli"])
        assert mine.gpu_memory_mib == tuple(theirs["gpu_memory_mib"])


@given(cases())
def test_every_pod_reported_once(case):
    snapshot, request = case
    result = place(snapshot, request)
    names = [a.pod for a in result.assignments] + [u.pod for u in result.unschedulable]
    assert sorted(names) == sorted(p.name for p in request.pods)


@given(cases(), st.integers(0, 2**63))
def test_same_seed_same_result(case, seed):
    snapshot, request = case
    request = replace(request, policy="random", seed=seed)
    assert place(snapshot, request) == place(snapshot, request)


@given(cases())
def test_snapshot_round_trips_through_cluster(case):
    snapshot, request = case
    assert Cluster(snapshot).to_snapshot() == snapshot
    cluster = Cluster(snapshot)
    cluster.schedule(request)
    after = cluster.to_snapshot()
    assert ClusterSnapshot.from_dict(after.to_dict()) == after
    reloaded = Cluster(after)
    for node in snapshot.nodes:
        assert reloaded.node_free(node.name) == cluster.node_free(node.name)


@given(cases())
def test_place_does_not_change_state_and_bind_release_restore_it(case):
    snapshot, request = case
    cluster = Cluster(snapshot)
    before = [cluster.node_free(n.name) for n in snapshot.nodes]
    pods = [replace(p, gang=None) for p in request.pods]
    decision = cluster.place(pods, policy=request.policy, seed=request.seed)
    assert [cluster.node_free(n.name) for n in snapshot.nodes] == before
    cluster.bind(decision)
    for a in decision.assignments:
        cluster.release(a.pod)
    assert [cluster.node_free(n.name) for n in snapshot.nodes] == before


def _one_node(gpus: int, held: list[int]) -> dict:
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodes": [
            {"name": "a", "gpus": gpus, "gpuModel": "A100", "cpuMilli": 8000,
             "pods": [{"name": "old", "gpus": held}] if held else []},
        ],
    }


def test_bind_refuses_what_no_longer_fits():
    cluster = Cluster(_one_node(2, []))
    first = cluster.place({"name": "x", "gpus": 2})
    second = cluster.place({"name": "y", "gpus": 2})
    cluster.bind(first)
    with pytest.raises(Exception, match="does not fit"):
        cluster.bind(second)
    with pytest.raises(Exception, match="already bound"):
        cluster.bind(first)


def test_release_of_running_pod_frees_its_gpus():
    cluster = Cluster(_one_node(4, [0, 1, 2]))
    assert cluster.place({"name": "x", "gpus": 2}).assignments == ()
    cluster.release("old")
    result = cluster.place({"name": "x", "gpus": 2})
    assert result.assignments[0].gpus == (0, 1)
