"""The bundled demo: its documents, their generator, the story it tells, ``placer demo``."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path
from types import ModuleType

import pytest

import placer
from placer import policies
from placer.cli.demo import (
    FAILED_JOB,
    REQUEST_FILE,
    SNAPSHOT_FILE,
    demo_request,
    demo_snapshot,
    describe,
    load_demo_document,
    play_demo,
    run_demo,
)
from placer.diagnostics.check import check_placement

TOOL = Path(__file__).resolve().parent.parent / "tools" / "make_demo_data.py"
GANG = "team-a/llm"
GANG_PODS = [f"{GANG}-{i}" for i in range(8)]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_demo_data", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def run():
    return play_demo()


@pytest.fixture(scope="module")
def text() -> str:
    return run_demo()


def bundled_text(name: str) -> str:
    return (resources.files("placer") / "data" / name).read_text(encoding="utf-8")


def rack_of(snapshot: placer.ClusterSnapshot) -> dict[str, str]:
    return {n.name: n.topology["rack"] for n in snapshot.nodes}


# ---------------------------------------------------------------------- documents


def test_bundled_files_load():
    with resources.as_file(resources.files("placer") / "data" / SNAPSHOT_FILE) as path:
        snap = placer.load_snapshot(str(path))
    with resources.as_file(resources.files("placer") / "data" / REQUEST_FILE) as path:
        req = placer.load_request(str(path))
    assert snap == demo_snapshot() and req == demo_request()

    assert len(snap.nodes) == 32
    assert snap.topology_levels == ("rack",)
    racks = Counter(rack_of(snap).values())
    assert racks == {"rack-a": 8, "rack-b": 8, "rack-c": 8, "rack-d": 8}
    for n in snap.nodes:
        assert n.hardware.gpus == 8 and n.hardware.gpu_model == "A100-SXM4-80GB"
        assert n.hardware.gpu_topology is not None and n.hardware.gpu_topology.nvswitch

    leftovers = [(n, p) for n in snap.nodes for p in n.pods if p.name.startswith(f"{FAILED_JOB}/")]
    assert sorted(p.name for _, p in leftovers) == sorted(f"{FAILED_JOB}/worker-{i}" for i in range(16))
    assert len({n.name for n, _ in leftovers}) == 16
    assert all(4 <= len(p.gpus) <= 6 and not p.gpu_shares for _, p in leftovers)
    # No rack has 8 nodes with nothing on them: the gang cannot fit anywhere at first.
    idle = Counter(n.topology["rack"] for n in snap.nodes if not n.pods)
    assert max(idle.values()) < 8
    assert sum(1 for n in snap.nodes if n.unschedulable) == 1
    assert sum(1 for n in snap.nodes if n.taints) == 1
    assert sum(1 for n in snap.nodes if n.unhealthy_gpus) == 1

    assert req.policy == "best-fit" and req.seed == 0
    gang = [p for p in req.pods if p.gang == GANG]
    assert [p.name for p in gang] == GANG_PODS
    assert all(p.gpus == 8 and not p.shared for p in gang)
    assert req.gangs[GANG].mode == "required" and req.gangs[GANG].level == "rack"
    others = [p for p in req.pods if p.gang is None]
    assert 1 <= len(others) <= 8
    assert any(p.shared for p in others)


def test_generator_reproduces_bundled_files(tool):
    for name, build in ((SNAPSHOT_FILE, tool.build_snapshot), (REQUEST_FILE, tool.build_request)):
        assert tool.render(build()) == bundled_text(name)
        assert json.loads(bundled_text(name)) == build() == load_demo_document(name)
    assert tool.build_snapshot(0) == tool.build_snapshot(0)
    assert tool.build_snapshot(1) != tool.build_snapshot(0)


def test_generator_main_writes_files(tool, tmp_path):
    assert tool.main(["--out", str(tmp_path)]) == 0
    for name in (SNAPSHOT_FILE, REQUEST_FILE):
        assert (tmp_path / name).read_text(encoding="utf-8") == bundled_text(name)


# ---------------------------------------------------------------------- the story


def test_gang_pending_first_with_rack_reason(run):
    first = run.first
    pending = {u.pod: u.reason for u in first.unschedulable}
    assert sorted(pending) == GANG_PODS
    [reason] = set(pending.values())
    assert "\n" not in reason
    m = re.match(rf"gang {re.escape(GANG)}: topology level rack allows to fit only (\d+) out of 8 pod\(s\)", reason)
    assert m, reason
    assert 0 < int(m.group(1)) < 8
    [g] = first.gangs
    assert g.name == GANG and not g.placed
    # Every ordinary pod is placed in the first round.
    assert {a.pod for a in first.assignments} == {p.name for p in run.request.pods if p.gang is None}
    assert check_placement(run.snapshot, run.request, first) == []


def test_release_frees_every_leftover(run):
    leftovers = {p.name: len(p.gpus) for n in run.snapshot.nodes for p in n.pods if p.name.startswith(f"{FAILED_JOB}/")}
    assert sorted(run.released) == sorted(leftovers)
    assert run.freed_gpus == sum(leftovers.values())
    assert not any(p.name.startswith(f"{FAILED_JOB}/") for n in run.after_release.nodes for p in n.pods)


def after_release_by_hand(run) -> dict:
    """The bundled snapshot less the failed job's pods, plus the first round's pods."""
    doc = load_demo_document(SNAPSHOT_FILE)
    nodes = {n["name"]: n for n in doc["nodes"]}
    for n in doc["nodes"]:
        n["pods"] = [p for p in n.get("pods", []) if not p["name"].startswith(f"{FAILED_JOB}/")]
    pods = {p.name: p for p in run.request.pods}
    for a in run.first.assignments:
        pod = pods[a.pod]
        running = {"name": a.pod, "cpuMilli": pod.cpu_milli, "memoryMiB": pod.memory_mib}
        if pod.shared:
            running["gpuShares"] = {str(a.gpus[0]): pod.gpu_milli}
            if pod.gpu_memory_mib:
                running["gpuMemoryMiB"] = {str(a.gpus[0]): pod.gpu_memory_mib}
        else:
            running["gpus"] = list(a.gpus)
        nodes[a.node]["pods"].append(running)
    return doc


def test_gang_placed_in_one_rack_after_release(run):
    second = run.second
    assert second.unschedulable == ()
    assert sorted(a.pod for a in second.assignments) == GANG_PODS
    racks = rack_of(run.snapshot)
    assert len({racks[a.node] for a in second.assignments}) == 1
    assert len({a.node for a in second.assignments}) == 8
    assert all(len(a.gpus) == 8 and a.gang == GANG for a in second.assignments)
    [g] = second.gangs
    assert g.placed and g.domains["rack"] == (racks[second.assignments[0].node],)
    assert [p.name for p in run.retry.pods] == GANG_PODS and set(run.retry.gangs) == {GANG}
    assert run.violations == ([], [])
    assert check_placement(run.after_release, run.retry, second) == []
    by_hand = placer.load_snapshot(after_release_by_hand(run))
    assert check_placement(by_hand, run.retry, second) == []
    assert {n.name: {p.name for p in n.pods} for n in by_hand.nodes} == {
        n.name: {p.name for p in n.pods} for n in run.after_release.nodes
    }


# ---------------------------------------------------------------------- the text


def test_run_demo_text_tells_the_story(run, text):
    lines = text.splitlines()
    assert len(lines) <= 50
    assert "\x1b[" not in text and "\t" not in text
    assert text.startswith("cluster: 32 nodes x 8 GPUs (A100-SXM4-80GB, NVSwitch) = 256 GPUs, 4 racks\n")
    reason = run.first.unschedulable[0].reason
    assert f"    {reason}" in lines
    released = f"releasing the leftover pods of {FAILED_JOB}: "
    [release_line] = [ln for ln in lines if released in ln]
    assert f"({len(run.released)} pods, {run.freed_gpus} GPUs freed)" in release_line
    assert lines.index(f"    {reason}") < lines.index(release_line)
    rack = rack_of(run.snapshot)[run.second.assignments[0].node]
    assert f"  gang {GANG}: placed, 8 pod(s) inside rack {rack} (solver greedy" in text
    for a in run.first.assignments:
        assert re.search(rf"^\s+{re.escape(a.pod)}\s+{a.node}\s+{rack_of(run.snapshot)[a.node]}\s", text, re.M)
    for a in run.second.assignments:
        assert re.search(rf"^\s+{re.escape(a.pod)}\s+{a.node}\s+{rack}\s+0-7$", text, re.M), a.pod
    assert lines[-1].startswith("result verified by check_placement")
    assert lines[-1].count("no violation(s)") == 2


def test_module_entry_point(text):
    proc = subprocess.run(
        [sys.executable, "-m", "placer", "demo"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == text


def test_run_demo_other_policy():
    text = run_demo(policy="first-fit")
    assert "policy first-fit" in text
    assert text.splitlines()[-1].count("no violation(s)") == 2


@pytest.mark.parametrize("policy", ["best-fit", "first-fit", "spread", "random"])
def test_every_policy_verifies(policy):
    run = play_demo(policy)
    assert run.request.policy == policy
    assert run.violations == ([], [])
    assert {u.pod for u in run.first.unschedulable} == set(GANG_PODS)


@pytest.mark.parametrize("policy", policies.names())
def test_the_story_ends_placed_or_explained_under_every_policy(policy):
    run = play_demo(policy)
    assert run.violations == ([], [])
    text = describe(run)
    (gang,) = run.second.gangs
    if gang.placed:
        assert f"gang {gang.name}: placed, 8 pod(s) inside rack " in text and "why:" not in text
        return
    # still pending: the cause, and per rack what keeps its nodes from a pod of the gang
    lines = text.splitlines()
    why = [line for line in lines if line.startswith("  why: ")]
    racks = [line for line in lines if re.match(r"  rack-[a-d]: \d of 8 pods fit; ", line)]
    assert len(why) == 1 and why[0].startswith("  why: topology — ")
    assert len(racks) == 4 and all(int(line.split(": ")[1][0]) < 8 for line in racks)
    step1 = {a.pod: a.node for a in run.first.assignments}
    blamed = [(pod, node) for pod, node in step1.items() if f"{node} holds {pod}" in text]
    assert blamed and f"(placed in step 1 by {policy})" in text
