"""Build the Cython kernel. Everything else is declared in pyproject.toml.

Set ``PLACER_DEBUG_CYTHON=1`` to build with bounds checks and wraparound on.
"""
import os

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

extensions = [
    Extension(
        "placer._core",
        ["src/placer/_core.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O0", "-g"] if debug else ["-O3"],
    ),
    Extension(
        "placer.schema._jsonkeys",
        ["src/placer/schema/_jsonkeys.pyx"],
        extra_compile_args=["-O0", "-g"] if debug else ["-O3"],
    ),
]

setup(ext_modules=cythonize(extensions, compiler_directives=directives, annotate=False))
