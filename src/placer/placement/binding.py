"""Making decisions real: the decisions a cluster made, and binding them.

:class:`DecisionBook` keeps, per pod name, the latest decisions of a
:class:`~placer.placement.cluster.Cluster`'s calls with the pod as each decided it;
:func:`bind` holds an assignment's resources as that decision asked, all or nothing.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.model import Assignment, MigUse, PlacementResult, PodRequest
from placer.placement.tally import Placed
from placer.schema.errors import bad

__all__ = ["KEPT_DECISIONS", "DecisionBook", "bind", "release"]

KEPT_DECISIONS = 4
"""Decisions kept per pod name for :meth:`Cluster.bind` (older ones are refused as stale)."""

_UNFILED_BATCHES = 32  # decisions kept unfiled before they are filed by pod name


class DecisionBook:
    """The decisions of a cluster's calls, by pod name, newest last."""

    def __init__(self) -> None:
        # pod name -> its latest decisions, newest last: (assignment, the pod as decided)
        self._decided: dict[str, list[tuple[Assignment, PodRequest]]] = {}
        # decisions not yet filed in _decided: a one-shot placement never needs them filed
        self._unfiled: list[tuple[Sequence[Placed], Sequence[Assignment]]] = []
        self._varied: set[str] = set()  # pods placed with different requests over time

    def remember(self, placed: Sequence[Placed], assignments: Sequence[Assignment]) -> None:
        """Keep each decision with the pod as it was decided."""
        if placed:
            self._unfiled.append((placed, assignments))
            if len(self._unfiled) > _UNFILED_BATCHES:  # a long-lived cluster: keep memory bounded
                self._file()

    def _file(self) -> None:
        for placed, assignments in self._unfiled:
            for (pod, _, _), a in zip(placed, assignments):
                kept = self._decided.setdefault(pod.name, [])
                if kept and kept[-1][1] != pod:
                    self._varied.add(pod.name)
                kept.append((a, pod))
                del kept[:-KEPT_DECISIONS]
        self._unfiled.clear()

    def decision(self, a: Assignment) -> PodRequest:
        """The pod as decided by the call that returned ``a``, or, for an assignment made
        elsewhere, the pod as every decision of it asked (refused when they differ)."""
        self._file()
        kept = self._decided.get(a.pod)
        if not kept:
            raise InvalidInputError(a.pod, "not decided by this cluster's place(); nothing to bind")
        for decided, pod in reversed(kept):
            if decided is a:
                return pod
        if a.pod not in self._varied:
            return kept[-1][1]
        raise InvalidInputError(
            a.pod,
            f"stale decision: the pod was placed with different requests, and this is not one of the "
            f"{len(kept)} latest place() decisions; bind what place() returned, or place the pod again",
        )


def _slot_list(a: Assignment) -> tuple[int, ...]:
    """The GPU of each slot of an assignment of ``gpuSlots`` (one per GPU listed when it
    gives no ``gpuSlots``)."""
    if not a.gpu_slots:
        return tuple(a.gpus)
    return tuple(gpu for gpu, count in sorted(a.gpu_slots.items()) for _ in range(count))


def _assignments(placement: PlacementResult | Assignment | Iterable[Assignment]) -> Iterable[Assignment]:
    """The assignments of what :meth:`Cluster.bind` takes, each checked to be one."""
    if isinstance(placement, PlacementResult):
        return placement.assignments
    if isinstance(placement, Assignment):
        return (placement,)
    if isinstance(placement, Iterable) and not isinstance(placement, (str, bytes, Mapping)):
        items = list(placement)
        for i, a in enumerate(items):
            if not isinstance(a, Assignment):
                raise bad(f"placement[{i}]", "an Assignment", a)
        return items
    raise bad("placement", "a PlacementResult, an Assignment or a list of Assignments", placement)


def bind(
    session: KernelSession, book: DecisionBook, placement: PlacementResult | Assignment | Iterable[Assignment]
) -> None:
    """Hold each assignment's resources on its node, all or nothing, the pod as ``book``
    says it was decided (:meth:`placer.placement.cluster.Cluster.bind`).

    Raises
    ------
    InvalidInputError
        When a pod is already bound, unknown, stale, or no longer fits; then nothing is bound.
    """
    work: list[tuple[PodRequest, int, Sequence[int], Sequence[MigUse]]] = []
    seen: set[str] = set()
    for a in _assignments(placement):
        pod = book.decision(a)
        if session.holds(a.pod) or a.pod in seen:
            raise InvalidInputError(a.pod, "pod is already bound")
        node = session.node_index.get(a.node)
        if node is None:
            raise InvalidInputError(a.pod, f"unknown node {a.node!r}")
        seen.add(a.pod)
        work.append((pod, node, _slot_list(a) if pod.gpu_slots else a.gpus, a.mig))
    problem = session.bind_all(work)
    if problem is not None:
        raise InvalidInputError(*problem)


def release(session: KernelSession, pod_name: str) -> None:
    """Give back everything a bound or running pod holds."""
    if not isinstance(pod_name, str):
        raise bad("pod_name", "a pod name", pod_name)
    session.release(pod_name)
