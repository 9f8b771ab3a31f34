"""The field contracts (issue #31 §1): every field of a document has one role, and each field
of a pod survives every decode path, reaches the kernel's eligibility when its role is a
static one, and changes the outcome as its role says.

``docs/adding-a-field.md`` says what each test here tells a contributor who adds a field.
"""
from __future__ import annotations

import copy
import importlib
import pkgutil
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

import msgspec
import pytest

import placer
import placer.model
import placer.model.affinity
import placer.schema.documents
from placer.kernel.pack import pack_snapshot
from placer.model import PlacementResult, PodRequest, load_request, load_snapshot
from placer.model.roles import STATIC_ROLES, Role, counterparts, declare, declared, roles_of, unassigned
from placer.schema.documents import PodDoc
from placer.schema.request import plain_pods

# ----------------------------------------------------------------------------- every field has a role


def _structs() -> list[type]:
    """Every Struct with fields defined in placer.model (and its modules) or in
    placer.schema.documents."""
    modules = [placer.model, placer.schema.documents]
    modules += [importlib.import_module(f"placer.model.{m.name}") for m in pkgutil.iter_modules(placer.model.__path__)]
    found: dict[type, None] = {}
    for module in modules:
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == module.__name__
                    and msgspec.structs.fields(value)):
                found[value] = None
    return list(found)


STRUCTS = _structs()


def test_the_documents_are_all_found():
    names = {cls.__name__ for cls in STRUCTS}
    assert {"PodRequest", "Node", "RunningPod", "GangSpec", "NodeType", "Assignment", "Unschedulable",
            "GangResult", "PodDoc", "RequestDoc", "SnapshotDoc"} <= names


@pytest.mark.parametrize("cls", STRUCTS, ids=lambda cls: cls.__name__)
def test_every_field_has_a_role(cls):
    missing = unassigned(cls)
    assert not missing, (
        f"{', '.join(f'{cls.__name__}.{name}' for name in missing)} has no role: declare it in the "
        f"placer.model.roles.declare({cls.__name__}, ...) beside the class (docs/adding-a-field.md)"
    )


def test_a_field_without_a_role_is_named():
    class Probe(msgspec.Struct):
        size: int = 0
        colour: str = ""

    declare(Probe, size=Role.RESOURCE)
    assert unassigned(Probe) == ["colour"]
    assert roles_of(Probe) == {"size": Role.RESOURCE}


def test_a_role_for_a_field_that_does_not_exist_is_refused():
    class Probe(msgspec.Struct):
        size: int = 0

    with pytest.raises(TypeError, match="Probe has no field colour"):
        declare(Probe, size=Role.RESOURCE, colour=Role.FILTER)


def test_every_declared_struct_is_a_document():
    assert set(STRUCTS) <= set(declared())


def test_a_request_entry_carries_every_field_into_its_pod():
    """Every field of PodDoc but ``replicas`` has its PodRequest counterpart, with its role."""
    carried = counterparts(PodDoc)
    assert [name for name in roles_of(PodDoc) if name not in carried] == ["replicas"]
    assert sorted(carried.values()) == sorted(roles_of(PodRequest))
    for name, model in carried.items():
        assert roles_of(PodDoc)[name] is roles_of(PodRequest)[model]


# ----------------------------------------------------------------------------- each pod field, alone

A100 = {"gpus": 4, "gpuModel": "A100", "gpuMemoryMiB": 40960, "cpuMilli": 32000, "memoryMiB": 256000}
# first-fit in this node order: a pod of one GPU lands on n-a unless a field sends it elsewhere
SNAPSHOT: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodeTypes": {"a100": A100},
    "nodes": [
        {"name": "n-t", "type": "a100", "taints": [{"key": "dedicated", "value": "t", "effect": "NoSchedule"}]},
        {"name": "n-a", "type": "a100", "labels": {"zone": "a"}},
        {"name": "n-h", "gpus": 4, "gpuModel": "H100", "gpuMemoryMiB": 81920, "cpuMilli": 32000,
         "memoryMiB": 256000, "labels": {"zone": "h"},
         "nics": [{"name": "mlx5_0", "matrix": ["PIX", "PIX", "SYS", "SYS"]},
                  {"name": "mlx5_1", "matrix": ["SYS", "SYS", "PIX", "PIX"]}],
         "resources": {"example.com/fpga": {"capacity": 2, "allocatable": 2}}},
        {"name": "n-s", "gpus": 2, "gpuModel": "A100", "gpuMemoryMiB": 40960, "cpuMilli": 32000,
         "memoryMiB": 256000, "gpuSharing": {"strategy": "time-slicing", "replicas": 4}},
        {"name": "n-m", "gpus": 2, "gpuModel": "A100-SXM4-40GB", "gpuMemoryMiB": 40960, "cpuMilli": 32000,
         "memoryMiB": 256000, "mig": {"gpus": "all", "mode": "dynamic"}},
    ],
}
# one node, full: a running pod of low priority holds its GPUs
FULL: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodes": [{"name": "n-1", **A100, "pods": [{"name": "old", "gpus": [0, 1, 2, 3], "priority": -5}]}],
}
# as FULL, but the running pod is already being evicted for a pod nominated to its node
EVICTING: dict[str, Any] = copy.deepcopy(FULL)
EVICTING["nodes"][0]["pods"][0].update(terminating=True, disruptionTarget="PreemptionByScheduler")
EVICTING["nodes"].append({"name": "n-2", **A100, "pods": [{"name": "old-2", "gpus": [0, 1, 2, 3], "priority": -5}]})
# one node with room for one of two pods
ONE_ROOM: dict[str, Any] = {
    "apiVersion": "placer/v1",
    "kind": "ClusterSnapshot",
    "nodes": [{"name": "n-1", **A100}],
}


@dataclass
class Case:
    """A pod field set alone on ``base``: the JSON value, the model value it decodes to."""

    field: str
    value: Any
    model: Any
    base: dict[str, Any] = field(default_factory=lambda: {"gpus": 1})
    snapshot: dict[str, Any] = field(default_factory=lambda: SNAPSHOT)
    before: list[dict[str, Any]] = field(default_factory=list)  # pods placed before it
    request: dict[str, Any] = field(default_factory=dict)  # fields of the request besides pods
    gangs: dict[str, Any] = field(default_factory=dict)
    check: Callable[[Any, Any], None] | None = None  # (outcome with the field, outcome without)


def _node(outcome: Any) -> str | None:
    return outcome[0] if isinstance(outcome, tuple) else None


ZONE_H_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["h", "z"]}]}]}}}

CASES = [
    Case("name", "q", "q"),
    Case("gpus", 2, 2, check=lambda got, base: (len(got[1]), len(base[1])) == (2, 1) or pytest.fail(got)),
    Case("gpuMilli", 500, 500, check=lambda got, base: got[2] == 500 and base[2] is None or pytest.fail(got)),
    Case("gpuMemoryMiB", 61440, 61440, check=lambda got, base: _node(got) == "n-h" or pytest.fail(got)),
    Case("gpuModels", ["H100"], ("H100",), check=lambda got, base: _node(got) == "n-h" or pytest.fail(got)),
    Case("cpuMilli", 10**6, 10**6, check=lambda got, base: "Insufficient cpu" in got or pytest.fail(got)),
    Case("memoryMiB", 10**7, 10**7, check=lambda got, base: "Insufficient memory" in got or pytest.fail(got)),
    Case("nodeSelector", {"zone": "h"}, MappingProxyType({"zone": "h"}),
         check=lambda got, base: _node(got) == "n-h" or pytest.fail(got)),
    Case("tolerations", [{"key": "dedicated", "operator": "Exists"}],
         (placer.model.Toleration(key="dedicated", operator="Exists"),),
         check=lambda got, base: (_node(got), _node(base)) == ("n-t", "n-a") or pytest.fail(got)),
    Case("priority", 5, 5, snapshot=ONE_ROOM, base={"gpus": 4}, before=[{"name": "c", "gpus": 4}],
         check=lambda got, base: (_node(got), _node(base)) == ("n-1", None) or pytest.fail(got)),
    Case("gang", "g", "g", gangs={"g": {}}, check=lambda got, base: (got[6], base[6]) == ("g", None) or pytest.fail(got)),
    Case("nics", 1, 1, check=lambda got, base: _node(got) == "n-h" and len(got[4]) == 1 or pytest.fail(got)),
    Case("resources", {"example.com/fpga": 1}, MappingProxyType({"example.com/fpga": 1}),
         check=lambda got, base: _node(got) == "n-h" or pytest.fail(got)),
    Case("mig", {"profile": "1g.5gb"}, placer.model.MigRequest(profile="1g.5gb"), base={},
         check=lambda got, base: _node(got) == "n-m" and got[3] or pytest.fail(got)),
    Case("gpuSlots", 1, 1, base={},
         check=lambda got, base: _node(got) == "n-s" and got[5] or pytest.fail(got)),
    Case("preemptionPolicy", "Never", "Never", snapshot=FULL, request={"preemption": "greedy"},
         check=lambda got, base: (_node(got), _node(base)) == (None, "n-1") or pytest.fail(got)),
    Case("nominatedNodeName", "n-1", "n-1", base={"gpus": 1, "priority": 1}, snapshot=EVICTING,
         request={"preemption": "greedy"},
         check=lambda got, base: (_node(got), _node(base)) == (None, "n-1") or pytest.fail(got)),
    # kube's NodeName and NodeAffinity filters (issue #32)
    Case("nodeName", "n-h", "n-h", check=lambda got, base: (_node(got), _node(base)) == ("n-h", "n-a") or pytest.fail(got)),
    Case("affinity", ZONE_H_AFFINITY, placer.model.affinity.Affinity(node_affinity=placer.model.affinity.NodeAffinity(
        required_during_scheduling_ignored_during_execution=placer.model.affinity.NodeSelector((
            placer.model.affinity.NodeSelectorTerm(match_expressions=(
                placer.model.affinity.NodeSelectorRequirement("zone", "In", ("h", "z")),)),))),),
         check=lambda got, base: (_node(got), _node(base)) == ("n-h", "n-a") or pytest.fail(got)),
]
# the inter-pod rules (tests/test_kube_interpod.py has kube's rows): a pod placed before keeps
# pods of label app=x out of its zone, or counts in the zone spread of the pod
_REPELS_X = {"name": "c", "gpus": 1, "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}]}}}
_ZONE_SPREAD = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}}}
CASES += [
    Case("labels", {"app": "x"}, MappingProxyType({"app": "x"}), before=[_REPELS_X],
         check=lambda got, base: (_node(got), _node(base)) == ("n-h", "n-a") or pytest.fail(got)),
    Case("topologySpreadConstraints", [_ZONE_SPREAD],
         (placer.model.TopologySpreadConstraint(
             max_skew=1, topology_key="zone", when_unsatisfiable="DoNotSchedule",
             label_selector=placer.model.affinity.LabelSelector(match_labels={"app": "x"})),),
         base={"gpus": 1, "labels": {"app": "x"}}, before=[{"name": "c", "gpus": 1, "labels": {"app": "x"}}],
         check=lambda got, base: (_node(got), _node(base)) == ("n-h", "n-a") or pytest.fail(got)),
]
# kube's NodePorts (tests/test_kube_ports.py has kube's rows): a pod placed before holds the port
CASES += [
    Case("hostPorts", [{"hostPort": 80}], (placer.model.ports.HostPort(host_port=80),),
         before=[{"name": "c", "gpus": 1, "hostPorts": [{"hostPort": 80, "hostIP": "10.0.0.1"}]}],
         check=lambda got, base: (_node(got), _node(base)) == ("n-h", "n-a") or pytest.fail(got)),
]
CASE_FIELDS = {case.field for case in CASES}


def _json_names() -> dict[str, str]:
    """PodRequest field -> its JSON name (that of its PodDoc counterpart)."""
    encoded = {f.name: f.encode_name for f in msgspec.inspect.type_info(PodDoc).fields}
    return {model: encoded[doc] for doc, model in counterparts(PodDoc).items()}


def test_every_pod_field_has_a_case():
    """A field added to PodRequest needs its case here (docs/adding-a-field.md)."""
    names = _json_names()
    fields = {names.get(f.name, f.name) for f in msgspec.structs.fields(PodRequest)}
    assert sorted(fields - CASE_FIELDS) == [], "pod fields without a case in tests/test_fields.py CASES"
    assert sorted(CASE_FIELDS - fields) == []


def _pod(case: Case, with_field: bool) -> dict[str, Any]:
    pod = {"name": "p", **case.base}
    if with_field:
        pod[case.field] = case.value
    return pod


def _request(case: Case, pods: list[dict[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": "first-fit",
                           "pods": pods, **case.request}
    gangs = {name: spec for name, spec in case.gangs.items() if any(p.get("gang") == name for p in pods)}
    if gangs:
        doc["gangs"] = gangs
    return doc


def _decoded(case: Case, with_field: bool = True) -> dict[str, PodRequest]:
    """The pod as each decode path builds it: from a dict (the quick readers of entries as
    written, or msgspec then the quick reader of decoded entries), from another mapping
    (msgspec then the quick reader), and beside an entry with replicas (the general path)."""
    pod = _pod(case, with_field)
    by_path = {
        "dict": load_request(_request(case, [pod])).pods[0],
        "mapping": load_request(MappingProxyType(_request(case, [pod]))).pods[0],
        "general": load_request(_request(case, [pod, {"name": "z", "replicas": 1}])).pods[0],
    }
    entries = plain_pods([pod])
    if entries is not None:
        by_path["plain"] = entries[0]
    return by_path


def _outcome(result: PlacementResult, name: str) -> Any:
    for a in result.assignments:
        if a.pod == name:
            return (a.node, a.gpus, a.gpu_milli, a.mig, a.nics, dict(a.gpu_slots), a.gang, a.nominated)
    return next(u.reason for u in result.unschedulable if u.pod == name)


def _place(case: Case, pods: list[dict[str, Any]], name: str = "p") -> Any:
    return _outcome(placer.place(case.snapshot, _request(case, [*case.before, *pods])), name)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.field)
def test_a_field_survives_every_decode_path(case):
    decoded = _decoded(case)
    model_name = {json: model for model, json in _json_names().items()}[case.field]
    for path, pod in decoded.items():
        assert getattr(pod, model_name) == case.model, f"{case.field} on the {path} path"
    first = next(iter(decoded.values()))
    assert all(pod == first for pod in decoded.values()), {path: pod for path, pod in decoded.items()}
    assert load_request(_request(case, [first.to_dict()])).pods[0] == first  # to_dict writes it


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.field)
def test_a_field_reaches_the_eligibility_class_as_its_role_says(case):
    """A field of a static role splits the pod's eligibility class (its key holds the
    field); a field of any other role shares the class of the pod without it."""
    model_name = {json: model for model, json in _json_names().items()}[case.field]
    packed = pack_snapshot(load_snapshot(case.snapshot))
    with_field = _decoded(case)["dict"]
    without = _decoded(case, with_field=False)["dict"]
    if roles_of(PodRequest)[model_name] in STATIC_ROLES:
        assert packed.eligibility(with_field) is not packed.eligibility(without)
        assert (packed.eligibility(with_field).bits != packed.eligibility(without).bits).any()
    else:
        assert packed.eligibility(with_field) is packed.eligibility(without)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.field)
def test_a_field_changes_the_outcome_as_its_role_says(case):
    got = _place(case, [_pod(case, True)], "q" if case.field == "name" else "p")
    base = _place(case, [_pod(case, False)])
    if case.check is None:  # identity: the pod goes where it would under another name
        assert got == base
    else:
        assert got != base
        case.check(got, base)


@pytest.mark.parametrize("case", [c for c in CASES if c.field != "name"], ids=lambda case: case.field)
def test_a_field_keeps_its_effect_beside_plain_pods(case):
    """In one batch with plain pods of its kind, before and after it, the pod goes where it
    goes alone, and so do they: the field does not leak into their class nor theirs into its."""
    pod = _pod(case, True)
    kind = {"gpus": 1} if pod.get("gpus") else {"cpuMilli": 1}
    alone = _place(case, [pod])
    lead_alone = _place(case, [{"name": "lead", **kind}], "lead")
    assert _node(_place(case, [{"name": "lead", **kind}, pod])) == _node(alone)
    assert _node(_place(case, [pod, {"name": "trail", **kind}], "trail")) == _node(lead_alone)


@pytest.mark.parametrize("json_name", [f.encode_name for f in msgspec.structs.fields(PodDoc)])
def test_an_unknown_field_names_the_field_it_resembles(json_name):
    """The "did you mean" of an unknown field reads the Struct's fields: a new field is among them."""
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "p", json_name + "X": 1}]}
    with pytest.raises(placer.InvalidInputError, match=f'did you mean "{json_name}"'):
        load_request(doc)
