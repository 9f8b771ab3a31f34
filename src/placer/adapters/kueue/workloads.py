"""Kueue's workloads to :class:`placer.queues.Workload`: Workload objects, and Jobs,
JobSets, Pods and other pod workloads labelled ``kueue.x-k8s.io/queue-name``.

A :class:`WorkloadReader` reads them in two passes, as :mod:`placer.adapters.kueue.objects` drives
it: :meth:`~WorkloadReader.collect` first takes what others refer to (PriorityClasses,
WorkloadPriorityClasses, the owners of Workload objects), then
:meth:`~WorkloadReader.add_workload` and :meth:`~WorkloadReader.add_labelled` read each
workload, and :meth:`~WorkloadReader.finish` returns them in input order.

A pod set's per-pod requests are the pod template's effective requests
(:func:`placer.adapters.kubernetes.quantities.pod_amounts`: containers, init containers, sidecars and
overhead) in Kueue's accounting units: ``cpu`` in millicores, ``memory`` in bytes, other
resources as counts. A pod workload's pod sets are those Kueue's integrations make
(:func:`placer.adapters.kubernetes.templates.pod_template_sets`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping

from msgspec.structs import replace

from placer.adapters.kubernetes.quantities import GPU_RESOURCE, pod_amounts
from placer.adapters.kubernetes.documents import (
    Document,
    field_integer,
    field_list,
    field_map,
    field_str_map,
    field_string,
    show,
)
from placer.adapters.kubernetes.mig import take_mig_request
from placer.adapters.kubernetes.scheduling import PRIORITY_RANGE, SYSTEM_PRIORITY_CLASSES, PriorityClasses
from placer.adapters.kubernetes.templates import (
    MAX_WORKLOAD_PODS, object_name, pod_skip_reason, pod_template_sets, scheduling_rules,
)
from placer.adapters.kubernetes.unmodelled import host_port_notes, unmodelled_pod_notes
from placer.adapters.kubernetes.workloads import KUEUE_PREFERRED, KUEUE_REQUIRED, KUEUE_SLICE_SIZE, KUEUE_SLICE_TOPOLOGY
from placer.adapters.kueue.fields import (
    KUEUE_GROUP,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    creation_time,
    enum_field,
    label_key_field,
    metadata_name,
    name_field,
    timestamp,
    namespace_of,
    tolerations,
)
from placer.exceptions import InvalidInputError
from placer.limits import MAX_GPUS, MAX_QUANTITY
from placer.schema.affinity import PodRules, pod_rules_from_dict
from placer.queues.model import Admission, PodSet, Workload, pod_for_requests

__all__ = ["MAX_POD_SETS", "KUEUE_POD_GROUP_TOTAL", "WorkloadReader"]

MAX_POD_SETS = 18
"""Pod sets of one Workload (CRD ``MaxItems`` of ``spec.podSets``)."""
KUEUE_POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
"""The annotation giving how many pods a Kueue pod group has."""
_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
_PRIORITY_SOURCES = ("kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", "")
_CLASS_REF = {"kueue.x-k8s.io": "WorkloadPriorityClass", "scheduling.k8s.io": "PriorityClass"}
_ONE_POD_PER_WORKLOAD = {("apps", "Deployment"), ("apps", "ReplicaSet"), ("", "ReplicationController")}
_INT32_MAX = 2**31 - 1

Path = tuple[Any, ...]


class _PodGroup:
    """Plain pods sharing a ``kueue.x-k8s.io/pod-group-name``: one Kueue workload."""

    __slots__ = ("key", "queue", "priority", "created", "pod_sets", "total", "origin")

    def __init__(self, key: str, queue: str, priority: int, created: float, origin: tuple[Document, Path]) -> None:
        self.key = key
        self.queue = queue
        self.priority = priority
        self.created = created
        self.pod_sets: list[PodSet] = []
        self.total: int | None = None
        self.origin = origin


class WorkloadReader:
    """The workloads of a set of Kueue and Kubernetes objects (see the module doc).

    Parameters
    ----------
    notes : list of str
        Gets one line per thing read but not carried over, starting with its location.
    """

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.priority_classes = PriorityClasses()
        self.workload_classes: dict[str, int] = {}
        self._class_where: dict[str, str] = {}
        self._owned: dict[tuple[str, str, str], str] = {}
        self._workloads: list[Workload | _PodGroup] = []
        self._where: dict[str, tuple[Document, Path]] = {}
        self._groups: dict[str, _PodGroup] = {}

    # ------------------------------------------------------------------ first pass

    def collect(self, doc: Document, path: Path, obj: Mapping[str, Any], group: str, version: str, kind: str) -> None:
        """Take a PriorityClass, a WorkloadPriorityClass, or the owners of a Workload object."""
        if PriorityClasses.is_priority_class(obj):
            self.priority_classes.add(doc, path, obj)
        elif group == KUEUE_GROUP and kind == "WorkloadPriorityClass":
            name = metadata_name(doc, path, obj, "WorkloadPriorityClass")
            if name in self._class_where:
                doc.fail((*path, "metadata", "name"), f"WorkloadPriorityClass {name} is given twice (first at "
                                                      f"{self._class_where[name]})")
            value = field_integer(doc, (*path, "value"), obj.get("value"), *PRIORITY_RANGE)
            if value is None:
                doc.fail((*path, "value"), "expected an integer, got nothing")
            self.workload_classes[name] = value
            self._class_where[name] = doc.where(path)
        elif group == KUEUE_GROUP and kind == "Workload":
            namespace = namespace_of(doc, path, obj)
            opath = (*path, "metadata", "ownerReferences")
            for j, owner in enumerate(field_list(doc, opath, obj["metadata"].get("ownerReferences"))):
                owner = field_map(doc, (*opath, j), owner)
                if isinstance(owner.get("kind"), str) and isinstance(owner.get("name"), str):
                    self._owned[namespace, owner["kind"], owner["name"]] = doc.where(path)

    # ------------------------------------------------------------------ Workload objects

    def add_workload(self, doc: Document, path: Path, obj: Mapping[str, Any], version: str) -> None:
        """Read one Kueue Workload object (skipped with a note when finished, deactivated,
        being evicted, or in no queue).

        Raises
        ------
        InvalidInputError
            At the field: see :func:`placer.adapters.kueue.objects.read_kueue`.
        """
        name = metadata_name(doc, path, obj, "Workload")
        namespace = namespace_of(doc, path, obj)
        key = f"{namespace}/{name}"
        spath = (*path, "spec")
        spec = field_map(doc, spath, obj.get("spec"), required=True)
        status = field_map(doc, (*path, "status"), obj.get("status"))
        conditions = _true_conditions(doc, (*path, "status", "conditions"), status.get("conditions"))
        queue = None
        if spec.get("queueName") not in (None, ""):
            queue = name_field(doc, (*spath, "queueName"), spec["queueName"], "a LocalQueue name")
        priority = self._workload_priority(doc, spath, spec, version)
        pod_sets = self._workload_pod_sets(doc, spath, spec, key, priority)
        admission = None
        if status.get("admission") is not None:
            admission, pod_sets = self._admission(doc, (*path, "status", "admission"), status["admission"], pod_sets)
            reserved = conditions.get("QuotaReserved")
            if reserved is not None and reserved[1].get("lastTransitionTime") is not None:
                # Kueue's preemption takes the most recently admitted first, by this time.
                at = timestamp(doc, (*path, "status", "conditions", reserved[0], "lastTransitionTime"),
                               reserved[1]["lastTransitionTime"])
                admission = replace(admission, reserved_at=at)
        elif "QuotaReserved" in conditions:
            doc.fail((*path, "status", "admission"), "must be set while the QuotaReserved condition is true")
        active = spec.get("active", True)
        if not isinstance(active, bool):
            doc.fail((*spath, "active"), f"expected true or false, got {show(active)}")
        skip = None
        if "Finished" in conditions:
            skip = "finished"
        elif not active:
            skip = "deactivated (spec.active false): Kueue does not admit it"
        elif "Evicted" in conditions and admission is not None:
            skip = "being evicted: placer takes eviction as done, so its quota is free and it waits to be requeued"
        elif admission is None and queue is None:
            skip = "in no queue (no spec.queueName)"
        if skip is not None:
            self.notes.append(doc.note(path, f"Workload {key} left out: {skip}"))
            return
        if "Evicted" in conditions:
            self.notes.append(doc.note(path, f"Workload {key} was evicted and is pending again"))
        self._add(doc, path, key, Workload(
            name=name, namespace=namespace, pod_sets=pod_sets, queue=queue, priority=priority,
            created=creation_time(doc, path, obj), admission=admission,
            cluster_queue=admission.cluster_queue if admission is not None else None,
        ))

    def _workload_pod_sets(self, doc: Document, spath: Path, spec: Mapping[str, Any], key: str,
                           priority: int) -> tuple[PodSet, ...]:
        ppath = (*spath, "podSets")
        items = field_list(doc, ppath, spec.get("podSets"))
        if not 1 <= len(items) <= MAX_POD_SETS:
            doc.fail(ppath, f"expected 1 to {MAX_POD_SETS} pod sets, got {len(items)}")
        out: list[PodSet] = []
        seen: dict[str, int] = {}
        for i, ps in enumerate(items):
            psp = (*ppath, i)
            ps = field_map(doc, psp, ps, required=True)
            name = "main" if ps.get("name") is None else name_field(doc, (*psp, "name"), ps["name"], "a pod set name",
                                                                   label=True)
            if name in seen:
                doc.fail((*psp, "name"), f"pod set {name} is given twice (first as podSets[{seen[name]}])")
            seen[name] = i
            count = field_integer(doc, (*psp, "count"), ps.get("count"), 0, _INT32_MAX)
            count = 1 if count is None else count
            if count > MAX_WORKLOAD_PODS:
                doc.fail((*psp, "count"), f"{count} pods; placer takes at most {MAX_WORKLOAD_PODS} per pod set")
            if ps.get("minCount") is not None:
                self.notes.append(doc.note((*psp, "minCount"), "partial admission is not modelled: all "
                                                               f"{count} pods are admitted together"))
            request = field_map(doc, (*psp, "topologyRequest"), ps.get("topologyRequest"))
            out.append(self.pod_set(doc, (*psp, "template"), ps.get("template"), name, count, key, priority,
                                    ((*psp, "topologyRequest"), request)))
        return tuple(out)

    def _admission(self, doc: Document, apath: Path, v: Any,
                   pod_sets: tuple[PodSet, ...]) -> tuple[Admission, tuple[PodSet, ...]]:
        """``status.admission``; a pod set admitted with fewer pods (partial admission) is
        taken at the admitted count."""
        adm = field_map(doc, apath, v)
        cq = name_field(doc, (*apath, "clusterQueue"), adm.get("clusterQueue"), "a ClusterQueue name")
        aspath = (*apath, "podSetAssignments")
        assignments = field_list(doc, aspath, adm.get("podSetAssignments"))
        if len(assignments) > MAX_POD_SETS:
            doc.fail(aspath, f"at most {MAX_POD_SETS} pod set assignments, got {len(assignments)}")
        by_name = {ps.name: i for i, ps in enumerate(pod_sets)}
        sets = list(pod_sets)
        flavors: dict[str, dict[str, str]] = {}
        for j, a in enumerate(assignments):
            ap = (*aspath, j)
            a = field_map(doc, ap, a, required=True)
            ps_name = "main" if a.get("name") is None else field_string(doc, (*ap, "name"), a["name"])
            assert ps_name is not None
            if ps_name not in by_name:
                doc.fail((*ap, "name"), f"no pod set {ps_name!r} in spec.podSets ({', '.join(by_name)})")
            if ps_name in flavors:
                doc.fail((*ap, "name"), f"pod set {ps_name} is assigned twice")
            fpath = (*ap, "flavors")
            given = field_map(doc, fpath, a.get("flavors"))
            chosen: dict[str, str] = {}
            for resource, flavor in given.items():
                label_key_field(doc, fpath, resource, "a resource name")
                chosen[resource] = name_field(doc, (*fpath, resource), flavor, "a ResourceFlavor name")
            flavors[ps_name] = chosen
            count = field_integer(doc, (*ap, "count"), a.get("count"), 0, _INT32_MAX)
            ps = sets[by_name[ps_name]]
            if count is not None and count != ps.count:
                if count > ps.count:
                    doc.fail((*ap, "count"), f"admits {count} pods of pod set {ps_name}, which has {ps.count}")
                self.notes.append(doc.note((*ap, "count"), f"pod set {ps_name} admitted with {count} of its "
                                                           f"{ps.count} pods; taken as {count} pods"))
                sets[by_name[ps_name]] = replace(ps, count=count)
        missing = [name for name in by_name if name not in flavors]
        if missing:
            self.notes.append(doc.note(aspath, f"no assignment for pod set(s) {', '.join(missing)}"))
        return Admission(cluster_queue=cq, flavors=flavors), tuple(sets)

    def _workload_priority(self, doc: Document, spath: Path, spec: Mapping[str, Any], version: str) -> int:
        """``spec.priority``, else the value of the class the Workload names (v1beta1
        ``priorityClassName`` + ``priorityClassSource``, v1beta2 ``priorityClassRef``)."""
        given = field_integer(doc, (*spath, "priority"), spec.get("priority"), *PRIORITY_RANGE)
        if version == "v1beta1":
            if spec.get("priorityClassRef") is not None:
                doc.fail((*spath, "priorityClassRef"), "priorityClassRef is the field of v1beta2; in v1beta1 it is "
                                                       "priorityClassName (with priorityClassSource)")
            if spec.get("priorityClassName") in (None, ""):
                return 0 if given is None else given
            cpath = (*spath, "priorityClassName")
            name = name_field(doc, cpath, spec["priorityClassName"], "a priority class name")
            source = enum_field(doc, (*spath, "priorityClassSource"), spec.get("priorityClassSource"),
                                _PRIORITY_SOURCES, "")
            kinds = {"kueue.x-k8s.io/workloadpriorityclass": ("WorkloadPriorityClass",),
                     "scheduling.k8s.io/priorityclass": ("PriorityClass",)}.get(source,
                                                                                 ("WorkloadPriorityClass", "PriorityClass"))
        else:
            if spec.get("priorityClassName") is not None:
                doc.fail((*spath, "priorityClassName"), "priorityClassName is the field of v1beta1; in v1beta2 it is "
                                                        "priorityClassRef {group, kind, name}")
            if spec.get("priorityClassRef") is None:
                return 0 if given is None else given
            rpath = (*spath, "priorityClassRef")
            ref = field_map(doc, rpath, spec["priorityClassRef"])
            group = enum_field(doc, (*rpath, "group"), ref.get("group"), tuple(_CLASS_REF), "")
            kind = enum_field(doc, (*rpath, "kind"), ref.get("kind"), tuple(_CLASS_REF.values()), "")
            if group and kind and _CLASS_REF[group] != kind:
                doc.fail((*rpath, "kind"), f"only the {_CLASS_REF[group]} kind is allowed for the {group} group")
            cpath = (*rpath, "name")
            name = name_field(doc, cpath, ref.get("name"), "a priority class name")
            kinds = (kind or _CLASS_REF.get(group, "WorkloadPriorityClass"),)
        if given is not None:
            return given
        return self._class_value(doc, cpath, name, kinds)

    def _class_value(self, doc: Document, path: Path, name: str, kinds: tuple[str, ...]) -> int:
        for kind in kinds:
            if kind == "WorkloadPriorityClass" and name in self.workload_classes:
                return self.workload_classes[name]
            if kind == "PriorityClass":
                value = self.priority_classes.values.get(name, SYSTEM_PRIORITY_CLASSES.get(name))
                if value is not None:
                    return value
        self.notes.append(doc.note(path, f"{' or '.join(kinds)} {name} is not among the inputs; priority left at 0"))
        return 0

    # ------------------------------------------------------------------ labelled pod workloads

    def add_labelled(self, doc: Document, path: Path, obj: Mapping[str, Any], group: str, kind: str) -> bool:
        """Read a Job, JobSet, Pod or other pod workload as Kueue's integration makes its
        Workload: ``kueue.x-k8s.io/queue-name`` gives the LocalQueue, the pod sets are
        :func:`pod_template_sets`; one Workload per pod of a Deployment, ReplicaSet or
        ReplicationController (Kueue's pod integration), one per pod group of plain pods
        labelled ``kueue.x-k8s.io/pod-group-name``. Left out with a note: objects without
        the label, whose Workload object is among the inputs, that already run (a Pod
        past Pending, a Job or JobSet with ``spec.suspend: false`` and a status).

        Returns
        -------
        bool
            False when ``obj`` runs no pods of its own (not a workload kind).
        """
        sets = pod_template_sets(doc, path, obj)
        if sets is None:
            return False
        namespace, name = object_name(doc, path, obj)
        key = f"{namespace}/{name}"
        mpath = (*path, "metadata")
        meta = obj["metadata"]
        labels = field_str_map(doc, (*mpath, "labels"), meta.get("labels"), "labels")
        annotations = field_str_map(doc, (*mpath, "annotations"), meta.get("annotations"), "annotations")
        owner = self._owned.get((namespace, kind, name))
        if owner is not None:
            self.notes.append(doc.note(path, f"{kind} {key} left out: its Workload is given (at {owner})"))
            return True
        qfield, queue = next(((f, m[QUEUE_NAME_LABEL]) for f, m in (("labels", labels), ("annotations", annotations))
                              if m.get(QUEUE_NAME_LABEL)), ("labels", None))
        if queue is None:
            self.notes.append(doc.note(path, f"{kind} {key} left out: no {QUEUE_NAME_LABEL} label, Kueue does not "
                                             "manage it"))
            return True
        name_field(doc, (*mpath, qfield, QUEUE_NAME_LABEL), queue, "a LocalQueue name")
        running = self._already_running(doc, path, obj, group, kind)
        if running is not None:
            self.notes.append(doc.note(path, f"{kind} {key} left out: {running}"))
            return True
        if len(sets) > MAX_POD_SETS:
            doc.fail((*path, "spec"), f"{len(sets)} pod sets; a Kueue Workload has at most {MAX_POD_SETS}")
        priority = self._labelled_priority(doc, path, labels, sets)
        created = creation_time(doc, path, obj)
        pod_sets = [self.pod_set(doc, ps.path, ps.template, ps.name, ps.count, key, priority) for ps in sets]
        pod_group = labels.get(_POD_GROUP_LABEL) if kind == "Pod" else None
        if pod_group:
            self._join_pod_group(doc, path, namespace, pod_group, queue, priority, created, pod_sets[0], annotations)
        elif (group, kind) in _ONE_POD_PER_WORKLOAD:
            (ps,) = pod_sets
            for i in range(ps.count):
                pod_key = f"{key}-{i}"
                self._add(doc, path, pod_key, Workload(
                    name=f"{name}-{i}", namespace=namespace, queue=queue, priority=priority, created=created,
                    pod_sets=(replace(ps, count=1, pod=replace(ps.pod, name=f"{pod_key}-main") if ps.pod else None),),
                ))
        else:
            self._add(doc, path, key, Workload(name=name, namespace=namespace, queue=queue, priority=priority,
                                               created=created, pod_sets=tuple(pod_sets)))
        return True

    @staticmethod
    def _already_running(doc: Document, path: Path, obj: Mapping[str, Any], group: str, kind: str) -> str | None:
        if group == "" and kind == "Pod":
            reason = pod_skip_reason(doc, path, obj)
            return None if reason is None else f"the pod is not waiting ({reason})"
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("suspend") is False and obj.get("status"):
            return ("running (spec.suspend false): Kueue has admitted it; give its Workload "
                    "(kubectl get workloads -o yaml) to count its quota")
        return None

    def _labelled_priority(self, doc: Document, path: Path, labels: Mapping[str, str], sets: list[Any]) -> int:
        """Kueue's priority of a pod workload: the WorkloadPriorityClass of label
        ``kueue.x-k8s.io/priority-class``, else the PriorityClass of the first pod
        template naming one, else the globalDefault PriorityClass, else 0."""
        wpc = labels.get(PRIORITY_CLASS_LABEL)
        if wpc:
            return self._class_value(doc, (*path, "metadata", "labels", PRIORITY_CLASS_LABEL), wpc,
                                     ("WorkloadPriorityClass",))
        for ps in sets:
            spec = ps.template.get("spec")
            if isinstance(spec, dict) and spec.get("priorityClassName"):
                cpath = (*ps.path, "spec", "priorityClassName")
                pc = field_string(doc, cpath, spec["priorityClassName"])
                assert pc is not None
                return self._class_value(doc, cpath, pc, ("PriorityClass",))
        default = self.priority_classes.default
        return self.priority_classes.values[default] if default is not None else 0

    def _join_pod_group(self, doc: Document, path: Path, namespace: str, group_name: str, queue: str, priority: int,
                        created: float, pod_set: PodSet, annotations: Mapping[str, str]) -> None:
        key = f"{namespace}/{group_name}"
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = _PodGroup(key, queue, priority, created, (doc, path))
            self._add(doc, path, key, g)
        elif g.queue != queue:
            doc.fail((*path, "metadata", "labels", QUEUE_NAME_LABEL),
                     f"pod group {key} is in queue {g.queue} (at {g.origin[0].where(g.origin[1])}), this pod in {queue}")
        g.created = min(g.created, created)
        total = annotations.get(KUEUE_POD_GROUP_TOTAL)
        if total is not None:
            if not (total.isascii() and total.isdigit() and 0 < int(total) <= MAX_WORKLOAD_PODS):
                doc.fail((*path, "metadata", "annotations", KUEUE_POD_GROUP_TOTAL),
                         f"expected a pod count >= 1, got {show(total)}")
            g.total = int(total)
        for i, ps in enumerate(g.pod_sets):
            if _same_role(ps, pod_set):
                g.pod_sets[i] = replace(ps, count=ps.count + 1)
                return
        g.pod_sets.append(pod_set)

    # ------------------------------------------------------------------ pod sets

    def pod_set(self, doc: Document, tpath: Path, template: Any, name: str, count: int, key: str, priority: int,
                topology_request: tuple[Path, Mapping[str, Any]] | None = None) -> PodSet:
        """One pod set from its pod template: per-pod requests in accounting units, the pod
        placer places (nodeSelector, tolerations, affinity, topologySpreadConstraints, the
        workload's priority), the required or preferred topology level (``topologyRequest``
        or the template's Kueue annotations).

        Raises
        ------
        InvalidInputError
            At the field: a bad template or quantity, the reserved resource ``pods``, more
            GPUs in one pod than a node holds, two MIG profiles in one pod, two topology
            requests that disagree.
        """
        template = field_map(doc, tpath, template, required=True)
        mpath = (*tpath, "metadata")
        meta = field_map(doc, mpath, template.get("metadata"))
        annotations = field_str_map(doc, (*mpath, "annotations"), meta.get("annotations"), "annotations")
        spath = (*tpath, "spec")
        spec = field_map(doc, spath, template.get("spec"), required=True)
        self._check_resource_names(doc, spath, spec)
        amounts = pod_amounts(doc, spath, spec, pod_level=False)  # noted below when given
        take_mig_request(doc, spath, dict(amounts))
        if amounts.get(GPU_RESOURCE, 0) > MAX_GPUS:
            doc.fail(spath, f"{amounts[GPU_RESOURCE]} {GPU_RESOURCE} in one pod, over placer's limit of {MAX_GPUS}")
        requests = {r: _units(r, q) for r, q in amounts.items() if q > 0 and ("/" in r or r in ("cpu", "memory"))}
        for r, units in requests.items():
            if units > MAX_QUANTITY:
                doc.fail(spath, f"{r}: {units} units in one pod, over placer's limit of {MAX_QUANTITY}")
        selector = field_str_map(doc, (*spath, "nodeSelector"), spec.get("nodeSelector"), "nodeSelector")
        tols = tolerations(doc, (*spath, "tolerations"), spec.get("tolerations"))
        rules = self._rules(doc, spath, spec)
        self.notes += host_port_notes(doc, spath, spec)
        self.notes += unmodelled_pod_notes(doc, spath, spec, admitted=template.get("status") is not None)
        required, preferred = self._topology(doc, (*mpath, "annotations"), annotations, topology_request)
        pod = pod_for_requests(f"{key}-{name}", requests, node_selector=selector, tolerations=tols, priority=priority,
                               affinity=rules.affinity, topology_spread_constraints=rules.topology_spread_constraints)
        return PodSet(name=name, count=count, requests=requests, pod=pod, required_level=required,
                      preferred_level=preferred)

    @staticmethod
    def _rules(doc: Document, spath: Path, spec: Mapping[str, Any]) -> PodRules:
        """The template's ``affinity`` and ``topologySpreadConstraints``, checked as a
        placer/v1 pod's: the required node affinity matches flavors, all of them place the
        admitted pods."""
        try:
            return pod_rules_from_dict(scheduling_rules(doc, spath, spec))
        except InvalidInputError as e:
            doc.fail(spath, f"{e.where}: {e.what}")

    def _check_resource_names(self, doc: Document, spath: Path, spec: Mapping[str, Any]) -> None:
        """Refuse the resource ``pods`` (Kueue reserves it); note resources placer does not
        read (names without ``/`` other than cpu and memory, e.g. ephemeral-storage)."""
        for key in ("containers", "initContainers"):
            for j, c in enumerate(field_list(doc, (*spath, key), spec.get(key))):
                resources = c.get("resources") if isinstance(c, dict) else None
                if not isinstance(resources, dict):
                    continue
                for side in ("requests", "limits"):
                    given = resources.get(side)
                    for r in given if isinstance(given, dict) else ():
                        rpath = (*spath, key, j, "resources", side, r)
                        if r == "pods":
                            doc.fail(rpath, "the resource pods is reserved for Kueue's own use")
                        if isinstance(r, str) and "/" not in r and r not in ("cpu", "memory"):
                            self.notes.append(doc.note(rpath, f"resource {r} is not read (placer reads cpu, memory "
                                                              "and extended resources)"))

    def _topology(self, doc: Document, apath: Path, annotations: Mapping[str, str],
                  request: tuple[Path, Mapping[str, Any]] | None) -> tuple[str | None, str | None]:
        """The required and preferred level of a pod set: a Workload's ``topologyRequest``
        and the template's annotations, which must agree; one of the two at most."""
        levels: dict[str, tuple[Path, str]] = {}
        for mode, annotation in (("required", KUEUE_REQUIRED), ("preferred", KUEUE_PREFERRED)):
            if annotation in annotations:
                ap = (*apath, annotation)
                levels[mode] = (ap, label_key_field(doc, ap, annotations[annotation], "a topology level (a node label)"))
            if request is not None and request[1].get(mode) is not None:
                rp = (*request[0], mode)
                level = label_key_field(doc, rp, request[1][mode], "a topology level (a node label)")
                if mode in levels and levels[mode][1] != level:
                    doc.fail(rp, f"{mode} level {level} disagrees with the annotation's {levels[mode][1]}")
                levels[mode] = (rp, level)
        if len(levels) > 1:
            doc.fail(levels["preferred"][0], "a pod set has a required or a preferred topology level, not both")
        if KUEUE_SLICE_TOPOLOGY in annotations or KUEUE_SLICE_SIZE in annotations:
            self.notes.append(doc.note(apath, "slice topology is not modelled: the pod set is placed whole"))
        elif request is not None and request[1].get("podSetSliceRequiredTopology") is not None:
            self.notes.append(doc.note(request[0], "slice topology is not modelled: the pod set is placed whole"))
        required = levels["required"][1] if "required" in levels else None
        preferred = levels["preferred"][1] if "preferred" in levels else None
        return required, preferred

    # ------------------------------------------------------------------ result

    def _add(self, doc: Document, path: Path, key: str, workload: Workload | _PodGroup) -> None:
        first = self._where.get(key)
        if first is not None:
            doc.fail(path, f"workload {key} is given twice (first at {first[0].where(first[1])})")
        self._where[key] = (doc, path)
        self._workloads.append(workload)

    def where(self, key: str) -> tuple[Document, Path]:
        """The document and path a workload was read from."""
        return self._where[key]

    def finish(self) -> list[Workload]:
        """The workloads read, in input order (a pod group where its first pod was)."""
        out: list[Workload] = []
        for w in self._workloads:
            if isinstance(w, _PodGroup):
                w = self._pod_group_workload(w)
            out.append(w)
        return out

    def _pod_group_workload(self, g: _PodGroup) -> Workload:
        present = sum(ps.count for ps in g.pod_sets)
        doc, path = g.origin
        if g.total is not None and g.total != present:
            self.notes.append(doc.note(path, f"pod group {g.key} has {present} of its {g.total} pods among the inputs; "
                                             f"Kueue waits for all of them, placer takes the {present} present"))
        sets = g.pod_sets
        if len(sets) > MAX_POD_SETS:
            doc.fail(path, f"pod group {g.key} has {len(sets)} different pod shapes; a Kueue Workload has at most "
                           f"{MAX_POD_SETS} pod sets")
        names = ["main"] if len(sets) == 1 else [f"role-{i}" for i in range(len(sets))]
        sets = [replace(ps, name=n, pod=replace(ps.pod, name=f"{g.key}-{n}") if ps.pod else None)
                for n, ps in zip(names, sets)]
        namespace, _, name = g.key.partition("/")
        return Workload(name=name, namespace=namespace, queue=g.queue, priority=g.priority, created=g.created,
                        pod_sets=tuple(sets))


def _same_role(a: PodSet, b: PodSet) -> bool:
    """Whether two pods of a pod group are alike: same requests, selector, tolerations, level."""
    return (a.requests == b.requests and a.required_level == b.required_level
            and a.preferred_level == b.preferred_level
            and (a.pod is None) == (b.pod is None)
            and (a.pod is None or b.pod is None or replace(a.pod, name="") == replace(b.pod, name="")))


def _units(resource: str, q: Fraction) -> int:
    """A per-pod amount in Kueue's accounting units (cpu millicores, else whole units, up)."""
    return math.ceil(q * 1000) if resource == "cpu" else math.ceil(q)


def _true_conditions(doc: Document, path: Path, v: Any) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """The conditions whose status is ``True``, by type: their index and fields."""
    out = {}
    for j, c in enumerate(field_list(doc, path, v)):
        c = field_map(doc, (*path, j), c)
        kind = field_string(doc, (*path, j, "type"), c.get("type"), required=True)
        if c.get("status") == "True":
            out[str(kind)] = (j, c)
    return out
