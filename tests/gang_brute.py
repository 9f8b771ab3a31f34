"""Brute-force placement of one tiny gang: the oracle :mod:`placer.exact.gangs` is tested against.

Written with plain loops and without the CP-SAT model: every split of each shape's pods
over its eligible nodes is enumerated, and for each node every way to put its shared pods
on its GPUs. Only the objective is shared with the module under test
(:func:`placer.exact.gangs.objective_value`), so a wrong constraint or a wrong variable bound in
the model shows up as a disagreement. Meant for ≤ 6 nodes, ≤ 3 levels, ≤ 2 shapes,
≤ 6 pods and ≤ 4 GPUs per node.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import combinations_with_replacement, product
from typing import Iterator

from placer.exact.objective import objective_value
from placer.exact.problem import GangProblem

__all__ = ["brute_force", "brute_force_detail", "brute_feasible", "node_fit"]

FULL = 1000


def _splits(total: int, slots: int) -> Iterator[tuple[int, ...]]:
    """Every tuple of ``slots`` non-negative integers summing to ``total``."""
    if slots == 0:
        if total == 0:
            yield ()
        return
    if slots == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _splits(total - first, slots - 1):
            yield (first,) + rest


def _domain_at(problem: GangProblem, n: int, level: str) -> str | None:
    if level == "node":
        return f"node:{n}"
    return problem.nodes[n].domains[problem.levels.index(level)]


def node_fit(
    problem: GangProblem, n: int, load: tuple[tuple[int, int], ...]
) -> tuple[int, dict[int, tuple[int, ...]]] | None:
    """Whether node ``n`` holds ``load`` (``(shape, pods)`` pairs), and how best.

    Returns ``None`` when it does not fit, else its least fragmentation (whole-free GPUs
    left, plus twice those the shared pods break) and the GPU index of each shared pod
    (per shape) that achieves it.
    """
    return _node_fit(problem, n, load)


@lru_cache(maxsize=None)
def _node_fit(problem, n, load):
    node = problem.nodes[n]
    shapes = problem.shapes
    pods = cpu = mem = 0
    whole_need = 0
    shared: list[tuple[int, int]] = []
    for s, c in load:
        sh = shapes[s]
        pods += c
        cpu += c * sh.cpu_milli
        mem += c * sh.memory_mib
        if sh.gpus == 0:
            continue
        if sh.gpu_milli == FULL:
            if node.gpu_memory_total is not None and sh.gpu_memory_mib > node.gpu_memory_total:
                return None
            whole_need += c * sh.gpus
        else:
            shared.append((s, c))
    if node.pods_free is not None and pods > node.pods_free:
        return None
    if node.cpu_free is not None and cpu > node.cpu_free:
        return None
    if node.memory_free is not None and mem > node.memory_free:
        return None
    ngpu = len(node.gpu_free_milli)
    best = None
    choices = [list(combinations_with_replacement(range(ngpu), c)) for s, c in shared]
    for pick in product(*choices):
        milli = [0] * ngpu
        gmem = [0] * ngpu
        for (s, c), gpus in zip(shared, pick):
            for g in gpus:
                milli[g] += shapes[s].gpu_milli
                gmem[g] += shapes[s].gpu_memory_mib
        ok = True
        for g in range(ngpu):
            if milli[g] == 0:
                continue
            if milli[g] > node.gpu_free_milli[g]:
                ok = False
            if node.gpu_free_memory[g] is not None and gmem[g] > node.gpu_free_memory[g]:
                ok = False
        if not ok:
            continue
        whole_free_untouched = [
            g for g in range(ngpu) if node.gpu_free_milli[g] == FULL and milli[g] == 0
        ]
        if whole_need > len(whole_free_untouched):
            continue
        whole_free = sum(1 for g in range(ngpu) if node.gpu_free_milli[g] == FULL)
        broken = whole_free - len(whole_free_untouched)
        left = whole_free - whole_need - broken
        frag = left + 2 * broken  # a whole GPU broken by shares counts twice
        if best is None or frag < best[0]:
            best = (frag, {s: gpus for (s, c), gpus in zip(shared, pick)})
    return best


def _placement_ok(problem: GangProblem, counts: dict[tuple[int, int], int]) -> bool:
    """The gang-wide rules: required domain, slices, one GPU model."""
    used = sorted({n for (s, n), c in counts.items() if c > 0})
    if problem.mode == "required" and used:
        doms = {_domain_at(problem, n, problem.level) for n in used}
        if None in doms or len(doms) != 1:
            return False
    for level, size in problem.slices:
        per: dict[str | None, int] = {}
        for (s, n), c in counts.items():
            if s == 0:  # slices count the main shape
                dom = _domain_at(problem, n, level)
                per[dom] = per.get(dom, 0) + c
        for dom, c in per.items():
            if c and (dom is None or c % size):
                return False
    if problem.same_gpu_model:
        models = {
            problem.nodes[n].model or ""
            for (s, n), c in counts.items()
            if c > 0 and problem.shapes[s].gpus > 0
        }
        if len(models) > 1:
            return False
    return True


def _loads(counts: dict[tuple[int, int], int]) -> dict[int, tuple[tuple[int, int], ...]]:
    per: dict[int, list[tuple[int, int]]] = {}
    for (s, n), c in sorted(counts.items()):
        if c > 0:
            per.setdefault(n, []).append((s, c))
    return {n: tuple(v) for n, v in per.items()}


def brute_feasible(problem: GangProblem, counts: dict[tuple[int, int], int]) -> bool:
    """Whether ``counts`` is a feasible placement (some GPU choice for its shared pods)."""
    for s, shape in enumerate(problem.shapes):
        placed = 0
        for (s2, n), c in counts.items():
            if s2 == s and c > 0:
                if n not in shape.eligible:
                    return False
                placed += c
        if placed != shape.count:
            return False
    if not _placement_ok(problem, counts):
        return False
    return all(node_fit(problem, n, load) is not None for n, load in _loads(counts).items())


def brute_force_detail(
    problem: GangProblem,
) -> tuple[int | None, dict[tuple[int, int], int], dict[tuple[int, int], tuple[int, ...]]]:
    """The optimum by enumeration: (objective, counts, shared GPU indices), or (None, {}, {})."""
    _node_fit.cache_clear()
    per_shape = []
    for s, shape in enumerate(problem.shapes):
        nodes = sorted(shape.eligible)
        per_shape.append([
            {(s, n): c for n, c in zip(nodes, split) if c > 0}
            for split in _splits(shape.count, len(nodes))
        ])
    best: tuple[int, dict, dict] | None = None
    for combo in product(*per_shape):
        counts: dict[tuple[int, int], int] = {}
        for part in combo:
            counts.update(part)
        if not _placement_ok(problem, counts):
            continue
        shared: dict[tuple[int, int], tuple[int, ...]] = {}
        ok = True
        for n, load in _loads(counts).items():
            fit = node_fit(problem, n, load)
            if fit is None:
                ok = False
                break
            for s, gpus in fit[1].items():
                shared[s, n] = tuple(gpus)
        if not ok:
            continue
        value = objective_value(problem, counts, shared)
        if best is None or value < best[0]:
            best = (value, counts, shared)
    if best is None:
        return None, {}, {}
    return best


def brute_force(problem: GangProblem) -> tuple[int | None, dict[tuple[int, int], int]]:
    """The optimal objective and one optimal ``counts`` dict (``None, {}`` if infeasible)."""
    value, counts, _ = brute_force_detail(problem)
    return value, counts


def problem_from_reference(snapshot, pods, spec) -> GangProblem:
    """The gang as a :class:`GangProblem`, built from the reference model's node states
    (not from placer's kernel): free amounts, filters, and the domain of each node."""
    from placer.exact.problem import GangNode, GangShape
    from placer.placement.gangs import gang_problem
    from placer.model import gang_shapes
    from reference import ReferenceCluster, _filter, domain_of

    states = ReferenceCluster(snapshot)._nodes
    levels = tuple(snapshot.topology_levels)
    nodes = []
    for st in states:
        paths = [domain_of(st.node, lv, levels) for lv in levels]
        nodes.append(GangNode(
            name=st.node.name,
            domains=tuple(None if p is None else "/".join(p) for p in paths),
            cpu_free=st.cpu_free(),
            memory_free=st.mem_free(),
            pods_free=st.pods_free(),
            gpu_free_milli=tuple(st.free_milli(i) for i in range(st.hw.gpus)),
            gpu_free_memory=tuple(st.free_gpu_mem(i) for i in range(st.hw.gpus)),
            gpu_memory_total=st.hw.gpu_memory_mib,
            model=st.hw.gpu_model if st.hw.gpus else None,
        ))
    topology_gang = (spec.mode != "unconstrained" and spec.level is not None) or bool(spec.slices)
    shapes = []
    for members in gang_shapes(pods):
        pod = pods[members[0]]
        eligible = frozenset(
            n for n, st in enumerate(states)
            if not _filter(st, pod) and not (topology_gang and None in nodes[n].domains)
        )
        shapes.append(GangShape(
            count=len(members), gpus=pod.gpus, gpu_milli=pod.gpu_milli, gpu_memory_mib=pod.gpu_memory_mib,
            cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, eligible=eligible,
        ))
    return gang_problem(levels, nodes, shapes, spec)


def domain_vector(problem: GangProblem, counts: dict[tuple[int, int], int]) -> tuple[int, ...]:
    """Domains used per level (the problem's levels, then nodes) by ``counts``."""
    used = {n for (s, n), c in counts.items() if c > 0}
    out = [len({problem.nodes[n].domains[k] for n in used}) for k in range(len(problem.levels))]
    return (*out, len(used))
