"""The replay over time (issue #16 items 3–4, SPEC §9): :func:`placer.replay.timeline.run_timeline`
and :func:`~placer.replay.timeline.run_spec`.

Expected values come from hand arithmetic (hand-made clusters of one or two 8-GPU nodes)
or from an independent replay of the event log (:func:`check_log`: its own state machine,
per-GPU and per-node bookkeeping of the assignments, its own delays), never from the code
under test.
"""
from __future__ import annotations

import collections
import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pytest

from placer.adapters import openb
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PodRequest, load_snapshot
from placer.queues import scheduler as engine
from placer.replay import timeline as tl
from placer.replay.arrivals import Arrivals, TimelineJob
from placer.queues.model import (
    CPU,
    GPU,
    MEMORY,
    MIB,
    ClusterQueue,
    ClusterQueuePreemption,
    FlavorQuotas,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)
from placer.queues.result import AdmissionResult, AdmittedWorkload, PreemptedWorkload
from placer.replay.timeline_queues import TimelineQueues, qos_queues


def cluster(nodes: int = 1) -> ClusterSnapshot:
    return load_snapshot({
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodeTypes": {"dgx": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000, "memoryMiB": 512000}},
        "nodes": [{"name": f"n{i}", "type": "dgx"} for i in range(1, nodes + 1)],
    })


def job(name: str, arrival: float, duration: float, gpus: int, qos: str = "BE", milli: int = 1000) -> TimelineJob:
    pod = PodRequest(name=name, gpus=gpus, gpu_milli=milli, cpu_milli=1000, memory_mib=1024)
    return TimelineJob(name=name, arrival=arrival, duration=duration, qos=qos, pod=pod, source=name)


def cq(name: str, gpus: int, *, reclaim: str = "Never", strategy: str = "BestEffortFIFO",
       cohort: Optional[str] = "lab") -> ClusterQueue:
    quotas = {GPU: ResourceQuota(gpus), CPU: ResourceQuota(32_000), MEMORY: ResourceQuota(256 * 1024 * MIB)}
    group = ResourceGroup((GPU, CPU, MEMORY), (FlavorQuotas("default", quotas),))
    return ClusterQueue(name, (group,), cohort, strategy, ClusterQueuePreemption(reclaim_within_cohort=reclaim))


def by_hand(queues: Sequence[ClusterQueue], jobs: Sequence[TimelineJob], queue_of: dict[str, str]) -> TimelineQueues:
    """Queues made by hand, quotas in whole GPUs (``nvidia.com/gpu``)."""
    config = QueueConfig(flavors={"default": ResourceFlavor("default")}, cluster_queues={q.name: q for q in queues})
    return TimelineQueues(config=config, queue_of=queue_of, gpu_accounting="devices")


def key(name: str) -> str:
    return f"default/{name}"


def times_of(outcome: tl.TimelineOutcome, kind: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = collections.defaultdict(list)
    for e in outcome.log:
        if e.kind == kind:
            out[e.workload].append(e.time)
    return out


def check_log(outcome: tl.TimelineOutcome, snapshot: ClusterSnapshot, jobs: Sequence[TimelineJob]) -> None:
    """Replay the event log independently and compare it with the outcome.

    Every admitted job later finishes or is evicted, or still runs at the end (and then its
    run reaches past the end); a job finishes exactly its duration after its last
    admission; no GPU holds more than 1000 milli, no node more GPUs or cpu than it has; the
    recorder's running GPUs at every sample are the log's; counts and delays match.
    """
    by_key = {key(j.name): j for j in jobs}
    nodes = {n.name: n.hardware for n in snapshot.nodes}
    total_gpus = sum(h.gpus for h in nodes.values())
    state: dict[str, str] = {}
    pending_since: dict[str, float] = {}
    waited: dict[str, float] = collections.defaultdict(float)
    admitted_at: dict[str, float] = {}
    holding: dict[str, list[tuple[str, int, int]]] = {}
    gpu_milli: dict[tuple[str, int], int] = collections.defaultdict(int)
    node_cpu: dict[str, int] = collections.defaultdict(int)
    running_at: dict[float, float] = {}
    evictions = 0
    previous = -math.inf

    def release(k: str) -> None:
        for node, gpu, milli in holding.pop(k):
            gpu_milli[(node, gpu)] -= milli
        node_cpu[admitted_node[k]] -= by_key[k].pod.cpu_milli

    admitted_node: dict[str, str] = {}
    for e in outcome.log:
        assert e.time >= previous
        previous = e.time
        k = e.workload
        if e.kind == "submitted":
            assert k not in state and e.time == by_key[k].arrival
            state[k], pending_since[k] = "pending", e.time
        elif e.kind == "admitted":
            assert state[k] == "pending"
            waited[k] += e.time - pending_since[k]
            state[k], admitted_at[k] = "running", e.time
            (a,) = e.assignments
            assert a.node in nodes
            holding[k] = []
            for gpu in a.gpus:
                assert 0 <= gpu < nodes[a.node].gpus
                milli = a.gpu_milli if a.gpu_milli is not None else 1000
                holding[k].append((a.node, gpu, milli))
                gpu_milli[(a.node, gpu)] += milli
                assert gpu_milli[(a.node, gpu)] <= 1000, f"GPU {gpu} of {a.node} over-committed at {e.time}"
            assert len(a.gpus) == by_key[k].gpus
            admitted_node[k] = a.node
            node_cpu[a.node] += by_key[k].pod.cpu_milli
            assert node_cpu[a.node] <= nodes[a.node].cpu_milli
        elif e.kind == "evicted":
            assert state[k] == "running" and e.by in state
            release(k)
            state[k], pending_since[k] = "pending", e.time
            evictions += 1
        else:
            assert e.kind == "finished" and state[k] == "running"
            assert e.time == admitted_at[k] + by_key[k].duration, f"{k} ran {e.time - admitted_at[k]} s"
            release(k)
            state[k] = "done"
        running = sum(by_key[x].gpu_demand for x, s in state.items() if s == "running")
        assert running <= total_gpus + 1e-9
        running_at[e.time] = running
    running_keys = [k for k, s in state.items() if s == "running"]
    assert outcome.running_at_end == len(running_keys)
    assert all(admitted_at[k] + by_key[k].duration >= outcome.end for k in running_keys)
    assert outcome.pending_at_end == sum(1 for s in state.values() if s == "pending")
    assert outcome.evictions == evictions == outcome.metrics.cluster.preemptions_suffered
    assert outcome.finished == sum(1 for s in state.values() if s == "done")
    assert outcome.admissions == sum(1 for e in outcome.log if e.kind == "admitted")
    # The recorder's samples against the log's running GPUs at each time.
    series = outcome.series
    assert list(series.times) == sorted(running_at)
    assert series.running_gpus.sum(axis=1) == pytest.approx([running_at[t] for t in series.times], abs=1e-6)
    assert (series.running_gpus.sum(axis=1) <= series.cluster_gpus + 1e-9).all()
    assert (series.unallocated_gpus >= -1e-9).all()
    # Delays of the jobs not in progress at 0; one pending at the end counted at its wait so far.
    delays = [waited[k] + (outcome.end - pending_since[k] if s == "pending" else 0.0)
              for k, s in state.items() if not by_key[k].initial]
    m = outcome.metrics.cluster
    if delays:
        assert (m.delay_p50_s, m.delay_p99_s) == pytest.approx(tuple(np.percentile(delays, [50, 99])))
    else:
        assert m.delay_p50_s is None
    assert m.never_admitted == sum(1 for k in state if k not in admitted_at and not by_key[k].initial)
    assert m.delays_censored == sum(1 for k, s in state.items() if s == "pending" and not by_key[k].initial)


# ---------------------------------------------------------------------- issue #16 scenario (1) over time


def scenario_one(reclaim: str) -> tuple[tl.TimelineOutcome, list[TimelineJob]]:
    """One 8-GPU node; A and B nominal 4 GPUs each in one cohort. A runs three 2-GPU jobs from 0
    (borrowing 2); B submits a 4-GPU job at 100 that runs 500 s."""
    jobs = [job("a0", 0, 1000, 2), job("a1", 0, 1100, 2), job("a2", 0, 1200, 2), job("b", 100, 500, 4)]
    queues = by_hand([cq("A", 4, reclaim=reclaim), cq("B", 4, reclaim=reclaim)], jobs,
                     {"a0": "A", "a1": "A", "a2": "A", "b": "B"})
    outcome = tl.run_timeline(cluster(), jobs, queues, keep_log=True)
    check_log(outcome, cluster(), jobs)
    return outcome, jobs


def test_scenario_one_reclaim_any_evicts_one_a_job_and_b_starts_at_once() -> None:
    outcome, jobs = scenario_one("Any")
    evicted = times_of(outcome, "evicted")
    admitted = times_of(outcome, "admitted")
    finished = times_of(outcome, "finished")
    assert len(evicted) == 1 and outcome.evictions == 1
    ((victim, when),) = evicted.items()
    assert victim in {key("a0"), key("a1"), key("a2")} and when == [100.0]
    assert [e.by for e in outcome.log if e.kind == "evicted"] == [key("b")]
    assert admitted[key("b")] == [100.0] and finished[key("b")] == [600.0]
    # The victim lost its run: it starts again when B leaves (borrowing again) and runs its
    # whole duration from there; its first run's departure never fires.
    duration = {key(j.name): j.duration for j in jobs}
    assert admitted[victim] == [0.0, 600.0]
    assert finished[victim] == [600.0 + duration[victim]]
    for other in {key("a0"), key("a1"), key("a2")} - {victim}:
        assert admitted[other] == [0.0] and finished[other] == [duration[other]]
    a, b = outcome.metrics.queue("A"), outcome.metrics.queue("B")
    assert (a.preemptions_suffered, a.preemptions_caused, b.preemptions_suffered, b.preemptions_caused) == (1, 0, 0, 1)
    assert (b.delay_p50_s, b.delay_p99_s) == (0.0, 0.0)
    # A waited 500 s for the victim's second start; the other two A jobs waited 0.
    assert a.delay_p99_s == pytest.approx(np.percentile([0, 0, 500], 99))
    # A borrows (6 GPUs) on [0, 100) and from 600 until the first of the other two A jobs ends.
    others = [duration[k] for k in {key("a0"), key("a1"), key("a2")} - {victim}]
    assert outcome.end == 600.0 + duration[victim]
    assert a.borrowing_fraction == pytest.approx((100 + min(others) - 600) / outcome.end)
    assert outcome.stalls == 0


def test_scenario_one_never_b_waits_for_an_a_job_to_end() -> None:
    outcome, _ = scenario_one("Never")
    assert outcome.evictions == 0 and not times_of(outcome, "evicted")
    admitted, finished = times_of(outcome, "admitted"), times_of(outcome, "finished")
    assert admitted[key("b")] == [1000.0]  # when a0, the first A job, ends
    assert finished[key("b")] == [1500.0]
    assert {k: v for k, v in admitted.items() if k != key("b")} == {key("a0"): [0.0], key("a1"): [0.0],
                                                                     key("a2"): [0.0]}
    b = outcome.metrics.queue("B")
    assert (b.delay_p50_s, b.delay_p99_s) == (900.0, 900.0)
    assert outcome.metrics.cluster.preemptions_suffered == 0
    # Samples: A borrows (6 GPUs) until 1000; 2 GPUs idle while B waits on [100, 1000).
    assert b.unallocated_gpu_hours_while_waiting == pytest.approx(2 * 900 / 3600)


# ---------------------------------------------------------------------- StrictFIFO vs BestEffortFIFO


@pytest.mark.parametrize("strategy", ["StrictFIFO", "BestEffortFIFO"])
def test_strict_fifo_keeps_the_small_job_waiting_best_effort_starts_it(strategy: str) -> None:
    # One queue of nominal 8 on one 8-GPU node: a 4-GPU job runs [0, 1000); the head (8 GPUs,
    # 500 s) and, behind it, a 2-GPU job (100 s) arrive at 10. Under BestEffortFIFO the cycles
    # at 10 go on after the head is found inadmissible (and parked) and start the small job.
    jobs = [job("run", 0, 1000, 4), job("head", 10, 500, 8), job("small", 10, 100, 2)]
    queues = by_hand([cq("q", 8, cohort=None)], jobs, {j.name: "q" for j in jobs})
    outcome = tl.run_timeline(cluster(), jobs, queues, strategy=strategy, keep_log=True)
    check_log(outcome, cluster(), jobs)
    admitted = times_of(outcome, "admitted")
    assert admitted[key("head")] == [1000.0]
    q = outcome.metrics.queue("q")
    if strategy == "StrictFIFO":
        assert admitted[key("small")] == [1500.0]  # after the head, which blocked it
        expected = [0, 990, 1490]
    else:
        assert admitted[key("small")] == [10.0]
        expected = [0, 990, 0]
    assert q.delay_mean_s == pytest.approx(np.mean(expected))
    assert (q.delay_p50_s, q.delay_p99_s) == pytest.approx(tuple(np.percentile(expected, [50, 99])))


def test_strategy_is_applied_to_every_cluster_queue() -> None:
    config = by_hand([cq("A", 4), cq("B", 4, strategy="StrictFIFO")], [], {}).config
    strict = tl.configure_queues(config, strategy="StrictFIFO")
    assert {cq.queueing_strategy for cq in strict.cluster_queues.values()} == {"StrictFIFO"}
    assert tl.configure_queues(config) is config
    with pytest.raises(InvalidInputError) as e:
        tl.configure_queues(config, strategy="FIFO")
    assert e.value.where == "strategy"


# ---------------------------------------------------------------------- preemption on and off


def two_classes() -> tuple[list[TimelineJob], TimelineQueues]:
    """Two 8-GPU nodes, qos queues: training (4 × 4 GPUs for 1000 s from 0) fills the cluster,
    borrowing from inference; inference jobs (2 GPUs, 300 s) arrive at 100, 200, 300, 400.

    Quotas by demand (milli-GPU × s): training 4 × 4000 × 1000 = 16e6, inference
    4 × 2000 × 300 = 2.4e6, so inference's nominal is 16000 × 2.4 / 18.4 ≈ 2087 milli.
    """
    jobs = [job(f"t{i}", 0, 1000, 4, qos="BE") for i in range(4)]
    jobs += [job(f"i{i}", 100 * (i + 1), 300, 2, qos="LS") for i in range(4)]
    return jobs, qos_queues(jobs, cluster(2))


@pytest.mark.parametrize("preemption", [True, False])
def test_inference_reclaims_with_preemption_on_only(preemption: bool) -> None:
    jobs, queues = two_classes()
    inference = queues.config.cluster_queues["inference"]
    assert inference.preemption.reclaim_within_cohort == "Any"  # the set-up's "on"
    outcome = tl.run_timeline(cluster(2), jobs, queues, preemption=preemption, keep_log=True)
    check_log(outcome, cluster(2), jobs)
    admitted = times_of(outcome, "admitted")
    evicted = times_of(outcome, "evicted")
    if preemption:
        # i0 reclaims: one training job (4 GPUs) goes; i0 and, in the 2 GPUs left, i1 start on
        # arrival; the victim waits until the cluster has 4 GPUs again.
        assert len(evicted) == 1 and sum(map(len, evicted.values())) == 1
        (victim,) = evicted
        assert victim.startswith("default/t") and evicted[victim] == [100.0]
        assert admitted[key("i0")] == [100.0] and admitted[key("i1")] == [200.0]
        assert outcome.metrics.queue("training").preemptions_suffered == 1
        assert outcome.metrics.queue("inference").preemptions_caused == 1
    else:
        assert not evicted and outcome.evictions == 0
        assert admitted[key("i0")] == [1000.0]  # when the training jobs end
        assert outcome.metrics.queue("inference").delay_p50_s > 0


@pytest.fixture(scope="module")
def openb_data() -> tuple[ClusterSnapshot, list]:
    return openb.read_nodes(openb.data_path(openb.DEFAULT_NODES)), openb.read_timed_pods(
        openb.data_path(openb.DEFAULT_PODS))


def openb_run(data, **fields) -> tl.TimelineRunResult:
    snapshot, trace = data
    spec = tl.TimelineSpec(**{"load": 1.5, "shrink": 0.02, "horizon_s": 3600.0, "policy": "best-fit", **fields})
    run = tl.run_spec(snapshot, trace, spec, keep_log=True)
    small = tl.shrink_cluster(snapshot, spec.shrink, seed=spec.seed)
    assert run.nodes == len(small.nodes) and run.cluster_gpus == sum(n.hardware.gpus for n in small.nodes)
    check_log(run.outcome, small, run.arrivals.jobs)
    return run


def test_openb_replay_evicts_with_preemption_on_and_never_off(openb_data) -> None:
    # Seeds 1 and 3 on 2 % of the nodes at load 1.5 over one hour: inference reclaims.
    on = [openb_run(openb_data, seed=s) for s in (1, 3)]
    off = [openb_run(openb_data, seed=s, preemption=False) for s in (1, 3)]
    assert sum(r.outcome.evictions for r in on) > 0
    assert all(r.outcome.evictions == 0 for r in off)
    for r in on + off:
        o = r.outcome
        assert o.end == 3600.0 and o.metrics.end == 3600.0
        assert "offered GPU load" in r.arrivals_summary and f"{r.arrivals.offered_load:.3f}" in r.arrivals_summary
        assert r.arrivals.offered_load > 1.0
        # The same jobs arrive either way.
        assert o.metrics.cluster.submitted == len(r.arrivals.jobs)
    assert [r.arrivals.jobs for r in on] == [r.arrivals.jobs for r in off]


def test_openb_replay_with_teams_and_strict_fifo(openb_data) -> None:
    run = openb_run(openb_data, seed=2, load=0.9, queues="teams:3", strategy="StrictFIFO", policy="fgd-pack")
    assert [q.queue for q in run.outcome.metrics.queues] == ["team-1", "team-2", "team-3"]
    assert run.outcome.admissions > 0


# ---------------------------------------------------------------------- the event loop itself


def test_departures_go_before_arrivals_at_one_time() -> None:
    # x holds all 8 GPUs on [0, 100); y (8 GPUs) arrives at 100 and starts at once.
    jobs = [job("x", 0, 100, 8), job("y", 100, 50, 8)]
    queues = by_hand([cq("q", 8, cohort=None)], jobs, {"x": "q", "y": "q"})
    outcome = tl.run_timeline(cluster(), jobs, queues, keep_log=True)
    check_log(outcome, cluster(), jobs)
    kinds = [(e.time, e.kind, e.workload) for e in outcome.log if e.time == 100]
    assert kinds == [(100, "finished", key("x")), (100, "submitted", key("y")), (100, "admitted", key("y"))]
    assert outcome.end == 150.0 and outcome.metrics.queue("q").delay_p99_s == 0.0


def test_horizon_stops_the_replay() -> None:
    jobs = [job("x", 0, 100, 8), job("y", 10, 50, 8), job("late", 400, 10, 1)]
    queues = by_hand([cq("q", 8, cohort=None)], jobs, {j.name: "q" for j in jobs})
    outcome = tl.run_timeline(cluster(), jobs, queues, horizon_s=120, keep_log=True)
    # y starts at 100 and still runs at 120; "late" never arrives.
    assert [(e.time, e.kind, e.workload) for e in outcome.log][-2:] == [(100, "finished", key("x")),
                                                                         (100, "admitted", key("y"))]
    assert (outcome.end, outcome.running_at_end, outcome.finished, outcome.metrics.cluster.submitted) == (120, 1, 1, 2)
    assert outcome.metrics.queue("q").mean_running_gpus == pytest.approx(8.0)
    # Events at the horizon are past the window: x's departure at 100 is not processed.
    at_100 = tl.run_timeline(cluster(), jobs, queues, horizon_s=100)
    assert (at_100.finished, at_100.running_at_end, at_100.pending_at_end, at_100.end) == (0, 1, 1, 100)
    seen: list[float] = []
    tl.run_timeline(cluster(), jobs, queues, horizon_s=120, progress=seen.append)
    assert seen == [0, 10, 100]
    with pytest.raises(InvalidInputError):
        tl.run_timeline(cluster(), jobs, queues, horizon_s=0)


def test_initial_jobs_are_left_out_of_delays() -> None:
    warm = TimelineJob(name="warm", arrival=0, duration=100, qos="BE", source="w", initial=True,
                       pod=PodRequest(name="warm", gpus=8, cpu_milli=1000, memory_mib=1024))
    warm2 = TimelineJob(name="warm2", arrival=0, duration=100, qos="BE", source="w", initial=True,
                        pod=PodRequest(name="warm2", gpus=8, cpu_milli=1000, memory_mib=1024))
    jobs = [warm, warm2, job("new", 50, 10, 1)]
    queues = by_hand([cq("q", 8, cohort=None)], jobs, {j.name: "q" for j in jobs})
    outcome = tl.run_timeline(cluster(), jobs, queues, keep_log=True)
    # warm2 waits 100 s (the node is full), new waits until 200: only new's 150 s counts.
    assert times_of(outcome, "admitted")[key("warm2")] == [100.0]
    assert times_of(outcome, "admitted")[key("new")] == [200.0]
    assert outcome.metrics.queue("q").delay_p50_s == 150.0


class _PingPong:
    """A stand-in engine: w is admitted, then preempted, then admitted again, ... at every
    cycle, for ever (what instantaneous eviction can make the real one do). The preemptor is
    p, or a new workload each time with ``fresh_preemptor``."""

    fresh_preemptor = False

    def __init__(self, config, snapshot=None, policy="best-fit", target=None) -> None:
        self.pending: set[str] = set()
        self.n = 0

    def submit(self, workload) -> None:
        self.pending.add(workload.key)

    def finish(self, key: str) -> None:
        raise AssertionError(f"{key} must not finish: its runs were all cut short")

    @property
    def active_count(self) -> int:
        return len(self.pending)

    def borrowing(self, name: str) -> bool:
        return False

    def cycle(self, now=None, *, report_waiting: bool = True) -> AdmissionResult:
        self.n += 1
        w = "default/w"
        if w in self.pending:
            self.pending.discard(w)
            return AdmissionResult(admitted=(AdmittedWorkload(w, "q", {}),))
        self.pending.add(w)
        by = f"default/p{self.n}" if self.fresh_preemptor else "default/p"
        return AdmissionResult(preempted=(PreemptedWorkload(w, by, "InCohortReclamation"),))


def ping_pong_jobs() -> tuple[list[TimelineJob], TimelineQueues]:
    jobs = [job("w", 0, 10, 1)] + [job(f"p{i}", 0, 100, 1) for i in ("", *range(1, 40))]
    return jobs, by_hand([cq("q", 8, cohort=None)], jobs, {j.name: "q" for j in jobs})


def test_a_repeated_eviction_ends_the_cycles_of_that_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "QueueScheduler", _PingPong)
    jobs, queues = ping_pong_jobs()
    outcome = tl.run_timeline(cluster(), jobs, queues, keep_log=True, horizon_s=50)
    kinds = [(e.kind, e.workload) for e in outcome.log if e.kind in ("admitted", "evicted")]
    assert kinds == [("admitted", "default/w"), ("evicted", "default/w")] * 2
    assert outcome.stalls == 1 and outcome.evictions == 2 and outcome.cycles == 4
    # w's cancelled departures (due at 10) never fire.
    assert outcome.finished == 0 and outcome.running_at_end == 0


def test_cycles_that_never_settle_are_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fresh(_PingPong):
        fresh_preemptor = True

    monkeypatch.setattr(engine, "QueueScheduler", Fresh)
    jobs, queues = ping_pong_jobs()
    with pytest.raises(RuntimeError, match="after 30 cycles"):
        tl.run_timeline(cluster(), jobs, queues, horizon_s=50, max_cycles_per_time=30)


def test_the_preemptor_gets_the_room_it_freed() -> None:
    # One 8-GPU node. Training (nominal 4) runs t0 (4 GPUs), v and u (2 each): it borrows 4.
    # Inference (nominal 4, reclaimWithinCohort Any) has h (6 GPUs, inadmissible: parked)
    # and then p (2 GPUs) arrives at 10 and reclaims. The eviction unparks h, which is older
    # than p; p stays the head of inference (Kueue's sticky preemptor), so the next cycle
    # admits p before the victim, back in training's queue, can take its room again.
    jobs = [job("t0", 0, 1000, 4), job("v", 0, 1000, 2), job("u", 0, 1000, 2), job("h", 5, 100, 6),
            job("p", 10, 100, 2)]
    queue_of = {"t0": "train", "v": "train", "u": "train", "h": "inf", "p": "inf"}
    queues = by_hand([cq("inf", 4, reclaim="Any"), cq("train", 4)], jobs, queue_of)
    outcome = tl.run_timeline(cluster(), jobs, queues, keep_log=True, horizon_s=50)
    check_log(outcome, cluster(), jobs)
    at_10 = [(e.kind, e.workload, e.by) for e in outcome.log if e.time == 10 and e.kind in ("admitted", "evicted")]
    assert len(at_10) == 2
    assert at_10[0][0] == "evicted" and queue_of[at_10[0][1].split("/")[1]] == "train" and at_10[0][2] == key("p")
    assert at_10[1] == ("admitted", key("p"), None)
    assert outcome.stalls == 0 and outcome.evictions == 1


# ---------------------------------------------------------------------- set-ups, specs, files


@pytest.mark.parametrize(
    "text, expected",
    [("qos", tl.QueueSetup("qos")), ("teams:4", tl.QueueSetup("teams", 4)),
     (" teams:1000 ", tl.QueueSetup("teams", 1000))],
)
def test_parse_queue_setup(text: str, expected: tl.QueueSetup) -> None:
    assert tl.parse_queue_setup(text) == expected


@pytest.mark.parametrize(
    "text", ["", "QoS", "teams", "teams:", "teams:0", "teams:-1", "teams:1001", "teams:x", "teams:2.5"]
)
def test_parse_queue_setup_refuses(text: str) -> None:
    with pytest.raises(InvalidInputError) as e:
        tl.parse_queue_setup(text)
    assert e.value.where == "--queues"


def test_spec_title_and_slug_name_the_load() -> None:
    spec = tl.TimelineSpec(load=0.9, policy="fgd-pack", strategy="StrictFIFO", preemption=False, shrink=0.1,
                           horizon_s=1800)
    assert spec.title == ("load 0.9, qos queues, fgd-pack, StrictFIFO, preemption off, seed 42, 30 min, "
                          "10 % of the nodes")
    assert spec.slug == "load0.9-qos-fgd-pack-strictfifo-preempt-off-seed42"
    teams = tl.TimelineSpec(load=1.1, queues="teams:4", policy="best-fit")
    assert teams.slug == "load1.1-teams-4-best-fit-besteffortfifo-preempt-on-seed42"


def test_placeable_jobs_leave_out_what_no_node_holds() -> None:
    jobs = [job("fits", 0, 10, 8), job("too-big", 0, 10, 9), job("fits-too", 5, 10, 1)]
    kept, left_out = tl.placeable_jobs(cluster(), jobs)
    assert [j.name for j in kept] == ["fits", "fits-too"] and left_out == 1


def test_write_timeline_outputs(tmp_path: Path) -> None:
    jobs = [job("x", 0, 100, 8), job("y", 10, 50, 4)]
    queues = by_hand([cq("q", 8, cohort=None)], jobs, {"x": "q", "y": "q"})
    outcome = tl.run_timeline(cluster(), jobs, queues)
    arrivals = Arrivals(jobs=tuple(jobs), requested_load=0.5, offered_load=0.625, horizon_s=150.0, cluster_gpus=8,
                        rate_per_s=0.01, seed=1, dropped=0, initial=0)
    runs = [tl.TimelineRunResult(tl.TimelineSpec(load=0.5, seed=s), outcome, arrivals, arrivals.summary(), 1, 8.0)
            for s in (1, 2)]
    paths = tl.write_timeline_outputs(runs, tmp_path / "out", plot=False)
    assert [p.name for p in paths] == ["timeline.csv", "queues.md"]
    rows = (tmp_path / "out" / "timeline.csv").read_text().splitlines()
    assert rows[0] == ("run,time_s,queue,running_gpus,pending_pods,borrowing,unallocated_gpus,"
                       "unallocated_gpus_while_waiting")
    runs_seen = [r.split(",")[0] for r in rows[1:]]
    assert sorted(set(runs_seen)) == [runs[0].spec.slug, runs[1].spec.slug]
    assert len(rows) == 1 + 2 * len(outcome.series.times)
    text = (tmp_path / "out" / "queues.md").read_text()
    assert text.count("Offered GPU load **0.625**") == 2 and "## load 0.5, qos queues" in text
    with pytest.raises(ValueError):
        tl.write_timeline_outputs([], tmp_path / "none")


def test_the_fgd_policies_measure_fragments_against_the_jobs_mix(monkeypatch: pytest.MonkeyPatch) -> None:
    from placer.workload.fragmentation import target_workload

    engines: list[engine.QueueScheduler] = []

    class Kept(engine.QueueScheduler):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)
            engines.append(self)

    monkeypatch.setattr(engine, "QueueScheduler", Kept)
    jobs = [job("a", 0, 100, 1), job("b", 0, 100, 2), job("c", 10, 100, 2)]
    queues = by_hand([cq("q", 8, cohort=None)], jobs, {j.name: "q" for j in jobs})
    tl.run_timeline(cluster(), jobs, queues, policy="fgd-pack")
    (used,) = engines
    assert used.cluster is not None
    assert used.cluster.session.workload == target_workload([j.pod for j in jobs])
    assert used.cluster.packing is not None
