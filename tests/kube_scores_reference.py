"""kube-scheduler's default score plugins in plain Python, one node at a time: the oracle
the numpy version (placer.placement.kube_scores) is compared with.

Written from kube-scheduler v1.36's plugins (noderesources, nodeaffinity, tainttoleration,
interpodaffinity, podtopologyspread) and framework (RunScorePlugins, MaxNodeScore 100),
and from the differences ``docs/placement-rules.md`` ("kube scores") states, not from the
module: Go's integer division and rounding are spelled out where they differ from Python's.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

from placer.model import ClusterSnapshot, PodRequest
from placer.placement.kube_scores import PLUGIN_WEIGHTS

WEIGHTS = PLUGIN_WEIGHTS  # kube's default weights, checked literally in test_weights_are_kube_defaults
CORE = ("cpu", "memory")


def go_div(a: int, b: int) -> int:
    """Go's ``a / b`` for ints (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """Go's ``math.Round`` (half away from zero)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def namespace(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "default"


class Pod:
    """A pod on a node, as the plugins read it."""

    def __init__(self, name, labels, affinity, cpu, memory, gpus, resources, terminating=False):
        self.name, self.labels, self.affinity = name, dict(labels), affinity
        self.cpu, self.memory, self.gpus, self.resources = cpu, memory, gpus, dict(resources)
        self.terminating = terminating


class NodeView:
    def __init__(self, node, pods):
        hw = node.hardware
        self.name = node.name
        self.labels = dict(node.labels)
        self.taints = list(node.taints)
        self.alloc = {"cpu": hw.cpu_milli or 0, "memory": hw.memory_mib or 0,
                      "nvidia.com/gpu": hw.gpus - len(set(node.unhealthy_gpus))}
        for name, amount in node.resources.items():
            self.alloc[name] = amount.allocatable
        self.pods = pods


def views(snapshot: ClusterSnapshot, bound: Sequence[tuple[PodRequest, int]] = ()) -> list[NodeView]:
    out = []
    for i, node in enumerate(snapshot.nodes):
        pods = [Pod(p.name, p.labels, p.affinity, p.cpu_milli, p.memory_mib, len(p.gpus), p.resources, p.terminating)
                for p in node.pods]
        for pod, where in bound:
            if where == i:
                pods.append(Pod(pod.name, pod.labels, pod.affinity, pod.cpu_milli, pod.memory_mib,
                                0 if pod.shared else pod.gpus, pod.resources))
        out.append(NodeView(node, pods))
    return out


def pod_request(pod: PodRequest, resource: str, nonzero: bool) -> int:
    if resource == "cpu":
        return pod.cpu_milli if pod.cpu_milli else (100 if nonzero else 0)
    if resource == "memory":
        return pod.memory_mib if pod.memory_mib else (200 if nonzero else 0)
    if resource == "nvidia.com/gpu":
        return 0 if pod.shared else pod.gpus
    return pod.resources.get(resource, 0)


def node_held(node: NodeView, resource: str, nonzero: bool) -> int:
    total = 0
    for p in node.pods:
        if resource == "cpu":
            total += p.cpu if p.cpu else (100 if nonzero else 0)
        elif resource == "memory":
            total += p.memory if p.memory else (200 if nonzero else 0)
        elif resource == "nvidia.com/gpu":
            total += p.gpus
        else:
            total += p.resources.get(resource, 0) if resource in node.alloc else 0
    return total


def allocatable_request(node, pod, resources, nonzero):
    """(requested with the pod, held, allocatable) per resource, as calculateNodeAllocatableRequest."""
    out = []
    for name, _ in resources:
        asked = pod_request(pod, name, nonzero)
        if asked == 0 and name not in CORE:
            out.append((0, 0, 0))
            continue
        alloc = node.alloc.get(name, 0)
        if alloc == 0:
            out.append((0, 0, 0))
            continue
        held = node_held(node, name, nonzero)
        out.append((held + asked, held, alloc))
    return out


def broken_linear(shape, p):
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return shape[0][1]
            u0, s0 = shape[i - 1]
            return s0 + go_div((s - s0) * (p - u0), u - u0)
    return shape[-1][1]


def fit_score(node, pod, kind, resources, shape) -> int:
    rows = allocatable_request(node, pod, resources, nonzero=True)
    node_score = weight_sum = 0
    scaled = [(u, s * 10) for u, s in shape]
    for (requested, _, alloc), (_, weight) in zip(rows, resources):
        if alloc == 0:
            continue
        if kind == "LeastAllocated":
            score = 0 if requested > alloc else (alloc - requested) * 100 // alloc
        elif kind == "MostAllocated":
            score = min(requested, alloc) * 100 // alloc
        else:
            score = broken_linear(scaled, 100 if requested > alloc else requested * 100 // alloc)
            if score <= 0:
                continue
        node_score += score * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    if kind == "RequestedToCapacityRatio":
        return go_round(node_score / weight_sum)
    return node_score // weight_sum


def balance(used_alloc) -> int:
    fractions = []
    total = 0.0
    for used, alloc in used_alloc:
        if alloc == 0:
            continue
        f = min(used / alloc, 1.0)
        total += f
        fractions.append(f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        s = 0.0
        for f in fractions:
            s = s + (f - mean) * (f - mean)
        std = math.sqrt(s / len(fractions))
    return int((1 - std) * 100)


def balanced_score(node, pod, resources) -> Optional[int]:
    if all(pod_request(pod, name, False) == 0 for name, _ in resources):
        return None
    rows = allocatable_request(node, pod, resources, nonzero=False)
    with_pod = balance([(r, a) for r, _, a in rows])
    without = balance([(h, a) for _, h, a in rows])
    return 50 + go_div(50 + with_pod - without, 2)


def selector_matches(selector, labels) -> bool:
    return selector is not None and selector.matches(labels)


def term_selects(term, owner_name, owner_labels, name, labels) -> bool:
    """Whether the affinity term of pod ``owner`` selects the pod (name, labels)."""
    selector = term.label_selector
    if selector is None:
        return False
    for key in term.match_label_keys:
        if key in owner_labels and labels.get(key) != owner_labels[key]:
            return False
    for key in term.mismatch_label_keys:
        if key in owner_labels and labels.get(key) == owner_labels[key]:
            return False
    if not selector.matches(labels):
        return False
    ns = namespace(name)
    namespaces = set(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces = {namespace(owner_name)}
    if ns in namespaces:
        return True
    return term.namespace_selector is not None and term.namespace_selector.matches({"kubernetes.io/metadata.name": ns})


def preferred(affinity, anti: bool):
    if affinity is None:
        return ()
    rules = affinity.pod_anti_affinity if anti else affinity.pod_affinity
    return () if rules is None else rules.preferred


def inter_pod_raw(nodes, pod) -> Optional[dict[str, dict[str, int]]]:
    mine = bool(preferred(pod.affinity, False) or preferred(pod.affinity, True))
    topo: dict[str, dict[str, int]] = {}

    def bump(key, node_labels, amount):
        if key in node_labels:
            topo.setdefault(key, {})
            topo[key][node_labels[key]] = topo[key].get(node_labels[key], 0) + amount

    for node in nodes:
        if not node.labels:
            continue
        for other in node.pods:
            a = other.affinity
            has = a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)
            if not mine and not has:
                continue
            for sign, anti in ((1, False), (-1, True)):
                for w in preferred(pod.affinity, anti):
                    if term_selects(w.pod_affinity_term, pod.name, pod.labels, other.name, other.labels):
                        bump(w.pod_affinity_term.topology_key, node.labels, sign * w.weight)
            if a is not None and a.pod_affinity is not None:
                for t in a.pod_affinity.required:
                    if term_selects(t, other.name, other.labels, pod.name, pod.labels):
                        bump(t.topology_key, node.labels, 1)
            for sign, anti in ((1, False), (-1, True)):
                for w in preferred(a, anti):
                    if term_selects(w.pod_affinity_term, other.name, other.labels, pod.name, pod.labels):
                        bump(w.pod_affinity_term.topology_key, node.labels, sign * w.weight)
    return topo or None


def required_node_match(node, pod) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    na = pod.affinity.node_affinity if pod.affinity is not None else None
    if na is None or na.required is None:
        return True
    return na.required.matches(node.labels, node.name)


def spread_selector_matches(constraint, pod, labels) -> bool:
    selector = constraint.label_selector
    if selector is None or selector.empty:
        return False
    for key in constraint.match_label_keys:
        if key in pod.labels and labels.get(key) != pod.labels[key]:
            return False
    return selector.matches(labels)


def count_on(node, constraint, pod) -> int:
    return sum(
        1 for p in node.pods
        if not p.terminating and namespace(p.name) == namespace(pod.name) and spread_selector_matches(constraint, pod, p.labels)
    )


def spread(nodes, pod, feasible) -> Optional[dict[int, int]]:
    """Normalised PodTopologySpread scores of the feasible nodes; None when skipped."""
    cs = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]
    if not cs:
        return None
    keys = [c.topology_key for c in cs]
    ignored = {i for i in feasible if not all(k in nodes[i].labels for k in keys)}
    domains = [dict() for _ in cs]
    for i in feasible:
        if i in ignored:
            continue
        for c, key in enumerate(keys):
            if key != "kubernetes.io/hostname":
                domains[c].setdefault(nodes[i].labels[key], 0)
    weights = []
    for c, key in enumerate(keys):
        size = len(feasible) - len(ignored) if key == "kubernetes.io/hostname" else len(domains[c])
        weights.append(math.log(size + 2))
    for node in nodes:
        if not all(k in node.labels for k in keys):
            continue
        for c, constraint in enumerate(cs):
            if constraint.node_affinity_policy != "Ignore" and not required_node_match(node, pod):
                continue
            if constraint.node_taints_policy == "Honor" and any(
                t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in pod.tolerations)
                for t in node.taints
            ):
                continue
            value = node.labels[keys[c]]
            if keys[c] == "kubernetes.io/hostname" or value not in domains[c]:
                continue
            domains[c][value] += count_on(node, constraint, pod)
    raw = {}
    for i in feasible:
        if i in ignored:
            continue
        s = 0.0
        for c, constraint in enumerate(cs):
            key = keys[c]
            cnt = count_on(nodes[i], constraint, pod) if key == "kubernetes.io/hostname" else domains[c][nodes[i].labels[key]]
            s += cnt * weights[c] + (constraint.max_skew - 1)
        raw[i] = go_round(s)
    out = {i: 0 for i in ignored}
    top = max(raw.values(), default=0)
    low = min(raw.values(), default=0)
    for i, s in raw.items():
        out[i] = 100 if top == 0 else 100 * (top + low - s) // top
    return out


def kube_scores(
    snapshot: ClusterSnapshot, pod: PodRequest, feasible: Sequence[int], kind: str = "LeastAllocated",
    resources=(("cpu", 1), ("memory", 1)), shape=(), balanced=(("cpu", 1), ("memory", 1)),
    bound: Sequence[tuple[PodRequest, int]] = (),
) -> dict[int, dict[str, int]]:
    """Per feasible node index, each plugin's normalised score."""
    nodes = views(snapshot, bound)
    out: dict[int, dict[str, int]] = {i: {} for i in feasible}
    # TaintToleration
    tolerations = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
    raw = {i: sum(1 for t in nodes[i].taints if t.effect == "PreferNoSchedule" and not any(x.tolerates(t) for x in tolerations))
           for i in feasible}
    top = max(raw.values(), default=0)
    for i in feasible:
        out[i]["TaintToleration"] = 100 if top == 0 else 100 - 100 * raw[i] // top
    # NodeAffinity
    na = pod.affinity.node_affinity if pod.affinity is not None else None
    terms = [t for t in (na.preferred if na else ()) if not t.preference.empty]
    raw = {i: sum(t.weight for t in terms if t.preference.matches(nodes[i].labels, nodes[i].name)) for i in feasible}
    top = max(raw.values(), default=0)
    for i in feasible:
        out[i]["NodeAffinity"] = 0 if top == 0 else 100 * raw[i] // top
    # NodeResourcesFit, BalancedAllocation
    for i in feasible:
        out[i]["NodeResourcesFit"] = fit_score(nodes[i], pod, kind, resources, shape)
        b = balanced_score(nodes[i], pod, balanced)
        out[i]["NodeResourcesBalancedAllocation"] = 0 if b is None else b
    # PodTopologySpread
    s = spread(nodes, pod, list(feasible))
    for i in feasible:
        out[i]["PodTopologySpread"] = 0 if s is None else s[i]
    # InterPodAffinity
    topo = inter_pod_raw(nodes, pod)
    raw = {}
    for i in feasible:
        raw[i] = 0
        for key, values in (topo or {}).items():
            if key in nodes[i].labels:
                raw[i] += values.get(nodes[i].labels[key], 0)
    if topo is None or not feasible:
        for i in feasible:
            out[i]["InterPodAffinity"] = 0
    else:
        low, high = min(raw.values()), max(raw.values())
        for i in feasible:
            out[i]["InterPodAffinity"] = int(100 * ((raw[i] - low) / (high - low))) if high > low else 0
    return out


def total(scores: Mapping[str, int]) -> int:
    return sum(WEIGHTS[name] * value for name, value in scores.items())
