"""``placer.replay.runner``: the replays ``placer simulate`` runs, from the inputs read to the
files written, failed and interrupted runs included."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

import placer.replay.simulate as simulate_module
import placer.replay.timeline as timeline_module
from placer.adapters import openb
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PodRequest
from placer.replay.executors import RunsInterrupted
from placer.replay.runner import (
    check_out_dir,
    run_simulation,
    run_timeline_grid,
    simulation_policies,
    timeline_grid,
)
from placer.replay.simulate import ALL_POLICIES, available_policies

PODS = [
    PodRequest("p-share", gpus=1, gpu_milli=500, cpu_milli=1000),
    PodRequest("p-one", gpus=1, cpu_milli=1000),
    PodRequest("p-two", gpus=2, cpu_milli=1000),
]


@pytest.fixture
def snapshot(tmp_path: Path) -> ClusterSnapshot:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,V100\nn1,64000,262144,8,V100\n")
    return openb.read_nodes(nodes)


def seeds_written(out: Path) -> set[tuple[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "curves.csv").read_text()))
    return {(row["policy"], row["seed"]) for row in rows}


def failing_on_seed(seed_that_fails: int, error: BaseException, monkeypatch: pytest.MonkeyPatch) -> None:
    real = simulate_module.run_replay

    def replay(snapshot, pods, policy, seed, *args, **kwargs):  # type: ignore[no-untyped-def]
        if seed == seed_that_fails:
            raise error
        return real(snapshot, pods, policy, seed, *args, **kwargs)

    monkeypatch.setattr(simulate_module, "run_replay", replay)


def test_run_simulation_writes_the_curves_it_returns(snapshot: ClusterSnapshot, tmp_path: Path) -> None:
    out = tmp_path / "out"
    outcome = run_simulation(snapshot, PODS, ["best-fit", "first-fit"], [1, 2], out, name="tiny", jobs=1,
                             progress=False, plot=False)
    assert [(c.policy, c.seed) for c in outcome.runs] == [("best-fit", 1), ("best-fit", 2), ("first-fit", 1),
                                                          ("first-fit", 2)]
    assert outcome.failures == [] and outcome.paths == [out / "curves.csv", out / "table.md"]
    assert seeds_written(out) == {("best-fit", "1"), ("best-fit", "2"), ("first-fit", "1"), ("first-fit", "2")}


def test_a_replay_that_fails_is_reported_and_left_out(
    snapshot: ClusterSnapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_on_seed(2, MemoryError("out of memory"), monkeypatch)
    out = tmp_path / "out"
    outcome = run_simulation(snapshot, PODS, ["best-fit"], [1, 2], out, name="tiny", jobs=1, progress=False,
                             plot=False)
    assert [f.key for f in outcome.failures] == [("tiny", "best-fit", 2)]
    assert "out of memory" in outcome.failures[0].error
    assert seeds_written(out) == {("best-fit", "1")}


def test_when_every_replay_fails_nothing_is_written(
    snapshot: ClusterSnapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_on_seed(1, MemoryError("out of memory"), monkeypatch)
    out = tmp_path / "out"
    outcome = run_simulation(snapshot, PODS, ["best-fit"], [1], out, jobs=1, progress=False, plot=False)
    assert (outcome.runs, outcome.paths, len(outcome.failures)) == ([], [], 1)
    assert not (out / "curves.csv").exists()


def test_an_interrupted_simulation_writes_the_replays_that_finished(
    snapshot: ClusterSnapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_on_seed(3, KeyboardInterrupt(), monkeypatch)
    out = tmp_path / "out"
    with pytest.raises(RunsInterrupted) as stopped:
        run_simulation(snapshot, PODS, ["best-fit"], [1, 2, 3, 4], out, jobs=1, progress=False, plot=False)
    assert (stopped.value.kept, stopped.value.total) == (2, 4)
    assert seeds_written(out) == {("best-fit", "1"), ("best-fit", "2")}


def test_timeline_grid_varies_the_seed_fastest_and_the_policy_slowest() -> None:
    specs = timeline_grid(["best-fit", "first-fit"], ["StrictFIFO"], [True, False], [0.5, 0.9], [1, 2],
                          queues="teams:2", horizon_s=600.0, shrink=0.5)
    assert len(specs) == 2 * 1 * 2 * 2 * 2
    assert [(s.policy, s.preemption, s.load, s.seed) for s in specs[:5]] == [
        ("best-fit", True, 0.5, 1), ("best-fit", True, 0.5, 2), ("best-fit", True, 0.9, 1),
        ("best-fit", True, 0.9, 2), ("best-fit", False, 0.5, 1)]
    assert specs[-1].policy == "first-fit"
    assert {(s.queues, s.strategy, s.horizon_s, s.shrink) for s in specs} == {("teams:2", "StrictFIFO", 600.0, 0.5)}


@pytest.fixture(scope="module")
def openb_cluster_and_trace() -> tuple[ClusterSnapshot, list]:
    return openb.read_nodes(openb.data_path(openb.DEFAULT_NODES)), openb.read_timed_pods(
        openb.data_path(openb.DEFAULT_PODS))


def test_run_timeline_grid_writes_every_run(openb_cluster_and_trace, tmp_path: Path) -> None:
    snapshot, trace = openb_cluster_and_trace
    specs = timeline_grid(["best-fit"], ["BestEffortFIFO"], [True], [0.7, 1.1], [7], queues="qos",
                          horizon_s=1800.0, shrink=0.03)
    out = tmp_path / "out"
    outcome = run_timeline_grid(snapshot, trace, specs, out, jobs=1, progress=False, plot=False)
    assert [run.spec for run in outcome.runs] == specs and outcome.failures == []
    assert outcome.paths == [out / "timeline.csv", out / "queues.md"]
    with open(out / "timeline.csv", newline="") as f:
        assert {row["run"] for row in csv.DictReader(f)} == {spec.slug for spec in specs}


def test_an_interrupted_timeline_grid_writes_the_runs_that_finished(
    openb_cluster_and_trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot, trace = openb_cluster_and_trace
    real = timeline_module.run_spec

    def ctrl_c_at_the_second_load(snapshot, trace, spec, *args, **kwargs):  # type: ignore[no-untyped-def]
        if spec.load == 1.1:
            raise KeyboardInterrupt
        return real(snapshot, trace, spec, *args, **kwargs)

    monkeypatch.setattr(timeline_module, "run_spec", ctrl_c_at_the_second_load)
    specs = timeline_grid(["best-fit"], ["BestEffortFIFO"], [True], [0.7, 1.1], [7], queues="qos",
                          horizon_s=1800.0, shrink=0.03)
    out = tmp_path / "out"
    with pytest.raises(RunsInterrupted) as stopped:
        run_timeline_grid(snapshot, trace, specs, out, jobs=1, progress=False, plot=False)
    assert (stopped.value.kept, stopped.value.total) == (1, 2)
    with open(out / "timeline.csv", newline="") as f:
        assert {row["run"] for row in csv.DictReader(f)} == {specs[0].slug}


def test_simulation_policies_all_and_by_name() -> None:
    ready = available_policies()
    chosen, skipped = simulation_policies("all")
    assert chosen == [p for p in ALL_POLICIES if p in ready] and skipped == [p for p in ALL_POLICIES if p not in ready]
    assert simulation_policies(" best-fit , first-fit ") == (["best-fit", "first-fit"], [])
    with pytest.raises(InvalidInputError, match="listed twice") as twice:
        simulation_policies("best-fit,best-fit")
    assert twice.value.where == "--policy"
    with pytest.raises(InvalidInputError) as unknown:
        simulation_policies("no-such-policy", "policies")
    assert unknown.value.where == "policies"


def test_check_out_dir_refuses_a_file_and_accepts_a_new_directory(tmp_path: Path) -> None:
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    with pytest.raises(InvalidInputError, match="exists and is not a directory") as info:
        check_out_dir(a_file)
    assert info.value.where == "--out"
    with pytest.raises(InvalidInputError, match="is not a writable directory"):
        check_out_dir(a_file / "below")
    check_out_dir(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()  # checked, not made
