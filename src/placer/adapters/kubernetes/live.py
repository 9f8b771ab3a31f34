"""The live Kubernetes API for ``placer serve``: watch events (recorded or live) and binds.

Two sources give the same :class:`WatchEvent` objects, so the code that applies them
(:meth:`placer.serve.extender.Extender.sync`) is the one tested:

* :func:`read_watch_stream`: what ``kubectl get pods -w -o json`` (or ``nodes``,
  ``podgroups``) prints: JSON objects one after another, each on one line or pretty-printed
  over several. With ``--output-watch-events`` each is ``{"type": ..., "object": ...}``;
  without, the type is not printed: an object counts as ADDED/MODIFIED, and a deletion is
  seen only as the object's last state (use ``--output-watch-events`` to replay deletions).
  A ``List`` (the first answer of ``kubectl get -o json``) counts as ADDED items.
* :func:`watch_cluster`: the API server itself, through the official ``kubernetes``
  client and a kubeconfig: list then watch Nodes, Pods and coscheduling PodGroups, as
  client-go's reflector does. A watch that ends at its timeout resumes from the last
  resourceVersion (which BOOKMARK events advance, without a change to apply); a watch
  that fails (``410 Gone``: the version is too old, as an HTTP status or an ERROR event;
  or any other error: events may have been missed) lists again, and the list
  (:class:`Listing`) replaces what was known of that kind. :class:`WatchHealth` follows
  how each kind's watch is doing (for ``/readyz`` and ``/metrics``) and logs a run of
  failures in two lines: the first, then how it ended (recovered, or another error).

:class:`KubeBinder` writes placer's decisions through the same client: the pod's Binding,
with placer's annotations (``placer.io/gpus``, ``placer.io/mig``, ...), and the
``placer.io/reserved-node`` annotation that makes kube-scheduler retry a gang member it
parked before placer reserved its gang (:meth:`KubeBinder.wake`).
"""
from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from typing import Any, Callable, Iterator

from dataclasses import dataclass
from typing import Mapping, Sequence

from placer.exceptions import InvalidInputError

__all__ = [
    "EVENT_TYPES", "WatchEvent", "Listing", "read_watch_stream", "read_watch_file", "read_podgroups", "watch_cluster",
    "WATCH_TIMEOUT_S", "WatchHealth", "watch_failure", "require_kubernetes",
    "api_client", "verifies_the_api_server", "API_TIMEOUT_S", "KubeBinder", "ReservedMember",
    "RESERVED_NODE_ANNOTATION",
]

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
_KINDS = ("Node", "Pod", "PodGroup")
_PODGROUP_API = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
_FIRST_RETRY_S, _LAST_RETRY_S = 1.0, 60.0
_GONE = 410
WATCH_TIMEOUT_S = 300
"""The watch's server-side timeout: a healthy watch of a quiet cluster answers this often."""
API_TIMEOUT_S = 10.0
"""Default of ``--api-timeout``: the most a Binding call or a list of the watch may take."""
RESERVED_NODE_ANNOTATION = "placer.io/reserved-node"
"""The annotation :meth:`KubeBinder.wake` writes on a reserved gang member: its node."""

_log = logging.getLogger("placer.watch")


@dataclass(frozen=True)
class WatchEvent:
    """One change the Kubernetes API reported: ``type`` ADDED, MODIFIED or DELETED, and the
    object (a Node, Pod or PodGroup) as it is after the change; ``where`` names its origin
    in errors (``pods.watch:12``)."""

    type: str
    object: Mapping[str, Any]
    where: str = "watch"


@dataclass(frozen=True)
class Listing:
    """A list of one kind (``Node``, ``Pod`` or ``PodGroup``) from the API server: every
    object of that kind as it is now. It replaces what was known of the kind: objects
    known before and not in ``items`` are gone (deleted while no watch saw it)."""

    kind: str
    items: Sequence[Mapping[str, Any]]
    where: str = "list"


def read_watch_stream(text: str, source: str) -> Iterator[WatchEvent]:
    """The events of a recorded watch stream (see the module docs).

    Parameters
    ----------
    text : str
        The stream as printed.
    source : str
        What errors name (a file name); each event's ``where`` is ``<source>:<line>``.

    Raises
    ------
    InvalidInputError
        At ``<source>:<line>``: text that is not JSON, an event type other than ADDED,
        MODIFIED or DELETED, an object of a kind other than Node, Pod or PodGroup.
    """
    decoder = json.JSONDecoder()
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InvalidInputError(f"{source}:{e.lineno}", f"invalid JSON in the watch stream: {e.msg}") from None
        except RecursionError:
            raise InvalidInputError(f"{source}:{line}", "invalid JSON: nested too deeply") from None
        yield from _events(value, f"{source}:{line}")


def _events(value: Any, where: str) -> Iterator[WatchEvent]:
    if not isinstance(value, dict):
        raise InvalidInputError(where, "expected a watch event or a Kubernetes object (a JSON object)")
    if "object" in value and "type" in value:
        kind = value["type"]
        if kind not in EVENT_TYPES:
            raise InvalidInputError(where, f"expected an event type of {', '.join(EVENT_TYPES)}, got {kind!r}")
        yield WatchEvent(kind, _object(value["object"], where), where)
    elif isinstance(value.get("items"), list) and str(value.get("kind", "List")).endswith("List"):
        for item in value["items"]:
            yield WatchEvent("ADDED", _object(item, where), where)
    else:
        yield WatchEvent("MODIFIED", _object(value, where), where)


def _object(obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or obj.get("kind") not in _KINDS:
        got = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise InvalidInputError(where, f"expected a {', '.join(_KINDS[:-1])} or {_KINDS[-1]} object, got {got!r}")
    return obj


def read_watch_file(path: str) -> list[WatchEvent]:
    """:func:`read_watch_stream` of a file (UTF-8)."""
    from placer.text.files import read_text

    return list(read_watch_stream(read_text(path), path))


def read_podgroups(path: str) -> list[dict[str, Any]]:
    """The PodGroup objects of a file (``kubectl get podgroups -A -o json`` or YAML).

    Raises
    ------
    InvalidInputError
        At the file location of an object that is not a PodGroup, or of bad syntax.
    """
    from placer.adapters.kubernetes.documents import document_objects, read_documents

    found: list[dict[str, Any]] = []
    for doc in read_documents(path):
        for where, obj in document_objects(doc):
            if not isinstance(obj, dict) or obj.get("kind") != "PodGroup":
                doc.fail(where, "expected PodGroup objects only")
            found.append(obj)
    return found


def require_kubernetes() -> Any:
    """The official ``kubernetes`` client module, or a one-line error naming the extra."""
    try:
        import kubernetes
    except ImportError:
        raise InvalidInputError(
            "--kubeconfig", "the Kubernetes client is not installed: pip install 'placer[serve]'"
        ) from None
    return kubernetes


def api_client(kubeconfig: str) -> Any:
    """A client of the official ``kubernetes`` package for this kubeconfig. A call whose
    answer does not come within its ``_request_timeout`` fails at once: urllib3 would
    send a GET (a list) up to four times, each with the whole timeout (the watch retries
    itself, with backoff); a connection that cannot be made is still tried again.

    Raises
    ------
    InvalidInputError
        At ``--kubeconfig`` when the client is missing or the file cannot be loaded.
    """
    kubernetes = require_kubernetes()
    from urllib3.util.retry import Retry

    configuration = kubernetes.client.Configuration()
    configuration.retries = Retry(Retry.DEFAULT.total, read=0)
    try:
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig, client_configuration=configuration)
    except Exception as e:  # the client raises ConfigException, OSError, yaml errors
        raise InvalidInputError("--kubeconfig", f"{kubeconfig}: {e}") from None
    if not verifies_the_api_server(client):  # said once at start (placer serve's note), not on every request
        import warnings

        from urllib3.exceptions import InsecureRequestWarning

        warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    return client


def verifies_the_api_server(client: Any) -> bool:
    """Whether ``client`` (:func:`api_client`) checks the API server's certificate (a
    kubeconfig's ``insecure-skip-tls-verify: true`` turns the check off)."""
    return bool(client.configuration.verify_ssl)


def watch_failure(error: BaseException) -> str:
    """A failed list or watch in a few words, alike for every retry of the same fault: an
    API error's HTTP status (and its Status message), a network error's words from the OS
    (``connection refused``), a timeout's message, else the exception's text without
    object addresses."""
    status = getattr(error, "status", None)
    if isinstance(status, int) and status:  # the client's ApiException
        text = f"HTTP {status} {getattr(error, 'reason', '') or ''}".rstrip()
        try:
            message = json.loads(getattr(error, "body", None) or "{}").get("message")
        except (ValueError, AttributeError):
            message = None
        return f"{text}: {message}" if isinstance(message, str) and message else text
    if isinstance(error, TimeoutError) and error.strerror is None and error.args:  # placer's own (--api-timeout)
        return str(error)
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror[:1].lower() + cause.strerror[1:]
        reason = getattr(cause, "reason", None)  # urllib3's MaxRetryError holds the connection's error
        cause = reason if isinstance(reason, BaseException) else cause.__cause__ or cause.__context__
    return re.sub(r" at 0x[0-9a-fA-F]+", "", f"{type(error).__name__}: {error}")


@dataclass
class _Failing:
    """A run of failed attempts of one kind's watch; ``same`` of them, the last ones since
    ``error_since``, with ``error``."""

    error: str
    since: float
    error_since: float
    attempts: int = 1
    same: int = 1


class WatchHealth:
    """How the watch of each kind is doing: when the API server last gave news of it (a
    list, an event, a watch that ran to its timeout), and the run of failures it is in.
    The watch threads write it; ``/readyz`` and ``/metrics`` read it.

    A run of failures is logged in two lines, not one per retry: the first error, then
    either ``recovered after N failed attempts in S s`` or, when the error changes, how
    many times the same error repeated, with the new one.

    Parameters
    ----------
    kinds : sequence of str
        The kinds watched (default: Node, Pod, PodGroup).
    clock : callable
        Seconds of a monotonic clock (tests give their own).
    """

    def __init__(self, kinds: Sequence[str] = _KINDS, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.started = clock()
        self._news: dict[str, float | None] = dict.fromkeys(kinds)
        self._failing: dict[str, _Failing] = {}
        self._gaps: dict[str, str] = {}
        self._errors = dict.fromkeys(kinds, 0)

    def news(self, kind: str) -> None:
        """The API server answered for ``kind``: a list, an event, a watch that ended at its timeout."""
        with self._lock:
            now = self._news[kind] = self._clock()
            failing = self._failing.pop(kind, None)
            self._gaps.pop(kind, None)
        if failing is not None:
            _log.warning("watch of %ss: recovered after %s in %.0f s", kind, _attempts(failing.attempts),
                         now - failing.since)

    def failed(self, kind: str, error: str, retry_s: float) -> None:
        """A list or watch of ``kind`` failed with ``error`` (:func:`watch_failure`); the
        next attempt is in ``retry_s``."""
        with self._lock:
            now = self._clock()
            self._errors[kind] += 1
            failing = self._failing.get(kind)
            if failing is None:
                self._failing[kind] = _Failing(error, now, now)
            else:
                failing.attempts += 1
                if failing.error == error:
                    failing.same += 1
                    return
                repeated, repeated_s = failing.same, now - failing.error_since
                failing.error, failing.error_since, failing.same = error, now, 1
        if failing is None:
            _log.warning("watch of %ss failed: %s; retrying in %.0f s, then less often (repeats are not logged)",
                         kind, error, retry_s)
        else:
            _log.warning("watch of %ss: %s with that error in %.0f s; now failing: %s", kind,
                         _attempts(repeated), repeated_s, error)

    def gap(self, kind: str, why: str) -> None:
        """Events of ``kind`` may have been missed (``why``): the state is not current until
        its next list (:meth:`news`)."""
        with self._lock:
            self._gaps[kind] = why

    def absent(self, kind: str) -> None:
        """The API server does not serve ``kind`` (no PodGroup API): it is not watched."""
        with self._lock:
            self._news.pop(kind, None)
            self._failing.pop(kind, None)
            self._gaps.pop(kind, None)

    def errors(self) -> dict[str, int]:
        """Failed attempts so far, by kind."""
        with self._lock:
            return dict(self._errors)

    def age(self) -> float:
        """Seconds since the oldest news among the kinds watched (since the start for a
        kind not listed yet): how old the state may be."""
        with self._lock:
            now = self._clock()
            return max((now - (t if t is not None else self.started) for t in self._news.values()), default=0.0)

    def problems(self) -> dict[str, str]:
        """Per kind watched, why its state is not current (its run of failures, a gap in its
        events until it is listed again, or that it was not listed yet); "" when it is."""
        with self._lock:
            now = self._clock()
            out: dict[str, str] = {}
            for kind, seen in self._news.items():
                failing = self._failing.get(kind)
                if failing is not None:
                    out[kind] = f"{failing.error} ({_attempts(failing.attempts)} in {now - failing.since:.0f} s)"
                elif kind in self._gaps:
                    out[kind] = self._gaps[kind]
                elif seen is None:
                    out[kind] = f"not listed yet ({now - self.started:.0f} s since the start)"
                else:
                    out[kind] = ""
            return out


def _attempts(n: int) -> str:
    return f"{n} failed attempt{'s' if n != 1 else ''}"


def watch_cluster(
    client: Any, put: Callable[[WatchEvent | Listing], None], stop: threading.Event, *, timeout_s: int = WATCH_TIMEOUT_S,
    health: WatchHealth | None = None, request_timeout_s: float = API_TIMEOUT_S,
) -> list[threading.Thread]:
    """Start one daemon thread per kind (Nodes, Pods, PodGroups) that lists, then watches
    through ``client`` (:func:`api_client`), and passes every list (:class:`Listing`) and
    event to ``put`` (see the module docs for when it lists again); they end
    when ``stop`` is set (within ``timeout_s``, the watch's server-side timeout). Each
    answer and failure is told to ``health``. A list not answered within
    ``request_timeout_s`` (``--api-timeout``) fails, as does a watch silent for
    ``timeout_s + request_timeout_s`` (a dead connection); either is retried."""
    kubernetes = require_kubernetes()
    if health is None:
        health = WatchHealth()
    core = kubernetes.client.CoreV1Api(client)
    custom = kubernetes.client.CustomObjectsApi(client)
    group, version, plural = _PODGROUP_API
    listers: dict[str, Callable[..., Any]] = {
        "Node": core.list_node,
        "Pod": core.list_pod_for_all_namespaces,
        "PodGroup": lambda **kw: custom.list_cluster_custom_object(group, version, plural, **kw),
    }
    threads = []
    for kind, lister in listers.items():
        t = threading.Thread(
            target=_watch_kind, args=(kubernetes, kind, lister, put, stop, timeout_s, health, request_timeout_s),
            name=f"watch-{kind}", daemon=True,
        )
        t.start()
        threads.append(t)
    return threads


def _watch_kind(
    kubernetes: Any, kind: str, lister: Callable[..., Any], put: Callable[[WatchEvent | Listing], None],
    stop: threading.Event, timeout_s: int, health: WatchHealth, request_timeout_s: float,
) -> None:
    version = ""
    backoff = _FIRST_RETRY_S
    gone = False  # the last watch was answered 410 Gone
    while not stop.is_set():
        try:
            if not version:
                version = _list(kind, lister, put, request_timeout_s)
                health.news(kind)
            version = _watch(kubernetes, kind, lister, put, stop, timeout_s, health, version, request_timeout_s)
            backoff, gone = _FIRST_RETRY_S, False
        except Exception as e:  # network, API errors: note, list again (events may be lost), resume
            version = ""
            if getattr(e, "status", None) == _GONE and not gone:  # at once, unless it was so just after a list
                gone = True
                health.gap(kind, f"resourceVersion expired ({watch_failure(e)}): listing again")
                _log.info("watch of %ss: %s; listing again", kind, watch_failure(e))
                continue
            if kind == "PodGroup" and "404" in str(e):
                health.absent(kind)
                _log.info("no PodGroup API on this cluster; gangs come from --podgroups only")
                return
            health.failed(kind, watch_failure(e), backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, _LAST_RETRY_S)
            time.sleep(0)


def _list(kind: str, lister: Callable[..., Any], put: Callable[[WatchEvent | Listing], None], timeout_s: float) -> str:
    """List ``kind`` (the answer due within ``timeout_s``), pass the :class:`Listing` to
    ``put``; the list's resourceVersion."""
    with _timeout_named(f"the API server did not answer the list of {kind}s within {timeout_s:g} s (--api-timeout)"):
        listed = json.loads(lister(_preload_content=False, _request_timeout=timeout_s).data)
    items = listed.get("items") or []
    for item in items:
        item.setdefault("kind", kind)
    put(Listing(kind, items, f"list {kind}"))
    return str((listed.get("metadata") or {}).get("resourceVersion", ""))


def _watch(
    kubernetes: Any, kind: str, lister: Callable[..., Any], put: Callable[[WatchEvent | Listing], None],
    stop: threading.Event, timeout_s: int, health: WatchHealth, version: str, request_timeout_s: float,
) -> str:
    """Watch ``kind`` from ``version`` until the server ends the watch (or ``stop``); the
    last resourceVersion seen. Raises what the client raises, ``410 Gone`` included (the
    client raises an ERROR event as an ``ApiException`` when given ``timeout_seconds``),
    and :class:`TimeoutError` when the connection is silent ``request_timeout_s`` longer
    than the server's own timeout (it is dead)."""
    silent_s = timeout_s + request_timeout_s
    watcher = kubernetes.watch.Watch()
    # placer reads each event's raw_object: no return type, so the client builds no model of
    # it (a V1Pod took ~1.3 ms an event, beside the verbs); with timeout_seconds the client
    # watches once, so it needs no version of its own
    watcher.get_return_type = lambda func: None
    stream = watcher.stream(lister, resource_version=version, timeout_seconds=timeout_s, allow_watch_bookmarks=True,
                            _request_timeout=(request_timeout_s, silent_s))
    with _timeout_named(f"the watch of {kind}s was silent for {silent_s:g} s, {request_timeout_s:g} s "
                        f"(--api-timeout) past its {timeout_s} s: the connection is dead"):
        for event in stream:
            if stop.is_set():
                watcher.stop()
                break
            obj = event.get("raw_object") or {}
            if event.get("type") == "ERROR":  # raised by the client; kept in case a client yields it
                raise kubernetes.client.rest.ApiException(status=obj.get("code"), reason=obj.get("message"))
            health.news(kind)
            version = str((obj.get("metadata") or {}).get("resourceVersion", version))
            if event.get("type") in EVENT_TYPES:  # a BOOKMARK only moves the version on
                obj.setdefault("kind", kind)
                put(WatchEvent(event["type"], obj, f"watch {kind}"))
        else:
            health.news(kind)  # the watch ran to its timeout
    return version


@dataclass(frozen=True)
class ReservedMember:
    """A gang member placer reserved a node for, which kube-scheduler may have parked."""

    namespace: str
    name: str
    uid: str
    node: str


class KubeBinder:
    """Binds through the API server: one Binding per pod, carrying placer's annotations
    (:func:`placer.formats.binding_annotations`: the GPU indices as ``placer.io/gpus``, MIG
    instances as ``placer.io/mig``; the API server copies a Binding's annotations onto the
    pod, in the same write as the node).

    Parameters
    ----------
    client
        :func:`api_client`.
    timeout_s : float
        The most one Binding call may take (``--api-timeout``); past it, :meth:`bind`
        raises :class:`TimeoutError` (kube-scheduler then sees the bind fail and retries).
    """

    def __init__(self, client: Any, *, timeout_s: float = API_TIMEOUT_S) -> None:
        kubernetes = require_kubernetes()
        self._models = kubernetes.client
        self._core = kubernetes.client.CoreV1Api(client)
        self.timeout_s = timeout_s

    def bind(self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> None:
        m = self._models
        body = m.V1Binding(
            metadata=m.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None,
                                    annotations=dict(annotations) or None),
            target=m.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        with self._timed():
            # the generated client cannot read the Binding the server returns: take it raw
            answer = self._core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False,
                                                              _request_timeout=self.timeout_s)
            # read whole, the connection goes back to the pool: the next bind reuses it (a new
            # TLS connection per Binding, its certificates loaded again, took ~30 ms)
            answer.read()
            answer.release_conn()

    def _timed(self) -> contextlib.AbstractContextManager[None]:
        return _timeout_named(f"the API server did not answer within {self.timeout_s:g} s (--api-timeout)")

    def wake(self, members: Sequence[ReservedMember]) -> threading.Thread | None:
        """Make kube-scheduler retry these reserved gang members now: merge-patch each pod's
        ``placer.io/reserved-node`` annotation (its node) and, as a precondition, its UID.

        kube-scheduler parks a pod that an extender turned away among its unschedulable pods
        until a cluster event may help it; the last member's creation is none, so the early
        members would wait for its 5-minute flush. Any update of a parked pod is such an
        event (v1.36.3, ``pkg/scheduler/backend/queue/scheduling_queue.go``,
        ``PriorityQueue.Update``: the hints of the pod's rejectors for ``UnscheduledPod/Update``;
        ``framework/runtime/framework.go``: the ``Extender`` rejector registers every Pod
        event, with no hint, i.e. ``Queue``), so the pod goes back to kube-scheduler's active
        or backoff queue.

        The patches run in a daemon thread, one after another, each bounded by
        :attr:`timeout_s`: no verb waits for them. The pods that could not be patched are
        logged in one warning line (kube-scheduler's flush still retries them).

        Returns
        -------
        threading.Thread or None
            The thread patching them (None when there are none).
        """
        if not members:
            return None
        thread = threading.Thread(target=self._wake_all, args=(tuple(members),), name="wake-gang", daemon=True)
        thread.start()
        return thread

    def _wake_all(self, members: Sequence[ReservedMember]) -> None:
        failed: list[str] = []
        for member in members:
            meta: dict[str, Any] = {"annotations": {RESERVED_NODE_ANNOTATION: member.node}}
            if member.uid:
                meta["uid"] = member.uid  # immutable: a pod created anew under the name is not patched
            try:
                with self._timed():
                    answer = self._core.patch_namespaced_pod(member.name, member.namespace, {"metadata": meta},
                                                             _content_type="application/merge-patch+json",
                                                             _preload_content=False, _request_timeout=self.timeout_s)
                    answer.read()  # the connection back to the pool, as a Binding's
                    answer.release_conn()
            except Exception as e:  # the API server's refusal, the network, the timeout
                failed.append(f"{member.namespace}/{member.name} ({watch_failure(e)})")
        if failed:
            _log.warning("could not wake %d reserved gang member(s) for kube-scheduler to retry (it does within "
                         "its 5-minute flush of unschedulable pods): %s", len(failed), "; ".join(failed))


@contextlib.contextmanager
def _timeout_named(message: str) -> Iterator[None]:
    """The client's timeouts of an API call (urllib3's, raised as they are or after its
    retries) raised as one :class:`TimeoutError` with ``message``; a refused connection
    is not one (urllib3 makes its error a kind of timeout)."""
    from urllib3.exceptions import MaxRetryError, NewConnectionError, TimeoutError as Urllib3Timeout

    try:
        yield
    except (Urllib3Timeout, MaxRetryError) as e:
        cause = e.reason if isinstance(e, MaxRetryError) else e
        if not isinstance(cause, Urllib3Timeout) or isinstance(cause, NewConnectionError):
            raise
        raise TimeoutError(message) from None
