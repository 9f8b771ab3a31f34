"""One admission cycle as text: what was admitted, what waits and why, what was preempted,
and how much of its nominal quota each ClusterQueue uses afterwards.

:func:`admission_text` is what ``placer admit --format text`` prints; the JSON output is
:meth:`placer.queues.result.AdmissionResult.to_dict`.
"""
from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

from placer.queues.model import CPU, MEMORY, PODS, QueueConfig, Workload
from placer.queues.result import AdmissionResult, AdmittedWorkload

__all__ = ["admission_text", "cluster_queue_usage", "format_amount"]

_GIB = 1 << 30
_MAX_NODES_SHOWN = 6


def format_amount(resource: str, units: int) -> str:
    """An amount in Kueue's accounting units as a person reads it: cpu in cores, memory in
    GiB (bytes below 1 GiB), every other resource as a count.

    Parameters
    ----------
    resource : str
        The resource name.
    units : int
        Millicores for ``cpu``, bytes for ``memory``, a count otherwise.

    Returns
    -------
    str
        ``"1.5"`` (cores), ``"32Gi"``, ``"512Mi"``, ``"8"``.
    """
    if resource == CPU:
        return f"{units // 1000}" if units % 1000 == 0 else f"{units / 1000:g}"
    if resource == MEMORY:
        if units % _GIB == 0:
            return f"{units // _GIB}Gi"
        if units % (1 << 20) == 0:
            return f"{units >> 20}Mi"
        return str(units)
    return str(units)


def cluster_queue_usage(
    config: QueueConfig, workloads: Sequence[Workload], result: AdmissionResult
) -> dict[str, dict[tuple[str, str], int]]:
    """Each ClusterQueue's usage after the cycle, per (flavor, resource).

    A workload counts when it was admitted before the cycle (``Workload.admission``) and
    not preempted in it, or is admitted in it (at the flavors of ``result``). A pod set
    uses its per-pod requests times its count, and ``pods`` = its count when the flavors
    assigned to it include ``pods`` (a ClusterQueue that covers pods).

    Parameters
    ----------
    config : QueueConfig
        The ClusterQueues reported (others are left out).
    workloads : sequence of Workload
        The workloads of the cycle, admitted and pending.
    result : AdmissionResult
        The cycle's outcome.

    Returns
    -------
    dict
        ``{cluster_queue: {(flavor, resource): units}}``, every ClusterQueue of ``config``.
    """
    by_key = {w.key: w for w in workloads}
    preempted = {p.workload for p in result.preempted}
    usage: dict[str, dict[tuple[str, str], int]] = {name: {} for name in config.cluster_queues}
    holders: list[tuple[Workload, str, Mapping[str, Mapping[str, str]]]] = []
    for w in workloads:
        if w.admission is not None and w.key not in preempted:
            holders.append((w, w.admission.cluster_queue, w.admission.flavors))
    for a in result.admitted:
        w = by_key.get(a.workload)
        if w is not None:
            holders.append((w, a.cluster_queue, a.flavors))
    for w, cq, flavors in holders:
        table = usage.get(cq)
        if table is None:
            continue
        for ps in w.pod_sets:
            chosen = flavors.get(ps.name, {})
            amounts = {r: v * ps.count for r, v in ps.requests.items()}
            if PODS in chosen:
                amounts[PODS] = amounts.get(PODS, 0) + ps.count
            for resource, units in amounts.items():
                flavor = chosen.get(resource)
                if flavor is not None:
                    table[flavor, resource] = table.get((flavor, resource), 0) + units
    return usage


def _flavors_text(flavors: Mapping[str, Mapping[str, str]]) -> str:
    parts = []
    for pod_set, by_resource in flavors.items():
        by_flavor: dict[str, list[str]] = {}
        for resource, flavor in by_resource.items():
            by_flavor.setdefault(flavor, []).append(resource)
        inner = ", ".join(f"{flavor} ({', '.join(rs)})" for flavor, rs in by_flavor.items()) or "no flavor"
        parts.append(f"{pod_set}: {inner}")
    return "; ".join(parts) or "no pod sets"


def _nodes_text(admitted: AdmittedWorkload) -> str:
    if not admitted.assignments:
        return "quota only, not placed"
    pods = Counter(a.node for a in admitted.assignments)
    shown = [f"{node} x{n}" if n > 1 else node for node, n in pods.most_common(_MAX_NODES_SHOWN)]
    more = len(pods) - len(shown)
    return "nodes " + ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def admission_text(
    result: AdmissionResult, *, config: QueueConfig | None = None, workloads: Sequence[Workload] | None = None
) -> str:
    """A human text of one admission cycle.

    Parameters
    ----------
    result : AdmissionResult
        The cycle's outcome.
    config : QueueConfig, optional
        With ``workloads``, adds each ClusterQueue's usage after the cycle beside its
        nominal quota (:func:`cluster_queue_usage`); alone, adds each ClusterQueue's cohort.
    workloads : sequence of Workload, optional
        The workloads the cycle was run on (for the usage).

    Returns
    -------
    str
        Sections ``Admitted``, ``Pending``, ``Preempted`` (each with its count) and, when
        it can be derived, ``Usage``; every line ends with a newline.
    """
    lines: list[str] = []
    cohort_of = {name: cq.cohort for name, cq in config.cluster_queues.items()} if config is not None else {}

    def cq_text(name: str | None) -> str:
        if name is None:
            return "no ClusterQueue"
        cohort = cohort_of.get(name)
        return f"{name} (cohort {cohort})" if cohort else name

    lines.append(f"Admitted ({len(result.admitted)}):")
    for a in result.admitted:
        borrowing = ", borrowing" if a.borrowing else ""
        lines.append(f"  {a.workload} in {cq_text(a.cluster_queue)}{borrowing}")
        lines.append(f"    flavors: {_flavors_text(a.flavors)}")
        lines.append(f"    {_nodes_text(a)}")
    lines.append(f"Pending ({len(result.pending)}):")
    for p in result.pending:
        marks = [m for m, on in (("inadmissible", p.inadmissible), ("waits for preemptions", p.needs_preemption)) if on]
        suffix = f" [{', '.join(marks)}]" if marks else ""
        lines.append(f"  {p.workload} in {cq_text(p.cluster_queue)}{suffix}: {p.reason}")
    lines.append(f"Preempted ({len(result.preempted)}):")
    for v in result.preempted:
        lines.append(f"  {v.workload} for {v.by} ({v.reason})")
    if config is not None and workloads is not None and config.cluster_queues:
        lines.append("Usage after this cycle (used / nominal):")
        usage = cluster_queue_usage(config, workloads, result)
        for name, cq in config.cluster_queues.items():
            lines.append(f"  {cq_text(name)}")
            for group in cq.resource_groups:
                for fq in group.flavors:
                    cells = []
                    for resource in group.covered_resources:
                        used = usage[name].get((fq.name, resource), 0)
                        nominal = fq.resources[resource].nominal
                        over = " borrowed" if used > nominal else ""
                        cells.append(f"{resource} {format_amount(resource, used)}/"
                                     f"{format_amount(resource, nominal)}{over}")
                    lines.append(f"    {fq.name}: " + ", ".join(cells))
    return "\n".join(lines) + "\n"
