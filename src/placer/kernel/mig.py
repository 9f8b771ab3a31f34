"""MIG state of a cluster: per MIG GPU a bitmask of busy memory slices, the instances that
exist and who uses each, and the choice of GPU and start for a new instance.

Every question about one GPU is a table lookup. For each GPU model, :class:`SliceTables`
holds, for every busy mask ``b`` (256 of them on 8-slice GPUs), how many more copies of each
profile still fit (``copies[p, b]``) and how many free slices no profile can use any more
(``stranded[b]``). The MIG-aware choice scores an instance of ``p`` at a start of mask
``m`` by the placeable capacity of the demand mix it destroys,
``Σ_q w_q · (copies[q, b] − copies[q, b | m])``, as one lookup of a weighted value per
mask; candidates over the whole cluster are compared in numpy.

The start inside the chosen GPU looks ahead (every choice but ``first-fit``): the GPU's
instances form a layout of :class:`~placer.kernel.mig_layouts.LayoutReach`, and of the
starts of the chosen GPU the one kept is the one whose layout after keeps the most room,
in turn, for the MIG pods the request still has to place (:meth:`MigState.set_pending`: a
request's pods that fit on one GPU are placed whatever their order), for the layouts a
told demand mix makes likely (:meth:`MigState.set_mix`), and, while nothing is pending,
for every NVIDIA-valid layout of the model; then the choice's own keys.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from placer.kernel.mig_layouts import LayoutReach, layout_reach
from placer.model.mig_profiles import MigProfile, MigTable, per_model, table_for
from placer.model import ClusterSnapshot, MigInstance, MigRequest, MigUse, PodRequest

__all__ = ["SliceTables", "MigState", "MIG_CHOICES", "slice_tables"]

MIG_CHOICES = ("first-fit", "best-fit", "spread", "aware")
"""How an instance's GPU and start are chosen: the lowest node, GPU and start (what HAMi
does); the GPU left with the fewest free slices; the GPU left with the most (replicas one
per GPU); or the least placeable capacity of the demand mix destroyed (:class:`SliceTables`).
Inside the chosen GPU every choice but ``first-fit`` takes the start that looks ahead
(:class:`MigState`)."""

_BIG = np.float64(1e18)
_PENDING_CACHE = 256  # pending-value arrays kept per state (a few thousand floats each)


def _max_copies(masks: Sequence[int], busy: int, limit: int) -> int:
    """Most disjoint instances among ``masks`` that avoid ``busy`` (intervals: earliest end first)."""
    count = 0
    taken = busy
    for mask in sorted(masks, key=lambda m: m.bit_length()):
        if not mask & taken:
            taken |= mask
            count += 1
            if count == limit:
                break
    return count


class SliceTables:
    """Lookup tables of one GPU model's MIG profiles over every busy-slice mask.

    Attributes
    ----------
    copies : ndarray of int16, shape (profiles, 2**slices)
        Copies of each profile that still fit beside busy mask ``b`` (media profiles: at
        most one, and only while the GPU's media unit is free; see :meth:`capacity`).
    free_slices, stranded : ndarray of int16, shape (2**slices,)
        Free slices of ``b``, and those no non-media profile can cover any more.
    """

    def __init__(self, table: MigTable) -> None:
        self.table = table
        n = 1 << table.slices
        profiles = table.profiles
        self.copies = np.zeros((len(profiles), n), dtype=np.int16)
        self.free_slices = np.zeros(n, dtype=np.int16)
        self.stranded = np.zeros(n, dtype=np.int16)
        full = table.full_mask
        plain_masks = [m for p in profiles if not p.media for m in p.masks]
        for b in range(n):
            for p in profiles:
                self.copies[p.index, b] = _max_copies(p.masks, b, 1 if p.media else p.max_count)
            free = full & ~b
            self.free_slices[b] = bin(free).count("1")
            coverable = 0
            for m in plain_masks:
                if not m & b:
                    coverable |= m
            self.stranded[b] = bin(free & ~coverable).count("1")
        self.starts = np.full((len(profiles), max(len(p.starts) for p in profiles)), -1, dtype=np.int16)
        self.masks = np.zeros(self.starts.shape, dtype=np.int64)
        for p in profiles:
            self.starts[p.index, : len(p.starts)] = p.starts
            self.masks[p.index, : len(p.masks)] = p.masks

    def value(self, weights: np.ndarray) -> np.ndarray:
        """Σ_p weights[p] · copies[p, b] for every busy mask ``b``."""
        return weights.astype(np.float64) @ self.copies.astype(np.float64)

    def capacity(self, profile: MigProfile, busy: np.ndarray, media_used: np.ndarray) -> np.ndarray:
        """Copies of ``profile`` that can still be created on GPUs of these states."""
        cap = self.copies[profile.index, busy].astype(np.int64)
        if profile.media:
            cap[media_used] = 0
        return cap


slice_tables = per_model(SliceTables)
"""The (cached) lookup tables of a GPU model."""


@dataclass
class Instance:
    """An instance that exists: where, which profile, and the pod using it (None: free)."""

    row: int  # the GPU's row in MigState's arrays
    gpu: int
    profile: MigProfile
    start: int
    holder: str | None = None
    created: bool = False  # created by placer (a dynamic GPU's instance goes when released)
    device: str | None = None  # the name NVIDIA_VISIBLE_DEVICES takes, when the source gave it

    @property
    def mask(self) -> int:
        return self.profile.masks[self.profile.starts.index(self.start)]


class MigState:
    """Every MIG GPU of a cluster as rows of flat arrays, and the instances on each.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        A decoded snapshot (its MIG instances are valid: the schema checked them).
    with_mig : sequence of int, optional
        The nodes with GPUs in MIG mode, when the caller knows them (default: found here).
    """

    lookahead: bool = True
    """Whether the start inside the chosen GPU looks ahead (False: the choice's own keys
    alone, the rule before issue #34, which ``bench/bench_mig_layouts.py`` compares)."""

    def __init__(self, snapshot: ClusterSnapshot, with_mig: Sequence[int] | None = None) -> None:
        nodes = snapshot.nodes
        self.n_nodes = len(nodes)
        self.tables: list[SliceTables] = []
        table_ids: dict[str, int] = {}
        node_of: list[int] = []
        gpu_of: list[int] = []
        table_of: list[int] = []
        dynamic: list[bool] = []
        self.node_table = np.full(self.n_nodes, -1, dtype=np.int16)
        self.rows: dict[tuple[int, int], int] = {}
        if with_mig is None:
            with_mig = [i for i, n in enumerate(nodes) if n.hardware is not None and n.hardware.mig is not None]
        for i in with_mig:
            node = nodes[i]
            hw = node.hardware
            if not hw.gpus:
                continue
            table = table_for(hw.gpu_model)
            if table is None:
                continue
            t = table_ids.get(table.model)
            if t is None:
                t = table_ids[table.model] = len(self.tables)
                self.tables.append(slice_tables(table))
            self.node_table[i] = t
            unhealthy = set(node.unhealthy_gpus)
            for g in hw.mig.indices(hw.gpus):
                if g in unhealthy:
                    continue
                self.rows[(i, g)] = len(node_of)
                node_of.append(i)
                gpu_of.append(g)
                table_of.append(t)
                dynamic.append(hw.mig.mode == "dynamic")
        self.node_of = np.array(node_of, dtype=np.int64)
        self.gpu_of = np.array(gpu_of, dtype=np.int64)
        self.table_of = np.array(table_of, dtype=np.int64)
        self.dynamic = np.array(dynamic, dtype=bool)
        self.table_rows = [np.flatnonzero(self.table_of == t) for t in range(len(self.tables))]  # per table
        self.reach: list[LayoutReach] = [layout_reach(t.table) for t in self.tables]
        n_rows = len(node_of)
        empty = [r.state_of(()) for r in self.reach]
        self.layout_of = np.array([empty[t] for t in table_of], dtype=np.int64)  # the layout of each row
        self._pending: dict[str, MigRequest] = {}
        self._pending_held: set[str] = set()
        self._pending_counts = [np.zeros(len(t.table.profiles), dtype=np.int64) for t in self.tables]
        self._pending_values: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        self._mix_values: list[np.ndarray | None] = [None] * len(self.tables)
        self.busy = np.zeros(n_rows, dtype=np.int64)
        self.media_used = np.zeros(n_rows, dtype=bool)
        max_profiles = max((len(t.table.profiles) for t in self.tables), default=1)
        self.free_of = np.zeros((n_rows, max_profiles), dtype=np.int16)  # free instances per profile
        self.in_use = np.zeros(n_rows, dtype=np.int16)  # instances in use per GPU
        self.instances: dict[int, list[Instance]] = {}  # node -> instances
        self.used_by: dict[str, list[Instance]] = {}
        for i in with_mig:
            node = nodes[i]
            if self.node_table[i] < 0:
                continue
            for m in node.mig_instances:
                self._add(i, m)
            for pod in node.pods:
                for m in pod.mig:
                    inst = self._find(i, m.gpu, m.start) or self._add(i, m)
                    self._use(inst, pod.name)

    # ------------------------------------------------------------------ instances

    @property
    def n_rows(self) -> int:
        """MIG GPUs of the cluster (healthy ones)."""
        return len(self.node_of)

    def table_of_node(self, node: int) -> MigTable | None:
        """The MIG table of a node's GPU model (None: no MIG GPU)."""
        t = int(self.node_table[node])
        return None if t < 0 else self.tables[t].table

    def _add(self, node: int, m: MigInstance | MigUse, created: bool = False) -> Instance:
        row = self.rows[(node, m.gpu)]
        table = self.tables[int(self.table_of[row])].table
        profile = table.profile(m.profile)
        assert profile is not None
        inst = Instance(row, m.gpu, profile, m.start, created=created, device=getattr(m, "device", None))
        self.instances.setdefault(node, []).append(inst)
        self.busy[row] |= inst.mask
        if profile.media:
            self.media_used[row] = True
        self.free_of[row, profile.index] += 1
        self._relayout(node, row)
        return inst

    def _remove(self, node: int, inst: Instance) -> None:
        self.instances[node].remove(inst)
        self.busy[inst.row] &= ~inst.mask
        if inst.profile.media:
            self.media_used[inst.row] = False
        self.free_of[inst.row, inst.profile.index] -= 1
        self._relayout(node, inst.row)

    def _relayout(self, node: int, row: int) -> None:
        reach = self.reach[int(self.table_of[row])]
        self.layout_of[row] = reach.state_of((i.profile.index, i.start) for i in self.instances[node] if i.row == row)

    def _find(self, node: int, gpu: int, start: int) -> Instance | None:
        for inst in self.instances.get(node, ()):
            if inst.gpu == gpu and inst.start == start:
                return inst
        return None

    def _use(self, inst: Instance, holder: str) -> None:
        inst.holder = holder
        self.free_of[inst.row, inst.profile.index] -= 1
        self.in_use[inst.row] += 1
        self.used_by.setdefault(holder, []).append(inst)

    def node_instances(self, node: int) -> list[Instance]:
        """The instances on a node, free or in use."""
        return list(self.instances.get(node, ()))

    def holdings(self, holder: str) -> list[Instance]:
        """The instances a pod uses."""
        return list(self.used_by.get(holder, ()))

    def uses_of(self, holder: str) -> tuple[MigUse, ...]:
        """The instances ``holder`` uses, ``create`` where placer created them for it."""
        return tuple(
            MigUse(gpu=i.gpu, profile=i.profile.name, start=i.start, create=i.created) for i in self.holdings(holder)
        )

    def instances_on(self, node: int) -> tuple[MigInstance, ...]:
        """The instances that exist on a node now, free or in use, by GPU and start."""
        return tuple(
            MigInstance(gpu=i.gpu, profile=i.profile.name, start=i.start, device=i.device)
            for i in sorted(self.node_instances(node), key=lambda i: (i.gpu, i.start))
        )

    # ------------------------------------------------------------------ profiles

    def profiles_for(self, request: MigRequest) -> list[MigProfile | None]:
        """The profile a request means on each GPU model (by table id; None: none there)."""
        out: list[MigProfile | None] = []
        for t in self.tables:
            if request.profile is not None:
                out.append(t.table.profile(request.profile))
            else:
                assert request.memory_mib is not None
                out.append(t.table.smallest_holding(request.memory_mib))
        return out

    def node_capacity(self, request: MigRequest) -> np.ndarray:
        """Per node, how many instances of the request's profile it could give now:
        free instances of it, plus, on dynamic GPUs, copies that can still be created."""
        per_row = np.zeros(self.n_rows, dtype=np.int64)
        for t, profile in enumerate(self.profiles_for(request)):
            rows = self.table_rows[t]
            if profile is None or not len(rows):
                continue
            created = self.tables[t].capacity(profile, self.busy[rows], self.media_used[rows])
            per_row[rows] = self.free_of[rows, profile.index] + np.where(self.dynamic[rows], created, 0)
        cap = np.bincount(self.node_of, weights=per_row, minlength=self.n_nodes).astype(np.int64)
        return cap

    # ------------------------------------------------------------------ looking ahead

    def set_pending(self, pods: Sequence[PodRequest]) -> None:
        """The MIG pods a request still has to place: while one of them holds no instance,
        its instances count in the look-ahead's first key (the slices they can still take
        beside a candidate, :meth:`LayoutReach.pending_values`)."""
        self._pending = {pod.name: pod.mig for pod in pods if pod.mig is not None}
        self._pending_held = {name for name in self._pending if name in self.used_by}
        for counts in self._pending_counts:
            counts[:] = 0
        for name, request in self._pending.items():
            if name not in self._pending_held:
                self._count_pending(request, 1)

    def _count_pending(self, request: MigRequest, sign: int) -> None:
        for t, profile in enumerate(self.profiles_for(request)):
            if profile is not None:
                self._pending_counts[t][profile.index] += sign * request.count

    def set_mix(self, weights: Sequence[np.ndarray] | None) -> None:
        """A told demand mix, a weight per profile of each table (None: none told): the
        look-ahead's second key weighs the layouts it makes likely."""
        self._mix_values = [None] * len(self.tables) if weights is None else [
            self.reach[t].mix_values(w) for t, w in enumerate(weights)
        ]

    def _lookahead(self, t: int, profile: MigProfile) -> tuple[np.ndarray | None, ...]:
        """Per layout of table ``t``, once an instance of ``profile`` is placed: the slices
        the request's other pending instances can still take beside it, the told mix's
        value and the default one (only while nothing is pending: what the request says
        comes next is the better guess, and ties then go to the choice's own keys)."""
        rest = self._pending_counts[t].copy()
        rest[profile.index] = max(rest[profile.index] - 1, 0)
        # beyond what one GPU holds of a profile, more pending copies change nothing
        rest = np.minimum(rest, self.reach[t].most)
        pending = None
        if rest.any():
            key = (t, tuple(int(c) for c in rest))
            pending = self._pending_values.get(key)
            if pending is None:
                if len(self._pending_values) >= _PENDING_CACHE:
                    self._pending_values.clear()
                pending = self._pending_values[key] = self.reach[t].pending_values(rest)
        return pending, self._mix_values[t], None if pending is not None else self.reach[t].default_values

    # ------------------------------------------------------------------ choosing

    def choose(
        self,
        request: MigRequest,
        allowed: np.ndarray,
        how: str,
        values: Mapping[int, np.ndarray] | None = None,
    ) -> tuple[int, list[MigUse]] | None:
        """Where ``request.count`` instances go: one node (allowed by the bool mask), and
        on it each instance's GPU, start and whether it is created. Nothing changes.

        Free instances of the profile come first; on dynamic GPUs an instance may be created
        at a valid start whose slices are free. ``how`` is one of :data:`MIG_CHOICES`;
        ``values`` (``aware``) holds per GPU-model table the weighted capacity of every busy
        mask (:meth:`SliceTables.value`).
        """
        count = request.count
        cap = self.node_capacity(request)
        ok = allowed & (cap >= count)
        if not ok.any():
            return None
        profiles = self.profiles_for(request)
        first = self._best(profiles, ok, how, values)
        assert first is not None
        node = first[0]
        uses = [first[1]]
        if count > 1:
            only = np.zeros(self.n_nodes, dtype=bool)
            only[node] = True
            done = [self._apply(node, first[1], "")]
            try:
                for _ in range(count - 1):
                    nxt = self._best(profiles, only, how, values)
                    assert nxt is not None
                    uses.append(nxt[1])
                    done.append(self._apply(node, nxt[1], ""))
            finally:
                for inst, use in zip(reversed(done), reversed(uses)):
                    self._unapply(node, inst, drop=use.create)
        return node, uses

    def _best(
        self, profiles: list[MigProfile | None], allowed: np.ndarray, how: str, values: Mapping[int, np.ndarray] | None
    ) -> tuple[int, MigUse] | None:
        """The best single instance over the allowed nodes, as (node, use)."""
        cand_rows: list[np.ndarray] = []
        cand_starts: list[np.ndarray] = []
        cand_create: list[np.ndarray] = []
        cand_profile: list[np.ndarray] = []
        columns: list[list[np.ndarray]] = []
        for t, profile in enumerate(profiles):
            if profile is None:
                continue
            st = self.tables[t]
            rows = self.table_rows[t]
            rows = rows[allowed[self.node_of[rows]]]
            if not len(rows):
                continue
            busy = self.busy[rows]
            free_slices = st.free_slices[busy].astype(np.int64)
            # free instances of the profile (one candidate per GPU that has one)
            has_free = self.free_of[rows, profile.index] > 0
            if has_free.any():
                r = rows[has_free]
                n = len(r)
                cand_rows.append(r)
                cand_starts.append(np.full(n, -1, dtype=np.int64))
                cand_create.append(np.zeros(n, dtype=bool))
                cand_profile.append(np.full(n, profile.index, dtype=np.int64))
                columns.append(
                    [np.zeros(n), np.zeros(n), np.zeros(n), -self.in_use[r].astype(np.float64),
                     free_slices[has_free].astype(np.float64), np.zeros(n), np.zeros(n), np.zeros(n)]
                )
            dyn = self.dynamic[rows]
            if profile.media:
                dyn = dyn & ~self.media_used[rows]
            if not dyn.any():
                continue
            # A created instance's keys depend on the GPU's layout alone (its busy mask when
            # the instances form none of the table), and rows run in (node, GPU) order, the
            # last tie-break of every choice: of the GPUs that share a layout only the first
            # can win, so only it is a candidate.
            layout = self.layout_of[rows]
            _, first = np.unique(np.where(layout >= 0, layout, -1 - busy)[dyn], return_index=True)
            r = rows[dyn][first]
            b = busy[dyn][first]
            state = layout[dyn][first]
            value = None if values is None else values.get(t)
            ahead_values = self._lookahead(t, profile)
            for k, start in enumerate(profile.starts):
                mask = profile.masks[k]
                fits = (b & mask) == 0
                if not fits.any():
                    continue
                rr, bb = r[fits], b[fits]
                after = bb | mask
                n = len(rr)
                loss = (value[bb] - value[after]) if value is not None else np.zeros(n)
                grown = self.reach[t].after[state[fits], profile.index, k]
                ahead = [np.zeros(n) if v is None else v[grown] for v in ahead_values]
                cand_rows.append(rr)
                cand_starts.append(np.full(n, start, dtype=np.int64))
                cand_create.append(np.ones(n, dtype=bool))
                cand_profile.append(np.full(n, profile.index, dtype=np.int64))
                columns.append(
                    [np.ones(n), loss, st.stranded[after].astype(np.float64), np.zeros(n),
                     st.free_slices[after].astype(np.float64), *ahead]
                )
        if not cand_rows:
            return None
        rows_all = np.concatenate(cand_rows)
        starts = np.concatenate(cand_starts)
        create = np.concatenate(cand_create)
        category, loss, stranded, packed, free_after, pending, mix, default = (
            np.concatenate(c) for c in zip(*columns))
        node = self.node_of[rows_all]
        gpu = self.gpu_of[rows_all]
        if how == "first-fit":
            order = (starts, gpu, category, node)
        elif how == "best-fit":
            order = (starts, gpu, node, free_after, category)
        elif how == "spread":
            order = (starts, gpu, node, -free_after, category)
        else:
            order = (starts, gpu, node, free_after, packed, stranded, loss, category)
        ranked = np.lexsort(order)
        if how == "first-fit" or not self.lookahead:
            pick = int(ranked[0])
        else:
            # The GPU is the choice's; the start inside it, the one that looks ahead.
            rank = np.empty(len(ranked), dtype=np.int64)
            rank[ranked] = np.arange(len(ranked))
            gpu_rank = np.full(self.n_rows, len(ranked), dtype=np.int64)
            np.minimum.at(gpu_rank, rows_all, rank)
            pick = int(np.lexsort((rank, -default, -mix, -pending, category, gpu_rank[rows_all]))[0])
        row = int(rows_all[pick])
        t = int(self.table_of[row])
        profile = self.tables[t].table.profiles[int(np.concatenate(cand_profile)[pick])]
        if create[pick]:
            start = int(starts[pick])
        else:
            start = min(i.start for i in self.instances[int(node[pick])]
                        if i.row == row and i.holder is None and i.profile is profile)
        return int(node[pick]), MigUse(gpu=int(gpu[pick]), profile=profile.name, start=start, create=bool(create[pick]))

    # ------------------------------------------------------------------ changes

    def _apply(self, node: int, use: MigUse, holder: str) -> Instance:
        if use.create:
            inst = self._add(node, use, created=True)
        else:
            found = self._find(node, use.gpu, use.start)
            assert found is not None and found.holder is None
            inst = found
        self._use(inst, holder)
        return inst

    def _unapply(self, node: int, inst: Instance, drop: bool) -> None:
        holder = inst.holder
        assert holder is not None
        self.used_by[holder].remove(inst)
        if not self.used_by[holder]:
            del self.used_by[holder]
        inst.holder = None
        self.free_of[inst.row, inst.profile.index] += 1
        self.in_use[inst.row] -= 1
        if drop:
            self._remove(node, inst)

    def misfit(self, node: int, uses: Sequence[MigUse], request: MigRequest | None) -> str:
        """Why ``uses`` cannot be taken on ``node`` now ("" when they can)."""
        if request is None:
            return "the pod asks for no MIG instance" if uses else ""
        if len(uses) != request.count:
            return f"needs {request.count} MIG instance(s), got {len(uses)}"
        table = self.table_of_node(node)
        if table is None:
            return "the node has no GPU in MIG mode"
        wanted = self.profiles_for(request)[int(self.node_table[node])]
        if wanted is None:
            return f"its GPU model has no MIG profile for {request.to_dict()}"
        busy: dict[int, int] = {}
        media: set[int] = set()
        for use in uses:
            row = self.rows.get((node, use.gpu))
            if row is None:
                return f"GPU {use.gpu} is not a healthy MIG GPU of the node"
            profile = table.profile(use.profile)
            if profile is not wanted:
                return f"{use.profile} is not the profile asked for ({wanted.name})"
            mask = profile.mask_at(use.start)
            if mask is None:
                return f"{profile.name} cannot start at slice {use.start}"
            if use.create:
                if not self.dynamic[row]:
                    return f"GPU {use.gpu} is static: no instance may be created"
                if (int(self.busy[row]) | busy.get(row, 0)) & mask:
                    return f"GPU {use.gpu} slices of {profile.name} at {use.start} are not free"
                if profile.media and (self.media_used[row] or row in media):
                    return f"GPU {use.gpu} already has a media instance"
                busy[row] = busy.get(row, 0) | mask
                if profile.media:
                    media.add(row)
            else:
                inst = self._find(node, use.gpu, use.start)
                if inst is None or inst.profile is not profile:
                    return f"no {profile.name} instance at GPU {use.gpu} slice {use.start}"
                if inst.holder is not None:
                    return f"the {profile.name} instance at GPU {use.gpu} slice {use.start} is used by {inst.holder}"
        if len({(u.gpu, u.start) for u in uses}) != len(uses):
            return "an instance is listed twice"
        return ""

    def take(self, node: int, uses: Iterable[MigUse], holder: str) -> None:
        """Create (where asked) and use these instances for ``holder``; no checks."""
        for use in uses:
            self._apply(node, use, holder)
        request = self._pending.get(holder)
        if request is not None and holder not in self._pending_held:
            self._pending_held.add(holder)
            self._count_pending(request, -1)

    def give_back(self, holder: str) -> None:
        """Free every instance ``holder`` uses; an instance placer created goes away."""
        for inst in reversed(self.holdings(holder)):
            self._unapply(int(self.node_of[inst.row]), inst, drop=inst.created)
        if holder in self._pending_held:
            self._pending_held.discard(holder)
            self._count_pending(self._pending[holder], 1)
