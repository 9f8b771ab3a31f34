"""Issue #33: kube-scheduler alone vs kube-scheduler with ``placer serve`` as its extender.

One run starts a real control plane (etcd, kube-apiserver: ``tests/kube_control_plane.py``,
binaries from ``kube/build.sh`` or ``PLACER_KUBE_BIN``) and, for each node count (the smaller
first; the larger adds nodes to it), measures two configurations on the same Nodes and the
same pods:

* **kube alone**: kube-scheduler's default profile, no extenders;
* **kube + placer**: kube-scheduler with ``placer serve --kubeconfig`` as its extender, the
  configuration of docs/extender.md (filter, prioritize, preempt, bind, weight 5,
  ``nodeCacheCapable``, ``managedResources: nvidia.com/gpu``); placer binds, posting the
  Binding with ``placer.io/gpus``.

Nodes: 8 GPUs (``nvidia.com/gpu``), 96 CPUs, 1 TiB, racks of 32 (``topology.kubernetes.io/rack``,
placer's ``--level rack=...``). Pods: ``--pods`` of 1, 2, 4 or 8 GPUs (seeded), 10 CPUs and
100 GiB per GPU, created in bulk (8 kept-alive connections) in namespace ``bench`` while no
kube-scheduler runs, which is then started; between configurations they are deleted (grace
0) and placer serve and kube-scheduler restarted.

Printed per configuration and node count:

* pods/s: the pods bound after the first, over the time from the first bind to the last,
  as the bench's own watch of the pods sees them (every pod is created before kube-scheduler
  starts, so that its rate is measured, not the API server's rate of creates; the creates'
  time is printed below the table);
* algorithm p50/p99 and mean: kube-scheduler's ``scheduler_scheduling_algorithm_duration_seconds``
  (one scheduling cycle's filter and score, the extender's filter and prioritize calls
  included: what holds the next pod back); attempt p50/p99 and mean:
  ``scheduler_scheduling_attempt_duration_seconds{result="scheduled"}`` (the algorithm and
  the binding, which runs beside the next cycles: waiting on the API server beside the
  other binds is in it). Percentiles interpolated in the histograms' ×2 buckets as Prometheus's
  ``histogram_quantile`` does; the means exact (_sum/_count);
* placer ms/pod: placer serve's ``placer_extender_request_seconds`` _sum of every verb over
  the pods bound (time in placer from the request read to the answer encoded, waiting on
  the state included), with each verb's share;
* peak RSS (``VmHWM``) of kube-scheduler and placer serve.

``--profile FILE`` runs placer serve under cProfile (every thread: the verbs run in worker
threads; ``bench/profiled/sitecustomize.py``) in the largest node count's placer run, writes
FILE (pstats) and prints placer's functions by cumulative time.

Run: ``PLACER_KUBE_BIN=kube/bin PYTHONPATH=src:bench python bench/bench_kube_extender.py
[--nodes 1000,5000] [--pods 1000] [--quick] [--profile serve.prof]``. To measure another
checkout, put its ``src`` first on ``PYTHONPATH`` (placer serve runs with this environment).
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import pstats
import queue
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from bench_extender import GPU_SIZES  # noqa: E402
from bench_serve_load import peak_rss_mib  # noqa: E402
from kube_control_plane import TOKEN, ControlPlane, missing, node, release, unverified_tls, wait_until  # noqa: E402
from serve_process import Server  # noqa: E402

NAMESPACE = "bench"
RACK_LABEL = "topology.kubernetes.io/rack"
NODES_PER_RACK = 32
CONNECTIONS = 8
PROFILED = Path(__file__).resolve().parent / "profiled"
STALL_S = 60.0
"""A run ends when every pod is bound, or when no pod has been bound for this long."""


def extender_entry(port: int) -> dict[str, Any]:
    """docs/extender.md's extender configuration, placer serve on ``port`` of the loopback."""
    return {
        "urlPrefix": f"http://127.0.0.1:{port}", "filterVerb": "filter", "prioritizeVerb": "prioritize",
        "preemptVerb": "preempt", "bindVerb": "bind", "weight": 5, "enableHTTPS": False,
        "nodeCacheCapable": True, "httpTimeout": "30s", "ignorable": False,
        "managedResources": [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}],
    }


def gpu_node(i: int) -> dict[str, Any]:
    return node(f"gpu-{i:05d}", gpus=8, labels={RACK_LABEL: f"rack-{i // NODES_PER_RACK:03d}",
                                                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})


def gpu_pod(k: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"job-{k:05d}", "namespace": NAMESPACE, "labels": {"app": "bench"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)},
                "requests": {"cpu": str(10 * gpus), "memory": f"{100 * gpus}Gi"},
            }}],
        },
    }


class Connection:
    """A kept-alive HTTPS connection to the API server with the control plane's token."""

    def __init__(self, plane: ControlPlane, timeout_s: float | None = 60.0) -> None:
        context = unverified_tls()
        self.conn = http.client.HTTPSConnection("127.0.0.1", plane.api_port, context=context, timeout=timeout_s)
        self.headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
                        "Accept": "application/json"}

    def send(self, method: str, path: str, body: Any = None) -> http.client.HTTPResponse:
        self.conn.request(method, path, body=None if body is None else json.dumps(body).encode(),
                          headers=self.headers)
        return self.conn.getresponse()

    def close(self) -> None:
        self.conn.close()


def create_all(plane: ControlPlane, objects: list[dict[str, Any]], path: str) -> list[float]:
    """POST ``objects`` to ``path`` over :data:`CONNECTIONS` connections at once; each
    object's time (``perf_counter``) when its create was answered, in order."""
    answered = [0.0] * len(objects)
    work: queue.Queue[int] = queue.Queue()
    for i in range(len(objects)):
        work.put(i)
    failures: list[str] = []

    def worker() -> None:
        conn = Connection(plane)
        try:
            while not failures:
                try:
                    i = work.get_nowait()
                except queue.Empty:
                    return
                response = conn.send("POST", path, objects[i])
                text = response.read()
                if response.status != 201:
                    failures.append(f"POST {path}: HTTP {response.status}: {text[:300]!r}")
                answered[i] = time.perf_counter()
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(failures[0])
    return answered


@dataclass
class BindWatch:
    """The bench's own watch of the namespace's pods: when each was first seen bound."""

    plane: ControlPlane
    bound_at: dict[str, float] = field(default_factory=dict)
    stopped: threading.Event = field(default_factory=threading.Event)
    failed: str = ""
    rewatched: int = 0

    def start(self) -> None:
        listed = self.plane.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods")
        self.version = listed["metadata"]["resourceVersion"]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _events(self) -> Iterator[dict[str, Any]]:
        """The watch's events, watching again from the last version whenever the API server
        ends it (it closes a watcher that falls behind)."""
        while not self.stopped.is_set():
            conn = Connection(self.plane, timeout_s=None)  # a read that times out would lose part of a line
            try:
                response = conn.send("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?watch=true&"
                                            f"resourceVersion={self.version}&timeoutSeconds=1800")
                if response.status != 200:
                    raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
                for line in response:
                    if self.stopped.is_set():
                        return
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch ERROR event: {event['object']}")
                    self.version = event["object"]["metadata"]["resourceVersion"]
                    yield event
            finally:
                conn.close()
            self.rewatched += 1

    def _run(self) -> None:
        try:
            for event in self._events():
                pod = event["object"]
                if event["type"] in ("ADDED", "MODIFIED") and pod.get("spec", {}).get("nodeName"):
                    self.bound_at.setdefault(pod["metadata"]["name"], time.perf_counter())
        except Exception as error:  # the run reports it
            self.failed = f"{type(error).__name__}: {error}"

    def wait(self, count: int) -> None:
        """Until ``count`` pods are bound, or none was for :data:`STALL_S`."""
        last, seen = time.monotonic(), 0
        while len(self.bound_at) < count and time.monotonic() - last < STALL_S:
            time.sleep(0.2)
            if len(self.bound_at) > seen:
                last, seen = time.monotonic(), len(self.bound_at)
        self.stopped.set()
        if self.failed:
            raise SystemExit(f"the bench's watch of pods failed: {self.failed}")


def scrape(url: str, token: str | None = None) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A Prometheus page: every sample's name → [(labels, value)]."""
    context = unverified_tls()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=context, timeout=30) as r:
        text = r.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def matching(samples: Iterable[tuple[dict[str, str], float]], **labels: str) -> list[tuple[dict[str, str], float]]:
    return [(got, value) for got, value in samples if all(got.get(k) == v for k, v in labels.items())]


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus's ``histogram_quantile``: linear within the bucket the rank falls in."""
    buckets = sorted(buckets)
    total = buckets[-1][1]
    if total == 0:
        return float("nan")
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= rank:
            if bound == float("inf"):
                return lower_bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / max(cumulative - lower_count, 1e-12)
        lower_bound, lower_count = bound, cumulative
    return lower_bound


@dataclass
class Histogram:
    """One histogram series of a scrape: p50, p99 (interpolated) and the exact mean, in seconds."""

    p50: float
    p99: float
    mean: float
    count: float
    total: float

    @classmethod
    def of(cls, samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> "Histogram":
        buckets = [(float(got["le"]), value) for got, value in matching(samples.get(f"{name}_bucket", ()), **labels)]
        count = sum(v for _, v in matching(samples.get(f"{name}_count", ()), **labels))
        total = sum(v for _, v in matching(samples.get(f"{name}_sum", ()), **labels))
        if not buckets or count == 0:
            return cls(float("nan"), float("nan"), float("nan"), 0.0, 0.0)
        return cls(histogram_quantile(0.5, buckets), histogram_quantile(0.99, buckets), total / count, count, total)


@dataclass
class Figures:
    """What one configuration measured on one node count."""

    configuration: str
    nodes: int
    pods: int
    bound: int
    seconds: float
    create_seconds: float
    attempt: Histogram
    algorithm: Histogram
    attempts: dict[str, float]
    scheduler_rss_mib: float
    placer_verbs: dict[str, Histogram] = field(default_factory=dict)
    placer_rss_mib: float = float("nan")

    @property
    def rate(self) -> float:
        """Pods bound per second, first bind to last."""
        return (self.bound - 1) / self.seconds if self.seconds > 0 else float("nan")

    def placer_ms_per_pod(self) -> float:
        return sum(h.total for h in self.placer_verbs.values()) / max(self.bound, 1) * 1e3


class PlacerServe:
    """``placer serve --kubeconfig`` of an empty snapshot (the nodes come from the API's
    lists), its log drained to a file so that its pipe never fills; with ``profile``, under
    cProfile of every thread (``bench/profiled/sitecustomize.py``), the stats written there
    when it stops."""

    def __init__(self, folder: Path, plane: ControlPlane, profile: Path | None) -> None:
        self.profile = profile
        extra = ["--kubeconfig", str(plane.kubeconfig), "--level", f"rack={RACK_LABEL}"]
        document = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": []}
        saved = dict(os.environ)
        if profile is not None:  # the Server's process inherits this environment
            os.environ["PLACER_BENCH_PROFILE"] = str(profile.resolve())
            os.environ["PYTHONPATH"] = os.pathsep.join([str(PROFILED), *filter(None, [saved.get("PYTHONPATH")])])
        try:
            self.server = Server(folder, *extra, document=document)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.log = (folder / "placer-serve.log").open("a")
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    def _drain(self) -> None:
        assert self.server.proc.stderr is not None
        for line in self.server.proc.stderr:
            self.log.write(line)

    def wait_ready(self, nodes: int) -> None:
        def ready() -> bool:
            state = self.server.request("GET", "/healthz")[1]
            return self.server.request("GET", "/readyz")[0] == 200 and state["nodes"] == nodes
        wait_until(ready, f"placer serve listing {nodes} nodes", 120, 0.5)

    def stop(self) -> None:
        if self.profile is not None:
            self.profile.unlink(missing_ok=True)
            self.server.proc.send_signal(signal.SIGUSR1)
            wait_until(self.profile.exists, f"placer serve's profile in {self.profile}", 60, 0.5)
        self.server.proc.terminate()  # the drain reads its stderr to the end, then Server.stop waits for it
        self.drain.join(timeout=30)
        self.server.stop()
        self.log.close()


def measure(plane: ControlPlane, folder: Path, nodes: int, pods: list[dict[str, Any]], with_placer: bool,
            profile: Path | None) -> Figures:
    """One configuration's run: placer serve (if ``with_placer``), the pods created at once,
    then kube-scheduler started and every pod bound; everything stopped and the pods deleted
    after."""
    serve = None
    try:
        extenders = []
        if with_placer:
            serve = PlacerServe(folder, plane, profile)
            serve.wait_ready(nodes)
            extenders = [extender_entry(serve.server.port)]
        watch = BindWatch(plane)
        watch.start()
        started = time.perf_counter()
        created = create_all(plane, pods, f"/api/v1/namespaces/{NAMESPACE}/pods")
        create_seconds = max(created) - started
        plane.start_scheduler(extenders)  # every pod is queued when it starts: its rate, not the creates'
        watch.wait(len(pods))
        bound = sorted(watch.bound_at.values())
        if watch.rewatched:
            print(f"  (the API server ended the bench's watch {watch.rewatched} times: watched again)", file=sys.stderr)
        in_api = sum(1 for p in plane.api.pods(NAMESPACE) if p["spec"].get("nodeName"))
        if in_api != len(bound):
            raise SystemExit(f"the bench's watch saw {len(bound)} pods bound, the API server has {in_api}")
        scheduler = plane.processes["kube-scheduler"]
        samples = scrape(f"https://127.0.0.1:{plane.scheduler_port}/metrics")
        figures = Figures(
            configuration="kube + placer" if with_placer else "kube alone", nodes=nodes, pods=len(pods),
            bound=len(bound), seconds=bound[-1] - bound[0] if len(bound) > 1 else float("nan"),
            create_seconds=create_seconds,
            attempt=Histogram.of(samples, "scheduler_scheduling_attempt_duration_seconds", result="scheduled"),
            algorithm=Histogram.of(samples, "scheduler_scheduling_algorithm_duration_seconds"),
            attempts={got["result"]: value for got, value in samples.get("scheduler_schedule_attempts_total", ())},
            scheduler_rss_mib=peak_rss_mib(scheduler.pid),
        )
        if serve is not None:
            placer = scrape(f"http://127.0.0.1:{serve.server.port}/metrics")
            figures.placer_verbs = {verb: Histogram.of(placer, "placer_extender_request_seconds", verb=verb)
                                    for verb in ("filter", "prioritize", "preempt", "bind")}
            figures.placer_rss_mib = peak_rss_mib(serve.server.proc.pid)
        return figures
    finally:
        plane.stop_scheduler()
        if serve is not None:
            serve.stop()
        plane.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods")
        wait_until(lambda: not plane.api.pods(NAMESPACE), "the bench's pods deleted", 300, 0.5)


def machine_load() -> str:
    return ", ".join(Path("/proc/loadavg").read_text().split()[:3])


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def timing(h: Histogram) -> str:
    return f"{ms(h.p50)} / {ms(h.p99)} ({ms(h.mean)})"


def report(all_figures: list[Figures]) -> None:
    print("| configuration | nodes | pods bound | pods/s | algorithm p50 / p99 (mean) | attempt p50 / p99 (mean) | placer ms/pod (filter / prioritize / bind) "
          "| peak RSS kube-scheduler / placer serve |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for f in all_figures:
        placer = "—"
        if f.placer_verbs:
            share = " / ".join(f"{f.placer_verbs[v].total / max(f.bound, 1) * 1e3:.1f}"
                               for v in ("filter", "prioritize", "bind"))
            placer = f"{f.placer_ms_per_pod():.1f} ({share})"
        rss = f"{f.scheduler_rss_mib:.0f} MiB" + (f" / {f.placer_rss_mib:.0f} MiB" if f.placer_verbs else "")
        print(f"| {f.configuration} | {f.nodes:,} | {f.bound:,} / {f.pods:,} | {f.rate:.1f} | "
              f"{timing(f.algorithm)} | {timing(f.attempt)} | "
              f"{placer} | {rss} |", flush=True)
    print("\nthe creates took " + ", ".join(f"{f.create_seconds:.1f} s" for f in all_figures) + " (in the order above)")
    print("kube-scheduler's attempts by result: " + "; ".join(
        f"{f.configuration}, {f.nodes:,} nodes: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(f.attempts.items()))
        for f in all_figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,5000", help="node counts, comma-separated (default: 1000,5000)")
    parser.add_argument("--pods", type=int, default=1000, help="pods per configuration (default: 1000)")
    parser.add_argument("--quick", action="store_true", help="100 and 300 nodes, 100 pods: a check that it runs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", metavar="FILE", type=Path,
                        help="profile placer serve (cProfile) in the largest node count's run into FILE")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="run in DIR and keep the logs (default: a temporary folder)")
    args = parser.parse_args()
    counts = sorted(int(n) for n in ("100,300" if args.quick else args.nodes).split(","))
    pod_count = 100 if args.quick else args.pods
    reason = missing("etcd", "kube-apiserver", "kube-scheduler")
    if reason:
        raise SystemExit(f"bench_kube_extender: {reason}")

    rng = np.random.default_rng(args.seed)
    pods = [gpu_pod(k, int(rng.choice(GPU_SIZES))) for k in range(pod_count)]
    gpus = sum(int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) for p in pods)
    print(f"kube {release()}; {pod_count} pods of 1/2/4/8 GPUs ({gpus} GPUs) on {', '.join(map(str, counts))} "
          f"8-GPU nodes; load average at start {machine_load()}\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-kube-extender-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        plane = ControlPlane.start(folder)
        all_figures: list[Figures] = []
        try:
            plane.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            made = 0
            for count in counts:
                create_all(plane, [gpu_node(i) for i in range(made, count)], "/api/v1/nodes")
                made = count
                for with_placer in (False, True):
                    profile = args.profile if with_placer and count == counts[-1] else None
                    all_figures.append(measure(plane, folder, count, pods, with_placer, profile))
                    print(f"  {all_figures[-1].configuration}, {count} nodes: {all_figures[-1].bound} bound in "
                          f"{all_figures[-1].seconds:.1f} s (load {machine_load()})", file=sys.stderr, flush=True)
        finally:
            plane.stop()
    report(all_figures)
    print(f"\nload average at the end {machine_load()}")
    if args.profile is not None:
        print(f"\nplacer serve's profile ({args.profile}), placer's functions by cumulative time:")
        pstats.Stats(str(args.profile)).sort_stats("cumulative").print_stats(r"placer/", 30)


if __name__ == "__main__":
    main()
