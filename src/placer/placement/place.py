"""One-shot placement: a snapshot and a request in, a PlacementResult out."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Union

from placer.placement.cluster import Cluster
from placer.model import ClusterSnapshot, PlacementRequest, PlacementResult
from placer.policies import Policy
from placer.schema.files import gc_paused

__all__ = ["place", "preempt", "defrag"]

SnapshotLike = Union[ClusterSnapshot, Mapping[str, Any], str, Path]
RequestLike = Union[PlacementRequest, Mapping[str, Any], str, Path]


def place(
    snapshot: SnapshotLike,
    request: RequestLike,
    *,
    policy: str | Policy | None = None,
    seed: int | None = None,
    preemption: str | None = None,
) -> PlacementResult:
    """Place a request's pods on a snapshot, in order.

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
        The cluster as it is now.
    request : PlacementRequest, dict or path
        What to place.
    policy : str or Policy, optional
        Override the request's ``policy``: a name in :data:`placer.policies.REGISTRY`
        (checked here), or a record of it.
    seed : int, optional
        Override the request's ``seed``.
    preemption : str, optional
        Override the request's ``preemption`` mode (:data:`placer.model.PREEMPTION_MODES`).

    Returns
    -------
    PlacementResult
        Every pod either assigned (node and GPU indices) or unschedulable with a reason.
    """
    with gc_paused():  # everything built here is acyclic: collections would only cost time
        return Cluster(snapshot).schedule(request, policy=policy, seed=seed, preemption=preemption)


def preempt(
    snapshot: SnapshotLike,
    request: RequestLike,
    *,
    policy: str | Policy | None = None,
    seed: int | None = None,
) -> PlacementResult:
    """:func:`place` with preemption on: a pod that does not fit evicts lower-priority pods
    when that makes it fit (the request's ``preemption`` mode, ``auto`` when it says
    ``none``). The result lists each ``preemptions`` entry, and the preemptor's assignment
    is ``nominated``.
    """
    with gc_paused():
        return Cluster(snapshot).preempt(request, policy=policy, seed=seed)


def defrag(
    snapshot: SnapshotLike,
    request: RequestLike,
    *,
    max_moves: int | None = None,
    policy: str | Policy | None = None,
    seed: int | None = None,
) -> PlacementResult:
    """:func:`place`, moving ``movable`` running pods where that makes a pod fit: the
    fewest moves, then the least GPU milli moved (:meth:`Cluster.defrag`). The result lists
    the ``moves`` in the order they are made and a ``rooms`` entry per pod that needed
    them; such a pod's assignment is ``nominated``. ``max_moves`` bounds the moves of the
    whole request (default: no limit).
    """
    with gc_paused():
        return Cluster(snapshot).defrag(request, max_moves=max_moves, policy=policy, seed=seed)
