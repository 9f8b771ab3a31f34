"""``placer reconcile``: GPUs busy without a live pod, and GPUs held but idle, on one node;
once, or every ``--interval`` seconds (``--watch``)."""
from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from placer.cli.options import DOCUMENT_FORMATS, add_input_files, add_output, positive_int, seconds
from placer.cli.output import EXIT_OK, document, emit, fail
from placer.exceptions import InvalidInputError


def add_reconcile(sub: Any, summary: str) -> None:
    """``placer reconcile``."""
    from placer.diagnostics.reconcile import DEFAULT_INTERVAL_S

    rc = sub.add_parser(
        "reconcile", help=summary,
        description=(
            "Compare what SNAPSHOT says the pods of NODE hold with what nvidia-smi sees on it: GPUs\n"
            "with processes but no pod holding them (zombies keeping a job pending) and GPUs held\n"
            "by a pod but running nothing. The nvidia-smi output comes from the files --gpus and\n"
            "--apps, or, without them, from running the two queries here (on NODE).\n\n"
            "--watch repeats this every --interval seconds, reading SNAPSHOT again each round, and\n"
            "prints one JSON line per round ({\"round\", \"time\" in UTC, \"node\", \"zombies\", \"idle\",\n"
            "...}). A round that fails (nvidia-smi, or SNAPSHOT caught half-written) prints one\n"
            "error line on stderr and the watch goes on; Ctrl-C ends it.\n\n"
            "exit status: 0 done (with --watch: every round succeeded), 1 some --watch round\n"
            "failed, 2 bad input or usage (nvidia-smi not found, a bad option)."
        ),
        epilog=(
            "examples:\n"
            "  placer reconcile cluster.json --node dgx-01 --gpus gpus.csv --apps apps.csv\n"
            "  placer reconcile cluster.json --node dgx-01                # runs nvidia-smi\n"
            "  placer reconcile cluster.json --node dgx-01 --watch --interval 60"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_files(rc, "snapshot")
    rc.add_argument("--node", metavar="NAME", required=True, help="the node the nvidia-smi output comes from")
    rc.add_argument(
        "--gpus", metavar="CSV",
        help="nvidia-smi --query-gpu=index,uuid --format=csv output (with --apps; default: run it)",
    )
    rc.add_argument(
        "--apps", metavar="CSV",
        help="nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv output "
             "(with --gpus; default: run it)",
    )
    rc.add_argument(
        "--nvidia-smi", metavar="PATH", dest="nvidia_smi",
        help="the nvidia-smi to run (default: nvidia-smi on the PATH)",
    )
    rc.add_argument(
        "--watch", action="store_true",
        help="reconcile every --interval seconds, one JSON line per round, until Ctrl-C or --rounds",
    )
    rc.add_argument(
        "--interval", metavar="SECONDS",
        help=f"with --watch: seconds from one round to the next, > 0 (default: {DEFAULT_INTERVAL_S:g})",
    )
    rc.add_argument("--rounds", metavar="N", help="with --watch: stop after N rounds (default: never)")
    rc.add_argument("--format", metavar="FMT", default="json", choices=DOCUMENT_FORMATS,
                    help="json (default) or yaml; not with --watch (one JSON line per round)")
    add_output(rc, "the findings (not with --watch)")
    rc.set_defaults(handler=run_reconcile)


PARSERS: dict[str, Callable[[Any, str], None]] = {"reconcile": add_reconcile}


def run_reconcile(args: argparse.Namespace) -> int:
    """Run ``placer reconcile``, once or ``--watch``."""
    from placer.adapters.nvidia_smi.live import find_nvidia_smi, query_node
    from placer.adapters.nvidia_smi.query import parse_compute_apps_file, parse_query_gpu_file
    from placer.model import load_snapshot
    from placer.diagnostics.reconcile import DEFAULT_INTERVAL_S, reconcile, watch

    if not args.watch:
        for flag, value in (("--interval", args.interval), ("--rounds", args.rounds)):
            if value is not None:
                raise InvalidInputError(flag, "only with --watch")
    else:
        for flag, refused in (("--output", args.output is not None), ("--format", args.format != "json")):
            if refused:
                raise InvalidInputError(flag, "not with --watch: each round is one JSON line on stdout")
    if args.gpus is not None or args.apps is not None:
        for flag, value, other in (("--gpus", args.gpus, "--apps"), ("--apps", args.apps, "--gpus")):
            if value is None:
                raise InvalidInputError(flag, f"expected a file with {other} (or neither: nvidia-smi is run)")
        if args.watch:
            raise InvalidInputError("--watch", "not with --gpus/--apps: files do not change, nvidia-smi is run each round")
        if args.nvidia_smi is not None:
            raise InvalidInputError("--nvidia-smi", "not with --gpus/--apps: the files are read instead")
        snapshot = load_snapshot(args.snapshot)
        found = reconcile(snapshot, args.node, parse_query_gpu_file(args.gpus), parse_compute_apps_file(args.apps))
        emit(document(found.to_dict(), args.format), args.output)
        return EXIT_OK

    nvidia_smi = args.nvidia_smi or "nvidia-smi"
    if not args.watch:
        snapshot = load_snapshot(args.snapshot)
        gpus, apps = query_node(nvidia_smi)
        emit(document(reconcile(snapshot, args.node, gpus, apps).to_dict(), args.format), args.output)
        return EXIT_OK

    interval = DEFAULT_INTERVAL_S if args.interval is None else seconds(args.interval, "--interval", positive=True)
    rounds = None if args.rounds is None else positive_int(args.rounds, "--rounds")
    try:
        watched = watch(args.snapshot, args.node, lambda: query_node(nvidia_smi), interval, rounds)
    except InvalidInputError as e:
        raise InvalidInputError("--" + e.where, e.what) from None
    find_nvidia_smi(nvidia_smi)  # not there: exit 2 now rather than a failed round forever
    some_round_failed = False
    try:
        for done in watched:
            if not done.ok:
                some_round_failed = True
                fail(f"round {done.number} ({done.timestamp}): {done.error}")
                continue
            # Built whole and written at once: Ctrl-C never leaves half a line.
            emit(json.dumps(done.to_dict(), ensure_ascii=False) + "\n")
    except KeyboardInterrupt:
        pass
    return 1 if some_round_failed else EXIT_OK
