"""nvidia-smi --query-gpu / --query-compute-apps CSV parsers and zombie-GPU reconciliation.

Inputs live in tests/data/nvidia-smi: the two real captures (``query-*.csv.txt`` with
their ``.src`` notes: a compute-apps listing of ``gpu_uuid, process_name`` from
NVIDIA/dcgm-exporter#94 and a ``pci.bus_id, mig.mode.current`` query-gpu from
scaleway/docs-content#2077) and hand-written per-node pairs ``handmade-<node>_*.csv``
that match the snapshot below:

* dgx-01 (8 GPUs): a two-GPU training pod with its processes, a GPU shared by two pods
  and idle, a zombie GPU (two orphan pids), an idle whole GPU, a process name with a
  comma, CRLF line endings, a ``[N/A]`` memory value, a command echo line;
* dgx-02 (4 GPUs): ``noheader`` GPU list and ``nounits`` processes, a pod with
  ``unknownGpus`` (its GPUs are unverifiable);
* dgx-03 (2 GPUs): ``No running processes found``;
* dcgm-94: GPU list for the UUIDs of the real compute-apps capture (no pid column);
* dgx-04 (4 GPUs): what a stand-in nvidia-smi prints round after round in
  tests/test_reconcile_watch.py (a zombie, then none; with dgx-03's ``none`` file, idle GPUs);
* handmade-bad_*: malformed files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placer
from placer.adapters.nvidia_smi import query as q
from placer.adapters.nvidia_smi.query import ComputeApp, GpuInfo
from placer.exceptions import InvalidInputError
from placer.diagnostics.reconcile import Reconciliation, reconcile

DATA = Path(__file__).parent / "data" / "nvidia-smi"
REAL_APPS = DATA / "query-compute-apps_gpu_uuid-name_dcgm-exporter-94.csv.txt"
REAL_GPU = DATA / "query-gpu_pci.bus_id-mig.mode.current_h100_scaleway-docs-pr2077.csv.txt"

U1 = "GPU-1b6c5f0e-7a51-4c3e-9d7e-0a000000000"  # + index: dgx-01
U2 = "GPU-5f3a0c11-2b6d-4e8f-a1c2-0b000000000"  # + index: dgx-02
U3 = "GPU-9e8d7c6b-5a49-4838-b271-0c000000000"  # + index: dgx-03
DCGM0 = "GPU-d0180485-9584-433c-6782-c335d5df2cb3"
DCGM1 = "GPU-777ead31-954e-837f-590f-6c4974d8e571"

SNAPSHOT = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodeTypes": {
        "a100x8": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "gpuMemoryMiB": 81920},
        "a100x4": {"gpuModel": "A100-SXM4-80GB", "gpus": 4, "gpuMemoryMiB": 81920},
        "a100x2": {"gpuModel": "A100-SXM4-80GB", "gpus": 2, "gpuMemoryMiB": 81920},
    },
    "nodes": [
        {
            "name": "dgx-01",
            "type": "a100x8",
            "pods": [
                {"name": "team-a/train-0", "gpus": [0, 1], "cpuMilli": 16000},
                {"name": "team-b/infer", "gpuShares": {"2": 500}, "gpuMemoryMiB": {"2": 20000}},
                {"name": "team-c/notebook", "gpuShares": {"2": 300}},
                {"name": "team-d/eval", "gpus": [4]},
                {"name": "ops/node-agent", "cpuMilli": 500},
            ],
        },
        {
            "name": "dgx-02",
            "type": "a100x4",
            "pods": [
                {"name": "team-e/known", "gpus": [0]},
                {"name": "team-f/legacy", "unknownGpus": 1},
            ],
        },
        {"name": "dgx-03", "type": "a100x2", "pods": [{"name": "team-g/held", "gpus": [0]}]},
        {"name": "dcgm-94", "type": "a100x2", "pods": [{"name": "vgpu/tenant", "gpus": [0]}]},
    ],
}


@pytest.fixture(scope="module")
def snap() -> placer.ClusterSnapshot:
    return placer.ClusterSnapshot.from_dict(SNAPSHOT)


def run(snap, node: str, gpus: str, apps: str) -> Reconciliation:
    return reconcile(
        snap, node, q.parse_query_gpu_file(DATA / gpus), q.parse_compute_apps_file(DATA / apps)
    )


# ----------------------------------------------------------------- parsers, real captures


def test_real_captures_are_byte_exact_copies():
    # Sizes from the fixture INDEX; every capture keeps its .src sidecar.
    assert REAL_APPS.stat().st_size == 225
    assert REAL_GPU.stat().st_size == 149
    for path in (REAL_APPS, REAL_GPU):
        assert Path(f"{path}.src").read_text().startswith("GitHub ")


def test_real_compute_apps_capture():
    apps = q.parse_compute_apps_file(REAL_APPS)
    name = REAL_APPS.name
    assert apps == (
        ComputeApp(DCGM0, None, None, "vgpu", (("gpu_uuid", DCGM0), ("process_name", "vgpu")), f"{name}:3"),
        ComputeApp(DCGM1, None, None, "vgpu", (("gpu_uuid", DCGM1), ("process_name", "vgpu")), f"{name}:4"),
        ComputeApp(DCGM1, None, None, "vgpu", (("gpu_uuid", DCGM1), ("process_name", "vgpu")), f"{name}:5"),
    )
    # Asked for as "name", printed as "process_name": both spellings find it.
    assert apps[0].get("name") == apps[0].get("process_name") == "vgpu"
    assert apps[0].get("pid") is None


def test_real_query_gpu_capture():
    (gpu,) = q.parse_query_gpu_file(REAL_GPU)
    assert gpu.index is None and gpu.uuid is None and gpu.name is None
    assert gpu.pci_bus_id == "00000000:01:00.0"
    assert gpu.get("gpu_bus_id") == "00000000:01:00.0"
    assert gpu.get("mig.mode.current") == "Enabled"
    assert gpu.fields == (("pci.bus_id", "00000000:01:00.0"), ("mig.mode.current", "Enabled"))
    assert gpu.where == f"{REAL_GPU.name}:3"


def test_real_query_gpu_cannot_be_reconciled(snap):
    # Neither index nor uuid was queried: reconciliation needs both.
    with pytest.raises(InvalidInputError) as e:
        reconcile(snap, "dgx-03", q.parse_query_gpu_file(REAL_GPU), ())
    assert e.value.where == f"{REAL_GPU.name}:3"
    assert "index and uuid" in e.value.what and "none for index and uuid" in e.value.what


# ----------------------------------------------------------------- parsers, hand-made


def test_handmade_query_gpu_with_units_and_placeholder():
    gpus = q.parse_query_gpu_file(DATA / "handmade-dgx-01_query-gpu.csv")
    assert [g.index for g in gpus] == list(range(8))
    assert [g.uuid for g in gpus] == [f"{U1}{i}" for i in range(8)]
    assert {g.name for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert [g.memory_used_mib for g in gpus] == [61234, 61230, 4, 20490, 4, 4, None, 4]
    assert {g.memory_total_mib for g in gpus} == {81920}
    assert gpus[6].get("memory.used") == "[N/A]"
    assert gpus[0].where == "handmade-dgx-01_query-gpu.csv:3"  # line 1 is the command echo


def test_handmade_compute_apps_crlf_and_comma_in_name():
    apps = q.parse_compute_apps_file(DATA / "handmade-dgx-01_query-compute-apps.csv")
    assert [(a.pid, a.gpu_uuid, a.used_memory_mib, a.process_name) for a in apps] == [
        (31337, f"{U1}0", 61224, "python"),
        (31337, f"{U1}1", 61220, "python"),
        (4242, f"{U1}3", 16384, "/usr/bin/python3 -c import torch, time"),
        (4243, f"{U1}3", 4096, None),  # [Not Found]
    ]
    assert [a.where for a in apps] == [f"handmade-dgx-01_query-compute-apps.csv:{n}" for n in (2, 3, 4, 5)]


def test_noheader_and_nounits():
    gpus = q.parse_query_gpu_file(DATA / "handmade-dgx-02_query-gpu_noheader.csv")
    assert [(g.index, g.uuid) for g in gpus] == [(i, f"{U2}{i}") for i in range(4)]
    apps = q.parse_compute_apps_file(DATA / "handmade-dgx-02_query-compute-apps_nounits.csv")
    assert [(a.pid, a.gpu_uuid, a.used_memory_mib) for a in apps] == [
        (7001, f"{U2}0", 30000),
        (7002, f"{U2}1", None),
    ]


def test_noheader_with_given_columns():
    text = "GPU-aa, 3, 00000000:3B:00.0, 1024 MiB\nGPU-bb, 0, 00000000:07:00.0, [Not Supported]\n"
    gpus = q.parse_query_gpu(text, "x.csv", columns=["gpu_uuid", "index", "gpu_bus_id", "memory.used"])
    assert [(g.uuid, g.index, g.pci_bus_id, g.memory_used_mib) for g in gpus] == [
        ("GPU-aa", 3, "00000000:3B:00.0", 1024),
        ("GPU-bb", 0, "00000000:07:00.0", None),
    ]
    apps = q.parse_compute_apps("GPU-aa, 12, python\n", "a.csv", columns=("gpu_uuid", "pid", "name"))
    assert apps == (
        ComputeApp("GPU-aa", 12, None, "python", (("gpu_uuid", "GPU-aa"), ("pid", "12"), ("process_name", "python")), "a.csv:1"),
    )


@pytest.mark.parametrize(
    "text",
    [
        "pid, gpu_uuid, used_gpu_memory [MiB]\nNo running processes found\n",
        "No running processes found\n",
        "# nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader\n\nNo running processes found\n",
        "pid, gpu_uuid, used_gpu_memory [MiB]\n",
        "pid, gpu_uuid, used_gpu_memory [MiB]\r\n\r\n",
    ],
)
def test_no_running_processes(text):
    assert q.parse_compute_apps(text) == ()


def test_no_running_processes_file():
    assert q.parse_compute_apps_file(DATA / "handmade-dgx-03_query-compute-apps_none.csv") == ()


def test_no_devices():
    assert q.parse_query_gpu("No devices were found\n") == ()
    assert q.parse_query_gpu("index, uuid\nNo devices were found\n") == ()


BAD_CASES = [
    # (text, source, where, words in the message)
    ("", "e.csv", "e.csv:1", "an empty file"),
    ("$ nvidia-smi --query-gpu=index,uuid --format=csv\n", "c.csv", "c.csv:1", "only the command line"),
    ("index, uuid\nx, GPU-aa\n", "t.csv", "t.csv:2", "index: expected a GPU index"),
    ("index, uuid\n[N/A], GPU-aa\n", "t.csv", "t.csv:2", "index: expected a GPU index"),
    ("index, uuid\n0, 1234\n", "t.csv", "t.csv:2", "uuid: expected a GPU UUID"),
    ("index, uuid\n0, GPU-aa\n1, GPU-bb\n0, GPU-cc\n", "t.csv", "t.csv:4", "GPU index 0 is listed twice (first at t.csv:2)"),
    ("index, uuid\n0, GPU-aa\n1, GPU-aa\n", "t.csv", "t.csv:3", "GPU GPU-aa is listed twice"),
    ("index, uuid, index\n", "t.csv", "t.csv:1", "column 'index' appears twice"),
    ("index, memory.used [GiB]\n0, 12\n", "t.csv", "t.csv:1", "expected the unit [MiB], got [GiB]"),
    ("index, memory.used [MiB]\n0, 12 GiB\n", "t.csv", "t.csv:2", "memory.used: expected an integer number of MiB"),
    ("index, pci.bus_id\n0, 01:00.0\n", "t.csv", "t.csv:2", "pci.bus_id: expected domain:bus:device.function"),
    ("index, uuid\n0\n", "t.csv", "t.csv:2", "expected 2 field(s) (index, uuid), got 1"),
    ("index, uuid\n0, GPU-aa, x\n", "t.csv", "t.csv:2", "expected 2 field(s) (index, uuid), got 3"),
    (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        "t.csv",
        "t.csv:1",
        "nvidia-smi reported an error",
    ),
    ('Field "uuidd" is not a valid field to query.\n', "t.csv", "t.csv:1", "nvidia-smi reported an error"),
    ("pid, gpu_uuid\n12, GPU-aa\n", "t.csv", "t.csv:1", "`--query-compute-apps` output (wrong file?)"),
]


@pytest.mark.parametrize("text, source, where, what", BAD_CASES)
def test_query_gpu_errors(text, source, where, what):
    with pytest.raises(InvalidInputError) as e:
        q.parse_query_gpu(text, source)
    assert e.value.where == where
    assert what in e.value.what


BAD_APPS = [
    ("pid, gpu_uuid\n0, GPU-aa\n", "a.csv:2", "pid: expected a process id"),
    ("pid, gpu_uuid\n12, GPU-aa\n12, GPU-aa\n", "a.csv:3", "pid 12 on GPU-aa is listed twice (first at a.csv:2)"),
    ("pid, gpu_uuid\n12, [N/A]\n", "a.csv:2", "gpu_uuid: expected a GPU UUID"),
    ("pid, gpu_uuid\n12, GPU-aa\nNo running processes found\n", "a.csv:3", "among other lines"),
    ("No running processes found\n12, GPU-aa, 3\n", "a.csv:2", "expected nothing after"),
    ("index, uuid\n0, GPU-aa\n", "a.csv:1", "looks like `--query-gpu` output"),
    ("pid, used_gpu_memory [MiB]\n12, 3 MiB\n", "a.csv:1", "expected a gpu_uuid column"),
    ("12, GPU-aa\n", "a.csv:1", "expected 3 field(s) (pid, gpu_uuid, used_gpu_memory), got 2"),
]


@pytest.mark.parametrize("text, where, what", BAD_APPS)
def test_compute_apps_errors(text, where, what):
    with pytest.raises(InvalidInputError) as e:
        q.parse_compute_apps(text, "a.csv")
    assert e.value.where == where
    assert what in e.value.what


def test_malformed_files_fail_at_file_line():
    with pytest.raises(InvalidInputError) as e:
        q.parse_query_gpu_file(DATA / "handmade-bad_query-gpu_short-row.csv")
    assert e.value.where == "handmade-bad_query-gpu_short-row.csv:3"
    assert e.value.what.startswith("expected 3 field(s) (index, uuid, memory.used), got 2")
    with pytest.raises(InvalidInputError) as e:
        q.parse_compute_apps_file(DATA / "handmade-bad_query-compute-apps_pid.csv")
    assert e.value.where == "handmade-bad_query-compute-apps_pid.csv:4"  # line 3 is blank
    assert e.value.what == "pid: expected a process id (a positive integer), got '[N/A]'"
    with pytest.raises(InvalidInputError) as e:
        q.parse_query_gpu_file(DATA / "no-such.csv")
    assert e.value.what == "no such file"


# ----------------------------------------------------------------- reconciliation


def test_zombie_idle_and_shared_gpu(snap):
    r = run(snap, "dgx-01", "handmade-dgx-01_query-gpu.csv", "handmade-dgx-01_query-compute-apps.csv")
    assert [g.status for g in r.gpus] == ["busy", "busy", "idle", "zombie", "idle", "free", "free", "free"]
    d = r.to_dict()
    assert d["zombies"] == [
        {"gpu": 3, "uuid": f"{U1}3", "pids": [4242, 4243], "processes": 2, "usedMemoryMiB": 20480}
    ]
    assert d["idle"] == [
        {"gpu": 2, "uuid": f"{U1}2", "pods": ["team-b/infer", "team-c/notebook"]},
        {"gpu": 4, "uuid": f"{U1}4", "pods": ["team-d/eval"]},
    ]
    assert d["unverifiable"] == [] and d["missing"] == []
    assert d["node"] == "dgx-01"
    assert [{k: v for k, v in s.items() if k != "message"} for s in d["suggestions"]] == [
        {"action": "kill", "gpus": [3], "pids": [4242, 4243]},
        {"action": "ask-owner", "gpus": [2], "pods": ["team-b/infer"]},
        {"action": "ask-owner", "gpus": [2], "pods": ["team-c/notebook"]},
        {"action": "ask-owner", "gpus": [4], "pods": ["team-d/eval"]},
    ]
    kill = d["suggestions"][0]["message"]
    assert "kill 4242 4243" in kill and "20480 MiB" in kill and f"{U1}3" in kill
    assert r.gpus[0].pods == ("team-a/train-0",) and r.gpus[0].pids == (31337,)
    assert r.gpus[0].used_memory_mib == 61224
    json.dumps(d)  # plain JSON


def test_to_dict_has_the_contract_shape(snap):
    d = run(snap, "dgx-01", "handmade-dgx-01_query-gpu.csv", "handmade-dgx-01_query-compute-apps.csv").to_dict()
    # SPEC §4: {"zombies": [{"gpu": 3, "pids": [..]}], "idle": [...]} (plus extra keys).
    assert [{"gpu": z["gpu"], "pids": z["pids"]} for z in d["zombies"]] == [{"gpu": 3, "pids": [4242, 4243]}]
    assert [i["gpu"] for i in d["idle"]] == [2, 4]


def test_unknown_gpu_indices_are_unverifiable(snap):
    r = run(
        snap,
        "dgx-02",
        "handmade-dgx-02_query-gpu_noheader.csv",
        "handmade-dgx-02_query-compute-apps_nounits.csv",
    )
    # team-f/legacy holds 1 GPU at an unknown index; placer assumed GPU 3. The process on
    # GPU 1 may be its own: neither GPU 1 nor GPU 3 may be called zombie or idle.
    node = next(n for n in snap.nodes if n.name == "dgx-02")
    legacy = next(p for p in node.pods if p.name == "team-f/legacy")
    assert legacy.gpus == (3,) and not legacy.gpu_indices_known
    assert [g.status for g in r.gpus] == ["busy", "unverifiable", "free", "unverifiable"]
    d = r.to_dict()
    assert d["zombies"] == [] and d["idle"] == []
    assert d["unverifiable"] == [
        {"gpu": 1, "uuid": f"{U2}1", "pods": ["team-f/legacy"], "pids": [7002], "processes": 1, "usedMemoryMiB": None},
        {"gpu": 3, "uuid": f"{U2}3", "pods": ["team-f/legacy"], "pids": [], "processes": 0, "usedMemoryMiB": None},
    ]
    assert [(s["action"], s["gpus"], s["pods"]) for s in d["suggestions"]] == [
        ("verify", [1, 3], ["team-f/legacy"])
    ]


def test_mig_pods_make_unheld_gpus_unverifiable():
    doc = json.loads(json.dumps(SNAPSHOT))
    doc["nodes"][2]["pods"] = [{"name": "team-m/mig", "resources": {"nvidia.com/mig-1g.10gb": 1}}]
    gpus = q.parse_query_gpu_file(DATA / "handmade-dgx-03_query-gpu.csv")
    apps = (ComputeApp(f"{U3}1", pid=99),)
    r = reconcile(doc, "dgx-03", gpus, apps)
    assert [g.status for g in r.gpus] == ["free", "unverifiable"]
    assert r.to_dict()["unverifiable"][0]["pods"] == ["team-m/mig"]


def test_no_running_processes_makes_held_gpus_idle(snap):
    r = run(snap, "dgx-03", "handmade-dgx-03_query-gpu.csv", "handmade-dgx-03_query-compute-apps_none.csv")
    assert [g.status for g in r.gpus] == ["idle", "free"]
    assert r.to_dict()["idle"] == [{"gpu": 0, "uuid": f"{U3}0", "pods": ["team-g/held"]}]
    assert r.to_dict()["zombies"] == []


def test_real_capture_without_pids(snap):
    r = run(snap, "dcgm-94", "handmade-dcgm94_query-gpu.csv", REAL_APPS.name)
    assert [g.status for g in r.gpus] == ["busy", "zombie"]
    d = r.to_dict()
    assert d["zombies"] == [{"gpu": 1, "uuid": DCGM1, "pids": [], "processes": 2, "usedMemoryMiB": None}]
    assert [(s["action"], s["gpus"]) for s in d["suggestions"]] == [("inspect", [1])]
    assert "--query-compute-apps=pid,gpu_uuid,used_memory" in d["suggestions"][0]["message"]


def test_missing_gpu(snap):
    gpus = (GpuInfo(0, f"{U3}0"),)
    r = reconcile(snap, "dgx-03", gpus, ())
    assert [g.status for g in r.gpus] == ["idle", "missing"]
    assert r.to_dict()["missing"] == [{"gpu": 1, "pods": []}]
    assert r.suggestions[-1].action == "check-hardware"


def test_unknown_node(snap):
    with pytest.raises(InvalidInputError) as e:
        reconcile(snap, "dgx-1", (), ())
    assert e.value.where == "node"
    assert e.value.what.startswith("no node named 'dgx-1' in the snapshot (did you mean 'dgx-01'")
    assert "known nodes: " in e.value.what and "dcgm-94" in e.value.what


def test_process_on_unlisted_gpu(snap):
    with pytest.raises(InvalidInputError) as e:
        run(snap, "dgx-02", "handmade-dgx-02_query-gpu_noheader.csv", "handmade-dgx-01_query-compute-apps.csv")
    assert e.value.where == "handmade-dgx-01_query-compute-apps.csv:2"
    assert e.value.what.startswith(f"process 31337 runs on GPU {U1}0, which the --query-gpu output does not list")
    with pytest.raises(InvalidInputError) as e:
        reconcile(snap, "dgx-03", (GpuInfo(0, f"{U3}0"),), (ComputeApp("GPU-zz", 5),))
    assert e.value.where == "apps[0]"


def test_gpu_index_beyond_node(snap):
    with pytest.raises(InvalidInputError) as e:
        run(snap, "dgx-03", "handmade-dgx-02_query-gpu_noheader.csv", "handmade-dgx-03_query-compute-apps_none.csv")
    assert e.value.where == "handmade-dgx-02_query-gpu_noheader.csv:3"
    assert e.value.what == "GPU index 2 is beyond node 'dgx-03', which has 2 GPU(s) (0..1) in the snapshot"


def test_duplicate_rows_built_by_hand(snap):
    with pytest.raises(InvalidInputError) as e:
        reconcile(snap, "dgx-03", (GpuInfo(0, "GPU-a"), GpuInfo(0, "GPU-b")), ())
    assert (e.value.where, e.value.what) == ("gpus[1]", "GPU index 0 is listed twice")


# ----------------------------------------------------------------- fuzz

_SEEDS = [
    REAL_APPS.read_text(),
    REAL_GPU.read_text(),
    *(p.read_text(encoding="utf-8", errors="replace") for p in sorted(DATA.glob("handmade-*.csv"))),
]
_SNIPPETS = [",", ", ", "\n", "\r\n", " ", "[N/A]", "[Not Supported]", "MiB", " MiB", "GPU-", "MIG-",
             "0", "7", "-1", "99999", "index", "uuid", "pid", "gpu_uuid", "[MiB]", "[GiB]",
             "memory.used [MiB]", "No running processes found", "No devices were found",
             "nvidia-smi", "\ufeff", "\x00", "é", "\t", "\"", "name"]


def _mutate(text: str, ops: list[tuple[int, int, int, int]]) -> str:
    for kind, a, b, c in ops:
        lines = text.split("\n")
        if kind == 0 and text:  # delete a slice
            i = a % len(text)
            text = text[:i] + text[i + b % 8:]
        elif kind == 1:  # insert a snippet
            i = a % (len(text) + 1)
            text = text[:i] + _SNIPPETS[b % len(_SNIPPETS)] + text[i:]
        elif kind == 2 and lines:  # duplicate a line
            i = a % len(lines)
            lines.insert(b % (len(lines) + 1), lines[i])
            text = "\n".join(lines)
        elif kind == 3 and len(lines) > 1:  # swap two lines
            i, j = a % len(lines), b % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        elif kind == 4 and text:  # replace one character
            i = a % len(text)
            text = text[:i] + chr(32 + c % 95) + text[i + 1:]
    return text


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, len(_SEEDS) - 1),
    ops=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000)), max_size=6),
    columns=st.sampled_from([None, ("index", "uuid"), ("pid", "gpu_uuid", "used_memory"), ("gpu_uuid", "name")]),
)
def test_fuzz_only_invalid_input_escapes(snap, seed, ops, columns):
    text = _mutate(_SEEDS[seed], ops)
    gpus: tuple = ()
    apps: tuple = ()
    try:
        gpus = q.parse_query_gpu(text, "fuzz.csv", columns=columns)
    except InvalidInputError as e:
        assert e.where.startswith(("fuzz.csv:", "columns"))
    try:
        apps = q.parse_compute_apps(text, "fuzz.csv", columns=columns)
    except InvalidInputError as e:
        assert e.where.startswith(("fuzz.csv:", "columns"))
    node = random.Random(seed).choice(["dgx-01", "dgx-02", "dgx-03"])
    try:
        r = reconcile(snap, node, gpus, apps)
    except InvalidInputError:
        return
    json.dumps(r.to_dict())
