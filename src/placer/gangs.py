"""Greedy placement of a gang over topology levels (rules: ``docs/placement-rules.md``).

Capacity is counted bottom-up: for every node, how many pods of the gang's main shape fit
(all resources); every domain sums its children, rounded down to whole slices. Among the
domains of the required level that hold the whole gang the tightest is taken; inside it,
children are taken largest first and the remainder goes to the tightest child that holds
it, level by level, so the gang spans few domains at every level. ``preferred`` climbs
levels until a domain holds the gang, then spreads over the cluster the same way. The
chosen nodes are bound through the kernel, all or nothing.

The request's policy applies where this greedy leaves the choice to the kernel: the GPUs
of each pod on its node, and the node of each pod of the other shapes within the nearest
scope (:func:`near_scopes`). Domains and the main shape's nodes are chosen by tightest
fit whatever the policy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from placer import _typedefs as td
from placer._pack import PackedCluster, node_bitset, pack_pods
from placer.model import GangSpec, PodRequest
from placer.policies import Policy

if TYPE_CHECKING:
    from placer import exact
    from placer._core import Kernel

ROOT = "cluster"  # the level above the outermost one: every node


def shape_key(pod: PodRequest) -> tuple:
    """Pods with equal keys are interchangeable for placement."""
    return (
        pod.gpus,
        pod.gpu_milli,
        pod.gpu_memory_mib,
        pod.cpu_milli,
        pod.memory_mib,
        pod.nics,
        tuple(sorted(pod.node_selector.items())),
        pod.tolerations,
        tuple(sorted(pod.gpu_models)),
    )


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

    @property
    def weight(self) -> tuple[int, int, int]:
        p = self.pod
        return (p.gpus * p.gpu_milli * self.count, p.cpu_milli * self.count, self.count)


@dataclass
class GangPlan:
    """The gang as bound: (node, GPU mask, NIC mask) per pod; empty when it does not fit.

    ``fit`` is then the most pods of the main shape one domain of ``level`` holds.
    """

    placed: list[tuple[int, int, int]] = field(default_factory=list)
    fit: int = 0
    level: str = ""


def split_shapes(packed: PackedCluster, pods: Sequence[PodRequest]) -> list[Shape]:
    """The gang's pods grouped by shape, largest total demand first."""
    groups: dict[tuple, Shape] = {}
    for i, pod in enumerate(pods):
        key = shape_key(pod)
        found = groups.get(key)
        if found is None:
            ec = packed.eligibility(pod)
            bits = np.unpackbits(ec.bits.view(np.uint8), bitorder="little")[: packed.n_nodes].astype(bool)
            found = groups[key] = Shape([], pod, bits, ec.model_mask)
        found.pods.append(i)
    return sorted(groups.values(), key=lambda s: s.weight, reverse=True)


def node_capacity(packed: PackedCluster, shape: Shape, limit: int) -> np.ndarray:
    """Pods of ``shape`` each node holds now (0 where it may not go), at most ``limit``."""
    a = packed.arrays
    p = shape.pod
    cap = np.full(packed.n_nodes, limit, dtype=np.int64)
    if p.cpu_milli:
        cap = np.minimum(cap, a["cpu_free"] // p.cpu_milli)
    if p.memory_mib:
        cap = np.minimum(cap, a["mem_free"] // p.memory_mib)
    cap = np.minimum(cap, a["pods_free"])
    if p.gpus and p.shared:
        per_gpu = a["gpu_free_milli"].astype(np.int64) // p.gpu_milli
        if p.gpu_memory_mib:
            per_gpu = np.minimum(per_gpu, a["gpu_free_mem"].astype(np.int64) // p.gpu_memory_mib)
        cap = np.minimum(cap, per_gpu.sum(axis=1))
    elif p.gpus:
        cap = np.minimum(cap, a["free_count"].astype(np.int64) // p.gpus)
        cap = np.where(a["gpu_mem_cap"] >= p.gpu_memory_mib, cap, 0)
    model_ok = ((shape.model_mask >> a["model_id"].astype(np.uint64)) & 1).astype(bool)
    cap = np.where(shape.eligible & model_ok, np.maximum(cap, 0), 0)
    return cap


class Hierarchy:
    """Domain ids per level for the nodes of a cluster (outermost level first)."""

    def __init__(self, levels: Sequence[str], paths: Sequence[Sequence[str | None]]) -> None:
        self.levels = list(levels)  # topology levels, then "node"
        self.names: list[list[str]] = []
        self.ids: list[np.ndarray] = []  # per level: domain index per node, -1 when none
        for level_paths in paths:
            index: dict[str, int] = {}
            ids = np.full(len(level_paths), -1, dtype=np.int64)
            for n, path in enumerate(level_paths):
                if path is not None:
                    ids[n] = index.setdefault(path, len(index))
            self.names.append(list(index))
            self.ids.append(ids)
        complete = np.ones(len(paths[0]) if paths else 0, dtype=bool)
        for ids in self.ids:
            complete &= ids >= 0
        self.complete = complete  # nodes with a domain at every level
        self._parents: dict[int, np.ndarray] = {}

    def parent_of(self, level: int) -> np.ndarray:
        """For each domain of ``level``, its domain at ``level - 1`` (level 0: 0, the root)."""
        found = self._parents.get(level)
        if found is None:
            ids = self.ids[level]
            found = np.zeros(len(self.names[level]), dtype=np.int64)
            if level > 0:
                ok = (ids >= 0) & self.complete
                found[ids[ok]] = self.ids[level - 1][ok]
            self._parents[level] = found
        return found


def slice_units(levels: Sequence[str], spec: GangSpec) -> list[int]:
    """Per level (topology levels then node), the multiple of pods each domain must hold."""
    units = [1] * len(levels)
    for sl in spec.slices:
        # a domain of the slice's level, or of any level outside it, holds whole slices
        for j in range(levels.index(sl.level) + 1):
            units[j] = max(units[j], sl.size)
    return units


def domain_capacities(h: Hierarchy, node_cap: np.ndarray, units: Sequence[int]) -> list[np.ndarray]:
    """Capacity of every domain per level, bottom-up, in whole units of that level."""
    caps: list[np.ndarray] = [np.zeros(0)] * len(h.levels)
    node_level = len(h.levels) - 1
    cap = np.where(h.complete, node_cap, 0)
    cap = cap - cap % units[node_level]
    caps[node_level] = cap
    for lv in range(node_level - 1, -1, -1):
        child = caps[lv + 1]
        parent = h.parent_of(lv + 1)
        summed = np.bincount(parent, weights=child, minlength=len(h.names[lv])).astype(np.int64)
        caps[lv] = summed - summed % units[lv]
    return caps


def allocate(
    h: Hierarchy, caps: list[np.ndarray], raw: list[np.ndarray], level: int, domain: int, need: int
) -> dict[int, int]:
    """Pods per node for ``need`` pods inside ``domain`` of ``level`` (-1: the root).

    Children are taken largest first; the remainder goes to the tightest child holding it.
    """
    node_level = len(h.levels) - 1
    if level == node_level:
        return {domain: need}
    child_level = level + 1
    if level < 0:
        children = np.arange(len(h.names[0]))
    else:
        children = np.nonzero(h.parent_of(child_level) == domain)[0]
        if child_level == node_level:
            children = children[h.complete[children]]
    child_caps = caps[child_level][children]
    order = sorted(range(len(children)), key=lambda j: (-child_caps[j], raw[child_level][children[j]], children[j]))
    out: dict[int, int] = {}
    left = need
    used: set[int] = set()
    for j in order:
        if left <= 0:
            break
        if j in used or child_caps[j] <= 0:
            continue
        if child_caps[j] >= left:
            # the tightest child still unused that holds the remainder
            fits = [x for x in order if x not in used and child_caps[x] >= left]
            best = min(fits, key=lambda x: (child_caps[x], raw[child_level][children[x]], children[x]))
            _descend(h, caps, raw, child_level, int(children[best]), left, out)
            left = 0
            break
        used.add(j)
        take = int(child_caps[j])
        _descend(h, caps, raw, child_level, int(children[j]), take, out)
        left -= take
    if left > 0:
        raise AssertionError("allocation below the counted capacity")
    return out


def _descend(
    h: Hierarchy, caps: list[np.ndarray], raw: list[np.ndarray], level: int, domain: int, need: int,
    out: dict[int, int],
) -> None:
    if level == len(h.levels) - 1:
        out[domain] = need
    else:
        out.update(allocate(h, caps, raw, level, domain, need))


def candidate_levels(levels: Sequence[str], spec: GangSpec) -> list[int]:
    """Levels to try, innermost first: the gang's level, then (preferred) each enclosing one."""
    if spec.mode == "unconstrained" or spec.level is None:
        return [-1]
    k = levels.index(spec.level)
    if spec.mode == "required":
        return [k]
    return list(range(k, -1, -1)) + [-1]


def place_gang(
    packed: PackedCluster,
    h: Hierarchy,
    pods: Sequence[PodRequest],
    spec: GangSpec,
    kernel: "Kernel",
    policy: Policy,
    rng: np.ndarray,
    rank: np.ndarray | None = None,
) -> tuple[GangPlan, list[Shape]]:
    """Place and bind every pod of the gang, or nothing (then say how much fits).

    ``policy`` (the request's) chooses GPUs on the chosen nodes and the nodes of the other
    shapes within their scope, drawing from ``rng`` (``random``) and breaking ties by
    ``rank`` (the ranked policies), as in a batch.
    """
    shapes = split_shapes(packed, pods)
    main = shapes[0]
    units = slice_units(h.levels, spec)
    total = len(pods)
    models = model_choices(packed, shapes, spec)
    plan = GangPlan()
    for level in candidate_levels(h.levels, spec):
        best_fit = 0
        candidates: list[tuple[int, int, int, int]] = []  # (cap, model order, domain, model)
        per_model: dict[int, tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = {}
        for mo, model in enumerate(models):
            caps_by_shape = []
            for s in shapes:
                ncap = node_capacity(packed, s, total)
                if model >= 0:
                    ncap = np.where(packed.arrays["model_id"] == model, ncap, 0)
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
            for d in np.nonzero(dom_caps >= main.count)[0]:
                if rest_ok is not None and not all(rest_ok):
                    continue
                if level >= 0 and not _others_fit(h, level, int(d), shapes[1:], caps_by_shape[1:]):
                    continue
                candidates.append((int(dom_caps[d]), mo, int(d), model))
        candidates.sort()
        for _, _, d, model in candidates:
            main_caps, raw, caps_by_shape = per_model[model]
            counts = allocate(h, main_caps, raw, level, d if level >= 0 else -1, main.count)
            nodes = _assign_nodes(h, counts, len(pods), main)
            base_scope = _domain_nodes(h, level, d)
            scope = base_scope & (packed.arrays["model_id"] == model) if model >= 0 else base_scope
            bound = _bind_plan(packed, kernel, h, level, pods, shapes, nodes, scope, base_scope, policy, rng, rank)
            if bound is None:
                continue
            plan.placed = bound
            plan.level = h.levels[level] if level >= 0 else ROOT
            return plan, shapes
        plan.fit = max(plan.fit, best_fit)
        plan.level = h.levels[level] if level >= 0 else ROOT
    return plan, shapes


def model_choices(packed: PackedCluster, shapes: list[Shape], spec: GangSpec) -> list[int]:
    """GPU model ids to try one at a time (-1: any mix), for ``sameGpuModel``."""
    if not spec.same_gpu_model or not any(s.pod.gpus for s in shapes):
        return [-1]
    allowed = ~0
    for s in shapes:
        if s.pod.gpus:
            allowed &= s.model_mask
    return [m for m in range(1, len(packed.model_names)) if (allowed >> m) & 1]


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
    packed: PackedCluster,
    kernel: "Kernel",
    h: Hierarchy,
    level: int,
    pods: Sequence[PodRequest],
    shapes: list[Shape],
    nodes: list[int],
    scope: np.ndarray,
    base_scope: np.ndarray,
    policy: Policy,
    rng: np.ndarray,
    rank: np.ndarray | None,
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
    main_nodes = np.array([nodes[i] for i in main.pods], dtype=td.INDEX)
    arrays, _, _ = pack_pods(packed, main_pods)
    gpus, nics, failed = kernel.place_on(arrays, main_nodes, policy.code, rng)
    if failed >= 0:
        return None
    out: list[tuple[int, int, int]] = [(-1, 0, 0)] * len(pods)
    for j, i in enumerate(main.pods):
        out[i] = (int(main_nodes[j]), int(gpus[j]), int(nics[j]))
    held = [(main_pods, main_nodes.tolist(), gpus.tolist())]
    used = np.zeros(packed.n_nodes, dtype=bool)
    used[main_nodes] = True
    for shape in shapes[1:]:
        rest_pods = [pods[i] for i in shape.pods]
        arrays_r, bitsets, _ = pack_pods(packed, rest_pods, [len(rest_pods)] * len(rest_pods))
        for where in near_scopes(h, used, level, scope if shape.pod.gpus else base_scope):
            placed, masks, _, _, nic_masks = kernel.place_batch(
                arrays_r, policy.code, rng, bitsets, node_bitset(where, packed.n_words), False, rank,
            )
            if placed[0] >= 0:
                break
        else:
            for args in reversed(held):
                release(kernel, *args)
            return None
        used[placed] = True
        held.append((rest_pods, placed.tolist(), masks.tolist()))
        for j, i in enumerate(shape.pods):
            out[i] = (int(placed[j]), int(masks[j]), int(nic_masks[j]))
    return out


def release(kernel: "Kernel", pods: Sequence[PodRequest], nodes: Sequence[int], gpus: Sequence[int]) -> None:
    """Give back what ``pods`` hold on ``nodes`` (GPU masks ``gpus``)."""
    for pod, n, mask in zip(pods, nodes, gpus):
        kernel.bind(int(n), pod.gpu_milli, pod.gpu_memory_mib, pod.cpu_milli, pod.memory_mib, int(mask), -1, 1, pod.shared)


def resource_reasons(packed: PackedCluster, shape: Shape) -> dict[str, int]:
    """Static reasons plus, among the other nodes, every resource a pod of ``shape`` lacks."""
    a = packed.arrays
    p = shape.pod
    ec = packed.eligibility(p)
    out = dict(ec.static_reasons)
    live = shape.eligible
    checks = [
        (td.RESOURCE_REASONS[0], a["cpu_free"] < p.cpu_milli),
        (td.RESOURCE_REASONS[1], a["mem_free"] < p.memory_mib),
        (td.RESOURCE_REASONS[2], a["pods_free"] < 1),
    ]
    if p.gpus and p.shared:
        milli_ok = (a["gpu_free_milli"] >= p.gpu_milli).any(axis=1)
        both_ok = ((a["gpu_free_milli"] >= p.gpu_milli) & (a["gpu_free_mem"] >= p.gpu_memory_mib)).any(axis=1)
        checks.append((td.RESOURCE_REASONS[3], ~milli_ok))
        checks.append((td.RESOURCE_REASONS[4], milli_ok & ~both_ok))
    elif p.gpus:
        short = a["free_count"] < p.gpus
        checks.append((td.RESOURCE_REASONS[3], short))
        checks.append((td.RESOURCE_REASONS[4], ~short & (a["gpu_mem_cap"] < p.gpu_memory_mib)))
    for reason, bad in checks:
        count = int((bad & live).sum())
        if count:
            out[reason] = out.get(reason, 0) + count
    return out


def exact_problem(packed: PackedCluster, h: Hierarchy, paths: Sequence[Sequence[str | None]],
                  shapes: list[Shape], spec: GangSpec, levels: Sequence[str]) -> "exact.GangProblem":
    """The gang as a :class:`placer.exact.GangProblem` on the cluster's current state."""
    from placer import exact

    a = packed.arrays
    big = int(td.UNTRACKED_BIG) // 2
    small = int(td.UNTRACKED_INT) // 2

    def opt(v: int, limit: int) -> int | None:
        return None if v >= limit else int(v)

    nodes = []
    cpu, mem, slots = a["cpu_free"].tolist(), a["mem_free"].tolist(), a["pods_free"].tolist()
    gcount, milli, gmem, gcap = (a["gpu_count"].tolist(), a["gpu_free_milli"].tolist(),
                                 a["gpu_free_mem"].tolist(), a["gpu_mem_cap"].tolist())
    model_id = a["model_id"].tolist()
    for n, name in enumerate(packed.node_names):
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
            model=packed.model_names[model_id[n]] or None,
        ))
    model_ids = a["model_id"].astype(np.uint64)
    gang_shapes = []
    for s in shapes:
        p = s.pod
        ok = s.eligible & ((s.model_mask >> model_ids) & 1).astype(bool)
        gang_shapes.append(exact.GangShape(
            count=s.count, gpus=p.gpus, gpu_milli=p.gpu_milli, gpu_memory_mib=p.gpu_memory_mib,
            cpu_milli=p.cpu_milli, memory_mib=p.memory_mib,
            eligible=frozenset(np.nonzero(ok)[0].tolist()),
        ))
    return exact.GangProblem(
        levels=tuple(levels),
        nodes=tuple(nodes),
        shapes=tuple(gang_shapes),
        mode=spec.mode if spec.level is not None else "unconstrained",
        level=spec.level,
        slices=tuple((sl.level, sl.size) for sl in spec.slices),
        same_gpu_model=spec.same_gpu_model,
    )


def bind_counts(
    packed: PackedCluster,
    h: Hierarchy,
    kernel: "Kernel",
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
                kernel.bind(n, pod.gpu_milli, pod.gpu_memory_mib, pod.cpu_milli, pod.memory_mib, 1 << g, 1, 1, True)
            held.append((my_pods, where, [1 << g for g in gpu_of]))
            for i, n, g in zip(mine, where, gpu_of):
                out[i] = (n, 1 << g, 0)
    for si, s in enumerate(shapes):
        if s.pod.shared:
            continue
        nodes = sorted((n for (sj, n), c in counts.items() if sj == si and c > 0), key=key)
        where = [n for n in nodes for _ in range(counts[(si, n)])]
        my_pods = [pods[i] for i in s.pods]
        arrays, _, _ = pack_pods(packed, my_pods)
        gpus, nics, failed = kernel.place_on(arrays, np.array(where, dtype=td.INDEX), policy.code, rng)
        if failed >= 0:
            for args in reversed(held):
                release(kernel, *args)
            return None
        held.append((my_pods, where, gpus.tolist()))
        for j, i in enumerate(s.pods):
            out[i] = (where[j], int(gpus[j]), int(nics[j]))
    return out
