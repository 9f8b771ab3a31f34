"""A real Kubernetes control plane on this machine for the tests: etcd, kube-apiserver and
kube-scheduler built from the Go modules pinned in ``kube/go.mod`` (``kube/build.sh``), started
on free loopback ports in a temporary folder and stopped by pid.

No kubelet, controller-manager or kwok runs: Nodes are API objects created with their status
(capacity, allocatable), which is all kube-scheduler reads. Two admission plugins that need a
controller are off, as in kube's own scheduler integration tests (``ServiceAccount``: no
``default`` account is made; ``TaintNodesByCondition``: nothing would lift the not-ready
taint); pods are deleted with ``gracePeriodSeconds: 0`` (no kubelet confirms a graceful one).

``ControlPlane.start(folder)`` starts etcd and the API server and writes ``kubeconfig`` (a
``system:masters`` token, the API server's self-signed certificate not verified);
``start_scheduler(extenders)`` starts kube-scheduler with a ``KubeSchedulerConfiguration``
whose ``extenders`` are given (and can be called again to restart it); ``stop()`` ends what
it started. :class:`Api` is a small JSON client over ``urllib`` for the tests' own calls.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from loopback import free_ports

REPO = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("PLACER_KUBE_BIN", REPO / "kube" / "bin"))
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-oracle")
TOKEN = "placer-test-token"


def missing(*names: str) -> Optional[str]:
    """Why the control plane cannot be started here (None: it can)."""
    absent = [n for n in (names or BINARIES) if not (BIN / n).exists()]
    if not absent:
        return None
    if shutil.which("go") is None:
        return f"no Go toolchain, so {', '.join(absent)} cannot be built (kube/build.sh builds them when Go is present)"
    return f"{', '.join(absent)} not built in {BIN}: run kube/build.sh (.ci/run does)"


def release() -> str:
    """The Kubernetes release the binaries were built from (``kube/bin/RELEASE``)."""
    path = BIN / "RELEASE"
    return path.read_text().strip() if path.exists() else "unknown"


def wait_until(condition: Callable[[], Any], what: str, timeout_s: float = 60.0, interval_s: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something true; fail naming ``what``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = condition()
        except (OSError, urllib.error.URLError, ApiError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")


def unverified_tls() -> ssl.SSLContext:
    """A client TLS context that takes the control plane's self-signed certificates unchecked."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status
        self.body = body


class Api:
    """JSON calls to the API server with the test token."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._context = unverified_tls()

    def call(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
             timeout_s: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type, "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, context=self._context, timeout=timeout_s) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def create(self, obj: dict[str, Any]) -> Any:
        """POST one Node, Pod, PriorityClass, Namespace or PodGroup-free core object."""
        return self.call("POST", collection_path(obj), obj)

    def delete(self, path: str, grace_period_s: int = 0) -> Any:
        return self.call("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                          "gracePeriodSeconds": grace_period_s})

    def patch(self, path: str, patch: dict[str, Any]) -> Any:
        return self.call("PATCH", path, patch, content_type="application/merge-patch+json")

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        return self.get(path)["items"]

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def nodes(self) -> list[dict[str, Any]]:
        return self.get("/api/v1/nodes")["items"]


def collection_path(obj: dict[str, Any]) -> str:
    kind = obj["kind"]
    namespace = obj.get("metadata", {}).get("namespace", "default")
    if kind == "Node":
        return "/api/v1/nodes"
    if kind == "Namespace":
        return "/api/v1/namespaces"
    if kind == "PriorityClass":
        return "/apis/scheduling.k8s.io/v1/priorityclasses"
    if kind == "Pod":
        return f"/api/v1/namespaces/{namespace}/pods"
    raise ValueError(f"no collection for kind {kind}")


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's ``PodScheduled`` condition, if the scheduler wrote one."""
    for condition in pod.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "PodScheduled":
            return condition
    return None


@dataclass
class ControlPlane:
    """etcd, kube-apiserver and (after :meth:`start_scheduler`) kube-scheduler on loopback."""

    folder: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    api_port: int = 0
    kubeconfig: Path = Path()

    @classmethod
    def start(cls, folder: Path) -> "ControlPlane":
        plane = cls(folder)
        try:
            plane._start_etcd()
            plane._start_apiserver()
        except BaseException:
            plane.stop()
            raise
        return plane

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def api(self) -> Api:
        return Api(self.url)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        try:
            proc = subprocess.Popen([str(BIN / name.split("#")[0]), *args], stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.folder, start_new_session=True)
        finally:
            log.close()
        (self.folder / f"{name}.pid").write_text(str(proc.pid))
        self.processes[name] = proc
        return proc

    def log(self, name: str, tail: int = 4000) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def _alive(self, name: str) -> None:
        proc = self.processes[name]
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")

    def _start_etcd(self) -> None:
        client, peer = free_ports(2)
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._spawn("etcd", [
            "--data-dir", str(self.folder / "etcd"), "--listen-client-urls", self.etcd_url,
            "--advertise-client-urls", self.etcd_url, "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn", "--quota-backend-bytes", str(4 << 30),
        ])

        def healthy() -> bool:
            self._alive("etcd")
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as response:
                return json.loads(response.read()).get("health") == "true"

        wait_until(healthy, "etcd's /health", 60)

    def _service_account_key(self) -> Path:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path = self.folder / "sa.key"
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
        return path

    def _start_apiserver(self) -> None:
        (self.api_port,) = free_ports(1)
        tokens = self.folder / "tokens.csv"
        tokens.write_text(f'{TOKEN},placer-test,placer-test-uid,"system:masters"\n')
        key = self._service_account_key()
        (self.folder / "certs").mkdir(exist_ok=True)
        self._spawn("kube-apiserver", [
            "--etcd-servers", self.etcd_url, "--bind-address", "127.0.0.1", "--secure-port", str(self.api_port),
            "--cert-dir", str(self.folder / "certs"), "--token-auth-file", str(tokens),
            "--authorization-mode", "RBAC", "--service-cluster-ip-range", "10.0.0.0/24",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(key), "--service-account-signing-key-file", str(key),
            "--endpoint-reconciler-type", "none", "--allow-privileged=true",
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
            "--v", "0",
        ])
        self.kubeconfig = self.folder / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "test", "user": {"token": TOKEN}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }))

        def ready() -> bool:
            self._alive("kube-apiserver")
            return _answers_ok(self.url + "/readyz", TOKEN)

        wait_until(ready, "kube-apiserver's /readyz", 120, 0.25)
        wait_until(lambda: self.api.get("/api/v1/namespaces/default"), "the default namespace", 60, 0.25)

    def start_scheduler(self, extenders: Iterable[dict[str, Any]] = (), *, name: str = "kube-scheduler",
                        extra: dict[str, Any] | None = None) -> None:
        """Start (or restart) kube-scheduler with these ``extenders`` entries."""
        self.stop_scheduler(name)
        (port,) = free_ports(1)
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": 500, "burst": 1000},
            "leaderElection": {"leaderElect": False},
            "extenders": list(extenders),
            **(extra or {}),
        }
        path = self.folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        self._spawn(name, ["--config", str(path), "--bind-address", "127.0.0.1", "--secure-port", str(port),
                           "--authentication-skip-lookup", "--authorization-always-allow-paths",
                           "/healthz,/readyz,/livez,/metrics", "--v", os.environ.get("PLACER_KUBE_SCHEDULER_V", "1")])
        self.scheduler_port = port

        def serving() -> bool:
            self._alive(name)
            return _answers_ok(f"https://127.0.0.1:{port}/healthz")

        wait_until(serving, f"{name}'s /healthz", 60, 0.25)

    def stop_scheduler(self, name: str = "kube-scheduler") -> None:
        proc = self.processes.pop(name, None)
        if proc is not None:
            _end(proc)

    def stop(self) -> None:
        """End every process started, last first, by pid."""
        for name in reversed(list(self.processes)):
            _end(self.processes.pop(name))


def _answers_ok(url: str, token: str | None = None) -> bool:
    """Whether a GET of ``url`` (a probe) answers 200."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=unverified_tls(),
                                    timeout=5) as response:
            return response.status == 200
    except urllib.error.HTTPError:
        return False


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def node(name: str, *, gpus: int = 8, cpu: str = "96", memory: str = "1Ti", labels: dict[str, str] | None = None,
         extended: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
         unschedulable: bool = False, pods: int = 110) -> dict[str, Any]:
    """A Node object as a kubelet with NVIDIA's device plugin reports it."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), **({"nvidia.com/gpu": str(gpus)} if gpus else {}),
                 **(extended or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": spec,
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "kubelet is posting ready status"}]},
    }


# ---------------------------------------------------------------- gangs and placer as extender
# (shared by test_kube_incident.py and test_kube_gang_wake.py)

PODGROUP_API = "/apis/scheduling.x-k8s.io/v1alpha1"
EXTENDER_DOCS = REPO / "docs" / "extender.md"


def podgroup_crd() -> dict[str, Any]:
    """scheduler-plugins' PodGroup kind, with a schema that keeps every field."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
        "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
                 "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup",
                           "listKind": "PodGroupList", "shortNames": ["pg"]},
                 "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


def podgroup(namespace: str, name: str, min_member: int) -> dict[str, Any]:
    """A coscheduling PodGroup of ``min_member`` pods."""
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": min_member}}


def create_podgroups(api: Api, podgroups: Iterable[dict[str, Any]]) -> None:
    """Install the PodGroup CRD and create ``podgroups`` once the API serves the kind."""
    api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", podgroup_crd())
    for group in podgroups:
        path = f"{PODGROUP_API}/namespaces/{group['metadata']['namespace']}/podgroups"
        wait_until(lambda: api.call("POST", path, group), "the PodGroup API (its CRD established)", 30)


def documented_extender(port: int) -> dict[str, Any]:
    """The extender entry of docs/extender.md's KubeSchedulerConfiguration, at placer's port."""
    config = yaml.safe_load(re.search(r"```yaml\n(.*?)```", EXTENDER_DOCS.read_text(), re.S).group(1))
    (extender,) = config["extenders"]
    return {**extender, "urlPrefix": f"http://127.0.0.1:{port}"}


def stop_with(placer: Any, plane: ControlPlane) -> None:
    """Stop ``placer`` (a ``serve_process.Server``; None: not started), then the control plane."""
    try:
        if placer is not None:
            placer.stop()
    finally:
        plane.stop()


def print_logs(plane: ControlPlane, placer: Any) -> None:
    """Print what kube-scheduler and ``placer`` (stopped first; None: not started) wrote:
    what went wrong, from both sides."""
    print(plane.log("kube-scheduler"))
    if placer is not None:
        placer.stop()
        print(placer.log)
