"""The kernel session: one owner of what is free, all-or-nothing binds, typed pod batches."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from placer import policies
from placer.placement.cluster import Cluster
from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession, PodBatch
from placer.model import Assignment, ClusterSnapshot, Node, NodeType, RunningPod, replace
from placer.testing import placement_requests, snapshots
from reference import ReferenceCluster


def one_node(gpus: int = 4, held: tuple[int, ...] = ()) -> ClusterSnapshot:
    pods = (RunningPod("old", gpus=held, cpu_milli=1000),) if held else ()
    hw = NodeType(gpus=gpus, gpu_model="A100", cpu_milli=16000, memory_mib=64000, max_pods=8)
    return ClusterSnapshot(nodes=(Node("n0", hw, pods=pods), Node("n1", hw)))


def test_a_bind_that_does_not_fit_binds_nothing():
    cluster = Cluster(one_node())
    a = cluster.place({"name": "a", "gpus": 2}).assignments[0]
    b = cluster.place({"name": "b", "gpus": 2}).assignments[0]
    assert a.node == b.node == "n0" and a.gpus == b.gpus  # decided apart: the same GPUs
    before = (cluster.node_free("n0"), cluster.node_free("n1"))
    with pytest.raises(InvalidInputError) as info:
        cluster.bind([a, b])
    assert info.value.where == "b" and "does not fit on n0" in info.value.what
    assert (cluster.node_free("n0"), cluster.node_free("n1")) == before
    assert not cluster.session.holds("a")
    cluster.bind(a)  # alone it fits
    assert cluster.node_free("n0").gpu_milli == (0, 0, 1000, 1000)


def test_a_bind_that_names_a_pod_twice_binds_nothing():
    cluster = Cluster(one_node())
    a = cluster.place({"name": "a", "gpus": 1}).assignments[0]
    with pytest.raises(InvalidInputError, match="already bound"):
        cluster.bind([a, a])
    assert not cluster.session.holds("a")


def test_bind_checks_the_exact_gpus():
    cluster = Cluster(one_node(held=(0,)))
    cluster.place({"name": "a", "gpus": 1})
    for gpus, why in (((0,), "GPU 0 is not free"), ((1, 2), "needs 1 GPU"), ((9,), "needs 1 GPU")):
        with pytest.raises(InvalidInputError, match=why):
            cluster.bind(Assignment("a", "n0", gpus))
    cluster.bind(Assignment("a", "n0", (3,)))
    assert cluster.node_free("n0").gpu_milli == (0, 1000, 1000, 0)
    cluster.release("a")
    cluster.release("old")
    assert cluster.node_free("n0").gpu_milli == (1000,) * 4


def test_shared_pods_bind_and_release_their_share():
    cluster = Cluster(one_node(gpus=1))
    decided = cluster.place([{"name": "s1", "gpus": 1, "gpuMilli": 300}, {"name": "s2", "gpus": 1, "gpuMilli": 300}])
    cluster.bind(decided)
    assert cluster.node_free("n0").gpu_milli == (400,)
    cluster.release("s1")
    assert cluster.node_free("n0").gpu_milli == (700,)
    assert [p.name for node in cluster.to_snapshot().nodes for p in node.pods] == ["s2"]


def test_free_state_is_read_only_and_follows_binds():
    cluster = Cluster(one_node(held=(0, 1)))
    free = cluster.session.free
    with pytest.raises(ValueError):
        free.whole_gpus[0] = 4
    assert free.whole_gpus.tolist() == [2, 4] and free.cpu_milli.tolist() == [15000, 16000]
    cluster.schedule({"apiVersion": "placer/v1", "kind": "PlacementRequest",
                      "pods": [{"name": "x", "gpus": 2, "cpuMilli": 2000}]})
    assert free.whole_gpus.tolist() == [0, 4] and free.cpu_milli.tolist() == [13000, 16000]


def test_a_pod_batch_refuses_columns_of_the_wrong_type_or_length():
    ints = np.zeros(2, dtype=np.int32)
    bigs = np.zeros(2, dtype=np.int64)
    masks = np.zeros(2, dtype=np.uint64)
    eligible = np.zeros((1, 1), dtype=np.uint64)
    assert PodBatch(ints, ints, ints, bigs, bigs, ints, masks, ints, ints, eligible).size == 2
    with pytest.raises(ValueError, match="C-contiguous i8 of size 2"):
        PodBatch(ints, ints, ints, ints, bigs, ints, masks, ints, ints, eligible)  # cpu must be int64
    with pytest.raises(ValueError, match="C-contiguous u8 of size 2"):
        PodBatch(ints, ints, ints, bigs, bigs, ints, masks.astype(">u8"), ints, ints, eligible)  # native order
    with pytest.raises(ValueError, match="one value per pod"):
        PodBatch(ints, ints[:1], ints, bigs, bigs, ints, masks, ints, ints, eligible)


@st.composite
def cases(draw):
    snapshot = draw(snapshots(max_nodes=6))
    return snapshot, draw(placement_requests(snapshot))


@given(cases())
def test_a_session_places_as_the_reference_does(case):
    snapshot, request = case
    if request.gangs:  # a session places runs; gangs are placer.placement.gangs' business
        request = replace(request, pods=tuple(p for p in request.pods if p.gang is None), gangs={})
    # a session places in the order given; the order by priority is the Cluster's business
    request = replace(request, pods=tuple(replace(p, priority=0) for p in request.pods))
    session = KernelSession(snapshot)
    policy = policies.get(request.policy)
    session.prepare(policy, request.pods, request.seed)
    run = session.place(request.pods, policy, np.array([request.seed], dtype=np.uint64))
    want = ReferenceCluster(snapshot).schedule(request)
    placed = {a.pod: (a.node, a.gpus) for a in want.assignments}
    for pod, node, mask in zip(request.pods, run.nodes, run.masks):
        got = None if node < 0 else (session.node_names[node], tuple(i for i in range(64) if mask >> i & 1))
        assert got == placed.get(pod.name)


def test_pods_held_by_a_schedule_are_held_when_next_asked():
    cluster = Cluster(one_node(held=(0,)))
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "a", "gpus": 1}, {"name": "b"}]}
    placed = cluster.schedule(request).assignments
    session = cluster.session
    assert [a.pod for a in placed] == ["a", "b"]
    assert session.holds("a") and session.holds("b") and session.holds("old")
    assert session.held_among(["a", "x", "old"]) == {"a", "old"}
    node, record = session.holding("a")
    assert (cluster.node_names[node], record.gpus) == (placed[0].node, placed[0].gpus)
    assert sorted(r.name for _, r in session.running()) == ["a", "b", "old"]
    again = {**request, "pods": [{"name": "c"}, {"name": "b"}]}
    with pytest.raises(InvalidInputError) as info:
        cluster.schedule(again)
    assert info.value.where == "pods[1].name" and "already bound" in info.value.what
    cluster.release("a")
    assert not session.holds("a") and session.holds("b")
    cluster.schedule({**request, "pods": [{"name": "a", "gpus": 1}]})  # released: placed anew
    assert session.holds("a")


def test_scoring_a_mig_pod_is_refused_in_the_users_terms():
    cluster = Cluster({"apiVersion": "placer/v1", "kind": "ClusterSnapshot",
                              "nodes": [{"name": "a", "gpus": 1, "gpuModel": "A100-SXM4-40GB", "mig": {"gpus": "all"}}]})
    with pytest.raises(InvalidInputError) as info:
        cluster.node_scores({"name": "m", "mig": {"profile": "1g.5gb"}})
    assert info.value.where == "pods[0]" and "()" not in info.value.what
    assert "placed with its whole request" in info.value.what


def test_the_session_module_still_names_what_moved_out_of_it():
    from placer.kernel import free, guides, holdings, runs, session

    moved = {"FreeState": free, "NodeFree": free, "Run": runs, "Evicted": holdings, "slot_counts": holdings,
             "fgd_rank": guides}
    assert set(moved) <= set(session.__all__)
    for name, home in moved.items():
        assert getattr(session, name) is getattr(home, name), name
