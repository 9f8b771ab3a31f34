"""Python function calls and module switches per call of ``place()`` and of the extender's verbs.

A call trace (:func:`sys.setprofile`) counts, inside one measured call (warmed up first):
every Python function entered (``call`` events: functions, generators resumed,
comprehensions), and the module switches among them: calls whose callee's module differs from
its caller's. Both are exact and do not move between runs, unlike wall-clock time on a shared
machine. The inputs:

- ``placer.place`` of the documents of ``bench_schema.py`` (dicts: 1,000 nodes, 1,000 pods);
- ``Cluster.place`` of the same 1,000 pods as ``PodRequest`` objects, and ``Cluster.node_scores``
  of one of them;
- the extender's ``/filter`` then ``/prioritize`` (body decode included, no HTTP) of a new pending
  pod on ``bench_extender.py``'s cluster (1,000 nodes here, all of them as ``NodeNames``), and
  ``/filter`` of the same pod again with its JSON keys in another order.

Run: ``PYTHONPATH=src python bench/count_calls.py [--top 8]``; prints a markdown table (and the
modules most entered from another module, with ``--top``).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import placer  # noqa: E402
from bench_extender import cluster_document, pending_pod  # noqa: E402
from bench_schema import request_dict  # noqa: E402
from workloads import cluster  # noqa: E402

from placer.placement.cluster import Cluster  # noqa: E402
from placer.schema.extender import decode_filter_args  # noqa: E402
from placer.serve.extender import Extender  # noqa: E402
from placer.testing import keys_reversed  # noqa: E402


class Trace:
    """Counts of one traced call: Python calls, module switches, and the modules switched to."""

    def __init__(self) -> None:
        self.calls = 0
        self.switches = 0
        self.entered: Counter[str] = Counter()

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        self.calls += 1
        callee = frame.f_globals.get("__name__", "?")
        caller = frame.f_back.f_globals.get("__name__", "?") if frame.f_back is not None else callee
        if callee != caller:
            self.switches += 1
            self.entered[callee] += 1


def traced(call: Callable[[], Any]) -> Trace:
    """The counts of one call of ``call`` (the profiler set around it alone)."""
    trace = Trace()
    sys.setprofile(trace)
    try:
        call()
    finally:
        sys.setprofile(None)
    trace.calls -= 1  # the lambda measured
    return trace


def measures() -> list[tuple[str, Trace]]:
    """Each measure's label and counts; every call is made once untraced first."""
    snapshot, request = cluster(1_000).to_dict(), request_dict(1_000)
    placer.place(snapshot, request)
    rows = [("`placer.place` on dicts, 1k nodes x 1k pods", traced(lambda: placer.place(snapshot, request)))]

    objects = placer.PlacementRequest.from_dict(request).pods
    state = Cluster(snapshot)
    state.place(list(objects))
    rows.append(("`Cluster.place` of 1k `PodRequest` objects", traced(lambda: state.place(list(objects)))))
    rows.append(("`Cluster.node_scores` of one `PodRequest`", traced(lambda: state.node_scores(objects[0]))))

    document = cluster_document(1_000, 7)
    names = [n["name"] for n in document["nodes"]]
    extender = Extender(document)

    def body(k: int, pod: dict[str, Any] | None = None) -> bytes:
        return json.dumps({"Pod": pod or pending_pod(k, 2), "NodeNames": names}).encode()

    def verbs(k: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
        raw = body(k)
        return (lambda: extender.filter(decode_filter_args(raw, "POST /filter")),
                lambda: extender.prioritize(decode_filter_args(raw, "POST /prioritize")))

    warm_filter, warm_prioritize = verbs(0)
    warm_filter(), warm_prioritize()
    new_filter, new_prioritize = verbs(1)
    rows.append(("extender `/filter` of a new pod, 1k `NodeNames`", traced(new_filter)))
    rows.append(("extender `/prioritize` of that pod", traced(new_prioritize)))
    again = body(1, keys_reversed(pending_pod(1, 2)))
    rows.append(("extender `/filter` of that pod, keys reordered",
                 traced(lambda: extender.filter(decode_filter_args(again, "POST /filter")))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0, help="also list the N modules most entered from another")
    args = parser.parse_args()
    rows = measures()
    print("| call | Python calls | module switches |")
    print("|---|---:|---:|")
    for label, trace in rows:
        print(f"| {label} | {trace.calls:,} | {trace.switches:,} |")
    if args.top:
        for label, trace in rows:
            top = ", ".join(f"{m} {n}" for m, n in trace.entered.most_common(args.top))
            print(f"\n{label}: {top}")


if __name__ == "__main__":
    main()
