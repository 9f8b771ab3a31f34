"""Modules split by concern (issue #31 §3) still name what moved out of them.

Each entry is (the module as it was, the module that holds the names now, the names): the
old module gives the very objects of the new one, so imports written before the split keep
working, and the new module lists them in ``__all__``.
"""
from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("placer.adapters.slurm.importer", "placer.adapters.slurm.gres", "GresGpu parse_gres_conf gres_links_matrix"),
    ("placer.adapters.slurm.importer", "placer.adapters.slurm.nodes",
     "UNSCHEDULABLE_STATES SlurmNode parse_scontrol_nodes parse_sinfo_gres_used"),
    ("placer.adapters.slurm.importer", "placer.adapters.slurm.topology", "SlurmTopology parse_topology_conf"),
    ("placer.adapters.slurm.status", "placer.adapters.slurm.logs",
     "MAX_CORES SlurmdGpu parse_slurmd_gpus GresLogError find_gres_errors"),
    ("placer.exact.gangs", "placer.exact.problem", "NODE_LEVEL GANG_MODES GangNode GangShape GangProblem ExactSolution"),
    ("placer.exact.gangs", "placer.exact.objective", "objective_weights objective_value domains_used check_counts"),
    ("placer.adapters.kubernetes.snapshot", "placer.adapters.kubernetes.quantities",
     "GPU_RESOURCE parse_quantity cpu_milli memory_mib count pod_amounts gpu_count extended_resources cpu_memory"),
    ("placer.adapters.kubernetes.workloads", "placer.adapters.kubernetes.templates",
     "MAX_WORKLOAD_PODS POD_PHASES object_name replica_count job_pod_count pod_tolerations pod_skip_reason "
     "PodTemplateSet pod_template_sets"),
    ("placer.adapters.nvidia_smi.listing", "placer.adapters.nvidia_smi.mig_tables",
     "MigProfile GpuInstance ComputeInstance parse_mig_profiles parse_mig_profiles_file parse_gpu_instances "
     "parse_gpu_instances_file parse_compute_instances parse_compute_instances_file"),
    ("placer.replay.simulate", "placer.replay.study",
     "Published ALL_POLICIES STUDY_POLICIES PUBLISHED_NAMES TABLE_ARRIVED TUNE_RATIO MAX_ARRIVED PUBLISHED_FILE "
     "PUBLISHED_SEEDS Curve load_published"),
    ("placer.replay.simulate", "placer.replay.study_report",
     "CSV_COLUMNS curves_csv summary_rows table_markdown write_curves_csv write_table_md write_plot plot_figure "
     "write_outputs"),
    ("placer.replay.timeline", "placer.replay.timeline_loop",
     "EVENT_KINDS TimelineEvent TimelineOutcome configure_queues run_timeline"),
    ("placer.placement.gangs", "placer.placement.gang_counts",
     "slice_units domain_capacities UNREACHABLE fewest_inside allocate domain_vector pooled_nodes choose_counts "
     "candidate_levels"),
]


@pytest.mark.parametrize("old, new, names", MOVED, ids=[f"{o}<-{n}" for o, n, _ in MOVED])
def test_the_old_module_names_what_moved(old: str, new: str, names: str) -> None:
    before, now = importlib.import_module(old), importlib.import_module(new)
    for name in names.split():
        assert name in now.__all__, f"{new}.__all__ lacks {name}"
        assert getattr(before, name, None) is getattr(now, name), f"{old}.{name} is not {new}.{name}"
