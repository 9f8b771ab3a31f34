"""The seed's incident, replayed against a real kube-apiserver and kube-scheduler with
``placer serve --kubeconfig`` as the scheduler's extender (the configuration of
docs/extender.md).

32 A100 nodes in 4 racks of 8. A failed MPI job left 16 pods, 4 on each rack, holding 4 to
6 GPUs each while their containers have exited (a kubelet reports them Running, their
worker in back-off after exit 1); a healthy inference pod holds 2 GPUs on one more node
of every rack but ``rack-b``. A 64-GPU Megatron job (a coscheduling PodGroup of 8 pods of
8 GPUs, Kueue's ``podset-required-topology`` on the rack label) finds 104 GPUs free in
whole nodes, but no rack holds it: kube-scheduler keeps its pods pending with placer's
reason (its pods created gated and ungated together, as Kueue admits a workload);
``placer explain`` of the state listed from the API names the MPI pods;
``placer reconcile`` with the nodes' nvidia-smi output marks their GPUs idle; once they
are deleted, kube-scheduler binds the whole gang through placer's ``bind``, in rack-b.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("kubernetes")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

import kube_control_plane as kube  # noqa: E402
from serve_process import Server  # noqa: E402

from placer.cli import main  # noqa: E402
from placer.diagnostics.check import check_placement  # noqa: E402

pytestmark = pytest.mark.kube

NAMESPACE = "ml"
RACK_LABEL = "topology.kubernetes.io/rack"
RACKS = ("rack-a", "rack-b", "rack-c", "rack-d")
NODES_PER_RACK = 8
GPUS_PER_NODE = 8
PRODUCT = "NVIDIA-A100-SXM4-80GB"
# the failed MPI job: on the first 4 nodes of every rack, these many GPUs (the k-th pod's from index k % 3)
ZOMBIE_GPUS = (4, 5, 6, 4, 6, 5, 4, 6, 5, 4, 6, 5, 6, 4, 5, 6)
HEALTHY_RACKS = ("rack-a", "rack-c", "rack-d")  # a 2-GPU inference pod on the 5th node of these
GANG = "megatron-gpt"
GANG_PODS = 8
PODGROUP_API = kube.PODGROUP_API


def node_name(rack: int, slot: int) -> str:
    return f"a100-{rack * NODES_PER_RACK + slot:02d}"


def a100_node(rack: int, slot: int) -> dict[str, Any]:
    """A DGX A100 as its kubelet, NVIDIA's device plugin and GPU feature discovery label it."""
    return kube.node(node_name(rack, slot), gpus=GPUS_PER_NODE, labels={
        RACK_LABEL: RACKS[rack], "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": PRODUCT,
        "nvidia.com/gpu.count": str(GPUS_PER_NODE), "nvidia.com/gpu.memory": "81920",
    })


def gpu_pod(name: str, gpus: int, *, node: str | None = None, held: range | None = None,
            labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Pod asking for ``gpus`` whole GPUs; bound to ``node`` on GPU indices ``held`` (the
    ``placer.io/gpus`` annotation placer's Binding wrote) when given."""
    notes = dict(annotations or {})
    if held is not None:
        notes["placer.io/gpus"] = ",".join(map(str, held))
    spec: dict[str, Any] = {
        "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}, "annotations": notes}}


def kubelet_status(*, exited: bool) -> dict[str, Any]:
    """The status a kubelet reports of a pod whose one container runs, or exited with an
    error and waits to restart (phase Running either way: the pod still holds its GPUs)."""
    if exited:
        container = {"ready": False, "started": False, "restartCount": 7,
                     "state": {"waiting": {"reason": "CrashLoopBackOff",
                                           "message": "back-off 5m0s restarting failed container=main"}},
                     "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                  "startedAt": "2026-12-03T09:00:00Z",
                                                  "finishedAt": "2026-12-03T09:41:00Z"}}}
        ready = {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                 "message": "containers with unready status: [main]"}
    else:
        container = {"ready": True, "started": True, "restartCount": 0,
                     "state": {"running": {"startedAt": "2026-12-03T08:00:00Z"}}}
        ready = {"type": "Ready", "status": "True"}
    return {"status": {"phase": "Running", "startTime": "2026-12-03T08:00:00Z", "conditions": [ready],
                       "containerStatuses": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                              "imageID": "", **container}]}}


ZOMBIES = {  # pod name -> (node, GPU indices held)
    f"mpi-bert-worker-{k}": (node_name(k // 4, k % 4), range(k % 3, k % 3 + ZOMBIE_GPUS[k]))
    for k in range(len(ZOMBIE_GPUS))
}
HEALTHY = {f"llama-infer-{rack}": (node_name(RACKS.index(rack), 4), range(2)) for rack in HEALTHY_RACKS}
MPI_LABELS = {"training.kubeflow.org/job-name": "mpi-bert", "training.kubeflow.org/job-role": "worker"}


def megatron() -> list[dict[str, Any]]:
    """The Megatron job: its PodGroup, then its 8 pods (rack required, as Kueue's TAS annotates)."""
    podgroup = kube.podgroup(NAMESPACE, GANG, GANG_PODS)
    pods = [gpu_pod(f"{GANG}-{k}", GPUS_PER_NODE, labels={"scheduling.x-k8s.io/pod-group": GANG},
                    annotations={"kueue.x-k8s.io/podset-required-topology": RACK_LABEL})
            for k in range(GANG_PODS)]
    for pod in pods:
        pod["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return [podgroup, *pods]


def kubectl_list(items: list[dict[str, Any]], kind: str, api_version: str = "v1") -> dict[str, Any]:
    """What ``kubectl get <kind> -o json`` prints of these items: a List, each item with its kind."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": [{"apiVersion": api_version, "kind": kind, **item} for item in items]}


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def run_cli(*args: str) -> None:
    assert main(list(args)) == 0, args


class Incident:
    """The control plane, placer serve and the objects of the incident, with what the
    test read of them while the Megatron job was pending."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.plane = kube.ControlPlane.start(folder)
        self.server: Server | None = None
        self.pending: list[dict[str, Any]] = []  # the gang's pods, each with kube-scheduler's PodScheduled
        self.pending_files: dict[str, Path] = {}  # the objects listed meanwhile (:meth:`listed`)

    @property
    def api(self) -> kube.Api:
        return self.plane.api

    def create_cluster(self) -> None:
        api = self.api
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for rack in range(len(RACKS)):
            for slot in range(NODES_PER_RACK):
                api.create(a100_node(rack, slot))
        for pods, exited, labels in ((ZOMBIES, True, MPI_LABELS), (HEALTHY, False, {"app": "llama-infer"})):
            for name, (node, held) in pods.items():
                api.create(gpu_pod(name, len(held), node=node, held=held, labels=labels))
                api.patch(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/status", kubelet_status(exited=exited))
        kube.create_podgroups(api, megatron()[:1])

    def start_placer(self) -> Server:
        empty = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": []}
        self.server = Server(self.folder, "--kubeconfig", str(self.plane.kubeconfig), "--level",
                             f"rack={RACK_LABEL}", "--sync-interval", "0", document=empty)
        kube.wait_until(lambda: self.server.request("GET", "/readyz")[0] == 200, "placer's first lists", 30)
        return self.server

    def listed(self, name: str) -> dict[str, Path]:
        """The API's Nodes, Pods and PodGroups as ``kubectl get -o json`` writes them."""
        folder = self.folder / name
        folder.mkdir()
        api = self.api
        return {
            "nodes": write_json(folder / "nodes.json", kubectl_list(api.nodes(), "Node")),
            "pods": write_json(folder / "pods.json", kubectl_list(api.pods(), "Pod")),
            "podgroups": write_json(folder / "podgroups.json", kubectl_list(
                api.get(f"{PODGROUP_API}/podgroups")["items"], "PodGroup", "scheduling.x-k8s.io/v1alpha1")),
        }

    def stop(self) -> None:
        kube.stop_with(self.server, self.plane)


def gang_pods(api: kube.Api) -> list[dict[str, Any]]:
    return [p for p in api.pods(NAMESPACE) if p["metadata"]["name"].startswith(GANG)]


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Incident]:
    """The incident with the Megatron job pending: every gang pod's PodScheduled condition
    written by kube-scheduler, and the API's objects listed to files."""
    reason = kube.missing("etcd", "kube-apiserver", "kube-scheduler")
    if reason:
        pytest.skip(reason)
    state = Incident(tmp_path_factory.mktemp("kube-incident"))
    try:
        state.create_cluster()
        server = state.start_placer()
        state.plane.start_scheduler([kube.documented_extender(server.port)])
        for obj in megatron()[1:]:
            state.api.create(obj)
        # Kueue admits the workload whole: placer's watch has seen every pod pending when the gates go
        kube.wait_until(lambda: server.request("GET", "/healthz")[1]["pending"] == GANG_PODS,
                        "placer's watch to see the gang's pods pending", 30)
        for pod in gang_pods(state.api):
            state.api.patch(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}",
                            {"spec": {"schedulingGates": None}})

        def all_unschedulable() -> list[dict[str, Any]]:
            pods = gang_pods(state.api)
            conditions = [kube.scheduled_condition(p) for p in pods]
            done = all(c and c.get("reason") == "Unschedulable" for c in conditions)
            return pods if done else []

        state.pending = kube.wait_until(all_unschedulable, "kube-scheduler to find the gang unschedulable", 60)
        state.pending_files = state.listed("pending")
        yield state
    except BaseException:
        kube.print_logs(state.plane, state.server)
        raise
    finally:
        state.stop()


def imported(files: dict[str, Path], folder: Path) -> tuple[Path, Path]:
    """``placer import kubernetes`` and ``kubernetes-request`` of listed objects: the snapshot
    (running pods) and the request (the pending gang with its PodGroup)."""
    folder.mkdir(exist_ok=True)
    snapshot, request = folder / "cluster.json", folder / "request.json"
    run_cli("import", "kubernetes", "--nodes", str(files["nodes"]), "--pods", str(files["pods"]),
            "--level", f"rack={RACK_LABEL}", "-o", str(snapshot))
    run_cli("import", "kubernetes-request", str(files["pods"]), str(files["podgroups"]),
            "--level", f"rack={RACK_LABEL}", "-o", str(request))
    return snapshot, request


def rack_of(node: str) -> str:
    return RACKS[int(node.split("-")[1]) // NODES_PER_RACK]


def placer_reason(explained: dict[str, Any]) -> str:
    """What placer serve's filter answers for each node of a gang that does not fit, from
    ``placer explain``'s reason for the gang."""
    (gang,) = explained["pending"]
    reason = gang["reason"].removeprefix(gang["name"].join(("gang ", ": ")))
    return f"gang {gang['name']} does not fit: {reason.split('; 0/')[0]}"  # kube counts the nodes itself


@pytest.fixture(scope="module")
def explained(incident) -> dict[str, Any]:
    """``placer explain --format json`` of the state listed while the gang was pending."""
    snapshot, request = imported(incident.pending_files, incident.folder / "pending")
    out = incident.folder / "pending" / "explain.json"
    run_cli("explain", str(snapshot), str(request), "--format", "json", "-o", str(out))
    return json.loads(out.read_text())


def test_kube_scheduler_keeps_the_gang_pending_with_placers_reason(incident, explained):
    # the nodes kube's own NodeResourcesFit turns away: fewer than 8 GPUs free
    short = len(ZOMBIES) + len(HEALTHY)
    nodes = len(RACKS) * NODES_PER_RACK
    counted = sorted([f"{nodes - short} {placer_reason(explained)}", f"{short} Insufficient nvidia.com/gpu"])
    fit_error = f"0/{nodes} nodes are available: {', '.join(counted)}."
    assert "topology level rack allows to fit only 4 out of 8 pod(s)" in fit_error
    assert len(incident.pending) == GANG_PODS
    for pod in incident.pending:
        condition = kube.scheduled_condition(pod)
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
        assert condition["message"].startswith(fit_error + " "), condition["message"]
        assert not pod["spec"].get("nodeName")


def test_placer_explain_of_the_listed_state_names_the_zombies_that_keep_the_best_rack_short(explained):
    (gang,) = explained["pending"]
    assert (gang["name"], gang["cause"], gang["pods"]) == (f"{NAMESPACE}/{GANG}", "topology", GANG_PODS)
    # rack-b has the most whole nodes free (4 of its 8): freeing its 4 MPI workers' nodes makes it hold the gang
    assert gang["levels"] == [{"level": "rack", "domain": "rack-b", "fits": 4, "needed": GANG_PODS}]
    in_rack_b = sorted((len(held), node, name) for name, (node, held) in ZOMBIES.items() if rack_of(node) == "rack-b")
    assert gang["nearest"] == [{"node": node, "lacks": [f"{n} GPU(s)"], "gpuHolders": [f"{NAMESPACE}/{name} ({n} GPU(s))"]}
                               for n, node, name in in_rack_b]


def nvidia_smi_csvs(node: str, busy: range, folder: Path) -> tuple[Path, Path]:
    """What ``nvidia-smi --query-gpu=index,uuid`` and ``--query-compute-apps=pid,gpu_uuid,used_memory``
    print on ``node`` with a process on each GPU of ``busy``."""
    number = int(node.split("-")[1])
    uuids = [f"GPU-a100{number:04d}-0000-4000-8000-{gpu:012d}" for gpu in range(GPUS_PER_NODE)]
    gpus = write_text(folder / f"{node}_query-gpu.csv", "index, uuid\n" + "".join(
        f"{gpu}, {uuid}\n" for gpu, uuid in enumerate(uuids)))
    apps = "".join(f"{4000 + gpu}, {uuids[gpu]}, 61234 MiB\n" for gpu in busy) or "No running processes found\n"
    return gpus, write_text(folder / f"{node}_query-compute-apps.csv", "pid, gpu_uuid, used_gpu_memory [MiB]\n" + apps)


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_placer_reconcile_with_the_nodes_nvidia_smi_output_marks_the_zombies_gpus_idle(incident):
    folder = incident.folder / "reconcile"
    folder.mkdir()
    snapshot, _ = imported(incident.pending_files, folder)
    for name, (node, held) in {**ZOMBIES, **HEALTHY}.items():
        zombie = name in ZOMBIES  # its processes have exited; the inference pod's run
        gpus, apps = nvidia_smi_csvs(node, range(0) if zombie else held, folder)
        out = folder / f"{node}.json"
        run_cli("reconcile", str(snapshot), "--node", node, "--gpus", str(gpus), "--apps", str(apps), "-o", str(out))
        found = json.loads(out.read_text())
        assert found["zombies"] == [] and found["unverifiable"] == []
        pod = f"{NAMESPACE}/{name}"
        if zombie:
            assert found["idle"] == [{"gpu": g, "uuid": found["idle"][k]["uuid"], "pods": [pod]}
                                     for k, g in enumerate(held)]
            assert [(s["action"], s["pods"], s["gpus"]) for s in found["suggestions"]] == [
                ("ask-owner", [pod], list(held))]
        else:
            assert found["idle"] == [] and found["suggestions"] == []


@pytest.fixture(scope="module")
def recovered(incident) -> dict[str, Any]:
    """The gang's pods once the MPI job's pods are deleted and kube-scheduler bound them; the
    API's objects listed to files under ``recovered``."""
    incident.api.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=training.kubeflow.org/job-name"
                      "%3Dmpi-bert", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})

    def all_bound() -> list[dict[str, Any]]:
        pods = gang_pods(incident.api)
        return pods if all(p["spec"].get("nodeName") for p in pods) else []

    pods = kube.wait_until(all_bound, "kube-scheduler to bind the gang", 90)
    return {"pods": pods, "files": incident.listed("recovered")}


def gpus_of(pod: dict[str, Any]) -> list[int]:
    return [int(g) for g in pod["metadata"]["annotations"]["placer.io/gpus"].split(",")]


def test_once_the_zombies_are_deleted_kube_scheduler_binds_the_whole_gang_through_placer(incident, recovered):
    pods = recovered["pods"]
    assert len(pods) == GANG_PODS
    running = [p for p in incident.api.pods() if p["spec"].get("nodeName")]
    assert {p["metadata"]["name"] for p in running} == {p["metadata"]["name"] for p in pods} | set(HEALTHY)
    # placer's bind verb posted every Binding: the placer.io/gpus annotation it carries is on each pod
    held: dict[str, list[int]] = {}
    for pod in running:
        held.setdefault(pod["spec"]["nodeName"], []).extend(gpus_of(pod))
    assert all(len(gpus) == len(set(gpus)) and set(gpus) <= set(range(GPUS_PER_NODE)) for gpus in held.values()), held
    assert all(sorted(gpus_of(p)) == list(range(GPUS_PER_NODE)) for p in pods)
    # the Bindings came back through placer's watch as the pods it holds: nothing reserved, refused or waiting
    def settled() -> dict[str, Any]:
        state = incident.server.request("GET", "/healthz")[1]
        return state if state["pods"] == len(running) and state["reserved"] == 0 else {}

    state = kube.wait_until(settled, "placer's watch to see the gang bound", 30)
    assert (state["pending"], state["events_refused"], state["awaiting_node"]) == (0, 0, 0)
    _, metrics, _ = incident.server.request("GET", "/metrics")
    binds = re.search(r'placer_extender_requests_total\{code="200",verb="bind"\} (\S+)', metrics)
    assert binds is not None and float(binds.group(1)) == GANG_PODS
    # the fewest racks: after the deletions only whole free nodes hold an 8-GPU pod
    whole_free = {rack: 0 for rack in RACKS}
    busy = {node for node, _ in HEALTHY.values()}
    for rack in range(len(RACKS)):
        whole_free[RACKS[rack]] = sum(node_name(rack, slot) not in busy for slot in range(NODES_PER_RACK))
    fewest = next(k for k in range(1, len(RACKS) + 1) if sum(sorted(whole_free.values())[-k:]) >= GANG_PODS)
    holding = {rack for rack, free in whole_free.items() if free >= GANG_PODS}
    racks = {rack_of(p["spec"]["nodeName"]) for p in pods}
    assert len(racks) == fewest == 1 and racks <= holding == {"rack-b"}
    assert len({p["spec"]["nodeName"] for p in pods}) == GANG_PODS


def test_the_bound_gang_passes_placers_independent_checker(incident, recovered):
    folder = incident.folder / "recovered"
    files = recovered["files"]
    listed = json.loads(files["pods"].read_text())
    before = {**listed, "items": [p for p in listed["items"] if not p["metadata"]["name"].startswith(GANG)]}
    snapshot, _ = imported({**files, "pods": write_json(folder / "pods-before.json", before)}, folder)
    _, request = imported(incident.pending_files, folder / "pending-request")
    result = {"apiVersion": "placer/v1", "kind": "PlacementResult", "unschedulable": [], "assignments": [
        {"pod": f"{NAMESPACE}/{p['metadata']['name']}", "node": p["spec"]["nodeName"], "gpus": gpus_of(p),
         "gang": f"{NAMESPACE}/{GANG}"} for p in recovered["pods"]]}
    assert check_placement(str(snapshot), str(request), result) == []
