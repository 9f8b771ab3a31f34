"""Cluster.bind in a scheduler loop: all or nothing, exactly what was decided, clear errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

import placer
from placer.model import GangSpec, PlacementResult, PodRequest


def two_nodes() -> placer.ClusterSnapshot:
    return placer.ClusterSnapshot.from_dict({
        "apiVersion": "placer/v1", "kind": "ClusterSnapshot",
        "nodes": [{"name": n, "gpus": 8, "gpuModel": "H100", "cpuMilli": 16000, "labels": {"pool": n}}
                  for n in ("a", "b")],
    })


def free_state(cluster: placer.Cluster) -> tuple:
    free = cluster.session.free
    return tuple(np.array(x).tolist() for x in (free.cpu_milli, free.gpu_milli, free.pod_slots))


def test_a_gang_whose_second_pod_no_longer_fits_binds_nothing():
    cluster = placer.Cluster(two_nodes())
    gang = cluster.place([PodRequest("g-0", gpus=8), PodRequest("g-1", gpus=8)], gang=GangSpec("g"))
    assert [a.node for a in gang.assignments] == ["a", "b"]
    cluster.bind(cluster.place(PodRequest("x", gpus=8, node_selector={"pool": "b"})))  # b is full now
    before = free_state(cluster)
    with pytest.raises(placer.InvalidInputError, match="g-1: does not fit on b"):
        cluster.bind(gang)
    assert not cluster.session.holds("g-0") and not cluster.session.holds("g-1")
    assert free_state(cluster) == before
    cluster.release("x")
    cluster.bind(gang)  # once b is free again, the same decision binds whole
    assert cluster.session.holds("g-0") and cluster.session.holds("g-1")


def test_an_older_decision_binds_what_it_decided():
    cluster = placer.Cluster(two_nodes())
    small = cluster.place(PodRequest("re", cpu_milli=1000))
    large = cluster.place(PodRequest("re", cpu_milli=15000))
    assert small.assignments[0] == large.assignments[0]  # same node, same (no) GPUs
    cluster.bind(small)
    assert cluster.session.free.cpu_milli.tolist() == [15000, 16000]  # 1 CPU, as decided
    cluster.release("re")
    cluster.bind(large)
    assert cluster.session.free.cpu_milli.tolist() == [1000, 16000]


def test_too_old_a_decision_and_a_copy_are_refused_as_stale():
    cluster = placer.Cluster(two_nodes())
    first = cluster.place(PodRequest("re", cpu_milli=1000))
    for cpu in (2000, 3000, 4000, 5000):
        latest = cluster.place(PodRequest("re", cpu_milli=cpu))
    with pytest.raises(placer.InvalidInputError, match="re: stale decision"):
        cluster.bind(first)  # four newer decisions since
    copy = PlacementResult.from_dict(json.loads(json.dumps(latest.to_dict())))
    assert copy.assignments[0] == first.assignments[0]  # a copy cannot say which request it was
    with pytest.raises(placer.InvalidInputError, match="re: stale decision"):
        cluster.bind(copy)
    assert cluster.session.free.cpu_milli.tolist() == [16000, 16000]  # nothing bound
    cluster.bind(latest)
    assert cluster.session.free.cpu_milli.tolist() == [11000, 16000]


@pytest.mark.parametrize("bad", [None, 3, "re", {"pod": "re"}, [None]])
def test_bind_of_something_else_is_a_clear_error(bad):
    cluster = placer.Cluster(two_nodes())
    cluster.place(PodRequest("re"))
    with pytest.raises(placer.InvalidInputError) as e:
        cluster.bind(bad)
    assert e.value.where in ("placement", "placement[0]")
    assert "expected a PlacementResult" in str(e.value) or "expected an Assignment" in str(e.value)


def test_place_and_release_refuse_none():
    cluster = placer.Cluster(two_nodes())
    with pytest.raises(placer.InvalidInputError, match="policy: expected a policy name"):
        cluster.place(PodRequest("re"), policy=None)
    with pytest.raises(placer.InvalidInputError, match="pods: expected a pod, or a list of pods"):
        cluster.place(None)
    with pytest.raises(placer.InvalidInputError, match="pod_name: expected a pod name"):
        cluster.release(None)


def test_a_copy_binds_when_every_decision_of_the_pod_asked_the_same():
    cluster = placer.Cluster(two_nodes())
    for _ in range(6):  # a scheduler loop placing the same pending pod every cycle
        decided = cluster.place(PodRequest("re", cpu_milli=3000))
    copy = PlacementResult.from_dict(json.loads(json.dumps(decided.to_dict())))
    cluster.bind(copy)
    assert cluster.session.free.cpu_milli.tolist() == [13000, 16000]
