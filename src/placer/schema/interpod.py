"""Checks of the inter-pod rules of a pod (``affinity.podAffinity``, ``podAntiAffinity``).

A term's non-empty ``namespaceSelector`` selects namespaces by *their* labels, which no
placer/v1 document carries: such a term is refused here rather than read as matching no
namespace (kube-scheduler would match the namespaces it selects). An empty selector
(``{}``: every namespace) and ``namespaces`` lists are read as kube-scheduler reads them.
"""
from __future__ import annotations

from typing import Optional

from placer.exceptions import InvalidInputError
from placer.model.affinity import Affinity

__all__ = ["check_namespace_selectors"]


def check_namespace_selectors(affinity: Optional[Affinity]) -> None:
    """Refuse a pod (anti-)affinity term whose ``namespaceSelector`` has requirements.

    Raises
    ------
    InvalidInputError
        At the term's ``namespaceSelector``, relative to the pod.
    """
    if affinity is None:
        return
    for name, rule in (("podAffinity", affinity.pod_affinity), ("podAntiAffinity", affinity.pod_anti_affinity)):
        if rule is None:
            continue
        lists = (
            ("requiredDuringSchedulingIgnoredDuringExecution", rule.required),
            ("preferredDuringSchedulingIgnoredDuringExecution", tuple(w.pod_affinity_term for w in rule.preferred)),
        )
        for field, terms in lists:
            for j, term in enumerate(terms):
                if term.namespace_selector is not None and not term.namespace_selector.empty:
                    raise InvalidInputError(
                        f"affinity.{name}.{field}[{j}].namespaceSelector",
                        "a namespaceSelector with requirements selects namespaces by their labels, which "
                        "placer does not have: list the namespaces in `namespaces` instead (an empty "
                        "selector {} means every namespace)",
                    )
