"""What every command of the ``placer`` command line writes: exit statuses, its output
(``-o FILE`` all or nothing, else stdout), notes and the one error line on stderr."""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from placer.exceptions import InvalidInputError
from placer.text.files import STDIN, dump_json, dump_yaml, write_text_atomic
from placer.text.lines import color_wanted
from placer.text.messages import bounded

if TYPE_CHECKING:
    from placer.model import PlacementResult

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_PENDING = 1  # with --fail-on-pending, as ``kubectl wait`` fails on a timeout
EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130


def document(doc: Any, fmt: str) -> str:
    """A JSON document's text in ``--format`` ``json`` (indented by 2) or ``yaml``."""
    return dump_yaml(doc) if fmt == "yaml" else dump_json(doc)


def emit(text: str, output: str | None = None) -> None:
    """Write a command's output to the file ``-o`` names (all or nothing), else stdout."""
    if output is None or output == STDIN:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            where = stdout_name()
            silence_stdout()  # else the interpreter's last flush fails again, on a second line
            raise InvalidInputError(where, exc.strerror or str(exc)) from None
        return
    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise InvalidInputError(output, exc.strerror or str(exc)) from None


def stdout_name() -> str:
    """The file stdout goes to (``/dev/full``), where the system says (Linux), else ``<stdout>``."""
    try:
        target = os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")
    except (OSError, ValueError, AttributeError):
        return "<stdout>"
    return target if target.startswith("/") else "<stdout>"


def silence_stdout() -> None:
    """Point stdout at the null device (after a broken pipe or a failed write)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def notes(command: str, lines: Sequence[str]) -> None:
    """Print what a command read but did not carry over, one line each, on stderr."""
    for note in lines:
        sys.stderr.write(f"placer: {command}: note: {bounded(note)}\n")
    sys.stderr.flush()


def emit_noted(command: str, text: str, output: str | None, lines: Sequence[str], strict: bool) -> None:
    """:func:`emit` the output, then its :func:`notes`; under ``--strict`` a note is an
    error instead: the notes are printed and nothing is written.

    Raises
    ------
    InvalidInputError
        ``--strict`` with notes: at ``--strict``, naming the first note and their count.
    """
    if strict and lines:
        notes(command, lines)
        raise InvalidInputError("--strict", f"{command}: {len(lines)} note(s), the first: {lines[0]}")
    emit(text, output)
    notes(command, lines)


def removed_note(command: str) -> Callable[["os.PathLike[str]"], None]:
    """The note for an output of an earlier run removed because this run does not write it."""
    return lambda path: notes(command, [f"removed {path} of an earlier run (this run draws none)"])


def pending_status(args: argparse.Namespace, result: PlacementResult) -> int:
    """The exit status of a command that places: 1 for pending pods under ``--fail-on-pending``."""
    return EXIT_PENDING if args.fail_on_pending and result.unschedulable else EXIT_OK


def fail(message: str) -> int:
    """Print ``placer: error: <message>`` as one line on stderr; the bad-input exit status."""
    sys.stderr.write("placer: error: " + bounded(" ".join(message.split("\n"))) + "\n")
    return EXIT_BAD_INPUT


def colored(args: argparse.Namespace) -> bool:
    """Whether the command's text goes to stdout coloured (``--color``; never into a file)."""
    to_file = getattr(args, "output", None) not in (None, "-")
    return not to_file and color_wanted(args.color, sys.stdout)


def tolerate_unencodable() -> None:
    """Write what stdout and stderr cannot encode (an em dash under ``PYTHONIOENCODING=ascii``
    or a C locale) as ``\\u2014`` escapes rather than fail on it."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already in use in a way that forbids it
                pass
