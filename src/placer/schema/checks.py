"""Checks of single values that come from a command line or a Python call, not a document.

Each returns the value (converted where the command line gives text) or raises
:class:`~placer.exceptions.InvalidInputError` naming the option or argument.
"""
from __future__ import annotations

import math
from typing import Any

from placer.exceptions import InvalidInputError
from placer.limits import SEED_MAX
from placer import policies
from placer.text.messages import quoted
from placer.model import PREEMPTION_MODES, SOLVERS
from placer.schema.errors import bad as _bad
from placer.schema.errors import one_of as _one_of

__all__ = ["check_policy", "check_solver", "check_preemption", "check_seed", "check_gpu_request", "check_time_limit"]


def _int_desc(lo: int, hi: int) -> str:
    return f"an integer in {lo}..{hi}"


def _positive_number(v: Any, where: str) -> float:
    if (type(v) is int and 0 < v <= 2**53) or (type(v) is float and math.isfinite(v) and v > 0):
        return float(v)
    raise _bad(where, "a finite number > 0", v)


def check_policy(name: Any, where: str = "policy") -> str:
    """Return ``name`` if it names a placement policy (:data:`placer.policies.REGISTRY`).

    Raises
    ------
    InvalidInputError
        If ``name`` is not a known policy.
    """
    return policies.get(name, where).name


def check_solver(name: Any, where: str = "solver") -> str:
    """Return ``name`` if it is a solver choice (one of :data:`placer.model.SOLVERS`).

    Raises
    ------
    InvalidInputError
        If ``name`` is not ``auto``, ``greedy`` or ``exact``.
    """
    if type(name) is str and name in SOLVERS:
        return name
    raise _bad(where, _one_of(SOLVERS), name)


def check_preemption(mode: Any, where: str = "preemption") -> str:
    """Return ``mode`` if it is a preemption mode (one of :data:`placer.model.PREEMPTION_MODES`).

    Raises
    ------
    InvalidInputError
        If ``mode`` is not ``none``, ``greedy``, ``exact`` or ``auto``.
    """
    if type(mode) is str and mode in PREEMPTION_MODES:
        return mode
    raise _bad(where, _one_of(PREEMPTION_MODES), mode)


def check_seed(value: Any, where: str = "seed") -> int:
    """Return a random seed as an int in ``0 .. 2**64-1``.

    Parameters
    ----------
    value : int or str
        The seed; a string of decimal digits (from the command line) is accepted.
    where : str
        Location reported on error.

    Raises
    ------
    InvalidInputError
        If ``value`` is not an integer in range (booleans and floats are refused).
    """
    v = value
    if type(v) is str and v.isascii() and v.isdigit():
        v = int(v)
    if type(v) is int and 0 <= v <= SEED_MAX:
        return v
    raise _bad(where, _int_desc(0, SEED_MAX), value)


def check_gpu_request(
    n_gpus: int, available: Any, size: Any, required: Any, objective: Any
) -> tuple[int, int]:
    """Check the arguments of a GPU-set choice on a node of ``n_gpus`` GPUs.

    Returns
    -------
    (int, int)
        The available and the required GPUs as bitmasks.

    Raises
    ------
    InvalidInputError
        Naming ``available``, ``size``, ``required`` or ``objective``: an index out of
        range or repeated, a required GPU that is not available, more required GPUs than
        ``size``, or fewer available GPUs than ``size``.
    """
    if objective != "tiling" and objective != "best-set":
        raise _bad("objective", '"tiling" or "best-set"', objective)
    if type(size) is not int or size < 1:
        raise _bad("size", "an integer >= 1", size)
    free, n_free = _gpu_mask(available, "available", n_gpus)
    need, n_need = _gpu_mask(required, "required", n_gpus) if required else (0, 0)
    if need & ~free:
        missing = [i for i in range(n_gpus) if (need & ~free) >> i & 1]
        raise InvalidInputError("required", f"GPU(s) {missing} are required but not available")
    if n_need > size:
        raise InvalidInputError("required", f"{n_need} GPUs are required, more than size {quoted(size)}")
    if n_free < size:
        raise InvalidInputError("available", f"{n_free} GPU(s) available, fewer than size {quoted(size)}")
    return free, need


def _gpu_mask(values: Any, name: str, n_gpus: int) -> tuple[int, int]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise _bad(name, "a list of GPU indices", values)
    mask = 0
    count = 0
    for j, i in enumerate(values):
        if type(i) is not int or not 0 <= i < n_gpus:
            raise _bad(f"{name}[{j}]", f"a GPU index in 0..{n_gpus - 1}", i)
        bit = 1 << i
        if mask & bit:
            raise InvalidInputError(f"{name}[{j}]", f"GPU {i} is listed twice")
        mask |= bit
        count += 1
    return mask, count


def check_time_limit(value: Any, where: str = "timeLimitS") -> float:
    """Return a solver time limit in seconds (a finite number > 0) as a float.

    Raises
    ------
    InvalidInputError
        If ``value`` is not a finite positive int or float.
    """
    if type(value) is str:
        try:
            value = float(value)
        except ValueError:
            pass
    return _positive_number(value, where)
