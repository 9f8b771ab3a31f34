"""The openb (cluster-trace-gpu-v2023) adapter: bundled default trace, formats, errors."""

from __future__ import annotations

import collections
import gzip
import hashlib
import re
from pathlib import Path

import pytest

from placer.adapters import openb
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PlacementRequest, PodRequest

DATA = Path(__file__).parent / "data" / "openb"


@pytest.fixture(scope="module")
def default():
    return openb.load_default()


# ----------------------------------------------------------------- the bundled trace


def test_default_cluster_totals(default):
    snap, _ = default
    assert len(snap.nodes) == 1213
    assert sum(n.hardware.gpus for n in snap.nodes) == 6212
    assert sum(n.hardware.cpu_milli for n in snap.nodes) == 107_018_000
    assert sum(n.hardware.memory_mib for n in snap.nodes) == 503_828_480
    assert snap.topology_levels == ()
    assert all(n.hardware.max_pods == 1001 for n in snap.nodes)
    assert all(n.hardware.gpu_memory_mib is None for n in snap.nodes)
    assert snap.nodes[0].name == "openb-node-0000"


def test_default_cluster_shares_interned_types(default):
    snap, _ = default
    assert len(snap.node_types) == 15
    assert all(n.type in snap.node_types and n.hardware is snap.node_types[n.type] for n in snap.nodes)
    assert not any(n.overrides for n in snap.nodes)
    g2 = snap.node_types["G2-8gpu-96000m-393216Mi"]
    assert (g2.gpus, g2.gpu_model, g2.cpu_milli, g2.memory_mib) == (8, "G2", 96000, 393216)
    assert sum(n.type == "G2-8gpu-96000m-393216Mi" for n in snap.nodes) == 549
    assert sum(n.type == "T4-2gpu-104000m-524288Mi" for n in snap.nodes) == 387


def test_default_cluster_gpus_by_model(default):
    # FGD_NOTES §1.1, "GPUs by model".
    snap, _ = default
    gpus = collections.Counter()
    shapes = collections.Counter()
    for n in snap.nodes:
        gpus[n.hardware.gpu_model] += n.hardware.gpus
        shapes[(n.hardware.gpu_model, n.hardware.gpus)] += 1
    assert gpus == {
        "G2": 4392,
        "T4": 842,
        "G3": 312,
        "P100": 265,
        "V100M32": 204,
        "V100M16": 195,
        "A10": 2,
    }
    assert shapes == {
        ("G2", 8): 549,
        ("T4", 2): 387,
        ("T4", 4): 17,
        ("G3", 8): 39,
        ("P100", 2): 131,
        ("P100", 1): 3,
        ("V100M32", 8): 21,
        ("V100M32", 4): 9,
        ("V100M16", 4): 28,
        ("V100M16", 1): 19,
        ("V100M16", 8): 8,
        ("A10", 1): 2,
    }


def test_default_snapshot_round_trips(default):
    snap, _ = default
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap


def test_default_pods(default):
    # FGD_NOTES §1.2, the "default" row.
    _, pods = default
    assert len(pods) == 8152
    assert all(isinstance(p, PodRequest) for p in pods)
    assert sum(p.gpus * p.gpu_milli for p in pods) == 6_086_800  # 6086.8 GPUs
    cpu_only = [p for p in pods if p.gpus == 0]
    sharing = [p for p in pods if p.shared]
    whole1 = [p for p in pods if p.gpus == 1 and p.gpu_milli == 1000]
    multi = collections.Counter(p.gpus for p in pods if p.gpus > 1)
    assert len(cpu_only) == 1088
    assert len(sharing) == 3078
    assert len(whole1) == 3911
    assert multi == {2: 16, 4: 15, 8: 44}
    assert not any(p.gpu_models for p in pods)
    assert min(p.cpu_milli for p in pods) == 1000
    assert max(p.cpu_milli for p in pods) == 120_200
    assert max(p.memory_mib for p in pods) == 737_280
    first = pods[0]
    assert first == PodRequest(name="openb-pod-0000", gpus=1, gpu_milli=1000, cpu_milli=12000, memory_mib=16384)


def test_default_pods_make_a_valid_request(default):
    _, pods = default
    req = PlacementRequest(pods=tuple(pods))
    assert PlacementRequest.from_dict(req.to_dict()) == req


def test_bundled_files_match_readme_checksums():
    readme = openb.data_path("README.md").read_text(encoding="utf-8")
    sums = dict((name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M))
    assert set(sums) == {
        "openb_node_list_gpu_node.csv",
        "fgd_expected_unalloc_summary.csv",
        "fgd_expected_frag_summary.csv",
    } | {f"openb_pod_list_{w}.csv" for w in openb.STUDY_WORKLOADS}
    for name, digest in sums.items():
        path = openb.trace_path(name[len("openb_pod_list_"):-4]) if name.startswith("openb_pod_list_") else \
            openb.data_path(name)
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        assert hashlib.sha256(raw).hexdigest() == digest, name


def test_published_summaries_are_bundled():
    text = openb.data_path("fgd_expected_unalloc_summary.csv").read_text(encoding="utf-8")
    header = text.splitlines()[0].split(",")
    assert header[:3] == ["workload", "policy", "n_seeds"]
    assert "unalloc_pct_mean_at100" in header
    rows = [line.split(",") for line in text.splitlines()[1:]]
    at100 = header.index("unalloc_pct_mean_at100")
    fgd_default = [r for r in rows if r[0] == "openb_pod_list_default" and r[1].endswith("FGD")]
    assert len(fgd_default) == 1 and round(float(fgd_default[0][at100]), 2) == 4.77


def test_data_path_unknown():
    with pytest.raises(InvalidInputError) as e:
        openb.data_path("openb_pod_list_cpu050.csv")
    assert e.value.where == "openb_pod_list_cpu050.csv"


# ----------------------------------------------------------------- small files


def test_small_nodes():
    snap = openb.read_nodes(DATA / "nodes_small.csv")
    assert [n.name for n in snap.nodes] == [f"openb-node-000{i}" for i in range(4)]
    assert list(snap.node_types) == [
        "P100-2gpu-64000m-262144Mi",
        "G2-8gpu-96000m-393216Mi",
        "cpu-32000m-131072Mi",
    ]
    assert snap.nodes[0].hardware is snap.nodes[2].hardware
    cpu_node = snap.nodes[3].hardware
    assert (cpu_node.gpus, cpu_node.gpu_model, cpu_node.cpu_milli) == (0, None, 32000)
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap


def test_nodes_from_text_and_source():
    text = "sn,cpu_milli,memory_mib,gpu,model\nn1,1000,2048,1,T4\n"
    snap = openb.read_nodes(text)
    assert snap.nodes[0].hardware.gpu_model == "T4"
    with pytest.raises(InvalidInputError) as e:
        openb.read_nodes(text + "n2,x,2048,1,T4\n", source="mine.csv")
    assert e.value.where == "mine.csv:3"


def test_small_pods():
    pods = openb.read_pods(DATA / "pods_small.csv")
    assert pods == [
        PodRequest(name="openb-pod-0000", gpus=1, gpu_milli=1000, cpu_milli=12000, memory_mib=16384),
        PodRequest(name="openb-pod-0001", gpus=1, gpu_milli=460, cpu_milli=6000, memory_mib=12288),
        PodRequest(name="openb-pod-0002", cpu_milli=32000, memory_mib=65536),
        PodRequest(
            name="openb-pod-0003",
            gpus=8,
            gpu_milli=1000,
            gpu_models=("V100M16", "V100M32"),
            cpu_milli=88000,
            memory_mib=327680,
        ),
        PodRequest(name="openb-pod-0004", gpus=1, gpu_milli=500, cpu_milli=8000, memory_mib=30720),
        PodRequest(name="openb-pod-0005", gpus=2, gpu_milli=1000, gpu_models=("T4",), cpu_milli=4000),
    ]
    assert pods[1].shared and not pods[0].shared
    assert pods[2].gpus == 0


def test_multigpu_five_column_format():
    pods = openb.read_pods(DATA / "pods_multigpu_sample.csv")
    assert [(p.gpus, p.gpu_milli if p.gpus else 0) for p in pods] == [
        (1, 1000),
        (1, 460),
        (0, 0),
        (8, 1000),
        (4, 1000),
        (2, 1000),
    ]
    assert not any(p.gpu_models for p in pods)


def test_gpu_spec_kept_as_written():
    h = ",".join(openb.POD_COLUMNS)
    pods = openb.read_pods(f"{h}\np,1000,0,1,1000,V100M16|V100M32|V100M32,LS,Running,0,1,0\n")
    assert pods[0].gpu_models == ("V100M16", "V100M32", "V100M32")
    cpu = openb.read_pods(f"{h}\np,1000,0,0,0,T4,LS,Running,0,1,0\n")
    assert cpu[0].gpu_models == ()


def test_header_only_pod_list_is_empty():
    assert openb.read_pods(",".join(openb.POD_COLUMNS) + "\n") == []


@pytest.mark.parametrize(
    "name, line, fragment",
    [
        ("nodes_bad_header.csv", 1, "header"),
        ("nodes_bad_columns.csv", 3, "expected 5 fields"),
        ("nodes_bad_int.csv", 4, "cpu_milli must be a non-negative integer"),
        ("nodes_negative.csv", 2, "memory_mib must be a non-negative integer"),
        ("nodes_duplicate.csv", 3, "listed twice"),
        ("nodes_gpu_without_model.csv", 2, "model is empty"),
    ],
)
def test_node_errors(name, line, fragment):
    with pytest.raises(InvalidInputError) as e:
        openb.read_nodes(DATA / name)
    assert e.value.where == f"{name}:{line}"
    assert fragment in e.value.what


@pytest.mark.parametrize(
    "name, line, fragment",
    [
        ("pods_bad_header.csv", 1, "header"),
        ("pods_bad_columns.csv", 3, "expected 11 fields"),
        ("pods_bad_int.csv", 2, "gpu_milli must be a non-negative integer"),
        ("pods_negative.csv", 3, "cpu_milli must be a non-negative integer"),
        ("pods_bad_share.csv", 3, "needs num_gpu 1"),
        ("pods_cpu_with_gpu_milli.csv", 3, "without GPUs"),
        ("pods_milli_over_1000.csv", 2, "1..1000"),
        ("pods_duplicate.csv", 3, "listed twice"),
        ("pods_empty_model.csv", 2, "empty GPU model"),
    ],
)
def test_pod_errors(name, line, fragment):
    with pytest.raises(InvalidInputError) as e:
        openb.read_pods(DATA / name)
    assert e.value.where == f"{name}:{line}"
    assert fragment in e.value.what


def test_empty_inputs():
    with pytest.raises(InvalidInputError) as e:
        openb.read_nodes("\n", source="empty.csv")
    assert e.value.where == "empty.csv:1"
    with pytest.raises(InvalidInputError) as e:
        openb.read_nodes("sn,cpu_milli,memory_mib,gpu,model\n", source="hdr.csv")
    assert e.value.where == "hdr.csv:2" and "no nodes" in e.value.what


def test_node_list_is_not_a_pod_list():
    with pytest.raises(InvalidInputError) as e:
        openb.read_pods(DATA / "nodes_small.csv")
    assert e.value.where == "nodes_small.csv:1"


def test_missing_file():
    with pytest.raises(InvalidInputError) as e:
        openb.read_pods(DATA / "no_such.csv")
    assert e.value.what == "no such file"
    assert e.value.where.endswith("no_such.csv")


# ----------------------------------------------------------------- checked by the schema


@pytest.mark.parametrize(
    "row, line, fragment, path",
    [
        ("n1,1000,1000,65,T4", 3, "expected an integer in 0..64, got 65",
         "nodeTypes.T4-65gpu-1000m-1000Mi.gpus"),
        ("n\x02,1000,1000,1,T4", 3, "without control characters", "nodes[1].name"),
        ("n1,1000,1000,1,T\x014", 3, "without control characters", "nodeTypes"),
        (f"n1,{2**53},1000,1,T4", 3, "expected an integer in 0..9007199254740991",
         f"nodeTypes.T4-1gpu-{2**53}m-1000Mi.cpuMilli"),
    ],
)
def test_node_values_the_schema_refuses_are_reported_at_their_row(row, line, fragment, path):
    text = ",".join(openb.NODE_COLUMNS) + "\nn0,1000,1000,1,T4\n" + row + "\n"
    with pytest.raises(InvalidInputError) as e:
        openb.read_nodes(text, source="nodes.csv")
    assert e.value.where == f"nodes.csv:{line}"
    assert fragment in e.value.what and e.value.what.endswith(f"(placer/v1 {path})")


@pytest.mark.parametrize(
    "row, fragment, path",
    [
        ("p1,1000,0,65,1000,T4,LS,Running,0,1,0", "expected an integer in 0..64, got 65", "pods[1].gpus"),
        ("p\x03,1000,0,1,1000,T4,LS,Running,0,1,0", "without control characters", "pods[1].name"),
        (f"p1,1000,{2**53},0,0,,LS,Running,0,1,0", "expected an integer in 0..9007199254740991", "pods[1].memoryMiB"),
    ],
)
def test_pod_values_the_schema_refuses_are_reported_at_their_row(row, fragment, path):
    text = ",".join(openb.POD_COLUMNS) + "\np0,1000,0,1,1000,T4,LS,Running,0,1,0\n" + row + "\n"
    with pytest.raises(InvalidInputError) as e:
        openb.read_pods(text, source="pods.csv")
    assert e.value.where == "pods.csv:3"
    assert fragment in e.value.what and e.value.what.endswith(f"(placer/v1 {path})")


def test_readers_give_what_the_schema_decodes(default):
    snap, pods = default
    assert ClusterSnapshot.from_dict(snap.to_dict()) == snap
    document = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [p.to_dict() for p in pods]}
    assert list(PlacementRequest.from_dict(document).pods) == pods


def test_a_gzip_trace_reads_as_its_text_and_a_broken_one_is_refused(tmp_path):
    text = openb.data_path(openb.DEFAULT_PODS).read_text(encoding="utf-8")
    packed = tmp_path / "openb_pod_list_x.csv.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert openb.read_pods(packed) == openb.read_pods(openb.data_path(openb.DEFAULT_PODS))
    packed.write_bytes(gzip.compress(text.encode())[:-20])
    with pytest.raises(InvalidInputError, match="not a complete gzip file"):
        openb.read_pods(packed)
    with pytest.raises(InvalidInputError, match="no bundled openb trace"):
        openb.trace_path("gpushare200")
