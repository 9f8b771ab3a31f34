"""One node's GPU topology read from a file, and the report ``placer topo`` prints.

:func:`load_topology` reads what ``placer gpus --topology FILE`` and ``placer topo FILE``
take: the text of ``nvidia-smi topo -m`` (any file name; :func:`topology_from_nvidia_smi`
for text already read), or a JSON/YAML document (``.json``, ``.yaml``, ``.yml``) holding a
``gpuTopology`` form (``{"matrix": [[...]]}``, ``{"nvidiaSmiTopo": "..."}``,
``{"nvswitch": true, "gpus": 8}``) or a node type (``{"gpus": 8, "gpuTopology": {...}}``),
optionally with ``nics``. :func:`topology_report` gives the link matrix, NVLink islands
and best GPU set per size as the dict ``placer topo --format json`` prints.
"""

from __future__ import annotations

import os
from typing import Any, Literal, NamedTuple, Sequence, Union

from placer.text.files import read_text
from placer.limits import MAX_GPUS
from placer.schema import load_document
from placer.exceptions import InvalidInputError
from placer.placement.gpusets import select_gpus
from placer.model.topo_matrix import parse_topo_matrix
from placer.model.topology import GpuTopology, Nic, nics_from_spec, topology_from_spec

__all__ = [
    "DOCUMENT_EXTENSIONS",
    "ALL_SIZES_MAX_GPUS",
    "LARGE_NODE_MAX_SIZE",
    "LoadedTopology",
    "load_topology",
    "topology_from_nvidia_smi",
    "topology_report",
]

PathLike = Union[str, "os.PathLike[str]"]

DOCUMENT_EXTENSIONS = (".json", ".yaml", ".yml")
"""File name endings :func:`load_topology` reads as a JSON/YAML document (any case)."""
ALL_SIZES_MAX_GPUS = 16
"""Nodes with at most this many GPUs get a best set for every size by default."""
LARGE_NODE_MAX_SIZE = 2
"""The largest set size reported by default for a node with more GPUs than that."""

_FORM_KEYS = ("matrix", "nvidiaSmiTopo", "nvidiaSmiTopoPcie", "nvswitch")
_DOCUMENT_STARTS = ("matrix:", "nvidiaSmiTopo:", "nvswitch:", "gpus:", "gpuTopology:")
# A bare form sits at the top level of a document: its error paths start with no name.
_TOP = "\x00"


class LoadedTopology(NamedTuple):
    """A node's GPU topology read from a file, with its NICs.

    Attributes
    ----------
    topology : GpuTopology
        The link model of the node's GPUs.
    nics : tuple of Nic
        The NICs and their PCIe relation to each GPU (those of the ``nvidia-smi`` matrix,
        or a document's ``nics``).
    kind : {"nvidia-smi", "document"}
        What the file held: ``nvidia-smi topo -m`` text or a JSON/YAML document.
    """

    topology: GpuTopology
    nics: tuple[Nic, ...]
    kind: Literal["nvidia-smi", "document"]


def load_topology(path: PathLike) -> LoadedTopology:
    """Read one node's GPU topology from a file: a document by its name, else ``nvidia-smi`` text.

    Parameters
    ----------
    path : str or os.PathLike
        A file ending in one of :data:`DOCUMENT_EXTENSIONS` is read as a JSON/YAML
        document (a ``gpuTopology`` form at its top, with ``gpus`` and ``nics`` beside it,
        or a node type with ``gpus`` and ``gpuTopology``); any other file as the text of
        ``nvidia-smi topo -m``. Errors name the path as given.

    Returns
    -------
    LoadedTopology

    Raises
    ------
    InvalidInputError
        For a missing or unreadable file, text that does not parse (at
        ``"<path>:<line>"``; a document-like text under another name is told so), or a
        document that is not a topology (at ``"<path>: <JSON path>"``).
    """
    name = os.fspath(path)
    if os.path.splitext(name)[1].lower() in DOCUMENT_EXTENSIONS:
        return _from_document(name)
    return topology_from_nvidia_smi(read_text(name), name)


def topology_from_nvidia_smi(text: str, source: str = "<text>") -> LoadedTopology:
    """One node's GPU topology from the text of ``nvidia-smi topo -m``.

    Parameters
    ----------
    text : str
        The output as printed or copied (see :func:`placer.model.topo_matrix.parse_topo_matrix`).
    source : str
        The name errors give the text (a file name, ``<stdin>``).

    Returns
    -------
    LoadedTopology
        ``kind`` ``"nvidia-smi"``; the NICs are the matrix's NIC columns.

    Raises
    ------
    InvalidInputError
        At ``"<source>:<line>"`` for text that does not parse; when the text looks like
        a JSON/YAML document instead, the message says it needs a document's file name.
    """
    try:
        parsed = parse_topo_matrix(text, source=source)
    except InvalidInputError as exc:
        head = text.lstrip()
        looks_like_document = head[:1] in ("{", "[") or head.startswith(_DOCUMENT_STARTS)
        if exc.where == f"{source}:1" and looks_like_document:
            raise InvalidInputError(
                exc.where, f"{exc.what} (a JSON/YAML document needs a .json, .yaml or .yml name)"
            ) from None
        raise
    labels = tuple(tuple(row) for row in parsed.gpu_labels)
    nics = tuple(Nic(n, tuple(lab)) for n, lab in zip(parsed.nic_names, parsed.nic_labels))
    return LoadedTopology(GpuTopology(gpus=len(labels), labels=labels, nics=nics), nics, "nvidia-smi")


def _from_document(path: str) -> LoadedTopology:
    doc = load_document(path)
    try:
        gpus = doc.get("gpus")
        if gpus is not None and (type(gpus) is not int or not 1 <= gpus <= MAX_GPUS):
            shown = repr(gpus) if not isinstance(gpus, (dict, list)) else type(gpus).__name__
            raise InvalidInputError("gpus", f"expected an integer in 1..{MAX_GPUS}, got {shown}")
        if "gpuTopology" in doc:
            spec, where = doc["gpuTopology"], "gpuTopology"
        else:
            unknown = [str(k) for k in doc if k not in (*_FORM_KEYS, "gpus", "nics")]
            if unknown or not any(doc.get(k) is not None for k in _FORM_KEYS):
                raise InvalidInputError(
                    "",
                    "expected a gpuTopology form (matrix, nvidiaSmiTopo or nvswitch, with gpus) "
                    "or a node type with gpus and gpuTopology"
                    + (f"; unknown field(s): {', '.join(unknown)}" if unknown else ""),
                )
            spec, where = {k: doc[k] for k in _FORM_KEYS if k in doc}, _TOP
        try:
            topology = topology_from_spec(spec, gpus=gpus, where=where)
        except InvalidInputError as exc:
            raise InvalidInputError(_untop(exc.where), _untop(exc.what)) from None
        if topology is None:
            if gpus is None:
                raise InvalidInputError(
                    _untop(where), "no link topology given: expected gpus (all pairs then score alike)"
                )
            topology = GpuTopology(gpus=gpus, labels=None)
        nics = topology.nics
        if doc.get("nics") is not None:
            nics = nics_from_spec(doc["nics"], topology.gpus, where="nics")
    except InvalidInputError as exc:
        raise exc.within(path) from None
    return LoadedTopology(topology, nics, "document")


def _untop(text: str) -> str:
    """``text`` with the top-level marker :data:`_TOP` (and the dot after it) removed."""
    return text.replace(_TOP + ".", "").replace(_TOP, "")


def topology_report(
    topology: GpuTopology, nics: Sequence[Nic] | None = None, max_size: int | None = None
) -> dict[str, Any]:
    """The link matrix, NVLink islands and best GPU set per size of one node.

    Parameters
    ----------
    topology : GpuTopology
        The node's GPUs (:attr:`LoadedTopology.topology`).
    nics : sequence of Nic, optional
        Its NICs (default: ``topology.nics``; pass :attr:`LoadedTopology.nics`).
    max_size : int, optional
        The largest set size to report (at least 1). Default: every size when the node
        has at most :data:`ALL_SIZES_MAX_GPUS` GPUs, else up to :data:`LARGE_NODE_MAX_SIZE`.

    Returns
    -------
    dict
        What ``placer topo --format json`` prints: ``gpus``, ``nvswitch``, ``matrix``
        (the link labels, ``None`` without a matrix), ``scores`` (pair scores), ``nics``
        (``[{"name", "labels"}]``), ``islands`` (NVLink islands of two or more GPUs),
        ``withoutNvlink`` (the other GPUs) and ``bestSets``: per size from 2 up to
        ``max_size`` (and the GPU count), ``{"size", "tiling": {"gpus", "setScore"},
        "bestSet": {"gpus", "setScore"}}`` with every GPU free.

    Raises
    ------
    InvalidInputError
        ``max_size`` below 1.
    """
    if nics is None:
        nics = topology.nics
    n = topology.gpus
    if max_size is None:
        max_size = n if n <= ALL_SIZES_MAX_GPUS else LARGE_NODE_MAX_SIZE
    elif type(max_size) is not int or max_size < 1:
        raise InvalidInputError("max_size", f"expected an integer >= 1, got {max_size!r}")
    islands = [g for g in topology.islands() if len(g) > 1]
    joined = {i for g in islands for i in g}
    best = []
    for size in range(2, min(max_size, n) + 1):
        entry: dict[str, Any] = {"size": size}
        for objective, key in (("tiling", "tiling"), ("best-set", "bestSet")):
            chosen = select_gpus(topology, list(range(n)), size, objective=objective)
            entry[key] = {"gpus": chosen, "setScore": topology.set_score(chosen)}
        best.append(entry)
    return {
        "gpus": n,
        "nvswitch": topology.nvswitch,
        "matrix": [list(row) for row in topology.labels] if topology.labels is not None else None,
        "scores": [list(row) for row in topology.scores],
        "nics": [{"name": nic.name, "labels": list(nic.labels)} for nic in nics],
        "islands": islands,
        "withoutNvlink": [i for i in range(n) if i not in joined],
        "bestSets": best,
    }
