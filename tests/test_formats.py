"""Output formats of ``placer place --format``: Kubernetes Bindings, env lines, Slurm lines,
and the Slurm hostlist compression they use."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import placer
from placer.exceptions import InvalidInputError
from placer.formats import (
    OUTPUT_FORMATS,
    compress_hostlist,
    expand_hostlist,
    render,
    render_k8s_bindings,
    to_env,
    to_k8s_bindings,
    to_json,
    to_slurm,
)

SNAPSHOT = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodeTypes": {
        "box4": {"gpuModel": "A100-SXM4-80GB", "gpus": 4, "cpuMilli": 64000, "memoryMiB": 512000}
    },
    "nodes": [
        {"name": "n01", "type": "box4"},
        {"name": "n02", "type": "box4"},
        {"name": "n03", "type": "box4"},
        {"name": "n07", "type": "box4", "pods": [{"name": "ops/monitor", "gpus": [0], "cpuMilli": 1000}]},
    ],
}

REQUEST = {
    "apiVersion": "placer/v1",
    "kind": "PlacementRequest",
    "pods": [
        {"name": "team-a/llm", "replicas": 4, "gang": "team-a/llm", "gpus": 3, "cpuMilli": 8000},
        {"name": "team-b/solo", "gpus": 2, "cpuMilli": 4000},
        {"name": "team-c/dev", "gpus": 1, "gpuMilli": 300, "cpuMilli": 1000},
        {"name": "cpu-job", "cpuMilli": 2000},
        {"name": "team-x/big", "gpus": 8},
    ],
    "gangs": {"team-a/llm": {"topology": {"mode": "unconstrained"}}},
}

NO_GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


@pytest.fixture(scope="module")
def result() -> placer.PlacementResult:
    res = placer.place(SNAPSHOT, REQUEST)
    # The placement these expectations are written for (n07 has 3 free GPUs: 1, 2, 3).
    assert [a.to_dict() for a in res.assignments] == [
        {"pod": "team-a/llm-0", "node": "n07", "gpus": [1, 2, 3], "gang": "team-a/llm"},
        {"pod": "team-a/llm-1", "node": "n01", "gpus": [0, 1, 2], "gang": "team-a/llm"},
        {"pod": "team-a/llm-2", "node": "n02", "gpus": [0, 1, 2], "gang": "team-a/llm"},
        {"pod": "team-a/llm-3", "node": "n03", "gpus": [0, 1, 2], "gang": "team-a/llm"},
        {"pod": "team-c/dev", "node": "n01", "gpus": [3], "gpuMilli": 300},
        {"pod": "cpu-job", "node": "n07", "gpus": []},
    ]
    assert [u.to_dict() for u in res.unschedulable] == [
        {"pod": "team-b/solo", "reason": NO_GPU},
        {"pod": "team-x/big", "reason": NO_GPU},
    ]
    return res


def _binding(ns, name, node, annotations=None):
    meta = {"name": name, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


EXPECTED_BINDINGS = [
    _binding("team-a", "llm-0", "n07", {"placer.io/gpus": "1,2,3", "placer.io/gang": "team-a/llm"}),
    _binding("team-a", "llm-1", "n01", {"placer.io/gpus": "0,1,2", "placer.io/gang": "team-a/llm"}),
    _binding("team-a", "llm-2", "n02", {"placer.io/gpus": "0,1,2", "placer.io/gang": "team-a/llm"}),
    _binding("team-a", "llm-3", "n03", {"placer.io/gpus": "0,1,2", "placer.io/gang": "team-a/llm"}),
    _binding("team-c", "dev", "n01", {"placer.io/gpus": "3", "placer.io/gpu-milli": "300"}),
    _binding("default", "cpu-job", "n07"),
]


# ----------------------------------------------------------------- Kubernetes


def test_k8s_bindings(result):
    assert to_k8s_bindings(result) == EXPECTED_BINDINGS
    # A dict (or a path) of the result works as well.
    assert to_k8s_bindings(result.to_dict()) == EXPECTED_BINDINGS


def test_k8s_bindings_yaml_stream(result):
    text = render_k8s_bindings(result, "yaml")
    assert text.count("---\n") == 6 and text.startswith("---\n")
    assert list(yaml.safe_load_all(text)) == EXPECTED_BINDINGS
    assert render(result, "k8s-binding") == text
    first = text.split("---\n")[1]
    assert first == (
        "apiVersion: v1\n"
        "kind: Binding\n"
        "metadata:\n"
        "  name: llm-0\n"
        "  namespace: team-a\n"
        "  annotations:\n"
        "    placer.io/gpus: 1,2,3\n"
        "    placer.io/gang: team-a/llm\n"
        "target:\n"
        "  apiVersion: v1\n"
        "  kind: Node\n"
        "  name: n07\n"
    )
    # A lone index must stay a string for the annotation.
    assert "    placer.io/gpus: '3'\n" in text


def test_k8s_bindings_json_list(result):
    text = render_k8s_bindings(result, "json")
    assert json.loads(text) == {"apiVersion": "v1", "kind": "List", "items": EXPECTED_BINDINGS}
    assert text.endswith("}\n")


def test_k8s_bindings_empty_and_bad():
    empty = {"apiVersion": "placer/v1", "kind": "PlacementResult", "assignments": [], "unschedulable": []}
    assert render_k8s_bindings(empty) == ""
    assert json.loads(render_k8s_bindings(empty, "json"))["items"] == []
    with pytest.raises(InvalidInputError) as e:
        render_k8s_bindings(empty, "xml")
    assert e.value.where == "fmt"


@pytest.mark.parametrize("pod", ["a/b/c", "/x", "ns/"])
def test_k8s_binding_bad_pod_name(pod):
    res = {
        "apiVersion": "placer/v1",
        "kind": "PlacementResult",
        "assignments": [{"pod": "ok", "node": "n1", "gpus": []}, {"pod": pod, "node": "n1", "gpus": [0]}],
        "unschedulable": [],
    }
    with pytest.raises(InvalidInputError) as e:
        to_k8s_bindings(res)
    assert e.value.where == "assignments[1].pod"
    assert repr(pod) in e.value.what


# ----------------------------------------------------------------- env


def test_env(result):
    assert to_env(result) == (
        "team-a/llm-0 n07 NVIDIA_VISIBLE_DEVICES=1,2,3\n"
        "team-a/llm-1 n01 NVIDIA_VISIBLE_DEVICES=0,1,2\n"
        "team-a/llm-2 n02 NVIDIA_VISIBLE_DEVICES=0,1,2\n"
        "team-a/llm-3 n03 NVIDIA_VISIBLE_DEVICES=0,1,2\n"
        "team-c/dev n01 NVIDIA_VISIBLE_DEVICES=3\n"
        "cpu-job n07 NVIDIA_VISIBLE_DEVICES=none\n"
        f"# unschedulable: team-b/solo: {NO_GPU}\n"
        f"# unschedulable: team-x/big: {NO_GPU}\n"
    )
    assert render(result, "env") == to_env(result)


def test_env_quotes_shell_words():
    res = placer.PlacementResult(
        assignments=(placer.Assignment("ns/it's $HOME", "node 1", (0, 2)),),
        unschedulable=(placer.Unschedulable("ns/x", "line one\nline two"),),
    )
    text = to_env(res)
    assert text == (
        "'ns/it'\"'\"'s $HOME' 'node 1' NVIDIA_VISIBLE_DEVICES=0,2\n"
        "# unschedulable: ns/x: line one line two\n"
    )
    assert shlex.split(text.splitlines()[0]) == ["ns/it's $HOME", "node 1", "NVIDIA_VISIBLE_DEVICES=0,2"]


# ----------------------------------------------------------------- Slurm


def test_slurm(result):
    chose = "n01:0,1,2 n02:0,1,2 n03:0,1,2 n07:1,2,3"
    assert to_slurm(result) == (
        "team-a/llm '--nodelist=n[01-03,07]' --nodes=4 --ntasks-per-node=1 --gres=gpu:3\n"
        f"# team-a/llm: Slurm chooses the GPUs on each node (placer chose {chose}); they cannot be imposed\n"
        "team-c/dev --nodelist=n01 --nodes=1 --ntasks-per-node=1 --gres=gpu:1\n"
        "# team-c/dev: Slurm chooses the GPUs on each node (placer chose n01:3); they cannot be imposed\n"
        "cpu-job --nodelist=n07 --nodes=1 --ntasks-per-node=1\n"
        f"# unschedulable: team-b/solo: {NO_GPU}\n"
        f"# unschedulable: team-x/big: {NO_GPU}\n"
    )
    assert render(result, "slurm") == to_slurm(result)
    # With the snapshot the GRES type is the nodes' GPU model.
    assert to_slurm(result, SNAPSHOT).splitlines()[0].endswith(" --gres=gpu:A100-SXM4-80GB:3")


def test_slurm_whole_nodes_need_no_note_and_uneven_jobs_get_one():
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": f"gpu0{i}", "gpus": 8, "gpuModel": "a100"} for i in (1, 2, 3)]}
    res = {
        "apiVersion": "placer/v1", "kind": "PlacementResult", "unschedulable": [],
        "assignments": [
            {"pod": "t/big-0", "node": "gpu03", "gpus": list(range(8)), "gang": "t/big"},
            {"pod": "t/big-1", "node": "gpu01", "gpus": list(range(8)), "gang": "t/big"},
            {"pod": "t/odd-0", "node": "gpu02", "gpus": [0, 1], "gang": "t/odd"},
            {"pod": "t/odd-1", "node": "gpu02", "gpus": [2], "gang": "t/odd"},
            {"pod": "t/odd-2", "node": "gpu01", "gpus": [], "gang": "t/odd"},
        ],
    }
    assert to_slurm(res, snapshot) == (
        "t/big '--nodelist=gpu[01,03]' --nodes=2 --ntasks-per-node=1 --gres=gpu:a100:8\n"
        "t/odd '--nodelist=gpu[01-02]' --nodes=2\n"
        "# t/odd: pods per node differ (gpu01:1 gpu02:2): one --ntasks-per-node cannot say it; submit one job per "
        "node or a heterogeneous job\n"
        "# t/odd: GPUs per node differ (gpu01:0 gpu02:3): one --gres cannot say it; submit one job per node or a "
        "heterogeneous job\n"
        "# t/odd: Slurm chooses the GPUs on each node (placer chose gpu02:0,1,2); they cannot be imposed\n"
    )
    job, *args = shlex.split(to_slurm(res, snapshot).splitlines()[0])
    assert job == "t/big" and expand_hostlist(args[0].removeprefix("--nodelist=")) == ["gpu01", "gpu03"]


def test_empty_result_gives_empty_text():
    res = placer.PlacementResult()
    assert to_env(res) == "" and to_slurm(res) == ""
    with pytest.raises(InvalidInputError) as e:
        render(res, "xml")
    assert e.value.where == "--format"


# ----------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    "names, hostlist",
    [
        (["n01", "n02", "n03", "n07"], "n[01-03,07]"),
        (["n07", "n03", "n01", "n02", "n02"], "n[01-03,07]"),
        (["n01"], "n01"),
        (["login"], "login"),
        ([], ""),
        (["node1", "node2", "node3"], "node[1-3]"),
        (["n8", "n9", "n10", "n11"], "n[8-11]"),
        (["n08", "n09", "n10"], "n[08-10]"),
        (["n7", "n08", "n09"], "n[7,08-09]"),
        (["n099", "n100", "n101"], "n[099-101]"),
        (["gpu-a1", "gpu-b1", "gpu-a2", "login", "cpu01"], "cpu01,gpu-a[1-2],gpu-b1,login"),
        (["rack1-n01", "rack1-n02", "rack2-n01"], "rack1-n[01-02],rack2-n01"),
        (["dgx-h100-0001", "dgx-h100-0002", "dgx-h100-0004", "dgx-h100-0005", "dgx-h100-0006"], "dgx-h100-[0001-0002,0004-0006]"),
        (["a1", "a01"], "a[01,1]"),
    ],
)
def test_compress_hostlist(names, hostlist):
    assert compress_hostlist(names) == hostlist
    assert sorted(expand_hostlist(hostlist)) == sorted(set(names))


def test_expand_hostlist_errors():
    assert expand_hostlist("n[1-3],x") == ["n1", "n2", "n3", "x"]
    for bad in ("n[3-1]", "n[1-2", "n[a]", "n[1],,x", "n[0-9999999]"):
        with pytest.raises(InvalidInputError) as e:
            expand_hostlist(bad)
        assert e.value.where == "hostlist"


_prefix = st.sampled_from(["n", "node", "gpu-a", "rack1-n", "dgx-h100-", "login", "x"])
_host = st.builds(
    lambda p, v, w: p + str(v).zfill(w) if w >= 0 else p,
    _prefix,
    st.integers(0, 120),
    st.integers(-1, 4),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_host, max_size=25), st.randoms(use_true_random=False))
def test_hostlist_round_trip(names, rnd):
    text = compress_hostlist(names)
    expanded = expand_hostlist(text)
    assert sorted(expanded) == sorted(set(names))
    assert len(expanded) == len(set(names))
    shuffled = list(names)
    rnd.shuffle(shuffled)
    assert compress_hostlist(shuffled) == text


def test_slurm_docstring_example():
    res = {
        "apiVersion": "placer/v1",
        "kind": "PlacementResult",
        "assignments": [
            {"pod": "team-a/llm-0", "node": "n01", "gpus": [0], "gang": "team-a/llm"},
            {"pod": "team-a/llm-1", "node": "n01", "gpus": [1], "gang": "team-a/llm"},
            {"pod": "team-a/llm-2", "node": "n02", "gpus": [2, 3], "gang": "team-a/llm"},
            {"pod": "team-a/llm-3", "node": "n07", "gpus": [0], "gang": "team-a/llm"},
        ],
        "unschedulable": [{"pod": "team-x/big", "reason": NO_GPU}],
        "gangs": [{"name": "team-a/llm", "placed": True, "solver": "greedy", "status": "feasible"}],
    }
    line = to_slurm(res).splitlines()[0]
    assert line == "team-a/llm '--nodelist=n[01-02,07]' --nodes=3"
    job, nodelist, nodes = shlex.split(line)
    assert expand_hostlist(nodelist.removeprefix("--nodelist=")) == ["n01", "n02", "n07"] and nodes == "--nodes=3"


# ----------------------------------------------------------------- the registry


def test_place_format_takes_every_registered_format(tmp_path, capsys):
    from placer.cli import main

    snap, req = tmp_path / "s.json", tmp_path / "r.json"
    snap.write_text(json.dumps(SNAPSHOT), encoding="utf-8")
    req.write_text(json.dumps(REQUEST), encoding="utf-8")
    result = placer.place(SNAPSHOT, REQUEST)
    assert list(OUTPUT_FORMATS)[0] == "json"
    for name in [None, *OUTPUT_FORMATS]:
        argv = ["place", str(snap), str(req)] + ([] if name is None else ["--format", name])
        assert main(argv) == 0
        assert capsys.readouterr().out == render(result, name or "json", SNAPSHOT), name
    assert main(["place", str(snap), str(req), "--format", "xml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placer: error: --format: ") and all(name in err for name in OUTPUT_FORMATS)


def test_render_uses_the_registry():
    result = placer.place(SNAPSHOT, REQUEST)
    for name, writer in OUTPUT_FORMATS.items():
        assert render(result, name) == writer(result)
    assert json.loads(render(result, "json")) == result.to_dict()
    assert yaml.safe_load(render(result, "yaml")) == result.to_dict()
    assert list(yaml.safe_load(render(result, "yaml"))) == list(json.loads(render(result, "json")))
    assert render(result, "json") == to_json(result.to_dict())
