"""Preemption on small random clusters: the greedy's victims make the preemptor fit,
respect priority and PDB accounting, evict running gangs whole and lie inside the chosen
domain; CP-SAT's are never worse and equal a brute force over every set of victims.

The brute force works from the snapshot document alone: per node, the whole GPUs no
remaining pod holds, CPU and pod slots, and the objective of the rules (PDB overdraft,
highest victim priority, sum of priority ranks, victims, newest first) recomputed here.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import placer
from placer.preemption import victims as preemption
from placer.preemption import exact as preemption_exact
from placer.exceptions import InvalidInputError
from placer.placement.binding import DecisionBook
from placer.placement.run import run_request
from placer.placement.state import ClusterState
from placer.schema import snapshot_facts

RACKS, NODES, GPUS = 2, 2, 4


@st.composite
def cases(draw):
    nodes = []
    pods = []
    for r in range(RACKS):
        for k in range(NODES):
            nodes.append({"name": f"r{r}n{k}", "gpus": GPUS, "cpuMilli": 8000, "maxPods": 6,
                          "topology": {"rack": f"r{r}"}, "pods": []})
    for i, n in enumerate(nodes):
        free = list(range(GPUS))
        for j in range(draw(st.integers(0, 3))):
            if not free:
                break
            take = draw(st.integers(1, len(free)))
            held, free = free[:take], free[take:]
            pods.append((i, {
                "name": f"ns/p{i}{j}", "gpus": held, "cpuMilli": 1000, "priority": draw(st.integers(0, 3)),
                "startTime": draw(st.integers(0, 5)), "labels": {"app": draw(st.sampled_from(["a", "b"]))},
                "preemptible": draw(st.booleans()) or draw(st.booleans()),
            }))
    # some pods of equal priority on different nodes form a running gang
    if len(pods) >= 2 and draw(st.booleans()):
        (i, a), (k, b) = pods[0], pods[-1]
        a["gang"] = b["gang"] = "running-gang"
        b["priority"] = a["priority"]
    for i, p in pods:
        nodes[i]["pods"].append(p)
    budgets = [{"name": "pdb-a", "selector": {"app": "a"}, "disruptionsAllowed": draw(st.integers(0, 2))}]
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": nodes,
                "podDisruptionBudgets": budgets}
    size, gpus = draw(st.integers(1, 3)), draw(st.integers(2, GPUS))
    mode = draw(st.sampled_from(["required", "unconstrained"]))
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "greedy",
               "pods": [{"name": "job", "replicas": size, "gang": "job", "gpus": gpus, "cpuMilli": 1000,
                         "priority": draw(st.integers(1, 4))}],
               "gangs": {"job": {"topology": {"mode": mode, "level": "rack"} if mode == "required" else {"mode": mode}}}}
    return snapshot, request


def brute_force(snapshot: dict, request: dict) -> tuple | None:
    """The least objective over every set of evictable units and every domain, or None."""
    job = request["pods"][0]
    size, gpus, priority = job["replicas"], job["gpus"], job["priority"]
    required = request["gangs"]["job"]["topology"]["mode"] == "required"
    running = [(i, p) for i, n in enumerate(snapshot["nodes"]) for p in n["pods"]]
    units: dict[str, list[tuple[int, dict]]] = {}
    for i, p in running:
        units.setdefault(p.get("gang") or p["name"], []).append((i, p))
    evictable = [u for u in units.values()
                 if all(p["priority"] < priority and p.get("preemptible", True) for _, p in u)]
    vpods = [p for u in evictable for _, p in u]
    prank = {v: k for k, v in enumerate(sorted({p["priority"] for p in vpods}))}
    arank = {v: k for k, v in enumerate(sorted({p["startTime"] for p in vpods}, reverse=True))}
    budget = snapshot["podDisruptionBudgets"][0]
    domains = [[i for i, n in enumerate(snapshot["nodes"]) if n["topology"]["rack"] == f"r{r}"] for r in range(RACKS)]
    if not required:
        domains = [list(range(len(snapshot["nodes"])))]
    best = None
    for chosen in itertools.product([0, 1], repeat=len(evictable)):
        gone = [u for u, c in zip(evictable, chosen) if c]
        gone_names = {p["name"] for u in gone for _, p in u}
        for domain in domains:
            if any(i not in domain for u in gone for i, _ in u):
                continue  # victims lie inside the domain
            fit = 0
            for i in domain:
                n = snapshot["nodes"][i]
                stay = [p for p in n["pods"] if p["name"] not in gone_names]
                free_gpus = n["gpus"] - sum(len(p["gpus"]) for p in stay)
                free_cpu = n["cpuMilli"] - sum(p["cpuMilli"] for p in stay)
                slots = n["maxPods"] - len(stay)
                fit += min(free_gpus // gpus, free_cpu // job["cpuMilli"], slots)
            if fit < size:
                continue
            pods = [p for u in gone for _, p in u]
            hits = sum(1 for p in pods if p["labels"].get("app") == "a")
            key = (max(hits - budget["disruptionsAllowed"], 0),
                   max((prank[p["priority"]] + 1 for p in pods), default=0),
                   sum(prank[p["priority"]] for p in pods), len(pods), sum(arank[p["startTime"]] for p in pods))
            best = key if best is None or key < best else best
    return best


def as_problem(snapshot: dict, request: dict):
    cluster = placer.Cluster(snapshot)
    req = placer.PlacementRequest.from_dict(request)
    h = cluster.domains.hierarchy()
    mode = request["gangs"]["job"]["topology"]["mode"]
    level = h.levels.index("rack") if mode == "required" else -1
    pod = req.pods[0]
    allowed, _ = cluster.session.eligibility(pod)
    return cluster, req, h, level, [(pod, len(req.pods), allowed)]


@given(cases())
def test_greedy_victims_fit_respect_priority_gangs_and_domain(case):
    snapshot, request = case
    result = placer.preempt(snapshot, request)
    assert placer.check_placement(snapshot, request, result) == []  # priority, gangs whole, preemptible
    pre = result.preemptions
    feasible = brute_force(snapshot, request) is not None
    if pre:
        assert result.gangs[0].placed and all(a.nominated for a in result.assignments)
        if request["gangs"]["job"]["topology"]["mode"] == "required":
            racks = {a.node[:2] for a in result.assignments} | {n[:2] for n in pre[0].nodes}
            assert len(racks) == 1  # victims inside the one rack the gang uses
    assert result.gangs[0].placed == (feasible or bool(placer.place(snapshot, {**request, "preemption": "none"})
                                                        .gangs[0].placed))


@given(cases())
def test_exact_is_never_worse_than_greedy_and_equals_brute_force(case):
    snapshot, request = case
    cluster, req, h, level, shapes = as_problem(snapshot, request)
    if placer.place(snapshot, {**request, "preemption": "none"}).gangs[0].placed:
        return  # it fits as it is: nothing to preempt
    greedy, ranks, _ = preemption.gang_candidates(cluster.session, cluster.snapshot, h, req.pods, level, shapes)
    exact = preemption_exact.solve_preemption(cluster.session, cluster.snapshot, h, req.pods, level, shapes)
    brute = brute_force(snapshot, request)
    if brute is None:
        assert not greedy and exact.status == "infeasible"
        return
    assert exact.status == "optimal" and exact.key == brute
    assert ranks.key(exact.victims) == brute
    assert greedy and greedy[0].key >= brute  # the greedy is never better than the optimum


def test_a_preemptor_never_evicts_equal_or_higher_priority_nor_with_never():
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "n", "gpus": 2, "pods": [{"name": "a", "gpus": [0], "priority": 5},
                                          {"name": "b", "gpus": [1], "priority": 9}]}]}
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "auto",
               "pods": [{"name": "x", "gpus": 2, "priority": 9}]}
    result = placer.place(snapshot, request)
    assert not result.preemptions and result.unschedulable
    never = {**request, "pods": [{"name": "x", "gpus": 1, "priority": 100, "preemptionPolicy": "Never"}]}
    assert not placer.preempt(snapshot, never).preemptions
    ok = {**request, "pods": [{"name": "x", "gpus": 1, "priority": 6}]}
    result = placer.preempt(snapshot, ok)
    assert [list(p.victims) for p in result.preemptions] == [["a"]]
    assert result.assignments[0].gpus == (0,) and result.assignments[0].nominated


def test_a_preemptor_that_fits_nowhere_even_empty_never_preempts():
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "n", "gpus": 4, "pods": [{"name": "a", "gpus": [0, 1], "priority": 0}]}]}
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "exact",
               "pods": [{"name": "x", "gpus": 8, "priority": 100}]}
    result = placer.place(snapshot, request)
    assert not result.preemptions and [u.pod for u in result.unschedulable] == ["x"]


@pytest.mark.parametrize("mode", ["greedy", "exact"])
def test_place_without_binding_restores_every_victim(mode):
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "n", "gpus": 2, "pods": [{"name": "a", "gpus": [0, 1], "priority": 0}]}]}
    cluster = placer.Cluster(snapshot)
    decided = cluster.place({"name": "x", "gpus": 2, "priority": 5})
    assert not decided.preemptions  # place() runs with preemption off
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": mode,
               "pods": [{"name": "x", "gpus": 2, "priority": 5}]}
    before = cluster.to_snapshot()
    state = ClusterState(cluster.snapshot, cluster.session, cluster.domains, snapshot_facts(cluster.snapshot), DecisionBook())
    with cluster.lock:  # run_request is what Cluster.place runs, here with preemption on
        result = run_request(state, placer.PlacementRequest.from_dict(request), placer.policies.get("best-fit"), keep=False)
    assert list(result.preemptions[0].victims) == ["a"]
    assert cluster.to_snapshot() == before  # the victim holds its GPUs again


def test_pdb_percentages_follow_kubernetes_rounding():
    budget = placer.PodDisruptionBudget(name="b", selector={"app": "a"}, min_available="50%")
    assert budget.allowed(5) == 2  # minAvailable rounds up: 3 must stay
    assert placer.PodDisruptionBudget(name="b", selector={"app": "a"}, max_unavailable="30%").allowed(5) == 2
    assert not placer.PodDisruptionBudget(name="b", selector={}).matches(
        placer.model.RunningPod(name="x", labels={"app": "a"})
    )  # an empty selector covers nothing


def test_running_gang_is_evicted_whole_across_nodes():
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [
        {"name": "n0", "gpus": 2, "pods": [{"name": "g-0", "gpus": [0, 1], "priority": 0, "gang": "g"}]},
        {"name": "n1", "gpus": 2, "pods": [{"name": "g-1", "gpus": [0, 1], "priority": 0, "gang": "g"},
                                           ]}]}
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "greedy",
               "pods": [{"name": "x", "gpus": 2, "priority": 5}]}
    result = placer.preempt(snapshot, request)
    assert sorted(result.preemptions[0].victims) == ["g-0", "g-1"]
    assert placer.check_placement(snapshot, request, result) == []
    forged = placer.model.replace(result, preemptions=(placer.model.replace(result.preemptions[0], victims=("g-0",)),))
    assert any("evicted whole" in v for v in placer.check_placement(snapshot, request, forged))


def test_bad_preemption_inputs():
    with pytest.raises(InvalidInputError, match="preemption"):
        placer.PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest",
                                           "preemption": "always", "pods": []})
    assert math.isinf(preemption.start_of(placer.model.RunningPod(name="x")))
    assert np.isfinite(preemption.start_of(placer.model.RunningPod(name="x", start_time=3.0)))


def test_explain_says_what_preemption_would_do_when_it_is_off():
    from placer.diagnostics.explain import explain

    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": [
        {"name": f"n{i}", "gpus": 2, "topology": {"rack": f"r{i // 2}"},
         "pods": [{"name": f"low{i}", "gpus": [0, 1], "priority": i}]} for i in range(4)]}
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [
        {"name": "x", "gpus": 2, "priority": 5},
        {"name": "g", "replicas": 2, "gang": "g", "gpus": 2, "priority": 9}],
        "gangs": {"g": {"topology": {"mode": "required", "level": "rack"}}}}
    pending = {p.name: p for p in explain(snapshot, request).pending}
    assert pending["x"].preemption.startswith("would fit on n0 after preempting 1 pod(s) of priority <= 0: low0")
    assert "rack r0 after preempting 2 pod(s)" in pending["g"].preemption
    single = {k: v for k, v in request.items() if k != "gangs"}
    never = {**single, "pods": [{**request["pods"][0], "preemptionPolicy": "Never"}]}
    assert explain(snapshot, never).pending[0].preemption == ""
    on = {**single, "preemption": "greedy", "pods": [{"name": "y", "gpus": 2, "priority": 0}]}
    assert explain(snapshot, on).pending[0].preemption == ""  # nothing of lower priority to evict


@given(cases())
def test_pruned_search_picks_what_the_full_search_picks(case):
    snapshot, request = case
    cluster = placer.Cluster(snapshot)
    pod = placer.PlacementRequest.from_dict({**request, "gangs": {}, "pods": [
        {k: v for k, v in request["pods"][0].items() if k not in ("replicas", "gang")}]}).pods[0]
    full = preemption.pick(preemption.candidates(cluster.session, cluster.snapshot, pod))
    pruned = preemption.pick(preemption.candidates(cluster.session, cluster.snapshot, pod, prune=True))
    assert (full is None) == (pruned is None)
    if full is not None:
        assert full.key() == pruned.key()
        assert [p.name for p in full.victim_pods] == [p.name for p in pruned.victim_pods]
