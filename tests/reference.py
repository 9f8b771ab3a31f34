"""Pure-Python reference placer: docs/placement-rules.md read literally.

This is the oracle the compiled kernel is compared against, decision for decision. It is
written for clarity, not speed: plain lists and dicts, and a full scan over every node
for every pod.
"""
from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence, Union

from placer import policies
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import target_workload
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, Demand, PackingGuide, PackingLearner, packing_guide
from placer.model.topology import PCIE_POINTS
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    Node,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    Taint,
    Unschedulable,
)
from placer.model import replace
from placer.model.affinity import LabelSelector, LabelSelectorRequirement

__all__ = [
    "MASK64",
    "GREEDY_POLICIES",
    "IMPLEMENTED_POLICIES",
    "splitmix64_stream",
    "SplitMix64",
    "domain_of",
    "reason_line",
    "ReferenceCluster",
]

MASK64 = (1 << 64) - 1
# The policies to run: the registry's list. What each one does is the reference's own reading
# of docs/placement-rules.md (IMPLEMENTED_POLICIES, below); tests/test_registry.py fails when
# the registry has a policy the reference does not implement.
GREEDY_POLICIES = policies.kernel_names()  # the kube policies have their own oracle: kube_scores_reference.py
RANKED_POLICIES = ("fgd", "dot-product", "gpu-packing", "gpu-clustering", "fgd-pack")  # ties: node order

UNSCHEDULABLE = "node(s) were unschedulable"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"
NODE_NAME = "node(s) didn't match the requested node name"
UNTOLERATED = "node(s) had untolerated taint(s)"
OUTSIDE_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
TERMS_CONFLICT = "pod affinity terms conflict"
GPU_MODEL = "node(s) didn't match Pod's GPU model"
INSUFFICIENT_GPU = "Insufficient nvidia.com/gpu"
INSUFFICIENT_GPU_MEMORY = "Insufficient GPU memory"
INSUFFICIENT_CPU = "Insufficient cpu"
INSUFFICIENT_MEMORY = "Insufficient memory"
TOO_MANY_PODS = "Too many pods"
INSUFFICIENT_NICS = "Insufficient NICs"
NO_FREE_PORTS = "node(s) didn't have free ports for the requested pod ports"


def splitmix64_stream(seed: int) -> Iterator[int]:
    """Yield the SplitMix64 outputs for ``seed`` (taken mod 2**64), forever."""
    s = seed & MASK64
    while True:
        s = (s + 0x9E3779B97F4A7C15) & MASK64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        yield z ^ (z >> 31)


class SplitMix64:
    """The ``pick(count)`` stream of the rules: one SplitMix64 draw mod ``count``."""

    def __init__(self, seed: int) -> None:
        self._stream = splitmix64_stream(seed)
        self.draws = 0

    def pick(self, count: int) -> int:
        """Return the next draw modulo ``count`` (``count`` >= 1)."""
        self.draws += 1
        return next(self._stream) % count


def domain_of(node: Node, level: str, levels: Sequence[str]) -> tuple[str, ...] | None:
    """The domain path of ``node`` at ``level``, or None when the node is in no domain.

    The path holds the node's values for every level from the outermost down to
    ``level``; a node missing any of them is in no domain of ``level``. The level
    ``node`` makes every node a domain of its own.
    """
    if level == "node":
        return (node.name,)
    if level not in levels:
        return None
    path = []
    for lv in levels[: list(levels).index(level) + 1]:
        value = node.topology.get(lv)
        if value is None:
            return None
        path.append(value)
    return tuple(path)


def reason_line(total_nodes: int, counts: Counter) -> str:
    """``0/N nodes are available: <count reason>, ....``: the ``"<count> <reason>"`` strings
    sorted as strings (kube's FitError); the PreFilter conflict alone, without its count."""
    if counts.get(TERMS_CONFLICT):
        return f"0/{total_nodes} nodes are available: {TERMS_CONFLICT}."
    parts = sorted(f"{n} {r}" for r, n in counts.items())
    if not parts:
        return f"0/{total_nodes} nodes are available."
    return f"0/{total_nodes} nodes are available: " + ", ".join(parts) + "."


def _ceil_div(x: int, d: int) -> int:
    return -((-x) // d)


@dataclass
class _Holding:
    """What one pod holds on one node."""

    node: int
    milli: dict[int, int] = field(default_factory=dict)
    gpu_mem: dict[int, int] = field(default_factory=dict)
    cpu: int = 0
    mem: int = 0
    tags: tuple[int, ...] = ()  # gpu-clustering tags: 0 per GPU share, k for k whole GPUs
    pod: object = None  # the RunningPod or PodRequest that holds it (the inter-pod rules read it)


def _pod_tags(pod: PodRequest) -> tuple[int, ...]:
    """The study's GPU tag of a pod: share-gpu (0), k-gpu (k); none for a CPU-only pod."""
    if pod.gpus == 0:
        return ()
    return (0,) if pod.shared else (pod.gpus,)


class _NodeState:
    """Usage of one node; free amounts are derived from capacity minus usage."""

    def __init__(self, index: int, node: Node) -> None:
        self.index = index
        self.node = node
        self.hw = node.hardware
        self.healthy = [i not in node.unhealthy_gpus for i in range(self.hw.gpus)]
        self.used_milli = [0] * self.hw.gpus
        self.used_gpu_mem = [0] * self.hw.gpus
        self.cpu_used = 0
        self.mem_used = 0
        self.pods_used = 0
        self.tags: dict[int, int] = {}  # GPU tag -> pods holding it here (positive only)
        self.holders: dict[int, _Holding] = {}  # id -> holding applied here now (inter-pod rules)

    def cpu_free(self) -> int | None:
        return None if self.hw.cpu_milli is None else self.hw.cpu_milli - self.cpu_used

    def mem_free(self) -> int | None:
        return None if self.hw.memory_mib is None else self.hw.memory_mib - self.mem_used

    def pods_free(self) -> int | None:
        return None if self.hw.max_pods is None else self.hw.max_pods - self.pods_used

    def free_milli(self, i: int) -> int:
        return 1000 - self.used_milli[i] if self.healthy[i] else 0

    def free_gpu_mem(self, i: int) -> int | None:
        if self.hw.gpu_memory_mib is None:
            return None
        return self.hw.gpu_memory_mib - self.used_gpu_mem[i] if self.healthy[i] else 0

    @property
    def topology_aware(self) -> bool:
        """Whether GPU sets follow the link model (a topology or NICs, ≤ 16 GPUs)."""
        hw = self.hw
        return (hw.gpu_topology is not None or bool(hw.nic_list)) and 0 < hw.gpus <= 16

    def pair_scores(self) -> list[list[int]]:
        topo = self.hw.gpu_topology
        if topo is None:
            return [[0] * self.hw.gpus for _ in range(self.hw.gpus)]
        return [list(r) for r in topo.scores]

    def choose_whole(self, k: int, nics: int) -> tuple[int, ...]:
        """The GPUs a k-GPU pod takes here (rules: "GPUs inside a node")."""
        free = self.whole_free()
        if not self.topology_aware:
            return tuple(free[:k])
        scores = self.pair_scores()
        if not nics:
            got = reference_select(scores, free, k)
            assert got is not None
            return got
        memo: dict = {}
        best_key = None
        best: tuple[int, ...] = ()
        for cand in itertools.combinations(free, k):
            points = sum(_nic_points(self.hw.nic_list, cand, nics)[1])
            if k == 1:
                prim, sec = -sum(scores[cand[0]][j] for j in free if j != cand[0]), 0
            else:
                own = set_score(scores, cand)
                prim = own + best_split(scores, [g for g in free if g not in cand], k, memo)
                sec = own
            key = (-points, -prim, -sec, cand)
            if best_key is None or key < best_key:
                best_key, best = key, cand
        return best

    def set_score_for(self, pod: PodRequest) -> int:
        """Score of the set a whole-GPU pod of 2+ GPUs would take here (ranks equal nodes)."""
        if pod.shared or pod.gpus < 2 or not self.topology_aware:
            return 0
        gpus = reference_select(self.pair_scores(), self.whole_free(), pod.gpus)
        return set_score(self.pair_scores(), gpus) if gpus else 0

    def whole_free(self) -> list[int]:
        return [i for i in range(self.hw.gpus) if self.healthy[i] and self.used_milli[i] == 0]

    def share_candidates(self, pod: PodRequest) -> list[int]:
        out = []
        for i in range(self.hw.gpus):
            if not self.healthy[i] or self.free_milli(i) < pod.gpu_milli:
                continue
            fm = self.free_gpu_mem(i)
            if fm is not None and fm < pod.gpu_memory_mib:
                continue
            out.append(i)
        return out

    def apply(self, h: _Holding, sign: int) -> None:
        for i, m in h.milli.items():
            self.used_milli[i] += sign * m
        for i, m in h.gpu_mem.items():
            self.used_gpu_mem[i] += sign * m
        self.cpu_used += sign * h.cpu
        self.mem_used += sign * h.mem
        self.pods_used += sign
        for t in h.tags:
            self.tags[t] = self.tags.get(t, 0) + sign
            if self.tags[t] == 0:
                del self.tags[t]
        if sign > 0:
            self.holders[id(h)] = h
        else:
            self.holders.pop(id(h), None)


_CORDON = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")

SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SPREAD_SKEW = "node(s) didn't match pod topology spread constraints"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"


def _namespace(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "default"


def _topo(node: Node, key: str) -> str | None:
    if key == "kubernetes.io/hostname":
        return node.labels.get(key, node.name)
    return node.labels.get(key)


def _inclusion(node: Node, pod: PodRequest, c) -> bool:
    """kube's node inclusion policies of a spread constraint (nodeAffinity Honor, taints Ignore by default)."""
    if (c.node_affinity_policy or "Honor") == "Honor":
        if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
            return False
        na = pod.affinity.node_affinity if pod.affinity is not None else None
        if na is not None and na.required is not None and not na.required.matches(node.labels, node.name):
            return False
    if (c.node_taints_policy or "Ignore") == "Honor" and _taint_reason(node, pod) is not None:
        return False
    return True


def _term(raw, owner) -> tuple:
    """(topologyKey, selector or None, namespaces or None for all) of a pod affinity term of ``owner``."""
    selector = raw.label_selector
    if selector is not None:
        extra = [LabelSelectorRequirement(k, "In", (owner.labels[k],)) for k in raw.match_label_keys if k in owner.labels]
        extra += [LabelSelectorRequirement(k, "NotIn", (owner.labels[k],))
                  for k in raw.mismatch_label_keys if k in owner.labels]
        selector = LabelSelector(dict(selector.match_labels), selector.match_expressions + tuple(extra))
    if raw.namespace_selector is not None and raw.namespace_selector.empty:
        spaces = None
    elif raw.namespaces:
        spaces = set(raw.namespaces)
    else:
        spaces = {_namespace(owner.name)}
    return raw.topology_key, selector, spaces


def _term_matches(term: tuple, other) -> bool:
    _, selector, spaces = term
    if spaces is not None and _namespace(other.name) not in spaces:
        return False
    return selector is not None and selector.matches(other.labels)


def _tolerated(tol, taint: Taint) -> bool:
    """kube's ToleratesTaint, read literally."""
    if tol.effect != "" and tol.effect != taint.effect:
        return False
    if tol.key != "" and tol.key != taint.key:
        return False
    if tol.operator == "Exists":
        return True
    return tol.value == taint.value


def _taint_reason(node: Node, pod: PodRequest) -> str | None:
    for t in node.taints:
        if t.effect == "PreferNoSchedule":
            continue
        if not any(_tolerated(tol, t) for tol in pod.tolerations):
            return UNTOLERATED
    return None


def _required_terms(pod: PodRequest):
    a = pod.affinity
    if a is None or a.node_affinity is None:
        return None
    sel = a.node_affinity.required_during_scheduling_ignored_during_execution
    return None if sel is None else sel.node_selector_terms


def _prefilter_names(pod: PodRequest) -> set | None:
    """The nodes kube's NodeAffinity PreFilter keeps: every term naming nodes by
    ``metadata.name In`` (intersected in a term, united over terms); None: all nodes."""
    terms = _required_terms(pod)
    if not terms:
        return None
    out: set = set()
    for t in terms:
        here = None
        for f in t.match_fields:
            if f.key == "metadata.name" and f.operator == "In":
                here = set(f.values) if here is None else here & set(f.values)
        if here is None:
            return None
        out |= here
    return out


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _go_int64(text: str) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    v = int(text)
    return v if -(1 << 63) <= v < (1 << 63) else None


def _expression_matches(e, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry (a parse error: no match)."""
    prefix, slash, name = e.key.rpartition("/")
    key_ok = bool(name) and len(name) <= 63 and _LABEL_VALUE.fullmatch(name) is not None and (
        not slash or (0 < len(prefix) <= 253 and _LABEL_PREFIX.fullmatch(prefix) is not None))
    if not key_ok or any(len(v) > 63 or not _LABEL_VALUE.fullmatch(v) for v in e.values):
        return False
    if e.operator in ("In", "NotIn") and not e.values:
        return False
    if e.operator in ("Exists", "DoesNotExist") and e.values:
        return False
    has = e.key in labels
    v = labels.get(e.key)
    if e.operator == "In":
        return has and v in e.values
    if e.operator == "NotIn":
        return not has or v not in e.values
    if e.operator == "Exists":
        return has
    if e.operator == "DoesNotExist":
        return not has
    if len(e.values) != 1:
        return False
    want = _go_int64(e.values[0])
    got = None if v is None else _go_int64(v)
    if want is None or got is None:
        return False
    return got > want if e.operator == "Gt" else got < want


def _field_matches(f, node_name: str) -> bool:
    if f.operator not in ("In", "NotIn") or len(f.values) != 1:
        return False
    value = node_name if f.key == "metadata.name" else ""
    return (value == f.values[0]) if f.operator == "In" else (value != f.values[0])


def _node_affinity_ok(node: Node, pod: PodRequest) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    terms = _required_terms(pod)
    if terms is None:
        return True
    for t in terms:
        if not t.match_expressions and not t.match_fields:
            continue
        if all(_expression_matches(e, node.labels) for e in t.match_expressions) and all(
                _field_matches(f, node.name) for f in t.match_fields):
            return True
    return False


def _ports_clash(a, b) -> bool:
    """kube's HostPortInfo.CheckConflict: one protocol and port, and one host IP or either
    the wildcard (an empty hostIP is 0.0.0.0)."""
    ip_a, ip_b = a.host_ip or "0.0.0.0", b.host_ip or "0.0.0.0"
    return (a.protocol, a.host_port) == (b.protocol, b.host_port) and (
        ip_a == ip_b or "0.0.0.0" in (ip_a, ip_b))


def _filter(st: _NodeState, pod: PodRequest) -> list[str]:
    """Every reason ``st`` cannot take ``pod`` (empty: feasible)."""
    node = st.node
    named = _prefilter_names(pod)
    if named is not None and not named:
        return [TERMS_CONFLICT]
    if named is not None and node.name not in named:
        return [OUTSIDE_PREFILTER]
    # kube's NodeUnschedulable: a pod that tolerates the unschedulable taint passes a cordon
    if node.unschedulable and not any(_tolerated(tol, _CORDON) for tol in pod.tolerations):
        return [UNSCHEDULABLE]
    if pod.node_name is not None and pod.node_name != node.name:
        return [NODE_NAME]
    taint = _taint_reason(node, pod)
    if taint is not None:
        return [taint]
    if not _node_affinity_ok(node, pod):
        return [SELECTOR]
    gpuless = pod.gpus >= 1 and st.hw.gpus == 0
    if pod.gpus >= 1 and not gpuless and pod.gpu_models and st.hw.gpu_model not in pod.gpu_models:
        return [GPU_MODEL]
    # kube's NodePorts (rules: filter 4b), after NodeAffinity, before every "Insufficient ..."
    held = [port for h in st.holders.values() if h.pod is not None for port in getattr(h.pod, "host_ports", ())]
    if any(_ports_clash(want, have) for want in pod.host_ports for have in held):
        return [NO_FREE_PORTS]
    # a node without GPUs fails kube's NodeResourcesFit, which names every resource it lacks
    if not gpuless and pod.nics > len(st.hw.nic_list):
        return [INSUFFICIENT_NICS]
    out = []
    # kube's NodeResourcesFit: a resource the pod asks none of fits an over-committed node
    cpu_free = st.cpu_free()
    if cpu_free is not None and pod.cpu_milli > 0 and cpu_free < pod.cpu_milli:
        out.append(INSUFFICIENT_CPU)
    mem_free = st.mem_free()
    if mem_free is not None and pod.memory_mib > 0 and mem_free < pod.memory_mib:
        out.append(INSUFFICIENT_MEMORY)
    pods_free = st.pods_free()
    if pods_free is not None and pods_free < 1:
        out.append(TOO_MANY_PODS)
    if pod.gpus >= 1:
        if pod.shared:
            if not any(
                st.healthy[i] and st.free_milli(i) >= pod.gpu_milli for i in range(st.hw.gpus)
            ):
                out.append(INSUFFICIENT_GPU)
            elif not st.share_candidates(pod):
                out.append(INSUFFICIENT_GPU_MEMORY)
        else:
            if len(st.whole_free()) < pod.gpus:
                out.append(INSUFFICIENT_GPU)
            elif st.hw.gpu_memory_mib is not None and pod.gpu_memory_mib > st.hw.gpu_memory_mib:
                out.append(INSUFFICIENT_GPU_MEMORY)
    return out


def _nic_points(nics: Sequence, gpus: Sequence[int], want: int) -> tuple[tuple[str, ...], list[int]]:
    """The NICs the rules pair with ``gpus`` (one GPU at a time) and each pick's points."""

    def closeness(nic, among) -> int:
        return max((PCIE_POINTS[nic.labels[g]] for g in among), default=0)

    chosen: list[int] = []
    points: list[int] = []
    served: set[int] = set()
    for _ in range(min(want, len(nics))):
        unserved = [g for g in gpus if g not in served]
        if not unserved:
            served = set()
            unserved = list(gpus)
        j = min(
            (j for j in range(len(nics)) if j not in chosen),
            key=lambda j: (-closeness(nics[j], unserved), -closeness(nics[j], gpus), j),
        )
        chosen.append(j)
        a = closeness(nics[j], unserved)
        points.append(a)
        if unserved:
            served.add(min(unserved, key=lambda g: (-PCIE_POINTS[nics[j].labels[g]], g)))
    return tuple(nics[j].name for j in sorted(chosen)), points


def _cost(st: _NodeState, pod: PodRequest) -> int:
    """``ceil((cpu_left + 16 * gpu_left) / 2560)`` of the rules' best-fit."""
    cpu_free = st.cpu_free()
    cpu_left = 0 if cpu_free is None else cpu_free - pod.cpu_milli
    gpu_left = sum(st.free_milli(i) for i in range(st.hw.gpus) if st.healthy[i])
    gpu_left -= pod.gpus * pod.gpu_milli
    return _ceil_div(cpu_left + 16 * gpu_left, 2560)


# --- the FGD study's other baselines (rules: "dot-product", "gpu-packing", "gpu-clustering")
# Integer scores 0..100 of a feasible node, highest wins, ties by the seeded node order.


def _trunc_div(a: int, b: int) -> int:
    """a / b rounded toward zero (Go), b > 0."""
    return a // b if a >= 0 else -((-a) // b)


def _dot_product_score(st: _NodeState, pod: PodRequest) -> int:
    """trunc(100 (1 - (cpu_left/128000 · cpu/128000 + gpu_left/8000 · gpu/8000) / 2))."""
    cpu_free = st.cpu_free()
    cpu_left = 0 if cpu_free is None else cpu_free
    gpu_left = sum(st.free_milli(i) for i in range(st.hw.gpus))
    need = pod.gpus * pod.gpu_milli
    dot = (cpu_left / 128000.0) * (pod.cpu_milli / 128000.0)
    dot = dot + (gpu_left / 8000.0) * (need / 8000.0)
    dot = dot / 2.0
    value = 100.0 * (1.0 - dot)
    return -(2**31) if value <= -(2.0**31) else int(value)


def _gpu_packing_score(st: _NodeState, pod: PodRequest) -> int:
    """The study's three cases, read literally (GPUs scanned by ascending free milli)."""
    if pod.gpus == 0:
        return 0
    free = [st.free_milli(i) for i in range(st.hw.gpus)]
    fully = sum(1 for f in free if f == 1000)
    if fully == st.hw.gpus:
        return max(33 - fully, fully)
    fitting = st.share_candidates(pod) if pod.shared else st.whole_free()
    used = sorted(fitting, key=lambda i: (free[i], i))[: pod.gpus]
    whole = sum(1 for i in used if free[i] == 1000)
    if whole:
        return max(50 - whole, 33)
    return max(100 - sum(free[i] * 100 // 1000 for i in used) // 10, 50)


def _gpu_clustering_score(st: _NodeState, pod: PodRequest) -> int:
    """trunc(25 (8000 - free GPU milli) / 8000) + 75 / 50 / 25 / 0 by the node's tags."""
    if pod.gpus == 0:
        return 0
    (tag,) = _pod_tags(pod)
    term = _trunc_div(25 * (8000 - sum(st.free_milli(i) for i in range(st.hw.gpus))), 8000)
    if st.tags.get(tag, 0) > 0:
        return term + (75 if len(st.tags) == 1 else 50)
    return term + (25 if not st.tags else 0)


_BASELINE_SCORES = {
    "dot-product": _dot_product_score,
    "gpu-packing": _gpu_packing_score,
    "gpu-clustering": _gpu_clustering_score,
}

# Every policy _place_one implements (its node choice, then its GPU choice).
IMPLEMENTED_POLICIES = ("first-fit", "best-fit", "spread", "random", "fgd", "fgd-pack", *_BASELINE_SCORES)


PodsArg = Union[PodRequest, Sequence[PodRequest]]
BindArg = Union[PlacementResult, Assignment, Iterable[Assignment]]


class ReferenceCluster:
    """Free state of a snapshot and the placement rules applied to it.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        The cluster; the pods running in it are held (and can be released).
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._nodes = [_NodeState(i, n) for i, n in enumerate(snapshot.nodes)]
        self._by_name = {n.name: i for i, n in enumerate(snapshot.nodes)}
        self._workload = None
        self._told = None  # a workload the caller gave: where a learned guide starts
        self._guide: PackingGuide | None = None
        self._learner: PackingLearner | None = None
        self._seen: set[str] = set()
        self._running = {rp.name: rp for node in snapshot.nodes for rp in node.pods}
        self._rank: dict[int, int] = {}
        self._held: dict[str, _Holding] = {}
        self._decided: dict[str, PodRequest] = {}
        for i, node in enumerate(snapshot.nodes):
            for rp in node.pods:
                milli = {g: 1000 for g in rp.gpus}
                for g, m in rp.gpu_shares.items():
                    milli[int(g)] = milli.get(int(g), 0) + m
                h = _Holding(
                    node=i,
                    milli=milli,
                    gpu_mem={int(g): m for g, m in rp.gpu_memory_mib.items()},
                    cpu=rp.cpu_milli,
                    mem=rp.memory_mib,
                    tags=((len(rp.gpus),) if rp.gpus else ()) + (0,) * len(rp.gpu_shares),
                    pod=rp,
                )
                self._nodes[i].apply(h, +1)
                self._held[rp.name] = h

    # ------------------------------------------------------------------ public API

    def schedule(self, request: PlacementRequest) -> PlacementResult:
        """Place ``request.pods`` in order and bind every placed pod.

        Raises
        ------
        InvalidInputError
            A pod name repeats in the request or is already bound.
        """
        for p in request.pods:
            if p.name in self._held:
                raise InvalidInputError(f"pods[{p.name}]", "a pod of that name is already bound")
        return self._run(request.pods, request.gangs, request.policy, request.seed, commit=True)

    def place(
        self,
        pods: PodsArg,
        *,
        gang: GangSpec | None = None,
        policy: str = "best-fit",
        seed: int = 0,
    ) -> PlacementResult:
        """Decide for one pod or a list of pods without changing the state.

        With ``gang`` the pods form that gang (all or nothing). A list without a gang
        is placed in order, each pod seeing the tentative placements before it.
        """
        plist = [pods] if isinstance(pods, PodRequest) else list(pods)
        gangs: dict[str, GangSpec] = {}
        if gang is not None:
            plist = [p if p.gang == gang.name else replace(p, gang=gang.name) for p in plist]
            gangs[gang.name] = gang
        return self._run(tuple(plist), gangs, policy, seed, commit=False)

    def bind(self, placement: BindArg) -> None:
        """Apply assignments decided by the last ``place``/``schedule`` calls.

        All or nothing: on error nothing of this call stays bound.

        Raises
        ------
        InvalidInputError
            A pod is unknown, already bound, or does not fit where it is assigned.
        """
        if isinstance(placement, PlacementResult):
            items: tuple[Assignment, ...] = placement.assignments
        elif isinstance(placement, Assignment):
            items = (placement,)
        else:
            items = tuple(placement)
        done: list[str] = []
        try:
            for a in items:
                self._bind_one(a)
                done.append(a.pod)
        except InvalidInputError:
            for name in reversed(done):
                self.release(name)
            raise

    def release(self, pod_name: str) -> None:
        """Give back everything ``pod_name`` holds (a bound or snapshot pod).

        Raises
        ------
        InvalidInputError
            No pod of that name is held.
        """
        h = self._held.pop(pod_name, None)
        if h is None:
            raise InvalidInputError(pod_name, "no bound pod of that name")
        self._running.pop(pod_name, None)
        self._nodes[h.node].apply(h, -1)

    def node_free(self, node_name: str) -> dict:
        """Free capacity of one node (``None``: untracked; unhealthy GPUs show 0)."""
        i = self._by_name.get(node_name)
        if i is None:
            raise InvalidInputError(node_name, "no node of that name")
        st = self._nodes[i]
        return {
            "cpu_milli": st.cpu_free(),
            "memory_mib": st.mem_free(),
            "pods": st.pods_free(),
            "gpu_milli": tuple(st.free_milli(g) for g in range(st.hw.gpus)),
            "gpu_memory_mib": tuple(st.free_gpu_mem(g) for g in range(st.hw.gpus)),
        }

    def is_bound(self, pod_name: str) -> bool:
        """Whether ``pod_name`` currently holds resources."""
        return pod_name in self._held

    # ------------------------------------------------------------------ engine

    def _run(
        self,
        pods: Sequence[PodRequest],
        gangs: Mapping[str, GangSpec],
        policy: str,
        seed: int,
        *,
        commit: bool,
    ) -> PlacementResult:
        if policy not in IMPLEMENTED_POLICIES:
            raise NotImplementedError(f"policy {policy!r} is not in the reference")
        names = [p.name for p in pods]
        if len(set(names)) != len(names):
            raise InvalidInputError("pods", "pod names repeat")
        for p in pods:
            if p.gpus > 1 and p.gpu_milli < 1000:
                raise InvalidInputError(p.name, "gpuMilli below 1000 needs gpus: 1")
            self._decided[p.name] = p

        rng = SplitMix64(seed)
        if policy in ("fgd", "fgd-pack") and self._workload is None:
            self._workload = target_workload(pods)
        if policy == "fgd-pack" and self._guide is None:
            self._start_learning()
        learning = policy == "fgd-pack" and self._learner is not None
        # the ties of a scored policy: the seeded node order when it is ranked, else the
        # lowest index (a scored policy need not be ranked)
        if policy in RANKED_POLICIES:
            stream = splitmix64_stream(seed)
            draws = [next(stream) for _ in self._nodes]
            order = sorted(range(len(draws)), key=lambda i: (draws[i], i))
            self._rank = {n: r for r, n in enumerate(order)}
        else:
            self._rank = {i: i for i in range(len(self._nodes))}
        # by priority, highest first (a gang: its highest, at its first pod), then request order
        unit: dict[str, tuple[int, int]] = {}
        for i, p in enumerate(pods):
            if p.gang is not None:
                top, first = unit.get(p.gang, (p.priority, i))
                unit[p.gang] = (max(top, p.priority), first)
        ranked = sorted(range(len(pods)), key=lambda i: (
            -(unit[pods[i].gang][0] if pods[i].gang is not None else pods[i].priority),
            unit[pods[i].gang][1] if pods[i].gang is not None else i))
        pods = [pods[i] for i in ranked]
        placed: list[tuple[Assignment, _Holding]] = []
        unsched: list[Unschedulable] = []
        gang_results: list[GangResult] = []
        members: dict[str, list[PodRequest]] = {}
        for p in pods:
            if p.gang is not None:
                members.setdefault(p.gang, []).append(p)
        done_gangs: set[str] = set()

        for p in pods:
            if learning and not (p.gang is not None and p.gang in done_gangs) and self._learner.due:
                self._guide = self._learner.refresh()
            if p.gang is None:
                out = self._place_one(p, range(len(self._nodes)), policy, rng)
                if isinstance(out, str):
                    unsched.append(Unschedulable(p.name, out))
                else:
                    placed.append(out)
                if learning:
                    self._observe([p])
                continue
            if p.gang in done_gangs:
                continue
            done_gangs.add(p.gang)
            spec = gangs.get(p.gang) or GangSpec(p.gang)
            got = self._place_gang(spec, members[p.gang], policy, rng)
            if learning:
                self._observe(members[p.gang])
            if isinstance(got, str):
                unsched.extend(Unschedulable(m.name, got) for m in members[p.gang])
                gang_results.append(GangResult(spec.name, False, solver="greedy", status="unknown"))
            else:
                placed.extend(got)
                gang_results.append(GangResult(spec.name, True, solver="greedy", status="feasible"))

        if commit:
            for a, h in placed:
                self._held[a.pod] = h
        else:
            for a, h in reversed(placed):
                self._nodes[h.node].apply(h, -1)
        return PlacementResult(
            assignments=tuple(a for a, _ in placed),
            unschedulable=tuple(unsched),
            gangs=tuple(gang_results),
        )

    def _place_one(
        self, pod: PodRequest, candidates: Iterable[int], policy: str, rng: SplitMix64
    ) -> tuple[Assignment, _Holding] | str:
        """Place and apply one pod on one of ``candidates``, or return its reason line."""
        feasible: list[int] = []
        counts: Counter = Counter()
        for i in candidates:
            reasons = _filter(self._nodes[i], pod) or self._inter_pod(pod, i)
            if reasons:
                counts.update(reasons)
            else:
                feasible.append(i)
        if not feasible:
            present = sorted({st.hw.gpu_model for st in self._nodes if st.hw.gpus and st.hw.gpu_model})
            if pod.gpus and pod.gpu_models and not set(pod.gpu_models) & set(present) and GPU_MODEL in counts:
                # no node has any model the pod names: the phrase names them
                phrase = (f"{GPU_MODEL} (no node has {', '.join(pod.gpu_models)}; "
                          f"the cluster has {', '.join(present) or 'no GPUs'})")
                counts[phrase] = counts.pop(GPU_MODEL)
            return reason_line(len(self._nodes), counts)

        if policy == "first-fit":
            chosen = feasible[0]
        elif policy == "best-fit":
            chosen = min(
                feasible,
                key=lambda i: (_cost(self._nodes[i], pod), -self._nodes[i].set_score_for(pod), i),
            )
        elif policy == "spread":
            chosen = min(
                feasible,
                key=lambda i: (-_cost(self._nodes[i], pod), -self._nodes[i].set_score_for(pod), i),
            )
        elif policy in ("fgd", "fgd-pack"):
            scored = {i: self._fgd(self._nodes[i], pod, policy == "fgd-pack") for i in feasible}
            chosen = min(feasible, key=lambda i: (-scored[i][0], self._rank[i]))
        elif policy in _BASELINE_SCORES:
            score = _BASELINE_SCORES[policy]
            chosen = min(feasible, key=lambda i: (-score(self._nodes[i], pod), self._rank[i]))
        elif policy == "random":
            chosen = feasible[rng.pick(len(feasible))]
        else:
            raise NotImplementedError(f"policy {policy!r} is not in the reference")
        fgd_gpu = scored[chosen][1] if policy in ("fgd", "fgd-pack") else None
        return self._take(pod, chosen, policy, rng, fgd_gpu)

    def _place_on(
        self, pod: PodRequest, node: int, policy: str, rng: SplitMix64
    ) -> tuple[Assignment, _Holding] | None:
        """Place and apply one pod on ``node`` (chosen by the caller: no node draw), or None
        when the node does not take it; its GPUs are chosen as ``policy`` chooses them."""
        st = self._nodes[node]
        if _filter(st, pod) or self._inter_pod(pod, node):
            return None
        fgd_gpu = self._fgd(st, pod, policy == "fgd-pack")[1] if policy in ("fgd", "fgd-pack") else None
        return self._take(pod, node, policy, rng, fgd_gpu)

    def _take(
        self, pod: PodRequest, chosen: int, policy: str, rng: SplitMix64, fgd_gpu: int | None
    ) -> tuple[Assignment, _Holding]:
        """Choose the pod's GPUs (and NICs) on node ``chosen``, which fits it, and apply it
        (rules: "GPUs inside the chosen node"); ``fgd_gpu``: the GPU fgd's score chose."""
        st = self._nodes[chosen]
        h = _Holding(node=chosen, cpu=pod.cpu_milli, mem=pod.memory_mib, tags=_pod_tags(pod), pod=pod)
        gpu_milli: int | None = None
        if pod.gpus == 0:
            gpus: tuple[int, ...] = ()
        elif pod.shared:
            cands = st.share_candidates(pod)
            if policy == "random":
                g = cands[rng.pick(len(cands))]
            elif policy in ("fgd", "fgd-pack"):
                assert fgd_gpu is not None
                g = fgd_gpu
            else:
                g = min(cands, key=lambda i: (st.free_milli(i), i))
                if st.free_milli(g) == 1000 and st.topology_aware:
                    g = reference_select(st.pair_scores(), st.whole_free(), 1)[0]
            gpus = (g,)
            gpu_milli = pod.gpu_milli
            h.milli[g] = pod.gpu_milli
            h.gpu_mem[g] = pod.gpu_memory_mib
        else:
            gpus = st.choose_whole(pod.gpus, pod.nics)
            for g in gpus:
                h.milli[g] = 1000
        nics: tuple[str, ...] = ()
        if pod.nics:
            nics = _nic_points(st.hw.nic_list, gpus, pod.nics)[0]
        st.apply(h, +1)
        a = Assignment(
            pod=pod.name, node=st.node.name, gpus=gpus, gpu_milli=gpu_milli, gang=pod.gang, nics=nics
        )
        return a, h

    # --- inter-pod rules (rules: "Inter-pod rules"), counted from scratch per node --------

    def _pods_on(self) -> list[tuple[Node, object]]:
        return [(st.node, h.pod) for st in self._nodes for h in st.holders.values() if h.pod is not None]

    def _inter_pod(self, pod: PodRequest, i: int) -> list[str]:
        """kube's PodTopologySpread then InterPodAffinity on node i: [reason] or []."""
        node = self._nodes[i].node
        ns = _namespace(pod.name)
        on = self._pods_on()
        rules = [c for c in pod.topology_spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]
        for c in rules:
            value = _topo(node, c.topology_key)
            if value is None:
                return [SPREAD_LABEL]
            selector = c.label_selector
            if selector is not None:
                merged = dict(selector.match_labels)
                extra = [LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in c.match_label_keys if k in pod.labels]
                selector = LabelSelector(merged, selector.match_expressions + tuple(extra))
            counting = [n.node for n in self._nodes
                        if all(_topo(n.node, r.topology_key) is not None for r in rules) and _inclusion(n.node, pod, c)]
            domains = {_topo(n, c.topology_key): 0 for n in counting}
            for n, other in on:
                if n in counting and selector is not None and not selector.empty \
                        and _namespace(other.name) == ns and not getattr(other, "terminating", False) \
                        and selector.matches(other.labels):
                    domains[_topo(n, c.topology_key)] += 1
            low = min(domains.values()) if len(domains) >= (c.min_domains or 1) else 0
            own = 1 if selector is not None and selector.matches(pod.labels) else 0
            if domains.get(value, 0) + own - low > c.max_skew:
                return [SPREAD_SKEW]
        a = pod.affinity
        required = list(a.pod_affinity.required) if a is not None and a.pod_affinity is not None else []
        if required:
            terms = [_term(t, pod) for t in required]

            def all_terms(other: object) -> bool:
                return all(_term_matches(t, other) for t in terms)

            if any(_topo(node, t[0]) is None for t in terms):
                return [AFFINITY]
            ok = all(any(_topo(n, t[0]) == _topo(node, t[0]) and all_terms(o) for n, o in on) for t in terms)
            if not ok:
                anywhere = any(all_terms(o) and _topo(n, t[0]) is not None for n, o in on for t in terms)
                if anywhere or not all_terms(pod):
                    return [AFFINITY]
        anti = list(a.pod_anti_affinity.required) if a is not None and a.pod_anti_affinity is not None else []
        for raw in anti:
            t = _term(raw, pod)
            here = _topo(node, t[0])
            if here is not None and any(_topo(n, t[0]) == here and _term_matches(t, o) for n, o in on):
                return [ANTI_AFFINITY]
        for n, o in on:
            oa = o.affinity
            for raw in (oa.pod_anti_affinity.required if oa is not None and oa.pod_anti_affinity is not None else ()):
                t = _term(raw, o)
                here = _topo(node, t[0])
                if here is not None and _topo(n, t[0]) == here and _term_matches(t, pod):
                    return [EXISTING_ANTI]
        return []

    # --- FGD (rules: "fgd") ---------------------------------------------------------------

    def _fragment(self, st: _NodeState, cpu: int | None, free: list[int]) -> float:
        """F_n(M), summed over the workload's types in order."""
        idle = sum(free)
        if idle == 0:
            return 0.0
        total = 0.0
        for t, p in zip(self._workload.types, self._workload.popularity):
            if t.gpu_milli == 0 or (t.gpu_models and st.hw.gpu_model not in t.gpu_models):
                total += p * idle
                continue
            fitting = sum(1 for f in free if f >= t.gpu_milli)
            small = sum(f for f in free if f < t.gpu_milli)
            cpu_ok = cpu is None or cpu >= t.cpu_milli
            total += p * (small if fitting >= t.num_gpu and cpu_ok else idle)
        return total

    def _fgd(self, st: _NodeState, pod: PodRequest, pack: bool = False) -> tuple[int, int | None]:
        """(score, GPU of a shared pod): floor(100 sigmoid((F - F') / 1000)), best GPU first;
        ``pack``: fgd-pack's measure, pressure and regret."""
        measure = self._packed_measure if pack else self._fragment
        free = [st.free_milli(i) for i in range(st.hw.gpus)]
        cpu = st.cpu_free()
        before = measure(st, cpu, free)
        after_cpu = None if cpu is None else cpu - pod.cpu_milli

        def score(after: float) -> int:
            return math.floor(100.0 / (1.0 + math.exp(-(before - after) / 1000.0)))

        if pod.gpus == 0:
            return score(measure(st, after_cpu, free)), None
        if pack:
            pressure = self._guide.pressure.get(st.hw.gpu_model, 0.0)
            before -= PRESSURE_WEIGHT * pressure * pod.gpus * pod.gpu_milli
        if not pod.shared:
            left = list(free)
            for i in [i for i in range(len(left)) if left[i] == 1000][: pod.gpus]:
                left[i] = 0
            return score(measure(st, after_cpu, left)), None
        best: tuple[int, int | None] = (-1, None)
        for g in st.share_candidates(pod):
            left = list(free)
            left[g] -= pod.gpu_milli
            after = measure(st, after_cpu, left)
            if pack:
                after += REGRET_WEIGHT * 1000.0 * float(self._guide.regret[pod.gpu_milli // 10][free[g] // 10])
            s = score(after)
            if s > best[0]:
                best = (s, g)
        return best

    # --- fgd-pack (rules: "fgd-pack") ----------------------------------------------------

    def _gpus_per_model(self) -> dict[str, int]:
        per_model: Counter[str] = Counter()
        for st in self._nodes:
            if st.hw.gpus and st.hw.gpu_model:
                per_model[st.hw.gpu_model] += st.hw.gpus
        return dict(per_model)

    def packing_guide(self, pods: Sequence[PodRequest]) -> PackingGuide:
        """The guide of ``pods`` on this cluster's GPUs per model."""
        return packing_guide(pods, self._gpus_per_model())

    def _start_learning(self) -> None:
        """A learned guide (rules: "fgd-pack"): the told workload, then the pods held now
        (running ones as the snapshot has them, bound ones as decided)."""
        prior = None if self._told is None else Demand.of_workload(self._told)
        learner = PackingLearner(self._gpus_per_model(), prior)
        learner.observe(Demand.of_running([self._running[n] for n in self._held if n in self._running]))
        learner.observe([self._decided[n] for n in self._held if n not in self._running])
        self._seen.update(self._held)
        self._learner = learner
        self._guide = learner.refresh()

    def _observe(self, pods: Sequence[PodRequest]) -> None:
        new = [p for p in pods if p.name not in self._seen]
        self._seen.update(p.name for p in new)
        self._learner.observe(new)

    def _packed_measure(self, st: _NodeState, cpu: int | None, free: list[int]) -> float:
        """F_n(M) plus the idle milli the free CPU cannot serve at the guide's rate."""
        idle = sum(free)
        stranded = 0.0
        if cpu is not None:
            stranded = max(idle - cpu * 1000.0 / self._guide.cpu_per_gpu_milli, 0.0)
        return self._fragment(st, cpu, free) + stranded

    def _place_gang(
        self, spec: GangSpec, gpods: list[PodRequest], policy: str, rng: SplitMix64
    ) -> list[tuple[Assignment, _Holding]] | str:
        """Place every pod of a gang (applied), or return the gang's reason."""
        n = len(gpods)
        if (spec.mode == "unconstrained" or spec.level is None) and not spec.slices:
            candidates: list[Sequence[int]] = [range(len(self._nodes))]
            gpu_pods = [p for p in gpods if p.gpus]
            if spec.same_gpu_model and gpu_pods:
                seen: list = []
                for nd in self.snapshot.nodes:
                    if nd.hardware.gpus and nd.hardware.gpu_model not in seen:
                        seen.append(nd.hardware.gpu_model)
                models = [m for m in seen if all(not p.gpu_models or m in p.gpu_models for p in gpu_pods)]
                if not models:
                    return f"gang {spec.name}: no GPU model suits every pod of the gang (sameGpuModel)"
                candidates = [
                    [i for i, nd in enumerate(self.snapshot.nodes) if not nd.hardware.gpus or nd.hardware.gpu_model == m]
                    for m in models
                ]
            for nodes in candidates:  # sameGpuModel binds the GPU pods; CPU-only pods go anywhere
                got = self._try_pods(gpods, nodes, policy, rng, anywhere=range(len(self._nodes)))
                if not isinstance(got, tuple):
                    break
            if isinstance(got, tuple):
                k, pod_name, line = got
                return f"gang {spec.name}: {k} of {n} pod(s) placed before pod {pod_name} failed: {line}"
            return got
        return self._place_topology_gang(spec, gpods, policy, rng)

    # --- gangs over topology levels (rules: "Gangs over topology levels") ---------------

    def _capacity(self, i: int, pod: PodRequest, limit: int) -> int:
        """How many copies of ``pod`` node ``i`` takes, found by placing them one by one."""
        st = self._nodes[i]
        held = []
        while len(held) < limit and not _filter(st, pod):
            out = self._place_one(pod, [i], "best-fit", SplitMix64(0))
            assert not isinstance(out, str)
            held.append(out[1])
        for h in reversed(held):
            st.apply(h, -1)
        return len(held)

    def _place_topology_gang(
        self, spec: GangSpec, gpods: list[PodRequest], policy: str, rng: SplitMix64
    ) -> list | str:
        """Domains and the main shape's nodes by tightest fit (best-fit capacities, whatever
        the policy); GPUs, and the other shapes' nodes within their scope, by ``policy``."""
        levels = [*self.snapshot.topology_levels, "node"]
        nodes = self.snapshot.nodes
        paths = [[domain_of(nd, lv, self.snapshot.topology_levels) for nd in nodes] for lv in levels]
        complete = [all(paths[k][i] is not None for k in range(len(levels))) for i in range(len(nodes))]
        order_of = [dict() for _ in levels]  # first-appearance index of each domain
        for k in range(len(levels)):
            for i in range(len(nodes)):
                if paths[k][i] is not None:
                    order_of[k].setdefault(paths[k][i], len(order_of[k]))
        # shapes: interchangeable pods, largest total demand first
        shapes: dict[tuple, list[int]] = {}
        for j, p in enumerate(gpods):
            key = (p.gpus, p.gpu_milli, p.gpu_memory_mib, p.cpu_milli, p.memory_mib, p.nics,
                   tuple(sorted(p.node_selector.items())), p.tolerations, tuple(sorted(p.gpu_models)),
                   p.node_name, repr(p.affinity))
            shapes.setdefault(key, []).append(j)
        groups = sorted(
            shapes.values(),
            key=lambda js: (gpods[js[0]].gpus * gpods[js[0]].gpu_milli * len(js), gpods[js[0]].cpu_milli * len(js), len(js)),
            reverse=True,
        )
        main = groups[0]
        mpod = gpods[main[0]]
        units = [1] * len(levels)
        for sl in spec.slices:  # the slice's level and every level outside it
            for k in range(levels.index(sl.level) + 1):
                units[k] = max(units[k], sl.size)
        models: list[str | None] = [None]
        gpu_groups = [g for g in groups if gpods[g[0]].gpus]
        if spec.same_gpu_model and gpu_groups:
            seen = []
            for nd in nodes:
                m = nd.hardware.gpu_model
                if nd.hardware.gpus and m not in seen:
                    seen.append(m)
            models = [m for m in seen if all(not gpods[g[0]].gpu_models or m in gpods[g[0]].gpu_models for g in gpu_groups)]
        if spec.mode == "unconstrained" or spec.level is None:  # slices alone: the whole cluster
            tried = [-1]
        else:
            k_req = levels.index(spec.level)
            tried = [k_req] if spec.mode == "required" else list(range(k_req, -1, -1)) + [-1]
        raw_cap = [self._capacity(i, mpod, len(gpods)) if complete[i] else 0 for i in range(len(nodes))]
        fit = 0
        last = ""
        for k in tried:
            cands = []
            per_model = {}
            for mo, m in enumerate(models):
                ncap = [c if (m is None or nodes[i].hardware.gpu_model == m) else 0 for i, c in enumerate(raw_cap)]
                caps, raws = self._domain_caps(levels, paths, complete, order_of, ncap, units)
                per_model[m] = (caps, raws, ncap)
                if k < 0:
                    dom = {"*": sum(caps[0].values())}
                else:
                    dom = caps[k]
                fit = max([fit, *dom.values()])
                for d, c in dom.items():
                    if c >= len(main):
                        fewest = self._fewest(levels, paths, complete, caps, k, d, len(main))
                        cands.append((fewest, c, mo, order_of[k][d] if k >= 0 else 0, d, m))
            for fewest, c, mo, _, d, m in sorted(cands, key=lambda t: t[:4]):
                caps, raws, ncap = per_model[m]
                counts = self._allocate(levels, paths, complete, order_of, caps, raws, k, d, len(main))
                used = lambda cs: tuple(  # noqa: E731  domains per level of the nodes counted
                    len({paths[x][self._by_name[c[0]]] for c in cs}) for x in range(len(levels)))
                if used(counts)[k + 1:] != fewest:
                    # the pooled choice: per level inward, the fewest largest children of all
                    # the domains kept one level out; allocate again on its nodes alone
                    kept = {d}
                    for lv in range(k + 1, len(levels)):
                        pool = {paths[lv][i] for i in range(len(nodes)) if complete[i] and (
                            (k < 0 and lv == 0) or paths[lv - 1][i] in kept)}
                        total, kept = 0, set()
                        for x in sorted(pool, key=lambda x: (-caps[lv][x], raws[lv][x], order_of[lv][x])):
                            if total >= len(main):
                                break
                            kept.add(x)
                            total += caps[lv][x]
                    kept_cap = [c if paths[-1][i] in kept else 0 for i, c in enumerate(ncap)]
                    caps_k, raws_k = self._domain_caps(levels, paths, complete, order_of, kept_cap, units)
                    scope = sum(caps_k[0].values()) if k < 0 else caps_k[k][d]
                    if scope >= len(main):
                        pooled = self._allocate(levels, paths, complete, order_of, caps_k, raws_k, k, d, len(main))
                        if used(pooled) < used(counts):
                            counts = pooled
                got = self._bind_gang(gpods, groups, counts, levels, paths, order_of, k, d, m, policy, rng)
                if got is not None:
                    return got
            last = levels[k] if k >= 0 else "cluster"
        where = "the cluster" if last == "cluster" else f"topology level {last}"
        of = "" if len(groups) == 1 else " of its largest shape"
        counts = Counter()
        for i in range(len(nodes)):
            counts.update(_filter(self._nodes[i], mpod))
        line = f"; {reason_line(len(nodes), counts)}" if counts else ""
        if fit >= len(main):  # the largest shape fits by count: the rest of the gang did not
            beside = "the other shapes beside them" if of else "them once their GPUs and NICs are chosen"
            whose = "of its largest shape " if of else ""
            return f"gang {spec.name}: {where} has room for the {len(main)} pod(s) {whose}but not for {beside}{line}"
        return f"gang {spec.name}: {where} allows to fit only {fit} out of {len(main)} pod(s){of}{line}"

    @staticmethod
    def _domain_caps(levels, paths, complete, order_of, ncap, units):
        """Capacity per domain per level, bottom-up in whole units (and without rounding)."""
        caps: list[dict] = [dict() for _ in levels]
        raws: list[dict] = [dict() for _ in levels]
        last = len(levels) - 1
        for i, c in enumerate(ncap):
            if complete[i]:
                caps[last][paths[last][i]] = c - c % units[last]
                raws[last][paths[last][i]] = c
        for k in range(last - 1, -1, -1):
            for d in order_of[k]:
                caps[k][d] = raws[k][d] = 0
            for i in range(len(ncap)):
                if complete[i]:
                    child = paths[k + 1][i]
                    if k + 1 < last and paths[k + 1].index(child) != i:
                        continue  # count each child domain once, at its first node
                    caps[k][paths[k][i]] += caps[k + 1][child]
                    raws[k][paths[k][i]] += raws[k + 1][child]
            for d in caps[k]:
                caps[k][d] -= caps[k][d] % units[k]
        return caps, raws

    @staticmethod
    def _fewest(levels, paths, complete, caps, k, d, need) -> tuple:
        """Per level inside domain ``d`` of level ``k`` (-1: all), the fewest of its domains
        whose capacities reach ``need``."""
        out = []
        for lv in range(k + 1, len(levels)):
            inside = {paths[lv][i] for i in range(len(complete)) if complete[i] and (k < 0 or paths[k][i] == d)}
            total = count = 0
            for c in sorted((caps[lv][x] for x in inside), reverse=True):
                if total >= need:
                    break
                total += c
                count += 1
            out.append(count)
        return tuple(out)

    def _allocate(self, levels, paths, complete, order_of, caps, raws, k, d, need) -> dict:
        last = len(levels) - 1
        if k == last:
            return {d: need}
        parent = {paths[k + 1][i]: paths[k][i] for i in range(len(complete)) if complete[i]} if k >= 0 else {}
        children = [c for c in order_of[k + 1] if (k < 0 or parent.get(c) == d) and c in caps[k + 1]]
        key_big = lambda c: (-caps[k + 1][c], raws[k + 1][c], order_of[k + 1][c])  # noqa: E731
        key_tight = lambda c: (caps[k + 1][c], raws[k + 1][c], order_of[k + 1][c])  # noqa: E731
        out: dict = {}
        used: set = set()
        left = need
        for c in sorted(children, key=key_big):
            if left == 0 or caps[k + 1][c] <= 0:
                break
            if caps[k + 1][c] >= left:
                # the child needing the fewest children of its own for the rest, then the tightest
                best = min(
                    (x for x in children if x not in used and caps[k + 1][x] >= left),
                    key=lambda x: (self._fewest(levels, paths, complete, caps, k + 1, x, left)[:1], *key_tight(x)),
                )
                out.update(self._allocate(levels, paths, complete, order_of, caps, raws, k + 1, best, left))
                left = 0
                break
            used.add(c)
            out.update(self._allocate(levels, paths, complete, order_of, caps, raws, k + 1, c, caps[k + 1][c]))
            left -= caps[k + 1][c]
        assert left == 0
        return out

    def _bind_gang(self, gpods, groups, counts, levels, paths, order_of, k, d, model, policy, rng) -> list | None:
        by_name = {nd.name: i for i, nd in enumerate(self.snapshot.nodes)}
        node_counts = {by_name[c[0]]: n for c, n in counts.items()}
        key = lambda i: tuple(order_of[x][paths[x][i]] for x in range(len(levels)))  # noqa: E731
        slots = [i for i in sorted(node_counts, key=key) for _ in range(node_counts[i])]
        complete = [i for i in range(len(self.snapshot.nodes))
                    if all(paths[x][i] is not None for x in range(len(levels)))]
        in_domain = [i for i in complete if k < 0 or paths[k][i] == d]
        got: list = [None] * len(gpods)
        done: list = []

        def undo(holdings) -> None:
            for h in reversed(holdings):
                self._nodes[h.node].apply(h, -1)

        for j, i in zip(groups[0], slots):
            out = self._place_on(gpods[j], i, policy, rng)
            if out is None:
                undo(done)
                return None
            got[j] = out
            done.append(out[1])
        used = {h.node for h in done}
        for g in groups[1:]:
            scope = [i for i in in_domain
                     if not gpods[g[0]].gpus or model is None or self.snapshot.nodes[i].hardware.gpu_model == model]
            # nearest first: the gang's nodes, its domains from the innermost level out, all
            tries = [[i for i in scope if i in used]]
            for lv in range(len(levels) - 2, max(k, 0) - 1, -1):
                mine = {paths[lv][i] for i in used}
                tries.append([i for i in scope if paths[lv][i] in mine])
            tries.append(scope)
            seen: list = []
            placed = None
            for nodes_ in tries:
                if not nodes_ or nodes_ in seen:
                    continue
                seen.append(nodes_)
                attempt: list = []
                for j in g:
                    out = self._place_one(gpods[j], nodes_, policy, rng)
                    if isinstance(out, str):
                        undo([o[1] for _, o in attempt])
                        attempt = []
                        break
                    attempt.append((j, out))
                if attempt:
                    placed = attempt
                    break
            if placed is None:
                undo(done)
                return None
            for j, out in placed:
                got[j] = out
                done.append(out[1])
                used.add(out[1].node)
        return got

    def _try_pods(
        self, gpods: list[PodRequest], candidates: Sequence[int], policy: str, rng: SplitMix64,
        anywhere: Sequence[int] | None = None,
    ) -> list[tuple[Assignment, _Holding]] | tuple[int, str, str]:
        """All of ``gpods`` on ``candidates`` (CPU-only pods on ``anywhere`` if given; applied),
        or (placed count, pod, line) undone."""
        got: list[tuple[Assignment, _Holding]] = []
        for pod in gpods:
            out = self._place_one(pod, candidates if anywhere is None or pod.gpus else anywhere, policy, rng)
            if isinstance(out, str):
                for _, h in reversed(got):
                    self._nodes[h.node].apply(h, -1)
                return (len(got), pod.name, out)
            got.append(out)
        return got

    def _bind_one(self, a: Assignment) -> None:
        if a.pod in self._held:
            raise InvalidInputError(a.pod, "already bound")
        pod = self._decided.get(a.pod)
        if pod is None:
            raise InvalidInputError(a.pod, "no place() or schedule() decision for this pod")
        i = self._by_name.get(a.node)
        if i is None:
            raise InvalidInputError(a.pod, f"node {a.node} does not exist")
        st = self._nodes[i]

        def bad(what: str) -> InvalidInputError:
            return InvalidInputError(a.pod, f"does not fit on node {a.node}: {what}")

        cpu_free, mem_free, pods_free = st.cpu_free(), st.mem_free(), st.pods_free()
        if cpu_free is not None and pod.cpu_milli > 0 and cpu_free < pod.cpu_milli:
            raise bad("cpu")
        if mem_free is not None and pod.memory_mib > 0 and mem_free < pod.memory_mib:
            raise bad("memory")
        if pods_free is not None and pods_free < 1:
            raise bad("pods")
        if len(a.gpus) != pod.gpus or len(set(a.gpus)) != len(a.gpus):
            raise bad(f"needs {pod.gpus} distinct GPU(s), got {list(a.gpus)}")
        for g in a.gpus:
            if not (0 <= g < st.hw.gpus) or not st.healthy[g]:
                raise bad(f"GPU {g} is not a healthy GPU of the node")
        h = _Holding(node=i, cpu=pod.cpu_milli, mem=pod.memory_mib, tags=_pod_tags(pod), pod=pod)
        if pod.shared:
            g = a.gpus[0]
            if a.gpu_milli is not None and a.gpu_milli != pod.gpu_milli:
                raise bad(f"gpuMilli {a.gpu_milli} is not the pod's {pod.gpu_milli}")
            if g not in st.share_candidates(pod):
                raise bad(f"GPU {g} lacks {pod.gpu_milli} milli or the GPU memory")
            h.milli[g] = pod.gpu_milli
            h.gpu_mem[g] = pod.gpu_memory_mib
        elif pod.gpus:
            free = set(st.whole_free())
            for g in a.gpus:
                if g not in free:
                    raise bad(f"GPU {g} is not whole-free")
                h.milli[g] = 1000
            if st.hw.gpu_memory_mib is not None and pod.gpu_memory_mib > st.hw.gpu_memory_mib:
                raise bad("GPU memory")
        st.apply(h, +1)
        self._held[a.pod] = h


# --- GPU sets inside a node: exhaustive search over every candidate set ------------------


def set_score(scores: Sequence[Sequence[int]], gpus: Iterable[int]) -> int:
    """Sum of pair scores inside ``gpus``."""
    g = sorted(gpus)
    return sum(scores[a][b] for i, a in enumerate(g) for b in g[i + 1 :])


def best_split(scores: Sequence[Sequence[int]], gpus: Iterable[int], size: int, memo: dict | None = None) -> int:
    """Best total over every split of ``gpus`` into sets of ``size`` plus one of the rest."""
    memo = {} if memo is None else memo
    g = tuple(sorted(gpus))
    if not g:
        return 0
    if g in memo:
        return memo[g]
    low, rest = g[0], g[1:]
    r = len(g) % size
    block_sizes = ([size] if len(g) >= size else []) + ([r] if r else [])
    best = -1
    for b in block_sizes:
        for others in itertools.combinations(rest, b - 1):
            left = tuple(x for x in rest if x not in others)
            best = max(best, set_score(scores, (low, *others)) + best_split(scores, left, size, memo))
    memo[g] = best
    return best


def reference_select(
    scores: Sequence[Sequence[int]],
    available: Sequence[int],
    size: int,
    required: Sequence[int] = (),
    objective: str = "tiling",
) -> tuple[int, ...] | None:
    """The set placement rules pick, found by trying every candidate; None if impossible."""
    free = sorted(available)
    need = set(required)
    if len(free) < size or not need <= set(free) or len(need) > size:
        return None
    if size == 1 and not need:
        return (min(free, key=lambda i: (sum(scores[i][j] for j in free if j != i), i)),)
    memo: dict = {}
    best_key = None
    best = None
    for cand in itertools.combinations(free, size):
        if not need <= set(cand):
            continue
        own = set_score(scores, cand)
        split = best_split(scores, [x for x in free if x not in cand], size, memo)
        key = (-(own + split), -own, cand) if objective == "tiling" else (-own, -split, cand)
        if best_key is None or key < best_key:
            best_key, best = key, cand
    return best
