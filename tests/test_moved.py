"""Module paths of earlier releases keep importing after issue #31 grouped the modules by
concern (``placer._moved`` and the packages that re-export a replaced module's names)."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import placer
from placer._moved import MOVED

# The packages that took the name of a module they replaced, with that module.
REPLACED = {
    "placer.exact": "placer.exact.gangs",
    "placer.preemption": "placer.preemption.victims",
    "placer.diagnostics": "placer.diagnostics.check",
    "placer.serve": "placer.serve.app",
    "placer.adapters.kubernetes": "placer.adapters.kubernetes.snapshot",
    "placer.adapters.kueue": "placer.adapters.kueue.objects",
    "placer.adapters.nvidia_smi": "placer.adapters.nvidia_smi.topo",
    "placer.adapters.slurm": "placer.adapters.slurm.importer",
}


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_module_path_is_the_module_that_holds_it_now(old, new):
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert sys.modules[old] is sys.modules[new]
    assert module.__name__ == new and module.__spec__.name == new  # its own identity kept


def test_an_old_path_in_a_from_import_gives_the_same_objects():
    from placer.cluster import Cluster as old_cluster
    from placer.adapters.kubernetes_workloads import request_from_kubernetes as old_reader
    from placer.adapters.kubernetes.workloads import request_from_kubernetes
    assert old_cluster is placer.Cluster and old_reader is request_from_kubernetes


@pytest.mark.parametrize("package, module", sorted(REPLACED.items()))
def test_a_package_that_took_a_modules_name_exports_its_public_names(package, module):
    source = Path(importlib.import_module(module).__file__).read_text(encoding="utf-8")
    names = next(ast.literal_eval(node.value) for node in ast.parse(source).body
                 if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets))
    exported = importlib.import_module(package)
    missing = [name for name in names if getattr(exported, name, None) is not getattr(importlib.import_module(module), name)]
    assert not missing, f"{package} lacks {missing} of {module}"


def test_every_moved_target_exists_and_no_old_path_is_a_file():
    root = Path(placer.__file__).parent
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None, new
        assert not (root.parent / (old.replace(".", "/") + ".py")).exists(), f"{old} is still a file"


def test_old_paths_import_in_a_fresh_interpreter_without_importing_placer_first():
    code = "import placer.gangs, placer.adapters.slurm_values as v; print(placer.gangs.__name__, v.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["placer.placement.gangs", "placer.adapters.slurm.values"]


def test_an_old_module_path_named_like_a_function_of_placer_leaves_the_function():
    code = ("import placer.place, placer.defrag\nimport placer\n"
            "print(callable(placer.place), callable(placer.defrag), placer.place.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "placer.placement.place"]
