"""placer as a kube-scheduler extender: the verbs ``filter``, ``prioritize``, ``preempt`` and
``bind`` on a :class:`~placer.placement.cluster.Cluster` kept current by binds and watch events.

No HTTP here (:mod:`placer.serve.app` carries the verbs over HTTP); the bodies are decoded by
:mod:`placer.schema.extender` and answered as the plain data of the extender's result types
(PascalCase keys). Rules (``docs/extender.md``):

* ``filter``: the candidate nodes where the pod fits now; the others in ``FailedNodes`` with
  placer's reason, or in ``FailedAndUnresolvableNodes`` when a static filter turns the pod
  away (cordon, taint, selector, GPU model: preemption cannot help there).
* ``prioritize``: the policy's node scores, mapped linearly onto 0–10 over the candidates
  that fit (all 10 when they score alike); 0 where the pod does not fit.
* Pods of MIG instances or ``gpuSlots`` are placed by their own searches: ``filter`` keeps
  the node placer chooses, ``prioritize`` gives it 10.
* Gangs (pods naming a PodGroup): each member waits in ``filter`` (every node failed, with
  how many of the gang's ``minMember`` pods placer has seen) until the whole gang is
  pending; then placer places the gang all or nothing and reserves it whole, the binder
  wakes the other members (:meth:`Binder.wake`: kube-scheduler parked those it saw turned
  away), and each member's ``filter`` keeps its reserved node. ``bind`` confirms one
  member at a time.
* ``bind``: the GPUs placer chose for the pod on the node kube-scheduler chose (or its
  reservation), held at once; the binder writes the Binding and the ``placer.io/gpus``
  annotation. A bind that cannot be honoured changes nothing and answers ``Error``. Binds
  are keyed by UID: placer binds only a pod it has seen (filter, watch) with that UID, a
  retry of a bind it made succeeds again, and a new UID under a held name is a new pod (the
  old one is gone: what it held is released).
* ``preempt``: per node kube-scheduler proposes, placer's victims there
  (:func:`placer.preemption.victims.candidates`, kube's rules over gangs and budgets), by UID;
  nodes where placer finds none are dropped.
* Watch events (Nodes, Pods, PodGroups) are queued and applied before the next verb (at
  most once per ``sync_interval_s``). A PodGroup the watch brings (or changes) for a gang
  whose pods wait is planned then: reserved, its members woken. Those that change no holding but a release apply in
  place; the others rebuild the cluster state, all at once when they validate together,
  else one by one, each refused event counted and the state it would have broken kept. A
  list (:class:`~placer.adapters.kubernetes.live.Listing`) replaces what the watch told of its
  kind: objects placer knows from the API, filter or its binds that the list lacks are
  deleted. A queued list is applied before the next verb, whatever the interval.
* While the state is not current (``not_current`` says why: :mod:`placer.serve.app` asks the
  watch's health), no verb decides on it: ``filter`` and ``bind`` answer ``Error``,
  ``prioritize`` and ``preempt`` raise :class:`StateNotCurrent`.
* Pods seen only through ``filter`` (no watch reports them) are forgotten after
  ``pending_ttl_s``, oldest first beyond ``max_pending``.
"""
from __future__ import annotations

import logging
import math
import re
import time
from itertools import compress
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import msgspec
import numpy as np

from placer import policies
from placer.adapters.kubernetes.live import Listing, ReservedMember, WatchEvent
from placer.adapters.kubernetes.sharing import as_slots
from placer.adapters.kubernetes.snapshot import node_from_object, parse_levels, running_pod_from_object
from placer.adapters.kubernetes.scheduling import named_group
from placer.adapters.kubernetes.workloads import workloads_from_objects
from placer.placement.cluster import Cluster
from placer.exceptions import InvalidInputError, PlacerError
from placer.formats import binding_annotations
from placer.model import Assignment, ClusterSnapshot, PodRequest, load_snapshot
from placer.preemption import victims as preemption
from placer.schema import snapshot_from_dict
from placer.schema.extender import BindingArgs, ExtenderArgs, PreemptionArgs, pod_key, same_json_value

__all__ = [
    "MAX_SCORE",
    "WatchEvent",
    "Listing",
    "StateNotCurrent",
    "PENDING_TTL_S",
    "MAX_PENDING",
    "Binder",
    "ReservedMember",
    "RecordingBinder",
    "RefusingBinder",
    "PendingBind",
    "Extender",
    "scores_0_to_10",
    "reason_label",
    "with_levels",
]

MAX_SCORE = 10
"""kube-scheduler's MaxExtenderPriority; scores run from 0 to it."""
PENDING_TTL_S = 300.0
"""How long a pod seen only through ``filter`` is remembered (``--pending-ttl``)."""
MAX_PENDING = 10_000
"""How many pods seen only through ``filter`` are remembered at most (``--max-pending``)."""

_log = logging.getLogger("placer.serve.app")
_NO_SCORE = np.iinfo(np.int64).min
_ENCODER = msgspec.json.Encoder()  # a decoded pod's bytes: the quick test of the same value
_KEPT_REQUESTS = 256
_KEPT_REPLACED = 4096
_UNKNOWN_NODE = "node not in placer's cluster state (yet)"
# Reasons that name a pod, gang or node, by words they start with and hold -> their metric label
_NAMED_REASONS = (
    ("its gang's reservation is ", "", "reserved for its gang on another node"),
    ("the node placer chose is ", "", "placer chose another node"),
    ("gang ", " waits for its pods", "gang waiting for its pods"),
    ("gang ", " does not fit", "gang does not fit"),
    ("gang ", "PodGroup not known", "gang's PodGroup not known"),
)


def reason_label(reason: str) -> str:
    """A filter reason without the names it holds: a metric label of bounded cardinality
    (``gang ml/pg waits for its pods: 1 of minMember 2 seen`` -> ``gang waiting for its
    pods``)."""
    for start, holds, label in _NAMED_REASONS:
        if reason.startswith(start) and holds in reason:
            return label
    return reason


class StateNotCurrent(PlacerError):
    """The cluster state is known not to be current (the watch failed, missed events or is
    old): placer does not decide on it. :mod:`placer.serve.app` answers it HTTP 503."""


class Binder(Protocol):
    """Writes a decision to the cluster: the Binding, with placer's annotations
    (:func:`placer.formats.binding_annotations`: ``placer.io/gpus``, ``placer.io/mig``, ...)."""

    def bind(self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        """Bind the pod; raise to refuse (the extender then answers ``Error``)."""

    def wake(self, members: Sequence[ReservedMember]) -> Any:
        """Have kube-scheduler retry these members of a gang placer just reserved, which it
        may hold among its unschedulable pods; without waiting for the writes (optional: a
        binder without it wakes none)."""


@dataclass
class RecordingBinder:
    """A binder that posts nothing (``placer serve --dry-run``, and the default of
    :class:`Extender`): it keeps the Bindings and the wakes it was asked for."""

    bindings: list[dict[str, Any]] = field(default_factory=list)
    wakes: list[ReservedMember] = field(default_factory=list)

    def bind(self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        self.bindings.append(binding_object(namespace, name, uid, node, annotations))

    def wake(self, members: Sequence[ReservedMember]) -> None:
        self.wakes.extend(members)


class RefusingBinder:
    """The binder of a service with no API server to post to and no ``--dry-run``: every
    bind is refused (the extender answers ``Error``, so kube-scheduler sees it failed)."""

    def bind(self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        raise PlacerError(
            "no API server to post the Binding to: placer serve was started without --kubeconfig "
            "(give --kubeconfig FILE, or --dry-run to record binds in placer's state without posting them)"
        )


def binding_object(namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> dict[str, Any]:
    """The core/v1 Binding of a pod to a node, with placer's annotations."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


@dataclass(frozen=True)
class PendingBind:
    """A bind decided and held (:meth:`Extender.begin_bind`), its Binding not posted yet."""

    binder: Binder
    args: BindingArgs
    source: str
    assignment: Assignment
    reserved: bool  # a gang member's reservation, kept when the post fails

    def post(self) -> Exception | None:
        """Post the Binding (the binder's call: the API server's round trip); the error, if it failed."""
        a = self.args
        try:
            self.binder.bind(a.pod_namespace or "default", a.pod_name, a.pod_uid, a.node,
                             binding_annotations(self.assignment))
        except Exception as e:  # the binder's refusal or failure (API server, network): answered as Error
            return e
        return None


def scores_0_to_10(scores: Sequence[int] | np.ndarray) -> list[int]:
    """Scores mapped linearly onto 0..:data:`MAX_SCORE` (lowest 0, highest 10, rounded
    down); all :data:`MAX_SCORE` when they are equal."""
    values = np.asarray(scores, dtype=np.int64)
    if not values.size:
        return []
    low, high = int(values.min()), int(values.max())
    if high == low:
        return [MAX_SCORE] * values.size
    if high - low < 2**59:  # MAX_SCORE times the spread stays inside int64
        return ((values - low) * MAX_SCORE // (high - low)).tolist()
    return [MAX_SCORE * (s - low) // (high - low) for s in values.tolist()]


def with_levels(snapshot: ClusterSnapshot, levels: Iterable[str]) -> ClusterSnapshot:
    """The snapshot with room for the topology levels that watched nodes are given.

    Parameters
    ----------
    snapshot : ClusterSnapshot
        The cluster at start.
    levels : iterable of "name=label"
        The levels, outermost first (``--level``).

    Returns
    -------
    ClusterSnapshot
        ``snapshot`` with the levels' names as ``topologyLevels`` when it has none (an
        empty snapshot the watch fills); else ``snapshot``, which must name every level.

    Raises
    ------
    InvalidInputError
        At ``levels`` (``--level``), naming a level the snapshot's ``topologyLevels`` lack.
    """
    names = [name for name, _ in parse_levels(levels, "levels")]
    if not names:
        return snapshot
    if not snapshot.topology_levels:
        return msgspec.structs.replace(snapshot, topology_levels=tuple(names))
    lacking = [name for name in names if name not in snapshot.topology_levels]
    if lacking:
        raise InvalidInputError(
            "levels", f"level {lacking[0]!r} is not among the snapshot's topologyLevels "
            f"({', '.join(snapshot.topology_levels)}): watched nodes could not be placed in it"
        )
    return snapshot


@dataclass
class _Gang:
    """A PodGroup as the extender knows it: its object and its pending pods."""

    name: str
    podgroup: Mapping[str, Any] | None = None
    pending: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def min_member(self) -> int:
        spec = (self.podgroup or {}).get("spec") or {}
        value = spec.get("minMember", spec.get("minAvailable", 1))
        return value if isinstance(value, int) and value > 0 else 1


class Extender:
    """The extender's state and verbs.

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
        The cluster at start.
    policy : str
        The placement policy (:data:`placer.policies.REGISTRY`).
    seed : int
        Seed of the ranked policies' node order.
    levels : iterable of "name=label"
        Topology levels for nodes that watch events add, and for gangs' topology keys.
    podgroups : iterable of mapping
        PodGroup objects known at start (the watch adds more).
    binder : Binder, optional
        Where binds go (default: :class:`RecordingBinder`).
    sync_interval_s : float
        Apply queued watch events at most this often (each application rebuilds the
        cluster state: about 0.2 s on 5,000 nodes); 0 applies them before every verb.
    not_current : callable, optional
        Why the state is not current now ("" when it is); while it says why, no verb
        decides (default: always current).
    pending_ttl_s : float
        Forget a pod seen only through ``filter`` this long after its last ``filter``.
    max_pending : int
        Remember at most this many pods seen only through ``filter`` (oldest forgotten first).
    clock : callable
        Seconds of a monotonic clock, for ``pending_ttl_s`` (tests give their own).
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot | Mapping[str, Any] | str,
        *,
        policy: str = policies.DEFAULT,
        seed: int = 0,
        levels: Iterable[str] = (),
        podgroups: Iterable[Mapping[str, Any]] = (),
        binder: Binder | None = None,
        sync_interval_s: float = 0.0,
        not_current: Callable[[], str] | None = None,
        pending_ttl_s: float = PENDING_TTL_S,
        max_pending: int = MAX_PENDING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.levels = tuple(levels)
        self.cluster = Cluster(with_levels(load_snapshot(snapshot), self.levels))
        self._policy = policies.get(policy, "policy")  # looked up here, once
        self.policy = self._policy.name
        self.seed = seed
        self.binder: Binder = binder if binder is not None else RecordingBinder()
        self._gangs: dict[str, _Gang] = {}
        self._pending: dict[str, Mapping[str, Any]] = {}  # pod key -> the Pod object last seen
        self._reserved: dict[str, Assignment] = {}  # pod key -> its gang's reservation
        self._decided: dict[str, Assignment] = {}  # pod key -> placer's node (MIG, gpuSlots)
        self._uid_of: dict[str, str] = {}  # pod key -> UID of the pod holding resources (or a victim's)
        self._bound: dict[str, str] = {}  # pod key -> UID this extender bound (a retried bind succeeds again)
        self._filtered_at: dict[str, float] = {}  # pending pods no watch reports, oldest filter first
        self._replaced: dict[str, None] = {}  # UIDs of pods replaced under their name, oldest first
        self._from_api: dict[str, set[str]] = {kind: set() for kind in ("Node", "Pod", "PodGroup")}
        self._noted: dict[str, frozenset[str]] = {}  # "Node n" / "Pod ns/p" -> the notes last logged of it
        self.not_current: Callable[[], str] = not_current if not_current is not None else lambda: ""
        self.pending_ttl_s = pending_ttl_s
        self.max_pending = max_pending
        self.pending_dropped = 0
        self._clock = clock
        # pod key -> (the Pod object as decoded, its encoding, its request): a pod whose
        # decoded object is the same value, whatever the order of its keys, takes the request
        self._requests: dict[str, tuple[Mapping[str, Any], bytes, Any]] = {}
        self._last_names: tuple[Cluster, tuple[str, ...], np.ndarray] | None = None
        self._queued: list[WatchEvent | Listing] = []
        self._awaiting_node: dict[str, WatchEvent] = {}  # pod key -> its event, bound to a node not known yet
        self._listing_queued = False
        self._told_podgroups: dict[str, None] = {}  # gangs whose PodGroup the watch brought or changed
        self.sync_interval_s = sync_interval_s
        self._synced_at = -math.inf
        self.refused_events = 0
        self.applied_events = 0
        for pg in podgroups:
            self._note_podgroup(WatchEvent("ADDED", pg, "podgroups"))

    # ------------------------------------------------------------------ watch

    def queue(self, events: Iterable[WatchEvent | Listing]) -> None:
        """Queue watch events and lists; they are applied before the next verb (:meth:`sync`)."""
        for event in events:
            self._queued.append(event)
            self._listing_queued |= isinstance(event, Listing)

    def sync(self, *, now: bool = False) -> None:
        """Apply the queued events (when :attr:`sync_interval_s` has passed since the last
        time, ``now``, or a list is queued): all at once when the cluster they make is
        valid, else one at a time, an event that would make it invalid refused (logged and
        counted) with nothing of it kept. A list applies as the events that make the state
        of its kind what it lists (:meth:`_replacing`). A pod bound to a node placer does not
        know yet (Nodes and Pods are watched apart: a pod may come before its node) waits for
        that node, and is applied once the node is known."""
        if not self._queued or (
            not now and not self._listing_queued and time.monotonic() - self._synced_at < self.sync_interval_s
        ):
            self._plan_told_gangs()
            return
        events, self._queued, self._listing_queued = self._queued, [], False
        self._synced_at = time.monotonic()
        part: list[WatchEvent] = []
        for event in events:
            if isinstance(event, Listing):
                self._apply_all(part)
                part = self._replacing(event)
            else:
                part.append(event)
        self._apply_all(part)
        self._plan_told_gangs()

    @property
    def queued(self) -> int:
        """How many watch events and lists wait for :meth:`sync`."""
        return len(self._queued)

    def _plan_told_gangs(self) -> None:
        """Reserve each gang whose PodGroup the watch brought or changed, once the state is
        current (then the reservation wakes its members, :meth:`Binder.wake`): they waited in
        ``filter`` for it, and kube-scheduler, which watches no PodGroup, would not retry them."""
        if not self._told_podgroups or self.not_current():
            return
        told, self._told_podgroups = self._told_podgroups, {}
        for name in told:
            gang = self._gangs.get(name)
            if gang is None or gang.podgroup is None or not gang.pending:
                continue
            source = f"watch PodGroup {name}"
            try:
                why = self._plan_gang(gang, "", source)
            except InvalidInputError as e:
                why = str(e)
            if why:
                _log.info("%s: its pending pods wait: %s", source, why)

    def _replacing(self, listing: Listing) -> list[WatchEvent]:
        """The events that make the state of ``listing.kind`` what it lists: a DELETED for
        each object of the kind known from the API (its events, ``filter``, placer's binds)
        that it lacks, then an ADDED per item. Objects only the snapshot holds are kept."""
        listed = {_api_key(item) for item in listing.items if _named(item)}
        known = set(self._from_api.get(listing.kind, ()))
        pending: Mapping[str, Mapping[str, Any]] = {}
        if listing.kind == "Pod":
            known.update(self._pending, self._bound, self._reserved)
            pending = self._pending  # its labels name its gang
        gone = [
            WatchEvent("DELETED", {**pending.get(key, _named_object(listing.kind, key)), "kind": listing.kind},
                       listing.where)
            for key in sorted(known - listed)
        ]
        return [*gone, *(WatchEvent("ADDED", item, listing.where) for item in listing.items)]

    def _apply_all(self, events: Sequence[WatchEvent]) -> None:
        """Apply ``events`` (see :meth:`sync`), noting which objects the API told of. Events
        of a pod placer knows was replaced under its name (its UID) are late news of a pod
        that is gone: they change nothing."""
        kept = []
        nodes_added = {_api_key(e.object) for e in events
                       if e.type != "DELETED" and isinstance(e.object, Mapping) and e.object.get("kind") == "Node"
                       and _named(e.object)}
        for event in events:
            obj = event.object
            kind = obj.get("kind") if isinstance(obj, Mapping) else None
            if kind == "Pod" and isinstance(obj.get("metadata"), Mapping) and _uid(obj) in self._replaced:
                self.applied_events += 1
                continue
            if kind in self._from_api and _named(obj):
                keys = self._from_api[kind]
                (keys.discard if event.type == "DELETED" else keys.add)(_api_key(obj))
            if kind == "Pod" and _named(obj):
                self._awaiting_node.pop(pod_key(obj), None)  # this event is newer news of the pod
                waits_for = _unknown_node(obj, event.type, self.cluster.session.node_index, nodes_added)
                if waits_for:
                    _log.info("%s: pod %s is bound to node %s, not known yet: applied once it is", event.where,
                              pod_key(obj), waits_for)
                    self._awaiting_node[pod_key(obj)] = event
                    continue
            kept.append(event)
        self._apply_events(kept)
        index = self.cluster.session.node_index
        ready = [k for k, e in self._awaiting_node.items() if e.object["spec"]["nodeName"] in index]
        if ready:
            self._apply_all([self._awaiting_node.pop(k) for k in ready])

    def _apply_events(self, events: Sequence[WatchEvent]) -> None:
        """Apply ``events``: those that need no rebuild in place, the rest in one rebuild,
        else one by one, each that fails refused."""
        quick = 0
        while quick < len(events) and self._apply_quickly(events[quick]):
            quick += 1
        events = events[quick:]
        if not events or self._apply(events):
            return
        for event in events:
            if not self._apply([event]):
                self.refused_events += 1

    def _apply_quickly(self, event: WatchEvent) -> bool:
        """Apply an event that needs no rebuild of the cluster state, and say whether it
        was one: a PodGroup; a pod pending, finished or deleted (what it held is released);
        a pod seen running where it already holds the same GPUs (placer's own bind coming
        back). Node events and pods newly running elsewhere need the rebuild."""
        obj = event.object
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if kind == "PodGroup" and _named(obj):
            self._note_podgroup(event)
            self.applied_events += 1
            return True
        if kind != "Pod" or not _named(obj):
            return False
        key = pod_key(obj)
        notes: list[str] = []
        try:
            entry = None if event.type == "DELETED" else running_pod_from_object(obj, event.where, None, notes)
        except InvalidInputError:
            return False  # the rebuild refuses it, naming the fault
        spec = obj.get("spec")
        node_name = spec.get("nodeName") if isinstance(spec, Mapping) else None
        held = self.cluster.session.holding(key)
        gone = event.type == "DELETED" or (bool(node_name) and entry is None)
        if entry is not None:
            if held is None or self.cluster.session.node_names[held[0]] != node_name:
                return False
            record = held[1]
            if record.mig or record.gpu_shares or record.gpu_slots:
                return False
            gpus = entry.get("gpus")
            same = tuple(gpus) == record.gpus if gpus is not None else entry.get("unknownGpus", 0) == len(record.gpus)
            if not same:
                return False
        uid = _uid(obj)
        if entry is None and self._drop_if_replaced(key, uid):
            held = None
        elif entry is not None and uid:
            self._uid_of[key] = uid
        gang = self._gang_of(obj)
        if gone:
            if held is not None:
                self.cluster.release(key)
            self._gone(key, gang)
        elif node_name:
            self._forget(key, gang)
        elif held is None:
            self._note_pending(key, obj, gang)
        self._log_notes(f"Pod {key}", event.where, notes)
        self.applied_events += 1
        return True

    def _apply(self, events: Sequence[WatchEvent]) -> bool:
        """Rebuild the cluster with ``events`` applied, and note what they say of pending
        pods and PodGroups; False, with nothing changed, when they do not make a valid
        cluster."""
        effects: list[Callable[[], None]] = []
        try:
            document = self._edited(self.cluster.to_snapshot().to_dict(), events, effects)
            cluster = Cluster(snapshot_from_dict(document))
        except InvalidInputError as e:
            if len(events) == 1:
                _log.warning("watch event refused: %s", e)
            return False
        self.cluster = cluster
        self._decided.clear()
        for effect in effects:
            effect()
        self.applied_events += len(events)
        return True

    def _edited(
        self, document: dict[str, Any], events: Sequence[WatchEvent], effects: list[Callable[[], None]]
    ) -> dict[str, Any]:
        """The placer/v1 document after ``events``; what they say of pending pods and
        PodGroups (not part of the snapshot) goes to ``effects``, to apply once the
        document proves valid."""
        nodes: dict[str, dict[str, Any]] = {n["name"]: n for n in document["nodes"]}
        where_pod = {p["name"]: n["name"] for n in document["nodes"] for p in n.get("pods", ())}
        for event in events:
            obj = event.object
            kind = obj.get("kind") if isinstance(obj, Mapping) else None
            if kind == "Node":
                self._edit_node(nodes, where_pod, event, effects)
            elif kind == "Pod":
                self._edit_pod(nodes, where_pod, event, effects)
            elif kind == "PodGroup":
                if not _named(obj):
                    raise InvalidInputError(event.where, "a PodGroup without metadata.name")
                effects.append(lambda event=event: self._note_podgroup(event))
            else:
                raise InvalidInputError(event.where, f"expected a Node, Pod or PodGroup, got kind {kind!r}")
        document["nodes"] = list(nodes.values())
        return document

    def _edit_node(
        self, nodes: dict[str, dict[str, Any]], where_pod: dict[str, str], event: WatchEvent,
        effects: list[Callable[[], None]],
    ) -> None:
        if event.type == "DELETED" and _named(event.object):  # its name is all that counts
            name = event.object["metadata"]["name"]
            for pod in (nodes.pop(name, None) or {}).get("pods", ()):
                where_pod.pop(pod["name"], None)
            effects.append(lambda: self._log_notes(f"Node {name}", event.where, []))
            return
        notes: list[str] = []
        entry = node_from_object(event.object, event.where, self.levels, notes)
        name = entry["name"]
        effects.append(lambda: self._log_notes(f"Node {name}", event.where, notes))
        old = nodes.pop(name, None)
        if old is not None:
            # what a Node object cannot tell: the pods, GPU topology and NICs, MIG layout; the
            # amounts its status.allocatable tells follow it (one it no longer lists is none)
            told = _TOLD_BY_NODE + (_TOLD_BY_ALLOCATABLE if _allocatable(event.object) else ())
            for key, value in old.items():
                if key not in entry and key not in told:
                    entry[key] = value
        nodes[name] = entry

    def _edit_pod(
        self, nodes: dict[str, dict[str, Any]], where_pod: dict[str, str], event: WatchEvent,
        effects: list[Callable[[], None]],
    ) -> None:
        obj = event.object
        key = pod_key(obj) if _named(obj) else None
        if key is None:
            raise InvalidInputError(event.where, "a Pod without metadata.name")
        old_node = where_pod.pop(key, None)
        old_entry = None
        if old_node is not None and old_node in nodes:
            pods = nodes[old_node].get("pods", [])
            old_entry = next((p for p in pods if p["name"] == key), None)
            nodes[old_node]["pods"] = [p for p in pods if p["name"] != key]
        gang = self._gang_of(obj)
        notes: list[str] = []
        effects.append(lambda: self._log_notes(f"Pod {key}", event.where, notes))  # none: gone, pending or finished
        if event.type == "DELETED":
            effects.append(lambda: self._gone(key, gang))
            return
        node_name = (obj.get("spec") or {}).get("nodeName")
        node = nodes.get(node_name) if isinstance(node_name, str) else None
        if node_name and node is None:
            raise InvalidInputError(event.where, f"pod {key} runs on node {node_name!r}, which placer does not know")
        entry = running_pod_from_object(obj, event.where, node, notes)
        if entry is None:
            effects.append(lambda: self._gone(key, gang) if node_name else self._note_pending(key, obj, gang))
            return
        assert node is not None and isinstance(node_name, str)
        if "unknownGpus" in entry and old_entry is not None and old_node == node_name:
            if len(old_entry.get("gpus", ())) == entry["unknownGpus"]:
                entry = {**{k: v for k, v in entry.items() if k != "unknownGpus"}, "gpus": old_entry["gpus"]}
        node.setdefault("pods", []).append(entry)
        where_pod[key] = node_name
        uid = _uid(obj)
        if uid:
            effects.append(lambda: self._uid_of.__setitem__(key, uid))
        effects.append(lambda: self._forget(key, gang))

    def _note_pending(self, key: str, obj: Mapping[str, Any], gang: _Gang | None) -> None:
        if key in self._reserved or self.cluster.session.holds(key):
            return  # placer holds it already: bound here, not yet seen bound by the API
        self._pending[key] = obj
        self._filtered_at.pop(key, None)  # the API reports it: its deletion will come
        if gang is not None:
            gang.pending[key] = obj

    def _log_notes(self, what: str, source: str, notes: Sequence[str]) -> None:
        """Log as warnings the notes of a watched node or running pod (each starting with
        ``source``, the event's origin) that were not logged for its previous state: once
        per change of the object, not once per event, list or verb."""
        said = {note.removeprefix(source): note for note in notes}
        before = self._noted.pop(what, frozenset())
        for text, note in said.items():
            if text not in before:
                _log.warning("note: %s", note)
        if said:
            self._noted[what] = frozenset(said)

    def _gone(self, key: str, gang: _Gang | None) -> None:
        """The pod finished or was deleted."""
        self._bound.pop(key, None)
        self._uid_of.pop(key, None)
        self._forget(key, gang)

    def _forget(self, key: str, gang: _Gang | None) -> None:
        """The pod is no longer pending (it runs, finished or is gone)."""
        self._pending.pop(key, None)
        self._filtered_at.pop(key, None)
        self._reserved.pop(key, None)
        if gang is not None:
            gang.pending.pop(key, None)

    def _drop_if_replaced(self, key: str, uid: str) -> bool:
        """When ``uid`` is not the UID of the pod placer holds under the name ``key``, that
        pod is gone (a name is one pod at a time): release what it held, and say so. The new
        pod's pending object is kept."""
        if not self.cluster.session.holds(key) or _same_pod(self._uid_of.get(key, ""), uid):
            return False
        self.cluster.release(key)
        self._bound.pop(key, None)
        old = self._uid_of.pop(key, "")
        if old:
            self._replaced[old] = None
            if len(self._replaced) > _KEPT_REPLACED:
                del self._replaced[next(iter(self._replaced))]
        self._reserved.pop(key, None)
        return True

    def _note_podgroup(self, event: WatchEvent) -> None:
        obj = event.object
        if not _named(obj):
            raise InvalidInputError(event.where, "a PodGroup without metadata.name")
        key = pod_key(obj)
        if event.type == "DELETED":
            gang = self._gangs.get(key)
            if gang is not None:
                gang.podgroup = None
            return
        gang = self._gang(key)
        if gang.podgroup is None or gang.podgroup.get("spec") != obj.get("spec"):
            self._told_podgroups[key] = None
        gang.podgroup = obj

    def _gang(self, key: str) -> _Gang:
        gang = self._gangs.get(key)
        if gang is None:
            gang = self._gangs[key] = _Gang(key)
        return gang

    def _gang_of(self, pod: Mapping[str, Any]) -> _Gang | None:
        meta = pod.get("metadata") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        if not isinstance(labels, Mapping) or not isinstance(annotations, Mapping):
            return None
        ref = named_group(meta.get("namespace") or "default", labels, annotations)
        return self._gang(ref.name) if ref is not None else None

    # ------------------------------------------------------------------ verbs

    def filter(self, args: ExtenderArgs, source: str = "POST /filter") -> dict[str, Any]:
        """``ExtenderFilterResult`` for ``args``: the nodes that pass in the form they came in
        (none, and ``Error``, while the state is not current or when placer cannot take the
        pod: a field it cannot read, MIG instances of two profiles; kube-scheduler shows an
        extender's ``Error`` in the pod's ``PodScheduled`` condition)."""
        key = pod_key(args.pod)
        try:
            self._require_current(source)
        except StateNotCurrent as e:
            error, passing, failed, unresolvable = str(e), [], {}, {}
        else:
            try:
                self._remember(key, args.pod)
                passing, failed, unresolvable = self._judge(key, args.pod, args.names, source)
                error = ""
            except InvalidInputError as e:  # in Error: kube-scheduler drops the body of an answer not 200
                error, passing, failed, unresolvable = str(e), [], {}, {}
        result: dict[str, Any] = {}
        if args.node_names is not None:
            result["NodeNames"] = passing
        else:
            kept = set(passing)
            result["Nodes"] = {"metadata": {}, "items": [n for n in args.nodes or () if n["metadata"]["name"] in kept]}
        result["FailedNodes"] = failed
        result["FailedAndUnresolvableNodes"] = unresolvable
        result["Error"] = error
        return result

    def prioritize(self, args: ExtenderArgs, source: str = "POST /prioritize") -> list[dict[str, Any]]:
        """``HostPriorityList`` for ``args``: one ``{Host, Score}`` per candidate node.

        Raises
        ------
        StateNotCurrent
            While the state is not current (the list has no ``Error`` field).
        """
        self._require_current(source)
        key = pod_key(args.pod)
        self._remember(key, args.pod)
        names = args.names
        whole = self._whole_decision(key, args.pod, source)
        if whole is not None:
            chosen = whole.node if isinstance(whole, Assignment) else None
            return [{"Host": n, "Score": MAX_SCORE if n == chosen else 0} for n in names]
        if self._gang_of(args.pod) is not None:  # a member still waiting: filter passed no node
            return [{"Host": n, "Score": 0} for n in names]
        at, scores = self._scores(self._request(args.pod, source).pods[0], names)
        fits = scores != _NO_SCORE
        mapped = np.zeros(len(names), dtype=np.int64)
        if fits.any():
            mapped[fits] = scores_0_to_10(scores[fits])
        return [{"Host": n, "Score": score} for n, score in zip(names, mapped.tolist())]

    def _indices(self, names: Sequence[str]) -> np.ndarray:
        """The node index of each name (-1: unknown); kube-scheduler sends the same list
        to every verb, so the last one is kept until the cluster is rebuilt."""
        if self._last_names is not None and self._last_names[0] is self.cluster and self._last_names[1] == names:
            return self._last_names[2]
        index = self.cluster.session.node_index
        at = np.array([index.get(n, -1) for n in names], dtype=np.int64)
        self._last_names = (self.cluster, tuple(names), at)
        return at

    def _scores(self, pod: PodRequest, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per candidate name, its node index (-1: unknown) and the policy's score
        (:data:`_NO_SCORE` where the pod does not fit or the node is unknown)."""
        at = self._indices(names)
        every = self.cluster.node_scores(pod, policy=self._policy, seed=self.seed)
        scores = np.full(len(names), _NO_SCORE, dtype=np.int64)
        known = at >= 0
        scores[known] = every[at[known]]
        return at, scores

    def bind(self, args: BindingArgs, source: str = "POST /bind") -> dict[str, Any]:
        """``ExtenderBindingResult``: ``Error`` empty when the pod is bound (state and
        binder), else why not, with nothing changed. The pod is the one of that UID: placer
        must have seen it pending (filter, watch) with that UID (a filter of a new UID under a
        held name released the old pod); a retry of its bind succeeds again.

        :meth:`begin_bind`, :meth:`PendingBind.post` and :meth:`finish_bind` in a row:
        ``placer serve`` holds its state for the first and the last only."""
        begun = self.begin_bind(args, source)
        if isinstance(begun, dict):
            return begun
        return self.finish_bind(begun, begun.post())

    def begin_bind(self, args: BindingArgs, source: str = "POST /bind") -> "dict[str, Any] | PendingBind":
        """The first part of :meth:`bind`: the answer when there is nothing to post (a
        refusal, a retried bind), else the pod's GPUs held and the Binding to post
        (:class:`PendingBind`), which needs no state: other verbs may run meanwhile."""
        try:
            self._require_current(source)
        except StateNotCurrent as e:
            return {"Error": str(e)}
        key, uid = args.key, args.pod_uid
        held = self.cluster.session.holding(key)
        reserved = self._reserved.get(key)
        if reserved is None and key in self._bound and held is not None and _same_pod(self._bound[key], uid):
            if self.cluster.session.node_names[held[0]] == args.node:
                return {"Error": ""}  # a retry of a bind already made: nothing more to do
        try:
            if reserved is not None:
                if not _same_pod(self._uid_of.get(key, ""), uid):
                    raise InvalidInputError(
                        source, f"pod {key} with UID {uid} is not the pod reserved with its gang (UID "
                        f"{self._uid_of[key]}); placer binds only a pod it has seen"
                    )
                if reserved.node != args.node:
                    raise InvalidInputError(
                        source, f"pod {key} is reserved on {reserved.node} with its gang, not {args.node}"
                    )
                return PendingBind(self.binder, args, source, reserved, reserved=True)
            obj = self._pending.get(key)
            if obj is None:
                raise InvalidInputError(source, f"pod {key} was not seen by filter; placer does not know its requests")
            if not _same_pod(_uid(obj), uid):
                raise InvalidInputError(
                    source, f"pod {key} with UID {uid} was not seen by filter (placer saw UID {_uid(obj)}); "
                    "placer binds only a pod it has seen"
                )
            assignment = self._assignment_on(key, obj, args.node, source)
            self.cluster.bind(assignment)
            return PendingBind(self.binder, args, source, assignment, reserved=False)
        except InvalidInputError as e:
            return {"Error": str(e)}

    def finish_bind(self, pending: "PendingBind", error: Exception | None) -> dict[str, Any]:
        """The last part of :meth:`bind`, once the Binding was posted (``error`` None) or
        refused: the pod is bound in placer's state, or what it held released."""
        key, uid = pending.args.key, pending.args.pod_uid
        if error is not None:
            if not pending.reserved and self.cluster.session.holds(key):
                self.cluster.release(key)
            if isinstance(error, InvalidInputError):
                return {"Error": str(error)}
            return {"Error": f"{pending.source}: binding {key} to {pending.args.node} failed: {error}"}
        if pending.reserved:
            self._reserved.pop(key, None)
        else:
            self._pending.pop(key, None)
            self._filtered_at.pop(key, None)
            self._decided.pop(key, None)
        if uid:
            self._uid_of[key] = uid
        self._bound[key] = uid
        return {"Error": ""}

    def preempt(self, args: PreemptionArgs, source: str = "POST /preempt") -> dict[str, Any]:
        """``ExtenderPreemptionResult``: per node kube-scheduler proposed, placer's victims
        there by UID (nodes where placer finds no victims that let the pod fit, or victims
        whose UIDs it does not know, are left out).

        Raises
        ------
        StateNotCurrent
            While the state is not current.
        """
        self._require_current(source)
        for victim in args.victim_pods:
            uid = victim["metadata"].get("uid")
            if uid:
                self._uid_of[pod_key(victim)] = uid
        pod = self._request(args.pod, source).pods[0]
        cluster = self.cluster
        session = cluster.session
        out: dict[str, Any] = {}
        if preemption.eligible(pod, session.running(), session.node_index):
            return {"NodeNameToMetaVictims": out}
        allowed = np.zeros(session.n_nodes, dtype=bool)
        for name in args.victims:
            i = session.node_index.get(name)
            if i is not None:
                allowed[i] = True
        allowed &= session.eligibility(pod)[0]
        for found in preemption.candidates(session, cluster.to_snapshot(), pod, allowed):
            node = session.node_names[found.node]
            uids = [self._uid_of.get(p.name) for u in found.victims for p in u.on(found.node)]
            if all(uids):
                out[node] = {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": found.pdb_violations}
        return {"NodeNameToMetaVictims": out}

    # ------------------------------------------------------------------ decisions

    def _require_current(self, source: str) -> None:
        """Apply the queued events; raise :class:`StateNotCurrent` while the state is not current."""
        self.sync()
        why = self.not_current()
        if why:
            raise StateNotCurrent(f"{source}: placer's cluster state is not current, so placer does not decide on it: "
                                  f"{why}")

    def _remember(self, key: str, pod: Mapping[str, Any]) -> None:
        """Note a pending pod ``filter`` or ``prioritize`` sees (a new UID under a held name
        releases the old pod); forget the expired ones."""
        self._drop_if_replaced(key, _uid(pod))
        if key in self._filtered_at or key not in self._pending:  # not a pending pod the watch reports
            self._filtered_at.pop(key, None)
            self._filtered_at[key] = self._clock()  # last: the most recently filtered
        self._pending[key] = pod
        self._expire_pending()
        gang = self._gang_of(pod)
        if gang is not None and key not in self._reserved and not self.cluster.session.holds(key):
            gang.pending[key] = pod

    def _expire_pending(self) -> None:
        """Forget the pods seen only through ``filter`` longer ago than :attr:`pending_ttl_s`,
        and the oldest beyond :attr:`max_pending`."""
        now = self._clock()
        for key, seen in list(self._filtered_at.items()):
            if now - seen <= self.pending_ttl_s and len(self._filtered_at) <= self.max_pending:
                break
            del self._filtered_at[key]
            obj = self._pending.pop(key, None)
            self._decided.pop(key, None)
            gang = self._gang_of(obj) if obj is not None else None
            if gang is not None:
                gang.pending.pop(key, None)
                if gang.podgroup is None and not gang.pending:
                    del self._gangs[gang.name]
            self.pending_dropped += 1

    def _request(self, pod: Mapping[str, Any], source: str, extra: Sequence[Mapping[str, Any]] = ()) -> Any:
        """The PlacementRequest of a pending Pod object (and of ``extra`` objects: its gang);
        a lone pod's is kept for the verbs that follow (prioritize, bind)."""
        if extra:
            return self._import([_as_pod(pod), *extra], source)
        key = pod_key(pod)
        kept = self._requests.get(key)
        if kept is not None and kept[0] is pod:  # the same verb asking again
            return kept[2]
        written = _ENCODER.encode(pod)
        if kept is not None and (kept[1] == written or same_json_value(kept[0], pod)):
            return kept[2]  # the same bytes (what kube-scheduler sends), or the same value
        request = self._import([_as_pod(pod)], source)
        self._requests.pop(key, None)
        self._requests[key] = (pod, written, request)  # last: the most recently decoded
        if len(self._requests) > _KEPT_REQUESTS:
            del self._requests[next(iter(self._requests))]
        return request

    def _import(self, objects: list[dict[str, Any]], source: str) -> Any:
        try:
            imported = workloads_from_objects(
                objects, source, self.levels, self.policy, missing_podgroup="gang-of-present-pods"
            )
        except InvalidInputError as e:
            raise InvalidInputError(e.where.replace(f"{source}: [0]", f"{source}: Pod", 1), e.what) from None
        if not imported.request.pods:
            raise InvalidInputError(f"{source}: Pod", "the pod is not pending (it has a node or has finished)")
        for note in imported.notes:  # once per pod decoded: what placer does not model of it
            _log.warning("note: %s", note.replace(f"{source}: [0]", f"{source}: Pod", 1))
        return imported.request

    def _whole_decision(self, key: str, pod: Mapping[str, Any], source: str) -> Assignment | str | None:
        """For a pod placer places whole (a gang member's reservation; a pod of MIG
        instances or gpuSlots: placer's own node), its assignment, or why it fits nowhere;
        None for any other pod."""
        if key in self._reserved:
            return self._reserved[key]
        if key in self._decided:
            return self._decided[key]
        if self._gang_of(pod) is not None:
            return None
        the_pod: PodRequest = self._request(pod, source).pods[0]
        if the_pod.mig is None and not the_pod.gpu_slots:
            slots = self._slots_instead(the_pod)
            if slots is None:
                return None
            result = self.cluster.place(slots, policy=self._policy, seed=self.seed)
            if not result.assignments:
                return None  # _judge gives the nodes that share their reasons for the slots
            self._decided[key] = result.assignments[0]
            return result.assignments[0]
        result = self.cluster.place(the_pod, policy=self._policy, seed=self.seed)
        if not result.assignments:
            return result.unschedulable[0].reason
        self._decided[key] = result.assignments[0]
        return result.assignments[0]

    def _slots_instead(self, pod: PodRequest) -> PodRequest | None:
        """The pod's ``nvidia.com/gpu`` as slots (:func:`~placer.adapters.kubernetes.sharing.as_slots`)
        when some node shares its GPUs and no node has the whole GPUs it asks for: whole GPUs
        come first, then slots of shared ones."""
        slots = as_slots(pod)
        if slots is None or not self.cluster.session.free.slot_replicas.any():
            return None
        if (self.cluster.node_scores(pod, policy=self._policy, seed=self.seed) != _NO_SCORE).any():
            return None
        return slots

    def _judge(
        self, key: str, pod: Mapping[str, Any], names: Sequence[str], source: str
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(nodes that pass in candidate order, failed with reason, failed for good with reason)."""
        gang = self._gang_of(pod)
        if gang is not None and key not in self._reserved:
            why = self._plan_gang(gang, key, source)
            if why:
                return [], {n: why for n in names}, {}
        whole = self._whole_decision(key, pod, source)
        if isinstance(whole, str):
            return [], {n: whole for n in names}, {}
        if whole is not None:
            chosen = whole.node
            what = "its gang's reservation" if key in self._reserved else "the node placer chose"
            return [n for n in names if n == chosen], {n: f"{what} is {chosen}" for n in names if n != chosen}, {}
        the_pod = self._request(pod, source).pods[0]
        at, scores = self._scores(the_pod, names)
        fits = scores != _NO_SCORE
        passing = list(compress(names, fits.tolist()))
        failed = {n: _UNKNOWN_NODE for n, i in zip(names, at.tolist()) if i < 0}
        unresolvable: dict[str, str] = {}
        turned = np.flatnonzero(~fits & (at >= 0))
        if turned.size:
            session = self.cluster.session
            slots = self._slots_instead(the_pod)  # they fit no node either
            sharing = session.free.slot_replicas[at[turned]] > 0 if slots is not None else np.zeros(turned.size, bool)
            for asked, of in ((the_pod, ~sharing), (slots, sharing)):
                if asked is None or not of.any():
                    continue
                nodes = at[turned[of]]
                static_ok = session.eligibility(asked)[0][nodes].tolist()
                why = session.node_reasons(asked, nodes)
                for k, ok, reason in zip(turned[of].tolist(), static_ok, why):
                    (failed if ok else unresolvable)[names[k]] = reason
        return passing, failed, unresolvable

    def _plan_gang(self, gang: _Gang, filtering: str, source: str) -> str:
        """Reserve the whole gang when all its pods are pending and it fits, and have the
        binder wake its members but ``filtering`` (the pod being filtered: kube-scheduler
        parked the others it turned away); "" when reserved, else why the member must wait."""
        if gang.podgroup is None:
            return f"gang {gang.name}: PodGroup not known to placer (give it with --podgroups or the watch)"
        running = sum(1 for _, p in self.cluster.session.running() if p.gang == gang.name)
        seen = len(gang.pending) + running
        if seen < gang.min_member:
            return f"gang {gang.name} waits for its pods: {seen} of minMember {gang.min_member} seen"
        members = [_as_pod(p) for p in gang.pending.values()]
        request = self._request(members[0], source, [*members[1:], gang.podgroup])
        spec = request.gangs.get(gang.name)
        result = self.cluster.place(list(request.pods), gang=spec, policy=self._policy, seed=self.seed)
        if result.unschedulable or len(result.assignments) != len(request.pods):
            reason = result.unschedulable[0].reason if result.unschedulable else "no room"
            reason = _CLUSTER_COUNT.sub("", reason.removeprefix(f"gang {gang.name}: "))
            return f"gang {gang.name} does not fit: {reason}"
        self.cluster.bind(result)
        parked = []
        for a in result.assignments:
            self._reserved[a.pod] = a
            uid = _uid(gang.pending.pop(a.pod, None) or {})
            if uid:
                self._uid_of[a.pod] = uid
            if a.pod != filtering:
                namespace, _, name = a.pod.partition("/")
                parked.append(ReservedMember(namespace, name, uid, a.node))
        wake = getattr(self.binder, "wake", None)
        if wake is not None and parked:
            wake(parked)
        return ""

    def _assignment_on(self, key: str, obj: Mapping[str, Any], node: str, source: str) -> Assignment:
        if self._gang_of(obj) is not None:
            raise InvalidInputError(source, f"pod {key} is a gang member without a reservation; filter it first")
        decided = self._whole_decision(key, obj, source)  # a pod of MIG instances or gpuSlots
        if isinstance(decided, str):
            raise InvalidInputError(source, f"pod {key} fits nowhere: {decided}")
        if decided is not None:
            if decided.node != node:
                raise InvalidInputError(source, f"placer placed pod {key} on {decided.node}, not {node}")
            return decided
        pod = self._request(obj, source).pods[0]
        result = self.cluster.place_on(pod, node, policy=self._policy, seed=self.seed)
        if not result.assignments:
            raise InvalidInputError(source, f"pod {key} does not fit on {node}: {result.unschedulable[0].reason}")
        return result.assignments[0]

    def state(self) -> dict[str, Any]:
        """What ``/healthz`` reports: nodes, pods running, pending, reserved, events, pending
        pods forgotten (:attr:`pending_ttl_s`, :attr:`max_pending`), pods bound to a node
        not known yet (their events wait for it)."""
        self._expire_pending()
        session = self.cluster.session
        return {
            "nodes": session.n_nodes,
            "pods": sum(1 for _ in session.running()),
            "pending": len(self._pending),
            "reserved": len(self._reserved),
            "gangs_waiting": sum(1 for g in self._gangs.values() if g.pending),
            "events_applied": self.applied_events,
            "events_refused": self.refused_events,
            "events_queued": len(self._queued),
            "pending_dropped": self.pending_dropped,
            "awaiting_node": len(self._awaiting_node),
        }


_CLUSTER_COUNT = re.compile(r"; 0/\d+ nodes are available: .*\Z", re.S)
"""The whole-cluster count that ends a gang's reason: kube-scheduler counts the nodes' reasons
itself (its ``0/N nodes are available: …``), so a node's reason leaves placer's out."""


def _uid(obj: Mapping[str, Any]) -> str:
    uid = (obj.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) else ""


def _unknown_node(obj: Mapping[str, Any], event_type: str, nodes: Mapping[str, int], adding: set[str]) -> str:
    """The node a Pod event binds the pod to when placer does not know that node and the
    events with it do not add it (the Pods' list or watch came before the Nodes'); "" else."""
    spec, status = obj.get("spec"), obj.get("status")
    name = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    if event_type == "DELETED" or not isinstance(name, str) or not name or phase in ("Succeeded", "Failed"):
        return ""
    return "" if name in nodes or name in adding else name


def _same_pod(uid: str, other: str) -> bool:
    """Whether two UIDs name the same pod (a missing one matches any)."""
    return not uid or not other or uid == other


def _api_key(obj: Mapping[str, Any]) -> str:
    """How placer names an object: ``namespace/name`` (a Node: its name)."""
    return obj["metadata"]["name"] if obj.get("kind") == "Node" else pod_key(obj)


def _named_object(kind: str, key: str) -> dict[str, Any]:
    """The least object of ``kind`` that :func:`_api_key` names ``key``: what a deletion needs."""
    if kind == "Node":
        return {"kind": kind, "metadata": {"name": key}}
    namespace, _, name = key.partition("/")
    return {"kind": kind, "metadata": {"name": name, "namespace": namespace}}


_TOLD_BY_NODE = ("unschedulable", "taints", "labels")
"""The fields of a node entry that a Node object always tells, given or not."""
_TOLD_BY_ALLOCATABLE = ("gpus", "gpuSharing", "cpuMilli", "memoryMiB", "maxPods", "resources")
"""The fields a Node object's ``status.allocatable`` tells: absent from it, absent."""


def _allocatable(obj: Mapping[str, Any]) -> bool:
    """Whether a Node object reports ``status.allocatable``."""
    status = obj.get("status")
    return isinstance(status, Mapping) and isinstance(status.get("allocatable"), Mapping)


def _named(obj: Any) -> bool:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return isinstance(meta, Mapping) and isinstance(meta.get("name"), str) and bool(meta["name"])


def _as_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod object with the kind and apiVersion the workload importer needs (the
    extender's payloads leave them out)."""
    out = dict(obj)
    out.setdefault("kind", "Pod")
    out.setdefault("apiVersion", "v1")
    return out
