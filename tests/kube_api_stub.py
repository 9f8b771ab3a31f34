"""A stand-in Kubernetes API server on the loopback for ``placer serve --kubeconfig`` tests.

No kube-apiserver can be installed here (no Debian or PyPI package), so this speaks the part
of the API the official client uses for placer: list and watch of Nodes and Pods (newline-
separated watch events, resumed from ``resourceVersion``), 404 for the PodGroup API (a
cluster without scheduler-plugins), and ``POST .../pods/{name}/binding``, recorded.
"""
from __future__ import annotations

import json
import re
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
    Binding bodies received."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resourceVersion, type, object)
        self.bindings: list[dict[str, Any]] = []
        self.requests: list[str] = []
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
                kind = _LISTS.get(url.path)
                if kind is None:
                    return self._json(404, {"kind": "Status", "code": 404, "message": "the server could not find it"})
                query = parse_qs(url.query)
                if query.get("watch", ["false"])[0].lower() in ("true", "1"):
                    return self._watch(kind, int(query.get("resourceVersion", ["0"])[0] or 0))
                with stub._lock:
                    version = stub._version
                self._json(200, {"kind": f"{kind}List", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": str(version)}, "items": []})

            def do_POST(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                stub.requests.append(f"POST {url.path}")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if _BINDING.match(url.path) is None:
                    return self._json(404, {"kind": "Status", "code": 404})
                stub.bindings.append(body)
                self._json(201, body)

            def _json(self, status: int, data: Any) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _watch(self, kind: str, since: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                sent = since
                ends = time.monotonic() + 1.0  # then close: the client watches again from its version
                while time.monotonic() < ends and not stub._stopping.is_set():
                    with stub._lock:
                        due = [e for e in stub.events if e[0] > sent and e[2].get("kind") == kind]
                    for version, kind_of_event, obj in due:
                        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version)}}
                        self.wfile.write(json.dumps({"type": kind_of_event, "object": obj}).encode() + b"\n")
                        self.wfile.flush()
                        sent = version
                    time.sleep(0.02)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def push(self, kind_of_event: str, obj: dict[str, Any]) -> None:
        with self._lock:
            self._version += 1
            self.events.append((self._version, kind_of_event, obj))

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "stub",
            "clusters": [{"name": "stub", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
            "users": [{"name": "stub", "user": {"token": "placer-test"}}],
            "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
        }))
        return path

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
