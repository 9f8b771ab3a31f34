"""PlacementResult documents (SPEC §3), structurally: whether the placement is right is the
checker's business (:func:`placer.check_placement`)."""
from __future__ import annotations

import math

from placer.model import EMPTY, Assignment, GangResult, Move, PlacementResult, Preemption, RoomMade, Unschedulable
from placer.schema.documents import ResultDoc
from placer.exceptions import InvalidInputError
from placer.schema.errors import bad

__all__ = ["result_from_doc"]


def result_from_doc(doc: ResultDoc) -> PlacementResult:
    """Build a decoded PlacementResult.

    Raises
    ------
    InvalidInputError
        At ``gangs[i].objective`` or ``.bound`` for a number that is not finite, at
        ``gangs[i].domainCounts.<level>`` for a count other than the domains listed.
    """
    for i, g in enumerate(doc.gangs):
        for name, v in (("objective", g.objective), ("bound", g.bound)):
            if v is not None and not math.isfinite(v):
                raise bad(f"gangs[{i}].{name}", "a finite number", v)
        for level, count in g.domain_counts.items():
            listed = len(g.domains.get(level, ()))
            if count != listed:
                raise InvalidInputError(
                    f"gangs[{i}].domainCounts.{level}", f"says {count} domain(s), `domains` lists {listed}"
                )
    return PlacementResult(
        assignments=tuple(
            Assignment(a.pod, a.node, tuple(a.gpus), a.gpu_milli, a.gang, tuple(a.nics), tuple(a.mig),
                       dict(a.gpu_slots) or EMPTY, a.nominated)
            for a in doc.assignments
        ),
        unschedulable=tuple(Unschedulable(u.pod, u.reason) for u in doc.unschedulable),
        gangs=tuple(
            GangResult(
                g.name,
                g.placed,
                g.solver,
                g.status,
                {k: tuple(v) for k, v in g.domains.items()} or EMPTY,
                None if g.objective is None else float(g.objective),
                None if g.bound is None else float(g.bound),
                dict(g.domain_bounds) or EMPTY,
            )
            for g in doc.gangs
        ),
        preemptions=tuple(
            Preemption(p.for_, tuple(p.victims), tuple(p.nodes), p.pdb_violations, p.solver, p.status)
            for p in doc.preemptions
        ),
        moves=tuple(Move(m.pod, m.from_, m.to, tuple(m.gpus), m.gpu_milli, m.for_) for m in doc.moves),
        rooms=tuple(RoomMade(r.for_, r.moves, r.gpu_milli_moved, r.status) for r in doc.rooms),
    )

