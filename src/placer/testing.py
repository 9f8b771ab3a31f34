"""Hypothesis strategies for property-testing schedulers against placer.

Every strategy builds valid model objects (:class:`~placer.model.ClusterSnapshot`,
:class:`~placer.model.PodRequest`, :class:`~placer.model.PlacementRequest`) directly::

    from hypothesis import given
    from placer.testing import scenarios

    @given(scenarios())
    def test_my_scheduler(case):
        snapshot, request = case
        ...

Needs Hypothesis: ``pip install 'placer[test]'``.
"""
from __future__ import annotations

from typing import Any, Sequence

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "placer.testing needs Hypothesis: install placer[test] (pip install 'placer[test]')"
    ) from exc

from placer import policies
from placer.model import (
    HARDWARE_FIELDS,
    TAINT_EFFECTS,
    ClusterSnapshot,
    GangSpec,
    Node,
    NodeType,
    PlacementRequest,
    PodRequest,
    RunningPod,
    SliceSpec,
    Taint,
    Toleration,
    gang_shapes,
    replace,
)
from placer.model.affinity import NODE_OPERATORS, Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from placer.model.topology import GpuTopology, Nic, topology_from_spec

__all__ = [
    "DEFAULT_MODELS",
    "DEFAULT_LABEL_KEYS",
    "DEFAULT_TAINT_KEYS",
    "GREEDY_POLICIES",
    "node_types",
    "gpu_topologies",
    "snapshots",
    "pod_requests",
    "placement_requests",
    "scenarios",
    "keys_reversed",
]

DEFAULT_MODELS = ("A100-SXM4-80GB", "H100-SXM5-80GB")
DEFAULT_LABEL_KEYS = ("pool", "zone")
DEFAULT_TAINT_KEYS = ("nvidia.com/gpu", "dedicated")
GREEDY_POLICIES = policies.kernel_names()  # the kernel's node choices, the reference oracle's (kube policies: tests/kube_scores_reference.py)
_LABEL_VALUES = ("a", "b")


def _gpu_counts(max_gpus: int) -> list[int]:
    return sorted({g for g in (1, 2, 4, 8, 16) if g <= max_gpus} | ({max_gpus} if max_gpus else set()))


def _chance(percent: int) -> st.SearchStrategy[bool]:
    """True about ``percent`` % of the time (shrinks to False)."""
    return st.integers(0, 99).map(lambda x: x >= 100 - percent)


_LINKS = ("SYS", "NODE", "PHB", "PXB", "PIX", "NV1", "NV2", "NV4", "NV2+SYS", "NV12")
_NIC_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS")


@st.composite
def gpu_topologies(draw: Any, gpus: int) -> GpuTopology | None:
    """A ``gpuTopology`` of ``gpus`` GPUs: none, NVSwitch, or a matrix of link labels.

    Matrices draw from a few labels so that equally good GPU sets are common.
    """
    form = draw(st.sampled_from(["none", "nvswitch", "matrix", "matrix"])) if gpus >= 2 else "none"
    if form == "none":
        return None
    if form == "nvswitch":
        return topology_from_spec({"nvswitch": True}, gpus)
    palette = draw(st.lists(st.sampled_from(_LINKS), min_size=1, max_size=3, unique=True))
    rows = [["X"] * gpus for _ in range(gpus)]
    for a in range(gpus):
        for b in range(a + 1, gpus):
            rows[a][b] = rows[b][a] = draw(st.sampled_from(palette))
    return topology_from_spec({"matrix": rows}, gpus)


@st.composite
def node_types(
    draw: Any, max_gpus: int = 8, models: Sequence[str] = DEFAULT_MODELS
) -> NodeType:
    """A node's hardware: 0..``max_gpus`` GPUs of one model, capacities sometimes untracked.

    Parameters
    ----------
    max_gpus : int
        Most GPUs per node.
    models : sequence of str
        GPU models to draw from.
    """
    gpus = draw(st.sampled_from([0] + _gpu_counts(max_gpus))) if max_gpus else 0
    model = draw(st.sampled_from(list(models))) if gpus and models else None
    gpu_mem = draw(st.sampled_from([None, 16384, 40960, 81920])) if gpus else None
    cpu = draw(st.one_of(st.none(), st.sampled_from([4000, 16000, 64000, 128000, 224000])))
    mem = draw(st.one_of(st.none(), st.sampled_from([16384, 65536, 262144, 2000000])))
    max_pods = draw(st.one_of(st.none(), st.integers(1, 16)))
    topology = draw(gpu_topologies(gpus)) if gpus else None
    nics = None
    if gpus and draw(_chance(30)):
        nics = tuple(
            Nic(f"mlx5_{j}", tuple(draw(st.sampled_from(_NIC_LINKS)) for _ in range(gpus)))
            for j in range(draw(st.integers(1, 3)))
        )
    return NodeType(
        gpus=gpus,
        gpu_model=model,
        gpu_memory_mib=gpu_mem,
        cpu_milli=cpu,
        memory_mib=mem,
        max_pods=max_pods,
        gpu_topology=topology,
        nics=nics,
    )


def _running_pods(
    draw: Any, name: str, hw: NodeType, unhealthy: tuple[int, ...], over_commit: bool = False
) -> tuple[RunningPod, ...]:
    """Pods already on a node, never holding more than the node has; ``over_commit``: more
    CPU, memory and pods than it has, and GPUs that turned unhealthy under them."""
    count = draw(st.integers(0, 3 if hw.max_pods is None or over_commit else min(3, hw.max_pods)))
    used = [0] * hw.gpus
    used_mem = [0] * hw.gpus
    cpu_left = None if over_commit else hw.cpu_milli
    mem_left = None if over_commit else hw.memory_mib
    out = []
    for j in range(count):
        kind = draw(st.sampled_from(["cpu", "whole", "share"]))
        gpus: tuple[int, ...] = ()
        shares: dict[int, int] = {}
        gmem: dict[int, int] = {}
        healthy = [i for i in range(hw.gpus) if over_commit or i not in unhealthy]
        if kind == "whole":
            free = [i for i in healthy if used[i] == 0]
            if free:
                gpus = tuple(sorted(draw(st.sets(st.sampled_from(free), min_size=1, max_size=len(free)))))
                for i in gpus:
                    used[i] = 1000
        elif kind == "share":
            free = [i for i in healthy if used[i] < 1000]
            if hw.gpu_memory_mib is not None:
                free = [i for i in free if used_mem[i] < hw.gpu_memory_mib]
            if free:
                g = draw(st.sampled_from(free))
                milli = draw(st.integers(1, min(999, 1000 - used[g])))
                used[g] += milli
                shares[g] = milli
                if hw.gpu_memory_mib is not None:
                    m = draw(st.integers(0, hw.gpu_memory_mib - used_mem[g]))
                    if m:
                        used_mem[g] += m
                        gmem[g] = m
        cpu = draw(st.integers(0, min(cpu_left, 32000) if cpu_left is not None else 32000))
        mem = draw(st.integers(0, min(mem_left, 65536) if mem_left is not None else 65536))
        if cpu_left is not None:
            cpu_left -= cpu
        if mem_left is not None:
            mem_left -= mem
        out.append(
            RunningPod(
                name=f"{name}/run-{j}",
                gpus=gpus,
                gpu_shares=shares,
                gpu_memory_mib=gmem,
                cpu_milli=cpu,
                memory_mib=mem,
                priority=draw(st.sampled_from([0, 0, 100])),
            )
        )
    return tuple(out)


@st.composite
def snapshots(
    draw: Any,
    max_nodes: int = 8,
    max_gpus: int = 8,
    levels: Sequence[str] = ("rack",),
    models: Sequence[str] = DEFAULT_MODELS,
    label_keys: Sequence[str] = DEFAULT_LABEL_KEYS,
    taint_keys: Sequence[str] = DEFAULT_TAINT_KEYS,
    min_nodes: int = 1,
    max_domains: int = 2,
) -> ClusterSnapshot:
    """Valid ClusterSnapshots of ``min_nodes``..``max_nodes`` nodes.

    Nodes use a node type (sometimes with an inline override) or inline hardware; some
    are cordoned, tainted, labelled, miss a topology level, or have unhealthy GPUs; running
    pods hold whole GPUs, GPU shares, CPU and memory, on one node in ten more CPU, memory
    and pods than the node has and GPUs that have turned unhealthy (over-committed, as real
    clusters can be).

    Parameters
    ----------
    max_nodes, min_nodes : int
        Bounds on the node count.
    max_gpus : int
        Most GPUs per node.
    levels : sequence of str
        ``topologyLevels``, outermost first; each node gets one of ``max_domains`` values
        per level.
    models, label_keys, taint_keys : sequence of str
        GPU models, label keys and taint keys to draw from.
    """
    levels = tuple(levels)
    types = draw(
        st.dictionaries(
            st.sampled_from(["type-a", "type-b", "type-c"]),
            node_types(max_gpus, models),
            min_size=1,
            max_size=3,
        )
    )
    type_names = sorted(types)
    n = draw(st.integers(min_nodes, max_nodes))
    nodes = []
    for i in range(n):
        name = f"node-{i:02d}"
        overrides: dict[str, Any] = {}
        if draw(_chance(25)):
            tname = None
            hw = draw(node_types(max_gpus, models))
            overrides = hw.to_dict()
        else:
            tname = draw(st.sampled_from(type_names))
            hw = types[tname]
            if draw(_chance(15)):
                cpu = draw(st.sampled_from([8000, 32000, 96000]))
                overrides = {"cpuMilli": cpu}
                hw = replace(hw, cpu_milli=cpu)
        topology: dict[str, str] = {}
        depth = len(levels) - (draw(st.integers(0, len(levels))) if draw(_chance(10)) else 0)
        for lv in levels[:depth]:
            topology[lv] = f"{lv}-{draw(st.integers(0, max_domains - 1))}"
        labels = {k: draw(st.sampled_from(_LABEL_VALUES)) for k in label_keys if draw(_chance(50))}
        taints: tuple[Taint, ...] = ()
        if taint_keys and draw(_chance(20)):
            taints = (
                Taint(
                    key=draw(st.sampled_from(list(taint_keys))),
                    value=draw(st.sampled_from(["", "present"])),
                    effect=draw(st.sampled_from(list(TAINT_EFFECTS))),
                ),
            )
        unhealthy: tuple[int, ...] = ()
        if hw.gpus and draw(_chance(20)):
            unhealthy = tuple(sorted(draw(st.sets(st.integers(0, hw.gpus - 1), min_size=1, max_size=2))))
        nodes.append(
            Node(
                name=name,
                hardware=hw,
                type=tname,
                **{HARDWARE_FIELDS[k]: v for k, v in overrides.items()},
                topology=topology,
                labels=labels,
                taints=taints,
                unschedulable=draw(_chance(10)),
                unhealthy_gpus=unhealthy,
                pods=_running_pods(draw, name, hw, unhealthy, over_commit=draw(_chance(10))),
            )
        )
    return ClusterSnapshot(nodes=tuple(nodes), node_types=types, topology_levels=levels)


def _tolerations(taint_keys: Sequence[str]) -> st.SearchStrategy[tuple[Toleration, ...]]:
    one = st.one_of(
        st.just(Toleration(operator="Exists")),
        st.sampled_from(list(taint_keys) or ["x"]).map(lambda k: Toleration(key=k, operator="Exists")),
        st.builds(
            Toleration,
            key=st.sampled_from(list(taint_keys) or ["x"]),
            operator=st.just("Equal"),
            value=st.sampled_from(["", "present"]),
            effect=st.sampled_from(["", "NoSchedule", "NoExecute"]),
        ),
    )
    return st.lists(one, max_size=2).map(tuple)


def _node_affinities(label_keys: Sequence[str]) -> st.SearchStrategy[Affinity]:
    """Required node affinity as kube's API accepts it: 1–2 ORed terms of 0–2 expressions
    (every operator; ``Gt``/``Lt`` compare integers, which the drawn label values are not)."""

    def requirement(key: str, operator: str, values: list[str]) -> NodeSelectorRequirement:
        count = {"Exists": 0, "DoesNotExist": 0, "Gt": 1, "Lt": 1}.get(operator)
        return NodeSelectorRequirement(key, operator, tuple(values[:count] if count is not None else values))  # type: ignore[arg-type]

    expression = st.builds(
        requirement, st.sampled_from(list(label_keys)), st.sampled_from(NODE_OPERATORS),
        st.lists(st.sampled_from(_LABEL_VALUES + ("3",)), min_size=1, max_size=2, unique=True),
    )
    term = st.lists(expression, max_size=2).map(lambda es: NodeSelectorTerm(match_expressions=tuple(es)))
    return st.lists(term, min_size=1, max_size=2).map(lambda ts: Affinity(node_affinity=NodeAffinity(
        required_during_scheduling_ignored_during_execution=NodeSelector(tuple(ts)))))


@st.composite
def pod_requests(
    draw: Any,
    name: str | None = None,
    models: Sequence[str] = DEFAULT_MODELS,
    label_keys: Sequence[str] = DEFAULT_LABEL_KEYS,
    taint_keys: Sequence[str] = DEFAULT_TAINT_KEYS,
    max_gpus: int = 8,
    max_cpu_milli: int = 32000,
    max_memory_mib: int = 65536,
    kinds: Sequence[str] = ("cpu", "whole", "shared"),
) -> PodRequest:
    """Valid PodRequests: CPU-only, whole GPUs (1/2/4/8) or a share of one GPU.

    Some pods carry a nodeSelector, tolerations, ``gpuModels`` or a required node affinity.

    Parameters
    ----------
    name : str, optional
        The pod's name (drawn when omitted).
    models, label_keys, taint_keys : sequence of str
        Values to draw ``gpuModels``, selectors and tolerations from.
    max_gpus, max_cpu_milli, max_memory_mib : int
        Largest requests.
    kinds : sequence of str
        Which of ``cpu``, ``whole``, ``shared`` to draw.
    """
    if name is None:
        name = f"pod-{draw(st.integers(0, 9999))}"
    kinds = [k for k in kinds if k == "cpu" or max_gpus >= 1]
    kind = draw(st.sampled_from(kinds or ["cpu"]))
    gpus, gpu_milli, gpu_mem = 0, 1000, 0
    if kind == "whole":
        gpus = draw(st.sampled_from(_gpu_counts(max_gpus) + ([3] if max_gpus >= 3 else [])))
        gpu_mem = draw(st.sampled_from([0, 0, 8192, 40960, 81920]))
    elif kind == "shared":
        gpus = 1
        gpu_milli = draw(st.one_of(st.sampled_from([100, 250, 500, 750]), st.integers(1, 999)))
        gpu_mem = draw(st.one_of(st.just(0), st.integers(1, 40960)))
    gpu_models: tuple[str, ...] = ()
    if gpus and models and draw(_chance(25)):
        gpu_models = tuple(sorted(draw(st.sets(st.sampled_from(list(models)), min_size=1, max_size=2))))
    selector: dict[str, str] = {}
    if label_keys and draw(_chance(20)):
        selector = {draw(st.sampled_from(list(label_keys))): draw(st.sampled_from(_LABEL_VALUES))}
    tolerations = draw(_tolerations(taint_keys)) if draw(_chance(30)) else ()
    affinity = draw(_node_affinities(label_keys)) if label_keys and draw(_chance(12)) else None
    return PodRequest(
        name=name,
        gpus=gpus,
        gpu_milli=gpu_milli,
        gpu_memory_mib=gpu_mem,
        gpu_models=gpu_models,
        cpu_milli=draw(st.one_of(st.just(0), st.integers(0, max_cpu_milli))),
        memory_mib=draw(st.one_of(st.just(0), st.integers(0, max_memory_mib))),
        node_selector=selector,
        tolerations=tolerations,
        priority=draw(st.sampled_from([0, 0, 10, 1000])),
        nics=draw(st.sampled_from([1, 2])) if draw(_chance(15)) else 0,
        affinity=affinity,
    )


def _snapshot_vocabulary(snapshot: ClusterSnapshot) -> tuple[list[str], list[str], list[str], int, int, int]:
    models = sorted({n.hardware.gpu_model for n in snapshot.nodes if n.hardware.gpu_model and n.hardware.gpus})
    label_keys = sorted({k for n in snapshot.nodes for k in n.labels})
    taint_keys = sorted({t.key for n in snapshot.nodes for t in n.taints})
    max_gpus = max((n.hardware.gpus for n in snapshot.nodes), default=0)
    cpus = [n.hardware.cpu_milli for n in snapshot.nodes if n.hardware.cpu_milli is not None]
    mems = [n.hardware.memory_mib for n in snapshot.nodes if n.hardware.memory_mib is not None]
    max_cpu = max(cpus) // 4 if cpus else 32000
    max_mem = max(mems) // 4 if mems else 65536
    return models, label_keys, taint_keys, max_gpus, max_cpu, max_mem


@st.composite
def placement_requests(
    draw: Any,
    snapshot: ClusterSnapshot,
    max_pods: int = 8,
    policies: Sequence[str] = GREEDY_POLICIES,
    gangs: bool = True,
    solvers: Sequence[str] = ("greedy",),
) -> PlacementRequest:
    """Valid PlacementRequests sized for ``snapshot`` (so that pods often fit).

    Pod names are unique (``p-<i>``; gang pods ``<gang>-<j>``). Sometimes one gang of
    2-4 identical pods is inserted, ``unconstrained``, ``preferred`` or ``required`` on a
    level of the snapshot (or ``node``). A gang of GPU pods with ``sameGpuModel`` lists
    exactly one GPU model, so any placement of it keeps one model.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        The cluster the request is for: its models, labels, taints and sizes are used.
    max_pods : int
        Most pods outside the gang.
    policies : sequence of str
        Policies to draw from.
    gangs : bool
        Whether gangs may be drawn.
    solvers : sequence of str
        Request-wide solvers to draw from (``greedy`` by default: the greedy rules alone).
    """
    models, label_keys, taint_keys, max_gpus, max_cpu, max_mem = _snapshot_vocabulary(snapshot)
    shape = dict(
        models=models,
        label_keys=label_keys,
        taint_keys=taint_keys,
        max_gpus=max_gpus,
        max_cpu_milli=max_cpu,
        max_memory_mib=max_mem,
    )
    n = draw(st.integers(1, max_pods))
    pods = [draw(pod_requests(name=f"p-{i}", **shape)) for i in range(n)]
    gang_specs: dict[str, GangSpec] = {}
    if gangs and draw(_chance(40)):
        gname = "gang-0"
        size = draw(st.integers(2, 4))
        template = draw(
            pod_requests(
                name="t",
                **{
                    **shape,
                    "max_gpus": min(max_gpus, 2),
                    "max_cpu_milli": max_cpu // 2,
                    "max_memory_mib": max_mem // 2,
                },
            )
        )
        same_model = draw(st.booleans())
        if template.gpus and same_model and draw(st.booleans()):
            if models:
                pinned = draw(st.sampled_from(models))
                template = replace(template, gpu_models=(pinned,))
            else:
                same_model = False
        mode = draw(st.sampled_from(["unconstrained", "preferred", "required"]))
        level = None
        if mode != "unconstrained":
            level = draw(st.sampled_from(list(snapshot.topology_levels) + ["node"]))
        members = [replace(template, name=f"{gname}-{j}", gang=gname) for j in range(size)]
        slices: tuple[SliceSpec, ...] = ()
        all_levels = [*snapshot.topology_levels, "node"]
        inner = all_levels[all_levels.index(level) + 1 :] if level is not None else []
        if inner and size % 2 == 0 and draw(_chance(30)):
            slices = (SliceSpec(draw(st.sampled_from(inner)), 2),)
        if draw(_chance(30)):
            launcher = PodRequest(
                name=f"{gname}-launcher",
                cpu_milli=draw(st.integers(0, max_cpu // 2)),
                memory_mib=draw(st.integers(0, max_mem // 2)),
                gang=gname,
            )
            members.insert(0, launcher)
        if slices and len(gang_shapes(members)[0]) % 2:
            slices = ()  # the slices would count the launcher
        gang_specs[gname] = GangSpec(
            name=gname, mode=mode, level=level, slices=slices, same_gpu_model=same_model
        )
        at = draw(st.integers(0, len(pods)))
        pods[at:at] = members
    return PlacementRequest(
        pods=tuple(pods),
        gangs=gang_specs,
        policy=draw(st.sampled_from(list(policies))),
        seed=draw(st.one_of(st.integers(0, 100), st.integers(0, 2**64 - 1))),
        solver=draw(st.sampled_from(list(solvers))),
    )


def scenarios(
    max_pods: int = 8,
    policies: Sequence[str] = GREEDY_POLICIES,
    **snapshot_kwargs: Any,
) -> st.SearchStrategy[tuple[ClusterSnapshot, PlacementRequest]]:
    """``(snapshot, request)`` pairs: :func:`snapshots` then :func:`placement_requests` on it.

    Parameters
    ----------
    max_pods, policies
        Passed to :func:`placement_requests`.
    **snapshot_kwargs
        Passed to :func:`snapshots`.
    """
    return snapshots(**snapshot_kwargs).flatmap(
        lambda s: placement_requests(s, max_pods=max_pods, policies=policies).map(lambda r: (s, r))
    )


def keys_reversed(value: Any) -> Any:
    """A JSON value with the keys of every object in reverse order: another encoding of
    the same document, which a decoder (and a cache of what it decoded) must take alike."""
    if isinstance(value, dict):
        return {k: keys_reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [keys_reversed(v) for v in value]
    return value
