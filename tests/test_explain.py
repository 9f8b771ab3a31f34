"""placer explain: one hand-built cluster per cause, and the command line."""
from __future__ import annotations

import json

import pytest

from placer.cli import main
from placer.diagnostics.explain import CAUSES, explain


def snapshot(nodes, levels=()):
    doc = {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodeTypes": {"h100": {"gpus": 8, "gpuModel": "H100", "cpuMilli": 64000}},
        "nodes": nodes,
    }
    if levels:
        doc["topologyLevels"] = list(levels)
    return doc


def request(pods, gangs=None):
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods}
    if gangs:
        doc["gangs"] = gangs
    return doc


def node(name, held=(), **kw):
    d = {"name": name, "type": "h100", **kw}
    if held:
        d["pods"] = [{"name": f"{name}-job", "gpus": list(held)}]
    return d


def only(expl):
    assert len(expl.pending) == 1
    return expl.pending[0]


def test_registration_gpus_not_offered():
    snap = snapshot([{"name": "a", "cpuMilli": 8000, "labels": {"nvidia.com/gpu.count": "8"},
                      "resources": {"nvidia.com/gpu": {"capacity": 8, "allocatable": 0}}}])
    p = only(explain(snap, request([{"name": "train", "gpus": 1}])))
    assert p.cause == "registration" and "device plugin" in p.detail and "a" in p.detail


def test_registration_resource_no_node_offers():
    snap = snapshot([node("a")])
    p = only(explain(snap, request([{"name": "mig", "resources": {"nvidia.com/mig-1g.10gb": 1}}])))
    assert p.cause == "registration" and "nvidia.com/mig-1g.10gb" in p.detail


def test_filters_every_node_tainted():
    taint = [{"key": "maint", "effect": "NoSchedule"}]
    snap = snapshot([node("a", taints=taint), node("b", taints=taint), node("c", unschedulable=True)])
    p = only(explain(snap, request([{"name": "train", "gpus": 1}])))
    assert p.cause == "filters"
    assert p.node_reasons == {"node(s) had untolerated taint(s)": 2, "node(s) were unschedulable": 1}
    # kube's line names no taint: explain names each node's
    assert p.filtered == ("node(s) had untolerated taint(s): a (maint:NoSchedule), b (maint:NoSchedule)",
                          "node(s) were unschedulable: c")
    assert p.nearest == ()


def test_fragmentation_free_gpus_scattered():
    snap = snapshot([node("a", held=range(4)), node("b", held=range(4, 8)), node("c", held=range(2))])
    p = only(explain(snap, request([{"name": "big", "gpus": 8}])))
    assert p.cause == "fragmentation"
    assert p.detail == ("14 GPU(s) free in total on 3 eligible node(s), 8 GPU(s) needed; "
                        "no node has room for 8 whole GPU(s)")
    assert p.node_reasons == {"Insufficient nvidia.com/gpu": 3}
    assert [n.node for n in p.nearest] == ["c", "a", "b"]  # c lacks 2, a and b lack 4
    assert p.nearest[0].lacks == ("2 GPU(s)",) and p.nearest[0].holders == ("c-job (2 GPU(s))",)


def test_topology_gang_fits_only_across_racks():
    nodes = [node(f"n{i}", topology={"rack": f"r{i // 2}"}) for i in range(6)]
    nodes[1]["pods"] = [{"name": "x", "gpus": [0]}]  # rack r0 then holds one 8-GPU pod only
    snap = snapshot(nodes, levels=("rack",))
    pods = [{"name": "w", "replicas": 3, "gpus": 8, "gang": "g"}]
    gangs = {"g": {"topology": {"mode": "required", "level": "rack"}}}
    p = only(explain(snap, request(pods, gangs)))
    assert p.kind == "gang" and p.pods == 3
    assert p.cause == "topology" and "no rack domain holds more than 2" in p.detail
    assert [(lv.level, lv.domain, lv.fits, lv.needed) for lv in p.levels] == [("rack", "r1", 2, 3)]


def test_a_topology_cause_names_the_nodes_and_holders_of_the_best_domain_not_the_nearest_elsewhere():
    # rack r0: two nodes a 4-GPU pod and a 5-GPU pod hold; racks r1 and r2: one node each lacks a GPU only
    nodes = [node(f"n{i}", topology={"rack": f"r{i // 4}"}) for i in range(12)]
    nodes[0]["pods"] = [{"name": "mpi-0", "gpus": [0, 1, 2, 3]}]
    nodes[1]["pods"] = [{"name": "mpi-1", "gpus": [0, 1, 2, 3, 4]}]
    for i in (4, 5, 8, 9):
        nodes[i]["pods"] = [{"name": f"infer-{i}", "gpus": [0]}]
    pods = [{"name": "w", "replicas": 4, "gpus": 8, "gang": "g"}]
    gangs = {"g": {"topology": {"mode": "required", "level": "rack"}}}
    p = only(explain(snapshot(nodes, levels=("rack",)), request(pods, gangs)))
    assert p.cause == "topology" and [(lv.domain, lv.fits) for lv in p.levels] == [("r0", 2)]
    # freeing n0 and n1 (short 4 and 5 GPUs) lets r0 hold the gang; the 1-GPU pods elsewhere would not
    assert [(n.node, n.lacks, n.holders) for n in p.nearest] == [
        ("n0", ("4 GPU(s)",), ("mpi-0 (4 GPU(s))",)), ("n1", ("5 GPU(s)",), ("mpi-1 (5 GPU(s))",))]


def test_capacity_nothing_free():
    snap = snapshot([node("a", held=range(8))])
    p = only(explain(snap, request([{"name": "one", "gpus": 1}])))
    assert p.cause == "capacity" and p.node_reasons == {"Insufficient nvidia.com/gpu": 1}


def test_cpu_only_pod_larger_than_any_node_is_too_large():
    snap = snapshot([node("a")])
    p = only(explain(snap, request([{"name": "etl", "cpuMilli": 96000}])))
    assert p.cause == "too large" and p.node_reasons == {"Insufficient cpu": 1}
    assert p.detail == ("no node could ever hold a CPU-only pod (96 CPU): 96 CPU asked, "
                        "the largest node has 64 CPU (short 32 CPU)")
    assert p.nearest == ()  # no node could hold it even empty: none is near


def test_a_gpu_pod_asking_more_cpu_than_any_node_has_is_too_large_not_fragmentation():
    snap = snapshot([node("a"), node("b", held=range(4))])
    p = only(explain(snap, request([{"name": "greedy", "gpus": 1, "cpuMilli": 400000}])))
    assert p.cause == "too large"
    assert "400 CPU asked, the largest node has 64 CPU (short 336 CPU)" in p.detail


def test_nine_gpus_on_eight_gpu_nodes_is_too_large_not_capacity():
    snap = snapshot([node("a"), node("b")])
    p = only(explain(snap, request([{"name": "odd", "gpus": 9}])))
    assert p.cause == "too large"
    assert p.detail.endswith("9 GPU(s) asked, the largest node has 8 GPU(s) (short 1 GPU(s))")


def test_filters_rule_out_the_only_nodes_big_enough():
    small = {"name": "s", "gpus": 4, "gpuModel": "H100", "cpuMilli": 64000}
    snap = snapshot([node("big", unschedulable=True), small])
    p = only(explain(snap, request([{"name": "train", "gpus": 8}])))
    assert p.cause == "filters"
    assert p.detail == ("1 node(s) could hold 8 whole GPU(s) when empty, and every one is ruled out before "
                        "resources: 1 node(s) were unschedulable.")


def test_fragmentation_of_cpu_says_the_sums():
    snap = snapshot([node("a", pods=[{"name": "x", "cpuMilli": 34000}]),
                     node("b", pods=[{"name": "y", "cpuMilli": 34000}])])
    p = only(explain(snap, request([{"name": "etl", "cpuMilli": 40000}])))
    assert p.cause == "fragmentation"
    assert p.detail.startswith("60 CPU free in total on 2 eligible node(s), 40 CPU needed")


def test_capacity_says_what_is_short_and_by_how_much():
    snap = snapshot([node("a", held=range(7)), node("b", held=range(7))])
    pods = [{"name": "w", "replicas": 2, "gpus": 4, "cpuMilli": 1000, "gang": "g"}]
    p = only(explain(snap, request(pods, {"g": {"topology": {"mode": "unconstrained"}}})))
    assert p.cause == "capacity"
    assert p.detail == "not enough free on 2 eligible node(s): short 6 GPU(s) (2 GPU(s) free of 8 GPU(s))"


def test_placed_pods_are_not_explained_and_pending_ones_see_them():
    snap = snapshot([node("a")])
    expl = explain(snap, request([{"name": "first", "gpus": 6}, {"name": "second", "gpus": 4}]))
    assert len(expl.result.assignments) == 1
    p = only(expl)
    assert p.name == "second" and p.cause == "capacity"  # 2 GPUs free in all, 4 asked
    assert p.nearest[0].holders == ("first (6 GPU(s))",)
    assert set(CAUSES) >= {p.cause}


def test_cli(tmp_path, capsys):
    snap_path, req_path = tmp_path / "s.json", tmp_path / "r.yaml"
    snap_path.write_text(json.dumps(snapshot([node("a", held=range(4)), node("b", held=range(4))])))
    req_path.write_text("apiVersion: placer/v1\nkind: PlacementRequest\npods:\n- {name: big, gpus: 8}\n")
    assert main(["explain", str(snap_path), str(req_path)]) == 0
    out = capsys.readouterr().out
    assert "pod big (1 pod(s))" in out and "cause: fragmentation" in out and "nearest: a lacks 4 GPU(s)" in out
    assert main(["explain", str(snap_path), str(req_path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["placed"] == 0 and data["pending"][0]["cause"] == "fragmentation"
    assert main(["explain", str(snap_path), str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "none.json" in err[0]


@pytest.mark.parametrize("fmt", ["xml", ""])
def test_cli_bad_format(tmp_path, capsys, fmt):
    snap_path = tmp_path / "s.json"
    snap_path.write_text(json.dumps(snapshot([node("a")])))
    assert main(["explain", str(snap_path), str(snap_path), "--format", fmt]) == 2
    assert "--format" in capsys.readouterr().err


def test_nearest_lists_only_nodes_that_could_hold_the_pod_when_empty():
    snap = snapshot([node("big", held=range(4)), {"name": "tiny", "type": "h100", "gpus": 1},
                     {"name": "few-cpus", "type": "h100", "cpuMilli": 4000}])
    expl = explain(snap, request([{"name": "p", "gpus": 8, "cpuMilli": 8000}]))
    assert [n.node for n in only(expl).nearest] == ["big"]
    assert "tiny" not in expl.to_text() and "few-cpus" not in expl.to_text()


def test_no_nearest_node_when_no_node_could_ever_hold_the_pod():
    snap = snapshot([{"name": "tiny", "type": "h100", "gpus": 1}, {**node("half", held=range(2)), "gpus": 4}])
    p = only(explain(snap, request([{"name": "p", "gpus": 8}])))
    assert p.cause == "too large" and p.detail.startswith("no node could ever hold 8 whole GPU(s)")
    assert p.nearest == ()


def test_causes_are_coloured_only_when_asked(tmp_path, capsys):
    snap = snapshot([node("a", held=range(4)), node("b", held=range(4))])
    expl = explain(snap, request([{"name": "big", "gpus": 8}]))
    assert "cause: \033[36mfragmentation\033[0m" in expl.to_text(color=True)
    assert "\033[" not in expl.to_text()
    snap_path, req_path = tmp_path / "s.json", tmp_path / "r.json"
    snap_path.write_text(json.dumps(snap))
    req_path.write_text(json.dumps(request([{"name": "big", "gpus": 8}])))
    assert main(["explain", str(snap_path), str(req_path)]) == 0  # not a terminal: no colour
    assert "\033[" not in capsys.readouterr().out
    assert main(["explain", str(snap_path), str(req_path), "--color", "always"]) == 0
    assert "\033[36mfragmentation" in capsys.readouterr().out
    out = tmp_path / "out.txt"
    assert main(["explain", str(snap_path), str(req_path), "--color", "always", "-o", str(out)]) == 0
    assert "\033[" not in out.read_text()  # never into a file


def test_topology_names_the_eligible_nodes_outside_every_domain():
    nodes = [node("a", held=range(6), topology={"rack": "r1"}), node("b", held=range(6), topology={"rack": "r1"})]
    nodes += [node(f"idle-{i}") for i in range(5)]
    pods = [{"name": "w", "replicas": 2, "gpus": 4, "gang": "g"}]
    p = only(explain(snapshot(nodes, levels=("rack",)), request(pods, {"g": {"topology": {"mode": "required",
                                                                                           "level": "rack"}}})))
    assert p.cause == "topology"
    assert p.detail.endswith("; 5 eligible node(s) with room are outside every rack domain: idle-0, idle-1, idle-2 "
                             "and 2 more (the topology source, e.g. Slurm's topology.conf, does not place them)")
