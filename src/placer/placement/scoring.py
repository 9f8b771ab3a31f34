"""One pod against the nodes: every node's score, or the GPUs it would get on a given node.

What a scheduler asks once another component chooses the node
(:meth:`placer.placement.cluster.Cluster.node_scores`,
:meth:`~placer.placement.cluster.Cluster.place_on`). Pods of MIG instances or ``gpuSlots``
are placed by their own searches and have neither.
"""
from __future__ import annotations

import numpy as np

from placer.exceptions import InvalidInputError
from placer.model import PlacementRequest, PlacementResult, PodRequest, Unschedulable
from placer.model.reasons import kube_reason
from placer.placement import kube_scores
from placer.placement.run import give_back
from placer.placement.state import ClusterState
from placer.placement.tally import Tally
from placer.policies import Policy

__all__ = ["single_pod", "node_scores", "place_on"]


def single_pod(request: PlacementRequest) -> PodRequest:
    """The one pod of ``request``, refused when there are more or it is placed otherwise."""
    if len(request.pods) != 1:
        raise InvalidInputError("pods", f"expected one pod, got {len(request.pods)}")
    pod = request.pods[0]
    if pod.mig is not None or pod.gpu_slots:
        raise InvalidInputError(
            "pods[0]",
            "a pod of MIG instances or gpuSlots is placed with its whole request, not scored or put on a given node",
        )
    return pod


def node_scores(state: ClusterState, request: PlacementRequest, policy: Policy) -> np.ndarray:
    """Every node's score under ``policy`` for the one pod of ``request``, now."""
    pod = single_pod(request)
    state.session.prepare(policy, request.pods, request.seed)
    if policy.kube_scoring is not None:
        return kube_scores.node_scores(state.session, pod, policy)
    return state.session.node_scores(pod, policy)


def place_on(state: ClusterState, request: PlacementRequest, node: str, policy: Policy) -> PlacementResult:
    """The GPUs (and NICs) the one pod of ``request`` would get on ``node``; the state does not change."""
    pod = single_pod(request)
    session = state.session
    index = session.node_index.get(node)
    if index is None:
        raise InvalidInputError("node", f"unknown node {node!r}")
    session.prepare(policy, request.pods, request.seed)
    got = session.place_on([pod], [index], policy, np.array([request.seed], dtype=np.uint64))
    if got is None:
        why = kube_reason(1, {session.node_reasons(pod, [index])[0]: 1})
        return PlacementResult((), (Unschedulable(pod.name, why),), (), ())
    tally = Tally()
    tally.add(session, pod, index, got[0][0], got[1][0])
    give_back(session, tally.placed)
    state.book.remember(tally.placed, tally.assignments)
    return tally.result()
