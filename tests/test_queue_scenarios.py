"""Issue #16's hand-checkable scenarios on one 8-GPU node and one cohort; evictions take
effect when the cycle ends, so a preemptor starts in the next cycle at the same time."""
from __future__ import annotations

from typing import Optional

import pytest

import placer
from placer.queues import (
    ClusterQueue,
    ClusterQueuePreemption,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    pod_for_requests,
)
from placer.queues.scheduler import QueueScheduler, admit

GPU = "nvidia.com/gpu"
SNAPSHOT = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodeTypes": {"dgx": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000, "memoryMiB": 512000}},
    "nodes": [{"name": "n1", "type": "dgx"}],
}


def queue(name: str, nominal: int, *, cohort: Optional[str] = "lab", reclaim: str = "Never",
          strategy: str = "BestEffortFIFO", lending: Optional[int] = None) -> ClusterQueue:
    quota = ResourceQuota(nominal, lending_limit=lending)
    return ClusterQueue(name, (ResourceGroup((GPU,), (FlavorQuotas("gpu", {GPU: quota}),)),), cohort, strategy,
                        ClusterQueuePreemption(reclaim_within_cohort=reclaim))


def config(*queues: ClusterQueue) -> QueueConfig:
    return QueueConfig(flavors={"gpu": ResourceFlavor("gpu")}, cluster_queues={q.name: q for q in queues})


def job(name: str, cq: str, gpus: int, created: float = 0.0) -> Workload:
    requests = {GPU: gpus}
    return Workload(name, (PodSet("main", 1, requests, pod_for_requests("main", requests)),), namespace=cq,
                    cluster_queue=cq, created=created)


def running_gpus(s: QueueScheduler, keys: list[str]) -> int:
    return sum(len(a.gpus) for k in keys for a in s.placed(k))


def check_cluster(s: QueueScheduler, keys: list[str]) -> None:
    assignments = [a for k in keys for a in s.placed(k)]
    pods = [{"name": a.pod, "gpus": len(a.gpus)} for a in assignments]
    report = placer.check_placement(SNAPSHOT, {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods},
                                    {"apiVersion": "placer/v1", "kind": "PlacementResult",
                                     "assignments": [a.to_dict() for a in assignments], "unschedulable": []})
    assert not report, report


def borrowing_a(reclaim: str) -> tuple[QueueScheduler, list[str]]:
    s = QueueScheduler(config(queue("a", 4, reclaim=reclaim), queue("b", 4, reclaim=reclaim)), SNAPSHOT)
    keys = []
    for i in range(3):
        w = job(f"a{i}", "a", 2, created=i)
        s.submit(w)
        keys.append(w.key)
    while s.active_count:
        s.cycle(now=0)
    assert all(s.is_admitted(k) for k in keys)
    assert s.borrowing("a") and running_gpus(s, keys) == 6
    return s, keys


def test_reclaim_any_evicts_exactly_one_borrowed_job_and_b_starts_at_once() -> None:
    s, a_keys = borrowing_a("Any")
    b = job("big", "b", 4, created=10)
    s.submit(b)
    first = s.cycle(now=100)
    assert not first.admitted
    assert len(first.preempted) == 1 and first.preempted[0].workload in a_keys
    assert first.preempted[0].by == b.key and first.preempted[0].reason == "InCohortReclamation"
    (waiting,) = [p for p in first.pending if p.workload == b.key]
    assert waiting.needs_preemption
    second = s.cycle(now=100)  # same time: eviction is instantaneous
    assert [a.workload for a in second.admitted] == [b.key] and not second.preempted
    running = [k for k in a_keys if s.is_admitted(k)] + [b.key]
    assert len(running) == 3 and running_gpus(s, running) == 8
    assert not s.borrowing("a") and not s.borrowing("b")
    check_cluster(s, running)
    # the evicted A job is pending again and cannot come back while B holds its quota
    third = s.cycle(now=100)
    assert not third.admitted and not third.preempted


def test_reclaim_never_b_waits_for_an_a_job_to_end() -> None:
    s, a_keys = borrowing_a("Never")
    b = job("big", "b", 4, created=10)
    s.submit(b)
    for _ in range(3):
        r = s.cycle(now=100)
        assert not r.admitted and not r.preempted
    (waiting,) = [p for p in r.pending if p.workload == b.key]
    assert waiting.inadmissible and s.active_count == 0
    s.finish(a_keys[0])
    r = s.cycle(now=200)
    assert [a.workload for a in r.admitted] == [b.key]
    check_cluster(s, a_keys[1:] + [b.key])


@pytest.mark.parametrize("strategy, small_starts", [("StrictFIFO", False), ("BestEffortFIFO", True)])
def test_strict_fifo_blocks_best_effort_does_not(strategy: str, small_starts: bool) -> None:
    s = QueueScheduler(config(queue("q", 8, cohort=None, strategy=strategy)), SNAPSHOT)
    running = job("running", "q", 4, created=0)
    s.submit(running)
    s.cycle(now=0)
    head, small = job("head", "q", 8, created=1), job("small", "q", 2, created=2)
    s.submit(head)
    s.submit(small)
    admitted = [a.workload for _ in range(3) for a in s.cycle(now=10).admitted]
    assert admitted == ([small.key] if small_starts else [])
    assert not s.is_admitted(head.key)


def test_lending_limit_zero_makes_a_big_job_inadmissible() -> None:
    cfg = config(queue("a", 4, lending=0), queue("b", 4))
    result = admit(SNAPSHOT, cfg, [job("big", "b", 6)])
    assert not result.admitted
    (pending,) = result.pending
    assert pending.workload == "b/big" and pending.inadmissible
    assert "maximum capacity" in pending.reason
    # with A lending everything the same job borrows 2 and is admitted
    result = admit(SNAPSHOT, config(queue("a", 4), queue("b", 4)), [job("big", "b", 6)])
    assert [(a.workload, a.borrowing) for a in result.admitted] == [("b/big", True)]


def test_a_preemptor_keeps_the_head_until_it_is_admitted() -> None:
    # A borrows 2 (a0..a2 running, 2 GPUs each); B holds an older 6-GPU job that is
    # inadmissible, then a 4-GPU job that reclaims. The eviction unparks the old job, but the
    # preemptor stays B's head and takes the room it freed before the victim, pending again
    # in A, is admitted back (Kueue's sticky preemptor of a BestEffortFIFO queue).
    s, a_keys = borrowing_a("Any")
    s.submit(job("old", "b", 6, created=5))
    first = s.cycle(now=50)
    assert not first.admitted and not first.preempted
    small = job("small", "b", 4, created=10)
    s.submit(small)
    second = s.cycle(now=100)
    assert [p.by for p in second.preempted] == [small.key]
    (victim,) = [p.workload for p in second.preempted]
    third = s.cycle(now=100)
    assert [a.workload for a in third.admitted] == [small.key] and not third.preempted
    assert not s.is_admitted(victim)
    fourth = s.cycle(now=100)
    assert not fourth.admitted and not fourth.preempted
    check_cluster(s, [k for k in a_keys if s.is_admitted(k)] + [small.key])


def test_a_placement_that_failed_is_tried_again_once_pods_leave() -> None:
    # Quota never binds (nominal 16 on one 8-GPU node): the two 8-GPU jobs fail placement
    # while the 4-GPU job runs, and the first of them starts when it ends.
    s = QueueScheduler(config(queue("q", 16, cohort=None)), SNAPSHOT)
    running = job("running", "q", 4, created=0)
    s.submit(running)
    assert [a.workload for a in s.cycle(now=0).admitted] == [running.key]
    first, second = job("x", "q", 8, created=1), job("y", "q", 8, created=2)
    s.submit(first)
    s.submit(second)
    for head in (first, second):
        r = s.cycle(now=10)
        assert not r.admitted and not r.preempted
        (tried,) = [p for p in r.pending if p.workload == head.key]
        assert tried.inadmissible and tried.reason.startswith("does not fit on the cluster: 0/1 nodes")
    assert s.active_count == 0
    s.finish(running.key)
    assert [a.workload for a in s.cycle(now=20).admitted] == [first.key]
    check_cluster(s, [first.key])
    s.finish(first.key)
    assert [a.workload for a in s.cycle(now=30).admitted] == [second.key]
