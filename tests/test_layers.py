"""Import rules between the folders and modules of the installed package (issues #11, #31).

Imports point down. Each folder of ``src/placer`` holds one concern and has a rank
(:data:`LAYERS`, lowest first): a module imports only modules of its own folder or of a
lower-ranked one. Every module of the package is parsed with :mod:`ast` (lazy imports
inside functions and ``TYPE_CHECKING`` imports count) and checked for:

(layers) no import points up the ranks, except the SPEC's entry points that read real
    systems' objects from the library (:data:`SPEC_ADAPTER_ENTRY_POINTS`) and the
    independent checker (:data:`INDEPENDENT`), which imports only the model and may be
    used from any layer;
(a) no module outside ``placer.adapters``, ``placer.serve`` and ``placer.cli`` imports
    ``placer.adapters``, except those entry points;
(b) no module other than ``placer.cli`` imports ``placer.cli`` (``placer.__main__``, the
    ``python -m placer`` launcher of the command line, excepted);
(c) ``placer.model``, ``placer.exceptions`` and ``placer.formats`` reach no adapter,
    directly or through the modules they import; ``placer.exact`` reaches no kernel;
(d) no module uses a private name (leading underscore) of another placer module, imported
    (``from placer.x import _name``) or as an attribute (``x._name``), except the names
    of :data:`PENDING_PRIVATE_NAMES` and those of the :data:`KERNEL_BOUNDARY` modules.
    Modules whose own name is private (``placer._moved``, the kernel modules) are
    package-internal: importing them and their public names is allowed.

``docs/architecture.md`` draws the same layers.
"""
from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "placer"
ADAPTERS = "placer.adapters"
CLI = "placer.cli"
CLI_LAUNCHERS = frozenset({"placer.__main__"})
CORE = ("placer.model", "placer.exceptions", "placer.formats")

# The folders (and the top-level modules) of src/placer, lowest first; one rank may hold
# several folders that do not import each other.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(rank.split()) for rank in (
    "text exceptions limits _serial _moved",  # words, located errors, file writes; bounds
    "policies",                          # the policy registry: one record per policy
    "model",                             # the frozen documents, topology, MIG profiles, reasons
    "schema formats",                    # decoding documents; writing results
    "workload",                          # what the policies know of a workload (FGD, fgd-pack)
    "kernel",                            # the one owner of free state
    "exact",                             # CP-SAT gang models (never the kernel)
    "mig preemption",                    # MIG layouts and gangs; making room
    "placement",                         # Cluster, one-shot place, gangs, GPU sets, sharing
    "queues",                            # Kueue's objects and its admission cycle
    "adapters",                          # what real systems print, to the model
    "diagnostics testing",               # check, explain, report, reconcile; test strategies
    "replay",                            # simulate, sweep, timeline, executors
    "serve",                             # the extender service over HTTP
    "cli __main__ placer",               # the command line, and the public front (__init__.py)
))

# Library entry points the SPEC fixes that read real systems' objects: SPEC §8 names
# placer.queues.load_queues (and load_workloads, read_kueue), which read Kueue's objects
# through the Kueue adapter, imported lazily when called; a sweep names openb traces.
SPEC_ADAPTER_ENTRY_POINTS = frozenset({
    ("placer.queues.loaders", "placer.adapters.kueue.objects"),
    ("placer.replay.sweep", "placer.adapters.openb"),  # SPEC §10: a sweep names openb traces and node lists
})
# Modules any layer may use: the independent checker imports only the model (tested below).
INDEPENDENT = frozenset({"placer.diagnostics.check"})
# Private names still used across modules (none since the schema package replaced _validation).
PENDING_PRIVATE_NAMES: frozenset[tuple[str, str]] = frozenset()
# The compiled kernel: its private names are reached only inside placer.kernel.
KERNEL_BOUNDARY = frozenset({"placer.kernel._core"})

_MODULE_SUFFIXES = (".py", ".pyi", ".pyx", ".so", ".pyd")


def package_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None and spec.submodule_search_locations, "placer is not importable"
    return Path(list(spec.submodule_search_locations)[0])


def module_names(root: Path) -> set[str]:
    """Every module and package of the package, compiled ones (``_core``) included."""
    names = set()
    for path in root.rglob("*"):
        if path.suffix not in _MODULE_SUFFIXES or "__pycache__" in path.parts:
            continue
        parts = path.relative_to(root).parts
        stem = parts[-1].split(".")[0]
        parts = parts[:-1] if stem == "__init__" else (*parts[:-1], stem)
        names.add(".".join((PACKAGE, *parts)))
    return names


def python_sources(root: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join((PACKAGE, *parts))] = path
    return out


@dataclass(frozen=True)
class Use:
    """One use of another module by ``importer``: the module itself (``name`` None) or one
    of its names."""

    importer: str
    target: str
    name: str | None
    line: int

    def __str__(self) -> str:
        what = self.target if self.name is None else f"{self.target}.{self.name}"
        return f"{self.importer} (line {self.line}) uses {what}"


def _resolve(importer: str, is_package: bool, module: str | None, level: int) -> str:
    """The absolute module of a ``from`` import (relative ones resolved)."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def uses(importer: str, source: str, modules: set[str], is_package: bool = False) -> list[Use]:
    """The placer modules and module names that ``source`` (module ``importer``) uses:
    every import anywhere in it, and attributes taken of the placer modules it bound."""
    tree = ast.parse(source)
    out: list[Use] = []
    bound: dict[str, str] = {}  # local name -> placer module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != PACKAGE:
                    continue
                out.append(Use(importer, alias.name, None, node.lineno))
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[PACKAGE] = PACKAGE
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(importer, is_package, node.module, node.level)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    out.append(Use(importer, f"{base}.{alias.name}", None, node.lineno))
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                else:
                    out.append(Use(importer, base, alias.name, node.lineno))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = [node.attr]
        value = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in bound:
            continue
        dotted = [bound[value.id], *reversed(chain)]
        # The longest prefix that is a module, and the name taken of it.
        for k in range(len(dotted), 0, -1):
            prefix = ".".join(dotted[:k])
            if prefix in modules:
                if k < len(dotted):
                    out.append(Use(importer, prefix, dotted[k], node.lineno))
                break
    return out


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def private_name_violations(all_uses: list[Use]) -> list[Use]:
    return [
        u
        for u in all_uses
        if u.name is not None
        and _is_private(u.name)
        and u.target != u.importer
        and (u.target, u.name) not in PENDING_PRIVATE_NAMES
        and u.target not in KERNEL_BOUNDARY
    ]


# ------------------------------------------------------------------------------ the package


ROOT = package_dir()
MODULES = module_names(ROOT)
SOURCES = python_sources(ROOT)
USES = [
    u
    for name, path in SOURCES.items()
    for u in uses(name, path.read_text(encoding="utf-8"), MODULES, is_package=path.name == "__init__.py")
]


def test_the_scan_sees_the_package():
    assert ROOT.name == PACKAGE
    for name in (CLI, "placer.__main__", "placer.kernel._core", "placer.model.topology", "placer.adapters.slurm.importer", *CORE):
        assert name in MODULES, name
    assert len(SOURCES) > 30
    assert any(u.target.startswith(ADAPTERS) for u in USES)  # the CLI's own imports are seen


def folder(module: str) -> str:
    """The folder of ``src/placer`` a module sits in (its own name for a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def rank(module: str) -> int:
    name = folder(module)
    for i, layer in enumerate(LAYERS):
        if name in layer:
            return i
    raise AssertionError(f"{module}: folder {name!r} has no rank in LAYERS")


def test_every_folder_has_a_rank():
    unranked = sorted({folder(m) for m in MODULES} - set().union(*LAYERS))
    assert not unranked, f"folders without a rank in LAYERS: {unranked}"
    stale = sorted(set().union(*LAYERS) - {folder(m) for m in MODULES})
    assert not stale, f"LAYERS names folders that do not exist: {stale}"


def test_imports_point_down_the_layers():
    bad = [
        f"{u} ({folder(u.importer)} is below {folder(u.target)})" for u in USES
        if rank(u.target) > rank(u.importer) and u.target not in INDEPENDENT
        and (u.importer, u.target) not in SPEC_ADAPTER_ENTRY_POINTS
    ]
    assert not bad, "\n".join(bad)


def test_the_independent_checker_imports_only_the_model():
    for module in INDEPENDENT:
        targets = {u.target for u in USES if u.importer == module}
        assert all(rank(t) <= rank("placer.model") for t in targets), (module, sorted(targets))


def test_exact_gang_models_reach_no_kernel():
    reached = {u.target for u in USES if _in(u.importer, "placer.exact")}
    assert not {t for t in reached if _in(t, "placer.kernel")}, sorted(reached)


def test_a_only_adapters_and_the_cli_import_adapters():
    bad = [
        str(u) for u in USES
        if _in(u.target, ADAPTERS) and not _in(u.importer, ADAPTERS) and not _in(u.importer, CLI)
        and not _in(u.importer, "placer.serve")
        and (u.importer, u.target) not in SPEC_ADAPTER_ENTRY_POINTS
    ]
    assert not bad, "\n".join(bad)


def test_b_only_the_cli_imports_the_cli():
    bad = [
        str(u) for u in USES
        if _in(u.target, CLI) and not _in(u.importer, CLI) and u.importer not in CLI_LAUNCHERS
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", CORE)
def test_c_core_modules_reach_no_adapter(module):
    graph: dict[str, set[str]] = {}
    for u in USES:
        graph.setdefault(u.importer, set()).add(u.target)
    # The package itself is left out: every ``import placer.x`` runs placer/__init__.py,
    # which is the public face of the package, not a dependency of the module.
    seen, todo, came_from = {module}, [module], {}
    while todo:
        current = todo.pop()
        for target in graph.get(current, ()):
            if target != PACKAGE and target not in seen:
                seen.add(target)
                came_from[target] = current
                todo.append(target)
    reached = sorted(m for m in seen if _in(m, ADAPTERS))
    paths = []
    for m in reached:
        path = [m]
        while path[-1] != module:
            path.append(came_from[path[-1]])
        paths.append(" <- ".join(path))
    assert not reached, "\n".join(paths)


def test_d_no_private_names_of_other_modules():
    bad = [str(u) for u in private_name_violations(USES)]
    assert not bad, "\n".join(bad)


def test_d_pending_private_names_are_still_pending():
    """An allow-list entry no module uses any more is to be removed from the list."""
    used = {(u.target, u.name) for u in USES}
    assert not PENDING_PRIVATE_NAMES - used, PENDING_PRIVATE_NAMES - used


# --------------------------------------------------------------------------- the checker


CHECKER_CASES = [
    ("from placer.adapters.slurm.importer import _fail\n", [("placer.adapters.slurm.importer", "_fail")]),
    ("from placer.placement import gangs\ngangs._helper(1)\n", [("placer.placement.gangs", "_helper")]),
    ("import placer.placement.gangs as g\ng._helper\n", [("placer.placement.gangs", "_helper")]),
    ("import placer.placement.gangs\nplacer.placement.gangs._helper\n", [("placer.placement.gangs", "_helper")]),
    ("def f():\n    from ..model import _helper\n", [("placer.model", "_helper")]),
    ("from placer.text import files\nfiles._umask()\n", [("placer.text.files", "_umask")]),
    ("from placer.kernel._core import _private\n", []),
    ("from placer import __version__\nfrom placer.text.files import read_text\n", []),
]


@pytest.mark.parametrize("source, expected", CHECKER_CASES)
def test_the_checker_finds_private_names(source, expected):
    found = private_name_violations(uses("placer.adapters.demo", source, MODULES))
    assert [(u.target, u.name) for u in found] == expected


def test_the_checker_sees_lazy_and_type_checking_imports():
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from placer.adapters.openb import read_pods\n"
        "def f():\n    import placer.cli\n"
    )
    targets = {u.target for u in uses("placer.diagnostics.report", source, MODULES)}
    assert {"placer.adapters.openb", "placer.cli"} <= targets
