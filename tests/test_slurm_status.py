"""Slurm status readers: sinfo, sinfo -R, squeue -O tres-alloc, slurmd GRES lines, slurmctld errors.

The fixtures named below are byte-exact copies of public outputs (see each ``.src``); the
expected values were read off those files by hand. Two of them are cut copies
(``*_partial.log``: cut at a line boundary, so every line present is whole) and two show
sinfo/squeue cutting values at their column width. Cut lines are made here from the
fixture lines to check that a cut inside a line fails at that line. Other inputs are
small hand-written examples of the documented formats.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.adapters.slurm.logs import MAX_CORES, find_gres_errors, parse_slurmd_gpus
from placer.adapters.slurm.status import SinfoReason, SinfoRow, parse_sinfo, parse_sinfo_reasons, parse_squeue_tres
from placer.exceptions import InvalidInputError
from mutations import mutated

HERE = Path(__file__).parent
SLURM = HERE / "data" / "slurm"

SINFO = "sinfo-default_slinky-slurm-operator-45.txt"
REASONS = "sinfo-R_gres-count-reason-truncated_slinky-containers-14.txt"
SQUEUE = "squeue-O-tres-alloc_truncated-and-gpu-typed_ood-core-870.txt"
SLURMD = "slurmd-G_autodetect-nvml-mig_deepops-1214_partial.log"
SLURMCTLD = "slurmctld-log_invalid-gres-core-spec_deepops-1195_partial.log"
FIXTURES = (SINFO, REASONS, SQUEUE, SLURMD, SLURMCTLD)

MIG_PARENT = "GPU-ede6b90f-50d8-42f2-57a1-8a531adc3192"


def text(name: str) -> str:
    return (SLURM / name).read_text(encoding="utf-8")


def lines(name: str) -> list[str]:
    return text(name).split("\n")


def raises_at(where: str, pattern: str, func: Callable[..., object], *args: object) -> str:
    with pytest.raises(InvalidInputError) as info:
        func(*args)
    assert info.value.where == where, str(info.value)
    assert re.search(pattern, info.value.what), info.value.what
    return info.value.what


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_has_its_source(name: str) -> None:
    assert (SLURM / name).is_file()
    note = (SLURM / f"{name}.src").read_text(encoding="utf-8")
    assert "NOTE:" in note


def test_every_real_slurm_fixture_is_read_by_a_test() -> None:
    other = (HERE / "test_import_slurm.py").read_text(encoding="utf-8")
    real = [
        path.name for path in SLURM.iterdir()
        if not path.name.endswith(".src") and not path.name.startswith("handmade-")
    ]
    assert real
    missing = [name for name in real if name not in FIXTURES and name not in other]
    assert missing == []


# ---------------------------------------------------------------------------- sinfo


def test_sinfo_default_fixture() -> None:
    assert parse_sinfo(text(SINFO), SINFO) == [
        SinfoRow(
            line=3, partition="tn", default=True, avail="up", timelimit="infinite",
            node_count=3, state="idle", nodes=("esc8000a-0", "esc8000a-1", "esc8000b-0"),
        )
    ]


HM_SINFO = """\
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
gpu*         up 2-00:00:00      2    mix gpu[01-02]
gpu*         up 2-00:00:00      1 drain* gpu03
debug        up      30:00      0    n/a n/a
old        down   1:00:00      1   idle n9
"""


def test_sinfo_handmade_rows() -> None:
    rows = parse_sinfo(HM_SINFO.replace("\n", "\r\n"), "s")
    assert [(r.line, r.partition, r.default, r.avail, r.timelimit, r.node_count, r.state, r.nodes)
            for r in rows] == [
        (2, "gpu", True, "up", "2-00:00:00", 2, "mix", ("gpu01", "gpu02")),
        (3, "gpu", True, "up", "2-00:00:00", 1, "drain*", ("gpu03",)),
        (4, "debug", False, "up", "30:00", 0, "n/a", ()),
        (5, "old", False, "down", "1:00:00", 1, "idle", ("n9",)),
    ]


@pytest.mark.parametrize("state", ["ID?LE", "n/a", "Idle"])
def test_sinfo_bad_state(state: str) -> None:
    # n/a is the STATE of a partition without nodes only
    raises_at("s:2", "expected STATE", parse_sinfo,
              f"PARTITION AVAIL TIMELIMIT NODES STATE NODELIST\np up infinite 1 {state} n1\n", "s")


@pytest.mark.parametrize(
    "row, line, pattern",
    [
        ("gpu* up 14-00:00:0 1 idle n1", 2, r"TIMELIMIT .*'14-00:00:0'.*cuts it"),
        ("gpu* up infinite 3 idle n[1-2]", 2, r"NODES=3 names .* got 2"),
        ("gpu* up infinite 1 idle", 2, "expected 6 values"),
        ("gpu* maybe infinite 1 idle n1", 2, "expected AVAIL"),
        ("gpu* up infinite x idle n1", 2, "NODES as a whole number"),
        ("gpu* up infinite 1 idle n[1-", 2, "hostlist"),
        ("g/pu up infinite 1 idle n1", 2, "PARTITION name"),
    ],
)
def test_sinfo_bad_rows(row: str, line: int, pattern: str) -> None:
    raises_at(f"s:{line}", pattern, parse_sinfo,
              f"PARTITION AVAIL TIMELIMIT NODES STATE NODELIST\n{row}\n", "s")


def test_sinfo_header() -> None:
    raises_at("s:1", "got nothing", parse_sinfo, "", "s")
    raises_at("s:1", "got nothing", parse_sinfo, "$ sinfo\n\n", "s")
    summarized = ("PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST\n"
                  "gpu* up infinite 0/3/0/3 n[1-3]\n")
    raises_at("s:1", "default sinfo header", parse_sinfo, summarized, "s")
    # the real fixture without its header line: the first row is not a header
    raises_at("s:2", "default sinfo header", parse_sinfo,
              "\n".join(lines(SINFO)[:1] + lines(SINFO)[2:]), "s")
    # two outputs, each after an echo of the command
    twice = text(SINFO) + text(SINFO)
    assert [row.line for row in parse_sinfo(twice, "s")] == [3, 6]


# ------------------------------------------------------------------------- sinfo -R


def test_sinfo_reasons_fixture_keeps_the_cut_reason_and_flags_it() -> None:
    assert parse_sinfo_reasons(text(REASONS), REASONS) == [
        SinfoReason(line=2, reason="gres/gpu count repor", reason_truncated=True, user="slurm",
                    user_truncated=False, timestamp="2026-04-14T06:39:53", nodes=("slinky-0",)),
        SinfoReason(line=3, reason="gres/gpu count repor", reason_truncated=True, user="slurm",
                    user_truncated=False, timestamp="2026-04-14T06:39:54", nodes=("slinky-1",)),
    ]
    # the column is exactly 20 wide: what sinfo -R prints by default (%20E)
    assert len("gres/gpu count repor") == 20


HM_REASONS = """\
$ sinfo -R
REASON               USER      TIMESTAMP           NODELIST
Not responding       slurm     2024-01-02T03:04:05 gpu[01-03]
maintenance          verylongu 2024-01-02T03:04:06 n7
"""


def test_sinfo_reasons_handmade() -> None:
    rows = parse_sinfo_reasons(HM_REASONS, "r")
    assert [(r.line, r.reason, r.reason_truncated, r.user, r.user_truncated, r.nodes)
            for r in rows] == [
        (3, "Not responding", False, "slurm", False, ("gpu01", "gpu02", "gpu03")),
        (4, "maintenance", False, "verylongu", True, ("n7",)),
    ]


@pytest.mark.parametrize(
    "shift, pattern",
    [
        (lambda row: " " + row, "split at the header's columns|USER as one word"),
        (lambda row: row[1:], "split at the header's columns"),
        (lambda row: row[:50], "split at the header's columns"),
        (lambda row: row[:21] + "sl urm   " + row[30:], "USER as one word"),
        (lambda row: row.replace("2026-04-14T06:39:54", "2026-04-14 06:39:5"), "TIMESTAMP"),
    ],
)
def test_sinfo_reasons_row_that_cannot_be_split_fails_at_its_line(
    shift: Callable[[str], str], pattern: str
) -> None:
    rows = lines(REASONS)
    rows[2] = shift(rows[2])
    raises_at("r:3", pattern, parse_sinfo_reasons, "\n".join(rows), "r")


def test_sinfo_reasons_header() -> None:
    raises_at("r:1", "got nothing", parse_sinfo_reasons, "\n", "r")
    raises_at("r:1", "sinfo -R header", parse_sinfo_reasons, "\n".join(lines(REASONS)[1:]), "r")
    assert parse_sinfo_reasons(lines(REASONS)[0] + "\n", "r") == []


# ------------------------------------------------------------------ squeue -O tres-alloc


def test_squeue_fixture_flags_the_cut_row_and_the_snip() -> None:
    got = parse_squeue_tres(text(SQUEUE), SQUEUE)
    cut, whole = got.rows
    # line 3: "-O tres-alloc" is 20 wide; the value fills it and ends with a comma
    assert (cut.line, cut.text, cut.truncated) == (3, "cpu=120,mem=515456M,", True)
    assert dict(cut.tres) == {"cpu": "120", "mem": "515456M"}
    assert (cut.cpus, cut.memory_mib, cut.node_count) == (120, 515456, None)
    assert cut.gpus is None  # the GPUs, if any, were cut off
    # line 8: "-O tres-alloc:100" leaves it whole; gres/gpu and gres/gpu:a100 are one GPU
    assert (whole.line, whole.truncated) == (8, False)
    assert whole.text == "cpu=10,mem=100G,node=1,billing=10,gres/gpu=1,gres/gpu:a100=1"
    assert (whole.cpus, whole.memory_mib, whole.node_count) == (10, 102400, 1)
    assert (whole.gpus, dict(whole.gpu_types)) == (1, {"a100": 1})
    assert whole.tres["billing"] == "10"
    assert got.elided == (7,)  # "<SNIP>"
    assert not got.complete


def test_squeue_without_the_echo_assumes_the_default_width() -> None:
    # without "$ squeue ... -O tres-alloc" the width is taken as the default 20
    got = parse_squeue_tres("TRES_ALLOC\ncpu=12,mem=51545M,no\ncpu=1,mem=4G,node=1\n", "q")
    first, second = got.rows
    assert (first.truncated, dict(first.tres), first.gpus) == (
        True, {"cpu": "12", "mem": "51545M"}, None)
    assert (second.truncated, second.gpus, second.node_count) == (False, 0, 1)
    # exactly 20 characters, all items well formed: the last amount may have lost digits
    twenty = parse_squeue_tres("TRES_ALLOC\ncpu=1,mem=4G,node=12\n", "q").rows[0]
    assert len(twenty.text) == 20
    assert (twenty.truncated, dict(twenty.tres)) == (True, {"cpu": "1", "mem": "4G"})
    assert parse_squeue_tres("TRES_ALLOC\n", "q").complete


def test_squeue_multi_column_and_typed_gpus() -> None:
    out = (
        "$ squeue -O jobid,tres-alloc:80\n"
        "JOBID               TRES_ALLOC\n"
        "4242                cpu=8,mem=64G,node=1,gres/gpu:h100=2\n"
        "4243                cpu=2,mem=8G,node=1,gres/gpu=3,gres/gpu:a100=1,gres/gpu:h100=2\n"
        "4244                \n"
    )
    rows = parse_squeue_tres(out, "q").rows
    assert [(r.line, r.columns["JOBID"], r.gpus, dict(r.gpu_types), r.truncated) for r in rows] == [
        (3, "4242", 2, {"h100": 2}, False),
        (4, "4243", 3, {"a100": 1, "h100": 2}, False),
        (5, "4244", 0, {}, False),
    ]
    # a JOBID that fills its 20 columns runs straight into TRES_ALLOC; the cut still holds
    glued = "JOBID               TRES_ALLOC\n12345678901234567890cpu=1,mem=1G,gres/gpu=1\n"
    (row,) = parse_squeue_tres(glued, "q").rows
    assert (row.columns["JOBID"], row.gpus) == ("12345678901234567890", 1)


@pytest.mark.parametrize(
    "value, pattern",
    [
        ("cpu=1,mem", r"ends inside 'mem' but it is shorter than the column width 100"),
        ("cpu=1,,mem=4G", r"got '' in"),
        ("cpu=1,cpu=2", "cpu again"),
        ("cpu=x,mem=4G", "got 'cpu=x'"),
        ("gres/gpu=1,gres/gpu:a100=2", r"part of gres/gpu=1, got 2 typed"),
        ("hello world", "name=amount"),
    ],
)
def test_squeue_bad_values_fail_at_their_line(value: str, pattern: str) -> None:
    out = f"$ squeue -O tres-alloc:100\nTRES_ALLOC\ncpu=1\n{value}\n"
    raises_at("q:4", pattern, parse_squeue_tres, out, "q")


def test_squeue_header() -> None:
    raises_at("q:1", "got nothing", parse_squeue_tres, "", "q")
    raises_at("q:1", "TRES_ALLOC", parse_squeue_tres, "JOBID\n1\n", "q")
    raises_at("q:2", "TRES_ALLOC", parse_squeue_tres, "$ squeue\ncpu=1\n", "q")


# ----------------------------------------------------------------- slurmd GRES devices


def test_slurmd_fixture_gives_the_four_mig_devices_present() -> None:
    gpus = parse_slurmd_gpus(text(SLURMD), SLURMD)
    assert [g.line for g in gpus] == [1, 2, 3, 4]
    assert [g.links for g in gpus] == [
        (0, 0, 0, 0, 0, -1, 0), (0, 0, 0, 0, -1, 0, 0), (0, 0, 0, -1, 0, 0, 0),
        (0, 0, -1, 0, 0, 0, 0),
    ]
    assert [(g.gpu_instance, g.compute_instance) for g in gpus] == [
        (12, 0), (11, 0), (10, 0), (9, 0)]
    assert [g.files[1:] for g in gpus] == [
        ("/dev/nvidia-caps/nvidia-cap111", "/dev/nvidia-caps/nvidia-cap112"),
        ("/dev/nvidia-caps/nvidia-cap102", "/dev/nvidia-caps/nvidia-cap103"),
        ("/dev/nvidia-caps/nvidia-cap93", "/dev/nvidia-caps/nvidia-cap94"),
        ("/dev/nvidia-caps/nvidia-cap84", "/dev/nvidia-caps/nvidia-cap85"),
    ]
    for g in gpus:
        assert g.type is None  # Type:(null)
        assert (g.count, g.core_count, g.cores) == (1, 256, tuple(range(64)))
        assert g.flags == ("HAS_FILE", "ENV_NVML")
        assert g.files[0] == "/dev/nvidia1"
        assert g.parent_uuid == MIG_PARENT
        assert g.unique_id == f"MIG-{MIG_PARENT}/{g.gpu_instance}/0"
        assert g.is_mig and g.heading is None and not g.ignored


def cut(line_no: int, marker: str, keep: int = 0) -> str:
    """The slurmd fixture with line ``line_no`` cut ``keep`` characters after ``marker``."""
    out = lines(SLURMD)
    row = out[line_no - 1]
    out[line_no - 1] = row[: row.index(marker) + keep]
    return "\n".join(out[:line_no])


@pytest.mark.parametrize(
    "marker, keep, pattern",
    [
        (" UniqueId:", len(" UniqueId:MIG-GPU-ede6b90f-50d8"), "UniqueId as MIG-GPU-"),
        (" UniqueId:", 0, "expected UniqueId: after File: for a MIG device"),
        ("File:", len("File:/dev/nvidia1,"), "an empty element"),
        (" File:", 0, "expected File: after Flags:, got the end of the line"),
        (" Flags:", 0, "expected Flags: after Links:"),
        ("Links:", len("Links:0,0,-"), "expected Flags: after Links:, got the end"),
        ("Cores(", len("Cores(25"), r"Cores\(<N>\)"),
        ("GRES[", len("GRES[gp"), r"GRES\[<name>\]"),
    ],
)
def test_slurmd_line_cut_inside_fails_at_that_line(marker: str, keep: int, pattern: str) -> None:
    raises_at("d:4", pattern, parse_slurmd_gpus, cut(4, marker, keep), "d")


HM_SLURMD = """\
[2024-05-01T10:00:00.000] debug:  gpu/nvml: _get_system_gpu_list_nvml: 2 GPU system device(s) detected
[2024-05-01T10:00:00.001] gres/gpu: _merge_system_gres_conf: Including the following GPU matched between system and configuration:
[2024-05-01T10:00:00.001]     GRES[gpu] Type:h100 Count:1 Cores(112):0-55  Links:-1,18 Flags:HAS_FILE,HAS_TYPE,ENV_NVML File:/dev/nvidia0 UniqueId:(null)
[2024-05-01T10:00:00.002] gres/gpu: _merge_system_gres_conf: WARNING: The following autodetected GPUs are being ignored:
[2024-05-01T10:00:00.002]     GRES[gpu] Type:h100 Count:1 Cores(112):56-111  Links:18,-1 Flags:HAS_FILE,HAS_TYPE,ENV_NVML File:/dev/nvidia1
[2024-05-01T10:00:00.003]     GRES[mps] Type:(null) Count:200 Cores(112):(null)  Links:(null) Flags:HAS_FILE File:/dev/nvidia0
[2024-05-01T10:00:00.003] GRES_PARSABLE[gpu](1):h100|112|0-55|-1,18|/dev/nvidia0|
slurmd: slurmd version 23.11.4 started
slurmd: Gres Name=gpu Type=a100 Count=4 Index=0 ID=7696487 File=/dev/nvidia[0-3] Cores=0-15,64-79 CoreCnt=128 Links=(null) Flags=HAS_FILE,HAS_TYPE
slurmd: Gres Name=gpu Type=a100 Count=1 ID=7696487 File=/dev/nvidia4 (null)
slurmd: Gres Name=shard Type=(null) Count=8
"""


def test_slurmd_handmade_log_with_headings_and_both_line_forms() -> None:
    gpus = parse_slurmd_gpus(HM_SLURMD, "d")
    assert [g.line for g in gpus] == [3, 5, 9, 10]
    matched, ignored, summary, bare = gpus
    assert (matched.type, matched.cores, matched.links, matched.unique_id, matched.is_mig) == (
        "h100", tuple(range(56)), (-1, 18), None, False)
    assert matched.heading is not None and matched.heading.endswith("configuration:")
    assert not matched.ignored
    assert (ignored.cores, ignored.links, ignored.ignored) == (
        tuple(range(56, 112)), (18, -1), True)
    assert (summary.type, summary.count, summary.core_count, summary.files, summary.links) == (
        "a100", 4, 128, ("/dev/nvidia[0-3]",), None)
    assert summary.cores == tuple(range(16)) + tuple(range(64, 80))
    assert (summary.heading, summary.ignored) == ("slurmd: slurmd version 23.11.4 started", False)
    assert (bare.count, bare.files, bare.cores, bare.core_count, bare.flags) == (
        1, ("/dev/nvidia4",), None, None, ())
    assert parse_slurmd_gpus("", "d") == []
    assert parse_slurmd_gpus("[t] slurmd version 25.11 started\n", "d") == []


@pytest.mark.parametrize(
    "line, pattern",
    [
        ("GRES[gpu] Type:a Count:1 Cores(8):0-8  Links:-1 Flags:F File:/dev/nvidia0",
         r"core ids below Cores\(8\), got 8"),
        ("GRES[gpu] Type:a Count:1 Cores(8):3-1  Links:-1 Flags:F File:/dev/nvidia0",
         "run upwards"),
        (f"GRES[gpu] Type:a Count:1 Cores({MAX_CORES + 1}):0  Links:-1 Flags:F File:/d",
         "core count as a whole number"),
        ("GRES[gpu] Type:a Count:1 Cores(8):0  Links:-1,-1 Flags:F File:/dev/nvidia0",
         "at most one -1"),
        ("GRES[gpu] Type:a Count:1 Cores(8):0  Links:0,0,- Flags:F File:/dev/nvidia0",
         "Links as comma-separated integers"),
        ("GRES[gpu] Type:a Count:1 Cores(8):0  Links:-1 Flags:F File:/d UniqueId:x extra",
         "end of the line after UniqueId:"),
        ("GRES[gpu] Type:a Count:1 Cores(8):0  Links:-1 Flags:F File:/d Extra:x",
         "expected UniqueId: or the end"),
        ("GRES[gpu] Count:1 Type:a Cores(8):0  Links:-1 Flags:F File:/d", "expected Type:"),
        ("GRES[gpu] Type:a Count:x Cores(8):0  Links:-1 Flags:F File:/d", "Count as a whole"),
        ("GRES[gpu] Type:a Count:1 Cores(8):0  Links:-1 Flags:A,,B File:/d", "Flags as a comma"),
        ("Gres Name=gpu Type=a100 Count=1 Color=red", "Key=Value words"),
        ("Gres Name=gpu Type=a100", "expected Count="),
        ("Gres Name=gpu Name=gpu Count=1", "Name= again"),
        ("Gres Name= Count=1", "empty name"),
    ],
)
def test_slurmd_bad_lines(line: str, pattern: str) -> None:
    raises_at("d:2", pattern, parse_slurmd_gpus, f"[t] heading\n[t]     {line}\n", "d")


# ------------------------------------------------------------------- GRES log errors


def test_slurmctld_fixture_core_spec_errors() -> None:
    errors = find_gres_errors(text(SLURMCTLD), SLURMCTLD)
    assert [(e.where, e.core_spec) for e in errors] == [
        (f"{SLURMCTLD}:1", "48-63,176-191"), (f"{SLURMCTLD}:2", "48-63,176-191"),
        (f"{SLURMCTLD}:3", "16-31,144-159"), (f"{SLURMCTLD}:4", "16-31,144-159"),
        (f"{SLURMCTLD}:5", "112-127,240-255"), (f"{SLURMCTLD}:6", "112-127,240-255"),
    ]
    for e in errors:
        assert (e.timestamp, e.level, e.function, e.gres, e.node) == (
            "2022-06-10T09:46:22.044", "error", "_node_config_validate", "gpu", "node01")
        assert e.message.startswith("_node_config_validate: gres/gpu: invalid GRES core")
        assert e.hint is not None and "core ids" in e.hint


@pytest.mark.parametrize("keep", ["(48-63,176", "(48-63,176-191)", "(48-63,176-191) on no"])
def test_slurmctld_line_cut_inside_the_spec_fails_at_that_line(keep: str) -> None:
    out = lines(SLURMCTLD)
    out[5] = out[5][: out[5].index("(") + len(keep)]
    raises_at("e:6", r"\(<spec>\) on node <name>", find_gres_errors, "\n".join(out), "e")


HM_CTLD = """\
[2024-05-01T10:00:00.000] slurmctld version 23.11.4 started on cluster c
[2024-05-01T10:00:01.000] error: _slurm_rpc_node_registration node=gpu07: Invalid argument
[2024-05-01T10:00:02.000] error: Setting node gpu07 state to INVAL with reason:gres/gpu count reported lower than configured (0 < 8)
[2024-05-01T10:00:03.000] error: Job 12 has zero end_time
Jun 10 09:46:22 head slurmd[811]: fatal: We were configured to autodetect nvml functionality, but we weren't able to find that lib when Slurm was configured.
[2024-05-01T10:00:04.000] debug:  gres/gpu: init: loaded
"""


def test_find_gres_errors_handmade() -> None:
    errors = find_gres_errors(HM_CTLD, "c")
    assert [(e.line, e.level, e.gres, e.node, e.timestamp is None) for e in errors] == [
        (3, "error", "gpu", "gpu07", False),
        (5, "fatal", None, None, True),
    ]
    assert errors[0].hint is not None and "fewer GPUs" in errors[0].hint
    assert errors[1].hint is not None and "NVML" in errors[1].hint
    assert find_gres_errors("", "c") == []


# ------------------------------------------------------------------------------ fuzz

_INSERT = (" ", "  ", "\n", "\t", "\r", ",", ":", "=", "-", "[", "]", "(", ")", "*", "/",
           "0", "9", "-1", "x", "é", "\ufeff", "(null)", "<SNIP>", "error: gres ")
_LINE_OPS = ("del_line", "dup_line", "swap_lines")


PARSERS: tuple[tuple[Callable[[str, str], object], str], ...] = (
    (parse_sinfo, text(SINFO) + HM_SINFO),
    (parse_sinfo_reasons, text(REASONS)),
    (parse_squeue_tres, text(SQUEUE)),
    (parse_slurmd_gpus, text(SLURMD) + HM_SLURMD),
    (find_gres_errors, text(SLURMCTLD) + HM_CTLD),
)


@pytest.mark.parametrize("parser, source", PARSERS, ids=[p.__name__ for p, _ in PARSERS])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fuzz_only_located_errors(
    parser: Callable[[str, str], object], source: str, data: st.DataObject
) -> None:
    out = data.draw(mutated((source,), _INSERT, _LINE_OPS))
    try:
        parser(out, "f")
    except InvalidInputError as e:
        assert re.fullmatch(r"f:\d+", e.where), e.where
        line = int(e.where[2:])
        assert 1 <= line <= max(1, out.count("\n") + 1)
