"""The placer/v1 documents as written: msgspec Structs with the JSON names.

A snapshot's nodes and running pods are decoded straight into model objects
(:class:`placer.model.Node` declares its JSON names); everything else is decoded into the
Structs here and then built into model objects by the rest of the schema package, which
adds the rules that span fields (``placer.schema.snapshot``, ``.request``, ``.result``).
Every Struct refuses unknown fields. ``LABELS`` words what a field expects where the type
alone would say too little (``a list of GPU indices`` rather than ``a list``).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping, Optional

from msgspec import Meta, Struct, field

from placer.limits import MAX_GPU_REPLICAS, MAX_GPUS, MAX_QUANTITY
from placer.schema.errors import choices_in_order
from placer.model.roles import Role, declare
from placer.model.affinity import Affinity, TopologySpreadConstraint
from placer.model.ports import HostPort
from placer.model import (
    EMPTY,
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    Move,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    Preemption,
    RoomMade,
    ScoringStrategy,
    SliceSpec,
    Unschedulable,
    GANG_MODES,
    GPU_SHARING_STRATEGIES,
    SOLVERS,
    TAINT_EFFECTS,
    GpuCount,
    GpuIndexKey,
    GpuSharing,
    InlineHardware,
    GpuMemory,
    MigConfig,
    MigInstance,
    MigRequest,
    MigUse,
    PodDisruptionBudget,
    Name,
    Node,
    NodeType,
    Priority,
    Quantity,
    ResourceAmount,
    RunningPod,
    Share,
    Taint,
    Toleration,
)

__all__ = [
    "API",
    "NodeTypeDoc",
    "SnapshotDoc",
    "PodDoc",
    "GangTopologyDoc",
    "SliceDoc",
    "GangDoc",
    "RequestDoc",
    "AssignmentDoc",
    "UnschedulableDoc",
    "GangResultDoc",
    "PreemptionDoc",
    "MoveDoc",
    "RoomMadeDoc",
    "ResultDoc",
    "LABELS",
]

API = Literal["placer/v1"]


class _Doc(Struct, forbid_unknown_fields=True, rename="camel"):
    """Base of the documents: unknown fields are refused, JSON names are camelCase."""


class NodeTypeDoc(InlineHardware, frozen=True):
    """A node type: hardware fields only."""


declare(NodeTypeDoc, like=InlineHardware)


class SnapshotDoc(_Doc):
    api_version: API
    kind: Literal["ClusterSnapshot"]
    nodes: list[Node]
    topology_levels: list[str] = []
    node_types: dict[Name, NodeTypeDoc] = {}
    pod_disruption_budgets: list[PodDisruptionBudget] = []


declare(SnapshotDoc, like=ClusterSnapshot,
    api_version=Role.SPECIAL,
    kind=Role.SPECIAL,
)


class PodDoc(_Doc):
    name: Name
    replicas: Optional[Annotated[int, Meta(ge=1)]] = None
    gpus: GpuCount = 0
    gpu_milli: Share = 1000
    gpu_memory_mib: GpuMemory = field(default=0, name="gpuMemoryMiB")
    gpu_models: tuple[Name, ...] = ()
    cpu_milli: Quantity = 0
    memory_mib: Quantity = field(default=0, name="memoryMiB")
    node_selector: Mapping[Name, str] = EMPTY
    tolerations: tuple[Toleration, ...] = ()
    priority: Priority = 0
    gang: Optional[Name] = None
    nics: Annotated[int, Meta(ge=0)] = 0
    resources: Mapping[Name, Annotated[int, Meta(ge=1, le=MAX_QUANTITY)]] = EMPTY
    mig: Optional[MigRequest] = None
    gpu_slots: Annotated[int, Meta(ge=0, le=MAX_GPUS * MAX_GPU_REPLICAS)] = 0
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    nominated_node_name: Optional[Name] = None
    labels: Mapping[Name, str] = EMPTY
    node_name: Optional[Name] = None
    affinity: Optional[Affinity] = None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()


# an entry carries each field into its PodRequest (replicas expand it into several)
declare(
    PodDoc,
    like=PodRequest,
    renamed={"nominated_node_name": "nominated_node"},
    replicas=Role.GROUPING,
)


class GangTopologyDoc(_Doc):
    mode: Literal["required", "preferred", "unconstrained"] = "unconstrained"
    level: Optional[Name] = None


declare(GangTopologyDoc, mode=Role.GROUPING, level=Role.GROUPING)


class SliceDoc(_Doc):
    level: Name
    size: Annotated[int, Meta(ge=1)]


declare(SliceDoc, like=SliceSpec)


class GangDoc(_Doc):
    topology: Optional[GangTopologyDoc] = None
    slices: list[SliceDoc] = []
    same_gpu_model: bool = True
    solver: Optional[Literal["auto", "greedy", "exact"]] = None
    time_limit_s: Optional[Annotated[float, Meta(gt=0)]] = None


declare(GangDoc, like=GangSpec, topology=Role.GROUPING)


class RequestDoc(_Doc):
    api_version: API
    kind: Literal["PlacementRequest"]
    pods: list[PodDoc]
    policy: Optional[str] = None
    seed: Annotated[int, Meta(ge=0)] = 0  # at most SEED_MAX: what msgspec holds
    solver: Literal["auto", "greedy", "exact"] = "auto"
    time_limit_s: Annotated[float, Meta(gt=0)] = 10.0
    time_budget_s: Annotated[float, Meta(gt=0)] = 60.0
    joint: bool = False
    preemption: Literal["none", "greedy", "exact", "auto"] = "none"
    gangs: dict[Name, GangDoc] = {}
    scoring_strategy: Optional[ScoringStrategy] = None


declare(RequestDoc, like=PlacementRequest,
    api_version=Role.SPECIAL,
    kind=Role.SPECIAL,
)


class AssignmentDoc(_Doc):
    pod: Name
    node: Name
    gpus: list[GpuIndexKey] = []
    gpu_milli: Optional[Share] = None
    gang: Optional[Name] = None
    nics: list[Name] = []
    mig: list[MigUse] = []
    gpu_slots: dict[GpuIndexKey, Annotated[int, Meta(ge=1, le=MAX_GPU_REPLICAS)]] = {}
    nominated: bool = False


declare(AssignmentDoc, like=Assignment)


class UnschedulableDoc(_Doc):
    pod: Name
    reason: str


declare(UnschedulableDoc, like=Unschedulable)


class GangResultDoc(_Doc):
    name: Name
    placed: bool
    solver: Literal["greedy", "cp-sat"] = "greedy"
    status: Literal["optimal", "feasible", "infeasible", "unknown"] = "feasible"
    domains: dict[Name, list[Name]] = {}
    domain_counts: dict[Name, Quantity] = {}
    domain_bounds: dict[Name, Quantity] = {}
    objective: Optional[float] = None
    bound: Optional[float] = None


declare(GangResultDoc, like=GangResult, domain_counts=Role.OUTPUT)


class PreemptionDoc(_Doc):
    for_: Name = field(name="for")
    victims: list[Name]
    nodes: list[Name] = []
    pdb_violations: Quantity = 0
    solver: Literal["greedy", "cp-sat"] = "greedy"
    status: Literal["optimal", "feasible", "infeasible", "unknown"] = "feasible"


declare(PreemptionDoc, like=Preemption)


class MoveDoc(_Doc):
    pod: Name
    from_: Name = field(name="from")
    to: Name
    gpus: list[GpuIndexKey] = []
    gpu_milli: Optional[Share] = None
    for_: Optional[Name] = field(default=None, name="for")


declare(MoveDoc, like=Move)


class RoomMadeDoc(_Doc):
    for_: Name = field(name="for")
    moves: Quantity = 0
    gpu_milli_moved: Quantity = 0
    status: Literal["optimal", "feasible", "infeasible", "unknown"] = "feasible"


declare(RoomMadeDoc, like=RoomMade)


class ResultDoc(_Doc):
    api_version: API
    kind: Literal["PlacementResult"]
    assignments: list[AssignmentDoc] = []
    unschedulable: list[UnschedulableDoc] = []
    gangs: list[GangResultDoc] = []
    preemptions: list[PreemptionDoc] = []
    moves: list[MoveDoc] = []
    rooms: list[RoomMadeDoc] = []


declare(ResultDoc, like=PlacementResult,
    api_version=Role.SPECIAL,
    kind=Role.SPECIAL,
)


choices_in_order(
    GPU_SHARING_STRATEGIES,
    TAINT_EFFECTS,
    ("", *TAINT_EFFECTS),
    ("Equal", "Exists"),
    GANG_MODES,
    GPU_SHARING_STRATEGIES,
    SOLVERS,
    ("greedy", "cp-sat"),
    ("static", "dynamic"),
    ("PreemptLowerPriority", "Never"),
    ("none", "greedy", "exact", "auto"),
    ("optimal", "feasible", "infeasible", "unknown"),
)

GPU_INDICES = "a list of GPU indices"
GPU_INDEX = "a GPU index (an integer)"
RESULT_GPU_INDEX = f"a GPU index (an integer from 0 to {MAX_GPUS - 1})"
STRING_MAP = "a mapping of strings to strings"

LABELS: dict[tuple[Any, ...], str] = {
    (SnapshotDoc,): "a ClusterSnapshot mapping",
    (RequestDoc,): "a PlacementRequest mapping",
    (ResultDoc,): "a PlacementResult mapping",
    (SnapshotDoc, "topologyLevels"): "a list of level names",
    (SnapshotDoc, "nodeTypes"): "a mapping of type names to node types",
    (SnapshotDoc, "nodeTypes", "key"): "non-empty string type names",
    (SnapshotDoc, "nodes"): "a list of nodes",
    (SnapshotDoc, "nodes", "item"): "a node mapping",
    (NodeTypeDoc, "nics"): "a list of mappings",
    (Node, "type"): "a node type name (a string)",
    (Node, "nics"): "a list of mappings",
    (Node, "topology"): "a mapping of level to domain name",
    (Node, "topology", "value"): "a non-empty domain name",
    (Node, "labels"): STRING_MAP,
    (Node, "labels", "key"): "non-empty string keys",
    (Node, "taints"): "a list of taints",
    (Node, "unhealthyGpus"): GPU_INDICES,
    (Node, "unhealthyGpus", "item"): GPU_INDEX,
    (Node, "pods"): "a list of pods",
    (Node, "resources"): "a mapping of resource name to {capacity, allocatable}",
    (Node, "resources", "key"): "non-empty resource names",
    (Node, "resources", "value"): "a mapping with capacity and allocatable",
    (RunningPod, "gpus"): GPU_INDICES,
    (RunningPod, "gpus", "item"): GPU_INDEX,
    (RunningPod, "gpuShares"): "a mapping of GPU index to gpuMilli",
    (RunningPod, "gpuShares", "key"): "GPU index keys",
    (RunningPod, "gpuMemoryMiB"): "a mapping of GPU index to MiB",
    (RunningPod, "gpuMemoryMiB", "key"): "GPU index keys",
    (RunningPod, "gpuSlots"): "a mapping of GPU index to slots",
    (RunningPod, "gpuSlots", "key"): "GPU index keys",
    (GpuSharing,): "a mapping with strategy and replicas",
    (RunningPod, "resources"): "a mapping of resource name to count",
    (RunningPod, "resources", "key"): "non-empty resource names",
    (Taint,): "a mapping",
    (ResourceAmount,): "a mapping with capacity and allocatable",
    (RequestDoc, "pods"): "a list of pods",
    (RequestDoc, "pods", "item"): "a pod mapping",
    (RequestDoc, "gangs"): "a mapping of gang names to gangs",
    (RequestDoc, "gangs", "key"): "non-empty string gang names",
    (PodDoc, "gpuModels"): "a list of strings",
    (PodDoc, "nodeSelector"): STRING_MAP,
    (PodDoc, "nodeSelector", "key"): "non-empty string keys",
    (PodDoc, "tolerations"): "a list of tolerations",
    (PodDoc, "gang"): "a gang name (a non-empty string)",
    (PodDoc, "resources"): "a mapping of resource name to count",
    (PodDoc, "resources", "key"): "non-empty resource names",
    (GangDoc, "slices"): "a list of slices",
    (AssignmentDoc, "gpus"): GPU_INDICES,
    (AssignmentDoc, "gpus", "item"): RESULT_GPU_INDEX,
    (AssignmentDoc, "gpuSlots"): "a mapping of GPU index to slots",
    (AssignmentDoc, "gpuSlots", "key"): "GPU index keys",
    (GangResultDoc, "domains"): "a mapping of level to domain names",
    (GangResultDoc, "domains", "key"): "non-empty string level names",
    (Toleration,): "a mapping",
    (MigConfig,): "a mapping with gpus and mode",
    (MigConfig, "gpus"): 'a list of GPU indices or "all"',
    (MigInstance,): "a mapping with gpu, profile and start",
    (MigRequest,): "a mapping with profile or memoryMiB, and count",
    (MigUse,): "a mapping with gpu, profile, start and create",
    (Node, "migInstances"): "a list of MIG instances",
    (SnapshotDoc, "podDisruptionBudgets"): "a list of PodDisruptionBudgets",
    (PodDisruptionBudget,): "a mapping with name, selector and a budget",
    (PodDisruptionBudget, "selector"): STRING_MAP,
    (RunningPod, "labels"): STRING_MAP,
    (RunningPod, "hostPorts"): "a list of host ports",
    (PodDoc, "hostPorts"): "a list of host ports",
    (HostPort,): "a mapping with hostPort, protocol and hostIP",
    (RunningPod, "startTime"): "epoch seconds or an RFC 3339 time",
    (ResultDoc, "preemptions"): "a list of preemptions",
    (ResultDoc, "moves"): "a list of moves",
    (ResultDoc, "rooms"): "a list of rooms made by moving",
    (MoveDoc, "gpus"): GPU_INDICES,
    (MoveDoc, "gpus", "item"): RESULT_GPU_INDEX,
    (RunningPod, "mig"): "a list of MIG instances",
    (AssignmentDoc, "mig"): "a list of MIG instances",
    (NodeType,): "a mapping",
}
