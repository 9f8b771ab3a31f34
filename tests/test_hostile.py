"""The hostile-input contract: nesting bounded, repeated keys refused in every importer,
echoed values cut short, every library error a PlacerError, no partial file left behind."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placer
from placer.adapters.kubernetes.snapshot import import_kubernetes
from placer.adapters.kubernetes.workloads import import_workloads
from placer.adapters.kueue.objects import read_kueue
from placer.exceptions import InvalidInputError, PlacerError
from placer.diagnostics.explain import explain
from placer.diagnostics.report import cluster_report
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

    from placer.serve.extender import Extender
    from placer.serve.app import create_app

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


# ----------------------------------------------------------------------------- every error a PlacerError

HOSTILE_VALUES = (
    None, True, 0, -1, 2**64, 2**20000, 1.5, float("nan"),
    float("inf"), -float("inf"), "", "\x00\x07", "x" * 300, b"bytes", [], [[]], [None], {}, {"": {}},
    {"a": [1, {"b": None}]}, [{}] * 3,
)


def deep_value(levels: int) -> list:
    out: list = []
    for _ in range(levels):
        out = [out]
    return out


def paths_in(doc, prefix=()):
    """Every path of ``doc``: mapping keys and list indices, containers and leaves."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths_in(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths_in(v, (*prefix, i))


@st.composite
def mutated_document(draw, doc):
    """``doc`` (copied) with 1 to 3 values replaced by hostile ones, or hostile keys or items added."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(paths_in(doc))
        path = draw(st.sampled_from(paths))
        value = draw(st.one_of(st.sampled_from(HOSTILE_VALUES), st.integers(5, 70).map(deep_value),
                               st.text(max_size=5)))
        value = copy.deepcopy(value)
        if not path:
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        how = draw(st.sampled_from(("replace", "add")))
        target = parent[path[-1]]
        if how == "add" and isinstance(target, dict):
            target[draw(st.sampled_from(("name", "gpus", "x", "", "\x07", "metadata", 0, None, ("t",), b"k")))] = value
        elif how == "add" and isinstance(target, list):
            target.append(value)
        else:
            parent[path[-1]] = value
    return doc


def placer_errors_only(call, *args, **kwargs) -> None:
    """Run ``call``: any exception it raises must be a PlacerError."""
    try:
        call(*args, **kwargs)
    except PlacerError:
        pass
    except Exception as error:
        raise AssertionError(f"{getattr(call, '__qualname__', call)} raised {error!r}, not a PlacerError") from error


SNAPSHOT = json.loads((Path(placer.__file__).parent / "data" / "demo_snapshot.json").read_text())
REQUEST = json.loads((Path(placer.__file__).parent / "data" / "demo_request.json").read_text())
FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck))  # the profile's examples (conftest)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the files of every example (each example overwrites them)."""
    return tmp_path_factory.mktemp("fuzz")


def as_json_file(doc, path: Path) -> Path:
    """``doc`` written to ``path`` as JSON (``NaN`` included, bytes as text)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        path.write_text(json.dumps(doc, default=repr, skipkeys=True))
    finally:
        sys.set_int_max_str_digits(limit)
    return path


@FUZZ
@given(snapshot=mutated_document(SNAPSHOT), request=mutated_document(REQUEST), as_file=st.booleans(),
       option=st.sampled_from(HOSTILE_VALUES + ("best-fit",)))
def test_the_library_entry_points_raise_only_placer_errors(scratch, snapshot, request, as_file, option):
    if as_file:
        snapshot = as_json_file(snapshot, scratch / "cluster.json")
        request = as_json_file(request, scratch / "request.json")
    placer_errors_only(placer.load_snapshot, snapshot)
    placer_errors_only(placer.load_request, request)
    placer_errors_only(placer.place, snapshot, request)
    placer_errors_only(placer.place, SNAPSHOT, REQUEST, policy=option)
    placer_errors_only(placer.place, SNAPSHOT, REQUEST, seed=option)
    placer_errors_only(placer.place, SNAPSHOT, REQUEST, preemption=option)
    placer_errors_only(placer.defrag, SNAPSHOT, REQUEST, max_moves=option)
    placer_errors_only(explain, snapshot, request)
    placer_errors_only(placer.preempt, snapshot, request)
    placer_errors_only(lambda: cluster_report(placer.load_snapshot(snapshot)))
    try:
        result = placer.place(SNAPSHOT, REQUEST).to_dict()
    except PlacerError:  # pragma: no cover - the demo documents place
        raise AssertionError("the demo does not place")
    placer_errors_only(placer.check_placement, snapshot, request, result)


@FUZZ
@given(result=mutated_document(placer.place(SNAPSHOT, REQUEST).to_dict()))
def test_loading_or_checking_a_mutated_result_raises_only_placer_errors(result):
    placer_errors_only(placer.load_result, result)
    placer_errors_only(placer.check_placement, SNAPSHOT, REQUEST, result)


@pytest.mark.parametrize("index", [64, 2**40, 10**5000], ids=["64", "2**40", "10**5000"])
@pytest.mark.parametrize("key", ["assignments", "moves"])
def test_a_result_gpu_index_no_node_can_have_is_refused_by_the_schema(key, index):
    """Found by the fuzz test above: a result's GPU index had no upper bound, so a huge one
    passed load_result and broke check_placement's own message (Python refuses to print an
    integer of more than 4,300 digits)."""
    result = placer.place(SNAPSHOT, REQUEST).to_dict()
    entry = {"pod": "p", "node": "n", "gpus": [index]} if key == "assignments" else {"pod": "p", "from": "a", "to": "b", "gpus": [index]}
    result[key] = [entry]
    for call in (lambda: placer.load_result(result), lambda: placer.check_placement(SNAPSHOT, REQUEST, result)):
        with pytest.raises(InvalidInputError, match=rf"{key}\[0\]\.gpus\[0\]: expected a GPU index \(an integer from 0 to 63\)"):
            call()


@FUZZ
@given(snapshot=mutated_document(SNAPSHOT), pods=mutated_document(REQUEST["pods"]), data=st.data())
def test_a_cluster_and_its_methods_raise_only_placer_errors(snapshot, pods, data):
    try:
        cluster = placer.Cluster(snapshot)
    except PlacerError:
        cluster = placer.Cluster(SNAPSHOT)
    pod = pods[0] if pods and isinstance(pods, list) else pods
    node = data.draw(st.sampled_from((*cluster.node_names[:2], "", "nowhere", None, 3, "\x07")))
    placer_errors_only(cluster.place, pods)
    option = data.draw(st.sampled_from(HOSTILE_VALUES))
    placer_errors_only(cluster.place, pods, gang=option)
    placer_errors_only(cluster.place, REQUEST["pods"][:1], policy=option)
    placer_errors_only(cluster.place, REQUEST["pods"][:1], seed=option)
    placer_errors_only(cluster.node_scores, pod)
    placer_errors_only(cluster.place_on, pod, node)
    placer_errors_only(cluster.node_free, node)
    placer_errors_only(cluster.release, node)
    placer_errors_only(cluster.bind, data.draw(mutated_document(placer.place(SNAPSHOT, REQUEST).to_dict())))


NODE_LIST = json.loads((DATA / "e2e" / "nodes.json").read_text())
POD_LIST = json.loads((DATA / "e2e" / "pods.json").read_text())


@FUZZ
@given(nodes=mutated_document(NODE_LIST), pods=mutated_document(POD_LIST))
def test_the_kubernetes_importers_raise_only_placer_errors(scratch, nodes, pods):
    nodes_file, pods_file = as_json_file(nodes, scratch / "nodes.json"), as_json_file(pods, scratch / "pods.json")
    placer_errors_only(import_kubernetes, nodes_file, pods_file)
    placer_errors_only(import_workloads, pods_file)
    placer_errors_only(read_kueue, [pods])


@FUZZ
@given(values=st.lists(st.sampled_from(HOSTILE_VALUES + (0, 1, 3, 7, 8, [0, 1], "tiling")), min_size=4, max_size=4),
       request=mutated_document(REQUEST))
def test_select_gpus_defrag_and_move_raise_only_placer_errors(values, request):
    topology, available, size, objective = values
    placer_errors_only(placer.select_gpus, topology, available, size, objective=objective)
    placer_errors_only(placer.select_gpus, None, [0, 1, 2, 3], size, required=available)
    cluster = placer.Cluster(SNAPSHOT)
    placer_errors_only(cluster.defrag, request, max_moves=size)
    placer_errors_only(cluster.move, available)


def test_yaml_aliases_that_expand_past_the_bound_are_refused(tmp_path):
    from placer.schema.files import MAX_ALIASED_NODES

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]  # 10**9 leaves
    (tmp_path / "laughs.yaml").write_text("\n".join(lines) + "\n")
    too_many = rf"laughs\.yaml:\d+: aliases that stand for more than {MAX_ALIASED_NODES}"
    with pytest.raises(InvalidInputError, match=too_many):
        placer.load_snapshot(tmp_path / "laughs.yaml")
    (tmp_path / "shared.yaml").write_text("nodes: &n [a, b]\nmore: [*n, *n]\n")  # a few aliases are fine
    with pytest.raises(InvalidInputError, match="apiVersion"):
        placer.load_snapshot(tmp_path / "shared.yaml")


@pytest.mark.parametrize("read", [placer.load_snapshot, import_kubernetes, import_workloads, lambda p: read_kueue([p])])
def test_a_file_name_with_a_nul_is_an_input_error(read):
    with pytest.raises(InvalidInputError, match="holds no NUL"):
        read("cluster\x00.json")
