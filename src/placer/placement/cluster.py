"""A cluster's placement state for a scheduler's loop: place, bind, release.

:class:`Cluster` keeps one :class:`~placer.kernel.KernelSession` (the packed state, the one
owner of what is free and of who holds what) and splits a request into steps: runs of
independent pods go to the kernel in one call, each gang to :mod:`placer.placement.gangs`. The rules
it implements are in ``docs/placement-rules.md``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence, Union

import numpy as np

from placer import policies, schema
from placer.placement import gangs
from placer.placement import order
from placer.preemption import victims as preemption
from placer.preemption import exact as preemption_exact
from placer.placement import sharing
from placer._serial import serialised
from placer.preemption.defrag import RoomFinder
from placer.model.domains import Domains
from placer.exceptions import InvalidInputError
from placer.workload.fragmentation import Fragmentation, Workload, target_workload
from placer.placement.gangs import Outcome
from placer.kernel import KernelSession, NodeFree, Run, fgd_rank
from placer.kernel.holdings import Evicted
from placer.kernel.pack import any_placed_apart, assignment, mask_to_indices, run_assignments
from placer.kernel.holdings import slot_counts
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    MigUse,
    Move,
    Node,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    Preemption,
    RoomMade,
    RunningPod,
    Unschedulable,
    load_snapshot,
    replace,
)
from placer.preemption.moves import mover_request, relocated, why_not_movable
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, PackingGuide, packing_guide
from placer.policies import Policy
from placer.model.reasons import kube_reason
from placer.schema.errors import bad

__all__ = ["Cluster", "NodeFree", "kube_reason", "fgd_rank"]

PodLike = Union[PodRequest, Mapping[str, Any]]

KEPT_DECISIONS = 4
"""Decisions kept per pod name for :meth:`Cluster.bind` (older ones are refused as stale)."""


@dataclass
class _Step:
    """A run of pods placed in one kernel call, or one gang."""

    pods: list[PodRequest]
    group_end: list[int] = field(default_factory=list)  # empty: every pod its own group
    gang: GangSpec | None = None


def _steps(pods: Sequence[PodRequest], gang_specs: Mapping[str, GangSpec]) -> list[_Step]:
    """A request's pods as steps, in order; a gang at the position of its first pod."""
    if not pods:
        return []
    if not gang_specs and not any_placed_apart(pods):
        return [_Step(list(pods), [])]  # one run, every pod its own group
    members: dict[str, list[PodRequest]] = {}
    for pod in pods:
        if pod.gang is not None:
            members.setdefault(pod.gang, []).append(pod)
    steps: list[_Step] = []
    current = _Step([])
    seen: set[str] = set()
    for pod in pods:
        if pod.gang is None and (pod.resources or pod.mig or pod.gpu_slots):
            # its filter depends on what the pods before it took (resources), or it is
            # placed by MIG instances (placer.kernel.mig) or GPU slots (placer.placement.sharing):
            # a step of its own
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
        steps.append(_Step(list(group), [len(group)] * len(group), gang_specs.get(pod.gang) or GangSpec(pod.gang)))
    if current.pods:
        steps.append(current)
    return steps


_UNFILED_BATCHES = 32  # decisions kept unfiled before they are filed by pod name


def _slot_list(a: Assignment) -> tuple[int, ...]:
    """The GPU of each slot of an assignment of ``gpuSlots`` (one per GPU listed when it
    gives no ``gpuSlots``)."""
    if not a.gpu_slots:
        return tuple(a.gpus)
    return tuple(gpu for gpu, count in sorted(a.gpu_slots.items()) for _ in range(count))


@serialised
class Cluster:
    """Placement state of one cluster.

    Safe to share between threads: every public method and property holds :attr:`lock`
    for the whole call, and so does every method of the :attr:`session` it hands out (the
    same lock), so calls run one at a time, each on the state the last one left. A
    sequence of calls that must see no other thread's change in between (place, then bind
    what was placed, say) holds the lock around them: ``with cluster.lock: ...``; so does a
    reader of the live arrays of ``session.free``.

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
        The cluster as it is now.

    Attributes
    ----------
    lock : threading.RLock
        The lock every call holds (reentrant: a thread holding it may call on).

    Examples
    --------
    >>> cluster = Cluster(snapshot)                          # doctest: +SKIP
    >>> decision = cluster.place({"name": "a", "gpus": 2})   # doctest: +SKIP
    >>> cluster.bind(decision)                               # doctest: +SKIP
    >>> cluster.release("a")                                 # doctest: +SKIP
    """

    def __init__(self, snapshot: ClusterSnapshot | Mapping[str, Any] | str) -> None:
        self._snapshot = load_snapshot(snapshot)
        self._session = KernelSession(self._snapshot)
        self.lock = self._session.lock
        self._domains = Domains(self._snapshot)
        self._facts = schema.snapshot_facts(self._snapshot, self._session.first_held)
        # pod name -> its latest decisions, newest last: (assignment, the pod as decided)
        self._decided: dict[str, list[tuple[Assignment, PodRequest]]] = {}
        # decisions not yet filed in _decided: a one-shot placement never needs them filed
        self._unfiled: list[tuple[Sequence[tuple[PodRequest, int, int]], Sequence[Assignment]]] = []
        self._varied: set[str] = set()  # pods placed with different requests over time

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The snapshot this cluster started from."""
        return self._snapshot

    @property
    def session(self) -> KernelSession:
        """The kernel session: what is free, node scores, the kernel's own placements."""
        return self._session

    @property
    def domains(self) -> Domains:
        """The topology domains of the snapshot."""
        return self._domains

    @property
    def node_names(self) -> list[str]:
        """Node names in index order."""
        return list(self._session.node_names)

    # ------------------------------------------------------------------ decisions

    def schedule(
        self,
        request: PlacementRequest | Mapping[str, Any] | str,
        *,
        policy: str | Policy | None = None,
        seed: int | None = None,
        preemption: str | None = None,
    ) -> PlacementResult:
        """Place a request's pods in order, binding each placed pod.

        This is what :func:`placer.place` does; the state keeps the placed pods.
        ``policy``, ``seed`` and ``preemption`` (a mode of
        :data:`placer.model.PREEMPTION_MODES`), when given, override the request's.
        """
        request = self._request(request, policy, seed)
        if preemption is not None:
            request = replace(request, preemption=schema.check_preemption(preemption))
        # a PlacementRequest built in Python has not been through the decoder: get() is the
        # one check of its name (a decoded request's name is a plain hit)
        return self._run(request, policies.get(request.policy), keep=True)

    def checked_request(self, request: PlacementRequest | Mapping[str, Any] | str) -> PlacementRequest:
        """``request`` decoded and checked against this cluster (its levels, the pods bound
        now), a fault named at the file and path as the document writes them."""
        return self._request(request, None, None)

    def _request(
        self, request: PlacementRequest | Mapping[str, Any] | str, policy: str | Policy | None, seed: int | None
    ) -> PlacementRequest:
        """The request checked against the snapshot, with ``policy`` and ``seed`` overriding."""
        if isinstance(request, PlacementRequest):
            schema.check_request_against_snapshot(request, self._facts)
            schema.refuse_bound(request, self._session.first_held)
        else:  # the decoder checks it against the facts, the pods bound now included
            request = schema.coerce_request(request, self._facts)
        changes: dict[str, Any] = {}
        if policy is not None:
            changes["policy"] = (policy if isinstance(policy, Policy) else policies.get(policy, "policy")).name
        if seed is not None:
            changes["seed"] = schema.check_seed(seed, "seed")
        return replace(request, **changes) if changes else request

    def preempt(
        self,
        request: PlacementRequest | Mapping[str, Any] | str,
        *,
        policy: str | Policy | None = None,
        seed: int | None = None,
    ) -> PlacementResult:
        """:meth:`schedule` with preemption on (the request's mode, ``auto`` when it says
        ``none``): victims are evicted and the preemptors bound."""
        if not isinstance(request, PlacementRequest):
            request = schema.coerce_request(request, self._facts)
        if request.preemption == "none":
            request = replace(request, preemption="auto")
        return self.schedule(request, policy=policy, seed=seed)

    def place(
        self,
        pods: PodLike | Sequence[PodLike],
        *,
        gang: GangSpec | Mapping[str, Any] | None = None,
        policy: str = policies.DEFAULT,
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
        return self._run(request, policies.REGISTRY[request.policy], keep=False)

    def node_scores(self, pod: PodLike, *, policy: str = policies.DEFAULT, seed: int = 0) -> np.ndarray:
        """Every node's score for one pod now, in :attr:`node_names` order; the state does
        not change.

        Higher is better under every policy (the policy's node choice is the highest score,
        the lowest index among equals); ``-2**63`` where the pod does not fit. Pods of MIG
        instances or ``gpuSlots`` are placed by their own searches and have no node scores
        (``InvalidInputError``); :meth:`place` them.

        Parameters
        ----------
        pod : PodRequest or dict
        policy : str
            Any name in :data:`placer.policies.REGISTRY`.
        seed : int
            Seed of the ranked policies' node order.

        Returns
        -------
        ndarray of int64
        """
        request = schema.request_for_pods(pod, None, policy, seed, self._facts)
        the_pod, chosen = self._single(request)
        self._session.prepare(chosen, request.pods, request.seed)
        return self._session.node_scores(the_pod, chosen)

    def place_on(self, pod: PodLike, node: str, *, policy: str = policies.DEFAULT, seed: int = 0) -> PlacementResult:
        """Decide the GPUs (and NICs) one pod would get on ``node``; the state does not change.

        What a scheduler needs once another component chose the node: ``policy`` chooses
        the GPU set there. :meth:`bind` takes the result. When the pod does not fit there,
        the result holds it as unschedulable with the node's reason
        (:meth:`KernelSession.node_reasons`). Pods of MIG instances or ``gpuSlots``:
        ``InvalidInputError``, as :meth:`node_scores`.
        """
        request = schema.request_for_pods(pod, None, policy, seed, self._facts)
        the_pod, chosen = self._single(request)
        index = self._session.node_index.get(node)
        if index is None:
            raise InvalidInputError("node", f"unknown node {node!r}")
        session = self._session
        session.prepare(chosen, request.pods, request.seed)
        got = session.place_on([the_pod], [index], chosen, np.array([request.seed], dtype=np.uint64))
        if got is None:
            why = kube_reason(1, {session.node_reasons(the_pod, [index])[0]: 1})
            return PlacementResult((), (Unschedulable(the_pod.name, why),), (), ())
        placed = [(the_pod, index, got[0][0])]
        assignment = self._assignment(the_pod, index, got[0][0], got[1][0])
        self._give_back(placed)
        self._remember(placed, [assignment])
        return PlacementResult((assignment,), (), (), ())

    def _single(self, request: PlacementRequest) -> tuple[PodRequest, Policy]:
        if len(request.pods) != 1:
            raise InvalidInputError("pods", f"expected one pod, got {len(request.pods)}")
        pod = request.pods[0]
        if pod.mig is not None or pod.gpu_slots:
            raise InvalidInputError(
                "pods[0]",
                "a pod of MIG instances or gpuSlots is placed with its whole request, not scored or put on a given node",
            )
        return pod, policies.REGISTRY[request.policy]

    def _run(self, request: PlacementRequest, policy: Policy, keep: bool) -> PlacementResult:
        session = self._session
        session.prepare(policy, request.pods, request.seed)
        budget_ends = time.perf_counter() + request.time_budget_s
        pods = order.by_priority(request.pods)
        if request.joint:
            pods = self._joint_order(request, policy, pods, budget_ends)
        placed, assignments, unschedulable, gang_results, preempted, evicted = self._place_in_order(
            request, policy, pods, budget_ends, learn=True, preempt=request.preemption != "none"
        )
        self._remember(placed, assignments)
        if keep:
            session.hold_all(placed)
        else:
            self._give_back(placed)
            for gone in reversed(evicted):
                session.restore(gone)
        return PlacementResult(tuple(assignments), tuple(unschedulable), tuple(gang_results), tuple(preempted))

    # ------------------------------------------------------------------ making room by moving

    def defrag(
        self,
        request: PlacementRequest | Mapping[str, Any] | str,
        *,
        max_moves: int | None = None,
        policy: str | Policy | None = None,
        seed: int | None = None,
    ) -> PlacementResult:
        """Place a request's pods in order, moving ``movable`` running pods where that makes
        a pod fit (:mod:`placer.preemption.defrag`); the state does not change.

        Each pod that fits is placed as :meth:`place` would. A pod that does not gets the
        fewest moves (then the least GPU milli moved) after which it fits, within what is
        left of ``max_moves``; its assignment is ``nominated``, the moves are listed in
        order in ``moves`` and the search's outcome in ``rooms`` (also for a pod no moves
        helped). A running pod moves at most once per call.

        Parameters
        ----------
        request : PlacementRequest, dict or path
            Single pods of whole or shared GPUs, or of none (no gang, MIG or GPU slots).
        max_moves : int, optional
            Moves allowed for the whole request (default: no limit).
        policy, seed : optional
            Override the request's, as in :meth:`schedule`.

        Returns
        -------
        PlacementResult
            Make it real with :meth:`move` (``result.moves``), then :meth:`bind`.
        """
        request = self._request(request, policy, seed)
        if max_moves is not None and (isinstance(max_moves, bool) or not isinstance(max_moves, int) or max_moves < 0):
            raise bad("max_moves", "a count of moves (an integer >= 0)", max_moves)
        odd = next((i for i, p in enumerate(request.pods) if p.gang is not None or p.mig is not None or p.gpu_slots), None)
        if odd is not None:
            raise InvalidInputError(
                f"pods[{odd}]", "defrag places single pods of whole or shared GPUs: no gang, MIG or GPU slots"
            )
        record = policies.get(request.policy)
        session = self._session
        session.prepare(record, request.pods, request.seed)
        rng = np.array([request.seed], dtype=np.uint64)
        rank = fgd_rank(session.n_nodes, request.seed) if record.ranked else np.arange(session.n_nodes)
        finder = RoomFinder(session, self._snapshot.nodes, record, rng, rank.tolist())
        budget = max_moves if max_moves is not None else sum(1 for _, p in session.running() if p.movable)
        placed: list[tuple[PodRequest, int, int]] = []
        fitted: list[tuple[PodRequest, int, int]] = []  # placed without moves (the finder undoes the others)
        assignments: list[Assignment] = []
        unschedulable: list[Unschedulable] = []
        moves: list[Move] = []
        rooms: list[RoomMade] = []
        try:
            for pod in order.by_priority(request.pods):
                run = session.place([pod], record, rng)
                if run.nodes[0] >= 0:
                    fitted.append((pod, run.nodes[0], run.masks[0]))
                    placed.append(fitted[-1])
                    assignments.append(self._assignment(pod, run.nodes[0], run.masks[0], run.nics[0]))
                    continue
                room = finder.make_room(pod, budget - len(moves))
                rooms.append(RoomMade(pod.name, len(room.moves), room.milli_moved, room.status or "feasible"))
                if room.node < 0:
                    unschedulable.extend(gangs.run_failures(session, [pod], run))
                    continue
                moves.extend(
                    Move(m.name, session.node_names[m.source], session.node_names[m.target], m.gpus,
                         next(iter(m.record.gpu_shares.values()), None), pod.name)
                    for m in room.moves
                )
                placed.append((pod, room.node, room.mask))
                assignments.append(replace(self._assignment(pod, room.node, room.mask, room.nic_mask), nominated=True))
        finally:
            finder.undo()
            self._give_back(fitted)
        self._remember(placed, assignments)
        return PlacementResult(tuple(assignments), tuple(unschedulable), (), (), tuple(moves), tuple(rooms))

    def move(self, moves: Sequence[Move]) -> None:
        """Make moves real, in order, all or nothing: each pod leaves ``from`` and holds
        what it held on ``to``, on GPUs ``gpus``.

        Raises :class:`InvalidInputError` (at ``moves[k]``) when a pod does not run on
        ``from``, may not move (:func:`placer.preemption.moves.why_not_movable`), or does not fit on
        ``to`` at its turn (its GPU model, the taints it tolerates, room); then nothing
        moved.
        """
        if isinstance(moves, (str, bytes, Mapping)) or not hasattr(moves, "__iter__"):
            raise bad("moves", "a list of Moves", moves)
        session = self._session
        where = {record.name: (node, record) for node, record in session.running()}
        done: list[tuple[str, Evicted]] = []
        try:
            for k, m in enumerate(moves):
                if not isinstance(m, Move):
                    raise bad(f"moves[{k}]", "a Move", m)
                found = where.get(m.pod)
                source, target = session.node_index.get(m.from_), session.node_index.get(m.to)
                if found is None or found[0] != source:
                    raise InvalidInputError(f"moves[{k}]", f"pod {m.pod!r} does not run on {m.from_!r}")
                if target is None:
                    raise InvalidInputError(f"moves[{k}]", f"unknown node {m.to!r}")
                record = found[1]
                why = why_not_movable(record)
                if why:
                    raise InvalidInputError(f"moves[{k}]", f"pod {m.pod!r} may not move: {why}")
                mover = mover_request(record, self._snapshot.nodes[source])
                gone = session.evict(m.pod)
                done.append((m.pod, gone))
                problem = "" if session.eligibility(mover)[0][target] else "its node's GPU model or taints"
                problem = problem or session.misfit(mover, target, m.gpus)
                if problem:
                    raise InvalidInputError(f"moves[{k}]", f"pod {m.pod!r} does not fit on {m.to}: {problem}")
                moved = relocated(record, m.gpus) if m.gpus else record
                session.restore(Evicted(m.pod, target, moved))
                where[m.pod] = (target, moved)
        except InvalidInputError:
            for name, gone in reversed(done):
                if session.holds(name):
                    session.release(name)
                session.restore(gone)
            raise

    def _place_in_order(
        self, request: PlacementRequest, policy: Policy, pods: Sequence[PodRequest], budget_ends: float | None,
        learn: bool = False, preempt: bool = False,
    ) -> tuple[
        list[tuple[PodRequest, int, int]], list[Assignment], list[Unschedulable], list[GangResult], list[Preemption],
        list[Evicted],
    ]:
        """Place ``pods`` in this order (held in the session); ``budget_ends`` None: greedy only.
        ``learn``: the pods arrive (a learning ``fgd-pack`` guide counts them). ``preempt``: a
        pod that does not fit evicts lower-priority pods when that makes it fit
        (:mod:`placer.preemption.victims`); returns the preemptions and what was evicted, in order."""
        session = self._session
        rng = np.array([request.seed], dtype=np.uint64)
        assignments: list[Assignment] = []
        unschedulable: list[Unschedulable] = []
        gang_results: list[GangResult] = []
        placed: list[tuple[PodRequest, int, int]] = []
        preempted: list[Preemption] = []
        evicted: list[Evicted] = []
        for step in _steps(pods, request.gangs):
            if step.gang is not None:
                left = 0.0 if budget_ends is None else budget_ends - time.perf_counter()
                if learn and policy.needs_packing_guide:
                    session.refresh_packing()
                outcome, gang_result = gangs.place_gang_step(
                    session, self._domains, step.pods, step.gang, policy, rng, request.solver, request.time_limit_s,
                    left,
                )
                if learn and policy.needs_packing_guide:
                    session.observe(step.pods)
                if preempt and not gang_result.placed:
                    outcome, gang_result = self._preempt_gang(
                        step.pods, step.gang, policy, rng, request, outcome, gang_result, preempted, evicted
                    )
                gang_results.append(gang_result)
                self._collect(outcome, placed, assignments, unschedulable)
                if gang_result.placed and preempted and preempted[-1].for_ == step.gang.name:
                    first = len(assignments) - len(step.pods)
                    assignments[first:] = [replace(a, nominated=True) for a in assignments[first:]]
            elif step.pods[0].mig is not None:
                pod = step.pods[0]
                found = session.place_mig(pod, policy)
                if isinstance(found, dict):
                    unschedulable.append(Unschedulable(pod.name, kube_reason(session.n_nodes, found)))
                else:
                    placed.append((pod, found[0], 0))
                    assignments.append(self._assignment(pod, found[0], 0, 0))
            elif step.pods[0].gpu_slots:
                self._place_slots(step.pods[0], policy, rng, placed, assignments, unschedulable)
            else:
                run = session.place(step.pods, policy, rng, step.group_end or None, learn=learn)
                failed_from = len(unschedulable)
                self._collect_run(step.pods, run, placed, assignments, unschedulable)
                if preempt and len(unschedulable) > failed_from:
                    self._preempt_for(step.pods, policy, rng, failed_from, placed, assignments, unschedulable,
                                      preempted, evicted, request.preemption)
        return placed, assignments, unschedulable, gang_results, preempted, evicted

    def _preempt_gang(
        self,
        pods: Sequence[PodRequest],
        spec: GangSpec,
        policy: Policy,
        rng: np.ndarray,
        request: PlacementRequest,
        outcome: list[Outcome],
        result: GangResult,
        preempted: list[Preemption],
        evicted: list[Evicted],
    ) -> tuple[list[Outcome], GangResult]:
        """A gang that did not fit evicts the victims of the best domain of its level
        (:func:`placer.preemption.victims.gang_candidates`) and is placed inside it; when no domain
        works, its outcome stays as it was."""
        session = self._session
        if any(pod.preemption_policy == "Never" for pod in pods):
            return outcome, result
        h = self._domains.hierarchy()
        levels, shapes = self._preemption_problem(pods, spec)
        exact_first = request.preemption == "exact" or (request.preemption == "auto" and len(pods) > 1)
        for level in levels:
            found, ranks, _ = preemption.gang_candidates(session, self._snapshot, h, pods, level, shapes)
            plans = [(c.victims, c.nodes, "greedy", "feasible") for c in found]
            if exact_first and found:
                best = preemption_exact.solve_preemption(
                    session, self._snapshot, h, pods, level, shapes, request.time_limit_s
                )
                if best is not None and best.status in ("optimal", "feasible"):
                    scope = np.ones(session.n_nodes, dtype=bool) if level < 0 else (h.ids[level] == best.domain)
                    plans.insert(0, (best.victims, scope, "cp-sat", best.status))
            for victims, scope, solver, status in plans:
                gone = preemption.evict(session, victims)
                tried, tried_result = gangs.place_gang_step(
                    session, self._domains, pods, spec, policy, rng, request.solver, request.time_limit_s, 0.0
                )
                if tried_result.placed and all(scope[o[1]] for o in tried):
                    evicted.extend(gone)
                    names = [name for unit in victims for name in unit.names]
                    nodes = sorted({session.node_names[n] for unit in victims for n, _ in unit.pods})
                    overdraft = ranks.overdraft([p for unit in victims for _, p in unit.pods])
                    preempted.append(Preemption(spec.name, tuple(names), tuple(nodes), overdraft, solver, status))
                    return tried, tried_result
                if tried_result.placed:
                    gangs.release(session, pods, [o[1] for o in tried], [o[2] for o in tried])
                for g in reversed(gone):
                    session.restore(g)
        return outcome, result

    def _preempt_for(
        self,
        pods: Sequence[PodRequest],
        policy: Policy,
        rng: np.ndarray,
        failed_from: int,
        placed: list[tuple[PodRequest, int, int]],
        assignments: list[Assignment],
        unschedulable: list[Unschedulable],
        preempted: list[Preemption],
        evicted: list[Evicted],
        mode: str,
    ) -> None:
        """Each pod of a run that did not fit, in order, evicts the victims
        :func:`placer.preemption.victims.choose` picks (kube's rules; ``exact``: CP-SAT's) and is
        placed on their node (``nominated``); a pod no preemption helps keeps its reason."""
        session = self._session
        by_name = {pod.name: pod for pod in pods}
        still: list[Unschedulable] = []
        for u in unschedulable[failed_from:]:
            pod = by_name[u.pod]
            solver, status = "greedy", "feasible"
            best, _ = preemption.choose(session, self._snapshot, pod)
            if best is not None and mode == "exact":
                exact = self._exact_for_pod(pod)
                if exact is not None:
                    best, status, solver = exact[0], exact[1], "cp-sat"
            if best is None:
                still.append(u)
                continue
            gone = preemption.evict(session, best.victims)
            fitted = session.place_on([pod], [best.node], policy, rng)
            if fitted is None:  # pragma: no cover - the candidate check mirrors the kernel's fit
                for g in reversed(gone):
                    session.restore(g)
                still.append(u)
                continue
            masks, nics = fitted
            evicted.extend(gone)
            placed.append((pod, best.node, masks[0]))
            assignments.append(replace(self._assignment(pod, best.node, masks[0], nics[0]), nominated=True))
            victims = [name for unit in best.victims for name in unit.names]
            nodes = sorted({session.node_names[n] for unit in best.victims for n, _ in unit.pods})
            preempted.append(Preemption(pod.name, tuple(victims), tuple(nodes), best.pdb_violations, solver, status))
        del unschedulable[failed_from:]
        unschedulable.extend(still)

    def _preemption_problem(
        self, pods: Sequence[PodRequest], spec: GangSpec
    ) -> tuple[list[int], list[tuple[PodRequest, int, np.ndarray]]]:
        """The levels a gang's victims are sought at (-1: the whole cluster), and its shapes
        as (pod, count, allowed nodes)."""
        session = self._session
        h = self._domains.hierarchy()
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

    def preemption_hint(self, pods: Sequence[PodRequest], spec: GangSpec | None = None) -> str:
        """What preemption would do for a pending pod (or gang ``spec``) now, in words:
        "would fit after preempting …", or "" when no preemption helps. Nothing changes."""
        session = self._session
        if any(pod.preemption_policy == "Never" for pod in pods):
            return ""
        if spec is None:
            best, _ = preemption.choose(session, self._snapshot, pods[0])
            if best is None:
                return ""
            where, victims, violations = session.node_names[best.node], best.victims, best.pdb_violations
        else:
            levels, shapes = self._preemption_problem(pods, spec)
            h = self._domains.hierarchy()
            found: list[preemption.GangCandidate] = []
            for level in levels:
                found, ranks, _ = preemption.gang_candidates(session, self._snapshot, h, pods, level, shapes)
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

    def _exact_for_pod(self, pod: PodRequest) -> tuple[preemption.Candidate, str] | None:
        """CP-SAT's node and victims for one pod (the node level is its domain), or None
        when CP-SAT does not model the pod or found nothing."""
        session = self._session
        h = self._domains.hierarchy()
        allowed, model_mask = session.eligibility(pod)
        if pod.gpus:
            model_ok = ((model_mask >> session.free.model_id.astype(np.uint64)) & 1).astype(bool)
            allowed = allowed & model_ok & (session.free.gpu_memory_capacity >= pod.gpu_memory_mib)
        found = preemption_exact.solve_preemption(
            session, self._snapshot, h, [pod], h.levels.index("node"), [(pod, 1, allowed)]
        )
        if found is None or found.status not in ("optimal", "feasible") or found.domain < 0:
            return None
        node = int(np.flatnonzero(h.ids[-1] == found.domain)[0])
        pods = [p for unit in found.victims for _, p in unit.pods]
        violations = preemption.Ranks.of(self._snapshot, list(session.running()), found.victims).overdraft(pods)
        return preemption.Candidate(node, found.victims, violations), found.status

    def _place_slots(
        self,
        pod: PodRequest,
        policy: Policy,
        rng: np.ndarray,
        placed: list[tuple[PodRequest, int, int]],
        assignments: list[Assignment],
        unschedulable: list[Unschedulable],
    ) -> None:
        """Place one pod of ``gpuSlots`` (:func:`placer.placement.sharing.place_slot_pod`)."""
        got = sharing.place_slot_pod(self._session, pod, policy, rng)
        if isinstance(got, str):
            unschedulable.append(Unschedulable(pod.name, got))
            return
        mask = 0
        for gpu in got.gpus:
            mask |= 1 << gpu
        placed.append((pod, got.node, mask))
        assignments.append(self._assignment(pod, got.node, mask, 0))

    def _remember(self, placed: Sequence[tuple[PodRequest, int, int]], assignments: Sequence[Assignment]) -> None:
        """Keep each decision with the pod as it was decided, for :meth:`bind`."""
        if placed:
            self._unfiled.append((placed, assignments))
            if len(self._unfiled) > _UNFILED_BATCHES:  # a long-lived cluster: keep memory bounded
                self._file_decisions()

    def _file_decisions(self) -> None:
        for placed, assignments in self._unfiled:
            for (pod, _, _), a in zip(placed, assignments):
                kept = self._decided.setdefault(pod.name, [])
                if kept and kept[-1][1] != pod:
                    self._varied.add(pod.name)
                kept.append((a, pod))
                del kept[:-KEPT_DECISIONS]
        self._unfiled.clear()

    def _decision(self, a: Assignment) -> PodRequest:
        """The pod as decided by the :meth:`place` that returned ``a``, or, for an assignment
        made elsewhere, the pod as every decision of it asked (refused when they differ)."""
        self._file_decisions()
        kept = self._decided.get(a.pod)
        if not kept:
            raise InvalidInputError(a.pod, "not decided by this cluster's place(); nothing to bind")
        for decided, pod in reversed(kept):
            if decided is a:
                return pod
        if a.pod not in self._varied:
            return kept[-1][1]
        raise InvalidInputError(
            a.pod,
            f"stale decision: the pod was placed with different requests, and this is not one of the "
            f"{len(kept)} latest place() decisions; bind what place() returned, or place the pod again",
        )

    def _give_back(self, placed: list[tuple[PodRequest, int, int]]) -> None:
        for pod, node, mask in reversed(placed):
            self._session.give_back(pod, node, mask)

    def _joint_order(
        self, request: PlacementRequest, policy: Policy, pods: Sequence[PodRequest], budget_ends: float
    ) -> list[PodRequest]:
        """The order :func:`placer.placement.order.search_order` finds, each order placed by the greedy
        alone, within the first half of the request's time budget."""

        def placed_by(units: list[list[PodRequest]]) -> set[str]:
            placed = self._place_in_order(request, policy, [p for u in units for p in u], None)[0]
            self._give_back(placed)
            return {pod.name for pod, _, _ in placed}

        deadline = budget_ends - request.time_budget_s / 2
        found = order.search_order(order.units(pods), placed_by, deadline)
        return [pod for unit in found for pod in unit]

    def _collect(
        self,
        outcome: list[Outcome],
        placed: list[tuple[PodRequest, int, int]],
        assignments: list[Assignment],
        unschedulable: list[Unschedulable],
    ) -> None:
        for pod, node, mask, reason, nic_mask in outcome:
            if node >= 0:
                placed.append((pod, node, mask))
                assignments.append(self._assignment(pod, node, mask, nic_mask))
            else:
                unschedulable.append(Unschedulable(pod.name, reason))

    def _assignment(self, pod: PodRequest, node: int, mask: int, nic_mask: int) -> Assignment:
        name = self._session.node_names[node]
        if pod.gpu_slots:
            counts = slot_counts(self._session.slot_list(pod.name))
            return Assignment(pod.name, name, tuple(counts), None, pod.gang, gpu_slots=counts)
        if not nic_mask and pod.mig is None:  # the common case: no NIC or MIG lookups
            return assignment(pod, name, mask)
        share = pod.gpu_milli if pod.gpus == 1 and pod.gpu_milli < 1000 else None
        return Assignment(
            pod.name,
            name,
            mask_to_indices(mask),
            share,
            pod.gang,
            self._session.nic_names(node, nic_mask) if nic_mask else (),
            self._session.mig_uses(pod.name) if pod.mig is not None else (),
        )

    def _collect_run(
        self,
        pods: Sequence[PodRequest],
        run: Run,
        placed: list[tuple[PodRequest, int, int]],
        assignments: list[Assignment],
        unschedulable: list[Unschedulable],
    ) -> None:
        failed: list[int] = []
        if any(run.nics):
            for j, (pod, node, mask, nic_mask) in enumerate(zip(pods, run.nodes, run.masks, run.nics)):
                if node < 0:
                    failed.append(j)
                    continue
                placed.append((pod, node, mask))
                assignments.append(self._assignment(pod, node, mask, nic_mask))
        else:  # the common run: no NIC lookups (its pods hold no MIG instances or slots)
            done, made, failed = run_assignments(pods, run.nodes, run.masks, self._session.node_names)
            placed.extend(done)
            assignments.extend(made)
        if failed:
            unschedulable.extend(gangs.run_failures(self._session, pods, run, failed))

    # ------------------------------------------------------------------ state changes

    def bind(self, placement: PlacementResult | Assignment | Iterable[Assignment]) -> None:
        """Make decisions real: hold each assignment's resources on its node, all or nothing.

        The pods must come from an earlier :meth:`place` (or :meth:`schedule`) of this
        cluster. A decision binds the pod as that call decided it: when the pod was placed
        again since, an older decision still binds what it decided while it is one of the
        pod's last :data:`KEPT_DECISIONS` decisions. An assignment made elsewhere (a copy,
        or other GPUs of the caller's choice) binds the pod as placed, unless the pod was
        placed with different requests: then it is refused as stale, as are decisions
        older than the kept ones. Raises :class:`InvalidInputError` when a pod is already
        bound, unknown, stale, or no longer fits; then nothing is bound.
        """
        if isinstance(placement, PlacementResult):
            items: Iterable[Assignment] = placement.assignments
        elif isinstance(placement, Assignment):
            items = (placement,)
        elif isinstance(placement, Iterable) and not isinstance(placement, (str, bytes, Mapping)):
            items = list(placement)
            for i, a in enumerate(items):
                if not isinstance(a, Assignment):
                    raise bad(f"placement[{i}]", "an Assignment", a)
        else:
            raise bad("placement", "a PlacementResult, an Assignment or a list of Assignments", placement)
        work: list[tuple[PodRequest, int, Sequence[int], Sequence[MigUse]]] = []
        seen: set[str] = set()
        for a in items:
            pod = self._decision(a)
            if self._session.holds(a.pod) or a.pod in seen:
                raise InvalidInputError(a.pod, "pod is already bound")
            node = self._session.node_index.get(a.node)
            if node is None:
                raise InvalidInputError(a.pod, f"unknown node {a.node!r}")
            seen.add(a.pod)
            work.append((pod, node, _slot_list(a) if pod.gpu_slots else a.gpus, a.mig))
        problem = self._session.bind_all(work)
        if problem is not None:
            raise InvalidInputError(*problem)

    def release(self, pod_name: str) -> None:
        """Give back everything a bound or running pod holds."""
        if not isinstance(pod_name, str):
            raise bad("pod_name", "a pod name", pod_name)
        self._session.release(pod_name)

    def replay(
        self,
        pods: Sequence[PodRequest],
        policy: str | Policy = policies.DEFAULT,
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
            The target workload of the fragment measure; ``fgd-pack`` also starts its
            guide from it when none is set (:meth:`learn_packing`).

        Returns
        -------
        PlacementResult, ndarray
            The result and the cluster's fragment F(M) after each pod (of ``workload``, or
            of the workload already set, or of the pods' target workload).

        Without a guide set and without a workload told (here or by :meth:`fragmentation`),
        ``fgd-pack`` starts from what the cluster holds and learns from the pods as they
        come: no pod is placed with figures read from itself or the pods after it.
        """
        record = policy if isinstance(policy, Policy) else policies.get(policy)
        special = next((i for i, pod in enumerate(pods) if pod.mig is not None or pod.gpu_slots), None)
        if special is not None:
            raise InvalidInputError(
                f"pods[{special}]", "replay takes whole and shared GPU pods; place MIG and GPU-slot pods with schedule()"
            )
        session = self._session
        if workload is not None:
            session.fragmentation(workload)
        elif session.workload is None:
            session.fragmentation(target_workload(pods), told=False)
        session.prepare(record, pods, seed)
        trace = np.zeros(len(pods), dtype=np.float64)
        run = session.place(pods, record, np.array([seed], dtype=np.uint64), trace=trace, learn=True)
        assignments: list[Assignment] = []
        unschedulable: list[Unschedulable] = []
        placed: list[tuple[PodRequest, int, int]] = []
        self._collect_run(pods, run, placed, assignments, unschedulable)
        self._remember(placed, assignments)
        session.hold_all(placed)
        return PlacementResult(tuple(assignments), tuple(unschedulable), ()), trace

    # ------------------------------------------------------------------ views

    def fragmentation(self, workload: Workload) -> Fragmentation:
        """The cluster's fragment F(M) now (FGD measure; ``placer.workload.fragmentation``).

        The first call for a workload computes every node's fragment in the kernel; from
        then on each bind or release updates only its node.
        """
        return self._session.fragmentation(workload)

    def packing_guide(self, pods: Sequence[PodRequest]) -> PackingGuide:
        """The ``fgd-pack`` figures of a pod list on this cluster (:meth:`PackingGuide.from_pods`)."""
        return packing_guide(pods, self._session.gpus_per_model())

    def set_packing_weights(self, regret: float = REGRET_WEIGHT, pressure: float = PRESSURE_WEIGHT) -> None:
        """Weigh ``fgd-pack``'s regret and model-pressure terms otherwise than by default
        (:data:`placer.workload.packing.REGRET_WEIGHT`, :data:`placer.workload.packing.PRESSURE_WEIGHT`),
        e.g. to sweep them.

        Raises
        ------
        InvalidInputError
            A weight that is not a finite number >= 0.
        """
        for where, value in (("regretWeight", regret), ("pressureWeight", pressure)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise InvalidInputError(where, f"expected a finite number >= 0, got {value!r}")
        self._session.set_packing_weights(regret, pressure)

    def set_packing(self, guide: PackingGuide) -> None:
        """Use ``guide`` for ``fgd-pack`` from now on, fixed (default: :meth:`learn_packing`
        when ``fgd-pack`` is first used)."""
        self._session.set_packing(guide)

    def learn_packing(self, workload: Workload | None = None) -> PackingGuide:
        """Let ``fgd-pack`` learn its guide from the pods it is asked to place.

        The guide starts from ``workload`` (:meth:`PackingGuide.from_workload`, weighted as
        :data:`placer.workload.packing.PRIOR_PODS` pods) and the pods the cluster holds — only
        these without a workload — and is refreshed every
        :data:`placer.workload.packing.REFRESH_PODS` pods that ``fgd-pack`` is asked to place
        (:meth:`schedule`, :meth:`place`, :meth:`replay`; each pod name counts once),
        before the next pod. This is what ``fgd-pack`` does when no guide is set, with
        the workload given to :meth:`fragmentation` or :meth:`replay`, if any.

        Returns
        -------
        PackingGuide
            The starting guide.
        """
        return self._session.learn_packing(workload)

    @property
    def packing(self) -> PackingGuide | None:
        """The guide ``fgd-pack`` uses now (None before it is set or first used)."""
        return self._session.packing

    def node_fragment(self, node: str) -> float:
        """F_n(M) of one node for the workload of the last :meth:`fragmentation` call."""
        return self._session.node_fragment(self._index(node))

    def node_free(self, node: str) -> NodeFree:
        """What is free on ``node`` now."""
        return self._session.node_free(self._index(node))

    def _index(self, node: str) -> int:
        if not isinstance(node, str):
            raise bad("node", "a node name", node)
        i = self._session.node_index.get(node)
        if i is None:
            raise InvalidInputError(node, "unknown node")
        return i

    def to_snapshot(self) -> ClusterSnapshot:
        """The cluster as it is now: running pods less released ones, plus bound ones."""
        per_node: list[list[RunningPod]] = [[] for _ in self._snapshot.nodes]
        for node, record in self._session.running():
            per_node[node].append(record)
        session = self._session
        nodes: tuple[Node, ...] = tuple(
            node if tuple(pods) == node.pods and node.hardware.mig is None
            else replace(node, pods=tuple(pods), mig_instances=session.mig_instances(i))
            if node.hardware.mig is not None
            else replace(node, pods=tuple(pods))
            for i, (node, pods) in enumerate(zip(self._snapshot.nodes, per_node))
        )
        return replace(self._snapshot, nodes=nodes)
