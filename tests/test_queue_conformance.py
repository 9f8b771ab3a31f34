"""Kueue's scheduler, flavor-assigner and fair-sharing unit tests, one cycle each
(``tests/data/conformance/kueue_quota.json``): placer admits the same workloads with the same
flavors and borrowing, leaves the same ones pending or inadmissible, and computes the same
dominant resource shares."""
from __future__ import annotations

from typing import Any, Mapping

import pytest

from kueue_quota_cases import CASES, config, resource, workloads
from placer.queues.scheduler import QueueScheduler


def scheduler_for(case: Mapping[str, Any]) -> QueueScheduler:
    s = QueueScheduler(config(case))
    for w in workloads(case):
        s.submit(w)
    return s


def flavors_of(raw: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    return {ps: {resource(r): f for r, f in m.items()} for ps, m in raw.items()}


def name(key: str) -> str:
    return key.split("/", 1)[1]


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "schedule_cycle"], ids=lambda c: c["id"])
def test_schedule_cycle(case: Mapping[str, Any]) -> None:
    expected = case["expected"]
    result = scheduler_for(case).cycle()
    admitted = {name(a.workload): (a.cluster_queue, {ps: dict(m) for ps, m in a.flavors.items()}, a.borrowing)
                for a in result.admitted}
    assert admitted == {
        a["name"]: (a["clusterQueue"], flavors_of(a["flavors"]), a["borrows"]) for a in expected["admittedThisCycle"]
    }
    assert sorted(name(p.workload) for p in result.pending if not p.inadmissible) == sorted(expected["pendingAfter"])
    assert sorted(name(p.workload) for p in result.pending if p.inadmissible) == sorted(expected["inadmissible"])
    assert [p.workload for p in result.preempted] == expected.get("preempted", [])


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "flavor_assignment"], ids=lambda c: c["id"])
def test_flavor_assignment(case: Mapping[str, Any]) -> None:
    expected = case["expected"]
    assert expected["mode"] == "Fit"
    s = scheduler_for(case)
    (admitted,) = s.cycle().admitted
    assert {ps: dict(m) for ps, m in admitted.flavors.items()} == flavors_of(expected["flavors"])
    assert admitted.borrowing == (expected["borrowingLevel"] > 0)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "drs"], ids=lambda c: c["id"])
def test_dominant_resource_share(case: Mapping[str, Any]) -> None:
    s = scheduler_for(case)
    for node, want in case["expected"]["drs"].items():
        share = s.share(node)
        assert share.value() == want["value"], node
        assert share.borrowing == want["borrowing"], node
        if "dominantResource" in want:
            assert share.resource == resource(want["dominantResource"]), node


def test_every_case_is_checked() -> None:
    assert {c["kind"] for c in CASES} == {"schedule_cycle", "flavor_assignment", "drs"}
