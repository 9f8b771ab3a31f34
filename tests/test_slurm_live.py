"""``placer import slurm --live`` against a real Slurm started here (tests/slurm_cluster.py):
the snapshot follows ``GresUsed=`` as jobs start and end, topology comes from
``scontrol show topology``, and a drained node's ``Reason=`` reaches ``placer report``.

Skipped, with the reason, where Slurm and munge are not installed or the tests do not run as
root; ``.ci/run`` installs them (Debian's slurm-wlm and munge) when it runs as root.
"""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest

from placer.adapters.slurm.live import import_slurm_live, run_scontrol
from placer.cli import main
from placer.exceptions import InvalidInputError
from slurm_cluster import NODES, SlurmCluster, _alive, missing

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = cluster.env["SLURM_CONF"]
    try:
        yield cluster
    finally:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
        pids = [int(p.read_text().split()[0]) for p in cluster.pid_files if p.exists()]
        cluster.stop()
        assert pids and not any(_alive(pid) for pid in pids)


def nodes_of(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in document["nodes"]}


def test_the_live_cluster_is_imported_with_its_switches(slurm: SlurmCluster, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cluster.json"
    assert main(["import", "slurm", "--live", "-o", str(out)]) == 0
    document = json.loads(out.read_text())
    nodes = nodes_of(document)
    assert sorted(nodes) == list(NODES)
    assert all(n["gpus"] == 8 and n["gpuModel"] == "a100" and n["cpuMilli"] == 16000 for n in nodes.values())
    assert document["topologyLevels"] == ["switch1", "switch2"]
    assert {name: n["topology"]["switch2"] for name, n in nodes.items()} == {
        "gpu01": "s1", "gpu02": "s1", "gpu03": "s2", "gpu04": "s2"}
    assert not any(n.get("pods") for n in nodes.values())


def test_the_snapshot_follows_gres_used(slurm: SlurmCluster, tmp_path: Path) -> None:
    submitted = slurm.run("sbatch", "--parsable", "--gres=gpu:a100:3", "-o", str(tmp_path / "job-%j.out"),
                          "--wrap", "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; sleep 300")
    job = submitted.strip().split(";")[0]
    try:
        slurm.wait_for(lambda: slurm.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", "running job")
        held = [p for n in import_slurm_live().snapshot.nodes for p in n.pods]
        assert [(p.name, p.gpus) for p in held] == [(f"job/{job}", (0, 1, 2))]
        shown = run_scontrol(["-d", "show", "node"])
        assert "GresUsed=gpu:a100:3(IDX:0-2)" in shown
        slurm.wait_for(lambda: (tmp_path / f"job-{job}.out").exists()
                       and "CUDA_VISIBLE_DEVICES=0,1,2" in (tmp_path / f"job-{job}.out").read_text(), "job output")
    finally:
        slurm.run("scancel", job)
    slurm.wait_for(lambda: not slurm.run("squeue", "-h", "-j", job, check=False).strip(), "job end")
    slurm.wait_for(lambda: not any(n.pods for n in import_slurm_live().snapshot.nodes), "GPUs freed")


def test_a_drained_node_shows_slurms_reason(slurm: SlurmCluster, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    slurm.run("scontrol", "update", "NodeName=gpu04", "State=DRAIN", "Reason=fan failure, placer test")
    try:
        imported = import_slurm_live()
        gpu04 = next(n for n in imported.snapshot.nodes if n.name == "gpu04")
        # Slurm adds who set it and when: "fan failure, placer test [root@2026-12-02T01:51:29]"
        assert gpu04.unschedulable and re.fullmatch(r"fan failure, placer test \[root@[0-9T:-]+\]",
                                                    gpu04.labels["slurm.reason"])
        snapshot = tmp_path / "cluster.json"
        snapshot.write_text(json.dumps(imported.document))
        assert main(["report", str(snapshot)]) == 0
        printed = capsys.readouterr().out
        assert re.search(r"gpu04.*fan failure, placer test", printed), printed
    finally:
        slurm.run("scontrol", "update", "NodeName=gpu04", "State=RESUME")


def test_scontrol_errors_are_one_line(slurm: SlurmCluster, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is not on the PATH"):
        import_slurm_live(scontrol="no-such-scontrol")
    with pytest.raises(InvalidInputError) as e:
        run_scontrol(["show", "node", "gpu99"])
    assert e.value.where == "scontrol show node gpu99" and "\n" not in str(e.value)


def test_a_gang_runs_where_placer_placed_it(slurm: SlurmCluster, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # One GPU of gpu01 is busy, so two whole 8-GPU nodes in one switch are gpu03 and gpu04.
    blocker = slurm.run("sbatch", "--parsable", "--nodelist=gpu01", "--gres=gpu:a100:1", "-o", "/dev/null",
                        "--wrap", "sleep 300").strip()
    gang = None
    try:
        slurm.wait_for(lambda: slurm.run("squeue", "-h", "-j", blocker, "-o", "%T").strip() == "RUNNING", "blocker")
        snapshot, request = tmp_path / "cluster.json", tmp_path / "request.json"
        assert main(["import", "slurm", "--live", "-o", str(snapshot)]) == 0
        request.write_text(json.dumps({
            "apiVersion": "placer/v1", "kind": "PlacementRequest",
            "pods": [{"name": "train", "replicas": 2, "gang": "train", "gpus": 8, "cpuMilli": 4000}],
            "gangs": {"train": {"topology": {"mode": "required", "level": "switch2"}}}}))
        capsys.readouterr()
        assert main(["place", str(snapshot), str(request), "--format", "slurm"]) == 0
        line, *notes = capsys.readouterr().out.splitlines()
        job, *args = shlex.split(line)
        assert job == "train" and notes == []  # whole nodes: no GPU indices left to Slurm's choice
        assert args == ["--nodelist=gpu[03-04]", "--nodes=2", "--ntasks-per-node=1", "--gres=gpu:a100:8"]
        gang = slurm.run("sbatch", "--parsable", *args, "-o", "/dev/null", "--wrap", "sleep 300").strip()
        slurm.wait_for(lambda: slurm.run("squeue", "-h", "-j", gang, "-o", "%T").strip() == "RUNNING", "the gang")
        assert slurm.run("squeue", "-h", "-j", gang, "-o", "%N").strip() == "gpu[03-04]"
    finally:
        slurm.run("scancel", blocker, *([gang] if gang else []))
    slurm.wait_for(lambda: not slurm.run("squeue", "-h").strip(), "jobs ended")
