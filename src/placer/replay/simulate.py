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
writes ``curves.csv``, ``table.md`` and ``curves.png`` beside the published values of
the bundled ``fgd_expected_unalloc_summary.csv``.
"""
from __future__ import annotations

import csv
import io
import math
import os
import random
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

import numpy as np

from placer import policies as _registry
from placer.text.files import remove_stale, write_bytes_atomic, write_text_atomic
from placer.exceptions import InvalidInputError
from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S, RunsInterrupted, TaskFailure, grid_results
from placer.workload.fragmentation import Workload, target_workload
from placer.model import ClusterSnapshot, PodRequest, replace

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
]

PathLike = Union[str, "os.PathLike[str]"]
Published = Mapping[tuple[str, str], Mapping[int, tuple[float, float, float]]]
"""``{(workload, policy): {arrived %: (mean, median, std)}}``, as :func:`load_published` gives."""

_SIMULATED = sorted(
    (p for p in _registry.REGISTRY.values() if p.simulate_rank is not None), key=lambda p: p.simulate_rank
)

ALL_POLICIES = tuple(p.name for p in _SIMULATED)
"""What ``placer simulate --policy all`` runs, in table order (``Policy.simulate_rank``):
placer's ``fgd-pack``, then the FGD study's six."""

STUDY_POLICIES = tuple(p.name for p in _SIMULATED if p.study)
"""The six policies of the FGD study (``Policy.study``), in the order the table lists them
(``Policy.simulate_rank``)."""

PUBLISHED_NAMES = {p.name: p.study_name for p in _SIMULATED if p.study_name is not None}
"""Our policy name → the study's name in ``fgd_expected_unalloc_summary.csv`` (``Policy.study_name``)."""

TABLE_ARRIVED = (90, 95, 100, 110, 120, 130)
"""The arrived % at which ``table.md`` compares with the published values."""

TUNE_RATIO = 1.3
MAX_ARRIVED = 130
STOP_TESTS = ("per-gpu", "total")
PUBLISHED_FILE = "fgd_expected_unalloc_summary.csv"
PUBLISHED_SEEDS = "42–51"


# ------------------------------------------------------------------------ the replay


@dataclass(frozen=True, eq=False)
class Curve:
    """The metrics of one replay (one workload, policy and seed), per integer arrived %.

    ``arrived_pct[j]`` is an integer k in 0..130; ``unallocated_pct[j]`` and ``frag_pct[j]``
    are the means of the per-pod samples at k (see :func:`curve_metrics`). Values of k with
    no sample at k or k ± 1 are left out.
    """

    workload: str
    policy: str
    seed: int
    arrived_pct: np.ndarray
    unallocated_pct: np.ndarray
    frag_pct: np.ndarray
    capacity_milli: int
    original_pods: int
    arrived_pods: int
    placed_pods: int
    seconds: float = 0.0

    def at(self, k: int) -> float:
        """Unallocated GPU % at arrived ``k`` %, or NaN when the curve has no value there."""
        hit = np.flatnonzero(self.arrived_pct == k)
        return float(self.unallocated_pct[hit[0]]) if hit.size else math.nan

    def frag_at(self, k: int) -> float:
        """Fragment % of capacity at arrived ``k`` %, or NaN."""
        hit = np.flatnonzero(self.arrived_pct == k)
        return float(self.frag_pct[hit[0]]) if hit.size else math.nan


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


# ------------------------------------------------------------------ published values


def load_published(path: PathLike | None = None) -> dict[tuple[str, str], dict[int, tuple[float, float, float]]]:
    """The study's unallocated GPU % per (workload, our policy name) and arrived %.

    Reads the bundled ``fgd_expected_unalloc_summary.csv`` (or ``path``); workload names
    lose their ``openb_pod_list_`` prefix (``default``, ``cpu050``, …).

    Returns
    -------
    dict
        ``{(workload, policy): {arrived %: (mean, median, std)}}`` over the study's 10 seeds.
    """
    from placer.text.files import bundled_file, read_text

    source = bundled_file("openb", PUBLISHED_FILE) if path is None else path
    if source is None:
        raise InvalidInputError(PUBLISHED_FILE, "no such bundled openb file")
    text = read_text(source)
    ours = {v: k for k, v in PUBLISHED_NAMES.items()}
    out: dict[tuple[str, str], dict[int, tuple[float, float, float]]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        policy = ours.get(row["policy"])
        if policy is None:
            continue
        workload = row["workload"].removeprefix("openb_pod_list_")
        per: dict[int, tuple[float, float, float]] = {}
        for k in TABLE_ARRIVED:
            try:
                per[k] = (
                    float(row[f"unalloc_pct_mean_at{k}"]),
                    float(row[f"unalloc_pct_median_at{k}"]),
                    float(row[f"unalloc_pct_std_at{k}"]),
                )
            except (KeyError, TypeError, ValueError):
                continue
        out[(workload, policy)] = per
    return out


# -------------------------------------------------------------------------- writers

CSV_COLUMNS = ("workload", "policy", "seed", "arrived_pct", "unallocated_pct", "frag_pct")


def curves_csv(curves: Sequence[Curve]) -> str:
    """``curves.csv``: one row per curve and integer arrived %."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in curves:
        for k, u, f in zip(c.arrived_pct.tolist(), c.unallocated_pct.tolist(), c.frag_pct.tolist()):
            w.writerow((c.workload, c.policy, c.seed, k, f"{u:.4f}", f"{f:.4f}"))
    return buf.getvalue()


def _groups(curves: Sequence[Curve]) -> dict[str, dict[str, list[Curve]]]:
    out: dict[str, dict[str, list[Curve]]] = {}
    for c in curves:
        out.setdefault(c.workload, {}).setdefault(c.policy, []).append(c)
    return out


def _stats(values: list[float]) -> tuple[float, float, float, int]:
    """(median, mean, sample sd, n) over the values that are not NaN."""
    v = np.array([x for x in values if not math.isnan(x)])
    if v.size == 0:
        return math.nan, math.nan, math.nan, 0
    sd = float(v.std(ddof=1)) if v.size > 1 else math.nan
    return float(np.median(v)), float(v.mean()), sd, int(v.size)


def _num(x: float, digits: int = 2) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _mean_sd(mean: float, sd: float) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.2f} ± {sd:.2f}" if not math.isnan(sd) else f"{mean:.2f}"


def _seed_text(seeds: list[int]) -> str:
    s = sorted(set(seeds))
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}–{s[-1]} ({len(s)})"
    return ", ".join(map(str, s)) + f" ({len(s)})"


def _policy_order(policies: Iterable[str]) -> list[str]:
    rank = {p: i for i, p in enumerate(ALL_POLICIES)}
    return sorted(set(policies), key=lambda p: (rank.get(p, len(rank)), p))


def summary_rows(
    curves: Sequence[Curve], published: Published | None = None, arrived: int = 100
) -> list[dict[str, Any]]:
    """Per workload and policy: our median / mean / sd at ``arrived`` % and the published
    mean / median (NaN when unknown)."""
    if published is None:
        published = load_published()
    rows = []
    for workload, by_policy in _groups(curves).items():
        for policy in _policy_order(by_policy):
            med, mean, sd, n = _stats([c.at(arrived) for c in by_policy[policy]])
            pub = published.get((workload, policy), {}).get(arrived)
            rows.append(
                {
                    "workload": workload,
                    "policy": policy,
                    "median": med,
                    "mean": mean,
                    "sd": sd,
                    "n": n,
                    "published_mean": pub[0] if pub else math.nan,
                    "published_median": pub[1] if pub else math.nan,
                }
            )
    return rows


def table_markdown(
    curves: Sequence[Curve],
    published: Published | None = None,
) -> str:
    """``table.md``: per workload, unallocated GPU % at 90…130 % arrived, ours beside the study's."""
    if published is None:
        published = load_published()
    lines = ["# Trace replay: unallocated GPU % by arrived GPU %", ""]
    lines += [
        "Ours: median and mean ± sd over the seeds of each run's value at that arrived % "
        "(as the FGD study reports its runs). Published: the FGD study's simulator, 10 seeds "
        f"{PUBLISHED_SEEDS} (`{PUBLISHED_FILE}`), for the 1213-node, 6212-GPU openb cluster. "
        "Our seeds draw other arrival orders than the study's (Python's `random`, not Go's "
        "`math/rand`), so only the statistics over seeds compare. Δ = our mean − published mean.",
        "",
    ]
    for workload, by_policy in _groups(curves).items():
        policies = _policy_order(by_policy)
        first = by_policy[policies[0]][0]
        gpus = first.capacity_milli // 1000
        seeds = sorted({c.seed for cs in by_policy.values() for c in cs})
        lines += [f"## Workload `{workload}`", ""]
        lines.append(
            f"Cluster: {gpus} GPUs. Pods: {first.original_pods} in the trace, inflated to "
            f"{TUNE_RATIO:g} × GPU capacity. Seeds: {_seed_text(seeds)}."
        )
        if gpus != 6212:
            lines.append("")
            lines.append(
                f"Note: this cluster has {gpus} GPUs, not the study's 6212; the published values "
                "are for the full cluster."
            )
        lines.append("")
        lines += [
            "### At 100 % arrived",
            "",
            "| policy | ours median | ours mean ± sd | published mean | published median | Δ mean |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in summary_rows([c for p in policies for c in by_policy[p]], published):
            delta = row["mean"] - row["published_mean"]
            lines.append(
                f"| {row['policy']} | {_num(row['median'])} | {_mean_sd(row['mean'], row['sd'])} | "
                f"{_num(row['published_mean'])} | {_num(row['published_median'])} | "
                f"{'–' if math.isnan(delta) else f'{delta:+.2f}'} |"
            )
        lines += [
            "",
            "### By arrived %",
            "",
            "| policy | arrived % | ours median | ours mean ± sd | published mean | published median |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for policy in policies:
            pub = published.get((workload, policy), {})
            for k in TABLE_ARRIVED:
                med, mean, sd, _ = _stats([c.at(k) for c in by_policy[policy]])
                pm, pmed, _ = pub.get(k, (math.nan, math.nan, math.nan))
                lines.append(
                    f"| {policy} | {k} | {_num(med)} | {_mean_sd(mean, sd)} | {_num(pm)} | {_num(pmed)} |"
                )
        missing = [p for p in STUDY_POLICIES if p not in by_policy]
        if missing:
            lines += ["", f"Not run (not available yet or not asked for): {', '.join(missing)}."]
        lines.append("")
    return "\n".join(lines)


def write_curves_csv(curves: Sequence[Curve], path: PathLike) -> None:
    """Write ``curves.csv`` atomically."""
    write_text_atomic(path, curves_csv(curves))


def write_table_md(
    curves: Sequence[Curve],
    path: PathLike,
    published: Published | None = None,
) -> None:
    """Write ``table.md`` atomically."""
    write_text_atomic(path, table_markdown(curves, published))


def _matrix(curves: Sequence[Curve]) -> np.ndarray:
    """Seeds × (0..130) unallocated %, NaN where a curve has no value."""
    m = np.full((len(curves), MAX_ARRIVED + 1), np.nan)
    for i, c in enumerate(curves):
        m[i, c.arrived_pct] = c.unallocated_pct
    return m


def write_plot(
    curves: Sequence[Curve],
    path: PathLike,
    published: Published | None = None,
) -> None:
    """Write ``curves.png``: per workload, unallocated % vs arrived % per policy (median over
    seeds with the 25–75 % band), full range and 80–130 % zoomed, published means as marks;
    one legend for the figure, below the plots."""
    import matplotlib.pyplot as plt

    fig = plot_figure(curves, published)
    try:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=110)
        write_bytes_atomic(path, png.getvalue())
    finally:
        plt.close(fig)


def plot_figure(curves: Sequence[Curve], published: Published | None = None) -> Any:
    """The matplotlib figure of :func:`write_plot` (matplotlib is imported here, on first use)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if published is None:
        published = load_published()
    groups = _groups(curves)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 4.2 * len(groups)), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x = np.arange(MAX_ARRIVED + 1)
    legend: dict[str, Any] = {}
    try:
        for row, (workload, by_policy) in enumerate(groups.items()):
            for i, policy in enumerate(_policy_order(by_policy)):
                color = colors[i % len(colors)]
                m = _matrix(by_policy[policy])
                has = ~np.all(np.isnan(m), axis=0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    med = np.nanmedian(m[:, has], axis=0)
                    lo, hi = np.nanpercentile(m[:, has], [25, 75], axis=0)
                pub = published.get((workload, policy), {})
                seeds = m.shape[0]
                for ax in axes[row]:
                    label = f"{policy} (median of {seeds} seed{'s' if seeds != 1 else ''})"
                    legend.setdefault(label, ax.plot(x[has], med, color=color, lw=1.4)[0])
                    ax.fill_between(x[has], lo, hi, color=color, alpha=0.25, lw=0)
                    if pub:
                        ks = sorted(pub)
                        marks = ax.plot(ks, [pub[k][0] for k in ks], ls="none", marker="x", ms=6, color=color)
                        legend.setdefault(f"{policy} published mean", marks[0])
            full, zoom = axes[row]
            full.set_title(f"{workload}: unallocated GPU % vs arrived")
            zoom.set_title(f"{workload}: arrived 80–130 %")
            for ax in (full, zoom):
                ax.set_xlabel("arrived GPU request, % of GPU capacity")
                ax.set_ylabel("unallocated GPU %")
                ax.grid(True, alpha=0.3)
            full.set_xlim(0, MAX_ARRIVED)
            full.set_ylim(0, 100)
            zoom.set_xlim(80, MAX_ARRIVED)
            vals = [
                v
                for p in by_policy
                for v in _matrix(by_policy[p])[:, 80:].ravel().tolist()
                if not math.isnan(v)
            ] + [pub_v[0] for p in by_policy for pub_v in published.get((workload, p), {}).values()]
            if vals:
                top = float(np.percentile(vals, 98)) if len(vals) > 10 else max(vals)
                zoom.set_ylim(0, min(100.0, max(top * 1.15, 1.0)))
        columns = 4
        rows = -(-len(legend) // columns)
        below = (0.3 + 0.22 * rows) / fig.get_figheight()  # the legend's share of the height
        fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=columns, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, below, 1, 1))
    except BaseException:
        plt.close(fig)
        raise
    return fig


def write_outputs(
    curves: Sequence[Curve],
    out_dir: PathLike,
    published: Published | None = None,
    plot: bool = True,
    on_removed: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Create ``out_dir`` if needed and write ``curves.csv``, ``table.md`` and (``plot``)
    ``curves.png``. Without ``plot``, a ``curves.png`` of an earlier run is removed (it
    would not show these curves), and handed to ``on_removed``; so is it when drawing the
    plot fails.

    Returns the paths written.
    """
    if published is None:
        published = load_published()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "curves.csv", out / "table.md"]
    write_curves_csv(curves, paths[0])
    write_table_md(curves, paths[1], published)
    if plot:
        paths.append(out / "curves.png")
        try:
            write_plot(curves, paths[2], published)
        except BaseException:
            remove_stale(paths[2])  # an old plot must not sit beside the new curves
            raise
    elif remove_stale(out / "curves.png") and on_removed is not None:
        on_removed(out / "curves.png")
    return paths


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
