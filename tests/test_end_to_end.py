"""kubectl and nvidia-smi output through import → place → explain → report → reconcile.

The files are in tests/data/e2e: four 8-GPU nodes in racks r07 and r08 (``nodes.json``,
built from the handmade kubectl output of tests/data/k8s), the pods running on them
(``pods.json``; one holds GPUs at indices Kubernetes does not give), the workloads waiting
(``workloads.yaml``: a Kueue job of two 3-GPU workers that must share a rack, a 4-GPU
pod) and nvidia-smi CSVs of node dgx-h100-1. These are the README's commands.
"""
from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import yaml

import placer
from placer.cli import main

DATA = Path(__file__).parent / "data" / "e2e"
LEVELS = ["--level", "block=topology.example.com/block", "--level", "rack=topology.example.com/rack"]


def run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_import_place_explain_report_reconcile(tmp_path, capsys):
    cluster, request = tmp_path / "cluster.json", tmp_path / "request.json"
    run(capsys, "import", "kubernetes", "--nodes", str(DATA / "nodes.json"), "--pods", str(DATA / "pods.json"),
        *LEVELS, "-o", str(cluster))
    run(capsys, "import", "kubernetes-request", str(DATA / "workloads.yaml"), *LEVELS, "-o", str(request))
    snap = placer.load_snapshot(cluster)
    assert [n.name for n in snap.nodes] == [f"dgx-h100-{i}" for i in range(4)]
    assert [n.topology["rack"] for n in snap.nodes] == ["r07", "r07", "r08", "r08"]
    held = {p.name: (p.gpus, p.gpu_indices_known) for n in snap.nodes for p in n.pods}
    assert held["team-a/train-0"] == ((0, 1, 2, 3), True)  # from the placer.io/gpus annotation
    assert held["team-b/infer-1"] == ((6, 7), False)  # Kubernetes does not say which GPUs

    # place: the job must share a rack; only r08 has 3 free GPUs on each of two nodes
    result = json.loads(run(capsys, "place", str(cluster), str(request)))
    where = {a["pod"]: (a["node"], a["gpus"]) for a in result["assignments"]}
    assert where == {"team-x/finetune-0": ("dgx-h100-2", [5, 6, 7]), "team-x/finetune-1": ("dgx-h100-3", [5, 6, 7])}
    assert [u["pod"] for u in result["unschedulable"]] == ["team-y/eval-4gpu"]
    checked = run(capsys, "check", str(cluster), str(request), str(_write(tmp_path / "result.json", result)))
    assert checked.startswith("OK: 2 assignment(s), 1 unschedulable, no violations")
    bindings = list(yaml.safe_load_all(run(capsys, "place", str(cluster), str(request), "--format", "k8s-binding")))
    assert [(b["metadata"]["namespace"], b["metadata"]["name"], b["target"]["name"],
             b["metadata"]["annotations"]["placer.io/gpus"]) for b in bindings] == [
        ("team-x", "finetune-0", "dgx-h100-2", "5,6,7"), ("team-x", "finetune-1", "dgx-h100-3", "5,6,7")]

    # explain: 4 GPUs are free, 2 on each of the r07 nodes: fragmentation
    text = run(capsys, "explain", str(cluster), str(request))
    assert "pod team-y/eval-4gpu (1 pod(s)): 0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in text
    assert "cause: fragmentation — 4 GPU(s) free in total on 4 eligible node(s), 4 GPU(s) needed" in text
    assert "nearest: dgx-h100-1 lacks 2 GPU(s); GPUs held by team-c/pretrain-0 (6 GPU(s))" in text

    # report: what still fits, and the GPUs at assumed indices
    report = json.loads(run(capsys, "report", str(cluster), "--format", "json"))
    shapes = {r["shape"]: r for r in report["schedulable"]}
    assert shapes["2 GPUs"]["pods"] == 1 + 1 + 1 + 1 and shapes["4 GPUs"]["pods"] == 0
    assert report["freeGpus"] == 2 + 2 + 3 + 3
    kinds = {(f["kind"], f["node"]) for f in report["findings"]}
    assert ("gpu-indices-unknown", "dgx-h100-0") in kinds

    # reconcile dgx-h100-1: pretrain-0 holds 0-5 and runs on 0-4; pid 5005 holds GPU 7
    found = json.loads(run(capsys, "reconcile", str(cluster), "--node", "dgx-h100-1",
                           "--gpus", str(DATA / "dgx-h100-1_query-gpu.csv"),
                           "--apps", str(DATA / "dgx-h100-1_query-compute-apps.csv")))
    assert [(z["gpu"], z["pids"]) for z in found["zombies"]] == [(7, [5005])]
    assert [(i["gpu"], i["pods"]) for i in found["idle"]] == [(5, ["team-c/pretrain-0"])]


def _write(path: Path, document: dict) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_slurm_import_places(tmp_path, capsys):
    slurm = Path(__file__).parent / "data" / "slurm"
    out = tmp_path / "cluster.json"
    run(capsys, "import", "slurm", "--nodes", str(slurm / "handmade-scontrol-d-show-node.txt"),
        "--gres", str(slurm / "handmade-gres.conf"), "--topology", str(slurm / "handmade-topology.conf"),
        "-o", str(out))
    snap = placer.load_snapshot(out)
    assert snap.topology_levels == ("switch1", "switch2")
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "one", "gpus": 1}]}
    result = placer.place(snap, request)
    assert len(result.assignments) == 1 and placer.check_placement(snap, request, result) == []
    slurm_lines = run(capsys, "place", str(out), str(_write(tmp_path / "r.json", request)), "--format", "slurm")
    assert slurm_lines.startswith("one --nodelist=") and "--gres=gpu:" in slurm_lines


def test_import_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "nodes.json"
    bad.write_text('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "a"}, '
                   '"status": {"allocatable": {"cpu": "12Q"}}}]}')
    assert main(["import", "kubernetes", "--nodes", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("placer: error: ") and "nodes.json: items[0].status.allocatable.cpu" in err[0]
    assert main(["import", "kubernetes", "--nodes", str(bad), "--level", "rack"]) == 2
    assert "--level" in capsys.readouterr().err
    out = tmp_path / "never.json"
    assert main(["import", "slurm", "--nodes", str(tmp_path / "missing.txt"), "-o", str(out)]) == 2
    assert not out.exists()


README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_real_cluster_commands_print_what_it_shows(tmp_path, capsys, monkeypatch):
    """The "Real clusters" section's commands run in a folder of the e2e files, and each of its
    ``$ placer ...`` blocks is exactly what that command prints there."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Real clusters", 1)[1].split("\n## ", 1)[0]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).splitlines()
    shown = re.findall(r"```\n\$ (placer [^\n]*)\n(.*?)```", section, re.S)
    assert [c for c, _ in shown] == ["placer explain cluster.json request.json", "placer report cluster.json"]
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    levels = shlex.split(commands[0].partition("=")[2])[0]
    for line in commands[1:]:
        argv = shlex.split(line.replace("$L", levels), comments=True)
        assert argv[0] == "placer"
        run(capsys, *argv[1:])
    for command, output in shown:
        assert run(capsys, *shlex.split(command)[1:]) == output
