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

import msgspec
import numpy as np

from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.model import NodeType, PodRequest, ScoringStrategy, Taint, Toleration
from placer.model.affinity import Affinity, LabelSelector, LabelSelectorRequirement, PodAffinityTerm
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
    "fit_strategy",
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


def fit_strategy(policy: Policy, scoring: ScoringStrategy | None = None) -> FitStrategy:
    """NodeResourcesFit's strategy for a kube-scored ``policy``: its own, or the request's
    ``scoringStrategy`` (``type`` left out: the policy's; ``resources`` left out: cpu and
    memory of weight 1)."""
    own = STRATEGIES[policy.kube_scoring or "LeastAllocated"]
    if scoring is None:
        return own
    kind = scoring.type or own.kind
    resources = tuple((r.name, r.weight) for r in scoring.resources) or (("cpu", 1), ("memory", 1))
    ratio = scoring.requested_to_capacity_ratio
    shape = tuple((p.utilization, p.score) for p in ratio.shape) if ratio is not None else ()
    return FitStrategy(kind, resources, shape or (own.shape if kind == own.kind else ()))


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
        self._session = session
        self.n = n
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
                found.setdefault(taint, []).append(i)
        self.prefer_taints = {t: np.array(at, dtype=np.intp) for t, at in found.items() if t.effect == "PreferNoSchedule"}
        """Each ``PreferNoSchedule`` taint and the nodes having it (a node as often as it lists it)."""
        self.hard_taints = {t: np.array(at, dtype=np.intp) for t, at in found.items() if t.effect != "PreferNoSchedule"}
        """Each ``NoSchedule``/``NoExecute`` taint and the nodes having it."""
        self._groups: dict[tuple[str, frozenset[tuple[str, str]], bool], tuple[Mapping[str, str], list[int]]] = {}
        self._group_arrays: dict[tuple[str, frozenset[tuple[str, str]], bool], np.ndarray] = {}
        self._with_terms: dict[tuple[str, frozenset[tuple[str, str]], bytes], tuple[_Seen, list[int]]] = {}
        self._label_codes: dict[str, tuple[dict[str, int], np.ndarray]] = {}
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
        other._groups = {k: (labels, list(at)) for k, (labels, at) in self._groups.items()}
        other._group_arrays = {}
        other._with_terms = {k: (seen, list(at)) for k, (seen, at) in self._with_terms.items()}
        return other

    def add(self, node: int, seen: _Seen, cpu: int, memory: int, gpus: int, resources: Mapping[str, int]) -> None:
        """Count a pod as held on ``node``: its requests of CPU, memory, whole GPUs and
        extended resources."""
        group = (namespace_of(seen.name), frozenset(seen.labels.items()), seen.terminating)
        self._groups.setdefault(group, (seen.labels, []))[1].append(node)
        self._group_arrays.pop(group, None)
        if seen.affinity is not None and (seen.affinity.pod_affinity or seen.affinity.pod_anti_affinity):
            alike = (group[0], group[1], msgspec.json.encode(seen.affinity))
            self._with_terms.setdefault(alike, (seen, []))[1].append(node)
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

    def groups(self) -> Iterable[tuple[str, Mapping[str, str], bool, np.ndarray]]:
        """The pods held, by namespace, labels and whether terminating: (namespace, labels,
        terminating, the node of each such pod)."""
        for key, (labels, at) in self._groups.items():
            nodes = self._group_arrays.get(key)
            if nodes is None:
                nodes = self._group_arrays[key] = np.array(at, dtype=np.intp)
            yield key[0], labels, key[2], nodes

    def with_terms(self) -> Iterable[tuple[_Seen, np.ndarray]]:
        """The pods held that have inter-pod terms, alike ones (namespace, labels, affinity)
        together: one of them, and the node of each."""
        for seen, at in self._with_terms.values():
            yield seen, np.array(at, dtype=np.intp)

    def label_codes(self, key: str) -> tuple[dict[str, int], np.ndarray]:
        """The values of label ``key`` numbered 1.. and each node's number (0: no such label):
        the session's label column shifted by one."""
        found = self._label_codes.get(key)
        if found is None:
            codes, index = self._session.label_column(key)
            found = self._label_codes[key] = ({v: i + 1 for v, i in index.items()}, codes.astype(np.intp) + 1)
        return found

    def allocatable(self, resource: str) -> np.ndarray:
        """Allocatable of ``resource`` per node (0 where the node does not offer or track it)."""
        if resource == "cpu":
            return self.cpu_alloc
        if resource == "memory":
            return self.mem_alloc
        if resource == GPU_RESOURCE:
            return self.gpu_alloc
        return self.extended.get(resource, np.zeros(self.n, dtype=np.int64))

    def held(self, resource: str, nonzero: bool) -> np.ndarray:
        """What the node's pods request of ``resource`` (``nonzero``: with kube's defaults)."""
        if nonzero and resource in self.nonzero:
            return self.nonzero[resource]
        return self.requested.get(resource, np.zeros(self.n, dtype=np.int64))


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
    n = columns.n
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
    score = np.zeros(columns.n, dtype=np.int64)
    for term in affinity.preferred:
        if not term.preference.empty:
            score += term.weight * session.term_nodes(term.preference)
    return score


def _taint_toleration(columns: _Columns, pod: PodRequest) -> np.ndarray:
    """TaintToleration's Score: per node, its ``PreferNoSchedule`` taints that none of the
    pod's tolerations of that effect (or of every effect) tolerates."""
    tolerations = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
    score = np.zeros(columns.n, dtype=np.int64)
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
        return self.selects(namespace_of(name), labels)

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod of this namespace and labels is one the term selects."""
        if self.selector is None or not self.selector.matches(labels):
            return False
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
    per_key: dict[str, np.ndarray] = {}  # topology key -> weight per label value number

    def add(term: _Term, nodes: np.ndarray, sign: int) -> None:
        numbers, codes = columns.label_codes(term.topology_key)
        at = codes[nodes]
        at = at[at > 0]  # nodes without the key (or without labels) add nothing
        if at.size:
            weights = per_key.setdefault(term.topology_key, np.zeros(len(numbers) + 1, dtype=np.int64))
            weights += sign * term.weight * np.bincount(at, minlength=len(weights))

    for terms, sign in ((affinity, 1), (anti, -1)):
        for term in terms:
            for held_namespace, labels, _, nodes in columns.groups():
                if term.selects(held_namespace, labels):
                    add(term, nodes, sign)
    namespace = namespace_of(pod.name)
    for other, nodes in columns.with_terms():
        rules = other.affinity
        assert rules is not None
        if rules.pod_affinity is not None:
            for required in rules.pod_affinity.required:
                hard = _resolve(required, other.name, other.labels, HARD_POD_AFFINITY_WEIGHT)
                if hard.selects(namespace, pod.labels):
                    add(hard, nodes, 1)
        theirs, their_anti = _preferred_terms(other.name, other.labels, rules)
        for terms, sign in ((theirs, 1), (their_anti, -1)):
            for term in terms:
                if term.selects(namespace, pod.labels):
                    add(term, nodes, sign)
    if not per_key:
        return None
    score = np.zeros(columns.n, dtype=np.int64)
    for key, weights in per_key.items():
        score += weights[columns.label_codes(key)[1]]
    return score


# ---------------------------------------------------------------------- topology spread


def _tolerated_mask(columns: _Columns, tolerations: Sequence[Toleration]) -> np.ndarray:
    """Whether each node's ``NoSchedule``/``NoExecute`` taints are all tolerated."""
    mask = np.ones(columns.n, dtype=bool)
    for taint, at in columns.hard_taints.items():
        if not any(t.tolerates(taint) for t in tolerations):
            mask[at] = False
    return mask


def _spread_selector(selector: LabelSelector | None, keys: Sequence[str], labels: Mapping[str, str]) -> LabelSelector | None:
    """A constraint's selector with the pod's values of ``matchLabelKeys`` merged in."""
    merged = {key: labels[key] for key in keys if key in labels}
    if selector is None or not merged:
        return selector
    return LabelSelector({**selector.match_labels, **merged}, selector.match_expressions)


def _matching_per_node(columns: _Columns, selector: LabelSelector | None, namespace: str) -> np.ndarray:
    """``countPodsMatchSelector`` on every node: its pods of ``namespace``, not
    terminating, that the selector (not empty, not absent) matches."""
    count = np.zeros(columns.n, dtype=np.int64)
    if selector is None or selector.empty:
        return count
    for pod_namespace, labels, terminating, nodes in columns.groups():
        if pod_namespace == namespace and not terminating and selector.matches(labels):
            np.add.at(count, nodes, 1)
    return count


def _topology_spread(
    session: KernelSession, columns: _Columns, pod: PodRequest, feasible: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """PodTopologySpread's Score for its ``ScheduleAnyway`` constraints, and the nodes it
    ignores (a feasible node lacking a constraint's key); None when the pod has none."""
    constraints = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
    if not constraints:
        return None  # the system default constraints select by Services and controllers: none in placer
    n = columns.n
    namespace = namespace_of(pod.name)
    codes = [columns.label_codes(c.topology_key) for c in constraints]
    has_all = np.logical_and.reduce([numbered[1] > 0 for numbered in codes])
    ignored = feasible & ~has_all
    counted = feasible & has_all
    affinity_ok: np.ndarray | None = None
    taints_ok: np.ndarray | None = None
    total = np.zeros(n)
    for constraint, (numbers, code) in zip(constraints, codes):
        matching = _matching_per_node(
            columns, _spread_selector(constraint.label_selector, constraint.match_label_keys, pod.labels), namespace
        )
        if constraint.topology_key == HOSTNAME_LABEL:
            size = int(counted.sum())
            count = matching.astype(np.float64)
        else:
            domains = np.zeros(len(numbers) + 1, dtype=bool)
            domains[code[counted]] = True
            size = int(domains.sum())
            include = has_all & domains[code]
            if constraint.node_affinity_policy != "Ignore":
                if affinity_ok is None:
                    affinity_ok = session.node_affinity_nodes(pod)
                include &= affinity_ok
            if constraint.node_taints_policy == "Honor":
                if taints_ok is None:
                    taints_ok = _tolerated_mask(columns, pod.tolerations)
                include &= taints_ok
            count = np.bincount(code[include], weights=matching[include], minlength=len(numbers) + 1)[code]
        total = total + (count * math.log(size + 2) + (constraint.max_skew - 1))
    score = np.where(counted, np.floor(total + 0.5), 0).astype(np.int64)  # math.Round, non-negative
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
    spread = _topology_spread(session, columns, pod, feasible)
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
    session: KernelSession, pod: PodRequest, policy: Policy, rng: np.ndarray, placed: Sequence[Placed] = (),
    strategy: FitStrategy | None = None,
) -> int:
    """The node kube's scores choose for ``pod`` (-1 when none passes the filters).

    The highest total wins; among equal totals a seeded draw (``splitmix_pick``) picks the
    k-th in node index order, as kube picks one of them at random; no draw when one node
    leads alone.
    """
    feasible = feasible_nodes(session, pod, policy)
    if not feasible.any():
        return -1
    total = node_scores(session, pod, policy, feasible, placed, strategy)
    top = np.flatnonzero(total == total.max())
    if len(top) == 1:
        return int(top[0])
    return int(top[splitmix_pick(rng, len(top))])
