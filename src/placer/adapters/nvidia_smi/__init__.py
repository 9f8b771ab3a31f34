"""What ``nvidia-smi`` prints: the topology matrix, ``-L`` and the MIG tables, the
query CSVs, and the live reader.
"""
from __future__ import annotations

# The names of the module this package replaced (placer.adapters.nvidia_smi), kept where users import them.
from placer.adapters.nvidia_smi.topo import (  # noqa: F401
    TopoMatrix,
    parse_topo_matrix,
    parse_topo_file,
)

__all__ = ['TopoMatrix', 'parse_topo_matrix', 'parse_topo_file']
