"""Parsers for the MIG tables of ``nvidia-smi mig -lgip/-lgi/-lci``.

``nvidia-smi mig -lgip`` (GPU instance profiles), ``mig -lgi`` (GPU instances) and
``mig -lci`` (compute instances) print a boxed table::

    +-----------------------------------------------------------------------------+
    | GPU instance profiles:                                                      |
    | GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
    |                              Free/Total   GiB              CE    JPEG  OFA  |
    |=============================================================================|
    |   0  MIG 1g.10gb       19     0/7        9.50       No     14     0     0   |
    |                                                             1     0     0   |
    +-----------------------------------------------------------------------------+

Every row of ``-lgip`` takes two physical lines (the second holds CE, JPEG and OFA), rows
of ``-lgi``/``-lci`` one; each row is closed by a ``+---+`` border. The parsers read the
cells by whitespace, not by column position (the table width differs between drivers),
check the title and the header words (so that output of another command, or of a driver
whose columns differ, is refused rather than misread), and check the rows:

* ``Free/Total`` is the number of instances of that profile that can still be created /
  could be created on an empty GPU (``0/7`` on a fully partitioned GPU) - current
  availability, not capability;
* the memory in a profile name is not its memory (``1g.23gb`` has 20.50 GiB on B200):
  :attr:`MigProfile.memory_gib` is the ``Memory`` column;
* ``Start:Size`` placements are in memory slices (``-lgi``) or in compute slices of the
  GPU instance (``-lci``); instances on one GPU (GPU instance) may not overlap, and GI/CI
  ids are unique per GPU (GPU instance) but need not be contiguous or ordered.

A real table always ends with its ``+---+`` border. Text that ends right after a complete
row without it is a cut copy; by default that is an error at the line where the border
should be, and with ``allow_cut=True`` the complete rows are returned. A row cut in its
middle (the first line of a ``-lgip`` row without its second, a line without its closing
``|``) is always an error. ``No GPU instances found`` / ``No compute instances found`` /
``No MIG-enabled devices found`` (optionally followed by ``: <reason>``) as the only line
mean no rows; other messages of ``nvidia-smi`` (``Failed to display compute instances:
Insufficient Permissions``, ``NVIDIA-SMI has failed ...``) are errors.

Everything that does not parse raises :class:`placer.exceptions.InvalidInputError` with
``where`` = ``"<source>:<line>"`` (1-based; the line after the last one when the text
ends too early).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Sequence, TypeVar

from placer.exceptions import InvalidInputError
from placer.text.lines import TextLines
from placer.adapters.nvidia_smi.output import (
    FAILURE_LINE, MIG_PROFILE_NAME, NvidiaSmiOutput, PathLike, parse_file, record_once, show_value,
)

__all__ = [
    "MigProfile", "GpuInstance", "ComputeInstance", "parse_mig_profiles", "parse_gpu_instances",
    "parse_compute_instances", "parse_mig_profiles_file", "parse_gpu_instances_file", "parse_compute_instances_file",
]

_NONE_FOUND = re.compile(r"No (?:GPU instances|compute instances|MIG-enabled devices) found\.?(?::.*)?")

_BORDER = re.compile(r"\+-{3,}\+")
_RULE = re.compile(r"\|={3,}\|")
_BOXED = re.compile(r"\|(.*)\|")
_INT = re.compile(r"[0-9]{1,6}")
_FREE_TOTAL = re.compile(r"([0-9]{1,4})/([0-9]{1,4})")
_GIB = re.compile(r"[0-9]{1,6}\.[0-9]{2}")  # always printed with two decimals
_PLACEMENT = re.compile(r"([0-9]{1,4}):([0-9]{1,4})")
_MAX_INDEX = 4096


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile of ``nvidia-smi mig -lgip`` (two physical lines).

    Attributes
    ----------
    gpu : int
        The GPU index.
    name : str
        The profile name without ``MIG`` (``1g.10gb``, ``1g.10gb+me``).
    profile_id : int
        The GPU instance profile id (``ID``; what ``nvidia-smi mig -cgi`` takes).
    free, total : int
        ``Instances Free/Total``: how many instances of the profile can be created now /
        on an empty GPU.
    memory_gib : float
        ``Memory`` in GiB (not the size in the profile name).
    p2p : bool
        ``P2P`` (``Yes``/``No``).
    sm, dec, enc : int
        Streaming multiprocessors, video decoders, video encoders.
    ce, jpeg, ofa : int
        Copy engines, JPEG decoders, optical flow accelerators (the second line).
    where : str
        ``"<source>:<line>"`` of the row's first line; ``""`` for rows not read from text.
    """

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int
    where: str = ""


@dataclass(frozen=True)
class GpuInstance:
    """One GPU instance of ``nvidia-smi mig -lgi``.

    Attributes
    ----------
    gpu : int
        The GPU index.
    name : str
        The profile name without ``MIG`` (``3g.40gb``).
    profile_id : int
        The GPU instance profile id.
    instance_id : int
        The GPU instance id (unique per GPU, not contiguous, not ordered by placement).
    start, size : int
        ``Placement Start:Size`` in memory slices of the GPU.
    where : str
        ``"<source>:<line>"`` of the row; ``""`` for rows not read from text.
    """

    gpu: int
    name: str
    profile_id: int
    instance_id: int
    start: int
    size: int
    where: str = ""


@dataclass(frozen=True)
class ComputeInstance:
    """One compute instance of ``nvidia-smi mig -lci``.

    Attributes
    ----------
    gpu : int
        The GPU index.
    gpu_instance_id : int
        The GPU instance the compute instance lives in.
    name : str
        The profile name without ``MIG`` (``1g.5gb``, ``1c.3g.20gb``).
    profile_id : int
        The compute instance profile id (not the GPU instance profile id).
    instance_id : int
        The compute instance id (unique per GPU instance).
    start, size : int
        ``Placement Start:Size`` in compute slices of the GPU instance.
    where : str
        ``"<source>:<line>"`` of the row; ``""`` for rows not read from text.
    """

    gpu: int
    gpu_instance_id: int
    name: str
    profile_id: int
    instance_id: int
    start: int
    size: int
    where: str = ""


@dataclass(frozen=True)
class _Table:
    command: str
    title: str
    header: tuple[tuple[str, ...], ...]
    # Per physical line of a row, its columns as (name, reader): a method of _Cells that
    # gives the column's value(s); "MIG" is a literal column that gives none.
    columns: tuple[tuple[tuple[str, str], ...], ...]
    # The row's type, built from the values of its columns in order and ``where``.
    row: Callable[..., Any]
    # Functions of a row giving (key, what): no two rows may share a key (``what`` names it).
    unique: tuple[Callable[[Any], tuple[object, str]], ...]
    # The ``No <empty> found`` message that means no rows (as ``No MIG-enabled devices found`` does).
    empty: str | None = None

    @property
    def lines_per_row(self) -> int:
        return len(self.columns)


_LGIP = _Table(
    "nvidia-smi mig -lgip",
    "GPU instance profiles:",
    (
        ("GPU", "Name", "ID", "Instances", "Memory", "P2P", "SM", "DEC", "ENC"),
        ("Free/Total", "GiB", "CE", "JPEG", "OFA"),
    ),
    (
        (
            ("GPU", "index"), ("MIG", "MIG"), ("Name", "profile"), ("ID", "integer"),
            ("Free/Total", "free_total"), ("Memory", "gib"), ("P2P", "yes_no"),
            ("SM", "integer"), ("DEC", "integer"), ("ENC", "integer"),
        ),
        (("CE", "integer"), ("JPEG", "integer"), ("OFA", "integer")),
    ),
    MigProfile,
    (
        lambda row: ((row.gpu, row.profile_id), f"GPU {row.gpu}: profile id {row.profile_id}"),
        lambda row: ((row.gpu, row.name), f"GPU {row.gpu}: profile {row.name}"),
    ),
)
_LGI = _Table(
    "nvidia-smi mig -lgi",
    "GPU instances:",
    (("GPU", "Name", "Profile", "Instance", "Placement"), ("ID", "ID", "Start:Size")),
    (
        (
            ("GPU", "index"), ("MIG", "MIG"), ("Name", "profile"), ("Profile ID", "integer"),
            ("Instance ID", "integer"), ("Start:Size", "placement"),
        ),
    ),
    GpuInstance,
    (lambda row: ((row.gpu, row.instance_id), f"GPU {row.gpu}: GPU instance {row.instance_id}"),),
    "GPU instances",
)
_LCI = _Table(
    "nvidia-smi mig -lci",
    "Compute instances:",
    (
        ("GPU", "GPU", "Name", "Profile", "Instance", "Placement"),
        ("Instance", "ID", "ID", "Start:Size"),
        ("ID",),
    ),
    (
        (
            ("GPU", "index"), ("GPU Instance ID", "integer"), ("MIG", "MIG"), ("Name", "profile"),
            ("Profile ID", "integer"), ("Instance ID", "integer"), ("Start:Size", "placement"),
        ),
    ),
    ComputeInstance,
    (
        lambda row: (
            (row.gpu, row.gpu_instance_id, row.instance_id),
            f"GPU {row.gpu} GPU instance {row.gpu_instance_id}: compute instance {row.instance_id}",
        ),
    ),
    "compute instances",
)
_TABLES = (_LGIP, _LGI, _LCI)


def parse_mig_profiles(text: str, source: str = "<text>", *, allow_cut: bool = False) -> tuple[MigProfile, ...]:
    """Parse the output of ``nvidia-smi mig -lgip`` (GPU instance profiles).

    Parameters
    ----------
    text : str
        The output as printed, optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).
    allow_cut : bool
        Accept text that ends right after a complete row without the closing border (a
        copy cut at a row boundary) and return the complete rows. Default: an error.

    Returns
    -------
    tuple of MigProfile
        One per profile row, in order; empty for ``No MIG-enabled devices found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a table that is not a ``-lgip`` table (other title or
        header words), a line outside the box, a row without its second line or with
        another number of cells, a cell that is not what its column holds, ``Free`` above
        ``Total``, the same profile id or name twice on one GPU, a missing border (see
        ``allow_cut``), text after the table, or a message of ``nvidia-smi`` itself.
    """
    return tuple(_TableReader(text, source, _LGIP).rows(allow_cut))


def parse_gpu_instances(text: str, source: str = "<text>", *, allow_cut: bool = False) -> tuple[GpuInstance, ...]:
    """Parse the output of ``nvidia-smi mig -lgi`` (GPU instances).

    Parameters
    ----------
    text : str
        The output as printed, optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).
    allow_cut : bool
        As for :func:`parse_mig_profiles`.

    Returns
    -------
    tuple of GpuInstance
        One per row, in order; empty for ``No GPU instances found`` or ``No MIG-enabled
        devices found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` as for :func:`parse_mig_profiles`, and for the same
        instance id twice on one GPU, a placement of size 0 or overlapping another
        instance's on the same GPU, or one profile name with two profile ids (or the
        reverse) on one GPU.
    """
    out = _TableReader(text, source, _LGI).rows(allow_cut)
    _check_profiles(out)
    _check_overlaps(out, lambda row: (row.gpu,), lambda key: f"GPU {key[0]}")
    return tuple(out)


def parse_compute_instances(
    text: str, source: str = "<text>", *, allow_cut: bool = False
) -> tuple[ComputeInstance, ...]:
    """Parse the output of ``nvidia-smi mig -lci`` (compute instances).

    Parameters
    ----------
    text : str
        The output as printed, optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).
    allow_cut : bool
        As for :func:`parse_mig_profiles`.

    Returns
    -------
    tuple of ComputeInstance
        One per row, in order; empty for ``No compute instances found`` or ``No
        MIG-enabled devices found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` as for :func:`parse_mig_profiles`, and for the same compute
        instance id twice in one GPU instance, or a placement of size 0 or overlapping
        another compute instance's in the same GPU instance.
    """
    out = _TableReader(text, source, _LCI).rows(allow_cut)
    _check_overlaps(
        out, lambda row: (row.gpu, row.gpu_instance_id),
        lambda key: f"GPU {key[0]} GPU instance {key[1]}",
    )
    return tuple(out)


def parse_mig_profiles_file(path: PathLike, *, allow_cut: bool = False) -> tuple[MigProfile, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lgip`` output and parse it
    (:func:`parse_mig_profiles`); errors as :func:`placer.adapters.nvidia_smi.listing.parse_gpu_list_file`."""
    return parse_file(parse_mig_profiles, path, allow_cut=allow_cut)


def parse_gpu_instances_file(path: PathLike, *, allow_cut: bool = False) -> tuple[GpuInstance, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lgi`` output and parse it
    (:func:`parse_gpu_instances`); errors as :func:`placer.adapters.nvidia_smi.listing.parse_gpu_list_file`."""
    return parse_file(parse_gpu_instances, path, allow_cut=allow_cut)


def parse_compute_instances_file(path: PathLike, *, allow_cut: bool = False) -> tuple[ComputeInstance, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lci`` output and parse it
    (:func:`parse_compute_instances`); errors as :func:`placer.adapters.nvidia_smi.listing.parse_gpu_list_file`."""
    return parse_file(parse_compute_instances, path, allow_cut=allow_cut)


_Placed = TypeVar("_Placed", GpuInstance, ComputeInstance)


class _TableReader(NvidiaSmiOutput):
    """The (stripped) lines of an ``nvidia-smi mig`` output read as the boxed ``table``."""

    def __init__(self, text: str, source: str, table: _Table) -> None:
        super().__init__(text, source)
        self.lines = [line.strip() for line in self.lines]
        self.table = table

    def rows(self, allow_cut: bool) -> list[Any]:
        """The rows as ``table.row`` objects, each checked cell by cell and for repeated keys."""
        table = self.table
        out: list[Any] = []
        seen: list[dict[object, str]] = [{} for _ in table.unique]
        for number, lines in self.row_cells(allow_cut):
            values: list[object] = []
            for offset, (columns, cells) in enumerate(zip(table.columns, lines)):
                values.extend(_Cells(self, number + offset, columns, cells).values())
            where = f"{self.source}:{number}"
            row = table.row(*values, where=where)
            for keys, unique in zip(seen, table.unique):
                key, what = unique(row)
                record_once(keys, key, where, what)
            out.append(row)
        return out

    def row_cells(self, allow_cut: bool) -> list[tuple[int, tuple[list[str], ...]]]:
        """The rows of the table as (line of the row, cells per line)."""
        table, lines, fail = self.table, self.lines, self.fail
        count = len(lines)
        end = count + 1  # the line number of "end of input"
        i = self.start(f"`{table.command}` output (a table starting with '+---+')")
        first = lines[i]
        if _NONE_FOUND.fullmatch(first):
            if first.startswith("No MIG-enabled") or (table.empty is not None and first.startswith(f"No {table.empty}")):
                for later in range(i + 1, count):
                    if lines[later]:
                        fail(later + 1, f"expected nothing after {first!r}, got {show_value(lines[later])}")
                return []
        if FAILURE_LINE.match(first) or _NONE_FOUND.fullmatch(first):
            fail(i + 1, f"nvidia-smi reported an error instead of the `{table.command}` table: {show_value(first)}")
        if not _BORDER.fullmatch(first):
            fail(i + 1, f"expected the top border '+---...---+' of the `{table.command}` table, got {show_value(first)}")
        i += 1

        title = self.boxed(i, f"the title {table.title!r}")
        if title != table.title:
            other = [t for t in _TABLES if t.title == title]
            hint = f" (that is `{other[0].command}` output)" if other else ""
            fail(i + 1, f"expected the title {table.title!r} of `{table.command}`, got {title!r}{hint}")
        i += 1
        for words in table.header:
            got = self.boxed(i, f"the header line {' '.join(words)!r}")
            if _RULE.fullmatch(lines[i]) or tuple(got.split()) != words:
                fail(
                    i + 1,
                    f"expected the header line {' '.join(words)!r} of `{table.command}`, got "
                    f"{show_value(lines[i])} (another nvidia-smi version or command?)",
                )
            i += 1
        if i >= count:
            fail(end, "expected the rule '|===...===|' below the header, got end of input")
        if not _RULE.fullmatch(lines[i]):
            fail(i + 1, f"expected the rule '|===...===|' below the header, got {show_value(lines[i])}")
        i += 1

        rows: list[tuple[int, tuple[list[str], ...]]] = []
        while True:
            # A row (or the end of the table after a border).
            if i >= count or not lines[i]:
                if rows or allow_cut:
                    self.only_blank(i)
                    return rows
                got = "end of input" if i >= count else "an empty line"
                fail(i + 1, f"expected the first row of the `{table.command}` table, got {got}")
            start = i + 1
            cells: list[list[str]] = []
            for part in range(table.lines_per_row):
                what = (
                    f"the {_ordinal(part + 1)} line of the row started at line {start}"
                    if part else "a row"
                )
                if i < count and (_BORDER.fullmatch(lines[i]) or _RULE.fullmatch(lines[i])):
                    fail(i + 1, f"expected {what}, got the border {show_value(lines[i])}")
                if i < count and not lines[i]:
                    fail(i + 1, f"expected {what}, got an empty line")
                cells.append(self.boxed(i, what).split())
                i += 1
            rows.append((start, tuple(cells)))
            # The border that closes each row.
            if i >= count or not lines[i]:
                if allow_cut:
                    self.only_blank(i)
                    return rows
                got = "end of input" if i >= count else "an empty line"
                fail(
                    i + 1,
                    f"expected the border '+---...---+' that closes the row at line {start}, got {got} "
                    "(the table is cut short: give the command's whole output)",
                )
            if not _BORDER.fullmatch(lines[i]):
                fail(i + 1, f"expected the border '+---...---+' that closes the row at line {start}, got {show_value(lines[i])}")
            i += 1

    def boxed(self, at: int, what: str) -> str:
        """The text between the ``|`` of line index ``at``, for ``what``."""
        if at >= len(self.lines):
            self.fail(len(self.lines) + 1, f"expected {what}, got end of input")
        match = _BOXED.fullmatch(self.lines[at])
        if match is None:
            self.fail(at + 1, f"expected {what} (a table line between '|' and '|'), got {show_value(self.lines[at])}")
        return match.group(1).strip()

    def only_blank(self, start: int) -> None:
        for at in range(start, len(self.lines)):
            if self.lines[at]:
                self.fail(at + 1, f"expected nothing after the `{self.table.command}` table, got {show_value(self.lines[at])}")


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


class _Cells:
    """The whitespace-separated cells of one physical table line, read column by column."""

    def __init__(self, output: TextLines, line: int, columns: tuple[tuple[str, str], ...], cells: list[str]) -> None:
        self.output, self.line, self.cells = output, line, cells
        self.names = tuple(name for name, _ in columns)
        self.readers = tuple(reader for _, reader in columns)
        if len(cells) != len(columns):
            output.fail(
                line,
                f"expected {len(columns)} cells ({', '.join(self.names)}), got {len(cells)}: {show_value(' '.join(cells))}",
            )

    def values(self) -> list[object]:
        """The value of each column in order, by its reader (a pair for a pair column, none
        for the literal ``MIG``)."""
        out: list[object] = []
        for at, reader in enumerate(self.readers):
            if reader == "MIG":
                self.literal(at, "MIG")
                continue
            value = getattr(self, reader)(at)
            out.extend(value if isinstance(value, tuple) else (value,))
        return out

    def bad(self, at: int, expected: str) -> NoReturn:
        self.output.fail(self.line, f"column {self.names[at]}: expected {expected}, got {show_value(self.cells[at])}")

    def literal(self, at: int, word: str) -> None:
        if self.cells[at] != word:
            self.bad(at, repr(word))

    def integer(self, at: int) -> int:
        if not _INT.fullmatch(self.cells[at]):
            self.bad(at, "an integer")
        return int(self.cells[at])

    def index(self, at: int) -> int:
        value = self.integer(at)
        if value >= _MAX_INDEX:
            self.bad(at, f"a GPU index 0..{_MAX_INDEX - 1}")
        return value

    def profile(self, at: int) -> str:
        if not MIG_PROFILE_NAME.fullmatch(self.cells[at]):
            self.bad(at, "a MIG profile name like 1g.10gb")
        return self.cells[at]

    def placement(self, at: int) -> tuple[int, int]:
        match = _PLACEMENT.fullmatch(self.cells[at])
        if match is None or int(match.group(2)) == 0:
            self.bad(at, "a placement start:size with size >= 1, like 0:2")
        return int(match.group(1)), int(match.group(2))

    def free_total(self, at: int) -> tuple[int, int]:
        match = _FREE_TOTAL.fullmatch(self.cells[at])
        if match is None:
            self.bad(at, "free/total instance counts like 0/7")
        free, total = int(match.group(1)), int(match.group(2))
        if free > total:
            self.bad(at, "free/total with free <= total")
        return free, total

    def gib(self, at: int) -> float:
        if not _GIB.fullmatch(self.cells[at]):
            self.bad(at, "a size in GiB with two decimals, like 9.50")
        return float(self.cells[at])

    def yes_no(self, at: int) -> bool:
        if self.cells[at] not in ("Yes", "No"):
            self.bad(at, "Yes or No")
        return self.cells[at] == "Yes"


def _check_profiles(rows: Sequence[GpuInstance]) -> None:
    """One profile name per profile id and the reverse, per GPU."""
    by_id: dict[tuple[int, int], GpuInstance] = {}
    by_name: dict[tuple[int, str], GpuInstance] = {}
    for row in rows:
        first = by_id.setdefault((row.gpu, row.profile_id), row)
        if first.name != row.name:
            raise InvalidInputError(
                row.where,
                f"GPU {row.gpu}: profile id {row.profile_id} is {row.name}, but {first.name} at {first.where}",
            )
        first = by_name.setdefault((row.gpu, row.name), row)
        if first.profile_id != row.profile_id:
            raise InvalidInputError(
                row.where,
                f"GPU {row.gpu}: profile {row.name} has id {row.profile_id}, but {first.profile_id} at {first.where}",
            )


def _check_overlaps(
    rows: Sequence[_Placed],
    key: Callable[[_Placed], tuple[int, ...]],
    describe: Callable[[tuple[int, ...]], str],
) -> None:
    """No two placements of one GPU (GPU instance) share a slice."""
    placed: dict[tuple[int, ...], list[_Placed]] = {}
    for row in rows:
        group = placed.setdefault(key(row), [])
        for other in group:
            if row.start < other.start + other.size and other.start < row.start + row.size:
                raise InvalidInputError(
                    row.where,
                    f"{describe(key(row))}: placement {row.start}:{row.size} overlaps "
                    f"{other.start}:{other.size} at {other.where}",
                )
        group.append(row)
