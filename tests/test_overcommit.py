"""Over-committed nodes and GPUs that turned unhealthy under their pods (issue #32, "the
world as it is"): the snapshot loads; kube's NodeResourcesFit answer holds beside them (a
pod that asks for none of an over-committed resource is placed there, one that asks for
some is not); ``placer report`` names them; the reference and the checker agree."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import placer
from placer.cli import main
from placer.diagnostics.report import cluster_report
from placer.exceptions import InvalidInputError
from placer.schema import request_from_dict, snapshot_from_dict
from reference import ReferenceCluster


def snapshot_doc(**node: Any) -> dict[str, Any]:
    """``over``: 4 CPUs, 8 GiB, 3 pod slots and 4 GPUs, its running pods holding 6 CPUs
    (2 over), 4 GiB, 2 slots and GPUs 0 and 1 (GPU 3 unhealthy, a share held on it);
    ``spare``: 16 free CPUs, no GPU."""
    over = {"name": "over", "gpuModel": "A100", "gpus": 4, "cpuMilli": 4000, "memoryMiB": 8192, "maxPods": 3,
            "unhealthyGpus": [3], "pods": [
                {"name": "static/etcd", "cpuMilli": 5000, "memoryMiB": 2048, "gpus": [0]},
                {"name": "ml/infer", "cpuMilli": 1000, "memoryMiB": 2048, "gpus": [1], "gpuShares": {"3": 300}},
            ]}
    over.update(node)
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot",
            "nodes": [over, {"name": "spare", "cpuMilli": 16000, "memoryMiB": 65536}]}


def request_doc(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": "best-fit", "pods": list(pods)}


def where(result: placer.PlacementResult) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {a.pod: (a.node, tuple(a.gpus)) for a in result.assignments}


def test_an_over_committed_node_loads_with_negative_free() -> None:
    snapshot = snapshot_from_dict(snapshot_doc())
    free = placer.Cluster(snapshot).node_free("over")
    assert free.cpu_milli == -2000 and free.memory_mib == 4096 and free.pods == 1
    assert free.gpu_milli == (0, 0, 1000, 0)  # GPU 3: unhealthy, its share held: 0, not -300


@pytest.mark.parametrize("field, value", [("cpuMilli", 500), ("memoryMiB", 1024), ("maxPods", 1)])
def test_each_resource_over_committed_loads(field: str, value: int) -> None:
    snapshot = snapshot_from_dict(snapshot_doc(**{field: value}))
    assert [rp.name for rp in snapshot.nodes[0].pods] == ["static/etcd", "ml/infer"]


CASES = [
    # (pod, where kube puts it): CPU is over-committed on "over"; memory and a slot are left
    ({"name": "gpu-no-cpu", "gpus": 1}, ("over", (2,))),
    ({"name": "gpu-and-cpu", "gpus": 1, "cpuMilli": 100}, None),  # only "over" has GPUs
    ({"name": "cpu-only", "cpuMilli": 1000}, ("spare", ())),
    ({"name": "memory-only", "memoryMiB": 1024}, ("over", ())),  # best-fit: the fuller node
]


@pytest.mark.parametrize("pod, expected", CASES, ids=[c[0]["name"] for c in CASES])
def test_kube_places_beside_the_over_commit(pod: dict[str, Any], expected: Any) -> None:
    snapshot, request = snapshot_from_dict(snapshot_doc()), request_from_dict(request_doc(pod))
    result = placer.place(snapshot, request)
    assert where(result) == ({pod["name"]: expected} if expected else {})
    if expected is None:
        assert result.unschedulable[0].reason == (
            "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient nvidia.com/gpu.")
    assert placer.check_placement(snapshot, request, result) == []
    assert where(ReferenceCluster(snapshot).schedule(request)) == where(result)


def test_the_checker_flags_a_pod_that_asks_for_the_over_committed_resource() -> None:
    snapshot = snapshot_from_dict(snapshot_doc())
    request = request_from_dict(request_doc({"name": "p", "gpus": 1, "cpuMilli": 100}))
    bad = {"apiVersion": "placer/v1", "kind": "PlacementResult",
           "assignments": [{"pod": "p", "node": "over", "gpus": [2]}]}
    violations = placer.check_placement(snapshot, request, bad)
    assert violations == ["node over: cpuMilli over capacity (6100 > 4000) with pod(s) p"]


def test_a_full_pod_count_refuses_every_pod() -> None:
    snapshot = snapshot_from_dict(snapshot_doc(maxPods=1))  # 2 running, 1 allowed: no pod fits
    request = request_from_dict(request_doc({"name": "tiny", "gpus": 1}))
    result = placer.place(snapshot, request)
    assert not result.assignments
    assert "1 Too many pods" in result.unschedulable[0].reason


def test_report_names_each_over_committed_resource_and_unhealthy_hold() -> None:
    snapshot = snapshot_from_dict(snapshot_doc(memoryMiB=3000, resources={"rdma/ib": {"capacity": 1, "allocatable": 1}},
                                               pods=[{"name": "a", "cpuMilli": 5000, "memoryMiB": 4000,
                                                      "gpus": [3], "resources": {"rdma/ib": 2}},
                                                     {"name": "b", "gpuShares": {"2": 200}}]))
    found = [(f.kind, f.node, f.detail) for f in cluster_report(snapshot).findings
             if f.kind in ("over-committed", "unhealthy-gpu-held")]
    tail = "no pod that asks for it is placed here"
    assert found == [
        ("over-committed", "over", f"running pods hold 5000 cpuMilli of 4000 (1000 over): {tail}"),
        ("over-committed", "over", f"running pods hold 4000 memoryMiB of 3000 (1000 over): {tail}"),
        ("over-committed", "over", f"running pods hold 2 rdma/ib of 1 (1 over): {tail}"),
        ("unhealthy-gpu-held", "over", "pod a holds unhealthy GPU(s) 3"),
    ]
    shared = cluster_report(snapshot_from_dict(snapshot_doc())).findings
    assert [f.detail for f in shared if f.kind == "unhealthy-gpu-held"] == ["pod ml/infer holds unhealthy GPU(s) 3"]


def test_evicting_the_pod_on_an_unhealthy_gpu_does_not_free_it() -> None:
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "n", "gpuModel": "A100", "gpus": 1, "unhealthyGpus": [0],
         "pods": [{"name": "old", "gpus": [0], "priority": 0}]}]}
    request = request_doc({"name": "urgent", "gpus": 1, "priority": 1000})
    result = placer.preempt(snapshot_from_dict(doc), request_from_dict(request))
    assert not result.assignments and not result.preemptions


def test_truly_malformed_holdings_stay_errors() -> None:
    twice = snapshot_doc(pods=[{"name": "a", "gpus": [0]}, {"name": "b", "gpus": [0]}])
    with pytest.raises(InvalidInputError, match=r"nodes\[0\]\.pods\[1\]\.gpus\[0\]: GPU 0 is already held"):
        snapshot_from_dict(twice)
    with pytest.raises(InvalidInputError, match=r"GPU 4 out of range|GPU index 4"):
        snapshot_from_dict(snapshot_doc(pods=[{"name": "a", "gpus": [4]}]))


def test_import_kubernetes_of_an_over_committed_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kubelet restart shrank allocatable below what the static pods hold."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "shrunk"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}
    static = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-apiserver-shrunk", "namespace": "kube-system"},
              "spec": {"nodeName": "shrunk", "containers": [
                  {"name": "c", "image": "x", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]},
              "status": {"phase": "Running"}}
    nodes, pods, out = tmp_path / "nodes.json", tmp_path / "pods.json", tmp_path / "cluster.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}), encoding="utf-8")
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [static]}), encoding="utf-8")
    assert main(["import", "kubernetes", "--nodes", str(nodes), "--pods", str(pods), "-o", str(out)]) == 0
    snapshot = placer.load_snapshot(out)
    assert placer.Cluster(snapshot).node_free("shrunk").cpu_milli == -1000
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert ("over-committed: shrunk: running pods hold 3000 cpuMilli of 2000 (1000 over)"
            in capsys.readouterr().out)
    memory_only = request_from_dict(request_doc({"name": "sidecar", "memoryMiB": 100}))
    assert where(placer.place(snapshot, memory_only)) == {"sidecar": ("shrunk", ())}


def test_explain_counts_no_shortfall_of_a_resource_the_pod_does_not_ask_for() -> None:
    from placer.diagnostics.explain import explain

    request = request_doc({"name": "two", "gpus": 2}, {"name": "two-cpu", "gpus": 2, "cpuMilli": 500})
    pending = {p.name: p for p in explain(snapshot_from_dict(snapshot_doc()), request_from_dict(request)).pending}
    assert pending["two"].nearest[0].lacks == ("1 GPU(s)",)
    assert pending["two-cpu"].nearest[0].lacks == ("1 GPU(s)", "2.5 CPU")


def test_import_kubernetes_of_gpus_gone_unhealthy_under_their_pods(tmp_path: Path) -> None:
    """The device plugin took a failed GPU out of allocatable (7 of capacity 8); the two
    4-GPU pods that hold all 8 run on: the node loads with GPU 7 unhealthy, nothing free."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dgx"},
            "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "64", "nvidia.com/gpu": "7"}}}
    trainers = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"train-{k}", "namespace": "ml"},
                 "spec": {"nodeName": "dgx", "containers": [
                     {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
                 "status": {"phase": "Running"}} for k in range(2)]
    nodes, pods, out = tmp_path / "nodes.json", tmp_path / "pods.json", tmp_path / "cluster.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}), encoding="utf-8")
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": trainers}), encoding="utf-8")
    assert main(["import", "kubernetes", "--nodes", str(nodes), "--pods", str(pods), "-o", str(out)]) == 0
    snapshot = placer.load_snapshot(out)
    (dgx,) = snapshot.nodes
    assert (dgx.hardware.gpus, dgx.unhealthy_gpus) == (8, (7,))
    assert [rp.gpus for rp in dgx.pods] == [(3, 4, 5, 6), (0, 1, 2, 7)]
    assert placer.Cluster(snapshot).node_free("dgx").gpu_milli == (0,) * 8
    held = [f.detail for f in cluster_report(snapshot).findings if f.kind == "unhealthy-gpu-held"]
    assert held == ["pod ml/train-1 holds unhealthy GPU(s) 7"]
    result = placer.place(snapshot, request_from_dict(request_doc({"name": "one", "gpus": 1})))
    assert result.unschedulable[0].reason == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_report_nodes_marks_the_over_committed_node() -> None:
    from placer.diagnostics.report import node_rows

    rows = {row.name: row.state for row in node_rows(snapshot_from_dict(snapshot_doc()))}
    assert rows == {"over": "unhealthy-gpus,over-committed", "spare": "ready"}


def test_slots_beyond_the_healthy_gpus_fall_on_the_unhealthy_one() -> None:
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "ts", "gpuModel": "A100", "gpus": 2, "gpuSharing": {"strategy": "time-slicing", "replicas": 4},
         "unhealthyGpus": [1], "pods": [{"name": "many", "unknownGpuSlots": 6}]}]}
    snapshot = snapshot_from_dict(doc)
    assert snapshot.nodes[0].pods[0].gpu_slots == {0: 4, 1: 2}
    assert placer.Cluster(snapshot).node_free("ts").gpu_milli == (0, 0)
    assert [f.detail for f in cluster_report(snapshot).findings if f.kind == "unhealthy-gpu-held"] == [
        "pod many holds unhealthy GPU(s) 1"]
