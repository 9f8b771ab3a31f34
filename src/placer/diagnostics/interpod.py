"""Independent checking of the inter-pod rules of a placement (kube-scheduler's
PodTopologySpread and InterPodAffinity filters), for :func:`placer.diagnostics.check.check_placement`.

:class:`InterPodReplay` replays assignments in order over the pods already running: each
pod must pass its spread constraints, its required affinity and anti-affinity, and the
required anti-affinity of every pod before it, among the pods before it. It counts from the
documents each time (no kernel state), by the rules of ``docs/placement-rules.md``.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from placer.model import Node, PodRequest
from placer.model import reasons as wording
from placer.model.affinity import namespace_of, required_terms, spread_rules
from placer.model.interpod import node_included, topology_value

__all__ = ["InterPodReplay"]

class InterPodReplay:
    """The pods on the nodes, and whether one more pod may go to a node under the rules.

    Parameters
    ----------
    nodes : iterable of Node
        The cluster's nodes, with the pods running on them (evicted ones left out).
    """

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = list(nodes)
        self.on: list[tuple[Node, Any]] = [(n, p) for n in self.nodes for p in n.pods]

    def add(self, node: Node, pod: Any) -> None:
        """``pod`` runs on ``node`` from now on."""
        self.on.append((node, pod))

    def reason(self, pod: PodRequest, node: Node) -> Optional[str]:
        """kube-scheduler's reason ``node`` turns ``pod`` away for its inter-pod rules; None
        when it passes them."""
        ns = namespace_of(pod.name)
        rules = spread_rules(pod.topology_spread_constraints, pod.labels)
        for rule in rules:
            here = topology_value(node, rule.topology_key)
            if here is None:
                return wording.SPREAD_MISSING_LABEL
            counts: dict[str, int] = {}
            for n in self.nodes:
                if all(topology_value(n, r.topology_key) is not None for r in rules) and node_included(n, pod, rule):
                    counts.setdefault(topology_value(n, rule.topology_key), 0)  # type: ignore[arg-type]
            for n, other in self.on:
                value = topology_value(n, rule.topology_key)
                if value in counts and node_included(n, pod, rule) and all(
                    topology_value(n, r.topology_key) is not None for r in rules
                ) and rule.counts(namespace_of(other.name), ns, other.labels, getattr(other, "terminating", False)):
                    counts[value] += 1  # type: ignore[index]
            least = min(counts.values()) if len(counts) >= rule.min_domains else 0
            if counts.get(here, 0) + int(rule.self_match) - least > rule.max_skew:
                return wording.SPREAD
        affinity, anti = required_terms(pod.affinity, pod.name, pod.labels)
        if affinity:
            matching = [(n, o) for n, o in self.on if all(t.matches(namespace_of(o.name), o.labels) for t in affinity)]
            values = [topology_value(node, t.topology_key) for t in affinity]
            if any(v is None for v in values):
                return wording.POD_AFFINITY
            found = all(any(topology_value(n, t.topology_key) == v for n, _ in matching) for t, v in zip(affinity, values))
            if not found:
                none_yet = not any(topology_value(n, t.topology_key) is not None for n, _ in matching for t in affinity)
                if not (none_yet and all(t.matches(ns, pod.labels) for t in affinity)):
                    return wording.POD_AFFINITY
        for term in anti:
            here = topology_value(node, term.topology_key)
            if here is not None and any(
                topology_value(n, term.topology_key) == here and term.matches(namespace_of(o.name), o.labels)
                for n, o in self.on
            ):
                return wording.POD_ANTI_AFFINITY
        for n, other in self.on:
            for term in required_terms(other.affinity, other.name, other.labels)[1]:
                here = topology_value(node, term.topology_key)
                if here is not None and topology_value(n, term.topology_key) == here and term.matches(ns, pod.labels):
                    return wording.EXISTING_ANTI_AFFINITY
        return None
