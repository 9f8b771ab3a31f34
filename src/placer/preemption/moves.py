"""Moving running pods: which may move, what a moved pod asks of its new node, and the
independent check of a list of moves (``placer defrag``, SPEC §7).

A running pod may move when it says ``movable: true`` and placer can re-create what it
holds elsewhere: it belongs to no running gang (its gang's topology is not known), holds
no MIG instance and no GPU slot, its GPUs are known, it is not terminating, and it holds
either whole GPUs or a share of one GPU. Where it goes it asks for what it holds now
(:func:`mover_request`): as many whole GPUs, or the same share and GPU memory of one GPU,
the same CPU, memory and extended resources, a GPU of the model it runs on, and it
tolerates exactly the taints of the node it runs on (what it tolerates beyond them is not
known). A running pod's ``nodeSelector`` is not in the snapshot; its ``affinity`` is, and
binds where it may go (kube's NodeAffinity filter on its required node affinity).

:func:`check_moves` re-checks a result with moves from the documents alone, one move at a
time, each as a placement of the moved pod checked by :func:`placer.check_placement` on
the cluster as the moves before it left it; then the request's assignments on the cluster
after every move. Like ``check_placement`` it shares no code with the kernel.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from placer.diagnostics.check import check_placement
from placer.model import (
    EMPTY,
    Assignment,
    ClusterSnapshot,
    Move,
    Node,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    RunningPod,
    Toleration,
    load_request,
    load_result,
    load_snapshot,
    replace,
)

__all__ = ["why_not_movable", "mover_request", "relocated", "moved_milli", "apply_moves", "check_moves"]


def why_not_movable(pod: RunningPod) -> str:
    """Why placer does not move ``pod`` ("" when it may)."""
    if not pod.movable:
        return "not movable"
    if pod.gang is not None:
        return f"runs in gang {pod.gang}"
    if pod.mig or pod.gpu_slots or pod.unknown_gpu_slots:
        return "holds MIG instances or GPU slots"
    if not pod.gpu_indices_known:
        return "its GPUs are not known"
    if pod.terminating:
        return "is terminating"
    if len(pod.gpu_shares) > 1 or (pod.gpu_shares and pod.gpus):
        return "holds shares of several GPUs"
    return ""


def mover_request(pod: RunningPod, node: Node) -> PodRequest:
    """What ``pod``, running on ``node``, asks of the node it moves to: what it holds now,
    a GPU of ``node``'s model, the tolerations of ``node``'s taints, and its own affinity."""
    hw = node.hardware
    tolerations = tuple(Toleration(t.key, "Equal", t.value, t.effect) for t in node.taints)
    common: dict[str, Any] = dict(
        name=pod.name, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, priority=pod.priority,
        resources=pod.resources, tolerations=tolerations, affinity=pod.affinity, host_ports=pod.host_ports,
    )
    models = (hw.gpu_model,) if hw.gpu_model is not None else ()
    if pod.gpu_shares:
        ((gpu, milli),) = pod.gpu_shares.items()
        return PodRequest(gpus=1, gpu_milli=milli, gpu_memory_mib=pod.gpu_memory_mib.get(gpu, 0),
                          gpu_models=models, **common)
    if pod.gpus:
        return PodRequest(gpus=len(pod.gpus), gpu_memory_mib=max(pod.gpu_memory_mib.values(), default=0),
                          gpu_models=models, **common)
    return PodRequest(**common)


def relocated(pod: RunningPod, gpus: Sequence[int]) -> RunningPod:
    """``pod`` holding the same on the GPU indices ``gpus`` (a shared pod: ``gpus[0]``)."""
    if pod.gpu_shares:
        ((old, milli),) = pod.gpu_shares.items()
        memory = {gpus[0]: pod.gpu_memory_mib[old]} if old in pod.gpu_memory_mib else EMPTY
        return replace(pod, gpu_shares={gpus[0]: milli}, gpu_memory_mib=memory)
    renamed = dict(zip(sorted(pod.gpus), sorted(gpus)))
    memory = {renamed[g]: m for g, m in pod.gpu_memory_mib.items() if g in renamed} or EMPTY
    return replace(pod, gpus=tuple(sorted(gpus)), gpu_memory_mib=memory)


def moved_milli(pod: RunningPod) -> int:
    """The GPU milli a move of ``pod`` moves (1000 per whole GPU, or its share)."""
    return 1000 * len(pod.gpus) + sum(pod.gpu_shares.values())


def apply_moves(snapshot: ClusterSnapshot, moves: Sequence[Move]) -> ClusterSnapshot:
    """The snapshot after ``moves``, in order (no check; :func:`check_moves` checks)."""
    return _MovedCluster(snapshot).apply_all(moves, check=False)[0]


def check_moves(
    snapshot: ClusterSnapshot | Mapping[str, Any] | str,
    request: PlacementRequest | Mapping[str, Any] | str,
    result: PlacementResult | Mapping[str, Any] | str,
) -> list[str]:
    """List every way ``result`` — moves, then assignments — breaks the rules.

    Each move, in order: the pod runs on ``from`` now and may move
    (:func:`why_not_movable`); it fits on ``to`` with GPUs ``gpus`` in the cluster as the
    moves before it left it (:func:`placer.check_placement` of the pod as
    :func:`mover_request` states it; a move within one node frees the pod's GPUs first);
    ``gpuMilli`` is its share; ``for`` names a requested pod. Then the result's
    assignments on the cluster after every move (:func:`placer.check_placement`), and each
    ``rooms`` entry counts the moves made for its pod.

    Parameters
    ----------
    snapshot, request, result : model object, dict or file path
        The cluster before the moves, what was asked, and the answer to check.

    Returns
    -------
    list of str
        Violations; empty when the moves and the placement are valid.
    """
    snapshot = load_snapshot(snapshot)
    request = load_request(request)
    result = load_result(result)
    after, out = _MovedCluster(snapshot).apply_all(result.moves, check=True)
    asked = {pod.name for pod in request.pods}
    counted: dict[str, int] = {}
    for k, move in enumerate(result.moves):
        if move.for_ is not None:
            counted[move.for_] = counted.get(move.for_, 0) + 1
            if move.for_ not in asked:
                out.append(f"move {k} ({move.pod}): made for {move.for_}, which is not in the request")
    for room in result.rooms:
        if room.moves != counted.get(room.for_, 0):
            out.append(f"rooms: {room.for_} says {room.moves} move(s), {counted.get(room.for_, 0)} are made for it")
    out.extend(check_placement(after, request, replace(result, moves=(), rooms=())))
    return out


class _MovedCluster:
    """The pods of each node as moves change them, in order."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.nodes = list(snapshot.nodes)
        self.index = {node.name: i for i, node in enumerate(self.nodes)}

    def current(self) -> ClusterSnapshot:
        return replace(self.snapshot, nodes=tuple(self.nodes))

    def apply_all(self, moves: Sequence[Move], check: bool) -> tuple[ClusterSnapshot, list[str]]:
        out: list[str] = []
        for k, move in enumerate(moves):
            out.extend(f"move {k} ({move.pod} from {move.from_} to {move.to}): {v}" for v in self._apply(move, check))
        return self.current(), out

    def _apply(self, move: Move, check: bool) -> list[str]:
        source, target = self.index.get(move.from_), self.index.get(move.to)
        if source is None or target is None:
            return [f"no node {move.from_ if source is None else move.to} in the snapshot"]
        node = self.nodes[source]
        pod = next((p for p in node.pods if p.name == move.pod), None)
        if pod is None:
            return [f"the pod does not run on {move.from_} at this point"]
        problems: list[str] = []
        if check:
            why = why_not_movable(pod)
            if why:
                problems.append(f"the pod may not move: {why}")
            share = next(iter(pod.gpu_shares.values()), None)
            if move.gpu_milli != share:
                problems.append(f"gpuMilli {move.gpu_milli}, the pod holds a share of {share}")
        self.nodes[source] = replace(node, pods=tuple(p for p in node.pods if p.name != move.pod))
        if check and not problems:
            mover = mover_request(pod, node)
            placed = PlacementResult(assignments=(Assignment(move.pod, move.to, tuple(move.gpus), move.gpu_milli),))
            problems.extend(check_placement(self.current(), PlacementRequest(pods=(mover,)), placed))
        moved = relocated(pod, move.gpus) if move.gpus or not (pod.gpus or pod.gpu_shares) else pod
        self.nodes[target] = replace(self.nodes[target], pods=self.nodes[target].pods + (moved,))
        return problems
