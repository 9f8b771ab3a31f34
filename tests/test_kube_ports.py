"""kube-scheduler's NodePorts filter as placer applies it (issue #32): a pod's ``hostPorts``
against those of the pods on a node (running, and placed before it in the request), in the
kernel session, the reference oracle, ``check_placement`` and ``explain``; the Kubernetes
importers fill the field.

The rows are those of kube's ``nodeports/node_ports_test.go`` (v1.36.3) in placer's format:
ports written ``PROTOCOL/hostIP/port``, a running pod holding the node's ports, and whether
the incoming pod fits (False: kube's reason).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placer
from placer import policies
from placer.adapters.kubernetes import snapshot_from_kubernetes
from placer.adapters.kubernetes.workloads import request_from_kubernetes
from placer.cli import main
from placer.diagnostics.check import check_placement
from placer.diagnostics.explain import explain
from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.model import ClusterSnapshot, PlacementRequest, PlacementResult
from placer.model import reasons as wording
from reference import ReferenceCluster

PORTS = wording.PORTS


def ports(*specs: str) -> list[dict[str, Any]]:
    """Host ports written as kube's test writes them: ``PROTOCOL/hostIP/port``."""
    out = []
    for spec in specs:
        protocol, ip, port = spec.split("/")
        entry: dict[str, Any] = {"hostPort": int(port), "protocol": protocol}
        if ip:
            entry["hostIP"] = ip
        out.append(entry)
    return out


def snapshot(*held: list[dict[str, Any]], nodes: int = 1) -> ClusterSnapshot:
    """``nodes`` nodes; node i runs a pod holding ``held[i]``."""
    docs = [{"name": f"node{i}", "cpuMilli": 8000, "memoryMiB": 8192, "pods": []} for i in range(nodes)]
    for i, taken in enumerate(held):
        if taken:
            docs[i]["pods"].append({"name": f"holder{i}", "cpuMilli": 100, "hostPorts": taken})
    return ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": docs})


def request(*pods: dict[str, Any], **more: Any) -> PlacementRequest:
    return PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": list(pods), **more})


def placed_everywhere(snap: ClusterSnapshot, req: PlacementRequest) -> PlacementResult:
    """placer's result, after checking that the reference and the checker agree with it."""
    got = placer.place(snap, req)
    assert got.to_dict() == ReferenceCluster(snap).schedule(req).to_dict()
    assert check_placement(snap, req, got) == []
    return got


# (row of TestNodePorts, the incoming pod's ports, the ports the node's pod holds, fits)
ROWS = [
    pytest.param([], ports("UDP/127.0.0.1/8080"), True, id="skip filter"),
    pytest.param(ports("UDP/127.0.0.1/8080"), ports("UDP/127.0.0.1/9090"), True, id="other port"),
    pytest.param(ports("UDP/127.0.0.1/8080"), ports("UDP/127.0.0.1/8080"), False, id="same udp port"),
    pytest.param(ports("TCP/127.0.0.1/8080"), ports("TCP/127.0.0.1/8080"), False, id="same tcp port"),
    pytest.param(ports("TCP/127.0.0.1/8080"), ports("TCP/127.0.0.2/8080"), True, id="different host ip"),
    pytest.param(ports("UDP/127.0.0.1/8080"), ports("TCP/127.0.0.1/8080"), True, id="different protocol"),
    pytest.param(ports("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ports("UDP/127.0.0.1/8080"), False,
                 id="second udp port conflict"),
    pytest.param(ports("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"), ports("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
                 False, id="first tcp port conflict"),
    pytest.param(ports("TCP/0.0.0.0/8001"), ports("TCP/127.0.0.1/8001"), False,
                 id="first tcp port conflict due to 0.0.0.0 hostIP"),
    pytest.param(ports("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), ports("TCP/127.0.0.1/8001"), False,
                 id="TCP hostPort conflict due to 0.0.0.0 hostIP"),
    pytest.param(ports("TCP/127.0.0.1/8001"), ports("TCP/0.0.0.0/8001"), False,
                 id="second tcp port conflict to 0.0.0.0 hostIP"),
    pytest.param(ports("UDP/127.0.0.1/8001"), ports("TCP/0.0.0.0/8001"), True, id="second different protocol"),
    pytest.param(ports("UDP/127.0.0.1/8001"), ports("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"), False,
                 id="UDP hostPort conflict due to 0.0.0.0 hostIP"),
    # an empty hostIP is 0.0.0.0 (kube's sanitize), as the API server leaves it
    pytest.param(ports("TCP//8001"), ports("TCP/127.0.0.1/8001"), False, id="empty hostIP is the wildcard"),
    pytest.param(ports("SCTP/127.0.0.1/8001"), ports("SCTP//8001"), False, id="held wildcard, sctp"),
]


@pytest.mark.parametrize("wanted, held, fits", ROWS)
def test_node_ports_rows(wanted, held, fits) -> None:
    snap = snapshot(held)
    pod = {"name": "p", "cpuMilli": 100, **({"hostPorts": wanted} if wanted else {})}
    got = placed_everywhere(snap, request(pod))
    if fits:
        assert [a.node for a in got.assignments] == ["node0"]
    else:
        assert [u.reason for u in got.unschedulable] == [f"0/1 nodes are available: 1 {PORTS}."]
        session = KernelSession(snap)
        assert session.node_reasons(request(pod).pods[0], [0]) == [PORTS]
        # the kernel's run, with the caller's own node set beside NodePorts'
        run = session.place(list(request(pod).pods), policies.get("first-fit"), np.zeros(1, dtype=np.uint64),
                            only=session.nodes_bitset(np.ones(1, dtype=bool)))
        assert run.nodes == [-1] and run.reasons(0) == {PORTS: 1}


def test_pods_of_one_request_see_the_ports_placed_before_them() -> None:
    """Three replicas of a DaemonSet-like pod on two nodes: the third finds both ports taken;
    a pod without ports beside them is placed as before."""
    snap = snapshot(nodes=2)
    req = request({"name": "agent", "replicas": 3, "cpuMilli": 100, "hostPorts": [{"hostPort": 9100}]},
                  {"name": "plain", "cpuMilli": 100})
    got = placed_everywhere(snap, req)
    assert sorted(a.node for a in got.assignments if a.pod.startswith("agent")) == ["node0", "node1"]
    assert [u.reason for u in got.unschedulable] == [f"0/2 nodes are available: 2 {PORTS}."]
    assert any(a.pod == "plain" for a in got.assignments)


def test_the_filter_runs_after_node_affinity_and_before_resources() -> None:
    """kube's order: a node turned away by its selector counts there, one that lacks CPU and
    holds the port counts under NodePorts."""
    snap = ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "a", "cpuMilli": 1000, "labels": {"zone": "x"}, "pods": [{"name": "h", "hostPorts": [{"hostPort": 80}]}]},
        {"name": "b", "cpuMilli": 100, "labels": {"zone": "y"}, "pods": [{"name": "g", "hostPorts": [{"hostPort": 80}]}]},
        {"name": "c", "cpuMilli": 100, "labels": {"zone": "y"}},
    ]})
    req = request({"name": "p", "cpuMilli": 500, "nodeSelector": {"zone": "y"}, "hostPorts": [{"hostPort": 80}]})
    got = placed_everywhere(snap, req)
    assert [u.reason for u in got.unschedulable] == [
        f"0/3 nodes are available: 1 Insufficient cpu, 1 {PORTS}, 1 {wording.SELECTOR}."]  # kube's string sort
    assert KernelSession(snap).node_reasons(req.pods[0], [0, 1, 2]) == [wording.SELECTOR, PORTS, "Insufficient cpu"]


def test_a_node_that_lacks_a_resource_and_holds_the_port_counts_under_node_ports() -> None:
    """kube's NodeResourcesFit runs after NodePorts: a CPU node holding the port of a GPU pod
    is a NodePorts node, even though placer finds a node without GPUs before any filter."""
    snap = ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "cpu-a", "cpuMilli": 1000, "pods": [{"name": "h", "hostPorts": [{"hostPort": 80}]}]},
        {"name": "cpu-b", "cpuMilli": 1000},
        {"name": "gpu", "gpus": 1, "gpuModel": "A100", "cpuMilli": 1000, "labels": {"kind": "gpu"},
         "pods": [{"name": "g", "gpus": [0], "hostPorts": [{"hostPort": 80, "protocol": "UDP"}]}]},
    ]})
    req = request({"name": "p", "gpus": 1, "hostPorts": [{"hostPort": 80}]})
    got = placed_everywhere(snap, req)
    assert [u.reason for u in got.unschedulable] == [
        f"0/3 nodes are available: 1 {PORTS}, 2 Insufficient nvidia.com/gpu."]
    assert KernelSession(snap).node_reasons(req.pods[0], [0, 1, 2]) == [
        PORTS, "Insufficient nvidia.com/gpu", "Insufficient nvidia.com/gpu"]


def test_kube_scores_and_replay_honour_the_ports() -> None:
    snap = snapshot(ports("TCP//80"), nodes=2)
    req = request({"name": "p", "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]}, policy="kube")
    assert [a.node for a in placer.place(snap, req).assignments] == ["node1"]
    cluster = placer.Cluster(snap)
    result, _ = cluster.replay(list(request(
        {"name": "r", "replicas": 2, "cpuMilli": 100, "hostPorts": [{"hostPort": 81}]}).pods))
    assert sorted(a.node for a in result.assignments) == ["node0", "node1"]


def test_gang_members_with_ports_are_refused() -> None:
    snap = snapshot(ports("TCP//80"))
    with pytest.raises(InvalidInputError, match=r"pods\[0\].hostPorts: pod g-0 has host ports and is a member of gang g"):
        placer.place(snap, request({"name": "g", "replicas": 2, "gang": "g", "hostPorts": [{"hostPort": 80}]},
                                   gangs={"g": {}}))
    with pytest.raises(InvalidInputError, match=r"pods\[0\].hostPorts: pod s has host ports and asks for gpuSlots"):
        placer.place(snap, request({"name": "s", "gpuSlots": 1, "hostPorts": [{"hostPort": 80}]}))


def test_preemption_frees_the_ports_of_its_victims() -> None:
    """kube's preemption: a pod kept out only by ports evicts the lower-priority pod holding
    them (and only it: the other low pod is reprieved); a holder of higher priority stays."""
    snap = ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "n", "cpuMilli": 1000, "pods": [
            {"name": "low", "priority": -5, "cpuMilli": 100, "hostPorts": [{"hostPort": 80, "hostIP": "10.0.0.1"}]},
            {"name": "other", "priority": -5, "cpuMilli": 100}]},
        {"name": "m", "cpuMilli": 1000, "pods": [{"name": "high", "priority": 50, "hostPorts": [{"hostPort": 80}]}]},
    ]})
    for mode in ("greedy", "exact"):
        req = request({"name": "p", "priority": 10, "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]}, preemption=mode)
        got = placer.place(snap, req)
        assert [(a.node, a.nominated) for a in got.assignments] == [("n", True)]
        assert [(x.for_, x.victims) for x in got.preemptions] == [("p", ("low",))]
        assert check_placement(snap, req, got) == []
    req = request({"name": "q", "priority": 10, "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]}, preemption="greedy")
    kept_out = ClusterSnapshot.from_dict({**snap.to_dict(), "nodes": [snap.to_dict()["nodes"][1]]})
    (u,) = placer.place(kept_out, req).unschedulable
    assert u.reason == f"0/1 nodes are available: 1 {PORTS}."


def test_the_schema_refuses_what_kube_refuses() -> None:
    with pytest.raises(InvalidInputError, match=r"pods\[0\].hostPorts\[1\]: duplicate host port TCP//80"):
        request({"name": "p", "hostPorts": [{"hostPort": 80}, {"hostPort": 80, "protocol": "TCP"}]})
    with pytest.raises(InvalidInputError, match=r"pods\[0\].hostPorts\[0\].protocol"):
        request({"name": "p", "hostPorts": [{"hostPort": 80, "protocol": "HTTP"}]})
    with pytest.raises(InvalidInputError, match=r"nodes\[0\].pods\[0\].hostPorts\[0\].hostPort"):
        ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
            {"name": "n", "pods": [{"name": "a", "hostPorts": [{"hostPort": 70000}]}]}]})
    # the same port under two host IPs (as written) is no duplicate for kube's validation
    assert len(request({"name": "p", "hostPorts": [{"hostPort": 80}, {"hostPort": 80, "hostIP": "0.0.0.0"}]})
               .pods[0].host_ports) == 2


def test_the_checker_names_a_conflict() -> None:
    from placer.model import Assignment

    snap = snapshot(ports("UDP//53"))
    req = request({"name": "dns", "hostPorts": [{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.2"}]})
    bad = PlacementResult((Assignment(pod="dns", node="node0", gpus=()),), ())
    assert check_placement(snap, req, bad) == [
        f"pod dns on node node0: {PORTS} (UDP/10.0.0.2/53 conflicts with a port pod holder0 holds)"]


def test_explain_names_the_ports_cause_the_nodes_and_the_holders() -> None:
    snap = snapshot(ports("TCP//80"), ports("TCP/10.0.0.1/80"), nodes=2)
    (pending,) = explain(snap, request({"name": "web", "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]})).pending
    assert pending.cause == "ports"
    assert "node0 (holder0), node1 (holder1)" in pending.detail
    assert pending.node_reasons == {PORTS: 2}


# ----------------------------------------------------------------------------- importers


def _pod(name: str, spec: dict[str, Any], **status: Any) -> dict[str, Any]:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    if status:
        obj["status"] = status
    return obj


def _container(*port_list: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}, "ports": list(port_list), **more}


def test_import_kubernetes_request_reads_host_ports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kube's GetHostPorts after the API server's defaulting: the containers' and the
    sidecars' host ports (not a plain init container's), TCP by default, a hostNetwork pod's
    container ports; and no note about them."""
    objects = [
        _pod("web", {"containers": [_container({"containerPort": 8080, "hostPort": 80},
                                               {"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                                                "hostIP": "10.0.0.1"},
                                               {"containerPort": 9000})],
                     "initContainers": [_container({"containerPort": 1, "hostPort": 8001}),
                                        _container({"containerPort": 2, "hostPort": 8002}, restartPolicy="Always")]}),
        _pod("net", {"hostNetwork": True, "containers": [_container({"containerPort": 9100})]}),
    ]
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    req = request_from_kubernetes(path)
    by_name = {p.name: [p_.to_dict() for p_ in p.host_ports] for p in req.pods}
    assert by_name == {
        "default/web": [{"hostPort": 8002}, {"hostPort": 80}, {"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
        "default/net": [{"hostPort": 9100}],
    }
    out = tmp_path / "r.json"
    assert main(["import", "kubernetes-request", str(path), "--strict", "-o", str(out)]) == 0
    assert "host port" not in capsys.readouterr().err
    assert json.loads(out.read_text())["pods"][1]["hostPorts"] == [{"hostPort": 9100}]


def test_import_kubernetes_running_pods_hold_their_ports(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "8Gi", "pods": "110"}}}
    running = _pod("exporter", {"nodeName": "n1", "containers": [_container({"containerPort": 9100, "hostPort": 9100})]},
                   phase="Running")
    nodes, pods = tmp_path / "nodes.yaml", tmp_path / "pods.yaml"
    nodes.write_text(yaml.safe_dump_all([node]), encoding="utf-8")
    pods.write_text(yaml.safe_dump_all([running]), encoding="utf-8")
    snap = snapshot_from_kubernetes(nodes, pods)
    assert [p.to_dict() for p in snap.nodes[0].pods[0].host_ports] == [{"hostPort": 9100}]
    got = placer.place(snap, request({"name": "p", "hostPorts": [{"hostPort": 9100}]}))
    assert [u.reason for u in got.unschedulable] == [f"0/1 nodes are available: 1 {PORTS}."]


def test_import_refuses_a_bad_protocol_at_the_manifest_field(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump_all([_pod("p", {"containers": [
        _container({"containerPort": 80, "hostPort": 80, "protocol": "HTTP"})]})]), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"spec.containers\[0\].ports\[0\].protocol"):
        request_from_kubernetes(path)


# ----------------------------------------------------------------------------- property


_PORT = st.builds(
    lambda port, protocol, ip: {"hostPort": port, "protocol": protocol, **({"hostIP": ip} if ip else {})},
    st.sampled_from([80, 443, 8080]), st.sampled_from(["TCP", "UDP"]), st.sampled_from(["", "0.0.0.0", "10.0.0.1", "10.0.0.2"]),
)


def _unique(port_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple, dict[str, Any]] = {}
    for p in port_list:
        seen.setdefault((p["protocol"], p.get("hostIP", ""), p["hostPort"]), p)
    return list(seen.values())


@st.composite
def _scenario(draw) -> tuple[ClusterSnapshot, PlacementRequest]:
    n = draw(st.integers(1, 5))
    docs = [{"name": f"n{i}", "cpuMilli": 1000 * draw(st.integers(1, 4)), "memoryMiB": 4096,
             "labels": {"zone": draw(st.sampled_from(["a", "b"]))}, "pods": []} for i in range(n)]
    for doc in docs:  # some GPU nodes: a GPU pod is turned away by the rest for its GPUs, after NodePorts
        if draw(st.booleans()):
            doc.update(gpus=draw(st.integers(1, 2)), gpuModel="A100", gpuMemoryMiB=40960)
    for k in range(draw(st.integers(0, 5))):
        docs[draw(st.integers(0, n - 1))]["pods"].append(
            {"name": f"run{k}", "cpuMilli": 100, "hostPorts": _unique(draw(st.lists(_PORT, max_size=2)))})
    pods = []
    for k in range(draw(st.integers(1, 7))):
        pod: dict[str, Any] = {"name": f"p{k}", "cpuMilli": 100 * draw(st.integers(1, 20)),
                               "priority": draw(st.integers(0, 2)), "gpus": draw(st.sampled_from([0, 0, 1]))}
        wanted = _unique(draw(st.lists(_PORT, max_size=2)))
        if wanted:
            pod["hostPorts"] = wanted
        if draw(st.booleans()):
            pod["replicas"] = draw(st.integers(1, 3))
        if draw(st.integers(0, 3)) == 0:  # a static filter, which kube runs before NodePorts
            pod["nodeSelector"] = {"zone": "a"}
        pods.append(pod)
    snap = ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": docs})
    policy = draw(st.sampled_from(["first-fit", "best-fit", "spread", "random", "fgd", "dot-product"]))
    return snap, request(*pods, policy=policy)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_kernel_matches_reference(scenario) -> None:
    snap, req = scenario
    got = placer.place(snap, req)
    assert got.to_dict() == ReferenceCluster(snap).schedule(req).to_dict()
    assert check_placement(snap, req, got) == []


def test_binding_two_decisions_that_share_a_port_refuses_the_second() -> None:
    """Two place() calls each put a pod of port 80 on the one node; binding both would
    hold the port twice: the second bind is refused, and later pods see the bound one's port."""
    cluster = placer.Cluster(snapshot(nodes=1))
    first = cluster.place(request({"name": "a", "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]}).pods)
    second = cluster.place(request({"name": "b", "cpuMilli": 100, "hostPorts": [{"hostPort": 80, "hostIP": "10.0.0.1"}]}).pods)
    assert [a.node for a in second.assignments] == ["node0"]
    cluster.bind(first)
    with pytest.raises(InvalidInputError, match="didn't have free ports"):
        cluster.bind(second)
    again = cluster.place(request({"name": "c", "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]}).pods)
    assert [u.reason for u in again.unschedulable] == [f"0/1 nodes are available: 1 {PORTS}."]


def test_a_moved_pod_takes_its_ports_along() -> None:
    from placer.preemption.moves import mover_request

    snap = snapshot(ports("UDP//53"))
    node = snap.nodes[0]
    assert mover_request(node.pods[0], node).host_ports == node.pods[0].host_ports


def test_a_released_pod_frees_its_ports() -> None:
    """The ledger forgets what a pod gave back: released (bound), or a running pod released,
    the port is free again; another pod's port on the same node stays held."""
    cluster = placer.Cluster(snapshot(ports("TCP//80", "UDP/10.0.0.1/53")))
    want_80 = request({"name": "a", "cpuMilli": 100, "hostPorts": [{"hostPort": 80, "hostIP": "10.0.0.9"}]}).pods
    assert [u.reason for u in cluster.place(want_80).unschedulable] == [f"0/1 nodes are available: 1 {PORTS}."]
    cluster.release("holder0")
    cluster.bind(cluster.place(want_80))
    want_53 = request({"name": "b", "cpuMilli": 100, "hostPorts": [{"hostPort": 53, "protocol": "UDP"}]}).pods
    assert [a.node for a in cluster.place(want_53).assignments] == ["node0"]  # holder0's UDP port went with it
    again = request({"name": "c", "cpuMilli": 100, "hostPorts": [{"hostPort": 80}]}).pods
    assert cluster.place(again).unschedulable  # a holds 80 on 10.0.0.9: the wildcard conflicts
    cluster.release("a")
    assert [a.node for a in cluster.place(again).assignments] == ["node0"]
