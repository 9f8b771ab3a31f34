"""The ``placer gpus`` and ``placer topo`` commands: GPU sets inside one node from its links."""
from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from reference import reference_select

from placer.adapters.nvidia_smi.topo import parse_topo_file
from placer.cli import main
from placer.model.topology import link_points

TOPO = Path(__file__).parent / "data" / "topo"
DGX1 = TOPO / "dgx1-v100_msccl-tools.txt"  # hybrid cube mesh, NV1/NV2, 4 NICs
A100 = TOPO / "dgx-a100_mlx5x12_gengwg-cheatsheets.txt"  # NV12 everywhere, 12 NICs
PCIE = TOPO / "issue_8x-rtx4090-pcie_2nic_go-gpuallocator-17.txt"  # all SYS, NIC0/NIC1
B300 = TOPO / "handmade-hgx-b300-8gpu_ansi-header_trailing-tabs.txt"  # NV18, ANSI header, trailing tabs
BROKEN = TOPO / "issue_8x-b200_row-SYSSYS-glued_sglang-8120_partial.txt"  # fails at line 3


def scores_of(path: Path) -> list[list[int]]:
    """Pair scores computed here from the parsed labels (not through GpuTopology)."""
    labels = parse_topo_file(path).gpu_labels
    return [[0 if i == j else link_points(c) for j, c in enumerate(row)] for i, row in enumerate(labels)]


def set_score(scores: list[list[int]], gpus: Any) -> int:
    return sum(scores[a][b] for a, b in itertools.combinations(gpus, 2))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def gpus_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, "gpus", *argv)
    assert code == 0, err
    assert err == ""
    assert len(out.splitlines()) == 1  # one JSON object on one line
    return json.loads(out)


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("placer: error: "), err
    assert "Traceback" not in err
    return lines[0][len("placer: error: "):]


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert out == ""
    return one_error_line(err)


# ------------------------------------------------------------------------------ gpus


def test_dgx1_known_case_matches_the_reference_and_hand_computation(capsys):
    s = scores_of(DGX1)
    # By hand: 0-4 is NV2 (200), 2-5 SYS (10): {0,4}+{2,5} = 210 beats {4,5}+{0,2} = 100+100.
    assert (s[0][4], s[2][5], s[4][5], s[0][2]) == (200, 10, 100, 100)
    doc = gpus_json(capsys, "--topology", DGX1, "--available", "0,2,4,5", "--size", "2")
    assert doc == {"gpus": [0, 4], "size": 2, "objective": "tiling", "setScore": 200}
    assert tuple(doc["gpus"]) == reference_select(s, [0, 2, 4, 5], 2, (), "tiling")


@pytest.mark.parametrize(
    "available, size, required",
    [((0, 2, 4, 5), 2, ()), ((0, 1, 2, 3, 4, 5), 3, ()), ((0, 1, 4, 5, 6, 7), 3, ()),
     ((1, 2, 3, 5, 6, 7), 4, ()), ((0, 2, 4, 5), 2, (5,)), ((0, 1, 2, 3, 4, 5, 6), 3, (6, 0))],
)
@pytest.mark.parametrize("objective", ["tiling", "best-set"])
def test_dgx1_answers_equal_the_reference(capsys, available, size, required, objective):
    s = scores_of(DGX1)
    argv = ["--topology", DGX1, "--available", ",".join(map(str, available)), "--size", str(size),
            "--objective", objective]
    if required:
        argv += ["--required", ",".join(map(str, required))]
    doc = gpus_json(capsys, *argv)
    assert tuple(doc["gpus"]) == reference_select(s, available, size, required, objective)
    assert doc["setScore"] == set_score(s, doc["gpus"])
    assert doc["objective"] == objective and doc["size"] == size


def test_best_set_and_tiling_differ_where_they_should(capsys):
    s = scores_of(DGX1)
    common = ["--topology", DGX1, "--available", "0,1,2,3,4,5", "--size", "3"]
    tiling = gpus_json(capsys, *common)
    best = gpus_json(capsys, *common, "--objective", "best-set")
    # best-set takes the triangle 0-2-3 (NV1+NV2+NV2 = 500) and leaves 1,4,5 (310);
    # tiling takes 0,3,4 (410) and leaves 1,2,5 (410): 820 > 810.
    assert best == {"gpus": [0, 2, 3], "size": 3, "objective": "best-set", "setScore": 500}
    assert tiling == {"gpus": [0, 3, 4], "size": 3, "objective": "tiling", "setScore": 410}
    assert set_score(s, [1, 4, 5]) + 500 < set_score(s, [1, 2, 5]) + 410


def test_required_gpu_is_in_the_answer(capsys):
    common = ["--topology", DGX1, "--available", "0,2,4,5", "--size", "2", "--required", "5"]
    # With 5 required: {2,5}+{0,4} = 210 tiles best; {4,5} (NV1) is the best pair alone.
    assert gpus_json(capsys, *common)["gpus"] == [2, 5]
    assert gpus_json(capsys, *common, "--objective", "best-set")["gpus"] == [4, 5]


def test_available_defaults_to_every_gpu(capsys):
    doc = gpus_json(capsys, "--topology", DGX1, "--size", "4")
    assert tuple(doc["gpus"]) == reference_select(scores_of(DGX1), range(8), 4, (), "tiling")
    assert doc["setScore"] == 900


def test_all_pcie_box(capsys):
    doc = gpus_json(capsys, "--topology", PCIE, "--available", "7,3,5", "--size", "2")
    assert doc == {"gpus": [3, 5], "size": 2, "objective": "tiling", "setScore": 10}


def matrix_doc() -> dict[str, Any]:
    """DGX-1's labels as a {"matrix": ...} form."""
    return {"matrix": [list(r) for r in parse_topo_file(DGX1).gpu_labels]}


@pytest.mark.parametrize(
    "name, doc",
    [
        ("bare.json", matrix_doc()),
        ("smi.json", {"nvidiaSmiTopo": DGX1.read_text()}),
        ("node.json", {"gpus": 8, "gpuModel": "V100", "gpuTopology": matrix_doc()}),
        ("bare.yaml", matrix_doc()),
        ("node.yml", {"gpus": 8, "gpuTopology": {"nvidiaSmiTopo": DGX1.read_text()}}),
    ],
)
def test_json_and_yaml_documents_give_the_same_answer(tmp_path, capsys, name, doc):
    path = tmp_path / name
    text = json.dumps(doc) if name.endswith(".json") else yaml.safe_dump(doc)
    path.write_text(text, encoding="utf-8")
    argv = ["--available", "0,1,2,3,4,5", "--size", "3"]
    assert gpus_json(capsys, "--topology", path, *argv) == gpus_json(capsys, "--topology", DGX1, *argv)


def test_nvswitch_document(tmp_path, capsys):
    path = tmp_path / "nvs.yaml"
    path.write_text("nvswitch: true\ngpus: 8\n", encoding="utf-8")
    doc = gpus_json(capsys, "--topology", path, "--available", "1,3,6", "--size", "2")
    assert doc == {"gpus": [1, 3], "size": 2, "objective": "tiling", "setScore": 1800}


@pytest.mark.parametrize(
    "extra, where, what",
    [
        (["--available", "0,,2"], "--available[1]", "expected a GPU index"),
        (["--available", "a"], "--available[0]", "expected a GPU index"),
        (["--available", "0,-1"], "--available[1]", "got '-1'"),
        (["--available", "1.5"], "--available[0]", "got '1.5'"),
        (["--available", "0,2,9"], "--available[2]", "a GPU index in 0..7, got 9"),
        (["--available", "0,2,2"], "--available[2]", "GPU 2 is listed twice"),
        (["--required", "x"], "--required[0]", "expected a GPU index"),
        (["--required", "8"], "--required[0]", "a GPU index in 0..7, got 8"),
        (["--size", "0"], "--size", "expected an integer >= 1"),
        (["--size", "two"], "--size", "expected an integer >= 1"),
        (["--size", "9"], "--size", "at most 8"),
        (["--objective", "best"], "--objective", "tiling or best-set"),
    ],
)
def test_bad_arguments_name_the_option(capsys, extra, where, what):
    argv = {"--available": "0,2,4,5", "--size": "2"}
    argv.update(dict(zip(extra[::2], extra[1::2])))
    msg = fails(capsys, "gpus", "--topology", DGX1, *itertools.chain(*argv.items()))
    assert msg.startswith(where + ": "), msg
    assert what in msg


@pytest.mark.parametrize(
    "argv, where, what",
    [
        (["--available", "0,2", "--size", "3"], "--available", "2 GPU(s) available, fewer than size 3"),
        (["--available", "0,2", "--size", "2", "--required", "4"], "--required",
         "[4] are required but not available"),
        (["--available", "0,2,4", "--size", "2", "--required", "0,2,4"], "--required", "more than size 2"),
        (["--available", "", "--size", "1"], "--available", "0 GPU(s) available"),
    ],
)
def test_impossible_requests(capsys, argv, where, what):
    msg = fails(capsys, "gpus", "--topology", DGX1, *argv)
    assert msg.startswith(where + ": ") and what in msg, msg


def test_broken_topology_file_one_line_at_its_line(capsys):
    msg = fails(capsys, "gpus", "--topology", BROKEN, "--size", "2")
    assert msg.startswith(f"{BROKEN}:3: "), msg
    assert "SYSSYS" in msg


def test_broken_topology_inside_a_document(tmp_path, capsys):
    path = tmp_path / "node.json"
    path.write_text(json.dumps({"gpuTopology": {"nvidiaSmiTopo": BROKEN.read_text()}}), encoding="utf-8")
    msg = fails(capsys, "gpus", "--topology", path, "--size", "2")
    assert msg.startswith(f"{path}: gpuTopology.nvidiaSmiTopo:3: "), msg


@pytest.mark.parametrize(
    "name, text, where, what",
    [
        ("asym.json", '{"matrix": [["X", "NV1"], ["NV2", "X"]]}', "matrix[1][0]",
         "same link as matrix[0][1]"),
        ("count.json", '{"matrix": [["X", "NV1"], ["NV1", "X"]], "gpus": 4}', "matrix", "expected 4 rows"),
        ("typo.json", '{"matrx": [["X"]]}', "", "unknown field(s): matrx"),
        ("gpus.yaml", "gpus: -1\ngpuTopology: {nvswitch: true}\n", "gpus", "expected an integer in 1..64"),
        ("nogpus.yaml", "nvswitch: true\n", "", "GPU count"),
        ("bad.json", '{"matrix": [[\n', ":2", "invalid JSON"),
        ("bad.yaml", "gpus: 2\nmatrix: [[X, NV1]\n  - x\n", ":3", "invalid YAML"),
    ],
)
def test_bad_documents(tmp_path, capsys, name, text, where, what):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    msg = fails(capsys, "gpus", "--topology", path, "--size", "1")
    expected = f"{path}{where}: " if where.startswith(":") or not where else f"{path}: {where}: "
    assert msg.startswith(expected), msg
    assert what in msg, msg


def test_document_without_its_extension_gets_a_hint(tmp_path, capsys):
    path = tmp_path / "topo.txt"
    path.write_text(json.dumps(matrix_doc()), encoding="utf-8")
    msg = fails(capsys, "gpus", "--topology", path, "--size", "2")
    assert msg.startswith(f"{path}:1: ") and ".json, .yaml or .yml" in msg


def test_missing_file_and_directory(tmp_path, capsys):
    nope = tmp_path / "nope.txt"
    assert fails(capsys, "gpus", "--topology", nope, "--size", "1") == f"{nope}: no such file"
    assert fails(capsys, "topo", tmp_path / "nope.json") == f"{tmp_path / 'nope.json'}: no such file"
    assert "directory" in fails(capsys, "topo", tmp_path)


def test_missing_required_option_is_a_usage_error(capsys):
    assert "--topology" in fails(capsys, "gpus", "--size", "2")
    assert "--size" in fails(capsys, "gpus", "--topology", DGX1)


def test_help_explains_the_objectives(capsys):
    assert main(["gpus", "-h"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  tiling\s+\S.*split", out, re.M), out
    assert re.search(r"^  best-set\s+\S.*set score alone", out, re.M), out
    assert "--available" in out and "--required" in out


def test_subprocess_success_and_failure():
    ok = subprocess.run(
        [sys.executable, "-m", "placer", "gpus", "--topology", str(DGX1),
         "--available", "0,2,4,5", "--size", "2"],
        capture_output=True, text=True, timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["gpus"] == [0, 4]
    bad = subprocess.run(
        [sys.executable, "-m", "placer", "topo", str(BROKEN)], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert one_error_line(bad.stderr).startswith(f"{BROKEN}:3: ")


def test_topology_from_stdin():
    proc = subprocess.run(
        [sys.executable, "-m", "placer", "gpus", "--topology", "-", "--available", "0,2,4,5", "--size", "2"],
        input=DGX1.read_text(), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["gpus"] == [0, 4]


# ------------------------------------------------------------------------------ topo


def islands_of(scores_labels: list[list[str]]) -> list[list[int]]:
    """NVLink islands recomputed from the labels (connected components of NV<n> cells)."""
    n = len(scores_labels)
    seen: set[int] = set()
    out = []
    for start in range(n):
        if start in seen:
            continue
        comp, stack = set(), [start]
        while stack:
            i = stack.pop()
            if i in comp:
                continue
            comp.add(i)
            stack += [j for j in range(n) if scores_labels[i][j].startswith("NV")]
        seen |= comp
        if len(comp) > 1:
            out.append(sorted(comp))
    return out


def topo_json(capsys: pytest.CaptureFixture[str], path: Any, *extra: str) -> dict[str, Any]:
    code, out, err = run(capsys, "topo", path, "--format", "json", *extra)
    assert code == 0, err
    assert err == ""
    return json.loads(out)


def test_topo_json_dgx1(capsys):
    doc = topo_json(capsys, DGX1)
    parsed = parse_topo_file(DGX1)
    s = scores_of(DGX1)
    assert doc["gpus"] == 8
    assert doc["matrix"] == [list(r) for r in parsed.gpu_labels]
    assert doc["scores"] == s
    assert doc["islands"] == islands_of(doc["matrix"]) == [list(range(8))]
    assert doc["withoutNvlink"] == []
    assert [n["name"] for n in doc["nics"]] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    assert doc["nics"][0]["labels"] == ["PIX", "PIX", "PHB", "PHB", "SYS", "SYS", "SYS", "SYS"]
    assert [e["size"] for e in doc["bestSets"]] == list(range(2, 9))
    for e in doc["bestSets"]:
        for key, objective in (("tiling", "tiling"), ("bestSet", "best-set")):
            assert tuple(e[key]["gpus"]) == reference_select(s, range(8), e["size"], (), objective)
            assert e[key]["setScore"] == set_score(s, e[key]["gpus"])
    # The best pair overall is an NV2 pair, the best quad the fully linked 0-1-2-3.
    assert doc["bestSets"][0]["bestSet"]["setScore"] == 200
    assert doc["bestSets"][2]["bestSet"] == {"gpus": [0, 1, 2, 3], "setScore": 900}


def test_topo_text_dgx1(capsys):
    code, out, err = run(capsys, "topo", DGX1)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{DGX1}: 8 GPUs, 4 NICs"
    header = next(line for line in lines if line.split()[:2] == ["GPU0", "GPU1"])
    assert header.split() == [f"GPU{j}" for j in range(8)]
    labels = parse_topo_file(DGX1).gpu_labels
    for i in range(8):
        row = next(line for line in lines if line.startswith(f"GPU{i} "))
        assert row.split()[1:] == list(labels[i])
        # aligned: each cell starts under its column name
        for j in range(8):
            col = header.index(f"GPU{j}")
            assert row[col:].split()[0] == labels[i][j]
    nic_row = ["mlx5_0", "PIX", "PIX", "PHB", "PHB", "SYS", "SYS", "SYS", "SYS"]
    assert any(line.split() == nic_row for line in lines)
    assert "NVLink islands: [0,1,2,3,4,5,6,7]" in lines
    best = [line.split() for line in lines if re.match(r"\s+\d+\s+\[", line)]
    assert [b[0] for b in best] == [str(k) for k in range(2, 9)]
    assert best[2] == ["4", "[0,1,2,3]", "900", "[0,1,2,3]", "900"]


def test_topo_all_pcie_has_no_islands(capsys):
    code, out, _ = run(capsys, "topo", PCIE)
    assert code == 0
    assert "NVLink islands: none (no NVLink)" in out.splitlines()
    nic_row = ["NIC1", "SYS", "SYS", "SYS", "SYS", "SYS", "SYS", "PHB", "SYS"]
    assert any(line.split() == nic_row for line in out.splitlines())
    doc = topo_json(capsys, PCIE)
    assert doc["islands"] == [] and doc["withoutNvlink"] == list(range(8))
    assert [n["name"] for n in doc["nics"]] == ["NIC0", "NIC1"]
    assert all(e["tiling"]["setScore"] == 10 * e["size"] * (e["size"] - 1) // 2 for e in doc["bestSets"])


def test_topo_with_many_nics(capsys):
    doc = topo_json(capsys, A100)
    parsed = parse_topo_file(A100)
    assert [n["name"] for n in doc["nics"]] == [f"mlx5_{k}" for k in range(12)]
    assert [n["labels"] for n in doc["nics"]] == [list(lab) for lab in parsed.nic_labels]
    assert doc["islands"] == [list(range(8))]
    code, out, _ = run(capsys, "topo", A100)
    assert code == 0 and out.splitlines()[0].endswith(": 8 GPUs, 12 NICs")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("mlx5_")}
    assert rows["mlx5_8"] == ["SYS"] * 6 + ["PXB", "PXB"]


def test_topo_and_gpus_read_a_b300_terminal_copy(capsys):
    doc = topo_json(capsys, B300)
    assert doc["gpus"] == 8
    assert doc["matrix"] == [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    assert doc["islands"] == [list(range(8))]
    assert [n["name"] for n in doc["nics"]][-3:] == ["mlx5_7", "mlx5_bond_0", "mlx5_bond_1"]
    code, out, err = run(capsys, "topo", B300)
    assert code == 0 and err == ""
    assert out.splitlines()[0] == f"{B300}: 8 GPUs, 10 NICs"
    answer = gpus_json(capsys, "--topology", B300, "--available", "1,3,4,6,7", "--size", "4")
    assert answer["setScore"] == 6 * 1800 and len(answer["gpus"]) == 4
    assert set(answer["gpus"]) <= {1, 3, 4, 6, 7}


def test_topo_partial_islands_and_max_size(tmp_path, capsys):
    # 0-1 and 2-3 joined by NVLink, GPU 4 on PCIe only.
    n = 5
    m = [["X" if i == j else "SYS" for j in range(n)] for i in range(n)]
    for a, b, lab in ((0, 1, "NV4"), (2, 3, "NV2+PIX")):
        m[a][b] = m[b][a] = lab
    path = tmp_path / "islands.yaml"
    path.write_text(yaml.safe_dump({"gpus": n, "gpuTopology": {"matrix": m}}), encoding="utf-8")
    doc = topo_json(capsys, path, "--max-size", "3")
    assert doc["islands"] == [[0, 1], [2, 3]] and doc["withoutNvlink"] == [4]
    assert [e["size"] for e in doc["bestSets"]] == [2, 3]
    assert doc["bestSets"][0]["bestSet"] == {"gpus": [0, 1], "setScore": 400}
    code, out, _ = run(capsys, "topo", path, "--max-size", "3")
    assert code == 0
    assert "NVLink islands: [0,1] [2,3] (no NVLink: GPU4)" in out
    assert "NV2+PIX" in out and "sizes above 3 not shown" in out


def test_topo_nvswitch_document(tmp_path, capsys):
    path = tmp_path / "nvs.json"
    path.write_text('{"nvswitch": true, "gpus": 4}', encoding="utf-8")
    doc = topo_json(capsys, path)
    assert doc["nvswitch"] is True and doc["matrix"] is None
    assert doc["islands"] == [[0, 1, 2, 3]]
    assert doc["bestSets"][-1] == {"size": 4, "tiling": {"gpus": [0, 1, 2, 3], "setScore": 6 * 1800},
                                   "bestSet": {"gpus": [0, 1, 2, 3], "setScore": 6 * 1800}}
    code, out, _ = run(capsys, "topo", path)
    assert code == 0 and "NVSwitch" in out


@pytest.mark.parametrize(
    "argv, where",
    [(["--format", "xml"], "--format"), (["--max-size", "0"], "--max-size"),
     (["--max-size", "x"], "--max-size")],
)
def test_topo_bad_options(capsys, argv, where):
    assert fails(capsys, "topo", DGX1, *argv).startswith(where + ": ")


def test_topo_broken_file(capsys):
    msg = fails(capsys, "topo", BROKEN, "--format", "json")
    assert msg.startswith(f"{BROKEN}:3: ")


# ---------------------------------------------------------------------- the library API


def test_topology_report_is_what_topo_json_prints(capsys):
    from placer.diagnostics.topology import load_topology, topology_report

    loaded = load_topology(DGX1)
    assert loaded.kind == "nvidia-smi" and len(loaded.nics) == 4
    assert topology_report(loaded.topology, loaded.nics) == topo_json(capsys, DGX1)
    assert topology_report(loaded.topology, loaded.nics, max_size=3) == topo_json(capsys, DGX1, "--max-size", "3")


def test_load_topology_reads_documents_by_name(tmp_path):
    from placer.diagnostics.topology import load_topology, topology_from_nvidia_smi
    from placer.exceptions import InvalidInputError

    path = tmp_path / "nvs.yaml"
    path.write_text("nvswitch: true\ngpus: 4\n", encoding="utf-8")
    loaded = load_topology(path)
    assert loaded.kind == "document" and loaded.topology.nvswitch and loaded.topology.gpus == 4
    with pytest.raises(InvalidInputError) as e:
        topology_from_nvidia_smi("nvswitch: true\ngpus: 4\n", "t.txt")
    assert e.value.where == "t.txt:1" and ".yaml" in e.value.what


# ----------------------------------------------------------------- --format yaml, -o


def test_topo_and_gpus_write_yaml_and_output_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["topo", DGX1, "--format", "json"], ["gpus", "--topology", DGX1, "--size", "2"]):
        code, out, err = run(capsys, *argv)
        assert code == 0, err
        as_json = json.loads(out)
        target = tmp_path / "out.yaml"
        code, out, err = run(capsys, *argv, "--format", "yaml", "-o", target)
        assert (code, out, err) == (0, "", "")
        assert yaml.safe_load(target.read_text(encoding="utf-8")) == as_json
    code, text, _ = run(capsys, "topo", DGX1)
    assert run(capsys, "topo", DGX1, "-o", tmp_path / "topo.txt") == (0, "", "")
    assert (tmp_path / "topo.txt").read_text(encoding="utf-8") == text


def test_topo_output_is_not_written_on_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "topo.txt"
    code, out, err = run(capsys, "topo", BROKEN, "-o", target)
    assert code == 2 and out == "" and err.startswith("placer: error: ")
    assert not target.exists()
