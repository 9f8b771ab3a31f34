"""The text of every reason a pod or gang is not placed (kube-scheduler's and Kueue's wording).

One module, so that ``placer place``, ``explain`` and the gang solvers say the same thing
the same way. Counts come from the kernel session; the words are here.
"""
from __future__ import annotations

from typing import Mapping, Sequence

__all__ = [
    "RESOURCE_REASONS",
    "RELATIONAL_REASONS",
    "SPREAD_MISSING_LABEL",
    "SPREAD",
    "POD_AFFINITY",
    "POD_ANTI_AFFINITY",
    "EXISTING_ANTI_AFFINITY",
    "UNSCHEDULABLE",
    "NODE_NAME",
    "UNTOLERATED_TAINT",
    "SELECTOR",
    "NODE_AFFINITY_PREFILTER",
    "AFFINITY_TERMS_CONFLICT",
    "PREFILTER_REASONS",
    "GPU_MODEL",
    "NO_GPU",
    "NICS",
    "PORTS",
    "is_resource_reason",
    "ONLY_GPU_SLOTS",
    "NO_GPU_SLOTS",
    "MPS_ONE_SLOT",
    "SLOTS_SHORT",
    "untolerated_taint",
    "missing_gpu_models",
    "insufficient",
    "NO_MIG",
    "mig_resource",
    "mig_profile_missing",
    "kube_reason",
    "gang_member_failed",
    "gang_level_short",
    "gang_no_common_model",
    "gang_solver_gave_up",
    "no_preemption_for_inter_pod_rules",
]


RESOURCE_REASONS = (
    "Insufficient cpu",
    "Insufficient memory",
    "Too many pods",
    "Insufficient nvidia.com/gpu",
    "Insufficient GPU memory",
)
"""The resources a node may lack, in the order of the kernel's shortfall counters (``R_*``)."""

SPREAD_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
SPREAD = "node(s) didn't match pod topology spread constraints"
POD_AFFINITY = "node(s) didn't match pod affinity rules"
POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
RELATIONAL_REASONS = (SPREAD_MISSING_LABEL, SPREAD, POD_AFFINITY, POD_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY)
"""kube-scheduler's PodTopologySpread and InterPodAffinity reasons, in the order of the
kernel's counters after :data:`RESOURCE_REASONS` (``R_SPREAD_LABEL`` ..)."""


UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
SELECTOR = "node(s) didn't match Pod's node affinity/selector"
NODE_AFFINITY_PREFILTER = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
"""Nodes outside the names that every term of a pod's required node affinity lists
(``matchFields`` ``metadata.name In``): kube's NodeAffinity PreFilter leaves them out."""
AFFINITY_TERMS_CONFLICT = "pod affinity terms conflict"
"""Every term of the required node affinity names nodes, and together they name none."""
PREFILTER_REASONS = frozenset({AFFINITY_TERMS_CONFLICT})
"""Reasons kube-scheduler gives for the whole cluster at PreFilter: the line says them once,
without a count."""
GPU_MODEL = "node(s) didn't match Pod's GPU model"
NO_GPU = RESOURCE_REASONS[3]
NICS = "Insufficient NICs"
PORTS = "node(s) didn't have free ports for the requested pod ports"
"""kube-scheduler's NodePorts reason: a pod on the node holds a host port the pod needs."""


def is_resource_reason(reason: str) -> bool:
    """Whether ``reason`` is a resource the node lacks (``Insufficient <resource>``: kube's
    NodeResourcesFit, and placer's NICs), which kube's NodePorts filter comes before even
    where placer finds it among the static reasons (a node without GPUs, without an
    extended resource)."""
    return reason.startswith("Insufficient ")
ONLY_GPU_SLOTS = "node(s) share their GPUs (time-slicing or MPS): they offer gpuSlots only"
NO_GPU_SLOTS = "node(s) didn't share their GPUs (no gpuSharing): they offer no gpuSlots"
MPS_ONE_SLOT = "node(s) share their GPUs by MPS: one slot per pod"
SLOTS_SHORT = "Insufficient nvidia.com/gpu slots"


def missing_gpu_models(wanted: Sequence[str], present: Sequence[str]) -> str:
    """The nodes a pod cannot use because no node has any GPU model it names."""
    return (
        f"node(s) didn't match Pod's GPU model (no node has {', '.join(wanted)}; "
        f"the cluster has {', '.join(present) or 'no GPUs'})"
    )


def untolerated_taint(key: str, value: str) -> str:
    """The reason of a node with a taint the pod does not tolerate: kube-scheduler (v1.36,
    the release placer pins) does not name the taint, so every taint gives :data:`UNTOLERATED_TAINT`."""
    return UNTOLERATED_TAINT


def insufficient(resource: str) -> str:
    """An extended resource no node has enough of."""
    return f"Insufficient {resource}"


NO_MIG = "node(s) had no GPU in MIG mode"


def mig_resource(profile: str | None, memory_mib: int | None) -> str:
    """The Kubernetes resource of a MIG request (``nvidia.com/mig-3g.40gb``)."""
    return f"nvidia.com/mig-{profile}" if profile is not None else f"nvidia.com/mig (a profile of {memory_mib} MiB)"


def mig_profile_missing(profile: str | None, memory_mib: int | None) -> str:
    """Nodes whose GPU model has no MIG profile for the request."""
    what = f"MIG profile {profile}" if profile is not None else f"MIG profile holding {memory_mib} MiB"
    return f"node(s) had a GPU model without {what}"


def kube_reason(total_nodes: int, counts: Mapping[str, int]) -> str:
    """``0/N nodes are available: …`` as kube-scheduler's ``FitError.Error`` writes it: the
    strings ``"<count> <reason>"`` in plain string order (``10 Insufficient cpu`` before
    ``2 Insufficient memory``) joined by ``, ``; a PreFilter reason
    (:data:`PREFILTER_REASONS`) alone and without its count."""
    head = f"0/{total_nodes} nodes are available"
    whole = sorted(r for r, c in counts.items() if c and r in PREFILTER_REASONS)
    if whole:
        return f"{head}: {whole[0]}."
    parts = sorted(f"{c} {r}" for r, c in counts.items() if c)
    return f"{head}: " + ", ".join(parts) + "." if parts else f"{head}."


def gang_member_failed(gang: str, placed_before: int, size: int, pod: str, line: str) -> str:
    """A gang placed pod by pod stopped at ``pod``, which ``line`` explains."""
    return f"gang {gang}: {placed_before} of {size} pod(s) placed before pod {pod} failed: {line}"


def gang_level_short(gang: str, level: str | None, fit: int, count: int, largest_of_several: bool,
                     excluded: str) -> str:
    """No domain of ``level`` (None: the whole cluster) holds the gang: Kueue's wording when
    the main shape is short, else what else kept it out."""
    where = "the cluster" if level is None else f"topology level {level}"
    line = f"; {excluded}" if excluded else ""
    if fit >= count:  # the main shape fits by count: the rest of the gang did not
        beside = "the other shapes beside them" if largest_of_several else "them once their GPUs and NICs are chosen"
        whose = "of its largest shape " if largest_of_several else ""
        return f"gang {gang}: {where} has room for the {count} pod(s) {whose}but not for {beside}{line}"
    of = " of its largest shape" if largest_of_several else ""
    return f"gang {gang}: {where} allows to fit only {fit} out of {count} pod(s){of}{line}"


def gang_no_common_model(gang: str) -> str:
    """``sameGpuModel`` and no GPU model every pod of the gang may use."""
    return f"gang {gang}: no GPU model suits every pod of the gang (sameGpuModel)"


def gang_model_out_of_time(reason: str, time_limit_s: float) -> str:
    """The greedy's ``reason``, when the time limit ran out before CP-SAT could search."""
    return reason + f"; the time limit of {time_limit_s:g} s ran out while the CP-SAT model was built"


def gang_budget_spent(reason: str) -> str:
    """The greedy's ``reason``, when the request's time budget left nothing for CP-SAT."""
    return reason + "; the request's time budget (timeBudgetS) was spent before CP-SAT could run"


def no_preemption_for_inter_pod_rules(reason: str) -> str:
    """A pod with inter-pod rules that preemption does not try for (placer's victim search
    does not re-check affinity, anti-affinity or spread with the victims gone)."""
    return f"{reason} (preemption not attempted: the pod has inter-pod affinity or topology spread rules)"


def gang_solver_gave_up(reason: str, status: str, time_limit_s: float) -> str:
    """The greedy's ``reason``, with what CP-SAT then found (``status``)."""
    if status == "infeasible":
        return reason + "; CP-SAT proved that no placement exists"
    return reason + f"; CP-SAT found no placement within {time_limit_s:g} s"
