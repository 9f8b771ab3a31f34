"""What is free on a packed cluster, as the rest of placer reads it.

:class:`FreeState` holds read-only live views of the kernel's free arrays (the session's
:attr:`~placer.kernel.KernelSession.free`); :class:`NodeFree` is one node's free capacity
as numbers, ``None`` where a capacity is not tracked.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.kernel import pack
from placer.kernel.pack import PackedCluster
from placer.model import ClusterSnapshot

__all__ = ["NodeFree", "FreeState", "free_state", "node_free", "extended_free"]


@dataclass(frozen=True, slots=True)
class NodeFree:
    """What is free on one node now; ``None`` where the capacity is not tracked."""

    cpu_milli: int | None
    memory_mib: int | None
    pods: int | None
    gpu_milli: tuple[int, ...]
    gpu_memory_mib: tuple[int | None, ...]


@dataclass(frozen=True)
class FreeState:
    """What is free on every node, as read-only arrays indexed by node (and GPU).

    An untracked capacity reads as a number at least :attr:`untracked_quantity` (CPU,
    memory) or :attr:`untracked_count` (pod slots, GPU memory): larger than any request.
    """

    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    pod_slots: np.ndarray
    gpu_milli: np.ndarray  # [node, gpu]
    gpu_memory_mib: np.ndarray  # [node, gpu]
    whole_gpus: np.ndarray  # fully free healthy GPUs per node
    free_gpu_milli: np.ndarray  # free milli summed over a node's GPUs
    gpu_count: np.ndarray
    gpu_memory_capacity: np.ndarray  # per node, one GPU's memory
    model_id: np.ndarray  # the node's GPU model (0: no GPU), an index into model_names
    cpu_tracked: np.ndarray  # bool
    untracked_quantity: int
    untracked_count: int
    slot_replicas: np.ndarray  # slots per GPU of a node that shares its GPUs (0: it does not)
    slot_milli: np.ndarray  # the gpuMilli one slot holds (0: the node does not share)
    slot_mps: np.ndarray  # bool: the node shares by MPS (one slot per pod)

    def gpu_slots_free(self, node: int) -> np.ndarray:
        """Free slots per GPU of ``node`` (zeros when it does not share its GPUs).

        A GPU holding ``j`` slots has ``1000 - j * slot_milli`` milli free, so it has
        ``replicas - j`` slots free; an unhealthy GPU (0 milli free) has none.
        """
        replicas = int(self.slot_replicas[node])
        g = int(self.gpu_count[node])
        if not replicas:
            return np.zeros(g, dtype=np.int64)
        held = (1000 - self.gpu_milli[node, :g].astype(np.int64)) // int(self.slot_milli[node])
        return np.maximum(replicas - held, 0)


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


def free_state(packed: PackedCluster) -> FreeState:
    """Read-only live views of what is free in ``packed``."""
    a = packed.arrays
    return FreeState(
        cpu_milli=_read_only(a["cpu_free"]),
        memory_mib=_read_only(a["mem_free"]),
        pod_slots=_read_only(a["pods_free"]),
        gpu_milli=_read_only(a["gpu_free_milli"]),
        gpu_memory_mib=_read_only(a["gpu_free_mem"]),
        whole_gpus=_read_only(a["free_count"]),
        free_gpu_milli=_read_only(a["free_milli_sum"]),
        gpu_count=_read_only(a["gpu_count"]),
        gpu_memory_capacity=_read_only(a["gpu_mem_cap"]),
        model_id=_read_only(a["model_id"]),
        cpu_tracked=_read_only(a["cpu_tracked"].view(bool)),
        untracked_quantity=int(pack.UNTRACKED_BIG) // 2,
        untracked_count=int(pack.UNTRACKED_INT) // 2,
        slot_replicas=_read_only(packed.slot_replicas),
        slot_milli=_read_only(packed.slot_milli),
        slot_mps=_read_only(packed.slot_mps),
    )


def node_free(packed: PackedCluster, snapshot: ClusterSnapshot, node: int) -> NodeFree:
    """What is free on node ``node`` of ``packed`` (packed from ``snapshot``) now."""
    a = packed.arrays
    hw = snapshot.nodes[node].hardware
    g = int(a["gpu_count"][node])
    tracked_mem = hw.gpu_memory_mib is not None
    unhealthy = set(snapshot.nodes[node].unhealthy_gpus)
    return NodeFree(
        cpu_milli=int(a["cpu_free"][node]) if hw.cpu_milli is not None else None,
        memory_mib=int(a["mem_free"][node]) if hw.memory_mib is not None else None,
        pods=int(a["pods_free"][node]) if hw.max_pods is not None else None,
        gpu_milli=tuple(a["gpu_free_milli"][node, :g].tolist()),
        gpu_memory_mib=tuple(
            (0 if k in unhealthy else int(a["gpu_free_mem"][node, k])) if tracked_mem else None for k in range(g)
        ),
    )


def extended_free(packed: PackedCluster, name: str, node: int) -> int:
    """Free count of the extended resource ``name`` on ``node`` of ``packed`` (0 where not
    offered)."""
    free = packed.extended_free.get(name)
    return 0 if free is None else int(free[node])
