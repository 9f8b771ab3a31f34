"""Exact gang placement with CP-SAT: the fallback and the check of the greedy kernel.

A gang is a set of pods placed together or not at all. This module states one gang's
placement as a small integer program over pure data (:class:`GangProblem`, from
:mod:`placer.exact.problem`) and solves it
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

The objective is lexicographic through integer weights (:func:`objective_weights`; the
objective and the check of a placement are in :mod:`placer.exact.objective`):
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
from typing import TYPE_CHECKING, Any, Mapping

from placer.exact.cpsat import status_name
from placer.exceptions import SolverError
from placer.exact.problem import (
    GANG_MODES, NODE_LEVEL, WHOLE_GPU, Counts, ExactSolution, GangNode, GangProblem, GangShape, SharedGpus, domain_of,
    level_index, validate_problem,
)
from placer.exact.objective import check_counts, domains_used, objective_value, objective_weights, used_nodes

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
        req = level_index(problem, problem.level)

    def var(li: int, n: int) -> Any:
        return u[n] if li == nl else d[li, problem.nodes[n].domains[li]]

    for li in range(nl + 1):
        for demand, caps in demands:
            if any(domain_of(problem, n, li) is None for n in caps):
                continue  # pods may sit outside every domain of the level
            groups: dict[str, list[int]] = defaultdict(list)
            for n in caps:
                groups[domain_of(problem, n, li)].append(n)  # type: ignore[index]
            dom_cap = {dom: min(demand, sum(caps[n] for n in ns)) for dom, ns in groups.items()}
            k = _fewest(list(dom_cap.values()), demand)
            if k is not None and k > 1:
                model.add(sum(var(li, ns[0]) for ns in groups.values()) >= k)
            if req is None or li <= req or req == nl:
                continue
            inside: dict[str, list[str]] = defaultdict(list)
            for dom, ns in groups.items():
                inside[domain_of(problem, ns[0], req)].append(dom)  # type: ignore[index]
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
    hard_levels = [level_index(problem, lvl) for lvl, _ in problem.slices]
    if problem.mode == "required" and problem.level is not None:
        hard_levels.append(level_index(problem, problem.level))
    banned = {
        n for n in range(len(nodes)) if any(domain_of(problem, n, li) is None for li in hard_levels)
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
        li = level_index(problem, problem.level)
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
            li = level_index(problem, lvl)
            groups: dict[str, list[int]] = defaultdict(list)
            for (s, n) in x:
                if s == 0:  # slices count the main shape
                    groups[domain_of(problem, n, li)].append(n)  # type: ignore[index]
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
    used = used_nodes(counts)
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
    validate_problem(problem)
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
