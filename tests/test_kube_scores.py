"""kube-scheduler's score plugins as placer policies (placer.placement.kube_scores).

The rows are kube-scheduler v1.36's own score tests (``pkg/scheduler/framework/plugins``:
``noderesources/{least_allocated,most_allocated,requested_to_capacity_ratio,
balanced_allocation}_test.go``, ``nodeaffinity`` TestNodeAffinityPriority,
``tainttoleration`` TestTaintTolerationScore, ``interpodaffinity/scoring_test.go``,
``podtopologyspread/scoring_test.go``): the same nodes and pods in placer's model, the same
per-node scores expected. Memory in kube's rows is bytes, here MiB (each score is a ratio of
integers, the same at either scale). Rows whose pods have no containers or an explicit zero
request are left out: placer's pod is one container and 0 means "not given"
(``docs/placement-rules.md``, "kube scores"). A Hypothesis property compares the numpy
composition with the plain-Python reference (tests/kube_scores_reference.py).
"""
from __future__ import annotations

from typing import Any, Sequence

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kube_scores_reference as ref
from placer import check_placement
from placer.exceptions import InvalidInputError
from placer.model import (
    ClusterSnapshot,
    Node,
    NodeType,
    PlacementRequest,
    PodRequest,
    ResourceAmount,
    RunningPod,
    Taint,
    Toleration,
)
from placer.model.affinity import Affinity, TopologySpreadConstraint
from placer.placement import kube_scores
from placer.placement.cluster import Cluster
from placer.placement.kube_scores import PLUGIN_WEIGHTS, FitStrategy, node_scores, plugin_scores
from placer.policies import REGISTRY
from placer.testing import scenarios

HOST = "kubernetes.io/hostname"


def node(name: str, cpu: int | None = None, memory: int | None = None, *, gpus: int = 0,
         labels: dict[str, str] | None = None, taints: Sequence[Taint] = (), pods: Sequence[RunningPod] = (),
         extended: dict[str, int] | None = None) -> Node:
    hardware = NodeType(gpus=gpus, gpu_model="G" if gpus else None, cpu_milli=cpu, memory_mib=memory)
    resources = {k: ResourceAmount(v, v) for k, v in (extended or {}).items()}
    return Node(name=name, hardware=hardware, labels=labels or {}, taints=tuple(taints), pods=tuple(pods),
                resources=resources)


def running(name: str, cpu: int = 0, memory: int = 0, *, labels: dict[str, str] | None = None,
            affinity: dict[str, Any] | None = None, gpus: Sequence[int] = (),
            resources: dict[str, int] | None = None) -> RunningPod:
    return RunningPod(name=name, cpu_milli=cpu, memory_mib=memory, labels=labels or {}, gpus=tuple(gpus),
                      affinity=None if affinity is None else msgspec.convert(affinity, Affinity),
                      resources=resources or {})


def pod(cpu: int = 0, memory: int = 0, *, labels: dict[str, str] | None = None, affinity: dict[str, Any] | None = None,
        tolerations: Sequence[Toleration] = (), spread: Sequence[dict[str, Any]] = (), gpus: int = 0,
        resources: dict[str, int] | None = None, name: str = "p") -> PodRequest:
    return PodRequest(
        name, gpus=gpus, cpu_milli=cpu, memory_mib=memory, labels=labels or {}, tolerations=tuple(tolerations),
        affinity=None if affinity is None else msgspec.convert(affinity, Affinity),
        topology_spread_constraints=tuple(msgspec.convert(c, TopologySpreadConstraint) for c in spread),
        resources=resources or {},
    )


def plugin(nodes: Sequence[Node], the_pod: PodRequest, name: str, *, policy: str = "kube",
           candidates: Sequence[str] | None = None, strategy: FitStrategy | None = None) -> dict[str, int]:
    """One plugin's normalised score per candidate node (default: every node)."""
    cluster = Cluster(ClusterSnapshot(nodes=tuple(nodes)))
    chosen = candidates if candidates is not None else [n.name for n in nodes]
    mask = np.array([n.name in chosen for n in nodes])
    got = plugin_scores(cluster, the_pod, policy, mask, strategy=strategy)[name]
    return {n.name: int(s) for n, s, keep in zip(nodes, got, mask) if keep}


# ---------------------------------------------------------------------- NodeResourcesFit

EXTENDED = "abc.com/xyz"
WITH_EXTENDED = FitStrategy("LeastAllocated", (("cpu", 1), ("memory", 1), (EXTENDED, 1)))


@pytest.mark.parametrize("kind, the_pod, nodes, strategy, want", [
    # least_allocated_test.go
    ("LeastAllocated", pod(3000, 5000), [node("node1", 4000, 10000), node("node2", 6000, 10000)], None,
     {"node1": 37, "node2": 50}),
    ("LeastAllocated", pod(3000, 5000), [node("node1", 4000, 10000), node("node2", 6000, 10000)],
     FitStrategy("LeastAllocated", (("memory", 2), ("cpu", 1))), {"node1": 41, "node2": 50}),
    ("LeastAllocated", pod(3000, 5000),
     [node("node1", 6000, 10000), node("node2", 6000, 10000, extended={EXTENDED: 4})], WITH_EXTENDED,
     {"node1": 50, "node2": 50}),
    ("LeastAllocated", pod(3000, 5000, resources={EXTENDED: 2}),
     [node("node1", 6000, 10000, extended={EXTENDED: 4}), node("node2", 6000, 10000, extended={EXTENDED: 10})],
     WITH_EXTENDED, {"node1": 50, "node2": 60}),
    ("LeastAllocated", pod(3000, 4000),
     [node("node1", 6000, 10000), node("node2", 6000, 10000, extended={EXTENDED: 4})],
     FitStrategy("LeastAllocated", ((EXTENDED, 2), ("cpu", 1), ("memory", 1))), {"node1": 55, "node2": 55}),
    ("LeastAllocated", pod(3000, 5000),
     [node("node1", 10000, 20000, pods=[running("e1", 3000, 5000)]), node("node2", 10000, 50000, pods=[running("e2", 3000, 5000)])],
     None, {"node1": 45, "node2": 60}),  # node2 of the rows "pods scheduled with resources" (memory 0 left out)
    # most_allocated_test.go
    ("MostAllocated", pod(3000, 5000), [node("node1", 4000, 10000), node("node2", 6000, 10000)], None,
     {"node1": 62, "node2": 50}),
    ("MostAllocated", pod(5000, 9000), [node("node1", 5000, 10000), node("node2", 10000, 9000)], None,
     {"node1": 95, "node2": 75}),
    ("MostAllocated", pod(3000, 5000), [node("node1", 4000, 10000), node("node2", 6000, 10000)],
     FitStrategy("MostAllocated", (("memory", 2), ("cpu", 1))), {"node1": 58, "node2": 50}),
    ("MostAllocated", pod(), [node("node1", 250, 1000, pods=[running("e1"), running("e2")]), node("node2", 250, 1000)],
     None, {"node1": 80, "node2": 30}),  # kube's non-zero requests: 100m and 200 MiB a pod
    ("MostAllocated", pod(3000, 5000, resources={EXTENDED: 2}),
     [node("node1", 6000, 10000, extended={EXTENDED: 4}), node("node2", 6000, 10000, extended={EXTENDED: 10})],
     FitStrategy("MostAllocated", WITH_EXTENDED.resources), {"node1": 50, "node2": 40}),
    ("MostAllocated", pod(3000, 4000),
     [node("node1", 6000, 10000), node("node2", 6000, 10000, extended={EXTENDED: 4})],
     FitStrategy("MostAllocated", ((EXTENDED, 2), ("cpu", 1), ("memory", 1))), {"node1": 45, "node2": 45}),
])
def test_node_resources_fit_rows(kind, the_pod, nodes, strategy, want):
    policy = {"LeastAllocated": "kube", "MostAllocated": "kube-most-allocated"}[kind]
    assert plugin(nodes, the_pod, "NodeResourcesFit", policy=policy, strategy=strategy) == want


FOO, BAR = "intel.com/foo", "intel.com/bar"
SINGLE = FitStrategy("RequestedToCapacityRatio", ((FOO, 1),), ((0, 0), (100, 1)))
MULTIPLE = FitStrategy("RequestedToCapacityRatio", ((FOO, 3), (BAR, 5)), ((0, 0), (100, 1)))


def _ext_nodes(first: dict[str, int], second: dict[str, int], pods: Sequence[RunningPod] = ()) -> list[Node]:
    return [node("node1", 4000, 10000, extended=first), node("node2", 4000, 10000, extended=second, pods=pods)]


@pytest.mark.parametrize("the_pod, nodes, strategy, want", [
    # requested_to_capacity_ratio_test.go: the default shape (least requested first), rounded
    (pod(3000, 5000), [node("node1", 4000, 10000), node("node2", 6000, 10000)],
     FitStrategy("RequestedToCapacityRatio", shape=((0, 10), (100, 0))), {"node1": 38, "node2": 50}),
    (pod(3000, 5000), [node("node1", 4000, 10000, pods=[running("e1", 3000, 5000)]), node("node2", 6000, 10000, pods=[running("e2", 3000, 5000)])],
     FitStrategy("RequestedToCapacityRatio", shape=((0, 10), (100, 0))), {"node1": 0, "node2": 0}),
    # TestResourceBinPackingSingleExtended
    (pod(), _ext_nodes({FOO: 8}, {FOO: 4}), SINGLE, {"node1": 0, "node2": 0}),
    (pod(resources={FOO: 2}), _ext_nodes({FOO: 8}, {FOO: 4}), SINGLE, {"node1": 2, "node2": 5}),
    (pod(resources={FOO: 2}), _ext_nodes({FOO: 8}, {FOO: 4}, [running("e", resources={FOO: 2})]), SINGLE,
     {"node1": 2, "node2": 10}),
    (pod(resources={FOO: 4}), _ext_nodes({FOO: 8}, {FOO: 4}), SINGLE, {"node1": 5, "node2": 10}),
    # TestResourceBinPackingMultipleExtended
    (pod(), _ext_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}), MULTIPLE, {"node1": 0, "node2": 0}),
    (pod(resources={FOO: 2, BAR: 2}), _ext_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}), MULTIPLE,
     {"node1": 4, "node2": 3}),
    (pod(resources={FOO: 2, BAR: 2}), _ext_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}, [running("e", resources={FOO: 4, BAR: 2})]),
     MULTIPLE, {"node1": 4, "node2": 7}),
    (pod(resources={FOO: 4, BAR: 2}), _ext_nodes({FOO: 8, BAR: 4}, {FOO: 4, BAR: 8}), MULTIPLE,
     {"node1": 5, "node2": 5}),
])
def test_requested_to_capacity_ratio_rows(the_pod, nodes, strategy, want):
    got = plugin(nodes, the_pod, "NodeResourcesFit", policy="kube-requested-to-capacity-ratio", strategy=strategy)
    assert got == want


GPU_BALANCE = FitStrategy("LeastAllocated", balanced_resources=(("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1)))


@pytest.mark.parametrize("the_pod, nodes, strategy, want", [
    # balanced_allocation_test.go
    (pod(), [node("node1", 4000, 10000), node("node2", 4000, 10000)], None, {"node1": 0, "node2": 0}),  # skipped
    (pod(3000, 5000), [node("node1", 4000, 10000), node("node2", 6000, 10000)], None, {"node1": 68, "node2": 75}),
    (pod(3000, 5000), [node("node1", 10000, 20000, pods=[running("e1", 3000)]),
                       node("node2", 10000, 20000, pods=[running("e2", 3000, 5000)])], None, {"node1": 73, "node2": 74}),
    (pod(3000, 5000), [node("node1", 10000, 20000, pods=[running("e1", 3000)]),
                       node("node2", 10000, 50000, pods=[running("e2", 3000, 5000)])], None, {"node1": 73, "node2": 70}),
    (pod(0, 5000), [node("node1", 3000, 5000, pods=[running("e1", 3000)]), node("node2", 3000, 5000)], None,
     {"node1": 100, "node2": 50}),
    (pod(3000), [node("node1", 6000, 10000, pods=[running("e1", 3000)]),
                 node("node2", 6000, 10000, pods=[running("e2", 3000, 5000)])], None, {"node1": 62, "node2": 62}),
    (pod(gpus=1), [node("node1", 3500, 40000, gpus=8, pods=[running("e1", 3000, 5000, gpus=(0, 1, 2))]),
                   node("node2", 3500, 40000, gpus=8, pods=[running("e2", 3000, 5000)])], GPU_BALANCE,
     {"node1": 75, "node2": 76}),
    (pod(3000, 5000), [node("node1", 3500, 40000, gpus=8), node("node2", 3500, 40000)], GPU_BALANCE,
     {"node1": 56, "node2": 56}),
])
def test_balanced_allocation_rows(the_pod, nodes, strategy, want):
    assert plugin(nodes, the_pod, "NodeResourcesBalancedAllocation", strategy=strategy) == want


# ---------------------------------------------------------------------- NodeAffinity, TaintToleration


def _prefer(*terms: tuple[int, dict[str, str]]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [
            {"key": k, "operator": "In", "values": [v]} for k, v in match.items()]}}
        for w, match in terms
    ]}}


AFFINITY1 = _prefer((2, {"foo": "bar"}))
AFFINITY2 = _prefer((2, {"foo": "bar"}), (4, {"key": "value"}), (5, {"foo": "bar", "key": "value", "az": "az1"}))
L1, L2, L3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
L4, L5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}


@pytest.mark.parametrize("affinity, labels, want", [
    (None, [L1, L2, L3], [0, 0, 0]),
    (AFFINITY1, [L4, L2, L3], [0, 0, 0]),
    (AFFINITY1, [L1, L2, L3], [100, 0, 0]),
    (AFFINITY2, [L1, L5, L2], [18, 100, 36]),
])
def test_node_affinity_priority_rows(affinity, labels, want):
    nodes = [node(f"node{i}", labels=lab) for i, lab in enumerate(labels)]
    got = plugin(nodes, pod(affinity=affinity), "NodeAffinity")
    assert list(got.values()) == want


def _taint(key: str, value: str, effect: str = "PreferNoSchedule") -> Taint:
    return Taint(key=key, value=value, effect=effect)


def _tolerate(key: str, value: str, effect: str = "PreferNoSchedule") -> Toleration:
    return Toleration(key=key, operator="Equal", value=value, effect=effect)


ARM, SSD = ("cpu-type", "arm64"), ("disk-type", "ssd")


@pytest.mark.parametrize("tolerations, taints, want", [
    ([_tolerate("foo", "bar")], [[_taint("foo", "bar")], [_taint("foo", "blah")]], [100, 0]),
    ([_tolerate(*ARM), _tolerate(*SSD)], [[], [_taint(*ARM)], [_taint(*ARM), _taint(*SSD)]], [100, 100, 100]),
    ([_tolerate("foo", "bar")], [[], [_taint(*ARM)], [_taint(*ARM), _taint(*SSD)]], [100, 50, 0]),
    ([_tolerate(*ARM, "NoSchedule"), _tolerate(*SSD, "NoSchedule")],
     [[], [_taint(*ARM, "NoSchedule")], [_taint(*ARM), _taint(*SSD)]], [100, 100, 0]),
    ([], [[], [_taint(*ARM)]], [100, 0]),
])
def test_taint_toleration_score_rows(tolerations, taints, want):
    nodes = [node(f"node{i}", taints=t) for i, t in enumerate(taints)]
    # kube's rows score NoSchedule-tainted nodes too (Score without Filter): every node here
    got = plugin(nodes, pod(tolerations=tolerations), "TaintToleration")
    assert list(got.values()) == want


# ---------------------------------------------------------------------- InterPodAffinity

CHINA, INDIA, AZ1 = {"region": "China"}, {"region": "India"}, {"az": "az1"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1, S2 = {"security": "S1"}, {"security": "S2"}


def _expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


def _weighted(weight: int, key: str, *exprs: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchExpressions": list(exprs)}, "topologyKey": key}}


STAY_S1_REGION = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    _weighted(5, "region", _expr("security", "In", "S1"))]}}
STAY_S2_REGION = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    _weighted(6, "region", _expr("security", "In", "S2"))]}}
AFFINITY3 = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    _weighted(8, "region", _expr("security", "NotIn", "S1"), _expr("security", "In", "S2")),
    _weighted(2, "region", _expr("security", "Exists"), _expr("wrongkey", "DoesNotExist")),
]}}
HARD = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchExpressions": [_expr("security", "In", "S1", "value2")]}, "topologyKey": "region"},
    {"labelSelector": {"matchExpressions": [_expr("security", "Exists"), _expr("wrongkey", "DoesNotExist")]},
     "topologyKey": "region"},
]}}
AWAY_S1_AZ = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    _weighted(5, "az", _expr("security", "In", "S1"))]}}


@pytest.mark.parametrize("the_pod, placement, labels, want", [
    (pod(affinity=STAY_S1_REGION), [(0, S1, None)], [CHINA, CHINA_AZ1, INDIA], [100, 100, 0]),
    (pod(labels=S1, affinity=STAY_S2_REGION), [(0, S2, None), (0, S2, None), (1, S2, None), (2, S2, None), (3, S2, None), (4, S2, None)],
     [CHINA, INDIA, CHINA, CHINA, INDIA], [100, 0, 100, 100, 0]),
    (pod(labels=S1, affinity=AFFINITY3), [(0, S1, None), (1, S2, None), (2, S1, None)], [CHINA, INDIA, AZ1], [20, 100, 0]),
    (pod(labels=S2), [(0, S1, STAY_S1_REGION), (1, S2, STAY_S2_REGION)], [CHINA, INDIA, AZ1], [0, 100, 0]),
    (pod(labels=S1), [(0, S1, HARD), (1, S2, HARD)], [CHINA, INDIA, AZ1], [100, 100, 0]),
    (pod(labels=S1, affinity=AWAY_S1_AZ), [(0, S1, None), (1, S2, None)], [AZ1, CHINA], [0, 100]),
    (pod(labels=S1, affinity=AWAY_S1_AZ), [(0, S1, None), (1, S1, None)], [AZ1, CHINA], [0, 100]),
    (pod(labels=S1), [], [CHINA, INDIA], [0, 0]),  # no term touches a domain: skipped
])
def test_preferred_inter_pod_affinity_rows(the_pod, placement, labels, want):
    pods: list[list[RunningPod]] = [[] for _ in labels]
    for k, (where, pod_labels, affinity) in enumerate(placement):
        pods[where].append(running(f"e{k}", labels=pod_labels, affinity=affinity))
    nodes = [node(f"node{i}", labels=lab, pods=pods[i]) for i, lab in enumerate(labels)]
    assert list(plugin(nodes, the_pod, "InterPodAffinity").values()) == want


def test_namespaces_of_inter_pod_terms():
    """A term without namespaces selects pods of its owner's namespace (the part of the
    name before ``/``); a namespaceSelector reads the namespace's one label,
    ``kubernetes.io/metadata.name``."""
    term = _weighted(5, "region", _expr("security", "In", "S1"))
    other_ns = [running("team-b/e", labels=S1)]
    nodes = [node("node0", labels=CHINA, pods=other_ns), node("node1", labels=INDIA)]
    mine = pod(name="team-a/p", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}})
    assert list(plugin(nodes, mine, "InterPodAffinity").values()) == [0, 0]  # skipped: nothing in team-a
    selected = dict(term, podAffinityTerm=dict(term["podAffinityTerm"], namespaceSelector={
        "matchLabels": {"kubernetes.io/metadata.name": "team-b"}}))
    mine = pod(name="team-a/p", affinity={"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [selected]}})
    assert list(plugin(nodes, mine, "InterPodAffinity").values()) == [100, 0]


# ---------------------------------------------------------------------- PodTopologySpread


def _spread(max_skew: int, key: str, selector: str | None = "foo") -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway"}
    if selector is not None:
        c["labelSelector"] = {"matchExpressions": [_expr(selector, "Exists")]}
    return c


def _spread_nodes(counts: dict[str, int], labels: dict[str, dict[str, str]], other: dict[str, Sequence[dict[str, str]]] | None = None) -> list[Node]:
    out = []
    for name, lab in labels.items():
        pods = [running(f"p-{name}{k}", labels={"foo": ""}) for k in range(counts.get(name, 0))]
        pods += [running(f"q-{name}{k}", labels=extra) for k, extra in enumerate((other or {}).get(name, ()))]
        out.append(node(name, labels=lab, pods=pods))
    return out


def _hosts(*names: str) -> dict[str, dict[str, str]]:
    return {n: {HOST: n} for n in names}


@pytest.mark.parametrize("constraints, counts, labels, candidates, want", [
    ([_spread(1, HOST)], {}, _hosts("node-a", "node-b"), None, [100, 100]),
    ([_spread(1, HOST)], {"node-a": 2, "node-b": 1}, _hosts("node-a", "node-b"), ["node-a"], [100]),
    ([_spread(1, HOST)], {"node-a": 1, "node-b": 1}, _hosts("node-a", "node-b"), None, [100, 100]),
    ([_spread(1, HOST)], {"node-a": 2, "node-b": 1, "node-d": 3}, _hosts("node-a", "node-b", "node-c", "node-d"), None,
     [20, 60, 100, 0]),
    ([_spread(1, HOST, None)], {"node-a": 2, "node-b": 1, "node-d": 3}, _hosts("node-a", "node-b", "node-c", "node-d"),
     None, [100, 100, 100, 100]),
    ([_spread(2, HOST)], {"node-a": 2, "node-b": 1, "node-d": 3}, _hosts("node-a", "node-b", "node-c", "node-d"), None,
     [33, 66, 100, 16]),
    ([_spread(3, HOST)], {"node-a": 4, "node-b": 3, "node-c": 2, "node-d": 1}, _hosts("node-a", "node-b", "node-c", "node-d"),
     None, [44, 66, 77, 100]),
    ([_spread(1, HOST)], {"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3}, _hosts("node-a", "node-b", "node-x", "node-y"),
     ["node-a", "node-b", "node-x"], [33, 83, 100]),
    ([_spread(1, HOST)], {"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3},
     {"node-a": {HOST: "node-a"}, "node-b": {"n": "node-b"}, "node-x": {HOST: "node-x"}, "node-y": {HOST: "node-y"}},
     ["node-a", "node-b", "node-x"], [16, 0, 100]),
    ([_spread(1, "zone")], {"node-a": 4, "node-b": 2, "node-x": 1, "node-y": 3},
     {"node-a": {"zone": "zone1", HOST: "node-a"}, "node-b": {"zone": "zone1", HOST: "node-b"},
      "node-x": {"zone": "zone2", HOST: "node-x"}, "node-y": {"zone": "zone2", HOST: "node-y"}},
     ["node-a", "node-b", "node-x"], [75, 75, 100]),
    ([_spread(1, "zone"), _spread(1, HOST)], {"node-a": 2, "node-b": 1, "node-x": 2, "node-y": 4},
     {"node-a": {"zone": "zone1", HOST: "node-a"}, "node-b": {"zone": "zone1", HOST: "node-b"},
      "node-x": {"zone": "zone2", HOST: "node-x"}, "node-y": {"zone": "zone2", HOST: "node-y"}},
     ["node-a", "node-x"], [100, 63]),
])
def test_topology_spread_score_rows(constraints, counts, labels, candidates, want):
    nodes = _spread_nodes(counts, labels)
    got = plugin(nodes, pod(labels={"foo": ""}, spread=constraints), "PodTopologySpread", candidates=candidates)
    assert list(got.values()) == want


def test_topology_spread_two_selectors_on_one_key():
    """Row "two Constraints on zone, 2 out of 4 nodes are candidates" (foo and bar selectors)."""
    labels = {"node-a": {"zone": "zone1"}, "node-x": {"zone": "zone2"}, "node-b": {"zone": "zone1"}, "node-y": {"zone": "zone2"}}
    on = {"node-a": [{"foo": "", "bar": ""}, {"foo": ""}], "node-b": [{"foo": "", "bar": ""}],
          "node-y": [{"foo": ""}, {"foo": "", "bar": ""}, {"foo": ""}]}
    nodes = _spread_nodes({}, labels, on)
    the_pod = pod(labels={"foo": "", "bar": ""}, spread=[_spread(1, "zone"), _spread(1, "zone", "bar")])
    got = plugin(nodes, the_pod, "PodTopologySpread", candidates=["node-a", "node-x"])
    assert got == {"node-a": 85, "node-x": 100}


def test_a_pod_without_constraints_gets_no_default_spread():
    """kube's system default constraints select by the pod's Services and controllers;
    placer's model has none, so the plugin is skipped (0 on every node)."""
    nodes = _spread_nodes({"node-a": 3}, {"node-a": {"zone": "z1", HOST: "node-a"}, "node-b": {"zone": "z2", HOST: "node-b"}})
    assert plugin(nodes, pod(labels={"foo": ""}), "PodTopologySpread") == {"node-a": 0, "node-b": 0}


# ---------------------------------------------------------------------- composition and placement


def test_weights_are_kube_defaults():
    assert PLUGIN_WEIGHTS == {
        "TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
        "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1,
    }


def test_total_is_the_weighted_sum_and_placement_takes_the_top_node():
    nodes = [
        node("small", 4000, 10000, labels={"foo": "bar"}),
        node("big", 8000, 16000, taints=[_taint(*ARM)]),
        node("plain", 8000, 16000),
    ]
    snapshot = ClusterSnapshot(nodes=tuple(nodes))
    the_pod = pod(2000, 4000, affinity=AFFINITY1)
    cluster = Cluster(snapshot)
    parts = plugin_scores(cluster, the_pod)
    total = node_scores(cluster, the_pod)
    assert total.tolist() == [sum(PLUGIN_WEIGHTS[k] * int(v[i]) for k, v in parts.items()) for i in range(3)]
    # small: affinity 100*2, taints 100*3, fit (50+60)/2=55, balance 50+(50+95-100)//2=72 -> 627
    assert int(total[0]) == 200 + 300 + 55 + 72
    assert cluster.node_scores(the_pod, policy="kube").tolist() == total.tolist()
    result = Cluster(snapshot).schedule(PlacementRequest(pods=(the_pod,), policy="kube"))
    assert [a.node for a in result.assignments] == [nodes[int(np.argmax(total))].name] == ["small"]


def test_nodes_that_fail_the_filters_score_lowest_and_are_not_normalised_over():
    nodes = [node("n0", 1000, 1000), node("n1", 8000, 8000), node("n2", 4000, 8000)]
    cluster = Cluster(ClusterSnapshot(nodes=tuple(nodes)))
    total = node_scores(cluster, pod(2000, 1000))
    assert int(total[0]) == np.iinfo(np.int64).min and int(total[1]) > int(total[2]) > 0


def test_ties_go_to_a_seeded_draw_among_the_top_nodes():
    nodes = tuple(node(f"n{i}", 4000, 8000) for i in range(6))
    chosen = set()
    for seed in range(12):
        result = Cluster(ClusterSnapshot(nodes=nodes)).schedule(PlacementRequest(pods=(pod(1000, 1000),), policy="kube", seed=seed))
        chosen.add(result.assignments[0].node)
        again = Cluster(ClusterSnapshot(nodes=nodes)).schedule(PlacementRequest(pods=(pod(1000, 1000),), policy="kube", seed=seed))
        assert again == result
    assert len(chosen) > 1


def test_a_request_sees_its_own_pods_placed_before():
    """Least allocated spreads the pods of one request: each sees what the ones before took."""
    nodes = tuple(node(f"n{i}", 4000, 8000) for i in range(3))
    pods = tuple(pod(1000, 1000, name=f"p{k}") for k in range(3))
    result = Cluster(ClusterSnapshot(nodes=nodes)).schedule(PlacementRequest(pods=pods, policy="kube", seed=1))
    assert sorted(a.node for a in result.assignments) == ["n0", "n1", "n2"]
    most = Cluster(ClusterSnapshot(nodes=nodes)).schedule(PlacementRequest(pods=pods, policy="kube-most-allocated", seed=1))
    assert len({a.node for a in most.assignments}) == 1


def test_preferred_affinity_follows_pods_of_the_same_request():
    nodes = tuple(node(f"n{i}", 8000, 8000, labels={"zone": f"z{i}"}) for i in range(4))
    follow = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        _weighted(100, "zone", _expr("app", "In", "web"))]}}
    pods = (pod(1000, 1000, name="a", labels={"app": "web"}),
            pod(1000, 1000, name="b", labels={"app": "web"}, affinity=follow))
    result = Cluster(ClusterSnapshot(nodes=nodes)).schedule(PlacementRequest(pods=pods, policy="kube", seed=5))
    assert result.assignments[0].node == result.assignments[1].node


def test_gpus_inside_the_chosen_node_and_the_unfit_pod_reason():
    nodes = tuple(node(f"n{i}", 8000, 8000, gpus=4) for i in range(2))
    pods = (pod(1000, 1000, gpus=2, name="a"), pod(1000, 1000, gpus=8, name="b"))
    result = Cluster(ClusterSnapshot(nodes=nodes)).schedule(PlacementRequest(pods=pods, policy="kube"))
    assert len(result.assignments[0].gpus) == 2
    assert [u.pod for u in result.unschedulable] == ["b"]
    assert "nvidia.com/gpu" in result.unschedulable[0].reason


def test_kube_policies_are_registered():
    for name, kind in (("kube", "LeastAllocated"), ("kube-most-allocated", "MostAllocated"),
                       ("kube-requested-to-capacity-ratio", "RequestedToCapacityRatio")):
        assert REGISTRY[name].kube_scoring == kind
        assert kube_scores.STRATEGIES[kind].kind == kind


# ---------------------------------------------------------------------- against the reference

LABEL_KEYS = ("zone", "rack")
APP = st.sampled_from(["web", "db", "cache"])


@st.composite
def clusters(draw):
    n = draw(st.integers(1, 6))
    nodes = []
    for i in range(n):
        labels = {k: draw(st.sampled_from(["a", "b"])) for k in LABEL_KEYS if draw(st.booleans())}
        if draw(st.booleans()):
            labels[HOST] = f"n{i}"
        taints = [Taint(key=draw(st.sampled_from(["t1", "t2", "t3"])), value="v",
                        effect=draw(st.sampled_from(["PreferNoSchedule", "PreferNoSchedule", "NoSchedule"])))
                  for _ in range(draw(st.integers(0, 2)))]
        pods = []
        for k in range(draw(st.integers(0, 3))):
            affinity = None
            kind = draw(st.sampled_from(["none", "podAffinity", "podAntiAffinity", "required"]))
            term = _weighted(draw(st.integers(1, 100)), draw(st.sampled_from(LABEL_KEYS)), _expr("app", "In", draw(APP)))
            if kind == "required":
                affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term["podAffinityTerm"]]}}
            elif kind != "none":
                affinity = {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
            pods.append(running(f"n{i}-{k}", draw(st.integers(0, 1500)), draw(st.integers(0, 1500)),
                                labels={"app": draw(APP)}, affinity=affinity))
        nodes.append(Node(name=f"n{i}", hardware=NodeType(cpu_milli=draw(st.sampled_from([2000, 4000, 6000])),
                                                            memory_mib=draw(st.sampled_from([3000, 8000]))),
                          labels=labels, taints=tuple(taints), pods=tuple(pods)))
    return ClusterSnapshot(nodes=tuple(nodes))


@st.composite
def pods(draw):
    affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        affinity.update(_prefer((draw(st.integers(1, 100)), {draw(st.sampled_from(LABEL_KEYS)): "a"})))
    if draw(st.booleans()):
        side = "podAntiAffinity" if draw(st.booleans()) else "podAffinity"
        affinity[side] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            _weighted(draw(st.integers(1, 100)), draw(st.sampled_from(LABEL_KEYS)), _expr("app", "In", draw(APP)))]}
    spread = [
        {"maxSkew": draw(st.integers(1, 3)), "topologyKey": draw(st.sampled_from(LABEL_KEYS + (HOST,))),
         "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": draw(APP)}},
         "nodeTaintsPolicy": draw(st.sampled_from(["Honor", "Ignore"])),
         "nodeAffinityPolicy": draw(st.sampled_from(["Honor", "Ignore"]))}
        for _ in range(draw(st.integers(0, 2)))
    ]
    if draw(st.booleans()):
        affinity["nodeAffinity"] = dict(affinity.get("nodeAffinity", {}), requiredDuringSchedulingIgnoredDuringExecution={
            "nodeSelectorTerms": [{"matchExpressions": [_expr(draw(st.sampled_from(LABEL_KEYS)), "In", "a")]}]})
    tolerations = [_tolerate("t1", "v", draw(st.sampled_from(["", "PreferNoSchedule", "NoSchedule"])))] if draw(st.booleans()) else []
    return pod(draw(st.integers(0, 1500)), draw(st.integers(0, 1500)), labels={"app": draw(APP)},
               affinity=affinity or None, spread=spread, tolerations=tolerations)


@settings(max_examples=200, deadline=None)
@given(clusters(), pods(), st.sampled_from(sorted(kube_scores.STRATEGIES)), st.data())
def test_numpy_scores_match_the_plain_python_reference(snapshot, the_pod, kind, data):
    n = len(snapshot.nodes)
    candidates = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    mask = np.zeros(n, dtype=bool)
    mask[candidates] = True
    strategy = kube_scores.STRATEGIES[kind]
    policy = next(p for p in REGISTRY.values() if p.kube_scoring == kind)
    got = plugin_scores(Cluster(snapshot), the_pod, policy, mask)
    want = ref.kube_scores(snapshot, the_pod, candidates, kind, strategy.resources, strategy.shape)
    for i in candidates:
        assert {name: int(score[i]) for name, score in got.items()} == want[i], snapshot.nodes[i].name
    totals = node_scores(Cluster(snapshot), the_pod, policy, mask)
    assert [int(totals[i]) for i in candidates] == [ref.total(want[i]) for i in candidates]


@settings(max_examples=40, deadline=None)
@given(scenarios(max_pods=6, policies=[p.name for p in REGISTRY.values() if p.kube_scoring is not None]))
def test_kube_policies_place_valid_requests_the_checker_accepts(scenario):
    """Whole requests (gangs, shared GPUs, extended resources) under the kube policies: the
    independent checker finds nothing wrong, and each single pod went to a top-scoring node."""
    snapshot, request = scenario
    result = Cluster(snapshot).schedule(request)
    assert check_placement(snapshot, request, result) == []
    if not request.gangs and len(request.pods) == 1 and result.assignments and request.pods[0].mig is None \
            and not request.pods[0].gpu_slots:
        totals = node_scores(Cluster(snapshot), request.pods[0], request.policy)
        chosen = [n.name for n in snapshot.nodes].index(result.assignments[0].node)
        assert int(totals[chosen]) == int(totals.max())


def test_replay_under_a_kube_policy_traces_the_fragment_after_each_pod():
    nodes = tuple(node(f"n{i}", 32000, 64000, gpus=4) for i in range(3))
    pods = [pod(1000, 1000, gpus=1, name=f"p{k}") for k in range(5)]
    pods[1] = PodRequest("p1", gpus=1, gpu_milli=500, cpu_milli=1000)
    cluster = Cluster(ClusterSnapshot(nodes=nodes))
    result, trace = cluster.replay(pods, policy="kube")
    assert len(result.assignments) == 5
    assert trace[-1] == cluster.fragmentation(cluster.session.workload).total
    assert len({a.node for a in result.assignments}) == 3  # least allocated spreads


def test_a_pod_no_node_takes_preempts_as_under_any_policy():
    held = RunningPod(name="low", gpus=(0, 1), cpu_milli=1000, priority=0)
    snapshot = ClusterSnapshot(nodes=(node("n0", 8000, 8000, gpus=2, pods=[held]),))
    urgent = PodRequest("hi", gpus=2, cpu_milli=1000, priority=10)
    result = Cluster(snapshot).schedule(PlacementRequest(pods=(urgent,), policy="kube", preemption="greedy"))
    assert [(a.pod, a.node, a.nominated) for a in result.assignments] == [("hi", "n0", True)]
    assert [p.victims for p in result.preemptions] == [("low",)]


# ---------------------------------------------------------------------- the request's scoringStrategy

GPU_PACKING_DOC = {
    "type": "RequestedToCapacityRatio",
    "resources": [{"name": "nvidia.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}],
    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]},
}


def _request_doc(policy: str = "kube", scoring: dict[str, Any] | None = None, **pod: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": policy,
                           "pods": [{"name": "a", "gpus": 2, "cpuMilli": 1000, **pod}]}
    if scoring is not None:
        doc["scoringStrategy"] = scoring
    return doc


def test_the_scoring_strategy_of_a_request_replaces_the_policys():
    """A request's ``scoringStrategy`` (kube's NodeResourcesFitArgs.scoringStrategy, pasted)
    packs GPUs where ``kube`` alone spreads them."""
    held = [running("h", 1000, 1000, gpus=(0, 1, 2, 3, 4, 5))]
    nodes = (node("busy", 16000, 32000, gpus=8, pods=held), node("idle", 16000, 32000, gpus=8))
    snapshot = ClusterSnapshot(nodes=nodes)
    spread = Cluster(snapshot).schedule(PlacementRequest.from_dict(_request_doc()))
    packed_request = PlacementRequest.from_dict(_request_doc(scoring=GPU_PACKING_DOC))
    packed = Cluster(snapshot).schedule(packed_request)
    assert [a.node for a in spread.assignments] == ["idle"]
    assert [a.node for a in packed.assignments] == ["busy"]
    strategy = kube_scores.fit_strategy(REGISTRY["kube"], packed_request.scoring_strategy)
    assert strategy == FitStrategy("RequestedToCapacityRatio", (("nvidia.com/gpu", 5), ("cpu", 1)), ((0, 0), (100, 10)))
    assert PlacementRequest.from_dict(packed_request.to_dict()) == packed_request


@pytest.mark.parametrize("policy, scoring, where", [
    ("best-fit", GPU_PACKING_DOC, "scoringStrategy"),
    ("kube", {"type": "RequestedToCapacityRatio"}, "scoringStrategy.requestedToCapacityRatio.shape"),
    ("kube", {"resources": [{"name": "cpu", "weight": 0}]}, "scoringStrategy.resources[0].weight"),
    ("kube", {"resources": [{"name": "cpu", "weight": 101}]}, "scoringStrategy.resources[0].weight"),
    ("kube", {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
        {"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]}}, "scoringStrategy.requestedToCapacityRatio.shape[1].utilization"),
    ("kube", {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": [
        {"utilization": 0, "score": 11}]}}, "scoringStrategy.requestedToCapacityRatio.shape[0].score"),
    ("kube", {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 1}]}},
     "scoringStrategy.requestedToCapacityRatio"),
    ("kube", {"type": "BalancedAllocation"}, "scoringStrategy.type"),
])
def test_a_scoring_strategy_kube_refuses_is_refused_at_its_path(policy, scoring, where):
    with pytest.raises(InvalidInputError) as err:
        PlacementRequest.from_dict(_request_doc(policy, scoring))
    assert err.value.where == where


def test_a_policy_override_that_cannot_take_the_scoring_strategy_is_refused():
    request = PlacementRequest.from_dict(_request_doc(scoring=GPU_PACKING_DOC))
    cluster = Cluster(ClusterSnapshot(nodes=(node("n", 8000, 8000, gpus=4),)))
    with pytest.raises(InvalidInputError, match="only the kube-scored policies"):
        cluster.schedule(request, policy="best-fit")
