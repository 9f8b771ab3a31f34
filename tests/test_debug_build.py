"""The documented debug build, ``PLACER_DEBUG_CYTHON=1 pip install .`` (issue #31 §4):
``setup.py`` turns the checks on, every compiled module cythonizes under them (a ``nogil``
block that needs the GIL once a check is on fails here), and the debug build places pods."""
from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[1]
SETUP = ROOT / "setup.py"
CHECKS = ("boundscheck", "wraparound", "initializedcheck", "nonecheck")

pytestmark = pytest.mark.skipif(not (SETUP.exists() and (ROOT / "src" / "placer").is_dir()),
                                reason="needs the source checkout")


def setup_settings(monkeypatch: pytest.MonkeyPatch, debug: bool) -> dict[str, Any]:
    """The names ``setup.py`` defines, read without building (``PLACER_DEBUG_CYTHON`` set or not)."""
    monkeypatch.setenv("PLACER_DEBUG_CYTHON", "1" if debug else "0")
    return runpy.run_path(str(SETUP), run_name="placer_setup")


def test_the_debug_build_turns_the_checks_on(monkeypatch: pytest.MonkeyPatch) -> None:
    debug = setup_settings(monkeypatch, debug=True)
    assert {name: debug["directives"][name] for name in (*CHECKS, "cdivision")} == {
        **dict.fromkeys(CHECKS, True), "cdivision": False}
    assert {tuple(ext.extra_compile_args) for ext in debug["extensions"]} == {("-O0", "-g")}
    normal = setup_settings(monkeypatch, debug=False)
    assert {name: normal["directives"][name] for name in (*CHECKS, "cdivision")} == {
        **dict.fromkeys(CHECKS, False), "cdivision": True}
    assert {tuple(ext.extra_compile_args) for ext in normal["extensions"]} == {("-O3",)}
    assert [e.name for e in debug["extensions"]] == [e.name for e in normal["extensions"]]


@pytest.mark.slow
def test_every_compiled_module_cythonizes_with_the_debug_checks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from Cython.Compiler.Main import CompilationOptions, compile_single, default_options

    settings = setup_settings(monkeypatch, debug=True)
    names = []
    for ext in settings["extensions"]:
        (source,) = ext.sources
        options = CompilationOptions(
            default_options, compiler_directives=settings["directives"],
            compile_time_env=settings["compile_time_env"],
            include_path=[str(ROOT / p) for p in settings["include_path"]],
            output_file=str(tmp_path / f"{ext.name}.c"),
        )
        result = compile_single(str(ROOT / source), options, full_module_name=ext.name)
        assert result.num_errors == 0, f"{source}: {capfd.readouterr().err}"
        names.append(ext.name)
    assert "placer.kernel._core" in names and (tmp_path / "placer.kernel._core.c").stat().st_size > 0


@pytest.mark.slow
def test_the_debug_build_compiles_and_places(tmp_path: Path) -> None:
    copy = tmp_path / "placer-src"
    shutil.copytree(ROOT / "src", copy / "src",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__", ".mypy_cache"))
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(ROOT / name, copy / name)
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace", "--build-temp", str(tmp_path / "build")],
        cwd=copy, env={**os.environ, "PLACER_DEBUG_CYTHON": "1"}, capture_output=True, text=True, timeout=1800,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    debug_placed, debug_kernel = place_the_demo({**os.environ, "PYTHONPATH": str(copy / "src")})
    assert Path(debug_kernel).is_relative_to(copy)
    placed, kernel = place_the_demo(dict(os.environ))
    assert not Path(kernel).is_relative_to(copy)
    assert debug_placed == placed and placed["assignments"]


def place_the_demo(env: dict[str, str]) -> tuple[dict[str, Any], str]:
    """The bundled demo placed by the placer ``env`` imports: pods placed and not, and the kernel's file."""
    code = (
        "import json, placer, placer.kernel._core as core\n"
        "from importlib.resources import files\n"
        "data = files('placer') / 'data'\n"
        "result = placer.place(str(data / 'demo_snapshot.json'), str(data / 'demo_request.json'))\n"
        "print(json.dumps({'assignments': [[a.pod, a.node, list(a.gpus)] for a in result.assignments],"
        " 'unschedulable': [u.pod for u in result.unschedulable]}))\n"
        "print(core.__file__)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    placed, kernel = run.stdout.splitlines()[-2:]
    return json.loads(placed), kernel
