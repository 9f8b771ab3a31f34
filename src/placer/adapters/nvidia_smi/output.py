"""What every reader of ``nvidia-smi -L`` and ``nvidia-smi mig`` output shares: the lines
of the output with located errors (:class:`NvidiaSmiOutput`), the echo of the command, a
value shown in a message, a key listed twice, and reading a file.

Errors are :class:`placer.exceptions.InvalidInputError` with ``where`` = ``"<source>:<line>"``.
"""

from __future__ import annotations

import os
import re
from typing import Callable, TypeVar, Union

from placer.text.files import read_text
from placer.exceptions import InvalidInputError
from placer.text.lines import TextLines

__all__ = [
    "PathLike", "MIG_PROFILE_NAME", "FAILURE_LINE", "show_value", "is_command_echo", "record_once", "parse_file",
    "NvidiaSmiOutput",
]

PathLike = Union[str, "os.PathLike[str]"]

MIG_PROFILE_NAME = re.compile(r"(?:[0-9]{1,2}c\.)?[0-9]{1,2}g\.[0-9]{1,4}gb(?:[+-][a-z][a-z0-9]*(?:\.[a-z0-9]+)*)*")
"""A MIG profile name: 1g.10gb, 1g.10gb+me, 1g.24gb+gfx, 1g.23gb+me.all, 1g.23gb-me, 1c.3g.20gb (a CI profile)."""
FAILURE_LINE = re.compile(r"NVIDIA-SMI has failed|Failed to |Unable to |Insufficient Permissions|No .*found")
"""The start of what nvidia-smi prints instead of its output when it fails."""

_Parsed = TypeVar("_Parsed")


def show_value(value: str) -> str:
    """``value`` as an error message shows it: quoted, cut at 80 characters."""
    if value == "":
        return "an empty line"
    return repr(value) if len(value) <= 80 else repr(value[:80]) + "..."


def is_command_echo(line: str) -> bool:
    """A line that echoes the command (``nvidia-smi -L``, ``$ sudo nvidia-smi mig -lgi``)."""
    return "nvidia-smi" in line and not line.lstrip().startswith(("GPU", "MIG", "|", "+"))


def record_once(seen: dict, key: object, where: str, what: str | None = None) -> None:
    """Record ``key`` as seen at ``where``; an error if it was seen before."""
    if key in seen:
        raise InvalidInputError(where, f"{what or key} is listed twice (first at {seen[key]})")
    seen[key] = where


def parse_file(parse: Callable[..., _Parsed], path: PathLike, **options: bool) -> _Parsed:
    """``parse`` the UTF-8 file ``path``; error locations name it by its base name."""
    name = os.path.basename(os.fspath(path))
    return parse(read_text(path, source=name), name, **options)


class NvidiaSmiOutput(TextLines):
    """The lines of an ``nvidia-smi -L`` or ``nvidia-smi mig`` output, errors at ``<source>:<line>``."""

    def start(self, expected: str) -> int:
        """The index of the first line that is neither blank nor an echo of the command;
        when there is none, an error ``expected <expected>, got ...`` after the last line."""
        start = 0
        while start < len(self.lines) and (not self.lines[start].strip() or is_command_echo(self.lines[start])):
            start += 1
        if start == len(self.lines):
            got = "only the command line" if any(line.strip() for line in self.lines) else "an empty text"
            self.fail(len(self.lines) + 1, f"expected {expected}, got {got}")
        return start

    def whole(
        self, number: int, line: str, pattern: re.Pattern[str], cut: re.Pattern[str], kind: str, form: str
    ) -> re.Match[str]:
        """``line`` (line ``number``) matched by ``pattern``; an error naming it a ``kind`` line cut
        short when ``cut`` matches it instead, else one expecting ``form``."""
        match = pattern.fullmatch(line)
        if match is None:
            if cut.fullmatch(line):
                self.fail(number, f"{kind} line without the closing ')' after the UUID (a copy cut short?): {show_value(line)}")
            self.fail(number, f"expected `{form}`, got {show_value(line)}")
        return match
