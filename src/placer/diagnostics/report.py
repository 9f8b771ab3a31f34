"""``placer report``: what a cluster can still run, how fragmented it is, what looks wrong.

Three parts, all computed from a snapshot (the free state its running pods leave):

* **Schedulable per shape** — for each request shape (1, 2, 4, 8 whole GPUs and 0.5 and
  0.25 of a GPU, or the types of a given workload), how many such pods fit at once, each
  node counted on its own, and the GPUs they would use beside the free GPUs they could
  reach. "16 GPUs free, but 0 of them usable by an 8-GPU job" is fragmentation in the
  units a user asks about. Cordoned nodes and nodes of GPU models the shape may not use
  are left out; tainted nodes count (GPU nodes are commonly tainted for GPU pods, which
  tolerate it) and are listed among the findings.
* **Fragmentation** — the FGD measure (:func:`placer.workload.fragmentation.cluster_fragment`) for
  the workload, over the same nodes.
* **MIG** — per GPU model with GPUs in MIG mode and per profile, how many more instances
  fit now (free instances on static GPUs; free and creatable ones on dynamic GPUs) and if
  every idle static GPU were re-split, beside the free slices
  (:func:`placer.mig.plans.mig_capacity`); tables whose starts are inferred say so.
* **Findings** — registration gaps (``nvidia.com/gpu`` capacity, allocatable and the
  GPUs the node hardware or the ``nvidia.com/gpu.count`` label says it has, disagreeing;
  a node labelled as a GPU node that offers no GPUs at all, as a node copy cut before its
  ``status.capacity`` gives),
  unhealthy GPUs, cordoned and tainted nodes, running pods whose GPU indices the source did
  not give (placer assumed them), extended resources that pods ask for but no node offers,
  NVLink domains whose nodes carry different ``nvidia.com/gpu.clique`` ids, GPU nodes
  in no domain of a topology level (a gang that requires the level never uses them),
  over-committed nodes (each resource their running pods hold more of than they offer)
  and running pods holding GPUs that have turned unhealthy.

:func:`node_rows` is the per-node view instead (``placer report --nodes``). Free GPUs are counted one way throughout (:data:`FREE_GPUS_SCOPE`): on schedulable nodes,
those free on cordoned, drained and down nodes given apart.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from placer.placement import gangs
from placer.placement import sharing
from placer.kernel import KernelSession
from placer.placement.cluster import Cluster
from placer.workload.fragmentation import CLASSES, ClusterFragment, TaskType, Workload, cluster_fragment
from placer.mig.plans import ModelCapacity, mig_capacity
from placer.model import UNSCHEDULABLE_TAINT, ClusterSnapshot, PodRequest, Toleration
from placer.model.labels import SLURM_REASON_LABEL, SLURM_STATE_LABEL, gpu_node_label
from placer.text.lines import aligned, paint, some_of

__all__ = [
    "STANDARD_SHAPES",
    "ShapeRow",
    "Finding",
    "ClusterReport",
    "standard_workload",
    "cluster_report",
    "offered_resources",
    "gpu_count_findings",
    "SLOT_SHAPES",
    "SlotRow",
    "SharingSummary",
    "FREE_GPUS_SCOPE",
    "NodeRow",
    "node_rows",
    "nodes_text",
    "finding_color",
]

STANDARD_SHAPES = (
    TaskType(0, 1000, 1),
    TaskType(0, 1000, 2),
    TaskType(0, 1000, 4),
    TaskType(0, 1000, 8),
    TaskType(0, 500, 1),
    TaskType(0, 250, 1),
)
"""The shapes reported when no workload is given (no CPU request, any GPU model)."""

SLOT_SHAPES = (1, 2, 4)
"""The ``gpuSlots`` shapes reported when some node shares its GPUs (time-slicing, MPS)."""

FREE_GPUS_SCOPE = "schedulable nodes: cordoned, drained, down and GPU-sharing nodes left out, tainted nodes counted"
"""What the report counts as free GPUs, in its header, its shape table and its fragment."""

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_NO_LIMIT = 1 << 40
_GPU_RESOURCE = "nvidia.com/gpu"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_GPU_COUNT_LABEL = "nvidia.com/gpu.count"
_MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
_CLIQUE_LABEL = "nvidia.com/gpu.clique"


def standard_workload() -> Workload:
    """:data:`STANDARD_SHAPES`, equally popular: the default workload of the report."""
    n = len(STANDARD_SHAPES)
    return Workload(types=STANDARD_SHAPES, popularity=tuple(1.0 / n for _ in STANDARD_SHAPES))


def shape_label(shape: TaskType) -> str:
    """``"2 GPUs"``, ``"0.5 GPU"``, ``"CPU only"``; with CPU and models when set."""
    if shape.num_gpu == 0 or shape.gpu_milli == 0:
        text = "CPU only"
    elif shape.gpu_milli == 1000:
        text = f"{shape.num_gpu} GPU" + ("s" if shape.num_gpu > 1 else "")
    else:
        text = f"{shape.gpu_milli / 1000:g} GPU" + (f" x {shape.num_gpu}" if shape.num_gpu > 1 else "")
    if shape.cpu_milli:
        text += f", {shape.cpu_milli / 1000:g} CPU"
    if shape.gpu_models:
        text += f" ({'|'.join(shape.gpu_models)})"
    return text


@dataclass(frozen=True)
class ShapeRow:
    """How many pods of one shape fit now.

    Attributes
    ----------
    shape : TaskType
    pods : int
        Pods of the shape that fit at once (each node counted on its own).
    gpus : float
        GPUs those pods would use (pods × GPUs per pod × share).
    reachable_free_gpus : float
        Free GPUs on the nodes the shape may use.
    nodes : int
        Nodes where at least one pod of the shape fits.
    """

    shape: TaskType
    pods: int
    gpus: float
    reachable_free_gpus: float
    nodes: int

    @property
    def usable_pct(self) -> float | None:
        """``gpus`` as a percentage of ``reachable_free_gpus`` (``None`` when nothing is free:
        0 of 0 is no share at all)."""
        return 100.0 * self.gpus / self.reachable_free_gpus if self.reachable_free_gpus else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": shape_label(self.shape),
            "gpus": self.shape.num_gpu,
            "gpuMilli": self.shape.gpu_milli,
            "cpuMilli": self.shape.cpu_milli,
            "gpuModels": list(self.shape.gpu_models),
            "pods": self.pods,
            "schedulableGpus": round(self.gpus, 3),
            "reachableFreeGpus": round(self.reachable_free_gpus, 3),
            "usablePct": None if self.usable_pct is None else round(self.usable_pct, 2),
            "nodes": self.nodes,
        }


@dataclass(frozen=True)
class Finding:
    """One health finding: a kind, the node (or ``""`` for the cluster) and what was seen."""

    kind: str
    node: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "node": self.node, "detail": self.detail}


@dataclass(frozen=True)
class SlotRow:
    """How many pods of ``slots`` GPU slots (``gpuSlots``) fit now on the sharing nodes,
    each node counted on its own, and on how many nodes."""

    slots: int
    pods: int
    nodes: int

    def to_dict(self) -> dict[str, Any]:
        return {"gpuSlots": self.slots, "pods": self.pods, "slots": self.pods * self.slots, "nodes": self.nodes}


@dataclass(frozen=True)
class SharingSummary:
    """The nodes that share their GPUs (time-slicing, MPS), counted apart: their physical
    GPUs, the slots those offer and the slots free now. Their GPUs take only pods of
    ``gpuSlots``, so the whole-GPU and share shapes of the report leave them out."""

    nodes: int
    gpus: int
    slots: int
    free_slots: int
    replicas: tuple[int, ...]
    rows: tuple[SlotRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "gpus": self.gpus,
            "slots": self.slots,
            "freeSlots": self.free_slots,
            "replicas": list(self.replicas),
            "schedulable": [row.to_dict() for row in self.rows],
        }

    def to_text(self) -> list[str]:
        """Lines for the text report."""
        per = "/".join(map(str, self.replicas))
        lines = [
            "",
            f"GPU sharing (time-slicing, MPS): {self.nodes} node(s), {self.gpus} GPU(s) × {per} slots = "
            f"{self.slots} slots, {self.free_slots} free; whole-GPU shapes above leave these GPUs out",
            "",
        ]
        rows = [["shape", "pods", "slots", "nodes"]]
        for row in self.rows:
            label = f"{row.slots} slot" + ("s" if row.slots > 1 else "")
            rows.append([label, str(row.pods), str(row.pods * row.slots), str(row.nodes)])
        return lines + aligned(rows, right=frozenset((1, 2, 3)), indent="  ")


@dataclass(frozen=True)
class ClusterReport:
    """The report of one snapshot (see the module notes)."""

    nodes: int
    gpus: int
    free_gpu_milli: int  # on the schedulable nodes (FREE_GPUS_SCOPE), as every figure of the report
    whole_free_gpus: int
    shapes: tuple[ShapeRow, ...]
    fragment: ClusterFragment
    workload_source: str
    findings: tuple[Finding, ...]
    sharing: SharingSummary | None = None
    mig: tuple[ModelCapacity, ...] = ()
    unschedulable_free_gpu_milli: int = 0  # on cordoned, drained and down nodes: counted nowhere else

    def to_dict(self) -> dict[str, Any]:
        frag = self.fragment
        extra = {} if self.sharing is None else {"gpuSharing": self.sharing.to_dict()}
        return {
            "nodes": self.nodes,
            "gpus": self.gpus,
            "freeGpus": round(self.free_gpu_milli / 1000, 3),
            "wholeFreeGpus": self.whole_free_gpus,
            "freeGpusOnUnschedulableNodes": round(self.unschedulable_free_gpu_milli / 1000, 3),
            "freeGpusScope": FREE_GPUS_SCOPE,
            **extra,
            "schedulable": [row.to_dict() for row in self.shapes],
            "fragmentation": {
                "workload": self.workload_source,
                "fragmentGpus": round(frag.total / 1000, 3),
                "fragmentPct": round(frag.amount_pct, 3),
                "fragmentRate": round(frag.rate, 4),
                "classes": {c: round(frag.classes[c] / 1000, 3) for c in CLASSES},
            },
            "mig": [m.to_dict() for m in self.mig],
            "findings": [f.to_dict() for f in self.findings],
        }

    def to_text(self, color: bool = False) -> str:
        """A readable table; ``color``: findings coloured with ANSI escapes (for a terminal)."""
        shared = "" if self.sharing is None else f" and {self.sharing.gpus} shared GPU(s) (below)"
        aside = self.unschedulable_free_gpu_milli / 1000
        lines = [
            f"{self.nodes} node(s), {self.gpus - (self.sharing.gpus if self.sharing else 0)} GPU(s){shared}: "
            f"{self.free_gpu_milli / 1000:g} free on schedulable nodes ({self.whole_free_gpus} whole)"
            + (f"; plus {aside:g} on cordoned/drained/down nodes" if aside else ""),
            f"  (free GPUs on {FREE_GPUS_SCOPE}; the same in the table and the fragment)",
            "",
            "Schedulable now, per request shape (each node counted on its own):",
            "",
        ]
        rows = [["shape", "pods", "GPUs", "of free", "usable", "nodes"]]
        for row in self.shapes:
            usable = "—" if row.usable_pct is None else f"{row.usable_pct:.1f}%"
            rows.append([shape_label(row.shape), str(row.pods), f"{row.gpus:g}", f"{row.reachable_free_gpus:g}",
                         usable, str(row.nodes)])
        lines += aligned(rows, right=frozenset((1, 2, 3, 4, 5)), indent="  ")
        if self.sharing is not None:
            lines += self.sharing.to_text()
        frag = self.fragment
        lines += [
            "",
            f"Fragmentation (FGD measure, workload: {self.workload_source}): "
            f"{frag.total / 1000:.2f} GPU(s), {frag.amount_pct:.2f} % of the schedulable nodes' capacity, "
            f"{100 * frag.rate:.1f} % of the free GPUs",
        ]
        lines += _mig_lines(self.mig)
        if self.findings:
            lines += ["", "Findings:"]
            lines += [f"  {paint(f.kind, finding_color(f.kind), color)}: {f.node + ': ' if f.node else ''}{f.detail}"
                      for f in self.findings]
        else:
            lines += ["", "Findings: none"]
        return "\n".join(lines) + "\n"


_SEVERE_FINDINGS = frozenset(("unhealthy-gpus", "down", "gpu-capacity-missing", "gpu-registration",
                              "resource-not-offered", "over-committed", "unhealthy-gpu-held"))


def finding_color(kind: str) -> str:
    """The colour of a finding's kind on a terminal: red for what breaks placement, else yellow."""
    return "red" if kind in _SEVERE_FINDINGS else "yellow"


def _mig_lines(models: Sequence[ModelCapacity]) -> list[str]:
    """The MIG section of the text report (no lines without MIG GPUs)."""
    if not models:
        return []
    lines = ["", "MIG instances that still fit, per GPU model and profile (each profile on its own):"]
    for m in models:
        largest = m.largest_fitting()
        usable = (f"{largest.now * largest.memory_slices} usable by the largest profile that fits ({largest.profile})"
                  if largest is not None else "no profile fits")
        lines += [
            "",
            f"  {m.model}: {m.gpus} MIG GPU(s) ({m.static_gpus} static, {m.idle_static_gpus} of them idle; "
            f"{m.gpus - m.static_gpus} dynamic)",
            f"  {m.free_slices} of {m.slices} slices free (no instance in use), {usable}",
        ]
        if not m.placements_confirmed:
            lines.append("  starts inferred, not read from nvidia-smi")
        rows = [["profile", "now", "static", "dynamic", "re-split", "slices"]]
        rows += [[p.profile, str(p.now), str(p.static), str(p.dynamic), str(p.if_resplit), str(p.now * p.memory_slices)]
                 for p in m.profiles]
        lines += aligned(rows, right=frozenset((1, 2, 3, 4, 5)), indent="  ")
    return lines


def _findings(snapshot: ClusterSnapshot, pods: Sequence[PodRequest] = ()) -> list[Finding]:
    out = []
    offered = offered_resources(snapshot)
    for name in sorted({name for pod in pods for name in pod.resources} - offered):
        users = [pod.name for pod in pods if name in pod.resources]
        out.append(Finding("resource-not-offered", "", f"{name}, asked by {some_of(users)}, is offered by no node"))
    for node in snapshot.nodes:
        out += gpu_count_findings(node)
        for rp in node.pods:
            if rp.unknown_gpu_slots:
                held = ", ".join(f"GPU {g} ({c} slot{'s' if c > 1 else ''})" for g, c in rp.gpu_slots.items())
                out.append(Finding("gpu-indices-unknown", node.name,
                                   f"pod {rp.name} holds {rp.unknown_gpu_slots} GPU slot(s) on GPUs the source did "
                                   f"not give; placer assumes {held}"))
            elif not rp.gpu_indices_known:
                out.append(Finding("gpu-indices-unknown", node.name,
                                   f"pod {rp.name} holds {len(rp.gpus)} GPU(s) at indices the source did not "
                                   f"give; placer assumes {', '.join(map(str, rp.gpus))}"))
            for name, count in rp.resources.items():
                if name not in node.resources:
                    out.append(Finding("resource-not-offered", node.name,
                                       f"pod {rp.name} holds {count} {name}, which the node does not offer"))
        if node.unhealthy_gpus:
            gpus = ", ".join(map(str, sorted(node.unhealthy_gpus)))
            out.append(Finding("unhealthy-gpus", node.name, f"GPU(s) {gpus} unhealthy"))
        out += _over_committed(node)
        if node.unschedulable:
            out.append(_unschedulable(node))
        blocking = [t for t in node.taints if t.effect in _BLOCKING_EFFECTS]
        if blocking:
            text = ", ".join(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in blocking)
            out.append(Finding("tainted", node.name, text))
    out += _mixed_cliques(snapshot)
    out += _outside_levels(snapshot)
    return out


def _over_committed(node: Any) -> list[Finding]:
    """``over-committed``: each resource of the node its running pods hold more of than it
    offers (no pod that asks for it is placed there, as kube does); ``unhealthy-gpu-held``:
    each running pod holding (a share of) a GPU that has turned unhealthy."""
    hw = node.hardware
    held = {
        "cpuMilli": (hw.cpu_milli, sum(rp.cpu_milli for rp in node.pods)),
        "memoryMiB": (hw.memory_mib, sum(rp.memory_mib for rp in node.pods)),
        "maxPods": (hw.max_pods, len(node.pods)),
    }
    for name, offer in node.resources.items():
        held[name] = (offer.allocatable, sum(rp.resources.get(name, 0) for rp in node.pods))
    out = [
        Finding("over-committed", node.name,
                f"running pods hold {used} {name} of {cap} ({used - cap} over): no pod that asks for it is placed here")
        for name, (cap, used) in held.items() if cap is not None and used > cap
    ]
    unhealthy = set(node.unhealthy_gpus)
    for rp in node.pods:
        on = sorted(unhealthy.intersection({*rp.gpus, *rp.gpu_shares, *rp.gpu_slots}))
        if on:
            out.append(Finding("unhealthy-gpu-held", node.name,
                               f"pod {rp.name} holds unhealthy GPU(s) {', '.join(map(str, on))}"))
    return out


def _outside_levels(snapshot: ClusterSnapshot) -> list[Finding]:
    """Per topology level some GPU node is placed in, the GPU nodes in no domain of it: a
    gang that requires the level never uses them."""
    gpu_nodes = [node for node in snapshot.nodes if node.hardware.gpus]
    out = []
    for level in snapshot.topology_levels:
        outside = [node.name for node in gpu_nodes if node.topology.get(level) is None]
        if outside and len(outside) < len(gpu_nodes):
            out.append(Finding("outside-topology", "",
                               f"{len(outside)} of {len(gpu_nodes)} GPU node(s) are in no {level} domain: "
                               f"{some_of(outside)}; a gang that requires level {level} never uses them"))
    return out


def _unschedulable(node: Any) -> Finding:
    """A node that takes no new pods: Slurm's state and reason when it came from Slurm
    (``drained``, ``down``), else a Kubernetes cordon."""
    state = node.labels.get(SLURM_STATE_LABEL)
    if state is None:
        return Finding("cordoned", node.name, "unschedulable (cordoned)")
    flags = [flag.rstrip("*~#!%$@^-+") for flag in state.split("+")]
    kind = "down" if "DOWN" in flags else "drained" if any(f.startswith("DRAIN") for f in flags) else "unschedulable"
    reason = node.labels.get(SLURM_REASON_LABEL)
    return Finding(kind, node.name, f"Slurm State={state}" + (f", Reason={reason}" if reason else ", no Reason given"))


def offered_resources(snapshot: ClusterSnapshot) -> set[str]:
    """Extended resources some node of ``snapshot`` has allocatable."""
    return {name for node in snapshot.nodes for name, r in node.resources.items() if r.allocatable > 0}


def gpu_count_findings(node: Any) -> list[Finding]:
    """GPUs the node has (hardware, label) against what it offers (capacity, allocatable).

    One ``gpu-capacity-missing`` finding for a node that a GPU label
    (:data:`placer.model.labels.GPU_NODE_LABELS`) marks as a GPU node but that has
    no GPUs and offers neither ``nvidia.com/gpu`` nor MIG instances (a node copy cut before
    ``status.capacity`` when CPU, memory and pods are untracked too, else no device
    plugin); otherwise one ``gpu-registration`` finding when the counts disagree.

    Parameters
    ----------
    node : Node
        A snapshot node.

    Returns
    -------
    list of Finding
        At most one.
    """
    marked = gpu_node_label(node.labels)
    offers_gpus = any(k == _GPU_RESOURCE or k.startswith(_MIG_RESOURCE_PREFIX) for k in node.resources)
    if marked is not None and not node.hardware.gpus and not offers_gpus:
        hw = node.hardware
        if hw.cpu_milli is None and hw.memory_mib is None and hw.max_pods is None:
            cause = "; CPU, memory and pods are untracked too: was status.capacity cut from the input?"
        else:
            cause = ": is the device plugin running?"
        key, value = marked
        detail = f"labelled as a GPU node ({key}={value}) but has 0 GPUs and no {_GPU_RESOURCE} capacity{cause}"
        return [Finding("gpu-capacity-missing", node.name, detail)]
    sharing_ = node.hardware.gpu_sharing
    per_gpu = 1 if sharing_ is None else sharing_.replicas  # a sharing node offers slots
    mig_gpus = len(node.hardware.mig_gpus)
    single = node.labels.get(_MIG_STRATEGY_LABEL) == "single"
    seen = {"hardware": node.hardware.gpus * per_gpu}
    # each count, as the GPUs it stands for: nvidia.com/gpu leaves out the GPUs in MIG mode
    # (mixed strategy), GFD's count label counts the MIG devices under the single strategy
    meant = dict(seen)
    res = node.resources.get(_GPU_RESOURCE)
    if res is not None:
        seen["capacity"] = res.capacity
        seen["allocatable"] = res.allocatable
        meant["capacity"] = res.capacity + mig_gpus * per_gpu
        meant["allocatable"] = res.allocatable + mig_gpus * per_gpu
    label = node.labels.get(_GPU_COUNT_LABEL)
    if label is not None and label.isdigit():
        seen["label"] = meant["label"] = int(label) * per_gpu
        if single and int(label) == len(node.mig_instances):
            meant["label"] = meant["hardware"]
    if len(set(meant.values())) <= 1:
        return []
    text = ", ".join(f"{k} {v}" for k, v in seen.items())
    if mig_gpus and res is not None:
        text = f"{text} ({mig_gpus} GPU(s) in MIG mode, which {_GPU_RESOURCE} does not count)"
    if sharing_ is not None:
        return [Finding("gpu-registration", node.name,
                        f"GPU slot counts disagree ({sharing_.replicas} slots per GPU): {text}")]
    return [Finding("gpu-registration", node.name, f"GPU counts disagree: {text}")]


def _mixed_cliques(snapshot: ClusterSnapshot) -> list[Finding]:
    """Domains of the innermost topology level whose nodes carry different clique ids."""
    levels = [lv for lv in snapshot.topology_levels if lv != "clique"]
    if not levels:
        return []
    level = levels[-1]
    path_levels = snapshot.topology_levels[: snapshot.topology_levels.index(level) + 1]
    by_domain: dict[str, set[str]] = {}
    for node in snapshot.nodes:
        if node.topology.get(level) is None or not node.hardware.gpus:
            continue
        domain = "/".join(node.topology.get(lv, "-") for lv in path_levels)
        by_domain.setdefault(domain, set()).add(node.labels.get(_CLIQUE_LABEL, "(none)"))
    out = []
    for domain, ids in sorted(by_domain.items()):
        if len(ids) > 1 and ids != {"(none)"}:
            out.append(Finding("mixed-clique", "", f"{level} {domain}: its nodes carry clique ids {', '.join(sorted(ids))}"))
    return out


def cluster_report(
    snapshot: ClusterSnapshot,
    workload: Workload | None = None,
    workload_source: str | None = None,
    pods: Sequence[PodRequest] = (),
) -> ClusterReport:
    """Report on ``snapshot``: schedulable pods per shape, fragmentation, findings.

    Parameters
    ----------
    snapshot : ClusterSnapshot
    workload : Workload, optional
        The shapes to report and the workload of the fragment measure (default:
        :func:`standard_workload`).
    workload_source : str, optional
        How to name the workload in the report (default: ``"standard shapes"`` or
        ``"given"``).
    pods : sequence of PodRequest
        The workload's pods, to find extended resources no node offers.
    """
    if workload is None:
        workload = standard_workload()
        workload_source = workload_source or "standard shapes (1, 2, 4, 8, 0.5, 0.25 GPU)"
    cluster = Cluster(snapshot)
    session = cluster.session
    unshared = session.free.slot_replicas == 0
    unschedulable = np.array([node.unschedulable for node in snapshot.nodes], dtype=bool)
    schedulable = unshared & ~unschedulable
    return ClusterReport(
        nodes=len(snapshot.nodes),
        gpus=sum(node.hardware.gpus for node in snapshot.nodes),
        free_gpu_milli=int(session.free.free_gpu_milli[schedulable].sum()),
        whole_free_gpus=int(session.free.whole_gpus[schedulable].sum()),
        unschedulable_free_gpu_milli=int(session.free.free_gpu_milli[unshared & unschedulable].sum()),
        shapes=tuple(_shape_rows(session, workload.types)),
        fragment=cluster_fragment(cluster, workload, only=schedulable),  # the free state counted above
        workload_source=workload_source or "given",
        findings=tuple(_findings(snapshot, pods)),
        sharing=_sharing_summary(session),
        mig=mig_capacity(session.mig),
    )


@dataclass(frozen=True)
class NodeRow:
    """One node as ``placer report --nodes`` shows it (like ``sinfo -N``).

    Attributes
    ----------
    name : str
    state : str
        ``ready``, else what keeps pods off it, comma-joined: ``cordoned``, ``drained``,
        ``down`` (Slurm states), ``tainted`` (a NoSchedule or NoExecute taint),
        ``unhealthy-gpus``, ``over-committed`` (its running pods hold more of a resource
        than it offers).
    gpus : int
    free_gpus : float
        Free GPUs (whole, and shares' rests) outside MIG mode.
    mig_instances, free_mig_instances : int or None
        The MIG instances of the node and those no pod holds (None: no GPU in MIG mode).
    pods : int
        Running pods.
    """

    name: str
    state: str
    gpus: int
    free_gpus: float
    mig_instances: int | None
    free_mig_instances: int | None
    pods: int

    def to_dict(self) -> dict[str, Any]:
        mig = None if self.mig_instances is None else {"free": self.free_mig_instances, "total": self.mig_instances}
        return {"name": self.name, "state": self.state, "gpus": self.gpus, "freeGpus": round(self.free_gpus, 3),
                "migInstances": mig, "pods": self.pods}


def node_rows(snapshot: ClusterSnapshot) -> tuple[NodeRow, ...]:
    """Per node of ``snapshot``, in order, its state, GPUs, MIG instances and pods."""
    session = Cluster(snapshot).session
    out = []
    for i, node in enumerate(snapshot.nodes):
        states = [_unschedulable(node).kind] if node.unschedulable else []
        if any(t.effect in _BLOCKING_EFFECTS for t in node.taints):
            states.append("tainted")
        if node.unhealthy_gpus:
            states.append("unhealthy-gpus")
        if any(f.kind == "over-committed" for f in _over_committed(node)):
            states.append("over-committed")
        total = free = None
        if node.hardware.mig is not None:
            held = {(m.gpu, m.start) for rp in node.pods for m in rp.mig}
            total = len(node.mig_instances)
            free = sum((m.gpu, m.start) not in held for m in node.mig_instances)
        out.append(NodeRow(node.name, ",".join(states) or "ready", node.hardware.gpus,
                           float(session.free.free_gpu_milli[i]) / 1000, total, free, len(node.pods)))
    return tuple(out)


def nodes_text(rows: Sequence[NodeRow], color: bool = False) -> str:
    """The per-node view as aligned columns; ``color``: states other than ready coloured."""
    table = [["NODE", "STATE", "GPUS FREE/TOTAL", "MIG FREE/TOTAL", "PODS"]]
    for r in rows:
        mig = "-" if r.mig_instances is None else f"{r.free_mig_instances}/{r.mig_instances}"
        hue = "red" if any(finding_color(s) == "red" for s in r.state.split(",")) else "yellow"
        state = r.state if r.state == "ready" else paint(r.state, hue, color)
        table.append([r.name, state, f"{r.free_gpus:g}/{r.gpus}", mig, str(r.pods)])
    return "\n".join(aligned(table, right=frozenset((2, 3, 4)))) + "\n"


def _tolerate_taints(session: KernelSession) -> tuple[Toleration, ...]:
    """Tolerations of every taint key on the snapshot's nodes but the cordon's: the report's
    probe pods count tainted nodes, and cordoned ones not (a toleration of every taint would
    pass a cordon too, as kube's NodeUnschedulable lets it)."""
    keys = {t.key for node in session.snapshot.nodes for t in node.taints} - {UNSCHEDULABLE_TAINT.key}
    return tuple(Toleration(key=key, operator="Exists") for key in sorted(keys))


def _sharing_summary(session: KernelSession) -> SharingSummary | None:
    """The sharing nodes apart (None when no node shares its GPUs): physical GPUs, slots,
    free slots, and per :data:`SLOT_SHAPES` the pods that fit (filters as for the other
    shapes: every taint tolerated, cordoned nodes left out)."""
    free = session.free
    shared = np.flatnonzero(free.slot_replicas > 0)
    if not len(shared):
        return None
    gpus = int(free.gpu_count[shared].sum())
    slots = int((free.gpu_count[shared].astype(np.int64) * free.slot_replicas[shared]).sum())
    free_slots = sum(int(session.free.gpu_slots_free(n).sum()) for n in shared.tolist())
    rows = []
    tolerations = _tolerate_taints(session)
    for k in SLOT_SHAPES:
        pod = PodRequest(name="report", gpu_slots=k, tolerations=tolerations)
        pods, nodes = sharing.slot_pods_fitting(session, pod)
        rows.append(SlotRow(k, pods, nodes))
    replicas = tuple(sorted(set(free.slot_replicas[shared].tolist())))
    return SharingSummary(len(shared), gpus, slots, free_slots, replicas, tuple(rows))


def _shape_rows(session: KernelSession, shapes: Sequence[TaskType]) -> list[ShapeRow]:
    """Per shape, the pods each node holds now (``gangs.node_capacity`` over the session's
    free state), counted on nodes that pass the filters for a pod tolerating every taint."""
    free = session.free
    rows = []
    tolerations = _tolerate_taints(session)
    for shape in shapes:
        gpu_pod = shape.num_gpu > 0 and shape.gpu_milli > 0
        pod = PodRequest(
            name="report",
            gpus=shape.num_gpu if gpu_pod else 0,
            gpu_milli=shape.gpu_milli if gpu_pod else 1000,
            cpu_milli=shape.cpu_milli,
            gpu_models=shape.gpu_models if gpu_pod else (),
            tolerations=tolerations,
        )
        (fit,) = gangs.split_shapes(session, [pod])
        cap = gangs.node_capacity(session, fit, _NO_LIMIT)
        if not gpu_pod:  # CPU-only: only nodes that track CPU give a count
            cap = np.where(free.cpu_tracked & (shape.cpu_milli > 0), cap, 0)
        model_ok = ((fit.model_mask >> free.model_id.astype(np.uint64)) & 1).astype(bool)
        reachable = int(free.free_gpu_milli[fit.eligible & model_ok].sum())
        pods = int(cap.sum())
        share = shape.gpu_milli / 1000 if gpu_pod else 0.0
        rows.append(ShapeRow(shape, pods, pods * shape.num_gpu * share, reachable / 1000, int((cap > 0).sum())))
    return rows
