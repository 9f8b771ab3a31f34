"""The largest values placer accepts, and why: each is what the kernel can hold.

Every integer of a placer/v1 document is checked against one of these while it is decoded
(:mod:`placer.schema`), so a value the kernel cannot represent is refused with the field's
path instead of overflowing later.
"""
from __future__ import annotations

__all__ = [
    "MAX_GPUS",
    "MILLI",
    "MAX_QUANTITY",
    "MAX_GPU_MEMORY_MIB",
    "MAX_PODS_PER_NODE",
    "PRIORITY_MIN",
    "PRIORITY_MAX",
    "MAX_NICS",
    "MAX_REPLICAS",
    "MAX_REQUEST_PODS",
    "MAX_SLICES",
    "SEED_MAX",
    "MAX_MIG_SLICES",
    "MAX_MIG_COUNT",
    "MAX_GPU_REPLICAS",
]

MAX_GPUS = 64
"""GPUs of one node: the kernel keeps a node's GPUs in one 64-bit mask."""

MILLI = 1000
"""``gpuMilli`` of a whole GPU."""

MAX_QUANTITY = 2**53 - 1
"""CPU milli, memory MiB and extended-resource counts: int64 in the kernel, and exact as a
double where policies normalise them."""

MAX_GPU_MEMORY_MIB = 2**30 - 1
"""GPU memory of one GPU in MiB: int32 in the kernel, below its "not tracked" mark (2**30)."""

MAX_PODS_PER_NODE = 2**30 - 1
"""``maxPods``: int32 in the kernel, below its "not tracked" mark (2**30)."""

PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1
"""Pod priority: a Kubernetes PriorityClass value is an int32."""

MAX_NICS = 64
"""NICs of one node (one 64-bit mask)."""

MAX_REPLICAS = 100_000
"""``replicas`` of one request entry, checked before anything is expanded."""

MAX_REQUEST_PODS = 1_000_000
"""Pods of one request after ``replicas`` are expanded, checked before expanding."""

MAX_SLICES = 3
"""Slice layers of one gang."""

SEED_MAX = 2**64 - 1
"""A request's seed: the kernel's SplitMix64 state is a uint64."""

MAX_MIG_SLICES = 8
"""Memory slices of one MIG GPU (A100, H100, H200, B200: 8; A30: 4)."""

MAX_MIG_COUNT = 7 * MAX_GPUS
"""MIG instances one pod may ask for: seven per GPU of the largest node."""
MAX_GPU_REPLICAS = 1000
"""Slots per GPU of a shared node (``gpuSharing.replicas``): the kernel holds a slot as
``1000 // replicas`` milli of its GPU, so a GPU holds at most 1000 of them."""
