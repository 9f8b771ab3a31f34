"""Which policy each gang step uses (docs/placement-rules.md, "Gangs over topology levels"):
domains and the main shape's nodes by tightest fit whatever the policy; GPUs on each node,
and the other shapes' nodes within their scope, by the request's policy."""
from __future__ import annotations


import pytest

from placer import policies
from placer.model import ClusterSnapshot, GangSpec, Node, NodeType, PlacementRequest, PodRequest, RunningPod
from placer.model import replace
from agreement import placed_gpus


def test_shared_gang_pods_take_the_gpu_their_policy_chooses():
    # GPU 0 has 300 milli free, GPU 1 600: best fit takes GPU 0 (least free); fgd takes
    # GPU 1, which leaves no GPU too small for the 200-milli pods of the workload.
    hw = NodeType(gpus=2, gpu_model="G", cpu_milli=8000)
    held = (RunningPod("a", gpu_shares={0: 700}), RunningPod("b", gpu_shares={1: 400}))
    snap = ClusterSnapshot(nodes=(Node("n0", hw, pods=held),))
    pods = tuple(PodRequest(f"g-{i}", gpus=1, gpu_milli=200, gang="g") for i in range(2))
    gang = {"g": GangSpec("g", mode="required", level="node")}
    best = placed_gpus(snap, PlacementRequest(pods=pods, gangs=gang, policy="best-fit"))
    fgd = placed_gpus(snap, PlacementRequest(pods=pods, gangs=gang, policy="fgd"))
    assert best["g-0"] == ("n0", (0,))
    assert fgd["g-0"] == ("n0", (1,))


def test_the_launcher_takes_the_node_its_policy_chooses_among_the_gangs_nodes():
    # The workers fill both nodes of the rack; the CPU-only launcher goes to one of them:
    # best-fit the one with less CPU left (n1), spread and first-fit n0.
    def node(name: str, cpu: int) -> Node:
        return Node(name, NodeType(gpus=4, gpu_model="G", cpu_milli=cpu), topology={"rack": "r0"})

    snap = ClusterSnapshot(nodes=(node("n0", 16000), node("n1", 8000)), topology_levels=("rack",))
    pods = (PodRequest("launcher", cpu_milli=1000, gang="g"),) + tuple(
        PodRequest(f"w-{i}", gpus=4, cpu_milli=1000, gang="g") for i in range(2)
    )
    gang = {"g": GangSpec("g", mode="required", level="rack")}
    where = {p: placed_gpus(snap, PlacementRequest(pods=pods, gangs=gang, policy=p))["launcher"][0]
             for p in ("best-fit", "spread", "first-fit")}
    assert where == {"best-fit": "n1", "spread": "n0", "first-fit": "n0"}


def _mixed_cluster() -> ClusterSnapshot:
    """Two racks of nodes with partly used GPUs and unequal CPU: every policy has choices."""
    def node(name: str, rack: str, cpu: int, used: dict[int, int]) -> Node:
        held = tuple(RunningPod(f"{name}-h{g}", gpu_shares={g: m}) for g, m in used.items())
        return Node(name, NodeType(gpus=4, gpu_model="G", cpu_milli=cpu), pods=held, topology={"rack": rack})

    return ClusterSnapshot(
        nodes=(
            node("n0", "r0", 16000, {1: 700, 2: 400}),
            node("n1", "r0", 12000, {0: 500, 2: 800, 3: 200}),
            node("n2", "r0", 8000, {}),
            node("n3", "r1", 32000, {0: 100}),
        ),
        topology_levels=("rack",),
    )


def _mixed_gang(mode: str) -> PlacementRequest:
    pods = (
        (PodRequest("solo", gpus=1, gpu_milli=300, cpu_milli=500),)
        + tuple(PodRequest(f"w-{i}", gpus=1, gpu_milli=200, cpu_milli=1000, gang="g") for i in range(5))
        + (PodRequest("launcher", cpu_milli=2000, gang="g"),)
        + tuple(PodRequest(f"e-{i}", gpus=1, gpu_milli=300, cpu_milli=500, gang="g") for i in range(2))
        + (PodRequest("after", gpus=1, gpu_milli=100, cpu_milli=500),)
    )
    return PlacementRequest(pods=pods, gangs={"g": GangSpec("g", mode=mode, level="rack")})


@pytest.mark.parametrize("mode", ["required", "preferred"])
@pytest.mark.parametrize("name", policies.kernel_names())
def test_topology_gangs_match_the_reference_under_every_policy(name, mode):
    snap = _mixed_cluster()
    placements = set()
    for seed in range(8):
        request = replace(_mixed_gang(mode), policy=name, seed=seed)
        got = placed_gpus(snap, request)
        assert len(got) == len(request.pods)
        placements.add(tuple(sorted(got.items())))
    if name == "random":
        assert len(placements) > 1  # the draws reach the gang's GPUs and its launcher


@pytest.mark.parametrize("name", [p.name for p in policies.REGISTRY.values() if p.ranked])
def test_ranked_policies_break_the_launchers_ties_by_the_seeded_node_order(name):
    # Two identical nodes take one worker each; the launcher ties between them.
    hw = NodeType(gpus=4, gpu_model="G", cpu_milli=16000)
    snap = ClusterSnapshot(
        nodes=tuple(Node(f"n{i}", hw, topology={"rack": "r0"}) for i in range(2)), topology_levels=("rack",)
    )
    pods = (PodRequest("launcher", cpu_milli=1000, gang="g"),) + tuple(
        PodRequest(f"w-{i}", gpus=4, cpu_milli=1000, gang="g") for i in range(2)
    )
    gang = {"g": GangSpec("g", mode="required", level="rack")}
    seen = set()
    for seed in range(8):
        got = placed_gpus(snap, PlacementRequest(pods=pods, gangs=gang, policy=name, seed=seed))
        seen.add(got["launcher"][0])
    assert seen == {"n0", "n1"}
