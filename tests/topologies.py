"""GPU topologies the tests and benchmarks share: go-gpuallocator's three machines (from
the converted conformance file) and three 16-GPU machines built here."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

from placer.model.topology import GpuTopology, topology_from_spec

UPSTREAM = json.loads(
    (Path(__file__).parent / "data" / "conformance" / "gpuallocator_besteffort.json").read_text()
)
PCIE_OF = {
    "P2PLinkCrossCPU": "SYS",
    "P2PLinkSameCPU": "NODE",
    "P2PLinkHostBridge": "PHB",
    "P2PLinkMultiSwitch": "PXB",
    "P2PLinkSingleSwitch": "PIX",
}


def upstream_rows(name: str) -> list[list[str]]:
    """An upstream topology (pairs of link names) as ``gpuTopology`` matrix labels."""
    t = UPSTREAM["topologies"][name]
    n = t["n_gpus"]
    nvlinks: dict[frozenset, int] = {}
    pcie: dict[frozenset, str] = {}
    for a, b, link in t["links"]:
        pair = frozenset((a, b))
        if "NVLINK" in link:
            nvlinks[pair] = UPSTREAM["link_weights"][link] // 100
        else:
            pcie[pair] = PCIE_OF[link]
    rows = [["X"] * n for _ in range(n)]
    for a, b in itertools.combinations(range(n), 2):
        k, p = nvlinks.get(frozenset((a, b))), pcie.get(frozenset((a, b)))
        rows[a][b] = rows[b][a] = (f"NV{k}+{p}" if p else f"NV{k}") if k else p
    return rows


def upstream_topology(name: str) -> GpuTopology:
    """``4xRTX8000``, ``DGX1Pascal`` or ``DGX1Volta`` as a :class:`GpuTopology`."""
    topo = topology_from_spec({"matrix": upstream_rows(name)})
    assert topo is not None
    return topo


def dgx2_nvswitch() -> GpuTopology:
    """DGX-2: 16 GPUs, every pair NV6 (NVSwitch)."""
    rows = [["X" if i == j else "NV6" for j in range(16)] for i in range(16)]
    return topology_from_spec({"matrix": rows})


def pcie_tree_16() -> GpuTopology:
    """Two sockets; 2 host bridges each; 2 PCIe switches under each bridge; 2 GPUs per switch."""

    def label(a: int, b: int) -> str:
        if a // 8 != b // 8:
            return "SYS"
        if a // 4 != b // 4:
            return "NODE"
        if a // 2 != b // 2:
            return "PHB" if a % 4 // 2 != b % 4 // 2 and (a // 2) % 2 != (b // 2) % 2 else "PXB"
        return "PIX"

    rows = [["X" if i == j else label(i, j) for j in range(16)] for i in range(16)]
    return topology_from_spec({"matrix": rows})


def nvlink_bridged_pairs_16() -> GpuTopology:
    """16 PCIe GPUs, NVLink bridges (NV4) joining GPUs 2i and 2i+1, PCIe tree as above."""
    rows = [list(r) for r in pcie_tree_16().labels]
    for i in range(0, 16, 2):
        rows[i][i + 1] = rows[i + 1][i] = "NV4+" + rows[i][i + 1]
    return topology_from_spec({"matrix": rows})
