"""``KubeBinder``'s Bindings go over one kept-alive connection to the API server: each answer
is read whole and its connection given back to the client's pool (bench_kube_extender.py
found a new TLS connection per Binding, ~30 ms of placer's bind)."""
from __future__ import annotations

import concurrent.futures
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("kubernetes")

from kube_api_stub import write_kubeconfig  # noqa: E402
from placer.adapters.kubernetes.live import KubeBinder, api_client  # noqa: E402


class KeepAliveApi:
    """An HTTP/1.1 API server answering Bindings: ``connections`` counts the TCP
    connections made to it, ``bindings`` the Binding bodies; a pod named ``taken`` is
    answered 409 Conflict, as an already bound pod is."""

    def __init__(self) -> None:
        self.connections = 0
        self.bindings: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:  # once per connection
                super().setup()
                api.connections += 1

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status = 409 if body["metadata"]["name"] == "taken" else 201
                if status == 201:
                    api.bindings.append(body)
                answer = json.dumps(body if status == 201 else {"kind": "Status", "code": 409,
                                                                "message": "pod taken is already assigned"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def binder(tmp_path: Path) -> Iterator[tuple[KubeBinder, KeepAliveApi]]:
    api = KeepAliveApi()
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.server.server_address[1])
        yield KubeBinder(api_client(str(kubeconfig))), api
    finally:
        api.stop()


def test_bindings_reuse_one_connection(binder):
    kube, api = binder
    for k in range(5):
        kube.bind("ml", f"job-{k}", f"uid-{k}", f"gpu-{k}", {"placer.io/gpus": str(k)})
    assert [b["target"]["name"] for b in api.bindings] == [f"gpu-{k}" for k in range(5)]
    assert [b["metadata"]["annotations"] for b in api.bindings] == [{"placer.io/gpus": str(k)} for k in range(5)]
    assert api.connections == 1


def test_a_refused_binding_raises_and_the_next_one_reuses_the_connection(binder):
    kube, api = binder
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as refused:
        kube.bind("ml", "taken", "uid-t", "gpu-0", {"placer.io/gpus": "0"})
    assert refused.value.status == 409
    kube.bind("ml", "job", "uid-j", "gpu-1", {"placer.io/gpus": "1,2"})
    assert [b["metadata"]["name"] for b in api.bindings] == ["job"]
    assert api.connections == 1


def test_placer_serve_filters_the_next_pod_while_a_bind_waits_on_the_api_server(tmp_path):
    """kube-scheduler filters its next pod while the last one binds: placer answers it with
    the binding pod's GPUs held, before the API server has answered the Binding."""
    pytest.importorskip("starlette")
    from kube_api_stub import KubeApiStub
    from serve_process import Server
    from test_extender import NAMES, pod
    from test_serve import wait_for

    api = KubeApiStub()
    api.bind_delay_s = 120.0  # until the test lets it answer
    s = Server(tmp_path, "--kubeconfig", str(api.kubeconfig(tmp_path / "kubeconfig")), "--api-timeout", "100")
    try:
        wait_for(lambda: s.request("GET", "/readyz")[0] == 200, "the first lists")
        assert s.post("filter", {"Pod": pod("first", 6), "NodeNames": NAMES})[1]["NodeNames"] == ["gpu-1", "gpu-2"]
        with concurrent.futures.ThreadPoolExecutor(1) as scheduler:
            bound = scheduler.submit(s.post, "bind", {"PodName": "first", "PodNamespace": "ml", "PodUID": "uid-first",
                                                      "Node": "gpu-1"})
            wait_for(lambda: api.bindings, "the Binding to reach the API server")
            status, result = s.post("filter", {"Pod": pod("next", 6), "NodeNames": NAMES})
            assert not bound.done()  # the Binding is not answered yet
            assert (status, result["NodeNames"]) == (200, ["gpu-2"])  # gpu-1's GPUs are held by the binding pod
            assert s.request("GET", "/healthz")[1]["busy"] == "bind"
            api._stopping.set()  # the API server answers the Binding now
            assert bound.result(timeout=60) == (200, {"Error": ""})
    finally:
        s.stop()
        api.stop()


def test_the_watch_builds_no_client_model_of_the_events(tmp_path, monkeypatch):
    """placer reads the events' raw objects: the client is not asked to build V1Pod or
    V1Node models of them (bench_kube_extender.py: ~1.3 ms an event, beside the verbs)."""
    import queue

    import kubernetes
    from kube_api_stub import KubeApiStub
    from placer.adapters.kubernetes.live import WatchEvent, watch_cluster
    from test_extender import running_pod_object
    from test_serve import wait_for

    built: list[str] = []
    deserialize = kubernetes.client.ApiClient.deserialize
    monkeypatch.setattr(kubernetes.client.ApiClient, "deserialize",
                        lambda self, data, kind, *rest: built.append(kind) or deserialize(self, data, kind, *rest))
    api = KubeApiStub()
    feed: queue.Queue = queue.Queue()
    stop = threading.Event()
    threads = watch_cluster(api_client(str(api.kubeconfig(tmp_path / "kubeconfig"))), feed.put, stop)
    seen: list[WatchEvent] = []

    def watched() -> bool:
        while not feed.empty():
            got = feed.get()
            if isinstance(got, WatchEvent):
                seen.append(got)
        return any(e.object["metadata"]["name"] == "r" for e in seen)

    try:
        wait_for(lambda: "Pod" in api.listed, "the list of pods")  # then the pod comes through the watch
        api.push("ADDED", running_pod_object("r", "gpu-2", 2))
        wait_for(watched, "the pod's event")
    finally:
        stop.set()
        api.stop()
        for t in threads:
            t.join(timeout=10)
    (event,) = [e for e in seen if e.object["metadata"]["name"] == "r"]
    assert (event.type, event.object["spec"]["nodeName"], event.object["kind"]) == ("ADDED", "gpu-2", "Pod")
    assert built == []
