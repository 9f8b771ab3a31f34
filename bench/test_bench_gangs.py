"""Issue #4 — gangs over topology levels: greedy speed, CP-SAT within a time limit, and the
greedy's objective against the exact one.

Run: pytest bench/test_bench_gangs.py --benchmark-json=bench/gangs.json -q
then: python bench/report.py bench/gangs.json

1. and 2. ``Cluster.place`` of a 1,024-GPU gang on 10,000 nodes (block / rack / NVLink
   domain), all free and with 30 % of the GPUs held; the baseline, in the same process, is
   the same pods placed by ``Cluster.place`` without a gang (per-pod best-fit).
3. CP-SAT (``solver="exact"``, 2 s) on mixed gangs over 1,000 nodes; the baseline is the
   greedy on the same gang.
4. Greedy vs CP-SAT objective (``exact.objective_value``) on 100 seeded small instances.

Every placement is checked with ``placer.check_placement`` outside the timed part; quality
figures go to ``extra_info``.
"""
from __future__ import annotations

import functools
import gc
import itertools
import statistics
import time
from collections import Counter, defaultdict

import pytest

import placer
from placer.exact import gangs as exact
from placer.placement import gangs
from placer.placement.cluster import Cluster
from placer.model import GangSpec, PlacementRequest, SliceSpec
from placer.model import replace
from workloads import gang_cluster, gang_instance, gang_pods, mixed_gang_pods

GANG = "g"


def _request(pods, spec):
    """The request ``Cluster.place(pods, gang=spec)`` stands for (for the checker)."""
    members = tuple(replace(p, gang=spec.name) for p in pods) if spec else tuple(pods)
    return PlacementRequest(pods=members, gangs={spec.name: spec} if spec else {})


def _domains_of(snapshot, result):
    """Domains used per level (topology levels, then node) by the result's assignments."""
    by_name = {n.name: n for n in snapshot.nodes}
    out = {}
    for k, level in enumerate(snapshot.topology_levels):
        out[level] = len({tuple(by_name[a.node].topology[lv] for lv in snapshot.topology_levels[: k + 1])
                          for a in result.assignments})
    out["node"] = len({a.node for a in result.assignments})
    return out


def gang_problem(cluster: Cluster, pods, spec: GangSpec):
    """The gang's ``exact.GangProblem`` on the cluster's state, built as
    :func:`placer.placement.gangs.place_gang_step` builds it (through the cluster's session and domains)."""
    shapes = gangs.split_shapes(cluster.session, pods)
    problem = gangs.exact_problem(
        cluster.session, cluster.domains.all_paths(), shapes, spec, cluster.snapshot.topology_levels
    )
    return problem, shapes


def result_counts(cluster: Cluster, pods, shapes, problem, result):
    """``(shape, node) -> pods`` and the shared pods' GPU indices of a placed result (the
    form ``Cluster._place_gang`` gives the exact solver as its hint)."""
    shape_of = {i: si for si, sh in enumerate(shapes) for i in sh.pods}
    pod_index = {p.name: i for i, p in enumerate(pods)}
    node_index = {name: i for i, name in enumerate(cluster.node_names)}
    counts: Counter = Counter()
    shared: dict = defaultdict(list)
    for a in result.assignments:
        s, n = shape_of[pod_index[a.pod]], node_index[a.node]
        counts[s, n] += 1
        if problem.shapes[s].shared:
            shared[s, n].append(a.gpus[0])
    return dict(counts), {k: tuple(v) for k, v in shared.items()}


def decode(problem, value):
    """An objective value (or bound) as (domains per level..., nodes, leftover fragmentation).

    The weights are lexicographic, so a bound decodes into what it proves at each level,
    outermost first."""
    if value is None:
        return None
    v = int(value)
    out = []
    for w in exact.objective_weights(problem):
        out.append(v // w)
        v -= out[-1] * w
    return out + [v]


def _gap(objective, bound):
    if objective is None or bound is None:
        return None
    return (objective - bound) / objective if objective else 0.0


def _fresh_args(*args, **kwargs):
    gc.collect()
    return args, kwargs


# --- 1. and 2. greedy gang on 10,000 nodes ------------------------------------------------

BIG_NODES = 10_000
BIG_SIZES = (1000, 40, 8)  # nodes per block, rack, NVLink domain: 10 × 25 × 5 × 8
OCCUPANCY = {"free": 0.0, "busy30": 0.3}
BIG_GANGS = {"128x8gpu": (128, 8), "256x4gpu": (256, 4)}
MODES = {"required-block": ("required", "block"), "preferred-rack": ("preferred", "rack")}
ROUNDS = 51
PAIRED_ROUNDS = 31  # per variant


@functools.lru_cache(maxsize=None)
def _big(occupancy):
    snapshot = gang_cluster(BIG_NODES, BIG_SIZES, busy=OCCUPANCY[occupancy])
    return snapshot, Cluster(snapshot)


def _big_spec(mode, solver="greedy"):
    m, level = MODES[mode]
    return GangSpec(GANG, mode=m, level=level, solver=solver)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gang", BIG_GANGS)
@pytest.mark.parametrize("occupancy", OCCUPANCY)
def test_greedy_gang(benchmark, occupancy, gang, mode):
    snapshot, cluster = _big(occupancy)
    count, gpus = BIG_GANGS[gang]
    pods = gang_pods(count, gpus)
    spec = _big_spec(mode)
    first = cluster.place(pods, gang=spec)  # hierarchy and tables built before timing
    result = benchmark.pedantic(cluster.place, setup=lambda: _fresh_args(pods, gang=spec),
                                rounds=ROUNDS, iterations=1)
    assert result == first
    assert placer.check_placement(snapshot, _request(pods, spec), result) == []
    gr = result.gangs[0]
    benchmark.extra_info.update(
        kind="gang-greedy", nodes=BIG_NODES, occupancy=occupancy, gang=gang, mode=mode, pods=count,
        gpus_per_pod=gpus, placed=gr.placed, assigned=len(result.assignments),
        domains={lv: len(v) for lv, v in gr.domains.items()},
        reason=result.unschedulable[0].reason if result.unschedulable else "", valid=True,
    )


@pytest.mark.parametrize("gang", BIG_GANGS)
@pytest.mark.parametrize("occupancy", OCCUPANCY)
def test_independent_pods(benchmark, occupancy, gang):
    """The baseline: the same pods, no gang, each placed by best-fit in turn."""
    snapshot, cluster = _big(occupancy)
    count, gpus = BIG_GANGS[gang]
    pods = gang_pods(count, gpus)
    first = cluster.place(pods)
    result = benchmark.pedantic(cluster.place, setup=lambda: _fresh_args(pods), rounds=ROUNDS, iterations=1)
    assert result == first
    assert placer.check_placement(snapshot, _request(pods, None), result) == []
    benchmark.extra_info.update(
        kind="gang-baseline", nodes=BIG_NODES, occupancy=occupancy, gang=gang, pods=count, gpus_per_pod=gpus,
        assigned=len(result.assignments), domains=_domains_of(snapshot, result), valid=True,
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gang", BIG_GANGS)
@pytest.mark.parametrize("occupancy", OCCUPANCY)
def test_greedy_gang_paired(benchmark, occupancy, gang, mode):
    """Gang and baseline in alternating rounds (both see the same machine load); the ratio is
    the median of the round-pair ratios. pytest-benchmark's own statistics mix both."""
    _, cluster = _big(occupancy)
    count, gpus = BIG_GANGS[gang]
    pods = gang_pods(count, gpus)
    spec = _big_spec(mode)
    calls = ((pods,), {"gang": spec}), ((pods,), {})
    for args, kwargs in calls:
        cluster.place(*args, **kwargs)
    order = itertools.cycle((0, 1))
    times: tuple[list[float], list[float]] = ([], [])
    current = [0]

    def setup():
        current[0] = next(order)
        gc.collect()
        return calls[current[0]]

    def run(*args, **kwargs):
        t0 = time.perf_counter()
        out = cluster.place(*args, **kwargs)
        times[current[0]].append(time.perf_counter() - t0)
        return out

    benchmark.pedantic(run, setup=setup, rounds=2 * PAIRED_ROUNDS, iterations=1)
    gang_s, base_s = (statistics.median(t) for t in times)
    pairs = [g / b for g, b in zip(*times)]
    benchmark.extra_info.update(
        kind="gang-paired", nodes=BIG_NODES, occupancy=occupancy, gang=gang, mode=mode, pods=count,
        rounds_per_variant=PAIRED_ROUNDS, gang_s=gang_s, baseline_s=base_s,
        median_pair_ratio=round(statistics.median(pairs), 3),
    )


def test_auto_fallback_when_greedy_fails(benchmark):
    """busy30, 128 × 8 GPUs required in one block: no block holds it. With ``solver=auto``
    the greedy's failure goes to CP-SAT, which proves it infeasible; this is that cost."""
    snapshot, cluster = _big("busy30")
    pods = gang_pods(128, 8)
    spec = replace(_big_spec("required-block", "auto"), time_limit_s=10.0)
    result = benchmark.pedantic(cluster.place, setup=lambda: _fresh_args(pods, gang=spec), rounds=3, iterations=1)
    assert placer.check_placement(snapshot, _request(pods, spec), result) == []
    gr = result.gangs[0]
    benchmark.extra_info.update(kind="gang-auto", nodes=BIG_NODES, occupancy="busy30", gang="128x8gpu",
                                mode="required-block", placed=gr.placed, solver=gr.solver, status=gr.status,
                                reason=result.unschedulable[0].reason if result.unschedulable else "")


# --- 3. CP-SAT on 1,000 nodes -------------------------------------------------------------

EXACT_NODES = 1_000
EXACT_SIZES = (200, 40, 8)  # 5 blocks × 5 racks × 5 NVLink domains × 8 nodes
EXACT_GANGS = {"launcher+24x4gpu": (24, 0), "launcher+24x4gpu+6x500m": (24, 6)}
TIME_LIMIT = 2.0
EXACT_ROUNDS = 3


@functools.lru_cache(maxsize=None)
def _mid():
    snapshot = gang_cluster(EXACT_NODES, EXACT_SIZES, busy=0.35, shared=0.2, seed=5)
    return snapshot, Cluster(snapshot)


def _mid_case(gang, mode, solver):
    snapshot, cluster = _mid()
    workers, shared = EXACT_GANGS[gang]
    pods = mixed_gang_pods(workers, 4, shared)
    spec = replace(_big_spec(mode, solver), time_limit_s=TIME_LIMIT)
    members = [replace(p, gang=GANG) for p in pods]
    return snapshot, cluster, pods, members, spec


@functools.lru_cache(maxsize=None)
def _mid_greedy(gang, mode):
    snapshot, cluster, pods, members, spec = _mid_case(gang, mode, "greedy")
    result = cluster.place(pods, gang=spec)
    problem, shapes = gang_problem(cluster, members, spec)
    counts, shared = result_counts(cluster, members, shapes, problem, result) if result.gangs[0].placed else ({}, {})
    value = exact.objective_value(problem, counts, shared) if counts else None
    return result, problem, counts, shared, value


EXACT_VARIANTS = ("greedy", "cluster-exact", "solve-gang", "solve-gang+hint")


@pytest.mark.parametrize("variant", EXACT_VARIANTS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gang", EXACT_GANGS)
def test_exact_1k(benchmark, gang, mode, variant):
    """``greedy``: Cluster.place with solver=greedy (the baseline). ``cluster-exact``:
    Cluster.place with solver=exact and a 2 s limit (greedy, then CP-SAT hinted with it, then
    binding). ``solve-gang``: exact.solve_gang alone, no hint; ``+hint``: with the greedy's
    counts as the hint, as Cluster.place gives it. One CP-SAT worker throughout."""
    snapshot, cluster, pods, members, spec = _mid_case(gang, mode, "exact" if variant == "cluster-exact" else "greedy")
    g_result, problem, g_counts, g_shared, g_value = _mid_greedy(gang, mode)
    info = dict(kind="exact", nodes=EXACT_NODES, gang=gang, mode=mode, variant=variant, pods=len(pods),
                time_limit_s=TIME_LIMIT, greedy_objective=g_value, greedy_decoded=decode(problem, g_value))
    if variant in ("greedy", "cluster-exact"):
        results = []

        def run(*args, **kwargs):
            results.append(cluster.place(*args, **kwargs))
            return results[-1]

        rounds = 7 if variant == "greedy" else EXACT_ROUNDS
        benchmark.pedantic(run, setup=lambda: _fresh_args(pods, gang=spec), rounds=rounds, iterations=1)
        for r in results:
            assert placer.check_placement(snapshot, _request(pods, spec), r) == []
        grs = [r.gangs[0] for r in results]
        last = grs[-1]
        objective = g_value if variant == "greedy" else last.objective
        bound = None if variant == "greedy" else last.bound
        info.update(statuses=[g.status for g in grs], solver=last.solver, placed=last.placed,
                    objective=objective, bound=bound, gap=_gap(objective, bound),
                    decoded=decode(problem, objective), bound_decoded=decode(problem, bound),
                    domains={lv: len(v) for lv, v in last.domains.items()}, valid=True)
    else:
        hint = g_counts if variant == "solve-gang+hint" else None
        sols = []

        def solve():
            sols.append(exact.solve_gang(problem, time_limit_s=TIME_LIMIT, workers=1, hint=hint))
            return sols[-1]

        benchmark.pedantic(solve, setup=lambda: _fresh_args(), rounds=EXACT_ROUNDS, iterations=1)
        for s in sols:
            if s.found:
                assert exact.check_counts(problem, s.counts, s.shared_gpus) == []
        last = sols[-1]
        info.update(statuses=[s.status for s in sols], placed=last.found, objective=last.objective,
                    bound=last.bound, gap=_gap(last.objective, last.bound),
                    gaps=[_gap(s.objective, s.bound) for s in sols],
                    decoded=decode(problem, last.objective), bound_decoded=decode(problem, last.bound),
                    wall_times_s=[round(s.wall_time_s, 3) for s in sols],
                    num_variables=last.num_variables, num_constraints=last.num_constraints,
                    domains={lv: len(v) for lv, v in exact.domains_used(problem, last.counts).items()}
                    if last.found else {})
    benchmark.extra_info.update(info)


# --- 4. greedy vs exact over 100 seeded instances -----------------------------------------

QUALITY_SEEDS = range(100)
QUALITY_LIMIT = 2.0


@functools.lru_cache(maxsize=None)
def _instance(seed):
    snapshot, pods, g = gang_instance(seed)
    spec = GangSpec(GANG, mode=g["mode"], level=g["level"],
                    slices=tuple(SliceSpec(lv, size) for lv, size in g["slices"]), solver="greedy")
    cluster = Cluster(snapshot)
    members = [replace(p, gang=GANG) for p in pods]
    problem, shapes = gang_problem(cluster, members, spec)
    return snapshot, cluster, pods, members, spec, g, problem, shapes


@functools.lru_cache(maxsize=None)
def _greedy_outcome(seed):
    snapshot, cluster, pods, members, spec, g, problem, shapes = _instance(seed)
    result = cluster.place(pods, gang=spec)
    assert placer.check_placement(snapshot, _request(pods, spec), result) == []
    if not result.gangs[0].placed:
        return result, None, None
    counts, shared = result_counts(cluster, members, shapes, problem, result)
    assert exact.check_counts(problem, counts, shared) == []
    return result, counts, exact.objective_value(problem, counts, shared)


def _describe(seed):
    snapshot, _, pods, _, _, g, problem, _ = _instance(seed)
    return dict(seed=seed, nodes=len(snapshot.nodes), levels=len(snapshot.topology_levels),
                shape_kind=g["kind"], mode=g["mode"], level=g["level"], slices=g["slices"],
                pods=len(pods), shapes=len(problem.shapes))


@pytest.mark.parametrize("seed", QUALITY_SEEDS)
def test_quality_greedy(benchmark, seed):
    _, cluster, pods, _, spec, _, _, _ = _instance(seed)
    expected, _, value = _greedy_outcome(seed)
    result = benchmark.pedantic(cluster.place, args=(pods,), kwargs={"gang": spec}, rounds=1, iterations=1)
    assert result == expected
    benchmark.extra_info.update(kind="quality-greedy", placed=result.gangs[0].placed, objective=value,
                                **_describe(seed))


@pytest.mark.parametrize("seed", QUALITY_SEEDS)
def test_quality_exact(benchmark, seed):
    *_, problem, _ = _instance(seed)
    _, g_counts, g_value = _greedy_outcome(seed)
    sol = benchmark.pedantic(exact.solve_gang, args=(problem,),
                             kwargs={"time_limit_s": QUALITY_LIMIT, "workers": 1}, rounds=1, iterations=1)
    if sol.found:
        assert exact.check_counts(problem, sol.counts, sol.shared_gpus) == []
    if g_value is not None and sol.status == "optimal":
        assert g_value >= sol.objective  # CP-SAT's optimum is a lower bound of any placement
    if sol.status == "infeasible":
        assert g_value is None
    gd, ed = decode(problem, g_value), decode(problem, sol.objective)
    worse_at = None
    if gd is not None and ed is not None and gd != ed:
        names = [*problem.levels, "node", "fragmentation"]
        worse_at = names[next(i for i, (a, b) in enumerate(zip(gd, ed)) if a != b)]
    benchmark.extra_info.update(
        kind="quality-exact", status=sol.status, objective=sol.objective, bound=sol.bound,
        greedy_placed=g_value is not None, greedy_objective=g_value, greedy_decoded=gd, exact_decoded=ed,
        greedy_gap=_gap(g_value, sol.objective) if sol.found and g_value is not None else None,
        greedy_optimal=(g_value is not None and sol.status == "optimal" and g_value == sol.objective),
        first_difference=worse_at, wall_time_s=round(sol.wall_time_s, 4),
        num_variables=sol.num_variables, num_constraints=sol.num_constraints, **_describe(seed),
    )
