"""The building blocks of the replay over time (issue #16 item 3, SPEC §9): the openb time
columns, jobs at an offered GPU load, the queue set-ups, and the metrics and their files.

Expected values are computed here independently (the csv module, plain arithmetic, or by
hand in the comments), never by the code under test.
"""
from __future__ import annotations

import collections
import csv
import math
from pathlib import Path

import msgspec
import numpy as np
import pytest

from placer.adapters import openb
from placer.exceptions import InvalidInputError
from placer.model import PodRequest
from placer.replay import arrivals as arr
from placer.replay import metrics as met
from placer.replay import timeline_queues as tq
from placer.queues.model import CPU, GPU, MEMORY, MIB

DATA = Path(__file__).parent / "data" / "openb"
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


@pytest.fixture(scope="module")
def default_timed():
    return openb.read_timed_pods(openb.data_path(openb.DEFAULT_PODS))


def timed(name, gpus=1, milli=1000, qos="LS", created=0, lifetime=100, cpu=1000, mem=1024):
    """A TimedPod made by hand (scheduled at creation)."""
    pod = PodRequest(name=name, gpus=gpus, gpu_milli=milli if gpus else 1000, cpu_milli=cpu, memory_mib=mem)
    return openb.TimedPod(
        pod=pod, qos=qos, phase="Running", creation_time=created, deletion_time=created + lifetime,
        scheduled_time=created,
    )


def job(name, arrival, duration, gpus=1, milli=1000, qos="LS", source=None, cpu=1000, mem=1024):
    pod = PodRequest(name=name, gpus=gpus, gpu_milli=milli if gpus else 1000, cpu_milli=cpu, memory_mib=mem)
    return arr.TimelineJob(name=name, arrival=arrival, duration=duration, qos=qos, pod=pod, source=source or name)


# ------------------------------------------------------------------ openb time columns


def test_timed_pods_small_file():
    pods = openb.read_timed_pods(DATA / "pods_small.csv")
    got = [(p.pod.name, p.qos, p.phase, p.creation_time, p.deletion_time, p.scheduled_time) for p in pods]
    assert got == [
        ("openb-pod-0000", "LS", "Running", 0, 12537496, 0),
        ("openb-pod-0001", "LS", "Running", 427061, 12902960, 427061),
        ("openb-pod-0002", "BE", "Failed", 500000, 600000, 500100),
        ("openb-pod-0003", "LS", "Pending", 700000, 800000, None),
        ("openb-pod-0004", "Burstable", "Succeeded", 900000, 950000, 900010),
        ("openb-pod-0005", "Guaranteed", "Running", 1000000, 1200000, 1000001),
    ]
    assert [p.lifetime for p in pods] == [12537496, 12475899, 99900, None, 49990, 199999]
    # The pods are those read_pods reads from the same file.
    assert [p.pod for p in pods] == openb.read_pods(DATA / "pods_small.csv")


def test_timed_pods_default_trace_against_csv_module(default_timed):
    with open(openb.data_path(openb.DEFAULT_PODS), newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(default_timed) == len(rows) == 8152
    assert collections.Counter(p.qos for p in default_timed) == collections.Counter(r["qos"] for r in rows)
    for p, r in zip(default_timed, rows):
        assert p.pod.name == r["name"]
        assert p.creation_time == int(r["creation_time"])
        assert p.deletion_time == int(r["deletion_time"])
        assert p.scheduled_time == (int(r["scheduled_time"]) if r["scheduled_time"] else None)
    no_lifetime = sum(
        1 for r in rows if not r["scheduled_time"] or int(r["deletion_time"]) - int(r["scheduled_time"]) <= 0
    )
    trace = arr.trace_jobs(default_timed)
    assert trace.dropped == no_lifetime == 897
    assert len(trace.jobs) == 8152 - 897


@pytest.mark.parametrize(
    "row, line_no, message",
    [
        ("p1,1000,1024,1,1000,,XX,Running,0,10,0", 3, "qos must be one of LS, Guaranteed, Burstable, BE, got 'XX'"),
        ("p1,1000,1024,1,1000,,LS,Running,,10,0", 3, "creation_time must be a non-negative integer, got an empty field"),
        ("p1,1000,1024,1,1000,,LS,Running,5,-10,0", 3, "deletion_time must be a non-negative integer, got '-10'"),
        ("p1,1000,1024,1,1000,,LS,Running,5,10,1e3", 3, "scheduled_time must be a non-negative integer, got '1e3'"),
    ],
)
def test_timed_pods_bad_values(row, line_no, message):
    text = HEADER + "p0,1000,1024,1,1000,,LS,Running,0,10,0\n" + row + "\n"
    with pytest.raises(InvalidInputError) as e:
        openb.read_timed_pods(text, source="trace.csv")
    assert e.value.where == f"trace.csv:{line_no}"
    assert e.value.what == message


def test_timed_pods_bad_time_in_file():
    with pytest.raises(InvalidInputError) as e:
        openb.read_timed_pods(DATA / "pods_bad_time.csv")
    assert e.value.where == "pods_bad_time.csv:3"
    assert "deletion_time must be a non-negative integer, got '12902960.5'" in e.value.what
    # read_pods does not read the time columns, so the same file is fine for it.
    assert len(openb.read_pods(DATA / "pods_bad_time.csv")) == 2


def test_timed_pods_first_bad_row_is_reported():
    text = HEADER + "p0,1000,1024,1,1200,,LS,Running,0,10,0\n" + "p1,1000,1024,1,1000,,XX,Running,0,10,0\n"
    with pytest.raises(InvalidInputError) as e:
        openb.read_timed_pods(text)
    assert e.value.where == "<text>:2" and "gpu_milli" in e.value.what


def test_timed_pods_need_the_time_columns():
    with pytest.raises(InvalidInputError) as e:
        openb.read_timed_pods(DATA / "pods_multigpu_sample.csv")
    assert e.value.where == "pods_multigpu_sample.csv:1"
    for column in ("qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"):
        assert column in e.value.what


def test_trace_jobs_drop_and_order():
    text = HEADER + "\n".join(
        [
            "a,1000,1024,2,1000,,BE,Running,50,80,60",  # lifetime 20
            "b,1000,1024,1,300,,LS,Running,10,40,10",  # lifetime 30
            "c,1000,1024,1,1000,,LS,Pending,20,30,",  # never scheduled
            "d,1000,1024,1,1000,,LS,Failed,30,30,30",  # lifetime 0
            "e,1000,1024,1,1000,,LS,Failed,30,,30",  # no deletion time
            "f,1000,1024,0,0,,Burstable,Running,40,45,44",  # lifetime 1, CPU only
        ]
    ) + "\n"
    trace = arr.trace_jobs(openb.read_timed_pods(text))
    assert trace.dropped == 3
    assert [(j.name, j.arrival, j.duration) for j in trace.jobs] == [("b", 10, 30), ("f", 40, 1), ("a", 50, 20)]
    assert trace.horizon_s == (50 + 20) - 10
    b, f, a = trace.jobs
    assert (b.gpus, b.gpu_milli, b.gpu_demand, b.job_class) == (1, 300, 0.3, "inference")
    assert (f.gpus, f.gpu_milli, f.gpu_demand, f.job_class) == (0, 0, 0.0, "training")
    assert (a.gpus, a.gpu_demand, a.job_class) == (2, 2.0, "training")


# ------------------------------------------------------------------ offered load


def test_offered_load_by_hand():
    jobs = [
        job("whole", 0, 10, gpus=2),  # 2 GPUs × 10 s inside [0, 20)
        job("shared", 5, 100, gpus=1, milli=500),  # 0.5 GPU × 15 s inside
        job("late", 25, 10, gpus=8),  # outside
        job("cpu", 0, 20, gpus=0),  # no GPU
    ]
    assert arr.offered_load(jobs, 4, 20) == pytest.approx((2 * 10 + 0.5 * 15) / (4 * 20))
    # A window starting at 5: whole 5 s, shared 20 s, late 0 s (ends at 25).
    assert arr.offered_load(jobs, 4, 20, start=5) == pytest.approx((2 * 5 + 0.5 * 20) / (4 * 20))


def achieved_by_numpy(jobs, cluster_gpus, horizon):
    """The offered load recomputed from the job fields, vectorised."""
    a = np.array([j.arrival for j in jobs])
    d = np.array([j.duration for j in jobs])
    g = np.array([j.pod.gpus * j.pod.gpu_milli / 1000 if j.pod.gpus else 0.0 for j in jobs])
    inside = np.clip(np.minimum(a + d, horizon) - np.maximum(a, 0.0), 0.0, None)
    return float((g * inside).sum() / (cluster_gpus * horizon))


def test_jobs_at_load_reports_its_own_load(default_timed):
    got = arr.jobs_at_load(default_timed, 6212, 0.9, seed=7, horizon_s=6 * 3600)
    assert got.offered_load == pytest.approx(achieved_by_numpy(got.jobs, 6212, got.horizon_s), rel=1e-9)
    pool = arr.trace_jobs(default_timed).jobs
    mean_work = sum(j.gpu_demand * j.duration for j in pool) / len(pool)
    assert got.rate_per_s == pytest.approx(0.9 * 6212 / mean_work, rel=1e-12)
    assert "offered GPU load" in got.summary() and f"{got.offered_load:.3f}" in got.summary()
    assert got.dropped == 897
    # Every drawn job keeps the shape, class and lifetime of the trace pod it came from.
    by_name = {j.name: j for j in pool}
    for j in got.jobs[:: max(1, len(got.jobs) // 500)]:
        src = by_name[j.source]
        assert j.pod.name == j.name
        assert (j.pod.gpus, j.pod.gpu_milli, j.pod.cpu_milli, j.pod.memory_mib, j.qos) == (
            src.pod.gpus, src.pod.gpu_milli, src.pod.cpu_milli, src.pod.memory_mib, src.qos,
        )
        if j.initial:
            assert j.arrival == 0 and 0 < j.duration <= src.duration
        else:
            assert j.duration == src.duration and 0 <= j.arrival < got.horizon_s


def test_jobs_at_load_is_deterministic_per_seed(default_timed):
    a = arr.jobs_at_load(default_timed, 6212, 0.9, seed=3, horizon_s=3600)
    b = arr.jobs_at_load(default_timed, 6212, 0.9, seed=3, horizon_s=3600)
    c = arr.jobs_at_load(default_timed, 6212, 0.9, seed=4, horizon_s=3600)
    assert a == b
    assert [(j.source, j.arrival) for j in a.jobs] != [(j.source, j.arrival) for j in c.jobs]
    names = [j.name for j in a.jobs]
    assert len(set(names)) == len(names)
    arrivals = [j.arrival for j in a.jobs]
    assert arrivals == sorted(arrivals)


def test_jobs_at_load_n_jobs(default_timed):
    got = arr.jobs_at_load(default_timed, 6212, 0.5, seed=1, n_jobs=300)
    new = [j for j in got.jobs if not j.initial]
    assert len(new) == 300 and got.initial == len(got.jobs) - 300
    assert max(j.arrival for j in new) < got.horizon_s
    cold = arr.jobs_at_load(default_timed, 6212, 0.5, seed=1, n_jobs=300, stationary_start=False)
    assert cold.initial == 0 and len(cold.jobs) == 300


def test_resampled_load_is_near_the_request_synthetic_pool():
    # Lifetimes 10 s … 10 000 s, 1 to 4 GPUs and shares: a long window holds many
    # lifetimes, so the achieved load is close to the request for one fixed seed.
    rng = np.random.default_rng(0)
    pool = []
    for i in range(200):
        gpus = int(rng.integers(0, 5))
        milli = int(rng.choice([250, 500, 1000])) if gpus == 1 else 1000
        pool.append(timed(f"p{i}", gpus=gpus, milli=milli, lifetime=int(10 ** rng.uniform(1, 4))))
    for load, start in ((0.7, True), (1.1, True), (0.9, False)):
        got = arr.jobs_at_load(pool, 64, load, seed=11, horizon_s=2_000_000, stationary_start=start)
        assert got.offered_load == pytest.approx(load, rel=0.03)
        assert got.offered_load == pytest.approx(achieved_by_numpy(got.jobs, 64, got.horizon_s), rel=1e-9)


def test_resampled_load_on_the_openb_trace(default_timed):
    # openb's lifetimes are heavy-tailed; with the stationary start one day is enough for
    # the request to within 10 % (seed fixed).
    got = arr.jobs_at_load(default_timed, 6212, 0.9, seed=1, horizon_s=86400)
    assert got.offered_load == pytest.approx(0.9, rel=0.10)
    # The number in progress at 0 is Poisson with mean rate × mean lifetime.
    pool = arr.trace_jobs(default_timed).jobs
    expected = got.rate_per_s * sum(j.duration for j in pool) / len(pool)
    assert abs(got.initial - expected) < 5 * math.sqrt(expected)


@pytest.mark.parametrize(
    "kwargs, where",
    [
        (dict(load=0.0, horizon_s=10), "load"),
        (dict(load=float("nan"), horizon_s=10), "load"),
        (dict(load=0.9), "horizon_s"),
        (dict(load=0.9, horizon_s=10, n_jobs=5), "horizon_s"),
        (dict(load=0.9, horizon_s=-1.0), "horizon_s"),
        (dict(load=0.9, n_jobs=0), "n_jobs"),
    ],
)
def test_jobs_at_load_bad_arguments(kwargs, where):
    with pytest.raises(InvalidInputError) as e:
        arr.jobs_at_load([timed("a")], 8, seed=0, **kwargs)
    assert e.value.where == where


def test_jobs_at_load_needs_gpu_demand():
    with pytest.raises(InvalidInputError) as e:
        arr.jobs_at_load([timed("cpu", gpus=0)], 8, 0.5, seed=0, horizon_s=10)
    assert e.value.where == "pods"


def test_shrink_cluster_keeps_types_in_proportion():
    snap = openb.read_nodes(openb.data_path(openb.DEFAULT_NODES))
    small = arr.shrink_cluster(snap, 0.25, seed=5)
    before = collections.Counter(n.type for n in snap.nodes)
    after = collections.Counter(n.type for n in small.nodes)
    assert len(small.nodes) == round(0.25 * 1213)
    assert sum(after.values()) == len(small.nodes)
    for t, count in before.items():
        assert abs(after.get(t, 0) - 0.25 * count) < 1  # largest remainder: within one node
    assert set(small.node_types) == set(after)
    names = [n.name for n in small.nodes]
    assert names == [n.name for n in snap.nodes if n.name in set(names)]  # original order
    assert arr.shrink_cluster(snap, 0.25, seed=5) == small
    assert arr.shrink_cluster(snap, 0.25, seed=6) != small
    with pytest.raises(InvalidInputError):
        arr.shrink_cluster(snap, 0.0, seed=0)


def test_largest_remainder():
    assert arr.largest_remainder(10, [1, 1, 1]) == [4, 3, 3]
    assert arr.largest_remainder(7, [0, 0]) == [4, 3]
    assert arr.largest_remainder(100, [3, 0, 1]) == [75, 0, 25]


# ------------------------------------------------------------------ queue set-ups

CAPACITY = {CPU: 64_000, MEMORY: 256 * 1024 * MIB, tq.GPU_MILLI: 16_000}


def mixed_jobs():
    return [
        job("i1", 0, 100, gpus=2, qos="LS", cpu=4000, mem=8192),
        job("i2", 10, 50, gpus=1, milli=500, qos="Guaranteed", cpu=1000, mem=2048),
        job("t1", 0, 300, gpus=4, qos="BE", cpu=2000, mem=4096),
        job("t2", 5, 100, gpus=0, qos="Burstable", cpu=8000, mem=1024),
    ]


def quotas(config, name):
    (group,) = config.cluster_queues[name].resource_groups
    (flavor,) = group.flavors
    return {r: q.nominal for r, q in flavor.resources.items()}


def test_qos_queues_quotas_follow_demand():
    jobs = mixed_jobs()
    queues = tq.qos_queues(jobs, CAPACITY)
    config = queues.config
    assert set(config.cluster_queues) == {"inference", "training"}
    assert queues.queue_of == {"i1": "inference", "i2": "inference", "t1": "training", "t2": "training"}
    # Demand by hand (resource × seconds):
    #   GPU milli: inference 2000×100 + 500×50 = 225 000; training 4000×300 = 1 200 000
    #   cpu: inference 4000×100 + 1000×50 = 450 000; training 2000×300 + 8000×100 = 1 400 000
    #   memory MiB: inference 8192×100 + 2048×50 = 921 600; training 4096×300 + 1024×100 = 1 331 200
    demand = {
        tq.GPU_MILLI: (225_000, 1_200_000),
        CPU: (450_000, 1_400_000),
        MEMORY: (921_600, 1_331_200),
    }
    inf, tra = quotas(config, "inference"), quotas(config, "training")
    for resource, (d_inf, d_tra) in demand.items():
        assert inf[resource] + tra[resource] == CAPACITY[resource]
        assert abs(inf[resource] - CAPACITY[resource] * d_inf / (d_inf + d_tra)) < 1
    for cq in config.cluster_queues.values():
        assert cq.cohort == tq.COHORT
        assert cq.queueing_strategy == "BestEffortFIFO"
        (group,) = cq.resource_groups
        assert set(group.covered_resources) == {tq.GPU_MILLI, CPU, MEMORY}
        assert all(q.borrowing_limit is None and q.lending_limit is None for q in group.flavors[0].resources.values())
    assert set(config.flavors) == {tq.FLAVOR}


def test_qos_queues_preemption_settings():
    on = tq.qos_queues(mixed_jobs(), CAPACITY, preemption=True, strategy="StrictFIFO").config.cluster_queues
    off = tq.qos_queues(mixed_jobs(), CAPACITY, preemption=False).config.cluster_queues
    p = on["inference"].preemption
    assert (p.reclaim_within_cohort, p.within_cluster_queue) == ("Any", "LowerPriority")
    p = on["training"].preemption
    assert (p.reclaim_within_cohort, p.within_cluster_queue) == ("Never", "Never")
    for cq in off.values():
        assert (cq.preemption.reclaim_within_cohort, cq.preemption.within_cluster_queue) == ("Never", "Never")
    assert on["training"].queueing_strategy == "StrictFIFO"
    with pytest.raises(InvalidInputError) as e:
        tq.qos_queues(mixed_jobs(), CAPACITY, strategy="FIFO")
    assert e.value.where == "strategy"


def test_quotas_within_horizon():
    # With horizon_s = 50 each job counts only its seconds inside [0, 50):
    #   GPU milli: inference 2000×50 + 500×40 = 120 000; training 4000×50 = 200 000.
    config = tq.qos_queues(mixed_jobs(), CAPACITY, horizon_s=50).config
    assert quotas(config, "inference")[tq.GPU_MILLI] == round(16_000 * 120_000 / 320_000)


def test_quotas_from_a_snapshot_in_devices():
    snap = openb.read_nodes(DATA / "nodes_small.csv")
    gpus = sum(n.hardware.gpus for n in snap.nodes)
    config = tq.qos_queues(mixed_jobs(), snap, gpu_accounting="devices").config
    inf, tra = quotas(config, "inference"), quotas(config, "training")
    assert inf[GPU] + tra[GPU] == gpus
    assert inf[CPU] + tra[CPU] == sum(n.hardware.cpu_milli for n in snap.nodes)
    assert inf[MEMORY] + tra[MEMORY] == sum(n.hardware.memory_mib for n in snap.nodes) * MIB
    # Devices: inference 2×100 + 1×50 = 250, training 4×300 = 1200 GPU-seconds.
    assert abs(inf[GPU] - gpus * 250 / 1450) < 1


def test_team_queues():
    jobs = [job(f"j{i}", i, 10 + i, gpus=1 + i % 3, source=f"s{i % 7}", qos="LS" if i % 2 else "BE") for i in range(60)]
    teams = tq.team_queues(jobs, CAPACITY, 3, seed=4, preemption=False)
    assert set(teams.config.cluster_queues) == {"team-1", "team-2", "team-3"}
    assert teams == tq.team_queues(jobs, CAPACITY, 3, seed=4, preemption=False)
    assert any(
        tq.team_queues(jobs, CAPACITY, 3, seed=s).queue_of != teams.queue_of for s in range(5, 10)
    )
    # Copies of one trace pod go to one team.
    team_of_source = {}
    for j in jobs:
        assert team_of_source.setdefault(j.source, teams.queue_of[j.name]) == teams.queue_of[j.name]
    gpu_seconds = collections.Counter()
    for j in jobs:
        gpu_seconds[teams.queue_of[j.name]] += j.pod.gpus * 1000 * j.duration
    total = sum(gpu_seconds.values())
    for name in teams.config.cluster_queues:
        q = quotas(teams.config, name)
        assert abs(q[tq.GPU_MILLI] - 16_000 * gpu_seconds[name] / total) < 1
        p = teams.config.cluster_queues[name].preemption
        assert (p.reclaim_within_cohort, p.within_cluster_queue) == ("Never", "Never")
    assert sum(quotas(teams.config, n)[tq.GPU_MILLI] for n in teams.config.cluster_queues) == 16_000
    with pytest.raises(InvalidInputError):
        tq.team_queues(jobs, CAPACITY, 0)


def test_job_workload():
    shared = job("s", 12.5, 60, gpus=1, milli=460, qos="Guaranteed", cpu=6000, mem=12288)
    w = tq.job_workload(shared, "inference")
    assert (w.name, w.cluster_queue, w.created, w.priority) == ("s", "inference", 12.5, tq.CLASS_PRIORITY["inference"])
    (ps,) = w.pod_sets
    assert ps.count == 1
    assert dict(ps.requests) == {CPU: 6000, MEMORY: 12288 * MIB, tq.GPU_MILLI: 460}
    assert (ps.pod.name, ps.pod.gpus, ps.pod.gpu_milli, ps.pod.cpu_milli, ps.pod.memory_mib) == ("s", 1, 460, 6000, 12288)
    assert ps.pod.priority == w.priority
    t = tq.job_workload(job("t", 0, 1, gpus=2, qos="BE"), "training", gpu_accounting="devices")
    assert dict(t.pod_sets[0].requests) == {CPU: 1000, MEMORY: 1024 * MIB, GPU: 2}
    assert t.priority < w.priority
    cpu_only = tq.job_workload(job("c", 0, 1, gpus=0, qos="BE"), "training")
    assert tq.GPU_MILLI not in cpu_only.pod_sets[0].requests and cpu_only.pod_sets[0].pod.gpus == 0
    queues = tq.qos_queues([shared], CAPACITY)
    assert queues.workloads([shared]) == [w]


# ------------------------------------------------------------------ metrics


def hand_log(start=0.0):
    """Cluster of 8 GPUs, queues A and B (the numbers in test_metrics_by_hand)."""
    r = met.TimelineRecorder(["A", "B"], 8, start=start)
    r.submitted(0, "a1", "A", 4)
    r.submitted(0, "a2", "A", 2)
    r.submitted(0, "b1", "B", 4)
    r.admitted(0, "a1")
    r.sample(0, {"A": False})  # A runs 4, a2 and b1 wait, 4 GPUs idle
    r.admitted(5, "a2", borrowing=True)
    r.sample(5, {"A": True})  # A runs 6, b1 waits, 2 idle
    r.evicted(10, "a2", by="b1")
    r.admitted(10, "b1")
    r.sample(10)  # A 4 (a2 waits again), B 4, 0 idle
    r.finished(30, "a1")
    r.admitted(30, "a2")
    r.sample(30)  # A 2, B 4, 2 idle, nothing waits
    r.submitted(40, "b2", "B", 4)
    r.sample(40, {"B": True})  # b2 waits, 2 idle
    r.finished(50, "b1")
    r.admitted(50, "b2")
    r.sample(50)  # A 2, B 4, 2 idle
    r.submitted(55, "b3", "B", 3.5)
    r.sample(55)  # b3 waits until the end, 2 idle
    return r


def test_metrics_by_hand():
    m = hand_log().metrics(end=60)
    a, b, all_ = m.queue("A"), m.queue("B"), m.queue(met.ALL_QUEUES)
    # Delays: a1 0; a2 5 + (30 − 10) = 25 (it waits again after its eviction and both
    # waits count); b1 10; b2 10; b3 still waits at 60: 5 s so far, censored. numpy's
    # linear percentiles: A [0, 25] → p50 12.5, p99 24.75; B [5, 10, 10] → 10, 10;
    # all [0, 5, 10, 10, 25] → p50 10, p99 10 + 0.96 × 15 = 24.4.
    assert (a.delay_p50_s, a.delay_p99_s) == pytest.approx((12.5, 24.75))
    assert (b.delay_p50_s, b.delay_p99_s) == pytest.approx((10.0, 10.0))
    assert (all_.delay_p50_s, all_.delay_p99_s) == pytest.approx((10.0, 24.4))
    assert a.delay_mean_s == pytest.approx(12.5) and b.delay_mean_s == pytest.approx(25 / 3)
    # b3 waiting longer would raise the p99s (it is one of the two values they interpolate)
    # and the means, not the p50s: those are lower bounds.
    assert (b.delay_p50_lower_bound, b.delay_p99_lower_bound, b.delay_mean_lower_bound) == (False, True, True)
    assert (all_.delay_p50_lower_bound, all_.delay_p99_lower_bound) == (False, True)
    assert (a.delay_p99_lower_bound, a.delay_mean_lower_bound) == (False, False)
    assert (a.never_admitted, b.never_admitted, all_.never_admitted) == (0, 1, 1)
    assert (a.delays_censored, b.delays_censored, all_.delays_censored) == (0, 1, 1)
    assert (a.delay_jobs, b.delay_jobs, all_.delay_jobs) == (2, 3, 5)
    as_json = msgspec.json.decode(msgspec.json.encode(b))
    assert (as_json["never_admitted"], as_json["delay_p99_lower_bound"]) == (1, True)
    assert (a.waiting_at_end, b.waiting_at_end, all_.waiting_at_end) == (0, 1, 1)
    assert (a.submitted, a.admitted, a.finished) == (2, 2, 1)
    assert (b.submitted, b.admitted, b.finished) == (3, 2, 1)
    # Running GPUs: A 4 on [0,5), 6 on [5,10), 4 on [10,30), 2 on [30,60) → 190 GPU·s;
    # B 4 on [10,60) → 200 GPU·s.
    assert a.mean_running_gpus == pytest.approx(190 / 60)
    assert b.mean_running_gpus == pytest.approx(200 / 60)
    assert all_.gpu_hours == pytest.approx(390 / 3600)
    # Idle GPUs while B waits: 4 on [0,5), 2 on [5,10), 2 on [40,50), 2 on [55,60) = 60 GPU·s;
    # while A waits: 4 on [0,5), 0 on [10,30) = 20 GPU·s; while anyone waits: 60 GPU·s.
    assert b.unallocated_gpu_hours_while_waiting == pytest.approx(60 / 3600)
    assert a.unallocated_gpu_hours_while_waiting == pytest.approx(20 / 3600)
    assert all_.unallocated_gpu_hours_while_waiting == pytest.approx(60 / 3600)
    # Borrowing: A on [5,10), B on [40,50); the cluster: either.
    assert (a.borrowing_fraction, b.borrowing_fraction, all_.borrowing_fraction) == pytest.approx(
        (5 / 60, 10 / 60, 15 / 60)
    )
    assert (a.preemptions_suffered, a.preemptions_caused) == (1, 0)
    assert (b.preemptions_suffered, b.preemptions_caused) == (0, 1)
    assert (a.admitted_borrowing, b.admitted_borrowing) == (1, 0)
    # Idle GPUs: 4 on [0,5), 2 on [5,10), 0 on [10,30), 2 on [30,60) → 90 GPU·s.
    assert m.mean_unallocated_gpus == pytest.approx(90 / 60)


def test_metrics_idle_before_the_first_sample():
    m = hand_log(start=-10).metrics(end=60)
    # [−10, 0): nothing runs, 8 GPUs idle, nothing waits.
    assert m.mean_unallocated_gpus == pytest.approx((8 * 10 + 90) / 70)
    assert m.queue("A").mean_running_gpus == pytest.approx(190 / 70)
    assert m.queue("B").unallocated_gpu_hours_while_waiting == pytest.approx(60 / 3600)


def test_unmeasured_jobs_are_left_out_of_delays_only():
    r = met.TimelineRecorder(["A"], 8)
    r.submitted(0, "warm", "A", 4, measured=False)
    r.submitted(0, "x", "A", 4)
    r.admitted(0, "x")
    r.sample(0)
    r.admitted(30, "warm")  # it waited 30 s, but was running before the replay began
    r.sample(30)
    q = r.metrics(end=60).queue("A")
    assert (q.delay_p50_s, q.delay_p99_s, q.delay_mean_s) == (0.0, 0.0, 0.0)
    assert (q.submitted, q.admitted) == (2, 2)
    assert q.mean_running_gpus == pytest.approx((4 * 30 + 8 * 30) / 60)


def test_recorder_refuses_events_out_of_turn():
    r = met.TimelineRecorder(["A"], 8)
    r.submitted(5, "x", "A", 1)
    with pytest.raises(ValueError, match="not running"):
        r.finished(5, "x")
    with pytest.raises(ValueError, match="time goes back"):
        r.admitted(4, "x")
    with pytest.raises(ValueError, match="submitted twice"):
        r.submitted(6, "x", "A", 1)
    with pytest.raises(ValueError, match="unknown queue"):
        r.submitted(6, "y", "B", 1)
    with pytest.raises(ValueError, match="never submitted"):
        r.admitted(6, "z")
    with pytest.raises(ValueError, match="before the latest"):
        r.metrics(end=3)


def test_a_second_sample_at_one_time_replaces_the_first():
    r = met.TimelineRecorder(["A"], 8)
    r.submitted(0, "x", "A", 2)
    r.sample(0)
    r.admitted(0, "x")
    r.sample(0)
    s = r.series()
    assert list(s.times) == [0.0]
    assert s.running_gpus.tolist() == [[2.0]] and s.pending_pods.tolist() == [[0]]


# ------------------------------------------------------------------ files


def test_timeline_csv(tmp_path):
    r = hand_log()
    path = tmp_path / "timeline.csv"
    met.write_timeline_csv(r.series(), path)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == met.CSV_COLUMNS
    assert rows[0][:4] == ["time_s", "queue", "running_gpus", "pending_pods"]
    assert len(rows) == 1 + 7 * 2
    assert rows[1] == ["0.000", "A", "4.000", "1", "0", "4.000", "4.000"]
    assert rows[2] == ["0.000", "B", "0.000", "1", "0", "4.000", "4.000"]
    assert rows[3] == ["5.000", "A", "6.000", "0", "1", "2.000", "0.000"]
    assert rows[5] == ["10.000", "A", "4.000", "1", "0", "0.000", "0.000"]
    assert rows[-1] == ["55.000", "B", "4.000", "1", "0", "2.000", "2.000"]


def test_queues_md(tmp_path):
    m = hand_log().metrics(end=60)
    runs = [
        met.TimelineRun("qos queues, preemption on", 0.9, m, note="offered GPU load 0.900 (requested 0.900)"),
        met.TimelineRun("qos queues, preemption off", 1.1, m),
    ]
    path = tmp_path / "queues.md"
    met.write_queues_md(runs, path)
    text = path.read_text()
    assert text.count("| queue | jobs | admitted | waiting at end | delay p50 | delay p99 |") == 2
    assert "## qos queues, preemption on" in text and "## qos queues, preemption off" in text
    assert "Offered GPU load **0.900** on 8 GPUs" in text and "Offered GPU load **1.100** on 8 GPUs" in text
    assert "| A | 2 | 2 | 0 | 12 s | 25 s | 3.2 | 0.0 | 8.3 % | 1 | 0 |" in text
    assert "| B | 3 | 2 | 1 | 10 s | ≥ 10 s | 3.3 | 0.0 | 16.7 % | 0 | 1 |" in text
    assert "| **all** | 5 | 4 | 1 | 10 s | ≥ 24 s | 6.5 | 0.0 | 25.0 % | 1 | 1 |" in text
    assert text.count("Delays are over the 5 jobs submitted in the window; the 1 still waiting at the end "
                      "(1 never admitted) count at their wait so far") == 2


def test_timeline_png(tmp_path):
    path = tmp_path / "timeline.png"
    met.write_timeline_plot(hand_log().series(), path, title="hand log", end=60)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert [p.name for p in tmp_path.iterdir()] == ["timeline.png"]  # no temporary file left
