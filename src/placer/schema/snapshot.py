"""ClusterSnapshot documents (SPEC §1): the rules that span fields, and the model they build.

msgspec has already checked every field's type and range while decoding; what is left is
what one field cannot know alone: a node's type exists, its inline hardware over the type's,
GPU indices inside the node's GPU count and held once, GPU shares and slots within their GPU
(a node's CPU, memory, pod count and unhealthy GPUs may be over-committed), names unique
and free of control characters. A first pass takes the common node (a known type, whole-GPU
pods, nothing unusual) in a few attribute reads; every other node, and the whole snapshot
once anything is wrong, goes through the exact checks, which report the first fault in
document order.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NoReturn

import msgspec
from msgspec.structs import force_setattr

from placer.exceptions import InvalidInputError
from placer.schema.affinity import check_affinity
from placer.schema.ports import check_host_ports
from placer.limits import MILLI
from placer.model.mig_profiles import MigTable, table_for, tables
from placer.model import (
    EMPTY,
    ClusterSnapshot,
    MigConfig,
    MigInstance,
    Node,
    NodeType,
    PodDisruptionBudget,
    RunningPod,
)
from placer.schema._quick import SUMMED_POD_FIELDS, dict_nodes
from placer.schema._quick import finish_nodes as finish_common_nodes
from placer.schema.documents import NodeTypeDoc, SnapshotDoc
from placer.schema.errors import bad, control_error, has_control, listing, nest
from placer.model.topology import Nic, nics_from_spec, topology_from_spec

__all__ = ["DEFAULT_GPU_MODEL", "snapshot_from_doc", "plain_nodes", "merge_hardware", "snapshot_gpu_models"]

DEFAULT_GPU_MODEL = "gpu"


def _plain_fields() -> tuple[Any, ...] | None:
    """What :func:`plain_nodes` needs, read from the Node and RunningPod Structs: the keys
    as written of the fields it reads, templates with every other field at its default,
    the shortest name and the bounds of a GPU index, a pod's CPU and its memory. None when
    a field is not what it reads, or a class could not be copied field by field."""
    inspect = msgspec.inspect
    node_info = {f.name: f for f in inspect.type_info(Node).fields}
    pod_info = {f.name: f for f in inspect.type_info(RunningPod).fields}
    for cls in (Node, RunningPod):
        if hasattr(cls, "__post_init__") or any(f.default_factory is not msgspec.NODEFAULT
                                                for f in msgspec.structs.fields(cls)):
            return None  # a copy would share a mutable default, or skip a hook

    def plain_str(kind: Any) -> bool:
        return isinstance(kind, inspect.StrType) and kind.max_length is None and kind.pattern is None

    def bounds(kind: Any) -> tuple[int, int] | None:
        ok = (isinstance(kind, inspect.IntType) and kind.ge is not None and kind.le is not None and kind.gt is None
              and kind.lt is None and kind.multiple_of is None)
        return (kind.ge, kind.le) if ok else None

    name, pod_name = node_info["name"].type, pod_info["name"].type
    node_type = node_info["type"].type
    pods = node_info["pods"].type
    gpus = pod_info["gpus"].type
    if not (
        plain_str(name) and plain_str(pod_name) and name.min_length == pod_name.min_length
        and isinstance(node_type, inspect.UnionType) and any(plain_str(t) and not t.min_length for t in node_type.types)
        and isinstance(pods, inspect.VarTupleType) and pods.min_length is None and pods.max_length is None
        and isinstance(pods.item_type, inspect.StructType) and pods.item_type.cls is RunningPod
        and isinstance(gpus, inspect.VarTupleType) and gpus.min_length is None and gpus.max_length is None
    ):
        return None
    limits = [bounds(gpus.item_type), bounds(pod_info["cpu_milli"].type), bounds(pod_info["memory_mib"].type)]
    if None in limits:
        return None
    node_columns = {node_info[f].encode_name: k for k, f in enumerate(("name", "type", "pods"))}
    pod_columns = {pod_info[f].encode_name: k for k, f in enumerate(("name", *SUMMED_POD_FIELDS))}
    flat = tuple(x for pair in limits for x in pair if pair is not None)
    return node_columns, pod_columns, Node(name="-"), RunningPod(name="-"), name.min_length or 0, flat


_PLAIN_FIELDS = _plain_fields()


def plain_nodes(entries: Any) -> list[Node] | None:
    """The nodes of a snapshot document's ``nodes`` as written (dicts), when every entry is
    plain: a name, a type and pods, each pod a name, GPU indices, ``cpuMilli`` and
    ``memoryMiB``, every value of its type and within its bounds. They are what msgspec
    would decode, without its generic walk; the snapshot's rules are still to check. None
    otherwise: the document is then decoded whole, and its faults reported where they are.
    """
    if _PLAIN_FIELDS is None or type(entries) is not list:
        return None
    return dict_nodes(entries, *_PLAIN_FIELDS)
_EMPTY_HW = NodeType()


# ----------------------------------------------------------------------------- hardware


def _nics(v: Any, gpus: int) -> tuple[Nic, ...] | None:
    if v is None:
        return None
    if isinstance(v, tuple):
        if any(len(nic.labels) != gpus for nic in v):
            raise InvalidInputError("nics", f"the NICs describe links to a node of another GPU count than {gpus}")
        return v
    return nics_from_spec(v, gpus)


def merge_hardware(base: NodeType, given: Mapping[str, Any]) -> NodeType:
    """``base`` with the hardware fields ``given`` (JSON names, decoded) laid over it.

    A node with GPUs but no ``gpuModel`` gets the model ``gpu``.

    Raises
    ------
    InvalidInputError
        At ``gpuTopology…`` or ``nics…`` when those do not describe ``gpus`` GPUs.
    """
    gpus = given.get("gpus", base.gpus)
    model = given.get("gpuModel", base.gpu_model)
    if given.get("mig", base.mig) is not None and given.get("gpuSharing", base.gpu_sharing) is not None:
        raise InvalidInputError("gpuSharing", "placer models MIG or GPU sharing on a node, not both: give mig or gpuSharing")
    if model is None and gpus > 0:
        model = DEFAULT_GPU_MODEL
    return NodeType(
        gpus=gpus,
        gpu_model=model,
        gpu_memory_mib=given.get("gpuMemoryMiB", base.gpu_memory_mib),
        cpu_milli=given.get("cpuMilli", base.cpu_milli),
        memory_mib=given.get("memoryMiB", base.memory_mib),
        max_pods=given.get("maxPods", base.max_pods),
        gpu_topology=topology_from_spec(given["gpuTopology"] if "gpuTopology" in given else base.gpu_topology, gpus),
        nics=_nics(given["nics"] if "nics" in given else base.nics, gpus),
        mig=_mig_config(given["mig"] if "mig" in given else base.mig, gpus, model),
        gpu_sharing=given.get("gpuSharing", base.gpu_sharing),
    )


def _mig_config(config: MigConfig | None, gpus: int, model: str | None) -> MigConfig | None:
    """A node's MIG GPUs must exist and its GPU model must have a bundled MIG table."""
    if config is None:
        return None
    if config.gpus != "all":
        _gpu_list(config.gpus, gpus, "mig.gpus")
    if gpus and table_for(model) is None:
        known = ", ".join(sorted(tables()))
        raise InvalidInputError(
            "mig", f"GPU model {model!r} has no MIG profile table; placer knows MIG on: {known}"
        )
    return config


def _topology_levels(levels: list[str]) -> tuple[str, ...]:
    seen: dict[str, int] = {}
    for j, x in enumerate(levels):
        where = f"topologyLevels[{j}]"
        if not x:
            raise bad(where, "a non-empty string", x)
        if has_control(x):
            raise control_error(where, x)
        if x == "node":
            raise InvalidInputError(where, "'node' is implicit (always the innermost level); leave it out")
        if x in seen:
            raise InvalidInputError(where, f"duplicate level {x!r}, first at topologyLevels[{seen[x]}]")
        seen[x] = j
    return tuple(levels)


def _node_types(docs: Mapping[str, NodeTypeDoc]) -> dict[str, NodeType]:
    types: dict[str, NodeType] = {}
    for name, doc in docs.items():
        if has_control(name):
            raise control_error("nodeTypes", name)
        try:
            types[name] = merge_hardware(_EMPTY_HW, doc.overrides)
        except InvalidInputError as e:
            raise nest(e, f"nodeTypes.{name}") from None
    return types


# ----------------------------------------------------------------------------- exact checks


class _Exact:
    """The sequential checks of every node, in document order (the reference semantics)."""

    __slots__ = ("types", "levels", "level_set", "hw_cache", "pod_seen", "node_seen")

    def __init__(self, types: dict[str, NodeType], levels: tuple[str, ...]) -> None:
        self.types = types
        self.levels = levels
        self.level_set = frozenset(levels)
        self.hw_cache: dict[Any, NodeType] = {}
        self.pod_seen: dict[str, tuple[int, int]] = {}
        self.node_seen: dict[str, int] = {}

    def hardware(self, n: Node) -> NodeType:
        if n.hardware is not None and not isinstance(n.hardware, NodeType):
            raise InvalidInputError("", 'unknown field "hardware"')
        tname = n.type
        if tname is None:
            base = _EMPTY_HW
        else:
            found = self.types.get(tname)
            if found is None:
                raise InvalidInputError("type", f"unknown node type {tname!r}; nodeTypes has: {listing(self.types)}")
            base = found
        given = n.overrides
        if not given:
            return base
        if "gpuTopology" in given or "nics" in given:
            return merge_hardware(base, given)
        key = (tname, *given.items())
        cached = self.hw_cache.get(key)
        if cached is None:
            cached = self.hw_cache[key] = merge_hardware(base, given)
        return cached

    def node(self, n: Node, i: int) -> None:
        """Check node ``i`` and finish it (its hardware, pods' unknown GPUs); raise at the
        first fault, with a path relative to the node."""
        if has_control(n.name):
            raise control_error("name", n.name)
        hw = self.hardware(n)
        for k, v in n.topology.items():
            if k not in self.level_set:
                raise InvalidInputError(
                    f"topology.{k}", f"unknown topology level {k!r}; topologyLevels is: {listing(self.levels)}"
                )
            if has_control(v):
                raise control_error(f"topology.{k}", v)
        _gpu_list(n.unhealthy_gpus, hw.gpus, "unhealthyGpus")
        if hw.mig is None:
            if n.mig_instances:
                raise InvalidInputError("migInstances", "the node has no GPU in MIG mode (no `mig`)")
            if any(p.mig for p in n.pods):
                j = next(j for j, p in enumerate(n.pods) if p.mig)
                raise InvalidInputError(f"pods[{j}].mig", "the node has no GPU in MIG mode (no `mig`)")
        else:
            _mig_node(n, hw)
        if n.pods:
            self.pods(n, i, hw)
        force_setattr(n, "hardware", hw)

    def pods(self, node: Node, i: int, hw: NodeType) -> None:
        # Running pods above the node's cpuMilli, memoryMiB or maxPods, or on a GPU that has
        # turned unhealthy, load (kube keeps them, and places pods that do not need what is
        # over-committed): the free amount goes negative, ``placer report`` names them.
        raw = node.pods
        ngpus = hw.gpus
        unhealthy = node.unhealthy_gpus
        whole: dict[int, str] = {}
        share: dict[int, int] = {}
        share_by: dict[int, str] = {}
        gmem: dict[int, int] = {}
        slots: dict[int, int] = {}
        for j, p in enumerate(raw):
            try:
                self.pod(p, i, j, ngpus, hw, whole, share, share_by, gmem)
                _slot_holdings(p, hw, slots)
            except InvalidInputError as e:
                raise nest(e, f"pods[{j}]") from None
        taken = set(whole) | set(share)
        # an unknown GPU is a healthy free one, else one that turned unhealthy under its pod
        spare = [g for g in range(ngpus - 1, -1, -1) if g not in taken and g not in unhealthy]
        spare += [g for g in sorted(unhealthy, reverse=True) if g not in taken]
        for j, p in enumerate(raw):
            if p.unknown_gpus:
                if p.unknown_gpus > len(spare):
                    raise InvalidInputError(
                        f"pods[{j}].unknownGpus",
                        f"{p.unknown_gpus} GPU(s) held, but only {len(spare)} GPU(s) of the node are not "
                        "held by its other pods",
                    )
                force_setattr(p, "gpus", tuple(sorted(spare[: p.unknown_gpus])))
                spare = spare[p.unknown_gpus:]
        for j, p in enumerate(raw):
            if p.unknown_gpu_slots:
                try:
                    _spread_unknown_slots(p, hw, unhealthy, slots)
                except InvalidInputError as e:
                    raise nest(e, f"pods[{j}]") from None

    def pod(
        self, p: RunningPod, i: int, j: int, ngpus: int, hw: NodeType, whole: dict[int, str], share: dict[int, int], share_by: dict[int, str], gmem: dict[int, int],
    ) -> None:
        name = p.name
        if has_control(name):
            raise control_error("name", name)
        first = self.pod_seen.get(name)
        if first is not None and first != (i, j):
            raise InvalidInputError("name", f"duplicate pod name {name!r}, first at nodes[{first[0]}].pods[{first[1]}]")
        self.pod_seen[name] = (i, j)
        _pod_meta(p)
        for k, x in enumerate(() if p.unknown_gpus else p.gpus):
            if not 0 <= x < ngpus:
                _out_of_range(x, ngpus, f"gpus[{k}]")
            if x in whole:
                holder = whole[x]
                raise InvalidInputError(
                    f"gpus[{k}]", f"GPU {x} listed twice" if holder == name else f"GPU {x} is already held by pod {holder!r}"
                )
            if x in share:
                raise InvalidInputError(f"gpus[{k}]", f"GPU {x} is already shared by pod {share_by[x]!r}")
            if hw.gpu_sharing is not None:
                raise InvalidInputError(f"gpus[{k}]", _SLOTS_ONLY.format(hw.gpu_sharing.strategy))
            if x in hw.mig_gpus:
                raise InvalidInputError(f"gpus[{k}]", f"GPU {x} is in MIG mode: pods hold its MIG instances (`mig`)")
            whole[x] = name
        for idx, m in p.gpu_shares.items():
            where = f"gpuShares.{idx}"
            if not idx < ngpus:
                _out_of_range(idx, ngpus, where)
            if idx in whole:
                raise InvalidInputError(where, f"GPU {idx} is held whole by pod {whole[idx]!r}")
            if idx in hw.mig_gpus:
                raise InvalidInputError(where, f"GPU {idx} is in MIG mode: pods hold its MIG instances (`mig`)")
            if hw.gpu_sharing is not None:
                raise InvalidInputError(where, _SLOTS_ONLY.format(hw.gpu_sharing.strategy))
            total = share.get(idx, 0) + m
            if total > MILLI:
                raise InvalidInputError(where, f"GPU {idx} would hold {total} milli, over {MILLI}")
            share[idx] = total
            share_by.setdefault(idx, name)
        cap = hw.gpu_memory_mib
        for idx, m in p.gpu_memory_mib.items():
            where = f"gpuMemoryMiB.{idx}"
            if not idx < ngpus:
                _out_of_range(idx, ngpus, where)
            if idx not in p.gpu_shares and idx not in p.gpu_slots:
                held = "gpuSlots" if hw.gpu_sharing is not None else "gpuShares"
                raise InvalidInputError(where, f"GPU {idx} has no {held} entry in this pod")
            total = gmem.get(idx, 0) + m
            if cap is not None and total > cap:
                raise InvalidInputError(
                    where, f"GPU {idx} would hold {total} MiB of GPU memory, over the node's gpuMemoryMiB {cap}"
                )
            gmem[idx] = total

    def all(self, nodes: list[Node], start: int = 0) -> None:
        """Check every node from ``start`` in order, then its name: raise the first fault."""
        for i in range(start, len(nodes)):
            n = nodes[i]
            try:
                self.node(n, i)
            except InvalidInputError as e:
                raise nest(e, f"nodes[{i}]") from None
            self.node_name(n, i)

    def node_name(self, n: Node, i: int) -> None:
        """The rules of a node's name and texts that span nodes (checked after the node)."""
        first = self.node_seen.setdefault(n.name, i)
        if first != i:
            raise InvalidInputError(f"nodes[{i}].name", f"duplicate node name {n.name!r}, first at nodes[{first}]")
        for k, t in enumerate(n.taints):
            for field_name, text in (("key", t.key), ("value", t.value)):
                if has_control(text):
                    raise control_error(f"nodes[{i}].taints[{k}].{field_name}", text)
        for key, value in n.labels.items():
            if has_control(key) or has_control(value):
                raise control_error(f"nodes[{i}].labels", key if has_control(key) else value)

    def names(self, nodes: list[Node], stop: int) -> None:
        """Only the name rules of the nodes before ``stop``, in the order :meth:`all` checks
        them (their other rules held): raise the first fault, else remember the names."""
        for i in range(stop):
            n = nodes[i]
            if has_control(n.name):
                raise control_error(f"nodes[{i}].name", n.name)
            for k, v in n.topology.items():
                if has_control(v):
                    raise control_error(f"nodes[{i}].topology.{k}", v)
            for j, p in enumerate(n.pods):
                if has_control(p.name):
                    raise control_error(f"nodes[{i}].pods[{j}].name", p.name)
                try:
                    _pod_meta(p)
                except InvalidInputError as e:
                    raise nest(e, f"nodes[{i}].pods[{j}]") from None
                first = self.pod_seen.setdefault(p.name, (i, j))
                if first != (i, j):
                    raise InvalidInputError(
                        f"nodes[{i}].pods[{j}].name",
                        f"duplicate pod name {p.name!r}, first at nodes[{first[0]}].pods[{first[1]}]",
                    )
            self.node_name(n, i)


def _pod_meta(p: RunningPod) -> None:
    """A running pod's start time (an RFC 3339 text becomes epoch seconds), labels, gang and
    affinity (checked as a pending pod's)."""
    if type(p.start_time) is str:
        force_setattr(p, "start_time", parse_time(p.start_time, "startTime"))
    for key, value in p.labels.items():
        if has_control(key) or has_control(value):
            raise control_error("labels", key if has_control(key) else value)
    if p.gang is not None and has_control(p.gang):
        raise control_error("gang", p.gang)
    check_affinity(p.affinity)
    check_host_ports(p.host_ports)


def parse_time(text: str, where: str) -> float:
    """Epoch seconds of an RFC 3339 time (``2026-12-01T08:00:00Z``, offsets allowed)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise bad(where, "epoch seconds or an RFC 3339 time", text) from None
    if moment.tzinfo is None:
        raise InvalidInputError(where, f"an RFC 3339 time needs its offset (Z or +hh:mm), got {text!r}")
    return moment.timestamp()


_PERCENT = re.compile(r"^(\d{1,3})%$")


def _budgets(budgets: list[PodDisruptionBudget]) -> tuple[PodDisruptionBudget, ...]:
    """PodDisruptionBudgets: unique names, one budget each, percentages of 0..100."""
    seen: dict[str, int] = {}
    for k, b in enumerate(budgets):
        where = f"podDisruptionBudgets[{k}]"
        texts = [b.name, b.namespace or "", *b.selector, *b.selector.values()]
        if has_control("".join(texts)):
            raise control_error(where, next(t for t in texts if has_control(t)))
        first = seen.setdefault(f"{b.namespace}/{b.name}", k)
        if first != k:
            raise InvalidInputError(f"{where}.name", f"duplicate budget {b.name!r}, first at podDisruptionBudgets[{first}]")
        if b.min_available is not None and b.max_unavailable is not None:
            raise InvalidInputError(where, "give minAvailable or maxUnavailable, not both")
        if b.min_available is None and b.max_unavailable is None and b.disruptions_allowed is None:
            raise InvalidInputError(where, "give minAvailable, maxUnavailable or disruptionsAllowed")
        for key, v in (("minAvailable", b.min_available), ("maxUnavailable", b.max_unavailable)):
            if isinstance(v, str):
                m = _PERCENT.match(v)
                if m is None or int(m.group(1)) > 100:
                    raise bad(f"{where}.{key}", "a count or a percentage such as '50%'", v)
    return tuple(budgets)


def _mig_node(n: Node, hw: NodeType) -> None:
    """A MIG node's instances: on its MIG GPUs, of its model's profiles, at valid starts,
    never overlapping, one media (``+me``) instance per GPU at most; each instance its
    running pods use held by one pod. An instance a pod uses that ``migInstances`` does not
    list exists all the same (the pod runs on it)."""
    table = table_for(hw.gpu_model)
    if table is None:  # a node without GPUs in MIG mode
        if n.mig_instances or any(p.mig for p in n.pods):
            raise InvalidInputError("mig", "the node has no GPUs to put in MIG mode")
        return
    mig_gpus = set(hw.mig_gpus)
    unhealthy = set(n.unhealthy_gpus)
    busy: dict[int, int] = {}
    media: dict[int, str] = {}
    placed: dict[tuple[int, int], MigInstance] = {}

    def add(m: MigInstance, where: str) -> None:
        if m.gpu not in mig_gpus:
            if not 0 <= m.gpu < hw.gpus:
                _out_of_range(m.gpu, hw.gpus, f"{where}.gpu")
            raise InvalidInputError(f"{where}.gpu", f"GPU {m.gpu} is not in MIG mode (see `mig.gpus`)")
        if m.gpu in unhealthy:
            raise InvalidInputError(f"{where}.gpu", f"GPU {m.gpu} is unhealthy")
        profile = _profile(table, m.profile, f"{where}.profile")
        mask = profile.mask_at(m.start)
        if mask is None:
            raise InvalidInputError(
                f"{where}.start",
                f"{profile.name} cannot start at slice {m.start} on {table.model}; valid starts: "
                f"{', '.join(map(str, profile.starts))}",
            )
        if busy.get(m.gpu, 0) & mask:
            other = next(o for (g, _), o in placed.items() if g == m.gpu and _mask(table, o) & mask)
            raise InvalidInputError(
                where, f"{profile.name} at slice {m.start} overlaps {other.profile} at slice {other.start} on GPU {m.gpu}"
            )
        if profile.media:
            if m.gpu in media:
                raise InvalidInputError(
                    f"{where}.profile", f"GPU {m.gpu} already has a media instance ({media[m.gpu]}); one per GPU"
                )
            media[m.gpu] = profile.name
        busy[m.gpu] = busy.get(m.gpu, 0) | mask
        placed[(m.gpu, m.start)] = m

    for k, m in enumerate(n.mig_instances):
        add(m, f"migInstances[{k}]")
    used: dict[tuple[int, int], str] = {}
    for j, p in enumerate(n.pods):
        for k, m in enumerate(p.mig):
            where = f"pods[{j}].mig[{k}]"
            key = (m.gpu, m.start)
            listed = placed.get(key)
            if listed is None:
                add(m, where)
            elif _profile(table, listed.profile, where) is not _profile(table, m.profile, f"{where}.profile"):
                raise InvalidInputError(
                    f"{where}.profile", f"GPU {m.gpu} slice {m.start} holds {listed.profile}, not {m.profile}"
                )
            holder = used.get(key)
            if holder is not None:
                raise InvalidInputError(where, f"the instance at GPU {m.gpu} slice {m.start} is used by pod {holder!r}")
            used[key] = p.name


def _profile(table: MigTable, name: str, where: str) -> Any:
    found = table.profile(name)
    if found is None:
        raise InvalidInputError(
            where, f"no MIG profile {name!r} on {table.model}; it has: {', '.join(table.names())}"
        )
    return found


def _mask(table: MigTable, m: MigInstance) -> int:
    found = table.profile(m.profile)
    return 0 if found is None else found.mask_at(m.start) or 0
_SLOTS_ONLY = "the node shares its GPUs ({}): its pods hold gpuSlots, not whole GPUs or gpuShares"


def _slot_holdings(p: RunningPod, hw: NodeType, slots: dict[int, int]) -> None:
    """Check a running pod's ``gpuSlots`` on its node and add them to ``slots`` (per GPU)."""
    sharing = hw.gpu_sharing
    if not (p.gpu_slots or p.unknown_gpu_slots):
        return
    field_name = "unknownGpuSlots" if p.unknown_gpu_slots else "gpuSlots"
    if sharing is None:
        raise InvalidInputError(field_name, "the node does not share its GPUs (no gpuSharing): it has no slots to hold")
    if p.gpu_slots and p.unknown_gpu_slots:
        raise InvalidInputError("unknownGpuSlots", "give gpuSlots or unknownGpuSlots, not both")
    if sharing.strategy == "mps" and sum(p.gpu_slots.values()) + p.unknown_gpu_slots > 1:
        raise InvalidInputError(field_name, "an MPS-shared node gives each pod one slot (the device plugin refuses more)")
    for idx, count in p.gpu_slots.items():
        where = f"gpuSlots.{idx}"
        if not idx < hw.gpus:
            _out_of_range(idx, hw.gpus, where)
        total = slots.get(idx, 0) + count
        if total > sharing.replicas:
            raise InvalidInputError(where, f"GPU {idx} would hold {total} slots, over the node's replicas {sharing.replicas}")
        slots[idx] = total
    if hw.gpu_memory_mib is not None and sharing.strategy == "mps":
        limit = hw.gpu_memory_mib // sharing.replicas
        for idx, mib in p.gpu_memory_mib.items():
            if mib > limit:
                raise InvalidInputError(
                    f"gpuMemoryMiB.{idx}", f"{mib} MiB on one MPS slot, over its limit {limit} (gpuMemoryMiB / replicas)"
                )


def _spread_unknown_slots(p: RunningPod, hw: NodeType, unhealthy: tuple[int, ...], slots: dict[int, int]) -> None:
    """Give a pod of ``unknownGpuSlots`` its slots: one at a time, each on the healthy GPU
    with the most free slots (highest index on ties: the device plugin's order is not
    known, and the highest indices are where ``unknownGpus`` go too); on a GPU that turned
    unhealthy under its pods only when no healthy GPU has a slot left."""
    sharing = hw.gpu_sharing
    assert sharing is not None
    free = {g: sharing.replicas - slots.get(g, 0) for g in range(hw.gpus)}
    got: dict[int, int] = {}
    left = sum(free.values())
    if p.unknown_gpu_slots > left:
        raise InvalidInputError(
            "unknownGpuSlots", f"{p.unknown_gpu_slots} slot(s) held, but only {left} slot(s) of the node are free"
        )
    for _ in range(p.unknown_gpu_slots):
        best = max(free, key=lambda g: (free[g] > 0 and g not in unhealthy, free[g], g), default=None)
        if best is None or free[best] == 0:  # pragma: no cover - counted above
            raise InvalidInputError(
                "unknownGpuSlots", f"{p.unknown_gpu_slots} slot(s) held, but only {left} slot(s) of the node are free"
            )
        free[best] -= 1
        got[best] = got.get(best, 0) + 1
    for g, count in got.items():
        slots[g] = slots.get(g, 0) + count
    force_setattr(p, "gpu_slots", dict(sorted(got.items())))


def _gpu_list(indices: tuple[int, ...], ngpus: int, where: str) -> None:
    """GPU indices of a node's list: each in range and listed once."""
    seen: set[int] = set()
    for k, x in enumerate(indices):
        if not 0 <= x < ngpus:
            _out_of_range(x, ngpus, f"{where}[{k}]")
        if x in seen:
            raise InvalidInputError(f"{where}[{k}]", f"GPU {x} listed twice")
        seen.add(x)


def _out_of_range(v: int, ngpus: int, where: str) -> NoReturn:
    if ngpus == 0:
        raise InvalidInputError(where, f"GPU index {v} out of range: the node has no GPUs")
    raise InvalidInputError(where, f"GPU index {v} out of range 0..{ngpus - 1}")


# ----------------------------------------------------------------------------- the common case

_UNLIMITED = 1 << 62  # above every capacity the schema lets through


def _finish_nodes(nodes: list[Node], exact: _Exact, check_names: bool) -> None:
    """Finish every node: the common ones in the compiled quick pass, the others by the
    exact checks; when anything is wrong, the exact checks run again from the start and
    raise at the first fault in document order."""
    plain = {
        name: (hw, hw.gpus, *(_UNLIMITED if c is None else c for c in (hw.cpu_milli, hw.memory_mib, hw.max_pods)))
        for name, hw in exact.types.items()
        if hw.mig is None and hw.gpu_sharing is None  # nodes of MIG or sharing types take the exact checks
    }
    at = [len(nodes)]
    try:
        if not finish_common_nodes(
            nodes, plain, (_EMPTY_HW, 0, _UNLIMITED, _UNLIMITED, _UNLIMITED), exact.level_set, exact.node,
            check_names, at,
        ):
            raise InvalidInputError("", "a name is repeated or holds a control character")
    except InvalidInputError:
        # nodes before at[0] passed every rule but those between names: check those, then
        # everything from that node on, in document order
        again = _Exact(exact.types, exact.levels)
        again.names(nodes, at[0])
        again.all(nodes, at[0])
        raise  # pragma: no cover - the exact pass raises the fault the first pass found


def snapshot_from_doc(doc: SnapshotDoc, check_names: bool = True, fast: bool = True) -> ClusterSnapshot:
    """Check the rules of a decoded ClusterSnapshot that span fields and build it.

    Parameters
    ----------
    doc : SnapshotDoc
        The decoded document; its nodes become the snapshot's (finished in place).
    check_names : bool
        Look for control characters in names; False only when the source cannot hold any
        (JSON text without a single escape).
    fast : bool
        Take the common nodes through the quick first pass (default). False runs only the
        exact checks; both must build the same snapshot and raise the same error.

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault.
    """
    levels = _topology_levels(doc.topology_levels)
    types = _node_types(doc.node_types)
    nodes = doc.nodes
    if fast:
        _finish_nodes(nodes, _Exact(types, levels), check_names)
    else:
        _Exact(types, levels).all(nodes)
    budgets = _budgets(doc.pod_disruption_budgets)
    return ClusterSnapshot(
        nodes=tuple(nodes), node_types=types or EMPTY, topology_levels=levels, pod_disruption_budgets=budgets
    )


def snapshot_gpu_models(snapshot: ClusterSnapshot) -> frozenset[str]:
    """The GPU models of the snapshot's nodes that have GPUs."""
    return frozenset(n.hardware.gpu_model for n in snapshot.nodes if n.hardware.gpus > 0 and n.hardware.gpu_model)
