"""fgd-pack: its workload figures (placer.workload.packing) and its choices, against the reference."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from ortools.linear_solver import pywraplp

import placer
from placer.adapters import openb
from placer.placement.cluster import Cluster
from placer.workload.fragmentation import TaskType, Workload, target_workload
from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest, RunningPod
from placer.workload.packing import (
    PRIOR_PODS, REFRESH_PODS, UNITS, Demand, PackingGuide, PackingLearner, packing_guide, pattern_duals,
    regret_table,
)
from reference import ReferenceCluster


def all_patterns(sizes: list[int]) -> list[tuple[int, ...]]:
    """Every multiset of ``sizes`` (as counts) that fits one GPU, by brute force."""
    out = []
    ranges = [range(UNITS // s + 1) for s in sizes]
    for counts in itertools.product(*ranges):
        if 0 < sum(c * s for c, s in zip(counts, sizes)) <= UNITS:
            out.append(counts)
    return out


def enumerated_optimum(counts: dict[int, int]) -> float:
    """The covering LP over every pattern (no column generation)."""
    sizes = sorted(counts)
    patterns = all_patterns(sizes)
    solver = pywraplp.Solver.CreateSolver("GLOP")
    use = [solver.NumVar(0, solver.infinity(), "") for _ in patterns]
    for i, s in enumerate(sizes):
        solver.Add(sum(use[j] * p[i] for j, p in enumerate(patterns) if p[i]) >= counts[s])
    solver.Minimize(sum(use))
    assert solver.Solve() == pywraplp.Solver.OPTIMAL
    return solver.Objective().Value()


@pytest.mark.parametrize(
    "counts, optimum",
    [
        ({50: 4}, 2.0),
        ({81: 10, 16: 10}, 10.0),
        ({47: 2, 32: 3, 65: 3}, 4.0),
        ({81: 30, 47: 20, 16: 5, 23: 8, 65: 9, 32: 12}, None),
    ],
)
def test_duals_are_feasible_and_as_good_as_the_enumerated_lp(counts, optimum):
    y = pattern_duals(counts)
    assert set(y) == set(counts) and all(v >= 0 for v in y.values())
    sizes = sorted(counts)
    for pattern in all_patterns(sizes):  # no pattern is worth more than one GPU
        assert sum(c * y[s] for c, s in zip(pattern, sizes)) <= 1 + 1e-6
    best = enumerated_optimum(counts)
    if optimum is not None:
        assert best == pytest.approx(optimum)
    assert sum(y[s] * c for s, c in counts.items()) == pytest.approx(best, rel=1e-6)  # strong duality


def test_regret_by_hand():
    r = regret_table({47: 0.5, 32: 1 / 3, 65: 2 / 3, 81: 1.0, 16: 0.0})
    assert r.shape == (UNITS + 1, UNITS + 1)
    assert r[47, 100] == pytest.approx(0) and r[47, 53] == pytest.approx(0)  # 470 + 470
    assert r[32, 53] == pytest.approx(0.5 - 1 / 3)  # a 320 in a 470's hole wastes its pair
    assert r[65, 68] == pytest.approx(0)  # 650 beside a 320
    assert r[81, 100] == pytest.approx(0) and r[16, 19] == pytest.approx(0)
    assert r[81, 84] == pytest.approx(0)  # 810 beside a 160: also a best pattern
    assert r[47, 81] == pytest.approx(1.0 - 0.5 - 1 / 3)  # K(81) = 1 (an 810), K(34) = 1/3
    assert np.isinf(r[50, 49]) and (r[0] == 0).all()
    assert (r[np.isfinite(r)] >= 0).all()


def pod(name: str, milli: int = 1000, gpus: int = 1, cpu: int = 1000, models: tuple[str, ...] = ()) -> PodRequest:
    return PodRequest(name=name, gpus=gpus, gpu_milli=milli, cpu_milli=cpu, gpu_models=models)


def test_guide_by_hand():
    pods = [
        pod("a", 1000, 2, cpu=24000, models=("A", "B")),
        pod("b", 500, 1, cpu=3000, models=("B",)),
        pod("c", 250, 1, cpu=3000),
        PodRequest(name="cpu", cpu_milli=50000),
    ]
    guide = packing_guide(pods, {"A": 8, "B": 2})
    assert guide.source == "pods"
    assert guide.cpu_per_gpu_milli == pytest.approx(30000 / 2.75)
    # share of the 2750 milli of GPU demand over the model's share of the 10 GPUs
    pressure = {"A": 1600 / 2750 / 0.8, "B": (400 + 500) / 2750 / 0.2}
    assert guide.pressure == pytest.approx(pressure)
    assert guide.duals == pytest.approx({50: 0.5, 25: 0.25})
    assert guide.pressure_by_id(["", "A", "B", "C"]).tolist() == pytest.approx([0, pressure["A"], pressure["B"], 0])
    empty = packing_guide([PodRequest(name="cpu", cpu_milli=1000)], {"A": 8})
    assert empty.cpu_per_gpu_milli == 1000.0 and empty.duals == {} and empty.pressure == {}


TOLD = Workload(types=(TaskType(8000, 1000, 1, ("A",)), TaskType(2000, 500, 1)), popularity=(0.75, 0.25))


def test_guide_of_a_workload_by_hand():
    guide = PackingGuide.from_workload(TOLD, {"A": 16, "B": 16})
    assert guide.source == "workload"
    # CPU per GPU: (0.75 * 8000 + 0.25 * 2000) / (0.75 * 1 + 0.25 * 0.5)
    assert guide.cpu_per_gpu_milli == pytest.approx(6500 / 0.875)
    # A takes 0.75 of the 0.875 GPU a pod brings and has half the GPUs
    assert guide.pressure == pytest.approx({"A": 0.75 / 0.875 / 0.5})
    assert guide.duals == pytest.approx({50: 0.5})
    neutral = PackingGuide.neutral()
    assert (neutral.cpu_per_gpu_milli, dict(neutral.duals), dict(neutral.pressure)) == (1000.0, {}, {})


def test_a_learner_blends_the_told_workload_with_the_pods_observed():
    learner = PackingLearner({"A": 16, "B": 16}, Demand.of_workload(TOLD))
    assert learner.guide.pressure == pytest.approx({"A": 0.75 / 0.875 / 0.5})
    learner.observe([pod(f"p{i}", cpu=12000, models=("B",)) for i in range(REFRESH_PODS)])
    assert learner.due
    guide = learner.refresh()
    assert not learner.due and guide is learner.guide
    prior, seen = PRIOR_PODS, REFRESH_PODS
    gpu = prior * 875 + seen * 1000
    assert guide.pressure == pytest.approx({"A": prior * 750 / gpu / 0.5, "B": seen * 1000 / gpu / 0.5})
    assert guide.cpu_per_gpu_milli == pytest.approx(1000 * (prior * 6500 + seen * 12000) / gpu)
    assert guide.source == f"learned: {seen} pods observed + told workload as {PRIOR_PODS:g} pods"


def node(name: str, gpus: int, model: str = "G2", cpu: int = 64000, pods: tuple[RunningPod, ...] = ()) -> Node:
    return Node(name=name, hardware=NodeType(gpus=gpus, gpu_model=model, cpu_milli=cpu), pods=pods)


def share(name: str, gpu: int, milli: int, cpu: int = 1000) -> RunningPod:
    return RunningPod(name=name, gpu_shares={gpu: milli}, cpu_milli=cpu)


WORKLOAD = Workload(types=(TaskType(2000, 1000, 1), TaskType(2000, 470, 1)), popularity=(0.5, 0.5))


def choose(snapshot: ClusterSnapshot, new: PodRequest, policy: str, seed: int,
           guide: PackingGuide, workload: Workload = WORKLOAD) -> str:
    """Where kernel and reference put ``new`` (they must agree)."""
    cluster = Cluster(snapshot)
    cluster.fragmentation(workload)
    cluster.set_packing(guide)
    request = PlacementRequest(pods=(new,), policy=policy, seed=seed)
    got = cluster.schedule(request)
    ref = ReferenceCluster(snapshot)
    ref._workload, ref._guide = workload, guide
    want = ref.schedule(request)
    assert got.assignments == want.assignments
    assert placer.check_placement(snapshot, request, got) == []
    return got.assignments[0].node


def guide(cpu_per_gpu: float = 1000.0, duals: dict[int, float] | None = None,
          pressure: dict[str, float] | None = None) -> PackingGuide:
    duals = duals or {}
    return PackingGuide(cpu_per_gpu, duals, regret_table(duals), pressure or {})


@pytest.mark.parametrize("seed", range(6))
def test_a_shared_pod_completes_a_best_pattern(seed):
    # x: a GPU with a 470 on it (530 free); y: a GPU with a 320 (680 free)
    snapshot = ClusterSnapshot(nodes=(
        node("x", 1, pods=(share("p470", 0, 470),)),
        node("y", 1, pods=(share("p320", 0, 320),)),
    ))
    g = guide(duals={47: 0.5, 32: 1 / 3, 65: 2 / 3})
    assert choose(snapshot, pod("new", 470), "fgd-pack", seed, g) == "x"
    assert choose(snapshot, pod("new", 650), "fgd-pack", seed, g) == "y"
    # fgd itself does not see it: some seed sends the 470 next to the 320
    # (checked over the seeds below)


def test_fgd_alone_does_not_pair_the_470s():
    snapshot = ClusterSnapshot(nodes=(
        node("x", 1, pods=(share("p470", 0, 470),)),
        node("y", 1, pods=(share("p320", 0, 320),)),
    ))
    g = guide(duals={47: 0.5, 32: 1 / 3, 65: 2 / 3})
    workload = Workload(types=(TaskType(2000, 1000, 1),), popularity=(1.0,))
    seen = {choose(snapshot, pod("new", 470), "fgd", s, g, workload) for s in range(12)}
    assert seen == {"x", "y"}  # both GPUs are fragments to a whole-GPU type: a tie
    assert {choose(snapshot, pod("new", 470), "fgd-pack", s, g, workload) for s in range(12)} == {"x"}


CPU_NODES = ClusterSnapshot(nodes=(node("lean", 4, cpu=64000), node("rich", 4, cpu=128000)))


@pytest.mark.parametrize(
    "new",
    [PodRequest(name="cpu-only", cpu_milli=40000), pod("heavy", 1000, cpu=30000)],
    ids=["cpu-only", "cpu-heavy"],
)
def test_cpu_hungry_pods_leave_cpu_for_the_other_gpus(new):
    # at 12 CPUs per GPU, 40 CPUs taken from "lean" strand 2000 milli (4000 - 24000 / 12),
    # the GPU pod's 30 strand 167 (3000 - 34000 / 12); "rich" strands nothing
    for seed in range(6):
        assert choose(CPU_NODES, new, "fgd-pack", seed, guide(cpu_per_gpu=12000.0)) == "rich"
    # FGD's measure sees no difference (its types need 2 CPUs): the seeded order decides
    assert {choose(CPU_NODES, new, "fgd", s, guide(cpu_per_gpu=12000.0)) for s in range(12)} == {"lean", "rich"}


@pytest.mark.parametrize("seed", range(6))
def test_a_free_pod_keeps_off_a_pressed_model(seed):
    snapshot = ClusterSnapshot(nodes=(node("t4", 2, model="T4"), node("g2", 2, model="G2")))
    g = guide(pressure={"T4": 0.9})
    assert choose(snapshot, pod("free", 1000), "fgd-pack", seed, g) == "g2"
    assert choose(snapshot, pod("bound", 1000, models=("T4",)), "fgd-pack", seed, g) == "t4"


def test_trace_replay_matches_the_reference_and_passes_the_checker():
    snapshot, pods = openb.load_default()
    rng = random.Random(11)
    nodes = tuple(rng.sample(list(snapshot.nodes), 90))
    small = ClusterSnapshot(nodes=nodes)
    order = rng.sample(pods, 420)
    cluster = Cluster(small)
    result, _ = cluster.replay(order, "fgd-pack", seed=5)
    request = PlacementRequest(pods=tuple(order), policy="fgd-pack", seed=5)
    want = ReferenceCluster(small).schedule(request)
    assert result.assignments == want.assignments
    assert {u.pod for u in result.unschedulable} == {u.pod for u in want.unschedulable}
    assert len(result.unschedulable) > 0  # the sample overfills the nodes: choices matter
    assert placer.check_placement(small, request, result) == []


@pytest.mark.parametrize("policy", ["fgd", "fgd-pack"])
def test_the_score_cache_of_a_replay_changes_no_decision(policy):
    # a replay keeps node scores per pod shape; placing the pods one request at a time
    # (one pod per batch: no cache) must give the same placements
    snapshot, pods = openb.load_default()
    rng = random.Random(4)
    small = ClusterSnapshot(nodes=tuple(rng.sample(list(snapshot.nodes), 60)))
    order = rng.sample(pods, 700)  # about twice what the nodes hold
    # both learn fgd-pack's guide from the same told workload, so both refresh it at the
    # same pods; the batch's replay runs in parts between the refreshes
    workload = target_workload(pods)
    batch = Cluster(small)
    batch.fragmentation(workload)
    start = batch.learn_packing(workload) if policy == "fgd-pack" else None
    result, _ = batch.replay(order, policy, seed=9)
    if start is not None:
        assert batch.packing is not start  # a new guide came in during the replay
    single = Cluster(small)
    single.fragmentation(workload)
    one_by_one = []
    for p in order:
        got = single.schedule(PlacementRequest(pods=(p,), policy=policy, seed=9))
        one_by_one.extend(got.assignments)
    assert tuple(one_by_one) == result.assignments
    assert 0 < len(result.assignments) < len(order)


def test_the_kernel_refuses_fgd_pack_without_a_guide():
    from placer.policies import REGISTRY

    cluster = Cluster(ClusterSnapshot(nodes=(node("a", 2),)))
    with pytest.raises(ValueError, match="set_packing"):
        cluster.session.node_scores(pod("x"), REGISTRY["fgd-pack"])
    placed = cluster.place([pod("y")], policy="fgd-pack")  # the cluster sets a guide itself
    assert [a.node for a in placed.assignments] == ["a"]
