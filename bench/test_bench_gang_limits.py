"""Issue #12 — gangs: the fewest domains at 10,000 nodes, and bounded solver time at 50,000.

Run: pytest bench/test_bench_gang_limits.py --benchmark-json=bench/gang_limits.json -q
then: python bench/report.py bench/gang_limits.json --details

1. Domain counts at 10,000 nodes (10 blocks × 25 racks × 5 NVLink domains × 8 nodes, free
   and with 30 % of the GPUs held): the greedy's counts and bounds (``Cluster.place``,
   ``solver="greedy"``), against CP-SAT on the same gang (``exact.solve_gang`` with the
   greedy's answer as hint, 30 s, 1 worker). Recorded per gang: both count vectors, the
   greedy's status (``optimal`` when its counts meet its bounds) and CP-SAT's.
2. ``timeLimitS: 1`` on 50,000 nodes: wall time of ``Cluster.place`` with
   ``solver="exact"`` (greedy, building the problem and the model, search), against the
   same gang with ``solver="greedy"`` in the same process.

Every placement is checked with ``placer.check_placement`` outside the timed part.
"""
from __future__ import annotations

import functools
import gc
import statistics
import time

import pytest

import placer
from placer.exact import gangs as exact
from placer.placement import gangs
from placer.placement.cluster import Cluster
from placer.model import GangSpec, PlacementRequest, SliceSpec, replace
from workloads import gang_cluster, gang_pods, mixed_gang_pods

GANG = "g"
LEVELS = ("block", "rack", "nvlDomain", "node")
MODES = {"required-block": ("required", "block"), "preferred-rack": ("preferred", "rack")}
OCCUPANCY = {"free": 0.0, "busy30": 0.3}


def _gang(kind: str) -> tuple[list, tuple]:
    """The pods of a benchmark gang and its slices."""
    if kind == "128x8gpu":
        return gang_pods(128, 8), ()
    if kind == "256x4gpu":
        return gang_pods(256, 4), ()
    if kind == "launcher+96x4gpu":
        return mixed_gang_pods(workers=96, worker_gpus=4), ()
    if kind == "128x4gpu-slices-nvl8":
        return gang_pods(128, 4), (SliceSpec("nvlDomain", 8),)
    raise KeyError(kind)


GANGS = ("128x8gpu", "256x4gpu", "launcher+96x4gpu", "128x4gpu-slices-nvl8")


def _request(pods, spec):
    return PlacementRequest(pods=tuple(replace(p, gang=spec.name) for p in pods), gangs={spec.name: spec})


@functools.lru_cache(maxsize=None)
def _cluster(nodes: int, occupancy: str):
    snapshot = gang_cluster(nodes, (1000, 40, 8), busy=OCCUPANCY[occupancy])
    return snapshot, Cluster(snapshot)


def _vector(counts: dict) -> list[int]:
    return [counts.get(level, 0) for level in LEVELS]


# --- 1. domain counts at 10,000 nodes --------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", GANGS)
@pytest.mark.parametrize("occupancy", OCCUPANCY)
def test_domain_counts_against_cp_sat(benchmark, occupancy, kind, mode):
    snapshot, cluster = _cluster(10_000, occupancy)
    pods, slices = _gang(kind)
    m, level = MODES[mode]
    spec = GangSpec(GANG, mode=m, level=level, slices=slices, solver="greedy")
    result = benchmark.pedantic(cluster.place, args=(pods,), kwargs={"gang": spec}, rounds=5, iterations=1)
    assert placer.check_placement(snapshot, _request(pods, spec), result) == []
    gr = result.gangs[0]
    info = dict(kind="gang-counts", nodes=10_000, occupancy=occupancy, gang=kind, mode=mode,
                greedy_placed=gr.placed, greedy_status=gr.status, greedy_counts=_vector(gr.domain_counts),
                greedy_bounds=_vector(gr.domain_bounds) if gr.domain_bounds else None)
    members = [replace(p, gang=GANG) for p in pods]
    shapes = gangs.split_shapes(cluster.session, members)
    problem = gangs.exact_problem(cluster.session, cluster.domains.all_paths(), shapes, spec,
                                  snapshot.topology_levels)
    hint = None
    if gr.placed:
        shape_of = {p.name: si for si, sh in enumerate(shapes) for i in sh.pods for p in [members[i]]}
        index = {name: n for n, name in enumerate(cluster.node_names)}
        hint = {}
        for a in result.assignments:
            key = (shape_of[a.pod], index[a.node])
            hint[key] = hint.get(key, 0) + 1
    t0 = time.perf_counter()
    sol = exact.solve_gang(problem, time_limit_s=30.0, workers=1, hint=hint)
    used = exact.domains_used(problem, sol.counts) if sol.found else {}
    nodes_used = len({n for (_, n), c in sol.counts.items() if c > 0})
    info.update(cp_sat_s=round(time.perf_counter() - t0, 2), cp_sat_status=sol.status,
                cp_sat_counts=[len(used.get(lv, ())) for lv in LEVELS[:-1]] + [nodes_used] if sol.found else None,
                variables=sol.num_variables)
    benchmark.extra_info.update(info)


# --- 2. timeLimitS: 1 on 50,000 nodes ---------------------------------------------------------

LIMIT_GANGS = {"256x4gpu required-block": ("256x4gpu", "required-block"),
               "128x8gpu preferred-rack": ("128x8gpu", "preferred-rack"),
               "launcher+96x4gpu preferred-rack": ("launcher+96x4gpu", "preferred-rack")}


@pytest.mark.parametrize("case", LIMIT_GANGS)
def test_time_limit_at_50k_nodes(benchmark, case):
    snapshot, cluster = _cluster(50_000, "busy30")
    kind, mode = LIMIT_GANGS[case]
    pods, slices = _gang(kind)
    m, level = MODES[mode]
    exact_spec = GangSpec(GANG, mode=m, level=level, slices=slices, solver="exact", time_limit_s=1.0)
    greedy_spec = replace(exact_spec, solver="greedy")
    cluster.place(pods, gang=greedy_spec)  # domains and tables built before timing
    times: dict[str, list[float]] = {"exact": [], "greedy": []}
    results = {}
    for _ in range(5):
        for name, spec in (("exact", exact_spec), ("greedy", greedy_spec)):
            gc.collect()
            t0 = time.perf_counter()
            results[name] = cluster.place(pods, gang=spec)
            times[name].append(time.perf_counter() - t0)
    benchmark.pedantic(cluster.place, args=(pods,), kwargs={"gang": exact_spec}, rounds=1, iterations=1)
    for name, spec in (("exact", exact_spec), ("greedy", greedy_spec)):
        assert placer.check_placement(snapshot, _request(pods, spec), results[name]) == []
    gr = results["exact"].gangs[0]
    benchmark.extra_info.update(
        kind="gang-time-limit", nodes=50_000, case=case, time_limit_s=1.0,
        exact_median_s=round(statistics.median(times["exact"]), 3), exact_max_s=round(max(times["exact"]), 3),
        greedy_median_s=round(statistics.median(times["greedy"]), 4),
        solver=gr.solver, status=gr.status, counts=_vector(gr.domain_counts) if gr.placed else None,
        reason=results["exact"].unschedulable[0].reason if results["exact"].unschedulable else "",
    )


# --- 3. competing gangs: request order, priority order, the joint search ----------------------

PAIRS = 1000


def _pair_instance(seed: int):
    """A random cluster of 3–8 nodes in 2 racks and two gangs of 2–4 pods that compete for it."""
    import random

    rng = random.Random(f"pair-{seed}")
    nodes = []
    for i in range(rng.randint(3, 8)):
        held = sorted(rng.sample(range(8), rng.choice((0, 0, 2, 4, 6))))
        nodes.append({"name": f"n{i}", "gpus": 8, "gpuModel": "H100", "cpuMilli": 64000,
                      "topology": {"rack": f"r{rng.randint(0, 1)}"},
                      "pods": [{"name": f"held-{i}", "gpus": held}] if held else []})
    snapshot = placer.ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot",
                                                 "topologyLevels": ["rack"], "nodes": nodes})
    pods, specs = [], {}
    for g in ("a", "b"):
        gpus = rng.choice((2, 4, 8))
        pods += [placer.PodRequest(f"{g}-{j}", gpus=gpus, gang=g) for j in range(rng.randint(2, 4))]
        mode = rng.choice(("required", "preferred", "unconstrained"))
        specs[g] = GangSpec(g, mode=mode, level=None if mode == "unconstrained" else rng.choice(("rack", "node")))
    return snapshot, PlacementRequest(pods=tuple(pods), gangs=specs, solver="greedy")


def test_competing_gang_pairs(benchmark):
    both_somehow = lost_in_order = lost_joint = 0
    t_plain: list[float] = []
    t_joint: list[float] = []
    for seed in range(PAIRS):
        snapshot, req = _pair_instance(seed)
        swapped = replace(req, pods=tuple(p for p in req.pods if p.gang == "b") + tuple(p for p in req.pods if p.gang == "a"))
        t0 = time.perf_counter()
        plain = placer.place(snapshot, req)
        t_plain.append(time.perf_counter() - t0)
        other = placer.place(snapshot, swapped)
        t0 = time.perf_counter()
        joint = placer.place(snapshot, replace(req, joint=True))
        t_joint.append(time.perf_counter() - t0)
        assert placer.check_placement(snapshot, req, joint) == []
        n = len(req.pods)
        if len(plain.assignments) == n or len(other.assignments) == n:
            both_somehow += 1
            lost_in_order += len(plain.assignments) < n
            lost_joint += len(joint.assignments) < n
    benchmark.pedantic(placer.place, args=_pair_instance(0), rounds=1, iterations=1)
    benchmark.extra_info.update(
        kind="gang-pairs", instances=PAIRS, both_fit_in_some_order=both_somehow,
        request_order_loses_one=lost_in_order, joint_loses_one=lost_joint,
        plain_median_ms=round(statistics.median(t_plain) * 1e3, 2),
        joint_median_ms=round(statistics.median(t_joint) * 1e3, 2),
    )
