"""Kubernetes objects to placer's documents: nodes and pods to a snapshot, workloads to
a request, MIG and sharing as the NVIDIA device plugin names them, and the live API.
"""
from __future__ import annotations

# The names of the module this package replaced (placer.adapters.kubernetes), kept where users import them.
from placer.adapters.kubernetes.quantities import (  # noqa: F401
    GPU_RESOURCE,
    parse_quantity,
    cpu_milli,
    memory_mib,
    count,
    pod_amounts,
    gpu_count,
    extended_resources,
    cpu_memory,
)
from placer.adapters.kubernetes.snapshot import (  # noqa: F401
    GPU_PRODUCT_LABEL,
    GPU_MEMORY_LABEL,
    CLIQUE_LABEL,
    CLIQUE_LEVEL,
    HOSTNAME_LABEL,
    GPUS_ANNOTATION,
    node_from_object,
    running_pod_from_object,
    parse_levels,
    snapshot_from_kubernetes,
    KubernetesImport,
    import_kubernetes,
)

__all__ = ['GPU_RESOURCE', 'GPU_PRODUCT_LABEL', 'GPU_MEMORY_LABEL', 'CLIQUE_LABEL', 'CLIQUE_LEVEL', 'HOSTNAME_LABEL', 'GPUS_ANNOTATION', 'node_from_object', 'running_pod_from_object', 'parse_quantity', 'cpu_milli', 'memory_mib', 'count', 'parse_levels', 'pod_amounts', 'gpu_count', 'extended_resources', 'cpu_memory', 'snapshot_from_kubernetes', 'KubernetesImport', 'import_kubernetes']
