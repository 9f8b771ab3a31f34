"""The kernel's incremental fragment F_n(M) against the pure-Python measure."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placer
from placer.adapters import openb
from placer.workload.fragmentation import TaskType, Workload, node_fragment, target_workload
from placer.testing import scenarios


def python_fragments(cluster: placer.Cluster, workload: Workload) -> dict[str, float]:
    out = {}
    for node in cluster.snapshot.nodes:
        free = cluster.node_free(node.name)
        out[node.name] = node_fragment(free.cpu_milli, free.gpu_milli, node.hardware.gpu_model, workload)
    return out


def assert_same(cluster: placer.Cluster, workload: Workload) -> None:
    total = cluster.fragmentation(workload)
    expect = python_fragments(cluster, workload)
    for name, value in expect.items():
        assert cluster.node_fragment(name) == pytest.approx(value, rel=1e-12, abs=1e-9)
    assert total.total == pytest.approx(sum(expect.values()), rel=1e-12, abs=1e-6)


WORKLOAD = Workload(
    types=(
        TaskType(4000, 500, 1),
        TaskType(8000, 1000, 1),
        TaskType(16000, 1000, 2, ("A100-SXM4-80GB",)),
        TaskType(2000),
        TaskType(1000, 250, 1, ("H100-SXM5-80GB",)),
    ),
    popularity=(0.3, 0.3, 0.2, 0.1, 0.1),
)


@settings(max_examples=40, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_incremental_fragments_follow_every_bind_and_release(case, rng):
    snapshot, request = case
    cluster = placer.Cluster(snapshot)
    assert_same(cluster, WORKLOAD)
    result = cluster.schedule(request)
    assert_same(cluster, WORKLOAD)
    for a in rng.sample(list(result.assignments), k=len(result.assignments) // 2):
        cluster.release(a.pod)
    assert_same(cluster, WORKLOAD)


def test_default_trace_fragment_after_placing_part_of_it():
    snapshot, pods = openb.load_default()
    workload = target_workload(pods)
    cluster = placer.Cluster(snapshot)
    empty = cluster.fragmentation(workload)
    assert empty.idle_gpu_milli == 6212 * 1000 and empty.amount_pct == pytest.approx(13.94, abs=0.01)
    sample = random.Random(7).sample(pods, 600)
    cluster.schedule(placer.PlacementRequest(pods=tuple(sample)))
    assert_same(cluster, workload)


def test_replay_traces_the_fragment_after_every_pod():
    snapshot, pods = openb.load_default()
    workload = target_workload(pods)
    order = random.Random(3).sample(pods, 800)
    for policy in ("best-fit", "fgd"):
        cluster = placer.Cluster(snapshot)
        result, trace = cluster.replay(order, policy, seed=3, workload=workload)
        assert len(result.assignments) + len(result.unschedulable) == len(order)
        assert trace[-1] == pytest.approx(cluster.fragmentation(workload).total, rel=1e-9)
        assert_same(cluster, workload)
        # the trace moves only when a pod was placed
        placed = {a.pod for a in result.assignments}
        for j in range(1, len(order)):
            if order[j].name not in placed:
                assert trace[j] == trace[j - 1]
        request = placer.PlacementRequest(pods=tuple(order), policy=policy, seed=3)
        assert placer.check_placement(snapshot, request, result) == []
