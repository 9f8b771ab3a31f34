"""The placer/v1 documents as frozen value objects.

Every class here is a frozen :class:`msgspec.Struct`. The objects of a snapshot that come in
by the hundred thousand (:class:`Node`, :class:`RunningPod`, :class:`Taint`,
:class:`ResourceAmount`) declare their JSON names and are decoded straight from the file by
:mod:`placer.schema`; the others are built by it from decoded documents. ``to_dict`` writes
each back, and ``from_dict(x.to_dict()) == x`` holds for every valid document. Units are in
the names: ``cpu_milli`` (1000 = one core), ``memory_mib``, ``gpu_milli`` (1000 = one GPU),
``gpu_memory_mib``. A capacity of ``None`` is not tracked (no limit).

This module imports nothing above it: decoding a document is :mod:`placer.schema`'s work,
which registers itself here (:func:`set_decoders`) so that ``ClusterSnapshot.from_dict``
and the ``load_*`` functions keep working.
"""
from __future__ import annotations

import copyreg
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, Mapping, Optional, Sequence, Union

import msgspec
from msgspec import Meta, Struct, field

from placer.limits import (
    MAX_GPU_MEMORY_MIB,
    MAX_GPU_REPLICAS,
    MAX_GPUS,
    MAX_MIG_COUNT,
    MAX_MIG_SLICES,
    MAX_PODS_PER_NODE,
    MAX_QUANTITY,
    MILLI,
    PRIORITY_MAX,
    PRIORITY_MIN,
)

from placer import policies
from placer.model.roles import Role, declare, fields_with, SHAPE_ROLES, canonical, written
from placer.model.affinity import Affinity, TopologySpreadConstraint
from placer.model.ports import HostPort
from placer.model.topology import GpuTopology, Nic

__all__ = [
    "API_VERSION",
    "UNSCHEDULABLE_TAINT",
    "tolerates_unschedulable",
    "TAINT_FILTER_EFFECTS",
    "first_untolerated_taint",
    "POLICIES",
    "SOLVERS",
    "GANG_MODES",
    "TAINT_EFFECTS",
    "EMPTY",
    "HARDWARE_FIELDS",
    "GPU_SHARING_STRATEGIES",
    "GpuSharing",
    "InlineHardware",
    "Taint",
    "Toleration",
    "MIG_MODES",
    "MigConfig",
    "MigInstance",
    "MigRequest",
    "MigUse",
    "PREEMPTION_MODES",
    "PREEMPTION_POLICIES",
    "PodDisruptionBudget",
    "Preemption",
    "Move",
    "RoomMade",
    "NodeType",
    "RunningPod",
    "ResourceAmount",
    "Node",
    "ClusterSnapshot",
    "PodRequest",
    "SliceSpec",
    "GangSpec",
    "PlacementRequest",
    "ResourceSpec",
    "UtilizationShapePoint",
    "RequestedToCapacityRatioParam",
    "ScoringStrategy",
    "Assignment",
    "Unschedulable",
    "GangResult",
    "PlacementResult",
    "replace",
    "load_snapshot",
    "load_request",
    "load_result",
]

API_VERSION = "placer/v1"
POLICIES = policies.names()  # every placement policy (placer.policies.REGISTRY), in its order
SOLVERS = ("auto", "greedy", "exact")
GANG_MODES = ("required", "preferred", "unconstrained")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MIG_MODES = ("static", "dynamic")
PREEMPTION_MODES = ("none", "greedy", "exact", "auto")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
GPU_SHARING_STRATEGIES = ("time-slicing", "mps")

EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _read_only(mapping: Mapping[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(dict(mapping))


def _reduce_mapping_proxy(proxy: MappingProxyType) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _read_only, (dict(proxy),)


# Model objects hold read-only mappings; results sent back from worker processes or Ray
# tasks are pickled, and a mapping proxy is not picklable by default.
copyreg.pickle(MappingProxyType, _reduce_mapping_proxy)
"""The shared empty mapping every absent mapping field holds (read-only)."""

PathLike = Union[str, Path]

# Value types of the fields decoded straight from JSON: msgspec checks them while decoding.
Name = Annotated[str, Meta(min_length=1)]
GpuCount = Annotated[int, Meta(ge=0, le=MAX_GPUS)]
Quantity = Annotated[int, Meta(ge=0, le=MAX_QUANTITY)]
GpuMemory = Annotated[int, Meta(ge=0, le=MAX_GPU_MEMORY_MIB)]
PodSlots = Annotated[int, Meta(ge=0, le=MAX_PODS_PER_NODE)]
Share = Annotated[int, Meta(ge=1, le=MILLI)]
Priority = Annotated[int, Meta(ge=PRIORITY_MIN, le=PRIORITY_MAX)]
GpuIndexValue = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]  # the range is checked per node
GpuIndexKey = Annotated[int, Meta(ge=0, le=MAX_GPUS - 1)]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
MigStart = Annotated[int, Meta(ge=0, le=MAX_MIG_SLICES - 1)]
StartTime = Union[Annotated[float, Meta(ge=-(2.0**40), le=2.0**40)], str]  # epoch seconds, or RFC 3339
Budget = Union[Annotated[int, Meta(ge=0, le=MAX_QUANTITY)], str]  # a count, or a percentage "50%"
SlotCount = Annotated[int, Meta(ge=1, le=MAX_GPU_REPLICAS)]

replace = msgspec.structs.replace
"""Return a copy of a model object with some fields changed (``replace(pod, gang=None)``)."""

def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Taint(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A node taint (Kubernetes semantics)."""

    key: Name
    effect: TaintEffect
    value: str = ""
    time_added: Optional[str] = field(default=None, name="timeAdded")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"key": self.key}
        if self.value:
            d["value"] = self.value
        d["effect"] = self.effect
        if self.time_added is not None:
            d["timeAdded"] = self.time_added
        return d


declare(
    Taint,
    key=Role.FILTER,
    effect=Role.FILTER,
    value=Role.FILTER,
    time_added=Role.SPECIAL,
)


class Toleration(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A pod toleration (Kubernetes semantics).

    An empty ``key`` with operator ``Exists`` tolerates every taint; an empty ``effect``
    matches every effect.
    """

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: Optional[Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]] = field(
        default=None, name="tolerationSeconds"
    )

    def tolerates(self, taint: Taint) -> bool:
        """Whether this toleration tolerates ``taint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.key:
            d["key"] = self.key
        d["operator"] = self.operator
        if self.value:
            d["value"] = self.value
        if self.effect:
            d["effect"] = self.effect
        if self.toleration_seconds is not None:
            d["tolerationSeconds"] = self.toleration_seconds
        return d


declare(
    Toleration,
    key=Role.FILTER,
    operator=Role.FILTER,
    value=Role.FILTER,
    effect=Role.FILTER,
    toleration_seconds=Role.SPECIAL,  # how long a NoExecute taint is tolerated: never a filter
)

# The taint kube-scheduler's NodeUnschedulable plugin tests a pod's tolerations against on a
# cordoned node (``spec.unschedulable``): a pod that tolerates it may go there.
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


def tolerates_unschedulable(tolerations: Sequence[Toleration]) -> bool:
    """Whether a pod with ``tolerations`` may go to a cordoned node (``unschedulable``), as
    kube-scheduler's NodeUnschedulable filter decides."""
    return any(t.tolerates(UNSCHEDULABLE_TAINT) for t in tolerations)


TAINT_FILTER_EFFECTS = ("NoSchedule", "NoExecute")
"""The taint effects kube-scheduler's TaintToleration filter tests (``PreferNoSchedule`` only scores)."""


def first_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Optional[Taint]:
    """The first of a node's ``taints`` of a filtering effect that no toleration tolerates
    (kube's ``FindMatchingUntoleratedTaint``); None when the pod tolerates them all."""
    for taint in taints:
        if taint.effect in TAINT_FILTER_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


class MigConfig(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """The GPUs of a node in MIG mode (``"all"``, or their indices) and how instances come.

    ``static``: only instances that exist are used (the device plugin's mixed strategy,
    mig-parted layouts). ``dynamic``: placer may also create an instance at any valid start
    whose slices are free (HAMi, the DRA driver); an instance on a dynamic GPU goes away when
    its pod is released.
    """

    gpus: Union[Literal["all"], tuple[GpuIndexValue, ...]] = "all"
    mode: Literal["static", "dynamic"] = "static"

    def indices(self, gpus: int) -> tuple[int, ...]:
        """The MIG GPUs' indices on a node of ``gpus`` GPUs."""
        return tuple(range(gpus)) if self.gpus == "all" else tuple(sorted(set(self.gpus)))

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus if self.gpus == "all" else list(self.gpus), "mode": self.mode}


declare(
    MigConfig,
    gpus=Role.RESOURCE,
    mode=Role.RESOURCE,
)


class MigInstance(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A MIG instance on a node: its GPU, profile name (``3g.40gb``) and start slice.

    ``device``: the name ``NVIDIA_VISIBLE_DEVICES`` takes for it (``MIG-<uuid>``, or
    ``MIG-GPU-<uuid>/<gi>/<ci>``) when the importer knew it.
    """

    gpu: GpuIndexValue
    profile: Name
    start: MigStart
    device: Optional[Name] = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"gpu": self.gpu, "profile": self.profile, "start": self.start}
        if self.device is not None:
            d["device"] = self.device
        return d


declare(
    MigInstance,
    gpu=Role.RESOURCE,
    profile=Role.RESOURCE,
    start=Role.RESOURCE,
    device=Role.OUTPUT,
)


class MigRequest(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel"):
    """What a pod asks of MIG: ``count`` instances of ``profile`` (the resource
    ``nvidia.com/mig-<profile>``), or of the smallest profile whose memory holds
    ``memory_mib`` on the node's GPU model."""

    profile: Optional[Name] = None
    count: Annotated[int, Meta(ge=1, le=MAX_MIG_COUNT)] = 1
    memory_mib: Optional[Annotated[int, Meta(ge=1, le=MAX_GPU_MEMORY_MIB)]] = field(default=None, name="memoryMiB")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.profile is not None:
            d["profile"] = self.profile
        if self.memory_mib is not None:
            d["memoryMiB"] = self.memory_mib
        d["count"] = self.count
        return d


declare(
    MigRequest,
    profile=Role.RESOURCE,
    count=Role.RESOURCE,
    memory_mib=Role.RESOURCE,
)


class MigUse(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """One MIG instance an assignment uses; ``create``: it must be created first."""

    gpu: Annotated[int, Meta(ge=0, le=MAX_GPUS - 1)]
    profile: Name
    start: MigStart
    create: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "profile": self.profile, "start": self.start, "create": self.create}

declare(
    MigUse,
    gpu=Role.OUTPUT,
    profile=Role.OUTPUT,
    start=Role.OUTPUT,
    create=Role.OUTPUT,
)


class GpuSharing(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """How a node's device plugin shares each GPU: ``replicas`` slots per physical GPU.

    ``strategy`` is ``time-slicing`` (slots take turns on the whole GPU: every model on a
    GPU must fit its memory together) or ``mps`` (CUDA MPS: one slot per pod, each slot
    limited to ``gpuMemoryMiB // replicas`` of memory). A node that shares its GPUs offers
    slots only: pods ask for them with ``gpuSlots`` (see ``docs/placement-rules.md``).
    """

    strategy: Literal["time-slicing", "mps"]
    replicas: Annotated[int, Meta(ge=2, le=MAX_GPU_REPLICAS)]

    @property
    def slot_milli(self) -> int:
        """The ``gpuMilli`` one slot holds of its GPU in the kernel (``1000 // replicas``)."""
        return MILLI // self.replicas

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "replicas": self.replicas}


declare(
    GpuSharing,
    strategy=Role.GATED,
    replicas=Role.GATED,
)


class NodeType(Struct, frozen=True, gc=False):
    """Hardware of a node: GPUs and the capacities the scheduler tracks."""

    gpus: int = 0
    gpu_model: Optional[str] = None
    gpu_memory_mib: Optional[int] = None
    cpu_milli: Optional[int] = None
    memory_mib: Optional[int] = None
    max_pods: Optional[int] = None
    gpu_topology: Optional[GpuTopology] = None
    nics: Optional[tuple[Nic, ...]] = None
    mig: Optional[MigConfig] = None

    @property
    def mig_gpus(self) -> tuple[int, ...]:
        """Indices of the GPUs in MIG mode (none without ``mig``)."""
        return () if self.mig is None else self.mig.indices(self.gpus)
    gpu_sharing: Optional[GpuSharing] = None

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
                "mig": self.mig.to_dict() if self.mig is not None else None,
                "gpuSharing": self.gpu_sharing.to_dict() if self.gpu_sharing is not None else None,
            }
        )


declare(
    NodeType,
    gpus=Role.RESOURCE,
    gpu_model=Role.FILTER,
    gpu_memory_mib=Role.RESOURCE,
    cpu_milli=Role.RESOURCE,
    memory_mib=Role.RESOURCE,
    max_pods=Role.RESOURCE,
    gpu_topology=Role.ORDER,
    nics=Role.GATED,
    mig=Role.RESOURCE,
    gpu_sharing=Role.GATED,
)


class RunningPod(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel"):
    """A pod already running on a node and what it holds there.

    ``gpus`` are whole GPUs held exclusively; ``gpu_shares`` maps a GPU index to the
    ``gpuMilli`` held on it by a shared pod and ``gpu_memory_mib`` maps a GPU index to the
    GPU memory held there. When the source did not say which GPUs a pod holds (the
    document's ``unknownGpus: n``), ``gpus`` are the n highest-indexed healthy GPUs no other
    pod of the node holds, and ``gpu_indices_known`` is False. ``resources`` counts the
    extended resources it holds (``nvidia.com/mig-1g.10gb`` …). On a node that shares its
    GPUs (``gpuSharing``), ``gpu_slots`` maps a GPU index to the slots the pod holds there
    (``unknownGpuSlots: n`` when the source did not say which: placer spreads them, see
    :mod:`placer.schema.snapshot`).
    """

    name: Name
    gpus: tuple[GpuIndexValue, ...] = ()
    gpu_shares: Mapping[GpuIndexKey, Share] = EMPTY
    gpu_memory_mib: Mapping[GpuIndexKey, GpuMemory] = field(default=EMPTY, name="gpuMemoryMiB")
    cpu_milli: Quantity = 0
    memory_mib: Quantity = field(default=0, name="memoryMiB")
    priority: Priority = 0
    resources: Mapping[Name, Quantity] = EMPTY
    unknown_gpus: GpuCount = 0
    mig: tuple[MigInstance, ...] = ()
    gpu_slots: Mapping[GpuIndexKey, SlotCount] = EMPTY
    unknown_gpu_slots: Annotated[int, Meta(ge=0, le=MAX_GPUS * MAX_GPU_REPLICAS)] = 0
    start_time: Optional[StartTime] = None
    labels: Mapping[Name, str] = EMPTY
    gang: Optional[Name] = None
    preemptible: bool = True
    movable: bool = False
    terminating: bool = False
    disruption_target: Optional[Name] = None
    affinity: Optional[Affinity] = None
    host_ports: tuple[HostPort, ...] = ()

    @property
    def gpu_indices_known(self) -> bool:
        """Whether the source named the GPUs this pod holds (no ``unknownGpus`` or
        ``unknownGpuSlots``)."""
        return not (self.unknown_gpus or self.unknown_gpu_slots)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.gpus and not self.unknown_gpus:
            d["gpus"] = list(self.gpus)
        elif self.unknown_gpus:
            d["unknownGpus"] = self.unknown_gpus
        if self.gpu_shares:
            d["gpuShares"] = {str(k): v for k, v in self.gpu_shares.items()}
        if self.unknown_gpu_slots:
            d["unknownGpuSlots"] = self.unknown_gpu_slots
        elif self.gpu_slots:
            d["gpuSlots"] = {str(k): v for k, v in self.gpu_slots.items()}
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
        if self.mig:
            d["mig"] = [m.to_dict() for m in self.mig]
        if self.start_time is not None:
            d["startTime"] = self.start_time
        if self.labels:
            d["labels"] = dict(self.labels)
        if self.gang is not None:
            d["gang"] = self.gang
        if not self.preemptible:
            d["preemptible"] = False
        if self.movable:
            d["movable"] = True
        if self.terminating:
            d["terminating"] = True
        if self.disruption_target is not None:
            d["disruptionTarget"] = self.disruption_target
        if self.affinity is not None:
            d["affinity"] = self.affinity.to_dict()
        if self.host_ports:
            d["hostPorts"] = [p.to_dict() for p in self.host_ports]
        return d

    @property
    def started_at(self) -> float | None:
        """Start time in epoch seconds (None: not known, which preemption reads as "now")."""
        return None if self.start_time is None else float(self.start_time)


declare(
    RunningPod,
    name=Role.IDENTITY,
    gpus=Role.RESOURCE,
    gpu_shares=Role.RESOURCE,
    gpu_memory_mib=Role.RESOURCE,
    cpu_milli=Role.RESOURCE,
    memory_mib=Role.RESOURCE,
    priority=Role.ORDER,
    resources=Role.RESOURCE,
    unknown_gpus=Role.RESOURCE,
    mig=Role.RESOURCE,
    gpu_slots=Role.RESOURCE,
    unknown_gpu_slots=Role.RESOURCE,
    start_time=Role.ORDER,
    labels=Role.FILTER,
    gang=Role.GROUPING,
    preemptible=Role.SPECIAL,
    movable=Role.SPECIAL,
    terminating=Role.SPECIAL,
    disruption_target=Role.SPECIAL,
    affinity=Role.RELATIONAL,  # its required anti-affinity keeps matching pods away (kube's symmetry)
    host_ports=Role.RELATIONAL,  # the ports it holds keep off the pods that need one of them
)


class PodDisruptionBudget(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel"):
    """A PodDisruptionBudget (Kubernetes semantics): the running pods whose ``labels`` hold
    every pair of ``selector`` (in ``namespace``, the part of a pod name before ``/``,
    when given) may lose at most ``disruptions_allowed`` pods; given as the controller's
    ``disruptionsAllowed``, or worked out from ``minAvailable`` or ``maxUnavailable`` (a
    count or a percentage such as ``"50%"``, rounded up as Kubernetes does)."""

    name: Name
    selector: Mapping[Name, str] = EMPTY
    namespace: Optional[Name] = None
    min_available: Optional[Budget] = None
    max_unavailable: Optional[Budget] = None
    disruptions_allowed: Optional[Annotated[int, Meta(ge=0, le=MAX_QUANTITY)]] = None
    disrupted_pods: tuple[Name, ...] = ()

    def matches(self, pod: "RunningPod") -> bool:
        """Whether the budget covers ``pod`` (an empty selector covers nothing, as in Kubernetes)."""
        if not self.selector or (self.namespace is not None and pod.name.split("/", 1)[0] != self.namespace):
            return False
        return all(pod.labels.get(k) == v for k, v in self.selector.items())

    def allowed(self, matching: int) -> int:
        """Disruptions allowed now, with ``matching`` healthy pods covered."""
        if self.disruptions_allowed is not None:
            return self.disruptions_allowed
        if self.min_available is not None:
            return max(matching - _budget(self.min_available, matching), 0)
        if self.max_unavailable is not None:
            return _budget(self.max_unavailable, matching)
        return 0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "selector": dict(self.selector)}
        if self.namespace is not None:
            d["namespace"] = self.namespace
        for key, v in (("minAvailable", self.min_available), ("maxUnavailable", self.max_unavailable),
                       ("disruptionsAllowed", self.disruptions_allowed)):
            if v is not None:
                d[key] = v
        if self.disrupted_pods:
            d["disruptedPods"] = list(self.disrupted_pods)
        return d


declare(
    PodDisruptionBudget,
    name=Role.IDENTITY,
    selector=Role.FILTER,
    namespace=Role.FILTER,
    min_available=Role.SPECIAL,
    max_unavailable=Role.SPECIAL,
    disruptions_allowed=Role.SPECIAL,
    disrupted_pods=Role.SPECIAL,
)


def _budget(value: "int | str", total: int) -> int:
    """A PDB count, or a percentage of ``total`` rounded up (Kubernetes' rule)."""
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    return -(-percent * total // 100)


class ResourceAmount(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """Capacity and allocatable count of one extended resource on a node."""

    capacity: Quantity
    allocatable: Quantity

    def to_dict(self) -> dict[str, int]:
        return {"capacity": self.capacity, "allocatable": self.allocatable}


declare(
    ResourceAmount,
    capacity=Role.GATED,
    allocatable=Role.GATED,
)


if TYPE_CHECKING:
    _Hardware = NodeType
else:  # the field is not decoded from JSON: a JSON ``hardware`` key is refused by the schema
    _Hardware = Any


class InlineHardware(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """The hardware fields a node type or a node gives (``None`` where not given).

    ``gpu_topology`` and ``nics`` hold the forms as written in the document.
    """

    gpus: Optional[GpuCount] = None
    gpu_model: Optional[Name] = None
    gpu_memory_mib: Optional[GpuMemory] = field(default=None, name="gpuMemoryMiB")
    cpu_milli: Optional[Quantity] = None
    memory_mib: Optional[Quantity] = field(default=None, name="memoryMiB")
    max_pods: Optional[PodSlots] = None
    gpu_topology: Optional[dict[str, Any]] = None
    nics: Optional[list[dict[str, Any]]] = None
    mig: Optional[MigConfig] = None
    gpu_sharing: Optional[GpuSharing] = None

    @property
    def overrides(self) -> dict[str, Any]:
        """The hardware fields given, by their JSON names."""
        return _drop_none({key: getattr(self, attr) for key, attr in HARDWARE_FIELDS.items()})


declare(InlineHardware, like=NodeType)
HARDWARE_FIELDS = {f.encode_name: f.name for f in msgspec.structs.fields(InlineHardware)}
"""A node's inline hardware fields: JSON name to attribute name (of :class:`Node`)."""


class Node(InlineHardware, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel"):
    """One node of a snapshot.

    ``hardware`` is the effective hardware: the node type's fields with the node's inline
    hardware fields (:class:`InlineHardware`, given by keyword; :attr:`overrides`) laid
    over them.
    """

    name: Name
    hardware: Optional[_Hardware] = None
    type: Optional[str] = None
    topology: Mapping[str, Name] = EMPTY
    labels: Mapping[Name, str] = EMPTY
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    unhealthy_gpus: tuple[GpuIndexValue, ...] = ()
    pods: tuple[RunningPod, ...] = ()
    resources: Mapping[Name, ResourceAmount] = EMPTY
    mig_instances: tuple[MigInstance, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        if self.type is not None:
            d["type"] = self.type
        d.update(self.overrides)
        if self.mig is not None:
            d["mig"] = self.mig.to_dict()
        if self.gpu_sharing is not None:
            d["gpuSharing"] = self.gpu_sharing.to_dict()
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
        if self.mig_instances:
            d["migInstances"] = [m.to_dict() for m in self.mig_instances]
        if self.pods:
            d["pods"] = [p.to_dict() for p in self.pods]
        return d


declare(
    Node,
    like=InlineHardware,
    name=Role.IDENTITY,
    hardware=Role.SPECIAL,
    type=Role.SPECIAL,
    topology=Role.GROUPING,
    labels=Role.FILTER,
    taints=Role.FILTER,
    unschedulable=Role.FILTER,
    unhealthy_gpus=Role.RESOURCE,
    pods=Role.RESOURCE,
    resources=Role.GATED,
    mig_instances=Role.RESOURCE,
)


class ClusterSnapshot(Struct, frozen=True):
    """The cluster as it is now: node types, nodes and the pods running on them."""

    nodes: tuple[Node, ...]
    node_types: Mapping[str, NodeType] = EMPTY
    topology_levels: tuple[str, ...] = ()
    pod_disruption_budgets: tuple[PodDisruptionBudget, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ClusterSnapshot":
        """Validate a ClusterSnapshot document and build it."""
        return _decoder("snapshot_from_dict")(data)

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
        if self.pod_disruption_budgets:
            d["podDisruptionBudgets"] = [b.to_dict() for b in self.pod_disruption_budgets]
        return d


declare(
    ClusterSnapshot,
    nodes=Role.SPECIAL,
    node_types=Role.SPECIAL,
    topology_levels=Role.GROUPING,
    pod_disruption_budgets=Role.SPECIAL,
)


class PodRequest(Struct, frozen=True, gc=False):
    """One pod to place (``replicas`` already expanded)."""

    name: str
    gpus: int = 0
    gpu_milli: int = 1000
    gpu_memory_mib: int = 0
    gpu_models: tuple[str, ...] = ()
    cpu_milli: int = 0
    memory_mib: int = 0
    node_selector: Mapping[str, str] = EMPTY
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0
    gang: Optional[str] = None
    nics: int = 0
    resources: Mapping[str, int] = EMPTY
    mig: Optional[MigRequest] = None
    gpu_slots: int = 0
    preemption_policy: str = "PreemptLowerPriority"
    nominated_node: Optional[str] = None
    labels: Mapping[str, str] = EMPTY
    node_name: Optional[str] = None
    affinity: Optional[Affinity] = None
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    @property
    def shared(self) -> bool:
        """Whether this pod takes a share of one GPU rather than whole GPUs."""
        return self.gpus == 1 and self.gpu_milli < 1000

    @property
    def uses_gpus(self) -> bool:
        """Whether this pod asks for GPUs in any form (whole, a share, or slots)."""
        return self.gpus > 0 or self.gpu_slots > 0

    def to_dict(self) -> dict[str, Any]:
        return _pod_request_dict(self)


declare(
    PodRequest,
    name=Role.IDENTITY,
    gpus=Role.RESOURCE,
    gpu_milli=Role.RESOURCE,
    gpu_memory_mib=Role.RESOURCE,
    gpu_models=Role.FILTER,
    cpu_milli=Role.RESOURCE,
    memory_mib=Role.RESOURCE,
    node_selector=Role.FILTER,
    tolerations=Role.FILTER,
    priority=Role.ORDER,
    gang=Role.GROUPING,
    nics=Role.GATED,
    resources=Role.GATED,
    mig=Role.RESOURCE,
    gpu_slots=Role.GATED,
    preemption_policy=Role.SPECIAL,
    nominated_node=Role.SPECIAL,
    labels=Role.RELATIONAL,
    node_name=Role.FILTER,
    affinity=Role.FILTER,
    topology_spread_constraints=Role.RELATIONAL,
    host_ports=Role.RELATIONAL,  # the ports placed pods took decide where it fits
)
# every field not at its default, under its JSON name (camelCase but for these)
_pod_request_dict = written(
    PodRequest,
    {"gpu_memory_mib": "gpuMemoryMiB", "memory_mib": "memoryMiB", "nominated_node": "nominatedNodeName"},
)
_SHAPE_FIELDS = fields_with(PodRequest, *SHAPE_ROLES)


def shape_key(pod: PodRequest) -> tuple:
    """Pods with equal keys are interchangeable for placement: the fields of the shape
    roles (:data:`placer.model.roles.SHAPE_ROLES`), mappings and model lists in any order."""
    return tuple(canonical(getattr(pod, name)) for name in _SHAPE_FIELDS)


def gang_shapes(pods: Sequence[PodRequest]) -> list[list[int]]:
    """The indices of a gang's pods grouped by shape, largest first.

    Largest: most GPUs in total (GPUs × ``gpuMilli`` × pods), then most CPU in total,
    then most pods; ties keep the order in which the shapes first appear. The first
    group is the gang's *main shape*: the pods its slices count.
    """
    groups: dict[tuple, list[int]] = {}
    for i, pod in enumerate(pods):
        groups.setdefault(shape_key(pod), []).append(i)

    def size(members: list[int]) -> tuple[int, int, int]:
        p, n = pods[members[0]], len(members)
        return (p.gpus * p.gpu_milli * n, p.cpu_milli * n, n)

    return sorted(groups.values(), key=size, reverse=True)


class SliceSpec(Struct, frozen=True, gc=False):
    """Every consecutive ``size`` pods of the gang's main shape share one domain of ``level``
    (the main shape: the first group of :func:`gang_shapes`)."""

    level: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "size": self.size}


declare(
    SliceSpec,
    level=Role.GROUPING,
    size=Role.GROUPING,
)


class GangSpec(Struct, frozen=True, gc=False):
    """Placement constraints of a gang (all its pods are placed together or none)."""

    name: str
    mode: str = "unconstrained"
    level: Optional[str] = None
    slices: tuple[SliceSpec, ...] = ()
    same_gpu_model: bool = True
    solver: Optional[str] = None
    time_limit_s: Optional[float] = None

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


declare(
    GangSpec,
    name=Role.IDENTITY,
    mode=Role.GROUPING,
    level=Role.GROUPING,
    slices=Role.GROUPING,
    same_gpu_model=Role.GROUPING,
    solver=Role.SPECIAL,
    time_limit_s=Role.SPECIAL,
)


class ResourceSpec(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A resource NodeResourcesFit scores and its weight (kube's ``config.ResourceSpec``)."""

    name: Name
    weight: Annotated[int, Meta(ge=1, le=100)] = 1


class UtilizationShapePoint(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """A point of ``RequestedToCapacityRatio``'s shape (kube's ``config.UtilizationShapePoint``)."""

    utilization: Annotated[int, Meta(ge=0, le=100)]
    score: Annotated[int, Meta(ge=0, le=10)]


class RequestedToCapacityRatioParam(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """``RequestedToCapacityRatio``'s shape, utilization strictly increasing."""

    shape: tuple[UtilizationShapePoint, ...]


class ScoringStrategy(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel"):
    """NodeResourcesFit's scoring strategy as kube-scheduler's configuration writes it
    (``NodeResourcesFitArgs.scoringStrategy``), for the kube-scored policies.

    ``type`` left out is the policy's own strategy; ``resources`` left out are cpu and
    memory of weight 1 (kube's default).
    """

    type: Optional[Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]] = None
    resources: tuple[ResourceSpec, ...] = ()
    requested_to_capacity_ratio: Optional[RequestedToCapacityRatioParam] = None

    def to_dict(self) -> dict[str, Any]:
        return msgspec.json.decode(msgspec.json.encode(self))  # type: ignore[no-any-return]


declare(ResourceSpec, name=Role.ORDER, weight=Role.ORDER)
declare(UtilizationShapePoint, utilization=Role.ORDER, score=Role.ORDER)
declare(RequestedToCapacityRatioParam, shape=Role.ORDER)
declare(ScoringStrategy, type=Role.ORDER, resources=Role.ORDER, requested_to_capacity_ratio=Role.ORDER)


class PlacementRequest(Struct, frozen=True):
    """Pods to place, in order, with the gangs they form and the policy to use."""

    pods: tuple[PodRequest, ...]
    gangs: Mapping[str, GangSpec] = EMPTY
    policy: str = policies.DEFAULT
    seed: int = 0
    solver: str = "auto"
    time_limit_s: float = 10.0
    time_budget_s: float = 60.0
    joint: bool = False
    preemption: str = "none"
    scoring_strategy: Optional[ScoringStrategy] = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PlacementRequest":
        """Validate a PlacementRequest document and build it."""
        return _decoder("request_from_dict")(data)

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
        if self.time_budget_s != 60.0:
            d["timeBudgetS"] = self.time_budget_s
        if self.joint:
            d["joint"] = True
        if self.preemption != "none":
            d["preemption"] = self.preemption
        if self.scoring_strategy is not None:
            d["scoringStrategy"] = self.scoring_strategy.to_dict()
        d["pods"] = [p.to_dict() for p in self.pods]
        if self.gangs:
            d["gangs"] = {k: g.to_dict() for k, g in self.gangs.items()}
        return d


declare(
    PlacementRequest,
    pods=Role.SPECIAL,
    gangs=Role.GROUPING,
    policy=Role.ORDER,
    seed=Role.ORDER,
    solver=Role.SPECIAL,
    time_limit_s=Role.SPECIAL,
    time_budget_s=Role.SPECIAL,
    joint=Role.SPECIAL,
    preemption=Role.SPECIAL,
    scoring_strategy=Role.ORDER,
)


class Assignment(Struct, frozen=True, gc=False):
    """Where one pod goes: a node and GPU device indices on it.

    ``gpu_milli`` is set for a shared pod (its share of ``gpus[0]``). ``gpu_slots`` is set
    for a pod of ``gpuSlots`` on a node that shares its GPUs: slots per physical GPU
    (``gpus`` lists those GPUs once each); a count above 1 means the pod's slots share
    that GPU (stacked).
    """

    pod: str
    node: str
    gpus: tuple[int, ...] = ()
    gpu_milli: Optional[int] = None
    gang: Optional[str] = None
    nics: tuple[str, ...] = ()
    mig: tuple[MigUse, ...] = ()
    gpu_slots: Mapping[int, int] = EMPTY
    nominated: bool = False

    @property
    def stacked_slots(self) -> bool:
        """Whether some GPU holds more than one of this pod's slots."""
        return any(count > 1 for count in self.gpu_slots.values())

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pod": self.pod, "node": self.node, "gpus": list(self.gpus)}
        if self.gpu_milli is not None:
            d["gpuMilli"] = self.gpu_milli
        if self.gang is not None:
            d["gang"] = self.gang
        if self.nics:
            d["nics"] = list(self.nics)
        if self.mig:
            d["mig"] = [m.to_dict() for m in self.mig]
        if self.gpu_slots:
            d["gpuSlots"] = {str(k): v for k, v in self.gpu_slots.items()}
        if self.nominated:
            d["nominated"] = True
        return d


declare(
    Assignment,
    pod=Role.IDENTITY,
    node=Role.OUTPUT,
    gpus=Role.OUTPUT,
    gpu_milli=Role.OUTPUT,
    gang=Role.OUTPUT,
    nics=Role.OUTPUT,
    mig=Role.OUTPUT,
    gpu_slots=Role.OUTPUT,
    nominated=Role.OUTPUT,
)


class Unschedulable(Struct, frozen=True, gc=False):
    """A pod that could not be placed, with a kube-scheduler-style reason."""

    pod: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "reason": self.reason}


declare(
    Unschedulable,
    pod=Role.IDENTITY,
    reason=Role.OUTPUT,
)


class GangResult(Struct, frozen=True, gc=False):
    """The outcome for one gang.

    ``domains`` lists the domains used per level (``node`` included); ``domain_counts``
    counts them, and ``domain_bounds`` holds, per level, the fewest domains any placement
    of the gang needs, reached lexicographically from the outermost level. A placed gang
    whose counts equal its bounds uses the fewest domains (``status`` ``optimal`` from the
    greedy). ``objective`` and ``bound`` are CP-SAT's weighted figures.
    """

    name: str
    placed: bool
    solver: str = "greedy"
    status: str = "feasible"
    domains: Mapping[str, tuple[str, ...]] = EMPTY
    objective: Optional[float] = None
    bound: Optional[float] = None
    domain_bounds: Mapping[str, int] = EMPTY

    @property
    def domain_counts(self) -> dict[str, int]:
        """Domains used per level."""
        return {level: len(used) for level, used in self.domains.items()}

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "placed": self.placed,
            "solver": self.solver,
            "status": self.status,
        }
        if self.domains:
            d["domains"] = {k: list(v) for k, v in self.domains.items()}
            d["domainCounts"] = self.domain_counts
        if self.domain_bounds:
            d["domainBounds"] = dict(self.domain_bounds)
        if self.objective is not None:
            d["objective"] = self.objective
        if self.bound is not None:
            d["bound"] = self.bound
        return d


declare(
    GangResult,
    name=Role.IDENTITY,
    placed=Role.OUTPUT,
    solver=Role.OUTPUT,
    status=Role.OUTPUT,
    domains=Role.OUTPUT,
    objective=Role.OUTPUT,
    bound=Role.OUTPUT,
    domain_bounds=Role.OUTPUT,
)


class Preemption(Struct, frozen=True, gc=False):
    """The running pods evicted so that a pod or gang (``for_``, JSON ``for``) fits.

    ``victims`` are whole units (every pod of a running gang), on ``nodes``;
    ``pdb_violations`` counts the victims whose eviction breaks a PodDisruptionBudget.
    ``status`` is the solver's (``optimal``: no set of victims ranks better by the keys of
    ``docs/placement-rules.md``).
    """

    for_: str
    victims: tuple[str, ...]
    nodes: tuple[str, ...] = ()
    pdb_violations: int = 0
    solver: str = "greedy"
    status: str = "feasible"

    def to_dict(self) -> dict[str, Any]:
        return {
            "for": self.for_,
            "victims": list(self.victims),
            "nodes": list(self.nodes),
            "pdbViolations": self.pdb_violations,
            "solver": self.solver,
            "status": self.status,
        }


declare(
    Preemption,
    for_=Role.IDENTITY,
    victims=Role.OUTPUT,
    nodes=Role.OUTPUT,
    pdb_violations=Role.OUTPUT,
    solver=Role.OUTPUT,
    status=Role.OUTPUT,
)


class Move(Struct, frozen=True, gc=False):
    """One move of a running pod (``movable``) from node ``from_`` (JSON ``from``) to node
    ``to``, onto the GPU indices ``gpus`` there (a shared pod: its one GPU, with its share
    ``gpu_milli``). Moves happen in the order listed, each into room free at its turn;
    ``for_`` (JSON ``for``) names the requested pod the move makes room for."""

    pod: str
    from_: str
    to: str
    gpus: tuple[int, ...] = ()
    gpu_milli: Optional[int] = None
    for_: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pod": self.pod, "from": self.from_, "to": self.to, "gpus": list(self.gpus)}
        if self.gpu_milli is not None:
            d["gpuMilli"] = self.gpu_milli
        if self.for_ is not None:
            d["for"] = self.for_
        return d


declare(
    Move,
    pod=Role.IDENTITY,
    from_=Role.OUTPUT,
    to=Role.OUTPUT,
    gpus=Role.OUTPUT,
    gpu_milli=Role.OUTPUT,
    for_=Role.OUTPUT,
)


class RoomMade(Struct, frozen=True, gc=False):
    """How room was made by moving for one requested pod (``for_``, JSON ``for``): the
    number of moves, the GPU milli they moved, and the search's ``status`` — ``optimal``
    (no set of moves is smaller, nor as small and moving less GPU), ``feasible`` (found,
    not proven fewest), ``infeasible`` (proven: no moves of movable pods make it fit) or
    ``unknown`` (none found, none ruled out)."""

    for_: str
    moves: int = 0
    gpu_milli_moved: int = 0
    status: str = "feasible"

    def to_dict(self) -> dict[str, Any]:
        return {"for": self.for_, "moves": self.moves, "gpuMilliMoved": self.gpu_milli_moved, "status": self.status}


declare(
    RoomMade,
    for_=Role.IDENTITY,
    moves=Role.OUTPUT,
    gpu_milli_moved=Role.OUTPUT,
    status=Role.OUTPUT,
)


class PlacementResult(Struct, frozen=True):
    """Every requested pod, either assigned or unschedulable, plus gang outcomes, the
    preemptions that make room (assignments of preemptors are ``nominated``), and the
    moves that make room (``placer defrag``: ``moves`` in order, one :class:`RoomMade` per
    pod that needed them, whose assignment is ``nominated``)."""

    assignments: tuple[Assignment, ...] = ()
    unschedulable: tuple[Unschedulable, ...] = ()
    gangs: tuple[GangResult, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    moves: tuple[Move, ...] = ()
    rooms: tuple[RoomMade, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PlacementResult":
        """Validate a PlacementResult document and build it."""
        return _decoder("result_from_dict")(data)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "PlacementResult",
            "assignments": [a.to_dict() for a in self.assignments],
            "unschedulable": [u.to_dict() for u in self.unschedulable],
        }
        if self.gangs:
            d["gangs"] = [g.to_dict() for g in self.gangs]
        if self.preemptions:
            d["preemptions"] = [p.to_dict() for p in self.preemptions]
        if self.moves:
            d["moves"] = [m.to_dict() for m in self.moves]
        if self.rooms:
            d["rooms"] = [r.to_dict() for r in self.rooms]
        return d


declare(
    PlacementResult,
    assignments=Role.OUTPUT,
    unschedulable=Role.OUTPUT,
    gangs=Role.OUTPUT,
    preemptions=Role.OUTPUT,
    moves=Role.OUTPUT,
    rooms=Role.OUTPUT,
)


# ----------------------------------------------------------------------------- decoding hook

_DECODERS: dict[str, Callable[[Any], Any]] = {}


def set_decoders(**decoders: Callable[[Any], Any]) -> None:
    """Register the document decoders (done once by :mod:`placer.schema` on import)."""
    _DECODERS.update(decoders)


def _decoder(name: str) -> Callable[[Any], Any]:
    found = _DECODERS.get(name)
    if found is None:  # pragma: no cover - placer/__init__ imports the schema first
        raise RuntimeError("placer.schema is not loaded; import placer first")
    return found


def load_snapshot(source: "PathLike | Mapping[str, Any] | ClusterSnapshot") -> ClusterSnapshot:
    """Return a ClusterSnapshot from a model object, a dict, or a JSON/YAML file path."""
    return _decoder("coerce_snapshot")(source)


def load_request(source: "PathLike | Mapping[str, Any] | PlacementRequest") -> PlacementRequest:
    """Return a PlacementRequest from a model object, a dict, or a JSON/YAML file path."""
    return _decoder("coerce_request")(source)


def load_result(source: "PathLike | Mapping[str, Any] | PlacementResult") -> PlacementResult:
    """Return a PlacementResult from a model object, a dict, or a JSON/YAML file path."""
    return _decoder("coerce_result")(source)
