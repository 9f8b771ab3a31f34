"""Issue #3 — GPU sets inside a node: per-call choice, table build, whole-cluster cost.

Run: pytest bench/test_bench_gpusets.py --benchmark-json=bench/gpusets.json
then: python bench/report.py bench/gpusets.json

Every speed figure has its baseline in the same session: ``select_gpus`` against the
exhaustive search of ``tests/reference.py`` (same inputs, same answer asserted), and the
topology-aware cluster against the same cluster without a ``gpu_topology``.
"""
from __future__ import annotations

import functools
import gc
import itertools
import statistics
import time

import pytest

import placer
from placer.placement import gpusets
from placer.placement.cluster import Cluster
from placer.kernel.tables import clear_tables
from reference import reference_select, set_score
from workloads import (
    GPU_TOPOLOGIES,
    SHAPES,
    cluster,
    dgx1_volta,
    free_gpus,
    request,
    topology_cluster,
)

OBJECTIVES = ("tiling", "best-set")
MASKS = ("random", "all")
# select_gpus: fixed rounds x iterations (the default calibration would spend ~1 s on each
# of the ~220 cases); the per-call figure is the median round divided by the iterations.
SELECT_ROUNDS, SELECT_ITERATIONS = 30, 200
# Brute force: 3 rounds, except the 16-GPU all-free mask (up to several seconds a call):
# one round there.
BRUTE_ROUNDS = {8: {"random": 3, "all": 3}, 16: {"random": 3, "all": 1}}
TABLE_ROUNDS = 3


@functools.lru_cache(maxsize=None)
def _topology(name):
    return GPU_TOPOLOGIES[name]()


def _mask(indices):
    return sum(1 << i for i in indices)


def _select_cases():
    for name, make in GPU_TOPOLOGIES.items():
        n = make().gpus
        for mask in MASKS:
            free = free_gpus(n, mask)
            for objective in OBJECTIVES:
                for size in range(1, len(free) + 1):
                    yield pytest.param(name, mask, objective, size, id=f"{name}-{mask}-{objective}-{size}")


SELECT_CASES = list(_select_cases())


@functools.lru_cache(maxsize=None)
def _reference_answer(name, mask, objective, size):
    topo = _topology(name)
    return reference_select(topo.scores, free_gpus(topo.gpus, mask), size, (), objective)


def _quality(topo, free, chosen, size):
    """Score of the chosen set, and that plus the best split of the free GPUs left."""
    t = gpusets.tables_for(topo, size)
    own = set_score(topo.scores, chosen)
    rest = _mask(free) & ~_mask(chosen)
    return own, own + int(t.split[rest])


# --- 1. select_gpus per call vs the exhaustive search -------------------------------------


@pytest.mark.parametrize("name, mask, objective, size", SELECT_CASES)
def test_select_gpus(benchmark, name, mask, objective, size):
    topo = _topology(name)
    free = free_gpus(topo.gpus, mask)
    gpusets.tables_for(topo, size)  # tables built before timing
    first = placer.select_gpus(topo, free, size, objective=objective)
    got = benchmark.pedantic(
        placer.select_gpus,
        args=(topo, free, size),
        kwargs={"objective": objective},
        rounds=SELECT_ROUNDS,
        iterations=SELECT_ITERATIONS,
        warmup_rounds=1,
    )
    assert got == first and len(got) == size and set(got) <= set(free)
    own, total = _quality(topo, free, got, size)
    benchmark.extra_info.update(kind="select", topology=name, gpus=topo.gpus, mask=mask,
                                free=len(free), objective=objective, size=size, answer=got,
                                set_score=own, tiling_total=total)


@pytest.mark.parametrize("name, mask, objective, size", SELECT_CASES)
def test_brute_force(benchmark, name, mask, objective, size):
    topo = _topology(name)
    free = free_gpus(topo.gpus, mask)
    gpusets.tables_for(topo, size)
    ours = tuple(placer.select_gpus(topo, free, size, objective=objective))
    rounds = BRUTE_ROUNDS[topo.gpus][mask]
    got = benchmark.pedantic(reference_select, args=(topo.scores, free, size, (), objective),
                             rounds=rounds, iterations=1)
    assert got == ours
    own, total = _quality(topo, free, got, size)
    benchmark.extra_info.update(kind="brute", topology=name, gpus=topo.gpus, mask=mask,
                                free=len(free), objective=objective, size=size, answer=list(got),
                                set_score=own, tiling_total=total, same_answer=True)


# --- 2. table build time and memory -------------------------------------------------------


def _clear_tables():
    clear_tables()
    return (), {}


def _table_cases():
    for name, make in GPU_TOPOLOGIES.items():
        for size in range(1, make().gpus + 1):
            yield pytest.param(name, size, id=f"{name}-{size}")


@pytest.mark.parametrize("name, size", list(_table_cases()))
def test_table_build(benchmark, name, size):
    topo = _topology(name)
    built = benchmark.pedantic(lambda: gpusets.tables_for(topo, size), setup=_clear_tables,
                               rounds=TABLE_ROUNDS, iterations=1)
    # The fresh tables give the exhaustive search's answer on the seeded random mask.
    free = free_gpus(topo.gpus, "random")
    checked = 0
    if size <= len(free):
        for objective, table in (("tiling", built.tiling), ("best-set", built.best_set)):
            chosen = [i for i in range(topo.gpus) if (int(table[_mask(free)]) >> i) & 1]
            assert tuple(chosen) == _reference_answer(name, "random", objective, size)
            checked += 1
    total = built.nbytes + built.subset_score.nbytes + built.pair.nbytes
    assert total < 16 * 2**20
    benchmark.extra_info.update(kind="tables", topology=name, gpus=topo.gpus, size=size,
                                tables_bytes=int(built.nbytes),
                                subset_score_bytes=int(built.subset_score.nbytes),
                                total_bytes=int(total), checked_vs_brute_force=checked)


# --- 3. whole-cluster placement with and without a GPU topology ---------------------------

CLUSTER_SIZES = (1_000, 10_000)
POLICIES = ("best-fit", "first-fit")
VARIANTS = ("uniform", "dgx1-topology")
KERNEL_PODS = 10_000
CLUSTER_ROUNDS = 7
DGX1 = dgx1_volta()


def _fresh(snapshot):
    """A new cluster state per round; the garbage of the last round is collected outside the
    timed part (10,000 results a round make collector pauses the main source of spread)."""
    c = Cluster(snapshot)
    gc.collect()
    return (c,), {}


@functools.lru_cache(maxsize=4)
def _snapshot(nodes, variant):
    return cluster(nodes) if variant == "uniform" else topology_cluster(nodes)


@functools.lru_cache(maxsize=None)
def _uniform_result(nodes, shape, policy):
    return Cluster(_snapshot(nodes, "uniform")).schedule(request(shape, KERNEL_PODS, policy))


def _set_quality(result):
    """Mean DGX-1 set score of the multi-GPU sets taken, and the share joined all by NVLink."""
    sets = [a.gpus for a in result.assignments if len(a.gpus) >= 2]
    if not sets:
        return None, None
    scores = [set_score(DGX1.scores, s) for s in sets]
    nvlinked = sum(all(DGX1.scores[a][b] >= 100 for a in s for b in s if a < b) for s in sets)
    return round(sum(scores) / len(sets), 1), round(nvlinked / len(sets), 3)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nodes", CLUSTER_SIZES)
def test_cluster_kernel(benchmark, nodes, shape, policy, variant):
    snapshot = _snapshot(nodes, variant)
    req = request(shape, KERNEL_PODS, policy)
    Cluster(snapshot).schedule(request(shape, 1, policy))  # GPU-set tables built before timing
    result = benchmark.pedantic(lambda c: c.schedule(req), setup=lambda: _fresh(snapshot),
                                rounds=CLUSTER_ROUNDS, iterations=1)
    # Outside the timed part: the placement is valid, and comparable to the uniform run.
    assert placer.check_placement(snapshot, req, result) == []
    base = _uniform_result(nodes, shape, policy)
    assert len(result.assignments) == len(base.assignments)
    if policy == "first-fit" or shape == "shared":
        # Node choice does not depend on GPU links there: the same nodes, in order.
        assert [a.node for a in result.assignments] == [a.node for a in base.assignments]
    mean_score, nvlinked = _set_quality(result)
    same_nodes = sum(a.node == b.node for a, b in zip(result.assignments, base.assignments))
    benchmark.extra_info.update(kind="cluster", nodes=nodes, shape=shape, policy=policy,
                                variant=variant, pods=KERNEL_PODS, placed=len(result.assignments),
                                mean_set_score_dgx1=mean_score, all_nvlink_share=nvlinked,
                                same_node_as_uniform=same_nodes, valid=True)


PAIRED_ROUNDS = 7  # per variant


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nodes", CLUSTER_SIZES)
def test_cluster_paired(benchmark, nodes, shape, policy):
    """The same two runs with rounds alternating uniform / DGX-1 topology, so that both see
    the same load of the shared machine; the ratio is the median of the round-pair ratios.

    pytest-benchmark's own statistics mix both variants here; the figures are in extra_info
    (each the ``schedule`` call alone, as in test_cluster_kernel).
    """
    snaps = (_snapshot(nodes, "uniform"), _snapshot(nodes, "dgx1-topology"))
    req = request(shape, KERNEL_PODS, policy)
    for snap in snaps:
        Cluster(snap).schedule(request(shape, 1, policy))
    order = itertools.cycle((0, 1))
    times: tuple[list[float], list[float]] = ([], [])
    current = [0]

    def setup():
        current[0] = next(order)
        return _fresh(snaps[current[0]])

    def run(c):
        t0 = time.perf_counter()
        out = c.schedule(req)
        times[current[0]].append(time.perf_counter() - t0)
        return out

    benchmark.pedantic(run, setup=setup, rounds=2 * PAIRED_ROUNDS, iterations=1)
    uniform, topo = (statistics.median(t) / KERNEL_PODS for t in times)
    pairs = [b / a for a, b in zip(*times)]
    benchmark.extra_info.update(kind="cluster-paired", nodes=nodes, shape=shape, policy=policy,
                                pods=KERNEL_PODS, rounds_per_variant=PAIRED_ROUNDS,
                                uniform_s_per_pod=uniform, topology_s_per_pod=topo,
                                ratio_of_medians=round(topo / uniform, 3),
                                median_pair_ratio=round(statistics.median(pairs), 3),
                                pair_ratios=[round(r, 3) for r in pairs])
