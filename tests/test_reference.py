"""Hand-computed cases for the reference placer (tests/reference.py)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from placer.diagnostics.check import check_placement
from placer.exceptions import InvalidInputError
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    Node,
    NodeType,
    PlacementRequest,
    PodRequest,
    RunningPod,
    Taint,
    Toleration,
    Unschedulable,
)
from placer.testing import scenarios
from reference import ReferenceCluster, splitmix64_stream


def mix(seed: int, n: int) -> list[int]:
    """The first ``n`` SplitMix64 outputs, written out independently of reference.py."""
    out, s = [], seed
    for _ in range(n):
        s = (s + 0x9E3779B97F4A7C15) % (1 << 64)
        z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % (1 << 64)
        out.append(z ^ (z >> 31))
    return out


def node(name: str, gpus: int = 0, model: str | None = "A100", *, gpu_mem=None, cpu=None,
         mem=None, max_pods=None, **kw) -> Node:
    hw = NodeType(gpus=gpus, gpu_model=model if gpus else None, gpu_memory_mib=gpu_mem,
                  cpu_milli=cpu, memory_mib=mem, max_pods=max_pods)
    return Node(name=name, hardware=hw, **kw)


def snap(*nodes: Node, levels: tuple[str, ...] = ()) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=tuple(nodes), topology_levels=levels)


def req(*pods: PodRequest, policy: str = "best-fit", seed: int = 0, gangs=None) -> PlacementRequest:
    return PlacementRequest(pods=tuple(pods), policy=policy, seed=seed, gangs=gangs or {})


def where(result) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {a.pod: (a.node, a.gpus) for a in result.assignments}


def reasons(result) -> dict[str, str]:
    return {u.pod: u.reason for u in result.unschedulable}


def held(name: str, *gpus: int) -> RunningPod:
    return RunningPod(name=name, gpus=gpus)


# --------------------------------------------------------------------------- SplitMix64

def test_splitmix64_known_vectors():
    assert mix(0, 1) == [0xE220A8397B1DCDAF]
    it = splitmix64_stream(0)
    assert [next(it) for _ in range(4)] == mix(0, 4) == [
        0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC,
    ]
    it = splitmix64_stream(2**64 - 1)
    assert next(it) == mix(2**64 - 1, 1)[0]


# --------------------------------------------------------------------------- policies

def test_first_fit_takes_lowest_feasible_index():
    s = snap(node("n0", cpu=16000, unschedulable=True), node("n1", cpu=4000), node("n2", cpu=64000))
    r = ReferenceCluster(s).schedule(req(PodRequest("big", cpu_milli=8000),
                                         PodRequest("small", cpu_milli=1000), policy="first-fit"))
    assert where(r) == {"big": ("n2", ()), "small": ("n1", ())}


def test_best_fit_and_spread_on_gpus():
    # 2-GPU pod, CPU untracked: gpu_left 6000 / 0 / 2000 -> cost 38 / 0 / 13.
    s = snap(node("n0", 8), node("n1", 8, pods=(held("x", 0, 1, 2, 3, 4, 5),)),
             node("n2", 8, pods=(held("y", 0, 1, 2, 3),)))
    pod = PodRequest("p", gpus=2)
    assert where(ReferenceCluster(s).schedule(req(pod)))["p"] == ("n1", (6, 7))
    assert where(ReferenceCluster(s).schedule(req(pod, policy="spread")))["p"] == ("n0", (0, 1))


def test_best_fit_integer_cost_tie_goes_to_lower_index():
    # cpu_left 9000 -> ceil(9000/2560) = 4; 8000 -> ceil(3.125) = 4: tie, n0 wins.
    s = snap(node("n0", cpu=10000), node("n1", cpu=9000))
    r = ReferenceCluster(s).schedule(req(PodRequest("p", cpu_milli=1000)))
    assert where(r)["p"] == ("n0", ())
    # One more milli free on n1's side of the boundary separates them: 7679 -> 3.
    s = snap(node("n0", cpu=10000), node("n1", cpu=8679))
    assert where(ReferenceCluster(s).schedule(req(PodRequest("p", cpu_milli=1000))))["p"] == ("n1", ())


def test_spread_integer_cost_tie_goes_to_lower_index():
    s = snap(node("n0", cpu=9000), node("n1", cpu=10000))
    r = ReferenceCluster(s).schedule(req(PodRequest("p", cpu_milli=1000), policy="spread"))
    assert where(r)["p"] == ("n0", ())


def test_best_fit_counts_cpu_and_gpu_and_untracked_cpu_as_zero():
    # n0: cpu_left 0 (untracked), gpu_left 1000 -> 16000/2560 = 6.25 -> 7.
    # n1: cpu_left 20000 - 4000 = 16000, gpu_left 0 -> 6.25 -> 7. Tie: n0.
    # n2: cpu_left 12000, gpu_left 0 -> 4.69 -> 5: wins.
    s = snap(node("n0", 2), node("n1", 1, cpu=20000), node("n2", 1, cpu=16000))
    r = ReferenceCluster(s).schedule(req(PodRequest("p", gpus=1, cpu_milli=4000)))
    assert where(r)["p"] == ("n2", (0,))
    s = snap(node("n0", 2), node("n1", 1, cpu=20000))
    r = ReferenceCluster(s).schedule(req(PodRequest("p", gpus=1, cpu_milli=4000)))
    assert where(r)["p"] == ("n0", (0,))


def test_best_fit_counts_partly_shared_gpus_and_skips_unhealthy():
    # n0: GPU0 shared 600 -> free 400 + GPU1 1000; pod takes 200 -> gpu_left 1200 -> 7.5 -> 8.
    # n1: 4 GPUs, 3 unhealthy -> gpu_left 800 -> 5: wins despite more GPUs.
    s = snap(node("n0", 2, pods=(RunningPod("r", gpu_shares={0: 600}),)),
             node("n1", 4, unhealthy_gpus=(1, 2, 3)))
    r = ReferenceCluster(s).schedule(req(PodRequest("p", gpus=1, gpu_milli=200)))
    assert r.assignments == (Assignment("p", "n1", (0,), gpu_milli=200),)


def test_random_policy_draws_only_for_pods_with_a_feasible_node():
    s = snap(*(node(f"n{i}") for i in range(5)))
    d = mix(42, 2)
    assert [x % 5 for x in d] == [3, 1]
    r = ReferenceCluster(s).schedule(req(
        PodRequest("a"), PodRequest("gpu", gpus=1), PodRequest("b"), policy="random", seed=42))
    assert where(r) == {"a": (f"n{d[0] % 5}", ()), "b": (f"n{d[1] % 5}", ())}
    assert reasons(r) == {"gpu": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."}


def test_random_policy_shared_pod_draws_node_then_gpu():
    s = snap(node("n0", 4), node("n1", 4))
    d = mix(42, 3)
    assert (d[0] % 2, d[1] % 4, d[2] % 2) == (1, 3, 0)
    r = ReferenceCluster(s).schedule(req(
        PodRequest("s", gpus=1, gpu_milli=100), PodRequest("c"), policy="random", seed=42))
    assert r.assignments == (Assignment("s", "n1", (3,), gpu_milli=100), Assignment("c", "n0"))


def test_random_draws_even_with_one_feasible_node():
    # One feasible node still costs a draw: the second pod sees draw 2.
    s = snap(node("n0", cpu=1000), node("n1", cpu=500), node("n2", cpu=500))
    d = mix(0, 2)
    r = ReferenceCluster(s).schedule(req(
        PodRequest("a", cpu_milli=1000), PodRequest("b", cpu_milli=100), policy="random", seed=0))
    assert where(r)["a"] == ("n0", ())
    # n0 is full (cpu_free 0 < 100): feasible are n1, n2.
    assert where(r)["b"] == (f"n{1 + d[1] % 2}", ())


# --------------------------------------------------------------------------- GPUs inside a node

def test_shared_pod_takes_best_fit_share():
    shares = RunningPod("r", gpu_shares={0: 200, 1: 700, 2: 500}, gpu_memory_mib={1: 39000})
    s = snap(node("n0", 4, gpu_mem=40000, pods=(shares,)))
    c = ReferenceCluster(s)
    r = c.place(PodRequest("a", gpus=1, gpu_milli=300))
    assert r.assignments == (Assignment("a", "n0", (1,), gpu_milli=300),)
    r = c.place(PodRequest("b", gpus=1, gpu_milli=400))
    assert r.assignments[0].gpus == (2,)
    # GPU 1 has the milli but not the memory (40000 - 39000 < 2000).
    r = c.place(PodRequest("m", gpus=1, gpu_milli=300, gpu_memory_mib=2000))
    assert r.assignments[0].gpus == (2,)
    # Equal free milli: the lower index.
    s = snap(node("n0", 3, pods=(RunningPod("r", gpu_shares={1: 500, 2: 500}),)))
    assert ReferenceCluster(s).place(PodRequest("t", gpus=1, gpu_milli=500)).assignments[0].gpus == (1,)


def test_whole_gpu_pod_takes_lowest_whole_free_indices():
    s = snap(node("n0", 8, unhealthy_gpus=(1,), pods=(held("x", 0, 3), RunningPod("y", gpu_shares={2: 10}))))
    r = ReferenceCluster(s).place(PodRequest("p", gpus=3))
    assert r.assignments == (Assignment("p", "n0", (4, 5, 6)),)


# --------------------------------------------------------------------------- reasons

def one_reason(s: ClusterSnapshot, pod: PodRequest) -> str:
    r = ReferenceCluster(s).place(pod)
    assert not r.assignments
    return r.unschedulable[0].reason


def test_reason_cordoned():
    assert one_reason(snap(node("n0", unschedulable=True)), PodRequest("p")) == (
        "0/1 nodes are available: 1 node(s) were unschedulable.")


def test_reason_taints():
    t_val = Taint("nvidia.com/gpu", "NoSchedule", "present")
    t_key = Taint("dedicated", "NoExecute")
    t_soft = Taint("soft", "PreferNoSchedule")
    s = snap(node("n0", taints=(t_soft, t_val, t_key)), node("n1", taints=(t_key,)))
    # kube v1.36 names no taint: one reason for every untolerated taint
    assert one_reason(s, PodRequest("p")) == "0/2 nodes are available: 2 node(s) had untolerated taint(s)."
    tol = (Toleration(key="nvidia.com/gpu", operator="Exists"),)
    assert one_reason(s, PodRequest("p", tolerations=tol)) == (
        "0/2 nodes are available: 2 node(s) had untolerated taint(s).")
    both = (Toleration(key="nvidia.com/gpu", operator="Exists"), Toleration(key="dedicated", operator="Exists"))
    assert ReferenceCluster(s).place(PodRequest("p", tolerations=both)).assignments
    tol_all = (Toleration(operator="Exists"),)
    assert ReferenceCluster(s).place(PodRequest("p", tolerations=tol_all)).assignments


def test_reason_selector_model_and_no_gpus():
    s = snap(node("n0", labels={"pool": "a"}), node("n1", 2, "H100", labels={"pool": "b"}),
             node("n2", 2, "A100", labels={"pool": "b"}), node("n3", labels={"pool": "b"}))
    pod = PodRequest("p", gpus=1, gpu_models=("A100",), node_selector={"pool": "b"}, cpu_milli=1)
    s2 = snap(*s.nodes[:2], s.nodes[3])
    assert one_reason(s2, pod) == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match Pod's GPU model (no node has A100; the cluster has H100), "
        "1 node(s) didn't match Pod's node affinity/selector.")
    assert where(ReferenceCluster(s).place(pod)) == {"p": ("n2", (0,))}


def test_reason_resources_each_shortfall_counted():
    full = node("n0", 1, cpu=1000, mem=1000, max_pods=1, pods=(RunningPod("r", gpus=(0,), cpu_milli=500),))
    s = snap(full, node("n1", 1, cpu=100, mem=5000))
    assert one_reason(s, PodRequest("p", gpus=1, cpu_milli=600, memory_mib=2000)) == (
        "0/2 nodes are available: 1 Insufficient memory, 1 Insufficient nvidia.com/gpu, "
        "1 Too many pods, 2 Insufficient cpu.")


def test_reason_gpu_memory_whole_and_shared():
    s = snap(node("n0", 2, gpu_mem=40960), node("n1", 2))
    # n1 tracks no GPU memory: it takes the pod.
    assert where(ReferenceCluster(s).place(PodRequest("p", gpus=1, gpu_memory_mib=81920)))["p"][0] == "n1"
    assert one_reason(snap(s.nodes[0]), PodRequest("p", gpus=1, gpu_memory_mib=81920)) == (
        "0/1 nodes are available: 1 Insufficient GPU memory.")
    # Whole: too few GPUs is reported, not memory.
    assert one_reason(snap(s.nodes[0]), PodRequest("p", gpus=4, gpu_memory_mib=81920)) == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    sh = node("n0", 2, gpu_mem=1000, pods=(RunningPod("r", gpu_shares={0: 900}, gpu_memory_mib={1: 900}),))
    assert one_reason(snap(sh), PodRequest("p", gpus=1, gpu_milli=200, gpu_memory_mib=500)) == (
        "0/1 nodes are available: 1 Insufficient GPU memory.")
    r = ReferenceCluster(snap(sh)).place(PodRequest("p", gpus=1, gpu_milli=100, gpu_memory_mib=100))
    assert r.assignments[0].gpus == (0,)  # best fit: GPU 0 has 100 milli and 1000 MiB free
    sh_full = node("n0", 2, unhealthy_gpus=(1,), pods=(RunningPod("r", gpu_shares={0: 900}),))
    assert one_reason(snap(sh_full), PodRequest("p", gpus=1, gpu_milli=200)) == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


def test_reason_ordering_as_kube_sorts_the_count_and_reason_strings():
    s = snap(node("a", unschedulable=True), node("b", cpu=1, labels={"x": "z"}), node("c", unschedulable=True),
             node("d", labels={"x": "y"}))
    pod = PodRequest("p", cpu_milli=10, node_selector={"x": "z"})
    assert one_reason(s, pod) == (
        "0/4 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector, 2 node(s) were unschedulable.")
    # sort.Strings on "<count> <reason>": 10 sorts before 2
    many = snap(*(node(f"n{i}", cpu=1) for i in range(10)), node("m0", mem=1), node("m1", mem=1))
    assert one_reason(many, PodRequest("p", cpu_milli=10, memory_mib=10)) == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 Insufficient memory.")


def test_reason_all_unhealthy_gpus_is_insufficient_gpu():
    assert one_reason(snap(node("n0", 2, unhealthy_gpus=(0, 1))), PodRequest("p", gpus=1)) == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


# --------------------------------------------------------------------------- gangs

def test_unconstrained_gang_all_or_nothing():
    s = snap(node("n0", 4, cpu=8000), node("n1", 4, cpu=8000))
    c = ReferenceCluster(s)
    before = {n: c.node_free(n) for n in ("n0", "n1")}
    gang = [PodRequest(f"g-{i}", gpus=4, gang="g") for i in range(3)]
    r = c.schedule(req(*gang, PodRequest("after", gpus=1), gangs={"g": GangSpec("g")}))
    line = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    msg = f"gang g: 2 of 3 pod(s) placed before pod g-2 failed: {line}"
    assert r.unschedulable == tuple(Unschedulable(f"g-{i}", msg) for i in range(3))
    assert r.assignments == (Assignment("after", "n0", (0,)),)
    assert r.gangs == (GangResult("g", False, solver="greedy", status="unknown"),)
    c.release("after")
    assert {n: c.node_free(n) for n in ("n0", "n1")} == before


def test_gang_placed_at_position_of_first_pod():
    s = snap(node("n0", 2))
    pods = (PodRequest("g-0", gpus=1, gang="g"), PodRequest("solo", gpus=1), PodRequest("g-1", gpus=1, gang="g"))
    r = ReferenceCluster(s).schedule(req(*pods, policy="first-fit", gangs={"g": GangSpec("g")}))
    assert r.assignments == (Assignment("g-0", "n0", (0,), gang="g"), Assignment("g-1", "n0", (1,), gang="g"))
    assert r.unschedulable[0].pod == "solo"
    assert r.gangs == (GangResult("g", True, solver="greedy", status="feasible"),)


def test_place_gang_does_not_change_state():
    s = snap(node("n0", 4), node("n1", 4, pods=(held("x", 0),)))
    c = ReferenceCluster(s)
    before = [c.node_free("n0"), c.node_free("n1")]
    pods = [PodRequest(f"p{i}", gpus=2) for i in range(3)]
    r = c.place(pods, gang=GangSpec("g"))
    assert len(r.assignments) == 3 and all(a.gang == "g" for a in r.assignments)
    assert [c.node_free("n0"), c.node_free("n1")] == before
    r = c.place(pods + [PodRequest("p3", gpus=2)], gang=GangSpec("g"))
    assert not r.assignments and len(r.unschedulable) == 4
    assert [c.node_free("n0"), c.node_free("n1")] == before


def test_required_gang_takes_the_tightest_domain_that_fits():
    # r1 (n0, n2) holds one 4-GPU pod (n2 has 2 GPUs held); r0 (n1, n3) holds two.
    s = snap(node("n0", 4, topology={"rack": "r1"}), node("n1", 4, topology={"rack": "r0"}),
             node("n2", 4, topology={"rack": "r1"}, pods=(held("x", 0, 1),)),
             node("n3", 4, topology={"rack": "r0"}), levels=("rack",))
    spec = GangSpec("g", mode="required", level="rack")
    pods = [PodRequest(f"g-{i}", gpus=4, gang="g") for i in range(2)]
    r = ReferenceCluster(s).schedule(req(*pods, gangs={"g": spec}))
    assert where(r) == {"g-0": ("n1", (0, 1, 2, 3)), "g-1": ("n3", (0, 1, 2, 3))}
    assert check_placement(s, req(*pods, gangs={"g": spec}), r) == []
    # An unconstrained gang would have used r1's n0 first (best-fit: n2 cannot).
    r = ReferenceCluster(s).schedule(req(*pods, gangs={"g": GangSpec("g")}))
    assert where(r)["g-0"][0] == "n0"
    three = [PodRequest(f"g-{i}", gpus=4, gang="g") for i in range(3)]
    r = ReferenceCluster(s).schedule(req(*three, gangs={"g": spec}))
    line = (
        "gang g: topology level rack allows to fit only 2 out of 3 pod(s); "
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    assert reasons(r) == {f"g-{i}": line for i in range(3)}


def test_required_domain_is_the_whole_path_and_missing_levels_exclude():
    s = snap(node("n0", 4, topology={"block": "b0", "rack": "r0"}),
             node("n1", 4, topology={"block": "b1", "rack": "r0"}),
             node("n2", 4, topology={"rack": "r0"}),
             levels=("block", "rack"))
    pods = [PodRequest(f"g-{i}", gpus=4, gang="g") for i in range(2)]
    r = ReferenceCluster(s).schedule(req(*pods, gangs={"g": GangSpec("g", mode="required", level="rack")}))
    # n0 and n1 share no domain (b0/r0 is not b1/r0); n2 has no block, so no rack domain
    line = "gang g: topology level rack allows to fit only 1 out of 2 pod(s)"
    assert reasons(r) == {f"g-{i}": line for i in range(2)}


def test_required_level_node():
    s = snap(node("n0", 4, pods=(held("x", 0, 1),)), node("n1", 4))
    pods = [PodRequest(f"g-{i}", gpus=2, gang="g") for i in range(2)]
    r = ReferenceCluster(s).schedule(req(*pods, gangs={"g": GangSpec("g", mode="required", level="node")}))
    assert where(r) == {"g-0": ("n1", (0, 1)), "g-1": ("n1", (2, 3))}


def test_required_gang_random_stream_not_rewound_between_domains():
    # r0 = [n0, n1 cordoned]: g-0 draws (1 feasible), g-1 finds none.
    # r1 = [n2, n3]: g-0 uses draw 2 (seed 0: even -> n2), g-1 draw 3 on n3.
    s = snap(node("n0", 4, topology={"rack": "r0"}), node("n1", 4, topology={"rack": "r0"}, unschedulable=True),
             node("n2", 4, topology={"rack": "r1"}), node("n3", 4, topology={"rack": "r1"}), levels=("rack",))
    d = mix(0, 2)
    assert (d[0] % 2, d[1] % 2) == (1, 0)
    pods = [PodRequest(f"g-{i}", gpus=4, gang="g") for i in range(2)]
    spec = GangSpec("g", mode="required", level="rack")
    r = ReferenceCluster(s).schedule(req(*pods, policy="random", seed=0, gangs={"g": spec}))
    assert where(r) == {"g-0": ("n2", (0, 1, 2, 3)), "g-1": ("n3", (0, 1, 2, 3))}


# --------------------------------------------------------------------------- bind / release

def test_bind_release_round_trip():
    s = snap(node("n0", 4, gpu_mem=1000, cpu=8000, mem=100, max_pods=3,
                  pods=(RunningPod("run", gpus=(0,), gpu_shares={1: 300}, gpu_memory_mib={1: 200},
                                   cpu_milli=1000, memory_mib=10),)))
    c = ReferenceCluster(s)
    start = c.node_free("n0")
    assert start == {"cpu_milli": 7000, "memory_mib": 90, "pods": 2,
                     "gpu_milli": (0, 700, 1000, 1000), "gpu_memory_mib": (1000, 800, 1000, 1000)}
    r = c.place([PodRequest("w", gpus=2, cpu_milli=500), PodRequest("s", gpus=1, gpu_milli=600, gpu_memory_mib=700)])
    assert c.node_free("n0") == start
    c.bind(r)
    assert c.node_free("n0") == {"cpu_milli": 6500, "memory_mib": 90, "pods": 0,
                                 "gpu_milli": (0, 100, 0, 0), "gpu_memory_mib": (1000, 100, 1000, 1000)}
    with pytest.raises(InvalidInputError):
        c.bind(r.assignments[0])
    c.release("w")
    c.release("s")
    assert c.node_free("n0") == start
    c.release("run")
    assert c.node_free("n0") == {"cpu_milli": 8000, "memory_mib": 100, "pods": 3,
                                 "gpu_milli": (1000,) * 4, "gpu_memory_mib": (1000,) * 4}
    with pytest.raises(InvalidInputError):
        c.release("run")


def test_bind_rejects_what_does_not_fit_and_is_atomic():
    s = snap(node("n0", 2, unhealthy_gpus=(1,)))
    c = ReferenceCluster(s)
    c.place([PodRequest("a", gpus=1), PodRequest("b", gpus=1)])
    before = c.node_free("n0")
    with pytest.raises(InvalidInputError):
        c.bind([Assignment("a", "n0", (0,)), Assignment("b", "n0", (0,))])
    assert c.node_free("n0") == before and not c.is_bound("a")
    with pytest.raises(InvalidInputError):
        c.bind(Assignment("a", "n0", (1,)))  # unhealthy
    with pytest.raises(InvalidInputError):
        c.bind(Assignment("ghost", "n0", (0,)))  # never decided
    with pytest.raises(InvalidInputError):
        c.release("ghost")
    assert c.node_free("n0")["gpu_milli"] == (1000, 0)


def test_unhealthy_gpus_show_zero_and_are_never_used():
    s = snap(node("n0", 3, gpu_mem=10, unhealthy_gpus=(0, 2)))
    c = ReferenceCluster(s)
    assert c.node_free("n0")["gpu_milli"] == (0, 1000, 0)
    assert c.node_free("n0")["gpu_memory_mib"] == (0, 10, 0)
    r = c.schedule(req(PodRequest("a", gpus=1, gpu_milli=10), PodRequest("b", gpus=1, gpu_milli=10)))
    assert [a.gpus for a in r.assignments] == [(1,), (1,)]


def test_schedule_binds_and_rejects_bound_names():
    s = snap(node("n0", 1))
    c = ReferenceCluster(s)
    c.schedule(req(PodRequest("a", gpus=1)))
    assert c.is_bound("a") and c.node_free("n0")["gpu_milli"] == (0,)
    with pytest.raises(InvalidInputError):
        c.schedule(req(PodRequest("a")))


@settings(max_examples=50, deadline=None)
@given(scenarios())
def test_place_then_bind_equals_schedule(case):
    snapshot, request = case
    one = ReferenceCluster(snapshot)
    decided = one.place(list(request.pods), policy=request.policy, seed=request.seed) if not request.gangs else None
    two = ReferenceCluster(snapshot)
    scheduled = two.schedule(request)
    if decided is not None:
        assert decided == scheduled
        one.bind(decided)
        for n in snapshot.nodes:
            assert one.node_free(n.name) == two.node_free(n.name)
    for a in scheduled.assignments:
        two.release(a.pod)
    fresh = ReferenceCluster(snapshot)
    for n in snapshot.nodes:
        assert two.node_free(n.name) == fresh.node_free(n.name)
