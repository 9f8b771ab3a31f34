"""Converts ``tests/data/conformance/kueue_quota.json`` (Kueue's scheduler, flavor-assigner and
fair-sharing unit tests, one cycle each) into placer's queue model.

Units are the cases' own plain integers; the opaque extended resources ``r1``, ``gpu`` and
``example.com/gpu`` are read as ``nvidia.com/gpu``. Direct ``usage`` of the flavor-assigner
and DRS tests becomes one admitted workload per ClusterQueue holding it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from placer.queues import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceGroup,
    ResourceQuota,
    Workload,
)

GPU = "nvidia.com/gpu"
ALIASES = {"r1": GPU, "gpu": GPU, "example.com/gpu": GPU}
CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "conformance" / "kueue_quota.json").read_text(encoding="utf-8"))["cases"]


def resource(name: str) -> str:
    return ALIASES.get(name, name)


def groups(raw: list[Mapping[str, Any]] | None) -> tuple[ResourceGroup, ...]:
    out = []
    for g in raw or ():
        flavors = tuple(
            FlavorQuotas(f["name"], {resource(r): ResourceQuota(q["nominal"], q.get("borrowingLimit"), q.get("lendingLimit"))
                                     for r, q in f["resources"].items()})
            for f in g["flavors"])
        out.append(ResourceGroup(tuple(resource(r) for r in g["coveredResources"]), flavors))
    return tuple(out)


def config(case: Mapping[str, Any]) -> QueueConfig:
    queues = {}
    for cq in case["clusterQueues"]:
        p = cq.get("preemption", {})
        bwc = p.get("borrowWithinCohort") or "Never"
        threshold = None
        if isinstance(bwc, Mapping):
            threshold = bwc.get("maxPriorityThreshold")
            bwc = bwc.get("policy", "Never")
        ff = cq.get("flavorFungibility") or {}
        queues[cq["name"]] = ClusterQueue(
            cq["name"], groups(cq["resourceGroups"]), cq.get("cohort"), cq.get("queueingStrategy", "BestEffortFIFO"),
            ClusterQueuePreemption(p.get("withinClusterQueue", "Never"), p.get("reclaimWithinCohort", "Never"), bwc,
                                   threshold),
            FlavorFungibility(ff.get("whenCanBorrow", "MayStopSearch"), ff.get("whenCanPreempt", "TryNextFlavor")),
            cq.get("fairWeight", 1.0))
    cohorts = {c["name"]: Cohort(c["name"], c.get("parent"), groups(c.get("resourceGroups")), c.get("fairWeight", 1.0))
               for c in case.get("cohorts", ())}
    return QueueConfig(cluster_queues=queues, cohorts=cohorts, fair_sharing=bool(case.get("fairSharing")))


def podsets(raw: list[Mapping[str, Any]]) -> tuple[PodSet, ...]:
    return tuple(PodSet(ps["name"], ps["count"], {resource(r): v for r, v in ps["perPodRequests"].items()})
                 for ps in raw)


def workloads(case: Mapping[str, Any]) -> list[Workload]:
    out = []
    for w in case.get("admitted", ()):
        flavors = {ps: {resource(r): f for r, f in m.items()} for ps, m in w["flavors"].items()}
        out.append(Workload(w["name"], podsets(w["podSets"]), priority=w.get("priority", 0),
                            created=w.get("creationOffsetS", 0),
                            admission=Admission(w["clusterQueue"], flavors)))
    for queue, by_flavor in (case.get("usage") or {}).items():
        requests = {(f, resource(r)): v for f, rs in by_flavor.items() for r, v in rs.items()}
        sets = tuple(PodSet(f"{f}-{r}".replace("/", "-").replace(".", "-"), 1, {r: v}) for (f, r), v in requests.items())
        flavors = {ps.name: {r: f} for ps, ((f, r), _) in zip(sets, requests.items())}
        out.append(Workload(f"usage-{queue}", sets, admission=Admission(queue, flavors)))
    for w in case.get("pending", ()):
        out.append(Workload(w["name"], podsets(w["podSets"]), cluster_queue=w["clusterQueue"],
                            priority=w.get("priority", 0), created=w.get("creationOffsetS", 0)))
    return out
