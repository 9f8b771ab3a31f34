"""GPU sharing by time-slicing and MPS (issue #14 item 8): nodes of ``gpuSharing``, pods of
``gpuSlots``, the importer, ``report``, ``explain`` and the independent checker."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placer
from placer.adapters.kubernetes.snapshot import snapshot_from_kubernetes
from placer.diagnostics.explain import explain
from placer.diagnostics.report import cluster_report
from placer.placement.sharing import choose_slots

DATA = Path(__file__).parent / "data" / "k8s"
NODES = DATA / "handmade-nodes-time-slicing.json"
PODS = DATA / "handmade-pods-time-slicing.json"
TOLERATE = [{"operator": "Exists"}]


def snapshot(replicas: int = 4, strategy: str = "time-slicing", gpus: int = 8, pods=(), memory: int = 81559) -> dict:
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodeTypes": {
            "shared": {"gpuModel": "H100", "gpus": gpus, "gpuMemoryMiB": memory, "cpuMilli": 64000,
                       "gpuSharing": {"strategy": strategy, "replicas": replicas}},
            "whole": {"gpuModel": "H100", "gpus": 8, "gpuMemoryMiB": 81559, "cpuMilli": 64000},
        },
        "nodes": [{"name": "whole-0", "type": "whole"}, {"name": "shared-0", "type": "shared", "pods": list(pods)}],
    }


def request(*pods: dict, policy: str = "best-fit") -> dict:
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": policy, "pods": list(pods)}


def place_checked(snap: dict, req: dict) -> placer.PlacementResult:
    result = placer.place(snap, req)
    assert placer.check_placement(snap, req, result) == []
    return result


# ----------------------------------------------------------------------------- schema


def test_gpu_sharing_round_trips_on_types_and_nodes():
    doc = snapshot(pods=[{"name": "a", "gpuSlots": {"0": 2}, "gpuMemoryMiB": {"0": 1000}}, {"name": "b", "unknownGpuSlots": 3}])
    doc["nodes"].append({"name": "inline", "gpus": 2, "gpuSharing": {"strategy": "mps", "replicas": 2}})
    snap = placer.ClusterSnapshot.from_dict(doc)
    assert snap.nodes[1].hardware.gpu_sharing == placer.model.GpuSharing("time-slicing", 4)
    assert snap.nodes[2].hardware.gpu_sharing.strategy == "mps"
    # unknown slots spread over the GPUs with the most free slots, highest index first
    assert dict(snap.nodes[1].pods[1].gpu_slots) == {5: 1, 6: 1, 7: 1}
    assert placer.ClusterSnapshot.from_dict(snap.to_dict()) == snap
    assert snap.to_dict()["nodes"][2]["gpuSharing"] == {"strategy": "mps", "replicas": 2}


@pytest.mark.parametrize(
    ("change", "where", "what"),
    [
        ({"gpuSharing": {"strategy": "vgpu", "replicas": 2}}, "nodes[1].gpuSharing.strategy", "time-slicing, mps"),
        ({"gpuSharing": {"strategy": "mps", "replicas": 1}}, "nodes[1].gpuSharing.replicas", "2..1000"),
        ({"pods": [{"name": "p", "gpus": [0]}]}, "nodes[1].pods[0].gpus[0]", "hold gpuSlots"),
        ({"pods": [{"name": "p", "gpuShares": {"0": 500}}]}, "nodes[1].pods[0].gpuShares.0", "hold gpuSlots"),
        ({"pods": [{"name": "p", "gpuSlots": {"0": 3}}, {"name": "q", "gpuSlots": {"0": 2}}]},
         "nodes[1].pods[1].gpuSlots.0", "5 slots, over the node's replicas 4"),
        ({"pods": [{"name": "p", "gpuSlots": {"0": 1}, "gpuMemoryMiB": {"0": 50000}},
                   {"name": "q", "gpuSlots": {"0": 1}, "gpuMemoryMiB": {"0": 40000}}]},
         "nodes[1].pods[1].gpuMemoryMiB.0", "90000 MiB"),
        ({"pods": [{"name": "p", "unknownGpuSlots": 33}]}, "nodes[1].pods[0].unknownGpuSlots", "only 32 slot(s)"),
    ],
)
def test_bad_sharing_snapshots_name_the_path(change, where, what):
    doc = snapshot()
    doc["nodes"][1].update(change)
    with pytest.raises(placer.InvalidInputError) as err:
        placer.ClusterSnapshot.from_dict(doc)
    assert err.value.where == where
    assert what in str(err.value)


def test_slots_on_a_node_that_does_not_share_are_refused():
    doc = snapshot()
    doc["nodes"][0]["pods"] = [{"name": "p", "gpuSlots": {"0": 1}}]
    with pytest.raises(placer.InvalidInputError, match="does not share its GPUs") as err:
        placer.ClusterSnapshot.from_dict(doc)
    assert err.value.where == "nodes[0].pods[0].gpuSlots"


def test_mps_holds_one_slot_per_pod_and_its_memory_limit():
    doc = snapshot(strategy="mps", replicas=2, memory=40000)
    doc["nodes"][1]["pods"] = [{"name": "p", "gpuSlots": {"0": 1}, "gpuMemoryMiB": {"0": 30000}}]
    with pytest.raises(placer.InvalidInputError, match="over its limit 20000"):
        placer.ClusterSnapshot.from_dict(doc)


def test_request_refuses_slots_with_whole_gpus():
    with pytest.raises(placer.InvalidInputError, match="cannot be combined with gpus") as err:
        placer.PlacementRequest.from_dict(request({"name": "a", "gpus": 1, "gpuSlots": 2}))
    assert err.value.where == "pods[0].gpuSlots"


# ----------------------------------------------------------------------------- placement


def test_whole_gpu_pods_never_use_slots():
    # the case: 8 GPUs x 4 replicas is not room for four 8-GPU pods
    result = place_checked(snapshot(), request(*({"name": f"big-{i}", "gpus": 8} for i in range(4))))
    assert [a.node for a in result.assignments] == ["whole-0"]
    assert "share their GPUs (time-slicing or MPS)" in result.unschedulable[0].reason


def test_multi_slot_pod_spreads_over_distinct_gpus():
    result = place_checked(snapshot(), request({"name": "a", "gpuSlots": 4, "tolerations": TOLERATE}))
    (a,) = result.assignments
    assert a.node == "shared-0" and len(a.gpus) == 4 and not a.stacked_slots
    assert a.to_dict()["gpuSlots"] == {str(g): 1 for g in a.gpus}


def test_slots_stack_only_when_too_few_gpus_have_room_and_say_so():
    held = [{"name": f"h{g}", "gpuSlots": {str(g): 4}} for g in range(6)]  # GPUs 0-5 full
    result = place_checked(snapshot(pods=held), request({"name": "a", "gpuSlots": 3}))
    (a,) = result.assignments
    assert a.gpus == (6, 7) and dict(a.gpu_slots) == {6: 2, 7: 1}
    assert a.stacked_slots
    note = explain(snapshot(pods=held), request({"name": "a", "gpuSlots": 3})).stacked
    assert note and "share 2 GPU(s)" in note[0]


def test_time_slicing_memory_holds_every_model_on_a_gpu():
    # 50 GB each: two cannot share one 80 GB GPU, so the third pod finds no room on 2 GPUs
    snap = snapshot(gpus=2)
    req = request(*({"name": f"m{i}", "gpuSlots": 1, "gpuMemoryMiB": 50000} for i in range(3)))
    result = place_checked(snap, req)
    assert sorted(a.gpus[0] for a in result.assignments) == [0, 1]
    assert "Insufficient GPU memory" in result.unschedulable[0].reason


def test_mps_gives_one_slot_per_pod():
    snap = snapshot(strategy="mps", replicas=2, memory=40000)
    result = place_checked(snap, request({"name": "two", "gpuSlots": 2}, {"name": "one", "gpuSlots": 1, "gpuMemoryMiB": 20000},
                                        {"name": "fat", "gpuSlots": 1, "gpuMemoryMiB": 20001}))
    assert [a.pod for a in result.assignments] == ["one"]
    reasons = {u.pod: u.reason for u in result.unschedulable}
    assert "MPS: one slot per pod" in reasons["two"]
    assert "Insufficient GPU memory" in reasons["fat"]


@pytest.mark.parametrize("policy", ["best-fit", "first-fit", "spread", "random", "fgd"])
def test_every_policy_places_slots_within_the_rules(policy):
    snap = snapshot(replicas=3, gpus=4, pods=[{"name": "old", "gpuSlots": {"1": 2}}])
    req = request(*({"name": f"p{i}", "gpuSlots": 1 + i % 3} for i in range(8)), policy=policy)
    result = place_checked(snap, req)
    assert sum(sum(a.gpu_slots.values()) for a in result.assignments) <= 4 * 3 - 2


def test_bind_release_and_to_snapshot_keep_slot_holdings():
    cluster = placer.Cluster(snapshot())
    decision = cluster.place({"name": "a", "gpuSlots": 2, "gpuMemoryMiB": 1000})
    cluster.bind(decision)
    held = {p.name: p for p in cluster.to_snapshot().nodes[1].pods}["a"]
    assert dict(held.gpu_slots) == dict(decision.assignments[0].gpu_slots)
    again = placer.ClusterSnapshot.from_dict(cluster.to_snapshot().to_dict())
    assert dict(again.nodes[1].pods[0].gpu_slots) == dict(held.gpu_slots)
    before = cluster.node_free("shared-0")
    cluster.release("a")
    assert cluster.node_free("shared-0").gpu_milli == (1000,) * 8 != before.gpu_milli


def test_bind_refuses_slots_over_a_full_gpu():
    held = [{"name": "h", "gpuSlots": {"0": 4}}]
    cluster = placer.Cluster(snapshot(pods=held))
    decision = cluster.place({"name": "a", "gpuSlots": 1})
    forged = placer.model.replace(decision.assignments[0], gpus=(0,), gpu_slots={0: 1})
    with pytest.raises(placer.InvalidInputError, match="GPU 0 has 0 free slot"):
        cluster.bind(forged)


def test_gangs_of_slot_pods_are_refused_for_now():
    req = request({"name": "a", "gpuSlots": 1, "gang": "g"})
    req["gangs"] = {"g": {}}
    with pytest.raises(placer.InvalidInputError, match="gangs of such pods are not placed yet") as err:
        placer.place(snapshot(), req)
    assert err.value.where == "pods[0].gpuSlots"


def test_checker_catches_overbooked_slots_and_whole_pods_on_shared_nodes():
    snap = snapshot(gpus=2, pods=[{"name": "old", "gpuSlots": {"0": 3}, "gpuMemoryMiB": {"0": 60000}}])
    req = request({"name": "a", "gpuSlots": 2, "gpuMemoryMiB": 30000}, {"name": "w", "gpus": 1})
    bad = placer.PlacementResult.from_dict({
        "apiVersion": "placer/v1", "kind": "PlacementResult",
        "assignments": [{"pod": "a", "node": "shared-0", "gpus": [0], "gpuSlots": {"0": 2}},
                        {"pod": "w", "node": "shared-0", "gpus": [1]}],
    })
    found = "\n".join(placer.check_placement(snap, req, bad))
    assert "5 slots held > replicas 4" in found
    assert "GPU memory 90000 MiB > 81559 MiB shared by time-slicing" in found
    assert "a pod of whole GPUs or a GPU share cannot go there" in found


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(st.integers(0, 4), min_size=1, max_size=8),
    memory=st.lists(st.sampled_from([None, 0, 10000, 40000]), min_size=8, max_size=8),
    count=st.integers(1, 10),
    need=st.sampled_from([0, 10000, 30000]),
)
def test_choose_slots_property(free, memory, count, need):
    memory = memory[: len(free)]
    got = choose_slots(free, memory, count, need)
    room = [g for g, f in enumerate(free) if f > 0 and (memory[g] is None or memory[g] >= need)]
    if got is None:
        assert sum(free[g] for g in room) < count
        return
    assert len(got) == count
    per_gpu = {g: got.count(g) for g in set(got)}
    assert all(g in room and per_gpu[g] <= free[g] for g in per_gpu)  # never over a GPU's slots or memory
    assert len(per_gpu) == min(count, len(room))  # distinct GPUs whenever enough have room


@settings(max_examples=25, deadline=None)
@given(
    replicas=st.integers(2, 5),
    asks=st.lists(st.tuples(st.integers(1, 6), st.sampled_from([0, 20000, 45000])), min_size=1, max_size=12),
    policy=st.sampled_from(["best-fit", "first-fit", "spread", "random"]),
)
def test_placement_property_slots_and_memory_never_over(replicas, asks, policy):
    snap = snapshot(replicas=replicas, gpus=4)
    req = request(*({"name": f"p{i}", "gpuSlots": k, "gpuMemoryMiB": m} for i, (k, m) in enumerate(asks)),
                  policy=policy)
    result = place_checked(snap, req)
    cluster = placer.Cluster(snap)
    cluster.bind(cluster.place(req["pods"], policy=policy))  # the same decisions bind
    assert len(result.assignments) + len(result.unschedulable) == len(asks)


# ----------------------------------------------------------------------------- importer, report, explain


def test_time_sliced_node_imports_as_physical_gpus_and_slots():
    snap = snapshot_from_kubernetes(NODES, PODS)
    nodes = {n.name: n for n in snap.nodes}
    ts = nodes["h100-ts-0"].hardware
    assert (ts.gpus, ts.gpu_model, ts.gpu_sharing) == (8, "NVIDIA-H100-80GB-HBM3", placer.model.GpuSharing("time-slicing", 4))
    assert nodes["a100-mps-0"].hardware.gpu_sharing == placer.model.GpuSharing("mps", 2)
    assert nodes["h100-0"].hardware.gpu_sharing is None  # replicas 1, strategy none
    pods = {p.name: p for p in nodes["h100-ts-0"].pods}
    assert dict(pods["team-d/infer-0"].gpu_slots) == {3: 2}  # placer.io/gpus "3,3": one index per slot
    assert pods["team-d/notebook-0"].unknown_gpu_slots == 1
    assert cluster_report(snap).findings == cluster_report(snap).findings  # deterministic
    assert not [f for f in cluster_report(snap).findings if f.kind == "gpu-registration"]


def test_importer_refuses_sharing_without_replicas(tmp_path):
    doc = json.loads(NODES.read_text())
    del doc["items"][0]["metadata"]["labels"]["nvidia.com/gpu.replicas"]
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(placer.InvalidInputError, match="how many slots each GPU offers is unknown") as err:
        snapshot_from_kubernetes(path)
    assert "items[0].metadata.labels" in err.value.where


def test_report_counts_physical_gpus_and_slots_apart():
    report = cluster_report(snapshot_from_kubernetes(NODES, PODS))
    text = report.to_text()
    assert "8 GPU(s) and 12 shared GPU(s)" in text
    assert "12 GPU(s) × 2/4 slots = 40 slots, 36 free" in text
    rows = {r.slots: r.pods for r in report.sharing.rows}
    assert rows == {1: 36, 2: 14, 4: 7}  # MPS nodes take one slot per pod
    eight = next(r for r in report.shapes if r.shape.num_gpu == 8 and r.shape.gpu_milli == 1000)
    assert eight.pods == 0  # never an 8-GPU pod on 32 slots
    assert report.to_dict()["gpuSharing"]["freeSlots"] == 36


def test_explain_counts_slots_and_gpus_for_a_pending_slot_pod():
    snap = snapshot(gpus=2, pods=[{"name": "old", "gpuSlots": {"0": 4, "1": 3}}])
    (pending,) = explain(snap, request({"name": "a", "gpuSlots": 2, "tolerations": TOLERATE})).pending
    assert pending.cause == "capacity"
    assert "1 slot(s) free on 1 of 2 GPU(s)" in pending.detail
    assert "Insufficient nvidia.com/gpu slots" in pending.reason


def test_cli_place_and_bad_input(tmp_path, capsys):
    from placer.cli import main

    snap_path = tmp_path / "cluster.json"
    doc = snapshot()
    snap_path.write_text(json.dumps(doc))
    req_path = tmp_path / "request.json"
    req_path.write_text(json.dumps(request({"name": "a", "gpuSlots": 2})))
    assert main(["place", str(snap_path), str(req_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["assignments"][0]["gpuSlots"] == {"0": 1, "1": 1}  # equal GPUs: lowest indices
    doc["nodeTypes"]["shared"]["gpuSharing"]["replicas"] = 0
    snap_path.write_text(json.dumps(doc))
    assert main(["place", str(snap_path), str(req_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"placer: error: {snap_path}: nodeTypes.shared.gpuSharing.replicas: expected an integer in 2..1000, got 0"]


# ----------------------------------------------------------------------------- pending pods of nvidia.com/gpu


def test_a_pending_pods_nvidia_gpu_counts_slots_on_a_sharing_node():
    from placer.adapters.kubernetes.sharing import as_slots
    from placer.model import PodRequest

    assert as_slots(PodRequest("ml/a", gpus=3, cpu_milli=500)) == PodRequest("ml/a", gpu_slots=3, cpu_milli=500)
    for not_whole in (PodRequest("ml/b"), PodRequest("ml/c", gpus=1, gpu_milli=500), PodRequest("ml/d", gpus=2, nics=1),
                      PodRequest("ml/e", gpu_slots=2)):
        assert as_slots(not_whole) is None


def test_bindings_name_one_gpu_index_per_slot_as_the_importer_reads_them():
    from placer.formats import binding_annotations
    from placer.model import Assignment

    stacked = Assignment("ml/a", "shared-0", gpus=(0, 3), gpu_slots={3: 2, 0: 1})
    assert binding_annotations(stacked) == {"placer.io/gpus": "0,3,3"}
    assert binding_annotations(Assignment("ml/b", "whole-0", gpus=(4, 5))) == {"placer.io/gpus": "4,5"}
