"""The best set of GPUs inside one node.

For node types of at most 16 GPUs the answer for every free mask is looked up in tables
built once per (pair scores, set size), lazily; larger nodes are searched exactly by
branch and bound. The rules (objectives and tie-breaks) are in
``docs/placement-rules.md``, "GPUs inside a node".
"""
from __future__ import annotations

import json
import time
from typing import Any, Sequence

from placer.exceptions import InvalidInputError, SolverError
from placer.kernel.tables import MAX_TABLE_GPUS, GpuTables, choose_gpus, tables_for
from placer.schema.checks import check_gpu_request
from placer.model.topology import GpuTopology, topology_from_spec

__all__ = ["select_gpus", "GpuTables", "tables_for", "OBJECTIVES", "MAX_TABLE_GPUS"]

OBJECTIVES = ("tiling", "best-set")
OBJECTIVE_CODES = {"tiling": 0, "best-set": 1}


PARSED_TOPOLOGIES = 64
"""Topologies given as mappings or text that :func:`select_gpus` keeps parsed, by content."""

_parsed: dict[str, GpuTopology | None] = {}


def _gpus_named(*index_lists: Any) -> int:
    """One more than the largest GPU index in the lists (0 for none); what is no list of
    indices is left to :func:`check_gpu_request` to refuse."""
    indices = [i for v in index_lists if isinstance(v, (list, tuple)) for i in v if type(i) is int]
    return max(indices, default=-1) + 1


def _topology(spec: Any) -> GpuTopology | None:
    """``spec`` parsed (``topology_from_spec``), once per content while it stays among the
    last :data:`PARSED_TOPOLOGIES` seen."""
    try:
        key = spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):  # not JSON-like: let the parser say what is wrong
        return topology_from_spec(spec, where="topology")
    if key in _parsed:
        return _parsed[key]
    topology = topology_from_spec(spec, where="topology")
    if len(_parsed) >= PARSED_TOPOLOGIES:
        del _parsed[next(iter(_parsed))]
    _parsed[key] = topology
    return topology


def _indices(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def select_gpus(
    topology: Any,
    available: Sequence[int],
    size: int,
    required: Sequence[int] = (),
    objective: str = "tiling",
) -> list[int]:
    """The best set of ``size`` GPUs among ``available``, holding every ``required`` GPU.

    Parameters
    ----------
    topology : GpuTopology or Mapping or None
        Any ``gpuTopology`` form of the snapshot format; ``None`` means all pairs equal
        (the GPU count is then taken as the highest index given, plus one). A mapping or
        text is parsed once per content (the last :data:`PARSED_TOPOLOGIES` kept); a
        :class:`GpuTopology` (``topology_from_spec``) skips even that lookup.
    available : sequence of int
        Free GPU indices.
    size : int
        GPUs wanted, at least 1.
    required : sequence of int
        GPUs that must be in the answer.
    objective : {"tiling", "best-set"}
        ``tiling`` maximises the set's score plus the best split of the remaining free
        GPUs into sets of the same size; ``best-set`` maximises the set's score alone.
        Size 1 takes the least-connected free GPU under both.

    Returns
    -------
    list of int
        The chosen GPU indices, ascending.

    Raises
    ------
    InvalidInputError
        If an index is out of range or repeated, ``required`` is not within
        ``available``, or fewer than ``size`` GPUs are available.
    SolverError
        On a node of more than 16 GPUs, when the exact search takes over 10 s.
    """
    if not isinstance(topology, GpuTopology):
        n_hint = _gpus_named(available, required) if topology is None else None
        topology = None if topology is None else _topology(topology)
        if topology is None:
            topology = GpuTopology(gpus=n_hint or 0, labels=None)
    free, need = check_gpu_request(topology.gpus, available, size, required, objective)
    code = OBJECTIVE_CODES[objective]
    if topology.gpus <= MAX_TABLE_GPUS:
        t = tables_for(topology, size)
        if need:
            chosen = choose_gpus(t, free, need, code)
        else:
            chosen = int((t.tiling if code == 0 else t.best_set)[free])
    else:
        chosen = branch_and_bound(topology.scores, free, size, need, objective)
    if not chosen:
        raise InvalidInputError("available", f"no set of {size} GPU(s) holds the required GPUs")
    return _indices(chosen)


class _Search:
    """Exact search of the tiling and best-set objectives for nodes beyond the tables."""

    def __init__(self, scores: Sequence[Sequence[int]], size: int, deadline: float) -> None:
        self.scores = scores
        self.size = size
        self.deadline = deadline
        self.memo: dict[int, int] = {}
        self.steps = 0

    def tick(self) -> None:
        self.steps += 1
        if self.steps % 4096 == 0 and time.monotonic() > self.deadline:
            raise SolverError(
                "the exact search for a GPU set ran out of time; nodes beyond "
                f"{MAX_TABLE_GPUS} GPUs are searched without tables (use fewer free GPUs or "
                "a larger time_limit_s)"
            )

    def set_score(self, mask: int) -> int:
        g = _indices(mask)
        s = self.scores
        return sum(s[a][b] for i, a in enumerate(g) for b in g[i + 1 :])

    def bound(self, mask: int) -> int:
        """An upper bound of the best split of ``mask``: each GPU's best partners, halved."""
        g = _indices(mask)
        k = self.size
        total = 0
        for a in g:
            row = sorted((self.scores[a][b] for b in g if b != a), reverse=True)
            total += sum(row[: k - 1])
        return total // 2

    def split(self, mask: int) -> int:
        """The best split of ``mask`` into sets of ``size`` plus one of ``|mask| mod size``."""
        if mask == 0:
            return 0
        self.tick()
        found = self.memo.get(mask)
        if found is not None:
            return found
        k = self.size
        g = _indices(mask)
        low, rest = g[0], g[1:]
        r = len(g) % k
        best = -1
        sizes = {k - 1} if len(g) >= k else set()
        if r:
            sizes.add(r - 1)
        for extra in sorted(sizes, reverse=True):
            best = self._best_block(low, rest, extra, mask, best)
        self.memo[mask] = best
        return best

    def _best_block(self, low: int, rest: list[int], extra: int, mask: int, best: int) -> int:
        s = self.scores

        def walk(start: int, block: int, inside: int, left: int) -> None:
            nonlocal best
            if left == 0:
                remainder = mask & ~block
                if inside + self.bound(remainder) <= best:
                    return
                val = inside + self.split(remainder)
                if val > best:
                    best = val
                return
            for pos in range(start, len(rest) - left + 1):
                b = rest[pos]
                gain = sum(s[b][a] for a in _indices(block))
                walk(pos + 1, block | (1 << b), inside + gain, left - 1)

        walk(0, 1 << low, 0, extra)
        return best


def branch_and_bound(
    scores: Sequence[Sequence[int]],
    free: int,
    size: int,
    required: int,
    objective: str,
    time_limit_s: float = 10.0,
) -> int:
    """The chosen mask of the exact search (same rules as the tables; 0 when none).

    Raises :class:`SolverError` when the search takes longer than ``time_limit_s``.
    """
    n = len(scores)
    if bin(free).count("1") < size or required & ~free or bin(required).count("1") > size:
        return 0
    members = _indices(free)
    if len({scores[a][b] for i, a in enumerate(members) for b in members[i + 1 :]}) <= 1:
        # every set scores the same: the smallest index list holding the required GPUs
        chosen = required
        for i in members:
            if bin(chosen).count("1") == size:
                break
            chosen |= 1 << i
        return chosen
    if size == 1:
        if required:
            return required
        return 1 << min(members, key=lambda i: (sum(scores[i][j] for j in members if j != i), i))
    search = _Search(scores, size, time.monotonic() + time_limit_s)
    pool = [i for i in range(n) if (free >> i) & 1 and not (required >> i) & 1]
    need = size - bin(required).count("1")
    best: tuple[int, int, int] | None = None

    def key_better(prim: int, sec: int, mask: int) -> bool:
        if best is None:
            return True
        bp, bs, bm = best
        if prim != bp:
            return prim > bp
        if sec != bs:
            return sec > bs
        d = mask ^ bm
        return bool(d & -d & mask)

    def walk(start: int, mask: int, left: int) -> None:
        nonlocal best
        if left == 0:
            own = search.set_score(mask)
            rest = free & ~mask
            if objective == "tiling":
                if best is not None and own + search.bound(rest) < best[0]:
                    return
                prim, sec = own + search.split(rest), own
            else:
                if best is not None and own < best[0]:
                    return
                prim, sec = own, search.split(rest)
            if key_better(prim, sec, mask):
                best = (prim, sec, mask)
            return
        search.tick()
        for pos in range(start, len(pool) - left + 1):
            walk(pos + 1, mask | (1 << pool[pos]), left - 1)

    walk(0, required, need)
    return best[2] if best is not None else 0
