"""What a pending pod's spec asks of kube-scheduler that placer does not model: one note
each, so nothing the scheduler would decide on is dropped in silence.

The decision per field is docs/placement-rules.md's "Importer notes" table: a field that
changes nothing kube-scheduler decides (``image``, ``env``, ``command``, ``dnsPolicy``,
``securityContext``, ...) is read by nobody and noted by nobody; a field kube's filters
read and placer does not (volumes bound to storage, scheduling gates, another scheduler, a
RuntimeClass not yet admitted) is one note here. Host ports are read
(:func:`placer.adapters.kubernetes.templates.pod_host_ports`); Kueue's reader, whose pod
sets do not carry them, notes them (:func:`host_port_notes`).
"""
from __future__ import annotations

from typing import Any, Mapping

from placer.adapters.kubernetes.documents import Document, field_list, field_map, field_string
from placer.adapters.kubernetes.templates import pod_host_ports

__all__ = ["PLACED_BY", "LOCAL_VOLUME_SOURCES", "unmodelled_pod_notes", "host_port_notes", "unmodelled_group_notes"]

PLACED_BY = frozenset({"default-scheduler", "placer", "volcano", "scheduler-plugins-scheduler"})
"""``spec.schedulerName`` values placer answers for: kube-scheduler (which the extender
serves), placer itself, and the gang schedulers whose PodGroups placer reads."""

LOCAL_VOLUME_SOURCES = frozenset(
    {"emptyDir", "configMap", "secret", "downwardAPI", "projected", "hostPath", "nfs", "gitRepo", "image"}
)
"""Volume sources no scheduling plugin reads (VolumeBinding, VolumeZone, VolumeRestrictions
and NodeVolumeLimits look at claims, CSI and in-tree disks only); any other is a note."""

def unmodelled_pod_notes(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], admitted: bool) -> list[str]:
    """The notes of a pending pod's spec (or a template's): each field kube-scheduler's
    filters read that placer does not model.

    Parameters
    ----------
    doc, spath
        The document and the spec's path in it (the notes start with its location).
    spec : mapping
        The pod's ``spec``.
    admitted : bool
        Whether the API server already admitted the pod (a Pod object with a status):
        admission adds a RuntimeClass's overhead and node selector to the spec.

    Returns
    -------
    list of str
        In spec order: volumes, ``schedulingGates``, ``schedulerName``,
        ``runtimeClassName`` (pod-level ``resources`` are read: kube's PodLevelResources).
    """
    notes = _volume_notes(doc, spath, spec)
    gpath = (*spath, "schedulingGates")
    gates = [
        field_string(doc, (*gpath, j, "name"), field_map(doc, (*gpath, j), g).get("name"))
        for j, g in enumerate(field_list(doc, gpath, spec.get("schedulingGates")))
    ]
    if gates:
        notes.append(doc.note((*spath, "schedulingGates"), (
            f"gated by {', '.join(str(g) for g in gates)}: kube-scheduler does not place the pod until "
            "every gate is removed (SchedulingGated); placer places it as if none were left")))
    scheduler = field_string(doc, (*spath, "schedulerName"), spec.get("schedulerName"))
    if scheduler and scheduler not in PLACED_BY:
        notes.append(doc.note((*spath, "schedulerName"), (
            f"{scheduler!r} places this pod, not kube-scheduler: placer's answer is what "
            "kube-scheduler would do")))
    runtime = field_string(doc, (*spath, "runtimeClassName"), spec.get("runtimeClassName"))
    if runtime and not admitted and not spec.get("overhead"):
        notes.append(doc.note((*spath, "runtimeClassName"), (
            f"RuntimeClass {runtime!r}: its overhead and node selector are added when the pod is "
            "admitted; placer reads them from an admitted pod's spec only (give spec.overhead)")))
    return notes


def host_port_notes(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> list[str]:
    """One note for a pod set whose pods take host ports (kube's ``GetHostPorts``), for the
    readers whose pods do not carry them (Kueue's admission: placer's request importers put
    them in ``hostPorts``, which the NodePorts filter reads)."""
    ports = pod_host_ports(doc, spath, spec)
    if not ports:
        return []
    taken = ", ".join(f"{p.get('protocol', 'TCP')}/{p['hostPort']}" for p in ports)
    return [doc.note(spath, (
        f"host port(s) {taken}: Kueue admits the workload without them; kube's NodePorts filter "
        "then keeps each pod off nodes where a pod holds one"))]


def _volume_notes(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> list[str]:
    """One note per pod whose volumes kube's volume plugins read (claims, CSI, disks)."""
    named: list[str] = []
    first: tuple[Any, ...] | None = None
    for j, v in enumerate(field_list(doc, (*spath, "volumes"), spec.get("volumes"))):
        v = field_map(doc, (*spath, "volumes", j), v)
        sources = [k for k in v if k != "name" and k not in LOCAL_VOLUME_SOURCES]
        if sources:
            named.append(f"{v.get('name', j)} ({sources[0]})")
            first = first or (*spath, "volumes", j)
    if first is None:
        return []
    return [doc.note(first, (
        f"volume(s) {', '.join(named)}: kube's VolumeBinding, VolumeZone, VolumeRestrictions and "
        "NodeVolumeLimits filters read them; placer does not model storage"))]


def unmodelled_group_notes(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], label: str) -> list[str]:
    """The notes of a PodGroup's spec (scheduler-plugins or Volcano) placer does not model:
    ``minResources`` (the gang waits until the cluster has them free)."""
    if not spec.get("minResources"):
        return []
    return [doc.note((*spath, "minResources"), (
        f"{label}'s minResources are not checked: its scheduler keeps the gang waiting until the "
        "cluster has them free; placer places the pods by their own requests"))]
