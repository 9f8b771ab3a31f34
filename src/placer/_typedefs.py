"""The dtype contract between :mod:`placer._pack` and the Cython kernel.

``_core.pyx`` declares the same C types; change both together.
"""
from __future__ import annotations

import numpy as np

KERNEL_ABI = 11  # must equal placer._core.KERNEL_ABI; a mismatch means a stale build

MASK = np.uint64  # GPU bitmask of one node (bit i = GPU i), bucket bitsets
COUNT = np.uint8  # GPUs per node
MILLI = np.int16  # free milli-GPU of one GPU (0..1000)
MIB32 = np.int32  # GPU memory of one GPU, MiB
INDEX = np.int32  # node, pod, bucket and class indices
INT = np.int32
BIG = np.int64  # CPU milli and memory MiB of a node

MAX_GPUS_PER_NODE = 64
MAX_TABLE_GPUS = 16  # node kinds with GPU-set tables
MAX_NICS_PER_NODE = 64
NIC_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")  # best first; SOC counts as SYS
MAX_GPU_MODELS = 63  # model id 0 is "no GPU"; ids fit one uint64 mask

# Policy codes are placer.policies.REGISTRY's (Policy.code); they equal _core.POLICY_ENUM.

# Untracked capacities are stored as these (never reached, safe to add and subtract).
UNTRACKED_BIG = np.int64(1 << 60)
UNTRACKED_INT = np.int32(1 << 30)

# gpu-clustering's per-node tag counts (``tag_count``, nodes x (max GPUs + 1)): column 0
# counts share-gpu pods (one per GPU share held), column k pods holding k whole GPUs.
# CPU-only pods carry the study's "no-gpu" tag, which its score never counts.
TAG_SHARE = 0

# Order of the dynamic (resource) reason counters the kernel fills per failed pod.
RESOURCE_REASONS = (
    "Insufficient cpu",
    "Insufficient memory",
    "Too many pods",
    "Insufficient nvidia.com/gpu",
    "Insufficient GPU memory",
)
