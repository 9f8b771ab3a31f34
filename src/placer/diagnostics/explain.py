"""``placer explain``: why each pod or gang of a request that cannot be placed cannot.

The request is placed as :func:`placer.place` would place it; every pod or gang left
unplaced is then examined against the cluster as that placement leaves it. Its cause is
the first of these that holds, in the order a GPU platform team diagnoses a pending job:

1. **registration** — the pod asks for GPUs, a GPU model or an extended resource that no
   node offers to the scheduler: not at all, or not although the hardware is there
   (``resources`` capacity above allocatable, a ``nvidia.com/gpu.count`` label above the
   GPUs offered);
2. **too large** — no node could hold one of its pods even empty: the pod asks more GPUs,
   CPU, memory, GPU memory per GPU or NICs than any node has (all of them on one node);
3. **filters** — some nodes could hold it empty, but cordons, ``nodeName``, taints, node
   selectors or required node affinity, or GPU models rule every one of them out before
   resources are looked at (``filtered`` names, per filter, the nodes it turns away);
4. **topology** — the gang's pods fit on the eligible nodes together, but no domain of
   its level holds them;
5. **fragmentation** — the free amount of every resource it asks for, summed over the
   eligible nodes, suffices, but no node (for a gang: no set of nodes) has it where needed;
6. **capacity** — not enough is free on the eligible nodes, summed over all of them.

A MIG pod (``mig``) is examined in MIG terms: *registration* when no GPU is in MIG mode or
no GPU model in MIG mode has its profile, *too large* when no node holds its instances
even with its MIG GPUs empty, *fragmentation* when the MIG GPUs it may use have the free
slices and compute slices it needs but no free instance of its profile (static GPUs) or no
valid start for one (dynamic GPUs), *capacity* otherwise. Its explanation notes, per MIG
GPU nearest to fitting, what the GPU lacks, and names the idle static GPUs a re-split
would give the pod (:func:`placer.mig.plans.plan_relayout`; ``placer explain --format
mig-parted`` writes them as an ``nvidia-mig-parted`` configuration).

``detail`` says what is short and by how much (GPUs, CPU, memory, GPU memory). Each
explanation lists the nodes per reason (kube-scheduler style), the nodes nearest to
fitting (only nodes that pass its filters and could hold it when empty) with what they
lack and which pods hold their GPUs, and, for gangs with a level, the most pods one domain
of each level can take; a *topology* cause names the eligible nodes with room that are in
no domain of the level. An empty request explains to "nothing is pending"; on a snapshot
without nodes every pod is pending for *capacity* (0/0 nodes).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
from msgspec.structs import replace as struct_replace

from placer.placement import gangs
from placer.placement import sharing
from placer.placement.cluster import Cluster
from placer.kernel.mig import MigState
from placer.mig.plans import (
    GpuRelayout,
    MigUsage,
    RelayoutPlan,
    free_slice_count,
    idle_static_rows,
    mig_usage,
    node_rows,
    plan_relayout,
    relayout_snapshot,
)
from placer.model.mig_profiles import MigProfile, table_for
from placer.model.reasons import UNTOLERATED_TAINT, kube_reason
from placer.model import reasons as wording
from placer.model import (
    ClusterSnapshot,
    GangSpec,
    MigRequest,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    first_untolerated_taint,
)
from placer.diagnostics.report import gpu_count_findings, offered_resources
from placer.text.lines import paint, some_of

__all__ = ["CAUSES", "NearNode", "LevelFit", "Pending", "Explanation", "explain"]

CAUSES = ("registration", "too large", "filters", "topology", "fragmentation", "capacity")
"""The causes an explanation names, in the order they are tested."""

CAUSE_COLORS = {"registration": "red", "too large": "red", "filters": "yellow", "topology": "yellow",
                "affinity": "yellow", "anti-affinity": "yellow", "spread": "yellow", "ports": "yellow",
                "fragmentation": "cyan", "capacity": "cyan"}
"""The colour of each cause on a terminal: red for what no wait fixes, yellow for rules,
cyan for what frees up as pods end."""

NEAREST = 3
"""Nodes listed as nearest to fitting, per pending pod or gang."""

INTER_POD_CAUSES = {
    wording.SPREAD_MISSING_LABEL: "spread", wording.SPREAD: "spread", wording.POD_AFFINITY: "affinity",
    wording.POD_ANTI_AFFINITY: "anti-affinity", wording.EXISTING_ANTI_AFFINITY: "anti-affinity",
}
"""The cause class of each inter-pod reason (``docs/placement-rules.md``, "Inter-pod rules")."""
NAMED_NODES = 5
"""Nodes named per inter-pod rule in a detail."""

NO_NODES = "the snapshot has no nodes: 0/0 nodes are available"
"""The detail of every pending pod or gang of a snapshot without nodes."""

NEAREST_MIG_GPUS = 6
"""MIG GPUs noted as nearest to fitting, per pending MIG pod."""


@dataclass(frozen=True)
class NearNode:
    """A node that passes the filters but lacks something, and who holds its GPUs."""

    node: str
    lacks: tuple[str, ...]
    holders: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "lacks": list(self.lacks), "gpuHolders": list(self.holders)}


@dataclass(frozen=True)
class LevelFit:
    """The most pods of the gang one domain of ``level`` can take now, and where."""

    level: str
    domain: str
    fits: int
    needed: int

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "domain": self.domain, "fits": self.fits, "needed": self.needed}


@dataclass(frozen=True)
class Pending:
    """Why one pod or gang is not placed."""

    name: str
    kind: str  # "pod" or "gang"
    pods: int
    reason: str
    cause: str
    detail: str
    node_reasons: Mapping[str, int]
    nearest: tuple[NearNode, ...] = ()
    levels: tuple[LevelFit, ...] = ()
    mig_gpus: tuple[str, ...] = ()  # per MIG GPU nearest to fitting, what it lacks
    relayout: tuple[GpuRelayout, ...] = ()  # idle static GPUs a re-split would place it on
    preemption: str = ""  # what preemption would do, when the request has it off
    # per static filter that turns nodes away (kube's reason): the nodes it turns away
    filtered: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "pods": self.pods,
            "reason": self.reason,
            "cause": self.cause,
            "detail": self.detail,
            "nodeReasons": dict(self.node_reasons),
            "nearest": [n.to_dict() for n in self.nearest],
            "levels": [lv.to_dict() for lv in self.levels],
            "migGpus": list(self.mig_gpus),
            "relayout": [g.to_dict() for g in self.relayout],
            "preemption": self.preemption,
            "filtered": list(self.filtered),
        }

    def to_text(self, color: bool = False) -> str:
        """The explanation as lines; ``color``: the cause coloured with ANSI escapes (for a terminal)."""
        cause = paint(self.cause, CAUSE_COLORS[self.cause], color)
        lines = [f"{self.kind} {self.name} ({self.pods} pod(s)): {self.reason}", f"  cause: {cause} — {self.detail}"]
        for n in self.nearest:
            held = f"; GPUs held by {', '.join(n.holders)}" if n.holders else ""
            lines.append(f"  nearest: {n.node} lacks {', '.join(n.lacks)}{held}")
        for lv in self.levels:
            lines.append(f"  level {lv.level}: at most {lv.fits} of {lv.needed} pod(s) fit in one domain ({lv.domain})")
        lines += [f"  mig: {note}" for note in self.mig_gpus]
        lines += [f"  re-split: {g.to_text()}" for g in self.relayout]
        lines += [f"  filter: {line}" for line in self.filtered]
        if self.preemption:
            lines.append(f"  preemption: {self.preemption}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Explanation:
    """The placement of a request and an explanation per pending pod or gang.

    ``stacked`` says, per placed pod of ``gpuSlots`` whose slots share a GPU, how they
    landed: the device plugin does not promise distinct GPUs, and placer found too few.
    """

    result: PlacementResult
    pending: tuple[Pending, ...] = field(default_factory=tuple)
    stacked: tuple[str, ...] = ()
    relayout: RelayoutPlan = field(default_factory=RelayoutPlan)

    def to_dict(self) -> dict[str, Any]:
        return {
            "placed": len(self.result.assignments),
            "unschedulable": len(self.result.unschedulable),
            "pending": [p.to_dict() for p in self.pending],
            "stackedSlots": list(self.stacked),
            "relayout": self.relayout.to_dict(),
        }

    def to_text(self, color: bool = False) -> str:
        """The explanation as text; ``color``: causes coloured with ANSI escapes (for a terminal)."""
        head = (
            f"{len(self.result.assignments)} pod(s) placed, {len(self.result.unschedulable)} not placed"
        )
        if not self.result.assignments and not self.result.unschedulable:
            head = "the request has no pods: nothing is pending"
        notes = "".join(f"\n  note: {line}" for line in self.stacked)
        if not self.pending:
            return head + notes + "\n"
        return head + notes + "\n\n" + "\n\n".join(p.to_text(color) for p in self.pending) + "\n"


def explain(
    snapshot: ClusterSnapshot | Mapping[str, Any] | str, request: PlacementRequest | Mapping[str, Any] | str
) -> Explanation:
    """Place ``request`` on ``snapshot`` and explain every pod or gang left unplaced.

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
    request : PlacementRequest, dict or path

    Returns
    -------
    Explanation
        The placement result, one :class:`Pending` per unplaced pod or gang (gangs
        once, not per pod), in request order, and the re-splits of idle static MIG GPUs
        that would place the pending MIG pods.
    """
    cluster = Cluster(snapshot)
    request = cluster.checked_request(request)
    result = cluster.schedule(request)  # binds what it places: the state pending pods face
    reasons = {u.pod: u.reason for u in result.unschedulable}
    plan = _placing_plan(cluster, request, [pod for pod in request.pods if pod.name in reasons])
    out: list[Pending] = []
    seen_gangs: set[str] = set()
    for pod in request.pods:
        if pod.name not in reasons:
            continue
        if pod.gpu_slots:
            out.append(_explain_slots(cluster, pod, reasons[pod.name]))
        elif pod.gang is None:
            out.append(_explain_group(cluster, pod.name, "pod", [pod], None, reasons[pod.name], plan))
        elif pod.gang not in seen_gangs:
            seen_gangs.add(pod.gang)
            members = [p for p in request.pods if p.gang == pod.gang]
            spec = request.gangs.get(pod.gang) or GangSpec(pod.gang)
            out.append(_explain_group(cluster, pod.gang, "gang", members, spec, reasons[pod.name], plan))
    if not cluster.session.n_nodes:
        out = [replace(p, cause="capacity", detail=NO_NODES) for p in out]
    elif request.preemption == "none":
        out = [_with_preemption(cluster, request, p) for p in out]
    stacked = tuple(_stacked_text(cluster, a) for a in result.assignments if a.stacked_slots)
    return Explanation(result, tuple(out), stacked, plan)



def _placing_plan(cluster: Cluster, request: PlacementRequest, pending: Sequence[PodRequest]) -> RelayoutPlan:
    """The re-splits of :func:`~placer.mig.plans.plan_relayout` for the pending pods, held
    to what placer then does with them.

    The plan chooses each pod's node by the fewest GPUs to change; placer places by its
    policy, and may take for an earlier pod the instances planned for a later one. So the
    planned pods are placed, in request order with the request's policy and seed, on the
    snapshot re-split as planned. A pod that placement misses is planned again ahead of the
    others; one it still misses is left unplanned, and the plan is made without it.
    """
    mig_pods = [pod for pod in pending if pod.mig is not None]
    order = list(mig_pods)
    given_up: set[str] = set()
    reordered = False
    snapshot: ClusterSnapshot | None = None
    while True:
        plan = plan_relayout(cluster.session, [pod for pod in order if pod.name not in given_up])
        if not plan.gpus:
            break
        if snapshot is None:
            snapshot = cluster.to_snapshot()
        planned = [pod for pod in mig_pods if pod.name not in given_up and pod.name not in plan.unplanned]
        placed = Cluster(relayout_snapshot(snapshot, plan)).schedule(struct_replace(request, pods=tuple(planned)))
        done = {a.pod for a in placed.assignments}
        missed = [pod.name for pod in planned if pod.name not in done]
        if not missed:
            break
        if reordered:
            given_up.update(missed)
            reordered = False
        else:
            order = [pod for pod in order if pod.name in missed] + [pod for pod in order if pod.name not in missed]
            reordered = True
    unplanned = set(plan.unplanned) | given_up
    return RelayoutPlan(plan.gpus, tuple(pod.name for pod in mig_pods if pod.name in unplanned))


def _with_preemption(cluster: Cluster, request: PlacementRequest, pending: Pending) -> Pending:
    """``pending`` with what preemption would do for it (priority permitting)."""
    if pending.kind == "gang":
        pods = [p for p in request.pods if p.gang == pending.name]
        hint = cluster.preemption_hint(pods, request.gangs.get(pending.name) or GangSpec(pending.name))
    else:
        pods = [p for p in request.pods if p.name == pending.name]
        hint = cluster.preemption_hint(pods) if not (pods[0].mig or pods[0].gpu_slots) else ""
    return replace(pending, preemption=hint) if hint else pending


def _stacked_text(cluster: Cluster, a: Any) -> str:
    """How a placed pod's slots share GPUs."""
    total = sum(a.gpu_slots.values())
    hw = cluster.snapshot.nodes[cluster.session.node_index[a.node]].hardware
    held = ", ".join(f"GPU {g}: {c}" for g, c in a.gpu_slots.items() if c > 1)
    return (
        f"pod {a.pod}: its {total} slot(s) share {len(a.gpus)} GPU(s) of node {a.node} ({held}); no node had "
        f"{total} GPUs with a free slot ({hw.gpus} GPU(s) × {hw.gpu_sharing.replicas} slots there)"
    )


def _explain_slots(cluster: Cluster, pod: PodRequest, reason: str) -> Pending:
    """Why a pod of ``gpuSlots`` is pending: slots and physical GPUs counted apart."""
    session = cluster.session
    free = session.free
    _, node_reasons = sharing.slot_candidates(session, pod)
    eligible, _ = session.eligibility(pod)
    sharing_nodes = [i for i, n in enumerate(cluster.snapshot.nodes) if n.hardware.gpu_sharing is not None]
    k = pod.gpu_slots

    def holds_empty(i: int) -> bool:
        hw = cluster.snapshot.nodes[i].hardware
        sh = hw.gpu_sharing
        if sh.strategy == "mps" and k > 1:
            return False
        cap = hw.gpu_memory_mib
        if cap is not None and pod.gpu_memory_mib > (cap // sh.replicas if sh.strategy == "mps" else cap):
            return False
        return k <= hw.gpus * sh.replicas and (hw.cpu_milli is None or pod.cpu_milli <= hw.cpu_milli)

    could = [i for i in sharing_nodes if holds_empty(i)]
    usable = [i for i in could if eligible[i]]
    slots_free = sum(int(free.gpu_slots_free(i).sum()) for i in usable)
    gpus_with_slot = sum(int((free.gpu_slots_free(i) > 0).sum()) for i in usable)
    gpus = sum(int(free.gpu_count[i]) for i in usable)
    if not sharing_nodes:
        cause, detail = "registration", "no node shares its GPUs (gpuSharing: time-slicing or MPS): none offers gpuSlots"
    elif not could:
        largest = max(cluster.snapshot.nodes[i].hardware.gpus * cluster.snapshot.nodes[i].hardware.gpu_sharing.replicas
                      for i in sharing_nodes)
        cause, detail = "too large", (
            f"{k} slot(s)" + (f" with {pod.gpu_memory_mib} MiB of GPU memory per GPU" if pod.gpu_memory_mib else "")
            + ": no sharing node could hold it even "
            f"empty (the most slots on one node: {largest}; MPS nodes give one slot per pod, each of "
            "gpuMemoryMiB / replicas)"
        )
    elif not usable:
        cause, detail = "filters", (
            f"{len(could)} sharing node(s) could hold {k} slot(s) when empty, and every one is ruled out before "
            f"resources: {_listing(session.static_reasons(pod))}"
        )
    elif slots_free >= k:
        cause, detail = "fragmentation", (
            f"{slots_free} slot(s) free on {gpus_with_slot} of {gpus} GPU(s) of {len(usable)} eligible sharing "
            f"node(s), {k} needed; no node has them together with the CPU, memory and GPU memory the pod needs"
        )
    else:
        cause, detail = "capacity", (
            f"not enough free slots on {len(usable)} eligible sharing node(s): {slots_free} slot(s) free on "
            f"{gpus_with_slot} of {gpus} GPU(s), {k} needed"
        )
    return Pending(
        name=pod.name, kind="pod", pods=1, reason=reason, cause=cause, detail=detail,
        node_reasons=dict(sorted(node_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        filtered=_filtered(cluster, pod),
    )


def _explain_group(
    cluster: Cluster, name: str, kind: str, pods: Sequence[PodRequest], spec: GangSpec | None, reason: str,
    plan: RelayoutPlan,
) -> Pending:
    if pods[0].mig is not None:
        return _explain_mig(cluster, name, kind, pods, reason, plan)
    session = cluster.session
    shapes = gangs.split_shapes(session, pods)
    main = shapes[0]
    node_reasons = gangs.resource_reasons(session, main)
    eligible = np.zeros(session.n_nodes, dtype=bool)
    for shape in shapes:
        eligible |= shape.eligible
    caps = [gangs.node_capacity(session, shape, len(pods)) for shape in shapes]
    fits_total = all(int(cap.sum()) >= shape.count for cap, shape in zip(caps, shapes))
    levels = _level_fits(cluster, spec, caps[0], main.count) if spec is not None else ()

    hold_empty = np.zeros(session.n_nodes, dtype=bool)
    too_large = ""
    fits_empty_per_shape = [_fits_empty(cluster.snapshot, shape.pod) for shape in shapes]
    for shape, fits_empty in zip(shapes, fits_empty_per_shape):
        if not fits_empty.any() and not too_large:
            too_large = _too_large(cluster.snapshot, shape.pod)
        hold_empty |= fits_empty & shape.eligible
    nearest = _nearest(cluster, main, caps[0], fits_empty_per_shape[0])
    registration = _registration_gap(cluster, main.pod)
    ports = _host_ports(cluster, main, caps[0] > 0, node_reasons)
    inter_pod = _inter_pod(cluster, main, caps[0] > 0, node_reasons)
    if registration:
        cause, detail = "registration", registration
    elif too_large:
        cause, detail = "too large", too_large
    elif not hold_empty.any():
        cause = "filters"
        could = int(fits_empty_per_shape[0].sum())
        detail = (
            f"{could} node(s) could hold {_pod_text(main.pod)} when empty, and every one is ruled out "
            f"before resources: {_listing(session.static_reasons(main.pod))}"
        )
    elif ports is not None:
        cause, detail = "ports", ports
    elif inter_pod is not None:
        cause, detail = inter_pod
    elif fits_total and levels and all(lv.fits < lv.needed for lv in levels[-1:]):
        cause = "topology"
        lv = levels[-1]
        # what would make the best domain hold the gang: its nodes, not the nearest anywhere
        nearest = _nearest(cluster, main, caps[0], fits_empty_per_shape[0], within=_best_domain(cluster, lv.level,
                           caps[0]), count=max(NEAREST, lv.needed - lv.fits))
        detail = (
            f"the {len(pods)} pod(s) fit on the eligible nodes together, but no {lv.level} domain "
            f"holds more than {lv.fits} (best: {lv.domain})"
        ) + _outside_domains(cluster, lv.level, caps[0])
    else:
        free, need = _free_and_needed(cluster, shapes, hold_empty)
        short = {k: need[k] - free[k] for k in need if need[k] > free[k]}
        where = f"on {int(hold_empty.sum())} eligible node(s)"
        if fits_total or not short:
            cause = "fragmentation"
            detail = (
                f"{_amounts(free)} free in total {where}, {_amounts(need)} needed; no node "
                f"{'or set of nodes ' if kind == 'gang' else ''}has room for {_pod_text(main.pod)}"
                + (f" x {len(pods)}" if kind == "gang" else "")
            )
        else:
            cause = "capacity"
            detail = "not enough free {}: short {}".format(
                where, ", ".join(f"{_amount(k, v)} ({_amount(k, free[k])} free of {_amount(k, need[k])})"
                                 for k, v in short.items()),
            )
    return Pending(
        name=name,
        kind=kind,
        pods=len(pods),
        reason=reason,
        cause=cause,
        detail=detail,
        node_reasons=dict(sorted(node_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        nearest=nearest,
        levels=levels,
        filtered=_filtered(cluster, main.pod),
    )


def _filtered(cluster: Cluster, pod: PodRequest) -> tuple[str, ...]:
    """Per static filter that turns nodes away from ``pod`` (its cause class in kube's words:
    cordon, node name, taints, node affinity/selector, GPU model …), the nodes it turns
    away; an untolerated taint is named beside its node."""
    static = cluster.session.static_reasons(pod)
    if not static:
        return ()
    nodes = cluster.snapshot.nodes
    per_reason: dict[str, list[str]] = {reason: [] for reason in sorted(static)}
    for i, reason in enumerate(cluster.session.node_reasons(pod, np.arange(len(nodes)))):
        if reason in per_reason:
            taint = first_untolerated_taint(nodes[i].taints, pod.tolerations) if reason == UNTOLERATED_TAINT else None
            shown = f"{taint.key}={taint.value}:{taint.effect}" if taint is not None and taint.value else (
                f"{taint.key}:{taint.effect}" if taint is not None else "")
            per_reason[reason].append(f"{nodes[i].name} ({shown})" if shown else nodes[i].name)
    return tuple(f"{reason}: {some_of(names, 8)}" for reason, names in per_reason.items())


def _host_ports(
    cluster: Cluster, shape: gangs.Shape, fits_now: np.ndarray, node_reasons: dict[str, int]
) -> str | None:
    """The detail when a pod on every node that has room for the pod now holds a host port
    it needs (kube's NodePorts), naming the nodes and those pods; the eligible nodes it
    turns away are counted in ``node_reasons``. None when some such node is free of
    conflicts, or none has room."""
    if not shape.pod.host_ports:
        return None
    session = cluster.session
    blocked = session.ports_blocked(shape.pod) & shape.eligible
    if blocked.any():
        node_reasons[wording.PORTS] = node_reasons.get(wording.PORTS, 0) + int(blocked.sum())
    room = np.flatnonzero(fits_now & shape.eligible).tolist()
    if not room or not blocked[room].all():
        return None
    named = [f"{session.node_names[n]} ({', '.join(session.port_holders(shape.pod, n))})" for n in room[:NAMED_NODES]]
    more = f" and {len(room) - NAMED_NODES} more" if len(room) > NAMED_NODES else ""
    return (f"{len(room)} node(s) have room for {_pod_text(shape.pod)}, and on each a pod holds a host port it "
            f"needs ({wording.PORTS}): " + ", ".join(named) + more)


def _inter_pod(
    cluster: Cluster, shape: gangs.Shape, fits_now: np.ndarray, node_reasons: dict[str, int]
) -> tuple[str, str] | None:
    """The cause class and detail when every node that has room for the pod now fails one
    of its inter-pod rules (the rule of most nodes names the class), counting those nodes in
    ``node_reasons``; None when some such node passes them, or none has room."""
    session = cluster.session
    room = np.flatnonzero(fits_now & shape.eligible).tolist()
    failing = session.inter_pod_failures(shape.pod)
    if not room or not failing or any(n not in failing for n in room):
        return None
    by_reason: dict[str, list[str]] = {}
    for n in room:
        by_reason.setdefault(failing[n], []).append(session.node_names[n])
    for reason, names in by_reason.items():
        node_reasons[reason] = node_reasons.get(reason, 0) + len(names)
    ranked = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    parts = [f"{reason} on {some_of(names, NAMED_NODES)}" for reason, names in ranked]
    return INTER_POD_CAUSES[ranked[0][0]], (
        f"{len(room)} node(s) have room for {_pod_text(shape.pod)}, and each fails an inter-pod rule: " + "; ".join(parts)
    )


def _fits_empty(snapshot: ClusterSnapshot, pod: PodRequest) -> np.ndarray:
    """Per node, whether its hardware could hold ``pod`` with nothing else on it."""
    return np.array([not _beyond(node.hardware, pod) for node in snapshot.nodes], dtype=bool)


def _beyond(hw: Any, pod: PodRequest) -> list[tuple[str, float, float]]:
    """(resource, asked, the node has) for every resource ``pod`` asks beyond ``hw``."""
    out = []
    if pod.gpus > hw.gpus:
        out.append(("GPUs", pod.gpus, hw.gpus))
    if hw.cpu_milli is not None and pod.cpu_milli > hw.cpu_milli:
        out.append(("CPU", pod.cpu_milli / 1000, hw.cpu_milli / 1000))
    if hw.memory_mib is not None and pod.memory_mib > hw.memory_mib:
        out.append(("memory", pod.memory_mib, hw.memory_mib))
    if pod.gpus and hw.gpu_memory_mib is not None and pod.gpu_memory_mib > hw.gpu_memory_mib:
        out.append(("GPU memory", pod.gpu_memory_mib, hw.gpu_memory_mib))
    if pod.nics > len(hw.nic_list):
        out.append(("NICs", pod.nics, len(hw.nic_list)))
    return out


def _too_large(snapshot: ClusterSnapshot, pod: PodRequest) -> str:
    """Why no node could hold ``pod`` even empty: each resource beyond the largest node's."""
    beyond = [{what: (asked, has) for what, asked, has in _beyond(node.hardware, pod)} for node in snapshot.nodes]
    everywhere = [what for what in beyond[0] if all(what in b for b in beyond)] if beyond else []
    if everywhere:
        parts = []
        for what in everywhere:
            asked, largest = beyond[0][what][0], max(b[what][1] for b in beyond)
            parts.append(f"{_amount(what, asked)} asked, the largest node has {_amount(what, largest)} "
                         f"(short {_amount(what, asked - largest)})")
        return f"no node could ever hold {_pod_text(pod)}: " + "; ".join(parts)
    lacking = sorted({what for b in beyond for what in b})
    return f"no node could ever hold {_pod_text(pod)}: each node, even empty, lacks one of {', '.join(lacking)}"


def _free_and_needed(
    cluster: Cluster, shapes: Sequence[gangs.Shape], nodes: np.ndarray
) -> tuple[dict[str, float], dict[str, float]]:
    """Free amounts on ``nodes`` and what all the pods need, per resource they ask for."""
    free_state = cluster.session.free
    free: dict[str, float] = {}
    need: dict[str, float] = {}
    for shape in shapes:
        pod, n = shape.pod, shape.count
        if pod.gpus:
            need["GPUs"] = need.get("GPUs", 0.0) + pod.gpus * pod.gpu_milli / 1000 * n
        if pod.cpu_milli:
            need["CPU"] = need.get("CPU", 0.0) + pod.cpu_milli / 1000 * n
        if pod.memory_mib:
            need["memory"] = need.get("memory", 0.0) + pod.memory_mib * n
    if "GPUs" in need:
        shared = any(s.pod.gpus and s.pod.gpu_milli < 1000 for s in shapes)
        free["GPUs"] = (float(free_state.gpu_milli[nodes].sum()) / 1000 if shared
                        else float(free_state.whole_gpus[nodes].sum()))
    for what, column, scale in (("CPU", free_state.cpu_milli, 1000), ("memory", free_state.memory_mib, 1)):
        if what in need:
            values = column[nodes]
            if (values >= free_state.untracked_quantity).any():  # a node that does not count it
                del need[what]
            else:
                free[what] = float(np.maximum(values, 0).sum()) / scale  # an over-commit takes from no other node
    return free, need


def _amount(what: str, value: float) -> str:
    if what in ("memory", "GPU memory"):
        return f"{value:g} MiB {'memory' if what == 'memory' else 'GPU memory'}"
    return f"{value:g} {what}" if what != "GPUs" else f"{value:g} GPU(s)"


def _amounts(values: Mapping[str, float]) -> str:
    return ", ".join(_amount(k, v) for k, v in values.items()) or "nothing"


def _pod_text(pod: PodRequest) -> str:
    if not pod.gpus:
        return f"a CPU-only pod ({pod.cpu_milli / 1000:g} CPU)"
    if pod.gpu_milli < 1000:
        return f"a {pod.gpu_milli / 1000:g}-GPU share"
    return f"{pod.gpus} whole GPU(s)"


def _listing(counts: Mapping[str, int]) -> str:
    if not counts:
        return "nothing"
    return kube_reason(sum(counts.values()), counts).split(": ", 1)[-1]


def _gpus_needed(shape: gangs.Shape) -> float:
    """GPUs (whole, or the share's fraction) all pods of the shape ask for together."""
    return shape.pod.gpus * shape.count * shape.pod.gpu_milli / 1000


def _free_gpus(cluster: Cluster, shape: gangs.Shape) -> float:
    """Free GPUs (whole, or milli for a share) on the nodes the shape may use."""
    free = cluster.session.free
    ok = shape.eligible
    if shape.pod.gpus and shape.pod.gpu_milli < 1000:
        return float(free.gpu_milli[ok].sum()) / 1000
    return float(free.whole_gpus[ok].sum())


def _registration_gap(cluster: Cluster, pod: PodRequest) -> str:
    """A sentence when the pod's GPUs or resources are not offered though they may exist."""
    snapshot = cluster.snapshot
    offered = offered_resources(snapshot)
    for name in pod.resources:
        if name not in offered:
            return f"no node offers {name} (resource not registered or not allocatable)"
    if pod.gpus and pod.gpu_models:
        present = sorted({n.hardware.gpu_model for n in snapshot.nodes if n.hardware.gpus and n.hardware.gpu_model})
        if present and not set(pod.gpu_models) & set(present):
            return f"no node has GPU model {', '.join(pod.gpu_models)}; the cluster has {', '.join(present)}"
    if not pod.gpus or any(n.hardware.gpus > 0 for n in snapshot.nodes):
        return ""
    hidden = [n.name for n in snapshot.nodes if gpu_count_findings(n)]
    if hidden:
        return (
            f"no node offers nvidia.com/gpu to the scheduler, yet {len(hidden)} node(s) have GPUs "
            f"(capacity or GPU labels): {', '.join(hidden[:3])} — check the device plugin"
        )
    return "no node has GPUs"


def _nearest(
    cluster: Cluster, shape: gangs.Shape, cap: np.ndarray, fits_empty: np.ndarray, *,
    within: np.ndarray | None = None, count: int = NEAREST,
) -> tuple[NearNode, ...]:
    """Eligible nodes (of ``within``, a node mask, when given) that hold no pod of the shape
    now but could when empty (``fits_empty``), least short (GPUs, CPU, memory) first; at
    most ``count``."""
    free = cluster.session.free
    pod = shape.pod
    candidates = np.nonzero(shape.eligible & fits_empty & (cap == 0) & (True if within is None else within))[0]
    short_milli = np.zeros(len(candidates), dtype=np.int64)  # shared pods: milli short on the best GPU
    short_gpus = np.zeros(len(candidates), dtype=np.int64)
    if pod.gpus and pod.gpu_milli >= 1000:
        short_gpus = np.maximum(pod.gpus - free.whole_gpus[candidates].astype(np.int64), 0)
    elif pod.gpus:
        best = free.gpu_milli[candidates].max(axis=1, initial=0).astype(np.int64)
        short_milli = np.maximum(pod.gpu_milli - best, 0)
        short_gpus = (short_milli > 0).astype(np.int64)
    # a pod that asks for no CPU (memory) lacks none on a node its running pods over-commit
    short_cpu = np.maximum(pod.cpu_milli - free.cpu_milli[candidates], 0) * (pod.cpu_milli > 0)
    short_mem = np.maximum(pod.memory_mib - free.memory_mib[candidates], 0) * (pod.memory_mib > 0)
    order = np.lexsort((candidates, short_mem, short_cpu, short_gpus))[:count]
    out = []
    for k in order.tolist():
        n = int(candidates[k])
        lacks = []
        if short_milli[k]:
            lacks.append(f"{short_milli[k]} GPU milli on one GPU")
        elif short_gpus[k]:
            lacks.append(f"{short_gpus[k]} GPU(s)")
        if short_cpu[k]:
            lacks.append(f"{short_cpu[k] / 1000:g} CPU")
        if short_mem[k]:
            lacks.append(f"{short_mem[k]} MiB memory")
        if free.pod_slots[n] < 1:
            lacks.append("a pod slot")
        out.append(NearNode(cluster.node_names[n], tuple(lacks) or ("GPU memory or NICs",), _gpu_holders(cluster, n)))
    return tuple(out)


def _outside_domains(cluster: Cluster, level: str, cap: np.ndarray) -> str:
    """``"; 2 eligible node(s) with room are outside every rack domain: ..."``: the nodes
    that could take pods of the gang now (``cap``) but lack a domain at ``level`` or above
    it ("" when there are none)."""
    h = cluster.domains.hierarchy()
    outside = np.zeros(len(cap), dtype=bool)
    for ids in h.ids[: h.levels.index(level) + 1]:
        outside |= ids < 0
    names = [cluster.node_names[n] for n in np.flatnonzero(outside & (cap > 0)).tolist()]
    if not names:
        return ""
    return (f"; {len(names)} eligible node(s) with room are outside every {level} domain: {some_of(names)} "
            "(the topology source, e.g. Slurm's topology.conf, does not place them)")


def _best_domain(cluster: Cluster, level: str, cap: np.ndarray) -> np.ndarray:
    """The nodes of the ``level`` domain that takes the most pods now (``cap`` per node): the
    ``best`` domain of :func:`_level_fits`."""
    h = cluster.domains.hierarchy()
    at = h.levels.index(level)
    caps = gangs.domain_capacities(h, cap, [1] * len(h.levels))
    return h.ids[at] == int(np.argmax(caps[at]))


def _gpu_holders(cluster: Cluster, node: int) -> tuple[str, ...]:
    """Pods holding GPUs on ``node``, lowest priority first."""
    held = sorted(
        (rp for n, rp in cluster.session.running() if n == node and (rp.gpus or rp.gpu_shares)),
        key=lambda rp: (rp.priority, rp.name),
    )
    return tuple(f"{rp.name} ({len(rp.gpus) or len(rp.gpu_shares)} GPU(s))" for rp in held)


def _level_fits(cluster: Cluster, spec: GangSpec, cap: np.ndarray, needed: int) -> tuple[LevelFit, ...]:
    """Per topology level down to the gang's own, the most pods one domain takes now."""
    if spec.level is None or spec.mode == "unconstrained":
        return ()
    h = cluster.domains.hierarchy()
    if spec.level not in h.levels:
        return ()
    caps = gangs.domain_capacities(h, cap, [1] * len(h.levels))
    out = []
    for lv, level in enumerate(h.levels[:-1]):
        if not len(caps[lv]):
            out.append(LevelFit(level, "-", 0, needed))
        else:
            best = int(np.argmax(caps[lv]))
            out.append(LevelFit(level, h.names[lv][best], int(min(caps[lv][best], needed)), needed))
        if level == spec.level:
            break
    return tuple(out)


# ----------------------------------------------------------------------------- MIG pods


def _explain_mig(
    cluster: Cluster, name: str, kind: str, pods: Sequence[PodRequest], reason: str, plan: RelayoutPlan
) -> Pending:
    """Why a MIG pod (a gang: its pods asking what its first asks) is not placed, in MIG terms."""
    session = cluster.session
    state = session.mig
    pod = pods[0]
    request = pod.mig
    assert request is not None
    count = sum(p.mig.count for p in pods if p.mig == request)
    allowed, counts = session.mig_allowed(pod)
    short_of = dict(counts)
    counts.update(session.mig_shortfall(request, allowed))
    relayout = tuple(dict.fromkeys(g for p in pods for g in plan.for_pod(p.name)))
    profiles = state.profiles_for(request)
    room_empty = _mig_room_empty(state, profiles)
    fits_hw = _fits_empty(cluster.snapshot, pod)
    eligible, model_mask = session.eligibility(pod)
    free = session.free
    eligible = eligible & ((model_mask >> free.model_id.astype(np.uint64)) & 1).astype(bool)
    hold_empty = (room_empty >= count) & fits_hw
    asked = f"{count} x {_mig_asked(request)}"
    notes: tuple[str, ...] = ()
    registration = _registration_gap(cluster, pod) or _mig_registration_gap(cluster, state, request, profiles)
    if registration:
        cause, detail = "registration", registration
    elif not (room_empty >= count).any():
        cause, detail = "too large", _mig_too_large(cluster, state, request, profiles, room_empty, count)
    elif not hold_empty.any():
        cause, detail = "too large", _too_large(cluster.snapshot, pod)
    elif not (hold_empty & eligible).any():
        cause = "filters"
        detail = (
            f"{int(hold_empty.sum())} node(s) could hold {asked} with their MIG GPUs empty, and every one is "
            f"ruled out before resources: {_listing(session.static_reasons(pod))}"
        )
    else:
        nodes = hold_empty & eligible
        usage = mig_usage(state)
        rows = [r for n in np.flatnonzero(nodes).tolist() for r in node_rows(state, n)
                if profiles[int(state.table_of[r])] is not None]
        idle = idle_static_rows(state)
        nearest = sorted(rows, key=lambda r: (-_unheld_slices(state, usage, r), r))[:NEAREST_MIG_GPUS]
        notes = tuple(
            _mig_gpu_note(cluster, state, usage, idle, r, profiles[int(state.table_of[r])]) for r in nearest
        )
        if not (nodes & allowed).any():
            cause = "capacity"
            detail = (f"the {int(nodes.sum())} node(s) whose MIG GPUs could hold {asked} lack free CPU, memory "
                      f"or a pod slot: {_listing(short_of)}")
        else:
            cause, detail = _mig_shortage(cluster, state, usage, rows, profiles, count, int(nodes.sum()), relayout,
                                          notes)
    return Pending(
        name=name,
        kind=kind,
        pods=len(pods),
        reason=reason,
        cause=cause,
        detail=detail,
        node_reasons=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        mig_gpus=notes,
        relayout=relayout,
        filtered=_filtered(cluster, pods[0]),
    )


def _mig_asked(request: MigRequest) -> str:
    return request.profile if request.profile is not None else f"a MIG profile of {request.memory_mib} MiB"


def _mig_room_empty(state: MigState, profiles: Sequence[MigProfile | None]) -> np.ndarray:
    """Per node, instances of the asked profile its MIG GPUs would hold empty."""
    room = np.zeros(state.n_nodes, dtype=np.int64)
    for t, profile in enumerate(profiles):
        if profile is not None:
            rows = state.table_of == t
            per_gpu = int(state.tables[t].copies[profile.index, 0])
            room += np.bincount(state.node_of[rows], minlength=state.n_nodes).astype(np.int64) * per_gpu
    return room


def _mig_registration_gap(
    cluster: Cluster, state: MigState, request: MigRequest, profiles: Sequence[MigProfile | None]
) -> str:
    """A sentence when no GPU is in MIG mode, or no model in MIG mode has the profile asked."""
    if not state.n_rows:
        models: dict[str, int] = {}
        for node in cluster.snapshot.nodes:
            hw = node.hardware
            if hw.gpus:
                model = hw.gpu_model or "a GPU of unknown model"
                models[model] = models.get(model, 0) + hw.gpus
        if not models:
            return "no node has GPUs, none in MIG mode"
        seen = []
        for model, n in models.items():
            if table_for(model) is None:
                seen.append(f"{n} x {model} (GPU model {model} has no MIG profile table)")
            else:
                seen.append(f"{n} x {model} (MIG-capable; not in MIG mode or unhealthy)")
        return "no node has a GPU in MIG mode; the cluster's GPUs: " + ", ".join(seen)
    if request.profile is not None and all(p is None for p in profiles):
        have = "; ".join(f"{t.table.model} has {', '.join(t.table.names())}" for t in state.tables)
        return f"no GPU model in MIG mode has profile {request.profile}: {have}"
    return ""


def _mig_too_large(
    cluster: Cluster, state: MigState, request: MigRequest, profiles: Sequence[MigProfile | None],
    room_empty: np.ndarray, count: int,
) -> str:
    """Why no node could hold the MIG instances asked even with its MIG GPUs empty."""
    if all(p is None for p in profiles):
        sized = [(p, t.table.model) for t in state.tables for p in t.table.profiles if p.memory_mib is not None]
        largest = max(sized, key=lambda pm: pm[0].memory_mib or 0)
        return (f"no MIG profile holds {request.memory_mib} MiB: the largest is {largest[0].name} "
                f"({largest[0].memory_mib} MiB) on {largest[1]}")
    best = int(np.argmax(room_empty))
    return (f"{count} x {_mig_asked(request)} asked on one node; the most one node's MIG GPUs hold even empty is "
            f"{int(room_empty[best])} ({cluster.node_names[best]})")


def _unheld_slices(state: MigState, usage: MigUsage, row: int) -> int:
    """Slices of a MIG GPU no instance in use holds."""
    return free_slice_count(state.tables[int(state.table_of[row])].table, int(usage.held[row]))


def _mig_gpu_note(
    cluster: Cluster, state: MigState, usage: MigUsage, idle: np.ndarray, row: int, profile: MigProfile | None
) -> str:
    """What one MIG GPU offers the asked profile, or why it offers none."""
    assert profile is not None
    node = int(state.node_of[row])
    tables = state.tables[int(state.table_of[row])]
    table = tables.table
    where = f"node {cluster.node_names[node]} GPU {int(state.gpu_of[row])}"
    free_now = int(state.free_of[row, profile.index])
    if not state.dynamic[row]:
        if free_now:
            return f"{where} (static): {free_now} free {profile.name} instance(s)"
        mine = [i for i in state.node_instances(node) if i.row == row]
        spare = {i.profile.name: 0 for i in mine if i.holder is None}
        for i in mine:
            if i.holder is None:
                spare[i.profile.name] += 1
        text = f"{where} (static): no free {profile.name} instance"
        if spare:
            text += " (free: " + ", ".join(f"{n} x {p}" for p, n in spare.items()) + ")"
        if idle[row]:
            return text + f"; idle: a re-split would hold {int(tables.copies[profile.index, 0])} x {profile.name}"
        holders = sorted({i.holder for i in mine if i.holder is not None})
        return text + f"; in use by {', '.join(holders)}: never re-split"
    slices = free_slice_count(table, int(state.busy[row]))
    compute = table.compute_slices - int(usage.compute[row])
    creatable = int(tables.capacity(profile, state.busy[row:row + 1], state.media_used[row:row + 1])[0])
    if free_now or creatable:
        return f"{where}: room for {free_now + creatable} x {profile.name}"
    if profile.media and state.media_used[row]:
        return f"{where}: its media unit is taken (one +me instance per GPU), {profile.name} needs it"
    if slices >= profile.memory_slices and compute >= profile.compute_slices:
        return (f"{where}: {slices} free slices and {compute} free compute units, but no valid start for "
                f"{profile.name}")
    return (f"{where}: {slices} free slice(s) and {compute} free compute unit(s), {profile.name} needs "
            f"{profile.memory_slices} and {profile.compute_slices}")


def _mig_shortage(
    cluster: Cluster, state: MigState, usage: MigUsage, rows: Sequence[int], profiles: Sequence[MigProfile | None],
    count: int, n_nodes: int, relayout: Sequence[GpuRelayout], notes: Sequence[str],
) -> tuple[str, str]:
    """Fragmentation (enough free slices and compute slices on the eligible MIG GPUs, in
    the wrong places) or capacity (not enough), with the detail."""
    per_table: dict[int, list[int]] = {}
    for r in rows:
        per_table.setdefault(int(state.table_of[r]), []).append(r)
    sums = []
    for t, members in per_table.items():
        profile = profiles[t]
        assert profile is not None
        compute_total = state.tables[t].table.compute_slices
        free_s = sum(_unheld_slices(state, usage, r) for r in members)
        free_c = sum(compute_total - int(usage.held_compute[r]) for r in members)
        need_s, need_c = count * profile.memory_slices, count * profile.compute_slices
        sums.append((min(free_s - need_s, free_c - need_c), profile, len(members), free_s, free_c, need_s, need_c))
    margin, profile, n_gpus, free_s, free_c, need_s, need_c = max(sums, key=lambda s: s[0])
    where = f"on {n_gpus} MIG GPU(s) of {n_nodes} eligible node(s)"
    if margin < 0 and not relayout:
        short = []
        if free_s < need_s:
            short.append(f"{need_s - free_s} slice(s) ({free_s} free of {need_s})")
        if free_c < need_c:
            short.append(f"{need_c - free_c} compute unit(s) ({free_c} free of {need_c})")
        return "capacity", f"not enough free {where}: short " + ", ".join(short)
    head = (f"{free_s} free slice(s) and {free_c} free compute unit(s) {where}, {count} x {profile.name} "
            f"needs {need_s} and {need_c}")
    static = any(not state.dynamic[r] for r in rows)
    no_start = next((n for n in notes if "no valid start" in n), None)
    if relayout:
        gpus = ", ".join(f"{g.node}/{g.gpu}" for g in relayout)
        layouts = ", ".join(g.after.to_text() for g in relayout)
        idle = "an idle GPU" if len(relayout) == 1 else "idle GPUs"
        tail = f"static GPU(s): no free {profile.name} instance; {idle} {gpus} could be re-split to {layouts}"
    elif no_start is not None:
        tail = no_start
    elif static:
        tail = f"static GPU(s): no free {profile.name} instance, and no idle GPU a re-split would give it"
    else:
        tail = f"no GPU has a valid start for {profile.name}"
    return "fragmentation", f"{head}; {tail}"
