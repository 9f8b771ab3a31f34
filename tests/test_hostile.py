"""The hostile-input contract: nesting bounded, repeated keys refused in every importer,
echoed values cut short, every library error a PlacerError, no partial file left behind."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from placer.adapters.kubernetes import import_kubernetes
from placer.exceptions import InvalidInputError
from placer.schema import snapshot_from_dict
from placer.schema.files import MAX_NESTING, check_json_nesting

DATA = Path(__file__).parent / "data"
NODES = DATA / "k8s" / "handmade-nodes.json"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placer", *args], capture_output=True, text=True, cwd=cwd)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("placer: error: "), done.stderr
    return lines[0]


def snapshot_with_labels(labels: str) -> str:
    """A one-node snapshot's JSON text whose node's labels are ``labels`` as written."""
    return (
        '{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [\n'
        f'  {{"name": "a", "gpus": 8, "labels": {labels}}}\n]}}\n'
    )


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


# ----------------------------------------------------------------------------- nesting


@pytest.mark.parametrize("levels", [MAX_NESTING - 2, 5000, 200_000])
def test_deep_json_is_one_error_line_at_its_line_and_column(tmp_path, levels):
    path = tmp_path / "cluster.json"
    path.write_text(snapshot_with_labels(nested(levels)))  # the labels open level 4
    line = one_error_line(run_cli("report", str(path), cwd=tmp_path))
    column = len('  {"name": "a", "gpus": 8, "labels": ') + MAX_NESTING - 2
    assert line == (f"placer: error: {path}:2: nesting deeper than {MAX_NESTING} levels of lists and mappings "
                    f"(column {column})")


def test_nesting_up_to_the_bound_is_an_ordinary_type_error(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(snapshot_with_labels(nested(MAX_NESTING - 3)))  # the document's 3 levels above
    assert "labels: expected a mapping" in one_error_line(run_cli("report", str(path), cwd=tmp_path))


def test_brackets_inside_strings_are_no_nesting():
    text = snapshot_with_labels(json.dumps({"k": "[{" * 100 + '\\"' + "[" * 100}))
    assert snapshot_from_dict(json.loads(text)).nodes[0].labels["k"].startswith("[{[{")
    check_json_nesting(text.encode(), "t.json")  # no error


@pytest.mark.parametrize("labels", [nested(200_000), "&a [*a]", "&a [[[[x]]]]\n  more: " + "[" * 62 + "*a" + "]" * 62])
def test_deep_or_recursive_yaml_is_one_error_line(tmp_path, labels):
    path = tmp_path / "cluster.yaml"
    path.write_text("apiVersion: placer/v1\nkind: ClusterSnapshot\nnodes:\n- name: a\n  gpus: 8\n"
                    f"  labels: {labels}\n")
    line = one_error_line(run_cli("report", str(path), cwd=tmp_path))
    assert line.startswith(f"placer: error: {path}:"), line
    assert "nesting deeper than 64 levels" in line or "inside the node it stands for" in line


def test_a_deep_or_self_holding_mapping_names_its_json_path():
    doc = json.loads(snapshot_with_labels("{}"))
    deep: list = []
    doc["nodes"][0]["labels"] = {"x": deep}
    for _ in range(MAX_NESTING):
        deep.append([])
        deep = deep[0]
    with pytest.raises(InvalidInputError, match=r"^nodes\[0\]\.labels\.x(\[0\])+: nesting deeper than 64"):
        snapshot_from_dict(doc)
    selfish: dict = {}
    selfish["me"] = selfish
    doc["nodes"][0]["labels"] = selfish
    with pytest.raises(InvalidInputError, match=r"^nodes\[0\]\.labels(\.me)+: nesting deeper than 64"):
        snapshot_from_dict(doc)


def test_deep_kubernetes_objects_are_refused_at_their_line(tmp_path):
    nodes = json.loads(NODES.read_text())
    text = json.dumps(nodes, indent=1).replace('"labels": {', '"labels": {"deep": ' + nested(100) + ", ", 1)
    (tmp_path / "nodes.json").write_text(text)
    with pytest.raises(InvalidInputError, match=r"nodes\.json:\d+: nesting deeper than 64"):
        import_kubernetes(tmp_path / "nodes.json")
    (tmp_path / "nodes.yaml").write_text("items:\n- metadata:\n    labels: " + nested(100_000) + "\n")
    with pytest.raises(InvalidInputError, match=r"nodes\.yaml:3: nesting deeper than 64"):
        import_kubernetes(tmp_path / "nodes.yaml")


def test_a_deep_extender_body_is_a_400_not_a_500():
    pytest.importorskip("starlette")
    from test_extender import NAMES, cluster_document, pod
    from test_serve import asgi_post

    from placer.adapters.kube_extender import Extender
    from placer.serve import create_app

    app = create_app(Extender(cluster_document()))
    body = json.dumps({"Pod": pod("a", 1), "NodeNames": NAMES}).encode()
    deep = body.replace(b'"metadata": {', b'"metadata": {"annotations": ' + nested(100_000).encode() + b", ", 1)
    status, result = asgi_post(app, "/filter", deep)
    assert status == 400 and result["Error"].startswith("POST /filter:1: nesting deeper than 64 levels"), result
    status, result = asgi_post(app, "/filter", body)
    assert status == 200, result


# ----------------------------------------------------------------------------- repeated keys


def test_import_kubernetes_refuses_a_repeated_json_key_at_its_line(tmp_path):
    text = NODES.read_text()
    first = text.index('"metadata": {') + len('"metadata": {')
    (tmp_path / "nodes.json").write_text(text[:first] + '"name": "twice", ' + text[first:])
    added, original = (text.count("\n", 0, at) + 1 for at in (first, text.index('"name"', first)))
    done = run_cli("import", "kubernetes", "--nodes", "nodes.json", cwd=tmp_path)
    assert one_error_line(done) == f"placer: error: nodes.json:{original}: duplicate key 'name', first at line {added}"


def test_import_kubernetes_refuses_a_repeated_escaped_json_key(tmp_path):
    (tmp_path / "nodes.json").write_text('{"items": [], "kind": "List", "\\u006bind": "List"}')
    with pytest.raises(InvalidInputError, match="duplicate key 'kind'"):
        import_kubernetes(tmp_path / "nodes.json")


def test_the_kueue_configuration_in_a_configmap_refuses_a_repeated_key(tmp_path):
    from placer.adapters.kueue import read_kueue

    config = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nkind: Configuration\n"
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config"},
           "data": {"controller_manager_config.yaml": config}}
    (tmp_path / "kueue.json").write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"the embedded Kueue Configuration:3: .*duplicate key 'kind'"):
        read_kueue([tmp_path / "kueue.json"])


# ----------------------------------------------------------------------------- bounded messages

HUGE = "n" * 10_000_000


@pytest.mark.parametrize("node", [
    {HUGE: 1, "name": "a", "gpus": 8},  # an unknown field
    {"name": "a", "gpus": 8, "type": HUGE},  # an unknown node type
    {"name": HUGE + "\u0007", "gpus": 8},  # a control character
    {"name": "a", "gpus": 8, "labels": {HUGE: ["x"]}},  # a path through a huge key
])
def test_a_value_of_megabytes_is_echoed_in_a_short_error_line(tmp_path, node):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [node]}))
    line = one_error_line(run_cli("report", str(path), cwd=tmp_path))
    assert len(line) < 400 and "nnnnnnnnnn... (100000" in line.replace("'", ""), line


def test_a_slurm_line_of_megabytes_is_echoed_in_a_short_error_line(tmp_path):
    (tmp_path / "nodes.txt").write_text(f"{HUGE} NodeName=a\n")
    line = one_error_line(run_cli("import", "slurm", "--nodes", "nodes.txt", cwd=tmp_path))
    assert len(line) < 400, line
