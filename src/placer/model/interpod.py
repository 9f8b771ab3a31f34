"""What the inter-pod rules read of nodes and pods (``docs/placement-rules.md``, "Inter-pod
rules"): a node's topology domains, the node inclusion policies of a spread constraint,
and whether a pod has rules at all. The kernel's compiled relations
(:mod:`placer.kernel.relations`), the checker and ``explain`` read them alike.
"""
from __future__ import annotations

from typing import Any, Optional

from placer.model import Node, PodRequest, first_untolerated_taint
from placer.model.affinity import SpreadRule, node_affinity_matches

__all__ = ["HOSTNAME", "topology_value", "node_included", "has_relations", "has_required_anti_affinity"]

HOSTNAME = "kubernetes.io/hostname"
"""The topology key of one node; a node without the label has it as its name (the kubelet
sets it on every node)."""


def topology_value(node: Node, key: str) -> Optional[str]:
    """The node's domain of topology key ``key``; None when it has no such label."""
    value = node.labels.get(key)
    return node.name if value is None and key == HOSTNAME else value


def node_included(node: Node, pod: PodRequest, rule: SpreadRule) -> bool:
    """Whether ``node`` passes the node inclusion policies of the pod's spread ``rule``:
    ``Honor`` node affinity (:func:`placer.model.affinity.node_affinity_matches`), ``Honor``
    taints (no ``NoSchedule``/``NoExecute`` taint the pod does not tolerate)."""
    if rule.honor_affinity and not node_affinity_matches(pod.node_selector, pod.affinity, node.labels, node.name):
        return False
    return not rule.honor_taints or first_untolerated_taint(node.taints, pod.tolerations) is None


def has_relations(pod: PodRequest) -> bool:
    """Whether the pod has a rule that depends on other pods: required pod affinity or
    anti-affinity, or a ``DoNotSchedule`` spread constraint."""
    a = pod.affinity
    if a is not None and ((a.pod_affinity is not None and a.pod_affinity.required) or has_required_anti_affinity(pod)):
        return True
    return any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.topology_spread_constraints)


def has_required_anti_affinity(pod: Any) -> bool:
    """Whether a pod (running or to place) has required anti-affinity terms, which keep the
    pods they match away from it (kube's symmetry)."""
    a = pod.affinity
    return a is not None and a.pod_anti_affinity is not None and bool(a.pod_anti_affinity.required)
