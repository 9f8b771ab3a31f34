"""Preemption inside a placement call: a pod or gang that did not fit evicts victims.

The victims are chosen by :mod:`placer.preemption.victims` (kube's rules) or CP-SAT
(:mod:`placer.preemption.exact`); here they are evicted in the kernel session, the pod or
gang placed in the room they leave, and the result noted in the call's
:class:`~placer.placement.tally.Tally`. :func:`preemption_hint` says in words what
preemption would do, changing nothing.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from placer.model import GangResult, GangSpec, PlacementRequest, PodRequest, Preemption, Unschedulable, reasons, replace
from placer.model.interpod import has_relations
from placer.placement import gangs
from placer.placement.gangs import Outcome
from placer.placement.state import ClusterState
from placer.placement.tally import Tally
from placer.policies import Policy
from placer.preemption import exact as preemption_exact
from placer.preemption import victims as preemption

__all__ = ["preempt_gang", "preempt_for", "preemption_hint"]


def preempt_gang(
    state: ClusterState,
    pods: Sequence[PodRequest],
    spec: GangSpec,
    policy: Policy,
    rng: np.ndarray,
    request: PlacementRequest,
    outcome: list[Outcome],
    result: GangResult,
    tally: Tally,
) -> tuple[list[Outcome], GangResult]:
    """A gang that did not fit evicts the victims of the best domain of its level
    (:func:`placer.preemption.victims.gang_candidates`) and is placed inside it; when no domain
    works, its outcome stays as it was."""
    session = state.session
    if any(pod.preemption_policy == "Never" for pod in pods):
        return outcome, result
    h = state.domains.hierarchy()
    levels, shapes = _preemption_problem(state, pods, spec)
    exact_first = request.preemption == "exact" or (request.preemption == "auto" and len(pods) > 1)
    for level in levels:
        found, ranks, _ = preemption.gang_candidates(session, state.snapshot, h, pods, level, shapes)
        plans = [(c.victims, c.nodes, "greedy", "feasible") for c in found]
        if exact_first and found:
            best = preemption_exact.solve_preemption(
                session, state.snapshot, h, pods, level, shapes, request.time_limit_s
            )
            if best is not None and best.status in ("optimal", "feasible"):
                scope = np.ones(session.n_nodes, dtype=bool) if level < 0 else (h.ids[level] == best.domain)
                plans.insert(0, (best.victims, scope, "cp-sat", best.status))
        for victims, scope, solver, status in plans:
            gone = preemption.evict(session, victims)
            tried, tried_result = gangs.place_gang_step(
                session, state.domains, pods, spec, policy, rng, request.solver, request.time_limit_s, 0.0
            )
            if tried_result.placed and all(scope[o[1]] for o in tried):
                tally.evicted.extend(gone)
                names = [name for unit in victims for name in unit.names]
                nodes = sorted({session.node_names[n] for unit in victims for n, _ in unit.pods})
                overdraft = ranks.overdraft([p for unit in victims for _, p in unit.pods])
                tally.preempted.append(Preemption(spec.name, tuple(names), tuple(nodes), overdraft, solver, status))
                return tried, tried_result
            if tried_result.placed:
                gangs.release(session, pods, [o[1] for o in tried], [o[2] for o in tried])
            for g in reversed(gone):
                session.restore(g)
    return outcome, result


def preempt_for(
    state: ClusterState,
    pods: Sequence[PodRequest],
    policy: Policy,
    rng: np.ndarray,
    failed_from: int,
    tally: Tally,
    mode: str,
) -> None:
    """Each pod of a run that did not fit (``tally.unschedulable[failed_from:]``), in order,
    evicts the victims :func:`placer.preemption.victims.choose` picks (kube's rules;
    ``exact``: CP-SAT's) and is placed on their node (``nominated``); a pod no preemption
    helps keeps its reason."""
    session = state.session
    by_name = {pod.name: pod for pod in pods}
    still: list[Unschedulable] = []
    for u in tally.unschedulable[failed_from:]:
        pod = by_name[u.pod]
        if has_relations(pod):
            still.append(replace(u, reason=reasons.no_preemption_for_inter_pod_rules(u.reason)))
            continue
        solver, status = "greedy", "feasible"
        best, _ = preemption.choose(session, state.snapshot, pod)
        if best is not None and mode == "exact" and not pod.host_ports:  # CP-SAT's victims free no ports
            exact = _exact_for_pod(state, pod)
            if exact is not None:
                best, status, solver = exact[0], exact[1], "cp-sat"
        if best is None:
            still.append(u)
            continue
        gone = preemption.evict(session, best.victims)
        fitted = session.place_on([pod], [best.node], policy, rng)
        if fitted is None:  # the victims' node fails a running pod's anti-affinity (the victim search reads resources)
            for g in reversed(gone):
                session.restore(g)
            still.append(u)
            continue
        masks, nics = fitted
        tally.evicted.extend(gone)
        tally.add(session, pod, best.node, masks[0], nics[0])
        tally.assignments[-1] = replace(tally.assignments[-1], nominated=True)
        victims = [name for unit in best.victims for name in unit.names]
        nodes = sorted({session.node_names[n] for unit in best.victims for n, _ in unit.pods})
        tally.preempted.append(Preemption(pod.name, tuple(victims), tuple(nodes), best.pdb_violations, solver, status))
    del tally.unschedulable[failed_from:]
    tally.unschedulable.extend(still)


def _preemption_problem(
    state: ClusterState, pods: Sequence[PodRequest], spec: GangSpec
) -> tuple[list[int], list[tuple[PodRequest, int, np.ndarray]]]:
    """The levels a gang's victims are sought at (-1: the whole cluster), and its shapes
    as (pod, count, allowed nodes)."""
    session = state.session
    h = state.domains.hierarchy()
    levels: list[int] = []
    if spec.mode != "unconstrained" and spec.level is not None:
        levels.append(h.levels.index(spec.level))
    if spec.mode != "required":
        levels.append(-1)
    shapes = []
    for shape in gangs.split_shapes(session, pods):
        model_ok = ((shape.model_mask >> session.free.model_id.astype(np.uint64)) & 1).astype(bool)
        allowed = shape.eligible & (model_ok if shape.pod.gpus else True)
        shapes.append((shape.pod, shape.count, allowed))
    return levels, shapes


def preemption_hint(state: ClusterState, pods: Sequence[PodRequest], spec: GangSpec | None = None) -> str:
    """What preemption would do for a pending pod (or gang ``spec``) now, in words
    (:meth:`placer.placement.cluster.Cluster.preemption_hint`)."""
    session = state.session
    if any(pod.preemption_policy == "Never" for pod in pods):
        return ""
    if spec is None:
        best, _ = preemption.choose(session, state.snapshot, pods[0])
        if best is None:
            return ""
        where, victims, violations = session.node_names[best.node], best.victims, best.pdb_violations
    else:
        levels, shapes = _preemption_problem(state, pods, spec)
        h = state.domains.hierarchy()
        found: list[preemption.GangCandidate] = []
        for level in levels:
            found, ranks, _ = preemption.gang_candidates(session, state.snapshot, h, pods, level, shapes)
            if found:
                break
        if not found:
            return ""
        best_gang = found[0]
        victims = best_gang.victims
        violations = ranks.overdraft([p for u in victims for _, p in u.pods])
        where = "the cluster" if level < 0 else f"{h.levels[level]} {h.names[level][best_gang.domain]}"
    names = [name for unit in victims for name in unit.names]
    top = max((p.priority for unit in victims for _, p in unit.pods), default=0)
    broken = f", breaking {violations} PodDisruptionBudget disruption(s)" if violations else ""
    return (
        f"would fit on {where} after preempting {len(names)} pod(s) of priority <= {top}: "
        f"{', '.join(names)}{broken} (preemption is off; placer preempt would do it)"
    )


def _exact_for_pod(state: ClusterState, pod: PodRequest) -> tuple[preemption.Candidate, str] | None:
    """CP-SAT's node and victims for one pod (the node level is its domain), or None
    when CP-SAT does not model the pod or found nothing."""
    session = state.session
    h = state.domains.hierarchy()
    allowed, model_mask = session.eligibility(pod)
    if pod.gpus:
        model_ok = ((model_mask >> session.free.model_id.astype(np.uint64)) & 1).astype(bool)
        allowed = allowed & model_ok & (session.free.gpu_memory_capacity >= pod.gpu_memory_mib)
    found = preemption_exact.solve_preemption(
        session, state.snapshot, h, [pod], h.levels.index("node"), [(pod, 1, allowed)]
    )
    if found is None or found.status not in ("optimal", "feasible") or found.domain < 0:
        return None
    node = int(np.flatnonzero(h.ids[-1] == found.domain)[0])
    pods = [p for unit in found.victims for _, p in unit.pods]
    violations = preemption.Ranks.of(state.snapshot, list(session.running()), found.victims).overdraft(pods)
    return preemption.Candidate(node, found.victims, violations), found.status
