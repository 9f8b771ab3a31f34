"""The inter-pod rules of a batch compiled for the kernel (kube-scheduler's PodTopologySpread
and InterPodAffinity filters).

:func:`compile_relations` turns the rules of a batch's pods and the pods already on the
nodes (:class:`Occupants`) into a :class:`placer.kernel._core.Relations`: per topology key
the domain of each node; per *constraint* (one spread rule, one required affinity term,
one anti-affinity term of the pod, one anti-affinity term of a pod already placed that the
pod matches) a count per domain; per pod the constraints it must pass, in kube's filter
order, and the constraints whose counts it adds to once placed. The kernel keeps the
counts and the nodes each constraint lets through current as it places pods.

The rules are kube-scheduler v1.36's (``docs/placement-rules.md``, "Inter-pod rules"):

* affinity: every term's topology key on the node and a pod matching *all* the terms in
  the node's domain of each, or, while no pod matches, the pod matching its own terms;
* anti-affinity: no pod matching a term in the node's domain of the term's key;
* existing pods' anti-affinity: no pod already placed whose term matches the pod in the
  node's domain of that term's key (terminating pods count in all three);
* spread: the node has the key, and the count of its domain + 1 (when the pod matches its
  own selector) - the least count over the domains (0 below ``minDomains`` domains) is at
  most ``maxSkew``; only nodes that have every key of the pod's constraints and pass its
  node inclusion policies count (and make domains), only pods of its namespace that are
  not terminating.

A node without the ``kubernetes.io/hostname`` label has it as its name
(:func:`placer.model.interpod.topology_value`).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from placer.kernel._core import Relations
from placer.kernel.pack import BIG, FLAG, INT, MASK, PackedCluster, alike_runs, node_bitset
from placer.model import PodRequest, RunningPod
from placer.model.affinity import InterPodTerm, namespace_of, required_terms, spread_rules
from placer.model.interpod import has_relations, has_required_anti_affinity
from placer.model.ports import WILDCARD_IP, HostPort, any_conflict
from placer.model.roles import canonical

__all__ = ["REASON_CODES", "Occupants", "compile_relations"]

# the kernel's counters (_core.pxd R_SPREAD_LABEL ..): model.reasons.RELATIONAL_REASONS in order
_R_SPREAD, _R_AFFINITY, _R_ANTI, _R_EXISTING = 6, 7, 8, 9
REASON_CODES = range(5, 10)
_ZERO, _AFFINITY, _SPREAD = 0, 1, 2  # REL_* of _core.pxd


_RULE_FIELDS = attrgetter("labels", "affinity", "topology_spread_constraints", "node_selector", "tolerations")
_NAME = attrgetter("name")


def _anti_terms(pod: Any) -> tuple[InterPodTerm, ...]:
    return required_terms(pod.affinity, pod.name, pod.labels)[1]


@dataclass
class Occupants:
    """The pods on the nodes now, for the inter-pod rules: name -> (node, pod), the pod a
    :class:`~placer.model.RunningPod` or a :class:`~placer.model.PodRequest` placed here.

    ``anti_holders`` counts those with required anti-affinity (their rules apply to every
    pod placed after them); ``port_holders`` maps the name of each that holds host ports
    to (node, its ports), and ``held_ports`` counts per (protocol, port), per host IP, the
    pods holding it on each node, for the NodePorts filter (:meth:`ports_blocked`).
    """

    pods: dict[str, tuple[int, Any]] = field(default_factory=dict)
    anti_holders: int = 0
    port_holders: dict[str, tuple[int, tuple[HostPort, ...]]] = field(default_factory=dict)
    held_ports: dict[tuple[str, int], dict[str, Counter[int]]] = field(default_factory=dict)

    @classmethod
    def of(cls, holdings: Mapping[str, tuple[int, RunningPod]]) -> "Occupants":
        """The running pods of a snapshot (``PackedCluster.holdings``)."""
        out = cls()
        for node, pod in holdings.values():
            out.add(node, pod)
        return out

    def add(self, node: int, pod: Any) -> None:
        """``pod`` is on ``node`` from now on."""
        if pod.name in self.pods:
            self.remove(pod.name)
        self.pods[pod.name] = (node, pod)
        if has_required_anti_affinity(pod):
            self.anti_holders += 1
        if pod.host_ports:
            self.port_holders[pod.name] = (node, pod.host_ports)
            for port in pod.host_ports:
                by_ip = self.held_ports.setdefault((port.protocol, port.host_port), {})
                by_ip.setdefault(port.ip, Counter())[node] += 1

    def remove(self, name: str) -> None:
        """The pod of this name is no longer on any node."""
        found = self.pods.pop(name, None)
        if found is not None and has_required_anti_affinity(found[1]):
            self.anti_holders -= 1
        held = self.port_holders.pop(name, None)
        if held is None:
            return
        node, ports = held
        for port in ports:
            by_ip = self.held_ports[(port.protocol, port.host_port)]
            on = by_ip[port.ip]
            on[node] -= 1
            if not on[node]:
                del on[node]
                if not on:
                    del by_ip[port.ip]
                    if not by_ip:
                        del self.held_ports[(port.protocol, port.host_port)]

    def ports_blocked(self, ports: Sequence[HostPort], n_nodes: int) -> np.ndarray:
        """The nodes (bool per node) where a pod of host ports ``ports`` fails NodePorts now:
        a pod there holds one of its (protocol, port) on the same host IP or the wildcard,
        or on any IP when the pod's is the wildcard."""
        blocked = np.zeros(n_nodes, dtype=bool)
        for port in ports:
            by_ip = self.held_ports.get((port.protocol, port.host_port))
            if not by_ip:
                continue
            ip = port.ip
            clashing = by_ip.values() if ip == WILDCARD_IP else (by_ip.get(ip, ()), by_ip.get(WILDCARD_IP, ()))
            for nodes in clashing:
                if nodes:
                    blocked[np.fromiter(nodes, dtype=np.intp, count=len(nodes))] = True
        return blocked

    def port_holders_on(self, node: int, ports: Sequence[HostPort]) -> list[str]:
        """The pods on ``node`` holding a port that one of ``ports`` conflicts with."""
        if not ports:
            return []
        return [name for name, (at, held) in self.port_holders.items() if at == node and any_conflict(ports, held)]


@dataclass(frozen=True)
class _Layout:
    """The domains of one topology key: each node's (-1: none), how many, the nodes of
    each domain (``members[start[d]:start[d + 1]]``), the nodes with one as a bitset."""

    domain_of: np.ndarray
    count: int
    members: np.ndarray
    start: np.ndarray
    has_key: np.ndarray

    @classmethod
    def of(cls, packed: PackedCluster, key: str) -> "_Layout":
        """The layout of ``key`` on ``packed``'s nodes (:meth:`PackedCluster.topology_column`),
        cached per cluster."""
        found = packed.topology_domains.get(key)
        if found is None:
            domain_of, count = packed.topology_column(key)
            on = np.flatnonzero(domain_of >= 0)
            start = np.zeros(count + 1, dtype=INT)
            start[1:] = np.cumsum(np.bincount(domain_of[on], minlength=count))
            found = packed.topology_domains[key] = cls(
                domain_of.astype(INT, copy=False), count, on[np.argsort(domain_of[on], kind="stable")].astype(INT),
                start, node_bitset(domain_of >= 0, packed.n_words),
            )
        return found


class _Domains:
    """The topology keys of a batch's rules, numbered, and their layouts."""

    def __init__(self, packed: PackedCluster) -> None:
        self._packed = packed
        self.keys: list[str] = []
        self.index: dict[str, int] = {}

    def key(self, key: str) -> int:
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.keys)
            self.keys.append(key)
        return found

    def of(self, key: str) -> _Layout:
        return _Layout.of(self._packed, key)


@dataclass
class _Constraint:
    kind: int
    key: int
    reason: int
    counted: np.ndarray  # bool per node
    group: int = -1
    max_skew: int = 0
    min_domains: int = 1
    self_match: int = 0
    adds: Any = None  # (namespace, labels, pod) -> bool: whether a pod counts


class _Compiler:
    def __init__(self, packed: PackedCluster) -> None:
        self.packed = packed
        self.domains = _Domains(packed)
        self.constraints: list[_Constraint] = []
        self.ids: dict[Any, int] = {}
        self.groups = 0

    def constraint(self, ident: Any, make: Any) -> int:
        found = self.ids.get(ident)
        if found is None:
            found = self.ids[ident] = len(self.constraints)
            self.constraints.append(make())
        return found

    def has_key(self, key: str) -> np.ndarray:
        return self.domains.of(key).domain_of >= 0

    def term_constraint(self, kind: str, term: InterPodTerm, adds: Any) -> int:
        reason = _R_ANTI if kind == "anti" else _R_EXISTING
        return self.constraint(
            (kind, _term_key(term)),
            lambda: _Constraint(_ZERO, self.domains.key(term.topology_key), reason, self.has_key(term.topology_key),
                                adds=adds),
        )


def _runs_of_alike(pods: Sequence[PodRequest]) -> tuple[list[PodRequest], list[int]]:
    """The first pod of each run of consecutive pods alike for the rules (one namespace, the
    same labels and rules), and the length of each run."""
    fields: list[Any] = list(map(_RULE_FIELDS, pods))
    names = list(map(_NAME, pods))
    if any(map(str.__contains__, names, repeat("/"))):  # else every pod is of the default namespace
        fields = list(zip(map(namespace_of, names), fields))
    runs = alike_runs(fields)
    return [pods[a] for a in runs[:-1]], [b - a for a, b in zip(runs, runs[1:])]


def _extend(start: list[int], times: int, con: list[int], into: list[int], flags: list[int] = (),  # type: ignore[assignment]
            flags_into: list[int] | None = None) -> None:
    """Append ``times`` pods' entries ``con`` (and their ``flags``) to a CSR list."""
    if not con:
        start.extend([start[-1]] * times)
        return
    into.extend(con * times)
    if flags_into is not None:
        flags_into.extend(list(flags) * times)
    start.extend(range(start[-1] + len(con), start[-1] + len(con) * times + 1, len(con)))


def _by_identity(pods: Sequence[PodRequest], relational: Sequence[bool]) -> list[tuple[InterPodTerm, ...]]:
    """Each relational pod's resolved anti-affinity terms (by the identity of its fields)."""
    seen: dict[tuple, tuple[InterPodTerm, ...]] = {}
    out = []
    for pod, rules in zip(pods, relational):
        if not rules:
            out.append(())
            continue
        sig = (namespace_of(pod.name), id(pod.labels), id(pod.affinity))
        found = seen.get(sig)
        if found is None:
            found = seen[sig] = _anti_terms(pod)
        out.append(found)
    return out


def _term_key(term: InterPodTerm) -> tuple:
    spaces = None if term.namespaces is None else tuple(sorted(term.namespaces))
    return term.topology_key, canonical(term.selector), spaces


def compile_relations(packed: PackedCluster, pods: Sequence[PodRequest], occupants: Occupants) -> Relations | None:
    """The kernel's relations of ``pods`` placed in this order on ``packed`` after
    ``occupants``; None when no pod of the batch has a rule and no pod placed has required
    anti-affinity."""
    # pods of one entry's replicas share their field objects: one pod stands for each run of
    # such pods, and signatures go by identity (equal rules of distinct objects still share
    # their constraints, whose keys are by value)
    firsts, lengths = _runs_of_alike(pods)
    relational = [has_relations(p) for p in firsts]
    if not any(relational) and not occupants.anti_holders:
        return None
    batch_anti = _by_identity(firsts, relational)
    c = _Compiler(packed)
    # the anti-affinity terms of every pod placed before or in the batch, which repel the pods they match
    carried: dict[tuple, InterPodTerm] = {}
    for _, pod in occupants.pods.values():
        if has_required_anti_affinity(pod):
            for term in _anti_terms(pod):
                carried.setdefault(_term_key(term), term)
    for terms in {id(t): t for t in batch_anti}.values():
        for term in terms:
            carried.setdefault(_term_key(term), term)

    need_start = [0]
    need_con: list[int] = []
    need_self: list[int] = []
    needs_of: dict[tuple, tuple[list[int], list[int]]] = {}
    for j, pod in enumerate(firsts):
        namespace = namespace_of(pod.name)
        sig = (namespace, id(pod.labels), id(pod.affinity), id(pod.topology_spread_constraints),
               id(pod.node_selector), id(pod.tolerations), relational[j])
        found = needs_of.get(sig)
        if found is None:
            found = needs_of[sig] = _needs(c, pod, namespace, carried if carried else {}, relational[j])
        _extend(need_start, lengths[j], found[0], need_con, found[1], need_self)
    if not need_con:
        return None

    # what each pod adds to: the constraints that count it
    add_start = [0]
    add_con: list[int] = []
    adds_of: dict[tuple, list[int]] = {}

    def adds(pod: Any) -> list[int]:
        namespace = namespace_of(pod.name)
        terminating = bool(getattr(pod, "terminating", False))
        sig = (namespace, id(pod.labels), id(pod.affinity), terminating)
        got = adds_of.get(sig)
        if got is None:
            carries = {_term_key(t) for t in _anti_terms(pod)}
            got = adds_of[sig] = [
                k for k, con in enumerate(c.constraints) if con.adds(namespace, pod.labels, terminating, carries)
            ]
        return got

    for pod, length in zip(firsts, lengths):
        _extend(add_start, length, adds(pod), add_con)

    n_nodes, n_words = packed.n_nodes, packed.n_words
    keys = c.domains.keys
    doms = [c.domains.of(k) for k in keys]
    key_dom_base = np.zeros(len(keys) + 1, dtype=INT)
    key_dom_base[1:] = np.cumsum([d.count for d in doms])
    members = [np.zeros(0, dtype=INT), *(d.members for d in doms)]
    dom_nodes = np.concatenate(members).astype(INT, copy=False)
    # each key's domain starts, shifted past the nodes of the keys before
    shifts = np.cumsum([len(m) for m in members[:-1]])
    starts = [np.zeros(1, dtype=INT), *(d.start[1:] + shift for d, shift in zip(doms, shifts))]
    dom_node_start = np.concatenate(starts).astype(INT, copy=False)
    dom_of = np.concatenate([d.domain_of for d in doms]) if keys else np.zeros(0, dtype=INT)
    has_key = np.concatenate([d.has_key for d in doms]) if keys else np.zeros(0, dtype=MASK)

    n_cons = len(c.constraints)
    sizes = [doms[con.key].count for con in c.constraints]
    con_off = np.zeros(n_cons, dtype=INT)
    if n_cons:
        con_off[1:] = np.cumsum(sizes[:-1])
    cells = int(sum(sizes))
    count = np.zeros(cells, dtype=INT)
    in_map = np.zeros(cells, dtype=FLAG)
    con_domains = np.zeros(n_cons, dtype=INT)
    for k, con in enumerate(c.constraints):
        if con.kind == _SPREAD:
            d = doms[con.key].domain_of
            hit = np.unique(d[con.counted & (d >= 0)])
            in_map[con_off[k] + hit] = 1
            con_domains[k] = len(hit)
        else:
            in_map[con_off[k]: con_off[k] + sizes[k]] = 1
    group_total = np.zeros(max(c.groups, 1), dtype=BIG)
    for node, pod in occupants.pods.values():
        for k in adds(pod):
            con = c.constraints[k]
            dom = doms[con.key].domain_of[node]
            if con.counted[node] and dom >= 0:
                count[con_off[k] + dom] += 1
                if con.group >= 0:
                    group_total[con.group] += 1

    def column(values: Iterable[int], dtype: Any = INT) -> np.ndarray:
        return np.fromiter(values, dtype=dtype)

    cons = c.constraints
    arrays = {
        "dom_of": dom_of,
        "key_dom_base": key_dom_base,
        "dom_node_start": dom_node_start,
        "dom_nodes": dom_nodes,
        "has_key": has_key,
        "con_key": column(x.key for x in cons),
        "con_kind": column(x.kind for x in cons),
        "con_reason": column(x.reason for x in cons),
        "con_off": con_off,
        "con_group": column(x.group for x in cons),
        "con_max_skew": column(x.max_skew for x in cons),
        "con_min_domains": column(x.min_domains for x in cons),
        "con_self": column(x.self_match for x in cons),
        "con_counted": np.concatenate([node_bitset(x.counted, n_words) for x in cons]) if cons else np.zeros(0, dtype=MASK),
        "in_map": in_map,
        "count": count,
        "con_pass": np.zeros(n_cons * n_words, dtype=MASK),
        "con_min": np.zeros(n_cons, dtype=INT),
        "con_domains": con_domains,
        "group_total": group_total,
        "need_start": np.array(need_start, dtype=INT),
        "need_con": np.array(need_con, dtype=INT),
        "need_self": np.array(need_self, dtype=FLAG),
        "add_start": np.array(add_start, dtype=INT),
        "add_con": np.array(add_con, dtype=INT),
        "scratch": np.zeros(n_words, dtype=MASK),
    }
    return Relations(arrays, n_nodes, n_words)


def _needs(
    c: _Compiler, pod: PodRequest, namespace: str, carried: Mapping[tuple, InterPodTerm], relational: bool
) -> tuple[list[int], list[int]]:
    """The constraints one pod must pass, in kube's order (spread, affinity, anti-affinity,
    existing pods' anti-affinity), and per entry whether the first-pod rule applies."""
    con: list[int] = []
    self_rule: list[int] = []
    labels = pod.labels
    if relational:
        rules = spread_rules(pod.topology_spread_constraints, labels)
        all_keys = [r.topology_key for r in rules]
        for rule in rules:
            counted = np.ones(c.packed.n_nodes, dtype=bool)
            for key in all_keys:
                counted &= c.has_key(key)
            if rule.honor_affinity:
                counted &= c.packed.node_affinity_nodes(pod)
            if rule.honor_taints:
                counted &= c.packed.tolerating_nodes(pod.tolerations)
            ident = ("spread", namespace, rule.topology_key, rule.max_skew, rule.min_domains, canonical(rule.selector),
                     rule.self_match, counted.tobytes())
            con.append(c.constraint(ident, lambda rule=rule, counted=counted: _Constraint(
                _SPREAD, c.domains.key(rule.topology_key), _R_SPREAD, counted, max_skew=rule.max_skew,
                min_domains=rule.min_domains, self_match=int(rule.self_match),
                adds=lambda ns, lab, term, carries, rule=rule: rule.counts(ns, namespace, lab, term),
            )))
            self_rule.append(0)
        affinity, anti = required_terms(pod.affinity, pod.name, labels)
        if affinity:
            ident_terms = tuple(_term_key(t) for t in affinity)
            group = c.ids.get(("group", ident_terms))
            if group is None:
                group = c.ids[("group", ident_terms)] = c.groups
                c.groups += 1
            matches_own = all(t.matches(namespace, labels) for t in affinity)

            def all_match(ns: str, lab: Mapping[str, str], terminating: bool, carries: Any, terms: Any = affinity) -> bool:
                return all(t.matches(ns, lab) for t in terms)

            for i, term in enumerate(affinity):
                con.append(c.constraint(("affinity", ident_terms, i), lambda term=term: _Constraint(
                    _AFFINITY, c.domains.key(term.topology_key), _R_AFFINITY, c.has_key(term.topology_key),
                    group=group, adds=all_match,
                )))
                self_rule.append(int(matches_own))
        for term in anti:
            con.append(c.term_constraint(
                "anti", term, lambda ns, lab, terminating, carries, term=term: term.matches(ns, lab)
            ))
            self_rule.append(0)
    for key, term in carried.items():
        if term.matches(namespace, labels):
            con.append(c.term_constraint("existing", term, lambda ns, lab, terminating, carries, key=key: key in carries))
            self_rule.append(0)
    return con, self_rule
