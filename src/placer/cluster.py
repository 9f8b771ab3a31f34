"""A cluster's placement state for a scheduler's loop: place, bind, release.

:class:`Cluster` packs a snapshot into the kernel's arrays once; every later decision and
state change works on those arrays in place. The rules it implements are in
``docs/placement-rules.md``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np

from placer import _typedefs as td
from placer import gangs, gpusets, policies, schema
from placer._core import Kernel
from placer._pack import (
    EligibilityClass,
    indices_to_mask,
    mask_to_indices,
    node_bitset,
    pack_pods,
    pack_snapshot,
)
from placer.exceptions import InvalidInputError
from placer.fragmentation import Fragmentation, Workload, target_workload
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    RunningPod,
    Unschedulable,
    load_snapshot,
    replace,
)
from placer.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, PackingGuide, packing_guide
from placer.policies import Policy

__all__ = ["Cluster", "NodeFree", "kube_reason"]

PodLike = Union[PodRequest, Mapping[str, Any]]

_SCORE_CACHE_CELLS = 1 << 24  # (shape, node) scores kept per batch, at most
# A pod's placement step outcome: (pod, node or -1, GPU mask, reason, NIC mask).
_Outcome = tuple[PodRequest, int, int, str, int]


@dataclass(frozen=True, slots=True)
class NodeFree:
    """What is free on one node now; ``None`` where the capacity is not tracked."""

    cpu_milli: int | None
    memory_mib: int | None
    pods: int | None
    gpu_milli: tuple[int, ...]
    gpu_memory_mib: tuple[int | None, ...]


@dataclass(slots=True)
class _Holding:
    """What one bound pod holds on its node."""

    node: int
    whole_mask: int
    shares: dict[int, tuple[int, int]]
    cpu_milli: int
    memory_mib: int
    record: RunningPod


def fgd_rank(n_nodes: int, seed: int) -> np.ndarray:
    """The tie order of nodes under the ranked policies (``fgd``, the study's other scored
    baselines and ``fgd-pack``: :attr:`placer.policies.Policy.ranked`): nodes sorted by the
    request's SplitMix64 draws.

    Draw ``n_nodes`` values from a fresh SplitMix64 stream started at ``seed``; node i gets
    the i-th; the node with the smaller draw wins a tie (rank 0 first).
    """
    mask = (1 << 64) - 1
    state = seed
    draws = np.empty(n_nodes, dtype=np.uint64)
    for i in range(n_nodes):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        draws[i] = z ^ (z >> 31)
    rank = np.empty(n_nodes, dtype=td.INDEX)
    rank[np.argsort(draws, kind="stable")] = np.arange(n_nodes, dtype=td.INDEX)
    return rank


def kube_reason(total_nodes: int, counts: Mapping[str, int]) -> str:
    """``0/N nodes are available: …`` with counts largest first, ties by reason text."""
    parts = [f"{c} {r}" for r, c in sorted(counts.items(), key=lambda rc: (-rc[1], rc[0])) if c]
    return f"0/{total_nodes} nodes are available: " + ", ".join(parts) + "." if parts else (
        f"0/{total_nodes} nodes are available."
    )


@dataclass
class _Step:
    """A run of pods placed in one kernel call, or one gang with a required level."""

    pods: list[PodRequest]
    group_end: list[int] = field(default_factory=list)
    gang: GangSpec | None = None


class Cluster:
    """Placement state of one cluster.

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
        The cluster as it is now.

    Examples
    --------
    >>> cluster = Cluster(snapshot)                          # doctest: +SKIP
    >>> decision = cluster.place({"name": "a", "gpus": 2})   # doctest: +SKIP
    >>> cluster.bind(decision)                               # doctest: +SKIP
    >>> cluster.release("a")                                 # doctest: +SKIP
    """

    def __init__(self, snapshot: ClusterSnapshot | Mapping[str, Any] | str) -> None:
        self._snapshot = load_snapshot(snapshot)
        self._packed = pack_snapshot(self._snapshot)
        self._kernel = Kernel(self._packed.arrays, len(self._packed.model_names))
        for t, kind in enumerate(self._packed.kinds):
            if kind.nics:
                self._kernel.set_nics(t, kind.nic_classes())
        self._holdings: dict[str, _Holding] = {}
        self._decided: dict[str, PodRequest] = {}
        self._domain_bits: dict[str, list[tuple[str, np.ndarray]]] = {}
        self._paths: dict[str, list[str | None]] = {}
        self._levels: gangs.Hierarchy | None = None
        self._facts = schema.snapshot_facts(self._snapshot)
        self._workload: Workload | None = None
        self._packing: PackingGuide | None = None
        self._rank: np.ndarray | None = None
        self._node_frag = np.zeros(0, dtype=np.float64)
        for i, node in enumerate(self._snapshot.nodes):
            for pod in node.pods:
                self._holdings[pod.name] = _Holding(
                    node=i,
                    whole_mask=indices_to_mask(pod.gpus),
                    shares={g: (m, pod.gpu_memory_mib.get(g, 0)) for g, m in pod.gpu_shares.items()},
                    cpu_milli=pod.cpu_milli,
                    memory_mib=pod.memory_mib,
                    record=pod,
                )

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The snapshot this cluster started from."""
        return self._snapshot

    @property
    def node_names(self) -> list[str]:
        """Node names in index order."""
        return list(self._packed.node_names)

    # ------------------------------------------------------------------ decisions

    def schedule(
        self,
        request: PlacementRequest | Mapping[str, Any] | str,
        *,
        policy: str | Policy | None = None,
        seed: int | None = None,
    ) -> PlacementResult:
        """Place a request's pods in order, binding each placed pod.

        This is what :func:`placer.place` does; the state keeps the placed pods.
        ``policy`` and ``seed``, when given, override the request's.
        """
        if isinstance(request, PlacementRequest):
            schema.check_request_against_snapshot(request, self._facts)
        else:
            request = schema.coerce_request(request, self._facts)
        changes: dict[str, Any] = {}
        if policy is not None:
            changes["policy"] = (policy if isinstance(policy, Policy) else policies.get(policy, "policy")).name
        if seed is not None:
            changes["seed"] = schema.check_seed(seed, "seed")
        if changes:
            request = replace(request, **changes)
        return self._run(
            request.pods, request.gangs, policies.get(request.policy), request.seed, keep=True,
            solver=request.solver, time_limit_s=request.time_limit_s,
        )

    def place(
        self,
        pods: PodLike | Sequence[PodLike],
        *,
        gang: GangSpec | Mapping[str, Any] | None = None,
        policy: str = "best-fit",
        seed: int = 0,
    ) -> PlacementResult:
        """Decide where one pod, or a list of pods, would go; the state does not change.

        Parameters
        ----------
        pods : PodRequest or dict, or a sequence of them
            The pods, placed in order.
        gang : GangSpec or dict, optional
            When given, the pods form this gang: all are placed or none.
        policy : str
            Any name in :data:`placer.policies.REGISTRY` (``docs/placement-rules.md``).
        seed : int
            Seed of the ``random`` policy's stream and of the ranked policies' node order.

        Returns
        -------
        PlacementResult
            Pass it to :meth:`bind` to make the decision real.
        """
        request = schema.request_for_pods(pods, gang, policy, seed, self._facts)
        return self._run(
            request.pods, request.gangs, policies.REGISTRY[request.policy], request.seed, keep=False,
            solver=request.solver, time_limit_s=request.time_limit_s,
        )

    def _run(
        self,
        pods: Sequence[PodRequest],
        gangs: Mapping[str, GangSpec],
        policy: Policy,
        seed: int,
        keep: bool,
        solver: str = "auto",
        time_limit_s: float = 10.0,
    ) -> PlacementResult:
        for i, pod in enumerate(pods):
            if pod.name in self._holdings:
                raise InvalidInputError(f"pods[{i}].name", f"pod {pod.name!r} is already bound")
        rng = np.array([seed], dtype=np.uint64)
        self._rank = None
        if policy.needs_workload and self._workload is None:
            self.fragmentation(target_workload(pods))
        if policy.needs_packing_guide and self._packing is None:
            self.set_packing(self.packing_guide(pods))
        if policy.ranked:
            self._rank = fgd_rank(self._packed.n_nodes, seed)
        assignments: list[Assignment] = []
        unschedulable: list[Unschedulable] = []
        gang_results: list[GangResult] = []
        placed: list[tuple[PodRequest, int, int]] = []
        for step in self._steps(pods, gangs):
            gang_result = None
            if step.gang is not None:
                outcome, gang_result = self._place_gang(step, policy, rng, solver, time_limit_s)
            else:
                outcome = self._place_run(step, policy, rng)
            for pod, node, mask, reason, nic_mask in outcome:
                if node >= 0:
                    self._packed.use_resources(node, pod.resources, 1)
                    placed.append((pod, node, mask))
                    assignments.append(self._assignment(pod, node, mask, nic_mask))
                else:
                    unschedulable.append(Unschedulable(pod.name, reason))
            if gang_result is not None:
                gang_results.append(gang_result)
        for pod, _, _ in placed:
            self._decided[pod.name] = pod
        if keep:
            for pod, node, mask in placed:
                self._hold(pod, node, mask)
        else:
            for pod, node, mask in reversed(placed):
                self._apply(node, pod, mask, -1)
        return PlacementResult(tuple(assignments), tuple(unschedulable), tuple(gang_results))

    def _steps(self, pods: Sequence[PodRequest], gangs: Mapping[str, GangSpec]) -> list[_Step]:
        members: dict[str, list[PodRequest]] = {}
        for pod in pods:
            if pod.gang is not None:
                members.setdefault(pod.gang, []).append(pod)
        steps: list[_Step] = []
        current = _Step([])
        seen: set[str] = set()
        for pod in pods:
            if pod.gang is None and pod.resources:
                # its filter depends on what the pods before it took: a step of its own
                if current.pods:
                    steps.append(current)
                steps.append(_Step([pod], [1]))
                current = _Step([])
                continue
            if pod.gang is None:
                current.pods.append(pod)
                current.group_end.append(len(current.pods))
                continue
            if pod.gang in seen:
                continue
            seen.add(pod.gang)
            group = members[pod.gang]
            if current.pods:
                steps.append(current)
                current = _Step([])
            steps.append(_Step(list(group), [len(group)] * len(group), gangs.get(pod.gang) or GangSpec(pod.gang)))
        if current.pods:
            steps.append(current)
        return steps

    def _place_run(
        self, step: _Step, policy: Policy, rng: np.ndarray, only: np.ndarray | None = None,
        frag_trace: np.ndarray | None = None,
    ) -> list[_Outcome]:
        arrays, bitsets, classes = pack_pods(self._packed, step.pods, step.group_end)
        self._ensure_tables(arrays["gpus"])
        nodes, masks, failed_at, counts, nics = self._kernel.place_batch(
            arrays, policy.code, rng, bitsets, only, True, self._rank, frag_trace, self._shapes(arrays, policy)
        )
        out = []
        for j, pod in enumerate(step.pods):
            node = int(nodes[j])
            reason = ""
            if node < 0:
                k = int(failed_at[j])
                line = self._reason(classes[int(arrays["klass"][k])], counts[k], only)
                if step.gang is not None:
                    reason = (
                        f"gang {step.gang.name}: {k} of {len(step.pods)} pod(s) placed before pod "
                        f"{step.pods[k].name} failed: {line}"
                    )
                else:
                    reason = line
            out.append((pod, node, int(masks[j]), reason, int(nics[j])))
        return out

    def _shapes(self, arrays: dict[str, np.ndarray], policy: Policy) -> np.ndarray | None:
        """Shape index per pod for the kernel's score cache (:attr:`Policy.cached`), or None
        when the cache would not pay (one pod) or would be too large."""
        count = len(arrays["gpus"])
        if not policy.cached or count < 2:
            return None
        columns = np.stack([arrays["gpus"], arrays["milli"], arrays["gpu_mem"], arrays["cpu"]], axis=1)
        kinds, index = np.unique(columns, axis=0, return_inverse=True)
        if len(kinds) * self._packed.n_nodes > _SCORE_CACHE_CELLS:
            return None
        return index.reshape(-1).astype(td.INT)

    def _place_gang(
        self, step: _Step, policy: Policy, rng: np.ndarray, solver: str, time_limit_s: float
    ) -> tuple[list[_Outcome], GangResult]:
        """Greedy first; CP-SAT when the greedy fails (``auto``) or always (``exact``)."""
        spec = step.gang
        assert spec is not None
        solver = spec.solver or solver
        limit = spec.time_limit_s or time_limit_s
        if spec.mode != "unconstrained" and spec.level is not None:
            outcome = self._place_topology_gang(step, policy, rng)
        else:
            outcome = self._place_unconstrained(step, policy, rng)
        placed = all(o[1] >= 0 for o in outcome)
        if solver == "greedy" or (solver == "auto" and placed):
            return outcome, self._gang_result(spec, outcome, "greedy", "feasible" if placed else "unknown")
        from placer import exact

        shapes = gangs.split_shapes(self._packed, step.pods)
        hint: dict[tuple[int, int], int] = {}
        if placed:
            shape_of = {i: si for si, sh in enumerate(shapes) for i in sh.pods}
            for i, o in enumerate(outcome):
                key = (shape_of[i], o[1])
                hint[key] = hint.get(key, 0) + 1
            gangs.release(self._kernel, step.pods, [o[1] for o in outcome], [o[2] for o in outcome])
        levels = (*self._snapshot.topology_levels, "node")
        problem = gangs.exact_problem(
            self._packed, self._hierarchy(), [self._domain_paths(lv) for lv in levels], shapes, spec,
            self._snapshot.topology_levels,
        )
        sol = exact.solve_gang(problem, time_limit_s=limit, hint=hint or None)
        answer = sol.counts if sol.found else hint
        if answer:
            shared = sol.shared_gpus if sol.found else {}
            bound = gangs.bind_counts(
                self._packed, self._hierarchy(), self._kernel, step.pods, shapes, answer, shared, policy, rng
            )
            if bound is not None:
                done = [(pod, n, mask, "", nic) for pod, (n, mask, nic) in zip(step.pods, bound)]
                status = sol.status if sol.found else "feasible"
                name = "cp-sat" if sol.found else "greedy"
                return done, self._gang_result(spec, done, name, status, sol.objective, sol.bound)
        reason = outcome[0][3]
        if sol.status == "infeasible":
            reason += "; CP-SAT proved that no placement exists"
        else:
            reason += f"; CP-SAT found no placement within {limit:g} s"
        failed = [(pod, -1, 0, reason, 0) for pod in step.pods]
        return failed, self._gang_result(spec, failed, "cp-sat", sol.status, None, sol.bound)

    def _place_unconstrained(self, step: _Step, policy: Policy, rng: np.ndarray) -> list[_Outcome]:
        """Pod by pod, all or nothing; with ``sameGpuModel``, one GPU model at a time."""
        spec = step.gang
        assert spec is not None
        shapes = gangs.split_shapes(self._packed, step.pods)
        models = gangs.model_choices(self._packed, shapes, spec)
        if models == [-1]:
            return self._place_run(step, policy, rng)
        if not models:
            reason = f"gang {spec.name}: no GPU model suits every pod of the gang (sameGpuModel)"
            return [(pod, -1, 0, reason, 0) for pod in step.pods]
        model_id = self._packed.arrays["model_id"]
        outcome: list[_Outcome] = []
        for m in models:
            only = node_bitset((model_id == m) | (model_id == 0), self._packed.n_words)
            outcome = self._place_run(step, policy, rng, only)
            if all(o[1] >= 0 for o in outcome):
                break
        return outcome

    def _place_topology_gang(self, step: _Step, policy: Policy, rng: np.ndarray) -> list[_Outcome]:
        """A required or preferred gang: greedy over the topology levels, all or nothing;
        ``policy`` chooses GPUs and the other shapes' nodes (:func:`placer.gangs.place_gang`)."""
        spec = step.gang
        assert spec is not None
        arrays, _, _ = pack_pods(self._packed, step.pods)
        self._ensure_tables(arrays["gpus"])
        plan, shapes = gangs.place_gang(
            self._packed, self._hierarchy(), step.pods, spec, self._kernel, policy, rng, self._rank
        )
        if plan.placed:
            return [(pod, node, mask, "", nic) for pod, (node, mask, nic) in zip(step.pods, plan.placed)]
        main = shapes[0]
        where = "the cluster" if plan.level == gangs.ROOT else f"topology level {plan.level}"
        of = "" if len(shapes) == 1 else " of its largest shape"
        excluded = gangs.resource_reasons(self._packed, main)
        line = f"; {kube_reason(self._packed.n_nodes, excluded)}" if excluded else ""
        reason = f"gang {spec.name}: {where} allows to fit only {plan.fit} out of {main.count} pod(s){of}{line}"
        return [(pod, -1, 0, reason, 0) for pod in step.pods]

    def _hierarchy(self) -> gangs.Hierarchy:
        if self._levels is None:
            levels = (*self._snapshot.topology_levels, "node")
            self._levels = gangs.Hierarchy(levels, [self._domain_paths(lv) for lv in levels])
        return self._levels

    def _ensure_tables(self, pod_gpus: np.ndarray) -> None:
        """Give the kernel the GPU-set tables of every node kind for the batch's set sizes."""
        kinds = self._packed.kinds
        if not kinds:
            return
        for k in np.unique(pod_gpus).tolist():
            if k < 1:
                continue
            for t, kind in enumerate(kinds):
                g = kind.topology.gpus
                if k > g or g > gpusets.MAX_TABLE_GPUS or self._kernel.has_gpu_tables(t, k):
                    continue
                tables = gpusets.tables_for(kind.topology, k)
                top = int(tables.subset_score[int(tables.best_set[(1 << g) - 1])])
                self._kernel.set_gpu_tables(
                    t, k, tables.pair, tables.subset_score, tables.split, tables.tiling, top
                )

    def _domains(self, level: str) -> list[tuple[str, np.ndarray]]:
        """Domains of a level in order of first appearance, each with its node bitset."""
        found = self._domain_bits.get(level)
        if found is None:
            paths = self._domain_paths(level)
            order: dict[str, list[int]] = {}
            for i, path in enumerate(paths):
                if path is not None:
                    order.setdefault(path, []).append(i)
            found = []
            for path, members in order.items():
                mask = np.zeros(self._packed.n_nodes, dtype=bool)
                mask[members] = True
                found.append((path, node_bitset(mask, self._packed.n_words)))
            self._domain_bits[level] = found
        return found

    def _domain_paths(self, level: str) -> list[str | None]:
        """Each node's domain path at ``level`` (``None`` when the node has no such domain)."""
        found = self._paths.get(level)
        if found is not None:
            return found
        if level == "node":
            found = list(self._packed.node_names)
        else:
            levels = self._snapshot.topology_levels
            upto = levels[: levels.index(level) + 1]
            found = []
            for node in self._snapshot.nodes:
                values = [node.topology.get(lv) for lv in upto]
                found.append(None if any(v is None for v in values) else "/".join(values))  # type: ignore[arg-type]
        self._paths[level] = found
        return found

    def _gang_result(
        self,
        spec: GangSpec,
        outcome: list[_Outcome],
        solver: str,
        status: str,
        objective: float | None = None,
        bound: float | None = None,
    ) -> GangResult:
        placed = bool(outcome) and all(o[1] >= 0 for o in outcome)
        domains: dict[str, tuple[str, ...]] = {}
        if placed:
            for level in (*self._snapshot.topology_levels, "node"):
                paths = self._domain_paths(level)
                used = dict.fromkeys(paths[o[1]] for o in outcome)
                if None not in used:
                    domains[level] = tuple(p for p in used if p is not None)
        return GangResult(spec.name, placed, solver, status, domains, objective, bound)

    def _reason(self, ec: EligibilityClass, counts: np.ndarray, only: np.ndarray | None = None) -> str:
        if only is None:
            merged = dict(ec.static_reasons)
        else:
            inside = np.unpackbits(only.view(np.uint8), bitorder="little")[: self._packed.n_nodes].astype(bool)
            merged = ec.reasons_among(inside)
        for name, count in zip(td.RESOURCE_REASONS, counts.tolist()):
            if count:
                merged[name] = merged.get(name, 0) + count
        return kube_reason(self._packed.n_nodes, merged)

    def _assignment(self, pod: PodRequest, node: int, mask: int, nic_mask: int) -> Assignment:
        nics: tuple[str, ...] = ()
        if nic_mask:
            names = self._packed.kinds[int(self._packed.arrays["kind_of"][node])].nics
            nics = tuple(names[j].name for j in mask_to_indices(nic_mask))
        return Assignment(
            pod=pod.name,
            node=self._packed.node_names[node],
            gpus=mask_to_indices(mask),
            gpu_milli=pod.gpu_milli if pod.shared else None,
            gang=pod.gang,
            nics=nics,
        )

    # ------------------------------------------------------------------ state changes

    def bind(self, placement: PlacementResult | Assignment | Iterable[Assignment]) -> None:
        """Make decisions real: hold each assignment's resources on its node.

        The pods must come from an earlier :meth:`place` (or :meth:`schedule`) of this
        cluster. Raises :class:`InvalidInputError` when a pod is already bound, unknown,
        or no longer fits.
        """
        if isinstance(placement, PlacementResult):
            items: Iterable[Assignment] = placement.assignments
        elif isinstance(placement, Assignment):
            items = (placement,)
        else:
            items = placement
        for a in items:
            pod = self._decided.get(a.pod)
            if pod is None:
                raise InvalidInputError(a.pod, "not decided by this cluster's place(); nothing to bind")
            if a.pod in self._holdings:
                raise InvalidInputError(a.pod, "pod is already bound")
            node = self._packed.node_index.get(a.node)
            if node is None:
                raise InvalidInputError(a.pod, f"unknown node {a.node!r}")
            mask = indices_to_mask(a.gpus)
            problem = self._misfit(pod, node, a.gpus)
            if problem:
                raise InvalidInputError(a.pod, f"does not fit on {a.node}: {problem}")
            self._apply(node, pod, mask, 1)
            self._hold(pod, node, mask)

    def release(self, pod_name: str) -> None:
        """Give back everything a bound or running pod holds."""
        holding = self._holdings.pop(pod_name, None)
        if holding is None:
            raise InvalidInputError(pod_name, "no bound or running pod of this name")
        k = self._kernel
        self._packed.use_resources(holding.node, holding.record.resources, -1)
        k.bind(holding.node, 1000, 0, holding.cpu_milli, holding.memory_mib, holding.whole_mask, -1, 1, False)
        for gpu, (milli, mib) in holding.shares.items():
            k.bind(holding.node, milli, mib, 0, 0, 1 << gpu, -1, 0, True)

    def _apply(self, node: int, pod: PodRequest, mask: int, sign: int) -> None:
        self._packed.use_resources(node, pod.resources, sign)
        self._kernel.bind(
            node, pod.gpu_milli, pod.gpu_memory_mib, pod.cpu_milli, pod.memory_mib, mask, sign, 1, pod.shared
        )

    def _hold(self, pod: PodRequest, node: int, mask: int) -> None:
        gpus = mask_to_indices(mask)
        if pod.shared:
            gpu = gpus[0]
            record = RunningPod(
                name=pod.name,
                gpu_shares={gpu: pod.gpu_milli},
                gpu_memory_mib={gpu: pod.gpu_memory_mib} if pod.gpu_memory_mib else {},
                cpu_milli=pod.cpu_milli,
                memory_mib=pod.memory_mib,
                priority=pod.priority,
                resources=dict(pod.resources),
            )
            holding = _Holding(node, 0, {gpu: (pod.gpu_milli, pod.gpu_memory_mib)}, pod.cpu_milli, pod.memory_mib, record)
        else:
            record = RunningPod(
                name=pod.name, gpus=gpus, cpu_milli=pod.cpu_milli, memory_mib=pod.memory_mib, priority=pod.priority,
                resources=dict(pod.resources),
            )
            holding = _Holding(node, mask, {}, pod.cpu_milli, pod.memory_mib, record)
        self._holdings[pod.name] = holding

    def _misfit(self, pod: PodRequest, node: int, gpus: Sequence[int]) -> str:
        free = self.node_free(self._packed.node_names[node])
        if free.pods is not None and free.pods < 1:
            return "no pod slot left"
        if free.cpu_milli is not None and free.cpu_milli < pod.cpu_milli:
            return "Insufficient cpu"
        if free.memory_mib is not None and free.memory_mib < pod.memory_mib:
            return "Insufficient memory"
        for name, count in pod.resources.items():
            have = self._packed.extended_free.get(name)
            if have is None or have[node] < count:
                return f"Insufficient {name}"
        if len(gpus) != pod.gpus or any(not 0 <= g < len(free.gpu_milli) for g in gpus):
            return f"needs {pod.gpus} GPU index(es) on the node, got {list(gpus)}"
        for g in gpus:
            if pod.shared:
                mib = free.gpu_memory_mib[g]
                if free.gpu_milli[g] < pod.gpu_milli or (mib is not None and mib < pod.gpu_memory_mib):
                    return f"GPU {g} lacks the share"
            elif free.gpu_milli[g] != 1000:
                return f"GPU {g} is not free"
        return ""

    def replay(
        self,
        pods: Sequence[PodRequest],
        policy: str | Policy = "best-fit",
        seed: int = 0,
        workload: Workload | None = None,
    ) -> tuple[PlacementResult, np.ndarray]:
        """Place pods one at a time in order and bind them (no gangs): a trace replay.

        Parameters
        ----------
        pods : sequence of PodRequest
            The pods, in arrival order.
        policy : str or Policy
            A name in :data:`placer.policies.REGISTRY`, or its record.
        seed : int
            Seed of the ``random`` policy's stream and of the ranked policies' node order.
        workload : Workload, optional
            The target workload of the fragment measure.

        Returns
        -------
        PlacementResult, ndarray
            The result and the cluster's fragment F(M) after each pod (of ``workload``, or
            of the workload already set, or of the pods' target workload).
        """
        record = policy if isinstance(policy, Policy) else policies.get(policy)
        if workload is not None and workload is not self._workload:
            self.fragmentation(workload)
        elif self._workload is None:
            self.fragmentation(target_workload(pods))
        if record.needs_packing_guide and self._packing is None:
            self.set_packing(self.packing_guide(pods))
        self._rank = fgd_rank(self._packed.n_nodes, seed) if record.ranked else None
        trace = np.zeros(len(pods), dtype=np.float64)
        step = _Step(list(pods), list(range(1, len(pods) + 1)))
        outcome = self._place_run(step, record, np.array([seed], dtype=np.uint64), None, trace)
        assignments = []
        unschedulable = []
        for pod, node, mask, reason, nic in outcome:
            self._decided[pod.name] = pod
            if node >= 0:
                self._hold(pod, node, mask)
                assignments.append(self._assignment(pod, node, mask, nic))
            else:
                unschedulable.append(Unschedulable(pod.name, reason))
        return PlacementResult(tuple(assignments), tuple(unschedulable), ()), trace

    # ------------------------------------------------------------------ views

    def fragmentation(self, workload: Workload) -> Fragmentation:
        """The cluster's fragment F(M) now (FGD measure; ``placer.fragmentation``).

        The first call for a workload computes every node's fragment in the kernel; from
        then on each bind or release updates only its node.
        """
        if self._workload is not workload:
            names = self._packed.model_names
            types = {
                "cpu": np.array([t.cpu_milli for t in workload.types], dtype=td.BIG),
                "milli": np.array([t.gpu_milli for t in workload.types], dtype=td.INT),
                "gpus": np.array([t.num_gpu for t in workload.types], dtype=td.INT),
                "models": np.array(
                    [self._packed.model_mask(t.gpu_models, max(t.num_gpu, 1)) for t in workload.types],
                    dtype=td.MASK,
                ),
                "pop": np.array(workload.popularity, dtype=np.float64),
            }
            assert len(names) <= td.MAX_GPU_MODELS + 1
            self._node_frag = np.zeros(self._packed.n_nodes, dtype=np.float64)
            cells = self._packed.n_nodes * len(workload.types)
            self._kernel.set_workload(
                types, self._node_frag, np.zeros(cells, dtype=td.INT), np.zeros(cells, dtype=td.BIG)
            )
            self._workload = workload
        a = self._packed.arrays
        return Fragmentation(
            total=float(self._node_frag.sum()),
            idle_gpu_milli=int(a["free_milli_sum"].sum()),
            gpu_capacity_milli=int(a["gpu_count"].sum(dtype=np.int64)) * 1000,
        )

    def packing_guide(self, pods: Sequence[PodRequest]) -> PackingGuide:
        """The ``fgd-pack`` figures of a pod list on this cluster (:mod:`placer.packing`)."""
        return packing_guide(pods, self._gpus_per_model())

    def set_packing(self, guide: PackingGuide) -> None:
        """Use ``guide`` for ``fgd-pack`` from now on (default: the guide of the first
        pods placed with it)."""
        names = self._packed.model_names
        self._kernel.set_packing(
            guide.cpu_per_gpu_milli,
            np.ascontiguousarray(guide.regret, dtype=np.float64).ravel(),
            guide.pressure_by_id(names),
            REGRET_WEIGHT,
            PRESSURE_WEIGHT,
        )
        self._packing = guide

    def _gpus_per_model(self) -> dict[str, int]:
        a = self._packed.arrays
        names = self._packed.model_names
        out: dict[str, int] = {}
        for model, count in zip(a["model_id"], a["gpu_count"]):
            if count:
                out[names[model]] = out.get(names[model], 0) + int(count)
        return out

    def node_fragment(self, node: str) -> float:
        """F_n(M) of one node for the workload of the last :meth:`fragmentation` call."""
        if self._workload is None:
            raise InvalidInputError("workload", "call fragmentation(workload) first")
        return float(self._node_frag[self._packed.node_index[node]])

    def node_free(self, node: str) -> NodeFree:
        """What is free on ``node`` now."""
        i = self._packed.node_index.get(node)
        if i is None:
            raise InvalidInputError(node, "unknown node")
        a = self._packed.arrays
        p = self._packed
        g = int(a["gpu_count"][i])
        tracked_mem = p.gpu_mem_cap[i] is not None
        unhealthy = set(p.unhealthy[i])
        return NodeFree(
            cpu_milli=int(a["cpu_free"][i]) if p.cpu_cap[i] is not None else None,
            memory_mib=int(a["mem_free"][i]) if p.mem_cap[i] is not None else None,
            pods=int(a["pods_free"][i]) if p.pods_cap[i] is not None else None,
            gpu_milli=tuple(int(x) for x in a["gpu_free_milli"][i, :g]),
            gpu_memory_mib=tuple(
                (0 if k in unhealthy else int(a["gpu_free_mem"][i, k])) if tracked_mem else None for k in range(g)
            ),
        )

    def to_snapshot(self) -> ClusterSnapshot:
        """The cluster as it is now: running pods less released ones, plus bound ones."""
        per_node: list[list[RunningPod]] = [[] for _ in self._snapshot.nodes]
        for holding in self._holdings.values():
            per_node[holding.node].append(holding.record)
        nodes = tuple(
            node if tuple(pods) == node.pods else replace(node, pods=tuple(pods))
            for node, pods in zip(self._snapshot.nodes, per_node)
        )
        return replace(self._snapshot, nodes=nodes)
