"""Parsers of ``nvidia-smi -L`` and ``nvidia-smi mig -lgip/-lgi/-lci``: real fixtures, cuts, edge cases.

The ``nvidia-smi-*.txt`` files in tests/data/nvidia-smi are byte-exact copies of public
outputs (see each file's ``.src`` sidecar). The expected values below were transcribed by
hand from those files, not produced by the parser. What each fixture gives:

* ``-L`` telegraf-5812: 4x A100-80GB, GPU 0 with 4x MIG 1g.20gb, a command echo line, no
  final newline; datadog-agent-pr33120: one A100-80GB with 7x MIG 1g.10gb;
  cpu-x-115 (GTX 1660 Ti, old driver without "NVIDIA "): the pasted GPU line lost its
  closing ")" - refused at line 3 (the parser does not guess where a line ended); with
  the parenthesis put back it parses.
* ``mig -lci`` k8s-device-plugin-257: complete, 3 compute instances.
* ``mig -lgi`` dcgm-138 (_partial): the copy is cut after the border of GPU 1's last
  row, i.e. at a clean row boundary; nothing in the text shows the cut (a complete table
  ends the same way), so it parses: 8 GPU instances of GPUs 0 and 1.
* ``mig -lgip`` mig-parted-97, mig-parted-pr187 (B200), gpu-operator-pr1303 (GB200),
  mig-parted-pr139 (GH200) (all _partial): each ends after the second line of its 4th
  profile without the closing border, which a real table always has, so by default they
  fail at the line where the border should be (end of input); ``allow_cut=True``
  returns the 4 complete profiles.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.adapters.nvidia_smi.listing import ListedGpu, MigDevice, mig_resources, parse_gpu_list, parse_gpu_list_file
from placer.adapters.nvidia_smi.mig_tables import (
    ComputeInstance,
    GpuInstance,
    MigProfile,
    parse_compute_instances,
    parse_compute_instances_file,
    parse_gpu_instances,
    parse_gpu_instances_file,
    parse_mig_profiles,
    parse_mig_profiles_file,
)
from placer.exceptions import InvalidInputError

DATA = Path(__file__).parent / "data" / "nvidia-smi"

L_TELEGRAF = "nvidia-smi-L_4x-a100-80gb-mixed-mig_telegraf-5812.txt"
L_DATADOG = "nvidia-smi-L_a100-80gb-mig-7x1g.10gb_datadog-agent-pr33120.txt"
L_GTX = "nvidia-smi-L_gtx1660ti-missing-paren_cpu-x-115.txt"
LCI = "nvidia-smi-mig-lci_a100-40gb_k8s-device-plugin-257.txt"
LGI = "nvidia-smi-mig-lgi_a100-80gb-mixed-profiles_dcgm-138_partial.txt"
LGIP_A100 = "nvidia-smi-mig-lgip_a100-80gb-no-free_mig-parted-97_partial.txt"
LGIP_B200 = "nvidia-smi-mig-lgip_b200_mig-parted-pr187_partial.txt"
LGIP_GB200 = "nvidia-smi-mig-lgip_gb200_gpu-operator-pr1303_partial.txt"
LGIP_GH200 = "nvidia-smi-mig-lgip_gh200-144g_mig-parted-pr139_partial.txt"

A100 = "NVIDIA A100-SXM4-80GB"


def text_of(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def parser_for(name: str):  # type: ignore[no-untyped-def]
    if name.startswith("nvidia-smi-L_"):
        return parse_gpu_list
    if name.startswith("nvidia-smi-mig-lgip_"):
        return parse_mig_profiles
    if name.startswith("nvidia-smi-mig-lgi_"):
        return parse_gpu_instances
    return parse_compute_instances


def at(name: str, line: int) -> str:
    return f"{name}:{line}"


def mig(name: str, profile: str, first_line: int, *uuids: str) -> tuple[MigDevice, ...]:
    return tuple(MigDevice(profile, i, uuid, at(name, first_line + i)) for i, uuid in enumerate(uuids))


# ------------------------------------------------------------------ expected values

TELEGRAF = (
    ListedGpu(
        0, A100, "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        mig(
            L_TELEGRAF, "1g.20gb", 3,
            "MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a",
            "MIG-a45882f0-9215-5733-a0c1-49286ab31cb5",
            "MIG-f00d722c-f4e1-52c9-aa31-750441ae1bfe",
            "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b",
        ),
        at(L_TELEGRAF, 2),
    ),
    ListedGpu(1, A100, "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95", (), at(L_TELEGRAF, 7)),
    ListedGpu(2, A100, "GPU-5e375e7e-b41f-155b-dcdc-534524c356fc", (), at(L_TELEGRAF, 8)),
    ListedGpu(3, A100, "GPU-69ec2344-ebac-b028-f88f-452abb3d7f11", (), at(L_TELEGRAF, 9)),
)

DATADOG = (
    ListedGpu(
        0, A100, "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
        mig(
            L_DATADOG, "1g.10gb", 2,
            "MIG-feb88891-0321-5fef-9c87-d4af3b54259e",
            "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973",
            "MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01",
            "MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6",
            "MIG-3f45d38c-8cee-503e-b806-a1f1bdceedeb",
            "MIG-96655de9-9525-58f9-a62b-0e4c1cc1c265",
            "MIG-1aae4990-b962-574e-8375-119d6d9b9687",
        ),
        at(L_DATADOG, 1),
    ),
)

# (gpu, gpu instance, name, profile id, instance id, start, size), rows on lines 8, 10, 12
LCI_ROWS = tuple(
    ComputeInstance(*row, where=at(LCI, line))
    for line, row in zip(
        (8, 10, 12),
        ((0, 13, "1g.5gb", 0, 0, 0, 1), (0, 5, "2g.10gb", 1, 0, 0, 2), (0, 1, "3g.20gb", 2, 0, 0, 3)),
    )
)

# (gpu, name, profile id, instance id, start, size), rows on lines 7, 9, ..., 21
LGI_ROWS = tuple(
    GpuInstance(*row, where=at(LGI, 7 + 2 * k))
    for k, row in enumerate(
        (
            (0, "1g.10gb", 19, 9, 2, 1),
            (0, "1g.10gb", 19, 10, 3, 1),
            (0, "2g.20gb", 14, 3, 0, 2),
            (0, "3g.40gb", 9, 2, 4, 4),
            (1, "1g.10gb", 19, 13, 2, 1),
            (1, "1g.10gb", 19, 14, 3, 1),
            (1, "2g.20gb", 14, 5, 0, 2),
            (1, "3g.40gb", 9, 1, 4, 4),
        )
    )
)


def profiles(name: str, first_line: int, *rows: tuple) -> tuple[MigProfile, ...]:
    """Rows (gpu, name, id, free, total, GiB, p2p, SM, DEC, ENC, CE, JPEG, OFA), 3 lines apart."""
    return tuple(MigProfile(*row, where=at(name, first_line + 3 * k)) for k, row in enumerate(rows))


F = False
LGIP_ROWS = {
    LGIP_A100: profiles(
        LGIP_A100, 7,
        (0, "1g.10gb", 19, 0, 7, 9.50, F, 14, 0, 0, 1, 0, 0),
        (0, "1g.10gb+me", 20, 0, 1, 9.50, F, 14, 1, 0, 1, 1, 1),
        (0, "2g.20gb", 14, 0, 3, 19.50, F, 28, 1, 0, 2, 0, 0),
        (0, "3g.40gb", 9, 0, 2, 39.25, F, 42, 2, 0, 3, 0, 0),
    ),
    LGIP_B200: profiles(
        LGIP_B200, 6,
        (0, "1g.23gb", 19, 7, 7, 20.50, F, 18, 1, 0, 2, 1, 0),
        (0, "1g.23gb+me", 20, 1, 1, 20.50, F, 18, 1, 1, 2, 1, 1),
        (0, "1g.45gb", 15, 4, 4, 44.25, F, 30, 1, 0, 2, 1, 0),
        (0, "2g.45gb", 14, 3, 3, 44.25, F, 36, 2, 0, 4, 2, 0),
    ),
    LGIP_GB200: profiles(
        LGIP_GB200, 6,
        (0, "1g.24gb", 19, 7, 7, 20.00, F, 18, 1, 0, 2, 1, 0),
        (0, "1g.24gb+me", 20, 1, 1, 20.00, F, 18, 1, 0, 2, 1, 1),
        (0, "1g.47gb", 15, 4, 4, 45.50, F, 32, 1, 0, 2, 1, 0),
        (0, "2g.47gb", 14, 3, 3, 45.50, F, 38, 2, 0, 4, 2, 0),
    ),
    LGIP_GH200: profiles(
        LGIP_GH200, 7,
        (0, "1g.18gb", 19, 7, 7, 17.50, F, 16, 1, 0, 1, 1, 0),
        (0, "1g.18gb+me", 20, 1, 1, 17.50, F, 16, 1, 0, 1, 1, 1),
        (0, "1g.36gb", 15, 4, 4, 35.25, F, 26, 1, 0, 1, 1, 0),
        (0, "2g.36gb", 14, 3, 3, 35.25, F, 32, 2, 0, 2, 2, 0),
    ),
}

# Fixtures that parse (with the default allow_cut=False) -> result.
EXPECTED: dict[str, tuple] = {
    L_TELEGRAF: TELEGRAF,
    L_DATADOG: DATADOG,
    LCI: LCI_ROWS,
    LGI: LGI_ROWS,
}

# Fixtures that fail -> (line, pattern of the message).
FIXTURE_ERRORS: dict[str, tuple[int, str]] = {
    L_GTX: (3, r"GPU line without the closing '\)' after the UUID"),
    # 17 lines (command echo + table); the border after the 4th profile would be line 18.
    LGIP_A100: (18, r"border .* closes the row at line 16, got end of input"),
    # 16 lines (no command echo).
    LGIP_B200: (17, r"border .* closes the row at line 15, got end of input"),
    LGIP_GB200: (17, r"border .* closes the row at line 15, got end of input"),
    LGIP_GH200: (18, r"border .* closes the row at line 16, got end of input"),
}


def test_every_fixture_is_covered() -> None:
    names = {path.name for path in DATA.glob("nvidia-smi-*.txt")}
    assert len(names) == 9
    assert names == set(EXPECTED) | set(FIXTURE_ERRORS)
    assert not set(EXPECTED) & set(FIXTURE_ERRORS)
    for name in names:
        assert (DATA / f"{name}.src").is_file()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_to_the_transcribed_values(name: str) -> None:
    file_parser = {
        parse_gpu_list: parse_gpu_list_file,
        parse_mig_profiles: parse_mig_profiles_file,
        parse_gpu_instances: parse_gpu_instances_file,
        parse_compute_instances: parse_compute_instances_file,
    }[parser_for(name)]
    assert file_parser(DATA / name) == EXPECTED[name]
    assert parser_for(name)(text_of(name), name) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(FIXTURE_ERRORS))
def test_broken_or_cut_fixture_raises_at_its_line(name: str) -> None:
    line, pattern = FIXTURE_ERRORS[name]
    with pytest.raises(InvalidInputError) as info:
        parser_for(name)(text_of(name), name)
    assert info.value.where == at(name, line), str(info.value)
    assert re.search(pattern, info.value.what), info.value.what


@pytest.mark.parametrize("name", sorted(LGIP_ROWS))
def test_cut_profile_tables_give_their_complete_rows_with_allow_cut(name: str) -> None:
    assert parse_mig_profiles_file(DATA / name, allow_cut=True) == LGIP_ROWS[name]


def test_fixture_facts() -> None:
    # Mixed MIG/non-MIG node; counts per Kubernetes resource.
    assert [len(gpu.mig) for gpu in TELEGRAF] == [4, 0, 0, 0]
    assert mig_resources(parse_gpu_list(text_of(L_TELEGRAF))) == {"nvidia.com/mig-1g.20gb": 4}
    assert mig_resources(parse_gpu_list(text_of(L_DATADOG))) == {"nvidia.com/mig-1g.10gb": 7}
    # Free/Total is current availability: the A100 of mig-parted-97 is fully partitioned.
    a100 = parse_mig_profiles(text_of(LGIP_A100), allow_cut=True)
    assert [(p.name, p.free, p.total) for p in a100] == [
        ("1g.10gb", 0, 7), ("1g.10gb+me", 0, 1), ("2g.20gb", 0, 3), ("3g.40gb", 0, 2)
    ]
    # Name memory != Memory column (B200 1g.23gb = 20.50 GiB).
    b200 = parse_mig_profiles(text_of(LGIP_B200), allow_cut=True)
    assert (b200[0].name, b200[0].memory_gib) == ("1g.23gb", 20.5)
    # The -lgi placements of each GPU tile all 8 memory slices of the A100-80GB.
    instances = parse_gpu_instances(text_of(LGI))
    for gpu in (0, 1):
        slices = sorted(s for i in instances if i.gpu == gpu for s in range(i.start, i.start + i.size))
        assert slices == list(range(8))


def test_cut_lgi_copy_is_indistinguishable_from_a_complete_table() -> None:
    # dcgm-138 is cut after GPU 1's last border: a clean row boundary, so it parses both ways.
    assert parse_gpu_instances(text_of(LGI), LGI, allow_cut=True) == LGI_ROWS


def test_missing_paren_fixture_parses_once_the_paren_is_back() -> None:
    text = text_of(L_GTX).replace("9e67\n", "9e67)\n")
    assert parse_gpu_list(text, L_GTX) == (
        ListedGpu(0, "GeForce GTX 1660 Ti", "GPU-e18afb8d-1627-f8ff-2ba3-c05c5a8e9e67", (), at(L_GTX, 3)),
    )


# ------------------------------------------------------------------ cuts of every fixture


def _flat(result: tuple) -> list:
    """A listing as one item per line (GPU lines and MIG lines), to compare prefixes."""
    if result and isinstance(result[0], ListedGpu):
        out: list = []
        for gpu in result:
            out.append((gpu.index, gpu.model, gpu.uuid, gpu.where))
            out.extend(gpu.mig)
        return out
    return list(result)


def _full(name: str) -> list:
    parser = parser_for(name)
    text = text_of(name)
    if parser is parse_gpu_list:
        text = text.replace("9e67\n", "9e67)\n")
        return _flat(parser(text, "cut"))
    return _flat(parser(text, "cut", allow_cut=True))


@pytest.mark.parametrize("allow_cut", [False, True])
@pytest.mark.parametrize("name", sorted(EXPECTED) + sorted(FIXTURE_ERRORS))
def test_cut_at_every_line_gives_a_prefix_or_fails_at_the_cut(name: str, allow_cut: bool) -> None:
    full = _full(name)
    lines = text_of(name).replace("9e67\n", "9e67)\n").split("\n")
    if lines[-1] == "":  # the text ends with a newline
        lines.pop()
    parser = parser_for(name)
    kwargs = {} if parser is parse_gpu_list else {"allow_cut": allow_cut}
    for keep in range(len(lines) + 1):
        text = "".join(line + "\n" for line in lines[:keep])
        try:
            got = _flat(parser(text, "cut", **kwargs))
        except InvalidInputError as e:
            assert e.where == f"cut:{keep + 1}", (keep, str(e))
            continue
        assert got == full[: len(got)], keep


@pytest.mark.parametrize("name", sorted(EXPECTED) + sorted(FIXTURE_ERRORS))
def test_a_line_cut_in_its_middle_fails_at_that_line(name: str) -> None:
    parser = parser_for(name)
    lines = text_of(name).replace("9e67\n", "9e67)\n").split("\n")
    for number, line in enumerate(lines, 1):
        content = line.rstrip()
        if not content or "nvidia-smi" in content:
            continue
        cut = lines[: number - 1] + [content[:-1]] + lines[number:]
        for kwargs in ({},) if parser is parse_gpu_list else ({}, {"allow_cut": True}):
            with pytest.raises(InvalidInputError) as info:
                parser("\n".join(cut), "cut", **kwargs)
            assert info.value.where == f"cut:{number}", (number, content, str(info.value))


# ------------------------------------------------------------------ nvidia-smi -L edge cases

U0 = "GPU-00000000-1111-2222-3333-444444444444"
U1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
M0 = "MIG-12345678-9abc-def0-1234-56789abcdef0"
M1 = "MIG-fedcba98-7654-3210-fedc-ba9876543210"


def raises_at(parser, text: str, line: int, pattern: str = "", **kwargs) -> InvalidInputError:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInputError) as info:
        parser(text, "t", **kwargs)
    assert info.value.where == f"t:{line}", str(info.value)
    assert re.search(pattern, info.value.what), info.value.what
    return info.value


def test_old_driver_without_nvidia_prefix_and_legacy_mig_uuids() -> None:
    text = (
        f"GPU 0: Tesla V100-SXM2-16GB (UUID: {U0})\n"
        f"GPU 1: A100-SXM4-40GB (UUID: {U1})\n"
        f"  MIG 3g.20gb Device 0: (UUID: MIG-{U1}/1/0)\n"
        f"  MIG 1c.3g.20gb Device 1: (UUID: MIG-{U1}/2/0)\n"
    )
    gpus = parse_gpu_list(text, "t")
    assert [(g.index, g.model, g.uuid) for g in gpus] == [(0, "Tesla V100-SXM2-16GB", U0), (1, "A100-SXM4-40GB", U1)]
    assert gpus[1].mig == (
        MigDevice("3g.20gb", 0, f"MIG-{U1}/1/0", "t:3"),
        MigDevice("1c.3g.20gb", 1, f"MIG-{U1}/2/0", "t:4"),
    )
    assert mig_resources(gpus) == {"nvidia.com/mig-1c.3g.20gb": 1, "nvidia.com/mig-3g.20gb": 1}


def test_legacy_mig_uuid_must_name_its_parent_gpu() -> None:
    text = f"GPU 0: A100 (UUID: {U0})\n  MIG 3g.20gb Device 0: (UUID: MIG-{U1}/1/0)\n"
    raises_at(parse_gpu_list, text, 2, "names another GPU than GPU 0")


def test_crlf_tabs_trailing_blanks_bom_and_prompts() -> None:
    reference = parse_gpu_list(text_of(L_TELEGRAF), "t")
    crlf = text_of(L_TELEGRAF).replace("\n", "\r\n") + "\r\n"
    assert parse_gpu_list(crlf, "t") == reference
    spaced = "\n".join(line + " \t " for line in text_of(L_TELEGRAF).split("\n"))
    assert parse_gpu_list(spaced, "t") == reference
    tabbed = text_of(L_TELEGRAF).replace("  MIG 1g.20gb     Device  ", "\tMIG\t1g.20gb\tDevice\t")
    assert parse_gpu_list(tabbed, "t") == reference
    prompt = "\ufeffuser@node:~$ sudo nvidia-smi -L\n" + text_of(L_TELEGRAF).split("\n", 1)[1] + "\n\n"
    assert parse_gpu_list(prompt, "t") == reference


def test_blank_lines_and_unindented_mig_lines_are_read() -> None:
    text = f"$ nvidia-smi -L\n\nGPU 0: NVIDIA H100 (UUID: {U0})\n\nMIG 7g.80gb Device 0: (UUID: {M0})\n"
    assert parse_gpu_list(text, "t") == (ListedGpu(0, "NVIDIA H100", U0, (MigDevice("7g.80gb", 0, M0, "t:5"),), "t:3"),)


def test_no_devices_were_found() -> None:
    assert parse_gpu_list("nvidia-smi -L\nNo devices were found\n") == ()
    raises_at(parse_gpu_list, f"No devices were found\nGPU 0: X (UUID: {U0})\n", 2, "expected nothing after")


@pytest.mark.parametrize(
    "text, line, pattern",
    [
        ("", 1, "got an empty text"),
        ("nvidia-smi -L\n", 2, "got only the command line"),
        (f"GPU 1: A (UUID: {U0})\n", 1, r"expected GPU 0 .* got GPU 1"),
        (f"GPU 0: A (UUID: {U0})\nGPU 2: A (UUID: {U1})\n", 2, r"expected GPU 1 .* got GPU 2"),
        (f"GPU 0: A (UUID: {U0})\nGPU 0: A (UUID: {U1})\n", 2, r"expected GPU 1 .* got GPU 0"),
        (f"GPU 0: A (UUID: {U0})\nGPU 1: A (UUID: {U0})\n", 2, r"listed twice \(first at t:1\)"),
        (f"  MIG 1g.10gb Device 0: (UUID: {M0})\nGPU 0: A (UUID: {U0})\n", 1, "MIG device line before any GPU line"),
        (f"GPU 0: A (UUID: {U0})\n  MIG 1g.10gb Device 1: (UUID: {M0})\n  MIG 1g.10gb Device 1: (UUID: {M1})\n",
         3, "expected increasing device indices"),
        (f"GPU 0: A (UUID: {U0})\n  MIG 1g.10gb Device 0: (UUID: {M0})\n  MIG 1g.10gb Device 1: (UUID: {M0})\n",
         3, "listed twice"),
        (f"GPU 0: A (UUID: {U0})\n  MIG 1g.10gb Device 0: (UUID: {M0}\n", 2, "MIG device line without the closing"),
        (f"GPU 0: A (UUID: {U0})\n  MIG big Device 0: (UUID: {M0})\n", 2, "expected a MIG profile"),
        (f"GPU 0: A (UUID: {U0})\n  MIG 1g.10gb Device 0: (UUID: {U1})\n", 2, "expected a MIG UUID"),
        (f"GPU 0: (UUID: {U0})\n", 1, "expected a model name"),
        (f"GPU 0: NVIDIA A100(UUID: {U0})\n", 1, r"expected `GPU <index>: <model> \(UUID"),
        ("GPU 0: A (UUID: GPU-1234)\n", 1, "expected a UUID GPU-"),
        (f"GPU 0: A (UUID: {U0})\nGPU 1: B\n", 2, r"expected `GPU <index>: <model> \(UUID"),
        (f"GPU 0: A (UUID: {U0})\nhello\n", 2, r"expected `GPU .* or `MIG"),
        (f"GPU 0: A (UUID: {U0})\nnvidia-smi -L\n", 2, r"expected `GPU .* or `MIG"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 1, "reported an error"),
        ("Failed to initialize NVML: Driver/library version mismatch\n", 1, "reported an error"),
    ],
)
def test_gpu_list_errors(text: str, line: int, pattern: str) -> None:
    raises_at(parse_gpu_list, text, line, pattern)


def test_mig_resources_folds_media_extension_variants() -> None:
    # The device plugin counts 1g.10gb+me devices as nvidia.com/mig-1g.10gb
    # (NVIDIA/k8s-device-plugin#1462). Hand-written listing.
    text = (
        f"GPU 0: NVIDIA A100-SXM4-80GB (UUID: {U0})\n"
        f"  MIG 1g.10gb     Device  0: (UUID: {M0})\n"
        f"  MIG 1g.10gb+me  Device  1: (UUID: {M1})\n"
        f"GPU 1: NVIDIA A100-SXM4-80GB (UUID: {U1})\n"
    )
    assert mig_resources(parse_gpu_list(text)) == {"nvidia.com/mig-1g.10gb": 2}
    assert mig_resources(()) == {}


# ------------------------------------------------------------------ mig table edge cases

LGI_HEAD = text_of(LGI).split("\n")[:6]  # echo, border, title, 2 header lines, rule
LGI_ROW = "|   0  MIG 1g.10gb         19        9          2:1     |"
BORDER = LGI_HEAD[1]


def lgi(*body: str) -> str:
    return "\n".join(LGI_HEAD + list(body)) + "\n"


def test_tables_with_crlf_and_trailing_blanks_parse_the_same() -> None:
    for name in (LCI, LGI, LGIP_B200):
        parser = parser_for(name)
        reference = parser(text_of(name), "t", allow_cut=True)
        assert parser(text_of(name).replace("\n", "\r\n"), "t", allow_cut=True) == reference
        padded = "\n".join(line + "  \t" for line in text_of(name).split("\n"))
        assert parser(padded, "t", allow_cut=True) == reference


def test_no_instances_messages_mean_no_rows() -> None:
    assert parse_gpu_instances("$ nvidia-smi mig -lgi\nNo GPU instances found: Not Found\n") == ()
    assert parse_compute_instances("No compute instances found: Not Found\n") == ()
    assert parse_mig_profiles("No MIG-enabled devices found.\n") == ()
    raises_at(parse_compute_instances, "No GPU instances found: Not Found\n", 1, "reported an error")
    raises_at(parse_gpu_instances, "No GPU instances found: Not Found\nGPU 0\n", 2, "expected nothing after")


def test_nvidia_smi_errors_are_reported_at_their_line() -> None:
    text = "[root@aio-node15 ~]# nvidia-smi mig -lci\nFailed to display compute instances: Insufficient Permissions\n"
    raises_at(parse_compute_instances, text, 2, "reported an error .*Insufficient Permissions")


def test_output_of_another_command_is_named() -> None:
    raises_at(parse_mig_profiles, text_of(LGI), 3, r"expected the title 'GPU instance profiles:'.*that is `nvidia-smi mig -lgi`")
    raises_at(parse_gpu_instances, text_of(LCI), 3, r"that is `nvidia-smi mig -lci`")
    raises_at(parse_compute_instances, text_of(LGIP_B200), 2, r"that is `nvidia-smi mig -lgip`")
    raises_at(parse_gpu_instances, text_of(L_TELEGRAF), 2, r"expected the top border")


def test_unknown_header_is_refused() -> None:
    text = text_of(LGI).replace("Placement  |", "Placement? |")
    raises_at(parse_gpu_instances, text, 4, r"expected the header line 'GPU Name Profile Instance Placement'")


def test_a_profile_row_without_its_second_line_fails_even_with_allow_cut() -> None:
    lines = text_of(LGIP_B200).split("\n")
    raises_at(parse_mig_profiles, "\n".join(lines[:15]) + "\n", 16, "second line of the row started at line 15, got end of input", allow_cut=True)
    # ... and with the border right after the first line.
    text = "\n".join(lines[:6] + lines[7:])
    raises_at(parse_mig_profiles, text, 7, "second line of the row started at line 6, got the border")


def test_empty_table_and_text_after_the_table() -> None:
    raises_at(parse_gpu_instances, lgi(), 7, "expected the first row .* got end of input")
    assert parse_gpu_instances(lgi(), allow_cut=True) == ()
    raises_at(parse_gpu_instances, lgi(LGI_ROW, BORDER, "", "user@host:~$ "), 10, "expected nothing after")
    raises_at(parse_gpu_instances, lgi(LGI_ROW, BORDER, "", LGI_ROW, BORDER), 10, "expected nothing after")
    raises_at(parse_gpu_instances, lgi(LGI_ROW, "", BORDER), 8, "closes the row at line 7, got an empty line")
    raises_at(parse_gpu_instances, lgi(LGI_ROW, LGI_ROW, BORDER), 8, "closes the row at line 7, got '|")


@pytest.mark.parametrize(
    "row, pattern",
    [
        ("|   0  MIG 1g.10gb         19        9               |", r"expected 6 cells .* got 5"),
        ("|   0  GPU 1g.10gb         19        9          2:1     |", r"column MIG: expected 'MIG'"),
        ("|   x  MIG 1g.10gb         19        9          2:1     |", r"column GPU: expected an integer"),
        ("|   0  MIG 1g.10gb         19        9          2:0     |", r"size >= 1"),
        ("|   0  MIG 1g.10gb         19        9          2-1     |", r"column Start:Size"),
        ("|   0  MIG 10gb            19        9          2:1     |", r"column Name: expected a MIG profile"),
        ("|   0  MIG 1g.10gb         19        ٣          2:1     |", r"column Instance ID: expected an integer"),
        ("|   0  MIG 1g.10gb         19        9          2:1      ", r"between '\|' and '\|'"),
    ],
)
def test_bad_instance_rows(row: str, pattern: str) -> None:
    raises_at(parse_gpu_instances, lgi(row, BORDER), 7, pattern)


def test_instance_consistency() -> None:
    other = "|   0  MIG 1g.10gb         19       10          2:1     |"
    raises_at(parse_gpu_instances, lgi(LGI_ROW, BORDER, other, BORDER), 9, r"placement 2:1 overlaps 2:1 at t:7")
    same_id = "|   0  MIG 1g.10gb         19        9          3:1     |"
    raises_at(parse_gpu_instances, lgi(LGI_ROW, BORDER, same_id, BORDER), 9, r"GPU instance 9 is listed twice")
    other_gpu = "|   1  MIG 1g.10gb         19        9          2:1     |"
    assert len(parse_gpu_instances(lgi(LGI_ROW, BORDER, other_gpu, BORDER))) == 2
    wrong_id = "|   0  MIG 1g.10gb         14       10          3:1     |"
    raises_at(parse_gpu_instances, lgi(LGI_ROW, BORDER, wrong_id, BORDER), 9, r"profile 1g.10gb has id 14, but 19")
    wrong_name = "|   0  MIG 2g.20gb         19       10          3:1     |"
    raises_at(parse_gpu_instances, lgi(LGI_ROW, BORDER, wrong_name, BORDER), 9, r"profile id 19 is 2g.20gb, but 1g.10gb")


def test_compute_instance_consistency() -> None:
    lines = text_of(LCI).split("\n")
    clash = lines[:9] + ["|   0     13       MIG 1g.5gb           0         0          0:1     |"] + lines[10:]
    raises_at(parse_compute_instances, "\n".join(clash), 10, r"compute instance 0 is listed twice")
    overlap = lines[:9] + ["|   0     13       MIG 1g.5gb           0         1          0:1     |"] + lines[10:]
    raises_at(parse_compute_instances, "\n".join(overlap), 10, r"GPU 0 GPU instance 13: placement 0:1 overlaps")


def test_profile_row_checks() -> None:
    lines = text_of(LGIP_B200).split("\n")

    def with_line(number: int, old: str, new: str) -> str:
        changed = list(lines)
        assert old in changed[number - 1]
        changed[number - 1] = changed[number - 1].replace(old, new, 1)
        return "\n".join(changed)

    raises_at(parse_mig_profiles, with_line(6, "7/7", "8/7"), 6, r"free <= total", allow_cut=True)
    raises_at(parse_mig_profiles, with_line(6, "No ", "Maybe "[:3]), 6, r"column P2P", allow_cut=True)
    raises_at(parse_mig_profiles, with_line(6, "20.50", "lots "), 6, r"column Memory", allow_cut=True)
    raises_at(parse_mig_profiles, with_line(6, "20.50", "20   "), 6, r"column Memory: .*two decimals", allow_cut=True)
    raises_at(parse_mig_profiles, with_line(7, "2     1     0", "2     1      "), 7, r"expected 3 cells", allow_cut=True)
    raises_at(parse_mig_profiles, with_line(9, "20     1/1", "19     1/1"), 9, r"profile id 19 is listed twice", allow_cut=True)
    yes = parse_mig_profiles(with_line(6, "No ", "Yes"), allow_cut=True)
    assert yes[0].p2p is True


def test_file_wrappers_report_missing_files(tmp_path: Path) -> None:
    for reader in (parse_gpu_list_file, parse_mig_profiles_file, parse_gpu_instances_file, parse_compute_instances_file):
        with pytest.raises(InvalidInputError) as info:
            reader(tmp_path / "nope.txt")
        assert info.value.what == "no such file"


# ------------------------------------------------------------------ fuzz

_SEEDS = [text_of(name) for name in sorted(EXPECTED) + sorted(FIXTURE_ERRORS)]
_SNIPPETS = [
    "\n", "\r\n", " ", "\t", "|", "+", "-", "=", ":", "/", "(", ")", "0", "7", "99999999", "٣",
    "GPU ", "MIG ", "MIG-", "GPU-", "(UUID: ", "Device ", "+me", "1g.10gb", "nvidia-smi", "\ufeff",
    "\x00", "é", "No devices were found", "No GPU instances found", "Failed to ", BORDER,
    "|=========|", "| GPU instances: |", "| GPU instance profiles: |", "| Compute instances: |",
]


def _mutate(text: str, ops: list[tuple[int, int, int, int]]) -> str:
    for kind, a, b, c in ops:
        lines = text.split("\n")
        if kind == 0 and text:  # delete a slice
            i = a % len(text)
            text = text[:i] + text[i + 1 + b % 8:]
        elif kind == 1:  # insert a snippet
            i = a % (len(text) + 1)
            text = text[:i] + _SNIPPETS[b % len(_SNIPPETS)] + text[i:]
        elif kind == 2 and lines:  # duplicate a line
            lines.insert(b % (len(lines) + 1), lines[a % len(lines)])
            text = "\n".join(lines)
        elif kind == 3 and lines:  # delete a line
            del lines[a % len(lines)]
            text = "\n".join(lines)
        elif kind == 4 and text:  # duplicate or replace one character
            i = a % len(text)
            text = text[:i] + (text[i] if b % 2 else chr(32 + c % 95)) + text[i + 1:]
    return text


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, len(_SEEDS) - 1),
    ops=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000)),
        min_size=1, max_size=6,
    ),
    allow_cut=st.booleans(),
)
def test_fuzz_only_invalid_input_escapes(seed: int, ops: list, allow_cut: bool) -> None:
    text = _mutate(_SEEDS[seed], ops)
    last = text.count("\n") + 2
    for parser in (parse_gpu_list, parse_mig_profiles, parse_gpu_instances, parse_compute_instances):
        kwargs = {} if parser is parse_gpu_list else {"allow_cut": allow_cut}
        try:
            rows = parser(text, "fuzz.txt", **kwargs)
        except InvalidInputError as e:
            assert e.where.startswith("fuzz.txt:"), str(e)
            assert 1 <= int(e.where.split(":")[1]) <= last, str(e)
            continue
        if parser is parse_gpu_list:
            assert [gpu.index for gpu in rows] == list(range(len(rows)))
            counts = mig_resources(rows)
            assert sum(counts.values()) == sum(len(gpu.mig) for gpu in rows)
            assert all(name.startswith("nvidia.com/mig-") for name in counts)


def test_a_cut_table_is_worded_in_the_users_terms() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_mig_profiles(text_of(LGIP_A100), LGIP_A100)
    assert "cut short: give the command's whole output" in info.value.what
    assert "allow_cut" not in info.value.what and "=True" not in info.value.what
