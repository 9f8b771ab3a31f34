"""The options the commands of ``placer`` share, and their values read as errors name them
(``--size: expected an integer >= 1, got 'x'``)."""
from __future__ import annotations

import argparse
import math
import os
from typing import Any, Collection, NoReturn

from placer import policies
from placer.exceptions import InvalidInputError
from placer.text.files import STDIN
from placer.text.lines import COLOR_CHOICES
from placer.text.messages import closest

POLICY_CHOICES = ", ".join(policies.names())  # --policy accepts these (placer.policies.REGISTRY)
TEXT_OR_DOCUMENT = ("text", "json", "yaml")
DOCUMENT_FORMATS = ("json", "yaml")
EXIT_STATUS_EPILOG = """\
exit status: 0 done (pods may be left pending), 1 with --fail-on-pending when any pod or
gang is left pending (the output is written all the same), 2 bad input or usage.
"""
TOPOLOGY_FILE_HELP = "nvidia-smi topo -m output ('-' for stdin), or a .json/.yaml/.yml gpuTopology document"

_FORMAT_WORDS = ("json", "yaml", "wide")  # kubectl's -o words, refused as file names
_INPUT_FILES = {  # argument dest -> its name on the command line, for every file read
    "snapshot": "SNAPSHOT", "request": "REQUEST", "result": "RESULT", "file": "FILE", "queues": "QUEUES",
    "workloads": "WORKLOADS", "manifests": "FILE", "spec": "SPEC", "workload": "--workload",
    "topology": "--topology", "nodes": "--nodes", "pods": "--pods", "priority_classes": "--priority-classes",
    "pdbs": "--pdbs", "lgi": "--lgi", "list": "--list", "lgip": "--lgip", "lgipp": "--lgipp", "gres": "--gres",
    "jobs": "--jobs", "gpus": "--gpus", "apps": "--apps", "watch_file": "--watch-file", "podgroups": "--podgroups",
}


class UsageError(Exception):
    """A command-line usage error, reported like bad input."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``placer: error:`` line naming the option."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self._where()}: {message} (see '{self.prog} --help')")

    def _where(self) -> str:
        return self.prog.partition(" ")[2] or "command line"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # An option's value outside its choices is bad input named by the option, worded
        # as every other input error: "--format: expected text or json, got 'xml'".
        if action.option_strings and action.choices is not None and value not in action.choices:
            raise InvalidInputError(action.option_strings[-1], f"expected {_one_of(action.choices)}, got {value!r}")
        if action.choices is not None and value not in action.choices:  # a command's name
            meant = closest(value, action.choices)
            if meant is not None:
                raise UsageError(f"{self._where()}: invalid choice {value!r} (did you mean {meant!r}?)")
            self.error(f"invalid choice {value!r} (choose from {', '.join(action.choices)})")
        super()._check_value(action, value)


def _one_of(choices: Collection[str]) -> str:
    names = list(choices)
    return " or ".join(names) if len(names) <= 2 else "one of " + ", ".join(names)


# ------------------------------------------------------------------ shared options


def add_output(parser: argparse.ArgumentParser, what: str = "", metavar: str = "FILE") -> None:
    """``-o/--output FILE``: written all or nothing (``-``: stdout)."""
    parser.add_argument("-o", "--output", metavar=metavar, help=f"write {what or 'it'} here instead of stdout")


def add_document_format(parser: argparse.ArgumentParser) -> None:
    """``--format json|yaml`` of a command that writes a JSON document."""
    parser.add_argument("--format", metavar="FMT", default="json", choices=DOCUMENT_FORMATS,
                        help="json (default) or yaml")


def add_strict(parser: argparse.ArgumentParser) -> None:
    """``--strict``: a note (what was read but not carried over) is an error instead."""
    parser.add_argument(
        "--strict", action="store_true",
        help="treat each note (what is read but not carried over) as an error: exit 2, nothing written",
    )


def add_fail_on_pending(parser: argparse.ArgumentParser) -> None:
    """``--fail-on-pending``: exit 1 when pods are left pending."""
    parser.add_argument("--fail-on-pending", action="store_true",
                        help="exit 1 when any pod or gang is left pending (the output is still written)")


def add_color_option(parser: argparse.ArgumentParser) -> None:
    """``--color auto|always|never`` of a command that writes text."""
    parser.add_argument(
        "--color", metavar="WHEN", default="auto", choices=COLOR_CHOICES,
        help="colour causes and findings: auto (default: on a terminal, unless NO_COLOR is set), always, never",
    )


def add_input_files(parser: argparse.ArgumentParser, *names: str) -> None:
    """Positional file arguments: ``SNAPSHOT``, ``REQUEST``, ``RESULT``, each a document."""
    kinds = {"snapshot": "ClusterSnapshot", "request": "PlacementRequest", "result": "PlacementResult"}
    for name in names:
        parser.add_argument(name, metavar=name.upper(), help=f"{kinds[name]} file (JSON or YAML)")


# ------------------------------------------------------------------ values


def count(text: str, option: str, least: int = 0) -> int:
    """An option's integer value, at least ``least`` (digits only, no sign)."""
    s = text.strip()
    if not (s.isascii() and s.isdigit()) or int(s) < least:
        raise InvalidInputError(option, f"expected an integer >= {least}, got {text!r}")
    return int(s)


def positive_int(text: str, option: str) -> int:
    """An option's integer value, at least 1."""
    return count(text, option, least=1)


def seconds(text: str, option: str, *, positive: bool = False) -> float:
    """An option's duration in seconds: a finite number >= 0 (> 0 when ``positive``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value < math.inf) or (positive and value == 0):
        raise InvalidInputError(option, f"expected a number of seconds {'>' if positive else '>='} 0, got {text!r}")
    return value


def port(text: str, option: str = "--port") -> int:
    """A TCP port, 0 (any free one) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise InvalidInputError(option, f"expected a port from 0 to 65535, got {text!r}")
    return int(text)


def index_list(text: str | None, option: str) -> list[int]:
    """A comma-separated list of GPU indices; each item must be a plain decimal integer."""
    if text is None or not text.strip():
        return []
    out = []
    for j, item in enumerate(text.split(",")):
        s = item.strip()
        if not (s.isascii() and s.isdigit()):
            raise InvalidInputError(
                f"{option}[{j}]", f"expected a GPU index (an integer >= 0, comma-separated), got {item!r}"
            )
        out.append(int(s))
    return out


def policy_option(text: str | None) -> policies.Policy | None:
    """``--policy``'s policy, or None when not given."""
    return policies.get(text, "--policy") if text is not None else None


def policy_name(text: str | None) -> str | None:
    """``--policy``'s policy by its registered name, or None when not given."""
    policy = policy_option(text)
    return policy.name if policy is not None else None


# ------------------------------------------------------------------ files


def check_files(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or written: standard input (``-``) given for two
    inputs, ``-o`` naming a format (kubectl's ``-o yaml``) or one of the command's inputs."""
    inputs = [
        (name, value)
        for dest, name in _INPUT_FILES.items()
        for value in _file_values(getattr(args, dest, None))
    ]
    from_stdin = [name for name, value in inputs if value == STDIN]
    if len(from_stdin) > 1:
        raise InvalidInputError(
            STDIN, f"standard input given for both {from_stdin[0]} and {from_stdin[1]}; only one input can be read from it"
        )
    output = getattr(args, "output", None)
    if output is None or output == STDIN:
        return
    if output in _FORMAT_WORDS:
        hint = f"use --format {output}" if output != "wide" else "see --format"
        raise InvalidInputError("-o", f"{output!r} is a format, not a file; {hint} (-o FILE writes to FILE)")
    for name, value in inputs:
        if value != STDIN and _same_file(output, value):
            raise InvalidInputError(
                "-o", f"{output} is the input {value} ({name}); write the output to another file"
            )


def _file_values(value: Any) -> list[str]:
    """The file names an argument holds: one, a list (``nargs``, ``append``) or none."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _same_file(output: str, path: str) -> bool:
    """Whether writing ``output`` would overwrite the file ``path`` (a device is never an input's
    copy: ``-o /dev/stdout`` with ``/dev/stdin`` may be one terminal)."""
    try:
        if not os.path.isfile(output):
            return not os.path.exists(output) and os.path.realpath(output) == os.path.realpath(path)
        return os.path.samefile(output, path)
    except (OSError, ValueError):
        return False
