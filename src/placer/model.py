"""The placer/v1 documents as frozen value objects.

Every object here is built by :mod:`placer._validation` (``from_dict``) and written back by
``to_dict``; ``from_dict(x.to_dict()) == x`` holds for every valid document. Units are in
the names: ``cpu_milli`` (1000 = one core), ``memory_mib``, ``gpu_milli`` (1000 = one
GPU), ``gpu_memory_mib``. A capacity of ``None`` is not tracked (no limit).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Union

from placer import policies
from placer.topology import GpuTopology, Nic

__all__ = [
    "API_VERSION",
    "POLICIES",
    "SOLVERS",
    "GANG_MODES",
    "TAINT_EFFECTS",
    "Taint",
    "Toleration",
    "NodeType",
    "RunningPod",
    "ResourceAmount",
    "Node",
    "ClusterSnapshot",
    "PodRequest",
    "SliceSpec",
    "GangSpec",
    "PlacementRequest",
    "Assignment",
    "Unschedulable",
    "GangResult",
    "PlacementResult",
    "load_snapshot",
    "load_request",
    "load_result",
]

API_VERSION = "placer/v1"
POLICIES = policies.names()  # every placement policy (placer.policies.REGISTRY), in its order
SOLVERS = ("auto", "greedy", "exact")
GANG_MODES = ("required", "preferred", "unconstrained")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

PathLike = Union[str, Path]


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (Kubernetes semantics)."""

    key: str
    effect: str
    value: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"key": self.key}
        if self.value:
            d["value"] = self.value
        d["effect"] = self.effect
        return d


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration (Kubernetes semantics).

    An empty ``key`` with operator ``Exists`` tolerates every taint; an empty ``effect``
    matches every effect.
    """

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates ``taint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return self.key == "" or self.key == taint.key
        return self.key == taint.key and self.value == taint.value

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.key:
            d["key"] = self.key
        d["operator"] = self.operator
        if self.value:
            d["value"] = self.value
        if self.effect:
            d["effect"] = self.effect
        return d


@dataclass(frozen=True, slots=True)
class NodeType:
    """Hardware of a node: GPUs and the capacities the scheduler tracks."""

    gpus: int = 0
    gpu_model: str | None = None
    gpu_memory_mib: int | None = None
    cpu_milli: int | None = None
    memory_mib: int | None = None
    max_pods: int | None = None
    gpu_topology: GpuTopology | None = None
    nics: tuple[Nic, ...] | None = None

    @property
    def nic_list(self) -> tuple[Nic, ...]:
        """The NICs given for the type, else those read from its ``nvidia-smi`` text."""
        if self.nics is not None:
            return self.nics
        return self.gpu_topology.nics if self.gpu_topology is not None else ()

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "gpuModel": self.gpu_model,
                "gpus": self.gpus,
                "gpuMemoryMiB": self.gpu_memory_mib,
                "cpuMilli": self.cpu_milli,
                "memoryMiB": self.memory_mib,
                "maxPods": self.max_pods,
                "gpuTopology": self.gpu_topology.to_dict() if self.gpu_topology is not None else None,
                "nics": [n.to_dict() for n in self.nics] if self.nics is not None else None,
            }
        )


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod already running on a node and what it holds there.

    ``gpus`` are whole GPUs held exclusively; ``gpu_shares`` maps a GPU index to the
    ``gpuMilli`` held on it by a shared pod and ``gpu_memory_mib`` maps a GPU index to the
    GPU memory held there. When the source did not say which GPUs a pod holds (the
    document's ``unknownGpus: n``), ``gpus`` are the n highest-indexed healthy GPUs no other
    pod of the node holds, and ``gpu_indices_known`` is False. ``resources`` counts the
    extended resources it holds (``nvidia.com/mig-1g.10gb`` …).
    """

    name: str
    gpus: tuple[int, ...] = ()
    gpu_shares: Mapping[int, int] = field(default_factory=dict)
    gpu_memory_mib: Mapping[int, int] = field(default_factory=dict)
    cpu_milli: int = 0
    memory_mib: int = 0
    priority: int = 0
    gpu_indices_known: bool = True
    resources: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.gpus and self.gpu_indices_known:
            d["gpus"] = list(self.gpus)
        elif self.gpus:
            d["unknownGpus"] = len(self.gpus)
        if self.gpu_shares:
            d["gpuShares"] = {str(k): v for k, v in self.gpu_shares.items()}
        if self.gpu_memory_mib:
            d["gpuMemoryMiB"] = {str(k): v for k, v in self.gpu_memory_mib.items()}
        if self.cpu_milli:
            d["cpuMilli"] = self.cpu_milli
        if self.memory_mib:
            d["memoryMiB"] = self.memory_mib
        if self.priority:
            d["priority"] = self.priority
        if self.resources:
            d["resources"] = dict(self.resources)
        return d


@dataclass(frozen=True, slots=True)
class ResourceAmount:
    """Capacity and allocatable count of one extended resource on a node."""

    capacity: int
    allocatable: int

    def to_dict(self) -> dict[str, int]:
        return {"capacity": self.capacity, "allocatable": self.allocatable}


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a snapshot.

    ``hardware`` is the effective hardware: the node type's fields with the node's inline
    fields (``overrides``) laid over them.
    """

    name: str
    hardware: NodeType
    type: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    topology: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    unhealthy_gpus: tuple[int, ...] = ()
    pods: tuple[RunningPod, ...] = ()
    resources: Mapping[str, ResourceAmount] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.type is not None:
            d["type"] = self.type
        d.update(self.overrides)
        if self.topology:
            d["topology"] = dict(self.topology)
        if self.labels:
            d["labels"] = dict(self.labels)
        if self.taints:
            d["taints"] = [t.to_dict() for t in self.taints]
        if self.unschedulable:
            d["unschedulable"] = True
        if self.unhealthy_gpus:
            d["unhealthyGpus"] = list(self.unhealthy_gpus)
        if self.resources:
            d["resources"] = {k: v.to_dict() for k, v in self.resources.items()}
        if self.pods:
            d["pods"] = [p.to_dict() for p in self.pods]
        return d


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The cluster as it is now: node types, nodes and the pods running on them."""

    nodes: tuple[Node, ...]
    node_types: Mapping[str, NodeType] = field(default_factory=dict)
    topology_levels: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ClusterSnapshot":
        """Validate a ClusterSnapshot document and build it."""
        from placer import _validation

        return _validation.snapshot_from_dict(data)

    @classmethod
    def from_file(cls, path: PathLike) -> "ClusterSnapshot":
        """Read a ClusterSnapshot from a JSON or YAML file."""
        return load_snapshot(path)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "ClusterSnapshot"}
        if self.topology_levels:
            d["topologyLevels"] = list(self.topology_levels)
        if self.node_types:
            d["nodeTypes"] = {k: v.to_dict() for k, v in self.node_types.items()}
        d["nodes"] = [n.to_dict() for n in self.nodes]
        return d


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod to place (``replicas`` already expanded)."""

    name: str
    gpus: int = 0
    gpu_milli: int = 1000
    gpu_memory_mib: int = 0
    gpu_models: tuple[str, ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    gang: str | None = None
    nics: int = 0
    resources: Mapping[str, int] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        """Whether this pod takes a share of one GPU rather than whole GPUs."""
        return self.gpus == 1 and self.gpu_milli < 1000

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.gpus:
            d["gpus"] = self.gpus
        if self.gpu_milli != 1000:
            d["gpuMilli"] = self.gpu_milli
        if self.gpu_memory_mib:
            d["gpuMemoryMiB"] = self.gpu_memory_mib
        if self.gpu_models:
            d["gpuModels"] = list(self.gpu_models)
        if self.cpu_milli:
            d["cpuMilli"] = self.cpu_milli
        if self.memory_mib:
            d["memoryMiB"] = self.memory_mib
        if self.node_selector:
            d["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            d["tolerations"] = [t.to_dict() for t in self.tolerations]
        if self.priority:
            d["priority"] = self.priority
        if self.gang is not None:
            d["gang"] = self.gang
        if self.nics:
            d["nics"] = self.nics
        if self.resources:
            d["resources"] = dict(self.resources)
        return d


@dataclass(frozen=True, slots=True)
class SliceSpec:
    """Every consecutive ``size`` pods of a gang share one domain of ``level``."""

    level: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "size": self.size}


@dataclass(frozen=True, slots=True)
class GangSpec:
    """Placement constraints of a gang (all its pods are placed together or none)."""

    name: str
    mode: str = "unconstrained"
    level: str | None = None
    slices: tuple[SliceSpec, ...] = ()
    same_gpu_model: bool = True
    solver: str | None = None
    time_limit_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        topo: dict[str, Any] = {"mode": self.mode}
        if self.level is not None:
            topo["level"] = self.level
        d: dict[str, Any] = {"topology": topo}
        if self.slices:
            d["slices"] = [s.to_dict() for s in self.slices]
        d["sameGpuModel"] = self.same_gpu_model
        if self.solver is not None:
            d["solver"] = self.solver
        if self.time_limit_s is not None:
            d["timeLimitS"] = self.time_limit_s
        return d


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """Pods to place, in order, with the gangs they form and the policy to use."""

    pods: tuple[PodRequest, ...]
    gangs: Mapping[str, GangSpec] = field(default_factory=dict)
    policy: str = "best-fit"
    seed: int = 0
    solver: str = "auto"
    time_limit_s: float = 10.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PlacementRequest":
        """Validate a PlacementRequest document and build it."""
        from placer import _validation

        return _validation.request_from_dict(data)

    @classmethod
    def from_file(cls, path: PathLike) -> "PlacementRequest":
        """Read a PlacementRequest from a JSON or YAML file."""
        return load_request(path)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "PlacementRequest",
            "policy": self.policy,
            "seed": self.seed,
        }
        if self.solver != "auto":
            d["solver"] = self.solver
        if self.time_limit_s != 10.0:
            d["timeLimitS"] = self.time_limit_s
        d["pods"] = [p.to_dict() for p in self.pods]
        if self.gangs:
            d["gangs"] = {k: g.to_dict() for k, g in self.gangs.items()}
        return d


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one pod goes: a node and GPU device indices on it.

    ``gpu_milli`` is set for a shared pod (its share of ``gpus[0]``).
    """

    pod: str
    node: str
    gpus: tuple[int, ...] = ()
    gpu_milli: int | None = None
    gang: str | None = None
    nics: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pod": self.pod, "node": self.node, "gpus": list(self.gpus)}
        if self.gpu_milli is not None:
            d["gpuMilli"] = self.gpu_milli
        if self.gang is not None:
            d["gang"] = self.gang
        if self.nics:
            d["nics"] = list(self.nics)
        return d


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """A pod that could not be placed, with a kube-scheduler-style reason."""

    pod: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class GangResult:
    """The outcome for one gang."""

    name: str
    placed: bool
    solver: str = "greedy"
    status: str = "feasible"
    domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    objective: float | None = None
    bound: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "placed": self.placed,
            "solver": self.solver,
            "status": self.status,
        }
        if self.domains:
            d["domains"] = {k: list(v) for k, v in self.domains.items()}
        if self.objective is not None:
            d["objective"] = self.objective
        if self.bound is not None:
            d["bound"] = self.bound
        return d


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """Every requested pod, either assigned or unschedulable, plus gang outcomes."""

    assignments: tuple[Assignment, ...] = ()
    unschedulable: tuple[Unschedulable, ...] = ()
    gangs: tuple[GangResult, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PlacementResult":
        """Validate a PlacementResult document and build it."""
        from placer import _validation

        return _validation.result_from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "PlacementResult",
            "assignments": [a.to_dict() for a in self.assignments],
            "unschedulable": [u.to_dict() for u in self.unschedulable],
        }
        if self.gangs:
            d["gangs"] = [g.to_dict() for g in self.gangs]
        return d


def load_snapshot(source: "PathLike | Mapping[str, Any] | ClusterSnapshot") -> ClusterSnapshot:
    """Return a ClusterSnapshot from a model object, a dict, or a JSON/YAML file path."""
    from placer import _validation

    return _validation.coerce_snapshot(source)


def load_request(source: "PathLike | Mapping[str, Any] | PlacementRequest") -> PlacementRequest:
    """Return a PlacementRequest from a model object, a dict, or a JSON/YAML file path."""
    from placer import _validation

    return _validation.coerce_request(source)


def load_result(source: "PathLike | Mapping[str, Any] | PlacementResult") -> PlacementResult:
    """Return a PlacementResult from a model object, a dict, or a JSON/YAML file path."""
    from placer import _validation

    return _validation.coerce_result(source)
