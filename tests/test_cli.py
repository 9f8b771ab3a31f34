"""The ``placer`` command line: place, check, demo, exit statuses and error lines."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer import __version__, cli
from placer._io import dump_json, write_text_atomic
from placer.cli import main
from placer.diagnostics import check_placement

NODE_TYPE = {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "gpuMemoryMiB": 81920, "cpuMilli": 64000, "memoryMiB": 512000}


def snapshot_doc() -> dict[str, Any]:
    """node-a has 8 free GPUs, node-b only 1 (7 held): best-fit and first-fit disagree."""
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "topologyLevels": ["rack"],
        "nodeTypes": {"a100": NODE_TYPE},
        "nodes": [
            {"name": "node-a", "type": "a100", "topology": {"rack": "r1"}},
            {
                "name": "node-b",
                "type": "a100",
                "topology": {"rack": "r1"},
                "pods": [{"name": "old/job", "gpus": [0, 1, 2, 3, 4, 5, 6], "cpuMilli": 8000}],
            },
        ],
    }


def request_doc(**changes: Any) -> dict[str, Any]:
    doc = {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "policy": "best-fit",
        "seed": 0,
        "pods": [
            {"name": "t/one", "gpus": 1, "cpuMilli": 1000},
            {"name": "t/two", "gpus": 2, "cpuMilli": 2000},
            {"name": "t/nowhere", "gpus": 1, "nodeSelector": {"pool": "inference"}},
        ],
    }
    doc.update(changes)
    return doc


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "snap.json", snapshot_doc()), write(tmp_path / "req.json", request_doc())


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("placer: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------------------- place


def test_place_to_stdout_is_a_valid_result(files, capsys):
    snap, req = files
    assert main(["place", str(snap), str(req)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    doc = json.loads(out)
    assert doc["kind"] == "PlacementResult"
    assert check_placement(snapshot_doc(), request_doc(), doc) == []
    assert {a["pod"]: a["node"] for a in doc["assignments"]} == {"t/one": "node-b", "t/two": "node-a"}
    [u] = doc["unschedulable"]
    assert u["pod"] == "t/nowhere" and "didn't match Pod's node affinity/selector" in u["reason"]


def test_place_reads_yaml(tmp_path, capsys):
    snap = tmp_path / "snap.yaml"
    req = tmp_path / "req.yml"
    snap.write_text(yaml.safe_dump(snapshot_doc()), encoding="utf-8")
    req.write_text(yaml.safe_dump(request_doc()), encoding="utf-8")
    assert main(["place", str(snap), str(req)]) == 0
    assert len(json.loads(capsys.readouterr().out)["assignments"]) == 2


def test_place_output_file(files, tmp_path, capsys):
    snap, req = files
    out = tmp_path / "result.json"
    assert main(["place", str(snap), str(req), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    text = out.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert check_placement(snapshot_doc(), request_doc(), json.loads(text)) == []
    assert sorted(os.listdir(tmp_path)) == ["req.json", "result.json", "snap.json"]


def test_policy_option_changes_the_choice(files, capsys):
    snap, req = files
    assert main(["place", str(snap), str(req)]) == 0
    best = json.loads(capsys.readouterr().out)
    assert main(["place", str(snap), str(req), "--policy", "first-fit"]) == 0
    first = json.loads(capsys.readouterr().out)
    node_of = lambda doc, pod: next(a["node"] for a in doc["assignments"] if a["pod"] == pod)  # noqa: E731
    assert node_of(best, "t/one") == "node-b"
    assert node_of(first, "t/one") == "node-a"


def test_seed_option(files, capsys):
    snap, req = files
    assert main(["place", str(snap), str(req), "--policy", "random", "--seed", "42"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "PlacementResult"


# ---------------------------------------------------------------------------- check


def test_check_accepts_a_placed_result(files, tmp_path, capsys):
    snap, req = files
    result = tmp_path / "result.json"
    assert main(["place", str(snap), str(req), "-o", str(result)]) == 0
    assert main(["check", str(snap), str(req), str(result)]) == 0
    assert capsys.readouterr().out == "OK: 2 assignment(s), 1 unschedulable, no violations\n"


def test_check_reports_a_double_booked_gpu(files, tmp_path, capsys):
    snap, req = files
    assert main(["place", str(snap), str(req)]) == 0
    doc = json.loads(capsys.readouterr().out)
    one = next(a for a in doc["assignments"] if a["pod"] == "t/one")
    two = next(a for a in doc["assignments"] if a["pod"] == "t/two")
    two["node"], two["gpus"] = one["node"], [one["gpus"][0], 0]
    tampered = write(tmp_path / "tampered.json", doc)
    assert main(["check", str(snap), str(req), str(tampered)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out, "violations must be printed"
    assert any(f"GPU {one['gpus'][0]}" in line and "held whole by" in line for line in out), out
    assert not any(line.startswith("OK") for line in out)


def test_check_on_a_broken_result_exits_2(files, tmp_path, capsys):
    snap, req = files
    result = tmp_path / "result.yaml"
    result.write_text("apiVersion: placer/v1\nkind: PlacementResult\nassignments: [{pod: x\n", encoding="utf-8")
    assert main(["check", str(snap), str(req), str(result)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert re.match(rf"placer: error: {re.escape(str(result))}:\d+: invalid YAML", one_error_line(captured.err))


KERNEL_PATH = ("placer.cluster", "placer.place", "placer.kernel")


def test_cli_module_imports_no_kernel_path_at_top_level():
    tree = ast.parse(Path(cli.__file__).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    assert not names & set(KERNEL_PATH), names & set(KERNEL_PATH)


def test_check_imports_nothing_beyond_what_import_placer_loads(files, tmp_path):
    snap, req = files
    result = write(tmp_path / "result.json", {"apiVersion": "placer/v1", "kind": "PlacementResult",
                                              "assignments": [], "unschedulable": []})
    code = (
        "import sys\nimport placer\n"
        f"before = {{m for m in {KERNEL_PATH!r} if m in sys.modules}}\n"
        "from placer.cli import main\n"
        f"rc = main(['check', {str(snap)!r}, {str(req)!r}, {str(result)!r}])\n"
        f"added = sorted(m for m in {KERNEL_PATH!r} if m in sys.modules and m not in before)\n"
        "print(rc, added)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "1 []", proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- bad input


def test_invalid_snapshot_exits_2_with_one_line_and_no_output(files, tmp_path, capsys):
    _, req = files
    doc = snapshot_doc()
    doc["nodes"][1]["pods"][0]["gpus"] = [0, 9]
    snap = write(tmp_path / "bad.json", doc)
    out = tmp_path / "out.json"
    assert main(["place", str(snap), str(req), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = one_error_line(captured.err)
    assert f"{snap}: nodes[1].pods[0].gpus[1]:" in line
    assert "out of range" in line
    assert not out.exists()


def test_truncated_json_names_file_and_line(files, tmp_path, capsys):
    snap, _ = files
    text = json.dumps(request_doc(), indent=2)
    req = tmp_path / "truncated.json"
    req.write_text(text[: len(text) // 2], encoding="utf-8")
    out = tmp_path / "out.json"
    assert main(["place", str(snap), str(req), "-o", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert re.match(rf"placer: error: {re.escape(str(req))}:\d+: invalid JSON", line), line
    assert not out.exists()


def test_error_leaves_an_existing_output_untouched(files, tmp_path, capsys):
    snap, _ = files
    req = write(tmp_path / "req.json", request_doc(policy="no-such-policy"))
    out = tmp_path / "out.json"
    out.write_text("previous\n", encoding="utf-8")
    assert main(["place", str(snap), str(req), "-o", str(out)]) == 2
    assert "policy" in one_error_line(capsys.readouterr().err)
    assert out.read_text(encoding="utf-8") == "previous\n"
    assert sorted(os.listdir(tmp_path)) == ["out.json", "req.json", "snap.json"]


@pytest.mark.parametrize("option", [["--policy", "no-such-policy"], ["--seed", "-1"], ["--seed", "x"]])
def test_bad_options_exit_2(files, capsys, option):
    snap, req = files
    assert main(["place", str(snap), str(req), *option]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert option[0] in one_error_line(captured.err)


def test_missing_file_exits_2(files, tmp_path, capsys):
    snap, _ = files
    missing = tmp_path / "nope.json"
    assert main(["place", str(snap), str(missing)]) == 2
    assert str(missing) in one_error_line(capsys.readouterr().err)


def test_output_into_missing_directory_exits_2(files, tmp_path, capsys):
    snap, req = files
    out = tmp_path / "no" / "such" / "dir" / "result.json"
    assert main(["place", str(snap), str(req), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert str(out) in one_error_line(captured.err)
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("argv", [[], ["place"], ["place", "a.json"], ["frobnicate"], ["check", "a", "b"]])
def test_usage_errors_exit_2_with_one_line(argv, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    one_error_line(captured.err)


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"placer {__version__}"


def test_demo_command(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "result verified by check_placement" in out


def test_module_entry_point_has_no_traceback(files, tmp_path):
    snap, req = files
    bad = tmp_path / "bad.json"
    bad.write_text('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [', encoding="utf-8")
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "placer", "place", str(bad), str(req), "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    one_error_line(proc.stderr)
    assert not out.exists()

    ok = subprocess.run(
        [sys.executable, "-m", "placer", "place", str(snap), str(req)], capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["kind"] == "PlacementResult"


# ---------------------------------------------------------------------------- _io


def test_dump_json_format():
    assert dump_json({"a": [1, 2]}) == '{\n  "a": [\n    1,\n    2\n  ]\n}\n'


def test_write_text_atomic_replaces_whole_file(tmp_path):
    target = tmp_path / "f.json"
    target.write_text("old", encoding="utf-8")
    write_text_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    assert os.listdir(tmp_path) == ["f.json"]


def test_write_text_atomic_leaves_nothing_behind_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    target.write_text("old", encoding="utf-8")

    def boom(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_text_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "old"
    assert os.listdir(tmp_path) == ["f.json"]


@pytest.mark.parametrize("command", ["place", "check", "explain", "report", "reconcile", "simulate"])
def test_help_describes_the_command_and_names_the_policies(command, capsys):
    from placer import policies

    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    usage, description = text.split("\n\n")[:2]
    assert usage.startswith("usage: placer") and not description.lstrip().startswith(("positional", "options"))
    assert len(description.split()) >= 12  # a sentence or more on what the command does
    assert "FGD_NOTES" not in text and "DESIGN.md" not in text  # no file the user does not have
    if "--policy" in text:
        unwrapped = re.sub(r"-\s+", "-", " ".join(text.split()))  # argparse wraps after a hyphen
        assert all(name in unwrapped for name in policies.names())


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(args: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_demo", interrupted)
    assert main(["demo"]) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "placer: interrupted\n")
