"""``placer place``, ``preempt``, ``defrag`` and ``check``: a PlacementResult made, or verified.

The kernel (:mod:`placer.placement.place`) is imported when one of the commands that place
runs; ``check`` never imports it."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from placer.cli.options import (
    EXIT_STATUS_EPILOG,
    POLICY_CHOICES,
    add_document_format,
    add_fail_on_pending,
    add_input_files,
    add_output,
    count,
    policy_option,
)
from placer.cli.output import EXIT_OK, EXIT_VIOLATIONS, document, emit, notes, pending_status
from placer.model import PREEMPTION_MODES

if TYPE_CHECKING:
    from placer.model import PlacementResult

def add_place(sub: Any, summary: str) -> None:
    """``placer place``."""
    p = sub.add_parser(
        "place", help=summary,
        description=(
            "Place the pods of REQUEST on the cluster of SNAPSHOT, by priority then in request order,\n"
            "gangs all or nothing, and write a PlacementResult: each pod's node and GPU indices, or\n"
            "why it cannot be placed. The snapshot does not change; see 'placer check' to verify."
        ),
        epilog=EXIT_STATUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _placement_arguments(p)
    p.add_argument(
        "--preemption", metavar="MODE", choices=PREEMPTION_MODES,
        help="override the request's preemption mode: none, greedy, exact or auto",
    )
    p.set_defaults(handler=run_place)


def add_preempt(sub: Any, summary: str) -> None:
    """``placer preempt``."""
    pr = sub.add_parser(
        "preempt", help=summary,
        description=(
            "Place REQUEST on SNAPSHOT as 'placer place' does, but a pod or gang that does not fit\n"
            "evicts running pods of lower priority when that makes it fit (the request's preemption\n"
            "mode, auto when it says none): PodDisruptionBudgets are honoured where they can be,\n"
            "running gangs go whole. The result lists the preemptions (victims, nodes, PDB\n"
            "violations) and marks the preemptors' assignments nominated."
        ),
        epilog=EXIT_STATUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _placement_arguments(pr)
    pr.set_defaults(handler=run_preempt)


def add_check(sub: Any, summary: str) -> None:
    """``placer check``."""
    c = sub.add_parser(
        "check", help=summary,
        description=(
            "Check RESULT against SNAPSHOT and REQUEST without the placement code: every pod once,\n"
            "filters, resources, GPU indices, gangs and their topology. Prints each violation;\n"
            "exit 0 when there is none, 1 when there are, 2 on unreadable input."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_files(c, "snapshot", "request", "result")
    add_output(c, "the violations (or the OK line)")
    c.set_defaults(handler=run_check)


def add_defrag(sub: Any, summary: str) -> None:
    """``placer defrag``."""
    df = sub.add_parser(
        "defrag", help=summary,
        description=(
            "Place the pods of REQUEST on SNAPSHOT as 'place' does; for a pod that does not fit, find\n"
            "the fewest moves of running pods marked movable (then the least GPU moved) after which it\n"
            "fits. Writes a PlacementResult with \"moves\" ({pod, from, to, gpus}, in the order to make\n"
            "them) and \"rooms\" (per such pod: moves, gpuMilliMoved, status). The snapshot does not\n"
            "change; 'placer check' verifies the moves and the placement."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_files(df, "snapshot", "request")
    add_output(df, "the result", metavar="OUT")
    add_document_format(df)
    df.add_argument("--max-moves", metavar="K", help="moves allowed for the whole request (default: no limit)")
    _policy_and_seed_overrides(df)
    df.set_defaults(handler=run_defrag)


PARSERS: dict[str, Callable[[Any, str], None]] = {
    "place": add_place, "preempt": add_preempt, "check": add_check, "defrag": add_defrag,
}


def _placement_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``place`` and ``preempt`` share: the two files, output, overrides."""
    from placer.formats import OUTPUT_FORMATS

    add_input_files(parser, "snapshot", "request")
    add_output(parser, "the result", metavar="RESULT")
    _policy_and_seed_overrides(parser)
    parser.add_argument(
        "--format", metavar="FMT", default="json", choices=tuple(OUTPUT_FORMATS),
        help="json (a PlacementResult, default), yaml (the same as YAML), k8s-binding (YAML Binding "
        "objects of the placed pods; the pending ones named on stderr), k8s-binding-json, env (NVIDIA_VISIBLE_DEVICES per pod) or slurm "
        "(sbatch/srun --nodelist, --nodes, --ntasks-per-node and --gres per job; the GPU indices placer "
        "chose, which Slurm cannot be told, as comments)",
    )
    add_fail_on_pending(parser)


def _policy_and_seed_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", metavar="P", help=f"override the request's policy: {POLICY_CHOICES}")
    parser.add_argument("--seed", metavar="N", help="override the request's seed")


def _seed_option(args: argparse.Namespace) -> int | None:
    from placer import schema

    return schema.check_seed(args.seed, "--seed") if args.seed is not None else None


def run_place(args: argparse.Namespace) -> int:
    """Run ``placer place``."""
    from functools import partial

    from placer.placement.place import place

    return _placement(args, partial(place, preemption=args.preemption))


def run_preempt(args: argparse.Namespace) -> int:
    """Run ``placer preempt``."""
    from placer.placement.place import preempt

    return _placement(args, preempt)


def _placement(args: argparse.Namespace, run: Callable[..., PlacementResult]) -> int:
    """Run ``place`` or ``preempt`` on the command's files and write the result as asked."""
    from placer.formats import left_out_note, render

    result = run(args.snapshot, args.request, policy=policy_option(args.policy), seed=_seed_option(args))
    emit(render(result, args.format, args.snapshot), args.output)
    note = left_out_note(result, args.format)
    notes(args.command, [note] if note is not None else [])
    return pending_status(args, result)


def run_defrag(args: argparse.Namespace) -> int:
    """Run ``placer defrag``."""
    from placer.placement.place import defrag

    policy = policy_option(args.policy)
    seed = _seed_option(args)
    max_moves = count(args.max_moves, "--max-moves") if args.max_moves is not None else None
    result = defrag(args.snapshot, args.request, max_moves=max_moves, policy=policy, seed=seed)
    emit(document(result.to_dict(), args.format), args.output)
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    """Run ``placer check``: exit 1 when the result breaks a rule."""
    from placer.diagnostics.check import check_placement
    from placer.model import load_request, load_result, load_snapshot
    from placer.preemption.moves import check_moves

    snapshot = load_snapshot(args.snapshot)
    request = load_request(args.request)
    result = load_result(args.result)
    check = check_moves if result.moves or result.rooms else check_placement
    violations = check(snapshot, request, result)
    if violations:
        emit("".join(f"{v}\n" for v in violations), args.output)
        return EXIT_VIOLATIONS
    emit(
        f"OK: {len(result.assignments)} assignment(s), {len(result.unschedulable)} unschedulable, "
        "no violations\n",
        args.output,
    )
    return EXIT_OK
