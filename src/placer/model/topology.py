"""The link model of the GPUs inside one node.

A pair of GPUs scores by its link classes on go-gpuallocator's scale: 100 points per
NVLink, plus the PCIe relation (``PIX`` 50, ``PXB`` 40, ``PHB`` 30, ``NODE`` 20, ``SYS``
and its old name ``SOC`` 10). A cell of an ``nvidia-smi topo -m`` matrix shows either the
NVLink count (``NV12``) or the PCIe relation; ``NV2+SYS`` gives both. A node on an
NVSwitch (``{"nvswitch": true}``) has every pair equal at :data:`NVSWITCH_POINTS`. A set of
GPUs scores the sum over its pairs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from placer.exceptions import InvalidInputError
from placer.text.messages import quoted, unknown_field
from placer.model.topo_matrix import parse_topo_matrix

__all__ = [
    "PCIE_POINTS",
    "NVLINK_POINTS",
    "NVSWITCH_POINTS",
    "GpuTopology",
    "Nic",
    "link_points",
    "topology_from_spec",
    "nics_from_spec",
]

PCIE_POINTS = {"PIX": 50, "PXB": 40, "PHB": 30, "NODE": 20, "SYS": 10, "SOC": 10}
NVLINK_POINTS = 100
NVSWITCH_POINTS = 1800  # the pair score of 18 NVLinks, what an H100 NVSwitch node shows

_NVLINK = re.compile(r"NV(\d{1,2})")


def link_points(label: str) -> int | None:
    """The points of one matrix cell: ``NV<n>``, a PCIe label, or ``NV<n>+<PCIe label>``.

    Returns ``None`` for anything else (``X`` included: a GPU has no link to itself).
    """
    nv, plus, pcie = label.partition("+")
    m = _NVLINK.fullmatch(nv)
    if m is not None:
        links = int(m.group(1))
        if links < 1:
            return None
        if not plus:
            return links * NVLINK_POINTS
        p = PCIE_POINTS.get(pcie)
        return None if p is None else links * NVLINK_POINTS + p
    if plus:
        return None
    return PCIE_POINTS.get(label)


def nvlink_count(label: str) -> int:
    """NVLinks of a cell label (0 when it shows none)."""
    m = _NVLINK.match(label)
    return int(m.group(1)) if m is not None else 0


@dataclass(frozen=True, eq=False)
class GpuTopology:
    """Pair scores of the GPUs of one node type.

    Parameters
    ----------
    gpus : int
        Number of GPUs.
    labels : tuple of tuple of str, optional
        The cell labels (``X`` on the diagonal); ``None`` for an NVSwitch node.
    nvswitch : bool
        Every pair fully connected.
    spec : Mapping
        The ``gpuTopology`` form it was read from, written back by :meth:`to_dict`.
    """

    gpus: int
    labels: tuple[tuple[str, ...], ...] | None
    nvswitch: bool = False
    spec: Mapping[str, Any] = field(default_factory=dict, repr=False)
    nics: tuple["Nic", ...] = ()
    _scores: tuple[tuple[int, ...], ...] = field(default=(), repr=False)
    _hash: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        n = self.gpus
        if self.labels is None:
            row = NVSWITCH_POINTS if self.nvswitch else 0
            scores = tuple(tuple(0 if i == j else row for j in range(n)) for i in range(n))
        else:
            scores = tuple(
                tuple(0 if i == j else int(link_points(self.labels[i][j]) or 0) for j in range(n))
                for i in range(n)
            )
        object.__setattr__(self, "_scores", scores)
        object.__setattr__(self, "_hash", hash((n, scores)))

    @property
    def key(self) -> tuple[int, tuple[tuple[int, ...], ...]]:
        """What the GPU choice depends on: the GPU count and the pair scores."""
        return (self.gpus, self._scores)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GpuTopology) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash

    @property
    def scores(self) -> tuple[tuple[int, ...], ...]:
        """The pair score matrix (0 on the diagonal)."""
        return self._scores

    @property
    def uniform(self) -> bool:
        """Whether every pair scores the same (any set is as good as any other)."""
        vals = {s for i, row in enumerate(self._scores) for j, s in enumerate(row) if i != j}
        return len(vals) <= 1

    def score_matrix(self) -> np.ndarray:
        """The pair scores as a C-contiguous int32 array."""
        return np.array(self._scores, dtype=np.int32).reshape(self.gpus, self.gpus)

    def set_score(self, gpus: Sequence[int]) -> int:
        """The sum of the pair scores inside ``gpus``."""
        g = list(gpus)
        return sum(self._scores[a][b] for i, a in enumerate(g) for b in g[i + 1 :])

    def islands(self) -> list[list[int]]:
        """GPUs joined by NVLink (directly or through others), each island ascending."""
        n = self.gpus
        if self.nvswitch:
            return [list(range(n))] if n else []
        parent = list(range(n))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        if self.labels is not None:
            for i in range(n):
                for j in range(i + 1, n):
                    if nvlink_count(self.labels[i][j]):
                        parent[root(i)] = root(j)
        groups: dict[int, list[int]] = {}
        for i in range(n):
            groups.setdefault(root(i), []).append(i)
        return sorted(groups.values())

    def to_dict(self) -> dict[str, Any]:
        """The ``gpuTopology`` form this was read from."""
        if self.spec:
            return dict(self.spec)
        if self.nvswitch:
            return {"nvswitch": True}
        return {"matrix": [list(r) for r in self.labels]} if self.labels is not None else {}


@dataclass(frozen=True)
class Nic:
    """A network interface and its PCIe relation (``PIX`` … ``SYS``) to each GPU."""

    name: str
    labels: tuple[str, ...]

    def points(self) -> tuple[int, ...]:
        """The PCIe points to each GPU."""
        return tuple(PCIE_POINTS[label] for label in self.labels)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "matrix": list(self.labels)}


def _bad(where: str, expected: str, got: Any) -> InvalidInputError:
    shown = quoted(got) if not isinstance(got, (dict, list)) else type(got).__name__
    return InvalidInputError(where, f"expected {expected}, got {shown}")


def _matrix_topology(rows: Any, where: str, gpus: int | None) -> tuple[tuple[str, ...], ...]:
    if not isinstance(rows, list) or not rows:
        raise _bad(where, "a non-empty list of rows of link labels", rows)
    n = len(rows)
    if gpus is not None and n != gpus:
        raise InvalidInputError(where, f"expected {gpus} rows (one per GPU), got {n}")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != n:
            raise _bad(f"{where}[{i}]", f"a list of {n} link labels", row)
        cells = []
        for j, cell in enumerate(row):
            if not isinstance(cell, str):
                raise _bad(f"{where}[{i}][{j}]", "a link label string", cell)
            label = cell.strip().upper()
            if i == j:
                if label != "X":
                    raise _bad(f"{where}[{i}][{j}]", '"X" (a GPU to itself)', cell)
            elif link_points(label) is None:
                raise _bad(
                    f"{where}[{i}][{j}]",
                    "a link label (NV<n>, PIX, PXB, PHB, NODE, SYS, SOC or NV<n>+<PCIe label>)",
                    cell,
                )
            cells.append(label)
        out.append(tuple(cells))
    for i in range(n):
        for j in range(i + 1, n):
            if link_points(out[i][j]) != link_points(out[j][i]):
                raise InvalidInputError(
                    f"{where}[{j}][{i}]",
                    f"expected the same link as {where}[{i}][{j}] ({out[i][j]}), got {out[j][i]}",
                )
    return tuple(out)


def _combine_pcie(
    nvlink: tuple[tuple[str, ...], ...], pcie: tuple[tuple[str, ...], ...], where: str
) -> tuple[tuple[str, ...], ...]:
    """Cells of ``topo -m`` with the PCIe relation of ``topo -mp`` added to NVLink pairs."""
    n = len(nvlink)
    if len(pcie) != n:
        raise InvalidInputError(where, f"expected a matrix of {n} GPUs, got {len(pcie)}")
    out = []
    for i in range(n):
        row = []
        for j in range(n):
            a, b = nvlink[i][j], pcie[i][j]
            if i != j and b not in PCIE_POINTS:
                raise InvalidInputError(where, f"expected PCIe labels only, got {b} for GPU{i}-GPU{j}")
            row.append(f"{a}+{b}" if nvlink_count(a) else (b if i != j else "X"))
        out.append(tuple(row))
    return tuple(out)


_TOPOLOGY_KEYS = ("matrix", "nvidiaSmiTopo", "nvidiaSmiTopoPcie", "nvswitch")


def topology_from_spec(spec: Any, gpus: int | None = None, where: str = "gpuTopology") -> GpuTopology | None:
    """A :class:`GpuTopology` from any ``gpuTopology`` form of the snapshot format.

    Parameters
    ----------
    spec : Mapping or GpuTopology or None
        ``{"matrix": [[...]]}``, ``{"nvidiaSmiTopo": text, "nvidiaSmiTopoPcie": text}``
        or ``{"nvswitch": true}``; ``None`` or ``{}`` means all pairs equal.
    gpus : int, optional
        The node's GPU count, checked against the topology when given.
    where : str
        JSON path of ``spec`` for error messages.

    Returns
    -------
    GpuTopology or None
        ``None`` when no topology is given.

    Raises
    ------
    InvalidInputError
        Naming the JSON path (or ``path:line`` inside the embedded text).
    """
    if spec is None or isinstance(spec, GpuTopology):
        if spec is not None and gpus is not None and spec.gpus != gpus:
            raise InvalidInputError(where, f"describes {spec.gpus} GPUs, the node has {gpus}")
        return spec
    if not isinstance(spec, Mapping):
        raise _bad(where, "a mapping with matrix, nvidiaSmiTopo or nvswitch", spec)
    for key in spec:
        if key not in _TOPOLOGY_KEYS:
            raise InvalidInputError(where, unknown_field(key, _TOPOLOGY_KEYS))
    forms = [k for k in ("matrix", "nvidiaSmiTopo", "nvswitch") if spec.get(k) is not None]
    if not forms:
        return None
    if len(forms) > 1:
        raise InvalidInputError(where, f"expected one of matrix, nvidiaSmiTopo, nvswitch; got {', '.join(forms)}")
    form = forms[0]
    saved = {k: v for k, v in spec.items() if v is not None}
    if form == "nvswitch":
        flag = spec["nvswitch"]
        if type(flag) is not bool:
            raise _bad(f"{where}.nvswitch", "true or false", flag)
        if not flag:
            return None
        if gpus is None:
            raise InvalidInputError(where, "an NVSwitch topology needs the node's GPU count")
        return GpuTopology(gpus=gpus, labels=None, nvswitch=True, spec=saved)
    if form == "matrix":
        labels = _matrix_topology(spec["matrix"], f"{where}.matrix", gpus)
        return GpuTopology(gpus=len(labels), labels=labels, spec=saved)

    text = spec["nvidiaSmiTopo"]
    if not isinstance(text, str):
        raise _bad(f"{where}.nvidiaSmiTopo", "the text of nvidia-smi topo -m", text)
    parsed = parse_topo_matrix(text, source=f"{where}.nvidiaSmiTopo")
    labels = _matrix_topology([list(r) for r in parsed.gpu_labels], f"{where}.nvidiaSmiTopo", gpus)
    pcie_text = spec.get("nvidiaSmiTopoPcie")
    if pcie_text is not None:
        if not isinstance(pcie_text, str):
            raise _bad(f"{where}.nvidiaSmiTopoPcie", "the text of nvidia-smi topo -mp", pcie_text)
        pcie = parse_topo_matrix(pcie_text, source=f"{where}.nvidiaSmiTopoPcie")
        labels = _combine_pcie(labels, pcie.gpu_labels, f"{where}.nvidiaSmiTopoPcie")
    nics = tuple(
        Nic(name, tuple(lab))
        for name, lab in zip(parsed.nic_names, parsed.nic_labels)
        if all(x in PCIE_POINTS for x in lab)
    )
    return GpuTopology(gpus=len(labels), labels=labels, spec=saved, nics=nics)


def nics_from_spec(spec: Any, gpus: int, where: str = "nics") -> tuple[Nic, ...]:
    """NICs of a node type from ``[{"name": ..., "matrix": [label per GPU]}]``."""
    if not isinstance(spec, list):
        raise _bad(where, "a list of {name, matrix}", spec)
    out = []
    seen: set[str] = set()
    for k, entry in enumerate(spec):
        w = f"{where}[{k}]"
        if not isinstance(entry, Mapping):
            raise _bad(w, "a mapping with name and matrix", entry)
        for key in entry:
            if key not in ("name", "matrix"):
                raise InvalidInputError(w, unknown_field(key, ("name", "matrix")))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"{w}.name", "a non-empty string", name)
        if name in seen:
            raise InvalidInputError(f"{w}.name", f"NIC {name!r} is listed twice")
        seen.add(name)
        row = entry.get("matrix")
        if not isinstance(row, list) or len(row) != gpus:
            raise _bad(f"{w}.matrix", f"a list of {gpus} PCIe labels (one per GPU)", row)
        labels = []
        for j, cell in enumerate(row):
            label = cell.strip().upper() if isinstance(cell, str) else cell
            if label not in PCIE_POINTS:
                raise _bad(f"{w}.matrix[{j}]", "a PCIe label (PIX, PXB, PHB, NODE, SYS or SOC)", cell)
            labels.append(label)
        out.append(Nic(name, tuple(labels)))
    return tuple(out)
