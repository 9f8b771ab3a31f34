"""Instructions per call of ``placer.place`` on dicts and of the plain best-fit, counted.

Wall-clock ratios on a shared machine move by 2x between runs; the instructions a call
executes do not. This runs each side under valgrind's callgrind, counting only inside the
measured calls (``--toggle-collect`` on the ``functools.reduce`` that loops over them), with
the same documents as ``bench_schema.py`` (1,000 nodes, 1,000 pods). Needs valgrind
(``apt-get install valgrind``); takes about two minutes.

Run: ``python bench/count_instructions.py [--calls 10] [--verbs]``; ``--verbs`` also counts the
extender's ``/filter`` + ``/prioritize`` of a new pod on 1,000 nodes (no HTTP).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent


def measure(side: str, calls: int) -> None:
    """Run ``calls`` calls of one side (warmed up first); valgrind counts the loop only."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent / "tests"))
    import placer
    from bench_schema import plain_best_fit, request_dict
    from workloads import cluster

    if side == "verbs":
        functools.reduce(lambda _, verbs: verbs(), extender_verbs(calls), None)
        return
    snapshot, request = cluster(1_000).to_dict(), request_dict(1_000)
    call = (lambda: placer.place(snapshot, request)) if side == "place" else (lambda: plain_best_fit(snapshot, request))
    call()
    functools.reduce(lambda _, __: call(), range(calls), None)


def extender_verbs(calls: int) -> list[Callable[[], Any]]:
    """``calls`` calls of the extender's ``/filter`` then ``/prioritize`` of a new pending pod
    (body decode included, no HTTP) on ``bench_extender.py``'s cluster of 1,000 nodes, all
    as ``NodeNames``; one pod is filtered and prioritized first, untraced."""
    from bench_extender import cluster_document, pending_pod
    from placer.schema.extender import decode_filter_args
    from placer.serve.extender import Extender

    document = cluster_document(1_000, 7)
    names = [n["name"] for n in document["nodes"]]
    extender = Extender(document)

    def verbs(k: int) -> Callable[[], Any]:
        body = json.dumps({"Pod": pending_pod(k, 1 + k % 4), "NodeNames": names}).encode()
        return lambda: (extender.filter(decode_filter_args(body, "POST /filter")),
                        extender.prioritize(decode_filter_args(body, "POST /prioritize")))

    verbs(calls)()
    return [verbs(k) for k in range(calls)]


def count(side: str, calls: int) -> float:
    """Instructions per call of one side, under callgrind."""
    python = os.path.realpath(sys.executable)  # not a shim script: valgrind follows the interpreter
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--toggle-collect=functools_reduce", "--callgrind-out-file=/dev/null",
         python, __file__, "--side", side, "--calls", str(calls)],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise SystemExit(f"no count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(found.group(1)) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10, help="calls of placer.place counted (default 10)")
    parser.add_argument("--side", choices=("place", "plain", "verbs"), help=argparse.SUPPRESS)
    parser.add_argument("--verbs", action="store_true", help="also count the extender's filter + prioritize")
    args = parser.parse_args()
    if args.side:
        measure(args.side, args.calls)
        return
    placed = count("place", args.calls)
    plain = count("plain", 1)
    print("| measure | instructions per call |")
    print("|---|---:|")
    print(f"| `placer.place` on dicts, 1k nodes x 1k pods | {placed / 1e6:.1f} M |")
    print(f"| plain best-fit, same documents | {plain / 1e6:,.0f} M |")
    print(f"| ratio | {plain / placed:.0f}x |")
    if args.verbs:
        print(f"| extender `/filter` + `/prioritize` of a new pod, 1k `NodeNames` | {count('verbs', args.calls) / 1e6:.2f} M |")


if __name__ == "__main__":
    main()
