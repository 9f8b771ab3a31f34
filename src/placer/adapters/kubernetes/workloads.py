"""Kubernetes workload manifests to a placer request.

:func:`request_from_kubernetes` (and :func:`import_workloads`, which also says what it
left out) turns workload manifests — Pod, Job, JobSet, Deployment and other pod-template
workloads, scheduler-plugins and Volcano PodGroups, Volcano Jobs, Kueue topology
annotations — and the pending pods of ``kubectl get pods -o json`` into a
:class:`placer.PlacementRequest`: it writes the placer/v1 document
of the workloads (a workload's pods as one entry with ``replicas``) and decodes it once
with :func:`placer.schema.request_from_dict`, so every check of the schema runs, and a fault
it finds names the manifest it came from. The document itself is
:attr:`WorkloadImport.document`, the file ``placer import kubernetes-request`` writes (the
request expands ``replicas``, so its ``to_dict()`` lists every pod). Files, quantities and
errors are read as :mod:`placer.adapters.kubernetes.snapshot` describes.

The Kueue importer (:mod:`placer.adapters.kueue.objects`) reads workload objects with the
readers this module shares with it, in :mod:`placer.adapters.kubernetes.templates` (and
re-exported here): :func:`pod_template_sets` (a workload's pod sets as Kueue makes them),
:func:`object_name`, :func:`pod_tolerations`, :func:`pod_skip_reason`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from placer.schema import request_from_dict
from placer.schema.files import gc_paused
from placer.adapters.kubernetes.mig import take_mig_request
from placer.adapters.kubernetes.quantities import cpu_memory, gpu_count, pod_amounts, pod_resources
from placer.adapters.kubernetes.snapshot import HOSTNAME_LABEL, LevelSpec, PathLike, parse_levels
from placer.adapters.kubernetes.scheduling import PriorityClasses, kueue_group, named_group
from placer.adapters.kubernetes.unmodelled import unmodelled_group_notes, unmodelled_pod_notes
from placer.adapters.kubernetes.documents import (
    Document,
    document_objects,
    field_integer,
    field_list,
    field_map,
    field_str_map,
    field_string,
    read_documents,
    show,
)
from placer.exceptions import InvalidInputError
from placer.model import EMPTY, PlacementRequest
from placer.adapters.kubernetes.templates import (
    MAX_WORKLOAD_PODS, POD_PHASES, REPLICATED_KINDS, PodTemplateSet, has_pod_template, job_pod_count, object_name,
    SCHEDULING_RULES, pod_host_ports, pod_skip_reason, pod_template_sets, pod_tolerations, replica_count,
    scheduling_rules,
)

__all__ = [
    "MAX_WORKLOAD_PODS",
    "PodTemplateSet",
    "object_name",
    "replica_count",
    "job_pod_count",
    "pod_tolerations",
    "pod_template_sets",
    "pod_skip_reason",
    "workloads_from_objects",
    "MISSING_PODGROUP",
    "POD_PHASES",
    "WorkloadImport",
    "request_from_kubernetes",
    "import_workloads",
]

MISSING_PODGROUP = ("error", "gang-of-present-pods")
"""What :func:`import_workloads` does with pods naming a PodGroup the inputs lack: fail
(default), or make the gang of the pods present."""

KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
"""The labels the API server gives a Job's pod template: the Job's name."""
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
"""The labels the API server gives a Job's pod template: the Job's ``metadata.uid``."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
"""The labels the JobSet controller gives the pods of a replicated job."""


_READ_KINDS = frozenset(
    ("Pod", "Job", "JobSet", "PodGroup", "PriorityClass", "DaemonSet", "CronJob", *(k for _, k in REPLICATED_KINDS))
)
_EXPECTED_KINDS = (
    "expected Pod, Job, JobSet, Deployment, StatefulSet, ReplicaSet, PodGroup, Volcano Job or another "
    "workload with a pod template"
)
_NODES_HINT = " (nodes are read by 'placer import kubernetes --nodes')"


# ----------------------------------------------------------------------------- request


@dataclass(frozen=True)
class WorkloadImport:
    """What :func:`import_workloads` made of a set of manifests.

    Attributes
    ----------
    request : PlacementRequest
        The request, decoded from :attr:`document` (``replicas`` expanded).
    document : dict
        The placer/v1 PlacementRequest document the request was decoded from, as
        ``placer import kubernetes-request`` writes it: one entry per workload with
        ``replicas``, ``policy`` only when given, gangs without default fields.
    skipped : dict of str to int
        Objects not imported, counted by kind (``ComputeDomain``, ``ResourceFlavor``,
        ``HyperNode``, ``DaemonSet``, ...), in order of first appearance.
    notes : tuple of str
        What was read but could not be carried over, one line each, starting with the
        object's location (``file:line`` or ``file: path``): ignored pod fields
        (``resourceClaims``), a gang whose minMember differs
        from its pod count, a PodGroup without pods, an unresolved priority class.
    skipped_pods : dict of str to int
        Pod objects not imported because they are not waiting to be scheduled, counted
        by reason in order of first appearance: their phase (``Running``,
        ``Succeeded``, ``Failed``, ``Unknown``), ``bound to a node`` (``spec.nodeName``
        set), ``owned by a DaemonSet``. Empty with ``all_phases``.
    """

    request: PlacementRequest
    document: dict[str, Any]
    skipped: dict[str, int]
    notes: tuple[str, ...]
    skipped_pods: dict[str, int] = field(default_factory=dict)


class _Gang:
    __slots__ = ("name", "label", "members", "min_member", "topology", "slices", "origin", "named_by", "unmodelled")

    def __init__(self, name: str, label: str) -> None:
        self.name = name
        self.label = label
        self.members = 0
        self.min_member: int | None = None
        self.topology: tuple[dict[str, str], str] | None = None
        self.slices: tuple[list[dict[str, Any]], str] | None = None
        self.origin: tuple[Document, tuple[Any, ...]] | None = None
        # The first pod (or template) naming the PodGroup: its label's place and who it is.
        self.named_by: tuple[Document, tuple[Any, ...], str] | None = None
        self.unmodelled: list[str] = []  # notes of its PodGroup's fields, given when it has pods


class _Workloads:
    """State of one :func:`import_workloads` run."""

    def __init__(self, levels: Sequence[tuple[str, str]], all_phases: bool, missing_podgroup: str) -> None:
        self.levels = list(levels)
        self.all_phases = all_phases
        self.missing_podgroup = missing_podgroup
        self.skipped_pods: dict[str, int] = {}
        self.by_label = {label: name for name, label in levels}
        self.pods: list[dict[str, Any]] = []
        self.pod_src: list[tuple[Document, tuple[Any, ...]]] = []
        self.gangs: dict[str, _Gang] = {}
        self.skipped: dict[str, int] = {}
        self.unread: dict[str, int] = {}  # the skipped kinds no note names yet
        self.notes: list[str] = []
        self.classes = PriorityClasses()

    # -------------------------------------------------------------- helpers

    def gang(self, name: str, label: str) -> _Gang:
        g = self.gangs.get(name)
        if g is None:
            g = self.gangs[name] = _Gang(name, label)
        return g

    def level_for(self, doc: Document, path: tuple[Any, ...], label: str, what: str) -> str:
        level = self.by_label.get(label)
        if level is not None:
            return level
        if label == HOSTNAME_LABEL:
            return "node"
        given = ", ".join(f"{n}={lb}" for n, lb in self.levels) or "none"
        doc.fail(
            path,
            f"{what} names node label {label!r}, which no topology level maps; add "
            f"--level NAME={label} (levels given: {given})",
        )

    def set_topology(self, g: _Gang, topo: dict[str, str], doc: Document, path: tuple[Any, ...]) -> None:
        here = doc.where(path)
        if g.topology is not None and g.topology[0] != topo:
            doc.fail(
                path,
                f"gang {g.name!r} gets topology {topo} here but {g.topology[0]} at {g.topology[1]}; "
                "placer places a gang under one topology constraint",
            )
        if g.topology is None:
            g.topology = (topo, here)

    def set_slices(self, g: _Gang, slices: list[dict[str, Any]], doc: Document, path: tuple[Any, ...]) -> None:
        if g.slices is not None and g.slices[0] != slices:
            doc.fail(path, f"gang {g.name!r} gets slices {slices} here but {g.slices[0]} at {g.slices[1]}")
        if g.slices is None:
            g.slices = (slices, doc.where(path))

    def skip(self, kind: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1

    # -------------------------------------------------------------- objects

    def header(self, doc: Document, path: tuple[Any, ...], obj: Any) -> tuple[str, str]:
        if not isinstance(obj, dict):
            doc.fail(path, f"expected a Kubernetes object (a mapping), got {show(obj)}")
        api = obj.get("apiVersion")
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            doc.fail((*path, "kind"), f"expected a Kubernetes object with a kind, got kind {show(kind)}")
        if not isinstance(api, str) or not api:
            doc.fail((*path, "apiVersion"), f"expected an apiVersion, got {show(api)}")
        group = api.rsplit("/", 1)[0] if "/" in api else ""
        return group, kind

    def collect(self, doc: Document, path: tuple[Any, ...], obj: Any) -> None:
        """First pass: PriorityClasses and PodGroups (they may come after their users)."""
        if PriorityClasses.is_priority_class(obj):
            self.classes.add(doc, path, obj)

    def add(self, doc: Document, path: tuple[Any, ...], obj: Any) -> bool:
        """Import one object; False when it is of a kind placer does not read (skipped)."""
        group, kind = self.header(doc, path, obj)
        if kind == "Node":
            doc.fail((*path, "kind"), f"{_EXPECTED_KINDS}, got Node{_NODES_HINT}")
        if group == "" and kind == "Pod":
            self.pod_object(doc, path, obj)
        elif group == "batch" and kind == "Job":
            self.job(doc, path, obj)
        elif group == "jobset.x-k8s.io" and kind == "JobSet":
            self.jobset(doc, path, obj)
        elif group in ("scheduling.x-k8s.io", "scheduling.sigs.k8s.io") and kind == "PodGroup":
            self.pod_group(doc, path, obj, volcano=False)
        elif group == "scheduling.volcano.sh" and kind == "PodGroup":
            self.pod_group(doc, path, obj, volcano=True)
        elif group == "batch.volcano.sh" and kind == "Job":
            self.volcano_job(doc, path, obj)
        elif group == "scheduling.k8s.io" and kind == "PriorityClass":
            pass  # read in the first pass
        elif kind in ("DaemonSet", "CronJob"):
            self.notes.append(doc.note(path, f"{kind} not imported (no fixed pod count)"))
            self.skip(kind)
        elif (group, kind) in REPLICATED_KINDS or has_pod_template(obj):
            self.replicated(doc, path, obj)
        else:
            self.skip(kind)
            self.unread[kind] = self.unread.get(kind, 0) + 1
            return False
        return True

    def pod_object(self, doc: Document, path: tuple[Any, ...], obj: dict[str, Any]) -> None:
        namespace, name = object_name(doc, path, obj)
        if not self.all_phases:
            reason = pod_skip_reason(doc, path, obj)
            if reason is not None:
                self.skipped_pods[reason] = self.skipped_pods.get(reason, 0) + 1
                return
        status = field_map(doc, (*path, "status"), obj.get("status"))
        nominated = field_string(doc, (*path, "status", "nominatedNodeName"), status.get("nominatedNodeName"))
        self.template(doc, path, obj, namespace, f"{namespace}/{name}", None, own_gang=None, nominated_node=nominated)

    def job(self, doc: Document, path: tuple[Any, ...], obj: dict[str, Any]) -> None:
        """A Job: its pods carry the labels the API server adds to its template."""
        namespace, name = object_name(doc, path, obj)
        spec = field_map(doc, (*path, "spec"), obj.get("spec"), required=True)
        added: dict[str, str] = {}
        if spec.get("manualSelector") is not True:
            uid = field_string(doc, (*path, "metadata", "uid"), obj["metadata"].get("uid"))
            added = {label: name for label in JOB_NAME_LABELS}
            if uid:
                added.update((label, uid) for label in JOB_UID_LABELS)
        self.replicated(doc, path, obj, added)

    def jobset(self, doc: Document, path: tuple[Any, ...], obj: dict[str, Any]) -> None:
        namespace, name = object_name(doc, path, obj)
        gang = f"{namespace}/{name}"
        for ps in pod_template_sets(doc, path, obj) or ():
            self.template(
                doc, ps.path, ps.template, namespace, f"{gang}-{ps.name}", ps.count,
                own_gang=(gang, f"JobSet {gang}", (doc, path)),
                added_labels={JOBSET_NAME_LABEL: name, JOBSET_REPLICATED_JOB_LABEL: ps.name},
            )

    def replicated(
        self, doc: Document, path: tuple[Any, ...], obj: dict[str, Any], added_labels: Mapping[str, str] = EMPTY
    ) -> None:
        """A Job or a workload of ``replicas`` pods from one template: one entry, its pods
        labelled with ``added_labels`` too (those the template lacks)."""
        namespace, name = object_name(doc, path, obj)
        (ps,) = pod_template_sets(doc, path, obj) or ()
        self.template(
            doc, ps.path, ps.template, namespace, f"{namespace}/{name}", ps.count, own_gang=None,
            added_labels=added_labels,
        )

    def volcano_job(self, doc: Document, path: tuple[Any, ...], obj: dict[str, Any]) -> None:
        namespace, name = object_name(doc, path, obj)
        spath = (*path, "spec")
        spec = field_map(doc, spath, obj.get("spec"), required=True)
        gang_name = f"{namespace}/{name}"
        g = self.gang(gang_name, f"Volcano Job {gang_name}")
        g.origin = g.origin or (doc, path)
        tpath = (*spath, "tasks")
        tasks = field_list(doc, tpath, spec.get("tasks"))
        if not tasks:
            doc.fail(tpath, "expected a non-empty list of tasks")
        total = 0
        for j, task in enumerate(tasks):
            task = field_map(doc, (*tpath, j), task)
            tname = field_string(doc, (*tpath, j, "name"), task.get("name")) or f"task{j}"
            n = replica_count(doc, (*tpath, j, "replicas"), task.get("replicas"))
            total += n
            self.template(
                doc, (*tpath, j, "template"), task.get("template"), namespace, f"{gang_name}-{tname}", n,
                own_gang=(gang_name, g.label, (doc, path)),
            )
        min_available = field_integer(doc, (*spath, "minAvailable"), spec.get("minAvailable"), 0)
        g.min_member = total if min_available is None else min_available
        self.network_topology(doc, (*spath, "networkTopology"), spec.get("networkTopology"), g)

    def pod_group(self, doc: Document, path: tuple[Any, ...], obj: dict[str, Any], volcano: bool) -> None:
        namespace, name = object_name(doc, path, obj)
        gang_name = f"{namespace}/{name}"
        spath = (*path, "spec")
        spec = field_map(doc, spath, obj.get("spec"))
        g = self.gang(gang_name, f"{'Volcano ' if volcano else ''}PodGroup {gang_name}")
        g.origin = (doc, path)
        min_member = field_integer(doc, (*spath, "minMember"), spec.get("minMember"), 0)
        if min_member is not None:
            g.min_member = min_member
        g.unmodelled = unmodelled_group_notes(doc, spath, spec, g.label)
        if volcano:
            self.network_topology(doc, (*spath, "networkTopology"), spec.get("networkTopology"), g)

    def network_topology(self, doc: Document, path: tuple[Any, ...], v: Any, g: _Gang) -> None:
        """Volcano ``networkTopology {mode: hard|soft, highestTierAllowed | highestTierName}``:
        hard -> required, soft -> preferred; tier 1 is the innermost level given, tier k
        the k-th from the inside."""
        if v is None:
            return
        nt = field_map(doc, path, v)
        mode = nt.get("mode", "hard")
        if mode not in ("hard", "soft"):
            doc.fail((*path, "mode"), f"expected hard or soft, got {show(mode)}")
        tier_name = field_string(doc, (*path, "highestTierName"), nt.get("highestTierName"))
        if tier_name is not None:
            if tier_name not in self.by_label.values():
                doc.fail(
                    (*path, "highestTierName"),
                    f"names tier {tier_name!r}, which is no topology level; add --level {tier_name}=LABEL",
                )
            level = tier_name
        else:
            tier = field_integer(doc, (*path, "highestTierAllowed"), nt.get("highestTierAllowed"), 1)
            tier = 1 if tier is None else tier
            if tier > len(self.levels):
                doc.fail(
                    (*path, "highestTierAllowed"),
                    f"tier {tier} needs at least {tier} topology level(s) (tier 1 = the innermost "
                    f"--level), got {len(self.levels)}",
                )
            level = self.levels[len(self.levels) - tier][0]
        topo = {"mode": "required" if mode == "hard" else "preferred", "level": level}
        self.set_topology(g, topo, doc, path)

    # -------------------------------------------------------------- pod templates

    def template(
        self,
        doc: Document,
        path: tuple[Any, ...],
        template: Any,
        namespace: str,
        name: str,
        replicas: int | None,
        own_gang: tuple[str, str, tuple[Document, tuple[Any, ...]]] | None,
        nominated_node: str | None = None,
        added_labels: Mapping[str, str] = EMPTY,
    ) -> None:
        """One request pod entry (``replicas`` pods; a bare pod when None), nominated to
        ``nominated_node`` when a preemption already chose it one, labelled as the
        template and ``added_labels`` (the controller's labels the template lacks)."""
        template = field_map(doc, path, template, required=True)
        mpath = (*path, "metadata")
        meta = field_map(doc, mpath, template.get("metadata"))
        labels = field_str_map(doc, (*mpath, "labels"), meta.get("labels"), "labels")
        annotations = field_str_map(doc, (*mpath, "annotations"), meta.get("annotations"), "annotations")
        spath = (*path, "spec")
        spec = field_map(doc, spath, template.get("spec"), required=True)
        entry = self.pod_fields(doc, spath, spec, name)
        self.notes += unmodelled_pod_notes(doc, spath, spec, admitted=template.get("status") is not None)
        pod_labels = {**added_labels, **labels}
        if pod_labels:
            entry["labels"] = pod_labels
        if nominated_node is not None:
            entry["nominatedNodeName"] = nominated_node
        if replicas is not None:
            if replicas == 0:
                self.notes.append(doc.note(path, f"no pods for {name} (0 replicas)"))
                return
            entry = {"name": name, "replicas": replicas, **{k: v for k, v in entry.items() if k != "name"}}
        pods = 1 if replicas is None else replicas

        who = f"pod {name}" if replicas is None else f"workload {name}"
        gang: _Gang | None = None
        ref = named_group(namespace, labels, annotations)
        if ref is not None:
            gang = self.gang(ref.name, ref.label)
            gang.named_by = gang.named_by or (doc, (*mpath, ref.field, ref.key), who)
        if gang is None and own_gang is not None:
            gang = self.gang(own_gang[0], own_gang[1])
            gang.origin = gang.origin or own_gang[2]
        ref = kueue_group(namespace, labels) if gang is None else None
        if ref is not None:
            gang = self.gang(ref.name, ref.label)
            gang.origin = gang.origin or (doc, path)
        kueue = self.kueue_topology(doc, (*mpath, "annotations"), annotations)
        if gang is None and kueue is not None:
            gang = self.gang(name, f"workload {name}")
            gang.origin = (doc, path)
        if gang is not None:
            if kueue is not None:
                topo, slices, kpath = kueue
                if topo is not None:
                    self.set_topology(gang, topo, doc, kpath)
                if slices is not None:
                    self.set_slices(gang, slices, doc, kpath)
            gang.members += pods
            entry["gang"] = gang.name
        self.pods.append(entry)
        self.pod_src.append((doc, path))

    def kueue_topology(
        self, doc: Document, apath: tuple[Any, ...], annotations: Mapping[str, str]
    ) -> tuple[dict[str, str] | None, list[dict[str, Any]] | None, tuple[Any, ...]] | None:
        given = [k for k in (KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_UNCONSTRAINED) if k in annotations]
        has_slice = KUEUE_SLICE_TOPOLOGY in annotations or KUEUE_SLICE_SIZE in annotations
        if not given and not has_slice:
            return None
        if len(given) > 1:
            doc.fail((*apath, given[1]), f"{given[0]} and {given[1]} exclude each other")
        topo: dict[str, str] | None = None
        kpath = apath
        if given:
            key = given[0]
            kpath = (*apath, key)
            value = annotations[key]
            if key == KUEUE_UNCONSTRAINED:
                if value.lower() not in ("true", "false"):
                    doc.fail(kpath, f"expected \"true\" or \"false\", got {show(value)}")
                topo = {"mode": "unconstrained"} if value.lower() == "true" else None
            else:
                if not value:
                    doc.fail(kpath, "expected a node label key, got an empty string")
                level = self.level_for(doc, kpath, value, key)
                topo = {"mode": "required" if key == KUEUE_REQUIRED else "preferred", "level": level}
        slices: list[dict[str, Any]] | None = None
        if has_slice:
            spath = (*apath, KUEUE_SLICE_TOPOLOGY)
            label = annotations.get(KUEUE_SLICE_TOPOLOGY)
            size_text = annotations.get(KUEUE_SLICE_SIZE)
            if not label:
                doc.fail(spath, f"expected a node label key next to {KUEUE_SLICE_SIZE}")
            digits = size_text is not None and size_text.isascii() and size_text.isdigit()
            if size_text is None or not digits or len(size_text) > 9 or int(size_text) < 1:
                doc.fail((*apath, KUEUE_SLICE_SIZE), f"expected a slice size >= 1, got {show(size_text)}")
            level = self.level_for(doc, spath, label, KUEUE_SLICE_TOPOLOGY)
            slices = [{"level": level, "size": int(size_text)}]
        if topo is None and slices is None:
            return None
        return topo, slices, kpath

    def pod_fields(
        self, doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], name: str
    ) -> dict[str, Any]:
        amounts = pod_amounts(doc, spath, spec)
        entry: dict[str, Any] = {"name": name}
        mig = take_mig_request(doc, spath, amounts)
        if mig is not None:
            entry["mig"] = mig
        gpus = gpu_count(doc, spath, amounts)
        if gpus:
            entry["gpus"] = gpus
        entry.update(cpu_memory(amounts, round_up=True))
        selector = field_str_map(doc, (*spath, "nodeSelector"), spec.get("nodeSelector"), "nodeSelector")
        if selector:
            entry["nodeSelector"] = dict(selector)
        tolerations = pod_tolerations(doc, (*spath, "tolerations"), spec.get("tolerations"))
        if tolerations:
            entry["tolerations"] = tolerations
        prio = self.classes.priority(doc, spath, spec, self.notes)
        if prio:
            entry["priority"] = prio
        if self.classes.preemption_policy(doc, spath, spec) == "Never":
            entry["preemptionPolicy"] = "Never"
        res = pod_resources(amounts)
        if res:
            entry["resources"] = res
        entry.update(scheduling_rules(doc, spath, spec))
        ports = pod_host_ports(doc, spath, spec)
        if ports:
            entry["hostPorts"] = ports
        node_name = field_string(doc, (*spath, "nodeName"), spec.get("nodeName"), empty=True)
        if node_name:
            entry["nodeName"] = node_name
        if spec.get("resourceClaims"):
            self.notes.append(doc.note((*spath, "resourceClaims"), "spec.resourceClaims (DRA) are not imported"))
        return entry

    # -------------------------------------------------------------- result

    def document(self, policy: str | None) -> dict[str, Any]:
        if self.unread:
            counts = ", ".join(f"{n} {kind}" for kind, n in self.unread.items())
            self.notes.append(f"left out {sum(self.unread.values())} object(s) of kinds placer does not read: {counts}")
        gangs: dict[str, Any] = {}
        for g in self.gangs.values():
            where = f"{g.origin[0].where(g.origin[1])}: " if g.origin is not None else ""
            if g.members == 0:
                self.notes.append(f"{where}{g.label} has no pods among the inputs; left out")
                continue
            self.notes += g.unmodelled
            if g.origin is None:
                if self.missing_podgroup == "error" and g.named_by is not None:
                    named_doc, named_path, who = g.named_by
                    named_doc.fail(
                        named_path,
                        f"{who} names {g.label}, which is not among the inputs; give the file that "
                        f"holds it, or --missing-podgroup=gang-of-present-pods to make the gang of "
                        f"the {g.members} pod(s) present",
                    )
                self.notes.append(
                    f"{g.label} is not among the inputs; its {g.members} labelled pod(s) are placed "
                    "as one gang"
                )
            if g.min_member is not None and g.min_member > g.members:
                self.notes.append(
                    f"{where}{g.label} needs minMember {g.min_member} but has {g.members} pod(s); "
                    "Kubernetes keeps them pending, placer places the pods it has as one gang"
                )
            elif g.min_member is not None and g.min_member < g.members:
                self.notes.append(
                    f"{where}{g.label} needs {g.min_member} of {g.members} pods together; placer "
                    "places all of them as one gang"
                )
            spec: dict[str, Any] = {"topology": g.topology[0] if g.topology else {"mode": "unconstrained"}}
            if g.slices is not None:
                spec["slices"] = g.slices[0]
            gangs[g.name] = spec
        doc: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "PlacementRequest"}
        if policy is not None:
            doc["policy"] = policy
        doc["pods"] = self.pods
        if gangs:
            doc["gangs"] = gangs
        return doc


def _paths(paths: PathLike | Iterable[PathLike]) -> list[PathLike]:
    if isinstance(paths, (str, os.PathLike)):
        return [paths]
    return list(paths)


def import_workloads(
    paths: PathLike | Iterable[PathLike],
    levels: Iterable[LevelSpec] = (),
    policy: str | None = None,
    *,
    all_phases: bool = False,
    missing_podgroup: str = "error",
    priority_classes: PathLike | None = None,
) -> WorkloadImport:
    """A PlacementRequest from workload manifests, with its document and what was left out.

    Objects, in file order (a ``List``'s items and every YAML document count):

    * ``Pod`` (v1): one pod ``<namespace>/<name>`` (namespace ``default`` when absent),
      when it waits to be scheduled: ``status.phase`` ``Pending`` or no ``status`` (a
      manifest), no ``spec.nodeName``, no DaemonSet among its ``ownerReferences``. Other
      pods (``kubectl get pods`` lists running and finished ones) are counted in
      :attr:`WorkloadImport.skipped_pods`; ``all_phases`` takes them all.
    * ``Job`` (batch/v1): ``min(parallelism, completions)`` pods (parallelism 1 when
      absent) from ``spec.template``, as one entry ``<ns>/<name>`` with ``replicas`` (so
      pods ``<ns>/<name>-0`` ...). ``generateName`` (trailing ``-`` dropped) stands in for
      a missing name.
    * ``JobSet`` (jobset.x-k8s.io): per replicated job, ``replicas`` x the Job's pods, as
      entry ``<ns>/<jobset>-<replicatedJob>``; all pods of the JobSet form gang
      ``<ns>/<jobset>``.
    * ``Deployment``, ``StatefulSet``, ``ReplicaSet``, ``ReplicationController``, and any
      other kind whose ``spec.template.spec.containers`` is a list: ``spec.replicas`` pods
      (1 when absent). ``DaemonSet`` and ``CronJob`` are skipped with a note.
    * ``PodGroup`` (scheduling.x-k8s.io, coscheduling): gang ``<ns>/<name>``; pods and
      templates join it by label ``scheduling.x-k8s.io/pod-group`` (or the older
      ``pod-group.scheduling.sigs.k8s.io``). Volcano ``PodGroup``
      (scheduling.volcano.sh): the same, joined by annotation
      ``scheduling.k8s.io/group-name``, with ``spec.networkTopology``.
    * Volcano ``Job`` (batch.volcano.sh): per task ``replicas`` pods, entry
      ``<ns>/<job>-<task>``; all tasks form gang ``<ns>/<job>``; ``spec.networkTopology``.
    * ``PriorityClass``: resolves ``priorityClassName`` of the other objects (and
      ``globalDefault``); so do the classes of ``priority_classes``.
    * ``Node``: refused (a node list is the input of :func:`snapshot_from_kubernetes`).
    * Anything else is skipped and counted in :attr:`WorkloadImport.skipped`; a file
      holding nothing else (a Kueue configuration, an empty ``NodeList``, ...) is
      refused at its first object's ``kind``, never made an empty request.

    Gangs are all-or-nothing over all their pods: ``minMember``/``minAvailable`` is not
    a field of the request; a gang whose pod count differs from it gets a note. A pod
    template's Kueue annotations set its gang's topology (and make the workload a gang of
    its pods when it is in none): ``kueue.x-k8s.io/podset-required-topology: <label>`` ->
    mode ``required`` at the level mapped to that label, ``...-preferred-topology`` ->
    ``preferred``, ``...-unconstrained-topology: "true"`` -> ``unconstrained``,
    ``...-slice-required-topology`` + ``...-slice-size`` -> ``slices``. The label
    ``kubernetes.io/hostname``, when no level maps it, is the level ``node``. Volcano
    ``networkTopology``: ``hard`` -> required, ``soft`` -> preferred, at tier
    ``highestTierAllowed`` (tier 1 = the innermost level given, tier k = the k-th from the
    inside) or the level named ``highestTierName``. Plain pods with label
    ``kueue.x-k8s.io/pod-group-name`` form a gang of that name. A pod naming a PodGroup
    (label ``scheduling.x-k8s.io/pod-group``, annotation ``scheduling.k8s.io/group-name``)
    that no input holds is an error, unless ``missing_podgroup`` is
    ``"gang-of-present-pods"``: then the pods present form the gang (and a note says so).

    Pod fields: ``gpus`` = ``nvidia.com/gpu`` (limits, else requests), ``cpuMilli`` and
    ``memoryMiB`` = effective requests (as :func:`snapshot_from_kubernetes`, both rounded
    up), ``nodeSelector``, ``tolerations`` (key, operator (Equal when left out), value,
    effect, tolerationSeconds), ``affinity`` and ``topologySpreadConstraints`` as written
    (:func:`placer.adapters.kubernetes.templates.scheduling_rules`), ``nodeName`` (a
    template's, or a bound Pod's taken with ``all_phases``), ``labels`` = the template's
    (a Pod's) ``metadata.labels`` plus the labels its controller adds that the template
    lacks and that are the same for every pod: a Job's ``batch.kubernetes.io/job-name``
    and ``job-name`` (its name) and, when ``metadata.uid`` is given,
    ``batch.kubernetes.io/controller-uid`` and ``controller-uid`` (none with
    ``spec.manualSelector``); a JobSet's ``jobset.sigs.k8s.io/jobset-name`` and
    ``jobset.sigs.k8s.io/replicatedjob-name``. Labels that differ from pod to pod (an
    indexed Job's ``batch.kubernetes.io/job-completion-index``, a JobSet's
    ``job-index``/``job-key`` and its Jobs' names, a ReplicaSet's ``pod-template-hash``)
    are not added.
    ``priority`` (``spec.priority``, else the priority class, else the ``globalDefault``
    class; :class:`placer.adapters.kubernetes.scheduling.PriorityClasses`),
    ``preemptionPolicy: Never`` (``spec.preemptionPolicy``, else the class's),
    ``nominatedNodeName`` (a pending Pod's ``status.nominatedNodeName``: a preemption
    already made room there),
    ``nvidia.com/mig-<profile>: n`` -> ``mig: {"profile": ..., "count": n}`` (one
    profile per pod), every other resource -> ``resources`` (``ephemeral-storage`` and
    ``hugepages-<size>`` in bytes, rounded up; extended resources as counts).
    ``resourceClaims`` are not carried over (a note).

    Parameters
    ----------
    paths : path or iterable of paths
        JSON/YAML files; template files (``*.tftpl`` with ``${...}``) are refused.
    levels : iterable of (name, label) or "name=label"
        Topology levels, outermost first, as given to :func:`snapshot_from_kubernetes`.
    policy : str, optional
        The request's ``policy``.
    all_phases : bool
        Take every Pod object, whatever its phase, binding and owner.
    missing_podgroup : {"error", "gang-of-present-pods"}
        What to do with pods naming a PodGroup the inputs lack (see above).
    priority_classes : str or os.PathLike, optional
        ``kubectl get priorityclasses -o json``: PriorityClass objects only (anything else
        is refused at its ``kind``), as :func:`placer.adapters.kubernetes.snapshot.import_kubernetes`
        takes them.

    Returns
    -------
    WorkloadImport
        ``request``: the PlacementRequest, decoded once by
        :func:`placer.schema.request_from_dict` from ``document``, the placer/v1 document
        described above; ``skipped`` and ``notes``: what was left out.

    Raises
    ------
    InvalidInputError
        At the file location of the first fault: syntax errors, a document that is not a
        Kubernetes object (no ``kind``/``apiVersion``), a bad field or quantity, a Kueue
        topology label no level maps (the message names the ``--level`` to add), a Volcano
        tier beyond the levels given, two topology constraints for one gang, a pod name
        made twice, a ``Node`` (at its ``kind``), a file of nothing placer reads (at its
        first object's ``kind``), a pod's unknown ``status.phase``, a PodGroup named by a
        pod but not given (at the pod's label or annotation); ``policy`` for an unknown
        policy, ``missing_podgroup`` for an unknown choice. A fault the schema finds in the
        document is reported at the manifest it came from, its placer/v1 path in
        parentheses after the message (``... (placer/v1 pods[2].name)``).
    """
    level_list = parse_levels(levels)
    if missing_podgroup not in MISSING_PODGROUP:
        raise InvalidInputError(
            "missing_podgroup", f"expected {' or '.join(MISSING_PODGROUP)}, got {show(missing_podgroup)}"
        )
    files = _paths(paths)
    with gc_paused():
        state = _Workloads(level_list, bool(all_phases), missing_podgroup)
        for doc in read_documents(priority_classes) if priority_classes is not None else ():
            state.classes.read(doc)
        return _workloads_of_files(files, policy, state)


def _unread_list_kind(doc: Document) -> str | None:
    """The kind of a document that is a ``<Kind>List`` of a kind placer does not read."""
    kind = doc.data.get("kind") if isinstance(doc.data, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and kind[:-4] and kind[:-4] not in _READ_KINDS:
        return kind
    return None


def workloads_from_objects(
    objects: Sequence[Any],
    source: str,
    levels: Iterable[LevelSpec] = (),
    policy: str | None = None,
    *,
    missing_podgroup: str = "error",
) -> WorkloadImport:
    """:func:`import_workloads` of objects already decoded (a service's request body, a
    watch's objects) rather than files.

    Parameters
    ----------
    objects : sequence
        Kubernetes objects (mappings), as :func:`import_workloads` reads them from a file.
    source : str
        What errors name in place of a file (``"POST /filter"``); an object's place is
        ``<source>: [i].<path>``.
    levels, policy, missing_podgroup
        As :func:`import_workloads`.

    Returns
    -------
    WorkloadImport
    """
    level_list = parse_levels(levels)
    if missing_podgroup not in MISSING_PODGROUP:
        raise InvalidInputError(
            "missing_podgroup", f"expected {' or '.join(MISSING_PODGROUP)}, got {show(missing_podgroup)}"
        )
    state = _Workloads(level_list, False, missing_podgroup)
    return _workloads([[Document(source, list(objects), None, 1)]], policy, state)


def _workloads_of_files(files: list[PathLike], policy: str | None, state: _Workloads) -> WorkloadImport:
    return _workloads([read_documents(f) for f in files], policy, state)


def _workloads(docs: list[list[Document]], policy: str | None, state: _Workloads) -> WorkloadImport:
    by_file = [[(doc, path, obj) for doc in ds for path, obj in document_objects(doc)] for ds in docs]
    for objects in by_file:
        for doc, path, obj in objects:
            state.collect(doc, path, obj)
    for file_docs, objects in zip(docs, by_file):
        # A file must hold something placer reads: a node list, a Kueue configuration
        # alone, ... would make an empty request.
        read = False
        for doc, path, obj in objects:
            read = state.add(doc, path, obj) or read
        if objects and not read:
            doc, path, obj = objects[0]
            doc.fail((*path, "kind"), f"{_EXPECTED_KINDS}, got {obj['kind']}")
        if not objects:
            for doc in file_docs:
                kind = _unread_list_kind(doc)
                if kind is not None:
                    hint = _NODES_HINT if kind == "NodeList" else ""
                    doc.fail(("kind",), f"{_EXPECTED_KINDS}, got {kind}{hint}")
    document = state.document(policy)
    try:
        request = request_from_dict(document)
    except InvalidInputError as e:
        m = re.match(r"pods\[(\d+)\](?:\.(\w+))?", e.where)
        if m is not None and int(m.group(1)) < len(state.pod_src):
            doc, path = state.pod_src[int(m.group(1))]
            if m.group(2) in SCHEDULING_RULES:  # as written in the pod spec: at that field
                path = (*path, "spec", m.group(2))
            raise doc.error(path, f"{e.what} (placer/v1 {e.where})") from None
        for name, g in state.gangs.items():
            if e.where.startswith(f"gangs.{name}.slices") and g.slices is not None:
                raise InvalidInputError(g.slices[1], f"{e.what} (placer/v1 {e.where})") from None
            if (e.where == f"gangs.{name}" or e.where.startswith(f"gangs.{name}.")) and g.origin is not None:
                raise g.origin[0].error(g.origin[1], f"{e.what} (placer/v1 {e.where})") from None
        raise
    return WorkloadImport(
        request=request,
        document=document,
        skipped=dict(state.skipped),
        notes=tuple(state.notes),
        skipped_pods=dict(state.skipped_pods),
    )


def request_from_kubernetes(
    paths: PathLike | Iterable[PathLike],
    levels: Iterable[LevelSpec] = (),
    policy: str | None = None,
    *,
    all_phases: bool = False,
    missing_podgroup: str = "error",
) -> PlacementRequest:
    """The PlacementRequest of :func:`import_workloads` (without its document and what it skipped).

    Parameters
    ----------
    paths : path or iterable of paths
        JSON/YAML manifest files.
    levels : iterable of (name, label) or "name=label"
        Topology levels, outermost first.
    policy : str, optional
        The request's ``policy``.
    all_phases : bool
        Take every Pod object, not only those waiting to be scheduled.
    missing_podgroup : {"error", "gang-of-present-pods"}
        What to do with pods naming a PodGroup the inputs lack.

    Returns
    -------
    PlacementRequest
        The request, ``replicas`` expanded (pods ``<name>-0`` ...). It is decoded from
        the document ``placer import kubernetes-request`` writes, which keeps one entry
        with ``replicas`` per workload: :attr:`WorkloadImport.document`.

    Raises
    ------
    InvalidInputError
        As :func:`import_workloads`.
    """
    return import_workloads(
        paths, levels, policy, all_phases=all_phases, missing_podgroup=missing_podgroup
    ).request
