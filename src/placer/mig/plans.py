"""MIG in the units a user asks about: what still fits per profile, and re-layout plans.

Two questions about a cluster's MIG GPUs (:class:`placer.kernel.mig.MigState`), answered
from its per-GPU slice masks and the lookup tables of :class:`placer.kernel.mig.SliceTables`:

* **What fits** (:func:`mig_capacity`, for ``placer report``): per GPU model and profile,
  how many more instances fit now — free instances on static GPUs, free and creatable ones
  on dynamic GPUs (``copies[p, busy]``) — and how many would fit if every idle static GPU
  were re-split for that profile alone.
* **What to change** (:func:`plan_relayout`, for ``placer explain``): a static GPU offers
  only the instances that exist, so a pending MIG pod may find no free instance of its
  profile although an idle GPU — one whose instances are all free — could hold it once
  re-split. The plan names such GPUs and their new layout; a GPU with an instance in use
  is never touched. :func:`render_mig_parted` writes the plan as an ``nvidia-mig-parted``
  configuration, :func:`relayout_snapshot` as the snapshot the cluster would be after it.

A **layout** is a set of instances on one GPU, valid by the model's bundled table: each at
one of its profile's starts, none overlapping, at most one media (``+me``) instance, at
most ``maxCount`` of a profile, compute slices within the GPU's. :func:`layout_table`
enumerates every layout of a model once (a few hundred on 8-slice GPUs). The layout
proposed for a re-split GPU holds the pending pod's instances and, among those that do,
is the first by:

1. serving the most of the demand still pending on the model (the later pending pods'
   profiles), so fewer GPUs change in all;
2. keeping the most of the GPU's current instances, counted per profile
   (``nvidia-mig-parted`` applies counts, not starts): the inventory others rely on;
3. covering the most slices (none left without an instance: a static GPU cannot use them);
4. the most copies of the pending pod's profile, then the most compute slices used;
5. the first found by a walk over the slices from 0 that leaves a slice empty before it
   starts an instance there (deterministic).

Each pending pod (in request order) goes to the node that needs the fewest re-split GPUs
for it, counting the free instances of its profile there, the ones earlier plans left over
included; the plan changes the fewest GPUs it can, pod by pod.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import yaml

from placer.kernel import KernelSession
from placer.kernel.mig import MigState
from placer.kernel.mig_layouts import LayoutTable, MigLayout, layout_table
from placer.model.mig_profiles import MigProfile, MigTable
from placer.model import ClusterSnapshot, MigInstance, PodRequest, replace

__all__ = [
    "MigLayout",
    "LayoutTable",
    "layout_table",
    "GpuRelayout",
    "RelayoutPlan",
    "plan_relayout",
    "relayout_snapshot",
    "mig_parted_config",
    "render_mig_parted",
    "ProfileCapacity",
    "ModelCapacity",
    "mig_capacity",
    "MigUsage",
    "mig_usage",
    "free_slice_count",
    "idle_static_rows",
    "node_rows",
]

MIG_PARTED_CONFIG_PREFIX = "placer-"
"""``nvidia-mig-parted`` configurations are named ``placer-<node>``, one per node to change."""


# ----------------------------------------------------------------------------- per-GPU facts


@dataclass(frozen=True)
class MigUsage:
    """What the instances of each MIG GPU (row) take.

    Attributes
    ----------
    held : ndarray of int64
        The slices the instances in use hold (a mask).
    compute, held_compute : ndarray of int64
        Compute slices of every instance that exists, and of those in use.
    """

    held: np.ndarray
    compute: np.ndarray
    held_compute: np.ndarray


def mig_usage(state: MigState) -> MigUsage:
    """Per MIG GPU (row), the slices and compute slices its instances take."""
    held = np.zeros(state.n_rows, dtype=np.int64)
    compute = np.zeros(state.n_rows, dtype=np.int64)
    held_compute = np.zeros(state.n_rows, dtype=np.int64)
    for node in range(state.n_nodes):
        for inst in state.node_instances(node):
            compute[inst.row] += inst.profile.compute_slices
            if inst.holder is not None:
                held[inst.row] |= inst.mask
                held_compute[inst.row] += inst.profile.compute_slices
    return MigUsage(held, compute, held_compute)


def free_slice_count(table: MigTable, taken: int) -> int:
    """Slices of a GPU of ``table`` outside the mask ``taken``."""
    return bin(table.full_mask & ~taken).count("1")


def idle_static_rows(state: MigState) -> np.ndarray:
    """Static MIG GPUs (rows) with no instance in use: a re-split may destroy their instances."""
    return (~state.dynamic) & (state.in_use == 0)


def node_rows(state: MigState, node: int) -> list[int]:
    """The MIG GPUs (rows) of a node."""
    return np.flatnonzero(state.node_of == node).tolist()


def _row_instances(state: MigState, row: int) -> MigLayout:
    node = int(state.node_of[row])
    found = sorted((i.start, i.profile.name) for i in state.node_instances(node) if i.row == row)
    return MigLayout(tuple((name, start) for start, name in found))


# ----------------------------------------------------------------------------- re-layout plans


@dataclass(frozen=True)
class GpuRelayout:
    """One idle static GPU to re-split: where, its instances now and after, for which pods."""

    node: str
    gpu: int
    model: str
    before: MigLayout
    after: MigLayout
    pods: tuple[str, ...]

    def to_text(self) -> str:
        """``n5 GPU 1 (idle, now [1g.10gb@0, ...]) to [3g.40gb@0, 3g.40gb@4]``."""
        return f"{self.node} GPU {self.gpu} (idle, now {self.before.to_text()}) to {self.after.to_text()}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpu": self.gpu,
            "gpuModel": self.model,
            "before": self.before.to_list(),
            "after": self.after.to_list(),
            "migDevices": self.after.counts(),
            "pods": list(self.pods),
        }


@dataclass(frozen=True)
class RelayoutPlan:
    """Idle static GPUs to re-split so that pending MIG pods fit.

    Attributes
    ----------
    gpus : tuple of GpuRelayout
        The GPUs to change, by node (snapshot order) and GPU index.
    unplanned : tuple of str
        Pending MIG pods no re-split of idle GPUs would place (``placer explain`` also
        leaves here a pod that placer, placing by its policy, would still not place on the
        GPUs re-split as planned).
    """

    gpus: tuple[GpuRelayout, ...] = ()
    unplanned: tuple[str, ...] = ()

    def for_pod(self, pod: str) -> tuple[GpuRelayout, ...]:
        """The changes ``pod``'s instances would be on."""
        return tuple(g for g in self.gpus if pod in g.pods)

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": [g.to_dict() for g in self.gpus], "unplanned": list(self.unplanned)}


@dataclass
class _Planning:
    """What the plan has decided so far, over the rows of one :class:`MigState`."""

    state: MigState
    free: dict[int, np.ndarray]  # static row -> free instances per profile (after the plan)
    changed: dict[int, tuple[int, list[str]]] = field(default_factory=dict)  # row -> (layout, pods)
    taken: set[int] = field(default_factory=set)  # rows whose instances planned pods use
    used: dict[int, np.ndarray] = field(default_factory=dict)  # node -> CPU, memory, pods taken

    def take_free(self, rows: Sequence[int], profile: MigProfile, count: int, pod: str) -> int:
        """Take up to ``count`` free instances of ``profile`` on ``rows``; how many were taken."""
        taken = 0
        for row in sorted(rows, key=lambda r: (r not in self.changed, r)):
            while taken < count and self.free[row][profile.index] > 0:
                self.free[row][profile.index] -= 1
                self.taken.add(row)
                taken += 1
                if row in self.changed and pod not in self.changed[row][1]:
                    self.changed[row][1].append(pod)
        return taken


def plan_relayout(session: KernelSession, pods: Sequence[PodRequest]) -> RelayoutPlan:
    """Re-splits of idle static GPUs that would place ``pods`` (pending MIG pods).

    Each pod, in order, goes where the fewest idle GPUs must change (see the module notes
    for the layout proposed); the free instances of its profile on static GPUs, those
    earlier plans left over included, count first. Dynamic GPUs are left alone: placer
    creates their instances itself. Nothing in ``session`` changes.

    Parameters
    ----------
    session : KernelSession
        The cluster as the pending pods face it.
    pods : sequence of PodRequest
        The pending pods; pods without ``mig`` are skipped.

    Returns
    -------
    RelayoutPlan
    """
    state = session.mig
    mig_pods = [p for p in pods if p.mig is not None]
    static = np.flatnonzero(~state.dynamic)
    plan = _Planning(state, {int(r): state.free_of[r].astype(np.int64) for r in static})
    idle = idle_static_rows(state)
    demand = _pending_demand(state, mig_pods)
    unplanned: list[str] = []
    for k, pod in enumerate(mig_pods):
        if not _plan_pod(session, plan, idle, pod, demand[k + 1]):
            unplanned.append(pod.name)
    names = [n.name for n in session.snapshot.nodes]
    gpus = []
    for row, (k, for_pods) in sorted(plan.changed.items(), key=lambda kv: (state.node_of[kv[0]], state.gpu_of[kv[0]])):
        layouts = layout_table(state.tables[int(state.table_of[row])].table)
        gpus.append(GpuRelayout(
            node=names[int(state.node_of[row])], gpu=int(state.gpu_of[row]), model=layouts.table.model,
            before=_row_instances(state, row), after=layouts.layout(k), pods=tuple(for_pods),
        ))
    return RelayoutPlan(tuple(gpus), tuple(unplanned))


def _pending_demand(state: MigState, pods: Sequence[PodRequest]) -> list[list[np.ndarray]]:
    """``out[k][t]``: instances per profile of table ``t`` that pods ``k`` onwards ask for."""
    zero = [np.zeros(len(t.table.profiles), dtype=np.int64) for t in state.tables]
    out = [zero]
    for pod in reversed(pods):
        after = [d.copy() for d in out[0]]
        assert pod.mig is not None
        for t, profile in enumerate(state.profiles_for(pod.mig)):
            if profile is not None:
                after[t][profile.index] += pod.mig.count
        out.insert(0, after)
    return out


def _plan_pod(session: KernelSession, plan: _Planning, idle: np.ndarray, pod: PodRequest,
              demand: list[np.ndarray]) -> bool:
    """Plan one pod: on the node where the fewest idle GPUs must change, re-split those and
    take the free instances of its profile elsewhere on the node."""
    state = plan.state
    request = pod.mig
    assert request is not None
    allowed, _ = session.mig_allowed(pod)
    profiles = state.profiles_for(request)
    best: tuple[int, int, list[int]] | None = None  # (GPUs to change, node, those GPUs)
    for node in np.flatnonzero(allowed).tolist():
        t = int(state.node_table[node])
        profile = profiles[t] if t >= 0 else None
        if profile is None or not _room_beside_plan(session, plan, node, pod):
            continue
        chosen = _gpus_to_resplit(plan, node, idle, profile, request.count, demand[t])
        if chosen is not None and (best is None or len(chosen) < best[0]):
            best = (len(chosen), node, chosen)
    if best is None:
        return False
    _, node, chosen = best
    t = int(state.node_table[node])
    profile = profiles[t]
    assert profile is not None
    layouts = layout_table(state.tables[t].table)
    per_gpu = int(state.tables[t].copies[profile.index, 0])
    others = [r for r in node_rows(state, node) if r in plan.free and r not in chosen]
    short = request.count - plan.take_free(others, profile, request.count, pod.name)
    for row in chosen:
        copies = min(per_gpu, short)
        k = layouts.best(profile, copies, state.free_of[row].astype(np.int64), demand[t])
        plan.changed[row] = (k, [pod.name])
        plan.free[row] = layouts.counts[k].copy()
        plan.free[row][profile.index] -= copies
        short -= copies
        demand[t] = np.maximum(demand[t] - plan.free[row], 0)
    assert short <= 0
    used = plan.used.setdefault(node, np.zeros(3, dtype=np.int64))
    used += (pod.cpu_milli, pod.memory_mib, 1)
    return True


def _gpus_to_resplit(plan: _Planning, node: int, idle: np.ndarray, profile: MigProfile, count: int,
                     demand: np.ndarray) -> list[int] | None:
    """The fewest idle GPUs of ``node`` to re-split so that it holds ``count`` instances of
    ``profile`` beside the free ones it has ([] when those suffice; None when no re-split
    would do). A GPU re-split for ``profile`` holds ``copies[p, 0]`` of it instead of its
    free ones: those gaining the most come first, then those keeping the most of their
    instances, then the lowest index."""
    state = plan.state
    rows = [r for r in node_rows(state, node) if r in plan.free]
    have = sum(int(plan.free[r][profile.index]) for r in rows)
    tables = state.tables[int(state.node_table[node])]
    per_gpu = int(tables.copies[profile.index, 0])
    layouts = layout_table(tables.table)
    spare = [r for r in rows if idle[r] and r not in plan.changed and r not in plan.taken
             and plan.free[r][profile.index] < per_gpu]
    copies = min(per_gpu, count)
    spare.sort(key=lambda r: (int(plan.free[r][profile.index]),
                              -_kept(layouts, plan, r, profile, copies, demand), r))
    chosen: list[int] = []
    for row in spare:
        if have >= count:
            break
        have += per_gpu - int(plan.free[row][profile.index])
        chosen.append(row)
    return chosen if have >= count else None


def _kept(layouts: LayoutTable, plan: _Planning, row: int, profile: MigProfile, copies: int,
          demand: np.ndarray) -> int:
    """How many of a GPU's instances (per profile) its best layout for ``copies`` keeps."""
    current = plan.state.free_of[row].astype(np.int64)
    k = layouts.best(profile, copies, current, demand)
    return int(np.minimum(layouts.counts[k], current).sum()) if k >= 0 else -1


def _room_beside_plan(session: KernelSession, plan: _Planning, node: int, pod: PodRequest) -> bool:
    """Whether ``node`` still has CPU, memory and a pod slot for ``pod`` beside the pods
    planned there before it."""
    used = plan.used.get(node)
    if used is None:
        return True
    free = session.free
    return bool(
        free.cpu_milli[node] - used[0] >= pod.cpu_milli
        and free.memory_mib[node] - used[1] >= pod.memory_mib
        and free.pod_slots[node] - used[2] >= 1
    )


def relayout_snapshot(snapshot: ClusterSnapshot, plan: RelayoutPlan) -> ClusterSnapshot:
    """``snapshot`` with the plan's GPUs re-split: their instances replaced by the new layouts.

    ``snapshot`` is the cluster the plan was made on (for ``placer explain``: after the
    placed pods, :meth:`placer.Cluster.to_snapshot`).
    """
    by_node: dict[str, list[GpuRelayout]] = {}
    for g in plan.gpus:
        by_node.setdefault(g.node, []).append(g)
    nodes = []
    for node in snapshot.nodes:
        changes = by_node.get(node.name)
        if not changes:
            nodes.append(node)
            continue
        gone = {g.gpu for g in changes}
        kept = [m for m in node.mig_instances if m.gpu not in gone]
        made = [MigInstance(gpu=g.gpu, profile=name, start=start) for g in changes for name, start in g.after.instances]
        nodes.append(replace(node, mig_instances=tuple(sorted(kept + made, key=lambda m: (m.gpu, m.start)))))
    return replace(snapshot, nodes=tuple(nodes))


def mig_parted_config(plan: RelayoutPlan) -> dict[str, Any]:
    """The plan as an ``nvidia-mig-parted`` configuration (``version: v1``).

    One configuration per node to change, ``placer-<node>``, with one entry per distinct
    new layout: ``devices`` (the GPU indices), ``mig-enabled: true`` and ``mig-devices``
    (instances per profile). ``nvidia-mig-parted`` changes only the devices a configuration
    lists, so GPUs with an instance in use, never in a plan, are left as they are. It
    applies counts, not starts: the starts ``placer explain`` shows are one valid layout
    of those counts.
    """
    configs: dict[str, list[dict[str, Any]]] = {}
    for g in plan.gpus:
        entries = configs.setdefault(MIG_PARTED_CONFIG_PREFIX + g.node, [])
        counts = g.after.counts()
        same = next((e for e in entries if e["mig-devices"] == counts), None)
        if same is None:
            entries.append({"devices": [g.gpu], "mig-enabled": True, "mig-devices": counts})
        else:
            same["devices"].append(g.gpu)
    doc: dict[str, Any] = {"version": "v1"}
    if configs:
        doc["mig-configs"] = configs
    return doc


def render_mig_parted(plan: RelayoutPlan) -> str:
    """:func:`mig_parted_config` as YAML, each configuration preceded by how to apply it."""
    lines = ["# nvidia-mig-parted configuration written by placer explain: idle MIG GPUs to re-split",
             "# so that pending pods fit; only the GPUs listed change (none has an instance in use)."]
    for g in plan.gpus:
        lines.append(f"# {g.node} GPU {g.gpu}: {g.before.to_text()} -> {g.after.to_text()} for {', '.join(g.pods)}")
    names = sorted({MIG_PARTED_CONFIG_PREFIX + g.node for g in plan.gpus})
    for name in names:
        lines.append(f"# apply on {name[len(MIG_PARTED_CONFIG_PREFIX):]}: nvidia-mig-parted apply -f FILE -c {name}"
                     f" (GPU operator: label the node nvidia.com/mig.config={name})")
    if not plan.gpus:
        lines.append("# nothing to change")
    body = yaml.safe_dump(mig_parted_config(plan), sort_keys=False, default_flow_style=False)
    return "\n".join(lines) + "\n" + body


# ----------------------------------------------------------------------------- what fits


@dataclass(frozen=True)
class ProfileCapacity:
    """How many more instances of one profile fit, each profile counted on its own.

    Attributes
    ----------
    profile : str
    memory_slices, compute_slices : int
        What one instance of the profile takes.
    static : int
        Free instances on static GPUs.
    dynamic : int
        Free instances and instances that can still be created on dynamic GPUs.
    if_resplit : int
        ``static + dynamic`` with every idle static GPU re-split to hold the most of this
        profile (its free instances counted no more).
    """

    profile: str
    memory_slices: int
    compute_slices: int
    static: int
    dynamic: int
    if_resplit: int

    @property
    def now(self) -> int:
        """Instances that fit now."""
        return self.static + self.dynamic

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "now": self.now, "static": self.static, "dynamic": self.dynamic,
                "ifResplit": self.if_resplit, "slicesUsable": self.now * self.memory_slices}


@dataclass(frozen=True)
class ModelCapacity:
    """The MIG GPUs of one GPU model and what still fits on them.

    Attributes
    ----------
    model : str
        The bundled table's model name.
    placements_confirmed : bool
        False: the table's starts are inferred from a sibling model, not read from
        ``nvidia-smi mig -lgipp`` output.
    gpus, static_gpus, idle_static_gpus : int
        MIG GPUs (healthy), those in static mode, and static ones with no instance in use.
    slices, free_slices : int
        Memory slices of those GPUs, and those no instance in use holds.
    profiles : tuple of ProfileCapacity
        In table order.
    """

    model: str
    placements_confirmed: bool
    gpus: int
    static_gpus: int
    idle_static_gpus: int
    slices: int
    free_slices: int
    profiles: tuple[ProfileCapacity, ...]

    def largest_fitting(self) -> ProfileCapacity | None:
        """The profile with the most slices (then compute) of which one more fits now."""
        fitting = [p for p in self.profiles if p.now]
        return max(fitting, key=lambda p: (p.memory_slices, p.compute_slices)) if fitting else None

    def to_dict(self) -> dict[str, Any]:
        largest = self.largest_fitting()
        return {
            "gpuModel": self.model,
            "placementsConfirmed": self.placements_confirmed,
            "gpus": self.gpus,
            "staticGpus": self.static_gpus,
            "dynamicGpus": self.gpus - self.static_gpus,
            "idleStaticGpus": self.idle_static_gpus,
            "slices": self.slices,
            "freeSlices": self.free_slices,
            "largestFitting": None if largest is None else largest.profile,
            "profiles": [p.to_dict() for p in self.profiles],
        }


def mig_capacity(state: MigState) -> tuple[ModelCapacity, ...]:
    """Per GPU model with MIG GPUs, how many more instances of each profile fit.

    Parameters
    ----------
    state : MigState
        The cluster's MIG GPUs (``Cluster.session.mig``).

    Returns
    -------
    tuple of ModelCapacity
        In the order the models first appear among the nodes.
    """
    held = mig_usage(state).held
    idle = idle_static_rows(state)
    out = []
    for t, tables in enumerate(state.tables):
        rows = np.flatnonzero(state.table_of == t)
        if not len(rows):
            continue
        table = tables.table
        dyn = state.dynamic[rows]
        idle_rows = idle[rows]
        free_slices = sum(free_slice_count(table, int(h)) for h in held[rows])
        profiles = []
        for p in table.profiles:
            free = state.free_of[rows, p.index].astype(np.int64)
            created = tables.capacity(p, state.busy[rows], state.media_used[rows])
            static = int(free[~dyn].sum())
            dynamic = int((free + created)[dyn].sum())
            on_empty = int(tables.copies[p.index, 0])
            resplit = static - int(free[idle_rows].sum()) + dynamic + int(idle_rows.sum()) * on_empty
            profiles.append(ProfileCapacity(p.name, p.memory_slices, p.compute_slices, static, dynamic, resplit))
        out.append(ModelCapacity(
            model=table.model, placements_confirmed=table.placements_confirmed, gpus=len(rows),
            static_gpus=int((~dyn).sum()), idle_static_gpus=int(idle_rows.sum()),
            slices=len(rows) * table.slices, free_slices=free_slices, profiles=tuple(profiles),
        ))
    return tuple(out)
