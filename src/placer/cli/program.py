"""The ``placer`` program: its commands, the parser assembled from them, and :func:`main`.

A command's module (:data:`COMMANDS`) adds its parser and runs it; it is imported only
when the command is named, so ``placer --help`` and ``placer --version`` import none of
them, and a command imports what it uses alone."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from typing import Sequence

from placer import __version__
from placer.cli.options import Parser, UsageError, check_files
from placer.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    fail,
    silence_stdout,
    tolerate_unencodable,
)
from placer.exceptions import PlacerError


@dataclass(frozen=True)
class Command:
    """One command of ``placer``.

    Attributes
    ----------
    name : str
        As typed: ``placer <name>``.
    module : str
        The :mod:`placer.cli` module whose ``PARSERS[name]`` adds its parser.
    summary : str
        The line ``placer --help`` shows for it.
    """

    name: str
    module: str
    summary: str


COMMANDS: tuple[Command, ...] = (  # in the order ``placer --help`` lists them
    Command("place", "place", "place a request's pods on a snapshot; write a PlacementResult"),
    Command("preempt", "place", "place with preemption on: evict lower-priority pods where that makes room"),
    Command("check", "place", "verify a PlacementResult independently; exit 1 on violations"),
    Command("gpus", "topology", "the best set of GPUs inside one node, from its link topology"),
    Command("topo", "topology", "the parsed link matrix of nvidia-smi topo -m, its NVLink islands, best set per size"),
    Command("explain", "explain", "why each pod or gang of a request that cannot be placed cannot"),
    Command("report", "explain", "schedulable pods per request shape, fragmentation and findings of a snapshot"),
    Command("import", "imports", "a ClusterSnapshot or PlacementRequest from kubectl or Slurm output"),
    Command("reconcile", "reconcile", "GPUs busy without a live pod (zombies) and GPUs held but idle, on one node"),
    Command("demo", "demo", "place the bundled example cluster and print what happened"),
    Command("simulate", "replay", "replay an openb trace per policy and seed; unallocated GPUs beside the FGD study"),
    Command("defrag", "place", "make room by moving movable running pods; write a PlacementResult with moves"),
    Command("admit", "queues", "one Kueue scheduling cycle: which workloads are admitted, wait, or are preempted"),
    Command("sweep", "replay", "a grid of replays from one spec, locally or on Ray; resumable"),
    Command("serve", "serve", "a kube-scheduler extender: filter, prioritize, preempt and bind over HTTP"),
    Command("schema", "schema", "the JSON Schema of a placer/v1 document: snapshot, request or result"),
)


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``placer`` argument parser.

    Parameters
    ----------
    commands : sequence of str, optional
        The commands whose own parsers to build (their modules imported); the others are
        listed by name and summary only. Default: every command.

    Returns
    -------
    argparse.ArgumentParser
        Each built command's namespace carries its ``handler``, called with the parsed
        arguments, returning the exit status.
    """
    parser = Parser(
        prog="placer",
        description="GPU placement for AI clusters: place pods and gangs, check placements.",
    )
    parser.add_argument("--version", action="version", version=f"placer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        if commands is None or command.name in commands:
            module = importlib.import_module(f"placer.cli.{command.module}")
            module.PARSERS[command.name](sub, command.summary)
        else:
            sub.add_parser(command.name, help=command.summary)
    return parser


def _named_command(argv: Sequence[str]) -> list[str]:
    """The command ``argv`` names: its first word that is not an option (``placer`` itself
    takes no option with a value), as a list of at most one."""
    return [word for word in argv if not word.startswith("-")][:1]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placer`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 done; 1 violations found by ``check``, pods left pending under
        ``--fail-on-pending``, a failed run of ``simulate``/``sweep`` or a failed round of
        ``reconcile --watch``; 2 bad input or usage; 130 interrupted (Ctrl-C: one line on
        stderr, with the runs kept of a grid).
    """
    tolerate_unencodable()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_named_command(words))
        args = parser.parse_args(words)
        check_files(args)
        return int(args.handler(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_BAD_INPUT)
    except UsageError as exc:
        return fail(str(exc))
    except PlacerError as exc:
        return fail(str(exc))
    except BrokenPipeError:
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.filename is None:
            return fail(str(exc.strerror or exc))
        return fail(f"{os.fsdecode(exc.filename)}: {exc.strerror or exc}")
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"placer: interrupted{_runs_kept(exc)}\n")
        return EXIT_INTERRUPTED


def _runs_kept(exc: KeyboardInterrupt) -> str:
    """``; K of N runs kept`` when Ctrl-C ended a grid of runs, else nothing."""
    from placer.replay.executors import RunsInterrupted

    return f"; {exc.kept} of {exc.total} runs kept" if isinstance(exc, RunsInterrupted) else ""
