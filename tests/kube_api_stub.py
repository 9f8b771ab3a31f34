"""A stand-in Kubernetes API server on the loopback, kept for what a real kube-apiserver
cannot be made to do on demand: fault injection for ``placer serve --kubeconfig`` and its
watch (``tests/test_serve.py``).

Everything else runs against the real API server and kube-scheduler
(``tests/kube_control_plane.py``, ``tests/test_kube_serve.py``: binds through the API with
placer's annotations, the watch of Nodes and Pods, a deletion, a cordon, a dry run, a
restart recovering placer's binds, no PodGroup API). What is left here:

* :attr:`KubeApiStub.failing`: while it holds an HTTP status, every GET is answered with
  it, as by an API server in trouble (``/readyz`` failing, then recovering);
* :attr:`KubeApiStub.list_delay_s`, :attr:`KubeApiStub.bind_delay_s`: a list or a Binding
  answered that many seconds late (``--api-timeout``; probes answering while a bind waits);
* :attr:`KubeApiStub.watch_silent_s`: a watch that gets its headers, then nothing for that
  long (a dead connection);
* :meth:`KubeApiStub.compact`: a gap, as etcd's compaction makes: changes no open watch
  sees, after which a watch from an older resourceVersion is answered ``410 Gone``, as an
  HTTP status or as an ERROR event (both are what API servers send);
* :meth:`KubeApiStub.bookmark`: with ``allowWatchBookmarks=true``, watches get a BOOKMARK
  of the current version when asked;
* :meth:`KubeApiStub.push` of objects a real API server would not store as given (a Pod
  without ``spec.priority`` naming a class placer does not know, for the notes the watch
  logs).

It speaks the part of the API the official client uses for placer: list (the objects as the
events pushed so far leave them) and watch of Nodes and Pods (newline-separated watch
events, resumed from ``resourceVersion``), 404 for the PodGroup API, and ``POST
.../pods/{name}/binding``, recorded and applied to the pod pushed under that name (its node
and annotations, as a MODIFIED event). :func:`closed_port` and :func:`write_kubeconfig`
make an API server that cannot be reached.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

_LISTS = {"/api/v1/nodes": "Node", "/api/v1/pods": "Pod"}
_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")


class KubeApiStub:
    """Serve until :meth:`stop`; :meth:`push` adds a watch event; :attr:`bindings` are the
    Binding bodies received; :attr:`listed` the kinds listed; :attr:`failing`, when set, is
    the status of every GET."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resourceVersion, type, object)
        self.bindings: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self.listed: list[str] = []  # the kind of each list answered
        self.bookmarked: list[str] = []  # the kind of each watch sent a BOOKMARK
        self.failing: int | None = None
        self.compacted = 0  # watches from a resourceVersion below are too old
        self.gone_as = "status"  # how a too old resourceVersion is answered: "status" or "event"
        self._bookmarks = 0  # bookmark() calls so far
        self._marked: dict[str, int] = {}  # per kind, the bookmark() calls its watches have sent
        self.bind_delay_s = 0.0
        self.list_delay_s = 0.0
        self.watch_silent_s = 0.0
        self._version = 1
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                stub.requests.append(f"GET {url.path}")
                if stub.failing is not None:
                    return self._json(stub.failing, {"kind": "Status", "code": stub.failing, "message": "etcd is down"})
                kind = _LISTS.get(url.path)
                if kind is None:
                    return self._json(404, {"kind": "Status", "code": 404, "message": "the server could not find it"})
                query = parse_qs(url.query)
                if query.get("watch", ["false"])[0].lower() in ("true", "1"):
                    bookmarks = query.get("allowWatchBookmarks", ["false"])[0].lower() in ("true", "1")
                    return self._watch(kind, int(query.get("resourceVersion", ["0"])[0] or 0), bookmarks)
                stub._stopping.wait(stub.list_delay_s)
                with stub._lock:
                    version, items = stub._version, stub._current(kind)
                stub.listed.append(kind)
                self._json(200, {"kind": f"{kind}List", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": str(version)}, "items": items})

            def do_POST(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                stub.requests.append(f"POST {url.path}")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if _BINDING.match(url.path) is None:
                    return self._json(404, {"kind": "Status", "code": 404})
                stub.bindings.append(body)
                stub._stopping.wait(stub.bind_delay_s)
                stub._bound(body)
                self._json(201, body)

            def _json(self, status: int, data: Any) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _watch(self, kind: str, since: int, bookmarks: bool) -> None:
                with stub._lock:
                    too_old = since < stub.compacted
                if too_old and stub.gone_as == "status":
                    return self._json(410, stub._gone(since))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if stub.watch_silent_s:
                    stub._stopping.wait(stub.watch_silent_s)
                    return
                sent = since
                ends = time.monotonic() + 1.0  # then close: the client watches again from its version
                while time.monotonic() < ends and not stub._stopping.is_set():
                    with stub._lock:
                        if sent < stub.compacted:  # the events since were compacted away
                            if stub.gone_as == "event":
                                self._event("ERROR", stub._gone(sent))
                            return
                        due = [e for e in stub.events if e[0] > sent and e[2].get("kind") == kind]
                        # a bookmark() is owed to the kind until one of its watches sends it (one may
                        # be reconnecting when it is called)
                        bookmark = bookmarks and stub._marked.get(kind, 0) < stub._bookmarks
                        if bookmark:
                            stub._marked[kind] = stub._bookmarks
                        version_now = stub._version
                    for version, kind_of_event, obj in due:
                        self._event(kind_of_event, {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version)}})
                        sent = version
                    if bookmark:
                        self._event("BOOKMARK", {"kind": kind, "apiVersion": "v1",
                                                 "metadata": {"resourceVersion": str(version_now)}})
                        sent = max(sent, version_now)
                        stub.bookmarked.append(kind)
                    time.sleep(0.02)

            def _event(self, kind_of_event: str, obj: dict[str, Any]) -> None:
                self.wfile.write(json.dumps({"type": kind_of_event, "object": obj}).encode() + b"\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _current(self, kind: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` as the events so far leave them (what a list returns)."""
        objects: dict[tuple[str, str], dict[str, Any]] = {}
        for version, kind_of_event, obj in self.events:
            if obj.get("kind") != kind:
                continue
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if kind_of_event == "DELETED":
                objects.pop(key, None)
            else:
                objects[key] = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version)}}
        return list(objects.values())

    def push(self, kind_of_event: str, obj: dict[str, Any]) -> None:
        with self._lock:
            self._push(kind_of_event, obj)

    def _push(self, kind_of_event: str, obj: dict[str, Any]) -> None:
        self._version += 1
        self.events.append((self._version, kind_of_event, obj))

    def compact(self, changes: list[tuple[str, dict[str, Any]]] = (), gone_as: str = "status") -> None:
        """Make ``changes`` (event type, object) that no open watch sees, then answer a watch
        from a resourceVersion before them ``410 Gone`` (``gone_as``: ``"status"``, the HTTP
        status, or ``"event"``, an ERROR event)."""
        with self._lock:
            self.gone_as = gone_as
            for kind_of_event, obj in changes:
                self._push(kind_of_event, obj)
            self.compacted = self._version

    def bookmark(self) -> None:
        """Send each kind watched with bookmarks one BOOKMARK of the current resourceVersion (through
        its open watch, or the next one when it is reconnecting)."""
        with self._lock:
            self._bookmarks += 1

    def _gone(self, since: int) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                "message": f"too old resource version: {since} ({self.compacted})"}

    def _bound(self, binding: dict[str, Any]) -> None:
        """A Binding's effect on the pod pushed under its name: a MODIFIED with its node and annotations."""
        meta = binding["metadata"]
        with self._lock:
            pods = {(p["metadata"].get("namespace", ""), p["metadata"]["name"]): p for p in self._current("Pod")}
            found = pods.get((meta.get("namespace", ""), meta["name"]))
            if found is None:
                return
            annotations = {**found["metadata"].get("annotations", {}), **meta.get("annotations", {})}
            self._push("MODIFIED", {**found, "metadata": {**found["metadata"], "annotations": annotations},
                                    "spec": {**found["spec"], "nodeName": binding["target"]["name"]}})

    def kubeconfig(self, path: Path) -> Path:
        return write_kubeconfig(path, self.port)

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def write_kubeconfig(path: Path, port: int) -> Path:
    """A kubeconfig of the API server at ``http://127.0.0.1:<port>``, written at ``path``."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "stub",
        "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "stub", "user": {"token": "placer-test"}}],
        "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
    }))
    return path


def closed_port() -> int:
    """A loopback port nobody listens on (connections to it are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
