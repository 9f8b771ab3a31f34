"""Slurm hostlist expressions: ``n[01-03,07]`` to host names and back.

:func:`expand_hostlist` reads the expressions Slurm prints and takes (``tux[0-3,7]``,
``n[001-010]``, ``r[1-2]n[1-2]``); :func:`compress_hostlist` writes the compressed form
of a set of names. The Slurm readers (:mod:`placer.adapters.slurm.importer`,
:mod:`placer.adapters.slurm.status`) and the ``slurm`` output format
(:mod:`placer.formats`) share them.
"""

from __future__ import annotations

import itertools
import re
from typing import Callable, Iterable, NoReturn

from placer.exceptions import InvalidInputError
from placer.text.lines import split_outside

__all__ = ["MAX_HOSTLIST_NAMES", "expand_hostlist", "compress_hostlist"]

MAX_HOSTLIST_NAMES = 100_000
"""Most names one hostlist expression may expand to (guards against ``n[0-99999999]``)."""

_TRAILING_NUMBER = re.compile(r"(.*?)([0-9]{1,18})")
_HOST_LITERAL = re.compile(r"[A-Za-z0-9_.\-]+")
_RANGE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")


def expand_hostlist(text: str, where: str = "hostlist") -> list[str]:
    """Expand a Slurm hostlist expression into host names, in the order written.

    Top-level commas separate expressions (``esc8000a-[0-1],esc8000b-0``). A bracket
    holds a comma list of numbers and ``lo-hi`` ranges (``tux[0-3,7]``); the numbers are
    zero-padded to the width of the written low bound (``n[001-010]`` gives ``n001`` ...
    ``n010``; ``n[8-10]`` gives ``n8``, ``n9``, ``n10``). Several brackets in one name
    multiply out, the leftmost varying slowest (``r[1-2]n[1-2]`` gives ``r1n1``, ``r1n2``,
    ``r2n1``, ``r2n2``). Outside brackets a name may hold letters, digits, ``_``, ``.``
    and ``-``. Repeated names are kept.

    Parameters
    ----------
    text : str
        The expression, without surrounding whitespace.
    where : str
        Location for errors (``file:line``, or the default ``hostlist``).

    Returns
    -------
    list of str
        The host names.

    Raises
    ------
    InvalidInputError
        At ``where`` for an empty expression or element, an unbalanced or nested bracket,
        an empty bracket, a range element that is not ``N`` or ``N-M`` with ``N <= M``
        (at most 18 digits), a character outside the name alphabet (whitespace
        included), or more than :data:`MAX_HOSTLIST_NAMES` names.
    """

    def bad(reason: str) -> NoReturn:
        raise InvalidInputError(where, f"expected a hostlist like tux[0-3,7], got {text!r}: {reason}")

    if not text:
        bad("it is empty")
    pieces, problem = split_outside(text, "[", "]")
    if problem is not None:
        bad(problem)

    plans: list[list[str | list[tuple[int, int, int]]]] = []
    total = 0
    for piece in pieces:
        if not piece:
            bad("an empty element between commas")
        plan: list[str | list[tuple[int, int, int]]] = []
        count = 1
        i = 0
        while i < len(piece):
            if piece[i] == "[":
                close = piece.index("]", i)
                ranges = _bracket_ranges(piece[i + 1 : close], bad)
                plan.append(ranges)
                count *= sum(hi - lo + 1 for lo, hi, _ in ranges)
                i = close + 1
            else:
                match = _HOST_LITERAL.match(piece, i)
                if match is None:
                    bad(f"unexpected character {piece[i]!r}")
                plan.append(match.group(0))
                i = match.end()
        total += count
        if total > MAX_HOSTLIST_NAMES:
            bad(f"more than {MAX_HOSTLIST_NAMES} names")
        plans.append(plan)

    names: list[str] = []
    for plan in plans:
        choices = [
            [part] if isinstance(part, str) else
            [str(value).zfill(width) for lo, hi, width in part for value in range(lo, hi + 1)]
            for part in plan
        ]
        names.extend("".join(combo) for combo in itertools.product(*choices))
    return names


def _bracket_ranges(inner: str, bad: Callable[[str], NoReturn]) -> list[tuple[int, int, int]]:
    if not inner:
        bad("an empty '[]'")
    ranges: list[tuple[int, int, int]] = []
    for element in inner.split(","):
        match = _RANGE.fullmatch(element)
        if match is None:
            bad(f"expected N or N-M inside brackets, got {element!r}")
        lo = int(match.group(1))
        hi = lo if match.group(2) is None else int(match.group(2))
        if hi < lo:
            bad(f"range {element!r} runs backwards")
        ranges.append((lo, hi, len(match.group(1))))
    return ranges


def compress_hostlist(names: Iterable[str]) -> str:
    """Slurm's compressed form of a set of host names: ``n01,n02,n03,n07`` -> ``n[01-03,07]``.

    A name ending in digits is split into a prefix and that number; names with the same
    prefix go into one bracket, consecutive numbers into ranges. Zero padding is kept:
    a range ``lo-hi`` is used only when every number in it is printed as ``lo`` is padded
    (``n[08-10]`` for ``n08,n09,n10``; ``n7,n08`` stay ``n[7,08]``). A prefix with a single
    name is written without brackets (``n07``), as are names without trailing digits.
    Duplicates are dropped; the output is sorted by prefix, then by number, so it is the
    same for any order of the input. Prefixes are taken as they are: a name that
    contains ``[``, ``]`` or ``,`` gives a hostlist Slurm cannot read.

    Parameters
    ----------
    names : iterable of str
        Host names.

    Returns
    -------
    str
        The comma-separated hostlist; empty for no names.
    """
    plain: set[str] = set()
    numbered: dict[str, set[tuple[int, str]]] = {}
    for name in names:
        match = _TRAILING_NUMBER.fullmatch(name)
        if match is None:
            plain.add(name)
        else:
            numbered.setdefault(match.group(1), set()).add((int(match.group(2)), match.group(2)))
    items: list[tuple[str, str]] = [(name, name) for name in plain]
    for prefix, numbers in numbered.items():
        ordered = sorted(numbers)
        if len(ordered) == 1:
            items.append((prefix, prefix + ordered[0][1]))
            continue
        parts: list[str] = []
        start = 0
        while start < len(ordered):
            value, text = ordered[start]
            end = start
            while (
                end + 1 < len(ordered)
                and ordered[end + 1][0] == ordered[end][0] + 1
                and ordered[end + 1][1] == str(ordered[end + 1][0]).zfill(len(text))
            ):
                end += 1
            parts.append(text if end == start else f"{text}-{ordered[end][1]}")
            start = end + 1
        items.append((prefix, f"{prefix}[{','.join(parts)}]"))
    items.sort()
    return ",".join(text for _, text in items)
