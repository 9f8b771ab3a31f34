"""The extender's verbs in process (placer.serve.extender): filter, prioritize, bind, preempt,
gangs and watch events, checked against the pure-Python reference and check_placement."""
from __future__ import annotations

import json
import logging
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.adapters.kubernetes.live import Listing, WatchEvent, WatchHealth, read_watch_stream, watch_failure
from placer import policies
from placer.placement.cluster import Cluster
from placer.exceptions import InvalidInputError
from placer.serve.extender import Extender, RefusingBinder, reason_label, scores_0_to_10
from placer.model import Assignment, ClusterSnapshot, PlacementRequest, PlacementResult, PodRequest
from placer.schema import snapshot_from_dict
from placer.schema.extender import decode_binding_args, decode_filter_args, decode_preemption_args
from placer.diagnostics.check import check_placement
from placer.testing import pod_requests, snapshots
from reference import ReferenceCluster, _filter

RACK = "topology.kubernetes.io/rack"
TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def cluster_document() -> dict:
    """Four 8-GPU nodes in two racks, one of them cordoned, one running a 4-GPU pod."""
    nodes = []
    for i in range(4):
        nodes.append({
            "name": f"gpu-{i}", "gpus": 8, "gpuModel": "H100", "cpuMilli": 64000, "memoryMiB": 512000,
            "topology": {"rack": f"r{i // 2}"},
            "labels": {RACK: f"r{i // 2}"},
        })
    nodes[3]["unschedulable"] = True
    nodes[0]["pods"] = [{"name": "ml/old", "gpus": [0, 1, 2, 3], "cpuMilli": 1000, "priority": 10}]
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": nodes}


def pod(name: str, gpus: int = 0, *, ns: str = "ml", uid: str | None = None, labels: dict | None = None,
        annotations: dict | None = None, priority: int | None = None, cpu: str | None = None) -> dict:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    requests = {"cpu": cpu} if cpu else {}
    meta: dict = {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    spec: dict = {"containers": [{"name": "c", "resources": {"limits": limits, "requests": requests}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def filter_body(p: dict, names: list[str]) -> bytes:
    return json.dumps({"Pod": p, "NodeNames": names}).encode()


NAMES = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def verbs(ex: Extender, p: dict, names: list[str] = NAMES) -> tuple[dict, dict[str, int]]:
    body = filter_body(p, names)
    result = ex.filter(decode_filter_args(body, "POST /filter"))
    scores = {h["Host"]: h["Score"] for h in ex.prioritize(decode_filter_args(body, "POST /prioritize"))}
    return result, scores


def bind(ex: Extender, name: str, node: str, ns: str = "ml") -> dict:
    body = json.dumps({"PodName": name, "PodNamespace": ns, "PodUID": f"uid-{name}", "Node": node}).encode()
    return ex.bind(decode_binding_args(body, "POST /bind"))


def test_filter_keeps_the_nodes_that_fit_and_says_why_of_the_others():
    ex = Extender(cluster_document())
    result, scores = verbs(ex, pod("a", 6))
    assert result["NodeNames"] == ["gpu-1", "gpu-2"]
    assert result["FailedNodes"] == {"gpu-0": "Insufficient nvidia.com/gpu"}
    assert result["FailedAndUnresolvableNodes"] == {"gpu-3": "node(s) were unschedulable"}
    assert result["Error"] == ""
    assert set(scores) == set(NAMES) and scores["gpu-0"] == scores["gpu-3"] == 0


def test_filter_answers_in_the_form_it_was_asked_full_nodes_in_nodes_out():
    ex = Extender(cluster_document())
    items = [{"metadata": {"name": n}, "spec": {}, "status": {}} for n in NAMES]
    body = json.dumps({"Pod": pod("a", 6), "Nodes": {"metadata": {}, "items": items}}).encode()
    result = ex.filter(decode_filter_args(body, "POST /filter"))
    assert "NodeNames" not in result
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["gpu-1", "gpu-2"]


def test_a_node_placer_does_not_know_fails_with_that_reason():
    ex = Extender(cluster_document())
    result, scores = verbs(ex, pod("a", 1), ["gpu-1", "elsewhere"])
    assert result["NodeNames"] == ["gpu-1"]
    assert "not in placer's cluster state" in result["FailedNodes"]["elsewhere"]
    assert scores == {"gpu-1": 10, "elsewhere": 0}


def test_best_fit_scores_put_the_fullest_node_first_and_bind_takes_its_gpus():
    ex = Extender(cluster_document())
    _, scores = verbs(ex, pod("a", 2))
    # gpu-0 has 4 GPUs left: best-fit's first choice, what place() would choose
    assert scores["gpu-0"] == 10 and scores["gpu-1"] == scores["gpu-2"] == 0
    assert Cluster(cluster_document()).place(PodRequest("ml/a", gpus=2)).assignments[0].node == "gpu-0"
    assert bind(ex, "a", "gpu-0") == {"Error": ""}
    binding = ex.binder.bindings[-1]
    gpus = [int(g) for g in binding["metadata"]["annotations"]["placer.io/gpus"].split(",")]
    assert binding["target"]["name"] == "gpu-0" and len(gpus) == 2 and not set(gpus) & {0, 1, 2, 3}
    decided = PlacementResult((Assignment("ml/a", "gpu-0", tuple(gpus)),))
    asked = PlacementRequest(pods=(PodRequest("ml/a", gpus=2),))
    assert check_placement(snapshot_from_dict(cluster_document()), asked, decided) == []
    held = {p.name: p.gpus for n in ex.cluster.to_snapshot().nodes for p in n.pods}
    assert held["ml/a"] == tuple(gpus)


def test_a_retried_bind_succeeds_again_without_a_second_binding():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 2))
    assert bind(ex, "a", "gpu-1") == {"Error": ""}
    before = ex.cluster.to_snapshot()
    assert bind(ex, "a", "gpu-1") == {"Error": ""}
    assert len(ex.binder.bindings) == 1 and ex.cluster.to_snapshot() == before
    assert "was not seen by filter" in bind(ex, "a", "gpu-2")["Error"]  # not the node it is bound to
    annotation = ex.binder.bindings[0]["metadata"]["annotations"]["placer.io/gpus"]
    ex.queue([WatchEvent("MODIFIED", running_pod_object("a", "gpu-1", 2, annotation))])  # the API's echo
    assert bind(ex, "a", "gpu-1") == {"Error": ""} and len(ex.binder.bindings) == 1


def test_bind_on_a_node_kube_chose_that_is_not_placers_first_still_picks_gpus_there():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 3))
    assert bind(ex, "a", "gpu-2") == {"Error": ""}
    assert ex.binder.bindings[-1]["target"]["name"] == "gpu-2"
    assert ex.cluster.node_free("gpu-2").gpu_milli.count(0) == 3


def test_a_bind_that_cannot_be_honoured_changes_nothing():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 6))
    before = ex.cluster.to_snapshot()
    assert "does not fit on gpu-0" in bind(ex, "a", "gpu-0")["Error"]
    assert "not seen by filter" in bind(ex, "never-seen", "gpu-1")["Error"]
    assert ex.cluster.to_snapshot() == before and ex.binder.bindings == []


def test_a_failing_binder_leaves_the_state_as_it_was():
    class Refusing:
        def bind(self, *args):
            raise ConnectionError("API server unreachable")

    ex = Extender(cluster_document(), binder=Refusing())
    verbs(ex, pod("a", 1))
    before = ex.cluster.to_snapshot()
    assert "API server unreachable" in bind(ex, "a", "gpu-1")["Error"]
    assert ex.cluster.to_snapshot() == before


def test_the_refusing_binder_of_a_service_without_kubeconfig_holds_nothing_and_names_the_option():
    ex = Extender(cluster_document(), binder=RefusingBinder())
    verbs(ex, pod("a", 1))
    before = ex.cluster.to_snapshot()
    for _ in range(2):  # a retry is refused again, not taken for a bind already made
        error = bind(ex, "a", "gpu-1")["Error"]
        assert error.startswith("POST /bind: binding ml/a to gpu-1 failed: no API server to post the Binding to")
        assert "--kubeconfig" in error and "--dry-run" in error
        assert ex.cluster.to_snapshot() == before


def test_a_run_of_watch_failures_is_logged_in_two_lines_and_tells_readiness(caplog):
    from placer.serve.app import readiness

    caplog.set_level(logging.WARNING, "placer.watch")
    now = [100.0]
    health = WatchHealth(("Node", "Pod"), clock=lambda: now[0])
    assert health.problems() == {"Node": "not listed yet (0 s since the start)", "Pod": "not listed yet (0 s since "
                                                                                       "the start)"}
    health.news("Node")
    health.news("Pod")
    for _ in range(3):
        now[0] += 5
        health.failed("Pod", "connection refused", 1.0)
    assert health.problems() == {"Node": "", "Pod": "connection refused (3 failed attempts in 10 s)"}
    assert readiness(health, 20.0) == {"watch-nodes": "", "watch-pods": "connection refused (3 failed attempts in "
                                                                        "10 s)", "state-age": ""}
    now[0] += 5
    health.failed("Pod", "HTTP 500 Internal Server Error", 8.0)
    now[0] += 10
    health.news("Pod")
    assert [r.getMessage() for r in caplog.records] == [
        "watch of Pods failed: connection refused; retrying in 1 s, then less often (repeats are not logged)",
        "watch of Pods: 3 failed attempts with that error in 15 s; now failing: HTTP 500 Internal Server Error",
        "watch of Pods: recovered after 4 failed attempts in 25 s",
    ]
    assert health.errors() == {"Node": 0, "Pod": 4} and health.age() == 30.0  # Node last heard at 100, now 130
    assert readiness(health, 20.0) == {
        "watch-nodes": "", "watch-pods": "",
        "state-age": "the API server's last news is 30 s old, more than --max-staleness 20 s",
    }
    health.absent("Node")  # not served: not waited for
    assert readiness(health, 20.0) == {"watch-pods": "", "state-age": ""}
    assert readiness(None, 20.0) == {}


def test_watch_failures_are_told_in_a_few_words_alike_for_every_retry():
    kubernetes = pytest.importorskip("kubernetes")
    error = kubernetes.client.ApiException(status=403, reason="Forbidden")
    error.body = json.dumps({"kind": "Status", "message": "nodes is forbidden"})
    assert watch_failure(error) == "HTTP 403 Forbidden: nodes is forbidden"
    from kube_api_stub import closed_port

    api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(kubernetes.client.Configuration(
        host=f"http://127.0.0.1:{closed_port()}")))
    failures = set()
    for _ in range(2):
        with pytest.raises(Exception) as raised:
            api.list_node(_preload_content=False)
        failures.add(watch_failure(raised.value))
    assert failures == {"connection refused"}


def podgroup(name: str, min_member: int, ns: str = "ml") -> dict:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member}}


def test_gang_members_wait_in_filter_until_the_whole_gang_fits_then_bind_together():
    ex = Extender(cluster_document(), podgroups=[podgroup("pg", 2)], levels=[f"rack={RACK}"])
    member = {"labels": {"scheduling.x-k8s.io/pod-group": "pg"},
              "annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}}
    first, scores = verbs(ex, pod("w-0", 8, **member))
    assert first["NodeNames"] == [] and scores == dict.fromkeys(NAMES, 0)
    assert all("waits for its pods: 1 of minMember 2" in why for why in first["FailedNodes"].values())
    assert ex.cluster.to_snapshot() == Cluster(cluster_document()).snapshot  # nothing held yet
    second, scores = verbs(ex, pod("w-1", 8, **member))
    # one rack has two free 8-GPU nodes (r0's gpu-0 holds a pod; r1's gpu-3 is cordoned): none
    assert second["NodeNames"] == []
    why = next(iter(second["FailedNodes"].values()))
    assert why.startswith("gang ml/pg does not fit: topology level rack allows to fit only 1 out of 2 pod(s)")
    assert why.count("ml/pg") == 1  # the gang named once, not again by the placement's reason
    assert "nodes are available" not in why  # kube-scheduler counts the nodes' reasons itself
    # without the rack constraint the gang fits on gpu-1 and gpu-2, reserved whole
    ex = Extender(cluster_document(), podgroups=[podgroup("pg", 2)])
    member = {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}}
    verbs(ex, pod("w-0", 8, **member))
    second, scores = verbs(ex, pod("w-1", 8, **member))
    (node_1,) = second["NodeNames"]
    first, _ = verbs(ex, pod("w-0", 8, **member))
    (node_0,) = first["NodeNames"]
    assert {node_0, node_1} == {"gpu-1", "gpu-2"} and scores[node_1] == 10
    assert ex.state()["reserved"] == 2
    # the reservation holds: another pod cannot take the room meanwhile
    other, _ = verbs(ex, pod("x", 1))
    assert set(other["NodeNames"]) == {"gpu-0"}
    assert "reserved" in bind(ex, "w-0", node_1)["Error"]
    assert bind(ex, "w-0", node_0) == {"Error": ""} and bind(ex, "w-1", node_1) == {"Error": ""}
    assert ex.state()["reserved"] == 0
    assert {b["target"]["name"] for b in ex.binder.bindings} == {"gpu-1", "gpu-2"}


def test_an_empty_snapshot_takes_the_levels_of_the_watched_nodes_and_other_levels_are_refused():
    empty = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": []}
    ex = Extender(empty, levels=[f"rack={RACK}"])
    ex.queue([WatchEvent("ADDED", {"kind": "Node", "metadata": {"name": "gpu-9", "labels": {RACK: "r9"}},
                                   "status": {"allocatable": {"nvidia.com/gpu": "8"}}})])
    ex.sync(now=True)
    assert ex.refused_events == 0 and ex.cluster.node_names == ["gpu-9"]
    assert ex.cluster.to_snapshot().topology_levels == ("rack",)
    assert dict(ex.cluster.to_snapshot().nodes[0].topology) == {"rack": "r9"}
    with pytest.raises(InvalidInputError, match=r"^levels: level 'rack' is not among the snapshot's topologyLevels "
                                                r"\(zone\)"):
        Extender({**empty, "topologyLevels": ["zone"]}, levels=[f"rack={RACK}"])


def test_a_gang_whose_podgroup_is_unknown_waits_and_says_so():
    ex = Extender(cluster_document())
    result, _ = verbs(ex, pod("w-0", 1, labels={"scheduling.x-k8s.io/pod-group": "nope"}))
    assert result["NodeNames"] == []
    assert all("PodGroup not known to placer" in why for why in result["FailedNodes"].values())


def test_watch_events_change_what_fits_and_a_bad_event_is_refused_alone():
    ex = Extender(cluster_document())
    running = pod("big", 8)
    running["spec"]["nodeName"] = "gpu-1"
    running["status"]["phase"] = "Running"
    running["kind"] = "Pod"
    greedy = dict(running, metadata={"name": "greedy", "namespace": "ml", "annotations": {"placer.io/gpus": "0,1,9"}},
                  spec={**running["spec"], "nodeName": "gpu-2"})
    greedy["spec"]["containers"] = [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]
    stream = json.dumps(running, indent=4) + "\n" + json.dumps({"type": "ADDED", "object": greedy})
    ex.queue(read_watch_stream(stream, "pods.watch"))
    result, _ = verbs(ex, pod("a", 8))
    assert result["NodeNames"] == ["gpu-2"]
    assert ex.state()["events_applied"] == 1 and ex.state()["events_refused"] == 1
    ex.queue([WatchEvent("DELETED", running, "pods.watch:9")])
    result, _ = verbs(ex, pod("a", 8))
    assert result["NodeNames"] == ["gpu-1", "gpu-2"]


def test_a_pod_seen_before_its_node_waits_for_the_node_and_then_holds_its_gpus():
    # Nodes and Pods are listed and watched apart: the pod list may come first
    ex = Extender(cluster_document(), levels=[f"rack={RACK}"])
    early = pod("early", 8)
    early.update(kind="Pod", spec={**early["spec"], "nodeName": "gpu-9"}, status={"phase": "Running"})
    early["metadata"]["annotations"] = {"placer.io/gpus": "0,1,2,3,4,5,6,7"}
    ex.queue([WatchEvent("ADDED", early, "list Pod")])
    ex.sync(now=True)
    assert ex.state()["awaiting_node"] == 1 and ex.state()["events_refused"] == 0 and ex.state()["pods"] == 1
    node = {"kind": "Node", "metadata": {"name": "gpu-9", "labels": {RACK: "r9"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    ex.queue([WatchEvent("ADDED", node, "list Node")])
    result, _ = verbs(ex, pod("a", 8), [*NAMES, "gpu-9"])
    assert ex.state()["awaiting_node"] == 0 and ex.state()["pods"] == 2
    assert result["FailedNodes"]["gpu-9"] == "Insufficient nvidia.com/gpu"
    # a waiting pod deleted before its node comes holds nothing when the node does
    gone = {**early, "metadata": {**early["metadata"], "name": "gone"}, "spec": {**early["spec"], "nodeName": "gpu-10"}}
    ex.queue([WatchEvent("ADDED", gone, "watch Pod")])
    ex.sync(now=True)
    assert ex.state()["awaiting_node"] == 1
    ex.queue([WatchEvent("DELETED", gone, "watch Pod"),
              WatchEvent("ADDED", {**node, "metadata": {"name": "gpu-10", "labels": {RACK: "r9"}}}, "watch Node")])
    result, _ = verbs(ex, pod("a", 8), ["gpu-9", "gpu-10"])
    assert ex.state()["awaiting_node"] == 0 and ex.state()["pods"] == 2 and result["NodeNames"] == ["gpu-10"]


def test_a_watched_node_event_cordons_and_uncordons():
    ex = Extender(cluster_document())
    node = {"kind": "Node", "metadata": {"name": "gpu-3", "labels": {RACK: "r1"}}, "spec": {},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "500Gi"}}}
    ex.queue([WatchEvent("MODIFIED", node)])
    result, _ = verbs(ex, pod("a", 8))
    assert "gpu-3" in result["NodeNames"]
    ex.queue([WatchEvent("MODIFIED", {**node, "spec": {"unschedulable": True}})])
    result, _ = verbs(ex, pod("a", 8))
    assert result["FailedAndUnresolvableNodes"] == {"gpu-3": "node(s) were unschedulable"}


def test_preempt_names_victims_by_uid_after_which_the_pod_fits():
    doc = cluster_document()
    for i in (1, 2):
        doc["nodes"][i]["pods"] = [{"name": f"ml/low-{i}", "gpus": list(range(8)), "priority": 1}]
    doc["nodes"][0]["pods"][0]["priority"] = 500  # above the preemptor: gpu-0 has no victims
    ex = Extender(doc)
    victims = {f"gpu-{i}": {"Pods": [pod(f"low-{i}")], "NumPDBViolations": 0} for i in (1, 2)}
    victims["gpu-0"] = {"Pods": [pod("old")], "NumPDBViolations": 0}
    body = json.dumps({"Pod": pod("vip", 8, priority=100), "NodeNameToVictims": victims}).encode()
    out = ex.preempt(decode_preemption_args(body, "POST /preempt"))["NodeNameToMetaVictims"]
    assert out == {f"gpu-{i}": {"Pods": [{"UID": f"uid-low-{i}"}], "NumPDBViolations": 0} for i in (1, 2)}
    # kube's own MetaVictims form gives UIDs only; placer answers from the UIDs it learnt
    meta = {n: {"Pods": [{"UID": "whatever"}], "NumPDBViolations": 0} for n in ("gpu-1",)}
    body = json.dumps({"Pod": pod("vip", 8, priority=100), "NodeNameToMetaVictims": meta}).encode()
    assert list(ex.preempt(decode_preemption_args(body, "POST /preempt"))["NodeNameToMetaVictims"]) == ["gpu-1"]
    # a pod of lower priority than everything preempts nothing
    body = json.dumps({"Pod": pod("meek", 8, priority=0), "NodeNameToVictims": victims}).encode()
    assert ex.preempt(decode_preemption_args(body, "POST /preempt")) == {"NodeNameToMetaVictims": {}}


def test_bad_pod_fields_are_errors_at_the_pod_path():
    ex = Extender(cluster_document())
    bad = pod("a")
    bad["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots"
    result = ex.filter(decode_filter_args(filter_body(bad, NAMES), "POST /filter"))
    assert result["NodeNames"] == [] and result["Error"].startswith("POST /filter: Pod.spec.containers[0]")
    with pytest.raises(InvalidInputError) as e:
        ex.prioritize(decode_filter_args(filter_body(bad, NAMES), "POST /prioritize"))
    assert str(e.value).startswith("POST /prioritize: Pod.spec.containers[0]")


def test_metric_labels_of_reasons_leave_names_out():
    assert reason_label("gang ml/pg waits for its pods: 1 of minMember 2 seen") == "gang waiting for its pods"
    assert reason_label("gang ml/pg does not fit: 0/4 nodes are available") == "gang does not fit"
    assert reason_label("gang ml/x: PodGroup not known to placer (give it ...)") == "gang's PodGroup not known"
    assert reason_label("its gang's reservation is gpu-1") == "reserved for its gang on another node"
    assert reason_label("the node placer chose is a100-mig-0") == "placer chose another node"
    assert reason_label("Insufficient nvidia.com/gpu") == "Insufficient nvidia.com/gpu"


def test_scores_map_linearly_onto_0_to_10():
    assert scores_0_to_10([5, 5]) == [10, 10]
    assert scores_0_to_10([-30, 0, 10, 70]) == [0, 3, 4, 10]
    assert scores_0_to_10([]) == []


@settings(max_examples=90, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), policy=st.sampled_from(policies.names()))
def test_filter_matches_the_reference_and_placers_choice_scores_10(data, policy):
    snapshot: ClusterSnapshot = data.draw(snapshots(max_nodes=6))
    the_pod = data.draw(pod_requests(name="p"))
    cluster = Cluster(snapshot)
    scores = cluster.node_scores(the_pod, policy=policy)
    fits = {n for n, s in zip(cluster.node_names, scores.tolist()) if s != np.iinfo(np.int64).min}
    reference = ReferenceCluster(snapshot)
    assert fits == {s.node.name for s in reference._nodes if not _filter(s, the_pod)}
    placed = cluster.place(the_pod, policy=policy)
    if not fits:
        assert not placed.assignments
        return
    chosen = placed.assignments[0].node
    mapped = dict(zip(sorted(fits, key=cluster.node_names.index),
                      scores_0_to_10([int(scores[cluster.node_names.index(n)]) for n in
                                      sorted(fits, key=cluster.node_names.index)])))
    assert mapped[chosen] == 10
    if policy in ("best-fit", "spread", "first-fit"):  # ties to the lowest index, as the kernel
        assert chosen == cluster.node_names[int(np.argmax(scores))]
    # the reasons of the nodes turned away are kube's words for what the reference finds
    turned = [i for i, n in enumerate(cluster.node_names) if n not in fits]
    for i, why in zip(turned, cluster.session.node_reasons(the_pod, turned)):
        assert why and _filter(reference._nodes[i], the_pod)


def test_a_mig_pod_gets_the_node_and_instance_placer_chooses():
    from placer.adapters.kubernetes.snapshot import import_kubernetes

    data = "tests/data/k8s/"
    doc = import_kubernetes(data + "handmade-nodes.json", data + "handmade-pods.json").document
    names = [n["name"] for n in doc["nodes"]]
    ex = Extender(doc)
    p = pod("mig-a")
    p["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.5gb": "1"}
    result, scores = verbs(ex, p, names)
    assert result["NodeNames"] == ["a100-mig-0"]
    assert all(why == "the node placer chose is a100-mig-0" for why in result["FailedNodes"].values())
    assert scores["a100-mig-0"] == 10 and sum(scores.values()) == 10
    assert bind(ex, "mig-a", "a100-mig-0") == {"Error": ""}
    held = [p for n in ex.cluster.to_snapshot().nodes for p in n.pods if p.name == "ml/mig-a"]
    assert len(held) == 1 and [m.profile for m in held[0].mig] == ["1g.5gb"]
    assert held[0].mig[0].start != 2  # mig-infer-0 holds the instance at start 2
    # three 1g.5gb instances were free; two more pods take them, a fourth finds none
    for k in range(2):
        p["metadata"].update(name=f"mig-{k}", uid=f"uid-mig-{k}")  # another pod: another UID
        verbs(ex, p, names)
        assert bind(ex, f"mig-{k}", "a100-mig-0") == {"Error": ""}
    p["metadata"]["name"] = "mig-last"
    result, _ = verbs(ex, p, names)
    assert result["NodeNames"] == [] and "a100-mig-0" in result["FailedNodes"]


def running_pod_object(name: str, node: str, gpus: int, annotation: str | None = None) -> dict:
    obj = {**pod(name, gpus), "kind": "Pod", "apiVersion": "v1"}
    obj["spec"]["nodeName"] = node
    obj["status"]["phase"] = "Running"
    if annotation is not None:
        obj["metadata"]["annotations"] = {"placer.io/gpus": annotation}
    return obj


def test_events_that_change_no_holding_apply_without_a_rebuild():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 2))
    assert bind(ex, "a", "gpu-0") == {"Error": ""}
    annotation = ex.binder.bindings[-1]["metadata"]["annotations"]["placer.io/gpus"]
    state, cluster = ex.cluster.to_snapshot(), ex.cluster
    # placer's own bind coming back from the API, then a pending pod and a PodGroup
    ex.queue([WatchEvent("MODIFIED", running_pod_object("a", "gpu-0", 2, annotation)),
              WatchEvent("ADDED", {**pod("w", 1), "kind": "Pod"}),
              WatchEvent("ADDED", podgroup("pg", 3))])
    ex.sync()
    assert ex.cluster is cluster and ex.cluster.to_snapshot() == state
    assert ex.state()["pending"] == 1 and ex.state()["events_applied"] == 3
    # the snapshot's running pod ml/old finishes: released in place
    done = running_pod_object("old", "gpu-0", 4, "0,1,2,3")
    done["status"]["phase"] = "Succeeded"
    ex.queue([WatchEvent("MODIFIED", done)])
    ex.sync()
    assert ex.cluster is cluster and not ex.cluster.session.holds("ml/old")
    assert ex.cluster.node_free("gpu-0").gpu_milli.count(1000) == 6


def test_a_pod_seen_on_other_gpus_than_placer_holds_is_rebuilt_as_the_api_says():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 2))
    assert bind(ex, "a", "gpu-1") == {"Error": ""}
    cluster = ex.cluster
    ex.queue([WatchEvent("MODIFIED", running_pod_object("a", "gpu-1", 2, "6,7"))])
    ex.sync()
    assert ex.cluster is not cluster
    held = {p.name: p.gpus for n in ex.cluster.to_snapshot().nodes for p in n.pods}
    assert held["ml/a"] == (6, 7)


def test_a_deletion_naming_only_the_pod_releases_what_it_held():
    ex = Extender(cluster_document())
    ex.queue([WatchEvent("DELETED", {"kind": "Pod", "metadata": {"name": "old", "namespace": "ml"}})])
    ex.sync()
    assert not ex.cluster.session.holds("ml/old") and ex.state()["events_applied"] == 1
    assert ex.cluster.node_free("gpu-0").gpu_milli.count(1000) == 8


def bind_uid(ex: Extender, name: str, uid: str, node: str) -> dict:
    body = json.dumps({"PodName": name, "PodNamespace": "ml", "PodUID": uid, "Node": node}).encode()
    return ex.bind(decode_binding_args(body, "POST /bind"))


def held_gpus(ex: Extender) -> dict[str, tuple[int, ...]]:
    return {p.name: p.gpus for n in ex.cluster.to_snapshot().nodes for p in n.pods}


def test_a_pod_recreated_under_its_name_with_a_new_uid_is_bound_anew():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 6, uid="uid-1"))
    assert bind_uid(ex, "a", "uid-1", "gpu-1") == {"Error": ""}
    # deleted and created again under the same name before the watch said so: another pod
    verbs(ex, pod("a", 6, uid="uid-2"))
    assert bind_uid(ex, "a", "uid-2", "gpu-1") == {"Error": ""}
    first, second = ex.binder.bindings
    assert (first["metadata"]["uid"], second["metadata"]["uid"]) == ("uid-1", "uid-2")
    gpus = tuple(int(g) for g in second["metadata"]["annotations"]["placer.io/gpus"].split(","))
    assert held_gpus(ex)["ml/a"] == gpus and len(gpus) == 6  # the old pod's six GPUs were given back first
    assert bind_uid(ex, "a", "uid-2", "gpu-1") == {"Error": ""} and len(ex.binder.bindings) == 2  # a retry


def test_bind_of_a_uid_placer_has_not_seen_is_refused_and_changes_nothing():
    ex = Extender(cluster_document())
    verbs(ex, pod("a", 6))
    before = ex.cluster.to_snapshot()
    assert bind_uid(ex, "a", "uid-other", "gpu-1") == {"Error": (
        "POST /bind: pod ml/a with UID uid-other was not seen by filter (placer saw UID uid-a); placer binds only "
        "a pod it has seen")}
    assert "ml/b was not seen by filter" in bind_uid(ex, "b", "uid-b", "gpu-1")["Error"]
    assert ex.binder.bindings == [] and ex.cluster.to_snapshot() == before
    assert bind_uid(ex, "a", "uid-a", "gpu-1") == {"Error": ""}
    held = ex.cluster.to_snapshot()
    # another UID under the bound name, never filtered: not a retry, and the bound pod keeps its GPUs
    assert "ml/a was not seen by filter" in bind_uid(ex, "a", "uid-other", "gpu-1")["Error"]
    assert len(ex.binder.bindings) == 1 and ex.cluster.to_snapshot() == held


def test_a_gang_member_binds_only_under_the_uid_placer_reserved():
    ex = Extender(cluster_document(), podgroups=[podgroup("pg", 2)])
    member = {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}}
    verbs(ex, pod("g-0", 1, **member))
    (node,) = verbs(ex, pod("g-1", 1, **member))[0]["NodeNames"]
    assert "is not the pod reserved with its gang (UID uid-g-1)" in bind_uid(ex, "g-1", "uid-x", node)["Error"]
    assert bind_uid(ex, "g-1", "uid-g-1", node) == {"Error": ""}


def test_a_watched_pod_pending_under_a_held_name_with_a_new_uid_releases_the_old_one():
    ex = Extender(cluster_document())
    ex.queue([WatchEvent("ADDED", running_pod_object("a", "gpu-1", 8))])
    assert verbs(ex, pod("x", 8))[0]["NodeNames"] == ["gpu-2"]
    ex.queue([WatchEvent("ADDED", {**pod("a", 8, uid="uid-new"), "kind": "Pod"})])  # a new pod, pending
    assert verbs(ex, pod("x", 8))[0]["NodeNames"] == ["gpu-1", "gpu-2"]
    assert "ml/a" not in held_gpus(ex) and ex.state()["pending"] == 2  # a (the new one) and x


def test_a_list_replaces_what_the_api_told_of_its_kind_and_keeps_the_snapshots_own():
    from placer.adapters.kubernetes.live import Listing

    ex = Extender(cluster_document())
    ex.queue([WatchEvent("ADDED", running_pod_object("gone", "gpu-1", 8)),
              WatchEvent("ADDED", running_pod_object("stays", "gpu-2", 2))])
    verbs(ex, pod("filtered", 1))
    assert set(held_gpus(ex)) == {"ml/old", "ml/gone", "ml/stays"} and ex.state()["pending"] == 1
    ex.queue([Listing("Pod", [running_pod_object("stays", "gpu-2", 2), running_pod_object("new", "gpu-1", 3)])])
    ex.sync()  # a list applies at once, whatever the interval
    assert set(held_gpus(ex)) == {"ml/old", "ml/stays", "ml/new"}  # ml/old: only the snapshot had it
    assert ex.state()["pending"] == 0  # the filtered pod is not in the list: deleted


def test_pods_seen_only_by_filter_are_forgotten_after_the_ttl_and_beyond_the_cap():
    now = [0.0]
    ex = Extender(cluster_document(), pending_ttl_s=60, max_pending=2, clock=lambda: now[0])
    ex.queue([WatchEvent("ADDED", {**pod("watched", 1), "kind": "Pod"})])  # the watch reports it: kept
    for name in ("a", "b"):
        verbs(ex, pod(name, 1))
        now[0] += 1
    verbs(ex, pod("a", 1))  # a is the most recently filtered now
    verbs(ex, pod("c", 1))  # three: the oldest, b, goes
    assert "ml/b was not seen by filter" in bind(ex, "b", "gpu-1")["Error"]
    assert ex.state()["pending"] == 3 and ex.state()["pending_dropped"] == 1  # watched, a, c
    now[0] += 61
    assert ex.state()["pending"] == 1 and ex.state()["pending_dropped"] == 3  # a and c expired
    assert "ml/a was not seen by filter" in bind(ex, "a", "gpu-1")["Error"]
    verbs(ex, pod("a", 1))
    assert bind(ex, "a", "gpu-1") == {"Error": ""}


def test_late_watch_events_of_a_replaced_pod_leave_its_successor_held():
    ex = Extender(cluster_document())
    old = running_pod_object("a", "gpu-1", 8)
    old["metadata"]["uid"] = "uid-1"
    ex.queue([WatchEvent("ADDED", old)])
    verbs(ex, pod("a", 8, uid="uid-2"))  # the new pod under the name: the old one is gone
    assert bind_uid(ex, "a", "uid-2", "gpu-1") == {"Error": ""}
    held = held_gpus(ex)
    ex.queue([WatchEvent("MODIFIED", {**old, "status": {"phase": "Running"}}), WatchEvent("DELETED", old)])
    assert verbs(ex, pod("x", 8))[0]["NodeNames"] == ["gpu-2"] and held_gpus(ex) == held
    ex.queue([WatchEvent("DELETED", {**running_pod_object("a", "gpu-1", 8), "metadata": {
        "name": "a", "namespace": "ml", "uid": "uid-2"}})])  # the new pod's own deletion does release
    assert verbs(ex, pod("x", 8))[0]["NodeNames"] == ["gpu-1", "gpu-2"]


def node_object(name: str, gpus: str = "8", ready: str | None = None, **labels: str) -> dict:
    """A watched Node object in rack r1 (``ready``: its Ready condition, if any)."""
    status: dict = {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "64", "memory": "500Gi"}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready}]
    return {"kind": "Node", "metadata": {"name": name, "labels": {RACK: "r1", **labels}}, "spec": {}, "status": status}


def not_ready_node(name: str, ready: str = "False", **labels: str) -> dict:
    return node_object(name, ready=ready, **labels)


def watched_notes(caplog: pytest.LogCaptureFixture, ex: Extender, events: list[WatchEvent]) -> list[str]:
    """The notes the extender logs applying ``events`` (one sync)."""
    caplog.clear()
    ex.queue(events)
    ex.sync(now=True)
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("note: ")]


def test_watched_nodes_and_running_pods_log_their_notes_once_per_change(caplog):
    caplog.set_level(logging.WARNING, "placer.serve.app")
    ex = Extender(cluster_document())
    taint_note = ("note: watch Node: status.conditions: node 'gpu-3': Ready is False; added the node lifecycle "
                  "controller's taint(s) node.kubernetes.io/not-ready:NoSchedule, node.kubernetes.io/not-ready:NoExecute")
    assert watched_notes(caplog, ex, [WatchEvent("MODIFIED", not_ready_node("gpu-3"), "watch Node")]) == [taint_note]
    # the same notes again (a heartbeat, another label, a relist): nothing more is logged
    again = [WatchEvent("MODIFIED", not_ready_node("gpu-3", extra="x"), "watch Node"),
             WatchEvent("ADDED", not_ready_node("gpu-3"), "list Node")]
    assert watched_notes(caplog, ex, again) == []
    result, _ = verbs(ex, pod("a", 8))  # verbs log nothing of the node either
    assert "gpu-3" in result["FailedAndUnresolvableNodes"]
    assert [r for r in caplog.records if r.getMessage().startswith("note: ")] == []
    # unreachable is another change: its note; Ready, then NotReady again: logged anew
    unreachable = watched_notes(caplog, ex, [WatchEvent("MODIFIED", not_ready_node("gpu-3", "Unknown"), "watch Node")])
    assert len(unreachable) == 1 and "Ready is Unknown" in unreachable[0]
    assert watched_notes(caplog, ex, [WatchEvent("MODIFIED", not_ready_node("gpu-3", "True"), "watch Node")]) == []
    assert watched_notes(caplog, ex, [WatchEvent("MODIFIED", not_ready_node("gpu-3"), "watch Node")]) == [taint_note]

    running = running_pod_object("r", "gpu-2", 2)
    running["spec"]["priorityClassName"] = "batch-high"
    logged = watched_notes(caplog, ex, [WatchEvent("ADDED", running, "watch Pod")])
    assert len(logged) == 1 and logged[0].startswith("note: watch Pod: spec.priorityClassName: ") \
        and "batch-high" in logged[0], logged
    relabelled = {**running, "metadata": {**running["metadata"], "labels": {"app": "x"}}}
    assert watched_notes(caplog, ex, [WatchEvent("MODIFIED", relabelled, "watch Pod")]) == []
    assert watched_notes(caplog, ex, [WatchEvent("DELETED", relabelled, "watch Pod")]) == []
    assert watched_notes(caplog, ex, [WatchEvent("ADDED", running, "watch Pod")]) == logged  # a new pod of the name


def test_a_node_whose_allocatable_no_longer_lists_gpus_has_none():
    ex = Extender(cluster_document())
    node = node_object("gpu-2", gpus="0")
    ex.queue([WatchEvent("MODIFIED", node)])
    result, _ = verbs(ex, pod("a", 8))
    assert result["NodeNames"] == ["gpu-1"] and result["FailedAndUnresolvableNodes"]["gpu-2"] == "Insufficient nvidia.com/gpu"
    assert verbs(ex, pod("c", cpu="1"))[0]["NodeNames"] == ["gpu-0", "gpu-1", "gpu-2"]  # CPU pods still fit there
    # a Node object without status.allocatable (a partial object) keeps what the node had
    ex.queue([WatchEvent("MODIFIED", node_object("gpu-2")), WatchEvent("MODIFIED", {**node, "status": {}})])
    assert verbs(ex, pod("b", 8))[0]["NodeNames"] == ["gpu-1", "gpu-2"]


def test_a_pod_of_nvidia_gpu_takes_slots_of_a_sharing_node_when_no_node_has_whole_gpus_for_it():
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "whole-0", "gpus": 2, "pods": [{"name": "ml/w", "gpus": [0]}]},
        {"name": "shared-0", "gpus": 2, "gpuSharing": {"strategy": "time-slicing", "replicas": 4},
         "pods": [{"name": "ml/s", "gpuSlots": {"0": 4, "1": 1}}]},
        {"name": "mps-0", "gpus": 2, "gpuSharing": {"strategy": "mps", "replicas": 2}},
    ]}
    names = ["whole-0", "shared-0", "mps-0"]
    ex = Extender(doc)
    result, scores = verbs(ex, pod("one", 1), names)  # whole GPUs first
    assert result["NodeNames"] == ["whole-0"]
    assert result["FailedAndUnresolvableNodes"]["shared-0"].startswith("node(s) share their GPUs")
    result, scores = verbs(ex, pod("three", 3), names)  # no node has 3 whole GPUs free: 3 slots, on GPU 1
    assert result["NodeNames"] == ["shared-0"] and scores["shared-0"] == 10
    assert result["FailedNodes"]["whole-0"] == "the node placer chose is shared-0"
    assert bind(ex, "three", "shared-0") == {"Error": ""}
    assert ex.binder.bindings[-1]["metadata"]["annotations"] == {"placer.io/gpus": "1,1,1"}
    result, _ = verbs(ex, pod("four", 4), names)  # fits neither way: each node says why, slots on sharing ones
    assert result["NodeNames"] == []
    assert result["FailedNodes"] == {"whole-0": "Insufficient nvidia.com/gpu", "shared-0": "Insufficient nvidia.com/gpu"}
    assert result["FailedAndUnresolvableNodes"] == {"mps-0": "node(s) share their GPUs by MPS: one slot per pod"}


def test_a_pod_bound_to_a_node_not_known_yet_waits_for_the_node_and_then_holds_its_gpus():
    # the Pods' list may come before the Nodes' (one watch thread per kind): a restart with nodes only from the API
    ex = Extender({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": []})
    held = running_pod_object("held", "gpu-9", 3, annotation="0,1,2")
    ex.queue([Listing("Pod", [held])])
    ex.sync(now=True)
    assert ex.state()["awaiting_node"] == 1 and ex.state()["events_refused"] == 0
    node = {"kind": "Node", "metadata": {"name": "gpu-9"}, "spec": {},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "500Gi"}}}
    ex.queue([Listing("Node", [node])])
    result, _ = verbs(ex, pod("next", 5), ["gpu-9"])
    assert result["NodeNames"] == ["gpu-9"] and ex.state()["awaiting_node"] == 0
    assert ex.cluster.session.holding("ml/held")[1].gpus == (0, 1, 2)
    assert bind(ex, "next", "gpu-9") == {"Error": ""}
    assert ex.binder.bindings[-1]["metadata"]["annotations"] == {"placer.io/gpus": "3,4,5,6,7"}
    # a pod that waits and is then deleted waits no more
    ex.queue([Listing("Pod", [running_pod_object("late", "gpu-10", 1)])])
    ex.sync(now=True)
    assert ex.state()["awaiting_node"] == 1
    ex.queue([WatchEvent("DELETED", running_pod_object("late", "gpu-10", 1))])
    ex.sync(now=True)
    assert ex.state()["awaiting_node"] == 0


def test_reserving_a_gang_wakes_each_member_kube_scheduler_parked_once_and_its_echo_changes_nothing():
    ex = Extender(cluster_document(), podgroups=[podgroup("pg", 3)])
    labels = {"scheduling.x-k8s.io/pod-group": "pg"}
    for name in ("g-0", "g-1"):  # each turned away as it comes: kube-scheduler parks it
        assert verbs(ex, pod(name, 4, labels=labels))[0]["NodeNames"] == []
    assert ex.binder.wakes == []
    (node_2,) = verbs(ex, pod("g-2", 4, labels=labels))[0]["NodeNames"]  # the last one reserves the gang
    assert ex.state()["reserved"] == 3
    # the members but the one filtered now, each with its UID and its reserved node
    assert [(w.namespace, w.name, w.uid) for w in ex.binder.wakes] == [
        ("ml", "g-0", "uid-g-0"), ("ml", "g-1", "uid-g-1")]
    woken = {w.name: w.node for w in ex.binder.wakes}
    before = ex.cluster.to_snapshot()
    for name, node in woken.items():
        # the watch's echo of the wake (the member pending, with placer's annotation), then
        # kube-scheduler's retry of the woken member: its filter keeps the node the wake named
        echo = {**pod(name, 4, labels=labels, annotations={"placer.io/reserved-node": node}), "kind": "Pod"}
        ex.queue([WatchEvent("MODIFIED", echo)])
        assert verbs(ex, echo)[0]["NodeNames"] == [node]
    assert ex.state()["events_refused"] == 0 and ex.state()["reserved"] == 3
    assert ex.cluster.to_snapshot() == before and len(ex.binder.wakes) == 2
    for name, node in {**woken, "g-2": node_2}.items():
        assert bind(ex, name, node) == {"Error": ""}
    assert ex.state()["reserved"] == 0 and len(ex.binder.wakes) == 2


def test_a_binder_without_wake_reserves_the_gang_all_the_same():
    class BindOnly:
        def __init__(self) -> None:
            self.bound: list[str] = []

        def bind(self, namespace, name, uid, node, annotations):
            self.bound.append(name)

    ex = Extender(cluster_document(), podgroups=[podgroup("pg", 2)], binder=BindOnly())
    member = {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}}
    verbs(ex, pod("g-0", 1, **member))
    (node,) = verbs(ex, pod("g-1", 1, **member))[0]["NodeNames"]
    assert ex.state()["reserved"] == 2 and bind(ex, "g-1", node) == {"Error": ""} and ex.binder.bound == ["g-1"]


def test_a_wake_the_api_server_refuses_is_logged_in_one_line_naming_each_pod(tmp_path, caplog):
    from kube_api_stub import closed_port, write_kubeconfig

    from placer.adapters.kubernetes.live import KubeBinder, ReservedMember, api_client

    binder = KubeBinder(api_client(str(write_kubeconfig(tmp_path / "kubeconfig", closed_port()))), timeout_s=2)
    members = [ReservedMember("ml", f"g-{k}", f"uid-g-{k}", f"gpu-{k}") for k in range(2)]
    with caplog.at_level(logging.WARNING, logger="placer.watch"):
        binder.wake(members).join(timeout=30)
    (line,) = [r.getMessage() for r in caplog.records if "wake" in r.getMessage()]
    assert line.startswith("could not wake 2 reserved gang member(s) for kube-scheduler to retry")
    assert "ml/g-0 (connection refused); ml/g-1 (connection refused)" in line
    assert binder.wake([]) is None


def test_a_podgroup_the_watch_brings_after_its_pods_reserves_the_gang_and_wakes_every_member():
    ex = Extender(cluster_document())
    labels = {"scheduling.x-k8s.io/pod-group": "late"}
    for name in ("l-0", "l-1"):  # kube-scheduler parks them: no PodGroup yet
        assert "PodGroup not known" in next(iter(verbs(ex, pod(name, 4, labels=labels))[0]["FailedNodes"].values()))
    why = "the watch of Pods failed"
    ex.not_current = lambda: why
    ex.queue([WatchEvent("ADDED", podgroup("late", 2))])
    ex.sync(now=True)
    assert ex.state()["reserved"] == 0 and ex.binder.wakes == []  # not planned on a state not current
    why = ""
    ex.sync()
    assert ex.state()["reserved"] == 2
    woken = {w.name: w.node for w in ex.binder.wakes}
    assert sorted(woken) == ["l-0", "l-1"]  # no member is being filtered: all of them
    for name, node in woken.items():
        assert verbs(ex, pod(name, 4, labels=labels))[0]["NodeNames"] == [node]
    # the same PodGroup again (a list, its status written): nothing planned anew
    ex.queue([WatchEvent("MODIFIED", {**podgroup("late", 2), "status": {"phase": "Scheduling"}})])
    ex.sync(now=True)
    assert len(ex.binder.wakes) == 2 and ex.state()["reserved"] == 2
