"""GPU fragmentation with respect to a target workload, as the FGD study defines it.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent" (USENIX ATC '23); the definitions follow the study's simulator
(``hkust-adsl/kubernetes-scheduler-simulator``, ``pkg/utils/frag.go``: ``GetTypicalPods``,
``GetNodePodFrag``, ``NodeGpuShareFragAmount``).

* A **task type** is (CPU milli, per-GPU milli, number of GPUs, allowed GPU models); memory
  is not part of it. The **target workload** M is a distribution over task types with
  popularities p_m (:func:`target_workload`).
* The **fragment of a node** n w.r.t. one type m is the idle GPU milli of n that m cannot
  use; the node's fragment w.r.t. the workload is F_n(M) = sum_m p_m * frag_n(m)
  (:func:`node_fragment`). Each (n, m) falls into one of seven classes (:data:`CLASSES`):

  ============== ===================================================== ==================
  class          when                                                  fragment
  ============== ===================================================== ==================
  xl_satisfied   m needs no GPU, the node has m's CPU                  all idle GPU milli
  xr_lack_cpu    m needs no GPU, the node lacks m's CPU                all idle GPU milli
  no_access      m names GPU models and the node's is not among them   all idle GPU milli
  q3_satisfied   num_gpu GPUs each have >= gpu_milli free, CPU fits    GPUs with free < gpu_milli
  q4_lack_cpu    the GPUs fit, the CPU does not                        all idle GPU milli
  q2_lack_gpu    the GPUs do not fit, the CPU does                     all idle GPU milli
  q1_lack_both   neither fits                                          all idle GPU milli
  ============== ===================================================== ==================

  As in the simulator, the fragment found in a q3 case (GPUs too small for m) is booked
  under ``q2_lack_gpu`` and the rest of that node's idle milli under ``q3_satisfied``;
  F_n(M) is the sum of every class but ``q3_satisfied``. When the popularities sum to 1
  the seven classes add up to the node's idle GPU milli.
* The **cluster fragment** F(M) = sum_n F_n(M); the **fragmentation rate** is F divided by
  the cluster's idle GPU milli, the **fragment amount** F as a percentage of the cluster's
  GPU capacity (:func:`cluster_fragment`).

Free CPU ``None`` means CPU is not tracked: every CPU requirement fits. This module is pure
Python and numpy; it does not use the placement kernel.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np

from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PodRequest

__all__ = [
    "CLASSES",
    "FRAGMENT_CLASSES",
    "TaskType",
    "Workload",
    "NodeState",
    "ClusterFragment",
    "Fragmentation",
    "target_workload",
    "node_fragment",
    "node_states",
    "cluster_fragment",
]

Q1_LACK_BOTH = "q1_lack_both"
Q2_LACK_GPU = "q2_lack_gpu"
Q3_SATISFIED = "q3_satisfied"
Q4_LACK_CPU = "q4_lack_cpu"
XL_SATISFIED = "xl_satisfied"
XR_LACK_CPU = "xr_lack_cpu"
NO_ACCESS = "no_access"

CLASSES = (Q1_LACK_BOTH, Q2_LACK_GPU, Q3_SATISFIED, Q4_LACK_CPU, XL_SATISFIED, XR_LACK_CPU, NO_ACCESS)
"""The seven classes of a (node, task type) pair, in the simulator's order."""

FRAGMENT_CLASSES = tuple(c for c in CLASSES if c != Q3_SATISFIED)
"""The classes whose amounts make up the fragment (all but ``q3_satisfied``)."""

_Q1, _Q2, _Q3, _Q4, _XL, _XR, _NA = range(7)
_F_INDICES = (_Q1, _Q2, _Q4, _XL, _XR, _NA)


@dataclass(frozen=True, slots=True)
class TaskType:
    """A pod shape of the target workload.

    Attributes
    ----------
    cpu_milli : int
        CPU request.
    gpu_milli : int
        GPU milli per GPU, 1..1000; 0 for a CPU-only type.
    num_gpu : int
        Number of GPUs; 0 for a CPU-only type (then ``gpu_milli`` is 0 too).
    gpu_models : tuple of str
        Allowed GPU models, as the pod lists them (``()``: any model).
    """

    cpu_milli: int
    gpu_milli: int = 0
    num_gpu: int = 0
    gpu_models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("cpu_milli", "gpu_milli", "num_gpu"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise InvalidInputError(name, f"expected a non-negative integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        if (self.num_gpu == 0) != (self.gpu_milli == 0):
            raise InvalidInputError(
                "gpu_milli",
                f"num_gpu {self.num_gpu} with gpu_milli {self.gpu_milli}: both must be 0 "
                "(CPU-only) or both positive",
            )
        if self.gpu_milli > 1000:
            raise InvalidInputError("gpu_milli", f"expected 0..1000, got {self.gpu_milli}")
        models = tuple(self.gpu_models)
        if not all(isinstance(m, str) and m for m in models):
            raise InvalidInputError("gpu_models", f"expected non-empty strings, got {models!r}")
        object.__setattr__(self, "gpu_models", models)

    @property
    def cpu_only(self) -> bool:
        """Whether this type needs no GPU."""
        return self.num_gpu == 0

    @classmethod
    def of(cls, pod: PodRequest | "TaskType") -> "TaskType":
        """The type of a pod: CPU, per-GPU milli, GPU count and models (memory dropped).

        A pod without GPUs has type ``(cpu_milli, 0, 0, ())``.
        """
        if isinstance(pod, TaskType):
            return pod
        if pod.gpus == 0:
            return cls(pod.cpu_milli)
        return cls(pod.cpu_milli, pod.gpu_milli, pod.gpus, tuple(pod.gpu_models))


@dataclass(frozen=True)
class Workload:
    """A target workload: task types and their popularities.

    Attributes
    ----------
    types : tuple of TaskType
    popularity : tuple of float
        One per type, each in [0, 1]. :func:`target_workload` makes them sum to 1; a
        hand-made workload may sum to less (the fragment then scales down with it).
    counts : tuple of int
        Pods per kept type when built from a pod list (else empty).
    total_pods : int
        Pods in the list it was built from (0 when hand-made).
    distinct_types : int
        Distinct types in that list, kept or not (``len(types)`` when hand-made).
    """

    types: tuple[TaskType, ...]
    popularity: tuple[float, ...]
    counts: tuple[int, ...] = ()
    total_pods: int = 0
    distinct_types: int = 0

    def __post_init__(self) -> None:
        types = tuple(self.types)
        pops = tuple(float(p) for p in self.popularity)
        if len(types) != len(pops):
            raise InvalidInputError(
                "popularity", f"expected one popularity per type ({len(types)}), got {len(pops)}"
            )
        for i, t in enumerate(types):
            if not isinstance(t, TaskType):
                raise InvalidInputError(f"types[{i}]", f"expected a TaskType, got {type(t).__name__}")
        for i, p in enumerate(pops):
            if not (math.isfinite(p) and 0.0 <= p <= 1.0):
                raise InvalidInputError(f"popularity[{i}]", f"expected a number in [0, 1], got {p!r}")
        if sum(pops) > 1.0 + 1e-9:
            raise InvalidInputError("popularity", f"sums to {sum(pops)!r}, more than 1")
        counts = tuple(int(c) for c in self.counts)
        if counts and len(counts) != len(types):
            raise InvalidInputError("counts", f"expected one count per type ({len(types)}), got {len(counts)}")
        object.__setattr__(self, "types", types)
        object.__setattr__(self, "popularity", pops)
        object.__setattr__(self, "counts", counts)
        if not self.distinct_types:
            object.__setattr__(self, "distinct_types", len(types))

    def __len__(self) -> int:
        return len(self.types)

    @property
    def coverage(self) -> float:
        """Share of the source pod list that the kept types cover (before renormalising);
        for a hand-made workload, the sum of its popularities."""
        if self.total_pods and self.counts:
            return sum(self.counts) / self.total_pods
        return math.fsum(self.popularity)

    def items(self) -> list[tuple[TaskType, float]]:
        """``(type, popularity)`` pairs, most popular first (the workload's order)."""
        return list(zip(self.types, self.popularity))


@dataclass(frozen=True, slots=True)
class NodeState:
    """What a node has free, as the fragment measure sees it."""

    name: str
    cpu_milli: int | None
    gpu_milli: tuple[int, ...]
    gpu_model: str | None


@dataclass(frozen=True)
class Fragmentation:
    """The cluster's fragment F(M) and the idle GPU milli it is part of."""

    total: float
    idle_gpu_milli: int
    gpu_capacity_milli: int

    @property
    def rate(self) -> float:
        """F / idle GPU milli (0 when nothing is idle)."""
        return self.total / self.idle_gpu_milli if self.idle_gpu_milli else 0.0

    @property
    def amount_pct(self) -> float:
        """F as a percentage of the cluster's GPU capacity (the study's fragment amount)."""
        return 100.0 * self.total / self.gpu_capacity_milli if self.gpu_capacity_milli else 0.0


@dataclass(frozen=True)
class ClusterFragment(Fragmentation):
    """The fragment of a cluster w.r.t. a workload.

    Attributes
    ----------
    total : float
        F(M), milli-GPU: the sum of every node's fragment.
    idle_gpu_milli : int
        Free GPU milli over all nodes (unhealthy GPUs count as not free).
    gpu_capacity_milli : int
        1000 x the number of GPUs in the cluster.
    classes : mapping of str to float
        Per class of :data:`CLASSES`, the amount over all nodes.
    nodes : mapping of str to float
        Per node name, its fragment F_n(M).
    """

    classes: Mapping[str, float]
    nodes: Mapping[str, float]

    @property
    def rate_pct(self) -> float:
        """The fragmentation rate in percent."""
        return 100.0 * self.rate


# ------------------------------------------------------------------------- the workload


def target_workload(
    pods: Iterable[PodRequest | TaskType], threshold: float = 0.95
) -> Workload:
    """The target workload of a pod list, as the simulator's ``GetTypicalPods`` builds it.

    1. Count every pod by :meth:`TaskType.of` (CPU-only pods included, weight 1 each).
    2. Sort the types by count, highest first. Among equal counts the order is
       ``(cpu_milli, gpu_milli, num_gpu, gpu_models)`` ascending. (The simulator's order
       among equal counts is unspecified: it iterates a Go map and sorts unstably. It
       matters only when the cut below falls inside a run of equal counts, e.g. for the
       ``gpuspec33`` list, whose 127th and 128th types both have 6 pods.)
    3. Keep types, one at a time, until the kept pods are at least ``threshold`` of all
       pods.
    4. Popularity of a kept type = its count / the kept pods (so they sum to 1).

    Parameters
    ----------
    pods : iterable of PodRequest or TaskType
        The original (not inflated) pod list.
    threshold : float
        The popularity cut, in (0, 1]; the study uses 0.95.

    Raises
    ------
    InvalidInputError
        For an empty pod list or a threshold outside (0, 1].
    """
    if isinstance(threshold, bool) or not (isinstance(threshold, (int, float)) and 0 < threshold <= 1):
        raise InvalidInputError("threshold", f"expected a number in (0, 1], got {threshold!r}")
    counter: Counter[TaskType] = Counter(TaskType.of(p) for p in pods)
    total = sum(counter.values())
    if not total:
        raise InvalidInputError("pods", "the pod list is empty")
    ranked = sorted(
        counter.items(),
        key=lambda tc: (-tc[1], tc[0].cpu_milli, tc[0].gpu_milli, tc[0].num_gpu, tc[0].gpu_models),
    )
    need = Fraction(threshold).limit_denominator(10**9) * total
    kept: list[tuple[TaskType, int]] = []
    cum = 0
    for t, c in ranked:
        if cum >= need:
            break
        kept.append((t, c))
        cum += c
    return Workload(
        types=tuple(t for t, _ in kept),
        popularity=tuple(c / cum for _, c in kept),
        counts=tuple(c for _, c in kept),
        total_pods=total,
        distinct_types=len(ranked),
    )


# ------------------------------------------------------------------------ one node


def node_fragment(
    cpu_free: int | None,
    gpu_free_milli: Sequence[int],
    gpu_model: str | None,
    workload: Workload,
    classes: bool = False,
) -> float | tuple[float, dict[str, float]]:
    """F_n(M): the fragment of one node w.r.t. a workload, in milli-GPU.

    Parameters
    ----------
    cpu_free : int or None
        Free CPU milli (``None``: not tracked, every CPU requirement fits).
    gpu_free_milli : sequence of int
        Free milli of each GPU of the node (0 for a GPU fully taken or unhealthy).
    gpu_model : str or None
        The node's GPU model.
    workload : Workload
    classes : bool
        Also return the amount of each class of :data:`CLASSES`.

    Returns
    -------
    float, or (float, dict of str to float) when ``classes``
        The fragment; 0 for a node without GPUs or without idle GPU milli.
    """
    amounts = [0.0] * 7
    idle = 0
    for f in gpu_free_milli:
        idle += f
    if idle:
        for t, p in zip(workload.types, workload.popularity):
            cpu_ok = cpu_free is None or cpu_free >= t.cpu_milli
            p_idle = p * idle
            if t.gpu_milli == 0:
                amounts[_XL if cpu_ok else _XR] += p_idle
                continue
            if t.gpu_models and gpu_model not in t.gpu_models:
                amounts[_NA] += p_idle
                continue
            fitting = 0
            too_small = 0
            for f in gpu_free_milli:
                if f >= t.gpu_milli:
                    fitting += 1
                else:
                    too_small += f
            if fitting >= t.num_gpu:
                if cpu_ok:
                    amounts[_Q2] += p * too_small
                    amounts[_Q3] += p * (idle - too_small)
                else:
                    amounts[_Q4] += p_idle
            else:
                amounts[_Q2 if cpu_ok else _Q1] += p_idle
    total = _fragment_sum(amounts)
    if classes:
        return total, dict(zip(CLASSES, amounts))
    return total


def _fragment_sum(amounts: Sequence[float]) -> float:
    return amounts[_Q1] + amounts[_Q2] + amounts[_Q4] + amounts[_XL] + amounts[_XR] + amounts[_NA]


# ------------------------------------------------------------------------- a cluster

ClusterLike = Union[ClusterSnapshot, Mapping[str, Any], str, Any]


def node_states(source: ClusterLike) -> list[NodeState]:
    """What each node has free, in node order.

    ``source`` is a :class:`placer.Cluster` (its current state, through ``node_free``) or
    a ClusterSnapshot (a model object, a mapping or a JSON/YAML path). For a snapshot the
    free state is derived as capacity minus what its running pods hold: a whole GPU held
    has 0 free, a share subtracts its milli from its GPU, an unhealthy GPU has 0 free, and
    free CPU is the node's CPU less its pods' CPU (``None`` when CPU is not tracked).
    """
    if hasattr(source, "node_free") and hasattr(source, "snapshot"):
        snap_nodes = source.snapshot.nodes
        out = []
        for name, node in zip(source.node_names, snap_nodes):
            free = source.node_free(name)
            out.append(NodeState(name, free.cpu_milli, tuple(free.gpu_milli), node.hardware.gpu_model))
        return out
    from placer.schema import coerce_snapshot

    snap = coerce_snapshot(source)
    out = []
    for node in snap.nodes:
        hw = node.hardware
        gfree = [1000] * hw.gpus
        cpu = hw.cpu_milli
        for pod in node.pods:
            for g in pod.gpus:
                gfree[g] = 0
            for g, m in pod.gpu_shares.items():
                gfree[g] -= m
            if cpu is not None:
                cpu -= pod.cpu_milli
        for g in node.unhealthy_gpus:
            gfree[g] = 0
        out.append(NodeState(node.name, cpu, tuple(gfree), hw.gpu_model))
    return out


def cluster_fragment(
    source: ClusterLike, workload: Workload, only: Sequence[bool] | np.ndarray | None = None
) -> ClusterFragment:
    """F(M) of a cluster, its idle GPU milli, rate and per-class breakdown.

    Parameters
    ----------
    source : Cluster, ClusterSnapshot, mapping or path
        As :func:`node_states` takes it.
    workload : Workload
    only : sequence of bool, optional
        Per node in node order, whether to measure it (default: every node); idle GPU
        milli and capacity are then those of the measured nodes.

    Returns
    -------
    ClusterFragment
        Per node, the same value :func:`node_fragment` gives (the same arithmetic,
        vectorised over the nodes with numpy).
    """
    states = node_states(source)
    if only is not None:
        states = [s for s, keep in zip(states, only) if keep]
    n = len(states)
    width = max((len(s.gpu_milli) for s in states), default=0)
    free = np.zeros((n, max(width, 1)), dtype=np.int64)
    cpu = np.empty(n, dtype=np.float64)
    capacity = 0
    for i, s in enumerate(states):
        free[i, : len(s.gpu_milli)] = s.gpu_milli
        cpu[i] = math.inf if s.cpu_milli is None else s.cpu_milli
        capacity += 1000 * len(s.gpu_milli)
    idle = free.sum(axis=1)
    amounts = np.zeros((7, n), dtype=np.float64)
    models = [s.gpu_model for s in states]
    for t, p in zip(workload.types, workload.popularity):
        cpu_ok = cpu >= t.cpu_milli
        p_idle = p * idle
        if t.gpu_milli == 0:
            amounts[_XL] += np.where(cpu_ok, p_idle, 0.0)
            amounts[_XR] += np.where(cpu_ok, 0.0, p_idle)
            continue
        if t.gpu_models:
            allowed = set(t.gpu_models)
            access = np.fromiter((m in allowed for m in models), dtype=bool, count=n)
        else:
            access = np.ones(n, dtype=bool)
        big = free >= t.gpu_milli
        fits = big.sum(axis=1) >= t.num_gpu
        too_small = np.where(big, 0, free).sum(axis=1)
        q3 = access & fits & cpu_ok
        amounts[_NA] += np.where(access, 0.0, p_idle)
        amounts[_Q2] += np.where(q3, p * too_small, np.where(access & ~fits & cpu_ok, p_idle, 0.0))
        amounts[_Q3] += np.where(q3, p * (idle - too_small), 0.0)
        amounts[_Q4] += np.where(access & fits & ~cpu_ok, p_idle, 0.0)
        amounts[_Q1] += np.where(access & ~fits & ~cpu_ok, p_idle, 0.0)
    per_node = (
        amounts[_Q1] + amounts[_Q2] + amounts[_Q4] + amounts[_XL] + amounts[_XR] + amounts[_NA]
    )
    return ClusterFragment(
        total=math.fsum(per_node.tolist()),
        idle_gpu_milli=int(idle.sum()),
        gpu_capacity_milli=capacity,
        classes={c: math.fsum(amounts[k].tolist()) for k, c in enumerate(CLASSES)},
        nodes={s.name: float(v) for s, v in zip(states, per_node.tolist())},
    )
