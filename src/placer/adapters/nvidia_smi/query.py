"""Parsers for the CSV that ``nvidia-smi --query-gpu`` and ``--query-compute-apps`` print.

``nvidia-smi --query-gpu=index,uuid,memory.used --format=csv`` prints a header line that
names each column by its canonical field name with the unit in brackets, then one line
per GPU, fields separated by ``", "``::

    index, uuid, memory.used [MiB]
    0, GPU-d0180485-9584-433c-6782-c335d5df2cb3, 1234 MiB

``--query-compute-apps=pid,gpu_uuid,used_memory`` prints one line per process and GPU
(header ``pid, gpu_uuid, used_gpu_memory [MiB]``). Quirks both parsers handle:

* **Columns are found by header name**, in any order; the header shows canonical names
  even when an alias was asked for (``name`` comes back as ``process_name`` and
  ``used_memory`` as ``used_gpu_memory`` in compute-apps; ``gpu_name``, ``gpu_bus_id``,
  ``gpu_serial`` and ``gpu_uuid`` as ``name``, ``pci.bus_id``, ``serial`` and ``uuid`` in
  query-gpu). Either spelling is accepted.
* ``--format=csv,noheader``: there is no header. The columns are then the ``columns``
  argument, by default the ones the ``placer reconcile`` contract asks for
  (``index, uuid`` and ``pid, gpu_uuid, used_memory``).
* ``--format=csv,nounits``: values come without their unit (``1234`` instead of
  ``1234 MiB``); both forms are read.
* Placeholders instead of values (``[N/A]``, ``N/A``, ``[Not Supported]``,
  ``[Insufficient Permissions]`` ...) read as unknown (``None``) for optional values; a
  placeholder for a GPU index, UUID or process id is an error.
* A process name that itself contains a comma is put back together (the free-text
  column takes the surplus fields).
* ``No running processes found`` (compute-apps) or ``No devices were found``
  (query-gpu) as the only body line means no rows.
* Lines before the CSV that echo the command (``# nvidia-smi --query-gpu=...``, a shell
  prompt followed by ``nvidia-smi ...``) are skipped; blank lines are skipped.

Everything else that does not parse raises :class:`placer.exceptions.InvalidInputError`
with ``where`` = ``"<source>:<line>"`` (1-based).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, NoReturn, Sequence, Union

from placer.text.files import read_text
from placer.exceptions import InvalidInputError
from placer.text.lines import TextLines

__all__ = [
    "GpuInfo",
    "ComputeApp",
    "GPU_DEFAULT_COLUMNS",
    "APPS_DEFAULT_COLUMNS",
    "parse_query_gpu",
    "parse_query_gpu_file",
    "parse_compute_apps",
    "parse_compute_apps_file",
]

PathLike = Union[str, "os.PathLike[str]"]

GPU_DEFAULT_COLUMNS = ("index", "uuid")
"""Columns of a headerless ``--query-gpu`` file when none are given."""

APPS_DEFAULT_COLUMNS = ("pid", "gpu_uuid", "used_gpu_memory")
"""Columns of a headerless ``--query-compute-apps`` file when none are given."""

# Requested field name -> the canonical name nvidia-smi prints in the header.
_GPU_ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
}
_APPS_ALIASES = {
    "name": "process_name",
    "used_memory": "used_gpu_memory",
}
# Header names that only compute-apps prints (to tell the two files apart).
_APPS_ONLY = frozenset(("pid", "process_name", "used_gpu_memory"))

_GPU_TEXT_COLUMNS = ("name",)
_APPS_TEXT_COLUMNS = ("process_name",)

_HEADER_CELL = re.compile(r"([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?:\s*\[([^\[\]]*)\])?")
_NUMBER = re.compile(r"([0-9]{1,12})(?:\s+([A-Za-z]+))?")
_UUID = re.compile(r"(?:GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/\-]*")
_BUS_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_PLACEHOLDER = re.compile(r"\[[^\[\]]*\]|N/A")
_NO_PROCESSES = "No running processes found"
_NO_DEVICES = "No devices were found"
_FAILURES = ("NVIDIA-SMI has failed", "Failed to initialize NVML", "Unable to determine")
_INVALID_FIELD = re.compile(r'Field "[^"]*" is not a valid field to query')
_MAX_INDEX = 4096
_MEMORY_UNIT = "MiB"


@dataclass(frozen=True)
class GpuInfo:
    """One line of ``nvidia-smi --query-gpu=... --format=csv``.

    Attributes
    ----------
    index : int or None
        ``index``: the device index (what ``NVIDIA_VISIBLE_DEVICES`` takes); ``None``
        when the column was not queried.
    uuid : str or None
        ``uuid`` (``GPU-...``); ``None`` when not queried.
    name : str or None
        ``name`` (the product name); ``None`` when not queried or a placeholder.
    pci_bus_id : str or None
        ``pci.bus_id`` as printed (8-hex-digit domain, ``00000000:01:00.0``).
    memory_total_mib, memory_used_mib : int or None
        ``memory.total`` / ``memory.used`` in MiB; ``None`` when not queried or a
        placeholder (``[N/A]`` on unified-memory boards).
    fields : tuple of (str, str)
        Every column as (canonical name without unit, value as printed), in file order,
        including the ones above and any others (``mig.mode.current`` ...).
    where : str
        ``"<source>:<line>"`` of the line; ``""`` for rows not read from a file.
    """

    index: int | None
    uuid: str | None
    name: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    fields: tuple[tuple[str, str], ...] = ()
    where: str = ""

    def get(self, column: str) -> str | None:
        """The value of ``column`` (canonical name or alias) as printed, or ``None``."""
        column = _GPU_ALIASES.get(column, column)
        return dict(self.fields).get(column)


@dataclass(frozen=True)
class ComputeApp:
    """One line of ``nvidia-smi --query-compute-apps=... --format=csv``: a process on a GPU.

    Attributes
    ----------
    gpu_uuid : str
        ``gpu_uuid``: the GPU the process runs on (for a MIG device, its parent GPU).
    pid : int or None
        ``pid``; ``None`` when the column was not queried.
    used_memory_mib : int or None
        ``used_gpu_memory`` (asked for as ``used_memory``) in MiB; ``None`` when not
        queried or a placeholder (``[N/A]`` under MIG or WDDM).
    process_name : str or None
        ``process_name`` (asked for as ``name``); ``None`` when not queried.
    fields : tuple of (str, str)
        Every column as (canonical name without unit, value as printed), in file order.
    where : str
        ``"<source>:<line>"`` of the line; ``""`` for rows not read from a file.
    """

    gpu_uuid: str
    pid: int | None = None
    used_memory_mib: int | None = None
    process_name: str | None = None
    fields: tuple[tuple[str, str], ...] = ()
    where: str = ""

    def get(self, column: str) -> str | None:
        """The value of ``column`` (canonical name or alias) as printed, or ``None``."""
        column = _APPS_ALIASES.get(column, column)
        return dict(self.fields).get(column)


def parse_query_gpu(
    text: str, source: str = "<text>", columns: Sequence[str] | None = None
) -> tuple[GpuInfo, ...]:
    """Parse the output of ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

    Parameters
    ----------
    text : str
        The output as printed (CRLF line endings and a leading byte-order mark are fine).
    source : str
        Name used in error locations (a file name).
    columns : sequence of str, optional
        The fields as passed to ``--query-gpu=`` (aliases allowed), used only when the
        text has no header line; default :data:`GPU_DEFAULT_COLUMNS`.

    Returns
    -------
    tuple of GpuInfo
        One per line, in file order; empty for ``No devices were found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a line with another number of fields than the header,
        a repeated or malformed column name, an ``index`` that is not an integer, a
        ``uuid`` that is not ``GPU-...``/``MIG-...``, a ``pci.bus_id`` that is not
        ``domain:bus:device.function``, a memory value that is not an integer in MiB, an
        index or UUID listed twice, compute-apps output (a ``pid`` column), or an error
        message of ``nvidia-smi`` itself; ``"<source>:1"`` for text without any line.
    """
    parser = _CsvParser(text, source, "query-gpu")
    header = parser.header(columns, GPU_DEFAULT_COLUMNS, _GPU_ALIASES, _NO_DEVICES)
    if header is None:
        return ()
    apps = [name for name in header.names if name in _APPS_ONLY]
    if apps:
        parser.fail(
            header.line or 1,
            f"expected `nvidia-smi --query-gpu` output, got a column {apps[0]!r} of "
            "`--query-compute-apps` output (wrong file?)",
        )
    rows: list[GpuInfo] = []
    seen_index: dict[int, str] = {}
    seen_uuid: dict[str, str] = {}
    for line, cells in parser.rows(header, _GPU_TEXT_COLUMNS, _NO_DEVICES):
        where = f"{source}:{line}"
        values = dict(zip(header.names, cells))
        index = _index(values.get("index"), where) if "index" in values else None
        uuid = _uuid(values["uuid"], where, "uuid") if "uuid" in values else None
        bus = values.get("pci.bus_id")
        if bus is not None:
            if _is_placeholder(bus):
                bus = None
            elif not _BUS_ID.fullmatch(bus):
                _fail(
                    where,
                    f"pci.bus_id: expected domain:bus:device.function like "
                    f"00000000:01:00.0, got {_show(bus)}",
                )
        name = values.get("name")
        if name is not None and (_is_placeholder(name) or not name):
            name = None
        info = GpuInfo(
            index=index,
            uuid=uuid,
            name=name,
            pci_bus_id=bus,
            memory_total_mib=_memory(values, header, "memory.total", where),
            memory_used_mib=_memory(values, header, "memory.used", where),
            fields=tuple(zip(header.names, cells)),
            where=where,
        )
        if index is not None:
            if index in seen_index:
                _fail(where, f"GPU index {index} is listed twice (first at {seen_index[index]})")
            seen_index[index] = where
        if uuid is not None:
            if uuid in seen_uuid:
                _fail(where, f"GPU {uuid} is listed twice (first at {seen_uuid[uuid]})")
            seen_uuid[uuid] = where
        rows.append(info)
    return tuple(rows)


def parse_compute_apps(
    text: str, source: str = "<text>", columns: Sequence[str] | None = None
) -> tuple[ComputeApp, ...]:
    """Parse the output of ``nvidia-smi --query-compute-apps=... --format=csv[,...]``.

    The ``gpu_uuid`` column is required; ``pid``, ``used_gpu_memory`` (``used_memory``)
    and ``process_name`` (``name``) are read when present, other columns are kept in
    :attr:`ComputeApp.fields`. One process using several GPUs has one line per GPU.

    Parameters
    ----------
    text : str
        The output as printed.
    source : str
        Name used in error locations (a file name).
    columns : sequence of str, optional
        The fields as passed to ``--query-compute-apps=`` (aliases allowed), used only
        when the text has no header line; default :data:`APPS_DEFAULT_COLUMNS`.

    Returns
    -------
    tuple of ComputeApp
        One per line, in file order; empty when the body is ``No running processes
        found`` or there are no lines after the header.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a header without ``gpu_uuid`` (query-gpu output, say),
        a line with another number of fields than the header, a ``pid`` that is not a
        positive integer, a ``gpu_uuid`` that is not ``GPU-...``/``MIG-...``, a memory
        value that is not an integer in MiB, the same pid on the same GPU twice, or an
        error message of ``nvidia-smi`` itself; ``"<source>:1"`` for text without any line.
    """
    parser = _CsvParser(text, source, "query-compute-apps")
    header = parser.header(columns, APPS_DEFAULT_COLUMNS, _APPS_ALIASES, _NO_PROCESSES)
    if header is None:
        return ()
    if "gpu_uuid" not in header.names:
        hint = " (this looks like `--query-gpu` output; wrong file?)" if "index" in header.names else ""
        parser.fail(
            header.line or 1,
            f"expected a gpu_uuid column in `--query-compute-apps` output, got columns "
            f"{', '.join(header.names)}{hint}",
        )
    apps: list[ComputeApp] = []
    seen: dict[tuple[int, str], str] = {}
    for line, cells in parser.rows(header, _APPS_TEXT_COLUMNS, _NO_PROCESSES):
        where = f"{source}:{line}"
        values = dict(zip(header.names, cells))
        uuid = _uuid(values["gpu_uuid"], where, "gpu_uuid")
        pid = _pid(values["pid"], where) if "pid" in values else None
        name = values.get("process_name")
        if name is not None and (not name or _is_placeholder(name)):
            name = None
        if pid is not None:
            if (pid, uuid) in seen:
                _fail(where, f"pid {pid} on {uuid} is listed twice (first at {seen[pid, uuid]})")
            seen[pid, uuid] = where
        apps.append(
            ComputeApp(
                gpu_uuid=uuid,
                pid=pid,
                used_memory_mib=_memory(values, header, "used_gpu_memory", where),
                process_name=name,
                fields=tuple(zip(header.names, cells)),
                where=where,
            )
        )
    return tuple(apps)


def parse_query_gpu_file(path: PathLike, columns: Sequence[str] | None = None) -> tuple[GpuInfo, ...]:
    """Read a UTF-8 file of ``--query-gpu`` CSV and parse it (:func:`parse_query_gpu`).

    Error locations name the file by its base name; a missing file raises
    :class:`InvalidInputError` with ``where`` = the path and ``what`` = ``"no such file"``.
    """
    name = os.path.basename(os.fspath(path))
    return parse_query_gpu(read_text(path, source=name), name, columns)


def parse_compute_apps_file(
    path: PathLike, columns: Sequence[str] | None = None
) -> tuple[ComputeApp, ...]:
    """Read a UTF-8 file of ``--query-compute-apps`` CSV and parse it
    (:func:`parse_compute_apps`); errors as :func:`parse_query_gpu_file`."""
    name = os.path.basename(os.fspath(path))
    return parse_compute_apps(read_text(path, source=name), name, columns)


# ----------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class _Header:
    line: int  # 0 when the columns were given, not read
    names: tuple[str, ...]
    units: Mapping[str, str]


class _CsvParser(TextLines):
    def __init__(self, text: str, source: str, kind: str) -> None:
        super().__init__(text, source)
        self.kind = kind
        self.start = 0  # index of the first line after the header

    def check_message(self, index: int) -> None:
        text = self.lines[index].strip()
        if text.startswith(_FAILURES) or _INVALID_FIELD.match(text):
            self.fail(index + 1, f"nvidia-smi reported an error instead of CSV: {_show(text)}")

    def header(
        self,
        columns: Sequence[str] | None,
        default: Sequence[str],
        aliases: Mapping[str, str],
        empty_message: str,
    ) -> _Header | None:
        """The columns (from the header line, else ``columns``/``default``); ``None``
        when the first line after the command echo is ``empty_message`` (nothing to read)."""
        index = 0
        while index < len(self.lines):
            text = self.lines[index].strip()
            if text and "nvidia-smi" not in text:
                break
            index += 1
        if index == len(self.lines):
            self.fail(
                max(len(self.lines), 1),
                f"expected `nvidia-smi --{self.kind} --format=csv` output, got "
                + ("only the command line" if any(line.strip() for line in self.lines) else "an empty file"),
            )
        self.check_message(index)
        first = self.lines[index].strip()
        if first == empty_message:
            for later in range(index + 1, len(self.lines)):
                if self.lines[later].strip():
                    got = _show(self.lines[later].strip())
                    self.fail(later + 1, f"expected nothing after {empty_message!r}, got {got}")
            return None
        cells = [cell.strip() for cell in first.split(",")]
        matches = [_HEADER_CELL.fullmatch(cell) for cell in cells]
        if all(matches):
            names: list[str] = []
            units: dict[str, str] = {}
            for match in matches:
                assert match is not None
                name = aliases.get(match.group(1), match.group(1))
                if name in names:
                    self.fail(index + 1, f"column {name!r} appears twice in the header")
                names.append(name)
                if match.group(2) is not None:
                    units[name] = match.group(2).strip()
            self.start = index + 1
            return _Header(index + 1, tuple(names), units)
        given = tuple(aliases.get(c.strip(), c.strip()) for c in (columns or default))
        for name in given:
            if not _HEADER_CELL.fullmatch(name) or "[" in name:
                raise InvalidInputError("columns", f"expected nvidia-smi field names, got {name!r}")
        if len(set(given)) != len(given) or not given:
            raise InvalidInputError("columns", f"expected distinct field names, got {list(given)}")
        self.start = index
        return _Header(0, given, {})

    def rows(
        self, header: _Header, text_columns: Iterable[str], empty_message: str
    ) -> list[tuple[int, tuple[str, ...]]]:
        """The body lines as (line number, one value per column)."""
        body = [
            (index + 1, self.lines[index])
            for index in range(self.start, len(self.lines))
            if self.lines[index].strip()
        ]
        if len(body) == 1 and body[0][1].strip() == empty_message:
            return []
        texts = [i for i, name in enumerate(header.names) if name in text_columns]
        count = len(header.names)
        out: list[tuple[int, tuple[str, ...]]] = []
        for line, text in body:
            self.check_message(line - 1)
            if text.strip() == empty_message:
                self.fail(line, f"{empty_message!r} among other lines")
            pieces = text.split(",")
            if len(pieces) > count and len(texts) == 1:
                # A free-text value (a process name) with commas in it: give it the surplus.
                at, extra = texts[0], len(pieces) - count
                pieces[at:at + extra + 1] = [",".join(pieces[at:at + extra + 1])]
            if len(pieces) != count:
                self.fail(
                    line,
                    f"expected {count} field(s) ({', '.join(header.names)}), got {len(pieces)}: "
                    f"{_show(text.strip())}",
                )
            out.append((line, tuple(piece.strip() for piece in pieces)))
        return out


def _fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)


def _show(value: str) -> str:
    if value == "":
        return "an empty field"
    return repr(value) if len(value) <= 60 else repr(value[:60]) + "..."


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.fullmatch(value) is not None


def _index(value: str | None, where: str) -> int:
    assert value is not None
    if not (value.isascii() and value.isdigit()) or len(value) > 4 or int(value) >= _MAX_INDEX:
        _fail(where, f"index: expected a GPU index (an integer 0..{_MAX_INDEX - 1}), got {_show(value)}")
    return int(value)


def _pid(value: str, where: str) -> int:
    if not (value.isascii() and value.isdigit()) or len(value) > 10 or int(value) == 0:
        _fail(where, f"pid: expected a process id (a positive integer), got {_show(value)}")
    return int(value)


def _uuid(value: str, where: str, column: str) -> str:
    if not _UUID.fullmatch(value):
        _fail(where, f"{column}: expected a GPU UUID (GPU-... or MIG-...), got {_show(value)}")
    return value


def _memory(values: Mapping[str, str], header: _Header, column: str, where: str) -> int | None:
    """The MiB value of ``column`` (``None`` when absent or a placeholder)."""
    value = values.get(column)
    if value is None or _is_placeholder(value):
        return None
    unit = header.units.get(column, _MEMORY_UNIT)
    if unit != _MEMORY_UNIT:
        _fail(f"{where.rsplit(':', 1)[0]}:{header.line}", f"{column}: expected the unit [MiB], got [{unit}]")
    match = _NUMBER.fullmatch(value)
    if match is None or (match.group(2) is not None and match.group(2) != unit):
        _fail(where, f"{column}: expected an integer number of MiB (1234 or 1234 MiB), got {_show(value)}")
    return int(match.group(1))
