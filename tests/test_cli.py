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
from placer.text.files import dump_json, write_text_atomic
from placer.cli import main
from placer.diagnostics.check import check_placement

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


KERNEL_PATH = ("placer.placement.cluster", "placer.placement.place", "placer.kernel")


CLI_MODULES = sorted(p for p in Path(cli.__file__).parent.glob("*.py") if p.name != "demo.py")  # demo drives Cluster


@pytest.mark.parametrize("path", CLI_MODULES, ids=[p.stem for p in CLI_MODULES])
def test_cli_module_imports_no_kernel_path_at_top_level(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
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


KILLED_WRITER = """
import os, sys, time
from placer.text.files import write_text_atomic

def stalled(fd):  # the data is written, not yet flushed: the writer is killed here
    print("writing", flush=True)
    time.sleep(60)

os.fsync = stalled
write_text_atomic(sys.argv[1], "x" * 20_000_000)
"""


@pytest.mark.parametrize("existing", [False, True])
def test_a_writer_killed_mid_write_leaves_no_partial_file(tmp_path, existing):
    if not hasattr(os, "O_TMPFILE"):
        pytest.skip("O_TMPFILE is Linux's")
    target = tmp_path / "out.json"
    if existing:
        target.write_text("old", encoding="utf-8")
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n"
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()
    assert os.listdir(tmp_path) == (["out.json"] if existing else [])
    if existing:
        assert target.read_text(encoding="utf-8") == "old"


@pytest.mark.parametrize("existing", [False, True])
def test_without_o_tmpfile_a_named_temporary_is_renamed(tmp_path, monkeypatch, existing):
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    target = tmp_path / "out.json"
    if existing:
        target.write_text("old", encoding="utf-8")
        target.chmod(0o640)
    write_text_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "new\n" and os.listdir(tmp_path) == ["out.json"]
    plain = tmp_path.parent / f"{tmp_path.name}-plain"
    plain.write_text("")  # the mode a file created by open() gets
    assert target.stat().st_mode & 0o777 == (0o640 if existing else plain.stat().st_mode & 0o777)
    plain.unlink()


def test_an_o_tmpfile_write_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o600)
    write_text_atomic(target, "new")
    assert target.read_text(encoding="utf-8") == "new" and target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["out.json"]


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


# ---------------------------------------------------------------------------- kubectl's habits

DATA = Path(__file__).parent / "data"
K8S = DATA / "k8s"


@pytest.fixture
def stdin_bytes(monkeypatch):
    """Feed ``main`` a standard input."""
    import io

    def feed(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    return feed


def document_commands(snap: Path, req: Path) -> dict[str, list[str]]:
    """Every command writing a JSON document, with its arguments (``--format`` left out)."""
    return {
        "place": ["place", str(snap), str(req)],
        "preempt": ["preempt", str(snap), str(req)],
        "defrag": ["defrag", str(snap), str(req)],
        "explain": ["explain", str(snap), str(req)],
        "report": ["report", str(snap)],
        "import kubernetes": ["import", "kubernetes", "--nodes", str(K8S / "handmade-nodes.json")],
        "import kubernetes-request": ["import", "kubernetes-request", str(K8S / "handmade-pods-pending-priority.yaml")],
        "import slurm": ["import", "slurm", "--nodes", str(DATA / "slurm" / "handmade-scontrol-d-show-node-24.05.txt")],
    }


@pytest.mark.parametrize("command", list(document_commands(Path("s"), Path("r"))))
def test_format_yaml_writes_the_json_document_as_yaml(files, command, capsys):
    argv = document_commands(*files)[command]
    assert main([*argv, "--format", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main([*argv, "--format", "yaml"]) == 0
    text = capsys.readouterr().out
    assert not text.lstrip().startswith("{")  # block style, not JSON (which is YAML too)
    as_yaml = yaml.safe_load(text)
    assert as_yaml == as_json and list(as_yaml) == list(as_json)


@pytest.mark.parametrize("word", ["json", "yaml", "wide"])
def test_output_refuses_a_format_word(files, word, tmp_path, monkeypatch, capsys):
    snap, req = files
    monkeypatch.chdir(tmp_path)
    assert main(["place", str(snap), str(req), "-o", word]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"placer: error: -o: {word!r} is a format, not a file; ")
    assert line.endswith("(-o FILE writes to FILE)")
    if word != "wide":
        assert f"use --format {word}" in line
    assert not (tmp_path / word).exists()
    assert main(["place", str(snap), str(req), "-o", f"{word}.out"]) == 0  # a file name is a file name
    assert (tmp_path / f"{word}.out").exists()


def test_check_writes_its_lines_to_the_output_file(files, tmp_path, capsys):
    snap, req = files
    result = tmp_path / "result.json"
    assert main(["place", str(snap), str(req), "-o", str(result)]) == 0
    assert main(["check", str(snap), str(req), str(result)]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "check.txt"
    assert main(["check", str(snap), str(req), str(result), "-o", str(out)]) == 0
    assert capsys.readouterr().out == "" and out.read_text(encoding="utf-8") == printed
    assert printed.startswith("OK: 2 assignment(s), 1 unschedulable")


def test_report_writes_the_output_file_all_or_nothing(files, tmp_path, capsys):
    snap, _ = files
    assert main(["report", str(snap)]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "report.txt"
    assert main(["report", str(snap), "-o", str(out)]) == 0
    assert capsys.readouterr().out == "" and out.read_text(encoding="utf-8") == printed
    out.unlink()
    assert main(["report", str(snap), "--workload", str(tmp_path / "missing.json"), "-o", str(out)]) == 2
    one_error_line(capsys.readouterr().err)
    assert not out.exists()


def test_dash_reads_a_document_from_stdin(files, stdin_bytes, capsys):
    snap, req = files
    assert main(["place", str(snap), str(req)]) == 0
    from_files = capsys.readouterr().out
    stdin_bytes(snap.read_bytes())
    assert main(["place", "-", str(req)]) == 0
    assert capsys.readouterr().out == from_files
    stdin_bytes(yaml.safe_dump(request_doc()).encode())
    assert main(["place", str(snap), "-", "--format", "slurm"]) == 0  # the snapshot read again: a file
    assert "# unschedulable: t/nowhere" in capsys.readouterr().out


def test_dash_reads_a_text_stream_put_in_place_of_stdin(files, monkeypatch, capsys):
    import io

    snap, req = files
    monkeypatch.setattr(sys, "stdin", io.StringIO(req.read_text(encoding="utf-8")))
    assert main(["place", str(snap), "-"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "PlacementResult"
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["place", str(snap), "-"]) == 2
    assert one_error_line(capsys.readouterr().err) == "placer: error: <stdin>: no standard input to read"


def test_dash_read_twice_gives_the_same_document(files, stdin_bytes, capsys):
    """``--format slurm`` loads the snapshot again for GPU models: stdin is read once."""
    snap, req = files
    assert main(["place", str(snap), str(req), "--format", "slurm"]) == 0
    from_files = capsys.readouterr().out
    stdin_bytes(snap.read_bytes())
    assert main(["place", "-", str(req), "--format", "slurm"]) == 0
    assert capsys.readouterr().out == from_files


@pytest.mark.parametrize(
    "argv",
    [
        ["place", "-", "REQ"],
        ["import", "kubernetes", "--nodes", "-"],
        ["import", "kubernetes-request", "-"],
        ["report", "-"],
        ["sweep", "-", "--out", "OUT"],
    ],
)
def test_dash_errors_name_stdin(files, argv, stdin_bytes, tmp_path, capsys):
    snap, req = files
    stdin_bytes(b'{"apiVersion": "placer/v1",\n  "kind": ')
    given = {"REQ": str(req), "OUT": str(tmp_path / "out")}
    assert main([given.get(a, a) for a in argv]) == 2
    assert one_error_line(capsys.readouterr().err).startswith("placer: error: <stdin>:2: ")


def test_dash_for_two_inputs_is_refused(files, stdin_bytes, capsys):
    stdin_bytes(files[0].read_bytes())
    assert main(["place", "-", "-"]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        "placer: error: -: standard input given for both SNAPSHOT and REQUEST; only one input can be read from it"
    )


def test_output_naming_an_input_is_refused_before_writing(files, tmp_path, monkeypatch, capsys):
    snap, req = files
    before = snap.read_bytes()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.json").symlink_to(snap)
    for output in (str(snap), "snap.json", "./snap.json", "link.json"):
        assert main(["place", "snap.json", str(req), "-o", output]) == 2
        assert one_error_line(capsys.readouterr().err) == (
            f"placer: error: -o: {output} is the input snap.json (SNAPSHOT); write the output to another file"
        )
    assert main(["check", str(snap), str(req), str(req), "-o", str(req)]) == 2
    assert "(REQUEST)" in one_error_line(capsys.readouterr().err)
    assert snap.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["link.json", "req.json", "snap.json"]


@pytest.mark.parametrize("command", ["place", "preempt", "explain"])
def test_fail_on_pending_exits_1_and_still_writes(files, command, tmp_path, capsys):
    snap, req = files
    out = tmp_path / "out.txt"
    assert main([command, str(snap), str(req), "-o", str(out)]) == 0
    assert main([command, str(snap), str(req), "--fail-on-pending", "-o", str(out)]) == 1
    assert capsys.readouterr().err == ""
    assert "t/nowhere" in out.read_text(encoding="utf-8")
    placeable = write(tmp_path / "ok.json", request_doc(pods=request_doc()["pods"][:2]))
    assert main([command, str(snap), str(placeable), "--fail-on-pending", "-o", str(out)]) == 0
    assert "exit status" in _help(capsys, command) and "--fail-on-pending" in _help(capsys, command)


def _help(capsys, *command: str) -> str:
    assert main([*command, "--help"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["k8s-binding", "k8s-binding-json"])
def test_k8s_binding_names_the_pods_it_left_out(files, fmt, capsys):
    snap, req = files
    assert main(["place", str(snap), str(req), "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert "t/nowhere" not in out and "nowhere" not in out
    assert err == f"placer: place: note: {fmt}: 1 pod(s) left out (pending): t/nowhere\n"
    for other in ("json", "env", "slurm"):  # they list the pending pods themselves
        assert main(["place", str(snap), str(req), "--format", other]) == 0
        assert capsys.readouterr().err == ""


def test_slurm_format_help_says_what_it_writes(capsys):
    text = " ".join(_help(capsys, "place").split())
    slurm = text[text.index("slurm (sbatch/srun"):]
    assert "--gres" in slurm and "CUDA_VISIBLE_DEVICES" not in text


@pytest.mark.parametrize("source", ["kubernetes", "kubernetes-request", "mig-parted", "nvidia-smi", "slurm"])
def test_import_help_has_a_description_and_examples(source, capsys):
    text = _help(capsys, "import", source)
    usage, description, *_ = text.split("\n\n")
    assert description.count("\n") >= 2  # the description's own lines, kept
    examples = text[text.index("\nexamples:\n"):]
    assert f"placer import {source} " in examples
    assert "examples:\n  placer import kubernetes " in _help(capsys, "import")


@pytest.mark.parametrize(
    "argv, line",
    [
        (["plcae"], "placer: error: command line: invalid choice 'plcae' (did you mean 'place'?)"),
        (["import", "kuberntes"], "placer: error: import: invalid choice 'kuberntes' (did you mean 'kubernetes'?)"),
        (["Explain"], "placer: error: command line: invalid choice 'Explain' (did you mean 'explain'?)"),
    ],
)
def test_a_typo_of_a_command_gets_did_you_mean(argv, line, capsys):
    assert main(argv) == 2
    assert one_error_line(capsys.readouterr().err) == line


def test_an_unknown_command_lists_the_commands(capsys):
    assert main(["frobnicate"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "invalid choice 'frobnicate' (choose from place, preempt, check" in line


def test_stdout_that_cannot_encode_a_dash_gets_an_escape(files):
    snap, req = files
    proc = subprocess.run(
        [sys.executable, "-m", "placer", "explain", str(snap), str(req)],
        capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "ascii"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert b"\\u2014" in proc.stdout and proc.stdout.isascii()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("to_stdout", [False, True])
def test_a_full_disk_is_one_error_line(files, to_stdout):
    import stat

    snap, req = files
    argv = [sys.executable, "-m", "placer", "explain", str(snap), str(req)]
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            argv if to_stdout else [*argv, "-o", "/dev/full"],
            stdout=full if to_stdout else subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
        )
    assert proc.returncode == 2
    assert proc.stderr.decode() == "placer: error: /dev/full: No space left on device\n"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written to, never renamed over


# ---------------------------------------------------------------------------- empty inputs


@pytest.mark.parametrize("command", ["place", "preempt", "defrag"])
def test_an_empty_request_gives_an_empty_result(files, tmp_path, capsys, command):
    snap, _ = files
    empty = write(tmp_path / "empty.json", request_doc(pods=[]))
    assert main([command, str(snap), str(empty)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["assignments"] == [] and result["unschedulable"] == []


def test_explain_of_an_empty_request_says_nothing_is_pending(files, tmp_path, capsys):
    snap, _ = files
    empty = write(tmp_path / "empty.json", request_doc(pods=[]))
    assert main(["explain", str(snap), str(empty)]) == 0
    assert "nothing is pending" in capsys.readouterr().out
    assert main(["explain", str(snap), str(empty), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["placed"] == 0 and data["pending"] == []


def test_an_empty_request_through_the_python_api(files):
    import placer

    snap, _ = files
    for run in (placer.place, placer.preempt):
        result = run(str(snap), request_doc(pods=[]))
        assert not result.assignments and not result.unschedulable


def test_a_snapshot_without_nodes_leaves_every_pod_pending(tmp_path, capsys):
    req = write(tmp_path / "req.json", request_doc(pods=[
        *request_doc()["pods"], {"name": "t/mig", "mig": {"profile": "1g.10gb"}}, {"name": "t/slots", "gpuSlots": 2},
        {"name": "t/g", "gpus": 8, "replicas": 2, "gang": "t/g"}], gangs={"t/g": {"topology": {"level": "rack"}}}))
    bare = write(tmp_path / "bare.json", {**snapshot_doc(), "nodes": []})
    out = tmp_path / "result.json"
    for command in ("place", "preempt"):
        assert main([command, str(bare), str(req), "-o", str(out)]) == 0
        result = json.loads(out.read_text())
        assert result["assignments"] == [] and [g["placed"] for g in result["gangs"]] == [False]
        assert [u["reason"] for u in result["unschedulable"]] == (
            ["0/0 nodes are available."] * 5 + ["gang t/g: 0/0 nodes are available."] * 2)
        assert main(["check", str(bare), str(req), str(out)]) == 0
    capsys.readouterr()
    assert main(["explain", str(bare), str(req), "--format", "json"]) == 0
    pending = json.loads(capsys.readouterr().out)["pending"]
    assert len(pending) == 6
    assert all(p["cause"] == "capacity" and "no nodes" in p["detail"] for p in pending)
    assert main(["report", str(bare), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nodes"] == 0 and data["freeGpus"] == 0
    assert main(["report", str(bare)]) == 0
    assert "0 node(s)" in capsys.readouterr().out


# ---------------------------------------------------------------------------- hints that do not mislead


@pytest.mark.parametrize("command", [["place"], ["place", "--preemption", "greedy"], ["preempt"], ["explain"],
                                     ["defrag"]])
def test_an_already_bound_pod_is_named_as_the_request_file_writes_it(files, tmp_path, capsys, command):
    snap, _ = files
    # two replicas before it: the pod is pods[3] once expanded, pods[2] in the file
    req = write(tmp_path / "req.json", request_doc(pods=[
        {"name": "t/w", "gpus": 1, "replicas": 2}, {"name": "t/x", "gpus": 1}, {"name": "old/job", "gpus": 1}]))
    assert main([*command, str(snap), str(req)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == f"placer: error: {req}: pods[2].name: pod 'old/job' is already bound"


def test_an_already_bound_pod_through_the_python_api(files):
    import placer

    snap, _ = files
    doc = request_doc(pods=[{"name": "t/w", "gpus": 1, "replicas": 2}, {"name": "old/job", "gpus": 1}])
    with pytest.raises(placer.InvalidInputError) as info:
        placer.place(str(snap), doc)
    assert info.value.where == "pods[1].name"
    with pytest.raises(placer.InvalidInputError) as info:
        placer.place(str(snap), doc, preemption="greedy")  # the override keeps the path as written
    assert info.value.where == "pods[1].name"
    with pytest.raises(placer.InvalidInputError) as info:
        placer.place(str(snap), request_doc(), preemption="sometimes")
    assert info.value.where == "preemption"
    cluster = placer.Cluster(str(snap))
    cluster.schedule(request_doc(pods=[{"name": "t/w", "gpus": 1, "replicas": 2}]))
    with pytest.raises(placer.InvalidInputError) as info:  # bound by the earlier call
        cluster.schedule(request_doc(pods=[{"name": "t/y", "gpus": 1, "replicas": 2}, {"name": "t/w-1"}]))
    assert info.value.where == "pods[1].name" and "'t/w-1' is already bound" in info.value.what


@pytest.mark.parametrize(("where", "key", "meant"), [
    ("snapshot", "gpuMilli", "gpuShares"), ("request", "gpuShares", "gpuMilli"), ("request", "unknownGpus", "gpus"),
])
def test_a_request_field_in_a_running_pod_hints_its_counterpart(files, tmp_path, capsys, where, key, meant):
    snap, req = files
    if where == "snapshot":
        doc = snapshot_doc()
        doc["nodes"][1]["pods"][0][key] = 500
        snap = write(tmp_path / "snap.json", doc)
    else:
        req = write(tmp_path / "req.json", request_doc(pods=[{"name": "t/p", "gpus": 1, key: 1}]))
    assert main(["place", str(snap), str(req)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f'unknown field "{key}" (did you mean "{meant}"?' in line
    assert "cpuMilli" not in line


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from placer.cli import demo

    def interrupted(policy: str) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "run_demo", interrupted)
    assert main(["demo"]) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "placer: interrupted\n")
