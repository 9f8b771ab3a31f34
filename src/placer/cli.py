"""The ``placer`` command line (SPEC §4).

Exit status: 0 done, 1 ``check`` found violations, 2 bad input or usage (one line on
stderr, ``placer: error: <where>: <what>``, no partial output file). The kernel
(:mod:`placer.cluster`, :mod:`placer.place`) is imported only by the commands that place.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn, Sequence

from placer import __version__
from placer._io import dump_json, write_text_atomic
from placer.exceptions import InvalidInputError, PlacerError

__all__ = ["main"]

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141


class _UsageError(Exception):
    """A command-line usage error, reported like bad input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        where = self.prog.partition(" ")[2] or "command line"
        raise _UsageError(f"{where}: {message} (see '{self.prog} --help')")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="placer",
        description="GPU placement for AI clusters: place pods and gangs, check placements.",
    )
    parser.add_argument("--version", action="version", version=f"placer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("place", help="place a request's pods on a snapshot; write a PlacementResult")
    p.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    p.add_argument("request", metavar="REQUEST", help="PlacementRequest file (JSON or YAML)")
    p.add_argument("-o", "--output", metavar="RESULT", help="write the result here instead of stdout")
    p.add_argument("--policy", metavar="P", help="override the request's policy")
    p.add_argument("--seed", metavar="N", help="override the request's seed")
    p.set_defaults(handler=_cmd_place)

    c = sub.add_parser("check", help="verify a PlacementResult independently; exit 1 on violations")
    c.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    c.add_argument("request", metavar="REQUEST", help="PlacementRequest file (JSON or YAML)")
    c.add_argument("result", metavar="RESULT", help="PlacementResult file (JSON or YAML)")
    c.set_defaults(handler=_cmd_check)

    d = sub.add_parser("demo", help="place the bundled example cluster and print what happened")
    d.add_argument("--policy", metavar="P", default="best-fit", help="placement policy (default: best-fit)")
    d.set_defaults(handler=_cmd_demo)
    return parser


def _emit(text: str, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise InvalidInputError(output, exc.strerror or str(exc)) from None


def _cmd_place(args: argparse.Namespace) -> int:
    from placer import _validation
    from placer.place import place

    policy = _validation.check_policy(args.policy, "--policy") if args.policy is not None else None
    seed = _validation.check_seed(args.seed, "--seed") if args.seed is not None else None
    result = place(args.snapshot, args.request, policy=policy, seed=seed)
    _emit(dump_json(result.to_dict()), args.output)
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from placer.diagnostics import check_placement
    from placer.model import load_request, load_result, load_snapshot

    snapshot = load_snapshot(args.snapshot)
    request = load_request(args.request)
    result = load_result(args.result)
    violations = check_placement(snapshot, request, result)
    if violations:
        sys.stdout.write("".join(f"{v}\n" for v in violations))
        return EXIT_VIOLATIONS
    sys.stdout.write(
        f"OK: {len(result.assignments)} assignment(s), {len(result.unschedulable)} unschedulable, "
        "no violations\n"
    )
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from placer import _validation
    from placer.demo import run_demo

    sys.stdout.write(run_demo(policy=_validation.check_policy(args.policy, "--policy")))
    return EXIT_OK


def _fail(message: str) -> int:
    sys.stderr.write("placer: error: " + " ".join(message.split("\n")) + "\n")
    return EXIT_BAD_INPUT


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placer`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 done, 1 violations found by ``check``, 2 bad input or usage.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.handler(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_BAD_INPUT)
    except _UsageError as exc:
        return _fail(str(exc))
    except PlacerError as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        where = exc.filename if exc.filename is not None else "placer"
        return _fail(f"{os.fsdecode(where)}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        return 130
