"""Who holds what in a kernel session: binding, releasing, evicting and restoring pods.

:class:`Holdings` is the ledger behind :class:`~placer.kernel.KernelSession`'s take, hold,
bind, release, evict and restore: it applies each change to the kernel's free arrays (whole
GPUs, shares, ``gpuSlots`` slots, MIG instances, extended resources) and files which pod
holds what, so that a pod can be given back, evicted and put back exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from placer.exceptions import InvalidInputError
from placer.kernel import pack
from placer.kernel._core import Kernel
from placer.kernel.free import FreeState, extended_free, node_free
from placer.kernel.mig import MigState
from placer.kernel.pack import PackedCluster, indices_to_mask, mask_to_indices
from placer.kernel.relations import Occupants
from placer.model import EMPTY, ClusterSnapshot, MigInstance, MigUse, PodRequest, RunningPod, reasons
from placer.model.fit import short_of

__all__ = ["Holdings", "Evicted", "slot_counts"]


@dataclass(frozen=True)
class Evicted:
    """A pod :meth:`KernelSession.evict` released: where it ran and what it held."""

    name: str
    node: int
    what: Any  # its RunningPod record, or (request, GPU mask) for a pod bound here
    mig: tuple[MigUse, ...] = ()
    slots: tuple[int, ...] = ()


class Holdings:
    """The pods that hold resources in one session, and every change of what they hold.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        The cluster ``packed`` was packed from.
    packed : PackedCluster
        Its packed arrays; the running pods of the snapshot hold their resources already.
    kernel : Kernel
        The kernel over ``packed``'s arrays.
    mig : MigState
        The cluster's MIG instances.
    free : FreeState
        Read-only views of ``packed``'s free arrays.
    occupants : Occupants
        The pods on the nodes for the inter-pod rules, kept current here.

    Attributes
    ----------
    version : int
        Counts changes of who holds what (a cache key for views of it).
    """

    def __init__(
        self, snapshot: ClusterSnapshot, packed: PackedCluster, kernel: Kernel, mig: MigState, free: FreeState,
        occupants: Occupants,
    ) -> None:
        self._snapshot = snapshot
        self._packed = packed
        self._kernel = kernel
        self._mig = mig
        self._free = free
        self.occupants = occupants
        # pod name -> (node, what it holds): a running pod's record, or (request, GPU mask);
        # read through held(), which files the batches of hold_all() first
        self._held: dict[str, tuple[int, Any]] = packed.holdings
        self._unheld: list[list[tuple[PodRequest, int, int]]] = []  # batches held, not filed yet
        # pod name -> the GPU of each of its slots (ascending), for pods of gpuSlots bound here
        self._slot_lists: dict[str, tuple[int, ...]] = {}
        self.version = 0

    # ------------------------------------------------------------------ taking

    def take(self, pod: PodRequest, node: int, mask: int) -> None:
        """Bind ``pod`` on ``node`` with GPU ``mask`` (whole GPUs, or the shared GPU); no checks.
        A pod of ``gpuSlots`` takes one slot on each GPU of ``mask`` (:meth:`take_slots`
        places slots that stack)."""
        if pod.gpu_slots:
            self.take_slots(pod, node, mask_to_indices(mask))
            return
        self._apply(pod, node, mask, 1)

    def give_back(self, pod: PodRequest, node: int, mask: int) -> None:
        """Undo :meth:`take`."""
        self._apply(pod, node, mask, -1)

    def give_back_all(self, placed: Sequence[tuple[PodRequest, int, int]]) -> None:
        """Undo :meth:`take` of each ``(pod, node, mask)`` of ``placed``, last first."""
        for pod, node, mask in reversed(placed):
            self._apply(pod, node, mask, -1)

    def take_mig(self, pod: PodRequest, node: int, uses: Sequence[MigUse]) -> None:
        """Bind a MIG pod on ``node`` with these instances; no checks."""
        self._apply(pod, node, 0, 1)
        self._mig.take(node, uses, pod.name)

    def take_slots(self, pod: PodRequest, node: int, slots: Sequence[int]) -> int:
        """Bind a pod of ``gpuSlots`` on a sharing node, slot ``j`` on GPU ``slots[j]``; no
        checks. Returns the mask of its GPUs (what :meth:`give_back` and :meth:`hold` take)."""
        self._slot_lists[pod.name] = tuple(sorted(slots))
        mask = indices_to_mask(slots)
        self._apply(pod, node, mask, 1)
        return mask

    def slot_list(self, name: str) -> tuple[int, ...]:
        """The GPU of each slot a bound pod of ``gpuSlots`` holds, ascending (a GPU repeats
        when the pod's slots stack on it)."""
        return self._slot_lists[name]

    def _apply(self, pod: PodRequest, node: int, mask: int, sign: int) -> None:
        if sign > 0:
            self.occupants.add(node, pod)
        else:
            self.occupants.remove(pod.name)
        if sign < 0 and pod.mig is not None:
            self._mig.give_back(pod.name)
        if pod.resources:
            self._packed.use_resources(node, pod.resources, sign)
        if pod.gpu_slots:
            slots = self._slot_lists[pod.name] if sign > 0 else self._slot_lists.pop(pod.name)
            self._apply_slots(node, slot_counts(slots), pod.gpu_memory_mib, sign)
            self._kernel.bind(node, 0, 0, pod.cpu_milli, pod.memory_mib, 0, sign, 1, False)
            return
        self._kernel.bind(node, pod.gpu_milli, pod.gpu_memory_mib, pod.cpu_milli, pod.memory_mib, mask, sign, 1, pod.shared)

    def _apply_slots(self, node: int, counts: Mapping[int, int], gpu_memory_mib: int, sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) slots per GPU on a sharing node, with
        ``gpu_memory_mib`` on each GPU (once per GPU, however many slots it holds there)."""
        slot = int(self._packed.slot_milli[node])
        for gpu, count in counts.items():
            self._kernel.bind(node, count * slot, gpu_memory_mib, 0, 0, 1 << gpu, sign, 0, True)

    def _apply_running(self, node: int, what: RunningPod, sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) what a running pod's record holds, MIG aside;
        a GPU that turned unhealthy under it stays without anything free either way."""
        unhealthy = self._snapshot.nodes[node].unhealthy_gpus
        if sign > 0:
            self.occupants.add(node, what)
        else:
            self.occupants.remove(what.name)
        self._packed.use_resources(node, what.resources, sign)
        healthy = [gpu for gpu in what.gpus if gpu not in unhealthy]
        self._kernel.bind(node, 1000, 0, what.cpu_milli, what.memory_mib, indices_to_mask(healthy), sign, 1, False)
        for gpu, milli in what.gpu_shares.items():
            if gpu not in unhealthy:
                self._kernel.bind(node, milli, what.gpu_memory_mib.get(gpu, 0), 0, 0, 1 << gpu, sign, 0, True)
        slot = int(self._packed.slot_milli[node])
        for gpu, count in what.gpu_slots.items():
            if gpu not in unhealthy:
                self._kernel.bind(node, count * slot, what.gpu_memory_mib.get(gpu, 0), 0, 0, 1 << gpu, sign, 0, True)

    # ------------------------------------------------------------------ holding

    def hold(self, pod: PodRequest, node: int, mask: int) -> None:
        """Record that ``pod`` (already taken) now holds ``mask`` on ``node``."""
        self.held()[pod.name] = (node, (pod, mask))
        self.version += 1

    def hold_all(self, placed: Iterable[tuple[PodRequest, int, int]]) -> None:
        """:meth:`hold` each (pod, node, GPU mask).

        The batch is filed by pod name when the holdings are next read: a cluster placed
        once and dropped (:func:`placer.place`) never files it.
        """
        self._unheld.append(placed if isinstance(placed, list) else list(placed))
        self.version += 1

    def held(self) -> dict[str, tuple[int, Any]]:
        """Pod name -> (node, what it holds: a running pod's record, or (request, GPU
        mask)), the batches of :meth:`hold_all` filed."""
        if self._unheld:
            for placed in self._unheld:
                pack.hold_placed(self._held, placed)
            self._unheld.clear()
        return self._held

    def first_held(self, pods: Sequence[PodRequest]) -> int:
        """The position of the first of ``pods`` that is bound or running now, -1 for none."""
        return pack.first_held(self.held(), pods)

    def held_among(self, names: Iterable[str]) -> set[str]:
        """Which of ``names`` are pods that are bound or running now."""
        return self.held().keys() & set(names)

    def holds(self, name: str) -> bool:
        """Whether a pod of this name is bound or running."""
        return name in self.held()

    # ------------------------------------------------------------------ binding

    def misfit(self, pod: PodRequest, node: int, gpus: Sequence[int], mig: Sequence[MigUse] = ()) -> str:
        """Why ``pod`` cannot hold exactly ``gpus`` and the MIG instances ``mig`` on ``node``
        now ("" when it can)."""
        free = node_free(self._packed, self._snapshot, node)
        if free.pods is not None and free.pods < 1:
            return "no pod slot left"
        if free.cpu_milli is not None and short_of(free.cpu_milli, pod.cpu_milli):
            return reasons.RESOURCE_REASONS[0]
        if free.memory_mib is not None and short_of(free.memory_mib, pod.memory_mib):
            return reasons.RESOURCE_REASONS[1]
        for name, count in pod.resources.items():
            if extended_free(self._packed, name, node) < count:
                return reasons.insufficient(name)
        holders = [name for name in self.occupants.port_holders_on(node, pod.host_ports) if name != pod.name]
        if holders:
            return f"{reasons.PORTS} (held by {', '.join(holders)})"
        problem = self._mig.misfit(node, mig, pod.mig)
        if problem:
            return problem
        if pod.gpu_slots:
            return self._slot_misfit(pod, node, gpus)
        if len(gpus) != pod.gpus or any(not 0 <= g < len(free.gpu_milli) for g in gpus) or len(set(gpus)) != len(gpus):
            return f"needs {pod.gpus} GPU index(es) on the node, got {list(gpus)}"
        for g in gpus:
            if pod.shared:
                mib = free.gpu_memory_mib[g]
                if free.gpu_milli[g] < pod.gpu_milli or (mib is not None and mib < pod.gpu_memory_mib):
                    return f"GPU {g} lacks the share"
            elif free.gpu_milli[g] != 1000:
                return f"GPU {g} is not free"
        return ""

    def _slot_misfit(self, pod: PodRequest, node: int, slots: Sequence[int]) -> str:
        """Why a pod of ``gpuSlots`` cannot hold slot j on GPU ``slots[j]`` ("" when it can)."""
        if not self._free.slot_replicas[node]:
            return "the node does not share its GPUs (no gpuSharing)"
        if len(slots) != pod.gpu_slots:
            return f"needs {pod.gpu_slots} slot(s), got {len(slots)}"
        if self._free.slot_mps[node] and len(slots) > 1:
            return "an MPS-shared node gives one slot per pod"
        free_slots = self._free.gpu_slots_free(node)
        mib = node_free(self._packed, self._snapshot, node).gpu_memory_mib
        for gpu, count in slot_counts(slots).items():
            if not 0 <= gpu < len(free_slots):
                return f"GPU index {gpu} out of range"
            if free_slots[gpu] < count:
                return f"GPU {gpu} has {int(free_slots[gpu])} free slot(s), {count} needed"
            if mib[gpu] is not None and mib[gpu] < pod.gpu_memory_mib:
                return f"GPU {gpu} lacks {pod.gpu_memory_mib} MiB of GPU memory"
        return ""

    def bind_all(
        self, items: Sequence[tuple[PodRequest, int, Sequence[int], Sequence[MigUse]]]
    ) -> tuple[str, str] | None:
        """Take and hold each (pod, node, GPU indices, MIG instances), all or nothing;
        None, or (pod name, why) for the first that did not fit (see
        :meth:`KernelSession.bind_all`)."""
        done: list[tuple[PodRequest, int, int]] = []
        for pod, node, gpus, mig in items:
            problem = self.misfit(pod, node, gpus, mig)
            if problem:
                for p, n, m in reversed(done):
                    self.give_back(p, n, m)
                return pod.name, f"does not fit on {self._packed.node_names[node]}: {problem}"
            if pod.mig is not None:
                mask = 0
                self.take_mig(pod, node, mig)
            elif pod.gpu_slots:
                mask = self.take_slots(pod, node, gpus)
            else:
                mask = indices_to_mask(gpus)
                self.take(pod, node, mask)
            done.append((pod, node, mask))
        for pod, node, mask in done:
            self.hold(pod, node, mask)
        return None

    # ------------------------------------------------------------------ releasing

    def release(self, name: str) -> None:
        """Give back everything a bound or running pod holds."""
        found = self.held().pop(name, None)
        self.version += 1
        if found is None:
            raise InvalidInputError(name, "no bound or running pod of this name")
        node, what = found
        if isinstance(what, RunningPod):
            self._mig.give_back(name)
            self._apply_running(node, what, -1)
        else:
            pod, mask = what
            self.give_back(pod, node, mask)

    def evict(self, name: str) -> Evicted:
        """Release a bound or running pod and return what :meth:`restore` needs to put it
        back exactly (its GPUs, shares, slots and MIG instances)."""
        found = self.held().get(name)
        if found is None:
            raise InvalidInputError(name, "no bound or running pod of this name")
        node, what = found
        uses = self._mig.uses_of(name)
        slots = self._slot_lists.get(name, ())
        self.release(name)
        return Evicted(name, node, what, uses, slots)

    def restore(self, evicted: Evicted) -> None:
        """Undo :meth:`evict`: the pod holds again what it held."""
        node, what = evicted.node, evicted.what
        if isinstance(what, RunningPod):
            self._apply_running(node, what, 1)
            self._mig.take(node, evicted.mig, evicted.name)
            self.held()[evicted.name] = (node, what)
            self.version += 1
            return
        pod, mask = what
        if pod.mig is not None:
            self.take_mig(pod, node, evicted.mig)
        elif pod.gpu_slots:
            self.take_slots(pod, node, evicted.slots)
        else:
            self.take(pod, node, mask)
        self.hold(pod, node, mask)

    # ------------------------------------------------------------------ records

    def holding(self, name: str) -> tuple[int, RunningPod] | None:
        """(node, record) of the pod of this name when it holds resources now, as
        :meth:`running` gives it; None when it holds nothing."""
        found = self.held().get(name)
        return None if found is None else (found[0], self._as_record(found[1]))

    def running(self) -> list[tuple[int, RunningPod]]:
        """(node, record) of every pod that holds resources now, bound ones included."""
        return [(node, self._as_record(what)) for node, what in self.held().values()]

    def _as_record(self, what: RunningPod | tuple[PodRequest, int]) -> RunningPod:
        if isinstance(what, RunningPod):
            return what
        pod, mask = what
        if pod.gpu_slots:
            return _slot_record(pod, self._slot_lists[pod.name])
        mig = tuple(MigInstance(gpu=u.gpu, profile=u.profile, start=u.start) for u in self._mig.uses_of(pod.name))
        return _record(pod, mask, mig)


def slot_counts(slots: Sequence[int]) -> dict[int, int]:
    """Slots per GPU of a slot list (the GPU of each slot), by ascending GPU index."""
    counts: dict[int, int] = {}
    for gpu in sorted(slots):
        counts[gpu] = counts.get(gpu, 0) + 1
    return counts
def _slot_record(pod: PodRequest, slots: Sequence[int]) -> RunningPod:
    """What a bound pod of ``gpuSlots`` holds, as a snapshot's running pod."""
    counts = slot_counts(slots)
    return RunningPod(
        name=pod.name,
        gpu_slots=counts,
        gpu_memory_mib={gpu: pod.gpu_memory_mib for gpu in counts} if pod.gpu_memory_mib else EMPTY,
        cpu_milli=pod.cpu_milli,
        memory_mib=pod.memory_mib,
        priority=pod.priority,
        resources=pod.resources,
        labels=pod.labels,
        affinity=pod.affinity,
        host_ports=pod.host_ports,
    )


def _record(pod: PodRequest, mask: int, mig: tuple[MigInstance, ...] = ()) -> RunningPod:
    """What a bound pod holds, as a snapshot's running pod (with the labels and affinity
    the inter-pod rules read)."""
    if mig:
        return RunningPod(
            name=pod.name, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, priority=pod.priority,
            resources=pod.resources, mig=mig, labels=pod.labels, affinity=pod.affinity,
            host_ports=pod.host_ports,
        )
    gpus = mask_to_indices(mask)
    if pod.shared:
        gpu = gpus[0]
        return RunningPod(
            name=pod.name,
            gpu_shares={gpu: pod.gpu_milli},
            gpu_memory_mib={gpu: pod.gpu_memory_mib} if pod.gpu_memory_mib else EMPTY,
            cpu_milli=pod.cpu_milli,
            memory_mib=pod.memory_mib,
            priority=pod.priority,
            resources=pod.resources,
            labels=pod.labels,
            affinity=pod.affinity,
            host_ports=pod.host_ports,
        )
    return RunningPod(
        name=pod.name, gpus=gpus, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, priority=pod.priority,
        resources=pod.resources,
        labels=pod.labels,
        affinity=pod.affinity,
        host_ports=pod.host_ports,
    )
