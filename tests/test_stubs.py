"""Type stubs of the compiled modules (issue #31 §4): every extension module of the package
has a ``.pyi`` beside it, an installed package ships them, and ``mypy.stubtest`` finds them
to agree with what the modules hold at run time."""
from __future__ import annotations

import fnmatch
import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

import placer

PACKAGE_DIR = Path(placer.__file__).parent
PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"

# Compiled modules that may lack a stub for now, with the reason. Keep it empty otherwise.
STUB_PENDING: dict[str, str] = {}
# What Cython adds to every module (not part of its interface).
STUBTEST_ALLOWLIST = (
    r"placer\..*\.__test__",
    r"placer\..*\.__reduce_cython__",
    r"placer\..*\.__setstate_cython__",
)


def compiled_modules() -> dict[str, Path]:
    """The extension modules of the package: dotted name -> file."""
    found = {}
    seen: set[Path] = set()
    for suffix in sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True):  # ".so" last
        for path in PACKAGE_DIR.rglob(f"*{suffix}"):
            if path not in seen:
                seen.add(path)
                parts = path.relative_to(PACKAGE_DIR).parts
                found[".".join(("placer", *parts[:-1], path.name[: -len(suffix)]))] = path
    return found


def stub_of(module: str) -> Path:
    return PACKAGE_DIR.joinpath(*module.split(".")[1:]).with_suffix(".pyi")


def stubbed_modules() -> list[str]:
    return sorted(m for m in compiled_modules() if stub_of(m).exists())


def test_every_compiled_module_has_a_stub() -> None:
    modules = compiled_modules()
    assert "placer.kernel._core" in modules and "placer.schema._jsonkeys" in modules
    missing = sorted(m for m in modules if not stub_of(m).exists() and m not in STUB_PENDING)
    assert missing == [], f"compiled modules without a .pyi: {missing}"
    assert set(STUB_PENDING) <= set(modules), "STUB_PENDING names a module that is not compiled"
    stale = sorted(m for m in STUB_PENDING if stub_of(m).exists())
    assert not stale, f"STUB_PENDING names modules that have a stub now: {stale}"


@pytest.mark.skipif(not PYPROJECT.exists(), reason="runs from a source checkout")
def test_an_installed_package_ships_the_stubs() -> None:
    tomllib = pytest.importorskip("tomllib")
    patterns = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]["placer"]
    shipped = ["py.typed", *(str(stub_of(m).relative_to(PACKAGE_DIR)) for m in stubbed_modules())]
    assert [f for f in shipped if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []


@pytest.mark.slow
def test_stubtest_finds_the_stubs_match_the_compiled_modules(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    config = tmp_path / "mypy.ini"
    # Only the stubs are checked here: the modules they import are read, not judged.
    config.write_text(f"[mypy]\nfollow_imports = silent\ncache_dir = {tmp_path / 'cache'}\n", encoding="utf-8")
    allowlist = tmp_path / "allowlist.txt"
    allowlist.write_text("\n".join(STUBTEST_ALLOWLIST) + "\n", encoding="utf-8")
    modules = stubbed_modules()
    assert "placer.kernel._core" in modules
    # Run outside the package's parent: mypy takes its working folder as user code, and an
    # installed package's parent is site-packages (whose typing_extensions.py would then
    # "shadow" the library). An installed package is found by its py.typed; a checkout's src/
    # is named on MYPYPATH.
    env = dict(os.environ)
    if PACKAGE_DIR.parent.name != "site-packages":
        env["MYPYPATH"] = str(PACKAGE_DIR.parent)
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", *modules, "--mypy-config-file", str(config),
         "--allowlist", str(allowlist), "--ignore-unused-allowlist"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"no issues found in {len(modules)} module" in proc.stdout
