"""``placer import mig-parted``: nvidia-mig-parted configuration files read (errors at their
path), every entry checked against the bundled MIG tables, and applied to a snapshot.

Validity is compared with a brute force over the raw table's placements written in
``test_mig_plans`` (:func:`raw_layouts`), not with placer's layout tables; a re-laid-out
snapshot is decoded again by placer's snapshot reader and a pod placed on it is checked by
``placer.check_placement``.
"""
from __future__ import annotations

import json
import random
from collections import Counter
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

import placer
from placer.adapters.mig_parted.apply import IN_USE, RESPLIT, UNCHANGED, apply_mig_parted
from placer.adapters.mig_parted.check import INVALID, UNCHECKED, VALID, check_mig_parted
from placer.adapters.mig_parted.config import read_mig_parted
from placer.cli import main
from placer.diagnostics.explain import explain
from placer.exceptions import InvalidInputError
from placer.mig.named_layouts import layouts_for, named_layouts
from placer.mig.plans import relayout_snapshot, render_mig_parted
from placer.model.mig_profiles import tables
from test_mig import RAW, mig_pod, request, snapshot
from test_mig_plans import SEVEN_1G, mig_node, raw_layouts

DATA = Path(__file__).parent / "data" / "mig-parted"
HANDMADE = DATA / "handmade-config.yaml"


@lru_cache(maxsize=None)
def raw_count_sets(model: str) -> frozenset[frozenset[tuple[str, int]]]:
    """Every multiset of profiles one GPU of ``model`` holds, by the raw brute force."""
    return frozenset(frozenset(Counter(name for name, _ in layout).items()) for layout in raw_layouts(model))


def brute_valid(model: str, counts) -> bool:
    return frozenset((n, c) for n, c in counts if c) in raw_count_sets(model)


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def config_of_named_layouts(listed_only: bool = False) -> dict:
    """The bundled named layouts (mig-parted's default configuration) as a mig-parted file;
    ``listed_only``: without the entries naming a profile no bundled table lists."""
    listed = {name for t in tables().values() for name in t.names()}
    configs: dict[str, list] = {}
    for layout in named_layouts():
        if listed_only and not all(name in listed for name, _ in layout.counts):
            continue
        entry = {"devices": "all", "mig-enabled": True, "mig-devices": dict(layout.counts)}
        if layout.device_filter is not None:
            entry["device-filter"] = list(layout.device_filter)
        configs.setdefault(layout.config, []).append(entry)
    return {"version": "v1", "mig-configs": configs}


# ----------------------------------------------------------------------------- decoding

ENTRY = "    - devices: all\n      mig-enabled: true\n      mig-devices: {\"1g.5gb\": 2}\n"


@pytest.mark.parametrize("text, where, what", [
    ("mig-configs: {}\n", "version", "got nothing"),
    ("version: v2\nmig-configs:\n  a:\n" + ENTRY, "version", "v1"),
    ("version: v1\nmig-configs: {}\n", "mig-configs", "at least one"),
    ("version: v1\nmig-configs:\n  a: []\n", "mig-configs.a", "at least one entry"),
    ("version: v1\nextra: 1\nmig-configs:\n  a:\n" + ENTRY, "", "extra"),
    ("version: v1\nmig-configs:\n  all-balanced:\n" + ENTRY * 2 + ENTRY.replace("2}", "99}"),
     "mig-configs.all-balanced[2].mig-devices.1g.5gb", "0..8"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY.replace("2}", "-1}"), "mig-configs.a[0].mig-devices.1g.5gb", "0..8"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY.replace("2}", "0}"), "mig-configs.a[0].mig-devices", "every count is 0"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY + "      color: red\n", "mig-configs.a[0]", "color"),
    ("version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n",
     "mig-configs.a[0].mig-devices", "required"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY.replace("true", "false"), "mig-configs.a[0].mig-devices",
     "mig-enabled is false"),
    ("version: v1\nmig-configs:\n  a:\n    - mig-enabled: false\n", "mig-configs.a[0].devices", "nothing"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY.replace("all", "some"), "mig-configs.a[0].devices", "'all'"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY.replace("all", "[0, 64]"), "mig-configs.a[0].devices[1]", "0..63"),
    ("version: v1\nmig-configs:\n  a:\n" + ENTRY + "      device-filter: [\"0x20B010DE\", 3]\n",
     "mig-configs.a[0].device-filter[1]", "PCI device id"),
])
def test_decode_errors_name_file_and_path(tmp_path, text, where, what):
    path = write(tmp_path, text)
    with pytest.raises(InvalidInputError) as e:
        read_mig_parted(path)
    assert e.value.where == (f"{path}: {where}" if where else path)
    assert what in e.value.what


def test_repeated_key_is_refused_at_its_line(tmp_path):
    path = write(tmp_path, "version: v1\nmig-configs:\n  a:\n" + ENTRY + "  a:\n" + ENTRY)
    with pytest.raises(InvalidInputError) as e:
        read_mig_parted(path)
    assert e.value.where == f"{path}:7" and "duplicate" in e.value.what


def test_device_filter_string_or_list_and_devices_list(tmp_path):
    text = ("version: v1\nmig-configs:\n  a:\n" + ENTRY + "      device-filter: \"0x20B010DE\"\n"
            + ENTRY.replace("all", "[4, 5]") + "      device-filter: [\"0x20B010DE\", \"0x20F110DE\"]\n")
    (first, second) = read_mig_parted(write(tmp_path, text)).configs["a"]
    assert first.device_filter == ("0x20B010DE",) and first.devices == "all"
    assert second.device_filter == ("0x20B010DE", "0x20F110DE") and second.devices == (4, 5)
    assert second.matches_gpu(5) and not second.matches_gpu(0) and first.matches_gpu(7)


# ----------------------------------------------------------------------------- checking


def test_every_bundled_named_layout_is_valid_where_it_applies(tmp_path):
    """Every entry of mig-parted's default configuration (bundled as data/mig_layouts.json) is
    valid on each model it applies to, by placer and by the brute force. Skipped: an entry
    naming a profile the model's table lacks (GB200's entries, whose PCI id the B200 table
    lists until GB200 gets its own table)."""
    path = write(tmp_path, yaml.safe_dump(config_of_named_layouts()))
    checks = check_mig_parted(read_mig_parted(path))
    checked = 0
    for c in checks:
        if c.model is None:
            assert c.status == UNCHECKED, c
            continue
        names = set(tables()[c.model].names())
        if not all(n in names for n, _ in c.entry.counts):
            assert c.status == INVALID and "no profile" in c.reason
            continue
        assert c.status == VALID, c
        assert brute_valid(c.model, c.entry.counts), c
        checked += 1
    # the models each entry was checked on are those layouts_for names (the lead's filter rule)
    on_model = Counter((c.config, tuple(c.entry.counts), c.model) for c in checks if c.model is not None)
    expected = Counter((layout.config, layout.counts, t.model) for t in tables().values() for layout in layouts_for(t))
    assert on_model == expected
    assert checked >= len(tables())


def test_validity_agrees_with_the_brute_force_on_random_counts(tmp_path):
    rng = random.Random(34)
    configs = {}
    for k in range(150):
        model = rng.choice(sorted(RAW_MODELS))
        profiles = RAW[model]["profiles"]
        counts = {p["name"]: rng.randint(1, 4) for p in rng.sample(profiles, rng.randint(1, 3))}
        configs[f"c{k}"] = [{"device-filter": PCI[model], "devices": "all", "mig-enabled": True, "mig-devices": counts}]
    path = write(tmp_path, yaml.safe_dump({"version": "v1", "mig-configs": configs}))
    seen = Counter()
    for c in check_mig_parted(read_mig_parted(path)):
        assert c.model is not None
        assert (c.status == VALID) == brute_valid(c.model, c.entry.counts), c
        assert (c.status == VALID) == (c.reason == "")
        seen[c.status] += 1
    assert seen[VALID] and seen[INVALID]


RAW_MODELS = [m for m in RAW if not m.startswith("_")]
PCI = {m: next(i.split()[0] for i in RAW[m].get("pciDeviceIds", ()) if i.startswith("0x")) for m in RAW_MODELS
       if any(i.startswith("0x") for i in RAW[m].get("pciDeviceIds", ()))}
RAW_MODELS = [m for m in RAW_MODELS if m in PCI and not any(PCI[m] == PCI[o] for o in PCI if o != m)]


HANDMADE_EXPECTED = [
    ("all-off", 0, None, VALID, "MIG disabled"),
    ("mixed", 0, "A100-SXM4-40GB", VALID, ""),
    ("mixed", 1, "A100-SXM4-40GB", INVALID, "7 x 1g.10gb: at most 4 per GPU"),
    ("mixed", 2, "A30-24GB", INVALID, "2 media (+me) instances"),
    ("overfull", 0, "A100-SXM4-40GB", INVALID, "8 compute slices: the GPU has 7"),
    ("overfull", 1, "A100-SXM4-40GB", INVALID, "9 memory slices: the GPU has 8"),
    ("wrong-names", 0, "A100-SXM4-40GB", INVALID, "no profile 1g.12gb in A100-SXM4-40GB's table"),
    ("elsewhere", 0, None, INVALID, "device filter A100: not a PCI id"),
    ("elsewhere", 0, None, UNCHECKED, "device filter 0x12345678 names no bundled model"),
    ("elsewhere", 1, None, UNCHECKED, "no bundled table lists 1g.24gb+gfx"),
    ("elsewhere", 2, None, VALID, "no instances"),
]


def test_handmade_entries_valid_invalid_and_unchecked_with_their_reasons():
    checks = check_mig_parted(read_mig_parted(HANDMADE))
    got = [(c.config, int(c.entry.where.rsplit("[", 1)[1][:-1]), c.model, c.status, c.reason) for c in checks]
    assert len(got) == len(HANDMADE_EXPECTED)
    for found, (config, entry, model, status, reason) in zip(got, HANDMADE_EXPECTED):
        assert found[:4] == (config, entry, model, status)
        assert found[4].startswith(reason), found
    for c in checks:  # the brute force agrees wherever a model was checked
        if c.model is not None and all(n in tables()[c.model].names() for n, _ in c.entry.counts):
            assert (c.status == VALID) == brute_valid(c.model, c.entry.counts)


def test_cli_check_exit_status_like_a_linter(tmp_path, capsys):
    assert main(["import", "mig-parted", str(HANDMADE)]) == 1
    text = capsys.readouterr().out
    assert "7 x 1g.10gb: at most 4 per GPU" in text
    assert text.rstrip().splitlines()[-1] == "3 valid, 6 invalid, 2 unchecked"
    out = tmp_path / "checks.json"
    assert main(["import", "mig-parted", str(HANDMADE), "--format", "json", "-o", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert [c["status"] for c in doc["checks"]] == [e[3] for e in HANDMADE_EXPECTED]
    assert doc["checks"][2]["entry"] == "mig-configs.mixed[1]" and doc["checks"][2]["migDevices"] == {"1g.10gb": 7}
    good = write(tmp_path, yaml.safe_dump(config_of_named_layouts(listed_only=True)))
    assert main(["import", "mig-parted", good, "--format", "yaml"]) == 0
    assert all(c["status"] != INVALID for c in yaml.safe_load(capsys.readouterr().out)["checks"])
