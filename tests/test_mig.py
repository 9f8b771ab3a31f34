"""MIG instances: profiles, valid starts, static and dynamic layouts, the choice of start.

Fits are checked against a brute force written here from the bundled table's raw JSON
(start + size per placement), not from placer's slice tables.
"""
from __future__ import annotations

import json
from importlib import resources

import pytest
from hypothesis import given, strategies as st

import placer
from placer.exceptions import InvalidInputError
from placer.model.mig_profiles import model_key, table_for, tables

RAW = json.loads((resources.files("placer") / "data" / "mig_profiles.json").read_text())
POLICIES = ("first-fit", "best-fit", "fgd")


def raw_profile(model: str, name: str) -> dict:
    return next(p for p in RAW[model]["profiles"] if p["name"] == name)


def raw_mask(model: str, name: str, start: int) -> int:
    size = raw_profile(model, name)["memorySlices"]
    return ((1 << size) - 1) << start


def node(name: str, model: str, instances=(), mode: str = "dynamic", gpus: int = 1, free=()) -> dict:
    return {
        "name": name, "gpus": gpus, "gpuModel": model, "cpuMilli": 64000,
        "mig": {"gpus": "all", "mode": mode},
        "migInstances": [{"gpu": g, "profile": p, "start": s} for g, p, s in free],
        "pods": [
            {"name": f"{name}-run{k}", "mig": [{"gpu": g, "profile": p, "start": s}]}
            for k, (g, p, s) in enumerate(instances)
        ],
    }


def snapshot(*nodes: dict) -> dict:
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": list(nodes)}


def request(*pods: dict, policy: str = "fgd") -> dict:
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": policy, "pods": list(pods)}


def mig_pod(name: str, profile: str, count: int = 1) -> dict:
    return {"name": name, "mig": {"profile": profile, "count": count}}


def place_checked(snap: dict, req: dict) -> placer.PlacementResult:
    result = placer.place(snap, req)
    assert placer.check_placement(snap, req, result) == []
    return result


def starts_of(result, pod: str) -> list[int] | None:
    for a in result.assignments:
        if a.pod == pod:
            return [u.start for u in a.mig]
    return None


# ----------------------------------------------------------------------------- the cases


@pytest.mark.parametrize("policy", POLICIES)
def test_a100_40gb_3g_fits_only_at_4_and_4g_not_at_all(policy):
    snap = snapshot(node("n", "A100-SXM4-40GB", [(0, "1g.5gb", 0), (0, "1g.5gb", 2)]))
    result = place_checked(snap, request(mig_pod("p", "3g.20gb"), policy=policy))
    assert starts_of(result, "p") == [4]
    result = place_checked(snap, request(mig_pod("q", "4g.20gb"), policy=policy))
    assert starts_of(result, "q") is None
    assert "Insufficient nvidia.com/mig-4g.20gb" in result.unschedulable[0].reason


@pytest.mark.parametrize("policy", POLICIES)
def test_h100_five_free_slices_but_no_start_for_3g_or_4g(policy):
    snap = snapshot(node("n", "H100-80GB", [(0, "1g.10gb", 0), (0, "1g.10gb", 1), (0, "1g.10gb", 5)]))
    for profile in ("3g.40gb", "4g.40gb"):
        result = place_checked(snap, request(mig_pod("p", profile), policy=policy))
        assert not result.assignments
    result = place_checked(snap, request(mig_pod("p", "2g.20gb"), policy=policy))
    assert starts_of(result, "p") == [2]


@pytest.mark.parametrize("policy", POLICIES)
def test_a100_80gb_1g_20gb_at_6_leaves_3g_and_4g_at_0_only(policy):
    snap = snapshot(node("n", "A100-80GB", [(0, "1g.20gb", 6)]))
    for profile in ("3g.40gb", "4g.40gb"):
        assert starts_of(place_checked(snap, request(mig_pod("p", profile), policy=policy)), "p") == [0]


@pytest.mark.parametrize("policy", POLICIES)
def test_seven_1g_fill_the_gpu(policy):
    snap = snapshot(node("n", "A100-SXM4-40GB", [(0, "1g.5gb", s) for s in range(7)]))
    for p in RAW["A100-SXM4-40GB"]["profiles"]:
        result = place_checked(snap, request(mig_pod("p", p["name"]), policy=policy))
        assert not result.assignments, p["name"]


def test_aware_choice_keeps_4g_placeable_first_fit_does_not():
    snap = snapshot(node("n", "A100-SXM4-40GB"))
    both = request(mig_pod("small", "1g.5gb"), mig_pod("big", "4g.20gb"))
    result = place_checked(snap, both)
    assert starts_of(result, "small")[0] in (4, 5, 6)
    assert starts_of(result, "big") == [0]
    first = place_checked(snap, {**both, "policy": "first-fit"})
    assert starts_of(first, "small") == [0]
    assert starts_of(first, "big") is None


# ----------------------------------------------------------------------------- static and dynamic


def test_static_uses_existing_free_instances_only():
    snap = snapshot(node("n", "A100-SXM4-40GB", mode="static", free=[(0, "1g.5gb", 3), (0, "2g.10gb", 4)]))
    result = place_checked(snap, request(mig_pod("a", "1g.5gb"), mig_pod("b", "1g.5gb"), mig_pod("c", "2g.10gb")))
    got = {a.pod: a.mig for a in result.assignments}
    assert [(u.start, u.create) for u in got["a"]] == [(3, False)]
    assert [(u.start, u.create) for u in got["c"]] == [(4, False)]
    assert "b" not in got  # slices 0-2 are free, but a static GPU creates nothing


def test_dynamic_takes_a_free_instance_before_creating_one():
    snap = snapshot(node("n", "A100-SXM4-40GB", free=[(0, "1g.5gb", 5)]))
    result = place_checked(snap, request(mig_pod("a", "1g.5gb"), mig_pod("b", "1g.5gb")))
    got = {a.pod: [(u.start, u.create) for u in a.mig] for a in result.assignments}
    assert got["a"] == [(5, False)]
    assert got["b"][0][1] is True


def test_count_puts_every_instance_on_one_node_and_media_once_per_gpu():
    snap = snapshot(node("n", "A100-SXM4-40GB", gpus=2))
    result = place_checked(snap, request(mig_pod("m", "1g.5gb+me", count=2), mig_pod("x", "1g.5gb+me")))
    (a,) = result.assignments
    assert sorted(u.gpu for u in a.mig) == [0, 1]
    assert [u.pod for u in result.unschedulable] == ["x"]


def test_memory_request_takes_the_smallest_profile_that_holds_it():
    snap = snapshot(node("a", "A100-SXM4-40GB"), node("h", "H100-80GB"))
    result = place_checked(snap, request({"name": "p", "mig": {"memoryMiB": 9000}}, policy="first-fit"))
    (a,) = result.assignments
    assert a.node == "a" and a.mig[0].profile == "1g.10gb"  # 2 slices on A100-40GB
    result = place_checked(snap, request({"name": "p", "mig": {"memoryMiB": 9000}, "nodeSelector": {}}, policy="first-fit"))
    h = placer.place(snapshot(node("h", "H100-80GB")), request({"name": "p", "mig": {"memoryMiB": 9000}}))
    assert h.assignments[0].mig[0].profile == "1g.10gb"  # 1 slice on H100-80GB


def test_mig_gpus_are_not_whole_gpus_and_whole_pods_use_the_others():
    snap = snapshot({**node("n", "A100-SXM4-40GB", gpus=4), "mig": {"gpus": [0, 1], "mode": "dynamic"}})
    result = place_checked(snap, request({"name": "w", "gpus": 2}, {"name": "v", "gpus": 1}))
    assert sorted(result.assignments[0].gpus) == [2, 3]
    assert [u.pod for u in result.unschedulable] == ["v"]


def test_bind_release_and_snapshot_round_trip():
    cluster = placer.Cluster(snapshot(node("n", "A100-SXM4-40GB", free=[(0, "1g.5gb", 6)])))
    decided = cluster.place([mig_pod("a", "3g.20gb"), mig_pod("b", "1g.5gb")])
    cluster.bind(decided)
    snap = cluster.to_snapshot()
    again = placer.ClusterSnapshot.from_dict(snap.to_dict())  # the schema re-checks every overlap
    used = {p.name: p.mig for p in again.nodes[0].pods}
    assert used["b"][0].start == 6 and used["a"][0].profile == "3g.20gb"
    cluster.release("a")
    after = cluster.to_snapshot().nodes[0]
    assert [m.profile for m in after.mig_instances] == ["1g.5gb"]  # the created 3g went away
    cluster.release("b")
    assert [m.profile for m in cluster.to_snapshot().nodes[0].mig_instances] == ["1g.5gb"]  # it existed before


def test_bind_refuses_a_forged_overlap_and_binds_nothing():
    cluster = placer.Cluster(snapshot(node("n", "A100-SXM4-40GB")))
    one = cluster.place(mig_pod("a", "3g.20gb")).assignments[0]
    two = cluster.place(mig_pod("b", "3g.20gb")).assignments[0]
    forged = placer.model.replace(two, mig=one.mig)
    with pytest.raises(InvalidInputError, match="not free"):
        cluster.bind([one, forged])
    assert not cluster.to_snapshot().nodes[0].pods


# ----------------------------------------------------------------------------- profiles


def test_profiles_match_by_name_and_slices_never_by_gb_alone():
    a100 = tables()["A100-80GB"]
    assert a100.profile("3g.39gb").name == "3g.40gb"  # renamed by 535/545 drivers
    assert a100.profile("1g.20gb").memory_slices == 2
    assert a100.profile("1g.10gb").memory_slices == 1
    assert a100.profile("1g.19gb", memory_slices=2).name == "1g.20gb"
    assert a100.profile("5g.40gb") is None
    assert tables()["A100-SXM4-40GB"].profile("1g.10gb+me") is None  # 2 slices' memory, no such media profile
    assert tables()["B200-180GB"].profile("4g.93gb").name == "4g.90gb"  # GB200's names


@pytest.mark.parametrize(
    "reported, model",
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB"),
        ("A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-SXM4-40GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA-H100-80GB-HBM3-SHARED", "H100-80GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-SXM4-40GB"),
        ("NVIDIA-H100-NVL", "H100-NVL-94GB"),
        ("NVIDIA-GH200-480GB", "GH200-96GB"),
        ("NVIDIA-H200", "H200-141GB"),
        ("NVIDIA-B200", "B200-180GB"),
        ("NVIDIA-A30", "A30-24GB"),
        ("Tesla-T4", None),
        ("NVIDIA-L40S", None),
    ],
)
def test_model_names_as_nodes_report_them(reported, model):
    assert model_key(reported) == model


def test_tables_say_which_placements_were_read_from_real_output():
    assert tables()["A100-SXM4-40GB"].placements_confirmed
    assert tables()["H100-80GB"].placements_confirmed
    assert not tables()["A100-80GB"].placements_confirmed  # inferred from the 40GB table
    assert not tables()["B200-180GB"].placements_confirmed


def test_every_table_matches_its_raw_facts():
    for model, raw in RAW.items():
        if model.startswith("_"):
            continue
        table = table_for(model)
        for p in raw["profiles"]:
            got = table.profile(p["name"])
            assert got.name == p["name"]
            for pl in p["placements"]:
                assert got.mask_at(pl["start"]) == ((1 << pl["size"]) - 1) << pl["start"]


# ----------------------------------------------------------------------------- input errors


@pytest.mark.parametrize(
    "pod, where, what",
    [
        ({"name": "p", "gpus": 1, "mig": {"profile": "1g.5gb"}}, "pods[0].gpus", "not both"),
        ({"name": "p", "mig": {"profile": "1g.5gb", "memoryMiB": 10}}, "pods[0].mig", "exactly one"),
        ({"name": "p", "mig": {}}, "pods[0].mig", "exactly one"),
        ({"name": "p", "mig": {"profile": "big"}}, "pods[0].mig.profile", "profile name"),
        ({"name": "p", "mig": {"profile": "1g.5gb", "count": 0}}, "pods[0].mig.count", "1..448"),
        ({"name": "p", "mig": {"profile": "1g.5gb", "color": 1}}, "pods[0].mig", "color"),
    ],
)
def test_bad_mig_requests(pod, where, what):
    with pytest.raises(InvalidInputError) as e:
        placer.PlacementRequest.from_dict(request(pod))
    assert e.value.where == where and what in str(e.value)


@pytest.mark.parametrize(
    "change, where, what",
    [
        ({"gpuModel": "Tesla-T4"}, "nodes[0].mig", "no MIG profile table"),
        ({"mig": {"gpus": [3]}}, "nodes[0].mig.gpus[0]", "out of range"),
        ({"mig": {"mode": "auto"}}, "nodes[0].mig.mode", "static"),
        ({"migInstances": [{"gpu": 0, "profile": "3g.20gb", "start": 2}]}, "nodes[0].migInstances[0].start", "valid starts: 0, 4"),
        ({"migInstances": [{"gpu": 0, "profile": "4g.20gb", "start": 0}, {"gpu": 0, "profile": "1g.5gb", "start": 3}]},
         "nodes[0].migInstances[1]", "overlaps 4g.20gb"),
        ({"migInstances": [{"gpu": 0, "profile": "1g.5gb+me", "start": 0}, {"gpu": 0, "profile": "1g.5gb+me", "start": 1}]},
         "nodes[0].migInstances[1].profile", "one per GPU"),
        ({"pods": [{"name": "w", "gpus": [0]}]}, "nodes[0].pods[0].gpus[0]", "MIG mode"),
        ({"pods": [{"name": "a", "mig": [{"gpu": 0, "profile": "1g.5gb", "start": 0}]},
                   {"name": "b", "mig": [{"gpu": 0, "profile": "1g.5gb", "start": 0}]}]},
         "nodes[0].pods[1].mig[0]", "used by pod 'a'"),
    ],
)
def test_bad_mig_snapshots(change, where, what):
    with pytest.raises(InvalidInputError) as e:
        placer.ClusterSnapshot.from_dict(snapshot({**node("n", "A100-SXM4-40GB"), **change}))
    assert e.value.where == where and what in str(e.value)


def test_instances_on_a_node_without_mig_are_refused():
    plain = {"name": "n", "gpus": 1, "gpuModel": "A100-SXM4-40GB",
             "migInstances": [{"gpu": 0, "profile": "1g.5gb", "start": 0}]}
    with pytest.raises(InvalidInputError, match="no GPU in MIG mode"):
        placer.ClusterSnapshot.from_dict(snapshot(plain))


# ----------------------------------------------------------------------------- properties

MODELS = ("A100-SXM4-40GB", "H100-80GB", "A30-24GB")


@st.composite
def mig_cases(draw):
    nodes = []
    for i in range(draw(st.integers(1, 3))):
        model = draw(st.sampled_from(MODELS))
        profiles = RAW[model]["profiles"]
        gpus = draw(st.integers(1, 2))
        busy = [0] * gpus
        media = [False] * gpus
        instances = []
        for _ in range(draw(st.integers(0, 6))):
            p = draw(st.sampled_from(profiles))
            g = draw(st.integers(0, gpus - 1))
            start = draw(st.sampled_from([pl["start"] for pl in p["placements"]]))
            mask = raw_mask(model, p["name"], start)
            if busy[g] & mask or (p["mediaExtensions"] and media[g]):
                continue
            busy[g] |= mask
            media[g] |= p["mediaExtensions"]
            instances.append((g, p["name"], start, draw(st.booleans())))
        mode = draw(st.sampled_from(["static", "dynamic"]))
        n = node(f"n{i}", model, [x[:3] for x in instances if x[3]], mode, gpus, [x[:3] for x in instances if not x[3]])
        nodes.append((n, model, mode))
    names = sorted({p["name"] for m in MODELS for p in RAW[m]["profiles"]})
    pods = [
        mig_pod(f"p{k}", draw(st.sampled_from(names)), draw(st.integers(1, 2)))
        for k in range(draw(st.integers(1, 6)))
    ]
    return nodes, pods, draw(st.sampled_from(POLICIES))


def brute_can_place(nodes, profile: str, count: int) -> bool:
    """Whether some node can give ``count`` instances now."""
    return max(brute_room(nodes, profile), default=0) >= count


def brute_room(nodes, profile: str) -> list[int]:
    """Per node, the most instances of ``profile`` it can give now, by trying every layout
    (the profile a name means on a model is placer's naming rule, tested above)."""
    rooms = []
    for n, model, mode in nodes:
        named = table_for(model).profile(profile)
        if named is None:
            rooms.append(0)
            continue
        prof = raw_profile(model, named.name)
        profile = named.name
        gpus = n["gpus"]
        busy = [0] * gpus
        media = [False] * gpus
        free = [0] * gpus
        existing = {(m["gpu"], m["start"]): (m["profile"], False) for m in n["migInstances"]}
        existing.update({(m["gpu"], m["start"]): (m["profile"], True) for p in n["pods"] for m in p.get("mig", ())})
        for (g, start), (name, used) in existing.items():
            busy[g] |= raw_mask(model, name, start)
            media[g] |= raw_profile(model, name)["mediaExtensions"]
            if name == profile and not used:
                free[g] += 1

        def most(g: int, b: int, med: bool, limit: int) -> int:
            best = 0
            for pl in prof["placements"]:
                mask = ((1 << pl["size"]) - 1) << pl["start"]
                if mask & b or (prof["mediaExtensions"] and med) or limit == 0:
                    continue
                best = max(best, 1 + most(g, b | mask, med or prof["mediaExtensions"], limit - 1))
            return best

        total = sum(free)
        if mode == "dynamic":
            total += sum(most(g, busy[g], media[g], prof["maxCount"]) for g in range(gpus))
        rooms.append(total)
    return rooms


@given(mig_cases())
def test_placements_are_valid_and_never_miss_a_fit(case):
    nodes, pods, policy = case
    snap = snapshot(*(n for n, _, _ in nodes))
    cluster = placer.Cluster(snap)
    for pod in pods:
        before = cluster.to_snapshot().to_dict()
        state = [(n, m, mode) for n, (_, m, mode) in zip(before["nodes"], nodes)]
        for n in before["nodes"]:
            n.setdefault("migInstances", [])
            n.setdefault("pods", [])
        req = request(pod, policy=policy)
        result = cluster.place(pod, policy=policy)
        assert placer.check_placement(before, req, result) == []
        assert bool(result.assignments) == brute_can_place(state, pod["mig"]["profile"], pod["mig"]["count"])
        cluster.bind(result)
        if pod["name"] == "p0" and result.assignments:
            cluster.release("p0")
    # every layout the cluster reached is a valid snapshot (overlaps, starts, media re-checked)
    placer.ClusterSnapshot.from_dict(cluster.to_snapshot().to_dict())
    for n, (orig, model, mode) in zip(cluster.to_snapshot().nodes, nodes):
        if mode == "static":  # static mode never creates
            before = {(m["gpu"], m["start"]) for m in orig["migInstances"]}
            before |= {(m["gpu"], m["start"]) for p in orig["pods"] for m in p["mig"]}
            assert {(m.gpu, m.start) for m in n.mig_instances} == before
        else:  # dynamic mode never moves an instance in use
            in_use = {(m["gpu"], m["profile"], m["start"]) for p in orig["pods"] for m in p["mig"]}
            now = {(m.gpu, m.profile, m.start) for m in n.mig_instances}
            assert in_use <= now


# ----------------------------------------------------------------------------- gangs of MIG pods


def rack_cluster(racks: int = 2, per_rack: int = 2, gpus: int = 2) -> dict:
    nodes = [
        {**node(f"r{r}n{k}", "H100-80GB", gpus=gpus), "topology": {"rack": f"r{r}"}}
        for r in range(racks) for k in range(per_rack)
    ]
    return {**snapshot(*nodes), "topologyLevels": ["rack"]}


def gang_request(replicas: int, policy: str, profile: str = "1g.10gb", **gang) -> dict:
    return {
        **request({"name": "inf", "replicas": replicas, "gang": "g", "cpuMilli": 1000, "mig": {"profile": profile}},
                  {"name": "launcher", "gang": "g", "cpuMilli": 1000}, policy=policy),
        "gangs": {"g": {"topology": {"mode": "required", "level": "rack"}, **gang}},
    }


def gpus_used(result) -> set:
    return {(a.node, u.gpu) for a in result.assignments for u in a.mig}


def test_mig_gang_stays_in_one_rack_spread_one_per_gpu_or_packed():
    snap = rack_cluster()
    spread = place_checked(snap, gang_request(4, "spread"))
    assert len(spread.assignments) == 5 and spread.gangs[0].placed
    assert len(spread.gangs[0].domains["rack"]) == 1
    assert len(gpus_used(spread)) == 4  # one replica per GPU: the rack has 4
    packed = place_checked(snap, gang_request(4, "best-fit"))
    assert len(gpus_used(packed)) == 1  # four 1g.10gb share one H100


def test_mig_gang_too_large_for_any_rack_is_infeasible_and_binds_nothing():
    cluster = placer.Cluster(rack_cluster())
    result = cluster.schedule(gang_request(4 * 7 + 1, "fgd"))  # a rack holds 28 1g.10gb
    assert not result.assignments and result.gangs[0].status == "infeasible"
    assert "no rack domain has room for the 29 MIG instance(s)" in result.unschedulable[0].reason
    assert not any(n.pods for n in cluster.to_snapshot().nodes)


def test_mig_gang_is_all_or_nothing_when_a_pod_fails_late():
    snap = rack_cluster(racks=1, per_rack=1, gpus=1)
    req = gang_request(2, "fgd", profile="3g.40gb")
    req["pods"][1]["cpuMilli"] = 10**6  # the launcher fits nowhere
    cluster = placer.Cluster(snap)
    result = cluster.schedule(req)
    assert not result.assignments and not result.gangs[0].placed
    assert "launcher failed" in result.unschedulable[0].reason
    assert not any(n.pods or n.mig_instances for n in cluster.to_snapshot().nodes)


def test_mig_gang_slices_keep_each_pair_on_one_node():
    snap = rack_cluster(racks=1, per_rack=3, gpus=1)
    req = gang_request(6, "spread", profile="2g.20gb", slices=[{"level": "node", "size": 2}])
    result = place_checked(snap, req)
    nodes = [a.node for a in result.assignments if a.pod.startswith("inf")]
    assert len(nodes) == 6 and all(nodes[k] == nodes[k + 1] for k in range(0, 6, 2))


@given(st.integers(1, 12), st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb"]), st.sampled_from(POLICIES + ("spread",)))
def test_mig_gangs_are_valid_whole_and_inside_their_rack(replicas, profile, policy):
    snap = rack_cluster(racks=2, per_rack=2, gpus=1)
    snap["nodes"][0]["pods"] = [{"name": "busy", "mig": [{"gpu": 0, "profile": "4g.40gb", "start": 0}]}]
    req = gang_request(replicas, policy, profile)
    result = place_checked(snap, req)  # the checker verifies the rack, overlaps and starts
    per_rack_room = []
    for r in range(2):
        state = [({"migInstances": [], **n}, "H100-80GB", "dynamic") for n in snap["nodes"]
                 if n["topology"]["rack"] == f"r{r}"]
        per_rack_room.append(sum(brute_room(state, profile)))
    assert result.gangs[0].placed == (max(per_rack_room) >= replicas)


def test_replay_refuses_mig_pods_rather_than_place_them_as_cpu_pods():
    cluster = placer.Cluster(snapshot(node("n", "A100-SXM4-40GB")))
    pods = placer.PlacementRequest.from_dict(request(mig_pod("a", "1g.5gb"))).pods
    with pytest.raises(InvalidInputError, match="schedule"):
        cluster.replay(pods)


def test_device_names_survive_a_cluster_round_trip():
    snap = snapshot({**node("n", "A100-SXM4-40GB", mode="static"),
                     "migInstances": [{"gpu": 0, "profile": "3g.20gb", "start": 4, "device": "MIG-abc"}]})
    cluster = placer.Cluster(snap)
    cluster.bind(cluster.place(mig_pod("a", "3g.20gb")))
    (inst,) = cluster.to_snapshot().nodes[0].mig_instances
    assert inst.device == "MIG-abc"
