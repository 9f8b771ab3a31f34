"""What Slurm prints and reads: node, GRES and topology descriptions, status output,
running jobs, and the live client.
"""
from __future__ import annotations

# The names of the module this package replaced (placer.adapters.slurm), kept where users import them.
from placer.adapters.slurm.importer import (  # noqa: F401
    GresGpu,
    parse_gres_conf,
    gres_links_matrix,
    MAX_HOSTLIST_NAMES,
    UNSCHEDULABLE_STATES,
    SlurmNode,
    SlurmTopology,
    expand_hostlist,
    parse_scontrol_nodes,
    parse_topology_conf,
    parse_sinfo_gres_used,
    build_snapshot,
    SlurmImport,
    import_slurm,
    import_slurm_texts,
    snapshot_from_slurm,
)

__all__ = ['GresGpu', 'parse_gres_conf', 'gres_links_matrix', 'MAX_HOSTLIST_NAMES', 'UNSCHEDULABLE_STATES', 'SlurmNode', 'SlurmTopology', 'expand_hostlist', 'parse_scontrol_nodes', 'parse_topology_conf', 'parse_sinfo_gres_used', 'build_snapshot', 'SlurmImport', 'import_slurm', 'import_slurm_texts', 'snapshot_from_slurm']
