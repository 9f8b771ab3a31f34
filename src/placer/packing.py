"""What ``fgd-pack`` knows of a workload beyond FGD's target workload (docs/placement-rules.md).

Three figures, each computed once from the pod list (as the target workload is):

* **CPU per GPU** — the CPU the workload's GPU pods bring per GPU they request
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
* **Model pressure** — per GPU model, the GPU milli of pods that may only use some models
  (``gpuModels``), shared over their models in proportion to capacity, divided by the
  model's capacity. Placing any GPU pod on a pressed model costs that much more.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from placer.model import PodRequest

__all__ = ["UNITS", "REGRET_WEIGHT", "PRESSURE_WEIGHT", "PackingGuide", "packing_guide", "pattern_duals", "regret_table"]

UNITS = 100
"""Units of one GPU in the regret table (10 milli each)."""

REGRET_WEIGHT = 30.0
"""Milli-GPU of measure per 0.001 GPU of regret: large, so that regret mostly decides."""

PRESSURE_WEIGHT = 0.5
"""Share of a pressed model's pressure charged per milli placed on it."""

_EPS = 1e-9


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
    """

    cpu_per_gpu_milli: float
    duals: Mapping[int, float]
    regret: np.ndarray
    pressure: Mapping[str, float]

    def pressure_by_id(self, model_names: Sequence[str]) -> np.ndarray:
        """Pressure per model id (``model_names[i]`` is model id i), float64."""
        return np.array([self.pressure.get(name, 0.0) for name in model_names], dtype=np.float64)


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


def pattern_duals(counts: Mapping[int, int], max_rounds: int = 500) -> dict[int, float]:
    """Dual prices of covering ``counts`` (pods per size in units) by GPU patterns.

    Column generation: start from one-size patterns, price new patterns with
    :func:`_best_pattern`, stop when none is worth more than one GPU.
    """
    from ortools.linear_solver import pywraplp

    sizes = sorted(s for s, c in counts.items() if c > 0)
    if not sizes:
        return {}
    patterns: list[list[int]] = []
    for i, s in enumerate(sizes):
        pattern = [0] * len(sizes)
        pattern[i] = UNITS // s
        patterns.append(pattern)
    duals = [0.0] * len(sizes)
    for _ in range(max_rounds):
        solver = pywraplp.Solver.CreateSolver("GLOP")
        use = [solver.NumVar(0.0, solver.infinity(), f"x{j}") for j in range(len(patterns))]
        rows = []
        for i, s in enumerate(sizes):
            rows.append(solver.Add(sum(use[j] * p[i] for j, p in enumerate(patterns) if p[i]) >= counts[s]))
        solver.Minimize(sum(use))
        if solver.Solve() != pywraplp.Solver.OPTIMAL:
            break
        duals = [max(row.dual_value(), 0.0) for row in rows]
        value, pattern = _best_pattern(sizes, duals)
        if value <= 1.0 + 1e-7 or pattern in patterns:
            break
        patterns.append(pattern)
    return {s: duals[i] for i, s in enumerate(sizes)}


def regret_table(duals: Mapping[int, float]) -> np.ndarray:
    """``R[s, f] = max(K(f) - y(s) - K(f - s), 0)`` for s ≤ f in units (``inf`` above; row 0
    is 0), K the unbounded knapsack of one free space over the dual prices ``duals``."""
    worth = [0.0] * (UNITS + 1)
    for free in range(1, UNITS + 1):
        worth[free] = max([worth[free - 1]] + [v + worth[free - s] for s, v in duals.items() if s <= free])
    table = np.full((UNITS + 1, UNITS + 1), np.inf)
    table[0, :] = 0.0
    for s in range(1, UNITS + 1):
        for free in range(s, UNITS + 1):
            table[s, free] = max(worth[free] - duals.get(s, 0.0) - worth[free - s], 0.0)
    return table


def packing_guide(pods: Sequence[PodRequest], gpus_per_model: Mapping[str, int]) -> PackingGuide:
    """The :class:`PackingGuide` of a pod list on a cluster with ``gpus_per_model`` GPUs.

    A list without GPU pods (or whose GPU pods request no CPU) gets a rate of 1 CPU per GPU.
    """
    cpu = 0
    gpu_milli = 0
    shared: Counter[int] = Counter()
    restricted: Counter[str] = Counter()
    for pod in pods:
        if not pod.gpus:
            continue
        cpu += pod.cpu_milli
        gpu_milli += pod.gpus * pod.gpu_milli
        if pod.shared and _units(pod.gpu_milli) > 0:
            shared[_units(pod.gpu_milli)] += 1
        models = [m for m in dict.fromkeys(pod.gpu_models) if gpus_per_model.get(m, 0) > 0]
        if models:
            total = sum(gpus_per_model[m] for m in models)
            for m in models:
                restricted[m] += pod.gpus * pod.gpu_milli * gpus_per_model[m] / total
    rate = 1000.0 * cpu / gpu_milli if gpu_milli and cpu else 1000.0
    duals = pattern_duals(shared)
    pressure = {m: restricted[m] / (1000.0 * gpus_per_model[m]) for m in restricted}
    return PackingGuide(cpu_per_gpu_milli=rate, duals=duals, regret=regret_table(duals), pressure=pressure)
