"""Kueue's workload-level preemption cases that need no queue semantics, through
placer's preemption engine (the cohort cases arrive with the queues issue).

Within one ClusterQueue, Kueue frees quota: each flavor's nominal quota is a pool the
admitted workloads draw from. Here each flavor becomes a node whose capacity is that quota,
each admitted workload a running pod per flavor it uses (a running gang when it uses
several: evicted whole), with ``quotaReservedAt`` as its start; the preemptor asks, per
flavor in ``Preempt`` mode, for what it needs there. The TAS case places real pods on real
nodes. Expected victims are Kueue's.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import placer

CASES = [
    c for c in json.loads((Path(__file__).parent / "data" / "conformance" / "preemption.json").read_text())["kueueCases"]
    if all(cq.get("cohort") is None for cq in c["clusterQueues"])
]
UNITS = {"cpuMilli": "cpuMilli", "memoryMiB": "memoryMiB"}


def quota_case(case: dict) -> tuple[dict, dict]:
    (queue,) = case["clusterQueues"]
    nodes = []
    for flavor, resources in queue["quotas"].items():
        node = {"name": flavor, "labels": {"flavor": flavor}, "maxPods": 100,
                "cpuMilli": 0, "memoryMiB": 0, "pods": []}
        for resource, quota in resources.items():
            node[UNITS[resource]] = quota["nominal"]
        nodes.append(node)
    by_name = {n["name"]: n for n in nodes}
    for w in case["workloads"]:
        flavors = w["resources"]
        for flavor, used in flavors.items():
            pod = {"name": f"{w['name']}@{flavor}", "priority": w["priority"], "startTime": w["quotaReservedAt"],
                   **{UNITS[r]: v for r, v in used.items()}}
            if len(flavors) > 1:
                pod["gang"] = w["name"]
            by_name[flavor]["pods"].append(pod)
    pre = case["preemptor"]
    modes = pre["assignmentModes"]
    pods = [
        {"name": f"{pre['name']}@{flavor}", "priority": pre["priority"], "nodeSelector": {"flavor": flavor},
         **{UNITS[r]: v for r, v in used.items()}}
        for flavor, used in pre["resources"].items()
        if any(mode == "Preempt" for mode in modes.get(flavor, {}).values())
    ]
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "greedy", "pods": pods}
    if len(pods) > 1:
        request["gangs"] = {pre["name"]: {}}
        for p in pods:
            p["gang"] = pre["name"]
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": nodes}, request


def tas_case(case: dict) -> tuple[dict, dict]:
    nodes = [{"name": n["name"], "labels": n["labels"], "cpuMilli": n["cpuMilli"], "memoryMiB": n["memoryMiB"],
              "maxPods": n["maxPods"], "pods": []} for n in case["nodes"]]
    by_name = {n["name"]: n for n in nodes}
    for w in case["workloads"]:
        (pod_set,) = w["podSets"]
        k = 0
        for node, count in w["topologyAssignment"].items():
            for _ in range(count):
                by_name[node]["pods"].append({"name": f"{w['name']}@{k}", "priority": w["priority"],
                                              "cpuMilli": pod_set["cpuMilliPerPod"], "startTime": w["quotaReservedAt"],
                                              "gang": w["name"]})
                k += 1
    pre = case["preemptor"]
    (pod_set,) = pre["podSets"]
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "preemption": "greedy",
               "pods": [{"name": pre["name"], "replicas": pod_set["count"], "gang": pre["name"],
                         "priority": pre["priority"], "cpuMilli": pod_set["cpuMilliPerPod"]}],
               "gangs": {pre["name"]: {}}}
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": nodes}, request


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kueue_workload_preemption(case):
    snapshot, request = tas_case(case) if "nodes" in case else quota_case(case)
    result = placer.preempt(snapshot, request)
    assert placer.check_placement(snapshot, request, result) == []
    victims = {name.split("@")[0] for p in result.preemptions for name in p.victims}
    assert victims == {v["name"] for v in case["expected"]["victims"]}
    assert len(result.assignments) == len(placer.PlacementRequest.from_dict(request).pods)
