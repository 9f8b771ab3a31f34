"""Exact preemption with CP-SAT: the victims that rank first by the lexicographic
objective of :class:`placer.preemption.victims.Ranks` — PDB overdraft, highest victim priority,
sum of victim priority ranks, victims, then the newest first — for a pod or a gang,
inside one domain of its level (or anywhere).

One Boolean per evictable unit (a pod, or a running gang whole); per node and pod shape
an integer count of the preemptor's pods there. A node's free CPU, memory and pod slots
grow by what its evicted units hold; a GPU is whole-free when every unit holding it (whole
or a share) is evicted, so the whole GPUs a node offers are a sum of per-GPU Booleans.
Only pods of whole GPUs (or none) are modelled: a preemptor with a shared GPU gets
``None``. The objective is solved in stages, one term at a time, each fixed before the
next; the status is ``optimal`` only when every stage proved its optimum.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from placer.exact.cpsat import status_name
from placer.model.domains import Hierarchy
from placer.kernel import KernelSession
from placer.model import ClusterSnapshot, PodRequest
from placer.preemption.victims import Ranks, Unit, level_domains, start_of, units

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = ["ExactPreemption", "solve_preemption"]

@dataclass
class ExactPreemption:
    """CP-SAT's victims (empty when the pod fits as it is), the domain they lie in, the
    objective per stage, and the status (``infeasible``: no set of victims helps)."""

    victims: list[Unit]
    domain: int
    key: tuple[int, ...]
    status: str
    seconds: float


def solve_preemption(
    session: KernelSession,
    snapshot: ClusterSnapshot,
    h: Hierarchy,
    pods: Sequence[PodRequest],
    level: int,
    shapes: Sequence[tuple[PodRequest, int, np.ndarray]],
    time_limit_s: float = 10.0,
) -> ExactPreemption | None:
    """The best victims for ``pods`` (one pod, or a gang's) inside one domain of ``level``
    (-1: anywhere). ``shapes``: (pod, count, allowed nodes) per shape. None when a shape
    takes a shared GPU (not modelled)."""
    from ortools.sat.python import cp_model

    if any(pod.shared or pod.gpu_slots or pod.mig is not None for pod, _, _ in shapes):
        return None
    started = time.perf_counter()
    priority = max(p.priority for p in pods)
    running = list(session.running())
    evictable = [u for u in units(running) if u.priority < priority and all(p.preemptible for _, p in u.pods)]
    ranks = Ranks.of(snapshot, running, evictable)
    n_nodes = session.n_nodes
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"evict{k}") for k in range(len(evictable))]
    holders: dict[tuple[int, int], list[int]] = {}  # (node, gpu) -> units holding it
    for k, unit in enumerate(evictable):
        for node, pod in unit.pods:
            for g in (*pod.gpus, *pod.gpu_shares):
                holders.setdefault((node, int(g)), []).append(k)
    blocked: set[tuple[int, int]] = set()  # GPUs held by pods that stay whatever happens
    evict_of = {p.name: k for k, u in enumerate(evictable) for _, p in u.pods}
    for node, pod in running:
        if pod.name not in evict_of:
            blocked.update((node, int(g)) for g in (*pod.gpus, *pod.gpu_shares))
    domain_of, n_domains, inside = level_domains(h, level, n_nodes)
    z = [model.new_bool_var(f"domain{d}") for d in range(n_domains)]
    model.add_exactly_one(z)
    for k, unit in enumerate(evictable):  # victims lie inside the chosen domain
        where = {int(domain_of[m]) if inside[m] else -1 for m, _ in unit.pods}
        if len(where) != 1 or -1 in where:
            model.add(x[k] == 0)
        else:
            model.add_implication(x[k], z[where.pop()])
    counts: list[list[cp_model.IntVar | int]] = []
    for s, (pod, count, allowed) in enumerate(shapes):
        row: list[cp_model.IntVar | int] = []
        for n in range(n_nodes):
            if allowed[n] and inside[n]:
                v = model.new_int_var(0, count, f"y{s}_{n}")
                model.add(v == 0).only_enforce_if(z[int(domain_of[n])].Not())
                row.append(v)
            else:
                row.append(0)
        model.add(sum(row) == count)
        counts.append(row)
    free_state = session.free
    for n in range(n_nodes):
        here = [(counts[s][n], pod) for s, (pod, _, _) in enumerate(shapes) if not isinstance(counts[s][n], int)]
        if not here:
            continue
        free = session.node_free(n)
        gone = [(k, p) for k, u in enumerate(evictable) for m, p in u.pods if m == n]
        for want, have, freed in (
            (lambda pod: pod.cpu_milli, free.cpu_milli, lambda p: p.cpu_milli),
            (lambda pod: pod.memory_mib, free.memory_mib, lambda p: p.memory_mib),
            (lambda pod: 1, free.pods, lambda p: 1),
        ):
            if have is None:
                continue
            model.add(sum(v * want(pod) for v, pod in here) <= have + sum(x[k] * freed(p) for k, p in gone))
        if any(pod.gpus for _, pod in here):
            whole: list[cp_model.IntVar | int] = []
            for g, milli in enumerate(free.gpu_milli):
                if milli == 1000:
                    whole.append(1)
                elif (n, g) in blocked or (n, g) not in holders or int(free_state.gpu_count[n]) <= g:
                    continue
                else:
                    w = model.new_bool_var(f"whole{n}_{g}")
                    for k in holders[(n, g)]:
                        model.add_implication(w, x[k])
                    whole.append(w)
            model.add(sum(v * pod.gpus for v, pod in here) <= sum(whole))
    stages = _objective_terms(model, ranks, evictable, x)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.symmetry_level = 0
    status_all = "optimal"
    key: list[int] = []
    chosen: tuple[list[int], list[int]] | None = None  # the last solution: evictions, domains

    def solve() -> str:
        solver.parameters.max_time_in_seconds = max(time_limit_s - (time.perf_counter() - started), 0.0)
        return status_name(solver.solve(model))

    if all(isinstance(t, int) for t in stages):  # nothing to evict: is there room as it is?
        name = solve()
        if name in ("optimal", "feasible"):
            return ExactPreemption([], _domain(solver, z, level), tuple(stages), "optimal", time.perf_counter() - started)
        return ExactPreemption([], -1, (), name, time.perf_counter() - started)
    for term in stages:
        if isinstance(term, int):
            key.append(term)
            continue
        model.minimize(term)
        name = solve()
        if name not in ("optimal", "feasible"):
            if chosen is None:
                return ExactPreemption([], -1, (), name, time.perf_counter() - started)
            status_all = "feasible"
            break
        value = int(round(solver.objective_value))
        key.append(value)
        chosen = ([solver.value(v) for v in x], [solver.value(v) for v in z])
        if name != "optimal":
            status_all = "feasible"
        model.add(term == value)
        model.clear_hints()
        for var, v in zip(x, chosen[0]):
            model.add_hint(var, v)
    assert chosen is not None
    victims = [u for k, u in enumerate(evictable) if chosen[0][k]]
    domain = chosen[1].index(1) if level >= 0 else -1
    return ExactPreemption(victims, domain, tuple(key), status_all, time.perf_counter() - started)


def _domain(solver: cp_model.CpSolver, z: Sequence[cp_model.IntVar], level: int) -> int:
    return next(d for d, v in enumerate(z) if solver.value(v)) if level >= 0 else -1


def _objective_terms(model: cp_model.CpModel, ranks: Ranks, evictable: Sequence[Unit],
                     x: Sequence[cp_model.IntVar]) -> list[cp_model.LinearExpr]:
    """The five terms of :meth:`Ranks.key` as linear expressions of the eviction Booleans."""
    overdraft = []
    for b, allowed in zip(ranks.budgets, ranks.allowed):
        hits = [x[k] for k, u in enumerate(evictable) for _, p in u.pods if b.matches(p) and p.name not in b.disrupted_pods]
        if not hits:
            continue
        over = model.new_int_var(0, len(hits), f"over_{b.name}")
        model.add(over >= sum(hits) - allowed)
        overdraft.append(over)
    top = max(ranks.priority_rank.values(), default=-1) + 1
    highest = model.new_int_var(0, top, "highest")
    for k, u in enumerate(evictable):
        model.add(highest >= (max(ranks.priority_rank[p.priority] for _, p in u.pods) + 1) * x[k])
    rank_sum = sum(x[k] * sum(ranks.priority_rank[p.priority] for _, p in u.pods) for k, u in enumerate(evictable))
    count = sum(x[k] * len(u.pods) for k, u in enumerate(evictable))
    age = sum(x[k] * sum(ranks.age_rank[start_of(p)] for _, p in u.pods) for k, u in enumerate(evictable))
    return [sum(overdraft), highest, rank_sum, count, age]
