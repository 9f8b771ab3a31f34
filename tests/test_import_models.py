"""The importers return model objects, decoded once (issue #11, item 5).

``snapshot_from_kubernetes`` and ``snapshot_from_slurm`` return a ClusterSnapshot,
``request_from_kubernetes`` a PlacementRequest. ``placer import kubernetes`` writes the
snapshot's ``to_dict()``; ``placer import kubernetes-request`` and ``placer import slurm``
write the document the object was decoded from (``WorkloadImport.document``,
``SlurmImport.document``), because ``to_dict()`` would expand ``replicas`` and drop
``unschedulable: false``. A bad input gives the one-line error it gave before; a Slurm
node the schema refuses, which used to be written out unchecked, now fails at its line.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import placer
from placer.text.files import dump_json
from placer.adapters.kubernetes.snapshot import snapshot_from_kubernetes
from placer.adapters.kubernetes.workloads import WorkloadImport, import_workloads, request_from_kubernetes
from placer.adapters.slurm.importer import SlurmImport, import_slurm, snapshot_from_slurm
from placer.cli import main
from placer.exceptions import InvalidInputError

DATA = Path(__file__).parent / "data"
K8S = DATA / "k8s"
E2E = DATA / "e2e"
SLURM = DATA / "slurm"

GKE = [("block", "cloud.google.com/gce-topology-block"), ("subblock", "cloud.google.com/gce-topology-subblock")]
EXAMPLE = [("block", "topology.example.com/block"), ("rack", "topology.example.com/rack")]
POD = K8S / "pod-gpu-limit-toleration_k8s-device-plugin-readme.yaml"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``placer`` and return what it wrote on stdout (it must succeed)."""
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def cli_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``placer`` on bad input and return its one line of stderr."""
    assert main(list(argv)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def level_args(levels: list[tuple[str, str]]) -> list[str]:
    return [arg for name, label in levels for arg in ("--level", f"{name}={label}")]


# ------------------------------------------------------------------------ kubernetes


@pytest.mark.parametrize(
    "nodes, pods, levels",
    [
        (K8S / "handmade-nodes.json", K8S / "handmade-pods.json", EXAMPLE),
        (E2E / "nodes.json", E2E / "pods.json", EXAMPLE),
        (K8S / "handmade-nodes-gb200.yaml", None, GKE),
        (K8S / "handmade-nodes-gb200.yaml", None, []),  # the clique is the only level
        (K8S / "handmade-nodes.json", POD, []),
    ],
)
def test_kubernetes_snapshot_is_a_model_and_its_to_dict_is_what_the_cli_writes(capsys, nodes, pods, levels):
    snapshot = snapshot_from_kubernetes(nodes, pods, levels)
    assert isinstance(snapshot, placer.ClusterSnapshot)
    argv = ["import", "kubernetes", "--nodes", str(nodes), *level_args(levels)]
    if pods is not None:
        argv += ["--pods", str(pods)]
    written = cli(capsys, *argv)
    assert written == dump_json(snapshot.to_dict())
    assert placer.ClusterSnapshot.from_dict(json.loads(written)) == snapshot


def test_kubernetes_clique_only_topology_is_written_in_the_node_order_of_to_dict():
    # It used to be appended after resources; every other node has it after maxPods.
    for node in snapshot_from_kubernetes(K8S / "handmade-nodes-gb200.yaml").to_dict()["nodes"]:
        keys = list(node)
        assert keys.index("topology") == keys.index("maxPods") + 1
        assert keys[-1] == "resources"


# ------------------------------------------------------------------------ kubernetes-request


@pytest.mark.parametrize(
    "manifests, levels, policy",
    [
        ([K8S / "handmade-workloads.yaml"], [*GKE, ("rack", "topology.example.com/rack")], None),
        ([E2E / "workloads.yaml"], EXAMPLE, "first-fit"),
        ([K8S / "jobset-pod-gpu-request_gke-a4x-gb200_cluster-toolkit.yaml"], GKE, None),
        ([K8S / "podgroup-scheduling.x-k8s.io-v1alpha1_scheduler-plugins-install.yaml",
          K8S / "deployment-podgroup-label_scheduler-plugins-install.yaml"], [], "spread"),
        ([POD], [], None),
    ],
)
def test_kubernetes_request_is_a_model_decoded_from_what_the_cli_writes(capsys, manifests, levels, policy):
    imported = import_workloads(manifests, levels, policy)
    assert isinstance(imported, WorkloadImport)
    assert isinstance(imported.request, placer.PlacementRequest)
    assert request_from_kubernetes(manifests, levels, policy) == imported.request
    argv = ["import", "kubernetes-request", *map(str, manifests), *level_args(levels)]
    if policy is not None:
        argv += ["--policy", policy]
    written = cli(capsys, *argv)
    assert written == dump_json(imported.document)
    assert placer.PlacementRequest.from_dict(json.loads(written)) == imported.request
    # to_dict() lists every replica: another document of the same request.
    assert placer.PlacementRequest.from_dict(imported.request.to_dict()) == imported.request


def test_kubernetes_request_document_keeps_replicas_the_model_expands():
    imported = import_workloads([E2E / "workloads.yaml"], EXAMPLE)
    entries = {p["name"]: p.get("replicas") for p in imported.document["pods"]}
    assert entries == {"team-x/finetune": 2, "team-y/eval-4gpu": None}
    names = [p.name for p in imported.request.pods]
    assert names == ["team-x/finetune-0", "team-x/finetune-1", "team-y/eval-4gpu"]
    assert "policy" not in imported.document and imported.request.policy == "best-fit"


# ------------------------------------------------------------------------ slurm


@pytest.mark.parametrize(
    "nodes, gres, topology",
    [
        ("handmade-scontrol-d-show-node.txt", "handmade-gres.conf", "handmade-topology.conf"),
        ("handmade-scontrol-d-show-node.txt", None, "topology.conf_tree_slurm-docs-3level.conf"),
        ("scontrol-show-node_a40-gres-socket-affinity_slinky-slurm-operator-45.txt", None, None),
    ],
)
def test_slurm_snapshot_is_a_model_decoded_from_what_the_cli_writes(capsys, nodes, gres, topology):
    args = [SLURM / nodes, gres and SLURM / gres, topology and SLURM / topology]
    imported = import_slurm(*args)
    assert isinstance(imported, SlurmImport)
    assert isinstance(imported.snapshot, placer.ClusterSnapshot)
    assert snapshot_from_slurm(*args) == imported.snapshot
    argv = ["import", "slurm", "--nodes", str(args[0])]
    argv += ["--gres", str(args[1])] if gres else []
    argv += ["--topology", str(args[2])] if topology else []
    written = cli(capsys, *argv)
    assert written == dump_json(imported.document)
    assert placer.ClusterSnapshot.from_dict(json.loads(written)) == imported.snapshot
    # to_dict() is the same document without the default unschedulable: false.
    expected = json.loads(written)
    for node in expected["nodes"]:
        if node["unschedulable"] is False:
            del node["unschedulable"]
    assert dump_json(imported.snapshot.to_dict()) == dump_json(expected)


# ------------------------------------------------------------------------ errors


def test_kubernetes_errors_are_the_same_line(tmp_path, capsys):
    # A fault only the schema finds is still reported at the pod object.
    pods = json.loads((K8S / "handmade-pods.json").read_text(encoding="utf-8"))
    pods["items"][2]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "5"
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pods, indent=4) + "\n", encoding="utf-8")
    nodes = K8S / "handmade-nodes.json"
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(nodes, path)
    assert (err.value.where, err.value.what) == (
        f"{path}: items[2]",
        "5 GPU(s) held, but only 4 GPU(s) of the node are not held by its other pods "
        "(placer/v1 nodes[0].pods[2].unknownGpus)",
    )
    line = cli_error(capsys, "import", "kubernetes", "--nodes", str(nodes), "--pods", str(path))
    assert line == f"placer: error: {err.value}"


def test_kubernetes_request_errors_are_the_same_line(capsys):
    with pytest.raises(InvalidInputError) as err:
        request_from_kubernetes([POD, POD])
    assert (err.value.where, err.value.what) == (
        f"{POD}:1", "duplicate pod name 'default/gpu-pod', first at pods[0] (placer/v1 pods[1].name)"
    )
    assert cli_error(capsys, "import", "kubernetes-request", str(POD), str(POD)) == f"placer: error: {err.value}"


def test_slurm_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "nodes.txt"
    bad.write_bytes(b"NodeName=a\n   OS=\xff\n")
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_slurm(bad)
    assert (err.value.where, err.value.what) == ("nodes.txt:2", "expected UTF-8 text, got byte 0xff")
    assert cli_error(capsys, "import", "slurm", "--nodes", str(bad)) == f"placer: error: {err.value}"


@pytest.mark.parametrize(
    "record, line, what",
    [
        ("NodeName=a CPUTot=4\n\nNodeName=b CPUTot=4\n   Partitions=x\x01y\n", 3,
         "expected a name without control characters, got 'x\\x01y' (U+0001) (placer/v1 nodes[1].labels)"),
        ("NodeName=a CPUTot=4 RealMemory=9007199254740992\n", 1,
         "expected an integer in 0..9007199254740991, got 9007199254740992 (placer/v1 nodes[0].memoryMiB)"),
    ],
)
def test_slurm_node_the_schema_refuses_is_reported_at_its_line(tmp_path, capsys, record, line, what):
    # Such a document used to be written out and refused only when placed.
    path = tmp_path / "nodes.txt"
    path.write_text(record, encoding="utf-8")
    out = tmp_path / "cluster.json"
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_slurm(path)
    assert (err.value.where, err.value.what) == (f"nodes.txt:{line}", what)
    line_written = cli_error(capsys, "import", "slurm", "--nodes", str(path), "-o", str(out))
    assert line_written == f"placer: error: {err.value}"
    assert not out.exists()
