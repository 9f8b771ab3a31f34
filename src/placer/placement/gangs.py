"""Greedy placement of a gang over topology levels (rules: ``docs/placement-rules.md``).

Capacity is counted bottom-up: for every node, how many pods of the gang's main shape fit
(all resources); every domain sums its children, rounded down to whole slices. The domains
of the required level that hold the whole gang are ranked by the fewest domains they need
per level (:func:`fewest_inside`), then tightest; inside the chosen one, children are
taken largest first and the remainder goes to the child needing fewest children of its
own, level by level, or the largest children of all the domains kept are pooled when that
needs fewer (:func:`choose_counts`). ``preferred`` climbs levels until a domain holds the
gang, then spreads over the cluster the same way. The least of the candidates' fewest
domains is a lower bound for every placement (:attr:`GangPlan.bounds`). The chosen nodes
are bound through the kernel, all or nothing. The counting itself, on arrays alone, is
:mod:`placer.placement.gang_counts`'s.

The request's policy applies where this greedy leaves the choice to the kernel: the GPUs
of each pod on its node, and the node of each pod of the other shapes within the nearest
scope (:func:`near_scopes`). Domains and the main shape's nodes are chosen by tightest
fit whatever the policy.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from placer.exceptions import InvalidInputError
from placer.model import reasons
from placer.model.interpod import has_relations
from placer.model.domains import Domains, Hierarchy
from placer.model.fit import short_of
from placer.kernel import KernelSession, Run
from placer.model import EMPTY, GangResult, GangSpec, PodRequest, Unschedulable, gang_shapes, replace
from placer.policies import Policy
from placer.placement.gang_counts import (  # noqa: F401 - UNREACHABLE, allocate, domain_vector, pooled_nodes: kept here
    UNREACHABLE, allocate, candidate_levels, choose_counts, domain_capacities, domain_vector, fewest_inside,
    pooled_nodes, slice_units,
)

if TYPE_CHECKING:
    from placer.exact import gangs as exact

ROOT = "cluster"  # the level above the outermost one: every node
BUILDING = "TIME_LIMIT_BUILDING"  # the solver status when time ran out before a search


@dataclass
class Shape:
    """Interchangeable pods of one gang and where they may go."""

    pods: list[int]  # indices into the gang's pod list
    pod: PodRequest
    eligible: np.ndarray  # bool per node (static filters)
    model_mask: int

    @property
    def count(self) -> int:
        return len(self.pods)


@dataclass
class GangPlan:
    """The gang as bound: (node, GPU mask, NIC mask) per pod; empty when it does not fit.

    ``fit`` is then the most pods of the main shape one domain of ``level`` holds.
    ``bounds``: per level, outermost first, a lexicographic lower bound on the domains any
    placement of the gang uses (``None`` when no domain holds the main shape).
    """

    placed: list[tuple[int, int, int]] = field(default_factory=list)
    fit: int = 0
    level: str = ""
    bounds: tuple[int, ...] | None = None


def split_shapes(session: KernelSession, pods: Sequence[PodRequest]) -> list[Shape]:
    """The gang's pods grouped by shape, largest first (:func:`placer.model.gang_shapes`)."""
    out = []
    for members in gang_shapes(pods):
        pod = pods[members[0]]
        eligible, model_mask = session.eligibility(pod)
        out.append(Shape(members, pod, eligible, model_mask))
    return out


def node_capacity(session: KernelSession, shape: Shape, limit: int) -> np.ndarray:
    """Pods of ``shape`` each node holds now (0 where it may not go), at most ``limit``."""
    free = session.free
    p = shape.pod
    cap = np.full(session.n_nodes, limit, dtype=np.int64)
    if p.cpu_milli:
        cap = np.minimum(cap, free.cpu_milli // p.cpu_milli)
    if p.memory_mib:
        cap = np.minimum(cap, free.memory_mib // p.memory_mib)
    cap = np.minimum(cap, free.pod_slots)
    if p.gpus and p.shared:
        per_gpu = free.gpu_milli.astype(np.int64) // p.gpu_milli
        if p.gpu_memory_mib:
            per_gpu = np.minimum(per_gpu, free.gpu_memory_mib.astype(np.int64) // p.gpu_memory_mib)
        cap = np.minimum(cap, per_gpu.sum(axis=1))
    elif p.gpus:
        cap = np.minimum(cap, free.whole_gpus.astype(np.int64) // p.gpus)
        cap = np.where(free.gpu_memory_capacity >= p.gpu_memory_mib, cap, 0)
    model_ok = ((shape.model_mask >> free.model_id.astype(np.uint64)) & 1).astype(bool)
    cap = np.where(shape.eligible & model_ok, np.maximum(cap, 0), 0)
    return cap


def place_gang(
    session: KernelSession,
    h: Hierarchy,
    pods: Sequence[PodRequest],
    spec: GangSpec,
    policy: Policy,
    rng: np.ndarray,
) -> tuple[GangPlan, list[Shape]]:
    """Place and bind every pod of the gang, or nothing (then say how much fits).

    ``policy`` (the request's) chooses GPUs on the chosen nodes and the nodes of the other
    shapes within their scope, drawing from ``rng`` (``random``) and breaking ties by the
    session's node order (the ranked policies), as in a batch.
    """
    shapes = split_shapes(session, pods)
    main = shapes[0]
    units = slice_units(h.levels, spec)
    total = len(pods)
    models = model_choices(session, shapes, spec)
    plan = GangPlan()
    for level in candidate_levels(h.levels, spec):
        best_fit = 0
        # (fewest domains per level inside, cap, model order, domain, model)
        candidates: list[tuple[tuple[int, ...], int, int, int, int]] = []
        level_bound: tuple[int, ...] | None = None
        per_model: dict[int, tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = {}
        for mo, model in enumerate(models):
            caps_by_shape = []
            for s in shapes:
                ncap = node_capacity(session, s, total)
                if model >= 0 and s.pod.gpus:  # sameGpuModel binds GPU pods; CPU-only pods go anywhere
                    ncap = np.where(session.free.model_id == model, ncap, 0)
                caps_by_shape.append(ncap)
            main_caps = domain_capacities(h, caps_by_shape[0], units)
            raw = domain_capacities(h, caps_by_shape[0], [1] * len(units))
            per_model[model] = (main_caps, raw, caps_by_shape)
            if level < 0:
                dom_caps = np.array([main_caps[0].sum()]) if len(main_caps[0]) else np.zeros(1, dtype=np.int64)
                rest_ok = [int(np.where(h.complete, c, 0).sum()) >= s.count for c, s in zip(caps_by_shape[1:], shapes[1:])]
            else:
                dom_caps = main_caps[level]
                rest_ok = None
            if len(dom_caps):
                best_fit = max(best_fit, int(dom_caps.max()))
            holding = np.nonzero(dom_caps >= main.count)[0]
            if not len(holding):
                continue
            fewest = fewest_inside(h, main_caps, level, main.count)
            for d in holding:
                vector = tuple(fewest[0 if level < 0 else d].tolist())
                level_bound = vector if level_bound is None else min(level_bound, vector)
                if rest_ok is not None and not all(rest_ok):
                    continue
                if level >= 0 and not _others_fit(h, level, int(d), shapes[1:], caps_by_shape[1:]):
                    continue
                candidates.append((vector, int(dom_caps[d]), mo, int(d), model))
        if plan.bounds is None:
            # a placement using one domain of this level lies in a candidate; one using
            # several is lexicographically above every candidate's vector
            plan.bounds = level_bound
        candidates.sort()
        for fewest, _, _, d, model in candidates:
            main_caps, raw, caps_by_shape = per_model[model]
            counts = choose_counts(h, caps_by_shape[0], units, main_caps, raw, level, d if level >= 0 else -1,
                                   main.count, fewest)
            nodes = _assign_nodes(h, counts, len(pods), main)
            base_scope = _domain_nodes(h, level, d)
            scope = base_scope & (session.free.model_id == model) if model >= 0 else base_scope
            bound = _bind_plan(session, h, level, pods, shapes, nodes, scope, base_scope, policy, rng)
            if bound is None:
                continue
            plan.placed = bound
            plan.level = h.levels[level] if level >= 0 else ROOT
            return plan, shapes
        plan.fit = max(plan.fit, best_fit)
        plan.level = h.levels[level] if level >= 0 else ROOT
    return plan, shapes


def model_choices(session: KernelSession, shapes: list[Shape], spec: GangSpec) -> list[int]:
    """GPU model ids to try one at a time (-1: any mix), for ``sameGpuModel``."""
    if not spec.same_gpu_model or not any(s.pod.gpus for s in shapes):
        return [-1]
    allowed = ~0
    for s in shapes:
        if s.pod.gpus:
            allowed &= s.model_mask
    return [m for m in range(1, len(session.model_names)) if (allowed >> m) & 1]


def _others_fit(h: Hierarchy, level: int, domain: int, shapes: list[Shape], caps: list[np.ndarray]) -> bool:
    members = (h.ids[level] == domain) & h.complete
    return all(int(c[members].sum()) >= s.count for s, c in zip(shapes, caps))


def _domain_nodes(h: Hierarchy, level: int, domain: int) -> np.ndarray:
    if level < 0:
        return h.complete.copy()
    return (h.ids[level] == domain) & h.complete


def _assign_nodes(h: Hierarchy, counts: dict[int, int], n_pods: int, main: Shape) -> list[int]:
    """Node per pod: the main shape's pods in order of node path (slices stay contiguous)."""
    nodes = [-1] * n_pods
    order = sorted(counts, key=lambda n: tuple(int(ids[n]) for ids in h.ids))
    it = iter(main.pods)
    for n in order:
        for _ in range(counts[n]):
            nodes[next(it)] = n
    return nodes


def near_scopes(h: Hierarchy, used: np.ndarray, level: int, scope: np.ndarray) -> list[np.ndarray]:
    """Where the gang's other pods may go, nearest to its nodes first.

    The nodes the gang uses, then the nodes of the domains it uses at each level from the
    innermost out to ``level``, then all of ``scope``; each within ``scope``, no repeats.
    """
    out: list[np.ndarray] = []
    candidates = [used]
    for lv in range(len(h.levels) - 2, max(level, 0) - 1, -1):
        ids = h.ids[lv]
        candidates.append(np.isin(ids, ids[used & h.complete]) & h.complete)
    candidates.append(scope)
    for c in candidates:
        c = c & scope
        if c.any() and not any(np.array_equal(c, o) for o in out):
            out.append(c)
    return out


def _bind_plan(
    session: KernelSession,
    h: Hierarchy,
    level: int,
    pods: Sequence[PodRequest],
    shapes: list[Shape],
    nodes: list[int],
    scope: np.ndarray,
    base_scope: np.ndarray,
    policy: Policy,
    rng: np.ndarray,
) -> list[tuple[int, int, int]] | None:
    """Bind the main shape's pods on their nodes, then the others nearest to them.

    GPU pods of other shapes stay inside ``scope`` (the domain, of one GPU model when the
    gang asks for that); CPU-only pods inside ``base_scope`` (the domain). Each other shape
    goes, all or nothing, to the first of :func:`near_scopes` that takes it, its nodes
    chosen there by ``policy``. GPUs on every node are chosen by ``policy``.

    Returns (node, GPU mask, NIC mask) per pod, or ``None`` with nothing bound.
    """
    main = shapes[0]
    main_pods = [pods[i] for i in main.pods]
    main_nodes = [nodes[i] for i in main.pods]
    taken = session.place_on(main_pods, main_nodes, policy, rng)
    if taken is None:
        return None
    gpus, nics = taken
    out: list[tuple[int, int, int]] = [(-1, 0, 0)] * len(pods)
    for j, i in enumerate(main.pods):
        out[i] = (main_nodes[j], gpus[j], nics[j])
    held = [(main_pods, main_nodes, gpus)]
    used = np.zeros(session.n_nodes, dtype=bool)
    used[main_nodes] = True
    for shape in shapes[1:]:
        rest_pods = [pods[i] for i in shape.pods]
        group = [len(rest_pods)] * len(rest_pods)
        for where in near_scopes(h, used, level, scope if shape.pod.gpus else base_scope):
            run = session.place(rest_pods, policy, rng, group, session.nodes_bitset(where), reasons=False)
            if run.nodes[0] >= 0:
                break
        else:
            for args in reversed(held):
                release(session, *args)
            return None
        used[run.nodes] = True
        held.append((rest_pods, run.nodes, run.masks))
        for j, i in enumerate(shape.pods):
            out[i] = (run.nodes[j], run.masks[j], run.nics[j])
    return out


def release(session: KernelSession, pods: Sequence[PodRequest], nodes: Sequence[int], gpus: Sequence[int]) -> None:
    """Give back what ``pods`` hold on ``nodes`` (GPU masks ``gpus``)."""
    for pod, n, mask in zip(pods, nodes, gpus):
        session.give_back(pod, int(n), int(mask))


def resource_reasons(session: KernelSession, shape: Shape) -> dict[str, int]:
    """Static reasons plus every resource a pod of ``shape`` lacks on the other nodes, and on
    the nodes turned away for a resource, every other one they lack."""
    free = session.free
    p = shape.pod
    out = session.static_reasons(p)
    live = shape.eligible
    cpu, memory, slots, gpu, gpu_memory = reasons.RESOURCE_REASONS
    checks = [
        (cpu, short_of(free.cpu_milli, p.cpu_milli)),
        (memory, short_of(free.memory_mib, p.memory_mib)),
        (slots, free.pod_slots < 1),
    ]
    if p.gpus and p.shared:
        milli_ok = (free.gpu_milli >= p.gpu_milli).any(axis=1)
        both_ok = ((free.gpu_milli >= p.gpu_milli) & (free.gpu_memory_mib >= p.gpu_memory_mib)).any(axis=1)
        checks.append((gpu, ~milli_ok))
        checks.append((gpu_memory, milli_ok & ~both_ok))
    elif p.gpus:
        short = free.whole_gpus < p.gpus
        checks.append((gpu, short))
        checks.append((gpu_memory, ~short & (free.gpu_memory_capacity < p.gpu_memory_mib)))
    turned, own = session.resource_turned(p)  # kube names every resource these lack too
    for reason, bad in checks:
        count = int((bad & (live | (turned & (own != reason)))).sum())
        if count:
            out[reason] = out.get(reason, 0) + count
    return out


def exact_problem(session: KernelSession, paths: Sequence[Sequence[str | None]],
                  shapes: list[Shape], spec: GangSpec, levels: Sequence[str],
                  clock: "exact.Clock | None" = None) -> "exact.GangProblem":
    """The gang as a :class:`placer.exact.gangs.GangProblem` on the cluster's current state.

    Raises :class:`placer.exact.gangs.OutOfTime` when ``clock`` runs out on the way."""
    from placer.exact import gangs as exact

    tick = (clock or exact.Clock(None)).tick

    free = session.free
    big = free.untracked_quantity
    small = free.untracked_count

    def opt(v: int, limit: int) -> int | None:
        return None if v >= limit else int(v)

    nodes = []
    cpu, mem, slots = free.cpu_milli.tolist(), free.memory_mib.tolist(), free.pod_slots.tolist()
    gcount, milli, gmem, gcap = (free.gpu_count.tolist(), free.gpu_milli.tolist(),
                                 free.gpu_memory_mib.tolist(), free.gpu_memory_capacity.tolist())
    model_id = free.model_id.tolist()
    for n, name in enumerate(session.node_names):
        tick()
        g = gcount[n]
        nodes.append(exact.GangNode(
            name=name,
            domains=tuple(paths[k][n] for k in range(len(levels))),
            cpu_free=opt(cpu[n], big),
            memory_free=opt(mem[n], big),
            pods_free=opt(slots[n], small),
            gpu_free_milli=tuple(milli[n][:g]),
            gpu_free_memory=tuple(opt(x, small) for x in gmem[n][:g]),
            gpu_memory_total=opt(gcap[n], small),
            model=session.model_names[model_id[n]] or None,
        ))
    model_ids = free.model_id.astype(np.uint64)
    constrained = (spec.mode != "unconstrained" and spec.level is not None) or bool(spec.slices)
    # a node missing a level is in no domain of it and takes no part in a topology gang
    complete = np.array([all(p[n] is not None for p in paths[: len(levels)]) for n in range(session.n_nodes)],
                        dtype=bool) if constrained else np.ones(session.n_nodes, dtype=bool)
    gang_shapes = []
    for s in shapes:
        p = s.pod
        ok = s.eligible & complete & ((s.model_mask >> model_ids) & 1).astype(bool)
        gang_shapes.append(exact.GangShape(
            count=s.count, gpus=p.gpus, gpu_milli=p.gpu_milli, gpu_memory_mib=p.gpu_memory_mib,
            cpu_milli=p.cpu_milli, memory_mib=p.memory_mib,
            eligible=frozenset(np.nonzero(ok)[0].tolist()),
        ))
    return gang_problem(levels, nodes, gang_shapes, spec)


def gang_problem(levels: Sequence[str], nodes: Sequence["exact.GangNode"], shapes: Sequence["exact.GangShape"],
                 spec: GangSpec) -> "exact.GangProblem":
    """The :class:`placer.exact.gangs.GangProblem` of ``spec`` on these nodes and shapes."""
    from placer.exact import gangs as exact

    return exact.GangProblem(
        levels=tuple(levels),
        nodes=tuple(nodes),
        shapes=tuple(shapes),
        mode=spec.mode if spec.level is not None else "unconstrained",
        level=spec.level,
        slices=tuple((sl.level, sl.size) for sl in spec.slices),
        same_gpu_model=spec.same_gpu_model,
    )


def bind_counts(
    session: KernelSession,
    h: Hierarchy,
    pods: Sequence[PodRequest],
    shapes: list[Shape],
    counts: dict[tuple[int, int], int],
    shared_gpus: dict[tuple[int, int], tuple[int, ...]],
    policy: Policy,
    rng: np.ndarray,
) -> list[tuple[int, int, int]] | None:
    """Bind an exact answer: shares on their GPUs first, then the other pods by node.

    Pods of a shape go to its nodes in order of the nodes' domains, so slices stay
    contiguous; ``policy`` chooses the whole GPUs there (every policy chooses them alike).
    Returns (node, GPU mask, NIC mask) per pod, or ``None`` with nothing bound.
    """
    out: list[tuple[int, int, int]] = [(-1, 0, 0)] * len(pods)
    held: list[tuple[list[PodRequest], list[int], list[int]]] = []

    def key(n: int) -> tuple[int, ...]:
        return tuple(int(ids[n]) for ids in h.ids)

    for si, s in enumerate(shapes):
        nodes = sorted((n for (sj, n), c in counts.items() if sj == si and c > 0), key=key)
        it = iter(s.pods)
        mine: list[int] = []
        where: list[int] = []
        gpu_of: list[int] = []
        for n in nodes:
            gpus_here = list(shared_gpus.get((si, n), ()))
            for k in range(counts[(si, n)]):
                mine.append(next(it))
                where.append(n)
                gpu_of.append(gpus_here[k] if s.pod.shared else -1)
        my_pods = [pods[i] for i in mine]
        if s.pod.shared:
            for pod, n, g in zip(my_pods, where, gpu_of):
                session.take(pod, n, 1 << g)
            held.append((my_pods, where, [1 << g for g in gpu_of]))
            for i, n, g in zip(mine, where, gpu_of):
                out[i] = (n, 1 << g, 0)
    for si, s in enumerate(shapes):
        if s.pod.shared:
            continue
        nodes = sorted((n for (sj, n), c in counts.items() if sj == si and c > 0), key=key)
        where = [n for n in nodes for _ in range(counts[(si, n)])]
        my_pods = [pods[i] for i in s.pods]
        taken = session.place_on(my_pods, where, policy, rng)
        if taken is None:
            for args in reversed(held):
                release(session, *args)
            return None
        gpus, nics = taken
        held.append((my_pods, where, gpus))
        for j, i in enumerate(s.pods):
            out[i] = (where[j], gpus[j], nics[j])
    return out


# --------------------------------------------------------------------------- one gang of a request

Outcome = tuple[PodRequest, int, int, str, int]
"""A pod's outcome: (pod, node or -1, GPU mask, reason when not placed, NIC mask)."""


def run_outcomes(session: KernelSession, pods: Sequence[PodRequest], run: Run, gang: str | None = None) -> list[Outcome]:
    """The outcome of each pod of a run, with kube-scheduler's reason for the ones not placed
    (for a gang placed pod by pod, which pod stopped it)."""
    out: list[Outcome] = []
    for j, pod in enumerate(pods):
        node = run.nodes[j]
        reason = ""
        if node < 0:
            k = run.failed_at[j]
            line = reasons.kube_reason(session.n_nodes, run.reasons(k))
            reason = line if gang is None else reasons.gang_member_failed(gang, k, len(pods), pods[k].name, line)
        out.append((pod, node, run.masks[j], reason, run.nics[j]))
    return out


def run_failures(
    session: KernelSession, pods: Sequence[PodRequest], run: Run, failed: Sequence[int] | None = None
) -> list[Unschedulable]:
    """The pods of a run of independent pods that were not placed, each with its reason;
    ``failed`` lists their positions when the caller knows them."""
    worded: dict[Any, str] = {}  # pods turned away alike (one shape, no change between) share a line
    out = []
    if failed is None:
        failed = [j for j, node in enumerate(run.nodes) if node < 0]
    for j in failed:
        k = run.failed_at[j]
        key = run.reason_key(k)
        line = worded.get(key)
        if line is None:
            line = worded[key] = reasons.kube_reason(session.n_nodes, run.reasons(k))
        out.append(Unschedulable(pods[j].name, line))
    return out


def inter_pod_bound(session: KernelSession, pods: Sequence[PodRequest]) -> bool:
    """Whether inter-pod rules bear on a gang: its pods have some, or a placed pod's
    required anti-affinity turns one of them away from some node."""
    return any(map(has_relations, pods)) or any(session.inter_pod_failures(p) for p in pods)


def refuse_exact_with_relations(
    session: KernelSession, pods: Sequence[PodRequest], spec: GangSpec, solver: str
) -> None:
    """Refuse ``solver: exact`` for a gang that inter-pod rules bear on (CP-SAT does not
    model affinity, anti-affinity or topology spread); ``solver`` is the request's.

    Raises
    ------
    InvalidInputError
        At the gang's ``solver`` (or the request's when the gang names none).
    """
    if (spec.solver or solver) == "exact" and inter_pod_bound(session, pods):
        raise InvalidInputError(
            f"gangs.{spec.name}.solver" if spec.solver else "solver",
            f"solver exact (CP-SAT) does not model inter-pod affinity, anti-affinity or topology spread, which bear "
            f"on gang {spec.name} (its pods' rules, or a placed pod's anti-affinity): use greedy or auto (auto keeps "
            "the greedy's answer for such a gang)",
        )


def place_gang_step(
    session: KernelSession,
    domains: Domains,
    pods: Sequence[PodRequest],
    spec: GangSpec,
    policy: Policy,
    rng: np.ndarray,
    solver: str,
    time_limit_s: float,
    budget_left_s: float | None = None,
) -> tuple[list[Outcome], GangResult]:
    """Place one gang of a request, all or nothing, binding it when it fits.

    The greedy goes first; CP-SAT runs when the greedy fails (``auto``) or always
    (``exact``), seeded with the greedy's answer. The gang's own ``solver`` and
    ``timeLimitS`` win over the request's. The limit counts from the start of the step
    (greedy, model building and search), and is cut to ``budget_left_s``, what is left of
    the request's time budget; with nothing left, CP-SAT does not run.
    """
    if not session.n_nodes:  # a cluster without nodes: nothing to search
        line = f"gang {spec.name}: {reasons.kube_reason(0, {})}"
        failed = [(pod, -1, 0, line, 0) for pod in pods]
        return failed, _gang_result(domains, spec, failed, "greedy", "infeasible")
    if any(pod.mig is not None for pod in pods):
        from placer.mig.gangs import place_mig_gang

        return place_mig_gang(session, domains, pods, spec, policy, rng)
    started = time.perf_counter()
    solver = spec.solver or solver
    limit = spec.time_limit_s or time_limit_s
    spent_budget = budget_left_s is not None and budget_left_s <= 0
    if budget_left_s is not None:
        limit = min(limit, max(budget_left_s, 0.0))
    counted_out = False
    bounds: dict[str, int] = {}
    if (spec.mode != "unconstrained" and spec.level is not None) or spec.slices:
        # slices bind even an unconstrained gang: it is then placed over the whole cluster
        outcome, counted_out, bounds = _place_topology_gang(session, domains, pods, spec, policy, rng)
    else:
        outcome = _place_unconstrained(session, pods, spec, policy, rng)
    placed = all(o[1] >= 0 for o in outcome)
    if counted_out and solver != "exact":
        # no domain holds even the largest shape alone: no solver can place the gang
        return outcome, _gang_result(domains, spec, outcome, "greedy", "infeasible")
    if (solver == "greedy" or (solver == "auto" and (placed or inter_pod_bound(session, pods)))  # CP-SAT: no inter-pod rules
            or spent_budget):
        if spent_budget and not placed and solver != "greedy":
            line = reasons.gang_budget_spent(outcome[0][3])
            outcome = [(pod, -1, 0, line, 0) for pod in pods]
        return outcome, _greedy_result(domains, spec, outcome, bounds)
    from placer.exact import gangs as exact

    shapes = split_shapes(session, pods)
    hint: dict[tuple[int, int], int] = {}
    if placed:
        shape_of = {i: si for si, sh in enumerate(shapes) for i in sh.pods}
        for i, o in enumerate(outcome):
            key = (shape_of[i], o[1])
            hint[key] = hint.get(key, 0) + 1
        release(session, pods, [o[1] for o in outcome], [o[2] for o in outcome])
    try:
        problem = exact_problem(session, domains.all_paths(), shapes, spec, domains.snapshot.topology_levels,
                                exact.Clock(started + limit))
    except exact.OutOfTime:
        sol = exact.ExactSolution("unknown", None, None, {}, {}, time.perf_counter() - started,
                                  solver_status=BUILDING)
    else:
        sol = exact.solve_gang(problem, time_limit_s=limit, hint=hint or None, started=started)
    searched = sol.found and sol.solver_status != BUILDING
    answer = sol.counts if searched else hint
    if answer:
        shared = sol.shared_gpus if searched else {}
        bound = bind_counts(session, domains.hierarchy(), pods, shapes, answer, shared, policy, rng)
        if bound is not None:
            done = [(pod, n, mask, "", nic) for pod, (n, mask, nic) in zip(pods, bound)]
            if not searched:  # the greedy's answer, kept: CP-SAT found nothing better in time
                return done, _greedy_result(domains, spec, done, bounds)
            return done, _gang_result(domains, spec, done, "cp-sat", sol.status, sol.objective, sol.bound, bounds)
    if sol.solver_status == BUILDING:
        reason = reasons.gang_model_out_of_time(outcome[0][3], limit)
    else:
        reason = reasons.gang_solver_gave_up(outcome[0][3], sol.status, limit)
    failed = [(pod, -1, 0, reason, 0) for pod in pods]
    return failed, _gang_result(domains, spec, failed, "cp-sat", sol.status, None, None, bounds)


def _place_unconstrained(
    session: KernelSession, pods: Sequence[PodRequest], spec: GangSpec, policy: Policy, rng: np.ndarray
) -> list[Outcome]:
    """Pod by pod, all or nothing; with ``sameGpuModel``, one GPU model at a time."""
    group = [len(pods)] * len(pods)
    shapes = split_shapes(session, pods)
    models = model_choices(session, shapes, spec)
    if models == [-1]:
        return run_outcomes(session, pods, session.place(pods, policy, rng, group), spec.name)
    if not models:
        reason = reasons.gang_no_common_model(spec.name)
        return [(pod, -1, 0, reason, 0) for pod in pods]
    model_id = session.free.model_id
    outcome: list[Outcome] = []
    for m in models:
        only = session.nodes_bitset((model_id == m) | (model_id == 0))
        outcome = _place_in_runs(session, pods, [only if pod.gpus else None for pod in pods], policy, rng, spec.name)
        if all(o[1] >= 0 for o in outcome):
            break
    return outcome


def _place_in_runs(
    session: KernelSession, pods: Sequence[PodRequest], only: Sequence[np.ndarray | None], policy: Policy,
    rng: np.ndarray, gang: str,
) -> list[Outcome]:
    """Pod by pod in order, pod j on the nodes ``only[j]`` (None: any), all or nothing."""
    outcome: list[Outcome] = []
    start = 0
    while start < len(pods):
        end = start + 1
        while end < len(pods) and only[end] is only[start]:
            end += 1
        part = pods[start:end]
        run = session.place(part, policy, rng, [len(part)] * len(part), only[start])
        if run.nodes[0] < 0:
            release(session, [o[0] for o in outcome], [o[1] for o in outcome], [o[2] for o in outcome])
            k = run.failed_at[0]
            line = reasons.gang_member_failed(
                gang, start + k, len(pods), part[k].name, reasons.kube_reason(session.n_nodes, run.reasons(k))
            )
            return [(pod, -1, 0, line, 0) for pod in pods]
        outcome += run_outcomes(session, part, run)
        start = end
    return outcome


def _place_topology_gang(
    session: KernelSession, domains: Domains, pods: Sequence[PodRequest], spec: GangSpec, policy: Policy,
    rng: np.ndarray,
) -> tuple[list[Outcome], bool, dict[str, int]]:
    """A required or preferred gang: greedy over the topology levels, all or nothing;
    ``policy`` chooses GPUs and the other shapes' nodes (:func:`place_gang`).

    Also says whether counting alone proves that no placement exists (no domain of the
    widest level tried holds the main shape's pods, in whole slices), and the fewest
    domains per level any placement needs (:attr:`GangPlan.bounds`).
    """
    h = domains.hierarchy()
    plan, shapes = place_gang(session, h, pods, spec, policy, rng)
    bounds = {} if plan.bounds is None else dict(zip(h.levels, plan.bounds))
    if plan.placed:
        return [(pod, node, mask, "", nic) for pod, (node, mask, nic) in zip(pods, plan.placed)], False, bounds
    main = shapes[0]
    excluded = resource_reasons(session, main)
    reason = reasons.gang_level_short(
        spec.name, None if plan.level == ROOT else plan.level, plan.fit, main.count, len(shapes) > 1,
        reasons.kube_reason(session.n_nodes, excluded) if excluded else "",
    )
    counted_out = plan.fit < main.count
    return [(pod, -1, 0, reason, 0) for pod in pods], counted_out, bounds


def _greedy_result(domains: Domains, spec: GangSpec, outcome: list[Outcome], bounds: dict[str, int]) -> GangResult:
    """The greedy's outcome: ``optimal`` when it meets the bounds at every level."""
    placed = all(o[1] >= 0 for o in outcome)
    result = _gang_result(domains, spec, outcome, "greedy", "feasible" if placed else "unknown", bounds=bounds)
    if placed and bounds and result.domain_counts == bounds:
        result = replace(result, status="optimal")  # the fewest domains at every level
    return result


def _gang_result(
    domains: Domains,
    spec: GangSpec,
    outcome: list[Outcome],
    solver: str,
    status: str,
    objective: float | None = None,
    bound: float | None = None,
    bounds: dict[str, int] | None = None,
) -> GangResult:
    placed = bool(outcome) and all(o[1] >= 0 for o in outcome)
    used = domains.used([o[1] for o in outcome]) if placed else {}
    return GangResult(spec.name, placed, solver, status, used, objective, bound, bounds or EMPTY)
