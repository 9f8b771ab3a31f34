"""Node labels the importers write and ``report`` reads: the labels that say a node has GPUs
(shared by the Kubernetes importer and ``report``), and the Slurm state and reason.

:func:`gpu_node_label` tells a GPU node by its labels alone, so that a node whose GPU
capacity is missing (a ``kubectl`` copy cut before ``status.capacity``, a device plugin
not running) is noticed rather than taken for a node without GPUs.
"""
from __future__ import annotations

from typing import Mapping

__all__ = ["GPU_NODE_LABELS", "gpu_node_label", "SLURM_STATE_LABEL", "SLURM_REASON_LABEL"]

SLURM_STATE_LABEL = "slurm.state"
"""The label ``placer import slurm`` gives a node's ``State=`` (as written)."""

SLURM_REASON_LABEL = "slurm.reason"
"""The label ``placer import slurm`` gives a node's ``Reason=`` (why it was drained or
set down, as written)."""

GPU_NODE_LABELS = (
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "cloud.google.com/gke-accelerator",
    "feature.node.kubernetes.io/pci-10de.present",
)
"""Labels that say a node has NVIDIA GPUs (GPU feature discovery, the GPU operator, GKE,
node feature discovery's PCI vendor 10de), in the order :func:`gpu_node_label` tries them."""


def gpu_node_label(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """The first label of :data:`GPU_NODE_LABELS` that marks ``labels`` as a GPU node's.

    A count label must be a whole number above 0, a ``*.present`` label ``"true"``, any
    other a non-empty value.

    Parameters
    ----------
    labels : Mapping of str to str
        A node's labels.

    Returns
    -------
    (str, str) or None
        The label and its value; ``None`` when no label says the node has GPUs.
    """
    for key in GPU_NODE_LABELS:
        value = labels.get(key)
        if not value:
            continue
        if key.endswith(".count"):
            if value.isascii() and value.isdigit() and int(value) > 0:
                return key, value
        elif key.endswith(".present"):
            if value.lower() == "true":
                return key, value
        else:
            return key, value
    return None
