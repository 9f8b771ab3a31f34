"""Parsers of `nvidia-smi topo -m` text and Slurm gres.conf: real fixtures, broken inputs.

The fixtures under tests/data/topo and tests/data/slurm are byte-exact copies of public
outputs (see each file's ``.src`` sidecar). Expected matrices below were transcribed by
hand from those files, not produced by the parser.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.adapters.nvidia_smi.topo import TopoMatrix, parse_topo_file, parse_topo_matrix
from placer.adapters.slurm.gres import GresGpu, gres_links_matrix, parse_gres_conf
from placer.exceptions import InvalidInputError

TOPO = Path(__file__).parent / "data" / "topo"
SLURM = Path(__file__).parent / "data" / "slurm"

DGX_A100 = "dgx-a100_mlx5x12_gengwg-cheatsheets.txt"
A100_NV4 = "issue_4x-a100-nv4-mesh_4nic_nccl-tests-331_nic-legend-truncated.txt"
T4 = "issue_4x-tesla-t4-pcie_nccl-428.txt"
RTX5090 = "issue_2x-rtx5090-pcie-phb_club-3090-1229.txt"
DGX1_V100 = "dgx1-v100_msccl-tools.txt"
ANSI_H100 = "h100-80gb_ansi-underlined-header_nvidia-gpu-exporter.txt"
B300 = "handmade-hgx-b300-8gpu_ansi-header_trailing-tabs.txt"
GB200 = "issue_gb200-4gpu-grace_nic0-5_sglang-11208_partial.txt"


def rows(*lines: str) -> tuple[tuple[str, ...], ...]:
    """A label matrix written one row per string, cells separated by spaces."""
    return tuple(tuple(line.split()) for line in lines)


def topo_text(name: str) -> str:
    return (TOPO / name).read_text(encoding="utf-8")


def parse(name: str) -> TopoMatrix:
    return parse_topo_matrix(topo_text(name), name)


def raises_at(text: str, line: int, pattern: str = "", source: str = "t") -> InvalidInputError:
    with pytest.raises(InvalidInputError) as info:
        parse_topo_matrix(text, source)
    assert info.value.where == f"{source}:{line}", str(info.value)
    assert re.search(pattern, info.value.what), info.value.what
    return info.value


def lines_of(text: str) -> list[str]:
    return text.split("\n")


def replace_on_line(text: str, line: int, old: str, new: str) -> str:
    lines = lines_of(text)
    assert old in lines[line - 1], (old, lines[line - 1])
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    return "\n".join(lines)


def delete_line(text: str, line: int) -> str:
    lines = lines_of(text)
    del lines[line - 1]
    return "\n".join(lines)


# ------------------------------------------------------------------ expected matrices

NV12_8 = rows(
    "X    NV12 NV12 NV12 NV12 NV12 NV12 NV12",
    "NV12 X    NV12 NV12 NV12 NV12 NV12 NV12",
    "NV12 NV12 X    NV12 NV12 NV12 NV12 NV12",
    "NV12 NV12 NV12 X    NV12 NV12 NV12 NV12",
    "NV12 NV12 NV12 NV12 X    NV12 NV12 NV12",
    "NV12 NV12 NV12 NV12 NV12 X    NV12 NV12",
    "NV12 NV12 NV12 NV12 NV12 NV12 X    NV12",
    "NV12 NV12 NV12 NV12 NV12 NV12 NV12 X",
)
NV18_8 = rows(
    "X    NV18 NV18 NV18 NV18 NV18 NV18 NV18",
    "NV18 X    NV18 NV18 NV18 NV18 NV18 NV18",
    "NV18 NV18 X    NV18 NV18 NV18 NV18 NV18",
    "NV18 NV18 NV18 X    NV18 NV18 NV18 NV18",
    "NV18 NV18 NV18 NV18 X    NV18 NV18 NV18",
    "NV18 NV18 NV18 NV18 NV18 X    NV18 NV18",
    "NV18 NV18 NV18 NV18 NV18 NV18 X    NV18",
    "NV18 NV18 NV18 NV18 NV18 NV18 NV18 X",
)
PCIE_PIX_PHB_8 = rows(
    "X   PIX PHB PHB SYS SYS SYS SYS",
    "PIX X   PHB PHB SYS SYS SYS SYS",
    "PHB PHB X   PIX SYS SYS SYS SYS",
    "PHB PHB PIX X   SYS SYS SYS SYS",
    "SYS SYS SYS SYS X   PIX PHB PHB",
    "SYS SYS SYS SYS PIX X   PHB PHB",
    "SYS SYS SYS SYS PHB PHB X   PIX",
    "SYS SYS SYS SYS PHB PHB PIX X",
)

EXPECTED: dict[str, TopoMatrix] = {
    DGX_A100: TopoMatrix(
        gpu_labels=NV12_8,
        nic_names=(
            "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5",
            "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_10", "mlx5_11",
        ),
        nic_labels=rows(
            "PXB PXB SYS SYS SYS SYS SYS SYS",  # mlx5_0
            "PXB PXB SYS SYS SYS SYS SYS SYS",  # mlx5_1
            "SYS SYS PXB PXB SYS SYS SYS SYS",  # mlx5_2
            "SYS SYS PXB PXB SYS SYS SYS SYS",  # mlx5_3
            "SYS SYS SYS SYS SYS SYS SYS SYS",  # mlx5_4
            "SYS SYS SYS SYS SYS SYS SYS SYS",  # mlx5_5
            "SYS SYS SYS SYS PXB PXB SYS SYS",  # mlx5_6
            "SYS SYS SYS SYS PXB PXB SYS SYS",  # mlx5_7
            "SYS SYS SYS SYS SYS SYS PXB PXB",  # mlx5_8
            "SYS SYS SYS SYS SYS SYS PXB PXB",  # mlx5_9
            "SYS SYS SYS SYS SYS SYS SYS SYS",  # mlx5_10
            "SYS SYS SYS SYS SYS SYS SYS SYS",  # mlx5_11
        ),
        cpu_affinity=(
            "48-63,176-191", "48-63,176-191", "16-31,144-159", "16-31,144-159",
            "112-127,240-255", "112-127,240-255", "80-95,208-223", "80-95,208-223",
        ),
        numa_affinity=("3", "3", "1", "1", "7", "7", "5", "5"),
    ),
    "dgx1-p100-or-v100_topo-mp_pcie-only_gengwg-cheatsheets.txt": TopoMatrix(
        gpu_labels=PCIE_PIX_PHB_8,
        nic_names=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
        nic_labels=rows(
            "PIX PIX PHB PHB SYS SYS SYS SYS",
            "PHB PHB PIX PIX SYS SYS SYS SYS",
            "SYS SYS SYS SYS PIX PIX PHB PHB",
            "SYS SYS SYS SYS PHB PHB PIX PIX",
        ),
        cpu_affinity=("0-19,40-59",) * 4 + ("20-39,60-79",) * 4,
        numa_affinity=("0",) * 4 + ("1",) * 4,
    ),
    DGX1_V100: TopoMatrix(
        gpu_labels=rows(
            "X   NV1 NV1 NV2 NV2 SYS SYS SYS",
            "NV1 X   NV2 NV1 SYS NV2 SYS SYS",
            "NV1 NV2 X   NV2 SYS SYS NV1 SYS",
            "NV2 NV1 NV2 X   SYS SYS SYS NV1",
            "NV2 SYS SYS SYS X   NV1 NV1 NV2",
            "SYS NV2 SYS SYS NV1 X   NV2 NV1",
            "SYS SYS NV1 SYS NV1 NV2 X   NV2",
            "SYS SYS SYS NV1 NV2 NV1 NV2 X",
        ),
        nic_names=("mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"),
        nic_labels=rows(
            "PIX PIX PHB PHB SYS SYS SYS SYS",  # mlx5_0
            "SYS SYS SYS SYS PIX PIX PHB PHB",  # mlx5_2
            "PHB PHB PIX PIX SYS SYS SYS SYS",  # mlx5_1
            "SYS SYS SYS SYS PHB PHB PIX PIX",  # mlx5_3
        ),
        cpu_affinity=("0-19,40-59",) * 4 + ("20-39,60-79",) * 4,
        numa_affinity=(None,) * 8,
    ),
    "issue_2gpu-nv12-subset_mlx5x8_lmdeploy-pr1944.txt": TopoMatrix(
        gpu_labels=rows("X NV12", "NV12 X"),
        nic_names=tuple(f"mlx5_{k}" for k in range(8)),
        nic_labels=rows(
            "SYS SYS", "SYS SYS", "SYS SYS", "SYS SYS",
            "NODE NODE", "NODE NODE", "PXB PXB", "PXB PXB",
        ),
        cpu_affinity=("48-95,144-191", "48-95,144-191"),
        numa_affinity=("1", "1"),
    ),
    # Raw capture: the header is underlined with ANSI escapes (ESC[4m ... ESC[0m).
    ANSI_H100: TopoMatrix(
        gpu_labels=(("X",),),
        nic_names=(),
        nic_labels=(),
        cpu_affinity=("0-19",),
        numa_affinity=("0",),
        gpu_numa_id=(None,),  # N/A
    ),
    "issue_2x-rtx3090-node_wrapped-legend_club-3090-1125.txt": TopoMatrix(
        gpu_labels=rows("X NODE", "NODE X"),
        nic_names=(),
        nic_labels=(),
        cpu_affinity=("0-15", "0-15"),
        numa_affinity=("0", "0"),
    ),
    RTX5090: TopoMatrix(
        gpu_labels=rows("X PHB", "PHB X"),
        nic_names=(),
        nic_labels=(),
        cpu_affinity=("0-63", "0-63"),
        numa_affinity=("0", "0"),
    ),
    A100_NV4: TopoMatrix(
        gpu_labels=rows(
            "X   NV4 NV4 NV4",
            "NV4 X   NV4 NV4",
            "NV4 NV4 X   NV4",
            "NV4 NV4 NV4 X",
        ),
        # The NIC Legend is cut after NIC1: NIC2 and NIC3 keep their printed names.
        nic_names=("mlx5_0", "mlx5_1", "NIC2", "NIC3"),
        nic_labels=rows(
            "PXB SYS SYS SYS",
            "SYS PXB SYS SYS",
            "SYS SYS PXB SYS",
            "SYS SYS SYS PXB",
        ),
        cpu_affinity=("0", "0", "0", "0"),
        numa_affinity=("0-1", "0-1", "0-1", "0-1"),
    ),
    T4: TopoMatrix(
        gpu_labels=rows(
            "X   SYS  SYS  SYS",
            "SYS X    NODE NODE",
            "SYS NODE X    NODE",
            "SYS NODE NODE X",
        ),
        nic_names=(),
        nic_labels=(),
        cpu_affinity=("0-15,32-47", "16-31,48-63", "16-31,48-63", "16-31,48-63"),
        numa_affinity=(None, None, None, None),
    ),
    "issue_8gpu-pcie-pix-phb-2socket_nccl-1439_legend-truncated.txt": TopoMatrix(
        gpu_labels=PCIE_PIX_PHB_8,
        nic_names=(),
        nic_labels=(),
        cpu_affinity=("0-13,28-41",) * 4 + ("14-27,42-55",) * 4,
        numa_affinity=("0",) * 4 + ("1",) * 4,
    ),
    "issue_8x-rtx4090-pcie_2nic_go-gpuallocator-17.txt": TopoMatrix(
        gpu_labels=rows(
            "X   SYS SYS SYS SYS SYS SYS SYS",
            "SYS X   SYS SYS SYS SYS SYS SYS",
            "SYS SYS X   SYS SYS SYS SYS SYS",
            "SYS SYS SYS X   SYS SYS SYS SYS",
            "SYS SYS SYS SYS X   SYS SYS SYS",
            "SYS SYS SYS SYS SYS X   SYS SYS",
            "SYS SYS SYS SYS SYS SYS X   SYS",
            "SYS SYS SYS SYS SYS SYS SYS X",
        ),
        nic_names=("NIC0", "NIC1"),
        nic_labels=rows(
            "SYS SYS SYS SYS SYS SYS PHB SYS",
            "SYS SYS SYS SYS SYS SYS PHB SYS",
        ),
        cpu_affinity=("0-55,112-167",) * 4 + ("56-111,168-223",) * 4,
        numa_affinity=("0",) * 4 + ("1",) * 4,
    ),
    # Partial copies whose GPU rows are all there (NIC rows cut): the matrix is complete.
    "issue_hgx-h100-sxm_nic0-9_nccl-1264_partial.txt": TopoMatrix(
        gpu_labels=NV18_8,
        nic_names=tuple(f"NIC{k}" for k in range(10)),
        nic_labels=rows(
            "PIX SYS SYS SYS SYS SYS SYS SYS",  # NIC0
            "SYS PIX SYS SYS SYS SYS SYS SYS",  # NIC1
            "SYS SYS PIX SYS SYS SYS SYS SYS",  # NIC2
            "SYS SYS SYS SYS SYS SYS SYS SYS",  # NIC3
            "SYS SYS SYS SYS SYS SYS SYS SYS",  # NIC4
            "SYS SYS SYS PIX SYS SYS SYS SYS",  # NIC5
            "SYS SYS SYS SYS PIX SYS SYS SYS",  # NIC6
            "SYS SYS SYS SYS SYS PIX SYS SYS",  # NIC7
            "SYS SYS SYS SYS SYS SYS PIX SYS",  # NIC8
            "SYS SYS SYS SYS SYS SYS SYS PIX",  # NIC9
        ),
        cpu_affinity=("0-55,112-167",) * 4 + ("56-111,168-223",) * 4,
        numa_affinity=("0",) * 4 + ("1",) * 4,
    ),
    "issue_8x-nv18_nic0-8-reversed_nccl-1453_partial.txt": TopoMatrix(
        gpu_labels=NV18_8,
        nic_names=tuple(f"NIC{k}" for k in range(9)),
        nic_labels=rows(
            "SYS  SYS  SYS  SYS  SYS  SYS  SYS  SYS",  # NIC0
            "SYS  SYS  SYS  SYS  NODE NODE NODE PIX",  # NIC1
            "SYS  SYS  SYS  SYS  NODE NODE PIX  NODE",  # NIC2
            "SYS  SYS  SYS  SYS  NODE PIX  NODE NODE",  # NIC3
            "SYS  SYS  SYS  SYS  PIX  NODE NODE NODE",  # NIC4
            "NODE NODE NODE PIX  SYS  SYS  SYS  SYS",  # NIC5
            "NODE NODE PIX  NODE SYS  SYS  SYS  SYS",  # NIC6
            "NODE PIX  NODE NODE SYS  SYS  SYS  SYS",  # NIC7
            "PIX  NODE NODE NODE SYS  SYS  SYS  SYS",  # NIC8
        ),
        cpu_affinity=("0-79",) * 4 + ("80-159",) * 4,
        numa_affinity=("0",) * 4 + ("1",) * 4,
    ),
    # Hand-made terminal copy: prompt line, underlined header, trailing tabs.
    B300: TopoMatrix(
        gpu_labels=rows(*(" ".join("X" if i == j else "NV18" for j in range(8)) for i in range(8))),
        nic_names=tuple(f"mlx5_{k}" for k in range(8)) + ("mlx5_bond_0", "mlx5_bond_1"),
        nic_labels=rows(
            "PIX  NODE NODE NODE SYS  SYS  SYS  SYS",
            "NODE PIX  NODE NODE SYS  SYS  SYS  SYS",
            "NODE NODE PIX  NODE SYS  SYS  SYS  SYS",
            "NODE NODE NODE PIX  SYS  SYS  SYS  SYS",
            "SYS  SYS  SYS  SYS  PIX  NODE NODE NODE",
            "SYS  SYS  SYS  SYS  NODE PIX  NODE NODE",
            "SYS  SYS  SYS  SYS  NODE NODE PIX  NODE",
            "SYS  SYS  SYS  SYS  NODE NODE NODE PIX",
            "NODE NODE NODE NODE SYS  SYS  SYS  SYS",
            "SYS  SYS  SYS  SYS  NODE NODE NODE NODE",
        ),
        cpu_affinity=("0-47,96-143",) * 4 + ("48-95,144-191",) * 4,
        numa_affinity=("0",) * 4 + ("1",) * 4,
        gpu_numa_id=(None,) * 8,
    ),
}

# fixture -> (line of the error, pattern its message must match)
FIXTURE_ERRORS: dict[str, tuple[int, str]] = {
    # `topo -c` transcript and a NIC-legend fragment: no matrix at all.
    "dgx-a100_topo-c_cpu-affinity_gengwg-cheatsheets.txt": (1, "found none"),
    "issue_nic-legend-garbled_mlx5-bond_sglang-3685_fragment.txt": (1, "found none"),
    # `topo -p2p rw`: status codes are not link types (GPU0 row, GPU1 column).
    "issue_2x-rtx5090_topo-p2p-rw_club-3090-1229.txt": (2, r"column GPU1: .*'GNS'.*p2p"),
    # Header + 5 rows of 8 GPUs; the GPU5 row would be line 8 (end of input).
    "issue_8x-b200-4numa_nic0-8_unsloth-3872_partial.txt": (8, r"expected row GPU5 .*GPU0\.\.GPU7.*end of input"),
    # Header-less: the text starts with the GPU0 row.
    "issue_8x-b200-one-gpu-no-nvlink_vllm-16336_partial-noheader.txt": (1, r"header line.*got row GPU0"),
    "issue_8x-b200_header-NIC11NIC12-glued_vllm-31594_partial.txt": (2, r"'NIC11NIC12' \(two names glued"),
    "issue_8x-b200_row-SYSSYS-glued_sglang-8120_partial.txt": (3, r"column NIC14: .*'SYSSYS' \(two cells glued"),
    "issue_8x-nv18-76nics-truncated-to-56_vllm-14537_partial.txt": (6, r"expected row GPU2 .*end of input"),
    "issue_8x-nv18_header-unindented_vllm-8257_partial.txt": (5, r"expected row GPU2 .*end of input"),
    "issue_dgx-a100-40gb_nic0-11_nccl-1505_partial.txt": (7, r"expected row GPU4 .*GPU0\.\.GPU7"),
    # 16-GPU DGX-2: header + 4 rows.
    "issue_dgx2-16gpu-nv6_mlx5x10_nccl-tests-78_partial.txt": (7, r"expected row GPU4 .*GPU0\.\.GPU15"),
    GB200: (6, r"expected row GPU3 .*end of input"),
}


def test_every_topo_fixture_is_covered() -> None:
    names = {path.name for path in TOPO.glob("*.txt")}
    assert len(names) == 26
    assert names == set(EXPECTED) | set(FIXTURE_ERRORS)
    assert not set(EXPECTED) & set(FIXTURE_ERRORS)
    for name in names:
        assert (TOPO / f"{name}.src").is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_to_the_transcribed_matrix(name: str) -> None:
    result = parse_topo_file(TOPO / name)
    assert result == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(FIXTURE_ERRORS))
def test_broken_fixture_raises_at_its_line(name: str) -> None:
    line, pattern = FIXTURE_ERRORS[name]
    with pytest.raises(InvalidInputError) as info:
        parse_topo_file(TOPO / name)
    assert info.value.where == f"{name}:{line}", str(info.value)
    assert re.search(pattern, info.value.what), info.value.what


def test_dgx2_partial_names_the_missing_row() -> None:
    error = raises_at(topo_text("issue_dgx2-16gpu-nv6_mlx5x10_nccl-tests-78_partial.txt"), 7)
    assert error.what == "expected row GPU4 (the header has GPU0..GPU15), got end of input"


def test_partial_copy_with_text_after_the_last_row_names_that_line() -> None:
    text = topo_text(GB200) + "\nLegend:\n"
    raises_at(text, 6, r"expected row GPU3 .*got a blank line")


# ------------------------------------------------------------------ whitespace forms


def tabs_to_spaces(text: str) -> str:
    return "\n".join(line.expandtabs(8) for line in lines_of(text))


def spaces_to_tabs(text: str) -> str:
    return "\n".join(re.sub(r" {2,}", "\t", line) for line in lines_of(text))


TAB_FIXTURES = sorted(name for name in EXPECTED if "\t" in topo_text(name))
SPACE_FIXTURES = sorted(name for name in EXPECTED if "\t" not in topo_text(name))


def test_both_whitespace_forms_are_covered() -> None:
    assert DGX_A100 in TAB_FIXTURES and A100_NV4 in SPACE_FIXTURES
    assert len(TAB_FIXTURES) >= 6 and len(SPACE_FIXTURES) >= 3


@pytest.mark.parametrize("name", TAB_FIXTURES)
def test_tab_fixture_expanded_to_spaces_parses_the_same(name: str) -> None:
    spaced = tabs_to_spaces(topo_text(name))
    assert "\t" not in spaced
    assert parse_topo_matrix(spaced, name) == EXPECTED[name]


def test_seven_character_names_and_long_affinities_keep_one_space() -> None:
    spaced = tabs_to_spaces(topo_text(DGX_A100))
    assert "mlx5_10 mlx5_11" in spaced  # 7-char name: a tab becomes one space
    assert "112-127,240-255 7" in spaced
    assert parse_topo_matrix(spaced) == EXPECTED[DGX_A100]


@pytest.mark.parametrize("name", SPACE_FIXTURES)
def test_space_fixture_converted_to_tabs_parses_the_same(name: str) -> None:
    tabbed = spaces_to_tabs(topo_text(name))
    assert parse_topo_matrix(tabbed, name) == EXPECTED[name]


def test_crlf_line_endings() -> None:
    for name in (DGX_A100, A100_NV4, T4):
        crlf = topo_text(name).replace("\n", "\r\n")
        assert parse_topo_matrix(crlf) == EXPECTED[name]


def test_crlf_error_lines_are_unchanged() -> None:
    text = delete_line(topo_text(DGX_A100), 5).replace("\n", "\r\n")
    raises_at(text, 5, "expected row GPU3")


def test_header_without_its_leading_field() -> None:
    tab = replace_on_line(topo_text(DGX_A100), 1, "\tGPU0", "GPU0")
    assert parse_topo_matrix(tab) == EXPECTED[DGX_A100]
    spaced = replace_on_line(topo_text(A100_NV4), 2, "        GPU0", "GPU0")
    assert parse_topo_matrix(spaced) == EXPECTED[A100_NV4]


def test_self_cell_without_padding_and_rows_with_trailing_tabs() -> None:
    text = topo_text(DGX_A100).replace("\t X \t", "\tX\t")
    text = "\n".join(line + "\t" if line.startswith(("GPU", "mlx")) else line for line in lines_of(text))
    assert parse_topo_matrix(text) == EXPECTED[DGX_A100]


def test_preamble_and_epilogue_lines_are_ignored() -> None:
    text = (
        "user@host:~$ nvidia-smi topo -m\n"
        "NVIDIA Topology: \n"
        "GPU Topology:\n"
        "76 NICs found in the topology, only displaying 56 in the matrix.\n"
        + topo_text(A100_NV4)
        + "\nulimit soft: 1048576\n"
    )
    assert parse_topo_matrix(text) == EXPECTED[A100_NV4]


def test_byte_order_mark_is_ignored() -> None:
    assert parse_topo_matrix("\ufeff" + topo_text(T4)) == EXPECTED[T4]


def test_ansi_escapes_of_a_raw_capture_are_ignored() -> None:
    raw = topo_text(ANSI_H100)
    assert raw.startswith("\t\x1b[4mGPU0\tCPU Affinity") and "GPU NUMA ID\x1b[0m\n" in raw
    assert parse_topo_matrix(raw, ANSI_H100) == EXPECTED[ANSI_H100]
    assert parse_topo_matrix(raw.replace("\x1b[4m", "").replace("\x1b[0m", "")) == EXPECTED[ANSI_H100]


def test_b300_terminal_copy_with_underlined_header_and_trailing_tabs() -> None:
    raw = topo_text(B300)
    assert "\x1b[4mGPU0" in raw and "GPU NUMA ID\x1b[0m\t\n" in raw and " N/A\t\n" in raw
    result = parse_topo_matrix(raw, B300)
    assert result == EXPECTED[B300]
    assert parse_topo_matrix(raw.expandtabs(), B300) == result
    # The same screen with terminfo's attribute reset (ESC(B ESC[m, or ESC[m shift-in).
    for reset in ("\x1b(B\x1b[m", "\x1b[m\x0f"):
        assert parse_topo_matrix(raw.replace("\x1b[0m", reset), B300) == result
    assert parse_topo_matrix(raw.replace("\t\n", "  \t \n"), B300) == result


@pytest.mark.parametrize(
    ("old", "new", "line", "code", "column"),
    [
        ("GPU NUMA ID\x1b[0m", "GPU NUMA ID\x1b", 2, "001B", 200),  # an escape cut short
        ("GPU3    NV18", "GPU3\x07   NV18", 6, "0007", 5),
        ("NIC4    SYS", "NIC4\r   SYS", 15, "000D", 5),
        ("GPU1    NV18", "GPU1    NV18\x00", 4, "0000", 13),
    ],
)
def test_other_control_characters_are_refused_at_their_line(
    old: str, new: str, line: int, code: str, column: int
) -> None:
    text = topo_text(B300)
    assert old in text
    raises_at(
        text.replace(old, new, 1), line, rf"control character U\+{code} at column {column}$"
    )


def with_ansi(text: str) -> str:
    """``text`` as a colour terminal shows it: header underlined, row names bold, some
    labels coloured (escapes wrap words, so no whitespace changes)."""
    lines = lines_of(text)
    header = next(i for i, line in enumerate(lines) if "GPU0" in line)
    lines[header] = re.sub(r"(GPU0.*\S)", "\x1b[4m\\1\x1b[0m", lines[header])
    text = "\n".join(lines)
    text = re.sub(r"(?m)^(GPU[0-9]+|mlx5_[0-9]+|NIC[0-9]+)", "\x1b[1m\\1\x1b[22m", text)
    text = re.sub(r"\bSYS\b", "\x1b[31mSYS\x1b[39m", text)
    return re.sub(r"\b(NV[0-9]+|PXB)\b", "\x1b[1;32m\\1\x1b[m", text)


@pytest.mark.parametrize("name", [DGX_A100, A100_NV4, T4, DGX1_V100])
def test_ansi_escapes_anywhere_parse_like_the_clean_text(name: str) -> None:
    coloured = with_ansi(topo_text(name))
    assert coloured.count("\x1b[") > 20
    assert parse_topo_matrix(coloured, name) == EXPECTED[name]
    assert parse_topo_matrix(with_ansi(tabs_to_spaces(topo_text(name))), name) == EXPECTED[name]
    assert parse_topo_matrix(coloured.replace("\n", "\r\n"), name) == EXPECTED[name]


def test_ansi_escapes_keep_error_lines_and_stay_out_of_messages() -> None:
    coloured = with_ansi(delete_line(topo_text(DGX_A100), 5))
    error = raises_at(coloured, 5, r"expected row GPU3 .*got row GPU4")
    assert "\x1b" not in error.what
    glued = with_ansi(replace_on_line(topo_text(DGX_A100), 4, "PXB\tPXB", "PXBPXB"))
    error = raises_at(glued, 4, r"row GPU2, column mlx5_2: .*'PXBPXB' \(two cells glued")
    assert "\x1b" not in error.what


# ------------------------------------------------------------------ labels and columns


def test_soc_is_kept_as_soc() -> None:
    result = parse_topo_matrix(topo_text(T4).replace("SYS", "SOC"))
    assert result.gpu_labels[0] == ("X", "SOC", "SOC", "SOC")
    assert result.gpu_labels[1] == ("SOC", "X", "NODE", "NODE")


@pytest.mark.parametrize("count, ok", [(1, True), (64, True), (0, False), (65, False), (100, False)])
def test_nvlink_count_range(count: int, ok: bool) -> None:
    text = topo_text(A100_NV4).replace("NV4", f"NV{count}")
    if ok:
        assert parse_topo_matrix(text).gpu_labels[0][1] == f"NV{count}"
    else:
        raises_at(text, 3, rf"column GPU1: expected a link label .*'NV{count}'")


def test_single_gpu_matrix() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\t0\n"
    assert parse_topo_matrix(text) == TopoMatrix((("X",),), (), (), ("0-7",), ("0",))


def test_gpu_numa_id_column_and_numa_lists() -> None:
    text = topo_text(RTX5090).replace("\t0\t\tN/A", "\t0,3-9,11-17\t\t2")
    result = parse_topo_matrix(text)
    assert result.numa_affinity == ("0,3-9,11-17", "0,3-9,11-17")


def test_gpu_numa_id_column_is_kept() -> None:
    # The GB200 copy is cut inside row GPU3; cutting column GPU3 out too (8 characters at
    # 32..40 of the space-aligned header and rows) leaves a complete 3-GPU matrix.
    lines = lines_of(topo_text(GB200))
    assert lines[1][32:40] == "GPU3    " and all(line[32:40] == "NV18    " for line in lines[2:5])
    cut = "\n".join([lines[0]] + [line[:32] + line[40:] for line in lines[1:5]])
    result = parse_topo_matrix(cut)
    assert result.gpu_labels == rows("X NV18 NV18", "NV18 X NV18", "NV18 NV18 X")
    assert result.cpu_affinity == ("0-71", "0-71", "72-143")
    assert result.numa_affinity == ("0,3-9,11-17", "0,3-9,11-17", "1,19-25,27-33")
    assert result.gpu_numa_id == ("2", "10", "18")
    assert parse_topo_matrix(spaces_to_tabs(cut)) == result
    other = parse_topo_matrix(topo_text(RTX5090).replace("\t\tN/A", "\t\t18"))
    assert other.gpu_numa_id == ("18", "18") and other.numa_affinity == ("0", "0")


def test_gpu_numa_id_absent_or_not_available_is_none() -> None:
    assert parse(RTX5090).gpu_numa_id == (None, None)  # N/A
    assert parse(DGX_A100).gpu_numa_id == (None,) * 8  # no such column
    assert parse(A100_NV4).gpu_numa_id == (None,) * 4
    assert TopoMatrix((("X",),), (), (), ("0-7",), ("0",)).gpu_numa_id == (None,)


@pytest.mark.parametrize("value", ["0-1", "2,10", "x", "-1"])
def test_gpu_numa_id_is_one_id_or_not_available(value: str) -> None:
    text = replace_on_line(topo_text(RTX5090), 2, "\t\tN/A", f"\t\t{value}")
    raises_at(text, 2, rf"row GPU0, column 'GPU NUMA ID': expected one NUMA node id .*got '{value}'")


def test_not_available_affinity_is_none() -> None:
    text = topo_text(RTX5090).replace("\t0-63\t0\t\t", "\tN/A\tN/A\t\t")
    result = parse_topo_matrix(text)
    assert result.cpu_affinity == (None, None)
    assert result.numa_affinity == (None, None)


def test_rows_without_affinity_values() -> None:
    text = re.sub(r"\t0-63\t0\t\tN/A", "", topo_text(RTX5090))
    result = parse_topo_matrix(text)
    assert result.cpu_affinity == (None, None) and result.numa_affinity == (None, None)


def test_nic_legend_resolves_names_and_skips_garbled_entries() -> None:
    text = topo_text(A100_NV4) + "  NIC2: MA ID\n  NIC3: mlx5_bond_3\n  NIC9: mlx5_9\n"
    result = parse_topo_matrix(text)
    assert result.nic_names == ("mlx5_0", "mlx5_1", "NIC2", "mlx5_bond_3")


def test_nic_legend_conflicts_raise() -> None:
    text = topo_text(A100_NV4) + "  NIC1: mlx5_7\n"
    raises_at(text, 26, r"NIC1 = 'mlx5_1' at line 25 and 'mlx5_7'")
    text = topo_text(A100_NV4) + "  NIC2: mlx5_1\n"
    raises_at(text, 26, r"NIC2 and NIC1 are both named 'mlx5_1'")


def test_missing_nic_rows_are_fine_but_present_ones_are_checked() -> None:
    text = topo_text(DGX_A100)
    for last_nic_line in range(9, 22):
        lines = lines_of(text)
        cut = "\n".join(lines[:last_nic_line]) + "\n"
        assert parse_topo_matrix(cut) == EXPECTED[DGX_A100]


# ------------------------------------------------------------------ synthetic mutations
# DGX A100 fixture: line 1 header, 2..9 GPU0..GPU7, 10..21 mlx5_0..mlx5_11, 22 blank.


@pytest.mark.parametrize(
    "old, new, pattern",
    [
        ("\tGPU4\tGPU5", "\tGPU4GPU5", r"'GPU4GPU5' \(two names glued"),
        ("\tmlx5_3\tmlx5_4", "\tmlx5_3mlx5_4", r"'mlx5_3mlx5_4' \(two names glued"),
        ("\tGPU7\tmlx5_0", "\tGPU7mlx5_0", r"'GPU7mlx5_0'"),
        ("CPU Affinity\tNUMA", "CPU AffinityNUMA", r"got 'CPU'|'AffinityNUMA'"),
        ("\tGPU3\t", "\tGPU33\t", r"expected column GPU3, got GPU33"),
        ("\tmlx5_2\t", "\tmlx5_1\t", r"'mlx5_1' appears twice"),
        ("\tmlx5_11\t", "\tGPU8\t", r"GPU8 after NIC column"),
        ("NUMA Affinity", "NUMA Affinity\tFoo", r"'Foo'"),
    ],
)
def test_mutated_header_raises_at_line_1(old: str, new: str, pattern: str) -> None:
    raises_at(replace_on_line(topo_text(DGX_A100), 1, old, new), 1, pattern)


def test_glued_cells_raise_at_their_row() -> None:
    tab = replace_on_line(topo_text(DGX_A100), 4, "PXB\tPXB", "PXBPXB")
    raises_at(tab, 4, r"row GPU2, column mlx5_2: .*'PXBPXB' \(two cells glued")
    tab = replace_on_line(topo_text(DGX_A100), 7, "NV12\tNV12", "NV12NV12")
    raises_at(tab, 7, r"'NV12NV12' \(two cells glued")
    spaced = replace_on_line(topo_text(A100_NV4), 4, "SYS     PXB", "SYS PXB")
    raises_at(spaced, 4, r"row GPU1, column NIC0: .*'SYS PXB' \(two cells glued")
    nic = replace_on_line(topo_text(DGX_A100), 15, "SYS\tSYS", "SYSSYS")
    raises_at(nic, 15, r"row mlx5_5, column GPU0: .*'SYSSYS'")


def test_deleted_rows_raise_where_the_row_was_expected() -> None:
    text = topo_text(DGX_A100)
    raises_at(delete_line(text, 5), 5, r"expected row GPU3 .*got row GPU4")
    raises_at(delete_line(text, 2), 2, r"expected row GPU0 .*got row GPU1")
    raises_at(delete_line(text, 9), 9, r"expected row GPU7 .*got row mlx5_0")
    raises_at(delete_line(text, 13), 13, r"expected row mlx5_3 or the end of the matrix, got row mlx5_4")
    raises_at(delete_line(text, 1), 1, r"header line .*got row GPU0")
    raises_at(delete_line(topo_text(T4), 5), 5, r"expected row GPU3 .*got end of input")
    raises_at(delete_line(topo_text(RTX5090), 3), 3, r"expected row GPU1 .*got a blank line")
    raises_at(delete_line(topo_text(A100_NV4), 2), 2, r"header line .*got row GPU0")


def test_duplicated_or_extra_rows_raise() -> None:
    lines = lines_of(topo_text(DGX_A100))
    doubled = "\n".join(lines[:5] + [lines[4]] + lines[5:])
    raises_at(doubled, 6, r"expected row GPU4 .*got row GPU3")
    doubled_nic = "\n".join(lines[:21] + [lines[20]] + lines[21:])
    raises_at(doubled_nic, 22, r"expected the end of the matrix, got row mlx5_11")
    t4 = lines_of(topo_text(T4))
    extra = "\n".join(t4[:5] + [t4[4].replace("GPU3", "GPU4")] + t4[5:])
    raises_at(extra, 6, r"expected the end of the matrix, got row GPU4")


def test_deleted_cells_raise_at_their_row() -> None:
    text = topo_text(DGX_A100)
    raises_at(replace_on_line(text, 6, "\tSYS", ""), 6, r"row GPU4: expected 20 cells \(GPU0\.\.GPU7, mlx5_0\.\.mlx5_11\), got 19")
    raises_at(replace_on_line(text, 6, "\tSYS", "\t"), 6, r"row GPU4, column mlx5_0: .*an empty field")
    raises_at(replace_on_line(text, 12, "\tSYS", ""), 12, r"row mlx5_2: expected 20 cells .*got 19")
    raises_at(replace_on_line(text, 21, "\tPIX", ""), 21, r"row mlx5_11: expected 20 cells .*got 19")
    raises_at(replace_on_line(text, 2, "\t3", ""), 2, r"row GPU0: expected 2 \(CPU Affinity, NUMA Affinity\) values .*got 1")
    spaced = replace_on_line(topo_text(A100_NV4), 5, "NV4     ", "")
    raises_at(spaced, 5, r"row GPU2: expected 8 cells \(GPU0\.\.GPU3, NIC0\.\.NIC3\), got 7")
    extra = replace_on_line(text, 3, "\tPXB", "\tPXB\tPXB")
    raises_at(extra, 3, r"row GPU1: expected 20 cells .*got 21")


@pytest.mark.parametrize("junk", ["FOO", "nv12", "NV0", "NV", "12", "N/A", "OK", "-"])
def test_junk_label_raises_at_its_row(junk: str) -> None:
    text = replace_on_line(topo_text(DGX_A100), 5, "\tNV12\t", f"\t{junk}\t")
    raises_at(text, 5, r"row GPU3")


def test_junk_affinity_raises_at_its_row() -> None:
    text = replace_on_line(topo_text(DGX_A100), 8, "80-95,208-223", "80-95;208-223")
    raises_at(text, 8, r"row GPU6, column 'CPU Affinity': .*'80-95;208-223'")
    lines = lines_of(topo_text(DGX_A100))
    lines[9] += "\t0-7"
    raises_at("\n".join(lines), 10, r"row mlx5_0: expected nothing after the link cells")


def test_asymmetric_gpu_matrix_raises_at_the_later_row() -> None:
    text = topo_text(DGX_A100)
    # GPU5 row (line 7), column GPU2: NV12 -> SYS.
    later = replace_on_line(text, 7, "NV12\tNV12\tNV12", "NV12\tNV12\tSYS")
    raises_at(later, 7, r"row GPU5, column GPU2 is 'SYS' but row GPU2, column GPU5 \(line 4\) is 'NV12'")
    # GPU2 row (line 4), column GPU5: the mismatch shows when row GPU5 (line 7) is read.
    earlier = replace_on_line(text, 4, "\t X \tNV12\tNV12\tNV12", "\t X \tNV12\tNV12\tNV6")
    raises_at(earlier, 7, r"row GPU5, column GPU2 is 'NV12' but row GPU2, column GPU5 \(line 4\) is 'NV6'")
    t4 = replace_on_line(topo_text(T4), 4, "NODE     X", "PIX      X")
    raises_at(t4, 4, r"not symmetric")


def test_asymmetric_nic_rows_raise_at_the_nic_row() -> None:
    text = topo_text(DGX_A100)
    gpu_nic = replace_on_line(text, 14, "mlx5_4\tSYS", "mlx5_4\tPIX")
    raises_at(gpu_nic, 14, r"row mlx5_4, column GPU0 is 'PIX' but row GPU0, column mlx5_4 \(line 2\) is 'SYS'")
    nic_nic = replace_on_line(text, 15, "\tPIX\t X ", "\tSYS\t X ")
    raises_at(nic_nic, 15, r"row mlx5_5, column mlx5_4 is 'SYS' but row mlx5_4, column mlx5_5 \(line 14\) is 'PIX'")


def test_diagonal_must_be_x_and_only_there() -> None:
    text = topo_text(DGX_A100)
    raises_at(replace_on_line(text, 5, " X ", "NV12"), 5, r"row GPU3, column GPU3: expected X \(self\) on the diagonal, got 'NV12'")
    raises_at(replace_on_line(text, 3, "PXB", " X "), 3, r"row GPU1, column mlx5_0: X \(self\) is only valid on the diagonal")
    raises_at(replace_on_line(text, 11, " X ", "SYS"), 11, r"row mlx5_1, column mlx5_1: expected X")


def test_no_matrix_at_all() -> None:
    for text in ("", "\n\n", "hello\nworld\n", "Legend:\n\n  X    = Self\n", "GPU Topology:\n"):
        raises_at(text, 1, "found none")
    with pytest.raises(InvalidInputError) as info:
        parse_topo_matrix("")
    assert info.value.where == "<text>:1"


def test_header_without_rows() -> None:
    raises_at("\tGPU0\tGPU1\tCPU Affinity\n", 2, r"expected row GPU0 .*end of input")


# ------------------------------------------------------------------ files


def test_parse_topo_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(InvalidInputError) as info:
        parse_topo_file(missing)
    assert (info.value.where, info.value.what) == (str(missing), "no such file")
    binary = tmp_path / "topo.bin"
    binary.write_bytes(b"\tGPU0\nGPU0\t X \xff\n")
    with pytest.raises(InvalidInputError) as info:
        parse_topo_file(binary)
    assert info.value.where == "topo.bin:2"
    with pytest.raises(InvalidInputError) as info:
        parse_topo_file(tmp_path)
    assert info.value.where == str(tmp_path)


# ------------------------------------------------------------------ random mutations

MUTATION_BASES = [DGX_A100, A100_NV4, DGX1_V100, RTX5090, "issue_8x-nv18_nic0-8-reversed_nccl-1453_partial.txt"]
MUTATION_CHARS = st.sampled_from(list("\t \n XSYNODEPIXBHCV0123456789-,_/:") + ["\r", "NV", "SYS", "GPU"])


@st.composite
def mutated_fixture(draw: st.DrawFn) -> str:
    text = topo_text(draw(st.sampled_from(MUTATION_BASES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["del_char", "ins_char", "dup_char", "del_line", "ins_line", "dup_line"]))
        if kind.endswith("char"):
            pos = draw(st.integers(0, max(len(text) - 1, 0)))
            if kind == "del_char":
                text = text[:pos] + text[pos + 1:]
            elif kind == "ins_char":
                text = text[:pos] + draw(MUTATION_CHARS) + text[pos:]
            else:
                text = text[:pos] + text[pos:pos + 1] * 2 + text[pos + 1:]
        else:
            lines = lines_of(text)
            i = draw(st.integers(0, len(lines) - 1))
            if kind == "del_line":
                del lines[i]
            elif kind == "ins_line":
                lines.insert(i, draw(st.sampled_from(["", "Legend:", "GPU0\t X ", "\tGPU0", "junk  line"])))
            else:
                lines.insert(i, lines[i])
            text = "\n".join(lines)
    return text


@settings(max_examples=60, deadline=None)
@given(mutated_fixture())
def test_random_mutations_raise_only_invalid_input_or_give_a_sound_matrix(text: str) -> None:
    try:
        result = parse_topo_matrix(text, "m")
    except InvalidInputError as error:
        assert re.fullmatch(r"m:[1-9][0-9]*", error.where), error.where
        assert error.what
        return
    n = len(result.gpu_labels)
    assert n >= 1
    for i, row in enumerate(result.gpu_labels):
        assert len(row) == n
        for j, label in enumerate(row):
            assert (label == "X") == (i == j)
            assert label == result.gpu_labels[j][i]
    assert len(result.nic_labels) == len(result.nic_names) == len(set(result.nic_names))
    for labels in result.nic_labels:
        assert len(labels) == n and "X" not in labels
    assert len(result.cpu_affinity) == len(result.numa_affinity) == len(result.gpu_numa_id) == n


# ------------------------------------------------------------------ gres.conf

C10 = "gres.conf_explicit-links-8gpu_slurm-testsuite-test39.18-c10.conf"
B5 = "gres.conf_explicit-links-a100-sorted_slurm-testsuite-test39.18-b5.conf"
MPS = "gres.conf_autodetect-nvml-mps_slurm-docs-gres.shtml.conf"
DEEPOPS = "gres.conf_dgx-a100-CPUs-hyperthread-ranges-INVALID_deepops-1195.conf"
NODENAME = "gres.conf_nodename-autodetect-off-a100_slurm-docs.conf"


def gres_text(name: str) -> str:
    return (SLURM / name).read_text(encoding="utf-8")


def gres_raises_at(text: str, line: int, pattern: str, source: str = "g") -> None:
    with pytest.raises(InvalidInputError) as info:
        gres_links_matrix(parse_gres_conf(text, source), source)
    assert info.value.where == f"{source}:{line}", str(info.value)
    assert re.search(pattern, info.value.what), info.value.what


EXPECTED_GRES: dict[str, list[GresGpu]] = {
    MPS: [
        GresGpu(None, "gp100", "/dev/nvidia0", None, "0,1", 3),
        GresGpu(None, "gp100", "/dev/nvidia1", None, "0,1", 4),
        GresGpu(None, "p6000", "/dev/nvidia2", None, "2,3", 5),
        GresGpu(None, "p6000", "/dev/nvidia3", None, "2,3", 6),
    ],
    DEEPOPS: [
        GresGpu(None, None, "/dev/nvidia0", None, "48-63,176-191", 1),
        GresGpu(None, None, "/dev/nvidia1", None, "48-63,176-191", 2),
        GresGpu(None, None, "/dev/nvidia2", None, "16-31,144-159", 3),
        GresGpu(None, None, "/dev/nvidia3", None, "16-31,144-159", 4),
        GresGpu(None, None, "/dev/nvidia4", None, "112-127,240-255", 5),
        GresGpu(None, None, "/dev/nvidia5", None, "112-127,240-255", 6),
        GresGpu(None, None, "/dev/nvidia6", None, "80-95,208-223", 7),
        GresGpu(None, None, "/dev/nvidia7", None, "80-95,208-223", 8),
    ],
    NODENAME: [
        GresGpu("node0", "a100", "/dev/nvidia0", None, "0-15", 2),
        GresGpu("node0", "a100", "/dev/nvidia1", None, "16-31", 3),
    ],
    C10: [
        GresGpu(None, "tesla", "${dev}0", (-1, 2, 2, 0, 0, 0, 0, 0), "0-3", 2),
        GresGpu(None, "tesla", "${dev}1", (2, -1, 2, 0, 0, 0, 0, 0), "0-3", 3),
        GresGpu(None, "tesla", "${dev}2", (2, 2, -1, 0, 0, 0, 0, 0), "0-3", 4),
        GresGpu(None, "tesla", "${dev}3", (0, 0, 0, -1, 0, 1, 0, 0), "0-3", 5),
        GresGpu(None, "tesla", "${dev}4", (0, 0, 0, 0, -1, 1, 0, 0), "0-3", 6),
        GresGpu(None, "tesla", "${dev}5", (0, 0, 0, 1, 1, -1, 0, 0), "0-3", 7),
        GresGpu(None, "tesla", "${dev}6", (0, 0, 0, 0, 0, 0, -1, 2), "0-3", 8),
    ],
    B5: [
        GresGpu(None, "a100", "${dev}0", (0, 0, 0, -1, 0, 0, 0, 0), "0-1", 2),
        GresGpu(None, "a100", "${dev}1", (0, 0, -1, 0, 0, 0, 0, 0), "0-1", 3),
        GresGpu(None, "a100", "${dev}2", (0, -1, 0, 0, 0, 0, 0, 0), "0-1", 4),
        GresGpu(None, "a100", "${dev}3", (-1, 0, 0, 0, 0, 0, 0, 0), "0-1", 5),
        GresGpu(None, "a100", "${dev}4", (0, 0, 0, 0, 0, 0, 0, -1), "2-3", 6),
        GresGpu(None, "a100", "${dev}5", (0, 0, 0, 0, 0, 0, -1, 0), "2-3", 7),
        GresGpu(None, "a100", "${dev}6", (0, 0, 0, 0, 0, -1, 0, 0), "2-3", 8),
        GresGpu(None, "a100", "${dev}7", (0, 0, 0, 0, -1, 0, 0, 0), "2-3", 9),
    ],
}


def test_every_gres_fixture_is_covered() -> None:
    names = {path.name for path in SLURM.glob("gres.conf_*") if not path.name.endswith(".src")}
    assert names == set(EXPECTED_GRES)
    for name in names:
        assert (SLURM / f"{name}.src").is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED_GRES))
def test_gres_fixture_records(name: str) -> None:
    assert parse_gres_conf(gres_text(name), name) == EXPECTED_GRES[name]


def test_c10_has_eight_entry_vectors_for_seven_gpus() -> None:
    with pytest.raises(InvalidInputError) as info:
        gres_links_matrix(parse_gres_conf(gres_text(C10), C10), C10)
    assert info.value.where == f"{C10}:2"
    assert info.value.what == "expected 7 Links= entries (one per GPU record), got 8"


def test_c10_with_its_eighth_gpu_gives_three_nvlink_islands() -> None:
    text = gres_text(C10) + "Name=gpu Type=tesla File=${dev}7 Cores=0-3 Links=0,0,0,0,0,0,2,-1\n"
    assert gres_links_matrix(parse_gres_conf(text)) == rows(
        "X   NV2 NV2 SYS SYS SYS SYS SYS",
        "NV2 X   NV2 SYS SYS SYS SYS SYS",
        "NV2 NV2 X   SYS SYS SYS SYS SYS",
        "SYS SYS SYS X   SYS NV1 SYS SYS",
        "SYS SYS SYS SYS X   NV1 SYS SYS",
        "SYS SYS SYS NV1 NV1 X   SYS SYS",
        "SYS SYS SYS SYS SYS SYS X   NV2",
        "SYS SYS SYS SYS SYS SYS NV2 X",
    )


def test_b5_self_positions_are_not_in_file_order() -> None:
    gpus = parse_gres_conf(gres_text(B5), B5)
    with pytest.raises(InvalidInputError) as info:
        gres_links_matrix(gpus, B5)
    assert info.value.where == f"{B5}:2"
    assert "expected -1 (self) only at position 0" in info.value.what
    assert "got -1 at position 3" in info.value.what
    in_slurm_order = sorted(gpus, key=lambda gpu: gpu.links.index(-1))  # type: ignore[union-attr]
    assert [gpu.file for gpu in in_slurm_order] == [
        "${dev}3", "${dev}2", "${dev}1", "${dev}0", "${dev}7", "${dev}6", "${dev}5", "${dev}4",
    ]
    assert gres_links_matrix(in_slurm_order, B5) == rows(
        "X   SYS SYS SYS SYS SYS SYS SYS",
        "SYS X   SYS SYS SYS SYS SYS SYS",
        "SYS SYS X   SYS SYS SYS SYS SYS",
        "SYS SYS SYS X   SYS SYS SYS SYS",
        "SYS SYS SYS SYS X   SYS SYS SYS",
        "SYS SYS SYS SYS SYS X   SYS SYS",
        "SYS SYS SYS SYS SYS SYS X   SYS",
        "SYS SYS SYS SYS SYS SYS SYS X",
    )


@pytest.mark.parametrize("name", [MPS, DEEPOPS, NODENAME])
def test_fixtures_without_links_have_no_matrix(name: str) -> None:
    first_line = EXPECTED_GRES[name][0].line
    with pytest.raises(InvalidInputError) as info:
        gres_links_matrix(parse_gres_conf(gres_text(name), name), name)
    assert info.value.where == f"{name}:{first_line}"
    assert "expected Links=" in info.value.what


def test_gres_syntax() -> None:
    text = (
        "# header comment\n"
        "\n"
        "AutoDetect=nvml\n"
        "NodeName=dgx[01-04] AutoDetect=off\n"
        "NODENAME=dgx[01-04]  NAME=gpu  TYPE=h100 FILE=/dev/nvidia0 CPUs=0-7 LINKS=-1,18  # inline\n"
        "nodename=dgx[01-04] name=GPU type=h100 file=/dev/nvidia1 \\\n"
        "    cores=8-15 links=\"18,-1\"\n"
        "Name=mps Count=100 File=/dev/nvidia0\n"
        "Name=shard Count=8\n"
        "Name=gpu Type=h100 File=/dev/nvidia[2-3]\r\n"
    )
    gpus = parse_gres_conf(text, "g")
    assert gpus == [
        GresGpu("dgx[01-04]", "h100", "/dev/nvidia0", (-1, 18), "0-7", 5),
        GresGpu("dgx[01-04]", "h100", "/dev/nvidia1", (18, -1), "8-15", 6),
        GresGpu(None, "h100", "/dev/nvidia[2-3]", None, None, 10),
    ]
    assert gres_links_matrix(gpus[:2], "g") == (("X", "NV18"), ("NV18", "X"))


@pytest.mark.parametrize(
    "line, pattern",
    [
        ("Name=gpu File=/dev/nvidia0 Links=0-1", r"Links= as comma-separated integers.*'0-1'"),
        ("Name=gpu File=/dev/nvidia0 Links=", r"Links= as comma-separated integers"),
        ('Name=gpu File=/dev/nvidia0 Links=""', r"Links= as comma-separated integers"),
        ("Name=gpu File=/dev/nvidia0 Links=-1,x", r"'-1,x'"),
        ("Name=gpu File=/dev/nvidia0 Links=-1,-2", r"'-1,-2'"),
        ("Name=gpu File=/dev/nvidia0 Links=-1,65", r"0\.\.64"),
        ("Name=gpu File=/dev/nvidia0 Links=-1,99999999999999999999999", r"Links="),
        ("Name=gpu File=/dev/nvidia0 Cores=0-3 CPUs=0-3", r"CPUs= again"),
        ("Name=gpu Name=mps", r"Name= again"),
        ("Name=gpu File=/dev/nvidia0 gpu", r"expected Key=Value, got 'gpu'"),
        ("Include /etc/slurm/gres.d", r"expected Key=Value, got 'Include'"),
        ("Type=tesla File=/dev/nvidia1 Cores=0-3", r"expected Name= on a line with"),
        ('Name=gpu Type="a100', r"expected Key=Value"),
    ],
)
def test_gres_syntax_errors(line: str, pattern: str) -> None:
    text = "# gres.conf\nAutoDetect=off\n" + line + "\n"
    with pytest.raises(InvalidInputError) as info:
        parse_gres_conf(text, "g")
    assert info.value.where == "g:3", str(info.value)
    assert re.search(pattern, info.value.what), info.value.what


def links_conf(*vectors: str, extra: str = "") -> str:
    return "# links\n" + "".join(
        f"Name=gpu File=/dev/nvidia{i} Links={vector}{extra}\n" for i, vector in enumerate(vectors)
    )


def test_links_matrix_errors() -> None:
    gres_raises_at(links_conf("-1,4", "4,-1", "0,0,-1"), 2, r"expected 3 Links= entries .*got 2")
    gres_raises_at(links_conf("-1,4,0", "4,-1,0", "0,0,0"), 4, r"expected -1 \(self\) only at position 2 .*got none")
    gres_raises_at(links_conf("-1,4,0", "4,-1,-1", "0,0,-1"), 3, r"got -1 at positions 1, 2")
    gres_raises_at(links_conf("-1,4,0", "-1,4,0", "0,0,-1"), 3, r"position 1 .*got -1 at position 0; Slurm")
    gres_raises_at(links_conf("-1,4,0", "2,-1,0", "0,0,-1"), 3, r"expected 4 links to GPU record 0 \(line 2 has 4 to this one\), got 2")
    gres_raises_at(links_conf("-1,0,0", "0,-1,0", "0,1,-1"), 4, r"expected 0 links to GPU record 1 .*got 1")
    mixed = "Name=gpu File=/dev/nvidia0 Links=-1,0\nName=gpu File=/dev/nvidia1\n"
    gres_raises_at(mixed, 2, r"Links= on every GPU or on none, got Links= at line 1 but not at line 2")
    mixed = "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Links=0,-1\n"
    gres_raises_at(mixed, 2, r"got Links= at line 2 but not at line 1")
    nodes = "NodeName=a Name=gpu File=/dev/nvidia0 Links=-1,0\nNodeName=b Name=gpu File=/dev/nvidia1 Links=0,-1\n"
    gres_raises_at(nodes, 2, r"records of one node, got NodeName=b after NodeName=a")
    ranged = "Name=gpu File=/dev/nvidia[0-1] Links=-1,0\nName=gpu File=/dev/nvidia2 Links=0,-1\n"
    gres_raises_at(ranged, 1, r"one device per record .*File=/dev/nvidia\[0-1\]")
    gres_raises_at("# nothing\nAutoDetect=nvml\n", 1, r"expected Name=gpu records with Links=, got none")


def test_links_labels() -> None:
    matrix = gres_links_matrix(parse_gres_conf(links_conf("-1,1,64,0", "1,-1,0,0", "64,0,-1,3", "0,0,3,-1")))
    assert matrix == rows(
        "X    NV1 NV64 SYS",
        "NV1  X   SYS  SYS",
        "NV64 SYS X    NV3",
        "SYS  SYS NV3  X",
    )
