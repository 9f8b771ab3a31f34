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
from placer.adapters.mig_parted.apply import HELD_BACK, IN_USE, RESPLIT, UNCHANGED, apply_mig_parted
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


# ----------------------------------------------------------------------------- applying

BALANCED_A100 = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}


def balanced_config(tmp_path: Path, extra: str = "") -> str:
    return write(tmp_path, (
        "version: v1\nmig-configs:\n  balanced:\n"
        "    - device-filter: [\"0x20B010DE\", \"0x20F110DE\"]\n      devices: all\n      mig-enabled: true\n"
        "      mig-devices: {\"1g.5gb\": 2, \"2g.10gb\": 1, \"3g.20gb\": 1}\n"
        "    - device-filter: \"0x233010DE\"\n      devices: [1]\n      mig-enabled: true\n"
        "      mig-devices: {\"3g.40gb\": 2}\n" + extra
        + "  whole:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {\"7g.40gb\": 1}\n"
    ), "parted.yaml")


def two_nodes() -> dict:
    """idle: two idle A100-40GB GPUs; busy: GPU 0 idle, GPU 1 with a 3g.20gb in use;
    h100: GPU 0 and 1 idle (7 x 1g.10gb each)."""
    return snapshot(
        mig_node("idle", "A100-SXM4-40GB", 2, free=[(0, "7g.40gb", 0), (1, "7g.40gb", 0)]),
        mig_node("busy", "A100-SXM4-40GB", 2, free=[(0, "7g.40gb", 0), (1, "3g.20gb", 0)], used=[(1, "3g.20gb", 4)]),
        mig_node("h100", "H100-80GB", 2, free=SEVEN_1G + [(1, "1g.10gb", s) for s in range(7)]),
    )


def gpu_counts(snap: placer.ClusterSnapshot, node: str) -> dict[int, Counter]:
    (n,) = [n for n in snap.nodes if n.name == node]
    out: dict[int, Counter] = {}
    for m in list(n.mig_instances) + [m for p in n.pods for m in p.mig]:
        out.setdefault(m.gpu, Counter())[m.profile] += 1
    return out


def test_idle_gpus_get_the_entry_and_a_pod_places_on_them(tmp_path):
    config = read_mig_parted(balanced_config(tmp_path))
    applied = apply_mig_parted(placer.ClusterSnapshot.from_dict(two_nodes()), config, "balanced", nodes=["idle", "h100"])
    assert applied.complete and applied.notes == ("h100 GPU 0: no entry of balanced names it: left",)
    assert [(g.node, g.gpu, g.status, g.entry) for g in applied.gpus] == [
        ("idle", 0, RESPLIT, "mig-configs.balanced[0]"), ("idle", 1, RESPLIT, "mig-configs.balanced[0]"),
        ("h100", 1, RESPLIT, "mig-configs.balanced[1]"),
    ]
    after = placer.ClusterSnapshot.from_dict(applied.snapshot.to_dict())  # starts, overlaps re-checked
    assert gpu_counts(after, "idle") == {0: Counter(BALANCED_A100), 1: Counter(BALANCED_A100)}
    assert gpu_counts(after, "h100") == {0: Counter({"1g.10gb": 7}), 1: Counter({"3g.40gb": 2})}
    assert gpu_counts(after, "busy") == gpu_counts(placer.ClusterSnapshot.from_dict(two_nodes()), "busy")
    for g in applied.gpus:
        assert brute_valid(g.model, g.after.counts().items())
    req = request(mig_pod("a", "3g.20gb"), mig_pod("b", "1g.5gb", count=2), mig_pod("c", "3g.40gb", count=2))
    result = placer.place(after, req)
    assert placer.check_placement(after, req, result) == []
    assert sorted(a.pod for a in result.assignments) == ["a", "b", "c"]


def test_gpu_in_use_keeps_the_run_from_changing_unless_per_node(tmp_path):
    config = read_mig_parted(balanced_config(tmp_path))
    snap = placer.ClusterSnapshot.from_dict(two_nodes())
    applied = apply_mig_parted(snap, config, "balanced")
    assert not applied.complete and applied.snapshot is snap
    assert [(g.node, g.gpu) for g in applied.in_use()] == [("busy", 1)]
    per_node = apply_mig_parted(snap, config, "balanced", per_node=True)
    assert not per_node.complete
    assert [g.status for g in per_node.gpus if g.node == "busy"] == [HELD_BACK, IN_USE]
    assert {g.status for g in applied.gpus} == {HELD_BACK, IN_USE}
    assert gpu_counts(per_node.snapshot, "busy") == gpu_counts(snap, "busy")  # busy GPU 0 left too
    assert gpu_counts(per_node.snapshot, "idle") == {0: Counter(BALANCED_A100), 1: Counter(BALANCED_A100)}


def test_gpu_with_the_counts_already_keeps_its_starts(tmp_path):
    config = read_mig_parted(balanced_config(tmp_path))
    snap = snapshot(mig_node("n", "A100-SXM4-40GB", 1, free=[(0, "3g.20gb", 4), (0, "1g.5gb", 3)],
                             used=[(0, "2g.10gb", 0), (0, "1g.5gb", 2)]))
    applied = apply_mig_parted(placer.ClusterSnapshot.from_dict(snap), config, "balanced")
    assert [g.status for g in applied.gpus] == [UNCHANGED] and applied.complete
    assert applied.snapshot.nodes[0] == placer.ClusterSnapshot.from_dict(snap).nodes[0]


def test_later_entry_wins_and_notes_what_is_not_carried_over(tmp_path):
    extra = "    - devices: [1]\n      mig-enabled: false\n"
    config = read_mig_parted(balanced_config(tmp_path, extra))
    snap = snapshot(mig_node("n", "A100-SXM4-40GB", 2, free=[(0, "7g.40gb", 0), (1, "7g.40gb", 0)]),
                    mig_node("d", "A100-SXM4-40GB", 1, mode="dynamic"),
                    {"name": "t4", "gpus": 1, "gpuModel": "Tesla-T4"},
                    {"name": "plain", "gpus": 1, "gpuModel": "A100-SXM4-40GB"})
    applied = apply_mig_parted(placer.ClusterSnapshot.from_dict(snap), config, "balanced")
    assert [(g.gpu, g.status) for g in applied.gpus] == [(0, RESPLIT)]
    assert applied.notes == (
        "n GPU 1: mig-configs.balanced[2] turns MIG off, which placer does not: left",
        "d: dynamic MIG (placer creates its instances): left",
        "t4: GPU model 'Tesla-T4' has no bundled MIG table: left",
        "plain GPU 0: mig-configs.balanced[0] turns MIG on, which placer does not: left",
    )
    assert gpu_counts(applied.snapshot, "n")[1] == Counter({"7g.40gb": 1})


def test_entry_a_gpu_cannot_hold_is_an_error_naming_it(tmp_path):
    path = write(tmp_path, "version: v1\nmig-configs:\n  big:\n    - devices: all\n      mig-enabled: true\n"
                 "      mig-devices: {\"7g.40gb\": 1, \"1g.5gb\": 1}\n")
    snap = placer.ClusterSnapshot.from_dict(two_nodes())
    with pytest.raises(InvalidInputError) as e:
        apply_mig_parted(snap, read_mig_parted(path), nodes=["idle"])
    assert e.value.where == f"{path}: mig-configs.big[0]" and "idle GPU 0" in e.value.what
    with pytest.raises(InvalidInputError) as e:
        apply_mig_parted(snap, read_mig_parted(path), nodes=["nowhere"])
    assert e.value.where == "--nodes"
    with pytest.raises(InvalidInputError) as e:
        apply_mig_parted(snap, read_mig_parted(balanced_config(tmp_path)))
    assert e.value.where == "--config" and "balanced, whole" in e.value.what


def test_cli_apply_writes_all_or_nothing(tmp_path, capsys):
    snap = tmp_path / "cluster.json"
    snap.write_text(json.dumps(two_nodes()))
    config, out = balanced_config(tmp_path), tmp_path / "after.json"
    args = ["import", "mig-parted", config, "--snapshot", str(snap), "--config", "balanced", "-o", str(out)]
    assert main(args) == 1 and not out.exists()
    err = capsys.readouterr().err
    assert "busy GPU 1" in err and "nothing written" in err
    assert main(args + ["--per-node", "--format", "yaml"]) == 0
    after = placer.ClusterSnapshot.from_dict(yaml.safe_load(out.read_text()))
    assert gpu_counts(after, "idle")[1] == Counter(BALANCED_A100)
    assert "re-split 3 GPU(s) on 2 node(s)" in capsys.readouterr().err
    assert main(args + ["--nodes", "idle,h100", "--strict"]) == 2  # a note: h100 GPU 0 has no entry
    assert main(args + ["--nodes", "idle", "--strict"]) == 0
    assert main(["import", "mig-parted", config, "--config", "balanced"]) == 2
    assert main(args + ["--format", "text"]) == 2


def test_round_trip_with_explain(tmp_path):
    """explain's mig-parted configuration is valid when read back, and applying it gives the
    instances explain proposed (per GPU and profile: mig-parted applies counts)."""
    snap = snapshot(
        mig_node("n1", "H100-80GB", 3, free=SEVEN_1G + [(1, "1g.10gb", 0)] + [(2, "1g.10gb", s) for s in range(7)],
                 used=[(1, "1g.10gb", 3)]),
        mig_node("n2", "A100-SXM4-40GB", 2, free=[(0, "1g.5gb", s) for s in range(7)] + [(1, "7g.40gb", 0)]),
    )
    req = request(mig_pod("p", "3g.40gb"), mig_pod("q", "3g.40gb"), mig_pod("r", "2g.10gb", count=2))
    cluster = placer.Cluster(snap)
    cluster.schedule(placer.load_request(req))
    base = cluster.to_snapshot()
    plan = explain(snap, req).relayout
    assert {g.node for g in plan.gpus} == {"n1", "n2"}
    path = write(tmp_path, render_mig_parted(plan), "explain.yaml")
    config = read_mig_parted(path)
    assert {c.status for c in check_mig_parted(config)} == {VALID}
    proposed = relayout_snapshot(base, plan)
    now = base
    for name in config.configs:
        node = name[len("placer-"):]
        applied = apply_mig_parted(now, config, name, nodes=[node])
        assert applied.complete and {g.status for g in applied.gpus} == {RESPLIT}
        now = applied.snapshot
    now = placer.ClusterSnapshot.from_dict(now.to_dict())
    for node in ("n1", "n2"):
        assert gpu_counts(now, node) == gpu_counts(proposed, node)
    planned = request(*[p for p in req["pods"] if p["name"] not in plan.unplanned])
    result = placer.place(now, planned)
    assert placer.check_placement(now, planned, result) == []
    assert {a.pod for a in result.assignments} == {p["name"] for p in planned["pods"]}


def test_json_file_reads_as_its_yaml_and_errors_name_the_path(tmp_path):
    doc = yaml.safe_load(HANDMADE.read_text())
    as_json = write(tmp_path, json.dumps(doc), "config.json")
    statuses = [(c.config, c.model, c.status, c.reason) for c in check_mig_parted(read_mig_parted(as_json))]
    assert statuses == [(c.config, c.model, c.status, c.reason) for c in check_mig_parted(read_mig_parted(HANDMADE))]
    doc["mig-configs"]["mixed"][1]["mig-devices"]["1g.10gb"] = 10**30
    with pytest.raises(InvalidInputError) as e:
        read_mig_parted(write(tmp_path, json.dumps(doc), "huge.json"))
    assert e.value.where.endswith("huge.json: mig-configs.mixed[1].mig-devices.1g.10gb")
