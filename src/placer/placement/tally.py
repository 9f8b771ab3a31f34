"""What one placement call has decided so far, and the assignments it writes.

Every step of a call (:mod:`placer.placement.run`, :mod:`placer.placement.preempting`,
:mod:`placer.placement.defragment`) adds to one :class:`Tally`: the pods placed (held in the
kernel session while the call runs), their assignments, the pods that did not fit, and what
preemption did. :func:`assignment_of` writes a pod's assignment from the kernel's answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from placer.kernel import KernelSession, Run
from placer.kernel.pack import assignment, mask_to_indices, run_assignments
from placer.kernel.holdings import Evicted, slot_counts
from placer.model import Assignment, GangResult, Move, PlacementResult, PodRequest, Preemption, RoomMade, Unschedulable
from placer.placement import gangs
from placer.placement.gangs import Outcome

__all__ = ["Placed", "Tally", "assignment_of"]

Placed = tuple[PodRequest, int, int]
"""A pod placed: (pod, node index, GPU mask), what the kernel session takes and gives back."""


def assignment_of(session: KernelSession, pod: PodRequest, node: int, mask: int, nic_mask: int) -> Assignment:
    """The assignment of ``pod`` placed on ``node`` with GPU ``mask`` and NIC ``nic_mask``."""
    name = session.node_names[node]
    if pod.gpu_slots:
        counts = slot_counts(session.slot_list(pod.name))
        return Assignment(pod.name, name, tuple(counts), None, pod.gang, gpu_slots=counts)
    if not nic_mask and pod.mig is None:  # the common case: no NIC or MIG lookups
        return assignment(pod, name, mask)
    share = pod.gpu_milli if pod.gpus == 1 and pod.gpu_milli < 1000 else None
    return Assignment(
        pod.name,
        name,
        mask_to_indices(mask),
        share,
        pod.gang,
        session.nic_names(node, nic_mask) if nic_mask else (),
        session.mig_uses(pod.name) if pod.mig is not None else (),
    )


@dataclass
class Tally:
    """The decisions of one call, in order.

    Attributes
    ----------
    placed : list of (PodRequest, int, int)
        Each pod placed, its node and GPU mask, as the session holds it.
    assignments : list of Assignment
        The assignment of each pod of :attr:`placed`, in the same order.
    unschedulable, gang_results, preempted, moves, rooms : lists
        What the result lists (``preempted``: its ``preemptions``).
    evicted : list of Evicted
        The victims preemption evicted, in order (restored when the call keeps nothing).
    """

    placed: list[Placed] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    unschedulable: list[Unschedulable] = field(default_factory=list)
    gang_results: list[GangResult] = field(default_factory=list)
    preempted: list[Preemption] = field(default_factory=list)
    evicted: list[Evicted] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    rooms: list[RoomMade] = field(default_factory=list)

    def add(self, session: KernelSession, pod: PodRequest, node: int, mask: int, nic_mask: int = 0) -> Assignment:
        """Note ``pod`` placed on ``node``; returns its assignment (the last of :attr:`assignments`)."""
        self.placed.append((pod, node, mask))
        made = assignment_of(session, pod, node, mask, nic_mask)
        self.assignments.append(made)
        return made

    def add_outcome(self, session: KernelSession, outcome: Sequence[Outcome]) -> None:
        """Note each pod of a gang step's outcome, placed or not."""
        for pod, node, mask, reason, nic_mask in outcome:
            if node >= 0:
                self.add(session, pod, node, mask, nic_mask)
            else:
                self.unschedulable.append(Unschedulable(pod.name, reason))

    def add_run(self, session: KernelSession, pods: Sequence[PodRequest], run: Run) -> None:
        """Note each pod of a kernel run, placed or not (with its reason)."""
        failed: list[int] = []
        if any(run.nics):
            for j, (pod, node, mask, nic_mask) in enumerate(zip(pods, run.nodes, run.masks, run.nics)):
                if node < 0:
                    failed.append(j)
                else:
                    self.add(session, pod, node, mask, nic_mask)
        else:  # the common run: no NIC lookups (its pods hold no MIG instances or slots)
            done, made, failed = run_assignments(pods, run.nodes, run.masks, session.node_names)
            self.placed.extend(done)
            self.assignments.extend(made)
        if failed:
            self.unschedulable.extend(gangs.run_failures(session, pods, run, failed))

    def result(self) -> PlacementResult:
        """The PlacementResult of the call."""
        return PlacementResult(
            tuple(self.assignments), tuple(self.unschedulable), tuple(self.gang_results), tuple(self.preempted),
            tuple(self.moves), tuple(self.rooms),
        )
