"""placer: GPU placement for AI clusters.

Decides which node and which GPU indices each pod or gang gets, keeps the cluster
schedulable (fragmentation-aware policies), and explains why work is pending.
"""
from __future__ import annotations

from placer import _moved
from placer import kernel  # noqa: F401 - the compiled kernel, checked at import
from placer import schema  # noqa: F401 - registers the document decoders with the model
from placer.placement.cluster import Cluster, NodeFree
from placer.diagnostics.check import check_placement
from placer.preemption.moves import check_moves
from placer.exceptions import InvalidInputError, PlacerError, SolverError
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    Move,
    NodeType,
    PlacementRequest,
    PlacementResult,
    PodDisruptionBudget,
    PodRequest,
    Preemption,
    RoomMade,
    Unschedulable,
    load_request,
    load_result,
    load_snapshot,
)
from placer.placement.gpusets import select_gpus
from placer.placement.place import defrag, place, preempt
from placer.model.topology import GpuTopology, Nic

_moved.install()

__version__ = "0.1.0"

__all__ = [
    "Assignment",
    "Cluster",
    "ClusterSnapshot",
    "GangResult",
    "GangSpec",
    "GpuTopology",
    "InvalidInputError",
    "Move",
    "Nic",
    "NodeType",
    "PlacementRequest",
    "PlacementResult",
    "PlacerError",
    "PodDisruptionBudget",
    "PodRequest",
    "Preemption",
    "RoomMade",
    "SolverError",
    "Unschedulable",
    "__version__",
    "load_request",
    "load_result",
    "load_snapshot",
    "NodeFree",
    "check_moves",
    "check_placement",
    "defrag",
    "place",
    "preempt",
    "select_gpus",
]
