"""PlacementRequest documents (SPEC §2): the rules that span fields, replicas, and the model.

Paths name a pod as written: ``pods[2]`` is the third entry of the document's list, however
many replicas the entries before it expand to.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import msgspec

from placer import policies
from placer.exceptions import InvalidInputError
from placer.schema.interpod import check_namespace_selectors
from placer.limits import MAX_NICS, MAX_REPLICAS, MAX_REQUEST_PODS, MAX_SLICES, MILLI, SEED_MAX
from placer.text.messages import quoted
from placer.model.mig_profiles import parse_profile_name
from placer.model.roles import Role, counterparts, defaults, fields_with, roles_of
from placer.model import (
    EMPTY, ClusterSnapshot, GangSpec, PlacementRequest, PodRequest, ScoringStrategy, SliceSpec, gang_shapes,
)
from placer.schema.affinity import check_node_affinity, check_toleration
from placer.schema.ports import check_host_ports
from placer.schema._quick import common_pods, dict_pods
from placer.schema.checks import check_policy, check_seed
from placer.schema.documents import GangDoc, PodDoc, RequestDoc
from placer.schema.errors import bad, control_error, has_control, listing, nest

__all__ = [
    "SnapshotFacts",
    "snapshot_facts",
    "refuse_bound",
    "check_scoring",
    "request_from_doc",
    "request_from_plain_pods",
    "plain_pods",
    "check_request_against_snapshot",
    "request_document",
    "request_of_objects",
]


class SnapshotFacts:
    """What a request is checked against: the snapshot's topology levels and, when given,
    ``first_held``: the position of the first of some pods that is bound or running now
    (-1 for none), so that a pod already bound is named as the request file writes it."""

    __slots__ = ("levels", "first_held")

    def __init__(
        self, levels: Sequence[str], first_held: Callable[[Sequence[PodRequest]], int] | None = None
    ) -> None:
        self.levels = (*levels, "node")
        self.first_held = first_held


def snapshot_facts(
    snapshot: ClusterSnapshot, first_held: Callable[[Sequence[PodRequest]], int] | None = None
) -> SnapshotFacts:
    """What requests are checked against: the snapshot's levels, and ``first_held`` (see
    :class:`SnapshotFacts`)."""
    return SnapshotFacts(snapshot.topology_levels, first_held)


# The fields of an entry that a rule of _pods checks against other fields. The quick readers
# leave an entry that sets one of them to the general path, as they do an entry that sets a
# field of the grouping or special roles (replicas, gang, preemption policy, nomination).
_RULED = ("tolerations", "nics", "mig", "gpu_slots", "affinity")
_QUICK_ROLES = (Role.IDENTITY, Role.RESOURCE, Role.FILTER, Role.GATED, Role.ORDER)
_QUICK = tuple(name for name in fields_with(PodDoc, *_QUICK_ROLES) if name not in _RULED)
_TEMPLATE = PodRequest(name="-")  # every field at its default: the quick readers copy it


def _common_plan() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[Any, ...], PodRequest]:
    """What :func:`common_pods` copies (the quick fields, and the PodRequest field of each),
    what it requires at its default (every other field of PodDoc, and that default)."""
    to_model = counterparts(PodDoc)
    others = tuple(name for name in roles_of(PodDoc) if name not in _QUICK)
    fallback = defaults(PodDoc)
    return _QUICK, tuple(to_model[name] for name in _QUICK), others, tuple(fallback[name] for name in others), _TEMPLATE


_COMMON_PLAN = _common_plan()


def _plain_columns() -> tuple[dict[str, int], tuple[str, ...], tuple[int, ...], tuple[int, ...], int, int, PodRequest,
                              int, int] | None:
    """The arguments of :func:`dict_pods` after the entries and ``milli``: (key as written ->
    column, the PodRequest field of each column, low bounds, high bounds, shortest name,
    ``milli``, the template pod, the columns of ``gpus`` and ``gpuMilli``). The columns are
    the name, then the quick fields that are bounded integers; None when the name is not a
    plain string."""
    infos = {f.name: f for f in msgspec.inspect.type_info(PodDoc).fields}
    fallback = defaults(PodDoc)
    name = infos["name"].type
    if not (isinstance(name, msgspec.inspect.StrType) and name.max_length is None and name.pattern is None):
        return None
    plain = ["name"]
    low, high = [0], [0]
    for field_name in _QUICK[1:]:
        kind = infos[field_name].type
        if (isinstance(kind, msgspec.inspect.IntType) and kind.ge is not None and kind.le is not None
                and kind.gt is None and kind.lt is None and kind.multiple_of is None and field_name in fallback):
            plain.append(field_name)
            low.append(kind.ge)
            high.append(kind.le)
    if "gpus" not in plain or "gpu_milli" not in plain:
        return None
    to_model = counterparts(PodDoc)
    columns = {infos[f].encode_name: k for k, f in enumerate(plain)}
    return (columns, tuple(to_model[f] for f in plain), tuple(low), tuple(high), name.min_length or 0, MILLI,
            _TEMPLATE, plain.index("gpus"), plain.index("gpu_milli"))


_PLAIN_COLUMNS = _plain_columns()


def plain_pods(entries: Any) -> list[PodRequest] | None:
    """The pods of a request document's ``pods`` as written (dicts), when every entry is
    one plain pod: a name and integers among the quick fields (``gpus``, ``gpuMilli``,
    ``gpuMemoryMiB``, ``cpuMilli``, ``memoryMiB``, ``priority``), each valid, names unique.
    None otherwise: the document is then decoded whole, and its faults reported where they
    are."""
    if _PLAIN_COLUMNS is None or type(entries) is not list or len(entries) > MAX_REQUEST_PODS:
        return None
    return dict_pods(entries, *_PLAIN_COLUMNS)


def _pods(d: PodDoc, gangs: Mapping[str, GangSpec]) -> list[PodRequest] | PodRequest:
    """The pod of an entry, or its replicas; names are checked for control characters
    by the caller, all at once."""
    if d.gpu_milli < MILLI and d.gpus != 1:
        raise InvalidInputError(
            "gpuMilli", f"gpuMilli below {MILLI} (a shared GPU) needs gpus: 1, got gpus: {d.gpus}"
        )
    if d.gpu_slots and (d.gpus or d.gpu_milli < MILLI or d.nics):
        what = "gpus" if d.gpus else "gpuMilli" if d.gpu_milli < MILLI else "nics"
        raise InvalidInputError(
            "gpuSlots",
            f"gpuSlots (slots of GPUs a node shares by time-slicing or MPS) cannot be combined with {what}",
        )
    if d.nics > MAX_NICS:
        raise InvalidInputError("nics", f"expected at most {MAX_NICS} NICs (a node holds no more), got {d.nics}")
    for j, t in enumerate(d.tolerations):
        try:
            check_toleration(t)
        except InvalidInputError as e:
            raise nest(e, f"tolerations[{j}]") from None
    try:
        check_node_affinity(d.affinity)
    except InvalidInputError as e:
        raise nest(e, "affinity") from None
    check_host_ports(d.host_ports)
    if d.mig is not None:
        _mig_request(d)
    if d.gang is not None and d.gang not in gangs:
        raise InvalidInputError("gang", f"unknown gang {d.gang!r}; gangs has: {listing(gangs)}")
    fields = {model: getattr(d, name) for name, model in _CARRIED}
    if d.replicas is None:
        return PodRequest(name=d.name, **fields)
    return [PodRequest(name=f"{d.name}-{r}", **fields) for r in range(d.replicas)]


# (field of an entry, field of its PodRequest): every counterpart the roles declare but the
# name, which replicas change
_CARRIED = tuple((name, model) for name, model in counterparts(PodDoc).items() if model != "name")


def _mig_request(d: PodDoc) -> None:
    """A MIG request names a profile or a memory size, and asks for no whole GPUs."""
    mig = d.mig
    assert mig is not None
    if (mig.profile is None) == (mig.memory_mib is None):
        raise InvalidInputError("mig", "give exactly one of profile (a MIG profile name) and memoryMiB")
    if mig.profile is not None and parse_profile_name(mig.profile) is None:
        raise InvalidInputError(
            "mig.profile", f"expected a MIG profile name like '3g.40gb' or '1g.10gb+me', got {mig.profile!r}"
        )
    if d.gpus:
        raise InvalidInputError("gpus", f"a pod asks for MIG instances or for whole GPUs, not both (gpus: {d.gpus})")


def _gang_spec(name: str, g: GangDoc) -> GangSpec:
    mode, level = "unconstrained", None
    if g.topology is not None:
        mode, level = g.topology.mode, g.topology.level
        if level is None and mode != "unconstrained":
            raise InvalidInputError("topology.level", f"mode {mode!r} needs a level (a topology level name), got nothing")
    if len(g.slices) > MAX_SLICES:
        raise InvalidInputError("slices", f"expected at most {MAX_SLICES} slice layers, got {len(g.slices)}")
    slices: list[SliceSpec] = []
    for k, s in enumerate(g.slices):
        if slices and slices[-1].size % s.size:
            raise InvalidInputError(
                f"slices[{k}].size",
                f"size {s.size} does not divide the enclosing slice's size {slices[-1].size} (slices[{k - 1}])",
            )
        slices.append(SliceSpec(level=s.level, size=s.size))
    if g.time_limit_s is not None and not math.isfinite(g.time_limit_s):
        raise bad("timeLimitS", "a finite number > 0", g.time_limit_s)
    return GangSpec(
        name=name,
        mode=mode,
        level=level,
        slices=tuple(slices),
        same_gpu_model=g.same_gpu_model,
        solver=g.solver,
        time_limit_s=g.time_limit_s,
    )


def _expand(
    entries: Sequence[PodDoc], gangs: Mapping[str, GangSpec], gang_size: dict[str, int]
) -> tuple[list[PodRequest], list[int]]:
    """The pods of the entries, replicas expanded, and each pod's entry index; counts the
    pods of every gang into ``gang_size``."""
    for i, d in enumerate(entries):
        if d.replicas is not None and d.replicas > MAX_REPLICAS:
            raise InvalidInputError(
                f"pods[{i}].replicas", f"expected at most {MAX_REPLICAS} replicas of one pod, got {d.replicas}"
            )
    total = sum(1 if d.replicas is None else d.replicas for d in entries)
    if total > MAX_REQUEST_PODS:
        raise InvalidInputError(
            "pods", f"the pods expand to {total} pods (replicas included), over the limit of {MAX_REQUEST_PODS}"
        )
    pods: list[PodRequest] = []
    origin: list[int] = []
    for i, d in enumerate(entries):
        try:
            made = _pods(d, gangs)
        except InvalidInputError as e:
            _names(entries[:i], pods, origin)  # a fault of an earlier entry comes first
            raise nest(e, f"pods[{i}]") from None
        if type(made) is PodRequest:
            pods.append(made)
            origin.append(i)
            if d.gang is not None:
                gang_size[d.gang] += 1
        else:
            pods.extend(made)
            origin.extend([i] * len(made))
            if d.gang is not None:
                gang_size[d.gang] += len(made)
    return pods, origin


def _names(entries: Sequence[PodDoc], pods: Sequence[PodRequest], origin: Sequence[int]) -> None:
    """Raise at the first entry whose name holds a control character or repeats a name."""
    if len({p.name for p in pods}) == len(pods) and not has_control("".join([d.name for d in entries])):
        return
    first_index: dict[str, int] = {}
    for pod, i in zip(pods, origin):
        if has_control(entries[i].name):
            raise control_error(f"pods[{i}].name", entries[i].name)
        first = first_index.setdefault(pod.name, i)
        if first != i:
            raise InvalidInputError(f"pods[{i}].name", f"duplicate pod name {pod.name!r}, first at pods[{first}]")


def _check_slices(name: str, spec: GangSpec, members: Sequence[PodRequest]) -> None:
    """Slices count the pods of the gang's main shape: a whole number of outermost slices."""
    shapes = gang_shapes(members)
    main = [members[i] for i in shapes[0]]
    size = spec.slices[0].size
    if len(main) % size:
        which = "" if len(shapes) == 1 else f" of its main shape (the pods like {main[0].name!r})"
        raise InvalidInputError(
            f"gangs.{name}.slices[0].size",
            f"the gang has {len(main)} pod(s){which}, not a multiple of the outermost slice size {size}",
        )


def request_from_doc(doc: RequestDoc, against: SnapshotFacts | None = None) -> PlacementRequest:
    """Check the rules of a decoded PlacementRequest that span fields, expand ``replicas``
    and build it.

    Parameters
    ----------
    doc : RequestDoc
        The decoded document.
    against : SnapshotFacts, optional
        Also check the request against the snapshot it will be placed on
        (:func:`check_request_against_snapshot`), naming pods as written.

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault (``pods[i]`` indexes the document's list).
    """
    policy, gangs = _request_fields(doc)
    entries = doc.pods
    common = common_pods(entries, MILLI, *_COMMON_PLAN) if len(entries) <= MAX_REQUEST_PODS else None
    return _request(doc, policy, gangs, common, against)


def request_from_plain_pods(
    doc: RequestDoc, pods: list[PodRequest], against: SnapshotFacts | None = None
) -> PlacementRequest:
    """:func:`request_from_doc` of a document decoded without its pod entries, whose pods
    :func:`plain_pods` built from the entries as written."""
    policy, gangs = _request_fields(doc)
    return _request(doc, policy, gangs, pods, against)


def _request_fields(doc: RequestDoc) -> tuple[str, dict[str, GangSpec]]:
    """The checked policy and gangs of a request document."""
    policy = policies.DEFAULT if doc.policy is None else check_policy(doc.policy, "policy")
    if doc.seed > SEED_MAX:
        raise bad("seed", f"an integer in 0..{SEED_MAX}", doc.seed)
    if not math.isfinite(doc.time_limit_s):
        raise bad("timeLimitS", "a finite number > 0", doc.time_limit_s)
    if not math.isfinite(doc.time_budget_s):
        raise bad("timeBudgetS", "a finite number > 0", doc.time_budget_s)
    gangs: dict[str, GangSpec] = {}
    for name, g in doc.gangs.items():
        if has_control(name):
            raise control_error("gangs", name)
        try:
            gangs[name] = _gang_spec(name, g)
        except InvalidInputError as e:
            raise nest(e, f"gangs.{name}") from None
    return policy, gangs


def check_scoring(strategy: ScoringStrategy | None, policy: str) -> ScoringStrategy | None:
    """A request's ``scoringStrategy``, checked as kube-scheduler checks its configuration
    (``ValidateNodeResourcesFitArgs``: weights 1..100, a shape of at least one point,
    utilization increasing) and against the policy (a kube-scored one).

    Raises
    ------
    InvalidInputError
        At ``scoringStrategy...``: the policy is not kube-scored, a shape is missing, out
        of order or given for another type.
    """
    if strategy is None:
        return None
    where = "scoringStrategy"
    record = policies.get(policy)
    if record.kube_scoring is None:
        kube = [p.name for p in policies.REGISTRY.values() if p.kube_scoring is not None]
        raise InvalidInputError(where, f"only the kube-scored policies ({', '.join(kube)}) take it, got policy {policy!r}")
    kind = strategy.type or record.kube_scoring
    ratio = strategy.requested_to_capacity_ratio
    if kind != "RequestedToCapacityRatio":
        if ratio is not None:
            raise InvalidInputError(f"{where}.requestedToCapacityRatio", f"only for type RequestedToCapacityRatio, got {kind}")
    elif ratio is None or not ratio.shape:
        raise InvalidInputError(f"{where}.requestedToCapacityRatio.shape", "at least one point must be specified")
    else:
        for i in range(1, len(ratio.shape)):
            if ratio.shape[i - 1].utilization >= ratio.shape[i].utilization:
                raise InvalidInputError(
                    f"{where}.requestedToCapacityRatio.shape[{i}].utilization", "values must be sorted in increasing order"
                )
    return strategy


def _request(
    doc: RequestDoc,
    policy: str,
    gangs: dict[str, GangSpec],
    common: list[PodRequest] | None,
    against: SnapshotFacts | None,
) -> PlacementRequest:
    """The request of a document; ``common`` is its pods when every entry is one plain pod
    (nothing to cross-check), else None: the entries are expanded and checked here."""
    entries = doc.pods
    origin: Sequence[int]
    gang_size = dict.fromkeys(gangs, 0)
    if common is not None:
        pods = common
        origin = range(len(pods))  # one pod per entry (the entries may not be decoded)
    else:
        pods, origin = _expand(entries, gangs, gang_size)
        _names(entries, pods, origin)
    for i, pod in enumerate(pods):
        if pod.affinity is not None:
            try:
                check_namespace_selectors(pod.affinity)
            except InvalidInputError as e:
                raise nest(e, f"pods[{origin[i]}]") from None

    members: dict[str, list[PodRequest]] = {}
    if any(spec.slices for spec in gangs.values()):
        for pod in pods:
            if pod.gang is not None:
                members.setdefault(pod.gang, []).append(pod)
    for name, spec in gangs.items():
        if gang_size[name] == 0:
            raise InvalidInputError(f"gangs.{name}", "the gang has no pods (no pod names it in `gang`)")
        if spec.slices:
            _check_slices(name, spec, members[name])
    request = PlacementRequest(
        pods=tuple(pods),
        gangs=gangs or EMPTY,
        policy=policy,
        seed=doc.seed,
        solver=doc.solver,
        time_limit_s=float(doc.time_limit_s),
        time_budget_s=float(doc.time_budget_s),
        joint=doc.joint,
        preemption=doc.preemption,
        scoring_strategy=check_scoring(doc.scoring_strategy, policy),
    )
    if against is not None and common is None:  # plain pods have no gang to check
        check_request_against_snapshot(request, against, origin)
    if against is not None and against.first_held is not None:
        refuse_bound(request, against.first_held, origin)
    return request


def refuse_bound(
    request: PlacementRequest, first_held: Callable[[Sequence[PodRequest]], int], origin: Sequence[int] | None = None
) -> None:
    """Raise at the first pod of ``request`` that is bound or running now.

    Parameters
    ----------
    request : PlacementRequest
    first_held : callable
        As :class:`SnapshotFacts` takes it.
    origin : sequence of int, optional
        The document index of each pod (replicas share their entry's); by default a pod's
        index in ``request.pods``.

    Raises
    ------
    InvalidInputError
        At ``pods[i].name``, ``i`` as the document writes it.
    """
    i = first_held(request.pods)
    if i >= 0:
        at = i if origin is None else origin[i]
        raise InvalidInputError(f"pods[{at}].name", f"pod {request.pods[i].name!r} is already bound")


def check_request_against_snapshot(
    request: PlacementRequest, facts: SnapshotFacts | ClusterSnapshot, origin: Sequence[int] | None = None
) -> None:
    """Cross-check a request against the snapshot it is placed on.

    Checks that no gang pod asks for extended ``resources`` or ``gpuSlots`` (not placed in
    gangs yet), and
    that every gang's ``topology.level`` and slice level is a level of the snapshot
    (``topologyLevels`` or ``node``), slices going strictly inward. A GPU model no node has
    is not an input error: the pod stays pending, and its reason names the models.

    Parameters
    ----------
    request : PlacementRequest
    facts : SnapshotFacts or ClusterSnapshot
        The snapshot, or its levels.
    origin : sequence of int, optional
        The document index of each pod of ``request`` (replicas share their entry's); by
        default a pod's index in ``request.pods``.

    Raises
    ------
    InvalidInputError
        At ``pods[i].resources``, ``gangs.<name>.topology.level`` or
        ``gangs.<name>.slices[k].level``.
    """
    if isinstance(facts, ClusterSnapshot):
        facts = snapshot_facts(facts)
    for i in [i for i, pod in enumerate(request.pods) if pod.resources and pod.gang is not None]:
        pod = request.pods[i]
        at = i if origin is None else origin[i]
        raise InvalidInputError(
            f"pods[{at}].resources",
            f"pod {pod.name!r} of gang {pod.gang!r} asks for extended resources; gangs of such pods "
            "are not placed yet",
        )
    for i in [i for i, pod in enumerate(request.pods) if pod.gpu_slots and pod.gang is not None]:
        pod = request.pods[i]
        at = i if origin is None else origin[i]
        raise InvalidInputError(
            f"pods[{at}].gpuSlots",
            f"pod {pod.name!r} of gang {pod.gang!r} asks for GPU slots; gangs of such pods are not placed yet",
        )
    order = {lv: k for k, lv in enumerate(facts.levels)}
    known = listing(order)
    for name, g in request.gangs.items():
        if g.level is not None and g.level not in order:
            raise InvalidInputError(
                f"gangs.{name}.topology.level", f"unknown topology level {g.level!r}; the snapshot has: {known}"
            )
        prev = -1
        for k, s in enumerate(g.slices):
            where = f"gangs.{name}.slices[{k}].level"
            if s.level not in order:
                raise InvalidInputError(where, f"unknown topology level {s.level!r}; the snapshot has: {known}")
            if order[s.level] <= prev:
                raise InvalidInputError(
                    where,
                    f"slice level {s.level!r} is not inside the enclosing slice's level "
                    f"{g.slices[k - 1].level!r}; slices go outermost first",
                )
            prev = order[s.level]


def request_of_objects(
    pods: Any, gang: Any, policy: str, seed: Any, against: SnapshotFacts | None = None
) -> PlacementRequest | None:
    """The request behind ``Cluster.place`` when ``pods`` is a PodRequest or a list of
    them and ``gang`` None or a GangSpec, the objects taken as they are; None for anything
    else (a pod or gang mapping: :func:`request_document` then writes the document).

    A PlacementRequest built in Python is not decoded again, and neither are its pods
    here: model objects hold checked values by contract. What spans them is checked: pod
    names unique and free of control characters, a pod naming a gang only with ``gang``
    given (whose name the pods then take), the gang's slices, the snapshot's levels and the
    pods bound now (``against``).

    Parameters
    ----------
    pods : PodRequest or sequence of PodRequest
    gang : GangSpec, optional
    policy : str
        A checked policy name.
    seed : int
        Checked here (:func:`placer.schema.checks.check_seed`).
    against : SnapshotFacts, optional

    Raises
    ------
    InvalidInputError
        At ``seed``, ``pods[i].name``, ``gang`` or the gang's path, as for the document.
    """
    if type(pods) is PodRequest:
        pods = (pods,)
    elif not (isinstance(pods, (list, tuple)) and pods and set(map(type, pods)) == {PodRequest}):
        return None
    if gang is not None and type(gang) is not GangSpec:
        return None
    seed = check_seed(seed, "seed")
    if len(pods) > MAX_REQUEST_PODS:
        raise InvalidInputError("pods", f"{len(pods)} pods, over the limit of {MAX_REQUEST_PODS}")
    _names(pods, pods, range(len(pods)))
    gangs: Mapping[str, GangSpec] = EMPTY
    if gang is None:
        stray = next((p for p in pods if p.gang is not None), None)
        if stray is not None:
            raise InvalidInputError("gang", f"pod {quoted(stray.name)} names gang {quoted(stray.gang)}; pass gang=")
    else:
        name = gang.name
        pods = [p if p.gang == name else msgspec.structs.replace(p, gang=name) for p in pods]
        if gang.slices:
            _check_slices(name, gang, pods)
        gangs = {name: gang}
    request = PlacementRequest(pods=tuple(pods), gangs=gangs, policy=policy, seed=seed)
    if against is not None:
        if gang is not None:
            check_request_against_snapshot(request, against)
        if against.first_held is not None:
            refuse_bound(request, against.first_held)
    return request


def request_document(pods: Any, gang: Any, policy: Any, seed: Any) -> dict[str, Any]:
    """The request document behind ``Cluster.place``: one pod or a list, optionally forming
    ``gang`` (a GangSpec, or a gang mapping with a ``name``)."""
    if policy is None:
        raise bad("policy", "a policy name", policy)
    if isinstance(pods, (PodRequest, Mapping)):
        items = [pods]
    elif isinstance(pods, (list, tuple)) or (hasattr(pods, "__iter__") and not isinstance(pods, (str, bytes))):
        items = list(pods)
    else:
        raise bad("pods", "a pod, or a list of pods", pods)
    doc_pods: list[Any] = []
    for i, p in enumerate(items):
        if isinstance(p, PodRequest):
            doc_pods.append(p.to_dict())
        elif isinstance(p, Mapping):
            doc_pods.append(dict(p))
        else:
            raise bad(f"pods[{i}]", "a pod mapping", p)
    doc: dict[str, Any] = {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "policy": policy,
        "seed": seed,
        "pods": doc_pods,
    }
    if gang is not None:
        if isinstance(gang, GangSpec):
            name, spec = gang.name, gang.to_dict()
        elif isinstance(gang, Mapping):
            spec = dict(gang)
            name = spec.pop("name", None)
            if type(name) is not str or not name:
                raise InvalidInputError("gang.name", "a gang needs a name")
        else:
            raise bad("gang", "a GangSpec or a gang mapping", gang)
        doc["gangs"] = {name: spec}
        for p in doc_pods:
            p["gang"] = name
    else:
        for p in doc_pods:
            if p.get("gang") is not None:
                raise InvalidInputError("gang", f"pod {quoted(p.get('name'))} names gang {quoted(p['gang'])}; pass gang=")
    return doc
