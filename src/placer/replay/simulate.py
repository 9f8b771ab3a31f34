"""Trace replay of the FGD study (Weng et al., USENIX ATC '23): unallocated GPUs vs arrival.

For one workload (an openb pod list), one policy and one seed:

1. the target workload M = :func:`placer.workload.fragmentation.target_workload` of the original
   pods;
2. the arrival order (:func:`arrival_order`): the pods sorted by name, shuffled by the
   seed, then *inflated* — pods drawn uniformly with replacement from the name-sorted
   original list are appended as clones ``<name>-tuned-<i>`` until the next draw would
   push the total GPU request above ``ratio`` (1.3) × the cluster's GPU capacity;
3. :meth:`placer.placement.cluster.Cluster.replay` places the pods one at a time, binding each, and
   gives the fragment F(M) after each pod;
4. per integer arrived % k (0..130), the mean over the per-pod samples whose rounded
   arrived % is k (none: those within k ± 1) of the unallocated GPU % and the fragment %
   (:func:`curve_metrics`).

Randomness. The study's simulator draws from Go's ``math/rand`` (``rand.Seed(seed)``, one
``rand.Int()``, ``rand.Shuffle``, ``rand.Intn`` per clone, ``rand.Perm`` for the node
name prefixes). That stream is not reproduced here: the shuffle and the clone draws come
from Python's ``random.Random(seed)`` (shuffle first, then ``randrange`` per draw), and
the tie order of nodes under ``fgd`` from the kernel's own seeded order
(:func:`placer.placement.cluster.fgd_rank`). Seeds 42..51 therefore give other arrival orders than
the study's seeds 42..51; only the statistics over seeds are comparable.

The stop test of the inflation. The simulator's ``tuneUpPods`` stops when
``total + per-GPU milli of the drawn pod > ratio × capacity``, comparing the drawn pod's
*per-GPU* milli rather than its total request (as its source does); the clone, once
accepted, adds its total (``num_gpu × gpu_milli``). So a multi-GPU clone can take the total
past the bound by up to ``(num_gpu − 1) × 1000`` milli. ``stop="per-gpu"`` (the default)
replicates this; ``stop="total"`` compares the total request, so the total never exceeds
the bound. A drawn CPU-only pod never stops the inflation (it requests no GPU milli), as
in the simulator. If the original pods already request more than the bound, random pods
are removed until they do not (the simulator's ``tuneDownPods``); if they request exactly
the bound, nothing is appended.

Runs (policy × seed) go to worker processes (:func:`simulate`); :func:`write_outputs`
(:mod:`placer.replay.study_report`) writes ``curves.csv``, ``table.md`` and ``curves.png``
beside the published values of the bundled ``fgd_expected_unalloc_summary.csv``
(:mod:`placer.replay.study`: the study's policies, parameters and figures).
"""
from __future__ import annotations

import math
import os
import random
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from placer import policies as _registry
from placer.text.files import PathLike
from placer.exceptions import InvalidInputError
from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S, RunsInterrupted, TaskFailure, grid_results
from placer.workload.fragmentation import Workload, target_workload
from placer.model import ClusterSnapshot, PodRequest, replace
from placer.replay.study import (
    ALL_POLICIES, MAX_ARRIVED, PUBLISHED_FILE, PUBLISHED_NAMES, PUBLISHED_SEEDS, STUDY_POLICIES, TABLE_ARRIVED,
    TUNE_RATIO, Curve, Published, load_published,
)
from placer.replay.study_report import (
    CSV_COLUMNS, curves_csv, plot_figure, summary_rows, table_markdown, write_curves_csv, write_outputs, write_plot,
    write_table_md,
)

__all__ = [
    "STUDY_POLICIES",
    "ALL_POLICIES",
    "PUBLISHED_NAMES",
    "TABLE_ARRIVED",
    "TUNE_RATIO",
    "MAX_ARRIVED",
    "Curve",
    "available_policies",
    "gpu_capacity_milli",
    "pod_gpu_milli",
    "arrival_order",
    "curve_metrics",
    "run_replay",
    "simulate",
    "load_published",
    "summary_rows",
    "CSV_COLUMNS",
    "curves_csv",
    "table_markdown",
    "write_curves_csv",
    "write_table_md",
    "write_plot",
    "write_outputs",
    "workload_name_from_path",
    "parse_seeds",
    "Published",
    "PUBLISHED_FILE",
    "PUBLISHED_SEEDS",
    "plot_figure",
]

STOP_TESTS = ("per-gpu", "total")


# ------------------------------------------------------------------------ the replay


def available_policies() -> tuple[str, ...]:
    """The policies :meth:`Cluster.replay` can run: every name of
    :data:`placer.policies.REGISTRY` (each has a kernel code)."""
    return _registry.names()


def gpu_capacity_milli(snapshot: ClusterSnapshot) -> int:
    """The cluster's GPU capacity in milli-GPUs: 1000 × the GPUs of all nodes."""
    return 1000 * sum(node.hardware.gpus for node in snapshot.nodes)


def pod_gpu_milli(pod: PodRequest) -> int:
    """A pod's total GPU request in milli-GPUs (``gpus × gpu_milli``; 0 for CPU-only)."""
    return pod.gpus * pod.gpu_milli if pod.gpus else 0


def _stop_milli(pod: PodRequest, stop: str) -> int:
    """The milli the stop test adds for a drawn pod (per-GPU milli under the quirk)."""
    if not pod.gpus:
        return 0
    return pod.gpu_milli if stop == "per-gpu" else pod.gpus * pod.gpu_milli


def arrival_order(
    pods: Sequence[PodRequest],
    seed: int,
    capacity_milli: int,
    ratio: float = TUNE_RATIO,
    stop: str = "per-gpu",
    demand: Callable[[PodRequest], int] | None = None,
) -> list[PodRequest]:
    """The arrival order of one seed: sorted by name, shuffled, inflated to ``ratio``.

    Parameters
    ----------
    pods : sequence of PodRequest
        The original pod list (names unique).
    seed : int
        Seed of ``random.Random``: first ``shuffle`` of the name-sorted list, then one
        ``randrange(len(pods))`` per drawn clone (Go's ``math/rand`` stream of the study
        is not reproduced; see the module notes).
    capacity_milli : int
        The cluster's GPU capacity in milli-GPUs (with ``demand``: in its unit).
    ratio : float
        Target total GPU request as a multiple of the capacity (the study: 1.3).
    stop : ``"per-gpu"`` or ``"total"``
        The stop test: the simulator's (the drawn pod's per-GPU milli, default) or the
        drawn pod's total GPU request.
    demand : callable, optional
        A pod's request in the unit of ``capacity_milli`` (default: its GPU milli,
        :func:`pod_gpu_milli`), e.g. the MIG slices it asks for. With it the stop test
        compares the drawn pod's whole demand, so ``stop`` must be ``"total"``.

    Returns
    -------
    list of PodRequest
        The shuffled originals followed by the clones ``<name>-tuned-<i>`` (i from 0).

    Raises
    ------
    InvalidInputError
        For an empty pod list, no GPU capacity, no pod requesting a GPU (the inflation
        would never stop), a ratio that is not a positive number, an unknown ``stop``, or
        ``stop="per-gpu"`` with a ``demand`` of the caller's.
    """
    if stop not in STOP_TESTS:
        raise InvalidInputError("stop", f"expected per-gpu or total, got {stop!r}")
    if demand is not None and stop != "total":
        raise InvalidInputError("stop", "a demand of the caller's is compared whole: use stop='total'")
    request = pod_gpu_milli if demand is None else demand
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0 or math.isinf(ratio):
        raise InvalidInputError("ratio", f"expected a positive number, got {ratio!r}")
    if not pods:
        raise InvalidInputError("pods", "the pod list is empty")
    if capacity_milli <= 0:
        raise InvalidInputError("nodes", "the cluster has no GPU: nothing to replay against")
    total = sum(request(p) for p in pods)
    if total <= 0:
        raise InvalidInputError("pods", "no pod requests a GPU: the arrival cannot be inflated")
    rng = random.Random(seed)
    original = sorted(pods, key=lambda p: p.name)
    order = list(original)
    rng.shuffle(order)
    bound = ratio * capacity_milli
    if total > bound:
        while total > bound:  # the simulator's tuneDownPods
            gone = order.pop(rng.randrange(len(order)))
            total -= request(gone)
        return order
    if total == bound:
        return order
    n = len(original)
    i = 0
    while True:
        drawn = original[rng.randrange(n)]
        if total + (_stop_milli(drawn, stop) if demand is None else request(drawn)) > bound:
            break
        total += request(drawn)
        order.append(replace(drawn, name=f"{drawn.name}-tuned-{i}"))
        i += 1
    return order


def curve_metrics(
    arrived_milli: np.ndarray,
    allocated_milli: np.ndarray,
    frag_milli: np.ndarray,
    capacity_milli: int,
    max_arrived: int = MAX_ARRIVED,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-sample cumulative values → per integer arrived % (the SIM's ``merge_*_discrete``).

    Each sample i has arrived % a_i = 100 · arrived_milli[i] / capacity, rounded to an
    integer (half to even); unallocated % u_i = 100 − 100 · allocated_milli[i] / capacity;
    fragment % f_i = 100 · frag_milli[i] / capacity. For each k in 0..``max_arrived`` the
    value is the mean of u (and f) over the samples with rounded a_i = k, or, when there is
    none, over the samples with rounded a_i in {k − 1, k + 1}; k with neither is left out.

    Returns
    -------
    (k, unallocated %, fragment %)
        Three arrays of the same length; k ascending, dtype int64.
    """
    arrived = np.asarray(arrived_milli, dtype=np.float64)
    alloc = np.asarray(allocated_milli, dtype=np.float64)
    frag = np.asarray(frag_milli, dtype=np.float64)
    if not (arrived.shape == alloc.shape == frag.shape) or arrived.ndim != 1:
        raise InvalidInputError("samples", "arrived, allocated and fragment need one value per sample each")
    if capacity_milli <= 0:
        raise InvalidInputError("capacity", f"expected a positive GPU capacity, got {capacity_milli}")
    cap = float(capacity_milli)
    k_of = np.rint(100.0 * arrived / cap).astype(np.int64)
    unalloc = 100.0 - 100.0 * alloc / cap
    frag_pct = 100.0 * frag / cap
    keep = (k_of >= 0) & (k_of <= max_arrived + 1)  # k ± 1 may reach one past the range
    size = max_arrived + 2
    cnt = np.bincount(k_of[keep], minlength=size).astype(np.float64)[:size]
    su = np.bincount(k_of[keep], weights=unalloc[keep], minlength=size)[:size]
    sf = np.bincount(k_of[keep], weights=frag_pct[keep], minlength=size)[:size]
    ks, us, fs = [], [], []
    for k in range(max_arrived + 1):
        if cnt[k] > 0:
            c, u, f = cnt[k], su[k], sf[k]
        else:
            lo, hi = max(k - 1, 0), k + 1
            c = cnt[lo] + cnt[hi] if lo != k else cnt[hi]
            if c == 0:
                continue
            u = (su[lo] if lo != k else 0.0) + su[hi]
            f = (sf[lo] if lo != k else 0.0) + sf[hi]
        ks.append(k)
        us.append(u / c)
        fs.append(f / c)
    return np.array(ks, dtype=np.int64), np.array(us), np.array(fs)


def run_replay(
    snapshot: ClusterSnapshot,
    pods: Sequence[PodRequest],
    policy: str | _registry.Policy,
    seed: int,
    workload: Workload | None = None,
    *,
    name: str = "trace",
    ratio: float = TUNE_RATIO,
    stop: str = "per-gpu",
    packing_weights: tuple[float, float] | None = None,
) -> Curve:
    """Replay one seed of a workload under one policy; the curve per integer arrived %.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        The cluster; the study's starts empty. Pods already running on it keep their
        resources but do not count as arrived or allocated.
    pods : sequence of PodRequest
        The original (not inflated) pod list.
    policy : str or Policy
        A name in :data:`placer.policies.REGISTRY` (checked here), or its record.
    seed : int
        Seed of the arrival order (:func:`arrival_order`) and of the policy's own draws.
    workload : Workload, optional
        The target workload M of the fragment measure (default:
        ``target_workload(pods)``, of the original list). ``fgd-pack`` starts its guide
        from it and learns from the pods as they arrive (:meth:`Cluster.learn_packing`):
        the arrival order is never read ahead.
    name : str
        The workload's name, kept in :attr:`Curve.workload`.
    ratio, stop
        As in :func:`arrival_order`.
    packing_weights : (float, float), optional
        ``fgd-pack``'s regret and pressure weights (:meth:`Cluster.set_packing_weights`).

    The samples are the empty cluster before the first pod (arrived 0, as the simulator
    reports once before submitting) and the state after each pod: arrived milli counts
    every pod submitted so far (failed ones too), allocated milli the placed ones.
    """
    from placer.placement.cluster import Cluster

    started = time.perf_counter()
    record = policy if isinstance(policy, _registry.Policy) else _registry.get(policy, "policy")
    if workload is None:
        workload = target_workload(pods)
    capacity = gpu_capacity_milli(snapshot)
    order = arrival_order(pods, seed, capacity, ratio=ratio, stop=stop)
    cluster = Cluster(snapshot)
    if packing_weights is not None:
        cluster.set_packing_weights(*packing_weights)
    frag0 = cluster.fragmentation(workload).total
    if record.needs_packing_guide:
        cluster.learn_packing(workload)
    result, trace = cluster.replay(order, record, seed, workload)
    placed = {a.pod for a in result.assignments}
    request = np.fromiter((pod_gpu_milli(p) for p in order), dtype=np.int64, count=len(order))
    got = np.fromiter((p.name in placed for p in order), dtype=bool, count=len(order))
    arrived = np.concatenate(([0], np.cumsum(request)))
    allocated = np.concatenate(([0], np.cumsum(np.where(got, request, 0))))
    frag = np.concatenate(([frag0], np.asarray(trace, dtype=np.float64)))
    k, unalloc, frag_pct = curve_metrics(arrived, allocated, frag, capacity)
    return Curve(
        workload=name,
        policy=record.name,
        seed=int(seed),
        arrived_pct=k,
        unallocated_pct=unalloc,
        frag_pct=frag_pct,
        capacity_milli=capacity,
        original_pods=len(pods),
        arrived_pods=len(order),
        placed_pods=int(got.sum()),
        seconds=time.perf_counter() - started,
    )


# ------------------------------------------------------------------- many replays

def _replay_task(shared: tuple[Any, ...], policy: str, seed: int) -> Curve:
    """One replay (:func:`placer.replay.executors.run_tasks`); ``policy`` was checked by :func:`simulate`."""
    snapshot, pods, workload, name, ratio, stop = shared
    return run_replay(snapshot, pods, _registry.REGISTRY[policy], seed, workload, name=name, ratio=ratio, stop=stop)


def simulate(
    snapshot: ClusterSnapshot,
    pods: Sequence[PodRequest],
    policies: Iterable[str],
    seeds: Iterable[int],
    jobs: int | None = None,
    progress: bool = True,
    *,
    name: str = "trace",
    workload: Workload | None = None,
    ratio: float = TUNE_RATIO,
    stop: str = "per-gpu",
    executor: str = "local",
    address: str | None = None,
    on_failure: Callable[[TaskFailure], None] | None = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> list[Curve]:
    """Replay every (policy, seed) of one workload, in parallel processes or on Ray.

    Parameters
    ----------
    snapshot, pods
        The cluster and the original pod list (as in :func:`run_replay`).
    policies : iterable of str
        Names in :data:`placer.policies.REGISTRY`.
    seeds : iterable of int
    jobs : int, optional
        Worker processes (default: the CPU count; 1 runs in this process); with ``ray``
        and no address, the CPUs of the local Ray instance.
    progress : bool
        Show a tqdm bar over the replays, with the time left, on stderr (only when stderr is
        a terminal).
    name, workload, ratio, stop
        As in :func:`run_replay`.
    executor : {"local", "ray"}
        Where the replays run (:func:`placer.replay.executors.run_tasks`); the curves are the same.
    address : str, optional
        The Ray cluster to use (default: a local one, started and stopped here).
    on_failure : callable, optional
        Told of each replay that failed twice (its key is ``(name, policy, seed)``); the
        others' curves are returned. Without it the first failure raises
        :class:`RuntimeError` once every replay has ended.
    connect_timeout : float
        Seconds the Ray cluster at ``address`` has to answer.

    Returns
    -------
    list of Curve
        Ordered by the given policies, then seeds.

    Raises
    ------
    RunsInterrupted
        On Ctrl-C, with the curves of the replays that had finished (in the order above).
    """
    policies = list(policies)
    seeds = [int(s) for s in seeds]
    if not policies:
        raise InvalidInputError("policies", "no policy to run")
    if not seeds:
        raise InvalidInputError("seeds", "no seed to run")
    for p in policies:
        _registry.get(p, "policy")
    pods = list(pods)
    if workload is None:
        workload = target_workload(pods)
    # Check the inputs once here rather than in every worker.
    arrival_order(pods, seeds[0], gpu_capacity_milli(snapshot), ratio=ratio, stop=stop)
    tasks = [((name, p, s), (p, s)) for p in policies for s in seeds]
    shared = (snapshot, pods, workload, name, ratio, stop)
    done: dict[Any, Curve] = {}
    failures: list[TaskFailure] = []
    def in_order() -> list[Curve]:
        return [done[key] for key, _ in tasks if key in done]

    try:
        for result in grid_results(_replay_task, shared, tasks, "simulate", progress, executor=executor, jobs=jobs,
                                   address=address, connect_timeout=connect_timeout):
            if result.failure is not None:
                failures.append(result.failure)
                if on_failure is not None:
                    on_failure(result.failure)
            else:
                done[result.key] = result.value
    except KeyboardInterrupt:
        kept = in_order()
        raise RunsInterrupted(len(kept), len(tasks), kept) from None
    if failures and on_failure is None:
        first = failures[0]
        raise RuntimeError(f"{len(failures)} replay(s) failed; {first.key}: {first.error}")
    return in_order()


# ------------------------------------------------------------------------ CLI helpers


def workload_name_from_path(path: PathLike) -> str:
    """``openb_pod_list_<name>.csv`` (or ``.csv.gz``) → ``<name>``; any other file → its stem."""
    stem = Path(os.fspath(path).removesuffix(".gz")).stem
    return stem.removeprefix("openb_pod_list_") or stem


def parse_seeds(text: str, where: str = "--seeds") -> list[int]:
    """``42-51`` (inclusive), ``1,2,3`` or a mix (``1-3,7``) → the seeds in order.

    Raises
    ------
    InvalidInputError
        ``where`` for an empty list, an item that is not a seed (0..2**64−1) or a range
        ``a-b`` with ``a > b``, or a seed listed twice.
    """
    from placer.schema import check_seed

    seeds: list[int] = []
    items = text.split(",")
    if not text.strip():
        raise InvalidInputError(where, "expected seeds such as 42-51 or 1,2,3, got an empty value")
    for item in items:
        s = item.strip()
        a, dash, b = s.partition("-")
        try:
            if dash:
                lo, hi = check_seed(a.strip(), where), check_seed(b.strip(), where)
                if lo > hi:
                    raise InvalidInputError(where, f"range {s!r} runs backwards")
                if hi - lo >= 100_000:
                    raise InvalidInputError(where, f"range {s!r} has more than 100000 seeds")
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(check_seed(s, where))
        except InvalidInputError as exc:
            if exc.what.startswith("range"):
                raise
            raise InvalidInputError(
                where, f"expected seeds such as 42-51 or 1,2,3 (integers >= 0), got {item!r}"
            ) from None
    seen: set[int] = set()
    for s in seeds:
        if s in seen:
            raise InvalidInputError(where, f"seed {s} is listed twice")
        seen.add(s)
    return seeds
