"""Issue #30, item 2: what the lock of :class:`placer.Cluster` costs on the hot path.

Each case runs the same calls, single-threaded, on a fresh cluster of ``--nodes`` nodes
(:func:`workloads.cluster`: 8 GPUs each, 0-7 held) in three variants, alternating round by
round in this one process:

* ``locked``: as shipped; every public method and property of ``Cluster`` and of its
  ``KernelSession`` holds their shared ``RLock``;
* ``unlocked``: the same classes with each method's unlocked original (``__wrapped__``);
* ``guarded``: the single-writer alternative; each call claims the lock without waiting
  and raises when another thread is inside (what a ``ConcurrentUseError`` would cost).

Cases (``--pods`` pods of 1, 2, 4 or 8 GPUs, seeded):

* ``loop``: a scheduler's loop; per pod ``place()``, ``bind()`` of the result, and
  ``release()`` of the pod bound ``--keep`` pods earlier;
* ``extender``: per pod ``node_scores()``, ``place_on()`` the best node, ``bind()``, and
  the same release;
* ``batch``: one ``schedule()`` of every pod (the lock is taken a few times per call).

Prints µs per pod, the median of ``--rounds`` rounds, and each variant's ratio to
``unlocked``, and how many times per pod a call takes the lock (the methods of the session
that the cluster's methods call take it again); then the ns of one cheap call
(``session.holds``) per variant; ``--threads 3`` also times the ``loop`` split over three threads on one
locked cluster (every call serialised: no speed-up is expected, no fault is allowed).

Run: ``PYTHONPATH=src python bench/bench_cluster_threads.py --nodes 1000 --pods 3000 --rounds 7``.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import numpy as np  # noqa: E402

import workloads  # noqa: E402
from placer.placement.cluster import Cluster  # noqa: E402
from placer.exceptions import InvalidInputError  # noqa: E402
from placer.kernel.session import KernelSession  # noqa: E402
from placer.model import ClusterSnapshot, PlacementRequest, PodRequest  # noqa: E402

VARIANTS = ("unlocked", "locked", "guarded")
CASES = ("loop", "extender", "batch")


def _guarded(function: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not self.lock.acquire(blocking=False):
            raise RuntimeError("another thread is using this cluster")
        try:
            return function(self, *args, **kwargs)
        finally:
            self.lock.release()

    return guarded


def _variant(cls: type, wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None) -> type:
    """A subclass of ``cls`` whose public methods are the unlocked originals, each wrapped
    by ``wrap`` (None: as they are)."""
    members: dict[str, Any] = {}
    for name, value in vars(cls).items():
        if isinstance(value, property) and hasattr(value.fget, "__wrapped__"):
            getter = value.fget.__wrapped__
            members[name] = property(wrap(getter) if wrap else getter, doc=value.__doc__)
        elif hasattr(value, "__wrapped__"):
            members[name] = wrap(value.__wrapped__) if wrap else value.__wrapped__
    return type(f"{cls.__name__}_{'unlocked' if wrap is None else wrap.__name__}", (cls,), members)


_CALLS = [0]


def _counted(function: Callable[..., Any]) -> Callable[..., Any]:
    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _CALLS[0] += 1
        with self.lock:
            return function(self, *args, **kwargs)

    return counted


_CLASSES = {
    "unlocked": (_variant(Cluster, None), _variant(KernelSession, None)),
    "guarded": (_variant(Cluster, _guarded), _variant(KernelSession, _guarded)),
    "counted": (_variant(Cluster, _counted), _variant(KernelSession, _counted)),  # the lock's calls, untimed
}


def fresh(snapshot: ClusterSnapshot, variant: str) -> Cluster:
    """A cluster of ``snapshot`` whose methods lock as ``variant`` says."""
    cluster = Cluster(snapshot)
    if variant in _CLASSES:
        cluster.__class__, cluster.session.__class__ = _CLASSES[variant]
    return cluster


def pods(count: int, seed: int = 7) -> list[PodRequest]:
    rng = random.Random(seed)
    return [PodRequest(f"p-{i}", gpus=rng.choice((1, 1, 2, 4, 8)), cpu_milli=8000) for i in range(count)]


def run_loop(cluster: Cluster, batch: list[PodRequest], keep: int, refused: list[str] | None = None) -> int:
    """The loop's calls; ``refused`` (threads only) collects the binds another thread's bind
    beat, where a single thread lets them raise."""
    bound: list[str] = []
    for pod in batch:
        result = cluster.place(pod)
        if result.assignments:
            try:
                cluster.bind(result)
            except InvalidInputError:
                if refused is None:
                    raise
                refused.append(pod.name)
            else:
                bound.append(pod.name)
        if len(bound) > keep:
            cluster.release(bound.pop(0))
    return len(bound)


def run_extender(cluster: Cluster, batch: list[PodRequest], keep: int) -> int:
    bound: list[str] = []
    names = cluster.node_names
    for pod in batch:
        scores = cluster.node_scores(pod)
        best = int(np.argmax(scores))
        if scores[best] > np.iinfo(np.int64).min:
            result = cluster.place_on(pod, names[best])
            if result.assignments:
                cluster.bind(result)
                bound.append(pod.name)
        if len(bound) > keep:
            cluster.release(bound.pop(0))
    return len(bound)


def run_batch(cluster: Cluster, batch: list[PodRequest], keep: int) -> int:
    return len(cluster.schedule(PlacementRequest(pods=tuple(batch))).assignments)


RUNS = {"loop": run_loop, "extender": run_extender, "batch": run_batch}


def threaded_loop(snapshot: ClusterSnapshot, batch: list[PodRequest], keep: int, threads: int) -> tuple[float, int]:
    """Seconds for ``threads`` threads to run the loop on their shares of ``batch`` on one
    locked cluster, and how many binds another thread's bind beat."""
    cluster = fresh(snapshot, "locked")
    refused: list[str] = []
    workers = [
        threading.Thread(target=run_loop, args=(cluster, batch[t::threads], keep // threads, refused))
        for t in range(threads)
    ]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - started, len(refused)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--keep", type=int, default=200, help="pods kept bound before the oldest is released")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="also time the loop over this many threads")
    args = parser.parse_args(argv)
    snapshot = workloads.cluster(args.nodes)
    batch = pods(args.pods)
    print(f"{args.nodes} nodes, {args.pods} pods, median of {args.rounds} rounds, µs per pod")
    print(f"{'case':<9} " + " ".join(f"{v:>9}" for v in VARIANTS) + "   locked/unlocked  guarded/unlocked"
          "  locks/pod")
    for case in CASES:
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        outcomes: dict[str, set[int]] = {v: set() for v in VARIANTS}
        for _ in range(args.rounds):
            for variant in VARIANTS:
                cluster = fresh(snapshot, variant)
                started = time.perf_counter()
                outcomes[variant].add(RUNS[case](cluster, batch, args.keep))
                times[variant].append(time.perf_counter() - started)
        if len({frozenset(o) for o in outcomes.values()}) != 1:
            raise SystemExit(f"{case}: the variants decided differently: {outcomes}")
        us = {v: statistics.median(times[v]) / len(batch) * 1e6 for v in VARIANTS}
        _CALLS[0] = 0
        RUNS[case](fresh(snapshot, "counted"), batch, args.keep)
        print(f"{case:<9} " + " ".join(f"{us[v]:9.2f}" for v in VARIANTS)
              + f"   {us['locked'] / us['unlocked']:15.3f}  {us['guarded'] / us['unlocked']:16.3f}"
              + f"  {_CALLS[0] / len(batch):9.2f}")
    per_call = {}
    for variant in VARIANTS:
        session = fresh(snapshot, variant).session
        rounds = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for _ in range(100_000):
                session.holds("p-0")
            rounds.append(time.perf_counter() - started)
        per_call[variant] = statistics.median(rounds) / 100_000 * 1e9
    print("one call (session.holds), ns: " + ", ".join(f"{v} {per_call[v]:.0f}" for v in VARIANTS))
    if args.threads:
        for threads in (1, args.threads):
            runs = [threaded_loop(snapshot, batch, args.keep, threads) for _ in range(args.rounds)]
            print(f"loop, locked, {threads} thread(s): {statistics.median(r[0] for r in runs) / len(batch) * 1e6:.2f} "
                  f"µs/pod, {max(r[1] for r in runs)} bind(s) at most beaten by another thread's")

if __name__ == "__main__":
    main()
