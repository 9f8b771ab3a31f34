"""What importing placer costs (issue #31 §4): neither ``import placer`` nor importing any
module of the package loads OR-Tools, pandas or matplotlib; they load when a solver or a
plot is used."""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import placer
from placer.exact.cpsat import STATUS_NAMES, status_name

HEAVY = ("ortools", "pandas", "matplotlib")


def run_python(code: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter (the one running the tests)."""
    return subprocess.run([sys.executable, *options, "-c", code], capture_output=True, text=True, timeout=300)


def heavy_modules_loaded(code: str) -> list[str]:
    """The heavy packages in ``sys.modules`` once ``code`` has run in a fresh interpreter."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))")
    proc = run_python(probe)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_placer_loads_no_heavy_library() -> None:
    proc = run_python("import placer", "-X", "importtime")
    assert proc.returncode == 0, proc.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line]
    assert "placer" in imported
    assert [m for m in imported if m.split(".")[0] in HEAVY] == []


def test_no_module_of_the_package_loads_a_heavy_library_at_import() -> None:
    modules = sorted(m.name for m in pkgutil.walk_packages(placer.__path__, "placer."))
    assert "placer.exact.gangs" in modules and "placer.replay.simulate" in modules
    assert heavy_modules_loaded("\n".join(f"import {m}" for m in modules)) == []


def test_or_tools_loads_when_a_gang_is_solved() -> None:
    code = (
        "from placer.exact import GangNode, GangProblem, GangShape, solve_gang\n"
        "node = GangNode('n0', ('b0',), None, None, None, (1000,) * 2, (None,) * 2, None, 'A')\n"
        "problem = GangProblem(('block',), (node,), (GangShape(2, 1, 1000, 0, 0, 0, frozenset({0})),),"
        " 'required', 'block')\n"
        "assert solve_gang(problem).status == 'optimal'"
    )
    loaded = heavy_modules_loaded(code)
    assert "ortools" in loaded and "matplotlib" not in loaded


def test_cp_sat_statuses_have_placer_names() -> None:
    from ortools.sat.python import cp_model

    codes = (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE, cp_model.MODEL_INVALID, cp_model.UNKNOWN)
    assert tuple(status_name(code) for code in codes) == STATUS_NAMES
