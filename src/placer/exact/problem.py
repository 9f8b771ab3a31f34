"""One gang's placement problem as pure data (:class:`GangProblem`), its validation, and
the answer of the exact solver (:class:`ExactSolution`).

The problem is what :func:`placer.exact.solve_gang` solves with CP-SAT and what
:mod:`placer.exact.objective` measures; building it needs neither OR-Tools nor the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

__all__ = ["NODE_LEVEL", "GANG_MODES", "WHOLE_GPU", "Counts", "SharedGpus", "GangNode", "GangShape", "GangProblem", "ExactSolution",
           "level_index", "domain_of", "validate_problem"]


NODE_LEVEL = "node"
"""The implicit innermost topology level: every node is its own domain."""

GANG_MODES = ("required", "preferred", "unconstrained")
WHOLE_GPU = 1000

Counts = Mapping[tuple[int, int], int]
SharedGpus = Mapping[tuple[int, int], Sequence[int]]


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


def level_index(problem: GangProblem, level: str) -> int:
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


def domain_of(problem: GangProblem, n: int, li: int) -> str | None:
    """The domain of node ``n`` at level index ``li`` (the node level: its index)."""
    if li == len(problem.levels):
        return f"#{n}"
    return problem.nodes[n].domains[li]


def validate_problem(problem: GangProblem) -> None:
    """Refuse a malformed problem.

    Raises
    ------
    ValueError
        When the levels, the nodes' domain paths or GPU lists, or the shapes do not fit
        together.
    """
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
        level_index(problem, problem.level)
    if problem.slices:
        if not problem.shapes:
            raise ValueError("slices need a shape to count")
        prev = None
        last = -1
        for lvl, size in problem.slices:
            li = level_index(problem, lvl)
            if li <= last:
                raise ValueError("slice levels must be distinct, outermost first")
            last = li
            if size < 1:
                raise ValueError(f"slice size must be positive, got {size}")
            if prev is not None and prev % size:
                raise ValueError(f"slice size {size} does not divide the outer size {prev}")
            prev = size
