"""Readers of Slurm's node, GRES and network-topology descriptions, and the importer.

* ``gres.conf``: :func:`parse_gres_conf` reads the ``Name=gpu`` records with their node
  names, type, device file, core list and NVLink vector; :func:`gres_links_matrix` turns
  the ``Links=`` vectors of one node into a link-label matrix.
* ``scontrol -d show node`` output: :func:`parse_scontrol_nodes`.
* ``topology.conf`` (tree and block forms) and ``scontrol show topology`` output (tree):
  :func:`parse_topology_conf`.
* ``sinfo -O GresUsed,NodeList`` output: :func:`parse_sinfo_gres_used`.
* Slurm hostlist expressions (``tux[0-3,7]``, ``n[001-010]``): :func:`expand_hostlist`,
  re-exported from :mod:`placer.text.hostlist`.
* :func:`build_snapshot` makes a placer/v1 ClusterSnapshot document out of the parsed
  records; :func:`snapshot_from_slurm` reads the three files and returns the
  :class:`placer.ClusterSnapshot` that document decodes to (decoded once by
  :func:`placer.schema.snapshot_from_dict`, every check of the schema included), and
  :func:`import_slurm` returns it with the document (:class:`SlurmImport`), which
  ``placer import slurm`` writes.

Only what placement needs is read. Errors are :class:`placer.exceptions.InvalidInputError`
with ``where`` = ``"<source>:<line>"``; a fault the schema finds in a node of the document
is reported at the node's ``NodeName=`` line, its placer/v1 path in parentheses after the
message.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NoReturn, Union

from placer.text.files import read_text
from placer.limits import MAX_GPUS
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot
from placer.schema import snapshot_from_dict
from placer.adapters.slurm.jobs import SlurmJob, job_pods, parse_scontrol_jobs
from placer.adapters.slurm.values import NO_VALUE, mem_mib, number_list, tres, tres_gpus, whole
from placer.text.hostlist import MAX_HOSTLIST_NAMES, expand_hostlist
from placer.mig.layout import fewest_gpus, layout_instances
from placer.model.mig_profiles import PROFILE_NAME, MigTable, model_key, tables
from placer.model.labels import SLURM_REASON_LABEL, SLURM_STATE_LABEL
from placer.text.lines import clip, some_of, split_outside

__all__ = [
    "GresGpu",
    "parse_gres_conf",
    "gres_links_matrix",
    "MAX_HOSTLIST_NAMES",
    "UNSCHEDULABLE_STATES",
    "SlurmNode",
    "SlurmTopology",
    "expand_hostlist",
    "parse_scontrol_nodes",
    "parse_topology_conf",
    "parse_sinfo_gres_used",
    "build_snapshot",
    "SlurmImport",
    "import_slurm",
    "import_slurm_texts",
    "snapshot_from_slurm",
]

PathLike = Union[str, "os.PathLike[str]"]

_MAX_NVLINKS = 64
_PAIR = re.compile(r'([^\s=#"]+)=("[^"]*"|[^\s"]*)')
_WORD = re.compile(r'(?:[^\s"]|"[^"]*")+|"[^"]*')
_LINK_VALUE = re.compile(r"-1|0|[1-9][0-9]{0,2}")
# Keys that only make sense on a record with Name=.
_RECORD_KEYS = frozenset(("type", "file", "links", "cores", "count", "flags"))


@dataclass(frozen=True)
class GresGpu:
    """One ``Name=gpu`` record of ``gres.conf``.

    Attributes
    ----------
    node_names : str or None
        The ``NodeName=`` value (hostlist text as written), ``None`` when absent.
    type : str or None
        ``Type=``.
    file : str or None
        ``File=`` as written; may be a range like ``/dev/nvidia[0-3]``.
    links : tuple of int or None
        ``Links=`` as integers: ``-1`` for the GPU itself, else its NVLink count to the
        GPU at that position (0 = none).
    cores : str or None
        ``Cores=`` (or its deprecated alias ``CPUs=``) as written.
    line : int
        1-based line of the record.
    """

    node_names: str | None
    type: str | None
    file: str | None
    links: tuple[int, ...] | None
    cores: str | None
    line: int


def parse_gres_conf(text: str, source: str = "<text>") -> list[GresGpu]:
    """Parse ``gres.conf`` text and return its ``Name=gpu`` records in file order.

    A record is whitespace-separated ``Key=Value`` pairs on one line (a trailing ``\\``
    continues it on the next); keys are case-insensitive, ``#`` starts a comment, values
    may be double-quoted. Lines without ``Name=`` (``AutoDetect=nvml``, ...) and records
    of other GRES (``mps``, ``shard``, ...) are skipped, as is a line echoing an
    ``scontrol`` command.

    Parameters
    ----------
    text : str
        The file content.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of GresGpu
        One entry per ``Name=gpu`` line.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a word that is not ``Key=Value``, a
        key given twice (``Cores=`` and ``CPUs=`` count as the same key), ``Type=``/
        ``File=``/... without ``Name=``, a ``Links=`` value that is not a comma list
        of integers from -1 to 64, or a line of another Slurm file (``SwitchName=``/
        ``BlockName=`` of topology.conf, the records of ``scontrol show node`` or ``show
        job``), naming the option that reads it.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    gpus: list[GresGpu] = []
    for line_no, record in _logical_lines(text):
        where = f"{source}:{line_no}"
        if _SCONTROL_ECHO.fullmatch(record.strip()):
            continue  # the next line tells which scontrol output this is
        _refuse_other_file(_ANY_KEY.findall(record), where, "--gres", "gres.conf (Name=gpu lines)")
        fields = _fields(record, where)
        if "name" not in fields:
            extra = [f"{key.capitalize()}=" for key in sorted(fields) if key in _RECORD_KEYS]
            if extra:
                raise InvalidInputError(
                    f"{source}:{line_no}", f"expected Name= on a line with {', '.join(extra)}"
                )
            continue
        if fields["name"].lower() != "gpu":
            continue
        links = fields.get("links")
        gpus.append(
            GresGpu(
                node_names=fields.get("nodename"),
                type=fields.get("type"),
                file=fields.get("file"),
                links=None if links is None else _parse_links(links, f"{source}:{line_no}"),
                cores=fields.get("cores"),
                line=line_no,
            )
        )
    return gpus


def gres_links_matrix(
    gpus: list[GresGpu], source: str = "<text>"
) -> tuple[tuple[str, ...], ...]:
    """Turn the ``Links=`` vectors of one node's GPUs into a matrix of link labels.

    GPU ``i`` is the ``i``-th record in file order, so its ``-1`` must be at position
    ``i`` (Slurm orders GPUs by that position: list the records in that order). The
    labels use the ``nvidia-smi topo -m`` vocabulary: ``"X"`` on the diagonal,
    ``"NV<k>"`` for ``k`` NVLinks and ``"SYS"`` for 0. gres.conf says nothing about the
    PCIe path between GPUs without NVLink, so ``"SYS"`` (the farthest PCIe relation) is
    the conservative reading, not a measured one.

    Parameters
    ----------
    gpus : list of GresGpu
        The records of one node, as :func:`parse_gres_conf` returns them; each must be a
        single device (``File=`` not a range or list) with ``Links=``.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    tuple of tuple of str
        ``n x n`` symmetric label matrix.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` when no GPU is given (line 1), some GPUs
        have ``Links=`` and others not, the records are for different ``NodeName=``
        values, ``File=`` names several devices, a vector's length differs from the
        number of GPUs, its ``-1`` is missing, repeated or off the diagonal, or two GPUs
        disagree on the NVLink count between them.
    """
    if not gpus:
        raise InvalidInputError(f"{source}:1", "expected Name=gpu records with Links=, got none")
    first = gpus[0]
    if all(gpu.links is None for gpu in gpus):
        raise InvalidInputError(
            f"{source}:{first.line}", "expected Links= on the GPU records, got none"
        )
    for gpu in gpus:
        where = f"{source}:{gpu.line}"
        if (gpu.links is None) != (first.links is None):
            with_links, without = (first, gpu) if gpu.links is None else (gpu, first)
            raise InvalidInputError(
                where,
                f"expected Links= on every GPU or on none, got Links= at line "
                f"{with_links.line} but not at line {without.line}",
            )
        if gpu.node_names != first.node_names:
            raise InvalidInputError(
                where,
                f"expected the records of one node, got NodeName={gpu.node_names} after "
                f"NodeName={first.node_names} (line {first.line})",
            )
        if gpu.file is not None and re.search(r"[\[\],]", gpu.file):
            raise InvalidInputError(
                where, f"expected one device per record with Links=, got File={gpu.file}"
            )
    n = len(gpus)
    rows: list[tuple[str, ...]] = []
    for i, gpu in enumerate(gpus):
        where = f"{source}:{gpu.line}"
        links = gpu.links
        assert links is not None
        if len(links) != n:
            raise InvalidInputError(
                where, f"expected {n} Links= entries (one per GPU record), got {len(links)}"
            )
        selves = [j for j, value in enumerate(links) if value == -1]
        if selves != [i]:
            got = (
                "none"
                if not selves
                else f"-1 at position{'s' if len(selves) > 1 else ''} "
                f"{', '.join(map(str, selves))}"
            )
            hint = (
                "; Slurm numbers GPUs by the position of -1, so list the records in that order"
                if len(selves) == 1
                else ""
            )
            raise InvalidInputError(
                where,
                f"expected -1 (self) only at position {i} (GPU record {i} in file order), "
                f"got {got}{hint}",
            )
        for j in range(i):
            other = gpus[j].links
            assert other is not None
            if links[j] != other[i]:
                raise InvalidInputError(
                    where,
                    f"expected {other[i]} links to GPU record {j} (line {gpus[j].line} has "
                    f"{other[i]} to this one), got {links[j]}",
                )
        rows.append(
            tuple("X" if value == -1 else "SYS" if value == 0 else f"NV{value}" for value in links)
        )
    return tuple(rows)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Split into (first line number, content) with comments removed and ``\\`` joined."""
    result: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    lines = text.split("\n")
    for index, raw in enumerate(lines):
        content = raw.split("#", 1)[0].rstrip("\r").rstrip()
        if not pending:
            start = index + 1
        if content.endswith("\\"):
            pending.append(content[:-1])
            continue
        pending.append(content)
        record = " ".join(pending)
        pending = []
        if record.strip():
            result.append((start, record))
    if pending and " ".join(pending).strip():
        result.append((start, " ".join(pending)))
    return result


def _fields(record: str, where: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for word in _WORD.finditer(record):
        match = _PAIR.fullmatch(word.group(0))
        if match is None:
            _fail(where, f"expected Key=Value, got {word.group(0)!r}")
        key, value = match.group(1).lower(), match.group(2)
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        canonical = "cores" if key == "cpus" else key
        if canonical in fields:
            _fail(where, f"expected each key once, got {match.group(1)}= again")
        fields[canonical] = value
    return fields


# The keys that tell one Slurm file from another, lowercase; first match wins.
_FILE_KINDS: tuple[tuple[frozenset[str], str, str], ...] = (
    (
        frozenset(("switchname", "blockname", "blocksizes")),
        "a topology line (topology.conf, scontrol show topology)",
        "--topology",
    ),
    (frozenset(("jobid", "jobname", "jobstate")), "a line of scontrol show job output", "--jobs"),
    (
        frozenset((
            "arch", "corespersocket", "cputot", "cpualloc", "cpuefctv", "realmemory", "state",
            "gres", "gresused", "cfgtres", "alloctres", "nodeaddr", "nodehostname", "partitions",
        )),
        "a line of scontrol show node output",
        "--nodes",
    ),
    (frozenset(("name", "autodetect", "file", "links", "multiplefiles")), "a gres.conf line", "--gres"),
)
_ANY_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_]*)=")


def _refuse_other_file(keys: list[str], where: str, option: str, expected: str) -> None:
    """Refuse a line whose ``keys`` belong to another Slurm file than the one ``option``
    reads, naming that file and the option that reads it.

    Raises
    ------
    InvalidInputError
        At ``where``, when a key marks a topology.conf, scontrol show job or node, or
        gres.conf line and that file is not the one ``option`` reads.
    """
    for marks, kind, its_option in _FILE_KINDS:
        marked = [key for key in keys if key.lower() in marks]
        if marked:
            if its_option != option:
                _fail(where, f"expected {expected}, got {kind} ({marked[0]}=): "
                             f"give that file as {its_option}")
            return


def _parse_links(value: str, where: str) -> tuple[int, ...]:
    parts = [part.strip() for part in value.split(",")]
    for part in parts:
        if not _LINK_VALUE.fullmatch(part) or int(part) > _MAX_NVLINKS:
            _fail(
                where,
                "expected Links= as comma-separated integers (-1 for self, else the NVLink "
                f"count 0..{_MAX_NVLINKS}), got {value!r}",
            )
    return tuple(int(part) for part in parts)


def _fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)


# ------------------------------------------------------------------- scontrol show node

UNSCHEDULABLE_STATES = frozenset(
    (
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "MAINT",
        "NOT_RESPONDING",
        "FUTURE",
        "INVALID",
        "INVALID_REG",
        "REBOOT_ISSUED",
    )
)
"""``State=`` flags that make a node ``unschedulable`` (a trailing ``*`` on a flag is
``NOT_RESPONDING``, a trailing ``$`` is ``MAINT``)."""


@dataclass(frozen=True)
class SlurmNode:
    """One node record of ``scontrol -d show node`` output.

    Attributes
    ----------
    name : str
        ``NodeName=``.
    line : int
        1-based line of ``NodeName=``.
    cpus : int or None
        Schedulable CPUs: ``CPUEfctv=`` (``CPUTot=`` minus the specialized cores of
        ``CoreSpecCount``/``CPUSpecList``, which jobs cannot get), else ``CPUTot=``, else
        the ``cpu=`` of ``CfgTRES=``; ``None`` when none is shown.
    memory_mib : int or None
        ``RealMemory=`` (Slurm's MB are MiB).
    gpus : int
        Total ``gpu`` count of ``Gres=`` (all types).
    gpu_model : str or None
        The GPU type when every ``gpu`` entry of ``Gres=`` names the same one, else
        ``None`` (untyped, or several types).
    gpu_types : tuple of str
        The distinct GPU types of ``Gres=``, in order.
    used_gpus : tuple of int
        GPU indices held by jobs, from the ``IDX:`` lists of ``GresUsed=``.
    used_unknown_gpus : int
        GPUs held at unknown indices: a ``GresUsed=`` entry without ``IDX:``, or, when
        ``GresUsed=`` is absent (plain ``scontrol show node``), the ``gres/gpu`` count of
        ``AllocTRES=``.
    alloc_cpus : int or None
        ``CPUAlloc=``, else the ``cpu=`` of ``AllocTRES=``.
    alloc_memory_mib : int or None
        ``AllocMem=``, else the ``mem=`` of ``AllocTRES=`` (rounded up to MiB).
    state : str or None
        ``State=`` as written.
    unschedulable : bool
        ``State=`` has a flag of :data:`UNSCHEDULABLE_STATES`.
    partitions : str or None
        ``Partitions=`` as written.
    features : str or None
        ``ActiveFeatures=`` (else ``AvailableFeatures=``) as written.
    reason : str or None
        ``Reason=`` as written (why the node was drained or set down), ``None`` without one.
    mig : tuple of (str, int)
        The ``gpu`` entries of ``Gres=`` whose type is a MIG profile (``gpu:1g.10gb:4``):
        (profile, count), in order; their count is part of ``gpus``.
    mig_used : tuple of (str, int)
        MIG instances held by jobs: the MIG-typed entries of ``GresUsed=`` (else the
        ``gres/gpu:<profile>`` of ``AllocTRES=``), (profile, count); their ``IDX:`` are
        Slurm's device indices, not GPUs, and are not in ``used_gpus``.
    """

    name: str
    line: int
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: int = 0
    gpu_model: str | None = None
    gpu_types: tuple[str, ...] = ()
    used_gpus: tuple[int, ...] = ()
    used_unknown_gpus: int = 0
    alloc_cpus: int | None = None
    alloc_memory_mib: int | None = None
    state: str | None = None
    unschedulable: bool = False
    partitions: str | None = None
    features: str | None = None
    reason: str | None = None
    mig: tuple[tuple[str, int], ...] = ()
    mig_used: tuple[tuple[str, int], ...] = ()


_KEY = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z0-9_]*)=")
# Free text set by people: the value runs to the end of its line.
_REST_OF_LINE_KEYS = frozenset(("Reason", "Comment", "Extra"))
_SCONTROL_ECHO = re.compile(r"(?:\S*[$#>%]\s*)?scontrol(?:\s.*)?")
_SINFO_ECHO = re.compile(r"(?:\S*[$#>%]\s*)?sinfo(?:\s.*)?")
_NODE_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_GRES_ITEM = re.compile(
    r"([A-Za-z][A-Za-z0-9_]*)(?::(\(null\)|[^:()\s,]+))?:([0-9]{1,18}[KMGTP]?)"
    r"(?:\(([^()]*)\))?"
)
_STATE_FLAG = re.compile(r"([A-Z][A-Z_]*)([*~#%!$@^\-]*)")


def parse_scontrol_nodes(text: str, source: str = "<text>") -> list[SlurmNode]:
    """Parse ``scontrol show node`` output (best with ``-d``) into node records.

    A record starts at a line beginning ``NodeName=`` (after any indentation) and runs to
    the next such line, whatever blank lines lie between: Slurm 24.05 prints a line of only
    the indentation before ``Reason=`` and after each record, and a copy that lost those
    blanks (an empty line, or no separator at all) reads the same. Its lines hold
    ``Key=Value`` pairs separated by whitespace, where a value runs up to the next
    `` Key=`` (so ``OS=Linux 5.15 #152-Ubuntu SMP ...`` keeps its spaces; ``Reason=``,
    ``Comment=`` and ``Extra=`` run to the end of the line). Leading indentation, trailing
    spaces and CRLF are ignored; a line echoing the command (``root@host:~# scontrol show
    nodes``, indented or not) is skipped.

    Read per node: ``CPUEfctv``/``CPUTot``/``CfgTRES`` (CPUs), ``RealMemory``, ``Gres``
    (``gpu:<type>:<n>(S:...)``, comma-joined; other GRES are checked and skipped),
    ``GresUsed`` (``gpu:<type>:<n>(IDX:0-1,3)``, ``IDX:N/A`` for none), ``CPUAlloc``,
    ``AllocMem``, ``AllocTRES``, ``State``, ``Partitions``, ``ActiveFeatures``. Other keys
    are kept only for their syntax.

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of SlurmNode
        In the order of the output.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for text outside a record, a line that does
        not start with ``Key=``, a key given twice in a record, a repeated or malformed
        node name, a count that is not a whole number, a ``Gres``/``GresUsed``/TRES list
        that does not parse (e.g. cut short), more than 64 GPUs, GPU indices that repeat,
        disagree with their count or exceed the node's GPUs, allocations over the node's
        CPUs or memory, a line of another Slurm file (topology.conf, gres.conf, ``scontrol
        show job``), naming the option that reads it, or no record at all (line 1).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    records: list[tuple[int, dict[str, tuple[str, int]]]] = []
    current: dict[str, tuple[str, int]] | None = None
    for index, raw in enumerate(text.split("\n")):
        line_no = index + 1
        where = f"{source}:{line_no}"
        stripped = raw.strip()
        if not stripped or _SCONTROL_ECHO.fullmatch(stripped):
            continue
        if stripped.startswith("NodeName="):
            current = {}
            records.append((line_no, current))
        elif current is None:
            _refuse_other_file(_ANY_KEY.findall(stripped), where, "--nodes",
                               "scontrol show node output")
            _fail(where, f"expected a node record starting NodeName=, got {clip(stripped)!r}")
        pairs = _line_pairs(stripped, where)
        _refuse_other_file([key for key, _ in pairs], where, "--nodes",
                           "scontrol show node output")
        for key, value in pairs:
            if key in current:
                _fail(where, f"expected each key once per node, got {key}= again "
                             f"(line {current[key][1]})")
            current[key] = (value, line_no)
    if not records:
        _fail(f"{source}:1", "expected scontrol show node output (NodeName= records), got none")
    nodes: list[SlurmNode] = []
    seen: dict[str, int] = {}
    for line_no, record in records:
        node = _scontrol_node(record, line_no, source)
        if node.name in seen:
            _fail(f"{source}:{line_no}",
                  f"expected each node once, got NodeName={node.name} again "
                  f"(line {seen[node.name]})")
        seen[node.name] = line_no
        nodes.append(node)
    return nodes


def _line_pairs(line: str, where: str) -> list[tuple[str, str]]:
    matches = list(_KEY.finditer(line))
    if not matches or matches[0].start() != 0:
        _fail(where, f"expected Key=Value at the start of the line, got {clip(line)!r}")
    pairs: list[tuple[str, str]] = []
    for i, match in enumerate(matches):
        key = match.group(1)
        if key in _REST_OF_LINE_KEYS:
            pairs.append((key, line[match.end():].strip()))
            break
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        pairs.append((key, line[match.end():end].strip()))
    return pairs


def _gres_items(value: str, where: str, key: str) -> list[tuple[str, str | None, str, str | None]]:
    """Split ``gpu:a100:2(S:0-1),mps:200`` into (name, type, count, parenthesised part)."""
    if value in NO_VALUE:
        return []
    items, _ = split_outside(value, "(", ")")
    out: list[tuple[str, str | None, str, str | None]] = []
    for item in items:
        match = _GRES_ITEM.fullmatch(item)
        if match is None:
            _fail(where, f"expected {key} as name[:type]:count[(...)],... , got {item!r} in "
                         f"{clip(value)!r}")
        name, gtype, count, inner = match.groups()
        out.append((name, None if gtype in (None, "(null)") else gtype, count, inner))
    return out


def _index_list(text: str, where: str, limit: int, what: str) -> list[int]:
    """``0-1,3`` as indices, each below ``limit``."""
    return number_list(
        text, where, limit, f"expected {what} as indices like 0-1,3, got {text!r}",
        lambda element: f"expected {what} as indices like 0-1,3, got backward range {element!r}",
        lambda hi: f"expected {what} below {limit} (the node's GPUs), got {hi}",
    )


def _take_idx(listed: str, count: int, where: str, limit: int, key: str, used: list[int]) -> None:
    """Add to ``used`` the ``count`` GPU indices of ``IDX:<listed>`` (``N/A`` for none) in
    ``key``; each must be below ``limit`` and not in ``used`` yet."""
    indices = [] if listed == "N/A" else _index_list(listed, where, limit, "IDX: GPUs")
    if len(indices) != count:
        _fail(where, f"expected {count} GPU indices in IDX:{listed}, got {len(indices)}")
    for index in indices:
        if index in used:
            _fail(where, f"expected each GPU index once in {key}, got {index} again")
        used.append(index)


def _scontrol_node(record: dict[str, tuple[str, int]], line: int, source: str) -> SlurmNode:
    def at(key: str) -> str:
        return f"{source}:{record[key][1]}"

    def get(key: str) -> str | None:
        entry = record.get(key)
        return None if entry is None else entry[0]

    name = record["NodeName"][0]
    if not _NODE_NAME.fullmatch(name):
        _fail(at("NodeName"), f"expected a node name (letters, digits, _ . -), got {name!r}")

    cfg = tres(get("CfgTRES") or "", at("CfgTRES") if "CfgTRES" in record else "", "CfgTRES")
    cpus: int | None = None
    for key in ("CPUEfctv", "CPUTot"):
        value = get(key)
        if value is not None:
            cpus = whole(value, at(key), f"{key}=")
            break
    else:
        if "cpu" in cfg:
            cpus = whole(cfg["cpu"], at("CfgTRES"), "the cpu of CfgTRES=")
    memory = get("RealMemory")
    memory_mib = None if memory is None else whole(memory, at("RealMemory"), "RealMemory=")

    gpus = 0
    types: list[str | None] = []
    mig: dict[str, int] = {}
    gres = get("Gres")
    if gres is not None:
        for gname, gtype, count, _ in _gres_items(gres, at("Gres"), "Gres="):
            if gname != "gpu":
                continue
            n = whole(count, at("Gres"), "a GPU count in Gres=")
            gpus += n
            if _is_mig_type(gtype):
                mig[gtype] = mig.get(gtype, 0) + n  # type: ignore[index]
            else:
                types.append(gtype)
        if gpus > MAX_GPUS:
            _fail(at("Gres"), f"expected at most {MAX_GPUS} GPUs on a node, got {gpus}")
    distinct = tuple(dict.fromkeys(t for t in types if t is not None))
    model = distinct[0] if len(distinct) == 1 and None not in types else None

    used: list[int] = []
    unknown = 0
    mig_used: dict[str, int] = {}
    alloc = tres(get("AllocTRES") or "", at("AllocTRES") if "AllocTRES" in record else "",
                  "AllocTRES")
    used_text = get("GresUsed")
    if used_text is not None:
        where = at("GresUsed")
        for gname, gtype, count_text, inner in _gres_items(used_text, where, "GresUsed="):
            if gname != "gpu":
                continue
            count = whole(count_text, where, "a GPU count in GresUsed=")
            if _is_mig_type(gtype):
                if inner is not None and inner.startswith("IDX:"):
                    _take_idx(inner[4:], count, where, gpus, "GresUsed=", [])  # device indices: checked only
                if count:
                    mig_used[gtype] = mig_used.get(gtype, 0) + count  # type: ignore[index]
                continue
            if inner is None:
                unknown += count
                continue
            if not inner.startswith("IDX:"):
                _fail(where, f"expected (IDX:...) after a GPU count in GresUsed=, got ({inner})")
            _take_idx(inner[4:], count, where, gpus, "GresUsed=", used)
        if len(used) + unknown + sum(mig_used.values()) > gpus:
            _fail(where, f"expected at most the node's {gpus} GPUs in use, "
                         f"got {len(used) + unknown + sum(mig_used.values())}")
    elif alloc:
        count = tres_gpus(alloc, at("AllocTRES"), "AllocTRES")
        if count:
            if count > gpus:
                _fail(at("AllocTRES"),
                      f"expected at most the node's {gpus} GPUs allocated, got {count}")
            for tres_name, amount in alloc.items():
                gtype = tres_name[len("gres/gpu:"):] if tres_name.startswith("gres/gpu:") else None
                if _is_mig_type(gtype):
                    n = whole(amount, at("AllocTRES"), f"{tres_name} of AllocTRES=")
                    if n:
                        mig_used[gtype] = n  # type: ignore[index]
            unknown = max(0, count - sum(mig_used.values()))

    def allocated(
        key: str, tres: str, parse: Callable[[str, str, str], int], total: int | None, of: str
    ) -> int | None:
        """``key=``, else the ``tres`` of AllocTRES=, else None; at most ``total`` (``of``)."""
        if key in record:
            where, amount = at(key), whole(record[key][0], at(key), f"{key}=")
        elif tres in alloc:
            where = at("AllocTRES")
            amount = parse(alloc[tres], where, f"the {tres} of AllocTRES=")
        else:
            return None
        if total is not None and amount > total:
            _fail(where, f"expected at most the node's {of} allocated, got {amount}")
        return amount

    alloc_cpus = allocated("CPUAlloc", "cpu", whole, cpus, f"{cpus} CPUs")
    alloc_mem = allocated("AllocMem", "mem", mem_mib, memory_mib, f"RealMemory={memory_mib} MiB")

    state = get("State")
    unschedulable = False
    if state is not None:
        for flag in state.split("+"):
            match = _STATE_FLAG.fullmatch(flag)
            if match is None:
                _fail(at("State"), f"expected State= as FLAG+FLAG (e.g. IDLE+DRAIN), got {state!r}")
            word, marks = match.groups()
            if word in UNSCHEDULABLE_STATES or "*" in marks or "$" in marks:
                unschedulable = True

    partitions = get("Partitions")
    reason = get("Reason")
    features = get("ActiveFeatures")
    if features is None or features in NO_VALUE:
        features = get("AvailableFeatures")
    return SlurmNode(
        name=name,
        line=line,
        cpus=cpus,
        memory_mib=memory_mib,
        gpus=gpus,
        gpu_model=model,
        gpu_types=distinct,
        used_gpus=tuple(used),
        used_unknown_gpus=unknown,
        alloc_cpus=alloc_cpus,
        alloc_memory_mib=alloc_mem,
        state=state,
        unschedulable=unschedulable,
        partitions=None if partitions in NO_VALUE else partitions,
        features=None if features in NO_VALUE else features,
        reason=None if reason in NO_VALUE else reason,
        mig=tuple(mig.items()),
        mig_used=tuple(mig_used.items()),
    )


def _is_mig_type(gres_type: str | None) -> bool:
    """A GRES type that names a MIG profile (``1g.10gb``), as Slurm's MIG GRES are typed."""
    return gres_type is not None and PROFILE_NAME.match(gres_type.lower()) is not None


# ---------------------------------------------------------------------- topology.conf


@dataclass(frozen=True)
class SlurmTopology:
    """What ``topology.conf`` (or ``scontrol show topology``) says about where nodes sit.

    Attributes
    ----------
    form : str
        ``"tree"`` (``SwitchName=`` lines), ``"block"`` (``BlockName=``/``BlockSizes=``)
        or ``"none"`` (no such line).
    levels : tuple of str
        Topology levels, outermost first: ``switch1`` (the top switches) ... ``switch<D>``
        (the leaf switches) for a tree of depth ``D``; ``("block",)`` for blocks.
    nodes : mapping of str to mapping of str to str
        Per node, its switch or block name at each level.
    block_sizes : tuple of int
        ``BlockSizes=`` (validated, not turned into levels).
    """

    form: str
    levels: tuple[str, ...]
    nodes: Mapping[str, Mapping[str, str]]
    block_sizes: tuple[int, ...] = ()


_TOPOLOGY_KEYS = {
    "switchname": "SwitchName",
    "switches": "Switches",
    "nodes": "Nodes",
    "linkspeed": "LinkSpeed",
    "level": "Level",
    "blockname": "BlockName",
    "blocksizes": "BlockSizes",
}
_LINE_KINDS = {
    "switchname": frozenset(("switchname", "switches", "nodes", "linkspeed", "level")),
    "blockname": frozenset(("blockname", "nodes")),
    "blocksizes": frozenset(("blocksizes",)),
}


def parse_topology_conf(text: str, source: str = "<text>") -> SlurmTopology:
    """Parse Slurm's ``topology.conf`` (topology/tree or topology/block), or the output of
    ``scontrol show topology`` for a tree.

    Tree form: ``SwitchName=<name>`` with either ``Nodes=<hostlist>`` (a leaf switch) or
    ``Switches=<hostlist>`` (its child switches), optional ``LinkSpeed=<n>`` (checked,
    unused). Levels run from the top switches down: ``switch1``, ``switch2``, ...; a
    node's innermost level is always its leaf switch: in a tree whose branches differ in
    depth, a node of a shorter branch repeats its leaf switch on the deeper levels, so
    every node has every level. A switch (or node) listed under several parents keeps
    the first parent in file order (Slurm's own examples list every leaf under every
    spine of a fat tree; the spines are alike, so any one stands for them); the other
    parents stay in the file but no node's path goes through them.

    ``scontrol show topology`` prints each switch as ``SwitchName=<name> Level=<n>
    LinkSpeed=<n>`` then ``Nodes=`` and, above the leaves, ``Switches=``: a line with
    ``Level=`` is read that way. ``Level=0`` is a leaf switch (``Nodes=``, empty for a
    switch without nodes); a higher switch must list ``Switches=`` (the tree comes from
    them, as in topology.conf), and its ``Nodes=``, when shown, must be exactly the nodes
    under those switches. ``Level=`` and ``LinkSpeed=`` are checked, not used. A line
    echoing the command (``root@login:~# scontrol show topology``) is skipped.

    Block form: ``BlockName=<name> Nodes=<hostlist>`` lines and one ``BlockSizes=<n>,...``
    line; one level, ``block``. A node may be in one block only.

    Keys are case-insensitive, ``#`` starts a comment, ``\\`` at the end of a line
    continues it.

    Parameters
    ----------
    text : str
        The file content.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    SlurmTopology

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a word that is not ``Key=Value``, an
        unknown key, a line that is none of the three kinds, tree and block lines in one
        file, a repeated switch or block name, a name that is a list, a switch with both
        or neither of ``Nodes=``/``Switches=``, a child switch that is not defined, a
        switch that is its own ancestor, a node in two blocks, a bad hostlist, a
        non-numeric ``LinkSpeed=``, ``Level=`` or ``BlockSizes=``, a topology.yaml
        document, a line of another Slurm file (gres.conf's ``Name=``/``AutoDetect=``, the
        records of ``scontrol show node`` or ``show job``), naming the option that reads
        it; in ``scontrol show topology`` output, a leaf (``Level=0``) without
        ``Nodes=`` or with ``Switches=``, a higher switch without ``Switches=`` (a line cut
        short), or one whose ``Nodes=`` differ from the nodes under its switches.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    text = "\n".join(
        "" if _SCONTROL_ECHO.fullmatch(raw.strip()) else raw for raw in text.split("\n")
    )
    switches: dict[str, tuple[int, dict[str, str]]] = {}
    shown_nodes: dict[str, tuple[int, str]] = {}  # switch above the leaves -> its Nodes=
    blocks: dict[str, int] = {}
    block_of: dict[str, tuple[str, int]] = {}
    block_sizes: tuple[int, ...] | None = None
    sizes_line = 0
    form = "none"
    form_line = 0
    for line_no, record in _logical_lines(text):
        where = f"{source}:{line_no}"
        first = record.split()[0]
        if first in ("-", "---") or first.endswith(":"):
            _fail(where, "expected topology.conf Key=Value lines, got YAML "
                         "(topology.yaml is not read; give topology.conf)")
        _refuse_other_file(_ANY_KEY.findall(record), where, "--topology",
                           "topology.conf (SwitchName= or BlockName= lines)")
        fields = _fields(record, where)
        kinds = [kind for kind in _LINE_KINDS if kind in fields]
        if len(kinds) != 1:
            got = "none of them" if not kinds else " and ".join(
                f"{_TOPOLOGY_KEYS[k]}=" for k in kinds)
            _fail(where, "expected one of SwitchName=, BlockName= or BlockSizes= per line, "
                         f"got {got}")
        kind = kinds[0]
        for key in fields:
            if key not in _LINE_KINDS[kind]:
                shown = _TOPOLOGY_KEYS.get(key, key)
                allowed = ", ".join(f"{_TOPOLOGY_KEYS[k]}=" for k in sorted(_LINE_KINDS[kind]))
                _fail(where, f"expected only {allowed} "
                             f"on a {_TOPOLOGY_KEYS[kind]}= line, got {shown}=")
        line_form = "tree" if kind == "switchname" else "block"
        if form == "none":
            form, form_line = line_form, line_no
        elif form != line_form:
            _fail(where, f"expected only {form} lines (topology/{form}, from line {form_line}), "
                         f"got a {_TOPOLOGY_KEYS[kind]}= line")
        if kind == "blocksizes":
            if block_sizes is not None:
                _fail(where, f"expected BlockSizes= once, got it again (line {sizes_line})")
            block_sizes = tuple(
                _positive(part, where, "BlockSizes=") for part in fields["blocksizes"].split(",")
            )
            sizes_line = line_no
            continue
        name = _single_name(fields[kind], where, _TOPOLOGY_KEYS[kind])
        if kind == "blockname":
            if name in blocks:
                _fail(where, f"expected each block once, got BlockName={name} again "
                             f"(line {blocks[name]})")
            blocks[name] = line_no
            if "nodes" not in fields:
                _fail(where, "expected Nodes= on a BlockName= line")
            for node in expand_hostlist(fields["nodes"], where):
                other = block_of.get(node)
                if other is not None and other[0] != name:
                    _fail(where, f"expected each node in one block, got {node} in {name} and in "
                                 f"{other[0]} (line {other[1]})")
                block_of[node] = (name, line_no)
            continue
        if name in switches:
            _fail(where, f"expected each switch once, got SwitchName={name} again "
                         f"(line {switches[name][0]})")
        if "level" in fields:
            _shown_switch(fields, where)
            if "switches" in fields and "nodes" in fields:
                shown_nodes[name] = (line_no, fields.pop("nodes"))
        elif ("nodes" in fields) == ("switches" in fields):
            both = "both" if "nodes" in fields else "neither"
            _fail(where, "expected either Nodes= (a leaf switch) or Switches= on a SwitchName= "
                         f"line, got {both}")
        if "linkspeed" in fields:
            whole(fields["linkspeed"], where, "LinkSpeed=")
        switches[name] = (line_no, fields)

    if form == "block":
        return SlurmTopology(
            "block", ("block",), {node: {"block": b} for node, (b, _) in block_of.items()},
            block_sizes or (),
        )
    if form == "none":
        return SlurmTopology("none", (), {})
    topology = _tree(switches, source)
    for name, (line_no, listed) in shown_nodes.items():
        _check_nodes_below(name, listed, line_no, switches, source)
    return topology


def _shown_switch(fields: dict[str, str], where: str) -> None:
    """Check a ``SwitchName=`` line of ``scontrol show topology`` (one with ``Level=``)."""
    level = whole(fields["level"], where, "Level=")
    if level == 0:
        if "switches" in fields:
            _fail(where, "expected Nodes= and no Switches= on a switch of Level=0 "
                         "(a leaf switch), got Switches=")
        if "nodes" not in fields:
            _fail(where, "expected Nodes= on a switch of Level=0 (a leaf switch)")
    elif "switches" not in fields:
        _fail(where, f"expected Switches= on a switch of Level={level} (cut short?)")


def _check_nodes_below(
    name: str,
    listed: str,
    line: int,
    switches: dict[str, tuple[int, dict[str, str]]],
    source: str,
) -> None:
    """Fail at ``line`` unless ``listed`` (a hostlist) names the nodes under switch ``name``
    (the child switches are known to be defined)."""
    below: set[str] = set()
    seen = {name}
    stack = [name]
    while stack:
        line_no, fields = switches[stack.pop()]
        at = f"{source}:{line_no}"
        if "switches" in fields:
            for child in expand_hostlist(fields["switches"], at):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        elif fields["nodes"]:
            below.update(expand_hostlist(fields["nodes"], at))
    where = f"{source}:{line}"
    shown = set(expand_hostlist(listed, where)) if listed else set()
    if shown != below:
        wrong = [f"{some_of(sorted(shown - below))} too"] if shown - below else []
        wrong += [f"{some_of(sorted(below - shown))} missing"] if below - shown else []
        _fail(where, f"expected Nodes= of SwitchName={name} to be the {len(below)} nodes under "
                     f"Switches=, got {' and '.join(wrong)}")


def _tree(switches: dict[str, tuple[int, dict[str, str]]], source: str) -> SlurmTopology:
    parent: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    for name, (line_no, fields) in switches.items():
        where = f"{source}:{line_no}"
        if "switches" in fields:
            for child in expand_hostlist(fields["switches"], where):
                if child not in switches:
                    _fail(where, f"expected defined switches in Switches=, got {child!r} "
                                 "(no SwitchName= line)")
                if child == name:
                    _fail(where, f"expected child switches, got {name} itself")
                parent.setdefault(child, name)
        elif fields["nodes"] or "level" not in fields:  # scontrol shows an empty leaf as Nodes=
            for node in expand_hostlist(fields["nodes"], where):
                leaf_of.setdefault(node, name)
    paths: dict[str, tuple[str, ...]] = {}  # switch -> switches from its top down to it
    for name in switches:
        chain = [name]
        while chain[-1] not in paths and chain[-1] in parent:
            up = parent[chain[-1]]
            if up in chain:
                cycle = " -> ".join(chain[chain.index(up):] + [up])
                _fail(f"{source}:{switches[up][0]}",
                      f"expected a tree, got switch {up} among its own ancestors "
                      f"(child -> parent: {cycle})")
            chain.append(up)
        path = paths.get(chain[-1], (chain[-1],))
        paths[chain[-1]] = path
        for below in reversed(chain[:-1]):
            path = path + (below,)
            paths[below] = path
    depth = max((len(paths[leaf]) for leaf in set(leaf_of.values())), default=0)
    levels = tuple(f"switch{i}" for i in range(1, depth + 1))
    nodes: dict[str, dict[str, str]] = {}
    for node, leaf in leaf_of.items():
        path = paths[leaf]
        path = path + (leaf,) * (depth - len(path))
        nodes[node] = dict(zip(levels, path))
    return SlurmTopology("tree", levels, nodes)


def _single_name(value: str, where: str, key: str) -> str:
    if not _NODE_NAME.fullmatch(value):
        _fail(where, f"expected one name (letters, digits, _ . -) in {key}=, got {value!r}")
    return value


def _positive(value: str, where: str, what: str) -> int:
    number = whole(value.strip(), where, f"the sizes of {what}")
    if number < 1:
        _fail(where, f"expected the sizes of {what} to be at least 1, got {number}")
    return number


# ------------------------------------------------------------------- sinfo -O GresUsed


def parse_sinfo_gres_used(text: str, source: str = "<text>") -> dict[str, tuple[int, ...]]:
    """Parse ``sinfo -N -O GresUsed,NodeList`` output: the GPU indices in use per node.

    The first line (after an optional echo of the ``sinfo`` command) is the header; it
    must name the columns ``GRES_USED`` and ``NODELIST`` (others may be present). Each
    other line holds one whitespace-free value per column. ``NODELIST`` may be a hostlist
    (``fb10dl[04-05]``); every node of it gets the same indices. Mind that ``sinfo -O``
    cuts values at the column width without warning; a cut ``GRES_USED`` usually fails to
    parse and is reported, widen the column (``-O GresUsed:80``) to avoid it.

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    dict of str to tuple of int
        Node name to the sorted GPU indices its jobs hold (``()`` for ``IDX:N/A``).

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a missing header or column, a line with
        another number of values than the header, a ``GRES_USED`` value that does not
        parse or whose ``IDX:`` list is missing, repeats or disagrees with its count, an
        index of 64 or more, a bad hostlist, or a node given twice.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    header: list[str] | None = None
    used: dict[str, tuple[int, ...]] = {}
    first_line: dict[str, int] = {}
    for index, raw in enumerate(text.split("\n")):
        line_no = index + 1
        where = f"{source}:{line_no}"
        words = raw.split()
        if not words:
            continue
        if header is None:
            if _SINFO_ECHO.fullmatch(raw.strip()):
                continue
            header = [word.upper() for word in words]
            missing = [col for col in ("GRES_USED", "NODELIST") if col not in header]
            if missing:
                _fail(where, f"expected a sinfo -O header with GRES_USED and NODELIST, "
                             f"got {clip(raw.strip())!r}")
            continue
        if len(words) != len(header):
            _fail(where, f"expected {len(header)} values ({' '.join(header)}), got {len(words)}")
        row = dict(zip(header, words))
        indices: list[int] = []
        for gname, _, count_text, inner in _gres_items(row["GRES_USED"], where, "GRES_USED"):
            if gname != "gpu":
                continue
            count = whole(count_text, where, "a GPU count in GRES_USED")
            if inner is None or not inner.startswith("IDX:"):
                _fail(where, f"expected (IDX:...) after gpu:{count} in GRES_USED, "
                             f"got {row['GRES_USED']!r}")
            _take_idx(inner[4:], count, where, MAX_GPUS, "GRES_USED", indices)
        for node in expand_hostlist(row["NODELIST"], where):
            if node in used:
                _fail(where, f"expected each node once, got {node} again (line {first_line[node]})")
            used[node] = tuple(sorted(indices))
            first_line[node] = line_no
    if header is None:
        _fail(f"{source}:1", "expected a sinfo -O header with GRES_USED and NODELIST, got nothing")
    return used


# --------------------------------------------------------------------------- importer


def build_snapshot(
    nodes: list[SlurmNode],
    gres: list[GresGpu] | None = None,
    topology: SlurmTopology | None = None,
    gres_source: str = "gres.conf",
    mig_model: str | None = None,
    jobs: list[SlurmJob] | None = None,
) -> dict[str, Any]:
    """Make a placer/v1 ClusterSnapshot document out of parsed Slurm descriptions.

    Per node (in the order of ``nodes``): ``cpuMilli`` = CPUs x 1000, ``memoryMiB``,
    ``gpus``, ``gpuModel`` (only when the node has one GPU type), ``unschedulable``,
    labels ``slurm.partitions``, ``slurm.features`` and ``slurm.state`` (when shown), and
    one running pod ``slurm/<node>/gres-used`` holding everything Slurm has allocated on
    the node (GPU indices of ``GresUsed``, ``unknownGpus`` for GPUs at unknown indices,
    ``cpuMilli``, ``memoryMiB``); the pod is left out when nothing is allocated.

    ``gres``: the records that apply to a node (no ``NodeName=``, or a hostlist naming
    it) give its ``gpuTopology`` matrix through their ``Links=`` (see
    :func:`gres_links_matrix`), after putting them in Slurm's GPU order (the position of
    ``-1``). Records without ``Links=`` give nothing; ``Cores=`` is not read. Nodes
    without GPUs ignore gres.conf.

    ``topology``: ``topologyLevels`` and each listed node's ``topology``; nodes the file
    does not list get none, and names that are not among ``nodes`` are ignored.

    MIG (GPU types that are MIG profiles, ``Gres=gpu:1g.10gb:4,gpu:3g.40gb:1``): Slurm
    counts instances, not GPUs, and does not say where they are. The node gets the
    whole GPUs of its other types plus the fewest GPUs the instances can be laid out on
    (the MIG GPUs first), ``mig`` static, ``migInstances`` laid out by
    :func:`placer.mig.layout.layout_instances`, and its ``gpuModel``: the one bundled
    table that has every profile, else the one of those a word of its features names
    (``h100``, ``a100-80gb``), else ``mig_model``. The running pod holds the first instances of each profile of
    ``mig_used``; whole GPUs in use become ``unknownGpus`` (Slurm's ``IDX:`` numbers all
    GRES devices, MIG ones included). gres.conf gives no ``Links=`` matrix to a MIG node.

    Parameters
    ----------
    nodes : list of SlurmNode
        From :func:`parse_scontrol_nodes`.
    gres : list of GresGpu, optional
        From :func:`parse_gres_conf`.
    topology : SlurmTopology, optional
        From :func:`parse_topology_conf`.
    gres_source : str
        Name of the gres.conf file in error locations.
    mig_model : str, optional
        The GPU model of the nodes with MIG types, when their profiles and features do
        not tell it.
    jobs : list of SlurmJob, optional
        Running jobs (:func:`placer.adapters.slurm.jobs.parse_scontrol_jobs`): a node
        they run on gets one pod per job with its priority and start time, a job on
        several nodes being a running gang, and ``slurm/<node>/gres-used`` keeps only
        what they do not account for (:func:`placer.adapters.slurm.jobs.job_pods`).

    Returns
    -------
    dict
        The document; :meth:`placer.ClusterSnapshot.from_dict` accepts it.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<gres_source>:<line>"`` for a bad ``NodeName=`` hostlist, a
        ``Links=`` matrix :func:`gres_links_matrix` rejects, or one whose size is not the
        node's GPU count; ``nodes[i]`` for a MIG node whose model is not known or whose
        instances cannot be laid out, whose jobs hold more than Slurm allocated on it,
        or that is a MIG node running a job of ``jobs``; ``jobs`` for a job on a node not
        among ``nodes`` (at the job's ``JobId=`` line).
    """
    on_node = _jobs_by_node(jobs or [], {node.name for node in nodes})
    applies: list[tuple[GresGpu, set[str] | None]] = []
    expanded: dict[str, set[str]] = {}
    for record in gres or ():
        if record.node_names is None:
            applies.append((record, None))
            continue
        names = expanded.get(record.node_names)
        if names is None:
            names = expanded[record.node_names] = set(
                expand_hostlist(record.node_names, f"{gres_source}:{record.line}")
            )
        applies.append((record, names))
    matrices: dict[tuple[int, ...], list[list[str]] | None] = {}

    levels = topology.levels if topology is not None else ()
    placed = topology.nodes if topology is not None else {}
    doc_nodes: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        doc: dict[str, Any] = {"name": node.name, "gpus": node.gpus}
        if node.gpu_model is not None:
            doc["gpuModel"] = node.gpu_model
        if node.mig:
            _mig_node(doc, node, mig_model, f"nodes[{i}]")
        if node.cpus is not None:
            doc["cpuMilli"] = node.cpus * 1000
        if node.memory_mib is not None:
            doc["memoryMiB"] = node.memory_mib
        if node.gpus and applies and not node.mig:
            mine = tuple(i for i, (_, names) in enumerate(applies)
                         if names is None or node.name in names)
            if mine not in matrices:
                matrices[mine] = _links_matrix([applies[i][0] for i in mine], gres_source)
            matrix = matrices[mine]
            if matrix is not None:
                if len(matrix) != node.gpus:
                    _fail(f"{gres_source}:{applies[mine[0]][0].line}",
                          f"expected Links= for the {node.gpus} GPUs of node {node.name} "
                          f"(scontrol Gres=), got {len(matrix)}")
                doc["gpuTopology"] = {"matrix": matrix}
        if node.name in placed:
            doc["topology"] = dict(placed[node.name])
        labels = {}
        if node.partitions is not None:
            labels["slurm.partitions"] = node.partitions
        if node.features is not None:
            labels["slurm.features"] = node.features
        if node.state is not None:
            labels[SLURM_STATE_LABEL] = node.state
        if node.reason is not None:
            labels[SLURM_REASON_LABEL] = node.reason
        if labels:
            doc["labels"] = labels
        doc["unschedulable"] = node.unschedulable
        pod: dict[str, Any] = {"name": f"slurm/{node.name}/gres-used"}
        if node.used_gpus and not node.mig:
            pod["gpus"] = sorted(node.used_gpus)
        unknown = node.used_unknown_gpus + (len(node.used_gpus) if node.mig else 0)
        if unknown:
            pod["unknownGpus"] = unknown
        if node.mig_used:
            pod["mig"] = _held(doc, node, f"nodes[{i}]")
        if node.alloc_cpus:
            pod["cpuMilli"] = node.alloc_cpus * 1000
        if node.alloc_memory_mib:
            pod["memoryMiB"] = node.alloc_memory_mib
        if node.name in on_node:
            if node.mig:
                _fail(f"nodes[{i}]", f"node {node.name} is a MIG node: placer does not split its MIG GRES by job")
            doc["pods"] = job_pods(node.name, pod, on_node[node.name], f"nodes[{i}]")
        elif len(pod) > 1:
            doc["pods"] = [pod]
        doc_nodes.append(doc)
    out: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot"}
    if levels:
        out["topologyLevels"] = list(levels)
    out["nodes"] = doc_nodes
    return out


def _jobs_by_node(jobs: list[SlurmJob], names: set[str]) -> dict[str, list[SlurmJob]]:
    """The jobs running on each node; a node not in ``names`` is an error at the job."""
    on_node: dict[str, list[SlurmJob]] = {}
    for job in jobs:
        for name in job.nodes:
            if name not in names:
                _fail(job.where, f"job {job.job_id} runs on node {name}, which scontrol show node does "
                                          "not list")
            on_node.setdefault(name, []).append(job)
    return on_node


def _mig_node(doc: dict[str, Any], node: SlurmNode, mig_model: str | None, where: str) -> None:
    """Make ``doc`` the MIG node of ``node`` (see :func:`build_snapshot`)."""
    table = _mig_table(node, mig_model, where)
    wanted: dict[Any, int] = {}
    for name, count in node.mig:
        profile = table.profile(name)
        if profile is None:
            _fail(where, f"node {node.name}: no MIG profile {name} on {table.model}; it has: {', '.join(table.names())}")
        wanted[profile] = wanted.get(profile, 0) + count
    whole = node.gpus - sum(wanted.values())
    mig_gpus = fewest_gpus(table, wanted, MAX_GPUS - whole)
    if mig_gpus is None:
        _fail(where, f"node {node.name}: its MIG GRES cannot be laid out on {MAX_GPUS - whole} {table.model} GPUs")
    laid = layout_instances(table, wanted, range(mig_gpus))
    assert laid is not None
    doc["gpus"] = whole + mig_gpus
    doc["gpuModel"] = table.model
    doc["mig"] = {"gpus": "all" if not whole else list(range(mig_gpus)), "mode": "static"}
    doc["migInstances"] = [{"gpu": g, "profile": p.name, "start": s} for g, p, s in laid]


def _mig_table(node: SlurmNode, mig_model: str | None, where: str) -> MigTable:
    """The MIG table of a node with MIG GRES types (see :func:`build_snapshot`)."""
    known = tables()
    names = {name for name, _ in node.mig}
    fits = [t for t in known.values() if names <= set(t.names())]
    if len(fits) > 1:
        named = {model_key(w) for w in re.split(r"[\s,]+", node.features or "") if w}
        fits = [t for t in fits if t.model in named] or fits
    if len(fits) == 1:
        return fits[0]
    if mig_model is not None:
        key = model_key(mig_model)
        if key is None:
            _fail("--mig-model", f"GPU model {mig_model!r} has no bundled MIG table; placer knows MIG on: "
                                 f"{', '.join(sorted(known))}")
        return known[key]
    which = ", ".join(t.model for t in fits) if fits else "no bundled table"
    _fail(where, f"node {node.name}: MIG GRES types {', '.join(sorted(names))} fit {which}: give the GPU "
                 "model (--mig-model)")


def _held(doc: dict[str, Any], node: SlurmNode, where: str) -> list[dict[str, Any]]:
    """The first instances of each profile of ``node.mig_used`` in ``doc``'s layout."""
    out = []
    for name, count in node.mig_used:
        free = [m for m in doc["migInstances"] if m["profile"] == name and m not in out]
        if len(free) < count:
            _fail(where, f"node {node.name}: GresUsed holds {count} gpu:{name}, Gres= has {len(free)}")
        out.extend(free[:count])
    return out


def _links_matrix(records: list[GresGpu], source: str) -> list[list[str]] | None:
    """The ``Links=`` matrix of one node's records in Slurm's order, None without Links=."""
    if not records or all(record.links is None for record in records):
        return None

    def order(item: tuple[int, GresGpu]) -> int:
        position, record = item
        links = record.links
        return links.index(-1) if links is not None and -1 in links else len(records) + position

    ordered = [dataclasses.replace(record, node_names=None)
               for _, record in sorted(enumerate(records), key=order)]
    return [list(row) for row in gres_links_matrix(ordered, source)]


_NODE_PATH = re.compile(r"nodes\[(\d+)\]")


@dataclass(frozen=True)
class SlurmImport:
    """What :func:`import_slurm` made of Slurm's files.

    Attributes
    ----------
    snapshot : ClusterSnapshot
        The snapshot, decoded once from :attr:`document`.
    document : dict
        The placer/v1 ClusterSnapshot document of :func:`build_snapshot`, which
        ``placer import slurm`` writes. It gives every node's ``unschedulable``,
        ``false`` included; ``snapshot.to_dict()`` is the same document without
        ``unschedulable: false`` (the default).
    notes : tuple of str
        What the files leave out that placer cannot model, one line each (the nodes that
        no switch or block of ``topology.conf`` covers).
    """

    snapshot: ClusterSnapshot
    document: dict[str, Any]
    notes: tuple[str, ...] = ()


def import_slurm(
    nodes: PathLike,
    gres: PathLike | None = None,
    topology: PathLike | None = None,
    mig_model: str | None = None,
    jobs: PathLike | None = None,
) -> SlurmImport:
    """Read Slurm's view of a cluster from files into a ClusterSnapshot and its document.

    The files are parsed (:func:`parse_scontrol_nodes`, :func:`parse_gres_conf`,
    :func:`parse_topology_conf`), :func:`build_snapshot` makes the placer/v1 document and
    :func:`placer.schema.snapshot_from_dict` decodes it, once, with every check of the
    schema.

    Parameters
    ----------
    nodes : str or os.PathLike
        ``scontrol -d show node`` output (without ``-d`` the GPU indices in use are not
        known: GPUs allocated per ``AllocTRES`` become ``unknownGpus``).
    gres : str or os.PathLike, optional
        ``gres.conf``, for the NVLink matrices of its ``Links=``.
    topology : str or os.PathLike, optional
        ``topology.conf`` (tree or block), or ``scontrol show topology`` output (tree).
    mig_model : str, optional
        The GPU model of nodes with MIG GRES types (see :func:`build_snapshot`).
    jobs : str or os.PathLike, optional
        ``scontrol show job`` output: the running jobs as pods with their priority and
        start time (see :func:`build_snapshot`).

    Returns
    -------
    SlurmImport
        The snapshot and the document it was decoded from.

    Raises
    ------
    InvalidInputError
        ``where`` = the path for a file that cannot be read; ``"<name>:<line>"`` (``name``
        the file's base name) for text that is not UTF-8 or does not parse, and for a
        node the schema refuses (at its ``NodeName=`` line, e.g. a label holding a control
        character or ``RealMemory=`` over placer's limit; the message ends with the
        placer/v1 path in parentheses).
    """
    def text(path: PathLike | None) -> tuple[str, str] | None:
        if path is None:
            return None
        name = os.path.basename(os.fspath(path))
        return read_text(path, source=name), name

    nodes_text = text(nodes)
    assert nodes_text is not None
    return import_slurm_texts(nodes_text, text(gres), text(topology), mig_model, text(jobs))


def import_slurm_texts(
    nodes: tuple[str, str],
    gres: tuple[str, str] | None = None,
    topology: tuple[str, str] | None = None,
    mig_model: str | None = None,
    jobs: tuple[str, str] | None = None,
) -> SlurmImport:
    """:func:`import_slurm` on texts already read: each a ``(text, source name)`` pair, the
    name used in errors (``scontrol -d show node:12``)."""
    nodes_name = nodes[1]
    parsed_nodes = parse_scontrol_nodes(*nodes)
    parsed_gres = None
    gres_name = "gres.conf"
    if gres is not None:
        gres_name = gres[1]
        parsed_gres = parse_gres_conf(*gres)
    parsed_topology = parse_topology_conf(*topology) if topology is not None else None
    parsed_jobs = parse_scontrol_jobs(*jobs) if jobs is not None else None
    try:
        document = build_snapshot(parsed_nodes, parsed_gres, parsed_topology, gres_name, mig_model, parsed_jobs)
        snapshot = snapshot_from_dict(document)
    except InvalidInputError as e:
        m = _NODE_PATH.match(e.where)
        if m is None:
            raise
        line = parsed_nodes[int(m.group(1))].line
        raise InvalidInputError(f"{nodes_name}:{line}", f"{e.what} (placer/v1 {e.where})") from None
    notes = ()
    if topology is not None and parsed_topology is not None:
        notes = uncovered_notes(parsed_nodes, parsed_topology, topology[1])
    return SlurmImport(snapshot=snapshot, document=document, notes=notes)


def uncovered_notes(nodes: list[SlurmNode], topology: SlurmTopology, source: str) -> tuple[str, ...]:
    """A note naming the nodes that no switch or block of ``topology`` covers (none when
    every node is covered, or the file has neither)."""
    if topology.form == "none":
        return ()
    outside = [node.name for node in nodes if node.name not in topology.nodes]
    if not outside:
        return ()
    what = "switch" if topology.form == "tree" else "block"
    return (f"{source}: {len(outside)} of {len(nodes)} node(s) are under no {what}: {some_of(outside)}; "
            f"they get no topology, so a gang that requires a topology level is not placed on them",)


def snapshot_from_slurm(
    nodes: PathLike,
    gres: PathLike | None = None,
    topology: PathLike | None = None,
) -> ClusterSnapshot:
    """Read Slurm's view of a cluster from files into a ClusterSnapshot.

    Parameters
    ----------
    nodes : str or os.PathLike
        ``scontrol -d show node`` output.
    gres : str or os.PathLike, optional
        ``gres.conf``.
    topology : str or os.PathLike, optional
        ``topology.conf`` (tree or block), or ``scontrol show topology`` output (tree).

    Returns
    -------
    ClusterSnapshot
        The snapshot of :func:`import_slurm`, decoded from the placer/v1 document of
        :func:`build_snapshot` (``placer import slurm`` writes that document;
        ``to_dict()`` gives it back without ``unschedulable: false``).

    Raises
    ------
    InvalidInputError
        As :func:`import_slurm`.
    """
    return import_slurm(nodes, gres, topology).snapshot
