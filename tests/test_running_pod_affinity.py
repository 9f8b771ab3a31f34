"""A running pod's ``affinity`` is checked as a pending pod's on every decode path of a
snapshot: a dict, a JSON or YAML file, the compiled first pass and the exact checks alone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml


from placer.exceptions import InvalidInputError
from placer.schema import LABELS, coerce_snapshot, snapshot_from_dict
from placer.schema.documents import SnapshotDoc
from placer.schema.files import decode_object
from placer.schema.snapshot import snapshot_from_doc

NO_VALUES = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In"}]}]}}}
SELECTED_NAMESPACES = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}
FIELD_NOT_NAME = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}}]}}


def snapshot(affinity: dict[str, Any]) -> dict[str, Any]:
    pods = [{"name": "ns/plain", "gpus": [0], "cpuMilli": 1000, "memoryMiB": 1024},
            {"name": "ns/ruled", "gpus": [1], "labels": {"app": "a"}, "affinity": affinity}]
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot",
            "nodeTypes": {"dgx": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000, "memoryMiB": 512000}},
            "nodes": [{"name": "n0", "type": "dgx"}, {"name": "n1", "type": "dgx", "pods": pods}]}


def refusals(doc: dict[str, Any], tmp_path: Path) -> list[tuple[str, str]]:
    """The error of each path, the file's name taken off its location."""
    (tmp_path / "s.json").write_text(json.dumps(doc))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    paths = {
        "dict": lambda: snapshot_from_dict(doc),
        "coerced dict": lambda: coerce_snapshot(doc),
        "json file": lambda: coerce_snapshot(tmp_path / "s.json"),
        "yaml file": lambda: coerce_snapshot(tmp_path / "s.yaml"),
        "compiled pass": lambda: snapshot_from_doc(decode_object(doc, SnapshotDoc, LABELS), fast=True),
        "exact checks": lambda: snapshot_from_doc(decode_object(doc, SnapshotDoc, LABELS), fast=False),
    }
    out = []
    for name, decode in paths.items():
        with pytest.raises(InvalidInputError) as info:
            decode()
        out.append((info.value.where.rpartition(": ")[2], info.value.what))
    return out


@pytest.mark.parametrize("affinity, where, what", [
    (NO_VALUES, "nodes[1].pods[1].affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].values", "operator In needs values"),
    (SELECTED_NAMESPACES, "nodes[1].pods[1].affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                          "[0].namespaceSelector", "a namespaceSelector with requirements"),
    (FIELD_NOT_NAME, "nodes[1].pods[1].affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
                     ".preference.matchFields[0].key", "the one field a node selector term matches is metadata.name"),
])
def test_an_invalid_running_pod_affinity_is_refused_alike_on_every_path(
        affinity: dict[str, Any], where: str, what: str, tmp_path: Path) -> None:
    got = refusals(snapshot(affinity), tmp_path)
    assert {w for w, _ in got} == {where}, got
    assert len({m for _, m in got}) == 1 and got[0][1].startswith(what), got


def test_a_valid_running_pod_affinity_loads_on_the_compiled_pass() -> None:
    valid = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}]}}
    doc = snapshot(valid)
    fast = snapshot_from_doc(decode_object(doc, SnapshotDoc, LABELS), fast=True)
    assert fast == snapshot_from_doc(decode_object(doc, SnapshotDoc, LABELS), fast=False) == snapshot_from_dict(doc)
    ruled = fast.nodes[1].pods[1]
    assert ruled.affinity is not None and ruled.affinity.pod_anti_affinity is not None
