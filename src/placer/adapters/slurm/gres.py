"""Reader of ``gres.conf``: :func:`parse_gres_conf` reads the ``Name=gpu`` records with
their node names, type, device file, core list and NVLink vector; :func:`gres_links_matrix`
turns the ``Links=`` vectors of one node into a link-label matrix.

Errors are :class:`placer.exceptions.InvalidInputError` with ``where`` = ``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from placer.exceptions import InvalidInputError
from placer.adapters.slurm.records import ANY_KEY, SCONTROL_ECHO, fail, logical_lines, record_fields, refuse_other_file

__all__ = ["GresGpu", "parse_gres_conf", "gres_links_matrix"]

_MAX_NVLINKS = 64
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
    for line_no, record in logical_lines(text):
        where = f"{source}:{line_no}"
        if SCONTROL_ECHO.fullmatch(record.strip()):
            continue  # the next line tells which scontrol output this is
        refuse_other_file(ANY_KEY.findall(record), where, "--gres", "gres.conf (Name=gpu lines)")
        fields = record_fields(record, where)
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


def _parse_links(value: str, where: str) -> tuple[int, ...]:
    parts = [part.strip() for part in value.split(",")]
    for part in parts:
        if not _LINK_VALUE.fullmatch(part) or int(part) > _MAX_NVLINKS:
            fail(
                where,
                "expected Links= as comma-separated integers (-1 for self, else the NVLink "
                f"count 0..{_MAX_NVLINKS}), got {value!r}",
            )
    return tuple(int(part) for part in parts)
