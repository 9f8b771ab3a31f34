"""kube-scheduler's filter plugins as placer applies them (issue #32), each rule checked
against rows of the plugin's own tests, the reference oracle and ``check_placement``.

NodeUnschedulable (``pkg/scheduler/framework/plugins/nodeunschedulable``): a node with
``spec.unschedulable`` is filtered out, with ``node(s) were unschedulable``, unless the pod
tolerates the taint ``node.kubernetes.io/unschedulable:NoSchedule`` (kube builds that taint
and asks ``TolerationsTolerateTaint``; the node need not carry it).

NodeName, TaintToleration and NodeAffinity (``nodename``, ``tainttoleration``,
``nodeaffinity``; kube v1.36.3): rows of their Filter tests in placer's format, the filter
order, the reason line as kube's ``FitError`` sorts it, the schema's refusals of what kube's
API validation refuses, and a property against the reference oracle.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import placer
from placer.diagnostics.explain import explain
from placer.model import PlacementRequest, tolerates_unschedulable
from placer.model.reasons import kube_reason
from placer.preemption.moves import mover_request
from reference import ReferenceCluster, reason_line

CORDON_KEY = "node.kubernetes.io/unschedulable"


def cordoned_snapshot(unschedulable: bool = True) -> dict[str, Any]:
    node = {"name": "n0", "type": "t", "topology": {}}
    if unschedulable:
        node["unschedulable"] = True
    return {
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodeTypes": {"t": {"gpus": 2, "gpuModel": "A100", "cpuMilli": 8000, "memoryMiB": 65536}},
        "nodes": [node],
    }


def request(tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    pod: dict[str, Any] = {"name": "p", "gpus": 1}
    if tolerations:
        pod["tolerations"] = tolerations
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [pod]}


# (tolerations, node unschedulable, the pod fits) — the rows of kube's
# TestNodeUnschedulable, and the toleration forms kube's TolerationsTolerateTaint accepts.
ROWS = [
    pytest.param([], False, True, id="schedulable node, no toleration"),
    pytest.param([], True, False, id="cordoned node, no toleration"),
    pytest.param([{"key": CORDON_KEY, "operator": "Exists", "effect": "NoSchedule"}], True, True,
                 id="cordoned node, the unschedulable taint tolerated"),
    pytest.param([{"key": CORDON_KEY, "operator": "Exists"}], True, True, id="tolerated for every effect"),
    pytest.param([{"operator": "Exists"}], True, True, id="a toleration of every taint"),
    pytest.param([{"key": CORDON_KEY, "operator": "Equal", "value": "", "effect": "NoSchedule"}], True, True,
                 id="Equal with the empty value"),
    pytest.param([{"key": CORDON_KEY, "operator": "Equal", "value": "yes", "effect": "NoSchedule"}], True, False,
                 id="Equal with another value"),
    pytest.param([{"key": CORDON_KEY, "operator": "Exists", "effect": "NoExecute"}], True, False,
                 id="another effect"),
    pytest.param([{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}], True, False,
                 id="another key"),
]


@pytest.mark.parametrize("tolerations, unschedulable, fits", ROWS)
def test_a_cordoned_node_takes_the_pods_that_tolerate_the_unschedulable_taint(tolerations, unschedulable, fits):
    snapshot = placer.load_snapshot(cordoned_snapshot(unschedulable))
    req = placer.load_request(request(tolerations))
    result = placer.place(snapshot, req)
    assert bool(result.assignments) == fits
    if not fits:
        assert result.unschedulable[0].reason == "0/1 nodes are available: 1 node(s) were unschedulable."
    if unschedulable:
        assert tolerates_unschedulable(req.pods[0].tolerations) == fits
    assert placer.check_placement(snapshot, req, result) == []
    oracle = ReferenceCluster(snapshot).schedule(PlacementRequest(pods=req.pods))
    assert oracle.assignments == result.assignments and oracle.unschedulable == result.unschedulable


def test_the_checker_flags_a_cordoned_node_only_for_a_pod_that_does_not_tolerate_it():
    snapshot = placer.load_snapshot(cordoned_snapshot())
    tolerant = placer.load_request(request([{"key": CORDON_KEY, "operator": "Exists"}]))
    plain = placer.load_request(request([]))
    on_it = placer.load_result({"apiVersion": "placer/v1", "kind": "PlacementResult",
                                "assignments": [{"pod": "p", "node": "n0", "gpus": [0]}]})
    assert placer.check_placement(snapshot, tolerant, on_it) == []
    assert placer.check_placement(snapshot, plain, on_it) == ["pod p on node n0: node is cordoned (unschedulable)"]


def test_a_cluster_binds_a_tolerating_pod_on_a_cordoned_node_and_keeps_others_off():
    cluster = placer.Cluster(cordoned_snapshot())
    kept_off = cluster.place(request([])["pods"])
    assert not kept_off.assignments
    placed = cluster.place(request([{"key": CORDON_KEY, "operator": "Exists", "effect": "NoSchedule"}])["pods"])
    assert [a.node for a in placed.assignments] == ["n0"]



# ----------------------------------------------------------------------------- NodeName, TaintToleration, NodeAffinity

UNTOLERATED = "node(s) had untolerated taint(s)"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NODE_NAME = "node(s) didn't match the requested node name"
GPU_TYPE = {"gpus": 2, "gpuModel": "A100", "cpuMilli": 8000, "memoryMiB": 65536}


def snapshot_of(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodeTypes": {"t": GPU_TYPE},
            "nodes": [{"type": "t", **n} for n in nodes]}


def request_of(**pod: Any) -> dict[str, Any]:
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "p", "gpus": 1, **pod}]}


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


def named(operator: str, name: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": [name]}


def placed(snapshot_doc: dict[str, Any], request_doc: dict[str, Any]) -> tuple[str | None, str | None]:
    """(node, None) or (None, reason line), after checking the kernel against the reference
    oracle and ``check_placement``."""
    snapshot = placer.load_snapshot(snapshot_doc)
    req = placer.load_request(request_doc)
    result = placer.place(snapshot, req)
    assert placer.check_placement(snapshot, req, result) == []
    oracle = ReferenceCluster(snapshot).schedule(PlacementRequest(pods=req.pods))
    assert oracle.assignments == result.assignments and oracle.unschedulable == result.unschedulable
    if result.assignments:
        return result.assignments[0].node, None
    return None, result.unschedulable[0].reason


def one_node_line(reason: str) -> str:
    return f"0/1 nodes are available: 1 {reason}."


# TestTaintTolerationFilter and the effects kube's ToleratesTaint reads: (tolerations, taints, fits)
TAINT_ROWS = [
    pytest.param([], [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], False, id="no toleration"),
    pytest.param([{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
                 [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], True, id="Equal by default"),
    pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
                 [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}], False, id="another value"),
    pytest.param([{"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
                 [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], True, id="Exists, any value"),
    pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
                  {"key": "foo", "operator": "Exists", "effect": "NoSchedule"}],
                 [{"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
                  {"key": "foo", "value": "bar", "effect": "NoSchedule"}], True, id="every taint tolerated"),
    pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
                 [{"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
                  {"key": "foo", "value": "bar", "effect": "NoSchedule"}], False, id="one taint of two tolerated"),
    pytest.param([{"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}],
                 [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], False, id="another effect"),
    pytest.param([{"key": "foo", "operator": "Equal", "value": "bar"}],
                 [{"key": "foo", "value": "bar", "effect": "NoSchedule"}], True, id="empty effect, every effect"),
    pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
                 [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}], True,
                 id="PreferNoSchedule never filters"),
    pytest.param([], [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}], True,
                 id="PreferNoSchedule without toleration"),
    pytest.param([], [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}], False, id="NoExecute filters"),
    pytest.param([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": 300}],
                 [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}], True,
                 id="tolerationSeconds does not filter"),
    pytest.param([{"operator": "Exists"}],
                 [{"key": "a", "value": "1", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}], True,
                 id="empty key with Exists tolerates every taint"),
    pytest.param([{"operator": "Exists", "effect": "NoSchedule"}],
                 [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}], False,
                 id="empty key with Exists, one effect only"),
    pytest.param([{"key": "a", "operator": "Exists"}], [{"key": "a", "value": "x", "effect": "NoExecute"}], True,
                 id="Exists with no effect"),
]


@pytest.mark.parametrize("tolerations, taints, fits", TAINT_ROWS)
def test_taint_toleration_rows(tolerations, taints, fits):
    node, reason = placed(snapshot_of({"name": "nodeA", "taints": taints}), request_of(tolerations=tolerations))
    assert (node == "nodeA") == fits
    if not fits:
        assert reason == one_node_line(UNTOLERATED)


# TestNodeName: (the pod's nodeName, fits)
@pytest.mark.parametrize("node_name, fits", [(None, True), ("foo", True), ("bar", False)],
                         ids=["no host specified", "host matches", "host doesn't match"])
def test_node_name_rows(node_name, fits):
    pod = {} if node_name is None else {"nodeName": node_name}
    node, reason = placed(snapshot_of({"name": "foo"}), request_of(**pod))
    assert (node == "foo") == fits
    if not fits:
        assert reason == one_node_line(NODE_NAME)


def test_a_node_name_of_no_node_keeps_the_pod_pending_on_every_node():
    node, reason = placed(snapshot_of({"name": "a"}, {"name": "b"}), request_of(nodeName="gone"))
    assert node is None and reason == f"0/2 nodes are available: 2 {NODE_NAME}."


# TestNodeAffinity (Filter): (node labels, nodeSelector, affinity, node name, fits)
AFFINITY_ROWS = [
    pytest.param({}, {"foo": "bar"}, None, "node1", False, id="missing labels"),
    pytest.param({"foo": "bar"}, {"foo": "bar"}, None, "node1", True, id="same labels"),
    pytest.param({"foo": "bar", "baz": "blah"}, {"foo": "bar"}, None, "node1", True, id="node labels are superset"),
    pytest.param({"foo": "bar"}, {"foo": "bar", "baz": "blah"}, None, "node1", False, id="node labels are subset"),
    pytest.param({"foo": "bar"}, {}, required({"matchExpressions": [expr("foo", "In", "bar", "value2")]}),
                 "node1", True, id="In matches"),
    pytest.param({"kernel-version": "0206"}, {},
                 required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]}), "node1", True,
                 id="Gt matches (leading zeros)"),
    pytest.param({"kernel-version": "0206"}, {},
                 required({"matchExpressions": [expr("kernel-version", "Lt", "0204")]}), "node1", False,
                 id="Lt does not match"),
    pytest.param({"kernel-version": "v2"}, {},
                 required({"matchExpressions": [expr("kernel-version", "Gt", "1")]}), "node1", False,
                 id="Gt on a label that is no integer"),
    pytest.param({"kernel-version": "5"}, {},
                 required({"matchExpressions": [expr("kernel-version", "Gt", "one")]}), "node1", False,
                 id="Gt with a value that is no integer matches nothing"),
    pytest.param({"mem-type": "DDR"}, {}, required({"matchExpressions": [expr("mem-type", "NotIn", "DDR3", "DDR4")]}),
                 "node1", True, id="NotIn matches"),
    pytest.param({}, {}, required({"matchExpressions": [expr("mem-type", "NotIn", "DDR3")]}),
                 "node1", True, id="NotIn matches a node without the label"),
    pytest.param({"GPU": "NVIDIA-GRID-K1"}, {}, required({"matchExpressions": [expr("GPU", "Exists")]}),
                 "node1", True, id="Exists matches"),
    pytest.param({"foo": "bar"}, {}, required({"matchExpressions": [expr("foo", "DoesNotExist")]}),
                 "node1", False, id="DoesNotExist"),
    pytest.param({"foo": "bar"}, {}, required({"matchExpressions": [expr("foo", "In", "value1", "value2")]}),
                 "node1", False, id="affinity does not match the labels"),
    pytest.param({"foo": "bar"}, {}, required({"matchExpressions": []}), "node1", False,
                 id="empty term matches nothing"),
    pytest.param({"foo": "bar"}, {}, None, "node1", True, id="no affinity"),
    pytest.param({"foo": "bar"}, {}, {"nodeAffinity": {}}, "node1", True, id="affinity without a node selector"),
    pytest.param({"GPU": "NVIDIA-GRID-K1"}, {},
                 required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}),
                 "node1", True, id="expressions ANDed, match"),
    pytest.param({"GPU": "NVIDIA-GRID-K1"}, {},
                 required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}),
                 "node1", False, id="expressions ANDed, no match"),
    pytest.param({"foo": "bar"}, {},
                 required({"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                          {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]}),
                 "node1", True, id="terms ORed"),
    pytest.param({"foo": "bar"}, {"foo": "bar"}, required({"matchExpressions": [expr("foo", "Exists")]}),
                 "node1", True, id="nodeSelector and affinity both match"),
    pytest.param({"foo": "bar"}, {"foo": "bar"}, required({"matchExpressions": [expr("foo", "DoesNotExist")]}),
                 "node1", False, id="nodeSelector matches, affinity does not"),
    pytest.param({"foo": "bar"}, {}, required({"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}),
                 "node1", False, id="a value that is no label value matches nothing"),
    pytest.param({}, {}, required({"matchFields": [named("In", "node1")]}), "node1", True, id="matchFields In"),
    pytest.param({"foo": "bar"}, {},
                 required({"matchFields": [named("In", "node1")]}, {"matchExpressions": [expr("foo", "In", "bar")]}),
                 "node2", True, id="matchFields misses, the other term matches"),
    pytest.param({"foo": "bar"}, {},
                 required({"matchFields": [named("In", "node1")], "matchExpressions": [expr("foo", "In", "bar")]}),
                 "node2", False, id="one term: matchFields misses"),
    pytest.param({"foo": "bar"}, {},
                 required({"matchFields": [named("In", "node1")], "matchExpressions": [expr("foo", "In", "bar")]}),
                 "node1", True, id="one term: both match"),
    pytest.param({}, {}, required({"matchFields": [named("NotIn", "node1")]}), "node1", False, id="matchFields NotIn"),
    pytest.param({}, {}, required({"matchFields": [named("NotIn", "node1")]}), "node2", True,
                 id="matchFields NotIn another"),
]


@pytest.mark.parametrize("labels, selector, affinity, name, fits", AFFINITY_ROWS)
def test_node_affinity_rows(labels, selector, affinity, name, fits):
    pod: dict[str, Any] = {}
    if selector:
        pod["nodeSelector"] = selector
    if affinity is not None:
        pod["affinity"] = affinity
    node, reason = placed(snapshot_of({"name": name, "labels": labels}), request_of(**pod))
    assert (node == name) == fits
    if not fits:
        assert reason in (one_node_line(AFFINITY), one_node_line("node(s) didn't satisfy plugin(s) [NodeAffinity]"))


def test_the_prefilter_of_node_names_leaves_the_other_nodes_out_before_any_filter():
    """Nodes outside the names every term lists never reach a filter (kube's PreFilterResult)."""
    snap = snapshot_of({"name": "node1", "unschedulable": True}, {"name": "node2"}, {"name": "node3"})
    affinity = required({"matchFields": [named("In", "node1")]}, {"matchFields": [named("In", "node2")]})
    node, _ = placed(snap, request_of(affinity=affinity))
    assert node == "node2"
    node, reason = placed(snap, request_of(affinity=required({"matchFields": [named("In", "node1")]})))
    assert reason == "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    conflict = required({"matchFields": [named("In", "node1"), named("In", "node2")]})
    assert placed(snap, request_of(affinity=conflict)) == (None, "0/3 nodes are available: pod affinity terms conflict.")


def test_kube_filter_order_gives_each_node_its_first_failing_reason():
    """NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, then placer's GPU filters."""
    taint = [{"key": "k", "effect": "NoSchedule"}]
    snap = snapshot_of(
        {"name": "cordoned", "unschedulable": True, "taints": taint},  # and every other filter fails
        {"name": "tainted", "taints": taint},
        {"name": "other-zone", "labels": {"zone": "b"}},
        {"name": "target", "labels": {"zone": "a"}, "taints": taint},
    )
    pod = {"nodeName": "target", "nodeSelector": {"zone": "a"}}
    assert placed(snap, request_of(**pod)) == (None, (
        f"0/4 nodes are available: 1 {UNTOLERATED}, 1 node(s) were unschedulable, 2 {NODE_NAME}."))
    del pod["nodeName"]
    assert placed(snap, request_of(**pod)) == (None, (
        f"0/4 nodes are available: 1 {AFFINITY}, 1 node(s) were unschedulable, 2 {UNTOLERATED}."))
    pod["tolerations"] = [{"key": "k", "operator": "Exists"}]
    assert placed(snap, request_of(**pod)) == ("target", None)
    pod["gpuModels"] = ["H100"]
    assert placed(snap, request_of(**pod))[1].startswith(
        f"0/4 nodes are available: 1 node(s) didn't match Pod's GPU model (no node has H100")


def test_the_line_sorts_count_and_reason_as_strings():
    """kube's FitError: sort.Strings over "<count> <reason>", so 10 sorts before 2."""
    assert kube_reason(12, {"Insufficient memory": 2, "Insufficient cpu": 10}) == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 Insufficient memory.")
    assert kube_reason(3, {"b": 1, "a": 1, "c": 1}) == "0/3 nodes are available: 1 a, 1 b, 1 c."
    assert kube_reason(0, {}) == "0/0 nodes are available."
    assert reason_line(12, Counter({"Insufficient memory": 2, "Insufficient cpu": 10})) == kube_reason(
        12, {"Insufficient memory": 2, "Insufficient cpu": 10})


def test_a_node_turned_away_for_a_resource_it_lacks_counts_every_resource_it_lacks():
    """kube's NodeResourcesFit names every resource a node lacks, on a node without GPUs or
    without an extended resource too (placer finds those before the other resources; found
    by kube-oracle, tests/test_kube_oracle.py)."""
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "cpu-only", "cpuMilli": 1000, "memoryMiB": 1024, "maxPods": 1, "pods": [{"name": "r", "cpuMilli": 100}]},
        {"name": "gpus", "gpus": 2, "gpuModel": "A100", "cpuMilli": 1000, "memoryMiB": 65536,
         "resources": {"example.com/nic": {"capacity": 1, "allocatable": 1}}},
    ]}
    lines = {}
    for name, pod in {"gpu": {"gpus": 4, "cpuMilli": 2000},
                      "nic": {"cpuMilli": 2000, "gpus": 4, "resources": {"example.com/nic": 2}}}.items():
        result = placer.place(placer.load_snapshot(snapshot), placer.load_request(request_of(**pod)))
        lines[name] = result.unschedulable[0].reason
    assert lines["gpu"] == "0/2 nodes are available: 1 Too many pods, 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu."
    assert lines["nic"] == ("0/2 nodes are available: 1 Too many pods, 2 Insufficient cpu, "
                            "2 Insufficient example.com/nic, 2 Insufficient nvidia.com/gpu.")



def test_a_gangs_line_counts_every_resource_a_node_without_gpus_lacks():
    """The nodes a gang's line counts beside its topology reason follow the same rule: a node
    without GPUs whose pod slots are full lacks both (found by the reference's comparison)."""
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": [
        {"name": "cpu-only", "cpuMilli": 1000, "memoryMiB": 1024, "maxPods": 1, "pods": [{"name": "r"}],
         "topology": {"rack": "r1"}},
        {"name": "gpus", "gpus": 2, "gpuModel": "A100", "cpuMilli": 8000, "memoryMiB": 65536, "topology": {"rack": "r1"}},
    ]}
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "solver": "greedy",
               "pods": [{"name": f"w-{k}", "gpus": 1, "gang": "g"} for k in range(3)],
               "gangs": {"g": {"topology": {"mode": "preferred", "level": "rack"}}}}
    result = placer.place(placer.load_snapshot(snapshot), placer.load_request(request))
    assert result.unschedulable[0].reason == (
        "gang g: the cluster allows to fit only 2 out of 3 pod(s); "
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods.")

def test_explain_names_the_nodes_each_static_filter_turns_away():
    snap = placer.load_snapshot(snapshot_of({"name": "a", "labels": {"zone": "x"}},
                                            {"name": "b", "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}))
    req = placer.load_request(request_of(affinity=required({"matchExpressions": [expr("zone", "In", "y")]})))
    (pending,) = explain(snap, req).pending
    assert pending.cause == "filters"
    assert pending.filtered == (f"{AFFINITY}: a", f"{UNTOLERATED}: b (k=v:NoExecute)")


# What kube's API validation refuses (pkg/apis/core/validation), with the JSON path as written
REFUSED = [
    pytest.param({"affinity": required()}, "nodeSelectorTerms", id="no terms"),
    pytest.param({"affinity": required({"matchExpressions": [expr("a", "In")]})}, "matchExpressions[0].values",
                 id="In without values"),
    pytest.param({"affinity": required({"matchExpressions": [expr("a", "NotIn")]})}, "matchExpressions[0].values",
                 id="NotIn without values"),
    pytest.param({"affinity": required({"matchExpressions": [expr("a", "Exists", "x")]})},
                 "matchExpressions[0].values", id="Exists with values"),
    pytest.param({"affinity": required({"matchExpressions": [expr("a", "DoesNotExist", "x")]})},
                 "matchExpressions[0].values", id="DoesNotExist with values"),
    pytest.param({"affinity": required({"matchExpressions": [expr("a", "Gt", "1", "2")]})},
                 "matchExpressions[0].values", id="Gt with two values"),
    pytest.param({"affinity": required({"matchExpressions": [expr("a", "Lt")]})},
                 "matchExpressions[0].values", id="Lt without a value"),
    pytest.param({"affinity": required({"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["u"]}]})},
                 "matchFields[0].key", id="a field other than metadata.name"),
    pytest.param({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]})},
                 "matchFields[0].operator", id="matchFields Exists"),
    pytest.param({"affinity": required({"matchFields": [{"key": "metadata.name", "operator": "In",
                                                         "values": ["a", "b"]}]})},
                 "matchFields[0].values", id="matchFields In two names"),
    pytest.param({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 101, "preference": {"matchExpressions": [expr("a", "Exists")]}}]}}},
                 "preferredDuringSchedulingIgnoredDuringExecution[0].weight", id="weight above 100"),
    pytest.param({"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]}, "tolerations[0].value",
                 id="Exists with a value"),
    pytest.param({"tolerations": [{"value": "x"}]}, "tolerations[0].key", id="empty key without Exists"),
    pytest.param({"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]},
                 "tolerations[0].effect", id="tolerationSeconds without NoExecute"),
    pytest.param({"tolerations": [{"key": "a", "operator": "Gt", "value": "5"}]}, "tolerations[0].operator",
                 id="Gt toleration (feature gate off in v1.36)"),
]


@pytest.mark.parametrize("pod, where", REFUSED)
def test_the_schema_refuses_what_kube_validation_refuses(pod, where):
    with pytest.raises(placer.InvalidInputError) as caught:
        placer.load_request(request_of(**pod))
    assert caught.value.where.startswith("pods[0].") and caught.value.where.endswith(where), caught.value.where


# ----------------------------------------------------------------------------- the property

KEYS = ("zone", "rack", "gen")
VALUES = ("a", "b", "1", "7", "x y")  # "x y" is no label value: a term naming it matches nothing
NODE_NAMES = ("n0", "n1", "n2", "n3", "n4", "gone")


@st.composite
def static_cases(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Nodes with labels, taints and cordons; pods with selectors, required node affinity of
    every operator, tolerations and nodeName."""
    taints = st.fixed_dictionaries({"key": st.sampled_from(("t1", "t2")),
                                    "effect": st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute"))},
                                   optional={"value": st.sampled_from(("v", "w"))})
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        node: dict[str, Any] = {"name": f"n{i}", "labels": draw(st.dictionaries(
            st.sampled_from(KEYS), st.sampled_from(VALUES[:4]), max_size=3))}
        node["taints"] = draw(st.lists(taints, max_size=2, unique_by=lambda t: (t["key"], t["effect"])))
        if draw(st.booleans()) and draw(st.booleans()):
            node["unschedulable"] = True
        nodes.append(node)
    operators = st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))

    @st.composite
    def expression(d: Any) -> dict[str, Any]:
        op = d(operators)
        count = {"Exists": 0, "DoesNotExist": 0, "Gt": 1, "Lt": 1}[op] if op not in ("In", "NotIn") else d(
            st.integers(1, 2))
        return expr(d(st.sampled_from(KEYS)), op, *d(st.lists(st.sampled_from(VALUES), min_size=count, max_size=count)))

    field = st.builds(named, st.sampled_from(("In", "NotIn")), st.sampled_from(NODE_NAMES))
    term = st.fixed_dictionaries({}, optional={"matchExpressions": st.lists(expression(), max_size=2),
                                               "matchFields": st.lists(field, max_size=2)})
    toleration = st.one_of(
        st.fixed_dictionaries({"key": st.sampled_from(("t1", "t2", "node.kubernetes.io/unschedulable")),
                               "operator": st.just("Exists")},
                              optional={"effect": st.sampled_from(("NoSchedule", "NoExecute"))}),
        st.fixed_dictionaries({"key": st.sampled_from(("t1", "t2")), "value": st.sampled_from(("", "v"))},
                              optional={"effect": st.sampled_from(("NoSchedule", "PreferNoSchedule", "NoExecute"))}),
        st.just({"operator": "Exists"}),
    )
    pods = []
    for j in range(draw(st.integers(1, 4))):
        pod: dict[str, Any] = {"name": f"p{j}", "gpus": draw(st.integers(0, 1))}
        if draw(st.booleans()):
            pod["nodeSelector"] = draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES[:4]), max_size=2))
        if draw(st.booleans()):
            pod["affinity"] = required(*draw(st.lists(term, min_size=1, max_size=3)))
        if draw(st.booleans()):
            pod["tolerations"] = draw(st.lists(toleration, max_size=3))
        if draw(st.integers(0, 4)) == 0:
            pod["nodeName"] = draw(st.sampled_from(NODE_NAMES))
        pods.append(pod)
    return snapshot_of(*nodes), {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods}


@given(static_cases())
def test_the_kernel_places_as_the_reference_does_under_kube_static_filters(case):
    snapshot_doc, request_doc = case
    snapshot = placer.load_snapshot(snapshot_doc)
    req = placer.load_request(request_doc)
    result = placer.place(snapshot, req)
    oracle = ReferenceCluster(snapshot).schedule(PlacementRequest(pods=req.pods))
    assert result.assignments == oracle.assignments
    assert result.unschedulable == oracle.unschedulable  # the reason lines, counts and order included
    assert placer.check_placement(snapshot, req, result) == []


def test_a_moved_pod_keeps_its_required_node_affinity():
    """Defragmentation moves a running pod only where its own node affinity allows."""
    affinity = required({"matchExpressions": [expr("zone", "In", "a")]})
    running = placer.load_snapshot(snapshot_of({"name": "n0", "labels": {"zone": "a"},
                                                "pods": [{"name": "r", "gpus": [0], "affinity": affinity}]}))
    mover = mover_request(running.nodes[0].pods[0], running.nodes[0])
    assert mover.affinity == running.nodes[0].pods[0].affinity is not None
    elsewhere = placer.load_snapshot(snapshot_of({"name": "n1", "labels": {"zone": "b"}},
                                                 {"name": "n0", "labels": {"zone": "a"}}))
    first_fit = PlacementRequest(pods=(mover,), policy="first-fit")
    assert [a.node for a in placer.place(elsewhere, first_fit).assignments] == ["n0"]
    free = PlacementRequest(pods=(placer.model.replace(mover, affinity=None),), policy="first-fit")
    assert [a.node for a in placer.place(elsewhere, free).assignments] == ["n1"]
