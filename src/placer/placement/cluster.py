"""A cluster's placement state for a scheduler's loop: place, bind, release.

:class:`Cluster` keeps one :class:`~placer.kernel.KernelSession` (the packed state, the one
owner of what is free and of who holds what) and is the small public face of the feature
modules that do the work, each holding its lock while they run: :mod:`placer.placement.run`
(a request in steps: runs to the kernel, gangs, MIG and slot pods, preemption through
:mod:`placer.placement.preempting`), :mod:`placer.placement.scoring` (one pod against the
nodes), :mod:`placer.placement.defragment` (moves), :mod:`placer.placement.binding` (the
decisions made, and binding them). The rules it implements are in
``docs/placement-rules.md``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence, Union

import numpy as np

from placer import policies, schema
from placer._serial import serialised
from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession, NodeFree, fgd_rank
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangSpec,
    Move,
    Node,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    RunningPod,
    load_snapshot,
    replace,
)
from placer.model.domains import Domains
from placer.model.reasons import kube_reason
from placer.placement import binding, defragment, preempting, run, scoring
from placer.placement.binding import KEPT_DECISIONS, DecisionBook
from placer.placement.state import ClusterState
from placer.policies import Policy
from placer.schema.errors import bad
from placer.workload.fragmentation import Fragmentation, Workload
from placer.workload.packing import PRESSURE_WEIGHT, REGRET_WEIGHT, PackingGuide, packing_guide

__all__ = ["Cluster", "NodeFree", "kube_reason", "fgd_rank", "KEPT_DECISIONS", "policy_record"]

PodLike = Union[PodRequest, Mapping[str, Any]]


def policy_record(policy: str | Policy | None) -> Policy:
    """The record of a policy given by name or as its record, checked where it enters."""
    if policy is None:
        raise bad("policy", "a policy name", policy)
    return policy if isinstance(policy, Policy) else policies.get(policy, "policy")


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
        snapshot = load_snapshot(snapshot)
        session = KernelSession(snapshot)
        self.lock = session.lock
        self._state = ClusterState(
            snapshot, session, Domains(snapshot), schema.snapshot_facts(snapshot, session.first_held), DecisionBook()
        )

    @property
    def snapshot(self) -> ClusterSnapshot:
        """The snapshot this cluster started from."""
        return self._state.snapshot

    @property
    def session(self) -> KernelSession:
        """The kernel session: what is free, node scores, the kernel's own placements."""
        return self._state.session

    @property
    def domains(self) -> Domains:
        """The topology domains of the snapshot."""
        return self._state.domains

    @property
    def node_names(self) -> list[str]:
        """Node names in index order."""
        return list(self._state.session.node_names)

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
        request, record = self._request(request, policy, seed)
        if preemption is not None:
            request = replace(request, preemption=schema.check_preemption(preemption))
        return run.run_request(self._state, request, record, keep=True)

    def checked_request(self, request: PlacementRequest | Mapping[str, Any] | str) -> PlacementRequest:
        """``request`` decoded and checked against this cluster (its levels, the pods bound
        now), a fault named at the file and path as the document writes them."""
        return self._request(request, None, None)[0]

    def _request(
        self, request: PlacementRequest | Mapping[str, Any] | str, policy: str | Policy | None, seed: int | None
    ) -> tuple[PlacementRequest, Policy]:
        """The request checked against the snapshot, with ``policy`` and ``seed`` overriding,
        and its policy's record."""
        look_up: Callable[[str], Policy]
        if isinstance(request, PlacementRequest):
            schema.check_request_against_snapshot(request, self._state.facts)
            schema.refuse_bound(request, self._state.session.first_held)
            look_up = policies.get  # the one check of an object's policy name
        else:  # the decoder checks it against the facts (the pods bound now included) and its policy
            request = schema.coerce_request(request, self._state.facts)
            look_up = policies.REGISTRY.__getitem__
        changes: dict[str, Any] = {}
        if policy is not None:
            record = policy_record(policy)
            changes["policy"] = record.name
        else:
            record = look_up(request.policy)
        if seed is not None:
            changes["seed"] = schema.check_seed(seed, "seed")
        schema.check_scoring(request.scoring_strategy, record.name)  # also after a policy override
        return (replace(request, **changes) if changes else request), record

    def preempt(
        self,
        request: PlacementRequest | Mapping[str, Any] | str,
        *,
        policy: str | Policy | None = None,
        seed: int | None = None,
    ) -> PlacementResult:
        """:meth:`schedule` with preemption on (the request's mode, ``auto`` when it says
        ``none``): victims are evicted and the preemptors bound."""
        request, record = self._request(request, policy, seed)
        if request.preemption == "none":
            request = replace(request, preemption="auto")
        return run.run_request(self._state, request, record, keep=True)

    def place(
        self,
        pods: PodLike | Sequence[PodLike],
        *,
        gang: GangSpec | Mapping[str, Any] | None = None,
        policy: str | Policy = policies.DEFAULT,
        seed: int = 0,
    ) -> PlacementResult:
        """Decide where one pod, or a list of pods, would go; the state does not change.

        Parameters
        ----------
        pods : PodRequest or dict, or a sequence of them
            The pods, placed in order. PodRequest objects are taken as they are (model
            objects hold checked values); dicts are decoded as the pods of a document.
        gang : GangSpec or dict, optional
            When given, the pods form this gang: all are placed or none.
        policy : str or Policy
            Any name in :data:`placer.policies.REGISTRY` (``docs/placement-rules.md``), or
            its record.
        seed : int
            Seed of the ``random`` policy's stream and of the ranked policies' node order.

        Returns
        -------
        PlacementResult
            Pass it to :meth:`bind` to make the decision real.
        """
        record = policy_record(policy)
        request = schema.request_for_pods(pods, gang, record, seed, self._state.facts)
        return run.run_request(self._state, request, record, keep=False)

    def node_scores(self, pod: PodLike, *, policy: str | Policy = policies.DEFAULT, seed: int = 0) -> np.ndarray:
        """Every node's score for one pod now, in :attr:`node_names` order; the state does
        not change.

        Higher is better under every policy (the policy's node choice is the highest score,
        the lowest index among equals); ``-2**63`` where the pod does not fit. Pods of MIG
        instances or ``gpuSlots`` are placed by their own searches and have no node scores
        (``InvalidInputError``); :meth:`place` them.

        Parameters
        ----------
        pod : PodRequest or dict
            Taken as :meth:`place` takes it.
        policy : str or Policy
            Any name in :data:`placer.policies.REGISTRY`, or its record.
        seed : int
            Seed of the ranked policies' node order.

        Returns
        -------
        ndarray of int64
        """
        chosen = policy_record(policy)
        request = schema.request_for_pods(pod, None, chosen, seed, self._state.facts)
        return scoring.node_scores(self._state, request, chosen)

    def place_on(
        self, pod: PodLike, node: str, *, policy: str | Policy = policies.DEFAULT, seed: int = 0
    ) -> PlacementResult:
        """Decide the GPUs (and NICs) one pod would get on ``node``; the state does not change.

        What a scheduler needs once another component chose the node: ``policy`` chooses
        the GPU set there. :meth:`bind` takes the result. When the pod does not fit there,
        the result holds it as unschedulable with the node's reason
        (:meth:`KernelSession.node_reasons`). Pods of MIG instances or ``gpuSlots``:
        ``InvalidInputError``, as :meth:`node_scores`.
        """
        chosen = policy_record(policy)
        request = schema.request_for_pods(pod, None, chosen, seed, self._state.facts)
        return scoring.place_on(self._state, request, node, chosen)

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
        request, record = self._request(request, policy, seed)
        return defragment.defrag(self._state, request, record, max_moves)

    def move(self, moves: Sequence[Move]) -> None:
        """Make moves real, in order, all or nothing: each pod leaves ``from`` and holds
        what it held on ``to``, on GPUs ``gpus``.

        Raises :class:`InvalidInputError` (at ``moves[k]``) when a pod does not run on
        ``from``, may not move (:func:`placer.preemption.moves.why_not_movable`), or does not fit on
        ``to`` at its turn (its GPU model, the taints it tolerates, room); then nothing
        moved.
        """
        defragment.move(self._state, moves)

    def preemption_hint(self, pods: Sequence[PodRequest], spec: GangSpec | None = None) -> str:
        """What preemption would do for a pending pod (or gang ``spec``) now, in words:
        "would fit after preempting …", or "" when no preemption helps. Nothing changes."""
        return preempting.preemption_hint(self._state, pods, spec)

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
        binding.bind(self._state.session, self._state.book, placement)

    def release(self, pod_name: str) -> None:
        """Give back everything a bound or running pod holds."""
        binding.release(self._state.session, pod_name)

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
        return run.replay_pods(self._state, pods, record, seed, workload)

    # ------------------------------------------------------------------ views

    def fragmentation(self, workload: Workload) -> Fragmentation:
        """The cluster's fragment F(M) now (FGD measure; ``placer.workload.fragmentation``).

        The first call for a workload computes every node's fragment in the kernel; from
        then on each bind or release updates only its node.
        """
        return self._state.session.fragmentation(workload)

    def packing_guide(self, pods: Sequence[PodRequest]) -> PackingGuide:
        """The ``fgd-pack`` figures of a pod list on this cluster (:meth:`PackingGuide.from_pods`)."""
        return packing_guide(pods, self._state.session.gpus_per_model())

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
        self._state.session.set_packing_weights(regret, pressure)

    def set_packing(self, guide: PackingGuide) -> None:
        """Use ``guide`` for ``fgd-pack`` from now on, fixed (default: :meth:`learn_packing`
        when ``fgd-pack`` is first used)."""
        self._state.session.set_packing(guide)

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
        return self._state.session.learn_packing(workload)

    @property
    def packing(self) -> PackingGuide | None:
        """The guide ``fgd-pack`` uses now (None before it is set or first used)."""
        return self._state.session.packing

    def node_fragment(self, node: str) -> float:
        """F_n(M) of one node for the workload of the last :meth:`fragmentation` call."""
        return self._state.session.node_fragment(self._index(node))

    def node_free(self, node: str) -> NodeFree:
        """What is free on ``node`` now."""
        return self._state.session.node_free(self._index(node))

    def _index(self, node: str) -> int:
        if not isinstance(node, str):
            raise bad("node", "a node name", node)
        i = self._state.session.node_index.get(node)
        if i is None:
            raise InvalidInputError(node, "unknown node")
        return i

    def to_snapshot(self) -> ClusterSnapshot:
        """The cluster as it is now: running pods less released ones, plus bound ones."""
        per_node: list[list[RunningPod]] = [[] for _ in self._state.snapshot.nodes]
        for node, record in self._state.session.running():
            per_node[node].append(record)
        session = self._state.session
        nodes: tuple[Node, ...] = tuple(
            node if tuple(pods) == node.pods and node.hardware.mig is None
            else replace(node, pods=tuple(pods), mig_instances=session.mig_instances(i))
            if node.hardware.mig is not None
            else replace(node, pods=tuple(pods))
            for i, (node, pods) in enumerate(zip(self._state.snapshot.nodes, per_node))
        )
        return replace(self._state.snapshot, nodes=nodes)
