"""Kubernetes importers: quantities, nodes + pods -> ClusterSnapshot, manifests -> request.

Inputs are the collected fixtures in tests/data/k8s (byte-exact copies, each with its
``.src`` sidecar) and the ``handmade-*`` files written in the style of kubectl output.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placer
from placer.adapters.kubernetes.quantities import count, cpu_milli, memory_mib, parse_quantity
from placer.adapters.kubernetes.snapshot import import_kubernetes, snapshot_from_kubernetes
from placer.adapters.kubernetes.workloads import WorkloadImport, import_workloads, request_from_kubernetes
from placer.cli import main
from placer.exceptions import InvalidInputError
from mutations import mutated

DATA = Path(__file__).parent / "data" / "k8s"

NODES = DATA / "handmade-nodes.json"
PODS = DATA / "handmade-pods.json"
GB200 = DATA / "handmade-nodes-gb200.yaml"
WORKLOADS = DATA / "handmade-workloads.yaml"

POD = DATA / "pod-gpu-limit-toleration_k8s-device-plugin-readme.yaml"
KUEUE_JOB = DATA / "kueue-job-podset-required-topology_kueue-site-example.yaml"
KUEUE_CONFIG = DATA / "kueue-topology-resourceflavor-clusterqueue_kueue-site-example.yaml"
JOBSET = DATA / "jobset-pod-gpu-request_gke-a4x-gb200_cluster-toolkit.yaml"
PODGROUP = DATA / "podgroup-scheduling.x-k8s.io-v1alpha1_scheduler-plugins-install.yaml"
PODGROUP_STATUS = DATA / "podgroup-scheduling.x-k8s.io-with-status_scheduler-plugins-install.yaml"
DEPLOYMENT = DATA / "deployment-podgroup-label_scheduler-plugins-install.yaml"
VOLCANO_JOB = DATA / "volcano-job-networktopology_volcano-website.yaml"
VOLCANO_PG = DATA / "volcano-podgroup-with-status_volcano-website.yaml"
HYPERNODE_LEAF = DATA / "volcano-hypernode-leaf-tier1_volcano-website.yaml"
HYPERNODE_UPPER = DATA / "volcano-hypernode-nonleaf-tier2-3_volcano-website.yaml"
TFTPL_A3 = DATA / "kueue-topology_gke-a3-ultra-h200_cluster-toolkit.yaml.tftpl"
TFTPL_A4X = DATA / "kueue-topology_gke-a4x-gb200_cluster-toolkit.yaml.tftpl"
GFD_ELIDED = DATA / "kubectl-get-nodes-yaml-gfd-labels_a100-dgx2h_gfd-readme_elided.yaml"
PODMAN = DATA / "node-status-capacity-allocatable-nvidia.com-gpu_podman-desktop-7778.yaml"
MIG_CAPACITY = DATA / "kubectl-describe-node-capacity_h100-mig-mixed_kubectl-view-allocations-258_fragment.txt"
MIG_LABELS = DATA / "node-labels-gfd-mig-mixed_a100-pcie-40gb_network-operator-211_fragment.yaml"
H100_LABELS = DATA / "kubectl-describe-node-labels_h100-xe9680-gfd_k8s-device-plugin-1501_fragment.txt"

GKE_LEVELS = [
    ("block", "cloud.google.com/gce-topology-block"),
    ("subblock", "cloud.google.com/gce-topology-subblock"),
]
EXAMPLE_LEVELS = [("block", "topology.example.com/block"), "rack=topology.example.com/rack"]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DAEMONSET_OWNER = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm-exporter",
                                        "uid": "7d1c", "controller": True}]}
PAUSE_LABELS = {"app": "pause", "scheduling.x-k8s.io/pod-group": "pg1"}
EXPECTED_KINDS = "expected Pod, Job, JobSet, Deployment, StatefulSet, ReplicaSet, PodGroup, Volcano Job"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _node_manifest(name: str, labels=None, status=None) -> dict:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    if labels is not None:
        node["metadata"]["labels"] = labels
    if status is not None:
        node["status"] = status
    return node


def _write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
    return path


def _by_name(snapshot_doc: dict) -> dict:
    return {n["name"]: n for n in snapshot_doc["nodes"]}


def _gang_sizes(request_doc: dict) -> dict:
    req = placer.PlacementRequest.from_dict(request_doc)
    sizes: dict = {}
    for p in req.pods:
        if p.gang is not None:
            sizes[p.gang] = sizes.get(p.gang, 0) + 1
    return sizes


# ----------------------------------------------------------------------------- data files


def test_every_fixture_has_its_source_sidecar():
    fixtures = [p for p in DATA.iterdir() if not p.name.startswith("handmade-") and not p.name.endswith(".src")]
    assert len(fixtures) == 18
    for p in fixtures:
        assert (DATA / (p.name + ".src")).read_text(encoding="utf-8").strip(), p.name


# ----------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    "value, expected",
    [
        ("8443296967", Fraction(8443296967)),
        ("32777408Ki", Fraction(32777408 * 1024)),
        ("500m", Fraction(1, 2)),
        (0.5, Fraction(1, 2)),
        ("0.5", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        (1.5, Fraction(3, 2)),
        ("2e3", Fraction(2000)),
        ("2E3", Fraction(2000)),
        ("1e-3", Fraction(1, 1000)),
        ("1E", Fraction(10**18)),
        ("1Ei", Fraction(2**60)),
        ("4Gi", Fraction(4 * 2**30)),
        ("1G", Fraction(10**9)),
        ("1k", Fraction(1000)),
        ("100u", Fraction(1, 10**4)),
        ("5n", Fraction(5, 10**9)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("+3", Fraction(3)),
        ("-2", Fraction(-2)),
        (16, Fraction(16)),
        (1000.0, Fraction(1000)),
    ],
)
def test_parse_quantity_table(value, expected):
    assert parse_quantity(value, "x") == expected


@pytest.mark.parametrize(
    "value",
    ["12Q", "", " 1", "1 ", "1e", "Ki", "1.2.3", "--1", "1KI", "1mi", "0x10", "1e999", "٣", "1" * 41,
     True, None, [1], {"a": 1}, float("nan"), float("inf"), 2**63, "9300000000000000000"],
)
def test_parse_quantity_rejects(value):
    with pytest.raises(InvalidInputError) as err:
        parse_quantity(value, "nodes.json: items[0].status.allocatable.cpu")
    assert err.value.where == "nodes.json: items[0].status.allocatable.cpu"


def test_unit_helpers():
    assert memory_mib("8443296967") == 8052
    assert memory_mib("32777408Ki") == 32009
    assert memory_mib("200Mi") == 200
    assert memory_mib("1G") == 953 and memory_mib("1G", round_up=True) == 954
    assert memory_mib("2113577636Ki") == 2064040
    assert cpu_milli("500m") == 500
    assert cpu_milli("1.5") == 1500
    assert cpu_milli(0.5) == 500
    assert cpu_milli("2e3") == 2_000_000
    assert cpu_milli("16") == 16000
    assert cpu_milli("100u") == 1  # rounded up like Kubernetes' MilliValue
    assert count("8") == 8 and count(4) == 4 and count("1k") == 1000 and count("2e1") == 20
    for bad in ("1.5", "500m", "-1"):
        with pytest.raises(InvalidInputError) as err:
            count(bad, "w")
        assert err.value.where == "w"
    with pytest.raises(InvalidInputError):
        cpu_milli("-1", "w")
    with pytest.raises(InvalidInputError):
        memory_mib("12Q", "w")


# ----------------------------------------------------------------------------- snapshot


@pytest.fixture(scope="module")
def snap_doc():
    return snapshot_from_kubernetes(NODES, PODS, EXAMPLE_LEVELS).to_dict()


def test_handmade_nodes_hardware(snap_doc):
    assert snap_doc["apiVersion"] == "placer/v1" and snap_doc["kind"] == "ClusterSnapshot"
    assert snap_doc["topologyLevels"] == ["block", "rack"]
    nodes = _by_name(snap_doc)
    assert list(nodes) == ["dgx-h100-0", "dgx-h100-1", "dgx-h100-2", "a100-mig-0", "cpu-0"]
    h = nodes["dgx-h100-0"]
    assert h["gpus"] == 8 and h["gpuModel"] == "NVIDIA-H100-80GB-HBM3" and h["gpuMemoryMiB"] == 81559
    assert h["cpuMilli"] == 223900 and h["memoryMiB"] == 2064040 and h["maxPods"] == 110
    assert h["topology"] == {"block": "b1", "rack": "r07"}
    assert h["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert h["labels"]["nvidia.com/cuda.driver.rev"] == "08"
    assert "unschedulable" not in h
    rdma = nodes["dgx-h100-1"]["resources"]["rdma/rdma_shared_device_a"]
    assert rdma == {"capacity": 1000, "allocatable": 1000}  # "1k"
    # Ready is Unknown: not cordoned, but tainted as the node lifecycle controller does
    assert "unschedulable" not in nodes["dgx-h100-2"]
    assert nodes["dgx-h100-2"]["taints"][1:] == [
        {"key": "node.kubernetes.io/unreachable", "effect": effect} for effect in ("NoSchedule", "NoExecute")
    ]
    mig = nodes["a100-mig-0"]
    assert mig["gpus"] == 1 and mig["gpuModel"] == "A100-PCIE-40GB" and mig["gpuMemoryMiB"] == 40536
    # The MIG resources became instances (laid out largest first); nvidia.com/gpu stays.
    assert mig["resources"] == {
        "nvidia.com/gpu": {"capacity": 0, "allocatable": 0},
        "ephemeral-storage": {"capacity": 942527037440, "allocatable": 942527037440},
        "hugepages-1Gi": {"capacity": 0, "allocatable": 0},
        "hugepages-2Mi": {"capacity": 0, "allocatable": 0},
    }
    assert mig["mig"] == {"gpus": "all", "mode": "static"}
    assert mig["migInstances"] == [
        {"gpu": 0, "profile": "2g.10gb", "start": 0},
        *({"gpu": 0, "profile": "1g.5gb", "start": s} for s in (2, 3, 4, 5)),
    ]
    assert mig["cpuMilli"] == 63500 and mig["memoryMiB"] == 527385544 // 1024
    cpu = nodes["cpu-0"]
    assert cpu["unschedulable"] is True and "gpus" not in cpu and "topology" not in cpu
    assert cpu["taints"] == [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2025-06-08T16:20:05Z"}
    ]


def test_handmade_running_pods(snap_doc):
    nodes = _by_name(snap_doc)
    pods = {p["name"]: p for n in snap_doc["nodes"] for p in n.get("pods", [])}
    assert set(pods) == {
        "kube-system/nvidia-device-plugin-daemonset-7xk2p",
        "team-a/train-0",
        "team-b/infer-1",
        "team-e/rdma-0",
        "team-c/mig-infer-0",
    }  # Succeeded and unbound pods are not running
    assert pods["team-a/train-0"] == {
        "name": "team-a/train-0", "gpus": [0, 1, 2, 3], "cpuMilli": 16000, "memoryMiB": 131072, "priority": 1000,
        "startTime": 1749546002.0,  # 2025-06-10T09:00:02Z: the document gives epoch seconds
    }
    # max(4 + 0.5 sidecar, 0.5 + 20 init) + 0.25 overhead; memory 16Gi + 128Mi + 120Mi
    assert pods["team-b/infer-1"] == {
        "name": "team-b/infer-1", "unknownGpus": 2, "cpuMilli": 20750, "memoryMiB": 16632,
        "startTime": 1749546002.0,
    }
    assert pods["team-e/rdma-0"]["unknownGpus"] == 8
    assert pods["team-e/rdma-0"]["resources"] == {"rdma/rdma_shared_device_a": 1}
    assert pods["team-c/mig-infer-0"]["mig"] == [{"gpu": 0, "profile": "1g.5gb", "start": 2}]
    assert "resources" not in pods["team-c/mig-infer-0"]
    assert "gpus" not in pods["team-c/mig-infer-0"] and "unknownGpus" not in pods["team-c/mig-infer-0"]
    first = nodes["dgx-h100-0"]["pods"][0]
    assert first == {
        "name": "kube-system/nvidia-device-plugin-daemonset-7xk2p", "cpuMilli": 50, "memoryMiB": 64,
        "priority": 2000001000, "startTime": 1749546002.0, "preemptible": False,
    }


def test_handmade_snapshot_loads_and_places(snap_doc):
    snap = placer.ClusterSnapshot.from_dict(snap_doc)
    node = {n.name: n for n in snap.nodes}["dgx-h100-0"]
    infer = {p.name: p for p in node.pods}["team-b/infer-1"]
    assert infer.gpus == (6, 7) and infer.gpu_indices_known is False
    request = {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "pods": [
            {"name": "team-x/new", "gpus": 2, "cpuMilli": 8000, "memoryMiB": 65536, "tolerations": [GPU_TOLERATION]}
        ],
    }
    result = placer.place(snap, request)
    assert [(a.pod, a.node, a.gpus) for a in result.assignments] == [("team-x/new", "dgx-h100-0", (4, 5))]
    assert placer.check_placement(snap, request, result) == []
    # The round trip through the model keeps what the importer wrote.
    again = snap.to_dict()
    assert _by_name(again)["dgx-h100-0"]["pods"][2] == {
        "name": "team-b/infer-1", "unknownGpus": 2, "cpuMilli": 20750, "memoryMiB": 16632,
        "startTime": 1749546002.0,  # 2025-06-10T09:00:02Z
    }


def test_gb200_multidoc_yaml_adds_clique_level_and_places_the_jobset():
    snap_doc = snapshot_from_kubernetes(GB200, levels=GKE_LEVELS).to_dict()
    assert snap_doc["topologyLevels"] == ["block", "subblock", "clique"]
    nodes = _by_name(snap_doc)
    assert nodes["gb200-rack1-1"]["topology"] == {
        "block": "0f9e8d7c6b5a",
        "subblock": "71e4c2a9",
        "clique": "7b968a6d-c8aa-45e1-9e07-e1e51be99c31.1",
    }
    assert nodes["gb200-rack1-0"]["gpus"] == 4 and nodes["gb200-rack1-0"]["gpuMemoryMiB"] == 189471
    assert nodes["gb200-rack1-0"]["memoryMiB"] == 804619188 // 1024
    # Given as a level, the clique label is not added a second time.
    named = snapshot_from_kubernetes(GB200, levels=[*GKE_LEVELS, ("nvl", "nvidia.com/gpu.clique")]).to_dict()
    assert named["topologyLevels"] == ["block", "subblock", "nvl"]

    request = request_from_kubernetes([JOBSET], levels=GKE_LEVELS)
    result = placer.place(snap_doc, request)
    assert sorted(a.node for a in result.assignments) == ["gb200-rack1-0", "gb200-rack1-1"]
    assert all(a.gpus == (0, 1, 2, 3) for a in result.assignments)
    assert result.gangs[0].placed
    assert placer.check_placement(snap_doc, request, result) == []


def test_podman_status_fragment_fails_and_imports_with_a_name(tmp_path):
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(PODMAN)
    assert err.value.where == f"{PODMAN}:1"
    status = yaml.safe_load(_text(PODMAN))["status"]
    node_list = {"apiVersion": "v1", "kind": "List", "items": [_node_manifest("nvidia1", status=status)]}
    path = _write_json(tmp_path / "nodes.json", node_list)
    node = snapshot_from_kubernetes(path).to_dict()["nodes"][0]
    assert node == {
        "name": "nvidia1",
        "gpus": 1,
        "cpuMilli": 16000,
        "memoryMiB": 32009,  # 32777408Ki
        "maxPods": 110,
        "resources": {  # ephemeral-storage in bytes: 8679376Ki of capacity
            "ephemeral-storage": {"capacity": 8679376 * 1024, "allocatable": 8443296967},
            "hugepages-1Gi": {"capacity": 0, "allocatable": 0},
            "hugepages-2Mi": {"capacity": 0, "allocatable": 0},
            "nvidia.com/gpu": {"capacity": 1, "allocatable": 1},
        },
    }


def test_mig_fragments_fail_and_their_values_import(tmp_path):
    for frag in (MIG_CAPACITY, MIG_LABELS):
        with pytest.raises(InvalidInputError) as err:
            snapshot_from_kubernetes(frag)
        assert err.value.where == f"{frag}:1"
        with pytest.raises(InvalidInputError) as err:
            request_from_kubernetes([frag])
        assert err.value.where == f"{frag}:1"
    mig = yaml.safe_load(_text(MIG_CAPACITY))  # the describe lines happen to be YAML
    labels = yaml.safe_load(_text(MIG_LABELS))
    status = {"capacity": dict(mig, cpu="64", memory="1056276132Ki"), "allocatable": dict(mig, cpu="63")}
    path = _write_json(tmp_path / "mig.json", _node_manifest("h100-mig", labels=labels, status=status))
    # The H100 NVL profiles of the capacity fragment are not A100 profiles: refused at the resource.
    with pytest.raises(InvalidInputError, match=r"mig-2g\.24gb: no MIG profile '2g\.24gb' on A100-SXM4-40GB"):
        snapshot_from_kubernetes(path)
    labels = {k: v for k, v in labels.items() if not k.startswith("nvidia.com/mig-")}
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-NVL"
    path = _write_json(tmp_path / "mig.json", _node_manifest("h100-mig", labels=labels, status=status))
    node = snapshot_from_kubernetes(path).to_dict()["nodes"][0]
    assert node["gpus"] == 1  # derived: the fewest GPUs the instances fit on
    assert node["resources"] == {"nvidia.com/gpu": {"capacity": 0, "allocatable": 0}}
    assert node["migInstances"] == [
        {"gpu": 0, "profile": "2g.24gb", "start": 0},
        {"gpu": 0, "profile": "1g.12gb", "start": 2},
        {"gpu": 0, "profile": "1g.12gb", "start": 3},
        {"gpu": 0, "profile": "3g.47gb", "start": 4},
    ]
    assert node["gpuModel"] == "NVIDIA-H100-NVL" and node["gpuMemoryMiB"] == 40536
    assert node["cpuMilli"] == 63000 and node["memoryMiB"] == 1056276132 // 1024  # memory from capacity


def test_describe_label_fragment_fails_and_its_labels_import(tmp_path):
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(H100_LABELS)
    assert err.value.where.startswith(f"{H100_LABELS}:")
    labels = dict(
        line.strip().split("=", 1) for line in _text(H100_LABELS).splitlines() if "=" in line
    )
    status = {
        "allocatable": {"nvidia.com/gpu": labels["nvidia.com/gpu.count"], "cpu": "96", "memory": "2113389648Ki"}
    }
    path = _write_json(tmp_path / "xe9680.json", _node_manifest("xe9680", labels=labels, status=status))
    node = snapshot_from_kubernetes(path).to_dict()["nodes"][0]
    assert (node["gpus"], node["gpuModel"], node["gpuMemoryMiB"]) == (8, "NVIDIA-H100-80GB-HBM3", 81559)


def test_gfd_readme_elided_fails_and_its_node_imports_with_a_status(tmp_path):
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(GFD_ELIDED)
    assert err.value.where == f"{GFD_ELIDED}:2"
    assert "invalid YAML" in err.value.what
    lines = [ln for ln in _text(GFD_ELIDED).splitlines() if not ln.startswith("$") and ln.strip() != "..."]
    lines.insert(lines.index("  metadata:") + 1, "    name: dgx2h-0")
    path = tmp_path / "nodes.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # The README cut the node before its status: a GPU node of 0 GPUs is refused.
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(path)
    assert err.value.where == f"{path}:3"  # the node's first line: it has no status
    assert err.value.what.startswith("items[0].status: node 'dgx2h-0' has no status.capacity")
    assert "labelled as a GPU node (nvidia.com/gpu.count=1)" in err.value.what
    lines += ["  status:", "    allocatable:", "      nvidia.com/gpu: \"1\""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    node = snapshot_from_kubernetes(path).to_dict()["nodes"][0]
    assert node["gpus"] == 1
    assert node["gpuModel"] == "A100-SXM4-40GB" and node["gpuMemoryMiB"] == 39538
    assert node["labels"]["nvidia.com/gpu.machine"] == "NVIDIA DGX-2H"
    assert node["labels"]["nvidia.com/cuda.driver.rev"] == ""


@pytest.mark.parametrize(
    "source, keys, value, json_path, fragment",
    [
        (NODES, ("items", 0, "status", "allocatable", "cpu"), "12Q",
         "items[0].status.allocatable.cpu", "'12Q'"),
        (PODS, ("items", 4, "spec", "nodeName"), "ghost-7", "items[4].spec.nodeName", "'ghost-7'"),
        # More GPUs held than the node has free: reported at the pod.
        (PODS, ("items", 2, "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), "5",
         "items[2]", "unknownGpus"),
        (PODS, ("items", 1, "metadata", "annotations", "placer.io/gpus"), "0,1",
         "items[1].metadata.annotations.placer.io/gpus", ""),
        (NODES, ("items", 1, "metadata", "name"), "dgx-h100-0", "items[1].metadata.name", ""),
    ],
)
def test_snapshot_json_errors_name_file_and_json_path(tmp_path, source, keys, value, json_path, fragment):
    bad = json.loads(_text(source))
    parent = bad
    for key in keys[:-1]:
        parent = parent[key]
    parent[keys[-1]] = value
    path = _write_json(tmp_path / source.name, bad)
    with pytest.raises(InvalidInputError) as err:
        if source == NODES:
            snapshot_from_kubernetes(path)
        else:
            snapshot_from_kubernetes(NODES, path)
    assert err.value.where == f"{path}: {json_path}"
    assert fragment in err.value.what


def test_snapshot_errors_name_file_and_json_path(tmp_path):
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(NODES, KUEUE_JOB)  # a Job is no pod list
    assert err.value.where == f"{KUEUE_JOB}:2" and "expected a Pod" in err.value.what
    # An unbound Pod manifest is a valid (empty) pod list.
    assert "pods" not in _by_name(snapshot_from_kubernetes(NODES, POD).to_dict())["dgx-h100-0"]

    broken = tmp_path / "nodes.json"
    broken.write_text(_text(NODES)[:5000], encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(broken)
    assert err.value.where.startswith(f"{broken}:") and err.value.where.split(":")[-1].isdigit()


def test_snapshot_yaml_errors_give_the_line(tmp_path):
    text = _text(GB200)
    lines = text.splitlines()
    line = lines.index("    cpu: 138900m") + 1
    path = tmp_path / "gb200.yaml"
    path.write_text(text.replace("    cpu: 138900m", "    cpu: 138900q", 1), encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(path)
    assert err.value.where == f"{path}:{line}"
    assert err.value.what.startswith("status.allocatable.cpu: ")
    # A key given twice in one mapping.
    dup = lines.index("    nvidia.com/gpu.count: \"4\"")
    path.write_text("\n".join(lines[: dup + 1] + lines[dup:]) + "\n", encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(path)
    assert err.value.where == f"{path}:{dup + 2}" and "duplicate key" in err.value.what


@pytest.mark.parametrize(
    "levels, fragment",
    [
        ([("node", "a")], "implicit"),
        ([("a", "x"), ("a", "y")], "twice"),
        ([("a", "x"), ("b", "x")], "twice"),
        (["rack"], "NAME=LABEL"),
        ([("a", "")], "label"),
    ],
)
def test_bad_levels(levels, fragment):
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(NODES, levels=levels)
    assert err.value.where.startswith("levels[") and fragment in err.value.what


# ----------------------------------------------------------------------------- request


def test_pod_fixture():
    doc = import_workloads(POD).document
    assert doc["pods"] == [{"name": "default/gpu-pod", "gpus": 1, "tolerations": [GPU_TOLERATION]}]
    assert "gangs" not in doc
    assert placer.PlacementRequest.from_dict(doc).pods[0].tolerations[0].operator == "Exists"


def test_kueue_job_required_topology():
    levels = [("block", "cloud.provider.com/topology-block"), ("rack", "cloud.provider.com/topology-rack")]
    doc = import_workloads([KUEUE_JOB], levels=levels, policy="first-fit").document
    assert doc["policy"] == "first-fit"
    assert doc["pods"] == [
        {"name": "default/tas-sample-required", "replicas": 10, "cpuMilli": 1000, "memoryMiB": 200,
         "labels": {"batch.kubernetes.io/job-name": "tas-sample-required", "job-name": "tas-sample-required"},
         "gang": "default/tas-sample-required"}
    ]
    assert doc["gangs"] == {"default/tas-sample-required": {"topology": {"mode": "required", "level": "rack"}}}
    assert _gang_sizes(doc) == {"default/tas-sample-required": 10}


def test_kueue_label_without_level_names_the_missing_level():
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes([KUEUE_JOB])
    assert err.value.where == f"{KUEUE_JOB}:14"
    assert "--level NAME=cloud.provider.com/topology-rack" in err.value.what
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes([JOBSET], levels=GKE_LEVELS[:1])
    assert err.value.where == f"{JOBSET}:44"
    assert "--level NAME=cloud.google.com/gce-topology-subblock" in err.value.what


def test_jobset_fixture():
    result = import_workloads([JOBSET], levels=GKE_LEVELS)
    doc = result.document
    (entry,) = doc["pods"]
    assert entry["name"] == "default/nccl-all-worker" and entry["replicas"] == 2
    assert entry["gpus"] == 4 and "cpuMilli" not in entry
    assert entry["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-gb200"}
    assert entry["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
    ]
    assert doc["gangs"] == {"default/nccl-all": {"topology": {"mode": "required", "level": "subblock"}}}
    assert _gang_sizes(doc) == {"default/nccl-all": 2}
    assert result.skipped == {"ComputeDomain": 1}
    assert any("resourceClaims" in n and n.startswith(f"{JOBSET}:76:") for n in result.notes)


def test_podgroup_and_deployment():
    result = import_workloads([PODGROUP, DEPLOYMENT])
    doc = result.document
    assert doc["pods"] == [{"name": "default/pause", "replicas": 2, "labels": PAUSE_LABELS, "gang": "default/pg1"}]
    assert doc["gangs"] == {"default/pg1": {"topology": {"mode": "unconstrained"}}}
    assert _gang_sizes(doc) == {"default/pg1": 2}
    (note,) = result.notes
    assert "minMember 3" in note and "2 pod(s)" in note and note.startswith(f"{PODGROUP}:2:")


@pytest.mark.parametrize("path", [PODGROUP, PODGROUP_STATUS, VOLCANO_PG])
def test_podgroups_alone_make_no_pods(path):
    result = import_workloads(path)
    assert result.document["pods"] == [] and "gangs" not in result.document
    assert result.skipped == {}
    (note,) = result.notes
    assert "has no pods among the inputs" in note and note.startswith(f"{path}:")


def test_volcano_job_network_topology():
    levels = [("spine", "example.com/spine"), ("leaf", "example.com/leaf")]
    doc = import_workloads(VOLCANO_JOB, levels=levels).document
    assert doc["pods"] == [
        {"name": "default/mindspore-cpu-pod", "replicas": 3, "cpuMilli": 1000, "gang": "default/mindspore-cpu"}
    ]
    # hard, highestTierAllowed 2: tier 1 is the innermost level (leaf), tier 2 the next.
    assert doc["gangs"] == {"default/mindspore-cpu": {"topology": {"mode": "required", "level": "spine"}}}
    assert _gang_sizes(doc) == {"default/mindspore-cpu": 3}
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(VOLCANO_JOB, levels=levels[1:])
    assert err.value.where == f"{VOLCANO_JOB}:10" and "tier 2" in err.value.what


@pytest.mark.parametrize(
    "path, skipped",
    [
        (KUEUE_CONFIG, {"Topology": 1, "ResourceFlavor": 1, "ClusterQueue": 1, "LocalQueue": 1}),
        (HYPERNODE_LEAF, {"HyperNode": 4}),
        (HYPERNODE_UPPER, {"HyperNode": 3}),
    ],
)
def test_configuration_objects_are_skipped_and_counted(tmp_path, path, skipped):
    # In a file beside a workload they are skipped and counted.
    both = tmp_path / "both.yaml"
    both.write_text(_text(POD) + "\n---\n" + _text(path), encoding="utf-8")
    result = import_workloads(both)
    assert [p["name"] for p in result.document["pods"]] == ["default/gpu-pod"]
    assert result.skipped == skipped
    assert placer.PlacementRequest.from_dict(result.document) == result.request
    # A file of them alone holds nothing to place: refused, not an empty request.
    for files in ([path], [POD, path]):
        with pytest.raises(InvalidInputError) as err:
            import_workloads(files)
        assert err.value.where == f"{path}:2"
        assert err.value.what == (
            f"kind: {EXPECTED_KINDS} or another workload with a pod template, got {next(iter(skipped))}"
        )


@pytest.mark.parametrize("path, line", [(TFTPL_A3, 32), (TFTPL_A4X, 33)])
def test_templates_fail_at_the_placeholder(path, line):
    for call in (lambda: request_from_kubernetes(path), lambda: snapshot_from_kubernetes(path)):
        with pytest.raises(InvalidInputError) as err:
            call()
        assert err.value.where == f"{path}:{line}"
        assert "${accelerator_type}" in err.value.what


def test_unquoted_placeholder_in_plain_yaml_fails(tmp_path):
    text = _text(TFTPL_A3)
    path = tmp_path / "kueue.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(path)
    assert err.value.where == f"{path}:32" and "placeholder" in err.value.what


@pytest.mark.parametrize("path", [GFD_ELIDED, H100_LABELS, MIG_CAPACITY, MIG_LABELS, PODMAN])
def test_fragments_are_no_manifests(path):
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(path)
    where = err.value.where
    assert where.startswith(f"{path}:") and where.rsplit(":", 1)[1].isdigit()


def test_handmade_workloads():
    levels = [*GKE_LEVELS, ("rack", "topology.example.com/rack")]
    result = import_workloads(WORKLOADS, levels=levels)
    doc = result.document
    pods = {p["name"]: p for p in doc["pods"]}
    train = pods["team-a/llama-pretrain-workers"]
    # 2 Jobs x 4 pods; init peak 8 cores < 64 + 0.25 sidecar; memory from the limit.
    assert train["replicas"] == 8 and train["gpus"] == 4
    assert train["cpuMilli"] == 64250 and train["memoryMiB"] == 512 * 1024 + 256
    assert train["priority"] == 100000  # priorityClassName training-high
    assert train["tolerations"] == [{"operator": "Exists"}]
    assert doc["gangs"]["team-a/llama-pretrain"] == {
        "topology": {"mode": "required", "level": "block"},
        "slices": [{"level": "subblock", "size": 4}],
    }
    assert pods["team-c/notebook-0"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert doc["gangs"]["team-c/notebooks"] == {"topology": {"mode": "preferred", "level": "rack"}}
    assert pods["team-b/mpi-worker"]["resources"] == {"rdma/rdma_shared_device_a": 1}
    assert doc["gangs"]["team-b/mpi-pg"] == {"topology": {"mode": "preferred", "level": "rack"}}
    assert _gang_sizes(doc) == {"team-a/llama-pretrain": 8, "team-c/notebooks": 2, "team-b/mpi-pg": 2}
    assert result.skipped == {"DaemonSet": 1, "LocalQueue": 1}
    assert any(n.startswith(f"{WORKLOADS}:99: items[2]") and "DaemonSet" in n for n in result.notes)


def test_request_errors(tmp_path):
    path = tmp_path / "pod.yaml"
    text = _text(POD)
    path.write_text(text.replace("nvidia.com/gpu: 1 ", "nvidia.com/gpu: 0.5 "), encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(path)
    assert err.value.where == f"{path}:12"
    assert err.value.what.startswith(
        "spec.containers[0].resources.limits.nvidia.com/gpu: expected a whole number"
    )

    path.write_text(text.replace("operator: Exists", "operator: Exist"), encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(path)
    assert err.value.where == f"{path}:15" and "Equal or Exists" in err.value.what

    path.write_text(text.replace("kind: Pod", "kind: Pod\nkind: Pod"), encoding="utf-8")
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(path)
    assert err.value.where == f"{path}:3" and "duplicate key" in err.value.what

    # The same pod twice: the second one is named.
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes([POD, POD])
    assert err.value.where == f"{POD}:1" and "duplicate pod name" in err.value.what

    json_path = _write_json(tmp_path / "job.json", yaml.safe_load(_text(KUEUE_JOB)))
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(json_path)
    assert err.value.where == (
        f"{json_path}: spec.template.metadata.annotations.kueue.x-k8s.io/podset-required-topology"
    )
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(POD, policy="worst-fit")
    assert err.value.where == "policy"
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes(tmp_path / "missing.yaml")
    assert err.value.where == str(tmp_path / "missing.yaml")


# ----------------------------------------------------------------------------- fuzz

CORPUS = sorted(p for p in DATA.iterdir() if not p.name.endswith(".src"))
CHARS = " \n\t:-\"'{}[],#0179.mKiGe|>&*!%$@"


def mutated_fixture(path):
    """(name, mutated text) of one fixture."""
    edits = mutated([path.read_text(encoding="utf-8")], list(CHARS), ("del_line", "dup_line", "swap_lines"))
    return edits.map(lambda text: (path.name, text))


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("k8s-fuzz")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=st.sampled_from(CORPUS).flatmap(mutated_fixture))
def test_fuzz_mutated_fixtures_raise_only_invalid_input(fuzz_dir, case):
    name, text = case
    path = fuzz_dir / name
    path.write_text(text, encoding="utf-8")
    levels = [*GKE_LEVELS, ("rack", "topology.example.com/rack")]

    def nodes_with_levels_their_labels_have() -> placer.ClusterSnapshot:
        try:
            return snapshot_from_kubernetes(path, levels=levels)
        except InvalidInputError as e:  # a level no node carries is an error: read without them
            if not (e.where.startswith("levels[") and "no node carries label" in e.what):
                raise
        return snapshot_from_kubernetes(path)

    for call in (
        nodes_with_levels_their_labels_have,
        lambda: snapshot_from_kubernetes(NODES, path),
        lambda: import_workloads([path], levels=levels),
    ):
        try:
            out = call()
        except InvalidInputError as e:
            assert e.where.startswith(str(path)) or e.where.startswith(str(NODES)), e.where
            continue
        if isinstance(out, WorkloadImport):
            assert placer.PlacementRequest.from_dict(out.document) == out.request
        else:
            assert isinstance(out, placer.ClusterSnapshot)
            assert placer.ClusterSnapshot.from_dict(out.to_dict()) == out


# ----------------------------------------------------------------------------- issue #13: refuse, read what is real


def _pods_with(tmp_path: Path, *extra: dict) -> Path:
    """handmade-pods.json with ``extra`` pods appended (copies of its pending pod, changed)."""
    doc = json.loads(_text(PODS))
    for change in extra:
        pod = json.loads(json.dumps(doc["items"][6]))
        pod["metadata"]["name"] = change["name"]
        pod["metadata"].update(change.get("metadata", {}))
        pod["spec"].update(change.get("spec", {}))
        pod["status"]["phase"] = change.get("phase", "Pending")
        doc["items"].append(pod)
    return _write_json(tmp_path / "pods.json", doc)


def test_node_list_is_no_request(tmp_path):
    with pytest.raises(InvalidInputError) as err:
        import_workloads(NODES)
    assert err.value.where == f"{NODES}: items[0].kind"
    assert err.value.what.startswith(EXPECTED_KINDS) and ", got Node" in err.value.what
    assert "placer import kubernetes --nodes" in err.value.what
    # YAML: the line of the first Node's kind; a node file beside a workload is refused as well.
    with pytest.raises(InvalidInputError) as err:
        import_workloads([POD, GB200])
    assert err.value.where == f"{GB200}:3" and err.value.what.startswith(f"kind: {EXPECTED_KINDS}")
    # An empty NodeList holds no pod either.
    empty = _write_json(tmp_path / "nodes.json", {"apiVersion": "v1", "kind": "NodeList", "items": []})
    with pytest.raises(InvalidInputError) as err:
        import_workloads(empty)
    assert err.value.where == f"{empty}: kind"
    assert err.value.what.endswith("got NodeList (nodes are read by 'placer import kubernetes --nodes')")
    # An empty List (kubectl get pods when there are none) is an empty request.
    none = _write_json(tmp_path / "pods.json", {"apiVersion": "v1", "kind": "List", "items": []})
    assert import_workloads(none).document["pods"] == []


def test_kubectl_pods_only_pending_unbound_pods_become_requests(tmp_path):
    path = _pods_with(
        tmp_path,
        {"name": "failed-0", "phase": "Failed"},
        {"name": "starting-0", "spec": {"nodeName": "dgx-h100-1"}},  # bound, containers not up yet
        {"name": "dcgm-exporter-x7k", "metadata": DAEMONSET_OWNER},
        {"name": "pending-1", "spec": {"nodeName": ""}},
    )
    result = import_workloads(path)
    assert [p["name"] for p in result.document["pods"]] == ["team-d/pending-0", "team-d/pending-1"]
    assert result.document["pods"][0]["gpus"] == 1
    assert result.skipped_pods == {
        "Running": 5, "Succeeded": 1, "Failed": 1, "bound to a node": 1, "owned by a DaemonSet": 1,
    }
    # all_phases keeps every pod, as before.
    every = import_workloads(path, all_phases=True)
    assert len(every.document["pods"]) == 11 and every.skipped_pods == {}
    assert every.document["pods"][0]["name"] == "kube-system/nvidia-device-plugin-daemonset-7xk2p"
    # A Pod manifest has no status: it is a pod to place.
    assert import_workloads(POD).skipped_pods == {}


def test_kubectl_pods_bad_phase_is_refused(tmp_path):
    path = _pods_with(tmp_path, {"name": "odd-0", "phase": "Waiting"})
    with pytest.raises(InvalidInputError) as err:
        import_workloads(path)
    assert err.value.where == f"{path}: items[7].status.phase"
    assert err.value.what == "expected Pending, Running, Succeeded, Failed or Unknown, got 'Waiting' (a string)"


def test_a_level_no_node_carries_is_an_error_with_a_near_label(tmp_path, capsys):
    out = tmp_path / "snap.json"
    argv = ["import", "kubernetes", "--nodes", str(NODES), "-o", str(out)]
    assert main([*argv, "--level", "block=topology.example.com/block", "--level", "rack=topology.example.com/racks"]) == 2
    assert capsys.readouterr().err == (
        "placer: error: --level rack=topology.example.com/racks: no node carries label "
        "'topology.example.com/racks' (did you mean 'topology.example.com/rack'?)\n"
    )
    assert not out.exists()
    assert main([*argv, "--level", "zone=example.org/nothing-like-it"]) == 2
    assert capsys.readouterr().err == (
        "placer: error: --level zone=example.org/nothing-like-it: no node carries label 'example.org/nothing-like-it'\n"
    )
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(NODES, levels=[("rack", "Topology.Example.com/Rack")])
    assert err.value.where == "levels[0]" and "(did you mean 'topology.example.com/rack'?)" in err.value.what


def test_a_level_some_nodes_lack_is_a_note_naming_them(tmp_path, capsys):
    out = tmp_path / "snap.json"
    nodes = json.loads(_text(NODES))
    for item in nodes["items"][:2]:  # dgx-h100-0 and -1 lose their rack too
        del item["metadata"]["labels"]["topology.example.com/rack"]
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(nodes), encoding="utf-8")
    assert main(["import", "kubernetes", "--nodes", str(path), "-o", str(out),
                 "--level", "block=topology.example.com/block", "--level", "rack=topology.example.com/rack"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"placer: import kubernetes: note: {path}: items[2].status.conditions: node 'dgx-h100-2': Ready is "
        "Unknown; added the node lifecycle controller's taint(s) node.kubernetes.io/unreachable:NoSchedule, "
        "node.kubernetes.io/unreachable:NoExecute",
        "placer: import kubernetes: note: level block (topology.example.com/block): 1 of 5 node(s) do not carry "
        "the label (cpu-0): they are in no block domain and take no pod of a gang that level constrains",
        "placer: import kubernetes: note: level rack (topology.example.com/rack): 3 of 5 node(s) do not carry "
        "the label (dgx-h100-0, dgx-h100-1, cpu-0): they are in no rack domain and take no pod of a gang that "
        "level constrains",
    ]
    doc = json.loads(out.read_text(encoding="utf-8"))
    racked = [n["name"] for n in doc["nodes"] if "rack" in n.get("topology", {})]
    assert racked == ["dgx-h100-2", "a100-mig-0"]
    # Every node carries kubernetes.io/os: no note for that level.
    imported = import_kubernetes(path, levels=[("os", "kubernetes.io/os"), ("rack", "topology.example.com/rack")])
    assert len(imported.notes) == 2 and imported.notes[1].startswith("level rack (topology.example.com/rack): 3 of 5")


def test_cli_request_from_kubectl_pods_says_what_it_skipped(tmp_path, capsys):
    path = _pods_with(tmp_path, {"name": "dcgm-exporter-x7k", "metadata": DAEMONSET_OWNER})
    assert main(["import", "kubernetes-request", str(path)]) == 0
    out, err = capsys.readouterr()
    assert [p["name"] for p in json.loads(out)["pods"]] == ["team-d/pending-0"]
    assert err == (
        "placer: import kubernetes-request: skipped 7 pod(s) not waiting to be scheduled: 5 Running, "
        "1 Succeeded, 1 owned by a DaemonSet (--all-phases imports them)\n"
    )
    assert main(["import", "kubernetes-request", "--all-phases", str(path)]) == 0
    out, err = capsys.readouterr()
    pods = json.loads(out)["pods"]
    assert len(pods) == 8 and err == ""
    # The bound pods taken keep their node: kube's NodeName filter holds them to it.
    bound = [p for p in json.loads(_text(path))["items"] if p["spec"].get("nodeName")]
    assert bound and [p["nodeName"] for p in pods if "nodeName" in p] == [p["spec"]["nodeName"] for p in bound]


def test_cli_request_of_a_node_list_exits_2(tmp_path, capsys):
    out = tmp_path / "request.json"
    assert main(["import", "kubernetes-request", str(NODES), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert captured.err == (
        f"placer: error: {NODES}: items[0].kind: {EXPECTED_KINDS} or another workload with a pod "
        "template, got Node (nodes are read by 'placer import kubernetes --nodes')\n"
    )


def test_missing_podgroup_is_an_error_unless_asked(tmp_path, capsys):
    with pytest.raises(InvalidInputError) as err:
        import_workloads(DEPLOYMENT)
    assert err.value.where == f"{DEPLOYMENT}:15"
    assert err.value.what == (
        "spec.template.metadata.labels.scheduling.x-k8s.io/pod-group: workload default/pause names "
        "PodGroup default/pg1, which is not among the inputs; give the file that holds it, or "
        "--missing-podgroup=gang-of-present-pods to make the gang of the 2 pod(s) present"
    )
    asked = import_workloads(DEPLOYMENT, missing_podgroup="gang-of-present-pods")
    assert asked.document["pods"] == [
        {"name": "default/pause", "replicas": 2, "labels": PAUSE_LABELS, "gang": "default/pg1"}]
    assert _gang_sizes(asked.document) == {"default/pg1": 2}
    assert asked.notes == (
        "PodGroup default/pg1 is not among the inputs; its 2 labelled pod(s) are placed as one gang",
    )
    # A pending pod of kubectl output with a Volcano group annotation: named at the annotation.
    path = _pods_with(tmp_path, {"name": "vc-worker-0", "metadata": {
        "annotations": {"scheduling.k8s.io/group-name": "vc-job-3f2a"}}})
    with pytest.raises(InvalidInputError) as err:
        import_workloads(path)
    assert err.value.where == f"{path}: items[7].metadata.annotations.scheduling.k8s.io/group-name"
    assert err.value.what.startswith("pod team-d/vc-worker-0 names Volcano PodGroup team-d/vc-job-3f2a, ")
    line = f"placer: error: {err.value}"
    assert main(["import", "kubernetes-request", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    argv = ["import", "kubernetes-request", str(path), "--missing-podgroup=gang-of-present-pods"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gangs"] == {"team-d/vc-job-3f2a": {"topology": {"mode": "unconstrained"}}}
    assert main([*argv[:-1], "--missing-podgroup=invent"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "placer: error: --missing-podgroup: expected error or gang-of-present-pods, got 'invent'"
    ]
    with pytest.raises(InvalidInputError) as err:
        import_workloads(DEPLOYMENT, missing_podgroup="invent")
    assert err.value.where == "missing_podgroup"


def test_node_cut_before_its_status_is_refused(tmp_path):
    labels = dict(line.strip().split("=", 1) for line in _text(H100_LABELS).splitlines() if "=" in line)
    cut = {"apiVersion": "v1", "kind": "List", "items": [
        _node_manifest("cpu-0", labels={"kubernetes.io/hostname": "cpu-0"}),  # no GPU label: imports
        _node_manifest("xe9680", labels=labels),
    ]}
    path = _write_json(tmp_path / "nodes.json", cut)
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(path)
    assert err.value.where == f"{path}: items[1].status"
    assert err.value.what == (
        "node 'xe9680' has no status.capacity or status.allocatable (a copy cut short?), yet it is "
        "labelled as a GPU node (nvidia.com/gpu.count=8): it would import with 0 GPUs and untracked "
        "CPU and memory; give the whole 'kubectl get nodes -o json' output"
    )
    assert main(["import", "kubernetes", "--nodes", str(path)]) == 2
    cut["items"].pop()
    assert snapshot_from_kubernetes(_write_json(path, cut)).to_dict()["nodes"] == [
        {"name": "cpu-0", "labels": {"kubernetes.io/hostname": "cpu-0"}}
    ]


def _pending_pods(tmp_path: Path, classes: dict[str, str | None]) -> Path:
    """kubectl get pods: one pending pod per name, naming the class given (or none)."""
    items = []
    for name, cls in classes.items():
        spec: dict = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        if cls is not None:
            spec["priorityClassName"] = cls
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
                      "spec": spec, "status": {"phase": "Pending"}})
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return path


def test_cli_request_priority_classes_give_pending_pods_their_priority(tmp_path, capsys):
    classes = DATA / "handmade-priorityclasses.yaml"
    pods = _pending_pods(tmp_path, {"low": "batch-low", "prod": "prod-nonpreempting", "plain": None})
    assert main(["import", "kubernetes-request", str(pods), "--priority-classes", str(classes)]) == 0
    out, err = capsys.readouterr()
    priority = {p["name"]: p.get("priority", 0) for p in json.loads(out)["pods"]}
    # plain names no class: the globalDefault class research-default gives 100
    assert priority == {"ns/low": 10, "ns/prod": 1000000, "ns/plain": 100} and err == ""
    assert import_workloads(pods, priority_classes=classes).request.pods[0].priority == 10

    assert main(["import", "kubernetes-request", str(pods)]) == 0  # the classes unknown: 0, and said so
    out, err = capsys.readouterr()
    assert {p.get("priority", 0) for p in json.loads(out)["pods"]} == {0}
    assert err.count("placer: import kubernetes-request: note: ") == 2 and "'batch-low'" in err


def test_cli_request_priority_classes_take_priority_classes_only(tmp_path, capsys):
    pods = _pending_pods(tmp_path, {"low": "batch-low"})
    assert main(["import", "kubernetes-request", str(pods), "--priority-classes", str(pods)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"placer: error: {pods}: items[0].kind: expected a PriorityClass (scheduling.k8s.io/v1), got 'Pod' (a string)\n"
    )
