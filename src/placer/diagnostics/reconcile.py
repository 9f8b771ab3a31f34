"""Zombie-GPU reconciliation: what a snapshot says a node's GPUs hold vs what runs on them.

``placer reconcile SNAPSHOT --node NAME --gpus CSV --apps CSV`` compares, for one node,
the pods of a :class:`~placer.model.ClusterSnapshot` (who holds which GPU index) with two
outputs of ``nvidia-smi`` taken on that node (parsed by
:mod:`placer.adapters.nvidia_smi.query`):

* ``nvidia-smi --query-gpu=index,uuid --format=csv`` — maps each GPU UUID to its index;
* ``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv`` — the
  processes and the GPU (by UUID) each runs on.

A GPU index of the node then falls in one of these classes (:attr:`GpuReport.status`):

``busy``
    held by a live pod and running processes — as it should be;
``free``
    held by no pod and running nothing;
``zombie``
    running processes but held by no live pod (a crashed job's orphans, a process
    started outside the scheduler): the memory and compute are lost to the scheduler;
``idle``
    held by a pod (whole, or a share) but running no process: allocated and wasted;
``unverifiable``
    the node has pods whose GPU indices are not known — ``unknownGpus`` pods, whose
    indices placer only assumed, and pods holding MIG devices
    (``nvidia.com/mig-*`` resources). Such a pod may sit on any GPU no pod with known
    indices holds, so on those GPUs processes cannot be told from zombies, nor an
    assumed-held GPU without processes from an idle one. They are reported, never as
    zombies or idle;
``missing``
    a GPU index of the node that the ``--query-gpu`` output does not list (a GPU that
    fell off the bus, or a query limited with ``-i``).

Processes cannot be matched to pods (that needs the container runtime), so a GPU shared
by several pods counts as busy when any process runs on it.

:func:`watch` repeats the comparison (``placer reconcile --watch``): every round reads the
snapshot again and asks for the ``nvidia-smi`` rows afresh
(:func:`placer.adapters.nvidia_smi.live.query_node` runs the two queries).
"""

from __future__ import annotations

import difflib
import itertools
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping, NoReturn, Protocol, Sequence, Union

from placer.exceptions import InvalidInputError, PlacerError
from placer.model import ClusterSnapshot, Node, RunningPod, load_snapshot

__all__ = [
    "STATUSES",
    "DEFAULT_INTERVAL_S",
    "GpuRow",
    "ProcessRow",
    "GpuReport",
    "Suggestion",
    "Reconciliation",
    "WatchRound",
    "reconcile",
    "watch",
]

SnapshotLike = Union[ClusterSnapshot, Mapping[str, Any], str]

STATUSES = ("busy", "free", "zombie", "idle", "unverifiable", "missing")

DEFAULT_INTERVAL_S = 300.0
"""Seconds from one round of :func:`watch` to the next unless told otherwise."""

_MIG_PREFIX = "nvidia.com/mig-"
_KNOWN_NODES_SHOWN = 5


class GpuRow(Protocol):
    """A GPU as ``nvidia-smi --query-gpu=index,uuid`` lists it.

    :class:`placer.adapters.nvidia_smi.query.GpuInfo` is one; any object with these
    attributes will do.
    """

    @property
    def index(self) -> int | None:
        """The device index (``None`` when not known: an error in :func:`reconcile`)."""

    @property
    def uuid(self) -> str | None:
        """The GPU UUID (``GPU-...``; ``None`` when not known: an error)."""

    @property
    def where(self) -> str:
        """``"<file>:<line>"`` of the row, ``""`` when it was not read from a file."""


class ProcessRow(Protocol):
    """A process on a GPU as ``nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory``
    lists it.

    :class:`placer.adapters.nvidia_smi.query.ComputeApp` is one; any object with these
    attributes will do.
    """

    @property
    def gpu_uuid(self) -> str:
        """The UUID of the GPU the process runs on."""

    @property
    def pid(self) -> int | None:
        """The process id, ``None`` when not known."""

    @property
    def used_memory_mib(self) -> int | None:
        """The GPU memory it uses in MiB, ``None`` when not known."""

    @property
    def where(self) -> str:
        """``"<file>:<line>"`` of the row, ``""`` when it was not read from a file."""


@dataclass(frozen=True)
class GpuReport:
    """One GPU index of the node: who holds it and what runs on it.

    Attributes
    ----------
    index : int
        The device index.
    uuid : str or None
        Its UUID from ``--query-gpu``; ``None`` when the output does not list it.
    pods : tuple of str
        Live pods that hold it by the snapshot, with known indices (whole or a share),
        in snapshot order.
    maybe_pods : tuple of str
        Pods with unknown GPU indices that may hold it (``unknownGpus`` or MIG pods),
        only for GPUs no pod with known indices holds.
    pids : tuple of int
        Distinct process ids running on it, ascending.
    processes : int
        Lines of ``--query-compute-apps`` for it (with or without a pid).
    used_memory_mib : int or None
        GPU memory its processes use, summed over the ones that report it; ``None``
        when none does (or no process runs).
    status : str
        One of :data:`STATUSES` (see the module docstring).
    """

    index: int
    uuid: str | None
    pods: tuple[str, ...]
    maybe_pods: tuple[str, ...]
    pids: tuple[int, ...]
    processes: int
    used_memory_mib: int | None
    status: str


@dataclass(frozen=True)
class Suggestion:
    """One thing an operator could do about the findings.

    Attributes
    ----------
    action : str
        ``kill`` (the pids on a zombie GPU), ``inspect`` (a zombie GPU whose pids are
        not known), ``ask-owner`` (a pod holding idle GPUs), ``verify`` (unverifiable
        GPUs: find out where the pods with unknown indices run before acting) or
        ``check-hardware`` (GPUs ``nvidia-smi`` does not list).
    message : str
        One line for a human.
    gpus : tuple of int
        The GPU indices concerned.
    pids : tuple of int
        Processes to end (``kill`` only).
    pods : tuple of str
        Pods concerned (``ask-owner``, ``verify``, ``check-hardware``).
    """

    action: str
    message: str
    gpus: tuple[int, ...] = ()
    pids: tuple[int, ...] = ()
    pods: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"action": self.action, "gpus": list(self.gpus)}
        if self.pids:
            d["pids"] = list(self.pids)
        if self.pods:
            d["pods"] = list(self.pods)
        d["message"] = self.message
        return d


@dataclass(frozen=True)
class Reconciliation:
    """The outcome of :func:`reconcile` for one node.

    Attributes
    ----------
    node : str
        The node name.
    gpus : tuple of GpuReport
        One per GPU index of the node, ``0..n-1``.
    suggestions : tuple of Suggestion
        What to do: kills for zombie GPUs first (by GPU), then owners to ask (by pod
        name order of the snapshot), then GPUs to verify, then missing GPUs.
    """

    node: str
    gpus: tuple[GpuReport, ...]
    suggestions: tuple[Suggestion, ...] = field(default=())

    def _with(self, status: str) -> tuple[GpuReport, ...]:
        return tuple(g for g in self.gpus if g.status == status)

    @property
    def zombies(self) -> tuple[GpuReport, ...]:
        """GPUs running processes that no live pod holds."""
        return self._with("zombie")

    @property
    def idle(self) -> tuple[GpuReport, ...]:
        """GPUs held by pods but running no process."""
        return self._with("idle")

    @property
    def unverifiable(self) -> tuple[GpuReport, ...]:
        """GPUs whose state depends on where pods with unknown indices really run."""
        return self._with("unverifiable")

    @property
    def missing(self) -> tuple[GpuReport, ...]:
        """GPU indices of the node that ``--query-gpu`` does not list."""
        return self._with("missing")

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``placer reconcile``.

        ``{"node": ..., "zombies": [{"gpu", "uuid", "pids", "processes",
        "usedMemoryMiB"}], "idle": [{"gpu", "uuid", "pods"}], "unverifiable": [{"gpu",
        "uuid", "pods", "pids", "processes", "usedMemoryMiB"}], "missing": [{"gpu",
        "pods"}], "suggestions": [{"action", "gpus", "pids"?, "pods"?, "message"}]}``,
        every list ordered by GPU index; ``usedMemoryMiB`` is ``null`` when unknown.
        ``pods`` of an unverifiable GPU are the pods with unknown indices that may hold
        it.
        """
        return {
            "node": self.node,
            "zombies": [
                {
                    "gpu": g.index,
                    "uuid": g.uuid,
                    "pids": list(g.pids),
                    "processes": g.processes,
                    "usedMemoryMiB": g.used_memory_mib,
                }
                for g in self.zombies
            ],
            "idle": [{"gpu": g.index, "uuid": g.uuid, "pods": list(g.pods)} for g in self.idle],
            "unverifiable": [
                {
                    "gpu": g.index,
                    "uuid": g.uuid,
                    "pods": list(g.maybe_pods),
                    "pids": list(g.pids),
                    "processes": g.processes,
                    "usedMemoryMiB": g.used_memory_mib,
                }
                for g in self.unverifiable
            ],
            "missing": [{"gpu": g.index, "pods": list(g.pods + g.maybe_pods)} for g in self.missing],
            "suggestions": [s.to_dict() for s in self.suggestions],
        }


def reconcile(
    snapshot: SnapshotLike,
    node: str,
    gpus: Sequence[GpuRow],
    apps: Sequence[ProcessRow],
) -> Reconciliation:
    """Compare what the snapshot's pods hold on ``node`` with what runs on its GPUs.

    Parameters
    ----------
    snapshot : ClusterSnapshot, dict or path
        The cluster; every pod of the node counts as live.
    node : str
        The node whose ``nvidia-smi`` output ``gpus`` and ``apps`` are.
    gpus : sequence of GpuRow
        ``--query-gpu`` rows (:class:`~placer.adapters.nvidia_smi.query.GpuInfo`); each
        needs ``index`` and ``uuid``.
    apps : sequence of ProcessRow
        ``--query-compute-apps`` rows; their ``gpu_uuid`` must be among ``gpus``.

    Returns
    -------
    Reconciliation
        One :class:`GpuReport` per GPU index of the node, and suggestions.

    Raises
    ------
    InvalidInputError
        ``where`` = ``"node"`` for a node name the snapshot does not have (naming close
        and a few known names); ``where`` = the row's ``file:line`` (``gpus[i]`` /
        ``apps[i]`` for rows not read from a file) for a GPU row without index or UUID,
        a GPU index or UUID listed twice, a GPU index the node does not have (beyond its
        GPU count in the snapshot), or a process on a GPU UUID that ``gpus`` does not
        list.
    """
    snap = load_snapshot(snapshot)
    the_node = _find_node(snap, node)
    count = the_node.hardware.gpus

    uuid_index: dict[str, int] = {}
    listed: dict[int, str] = {}
    for i, row in enumerate(gpus):
        where = row.where or f"gpus[{i}]"
        if row.index is None or row.uuid is None:
            missing = " and ".join(c for c, v in (("index", row.index), ("uuid", row.uuid)) if v is None)
            _fail(
                where,
                f"expected a GPU row with index and uuid (nvidia-smi --query-gpu=index,uuid "
                f"--format=csv), got none for {missing}",
            )
        if row.index >= count:
            _fail(
                where,
                f"GPU index {row.index} is beyond node {the_node.name!r}, which has "
                + (f"{count} GPU(s) (0..{count - 1})" if count else "no GPUs")
                + " in the snapshot",
            )
        if row.index in listed:
            _fail(where, f"GPU index {row.index} is listed twice")
        if row.uuid in uuid_index:
            _fail(where, f"GPU {row.uuid} is listed twice")
        listed[row.index] = row.uuid
        uuid_index[row.uuid] = row.index

    on_gpu: dict[int, list[ProcessRow]] = {g: [] for g in range(count)}
    for i, app in enumerate(apps):
        index = uuid_index.get(app.gpu_uuid)
        if index is None:
            known = ", ".join(f"{u} (GPU {g})" for u, g in list(uuid_index.items())[:4])
            more = f", ... ({len(uuid_index)} in all)" if len(uuid_index) > 4 else ""
            hint = ""
            if app.gpu_uuid.startswith("MIG-"):
                hint = " (a MIG device UUID; query its parent GPU's UUID)"
            _fail(
                app.where or f"apps[{i}]",
                f"process{'' if app.pid is None else f' {app.pid}'} runs on GPU {app.gpu_uuid}, "
                f"which the --query-gpu output does not list{hint}; listed: "
                + (known + more if known else "no GPUs"),
            )
        on_gpu[index].append(app)

    holders: dict[int, list[str]] = {g: [] for g in range(count)}
    unknown: list[RunningPod] = []
    assumed: dict[int, list[str]] = {g: [] for g in range(count)}
    for pod in the_node.pods:
        held = set(pod.gpu_shares) | set(pod.gpu_memory_mib)
        if pod.gpu_indices_known:
            held |= set(pod.gpus)
        else:
            for g in pod.gpus:
                if g < count:
                    assumed[g].append(pod.name)
        for g in sorted(held):
            if g < count:
                holders[g].append(pod.name)
        mig = any(name.startswith(_MIG_PREFIX) and n > 0 for name, n in pod.resources.items())
        if (pod.gpus and not pod.gpu_indices_known) or mig:
            unknown.append(pod)
    maybe = tuple(pod.name for pod in unknown)

    reports: list[GpuReport] = []
    for g in range(count):
        procs = on_gpu[g]
        pids = tuple(sorted({p.pid for p in procs if p.pid is not None}))
        memory = [p.used_memory_mib for p in procs if p.used_memory_mib is not None]
        candidate = bool(maybe) and not holders[g]
        if g not in listed:
            status = "missing"
        elif candidate and (procs or assumed[g]):
            status = "unverifiable"
        elif holders[g]:
            status = "busy" if procs else "idle"
        else:
            status = "zombie" if procs else "free"
        reports.append(
            GpuReport(
                index=g,
                uuid=listed.get(g),
                pods=tuple(holders[g]),
                maybe_pods=maybe if candidate else (),
                pids=pids,
                processes=len(procs),
                used_memory_mib=sum(memory) if memory else None,
                status=status,
            )
        )
    return Reconciliation(the_node.name, tuple(reports), _suggest(the_node, reports))


GpuQuery = Callable[[], tuple[Sequence[GpuRow], Sequence[ProcessRow]]]
"""What :func:`watch` calls each round: the node's ``--query-gpu`` and
``--query-compute-apps`` rows as they are now."""


@dataclass(frozen=True)
class WatchRound:
    """One round of :func:`watch`: its reconciliation, or why there is none.

    Attributes
    ----------
    number : int
        1 for the first round.
    started : datetime.datetime
        When the round started, in UTC.
    reconciliation : Reconciliation or None
        The outcome; ``None`` when the round failed.
    error : PlacerError or None
        Why the round failed (a snapshot or query that could not be read, a node the
        snapshot does not have, ...); ``None`` when it succeeded.
    """

    number: int
    started: datetime
    reconciliation: Reconciliation | None = None
    error: PlacerError | None = None

    @property
    def ok(self) -> bool:
        """Whether the round produced a reconciliation."""
        return self.error is None

    @property
    def timestamp(self) -> str:
        """:attr:`started` in ISO 8601 to the second, ``2025-06-01T12:00:00Z``."""
        return self.started.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def to_dict(self) -> dict[str, Any]:
        """The JSON line of ``placer reconcile --watch``.

        ``{"round": 1, "time": "2025-06-01T12:00:00Z", **Reconciliation.to_dict()}``; a
        failed round has ``"error"`` (the message) instead of the reconciliation's keys.
        """
        head: dict[str, Any] = {"round": self.number, "time": self.timestamp}
        if self.reconciliation is None:
            return {**head, "error": str(self.error)}
        return {**head, **self.reconciliation.to_dict()}


def watch(
    snapshot: SnapshotLike,
    node: str,
    query: GpuQuery,
    interval: float = DEFAULT_INTERVAL_S,
    rounds: int | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> Iterator[WatchRound]:
    """Reconcile ``node`` every ``interval`` seconds, reading the snapshot and querying
    its GPUs afresh each round.

    Parameters
    ----------
    snapshot : path, dict or ClusterSnapshot
        The cluster. A path is read again, whole, each round, so the file may be
        rewritten between rounds; a half-written JSON file fails that round only (replace
        the file by renaming a new one over it: a YAML file cut at a line end may still
        be a valid, smaller snapshot).
    node : str
        The node whose GPUs ``query`` reports.
    query : callable
        Returns the node's ``--query-gpu`` and ``--query-compute-apps`` rows as they are
        now, e.g. :func:`placer.adapters.nvidia_smi.live.query_node`.
    interval : float
        Seconds from the start of one round to the start of the next, > 0; a round that
        takes longer is followed at once by the next.
    rounds : int, optional
        Stop after this many rounds (>= 1); by default never.
    sleep : callable
        Waits the given number of seconds (:func:`time.sleep`; tests pass a fake).
    clock : callable
        The time now, in seconds since the epoch (:func:`time.time`).

    Yields
    ------
    WatchRound
        One per round, in order. A :class:`~placer.exceptions.PlacerError` while reading
        the snapshot, querying or reconciling fails that round only.

    Raises
    ------
    InvalidInputError
        At the call, before any round: ``where`` = ``"interval"`` for an interval that is
        not a finite number > 0, ``"rounds"`` for rounds below 1.
    """
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise InvalidInputError("interval", f"expected a number of seconds > 0, got {interval!r}")
    if not (math.isfinite(interval) and interval > 0):
        raise InvalidInputError("interval", f"expected a number of seconds > 0, got {interval:g}")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
        raise InvalidInputError("rounds", f"expected an integer >= 1, got {rounds!r}")
    numbers: Iterable[int] = itertools.count(1) if rounds is None else range(1, rounds + 1)
    return _watch_rounds(snapshot, node, query, float(interval), numbers, sleep, clock)


def _watch_rounds(
    snapshot: SnapshotLike,
    node: str,
    query: GpuQuery,
    interval: float,
    numbers: Iterable[int],
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> Iterator[WatchRound]:
    next_start: float | None = None
    for number in numbers:
        if next_start is not None:
            # Clamped: a wall clock set back must not hold the next round for longer.
            sleep(min(interval, max(0.0, next_start - clock())))
        started = clock()
        next_start = started + interval
        when = datetime.fromtimestamp(started, timezone.utc)
        try:
            cluster = load_snapshot(snapshot)
            gpus, apps = query()
            found = reconcile(cluster, node, gpus, apps)
        except PlacerError as error:
            yield WatchRound(number, when, error=error)
        else:
            yield WatchRound(number, when, reconciliation=found)


# ----------------------------------------------------------------------------- helpers


def _fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)


def _find_node(snap: ClusterSnapshot, name: str) -> Node:
    for node in snap.nodes:
        if node.name == name:
            return node
    names = [n.name for n in snap.nodes]
    if not names:
        _fail("node", f"no node named {name!r}: the snapshot has no nodes")
    close = difflib.get_close_matches(name, names, n=3)
    shown = close + [n for n in names if n not in close][: max(0, _KNOWN_NODES_SHOWN - len(close))]
    more = f", ... ({len(names)} in all)" if len(names) > len(shown) else ""
    what = f"no node named {name!r} in the snapshot"
    if close:
        what += f" (did you mean {', '.join(map(repr, close))}?)"
    _fail("node", f"{what}; known nodes: {', '.join(shown)}{more}")


def _ids(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


def _suggest(node: Node, reports: Sequence[GpuReport]) -> tuple[Suggestion, ...]:
    out: list[Suggestion] = []
    for g in reports:
        if g.status != "zombie":
            continue
        memory = f", {g.used_memory_mib} MiB in use" if g.used_memory_mib is not None else ""
        if g.pids:
            out.append(
                Suggestion(
                    "kill",
                    f"GPU {g.index} ({g.uuid}) is held by no live pod but runs pid(s) "
                    f"{_ids(g.pids)}{memory}: end them (kill {' '.join(map(str, g.pids))}) "
                    "to give the GPU back to the scheduler",
                    gpus=(g.index,),
                    pids=g.pids,
                )
            )
        else:
            out.append(
                Suggestion(
                    "inspect",
                    f"GPU {g.index} ({g.uuid}) is held by no live pod but runs "
                    f"{g.processes} process(es){memory}; query their pids "
                    f"(nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv "
                    f"-i {g.index}) and end them",
                    gpus=(g.index,),
                )
            )
    idle_by_pod: dict[str, list[int]] = {}
    for g in reports:
        if g.status == "idle":
            for pod in g.pods:
                idle_by_pod.setdefault(pod, []).append(g.index)
    for pod in node.pods:
        if pod.name in idle_by_pod:
            indices = tuple(idle_by_pod[pod.name])
            out.append(
                Suggestion(
                    "ask-owner",
                    f"pod {pod.name} holds GPU(s) {_ids(indices)} but runs no process on "
                    "them: ask its owner to use or release them",
                    gpus=indices,
                    pods=(pod.name,),
                )
            )
    unverifiable = [g for g in reports if g.status == "unverifiable"]
    if unverifiable:
        pods = unverifiable[0].maybe_pods
        out.append(
            Suggestion(
                "verify",
                f"pod(s) {', '.join(pods)} hold GPUs at indices the snapshot does not know; "
                f"find out which GPUs they use before treating GPU(s) "
                f"{_ids([g.index for g in unverifiable])} as zombie or idle",
                gpus=tuple(g.index for g in unverifiable),
                pods=pods,
            )
        )
    missing = [g for g in reports if g.status == "missing"]
    if missing:
        pods = tuple(dict.fromkeys(p for g in missing for p in g.pods + g.maybe_pods))
        out.append(
            Suggestion(
                "check-hardware",
                f"nvidia-smi does not list GPU(s) {_ids([g.index for g in missing])} of node "
                f"{node.name} (fallen off the bus, or a query limited with -i)",
                gpus=tuple(g.index for g in missing),
                pods=pods,
            )
        )
    return tuple(out)
