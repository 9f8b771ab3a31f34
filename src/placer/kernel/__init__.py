"""The placement kernel behind one typed front.

:class:`KernelSession` is what the rest of placer uses: it packs a snapshot into the
kernel's arrays (``pack``, the only module that knows their dtypes, with the one-pass
readers of ``_gather``) and runs the Cython workers of ``_core`` over them (declarations in
``_core.pxd``). The GPU-set table builders
of ``_core`` live in ``tables`` (used by :mod:`placer.placement.gpusets`).
"""
from __future__ import annotations

_REBUILD = "reinstall with `pip install .` (or `pip install -e .`) from the source checkout"
try:
    from placer.kernel import _core
except ImportError as exc:  # pragma: no cover - depends on the build
    raise ImportError(
        f"placer's compiled kernel (placer.kernel._core) is missing or unloadable: {_REBUILD}. "
        f"Original error: {exc}"
    ) from exc
from placer.kernel import pack

if getattr(_core, "KERNEL_ABI", None) != pack.KERNEL_ABI:  # pragma: no cover
    raise ImportError(f"placer's compiled kernel (placer.kernel._core) is stale: {_REBUILD}.")

from placer.kernel._core import MAX_TABLE_GPUS, PodBatch, PolicyCode  # noqa: E402
from placer.kernel.session import FreeState, KernelSession, NodeFree, Run, fgd_rank  # noqa: E402

KERNEL_ABI = pack.KERNEL_ABI

__all__ = [
    "KERNEL_ABI",
    "MAX_TABLE_GPUS",
    "PolicyCode",
    "PodBatch",
    "FreeState",
    "KernelSession",
    "NodeFree",
    "Run",
    "fgd_rank",
]
