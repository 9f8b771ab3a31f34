"""One Cluster shared by threads: every call serialised, so every decision is valid and the
state is exactly what the calls that succeeded made it (issue #30, item 2)."""
from __future__ import annotations

import random
import sys
import threading
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer._serial import serialised
from placer.placement.cluster import Cluster
from placer.diagnostics.check import check_placement
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import target_workload
from placer.model import (
    Assignment,
    ClusterSnapshot,
    Node,
    NodeType,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    RunningPod,
    replace,
)

GPUS = 8
HARDWARE = NodeType(gpus=GPUS, gpu_model="H100", cpu_milli=64000, memory_mib=512000, max_pods=64)
SHAPES = ((1, 1000), (2, 1000), (4, 1000), (8, 1000), (1, 500))  # (GPUs, milli per GPU)


def cluster_of(n_nodes: int) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=tuple(Node(f"n{i}", HARDWARE) for i in range(n_nodes)))


@pytest.fixture(autouse=True)
def switch_often() -> Iterator[None]:
    """Let the interpreter switch threads as often as it can, so the calls interleave."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


class Worker:
    """A thread's scheduler loop: place a pod, bind the decision, release its own pods
    (the oldest first) once it holds ``keep`` of them."""

    def __init__(self, cluster: Cluster, tag: str, pods: list[PodRequest], keep: int) -> None:
        self.cluster, self.tag, self.pods, self.keep = cluster, tag, pods, keep
        self.bound: dict[str, tuple[PodRequest, Assignment]] = {}  # what it holds now, oldest first
        self.invalid: list[str] = []  # decisions that break the pod's request
        self.faults: list[BaseException] = []  # anything but a bind beaten by another thread

    def run(self) -> None:
        try:
            for pod in self.pods:
                self._step(pod)
        except BaseException as e:  # the test reports it
            self.faults.append(e)

    def _step(self, pod: PodRequest) -> None:
        result = self.cluster.place(pod)
        for a in result.assignments:
            if len(a.gpus) != pod.gpus or len(set(a.gpus)) != pod.gpus or not all(0 <= g < GPUS for g in a.gpus):
                self.invalid.append(f"{pod.name}: {pod.gpus} GPU(s) asked, got {a.gpus} on {a.node}")
        if not result.assignments:
            if not result.unschedulable:
                self.invalid.append(f"{pod.name}: neither placed nor unschedulable")
            return
        try:
            self.cluster.bind(result)
        except InvalidInputError as e:  # another thread bound onto what place() chose
            if "does not fit" not in str(e):
                raise
        else:
            self.bound[pod.name] = (pod, result.assignments[0])
        if len(self.bound) > self.keep:
            oldest = next(iter(self.bound))
            self.cluster.release(oldest)
            del self.bound[oldest]


class Reader:
    """A thread that reads the whole state while the workers change it: each snapshot it
    takes must be one state (no GPU held twice, no share past a whole GPU)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.done = threading.Event()
        self.reads = 0
        self.torn: list[str] = []
        self.faults: list[BaseException] = []

    def run(self) -> None:
        try:
            while not self.done.is_set() or not self.reads:
                self._read()
        except BaseException as e:  # the test reports it
            self.faults.append(e)

    def _read(self) -> None:
        self.reads += 1
        for node in self.cluster.to_snapshot().nodes:
            milli = [0] * GPUS
            for pod in node.pods:
                for gpu in pod.gpus:
                    milli[gpu] += 1000
                for gpu, share in pod.gpu_shares.items():
                    milli[gpu] += share
            if max(milli) > 1000:
                self.torn.append(f"{node.name}: GPU milli held {milli}")


def pods_for(tag: str, count: int, seed: int) -> list[PodRequest]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        gpus, milli = rng.choice(SHAPES)
        pods.append(PodRequest(f"{tag}-{i}", gpus=gpus, gpu_milli=milli, cpu_milli=rng.choice((0, 1000, 4000))))
    return pods


def run_threads(snapshot: ClusterSnapshot, per_thread: list[list[PodRequest]], keep: int) -> tuple[Cluster, list[Worker]]:
    cluster = Cluster(snapshot)
    workers = [Worker(cluster, f"t{t}", pods, keep) for t, pods in enumerate(per_thread)]
    reader = Reader(cluster)
    threads = [threading.Thread(target=w.run) for w in workers]
    reading = threading.Thread(target=reader.run)
    reading.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader.done.set()
    reading.join()
    assert not reader.faults, f"reader: {reader.faults[0]!r}"
    assert not reader.torn, reader.torn[:5]
    return cluster, workers


def held_snapshot(snapshot: ClusterSnapshot, held: list[tuple[PodRequest, Assignment]]) -> ClusterSnapshot:
    """``snapshot`` with each held pod running on its node as its assignment says."""
    on: dict[str, list[RunningPod]] = {}
    for pod, a in held:
        running = (
            RunningPod(a.pod, gpu_shares={a.gpus[0]: pod.gpu_milli}, cpu_milli=pod.cpu_milli)
            if pod.shared else RunningPod(a.pod, gpus=a.gpus, cpu_milli=pod.cpu_milli)
        )
        on.setdefault(a.node, []).append(running)
    return replace(snapshot, nodes=tuple(replace(n, pods=tuple(on.get(n.name, ()))) for n in snapshot.nodes))


def free_arrays(cluster: Cluster) -> list[list]:
    free = cluster.session.free
    return [np.asarray(x).tolist() for x in (free.gpu_milli, free.whole_gpus, free.cpu_milli, free.pod_slots)]


def check_shared_run(snapshot: ClusterSnapshot, per_thread: list[list[PodRequest]], keep: int) -> None:
    """Run the threads on one cluster, a reader beside them, and check every decision, every
    state read and the state they leave."""
    cluster, workers = run_threads(snapshot, per_thread, keep)
    for w in workers:
        assert not w.faults, f"{w.tag}: {w.faults[0]!r}"
        assert not w.invalid, w.invalid[:5]
    held = [entry for w in workers for entry in w.bound.values()]
    # the pods each thread holds are exactly those the cluster holds, where the binds put them
    assert sorted(record.name for _, record in cluster.session.running()) == sorted(a.pod for _, a in held)
    # together they break no rule (no GPU or CPU given twice) on the cluster as it started
    request = PlacementRequest(pods=tuple(pod for pod, _ in held))
    assert check_placement(snapshot, request, PlacementResult(tuple(a for _, a in held), (), ())) == []
    # and what is free is what a fresh cluster running them has free: nothing leaked or lost
    assert free_arrays(cluster) == free_arrays(Cluster(held_snapshot(snapshot, held)))


def test_threads_placing_binding_and_releasing_on_one_cluster_leave_a_valid_state():
    per_thread = [pods_for(f"t{t}", 1500, seed=t) for t in range(4)]
    check_shared_run(cluster_of(12), per_thread, keep=6)


@settings(max_examples=8, deadline=None)
@given(
    n_nodes=st.integers(2, 8),
    threads=st.integers(2, 4),
    keep=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_any_mix_of_threads_and_pods_leaves_a_valid_state(n_nodes, threads, keep, seed):
    per_thread = [pods_for(f"t{t}", 400, seed=seed + t) for t in range(threads)]
    check_shared_run(cluster_of(n_nodes), per_thread, keep)


def test_lock_makes_place_then_bind_one_step():
    cluster = Cluster(cluster_of(1))
    barrier = threading.Barrier(3)
    refused: list[str] = []

    def place_and_bind(name: str) -> None:
        barrier.wait()
        for i in range(200):
            with cluster.lock:  # no other thread binds between the decision and its bind
                result = cluster.place(PodRequest(f"{name}-{i}", gpus=8))
                try:
                    cluster.bind(result)
                except InvalidInputError as e:
                    refused.append(str(e))
                cluster.release(f"{name}-{i}")

    threads = [threading.Thread(target=place_and_bind, args=(f"t{t}",)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert refused == []
    assert cluster.node_free("n0").gpu_milli == (1000,) * GPUS


def test_the_lock_is_one_for_the_cluster_and_its_session_and_reentrant():
    cluster = Cluster(cluster_of(1))
    assert cluster.lock is cluster.session.lock
    claimed: list[bool] = []
    with cluster.lock:
        cluster.bind(cluster.place(PodRequest("a", gpus=2)))  # calls inside the lock do not wait on it
        other = threading.Thread(target=lambda: claimed.append(cluster.lock.acquire(blocking=False)))
        other.start()
        other.join()
    assert claimed == [False]
    assert [record.name for _, record in cluster.session.running()] == ["a"]


def test_a_public_generator_is_refused_as_it_would_run_outside_the_lock():
    class State:
        def items(self) -> Iterator[int]:
            yield 1

    with pytest.raises(TypeError, match="State.items is a generator"):
        serialised(State)


class CountingLock:
    """A lock that counts how often it is entered, around the real one."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.entered = 0

    def __enter__(self) -> Any:
        self.entered += 1
        return self.lock.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.lock.__exit__(*exc)


def test_every_public_call_of_the_cluster_holds_its_lock():
    """Cluster delegates to its feature modules (placement.run, scoring, binding, ...); each
    public method and property still runs holding the cluster's lock."""
    cluster = Cluster(cluster_of(2))
    counting = CountingLock(cluster.lock)
    cluster.lock = counting
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "x", "gpus": 1}]}
    pods = [PodRequest("r", gpus=1)]
    calls = {
        "snapshot": lambda: cluster.snapshot,
        "session": lambda: cluster.session,
        "domains": lambda: cluster.domains,
        "node_names": lambda: cluster.node_names,
        "checked_request": lambda: cluster.checked_request(request),
        "place": lambda: cluster.place(PodRequest("p", gpus=2)),
        "node_scores": lambda: cluster.node_scores(PodRequest("p", gpus=2)),
        "place_on": lambda: cluster.place_on(PodRequest("p", gpus=2), "n1"),
        "defrag": lambda: cluster.defrag(request),
        "move": lambda: cluster.move([]),
        "preemption_hint": lambda: cluster.preemption_hint(pods),
        "schedule": lambda: cluster.schedule(request),
        "release": lambda: cluster.release("x"),
        "preempt": lambda: cluster.preempt(request),
        "bind": lambda: cluster.bind(cluster.place(PodRequest("b", gpus=1))),
        "replay": lambda: cluster.replay(pods),
        "fragmentation": lambda: cluster.fragmentation(target_workload(pods)),
        "node_fragment": lambda: cluster.node_fragment("n0"),
        "node_free": lambda: cluster.node_free("n0"),
        "packing_guide": lambda: cluster.packing_guide(pods),
        "set_packing_weights": lambda: cluster.set_packing_weights(),
        "learn_packing": lambda: cluster.learn_packing(),
        "packing": lambda: cluster.packing,
        "set_packing": lambda: cluster.set_packing(cluster.packing_guide(pods)),
        "to_snapshot": lambda: cluster.to_snapshot(),
    }
    public = {name for name in dir(Cluster) if not name.startswith("_")} - {"lock"}
    assert public == set(calls)
    for name, call in calls.items():
        before = counting.entered
        call()
        assert counting.entered > before, name
    free: list[bool] = []

    def try_lock() -> None:
        free.append(counting.lock.acquire(blocking=False))
        if free[-1]:
            counting.lock.release()

    other = threading.Thread(target=try_lock)
    other.start()
    other.join()
    assert free == [True]  # every call let it go
