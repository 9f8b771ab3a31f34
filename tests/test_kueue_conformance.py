"""Kueue Topology Aware Scheduling conformance (tests/data/conformance/kueue_tas.json).

Facts transcribed from Kueue's ``TestFindTopologyAssignments``, converted by
tests/kueue.py. How placer is held to them (tests/data/conformance/kueue_tas.json's
source README, section "kueue_tas.json"):

- Kueue places a gang => placer places every pod of it, ``check_placement`` finds nothing,
  and at every level, outermost first, placer uses no more distinct domains than Kueue's
  answer (domains counted per level in both; a hostname-only Kueue answer gets its outer
  domains from the node labels).
- Kueue fails => placer fails too (every pod of the gang unschedulable) unless its
  placement is valid (an exact search may find what Kueue's greedy misses: recorded, not
  failed). A failure reason carries Kueue's information in placer's words: the level and
  the count (``topology level <level> allows to fit only <k> out of <n> pod(s)``) and the
  nodes excluded per reason (:data:`EXCLUSION_PHRASES`).

Exact per-domain counts are not required to match (placer's policies may break ties
differently); both assignments are printed and put in every assertion message.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import kueue
import placer
from placer.model import ClusterSnapshot, PlacementRequest

DATA = Path(__file__).parent / "data" / "conformance" / "kueue_tas.json"
DOC = json.loads(DATA.read_text())
FIXTURES: dict[str, Any] = DOC["fixtures"]
CASES: list[dict[str, Any]] = DOC["cases"]
IDS = [c["id"] for c in CASES]

# Kueue's exclusion stats (ExclusionStats.formatReasons) -> placer's kube-scheduler-style
# phrase in "0/N nodes are available: <count> <phrase>, ...". Kueue's "Total nodes: T"
# is placer's "0/T nodes" (plus nodes Kueue never sees: not ready, cordoned, off-flavor).
EXCLUSION_PHRASES: dict[str, str] = {
    "nodeSelector": "node(s) didn't match Pod's node affinity/selector",
    "affinity": "node(s) didn't match Pod's node affinity/selector",
    'resource "cpu"': "Insufficient cpu",
    'resource "memory"': "Insufficient memory",
    'resource "pods"': "Too many pods",
    'resource "<the case\'s extended resource>"': "Insufficient nvidia.com/gpu",
    # kube-scheduler v1.36 names no taint: every taint Kueue names is one placer phrase
    'taint "<key>=<value>:<effect>"': "node(s) had untolerated taint(s)",
    'taint "<key>:<effect>"': "node(s) had untolerated taint(s)",
}


def placer_phrase(kind: str, arg: str | None) -> str:
    """The placer phrase of one Kueue exclusion reason (see :data:`EXCLUSION_PHRASES`)."""
    if kind in ("nodeSelector", "affinity"):
        return EXCLUSION_PHRASES[kind]
    if kind == "resource":
        assert arg is not None
        if arg in ("cpu", "memory", "pods"):
            return EXCLUSION_PHRASES[f'resource "{arg}"']
        return "Insufficient nvidia.com/gpu"  # the one extended resource maps to gpus
    if kind == "taint":
        assert arg is not None
        m = re.fullmatch(r"(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>\w+)", arg)
        assert m, f"unparsed Kueue taint {arg!r}"
        return EXCLUSION_PHRASES['taint "<key>=<value>:<effect>"' if m["value"] else 'taint "<key>:<effect>"']
    raise AssertionError(f"Kueue exclusion {kind!r} has no placer equivalent")


def _convert(case: dict[str, Any]) -> kueue.Converted:
    try:
        return kueue.convert(case, FIXTURES)
    except kueue.NotExpressible as e:
        pytest.skip(f"{case['id']}: not expressible in placer/v1: {e}")


def _fmt(rows: list[tuple[tuple[str, ...], int]]) -> str:
    return "[" + ", ".join(f"{'/'.join(p)}:{c}" for p, c in rows) + "]"


def _fmt_levels(counts: list[tuple[str, int]]) -> str:
    return ", ".join(f"{lv}={n}" for lv, n in counts)


def _domain_rule(
    conv: kueue.Converted, what: str, placer_full: dict, kueue_full: dict
) -> list[str]:
    """At every level, outermost first: placer's distinct domains <= Kueue's."""
    pc = kueue.domains_per_level(conv, placer_full)
    kc = kueue.domains_per_level(conv, kueue_full)
    lex = [n for _, n in pc] <= [n for _, n in kc]
    out = []
    for (lv, p), (_, k) in zip(pc, kc):
        if p > k:
            out.append(
                f"{what}: domain rule broken at level {lv}: placer uses {p} domain(s), Kueue {k} "
                f"(placer {_fmt_levels(pc)}; Kueue {_fmt_levels(kc)}; placer is "
                f"{'' if lex else 'not '}lexicographically no worse)"
            )
            break
    return out


# --------------------------------------------------------------------------- the cases


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kueue_case(case: dict[str, Any], record_property) -> None:
    conv = _convert(case)
    result = placer.place(conv.snapshot, conv.request)
    problems = placer.check_placement(conv.snapshot, conv.request, result)
    assigned = {a.pod for a in result.assignments}
    reasons = {u.pod: u.reason for u in result.unschedulable}

    failures: list[str] = []
    lines: list[str] = [f"{conv.case_id}: {case['source_test_name']}"]
    lines += [f"  note: {n}" for n in conv.notes]
    for gang, members in conv.gangs.items():
        names = [p for ps in members for p in ps.pod_names]
        placed = [p for p in names if p in assigned]
        kueue_places = all(ps.expected["result"] == "assigned" for ps in members)
        for ps in members:
            got = kueue.placer_assignment(conv, result, ps.pod_names)
            if ps.expected["result"] == "assigned":
                want = kueue.in_kueue_form(conv, kueue.kueue_full_paths(conv, ps.expected))
                lines.append(f"  podset {ps.name}: Kueue {_fmt(want)} | placer {_fmt(got)}")
            else:
                lines.append(f"  podset {ps.name}: Kueue fails: {ps.expected['reason']!r} | placer {_fmt(got)}")
        if placed:
            lines.append(f"  gang {gang}: placer gang result {[g.to_dict() for g in result.gangs if g.name == gang]}")
        for p in names:
            if p in reasons:
                lines.append(f"  placer reason {p}: {reasons[p]}")
                break

        if kueue_places:
            if len(placed) != len(names):
                missing = [p for p in names if p not in assigned]
                failures.append(
                    f"gang {gang}: Kueue places it, placer placed {len(placed)}/{len(names)} pod(s); "
                    f"first reason: {reasons.get(missing[0])!r}"
                )
                continue
            if problems:
                failures.append(f"gang {gang}: check_placement: {problems}")
            for ps in members:
                failures += _domain_rule(
                    conv,
                    f"podset {ps.name}",
                    kueue.placer_full_paths(conv, result, ps.pod_names),
                    kueue.kueue_full_paths(conv, ps.expected),
                )
            if len(members) > 1:
                kfull: dict = {}
                for ps in members:
                    for path, c in kueue.kueue_full_paths(conv, ps.expected).items():
                        kfull[path] = kfull.get(path, 0) + c
                failures += _domain_rule(conv, f"group {gang}", kueue.placer_full_paths(conv, result, names), kfull)
            continue

        # Kueue fails.
        if len(placed) == len(names):
            if problems:
                failures.append(f"gang {gang}: Kueue fails, placer places it invalidly: {problems}")
            else:
                record_property("placer_places_where_kueue_fails", gang)
                lines.append(f"  RECORDED: Kueue fails, placer's placement of {gang} is valid")
            continue
        if placed:
            failures.append(f"gang {gang}: partly placed ({len(placed)}/{len(names)}): all or none")
            continue
        if problems:
            failures.append(f"check_placement: {problems}")
        failures += _failure_reason_rule(conv, members, names, reasons)

    report = "\n".join(lines)
    print(report)
    assert not failures, "\n".join(failures) + "\n--\n" + report


def _failure_reason_rule(
    conv: kueue.Converted, members: list[kueue.PodSetInfo], names: list[str], reasons: dict[str, str]
) -> list[str]:
    out: list[str] = []
    ps = next(p for p in members if p.expected["result"] == "failure")
    kf = kueue.parse_kueue_reason(ps.expected["reason"])
    # The level: a required gang fails at its level; Kueue's message names only the
    # topology, so for preferred / unconstrained gangs any level name is accepted.
    level = re.escape(ps.level) if ps.mode == "required" and ps.level else r"\S+"
    wanted: list[str] = []
    if kf.fit is not None and kf.total is not None:
        if kf.unit == "slice":
            s = ps.slice_size
            wanted.append(
                rf"topology level {level} allows to fit only "
                rf"(?:{kf.fit} out of {kf.total} slice\(s\)|{kf.fit * s} out of {kf.total * s} pod\(s\))"
            )
        else:
            wanted.append(rf"topology level {level} allows to fit only {kf.fit} out of {kf.total} pod\(s\)")
    extra = len(conv.kueue_invisible)
    for p in names:
        reason = reasons.get(p)
        if reason is None:
            out.append(f"pod {p}: neither assigned nor unschedulable")
            continue
        for pattern in wanted:
            if not re.search(pattern, reason):
                out.append(
                    f"pod {p}: reason lacks /{pattern}/ (Kueue: {ps.expected['reason']!r}); "
                    f"placer: {reason!r}"
                )
        if kf.total_nodes is not None:
            m = re.search(r"0/(\d+) nodes are available", reason)
            if not m or int(m.group(1)) != kf.total_nodes + extra:
                out.append(
                    f"pod {p}: reason lacks '0/{kf.total_nodes + extra} nodes are available' "
                    f"(Kueue: Total nodes: {kf.total_nodes}); placer: {reason!r}"
                )
        merged: dict[str, int] = {}
        for (kind, arg), cnt in kf.excluded.items():
            phrase = placer_phrase(kind, arg)
            merged[phrase] = merged.get(phrase, 0) + cnt
        for phrase, cnt in merged.items():
            got = [int(x) for x in re.findall(rf"(?<![\d/])(\d+) {re.escape(phrase)}", reason)]
            ok = (sum(got) == cnt) if not extra else (sum(got) >= cnt)
            if not got or not ok:
                out.append(
                    f"pod {p}: reason lacks '{cnt} {phrase}' (Kueue excluded {cnt}); placer: {reason!r}"
                )
    return out


# --------------------------------------------------------------------------- the converter


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_converted_documents_are_valid(case: dict[str, Any]) -> None:
    conv = _convert(case)
    snap = ClusterSnapshot.from_dict(conv.snapshot)
    req = PlacementRequest.from_dict(conv.request)
    want = [p for ps in conv.podsets for p in ps.pod_names]
    assert [p.name for p in req.pods] == want
    assert len(snap.nodes) == len(conv.node_path)


def _kueue_answer_as_result(conv: kueue.Converted) -> dict[str, Any]:
    """Kueue's expected assignment as a placer result: pods to the named hosts, or, for a
    leaf above the hostname, to the leaf's nodes first-fit."""
    snap = ClusterSnapshot.from_dict(conv.snapshot)
    free: dict[str, dict[str, Any]] = {}
    for n in snap.nodes:
        hw = n.hardware
        held = {g for rp in n.pods for g in rp.gpus}
        free[n.name] = {
            "cpu": None if hw.cpu_milli is None else hw.cpu_milli - sum(rp.cpu_milli for rp in n.pods),
            "mem": None if hw.memory_mib is None else hw.memory_mib - sum(rp.memory_mib for rp in n.pods),
            "pods": None if hw.max_pods is None else hw.max_pods - len(n.pods),
            "gpus": [g for g in range(hw.gpus) if g not in held],
        }
    pods = {p.name: p for p in PlacementRequest.from_dict(conv.request).pods}
    assignments, unschedulable = [], []
    for ps in conv.podsets:
        if ps.expected["result"] != "assigned":
            unschedulable += [{"pod": p, "reason": "Kueue fails"} for p in ps.pod_names]
            continue
        todo = list(ps.pod_names)
        for path, count in sorted(kueue.kueue_full_paths(conv, ps.expected).items()):
            nodes = [n for n, np_ in conv.node_path.items() if np_ == path]
            for _ in range(count):
                name = todo.pop(0)
                pod = pods[name]
                for n in nodes:
                    f = free[n]
                    if (
                        (f["cpu"] is None or f["cpu"] >= pod.cpu_milli)
                        and (f["mem"] is None or f["mem"] >= pod.memory_mib)
                        and (f["pods"] is None or f["pods"] >= 1)
                        and len(f["gpus"]) >= pod.gpus
                    ):
                        break
                else:
                    n = nodes[0]  # over capacity: check_placement will say so
                f = free[n]
                for k, q in (("cpu", pod.cpu_milli), ("mem", pod.memory_mib), ("pods", 1)):
                    if f[k] is not None:
                        f[k] -= q
                gpus, f["gpus"] = f["gpus"][: pod.gpus], f["gpus"][pod.gpus:]
                assignments.append({"pod": name, "node": n, "gpus": gpus, "gang": pod.gang})
    return {"apiVersion": "placer/v1", "kind": "PlacementResult",
            "assignments": assignments, "unschedulable": unschedulable}


PLACED_BY_KUEUE = [c for c in CASES if any(ps["expected"]["result"] == "assigned" for ps in c["podsets"])]


@pytest.mark.parametrize("case", PLACED_BY_KUEUE, ids=[c["id"] for c in PLACED_BY_KUEUE])
def test_kueue_answer_is_valid_in_converted_terms(case: dict[str, Any]) -> None:
    """The converter keeps capacities and constraints: Kueue's own answer, written as a
    placer result, passes placer's independent checker (cases where Kueue places)."""
    conv = _convert(case)
    assert any(ps.expected["result"] == "assigned" for ps in conv.podsets)
    result = _kueue_answer_as_result(conv)
    assert placer.check_placement(conv.snapshot, conv.request, result) == []


def test_memory_in_exact_units() -> None:
    case = next(c for c in CASES if c["id"] == "kueue-tas-09")
    conv = kueue.convert(case, FIXTURES)
    assert conv.memory_unit_bytes == 1024  # 1024-byte requests beside 1 GiB nodes
    mems = {n["name"]: n["memoryMiB"] for n in conv.snapshot["nodes"]}
    assert mems["b1-r1-x3"] == 1073741824 // 1024
    assert mems["b2-r2-x4"] == 4294967296 // 1024
    assert conv.request["pods"][0]["memoryMiB"] == 1
    assert kueue.memory_unit([2 << 20, 3 << 20]) == kueue.MIB


def test_missing_allocatable_is_zero_when_requested() -> None:
    case = {
        "id": "synthetic",
        "levels": [kueue.HOSTNAME],
        "nodes": [
            {"name": "a", "labels": {kueue.HOSTNAME: "a"}, "allocatable": {"cpu": 1000}, "ready": True},
            {"name": "b", "labels": {kueue.HOSTNAME: "b"}, "allocatable": {"cpu": 1000, "pods": 5,
             "memory": 1 << 30, "nvidia.com/gpu": 2}, "ready": False},
        ],
        "podsets": [{"name": "w", "count": 1, "per_pod_requests": {"memory": 1 << 20, "nvidia.com/gpu": 1},
                     "topology": {"mode": "required", "level": kueue.HOSTNAME},
                     "expected": {"result": "failure", "reason": ""}}],
    }
    conv = kueue.convert(case, {})
    a, b = conv.snapshot["nodes"]
    assert (a["memoryMiB"], a["maxPods"], a.get("gpus", 0)) == (0, 0, 0)
    assert (b["memoryMiB"], b["maxPods"], b["gpus"], b["unschedulable"]) == (1024, 5, 2, True)
    assert conv.kueue_invisible == ["b"]
    assert "topologyLevels" not in conv.snapshot
    assert conv.request["gangs"]["synthetic"] == {"topology": {"mode": "required", "level": "node"}}


def test_aggregated_leaf_that_nodes_cannot_hold_is_not_expressible() -> None:
    case = {
        "id": "synthetic",
        "levels": ["cloud.com/topology-rack"],
        "nodes": [
            {"name": n, "labels": {"cloud.com/topology-rack": "r1"}, "allocatable": {"cpu": 500, "pods": 10}}
            for n in ("a", "b")
        ],
        "podsets": [{"name": "", "count": 1, "per_pod_requests": {"cpu": 1000},
                     "topology": {"mode": "required", "level": "cloud.com/topology-rack"},
                     "expected": {"result": "assigned", "levels": ["cloud.com/topology-rack"],
                                  "domains": [{"values": ["r1"], "count": 1}]}}],
    }
    with pytest.raises(kueue.NotExpressible, match="summed capacity"):
        kueue.convert(case, {})


def test_expected_domains_per_level_from_hostnames() -> None:
    case = next(c for c in CASES if c["id"] == "kueue-tas-01")
    conv = kueue.convert(case, FIXTURES)
    full = kueue.kueue_full_paths(conv, case["podsets"][0]["expected"])
    assert set(full) == {("b1", "r3", h) for h in ("x1", "x2", "x4", "x6")}
    assert kueue.domains_per_level(conv, full) == [("block", 1), ("rack", 1), ("node", 4)]
    assert conv.snapshot["topologyLevels"] == ["block", "rack"]


def test_parse_kueue_reason_and_phrases() -> None:
    case = next(c for c in CASES if c["id"] == "kueue-tas-16")
    kf = kueue.parse_kueue_reason(case["podsets"][0]["expected"]["reason"])
    assert (kf.fit, kf.total, kf.unit, kf.total_nodes) == (0, 1, "pod", 4)
    assert kf.excluded == {("nodeSelector", None): 2, ("resource", "cpu"): 1,
                           ("taint", "key=value:NoSchedule"): 1}
    assert placer_phrase("taint", "key=value:NoSchedule") == "node(s) had untolerated taint(s)"
    assert placer_phrase("taint", "gpu:NoExecute") == "node(s) had untolerated taint(s)"
    assert placer_phrase("resource", "pods") == "Too many pods"
    kf = kueue.parse_kueue_reason('topology "t" allows to fit only 3 out of 4 slice(s)')
    assert (kf.fit, kf.total, kf.unit, kf.total_nodes, kf.excluded) == (3, 4, "slice", None, {})


def test_rules_catch_violations() -> None:
    """The rules above fail on answers they must reject (independent of placer's kernel)."""
    case = next(c for c in CASES if c["id"] == "kueue-tas-01")
    conv = kueue.convert(case, FIXTURES)
    kfull = kueue.kueue_full_paths(conv, case["podsets"][0]["expected"])
    # Two racks of two hosts (x3, x5) instead of one rack of four hosts: more racks.
    msgs = _domain_rule(conv, "ps0", {("b1", "r1", "x3"): 2, ("b1", "r2", "x5"): 2}, kfull)
    assert len(msgs) == 1 and "at level rack" in msgs[0]
    assert _domain_rule(conv, "ps0", kfull, kfull) == []

    case = next(c for c in CASES if c["id"] == "kueue-tas-16")
    conv = kueue.convert(case, FIXTURES)
    good = (
        "gang g: topology level node allows to fit only 0 out of 1 pod(s); 0/4 nodes are "
        "available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    assert _failure_reason_rule(conv, conv.podsets, ["ps0-0"], {"ps0-0": good}) == []
    bad = "gang g: no node domain fits all 1 pod(s)"
    # level+count, total nodes, and the three exclusion phrases are all missing.
    assert len(_failure_reason_rule(conv, conv.podsets, ["ps0-0"], {"ps0-0": bad})) == 5
    miscounted = good.replace("2 node(s) didn't", "3 node(s) didn't").replace("only 0 out", "only 1 out")
    assert len(_failure_reason_rule(conv, conv.podsets, ["ps0-0"], {"ps0-0": miscounted})) == 2
