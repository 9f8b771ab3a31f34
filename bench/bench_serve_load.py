"""Issue #30: ``placer serve`` under 1, 8 and 32 kept-alive clients at once.

The cluster of :mod:`bench_extender` (5,000 8-GPU nodes in 50 racks, a seeded share of
their GPUs held) is served by ``placer serve --dry-run`` (a separate process, port 0 on the
loopback only). For each number of clients, that many threads, each on its own kept-alive
connection (``http.client``), repeat for ``--seconds`` what kube-scheduler does for a pod:
``filter`` and ``prioritize`` with all the nodes as ``NodeNames``, ``bind`` to the first
node filter kept, then a ``GET /healthz``, each pod a new one of 1 GPU. Every answer is
read whole; only filter's is parsed (for the node to bind).

Printed per number of clients: per verb the requests answered, p50 and p99 latency, and
requests per second of all verbs together; the server's peak RSS (``VmHWM``) so far.

Run: ``python bench/bench_serve_load.py [--nodes 5000] [--clients 1,8,32] [--seconds 10]``.
To measure another checkout, put its ``src`` first on ``PYTHONPATH``.
"""
from __future__ import annotations

import argparse
import http.client
import json
import tempfile
import threading
import time
from pathlib import Path

from bench_extender import cluster_document, pending_pod, percentile, start_server

VERBS = ("filter", "prioritize", "bind", "healthz")


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def client(port: int, who: int, names: list[str], until: float, times: dict[str, list[float]]) -> None:
    """One kept-alive connection's pods until ``until``; each verb's latency appended to ``times``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"}

    def call(verb: str, method: str, path: str, body: bytes | None = None) -> bytes:
        started = time.perf_counter()
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse().read()
        times[verb].append(time.perf_counter() - started)
        return answer

    k = 0
    while time.monotonic() < until:
        pod = pending_pod(k, 1)
        pod["metadata"]["name"] = f"c{who}-{k}"
        body = json.dumps({"Pod": pod, "NodeNames": names}).encode()
        kept = json.loads(call("filter", "POST", "/filter", body))["NodeNames"]
        call("prioritize", "POST", "/prioritize", body)
        if kept:
            call("bind", "POST", "/bind", json.dumps({"PodName": pod["metadata"]["name"], "PodNamespace": "bench",
                                                      "PodUID": f"uid-{who}-{k}", "Node": kept[0]}).encode())
        call("healthz", "GET", "/healthz")
        k += 1
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--clients", default="1,8,32", help="numbers of clients at once, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each number of clients runs")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    document = cluster_document(args.nodes, args.seed)
    names = [n["name"] for n in document["nodes"]]
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "cluster.json"
        snapshot.write_text(json.dumps(document))
        proc, port = start_server(snapshot, "--dry-run")
        try:
            print(f"{args.nodes} nodes as NodeNames, {args.seconds:g} s per point, 1-GPU pods\n")
            print("| clients | verb | answered | p50 | p99 | all verbs/s | server peak RSS |")
            print("|---:|---|---:|---:|---:|---:|---:|")
            for n in (int(c) for c in args.clients.split(",")):
                times: dict[str, list[float]] = {verb: [] for verb in VERBS}
                per_client = [{verb: [] for verb in VERBS} for _ in range(n)]
                started = time.monotonic()
                threads = [threading.Thread(target=client, args=(port, n * 1000 + i, names,
                                                                  started + args.seconds, per_client[i]))
                           for i in range(n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.monotonic() - started
                for got in per_client:
                    for verb in VERBS:
                        times[verb].extend(got[verb])
                rate = sum(len(v) for v in times.values()) / wall
                rss = peak_rss_mib(proc.pid)
                for verb in VERBS:
                    values = times[verb]
                    if not values:
                        continue
                    print(f"| {n} | {verb} | {len(values)} | {percentile(values, 50) * 1e3:.2f} ms | "
                          f"{percentile(values, 99) * 1e3:.2f} ms | {rate:.0f} | {rss:.0f} MiB |", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
