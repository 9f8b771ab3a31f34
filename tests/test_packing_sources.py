"""Where fgd-pack's figures come from (issue #13, items 10-11): the workload told or the
pods seen so far, never the pods still to come."""
from __future__ import annotations

import itertools

import pytest

from placer.workload import packing
from placer.placement.cluster import Cluster
from placer.workload.fragmentation import TaskType, Workload
from placer.kernel import KernelSession
from placer.model import ClusterSnapshot, Node, NodeType, PlacementRequest, PodRequest
from placer.workload.packing import PackingGuide
from placer.replay.simulate import run_replay

A = NodeType(gpus=8, gpu_model="A", cpu_milli=96000)
B = NodeType(gpus=8, gpu_model="B", cpu_milli=96000)


def two_models(per_model: int) -> ClusterSnapshot:
    """``per_model`` nodes of model A, then as many of model B."""
    nodes = [Node(name=f"a{i}", hardware=A) for i in range(per_model)]
    nodes += [Node(name=f"b{i}", hardware=B) for i in range(per_model)]
    return ClusterSnapshot(nodes=tuple(nodes))


def gpu_pod(name: str, models: tuple[str, ...] = (), gpus: int = 1, milli: int = 1000, cpu: int = 4000) -> PodRequest:
    return PodRequest(name=name, gpus=gpus, gpu_milli=milli, cpu_milli=cpu, gpu_models=models)


ONLY_A = Workload(types=(TaskType(8000, 1000, 1, ("A",)), TaskType(2000, 500, 1)), popularity=(0.75, 0.25))
PRESSURE_A = 0.75 / 0.875 / 0.5  # A takes 0.75 of the 0.875 GPU a pod brings; it has half the GPUs
RATE_A = (0.75 * 8000 + 0.25 * 2000) / 0.875  # CPU milli per GPU the told GPU pods bring


def first_guide_of_replay(monkeypatch, *args, **kwargs) -> PackingGuide:
    """The guide in force when ``run_replay`` hands its first pod to the kernel."""
    seen: list[PackingGuide] = []
    place = KernelSession.place

    def spy(self, *a, **k):
        if not seen:
            seen.append(self.packing)
        return place(self, *a, **k)

    monkeypatch.setattr(KernelSession, "place", spy)
    run_replay(*args, **kwargs)
    return seen[0]


def test_run_replay_takes_the_guide_from_the_workload_told(monkeypatch):
    snapshot = two_models(2)
    pods = [gpu_pod(f"b{i}", ("B",)) for i in range(20)] + [gpu_pod(f"f{i}", milli=300) for i in range(20)]
    guides = [
        first_guide_of_replay(monkeypatch, snapshot, pods, "fgd-pack", seed, ONLY_A, ratio=ratio)
        for seed, ratio in ((1, 1.3), (2, 1.1))
    ]
    for got in guides:  # the same for two shuffles and inflations: what was told, only
        assert got.pressure == pytest.approx({"A": PRESSURE_A})
        assert got.cpu_per_gpu_milli == pytest.approx(RATE_A)
        assert got.duals == pytest.approx({50: 0.5})
    # nothing told: the target workload of the original list (all its types are kept)
    untold = first_guide_of_replay(monkeypatch, snapshot, pods, "fgd-pack", 3)
    assert untold.pressure == pytest.approx({"B": 20_000 / 26_000 / 0.5})
    assert untold.duals == pytest.approx({30: 1 / 3})


def test_a_cluster_told_nothing_does_not_read_the_pods_to_come():
    # 20 free pods of one type, then one pod restricted to A (or to B); the last pod's type
    # is rare enough to stay out of FGD's target workload (95 % of pods), so only
    # fgd-pack's guide could tell the two lists apart before the last pod
    snapshot = two_models(2)
    head = [gpu_pod(f"f{i}") for i in range(20)]
    placed, guides = {}, {}
    for model in ("A", "B"):
        cluster = Cluster(snapshot)
        result, _ = cluster.replay(head + [gpu_pod("last", (model,), gpus=4, cpu=4001)], "fgd-pack", seed=7)
        assert cluster.session.workload.types == (TaskType(4000, 1000, 1),)
        placed[model] = [(a.node, a.gpus) for a in result.assignments if a.pod != "last"]
        guides[model] = cluster.session.packing
    assert placed["A"] == placed["B"]
    assert len(placed["A"]) == 20
    for guide in guides.values():  # neutral: fewer pods came than a refresh needs
        assert (guide.cpu_per_gpu_milli, dict(guide.pressure), dict(guide.duals)) == (1000.0, {}, {})
        assert guide.source == "learned: 0 pods observed"


def test_a_cluster_told_nothing_starts_from_the_pods_it_holds():
    snapshot = two_models(1)
    cluster = Cluster(snapshot)
    cluster.schedule(PlacementRequest(pods=(gpu_pod("held", ("B",), gpus=2, cpu=30000),), policy="best-fit"))
    cluster.place([gpu_pod("x"), gpu_pod("y", ("A",), gpus=8)], policy="fgd-pack")
    guide = cluster.session.packing  # of the held pod only: not of x and y
    assert guide.pressure == pytest.approx({"B": 2.0})
    assert guide.cpu_per_gpu_milli == pytest.approx(15000)
    assert guide.source == "learned: 1 pods observed"


def test_model_pressure_follows_the_pods_that_arrive(monkeypatch):
    # told: three quarters of the GPU demand may only use model A; what comes: half of the
    # pods may only use B, none A (640 pods, refreshes every 128)
    snapshot = two_models(40)
    order = [gpu_pod(f"p{i}", ("B",) if i % 2 else ()) for i in range(640)]
    refreshed: list[PackingGuide] = []  # what the learner gave at each look, in order
    refresh = packing.PackingLearner.refresh

    def spy(self: packing.PackingLearner) -> PackingGuide:
        refreshed.append(refresh(self))
        return refreshed[-1]

    monkeypatch.setattr(packing.PackingLearner, "refresh", spy)
    cluster = Cluster(snapshot)
    place = cluster.session.place
    at_place: list[PackingGuide] = []

    def first(*a, **k):
        at_place.append(cluster.session.packing)
        return place(*a, **k)

    cluster.session.place = first
    cluster.replay(order, "fgd-pack", seed=3, workload=ONLY_A)
    assert at_place[0].pressure == pytest.approx({"A": PRESSURE_A})  # the start: what was told
    prior, seen = packing.PRIOR_PODS, 512
    gpu = prior * 875 + seen * 1000
    assert cluster.session.packing.pressure == pytest.approx(
        {"A": prior * 750 / gpu / 0.5, "B": seen / 2 * 1000 / gpu / 0.5}
    )
    # refreshed before pods 128, 256, 384 and 512, each time from the pods before it; a
    # look that moved nothing gives the guide in force again, and nothing new is pushed
    pushed = [g for i, g in enumerate(refreshed) if i == 0 or g is not refreshed[i - 1]]
    assert packing.REFRESH_PODS == 128
    assert [g.source.split()[1] for g in pushed] == ["0", "128", "256", "384", "512"]
    pressures = [(g.pressure.get("A", 0.0), g.pressure.get("B", 0.0)) for g in pushed]
    assert all(a1 < a0 and b1 > b0 for (a0, b0), (a1, b1) in itertools.pairwise(pressures))
