"""GPU sharing by time-slicing and MPS: where a pod of ``gpuSlots`` goes, and how many fit.

A node whose device plugin shares its GPUs (``gpuSharing: {"strategy": ..., "replicas":
R}``) has ``gpus`` physical GPUs and offers R slots on each; Kubernetes sees ``gpus × R``
``nvidia.com/gpu``. A pod asks for slots with ``gpuSlots: k``; it goes only to such nodes,
and pods of whole GPUs or GPU shares never do. The device plugin does not promise that a
pod's slots land on distinct GPUs, so placer chooses the GPU behind each slot: distinct
GPUs where the node has enough with a free slot (and the pod's ``gpuMemoryMiB`` free), else
stacked, which the assignment's ``gpuSlots`` shows (a count above 1). Under time-slicing the
GPU memory of every pod on a GPU must fit that GPU together; under MPS each pod holds one
slot and at most ``gpuMemoryMiB // R`` of memory (the device plugin's limits).

The rules are in ``docs/placement-rules.md`` ("GPU sharing"). The free state stays in the
kernel session: this module reads it (:attr:`KernelSession.free`) and binds through
:meth:`KernelSession.take_slots`. Slot pods are few and their nodes fewer, so the choice is
made here in Python, over the sharing nodes that pass the pod's filters only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from placer.model import reasons
from placer.kernel import KernelSession
from placer.kernel.holdings import slot_counts
from placer.model import PodRequest
from placer.policies import Policy

__all__ = ["SlotPlacement", "choose_slots", "place_slot_pod", "slot_candidates", "slot_pods_fitting", "splitmix_pick"]

_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class SlotPlacement:
    """Where a pod of ``gpuSlots`` goes: a node and the GPU of each slot, ascending."""

    node: int
    slots: tuple[int, ...]

    @property
    def gpus(self) -> tuple[int, ...]:
        """The pod's physical GPUs, each once."""
        return tuple(slot_counts(self.slots))

    @property
    def stacked(self) -> bool:
        """Whether some GPU holds more than one of the pod's slots."""
        return len(self.gpus) < len(self.slots)


def choose_slots(
    free_slots: Sequence[int], free_memory: Sequence[int | None], count: int, gpu_memory_mib: int
) -> tuple[int, ...] | None:
    """The GPU of each of ``count`` slots on one node, or None when they do not fit.

    Candidates are the GPUs with a free slot and ``gpu_memory_mib`` of free GPU memory
    (``None``: memory not tracked). With at least ``count`` candidates, the slots go to
    ``count`` distinct GPUs, those with the fewest free slots first (best fit: busy GPUs
    fill up, idle ones stay whole), lowest index on ties. With fewer, every candidate
    takes one slot and each slot left goes, one at a time, to the candidate with the most
    free slots left (lowest index on ties): the slots stack as evenly as they can.

    Parameters
    ----------
    free_slots : sequence of int
        Free slots per GPU of the node.
    free_memory : sequence of int or None
        Free GPU memory per GPU, MiB.
    count : int
        Slots the pod asks for (``gpuSlots``).
    gpu_memory_mib : int
        GPU memory the pod needs on each GPU it lands on (once per GPU).

    Returns
    -------
    tuple of int or None
        The GPU index of each slot, ascending (a GPU repeats when slots stack on it).
    """
    fits = [
        g for g, f in enumerate(free_slots)
        if f > 0 and (free_memory[g] is None or free_memory[g] >= gpu_memory_mib)
    ]
    if len(fits) >= count:
        chosen = sorted(fits, key=lambda g: (free_slots[g], g))[:count]
        return tuple(sorted(chosen))
    if sum(free_slots[g] for g in fits) < count:
        return None
    left = {g: free_slots[g] - 1 for g in fits}
    chosen = list(fits)
    for _ in range(count - len(fits)):
        g = max(left, key=lambda x: (left[x], -x))
        left[g] -= 1
        chosen.append(g)
    return tuple(sorted(chosen))


def splitmix_pick(rng: np.ndarray, count: int) -> int:
    """One draw of the request's SplitMix64 stream (``rng[0]``, advanced in place),
    modulo ``count`` (``docs/placement-rules.md``, ``pick``)."""
    state = (int(rng[0]) + 0x9E3779B97F4A7C15) & _MASK64
    rng[0] = np.uint64(state)
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) % count


def _node_memory(session: KernelSession, node: int) -> list[int | None]:
    free = session.free
    g = int(free.gpu_count[node])
    if int(free.gpu_memory_capacity[node]) >= free.untracked_count:
        return [None] * g
    return [int(x) for x in free.gpu_memory_mib[node, :g]]


def _mps_memory_ok(session: KernelSession, node: int, pod: PodRequest) -> bool:
    """Under MPS a slot holds at most ``gpuMemoryMiB // replicas`` of memory."""
    free = session.free
    if not free.slot_mps[node]:
        return True
    cap = int(free.gpu_memory_capacity[node])
    return cap >= free.untracked_count or pod.gpu_memory_mib <= cap // int(free.slot_replicas[node])


def slot_candidates(session: KernelSession, pod: PodRequest) -> tuple[list[SlotPlacement], dict[str, int]]:
    """Every node that takes ``pod`` now with its slot choice, and the nodes per reason
    that do not."""
    eligible, _ = session.eligibility(pod)
    counts = session.static_reasons(pod)
    free = session.free
    fits: list[SlotPlacement] = []

    def short(reason: str) -> None:
        counts[reason] = counts.get(reason, 0) + 1

    for node in np.flatnonzero(eligible).tolist():
        ok = True
        if free.cpu_milli[node] < pod.cpu_milli:
            short(reasons.RESOURCE_REASONS[0])
            ok = False
        if free.memory_mib[node] < pod.memory_mib:
            short(reasons.RESOURCE_REASONS[1])
            ok = False
        if free.pod_slots[node] < 1:
            short(reasons.RESOURCE_REASONS[2])
            ok = False
        free_slots = free.gpu_slots_free(node).tolist()
        if sum(free_slots) < pod.gpu_slots:
            short(reasons.SLOTS_SHORT)
            continue
        slots = choose_slots(free_slots, _node_memory(session, node), pod.gpu_slots, pod.gpu_memory_mib)
        if slots is None or not _mps_memory_ok(session, node, pod):
            short(reasons.RESOURCE_REASONS[4])
            continue
        if ok:
            fits.append(SlotPlacement(node, slots))
    return fits, counts


def place_slot_pod(
    session: KernelSession, pod: PodRequest, policy: Policy, rng: np.ndarray
) -> SlotPlacement | str:
    """Choose a node and the GPU of each slot for a pod of ``gpuSlots``, and bind it.

    Among the nodes that take the pod, those where its slots land on distinct GPUs come
    first; among those, the policy decides: ``first-fit`` the lowest index, ``spread`` the
    most free slots left on the node, ``random`` the ``pick(F)``-th in index order, every
    other policy the fewest free slots left (best fit); ties go to the lowest index.

    Parameters
    ----------
    session : KernelSession
        The cluster's state; the pod is bound there (:meth:`KernelSession.take_slots`).
    pod : PodRequest
        A pod with ``gpu_slots >= 1``.
    policy : Policy
    rng : ndarray of uint64, shape (1,)
        The request's SplitMix64 state (one draw under ``random`` when a node fits).

    Returns
    -------
    SlotPlacement or str
        Where it went, or the pod's unschedulable line (kube-scheduler's wording).
    """
    fits, counts = slot_candidates(session, pod)
    turned_away = session.inter_pod_failures(pod)
    if turned_away:
        counts = dict(counts)
        for f in fits:
            why = turned_away.get(f.node)
            if why is not None:
                counts[why] = counts.get(why, 0) + 1
        fits = [f for f in fits if f.node not in turned_away]
    if not fits:
        return reasons.kube_reason(session.n_nodes, counts)
    spread = [f for f in fits if not f.stacked]
    pool = spread or fits
    if policy.name == "first-fit":
        chosen = pool[0]
    elif policy.name == "random":
        chosen = pool[splitmix_pick(rng, len(pool))]
    else:
        left = [int(session.free.gpu_slots_free(f.node).sum()) for f in pool]
        sign = -1 if policy.name == "spread" else 1
        best = min(range(len(pool)), key=lambda j: (sign * left[j], pool[j].node))
        chosen = pool[best]
    session.take_slots(pod, chosen.node, chosen.slots)
    return chosen


def slot_pods_fitting(session: KernelSession, pod: PodRequest) -> tuple[int, int]:
    """How many pods like ``pod`` (``gpuSlots``) fit now, each node counted on its own
    (slots only: CPU and memory left out), and on how many nodes.

    A node's count is how many times :func:`choose_slots` places the pod's slots,
    taking them off each time.
    """
    eligible, _ = session.eligibility(pod)
    total = nodes = 0
    for node in np.flatnonzero(eligible).tolist():
        if not _mps_memory_ok(session, node, pod):
            continue
        free_slots = session.free.gpu_slots_free(node).tolist()
        memory = _node_memory(session, node)
        fitted = 0
        while True:
            slots = choose_slots(free_slots, memory, pod.gpu_slots, pod.gpu_memory_mib)
            if slots is None:
                break
            for gpu, count in slot_counts(slots).items():
                free_slots[gpu] -= count
                if memory[gpu] is not None:
                    memory[gpu] -= pod.gpu_memory_mib
            fitted += 1
        total += fitted
        nodes += fitted > 0
    return total, nodes
