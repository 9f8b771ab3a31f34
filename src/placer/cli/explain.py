"""``placer explain`` and ``placer report``: why pods are pending, and what a snapshot can
still hold."""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from placer.cli.options import (
    EXIT_STATUS_EPILOG,
    TEXT_OR_DOCUMENT,
    add_color_option,
    add_fail_on_pending,
    add_input_files,
    add_output,
)
from placer.cli.output import EXIT_OK, colored, document, emit, pending_status
from placer.exceptions import InvalidInputError

_EXPLAIN_FORMATS = (*TEXT_OR_DOCUMENT, "mig-parted")


def add_explain(sub: Any, summary: str) -> None:
    """``placer explain``."""
    e = sub.add_parser(
        "explain", help=summary,
        description=(
            "Place REQUEST on SNAPSHOT and, for each pod or gang left pending, say why: the cause\n"
            "class (registration, too large, filters, fragmentation, topology, capacity), what is\n"
            "short and by how much, and the nodes counted per reason. A MIG pod is explained per\n"
            "MIG GPU, with the idle static GPUs a re-split would place it on (--format mig-parted\n"
            "writes them as an nvidia-mig-parted configuration)."
        ),
        epilog=EXIT_STATUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_files(e, "snapshot", "request")
    e.add_argument(
        "--format", metavar="FMT", default="text", choices=_EXPLAIN_FORMATS,
        help="text (default), json, yaml, or mig-parted (an nvidia-mig-parted configuration re-splitting the "
        "idle static MIG GPUs that would place the pending MIG pods; GPUs with an instance in use never listed)",
    )
    add_output(e)
    add_fail_on_pending(e)
    add_color_option(e)
    e.set_defaults(handler=run_explain)


def add_report(sub: Any, summary: str) -> None:
    """``placer report``."""
    r = sub.add_parser(
        "report", help=summary,
        description=(
            "For each request shape, how many pods of it still fit on SNAPSHOT and how many of the\n"
            "free GPUs they can use; the FGD fragment of the free GPUs; findings (unhealthy GPUs,\n"
            "cordoned, drained and tainted nodes, GPUs not registered, pods whose GPUs are unknown)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_files(r, "snapshot")
    r.add_argument(
        "--workload", metavar="W",
        help="pods whose shapes to report and to measure fragmentation against: a PlacementRequest "
        "(JSON or YAML) or an openb pod CSV (default: 1, 2, 4, 8, 0.5 and 0.25 GPU)",
    )
    r.add_argument("--format", metavar="FMT", default="text", choices=TEXT_OR_DOCUMENT,
                   help="text (default), json or yaml")
    r.add_argument(
        "--nodes", action="store_true",
        help="instead, one row per node (like sinfo -N): state, GPUs free/total, MIG instances free/total, "
        "pods; with --format json a \"nodes\" list",
    )
    add_output(r)
    add_color_option(r)
    r.set_defaults(handler=run_report)


PARSERS: dict[str, Callable[[Any, str], None]] = {"explain": add_explain, "report": add_report}


def run_explain(args: argparse.Namespace) -> int:
    """Run ``placer explain``."""
    from placer.diagnostics.explain import explain
    from placer.mig.plans import render_mig_parted
    from placer.model import load_snapshot

    result = explain(load_snapshot(args.snapshot), args.request)  # the request checked against the snapshot
    if args.format == "mig-parted":
        text = render_mig_parted(result.relayout)
    else:
        text = result.to_text(colored(args)) if args.format == "text" else document(result.to_dict(), args.format)
    emit(text, args.output)
    return pending_status(args, result.result)


def run_report(args: argparse.Namespace) -> int:
    """Run ``placer report``."""
    from placer.workload.fragmentation import target_workload
    from placer.model import load_request, load_snapshot
    from placer.diagnostics.report import cluster_report, node_rows, nodes_text

    snapshot = load_snapshot(args.snapshot)
    if args.nodes:
        rows = node_rows(snapshot)
        text = (nodes_text(rows, colored(args)) if args.format == "text"
                else document({"nodes": [r.to_dict() for r in rows]}, args.format))
        emit(text, args.output)
        return EXIT_OK
    workload = source = None
    pods: list[Any] = []
    if args.workload is not None:
        if args.workload.lower().endswith(".csv"):
            from placer.adapters import openb

            pods = openb.read_pods(args.workload)
        else:
            pods = list(load_request(args.workload).pods)
        if not pods:
            raise InvalidInputError(args.workload, "the workload has no pods")
        workload, source = target_workload(pods), os.path.basename(args.workload)
    report = cluster_report(snapshot, workload, source, pods)
    text = report.to_text(colored(args)) if args.format == "text" else document(report.to_dict(), args.format)
    emit(text, args.output)
    return EXIT_OK
