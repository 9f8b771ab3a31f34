"""The measure of a gang placement, in pure Python: the lexicographic objective's weights
and value (:func:`objective_weights`, :func:`objective_value`), the domains a placement uses
(:func:`domains_used`) and the check of a placement's counts against the problem
(:func:`check_counts`).

The CP-SAT model of :mod:`placer.exact.gangs` minimises this same objective; the greedy
kernel's placements are scored and checked with these functions.
"""

from __future__ import annotations

from collections import defaultdict

from placer.exact.problem import Counts, GangProblem, SharedGpus, WHOLE_GPU, domain_of, level_index
from placer.model.fit import short_of

__all__ = ["objective_weights", "domains_used", "objective_value", "check_counts", "used_nodes"]


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
        inner = {domain_of(problem, n, li + 1) for n in cand} - {None}
        weights[li] = weights[li + 1] * (min(len(inner), pods) + 1)
    return tuple(weights)


def used_nodes(counts: Counts) -> set[int]:
    """The nodes that hold at least one pod of ``counts``."""
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
    used = used_nodes(counts)
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
    used = used_nodes(counts)
    total = 0
    for li in range(nl + 1):
        doms = {domain_of(problem, n, li) for n in used} - {None}
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
        if node.cpu_free is not None and short_of(node.cpu_free, cpu):
            out.append(f"{node.name}: cpu {cpu} > free {node.cpu_free}")
        if node.memory_free is not None and short_of(node.memory_free, mem):
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
        li = level_index(problem, problem.level)
        doms = [domain_of(problem, n, li) for n in used]
        if None in doms:
            out.append(f"required level {problem.level}: a used node is in no domain of it")
        if len(set(doms) - {None}) > 1:
            out.append(f"required level {problem.level}: {len(set(doms) - {None})} domains used")
    for lvl, size in problem.slices:
        li = level_index(problem, lvl)
        per_dom: dict[str | None, int] = defaultdict(int)
        for (s, n), c in good.items():
            if s == 0:  # slices count the main shape
                per_dom[domain_of(problem, n, li)] += c
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
