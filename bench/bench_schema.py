"""The two speed targets of the schema issue (#11), each against a baseline in the same run.

1. ``placer.place(snapshot_dict, request_dict)`` on 1,000 nodes x 1,000 pods, validation
   included, against a plain Python best-fit over the same dicts (no validation: a dict
   scan per pod, the FGD study's BestFit score, lowest node index on ties).
2. ``placer.load_snapshot`` of a 100,000-node JSON file against the standard library's
   ``json.load`` of the same file.
3. Hostile input through the command line (``placer place``, in process): the time and the
   peak memory until its one error line.

Rounds alternate the two sides so that a busy machine slows both alike; the figures are
medians. ``placer.place`` is called five times per round: the first call runs right after a
second of the baseline (its caches cold), the later ones as in a scheduler's loop; both
are reported. Run: ``python bench/bench_schema.py [--rounds 7]``.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

import placer  # noqa: E402
from workloads import cluster  # noqa: E402

SHAPES = ((1, 1000), (1, 1000), (2, 1000), (4, 1000), (8, 1000), (1, 350))


def request_dict(count: int, seed: int = 7) -> dict[str, Any]:
    """``count`` pods of a seeded mix of shapes (whole 1/2/4/8 GPUs and a 0.35 share)."""
    rng = random.Random(seed)
    pods = []
    for j in range(count):
        gpus, milli = rng.choice(SHAPES)
        pod: dict[str, Any] = {"name": f"team/p-{j}", "gpus": gpus, "cpuMilli": 8000 * gpus, "memoryMiB": 32000}
        if milli < 1000:
            pod["gpuMilli"] = milli
        pods.append(pod)
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": "best-fit", "pods": pods}


def plain_best_fit(snapshot: dict[str, Any], request: dict[str, Any]) -> int:
    """A plain Python best-fit over the documents: returns how many pods it placed."""
    types = snapshot["nodeTypes"]
    nodes = []
    for node in snapshot["nodes"]:
        hw = types[node["type"]]
        free = [1000] * hw["gpus"]
        cpu = hw["cpuMilli"]
        mem = hw["memoryMiB"]
        for pod in node.get("pods", []):
            for g in pod.get("gpus", []):
                free[g] = 0
            cpu -= pod.get("cpuMilli", 0)
            mem -= pod.get("memoryMiB", 0)
        nodes.append({"free": free, "cpu": cpu, "mem": mem})
    placed = 0
    for pod in request["pods"]:
        gpus, milli = pod["gpus"], pod.get("gpuMilli", 1000)
        cpu, mem = pod.get("cpuMilli", 0), pod.get("memoryMiB", 0)
        best, best_score = -1, None
        for i, n in enumerate(nodes):
            if n["cpu"] < cpu or n["mem"] < mem:
                continue
            if milli < 1000:
                fits = any(f >= milli for f in n["free"])
            else:
                fits = sum(1 for f in n["free"] if f == 1000) >= gpus
            if not fits:
                continue
            left_gpu = sum(n["free"]) - gpus * milli
            score = 0.5 * (n["cpu"] - cpu) / 128000 + 0.5 * left_gpu / 8000
            if best_score is None or score < best_score:
                best, best_score = i, score
        if best < 0:
            continue
        n = nodes[best]
        if milli < 1000:
            g = min((f, k) for k, f in enumerate(n["free"]) if f >= milli)[1]
            n["free"][g] -= milli
        else:
            for k in [k for k, f in enumerate(n["free"]) if f == 1000][:gpus]:
                n["free"][k] = 0
        n["cpu"] -= cpu
        n["mem"] -= mem
        placed += 1
    return placed


def paired(a: Callable[[], Any], b: Callable[[], Any], rounds: int) -> tuple[float, float, Any, Any]:
    """Medians of ``a`` and ``b`` timed in alternation, and their last results."""
    ta, tb = [], []
    ra = rb = None
    for _ in range(rounds):
        t0 = time.perf_counter()
        ra = a()
        t1 = time.perf_counter()
        rb = b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return statistics.median(ta), statistics.median(tb), ra, rb


def paired_warm(a: Callable[[], Any], b: Callable[[], Any], rounds: int, calls: int) -> tuple[float, float, float, Any, Any]:
    """Per round, ``calls`` calls of ``a`` back to back, then one of ``b``.

    Returns the medians over rounds of ``a``'s first call (right after ``b``: cold caches),
    of its later calls (the median of calls 2..``calls`` of the round: how a scheduler that
    calls it in a loop sees it), and of ``b``; and the last results.
    """
    cold, warm, tb = [], [], []
    ra = rb = None
    for _ in range(rounds):
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            ra = a()
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rb = b()
        tb.append(time.perf_counter() - t0)
        cold.append(times[0])
        warm.append(statistics.median(times[1:]))
    return statistics.median(cold), statistics.median(warm), statistics.median(tb), ra, rb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    snap = cluster(1_000).to_dict()
    req = request_dict(1_000)
    cold, warm, plain, result, plain_placed = paired_warm(
        lambda: placer.place(snap, req), lambda: plain_best_fit(snap, req), args.rounds, calls=5
    )
    print("| measure | placer | baseline | ratio |")
    print("|---|---:|---:|---:|")
    for when, api in (("calls 2-5 of a round", warm), ("first call after the baseline", cold)):
        print(f"| `placer.place` on dicts, 1k nodes x 1k pods, {when} (placed {len(result.assignments)} / plain "
              f"{plain_placed}) | {api * 1e3:.1f} ms | {plain * 1e3:.0f} ms (plain best-fit) | {plain / api:.0f}x faster |")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot-100k.json"
        path.write_text(json.dumps(cluster(100_000).to_dict()))

        def stdlib() -> Any:
            with open(path) as f:
                return json.load(f)

        load, std, snapshot, _ = paired(lambda: placer.load_snapshot(str(path)), stdlib, args.rounds)
        assert len(snapshot.nodes) == 100_000
        size = path.stat().st_size / 2**20
        print(f"| `load_snapshot`, 100k nodes ({size:.1f} MiB) | {load * 1e3:.0f} ms | {std * 1e3:.0f} ms "
              f"(`json.load`) | {load / std:.2f} of json.load |")
        hostile(Path(tmp))


def hostile(tmp: Path) -> None:
    """Time and peak traced memory of ``placer place`` on hostile files, until the error.

    Each command runs right after a full collection of this process's own garbage, so that
    the timing is the command's (a fresh ``placer`` process starts with none) and not a
    collection that the benchmark's earlier allocations left pending.
    """
    import contextlib
    import gc
    import io
    import tracemalloc

    from placer.cli import main as cli

    big_text = json.dumps(cluster(100_000).to_dict())  # the text only: no 100k-node dict kept alive
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "p", "gpus": 1}]}
    snap_path = tmp / "snap.json"
    snap_path.write_text(json.dumps(cluster(10).to_dict()))
    cases: dict[str, tuple[Any, Any]] = {
        "replicas 10^12": (None, {**request, "pods": [{"name": "p", "gpus": 1, "replicas": 10**12}]}),
        "replicas 10^7": (None, {**request, "pods": [{"name": "p", "gpus": 1, "replicas": 10**7}]}),
        "cpuMilli 2^63": (None, {**request, "pods": [{"name": "p", "cpuMilli": 2**63}]}),
        "integer of 10^6 digits": (None, "digits"),
        "100k nodes, repeated key in the last": ("dup", request),
        "100k nodes, unknown field in the last": ("unknown", request),
        "100k nodes, control character in the last name": ("control", request),
    }
    print()
    print("| hostile input | exit | ms to the error | peak MiB traced | error line (start) |")
    print("|---|---:|---:|---:|---|")
    for label, (snap_kind, req) in cases.items():
        snap_file = snap_path
        if snap_kind is not None:
            text = big_text
            last = text.rindex('{"name": "node-099999"')
            insert = {
                "dup": '"labels": {"a": "1", "a": "2"}, ',
                "unknown": '"gpu": 8, ',
                "control": '"labels": {}, ',
            }[snap_kind]
            text = text[: last + 1] + insert + text[last + 1:]
            if snap_kind == "control":
                text = text.replace('"name": "node-099999"', '"name": "node-\\u0007"')
            snap_file = tmp / f"{snap_kind}.json"
            snap_file.write_text(text)
        req_file = tmp / "req.json"
        if req == "digits":
            req_file.write_text('{"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "p", '
                                '"cpuMilli": ' + "9" * 1_000_000 + "}]}")
        else:
            req_file.write_text(json.dumps(req))
        err = io.StringIO()
        gc.collect()
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(err):
            code = cli(["place", str(snap_file), str(req_file)])
        elapsed = time.perf_counter() - t0
        tracemalloc.start()  # a second run for the memory: tracing slows allocations down
        with contextlib.redirect_stderr(io.StringIO()):
            cli(["place", str(snap_file), str(req_file)])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        line = err.getvalue().strip().replace(str(tmp) + "/", "")
        print(f"| {label} | {code} | {elapsed * 1e3:.0f} | {peak / 2**20:.1f} | `{line[:90]}` |")


if __name__ == "__main__":
    main()
