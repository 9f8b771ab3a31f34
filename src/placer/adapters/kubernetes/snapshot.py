"""Kubernetes objects to a placer snapshot, and what reading them needs.

:func:`snapshot_from_kubernetes` turns ``kubectl get nodes -o json`` (and optionally
``kubectl get pods -A -o json``) into a :class:`placer.ClusterSnapshot`: it writes the
placer/v1 document of the cluster and decodes it once with
:func:`placer.schema.snapshot_from_dict`, so every check of the schema runs, and a fault
it finds is reported at the Kubernetes object it came from. ``snapshot.to_dict()`` is the
document ``placer import kubernetes`` writes. Workload
manifests become requests in :mod:`placer.adapters.kubernetes.workloads`, which reads
them with the document reader of :mod:`placer.adapters.kubernetes.documents` and the
quantities and pod resources of :mod:`placer.adapters.kubernetes.quantities`
(:func:`pod_amounts` ..., re-exported here).

Input files are JSON or YAML, in any of the shapes ``kubectl`` writes or people keep
manifests in: a ``List`` (``kind: List``, ``NodeList``, ...) with ``items``, a single
object, or a multi-document YAML stream (``---``). ``.json`` files are read as JSON (a
repeated key: the last one counts, as Go's encoding/json does), ``.yaml``/``.yml`` as YAML
(a repeated key is an error), other names as JSON when they start with ``{`` or ``[``.
Template files (``.tftpl``, ``.tpl``, ``.j2``, ...) holding ``${...}`` or ``{{`` and an
unquoted ``${...}`` in any YAML are refused at their line. Quantities follow Kubernetes
rules (:func:`parse_quantity`).

Errors are :class:`placer.exceptions.InvalidInputError`. ``where`` is ``"<file>:<line>"``
for YAML input (the message then starts with the JSON path inside the document, e.g.
``items[3].status.allocatable.cpu: ...``) and ``"<file>: <JSON path>"`` for JSON input
(``nodes.json: items[3].status.allocatable.cpu``); a JSON or YAML syntax error always
gives ``"<file>:<line>"``. Other locations: ``levels[i]`` for a bad level, ``policy``.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence, Union

from placer.limits import MAX_GPUS
from placer.text.messages import closest
from placer.text.lines import some_of
from placer.schema import snapshot_from_dict
from placer.schema.files import gc_paused
from placer.adapters.kubernetes import sharing as kubernetes_sharing
from placer.adapters.kubernetes.mig import apply_node_mig, hold_instances, take_mig_request
from placer.formats import MIG_ANNOTATION
from placer.adapters.kubernetes.templates import pod_host_ports, scheduling_rules
from placer.adapters.kubernetes.scheduling import (
    PriorityClasses,
    disruption_budgets,
    jobset_group,
    kueue_group,
    named_group,
)
from placer.adapters.kubernetes.documents import (
    Document,
    document_objects,
    field_list,
    field_map,
    field_str_map,
    field_string,
    read_documents,
    show,
)
from placer.exceptions import InvalidInputError
from placer.model import TAINT_EFFECTS, ClusterSnapshot
from placer.model.labels import gpu_node_label
from placer.adapters.kubernetes.quantities import (
    CPU_RESOURCE, GPU_RESOURCE, MEMORY_RESOURCE, count, cpu_memory, cpu_milli, extended_resources, gpu_count, memory_mib,
    node_resource_units, parse_quantity, pod_amounts, pod_resources, quantity_at,
)

__all__ = [
    "GPU_RESOURCE",
    "GPU_PRODUCT_LABEL",
    "GPU_MEMORY_LABEL",
    "CLIQUE_LABEL",
    "CLIQUE_LEVEL",
    "HOSTNAME_LABEL",
    "GPUS_ANNOTATION",
    "node_from_object",
    "running_pod_from_object",
    "parse_quantity",
    "cpu_milli",
    "memory_mib",
    "count",
    "parse_levels",
    "pod_amounts",
    "gpu_count",
    "extended_resources",
    "cpu_memory",
    "snapshot_from_kubernetes",
    "KubernetesImport",
    "import_kubernetes",
]

PathLike = Union[str, "os.PathLike[str]"]
LevelSpec = Union[str, Sequence[str]]

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""GPU feature discovery's product label (the node's ``gpuModel``)."""
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
"""GPU feature discovery's memory label, MiB of one full GPU (``gpuMemoryMiB``)."""
CLIQUE_LABEL = "nvidia.com/gpu.clique"
"""GPU feature discovery's multi-node NVLink domain label (``<ClusterUUID>.<CliqueID>``)."""
CLIQUE_LEVEL = "clique"
"""The level added for :data:`CLIQUE_LABEL` when no given level uses that label."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""A topology label that means the node itself (placer's implicit level ``node``)."""
GPUS_ANNOTATION = "placer.io/gpus"
"""Pod annotation with the GPU indices a pod holds (``"0,1"``), as placer's binding writes."""

_TERMINATED = ("Succeeded", "Failed")
_READY_TAINTS = {"False": "node.kubernetes.io/not-ready", "Unknown": "node.kubernetes.io/unreachable"}
_PRESSURE_TAINTS = {
    "MemoryPressure": "node.kubernetes.io/memory-pressure",
    "DiskPressure": "node.kubernetes.io/disk-pressure",
    "PIDPressure": "node.kubernetes.io/pid-pressure",
    "NetworkUnavailable": "node.kubernetes.io/network-unavailable",
}
_LEVEL_NAME = re.compile(r"[^\s=]+")


# ----------------------------------------------------------------------------- levels


def parse_levels(levels: Iterable[LevelSpec], where: str = "levels") -> list[tuple[str, str]]:
    """Check topology levels given as ``(name, label)`` pairs or ``"name=label"`` strings.

    Parameters
    ----------
    levels : iterable
        Outermost first, e.g. ``[("block", "cloud.google.com/gce-topology-block"),
        "rack=cloud.google.com/gce-topology-subblock"]``.
    where : str
        How errors name the list (``levels``, or ``--level`` on the command line).

    Returns
    -------
    list of (str, str)

    Raises
    ------
    InvalidInputError
        ``where`` = ``levels[i]`` (``<where>[i]``) for a malformed entry, an empty, ``node`` or repeated
        level name, or a label used twice.
    """
    out: list[tuple[str, str]] = []
    names: dict[str, int] = {}
    labels: dict[str, int] = {}
    if isinstance(levels, (str, bytes)):
        raise InvalidInputError(where, "expected a list of (name, label) pairs, got a string")
    base = where
    for i, spec in enumerate(levels):
        where = f"{base}[{i}]"
        if isinstance(spec, str):
            name, sep, label = spec.partition("=")
            if not sep:
                raise InvalidInputError(where, f"expected NAME=LABEL, got {spec!r}")
        elif isinstance(spec, (tuple, list)) and len(spec) == 2:
            name, label = spec
        else:
            raise InvalidInputError(where, f"expected a (name, label) pair, got {show(spec)}")
        if not isinstance(name, str) or not _LEVEL_NAME.fullmatch(name):
            raise InvalidInputError(where, f"expected a level name without spaces or '=', got {show(name)}")
        if not isinstance(label, str) or not label or label != label.strip():
            raise InvalidInputError(where, f"expected a node label key, got {show(label)}")
        if name == "node":
            raise InvalidInputError(where, "'node' is placer's implicit innermost level; choose another name")
        if name in names:
            raise InvalidInputError(where, f"level {name!r} given twice (first at {base}[{names[name]}])")
        if label in labels:
            raise InvalidInputError(where, f"label {label!r} given twice (first at {base}[{labels[label]}])")
        names[name] = i
        labels[label] = i
        out.append((name, label))
    return out


# ----------------------------------------------------------------------------- pod resources


def _gpu_indices(doc: Document, path: tuple[Any, ...], v: Any, gpus: int) -> list[int]:
    text = field_string(doc, path, v, empty=True)
    assert text is not None
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    out: list[int] = []
    for p in parts:
        if not p.isascii() or not p.isdigit() or len(p) > 4:
            doc.fail(path, f"expected comma-separated GPU indices like \"0,1\", got {text!r}")
        out.append(int(p))
    if len(out) != gpus:
        doc.fail(path, f"lists {len(out)} GPU(s) but the pod holds {gpus} {GPU_RESOURCE}")
    return out


# ----------------------------------------------------------------------------- snapshot


def _node_entry(
    doc: Document, path: tuple[Any, ...], obj: Any, levels: Sequence[tuple[str, str]], notes: list[str]
) -> tuple[dict[str, Any], str | None]:
    if not isinstance(obj, dict):
        doc.fail(path, f"expected a Node object (a mapping), got {show(obj)}")
    kind = obj.get("kind")
    if kind is not None and kind != "Node":
        doc.fail((*path, "kind"), f"expected a Node, got kind {show(kind)}")
    if kind is None and "metadata" not in obj:
        keys = ", ".join(str(k) for k in list(obj)[:4])
        doc.fail(path, f"expected a Node object (kind, metadata, spec, status), got a mapping of {keys}")
    mpath = (*path, "metadata")
    meta = field_map(doc, mpath, obj.get("metadata"), required=True)
    name = field_string(doc, (*mpath, "name"), meta.get("name"), required=True)
    labels = field_str_map(doc, (*mpath, "labels"), meta.get("labels"), "labels")
    spec = field_map(doc, (*path, "spec"), obj.get("spec"))
    spath = (*path, "status")
    status = field_map(doc, spath, obj.get("status"))
    cap = field_map(doc, (*spath, "capacity"), status.get("capacity"))
    alloc = field_map(doc, (*spath, "allocatable"), status.get("allocatable"))
    marked = gpu_node_label(labels) if not cap and not alloc else None
    if marked is not None:
        doc.fail(
            spath,
            f"node {name!r} has no status.capacity or status.allocatable (a copy cut short?), yet it "
            f"is labelled as a GPU node ({marked[0]}={marked[1]}): it would import with 0 GPUs and "
            "untracked CPU and memory; give the whole 'kubectl get nodes -o json' output",
        )

    def amount(key: str) -> tuple[Any, tuple[Any, ...]] | None:
        if key in alloc:
            return alloc[key], (*spath, "allocatable", key)
        if key in cap:
            return cap[key], (*spath, "capacity", key)
        return None

    node: dict[str, Any] = {"name": name}
    got = amount(GPU_RESOURCE)
    if got is not None:
        gpus = quantity_at(doc, got[1], got[0], count)
        shared = kubernetes_sharing.gpu_sharing(doc, path, labels, gpus, got[1])
        if shared is not None:  # time-slicing or MPS: nvidia.com/gpu counts slots
            gpus, node["gpuSharing"] = shared
        if gpus > MAX_GPUS:
            doc.fail(
                got[1],
                f"{gpus} GPUs on one node, over placer's limit of {MAX_GPUS} (a time-sliced or "
                "MPS-shared nvidia.com/gpu is not imported)",
            )
        if gpus:
            node["gpus"] = gpus
    model = labels.get(GPU_PRODUCT_LABEL)
    if model:
        node["gpuModel"] = kubernetes_sharing.model_name(model)
    gmem = labels.get(GPU_MEMORY_LABEL)
    if gmem is not None:
        if not gmem.isascii() or not gmem.isdigit() or len(gmem) > 12:
            doc.fail((*mpath, "labels", GPU_MEMORY_LABEL), f"expected an integer (MiB), got {show(gmem)}")
        node["gpuMemoryMiB"] = int(gmem)
    got = amount(CPU_RESOURCE)
    if got is not None:
        node["cpuMilli"] = quantity_at(doc, got[1], got[0], cpu_milli)
    got = amount(MEMORY_RESOURCE)
    if got is not None:
        node["memoryMiB"] = quantity_at(doc, got[1], got[0], memory_mib)
    got = amount("pods")
    if got is not None:
        node["maxPods"] = quantity_at(doc, got[1], got[0], count)

    topology = {lv: labels[lb] for lv, lb in levels if labels.get(lb)}
    if topology:
        node["topology"] = topology
    if labels:
        node["labels"] = dict(labels)

    tpath = (*path, "spec", "taints")
    taints = []
    for j, t in enumerate(field_list(doc, tpath, spec.get("taints"))):
        t = field_map(doc, (*tpath, j), t)
        key = field_string(doc, (*tpath, j, "key"), t.get("key"), required=True)
        value = field_string(doc, (*tpath, j, "value"), t.get("value"), empty=True)
        effect = t.get("effect")
        if effect not in TAINT_EFFECTS:
            doc.fail(
                (*tpath, j, "effect"), f"expected one of {', '.join(TAINT_EFFECTS)}, got {show(effect)}"
            )
        taint: dict[str, Any] = {"key": key}
        if value:
            taint["value"] = value
        taint["effect"] = effect
        if t.get("timeAdded") is not None:
            taint["timeAdded"] = _rfc3339(doc, (*tpath, j, "timeAdded"), t["timeAdded"])
        taints.append(taint)
    assert name is not None  # required
    taints += _condition_taints(doc, spath, name, status, taints, notes)
    if taints:
        node["taints"] = taints

    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        doc.fail((*path, "spec", "unschedulable"), f"expected true or false, got {show(unschedulable)}")
    if unschedulable:
        node["unschedulable"] = True

    resources: dict[str, dict[str, int]] = {}
    for side, values in (("capacity", cap), ("allocatable", alloc)):
        for k, v in values.items():
            reader = node_resource_units(k) if isinstance(k, str) and k else None
            if reader is not None:
                n = quantity_at(doc, (*spath, side, k), v, reader)
                resources.setdefault(k, {"capacity": 0, "allocatable": 0})[side] = n
    if resources:
        node["resources"] = resources
    return node, apply_node_mig(doc, path, node, labels, notes)


def _condition_taints(
    doc: Document,
    spath: tuple[Any, ...],
    name: str,
    status: Mapping[str, Any],
    taints: Sequence[Mapping[str, Any]],
    notes: list[str],
) -> list[dict[str, Any]]:
    """The taints the node lifecycle controller puts on a node for its conditions that the
    node does not carry yet (a note names them): ``Ready`` False -> ``not-ready`` and
    Unknown (or no ``Ready`` among the conditions given) -> ``unreachable``, each
    ``NoSchedule`` and ``NoExecute``; a pressure or ``NetworkUnavailable`` condition that
    is True -> its ``NoSchedule`` taint. A node without ``status.conditions`` gets none."""
    conditions = status.get("conditions")
    if conditions is None:
        return []
    cpath = (*spath, "conditions")
    states: dict[str | None, str | None] = {}
    for j, c in enumerate(field_list(doc, cpath, conditions)):
        c = field_map(doc, (*cpath, j), c)
        kind = field_string(doc, (*cpath, j, "type"), c.get("type"))
        states[kind] = field_string(doc, (*cpath, j, "status"), c.get("status"))
    wanted: list[tuple[str, str]] = []
    ready = states.get("Ready", "Unknown")
    if ready is not None and ready in _READY_TAINTS:
        wanted += [(_READY_TAINTS[ready], "NoSchedule"), (_READY_TAINTS[ready], "NoExecute")]
    wanted += [(key, "NoSchedule") for kind, key in _PRESSURE_TAINTS.items() if states.get(kind) == "True"]
    have = {(t["key"], t["effect"]) for t in taints}
    added = [{"key": key, "effect": effect} for key, effect in wanted if (key, effect) not in have]
    if added:
        causes = [f"Ready is {states.get('Ready', 'missing')}"] if ready in _READY_TAINTS else []
        causes += [f"{kind} is True" for kind in _PRESSURE_TAINTS if states.get(kind) == "True"]
        shown = ", ".join(f"{t['key']}:{t['effect']}" for t in added)
        what = f"node {name!r}: {', '.join(causes)}; added the node lifecycle controller's taint(s) {shown}"
        notes.append(doc.note(cpath, what))
    return added


def _running_pod(
    doc: Document,
    path: tuple[Any, ...],
    obj: dict[str, Any],
    single_profile: str | None,
    classes: PriorityClasses,
    notes: list[str],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    mpath = (*path, "metadata")
    meta = field_map(doc, mpath, obj.get("metadata"), required=True)
    name = field_string(doc, (*mpath, "name"), meta.get("name"), required=True)
    namespace = field_string(doc, (*mpath, "namespace"), meta.get("namespace")) or "default"
    annotations = field_str_map(doc, (*mpath, "annotations"), meta.get("annotations"), "annotations")
    labels = field_str_map(doc, (*mpath, "labels"), meta.get("labels"), "labels")
    spath = (*path, "spec")
    spec = field_map(doc, spath, obj.get("spec"), required=True)
    amounts = pod_amounts(doc, spath, spec)
    pod: dict[str, Any] = {"name": f"{namespace}/{name}"}
    mig = take_mig_request(doc, spath, amounts)
    gpus = gpu_count(doc, spath, amounts)
    if single_profile is not None and gpus:  # nvidia.com/gpu counts MIG devices
        if mig is not None:
            doc.fail(spath, f"asks for nvidia.com/gpu (MIG {single_profile} devices here) and {mig['profile']}")
        mig, gpus = {"profile": single_profile, "count": gpus}, 0
    if GPUS_ANNOTATION in annotations:
        apath = (*mpath, "annotations", GPUS_ANNOTATION)
        pod["gpus"] = _gpu_indices(doc, apath, annotations[GPUS_ANNOTATION], gpus)
    elif gpus:
        pod["unknownGpus"] = gpus
    pod.update(cpu_memory(amounts, round_up=False))
    prio = classes.priority(doc, spath, spec, notes)
    if prio:
        pod["priority"] = prio
    res = pod_resources(amounts)
    if res:
        pod["resources"] = res
    pod.update(scheduling_rules(doc, spath, spec, ("affinity",)))
    ports = pod_host_ports(doc, spath, spec)
    if ports:
        pod["hostPorts"] = ports
    pod.update(_disruption_facts(doc, path, obj, namespace, labels, annotations))
    if not classes.preemptible(doc, spath, spec, prio):
        pod["preemptible"] = False
    return pod, mig


def _mig_annotation(obj: Mapping[str, Any]) -> str | None:
    """A Pod object's ``placer.io/mig`` annotation (the MIG instances placer bound it to)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(MIG_ANNOTATION)
    return value if isinstance(value, str) else None


def _devices_gone_unhealthy(entry: dict[str, Any]) -> None:
    """A node whose running pods hold more ``nvidia.com/gpu`` than it has allocatable, within
    its capacity: the device plugin took the devices that turned unhealthy out of
    allocatable while their pods run on. The node gets those GPUs back as ``unhealthyGpus``
    (the ones after the allocatable ones: which devices left is not known), so the snapshot
    loads and ``placer report`` names the pods on them."""
    if "gpuSharing" in entry or "mig" in entry:
        return
    offer = entry.get("resources", {}).get(GPU_RESOURCE)
    pods = entry.get("pods", [])
    held = sum(p.get("unknownGpus", 0) + len(p.get("gpus", ())) for p in pods)
    needed = max([held, *(g + 1 for p in pods for g in p.get("gpus", ()))])
    gpus = entry.get("gpus", 0)
    if offer is None or needed <= gpus or needed > offer["capacity"]:
        return
    entry["gpus"] = needed
    entry["unhealthyGpus"] = list(range(gpus, needed))


def _bound_node(doc: Document, path: tuple[Any, ...], obj: Any) -> str | None:
    """The node a Pod object runs on: bound (``spec.nodeName``) and not finished; None
    for a pending or finished pod."""
    if not isinstance(obj, dict):
        doc.fail(path, f"expected a Pod object (a mapping), got {show(obj)}")
    kind = obj.get("kind")
    if kind is not None and kind != "Pod":
        doc.fail((*path, "kind"), f"expected a Pod, got kind {show(kind)}")
    spec = field_map(doc, (*path, "spec"), obj.get("spec"), required=True)
    node_name = field_string(doc, (*path, "spec", "nodeName"), spec.get("nodeName"))
    status = field_map(doc, (*path, "status"), obj.get("status"))
    if not node_name or status.get("phase") in _TERMINATED:
        return None
    return node_name


def _disruption_facts(
    doc: Document,
    path: tuple[Any, ...],
    obj: Mapping[str, Any],
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """What preemption reads of a running pod besides its priority: ``startTime``,
    ``labels``, ``gang``, ``terminating`` and ``disruptionTarget`` (each only when known)."""
    facts: dict[str, Any] = {}
    status = field_map(doc, (*path, "status"), obj.get("status"))
    started = status.get("startTime")
    if started is not None:
        facts["startTime"] = _rfc3339(doc, (*path, "status", "startTime"), started)
    if labels:
        facts["labels"] = dict(labels)
    group = named_group(namespace, labels, annotations) or jobset_group(namespace, labels) or kueue_group(
        namespace, labels
    )
    if group is not None:
        facts["gang"] = group.name
    if obj["metadata"].get("deletionTimestamp") is not None:
        facts["terminating"] = True
    cpath = (*path, "status", "conditions")
    for j, condition in enumerate(field_list(doc, cpath, status.get("conditions"))):
        condition = field_map(doc, (*cpath, j), condition)
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            reason = field_string(doc, (*cpath, j, "reason"), condition.get("reason"))
            facts["disruptionTarget"] = reason or "DisruptionTarget"
    return facts


def _rfc3339(doc: Document, path: tuple[Any, ...], value: Any) -> str:
    """A time as RFC 3339 text: as written, or the timestamp YAML made of an unquoted one."""
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    text = field_string(doc, path, value)
    assert text is not None
    return text


_NESTED = re.compile(r"nodes\[(\d+)\](?:\.pods\[(\d+)\](?:\.(affinity)\b)?)?")
_BUDGET = re.compile(r"podDisruptionBudgets\[(\d+)\]")


def snapshot_from_kubernetes(
    nodes: PathLike,
    pods: PathLike | None = None,
    levels: Iterable[LevelSpec] = (),
    *,
    priority_classes: PathLike | None = None,
    pdbs: PathLike | None = None,
) -> ClusterSnapshot:
    """A ClusterSnapshot from ``kubectl get nodes`` / ``get pods`` output.

    Nodes (each becomes one snapshot node with inline hardware, in file order):

    * ``gpus`` = allocatable ``nvidia.com/gpu`` (left out when 0 or absent), ``gpuModel``
      = label ``nvidia.com/gpu.product`` (less a ``-SHARED`` suffix), ``gpuMemoryMiB`` =
      label ``nvidia.com/gpu.memory``. A node whose GPU feature discovery labels say it
      shares its GPUs (``nvidia.com/gpu.replicas`` above 1; time-slicing or MPS) counts
      slots in ``nvidia.com/gpu``: ``gpus`` = its physical GPUs and ``gpuSharing`` the
      strategy and replicas (:func:`placer.adapters.kubernetes.sharing.gpu_sharing`);
      ``cpuMilli``/``memoryMiB``/``maxPods`` = allocatable ``cpu``/``memory``/``pods``
      (memory rounded down to MiB). A resource missing from ``allocatable`` is taken from
      ``capacity``; missing from both, it is left out (untracked). A node with neither
      ``status.capacity`` nor ``status.allocatable`` that a label of
      :data:`placer.model.labels.GPU_NODE_LABELS` marks as a GPU node is refused (its copy
      was cut short).
    * ``resources``: every resource of capacity or allocatable besides cpu, memory and
      pods, as ``{"capacity": n, "allocatable": n}`` (a side missing is 0):
      ``ephemeral-storage`` and ``hugepages-<size>`` in bytes (rounded up, as
      ``Quantity.Value()``), extended resources (names with ``/``: ``nvidia.com/gpu``,
      ``rdma/...``) as counts. kube-scheduler's NodeResourcesFit takes a resource a node
      does not list as 0 allocatable, and so does placer.
    * MIG (:func:`placer.adapters.kubernetes.mig.apply_node_mig`): a node with
      ``nvidia.com/mig-<profile>`` resources (mixed strategy) or label
      ``nvidia.com/mig.strategy=single`` and a ``-MIG-<profile>`` product gets ``gpus``
      (its physical GPUs), ``mig`` (static) and ``migInstances`` laid out on valid starts,
      and its MIG resources leave ``resources``; when its model has no bundled MIG table
      they stay there and :func:`import_kubernetes` notes it.
    * ``labels`` (all), ``taints`` (key, value, effect, ``timeAdded``); ``unschedulable:
      true`` when ``spec.unschedulable`` is true. kube-scheduler reads no condition: the
      node lifecycle controller taints a node for them, and the taints it would put that
      the node does not carry yet are added (a note each node): ``Ready`` False ->
      ``node.kubernetes.io/not-ready``, Unknown (or missing from the conditions given) ->
      ``node.kubernetes.io/unreachable``, each ``NoSchedule`` and ``NoExecute``;
      ``MemoryPressure``/``DiskPressure``/``PIDPressure``/``NetworkUnavailable`` True ->
      ``node.kubernetes.io/memory-pressure`` (...) ``NoSchedule``. A node without
      ``status.conditions`` gets none.
    * ``topology``: each level's label value, levels the node has no (or an empty) label
      for left out. ``topologyLevels`` = the level names, plus :data:`CLIQUE_LEVEL` as the
      innermost level when some node has label ``nvidia.com/gpu.clique`` and no level
      uses that label (not added when a given level is already named ``clique``).

    Pods with ``spec.nodeName`` and a phase other than Succeeded/Failed run on that node:
    name ``<namespace>/<name>``; ``cpuMilli`` (rounded up) and ``memoryMiB`` (rounded down)
    = effective requests (the larger of the containers' sum and the init containers' peak,
    restartable init containers counted as sidecars, plus ``spec.overhead``; a container's
    cpu/memory request defaults to its limit); ``unknownGpus`` = its ``nvidia.com/gpu``
    (limits, else requests), or ``gpus`` = the indices of annotation ``placer.io/gpus``;
    ``nvidia.com/mig-<profile>: n`` (or, on a single-strategy node, ``nvidia.com/gpu``)
    -> ``mig``: the instances its annotation ``placer.io/mig`` names (placer's bind), else
    the first n instances of that profile on its node that no pod listed before it holds; every other resource (``ephemeral-storage`` and ``hugepages-<size>``
    in bytes, extended resources as counts; the same effective requests) -> ``resources``. On a node that shares its
    GPUs the pod's ``nvidia.com/gpu`` counts slots: ``unknownGpuSlots``, or ``gpuSlots``
    from the annotation's indices (one per slot).

    What preemption reads of a running pod: ``priority`` = ``spec.priority``, else the
    value of its ``spec.priorityClassName`` in ``priority_classes`` (the system classes
    are built in), else of the ``globalDefault`` class there, else 0 (a class not found:
    0 and a note); ``preemptible: false`` for a pod of a system class or of priority
    2000000000 or more (kube's ``SystemCriticalPriority``: DNS, device plugins, CNI);
    ``startTime`` = ``status.startTime``; ``labels`` = ``metadata.labels``; ``gang`` =
    the PodGroup of label ``scheduling.x-k8s.io/pod-group`` (or the older
    ``pod-group.scheduling.sigs.k8s.io``) or of the Volcano annotation
    ``scheduling.k8s.io/group-name``, else the JobSet of label
    ``jobset.sigs.k8s.io/jobset-name``, else the Kueue pod group of label
    ``kueue.x-k8s.io/pod-group-name``, as ``<namespace>/<name>`` (the names
    :func:`placer.adapters.kubernetes.workloads.import_workloads` gives them);
    ``terminating: true`` with ``metadata.deletionTimestamp``; ``affinity`` =
    ``spec.affinity`` as written; ``disruptionTarget`` = the
    reason of a true ``DisruptionTarget`` condition. ``podDisruptionBudgets`` come from
    ``pdbs`` (:func:`placer.adapters.kubernetes.scheduling.disruption_budgets`).

    Parameters
    ----------
    nodes : str or os.PathLike
        ``kubectl get nodes -o json`` (or ``-o yaml``) output: a List, one Node, or a
        multi-document YAML of Nodes (items of kind other than Node are refused).
    pods : str or os.PathLike, optional
        ``kubectl get pods -A -o json`` output, in the same shapes.
    levels : iterable of (name, label) or "name=label"
        Topology levels, outermost first (see :func:`parse_levels`).
    priority_classes : str or os.PathLike, optional
        ``kubectl get priorityclasses -o json`` output (PriorityClass objects only).
    pdbs : str or os.PathLike, optional
        ``kubectl get pdb -A -o json`` output (PodDisruptionBudget objects only).

    Returns
    -------
    ClusterSnapshot
        The snapshot, built by :func:`placer.schema.snapshot_from_dict` from the placer/v1
        document described above; ``to_dict()`` gives that document back (the one
        ``placer import kubernetes`` writes).

    Raises
    ------
    InvalidInputError
        At the file location (see the module docs) of the first fault: syntax errors, a
        bad quantity or field, no nodes, a node name given twice, a GPU-labelled node
        without ``status.capacity`` and ``status.allocatable`` (at ``items[i].status``), a
        pod bound to a node not in the node list (``<pods file>: items[i].spec.nodeName``), a node whose pods hold
        more GPUs than it has at all (at the pod; CPU, memory, pods and extended resources
        over-committed load, see docs/placement-rules.md), MIG counts that cannot be laid out on the node's
        GPUs or a profile its model lacks (at the resource), a pod asking for two MIG
        profiles or more instances than are free (at the pod), an object of another kind
        in ``priority_classes`` or ``pdbs`` (at its ``kind``), a budget selecting by an
        expression other than ``In`` with one value. A fault the schema finds in the
        document is reported at the node, pod or budget object it came from, its placer/v1
        path in parentheses after the message (``... (placer/v1 nodes[0].pods[1].unknownGpus)``).
    """
    return import_kubernetes(nodes, pods, levels, priority_classes=priority_classes, pdbs=pdbs).snapshot


def node_from_object(
    obj: Any, source: str, levels: Iterable[LevelSpec] = (), notes: list[str] | None = None
) -> dict[str, Any]:
    """The placer/v1 node entry of one Node object (as :func:`snapshot_from_kubernetes`
    reads it, without pods), for objects that come one at a time: a watch's events.

    Parameters
    ----------
    obj : mapping
        A Node object.
    source : str
        What errors name in place of a file.
    levels : iterable of (name, label) or "name=label"
        Topology levels, outermost first.
    notes : list of str, optional
        Takes the node's notes (:attr:`KubernetesImport.notes`: a not-ready taint added, …).

    Raises
    ------
    InvalidInputError
        As :func:`snapshot_from_kubernetes` for a node.
    """
    entry, _ = _node_entry(Document(source, obj, None, 1), (), obj, parse_levels(levels), [] if notes is None else notes)
    return entry


def running_pod_from_object(
    obj: Any, source: str, node: dict[str, Any] | None = None, notes: list[str] | None = None
) -> dict[str, Any] | None:
    """The placer/v1 entry of one Pod object when it runs on a node (bound, not finished),
    else None: what :func:`snapshot_from_kubernetes` makes of it, for a watch's events.

    Parameters
    ----------
    obj : mapping
        A Pod object.
    source : str
        What errors name in place of a file.
    node : dict, optional
        The placer/v1 entry of the pod's node: a pod of MIG devices takes its instances
        there (the entry changes).
    notes : list of str, optional
        Takes the running pod's notes (:attr:`KubernetesImport.notes`: an unknown priority
        class, …); a pod that does not run adds none.

    Raises
    ------
    InvalidInputError
        As :func:`snapshot_from_kubernetes` for a pod.
    """
    doc = Document(source, obj, None, 1)
    if _bound_node(doc, (), obj) is None:
        return None
    notes = [] if notes is None else notes
    pod, mig = _running_pod(doc, (), obj, None, PriorityClasses(), notes)
    if mig is not None and node is not None:
        hold_instances(doc, (), node, pod, mig, _mig_annotation(obj), notes)
    if node is not None and "gpuSharing" in node:
        pod = kubernetes_sharing.slot_holder(pod)
    return pod


@dataclass(frozen=True)
class KubernetesImport:
    """What :func:`import_kubernetes` made of ``kubectl`` output.

    Attributes
    ----------
    snapshot : ClusterSnapshot
        The snapshot, decoded once from :attr:`document`.
    document : dict
        The placer/v1 ClusterSnapshot document.
    notes : tuple of str
        What was read but not carried over, one line each starting with the object's
        location: a node with MIG resources whose GPU model has no bundled MIG table, a
        node given the node lifecycle controller's taints for its conditions, a pod whose
        priority class is not among the inputs, a budget that selects no pod.
    """

    snapshot: ClusterSnapshot
    document: dict[str, Any]
    notes: tuple[str, ...] = ()


def import_kubernetes(
    nodes: PathLike,
    pods: PathLike | None = None,
    levels: Iterable[LevelSpec] = (),
    *,
    priority_classes: PathLike | None = None,
    pdbs: PathLike | None = None,
) -> KubernetesImport:
    """The snapshot of :func:`snapshot_from_kubernetes`, with its document and the notes of
    what could not be carried over (``placer import kubernetes`` prints them on stderr).

    Parameters and errors are those of :func:`snapshot_from_kubernetes`.

    Returns
    -------
    KubernetesImport
    """
    level_list = parse_levels(levels)
    with gc_paused():  # large acyclic structures: the cyclic GC only costs time here
        return _snapshot(nodes, pods, level_list, priority_classes, pdbs)


def _level_coverage(level_list: Sequence[tuple[str, str]], entries: Sequence[dict[str, Any]]) -> list[str]:
    """Notes for the levels whose label only some nodes carry.

    Raises
    ------
    InvalidInputError
        ``levels[i]`` for a level whose label no node carries (with a near label key of
        the nodes, when there is one).
    """
    notes = []
    for i, (name, label) in enumerate(level_list):
        lacking = [e["name"] for e in entries if name not in e.get("topology", {})]
        if len(lacking) == len(entries):
            keys = {key for e in entries for key in e.get("labels", {})}
            near = closest(label, sorted(keys))
            hint = f" (did you mean {near!r}?)" if near is not None else ""
            raise InvalidInputError(f"levels[{i}]", f"no node carries label {label!r}{hint}")
        if lacking:
            notes.append(
                f"level {name} ({label}): {len(lacking)} of {len(entries)} node(s) do not carry the label "
                f"({some_of(lacking)}): they are in no {name} domain and take no pod of a gang that level constrains"
            )
    return notes


def _snapshot(
    nodes: PathLike,
    pods: PathLike | None,
    level_list: list[tuple[str, str]],
    priority_classes: PathLike | None,
    pdbs: PathLike | None,
) -> KubernetesImport:
    node_docs = read_documents(nodes)
    notes: list[str] = []
    classes = PriorityClasses()
    for doc in read_documents(priority_classes) if priority_classes is not None else ():
        classes.read(doc)
    single: list[str | None] = []
    entries: list[dict[str, Any]] = []
    node_src: list[tuple[Document, tuple[Any, ...]]] = []
    index: dict[str, int] = {}
    for doc in node_docs:
        for path, obj in document_objects(doc):
            entry, single_profile = _node_entry(doc, path, obj, level_list, notes)
            if entry["name"] in index:
                first = node_src[index[entry["name"]]]
                doc.fail(
                    (*path, "metadata", "name"),
                    f"node {entry['name']!r} listed twice (first at {first[0].where(first[1])})",
                )
            index[entry["name"]] = len(entries)
            entries.append(entry)
            single.append(single_profile)
            node_src.append((doc, path))
    if not entries:
        raise InvalidInputError(f"{os.fspath(nodes)}:1", "no Node objects in the file")
    notes += _level_coverage(level_list, entries)

    level_names = [name for name, _ in level_list]
    if CLIQUE_LEVEL not in level_names and all(lb != CLIQUE_LABEL for _, lb in level_list):
        if any(e.get("labels", {}).get(CLIQUE_LABEL) for e in entries):
            level_names.append(CLIQUE_LEVEL)
            for e in entries:
                clique = e.get("labels", {}).get(CLIQUE_LABEL)
                if clique:
                    e.setdefault("topology", {})[CLIQUE_LEVEL] = clique

    pod_src: dict[tuple[int, int], tuple[Document, tuple[Any, ...]]] = {}
    if pods is not None:
        for doc in read_documents(pods):
            for path, obj in document_objects(doc):
                node_name = _bound_node(doc, path, obj)
                if node_name is None:
                    continue
                i = index.get(node_name)
                if i is None:
                    doc.fail(
                        (*path, "spec", "nodeName"),
                        f"pod runs on node {node_name!r}, which is not in the node list {os.fspath(nodes)}",
                    )
                node_pods = entries[i].setdefault("pods", [])
                pod_src[(i, len(node_pods))] = (doc, path)
                pod, mig = _running_pod(doc, path, obj, single[i], classes, notes)
                if mig is not None:
                    hold_instances(doc, path, entries[i], pod, mig, _mig_annotation(obj), notes)
                node_pods.append(kubernetes_sharing.slot_holder(pod) if "gpuSharing" in entries[i] else pod)

    for entry in entries:
        _devices_gone_unhealthy(entry)
    document: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot"}
    if level_names:
        document["topologyLevels"] = level_names
    document["nodes"] = entries
    budget_src: list[tuple[Document, tuple[Any, ...]]] = []
    for doc in read_documents(pdbs) if pdbs is not None else ():
        for path, budget in disruption_budgets(doc, notes):
            document.setdefault("podDisruptionBudgets", []).append(budget)
            budget_src.append((doc, path))
    try:
        return KubernetesImport(snapshot_from_dict(document), document, tuple(notes))
    except InvalidInputError as e:
        budget = _BUDGET.match(e.where)
        if budget is not None:
            doc, path = budget_src[int(budget.group(1))]
            raise doc.error(path, f"{e.what} (placer/v1 {e.where})") from None
        m = _NESTED.match(e.where)
        if m is None:
            raise
        i = int(m.group(1))
        if m.group(2) is not None and (i, int(m.group(2))) in pod_src:
            doc, path = pod_src[(i, int(m.group(2)))]
            if m.group(3) is not None:  # as written in the pod spec: at that field
                path = (*path, "spec", m.group(3))
        else:
            doc, path = node_src[i]
        raise doc.error(path, f"{e.what} (placer/v1 {e.where})") from None
