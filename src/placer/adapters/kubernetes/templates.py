"""The pod templates of Kubernetes workload objects, as the request and Kueue importers
read them.

:func:`pod_template_sets` gives a workload's pod sets as Kueue makes them (a Job's
parallelism, a JobSet's replicated jobs, a Deployment's replicas, ...); :func:`object_name`,
:func:`replica_count`, :func:`job_pod_count`, :func:`pod_tolerations`,
:func:`scheduling_rules` and :func:`pod_skip_reason` read the parts of an object the
importers need. Used by
:mod:`placer.adapters.kubernetes.workloads` and :mod:`placer.adapters.kueue.objects`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from placer.adapters.kubernetes.documents import (
    Document,
    field_integer,
    field_list,
    field_map,
    field_string,
    show,
)
from placer.model import TAINT_EFFECTS
from placer.model.ports import PROTOCOLS

__all__ = [
    "MAX_WORKLOAD_PODS", "POD_PHASES", "REPLICATED_KINDS", "has_pod_template", "object_name", "replica_count",
    "job_pod_count", "pod_tolerations", "SCHEDULING_RULES", "scheduling_rules", "pod_host_ports", "pod_skip_reason",
    "PodTemplateSet",
    "pod_template_sets",
]

MAX_WORKLOAD_PODS = 100_000
"""Most pods one workload object may expand to."""
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
"""The values of a Pod's ``status.phase``."""
REPLICATED_KINDS = (
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("", "ReplicationController"),
)
"""(API group, kind) of the workloads that run ``spec.replicas`` copies of their pod template."""
SCHEDULING_RULES = ("affinity", "topologySpreadConstraints")
"""The pod spec fields placer takes as Kubernetes writes them (:func:`scheduling_rules`)."""


def has_pod_template(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` has a pod template (``spec.template.spec.containers``)."""
    spec = obj.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    return isinstance(pod_spec, dict) and isinstance(pod_spec.get("containers"), list)


def object_name(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object; ``generateName`` (trailing ``-`` dropped) stands in
    for a missing name, ``default`` for a missing namespace.

    Raises
    ------
    InvalidInputError
        At ``metadata`` (or its field) when it is missing, or gives neither name nor
        generateName.
    """
    mpath = (*path, "metadata")
    meta = field_map(doc, mpath, obj.get("metadata"), required=True)
    name = field_string(doc, (*mpath, "name"), meta.get("name"))
    if name is None:
        gen = field_string(doc, (*mpath, "generateName"), meta.get("generateName"))
        if gen is None or not gen.rstrip("-"):
            doc.fail((*mpath, "name"), "expected metadata.name or metadata.generateName")
        name = gen.rstrip("-")
    namespace = field_string(doc, (*mpath, "namespace"), meta.get("namespace")) or "default"
    return namespace, name


def replica_count(doc: Document, path: tuple[Any, ...], v: Any, default: int = 1) -> int:
    """A pod count (``replicas``, ``parallelism``): ``default`` when missing.

    Raises
    ------
    InvalidInputError
        At ``path`` for a value that is no integer >= 0, or over :data:`MAX_WORKLOAD_PODS`.
    """
    n = field_integer(doc, path, v, 0)
    if n is None:
        return default
    if n > MAX_WORKLOAD_PODS:
        doc.fail(path, f"{n} pods; placer imports at most {MAX_WORKLOAD_PODS} per workload")
    return n


def job_pod_count(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> int:
    """The pods a Job runs at once: ``min(parallelism, completions)``, parallelism 1 when
    absent (as the Job controller, and Kueue, count them)."""
    n = replica_count(doc, (*spath, "parallelism"), spec.get("parallelism"))
    completions = field_integer(doc, (*spath, "completions"), spec.get("completions"), 0)
    return n if completions is None else min(n, completions)


def pod_tolerations(doc: Document, path: tuple[Any, ...], v: Any) -> list[dict[str, Any]]:
    """A pod spec's ``tolerations`` as placer/v1 entries (key, operator, value, effect,
    tolerationSeconds; an operator left out is Equal).

    Raises
    ------
    InvalidInputError
        At the toleration's field, for what Kubernetes' validation refuses: an operator
        other than Equal or Exists, an unknown effect, a value with Exists, an empty key
        with Equal, ``tolerationSeconds`` that is no integer or comes without effect
        NoExecute.
    """
    out = []
    for j, t in enumerate(field_list(doc, path, v)):
        tp = (*path, j)
        t = field_map(doc, tp, t)
        key = field_string(doc, (*tp, "key"), t.get("key"), empty=True) or ""
        op = t.get("operator")
        op = "Equal" if op is None or op == "" else op
        if op not in ("Equal", "Exists"):
            doc.fail((*tp, "operator"), f"expected Equal or Exists, got {show(op)}")
        value = field_string(doc, (*tp, "value"), t.get("value"), empty=True) or ""
        effect = t.get("effect") or ""
        if effect and effect not in TAINT_EFFECTS:
            doc.fail(
                (*tp, "effect"),
                f"expected one of {', '.join(TAINT_EFFECTS)} or nothing, got {show(effect)}",
            )
        if op == "Exists" and value:
            doc.fail((*tp, "value"), f"operator Exists takes no value, got {value!r}")
        if op == "Equal" and not key:
            doc.fail((*tp, "key"), "an empty key (every taint) needs operator Exists")
        seconds = field_integer(doc, (*tp, "tolerationSeconds"), t.get("tolerationSeconds"), -(2**63), 2**63 - 1)
        if seconds is not None and effect != "NoExecute":
            doc.fail((*tp, "tolerationSeconds"), "tolerationSeconds needs effect NoExecute")
        tol: dict[str, Any] = {}
        if key:
            tol["key"] = key
        tol["operator"] = op
        if value:
            tol["value"] = value
        if effect:
            tol["effect"] = effect
        if seconds is not None:
            tol["tolerationSeconds"] = seconds
        out.append(tol)
    return out


def scheduling_rules(
    doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], keys: tuple[str, ...] = SCHEDULING_RULES
) -> dict[str, Any]:
    """A pod spec's ``affinity`` and ``topologySpreadConstraints`` (of ``keys``) as written:
    the placer/v1 pod fields of the same names and shape, checked when the document is
    decoded (:mod:`placer.schema`). Empty ones are left out.

    Raises
    ------
    InvalidInputError
        At the field: an ``affinity`` that is no mapping, spread constraints that are no list.
    """
    out: dict[str, Any] = {}
    for key in keys:
        read = field_list if key == "topologySpreadConstraints" else field_map
        value = read(doc, (*spath, key), spec.get(key))
        if value:
            out[key] = value
    return out


def pod_host_ports(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A pod spec's host ports as placer/v1 ``hostPorts``: kube's ``GetHostPorts`` (the
    ports with a ``hostPort`` of the sidecars, init containers of ``restartPolicy: Always``,
    then of the containers), after the API server's defaulting (``protocol`` TCP; on a
    ``hostNetwork`` pod a port without ``hostPort`` takes its ``containerPort``).

    Raises
    ------
    InvalidInputError
        At the port: a ``hostPort`` or ``containerPort`` that is no integer in 0..65535, a
        protocol kube does not support, a ``hostIP`` that is no string.
    """
    host_network = spec.get("hostNetwork") is True
    out: list[dict[str, Any]] = []
    for key in ("initContainers", "containers"):
        for j, c in enumerate(field_list(doc, (*spath, key), spec.get(key))):
            c = field_map(doc, (*spath, key, j), c)
            if key == "initContainers" and c.get("restartPolicy") != "Always":
                continue  # kube: only a sidecar runs the pod's whole life
            ppath = (*spath, key, j, "ports")
            for k, port in enumerate(field_list(doc, ppath, c.get("ports"))):
                port = field_map(doc, (*ppath, k), port)
                number = field_integer(doc, (*ppath, k, "hostPort"), port.get("hostPort"), 0, 65535)
                if not number and host_network:
                    number = field_integer(doc, (*ppath, k, "containerPort"), port.get("containerPort"), 0, 65535)
                if not number:
                    continue
                protocol = field_string(doc, (*ppath, k, "protocol"), port.get("protocol")) or "TCP"
                if protocol not in PROTOCOLS:
                    doc.fail((*ppath, k, "protocol"), f"expected one of {', '.join(PROTOCOLS)}, got {show(protocol)}")
                entry: dict[str, Any] = {"hostPort": number}
                if protocol != "TCP":
                    entry["protocol"] = protocol
                ip = field_string(doc, (*ppath, k, "hostIP"), port.get("hostIP"), empty=True)
                if ip:
                    entry["hostIP"] = ip
                out.append(entry)
    return out


def pod_skip_reason(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any]) -> str | None:
    """Why a Pod object is no pod to place (its phase, bound, a DaemonSet's), or None.

    A Pod without ``status`` (a manifest) is to be placed unless ``spec.nodeName`` binds it.

    Raises
    ------
    InvalidInputError
        At ``status.phase`` for an unknown phase.
    """
    status = field_map(doc, (*path, "status"), obj.get("status"))
    phase = status.get("phase")
    if phase is not None and phase not in POD_PHASES:
        doc.fail(
            (*path, "status", "phase"),
            f"expected {', '.join(POD_PHASES[:-1])} or {POD_PHASES[-1]}, got {show(phase)}",
        )
    if phase is not None and phase != "Pending":
        return str(phase)
    spec = field_map(doc, (*path, "spec"), obj.get("spec"))
    if field_string(doc, (*path, "spec", "nodeName"), spec.get("nodeName"), empty=True):
        return "bound to a node"
    meta = obj["metadata"]
    opath = (*path, "metadata", "ownerReferences")
    for j, owner in enumerate(field_list(doc, opath, meta.get("ownerReferences"))):
        if field_map(doc, (*opath, j), owner).get("kind") == "DaemonSet":
            return "owned by a DaemonSet"
    return None


@dataclass(frozen=True)
class PodTemplateSet:
    """A set of identical pods of a workload object, as Kueue makes a pod set of it.

    Attributes
    ----------
    name : str
        Kueue's pod set name: ``main`` for a Pod, a Job and a replicated workload, the
        replicated job's name for a JobSet.
    count : int
        How many pods run at once (a Job's ``min(parallelism, completions)``, a JobSet's
        ``replicas`` times that, a replicated workload's ``replicas``).
    path : tuple
        The pod template's place in its document (the Pod itself for a Pod).
    template : dict
        The pod template (``metadata`` and ``spec``); a Pod is its own template.
    """

    name: str
    count: int
    path: tuple[Any, ...]
    template: dict[str, Any]


def pod_template_sets(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any]) -> list[PodTemplateSet] | None:
    """The pod sets of a workload object as Kueue's integrations make them, or None for an
    object that runs no pods of its own (not a Pod, Job, JobSet, Deployment, StatefulSet,
    ReplicaSet, ReplicationController or other kind with ``spec.template.spec.containers``).

    Parameters
    ----------
    doc : Document
        The document of ``obj``.
    path : tuple
        The place of ``obj`` in ``doc``.
    obj : Mapping
        The object (its ``apiVersion`` and ``kind`` already checked to be strings).

    Returns
    -------
    list of PodTemplateSet or None

    Raises
    ------
    InvalidInputError
        At the field: a missing spec or template, a bad count, a JobSet without
        replicated jobs or with a nameless one.
    """
    api, kind = obj.get("apiVersion"), obj.get("kind")
    group = api.rsplit("/", 1)[0] if isinstance(api, str) and "/" in api else ""
    if group == "" and kind == "Pod":
        field_map(doc, (*path, "spec"), obj.get("spec"), required=True)
        return [PodTemplateSet("main", 1, path, dict(obj))]
    if (group, kind) in (("batch", "Job"), ("jobset.x-k8s.io", "JobSet")) or (group, kind) in REPLICATED_KINDS or (
        kind not in ("DaemonSet", "CronJob") and has_pod_template(obj)
    ):
        spath = (*path, "spec")
        spec = field_map(doc, spath, obj.get("spec"), required=True)
    else:
        return None
    if kind == "JobSet":
        rpath = (*spath, "replicatedJobs")
        jobs = field_list(doc, rpath, spec.get("replicatedJobs"))
        if not jobs:
            doc.fail(rpath, "expected a non-empty list of replicated jobs")
        out = []
        for j, rj in enumerate(jobs):
            jpath = (*rpath, j)
            rj = field_map(doc, jpath, rj)
            rname = field_string(doc, (*jpath, "name"), rj.get("name"), required=True)
            assert rname is not None
            copies = replica_count(doc, (*jpath, "replicas"), rj.get("replicas"))
            jt = field_map(doc, (*jpath, "template"), rj.get("template"), required=True)
            jspath = (*jpath, "template", "spec")
            jspec = field_map(doc, jspath, jt.get("spec"), required=True)
            total = copies * job_pod_count(doc, jspath, jspec)
            if total > MAX_WORKLOAD_PODS:
                doc.fail(jpath, f"{total} pods; placer imports at most {MAX_WORKLOAD_PODS} per workload")
            tpath = (*jspath, "template")
            out.append(PodTemplateSet(rname, total, tpath, field_map(doc, tpath, jspec.get("template"), required=True)))
        return out
    if group == "batch" and kind == "Job":
        n = job_pod_count(doc, spath, spec)
    else:
        n = replica_count(doc, (*spath, "replicas"), spec.get("replicas"))
    tpath = (*spath, "template")
    return [PodTemplateSet("main", n, tpath, field_map(doc, tpath, spec.get("template"), required=True))]
