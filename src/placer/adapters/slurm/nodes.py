"""Readers of what Slurm shows of its nodes: ``scontrol -d show node`` output
(:func:`parse_scontrol_nodes`, one :class:`SlurmNode` per node) and ``sinfo -O
GresUsed,NodeList`` output (:func:`parse_sinfo_gres_used`, the GPU indices in use).

Only what placement needs is read. Errors are :class:`placer.exceptions.InvalidInputError`
with ``where`` = ``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from placer.limits import MAX_GPUS
from placer.adapters.slurm.values import NO_VALUE, mem_mib, number_list, tres, tres_gpus, whole
from placer.text.hostlist import expand_hostlist
from placer.model.mig_profiles import PROFILE_NAME
from placer.text.lines import clip, split_outside
from placer.adapters.slurm.records import ANY_KEY, NODE_NAME, SCONTROL_ECHO, echo_of, fail, refuse_other_file

__all__ = ["UNSCHEDULABLE_STATES", "SlurmNode", "parse_scontrol_nodes", "parse_sinfo_gres_used"]


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


_SINFO_ECHO = echo_of("sinfo")


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
        if not stripped or SCONTROL_ECHO.fullmatch(stripped):
            continue
        if stripped.startswith("NodeName="):
            current = {}
            records.append((line_no, current))
        elif current is None:
            refuse_other_file(ANY_KEY.findall(stripped), where, "--nodes",
                               "scontrol show node output")
            fail(where, f"expected a node record starting NodeName=, got {clip(stripped)!r}")
        pairs = _line_pairs(stripped, where)
        refuse_other_file([key for key, _ in pairs], where, "--nodes",
                           "scontrol show node output")
        for key, value in pairs:
            if key in current:
                fail(where, f"expected each key once per node, got {key}= again "
                             f"(line {current[key][1]})")
            current[key] = (value, line_no)
    if not records:
        fail(f"{source}:1", "expected scontrol show node output (NodeName= records), got none")
    nodes: list[SlurmNode] = []
    seen: dict[str, int] = {}
    for line_no, record in records:
        node = _scontrol_node(record, line_no, source)
        if node.name in seen:
            fail(f"{source}:{line_no}",
                  f"expected each node once, got NodeName={node.name} again "
                  f"(line {seen[node.name]})")
        seen[node.name] = line_no
        nodes.append(node)
    return nodes


def _line_pairs(line: str, where: str) -> list[tuple[str, str]]:
    matches = list(_KEY.finditer(line))
    if not matches or matches[0].start() != 0:
        fail(where, f"expected Key=Value at the start of the line, got {clip(line)!r}")
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
            fail(where, f"expected {key} as name[:type]:count[(...)],... , got {item!r} in "
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
        fail(where, f"expected {count} GPU indices in IDX:{listed}, got {len(indices)}")
    for index in indices:
        if index in used:
            fail(where, f"expected each GPU index once in {key}, got {index} again")
        used.append(index)


def _scontrol_node(record: dict[str, tuple[str, int]], line: int, source: str) -> SlurmNode:
    def at(key: str) -> str:
        return f"{source}:{record[key][1]}"

    def get(key: str) -> str | None:
        entry = record.get(key)
        return None if entry is None else entry[0]

    name = record["NodeName"][0]
    if not NODE_NAME.fullmatch(name):
        fail(at("NodeName"), f"expected a node name (letters, digits, _ . -), got {name!r}")

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
            fail(at("Gres"), f"expected at most {MAX_GPUS} GPUs on a node, got {gpus}")
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
                fail(where, f"expected (IDX:...) after a GPU count in GresUsed=, got ({inner})")
            _take_idx(inner[4:], count, where, gpus, "GresUsed=", used)
        if len(used) + unknown + sum(mig_used.values()) > gpus:
            fail(where, f"expected at most the node's {gpus} GPUs in use, "
                         f"got {len(used) + unknown + sum(mig_used.values())}")
    elif alloc:
        count = tres_gpus(alloc, at("AllocTRES"), "AllocTRES")
        if count:
            if count > gpus:
                fail(at("AllocTRES"),
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
            fail(where, f"expected at most the node's {of} allocated, got {amount}")
        return amount

    alloc_cpus = allocated("CPUAlloc", "cpu", whole, cpus, f"{cpus} CPUs")
    alloc_mem = allocated("AllocMem", "mem", mem_mib, memory_mib, f"RealMemory={memory_mib} MiB")

    state = get("State")
    unschedulable = False
    if state is not None:
        for flag in state.split("+"):
            match = _STATE_FLAG.fullmatch(flag)
            if match is None:
                fail(at("State"), f"expected State= as FLAG+FLAG (e.g. IDLE+DRAIN), got {state!r}")
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
                fail(where, f"expected a sinfo -O header with GRES_USED and NODELIST, "
                             f"got {clip(raw.strip())!r}")
            continue
        if len(words) != len(header):
            fail(where, f"expected {len(header)} values ({' '.join(header)}), got {len(words)}")
        row = dict(zip(header, words))
        indices: list[int] = []
        for gname, _, count_text, inner in _gres_items(row["GRES_USED"], where, "GRES_USED"):
            if gname != "gpu":
                continue
            count = whole(count_text, where, "a GPU count in GRES_USED")
            if inner is None or not inner.startswith("IDX:"):
                fail(where, f"expected (IDX:...) after gpu:{count} in GRES_USED, "
                             f"got {row['GRES_USED']!r}")
            _take_idx(inner[4:], count, where, MAX_GPUS, "GRES_USED", indices)
        for node in expand_hostlist(row["NODELIST"], where):
            if node in used:
                fail(where, f"expected each node once, got {node} again (line {first_line[node]})")
            used[node] = tuple(sorted(indices))
            first_line[node] = line_no
    if header is None:
        fail(f"{source}:1", "expected a sinfo -O header with GRES_USED and NODELIST, got nothing")
    return used
