"""The live Kubernetes API for ``placer serve``: watch events (recorded or live) and binds.

Two sources give the same :class:`WatchEvent` objects, so the code that applies them
(:meth:`placer.adapters.kube_extender.Extender.sync`) is the one tested:

* :func:`read_watch_stream`: what ``kubectl get pods -w -o json`` (or ``nodes``,
  ``podgroups``) prints: JSON objects one after another, each on one line or pretty-printed
  over several. With ``--output-watch-events`` each is ``{"type": ..., "object": ...}``;
  without, the type is not printed: an object counts as ADDED/MODIFIED, and a deletion is
  seen only as the object's last state (use ``--output-watch-events`` to replay deletions).
  A ``List`` (the first answer of ``kubectl get -o json``) counts as ADDED items.
* :func:`watch_cluster`: the API server itself, through the official ``kubernetes``
  client and a kubeconfig: list then watch Nodes, Pods and coscheduling PodGroups,
  resuming from the last resourceVersion and listing again when the server says it is
  too old (HTTP 410).

:class:`KubeBinder` writes placer's decisions through the same client: the pod's Binding,
with the ``placer.io/gpus`` annotation.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable, Iterator

from dataclasses import dataclass
from typing import Mapping, Sequence

from placer.adapters.kubernetes import GPUS_ANNOTATION
from placer.exceptions import InvalidInputError

__all__ = [
    "EVENT_TYPES", "WatchEvent", "read_watch_stream", "read_watch_file", "read_podgroups", "watch_cluster",
    "require_kubernetes",
    "api_client", "KubeBinder",
]

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
_KINDS = ("Node", "Pod", "PodGroup")
_PODGROUP_API = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")

_log = logging.getLogger("placer.watch")


@dataclass(frozen=True)
class WatchEvent:
    """One change the Kubernetes API reported: ``type`` ADDED, MODIFIED or DELETED, and the
    object (a Node, Pod or PodGroup) as it is after the change; ``where`` names its origin
    in errors (``pods.watch:12``)."""

    type: str
    object: Mapping[str, Any]
    where: str = "watch"


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
    from placer._io import read_text

    return list(read_watch_stream(read_text(path), path))


def read_podgroups(path: str) -> list[dict[str, Any]]:
    """The PodGroup objects of a file (``kubectl get podgroups -A -o json`` or YAML).

    Raises
    ------
    InvalidInputError
        At the file location of an object that is not a PodGroup, or of bad syntax.
    """
    from placer.adapters.kubernetes_documents import document_objects, read_documents

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
    """A client of the official ``kubernetes`` package for this kubeconfig.

    Raises
    ------
    InvalidInputError
        At ``--kubeconfig`` when the client is missing or the file cannot be loaded.
    """
    kubernetes = require_kubernetes()
    try:
        return kubernetes.config.new_client_from_config(config_file=kubeconfig)
    except Exception as e:  # the client raises ConfigException, OSError, yaml errors
        raise InvalidInputError("--kubeconfig", f"{kubeconfig}: {e}") from None


def watch_cluster(
    client: Any, put: Callable[[WatchEvent], None], stop: threading.Event, *, timeout_s: int = 300
) -> list[threading.Thread]:
    """Start one daemon thread per kind (Nodes, Pods, PodGroups) that lists, then watches
    through ``client`` (:func:`api_client`), and passes every event to ``put``; they end
    when ``stop`` is set (within ``timeout_s``, the watch's server-side timeout)."""
    kubernetes = require_kubernetes()
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
            target=_watch_kind, args=(kubernetes, kind, lister, put, stop, timeout_s), name=f"watch-{kind}", daemon=True
        )
        t.start()
        threads.append(t)
    return threads


def _watch_kind(
    kubernetes: Any, kind: str, lister: Callable[..., Any], put: Callable[[WatchEvent], None],
    stop: threading.Event, timeout_s: int,
) -> None:
    version = ""
    backoff = 1.0
    while not stop.is_set():
        try:
            if not version:
                listed = json.loads(lister(_preload_content=False).data)
                for item in listed.get("items") or ():
                    item.setdefault("kind", kind)
                    put(WatchEvent("ADDED", item, f"list {kind}"))
                version = (listed.get("metadata") or {}).get("resourceVersion", "")
            watcher = kubernetes.watch.Watch()
            for event in watcher.stream(lister, resource_version=version, timeout_seconds=timeout_s):
                if stop.is_set():
                    watcher.stop()
                    break
                obj = event.get("raw_object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        version = ""  # too old: list again
                        break
                    raise RuntimeError(obj.get("message", "watch error"))
                obj.setdefault("kind", kind)
                version = (obj.get("metadata") or {}).get("resourceVersion", version)
                if event.get("type") in EVENT_TYPES:
                    put(WatchEvent(event["type"], obj, f"watch {kind}"))
            backoff = 1.0
        except Exception as e:  # network, API errors: log, wait, resume
            if kind == "PodGroup" and "404" in str(e):
                _log.info("no PodGroup API on this cluster; gangs come from --podgroups only")
                return
            _log.warning("watch of %s failed (%s); retrying in %.0f s", kind, e, backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, 60.0)
            time.sleep(0)


class KubeBinder:
    """Binds through the API server: one Binding per pod, carrying placer's GPU indices as
    the ``placer.io/gpus`` annotation (the API server copies a Binding's annotations onto
    the pod, in the same write as the node).

    Parameters
    ----------
    client
        :func:`api_client`.
    """

    def __init__(self, client: Any) -> None:
        kubernetes = require_kubernetes()
        self._models = kubernetes.client
        self._core = kubernetes.client.CoreV1Api(client)

    def bind(self, namespace: str, name: str, uid: str, node: str, gpus: Sequence[int]) -> None:
        m = self._models
        annotations = {GPUS_ANNOTATION: ",".join(str(g) for g in gpus)} if gpus else None
        body = m.V1Binding(
            metadata=m.V1ObjectMeta(name=name, namespace=namespace, uid=uid or None, annotations=annotations),
            target=m.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        # the generated client cannot read the Binding the server returns: take it raw
        self._core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
