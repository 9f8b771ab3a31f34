"""Importing MIG: Kubernetes mixed/single strategy, nvidia-smi mig tables, Slurm typed GRES.

Real fixtures are in tests/data (each with its ``.src``); nodes around the Kubernetes
fragments are built in the tests, since the fragments are not whole objects.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import placer
from placer.adapters.kubernetes.snapshot import import_kubernetes, snapshot_from_kubernetes
from placer.adapters.kubernetes.workloads import request_from_kubernetes
from placer.adapters.nvidia_smi.listing import parse_gpu_list
from placer.adapters.nvidia_smi.mig_tables import parse_gpu_instances_file, parse_mig_profiles_file
from placer.adapters.nvidia_smi.mig import mig_node_from_nvidia_smi, parse_gpu_placements, parse_gpu_placements_file
from placer.adapters.slurm.importer import import_slurm
from placer.cli import main
from placer.exceptions import InvalidInputError
from placer.formats import render
from placer.mig.layout import fewest_gpus, layout_instances
from placer.model.mig_profiles import table_for

DATA = Path(__file__).parent / "data"
MIG_LABELS = DATA / "k8s" / "node-labels-gfd-mig-mixed_a100-pcie-40gb_network-operator-211_fragment.yaml"


def _node(name: str, labels: dict, allocatable: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", **allocatable}}}


def _pod(name: str, node: str | None, limits: dict) -> dict:
    spec: dict = {"containers": [{"name": "c", "resources": {"limits": limits}}]}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


def _write(path: Path, items: list) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}), encoding="utf-8")
    return path


def _gfd_labels() -> dict:
    """The real GFD mixed-strategy labels of an A100-PCIE-40GB node (fragment), made whole."""
    return dict(yaml.safe_load(MIG_LABELS.read_text(encoding="utf-8")), **{"nvidia.com/mig.strategy": "mixed"})


# ----------------------------------------------------------------------------- layout


def test_layout_is_largest_first_lowest_start_and_backtracks():
    table = table_for("A100-PCIE-40GB")
    one, two = table.profile("1g.5gb"), table.profile("2g.10gb")
    assert layout_instances(table, {one: 4, two: 2}, [0]) is None  # 8 compute slices > 7
    laid = layout_instances(table, {one: 4, two: 2}, [0, 1])
    assert [(g, p.name, s) for g, p, s in laid] == [
        (0, "2g.10gb", 0), (0, "2g.10gb", 2), (0, "1g.5gb", 4), (0, "1g.5gb", 5), (0, "1g.5gb", 6),
        (1, "1g.5gb", 0),
    ]
    assert fewest_gpus(table, {one: 4, two: 2}, 8) == 2
    nvl = table_for("NVIDIA-H100-NVL")
    # 3g at 0 would leave 4-7, where 2g + two 1g do not fit (a 1g cannot start at 7): 3g goes to 4.
    laid = layout_instances(nvl, {nvl.profile("1g.12gb"): 2, nvl.profile("2g.24gb"): 1, nvl.profile("3g.47gb"): 1}, [0])
    assert [(p.name, s) for _, p, s in laid] == [("2g.24gb", 0), ("1g.12gb", 2), ("1g.12gb", 3), ("3g.47gb", 4)]
    # An impossible count is found out quickly (56 x 1g fill 8 GPUs; one more 2-slice instance cannot fit).
    assert layout_instances(nvl, {nvl.profile("1g.12gb"): 56, nvl.profile("1g.24gb"): 1}, range(8)) is None
    media = table.profile("1g.5gb+me")
    assert layout_instances(table, {media: 2}, [0]) is None
    assert [g for g, _, _ in layout_instances(table, {media: 2}, [0, 1])] == [0, 1]


# ----------------------------------------------------------------------------- Kubernetes


def test_mixed_strategy_node_gfd_labels_and_pods(tmp_path):
    labels = dict(_gfd_labels(), **{"nvidia.com/gpu.count": "2", "nvidia.com/mig.config": "all-balanced"})
    node = _node("a100-mig", labels, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.5gb": "4", "nvidia.com/mig-2g.10gb": "2"})
    nodes = _write(tmp_path / "nodes.json", [node])
    pods = _write(tmp_path / "pods.json", [
        _pod("a", "a100-mig", {"nvidia.com/mig-2g.10gb": "1"}),
        _pod("b", "a100-mig", {"nvidia.com/mig-1g.5gb": "2"}),
    ])
    doc = snapshot_from_kubernetes(nodes, pods).to_dict()["nodes"][0]
    assert doc["gpus"] == 2 and doc["mig"] == {"gpus": "all", "mode": "static"}
    assert doc["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert [(m["gpu"], m["profile"], m["start"]) for m in doc["migInstances"]] == [
        (0, "2g.10gb", 0), (0, "2g.10gb", 2), (0, "1g.5gb", 4), (0, "1g.5gb", 5), (0, "1g.5gb", 6),
        (1, "1g.5gb", 0),
    ]
    held = {p["name"]: p["mig"] for p in doc["pods"]}
    assert held == {"ml/a": [{"gpu": 0, "profile": "2g.10gb", "start": 0}],
                    "ml/b": [{"gpu": 0, "profile": "1g.5gb", "start": 4}, {"gpu": 0, "profile": "1g.5gb", "start": 5}]}

    # A pending pod asking for nvidia.com/mig-2g.10gb gets the one free 2g.10gb.
    request = request_from_kubernetes([_write(tmp_path / "w.json", [_pod("c", None, {"nvidia.com/mig-2g.10gb": "1"})])])
    assert request.pods[0].mig.profile == "2g.10gb" and request.pods[0].mig.count == 1
    assert not request.pods[0].resources
    snapshot = snapshot_from_kubernetes(nodes, pods)
    result = placer.place(snapshot, request)
    assert [(m.gpu, m.profile, m.start, m.create) for m in result.assignments[0].mig] == [(0, "2g.10gb", 2, False)]
    assert placer.check_placement(snapshot, request, result) == []



def test_a_running_pod_holds_the_instances_its_placer_mig_annotation_names(tmp_path):
    from placer.adapters.kubernetes.snapshot import import_kubernetes

    labels = dict(_gfd_labels(), **{"nvidia.com/gpu.count": "2"})
    node = _node("a100-mig", labels, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.5gb": "4", "nvidia.com/mig-2g.10gb": "2"})
    named = _pod("named", "a100-mig", {"nvidia.com/mig-1g.5gb": "2"})
    named["metadata"]["annotations"] = {"placer.io/mig": "1/1g.5gb/0,0/1g.5gb/6"}  # placer's bind chose these
    stale = _pod("stale", "a100-mig", {"nvidia.com/mig-2g.10gb": "1"})
    stale["metadata"]["annotations"] = {"placer.io/mig": "0/1g.5gb/4"}  # not a 2g.10gb: the first free one
    done = import_kubernetes(_write(tmp_path / "nodes.json", [node]), _write(tmp_path / "pods.json", [named, stale]))
    held = {p["name"]: [(m["gpu"], m["start"]) for m in p["mig"]] for p in done.document["nodes"][0]["pods"]}
    assert held == {"ml/named": [(1, 0), (0, 6)], "ml/stale": [(0, 0)]}
    (note,) = [n for n in done.notes if "placer.io/mig" in n]
    assert "'0/1g.5gb/4' does not name 1 free 2g.10gb instance(s) of node 'a100-mig'" in note


def test_whole_gpus_beside_mig_gpus_and_counts_that_do_not_fit(tmp_path):
    labels = dict(_gfd_labels(), **{"nvidia.com/gpu.count": "3"})
    node = _node("n", labels, {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.5gb": "4", "nvidia.com/mig-2g.10gb": "2"})
    doc = snapshot_from_kubernetes(_write(tmp_path / "n.json", [node])).to_dict()["nodes"][0]
    assert doc["gpus"] == 3 and doc["mig"] == {"gpus": [0, 1], "mode": "static"}
    labels["nvidia.com/gpu.count"] = "2"  # one MIG GPU: 4 x 1g + 2 x 2g do not fit
    path = _write(tmp_path / "n.json", [_node("n", labels, node["status"]["allocatable"])])
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(path)
    assert err.value.where == f"{path}: items[0].status.allocatable.nvidia.com/mig-1g.5gb"
    assert "4 x 1g.5gb, 2 x 2g.10gb cannot be laid out on the 1 GPU(s) in MIG mode" in err.value.what
    assert main(["import", "kubernetes", "--nodes", str(path)]) == 2


def test_single_strategy_node(tmp_path):
    labels = {"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
              "nvidia.com/gpu.count": "14", "nvidia.com/gpu.memory": "4864"}
    nodes = _write(tmp_path / "n.json", [_node("s", labels, {"nvidia.com/gpu": "14"})])
    pods = _write(tmp_path / "p.json", [_pod("a", "s", {"nvidia.com/gpu": "3"})])
    doc = snapshot_from_kubernetes(nodes, pods).to_dict()["nodes"][0]
    assert doc["gpus"] == 2 and doc["gpuModel"] == "NVIDIA-A100-SXM4-40GB" and "gpuMemoryMiB" not in doc
    assert "resources" not in doc
    assert [(m["gpu"], m["start"]) for m in doc["migInstances"]] == [(g, s) for g in (0, 1) for s in range(7)]
    assert doc["pods"][0]["mig"] == [{"gpu": 0, "profile": "1g.5gb", "start": s} for s in (0, 1, 2)]
    assert "unknownGpus" not in doc["pods"][0]


def test_model_without_mig_table_keeps_resources_with_a_note(tmp_path, capsys):
    labels = {"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/mig.strategy": "mixed"}
    path = _write(tmp_path / "n.json", [_node("l40s", labels, {"nvidia.com/mig-1g.10gb": "2"})])
    imported = import_kubernetes(path)
    node = imported.document["nodes"][0]
    assert "mig" not in node and node["resources"]["nvidia.com/mig-1g.10gb"]["allocatable"] == 2
    assert len(imported.notes) == 1 and "'NVIDIA-L40S' has no bundled MIG table" in imported.notes[0]
    assert imported.notes[0].startswith(f"{path}: items[0].metadata.labels: ")
    assert main(["import", "kubernetes", "--nodes", str(path), "-o", str(tmp_path / "out.json")]) == 0
    assert capsys.readouterr().err.startswith("placer: import kubernetes: note: ")


def test_bad_mig_pods(tmp_path):
    nodes = _write(tmp_path / "n.json", [_node("m", _gfd_labels(), {"nvidia.com/mig-1g.5gb": "1"})])
    pods = _write(tmp_path / "p.json", [_pod("a", "m", {"nvidia.com/mig-1g.5gb": "2"})])
    with pytest.raises(InvalidInputError) as err:
        snapshot_from_kubernetes(nodes, pods)
    assert err.value.where == f"{pods}: items[0]"
    assert "holds 2 nvidia.com/mig-1g.5gb on node 'm', which has 1 such instance(s)" in err.value.what
    two = _write(tmp_path / "w.json", [_pod("b", None, {"nvidia.com/mig-1g.5gb": "1", "nvidia.com/mig-2g.10gb": "1"})])
    with pytest.raises(InvalidInputError, match="placer takes one profile per pod") as err:
        request_from_kubernetes([two])
    assert err.value.where == f"{two}: items[0].spec"


# ----------------------------------------------------------------------------- nvidia-smi

LGI = DATA / "nvidia-smi" / "nvidia-smi-mig-lgi_a100-80gb-mixed-profiles_dcgm-138_partial.txt"
LGIP = DATA / "nvidia-smi" / "nvidia-smi-mig-lgip_a100-80gb-no-free_mig-parted-97_partial.txt"
LGIPP = DATA / "nvidia-smi" / "handmade-mig-lgipp_a100-80gb.txt"
UUID0 = "GPU-513536b6-7d19-9063-b049-1e69664bb298"
UUID1 = "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95"
# -L of a driver before 470 on the dcgm-138 node: legacy MIG-GPU-<uuid>/<gi>/<ci> names on GPU 0;
# new-style UUIDs on GPU 1, where only the 3g.40gb (one of its profile) can be tied.
LIST = f"""GPU 0: NVIDIA A100-SXM4-80GB (UUID: {UUID0})
  MIG 3g.40gb     Device  0: (UUID: MIG-{UUID0}/2/0)
  MIG 2g.20gb     Device  1: (UUID: MIG-{UUID0}/3/0)
  MIG 1g.10gb     Device  2: (UUID: MIG-{UUID0}/9/0)
  MIG 1g.10gb     Device  3: (UUID: MIG-{UUID0}/10/0)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: {UUID1})
  MIG 3g.40gb     Device  0: (UUID: MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a)
  MIG 2g.20gb     Device  1: (UUID: MIG-a45882f0-9215-5733-a0c1-49286ab31cb5)
  MIG 1g.10gb     Device  2: (UUID: MIG-f00d722c-f4e1-52c9-aa31-750441ae1bfe)
  MIG 1g.10gb     Device  3: (UUID: MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b)
"""


def test_lgi_builds_the_node_and_checks_it_against_the_table():
    imported = mig_node_from_nvidia_smi("dcgm", parse_gpu_instances_file(LGI), gpu_model="A100-SXM4-80GB")
    node = imported.node
    assert node["gpus"] == 2 and node["mig"] == {"gpus": "all", "mode": "static"} and imported.findings == ()
    assert [(m["gpu"], m["profile"], m["start"]) for m in node["migInstances"]] == [
        (g, p, s) for g in (0, 1) for p, s in (("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4))
    ]
    placer.ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [node]})
    # An A100-40GB has no 1-slice 1g.10gb (its 1g.10gb covers 2 slices): refused at the first row.
    with pytest.raises(InvalidInputError) as err:
        mig_node_from_nvidia_smi("x", parse_gpu_instances_file(LGI), gpu_model="A100-SXM4-40GB")
    assert err.value.where == f"{LGI.name}:7" and "no MIG profile 1g.10gb of 1 slice(s) on A100-SXM4-40GB" in err.value.what
    with pytest.raises(InvalidInputError, match="no bundled MIG table"):
        mig_node_from_nvidia_smi("x", parse_gpu_instances_file(LGI), gpu_model="Tesla-T4")


def test_lgipp_parses_and_a_driver_that_refuses_a_start_makes_the_node_static():
    lines = parse_gpu_placements_file(LGIPP)
    assert len(lines) == 14 and lines[5].profile_id == 5 and lines[5].starts == (0,) and lines[5].size == 4
    assert lines[4].starts == (0, 4) and lines[4].where == f"{LGIPP.name}:6"
    instances = parse_gpu_instances_file(LGI)
    same = mig_node_from_nvidia_smi("n", instances, gpu_model="A100-80GB", placements=lines, mode="dynamic")
    assert same.findings == () and same.node["mig"]["mode"] == "dynamic"
    text = LGIPP.read_text(encoding="utf-8").replace("GPU  1 Profile ID 15 Placements: {0,2,4,6}:2",
                                                     "GPU  1 Profile ID 15 Placements: {0,2,4}:2")
    fewer = mig_node_from_nvidia_smi("n", instances, gpu_model="A100-80GB", mode="dynamic",
                                     placements=parse_gpu_placements(text, "lgipp.txt"))
    assert fewer.node["mig"]["mode"] == "static"
    assert fewer.findings[0] == "lgipp.txt:11: 1g.20gb may not start at [6] per the driver; the bundled table allows it"
    with pytest.raises(InvalidInputError) as err:
        parse_gpu_placements(text.replace("{0,4}:4", "{0,4}"), "lgipp.txt")
    assert err.value.where == "lgipp.txt:6"


def test_lgip_differences_are_findings():
    profiles = parse_mig_profiles_file(LGIP, allow_cut=True)  # a partial copy: its first 4 profiles
    imported = mig_node_from_nvidia_smi("n", parse_gpu_instances_file(LGI), gpu_model="A100-80GB", profiles=profiles)
    assert imported.findings == (
        f"{LGIP.name}:7: the driver does not list 1g.20gb, 4g.40gb, 7g.80gb of the bundled table",
    )


def test_device_names_from_nvidia_smi_L_reach_the_env_output(tmp_path):
    listed = parse_gpu_list(LIST, "L.txt")
    imported = mig_node_from_nvidia_smi("dgx", parse_gpu_instances_file(LGI), gpu_list=listed)
    devices = {(m["gpu"], m["start"]): m.get("device") for m in imported.node["migInstances"]}
    assert devices[(0, 3)] == f"MIG-{UUID0}/10/0" and devices[(0, 4)] == f"MIG-{UUID0}/2/0"
    assert devices[(1, 4)] == "MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a"  # the one 3g.40gb of GPU 1
    assert devices[(1, 2)] is None and devices[(1, 3)] is None  # two 1g.10gb: cannot be told apart
    assert devices[(1, 0)] == "MIG-a45882f0-9215-5733-a0c1-49286ab31cb5"  # the one 2g.20gb
    assert imported.findings == ("L.txt:6: 2 MIG device(s) of GPU 1 not tied to an instance (nvidia-smi -L does not "
                                 "print the GPU instance id; several instances of one profile cannot be told apart)",)
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [imported.node]}
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": "first-fit", "pods": [
        {"name": "a", "mig": {"profile": "3g.40gb"}}, {"name": "b", "mig": {"profile": "3g.40gb"}},
        {"name": "c", "mig": {"profile": "1g.10gb"}, "gpuModels": []}]}
    result = placer.place(snapshot, request)
    env = render(result, "env", snapshot).splitlines()
    assert env[0] == f"a dgx NVIDIA_VISIBLE_DEVICES=MIG-{UUID0}/2/0 PLACER_MIG=0/3g.40gb/4"
    assert env[1] == "b dgx NVIDIA_VISIBLE_DEVICES=MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a PLACER_MIG=1/3g.40gb/4"
    assert env[2] == f"c dgx NVIDIA_VISIBLE_DEVICES=MIG-{UUID0}/9/0 PLACER_MIG=0/1g.10gb/2"
    assert render(result, "env").splitlines()[0] == "a dgx NVIDIA_VISIBLE_DEVICES=unknown PLACER_MIG=0/3g.40gb/4"
    binding = yaml.safe_load_all(render(result, "k8s-binding", snapshot))
    annotations = next(iter(binding))["metadata"]["annotations"]
    assert annotations == {"placer.io/mig": "0/3g.40gb/4", "placer.io/mig-devices": f"MIG-{UUID0}/2/0"}


def test_import_nvidia_smi_cli(tmp_path, capsys):
    out = tmp_path / "snap.json"
    argv = ["import", "nvidia-smi", "--node", "dcgm", "--lgi", str(LGI), "--gpu-model", "A100-SXM4-80GB",
            "--lgipp", str(LGIPP), "-o", str(out)]
    assert main(argv) == 0
    node = json.loads(out.read_text(encoding="utf-8"))["nodes"][0]
    assert node["gpus"] == 2 and len(node["migInstances"]) == 8
    assert main(["import", "nvidia-smi", "--node", "x", "--lgi", str(LGI)]) == 2
    assert capsys.readouterr().err == (
        "placer: error: --gpu-model: no GPU model: give the nvidia-smi -L output or the GPU model\n"
    )
    assert main(["import", "nvidia-smi", "--node", "x", "--lgi", str(LGIPP), "--gpu-model", "A100-80GB"]) == 2
    assert capsys.readouterr().err.startswith(f"placer: error: {LGIPP.name}:2: ")


TELEGRAF_L = DATA / "nvidia-smi" / "nvidia-smi-L_4x-a100-80gb-mixed-mig_telegraf-5812.txt"  # 4 GPUs, 4x 1g.20gb on 0
DATADOG_L = DATA / "nvidia-smi" / "nvidia-smi-L_a100-80gb-mig-7x1g.10gb_datadog-agent-pr33120.txt"  # 1 GPU, 7x 1g.10gb


def _refused(instances, gpu_list, gpu_model=None) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as err:
        mig_node_from_nvidia_smi("n", instances, gpu_list=gpu_list, gpu_model=gpu_model)
    return err.value


def test_lgi_and_list_of_different_machines_are_refused_naming_both():
    instances = parse_gpu_instances_file(LGI)  # dcgm-138: GPUs 0 and 1, 2g+1g+1g+3g each
    # telegraf's -L: GPU 0 has four 1g.20gb devices, and -lgi no 1g.20gb instance on GPU 0.
    err = _refused(instances, parse_gpu_list(TELEGRAF_L.read_text(encoding="utf-8"), TELEGRAF_L.name))
    assert err.where == f"{TELEGRAF_L.name}:3"
    assert err.what == (f"nvidia-smi -L lists 4 1g.20gb MIG device(s) on GPU 0, but nvidia-smi mig -lgi ({LGI.name}) "
                        "lists no 1g.20gb GPU instance there: the two outputs are not of the same machine")
    # datadog's -L: one GPU, and -lgi has instances on GPU 1.
    err = _refused(instances, parse_gpu_list(DATADOG_L.read_text(encoding="utf-8"), DATADOG_L.name))
    assert err.where == f"{LGI.name}:15"
    assert err.what == (f"GPU 1 is not among the 1 GPU(s) nvidia-smi -L lists (GPU 0 at {DATADOG_L.name}:1): "
                        "the two outputs are not of the same machine")
    # The same -L with GPU 1's instances gone: 7 1g.10gb devices but only two 1g.10gb instances on GPU 0.
    err = _refused([i for i in instances if i.gpu == 0],
                   parse_gpu_list(DATADOG_L.read_text(encoding="utf-8"), DATADOG_L.name))
    assert err.where == f"{DATADOG_L.name}:2" and "lists 7 1g.10gb MIG device(s) on GPU 0, more than the 2 " \
        f"1g.10gb GPU instance(s) nvidia-smi mig -lgi ({LGI.name}) lists there hold" in err.what


def test_devices_of_list_that_lgi_cannot_hold_are_refused():
    instances = parse_gpu_instances_file(LGI)
    # A legacy UUID naming GPU instance 11, which -lgi does not have on GPU 0 (it has 2, 3, 9, 10).
    err = _refused(instances, parse_gpu_list(LIST.replace(f"{UUID0}/10/0", f"{UUID0}/11/0"), "L.txt"))
    assert err.where == "L.txt:5"
    assert err.what == (f"MIG device MIG-{UUID0}/11/0 of GPU 0 is in GPU instance 11, which nvidia-smi mig -lgi "
                        f"({LGI.name}) does not list on GPU 0: the two outputs are not of the same machine")
    # Compute instances of one GPU instance: three 1c.3g.40gb devices fit GPU 1's one 3g.40gb, four do not.
    split = LIST.replace("  MIG 3g.40gb     Device  0: (UUID: MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a)\n", "".join(
        f"  MIG 1c.3g.40gb  Device  {k}: (UUID: MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66{k})\n" for k in range(3)))
    split = split.replace("Device  1: (UUID: MIG-a458", "Device  4: (UUID: MIG-a458")
    split = split.replace("Device  2: (UUID: MIG-f00d", "Device  5: (UUID: MIG-f00d")
    split = split.replace("Device  3: (UUID: MIG-9305", "Device  6: (UUID: MIG-9305")
    node = mig_node_from_nvidia_smi("n", instances, gpu_list=parse_gpu_list(split, "L.txt")).node
    assert len(node["migInstances"]) == 8
    four = split.replace("  MIG 2g.20gb     Device  4", "  MIG 1c.3g.40gb  Device  3: (UUID: MIG-ce861fb0-a248-58ce-"
                         "a9a8-f9adbc22a663)\n  MIG 2g.20gb     Device  4")
    err = _refused(instances, parse_gpu_list(four, "L.txt"))
    assert err.where == "L.txt:7" and "lists 4 3g.40gb MIG device(s) on GPU 1, more than the 1 3g.40gb" in err.what
    # A profile that is not one of the model's.
    err = _refused(instances, parse_gpu_list(LIST.replace("MIG 2g.20gb     Device  1", "MIG 2g.10gb     Device  1"), "L"))
    assert err.where == "L:3" and err.what.startswith("MIG device profile 2g.10gb is not one of A100-80GB: 1g.10gb, ")


def test_list_model_without_mig_or_another_model_than_gpu_model_is_refused(tmp_path, capsys):
    instances = parse_gpu_instances_file(LGI)
    rtx = "".join(f"GPU {i}: NVIDIA GeForce RTX 4090 (UUID: GPU-{i}1234567-89ab-cdef-0123-456789abcdef)\n" for i in (0, 1))
    err = _refused(instances, parse_gpu_list(rtx, "L.txt"))
    assert err.where == "L.txt:1" and err.what.startswith(
        f"nvidia-smi -L lists NVIDIA GeForce RTX 4090, which has no bundled MIG table, but nvidia-smi mig -lgi "
        f"({LGI.name}:7) lists MIG instances: not the same machine, or give the GPU model; placer knows MIG on: ")
    # A -lgi profile the -L model lacks names where the model came from.
    forty = LIST.replace("A100-SXM4-80GB", "A100-SXM4-40GB")
    err = _refused(instances, parse_gpu_list(forty, "L.txt"))
    assert err.where == f"{LGI.name}:7"
    assert "no MIG profile 1g.10gb of 1 slice(s) on A100-SXM4-40GB (the model nvidia-smi -L lists at L.txt:1)" in err.what
    listed = tmp_path / "L.txt"
    listed.write_text(LIST, encoding="utf-8")
    out = tmp_path / "snap.json"
    argv = ["import", "nvidia-smi", "--node", "n", "--lgi", str(LGI), "--list", str(listed), "-o", str(out)]
    assert main([*argv, "--gpu-model", "A100-SXM4-40GB"]) == 2
    assert capsys.readouterr().err == (
        "placer: error: --gpu-model: 'A100-SXM4-40GB' is not the NVIDIA A100-SXM4-80GB that nvidia-smi -L lists (L.txt:1)\n")
    assert not out.exists()
    assert main([*argv, "--gpu-model", "A100-80GB"]) == 0  # another name of the same model
    capsys.readouterr()
    assert main(["import", "nvidia-smi", "--node", "n", "--lgi", str(LGI), "--list", str(TELEGRAF_L),
                 "-o", str(tmp_path / "other.json")]) == 2
    err_line = capsys.readouterr().err
    assert err_line.count("\n") == 1 and err_line.startswith(f"placer: error: {TELEGRAF_L.name}:3: ")
    assert LGI.name in err_line and not (tmp_path / "other.json").exists()


# ----------------------------------------------------------------------------- Slurm

SLURM_MIG = DATA / "slurm" / "handmade-scontrol-d-show-node-mig.txt"


def test_slurm_mig_gres_types_import_as_instances():
    # 1g.10gb and 3g.40gb are A100-80GB and H100-80GB names; feature "a100" does not say which A100.
    with pytest.raises(InvalidInputError) as err:
        import_slurm(SLURM_MIG)
    assert err.value.where == f"{SLURM_MIG.name}:1"
    assert "MIG GRES types 1g.10gb, 3g.40gb fit A100-80GB, H100-80GB: give the GPU model (--mig-model)" in err.value.what
    nodes = {n["name"]: n for n in import_slurm(SLURM_MIG, mig_model="A100-SXM4-80GB").document["nodes"]}
    a100 = nodes["mig-a100-0"]
    assert a100["gpus"] == 3 and a100["gpuModel"] == "A100-80GB"
    assert a100["mig"] == {"gpus": [0, 1], "mode": "static"}  # the whole A100 is GPU 2
    assert [(m["gpu"], m["profile"], m["start"]) for m in a100["migInstances"]] == [
        (0, "3g.40gb", 0), (0, "3g.40gb", 4), *((1, "1g.10gb", s) for s in range(7))]
    assert a100["pods"][0]["mig"] == [{"gpu": 1, "profile": "1g.10gb", "start": 0},
                                      {"gpu": 1, "profile": "1g.10gb", "start": 1},
                                      {"gpu": 0, "profile": "3g.40gb", "start": 0}]
    assert "gpus" not in a100["pods"][0] and "unknownGpus" not in a100["pods"][0]
    h100 = nodes["mig-h100-0"]  # the model from the feature h100; held instances from AllocTRES
    assert h100["gpuModel"] == "H100-80GB"  # its features tell: --mig-model is not needed there
    assert h100["gpus"] == 1 and h100["pods"][0]["mig"] == [{"gpu": 0, "profile": "1g.10gb", "start": 0}]
    assert main(["import", "slurm", "--nodes", str(SLURM_MIG)]) == 2
    with pytest.raises(InvalidInputError) as err:
        import_slurm(SLURM_MIG, mig_model="Tesla-T4")
    assert err.value.where == "--mig-model" and "'Tesla-T4' has no bundled MIG table" in err.value.what


def test_slurm_mig_model_from_features(tmp_path):
    text = SLURM_MIG.read_text(encoding="utf-8").replace("ActiveFeatures=a100,mig", "ActiveFeatures=a100-80gb,mig")
    path = tmp_path / "nodes.txt"
    path.write_text(text, encoding="utf-8")
    nodes = {n["name"]: n for n in import_slurm(path).document["nodes"]}
    assert nodes["mig-a100-0"]["gpuModel"] == "A100-80GB" and nodes["mig-h100-0"]["gpuModel"] == "H100-80GB"
    over = text.replace("GresUsed=gpu:1g.10gb:2(IDX:0-1)", "GresUsed=gpu:1g.10gb:8(IDX:0-7)")
    path.write_text(over, encoding="utf-8")
    with pytest.raises(InvalidInputError, match="GresUsed holds 8 gpu:1g.10gb, Gres= has 7") as err:
        import_slurm(path)
    assert err.value.where == "nodes.txt:1"
