"""Issue #31 §2: a value is decoded once, where it enters.

``Cluster.place``, ``node_scores`` and ``place_on`` take ``PodRequest`` objects as they are
(no ``to_dict`` round trip), and check what spans them as the document path does; ``preempt``
checks its request against the snapshot once; a call looks its policy up once; the
extender's ``/filter`` and ``/prioritize`` decode a pod once and key their cache on the
decoded Pod object, whatever the order of its keys.
"""
from __future__ import annotations

import json
from typing import Any, Callable
from unittest import mock

import pytest

import placer.schema
import placer.schema.request
from placer import policies
from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.model import GangSpec, PlacementRequest, PodRequest
from placer.placement.cluster import Cluster
from placer.schema.extender import decode_filter_args, same_json_value
from placer.serve import extender as extender_module
from placer.serve.extender import Extender
from placer.testing import keys_reversed

NAMES = ["n0", "n1"]


def snapshot() -> dict[str, Any]:
    """Two 8-GPU nodes in one rack; n0 runs a low-priority 6-GPU pod."""
    nodes = [
        {"name": name, "gpus": 8, "gpuModel": "H100", "cpuMilli": 64000, "memoryMiB": 512000,
         "topology": {"rack": "r0"}, "labels": {"rack": "r0"}}
        for name in NAMES
    ]
    nodes[0]["pods"] = [{"name": "run", "gpus": [0, 1, 2, 3, 4, 5], "priority": 0}]
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "topologyLevels": ["rack"], "nodes": nodes}


def counting(calls: list[Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, noting each call's first argument in ``calls``."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0] if args else None)
        return original(*args, **kwargs)

    return counted


def test_place_node_scores_and_place_on_take_pod_objects_as_they_are() -> None:
    pods = [PodRequest("a", gpus=2), PodRequest("b", gpus=1, gpu_milli=500, priority=3)]
    gang = [PodRequest("g0", gpus=4), PodRequest("g1", gpus=4)]
    as_dicts = Cluster(snapshot())
    expected = (
        as_dicts.place([p.to_dict() for p in pods]),
        as_dicts.node_scores(pods[0].to_dict()).tolist(),
        as_dicts.place_on(pods[0].to_dict(), "n0"),
        as_dicts.place([p.to_dict() for p in gang], gang={"name": "g"}),
    )
    cluster = Cluster(snapshot())
    with mock.patch.object(PodRequest, "to_dict", side_effect=AssertionError("PodRequest.to_dict called")):
        got = (
            cluster.place(pods),
            cluster.node_scores(pods[0]).tolist(),
            cluster.place_on(pods[0], "n0"),
            cluster.place(gang, gang=GangSpec("g")),
        )
    assert got == expected
    assert sorted(a.pod for a in got[0].assignments) == ["a", "b"]
    assert {a.gang for a in got[3].assignments} == {"g"} and got[3].gangs[0].placed


@pytest.mark.parametrize(
    "pods, gang, seed, message",
    [
        ([PodRequest("a"), PodRequest("a")], None, 0, r"^pods\[1\]\.name: duplicate pod name 'a', first at pods\[0\]$"),
        ([PodRequest("a\x07")], None, 0, r"^pods\[0\]\.name: "),
        ([PodRequest("a", gang="g")], None, 0, r"^gang: pod 'a' names gang 'g'; pass gang=$"),
        ([PodRequest("run")], None, 0, r"^pods\[0\]\.name: pod 'run' is already bound$"),
        ([PodRequest("a", gpus=1)], GangSpec("g", mode="required", level="zone"), 0,
         r"^gangs\.g\.topology\.level: unknown topology level 'zone'; the snapshot has: rack, node$"),
        ([PodRequest("a", gpus=1, resources={"x/y": 1})], GangSpec("g"), 0, r"^pods\[0\]\.resources: "),
        ([PodRequest("a")], None, -1, r"^seed: "),
    ],
)
def test_pod_objects_are_refused_for_what_spans_them_as_their_documents_are(
    pods: list[PodRequest], gang: GangSpec | None, seed: int, message: str
) -> None:
    cluster = Cluster(snapshot())
    with pytest.raises(InvalidInputError, match=message):
        cluster.place(pods, gang=gang, seed=seed)
    as_document = gang.to_dict() | {"name": gang.name} if gang is not None else None
    with pytest.raises(InvalidInputError, match=r"^(seed|gang|pods|gangs)\b") as refused:
        cluster.place([p.to_dict() for p in pods], gang=as_document, seed=seed)
    if seed == 0:  # the same words either way (a negative seed: msgspec's words for the document)
        assert refused.match(message)


def test_preempt_checks_the_request_against_the_snapshot_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[Any] = []
    bound_checks: list[Any] = []
    for module in (placer.schema, placer.schema.request):
        monkeypatch.setattr(
            module, "check_request_against_snapshot", counting(checks, placer.schema.request.check_request_against_snapshot)
        )
    monkeypatch.setattr(KernelSession, "first_held", counting(bound_checks, KernelSession.first_held))
    request = {
        "apiVersion": "placer/v1", "kind": "PlacementRequest", "gangs": {"g": {}},
        "pods": [{"name": "w", "gpus": 5, "priority": 9, "gang": "g", "replicas": 2}],
    }
    for given in (request, PlacementRequest.from_dict(request)):
        checks.clear()
        cluster = Cluster(snapshot())
        bound_checks.clear()
        result = cluster.preempt(given)
        assert [p.victims for p in result.preemptions] == [("run",)]
        assert len(checks) == 1 and len(bound_checks) == 1


def test_a_call_looks_its_policy_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    lookups: list[Any] = []
    monkeypatch.setattr(policies, "get", counting(lookups, policies.get))
    document = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": "first-fit",
                "pods": [{"name": "x", "gpus": 8, "priority": 9}]}
    decoded = PlacementRequest.from_dict(document)
    cluster = Cluster(snapshot())
    calls: list[Callable[[], Any]] = [
        lambda: cluster.place(PodRequest("a", gpus=1), policy="first-fit"),
        lambda: cluster.place({"name": "a", "gpus": 1}, policy="first-fit"),
        lambda: cluster.node_scores(PodRequest("a", gpus=1), policy="first-fit"),
        lambda: cluster.place_on(PodRequest("a", gpus=1), "n1", policy="first-fit"),
        lambda: cluster.defrag(document),
        lambda: cluster.preempt(decoded),
        lambda: Cluster(snapshot()).schedule(document),
    ]
    for call in calls:
        lookups.clear()
        call()
        assert lookups == ["first-fit"]


def pending(name: str, priority: Any = 5) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Pending"},
    }


def test_filter_decodes_a_pod_once_and_keys_its_cache_on_the_decoded_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    imports: list[Any] = []
    monkeypatch.setattr(extender_module, "workloads_from_objects", counting(imports, extender_module.workloads_from_objects))
    extender = Extender(snapshot())
    body = json.dumps({"Pod": pending("p"), "NodeNames": NAMES}).encode()
    first = extender.filter(decode_filter_args(body, "f"))
    assert first["NodeNames"] == NAMES and len(imports) == 1
    assert extender.filter(decode_filter_args(body, "f")) == first  # the same bytes again
    other_encoding = json.dumps({"NodeNames": NAMES, "Pod": keys_reversed(pending("p"))}, indent=2).encode()
    assert extender.filter(decode_filter_args(other_encoding, "f")) == first
    scores = extender.prioritize(decode_filter_args(other_encoding, "p"))
    assert [s["Host"] for s in scores] == NAMES
    assert len(imports) == 1
    # the same pod with a priority of another JSON type is another object: decoded, and refused
    as_float = json.dumps({"Pod": pending("p", 5.0), "NodeNames": NAMES}).encode()
    refused = extender.filter(decode_filter_args(as_float, "f"))
    assert refused["NodeNames"] == [] and "spec.priority: expected an integer" in refused["Error"]
    assert len(imports) == 2


@pytest.mark.parametrize(
    "a, b, same",
    [
        ({"a": 1, "b": [1, {"c": True}]}, {"b": [1, {"c": True}], "a": 1}, True),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": [1]}, {"a": [True]}, False),
        ({"a": {"b": 0}}, {"a": {"b": False}}, False),
        ({"a": 1}, {"a": 2}, False),
        ([{"a": "x"}], [{"a": "x"}], True),
    ],
)
def test_same_json_value_tells_types_apart_and_not_key_order(a: Any, b: Any, same: bool) -> None:
    assert same_json_value(a, b) is same and same_json_value(b, a) is same
