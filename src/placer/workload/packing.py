"""What ``fgd-pack`` knows of a workload beyond FGD's target workload (docs/placement-rules.md).

Three figures, each read from a :class:`Demand` — sums over the pods of a workload:

* **CPU per GPU** — the CPU the GPU pods bring per GPU they request
  (Σ cpu_milli / Σ gpus·gpu_milli/1000 over pods with a GPU). Idle GPU milli of a node
  beyond what its free CPU can serve at this rate counts as stranded.
* **Packing regret** — how far putting a shared pod of size s into a GPU with f free
  departs from the best packing of the workload's shared pods into whole GPUs. The
  packing is a linear program (cover every shared size by GPU *patterns*, multisets of
  sizes summing to at most one GPU; minimise the GPUs), solved by column generation with
  OR-Tools' GLOP. Its dual price y(s) is what one pod of size s is worth in GPUs; K(f),
  the most a free space f can be worth (an unbounded knapsack over y), and the regret
  ``R(s, f) = K(f) - y(s) - K(f - s)`` is 0 when the pod starts or continues a best
  pattern, and grows with the value the move throws away. Sizes and free milli are in
  units of 10 milli, rounded down.
* **Model pressure** — per GPU model, the share of the GPU demand that may only use some
  models (``gpuModels``; a pod's demand is spread over its models present in the cluster
  in proportion to their GPUs) over the model's share of the cluster's GPUs. Placing any
  GPU pod on a pressed model costs that much more.

Where the demand comes from is part of each guide (:attr:`PackingGuide.source`):

* :meth:`PackingGuide.from_workload` — a target workload the caller gives (its task types
  weighted by popularity);
* :meth:`PackingGuide.from_pods` (:func:`packing_guide`) — a pod list the caller gives;
* :meth:`PackingGuide.neutral` — nothing known: no stranding (1 CPU per GPU), no regret,
  no pressure;
* :class:`PackingLearner` — online: the pods observed so far (the cluster's own and those
  it was asked to place, in order), blended with a told workload counted as
  :data:`PRIOR_PODS` pods, refreshed every :data:`REFRESH_PODS` observed pods.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Iterable, Mapping, Sequence

import numpy as np

from placer.workload.fragmentation import Workload
from placer.model import PodRequest, RunningPod

__all__ = [
    "UNITS",
    "REGRET_WEIGHT",
    "PRESSURE_WEIGHT",
    "PRIOR_PODS",
    "REFRESH_PODS",
    "DRIFT",
    "CHANGE",
    "Demand",
    "PackingGuide",
    "PackingLearner",
    "packing_guide",
    "pattern_duals",
    "column_generation",
    "regret_table",
]

UNITS = 100
"""Units of one GPU in the regret table (10 milli each)."""

REGRET_WEIGHT = 30.0
"""Milli-GPU of measure per 0.001 GPU of regret: large, so that regret mostly decides."""

PRESSURE_WEIGHT = 0.5
"""Share of a pressed model's pressure charged per milli placed on it."""

PRIOR_PODS = 1000.0
"""Weight of a told workload in a learned guide, in pods: after as many observed pods the
two count alike."""

REFRESH_PODS = 128
"""Observed pods between two refreshes of a learned guide."""

DRIFT = 0.03
"""Total variation between the shared-size mix of a refresh and the one the dual prices
were solved for beyond which the refresh solves the LP again."""

CHANGE = 0.01
"""Relative change of the CPU rate, or change of a model's pressure, below which a refresh
keeps the guide in force (and the kernel its score cache)."""

_EPS = 1e-9


def _units(milli: int) -> int:
    return milli // 10


def _best_pattern(sizes: Sequence[int], values: Sequence[float]) -> tuple[float, list[int]]:
    """Unbounded knapsack of one GPU: the most valuable multiset of sizes (value, counts)."""
    best = [0.0] * (UNITS + 1)
    take = [-1] * (UNITS + 1)
    for cap in range(1, UNITS + 1):
        best[cap], take[cap] = best[cap - 1], -1
        for i, s in enumerate(sizes):
            if s <= cap and best[cap - s] + values[i] > best[cap] + _EPS:
                best[cap], take[cap] = best[cap - s] + values[i], i
    counts = [0] * len(sizes)
    cap = UNITS
    while cap > 0:
        if take[cap] < 0:
            cap -= 1
        else:
            counts[take[cap]] += 1
            cap -= sizes[take[cap]]
    return best[UNITS], counts


def pattern_duals(counts: Mapping[int, float], max_rounds: int = 500) -> dict[int, float]:
    """Dual prices of covering ``counts`` (pods per size in units) by GPU patterns.

    Column generation: start from one-size patterns, price new patterns with
    :func:`_best_pattern`, stop when none is worth more than one GPU.
    """
    return column_generation(counts, (), max_rounds)[0]


def column_generation(
    counts: Mapping[int, float], start: Iterable[Mapping[int, int]] = (), max_rounds: int = 500
) -> tuple[dict[int, float], list[dict[int, int]]]:
    """:func:`pattern_duals`, starting also from the patterns ``start`` (size → count; those
    of sizes not in ``counts`` are dropped). Returns the duals and the patterns of the last
    LP, for the next start. The model is built once and grows by one column per round."""
    from ortools.linear_solver import pywraplp

    sizes = sorted(s for s, c in counts.items() if c > 0)
    if not sizes:
        return {}, []
    index = {s: i for i, s in enumerate(sizes)}
    solver = pywraplp.Solver.CreateSolver("GLOP")
    rows = [solver.Constraint(float(counts[s]), solver.infinity()) for s in sizes]
    objective = solver.Objective()
    objective.SetMinimization()
    patterns: list[list[int]] = []

    def add(pattern: list[int]) -> None:
        column = solver.NumVar(0.0, solver.infinity(), "")
        for row, c in zip(rows, pattern):
            if c:
                row.SetCoefficient(column, c)
        objective.SetCoefficient(column, 1.0)
        patterns.append(pattern)

    for i, s in enumerate(sizes):
        pattern = [0] * len(sizes)
        pattern[i] = UNITS // s
        add(pattern)
    for given in start:
        if all(s in index for s in given):
            pattern = [0] * len(sizes)
            for s, c in given.items():
                pattern[index[s]] = c
            if pattern not in patterns:
                add(pattern)
    duals = [0.0] * len(sizes)
    for _ in range(max_rounds):
        if solver.Solve() != pywraplp.Solver.OPTIMAL:
            break
        duals = [max(row.dual_value(), 0.0) for row in rows]
        value, pattern = _best_pattern(sizes, duals)
        if value <= 1.0 + 1e-7 or pattern in patterns:
            break
        add(pattern)
    used = [{sizes[i]: c for i, c in enumerate(p) if c} for p in patterns[len(sizes):]]
    return {s: duals[i] for i, s in enumerate(sizes)}, used


@dataclass
class Demand:
    """Sums over the pods of a workload, from which the guide's figures are read.

    Sums over observed pods are integers (held exactly in float64), so the order in which
    pods are added does not change them.

    Attributes
    ----------
    pods : float
        Pods counted (for a workload: the sum of its popularities).
    cpu_milli : float
        CPU milli of the pods with a GPU.
    gpu_milli : float
        GPU milli of the pods with a GPU (gpus × gpu_milli).
    shared : ndarray of float64, shape (UNITS + 1,)
        Shared pods per size in units of 10 milli.
    restricted : dict of tuple of str to float
        GPU milli of the pods restricted to some GPU models, per set of models (sorted).
    """

    pods: float = 0.0
    cpu_milli: float = 0.0
    gpu_milli: float = 0.0
    shared: np.ndarray = field(default_factory=lambda: np.zeros(UNITS + 1))
    restricted: dict[tuple[str, ...], float] = field(default_factory=dict)

    @classmethod
    def of_pods(cls, pods: Sequence[PodRequest]) -> Demand:
        """The sums of a pod list."""
        d = cls()
        d.add_pods(pods)
        return d

    @classmethod
    def of_workload(cls, workload: Workload) -> Demand:
        """The expected sums of one pod of ``workload`` (each type weighted by its popularity)."""
        d = cls(pods=float(sum(workload.popularity)))
        for t, p in workload.items():
            if not t.num_gpu:
                continue
            d.cpu_milli += p * t.cpu_milli
            d.gpu_milli += p * t.num_gpu * t.gpu_milli
            if t.num_gpu == 1 and t.gpu_milli < 1000 and _units(t.gpu_milli) > 0:
                d.shared[_units(t.gpu_milli)] += p
            if t.gpu_models:
                key = tuple(sorted(set(t.gpu_models)))
                d.restricted[key] = d.restricted.get(key, 0.0) + p * t.num_gpu * t.gpu_milli
        return d

    @classmethod
    def of_running(cls, records: Iterable[RunningPod]) -> Demand:
        """The sums of pods running in a snapshot: whole GPUs and shares; a record of one
        share only is a shared pod; a running pod names no GPU model."""
        d = cls()
        for r in records:
            gpus = len(r.gpus) + len(r.gpu_shares)
            d.pods += 1
            if not gpus:
                continue
            d.cpu_milli += r.cpu_milli
            d.gpu_milli += 1000 * len(r.gpus) + sum(r.gpu_shares.values())
            if not r.gpus and len(r.gpu_shares) == 1:
                size = _units(next(iter(r.gpu_shares.values())))
                if 0 < size < UNITS:
                    d.shared[size] += 1
        return d

    def add_pods(self, pods: Sequence[PodRequest]) -> None:
        """Add the pods of a list."""
        n = len(pods)
        if not n:
            return
        self.add_columns(
            np.fromiter(map(attrgetter("gpus"), pods), dtype=np.int64, count=n),
            np.fromiter(map(attrgetter("gpu_milli"), pods), dtype=np.int64, count=n),
            np.fromiter(map(attrgetter("cpu_milli"), pods), dtype=np.int64, count=n),
            list(filter(attrgetter("gpu_models"), pods)),
        )

    def add_columns(
        self, gpus: np.ndarray, milli: np.ndarray, cpu: np.ndarray, restricted: Iterable[PodRequest]
    ) -> None:
        """Add pods given as columns (GPUs, milli per GPU, CPU milli), and those of them
        that name GPU models."""
        has = gpus > 0
        self.pods += len(gpus)
        self.cpu_milli += float(cpu[has].sum())
        self.gpu_milli += float((gpus.astype(np.int64) * milli)[has].sum())
        size = milli // 10
        small = has & (gpus == 1) & (milli < 1000) & (size > 0)
        self.shared += np.bincount(size[small], minlength=UNITS + 1)[: UNITS + 1]
        for pod in restricted:
            if pod.gpus:
                key = tuple(sorted(set(pod.gpu_models)))
                self.restricted[key] = self.restricted.get(key, 0.0) + pod.gpus * pod.gpu_milli

    def add(self, other: Demand, scale: float = 1.0) -> None:
        """Add ``scale`` × ``other``."""
        self.pods += scale * other.pods
        self.cpu_milli += scale * other.cpu_milli
        self.gpu_milli += scale * other.gpu_milli
        self.shared = self.shared + scale * other.shared
        for key, milli in other.restricted.items():
            self.restricted[key] = self.restricted.get(key, 0.0) + scale * milli

    def copy(self) -> Demand:
        """An independent copy."""
        return Demand(self.pods, self.cpu_milli, self.gpu_milli, self.shared.copy(), dict(self.restricted))

    def cpu_per_gpu_milli(self) -> float:
        """CPU milli per GPU of the GPU pods; 1000 when there is none (or no CPU)."""
        if self.gpu_milli > 0 and self.cpu_milli > 0:
            return 1000.0 * self.cpu_milli / self.gpu_milli
        return 1000.0

    def shared_counts(self) -> dict[int, float]:
        """Shared pods per size in units (sizes with a count only)."""
        return {int(s): float(self.shared[s]) for s in np.flatnonzero(self.shared)}

    def pressure(self, gpus_per_model: Mapping[str, int]) -> dict[str, float]:
        """Model pressure on a cluster of ``gpus_per_model`` GPUs (models some pod needs)."""
        total = sum(g for g in gpus_per_model.values() if g > 0)
        if self.gpu_milli <= 0 or not total:
            return {}
        milli: dict[str, float] = {}
        for key in sorted(self.restricted):
            models = [m for m in key if gpus_per_model.get(m, 0) > 0]
            if not models:
                continue
            gpus = sum(gpus_per_model[m] for m in models)
            for m in models:
                milli[m] = milli.get(m, 0.0) + self.restricted[key] * gpus_per_model[m] / gpus
        return {m: v / self.gpu_milli * total / gpus_per_model[m] for m, v in milli.items()}


@dataclass(frozen=True, eq=False)
class PackingGuide:
    """The workload figures of ``fgd-pack``.

    Attributes
    ----------
    cpu_per_gpu_milli : float
        CPU milli the workload's GPU pods request per GPU.
    duals : dict of int to float
        Dual price (in GPUs) per shared size in units of 10 milli.
    regret : ndarray of float64, shape (UNITS + 1, UNITS + 1)
        ``regret[s, f]``; ``inf`` where ``s > f``.
    pressure : dict of str to float
        Model pressure per GPU model (only models some pod is restricted to).
    source : str
        Where the figures come from: ``"workload"``, ``"pods"``, ``"neutral"``,
        ``"learned: …"`` (:class:`PackingLearner`) or ``"given"`` (built by hand).
    """

    cpu_per_gpu_milli: float
    duals: Mapping[int, float]
    regret: np.ndarray
    pressure: Mapping[str, float]
    source: str = "given"

    def pressure_by_id(self, model_names: Sequence[str]) -> np.ndarray:
        """Pressure per model id (``model_names[i]`` is model id i), float64."""
        return np.array([self.pressure.get(name, 0.0) for name in model_names], dtype=np.float64)

    @classmethod
    def from_demand(
        cls, demand: Demand, gpus_per_model: Mapping[str, int], source: str,
        duals: Mapping[int, float] | None = None, regret: np.ndarray | None = None,
    ) -> PackingGuide:
        """The figures of ``demand`` on a cluster of ``gpus_per_model`` GPUs (the dual
        prices and regret table solved here unless given)."""
        if duals is None:
            duals = pattern_duals(demand.shared_counts())
        return cls(
            cpu_per_gpu_milli=demand.cpu_per_gpu_milli(),
            duals=duals,
            regret=regret_table(duals) if regret is None else regret,
            pressure=demand.pressure(gpus_per_model),
            source=source,
        )

    @classmethod
    def from_workload(cls, workload: Workload, gpus_per_model: Mapping[str, int]) -> PackingGuide:
        """The guide of a target workload: its task types weighted by popularity."""
        return cls.from_demand(Demand.of_workload(workload), gpus_per_model, "workload")

    @classmethod
    def from_pods(cls, pods: Sequence[PodRequest], gpus_per_model: Mapping[str, int]) -> PackingGuide:
        """The guide of a pod list (every pod counts once)."""
        return cls.from_demand(Demand.of_pods(pods), gpus_per_model, "pods")

    @classmethod
    def neutral(cls) -> PackingGuide:
        """Nothing known: 1 CPU per GPU (no stranding on usual nodes), no regret, no pressure."""
        return cls.from_demand(Demand(), {}, "neutral")


class PackingLearner:
    """A guide that follows the pods observed, blended with a told workload.

    The figures are those of ``prior`` scaled to ``prior_pods`` pods plus the pods observed
    (:meth:`observe`). :meth:`refresh` recomputes them — CPU rate and pressure each time,
    the dual prices only when the shared-size mix has moved by more than ``drift`` (total
    variation) since they were solved — and puts them in force when the regret table
    changed or the rate or a pressure moved by more than :data:`CHANGE`. Whoever places pods
    calls :meth:`refresh` before a pod once :attr:`due` (``every`` pods observed since the
    last refresh).

    Parameters
    ----------
    gpus_per_model : mapping of str to int
        The cluster's GPUs per model.
    prior : Demand, optional
        The told workload (:meth:`Demand.of_workload`); none: the pods observed alone.
    prior_pods, every, drift : float, int, float
        Defaults :data:`PRIOR_PODS`, :data:`REFRESH_PODS`, :data:`DRIFT`.
    """

    def __init__(
        self,
        gpus_per_model: Mapping[str, int],
        prior: Demand | None = None,
        prior_pods: float = PRIOR_PODS,
        every: int = REFRESH_PODS,
        drift: float = DRIFT,
    ) -> None:
        self.gpus_per_model = dict(gpus_per_model)
        self.prior = prior if prior is not None and prior.pods > 0 else None
        self.prior_pods = float(prior_pods)
        self.every = int(every)
        self.drift = float(drift)
        self.observed = Demand()
        self.pending = 0
        self._mix: np.ndarray | None = None
        self._duals: dict[int, float] = {}
        self._patterns: list[dict[int, int]] = []
        self._regret = regret_table({})
        self.guide = self._figures(None)

    @property
    def due(self) -> bool:
        """Whether ``every`` pods were observed since the last refresh."""
        return self.pending >= self.every

    def observe(self, pods: Sequence[PodRequest] | Demand) -> None:
        """Count pods (or their sums) as observed."""
        demand = pods if isinstance(pods, Demand) else Demand.of_pods(pods)
        self.observed.add(demand)
        self.pending += round(demand.pods)

    def blend(self) -> Demand:
        """The prior scaled to ``prior_pods`` pods plus the pods observed."""
        if self.prior is None:
            return self.observed.copy()
        out = Demand()
        out.add(self.prior, self.prior_pods / self.prior.pods)
        out.add(self.observed)
        return out

    def refresh(self) -> PackingGuide:
        """The guide in force after looking at the blend now (:attr:`guide`: the same object
        when nothing moved enough); resets :attr:`due`."""
        self.pending = 0
        self.guide = self._figures(self.guide)
        return self.guide

    def _figures(self, old: PackingGuide | None) -> PackingGuide:
        """The figures of the blend now, or ``old`` when they moved too little."""
        demand = self.blend()
        total = float(demand.shared.sum())
        if total > 0:
            mix = demand.shared / total
            if self._mix is None or 0.5 * float(np.abs(mix - self._mix).sum()) > self.drift:
                self._duals, self._patterns = column_generation(demand.shared_counts(), self._patterns)
                self._regret = regret_table(self._duals)
                self._mix = mix
        rate = demand.cpu_per_gpu_milli()
        pressure = demand.pressure(self.gpus_per_model)
        if old is not None and np.array_equal(self._regret, old.regret):
            moved = abs(rate - old.cpu_per_gpu_milli) > CHANGE * old.cpu_per_gpu_milli or any(
                abs(pressure.get(m, 0.0) - old.pressure.get(m, 0.0)) > CHANGE for m in {*pressure, *old.pressure}
            )
            if not moved:
                return old
        source = f"learned: {self.observed.pods:.0f} pods observed"
        if self.prior is not None:
            source += f" + told workload as {self.prior_pods:g} pods"
        return PackingGuide(rate, self._duals, self._regret, pressure, source)


def regret_table(duals: Mapping[int, float]) -> np.ndarray:
    """``R[s, f] = max(K(f) - y(s) - K(f - s), 0)`` for s ≤ f in units (``inf`` above; row 0
    is 0), K the unbounded knapsack of one free space over the dual prices ``duals``."""
    worth = [0.0] * (UNITS + 1)
    for free in range(1, UNITS + 1):
        worth[free] = max([worth[free - 1]] + [v + worth[free - s] for s, v in duals.items() if s <= free])
    w = np.array(worth)
    table = np.full((UNITS + 1, UNITS + 1), np.inf)
    table[0, :] = 0.0
    for s in range(1, UNITS + 1):
        table[s, s:] = np.maximum(w[s:] - duals.get(s, 0.0) - w[: UNITS + 1 - s], 0.0)
    return table


def packing_guide(pods: Sequence[PodRequest], gpus_per_model: Mapping[str, int]) -> PackingGuide:
    """The :class:`PackingGuide` of a pod list on a cluster with ``gpus_per_model`` GPUs
    (:meth:`PackingGuide.from_pods`).

    A list without GPU pods (or whose GPU pods request no CPU) gets a rate of 1 CPU per GPU.
    """
    return PackingGuide.from_pods(pods, gpus_per_model)
