"""The lexing Slurm's text files share: logical lines, ``Key=Value`` records, the line
that belongs to another file, and located errors.

Every reader of :mod:`placer.adapters.slurm` fails through :func:`fail`, with ``where`` =
``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from typing import NoReturn

from placer.exceptions import InvalidInputError

__all__ = ["fail", "logical_lines", "record_fields", "refuse_other_file", "ANY_KEY", "SCONTROL_ECHO", "NODE_NAME"]

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


SCONTROL_ECHO = re.compile(r"(?:\S*[$#>%]\s*)?scontrol(?:\s.*)?")


NODE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
