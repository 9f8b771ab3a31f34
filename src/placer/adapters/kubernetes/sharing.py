"""The NVIDIA device plugin's GPU sharing (time-slicing, MPS) as GPU feature discovery labels it.

With a sharing config the device plugin advertises every physical GPU ``replicas`` times:
a node of 8 GPUs × 4 replicas has ``nvidia.com/gpu: 32``. GPU feature discovery says so in
labels: ``nvidia.com/gpu.replicas`` (the slots per GPU), ``nvidia.com/gpu.sharing-strategy``
(``time-slicing``, ``mps`` or ``none``; older releases leave it out, and knew only
time-slicing), ``nvidia.com/gpu.count`` (the physical GPUs) and a ``-SHARED`` suffix on
``nvidia.com/gpu.product``. :func:`gpu_sharing` reads them into the placer/v1 node fields
(``gpus`` physical, ``gpuSharing``), :func:`slot_holder` turns a running pod of such a
node into a holder of slots, and :func:`as_slots` a pending pod's ``nvidia.com/gpu`` into
slots, as kube-scheduler counts it on such a node.
"""
from __future__ import annotations

from typing import Any, Mapping

import msgspec

from placer.adapters.kubernetes.documents import Document, show
from placer.model import PodRequest

__all__ = [
    "REPLICAS_LABEL",
    "STRATEGY_LABEL",
    "COUNT_LABEL",
    "SHARED_SUFFIX",
    "model_name",
    "gpu_sharing",
    "slot_holder",
    "as_slots",
]

REPLICAS_LABEL = "nvidia.com/gpu.replicas"
"""Slots per physical GPU (1: the GPUs are not shared)."""
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
"""``time-slicing``, ``mps`` or ``none``."""
COUNT_LABEL = "nvidia.com/gpu.count"
"""Physical GPUs of the node."""
SHARED_SUFFIX = "-SHARED"
"""What GPU feature discovery appends to ``nvidia.com/gpu.product`` on a sharing node."""

_STRATEGIES = ("time-slicing", "mps")


def model_name(product: str) -> str:
    """The GPU model of a product label, without the ``-SHARED`` suffix (a shared H100 is
    an H100: ``gpuModels`` name the one model)."""
    return product[: -len(SHARED_SUFFIX)] if product.endswith(SHARED_SUFFIX) else product


def _label_integer(doc: Document, path: tuple[Any, ...], labels: Mapping[str, str], key: str) -> int | None:
    value = labels.get(key)
    if value is None:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        doc.fail((*path, "metadata", "labels", key), f"expected an integer, got {show(value)}")
    return int(value)


def gpu_sharing(
    doc: Document, path: tuple[Any, ...], labels: Mapping[str, str], slots: int, slots_at: tuple[Any, ...]
) -> tuple[int, dict[str, Any]] | None:
    """The physical GPUs and ``gpuSharing`` of a node whose labels say it shares its GPUs.

    Parameters
    ----------
    doc : Document
        The node's document, for errors.
    path : tuple
        The Node object's place in ``doc``.
    labels : Mapping of str to str
        The node's labels.
    slots : int
        Its ``nvidia.com/gpu`` (allocatable, else capacity): slots when it shares.
    slots_at : tuple
        Where ``slots`` was read, for errors.

    Returns
    -------
    (int, dict) or None
        ``(gpus, {"strategy": ..., "replicas": R})``, or None when the node does not share
        (no ``nvidia.com/gpu.replicas`` above 1, strategy ``none`` or absent with no
        replicas). The physical GPUs are ``nvidia.com/gpu.count`` when given (slots beyond
        ``count × R`` are refused), else ``slots / R``.

    Raises
    ------
    InvalidInputError
        At the label or the resource: a label that is not an integer, an unknown strategy,
        a ``-SHARED`` product or a sharing strategy without ``replicas`` above 1, more
        slots than ``count × replicas``, or slots not a multiple of ``replicas`` with no
        count to go by.
    """
    lpath = (*path, "metadata", "labels")
    replicas = _label_integer(doc, path, labels, REPLICAS_LABEL)
    strategy = labels.get(STRATEGY_LABEL)
    if strategy is not None and strategy not in (*_STRATEGIES, "none"):
        doc.fail((*lpath, STRATEGY_LABEL), f"expected time-slicing, mps or none, got {show(strategy)}")
    product = labels.get("nvidia.com/gpu.product", "")
    says_shared = product.endswith(SHARED_SUFFIX) or strategy in _STRATEGIES
    if replicas is None or replicas <= 1 or strategy == "none":
        if says_shared:
            doc.fail(
                (*lpath, REPLICAS_LABEL),
                f"the node is labelled as sharing its GPUs ({STRATEGY_LABEL}={strategy}, "
                f"nvidia.com/gpu.product={product}) but {REPLICAS_LABEL} is {show(labels.get(REPLICAS_LABEL))}: "
                "how many slots each GPU offers is unknown",
            )
        return None
    count = _label_integer(doc, path, labels, COUNT_LABEL)
    if count is None:
        if slots % replicas:
            doc.fail(
                slots_at,
                f"{slots} nvidia.com/gpu slots is not a multiple of {REPLICAS_LABEL}={replicas}, and no "
                f"{COUNT_LABEL} label gives the physical GPUs",
            )
        count = slots // replicas
    elif slots > count * replicas:
        doc.fail(
            slots_at,
            f"{slots} nvidia.com/gpu slots, more than {COUNT_LABEL}={count} GPUs × {REPLICAS_LABEL}={replicas}",
        )
    return count, {"strategy": strategy or "time-slicing", "replicas": replicas}


def slot_holder(pod: dict[str, Any]) -> dict[str, Any]:
    """A running pod's placer/v1 entry on a sharing node: its ``nvidia.com/gpu`` count is
    slots (``unknownGpus`` becomes ``unknownGpuSlots``; the GPU indices of annotation
    ``placer.io/gpus``, one per slot, become ``gpuSlots``)."""
    out = dict(pod)
    unknown = out.pop("unknownGpus", None)
    if unknown:
        out["unknownGpuSlots"] = unknown
    listed = out.pop("gpus", None)
    if listed:
        counts: dict[str, int] = {}
        for gpu in sorted(listed):
            counts[str(gpu)] = counts.get(str(gpu), 0) + 1
        out["gpuSlots"] = counts
    return out


def as_slots(pod: PodRequest) -> PodRequest | None:
    """A pending pod's ``nvidia.com/gpu`` as slots of a node that shares its GPUs: there
    the device plugin advertises ``replicas`` per GPU under that name, and kube-scheduler's
    ``NodeResourcesFit`` counts the pod's ``nvidia.com/gpu`` against them. None for a pod
    that asks no whole GPUs, or asks them with NICs (placer's slots take no NICs)."""
    if not pod.gpus or pod.gpu_milli < 1000 or pod.nics or pod.mig is not None or pod.gpu_slots:
        return None
    return msgspec.structs.replace(pod, gpus=0, gpu_slots=pod.gpus)
