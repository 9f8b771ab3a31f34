"""A request placed in steps: runs of independent pods in one kernel call, each gang to
:mod:`placer.placement.gangs`, a pod of MIG instances or GPU slots to its own search.

:func:`run_request` is what :meth:`placer.placement.cluster.Cluster.schedule` and
:meth:`~placer.placement.cluster.Cluster.place` do: the pods in priority order (or the
joint order :mod:`placer.placement.order` searches), a pod that does not fit preempting
when the request says so (:mod:`placer.placement.preempting`). The rules are in
``docs/placement-rules.md``.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.kernel.pack import any_placed_apart
from placer.model import GangSpec, PlacementRequest, PlacementResult, PodRequest, Unschedulable, replace
from placer.model.interpod import has_relations
from placer.model.reasons import kube_reason
from placer.placement import gangs, kube_scores, order, sharing
from placer.placement.preempting import preempt_for, preempt_gang
from placer.placement.state import ClusterState
from placer.placement.tally import Placed, Tally
from placer.policies import Policy
from placer.workload.fragmentation import Workload, target_workload

__all__ = ["Step", "steps", "run_request", "replay_pods", "give_back"]


@dataclass
class Step:
    """A run of pods placed in one kernel call, or one gang."""

    pods: list[PodRequest]
    group_end: list[int] = field(default_factory=list)  # empty: every pod its own group
    gang: GangSpec | None = None


def steps(pods: Sequence[PodRequest], gang_specs: Mapping[str, GangSpec]) -> list[Step]:
    """A request's pods as steps, in order; a gang at the position of its first pod."""
    if not pods:
        return []
    if not gang_specs and not any_placed_apart(pods) and not any(pod.host_ports for pod in pods):
        return [Step(list(pods), [])]  # one run, every pod its own group
    members: dict[str, list[PodRequest]] = {}
    for pod in pods:
        if pod.gang is not None:
            members.setdefault(pod.gang, []).append(pod)
    out: list[Step] = []
    current = Step([])
    seen: set[str] = set()
    for pod in pods:
        if pod.gang is None and (pod.resources or pod.host_ports or pod.mig or pod.gpu_slots):
            # its filter depends on what the pods before it took (resources, host ports), or it is
            # placed by MIG instances (placer.kernel.mig) or GPU slots (placer.placement.sharing):
            # a step of its own
            if current.pods:
                out.append(current)
            out.append(Step([pod], [1]))
            current = Step([])
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
            out.append(current)
            current = Step([])
        out.append(Step(list(group), [len(group)] * len(group), gang_specs.get(pod.gang) or GangSpec(pod.gang)))
    if current.pods:
        out.append(current)
    return out


def give_back(session: KernelSession, placed: Sequence[Placed]) -> None:
    """Give back what ``placed`` holds in the session, last first."""
    session.give_back_all(placed)


def run_request(state: ClusterState, request: PlacementRequest, policy: Policy, keep: bool) -> PlacementResult:
    """Place a checked request's pods under ``policy`` (the record of ``request.policy``).

    ``keep``: the placed pods stay held (and the victims of preemption evicted); else the
    state is as before the call. Either way every decision is kept for
    :func:`placer.placement.binding.bind`.
    """
    session = state.session
    _refuse_unmodelled(session, request)
    session.prepare(policy, request.pods, request.seed)
    budget_ends = time.perf_counter() + request.time_budget_s
    pods = order.by_priority(request.pods)
    if request.joint:
        pods = _joint_order(state, request, policy, pods, budget_ends)
    tally = _place_in_order(state, request, policy, pods, budget_ends, learn=True, preempt=request.preemption != "none")
    state.book.remember(tally.placed, tally.assignments)
    if keep:
        session.hold_all(tally.placed)
    else:
        give_back(session, tally.placed)
        for gone in reversed(tally.evicted):
            session.restore(gone)
    return tally.result()


def _refuse_unmodelled(session: KernelSession, request: PlacementRequest) -> None:
    """Refuse, before anything is placed, what no path models: a gang with inter-pod rules
    under ``solver: exact``, a MIG or ``gpuSlots`` pod with inter-pod rules of its own."""
    members: dict[str, list[PodRequest]] = {}
    for i, pod in enumerate(request.pods):
        if pod.gang is not None:
            members.setdefault(pod.gang, []).append(pod)
        if pod.host_ports and (pod.gang is not None or pod.mig is not None or pod.gpu_slots):
            what = f"is a member of gang {pod.gang}" if pod.gang is not None else (
                f"asks for {'MIG instances' if pod.mig else 'gpuSlots'}")
            raise InvalidInputError(
                f"pods[{i}].hostPorts", f"pod {pod.name} has host ports and {what}: placer places pods with "
                "host ports one at a time, with whole or shared GPUs or none",
            )
        if (pod.mig is not None or pod.gpu_slots) and has_relations(pod):
            raise InvalidInputError(
                f"pods[{i}]", f"pod {pod.name} asks for {'MIG instances' if pod.mig else 'gpuSlots'} and has inter-pod "
                "affinity or topology spread rules: placer places such pods only with whole or shared GPUs",
            )
    for name, pods in members.items():
        gangs.refuse_exact_with_relations(session, pods, request.gangs.get(name) or GangSpec(name), request.solver)


def _joint_order(
    state: ClusterState, request: PlacementRequest, policy: Policy, pods: Sequence[PodRequest], budget_ends: float
) -> list[PodRequest]:
    """The order :func:`placer.placement.order.search_order` finds, each order placed by the greedy
    alone, within the first half of the request's time budget."""

    def placed_by(units: list[list[PodRequest]]) -> set[str]:
        placed = _place_in_order(state, request, policy, [p for u in units for p in u], None).placed
        give_back(state.session, placed)
        return {pod.name for pod, _, _ in placed}

    deadline = budget_ends - request.time_budget_s / 2
    found = order.search_order(order.units(pods), placed_by, deadline)
    return [pod for unit in found for pod in unit]


def _place_in_order(
    state: ClusterState, request: PlacementRequest, policy: Policy, pods: Sequence[PodRequest],
    budget_ends: float | None, learn: bool = False, preempt: bool = False,
) -> Tally:
    """Place ``pods`` in this order (held in the session); ``budget_ends`` None: greedy only.
    ``learn``: the pods arrive (a learning ``fgd-pack`` guide counts them). ``preempt``: a
    pod that does not fit evicts lower-priority pods when that makes it fit
    (:mod:`placer.placement.preempting`); the tally lists the preemptions and what was evicted."""
    session = state.session
    rng = np.array([request.seed], dtype=np.uint64)
    tally = Tally()
    for step in steps(pods, request.gangs):
        if step.gang is not None:
            left = 0.0 if budget_ends is None else budget_ends - time.perf_counter()
            if learn and policy.needs_packing_guide:
                session.refresh_packing()
            outcome, gang_result = gangs.place_gang_step(
                session, state.domains, step.pods, step.gang, policy, rng, request.solver, request.time_limit_s, left,
            )
            if learn and policy.needs_packing_guide:
                session.observe(step.pods)
            if preempt and not gang_result.placed:
                outcome, gang_result = preempt_gang(
                    state, step.pods, step.gang, policy, rng, request, outcome, gang_result, tally
                )
            tally.gang_results.append(gang_result)
            tally.add_outcome(session, outcome)
            if gang_result.placed and tally.preempted and tally.preempted[-1].for_ == step.gang.name:
                first = len(tally.assignments) - len(step.pods)
                tally.assignments[first:] = [replace(a, nominated=True) for a in tally.assignments[first:]]
        elif step.pods[0].mig is not None:
            pod = step.pods[0]
            turned_away = session.inter_pod_failures(pod)
            found = session.place_mig(pod, policy, _outside(session.n_nodes, turned_away))
            if isinstance(found, dict) and turned_away:
                found = {**found, **Counter(turned_away.values())}
            if isinstance(found, dict):
                tally.unschedulable.append(Unschedulable(pod.name, kube_reason(session.n_nodes, found)))
            else:
                tally.add(session, pod, found[0], 0)
        elif step.pods[0].gpu_slots:
            _place_slots(session, step.pods[0], policy, rng, tally)
        elif policy.kube_scoring is not None:
            strategy = kube_scores.fit_strategy(policy, request.scoring_strategy)
            for pod in step.pods:
                if not _place_by_kube_scores(session, pod, policy, rng, tally, strategy):
                    _place_run(state, request, policy, [pod], rng, tally, None, learn, preempt)
        else:
            _place_run(state, request, policy, step.pods, rng, tally, step.group_end or None, learn, preempt)
    return tally


def _place_run(
    state: ClusterState, request: PlacementRequest, policy: Policy, pods: list[PodRequest], rng: np.ndarray,
    tally: Tally, groups: list[int] | None, learn: bool, preempt: bool,
) -> None:
    """Place a run of pods in one kernel call; those that do not fit preempt when asked to."""
    run = state.session.place(pods, policy, rng, groups, learn=learn)
    failed_from = len(tally.unschedulable)
    tally.add_run(state.session, pods, run)
    if preempt and len(tally.unschedulable) > failed_from:
        preempt_for(state, pods, policy, rng, failed_from, tally, request.preemption)


def _place_by_kube_scores(
    session: KernelSession, pod: PodRequest, policy: Policy, rng: np.ndarray, tally: Tally,
    strategy: kube_scores.FitStrategy | None = None,
) -> bool:
    """Place ``pod`` on the node kube's scores choose (:mod:`placer.placement.kube_scores`;
    ``strategy``: NodeResourcesFit's, default the policy's), its GPUs chosen there by the
    policy's kernel code; False when no node takes it."""
    node = kube_scores.choose_node(session, pod, policy, rng, tally.placed, strategy)
    if node < 0:
        return False
    got = session.place_on([pod], [node], policy, rng)
    if got is None:
        return False
    tally.add(session, pod, node, got[0][0], got[1][0])
    return True


def _outside(n_nodes: int, nodes: Mapping[int, str]) -> np.ndarray | None:
    """A bool mask of every node but ``nodes`` (None: all nodes)."""
    if not nodes:
        return None
    mask = np.ones(n_nodes, dtype=bool)
    mask[list(nodes)] = False
    return mask


def _place_slots(session: KernelSession, pod: PodRequest, policy: Policy, rng: np.ndarray, tally: Tally) -> None:
    """Place one pod of ``gpuSlots`` (:func:`placer.placement.sharing.place_slot_pod`)."""
    got = sharing.place_slot_pod(session, pod, policy, rng)
    if isinstance(got, str):
        tally.unschedulable.append(Unschedulable(pod.name, got))
        return
    mask = 0
    for gpu in got.gpus:
        mask |= 1 << gpu
    tally.add(session, pod, got.node, mask)


def replay_pods(
    state: ClusterState, pods: Sequence[PodRequest], policy: Policy, seed: int, workload: Workload | None
) -> tuple[PlacementResult, np.ndarray]:
    """Place pods one at a time in order and hold them (:meth:`Cluster.replay`): the result
    and the fragment F(M) after each pod."""
    special = next((i for i, pod in enumerate(pods) if pod.mig is not None or pod.gpu_slots), None)
    if special is not None:
        raise InvalidInputError(
            f"pods[{special}]", "replay takes whole and shared GPU pods; place MIG and GPU-slot pods with schedule()"
        )
    session = state.session
    if workload is not None:
        session.fragmentation(workload)
    elif session.workload is None:
        session.fragmentation(target_workload(pods), told=False)
    session.prepare(policy, pods, seed)
    trace = np.zeros(len(pods), dtype=np.float64)
    rng = np.array([seed], dtype=np.uint64)
    tally = Tally()
    if policy.kube_scoring is not None:
        for k, pod in enumerate(pods):
            if not _place_by_kube_scores(session, pod, policy, rng, tally):
                tally.add_run(session, [pod], session.place([pod], policy, rng))
            trace[k] = session.fragmentation(session.workload, told=False).total  # type: ignore[arg-type]
    elif any(pod.host_ports for pod in pods):  # NodePorts: each pod a batch of its own (steps)
        for step in steps(pods, {}):
            first = len(tally.placed) + len(tally.unschedulable)
            part = trace[first: first + len(step.pods)]
            tally.add_run(session, step.pods, session.place(step.pods, policy, rng, trace=part, learn=True))
    else:
        tally.add_run(session, pods, session.place(pods, policy, rng, trace=trace, learn=True))
    state.book.remember(tally.placed, tally.assignments)
    session.hold_all(tally.placed)
    return tally.result(), trace
