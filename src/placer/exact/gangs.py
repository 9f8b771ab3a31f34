"""Exact gang placement with CP-SAT: the fallback and the check of the greedy kernel.

A gang is a set of pods placed together or not at all. This module states one gang's
placement as a small integer program over pure data (:class:`GangProblem`) and solves it
with OR-Tools CP-SAT. It deliberately does not use the kernel (:mod:`placer.kernel`): it is an
independent answer the greedy kernel is tested against.

The model follows the shape of OR-Tools' ``bin_packing_sat.py`` (data → variables →
constraints → objective → solve → status):

* ``x[s, n]`` — integer, pods of shape ``s`` on node ``n`` (only for eligible nodes that
  can hold at least one). Identical pods are aggregated: never one Boolean per pod × node.
* ``y[s, n, g]`` — integer, pods of the shared shape ``s`` on GPU ``g`` of node ``n``, and
  ``w[n, g]`` — Boolean, GPU ``g`` of node ``n`` taken whole by the gang. Per-GPU
  variables exist only on nodes where a shared shape (``gpus == 1``, ``gpu_milli <
  1000``) may go; whole-GPU and CPU-only shapes are counted per node.
  When the gang has a single shared shape (the usual case) the GPUs of a node are
  grouped into classes of alike GPUs instead, with integer ``z`` (pods on the class),
  ``o`` (whole-free GPUs of the class opened for shares) and ``wh`` (taken whole).
* ``u[n]`` — Boolean, node used; ``d[l, D]`` — Boolean, domain ``D`` of level ``l`` used;
  ``k[l, D]`` — integer, slices of level ``l`` in domain ``D``; ``m[M]`` — Boolean, the
  gang's GPU model is ``M``; ``b[n, g]`` — Boolean, whole-free GPU ``g`` is broken by
  shares (per-GPU variables only).

The objective is lexicographic through integer weights (:func:`objective_weights`):
domains used per topology level, outermost first, then nodes used, then the leftover
fragmentation: on each node the gang uses, the whole-free GPUs left, plus twice the
whole-free GPUs its shared pods break. (Counting only the whole-free GPUs left would
reward shares for breaking whole GPUs; with the double count a share goes to a GPU that
is already shared when it can, and whole-GPU pods still pack tightly.) ``preferred`` and
``unconstrained`` gangs get the same objective: minimising the domains used level by
level, outermost first, already puts a ``preferred`` gang into one domain of its level
whenever that is possible (a one-domain answer also uses the fewest domains at every
outer level), and spreads it over the fewest domains otherwise.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from placer.exact.cpsat import status_name
from placer.exceptions import SolverError

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = [
    "NODE_LEVEL",
    "GANG_MODES",
    "GangNode",
    "GangShape",
    "GangProblem",
    "ExactSolution",
    "objective_weights",
    "objective_value",
    "domains_used",
    "check_counts",
    "solve_gang",
    "GangModel",
    "NodeGpus",
    "GpuClass",
    "build_gang_model",
    "add_gang_hint",
    "pack_shared_gpus",
    "Clock",
    "OutOfTime",
]

NODE_LEVEL = "node"
"""The implicit innermost topology level: every node is its own domain."""

GANG_MODES = ("required", "preferred", "unconstrained")
WHOLE_GPU = 1000

Counts = Mapping[tuple[int, int], int]
SharedGpus = Mapping[tuple[int, int], Sequence[int]]


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class GangNode:
    """One node as the exact solver sees it: its domains and what is free on it.

    Parameters
    ----------
    name : str
        The node name (only used in messages).
    domains : tuple of (str or None)
        The node's domain path per topology level, outermost first (``"b1"``,
        ``"b1/r2"``, ...); ``None``: the node is in no domain of that level.
    cpu_free, memory_free, pods_free : int or None
        Free CPU (milli), memory (MiB) and pod slots; ``None`` is untracked (unlimited).
    gpu_free_milli : tuple of int
        Free share per GPU, 0..1000; 1000 is whole-free, an unhealthy GPU is 0.
    gpu_free_memory : tuple of (int or None)
        Free memory per GPU (MiB); ``None`` is untracked.
    gpu_memory_total : int or None
        Memory of one GPU (MiB): whole-GPU pods need ``gpu_memory_mib`` at most this.
    model : str or None
        The GPU model (``""`` or ``None``: no GPU).
    """

    name: str
    domains: tuple[str | None, ...]
    cpu_free: int | None
    memory_free: int | None
    pods_free: int | None
    gpu_free_milli: tuple[int, ...]
    gpu_free_memory: tuple[int | None, ...]
    gpu_memory_total: int | None
    model: str | None

    @property
    def whole_free(self) -> int:
        """Number of whole-free GPUs (``gpu_free_milli == 1000``)."""
        return sum(1 for m in self.gpu_free_milli if m >= WHOLE_GPU)


@dataclass(frozen=True)
class GangShape:
    """Identical pods of a gang.

    Parameters
    ----------
    count : int
        Pods of this shape in the gang.
    gpus : int
        GPUs per pod (0: CPU only). Shared when ``gpus == 1`` and ``gpu_milli < 1000``.
    gpu_milli : int
        Share of each GPU, 1000 for whole GPUs.
    gpu_memory_mib, cpu_milli, memory_mib : int
        Per-GPU memory, CPU and memory of one pod.
    eligible : frozenset of int
        Indices of the nodes that pass the static filters (selector, taints, cordon,
        GPU model).
    """

    count: int
    gpus: int
    gpu_milli: int
    gpu_memory_mib: int
    cpu_milli: int
    memory_mib: int
    eligible: frozenset[int]

    @property
    def shared(self) -> bool:
        """True for a pod that takes a share of one GPU."""
        return self.gpus == 1 and self.gpu_milli < WHOLE_GPU

    @property
    def whole(self) -> bool:
        """True for a pod that takes whole GPUs."""
        return self.gpus >= 1 and self.gpu_milli >= WHOLE_GPU


@dataclass(frozen=True)
class GangProblem:
    """One gang to place on a set of nodes.

    Parameters
    ----------
    levels : tuple of str
        Topology levels, outermost first; the node itself is the implicit innermost
        level ``"node"``.
    nodes : tuple of GangNode
    shapes : tuple of GangShape
    mode : str
        ``"required"``, ``"preferred"`` or ``"unconstrained"``.
    level : str or None
        The required or preferred level (a name in ``levels`` or ``"node"``); ``None``
        for ``unconstrained``.
    slices : tuple of (str, int)
        ``(level, size)`` outermost first: every domain of a slice level holds a multiple
        of ``size`` pods of the main shape, ``shapes[0]`` (the other shapes are not
        counted).
    same_gpu_model : bool
        All GPU pods of the gang on nodes of one GPU model.
    """

    levels: tuple[str, ...]
    nodes: tuple[GangNode, ...]
    shapes: tuple[GangShape, ...]
    mode: str
    level: str | None
    slices: tuple[tuple[str, int], ...] = ()
    same_gpu_model: bool = True


@dataclass(frozen=True)
class ExactSolution:
    """What CP-SAT found for one gang.

    Parameters
    ----------
    status : str
        ``"optimal"``, ``"feasible"`` (found, not proven best), ``"infeasible"`` (proven
        none exists) or ``"unknown"`` (limit reached, nothing found).
    objective : float or None
        :func:`objective_value` of the answer (``None`` without one).
    bound : float or None
        CP-SAT's best objective bound (``None`` without an answer, or when the bound is the
        trivial 0 under a positive objective).
    counts : dict
        ``(shape, node) -> pods`` of that shape on that node (only entries > 0).
    shared_gpus : dict
        For shared shapes: ``(shape, node) ->`` the GPU index of each of its pods there.
    wall_time_s : float
        Seconds spent building and solving the model.
    num_variables, num_constraints : int
        Size of the CP-SAT model (0 when no model was built).
    """

    status: str
    objective: float | None
    bound: float | None
    counts: dict[tuple[int, int], int]
    shared_gpus: dict[tuple[int, int], tuple[int, ...]]
    wall_time_s: float
    num_variables: int = 0
    num_constraints: int = 0
    solver_status: str = field(default="", compare=False)

    @property
    def found(self) -> bool:
        """True when the solution holds a placement (``optimal`` or ``feasible``)."""
        return self.status in ("optimal", "feasible")


# ------------------------------------------------------------------------ helpers


def _level_index(problem: GangProblem, level: str) -> int:
    """Index of ``level``; ``len(levels)`` for the node level."""
    if level == NODE_LEVEL:
        return len(problem.levels)
    try:
        return problem.levels.index(level)
    except ValueError:
        raise ValueError(
            f"unknown topology level {level!r}: expected one of "
            f"{list(problem.levels) + [NODE_LEVEL]}"
        ) from None


def _domain(problem: GangProblem, n: int, li: int) -> str | None:
    """The domain of node ``n`` at level index ``li`` (the node level: its index)."""
    if li == len(problem.levels):
        return f"#{n}"
    return problem.nodes[n].domains[li]


def _validate(problem: GangProblem) -> None:
    nl = len(problem.levels)
    if len(set(problem.levels)) != nl or NODE_LEVEL in problem.levels:
        raise ValueError(f"levels must be distinct and not {NODE_LEVEL!r}: {problem.levels}")
    for i, node in enumerate(problem.nodes):
        if len(node.domains) != nl:
            raise ValueError(
                f"nodes[{i}] ({node.name}): {len(node.domains)} domains for {nl} levels"
            )
        if len(node.gpu_free_memory) != len(node.gpu_free_milli):
            raise ValueError(
                f"nodes[{i}] ({node.name}): gpu_free_memory and gpu_free_milli differ in length"
            )
    for s, shape in enumerate(problem.shapes):
        if shape.count < 0 or shape.gpus < 0:
            raise ValueError(f"shapes[{s}]: negative count or gpus")
        if not 1 <= shape.gpu_milli <= WHOLE_GPU:
            raise ValueError(f"shapes[{s}]: gpu_milli must be 1..1000, got {shape.gpu_milli}")
        if shape.gpu_milli < WHOLE_GPU and shape.gpus != 1 and shape.gpus != 0:
            raise ValueError(f"shapes[{s}]: gpu_milli below 1000 needs gpus == 1")
        bad = [n for n in shape.eligible if not 0 <= n < len(problem.nodes)]
        if bad:
            raise ValueError(f"shapes[{s}]: eligible node indices out of range: {sorted(bad)}")
    if problem.mode not in GANG_MODES:
        raise ValueError(f"mode must be one of {GANG_MODES}, got {problem.mode!r}")
    if problem.mode != "unconstrained":
        if problem.level is None:
            raise ValueError(f"mode {problem.mode!r} needs a level")
        _level_index(problem, problem.level)
    if problem.slices:
        if not problem.shapes:
            raise ValueError("slices need a shape to count")
        prev = None
        last = -1
        for lvl, size in problem.slices:
            li = _level_index(problem, lvl)
            if li <= last:
                raise ValueError("slice levels must be distinct, outermost first")
            last = li
            if size < 1:
                raise ValueError(f"slice size must be positive, got {size}")
            if prev is not None and prev % size:
                raise ValueError(f"slice size {size} does not divide the outer size {prev}")
            prev = size


def _candidates(problem: GangProblem) -> list[int]:
    """Nodes eligible for at least one shape with pods (what the weights count)."""
    cand: set[int] = set()
    for shape in problem.shapes:
        if shape.count > 0:
            cand |= shape.eligible
    return sorted(cand)


def objective_weights(problem: GangProblem) -> tuple[int, ...]:
    """Integer weights of the lexicographic objective, one per level plus the node level.

    The fragmentation term has weight 1 and is at most twice the whole-free GPUs of the
    nodes the gang can use (at most one node per pod: the largest), so the node level
    weighs one more than that. Going outwards, each weight is the next inner weight times
    (the most domains of that inner level the gang can use + 1: no more than its pods, nor
    than the level has among the eligible nodes), so one more domain at a level always
    outweighs any change at the inner levels and in fragmentation.

    Parameters
    ----------
    problem : GangProblem

    Returns
    -------
    tuple of int
        ``len(problem.levels) + 1`` weights, outermost first, the node level last.
    """
    cand = _candidates(problem)
    nl = len(problem.levels)
    pods = sum(shape.count for shape in problem.shapes)  # every domain used holds a pod
    frag_max = 2 * sum(sorted((problem.nodes[n].whole_free for n in cand), reverse=True)[:pods])
    weights = [0] * (nl + 1)
    weights[nl] = frag_max + 1
    for li in range(nl - 1, -1, -1):
        inner = {_domain(problem, n, li + 1) for n in cand} - {None}
        weights[li] = weights[li + 1] * (min(len(inner), pods) + 1)
    return tuple(weights)


def _used_nodes(counts: Counts) -> set[int]:
    return {n for (s, n), c in counts.items() if c > 0}


def domains_used(problem: GangProblem, counts: Counts) -> dict[str, tuple[str, ...]]:
    """The domains the placement ``counts`` uses at each topology level (sorted paths).

    Parameters
    ----------
    problem : GangProblem
    counts : mapping
        ``(shape, node) -> pods``.

    Returns
    -------
    dict
        level name -> sorted domain paths (the ``domains`` of a GangResult).
    """
    used = _used_nodes(counts)
    out: dict[str, tuple[str, ...]] = {}
    for li, lvl in enumerate(problem.levels):
        doms = {problem.nodes[n].domains[li] for n in used} - {None}
        out[lvl] = tuple(sorted(doms))  # type: ignore[arg-type]
    return out


def objective_value(
    problem: GangProblem, counts: Counts, shared_gpus: SharedGpus | None = None
) -> int:
    """The objective :func:`solve_gang` minimises, for a given placement.

    Σ over levels of weight × domains used, plus the node-level weight × nodes used,
    plus the leftover fragmentation: over the used nodes, the whole-free GPUs left plus
    twice the whole-free GPUs broken by the gang's shared pods.

    Parameters
    ----------
    problem : GangProblem
    counts : mapping
        ``(shape, node) -> pods``.
    shared_gpus : mapping, optional
        ``(shape, node) ->`` GPU index per pod, for shared shapes; needed when ``counts``
        places shared pods (which GPUs they take decides what stays whole-free).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Shared pods are placed and ``shared_gpus`` does not say where.
    """
    weights = objective_weights(problem)
    nl = len(problem.levels)
    used = _used_nodes(counts)
    total = 0
    for li in range(nl + 1):
        doms = {_domain(problem, n, li) for n in used} - {None}
        total += weights[li] * len(doms)
    whole_taken: dict[int, int] = defaultdict(int)
    touched: dict[int, set[int]] = defaultdict(set)
    for (s, n), c in counts.items():
        if c <= 0:
            continue
        shape = problem.shapes[s]
        if shape.whole:
            whole_taken[n] += c * shape.gpus
        elif shape.shared:
            if shared_gpus is None or (s, n) not in shared_gpus:
                raise ValueError(
                    f"shape {s} places shared pods on node {n}: objective_value needs "
                    "shared_gpus to know which GPUs stay whole-free"
                )
            touched[n].update(shared_gpus[(s, n)])
    for n in used:
        node = problem.nodes[n]
        t = sum(
            1 for g in touched[n]
            if 0 <= g < len(node.gpu_free_milli) and node.gpu_free_milli[g] >= WHOLE_GPU
        )
        total += max(0, node.whole_free - whole_taken[n] - t) + 2 * t
    return total


def check_counts(problem: GangProblem, counts: Counts, shared_gpus: SharedGpus) -> list[str]:
    """Every way ``counts`` (and ``shared_gpus``) break the gang's constraints.

    An independent check of a placement, written without the CP-SAT model.

    Parameters
    ----------
    problem : GangProblem
    counts : mapping
        ``(shape, node) -> pods``.
    shared_gpus : mapping
        ``(shape, node) ->`` GPU index per pod for shared shapes.

    Returns
    -------
    list of str
        One line per violation; empty when the placement is feasible.
    """
    out: list[str] = []
    nodes, shapes = problem.nodes, problem.shapes
    per_shape = [0] * len(shapes)
    good: dict[tuple[int, int], int] = {}
    for key, c in counts.items():
        s, n = key
        if not (0 <= s < len(shapes) and 0 <= n < len(nodes)):
            out.append(f"unknown shape/node {key}")
            continue
        if not isinstance(c, int) or c < 0:
            out.append(f"{key}: count {c!r} is not a non-negative integer")
            continue
        if c == 0:
            continue
        if n not in shapes[s].eligible:
            out.append(f"shape {s} on node {nodes[n].name}: node not eligible")
        per_shape[s] += c
        good[key] = c
    for s, shape in enumerate(shapes):
        if per_shape[s] != shape.count:
            out.append(f"shape {s}: {per_shape[s]} pods placed, {shape.count} wanted")
    by_node: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (s, n), c in good.items():
        by_node[n].append((s, c))
    for n, items in sorted(by_node.items()):
        node = nodes[n]
        cpu = sum(shapes[s].cpu_milli * c for s, c in items)
        mem = sum(shapes[s].memory_mib * c for s, c in items)
        pods = sum(c for s, c in items)
        if node.cpu_free is not None and cpu > node.cpu_free:
            out.append(f"{node.name}: cpu {cpu} > free {node.cpu_free}")
        if node.memory_free is not None and mem > node.memory_free:
            out.append(f"{node.name}: memory {mem} > free {node.memory_free}")
        if node.pods_free is not None and pods > node.pods_free:
            out.append(f"{node.name}: pods {pods} > free {node.pods_free}")
        ngpu = len(node.gpu_free_milli)
        milli = [0] * ngpu
        gmem = [0] * ngpu
        whole_need = 0
        for s, c in items:
            shape = shapes[s]
            if shape.whole:
                whole_need += c * shape.gpus
                total_mem = node.gpu_memory_total
                if total_mem is not None and shape.gpu_memory_mib > total_mem:
                    out.append(
                        f"{node.name}: shape {s} needs {shape.gpu_memory_mib} MiB per GPU, "
                        f"GPUs have {node.gpu_memory_total}"
                    )
            elif shape.shared:
                gl = tuple(shared_gpus.get((s, n), ()))
                if len(gl) != c:
                    out.append(
                        f"{node.name}: shape {s} has {c} pods but {len(gl)} shared GPU indices"
                    )
                for g in gl:
                    if not (isinstance(g, int) and 0 <= g < ngpu):
                        out.append(f"{node.name}: shape {s}: no GPU {g!r}")
                        continue
                    milli[g] += shape.gpu_milli
                    gmem[g] += shape.gpu_memory_mib
        touched = {g for g in range(ngpu) if milli[g] > 0}
        for g in sorted(touched):
            if milli[g] > node.gpu_free_milli[g]:
                out.append(f"{node.name}: GPU {g} share {milli[g]} > free {node.gpu_free_milli[g]}")
            fm = node.gpu_free_memory[g]
            if fm is not None and gmem[g] > fm:
                out.append(f"{node.name}: GPU {g} memory {gmem[g]} > free {fm}")
        whole_avail = sum(
            1 for g in range(ngpu) if node.gpu_free_milli[g] >= WHOLE_GPU and g not in touched
        )
        if whole_need > whole_avail:
            out.append(
                f"{node.name}: {whole_need} whole GPUs needed, {whole_avail} whole-free and "
                "not shared by the gang"
            )
    used = sorted(by_node)
    nl = len(problem.levels)
    if problem.mode == "required" and problem.level is not None and used:
        li = _level_index(problem, problem.level)
        doms = [_domain(problem, n, li) for n in used]
        if None in doms:
            out.append(f"required level {problem.level}: a used node is in no domain of it")
        if len(set(doms) - {None}) > 1:
            out.append(f"required level {problem.level}: {len(set(doms) - {None})} domains used")
    for lvl, size in problem.slices:
        li = _level_index(problem, lvl)
        per_dom: dict[str | None, int] = defaultdict(int)
        for (s, n), c in good.items():
            if s == 0:  # slices count the main shape
                per_dom[_domain(problem, n, li)] += c
        for dom, c in sorted(per_dom.items(), key=lambda kv: str(kv[0])):
            if dom is None:
                out.append(f"slice level {lvl}: {c} pods on nodes in no domain of it")
            elif c % size:
                shown = nodes[int(dom[1:])].name if li == nl else dom
                out.append(
                    f"slice level {lvl}: domain {shown} holds {c} pods, not a multiple of {size}"
                )
    if problem.same_gpu_model:
        models = {nodes[n].model or "" for (s, n) in good if shapes[s].gpus > 0}
        if len(models) > 1:
            out.append(f"sameGpuModel: GPU pods on models {sorted(models)}")
    return out


# ------------------------------------------------------------------------ the model


@dataclass
class GpuClass:
    """GPUs of one node alike for the gang's only shared shape (same free share, memory)."""

    gpus: tuple[int, ...]
    cap: int  # pods of the shared shape one GPU of the class holds
    whole_free: bool
    z: Any = None  # pods of the shared shape on the class
    o: Any = None  # whole-free GPUs of the class opened for shares
    wh: Any = None  # whole-free GPUs of the class taken whole


@dataclass
class NodeGpus:
    """The GPU variables of one node where shared pods may go."""

    classes: list[GpuClass] = field(default_factory=list)  # the gang has one shared shape
    y: dict[tuple[int, int], Any] = field(default_factory=dict)  # (shape, GPU) -> pods
    w: dict[int, Any] = field(default_factory=dict)  # GPU -> taken whole
    b: dict[int, Any] = field(default_factory=dict)  # whole-free GPU -> broken by shares


@dataclass
class GangModel:
    """The CP-SAT model of one gang (:func:`build_gang_model`) and the handles to read an
    answer back: the variables of the module docstring — ``x`` per (shape, node) with its
    upper bound in ``ubs``, ``u`` per node, ``d`` and ``k`` per (level, domain), ``m`` per
    GPU model, and per node where shared pods may go its GPU variables (``gpus``)."""

    model: cp_model.CpModel
    x: dict[tuple[int, int], Any]
    ubs: dict[tuple[int, int], int]
    u: dict[int, Any]
    d: dict[tuple[int, str], Any]
    k: dict[tuple[int, str], tuple[Any, int, tuple[int, ...]]]
    m: dict[str, Any]
    gpus: dict[int, NodeGpus]
    empty_shape: int | None  # a shape with pods but nowhere to go
    twins: list[list[int]]  # identical nodes, in index order
    single: bool  # one shape with pods: twins ordered by its count, else by use


def _gpu_caps(node: GangNode, shape: GangShape) -> list[int]:
    """Pods of the shared ``shape`` each GPU of ``node`` can hold on its own."""
    caps = []
    for g, free in enumerate(node.gpu_free_milli):
        c = max(0, free) // shape.gpu_milli
        fm = node.gpu_free_memory[g]
        if fm is not None and shape.gpu_memory_mib > 0:
            c = min(c, max(0, fm) // shape.gpu_memory_mib)
        caps.append(min(c, shape.count))
    return caps


def _upper_bound(problem: GangProblem, n: int, shape: GangShape, banned: bool) -> int:
    """Most pods of ``shape`` node ``n`` can hold alone (0: no variable)."""
    if banned or shape.count <= 0:
        return 0
    node = problem.nodes[n]
    ub = shape.count
    if node.pods_free is not None:
        ub = min(ub, max(0, node.pods_free))
    if node.cpu_free is not None and shape.cpu_milli > 0:
        ub = min(ub, max(0, node.cpu_free) // shape.cpu_milli)
    if node.memory_free is not None and shape.memory_mib > 0:
        ub = min(ub, max(0, node.memory_free) // shape.memory_mib)
    if shape.whole:
        if node.gpu_memory_total is not None and shape.gpu_memory_mib > node.gpu_memory_total:
            return 0
        ub = min(ub, node.whole_free // shape.gpus)
    elif shape.shared:
        ub = min(ub, sum(_gpu_caps(node, shape)))
    return ub


def _shared_shapes(problem: GangProblem) -> list[int]:
    return [s for s, sh in enumerate(problem.shapes) if sh.shared and sh.count > 0]


def _class_gpus(
    model: cp_model.CpModel, problem: GangProblem, n: int, s: int, ub: int,
    whole_expr: Any, has_whole: bool, used: Any, frag_terms: list[Any],
) -> tuple[NodeGpus, Any]:
    """GPUs of node ``n`` grouped into classes, for a gang with one shared shape ``s``.

    Per class: ``z`` pods of ``s``, and on whole-free classes ``o`` GPUs opened for
    shares (``o <= z <= cap * o``) and ``wh`` GPUs taken whole. Exact because all pods of
    ``s`` are alike: ``z`` pods fit on ``o`` alike GPUs iff ``o <= z <= cap * o``.
    Returns the node's variables and the sum of its ``z``.
    """
    node = problem.nodes[n]
    caps = _gpu_caps(node, problem.shapes[s])
    groups: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    for g, milli in enumerate(node.gpu_free_milli):
        if caps[g] > 0 or milli >= WHOLE_GPU:
            groups[milli, node.gpu_free_memory[g]].append(g)
    ng = NodeGpus()
    zs, whs = [], []
    for (milli, _), gs in sorted(groups.items(), key=lambda kv: kv[1][0]):
        size, cap = len(gs), caps[gs[0]]
        c = GpuClass(tuple(gs), cap, milli >= WHOLE_GPU)
        tag = f"{n}_{gs[0]}"
        if cap > 0:
            c.z = model.new_int_var(0, min(ub, cap * size), f"z_{tag}")
            zs.append(c.z)
        if c.whole_free:
            if cap > 0:
                c.o = model.new_int_var(0, min(size, ub), f"o_{tag}")
                model.add(c.o <= c.z)
                model.add(c.z <= cap * c.o)
            if has_whole:
                c.wh = model.new_int_var(0, size, f"wh_{tag}")
                whs.append(c.wh)
            if c.o is not None and c.wh is not None:
                model.add(c.o + c.wh <= size)
            # left whole-free (size - wh - o) plus twice the GPUs broken by shares (o)
            frag_terms.append(size * used - (c.wh if c.wh is not None else 0)
                              + (c.o if c.o is not None else 0))
        ng.classes.append(c)
    if has_whole:
        model.add(sum(whs) == whole_expr)
    return ng, sum(zs)


def _per_gpu(
    model: cp_model.CpModel, problem: GangProblem, n: int, shared: list[int],
    x: dict[tuple[int, int], Any], ubs: dict[tuple[int, int], int],
    whole_expr: Any, has_whole: bool, used: Any, frag_terms: list[Any],
) -> NodeGpus:
    """One variable per (shared shape, GPU) on node ``n`` (gangs with several shared shapes)."""
    node = problem.nodes[n]
    shapes = problem.shapes
    ng = NodeGpus()
    wf_idx = [g for g, m in enumerate(node.gpu_free_milli) if m >= WHOLE_GPU]
    y_ub: dict[tuple[int, int], int] = {}
    for s in shared:
        ys = []
        for g, cap in enumerate(_gpu_caps(node, shapes[s])):
            if cap > 0:
                y_ub[s, g] = min(cap, ubs[s, n])
                ng.y[s, g] = model.new_int_var(0, y_ub[s, g], f"y_{s}_{n}_{g}")
                ys.append(ng.y[s, g])
        model.add(x[s, n] == sum(ys))
    if has_whole:
        for g in wf_idx:
            ng.w[g] = model.new_bool_var(f"w_{n}_{g}")
        model.add(sum(ng.w.values()) == whole_expr)
    for g in range(len(node.gpu_free_milli)):
        ys = [(shapes[s], ng.y[s, g]) for s in shared if (s, g) in ng.y]
        if not ys:
            continue
        if len(ys) > 1 or g in ng.w:
            share = sum(sh.gpu_milli * v for sh, v in ys)
            model.add(share + (WHOLE_GPU * ng.w[g] if g in ng.w else 0) <= node.gpu_free_milli[g])
            fm = node.gpu_free_memory[g]
            if fm is not None and len(ys) > 1:
                model.add(sum(sh.gpu_memory_mib * v for sh, v in ys) <= fm)
    for g in wf_idx:
        ys = [(ng.y[s, g], y_ub[s, g]) for s in shared if (s, g) in ng.y]
        if not ys:
            frag_terms.append(used - (ng.w[g] if g in ng.w else 0))
            continue
        # b: the GPU is broken by shares (exactly when one of its y is positive)
        ng.b[g] = b = model.new_bool_var(f"b_{n}_{g}")
        for v, ub in ys:
            model.add(v <= ub * b)
        model.add(sum(v for v, _ in ys) >= b)
        if g in ng.w:
            model.add(ng.w[g] + b <= 1)
        frag_terms.append(used - (ng.w[g] if g in ng.w else 0) + b)
    return ng


def _fewest(caps: list[int], demand: int) -> int | None:
    """Fewest of ``caps`` whose sum reaches ``demand`` (``None``: all of them do not)."""
    total = 0
    for i, cap in enumerate(sorted(caps, reverse=True), 1):
        total += cap
        if total >= demand:
            return i
    return None


def _add_covers(
    model: cp_model.CpModel, problem: GangProblem, x: dict[tuple[int, int], Any],
    ubs: dict[tuple[int, int], int], u: dict[int, Any], d: dict[tuple[int, str], Any],
) -> None:
    """Cover cuts: Σ domains used at a level ≥ the fewest domains whose capacity holds a demand.

    Demands are each shape's pods (capacity of a node: the variable's upper bound) and the
    whole GPUs of all whole-GPU shapes (capacity: whole-free GPUs). Valid for every
    placement, so they never change the optimum; they give the search the bound the LP
    only approaches (one more domain than the LP's fractional count). With a required
    level, the same cut holds inside each of its domains, enforced by that domain's use.
    """
    shapes = problem.shapes
    nl = len(problem.levels)
    demands: list[tuple[int, dict[int, int]]] = []
    for s, shape in enumerate(shapes):
        if shape.count > 0:
            demands.append((shape.count, {n: ub for (s2, n), ub in ubs.items() if s2 == s}))
    whole = [s for s, sh in enumerate(shapes) if sh.whole and sh.count > 0]
    if len(whole) > 1:
        gpu_nodes = {n for (s, n) in x if s in whole}
        demands.append((sum(shapes[s].gpus * shapes[s].count for s in whole),
                        {n: problem.nodes[n].whole_free for n in gpu_nodes}))
    req = None
    if problem.mode == "required" and problem.level is not None:
        req = _level_index(problem, problem.level)

    def var(li: int, n: int) -> Any:
        return u[n] if li == nl else d[li, problem.nodes[n].domains[li]]

    for li in range(nl + 1):
        for demand, caps in demands:
            if any(_domain(problem, n, li) is None for n in caps):
                continue  # pods may sit outside every domain of the level
            groups: dict[str, list[int]] = defaultdict(list)
            for n in caps:
                groups[_domain(problem, n, li)].append(n)  # type: ignore[index]
            dom_cap = {dom: min(demand, sum(caps[n] for n in ns)) for dom, ns in groups.items()}
            k = _fewest(list(dom_cap.values()), demand)
            if k is not None and k > 1:
                model.add(sum(var(li, ns[0]) for ns in groups.values()) >= k)
            if req is None or li <= req or req == nl:
                continue
            inside: dict[str, list[str]] = defaultdict(list)
            for dom, ns in groups.items():
                inside[_domain(problem, ns[0], req)].append(dom)  # type: ignore[index]
            for parent, doms in inside.items():
                kp = _fewest([dom_cap[dom] for dom in doms], demand)
                if kp is None:
                    model.add(d[req, parent] == 0)  # the domain cannot hold the gang
                elif kp > 1:
                    model.add(sum(var(li, groups[dom][0]) for dom in doms) >= kp).only_enforce_if(
                        d[req, parent]
                    )


class OutOfTime(Exception):
    """The time limit ran out before the model was built."""


class Clock:
    """Raises :class:`OutOfTime` from :meth:`tick` once ``deadline`` (``perf_counter``) passes;
    looks at the time every ``every`` ticks."""

    __slots__ = ("deadline", "every", "_count")

    def __init__(self, deadline: float | None, every: int = 512) -> None:
        self.deadline = deadline
        self.every = every
        self._count = 0

    def tick(self) -> None:
        self._count += 1
        if self._count % self.every == 0:
            self.check()

    def check(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise OutOfTime


def build_gang_model(problem: GangProblem, clock: Clock | None = None) -> GangModel:
    """The CP-SAT model of a gang: variables, constraints and objective, without a hint or
    solver parameters (:func:`solve_gang` builds, hints and solves it).

    Parameters
    ----------
    problem : GangProblem
    clock : Clock, optional
        Looked at while the model grows; default: no time limit.

    Returns
    -------
    GangModel

    Raises
    ------
    OutOfTime
        When ``clock`` runs out on the way.
    """
    from ortools.sat.python import cp_model

    clock = clock or Clock(None)
    tick = clock.tick
    model = cp_model.CpModel()
    nodes, shapes = problem.nodes, problem.shapes
    nl = len(problem.levels)

    # Nodes a hard constraint keeps the gang off: no domain at the required level or at
    # a slice level.
    hard_levels = [_level_index(problem, lvl) for lvl, _ in problem.slices]
    if problem.mode == "required" and problem.level is not None:
        hard_levels.append(_level_index(problem, problem.level))
    banned = {
        n for n in range(len(nodes)) if any(_domain(problem, n, li) is None for li in hard_levels)
    }

    # --- variables: pods per (shape, node)
    x: dict[tuple[int, int], Any] = {}
    ubs: dict[tuple[int, int], int] = {}
    empty_shape = None
    for s, shape in enumerate(shapes):
        for n in sorted(shape.eligible):
            tick()
            ub = _upper_bound(problem, n, shape, n in banned)
            if ub > 0:
                x[s, n] = model.new_int_var(0, ub, f"x_{s}_{n}")
                ubs[s, n] = ub
        if shape.count > 0 and not any((s, n) in x for n in shape.eligible):
            empty_shape = s

    # --- every pod placed
    for s, shape in enumerate(shapes):
        terms = [v for (s2, _), v in x.items() if s2 == s]
        if terms:
            model.add(sum(terms) == shape.count)

    by_node: dict[int, list[int]] = defaultdict(list)
    for s, n in x:
        by_node[n].append(s)

    # --- node used (exactly when it holds a pod)
    u: dict[int, Any] = {}
    for n, ss in by_node.items():
        tick()
        u[n] = model.new_bool_var(f"u_{n}")
        for s in ss:
            model.add(x[s, n] <= ubs[s, n] * u[n])
        model.add(sum(x[s, n] for s in ss) >= u[n])

    # --- capacity per node (GPUs per node, per class or per GPU); leftover fragmentation
    shared_all = _shared_shapes(problem)
    frag_terms: list[Any] = []
    gpus: dict[int, NodeGpus] = {}
    for n, ss in sorted(by_node.items()):
        tick()
        node = nodes[n]
        for free, attr in ((node.cpu_free, "cpu_milli"), (node.memory_free, "memory_mib")):
            if free is None:
                continue
            # one term alone is already bounded by the variable's upper bound
            terms = [(getattr(shapes[s], attr), x[s, n]) for s in ss]
            terms = [(c, v) for c, v in terms if c > 0]
            if len(terms) > 1:
                model.add(sum(c * v for c, v in terms) <= free)
        if node.pods_free is not None and len(ss) > 1:
            model.add(sum(x[s, n] for s in ss) <= node.pods_free)
        whole = [s for s in ss if shapes[s].whole]
        shared = [s for s in ss if shapes[s].shared]
        wf = node.whole_free
        whole_expr = sum(shapes[s].gpus * x[s, n] for s in whole) if whole else 0
        if not shared:
            if len(whole) > 1:
                model.add(whole_expr <= wf * u[n])
            if wf:
                frag_terms.append(wf * u[n] - whole_expr)
        elif len(shared_all) == 1:
            s = shared[0]
            gpus[n], zsum = _class_gpus(model, problem, n, s, ubs[s, n], whole_expr, bool(whole),
                                        u[n], frag_terms)
            model.add(x[s, n] == zsum)
        else:
            gpus[n] = _per_gpu(model, problem, n, shared, x, ubs, whole_expr, bool(whole), u[n],
                               frag_terms)

    # --- domains used, per level (the node level is u itself)
    d: dict[tuple[int, str], Any] = {}
    members: dict[tuple[int, str], list[int]] = defaultdict(list)
    for n in u:
        for li in range(nl):
            dom = nodes[n].domains[li]
            if dom is not None:
                members[li, dom].append(n)
    for (li, dom), ns in sorted(members.items()):
        tick()
        d[li, dom] = v = model.new_bool_var(f"d_{li}_{dom}")
        for n in ns:
            model.add_implication(u[n], v)
        model.add_bool_or([u[n] for n in ns] + [v.Not()])
        # Capacity of the domain, linked to its use: redundant for the integer model, but
        # it gives the LP relaxation a lower bound on the domains the gang needs.
        for s, shape in enumerate(shapes):
            xs = [(x[s, n], ubs[s, n]) for n in ns if (s, n) in x]
            if xs:
                cap = min(shape.count, sum(ub for _, ub in xs))
                model.add(sum(xv for xv, _ in xs) <= cap * v)
        gpu_terms = [shapes[s].gpus * x[s, n] for n in ns for s in by_node[n] if shapes[s].whole]
        if gpu_terms:
            model.add(sum(gpu_terms) <= sum(nodes[n].whole_free for n in ns) * v)

    # --- required: one domain of the level
    if problem.mode == "required" and problem.level is not None and u:
        li = _level_index(problem, problem.level)
        if li == nl:
            model.add_exactly_one(list(u.values()))
        else:
            model.add_exactly_one([v for (l2, _), v in d.items() if l2 == li])

    # --- covers: at least as many domains as the largest ones need to hold the gang
    clock.check()
    _add_covers(model, problem, x, ubs, u, d)
    clock.check()

    # --- slices: each domain of a slice level holds whole slices
    k: dict[tuple[int, str], tuple[Any, int, tuple[int, ...]]] = {}
    if problem.slices and x:
        total = shapes[0].count
        for lvl, size in problem.slices:
            li = _level_index(problem, lvl)
            groups: dict[str, list[int]] = defaultdict(list)
            for (s, n) in x:
                if s == 0:  # slices count the main shape
                    groups[_domain(problem, n, li)].append(n)  # type: ignore[index]
            for dom, ns in sorted(groups.items()):
                cap = min(total, sum(ubs[0, n] for n in ns)) // size
                kv = model.new_int_var(0, cap, f"k_{li}_{dom}")
                k[li, dom] = (kv, size, tuple(ns))
                model.add(sum(x[0, n] for n in ns) == size * kv)

    # --- one GPU model for the GPU pods
    m: dict[str, Any] = {}
    if problem.same_gpu_model and any(sh.gpus > 0 and sh.count > 0 for sh in shapes):
        for (s, n) in x:
            if shapes[s].gpus > 0:
                key = nodes[n].model or ""
                if key not in m:
                    m[key] = model.new_bool_var(f"m_{key}")
                model.add(x[s, n] <= ubs[s, n] * m[key])
        if m:
            model.add_exactly_one(list(m.values()))

    # --- symmetry: identical nodes (same domains, free capacity, eligibility) are
    # interchangeable, so use them in index order.
    sig_groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for n, ss in by_node.items():
        node = nodes[n]
        sig = (
            node.domains, node.cpu_free, node.memory_free, node.pods_free, node.gpu_free_milli,
            node.gpu_free_memory, node.gpu_memory_total, node.model or "",
            tuple(sorted((s, ubs[s, n]) for s in ss)),
        )
        sig_groups[sig].append(n)
        tick()
    single = sum(1 for sh in shapes if sh.count > 0) == 1
    twins = []
    for ns in sig_groups.values():
        if len(ns) < 2:
            continue
        ns.sort()
        twins.append(ns)
        for a, b in zip(ns, ns[1:]):
            if single:
                s = by_node[a][0]
                model.add(x[s, a] >= x[s, b])
            else:
                model.add(u[a] >= u[b])

    # --- objective: domains level by level, outermost first, nodes, then leftovers
    weights = objective_weights(problem)
    obj = [weights[li] * v for (li, _), v in d.items()]
    obj += [weights[nl] * v for v in u.values()]
    obj += frag_terms
    if obj:
        model.minimize(sum(obj))
    return GangModel(model, x, ubs, u, d, k, m, gpus, empty_shape, twins, single)


# ------------------------------------------------------------------- hints, answers


def pack_shared_gpus(
    problem: GangProblem, counts: Counts
) -> dict[tuple[int, int], tuple[int, ...]] | None:
    """GPU indices for the shared pods of ``counts`` by best fit, ``(shape, node) ->
    indices`` (``None`` if they do not fit).

    Whole-GPU pods keep the highest whole-free GPUs; shares go to the fullest GPU that
    still holds them, so partially used GPUs fill before whole-free ones are opened.
    """
    out: dict[tuple[int, int], tuple[int, ...]] = {}
    per_node: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (s, n), c in counts.items():
        if c > 0:
            per_node[n].append((s, c))
    for n, items in per_node.items():
        if not any(problem.shapes[s].shared for s, _ in items):
            continue
        node = problem.nodes[n]
        need = sum(problem.shapes[s].gpus * c for s, c in items if problem.shapes[s].whole)
        wf = [g for g, m in enumerate(node.gpu_free_milli) if m >= WHOLE_GPU]
        reserved = set(wf[len(wf) - need:]) if need else set()
        milli = [m if g not in reserved else 0 for g, m in enumerate(node.gpu_free_milli)]
        mem = list(node.gpu_free_memory)
        for s, c in sorted(items, key=lambda it: -problem.shapes[it[0]].gpu_milli):
            shape = problem.shapes[s]
            if not shape.shared:
                continue
            picks = []
            for _ in range(c):
                fits = [
                    g for g in range(len(milli))
                    if milli[g] >= shape.gpu_milli
                    and (mem[g] is None or mem[g] >= shape.gpu_memory_mib)
                ]
                if not fits:
                    return None
                g = min(fits, key=lambda g: (milli[g], g))
                milli[g] -= shape.gpu_milli
                if mem[g] is not None:
                    mem[g] -= shape.gpu_memory_mib
                picks.append(g)
            out[s, n] = tuple(sorted(picks))
    return out


def _reorder_twins(
    built: GangModel,
    counts: dict[tuple[int, int], int],
    shared: dict[tuple[int, int], tuple[int, ...]],
) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], tuple[int, ...]]]:
    """Move loads among identical nodes so that they meet the model's symmetry breaking."""
    for ns in built.twins:
        group = set(ns)
        loads = {
            n: ({s: c for (s, n2), c in counts.items() if n2 == n},
                {s: g for (s, n2), g in shared.items() if n2 == n})
            for n in ns
        }
        order = sorted(
            ns, key=lambda n: -(sum(loads[n][0].values()) if built.single else bool(loads[n][0]))
        )
        counts = {key: c for key, c in counts.items() if key[1] not in group}
        shared = {key: g for key, g in shared.items() if key[1] not in group}
        for dst, src in zip(ns, order):
            for s, c in loads[src][0].items():
                counts[s, dst] = c
            for s, g in loads[src][1].items():
                shared[s, dst] = g
    return counts, shared


def add_gang_hint(
    problem: GangProblem, built: GangModel, hint: Counts, hint_shared: SharedGpus | None
) -> None:
    """Hint to ``built`` every variable the placement ``hint`` (``(shape, node) -> pods``)
    determines; keys without a variable are skipped.

    With the GPU index of every shared pod known (``hint_shared``, e.g. from
    :func:`pack_shared_gpus`) the hint is complete, so CP-SAT can take a feasible hint as
    its first solution; without, the GPU variables of nodes with shared pods stay free.
    """
    nodes, shapes = problem.nodes, problem.shapes
    counts = {key: int(c) for key, c in hint.items() if c > 0}
    shared = {key: tuple(g) for key, g in (hint_shared or {}).items()}
    counts, shared = _reorder_twins(built, counts, shared)
    add = built.model.add_hint
    for key, v in built.x.items():
        add(v, counts.get(key, 0))
    used = _used_nodes(counts)
    for n, v in built.u.items():
        add(v, int(n in used))
    for (li, dom), v in built.d.items():
        add(v, int(any(nodes[n].domains[li] == dom for n in used)))
    for (li, dom), (v, size, ns) in built.k.items():
        add(v, sum(counts.get((0, n), 0) for n in ns) // size)
    if built.m:
        models = {nodes[n].model or "" for (s, n) in counts if shapes[s].gpus > 0}
        for key, v in built.m.items():
            add(v, int(key in models))
    for n, ng in built.gpus.items():
        items = [(s, c) for (s, n2), c in counts.items() if n2 == n]
        if any(shapes[s].shared and (s, n) not in shared for s, _ in items):
            continue  # where the shared pods go is unknown: leave the GPU variables free
        need = sum(shapes[s].gpus * c for s, c in items if shapes[s].whole)
        picks = {s: shared.get((s, n), ()) for s, _ in items if shapes[s].shared}
        touched = {g for gl in picks.values() for g in gl}
        if ng.classes:
            for c in ng.classes:
                on = [g for gl in picks.values() for g in gl if g in c.gpus]
                opened = len(set(on))
                if c.z is not None:
                    add(c.z, len(on))
                if c.o is not None:
                    add(c.o, opened)
                if c.wh is not None:
                    take = max(0, min(need, len(c.gpus) - opened))
                    add(c.wh, take)
                    need -= take
        else:
            for (s, g), v in ng.y.items():
                add(v, sum(1 for gg in picks.get(s, ()) if gg == g))
            whole_taken = set()
            for g in sorted(ng.w):
                take = need > 0 and g not in touched
                add(ng.w[g], int(take))
                if take:
                    whole_taken.add(g)
                    need -= 1
            for g, v in ng.b.items():
                add(v, int(g in touched))


def _read_shared(
    built: GangModel, solver: cp_model.CpSolver, shared_shapes: list[int]
) -> dict[tuple[int, int], tuple[int, ...]]:
    """The GPU index of each shared pod in the solver's answer."""
    out: dict[tuple[int, int], tuple[int, ...]] = {}
    for n, ng in built.gpus.items():
        if ng.classes:
            s = shared_shapes[0]
            picks: list[int] = []
            for c in ng.classes:
                z = int(solver.value(c.z)) if c.z is not None else 0
                if z == 0:
                    continue
                # o opened GPUs (all the class when it is not whole-free) get one pod each,
                # then fill up to the class capacity in index order
                opened = c.gpus[: int(solver.value(c.o))] if c.o is not None else c.gpus
                load = [0] * len(opened)
                for i in range(min(z, len(opened)) if c.o is not None else 0):
                    load[i] = 1
                rest = z - sum(load)
                for i in range(len(opened)):
                    more = min(rest, c.cap - load[i])
                    load[i] += more
                    rest -= more
                for g, cnt in zip(opened, load):
                    picks.extend([g] * cnt)
            if picks:
                out[s, n] = tuple(sorted(picks))
        else:
            per: dict[int, list[int]] = defaultdict(list)
            for (s, g), v in sorted(ng.y.items()):
                per[s].extend([g] * int(solver.value(v)))
            for s, gl in per.items():
                if gl:
                    out[s, n] = tuple(gl)
    return out


def _hint_or_nothing(problem: GangProblem, hint: Counts | None, hint_shared_gpus: SharedGpus | None,
                     start: float) -> ExactSolution:
    """The answer when the time ran out before a search: the hint if it checks out."""
    spent = time.perf_counter() - start
    if hint:
        counts = {key: int(c) for key, c in hint.items() if c > 0}
        shared = ({key: tuple(g) for key, g in hint_shared_gpus.items()} if hint_shared_gpus is not None
                  else pack_shared_gpus(problem, counts))
        if shared is not None and not check_counts(problem, counts, shared):
            return ExactSolution("feasible", float(objective_value(problem, counts, shared)), None, counts,
                                 {key: g for key, g in shared.items() if counts.get(key)}, spent,
                                 solver_status="TIME_LIMIT_BUILDING")
    return ExactSolution("unknown", None, None, {}, {}, spent, solver_status="TIME_LIMIT_BUILDING")


def solve_gang(
    problem: GangProblem,
    time_limit_s: float = 10.0,
    deterministic_time_s: float | None = None,
    workers: int | None = None,
    hint: Counts | None = None,
    seed: int = 0,
    *,
    hint_shared_gpus: SharedGpus | None = None,
    solver_params: Mapping[str, Any] | None = None,
    started: float | None = None,
) -> ExactSolution:
    """Place one gang exactly with CP-SAT.

    Parameters
    ----------
    problem : GangProblem
    time_limit_s : float, default 10.0
        Wall-clock budget for building and solving the model (CP-SAT gets what the
        building left as ``max_time_in_seconds``).
    deterministic_time_s : float, optional
        CP-SAT ``max_deterministic_time``: a limit that gives the same answer on every
        run (with one worker).
    workers : int, optional
        CP-SAT ``num_workers``; default 1, so that a run is reproducible. More workers
        (e.g. 8) run CP-SAT's parallel portfolio and usually prove optimality sooner.
    hint : mapping, optional
        A placement to start from, ``(shape, node) -> pods`` (typically the greedy
        answer); given to CP-SAT through ``AddHint``. Entries without a variable are
        ignored. If the hint is feasible and CP-SAT stops before finding anything at
        least as good, the hint is the answer (status ``feasible``).
    seed : int, default 0
        CP-SAT ``random_seed``.
    hint_shared_gpus : mapping, optional
        The GPU index of each shared pod of ``hint``, ``(shape, node) -> indices``;
        packed by best fit when left out.
    solver_params : mapping, optional
        Further CP-SAT parameters (``SatParameters`` field name -> value), set last.
    started : float, optional
        When the time limit started (``time.perf_counter()``; default: now), so that the
        caller's own preparation counts against it. Building the model counts too: when
        the limit runs out first, the result is ``unknown`` (or the hint, ``feasible``)
        with ``solver_status`` ``TIME_LIMIT_BUILDING``.

    Returns
    -------
    ExactSolution

    Raises
    ------
    ValueError
        ``problem`` is malformed (levels, shapes or slices inconsistent).
    SolverError
        CP-SAT rejected the model (``MODEL_INVALID``, e.g. possible integer overflow).
    """
    start = time.perf_counter() if started is None else started
    _validate(problem)
    if all(shape.count == 0 for shape in problem.shapes):
        return ExactSolution("optimal", 0.0, 0.0, {}, {}, time.perf_counter() - start,
                             solver_status="EMPTY")

    # ------------------------------------------------------------ data → model
    try:
        built = build_gang_model(problem, Clock(start + float(time_limit_s)))
    except (OverflowError, TypeError) as exc:  # weights or capacities beyond int64
        raise SolverError(f"the CP-SAT model of the gang could not be built: {exc}") from exc
    except OutOfTime:
        return _hint_or_nothing(problem, hint, hint_shared_gpus, start)
    proto = built.model.proto
    nvars, ncons = len(proto.variables), len(proto.constraints)
    if built.empty_shape is not None:
        # a shape with pods and no node able to hold one: infeasible without a search
        return ExactSolution("infeasible", None, None, {}, {}, time.perf_counter() - start,
                             nvars, ncons, "NO_NODE")
    hint_counts: dict[tuple[int, int], int] | None = None
    hint_shared: dict[tuple[int, int], tuple[int, ...]] | None = None
    if hint is not None:
        hint_counts = {key: int(c) for key, c in hint.items() if c > 0}
        if hint_shared_gpus is not None:
            hint_shared = {key: tuple(g) for key, g in hint_shared_gpus.items()}
        else:
            hint_shared = pack_shared_gpus(problem, hint_counts)
        add_gang_hint(problem, built, hint_counts, hint_shared)

    # ------------------------------------------------------------ solve
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = max(0.0, float(time_limit_s) - (time.perf_counter() - start))
    if deterministic_time_s is not None:
        params.max_deterministic_time = max(0.0, float(deterministic_time_s))
    params.num_workers = int(workers) if workers else 1
    params.random_seed = int(seed)
    params.log_search_progress = False
    # Probing in presolve adds millions of implications on 1000-node gangs (every "domain
    # used" and "GPU model" Boolean implies hundreds of zeros) and can eat the whole time
    # limit; the LP of level 2 is what bounds the domain counts.
    params.cp_model_probing_level = 0
    params.linearization_level = 2
    # Symmetry detection in presolve does not heed the time limit: with a hint on a
    # 10,000-node gang it ran for minutes under a 5 s limit. Twins are broken in the model.
    params.symmetry_level = 0
    for key, value in (solver_params or {}).items():
        setattr(params, key, value)
    status = solver.solve(built.model)

    # ------------------------------------------------------------ status
    name = status_name(status)
    if name == "invalid":
        why = built.model.validate().splitlines()
        raise SolverError(f"CP-SAT rejected the gang model: {why[0] if why else 'invalid'}")
    bound: float | None = None
    if name != "infeasible":
        b = solver.best_objective_bound
        bound = float(b) if math.isfinite(b) else None
    counts: dict[tuple[int, int], int] = {}
    shared: dict[tuple[int, int], tuple[int, ...]] = {}
    objective: float | None = None
    if name in ("optimal", "feasible"):
        for key, v in built.x.items():
            c = int(solver.value(v))
            if c > 0:
                counts[key] = c
        shared = _read_shared(built, solver, _shared_shapes(problem))
        objective = float(objective_value(problem, counts, shared))
    if hint_counts is not None and hint_shared is not None and name != "optimal":
        # CP-SAT stopped early: a feasible hint at least as good is the better answer.
        if not check_counts(problem, hint_counts, hint_shared):
            if name == "infeasible":
                raise SolverError("CP-SAT proved infeasible a gang placement that checks out")
            value = float(objective_value(problem, hint_counts, hint_shared))
            if objective is None or value < objective:
                name, objective = "feasible", value
                counts = dict(hint_counts)
                shared = {key: g for key, g in hint_shared.items() if counts.get(key)}
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    if name not in ("optimal", "feasible") or (bound is not None and bound <= 0 < (objective or 0)):
        # nothing found, or CP-SAT's trivial 0.0 under a positive objective: it tells nothing
        bound = None
    return ExactSolution(
        name, objective, bound, counts, shared, time.perf_counter() - start,
        nvars, ncons, solver.status_name(status),
    )
