"""MIG in explain and report: per-GPU causes, re-layout plans of idle static GPUs, the
``nvidia-mig-parted`` output, and what still fits per profile.

Layouts are checked independently of placer's enumeration: against a backtracking over
the bundled table's raw placements written here, by decoding re-split snapshots through
the schema (which re-checks starts, overlaps and media units), and by placing the
pending pods on them under ``check_placement``.
"""
from __future__ import annotations

import json
import math
import random

import pytest
import yaml
from hypothesis import example, given, strategies as st

import placer
from placer.cli import main
from placer.diagnostics.explain import explain
from placer.mig.plans import layout_table, mig_capacity, plan_relayout, relayout_snapshot, render_mig_parted
from placer.model.mig_profiles import tables
from placer.diagnostics.report import cluster_report
from test_mig import RAW, mig_pod, raw_mask, raw_profile, request, snapshot


def inst(gpu: int, profile: str, start: int) -> dict:
    return {"gpu": gpu, "profile": profile, "start": start}


def mig_node(name: str, model: str, gpus: int, free=(), used=(), mode: str = "static", cpu: int = 64000) -> dict:
    """A node whose GPUs are all in MIG mode: ``free`` instances and ``used`` ones (one pod each)."""
    return {
        "name": name, "gpus": gpus, "gpuModel": model, "cpuMilli": cpu,
        "mig": {"gpus": "all", "mode": mode},
        "migInstances": [inst(*i) for i in free],
        "pods": [{"name": f"{name}-run{k}", "mig": [inst(*i)]} for k, i in enumerate(used)],
    }


SEVEN_1G = [(0, "1g.10gb", s) for s in range(7)]


def fragmented_static() -> dict:
    """n1: GPU 0 idle with 7 free 1g.10gb; GPU 1 with one 1g.10gb in use and 6 free."""
    return snapshot(mig_node(
        "n1", "H100-80GB", 2, free=SEVEN_1G + [(1, "1g.10gb", s) for s in range(7) if s != 2],
        used=[(1, "1g.10gb", 2)],
    ))


def in_use_gpus(snap: dict) -> set[tuple[str, int]]:
    return {(n["name"], m["gpu"]) for n in snap["nodes"] for p in n.get("pods", ()) for m in p.get("mig", ())}


def assert_plan_places(snap: dict, req: dict, plan) -> placer.PlacementResult:
    """The re-split snapshot decodes (starts, overlaps, media re-checked) and places every
    planned pod, checked independently."""
    cluster = placer.Cluster(snap)
    cluster.schedule(placer.load_request(req))
    after = placer.ClusterSnapshot.from_dict(relayout_snapshot(cluster.to_snapshot(), plan).to_dict())
    planned = [p for p in req["pods"] if p["name"] not in plan.unplanned]
    again = request(*planned, policy=req.get("policy", "fgd"))
    result = placer.place(after, again)
    assert placer.check_placement(after, again, result) == []
    assert {a.pod for a in result.assignments} == {p["name"] for p in planned}
    return result


# ----------------------------------------------------------------------------- layouts


def raw_layouts(model: str) -> set[tuple[tuple[str, int], ...]]:
    """Every set of raw placements that fit together: backtracking over (profile, start)."""
    raw = RAW[model]
    places = [(p["name"], pl["start"], p) for p in raw["profiles"] for pl in p["placements"]]
    found = set()

    def go(i: int, chosen: list, busy: int, media: bool, compute: int, counts: dict) -> None:
        if i == len(places):
            found.add(tuple(sorted(((n, s) for n, s in chosen), key=lambda x: (x[1], x[0]))))
            return
        go(i + 1, chosen, busy, media, compute, counts)
        name, start, p = places[i]
        mask = raw_mask(model, name, start)
        me = bool(p.get("mediaExtensions"))
        if (mask & busy or (me and media) or counts.get(name, 0) >= p["maxCount"]
                or compute + p["computeSlices"] > raw["computeSlicesTotal"]):
            return
        counts[name] = counts.get(name, 0) + 1
        go(i + 1, chosen + [(name, start)], busy | mask, media or me, compute + p["computeSlices"], counts)
        counts[name] -= 1

    go(0, [], 0, False, 0, {})
    return found


@pytest.mark.parametrize("model", ["A30-24GB", "H100-80GB", "A100-SXM4-40GB"])
def test_every_layout_is_enumerated_once(model):
    lt = layout_table(tables()[model])
    mine = [lt.layout(k).instances for k in range(len(lt.layouts))]
    assert len(mine) == len(set(mine))
    assert set(mine) == raw_layouts(model)


def test_layouts_decode_as_static_gpus():
    lt = layout_table(tables()["H100-80GB"])
    rng = random.Random(7)
    for k in rng.sample(range(len(lt.layouts)), 60):
        free = [(0, name, start) for name, start in lt.layout(k).instances]
        node = placer.ClusterSnapshot.from_dict(snapshot(mig_node("n", "H100-80GB", 1, free=free))).nodes[0]
        assert sorted((i.gpu, i.profile, i.start) for i in node.mig_instances) == sorted(free)


# ----------------------------------------------------------------------------- re-layout plans


def test_idle_gpu_is_resplit_keeping_most_of_its_instances():
    snap = fragmented_static()
    req = request(mig_pod("p", "3g.40gb"))
    result = explain(snap, req)
    plan = result.relayout
    assert [(g.node, g.gpu) for g in plan.gpus] == [("n1", 0)]
    after = plan.gpus[0].after
    assert after.counts() == {"1g.10gb": 4, "3g.40gb": 1}  # keeps 4 of the 7 1g.10gb
    assert ("3g.40gb", 4) in after.instances
    assert plan.gpus[0].before.counts() == {"1g.10gb": 7}
    assert plan.gpus[0].pods == ("p",)
    placed = assert_plan_places(snap, req, plan)
    assert [(u.gpu, u.profile) for u in placed.assignments[0].mig] == [(0, "3g.40gb")]


def test_two_pending_pods_share_one_resplit_gpu():
    snap = fragmented_static()
    req = request(mig_pod("p", "3g.40gb"), mig_pod("q", "3g.40gb"))
    plan = explain(snap, req).relayout
    assert [(g.gpu, g.after.instances, g.pods) for g in plan.gpus] == [
        (0, (("3g.40gb", 0), ("3g.40gb", 4)), ("p", "q"))
    ]
    assert_plan_places(snap, req, plan)


def test_gpu_with_an_instance_in_use_is_never_resplit():
    snap = snapshot(mig_node("n1", "H100-80GB", 1, free=[(0, "1g.10gb", s) for s in range(1, 7)],
                             used=[(0, "1g.10gb", 0)]))
    result = explain(snap, request(mig_pod("p", "3g.40gb")))
    assert result.relayout.gpus == () and result.relayout.unplanned == ("p",)
    (pending,) = result.pending
    assert pending.relayout == ()
    assert pending.mig_gpus == (
        "node n1 GPU 0 (static): no free 3g.40gb instance (free: 6 x 1g.10gb); in use by n1-run0: never re-split",
    )
    assert "no idle GPU a re-split would give it" in pending.detail


def test_plan_prefers_the_node_changing_fewest_gpus():
    # a: two idle GPUs, each holds one 4g; b: one free 4g instance and one idle GPU
    a = mig_node("a", "H100-80GB", 2, free=[(0, "7g.80gb", 0), (1, "7g.80gb", 0)])
    b = mig_node("b", "H100-80GB", 2, free=[(0, "4g.40gb", 0), (1, "7g.80gb", 0)])
    snap = snapshot(a, b)
    req = request(mig_pod("p", "4g.40gb", count=2))
    plan = explain(snap, req).relayout
    assert [(g.node, g.gpu) for g in plan.gpus] == [("b", 1)]
    result = assert_plan_places(snap, req, plan)
    assert result.assignments[0].node == "b"


def test_planning_changes_nothing_in_the_session():
    cluster = placer.Cluster(fragmented_static())
    state = cluster.session.mig
    before = (state.busy.copy(), state.free_of.copy(), state.in_use.copy())
    pods = placer.load_request(request(mig_pod("p", "3g.40gb"), mig_pod("q", "7g.80gb"))).pods
    plan = plan_relayout(cluster.session, pods)
    assert [g.pods for g in plan.gpus] == [("p",)] and plan.unplanned == ("q",)  # one idle GPU only
    assert all((a == b).all() for a, b in zip(before, (state.busy, state.free_of, state.in_use)))


def test_dynamic_gpus_are_not_planned():
    snap = snapshot(mig_node("n", "H100-80GB", 1, used=[(0, "1g.10gb", 1), (0, "1g.10gb", 4), (0, "1g.10gb", 5)],
                             mode="dynamic"))
    plan = explain(snap, request(mig_pod("p", "3g.40gb"))).relayout
    assert plan.gpus == () and plan.unplanned == ("p",)


def random_static_cluster(rng: random.Random, n_nodes: int) -> dict:
    """Static H100 and A100-40GB nodes with random layouts (placed by raw masks), some
    instances in use."""
    nodes = []
    for i in range(n_nodes):
        model = rng.choice(["H100-80GB", "A100-SXM4-40GB"])
        gpus = rng.randint(1, 3)
        free, used = [], []
        for g in range(gpus):
            busy, media = 0, False
            places = [(p["name"], pl["start"]) for p in RAW[model]["profiles"] for pl in p["placements"]]
            rng.shuffle(places)
            for name, start in places[: rng.randint(0, 8)]:
                mask = raw_mask(model, name, start)
                me = name.endswith("+me")
                if mask & busy or (me and media):
                    continue
                busy |= mask
                media = media or me
                (used if rng.random() < 0.15 else free).append((g, name, start))
        nodes.append(mig_node(f"n{i}", model, gpus, free=free, used=used))
    return snapshot(*nodes)


@given(seed=st.integers(0, 10**6), n_nodes=st.integers(1, 4))
@example(seed=177, n_nodes=3)  # fewest re-splits put p0 where placer would not: placer took p1's instances
def test_random_plans_place_what_they_plan_and_touch_no_gpu_in_use(seed, n_nodes):
    rng = random.Random(seed)
    snap = random_static_cluster(rng, n_nodes)
    names = ["1g.5gb", "3g.20gb", "4g.20gb", "7g.40gb", "1g.10gb", "3g.40gb", "4g.40gb", "2g.20gb"]
    pods = [mig_pod(f"p{k}", rng.choice(names), count=rng.choice([1, 1, 2])) for k in range(rng.randint(1, 4))]
    req = request(*pods)
    result = explain(snap, req)
    plan = result.relayout
    pending = {u.pod for u in result.result.unschedulable}
    assert set(plan.unplanned) <= pending
    busy = in_use_gpus(snap)
    assert not {(g.node, g.gpu) for g in plan.gpus} & busy
    for g in plan.gpus:
        assert g.pods and set(g.pods) <= pending
    # pending pods alone on the state placer leaves, planned ones placed on the re-split GPUs
    left = request(*[p for p in pods if p["name"] in pending])
    cluster = placer.Cluster(snap)
    cluster.schedule(placer.load_request(req))
    base = cluster.to_snapshot().to_dict()
    if plan.gpus:
        assert_plan_places(base, left, plan)
    # one pending pod: unplanned only when no node could hold it, its idle GPUs re-split
    if len(pods) == 1 and pods[0]["name"] in plan.unplanned:
        profile, count = pods[0]["mig"]["profile"], pods[0]["mig"]["count"]
        for n in snap["nodes"]:
            model = n["gpuModel"]
            if not any(p["name"] == profile for p in RAW[model]["profiles"]):
                continue
            raw = raw_profile(model, profile)
            per_gpu = min(raw["maxCount"], _most_disjoint([raw_mask(model, profile, pl["start"])
                                                          for pl in raw["placements"]], 0))
            in_use = {m["gpu"] for p in n["pods"] for m in p["mig"]}
            free = [m["gpu"] for m in n["migInstances"] if m["profile"] == profile]
            most = sum(per_gpu if g not in in_use else 0 for g in range(n["gpus"]))
            most += sum(1 for g in free if g in in_use)
            assert most < count, (n["name"], most)


# ----------------------------------------------------------------------------- mig-parted


def check_mig_parted(doc: dict) -> None:
    """The rules nvidia-mig-parted's v1 spec reader enforces."""
    assert doc["version"] == "v1"
    assert set(doc) <= {"version", "mig-configs"}
    for name, entries in doc.get("mig-configs", {}).items():
        assert entries, name
        for e in entries:
            assert set(e) == {"devices", "mig-enabled", "mig-devices"}
            assert e["devices"] == "all" or all(isinstance(d, int) for d in e["devices"])
            assert e["mig-enabled"] is True and e["mig-devices"]
            assert all(isinstance(v, int) and v > 0 for v in e["mig-devices"].values())


def test_mig_parted_lists_only_the_gpus_to_change():
    snap = snapshot(
        mig_node("n1", "H100-80GB", 3, free=SEVEN_1G + [(1, g, s) for g, s in [("1g.10gb", 0)]]
                 + [(2, "1g.10gb", s) for s in range(7)], used=[(1, "1g.10gb", 3)]),
    )
    req = request(mig_pod("p", "3g.40gb"), mig_pod("q", "3g.40gb"), mig_pod("r", "3g.40gb"))
    plan = explain(snap, req).relayout
    doc = yaml.safe_load(render_mig_parted(plan))
    check_mig_parted(doc)
    (entries,) = doc["mig-configs"].values()
    assert list(doc["mig-configs"]) == ["placer-n1"]
    devices = sorted(d for e in entries for d in e["devices"])
    assert devices == sorted(g.gpu for g in plan.gpus) and 1 not in devices
    counts = {d: e["mig-devices"] for e in entries for d in e["devices"]}
    assert counts == {g.gpu: g.after.counts() for g in plan.gpus}
    assert sum(c.get("3g.40gb", 0) for c in counts.values()) >= 3
    assert_plan_places(snap, req, plan)


def test_mig_parted_without_changes_is_a_bare_v1_document():
    snap = snapshot(mig_node("n1", "H100-80GB", 1, free=[(0, "3g.40gb", 0)]))
    result = explain(snap, request(mig_pod("p", "3g.40gb")))
    doc = yaml.safe_load(render_mig_parted(result.relayout))
    assert doc == {"version": "v1"}


def test_cli_explain_writes_mig_parted(tmp_path, capsys):
    snap, req = tmp_path / "s.json", tmp_path / "r.json"
    snap.write_text(json.dumps(fragmented_static()))
    req.write_text(json.dumps(request(mig_pod("p", "3g.40gb"))))
    out = tmp_path / "mig.yaml"
    assert main(["explain", str(snap), str(req), "--format", "mig-parted", "-o", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    check_mig_parted(doc)
    assert doc["mig-configs"] == {
        "placer-n1": [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 4, "3g.40gb": 1}}]
    }
    assert main(["explain", str(snap), str(req)]) == 0
    text = capsys.readouterr().out
    assert "re-split: n1 GPU 0 (idle, now [1g.10gb@0" in text
    assert "to [1g.10gb@0, 1g.10gb@1, 1g.10gb@2, 1g.10gb@3, 3g.40gb@4]" in text
    assert main(["explain", str(snap), str(req), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["relayout"]["gpus"][0]["migDevices"] == {"1g.10gb": 4, "3g.40gb": 1}
    assert doc["pending"][0]["relayout"][0]["gpu"] == 0


# ----------------------------------------------------------------------------- explain causes


def test_dynamic_fragmentation_names_gpu_slices_and_compute():
    snap = snapshot(mig_node("n3", "H100-80GB", 3, mode="dynamic",
                             used=[(g, "7g.80gb", 0) for g in (0, 1)]
                             + [(2, "1g.10gb", 1), (2, "1g.10gb", 4), (2, "1g.10gb", 5)]))
    (p,) = explain(snap, request(mig_pod("p", "3g.40gb"))).pending
    note = "node n3 GPU 2: 5 free slices and 4 free compute units, but no valid start for 3g.40gb"
    assert p.cause == "fragmentation"
    assert p.mig_gpus[0] == note and p.detail.endswith(note)
    assert p.detail.startswith("5 free slice(s) and 4 free compute unit(s) on 3 MIG GPU(s) of 1 eligible node(s)")
    assert p.node_reasons == {"Insufficient nvidia.com/mig-3g.40gb": 1}


def test_static_fragmentation_names_the_idle_gpu_and_layout():
    (p,) = explain(fragmented_static(), request(mig_pod("p", "3g.40gb"))).pending
    assert p.cause == "fragmentation"
    assert ("static GPU(s): no free 3g.40gb instance; an idle GPU n1/0 could be re-split to "
            "[1g.10gb@0, 1g.10gb@1, 1g.10gb@2, 1g.10gb@3, 3g.40gb@4]") in p.detail
    assert p.mig_gpus[0] == ("node n1 GPU 0 (static): no free 3g.40gb instance (free: 7 x 1g.10gb); "
                             "idle: a re-split would hold 2 x 3g.40gb")


def test_capacity_when_free_slices_fall_short():
    snap = snapshot(mig_node("n", "H100-80GB", 1, mode="dynamic", used=[(0, "4g.40gb", 0), (0, "2g.20gb", 4)]))
    (p,) = explain(snap, request(mig_pod("p", "3g.40gb"))).pending
    assert p.cause == "capacity"
    assert p.detail == ("not enough free on 1 MIG GPU(s) of 1 eligible node(s): short 2 slice(s) (2 free of 4), "
                        "2 compute unit(s) (1 free of 3)")
    assert p.mig_gpus == ("node n GPU 0: 2 free slice(s) and 1 free compute unit(s), 3g.40gb needs 4 and 3",)


def test_no_gpu_in_mig_mode_names_models_without_a_table():
    snap = snapshot({"name": "t4", "gpus": 2, "gpuModel": "Tesla-T4"},
                    {"name": "a", "gpus": 8, "gpuModel": "NVIDIA-A100-SXM4-80GB"})
    (p,) = explain(snap, request(mig_pod("p", "3g.40gb"))).pending
    assert p.cause == "registration"
    assert p.detail == ("no node has a GPU in MIG mode; the cluster's GPUs: 2 x Tesla-T4 (GPU model Tesla-T4 has no "
                        "MIG profile table), 8 x NVIDIA-A100-SXM4-80GB (MIG-capable; not in MIG mode or unhealthy)")


def test_profile_no_model_has_is_registration():
    snap = snapshot(mig_node("n", "A100-SXM4-40GB", 1))
    (p,) = explain(snap, request(mig_pod("p", "3g.40gb"))).pending
    assert p.cause == "registration"
    assert p.detail.startswith("no GPU model in MIG mode has profile 3g.40gb: A100-SXM4-40GB has 1g.5gb, ")


def test_too_large_counts_and_memory():
    snap = snapshot(mig_node("n", "H100-80GB", 2, free=[(0, "7g.80gb", 0)]))
    (p,) = explain(snap, request(mig_pod("p", "7g.80gb", count=3))).pending
    assert p.cause == "too large"
    assert p.detail == "3 x 7g.80gb asked on one node; the most one node's MIG GPUs hold even empty is 2 (n)"
    (q,) = explain(snap, request({"name": "q", "mig": {"memoryMiB": 200000}})).pending
    assert q.cause == "too large" and q.detail.startswith("no MIG profile holds 200000 MiB: the largest is 7g.80gb")


def test_filters_when_every_mig_node_is_cordoned():
    node = mig_node("n", "H100-80GB", 1, free=[(0, "7g.80gb", 0)])
    node["unschedulable"] = True
    (p,) = explain(snapshot(node), request(mig_pod("p", "3g.40gb"))).pending
    assert p.cause == "filters" and "unschedulable" in p.detail


def test_whole_gpu_explanations_are_unchanged_beside_mig():
    snap = snapshot(mig_node("m", "H100-80GB", 1), {"name": "w", "gpus": 2, "gpuModel": "H100-80GB"})
    (p,) = explain(snap, request({"name": "big", "gpus": 4})).pending
    assert p.cause == "too large" and p.mig_gpus == () and p.relayout == ()


# ----------------------------------------------------------------------------- report


def test_report_counts_per_profile_now_and_if_resplit():
    snap = snapshot(
        mig_node("s", "H100-80GB", 2, free=SEVEN_1G + [(1, "1g.10gb", s) for s in range(1, 7)],
                 used=[(1, "1g.10gb", 0)]),
        mig_node("d", "A100-80GB", 1, mode="dynamic", used=[(0, "3g.40gb", 4)]),
    )
    report = cluster_report(placer.ClusterSnapshot.from_dict(snap))
    h100, a100 = report.mig
    assert (h100.model, h100.gpus, h100.static_gpus, h100.idle_static_gpus) == ("H100-80GB", 2, 2, 1)
    assert h100.free_slices == 15 and a100.free_slices == 4
    rows = {p.profile: (p.now, p.static, p.dynamic, p.if_resplit) for p in h100.profiles}
    assert rows["1g.10gb"] == (13, 13, 0, 13)
    assert rows["3g.40gb"] == (0, 0, 0, 2)  # only the idle GPU, re-split into two 3g
    assert rows["7g.80gb"] == (0, 0, 0, 1)
    assert rows["1g.10gb+me"] == (0, 0, 0, 1)
    rows = {p.profile: (p.now, p.static, p.dynamic, p.if_resplit) for p in a100.profiles}
    assert rows["1g.10gb"] == (4, 0, 4, 4)  # slices 0-3 free: four 1g
    assert rows["3g.40gb"] == (1, 0, 1, 1)
    assert rows["4g.40gb"] == (1, 0, 1, 1)
    assert rows["7g.80gb"] == (0, 0, 0, 0)
    assert h100.placements_confirmed and not a100.placements_confirmed
    text = report.to_text()
    assert "starts inferred, not read from nvidia-smi" in text.split("A100-80GB")[1]
    assert "starts inferred" not in text.split("A100-80GB")[0]
    assert "15 of 16 slices free (no instance in use), 13 usable by the largest profile that fits (1g.10gb)" in text
    doc = report.to_dict()["mig"]
    assert doc[0]["idleStaticGpus"] == 1 and doc[1]["placementsConfirmed"] is False
    assert {p["profile"]: p["ifResplit"] for p in doc[0]["profiles"]}["3g.40gb"] == 2
    assert {p["profile"]: p["slicesUsable"] for p in doc[1]["profiles"]}["4g.40gb"] == 4


def test_report_has_no_mig_section_without_mig_gpus():
    report = cluster_report(placer.ClusterSnapshot.from_dict(snapshot({"name": "w", "gpus": 2})))
    assert report.mig == () and "MIG" not in report.to_text() and report.to_dict()["mig"] == []


def test_report_dynamic_counts_match_a_brute_force():
    rng = random.Random(3)
    for _ in range(30):
        used, busy = [], 0
        for name, start in rng.sample([(p["name"], pl["start"]) for p in RAW["H100-80GB"]["profiles"]
                                       if not p.get("mediaExtensions") for pl in p["placements"]], 4):
            mask = raw_mask("H100-80GB", name, start)
            if not mask & busy:
                busy |= mask
                used.append((0, name, start))
        snap = placer.ClusterSnapshot.from_dict(snapshot(mig_node("d", "H100-80GB", 1, mode="dynamic", used=used)))
        (model,) = mig_capacity(placer.Cluster(snap).session.mig)
        for p in model.profiles:
            if p.profile.endswith("+me"):
                continue
            raw = raw_profile("H100-80GB", p.profile)
            best = _most_disjoint([raw_mask("H100-80GB", p.profile, pl["start"]) for pl in raw["placements"]], busy)
            assert p.dynamic == min(best, raw["maxCount"]), (used, p.profile)


def _most_disjoint(masks: list[int], busy: int) -> int:
    """Most pairwise disjoint masks avoiding ``busy``, by trying every subset."""
    best = 0
    for bits in range(1 << len(masks)):
        chosen = [m for k, m in enumerate(masks) if bits >> k & 1]
        union = 0
        ok = True
        for m in chosen:
            if m & (union | busy):
                ok = False
                break
            union |= m
        if ok:
            best = max(best, len(chosen))
    return best


def test_cli_report_json_has_mig(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(fragmented_static()))
    assert main(["report", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mig"][0]["gpuModel"] == "H100-80GB" and doc["mig"][0]["largestFitting"] == "1g.10gb"
    assert math.isclose(doc["mig"][0]["freeSlices"], 15)


def test_readme_mig_explain_report_and_mig_parted_are_what_placer_prints():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    snap = snapshot(mig_node("n1", "H100-80GB", 2, free=SEVEN_1G + [(1, "1g.10gb", s) for s in range(7) if s != 2]))
    snap["nodes"][0]["pods"] = [{"name": "team-a/infer", "mig": [inst(1, "1g.10gb", 2)]}]
    req = request(mig_pod("team-b/train", "3g.40gb"))
    result = explain(snap, req)
    shown = [line.strip() for line in readme.splitlines()]
    for line in result.pending[0].to_text().splitlines()[:4]:
        assert line.strip() in shown, line
    body = render_mig_parted(result.relayout).split("version: v1", 1)[1]
    assert "version: v1" + body.replace("\n", "\n  ").rstrip() in readme
    report = cluster_report(placer.ClusterSnapshot.from_dict(snap)).to_text().splitlines()
    start = next(k for k, line in enumerate(report) if line.startswith("  H100-80GB"))
    for line in report[start:start + 4]:
        assert line.strip() in shown, line
