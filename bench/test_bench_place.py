"""Per-pod placement time, kernel vs the pure-Python reference, on the same inputs.

Run: pytest bench/test_bench_place.py --benchmark-json=bench/place.json
then: python bench/report.py bench/place.json
"""
from __future__ import annotations

import functools

import pytest

from placer.placement.cluster import Cluster
from reference import ReferenceCluster
from workloads import SHAPES, cluster, request

SIZES = (1_000, 10_000, 100_000)
POLICIES = ("best-fit", "first-fit")
KERNEL_PODS = 10_000
REFERENCE_PODS = {1_000: 200, 10_000: 40, 100_000: 5}


@functools.lru_cache(maxsize=3)
def _snapshot(n):
    return cluster(n)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nodes", SIZES)
def test_kernel(benchmark, nodes, shape, policy):
    snapshot = _snapshot(nodes)
    req = request(shape, KERNEL_PODS, policy)
    result = benchmark.pedantic(
        lambda c: c.schedule(req), setup=lambda: ((Cluster(snapshot),), {}), rounds=3, iterations=1
    )
    benchmark.extra_info.update(kind="kernel", nodes=nodes, shape=shape, policy=policy,
                                pods=KERNEL_PODS, placed=len(result.assignments))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nodes", SIZES)
def test_reference(benchmark, nodes, shape, policy):
    snapshot = _snapshot(nodes)
    count = REFERENCE_PODS[nodes]
    req = request(shape, count, policy)
    kernel_first = Cluster(snapshot).schedule(request(shape, count, policy))
    result = benchmark.pedantic(
        lambda c: c.schedule(req), setup=lambda: ((ReferenceCluster(snapshot),), {}), rounds=3, iterations=1
    )
    assert result.assignments == kernel_first.assignments
    benchmark.extra_info.update(kind="reference", nodes=nodes, shape=shape, policy=policy,
                                pods=count, placed=len(result.assignments))


def test_state_memory_100k(benchmark):
    snapshot = _snapshot(100_000)
    c = benchmark.pedantic(Cluster, args=(snapshot,), rounds=1, iterations=1)
    nbytes = c.session.state_bytes()
    benchmark.extra_info.update(kind="memory", nodes=100_000, state_bytes=int(nbytes))
    assert nbytes < 100 * 2**20


def test_load_snapshot_100k(benchmark, tmp_path_factory):
    import json

    from placer.model import load_snapshot

    path = tmp_path_factory.mktemp("load") / "snapshot-100k.json"
    path.write_text(json.dumps(_snapshot(100_000).to_dict()))
    loaded = benchmark.pedantic(load_snapshot, args=(str(path),), rounds=3, iterations=1)
    assert len(loaded.nodes) == 100_000
    benchmark.extra_info.update(kind="load", nodes=100_000, file_mib=round(path.stat().st_size / 2**20, 1))
