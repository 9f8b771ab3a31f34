"""``placer simulate --timeline`` (SPEC §9) on the bundled openb data: the files it writes,
the offered load it prints, and one error line for bad options."""
from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

import pytest

from placer.cli import main

SMALL = ["simulate", "--timeline", "--horizon", "30m", "--shrink", "0.03", "--seeds", "7", "--policy", "best-fit",
         "--quiet"]


def test_timeline_writes_the_csv_the_table_and_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main([*SMALL, "--load", "0.9", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["queues.md", "timeline.csv", "timeline.png"]
    printed = capsys.readouterr().out
    assert printed.startswith("load 0.9, qos queues, best-fit, BestEffortFIFO, preemption on, seed 7, 30 min, "
                              "3 % of the nodes: offered GPU load ")
    assert re.search(r"offered GPU load \d\.\d{3} \(requested 0\.900\) over 0\.5 h on \d+ GPUs", printed)
    assert printed.count("delay p50") == 3  # inference, training and all
    assert printed.rstrip().endswith("timeline.png")
    with open(out / "timeline.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["run", "time_s", "queue", "running_gpus"]
    assert {r["run"] for r in rows} == {"load0.9-qos-best-fit-besteffortfifo-preempt-on-seed7"}
    assert {r["queue"] for r in rows} == {"inference", "training"}
    times = [float(r["time_s"]) for r in rows]
    assert times == sorted(times) and 0 <= times[0] and times[-1] < 1800
    text = (out / "queues.md").read_text()
    assert "## load 0.9, qos queues, best-fit" in text
    load = re.search(r"offered GPU load (\d\.\d{3})", printed).group(1)
    assert f"Offered GPU load **{load}**" in text
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_timeline_several_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = [*SMALL, "--load", "0.7,1.1", "--preemption", "off", "--strategy", "StrictFIFO", "--queues", "teams:2",
            "--out", str(out), "--no-plot"]
    assert main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["queues.md", "timeline.csv"]
    printed = capsys.readouterr().out
    assert "requested 0.700" in printed and "requested 1.100" in printed
    assert printed.count("team-1 ") == 2 and printed.count("preemption off") == 2
    with open(out / "timeline.csv", newline="") as f:
        runs = {r["run"] for r in csv.DictReader(f)}
    assert runs == {"load0.7-teams-2-best-fit-strictfifo-preempt-off-seed7",
                    "load1.1-teams-2-best-fit-strictfifo-preempt-off-seed7"}
    assert (out / "queues.md").read_text().count("| team-2 |") == 2


def test_timeline_runs_in_processes_write_the_same_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*SMALL, "--load", "0.7,1.1", "--no-plot"]
    assert main([*argv, "--jobs", "1", "--out", str(tmp_path / "one")]) == 0
    assert main([*argv, "--jobs", "2", "--out", str(tmp_path / "two")]) == 0
    for name in ("timeline.csv", "queues.md"):
        wall = r"\d+\.\d+ s\."  # the note's wall time
        one = re.sub(wall, "", (tmp_path / "one" / name).read_text())
        assert one == re.sub(wall, "", (tmp_path / "two" / name).read_text()), name
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 * 9 and printed[:8] == printed[9:17]  # 2 runs x 4 lines, then "wrote"


@pytest.mark.parametrize(
    "extra, where",
    [
        (["--load", "0"], "--load"),
        (["--load", "abc"], "--load"),
        (["--load", "0.9,"], "--load"),
        (["--horizon", "0"], "--horizon"),
        (["--horizon", "6x"], "--horizon"),
        (["--horizon=-1h"], "--horizon"),
        (["--queues", "teams:0"], "--queues"),
        (["--queues", "teams"], "--queues"),
        (["--queues", "fair"], "--queues"),
    ],
)
def test_timeline_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], where: str) -> None:
    out = tmp_path / "out"
    assert main([*SMALL, *extra, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"placer: error: {where}: ")
    assert "Traceback" not in captured.err and captured.out == ""
    assert not out.exists()


def test_timeline_ctrl_c_writes_the_finished_runs_and_says_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import placer.replay.timeline as timeline

    real = timeline.run_spec

    def ctrl_c_at_load_1(snapshot, trace, spec, *args, **kwargs):  # type: ignore[no-untyped-def]
        if spec.load == 1.1:
            raise KeyboardInterrupt
        return real(snapshot, trace, spec, *args, **kwargs)

    monkeypatch.setattr(timeline, "run_spec", ctrl_c_at_load_1)
    out = tmp_path / "out"
    assert main([*SMALL, "--load", "0.7,1.1,1.3", "--jobs", "1", "--no-plot", "--out", str(out)]) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "placer: interrupted; 1 of 3 runs kept\n")
    with open(out / "timeline.csv", newline="") as f:
        assert {r["run"] for r in csv.DictReader(f)} == {"load0.7-qos-best-fit-besteffortfifo-preempt-on-seed7"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_timeline_progress_goes_to_a_terminal_only_with_a_bar_over_the_grid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = [a for a in SMALL if a != "--quiet"] + ["--load", "0.7,1.1", "--jobs", "1", "--no-plot"]
    assert main([*argv, "--out", str(tmp_path / "file")]) == 0
    assert capsys.readouterr().err == ""  # stderr is not a terminal: no bar
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*argv, "--out", str(tmp_path / "tty")]) == 0
    shown = terminal.getvalue()
    assert re.search(r"timeline: +\d+%.*\| [012]/2 \[\d\d:\d\d<\d\d:\d\d", shown)  # the grid's bar, time left
    assert re.search(r"run 2/2 load 1\.1: .*/0\.5 h", shown)  # each run's simulated hours


def test_timeline_summary_counts_the_jobs_never_admitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Three times the cluster's GPUs offered for 30 min: most jobs submitted in the window wait until the end.
    out = tmp_path / "out"
    assert main([*SMALL, "--load", "3", "--no-plot", "--out", str(out)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  all "))
    found = re.search(r"delay p50 +(>= )?\d+ s, p99 >= \d+ s \((\d+) of (\d+) never admitted\)", line)
    assert found, line
    never, jobs = int(found.group(2)), int(found.group(3))
    assert 0 < never <= jobs
    text = (out / "queues.md").read_text()
    assert f"Delays are over the {jobs} jobs submitted in the window" in text and f"({never} never admitted)" in text
    assert re.search(r"\| \*\*all\*\* \| \d+ \| \d+ \| \d+ \| [^|]+ \| ≥ [\d.]+ min \|", text)
