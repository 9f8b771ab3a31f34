"""``placer serve`` over real HTTP on the loopback: kube-scheduler's extender wire format
(the fixtures of k8s.io/kube-scheduler/extender/v1 and generated payloads), 400 on bad
bodies while the service keeps serving, health, metrics, recorded watch streams, gangs.

Each test module run starts one server process per configuration and stops it by pid."""
from __future__ import annotations

import contextlib
import http.client
import json
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from serve_process import Server  # noqa: E402
from test_extender import NAMES, TOLERATE, cluster_document, pod, podgroup  # noqa: E402

DATA = Path(__file__).parent / "data" / "extender"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    (tmp / "podgroups.yaml").write_text(json.dumps(podgroup("pg", 2)))
    s = Server(tmp, "--podgroups", str(tmp / "podgroups.yaml"), "--dry-run")
    yield s
    s.stop()
    assert s.proc.poll() is not None


def fixture(name: str) -> bytes:
    return (DATA / f"{name}_kube-scheduler-extender-v1-types_test.json").read_bytes()


def wait_for(condition, what: str, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` until it holds (the watch threads work in their own time)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


def test_the_banner_says_what_is_served(server):
    assert "4 nodes, 1 pods, policy best-fit" in server.banner


def test_a_dry_run_is_announced_at_start_and_in_healthz_and_readyz(server):
    # what a restart keeps of a dry run: nothing (no Binding is posted to come back through a list)
    assert server.notes == ["placer: serve: note: --dry-run: binds are held in placer's memory only: no Binding is "
                            "posted, and a restart forgets them\n"]
    status, health, _ = server.request("GET", "/healthz")
    assert status == 200 and health["binds"] == "dry-run"
    status, _, text = server.request("GET", "/readyz?verbose")
    assert status == 200 and "[+]binds ok: dry-run" in text and text.endswith("readyz check passed\n")


def test_without_a_watch_livez_and_readyz_answer_ok(server):
    assert server.request("GET", "/livez")[::2] == (200, "ok")
    assert server.request("GET", "/readyz")[::2] == (200, "ok")


def test_without_kubeconfig_or_dry_run_bind_is_refused_naming_kubeconfig(tmp_path):
    s = Server(tmp_path, "--max-staleness", "30")
    try:
        assert s.notes == ["placer: serve: note: --max-staleness has no effect without --kubeconfig (no watch to go "
                           "stale)\n"]
        args = {"Pod": pod("a", 6), "NodeNames": NAMES}
        assert s.post("filter", args)[1]["NodeNames"] == ["gpu-1", "gpu-2"]
        status, bound = s.post("bind", {"PodName": "a", "PodNamespace": "ml", "PodUID": "uid-a", "Node": "gpu-1"})
        assert status == 200 and bound["Error"].startswith("POST /bind: binding ml/a to gpu-1 failed: no API server")
        assert "--kubeconfig" in bound["Error"] and "--dry-run" in bound["Error"]
        # nothing held: gpu-1's six GPUs are still free
        assert s.post("filter", {"Pod": pod("b", 6), "NodeNames": NAMES})[1]["NodeNames"] == ["gpu-1", "gpu-2"]
        status, health, _ = s.request("GET", "/healthz")
        assert health["binds"] == "refused" and health["pods"] == 1
    finally:
        s.stop()


def test_fixture_filter_args_are_answered_in_the_fixture_result_shape(server):
    status, result = server.post("filter", fixture("ExtenderArgs"))
    assert status == 200
    expected_keys = set(json.loads(fixture("ExtenderFilterResult")))
    assert set(result) <= expected_keys and "NodeNames" in result  # NodeNames asked, NodeNames answered
    assert result["NodeNames"] == [] and result["Error"] == ""
    assert "not in placer's cluster state" in result["FailedNodes"]["node1"]
    # Go decodes field names case-insensitively: the lowercased body means the same
    status, lowered = server.post("filter", fixture("ExtenderArgs").lower())
    assert status == 200 and lowered == result


def test_fixture_priority_binding_and_preemption_shapes(server):
    status, priorities = server.post("prioritize", fixture("ExtenderArgs"))
    host_priority = json.loads(fixture("HostPriority"))
    assert status == 200 and isinstance(priorities, list)  # a bare HostPriorityList
    assert [set(h) for h in priorities] == [set(host_priority)] and priorities[0]["Score"] == 0
    status, bound = server.post("bind", fixture("ExtenderBindingArgs"))
    assert status == 200 and set(bound) == set(json.loads(fixture("ExtenderBindingResult")))
    assert "mypodnamespace/mypodname was not seen by filter" in bound["Error"]
    status, preempted = server.post("preempt", fixture("ExtenderPreemptionArgs"))
    assert status == 200 and set(preempted) == set(json.loads(fixture("ExtenderPreemptionResult")))
    assert preempted["NodeNameToMetaVictims"] == {}  # node foo is not placer's


def test_a_gpu_pod_is_filtered_scored_and_bound_over_http(server):
    p = pod("http-a", 6)
    p["spec"]["tolerations"] = TOLERATE
    args = {"Pod": p, "NodeNames": NAMES}
    status, result = server.post("filter", args)
    assert status == 200 and result["NodeNames"] == ["gpu-1", "gpu-2"]
    assert result["FailedAndUnresolvableNodes"] == {"gpu-3": "node(s) were unschedulable"}
    status, priorities = server.post("prioritize", args)
    assert status == 200 and [h["Host"] for h in priorities] == NAMES
    assert all(0 <= h["Score"] <= 10 for h in priorities)
    binding = {"PodName": "http-a", "PodNamespace": "ml", "PodUID": "uid-http-a", "Node": "gpu-1"}
    status, bound = server.post("bind", binding)
    assert (status, bound) == (200, {"Error": ""})
    status, result = server.post("filter", {"Pod": pod("http-b", 6), "NodeNames": NAMES})
    assert result["NodeNames"] == ["gpu-2"]  # gpu-1 now holds http-a's six GPUs
    status, health, _ = server.request("GET", "/healthz")
    assert status == 200 and health["status"] == "ok" and health["pods"] == 2


BAD_BODIES = [
    (b"not json", "invalid JSON"),
    (b"[1, 2]", "expected an object, got a list"),
    (b'{"NodeNames": []}', "missing field Pod"),
    (b'{"Pod": {"metadata": {"name": "x"}}, "NodeNamez": []}', 'did you mean "NodeNames"'),
    (b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": "gpu-1"}', "NodeNames: expected a list of node names"),
    (b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": ["gpu-1"], "NodeNames": []}', "duplicate key"),
    (b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": [], "nodenames": []}', "given twice"),
    (b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": ["gpu\\u0007"]}', "control characters"),
    (b'{"Pod": {"metadata": {}}, "NodeNames": []}', "Pod.metadata.name: expected a name"),
    (b'{"Pod": {"metadata": {"name": "x"}}}', "missing field NodeNames"),
]


@pytest.mark.parametrize("body, message", BAD_BODIES)
def test_a_bad_filter_body_is_400_with_the_error_and_the_service_keeps_serving(server, body, message):
    status, result = server.post("filter", body)
    assert status == 400 and message in result["Error"] and result["Error"].startswith("POST /filter")
    status, health, _ = server.request("GET", "/healthz")
    assert status == 200 and health["status"] == "ok"


def test_a_pod_placer_cannot_take_is_answered_200_with_the_error_which_kube_scheduler_shows(server):
    body = (b'{"Pod": {"metadata": {"name": "x"}, "spec": {"containers": [{"resources": {"limits": {"cpu": "9e999999"}}}]}},'
            b' "NodeNames": ["gpu-1"]}')
    status, result = server.post("filter", body)
    assert status == 200 and result["NodeNames"] == [] and result["FailedNodes"] == {}
    assert result["Error"].startswith("POST /filter: Pod.spec.containers[0]")


def test_bad_bind_and_preempt_bodies_are_400(server):
    status, result = server.post("bind", {"PodName": "x"})
    assert status == 400 and result["Error"] == "POST /bind: missing field Node"
    status, result = server.post("preempt", {"Pod": pod("x"), "NodeNameToMetaVictims": {
        "gpu-1": {"Pods": [], "NumPDBViolations": 2**63}}})
    assert status == 400 and "NodeNameToMetaVictims.gpu-1.NumPDBViolations" in result["Error"]
    status, result = server.post("preempt", {"Pod": pod("x")})
    assert status == 400 and "missing field" in result["Error"]


def test_metrics_count_requests_latency_and_pending_reasons(server):
    server.post("filter", b"not json")
    server.post("filter", {"Pod": pod("m", 8), "NodeNames": NAMES})
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    counted = re.search(r'placer_extender_requests_total\{code="400",verb="filter"\} (\d+)', text)
    assert counted is not None and int(counted.group(1)) >= 1
    assert re.search(r'placer_extender_request_seconds_count\{verb="filter"\} \d+', text)
    assert 'placer_extender_filter_failed_nodes_total{reason="node(s) were unschedulable"}' in text
    assert re.search(r"^placer_extender_nodes 4\.0$", text, re.M)


def test_a_gang_waits_in_filter_then_binds_whole_over_http(server):
    member = {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}, "ns": "team"}
    # the module's PodGroup pg is in namespace ml; this gang's is team/pg: unknown, it waits
    status, result = server.post("filter", {"Pod": pod("w-0", 1, **member), "NodeNames": NAMES})
    assert status == 200 and result["NodeNames"] == []
    assert "PodGroup not known" in result["FailedNodes"]["gpu-1"]
    member["ns"] = "ml"
    status, result = server.post("filter", {"Pod": pod("g-0", 1, **member), "NodeNames": NAMES})
    assert result["NodeNames"] == [] and "1 of minMember 2" in result["FailedNodes"]["gpu-1"]
    status, result = server.post("filter", {"Pod": pod("g-1", 1, **member), "NodeNames": NAMES})
    (node_1,) = result["NodeNames"]
    status, result = server.post("filter", {"Pod": pod("g-0", 1, **member), "NodeNames": NAMES})
    (node_0,) = result["NodeNames"]
    for name, node in (("g-0", node_0), ("g-1", node_1)):
        status, bound = server.post("bind", {"PodName": name, "PodNamespace": "ml", "PodUID": f"uid-{name}", "Node": node})
        assert (status, bound) == (200, {"Error": ""})


def test_recorded_watch_streams_are_applied_at_start(tmp_path):
    running = {**pod("big", 8), "kind": "Pod", "apiVersion": "v1"}
    running["spec"]["nodeName"] = "gpu-1"
    running["status"]["phase"] = "Running"
    # kubectl get pods -w -o json prints indented objects one after another
    (tmp_path / "pods.watch").write_text(json.dumps(running, indent=4) + "\n")
    s = Server(tmp_path, "--watch-file", str(tmp_path / "pods.watch"))
    try:
        status, result = s.post("filter", {"Pod": pod("a", 8), "NodeNames": NAMES})
        assert status == 200 and result["NodeNames"] == ["gpu-2"]
        assert "2 pods" in s.banner
    finally:
        s.stop()
    assert s.proc.returncode is not None


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placer", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_serve_refuses_bad_options_in_one_line(tmp_path):
    (tmp_path / "cluster.json").write_text(json.dumps(cluster_document()))
    for args, message in [
        (("--snapshot", "missing.json"), "missing.json"),
        (("--snapshot", "cluster.json", "--port", "http"), "--port: expected a port"),
        (("--snapshot", "cluster.json", "--probe-port", "-1"), "--probe-port: expected a port"),
        (("--snapshot", "cluster.json", "--port", "9000", "--probe-port", "9000"),
         "--probe-port: expected a port other than --port 9000"),
        (("--snapshot", "cluster.json", "--policy", "fastest"), "--policy"),
        (("--snapshot", "cluster.json", "--watch-file", "cluster.json"), "expected a Node, Pod or PodGroup object"),
        (("--snapshot", "cluster.json", "--podgroups", "cluster.json"), "expected PodGroup objects only"),
        (("--snapshot", "cluster.json", "--kubeconfig", "nope.yaml"), "--kubeconfig"),
        (("--snapshot", "cluster.json", "--max-staleness", "0"), "--max-staleness: expected a number of seconds > 0"),
        (("--snapshot", "cluster.json", "--pending-ttl", "-1"), "--pending-ttl: expected a number of seconds > 0"),
        (("--snapshot", "cluster.json", "--max-pending", "0"), "--max-pending: expected an integer >= 1"),
        (("--snapshot", "cluster.json", "--api-timeout", "soon"), "--api-timeout: expected a number of seconds > 0"),
        (("--snapshot", "cluster.json", "--header-timeout", "0"), "--header-timeout: expected a number of seconds"),
        (("--snapshot", "cluster.json", "--body-timeout", "-1"), "--body-timeout: expected a number of seconds"),
        (("--snapshot", "cluster.json", "--max-connections", "0"), "--max-connections: expected an integer >= 1"),
        (("--snapshot", "cluster.json", "--max-body-bytes", "1e6"), "--max-body-bytes: expected an integer >= 1"),
        (("--snapshot", "cluster.json", "--max-body-bytes", str(2**28 + 1)), "--max-body-bytes: expected at most"),
        (("--snapshot", "cluster.json", "--level", "zone=topology.kubernetes.io/zone"),
         "--level: level 'zone' is not among the snapshot's topologyLevels (rack)"),
        (("--snapshot", "cluster.json", "--level", "rack"), "--level[0]: expected NAME=LABEL"),
    ]:
        done = run_cli("serve", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_the_help_gives_the_default_max_staleness(tmp_path):
    from placer.serve.extender import MAX_PENDING, PENDING_TTL_S
    from placer.serve.app import MAX_STALENESS_S

    done = run_cli("serve", "--help", cwd=tmp_path)
    text = " ".join(done.stdout.split())
    assert f"(default: {MAX_STALENESS_S:g}, twice the watch's timeout)" in text
    assert f"after its last filter (default: {PENDING_TTL_S:g})" in text
    assert f"oldest forgotten first (default: {MAX_PENDING})" in text


def test_the_help_gives_the_default_limits(tmp_path):
    from placer.adapters.kubernetes.live import API_TIMEOUT_S
    from placer.serve.app import Limits

    limits = Limits()
    text = " ".join(run_cli("serve", "--help", cwd=tmp_path).stdout.split())
    for option, default in [
        ("--api-timeout SECONDS", f"{API_TIMEOUT_S:g}"), ("--max-body-bytes N", f"{limits.max_body_bytes}, 64 MiB"),
        ("--header-timeout SECONDS", f"{limits.header_timeout_s:g}"),
        ("--body-timeout SECONDS", f"{limits.body_timeout_s:g}"), ("--max-connections N", f"{limits.max_connections}"),
    ]:
        assert re.search(rf"{option} [^-]*\(default: {re.escape(default)}[,;)]", text), option


def test_the_documented_scheduler_configuration_calls_the_served_verbs(server):
    import yaml

    text = (Path(__file__).parent.parent / "docs" / "extender.md").read_text()
    config = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    (extender,) = config["extenders"]
    assert extender["nodeCacheCapable"] is True and extender["urlPrefix"].startswith("http://127.0.0.1:")
    bodies = {"filterVerb": "ExtenderArgs", "prioritizeVerb": "ExtenderArgs",
              "preemptVerb": "ExtenderPreemptionArgs", "bindVerb": "ExtenderBindingArgs"}
    for key, body in bodies.items():
        status, _ = server.post(extender[key], fixture(body))
        assert status == 200, key


def test_the_readme_filter_example_answers_as_shown(tmp_path):
    text = (Path(__file__).parent.parent / "README.md").read_text()
    section = text[text.index("## kube-scheduler extender"):]
    body = re.search(r"-d '(.*?)'", section, re.S).group(1)
    shown = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    s = Server(tmp_path)  # a fresh cluster: cluster_document()
    try:
        status, result = s.post("filter", body.encode())
    finally:
        s.stop()
    assert status == 200 and result == shown


def test_serve_speaks_https_with_a_certificate(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    s = Server(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        assert s.banner.startswith("placer serve: listening on https://")
        s.tls_context = ssl.create_default_context(cafile=str(cert))  # verifies the certificate
        status, result = s.post("filter", {"Pod": pod("a", 6), "NodeNames": NAMES})
        assert status == 200 and result["NodeNames"] == ["gpu-1", "gpu-2"]
        s.tls_context = None
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            s.post("filter", {"Pod": pod("a", 6), "NodeNames": NAMES})  # plain HTTP is not served
    finally:
        s.stop()
    (tmp_path / "cluster.json").write_text(json.dumps(cluster_document()))
    for args, message in [
        (("--tls-cert", str(cert)), "give both --tls-cert and --tls-key"),
        (("--tls-cert", str(key), "--tls-key", str(key)), "--tls-cert: cannot load"),
    ]:
        done = run_cli("serve", "--snapshot", "cluster.json", "--port", "0", *args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def asgi_request(app, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
                 ) -> tuple[int, bytes]:
    """One request through the ASGI application itself, without a server: its status and body."""
    import asyncio

    sent: list[dict] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                         *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def asgi_post(app, path: str, body: bytes) -> tuple[int, Any]:
    """One POST through the ASGI application itself: its status and JSON answer."""
    status, payload = asgi_request(app, "POST", path, body)
    return status, json.loads(payload)


def test_a_fault_of_placers_own_is_a_500_with_the_error_and_the_next_request_is_served():
    from placer.serve.extender import Extender
    from placer.serve.app import create_app

    class Faulty(Extender):
        calls = 0

        def filter(self, args, source="POST /filter"):
            Faulty.calls += 1
            if Faulty.calls == 1:
                raise RuntimeError("a bug")
            return super().filter(args, source)

    app = create_app(Faulty(cluster_document()))
    body = json.dumps({"Pod": pod("a", 6), "NodeNames": NAMES}).encode()
    status, result = asgi_post(app, "/filter", body)
    assert status == 500 and result == {"Error": "POST /filter: internal error: RuntimeError: a bug"}
    status, result = asgi_post(app, "/filter", body)
    assert status == 200 and result["NodeNames"] == ["gpu-1", "gpu-2"]


def test_preempt_over_http_names_placers_victims_by_uid(tmp_path):
    doc = cluster_document()
    for i in (1, 2):
        doc["nodes"][i]["pods"] = [{"name": f"ml/low-{i}", "gpus": list(range(8)), "priority": 1}]
    doc["nodes"][0]["pods"][0]["priority"] = 500  # above the preemptor: gpu-0 has no victims
    s = Server(tmp_path, document=doc)
    try:
        victims = {f"gpu-{i}": {"Pods": [pod(f"low-{i}")], "NumPDBViolations": 0} for i in (0, 1, 2)}
        status, result = s.post("preempt", {"Pod": pod("vip", 8, priority=100), "NodeNameToVictims": victims})
    finally:
        s.stop()
    assert status == 200
    assert result == {"NodeNameToMetaVictims": {
        f"gpu-{i}": {"Pods": [{"UID": f"uid-low-{i}"}], "NumPDBViolations": 0} for i in (1, 2)}}


def test_readyz_fails_while_the_api_server_fails_and_passes_once_it_recovers(tmp_path, caplog):
    pytest.importorskip("kubernetes")
    import logging
    import queue
    import threading

    from kube_api_stub import KubeApiStub
    from placer.serve.extender import Extender
    from placer.adapters.kubernetes.live import WatchHealth, api_client, watch_cluster
    from placer.serve.app import create_app

    caplog.set_level(logging.WARNING, "placer.watch")
    api = KubeApiStub()
    api.failing = 500
    health, feed, stop = WatchHealth(), queue.Queue(), threading.Event()
    app = create_app(Extender(cluster_document()), feed, watch=health)
    threads = watch_cluster(api_client(str(api.kubeconfig(tmp_path / "kubeconfig"))), feed.put, stop, health=health)
    try:
        wait_for(lambda: min(health.errors().values()) >= 2, "two failed attempts of each kind")
        status, text = asgi_request(app, "GET", "/readyz")
        assert status == 503 and text.decode().endswith("readyz check failed\n")
        assert "[-]watch-pods failed: HTTP 500 Internal Server Error: etcd is down (" in text.decode()
        assert asgi_request(app, "GET", "/livez") == (200, b"ok")
        _, metrics = asgi_request(app, "GET", "/metrics")
        counted = re.search(rb'^placer_extender_watch_errors_total\{kind="Pod"\} (\d+)', metrics, re.M)
        assert counted is not None and int(counted.group(1)) >= 2
        assert re.search(rb"^placer_extender_state_age_seconds \d", metrics, re.M)
        api.failing = None
        wait_for(lambda: asgi_request(app, "GET", "/readyz")[0] == 200, "/readyz to pass")
        assert asgi_request(app, "GET", "/readyz") == (200, b"ok")
        _, text = asgi_request(app, "GET", "/readyz?verbose")
        assert "[+]watch-nodes ok\n[+]watch-pods ok\n[+]state-age ok\n" in text.decode()  # no PodGroup API: 404
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        api.stop()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("watch of Pods")]
    assert health.errors()["Pod"] >= 2 and len(lines) == 2, lines  # not one line per retry
    assert lines[0].startswith("watch of Pods failed: HTTP 500 Internal Server Error: etcd is down; retrying in 1 s")
    assert re.fullmatch(rf"watch of Pods: recovered after {health.errors()['Pod']} failed attempts in \d+ s", lines[1])


def test_the_watch_logs_the_notes_of_nodes_and_running_pods_once_per_change(tmp_path, caplog):
    pytest.importorskip("kubernetes")
    import logging
    import queue
    import threading

    from kube_api_stub import KubeApiStub
    from placer.serve.extender import Extender
    from placer.adapters.kubernetes.live import api_client, watch_cluster
    from test_extender import not_ready_node, running_pod_object, verbs

    caplog.set_level(logging.WARNING, "placer.serve.app")
    api = KubeApiStub()
    ex, feed, stop = Extender(cluster_document()), queue.Queue(), threading.Event()
    threads = watch_cluster(api_client(str(api.kubeconfig(tmp_path / "kubeconfig"))), feed.put, stop)

    def applied(events: int) -> bool:
        while not feed.empty():
            ex.queue([feed.get()])
        ex.sync(now=True)
        return ex.state()["events_applied"] >= events

    def notes() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.getMessage().startswith("note: ")]

    running = running_pod_object("r", "gpu-2", 2)
    running["spec"]["priorityClassName"] = "batch-high"
    try:
        api.push("MODIFIED", not_ready_node("gpu-3"))
        api.push("ADDED", running)
        wait_for(lambda: applied(2) and len(notes()) == 2, "the node's and the pod's events")
        api.push("MODIFIED", not_ready_node("gpu-3", extra="x"))  # the same notes
        api.push("MODIFIED", {**running, "metadata": {**running["metadata"], "labels": {"app": "x"}}})
        wait_for(lambda: applied(4), "the second events")
        for name in ("a", "b", "c"):
            result, _ = verbs(ex, pod(name, 8))
            assert "gpu-3" in result["FailedAndUnresolvableNodes"]
    finally:
        stop.set()
        api.stop()
        for t in threads:
            t.join(timeout=10)
    logged = sorted(notes(), key=lambda note: " Pod: " in note)
    assert len(logged) == 2, logged  # once each: not per event, not per verb
    # the list or the watch brings each first, in either order, as the threads go
    assert re.match(r"note: (list|watch) Node: status.conditions: node 'gpu-3': Ready is False; added the node "
                    r"lifecycle controller's taint\(s\) node.kubernetes.io/not-ready:NoSchedule", logged[0]), logged
    assert re.match(r"note: (list|watch) Pod: spec.priorityClassName: priority class 'batch-high' is not among",
                    logged[1]), logged


def test_a_list_the_api_server_answers_too_slowly_fails_after_the_api_timeout_and_is_retried(tmp_path):
    pytest.importorskip("kubernetes")
    import queue
    import threading

    from kube_api_stub import KubeApiStub
    from placer.serve.extender import Extender
    from placer.adapters.kubernetes.live import WatchHealth, api_client, watch_cluster
    from placer.serve.app import create_app

    api = KubeApiStub()
    api.list_delay_s = 60.0  # far past the timeout: the list hangs
    health, feed, stop = WatchHealth(), queue.Queue(), threading.Event()
    app = create_app(Extender(cluster_document()), feed, watch=health)
    client = api_client(str(api.kubeconfig(tmp_path / "kubeconfig")))
    threads = watch_cluster(client, feed.put, stop, health=health, request_timeout_s=0.5)
    try:
        wait_for(lambda: health.errors()["Node"] >= 2, "two timed-out lists of Nodes")
        assert api.listed == []  # no list was answered: each attempt was cut off, then retried
        sent = api.requests.count("GET /api/v1/nodes")
        assert sent <= health.errors()["Node"] + 1  # one request per attempt (one may be on its way), not four
        status, text = asgi_request(app, "GET", "/readyz")
        assert status == 503, text
        assert ("[-]watch-nodes failed: the API server did not answer the list of Nodes within 0.5 s "
                "(--api-timeout) (") in text.decode()
        api.list_delay_s = 0.0
        wait_for(lambda: asgi_request(app, "GET", "/readyz")[0] == 200, "/readyz to pass once lists are answered")
        assert "Node" in api.listed and "Pod" in api.listed
    finally:
        stop.set()
        api.stop()
        for t in threads:
            t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)


def test_a_silent_watch_is_dropped_past_its_timeout_and_the_kind_listed_again(tmp_path):
    pytest.importorskip("kubernetes")
    import queue
    import threading

    from kube_api_stub import KubeApiStub
    from placer.adapters.kubernetes.live import WatchHealth, api_client, watch_cluster

    api = KubeApiStub()
    api.watch_silent_s = 60.0  # headers, then nothing: a connection that died without a word
    health, feed, stop = WatchHealth(), queue.Queue(), threading.Event()
    client = api_client(str(api.kubeconfig(tmp_path / "kubeconfig")))
    threads = watch_cluster(client, feed.put, stop, health=health, timeout_s=1, request_timeout_s=0.5)
    try:
        wait_for(lambda: health.errors()["Node"] >= 1, "the silent watch of Nodes to fail")
        assert health.problems()["Node"].startswith(
            "the watch of Nodes was silent for 1.5 s, 0.5 s (--api-timeout) past its 1 s: the connection is dead (")
        api.watch_silent_s = 0.0
        wait_for(lambda: api.listed.count("Node") >= 2, "Nodes listed again after the dead watch")
        wait_for(lambda: health.problems()["Node"] == "", "the watch of Nodes to recover")
    finally:
        stop.set()
        api.stop()
        for t in threads:
            t.join(timeout=10)


def test_an_unreachable_api_server_fails_readyz_and_its_retries_are_logged_once(tmp_path):
    from kube_api_stub import closed_port, write_kubeconfig

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", closed_port())
    s = Server(tmp_path, "--kubeconfig", str(kubeconfig), "--max-staleness", "900")

    def node_errors() -> int:
        found = re.search(r'placer_extender_watch_errors_total\{kind="Node"\} (\d+)', s.request("GET", "/metrics")[2])
        return int(found.group(1)) if found else 0

    try:
        wait_for(lambda: node_errors() >= 2, "two failed attempts")
        status, _, text = s.request("GET", "/readyz")
        assert status == 503 and "[-]watch-nodes failed: connection refused (" in text
        assert s.request("GET", "/livez")[::2] == (200, "ok")
        status, health, _ = s.request("GET", "/healthz")  # kept as it was: the state, 200
        assert status == 200 and health["status"] == "ok" and health["binds"] == "posted"
    finally:
        s.stop()
    assert s.log.count("watch of Nodes failed: connection refused") == 1, s.log
    assert "watch of Nodes" not in s.log.replace("watch of Nodes failed: connection refused", "", 1), s.log


# --- authentication and certificates -------------------------------------------------------------------------------

class Issued:
    """A certificate and its key, written as PEM files, as a CA or the CA's client or server."""

    def __init__(self, directory: Path, name: str, *, by: "Issued | None" = None, ca: bool = False, bits: int = 2048,
                 days: tuple[float, float] = (-1, 30)) -> None:
        import datetime
        import ipaddress

        x509 = pytest.importorskip("cryptography.x509")
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        self.subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        signer = by or self
        now = datetime.datetime.now(datetime.timezone.utc)
        public_key = self.private_key.public_key()
        builder = (
            x509.CertificateBuilder().subject_name(self.subject).issuer_name(signer.subject).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(days=days[0]))
            .not_valid_after(now + datetime.timedelta(days=days[1]))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.private_key.public_key()),
                           critical=False)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        certificate = builder.sign(signer.private_key, hashes.SHA256())
        self.cert, self.key = directory / f"{name}.crt", directory / f"{name}.key"
        self.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        self.key.write_bytes(self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Issued]:
    """A CA with a server and a client certificate, another CA with its own client, and
    certificates placer must refuse to serve with."""
    directory = tmp_path_factory.mktemp("pki")
    ca = Issued(directory, "ca", ca=True)
    other_ca = Issued(directory, "other-ca", ca=True)
    return {
        "ca": ca, "other-ca": other_ca,
        "server": Issued(directory, "server", by=ca), "client": Issued(directory, "client", by=ca),
        "stranger": Issued(directory, "stranger", by=other_ca),
        "expired": Issued(directory, "expired", by=ca, days=(-30, -1)),
        "future": Issued(directory, "future", by=ca, days=(2, 30)),
        "rsa-1024": Issued(directory, "rsa-1024", by=ca, bits=1024),
    }


def client_context(pki: dict[str, Issued], certificate: str | None) -> ssl.SSLContext:
    """A client trusting ``pki``'s CA, presenting ``certificate`` (None: none)."""
    context = ssl.create_default_context(cafile=str(pki["ca"].cert))
    if certificate is not None:
        context.load_cert_chain(str(pki[certificate].cert), str(pki[certificate].key))
    return context


def test_with_client_ca_only_clients_with_a_certificate_of_that_ca_are_served(tmp_path, pki):
    s = Server(tmp_path, "--tls-cert", str(pki["server"].cert), "--tls-key", str(pki["server"].key),
               "--client-ca", str(pki["ca"].cert), "--dry-run")
    args = {"Pod": pod("a", 6), "NodeNames": NAMES}
    try:
        for refused in (None, "stranger"):  # no certificate; one another CA signed
            s.tls_context = client_context(pki, refused)
            with pytest.raises((ssl.SSLError, ConnectionError)):
                s.post("filter", args)
            with pytest.raises((ssl.SSLError, ConnectionError)):
                s.request("GET", "/livez")  # the handshake refuses every route
        s.tls_context = client_context(pki, "client")
        status, result = s.post("filter", args)
        assert status == 200 and result["NodeNames"] == ["gpu-1", "gpu-2"]
        status, bound = s.post("bind", {"PodName": "a", "PodNamespace": "ml", "PodUID": "uid-a", "Node": "gpu-1"})
        assert (status, bound) == (200, {"Error": ""})
        assert s.request("GET", "/livez")[::2] == (200, "ok")
    finally:
        s.stop()
    assert s.proc.returncode is not None


def plain_request(port: int, method: str, path: str) -> tuple[int, str]:
    """What kubelet's ``httpGet`` probe sends: plain HTTP, no credentials."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_under_client_ca_the_probe_port_answers_plain_httpget_probes_and_nothing_else(tmp_path, pki):
    s = Server(tmp_path, "--tls-cert", str(pki["server"].cert), "--tls-key", str(pki["server"].key),
               "--client-ca", str(pki["ca"].cert), "--dry-run", "--probe-port", "0")
    try:
        found = re.search(r"; /livez, /readyz also on http://127\.0\.0\.1:(\d+)\)$", s.banner.rstrip("\n"))
        assert found is not None, s.banner
        probe_port = int(found.group(1))
        assert probe_port != s.port
        assert plain_request(probe_port, "GET", "/livez") == (200, "ok")
        assert plain_request(probe_port, "GET", "/readyz") == (200, "ok")
        assert plain_request(probe_port, "HEAD", "/readyz") == (200, "")
        status, text = plain_request(probe_port, "GET", "/readyz?verbose")
        assert status == 200 and text == "[+]binds ok: dry-run\nreadyz check passed\n"
        for method, path in (("GET", "/healthz"), ("GET", "/metrics"), ("POST", "/filter"), ("POST", "/bind"),
                             ("GET", "/filter")):
            assert plain_request(probe_port, method, path)[0] == 404, (method, path)
        s.tls_context = client_context(pki, None)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            s.request("GET", "/livez")  # the main port still refuses a client without a certificate
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            plain_request(s.port, "GET", "/livez")  # nor is it plain HTTP
        s.tls_context = client_context(pki, "client")
        assert s.request("GET", "/livez")[::2] == (200, "ok")
    finally:
        s.stop()
    assert s.proc.returncode == -signal.SIGTERM  # SIGTERM stopped both listeners, as it stops one
    with pytest.raises(ConnectionError):
        plain_request(probe_port, "GET", "/livez")


def test_a_probe_port_in_use_is_refused_in_one_line(tmp_path):
    import socket

    (tmp_path / "cluster.json").write_text(json.dumps(cluster_document()))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--snapshot", "cluster.json", "--dry-run", "--port", "0", "--probe-port", str(port),
                       cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error == f"placer: error: --probe-port: cannot listen on 127.0.0.1:{port}: Address already in use", error
    assert "listening on" not in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_stops_the_server_and_its_probe_port(tmp_path):
    s = Server(tmp_path, "--dry-run", "--probe-port", "0")
    probe_port = int(re.search(r"also on http://127\.0\.0\.1:(\d+)\)", s.banner).group(1))
    assert plain_request(probe_port, "GET", "/livez") == (200, "ok")
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(timeout=30) != 0
    s.stop()
    assert "Traceback" not in s.log, s.log
    for port in (s.port, probe_port):
        with pytest.raises(ConnectionError):
            plain_request(port, "GET", "/livez")


def test_with_a_token_the_verbs_need_it_and_the_probes_do_not():
    from placer.serve.extender import Extender, RecordingBinder
    from placer.serve.app import VERBS, create_app

    app = create_app(Extender(cluster_document(), binder=RecordingBinder()), token="s3cret-token-0123456789")
    body = json.dumps({"Pod": pod("a", 6), "NodeNames": NAMES}).encode()
    for headers, why in [
        ({}, "no Authorization header"),
        ({"Authorization": "Basic czNjcmV0"}, "is not 'Bearer <token>'"),
        ({"Authorization": "Bearer s3cret-token-012345678"}, "is not the one of --token-file"),  # one short
        ({"Authorization": "Bearer s3cret-token-0123456789x"}, "is not the one of --token-file"),
    ]:
        for verb in VERBS:
            status, answer = asgi_request(app, "POST", f"/{verb}", body, headers)
            (error,) = json.loads(answer).values()
            assert status == 401 and error.startswith(f"POST /{verb}: unauthorized: ") and why in error, error
        status, _ = asgi_request(app, "GET", "/filter/", b"", headers)  # any other route too
        assert status == 401
    status, answer = asgi_request(app, "POST", "/filter", body, {"Authorization": "bearer s3cret-token-0123456789"})
    assert status == 200 and json.loads(answer)["NodeNames"] == ["gpu-1", "gpu-2"]
    for path in ("/livez", "/readyz", "/healthz", "/metrics"):
        assert asgi_request(app, "GET", path)[0] == 200, path
    _, metrics = asgi_request(app, "GET", "/metrics")
    refused = re.search(rb'^placer_extender_requests_total\{code="401",verb="filter"\} (\d+)', metrics, re.M)
    assert refused is not None and int(float(refused.group(1))) == 4


def test_serve_reads_the_token_file_and_refuses_bad_ones(tmp_path):
    (tmp_path / "token").write_text("s3cret-token-0123456789\n")
    s = Server(tmp_path, "--token-file", str(tmp_path / "token"))
    try:
        args = {"Pod": pod("a", 6), "NodeNames": NAMES}
        assert s.post("filter", args)[0] == 401
        status, result, _ = s.request("POST", "/filter", json.dumps(args).encode(),
                                      {"Authorization": "Bearer s3cret-token-0123456789"})
        assert status == 200 and result["NodeNames"] == ["gpu-1", "gpu-2"]
        assert s.request("GET", "/readyz")[::2] == (200, "ok")
    finally:
        s.stop()
    (tmp_path / "cluster.json").write_text(json.dumps(cluster_document()))
    (tmp_path / "short").write_text("abc\n")
    (tmp_path / "spaced").write_text("s3cret token 0123456789\n")
    for args, message in [
        (("--token-file", "missing"), "--token-file: cannot read missing: No such file or directory"),
        (("--token-file", "short"), "--token-file: short: expected one line of at least 16 visible ASCII"),
        (("--token-file", "spaced"), "got 23 characters with spaces, control or non-ASCII characters"),
        (("--token-file", "token", "--client-ca", "token"), "give --client-ca or --token-file, not both"),
        (("--client-ca", "token"), "--client-ca: give --tls-cert and --tls-key too"),
    ]:
        done = run_cli("serve", "--snapshot", "cluster.json", "--port", "0", *args, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("localhost", True), ("LOCALHOST", True),
    ("0.0.0.0", False), ("::", False), ("10.0.0.7", False), ("placer.example", False),
])
def test_only_loopback_may_listen_without_authentication(host, loopback):
    from placer.exceptions import InvalidInputError
    from placer.serve.app import exposure_warning, is_loopback

    assert is_loopback(host) is loopback
    plain = {"tls": False, "client_ca": False, "token": False}
    if loopback:
        assert exposure_warning(host, **plain, insecure=False) is None
        return
    with pytest.raises(InvalidInputError, match=r"^--host: listening on .* with no --client-ca or --token-file: .*"
                                                r"or accept it with --insecure$"):
        exposure_warning(host, **plain, insecure=False)
    with pytest.raises(InvalidInputError, match="the --token-file token travels in plain HTTP"):
        exposure_warning(host, **{**plain, "token": True}, insecure=False)
    assert exposure_warning(host, tls=True, client_ca=True, token=False, insecure=False) is None
    assert exposure_warning(host, tls=True, client_ca=False, token=True, insecure=False) is None
    assert exposure_warning(host, **plain, insecure=True).startswith(f"--insecure: listening on {host}, beyond loopback")


def test_listening_beyond_loopback_without_auth_needs_insecure_and_is_warned(tmp_path):
    (tmp_path / "cluster.json").write_text(json.dumps(cluster_document()))
    done = run_cli("serve", "--snapshot", "cluster.json", "--port", "0", "--host", "0.0.0.0", cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("placer: error: --host: listening on 0.0.0.0, beyond loopback") and "--insecure" in \
        done.stderr
    s = Server(tmp_path, "--host", "0.0.0.0", "--insecure")
    try:
        (warning,) = s.notes
        assert warning.startswith("placer: serve: warning: --insecure: listening on 0.0.0.0, beyond loopback, with no "
                                  "--client-ca or --token-file")
        assert s.banner.startswith("placer serve: listening on http://0.0.0.0:")
        assert s.request("GET", "/livez")[::2] == (200, "ok")  # through 127.0.0.1 only
    finally:
        s.stop()
    s = Server(tmp_path, "--insecure")
    try:
        assert s.notes == ["placer: serve: note: --insecure has no effect: 127.0.0.1 is loopback\n"]
    finally:
        s.stop()


def write_weak_signed(directory: Path, digest: str) -> tuple[Path, Path]:
    """A self-signed certificate signed with ``digest`` (cryptography refuses to sign so: openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to sign with a weak digest")
    cert, key = directory / f"{digest}.crt", directory / f"{digest}.key"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", f"-{digest}", "-subj",
         f"/CN={digest}", "-keyout", str(key), "-out", str(cert)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"this openssl does not sign with {digest}: {made.stderr.strip()}")
    return cert, key


@pytest.mark.parametrize("which, problem", [
    ("expired", r"certificate 1 \(CN=expired\): expired on \d{4}-\d\d-\d\d \d\d:\d\d UTC"),
    ("future", r"certificate 1 \(CN=future\): not valid before \d{4}-\d\d-\d\d \d\d:\d\d UTC"),
    ("rsa-1024", r"certificate 1 \(CN=rsa-1024\): RSA key of 1024 bits, fewer than 2048"),
    ("sha1", r"certificate 1 \(CN=sha1\): signed with SHA-1, which can be forged"),
    ("md5", r"certificate 1 \(CN=md5\): signed with MD5, which can be forged"),
])
def test_expired_and_weak_certificates_are_refused_at_start(tmp_path, pki, which, problem):
    if which in ("sha1", "md5"):
        cert, key = write_weak_signed(tmp_path, which)
    else:
        cert, key = pki[which].cert, pki[which].key
    (tmp_path / "cluster.json").write_text(json.dumps(cluster_document()))
    good = pki["server"]
    for args, where in [
        (("--tls-cert", str(cert), "--tls-key", str(key)), f"--tls-cert: {cert}"),
        (("--tls-cert", str(good.cert), "--tls-key", str(good.key), "--client-ca", str(cert)), f"--client-ca: {cert}"),
    ]:
        done = run_cli("serve", "--snapshot", "cluster.json", "--port", "0", *args, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert re.fullmatch(rf"placer: error: {re.escape(where)}: {problem}.*\n", done.stderr), done.stderr


def test_every_certificate_of_a_bundle_is_checked(tmp_path, pki):
    from placer.exceptions import InvalidInputError
    from placer.serve.app import check_certificates

    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(pki["ca"].cert.read_bytes() + pki["expired"].cert.read_bytes())
    with pytest.raises(InvalidInputError, match=rf"^--client-ca: {re.escape(str(bundle))}: certificate 2 "
                                                r"\(CN=expired\): expired on "):
        check_certificates(str(bundle), "--client-ca")
    check_certificates(str(pki["ca"].cert), "--client-ca")  # the good one alone passes
    with pytest.raises(InvalidInputError, match="it holds no PEM certificate"):
        check_certificates(str(pki["ca"].key), "--client-ca")


def test_the_documented_mutual_tls_setup_serves_the_scheduler_and_the_probe(tmp_path):
    import shlex

    import yaml

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to run the documented commands")
    text = (Path(__file__).parent.parent / "docs" / "extender.md").read_text()
    section = text[text.index("## Security model"):text.index("## Speed")]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).replace("\\\n", " ").strip().splitlines()
    for command in commands[:-1]:
        subprocess.run(command, shell=True, check=True, capture_output=True, cwd=tmp_path)
    serve = shlex.split(commands[-1])
    assert serve[:2] == ["placer", "serve"]
    args, skipped = [], {"--snapshot", "--kubeconfig", "--port"}  # the Server gives its own; no API server here
    options = dict(zip(serve[2::2], serve[3::2]))
    for option, value in options.items():
        args += [] if option in skipped else [option, "0" if option == "--probe-port" else value]
    scheduler, probe, exec_probe = (yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S))
    (extender,) = scheduler["extenders"]
    assert extender["enableHTTPS"] is True and extender["urlPrefix"].startswith("https://")
    s = Server(tmp_path, *args, "--dry-run")
    try:
        files = {key: tmp_path / Path(path).name for key, path in extender["tlsConfig"].items()}
        s.tls_context = ssl.create_default_context(cafile=str(files["caFile"]))
        s.tls_context.load_cert_chain(str(files["certFile"]), str(files["keyFile"]))
        status, result = s.post(extender["filterVerb"], {"Pod": pod("a", 6), "NodeNames": NAMES})
        assert status == 200 and result["NodeNames"] == ["gpu-1", "gpu-2"]
        probe_port = int(re.search(r"also on http://\S+:(\d+)\)", s.banner).group(1))
        for kind, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
            get = probe[kind]["httpGet"]
            assert (get["path"], get["port"]) == (path, int(options["--probe-port"]))
            assert plain_request(probe_port, "GET", path) == (200, "ok")  # kubelet's httpGet: no certificate
        for name in ("crt", "key"):
            shutil.copy(tmp_path / f"scheduler.{name}", tmp_path / f"probe.{name}")
        python, flag, program = exec_probe["livenessProbe"]["exec"]["command"]
        program = program.replace("/etc/placer/tls/", f"{tmp_path}/").replace(":8888/", f":{s.port}/")
        assert subprocess.run([sys.executable, flag, program], capture_output=True, timeout=30).returncode == 0
        s.tls_context = ssl.create_default_context(cafile=str(files["caFile"]))
        with pytest.raises((ssl.SSLError, ConnectionError)):
            s.request("GET", "/livez")  # no client certificate: refused
    finally:
        s.stop()


class LiveWatch:
    """The service's state and verbs (through the ASGI application) fed by a real watch of
    the stand-in API server, in this process: what ``placer serve --kubeconfig`` runs."""

    def __init__(self, api, tmp: Path, **extender: Any) -> None:
        import queue
        import threading

        from placer.serve.extender import Extender
        from placer.adapters.kubernetes.live import WatchHealth, api_client, watch_cluster
        from placer.serve.app import create_app

        self.health, feed, self.stop = WatchHealth(), queue.Queue(), threading.Event()
        self.extender = Extender(cluster_document(), **extender)
        self.app = create_app(self.extender, feed, watch=self.health)
        client = api_client(str(api.kubeconfig(tmp / "kubeconfig")))
        self.threads = watch_cluster(client, feed.put, self.stop, health=self.health)

    def post(self, verb: str, payload: dict) -> tuple[int, Any]:
        return asgi_post(self.app, f"/{verb}", json.dumps(payload).encode())

    def fits(self, name: str, gpus: int) -> list[str]:
        """The nodes filter passes for a new pod (none while the state is not current)."""
        return self.post("filter", {"Pod": pod(name, gpus), "NodeNames": NAMES})[1]["NodeNames"]

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)


def running_pod(name: str, node: str, gpus: int) -> dict:
    from test_extender import running_pod_object

    return running_pod_object(name, node, gpus)


@pytest.mark.parametrize("gone_as", ["status", "event"])
def test_after_410_gone_the_pods_are_listed_again_and_the_list_replaces_them(tmp_path, gone_as):
    pytest.importorskip("kubernetes")
    from kube_api_stub import KubeApiStub

    api = KubeApiStub()
    big = running_pod("big", "gpu-1", 8)
    api.push("ADDED", big)
    live = LiveWatch(api, tmp_path)
    try:
        wait_for(lambda: live.fits("a", 8) == ["gpu-2"], "the running pod listed")
        # while no watch sees it, big is deleted and a pod starts on gpu-2; then the watches' version is too old
        api.compact([("DELETED", big), ("ADDED", running_pod("newcomer", "gpu-2", 8))], gone_as=gone_as)
        wait_for(lambda: live.fits("b", 8) == ["gpu-1"], "big's GPUs released, the newcomer's held")
        assert api.listed.count("Pod") == 2 and live.health.errors()["Pod"] == 0  # a 410 is no failure
        # no double-booking: gpu-2's GPUs are the newcomer's; gpu-1's are free again
        status, bound = live.post("bind", {"PodName": "b", "PodNamespace": "ml", "PodUID": "uid-b", "Node": "gpu-2"})
        assert status == 200 and "pod ml/b does not fit on gpu-2: " in bound["Error"]
        assert "Insufficient nvidia.com/gpu" in bound["Error"]
        status, bound = live.post("bind", {"PodName": "b", "PodNamespace": "ml", "PodUID": "uid-b", "Node": "gpu-1"})
        assert (status, bound) == (200, {"Error": ""})
        held = {p.name: n.name for n in live.extender.cluster.to_snapshot().nodes for p in n.pods}
        assert held == {"ml/old": "gpu-0", "ml/newcomer": "gpu-2", "ml/b": "gpu-1"}
    finally:
        live.close()
        api.stop()


def test_bookmarks_move_the_watch_on_so_a_compaction_needs_no_list(tmp_path):
    pytest.importorskip("kubernetes")
    from kube_api_stub import KubeApiStub

    api = KubeApiStub()
    live = LiveWatch(api, tmp_path)
    try:
        wait_for(lambda: asgi_request(live.app, "GET", "/readyz")[0] == 200, "the first lists")
        node = {"kind": "Node", "metadata": {"name": "gpu-3", "labels": {"topology.kubernetes.io/rack": "r1"}},
                "spec": {"unschedulable": True},
                "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "500Gi"}}}
        api.push("MODIFIED", node)  # a newer resourceVersion than any pod's
        wait_for(lambda: live.fits("a", 1) is not None and live.extender.state()["events_applied"] == 1,
                 "the node event applied")
        api.bookmark()
        wait_for(lambda: "Pod" in api.bookmarked, "a bookmark sent to the pods' watch")
        api.compact()
        watches = api.requests.count("GET /api/v1/pods")
        wait_for(lambda: api.requests.count("GET /api/v1/pods") >= watches + 2, "two more watches of pods")
        assert sorted(api.listed) == ["Node", "Pod"] and live.health.errors() == {"Node": 0, "Pod": 0, "PodGroup": 0}
        state = live.extender.state()
        assert state["events_applied"] == 1 and state["events_refused"] == 0  # the bookmark is no change
    finally:
        live.close()
        api.stop()


def test_no_verb_decides_on_a_state_known_not_current():
    from placer.serve.extender import Extender
    from placer.adapters.kubernetes.live import WatchHealth
    from placer.serve.app import create_app

    now = [0.0]
    health = WatchHealth(("Node", "Pod"), clock=lambda: now[0])
    extender = Extender(cluster_document())
    app = create_app(extender, watch=health, max_staleness_s=60)
    filter_args = json.dumps({"Pod": pod("a", 6), "NodeNames": NAMES}).encode()
    bind_args = json.dumps({"PodName": "a", "PodNamespace": "ml", "PodUID": "uid-a", "Node": "gpu-1"}).encode()
    preempt_args = json.dumps({"Pod": pod("vip", 8, priority=100), "NodeNameToVictims": {}}).encode()

    def answers() -> dict[str, tuple[int, Any]]:
        return {verb: asgi_post(app, f"/{verb}", body) for verb, body in
                (("filter", filter_args), ("prioritize", filter_args), ("bind", bind_args), ("preempt", preempt_args))}

    refusal = "placer's cluster state is not current, so placer does not decide on it: "
    got = answers()  # nothing listed yet
    assert got["filter"][0] == 200 and got["filter"][1]["NodeNames"] == []
    assert got["filter"][1]["Error"].startswith(f"POST /filter: {refusal}watch-nodes: not listed yet")
    assert got["bind"] == (200, {"Error": got["filter"][1]["Error"].replace("/filter", "/bind")})
    for verb in ("prioritize", "preempt"):  # no Error field in their results: HTTP 503
        assert got[verb] == (503, {"Error": got["filter"][1]["Error"].replace("/filter", f"/{verb}")})
    assert extender.cluster.session.holding("ml/a") is None and extender.binder.bindings == []
    health.news("Node")
    health.news("Pod")
    got = answers()
    assert got["filter"][1] == {**got["filter"][1], "NodeNames": ["gpu-1", "gpu-2"], "Error": ""}
    assert got["prioritize"][0] == got["preempt"][0] == 200 and got["bind"] == (200, {"Error": ""})
    health.gap("Pod", "resourceVersion expired (HTTP 410 Gone): listing again")
    _, result = asgi_post(app, "/filter", filter_args)
    assert result["Error"] == f"POST /filter: {refusal}watch-pods: resourceVersion expired (HTTP 410 Gone): listing again"
    health.news("Pod")
    now[0] = 61.0  # the Nodes' last news is older than max_staleness_s
    health.news("Pod")
    _, result = asgi_post(app, "/filter", filter_args)
    assert result["Error"] == (f"POST /filter: {refusal}state-age: the API server's last news is 61 s old, more than "
                               "--max-staleness 60 s")


def test_probes_answer_while_a_bind_waits_on_a_slow_api_server_and_the_bind_times_out(tmp_path):
    pytest.importorskip("kubernetes")
    import threading

    from kube_api_stub import KubeApiStub

    api = KubeApiStub()
    api.bind_delay_s = 60.0
    s = Server(tmp_path, "--kubeconfig", str(api.kubeconfig(tmp_path / "kubeconfig")), "--api-timeout", "4")
    answers: list[tuple[int, Any]] = []
    try:
        wait_for(lambda: s.request("GET", "/readyz")[0] == 200, "the first lists")
        assert s.post("filter", {"Pod": pod("slow", 6), "NodeNames": NAMES})[1]["NodeNames"] == ["gpu-1", "gpu-2"]
        binding = threading.Thread(target=lambda: answers.append(s.post(
            "bind", {"PodName": "slow", "PodNamespace": "ml", "PodUID": "uid-slow", "Node": "gpu-1"})))
        binding.start()
        wait_for(lambda: api.bindings, "the Binding to reach the API server")
        # the bind waits on the API server: the probes answer meanwhile
        assert s.request("GET", "/livez")[::2] == (200, "ok")
        assert s.request("GET", "/readyz")[::2] == (200, "ok")
        status, health, _ = s.request("GET", "/healthz")
        assert answers == [] and status == 200 and health["busy"] == "bind"
        binding.join(timeout=30)
        (status, bound), = answers
        assert status == 200 and bound["Error"] == (
            "POST /bind: binding ml/slow to gpu-1 failed: the API server did not answer within 4 s (--api-timeout)")
        status, health, _ = s.request("GET", "/healthz")
        assert health["busy"] == "" and health["pods"] == 1  # the failed bind holds nothing
    finally:
        s.stop()
        api.stop()


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("limited"), "--dry-run", "--api-timeout", "5", "--max-body-bytes", "100000",
               "--header-timeout", "1", "--body-timeout", "1")
    yield s
    s.stop()


def raw_connection(server: Any) -> "socket.socket":
    """A plain TCP connection to ``server`` (anything with a ``port``)."""
    import socket

    return socket.create_connection(("127.0.0.1", server.port), timeout=20)


def read_until_closed(sock: "socket.socket") -> bytes:
    """Everything the server sends until it closes the connection (a socket timeout fails the test)."""
    got = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return got
        got += chunk


def test_api_timeout_without_an_api_server_is_noted(limited):
    assert "placer: serve: note: --api-timeout has no effect without --kubeconfig (no API server is called)\n" in \
        limited.notes


def test_a_chunked_body_past_the_cap_is_refused_413_before_it_is_read_whole(limited):
    with raw_connection(limited) as sock:
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: placer\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        # 104 KiB, past the cap of 100,000 bytes, and the body never ends. No more than that is sent: bytes
        # the server never reads when it closes would make its kernel reset the connection, losing the answer
        for chunk in (b'{"Pod": ' + b" " * 65528, b" " * 40000):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and b"connection: close" in head.lower()
    assert json.loads(body) == {"Error": "POST /filter: body of more than 100000 bytes, the most read "
                                         "(--max-body-bytes)"}
    assert limited.request("GET", "/livez")[::2] == (200, "ok")


def test_a_content_length_past_the_cap_is_refused_413_without_reading_the_body(limited):
    with raw_connection(limited) as sock:
        sock.sendall(b"POST /bind HTTP/1.1\r\nHost: placer\r\nContent-Length: 100001\r\n\r\n{")
        head, _, body = read_until_closed(sock).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ")
    assert json.loads(body)["Error"] == "POST /bind: body of 100001 bytes, more than the 100000 read (--max-body-bytes)"


@pytest.mark.parametrize("sent", [b"", b"POST /filter HTTP/1.1\r\nHost: placer\r\nContent-Le"])
def test_a_connection_without_whole_headers_is_closed_after_the_header_timeout(limited, sent):
    with raw_connection(limited) as sock:
        sock.sendall(sent)
        assert read_until_closed(sock) == b""  # closed with no answer, long before the socket's 20 s


def test_a_body_that_does_not_come_is_answered_408_after_the_body_timeout(limited):
    with raw_connection(limited) as sock:
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: placer\r\nContent-Length: 50\r\n\r\n{\"Pod\"")
        head, _, body = read_until_closed(sock).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["Error"] == ("POST /filter: the body did not come whole within 1 s (--body-timeout); "
                                         "6 bytes came")


def test_a_kept_alive_connection_serves_requests_until_it_idles_past_the_header_timeout(limited):
    with raw_connection(limited) as sock:
        for _ in range(3):
            sock.sendall(b"GET /livez HTTP/1.1\r\nHost: placer\r\n\r\n")
            answer = b""
            while not answer.endswith(b"\r\n\r\nok"):
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 ")
        assert read_until_closed(sock) == b""


@contextlib.contextmanager
def in_process(app, **limits: Any) -> Iterator[Any]:
    """``app`` served by :func:`placer.serve.app.server` under ``Limits(**limits)`` in a thread
    of this process, on a free loopback port: yields the ``uvicorn.Server`` (its port as
    ``.port``)."""
    import threading

    from placer.serve.app import Limits, listening_socket, server

    listening = listening_socket("127.0.0.1", 0)
    running = server(app, limits=Limits(**limits))
    running.port = listening.getsockname()[1]
    thread = threading.Thread(target=running.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: running.started, "the server to start")
        yield running
    finally:
        running.should_exit = True
        thread.join(timeout=10)


def test_every_accepted_connection_has_tcp_nodelay():
    import socket

    from placer.serve.extender import Extender
    from placer.serve.app import create_app

    with in_process(create_app(Extender(cluster_document()))) as running:
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=20)
        conn.request("GET", "/livez")
        assert conn.getresponse().read() == b"ok"
        (accepted,) = running.server_state.connections
        assert accepted.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        conn.close()


def test_a_verb_at_work_holds_the_state_not_the_event_loop():
    import threading

    from placer.serve.extender import Extender
    from placer.serve.app import create_app

    entered, release = threading.Event(), threading.Event()

    class Slow(Extender):
        def filter(self, args, source="POST /filter"):
            entered.set()
            release.wait(30)  # a long decision (a big body, a large cluster)
            return super().filter(args, source)

    def get(port: int, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    body = json.dumps({"Pod": pod("a", 6), "NodeNames": NAMES}).encode()
    answers: list[Any] = []
    with in_process(create_app(Slow(cluster_document()))) as running:
        def post(path: str) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=60)
            conn.request("POST", path, body=body)
            answers.append((path, json.loads(conn.getresponse().read())))
            conn.close()

        first = threading.Thread(target=post, args=("/filter",))
        first.start()
        assert entered.wait(20)
        second = threading.Thread(target=post, args=("/prioritize",))  # waits for the state, not the loop
        second.start()
        assert get(running.port, "/livez") == (200, b"ok")
        assert get(running.port, "/readyz") == (200, b"ok")
        status, health = get(running.port, "/healthz")
        assert status == 200 and json.loads(health)["busy"] == "filter"
        assert get(running.port, "/metrics")[0] == 200
        assert answers == []  # all of that while filter worked
        release.set()
        first.join(timeout=30)
        second.join(timeout=30)
    answered = dict(answers)
    assert answered["/filter"]["NodeNames"] == ["gpu-1", "gpu-2"] and len(answered["/prioritize"]) == len(NAMES)


def test_past_max_connections_requests_are_answered_503():
    from placer.serve.extender import Extender
    from placer.serve.app import create_app

    with in_process(create_app(Extender(cluster_document())), max_connections=3) as running:
        held = [raw_connection(running) for _ in range(2)]
        wait_for(lambda: len(running.server_state.connections) == 2, "the two connections to be accepted")
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=20)
        conn.request("GET", "/livez")
        assert conn.getresponse().status == 503  # the third connection
        conn.close()
        held.pop().close()
        wait_for(lambda: len(running.server_state.connections) == 1, "a connection to close")
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=20)
        conn.request("GET", "/livez")
        assert conn.getresponse().read() == b"ok"
        conn.close()
        held.pop().close()


def test_a_body_being_decoded_holds_neither_the_state_nor_the_other_verbs(monkeypatch):
    import threading

    import placer.serve.app
    from placer.serve.extender import Extender
    from placer.schema.extender import decode_filter_args

    entered, release = threading.Event(), threading.Event()

    def slow_decode(raw: bytes, source: str):
        entered.set()
        release.wait(30)  # as long as a body of 50 MB takes
        return decode_filter_args(raw, source)

    monkeypatch.setattr(placer.serve.app, "decode_filter_args", slow_decode)
    answers: list[Any] = []
    with in_process(placer.serve.app.create_app(Extender(cluster_document()))) as running:
        def post(verb: str, payload: Any, padding: int = 0) -> Any:
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=60)
            try:
                conn.request("POST", f"/{verb}", body=json.dumps(payload).encode() + b" " * padding)
                return json.loads(conn.getresponse().read())
            finally:
                conn.close()

        large = {"Pod": pod("a", 6), "NodeNames": NAMES}  # over 1 MiB with its padding
        decoding = threading.Thread(target=lambda: answers.append(post("filter", large, padding=2**21)))
        decoding.start()
        assert entered.wait(20)
        bound = post("bind", {"PodName": "b", "PodNamespace": "ml", "PodUID": "u", "Node": "gpu-1"})
        assert bound["Error"] == "POST /bind: pod ml/b was not seen by filter; placer does not know its requests"
        assert answers == []  # answered while filter's body was being decoded
        release.set()
        decoding.join(timeout=30)
    assert answers[0]["NodeNames"] == ["gpu-1", "gpu-2"]
