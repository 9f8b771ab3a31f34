"""Readers of Slurm status output: what the commands say about nodes and jobs.

* default ``sinfo`` table: :func:`parse_sinfo`;
* ``sinfo -R`` (why nodes are down or drained): :func:`parse_sinfo_reasons`;
* ``squeue -O tres-alloc`` (what running jobs hold): :func:`parse_squeue_tres`.

What the daemons log (``slurmd -G`` devices, GRES errors) is read by
:mod:`placer.adapters.slurm.logs`, whose names are re-exported here.

``sinfo``/``squeue`` print most columns at a fixed width and cut longer values without
a mark. The readers here never take a cut value for a whole one: a value that fills its
column exactly is flagged ``truncated`` (the reason of ``sinfo -R``, the TRES list of
``squeue``), and one that cannot be whole (a ``TIMELIMIT`` like ``14-00:00:0``) is an
error. Errors are :class:`placer.exceptions.InvalidInputError` with ``where`` =
``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from placer.adapters.slurm.records import COUNT, CommandOutput, echo_of, fail
from placer.adapters.slurm.values import MEM_UNITS, NO_VALUE, mem_mib, whole
from placer.text.hostlist import expand_hostlist
from placer.text.lines import clip
from placer.adapters.slurm.logs import MAX_CORES, GresLogError, SlurmdGpu, find_gres_errors, parse_slurmd_gpus

__all__ = [
    "SinfoRow",
    "SinfoReason",
    "SqueueTresRow",
    "SqueueTres",
    "SlurmdGpu",
    "GresLogError",
    "SQUEUE_DEFAULT_WIDTH",
    "MAX_CORES",
    "parse_sinfo",
    "parse_sinfo_reasons",
    "parse_squeue_tres",
    "parse_slurmd_gpus",
    "find_gres_errors",
]

SQUEUE_DEFAULT_WIDTH = 20
"""Width of a ``squeue -O`` / ``sinfo -O`` field given without ``:<size>``."""


def _columns(header: str) -> list[tuple[str, int]]:
    """The words of a header line with the column each starts at."""
    return [(m.group(0).upper(), m.start()) for m in re.finditer(r"\S+", header)]


# ---------------------------------------------------------------------------- sinfo


@dataclass(frozen=True)
class SinfoRow:
    """One line of the default ``sinfo`` table (one partition and node state).

    Attributes
    ----------
    line : int
        1-based line in the output.
    partition : str
        ``PARTITION`` without the ``*`` that marks the default partition.
    default : bool
        The name carried the ``*``.
    avail : str
        ``AVAIL``: ``up``, ``down``, ``drain`` or ``inact``.
    timelimit : str
        ``TIMELIMIT`` as written (``infinite``, ``1-00:00:00``, ``30:00``).
    node_count : int
        ``NODES``.
    state : str
        ``STATE`` in sinfo's compact form, suffixes kept (``idle``, ``mix``, ``drain*``;
        ``n/a`` for a partition without nodes).
    nodes : tuple of str
        ``NODELIST`` expanded (``esc8000a-[0-1]`` gives ``esc8000a-0``, ``esc8000a-1``);
        ``()`` for ``n/a``.
    """

    line: int
    partition: str
    default: bool
    avail: str
    timelimit: str
    node_count: int
    state: str
    nodes: tuple[str, ...]


_SINFO_HEADER = ("PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST")
_SINFO_ECHO = echo_of("sinfo")
_PARTITION = re.compile(r"[A-Za-z0-9_.\-]+\*?")
_AVAIL = frozenset(("up", "down", "drain", "inact", "n/a"))
_TIMELIMIT = re.compile(
    r"infinite|n/a|UNLIMITED|(?:[0-9]{1,9}-)?[0-9]{1,2}:[0-9]{2}:[0-9]{2}|[0-9]{1,9}:[0-9]{2}"
)
_NODE_STATE = re.compile(r"[a-z][a-z_]*[*~#!%$@^+\-]*")


def parse_sinfo(text: str, source: str = "<text>") -> list[SinfoRow]:
    """Parse the default ``sinfo`` table: ``PARTITION AVAIL TIMELIMIT NODES STATE NODELIST``.

    The first line that is not blank or an echo of the command (``root@login:~# sinfo``)
    must be that header; every other non-blank line is one row of six whitespace-free
    values. Echo lines may also separate several outputs, each with its header.

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of SinfoRow
        In the order of the output.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a missing or different header (other
        ``-o``/``-O``/``-s`` formats are not read), a row without six values, a value
        that is not of its column's kind (an ``AVAIL`` other than
        up/down/drain/inact, a ``TIMELIMIT`` that is not ``infinite`` or
        ``[D-]HH:MM:SS`` -- sinfo cuts it at 10 characters, so ``14-00:00:00`` comes out
        as ``14-00:00:0``), a bad hostlist, or a ``NODES`` count that differs from the
        number of names in ``NODELIST``; at line 1 when there is no header at all.
    """
    output = CommandOutput(text, source)
    header = f"the default sinfo header {' '.join(_SINFO_HEADER)}"
    rows: list[SinfoRow] = []
    header_seen = False
    expecting_header = True
    for line_no, where, raw in output.numbered():
        words = raw.split()
        if _SINFO_ECHO.fullmatch(raw.strip()):
            expecting_header = True
            continue
        if tuple(word.upper() for word in words) == _SINFO_HEADER:
            header_seen, expecting_header = True, False
            continue
        if expecting_header:
            output.not_header(line_no, header, raw)
        rows.append(_sinfo_row(words, line_no, where))
    if not header_seen:
        output.no_header(header)
    return rows


def _sinfo_row(words: list[str], line: int, where: str) -> SinfoRow:
    if len(words) != len(_SINFO_HEADER):
        fail(where, f"expected {len(_SINFO_HEADER)} values ({' '.join(_SINFO_HEADER)}), "
                     f"got {len(words)}")
    partition, avail, timelimit, count_text, state, nodelist = words
    if not _PARTITION.fullmatch(partition):
        fail(where, f"expected a PARTITION name (a trailing * marks the default), "
                     f"got {partition!r}")
    if avail not in _AVAIL:
        fail(where, f"expected AVAIL up, down, drain or inact, got {avail!r}")
    if not _TIMELIMIT.fullmatch(timelimit):
        fail(where, f"expected TIMELIMIT as infinite or [D-]HH:MM:SS, got {timelimit!r} "
                     "(sinfo cuts it at 10 characters; widen it with -o %.12l)")
    if not COUNT.fullmatch(count_text):
        fail(where, f"expected NODES as a whole number, got {count_text!r}")
    if not _NODE_STATE.fullmatch(state) and not (state == "n/a" and count_text == "0"):
        fail(where, f"expected STATE as a compact node state like idle or drain* (n/a for "
                     f"no nodes), got {state!r}")
    nodes = () if nodelist == "n/a" else tuple(expand_hostlist(nodelist, where))
    if len(nodes) != int(count_text):
        fail(where, f"expected NODES={count_text} names in NODELIST {nodelist!r}, "
                     f"got {len(nodes)}")
    return SinfoRow(
        line=line,
        partition=partition.rstrip("*"),
        default=partition.endswith("*"),
        avail=avail,
        timelimit=timelimit,
        node_count=int(count_text),
        state=state,
        nodes=nodes,
    )


# ------------------------------------------------------------------------- sinfo -R


@dataclass(frozen=True)
class SinfoReason:
    """One line of ``sinfo -R``: why some nodes are down, drained or failing.

    Attributes
    ----------
    line : int
        1-based line in the output.
    reason : str
        ``REASON`` as printed, trailing padding removed. sinfo prints it in a column of
        fixed width (20 by default) and silently cuts longer reasons, so this may be the
        beginning of the reason only; see ``reason_truncated``.
    reason_truncated : bool
        The reason fills its column exactly, so it was probably cut (a reason of exactly
        the column width is flagged too: sinfo leaves no way to tell them apart; and a
        cut that falls just after a space looks like padding, so it is not seen).
        ``scontrol show node`` shows the whole ``Reason=``.
    user : str
        ``USER`` who set the reason (``slurm`` for slurmctld itself).
    user_truncated : bool
        The user name fills its column (9 by default) exactly: it may be cut too.
    timestamp : str
        ``TIMESTAMP`` as written (``2026-04-14T06:39:53``, or ``Unknown``).
    nodes : tuple of str
        ``NODELIST`` expanded.
    """

    line: int
    reason: str
    reason_truncated: bool
    user: str
    user_truncated: bool
    timestamp: str
    nodes: tuple[str, ...]


_REASON_HEADER = ("REASON", "USER", "TIMESTAMP", "NODELIST")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}|Unknown|N/A")


def parse_sinfo_reasons(text: str, source: str = "<text>") -> list[SinfoReason]:
    """Parse ``sinfo -R`` output (``REASON USER TIMESTAMP NODELIST``).

    The reason holds spaces, so the rows are cut at the columns where the header words
    start (sinfo pads every column but the last to a fixed width and puts one space
    after it); the header must be those four words in that order, and it may follow an
    echo of the command. A column value that reaches the next column's separator fills
    its column: the reason and the user are kept as printed and flagged ``truncated``
    (sinfo cuts them without a mark: ``gres/gpu count reported lower than configured``
    is printed as ``gres/gpu count repor``).

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of SinfoReason
        In the order of the output.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a missing or different header, a row
        that cannot be split at the header's columns (no space where a column ends,
        shorter than the ``NODELIST`` column, a user with a space), an empty reason, a
        timestamp that is not ``YYYY-MM-DDTHH:MM:SS`` (or ``Unknown``), or a bad
        hostlist; at line 1 when there is no header at all.
    """
    output = CommandOutput(text, source)
    header = f"the sinfo -R header {' '.join(_REASON_HEADER)}"
    rows: list[SinfoReason] = []
    starts: list[int] | None = None
    header_seen = False
    for line_no, where, raw in output.numbered():
        if _SINFO_ECHO.fullmatch(raw.strip()):
            starts = None
            continue
        columns = _columns(raw)
        if tuple(name for name, _ in columns) == _REASON_HEADER:
            starts = [start for _, start in columns]
            header_seen = True
            continue
        if starts is None:
            output.not_header(line_no, header, raw)
        rows.append(_reason_row(raw, starts, line_no, where))
    if not header_seen:
        output.no_header(header)
    return rows


def _reason_row(raw: str, starts: list[int], line: int, where: str) -> SinfoReason:
    cells: list[str] = []
    filled: list[bool] = []
    for k in range(len(starts) - 1):
        end = starts[k + 1] - 1  # the separating space
        if len(raw) <= starts[k + 1] or raw[end] != " ":
            fail(where, f"expected the row split at the header's columns {starts} "
                         f"({' '.join(_REASON_HEADER)}), got {clip(raw.strip())!r}")
        cell = raw[starts[k]:end]
        cells.append(cell.strip())
        filled.append(bool(cell) and not cell[-1].isspace())
    if starts[0] > 0 and raw[:starts[0]].strip():
        fail(where, f"expected nothing before the REASON column, got {clip(raw.strip())!r}")
    reason, user, timestamp = cells
    nodelist = raw[starts[-1]:].strip()
    if not reason:
        fail(where, "expected a REASON, got an empty column")
    if not user or len(user.split()) != 1:
        fail(where, f"expected USER as one word in its column, got {user!r} (the row does "
                     "not line up with the header)")
    if not _TIMESTAMP.fullmatch(timestamp):
        fail(where, f"expected TIMESTAMP as YYYY-MM-DDTHH:MM:SS, got {timestamp!r} (the row "
                     "does not line up with the header?)")
    if not nodelist or len(nodelist.split()) != 1:
        fail(where, f"expected NODELIST as one hostlist, got {nodelist!r}")
    return SinfoReason(
        line=line,
        reason=reason,
        reason_truncated=filled[0],
        user=user,
        user_truncated=filled[1],
        timestamp=timestamp,
        nodes=tuple(expand_hostlist(nodelist, where)),
    )


# ------------------------------------------------------------------ squeue -O tres-alloc


@dataclass(frozen=True)
class SqueueTresRow:
    """One job line of ``squeue -O ...tres-alloc...`` output.

    Attributes
    ----------
    line : int
        1-based line in the output.
    text : str
        The ``TRES_ALLOC`` value exactly as printed (trailing padding removed).
    truncated : bool
        squeue cut the value at its column width: it ends with ``,`` or in the middle of
        an item, or it fills the column exactly. Items after the cut are missing.
    tres : mapping of str to str
        The items known to be whole (``cpu`` -> ``"120"``, ``mem`` -> ``"515456M"``,
        ``gres/gpu:a100`` -> ``"1"``); when ``truncated``, the last item before the cut
        is left out unless a ``,`` follows it.
    columns : mapping of str to str
        Every column of the line by header name (``TRES_ALLOC`` included), as printed.
    cpus : int or None
        ``cpu=``; ``None`` when not shown.
    memory_mib : int or None
        ``mem=`` in MiB (rounded up); ``None`` when not shown.
    node_count : int or None
        ``node=``; ``None`` when not shown.
    gpus : int or None
        GPUs held: ``gres/gpu=``, which already counts the typed ``gres/gpu:<type>=``
        items (Slurm lists both, so they are not added up), else the sum of the typed
        items, else 0. ``None`` when the value is truncated and ``gres/gpu=`` is not
        among the whole items: the GPUs may have been cut off.
    gpu_types : mapping of str to int
        The typed items: type -> count.
    """

    line: int
    text: str
    truncated: bool
    tres: Mapping[str, str]
    columns: Mapping[str, str]
    cpus: int | None
    memory_mib: int | None
    node_count: int | None
    gpus: int | None
    gpu_types: Mapping[str, int]


@dataclass(frozen=True)
class SqueueTres:
    """What :func:`parse_squeue_tres` read.

    Attributes
    ----------
    rows : tuple of SqueueTresRow
        The job lines, in order.
    elided : tuple of int
        Lines where whoever copied the output left rows out (``<SNIP>``, ``...``,
        ``[...]``): rows are missing there.
    """

    rows: tuple[SqueueTresRow, ...]
    elided: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        """No row is truncated and no rows were left out."""
        return not self.elided and not any(row.truncated for row in self.rows)


_SQUEUE_ECHO = echo_of("squeue")
_FORMAT_ARG = re.compile(r"""(?:^|\s)(?:-O|--Format)(?:=|\s*)(?:"([^"]*)"|'([^']*)'|(\S+))""")
_FIELD_SPEC = re.compile(r"([A-Za-z_\-]+)(?::(\.?)([0-9]{0,9}).*)?")
_ELISION = re.compile(r"<\s*snip\s*>|\[\s*(?:snip|\.\.\.|…)\s*\]|\.\.\.|…", re.IGNORECASE)
_TRES_ITEM = re.compile(
    r"([a-z][a-z_]*(?:/[^=,\s]+)?)="
    r"([0-9]{1,18}(?:\.[0-9]{1,9})?[KMGTPE]?)"
)
_TRES_MEM_UNITS = {**MEM_UNITS, "E": 1024**4}


def parse_squeue_tres(text: str, source: str = "<text>") -> SqueueTres:
    """Parse ``squeue -O`` output with a ``tres-alloc`` column (header ``TRES_ALLOC``).

    The header is the first line that is not blank or an echo of the command; other
    columns may be present (``-O jobid,tres-alloc``). ``squeue -O`` pads each field to
    its width with no separator, so lines are cut where the header words start. An echo
    line (``$ squeue -t R -O tres-alloc:100``) starts a new output and gives the column
    widths: ``field:<size>``, else 20. Lines of only ``<SNIP>``, ``...`` or ``[...]``
    mark rows the copier left out (see :attr:`SqueueTres.elided`).

    squeue cuts a value at its width without a mark (``cpu=120,mem=515456M,`` is a
    20-character cut). Such values are not taken as whole: a value that ends with a
    comma or inside an item, or that fills its column exactly, is flagged ``truncated``
    and only its whole items are kept. The width of the last column comes from the echo
    line; without one it is taken to be the default 20, so a value of exactly 20
    characters is flagged.

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    SqueueTres
        The rows and the lines where rows were left out.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a header without ``TRES_ALLOC``, an
        item that is not ``name=amount`` before the last one, an empty item, an item
        given twice, a value that ends inside an item though it is shorter than its
        column (so it was not cut: it is malformed), a ``mem=`` that is not a size, or
        typed ``gres/gpu:<type>`` counts above ``gres/gpu``; at line 1 when there is
        no header at all.
    """
    output = CommandOutput(text, source)
    expected = "an squeue -O header with TRES_ALLOC"
    rows: list[SqueueTresRow] = []
    elided: list[int] = []
    header: list[tuple[str, int]] | None = None
    widths: list[int | None] | None = None
    seen_header = False
    for line_no, where, raw in output.numbered():
        stripped = raw.strip()
        if _SQUEUE_ECHO.fullmatch(stripped):
            header, widths = None, _echo_widths(stripped)
            continue
        if _ELISION.fullmatch(stripped):
            elided.append(line_no)
            continue
        columns = _columns(raw)
        if "TRES_ALLOC" in (name for name, _ in columns) and (
            header is None or [name for name, _ in columns] == [name for name, _ in header]
        ):
            header, seen_header = columns, True
            if widths is not None and len(widths) != len(columns):
                widths = None
            continue
        if header is None:
            output.not_header(line_no, expected, raw)
        rows.append(_squeue_row(raw, header, widths, line_no, where))
    if not seen_header:
        output.no_header(expected)
    return SqueueTres(tuple(rows), tuple(elided))


def _echo_widths(command: str) -> list[int | None] | None:
    """Field widths of the ``-O`` list of an echoed squeue command (None for unlimited)."""
    match = _FORMAT_ARG.search(command)
    if match is None:
        return None
    spec = next(group for group in match.groups() if group is not None)
    widths: list[int | None] = []
    for field in spec.split(","):
        parsed = _FIELD_SPEC.fullmatch(field)
        if parsed is None:
            return None
        size = parsed.group(3)
        if not size:
            widths.append(SQUEUE_DEFAULT_WIDTH)
        else:
            widths.append(int(size) or None)
    return widths


def _squeue_row(
    raw: str,
    header: list[tuple[str, int]],
    widths: list[int | None] | None,
    line: int,
    where: str,
) -> SqueueTresRow:
    if header[0][1] > 0 and raw[:header[0][1]].strip():
        fail(where, f"expected nothing before the {header[0][0]} column, "
                     f"got {clip(raw.strip())!r}")
    columns: dict[str, str] = {}
    tres_at = 0
    width: int | None = SQUEUE_DEFAULT_WIDTH
    width_known = False
    for k, (name, start) in enumerate(header):
        end = header[k + 1][1] if k + 1 < len(header) else len(raw)
        cell = raw[start:end].rstrip()
        if name == "TRES_ALLOC":
            tres_at = k
            if widths is not None:
                width, width_known = widths[k], True
            elif k + 1 < len(header):
                width, width_known = end - start, True
        columns[name] = cell.strip()
    value = columns["TRES_ALLOC"]
    cell = raw[header[tres_at][1]:].rstrip() if tres_at + 1 == len(header) else value
    fills = width is not None and (len(cell) >= width if width_known else len(cell) == width)

    tres: dict[str, str] = {}
    truncated = False
    items = [] if value in NO_VALUE else value.split(",")
    for i, item in enumerate(items):
        last = i == len(items) - 1
        if last and item == "" and i > 0:
            truncated = True  # cut right after a comma: the items before it are whole
            break
        match = _TRES_ITEM.fullmatch(item)
        if match is None:
            if last and (fills or not width_known):
                truncated = True
                break
            if last:
                shorter = ("its column has no width limit" if width is None else
                           f"it is shorter than the column width {width}")
                fail(where, f"expected TRES_ALLOC as name=amount,... , got {value!r}: it "
                             f"ends inside {item!r} but {shorter}, so it was not cut")
            fail(where, f"expected TRES_ALLOC as name=amount,... , got {item!r} in "
                         f"{clip(value)!r}")
        if match.group(1) in tres:
            fail(where, f"expected each TRES once in TRES_ALLOC, got {match.group(1)} again")
        if last and fills:
            truncated = True  # the last amount may have lost digits
            break
        tres[match.group(1)] = match.group(2)

    gpu_types: dict[str, int] = {}
    for name, amount in tres.items():
        if name.startswith("gres/gpu:"):
            gpu_types[name[len("gres/gpu:"):]] = whole(amount, where, f"{name}=")
    gpus: int | None
    if "gres/gpu" in tres:
        gpus = whole(tres["gres/gpu"], where, "gres/gpu=")
        if sum(gpu_types.values()) > gpus:
            fail(where, f"expected the typed gres/gpu:<type> counts to be part of "
                         f"gres/gpu={gpus}, got {sum(gpu_types.values())} typed GPUs")
    elif truncated:
        gpus = None
    else:
        gpus = sum(gpu_types.values())
    memory = tres.get("mem")
    return SqueueTresRow(
        line=line,
        text=value,
        truncated=truncated,
        tres=tres,
        columns=columns,
        cpus=whole(tres["cpu"], where, "cpu=") if "cpu" in tres else None,
        memory_mib=None if memory is None else mem_mib(memory, where, "mem=", _TRES_MEM_UNITS),
        node_count=whole(tres["node"], where, "node=") if "node" in tres else None,
        gpus=gpus,
        gpu_types=gpu_types,
    )

