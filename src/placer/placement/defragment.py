"""Making room by moving running pods: planning the moves of a request, and making them real.

:func:`defrag` places a request's single pods as :meth:`Cluster.place` would, and for a pod
that does not fit asks :class:`placer.preemption.defrag.RoomFinder` for the fewest moves
after which it does; :func:`move` makes a list of moves real in the kernel session, all or
nothing (:meth:`placer.placement.cluster.Cluster.defrag`, :meth:`~placer.placement.cluster.Cluster.move`).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from placer.exceptions import InvalidInputError
from placer.kernel import fgd_rank
from placer.kernel.holdings import Evicted
from placer.model import Move, PlacementRequest, PlacementResult, RoomMade, replace
from placer.placement import gangs, order
from placer.placement.run import give_back
from placer.placement.state import ClusterState
from placer.placement.tally import Placed, Tally
from placer.policies import Policy
from placer.preemption.defrag import RoomFinder
from placer.preemption.moves import mover_request, relocated, why_not_movable
from placer.schema.errors import bad

__all__ = ["defrag", "move"]


def defrag(state: ClusterState, request: PlacementRequest, policy: Policy, max_moves: int | None) -> PlacementResult:
    """The placement of a checked request's pods with the moves that make them fit; the
    state does not change (:meth:`placer.placement.cluster.Cluster.defrag`)."""
    if max_moves is not None and (isinstance(max_moves, bool) or not isinstance(max_moves, int) or max_moves < 0):
        raise bad("max_moves", "a count of moves (an integer >= 0)", max_moves)
    odd = next((i for i, p in enumerate(request.pods) if p.gang is not None or p.mig is not None or p.gpu_slots), None)
    if odd is not None:
        raise InvalidInputError(
            f"pods[{odd}]", "defrag places single pods of whole or shared GPUs: no gang, MIG or GPU slots"
        )
    session = state.session
    session.prepare(policy, request.pods, request.seed)
    rng = np.array([request.seed], dtype=np.uint64)
    rank = fgd_rank(session.n_nodes, request.seed) if policy.ranked else np.arange(session.n_nodes)
    finder = RoomFinder(session, state.snapshot.nodes, policy, rng, rank.tolist())
    budget = max_moves if max_moves is not None else sum(1 for _, p in session.running() if p.movable)
    tally = Tally()
    fitted: list[Placed] = []  # placed without moves (the finder undoes the others)
    try:
        for pod in order.by_priority(request.pods):
            run = session.place([pod], policy, rng)
            if run.nodes[0] >= 0:
                fitted.append((pod, run.nodes[0], run.masks[0]))
                tally.add(session, pod, run.nodes[0], run.masks[0], run.nics[0])
                continue
            room = finder.make_room(pod, budget - len(tally.moves))
            tally.rooms.append(RoomMade(pod.name, len(room.moves), room.milli_moved, room.status or "feasible"))
            if room.node < 0:
                tally.unschedulable.extend(gangs.run_failures(session, [pod], run))
                continue
            tally.moves.extend(
                Move(m.name, session.node_names[m.source], session.node_names[m.target], m.gpus,
                     next(iter(m.record.gpu_shares.values()), None), pod.name)
                for m in room.moves
            )
            tally.add(session, pod, room.node, room.mask, room.nic_mask)
            tally.assignments[-1] = replace(tally.assignments[-1], nominated=True)
    finally:
        finder.undo()
        give_back(session, fitted)
    state.book.remember(tally.placed, tally.assignments)
    return tally.result()


def move(state: ClusterState, moves: Sequence[Move]) -> None:
    """Make moves real, in order, all or nothing (:meth:`placer.placement.cluster.Cluster.move`).

    Raises
    ------
    InvalidInputError
        At ``moves[k]``, when nothing moved.
    """
    if isinstance(moves, (str, bytes, Mapping)) or not hasattr(moves, "__iter__"):
        raise bad("moves", "a list of Moves", moves)
    session = state.session
    where = {record.name: (node, record) for node, record in session.running()}
    done: list[tuple[str, Evicted]] = []
    try:
        for k, m in enumerate(moves):
            if not isinstance(m, Move):
                raise bad(f"moves[{k}]", "a Move", m)
            found = where.get(m.pod)
            source, target = session.node_index.get(m.from_), session.node_index.get(m.to)
            if found is None or found[0] != source:
                raise InvalidInputError(f"moves[{k}]", f"pod {m.pod!r} does not run on {m.from_!r}")
            if target is None:
                raise InvalidInputError(f"moves[{k}]", f"unknown node {m.to!r}")
            record = found[1]
            why = why_not_movable(record)
            if why:
                raise InvalidInputError(f"moves[{k}]", f"pod {m.pod!r} may not move: {why}")
            mover = mover_request(record, state.snapshot.nodes[source])
            gone = session.evict(m.pod)
            done.append((m.pod, gone))
            problem = "" if session.eligibility(mover)[0][target] else "its node's GPU model or taints"
            problem = problem or session.misfit(mover, target, m.gpus)
            if problem:
                raise InvalidInputError(f"moves[{k}]", f"pod {m.pod!r} does not fit on {m.to}: {problem}")
            moved = relocated(record, m.gpus) if m.gpus else record
            session.restore(Evicted(m.pod, target, moved))
            where[m.pod] = (target, moved)
    except InvalidInputError:
        for name, gone in reversed(done):
            if session.holds(name):
                session.release(name)
            session.restore(gone)
        raise
