"""The lexing Slurm's text files and outputs share: logical lines, ``Key=Value`` records,
the line that belongs to another file, the echo of a command, the lines of an output with
their header errors, and located errors.

Every reader of :mod:`placer.adapters.slurm` fails through :func:`fail`, with ``where`` =
``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from typing import NoReturn

from placer.exceptions import InvalidInputError
from placer.text.lines import TextLines, clip

__all__ = [
    "fail", "echo_of", "CommandOutput", "logical_lines", "record_fields", "refuse_other_file", "ANY_KEY",
    "SCONTROL_ECHO", "NODE_NAME", "COUNT",
]

_PAIR = re.compile(r'([^\s=#"]+)=("[^"]*"|[^\s"]*)')
_WORD = re.compile(r'(?:[^\s"]|"[^"]*")+|"[^"]*')


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Split into (first line number, content) with comments removed and ``\\`` joined."""
    result: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    lines = text.split("\n")
    for index, raw in enumerate(lines):
        content = raw.split("#", 1)[0].rstrip("\r").rstrip()
        if not pending:
            start = index + 1
        if content.endswith("\\"):
            pending.append(content[:-1])
            continue
        pending.append(content)
        record = " ".join(pending)
        pending = []
        if record.strip():
            result.append((start, record))
    if pending and " ".join(pending).strip():
        result.append((start, " ".join(pending)))
    return result


def record_fields(record: str, where: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for word in _WORD.finditer(record):
        match = _PAIR.fullmatch(word.group(0))
        if match is None:
            fail(where, f"expected Key=Value, got {word.group(0)!r}")
        key, value = match.group(1).lower(), match.group(2)
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        canonical = "cores" if key == "cpus" else key
        if canonical in fields:
            fail(where, f"expected each key once, got {match.group(1)}= again")
        fields[canonical] = value
    return fields


# The keys that tell one Slurm file from another, lowercase; first match wins.
_FILE_KINDS: tuple[tuple[frozenset[str], str, str], ...] = (
    (
        frozenset(("switchname", "blockname", "blocksizes")),
        "a topology line (topology.conf, scontrol show topology)",
        "--topology",
    ),
    (frozenset(("jobid", "jobname", "jobstate")), "a line of scontrol show job output", "--jobs"),
    (
        frozenset((
            "arch", "corespersocket", "cputot", "cpualloc", "cpuefctv", "realmemory", "state",
            "gres", "gresused", "cfgtres", "alloctres", "nodeaddr", "nodehostname", "partitions",
        )),
        "a line of scontrol show node output",
        "--nodes",
    ),
    (frozenset(("name", "autodetect", "file", "links", "multiplefiles")), "a gres.conf line", "--gres"),
)
ANY_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")


def refuse_other_file(keys: list[str], where: str, option: str, expected: str) -> None:
    """Refuse a line whose ``keys`` belong to another Slurm file than the one ``option``
    reads, naming that file and the option that reads it.

    Raises
    ------
    InvalidInputError
        At ``where``, when a key marks a topology.conf, scontrol show job or node, or
        gres.conf line and that file is not the one ``option`` reads.
    """
    for marks, kind, its_option in _FILE_KINDS:
        marked = [key for key in keys if key.lower() in marks]
        if marked:
            if its_option != option:
                fail(where, f"expected {expected}, got {kind} ({marked[0]}=): "
                             f"give that file as {its_option}")
            return


def fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)




NODE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
"""A node name as Slurm prints it."""
COUNT = re.compile(r"[0-9]{1,9}")
"""A count as the status outputs print it (at most nine digits)."""


def echo_of(command: str) -> re.Pattern[str]:
    """A line echoing ``command`` (``$ sinfo -R``, ``root@host:~# sinfo``)."""
    return re.compile(rf"(?:\S*[$#>%]\s*)?{command}(?:\s.*)?")


SCONTROL_ECHO = echo_of("scontrol")
"""A line echoing an ``scontrol`` command."""


class CommandOutput(TextLines):
    """The lines of a command's output or of a log, errors at ``<source>:<line>``."""

    def not_header(self, line: int, header: str, raw: str) -> NoReturn:
        """Fail at ``line`` (text ``raw``) where ``header`` was expected."""
        self.fail(line, f"expected {header}, got {clip(raw.strip())!r}")

    def no_header(self, header: str) -> NoReturn:
        """Fail at line 1: the output has no ``header`` at all."""
        self.fail(1, f"expected {header}, got nothing")
