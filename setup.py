"""Build the Cython kernel. Everything else is declared in pyproject.toml.

Set ``PLACER_DEBUG_CYTHON=1`` to build with bounds, wraparound, None and initialisation checks
on, Python's division semantics, and ``-O0 -g``. The settings are module names
(``directives``, ``extensions``, ...): ``tests/test_debug_build.py`` reads them.
"""
import os
import re
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("PLACER_DEBUG_CYTHON", "") == "1"
directives = {
    "language_level": 3,
    "boundscheck": debug,
    "wraparound": debug,
    "initializedcheck": debug,
    "cdivision": not debug,
    "nonecheck": debug,
}

# One source of the kernel's ABI number: pack.py's, compiled into _core so that a build older
# than the Python sources is refused at import (placer.kernel checks the two agree).
_PACK = Path(__file__).parent / "src" / "placer" / "kernel" / "pack.py"
KERNEL_ABI = int(re.search(r"^KERNEL_ABI = (\d+)", _PACK.read_text(encoding="utf-8"), re.M).group(1))
# Cython decides what to regenerate from .pyx/.pxd times alone: a newer pack.py (a new ABI
# or dtypes) must regenerate _core.c too.
_CORE_C = _PACK.with_name("_core.c")
_PACK_NEWER = _CORE_C.exists() and _CORE_C.stat().st_mtime < _PACK.stat().st_mtime

compile_args = ["-O0", "-g"] if debug else ["-O3"]
extensions = [
    Extension(
        "placer.kernel._core",
        ["src/placer/kernel/_core.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=compile_args,
    ),
    Extension(
        "placer.kernel._gather",
        ["src/placer/kernel/_gather.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=compile_args,
    ),
    Extension(
        "placer.schema._quick",
        ["src/placer/schema/_quick.pyx"],
        extra_compile_args=compile_args,
    ),
    Extension(
        "placer.schema._jsonkeys",
        ["src/placer/schema/_jsonkeys.pyx"],
        extra_compile_args=compile_args,
    ),
]

compile_time_env = {"COMPILED_KERNEL_ABI": KERNEL_ABI}
include_path = ["src"]  # placer/_slots.pxd, shared by the compiled modules

if __name__ == "__main__":  # pip's build backend runs this file as __main__ too; tests read the settings above
    setup(
        ext_modules=cythonize(
            extensions,
            compiler_directives=directives,
            compile_time_env=compile_time_env,
            include_path=include_path,
            annotate=False,
            force=_PACK_NEWER,
        )
    )
