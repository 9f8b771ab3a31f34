"""Reading the text that tools print: lines with located errors, and small text helpers.

The readers of command output and configuration files (``nvidia-smi``, Slurm, the
``nvidiaSmiTopo`` form of a snapshot) share the same first steps: drop a byte-order mark,
split into lines without their ``\\r\\n`` endings, and report a fault as
:class:`~placer.exceptions.InvalidInputError` at ``"<source>:<line>"``. :class:`TextLines`
does these; readers subclass it with their own grammar. :func:`clip` shortens a value
for an error message, :func:`split_outside` splits a list at the commas outside brackets.

The text placer prints goes through a few helpers: :func:`aligned` lays rows out as columns
as wide as their widest cell, :func:`paint` colours a word with ANSI codes when asked
(:func:`color_wanted`: on a terminal, unless ``NO_COLOR`` is set), :func:`some_of` names
the first few of a list and how many more.
"""

from __future__ import annotations

import os
import re
from typing import IO, Iterator, NoReturn, Sequence

from placer.exceptions import InvalidInputError

__all__ = ["TextLines", "clip", "split_outside", "some_of", "aligned", "paint", "color_wanted", "COLOR_CHOICES"]

COLOR_CHOICES = ("auto", "always", "never")
"""The values of ``--color``."""

_ANSI = {"red": "31", "yellow": "33", "green": "32", "cyan": "36", "bold": "1"}
_ESCAPE = re.compile("\033\\[[0-9;]*m")


class TextLines:
    """The lines of a text, and errors located at ``<source>:<line>``.

    Parameters
    ----------
    text : str
        The whole text. A leading byte-order mark is dropped, as are the newline that
        ends the last line and the ``\\r`` of ``\\r\\n`` line endings.
    source : str
        The name errors give the text (a file name, ``<stdin>``, a JSON path).

    Attributes
    ----------
    lines : list of str
        The lines, without their line endings; line ``k`` (1-based) is ``lines[k - 1]``.
        Subclasses may replace it (e.g. with stripped lines) as long as the numbering stays.
    source : str
        As given.
    """

    def __init__(self, text: str, source: str) -> None:
        if text.startswith("\ufeff"):
            text = text[1:]
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        self.lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        self.source = source

    def where(self, line: int) -> str:
        """The location of 1-based ``line``: ``"<source>:<line>"``."""
        return f"{self.source}:{line}"

    def fail(self, line: int, what: str) -> NoReturn:
        """Raise :class:`~placer.exceptions.InvalidInputError` at 1-based ``line``.

        Raises
        ------
        InvalidInputError
            Always, with ``where`` = :meth:`where` of ``line`` and ``what`` as given.
        """
        raise InvalidInputError(self.where(line), what)

    def numbered(self) -> Iterator[tuple[int, str, str]]:
        """``(line, where, text)`` for each line that is not blank, in order.

        ``line`` is 1-based, ``where`` is :meth:`where` of it, ``text`` the line as read.
        """
        for index, raw in enumerate(self.lines):
            if raw.strip():
                yield index + 1, self.where(index + 1), raw


def clip(text: str, width: int = 60) -> str:
    """``text`` cut to at most ``width`` characters, ``...`` marking a cut.

    Parameters
    ----------
    text : str
        A value to show in an error message.
    width : int
        The longest result (at least 4).

    Returns
    -------
    str
        ``text`` itself when it fits, else its first ``width - 3`` characters and ``...``.
    """
    return text if len(text) <= width else text[: width - 3] + "..."


def some_of(names: Sequence[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, joined: ``"a, b, c and 4 more"``."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def split_outside(text: str, opening: str, closing: str) -> tuple[list[str], str | None]:
    """Split ``text`` at the commas outside ``opening``/``closing`` brackets.

    ``split_outside("a[1,2],b", "[", "]")`` gives ``(["a[1,2]", "b"], None)``.

    Parameters
    ----------
    text : str
        A comma-separated list whose items may hold bracketed commas.
    opening, closing : str
        The bracket characters (``"["`` and ``"]"``, ``"("`` and ``")"``).

    Returns
    -------
    (list of str, str or None)
        The items (empty ones kept, so ``""`` gives ``[""]``), and the first bracket
        fault met or ``None``: for ``[`` and ``]``, ``"nested '['"``, ``"']' without
        '['"`` or, at the end, ``"'[' without ']'"``. The items are split as far as the
        commas go even when there is a fault.
    """
    pieces: list[str] = []
    problem: str | None = None
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == opening:
            depth += 1
            if depth > 1 and problem is None:
                problem = f"nested {opening!r}"
        elif char == closing:
            depth -= 1
            if depth < 0 and problem is None:
                problem = f"{closing!r} without {opening!r}"
        elif char == "," and depth == 0:
            pieces.append(text[start:index])
            start = index + 1
    if depth and problem is None:
        problem = f"{opening!r} without {closing!r}"
    pieces.append(text[start:])
    return pieces, problem


def aligned(rows: Sequence[Sequence[str]], right: frozenset[int] = frozenset(), indent: str = "") -> list[str]:
    """Rows of cells as lines of aligned columns, each as wide as its widest cell.

    Parameters
    ----------
    rows : sequence of sequences of str
        The rows, a header first when there is one; every row has the same cells. A cell
        may be coloured (:func:`paint`): its escapes do not count towards its width.
    right : frozenset of int
        The columns aligned right (numbers); the others are aligned left.
    indent : str
        Put before every line.

    Returns
    -------
    list of str
        One line per row, trailing blanks dropped.
    """
    if not rows:
        return []
    widths = [max(_width(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = []
    for r in rows:
        pads = (" " * (w - _width(cell)) for cell, w in zip(r, widths))
        cells = (pad + cell if c in right else cell + pad for c, (cell, pad) in enumerate(zip(r, pads)))
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def _width(cell: str) -> int:
    """The columns ``cell`` takes on a terminal: its ANSI colour escapes take none."""
    return len(_ESCAPE.sub("", cell)) if "\033" in cell else len(cell)


def paint(text: str, color: str, on: bool) -> str:
    """``text`` in ``color`` (``red``, ``yellow``, ``green``, ``cyan``, ``bold``) as ANSI
    escapes when ``on``, else ``text`` itself."""
    return f"\033[{_ANSI[color]}m{text}\033[0m" if on else text


def color_wanted(choice: str, stream: IO[str]) -> bool:
    """Whether to colour what goes to ``stream``: ``choice`` ``always`` or ``never``, or
    ``auto``: when ``stream`` is a terminal and ``NO_COLOR`` is unset or empty (no-color.org)."""
    if choice != "auto":
        return choice == "always"
    return not os.environ.get("NO_COLOR") and bool(getattr(stream, "isatty", lambda: False)())
