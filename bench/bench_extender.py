"""Issue #18: ``placer serve`` answering kube-scheduler on a 5,000-node cluster.

A synthetic cluster of 5,000 8-GPU nodes in 50 racks, a seeded random share of each node's
GPUs held by running pods, is served by ``placer serve`` (a separate process, port 0 on the
loopback). A client sends, for each of ``--requests`` pending pods (1, 2, 4 or 8 GPUs, CPU
and memory in proportion), ``filter`` then ``prioritize`` with all 5,000 nodes as
``NodeNames`` (``nodeCacheCapable``), on one kept-alive connection as kube-scheduler does,
and times the pair. Beside it, in this process on the same cluster and pods: the extender's
two verbs without HTTP (decode, filter, prioritize, encode) and ``Cluster.place`` of the
pod, the in-process decision of the same node choice.

Run: ``python bench/bench_extender.py [--nodes 5000] [--requests 1000] [--seed 7]``.
Prints a markdown table (p50, p99, mean per pair) for bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import numpy as np

from placer.serve.extender import Extender
from placer.placement.cluster import Cluster
from placer.model import PodRequest
from placer.schema.extender import decode_filter_args

GPU_SIZES = (1, 2, 4, 8)


def cluster_document(nodes: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    entries = []
    for i in range(nodes):
        used = int(rng.choice([0, 0, 2, 4, 6, 7, 8]))
        pods = [{"name": f"run/p{i}", "gpus": list(range(used)), "cpuMilli": 12000 * used, "memoryMiB": 96000 * used}] if used else []
        entries.append({
            "name": f"node-{i:05d}", "gpus": 8, "gpuModel": "H100", "cpuMilli": 112000, "memoryMiB": 2000000,
            "topology": {"rack": f"rack-{i // 100:02d}"}, "pods": pods,
        })
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": entries}


def pending_pod(k: int, gpus: int) -> dict:
    return {
        "metadata": {"name": f"job-{k}", "namespace": "bench", "uid": f"uid-{k}"},
        "spec": {"containers": [{"name": "main", "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)},
            "requests": {"cpu": str(10 * gpus), "memory": f"{80 * gpus}Gi"},
        }}]},
        "status": {"phase": "Pending"},
    }


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def start_server(snapshot: Path, *options: str) -> tuple[subprocess.Popen, int]:
    """``placer serve`` of ``snapshot`` with ``options`` on a free loopback port: the process and its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "placer", "serve", "--snapshot", str(snapshot), "--port", "0", *options],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    line = proc.stderr.readline() if proc.stderr else ""
    while line.startswith("placer: serve: note: ") and proc.stderr:  # --dry-run is announced before the banner
        line = proc.stderr.readline()
    found = re.search(r":(\d+) \(", line)
    if found is None:
        proc.kill()
        raise SystemExit(f"placer serve did not start: {line}")
    return proc, int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    document = cluster_document(args.nodes, args.seed)
    names = [n["name"] for n in document["nodes"]]
    rng = np.random.default_rng(args.seed + 1)
    sizes = [int(rng.choice(GPU_SIZES)) for _ in range(args.requests)]
    bodies = [json.dumps({"Pod": pending_pod(k, g), "NodeNames": names}).encode() for k, g in enumerate(sizes)]

    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "cluster.json"
        snapshot.write_text(json.dumps(document))
        proc, port = start_server(snapshot)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            headers = {"Content-Type": "application/json"}
            http_times: list[float] = []
            passing: list[int] = []
            for body in bodies:
                started = time.perf_counter()
                conn.request("POST", "/filter", body=body, headers=headers)
                filtered = json.loads(conn.getresponse().read())
                conn.request("POST", "/prioritize", body=body, headers=headers)
                scored = json.loads(conn.getresponse().read())
                http_times.append(time.perf_counter() - started)
                passing.append(len(filtered["NodeNames"]))
                assert len(scored) == len(names)
            conn.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    extender = Extender(document)
    encoder = msgspec.json.Encoder()
    verb_times: list[float] = []
    for body in bodies:
        started = time.perf_counter()
        encoder.encode(extender.filter(decode_filter_args(body, "POST /filter")))
        encoder.encode(extender.prioritize(decode_filter_args(body, "POST /prioritize")))
        verb_times.append(time.perf_counter() - started)

    cluster = Cluster(document)
    place_times: list[float] = []
    for k, g in enumerate(sizes):
        pod = PodRequest(f"bench/job-{k}", gpus=g, cpu_milli=10000 * g, memory_mib=81920 * g)
        started = time.perf_counter()
        cluster.place(pod)
        place_times.append(time.perf_counter() - started)

    body_kib = statistics.mean(len(b) for b in bodies) / 1024
    print(f"{args.nodes} nodes as NodeNames ({body_kib:.0f} KiB per body), {args.requests} pods of "
          f"1/2/4/8 GPUs, {statistics.mean(passing):.0f} nodes passing filter on average\n")
    print("| | p50 | p99 | mean |")
    print("|---|---:|---:|---:|")
    for label, times in (
        ("filter + prioritize over HTTP (loopback, keep-alive)", http_times),
        ("the same two verbs in process (decode, decide, encode)", verb_times),
        ("`Cluster.place` of the pod (in process)", place_times),
    ):
        print(f"| {label} | {percentile(times, 50) * 1e3:.2f} ms | {percentile(times, 99) * 1e3:.2f} ms | "
              f"{statistics.mean(times) * 1e3:.2f} ms |")
    print(f"\nHTTP pair / Cluster.place, medians: {percentile(http_times, 50) / percentile(place_times, 50):.0f}x")


if __name__ == "__main__":
    main()
