"""A pod's scheduling rules as Kubernetes writes them: node affinity, inter-pod affinity and
anti-affinity, topology spread constraints, and the label selectors they use.

Field names and nesting are Kubernetes' own (``core/v1``), so a fragment of a pod spec can
be pasted into a placer/v1 document. The matching rules are kube-scheduler's:

* :meth:`LabelSelector.matches` is ``metav1.LabelSelectorAsSelector`` then ``Matches``
  (``apimachinery/pkg/labels``): an empty selector matches every set of labels; ``In`` needs
  the key with one of the values, ``NotIn`` matches when the key is absent or its value is
  none of them.
* :meth:`NodeSelectorTerm.matches` is ``component-helpers/scheduling/corev1/nodeaffinity``:
  the expressions and the fields of a term are ANDed, the terms of a :class:`NodeSelector`
  ORed, a term with neither matches no node; ``Gt``/``Lt`` compare the label as a base-10
  int64 (a label that is not one does not match); ``matchFields`` knows ``metadata.name``.

The shapes kube's API validation refuses (``In`` without values, ``Gt`` with two, a
``matchFields`` key other than ``metadata.name``) are refused by the schema layer
(``placer.schema``), so these methods see valid terms only.
"""
from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any, Container, Literal, Mapping, Optional

import msgspec
from msgspec import Meta, Struct

from placer.model.roles import Role, declare

__all__ = [
    "LABEL_OPERATORS",
    "NODE_OPERATORS",
    "NODE_NAME_FIELD",
    "LabelSelectorRequirement",
    "LabelSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSelector",
    "PreferredSchedulingTerm",
    "NodeAffinity",
    "PodAffinityTerm",
    "WeightedPodAffinityTerm",
    "PodAffinity",
    "PodAntiAffinity",
    "Affinity",
    "TopologySpreadConstraint",
    "parse_int64",
    "is_label_key",
    "is_label_value",
    "required_node_selector",
    "prefilter_node_names",
    "node_affinity_matches",
    "required_on_keys",
    "DEFAULT_NAMESPACE",
    "namespace_of",
    "InterPodTerm",
    "required_terms",
    "SpreadRule",
    "spread_rules",
]

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
"""The operators of a label selector's expressions (``metav1.LabelSelectorOperator``)."""
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
"""The operators of a node selector's expressions (``v1.NodeSelectorOperator``)."""
NODE_NAME_FIELD = "metadata.name"
"""The one field a node selector term's ``matchFields`` may name."""

_EMPTY: Mapping[Any, Any] = MappingProxyType({})
_INT64 = re.compile(r"[+-]?[0-9]+\Z")
Weight = Annotated[int, Meta(ge=1, le=100)]
Key = Annotated[str, Meta(min_length=1)]


class _Kube(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel", omit_defaults=True):
    """Base of the Kubernetes-shaped Structs: camelCase JSON names, unknown fields refused."""

    def to_dict(self) -> dict[str, Any]:
        """The object as Kubernetes writes it (fields at their default left out)."""
        return msgspec.json.decode(msgspec.json.encode(self))  # type: ignore[no-any-return]


def parse_int64(text: str) -> Optional[int]:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it; None when it fails."""
    if not _INT64.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


_LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


@lru_cache(maxsize=4096)
def is_label_value(text: str) -> bool:
    """Whether ``text`` is a Kubernetes label value (``IsValidLabelValue``): empty, or up to
    63 letters, digits, ``-``, ``_``, ``.`` beginning and ending with a letter or digit."""
    return len(text) <= 63 and _LABEL_NAME.match(text) is not None


@lru_cache(maxsize=4096)
def is_label_key(text: str) -> bool:
    """Whether ``text`` is a Kubernetes label key (``IsQualifiedName``): a name of the
    label value's syntax, not empty, optionally after a DNS subdomain prefix and ``/``."""
    prefix, slash, name = text.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or _DNS_SUBDOMAIN.match(prefix) is None):
        return False
    return bool(name) and is_label_value(name)


class LabelSelectorRequirement(_Kube):
    """One expression of a label selector (``metav1.LabelSelectorRequirement``)."""

    key: Key
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a set of labels satisfies this expression."""
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


declare(LabelSelectorRequirement, key=Role.FILTER, operator=Role.FILTER, values=Role.FILTER)


class LabelSelector(_Kube):
    """A label selector (``metav1.LabelSelector``): ``matchLabels`` and ``matchExpressions`` ANDed."""

    match_labels: Mapping[Key, str] = _EMPTY
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the selector has no requirement (it matches every pod)."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a set of labels satisfies every requirement."""
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(e.matches(labels) for e in self.match_expressions)


declare(LabelSelector, match_labels=Role.FILTER, match_expressions=Role.FILTER)


class NodeSelectorRequirement(_Kube):
    """One expression of a node selector term (``v1.NodeSelectorRequirement``)."""

    key: Key
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    @property
    def parses(self) -> bool:
        """Whether kube's ``labels.NewRequirement`` takes the expression: a label key and
        label values of Kubernetes' syntax, values for ``In``/``NotIn``, none for
        ``Exists``/``DoesNotExist``, and for ``Gt``/``Lt`` one base-10 int64. An expression
        that does not parse makes its term match no node."""
        if not is_label_key(self.key) or not all(is_label_value(v) for v in self.values):
            return False
        if self.operator in ("Gt", "Lt"):
            return len(self.values) == 1 and parse_int64(self.values[0]) is not None
        return bool(self.values) == (self.operator in ("In", "NotIn"))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node's labels satisfy it (False when it does not parse)."""
        return self.parses and self.matches_value(labels.get(self.key))

    def matches_value(self, value: Optional[str]) -> bool:
        """Whether a node whose label ``key`` is ``value`` (None: the node lacks it)
        satisfies the expression, which :attr:`parses`."""
        op = self.operator
        if op in ("Gt", "Lt"):
            have = None if value is None else parse_int64(value)
            want = parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return LabelSelectorRequirement(self.key, op, self.values).matches({} if value is None else {self.key: value})  # type: ignore[arg-type]

    def matches_field(self, node_name: str) -> bool:
        """Whether a node of this name satisfies the expression as a ``matchFields`` entry
        (kube's field selector: ``In`` or ``NotIn`` one value of ``metadata.name``)."""
        if self.operator not in ("In", "NotIn") or len(self.values) != 1:
            return False
        have = node_name if self.key == NODE_NAME_FIELD else ""
        return (have == self.values[0]) == (self.operator == "In")


declare(NodeSelectorRequirement, key=Role.FILTER, operator=Role.FILTER, values=Role.FILTER)


class NodeSelectorTerm(_Kube):
    """A node selector term: its expressions and fields ANDed (``v1.NodeSelectorTerm``)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """A term with no expression and no field: it matches no node."""
        return not self.match_expressions and not self.match_fields

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether a node of these labels and this name satisfies the term."""
        if self.empty:
            return False
        if not all(e.matches(labels) for e in self.match_expressions):
            return False
        return all(f.matches_field(node_name) for f in self.match_fields)


declare(NodeSelectorTerm, match_expressions=Role.FILTER, match_fields=Role.FILTER)


class NodeSelector(_Kube):
    """Terms ORed (``v1.NodeSelector``)."""

    node_selector_terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        """Whether some term matches the node."""
        return any(t.matches(labels, node_name) for t in self.node_selector_terms)


declare(NodeSelector, node_selector_terms=Role.FILTER)


class PreferredSchedulingTerm(_Kube):
    """A weighted node preference (``v1.PreferredSchedulingTerm``)."""

    weight: Weight
    preference: NodeSelectorTerm


declare(PreferredSchedulingTerm, weight=Role.ORDER, preference=Role.ORDER)


class NodeAffinity(_Kube):
    """``v1.NodeAffinity``: the required selector filters, the preferred terms score."""

    required_during_scheduling_ignored_during_execution: Optional[NodeSelector] = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()

    @property
    def required(self) -> Optional[NodeSelector]:
        return self.required_during_scheduling_ignored_during_execution

    @property
    def preferred(self) -> tuple[PreferredSchedulingTerm, ...]:
        return self.preferred_during_scheduling_ignored_during_execution


declare(
    NodeAffinity,
    required_during_scheduling_ignored_during_execution=Role.FILTER,
    preferred_during_scheduling_ignored_during_execution=Role.ORDER,
)


class PodAffinityTerm(_Kube):
    """Pods of ``labelSelector`` in ``namespaces`` (``v1.PodAffinityTerm``), by ``topologyKey``.

    No ``labelSelector`` matches no pod; no ``namespaces`` and no ``namespaceSelector``
    mean the pod's own namespace; an empty ``namespaceSelector`` means every namespace.
    """

    topology_key: Key
    label_selector: Optional[LabelSelector] = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: Optional[LabelSelector] = None
    match_label_keys: tuple[Key, ...] = ()
    mismatch_label_keys: tuple[Key, ...] = ()


declare(
    PodAffinityTerm,
    topology_key=Role.GROUPING,
    label_selector=Role.FILTER,
    namespaces=Role.FILTER,
    namespace_selector=Role.FILTER,
    match_label_keys=Role.FILTER,
    mismatch_label_keys=Role.FILTER,
)


class WeightedPodAffinityTerm(_Kube):
    """A weighted inter-pod preference (``v1.WeightedPodAffinityTerm``)."""

    weight: Weight
    pod_affinity_term: PodAffinityTerm


declare(WeightedPodAffinityTerm, weight=Role.ORDER, pod_affinity_term=Role.ORDER)


class PodAffinity(_Kube):
    """``v1.PodAffinity``: go where the matching pods are."""

    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()

    @property
    def required(self) -> tuple[PodAffinityTerm, ...]:
        return self.required_during_scheduling_ignored_during_execution

    @property
    def preferred(self) -> tuple[WeightedPodAffinityTerm, ...]:
        return self.preferred_during_scheduling_ignored_during_execution


declare(
    PodAffinity,
    required_during_scheduling_ignored_during_execution=Role.FILTER,
    preferred_during_scheduling_ignored_during_execution=Role.ORDER,
)


class PodAntiAffinity(PodAffinity):
    """``v1.PodAntiAffinity``: keep away from the matching pods (the same fields)."""


declare(PodAntiAffinity, like=PodAffinity)


class Affinity(_Kube):
    """A pod's ``spec.affinity``."""

    node_affinity: Optional[NodeAffinity] = None
    pod_affinity: Optional[PodAffinity] = None
    pod_anti_affinity: Optional[PodAntiAffinity] = None


declare(Affinity, node_affinity=Role.FILTER, pod_affinity=Role.FILTER, pod_anti_affinity=Role.FILTER)


class TopologySpreadConstraint(_Kube):
    """One of a pod's ``topologySpreadConstraints`` (``v1.TopologySpreadConstraint``).

    ``nodeAffinityPolicy`` left out is ``Honor`` and ``nodeTaintsPolicy`` left out is
    ``Ignore``, as kube-scheduler defaults them.
    """

    max_skew: Annotated[int, Meta(ge=1, le=2**31 - 1)]
    topology_key: Key
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: Optional[LabelSelector] = None
    min_domains: Optional[Annotated[int, Meta(ge=1, le=2**31 - 1)]] = None
    node_affinity_policy: Optional[Literal["Honor", "Ignore"]] = None
    node_taints_policy: Optional[Literal["Honor", "Ignore"]] = None
    match_label_keys: tuple[Key, ...] = ()


declare(
    TopologySpreadConstraint,
    max_skew=Role.FILTER,
    topology_key=Role.GROUPING,
    when_unsatisfiable=Role.FILTER,
    label_selector=Role.FILTER,
    min_domains=Role.FILTER,
    node_affinity_policy=Role.FILTER,
    node_taints_policy=Role.FILTER,
    match_label_keys=Role.FILTER,
)


def required_node_selector(affinity: Optional[Affinity]) -> Optional[NodeSelector]:
    """The pod's ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``, if any."""
    if affinity is None or affinity.node_affinity is None:
        return None
    return affinity.node_affinity.required


def prefilter_node_names(affinity: Optional[Affinity]) -> Optional[frozenset[str]]:
    """The only nodes kube-scheduler's NodeAffinity PreFilter lets the filters see.

    When every term of the required selector names nodes by ``matchFields`` ``metadata.name
    In`` (the names of one term intersected, the terms united), only those nodes are
    filtered; the others are turned away before any filter. None: every node is filtered.
    An empty set: the terms conflict, no node can match.
    """
    required = required_node_selector(affinity)
    if required is None or not required.node_selector_terms:
        return None
    names: set[str] = set()
    for term in required.node_selector_terms:
        named: Optional[set[str]] = None
        for f in term.match_fields:
            if f.key == NODE_NAME_FIELD and f.operator == "In":
                named = set(f.values) if named is None else named & set(f.values)
        if named is None:
            return None
        names |= named
    return frozenset(names)


def node_affinity_matches(
    node_selector: Mapping[str, str], affinity: Optional[Affinity], labels: Mapping[str, str], node_name: str
) -> bool:
    """kube-scheduler's NodeAffinity filter: the pod's ``nodeSelector`` and its required node
    affinity, both, on a node of these labels and this name."""
    if any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    required = required_node_selector(affinity)
    return required is None or required.matches(labels, node_name)
def required_on_keys(
    node_selector: Mapping[str, str], affinity: Optional[Affinity], keys: Container[str]
) -> tuple[Mapping[str, str], Optional[Affinity]]:
    """A pod's ``nodeSelector`` and required node affinity read on the label ``keys`` alone
    (Kueue's ``flavorSelector``: a ResourceFlavor's ``nodeLabels`` decide only what they name).

    Selector entries and term expressions on other keys are dropped, and so is every
    ``matchFields`` entry; when a term is left without an expression the required affinity
    is dropped whole (that term, ORed, matches any flavor). The pair goes to
    :func:`node_affinity_matches` as before.
    """
    kept_selector = {k: v for k, v in node_selector.items() if k in keys}
    required = required_node_selector(affinity)
    terms: list[NodeSelectorTerm] = []
    for term in required.node_selector_terms if required is not None else ():
        expressions = tuple(e for e in term.match_expressions if e.key in keys)
        if not expressions:
            terms = []
            break
        terms.append(NodeSelectorTerm(match_expressions=expressions))
    kept = Affinity(node_affinity=NodeAffinity(NodeSelector(tuple(terms)))) if terms else None
    return kept_selector, kept


# ---------------------------------------------------------------------------------------
# Inter-pod rules resolved for one pod (kube-scheduler's ``framework.AffinityTerm`` and the
# PodTopologySpread constraint): what they match, with matchLabelKeys merged in.

DEFAULT_NAMESPACE = "default"
"""The namespace of a pod whose name has no ``namespace/`` part."""


def namespace_of(name: str) -> str:
    """A pod's namespace: the part of its name before ``/``, else ``default``."""
    head, sep, _ = name.partition("/")
    return head if sep else DEFAULT_NAMESPACE


def _with_label_keys(
    selector: LabelSelector, labels: Mapping[str, str], keys: tuple[str, ...], operator: Literal["In", "NotIn"]
) -> LabelSelector:
    extra = tuple(LabelSelectorRequirement(k, operator, (labels[k],)) for k in keys if k in labels)
    if not extra:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + extra)


@dataclass(frozen=True)
class InterPodTerm:
    """A required (anti-)affinity term of a pod, resolved as kube-scheduler resolves it.

    ``namespaces`` None: every namespace (an empty ``namespaceSelector``); ``selector``
    None: no pod (no ``labelSelector``). ``matchLabelKeys`` and ``mismatchLabelKeys`` are
    merged into the selector as ``In``/``NotIn`` the pod's own value (the API server does
    so at admission since ``MatchLabelKeysInPodAffinity``, GA and locked on in v1.33).
    """

    topology_key: str
    selector: Optional[LabelSelector]
    namespaces: Optional[frozenset[str]]

    @classmethod
    def of(cls, term: PodAffinityTerm, name: str, labels: Mapping[str, str]) -> "InterPodTerm":
        """The term of the pod ``name`` with ``labels``."""
        selector = term.label_selector
        if selector is not None:
            selector = _with_label_keys(selector, labels, term.match_label_keys, "In")
            selector = _with_label_keys(selector, labels, term.mismatch_label_keys, "NotIn")
        selector_of_namespaces = term.namespace_selector
        if selector_of_namespaces is not None and selector_of_namespaces.empty:
            namespaces: Optional[frozenset[str]] = None  # {} matches every namespace
        elif selector_of_namespaces is None and not term.namespaces:
            namespaces = frozenset((namespace_of(name),))
        else:  # a selector with requirements: the schema refuses it (placer has no namespace labels)
            namespaces = frozenset(term.namespaces)
        return cls(term.topology_key, selector, namespaces)

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod of this namespace and these labels is one the term means."""
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector is not None and self.selector.matches(labels)


def required_terms(
    affinity: Optional[Affinity], name: str, labels: Mapping[str, str]
) -> tuple[tuple[InterPodTerm, ...], tuple[InterPodTerm, ...]]:
    """A pod's required pod-affinity terms and required anti-affinity terms, resolved."""
    if affinity is None:
        return (), ()
    terms = []
    for rule in (affinity.pod_affinity, affinity.pod_anti_affinity):
        found = () if rule is None else rule.required
        terms.append(tuple(InterPodTerm.of(t, name, labels) for t in found))
    return terms[0], terms[1]


@dataclass(frozen=True)
class SpreadRule:
    """A ``DoNotSchedule`` topology spread constraint of a pod, resolved as
    kube-scheduler's PodTopologySpread resolves it.

    ``selector`` None counts no pod: no ``labelSelector``, or one without requirements
    (kube's ``countPodsMatchSelector`` counts nothing for an empty selector); ``self_match``
    is whether the pod matches its own selector (an empty one matches it).
    """

    topology_key: str
    max_skew: int
    min_domains: int
    selector: Optional[LabelSelector]
    self_match: bool
    honor_affinity: bool
    honor_taints: bool

    @classmethod
    def of(cls, c: TopologySpreadConstraint, labels: Mapping[str, str]) -> "SpreadRule":
        """The constraint of a pod with ``labels``."""
        selector = c.label_selector
        if selector is not None:
            selector = _with_label_keys(selector, labels, c.match_label_keys, "In")
        self_match = selector is not None and selector.matches(labels)
        return cls(
            c.topology_key,
            c.max_skew,
            c.min_domains or 1,
            None if selector is None or selector.empty else selector,
            self_match,
            (c.node_affinity_policy or "Honor") == "Honor",
            (c.node_taints_policy or "Ignore") == "Honor",
        )

    def counts(self, namespace: str, own_namespace: str, labels: Mapping[str, str], terminating: bool) -> bool:
        """Whether a pod counts in this rule of a pod of ``own_namespace``."""
        return (
            not terminating and namespace == own_namespace and self.selector is not None
            and self.selector.matches(labels)
        )


def spread_rules(constraints: tuple[TopologySpreadConstraint, ...], labels: Mapping[str, str]) -> tuple[SpreadRule, ...]:
    """A pod's ``DoNotSchedule`` constraints, resolved (``ScheduleAnyway`` ones only score)."""
    return tuple(SpreadRule.of(c, labels) for c in constraints if c.when_unsatisfiable == "DoNotSchedule")
