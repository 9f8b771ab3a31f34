"""The rules of kube's API validation (``pkg/apis/core/validation``) on a pod's node affinity
and tolerations, which the Structs of :mod:`placer.model.affinity` cannot state alone.

Each check raises :class:`~placer.exceptions.InvalidInputError` with the JSON path below the
field as written (``nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
.nodeSelectorTerms[0].matchExpressions[1].values``); the caller puts the pod's path before it.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from msgspec import Struct

from placer.exceptions import InvalidInputError
from placer.model import Toleration
from placer.model.affinity import (
    NODE_NAME_FIELD, Affinity, NodeSelectorRequirement, NodeSelectorTerm, TopologySpreadConstraint,
)
from placer.schema.errors import nest
from placer.schema.files import decode_object
from placer.schema.interpod import check_namespace_selectors

__all__ = ["PodRules", "pod_rules_from_dict", "check_affinity", "check_node_affinity", "check_toleration"]

_REQUIRED = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"


def check_toleration(t: Toleration) -> None:
    """kube's ``ValidateTolerations``: an empty key needs ``Exists``, ``Exists`` takes no
    value, ``tolerationSeconds`` needs effect ``NoExecute``."""
    if t.operator == "Exists" and t.value:
        raise InvalidInputError("value", f"operator Exists takes no value, got {t.value!r}")
    if t.operator == "Equal" and not t.key:
        raise InvalidInputError("key", "an empty key (every taint) needs operator Exists")
    if t.toleration_seconds is not None and t.effect != "NoExecute":
        raise InvalidInputError(
            "effect", f"tolerationSeconds needs effect NoExecute, got {t.effect!r} (tolerationSeconds bounds an eviction)"
        )


def check_node_affinity(affinity: Optional[Affinity]) -> None:
    """kube's ``validateNodeAffinity``: the required selector has terms; in every term
    (required or preferred) ``In``/``NotIn`` have values, ``Exists``/``DoesNotExist`` none,
    ``Gt``/``Lt`` one, and ``matchFields`` is ``metadata.name`` ``In``/``NotIn`` one name.
    (Preferred weights, 1–100, are bounds of the Struct.)"""
    if affinity is None or affinity.node_affinity is None:
        return
    required = affinity.node_affinity.required
    if required is not None:
        if not required.node_selector_terms:
            raise InvalidInputError(f"{_REQUIRED}.nodeSelectorTerms", "needs at least one node selector term")
        for i, term in enumerate(required.node_selector_terms):
            _term(term, f"{_REQUIRED}.nodeSelectorTerms[{i}]")
    for i, preferred in enumerate(affinity.node_affinity.preferred):
        _term(preferred.preference, f"{_PREFERRED}[{i}].preference")


def check_affinity(affinity: Optional[Affinity]) -> None:
    """Every check of a pod's ``affinity`` (:func:`check_node_affinity`, then
    :func:`placer.schema.interpod.check_namespace_selectors`), paths relative to the pod.

    Raises
    ------
    InvalidInputError
        At the field below ``affinity``.
    """
    try:
        check_node_affinity(affinity)
    except InvalidInputError as e:
        raise nest(e, "affinity") from None
    check_namespace_selectors(affinity)


class PodRules(Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """A pod spec's scheduling rules as Kubernetes writes them: ``affinity`` and
    ``topologySpreadConstraints`` (the :class:`~placer.model.PodRequest` fields of the same
    names)."""

    affinity: Optional[Affinity] = None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()


def pod_rules_from_dict(data: Mapping[str, Any]) -> PodRules:
    """A pod spec's ``affinity`` and ``topologySpreadConstraints`` (plain data, either
    absent), decoded and checked as a placer/v1 pod's (:func:`check_affinity`).

    Raises
    ------
    InvalidInputError
        At the first fault, its path relative to the pod spec (``affinity.nodeAffinity…``,
        ``topologySpreadConstraints[0].maxSkew``).
    """
    rules = decode_object(data, PodRules, {})
    check_affinity(rules.affinity)
    return rules


def _term(term: NodeSelectorTerm, where: str) -> None:
    for j, e in enumerate(term.match_expressions):
        try:
            _expression(e)
        except InvalidInputError as error:
            raise nest(error, f"{where}.matchExpressions[{j}]") from None
    for j, f in enumerate(term.match_fields):
        try:
            _field(f)
        except InvalidInputError as error:
            raise nest(error, f"{where}.matchFields[{j}]") from None


def _expression(e: NodeSelectorRequirement) -> None:
    count = len(e.values)
    if e.operator in ("In", "NotIn") and not count:
        raise InvalidInputError("values", f"operator {e.operator} needs values")
    if e.operator in ("Exists", "DoesNotExist") and count:
        raise InvalidInputError("values", f"operator {e.operator} takes no values, got {count}")
    if e.operator in ("Gt", "Lt") and count != 1:
        raise InvalidInputError("values", f"operator {e.operator} takes exactly one value (an integer), got {count}")


def _field(f: NodeSelectorRequirement) -> None:
    if f.key != NODE_NAME_FIELD:
        raise InvalidInputError("key", f"the one field a node selector term matches is {NODE_NAME_FIELD}, got {f.key!r}")
    if f.operator not in ("In", "NotIn"):
        raise InvalidInputError("operator", f"matchFields takes operator In or NotIn, got {f.operator}")
    if len(f.values) != 1:
        raise InvalidInputError("values", f"matchFields {f.operator} takes exactly one node name, got {len(f.values)}")
