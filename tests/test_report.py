"""placer report: schedulable pods per shape, fragmentation, findings — by hand and via the CLI."""
from __future__ import annotations

import json

import pytest

import placer
from placer.adapters import openb
from placer.cli import main
from placer.workload.fragmentation import TaskType, Workload
from placer.model import ClusterSnapshot, Node, NodeType, RunningPod, Taint
from placer.diagnostics.report import STANDARD_SHAPES, cluster_report, standard_workload


TYPES = {"h100": NodeType(gpus=8, gpu_model="H100"), "h100-16cpu": NodeType(gpus=8, gpu_model="H100", cpu_milli=16000)}


def node(name, cpu=None, pods=(), **kw):
    kind = "h100" if cpu is None else "h100-16cpu"
    return Node(name=name, hardware=TYPES[kind], type=kind, pods=pods, **kw)


SNAPSHOT = ClusterSnapshot(node_types=TYPES, nodes=(
    # 4 whole GPUs and half of GPU 3 free
    node("a", pods=(RunningPod(name="w", gpus=(0, 1, 2)), RunningPod(name="s", gpu_shares={3: 500}))),
    node("b", cpu=16000),                                     # all free, 16 CPUs
    node("c", unschedulable=True),                            # cordoned: not reachable
    node("d", taints=(Taint("maint", "NoSchedule"),)),        # tainted: counted, and a finding
    node("e", taints=(Taint("soft", "PreferNoSchedule"),), unhealthy_gpus=(0,)),
))


def rows(report):
    return {(r.shape.num_gpu, r.shape.gpu_milli, r.shape.cpu_milli): r for r in report.shapes}


def test_schedulable_pods_per_standard_shape_by_hand():
    report = cluster_report(SNAPSHOT)
    got = rows(report)
    free = 4.5 + 8 + 8 + 7  # a, b, d, e (c is cordoned)
    expect = {  # pods on a, b, d, e
        (1, 1000, 0): 4 + 8 + 8 + 7,
        (2, 1000, 0): 2 + 4 + 4 + 3,
        (4, 1000, 0): 1 + 2 + 2 + 1,
        (8, 1000, 0): 0 + 1 + 1 + 0,
        (1, 500, 0): 9 + 16 + 16 + 14,
        (1, 250, 0): 18 + 32 + 32 + 28,
    }
    assert {k: r.pods for k, r in got.items()} == expect
    for (gpus, milli, _), r in got.items():
        assert r.gpus == pytest.approx(r.pods * gpus * milli / 1000)
        assert r.reachable_free_gpus == pytest.approx(free)
    assert got[(8, 1000, 0)].nodes == 2 and got[(8, 1000, 0)].usable_pct == pytest.approx(100 * 16 / free)
    assert report.nodes == 5 and report.gpus == 40
    assert report.free_gpu_milli == 4500 + 8000 + 8000 + 7000  # a, b, d, e
    assert report.whole_free_gpus == 4 + 8 + 8 + 7
    assert report.unschedulable_free_gpu_milli == 8000  # c
    kinds = {(f.kind, f.node) for f in report.findings}
    assert kinds == {("cordoned", "c"), ("tainted", "d"), ("unhealthy-gpus", "e")}


def test_cpu_and_models_limit_a_workload_shape():
    workload = Workload(
        types=(TaskType(6000, 1000, 1), TaskType(0, 1000, 1, ("A100",))), popularity=(0.5, 0.5)
    )
    got = rows(cluster_report(SNAPSHOT, workload))
    assert got[(1, 1000, 6000)].pods == 4 + 2 + 8 + 7  # b has CPU for two; a, d, e do not track CPU
    assert got[(1, 1000, 0)].pods == 0 and got[(1, 1000, 0)].reachable_free_gpus == 0  # no A100


def test_fragmentation_matches_the_kernel():
    workload = standard_workload()
    report = cluster_report(SNAPSHOT)
    kernel = placer.Cluster(SNAPSHOT).fragmentation(workload)
    assert report.fragment.total == pytest.approx(kernel.total, rel=1e-12)
    assert report.fragment.total > 0  # node a's half GPU is a fragment to whole-GPU shapes
    assert len(report.shapes) == len(STANDARD_SHAPES)


def test_free_gpus_have_one_denominator_in_header_table_and_fragment(capsys):
    report = cluster_report(SNAPSHOT)
    free = report.free_gpu_milli / 1000
    assert all(r.reachable_free_gpus == pytest.approx(free) for r in report.shapes)  # no model limit
    assert report.fragment.idle_gpu_milli == report.free_gpu_milli
    assert report.fragment.rate == pytest.approx(report.fragment.total / report.free_gpu_milli)
    data = report.to_dict()
    assert data["freeGpus"] == free == 27.5 and data["freeGpusOnUnschedulableNodes"] == 8
    assert "schedulable" in data["freeGpusScope"]
    head = report.to_text().splitlines()[0]
    assert head == "5 node(s), 40 GPU(s): 27.5 free on schedulable nodes (27 whole); plus 8 on cordoned/drained/down nodes"


def test_cli_text_and_json(tmp_path, capsys):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(SNAPSHOT.to_dict()))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "8 GPUs" in out and "cordoned: c" in out and "Fragmentation" in out
    assert main(["report", str(path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_shape = {r["shape"]: r for r in data["schedulable"]}
    assert by_shape["8 GPUs"]["pods"] == 2 and by_shape["0.25 GPU"]["pods"] == 110
    assert data["fragmentation"]["fragmentGpus"] == pytest.approx(cluster_report(SNAPSHOT).fragment.total / 1000, abs=1e-3)


def test_cli_workload_from_an_openb_csv(tmp_path, capsys):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(SNAPSHOT.to_dict()))
    pods_csv = openb.data_path(openb.DEFAULT_PODS)
    assert main(["report", str(path), "--workload", str(pods_csv), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fragmentation"]["workload"] == pods_csv.name
    assert any(r["gpuMilli"] == 810 for r in data["schedulable"])  # the trace's 810-milli shares


@pytest.mark.parametrize(
    "argv, where",
    [
        (["report", "missing.json"], "missing.json"),
        (["report", "{snap}", "--format", "xml"], "--format"),
        (["report", "{snap}", "--workload", "nothere.csv"], "nothere.csv"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, argv, where):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(SNAPSHOT.to_dict()))
    argv = [a.replace("{snap}", str(path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("placer: error: ") and where in err[0]


def test_health_findings():
    doc = {
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"],
        "nodes": [
            {"name": "r1", "gpus": 4, "topology": {"rack": "a"},
             "labels": {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.clique": "u.1"},
             "resources": {"nvidia.com/gpu": {"capacity": 4, "allocatable": 4}},
             "pods": [{"name": "ns/p", "unknownGpus": 2}]},
            {"name": "r2", "gpus": 3, "topology": {"rack": "a"},
             "labels": {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.clique": "u.2"},
             "resources": {"nvidia.com/gpu": {"capacity": 4, "allocatable": 3}},
             "pods": [{"name": "ns/mig", "resources": {"nvidia.com/mig-1g.10gb": 1}}]},
            {"name": "r3", "gpus": 4, "topology": {"rack": "b"}, "labels": {"nvidia.com/gpu.clique": "u.3"}},
        ],
    }
    snap = placer.ClusterSnapshot.from_dict(doc)
    pods = [placer.PodRequest(name="want", resources={"example.com/fpga": 1})]
    found = {(f.kind, f.node): f.detail for f in cluster_report(snap, pods=pods).findings}
    assert found[("gpu-registration", "r2")] == "GPU counts disagree: hardware 3, capacity 4, allocatable 3, label 4"
    assert ("gpu-registration", "r1") not in found and ("gpu-registration", "r3") not in found
    assert found[("gpu-indices-unknown", "r1")] == (
        "pod ns/p holds 2 GPU(s) at indices the source did not give; placer assumes 2, 3"
    )
    assert "nvidia.com/mig-1g.10gb" in found[("resource-not-offered", "r2")]
    assert found[("resource-not-offered", "")] == "example.com/fpga, asked by want, is offered by no node"
    assert found[("mixed-clique", "")] == "rack a: its nodes carry clique ids u.1, u.2"


def test_a_shape_with_nothing_free_shows_no_usable_share():
    full = ClusterSnapshot(node_types=TYPES, nodes=(node("a", pods=(RunningPod(name="w", gpus=tuple(range(8))),)),))
    report = cluster_report(full)
    row = rows(report)[(8, 1000, 0)]
    assert (row.pods, row.reachable_free_gpus, row.usable_pct) == (0, 0, None)
    assert all(r["usablePct"] is None for r in report.to_dict()["schedulable"])
    line = next(x for x in report.to_text().splitlines() if x.strip().startswith("8 GPUs"))
    assert line.split()[-2:] == ["—", "0"] and "100.0%" not in report.to_text()


def test_gpu_labelled_node_without_gpu_capacity_is_a_finding(tmp_path, capsys):
    # A kubectl node copy cut before status.capacity: labels, no GPUs, nothing tracked.
    doc = {
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodes": [
            {"name": "cut", "gpuModel": "NVIDIA-H100-80GB-HBM3",
             "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            {"name": "counted", "cpuMilli": 64000, "memoryMiB": 512000, "maxPods": 110,
             "labels": {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            # MIG, mixed strategy: nvidia.com/gpu is 0, the GPUs are offered as MIG instances.
            {"name": "mig", "cpuMilli": 64000, "labels": {"nvidia.com/gpu.product": "A100-PCIE-40GB"},
             "resources": {"nvidia.com/gpu": {"capacity": 0, "allocatable": 0},
                           "nvidia.com/mig-1g.5gb": {"capacity": 7, "allocatable": 7}}},
            {"name": "cpu", "cpuMilli": 64000, "labels": {"nvidia.com/gpu.present": "false"}},
        ],
    }
    found = {(f.kind, f.node): f.detail for f in cluster_report(placer.ClusterSnapshot.from_dict(doc)).findings}
    assert found == {
        ("gpu-capacity-missing", "cut"): (
            "labelled as a GPU node (nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3) but has 0 GPUs and no "
            "nvidia.com/gpu capacity; CPU, memory and pods are untracked too: was status.capacity cut "
            "from the input?"
        ),
        ("gpu-capacity-missing", "counted"): (
            "labelled as a GPU node (nvidia.com/gpu.count=8) but has 0 GPUs and no nvidia.com/gpu "
            "capacity: is the device plugin running?"
        ),
    }
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(doc))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Findings: none" not in out
    assert "  gpu-capacity-missing: cut: labelled as a GPU node (nvidia.com/gpu.product=" in out


def test_a_consistent_mig_mixed_node_is_not_a_registration_finding():
    def mig_node(name, allocatable, label, mig_gpus=(0, 1)):
        return {"name": name, "gpus": 3, "gpuModel": "A100-PCIE-40GB", "mig": {"gpus": list(mig_gpus)},
                "labels": {"nvidia.com/gpu.count": str(label), "nvidia.com/mig.strategy": "mixed"},
                "resources": {"nvidia.com/gpu": {"capacity": allocatable, "allocatable": allocatable}}}

    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        mig_node("ok", 1, 3),            # 2 GPUs in MIG mode, 1 offered whole, 3 in all
        mig_node("short", 0, 3),         # one GPU neither in MIG mode nor offered
        mig_node("label-off", 1, 4),
        {"name": "single", "gpus": 2, "gpuModel": "A100-SXM4-40GB", "mig": {"gpus": "all"},
         "labels": {"nvidia.com/gpu.count": "14", "nvidia.com/mig.strategy": "single"},
         "migInstances": [{"gpu": g, "profile": "1g.5gb", "start": s} for g in (0, 1) for s in range(7)]},
    ]}
    found = {f.node: f.detail for f in cluster_report(placer.ClusterSnapshot.from_dict(doc)).findings
             if f.kind == "gpu-registration"}
    assert set(found) == {"short", "label-off"}
    assert found["short"] == ("GPU counts disagree: hardware 3, capacity 0, allocatable 0, label 3 "
                              "(2 GPU(s) in MIG mode, which nvidia.com/gpu does not count)")


# ----------------------------------------------------------------------------- per-node view, tables, colour


def node_view_snapshot():
    return {
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodes": [
            {"name": "gpu-node-with-a-rather-long-name-01", "gpus": 8, "gpuModel": "H100",
             "pods": [{"name": "job", "gpus": [0, 1, 2]}, {"name": "half", "gpuShares": {"3": 500}}]},
            {"name": "cordoned", "gpus": 4, "gpuModel": "H100", "unschedulable": True},
            {"name": "drained", "gpus": 4, "gpuModel": "H100", "unschedulable": True,
             "labels": {"slurm.state": "IDLE+DRAIN", "slurm.reason": "bad fan"}},
            {"name": "tainted", "gpus": 4, "gpuModel": "H100", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            {"name": "mig", "gpus": 1, "gpuModel": "A100-SXM4-40GB", "mig": {"gpus": "all"},
             "migInstances": [{"gpu": 0, "profile": "3g.20gb", "start": 0},
                              {"gpu": 0, "profile": "3g.20gb", "start": 4}],
             "pods": [{"name": "m", "mig": [{"gpu": 0, "profile": "3g.20gb", "start": 4}]}]},
        ],
    }


def test_report_nodes_gives_one_row_per_node(tmp_path, capsys):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(node_view_snapshot()))
    assert main(["report", str(path), "--nodes", "--format", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["nodes"]}
    assert list(rows) == ["gpu-node-with-a-rather-long-name-01", "cordoned", "drained", "tainted", "mig"]
    first = rows["gpu-node-with-a-rather-long-name-01"]
    assert (first["state"], first["freeGpus"], first["gpus"], first["pods"], first["migInstances"]) == (
        "ready", 4.5, 8, 2, None)
    assert [rows[n]["state"] for n in ("cordoned", "drained", "tainted")] == ["cordoned", "drained", "tainted"]
    assert rows["mig"]["migInstances"] == {"free": 1, "total": 2} and rows["mig"]["pods"] == 1
    assert main(["report", str(path), "--nodes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["NODE", "STATE"] and len(lines) == 6
    assert len({len(line) for line in lines}) == 1  # aligned: the last column is right-aligned
    assert lines[5].split() == ["mig", "ready", "0/1", "1/2", "1"]
    assert "\033[" not in "\n".join(lines)  # capsys is no terminal


def test_text_tables_stay_aligned_with_long_names():
    long_model = "NVIDIA-H100-80GB-HBM3-with-a-long-product-name"
    snap = placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodes": [{"name": "a", "gpus": 8, "gpuModel": long_model}]})
    workload = Workload(types=(TaskType(0, 1000, 1, (long_model,)), TaskType(0, 1000, 2)), popularity=(0.5, 0.5))
    text = cluster_report(snap, workload).to_text()
    table = text.split("each node counted on its own):\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) == 3 and len({len(line) for line in table}) == 1
    assert table[1].split()[-5:] == ["8", "8", "8", "100.0%", "1"]


def test_colour_only_when_asked(monkeypatch):
    from placer.diagnostics.report import node_rows, nodes_text
    from placer.text.lines import color_wanted

    snap = placer.ClusterSnapshot.from_dict(node_view_snapshot())
    report = cluster_report(snap)
    assert "\033[" not in report.to_text() and "\033[" not in nodes_text(node_rows(snap))
    coloured = report.to_text(color=True)
    assert "\033[33mcordoned\033[0m: cordoned" in coloured and "\033[33mdrained\033[0m: drained" in coloured
    table = nodes_text(node_rows(snap), color=True).splitlines()
    assert "\033[33mdrained\033[0m" in table[3] and "\033[" not in table[1]
    assert len({len(line.replace("\033[31m", "").replace("\033[33m", "").replace("\033[0m", ""))
                for line in table}) == 1  # escapes take no width

    class Tty:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert color_wanted("auto", Tty(True)) and not color_wanted("auto", Tty(False))
    assert color_wanted("always", Tty(False)) and not color_wanted("never", Tty(True))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_wanted("auto", Tty(True))
    monkeypatch.setenv("NO_COLOR", "")
    assert color_wanted("auto", Tty(True))


def test_cli_color_always_and_never(tmp_path, capsys):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(node_view_snapshot()))
    assert main(["report", str(path), "--color", "always"]) == 0
    assert "\033[33mtainted\033[0m" in capsys.readouterr().out
    for argv in (["report", str(path)], ["report", str(path), "--color", "never"]):
        assert main(argv) == 0
        assert "\033[" not in capsys.readouterr().out
    assert main(["report", str(path), "--color", "sometimes"]) == 2


def test_gpu_nodes_outside_every_domain_of_a_level_are_a_finding():
    def n(name, **kw):
        return {"name": name, "gpus": 8, **kw}

    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["block", "rack"],
           "nodes": [n("a", topology={"block": "b1", "rack": "r1"}), n("b", topology={"block": "b1"}),
                     n("c"), {"name": "cpu", "cpuMilli": 8000}]}
    found = [f.detail for f in cluster_report(placer.ClusterSnapshot.from_dict(doc)).findings
             if f.kind == "outside-topology"]
    assert found == [
        "1 of 3 GPU node(s) are in no block domain: c; a gang that requires level block never uses them",
        "2 of 3 GPU node(s) are in no rack domain: b, c; a gang that requires level rack never uses them",
    ]
