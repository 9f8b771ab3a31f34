"""Instructions per call of ``placer.place`` on dicts and of the plain best-fit, counted.

Wall-clock ratios on a shared machine move by 2x between runs; the instructions a call
executes do not. This runs each side under valgrind's callgrind, counting only inside the
measured calls (``--toggle-collect`` on the ``functools.reduce`` that loops over them), with
the same documents as ``bench_schema.py`` (1,000 nodes, 1,000 pods). Needs valgrind
(``apt-get install valgrind``); takes about two minutes.

Run: ``python bench/count_instructions.py [--calls 10]``.
"""
from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(side: str, calls: int) -> None:
    """Run ``calls`` calls of one side (warmed up first); valgrind counts the loop only."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent / "tests"))
    import placer
    from bench_schema import plain_best_fit, request_dict
    from workloads import cluster

    snapshot, request = cluster(1_000).to_dict(), request_dict(1_000)
    call = (lambda: placer.place(snapshot, request)) if side == "place" else (lambda: plain_best_fit(snapshot, request))
    call()
    functools.reduce(lambda _, __: call(), range(calls), None)


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
    parser.add_argument("--side", choices=("place", "plain"), help=argparse.SUPPRESS)
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


if __name__ == "__main__":
    main()
