"""``placer reconcile`` running nvidia-smi itself, once or every ``--interval`` (``--watch``).

A stand-in ``nvidia-smi`` (a Python script put first on the PATH) answers each query with a
recorded output from tests/data/nvidia-smi, chosen by round from a plan file beside it; it
counts rounds in a file (the ``--query-gpu`` call starts a round) and refuses any other
arguments than the two queries of the contract. Node dgx-04 (4 GPUs; team-a/train holds 0
and 1, team-b/notebook a share of 3) goes through:

* round 1, ``handmade-dgx-04_query-compute-apps_zombie.csv``: pid 6200 on GPU 2, which no
  pod holds;
* round 2, ``..._zombie-gone.csv``: pid 6200 has ended;
* round 3, ``handmade-dgx-03_query-compute-apps_none.csv``: no process runs, so the GPUs
  the pods hold are idle.

The expected zombies and idle GPUs are worked out here from the CSV lines and the snapshot
(:func:`expected`), not by :func:`placer.diagnostics.reconcile.reconcile`.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from placer.adapters.nvidia_smi import live as nvidia_smi_live
from placer.adapters.nvidia_smi.query import parse_compute_apps_file, parse_query_gpu_file
from placer.cli import main
from placer.exceptions import InvalidInputError
from placer.diagnostics.reconcile import watch

DATA = Path(__file__).parent / "data" / "nvidia-smi"
GPUS = DATA / "handmade-dgx-04_query-gpu.csv"
ZOMBIE = DATA / "handmade-dgx-04_query-compute-apps_zombie.csv"
ZOMBIE_GONE = DATA / "handmade-dgx-04_query-compute-apps_zombie-gone.csv"
NO_PROCESSES = DATA / "handmade-dgx-03_query-compute-apps_none.csv"
GPU_QUERY = "--query-gpu=index,uuid --format=csv"
APPS_QUERY = "--query-compute-apps=pid,gpu_uuid,used_memory --format=csv"
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")

SNAPSHOT: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodeTypes": {"a100x4": {"gpuModel": "A100-SXM4-80GB", "gpus": 4, "gpuMemoryMiB": 81920}},
    "nodes": [
        {
            "name": "dgx-04",
            "type": "a100x4",
            "pods": [
                {"name": "team-a/train", "gpus": [0, 1]},
                {"name": "team-b/notebook", "gpuShares": {"3": 500}},
            ],
        }
    ],
}

STAND_IN = """#!{python}
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
kind = {{{gpu!r}: "gpu", {apps!r}: "apps"}}.get(" ".join(sys.argv[1:]))
with open(os.path.join(here, "calls"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
if kind is None:
    sys.stderr.write("stand-in nvidia-smi: unexpected arguments\\n")
    sys.exit(2)
counter = os.path.join(here, "round")
number = int(open(counter).read()) if os.path.exists(counter) else 0
if kind == "gpu":
    number += 1
    with open(counter, "w") as f:
        f.write(str(number))
with open(os.path.join(here, "plan.json")) as f:
    plan = json.load(f)
step = plan[min(max(number, 1), len(plan)) - 1][kind]
if "rewrite" in step:
    with open(step["rewrite"]["path"], "w") as f:
        f.write(step["rewrite"]["text"])
if "file" in step:
    with open(step["file"]) as f:
        sys.stdout.write(f.read())
sys.stdout.write(step.get("stdout", ""))
sys.stderr.write(step.get("stderr", ""))
sys.exit(step.get("exit", 0))
"""


def stand_in(folder: Path, plan: list[dict[str, dict[str, Any]]], name: str = "nvidia-smi") -> Path:
    """A fake nvidia-smi in ``folder`` following ``plan`` (one entry per round, the last
    repeated): per query, ``file`` to print, ``stdout``/``stderr`` text, ``exit`` status
    and a file to ``rewrite`` first (``{"path", "text"}``)."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(STAND_IN.format(python=sys.executable, gpu=GPU_QUERY, apps=APPS_QUERY))
    script.chmod(0o755)
    (folder / "plan.json").write_text(json.dumps(plan))
    return script


def plays(*apps_files: Path) -> list[dict[str, dict[str, Any]]]:
    return [{"gpu": {"file": str(GPUS)}, "apps": {"file": str(apps)}} for apps in apps_files]


def calls(folder: Path) -> list[str]:
    return (folder / "calls").read_text().splitlines()


def placer(*args: str, path: Path | str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(path)}
    return subprocess.run(
        [sys.executable, "-m", "placer", "reconcile", *args],
        capture_output=True, text=True, env=env, timeout=timeout,
    )


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(SNAPSHOT))
    return path


def csv_rows(path: Path) -> list[list[str]]:
    """The body lines of an nvidia-smi CSV file, split into fields."""
    lines = [line.strip() for line in path.read_text().splitlines()[1:]]
    return [line.split(", ") for line in lines if line and line != "No running processes found"]


def expected(snapshot_doc: dict[str, Any], gpus_csv: Path, apps_csv: Path) -> dict[str, list[dict[str, Any]]]:
    """Zombie GPUs (processes, no pod) and idle ones (a pod, no process) of the only node."""
    index_of = {uuid: int(index) for index, uuid in csv_rows(gpus_csv)}
    pids: dict[int, set[int]] = defaultdict(set)
    for pid, uuid, _memory in csv_rows(apps_csv):
        pids[index_of[uuid]].add(int(pid))
    holders: dict[int, list[str]] = defaultdict(list)
    for pod in snapshot_doc["nodes"][0]["pods"]:
        for index in [*pod.get("gpus", []), *map(int, pod.get("gpuShares", {}))]:
            holders[index].append(pod["name"])
    return {
        "zombies": [{"gpu": g, "pids": sorted(pids[g])} for g in sorted(index_of.values()) if pids[g] and not holders[g]],
        "idle": [{"gpu": g, "pods": holders[g]} for g in sorted(index_of.values()) if holders[g] and not pids[g]],
    }


def found(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        "zombies": [{"gpu": z["gpu"], "pids": z["pids"]} for z in document["zombies"]],
        "idle": [{"gpu": i["gpu"], "pods": i["pods"]} for i in document["idle"]],
    }


def assert_one_error_line(stderr: str, *words: str) -> None:
    assert len(stderr.splitlines()) == 1 and stderr.startswith("placer: error: "), stderr
    assert "Traceback" not in stderr
    for word in words:
        assert word in stderr


# ----------------------------------------------------------------- --watch through the CLI


def test_each_round_reconciles_what_nvidia_smi_shows_then(tmp_path: Path, snapshot: Path) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, plays(ZOMBIE, ZOMBIE_GONE, NO_PROCESSES))
    done = placer(str(snapshot), "--node", "dgx-04", "--watch", "--interval", "0.05", "--rounds", "3", path=bin_dir)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    rounds = [json.loads(line) for line in lines]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert all(TIMESTAMP.fullmatch(r["time"]) and r["node"] == "dgx-04" for r in rounds)
    for document, apps in zip(rounds, (ZOMBIE, ZOMBIE_GONE, NO_PROCESSES)):
        assert found(document) == expected(SNAPSHOT, GPUS, apps)
    # What the recorded outputs say, spelled out: the orphan, then nothing, then idle GPUs.
    assert [[z["gpu"] for z in r["zombies"]] for r in rounds] == [[2], [], []]
    assert rounds[0]["zombies"][0]["usedMemoryMiB"] == 12288
    assert [[i["gpu"] for i in r["idle"]] for r in rounds] == [[], [], [0, 1, 3]]
    assert calls(bin_dir) == [GPU_QUERY, APPS_QUERY] * 3


def test_the_snapshot_is_read_again_each_round(tmp_path: Path, snapshot: Path) -> None:
    # Round 2's query rewrites the snapshot after round 2 has read it, so round 3 reads a
    # snapshot without team-a/train: its GPUs 0 and 1, still busy, become zombies.
    without_train = json.loads(json.dumps(SNAPSHOT))
    without_train["nodes"][0]["pods"] = without_train["nodes"][0]["pods"][1:]
    bin_dir = tmp_path / "bin"
    plan = plays(ZOMBIE_GONE, ZOMBIE_GONE, ZOMBIE_GONE)
    plan[1]["gpu"]["rewrite"] = {"path": str(snapshot), "text": json.dumps(without_train)}
    stand_in(bin_dir, plan)
    done = placer(str(snapshot), "--node", "dgx-04", "--watch", "--interval", "0.05", "--rounds", "3", path=bin_dir)
    assert (done.returncode, done.stderr) == (0, "")
    rounds = [json.loads(line) for line in done.stdout.splitlines()]
    assert [found(r) for r in rounds] == [
        expected(SNAPSHOT, GPUS, ZOMBIE_GONE),
        expected(SNAPSHOT, GPUS, ZOMBIE_GONE),
        expected(without_train, GPUS, ZOMBIE_GONE),
    ]
    assert [z["gpu"] for z in rounds[2]["zombies"]] == [0, 1]


def test_a_failed_round_is_one_stderr_line_and_the_watch_goes_on(tmp_path: Path, snapshot: Path) -> None:
    bin_dir = tmp_path / "bin"
    plan = plays(ZOMBIE, ZOMBIE, NO_PROCESSES)
    plan[1]["gpu"] = {
        "stderr": "Unable to determine the device handle for GPU 0000:07:00.0: Unknown Error\nsecond line\n",
        "exit": 1,
    }
    stand_in(bin_dir, plan)
    done = placer(str(snapshot), "--node", "dgx-04", "--watch", "--interval", "0.05", "--rounds", "3", path=bin_dir)
    assert done.returncode == 1
    rounds = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["round"] for r in rounds] == [1, 3]
    assert [found(r) for r in rounds] == [expected(SNAPSHOT, GPUS, ZOMBIE), expected(SNAPSHOT, GPUS, NO_PROCESSES)]
    assert_one_error_line(
        done.stderr,
        "round 2 (",
        f"nvidia-smi {GPU_QUERY}: Unable to determine the device handle for GPU 0000:07:00.0: Unknown Error",
    )
    assert "second line" not in done.stderr
    assert calls(bin_dir) == [GPU_QUERY, APPS_QUERY, GPU_QUERY, GPU_QUERY, APPS_QUERY]


def test_a_half_written_snapshot_fails_its_round_only(tmp_path: Path, snapshot: Path) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, plays(ZOMBIE))
    text = snapshot.read_text()
    snapshot.write_text(text[: len(text) // 2])
    done = placer(str(snapshot), "--node", "dgx-04", "--watch", "--interval", "0.05", "--rounds", "2", path=bin_dir)
    assert (done.returncode, done.stdout) == (1, "")
    assert len(done.stderr.splitlines()) == 2 and "Traceback" not in done.stderr
    assert all(f"round {n} (" in line and "invalid JSON" in line for n, line in zip((1, 2), done.stderr.splitlines()))
    assert not (bin_dir / "calls").exists()  # no query when the snapshot cannot be read


def test_ctrl_c_ends_the_watch_cleanly(tmp_path: Path, snapshot: Path) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, plays(ZOMBIE))
    watcher = subprocess.Popen(
        [sys.executable, "-m", "placer", "reconcile", str(snapshot), "--node", "dgx-04", "--watch", "--interval", "600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PATH": str(bin_dir)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())  # round 1 is out: the watch now sleeps
        watcher.send_signal(signal.SIGINT)
        rest, stderr = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert (watcher.returncode, rest, stderr) == (0, "", "")
    assert first["round"] == 1 and found(first) == expected(SNAPSHOT, GPUS, ZOMBIE)


# ----------------------------------------------------------------- usage errors


def test_missing_nvidia_smi_is_exit_2(tmp_path: Path, snapshot: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for extra in (["--watch", "--interval", "0.05", "--rounds", "3"], []):
        done = placer(str(snapshot), "--node", "dgx-04", *extra, path=empty)
        assert (done.returncode, done.stdout) == (2, "")
        assert_one_error_line(done.stderr, "nvidia-smi: not on the PATH")


def usage_error(capsys: pytest.CaptureFixture[str], snapshot: Path, *args: str) -> str:
    """The stderr of ``placer reconcile SNAPSHOT --node dgx-04 ARGS`` run in this process,
    which must exit 2 and print nothing on stdout."""
    assert main(["reconcile", str(snapshot), "--node", "dgx-04", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    return err


@pytest.mark.parametrize("interval", ["0", "-5", "abc", "nan", "inf", ""])
def test_bad_interval_is_exit_2(
    tmp_path: Path, snapshot: Path, interval: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, plays(ZOMBIE))
    monkeypatch.setenv("PATH", str(bin_dir))
    stderr = usage_error(capsys, snapshot, "--watch", "--interval", interval, "--rounds", "1")
    assert_one_error_line(stderr, "placer: error: --interval: expected a number of seconds > 0")
    assert not (bin_dir / "calls").exists()


@pytest.mark.parametrize(
    "args, option",
    [
        (["--watch", "--gpus", str(GPUS), "--apps", str(ZOMBIE)], "--watch"),
        (["--gpus", str(GPUS)], "--apps"),
        (["--apps", str(ZOMBIE)], "--gpus"),
        (["--gpus", str(GPUS), "--apps", str(ZOMBIE), "--nvidia-smi", "/bin/true"], "--nvidia-smi"),
        (["--interval", "10"], "--interval"),
        (["--rounds", "2"], "--rounds"),
        (["--watch", "--rounds", "0"], "--rounds"),
        (["--watch", "--rounds", "1", "-o", "out.json"], "--output"),
        (["--watch", "--rounds", "1", "--format", "yaml"], "--format"),
    ],
)
def test_options_that_do_not_go_together_are_exit_2(
    tmp_path: Path, snapshot: Path, args: list[str], option: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, plays(ZOMBIE))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert_one_error_line(usage_error(capsys, snapshot, *args), f"placer: error: {option}: ")
    assert not (bin_dir / "calls").exists()


# ----------------------------------------------------------------- one round, live


def test_without_files_nvidia_smi_is_run_once(tmp_path: Path, snapshot: Path) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, plays(ZOMBIE))
    done = placer(str(snapshot), "--node", "dgx-04", path=bin_dir)
    assert (done.returncode, done.stderr) == (0, "")
    document = json.loads(done.stdout)
    assert "round" not in document and found(document) == expected(SNAPSHOT, GPUS, ZOMBIE)
    assert [(s["action"], s.get("pids")) for s in document["suggestions"]] == [("kill", [6200])]
    assert calls(bin_dir) == [GPU_QUERY, APPS_QUERY]
    # The same answer as from the recorded files.
    from_files = placer(str(snapshot), "--node", "dgx-04", "--gpus", str(GPUS), "--apps", str(ZOMBIE), path=bin_dir)
    assert json.loads(from_files.stdout) == document


def test_nvidia_smi_option_names_the_executable(tmp_path: Path, snapshot: Path) -> None:
    elsewhere = stand_in(tmp_path / "tools", plays(NO_PROCESSES), name="smi-wrapper")
    empty = tmp_path / "empty"
    empty.mkdir()
    done = placer(str(snapshot), "--node", "dgx-04", "--nvidia-smi", str(elsewhere), path=empty)
    assert (done.returncode, done.stderr) == (0, "")
    assert found(json.loads(done.stdout)) == expected(SNAPSHOT, GPUS, NO_PROCESSES)
    missing = placer(str(snapshot), "--node", "dgx-04", "--nvidia-smi", str(tmp_path / "nope"), path=empty)
    assert missing.returncode == 2
    assert_one_error_line(missing.stderr, f"{tmp_path / 'nope'}: not an executable file")


def test_nvidia_smi_output_errors_name_the_command_and_line(tmp_path: Path, snapshot: Path) -> None:
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, [{"gpu": {"stdout": "index, uuid\n0, not-a-uuid\n"}, "apps": {"file": str(ZOMBIE)}}])
    done = placer(str(snapshot), "--node", "dgx-04", path=bin_dir)
    assert done.returncode == 2
    assert_one_error_line(done.stderr, f"nvidia-smi {GPU_QUERY}:2: uuid: expected a GPU UUID")


# ----------------------------------------------------------------- the live adapter


def test_driver_errors_on_stdout_are_shown(tmp_path: Path) -> None:
    # nvidia-smi prints "NVIDIA-SMI has failed ..." on stdout and exits 9.
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    script = stand_in(tmp_path / "bin", [{"gpu": {"stdout": failed, "exit": 9}, "apps": {}}])
    with pytest.raises(InvalidInputError) as e:
        nvidia_smi_live.query_node(str(script))
    assert e.value.where == f"nvidia-smi {GPU_QUERY}"
    assert e.value.what == failed.strip() + " (exit status 9)"


def test_a_hung_nvidia_smi_times_out(tmp_path: Path) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    script.chmod(0o755)
    with pytest.raises(InvalidInputError) as e:
        nvidia_smi_live.run_nvidia_smi(["--query-gpu=index,uuid", "--format=csv"], str(script), timeout=0.5)
    assert e.value.where == f"nvidia-smi {GPU_QUERY}"
    assert e.value.what.startswith("no answer within 0.5 s")


# ----------------------------------------------------------------- the library loop


class FakeTime:
    """A clock that only moves when slept on or told to."""

    def __init__(self, start: datetime) -> None:
        self.now = start.timestamp()
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_rounds_start_every_interval_without_sleeping(snapshot: Path) -> None:
    fake = FakeTime(datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc))
    rows = (parse_query_gpu_file(GPUS), parse_compute_apps_file(ZOMBIE))
    durations = iter([3.0, 45.0, 1.0])  # the second round outlasts the interval

    def query() -> Any:
        fake.now += next(durations)
        return rows

    rounds = list(watch(str(snapshot), "dgx-04", query, interval=30, rounds=3, sleep=fake.sleep, clock=fake.clock))
    assert fake.slept == [27.0, 0.0]
    assert [r.timestamp for r in rounds] == ["2025-06-01T12:00:00Z", "2025-06-01T12:00:30Z", "2025-06-01T12:01:15Z"]
    assert [r.to_dict()["round"] for r in rounds] == [1, 2, 3]
    assert all(r.ok and found(r.to_dict()) == expected(SNAPSHOT, GPUS, ZOMBIE) for r in rounds)


def test_a_failing_query_fails_its_round_only(snapshot: Path) -> None:
    fake = FakeTime(datetime(2025, 6, 1, tzinfo=timezone.utc))
    answers: list[Any] = [InvalidInputError("nvidia-smi", "gone"), (parse_query_gpu_file(GPUS), ())]

    def query() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    first, second = watch(str(snapshot), "dgx-04", query, interval=5, rounds=2, sleep=fake.sleep, clock=fake.clock)
    assert (first.ok, str(first.error), first.reconciliation) == (False, "nvidia-smi: gone", None)
    assert first.to_dict() == {"round": 1, "time": "2025-06-01T00:00:00Z", "error": "nvidia-smi: gone"}
    assert second.ok and found(second.to_dict()) == expected(SNAPSHOT, GPUS, NO_PROCESSES)


@pytest.mark.parametrize(
    "interval, rounds, where",
    [(0, None, "interval"), (-1.5, None, "interval"), (float("nan"), None, "interval"), ("5", None, "interval"),
     (1, 0, "rounds"), (1, 2.0, "rounds")],
)
def test_bad_arguments_fail_at_the_call(snapshot: Path, interval: Any, rounds: Any, where: str) -> None:
    def query() -> Any:
        raise AssertionError("no round may run")

    with pytest.raises(InvalidInputError) as e:
        watch(str(snapshot), "dgx-04", query, interval=interval, rounds=rounds)
    assert e.value.where == where


def test_findings_as_yaml_to_an_output_file(tmp_path: Path, snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    files = ["--gpus", str(GPUS), "--apps", str(ZOMBIE)]
    assert main(["reconcile", str(snapshot), "--node", "dgx-04", *files]) == 0
    as_json = json.loads(capsys.readouterr().out)
    out = tmp_path / "found.yaml"
    assert main(["reconcile", str(snapshot), "--node", "dgx-04", *files, "--format", "yaml", "-o", str(out)]) == 0
    assert capsys.readouterr() == ("", "")
    assert yaml.safe_load(out.read_text(encoding="utf-8")) == as_json and found(as_json) == expected(SNAPSHOT, GPUS, ZOMBIE)
