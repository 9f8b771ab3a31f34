"""The FGD study (Weng et al., USENIX ATC '23) as placer replays it: its policies and
parameters, the metrics of one replay (:class:`Curve`) and the study's published figures
(:func:`load_published`).

:mod:`placer.replay.simulate` runs the replays; :mod:`placer.replay.study_report` writes
their curves, table and figure.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from placer import policies as _registry
from placer.text.files import PathLike
from placer.exceptions import InvalidInputError

__all__ = [
    "Published", "ALL_POLICIES", "STUDY_POLICIES", "PUBLISHED_NAMES", "TABLE_ARRIVED", "TUNE_RATIO", "MAX_ARRIVED",
    "PUBLISHED_FILE", "PUBLISHED_SEEDS", "Curve", "load_published",
]

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
"""Pods arrive until their GPU request would pass this many times the cluster's GPUs."""
MAX_ARRIVED = 130
"""The last arrived % a curve has (``TUNE_RATIO`` as a percentage)."""
PUBLISHED_FILE = "fgd_expected_unalloc_summary.csv"
"""The study's published summary, as :func:`load_published` reads it."""
PUBLISHED_SEEDS = "42–51"
"""The seeds behind the published figures, as the table names them."""


@dataclass(frozen=True, eq=False)
class Curve:
    """The metrics of one replay (one workload, policy and seed), per integer arrived %.

    ``arrived_pct[j]`` is an integer k in 0..130; ``unallocated_pct[j]`` and ``frag_pct[j]``
    are the means of the per-pod samples at k (see :func:`placer.replay.simulate.curve_metrics`). Values of k with
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
