"""Exact gang placement with CP-SAT (OR-Tools, loaded when a model is built).
"""
from __future__ import annotations

# The names of the module this package replaced (placer.exact), kept where users import them.
from placer.exact.problem import NODE_LEVEL, GANG_MODES, GangNode, GangShape, GangProblem, ExactSolution  # noqa: F401
from placer.exact.objective import objective_weights, objective_value, domains_used, check_counts  # noqa: F401
from placer.exact.gangs import (  # noqa: F401
    solve_gang, GangModel, NodeGpus, GpuClass, build_gang_model, add_gang_hint, pack_shared_gpus, Clock, OutOfTime,
)

__all__ = ['NODE_LEVEL', 'GANG_MODES', 'GangNode', 'GangShape', 'GangProblem', 'ExactSolution', 'objective_weights', 'objective_value', 'domains_used', 'check_counts', 'solve_gang', 'GangModel', 'NodeGpus', 'GpuClass', 'build_gang_model', 'add_gang_hint', 'pack_shared_gpus', 'Clock', 'OutOfTime']
