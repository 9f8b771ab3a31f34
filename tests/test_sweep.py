"""``placer sweep``: the grid of a spec, figures equal to the replays run directly, resuming
without redoing finished runs, a failed run named while the others are kept, clear errors."""
from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import placer
import placer.replay.sweep as sweep
from placer.adapters import openb
from placer.cli import main
from placer.exceptions import InvalidInputError
from placer.replay.timeline import TimelineSpec, run_spec
from placer.replay.simulate import run_replay
from test_simulate import write_subsample


def write_spec(folder: Path, **fields: Any) -> Path:
    nodes, pods = write_subsample(folder)
    doc = {"apiVersion": "placer/v1", "kind": "Sweep", "nodes": nodes.name, "workloads": [pods.name], **fields}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def rows(out: Path, name: str = "results.csv") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((out / name).read_text(encoding="utf-8"))))


def test_the_grid_and_its_figures_are_the_replays(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, policies=["fgd-pack", "best-fit"], seeds="1-2",
                      fgdPack={"regretWeight": [0, 30], "pressureWeight": [0.5]})
    outcome = sweep.run_sweep(spec, tmp_path / "out", jobs=1, progress=False, plot=False)
    assert (outcome.ran, outcome.skipped, outcome.failures) == (6, 0, [])
    got = rows(tmp_path / "out")
    assert [(r["policy"], r["regret_weight"], r["seed"]) for r in got] == [
        ("fgd-pack", "0.0", "1"), ("fgd-pack", "0.0", "2"), ("fgd-pack", "30.0", "1"), ("fgd-pack", "30.0", "2"),
        ("best-fit", "", "1"), ("best-fit", "", "2")]
    assert list(got[0]) == list(sweep.GRID_COLUMNS + sweep.FGD_METRICS)
    snapshot = openb.read_nodes(tmp_path / "nodes.csv")
    pods = openb.read_pods(tmp_path / "sub_pods.csv")
    for row in (got[0], got[3], got[5]):
        weights = None if not row["regret_weight"] else (float(row["regret_weight"]), float(row["pressure_weight"]))
        curve = run_replay(snapshot, pods, row["policy"], int(row["seed"]), name="sub_pods", packing_weights=weights)
        assert float(row["unallocated_pct_100"]) == curve.at(100)
        assert float(row["frag_pct_100"]) == curve.frag_at(100)
        assert int(row["placed_pods"]) == curve.placed_pods
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| fgd | sub_pods | fgd-pack | 0.0 | 0.5 | 2 |" in summary


def test_a_resumed_sweep_runs_only_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_spec(tmp_path, policies=["best-fit"], seeds="1")
    out = tmp_path / "out"
    sweep.run_sweep(spec, out, jobs=1, progress=False, plot=False)
    first = (out / "results.csv").read_text()
    spec.write_text(spec.read_text().replace("seeds: '1'", "seeds: 1-3"), encoding="utf-8")
    ran: list[Any] = []
    real = sweep.run_figures
    monkeypatch.setattr(sweep, "run_figures", lambda shared, run: ran.append(run.seed) or real(shared, run))
    outcome = sweep.run_sweep(spec, out, jobs=1, progress=False, plot=False)
    assert sorted(ran) == [2, 3] and (outcome.ran, outcome.skipped) == (2, 1)
    again = rows(out)
    assert [r["seed"] for r in again] == ["1", "2", "3"]
    assert (out / "results.csv").read_text().splitlines()[1] == first.splitlines()[1]  # seed 1 untouched
    ran.clear()
    assert sweep.run_sweep(spec, out, jobs=1, progress=False, plot=False).ran == 0 and ran == []
    assert len(rows(out, "timings.csv")) == 3


def test_a_timeline_sweep_gives_run_spec_figures(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, replay="timeline", policies=["best-fit"], seeds=[7], loads=[0.5, 1.2],
                      preemption=[True, False], horizon="30m", shrink=0.5)
    sweep.run_sweep(spec, tmp_path / "out", jobs=2, progress=False)
    got = rows(tmp_path / "out")
    assert [(r["load"], r["preemption"]) for r in got] == [("0.5", "on"), ("0.5", "off"), ("1.2", "on"), ("1.2", "off")]
    snapshot = openb.read_nodes(tmp_path / "nodes.csv")
    trace = openb.read_timed_pods(tmp_path / "sub_pods.csv")
    direct = run_spec(snapshot, trace, TimelineSpec(load=1.2, seed=7, policy="best-fit", preemption=False,
                                                    horizon_s=1800, shrink=0.5))
    c = direct.outcome.metrics.cluster
    assert int(got[3]["waiting_at_end"]) == c.waiting_at_end
    assert float(got[3]["offered_load"]) == direct.arrivals.offered_load
    assert int(got[3]["jobs"]) == len(direct.arrivals.jobs)
    assert (tmp_path / "out" / "summary.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("fields, where, what", [
    ({"polices": ["fgd"]}, "", 'unknown field "polices" (did you mean "policies"?)'),
    ({"policies": ["fgd", "tetris"]}, "policies[1]", "unknown policy 'tetris'"),
    ({"seeds": "5-1"}, "seeds", ""),
    ({"policies": ["fgd"], "fgdPack": {"regretWeight": [1]}}, "fgdPack", "fgd-pack is not among the policies"),
    ({"fgdPack": {"regretWeight": [-1]}}, "fgdPack.regretWeight[0]", ""),
    ({"workloads": ["nowhere.csv"]}, "workloads[0]", "neither a bundled trace"),
    ({"replay": "timeline", "horizon": "soon"}, "horizon", "expected a duration"),
    ({"replay": "timeline", "queues": ["teams:0"]}, "queues[0]", ""),
    ({"replay": "timeline", "fgdPack": {}}, "fgdPack", "fgd replay only"),
    ({"replay": "timeline", "loads": []}, "loads", "expected at least one value"),
    ({"policies": "all", "seeds": "1-20000"}, "", "more than 100000"),
])
def test_bad_specs_name_the_file_and_the_field(tmp_path: Path, fields: dict[str, Any], where: str, what: str) -> None:
    spec = write_spec(tmp_path, **fields)
    with pytest.raises(InvalidInputError) as e:
        sweep.load_sweep(spec)
    assert str(e.value).startswith(f"{spec}: {where}: " if where else f"{spec}: "), str(e.value)
    assert what in str(e.value)


def test_the_bundled_fgd_grid_is_the_study(tmp_path: Path) -> None:
    runs = sweep.sweep_runs(sweep.bundled_sweep("fgd-study"))
    assert len(runs) == 17 * 6 * 10
    assert {r.workload for r in runs} == set(openb.STUDY_WORKLOADS)
    assert {r.seed for r in runs} == set(range(42, 52))


def test_cli_sweep_names_a_failed_run_and_keeps_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_spec(tmp_path, policies=["best-fit", "fgd"], seeds="1")
    real = sweep.run_figures

    def fgd_breaks(shared: Any, run: Any) -> Any:
        if run.policy == "fgd":
            raise RuntimeError("disk full")
        return real(shared, run)

    monkeypatch.setattr(sweep, "run_figures", fgd_breaks)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1", "--quiet", "--no-plot"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "placer: sweep: run fgd sub_pods fgd 1 failed twice: RuntimeError: disk full\n"
    assert [r["policy"] for r in rows(out)] == ["best-fit"]
    assert "1 run(s) done, 0 already in results.csv, 1 failed" in captured.out


def test_cli_sweep_bad_spec_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, policies="every")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"placer: error: {spec}: policies") and "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert main(["sweep", "no-such-sweep", "--out", str(tmp_path / "out")]) == 2
    assert "bundled: fgd-study" in capsys.readouterr().err


def _placer_process(argv: list[str]) -> subprocess.Popen[str]:
    """``python -m placer ARGV`` in a session of its own (Ctrl-C reaches its whole group),
    with this checkout's placer first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(placer.__file__).parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "placer", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)


def _wait_for_rows(process: subprocess.Popen[str], path: Path) -> None:
    """Until ``path`` holds a row besides its header (or the process has ended)."""
    while process.poll() is None:
        if path.exists() and len(path.read_text(encoding="utf-8").splitlines()) >= 2:
            return
        time.sleep(0.01)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_keeps_the_finished_runs_in_one_line_and_the_sweep_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobs: str
) -> None:
    spec = write_spec(tmp_path, policies=["best-fit"], seeds="1-50")
    out = tmp_path / "out"
    process = _placer_process(["sweep", str(spec), "--out", str(out), "--jobs", jobs, "--no-plot"])
    _wait_for_rows(process, out / "results.csv")
    os.killpg(process.pid, signal.SIGINT)  # as Ctrl-C does: the workers too
    _, err = process.communicate(timeout=120)
    kept = len(rows(out))
    assert process.returncode == 130, err
    assert err == f"placer: interrupted; {kept} of 50 runs kept\n"
    assert 1 <= kept < 50
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1", "--quiet", "--no-plot"]) == 0
    assert f"{50 - kept} run(s) done, {kept} already in results.csv, 0 failed" in capsys.readouterr().out
    assert sorted(int(r["seed"]) for r in rows(out)) == list(range(1, 51))
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_cli_sweep_no_plot_removes_the_summary_plot_of_an_earlier_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(tmp_path, policies=["best-fit"], seeds="1")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.png").write_bytes(b"\x89PNG of another run")
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1", "--quiet", "--no-plot"]) == 0
    assert not (out / "summary.png").exists()
    assert f"placer: sweep: note: removed {out / 'summary.png'} of an earlier run" in capsys.readouterr().err
