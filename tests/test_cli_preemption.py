"""``placer preempt`` and ``placer place --preemption``: preemption from the command line.

The files of tests/data/preemption (the README's example): n1 holds a notebook whose
PodDisruptionBudget allows no disruption and a sweep, n2 a running two-pod gang, all
4-GPU pods. The request: a 4-GPU pod of priority 1000, which fits once the sweep (one
victim) or the gang (two, as a gang goes whole) is gone, and a pod that may not preempt.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from placer.diagnostics.check import check_placement
from placer.model import load_request, load_snapshot, load_result

DATA = Path(__file__).parent / "data" / "preemption"
CLUSTER = DATA / "cluster.yaml"
REQUEST = DATA / "request.yaml"


def run(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("placer: error: "), captured.err
    return lines[0]


def test_preempt_evicts_the_one_cheapest_victim(capsys):
    result = run(capsys, "preempt", str(CLUSTER), str(REQUEST))
    assert result["assignments"] == [{"pod": "prod/serve", "node": "n1", "gpus": [4, 5, 6, 7], "nominated": True}]
    assert [u["pod"] for u in result["unschedulable"]] == ["dev/eval"]  # preemptionPolicy: Never
    assert result["preemptions"] == [
        {"for": "prod/serve", "victims": ["research/sweep-7"], "nodes": ["n1"],
         "pdbViolations": 0, "solver": "greedy", "status": "feasible"}
    ]


def test_place_leaves_the_pod_pending_unless_preemption_is_asked(capsys):
    pending = run(capsys, "place", str(CLUSTER), str(REQUEST))
    assert [u["pod"] for u in pending["unschedulable"]] == ["prod/serve", "dev/eval"]
    assert "preemptions" not in pending
    for mode in ("greedy", "auto"):
        placed = run(capsys, "place", str(CLUSTER), str(REQUEST), "--preemption", mode)
        assert placed == run(capsys, "preempt", str(CLUSTER), str(REQUEST))


def test_place_preemption_none_overrides_the_request(tmp_path, capsys):
    request = yaml.safe_load(REQUEST.read_text())
    request["preemption"] = "greedy"
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    assert run(capsys, "place", str(CLUSTER), str(path))["preemptions"][0]["victims"] == ["research/sweep-7"]
    assert "preemptions" not in run(capsys, "place", str(CLUSTER), str(path), "--preemption", "none")


def test_preempt_writes_a_result_the_checker_accepts(tmp_path, capsys):
    out = tmp_path / "result.json"
    assert main(["preempt", str(CLUSTER), str(REQUEST), "-o", str(out), "--policy", "first-fit", "--seed", "3"]) == 0
    assert capsys.readouterr().out == ""
    result = load_result(out)
    assert [p.victims for p in result.preemptions] == [("research/sweep-7",)]
    assert check_placement(load_snapshot(CLUSTER), load_request(REQUEST), result) == []


def test_preempt_evicts_a_running_gang_whole(tmp_path, capsys):
    request = yaml.safe_load(REQUEST.read_text())
    request["pods"][0]["gpus"] = 8  # only an emptied node holds it; n1 would break the notebook's budget
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request))
    result = run(capsys, "preempt", str(CLUSTER), str(path))
    assert [(a["pod"], a["node"], a["nominated"]) for a in result["assignments"]] == [("prod/serve", "n2", True)]
    assert [(p["victims"], p["pdbViolations"]) for p in result["preemptions"]] == [
        (["batch/pretrain-0", "batch/pretrain-1"], 0)]


def test_preempt_formats_like_place(capsys):
    assert main(["preempt", str(CLUSTER), str(REQUEST), "--format", "env"]) == 0
    env = capsys.readouterr().out
    assert "prod/serve" in env and "NVIDIA_VISIBLE_DEVICES=4,5,6,7" in env


@pytest.mark.parametrize(
    "argv, where",
    [
        (["place", str(CLUSTER), str(REQUEST), "--preemption", "always"], "--preemption: expected one of none"),
        (["preempt", str(CLUSTER), str(REQUEST), "--policy", "nope"], "--policy"),
        (["preempt", str(CLUSTER), str(REQUEST), "--seed", "-1"], "--seed"),
        (["preempt", str(CLUSTER)], "preempt: the following arguments are required: REQUEST"),
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, argv, where):
    assert main(argv) == 2
    assert where in one_error_line(capsys)


def test_bad_request_names_the_file_and_writes_nothing(tmp_path, capsys):
    request = yaml.safe_load(REQUEST.read_text())
    request["pods"][0]["preemptionPolicy"] = "Sometimes"
    path = tmp_path / "request.yaml"
    path.write_text(yaml.safe_dump(request))
    out = tmp_path / "result.json"
    for command in (["preempt"], ["place", "--preemption", "greedy"]):
        assert main([*command, str(CLUSTER), str(path), "-o", str(out)]) == 2
        line = one_error_line(capsys)
        assert f"{path}" in line and "pods[0].preemptionPolicy" in line
        assert not out.exists()
