"""Issue #5: one default-workload replay (the study's protocol, seed 42) per policy, beside
the pure-Python reference placing the first pods of the same order in the same process."""
from __future__ import annotations

import pytest

import placer
from placer.adapters import openb
from placer.workload.fragmentation import target_workload
from placer.replay.simulate import arrival_order, gpu_capacity_milli
from reference import ReferenceCluster

SNAPSHOT, PODS = openb.load_default()
WORKLOAD = target_workload(PODS)
ORDER = arrival_order(PODS, 42, gpu_capacity_milli(SNAPSHOT))
REFERENCE_PODS = 100  # the reference is far slower: a prefix of the order, per pod


@pytest.mark.parametrize("policy", ["fgd", "fgd-pack", "best-fit"])
def test_replay_kernel(benchmark, policy):
    def run():
        cluster = placer.Cluster(SNAPSHOT)
        cluster.fragmentation(WORKLOAD)
        return cluster.replay(ORDER, policy, 42, WORKLOAD)

    result, trace = benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info.update(
        pods=len(ORDER), placed=len(result.assignments), final_frag=float(trace[-1]), policy=policy
    )
    assert len(result.assignments) + len(result.unschedulable) == len(ORDER)


@pytest.mark.parametrize("policy", ["fgd", "fgd-pack", "best-fit"])
def test_replay_reference_prefix(benchmark, policy):
    prefix = ORDER[:REFERENCE_PODS]
    request = placer.PlacementRequest(pods=tuple(prefix), policy=policy, seed=42)

    def run():
        ref = ReferenceCluster(SNAPSHOT)
        ref._workload = ref._told = WORKLOAD
        return ref.schedule(request)

    want = benchmark.pedantic(run, rounds=1, iterations=1)
    cluster = placer.Cluster(SNAPSHOT)
    got, _ = cluster.replay(prefix, policy, 42, WORKLOAD)
    assert got.assignments == want.assignments
    benchmark.extra_info.update(pods=len(prefix), policy=policy)
