"""kube-scheduler's scoring plugins over the nodes a pod may use, and the node they choose.

The policies whose record has a ``kube_scoring`` strategy (``kube``, ``kube-most-allocated``,
``kube-requested-to-capacity-ratio``) place a pod where kube-scheduler's default score
plugins put it: each plugin scores every node that passes the filters (the kernel session's
feasibility, :meth:`placer.kernel.KernelSession.node_scores`), the plugin's NormalizeScore
maps its scores onto 0..100, and the node of the highest weighted sum wins. Each plugin is
numpy over node columns, in kube's integer (or float) arithmetic, truncating where kube
truncates:

========================================  ======  =======================================
plugin                                    weight  score
========================================  ======  =======================================
``TaintToleration``                       3       intolerable ``PreferNoSchedule`` taints, reversed
``NodeAffinity``                          2       weights of the preferred terms matched
``NodeResourcesFit``                      1       the strategy over cpu and memory (and GPUs)
``PodTopologySpread``                     2       ``ScheduleAnyway`` constraints, reversed
``InterPodAffinity``                      2       preferred (anti-)affinity, both ways
``NodeResourcesBalancedAllocation``       1       evenness of cpu and memory use
========================================  ======  =======================================

The rules, and where placer differs on purpose, are in ``docs/placement-rules.md``, "kube
scores". :func:`plugin_scores` and :func:`node_scores` give the numbers; :func:`choose_node`
the node.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.model import NodeType, PodRequest, Taint, Toleration
from placer.model.affinity import Affinity, LabelSelector, LabelSelectorRequirement, NodeSelectorTerm, PodAffinityTerm
from placer.placement.sharing import splitmix_pick
from placer.placement.tally import Placed
from placer.policies import REGISTRY, Policy

if TYPE_CHECKING:
    from placer.placement.cluster import Cluster

__all__ = [
    "MAX_NODE_SCORE",
    "PLUGIN_WEIGHTS",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_MEMORY_REQUEST_MIB",
    "HARD_POD_AFFINITY_WEIGHT",
    "GPU_RESOURCE",
    "FitStrategy",
    "STRATEGIES",
    "namespace_of",
    "feasible_nodes",
    "plugin_scores",
    "node_scores",
    "choose_node",
]

MAX_NODE_SCORE = 100
"""kube's ``framework.MaxNodeScore``: every plugin's normalised score lies in 0..100."""
PLUGIN_WEIGHTS: Mapping[str, int] = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
}
"""The score plugins of kube-scheduler's default profile (v1.36 ``getDefaultPlugins``) and
their weights; ``ImageLocality`` (weight 1) is left out: placer knows no images."""
DEFAULT_MILLI_CPU_REQUEST = 100
"""CPU a pod that requests none counts as, for scoring (``schedutil.DefaultMilliCPURequest``)."""
DEFAULT_MEMORY_REQUEST_MIB = 200
"""Memory a pod that requests none counts as, for scoring (``schedutil.DefaultMemoryRequest``)."""
HARD_POD_AFFINITY_WEIGHT = 1
"""``InterPodAffinityArgs.hardPodAffinityWeight``'s default: what a running pod's required
affinity term that the pod matches adds to its domain."""
GPU_RESOURCE = "nvidia.com/gpu"
"""The name a strategy's resource list gives whole GPUs."""
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The one label placer knows of a namespace (the API server sets it on every namespace)."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
_NO_NODE = np.iinfo(np.int64).min
_CORE = ("cpu", "memory", "ephemeral-storage")  # kube's non-scalar resources: scored even when not requested


@dataclass(frozen=True)
class FitStrategy:
    """A NodeResourcesFit scoring strategy (``config.ScoringStrategy``).

    Parameters
    ----------
    kind : str
        ``LeastAllocated``, ``MostAllocated`` or ``RequestedToCapacityRatio``.
    resources : tuple of (str, int)
        The resources scored and their weights (``cpu``, ``memory``, :data:`GPU_RESOURCE`,
        an extended resource).
    shape : tuple of (int, int)
        ``RequestedToCapacityRatio``'s points (utilization 0..100, score 0..10), utilization
        ascending.
    balanced_resources : tuple of (str, int)
        The resources NodeResourcesBalancedAllocation weighs
        (``NodeResourcesBalancedAllocationArgs.resources``; the weights do not count).
    """

    kind: str
    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
    shape: tuple[tuple[int, int], ...] = ()
    balanced_resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))


STRATEGIES: Mapping[str, FitStrategy] = {
    "LeastAllocated": FitStrategy("LeastAllocated"),
    "MostAllocated": FitStrategy("MostAllocated"),
    "RequestedToCapacityRatio": FitStrategy(
        "RequestedToCapacityRatio", (("cpu", 1), ("memory", 1), (GPU_RESOURCE, 1)), ((0, 0), (100, 10))
    ),
}
"""The strategy of each ``kube_scoring`` name a policy record gives."""


def namespace_of(name: str) -> str:
    """A pod's namespace: the part of its name before ``/``, else ``default``."""
    head, slash, _ = name.partition("/")
    return head if slash else "default"


# ---------------------------------------------------------------------- node columns


class _Seen(NamedTuple):
    """What the inter-pod rules read of a pod that holds resources on a node."""

    name: str
    labels: Mapping[str, str]
    affinity: Optional[Affinity]
    terminating: bool


class _Columns:
    """Per node: allocatable and requested of each resource, labels, taints, the pods there.

    Built from the pods the session holds (kept in :attr:`KernelSession.views` under the
    holdings' version), then extended by the pods a call bound and holds not yet."""

    def __init__(self, session: KernelSession) -> None:
        snapshot = session.snapshot
        n = session.n_nodes
        nodes = snapshot.nodes
        self.names = session.node_names
        self.labels = [node.labels for node in nodes]
        self.taints = [node.taints for node in nodes]
        hw = [node.hardware or NodeType() for node in nodes]
        self.cpu_alloc = np.array([h.cpu_milli or 0 for h in hw], dtype=np.int64)
        self.mem_alloc = np.array([h.memory_mib or 0 for h in hw], dtype=np.int64)
        self.gpu_alloc = np.array(
            [h.gpus - len(set(node.unhealthy_gpus)) for h, node in zip(hw, nodes)], dtype=np.int64
        )
        self.extended: dict[str, np.ndarray] = {}
        for i, node in enumerate(nodes):
            for name, amount in node.resources.items():
                self.extended.setdefault(name, np.zeros(n, dtype=np.int64))[i] = amount.allocatable
        self.requested: dict[str, np.ndarray] = {}  # cpu, memory, GPU, extended: what pods request
        self.nonzero: dict[str, np.ndarray] = {}  # cpu, memory with kube's defaults for pods asking none
        for key in ("cpu", "memory", GPU_RESOURCE, *self.extended):
            self.requested[key] = np.zeros(n, dtype=np.int64)
        for key in ("cpu", "memory"):
            self.nonzero[key] = np.zeros(n, dtype=np.int64)
        found: dict[Taint, list[int]] = {}
        for i, taints in enumerate(self.taints):
            for taint in taints:
                if taint.effect == "PreferNoSchedule":
                    found.setdefault(taint, []).append(i)
        self.prefer_taints = {taint: np.array(at, dtype=np.intp) for taint, at in found.items()}
        """Each ``PreferNoSchedule`` taint and the nodes having it."""
        self._label_codes: dict[str, tuple[dict[str, int], np.ndarray]] = {}
        self.pods: list[list[_Seen]] = [[] for _ in range(n)]
        self.occupied: set[int] = set()  # nodes holding pods
        self.with_affinity: set[int] = set()  # nodes holding pods with inter-pod terms
        for where, record in session.running():
            self.add(
                where, _Seen(record.name, record.labels, record.affinity, record.terminating),
                record.cpu_milli, record.memory_mib, len(record.gpus), record.resources,
            )

    def copy(self) -> "_Columns":
        """A copy whose requests and pods may grow apart from this one's."""
        other = copy.copy(self)
        other.requested = {k: v.copy() for k, v in self.requested.items()}
        other.nonzero = {k: v.copy() for k, v in self.nonzero.items()}
        other.pods = [list(p) for p in self.pods]
        other.occupied = set(self.occupied)
        other.with_affinity = set(self.with_affinity)
        return other

    def add(self, node: int, seen: _Seen, cpu: int, memory: int, gpus: int, resources: Mapping[str, int]) -> None:
        """Count a pod as held on ``node``: its requests of CPU, memory, whole GPUs and
        extended resources."""
        self.pods[node].append(seen)
        self.occupied.add(node)
        if seen.affinity is not None and (seen.affinity.pod_affinity or seen.affinity.pod_anti_affinity):
            self.with_affinity.add(node)
        self.requested["cpu"][node] += cpu
        self.requested["memory"][node] += memory
        self.requested[GPU_RESOURCE][node] += gpus
        self.nonzero["cpu"][node] += cpu or DEFAULT_MILLI_CPU_REQUEST
        self.nonzero["memory"][node] += memory or DEFAULT_MEMORY_REQUEST_MIB
        for name, count in resources.items():
            if name in self.extended:
                self.requested[name][node] += count

    def add_request(self, node: int, pod: PodRequest) -> None:
        """Count a pod of a request bound on ``node``."""
        seen = _Seen(pod.name, pod.labels, pod.affinity, False)
        self.add(node, seen, pod.cpu_milli, pod.memory_mib, _pod_request(pod, GPU_RESOURCE, False), pod.resources)

    def label_codes(self, key: str) -> tuple[dict[str, int], np.ndarray]:
        """The values of label ``key`` numbered 1.. and each node's number (0: no such label)."""
        found = self._label_codes.get(key)
        if found is None:
            numbers: dict[str, int] = {}
            codes = np.array(
                [numbers.setdefault(labels[key], len(numbers) + 1) if key in labels else 0 for labels in self.labels],
                dtype=np.intp,
            )
            found = self._label_codes[key] = (numbers, codes)
        return found

    def allocatable(self, resource: str) -> np.ndarray:
        """Allocatable of ``resource`` per node (0 where the node does not offer or track it)."""
        if resource == "cpu":
            return self.cpu_alloc
        if resource == "memory":
            return self.mem_alloc
        if resource == GPU_RESOURCE:
            return self.gpu_alloc
        return self.extended.get(resource, np.zeros(len(self.pods), dtype=np.int64))

    def held(self, resource: str, nonzero: bool) -> np.ndarray:
        """What the node's pods request of ``resource`` (``nonzero``: with kube's defaults)."""
        if nonzero and resource in self.nonzero:
            return self.nonzero[resource]
        return self.requested.get(resource, np.zeros(len(self.pods), dtype=np.int64))


@dataclass
class _Cached:
    base: _Columns
    call: Optional[_Columns] = None
    count: int = 0
    last: object = None


def _columns(session: KernelSession, placed: Sequence[Placed] = ()) -> _Columns:
    """The columns of what ``session`` holds, plus ``placed`` (bound by the call, not held):
    rebuilt when the holdings change, extended by the pods placed since the last call."""
    version = session.held_version
    found = session.views.get("kube_scores")
    if found is None or found[0] != version:
        found = (version, _Cached(_Columns(session)))
        session.views["kube_scores"] = found
    cached: _Cached = found[1]
    if not placed:
        return cached.base
    start = cached.count
    if cached.call is None or start > len(placed) or (start and placed[start - 1] is not cached.last):
        cached.call, start = cached.base.copy(), 0
    for pod, node, _ in placed[start:]:
        cached.call.add_request(node, pod)
    cached.count, cached.last = len(placed), placed[-1]
    return cached.call


def _pod_request(pod: PodRequest, resource: str, nonzero: bool) -> int:
    """What ``pod`` requests of ``resource`` (``nonzero``: cpu and memory at least kube's defaults)."""
    if resource == "cpu":
        return pod.cpu_milli or (DEFAULT_MILLI_CPU_REQUEST if nonzero else 0)
    if resource == "memory":
        return pod.memory_mib or (DEFAULT_MEMORY_REQUEST_MIB if nonzero else 0)
    if resource == GPU_RESOURCE:
        return 0 if pod.shared else pod.gpus
    return int(pod.resources.get(resource, 0))


def _go_div(numerator: np.ndarray, denominator: int | np.ndarray) -> np.ndarray:
    """Go's integer division (truncating toward zero) of int64 arrays, denominator > 0."""
    quotient = np.abs(numerator) // denominator
    return np.where(numerator < 0, -quotient, quotient)


def _resource_table(
    columns: _Columns, pod: PodRequest, resources: Sequence[tuple[str, int]], nonzero: bool
) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Per scored resource: (weight, allocatable, held, held plus the pod), allocatable 0
    where kube leaves the resource out (not offered, or a scalar resource the pod does not
    request: ``calculateNodeAllocatableRequest``)."""
    table = []
    for name, weight in resources:
        asked = _pod_request(pod, name, nonzero)
        if asked == 0 and name not in _CORE:
            continue
        held = columns.held(name, nonzero)
        table.append((weight, columns.allocatable(name), held, held + asked))
    return table


def _fit(columns: _Columns, pod: PodRequest, strategy: FitStrategy) -> np.ndarray:
    """NodeResourcesFit's Score (no NormalizeScore)."""
    n = len(columns.pods)
    total = np.zeros(n, dtype=np.int64)
    weights = np.zeros(n, dtype=np.int64)
    for weight, alloc, _, requested in _resource_table(columns, pod, strategy.resources, nonzero=True):
        offered = alloc > 0
        safe = np.where(offered, alloc, 1)
        if strategy.kind == "LeastAllocated":
            score = np.where(requested > alloc, 0, (alloc - requested) * MAX_NODE_SCORE // safe)
        elif strategy.kind == "MostAllocated":
            score = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
        else:
            utilization = np.where(requested > alloc, 100, requested * 100 // safe)
            score = _broken_linear(strategy.shape, utilization)
            offered &= score > 0
        total += np.where(offered, score * weight, 0)
        weights += np.where(offered, weight, 0)
    out = np.zeros(n, dtype=np.int64)
    has = weights > 0
    if strategy.kind == "RequestedToCapacityRatio":  # math.Round: half away from zero
        out[has] = (2 * total[has] + weights[has]) // (2 * weights[has])
    else:
        out[has] = total[has] // weights[has]
    return out


def _broken_linear(shape: Sequence[tuple[int, int]], utilization: np.ndarray) -> np.ndarray:
    """``helper.BuildBrokenLinearFunction`` of the shape, scores scaled 0..10 -> 0..100."""
    points = [(u, s * (MAX_NODE_SCORE // 10)) for u, s in shape]
    out = np.full(utilization.shape, points[-1][1], dtype=np.int64)
    done = np.zeros(utilization.shape, dtype=bool)
    for i, (u, s) in enumerate(points):
        here = ~done & (utilization <= u)
        if i == 0:
            out[here] = s
        else:
            u0, s0 = points[i - 1]
            out[here] = s0 + _go_div((s - s0) * (utilization[here] - u0), u - u0)
        done |= here
    return out


def _balanced(columns: _Columns, pod: PodRequest, resources: Sequence[tuple[str, int]]) -> np.ndarray | None:
    """NodeResourcesBalancedAllocation's Score; None when kube skips it (a pod requesting
    none of the resources)."""
    if all(_pod_request(pod, name, False) == 0 for name, _ in resources):
        return None
    table = _resource_table(columns, pod, resources, nonzero=False)
    with_pod = _balance([(alloc, requested) for _, alloc, _, requested in table])
    without = _balance([(alloc, held) for _, alloc, held, _ in table])
    return MAX_NODE_SCORE // 2 + _go_div(MAX_NODE_SCORE // 2 + with_pod - without, 2)


def _balance(columns: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """``balancedResourceScore``: (1 - the standard deviation of the used fractions) x 100,
    truncated, over the resources each node offers (the same float operations in order)."""
    n = len(columns[0][0])
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    first = np.zeros(n)
    second = np.zeros(n)
    fractions = []
    for alloc, used in columns:
        offered = alloc > 0
        fraction = np.minimum(used / np.where(offered, alloc, 1), 1.0)
        fractions.append((offered, fraction))
        total = np.where(offered, total + fraction, total)
        first = np.where(offered & (count == 0), fraction, first)
        second = np.where(offered & (count == 1), fraction, second)
        count += offered
    std = np.zeros(n)
    two = count == 2
    std[two] = np.abs((first[two] - second[two]) / 2)
    more = count > 2
    if more.any():
        mean = total / np.maximum(count, 1)
        squares = np.zeros(n)
        for offered, fraction in fractions:
            deviation = fraction - mean
            squares = np.where(offered, squares + deviation * deviation, squares)
        std[more] = np.sqrt(squares[more] / count[more])
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def _node_affinity(columns: _Columns, session: KernelSession, pod: PodRequest) -> np.ndarray | None:
    """NodeAffinity's Score: the weights of the preferred terms each node matches; None
    when the pod prefers nothing (kube skips the plugin)."""
    affinity = pod.affinity.node_affinity if pod.affinity is not None else None
    if affinity is None or not affinity.preferred:
        return None
    score = np.zeros(len(columns.pods), dtype=np.int64)
    for term in affinity.preferred:
        if not term.preference.empty:
            score += term.weight * _term_matches(session, columns, term.preference)
    return score


def _term_matches(session: KernelSession, columns: _Columns, term: NodeSelectorTerm) -> np.ndarray:
    """Whether each node matches a node selector term (nodes' labels do not change: cached)."""
    cached = session.views.setdefault("kube_node_terms", (-1, {}))[1]
    found = cached.get(term)
    if found is None:
        found = np.fromiter(
            (term.matches(labels, name) for labels, name in zip(columns.labels, columns.names)),
            dtype=bool, count=len(columns.names),
        )
        cached[term] = found
    return found  # type: ignore[no-any-return]


def _taint_toleration(columns: _Columns, pod: PodRequest) -> np.ndarray:
    """TaintToleration's Score: per node, its ``PreferNoSchedule`` taints that none of the
    pod's tolerations of that effect (or of every effect) tolerates."""
    tolerations = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
    score = np.zeros(len(columns.pods), dtype=np.int64)
    for taint, at in columns.prefer_taints.items():
        if not any(t.tolerates(taint) for t in tolerations):
            np.add.at(score, at, 1)  # a node listing the taint twice counts it twice, as kube
    return score


# ---------------------------------------------------------------------- inter-pod terms


@dataclass(frozen=True)
class _Term:
    """A pod affinity term resolved for its owner: the namespaces, the selector with the
    owner's ``matchLabelKeys``/``mismatchLabelKeys`` merged in, the weight."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    weight: int

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether the pod of this name and labels is one the term selects."""
        if self.selector is None or not self.selector.matches(labels):
            return False
        namespace = namespace_of(name)
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(
            {NAMESPACE_NAME_LABEL: namespace}
        )


def _resolve(term: PodAffinityTerm, owner: str, owner_labels: Mapping[str, str], weight: int) -> _Term:
    """``term`` of the pod ``owner`` as the scheduler reads it (``framework.NewPodInfo``)."""
    selector = term.label_selector
    if selector is not None and (term.match_label_keys or term.mismatch_label_keys):
        extra = [
            LabelSelectorRequirement(key, "In", (owner_labels[key],))
            for key in term.match_label_keys if key in owner_labels
        ] + [
            LabelSelectorRequirement(key, "NotIn", (owner_labels[key],))
            for key in term.mismatch_label_keys if key in owner_labels
        ]
        selector = LabelSelector(selector.match_labels, selector.match_expressions + tuple(extra))
    namespaces = frozenset(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = frozenset((namespace_of(owner),))
    return _Term(term.topology_key, selector, namespaces, term.namespace_selector, weight)


def _preferred_terms(name: str, labels: Mapping[str, str], affinity: object) -> tuple[list[_Term], list[_Term]]:
    """A pod's preferred affinity and anti-affinity terms, resolved."""
    found: tuple[list[_Term], list[_Term]] = ([], [])
    if affinity is None:
        return found
    for side, rules in enumerate((getattr(affinity, "pod_affinity"), getattr(affinity, "pod_anti_affinity"))):
        if rules is not None:
            found[side].extend(_resolve(w.pod_affinity_term, name, labels, w.weight) for w in rules.preferred)
    return found


def _inter_pod(columns: _Columns, pod: PodRequest) -> np.ndarray | None:
    """InterPodAffinity's Score: per node, the sum over topology keys of its domain's
    weight; None when no term touched any domain (kube skips the plugin)."""
    affinity, anti = _preferred_terms(pod.name, pod.labels, pod.affinity)
    mine = bool(affinity or anti)
    domains: dict[str, dict[str, int]] = {}

    def add(term: _Term, name: str, labels: Mapping[str, str], node_labels: Mapping[str, str], sign: int) -> None:
        if term.matches(name, labels):
            value = node_labels.get(term.topology_key)
            if value is not None:
                per_value = domains.setdefault(term.topology_key, {})
                per_value[value] = per_value.get(value, 0) + sign * term.weight

    for i in columns.occupied if mine else columns.with_affinity:
        node_labels = columns.labels[i]
        if not node_labels:
            continue
        for other in columns.pods[i]:
            rules = other.affinity
            if not mine and (rules is None or (rules.pod_affinity is None and rules.pod_anti_affinity is None)):
                continue
            for term in affinity:
                add(term, other.name, other.labels, node_labels, 1)
            for term in anti:
                add(term, other.name, other.labels, node_labels, -1)
            if rules is None:
                continue
            if rules.pod_affinity is not None:
                for required in rules.pod_affinity.required:
                    hard = _resolve(required, other.name, other.labels, HARD_POD_AFFINITY_WEIGHT)
                    add(hard, pod.name, pod.labels, node_labels, 1)
            theirs, their_anti = _preferred_terms(other.name, other.labels, rules)
            for term in theirs:
                add(term, pod.name, pod.labels, node_labels, 1)
            for term in their_anti:
                add(term, pod.name, pod.labels, node_labels, -1)
    if not domains:
        return None
    score = np.zeros(len(columns.pods), dtype=np.int64)
    for key, per_value in domains.items():
        numbers, codes = columns.label_codes(key)
        weights = np.zeros(len(numbers) + 1, dtype=np.int64)
        for value, weight in per_value.items():
            weights[numbers[value]] = weight
        score += weights[codes]
    return score


# ---------------------------------------------------------------------- topology spread


def _required_node_match(columns: _Columns, pod: PodRequest, i: int) -> bool:
    """Whether node ``i`` satisfies the pod's nodeSelector and required node affinity."""
    labels = columns.labels[i]
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    required = pod.affinity.node_affinity.required if pod.affinity and pod.affinity.node_affinity else None
    return required is None or required.matches(labels, columns.names[i])


def _taints_tolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> bool:
    """Whether every ``NoSchedule``/``NoExecute`` taint is tolerated."""
    return all(
        any(t.tolerates(taint) for t in tolerations) for taint in taints if taint.effect in ("NoSchedule", "NoExecute")
    )


def _spread_selector(selector: LabelSelector | None, keys: Sequence[str], labels: Mapping[str, str]) -> LabelSelector | None:
    """A constraint's selector with the pod's values of ``matchLabelKeys`` merged in."""
    merged = {key: labels[key] for key in keys if key in labels}
    if selector is None or not merged:
        return selector
    return LabelSelector({**selector.match_labels, **merged}, selector.match_expressions)


def _count_matching(pods: Sequence[_Seen], selector: LabelSelector | None, namespace: str) -> int:
    """``countPodsMatchSelector``: the pods of ``namespace``, not terminating, the selector
    (not empty, not absent) matches."""
    if selector is None or selector.empty:
        return 0
    return sum(
        1 for p in pods if not p.terminating and namespace_of(p.name) == namespace and selector.matches(p.labels)
    )


def _topology_spread(columns: _Columns, pod: PodRequest, feasible: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """PodTopologySpread's Score for its ``ScheduleAnyway`` constraints, and the nodes it
    ignores (a feasible node lacking a constraint's key); None when the pod has none."""
    constraints = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
    if not constraints:
        return None  # the system default constraints select by Services and controllers: none in placer
    n = len(columns.pods)
    namespace = namespace_of(pod.name)
    selectors = [_spread_selector(c.label_selector, c.match_label_keys, pod.labels) for c in constraints]
    keys = [c.topology_key for c in constraints]
    has_all = np.array([all(k in labels for k in keys) for labels in columns.labels], dtype=bool)
    ignored = feasible & ~has_all
    counted = feasible & has_all
    counts: list[dict[str, int]] = [{} for _ in constraints]
    weights = []
    for c, key in enumerate(keys):
        if key != HOSTNAME_LABEL:
            for i in np.flatnonzero(counted):
                counts[c].setdefault(columns.labels[i][key], 0)
            size = len(counts[c])
        else:
            size = int(counted.sum())
        weights.append(math.log(size + 2))
    for i in np.flatnonzero(has_all):
        affinity_ok: bool | None = None
        for c, constraint in enumerate(constraints):
            if keys[c] == HOSTNAME_LABEL:
                continue
            value = columns.labels[i][keys[c]]
            if value not in counts[c]:
                continue
            if constraint.node_affinity_policy != "Ignore":
                if affinity_ok is None:
                    affinity_ok = _required_node_match(columns, pod, int(i))
                if not affinity_ok:
                    continue
            if constraint.node_taints_policy == "Honor" and not _taints_tolerated(columns.taints[i], pod.tolerations):
                continue
            counts[c][value] += _count_matching(columns.pods[i], selectors[c], namespace)
    score = np.zeros(n, dtype=np.int64)
    for i in np.flatnonzero(counted):
        total = 0.0
        for c, constraint in enumerate(constraints):
            if keys[c] == HOSTNAME_LABEL:
                count = _count_matching(columns.pods[i], selectors[c], namespace)
            else:
                count = counts[c][columns.labels[i][keys[c]]]
            total += count * weights[c] + (constraint.max_skew - 1)
        score[i] = math.floor(total + 0.5)  # math.Round of a non-negative number
    return score, ignored


# ---------------------------------------------------------------------- normalisation


def _default_normalize(score: np.ndarray, feasible: np.ndarray, reverse: bool) -> np.ndarray:
    """``helper.DefaultNormalizeScore(MaxNodeScore, reverse)`` over the feasible nodes."""
    top = int(score[feasible].max(initial=0))
    if top == 0:
        return np.full(score.shape, MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scaled = MAX_NODE_SCORE * score // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


def _min_max_normalize(score: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """InterPodAffinity's NormalizeScore: (score - min) / (max - min) x 100, truncated."""
    low = int(score[feasible].min())
    spread = int(score[feasible].max()) - low
    if spread <= 0:
        return np.zeros(score.shape, dtype=np.int64)
    return (MAX_NODE_SCORE * ((score - low) / spread)).astype(np.int64)


def _spread_normalize(score: np.ndarray, ignored: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """PodTopologySpread's NormalizeScore: fewest matching pods best; ignored nodes 0."""
    counted = feasible & ~ignored
    top = int(score[counted].max(initial=0))
    low = int(score[counted].min()) if counted.any() else 0
    if top == 0:
        out = np.full(score.shape, MAX_NODE_SCORE, dtype=np.int64)
    else:
        out = MAX_NODE_SCORE * (top + low - score) // top
    out[ignored] = 0
    return out


# ---------------------------------------------------------------------- composition


Target = Union[KernelSession, "Cluster"]


def _session(target: Target) -> KernelSession:
    return target if isinstance(target, KernelSession) else target.session


def _strategy(policy: Policy | str) -> tuple[Policy, FitStrategy]:
    record = policy if isinstance(policy, Policy) else REGISTRY.get(policy)
    if record is None or record.kube_scoring is None:
        kube = [p.name for p in REGISTRY.values() if p.kube_scoring is not None]
        raise InvalidInputError("policy", f"expected one of {', '.join(kube)}, got {policy!r}")
    return record, STRATEGIES[record.kube_scoring]


def feasible_nodes(session: KernelSession, pod: PodRequest, policy: Policy) -> np.ndarray:
    """The nodes that pass the pod's filters now (bool per node): where the kernel's
    :meth:`~placer.kernel.KernelSession.node_scores` is above the lowest int64."""
    return session.node_scores(pod, policy) > _NO_NODE


def plugin_scores(
    target: Target, pod: PodRequest, policy: Policy | str = "kube", nodes: np.ndarray | None = None,
    placed: Sequence[Placed] = (), strategy: FitStrategy | None = None,
) -> dict[str, np.ndarray]:
    """Each score plugin's normalised score (0..100) of every node for ``pod``, now.

    Parameters
    ----------
    target : KernelSession or Cluster
        The cluster as it is (its running and bound pods count).
    pod : PodRequest
    policy : Policy or str
        A policy with a ``kube_scoring`` strategy (``kube`` ...); it gives NodeResourcesFit's
        strategy.
    nodes : ndarray of bool, optional
        The nodes kube scores (normalisation runs over them); default: those that pass
        the filters (:func:`feasible_nodes`).
    placed : sequence of (PodRequest, int, int)
        Pods bound on their nodes by the call under way and not yet held (a request's
        pods see those placed before them).
    strategy : FitStrategy, optional
        NodeResourcesFit's strategy instead of the policy's (a scheduler configured with
        other resources, weights or shape).

    Returns
    -------
    dict of str to ndarray of int64
        By plugin name (:data:`PLUGIN_WEIGHTS`' keys), a score per node; 0 outside
        ``nodes`` and for a plugin kube skips for this pod.
    """
    session = _session(target)
    record, fit = _strategy(policy)
    feasible = feasible_nodes(session, pod, record) if nodes is None else np.asarray(nodes, dtype=bool)
    columns = _columns(session, placed)
    n = session.n_nodes
    zero = np.zeros(n, dtype=np.int64)
    out: dict[str, np.ndarray] = {}
    out["TaintToleration"] = _default_normalize(_taint_toleration(columns, pod), feasible, reverse=True)
    preferred = _node_affinity(columns, session, pod)
    out["NodeAffinity"] = zero if preferred is None else _default_normalize(preferred, feasible, reverse=False)
    fit = strategy or fit
    out["NodeResourcesFit"] = _fit(columns, pod, fit)
    spread = _topology_spread(columns, pod, feasible)
    out["PodTopologySpread"] = zero if spread is None else _spread_normalize(spread[0], spread[1], feasible)
    inter = _inter_pod(columns, pod)
    out["InterPodAffinity"] = zero if inter is None or not feasible.any() else _min_max_normalize(inter, feasible)
    balanced = _balanced(columns, pod, fit.balanced_resources)
    out["NodeResourcesBalancedAllocation"] = zero if balanced is None else balanced
    return {name: np.where(feasible, score, 0) for name, score in out.items()}


def node_scores(
    target: Target, pod: PodRequest, policy: Policy | str = "kube", nodes: np.ndarray | None = None,
    placed: Sequence[Placed] = (), strategy: FitStrategy | None = None,
) -> np.ndarray:
    """Every node's kube score for ``pod``: the plugins' normalised scores weighted by
    :data:`PLUGIN_WEIGHTS` and summed; the lowest int64 outside ``nodes`` (default: where
    the pod may not go). Parameters as :func:`plugin_scores`."""
    session = _session(target)
    record, _ = _strategy(policy)
    feasible = feasible_nodes(session, pod, record) if nodes is None else np.asarray(nodes, dtype=bool)
    total = np.zeros(session.n_nodes, dtype=np.int64)
    for name, score in plugin_scores(session, pod, record, feasible, placed, strategy).items():
        total += PLUGIN_WEIGHTS[name] * score
    return np.where(feasible, total, _NO_NODE)


def choose_node(
    session: KernelSession, pod: PodRequest, policy: Policy, rng: np.ndarray, placed: Sequence[Placed] = ()
) -> int:
    """The node kube's scores choose for ``pod`` (-1 when none passes the filters).

    The highest total wins; among equal totals a seeded draw (``splitmix_pick``) picks the
    k-th in node index order, as kube picks one of them at random; no draw when one node
    leads alone.
    """
    feasible = feasible_nodes(session, pod, policy)
    if not feasible.any():
        return -1
    total = node_scores(session, pod, policy, feasible, placed)
    top = np.flatnonzero(total == total.max())
    if len(top) == 1:
        return int(top[0])
    return int(top[splitmix_pick(rng, len(top))])
