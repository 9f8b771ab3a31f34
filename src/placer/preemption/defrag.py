"""Make room by moving (SPEC §7, ``placer defrag``): the fewest moves of movable running
pods after which a pending pod fits, then the fewest GPUs moved.

For one pod that does not fit, every node it may use is a candidate target. On a target,
the pods to move are a *removal set*: movable pods (:func:`placer.preemption.moves.why_not_movable`)
whose leaving makes the pod fit there — for a pod of whole GPUs, every holder of enough
GPUs to clear (all sets of GPUs are tried); for a shared pod, holders of one GPU whose
shares cover what it lacks (every GPU, every covering set of its holders); then, if CPU,
memory or a pod slot is still short, the fewest other movable pods of the node that cover
it. Every removal set of up to the move budget is listed, ranked by (moves, GPU milli
moved, the request policy's node order), and tried in that order with the kernel, in
sequence: each pod of the set, largest first, is evicted and placed by
:data:`MOVER_POLICY` on another node (never the target), or, failing that, on a GPU of
the target the pending pod does not need; then the pending pod is placed on the target by
the request's policy. The first set that goes through is the plan. Each move is a
placement into room that is free at its turn, so no move counts on room a later move
frees.

Optimality: every plan must move a removal set off the node the pod ends on, so the
smallest removal set of any node (and, at that size, the least GPU milli) bounds every
plan from below. A plan that meets the bound is ``optimal``; one found above it is
``feasible``. With no removal set within the budget the pod is proven ``infeasible``;
with sets but none that goes through (each moved pod must fit elsewhere), ``unknown``.
When an enumeration is cut short (:data:`MAX_SUBSETS`) no bound is claimed.

Everything is done in the kernel session and undone (:meth:`RoomFinder.undo`) unless
the caller keeps it: a plan is computed without changing state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from placer import policies
from placer.kernel import KernelSession
from placer.kernel.pack import mask_to_indices
from placer.kernel.free import NodeFree
from placer.kernel.holdings import Evicted
from placer.model import Node, PodRequest, RunningPod
from placer.preemption.moves import mover_request, moved_milli, relocated, why_not_movable
from placer.policies import Policy

__all__ = [
    "MOVER_POLICY",
    "MAX_SUBSETS",
    "MAX_TRIALS",
    "PlannedMove",
    "RemovalSet",
    "Room",
    "RoomFinder",
    "removal_sets",
]

MOVER_POLICY: Policy = policies.REGISTRY["best-fit"]
"""How a moved pod's new node and GPUs are chosen: where it leaves the least free."""

MAX_SUBSETS = 20_000
"""Subsets one node's enumeration looks at, at most; beyond, its sets are not all listed
and no lower bound is claimed."""

MAX_TRIALS = 400
"""Removal sets tried with the kernel for one pod, at most."""

WHOLE = 1000


@dataclass(frozen=True)
class PlannedMove:
    """One move of a plan: ``record`` (as it ran) from node ``source`` to node ``target``
    onto ``gpus``; ``evicted`` restores it where it was."""

    record: RunningPod
    source: int
    target: int
    gpus: tuple[int, ...]
    evicted: Evicted

    @property
    def name(self) -> str:
        return self.record.name


@dataclass(frozen=True)
class RemovalSet:
    """Movable pods of node ``node`` whose leaving makes the pending pod fit there;
    ``keep_clear`` are the GPUs of the node a moved pod may not land on."""

    node: int
    pods: tuple[RunningPod, ...]
    milli: int
    keep_clear: frozenset[int]

    def key(self, rank: Sequence[int]) -> tuple[int, int, int]:
        return (len(self.pods), self.milli, rank[self.node])


@dataclass
class Room:
    """How one pending pod was placed: its node, GPU and NIC masks (node -1: not placed),
    the moves made for it, and the search's status (``None``: it fitted without moves)."""

    pod: PodRequest
    node: int = -1
    mask: int = 0
    nic_mask: int = 0
    moves: list[PlannedMove] = field(default_factory=list)
    status: str | None = None

    @property
    def milli_moved(self) -> int:
        return sum(moved_milli(m.record) for m in self.moves)


@dataclass
class _NodeView:
    """One candidate node as the enumeration sees it: what is free, who holds each GPU."""

    free: NodeFree
    movable: list[RunningPod]
    holders: list[list[RunningPod]]  # per GPU: the pods holding it, whole or a share
    stuck: list[bool]  # per GPU: held by a pod that may not move

    @property
    def movable_names(self) -> set[str]:
        return {p.name for p in self.movable}

    @property
    def fully_free(self) -> list[int]:
        return [g for g, milli in enumerate(self.free.gpu_milli) if milli == WHOLE]


def _node_view(free: NodeFree, pods: Sequence[RunningPod], moved: set[str]) -> _NodeView:
    """The view of a node whose pods are ``pods``; pods in ``moved`` stay where they are."""
    gpus = len(free.gpu_milli)
    holders: list[list[RunningPod]] = [[] for _ in range(gpus)]
    stuck = [False] * gpus
    movable = []
    for pod in pods:
        can_move = not why_not_movable(pod) and pod.name not in moved
        if can_move:
            movable.append(pod)
        for g in (*pod.gpus, *pod.gpu_shares):
            holders[g].append(pod)
            stuck[g] = stuck[g] or not can_move
    return _NodeView(free, movable, holders, stuck)


def _limited(sets: Iterable[tuple[RunningPod, ...]], counter: list[int]) -> Iterator[tuple[RunningPod, ...]]:
    """``sets`` while ``counter[0]`` (subsets seen on this node) stays under :data:`MAX_SUBSETS`."""
    for s in sets:
        counter[0] += 1
        if counter[0] > MAX_SUBSETS:
            return
        yield s


def _gpu_covers(pod: PodRequest, view: _NodeView, budget: int, counter: list[int]) -> Iterator[tuple[tuple[RunningPod, ...], frozenset[int]]]:
    """Each set of pods whose leaving gives ``pod`` its GPUs on the node, with the GPUs
    it needs kept clear."""
    if pod.gpus == 0:
        yield (), frozenset()
        return
    free = view.free
    if not pod.shared:
        ready = view.fully_free
        need = pod.gpus - len(ready)
        clearable = [g for g, held in enumerate(view.holders) if held and not view.stuck[g]]
        if need <= 0:
            yield (), frozenset(ready)
            return
        for gpus in combinations(clearable, need):
            counter[0] += 1
            if counter[0] > MAX_SUBSETS:
                return
            pods = {p.name: p for g in gpus for p in view.holders[g]}
            if len(pods) <= budget:
                yield tuple(pods.values()), frozenset(ready) | frozenset(gpus)
        return
    for g, held in enumerate(view.holders):
        mib = free.gpu_memory_mib[g]
        short_milli = pod.gpu_milli - free.gpu_milli[g]
        short_mib = 0 if mib is None else pod.gpu_memory_mib - mib
        if short_milli <= 0 and short_mib <= 0:
            yield (), frozenset((g,))
            continue
        movers = [p for p in held if p.name in view.movable_names]
        if not movers:
            continue
        for size in range(1, min(budget, len(movers)) + 1):
            for chosen in _limited(combinations(movers, size), counter):
                whole = any(chosen_pod.gpus for chosen_pod in chosen)
                milli = sum(p.gpu_shares.get(g, 0) for p in chosen)
                mib_freed = sum(p.gpu_memory_mib.get(g, 0) for p in chosen)
                if whole or (milli >= short_milli and mib_freed >= short_mib):
                    yield chosen, frozenset((g,))


def _extras(
    pod: PodRequest, view: _NodeView, gone: tuple[RunningPod, ...], budget: int, counter: list[int]
) -> list[tuple[RunningPod, ...]]:
    """The smallest sets of further movable pods whose leaving covers what ``pod`` still
    lacks in CPU, memory and pod slots once ``gone`` left (``[()]`` when nothing)."""
    free = view.free

    def short(extra: Sequence[RunningPod]) -> bool:
        left = (*gone, *extra)
        if free.pods is not None and free.pods + len(left) < 1:
            return True
        if free.cpu_milli is not None and free.cpu_milli + sum(p.cpu_milli for p in left) < pod.cpu_milli:
            return True
        return free.memory_mib is not None and free.memory_mib + sum(p.memory_mib for p in left) < pod.memory_mib

    if not short(()):
        return [()]
    names = {p.name for p in gone}
    rest = [p for p in view.movable if p.name not in names]
    for size in range(1, min(budget - len(gone), len(rest)) + 1):
        found = [extra for extra in _limited(combinations(rest, size), counter) if not short(extra)]
        if found:
            return found
    return []


def removal_sets(pod: PodRequest, view: _NodeView, node: int, budget: int) -> tuple[list[RemovalSet], bool]:
    """Every removal set of ``node`` of at most ``budget`` pods for ``pod`` (minimal per
    way of freeing GPUs), and whether the enumeration was complete."""
    counter = [0]
    seen: set[frozenset[str]] = set()
    out: list[RemovalSet] = []
    for gpu_set, keep_clear in _gpu_covers(pod, view, budget, counter):
        for extra in _extras(pod, view, gpu_set, budget, counter):
            pods = (*gpu_set, *extra)
            names = frozenset(p.name for p in pods)
            if not pods or names in seen:
                continue
            seen.add(names)
            out.append(RemovalSet(node, pods, sum(map(moved_milli, pods)), keep_clear))
    return out, counter[0] <= MAX_SUBSETS


class RoomFinder:
    """Plans (and, until :meth:`undo`, holds in the session) the moves for pending pods.

    Parameters
    ----------
    session : KernelSession
        The cluster's kernel state; what is done here is journaled for :meth:`undo`.
    nodes : sequence of Node
        The snapshot's nodes, by index (their taints and GPU model bind moved pods).
    policy : Policy
        The request's policy: it places the pending pods and orders tied candidates.
    rng : ndarray
        The request's SplitMix64 state.
    rank : sequence of int
        Tie order of nodes (lower first).
    """

    def __init__(
        self, session: KernelSession, nodes: Sequence[Node], policy: Policy, rng: np.ndarray, rank: Sequence[int]
    ) -> None:
        self.session = session
        self.nodes = nodes
        self.policy = policy
        self.rng = rng
        self.rank = rank
        self.moved: set[str] = set()  # pods moved by this finder: each moves once
        self._journal: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ the search

    def make_room(self, pod: PodRequest, budget: int) -> Room:
        """Find the fewest moves (of at most ``budget``) after which ``pod`` fits; make them
        and place it. Returns the room (``node`` -1 and nothing changed when none is found)."""
        candidates, complete = self._candidates(pod, budget)
        if not candidates:
            return Room(pod, status="infeasible" if complete else "unknown")
        bound = candidates[0].key(self.rank)[:2]
        for removal in candidates[:MAX_TRIALS]:
            room = self._try(pod, removal)
            if room is not None:
                proven = complete and (len(room.moves), room.milli_moved) == bound
                room.status = "optimal" if proven else "feasible"
                return room
        return Room(pod, status="unknown")

    def _candidates(self, pod: PodRequest, budget: int) -> tuple[list[RemovalSet], bool]:
        session = self.session
        allowed, _ = session.eligibility(pod)
        capacity = session.free.gpu_memory_capacity
        if pod.gpus and not pod.shared:
            allowed = allowed & (capacity >= pod.gpu_memory_mib)
        allowed = allowed & (session.free.gpu_count >= pod.gpus)
        on_node: dict[int, list[RunningPod]] = {}
        for node, record in session.running():
            if allowed[node]:
                on_node.setdefault(node, []).append(record)
        out: list[RemovalSet] = []
        complete = True
        for node, pods in on_node.items():
            if not any(not why_not_movable(p) and p.name not in self.moved for p in pods):
                continue
            view = _node_view(session.node_free(node), pods, self.moved)
            found, whole = removal_sets(pod, view, node, budget)
            out.extend(found)
            complete = complete and whole
        out.sort(key=lambda r: r.key(self.rank))
        return out, complete

    # ------------------------------------------------------------------ one trial

    def _try(self, pod: PodRequest, removal: RemovalSet) -> Room | None:
        """Move ``removal``'s pods, largest first, then place ``pod`` on its node; undo all
        of it and return None when a step fails."""
        mark = len(self._journal)
        moves: list[PlannedMove] = []
        for record in sorted(removal.pods, key=lambda p: (-moved_milli(p), -p.cpu_milli, p.name)):
            move = self._move(record, removal)
            if move is None:
                self._undo_to(mark)
                return None
            moves.append(move)
        fitted = self.session.place_on([pod], [removal.node], self.policy, self.rng)
        if fitted is None:
            self._undo_to(mark)
            return None
        (mask,), (nic_mask,) = fitted
        self._journal.append(lambda: self.session.give_back(pod, removal.node, mask))
        self.moved.update(m.name for m in moves)
        return Room(pod, removal.node, mask, nic_mask, moves)

    def _move(self, record: RunningPod, removal: RemovalSet) -> PlannedMove | None:
        """Evict ``record`` from the removal set's node and put it where
        :data:`MOVER_POLICY` chooses on another node, else on a GPU of that node kept out
        of the pending pod's way; None (nothing changed) when it fits nowhere."""
        session = self.session
        source = removal.node
        mover = mover_request(record, self.nodes[source])
        evicted = session.evict(record.name)
        elsewhere = np.ones(session.n_nodes, dtype=bool)
        elsewhere[source] = False
        run = session.place([mover], MOVER_POLICY, self.rng, only=session.nodes_bitset(elsewhere), reasons=False)
        if run.nodes[0] >= 0:
            target, gpus = run.nodes[0], mask_to_indices(run.masks[0])
            session.give_back(mover, target, run.masks[0])
        else:
            target, gpus = source, self._gpus_beside(mover, source, removal.keep_clear)
            if gpus is None:
                session.restore(evicted)
                return None
        moved = relocated(record, gpus) if gpus else record
        session.restore(Evicted(record.name, target, moved))
        self._journal.append(lambda: (session.evict(record.name), session.restore(evicted)))
        return PlannedMove(record, source, target, gpus, evicted)

    def _gpus_beside(self, mover: PodRequest, node: int, keep_clear: frozenset[int]) -> tuple[int, ...] | None:
        """GPUs for ``mover`` on ``node`` outside ``keep_clear``, tightest first (shared and
        CPU-only pods only); None when there are none."""
        if not mover.gpus:
            return () if not self.session.misfit(mover, node, ()) else None
        if not mover.shared:
            return None
        free = self.session.node_free(node)
        for g in sorted(range(len(free.gpu_milli)), key=lambda g: (free.gpu_milli[g], g)):
            if g not in keep_clear and not self.session.misfit(mover, node, (g,)):
                return (g,)
        return None

    # ------------------------------------------------------------------ undo

    def undo(self) -> None:
        """Undo everything this finder did, latest first."""
        self._undo_to(0)
        self.moved.clear()

    def _undo_to(self, mark: int) -> None:
        while len(self._journal) > mark:
            self._journal.pop()()
