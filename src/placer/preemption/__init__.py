"""Making room: which running pods to evict (greedy and exact), and moving pods instead
(defrag and the independent check of moves).
"""
from __future__ import annotations

# The names of the module this package replaced (placer.preemption), kept where users import them.
from placer.preemption.victims import (  # noqa: F401
    Unit,
    Candidate,
    GangCandidate,
    Ranks,
    units,
    start_of,
    room,
    eligible,
    candidates,
    pick,
    choose,
    gang_candidates,
    level_domains,
    lowest_levels,
    fewest_victims,
    evict,
    KUBE_PRIORITY_OFFSET,
)

__all__ = ['Unit', 'Candidate', 'GangCandidate', 'Ranks', 'units', 'start_of', 'room', 'eligible', 'candidates', 'pick', 'choose', 'gang_candidates', 'level_domains', 'lowest_levels', 'fewest_victims', 'evict', 'KUBE_PRIORITY_OFFSET']
