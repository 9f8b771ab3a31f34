"""Readers of Slurm status output: what the commands and daemons say about nodes and jobs.

* default ``sinfo`` table: :func:`parse_sinfo`;
* ``sinfo -R`` (why nodes are down or drained): :func:`parse_sinfo_reasons`;
* ``squeue -O tres-alloc`` (what running jobs hold): :func:`parse_squeue_tres`;
* the ``GRES[gpu] ...`` device lines of a slurmd log or of ``slurmd -G`` (what
  ``AutoDetect`` found): :func:`parse_slurmd_gpus`;
* the GRES errors of a slurmctld (or slurmd) log: :func:`find_gres_errors`.

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
from typing import Mapping, NoReturn

from placer.adapters.slurm.values import MEM_UNITS, NO_VALUE, mem_mib, number_list, whole
from placer.exceptions import InvalidInputError
from placer.text.hostlist import expand_hostlist
from placer.text.lines import TextLines, clip

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

MAX_CORES = 65_536
"""Largest core count (the ``N`` of ``Cores(N):``) :func:`parse_slurmd_gpus` accepts."""


class _Output(TextLines):
    """The lines of a command's output or of a log, errors at ``<source>:<line>``."""

    def not_header(self, line: int, header: str, raw: str) -> NoReturn:
        """Fail at ``line`` (text ``raw``) where ``header`` was expected."""
        self.fail(line, f"expected {header}, got {clip(raw.strip())!r}")

    def no_header(self, header: str) -> NoReturn:
        """Fail at line 1: the output has no ``header`` at all."""
        self.fail(1, f"expected {header}, got nothing")


def _fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)


def _echo(command: str) -> re.Pattern[str]:
    """A line echoing ``command`` (``$ sinfo -R``, ``root@host:~# sinfo``)."""
    return re.compile(rf"(?:\S*[$#>%]\s*)?{command}(?:\s.*)?")


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
_SINFO_ECHO = _echo("sinfo")
_PARTITION = re.compile(r"[A-Za-z0-9_.\-]+\*?")
_AVAIL = frozenset(("up", "down", "drain", "inact", "n/a"))
_TIMELIMIT = re.compile(
    r"infinite|n/a|UNLIMITED|(?:[0-9]{1,9}-)?[0-9]{1,2}:[0-9]{2}:[0-9]{2}|[0-9]{1,9}:[0-9]{2}"
)
_NODE_STATE = re.compile(r"[a-z][a-z_]*[*~#!%$@^+\-]*")
_COUNT = re.compile(r"[0-9]{1,9}")


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
    output = _Output(text, source)
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
        _fail(where, f"expected {len(_SINFO_HEADER)} values ({' '.join(_SINFO_HEADER)}), "
                     f"got {len(words)}")
    partition, avail, timelimit, count_text, state, nodelist = words
    if not _PARTITION.fullmatch(partition):
        _fail(where, f"expected a PARTITION name (a trailing * marks the default), "
                     f"got {partition!r}")
    if avail not in _AVAIL:
        _fail(where, f"expected AVAIL up, down, drain or inact, got {avail!r}")
    if not _TIMELIMIT.fullmatch(timelimit):
        _fail(where, f"expected TIMELIMIT as infinite or [D-]HH:MM:SS, got {timelimit!r} "
                     "(sinfo cuts it at 10 characters; widen it with -o %.12l)")
    if not _COUNT.fullmatch(count_text):
        _fail(where, f"expected NODES as a whole number, got {count_text!r}")
    if not _NODE_STATE.fullmatch(state) and not (state == "n/a" and count_text == "0"):
        _fail(where, f"expected STATE as a compact node state like idle or drain* (n/a for "
                     f"no nodes), got {state!r}")
    nodes = () if nodelist == "n/a" else tuple(expand_hostlist(nodelist, where))
    if len(nodes) != int(count_text):
        _fail(where, f"expected NODES={count_text} names in NODELIST {nodelist!r}, "
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
    output = _Output(text, source)
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
            _fail(where, f"expected the row split at the header's columns {starts} "
                         f"({' '.join(_REASON_HEADER)}), got {clip(raw.strip())!r}")
        cell = raw[starts[k]:end]
        cells.append(cell.strip())
        filled.append(bool(cell) and not cell[-1].isspace())
    if starts[0] > 0 and raw[:starts[0]].strip():
        _fail(where, f"expected nothing before the REASON column, got {clip(raw.strip())!r}")
    reason, user, timestamp = cells
    nodelist = raw[starts[-1]:].strip()
    if not reason:
        _fail(where, "expected a REASON, got an empty column")
    if not user or len(user.split()) != 1:
        _fail(where, f"expected USER as one word in its column, got {user!r} (the row does "
                     "not line up with the header)")
    if not _TIMESTAMP.fullmatch(timestamp):
        _fail(where, f"expected TIMESTAMP as YYYY-MM-DDTHH:MM:SS, got {timestamp!r} (the row "
                     "does not line up with the header?)")
    if not nodelist or len(nodelist.split()) != 1:
        _fail(where, f"expected NODELIST as one hostlist, got {nodelist!r}")
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


_SQUEUE_ECHO = _echo("squeue")
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
    output = _Output(text, source)
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
        _fail(where, f"expected nothing before the {header[0][0]} column, "
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
                _fail(where, f"expected TRES_ALLOC as name=amount,... , got {value!r}: it "
                             f"ends inside {item!r} but {shorter}, so it was not cut")
            _fail(where, f"expected TRES_ALLOC as name=amount,... , got {item!r} in "
                         f"{clip(value)!r}")
        if match.group(1) in tres:
            _fail(where, f"expected each TRES once in TRES_ALLOC, got {match.group(1)} again")
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
            _fail(where, f"expected the typed gres/gpu:<type> counts to be part of "
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


# ----------------------------------------------------------------- slurmd GRES devices


@dataclass(frozen=True)
class SlurmdGpu:
    """One GPU (or MIG device) slurmd listed in its log or in ``slurmd -G`` output.

    Attributes
    ----------
    line : int
        1-based line in the log.
    type : str or None
        ``Type:``; ``None`` for ``(null)`` (what AutoDetect gives a MIG device whose
        profile matched no configured type).
    count : int
        ``Count:``.
    core_count : int or None
        The ``N`` of ``Cores(N):`` (``CoreCnt=``): the size of the core bitmap that
        ``cores`` indexes (the node's cores as slurmd counted them).
    cores : tuple of int or None
        The cores the device is close to (``0-63`` expanded); ``None`` for ``(null)`` or
        when not shown.
    links : tuple of int or None
        ``Links:``: ``-1`` at the device's own position, else the link count to the
        device at that position (0 = none; MIG peers are 0); ``None`` for ``(null)``.
    flags : tuple of str
        ``Flags:`` (``HAS_FILE``, ``ENV_NVML``, ...).
    files : tuple of str
        ``File:`` split at its commas (a MIG device lists its parent ``/dev/nvidiaN``
        and its ``/dev/nvidia-caps/...`` files); ``()`` for ``(null)``.
    unique_id : str or None
        ``UniqueId:`` (``MIG-GPU-<uuid>/<gi>/<ci>`` or ``MIG-<uuid>`` for MIG).
    parent_uuid : str or None
        For ``MIG-GPU-<uuid>/<gi>/<ci>``: ``GPU-<uuid>``, the GPU the device is part of.
    gpu_instance : int or None
        For ``MIG-GPU-<uuid>/<gi>/<ci>``: the GPU instance id ``gi``.
    compute_instance : int or None
        For ``MIG-GPU-<uuid>/<gi>/<ci>``: the compute instance id ``ci``.
    heading : str or None
        The nearest log message above the line that is not a device line (slurmd
        prints device lists under headings such as ``WARNING: The following
        autodetected GPUs are being ignored:``); ``None`` when the log starts with it.
    ignored : bool
        ``heading`` says the devices below it are ignored or discarded: Slurm does not
        use them.
    """

    line: int
    type: str | None
    count: int
    core_count: int | None
    cores: tuple[int, ...] | None
    links: tuple[int, ...] | None
    flags: tuple[str, ...]
    files: tuple[str, ...]
    unique_id: str | None
    parent_uuid: str | None
    gpu_instance: int | None
    compute_instance: int | None
    heading: str | None
    ignored: bool

    @property
    def is_mig(self) -> bool:
        """The device is a MIG slice (a ``MIG-`` unique id or ``nvidia-caps`` files)."""
        return (self.unique_id or "").startswith("MIG-") or any(
            "/nvidia-caps/" in path for path in self.files
        )


_GRES_LINE = re.compile(r"(?<![A-Za-z_])GRES\[")
_GRES_NAME_LINE = re.compile(r"(?:^|\s)Gres Name=")
_TIMESTAMP_PREFIX = re.compile(r"^\s*\[[^\]]*\]")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_MIG_LEGACY = re.compile(rf"MIG-GPU-({_UUID})/([0-9]{{1,9}})/([0-9]{{1,9}})")
_MIG_NEW = re.compile(rf"MIG-{_UUID}")
_LINK = re.compile(r"-1|[0-9]{1,3}")
_CORE_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")
_IGNORED = re.compile(r"being ignored|discarding|ignoring it", re.IGNORECASE)
_GRES_FIELDS = ("Type", "Count", "Cores", "Links", "Flags", "File")


def parse_slurmd_gpus(text: str, source: str = "<text>") -> list[SlurmdGpu]:
    """Read the GPU device lines of a slurmd log (``AutoDetect=nvml``) or ``slurmd -G``.

    Two line forms are read, wherever they start on the line (after a ``[timestamp]``
    or ``slurmd:`` prefix):

    * ``GRES[gpu] Type:<t> Count:<n> Cores(<N>):<ranges>  Links:<v> Flags:<f>
      File:<a>,<b> UniqueId:<id>`` -- the fields in this order, ``UniqueId:`` optional
      (older Slurm), ``(null)`` for an unset value;
    * ``Gres Name=gpu Type=<t> Count=<n> [Index=..] [ID=..] [File=..] [Cores=..]
      [CoreCnt=..] [Links=..] [Flags=..]``.

    Lines of other GRES (``GRES[mps]``, ``Gres Name=shard``) are checked the same way
    and skipped, ``GRES_PARSABLE[...]`` lines are skipped; all other lines are log
    messages and only serve as ``heading``. A log
    lists a device again under each heading that concerns it (system list, matched,
    final), so the same device may come back on several rows.

    A log copied in part (the stored copy of deepops#1214 keeps 4 of the MIG devices
    whose ``Links:`` vectors have 7 positions) gives the rows that are there; a line cut
    inside gives an error at that line.

    Parameters
    ----------
    text : str
        The log.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of SlurmdGpu
        One per GPU device line, in log order; ``[]`` when the log lists none (what
        slurmd prints when AutoDetect found no GPU).

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a device line whose fields are missing
        or out of order (a line cut short ends before ``File:``), an unknown word, a
        count or core count that is not a whole number (core count at most
        :data:`MAX_CORES`), a core range beyond ``Cores(N)``, a ``Links:`` value that is
        not a comma list of integers with at most one ``-1``, an empty ``File:`` element,
        a ``UniqueId:`` starting ``MIG-`` that is not ``MIG-GPU-<uuid>/<gi>/<ci>`` or
        ``MIG-<uuid>``, or a MIG device (``nvidia-caps`` files) without ``UniqueId:``
        (the line ends after ``File:``: cut).
    """
    gpus: list[SlurmdGpu] = []
    heading: str | None = None
    for line_no, where, raw in _Output(text, source).numbered():
        found = _GRES_LINE.search(raw)
        if found is not None:
            fields = _gres_bracket_fields(raw[found.start():].rstrip(), where)
        else:
            found = _GRES_NAME_LINE.search(raw)
            if found is None:
                if "GRES_PARSABLE[" in raw:  # test39.18's form of the same records
                    continue
                message = _TIMESTAMP_PREFIX.sub("", raw).strip()
                if message:
                    heading = message
                continue
            fields = _gres_name_fields(raw[found.end() - len("Name="):].rstrip(), where)
        if fields["name"] != "gpu":
            continue
        gpus.append(_slurmd_gpu(fields, line_no, heading, where))
    return gpus


def _gres_bracket_fields(rest: str, where: str) -> dict[str, str | None]:
    """``GRES[gpu] Type:... File:... UniqueId:...`` into raw field values."""
    match = re.match(r"GRES\[([^\]\s]*)\]", rest)
    if match is None or not match.group(1):
        _fail(where, f"expected GRES[<name>] Type:..., got {clip(rest)!r}")
    fields: dict[str, str | None] = {"name": match.group(1).lower()}
    words = rest[match.end():].split()
    position = 0
    for key in _GRES_FIELDS:
        previous = f"after {_GRES_FIELDS[_GRES_FIELDS.index(key) - 1]}:" if key != "Type" \
            else f"after GRES[{match.group(1)}]"
        if position >= len(words):
            _fail(where, f"expected {key}: {previous}, got the end of the line (cut short?)")
        word = words[position]
        if key == "Cores":
            cores = re.fullmatch(r"Cores\(([^()]*)\):(.*)", word)
            if cores is None:
                _fail(where, f"expected Cores(<N>):<ranges> {previous}, got {clip(word)!r}")
            fields["core_count"], fields["cores"] = cores.group(1), cores.group(2)
        else:
            if not word.startswith(f"{key}:"):
                _fail(where, f"expected {key}: {previous}, got {clip(word)!r}")
            fields[key.lower()] = word[len(key) + 1:]
        position += 1
    rest_words = words[position:]
    if rest_words:
        if not rest_words[0].startswith("UniqueId:"):
            _fail(where, f"expected UniqueId: or the end of the line after File:, "
                         f"got {clip(rest_words[0])!r}")
        if len(rest_words) > 1:
            _fail(where, f"expected the end of the line after UniqueId:, "
                         f"got {clip(rest_words[1])!r}")
        fields["uniqueid"] = rest_words[0][len("UniqueId:"):]
    elif "/nvidia-caps/" in (fields.get("file") or ""):
        _fail(where, "expected UniqueId: after File: for a MIG device (nvidia-caps files), "
                     "got the end of the line (cut short?)")
    return fields


_NAME_KEYS = {"name": "name", "type": "type", "count": "count", "index": None, "id": None,
              "file": "file", "cores": "cores", "corecnt": "core_count", "links": "links",
              "flags": "flags", "uniqueid": "uniqueid"}


def _gres_name_fields(rest: str, where: str) -> dict[str, str | None]:
    """``Name=gpu Type=a100 Count=1 Index=0 ID=... File=... Links=...`` into raw values."""
    fields: dict[str, str | None] = {}
    seen: set[str] = set()
    for word in rest.split():
        if word == "(null)":  # Links printed as a bare %s when unset
            continue
        key, sep, value = word.partition("=")
        canonical = key.lower()
        if not sep or canonical not in _NAME_KEYS:
            _fail(where, f"expected Key=Value words ({', '.join(sorted(_NAME_KEYS))}) after "
                         f"Gres, got {clip(word)!r}")
        if canonical in seen:
            _fail(where, f"expected each key once, got {key}= again")
        seen.add(canonical)
        target = _NAME_KEYS[canonical]
        if target is not None:
            fields[target] = value
    if not fields.get("name"):
        _fail(where, "expected Gres Name=<name>, got an empty name")
    fields["name"] = (fields["name"] or "").lower()
    if "count" not in fields:
        _fail(where, "expected Count= after Gres Name= (cut short?)")
    return fields


def _null(value: str | None) -> str | None:
    return None if value is None or value in ("(null)", "") else value


def _slurmd_gpu(
    fields: dict[str, str | None], line: int, heading: str | None, where: str
) -> SlurmdGpu:
    count_text = fields.get("count") or ""
    if not _COUNT.fullmatch(count_text):
        _fail(where, f"expected Count as a whole number, got {count_text!r}")
    core_count: int | None = None
    cc_text = _null(fields.get("core_count"))
    if cc_text is not None:
        if not _COUNT.fullmatch(cc_text) or int(cc_text) > MAX_CORES:
            _fail(where, f"expected the core count as a whole number up to {MAX_CORES}, "
                         f"got {cc_text!r}")
        core_count = int(cc_text)
    cores = _cpu_ids(_null(fields.get("cores")), core_count, where)

    links: tuple[int, ...] | None = None
    links_text = _null(fields.get("links"))
    if links_text is not None:
        parts = links_text.split(",")
        if not all(_LINK.fullmatch(part) for part in parts):
            _fail(where, f"expected Links as comma-separated integers (-1 for the device "
                         f"itself), got {links_text!r}")
        links = tuple(int(part) for part in parts)
        if links.count(-1) > 1:
            _fail(where, f"expected at most one -1 (the device itself) in Links, "
                         f"got {links_text!r}")

    flags_text = _null(fields.get("flags"))
    flags = () if flags_text is None else tuple(flags_text.split(","))
    if any(not flag for flag in flags):
        _fail(where, f"expected Flags as a comma list, got {flags_text!r}")

    files_text = _null(fields.get("file"))
    files: tuple[str, ...] = () if files_text is None else tuple(_split_files(files_text))
    if any(not path for path in files):
        _fail(where, f"expected File as comma-separated paths, got {files_text!r} (an empty "
                     "element: cut short?)")

    unique_id = _null(fields.get("uniqueid"))
    parent = gi = ci = None
    if unique_id is not None and unique_id.startswith("MIG-"):
        legacy = _MIG_LEGACY.fullmatch(unique_id)
        if legacy is not None:
            parent, gi, ci = f"GPU-{legacy.group(1)}", int(legacy.group(2)), int(legacy.group(3))
        elif not _MIG_NEW.fullmatch(unique_id):
            _fail(where, f"expected UniqueId as MIG-GPU-<uuid>/<gi>/<ci> or MIG-<uuid>, "
                         f"got {unique_id!r} (cut short?)")
    type_text = _null(fields.get("type"))
    return SlurmdGpu(
        line=line,
        type=type_text,
        count=int(count_text),
        core_count=core_count,
        cores=cores,
        links=links,
        flags=flags,
        files=files,
        unique_id=unique_id,
        parent_uuid=parent,
        gpu_instance=gi,
        compute_instance=ci,
        heading=heading,
        ignored=heading is not None and _IGNORED.search(heading) is not None,
    )


def _cpu_ids(text: str | None, limit: int | None, where: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    below = f"below Cores({limit})" if limit is not None else f"below {MAX_CORES}"
    return tuple(number_list(
        text, where, MAX_CORES if limit is None else limit,
        f"expected the cores as ranges like 0-63,128-191, got {text!r}",
        lambda element: f"expected the core range {element!r} to run upwards",
        lambda hi: f"expected core ids {below}, got {hi} in {text!r}",
        _CORE_RANGE,
    ))


def _split_files(text: str) -> list[str]:
    """Split at the commas outside ``[...]`` (``/dev/nvidia[0,2]`` stays whole)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


# ------------------------------------------------------------------- GRES log errors


@dataclass(frozen=True)
class GresLogError:
    """An error or fatal line of a Slurm daemon log that concerns GRES/GPUs.

    Attributes
    ----------
    line : int
        1-based line in the log.
    where : str
        ``"<source>:<line>"``, for showing to a user.
    timestamp : str or None
        The ``[...]`` prefix without brackets, ``None`` when the line has none.
    level : str
        ``error`` or ``fatal``.
    function : str or None
        The Slurm function that logged it (``_node_config_validate``), when shown.
    message : str
        The text after ``error:``/``fatal:``.
    gres : str or None
        The GRES named as ``gres/<name>`` (``gpu``).
    node : str or None
        The node named in the message (``on node node01``, ``node=node01``).
    core_spec : str or None
        For ``invalid GRES core specification (<spec>)``: the ``Cores=``/``CPUs=`` value
        slurmctld rejected.
    hint : str or None
        What the message usually means, for the messages this module knows.
    """

    line: int
    where: str
    timestamp: str | None
    level: str
    function: str | None
    message: str
    gres: str | None
    node: str | None
    core_spec: str | None
    hint: str | None


_LEVEL = re.compile(r"(?:^|\s)(error|fatal):\s*(.*)$", re.IGNORECASE)
_ABOUT_GRES = re.compile(r"\b(?:gres|gpus?|nvml|rsmi)\b", re.IGNORECASE)
_FUNCTION = re.compile(r"(_?[A-Za-z][A-Za-z0-9_]*):\s")
_GRES_NAME = re.compile(r"\bgres/([A-Za-z][A-Za-z0-9_]*)")
_NODE_IN = re.compile(r"\bon node\s+([A-Za-z0-9_.\-]+)|\bnode=([A-Za-z0-9_.\-]+)"
                      r"|\b[Nn]ode\s+([A-Za-z0-9_.\-]*[0-9][A-Za-z0-9_.\-]*)")
_CORE_SPEC = re.compile(r"invalid GRES core specification\s*\(([^()]*)\)\s+on node\s+"
                        r"([A-Za-z0-9_.\-]+)")
_CORE_SPEC_START = re.compile(r"invalid GRES core specification", re.IGNORECASE)
_HINTS = (
    (_CORE_SPEC_START,
     "gres.conf Cores= (or its deprecated alias CPUs=) names cores the node does not "
     "have: it takes core ids (0 to the node's cores - 1), not logical CPU ids such as "
     "hyperthread siblings; slurmctld does not accept the GPU record as configured"),
    (re.compile(r"count (?:reported|too) low", re.IGNORECASE),
     "slurmd found fewer GPUs than slurm.conf Gres= says (AutoDetect found none, or a "
     "device is missing); slurmctld drains the node"),
    (re.compile(r"autodetect nvml functionality", re.IGNORECASE),
     "this Slurm was built without NVML; AutoDetect=nvml cannot work (list the GPUs in "
     "gres.conf or use a build with NVML)"),
)


def find_gres_errors(text: str, source: str = "<text>") -> list[GresLogError]:
    """Find the ``error:``/``fatal:`` lines of a Slurm log that concern GRES or GPUs.

    A line counts when it has ``error:`` or ``fatal:`` and its message has the word
    ``gres``, ``gpu``, ``gpus``, ``nvml`` or ``rsmi`` (any case; ``gres/gpu`` and
    ``gres.conf`` count, a node named ``gpu07`` does not). They tell why a node's GPUs
    are not registered, e.g. ``error: _node_config_validate: gres/gpu: invalid GRES
    core specification (48-63,176-191) on node node01``. Every such line is returned,
    repeats included (slurmctld logs the error once per record and registration).
    Other lines are not read.

    Parameters
    ----------
    text : str
        The log (slurmctld or slurmd; ``[timestamp]``, syslog or bare lines).
    source : str
        Name used in error locations and in :attr:`GresLogError.where`.

    Returns
    -------
    list of GresLogError
        In log order; ``[]`` when there is none.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for an ``invalid GRES core
        specification`` line that does not go on to ``(<spec>) on node <name>`` (the
        line was cut).
    """
    found: list[GresLogError] = []
    for line_no, where, raw in _Output(text, source).numbered():
        level_match = _LEVEL.search(raw)
        if level_match is None:
            continue
        message = level_match.group(2).strip()
        if not _ABOUT_GRES.search(message):
            continue
        stamp = re.match(r"\s*\[([^\]]*)\]", raw)
        function = _FUNCTION.match(message)
        gres = _GRES_NAME.search(message)
        node_match = _NODE_IN.search(message)
        node = None
        if node_match is not None:
            node = next(group for group in node_match.groups() if group is not None)
            node = node.rstrip(".-") or None
        core_spec = None
        if _CORE_SPEC_START.search(message):
            spec = _CORE_SPEC.search(message)
            if spec is None:
                _fail(where, "expected 'invalid GRES core specification (<spec>) on node "
                             f"<name>', got {clip(message, 100)!r} (cut short?)")
            core_spec, node = spec.group(1), spec.group(2)
        hint = next((advice for pattern, advice in _HINTS if pattern.search(message)), None)
        found.append(
            GresLogError(
                line=line_no,
                where=where,
                timestamp=None if stamp is None else stamp.group(1),
                level=level_match.group(1).lower(),
                function=None if function is None else function.group(1),
                message=message,
                gres=None if gres is None else gres.group(1),
                node=node,
                core_spec=core_spec,
                hint=hint,
            )
        )
    return found
