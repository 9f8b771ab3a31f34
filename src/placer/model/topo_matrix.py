"""The grammar of the GPU/NIC matrix printed by ``nvidia-smi topo -m`` (and ``topo -mp``).

The snapshot format embeds this text (the ``nvidiaSmiTopo`` form of a ``gpuTopology``),
so reading it is part of decoding a snapshot: :mod:`placer.model.topology` parses it here, and
:mod:`placer.adapters.nvidia_smi.topo` reads it from files with the same parser.

The parser accepts the raw tab-separated output as well as copies whose tabs a terminal
expanded to spaces, with ANSI escape sequences anywhere (newer drivers underline the
header; colour and bold survive in captured terminal output), preamble lines (shell
prompts, ``GPU Topology:`` ...) before the matrix and the ``Legend:`` / ``NIC Legend:``
blocks after it. It never guesses: a header and its rows must agree cell for cell, and any
input it cannot read unambiguously raises :class:`placer.exceptions.InvalidInputError`
with ``where`` = ``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from placer.text.lines import TextLines

__all__ = ["TopoMatrix", "parse_topo_matrix"]

_MAX_NVLINKS = 64
_LABEL_LIST = "X, NV<n>, PIX, PXB, PHB, NODE, SYS, SOC"
_PLAIN_LABELS = frozenset(("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"))
_NV_LABEL = re.compile(r"NV([1-9][0-9]?)")
_P2P_CODES = frozenset(("OK", "CNS", "GNS", "TNS", "NS", "DR", "U"))
_LABEL_PREFIX = re.compile(r"NV[1-9][0-9]?|PIX|PXB|PHB|NODE|SYS|SOC|X")

_CPU_AFFINITY = "CPU Affinity"
_NUMA_AFFINITY = "NUMA Affinity"
_GPU_NUMA_ID = "GPU NUMA ID"
_AFFINITY_HEADERS = (_CPU_AFFINITY, _NUMA_AFFINITY, _GPU_NUMA_ID)
_MULTI_WORD_HEADERS = (("GPU", "NUMA", "ID"), ("CPU", "Affinity"), ("NUMA", "Affinity"))
_ID_LIST = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
_NUMA_ID = re.compile(r"[0-9]+")
_NOT_AVAILABLE = "N/A"

_GPU_NAME = re.compile(r"GPU([0-9]+)")
_NIC_NUMBERED = re.compile(r"NIC([0-9]+)")
# RDMA device names (mlx5_0, mlx5_bond_1, bnxt_re0, irdma0, ...) end with a digit.
_NIC_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:\-]*[0-9]")
_LEGEND_ENTRY = re.compile(r"NIC([0-9]+)\s*:\s*([A-Za-z][A-Za-z0-9_.:\-]*)")
_LEGEND_ENTRY_START = re.compile(r"NIC[0-9]+\s*:")
_SPACE_RUN = re.compile(r" {2,}")
_GLUED_START = re.compile(r"(?:GPU|NIC)[0-9]+(?![0-9]|$)")
_GLUED_INSIDE = re.compile(r"(?<=.)(?:GPU|NIC|mlx)[0-9]")
_ROW_NAME = re.compile(r"(\S+)(.*)", re.DOTALL)
# What a terminal's attribute changes leave in captured text: ANSI control sequences (ESC [
# parameters intermediates final: ESC[4m, ESC[1;31m, ESC[0m), the character-set selections
# that terminfo's sgr0 adds to a reset (ESC(B, ESC)0), and shift-in/shift-out.
_TERMINAL_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()*+][0-9A-Za-z]|[\x0e\x0f]")
# Any other control character but the tab (line ends are split off before the check).
_CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_ESCAPE_OR_CONTROL = re.compile(
    f"(?P<escape>{_TERMINAL_ESCAPES.pattern})|(?P<control>{_CONTROL_CHARACTER.pattern})"
)


@dataclass(frozen=True)
class TopoMatrix:
    """A parsed ``nvidia-smi topo -m`` (or ``topo -mp``) matrix.

    Attributes
    ----------
    gpu_labels : tuple of tuple of str
        ``n x n`` link labels between GPUs (``X`` on the diagonal, else ``NV<k>``,
        ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS`` or the old name ``SOC``). Symmetric.
    nic_names : tuple of str
        NIC names in column order, resolved through the ``NIC Legend`` block when there
        is one (``NIC0`` -> ``mlx5_0``); otherwise (or for a NIC the legend does not
        list) the column name as printed (``mlx5_0`` or ``NIC0``).
    nic_labels : tuple of tuple of str
        Per NIC, its label to each GPU (``n`` labels each), taken from the GPU rows.
    cpu_affinity : tuple of (str or None)
        Per GPU, the ``CPU Affinity`` text (e.g. ``"0-63,128-191"``); ``None`` when the
        column is absent, empty or ``N/A``.
    numa_affinity : tuple of (str or None)
        Per GPU, the ``NUMA Affinity`` text (e.g. ``"0"`` or ``"0-1"``); ``None`` when
        the column is absent, empty or ``N/A``.
    gpu_numa_id : tuple of (str or None)
        Per GPU, the ``GPU NUMA ID`` text: the NUMA node of the GPU's own memory (e.g.
        ``"2"`` on GB200); ``None`` when the column is absent, empty or ``N/A``. Left out
        when constructing, it is ``None`` for every GPU.
    """

    gpu_labels: tuple[tuple[str, ...], ...]
    nic_names: tuple[str, ...]
    nic_labels: tuple[tuple[str, ...], ...]
    cpu_affinity: tuple[str | None, ...]
    numa_affinity: tuple[str | None, ...]
    gpu_numa_id: tuple[str | None, ...] = ()

    def __post_init__(self) -> None:
        if not self.gpu_numa_id:
            object.__setattr__(self, "gpu_numa_id", (None,) * len(self.gpu_labels))


def parse_topo_matrix(text: str, source: str = "<text>") -> TopoMatrix:
    """Parse the text of ``nvidia-smi topo -m`` (or ``topo -mp``).

    ANSI escape sequences (``ESC[4m``, ``ESC[1;31m``, ``ESC[0m`` ...), the ``ESC(B`` and
    shift-in of a terminal's attribute reset, and whitespace at line ends (trailing tabs)
    are removed first, wherever they are; any other control character is an error. The matrix starts at the first header line (``GPU0 GPU1 ... CPU
    Affinity ...``, with or without its leading empty field); lines before it are ignored,
    as is everything after the matrix except a ``NIC Legend:`` block. Lines that contain a
    tab are split on tabs, other lines on runs of two or more spaces. The header must name
    the GPU columns ``GPU0..GPU<n-1>`` in order, then the NIC columns, then any of ``CPU
    Affinity``, ``NUMA Affinity`` and ``GPU NUMA ID``. Rows ``GPU0..GPU<n-1>`` must
    follow in order, each with one link label per GPU and NIC column. NIC rows may be
    missing or cut short (partial copies); those present must agree with the GPU rows.

    Parameters
    ----------
    text : str
        The output, as printed or copied (CRLF line endings are fine).
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    TopoMatrix
        The GPU matrix, NIC names and labels, and per GPU its CPU and NUMA affinity and
        GPU NUMA ID.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` (1-based) when there is no matrix (line 1),
        the header has glued or unknown column names, a row is missing, out of order or
        has the wrong number of cells, a cell is not a link label (e.g. ``topo -p2p``
        codes), a line holds a control character other than a tab (e.g. a lone ``ESC`` of a
        cut escape sequence), ``X`` is off the diagonal or missing, the matrix is not symmetric, an
        affinity is not a list of ids or a GPU NUMA ID not a single id (``N/A`` is fine).
        A missing row at the end of the text is reported at the line after the last one.
    """
    return _TopoParser(text, source).parse()


def _is_link_label(token: str) -> bool:
    if token in _PLAIN_LABELS:
        return True
    match = _NV_LABEL.fullmatch(token)
    return match is not None and int(match.group(1)) <= _MAX_NVLINKS


def _describe_label(token: str) -> str:
    """Show ``token`` (which is not a link label) with a hint for error messages."""
    if token == "":
        return "an empty field"
    text = repr(token)
    if token in _P2P_CODES:
        return f"{text} (a `nvidia-smi topo -p2p` status code, not a link type)"
    if _NV_LABEL.fullmatch(token):
        return f"{text} (more than {_MAX_NVLINKS} NVLinks)"
    head = _LABEL_PREFIX.match(token)
    if head is not None and _LABEL_PREFIX.match(token[head.end():].strip()):
        return f"{text} (two cells glued together?)"
    return text


def _header_tokens(line: str) -> list[str]:
    """Split a header line into column names, re-joining the multi-word ones."""
    words = line.split()
    tokens: list[str] = []
    i = 0
    while i < len(words):
        for phrase in _MULTI_WORD_HEADERS:
            if tuple(words[i:i + len(phrase)]) == phrase:
                tokens.append(" ".join(phrase))
                i += len(phrase)
                break
        else:
            tokens.append(words[i])
            i += 1
    return tokens


def _row_fields(line: str) -> list[str]:
    """Split a matrix row: on tabs if it has any, else on runs of 2+ spaces.

    The first field is the row name, which ends at the first whitespace (a tab after a
    7-character name expands to a single space). Leading empty fields are dropped.
    """
    stripped = line.strip()
    if not stripped:
        return []
    name, rest = _ROW_NAME.match(stripped).groups()  # type: ignore[union-attr]
    if "\t" in line:
        fields = [field.strip() for field in rest.split("\t")]
        if fields[0] == "":
            fields.pop(0)
    else:
        fields = _SPACE_RUN.split(rest.strip()) if rest.strip() else []
    return [name, *fields]


def _looks_glued(name: str) -> bool:
    """True for column names like ``NIC11NIC12``, ``GPU7mlx5_0`` or ``mlx5_0mlx5_1``."""
    if _GLUED_START.match(name) or _GLUED_INSIDE.search(name):
        return True
    prefix = re.match(r"[A-Za-z]+", name)
    return prefix is not None and len(prefix.group(0)) >= 2 and name.find(prefix.group(0), 1) > 0


def _span(names: list[str]) -> str:
    if not names:
        return ""
    return names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"


@dataclass
class _Header:
    line: int
    gpu_count: int
    nic_columns: list[str]
    affinity_columns: list[str]


@dataclass
class _Row:
    line: int
    name: str
    links: list[str]
    values: list[str]


class _TopoParser(TextLines):
    def __init__(self, text: str, source: str) -> None:
        super().__init__(text, source)
        for index, line in enumerate(self.lines):
            line_without_escapes = _TERMINAL_ESCAPES.sub("", line)
            if _CONTROL_CHARACTER.search(line_without_escapes):
                column = next(
                    found.start() + 1
                    for found in _ESCAPE_OR_CONTROL.finditer(line)
                    if found.lastgroup == "control"
                )
                self.fail(
                    index + 1,
                    f"expected text, tabs and ANSI escape sequences, got control character "
                    f"U+{ord(line[column - 1]):04X} at column {column}",
                )
            self.lines[index] = line_without_escapes.rstrip()

    def line_text(self, index: int) -> str | None:
        return self.lines[index] if index < len(self.lines) else None

    def describe_line(self, index: int) -> str:
        text = self.line_text(index)
        if text is None:
            return "end of input"
        if not text.strip():
            return "a blank line"
        fields = _row_fields(text)
        shown = fields[0] if fields else text.strip()
        return f"{shown!r}" if len(shown) <= 40 else f"{shown[:40]!r}..."

    # -- header -----------------------------------------------------------------

    def find_header(self) -> int:
        for index, line in enumerate(self.lines):
            words = line.split()
            if not words:
                continue
            first = words[0]
            second_is_label = len(words) > 1 and _is_link_label(words[1])
            if first == "GPU0" or re.match(r"GPU0(?:GPU|NIC)[0-9]", first):
                if not second_is_label:
                    return index
            if _GPU_NAME.fullmatch(first) and second_is_label:
                self.fail(
                    index + 1,
                    f"expected the header line (GPU0 GPU1 ... column names) before the "
                    f"matrix rows, got row {first}",
                )
        self.fail(
            1,
            "expected an `nvidia-smi topo -m` matrix (a header line of column names "
            "starting with GPU0), found none",
        )

    def parse_header(self, index: int) -> _Header:
        line_no = index + 1
        tokens = _header_tokens(self.lines[index])
        for token in tokens:
            if token not in _AFFINITY_HEADERS and _looks_glued(token):
                self.fail(
                    line_no,
                    f"expected column names separated by whitespace, got {token!r} "
                    "(two names glued together)",
                )
        gpu_count = 0
        while gpu_count < len(tokens) and _GPU_NAME.fullmatch(tokens[gpu_count]):
            if tokens[gpu_count] != f"GPU{gpu_count}":
                self.fail(line_no, f"expected column GPU{gpu_count}, got {tokens[gpu_count]}")
            gpu_count += 1
        nic_columns: list[str] = []
        affinity_columns: list[str] = []
        for token in tokens[gpu_count:]:
            if token in _AFFINITY_HEADERS:
                if token in affinity_columns:
                    self.fail(line_no, f"column {token!r} appears twice")
                affinity_columns.append(token)
            elif affinity_columns:
                self.fail(
                    line_no,
                    f"expected only {', '.join(map(repr, _AFFINITY_HEADERS))} after "
                    f"{affinity_columns[0]!r}, got {token!r}",
                )
            elif _GPU_NAME.fullmatch(token):
                self.fail(
                    line_no,
                    f"expected GPU columns GPU0..GPU{gpu_count - 1} to come first, "
                    f"got {token} after NIC column {nic_columns[-1]}",
                )
            elif _is_link_label(token) or not _NIC_NAME.fullmatch(token):
                self.fail(
                    line_no,
                    f"expected a NIC column name (NIC<k>, mlx5_<k>, ...) or one of "
                    f"{', '.join(map(repr, _AFFINITY_HEADERS))}, got {token!r}",
                )
            else:
                position = len(nic_columns)
                if _NIC_NUMBERED.fullmatch(token) and token != f"NIC{position}":
                    self.fail(line_no, f"expected column NIC{position}, got {token}")
                if token in nic_columns:
                    self.fail(line_no, f"column {token!r} appears twice")
                nic_columns.append(token)
        return _Header(line_no, gpu_count, nic_columns, affinity_columns)

    # -- rows -------------------------------------------------------------------

    def column_name(self, header: _Header, position: int) -> str:
        if position < header.gpu_count:
            return f"GPU{position}"
        return header.nic_columns[position - header.gpu_count]

    def split_row(self, header: _Header, index: int) -> _Row:
        line_no = index + 1
        fields = _row_fields(self.lines[index])
        name, cells = fields[0], fields[1:]
        expected = header.gpu_count + len(header.nic_columns)
        count = 0
        while count < len(cells) and _is_link_label(cells[count]):
            count += 1
        if count != expected:
            columns = ", ".join(
                part
                for part in (
                    _span([f"GPU{i}" for i in range(header.gpu_count)]),
                    _span(header.nic_columns),
                )
                if part
            )
            what = f"row {name}: expected {expected} cells ({columns}), got {count}"
            if count < expected and count < len(cells):
                bad = cells[count]
                if bad == "" or not (_ID_LIST.fullmatch(bad) or bad == _NOT_AVAILABLE):
                    what = (
                        f"row {name}, column {self.column_name(header, count)}: expected a "
                        f"link label ({_LABEL_LIST}), got {_describe_label(bad)}"
                    )
            self.fail(line_no, what)
        values = [word for cell in cells[expected:] for word in cell.split()]
        return _Row(line_no, name, cells[:expected], values)

    def check_self_cells(self, header: _Header, row: _Row, self_position: int) -> None:
        for position, label in enumerate(row.links):
            if position == self_position and label != "X":
                self.fail(
                    row.line,
                    f"row {row.name}, column {self.column_name(header, position)}: expected "
                    f"X (self) on the diagonal, got {label!r}",
                )
            if position != self_position and label == "X":
                self.fail(
                    row.line,
                    f"row {row.name}, column {self.column_name(header, position)}: X (self) "
                    "is only valid on the diagonal",
                )

    def affinity(self, header: _Header, row: _Row) -> dict[str, str | None]:
        columns = header.affinity_columns
        if not row.values:
            return dict.fromkeys(columns)
        if len(row.values) != len(columns):
            expected = f"{len(columns)} ({', '.join(columns)})" if columns else "none"
            self.fail(
                row.line,
                f"row {row.name}: expected {expected} values after the link cells, got "
                f"{len(row.values)}: {' '.join(row.values)!r}",
            )
        result: dict[str, str | None] = {}
        for column, value in zip(columns, row.values):
            if value == _NOT_AVAILABLE:
                result[column] = None
            elif column == _GPU_NUMA_ID:
                if not _NUMA_ID.fullmatch(value):
                    self.fail(
                        row.line,
                        f"row {row.name}, column {column!r}: expected one NUMA node id like 2, "
                        f"or N/A, got {value!r}",
                    )
                result[column] = value
            elif _ID_LIST.fullmatch(value):
                result[column] = value
            else:
                self.fail(
                    row.line,
                    f"row {row.name}, column {column!r}: expected a list of ids like "
                    f"0-63,128-191 or N/A, got {value!r}",
                )
        return result

    def row_head(self, index: int) -> tuple[str | None, bool]:
        """The first field of the line at ``index`` (None if blank or past the end) and
        whether the line looks like a matrix row (its second field is a link label)."""
        text = self.line_text(index)
        if text is None or not text.strip():
            return None, False
        fields = _row_fields(text)
        return fields[0], len(fields) >= 2 and _is_link_label(fields[1])

    def parse(self) -> TopoMatrix:
        header_index = self.find_header()
        header = self.parse_header(header_index)
        n = header.gpu_count
        column_names = {f"GPU{i}" for i in range(n)} | set(header.nic_columns)

        gpu_rows: list[_Row] = []
        index = header_index + 1
        affinities: list[dict[str, str | None]] = []
        for i in range(n):
            first, is_row = self.row_head(index)
            if first != f"GPU{i}":
                got = f"row {first}" if is_row else self.describe_line(index)
                self.fail(
                    index + 1,
                    f"expected row GPU{i} (the header has GPU0..GPU{n - 1}), got {got}",
                )
            row = self.split_row(header, index)
            self.check_self_cells(header, row, i)
            for j in range(i):
                if row.links[j] != gpu_rows[j].links[i]:
                    self.fail(
                        row.line,
                        f"row GPU{i}, column GPU{j} is {row.links[j]!r} but row GPU{j}, "
                        f"column GPU{i} (line {gpu_rows[j].line}) is {gpu_rows[j].links[i]!r}: "
                        "the GPU matrix is not symmetric",
                    )
            affinities.append(self.affinity(header, row))
            gpu_rows.append(row)
            index += 1

        nic_rows: list[_Row] = []
        for k, nic in enumerate(header.nic_columns):
            if self.row_head(index)[0] != nic:
                break
            row = self.split_row(header, index)
            self.check_self_cells(header, row, n + k)
            if row.values:
                self.fail(
                    row.line,
                    f"row {nic}: expected nothing after the link cells of a NIC row, got "
                    f"{' '.join(row.values)!r}",
                )
            for i in range(n):
                if row.links[i] != gpu_rows[i].links[n + k]:
                    self.fail(
                        row.line,
                        f"row {nic}, column GPU{i} is {row.links[i]!r} but row GPU{i}, column "
                        f"{nic} (line {gpu_rows[i].line}) is {gpu_rows[i].links[n + k]!r}: "
                        "the matrix is not symmetric",
                    )
            for j, other in enumerate(nic_rows):
                if row.links[n + j] != other.links[n + k]:
                    self.fail(
                        row.line,
                        f"row {nic}, column {other.name} is {row.links[n + j]!r} but row "
                        f"{other.name}, column {nic} (line {other.line}) is "
                        f"{other.links[n + k]!r}: the matrix is not symmetric",
                    )
            nic_rows.append(row)
            index += 1

        first, is_row = self.row_head(index)
        if is_row or first in column_names:
            if len(nic_rows) < len(header.nic_columns):
                expected = f"row {header.nic_columns[len(nic_rows)]} or the end of the matrix"
            else:
                expected = "the end of the matrix"
            self.fail(index + 1, f"expected {expected}, got row {first}")

        legend = self.parse_nic_legend(index)
        named: dict[str, str] = {}
        for column in header.nic_columns:
            device, line = legend.get(column, (column, header.line))
            if device in named:
                self.fail(line, f"{column} and {named[device]} are both named {device!r}")
            named[device] = column
        nic_names = tuple(named)

        return TopoMatrix(
            gpu_labels=tuple(tuple(row.links[:n]) for row in gpu_rows),
            nic_names=nic_names,
            nic_labels=tuple(
                tuple(row.links[n + k] for row in gpu_rows)
                for k in range(len(header.nic_columns))
            ),
            cpu_affinity=tuple(values.get(_CPU_AFFINITY) for values in affinities),
            numa_affinity=tuple(values.get(_NUMA_AFFINITY) for values in affinities),
            gpu_numa_id=tuple(values.get(_GPU_NUMA_ID) for values in affinities),
        )

    # -- NIC legend -------------------------------------------------------------

    def parse_nic_legend(self, start: int) -> dict[str, tuple[str, int]]:
        """Map ``NIC<k>`` to (device name, line) from a ``NIC Legend:`` block after ``start``.

        Garbled entries (terminal paste damage) are skipped, so their NICs keep the
        printed column name.
        """
        index = start
        while index < len(self.lines) and self.lines[index].strip() != "NIC Legend:":
            index += 1
        legend: dict[str, tuple[str, int]] = {}
        for index in range(index + 1, len(self.lines)):
            text = self.lines[index].strip()
            if not text:
                continue
            if not _LEGEND_ENTRY_START.match(text):
                break
            match = _LEGEND_ENTRY.fullmatch(text)
            if match is None or _NIC_NUMBERED.fullmatch(match.group(2)):
                continue
            nic, device = f"NIC{match.group(1)}", match.group(2)
            if nic in legend:
                if legend[nic][0] != device:
                    self.fail(
                        index + 1,
                        f"expected one name per NIC, got {nic} = {legend[nic][0]!r} at line "
                        f"{legend[nic][1]} and {device!r} here",
                    )
                continue
            legend[nic] = (device, index + 1)
        return legend
