"""Kueue's workload-preemption cases with cohorts (``kueueCases`` of
``tests/data/conformance/preemption.json``, from Kueue's ``TestPreemption``), through one
cycle of the queue engine.

Each case becomes a :class:`QueueConfig` (one flavor-resource group per ClusterQueue over the
resources its quotas name), its admitted workloads (one pod set holding the workload's total
request, admitted in the case's flavors with ``quotaReservedAt`` as the reservation time) and
the preemptor as a pending workload. One :meth:`QueueScheduler.cycle` must evict exactly
Kueue's victims, for Kueue's reasons, on behalf of the preemptor. Units as the file's
``meta.units``: ``cpuMilli`` is millicores (Kueue's ``cpu`` accounting unit), ``memoryMiB`` is
MiB (bytes here). The cases without cohorts run through placer's preemption engine in
``tests/test_kueue_preemption.py``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placer.queues import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from placer.queues.model import CPU, GPU, MEMORY, MIB
from placer.queues.entries import QueuedWorkload
from placer.queues.preemption import ByPriority, priority_prefilter, satisfies_policy
from placer.queues.scheduler import QueueScheduler

ALL_CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "conformance" / "preemption.json").read_text(encoding="utf-8"))["kueueCases"]
CASES = [c for c in ALL_CASES if any(cq.get("cohort") for cq in c["clusterQueues"])]

# Cases of CASES that this engine cannot express, with the reason (none so far).
SKIPPED: dict[str, str] = {}

# resource name in the file -> (Kueue resource, factor to accounting units)
UNITS: dict[str, tuple[str, int]] = {"cpuMilli": (CPU, 1), "memoryMiB": (MEMORY, MIB), "gpus": (GPU, 1)}


def test_the_cohort_cases_are_the_expected_ones() -> None:
    assert [c["id"] for c in CASES] == ["kueue-07", "kueue-08", "kueue-09", "kueue-10", "kueue-12"]
    assert SKIPPED == {}
    assert all("fairSharing" not in c for c in CASES)


def amounts(raw: Mapping[str, int]) -> dict[str, int]:
    return {UNITS[r][0]: v * UNITS[r][1] for r, v in raw.items()}


def cluster_queue(raw: Mapping[str, Any]) -> ClusterQueue:
    resources: list[str] = []
    flavors = []
    for flavor, by_resource in raw["quotas"].items():
        quotas = {}
        for r, q in by_resource.items():
            name, factor = UNITS[r]
            limits = [None if q.get(k) is None else q[k] * factor for k in ("borrowingLimit", "lendingLimit")]
            quotas[name] = ResourceQuota(q["nominal"] * factor, *limits)
            if name not in resources:
                resources.append(name)
        flavors.append(FlavorQuotas(flavor, quotas))
    p = raw.get("preemption", {})
    bwc = p.get("borrowWithinCohort") or {}
    return ClusterQueue(
        raw["name"], (ResourceGroup(tuple(resources), tuple(flavors)),), raw.get("cohort"),
        preemption=ClusterQueuePreemption(p.get("withinClusterQueue", "Never"), p.get("reclaimWithinCohort", "Never"),
                                          bwc.get("policy", "Never"), bwc.get("maxPriorityThreshold")))


def workload(raw: Mapping[str, Any]) -> Workload:
    ((flavor, requests),) = raw["resources"].items()  # one flavor per workload in these cases
    admission = None
    if raw.get("admitted"):
        admission = Admission(raw["clusterQueue"], {"main": {r: flavor for r in amounts(requests)}},
                              reserved_at=raw["quotaReservedAt"])
    return Workload(raw["name"], (PodSet("main", 1, amounts(requests)),), namespace="ns",
                    cluster_queue=None if admission else raw["clusterQueue"], priority=raw.get("priority", 0),
                    created=raw.get("creationTime", 0), admission=admission)


def scheduler(case: Mapping[str, Any]) -> QueueScheduler:
    queues = {cq["name"]: cluster_queue(cq) for cq in case["clusterQueues"]}
    flavors = {f: ResourceFlavor(f) for cq in case["clusterQueues"] for f in cq["quotas"]}
    s = QueueScheduler(QueueConfig(flavors=flavors, cluster_queues=queues))
    for w in case["workloads"]:
        assert w["admitted"]
        s.submit(workload(w))
    assert not case["preemptor"].get("admitted")
    s.submit(workload(case["preemptor"]))
    return s


@pytest.mark.parametrize("case", [c for c in CASES if c["id"] not in SKIPPED], ids=lambda c: c["id"])
def test_kueue_cohort_preemption(case: Mapping[str, Any]) -> None:
    s = scheduler(case)
    preemptor = f"ns/{case['preemptor']['name']}"
    result = s.cycle(now=0)
    assert result.admitted == ()
    expected = {f"ns/{v['name']}": v["reason"] for v in case["expected"]["victims"]}
    assert {p.workload: p.reason for p in result.preempted} == expected
    assert all(p.by == preemptor for p in result.preempted)
    (mine,) = [p for p in result.pending if p.workload == preemptor]
    assert mine.needs_preemption == bool(expected)
    for key in expected:
        assert not s.is_admitted(key)
    for w in case["workloads"]:
        key = f"ns/{w['name']}"
        assert s.is_admitted(key) == (key not in expected)
    if expected:
        # the victims are gone: the preemptor is admitted in the next cycle
        nxt = s.cycle(now=1)
        assert preemptor in [a.workload for a in nxt.admitted]



def test_a_workload_admitted_in_this_cycle_is_no_preemption_candidate() -> None:
    """Kueue adds a workload admitted during a cycle to the snapshot's usage only
    (``cq.AddUsage`` in ``Scheduler.processEntry``), never to the ClusterQueue's workloads
    the preemptor reads its candidates from, so a later head of the same cycle cannot pick it
    as a victim. Here (fair sharing) ``q0`` borrows CPU on a zero weight, ``early`` (q0)
    goes first and is admitted, and ``late`` (q2) fits the quota but not the node: the
    victim is ``borrower``, admitted in an earlier cycle, never ``early`` (the most recently
    admitted, which the engine used to take)."""
    from placer.queues import Cohort, pod_for_requests

    def quota(gpus: int, cpu: int) -> tuple[ResourceGroup, ...]:
        return (ResourceGroup((GPU, CPU), (FlavorQuotas("gpu", {GPU: ResourceQuota(gpus), CPU: ResourceQuota(cpu)}),)),)

    def job(name: str, cq: str, gpus: int, cpu: int, created: float) -> Workload:
        requests = {GPU: gpus, CPU: cpu}
        return Workload(name, (PodSet("main", 1, requests, pod_for_requests("main", requests)),), namespace=cq,
                        cluster_queue=cq, created=created)

    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot",
                "nodeTypes": {"dgx": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000,
                                      "memoryMiB": 512000}},
                "nodes": [{"name": "n1", "type": "dgx"}]}
    config = QueueConfig(
        flavors={"gpu": ResourceFlavor("gpu")},
        cluster_queues={"q0": ClusterQueue("q0", quota(4, 0), "lab", fair_weight=0.0),
                        "q2": ClusterQueue("q2", quota(2, 0), "lab",
                                           preemption=ClusterQueuePreemption(reclaim_within_cohort="Any"))},
        cohorts={"lab": Cohort("lab", resource_groups=quota(3, 4000))},
        fair_sharing=True)
    s = QueueScheduler(config, snapshot)
    s.submit(job("borrower", "q0", 1, 2000, created=0))
    assert [a.workload for a in s.cycle(now=0).admitted] == ["q0/borrower"]
    s.submit(job("early", "q0", 1, 0, created=1))
    s.submit(job("late", "q2", 7, 1000, created=2))
    result = s.cycle(now=10)
    assert [a.workload for a in result.admitted] == ["q0/early"]
    # the victim is the workload admitted before this cycle, never `early`
    assert [(p.workload, p.by, p.reason) for p in result.preempted] == [("q0/borrower", "q2/late", "InCohortFairSharing")]
    assert s.is_admitted("q0/early")
    nxt = s.cycle(now=20)
    assert [a.workload for a in nxt.admitted] == ["q2/late"] and nxt.preempted == ()
    assert s.is_admitted("q0/early")


@given(priorities=st.lists(st.integers(-3, 3), max_size=12), preemptor=st.integers(-3, 3),
       policy=st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]))
def test_the_priority_prefilter_keeps_every_workload_the_policy_may_allow(
        priorities: list[int], preemptor: int, policy: str) -> None:
    def queued(name: str, priority: int, created: float) -> QueuedWorkload:
        return QueuedWorkload(Workload(name, (PodSet("main", 1, {GPU: 1}),), priority=priority, created=created),
                              "q", [{GPU: 1}])

    admitted = [queued(f"w{i}", p, float(i)) for i, p in enumerate(priorities)]
    by = queued("p", preemptor, 5.0)
    allowed = {w.key for w in admitted if satisfies_policy(by, w, policy)}
    for pool in (admitted, ByPriority(admitted)):
        kept = list(priority_prefilter(by, pool, policy))
        assert allowed <= {w.key for w in kept}
        assert all(satisfies_policy(by, w, policy) or w.priority == preemptor for w in kept)
