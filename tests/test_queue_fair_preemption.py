"""Fair-sharing preemption: cases of Kueue's ``TestFairPreemptions``
(``pkg/scheduler/preemption/preemption_fair_test.go`` at kubernetes-sigs/kueue ff69552), as
facts: ClusterQueues a, b, c with 3 CPUs nominal each and ``preemptible`` with none, all in
cohort ``all`` (within the queue: LowerPriority; reclaim: Any; borrowWithinCohort:
LowerPriority below priority -3); every workload reserved at the same time. One cycle with
the incoming workload pending in its queue must evict exactly Kueue's victims, for Kueue's
reasons. CPU in millicores."""
from __future__ import annotations

from typing import Optional

import pytest

from placer.queues import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from placer.queues.scheduler import QueueScheduler

CPU = "cpu"
FAIR = "InCohortFairSharing"
RECLAIM = "InCohortReclamation"
WITHIN = "InClusterQueue"

UNITS_A3_B5_C1 = ["a1:a", "a2:a", "a3:a", "b1:b", "b2:b", "b3:b", "b4:b", "b5:b", "c1:c"]
UNITS_A3_B6 = ["a1:a", "a2:a", "a3:a"] + [f"b{i}:b" for i in range(1, 7)]

# (name, admitted "name:queue[:cpu[:priority]]", incoming "name:queue:cpu", victims, strategies, weights)
CASES: list[tuple[str, list[str], str, dict[str, str], Optional[list[str]], dict[str, float]]] = [
    ("reclaim nominal from user using the most", UNITS_A3_B5_C1, "c_incoming:c:1000", {"b1": RECLAIM}, None, {}),
    ("reclaim from queue using less if the latest of the most is not enough",
     ["a1:a:3000", "a2:a:1000", "b1:b:2000", "b2:b:3000"], "c_incoming:c:3000", {"a1": RECLAIM}, None, {}),
    ("reclaim borrowable quota from user using the most", UNITS_A3_B5_C1, "a_incoming:a:1000", {"b1": FAIR}, None, {}),
    ("preempt one from each CQ borrowing",
     ["a1:a:500", "a2:a:500", "a3:a:3000", "b1:b:500", "b2:b:500", "b3:b:3000"], "c_incoming:c:2000",
     {"a1": RECLAIM, "b1": RECLAIM}, None, {}),
    ("can't preempt when everyone under nominal",
     ["a1:a", "a2:a", "a3:a", "b1:b", "b2:b", "b3:b", "c1:c", "c2:c", "c3:c"], "c_incoming:c:1000", {}, None, {}),
    ("can't preempt when it would switch the imbalance",
     ["a1:a", "a2:a", "a3:a", "b1:b", "b2:b", "b3:b", "b4:b", "b5:b"], "a_incoming:a:2000", {}, None, {}),
    ("can preempt lower priority workloads from same CQ",
     ["a1_low:a:1000:-1", "a2_low:a:1000:-1", "a3:a", "a4:a", "b1:b", "b2:b", "b3:b", "b4:b", "b5:b"],
     "a_incoming:a:2000", {"a1_low": WITHIN, "a2_low": WITHIN}, None, {}),
    ("can preempt a combination of same CQ and highest user",
     ["a_low:a:1000:-1", "a2:a", "a3:a"] + [f"b{i}:b" for i in range(1, 7)], "a_incoming:a:2000",
     {"a_low": WITHIN, "b1": FAIR}, None, {}),
    ("preempt huge workload if there is no other option", ["b1:b:9000"], "a_incoming:a:2000", {"b1": RECLAIM}, None, {}),
    ("can't preempt huge workload if the incoming is also huge", ["a1:a:2000", "b1:b:7000"], "a_incoming:a:5000",
     {}, None, {}),
    ("can't preempt 2 smaller workloads if the incoming is huge", ["b1:b:2000", "b2:b:2000", "b3:b:3000"],
     "a_incoming:a:6000", {}, None, {}),
    ("preempt from target and others even if over nominal",
     ["a1_low:a:2000:-1", "a2_low:a:1000:-1", "b1:b:3000", "b2:b:3000"], "a_incoming:a:4000",
     {"a1_low": WITHIN, "b1": FAIR}, None, {}),
    ("prefer workloads that don't make the target CQ have the biggest share",
     ["b1:b:2000", "b2:b:1000", "b3:b:2000", "c1:c:1000"], "a_incoming:a:3500", {"b2": FAIR}, None, {}),
    ("preempt from different queues if the end result has a smaller max share",
     ["b1:b:2000", "b2:b:2500", "c1:c:2000", "c2:c:2500"], "a_incoming:a:3500", {"b1": FAIR, "c1": FAIR}, None, {}),
    ("scenario above does not flap", ["a1:a:3500", "b2:b:2500", "c2:c:2500"], "b_incoming:b:2000", {}, None, {}),
    ("cannot make the candidate CQ go under nominal after preempting one",
     ["b1:b:3000", "b2:b:3000", "c1:c:3000"], "a_incoming:a:4000", {}, None, {}),
    ("workloads under priority threshold not capriciously preempted",
     ["a1:a", "a2:a", "a3:a", "b1:b", "b2:b", "b3:b", "preemptible1:preemptible:1000:-3",
      "preemptible2:preemptible:1000:-3", "preemptible3:preemptible:1000:-3"], "a_incoming:a:2000", {}, None, {}),
    ("preempt lower priority first, even if big", ["a1:a:3000", "b_low:b:5000:0", "b_high:b:1000:1"],
     "a_incoming:a:1000", {"b_low": FAIR}, ["LessThanInitialShare"], {}),
    ("preempt workload that doesn't transfer the imbalance, even if high priority",
     ["a1:a:3000", "b_low:b:5000:0", "b_high:b:1000:1"], "a_incoming:a:1000", {"b_high": FAIR},
     ["LessThanOrEqualToFinalShare"], {}),
    ("CQ with higher weight can preempt more", UNITS_A3_B6, "a_incoming:a:2000", {"b1": FAIR, "b2": FAIR}, None,
     {"a": 2.0}),
    ("can preempt anything borrowing from CQ with 0 weight", UNITS_A3_B6, "a_incoming:a:3000",
     {"b1": FAIR, "b2": FAIR, "b3": FAIR}, None, {"b": 0.0}),
]


def queue(name: str, nominal: int, weight: float) -> ClusterQueue:
    group = ResourceGroup((CPU,), (FlavorQuotas("default", {CPU: ResourceQuota(nominal)}),))
    if name == "preemptible":
        preemption = ClusterQueuePreemption()
    else:
        preemption = ClusterQueuePreemption("LowerPriority", "Any", "LowerPriority", -3)
    return ClusterQueue(name, (group,), "all", preemption=preemption, fair_weight=weight)


def workload(spec: str, admitted: bool) -> Workload:
    name, cq, *rest = spec.split(":")
    cpu = int(rest[0]) if rest else 1000
    priority = int(rest[1]) if len(rest) > 1 else 0
    admission = Admission(cq, {"main": {CPU: "default"}}, reserved_at=0.0) if admitted else None
    return Workload(name, (PodSet("main", 1, {CPU: cpu}),), namespace="ns", cluster_queue=None if admitted else cq,
                    priority=priority, admission=admission)


@pytest.mark.parametrize("name, admitted, incoming, victims, strategies, weights", CASES, ids=[c[0] for c in CASES])
def test_fair_preemption(name: str, admitted: list[str], incoming: str, victims: dict[str, str],
                         strategies: Optional[list[str]], weights: dict[str, float]) -> None:
    queues = {q: queue(q, 0 if q == "preemptible" else 3000, weights.get(q, 1.0)) for q in ("a", "b", "c", "preemptible")}
    config = QueueConfig(cluster_queues=queues, cohorts={"all": Cohort("all")}, fair_sharing=True,
                         **({"preemption_strategies": tuple(strategies)} if strategies else {}))
    s = QueueScheduler(config)
    for spec in admitted:
        s.submit(workload(spec, admitted=True))
    s.submit(workload(incoming, admitted=False))
    result = s.cycle()
    assert not result.admitted
    assert {p.workload.split("/")[1]: p.reason for p in result.preempted} == victims
