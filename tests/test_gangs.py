"""Gangs through the Cluster API: greedy, CP-SAT fallback (auto), exact and greedy-only
solvers, and greedy + exact feasibility against a brute force on tiny clusters."""
from __future__ import annotations


import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placer
from gang_brute import brute_force, brute_force_detail, domain_vector, problem_from_reference
from reference import ReferenceCluster
from placer.exact import gangs as exact
from placer.placement import gangs
from placer.placement import order
from placer.model import GangSpec, PlacementRequest, PodRequest, SliceSpec, gang_shapes
from placer.model import replace
from placer.testing import scenarios


def snapshot(nodes, levels=("rack",)):
    return placer.ClusterSnapshot.from_dict(
        {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": list(levels), "nodes": nodes}
    )


def node(name, rack, gpus=4, cpu=8000, **extra):
    d = {"name": name, "gpus": gpus, "gpuModel": "A100", "cpuMilli": cpu, "topology": {"rack": rack}}
    d.update(extra)
    return d


def request(pods, spec, solver="auto"):
    return PlacementRequest(pods=tuple(pods), gangs={spec.name: spec}, solver=solver)


# A rack where the greedy's choice for the worker leaves no room for the launcher:
# both nodes take the worker, the greedy picks n-a (first), and then the launcher
# (18 CPUs) no longer fits on n-a (17 left) nor on n-b (4 CPUs).
MISSED = snapshot([node("n-a", "r0", cpu=20000), node("n-b", "r0", cpu=4000)])
MISSED_PODS = [
    PodRequest("worker", gpus=4, cpu_milli=3000, gang="g"),
    PodRequest("launcher", cpu_milli=18000, gang="g"),
]
MISSED_SPEC = GangSpec("g", mode="required", level="rack")


def test_greedy_alone_misses_and_says_why():
    r = placer.place(MISSED, request(MISSED_PODS, MISSED_SPEC, solver="greedy"))
    assert not r.assignments and len(r.unschedulable) == 2
    assert r.gangs[0].solver == "greedy" and r.gangs[0].status == "unknown"


def test_auto_falls_back_to_cp_sat_and_finds_what_the_greedy_missed():
    req = request(MISSED_PODS, MISSED_SPEC)
    r = placer.place(MISSED, req)
    assert {a.pod: a.node for a in r.assignments} == {"worker": "n-b", "launcher": "n-a"}
    assert r.gangs[0].solver == "cp-sat" and r.gangs[0].status == "optimal"
    assert r.gangs[0].objective == r.gangs[0].bound
    assert placer.check_placement(MISSED, req, r) == []


def test_exact_always_runs_and_auto_keeps_a_greedy_success():
    snap = snapshot([node(f"n{i}", "r0" if i < 2 else "r1") for i in range(4)])
    pods = [PodRequest(f"w{i}", gpus=2, cpu_milli=1000, gang="g") for i in range(3)]
    spec = GangSpec("g", mode="required", level="rack")
    auto = placer.place(snap, request(pods, spec))
    # the greedy reaches the fewest racks and nodes any placement needs, so it says optimal
    assert auto.gangs[0].solver == "greedy" and auto.gangs[0].status == "optimal"
    assert auto.gangs[0].domain_counts == dict(auto.gangs[0].domain_bounds) == {"rack": 1, "node": 2}
    ex = placer.place(snap, request(pods, spec, solver="exact"))
    assert ex.gangs[0].solver == "cp-sat" and ex.gangs[0].status == "optimal"
    for r in (auto, ex):
        assert len(r.assignments) == 3 and len(r.gangs[0].domains["rack"]) == 1
        assert placer.check_placement(snap, request(pods, spec), r) == []


def test_cp_sat_proves_a_gang_cannot_fit():
    snap = snapshot([node(f"n{i}", "r0" if i < 2 else "r1") for i in range(4)])
    pods = [PodRequest(f"w{i}", gpus=4, gang="g") for i in range(3)]
    r = placer.place(snap, request(pods, GangSpec("g", mode="required", level="rack", solver="exact")))
    assert not r.assignments
    assert r.gangs[0].status == "infeasible" and r.gangs[0].solver == "cp-sat" and r.gangs[0].bound is None
    assert r.unschedulable[0].reason == (
        "gang g: topology level rack allows to fit only 2 out of 3 pod(s); "
        "CP-SAT proved that no placement exists"
    )


def test_counting_proves_a_gang_cannot_fit_without_cp_sat():
    snap = snapshot([node(f"n{i}", "r0" if i < 2 else "r1") for i in range(4)])
    pods = [PodRequest(f"w{i}", gpus=4, gang="g") for i in range(3)]
    r = placer.place(snap, request(pods, GangSpec("g", mode="required", level="rack")))  # solver auto
    assert not r.assignments
    assert (r.gangs[0].solver, r.gangs[0].status, r.gangs[0].bound) == ("greedy", "infeasible", None)
    assert r.unschedulable[0].reason == "gang g: topology level rack allows to fit only 2 out of 3 pod(s)"
    # what counting cannot prove (the largest shape fits by count) still goes to CP-SAT
    pods = [PodRequest(f"w{i}", gpus=4, gang="g") for i in range(2)] + [PodRequest("l", cpu_milli=10**6, gang="g")]
    r = placer.place(snap, request(pods, GangSpec("g", mode="required", level="rack")))
    assert r.gangs[0].solver == "cp-sat" and r.gangs[0].status == "infeasible"


def test_per_gang_solver_overrides_the_request():
    spec = replace(MISSED_SPEC, solver="greedy")
    r = placer.place(MISSED, request(MISSED_PODS, spec, solver="exact"))
    assert not r.assignments and r.gangs[0].solver == "greedy"


def test_preferred_gang_climbs_then_spreads_over_fewest_racks():
    snap = snapshot([node(f"n{i}", f"r{i // 2}") for i in range(6)])  # 3 racks x 2 nodes x 4 GPUs
    pods = [PodRequest(f"w{i}", gpus=4, gang="g") for i in range(3)]
    r = placer.place(snap, request(pods, GangSpec("g", mode="preferred", level="rack")))
    assert len(r.assignments) == 3 and len(r.gangs[0].domains["rack"]) == 2


def test_slices_keep_consecutive_pods_together():
    snap = snapshot([node(f"n{i}", f"r{i // 2}", gpus=2) for i in range(6)])
    pods = [PodRequest(f"w{i}", gpus=1, gang="g") for i in range(6)]
    spec = GangSpec("g", mode="preferred", level="rack", slices=(SliceSpec("node", 2),))
    req = request(pods, spec)
    r = placer.place(snap, req)
    where = {a.pod: a.node for a in r.assignments}
    assert [where[f"w{2 * k}"] == where[f"w{2 * k + 1}"] for k in range(3)] == [True] * 3
    assert placer.check_placement(snap, req, r) == []


def test_slices_of_an_outer_level_may_split_across_its_nodes():
    # Slices of 4 pods per rack: one rack's two nodes take 2 + 2, no node holds 4.
    snap = snapshot([node(f"n{i}", f"r{i // 2}", gpus=2) for i in range(4)])
    pods = [PodRequest(f"w{i}", gpus=1, gang="g") for i in range(4)]
    spec = GangSpec("g", mode="required", level="rack", slices=(SliceSpec("rack", 4),))
    r = placer.place(snap, request(pods, spec, solver="greedy"))
    assert len(r.assignments) == 4 and r.gangs[0].domains["rack"] == ("r0",)
    assert placer.check_placement(snap, request(pods, spec), r) == []


# --- greedy + exact against a brute force on tiny clusters ---------------------------------


@st.composite
def tiny_gangs(draw):
    levels = draw(st.sampled_from([(), ("rack",), ("block", "rack")]))
    n = draw(st.integers(1, 5))
    nodes = []
    for i in range(n):
        held = draw(st.sets(st.integers(0, 3), max_size=3))
        topo = {"block": f"b{draw(st.integers(0, 1))}", "rack": f"r{draw(st.integers(0, 1))}"}
        nodes.append({
            "name": f"n{i}", "gpus": 4, "gpuModel": draw(st.sampled_from(["A", "B"])),
            "cpuMilli": draw(st.sampled_from([4000, 8000, 16000])),
            "topology": {k: v for k, v in topo.items() if k in levels},
            "pods": [{"name": f"held-{i}", "gpus": sorted(held)}] if held else [],
        })
    snap = snapshot(nodes, levels)
    workers = draw(st.integers(1, 4))
    wg = draw(st.sampled_from([1, 2]))
    cpus = [draw(st.sampled_from([0, 2000])) for _ in range(workers)]
    pods = [PodRequest(f"w{j}", gpus=wg, cpu_milli=c, gang="g") for j, c in enumerate(cpus)]
    if draw(st.booleans()):
        pods.insert(0, PodRequest("launcher", cpu_milli=draw(st.sampled_from([1000, 6000])), gang="g"))
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained"]))
    level = draw(st.sampled_from([*levels, "node"])) if mode != "unconstrained" else None
    slices = ()
    if len(set(cpus)) == 1 and workers % 2 == 0 and draw(st.booleans()):  # slices count the workers
        slices = (SliceSpec(draw(st.sampled_from([*levels, "node"])), 2),)
    spec = GangSpec("g", mode=mode, level=level, slices=slices, same_gpu_model=draw(st.booleans()))
    return snap, pods, spec


@settings(max_examples=60, deadline=None)
@given(tiny_gangs())
def test_greedy_and_exact_agree_with_brute_force_on_feasibility(case):
    snap, pods, spec = case
    cluster = placer.Cluster(snap)
    shapes = gangs.split_shapes(cluster.session, pods)
    problem = gangs.exact_problem(cluster.session, cluster.domains.all_paths(), shapes, spec, snap.topology_levels)
    best, _ = brute_force(problem)
    req = request(pods, spec)
    r = cluster.place(pods, gang=spec)
    assert bool(r.assignments) == (best is not None)
    assert placer.check_placement(snap, req, r) == []
    greedy = placer.Cluster(snap).place(pods, gang=replace(spec, solver="greedy"))
    if greedy.assignments:  # auto keeps the greedy answer when it has one
        assert r.assignments == greedy.assignments
    ex = placer.Cluster(snap).place(pods, gang=replace(spec, solver="exact"))
    if best is not None:
        assert ex.gangs[0].status == "optimal" and ex.gangs[0].objective == best
    else:
        assert ex.gangs[0].status == "infeasible" and not ex.assignments


def test_exact_never_imports_the_kernel():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(exact))
    names = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "_core" not in names and not any(m and m.startswith(("placer._core", "placer.kernel")) for m in modules)
    assert "kernel" not in names


def test_cp_sat_leaves_out_nodes_missing_a_level_as_the_greedy_does():
    # block b0 holds two 8-GPU pods on complete nodes; the third fits only on "loose", which
    # is in block b0 but has no rack label: neither solver may use it
    hw = {"gpuModel": "H100", "gpus": 8}
    snap = placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["block", "rack"],
        "nodes": [
            {"name": "a", **hw, "topology": {"block": "b0", "rack": "r0"}},
            {"name": "b", **hw, "topology": {"block": "b0", "rack": "r1"}},
            {"name": "loose", **hw, "topology": {"block": "b0"}},
        ],
    })
    pods = [PodRequest(f"w-{i}", gpus=8, gang="g") for i in range(3)]
    for mode in ("required", "preferred"):
        for solver in ("greedy", "auto", "exact"):
            spec = GangSpec("g", mode=mode, level="block", solver=solver)
            result = placer.Cluster(snap).place(pods, gang=spec)
            assert result.assignments == (), (mode, solver)
            assert result.gangs[0].status in ("unknown", "infeasible"), (mode, solver)
    placed = placer.Cluster(snap).place(pods[:2], gang=GangSpec("g", mode="required", level="block", solver="exact"))
    assert sorted(a.node for a in placed.assignments) == ["a", "b"]


def test_a_gang_whose_largest_shape_fits_says_what_did_not():
    hw = {"gpuModel": "H100", "gpus": 8, "cpuMilli": 64000}
    snap = placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"],
        "nodes": [
            {"name": "a", **hw, "topology": {"rack": "r0"}},
            {"name": "b", **hw, "topology": {"rack": "r0"}},
            {"name": "big-cpu", "cpuMilli": 512000, "topology": {"rack": "r1"}},
        ],
    })
    pods = [PodRequest(f"w-{i}", gpus=4, cpu_milli=1000, gang="g") for i in range(2)]
    pods.append(PodRequest("launcher", cpu_milli=200000, gang="g"))
    spec = GangSpec("g", mode="required", level="rack", solver="greedy")
    reasons = {u.reason for u in placer.Cluster(snap).place(pods, gang=spec).unschedulable}
    assert reasons == {
        "gang g: topology level rack has room for the 2 pod(s) of its largest shape but not for the other shapes "
        "beside them; 0/3 nodes are available: 1 Insufficient nvidia.com/gpu."
    }
    assert {u.reason for u in ReferenceCluster(snap).place(pods, gang=spec).unschedulable} == reasons


def test_same_gpu_model_leaves_a_cpu_only_launcher_free():
    # rack r0: two H100 nodes for the workers and a CPU node for the launcher
    snap = placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"],
        "nodes": [
            {"name": "a", "gpuModel": "H100", "gpus": 8, "cpuMilli": 16000, "topology": {"rack": "r0"}},
            {"name": "b", "gpuModel": "H100", "gpus": 8, "cpuMilli": 16000, "topology": {"rack": "r0"}},
            {"name": "cpu", "cpuMilli": 128000, "topology": {"rack": "r0"}},
        ],
    })
    pods = [PodRequest(f"w-{i}", gpus=8, cpu_milli=8000, gang="g") for i in range(2)]
    pods.append(PodRequest("launcher", cpu_milli=64000, gang="g"))
    for solver in ("greedy", "auto"):
        spec = GangSpec("g", mode="required", level="rack", solver=solver)
        got = placer.Cluster(snap).place(pods, gang=spec)
        assert {a.pod: a.node for a in got.assignments}["launcher"] == "cpu", solver
        want = ReferenceCluster(snap).place(pods, gang=spec)
        assert got.assignments == want.assignments
        assert placer.check_placement(snap, request(pods, spec), got) == []


def test_an_unconstrained_gang_keeps_its_slices():
    def cluster(nodes_per_rack: int) -> placer.ClusterSnapshot:
        return placer.ClusterSnapshot.from_dict({
            "apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"],
            "nodes": [{"name": f"n{r}{i}", "gpuModel": "H100", "gpus": 8, "topology": {"rack": f"r{r}"}}
                      for r in range(4) for i in range(nodes_per_rack)],
        })
    pods = [PodRequest(f"w-{i}", gpus=8, gang="g") for i in range(4)]
    spec = GangSpec("g", slices=(SliceSpec("rack", 2),), solver="greedy")
    apart = placer.Cluster(cluster(1)).place(pods, gang=spec)  # one node per rack: no slice fits
    assert apart.assignments == () and not apart.gangs[0].placed
    assert apart.unschedulable[0].reason.startswith("gang g: the cluster allows to fit only 0 out of 4 pod(s)")
    snap = cluster(2)
    together = placer.Cluster(snap).place(pods, gang=spec)
    racks = [a.node[1] for a in together.assignments]
    assert racks[0] == racks[1] and racks[2] == racks[3]
    assert placer.check_placement(snap, request(pods, spec), together) == []
    assert ReferenceCluster(snap).place(pods, gang=spec).assignments == together.assignments


def test_same_gpu_model_leaves_an_unconstrained_gangs_launcher_free():
    # the launcher fits only on the A100 node's CPUs; the workers need the H100s
    snap = placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodes": [
            {"name": "a", "gpuModel": "H100", "gpus": 8, "cpuMilli": 16000},
            {"name": "b", "gpuModel": "H100", "gpus": 8, "cpuMilli": 16000},
            {"name": "c", "gpuModel": "A100", "gpus": 8, "cpuMilli": 128000},
        ],
    })
    launcher = PodRequest("launcher", cpu_milli=64000, gang="g")
    spec = GangSpec("g", solver="greedy")
    for n_workers, placed in ((2, True), (3, False)):
        workers = [PodRequest(f"w-{i}", gpus=8, cpu_milli=8000, gpu_models=("H100",), gang="g") for i in range(n_workers)]
        for pods in ([launcher, *workers], [*workers, launcher]):
            cluster = placer.Cluster(snap)
            got = cluster.place(pods, gang=spec)
            want = ReferenceCluster(snap).place(pods, gang=spec)
            assert got.assignments == want.assignments
            assert [u.reason for u in got.unschedulable] == [u.reason for u in want.unschedulable]
            assert got.gangs[0].placed is placed
            if placed:
                nodes = {a.pod: a.node for a in got.assignments}
                assert nodes["launcher"] == "c" and {nodes["w-0"], nodes["w-1"]} == {"a", "b"}
                assert placer.check_placement(snap, request(pods, spec), got) == []
            else:  # nothing held: the launcher's run was given back
                assert got.assignments == ()
                again = cluster.place([PodRequest("big", cpu_milli=128000)])
                assert [a.node for a in again.assignments] == ["c"]


# --- gangs of several shapes with slices (launcher + workers) -------------------------------


def launcher_and_workers(workers: int, size: int, level: str = "rack") -> dict:
    return {
        "apiVersion": "placer/v1", "kind": "PlacementRequest",
        "pods": [
            {"name": "launcher", "cpuMilli": 6000, "gang": "job"},
            {"name": "worker", "replicas": workers, "gpus": 2, "cpuMilli": 1000, "gang": "job"},
        ],
        "gangs": {"job": {"topology": {"mode": "required", "level": "block"},
                          "slices": [{"level": level, "size": size}]}},
    }


def blocks_of_racks() -> placer.ClusterSnapshot:
    # 2 blocks x 2 racks x 2 nodes of 4 GPUs; rack b0/r1 is half held, so a slice of 4
    # workers (8 GPUs) fits in one rack only where both its nodes are free
    nodes = []
    for b in range(2):
        for r in range(2):
            for i in range(2):
                held = [{"name": f"x{b}{r}{i}", "gpus": [0, 1]}] if (b, r) == (0, 1) else []
                nodes.append({"name": f"n{b}{r}{i}", "gpus": 4, "gpuModel": "A100", "cpuMilli": 8000,
                              "topology": {"block": f"b{b}", "rack": f"b{b}r{r}"}, "pods": held})
    return snapshot(nodes, ("block", "rack"))


def test_slices_count_the_main_shape_and_leave_the_launcher_out():
    snap = blocks_of_racks()
    req = PlacementRequest.from_dict(launcher_and_workers(8, 4))
    for solver in ("greedy", "auto", "exact"):
        r = placer.place(snap, replace(req, solver=solver))
        assert len(r.assignments) == 9, solver
        assert placer.check_placement(snap, req, r) == [], solver
        rack_of = {a.pod: a.node[:3] for a in r.assignments}
        slices = [{rack_of[f"worker-{4 * k + j}"] for j in range(4)} for k in range(2)]
        assert [len(s) for s in slices] == [1, 1], solver  # each slice of 4 workers in one rack
        assert slices[0] != slices[1]
        assert r.gangs[0].domains["block"] == ("b1",), solver  # b0 holds only one whole slice
    greedy = placer.place(snap, replace(req, solver="greedy"))
    ref = ReferenceCluster(snap).place(list(req.pods), gang=req.gangs["job"])
    assert ref.assignments == greedy.assignments


def test_slices_that_no_domain_can_hold_are_proven_out_by_counting():
    # slices of 8 workers (16 GPUs) at rack level: no rack has more than 8 free GPUs
    snap = blocks_of_racks()
    req = PlacementRequest.from_dict(launcher_and_workers(8, 8))
    r = placer.place(snap, req)
    assert r.assignments == () and r.gangs[0].solver == "greedy" and r.gangs[0].status == "infeasible"
    ex = placer.place(snap, replace(req, solver="exact"))
    assert ex.assignments == () and ex.gangs[0].status == "infeasible"


def test_the_launcher_does_not_count_towards_the_slice_multiple():
    with pytest.raises(placer.InvalidInputError) as e:
        PlacementRequest.from_dict(launcher_and_workers(6, 4))
    assert e.value.where == "gangs.job.slices[0].size"
    assert "has 6 pod(s) of its main shape (the pods like 'worker-0'), not a multiple" in str(e.value)


def test_the_checker_counts_slices_over_the_main_shape_only():
    snap = blocks_of_racks()
    req = PlacementRequest.from_dict(launcher_and_workers(8, 4))
    r = placer.place(snap, req)
    nodes = {a.pod: a.node for a in r.assignments}
    # swapping a worker of the first slice with one of the second breaks both slices
    a, b = "worker-0", "worker-4"
    swapped = [replace(x, node=nodes[b] if x.pod == a else nodes[a] if x.pod == b else x.node)
               for x in r.assignments]
    bad = placer.check_placement(snap, req, replace(r, assignments=tuple(swapped)))
    assert any("slice 0 (rack, size 4)" in line for line in bad)


# --- the gang rules against a brute force: feasibility and the fewest domains ----------------

THOROUGH = os.environ.get("PLACER_HYPOTHESIS_PROFILE") == "thorough"


@st.composite
def tiny_clusters(draw):
    """≤ 6 nodes in ≤ 3 racks of ≤ 2 blocks, labels missing at some levels, whole and shared
    GPUs held, cordoned nodes; a gang of ≤ 4 pods, of one or two shapes, maybe sliced."""
    split = draw(st.integers(1, 3))  # racks below it are in block b0, the others in b1
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        rack = draw(st.integers(0, 2))
        topo = {"block": "b0" if rack < split else "b1", "rack": f"r{rack}"}
        for level in ("block", "rack"):
            if draw(st.integers(0, 9)) == 0:
                del topo[level]
        held = sorted(draw(st.sets(st.integers(0, 3), max_size=3)))
        pods = [{"name": f"held-{i}", "gpus": held}] if held else []
        free = [g for g in range(4) if g not in held]
        if free and draw(st.booleans()):
            pods.append({"name": f"share-{i}", "gpuShares": {str(draw(st.sampled_from(free))): 500}})
        nodes.append({
            "name": f"n{i}", "gpus": 4, "gpuModel": draw(st.sampled_from(["A", "B"])),
            "cpuMilli": draw(st.sampled_from([4000, 8000, 16000])), "topology": topo, "pods": pods,
            "unschedulable": draw(st.integers(0, 9)) == 0,
        })
    snap = snapshot(nodes, ("block", "rack"))
    launcher = draw(st.booleans())
    workers = draw(st.integers(1, 3 if launcher else 4))
    gpus, milli = draw(st.sampled_from([(1, 1000), (2, 1000), (1, 500)]))
    cpu = draw(st.sampled_from([0, 2000]))
    pods = [PodRequest(f"w{j}", gpus=gpus, gpu_milli=milli, cpu_milli=cpu, gang="g") for j in range(workers)]
    if launcher:
        pods.insert(draw(st.integers(0, workers)), PodRequest("launcher", cpu_milli=draw(st.sampled_from([1000, 6000])), gang="g"))
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained"]))
    level = draw(st.sampled_from(["block", "rack", "node"])) if mode != "unconstrained" else None
    slices = ()
    if workers % 2 == 0 and draw(st.booleans()):
        slices = (SliceSpec(draw(st.sampled_from(["block", "rack", "node"])), 2),)
    return snap, pods, GangSpec("g", mode=mode, level=level, slices=slices, same_gpu_model=draw(st.booleans()))


def answer_counts(snap, pods, result):
    """A result as (shape, node) -> pods and the shared pods' GPUs, for the brute's objective."""
    index = {nd.name: n for n, nd in enumerate(snap.nodes)}
    where = {a.pod: a for a in result.assignments}
    counts: dict = {}
    shared: dict = {}
    for s, members in enumerate(gang_shapes(pods)):
        for i in members:
            a = where[pods[i].name]
            key = (s, index[a.node])
            counts[key] = counts.get(key, 0) + 1
            if a.gpu_milli is not None:
                shared[key] = shared.get(key, ()) + tuple(a.gpus)
    return counts, shared


def levels_of(result, snap, field):
    values = getattr(result.gangs[0], field)
    return tuple(values[lv] for lv in (*snap.topology_levels, "node")) if values else None


@settings(max_examples=3000 if THOROUGH else 80, deadline=None)
@given(tiny_clusters())
def test_gangs_agree_with_brute_force_on_feasibility_and_fewest_domains(case):
    snap, pods, spec = case
    problem = problem_from_reference(snap, pods, spec)
    best, counts, _ = brute_force_detail(problem)
    req = request(pods, spec)
    auto = placer.place(snap, req)
    exact_ = placer.place(snap, replace(req, solver="exact"))
    assert bool(auto.assignments) == (best is not None) == bool(exact_.assignments)
    assert placer.check_placement(snap, req, auto) == [] and placer.check_placement(snap, req, exact_) == []
    if best is None:
        assert exact_.gangs[0].status == "infeasible"
        return
    assert exact_.gangs[0].status == "optimal"
    assert exact.objective_value(problem, *answer_counts(snap, pods, exact_)) == best
    if spec.mode == "unconstrained" or spec.level is None:
        return
    fewest = domain_vector(problem, counts)  # lexicographically fewest (blocks, racks, nodes)
    assert levels_of(exact_, snap, "domain_counts") == fewest
    got = levels_of(auto, snap, "domain_counts")
    assert got >= fewest
    bounds = levels_of(auto, snap, "domain_bounds")
    if bounds is not None:
        assert bounds <= fewest  # a lexicographic lower bound
    if auto.gangs[0].status == "optimal":
        assert got == fewest


# --- fewest domains: the choice of the domain, and the pooled choice inside it ---------------


def racks_of_nodes(sizes: dict[str, tuple[str, int]]) -> placer.ClusterSnapshot:
    """Racks of 8-GPU nodes: ``{rack: (block, nodes)}``."""
    return snapshot(
        [{"name": f"{rack}-{i}", "gpus": 8, "gpuModel": "H100", "topology": {"block": block, "rack": rack}}
         for rack, (block, count) in sizes.items() for i in range(count)],
        ("block", "rack"),
    )


def test_the_block_needing_fewest_racks_wins_over_the_tightest():
    # b0 holds exactly 6 nodes but in two racks; b1 has a rack of 6
    snap = racks_of_nodes({"r0": ("b0", 3), "r1": ("b0", 3), "r2": ("b1", 6), "r3": ("b1", 2)})
    pods = [PodRequest(f"w{i}", gpus=8, gang="g") for i in range(6)]
    spec = GangSpec("g", mode="required", level="block", solver="greedy")
    r = placer.Cluster(snap).place(pods, gang=spec)
    assert r.gangs[0].domains["rack"] == ("b1/r2",)
    assert r.gangs[0].status == "optimal" and r.gangs[0].domain_counts == {"block": 1, "rack": 1, "node": 6}
    assert ReferenceCluster(snap).place(pods, gang=spec).assignments == r.assignments


def test_a_gang_over_two_blocks_takes_the_largest_racks_of_both():
    # filling the larger block b0 first would take its four racks and one more of b1;
    # the two racks of 4 nodes hold the gang
    snap = racks_of_nodes({"r0": ("b0", 4), "r1": ("b0", 1), "r2": ("b0", 1), "r3": ("b0", 1),
                           "r4": ("b1", 4), "r5": ("b1", 1)})
    pods = [PodRequest(f"w{i}", gpus=8, gang="g") for i in range(8)]
    spec = GangSpec("g", mode="preferred", level="rack", solver="greedy")
    r = placer.Cluster(snap).place(pods, gang=spec)
    assert sorted(r.gangs[0].domains["rack"]) == ["b0/r0", "b1/r4"]
    assert r.gangs[0].status == "optimal" and dict(r.gangs[0].domain_bounds) == {"block": 2, "rack": 2, "node": 8}
    assert ReferenceCluster(snap).place(pods, gang=spec).assignments == r.assignments
    assert placer.check_placement(snap, request(pods, spec), r) == []


# --- time: the limit covers building the model; a request-wide budget -----------------------


def test_a_limit_spent_before_the_search_keeps_the_hint_or_says_unknown():
    cluster = placer.Cluster(MISSED)
    shapes = gangs.split_shapes(cluster.session, MISSED_PODS)
    problem = gangs.exact_problem(cluster.session, cluster.domains.all_paths(), shapes, MISSED_SPEC,
                                  MISSED.topology_levels)
    with pytest.raises(exact.OutOfTime):
        exact.build_gang_model(problem, exact.Clock(0.0, every=1))
    long_ago = time.perf_counter() - 100.0  # the limit ran out before the model was built
    sol = exact.solve_gang(problem, time_limit_s=1.0, started=long_ago)
    assert (sol.status, sol.solver_status, sol.counts, sol.bound) == ("unknown", "TIME_LIMIT_BUILDING", {}, None)
    answer = {(0, 1): 1, (1, 0): 1}  # worker on n-b, launcher on n-a: it checks out
    kept = exact.solve_gang(problem, time_limit_s=1.0, started=long_ago, hint=answer)
    assert (kept.status, kept.counts) == ("feasible", answer)


def test_the_request_budget_leaves_cp_sat_out_once_spent():
    pods = [replace(p, gang=name) for name in ("g1", "g2") for p in MISSED_PODS]
    pods = [replace(p, name=f"{p.gang}-{p.name}") for p in pods]
    specs = {name: replace(MISSED_SPEC, name=name) for name in ("g1", "g2")}
    one = placer.place(MISSED, PlacementRequest(pods=tuple(pods[:2]), gangs={"g1": specs["g1"]}))
    assert one.gangs[0].solver == "cp-sat" and len(one.assignments) == 2  # CP-SAT finds what the greedy missed
    spent = placer.place(MISSED, PlacementRequest(pods=tuple(pods), gangs=specs, time_budget_s=1e-9))
    assert [g.solver for g in spent.gangs] == ["greedy", "greedy"] and not spent.assignments
    assert all("time budget (timeBudgetS) was spent" in u.reason for u in spent.unschedulable)


def test_time_budget_and_joint_are_request_fields():
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "a"}],
           "timeBudgetS": 5, "joint": True}
    req = PlacementRequest.from_dict(doc)
    assert (req.time_budget_s, req.joint) == (5.0, True)
    assert PlacementRequest.from_dict(req.to_dict()) == req
    for bad in (0, -1, float("inf")):
        with pytest.raises(placer.InvalidInputError) as e:
            PlacementRequest.from_dict({**doc, "timeBudgetS": bad})
        assert e.value.where == "timeBudgetS"


# --- order: by priority, and the joint search ------------------------------------------------


def test_a_later_gang_of_higher_priority_goes_first():
    snap = racks_of_nodes({"r0": ("b0", 2)})  # room for one gang of two 8-GPU pods
    pods = [PodRequest(f"low-{i}", gpus=8, gang="low") for i in range(2)]
    pods += [PodRequest(f"high-{i}", gpus=8, gang="high", priority=1000) for i in range(2)]
    specs = {g: GangSpec(g, mode="required", level="rack") for g in ("low", "high")}
    req = PlacementRequest(pods=tuple(pods), gangs=specs)
    r = placer.place(snap, req)
    assert {a.gang for a in r.assignments} == {"high"} and [g.name for g in r.gangs] == ["high", "low"]
    assert ReferenceCluster(snap).schedule(req).assignments == r.assignments
    plain = placer.place(snap, replace(req, pods=tuple(replace(p, priority=0) for p in pods)))
    assert {a.gang for a in plain.assignments} == {"low"}  # without priorities: request order


def test_the_joint_mode_finds_the_order_that_places_both():
    # "g" alone would take n0 (the tightest rack); "p" can only go to n0 (its selector)
    nodes = [{"name": "n0", "gpus": 8, "gpuModel": "H100", "labels": {"pool": "a"}, "topology": {"rack": "r0"}}]
    nodes += [{"name": f"n{i}", "gpus": 8, "gpuModel": "H100", "topology": {"rack": "r1"}} for i in (1, 2)]
    snap = snapshot(nodes)
    pods = (PodRequest("g-0", gpus=8, gang="g"), PodRequest("p", gpus=8, node_selector={"pool": "a"}))
    req = PlacementRequest(pods=pods, gangs={"g": GangSpec("g", mode="required", level="rack")})
    in_order = placer.place(snap, req)
    assert [a.pod for a in in_order.assignments] == ["g-0"]
    joint = placer.place(snap, replace(req, joint=True))
    assert {a.pod: a.node for a in joint.assignments} == {"p": "n0", "g-0": "n1"}
    assert placer.check_placement(snap, req, joint) == []


def test_the_joint_search_never_trades_a_higher_priority_pod():
    placed_when = {("a", "b"): {"a"}, ("b", "a"): {"b"}}  # one of the two, whichever goes first
    a, b = PodRequest("a", priority=5), PodRequest("b")
    found = order.search_order([[a], [b]], lambda units: placed_when[tuple(u[0].name for u in units)],
                               deadline=time.perf_counter() + 60)
    assert [u[0].name for u in found] == ["a", "b"]
    low_first = order.search_order([[b], [a]], lambda units: placed_when[tuple(u[0].name for u in units)],
                                   deadline=time.perf_counter() + 60)
    assert [u[0].name for u in low_first] == ["a", "b"]


def test_the_cli_places_a_launcher_and_sliced_workers_in_every_solver(tmp_path, capsys):
    import json

    from placer.cli import main

    snap_file, out = tmp_path / "cluster.json", tmp_path / "result.json"
    snap_file.write_text(json.dumps(blocks_of_racks().to_dict()))
    for solver in ("auto", "exact", "greedy"):
        req_file = tmp_path / f"request-{solver}.json"
        req_file.write_text(json.dumps({**launcher_and_workers(8, 4), "solver": solver}))
        assert main(["place", str(snap_file), str(req_file), "-o", str(out)]) == 0, capsys.readouterr().err
        result = json.loads(out.read_text())
        assert len(result["assignments"]) == 9 and result["gangs"][0]["placed"]
        assert main(["check", str(snap_file), str(req_file), str(out)]) == 0


@settings(max_examples=600 if THOROUGH else 40, deadline=None)
@given(scenarios(max_pods=6, max_nodes=4))
def test_the_joint_order_never_places_fewer_priority_weighted_pods(case):
    snap, req = case
    req = replace(req, solver="greedy")  # the search and the answer both use the greedy
    plain = placer.place(snap, req)
    joint = placer.place(snap, replace(req, joint=True))
    assert placer.check_placement(snap, req, joint) == []
    placed = [{a.pod for a in r.assignments} for r in (plain, joint)]
    assert order.priority_score(req.pods, placed[1]) >= order.priority_score(req.pods, placed[0])
