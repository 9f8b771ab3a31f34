"""The best placement of a set of MIG pods at once, with CP-SAT: an offline optimum.

A greedy MIG choice (:meth:`placer.kernel.mig.MigState.choose`) places pods one at a time
and never moves an instance; this module places a whole list at once, choosing which pods
to place, and so bounds what any online order of the same pods can reach. It reads the
cluster through the kernel session (what is free, the MIG state, each pod's static
filters) and states the rest as an integer program:

* ``make[p, g, s]`` — Boolean, pod ``p`` creates an instance of its profile at start ``s``
  of MIG GPU ``g`` (dynamic GPUs only, only where the slices are free now);
  ``take[p, g, s]`` — Boolean, pod ``p`` uses the free instance that exists at ``(g, s)``;
* ``on[p, n]`` — Boolean, pod ``p`` is on node ``n``; ``placed[p]`` — Boolean.

Constraints: on each GPU at most one instance covers a slice (slices held by instances
that exist are never offered), media profiles at most one per GPU (none where the GPU's
media unit is taken), at most ``maxCount`` instances of a profile per GPU, each free
instance used once; a pod is on at most one node and has there exactly ``count``
instances, all or nothing; CPU, memory and pod slots of each node hold the pods on it.

:func:`add_mig_pods` builds these variables and constraints for a set of pods over a set
of allowed nodes and returns them (:class:`MigModel`), with no objective: a caller can tie
pods together (a gang: ``placed`` all equal) or add its own objective. :func:`solve_mig`
adds one — the allocated slices (default) or the pods placed — and solves it with the
full linear relaxation (``linearization_level`` 2; at the default level the CPU and memory
rows leave the bound far above the optimum, and an 8-GPU instance of 20 pods was not
proved optimal in a minute). Pods that compete for the same GPUs must be added in one call:
the slice rows are per call. For a gang of identical pods, one Boolean per (pod, GPU,
start) is symmetric; a gang model may instead count instances per (GPU, profile, start) and
keep :func:`_one_gpu`'s rules over those.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from placer.exact.cpsat import status_name
from placer.exceptions import InvalidInputError, SolverError
from placer.kernel import KernelSession
from placer.model.mig_profiles import MigProfile
from placer.model import (
    Assignment,
    ClusterSnapshot,
    MigUse,
    PlacementResult,
    PodRequest,
    Unschedulable,
    load_snapshot,
)

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = ["MIG_OBJECTIVES", "MigOption", "MigModel", "MigSolution", "add_mig_pods", "solve_mig"]

MIG_OBJECTIVES = ("slices", "pods")
"""What :func:`solve_mig` maximises: the memory slices of the instances placed pods use,
or the number of pods placed."""

NOT_CHOSEN = "not placed in the best placement of the pods together (mig_exact)"
"""The reason an :class:`~placer.model.Unschedulable` of :meth:`MigSolution.result` gives."""

@dataclass(frozen=True, slots=True)
class MigOption:
    """One instance a pod may get: on MIG GPU ``row`` (a row of the session's
    :class:`~placer.kernel.mig.MigState`), ``profile`` at ``start``; ``create`` False: the
    free instance that exists there."""

    pod: int
    node: int
    row: int
    gpu: int
    profile: MigProfile
    start: int
    create: bool
    var: cp_model.IntVar

    @property
    def mask(self) -> int:
        """The memory slices the instance covers."""
        mask = self.profile.mask_at(self.start)
        assert mask is not None
        return mask


@dataclass
class MigModel:
    """The variables and constraints :func:`add_mig_pods` added to a CP-SAT model.

    Attributes
    ----------
    pods : list of PodRequest
        The pods, in the order of their index.
    placed : list of BoolVar
        ``placed[p]``: pod ``p`` gets all its instances.
    on : dict (pod, node) -> BoolVar
        Pod ``p`` is on node ``n`` (only nodes it may use).
    options : list of MigOption
        Every instance a pod may get, with its Boolean.
    """

    model: cp_model.CpModel
    session: KernelSession
    pods: list[PodRequest]
    placed: list[cp_model.IntVar]
    on: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)
    options: list[MigOption] = field(default_factory=list)

    def slices_expr(self) -> cp_model.LinearExpr:
        """The memory slices of every instance chosen (what placed pods use)."""
        from ortools.sat.python import cp_model

        return cp_model.LinearExpr.WeightedSum(
            [o.var for o in self.options], [o.profile.memory_slices for o in self.options]
        )

    def uses(self, solver: cp_model.CpSolver) -> dict[int, tuple[int, list[MigUse]]]:
        """Per placed pod (index): its node and its instances in a solved model."""
        out: dict[int, tuple[int, list[MigUse]]] = {}
        for o in self.options:
            if solver.BooleanValue(o.var):
                node, uses = out.setdefault(o.pod, (o.node, []))
                uses.append(MigUse(gpu=o.gpu, profile=o.profile.name, start=o.start, create=o.create))
        for _, uses in out.values():
            uses.sort(key=lambda u: (u.gpu, u.start))
        return out


def add_mig_pods(
    model: cp_model.CpModel,
    session: KernelSession,
    pods: Sequence[PodRequest],
    nodes: np.ndarray | None = None,
) -> MigModel:
    """Add the variables and constraints of placing ``pods`` (MIG pods) to ``model``.

    Parameters
    ----------
    model : CpModel
        The model to add to (nothing else in it is read).
    session : KernelSession
        The cluster now: free CPU, memory and pod slots, the MIG state, the pods' filters.
    pods : sequence of PodRequest
        MIG pods (``pod.mig`` set), names unique; none of them is bound yet.
    nodes : ndarray of bool, optional
        The nodes the pods may use (default: all); each pod's own filters (selectors,
        taints, GPU models, and CPU, memory and pod slots free now) apply too.

    Returns
    -------
    MigModel
        The variables; no objective is set.
    """
    mig = session.mig
    allowed_nodes = np.ones(session.n_nodes, dtype=bool) if nodes is None else np.asarray(nodes, dtype=bool)
    pods = list(pods)
    if len({p.name for p in pods}) != len(pods):
        raise InvalidInputError("pods", "pod names must be unique")
    built = MigModel(model, session, pods, [model.NewBoolVar(f"placed[{p}]") for p in range(len(pods))])
    rows_of_node: dict[int, list[int]] = {}
    for row, node in enumerate(mig.node_of.tolist()):
        rows_of_node.setdefault(node, []).append(row)
    by_row: dict[int, list[MigOption]] = {}
    by_instance: dict[tuple[int, int], list[cp_model.IntVar]] = {}
    on_node: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
    for p, pod in enumerate(pods):
        request = pod.mig
        if request is None:
            raise InvalidInputError(f"pods[{p}].mig", "add_mig_pods places MIG pods only")
        profiles = mig.profiles_for(request)
        may, _ = session.mig_allowed(pod)
        on_any: list[cp_model.IntVar] = []
        for node in np.flatnonzero(may & allowed_nodes & (mig.node_table >= 0)).tolist():
            profile = profiles[int(mig.node_table[node])]
            if profile is None:
                continue
            mine: list[MigOption] = []
            for row in rows_of_node.get(node, ()):
                mine += _row_options(model, session, p, node, row, profile)
            if len(mine) < request.count:
                continue
            on = model.NewBoolVar(f"on[{p},{node}]")
            built.on[(p, node)] = on
            on_any.append(on)
            on_node.setdefault(node, []).append((p, on))
            model.Add(sum(o.var for o in mine) == request.count * on)
            for o in mine:
                by_row.setdefault(o.row, []).append(o)
                if not o.create:
                    by_instance.setdefault((o.row, o.start), []).append(o.var)
            built.options += mine
        model.Add(sum(on_any) == built.placed[p])
    for row, options in by_row.items():
        _one_gpu(model, session, row, options)
    for instance in by_instance.values():
        if len(instance) > 1:
            model.AddAtMostOne(instance)
    _node_capacity(model, session, pods, on_node)
    return built


def _row_options(
    model: cp_model.CpModel, session: KernelSession, pod: int, node: int, row: int, profile: MigProfile
) -> list[MigOption]:
    """The instances pod ``pod`` may get on MIG GPU ``row``: free ones of its profile, and
    on a dynamic GPU every start whose slices are free now."""
    mig = session.mig
    gpu = int(mig.gpu_of[row])
    out = []
    for inst in mig.node_instances(node):
        if inst.row == row and inst.holder is None and inst.profile is profile:
            var = model.NewBoolVar(f"take[{pod},{row},{inst.start}]")
            out.append(MigOption(pod, node, row, gpu, profile, inst.start, False, var))
    if mig.dynamic[row] and not (profile.media and mig.media_used[row]):
        busy = int(mig.busy[row])
        for start, mask in zip(profile.starts, profile.masks):
            if not mask & busy:
                var = model.NewBoolVar(f"make[{pod},{row},{start}]")
                out.append(MigOption(pod, node, row, gpu, profile, start, True, var))
    return out


def _one_gpu(model: cp_model.CpModel, session: KernelSession, row: int, options: list[MigOption]) -> None:
    """One GPU's rules over the instances created on it: slices, media unit, maxCount."""
    made = [o for o in options if o.create]
    slices = session.mig.tables[int(session.mig.table_of[row])].table.slices
    for s in range(slices):
        covering = [o.var for o in made if o.mask >> s & 1]
        if len(covering) > 1:
            model.AddAtMostOne(covering)
    media = [o.var for o in made if o.profile.media]
    if len(media) > 1:
        model.AddAtMostOne(media)
    existing: dict[str, int] = {}
    for inst in session.mig.instances.get(int(session.mig.node_of[row]), ()):
        if inst.row == row:
            existing[inst.profile.name] = existing.get(inst.profile.name, 0) + 1
    by_profile: dict[str, list[MigOption]] = {}
    for o in made:
        by_profile.setdefault(o.profile.name, []).append(o)
    for name, group in by_profile.items():
        room = group[0].profile.max_count - existing.get(name, 0)
        if len({o.start for o in group}) > room:
            model.Add(sum(o.var for o in group) <= room)


def _node_capacity(
    model: cp_model.CpModel,
    session: KernelSession,
    pods: list[PodRequest],
    on_node: Mapping[int, list[tuple[int, cp_model.IntVar]]],
) -> None:
    """CPU, memory and pod slots of each node hold the pods on it (where tracked)."""
    from ortools.sat.python import cp_model

    free = session.free
    for node, here in on_node.items():
        on = [var for _, var in here]
        for need, left, untracked in (
            ([pods[p].cpu_milli for p, _ in here], int(free.cpu_milli[node]), free.untracked_quantity),
            ([pods[p].memory_mib for p, _ in here], int(free.memory_mib[node]), free.untracked_quantity),
            ([1] * len(here), int(free.pod_slots[node]), free.untracked_count),
        ):
            if left < untracked and sum(need) > left:
                model.Add(cp_model.LinearExpr.WeightedSum(on, need) <= left)


@dataclass(frozen=True)
class MigSolution:
    """What :func:`solve_mig` found.

    Attributes
    ----------
    status : str
        ``optimal``, ``feasible`` (the time limit hit first), ``infeasible`` or ``unknown``.
    objective, bound : int
        The objective of the placement found (``slices`` or ``pods``) and CP-SAT's bound on
        the best one (equal when optimal).
    placed : dict str -> (str, tuple of MigUse)
        Per placed pod, its node's name and its instances.
    slices : int
        The memory slices the placed pods' instances cover.
    """

    status: str
    objective: int
    bound: int
    placed: Mapping[str, tuple[str, tuple[MigUse, ...]]]
    slices: int
    pods: tuple[str, ...]
    seconds: float
    num_variables: int

    def result(self) -> PlacementResult:
        """The solution as a :class:`~placer.model.PlacementResult` (for
        :func:`placer.check_placement`); the pods left out are unschedulable."""
        assignments = tuple(
            Assignment(pod=name, node=self.placed[name][0], mig=self.placed[name][1])
            for name in self.pods
            if name in self.placed
        )
        left = tuple(Unschedulable(name, NOT_CHOSEN) for name in self.pods if name not in self.placed)
        return PlacementResult(assignments, left)


def solve_mig(
    cluster: Any,
    pods: Sequence[PodRequest],
    *,
    objective: str = "slices",
    time_limit_s: float = 10.0,
    workers: int = 1,
    nodes: np.ndarray | None = None,
) -> MigSolution:
    """Place ``pods`` together as well as possible: the most slices (or pods) placed.

    Parameters
    ----------
    cluster : Cluster, KernelSession, ClusterSnapshot or dict
        The cluster now (a :class:`placer.Cluster`'s state is read, not changed).
    pods : sequence of PodRequest
        MIG pods, names unique, none bound.
    objective : str
        One of :data:`MIG_OBJECTIVES`.
    time_limit_s : float
        CP-SAT's time limit.
    workers : int
        CP-SAT's search workers.
    nodes : ndarray of bool, optional
        The nodes the pods may use (default: all).

    Returns
    -------
    MigSolution

    Raises
    ------
    InvalidInputError
        For an unknown objective, a pod without ``mig`` or repeated names.
    SolverError
        When CP-SAT calls the model invalid.
    """
    from ortools.sat.python import cp_model

    if objective not in MIG_OBJECTIVES:
        raise InvalidInputError("objective", f"expected one of {', '.join(MIG_OBJECTIVES)}, got {objective!r}")
    session = _session(cluster)
    started = time.perf_counter()
    model = cp_model.CpModel()
    built = add_mig_pods(model, session, pods, nodes)
    if objective == "slices":
        model.Maximize(built.slices_expr())
    else:
        model.Maximize(sum(built.placed))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_search_workers = int(workers)
    # the full linear relaxation: with CPU and memory knapsacks beside the slice rows, the
    # default level leaves the bound far above the optimum on 8-GPU instances for minutes
    solver.parameters.linearization_level = 2
    code = solver.Solve(model)
    status = status_name(code)
    if status == "invalid":
        raise SolverError(f"CP-SAT refused the MIG model: {model.Validate()}")
    found = status in ("optimal", "feasible")
    placed: dict[str, tuple[str, tuple[MigUse, ...]]] = {}
    if found:
        for p, (node, uses) in built.uses(solver).items():
            placed[built.pods[p].name] = (session.node_names[node], tuple(uses))
    return MigSolution(
        status=status,
        objective=int(round(solver.ObjectiveValue())) if found else 0,
        bound=int(round(solver.BestObjectiveBound())) if status != "infeasible" else 0,
        placed=placed,
        slices=int(solver.Value(built.slices_expr())) if found else 0,
        pods=tuple(p.name for p in built.pods),
        seconds=time.perf_counter() - started,
        num_variables=len(model.Proto().variables),
    )


def _session(cluster: Any) -> KernelSession:
    """The kernel session of a Cluster, a session, or a fresh one of a snapshot."""
    if isinstance(cluster, KernelSession):
        return cluster
    session = getattr(cluster, "session", None)
    if isinstance(session, KernelSession):
        return session
    snapshot = cluster if isinstance(cluster, ClusterSnapshot) else load_snapshot(cluster)
    return KernelSession(snapshot)
