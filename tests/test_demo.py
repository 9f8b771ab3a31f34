"""The bundled demo: its documents, their generator, and ``run_demo``."""
from __future__ import annotations

import importlib.util
import json
import re
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest

from placer.demo import REQUEST_FILE, SNAPSHOT_FILE, demo_request, demo_snapshot, run_demo
from placer.diagnostics import check_placement
from placer.place import place

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_demo_data.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_demo_data", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bundled_text(name: str) -> str:
    return (resources.files("placer") / "data" / name).read_text(encoding="utf-8")


def test_bundled_files_load():
    snap = demo_snapshot()
    req = demo_request()
    assert len(snap.nodes) == 32
    assert snap.topology_levels == ("rack",)
    assert sorted({n.topology["rack"] for n in snap.nodes}) == ["rack-a", "rack-b", "rack-c", "rack-d"]
    assert all(n.hardware.gpus == 8 and n.hardware.gpu_model == "A100-SXM4-80GB" for n in snap.nodes)
    assert sum(1 for n in snap.nodes if n.pods) == 16
    assert sum(1 for n in snap.nodes if n.unschedulable) == 1
    assert sum(1 for n in snap.nodes if n.taints) == 1
    assert sum(1 for n in snap.nodes if n.unhealthy_gpus) == 1
    assert req.policy == "best-fit" and req.seed == 0
    assert {p.gpus for p in req.pods} >= {1, 2, 4, 8}
    assert any(p.shared for p in req.pods)
    assert [p.name for p in req.pods if p.gang == "team-g/ddp"] == ["team-g/ddp-0", "team-g/ddp-1"]
    assert req.gangs["team-g/ddp"].mode == "unconstrained"


def test_generator_reproduces_bundled_files(tool):
    for name, build in ((SNAPSHOT_FILE, tool.build_snapshot), (REQUEST_FILE, tool.build_request)):
        assert tool.render(build()) == bundled_text(name)
        assert json.loads(bundled_text(name)) == build()
    assert tool.build_snapshot(0) == tool.build_snapshot(0)
    assert tool.build_snapshot(1) != tool.build_snapshot(0)


def test_generator_main_writes_files(tool, tmp_path):
    assert tool.main(["--out", str(tmp_path)]) == 0
    for name in (SNAPSHOT_FILE, REQUEST_FILE):
        assert (tmp_path / name).read_text(encoding="utf-8") == bundled_text(name)


def test_run_demo_summary():
    snap, req = demo_snapshot(), demo_request()
    result = place(snap, req)
    assert check_placement(snap, req, result) == []
    text = run_demo()
    n_placed, n_pods = len(result.assignments), len(req.pods)
    assert f"placed {n_placed}/{n_pods} pods" in text
    assert "result verified by check_placement" in text
    [unplaced] = result.unschedulable
    assert unplaced.pod == "team-x/batch-infer"
    assert "didn't match Pod's node affinity/selector" in unplaced.reason
    assert f"{unplaced.pod}: {unplaced.reason}" in text
    assert re.search(r"team-g/ddp: placed, 2 pod\(s\)", text)
    assert "\x1b[" not in text
    for a in result.assignments:
        assert re.search(rf"^\s+{re.escape(a.pod)}\s+{a.node}\s", text, re.M), a.pod


def test_run_demo_other_policy():
    text = run_demo(policy="first-fit")
    assert "policy first-fit" in text
    assert "result verified by check_placement" in text
