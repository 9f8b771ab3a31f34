"""The schema on its decoder: hostile input refused with one clear line, files and dicts
decoded alike, and the quick first pass agreeing with the exact checks."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placer import schema
from placer.cli import main
from placer.exceptions import InvalidInputError
from placer.limits import MAX_QUANTITY, MAX_REPLICAS, MAX_REQUEST_PODS
from placer.schema.files import first_duplicate_key
from placer.schema.documents import LABELS, SnapshotDoc
from placer.schema.snapshot import snapshot_from_doc


def snapshot_doc() -> dict[str, Any]:
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "topologyLevels": ["rack"],
        "nodeTypes": {"a100": {"gpuModel": "A100", "gpus": 8, "gpuMemoryMiB": 81920, "cpuMilli": 64000,
                               "memoryMiB": 512000, "maxPods": 8}},
        "nodes": [
            {"name": "n0", "type": "a100", "topology": {"rack": "r0"},
             "pods": [{"name": "ns/a", "gpus": [0, 1], "cpuMilli": 4000}]},
            {"name": "n1", "type": "a100", "topology": {"rack": "r0"}, "labels": {"pool": "x"},
             "pods": [{"name": "ns/b", "gpuShares": {"3": 500}, "gpuMemoryMiB": {"3": 1000}},
                      {"name": "ns/c", "unknownGpus": 2}]},
            {"name": "n2", "type": "a100", "cpuMilli": 32000, "unhealthyGpus": [7]},
            {"name": "n3", "gpus": 4, "gpuModel": "H100"},
        ],
    }


def request_doc() -> dict[str, Any]:
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest",
            "pods": [{"name": "p", "gpus": 1}, {"name": "q", "replicas": 3, "gpus": 2}]}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- files and dicts


def test_a_file_decodes_to_what_its_dict_decodes_to(tmp_path: Path) -> None:
    doc = snapshot_doc()
    from_file = schema.coerce_snapshot(write(tmp_path / "s.json", json.dumps(doc, indent=1)))
    assert from_file == schema.snapshot_from_dict(doc)
    assert from_file == schema.coerce_snapshot(write(tmp_path / "s.yaml", json.dumps(doc)))
    n1 = from_file.nodes[1]
    assert n1.pods[1].gpus == (6, 7) and not n1.pods[1].gpu_indices_known
    assert from_file.nodes[2].hardware.cpu_milli == 32000 and from_file.nodes[2].hardware.gpus == 8


def test_round_trip_through_to_dict() -> None:
    snap = schema.snapshot_from_dict(snapshot_doc())
    assert schema.snapshot_from_dict(snap.to_dict()) == snap
    req = schema.request_from_dict(request_doc())
    assert schema.request_from_dict(req.to_dict()) == req


# ----------------------------------------------------------------------------- hostile input


def expect(source: Any, build: Any, where: str, what: str) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as info:
        build(source)
    assert info.value.where == where, info.value
    assert what in info.value.what, info.value
    return info.value


@pytest.mark.parametrize(
    "text, line, key",
    [
        ('{"apiVersion": "placer/v1",\n"kind": "ClusterSnapshot",\n"kind": "ClusterSnapshot", "nodes": []}', 3, "kind"),
        ('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [\n{"name": "a",\n"labels": {"x": "1",\n "x": "2"}}]}',
         4, "x"),
        ('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"name": "a", "name": "b"}]}', 1, "name"),
    ],
)
def test_json_duplicate_keys_are_refused(tmp_path: Path, text: str, line: int, key: str) -> None:
    path = write(tmp_path / "dup.json", text)
    expect(path, schema.coerce_snapshot, f"{path}:{line}", f"duplicate key {key!r}")


def test_json_duplicate_keys_written_differently_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.json", '{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [], "k\\u0069nd": "x"}')
    expect(path, schema.coerce_snapshot, str(path), "duplicate key 'kind'")


def test_yaml_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.yaml", "apiVersion: placer/v1\nkind: ClusterSnapshot\nnodes:\n- name: a\n  name: b\n")
    expect(path, schema.coerce_snapshot, f"{path}:5", "duplicate key 'name', first at line 4")


def test_yaml_merge_keys_may_be_overridden(tmp_path: Path) -> None:
    path = write(tmp_path / "merge.yaml", "x: &b {a: 1}\ny:\n  <<: *b\n  a: 2\n")
    assert schema.load_document(path) == {"x": {"a": 1}, "y": {"a": 2}}


def test_duplicate_key_scanner_on_its_own() -> None:
    assert first_duplicate_key(b'{"a": 1, "b": {"a": 2}}') is None
    assert first_duplicate_key(b'[{"x": 1}, {"x": 2}]') is None
    assert first_duplicate_key(b'{"s": "\\"a\\": 1, \\"a\\": 2"}') is None
    text = b'{"a": 1, "b": {"c": 2, "c": 3}, "a": 4}'
    assert first_duplicate_key(text) == (text.index(b'"c"', 16), text.index(b'"c"'))
    many = "{" + ", ".join(f'"k{i}": {i}' for i in range(100)) + ', "k57": 0}'
    second, first = first_duplicate_key(many.encode())
    assert many[first:first + 5] == '"k57"' and many[second:second + 5] == '"k57"' and first < second


@pytest.mark.parametrize(
    "mutate, where, what",
    [
        (lambda d: d["nodes"][0]["pods"][0].update(cpuMilli=2**63), "nodes[0].pods[0].cpuMilli",
         f"an integer in 0..{MAX_QUANTITY}, got 9223372036854775808"),
        (lambda d: d["nodeTypes"]["a100"].update(memoryMiB=10**30), "nodeTypes.a100.memoryMiB", "got 1000000000000000000000000000000"),
        (lambda d: d["nodes"][0]["pods"][0].update(gpus=[0, 2**70]), "nodes[0].pods[0].gpus[1]", "got 1180591620717411303424"),
        (lambda d: d["nodes"][0].update(name="n\u0007"), "nodes[0].name", "without control characters"),
        (lambda d: d["nodes"][1]["pods"][0].update(name="x\ny"), "nodes[1].pods[0].name", "(U+000A)"),
        (lambda d: d["nodes"][0]["topology"].update(rack="r\u001b"), "nodes[0].topology.rack", "control characters"),
        (lambda d: d["nodes"][0].update(gpu=1), "nodes[0]", 'unknown field "gpu" (did you mean "gpus"?)'),
        (lambda d: d["nodeTypes"]["a100"].update(gpuTopology={"nvswitch": True, "nvswich": True}),
         "nodeTypes.a100.gpuTopology", 'unknown field "nvswich" (did you mean "nvswitch"?)'),
        (lambda d: d["nodes"][3].update(nics=[{"name": "m", "matrix": ["PIX"] * 4, "gpus": 1}]),
         "nodes[3].nics[0]", 'unknown field "gpus"'),
    ],
)
def test_hostile_snapshot_fields(tmp_path: Path, mutate: Any, where: str, what: str) -> None:
    doc = snapshot_doc()
    mutate(doc)
    expect(doc, schema.snapshot_from_dict, where, what)
    path = write(tmp_path / "s.json", json.dumps(doc))
    err = expect(path, schema.coerce_snapshot, f"{path}: {where}", what)
    assert str(err).startswith(str(path))


def test_integer_literal_of_a_million_digits(tmp_path: Path) -> None:
    text = json.dumps(snapshot_doc()).replace('"cpuMilli": 4000', '"cpuMilli": ' + "9" * 1_000_000)
    path = write(tmp_path / "huge.json", text)
    expect(path, schema.coerce_snapshot, f"{path}: nodes[0].pods[0].cpuMilli", "an integer of 1000000 digits")


@pytest.mark.parametrize("replicas", [10**7, 10**12, 2**63 - 1])
def test_replicas_are_bounded_before_expansion(replicas: int) -> None:
    doc = request_doc()
    doc["pods"][1]["replicas"] = replicas
    tracemalloc.start()
    try:
        expect(doc, schema.request_from_dict, "pods[1].replicas", f"at most {MAX_REPLICAS} replicas")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20


def test_the_expanded_request_is_bounded() -> None:
    doc = request_doc()
    doc["pods"] = [{"name": f"p{i}", "replicas": MAX_REPLICAS} for i in range(MAX_REQUEST_PODS // MAX_REPLICAS + 1)]
    expect(doc, schema.request_from_dict, "pods", f"over the limit of {MAX_REQUEST_PODS}")


def test_request_paths_are_as_written() -> None:
    snap = schema.snapshot_from_dict(snapshot_doc())
    doc = {**request_doc(), "gangs": {"h": {}}}
    doc["pods"].append({"name": "late", "gang": "h", "resources": {"example.com/x": 1}})
    with pytest.raises(InvalidInputError) as info:
        schema.coerce_request(doc, schema.snapshot_facts(snap))
    assert info.value.where == "pods[2].resources"  # 1 + 3 replicas before it, third as written


def test_place_names_request_pods_as_written(tmp_path: Path) -> None:
    import placer

    req = write(tmp_path / "r.json", json.dumps({**request_doc(), "gangs": {"h": {}}, "pods": request_doc()["pods"] + [
        {"name": "late", "gang": "h", "resources": {"example.com/x": 1}}]}))
    with pytest.raises(InvalidInputError) as info:
        placer.place(snapshot_doc(), str(req))
    assert str(info.value).startswith(f"{req}: pods[2].resources: pod 'late' of gang 'h' asks for extended")


def test_a_pod_asking_for_a_gpu_model_no_node_has_stays_pending() -> None:
    import placer

    doc = {**request_doc(), "pods": [{"name": "p", "gpus": 1}, {"name": "b200", "gpus": 1, "gpuModels": ["B200"]}]}
    result = placer.place(snapshot_doc(), doc)
    assert [a.pod for a in result.assignments] == ["p"]
    assert result.unschedulable[0].reason == (
        "0/4 nodes are available: 4 node(s) didn't match Pod's GPU model (no node has B200; the cluster has "
        "A100, H100)."
    )
    from placer.diagnostics.explain import explain
    from reference import ReferenceCluster

    assert ReferenceCluster(schema.snapshot_from_dict(snapshot_doc())).schedule(schema.request_from_dict(doc)) == result
    pending = explain(snapshot_doc(), doc).pending[0]
    assert pending.cause == "registration" and pending.detail == "no node has GPU model B200; the cluster has A100, H100"


# ----------------------------------------------------------------------------- command line


@pytest.mark.parametrize(
    "text, where",
    [
        ('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"name": "a", "name": "b"}]}', ":1: duplicate key"),
        ('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"name": "a", "gpus": 9223372036854775808}]}',
         ": nodes[0].gpus: expected an integer in 0..64"),
        ('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"name": "a\\u0000"}]}', ": nodes[0].name: expected a name"),
        ('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"nmae": "a"}]}',
         ': nodes[0]: unknown field "nmae" (did you mean "name"?)'),
    ],
)
def test_cli_one_line_exit_2_no_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str) -> None:
    snap = write(tmp_path / "snap.json", text)
    req = write(tmp_path / "req.json", json.dumps(request_doc()))
    out = tmp_path / "out.json"
    assert main(["place", str(snap), str(req), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"placer: error: {snap}{where}"), err
    assert "Traceback" not in err and not out.exists()


def test_cli_replicas_bomb_in_a_subprocess(tmp_path: Path) -> None:
    snap = write(tmp_path / "snap.json", json.dumps(snapshot_doc()))
    doc = request_doc()
    doc["pods"][1]["replicas"] = 10**12
    req = write(tmp_path / "req.yaml", json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "placer", "place", str(snap), str(req)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"placer: error: {req}: pods[1].replicas: expected at most {MAX_REPLICAS} replicas of one pod, got {10**12}\n"


# ----------------------------------------------------------------------------- first pass = exact checks


def _outcome(doc: Any, fast: bool) -> Any:
    try:
        decoded = schema.files.decode_object(copy.deepcopy(doc), SnapshotDoc, LABELS)
        return snapshot_from_doc(decoded, fast=fast)
    except InvalidInputError as e:
        return str(e)


_EDITS = st.sampled_from([
    ("pods", 0, "gpus", [0, 8]), ("pods", 0, "gpus", [1, 1]), ("pods", 0, "gpus", [-1]), ("pods", 0, "cpuMilli", 64001),
    ("pods", 0, "gpus", [7]), ("pods", 0, "name", "ns/b"), ("pods", 0, "name", "ns/z"), ("pods", 0, "unknownGpus", 3),
    ("pods", 0, "gpuShares", {"0": 300}), ("unhealthyGpus", None, None, [0]), ("name", None, None, "n1"),
    ("type", None, None, "nope"), ("cpuMilli", None, None, 1), ("maxPods", None, None, 0), ("topology", None, None, {"zone": "z"}),
    ("pods", 0, "memoryMiB", 600000), ("gpus", None, None, 1),
])


@given(st.lists(st.tuples(st.integers(0, 3), _EDITS), max_size=3))
def test_first_pass_agrees_with_the_exact_checks(edits: list[tuple[int, tuple[Any, ...]]]) -> None:
    doc = snapshot_doc()
    for node, (key, index, field, value) in edits:
        target = doc["nodes"][node]
        if key == "pods":
            pods = target.setdefault("pods", [{"name": f"new-{node}"}])
            pods[index][field] = copy.deepcopy(value)
        else:
            target[key] = copy.deepcopy(value)
    fast, exact = _outcome(doc, True), _outcome(doc, False)
    assert fast == exact


def test_python_objects_that_are_not_json_are_invalid_input() -> None:
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"name": {1, 2}}]}
    expect(doc, schema.snapshot_from_dict, "nodes[0].name", "a non-empty string, got a set")


# ----------------------------------------------------------------------------- fuzz: only InvalidInputError escapes

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_documents(draw: st.DrawFn, make: Any) -> Any:
    doc = make()
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        op = draw(st.sampled_from(["replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = draw(_JSON_VALUES)
        elif op == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["gpus", "name", "type", "pods", "x", "cpuMilli", "gpuShares"]))] = draw(_JSON_VALUES)
    return doc


@given(mutated_documents(snapshot_doc))
def test_any_damaged_snapshot_is_accepted_or_refused_cleanly(doc: Any) -> None:
    try:
        snap = schema.snapshot_from_dict(doc)
    except InvalidInputError:
        return
    assert schema.snapshot_from_dict(snap.to_dict()) == snap


@given(mutated_documents(request_doc))
def test_any_damaged_request_is_accepted_or_refused_cleanly(doc: Any) -> None:
    try:
        req = schema.request_from_dict(doc)
    except InvalidInputError:
        return
    assert schema.request_from_dict(req.to_dict()) == req


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".txt"])
@given(data=st.data())
def test_any_damaged_json_text_is_accepted_or_refused_cleanly(tmp_path_factory: Any, suffix: str, data: st.DataObject) -> None:
    text = json.dumps(snapshot_doc(), indent=1)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text)))
        text = text[:i] + data.draw(st.sampled_from(['"', "{", "}", ",", ":", "\\\\", "9" * 30, '"name": "x", ', ""])) + text[i + 1:]
    path = tmp_path_factory.mktemp("fuzz") / f"s{suffix}"
    path.write_text(text)
    try:
        schema.coerce_snapshot(path)
    except InvalidInputError as e:
        assert str(e).startswith(str(path))
