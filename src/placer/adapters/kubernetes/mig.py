"""MIG on Kubernetes nodes and pods: the device plugin's resources and GFD's labels.

With the NVIDIA device plugin's ``mixed`` strategy a node offers one extended resource per
MIG profile (``nvidia.com/mig-1g.10gb: 4``; ``nvidia.com/gpu`` counts only the GPUs not in
MIG mode and may be 0), and GPU feature discovery labels the node with the physical GPU
count (``nvidia.com/gpu.count``), the model (``nvidia.com/gpu.product``) and per profile
``nvidia.com/mig-<profile>.count`` and ``.slices.gi``. With the ``single`` strategy
(``nvidia.com/mig.strategy=single``) every GPU holds instances of one profile,
``nvidia.com/gpu`` counts the MIG devices and the product ends in ``-MIG-<profile>``.

:func:`apply_node_mig` turns such a node's entry into a MIG node (``mig`` static on its MIG
GPUs, ``migInstances`` laid out by :func:`placer.mig.layout.layout_instances`, since
Kubernetes does not say which GPU or start an instance has);
:func:`take_mig_request` turns a pod's ``nvidia.com/mig-<profile>`` into a ``mig``
request; :func:`hold_instances` gives a running pod the instances its ``placer.io/mig``
annotation names (placer's bind wrote it), else the first free ones.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Mapping

from placer.adapters.kubernetes.documents import Document
from placer.formats import MIG_ANNOTATION
from placer.limits import MAX_GPUS
from placer.mig.layout import fewest_gpus, layout_instances
from placer.model.mig_profiles import PROFILE_NAME, MigTable, table_for, tables

__all__ = [
    "MIG_RESOURCE_PREFIX",
    "MIG_STRATEGY_LABEL",
    "MIG_CONFIG_LABEL",
    "GPU_COUNT_LABEL",
    "mig_profile_of",
    "take_mig_request",
    "apply_node_mig",
    "hold_instances",
]

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""Prefix of the device plugin's per-profile resource (``nvidia.com/mig-3g.40gb``)."""
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
"""GFD's label of the device plugin's MIG strategy: ``none``, ``single`` or ``mixed``."""
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
"""The mig-manager's layout name (``all-1g.10gb``, ``all-balanced``); kept as a label."""
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
"""GFD's GPU count label: the physical GPUs with the mixed strategy."""
_SINGLE_SUFFIX = "-MIG-"


def mig_profile_of(resource: str) -> str | None:
    """The profile of a ``nvidia.com/mig-<profile>`` resource name, else None."""
    if not resource.startswith(MIG_RESOURCE_PREFIX):
        return None
    profile = resource[len(MIG_RESOURCE_PREFIX):]
    return profile if PROFILE_NAME.match(profile) else None


def take_mig_request(doc: Document, path: tuple[Any, ...], amounts: dict[str, Fraction]) -> dict[str, Any] | None:
    """Take the ``nvidia.com/mig-<profile>`` resources out of a pod's ``amounts`` as a
    placer ``mig`` request.

    Parameters
    ----------
    doc : Document
        The document of the pod.
    path : tuple
        The pod spec's place in ``doc``, for errors.
    amounts : dict of str to Fraction
        As :func:`placer.adapters.kubernetes.quantities.pod_amounts` returns; the MIG resources are
        removed from it.

    Returns
    -------
    dict or None
        ``{"profile": "1g.10gb", "count": n}``, or None when the pod asks for no MIG.

    Raises
    ------
    InvalidInputError
        At ``path`` for a pod that asks for instances of two profiles (placer's ``mig``
        request names one).
    """
    asked = {p: int(amounts.pop(k)) for k in list(amounts) if (p := mig_profile_of(k)) is not None}
    asked = {p: n for p, n in asked.items() if n > 0}
    if not asked:
        return None
    if len(asked) > 1:
        doc.fail(path, f"asks for MIG instances of {len(asked)} profiles ({', '.join(sorted(asked))}); "
                       "placer takes one profile per pod")
    (profile, count), = asked.items()
    return {"profile": profile, "count": count}


def apply_node_mig(
    doc: Document, path: tuple[Any, ...], node: dict[str, Any], labels: Mapping[str, str], notes: list[str]
) -> str | None:
    """Make the snapshot entry ``node`` of a Kubernetes node a MIG node when its resources
    or labels say it has MIG instances.

    Mixed strategy (a ``nvidia.com/mig-<profile>`` resource above 0): ``gpus`` = label
    ``nvidia.com/gpu.count`` when given, else the GPUs not in MIG mode (``nvidia.com/gpu``)
    plus the fewest GPUs the instances can be laid out on; the MIG GPUs are the lowest
    indices (``mig.gpus``: ``"all"`` when every GPU is in MIG mode). Single strategy
    (label ``nvidia.com/mig.strategy=single`` and a product ending ``-MIG-<profile>``):
    ``nvidia.com/gpu`` counts instances of that profile, laid out on the fewest GPUs;
    ``gpuModel`` drops the suffix and ``gpuMemoryMiB`` (GFD gives the instance's memory
    there) is left out. Either way ``mig`` is ``{"gpus": ..., "mode": "static"}`` (the
    device plugin uses only instances that exist), ``migInstances`` lay out the counts
    (:func:`placer.mig.layout.layout_instances`: largest profile first at the lowest valid
    start, GPU by GPU) and the MIG resources leave ``resources``. The node's counts are
    its allocatable resources. A node whose model has no bundled MIG table keeps its MIG
    resources as extended resources, with a note.

    Parameters
    ----------
    doc : Document
        The document of the node.
    path : tuple
        The node's place in ``doc``.
    node : dict
        The snapshot entry (``gpus``, ``gpuModel``, ``resources``, ...), changed in place.
    labels : Mapping of str to str
        The node's labels.
    notes : list of str
        Where a note is added for a MIG node that is imported without MIG.

    Returns
    -------
    str or None
        With the single strategy, the profile a pod's ``nvidia.com/gpu`` counts
        instances of; else None.

    Raises
    ------
    InvalidInputError
        At the resource, for a profile the node's model does not have, or counts that
        cannot be laid out on the node's GPUs (``nvidia.com/gpu.count`` too small, or over
        placer's limit of GPUs); at the label, for a ``nvidia.com/gpu.count`` that is not
        a whole number.
    """
    resources: dict[str, dict[str, int]] = node.get("resources", {})
    rpath = (*path, "status", "allocatable")
    model = node.get("gpuModel")
    product = labels.get("nvidia.com/gpu.product", "")
    single = labels.get(MIG_STRATEGY_LABEL) == "single" and _SINGLE_SUFFIX in product
    if single:
        name = product[product.index(_SINGLE_SUFFIX) + len(_SINGLE_SUFFIX):]
        counts = {name: (node.get("gpus", 0), (*rpath, "nvidia.com/gpu"))}
        model = product[: product.index(_SINGLE_SUFFIX)]
    else:
        counts = {
            p: (amount["allocatable"], (*rpath, key))
            for key, amount in resources.items()
            if (p := mig_profile_of(key)) is not None and amount["allocatable"] > 0
        }
    if not counts:
        return None
    table = table_for(model)
    if table is None:
        notes.append(doc.note(
            (*path, "metadata", "labels"),
            f"node {node['name']!r} has MIG instances ({', '.join(sorted(counts))}) but GPU model "
            f"{model!r} has no bundled MIG table (placer knows MIG on: {', '.join(sorted(tables()))}); "
            "its MIG resources are imported as extended resources",
        ))
        return None
    wanted = {}
    for name, (n, where) in counts.items():
        slices = labels.get(f"{MIG_RESOURCE_PREFIX}{name}.slices.gi")
        profile = table.profile(name, int(slices) if slices is not None and slices.isdigit() else None)
        if profile is None:
            doc.fail(where, f"no MIG profile {name!r} on {table.model} (GPU model {model!r}); it has: "
                            f"{', '.join(table.names())}")
        wanted[profile] = wanted.get(profile, 0) + n
    whole = 0 if single else node.get("gpus", 0)
    where = next(iter(counts.values()))[1]
    total = _gpu_count_label(doc, path, labels) if not single else None
    if total is not None:
        mig_gpus = total - whole
        laid = layout_instances(table, wanted, range(mig_gpus)) if mig_gpus > 0 else None
        if laid is None:
            doc.fail(where, f"{_counted(wanted)} cannot be laid out on the {max(mig_gpus, 0)} GPU(s) in MIG mode "
                            f"({GPU_COUNT_LABEL}={total} less {whole} whole nvidia.com/gpu) of a {table.model}")
    else:
        fewest = fewest_gpus(table, wanted, MAX_GPUS - whole)
        if fewest is None:
            doc.fail(where, f"{_counted(wanted)} cannot be laid out on {MAX_GPUS - whole} {table.model} GPUs "
                            f"(placer's limit is {MAX_GPUS} GPUs on a node)")
        mig_gpus = fewest
        laid = layout_instances(table, wanted, range(mig_gpus))
    assert laid is not None
    for key in [k for k in resources if mig_profile_of(k) is not None or (single and k == "nvidia.com/gpu")]:
        del resources[key]
    if not resources:
        node.pop("resources", None)
    if single:
        node["gpuModel"] = model
        node.pop("gpuMemoryMiB", None)
    node["gpus"] = whole + mig_gpus
    node["mig"] = {"gpus": "all" if not whole else list(range(mig_gpus)), "mode": "static"}
    node["migInstances"] = [{"gpu": g, "profile": p.name, "start": s} for g, p, s in laid]
    return next(iter(wanted)).name if single else None


def hold_instances(
    doc: Document, path: tuple[Any, ...], node: dict[str, Any], pod: dict[str, Any], request: Mapping[str, Any],
    annotation: str | None = None, notes: list[str] | None = None,
) -> None:
    """Give the running pod ``pod`` of the MIG node ``node`` the instances of the profile it
    asks for (``request`` as :func:`take_mig_request` returns): those its ``placer.io/mig``
    ``annotation`` names (``<gpu>/<profile>/<start>``, comma-separated, as placer's
    Bindings write it) when they are free instances of that profile, else the first free
    ones in the order of ``migInstances`` (with a note in ``notes`` when the annotation
    names others); on a node imported without MIG the request goes back to the pod's
    ``resources`` as ``nvidia.com/mig-<profile>``.

    Raises
    ------
    InvalidInputError
        At the pod (``path``), for a profile the node has too few free instances of.
    """
    name, count = request["profile"], request["count"]
    instances = node.get("migInstances")
    if instances is None:
        pod.setdefault("resources", {})[MIG_RESOURCE_PREFIX + name] = count
        return
    table: MigTable | None = table_for(node.get("gpuModel"))
    assert table is not None
    profile = table.profile(name)
    held = {(m["gpu"], m["start"]) for other in node.get("pods", ()) for m in other.get("mig", ())}
    free = [m for m in instances if table.profile(m["profile"]) is profile and (m["gpu"], m["start"]) not in held]
    if profile is None or len(free) < count:
        have = len([m for m in instances if profile is not None and table.profile(m["profile"]) is profile])
        doc.fail(path, f"the pod holds {count} {MIG_RESOURCE_PREFIX}{name} on node {node['name']!r}, which has "
                       f"{have} such instance(s), {len(free)} not held by pods listed before it")
    named = _named_instances(annotation, free, count) if annotation is not None else None
    if annotation is not None and named is None and notes is not None:
        notes.append(doc.note((*path, "metadata", "annotations", MIG_ANNOTATION),
                              f"{annotation!r} does not name {count} free {name} instance(s) of node "
                              f"{node['name']!r}; the pod holds the first free ones"))
    pod["mig"] = [dict(m) for m in (named or free[:count])]


def _named_instances(annotation: str, free: list[dict[str, Any]], count: int) -> list[dict[str, Any]] | None:
    """The instances of ``free`` that a ``placer.io/mig`` annotation names, when it names
    ``count`` of them and nothing else; else None."""
    by_place = {(m["gpu"], m["start"]): m for m in free}
    named = []
    for item in annotation.split(","):
        gpu, _, rest = item.strip().partition("/")
        profile, _, start = rest.partition("/")
        start = start.rstrip("+")
        if not (gpu.isdigit() and start.isdigit()):
            return None
        found = by_place.get((int(gpu), int(start)))
        if found is None or found["profile"] != profile or found in named:
            return None
        named.append(found)
    return named if len(named) == count else None


def _gpu_count_label(doc: Document, path: tuple[Any, ...], labels: Mapping[str, str]) -> int | None:
    text = labels.get(GPU_COUNT_LABEL)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 4:
        doc.fail((*path, "metadata", "labels", GPU_COUNT_LABEL), f"expected a GPU count, got {text!r}")
    return int(text)


def _counted(wanted: Mapping[Any, int]) -> str:
    return ", ".join(f"{n} x {p.name}" for p, n in wanted.items())
