"""kube-scheduler's filter plugins as placer applies them (issue #32), each rule checked
against rows of the plugin's own tests, the reference oracle and ``check_placement``.

NodeUnschedulable (``pkg/scheduler/framework/plugins/nodeunschedulable``): a node with
``spec.unschedulable`` is filtered out, with ``node(s) were unschedulable``, unless the pod
tolerates the taint ``node.kubernetes.io/unschedulable:NoSchedule`` (kube builds that taint
and asks ``TolerationsTolerateTaint``; the node need not carry it).
"""
from __future__ import annotations

from typing import Any

import pytest

import placer
from placer.model import PlacementRequest, tolerates_unschedulable
from reference import ReferenceCluster

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
