"""The value syntax Slurm prints: whole counts, memory sizes, number lists, "no value".

Shared by the readers of Slurm's configuration and node records
(:mod:`placer.adapters.slurm.nodes`, :mod:`placer.adapters.slurm.topology`) and of its
status output and logs (:mod:`placer.adapters.slurm.status`,
:mod:`placer.adapters.slurm.logs`). Every reader fails with
:class:`placer.exceptions.InvalidInputError` at the ``where`` it is given.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Callable, Mapping

from placer.exceptions import InvalidInputError

__all__ = ["NO_VALUE", "MEM_UNITS", "NUMBER_RANGE", "whole", "mem_mib", "number_list", "tres", "tres_gpus"]

NO_VALUE = frozenset(("", "(null)", "N/A", "n/a"))
"""What Slurm prints for a field without a value."""

MEM_UNITS: Mapping[str, int | Fraction] = {
    "": 1, "K": Fraction(1, 1024), "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3
}
"""Size suffixes of Slurm memory values and the MiB each stands for (no suffix: MiB)."""

NUMBER_RANGE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")
"""An element ``N`` or ``N-M`` of a number list; group 1 is ``N``, group 2 ``M`` or None."""

_WHOLE = re.compile(r"[0-9]{1,18}")
_MEM = re.compile(r"([0-9]{1,18})(?:\.([0-9]{1,9}))?([A-Z]?)")  # the unit is checked against units


def whole(value: str, where: str, what: str) -> int:
    """A whole number written in decimal digits (at most 18).

    Parameters
    ----------
    value : str
        The text.
    where : str
        Location for errors (``file:line``).
    what : str
        What the value is, for errors (``"CPUTot="``).

    Returns
    -------
    int

    Raises
    ------
    InvalidInputError
        At ``where`` for anything but 1 to 18 digits.
    """
    if not _WHOLE.fullmatch(value):
        raise InvalidInputError(where, f"expected {what} as a whole number, got {value!r}")
    return int(value)


def mem_mib(value: str, where: str, what: str, units: Mapping[str, int | Fraction] = MEM_UNITS) -> int:
    """A size like ``16384M`` or ``1.5G`` in MiB, rounded up.

    Parameters
    ----------
    value : str
        Digits, an optional fraction of up to 9 digits, and a suffix of ``units``.
    where : str
        Location for errors (``file:line``).
    what : str
        What the value is, for errors (``"mem="``).
    units : mapping of str to int or Fraction
        The suffixes allowed and the MiB each stands for (default :data:`MEM_UNITS`).

    Returns
    -------
    int

    Raises
    ------
    InvalidInputError
        At ``where`` for another form or a suffix ``units`` does not hold.
    """
    match = _MEM.fullmatch(value)
    if match is None or match.group(3) not in units:
        raise InvalidInputError(where, f"expected {what} as a size like 16384M or 1.5G, got {value!r}")
    number = Fraction(f"{match.group(1)}.{match.group(2) or '0'}")
    return math.ceil(number * units[match.group(3)])


def number_list(
    text: str,
    where: str,
    limit: int,
    malformed: str,
    backward: Callable[[str], str],
    beyond: Callable[[int], str],
    pattern: re.Pattern[str] = NUMBER_RANGE,
) -> list[int]:
    """The numbers of a comma list of ``N`` and ``N-M`` elements (``0-1,3``), in order.

    Parameters
    ----------
    text : str
        The list.
    where : str
        Location for errors (``file:line``).
    limit : int
        Every number must be below it.
    malformed : str
        The error for an element ``pattern`` does not match.
    backward : callable
        The error for a range that runs backwards, given the element.
    beyond : callable
        The error for a number of ``limit`` or more, given the number.
    pattern : re.Pattern
        An element, ``N`` in group 1 and ``M`` (or None) in group 2; default
        :data:`NUMBER_RANGE`.

    Returns
    -------
    list of int
        Ranges spelled out, repeats kept.

    Raises
    ------
    InvalidInputError
        At ``where`` with the message for the first fault.
    """
    numbers: list[int] = []
    for element in text.split(","):
        match = pattern.fullmatch(element)
        if match is None:
            raise InvalidInputError(where, malformed)
        lo = int(match.group(1))
        hi = lo if match.group(2) is None else int(match.group(2))
        if hi < lo:
            raise InvalidInputError(where, backward(element))
        if hi >= limit:
            raise InvalidInputError(where, beyond(hi))
        numbers.extend(range(lo, hi + 1))
    return numbers


def tres(value: str, where: str, key: str) -> dict[str, str]:
    """A TRES list (``cpu=11,mem=240G,gres/gpu=1``) as a mapping; empty for no value.

    Parameters
    ----------
    value : str
        The list as printed.
    where : str
        Location for errors (``file:line``).
    key : str
        The field it came from, for errors (``AllocTRES``).

    Returns
    -------
    dict of str to str

    Raises
    ------
    InvalidInputError
        At ``where`` for an item without ``name=amount`` (a list cut short) or a name
        given twice.
    """
    if value in NO_VALUE:
        return {}
    out: dict[str, str] = {}
    for item in value.split(","):
        name, sep, amount = item.partition("=")
        if not sep or not name or not amount:
            raise InvalidInputError(where, f"expected {key}= as name=count,... , got {value!r} (cut short?)")
        if name in out:
            raise InvalidInputError(where, f"expected each TRES once in {key}=, got {name} again")
        out[name] = amount
    return out


def tres_gpus(listed: Mapping[str, str], where: str, key: str) -> int | None:
    """The GPUs of a TRES mapping: ``gres/gpu``, else the sum of ``gres/gpu:<type>`` (the
    typed entries repeat the untyped one); None when it names no GPU."""
    if "gres/gpu" in listed:
        return whole(listed["gres/gpu"], where, f"gres/gpu of {key}=")
    typed = [name for name in listed if name.startswith("gres/gpu:")]
    if not typed:
        return None
    return sum(whole(listed[name], where, f"{name} of {key}=") for name in typed)
