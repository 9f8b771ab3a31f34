"""The FGD fragmentation measure (FGD_NOTES §2.1-2.2, §2.4)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import placer
from placer.workload import fragmentation as fr
from placer.adapters import openb
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import CLASSES, TaskType, Workload
from placer.model import ClusterSnapshot, Node, NodeType, PodRequest, RunningPod

# --------------------------------------------------------------------------------------
# Type distributions of the FGD simulator's unit tests: hkust-adsl/kubernetes-scheduler-
# simulator, pkg/utils/frag_test.go, TestingGenerateGetTypicalPods (35 types) and
# TestingGenerateGetTypicalPodsWithNonGpu (31 types). Transcribed as data:
# (cpu milli, gpu milli per GPU, number of GPUs, GPU type or "", percentage).

SIM_TYPICAL_35 = [
    (6000, 465, 1, "", 9.33),
    (8000, 440, 1, "2080", 9.15),
    (8000, 475, 1, "T4", 8.76),
    (8000, 440, 1, "P100", 8.72),
    (2000, 465, 1, "", 8.68),
    (12000, 900, 1, "", 8.65),
    (4000, 900, 1, "", 8.43),
    (16000, 678, 1, "T4", 8.36),
    (8000, 500, 1, "", 8.29),
    (6000, 511, 1, "", 8.11),
    (14000, 1000, 2, "2080", 0.54),
    (4000, 1000, 1, "2080", 0.43),
    (32000, 1000, 2, "T4", 0.43),
    (16000, 1000, 1, "V100M16", 0.40),
    (64000, 1000, 2, "", 0.40),
    (10000, 1000, 2, "", 0.40),
    (11400, 1000, 1, "T4", 0.36),
    (16000, 1000, 1, "T4", 0.36),
    (4000, 1000, 2, "", 0.36),
    (14000, 1000, 2, "V100M16", 0.36),
    (8000, 1000, 4, "", 0.36),
    (16000, 1000, 2, "", 0.32),
    (2000, 1000, 1, "T4", 0.32),
    (6000, 1000, 1, "", 0.32),
    (4000, 1000, 1, "", 0.32),
    (5000, 1000, 1, "", 0.32),
    (32000, 1000, 4, "V100M16", 0.32),
    (32000, 1000, 2, "", 0.32),
    (24000, 1000, 8, "2080", 0.32),
    (40000, 1000, 4, "", 0.29),
    (32000, 1000, 8, "", 0.29),
    (32000, 1000, 1, "T4", 0.29),
    (16000, 1000, 1, "", 0.25),
    (7000, 1000, 1, "V100M16", 0.25),
    (24000, 1000, 1, "T4", 0.25),
]

SIM_TYPICAL_WITH_NON_GPU_31 = [
    (15700, 1000, 1, "", 28.69),
    (11900, 1000, 1, "", 18.93),
    (11400, 1000, 1, "", 12.27),
    (1000, 0, 0, "", 7.36),
    (18710, 1000, 1, "", 4.85),
    (8200, 1000, 1, "", 3.79),
    (16400, 1000, 1, "", 3.31),
    (9810, 1000, 1, "", 1.97),
    (15200, 1000, 1, "", 1.87),
    (11200, 1000, 1, "", 1.81),
    (14200, 1000, 1, "", 1.76),
    (12000, 0, 0, "", 1.65),
    (14900, 1000, 1, "", 1.39),
    (60200, 1000, 4, "", 1.23),
    (64200, 1000, 8, "", 1.07),
    (32200, 1000, 4, "", 1.01),
    (17400, 1000, 2, "", 0.91),
    (30200, 1000, 2, "", 0.69),
    (16000, 1000, 1, "", 0.64),
    (15000, 1000, 1, "", 0.59),
    (64000, 1000, 8, "", 0.53),
    (15000, 0, 0, "", 0.53),
    (11910, 1000, 1, "", 0.53),
    (120200, 1000, 8, "", 0.48),
    (11300, 1000, 1, "", 0.37),
    (30000, 1000, 2, "", 0.32),
    (9800, 1000, 1, "", 0.32),
    (8000, 1000, 1, "", 0.32),
    (2000, 1000, 1, "", 0.27),
    (2000, 80, 1, "", 0.27),
    (1000, 1000, 1, "", 0.27),
]


def sim_workload(rows) -> Workload:
    """A workload from simulator-test rows, popularity = percentage / 100, not renormalised."""
    return Workload(
        types=tuple(TaskType(c, g, n, (m,) if m else ()) for c, g, n, m, _ in rows),
        popularity=tuple(pct / 100 for *_, pct in rows),
    )


# ------------------------------------------------------------ simulator unit tests


def test_sim_distributions_transcribed():
    assert len(SIM_TYPICAL_35) == 35
    assert len(SIM_TYPICAL_WITH_NON_GPU_31) == 31
    assert math.isclose(sum(r[-1] for r in SIM_TYPICAL_35), 95.06)
    assert math.isclose(sum(r[-1] for r in SIM_TYPICAL_WITH_NON_GPU_31), 100.0)


@pytest.mark.parametrize(
    "cpu, free, expected",
    [
        (1000, [200, 1000, 1000, 500], 2566.62),  # "4x1080_used"
        (1000, [1000] * 4, 3802.40),  # "4x1080_full"
        (1000, [1000] * 8, 7604.80),  # "8x1080_full"
    ],
)
def test_sim_share_frag_amount_35_types(cpu, free, expected):
    # frag_test.go TestNodeGpuShareFragAmount / ...Score: node GPU type "1080".
    assert fr.node_fragment(cpu, free, "1080", sim_workload(SIM_TYPICAL_35)) == pytest.approx(expected, abs=0.01)


def test_sim_single_type_lack_cpu():
    # frag_test.go: one type (6000 mCPU, 465 mGPU x1, 9.33 %) on "4x1080_used_lack_CPU":
    # class q4_lack_cpu, idle 2700, fragment 251.91.
    w = sim_workload(SIM_TYPICAL_35[:1])
    total, classes = fr.node_fragment(1000, [200, 1000, 1000, 500], "1080", w, classes=True)
    assert total == pytest.approx(251.91, abs=0.01)
    assert classes["q4_lack_cpu"] == pytest.approx(251.91, abs=0.01)
    assert sum(v for k, v in classes.items() if k != "q4_lack_cpu") == 0


@pytest.mark.parametrize(
    "cpu, free, expected",
    [
        (64000, [1000] * 8, 887.20),  # "8xP100_empty"
        (32000, [1000] * 4 + [0] * 4, 554.4),  # "8xP100_halved"
        (0, [1000] * 4 + [0] * 4, 4000),  # "8xP100_nocpu"
    ],
)
def test_sim_share_frag_amount_with_non_gpu(cpu, free, expected):
    # frag_test.go TestNodeGpuShareFragAmountWithNonGpu: node GPU type "P100".
    w = sim_workload(SIM_TYPICAL_WITH_NON_GPU_31)
    assert fr.node_fragment(cpu, free, "P100", w) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    "task, expected",
    [
        (TaskType(100, 1000, 2), 700),
        (TaskType(100, 200, 2), 0),
    ],
)
def test_sim_gpu_frag_milli_of_a_fitting_type(task, expected):
    # frag_test.go TestGetGpuFragMilliByNodeResAndPodRes on "4x1080_used" (the q3 part).
    w = Workload((task,), (1.0,))
    total, classes = fr.node_fragment(1000, [200, 1000, 1000, 500], "1080", w, classes=True)
    assert total == expected
    assert classes["q3_satisfied"] == 2700 - expected


# ------------------------------------------------------------ hand-computed classes

NODE = dict(cpu_free=8000, gpu_free_milli=[1000, 600, 300, 0], gpu_model="A")  # idle 1900


def one(task: TaskType):
    return fr.node_fragment(workload=Workload((task,), (1.0,)), classes=True, **NODE)


@pytest.mark.parametrize(
    "task, cls, fragment, q3",
    [
        (TaskType(4000), "xl_satisfied", 1900, 0),
        (TaskType(8000), "xl_satisfied", 1900, 0),  # CPU equal to the free CPU fits
        (TaskType(9000), "xr_lack_cpu", 1900, 0),
        (TaskType(1000, 500, 1, ("B",)), "no_access", 1900, 0),
        (TaskType(1000, 500, 1, ("B", "A")), "q2_lack_gpu", 300, 1600),  # q3: 300+0 too small
        (TaskType(1000, 1000, 1), "q2_lack_gpu", 900, 1000),  # q3: 600+300 too small
        (TaskType(1000, 600, 2), "q2_lack_gpu", 300, 1600),  # 600 free = 600 asked: fits
        (TaskType(9000, 1000, 1), "q4_lack_cpu", 1900, 0),
        (TaskType(1000, 1000, 2), "q2_lack_gpu", 1900, 0),
        (TaskType(9000, 700, 2), "q1_lack_both", 1900, 0),
    ],
)
def test_each_class(task, cls, fragment, q3):
    total, classes = one(task)
    assert total == fragment
    assert classes[cls] == fragment
    assert classes["q3_satisfied"] == q3
    assert sum(classes.values()) == 1900
    assert set(classes) == set(CLASSES)


def test_mixed_workload_by_hand():
    w = Workload(
        (TaskType(1000, 1000, 1), TaskType(4000), TaskType(1000, 1000, 2), TaskType(1000, 500, 1)),
        (0.25, 0.25, 0.25, 0.25),
    )
    total, classes = fr.node_fragment(workload=w, classes=True, **NODE)
    # 0.25 * (900 + 1900 + 1900 + 300)
    assert total == 1250
    assert classes["q2_lack_gpu"] == 0.25 * (900 + 1900 + 300)
    assert classes["q3_satisfied"] == 0.25 * (1000 + 1600)
    assert classes["xl_satisfied"] == 0.25 * 1900


def test_untracked_cpu_always_fits():
    assert fr.node_fragment(None, [1000, 1000], "A", Workload((TaskType(10**9, 1000, 2),), (1.0,))) == 0


def test_node_without_gpus_or_idle_gpus_has_no_fragment():
    w = Workload((TaskType(1000), TaskType(1000, 500, 1)), (0.5, 0.5))
    assert fr.node_fragment(64000, [], None, w) == 0
    total, classes = fr.node_fragment(64000, [0, 0], "A", w, classes=True)
    assert total == 0 and not any(classes.values())


def test_node_without_model_is_no_access_for_constrained_types():
    w = Workload((TaskType(1000, 500, 1, ("A",)),), (1.0,))
    assert fr.node_fragment(8000, [1000], None, w, classes=True)[1]["no_access"] == 1000


# ------------------------------------------------------------ property

types_st = st.builds(
    lambda cpu, n, share, models: TaskType(
        cpu, 0 if n == 0 else (share if n == 1 else 1000), n, models if n else ()
    ),
    st.integers(0, 20).map(lambda k: 1000 * k),
    st.sampled_from([0, 1, 1, 2, 4, 8]),
    st.integers(1, 1000),
    st.sampled_from([(), ("A",), ("B",), ("A", "B")]),
)


@st.composite
def workloads(draw):
    types = draw(st.lists(types_st, min_size=1, max_size=8))
    weights = draw(st.lists(st.integers(1, 100), min_size=len(types), max_size=len(types)))
    total = sum(weights)
    return Workload(tuple(types), tuple(w / total for w in weights))


nodes_st = st.tuples(
    st.one_of(st.none(), st.integers(0, 20000)),
    st.lists(st.integers(0, 1000), max_size=8),
    st.sampled_from(["A", "B", None]),
)


@given(workloads(), nodes_st)
def test_classes_sum_to_idle_when_popularity_sums_to_one(w, node):
    cpu, free, model = node
    total, classes = fr.node_fragment(cpu, free, model, w, classes=True)
    idle = sum(free)
    assert sum(classes.values()) == pytest.approx(idle, rel=1e-9, abs=1e-9)
    assert total == pytest.approx(idle - classes["q3_satisfied"], rel=1e-9, abs=1e-9)
    assert -1e-9 <= total <= idle + 1e-6
    assert all(v >= 0 for v in classes.values())


def _snapshot_of(nodes) -> ClusterSnapshot:
    """A snapshot whose derived free state is ``nodes`` = [(cpu_free, free_list, model)]."""
    out = []
    for i, (cpu, free, model) in enumerate(nodes):
        pods = []
        for g, f in enumerate(free):
            if f == 0:
                pods.append(RunningPod(name=f"p{i}-{g}", gpus=(g,)))
            elif f < 1000:
                pods.append(RunningPod(name=f"p{i}-{g}", gpu_shares={g: 1000 - f}))
        cap = None if cpu is None else 20000
        if cpu is not None:
            pods.append(RunningPod(name=f"c{i}", cpu_milli=cap - cpu))
        hw = NodeType(gpus=len(free), gpu_model=model, cpu_milli=cap)
        out.append(Node(name=f"n{i}", hardware=hw, pods=tuple(pods)))
    return ClusterSnapshot(nodes=tuple(out))


@given(workloads(), st.lists(nodes_st, min_size=1, max_size=6))
def test_cluster_fragment_is_the_sum_of_node_fragments(w, nodes):
    result = fr.cluster_fragment(_snapshot_of(nodes), w)
    per_node = [fr.node_fragment(c, f, m, w) for c, f, m in nodes]
    assert list(result.nodes.values()) == per_node  # same arithmetic, bit for bit
    assert result.total == pytest.approx(math.fsum(per_node), rel=1e-12, abs=1e-9)
    assert result.idle_gpu_milli == sum(sum(f) for _, f, _ in nodes)
    assert result.gpu_capacity_milli == 1000 * sum(len(f) for _, f, _ in nodes)
    assert sum(result.classes.values()) == pytest.approx(result.idle_gpu_milli, rel=1e-9, abs=1e-6)


# ------------------------------------------------------------ target workload


@pytest.fixture(scope="module")
def default():
    return openb.load_default()


def test_target_workload_of_default_trace(default):
    # FGD_NOTES §1.2 "Target-workload statistics".
    _, pods = default
    w = fr.target_workload(pods)
    assert w.distinct_types == 91
    assert len(w) == 35
    assert w.total_pods == 8152
    assert round(100 * w.coverage, 2) == 95.26
    assert math.isclose(sum(w.popularity), 1.0)
    share = [round(100 * c / w.total_pods, 1) for c in w.counts[:6]]
    assert list(zip(w.types[:6], share)) == [
        (TaskType(3152, 810, 1), 12.8),
        (TaskType(11300, 1000, 1), 10.7),
        (TaskType(11400, 1000, 1), 7.3),
        (TaskType(3152, 1000, 1), 5.8),
        (TaskType(11908, 470, 1), 4.8),
        (TaskType(12500), 4.5),
    ]
    assert w.popularity[0] == 1047 / sum(w.counts)
    assert list(w.counts) == sorted(w.counts, reverse=True)


def test_target_workload_cut_and_renormalisation():
    pods = [TaskType(1000, 1000, 1)] * 5 + [TaskType(2000)] * 3 + [TaskType(3000, 500, 1)] * 2
    w = fr.target_workload(pods, threshold=0.5)  # 5/10 reaches 50 %
    assert w.types == (TaskType(1000, 1000, 1),) and w.popularity == (1.0,)
    w = fr.target_workload(pods, threshold=0.51)
    assert w.types == (TaskType(1000, 1000, 1), TaskType(2000))
    assert w.popularity == (5 / 8, 3 / 8)
    assert w.coverage == 0.8
    w = fr.target_workload(pods, threshold=1.0)
    assert len(w) == 3 and w.distinct_types == 3


def test_target_workload_tie_order_is_by_type():
    # Equal counts: ascending (cpu_milli, gpu_milli, num_gpu, gpu_models).
    pods = [
        TaskType(2000, 500, 1),
        TaskType(1000, 1000, 2),
        TaskType(1000, 1000, 1, ("T4",)),
        TaskType(1000, 1000, 1),
        TaskType(1000, 0, 0),
    ]
    w = fr.target_workload(list(reversed(pods)), threshold=1.0)
    assert w.types == (
        TaskType(1000),
        TaskType(1000, 1000, 1),
        TaskType(1000, 1000, 1, ("T4",)),
        TaskType(1000, 1000, 2),
        TaskType(2000, 500, 1),
    )
    assert fr.target_workload(pods, threshold=0.4).types == w.types[:2]


def test_task_type_of_pod():
    assert TaskType.of(PodRequest(name="c", cpu_milli=500, memory_mib=10)) == TaskType(500)
    p = PodRequest(name="s", gpus=1, gpu_milli=300, gpu_models=("T4", "A10"), cpu_milli=4000)
    assert TaskType.of(p) == TaskType(4000, 300, 1, ("T4", "A10"))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(cpu_milli=-1),
        dict(cpu_milli=1000, gpu_milli=500, num_gpu=0),
        dict(cpu_milli=1000, gpu_milli=0, num_gpu=1),
        dict(cpu_milli=1000, gpu_milli=1500, num_gpu=1),
        dict(cpu_milli=1000, gpu_milli=500, num_gpu=1, gpu_models=("",)),
    ],
)
def test_bad_task_types(kwargs):
    with pytest.raises(InvalidInputError):
        TaskType(**kwargs)


def test_bad_workloads():
    with pytest.raises(InvalidInputError):
        Workload((TaskType(1),), (0.5, 0.5))
    with pytest.raises(InvalidInputError):
        Workload((TaskType(1), TaskType(2)), (0.7, 0.7))
    with pytest.raises(InvalidInputError):
        Workload((TaskType(1),), (-0.1,))
    with pytest.raises(InvalidInputError):
        fr.target_workload([])
    with pytest.raises(InvalidInputError):
        fr.target_workload([TaskType(1)], threshold=0)


# ------------------------------------------------------------ clusters


def test_empty_default_cluster(default):
    snap, pods = default
    w = fr.target_workload(pods)
    result = fr.cluster_fragment(snap, w)
    assert result.idle_gpu_milli == result.gpu_capacity_milli == 6_212_000
    assert sum(result.classes.values()) == pytest.approx(6_212_000)
    # Every kept GPU type asks for one GPU (the 2/4/8-GPU types are below the 95 % cut),
    # and a fitting type leaves no GPU too small on an empty node: q2 (and q1) get nothing.
    assert all(t.num_gpu <= 1 for t in w.types)
    assert result.classes["q2_lack_gpu"] == result.classes["q1_lack_both"] == 0
    assert result.classes["no_access"] == 0
    cpu_only = sum(p for t, p in w.items() if t.cpu_only)
    assert result.classes["xl_satisfied"] + result.classes["xr_lack_cpu"] == pytest.approx(cpu_only * 6_212_000)
    assert result.rate == pytest.approx(result.total / 6_212_000)
    assert result.amount_pct == pytest.approx(100 * result.rate)
    first = snap.nodes[0]
    assert result.nodes[first.name] == fr.node_fragment(
        first.hardware.cpu_milli, [1000] * first.hardware.gpus, first.hardware.gpu_model, w
    )


SMALL = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodeTypes": {
        "t4": {"gpuModel": "T4", "gpus": 2, "cpuMilli": 16000, "memoryMiB": 65536},
        "g2": {"gpuModel": "G2", "gpus": 8, "cpuMilli": 96000, "memoryMiB": 393216},
    },
    "nodes": [
        {"name": "a", "type": "t4", "pods": [{"name": "x", "gpuShares": {"1": 300}, "cpuMilli": 4000}]},
        {"name": "b", "type": "g2", "unhealthyGpus": [7], "pods": [{"name": "y", "gpus": [0, 1], "cpuMilli": 90000}]},
        {"name": "c", "cpuMilli": 8000},
    ],
}


def test_snapshot_free_state_is_derived():
    states = fr.node_states(SMALL)
    assert states == [
        fr.NodeState("a", 12000, (1000, 700), "T4"),
        fr.NodeState("b", 6000, (0, 0, 1000, 1000, 1000, 1000, 1000, 0), "G2"),
        fr.NodeState("c", 8000, (), None),
    ]


def test_cluster_and_snapshot_agree():
    w = Workload(
        (TaskType(8000, 1000, 1), TaskType(2000, 500, 1, ("T4",)), TaskType(10000), TaskType(4000, 1000, 4)),
        (0.4, 0.3, 0.2, 0.1),
    )
    cluster = placer.Cluster(SMALL)
    assert fr.cluster_fragment(cluster, w) == fr.cluster_fragment(SMALL, w)
    decision = cluster.place({"name": "z", "gpus": 1, "gpuMilli": 600, "cpuMilli": 1000}, policy="best-fit")
    cluster.bind(decision)
    after = fr.cluster_fragment(cluster, w)
    assert after == fr.cluster_fragment(cluster.to_snapshot(), w)
    node = decision.assignments[0].node
    free = cluster.node_free(node)
    model = {"a": "T4", "b": "G2"}[node]
    assert after.nodes[node] == fr.node_fragment(free.cpu_milli, free.gpu_milli, model, w)
    assert after.nodes["c"] == 0
    assert after.idle_gpu_milli == fr.cluster_fragment(SMALL, w).idle_gpu_milli - 600
