"""Model objects to kernel arrays and back: the only module that knows the dtypes.

The dtypes below are the C types of ``_core.pxd``; change both together and bump
:data:`KERNEL_ABI`. ``_core`` names no dtype of its own: it checks each array it is given
against the C type of the ``_core.pxd`` field that points into it.

``PackedCluster`` holds the static description of the nodes (names, models, labels,
taints, capacities) and the dynamic state arrays the kernel updates in place.
``pack_pods`` turns pod requests into the kernel's batch arrays, grouping pods that share
a selector, tolerations and GPU models into one eligibility class whose node bitset is
computed once and cached.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from placer.exceptions import InvalidInputError
from placer.kernel._core import PodBatch, derive_free_state
from placer.kernel._gather import node_columns, pod_columns
# a run's placements back to model objects, compiled beside the readers; the rest of placer takes them from here
from placer.kernel._gather import (  # noqa: F401
    any_placed_apart,
    any_prioritized,
    assignment,
    first_held,
    hold_placed,
    mask_to_indices,
    run_assignments,
)
from placer.model import (
    TAINT_FILTER_EFFECTS,
    ClusterSnapshot,
    Node,
    PodRequest,
    RunningPod,
    Taint,
    Toleration,
    first_untolerated_taint,
    tolerates_unschedulable,
)
from placer.model.affinity import (
    NODE_NAME_FIELD,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    prefilter_node_names,
    required_node_selector,
)
from placer.model import reasons as wording
from placer.model.interpod import HOSTNAME, topology_value
from placer.model.roles import canonical, defaults, eligibility_fields
from placer.model.topology import GpuTopology, Nic

# The key of an eligibility class: the pod's GPU kind, then its fields of the static roles.
_STATIC_FIELDS = eligibility_fields(PodRequest)
_static_values = attrgetter(*_STATIC_FIELDS)
_STATIC_DEFAULTS = tuple(defaults(PodRequest)[name] for name in _STATIC_FIELDS)
_PLAIN_KEYS = [(kind, *map(canonical, _STATIC_DEFAULTS)) for kind in range(4)]
_RESOURCES_AT = 1 + _STATIC_FIELDS.index("resources")  # classes that test free extended resources

KERNEL_ABI = 18  # compiled into _core by setup.py; an import against an older build fails

MASK = np.uint64  # GPU bitmask of one node (bit i = GPU i), bucket bitsets
COUNT = np.uint8  # GPUs per node
MILLI = np.int16  # free milli-GPU of one GPU (0..1000)
MIB32 = np.int32  # GPU memory of one GPU, MiB
INDEX = np.int32  # node, pod, bucket and class indices
INT = np.int32
BIG = np.int64  # CPU milli and memory MiB of a node
REAL = np.float64  # fragmentation measures, workload popularity, fgd-pack's terms
FLAG = np.uint8  # a yes/no per node (CPU tracked)

MAX_GPUS_PER_NODE = 64
MAX_TABLE_GPUS = 16  # node kinds with GPU-set tables
MAX_NICS_PER_NODE = 64
NIC_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")  # best first; SOC counts as SYS
MAX_GPU_MODELS = 63  # model id 0 is "no GPU"; ids fit one uint64 mask

# Untracked capacities are stored as these (never reached, safe to add and subtract).
UNTRACKED_BIG = np.int64(1 << 60)
UNTRACKED_INT = np.int32(1 << 30)

# gpu-clustering's per-node tag counts (``tag_count``, nodes x (max GPUs + 1)): column 0
# counts share-gpu pods (one per GPU share held), column k pods holding k whole GPUs.
# CPU-only pods carry the study's "no-gpu" tag, which its score never counts.
TAG_SHARE = 0


_NO_GPU_MODEL = ""


def node_bitset(mask: np.ndarray, n_words: int) -> np.ndarray:
    """A boolean node mask as a uint64 bitset of ``n_words`` words (bit n = node n)."""
    bits = np.zeros(n_words, dtype=np.uint64)
    packed = np.packbits(mask, bitorder="little")  # byte k: nodes 8k..8k+7, lowest bit first
    bits.view(np.uint8)[: packed.shape[0]] = packed
    return bits


def bitset_nodes(bits: np.ndarray, n_nodes: int) -> np.ndarray:
    """A node bitset back as a boolean mask of ``n_nodes`` nodes."""
    return np.unpackbits(bits.view(np.uint8), bitorder="little")[:n_nodes].astype(bool)


@dataclass
class EligibilityClass:
    """Nodes that pass the static filters for one (selector, tolerations, models) key."""

    bits: np.ndarray
    model_mask: int
    static_reasons: dict[str, int]
    reason_of: np.ndarray  # per node, the index into ``reason_names`` of its reason; -1 if none
    reason_names: list[str]

    def reasons_among(self, nodes: np.ndarray) -> dict[str, int]:
        """Static reasons counted over the nodes of a boolean mask only."""
        hit = self.reason_of[nodes]
        counts = np.bincount(hit[hit >= 0], minlength=len(self.reason_names))
        return {name: int(c) for name, c in zip(self.reason_names, counts.tolist()) if c}

    def resource_turned(self) -> tuple[np.ndarray, np.ndarray]:
        """The nodes (bool per node) the static filters turn away for a resource they lack
        (no GPUs, an extended resource short; NICs aside), and per node that reason (""
        elsewhere). kube's NodeResourcesFit names every resource such a node lacks, so the
        other shortfalls of these nodes count too."""
        codes = [c for c, name in enumerate(self.reason_names)
                 if wording.is_resource_reason(name) and name != wording.NICS]
        turned = np.isin(self.reason_of, codes) if codes else np.zeros(len(self.reason_of), dtype=bool)
        own = np.array(["", *self.reason_names], dtype=object)[self.reason_of + 1]
        own[~turned] = ""
        return turned, own


@dataclass(frozen=True)
class NodeKind:
    """Nodes that share a GPU pair-score matrix and NICs: one set of GPU-set tables."""

    topology: GpuTopology
    nics: tuple[Nic, ...]

    def nic_classes(self) -> np.ndarray:
        """Per NIC, the GPU masks of each relation in ``_typedefs.NIC_CLASSES`` order."""
        out = np.zeros((len(self.nics), len(NIC_CLASSES)), dtype=MASK)
        for j, nic in enumerate(self.nics):
            for g, label in enumerate(nic.labels):
                c = NIC_CLASSES.index("SYS" if label == "SOC" else label)
                out[j, c] |= np.uint64(1 << g)
        return out


@dataclass
class PackedCluster:
    """Static node description plus the kernel's state arrays."""

    node_names: list[str]
    node_index: dict[str, int]
    model_names: list[str]
    arrays: dict[str, np.ndarray]
    nodes: Sequence[Node]
    unschedulable: np.ndarray
    n_words: int
    kinds: list[NodeKind] = field(default_factory=list)
    extended_free: dict[str, np.ndarray] = field(default_factory=dict)  # per resource: free per node
    # per label key: each node's value as a code into the key's distinct values (-1: absent)
    _label_columns: dict[str, tuple[np.ndarray, dict[str, int]]] = field(default_factory=dict)
    _hostname_domains: tuple[np.ndarray, int] | None = None  # topology_column's, when a node lacks the label
    topology_domains: dict[str, Any] = field(default_factory=dict)  # per topology key (placer.kernel.relations)
    _class_cache: dict[tuple, EligibilityClass] = field(default_factory=dict)
    _taint_sets: list[tuple[Taint, ...]] = field(default_factory=list)
    _taint_set_of: np.ndarray | None = None
    # the snapshot's running pods by name: (node, pod); the session takes it over as its own
    holdings: dict[str, tuple[int, RunningPod]] = field(default_factory=dict)
    mig_nodes: list[int] = field(default_factory=list)  # nodes with GPUs in MIG mode
    tainted: list[int] = field(default_factory=list)  # nodes with taints
    # GPU sharing (time-slicing, MPS) per node: slots per GPU (0: the node does not share),
    # the milli one slot holds, and whether the strategy is MPS
    slot_replicas: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=INT))
    slot_milli: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=INT))
    slot_mps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    def use_resources(self, node: int, resources: Mapping[str, int], sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) extended resources on a node; the cached
        filter results that test extended resources are dropped."""
        if not resources:
            return
        for name, count in resources.items():
            free = self.extended_free.get(name)
            if free is None:
                free = self.extended_free[name] = np.zeros(self.n_nodes, dtype=np.int64)
            free[node] -= sign * count
        self._class_cache = {k: v for k, v in self._class_cache.items() if not k[_RESOURCES_AT]}

    def model_mask(self, gpu_models: Sequence[str], gpus: int) -> int:
        """Allowed model ids of a pod as a bitmask (CPU-only pods: every node)."""
        if gpus == 0:
            return (1 << len(self.model_names)) - 1
        if not gpu_models:
            return ((1 << len(self.model_names)) - 1) & ~1
        mask = 0
        for name in gpu_models:
            if name in self.model_names:
                mask |= 1 << self.model_names.index(name)
        return mask & ~1

    def label_column(self, key: str) -> tuple[np.ndarray, dict[str, int]]:
        """Per node, its value of label ``key`` as an index into the key's distinct values
        (-1: the node lacks the label), and those values with their indices."""
        found = self._label_columns.get(key)
        if found is None:
            found = self._label_columns[key] = self._codes([node.labels.get(key) for node in self.nodes])
        return found

    def _codes(self, values: list[str | None]) -> tuple[np.ndarray, dict[str, int]]:
        """One value per node as codes into the distinct values (-1: None), and those values
        with their codes (read only: may be :attr:`node_index`)."""
        if values == self.node_names:  # hostname labels, in most clusters
            return np.arange(self.n_nodes, dtype=np.int32), self.node_index
        distinct: dict[Any, None] = dict.fromkeys(values)  # the values in order of first use
        if len(distinct) == len(values) and None not in distinct:
            return np.arange(len(values), dtype=np.int32), dict(zip(distinct, range(len(values))))
        distinct.pop(None, None)
        index: dict[str, int] = dict(zip(distinct, range(len(distinct))))
        code_of: dict[Any, int] = {**index, None: -1}
        return np.fromiter(map(code_of.__getitem__, values), dtype=np.int32, count=len(values)), index

    def topology_column(self, key: str) -> tuple[np.ndarray, int]:
        """Per node, its domain of topology key ``key``
        (:func:`placer.model.interpod.topology_value`) as a code (-1: the node has none), and
        the number of domains: the label column of ``key``, but for a node without the
        hostname label, whose domain is its name."""
        codes, index = self.label_column(key)
        if key != HOSTNAME or not len(codes) or codes.min() >= 0:
            return codes, len(index)
        if self._hostname_domains is None:
            codes, index = self._codes([topology_value(node, key) for node in self.nodes])
            self._hostname_domains = (codes, len(index))
        return self._hostname_domains

    def _expression_nodes(self, e: NodeSelectorRequirement) -> np.ndarray:
        """The nodes a ``matchExpressions`` entry matches: its answer for each distinct value
        of its key (and for a node without the key), spread to the nodes by their codes."""
        codes, index = self.label_column(e.key)
        answers = np.zeros(len(index) + 1, dtype=bool)  # the last one: the node lacks the key
        if e.parses:
            if e.operator in ("In", "NotIn"):
                answers[[index[v] for v in e.values if v in index]] = True
                if e.operator == "NotIn":
                    answers = ~answers
            else:
                answers[:] = [e.matches_value(v) for v in index] + [e.matches_value(None)]
        return answers[codes]

    def term_nodes(self, term: NodeSelectorTerm) -> np.ndarray:
        """The nodes a node selector term matches (an empty term: none)."""
        if term.empty:
            return np.zeros(self.n_nodes, dtype=bool)
        nodes = np.ones(self.n_nodes, dtype=bool)
        for e in term.match_expressions:
            nodes &= self._expression_nodes(e)
        for f in term.match_fields:
            nodes &= self._field_test(f)
        return nodes

    def _field_test(self, requirement: NodeSelectorRequirement) -> np.ndarray:
        """The nodes a ``matchFields`` entry matches (:meth:`NodeSelectorRequirement.matches_field`)."""
        if requirement.key == NODE_NAME_FIELD and requirement.operator in ("In", "NotIn") and len(requirement.values) == 1:
            one = self.named(requirement.values)
            return one if requirement.operator == "In" else ~one
        # shapes the schema refuses, from a PodRequest built in Python: asked node by node
        return np.fromiter(map(requirement.matches_field, self.node_names), dtype=bool, count=self.n_nodes)

    def named(self, names: Collection[str]) -> np.ndarray:
        """The nodes of these names, as a boolean mask (names of no node are ignored)."""
        nodes = np.zeros(self.n_nodes, dtype=bool)
        nodes[[self.node_index[n] for n in names if n in self.node_index]] = True
        return nodes

    def node_affinity_nodes(self, pod: PodRequest) -> np.ndarray:
        """The nodes kube-scheduler's NodeAffinity filter lets ``pod`` use: its
        ``nodeSelector`` and its required node affinity
        (:func:`placer.model.affinity.node_affinity_matches`, over node columns)."""
        nodes = np.ones(self.n_nodes, dtype=bool)
        for k, v in pod.node_selector.items():
            codes, index = self.label_column(k)
            nodes &= codes == index.get(v, -2)
        required = required_node_selector(pod.affinity)
        if required is not None:
            anywhere = np.zeros(self.n_nodes, dtype=bool)
            for term in required.node_selector_terms:
                anywhere |= self.term_nodes(term)
            nodes &= anywhere
        return nodes

    def _taint_sets_index(self) -> tuple[list[tuple[Taint, ...]], np.ndarray]:
        if self._taint_set_of is None:
            ids: dict[tuple[Taint, ...], int] = {(): 0}
            of = np.zeros(self.n_nodes, dtype=np.int32)
            for i in self.tainted:
                hard = tuple(t for t in self.nodes[i].taints if t.effect in TAINT_FILTER_EFFECTS)
                of[i] = ids.setdefault(hard, len(ids))
            self._taint_sets = list(ids)
            self._taint_set_of = of
        return self._taint_sets, self._taint_set_of

    def tolerating_nodes(self, tolerations: Sequence[Toleration]) -> np.ndarray:
        """The nodes whose ``NoSchedule``/``NoExecute`` taints ``tolerations`` all tolerate
        (kube-scheduler's TaintToleration filter), as a boolean mask."""
        sets, set_of = self._taint_sets_index()
        refused = [i for i, taints in enumerate(sets) if first_untolerated_taint(taints, tolerations) is not None]
        return ~np.isin(set_of, refused) if refused else np.ones(self.n_nodes, dtype=bool)

    def eligibility(self, pod: PodRequest) -> EligibilityClass:
        """The cached static filter result for the pod's kind and the values of its fields
        of the static roles (:func:`placer.model.roles.eligibility_fields`)."""
        # CPU only, GPUs, one slot, several slots (MPS nodes take one slot per pod)
        gpu_kind = min(pod.gpu_slots, 2) + 1 if pod.gpu_slots else int(pod.gpus > 0)
        values = _static_values(pod)
        if values == _STATIC_DEFAULTS:
            key: tuple[Any, ...] = _PLAIN_KEYS[gpu_kind]
        else:
            key = (gpu_kind, *map(canonical, values))
        found = self._class_cache.get(key)
        if found is None:
            found = self._build_class(pod)
            self._class_cache[key] = found
        return found

    def _build_class(self, pod: PodRequest) -> EligibilityClass:
        alive = np.ones(self.n_nodes, dtype=bool)
        reasons: dict[str, int] = {}
        reason_of = np.full(self.n_nodes, -1, dtype=np.int16)
        names: list[str] = []

        def reject(mask: np.ndarray, reason: str) -> None:
            hit = alive & mask
            count = int(np.count_nonzero(hit))
            if count:
                if reason not in reasons:
                    names.append(reason)
                reasons[reason] = reasons.get(reason, 0) + count
                reason_of[:] += hit * np.int16(names.index(reason) + 1)  # from -1: each node is hit once
                alive[:] ^= hit

        # kube-scheduler's order: NodeAffinity's PreFilter, then NodeUnschedulable, NodeName,
        # TaintToleration, NodeAffinity
        named = prefilter_node_names(pod.affinity)
        if named is not None:
            reject(~self.named(named), wording.NODE_AFFINITY_PREFILTER if named else wording.AFFINITY_TERMS_CONFLICT)
        if not tolerates_unschedulable(pod.tolerations):
            reject(self.unschedulable, wording.UNSCHEDULABLE)
        if pod.node_name is not None:
            reject(~self.named((pod.node_name,)), wording.NODE_NAME)
        reject(~self.tolerating_nodes(pod.tolerations), wording.UNTOLERATED_TAINT)
        if pod.node_selector or required_node_selector(pod.affinity) is not None:
            reject(~self.node_affinity_nodes(pod), wording.SELECTOR)
        model_mask = self.model_mask(pod.gpu_models, pod.gpus or pod.gpu_slots)
        if pod.uses_gpus:
            model_id = self.arrays["model_id"]
            reject(model_id == 0, wording.NO_GPU)
            allowed = ((model_mask >> model_id) & 1).astype(bool)
            known = [m for m in self.model_names[1:] if m]
            if pod.gpu_models and not set(pod.gpu_models) & set(known):
                reject(~allowed, wording.missing_gpu_models(pod.gpu_models, known))
            else:
                reject(~allowed, wording.GPU_MODEL)
            shares = self.slot_replicas > 0
            if pod.gpu_slots:
                reject(~shares, wording.NO_GPU_SLOTS)
                if pod.gpu_slots > 1:
                    reject(self.slot_mps, wording.MPS_ONE_SLOT)
            else:
                reject(shares, wording.ONLY_GPU_SLOTS)
        if pod.nics:
            reject(self.arrays["nic_count"] < pod.nics, wording.NICS)
        for name, count in sorted(pod.resources.items()):
            free = self.extended_free.get(name)
            reject(np.ones(self.n_nodes, dtype=bool) if free is None else free < count, wording.insufficient(name))
        return EligibilityClass(node_bitset(alive, self.n_words), model_mask, reasons, reason_of, names)


def pack_snapshot(snapshot: ClusterSnapshot) -> PackedCluster:
    """Build the static description and the initial state arrays of a snapshot.

    Nodes share their hardware objects (a node type is one object), so capacities are
    worked out once per distinct hardware and spread to the nodes by index; what running
    pods hold is taken off with one scatter per resource.
    """
    nodes = snapshot.nodes
    n = len(nodes)
    columns = node_columns(nodes)
    if columns["no_hardware"] >= 0:
        raise InvalidInputError(
            f"nodes[{columns['no_hardware']}].hardware",
            "a Node built in Python needs its hardware (a document's nodes get it when decoded)",
        )
    hw_of = columns["hardware_of"]
    first_node = columns["first_node"]
    distinct: list[Any] = columns["hardware"]
    max_gpus = max((hw.gpus for hw in distinct), default=0)
    stride = max(max_gpus, 1)
    n_words = max((n + 63) // 64, 1)

    model_names = [_NO_GPU_MODEL]
    model_lookup = {_NO_GPU_MODEL: 0}
    kinds: list[NodeKind] = []
    kind_ids: dict[NodeKind, int] = {}
    hw_model = np.zeros(len(distinct), dtype=INDEX)
    for k, hw in enumerate(distinct):
        if hw.gpus:
            name = hw.gpu_model or "gpu"
            mid = model_lookup.get(name)
            if mid is None:
                mid = len(model_names)
                if mid > MAX_GPU_MODELS:
                    raise InvalidInputError(
                        f"nodes[{first_node[k]}].gpuModel", f"more than {MAX_GPU_MODELS} distinct GPU models"
                    )
                model_lookup[name] = mid
                model_names.append(name)
            hw_model[k] = mid

    def per_hw(values: list[Any], dtype: Any) -> np.ndarray:
        return np.array(values, dtype=dtype)[hw_of] if n else np.zeros(0, dtype=dtype)

    untracked_int, untracked_big = int(UNTRACKED_INT), int(UNTRACKED_BIG)
    gpu_count = per_hw([hw.gpus for hw in distinct], COUNT)
    model_id = hw_model[hw_of] if n else np.zeros(0, dtype=INDEX)
    gpu_mem_cap = per_hw([untracked_int if hw.gpu_memory_mib is None else hw.gpu_memory_mib for hw in distinct], MIB32)
    cpu_free = per_hw([untracked_big if hw.cpu_milli is None else hw.cpu_milli for hw in distinct], BIG)
    cpu_tracked = per_hw([hw.cpu_milli is not None for hw in distinct], FLAG)
    mem_free = per_hw([untracked_big if hw.memory_mib is None else hw.memory_mib for hw in distinct], BIG)
    pods_free = per_hw([untracked_int if hw.max_pods is None else hw.max_pods for hw in distinct], INT)
    nic_count = per_hw([len(hw.nic_list) for hw in distinct], INT)
    kind_of = per_hw([_kind_id(hw, kinds, kind_ids) for hw in distinct], INDEX)

    present = np.arange(stride) < gpu_count[:, None].astype(np.intp)
    gpu_free_milli = np.where(present, 1000, 0).astype(MILLI)
    gpu_free_mem = np.where(present, gpu_mem_cap[:, None], 0).astype(MIB32)
    unhealthy_at = [(i, g) for i in columns["unhealthy"] for g in nodes[i].unhealthy_gpus]
    # a GPU in MIG mode serves only MIG instances (placer.kernel.mig), never whole or shared pods
    mig_nodes = (
        np.flatnonzero(np.array([hw.mig is not None for hw in distinct])[hw_of]).tolist()
        if any(hw.mig is not None for hw in distinct) else []
    )
    mig_at = [(i, g) for i in mig_nodes for g in nodes[i].hardware.mig_gpus]

    # gpu-clustering: per node, running pods per GPU tag (column 0 share-gpu, k: k-gpu)
    tag_count = np.zeros((n, stride + 1), dtype=INT)
    running = columns["running"]
    at = columns["running_node"]
    cpu_free -= columns["cpu_milli"]
    mem_free -= columns["memory_mib"]
    pods_free -= columns["pod_count"].astype(INT)
    held = columns["held"]
    if len(columns["gpus"]):
        gpu_free_milli[np.repeat(at, held), columns["gpus"]] = 0
        with_gpus = held > 0
        cells = at[with_gpus] * (stride + 1) + held[with_gpus]
        tag_count += np.bincount(cells, minlength=n * (stride + 1)).reshape(n, stride + 1).astype(INT)
    for k in columns["special"]:  # pods of GPU shares, GPU memory or GPU slots
        i, p = int(at[k]), running[k]
        for g, m in p.gpu_shares.items():
            gpu_free_milli[i, g] -= m
        for g, count in p.gpu_slots.items():
            gpu_free_milli[i, g] -= count * nodes[i].hardware.gpu_sharing.slot_milli
        tag_count[i, 0] += len(p.gpu_slots)  # one share-gpu tag per GPU, as the kernel binds
        tag_count[i, 0] += len(p.gpu_shares)
        for g, m in p.gpu_memory_mib.items():
            gpu_free_mem[i, g] -= m
    # after the pods: a share held on a GPU that turned unhealthy leaves it at 0, not below
    for off in (unhealthy_at, mig_at):
        if off:
            rows, cols = np.array(off, dtype=np.intp).T
            gpu_free_milli[rows, cols] = 0
            gpu_free_mem[rows, cols] = 0

    n_models = len(model_names)
    model_max = np.zeros(n_models, dtype=INDEX)
    np.maximum.at(model_max, model_id, gpu_count.astype(INDEX))
    bucket_base = np.zeros(n_models, dtype=INDEX)
    bucket_base[1:] = np.cumsum(model_max[:-1] + 1)
    n_buckets = int(bucket_base[-1] + model_max[-1] + 1)

    arrays = {
        "free_mask": np.zeros(n, dtype=MASK),
        "free_count": np.zeros(n, dtype=COUNT),
        "gpu_count": gpu_count,
        "gpu_free_milli": gpu_free_milli,
        "gpu_free_mem": gpu_free_mem,
        "gpu_mem_cap": gpu_mem_cap,
        "free_milli_sum": np.zeros(n, dtype=INT),
        "cpu_free": cpu_free,
        "mem_free": mem_free,
        "pods_free": pods_free,
        "cpu_tracked": cpu_tracked,
        "model_id": model_id,
        "model_max": model_max,
        "bucket_base": bucket_base,
        "bucket_of": np.zeros(n, dtype=INDEX),
        "bucket_bits": np.zeros((n_buckets, n_words), dtype=MASK),
        "bucket_cpu_floor": np.zeros(n_buckets, dtype=BIG),
        "room_bits": np.zeros(n_words, dtype=MASK),  # nodes with some GPU milli free
        "kind_of": kind_of,
        "kind_gpus": np.array([k.topology.gpus for k in kinds], dtype=INT),
        "kind_nics": np.array([len(k.nics) for k in kinds], dtype=INT),
        "nic_count": nic_count,
        "tag_count": tag_count,
        "tag_kinds": (tag_count > 0).sum(axis=1, dtype=INT),
    }
    names = columns["names"]
    packed = PackedCluster(
        node_names=names,
        node_index=dict(zip(names, range(n))),
        model_names=model_names,
        arrays=arrays,
        nodes=nodes,
        unschedulable=columns["unschedulable"].view(bool),
        n_words=n_words,
        kinds=kinds,
        holdings=columns["holdings"],
        mig_nodes=mig_nodes,
        tainted=columns["tainted"],
        slot_replicas=per_hw([0 if hw.gpu_sharing is None else hw.gpu_sharing.replicas for hw in distinct], INT),
        slot_milli=per_hw([0 if hw.gpu_sharing is None else hw.gpu_sharing.slot_milli for hw in distinct], INT),
        slot_mps=per_hw([hw.gpu_sharing is not None and hw.gpu_sharing.strategy == "mps" for hw in distinct], bool),
    )
    for i in columns["node_resources"]:
        for name, amount in nodes[i].resources.items():
            packed.extended_free.setdefault(name, np.zeros(n, dtype=np.int64))[i] += amount.allocatable
    for k in columns["pod_resources"]:
        packed.use_resources(int(at[k]), running[k].resources, 1)
    refresh_derived(packed)
    return packed


def _kind_id(hw: Any, kinds: list[NodeKind], ids: dict[NodeKind, int]) -> int:
    """The kind of a node's hardware; -1 when it has no GPU topology or NICs to use.

    Kinds of more than ``MAX_TABLE_GPUS`` GPUs get no tables: the kernel gives their pods
    the lowest free indices.
    """
    nics = hw.nic_list
    topo = hw.gpu_topology
    if topo is None and not nics:
        return -1
    if topo is None:
        topo = GpuTopology(gpus=hw.gpus, labels=None)
    kind = NodeKind(topo, tuple(nics))
    found = ids.get(kind)
    if found is None:
        found = ids[kind] = len(kinds)
        kinds.append(kind)
    return found


def refresh_derived(packed: PackedCluster) -> None:
    """Recompute free masks, counts, sums and bucket bitsets from per-GPU free milli."""
    derive_free_state(packed.arrays, int(UNTRACKED_BIG))


def pack_pods(
    packed: PackedCluster, pods: Sequence[PodRequest], groups: Sequence[int] | None = None
) -> tuple[PodBatch, list[EligibilityClass], list[int]]:
    """The kernel's batch of ``pods``, the eligibility classes of its rows, and the
    positions of the pods that ask for extended resources.

    ``groups`` gives, per pod, the end index of its all-or-nothing group (``None``: every
    pod is its own group).
    """
    count = len(pods)
    counts, quantities, plain, with_resources = pod_columns(pods)
    classes: list[EligibilityClass] = []
    class_row: dict[int, int] = {}
    klass = np.empty(count, dtype=INDEX)
    # pods without static filters share one class per kind (CPU-only, with GPUs): placed at
    # their first pod; every other pod is looked up alone (the cache keys its filters)
    filtered = plain == 0
    with_gpus = counts[0] > 0
    unfiltered_kinds = [np.flatnonzero(~filtered & ~with_gpus), np.flatnonzero(~filtered & with_gpus)]
    firsts = [(int(members[0]), members) for members in unfiltered_kinds if len(members)]
    at = np.flatnonzero(filtered)
    runs = alike_runs([(p.gpus > 0, p.gpu_slots, _static_values(p)) for p in map(pods.__getitem__, at.tolist())])
    firsts += [(int(at[a]), at[a:b]) for a, b in zip(runs, runs[1:])]
    by_identity: dict[tuple[int, ...], EligibilityClass] = {}  # replicas share their field objects
    for j, members in sorted(firsts, key=itemgetter(0)):
        same = (pods[j].gpus > 0, pods[j].gpu_slots, *map(id, _static_values(pods[j])))
        ec = by_identity.get(same)
        if ec is None:
            ec = by_identity[same] = packed.eligibility(pods[j])
        row = class_row.get(id(ec))
        if row is None:
            row = class_row[id(ec)] = len(classes)
            classes.append(ec)
        klass[members] = row
    if classes:
        bitsets = np.stack([c.bits for c in classes])
        models = np.array([c.model_mask for c in classes], dtype=MASK)[klass]
    else:
        bitsets = np.zeros((0, packed.n_words), dtype=MASK)
        models = np.zeros(0, dtype=MASK)
    batch = PodBatch(
        counts[0],
        counts[1],
        counts[2],
        quantities[0],
        quantities[1],
        counts[3],
        models,
        klass,
        np.arange(1, count + 1, dtype=INDEX) if groups is None else np.asarray(groups, dtype=INDEX),
        bitsets,
    )
    return batch, classes, with_resources


def alike_runs(keys: Sequence[Any]) -> list[int]:
    """Where each run of consecutive equal ``keys`` starts, then ``len(keys)`` (the replicas
    of one entry share their field objects, so their keys compare equal at once)."""
    if not keys:
        return [0]
    return [0, *[j for j, (a, b) in enumerate(zip(keys, keys[1:]), 1) if a != b], len(keys)]


def indices_to_mask(indices: Sequence[int]) -> int:
    """A bitmask of GPU indices."""
    mask = 0
    for i in indices:
        mask |= 1 << i
    return mask


def workload_arrays(
    packed: PackedCluster, workload: Any, node_frag: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The arguments of ``Kernel.set_workload`` for a :class:`placer.workload.fragmentation.Workload`
    (``node_frag`` is filled by the kernel)."""
    types = {
        "cpu": np.array([t.cpu_milli for t in workload.types], dtype=BIG),
        "milli": np.array([t.gpu_milli for t in workload.types], dtype=INT),
        "gpus": np.array([t.num_gpu for t in workload.types], dtype=INT),
        "models": np.array(
            [packed.model_mask(t.gpu_models, max(t.num_gpu, 1)) for t in workload.types], dtype=MASK
        ),
        "pop": np.array(workload.popularity, dtype=REAL),
    }
    assert len(packed.model_names) <= MAX_GPU_MODELS + 1
    cells = packed.n_nodes * len(workload.types)
    return types, node_frag, np.zeros(cells, dtype=INT), np.zeros(cells, dtype=BIG)
