"""``placer admit SNAPSHOT QUEUES [WORKLOADS...]`` (SPEC §8): bad input is one line on stderr,
exit 2 and no output file; a good cycle writes the AdmissionResult as JSON or text.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main

GPU = "nvidia.com/gpu"


def snapshot_doc() -> dict[str, Any]:
    """One node of 8 free GPUs."""
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodeTypes": {"dgx": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000, "memoryMiB": 512000}},
        "nodes": [{"name": "n1", "type": "dgx"}],
    }


def queue_objects() -> list[dict[str, Any]]:
    """Issue #16's scenario 3: A (nominal 4, lendingLimit 0) and B (nominal 4) in one cohort."""

    def cq(name: str, **gpu_quota: Any) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"cohortName": "lab", "namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": [GPU], "flavors": [{"name": "gpu", "resources": [
                        {"name": GPU, "nominalQuota": 4, **gpu_quota}]}]}]}}

    def lq(team: str) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "jobs", "namespace": team}, "spec": {"clusterQueue": team}}

    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    return [flavor, cq("a", lendingLimit=0), cq("b"), lq("a"), lq("b")]


def job(namespace: str, name: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "jobs"},
                         "creationTimestamp": "2025-03-01T12:00:00Z"},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {GPU: gpus}}}]}}}}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(snapshot_doc()), encoding="utf-8")
    queues = tmp_path / "queues.yaml"
    queues.write_text(yaml.safe_dump_all(queue_objects()), encoding="utf-8")
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [job("a", "small", 2), job("b", "big", 6)]}), encoding="utf-8")
    return snap, queues, jobs


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("placer: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["admit", "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "placer admit cluster.json queues.yaml workloads.yaml" in out


def test_bad_queue_object_exits_2_with_one_line_and_no_output(files, tmp_path, capsys) -> None:
    snap, queues, jobs = files
    objects = queue_objects()
    objects[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 5  # over nominal 4
    queues.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    out = tmp_path / "cycle.json"
    assert main(["admit", str(snap), str(queues), str(jobs), "-o", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{queues}:" in line and "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit" in line
    assert "exceeds nominalQuota" in line
    assert not out.exists()


def test_bad_workload_exits_2_naming_its_json_path(files, tmp_path, capsys) -> None:
    snap, queues, jobs = files
    doc = json.loads(jobs.read_text(encoding="utf-8"))
    doc["items"][1]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "1.5"
    jobs.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "cycle.txt"
    assert main(["admit", str(snap), str(queues), str(jobs), "-o", str(out)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{jobs}: items[1].spec.template.spec.containers[0].resources.limits.nvidia.com/gpu" in line
    assert not out.exists()


def test_unknown_kind_exits_2(files, tmp_path, capsys) -> None:
    snap, queues, _ = files
    other = tmp_path / "svc.yaml"
    other.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n", encoding="utf-8")
    assert main(["admit", str(snap), str(queues), str(other)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"{other}:2" in line and "got 'Service'" in line


def test_bad_snapshot_exits_2(files, tmp_path, capsys) -> None:
    _, queues, jobs = files
    snap = tmp_path / "bad.json"
    snap.write_text('{"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [', encoding="utf-8")
    out = tmp_path / "cycle.json"
    assert main(["admit", str(snap), str(queues), str(jobs), "-o", str(out)]) == 2
    one_error_line(capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize("argv,where", [
    (["--format", "xml"], "--format"),
    (["--policy", "fastest"], "--policy"),
])
def test_bad_options_exit_2(files, capsys, argv, where) -> None:
    snap, queues, jobs = files
    assert main(["admit", str(snap), str(queues), str(jobs), *argv]) == 2
    assert one_error_line(capsys.readouterr().err).startswith(f"placer: error: {where}: ")


def test_missing_files_exit_2(files, tmp_path, capsys) -> None:
    snap, queues, _ = files
    assert main(["admit", str(snap), str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in one_error_line(capsys.readouterr().err)
    assert main(["admit", str(snap)]) == 2
    one_error_line(capsys.readouterr().err)


# ----------------------------------------------------------------------------- with the engine


def test_cycle_as_json(files, tmp_path, capsys) -> None:
    snap, queues, jobs = files
    out = tmp_path / "cycle.json"
    assert main(["admit", str(snap), str(queues), str(jobs), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert main(["admit", str(snap), str(queues), str(jobs), "--format", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == doc
    # a/small (2 GPUs) fits A's nominal 4; b/big (6 GPUs) needs 2 beyond B's nominal, and A
    # lends nothing: inadmissible, nothing preempted.
    assert [(a["workload"], a["clusterQueue"], a["flavors"], a["borrowing"]) for a in doc["admitted"]] == [
        ("a/small", "a", {"main": {GPU: "gpu"}}, False)]
    assert [len(a["assignments"]) for a in doc["admitted"]] == [1]
    assert doc["admitted"][0]["assignments"][0]["node"] == "n1"
    assert len(doc["admitted"][0]["assignments"][0]["gpus"]) == 2
    assert [(p["workload"], p.get("clusterQueue"), p["inadmissible"]) for p in doc["pending"]] == [("b/big", "b", True)]
    assert doc["preempted"] == [] and doc["preemptions"] == []


def test_cycle_as_text(files, capsys) -> None:
    snap, queues, jobs = files
    assert main(["admit", str(snap), str(queues), str(jobs)]) == 0
    text = capsys.readouterr().out
    assert "Admitted (1):\n  a/small in a (cohort lab)\n" in text
    assert "  b/big in b (cohort lab) [inadmissible]: " in text
    assert "Preempted (0):" in text
    assert "    gpu: nvidia.com/gpu 2/4" in text  # a's usage after the cycle


# ----------------------------------------------------------------------------- with a stand-in engine


def stand_in_result():
    from placer.model import Assignment
    from placer.queues.result import AdmissionResult, AdmittedWorkload, PendingWorkload, PreemptedWorkload

    return AdmissionResult(
        admitted=(AdmittedWorkload("a/small", "a", {"main": {GPU: "gpu"}}, False,
                                   (Assignment(pod="a/small-main-0", node="n1", gpus=(0, 1)),)),),
        pending=(PendingWorkload("b/big", "insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed",
                                 "b", inadmissible=True),),
        preempted=(PreemptedWorkload("a/old", "b/big", "InCohortReclamation"),),
    )


@pytest.fixture
def stand_in_engine(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Replace placer.queues.scheduler by a module whose admit records its arguments and
    returns :func:`stand_in_result`: the command line's plumbing, without the engine."""
    import sys
    import types

    calls: list[tuple] = []
    module = types.ModuleType("placer.queues.scheduler")

    def admit(snapshot, queues, workloads, *, policy=None):
        calls.append((snapshot, queues, workloads, policy))
        return stand_in_result()

    module.admit = admit  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "placer.queues.scheduler", module)
    return calls


def test_engine_gets_the_objects_read(files, stand_in_engine, capsys) -> None:
    from placer.model import ClusterSnapshot
    from placer.queues import QueueConfig

    snap, queues, jobs = files
    assert main(["admit", str(snap), str(queues), str(jobs), "--policy", "best-fit", "--format", "json"]) == 0
    ((snapshot, config, workloads, policy),) = stand_in_engine
    assert isinstance(snapshot, ClusterSnapshot) and [n.name for n in snapshot.nodes] == ["n1"]
    assert isinstance(config, QueueConfig) and set(config.cluster_queues) == {"a", "b"}
    assert [(w.key, w.cluster_queue, w.pod_sets[0].requests[GPU]) for w in workloads] == [
        ("a/small", "a", 2), ("b/big", "b", 6)]
    assert policy == "best-fit"
    assert json.loads(capsys.readouterr().out) == stand_in_result().to_dict()


def test_text_is_written_atomically_with_notes_on_stderr(files, stand_in_engine, tmp_path, capsys) -> None:
    snap, queues, jobs = files
    objects = queue_objects()
    del objects[2]["spec"]["namespaceSelector"]  # b: a note, not an error
    queues.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    out = tmp_path / "cycle.txt"
    assert main(["admit", str(snap), str(queues), str(jobs), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("placer: admit: note: ") and "ClusterQueue b has no namespaceSelector" in captured.err
    assert out.read_text(encoding="utf-8") == (
        "Admitted (1):\n"
        "  a/small in a (cohort lab)\n"
        "    flavors: main: gpu (nvidia.com/gpu)\n"
        "    nodes n1\n"
        "Pending (1):\n"
        "  b/big in b (cohort lab) [inadmissible]: insufficient unused quota for nvidia.com/gpu in flavor gpu, "
        "2 more needed\n"
        "Preempted (1):\n"
        "  a/old for b/big (InCohortReclamation)\n"
        "Usage after this cycle (used / nominal):\n"
        "  a (cohort lab)\n"
        "    gpu: nvidia.com/gpu 2/4\n"
        "  b (cohort lab)\n"
        "    gpu: nvidia.com/gpu 0/4\n"
    )


def test_usage_counts_earlier_admissions_minus_preempted() -> None:
    from placer.queues import Admission, PodSet, Workload, read_kueue
    from placer.queues.report import cluster_queue_usage, format_amount

    config = read_kueue(queue_objects()).queues
    flavors = {"main": {GPU: "gpu", "pods": "gpu"}}
    workloads = [
        Workload("old", (PodSet("main", 3, {GPU: 1}),), "a", admission=Admission("a", flavors)),  # preempted
        Workload("kept", (PodSet("main", 2, {GPU: 1, "cpu": 500}),), "a", admission=Admission("a", flavors)),
        Workload("small", (PodSet("main", 1, {GPU: 2}),), "a"),
        Workload("big", (PodSet("main", 1, {GPU: 6}),), "b"),
    ]
    result = stand_in_result()
    usage = cluster_queue_usage(config, workloads, result)
    # kept: 2 pods x 1 GPU (+ pods 2; cpu has no flavor, not counted); small: 2 GPUs this cycle.
    assert usage == {"a": {("gpu", GPU): 4, ("gpu", "pods"): 2}, "b": {}}
    assert [format_amount("cpu", 1500), format_amount("cpu", 16000), format_amount("memory", 64 << 30),
            format_amount("memory", 512 << 20), format_amount("memory", 1000), format_amount(GPU, 8)] == [
        "1.5", "16", "64Gi", "512Mi", "1000", "8"]
