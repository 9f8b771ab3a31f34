"""Gangs with MIG pods: all pods placed or none, inside the domain the gang requires.

A gang of many ``1g`` inference replicas, or a launcher beside MIG workers, goes through
the same steps as any gang: the domains of its required (or preferred) level that can hold
every instance it asks for are tried tightest first; inside one, the pods are placed in
order, each MIG pod by the policy's MIG choice (``spread``: one replica per GPU where it
can; ``best-fit``: packed), every other pod by the kernel. Slices put every consecutive
``size`` pods of the main shape in one domain of their level. The first domain where every
pod fits wins; otherwise nothing stays bound.

Capacity per node counts free instances plus the copies that can still be created on
dynamic GPUs, GPU by GPU: an upper bound that ignores CPU and memory, so a domain it rules
out cannot hold the gang (``infeasible``).
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from placer.model import reasons
from placer.model.domains import Domains, Hierarchy
from placer.kernel import KernelSession
from placer.model import EMPTY, GangResult, GangSpec, MigRequest, PodRequest, gang_shapes
from placer.policies import Policy

__all__ = ["place_mig_gang"]

Outcome = tuple[PodRequest, int, int, str, int]


def _demand(pods: Sequence[PodRequest]) -> Counter[MigRequest]:
    """Instances asked for, per distinct request (profile or memory), counts summed."""
    need: Counter[MigRequest] = Counter()
    for pod in pods:
        if pod.mig is not None:
            need[MigRequest(pod.mig.profile, 1, pod.mig.memory_mib)] += pod.mig.count
    return need


def _room(session: KernelSession, h: Hierarchy, level: int, need: Counter[MigRequest], inside: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """Per domain of ``level`` (nodes of ``inside`` only): whether it can hold ``need``
    by count, and its total capacity (the tighter, the earlier it is tried)."""
    ids = h.ids[level]
    n_domains = len(h.names[level])
    ok = np.ones(n_domains, dtype=bool)
    total = np.zeros(n_domains, dtype=np.int64)
    member = inside & (ids >= 0)
    for request, count in need.items():
        cap = np.where(member, session.mig.node_capacity(request), 0)
        per = np.bincount(ids[member], weights=cap[member], minlength=n_domains).astype(np.int64)
        ok &= per >= count
        total += per
    return ok, total


def _scopes(session: KernelSession, h: Hierarchy, level: int, need: Counter[MigRequest], inside: np.ndarray
            ) -> list[np.ndarray]:
    """Node masks of the domains of ``level`` inside ``inside`` that can hold ``need``,
    tightest first."""
    ok, total = _room(session, h, level, need, inside)
    order = sorted(np.flatnonzero(ok).tolist(), key=lambda d: (int(total[d]), d))
    return [(h.ids[level] == d) & inside for d in order]


def _place_pods(
    session: KernelSession, h: Hierarchy, pods: Sequence[PodRequest], spec: GangSpec, policy: Policy,
    rng: np.ndarray, scope: np.ndarray,
) -> tuple[list[Outcome], str]:
    """Place every pod inside ``scope`` (slices inside their own domains), binding them;
    all or nothing: on failure nothing stays bound and the line says which pod failed."""
    main = set(gang_shapes(pods)[0]) if spec.slices else set()
    slice_levels = [h.levels.index(s.level) for s in spec.slices]
    sizes = [s.size for s in spec.slices]
    chunk_scope: list[np.ndarray] = [scope] * len(sizes)
    placed: list[Outcome] = []
    k_main = 0
    for i, pod in enumerate(pods):
        where = scope
        if i in main:
            for layer, size in enumerate(sizes):
                if k_main % size == 0:  # a new slice of this layer starts: pick its domain
                    outer = chunk_scope[layer - 1] if layer else scope
                    members = [pods[j] for j in sorted(main)][k_main : k_main + size]
                    found = _scopes(session, h, slice_levels[layer], _demand(members), outer)
                    if not found:
                        _undo(session, placed)
                        level = h.levels[slice_levels[layer]]
                        return [], f"no {level} domain holds slice {k_main // size} ({size} pod(s)) of the gang"
                    chunk_scope[layer] = found[0]
                where = chunk_scope[layer]
            k_main += 1
        if pod.mig is not None:
            got = session.place_mig(pod, policy, where)
            if isinstance(got, dict):
                _undo(session, placed)
                return [], reasons.gang_member_failed(
                    spec.name, len(placed), len(pods), pod.name, reasons.kube_reason(int(where.sum()), got)
                )
            placed.append((pod, got[0], 0, "", 0))
        else:
            run = session.place([pod], policy, rng, None, session.nodes_bitset(where))
            if run.nodes[0] < 0:
                _undo(session, placed)
                line = reasons.kube_reason(session.n_nodes, run.reasons(0))
                return [], reasons.gang_member_failed(spec.name, len(placed), len(pods), pod.name, line)
            placed.append((pod, run.nodes[0], run.masks[0], "", run.nics[0]))
    return placed, ""


def _undo(session: KernelSession, placed: list[Outcome]) -> None:
    for pod, node, mask, _, _ in reversed(placed):
        session.give_back(pod, node, mask)


def place_mig_gang(
    session: KernelSession, domains: Domains, pods: Sequence[PodRequest], spec: GangSpec, policy: Policy,
    rng: np.ndarray,
) -> tuple[list[Outcome], GangResult]:
    """Place a gang that has MIG pods, all or nothing, binding it when it fits.

    Returns each pod's outcome (node -1 and the reason when the gang is not placed) and
    the gang's result (solver ``greedy``; ``infeasible`` when no domain can hold its
    instances by count).
    """
    h = domains.hierarchy()
    everywhere = np.ones(session.n_nodes, dtype=bool)
    need = _demand(pods)
    constrained = spec.mode != "unconstrained" and spec.level is not None
    scopes: list[np.ndarray] = []
    if constrained:
        scopes = _scopes(session, h, h.levels.index(spec.level), need, h.complete)
    if not constrained or spec.mode == "preferred":
        scopes.append(everywhere)
    last = ""
    for scope in scopes:
        placed, last = _place_pods(session, h, pods, spec, policy, rng, scope)
        if placed:
            used = domains.used([o[1] for o in placed])
            return placed, GangResult(spec.name, True, "greedy", "feasible", used, None, None, EMPTY)
    status = "unknown"
    if not scopes:
        last = (f"gang {spec.name}: no {spec.level} domain has room for the {sum(need.values())} MIG "
                "instance(s) it asks for")
        status = "infeasible"
    return [(pod, -1, 0, last, 0) for pod in pods], GangResult(spec.name, False, "greedy", status)
