"""The JSON Schema of the placer/v1 documents: the committed files are what the code
generates, and real documents (the demo, the Kubernetes importers' output, one using every
Kubernetes scheduling field) validate against it while malformed ones do not."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import placer
from placer.adapters.kubernetes.snapshot import import_kubernetes
from placer.adapters.kubernetes.workloads import import_workloads
from placer.cli import main
from placer.cli.demo import load_demo_document
from placer.exceptions import InvalidInputError
from placer.schema import DOCUMENT_KINDS, document_schema, request_from_dict, snapshot_from_dict

ROOT = Path(__file__).parent.parent
SCHEMA_DIR = ROOT / "docs" / "schema"
K8S = Path(__file__).parent / "data" / "k8s"

SNAPSHOT_WITH_EVERY_FIELD: dict[str, Any] = {
    "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
    "nodes": [{
        "name": "n0", "gpus": 8, "cpuMilli": 64000, "memoryMiB": 512000, "maxPods": 110,
        "labels": {"topology.kubernetes.io/zone": "a"},
        "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                    "timeAdded": "2026-01-02T03:04:05Z"}],
        "resources": {"ephemeral-storage": {"capacity": 100 << 30, "allocatable": 90 << 30},
                      "hugepages-2Mi": {"capacity": 1 << 30, "allocatable": 1 << 30}},
        "pods": [{
            "name": "team-b/db-0", "unknownGpus": 1, "labels": {"app": "db"},
            "resources": {"ephemeral-storage": 1 << 30}, "hostPorts": [{"hostPort": 5432}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}},
        }],
    }],
}
REQUEST_WITH_EVERY_FIELD: dict[str, Any] = {
    "apiVersion": "placer/v1", "kind": "PlacementRequest",
    "pods": [{
        "name": "team-a/train", "replicas": 2, "gpus": 1, "labels": {"app": "trainer"}, "nodeName": "n0",
        "resources": {"ephemeral-storage": 10 << 30, "hugepages-2Mi": 4 << 20},
        "hostPorts": [{"hostPort": 8080, "protocol": "UDP", "hostIP": "10.0.0.1"}],
        "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "Gt", "values": ["3"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}],
            },
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}},
                                                    "namespaces": ["team-b"], "topologyKey": "kubernetes.io/hostname"}}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["trainer"]}]},
                 "namespaceSelector": {}, "topologyKey": "topology.kubernetes.io/zone",
                 "matchLabelKeys": ["pod-template-hash"]}]},
        },
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "trainer"}}, "minDomains": 2,
             "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore", "matchLabelKeys": ["pod-template-hash"]}],
    }],
}


def _validator(kind: str):
    jsonschema = pytest.importorskip("jsonschema")
    schema = document_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("kind", list(DOCUMENT_KINDS))
def test_the_committed_schema_is_what_the_code_generates(kind):
    committed = json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text(encoding="utf-8"))
    assert committed == document_schema(kind), f"regenerate: placer schema {kind} -o docs/schema/{kind}.schema.json"


@pytest.mark.parametrize("kind", list(DOCUMENT_KINDS))
def test_the_schema_states_the_document_and_refuses_unknown_fields(kind):
    schema = document_schema(kind)
    name = DOCUMENT_KINDS[kind][0]
    top = schema["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    assert schema["title"] == f"placer/v1 {name}"
    assert top["properties"]["kind"] == {"enum": [name]} and top["properties"]["apiVersion"] == {"enum": ["placer/v1"]}
    assert {"apiVersion", "kind"} <= set(top["required"])
    assert all(d.get("additionalProperties") is False for d in schema["$defs"].values() if d.get("type") == "object"
               and "properties" in d)


def test_the_cli_prints_the_schema(capsys, tmp_path):
    assert main(["schema", "request"]) == 0
    assert json.loads(capsys.readouterr().out) == document_schema("request")
    out = tmp_path / "s.json"
    assert main(["schema", "result", "-o", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == document_schema("result")
    assert main(["schema", "nodes"]) == 2
    with pytest.raises(InvalidInputError):
        document_schema("nodes")


def test_the_new_fields_are_in_the_schema():
    request = document_schema("request")["$defs"]
    assert {"labels", "nodeName", "affinity", "topologySpreadConstraints", "hostPorts"} <= set(
        request["PodDoc"]["properties"])
    assert "tolerationSeconds" in request["Toleration"]["properties"]
    assert sorted(request["NodeSelectorRequirement"]["properties"]["operator"]["enum"]) == sorted(
        ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    snapshot = document_schema("snapshot")["$defs"]
    assert "affinity" in snapshot["RunningPod"]["properties"] and "timeAdded" in snapshot["Taint"]["properties"]


def test_documents_using_every_new_field_validate_and_decode():
    assert list(_validator("snapshot").iter_errors(SNAPSHOT_WITH_EVERY_FIELD)) == []
    assert list(_validator("request").iter_errors(REQUEST_WITH_EVERY_FIELD)) == []
    snapshot = snapshot_from_dict(SNAPSHOT_WITH_EVERY_FIELD)
    assert snapshot.nodes[0].pods[0].affinity is not None
    request = request_from_dict(REQUEST_WITH_EVERY_FIELD)
    assert request.pods[0].topology_spread_constraints[0].min_domains == 2
    assert request.pods[0].host_ports[0].protocol == "UDP" and snapshot.nodes[0].pods[0].host_ports[0].host_port == 5432


@pytest.mark.parametrize(
    ("kind", "document", "path", "value"),
    [
        ("request", REQUEST_WITH_EVERY_FIELD, ("pods", 0, "affinity", "nodeAffinity",
                                               "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
                                               0, "matchExpressions", 0, "operator"), "Near"),
        ("request", REQUEST_WITH_EVERY_FIELD, ("pods", 0, "topologySpreadConstraints", 0, "maxSkew"), 0),
        ("request", REQUEST_WITH_EVERY_FIELD, ("pods", 0, "labels"), ["app"]),
        ("request", REQUEST_WITH_EVERY_FIELD, ("pods", 0, "hostPorts", 0, "protocol"), "HTTP"),
        ("snapshot", SNAPSHOT_WITH_EVERY_FIELD, ("nodes", 0, "pods", 0, "hostPorts", 0, "hostPort"), 0),
        ("snapshot", SNAPSHOT_WITH_EVERY_FIELD, ("nodes", 0, "taints", 0, "effect"), "Sometimes"),
        ("snapshot", SNAPSHOT_WITH_EVERY_FIELD, ("nodes", 0, "pods", 0, "affinity", "podAntiAffinity", "extra"), 1),
    ],
)
def test_a_malformed_document_fails_the_schema_and_the_decoder(kind, document, path, value):
    bad = copy.deepcopy(document)
    target = bad
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    assert not _validator(kind).is_valid(bad)
    with pytest.raises(InvalidInputError):
        (snapshot_from_dict if kind == "snapshot" else request_from_dict)(bad)


def test_the_demo_documents_and_a_result_validate():
    snapshot, request = load_demo_document("demo_snapshot.json"), load_demo_document("demo_request.json")
    assert list(_validator("snapshot").iter_errors(snapshot)) == []
    assert list(_validator("request").iter_errors(request)) == []
    assert list(_validator("result").iter_errors(placer.place(snapshot, request).to_dict())) == []


def test_the_kubernetes_importers_write_valid_documents():
    snapshot = import_kubernetes(K8S / "handmade-nodes.json", K8S / "handmade-pods.json").document
    assert list(_validator("snapshot").iter_errors(snapshot)) == []
    request = import_workloads([K8S / "podgroup-scheduling.x-k8s.io-v1alpha1_scheduler-plugins-install.yaml",
                                K8S / "deployment-podgroup-label_scheduler-plugins-install.yaml",
                                K8S / "pod-gpu-limit-toleration_k8s-device-plugin-readme.yaml"]).document
    assert list(_validator("request").iter_errors(request)) == []
