"""The Kubernetes importers and what kube-scheduler reads of an object beyond GPUs: every
resource NodeResourcesFit compares (ephemeral-storage, huge pages, extended), the taints of
not-ready nodes, and the scheduling fields of pods (affinity, spread, tolerations, nodeName,
labels) carried over as written.

Objects are written in the shape of ``kubectl get -o json`` output; the expectations follow
kube-scheduler v1.36 (``noderesources/fit.go``, component-helpers ``resource.PodRequests``)
and the node lifecycle controller (``nodelifecycle``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import placer
from placer.adapters.kubernetes.snapshot import import_kubernetes, node_from_object, running_pod_from_object
from placer.adapters.kubernetes.workloads import import_workloads
from placer.exceptions import InvalidInputError

GI = 1 << 30
MI = 1 << 20


def _node(name: str, allocatable: dict[str, str], conditions: list[dict[str, str]] | None = None,
          taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {}, "status": {"capacity": dict(allocatable), "allocatable": dict(allocatable)},
    }
    if conditions is not None:
        node["status"]["conditions"] = conditions
    if taints is not None:
        node["spec"]["taints"] = taints
    return node


def _pod(name: str, spec: dict[str, Any], labels: dict[str, str] | None = None,
         namespace: str = "team-a", node: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }
    if labels is not None:
        pod["metadata"]["labels"] = labels
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod


def _container(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
               **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources, **extra}


def _write(path: Path, *objects: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}), encoding="utf-8")
    return path


def _request_pod(tmp_path: Path, spec: dict[str, Any], **kw: Any) -> dict[str, Any]:
    (entry,) = import_workloads(_write(tmp_path / "pods.json", _pod("p", spec, **kw))).document["pods"]
    return entry


BIG_NODE = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi",
            "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"}


# ----------------------------------------------------------------------------- every resource


def test_node_resources_carry_ephemeral_storage_and_hugepages_in_bytes():
    node = node_from_object(_node("n0", {**BIG_NODE, "ephemeral-storage": "95500736762", "example.com/fpga": "2"}),
                            "nodes.json")
    assert node["cpuMilli"] == 32000 and node["maxPods"] == 110
    assert node["resources"] == {
        "ephemeral-storage": {"capacity": 95500736762, "allocatable": 95500736762},
        "hugepages-2Mi": {"capacity": GI, "allocatable": GI},
        "hugepages-1Gi": {"capacity": 0, "allocatable": 0},
        "example.com/fpga": {"capacity": 2, "allocatable": 2},
    }


def test_a_fractional_byte_quantity_rounds_up_as_quantity_value():
    node = node_from_object(_node("n0", {"ephemeral-storage": "1500m"}), "nodes.json")
    assert node["resources"]["ephemeral-storage"] == {"capacity": 2, "allocatable": 2}


def test_pending_pod_requests_every_resource(tmp_path):
    spec = {"containers": [
        _container("a", requests={"cpu": "1", "ephemeral-storage": "10Gi"},
                   limits={"hugepages-2Mi": "4Mi", "memory": "1Gi"}),
        _container("b", limits={"ephemeral-storage": "1Gi", "hugepages-2Mi": "2Mi"}),
    ]}
    entry = _request_pod(tmp_path, spec)
    assert entry["cpuMilli"] == 1000 and entry["memoryMiB"] == 1024
    assert entry["resources"] == {"ephemeral-storage": 11 * GI, "hugepages-2Mi": 6 * MI}


def test_init_containers_sidecars_and_overhead_for_every_resource(tmp_path):
    # PodRequests: each init container runs with the sidecars started before it; the
    # sidecars then run beside the containers; overhead is added last.
    spec = {
        "initContainers": [
            _container("sidecar", requests={"ephemeral-storage": "1Gi"}, limits={"hugepages-2Mi": "2Mi"},
                       restartPolicy="Always"),
            _container("init-big", requests={"ephemeral-storage": "8Gi"}, limits={"hugepages-2Mi": "10Mi"}),
        ],
        "containers": [_container("main", requests={"ephemeral-storage": "2Gi"}, limits={"hugepages-2Mi": "4Mi"})],
        "overhead": {"ephemeral-storage": "512Mi"},
    }
    entry = _request_pod(tmp_path, spec)
    # ephemeral: max(2 + 1 sidecar, 1 + 8) + 0.5 = 9.5 Gi; hugepages: max(4 + 2, 2 + 10) = 12 Mi
    assert entry["resources"] == {"ephemeral-storage": 9 * GI + 512 * MI, "hugepages-2Mi": 12 * MI}


def test_a_sidecar_started_after_an_init_container_does_not_add_to_its_peak(tmp_path):
    spec = {
        "initContainers": [
            _container("init", requests={"ephemeral-storage": "5Gi"}),
            _container("sidecar", requests={"ephemeral-storage": "3Gi"}, restartPolicy="Always"),
        ],
        "containers": [_container("main", requests={"ephemeral-storage": "1Gi"})],
    }
    assert _request_pod(tmp_path, spec)["resources"] == {"ephemeral-storage": 5 * GI}  # max(1 + 3, 5, 3)


def test_pod_level_resources_take_the_place_of_the_containers_sum(tmp_path):
    # PodLevelResources (beta, on by default since 1.34): spec.resources names cpu, memory
    # and huge pages for the whole pod; with limits only, the API server defaults a missing
    # cpu/memory request to the containers' effective request, else to the pod's limit.
    containers = [_container("a", requests={"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}),
                  _container("b", requests={"cpu": "1"})]
    entry = _request_pod(tmp_path, {"containers": containers, "resources": {"requests": {"cpu": "3"}}})
    assert entry["cpuMilli"] == 3000 and entry["memoryMiB"] == 1024  # memory stays the containers'
    assert entry["resources"] == {"ephemeral-storage": GI}  # not a pod-level resource
    limits = {"limits": {"cpu": "8", "memory": "4Gi", "hugepages-2Mi": "8Mi"}}
    entry = _request_pod(tmp_path, {"containers": [_container("a", requests={"cpu": "1"})], "resources": limits})
    assert entry["cpuMilli"] == 1000 and entry["memoryMiB"] == 4096 and entry["resources"] == {"hugepages-2Mi": 8 * MI}
    with pytest.raises(InvalidInputError) as info:
        _request_pod(tmp_path, {"resources": {"requests": {"ephemeral-storage": "1Gi"}}})
    assert info.value.where.endswith("items[0].spec.resources.requests.ephemeral-storage")


def _sidecar(name: str, gib: int) -> dict[str, Any]:
    return _container(name, requests={"ephemeral-storage": f"{gib}Gi"}, restartPolicy="Always")


def _init(name: str, gib: int) -> dict[str, Any]:
    return _container(name, requests={"ephemeral-storage": f"{gib}Gi"})


@pytest.mark.parametrize(
    ("init_containers", "main_gib", "expected_gib"),
    [
        # rows of component-helpers' TestPodResourceRequests, in ephemeral-storage
        ([_sidecar("r1", 1)], 1, 2),  # restartable init container: beside the containers
        ([_init("i1", 5), _sidecar("r1", 1), _sidecar("r2", 2), _init("i2", 5), _sidecar("r3", 3)], 1, 8),
        ([_sidecar("r1", 10), _init("i1", 200)], 100, 210),
        ([_init("i1", 3)], 2, 3),  # the larger init container
    ],
)
def test_effective_requests_follow_kube_pod_requests(tmp_path, init_containers, main_gib, expected_gib):
    spec = {"initContainers": init_containers, "containers": [_init("main", main_gib)]}
    assert _request_pod(tmp_path, spec)["resources"] == {"ephemeral-storage": expected_gib * GI}


def test_running_pods_hold_every_resource(tmp_path):
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE))
    spec = {"containers": [_container("main", requests={"ephemeral-storage": "3Gi"},
                                      limits={"hugepages-2Mi": "8Mi"})]}
    pods = _write(tmp_path / "running.json", _pod("r", spec, node="n0"))
    (pod,) = import_kubernetes(nodes, pods).document["nodes"][0]["pods"]
    assert pod["resources"] == {"ephemeral-storage": 3 * GI, "hugepages-2Mi": 8 * MI}


def test_hugepages_requests_must_equal_limits(tmp_path):
    spec = {"containers": [_container("main", requests={"hugepages-2Mi": "2Mi"}, limits={"hugepages-2Mi": "4Mi"})]}
    with pytest.raises(InvalidInputError) as info:
        _request_pod(tmp_path, spec)
    assert info.value.where.endswith("items[0].spec.containers[0].resources.requests.hugepages-2Mi")
    assert "must equal limits" in info.value.what


def test_a_resource_kubernetes_refuses_in_a_container_is_an_error(tmp_path):
    spec = {"containers": [_container("main", requests={"gpu": "1"})]}
    with pytest.raises(InvalidInputError) as info:
        _request_pod(tmp_path, spec)
    assert info.value.where.endswith("items[0].spec.containers[0].resources.requests.gpu")
    assert "ephemeral-storage" in info.value.what and "'gpu'" in info.value.what


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"ephemeral-storage": "10Gi"}, "Insufficient ephemeral-storage"),
        ({"hugepages-2Mi": "4Mi", "memory": "1Gi"}, "Insufficient hugepages-2Mi"),
    ],
)
def test_a_pod_kube_fit_rejects_stays_unschedulable_after_import(tmp_path, limits, reason):
    # n0 lacks room for the pod (8Gi of storage, 2Mi of huge pages left), n1 lists neither
    # resource: kube's fit takes what a node does not list as 0 allocatable.
    small = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "8Gi", "hugepages-2Mi": "2Mi"}
    nodes = _write(tmp_path / "nodes.json", _node("n0", small), _node("n1", {"cpu": "8", "memory": "32Gi"}))
    snapshot = import_kubernetes(nodes).snapshot
    pending = _write(tmp_path / "pods.json", _pod("p", {"containers": [_container("main", limits=limits)]}))
    result = placer.place(snapshot, import_workloads(pending).request)
    assert not result.assignments
    (unschedulable,) = result.unschedulable
    assert unschedulable.pod == "team-a/p" and reason in unschedulable.reason
    # Room enough: the same pod fits n0 once the node has it.
    roomy = _write(tmp_path / "roomy.json", _node("n0", BIG_NODE))
    assert [a.node for a in placer.place(import_kubernetes(roomy).snapshot, import_workloads(pending).request)
            .assignments] == ["n0"]


# ----------------------------------------------------------------------------- not-ready nodes

READY_TRUE = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize(
    ("status", "key"),
    [("False", "node.kubernetes.io/not-ready"), ("Unknown", "node.kubernetes.io/unreachable")],
)
def test_a_not_ready_node_gets_the_controller_taints_not_a_cordon(tmp_path, status, key):
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE, [{"type": "Ready", "status": status}]))
    imported = import_kubernetes(nodes)
    (node,) = imported.document["nodes"]
    assert "unschedulable" not in node
    assert node["taints"] == [{"key": key, "effect": "NoSchedule"}, {"key": key, "effect": "NoExecute"}]
    assert imported.notes == (
        f"{nodes}: items[0].status.conditions: node 'n0': Ready is {status}; added the node lifecycle "
        f"controller's taint(s) {key}:NoSchedule, {key}:NoExecute",
    )


def test_a_taint_the_controller_already_put_is_kept_and_not_added_twice(tmp_path):
    taints = [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-01-02T03:04:05Z"}]
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE, [{"type": "Ready", "status": "False"}], taints))
    imported = import_kubernetes(nodes)
    assert imported.document["nodes"][0]["taints"] == [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-01-02T03:04:05Z"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    ]
    assert imported.notes[0].endswith("taint(s) node.kubernetes.io/not-ready:NoSchedule")
    both = taints + [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    again = import_kubernetes(_write(tmp_path / "tainted.json",
                                     _node("n0", BIG_NODE, [{"type": "Ready", "status": "False"}], both)))
    assert again.notes == () and len(again.document["nodes"][0]["taints"]) == 2


def test_pressure_conditions_get_their_no_schedule_taints(tmp_path):
    conditions = [READY_TRUE, {"type": "DiskPressure", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]
    imported = import_kubernetes(_write(tmp_path / "nodes.json", _node("n0", BIG_NODE, conditions)))
    assert imported.document["nodes"][0]["taints"] == [{"key": "node.kubernetes.io/disk-pressure",
                                                        "effect": "NoSchedule"}]
    assert "DiskPressure is True" in imported.notes[0]


def test_a_ready_node_and_a_node_without_conditions_get_no_taint(tmp_path):
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE, [READY_TRUE]), _node("n1", BIG_NODE))
    imported = import_kubernetes(nodes)
    assert imported.notes == () and all("taints" not in n for n in imported.document["nodes"])


def test_a_pod_tolerating_the_unreachable_taint_may_go_to_the_node(tmp_path):
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE, [{"type": "Ready", "status": "Unknown"}]))
    snapshot = import_kubernetes(nodes).snapshot
    tolerant = {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}
    pending = _write(tmp_path / "pods.json", _pod("tolerant", tolerant), _pod("plain", {}))
    result = placer.place(snapshot, import_workloads(pending).request)
    assert [(a.pod, a.node) for a in result.assignments] == [("team-a/tolerant", "n0")]
    assert [u.pod for u in result.unschedulable] == ["team-a/plain"]


# ----------------------------------------------------------------------------- scheduling fields

AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                                   "values": ["NVIDIA-H100-80GB-HBM3"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}],
    },
    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}]},
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["trainer"]}]},
             "topologyKey": "kubernetes.io/hostname", "namespaces": ["team-b"]}],
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                               "namespaceSelector": {}, "topologyKey": "kubernetes.io/hostname"}}],
    },
}
SPREAD = [
    {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
     "labelSelector": {"matchLabels": {"app": "trainer"}}, "minDomains": 2, "nodeAffinityPolicy": "Ignore",
     "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["pod-template-hash"]},
    {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"},
]
TOLERATIONS = [
    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
    {"operator": "Exists"},
]


def test_a_pending_pod_keeps_its_scheduling_rules_as_written(tmp_path):
    spec = {"affinity": AFFINITY, "topologySpreadConstraints": SPREAD, "tolerations": TOLERATIONS}
    imported = import_workloads(_write(tmp_path / "pods.json", _pod("p", spec, labels={"app": "trainer"})))
    (entry,) = imported.document["pods"]
    assert entry["affinity"] == AFFINITY and entry["topologySpreadConstraints"] == SPREAD
    assert entry["labels"] == {"app": "trainer"}
    assert entry["tolerations"] == [
        {"key": "node.kubernetes.io/unreachable", "operator": "Equal", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ]
    assert imported.notes == ()
    (pod,) = imported.request.pods
    assert pod.affinity is not None and pod.affinity.to_dict() == AFFINITY
    assert [c.to_dict() for c in pod.topology_spread_constraints] == SPREAD
    assert pod.tolerations[0].toleration_seconds == 300 and pod.labels == {"app": "trainer"}


def test_a_job_template_keeps_its_rules_and_gets_the_controller_labels(tmp_path):
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "8f0c1d2e-aaaa-bbbb-cccc-0123456789ab"},
        "spec": {"parallelism": 4, "template": {
            "metadata": {"labels": {"app": "trainer", "job-name": "kept-as-written"}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}], "affinity": AFFINITY,
                     "topologySpreadConstraints": SPREAD, "restartPolicy": "Never"},
        }},
    }
    (entry,) = import_workloads(_write(tmp_path / "job.json", job)).document["pods"]
    assert entry["replicas"] == 4 and entry["affinity"] == AFFINITY and entry["topologySpreadConstraints"] == SPREAD
    assert entry["labels"] == {
        "app": "trainer",
        "job-name": "kept-as-written",  # the API server adds a label only when the template lacks it
        "batch.kubernetes.io/job-name": "train",
        "batch.kubernetes.io/controller-uid": "8f0c1d2e-aaaa-bbbb-cccc-0123456789ab",
        "controller-uid": "8f0c1d2e-aaaa-bbbb-cccc-0123456789ab",
    }
    job["spec"]["manualSelector"] = True
    (manual,) = import_workloads(_write(tmp_path / "manual.json", job)).document["pods"]
    assert manual["labels"] == {"app": "trainer", "job-name": "kept-as-written"}


def test_jobset_pods_carry_the_jobset_labels(tmp_path):
    template = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js", "namespace": "ml"},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2,
                                     "template": {"spec": {"parallelism": 2, "template": template}}}]},
    }
    (entry,) = import_workloads(_write(tmp_path / "js.json", jobset)).document["pods"]
    assert entry["labels"] == {"jobset.sigs.k8s.io/jobset-name": "js",
                               "jobset.sigs.k8s.io/replicatedjob-name": "workers"}


def test_a_template_with_node_name_keeps_it(tmp_path):
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pinned"},
        "spec": {"replicas": 1, "template": {"spec": {"nodeName": "n1", "containers": [{"name": "c"}]}}},
    }
    imported = import_workloads(_write(tmp_path / "d.json", deployment))
    assert imported.document["pods"][0]["nodeName"] == "n1" and imported.notes == ()
    assert imported.request.pods[0].node_name == "n1"
    # A bare Pod bound to a node is running, not pending: taken only with all_phases.
    bound = _write(tmp_path / "bound.json", _pod("b", {"nodeName": "n1"}))
    assert import_workloads(bound, all_phases=True).document["pods"][0]["nodeName"] == "n1"


@pytest.mark.parametrize(
    ("toleration", "field", "what"),
    [
        ({"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}, "tolerationSeconds", "needs effect NoExecute"),
        ({"key": "k", "effect": "NoExecute", "tolerationSeconds": "5"}, "tolerationSeconds", "integer"),
    ],
)
def test_toleration_seconds_kube_refuses_is_an_error(tmp_path, toleration, field, what):
    with pytest.raises(InvalidInputError) as info:
        _request_pod(tmp_path, {"tolerations": [toleration]})
    assert info.value.where.endswith(f"items[0].spec.tolerations[0].{field}") and what in info.value.what


def test_a_malformed_affinity_names_the_pod_and_the_placer_path(tmp_path):
    bad = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}
    with pytest.raises(InvalidInputError) as info:
        _request_pod(tmp_path, {"affinity": bad})
    assert info.value.where.endswith("items[0].spec.affinity")
    assert "placer/v1 pods[0].affinity.nodeAffinity" in info.value.what and "operator" in info.value.what
    with pytest.raises(InvalidInputError) as info:
        _request_pod(tmp_path, {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone",
                                                               "whenUnsatisfiable": "DoNotSchedule"}]})
    assert info.value.where.endswith("items[0].spec.topologySpreadConstraints")


def test_a_malformed_running_pod_affinity_is_reported_at_the_pod_field(tmp_path):
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE))
    running = _pod("r", {"affinity": {"podAntiAffinity": {"required": []}}}, node="n0")
    with pytest.raises(InvalidInputError) as info:
        import_kubernetes(nodes, _write(tmp_path / "running.json", running))
    assert info.value.where == f"{tmp_path / 'running.json'}: items[0].spec.affinity"
    assert "placer/v1 nodes[0].pods[0].affinity.podAntiAffinity" in info.value.what


def test_running_pods_keep_labels_affinity_and_their_namespace(tmp_path):
    nodes = _write(tmp_path / "nodes.json", _node("n0", BIG_NODE))
    anti = {"podAntiAffinity": AFFINITY["podAntiAffinity"]}
    running = _pod("r", {"affinity": anti}, labels={"app": "trainer"}, namespace="team-b", node="n0")
    imported = import_kubernetes(nodes, _write(tmp_path / "running.json", running))
    (pod,) = imported.document["nodes"][0]["pods"]
    assert pod["name"] == "team-b/r" and pod["labels"] == {"app": "trainer"} and pod["affinity"] == anti
    (held,) = imported.snapshot.nodes[0].pods
    assert held.affinity is not None and held.affinity.to_dict() == anti
    assert running_pod_from_object(running, "watch")["affinity"] == anti  # the live path reads the same


def test_node_taints_keep_time_added_from_yaml(tmp_path):
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n0\nspec:\n  taints:\n"
        "  - key: node.kubernetes.io/unreachable\n    effect: NoExecute\n    timeAdded: 2026-01-02T03:04:05Z\n"
        "status:\n  allocatable:\n    cpu: '8'\n",
        encoding="utf-8",
    )
    imported = import_kubernetes(path)
    (taint,) = imported.document["nodes"][0]["taints"]
    assert taint["key"] == "node.kubernetes.io/unreachable" and taint["timeAdded"].startswith("2026-01-02T03:04:05")
    assert imported.snapshot.nodes[0].taints[0].time_added == taint["timeAdded"]
