"""The compiled quick paths against plain Python reads of the same objects.

``placer.kernel._gather`` reads nodes and pods into the kernel's columns, and a run's
placements back into assignments; ``derive_free_state`` fills the state derived from
per-GPU free milli; ``placer.schema._quick`` builds a request's plain pods. Each is checked
here against a straightforward Python (or numpy) version written from its docstring, on
generated snapshots and requests, and on subclass instances, which take the generic
attribute reads instead of the slot loads.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer import schema
from placer.exceptions import InvalidInputError
from placer.kernel import pack
from placer.kernel._core import derive_free_state
from placer.kernel._gather import node_columns, pod_columns, run_assignments
from placer.limits import MILLI
from placer.model import Assignment, ClusterSnapshot, Node, NodeType, PodRequest, RunningPod, first_untolerated_taint, replace
from placer.model.interpod import HOSTNAME, topology_value
from placer.model.roles import eligibility_fields
from placer.testing import pod_requests, snapshots

import pytest


class TaggedNode(Node, frozen=True, gc=False):
    """A subclass: its fields are read by name, not by the slot offsets of Node."""


class TaggedPod(PodRequest, frozen=True, gc=False):
    """A subclass of PodRequest, for the same reason."""


def expected_node_columns(nodes: tuple[Node, ...]) -> dict[str, Any]:
    hardware: list[Any] = []
    first_node: list[int] = []
    hardware_of = []
    for i, node in enumerate(nodes):
        k = next((k for k, hw in enumerate(hardware) if hw is node.hardware), None)
        if k is None:
            k = len(hardware)
            hardware.append(node.hardware)
            first_node.append(i)
        hardware_of.append(k)
    running = [pod for node in nodes for pod in node.pods]
    return {
        "names": [node.name for node in nodes],
        "hardware": hardware,
        "hardware_of": hardware_of,
        "first_node": first_node,
        "no_hardware": -1,
        "unschedulable": [int(node.unschedulable) for node in nodes],
        "running": running,
        "holdings": {pod.name: (i, pod) for i, node in enumerate(nodes) for pod in node.pods},
        "running_node": [i for i, node in enumerate(nodes) for _ in node.pods],
        "cpu_milli": [sum(p.cpu_milli for p in node.pods) for node in nodes],
        "memory_mib": [sum(p.memory_mib for p in node.pods) for node in nodes],
        "pod_count": [len(node.pods) for node in nodes],
        "held": [len(p.gpus) for p in running],
        "gpus": [g for p in running for g in p.gpus],
        "special": [k for k, p in enumerate(running) if p.gpu_shares or p.gpu_memory_mib or p.gpu_slots],
        "pod_resources": [k for k, p in enumerate(running) if p.resources],
        "node_resources": [i for i, node in enumerate(nodes) if node.resources],
        "unhealthy": [i for i, node in enumerate(nodes) if node.unhealthy_gpus],
        "tainted": [i for i, node in enumerate(nodes) if node.taints],
    }


def as_lists(columns: dict[str, Any]) -> dict[str, Any]:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in columns.items()}


def tagged(snapshot: ClusterSnapshot) -> tuple[Node, ...]:
    return tuple(TaggedNode(**{f: getattr(n, f) for f in n.__struct_fields__}) for n in snapshot.nodes)


@given(snapshots(max_nodes=12))
def test_node_columns_read_what_python_reads(snapshot: ClusterSnapshot) -> None:
    expected = expected_node_columns(snapshot.nodes)
    got = as_lists(node_columns(snapshot.nodes))
    assert all(hw is want for hw, want in zip(got.pop("hardware"), expected.pop("hardware"), strict=True))
    assert all(p is q for p, q in zip(got.pop("running"), expected.pop("running"), strict=True))
    holdings = got.pop("holdings")
    assert holdings.keys() == expected["holdings"].keys()
    assert all(holdings[k][0] == i and holdings[k][1] is pod for k, (i, pod) in expected.pop("holdings").items())
    assert got == expected
    subclassed = as_lists(node_columns(tagged(snapshot)))
    subclassed.pop("hardware"), subclassed.pop("running"), subclassed.pop("holdings")
    assert subclassed == got


def test_a_node_without_hardware_is_named() -> None:
    hw = NodeType(gpus=2)
    nodes = (Node("a", hw), Node("b"), Node("c"))
    assert node_columns(nodes)["no_hardware"] == 1
    with pytest.raises(InvalidInputError, match=r"nodes\[1\]\.hardware"):
        pack.pack_snapshot(ClusterSnapshot(nodes=nodes))


@given(st.lists(pod_requests(kinds=("cpu", "whole", "shared")), max_size=12))
def test_pod_columns_read_what_python_reads(pods: list[PodRequest]) -> None:
    pods = [replace(p, name=f"p{i}") for i, p in enumerate(pods)]
    pods.append(PodRequest("slots", gpu_slots=2))
    counts, quantities, plain, with_resources = pod_columns(pods)
    assert counts.tolist() == [[p.gpus for p in pods], [p.gpu_milli for p in pods], [p.gpu_memory_mib for p in pods],
                               [p.nics for p in pods]]
    assert quantities.tolist() == [[p.cpu_milli for p in pods], [p.memory_mib for p in pods]]
    assert plain.tolist() == [int(not any(getattr(p, f) for f in eligibility_fields(PodRequest))) for p in pods]
    assert with_resources == [i for i, p in enumerate(pods) if p.resources]
    again = pod_columns([TaggedPod(**{f: getattr(p, f) for f in p.__struct_fields__}) for p in pods])
    assert [a.tolist() if isinstance(a, np.ndarray) else a for a in again] == [
        counts.tolist(), quantities.tolist(), plain.tolist(), with_resources]


def test_a_count_beyond_its_column_is_an_overflow_not_a_wrap() -> None:
    with pytest.raises(OverflowError):
        pod_columns([PodRequest("p", gpu_memory_mib=2**31)])


@given(snapshots(max_nodes=10), st.data())
def test_each_pod_of_a_batch_gets_its_own_eligibility_class(snapshot: ClusterSnapshot, data: st.DataObject) -> None:
    packed = pack.pack_snapshot(snapshot)
    pods = data.draw(st.lists(pod_requests(), max_size=10))
    pods = [replace(p, name=f"p{i}") for i, p in enumerate(pods)]
    pods.insert(data.draw(st.integers(0, len(pods))), PodRequest("slots", gpu_slots=1))  # filtered apart
    batch, classes, _ = pack.pack_pods(packed, pods)
    assert [classes[row] for row in batch.klass.tolist()] == [packed.eligibility(p) for p in pods]
    assert len({id(c) for c in classes}) == len(classes)  # each class once, in order of first use
    firsts = [next(j for j, row in enumerate(batch.klass.tolist()) if row == k) for k in range(len(classes))]
    assert firsts == sorted(firsts)


def expected_derived(a: dict[str, np.ndarray], untracked: int) -> dict[str, list[Any]]:
    milli = a["gpu_free_milli"].astype(np.int64)
    whole = milli == 1000
    count = whole.sum(axis=1)
    bucket_of = a["bucket_base"][a["model_id"]] + count
    bits = np.zeros_like(a["bucket_bits"])
    floor = np.full_like(a["bucket_cpu_floor"], untracked)
    for n, b in enumerate(bucket_of.tolist()):
        bits[b, n // 64] |= np.uint64(1 << (n % 64))
        floor[b] = min(floor[b], a["cpu_free"][n] if a["cpu_tracked"][n] else 0)
    masks = [sum(1 << g for g in np.flatnonzero(row).tolist()) for row in whole]
    room = np.zeros_like(a["room_bits"])
    for n in np.flatnonzero(milli.sum(axis=1) > 0).tolist():
        room[n // 64] |= np.uint64(1 << (n % 64))
    return {"free_mask": masks, "free_count": count.tolist(), "free_milli_sum": milli.sum(axis=1).tolist(),
            "bucket_of": bucket_of.tolist(), "bucket_bits": bits.tolist(), "bucket_cpu_floor": floor.tolist(),
            "room_bits": room.tolist()}


@settings(max_examples=15, deadline=None)  # snapshots past one 64-node word are slow to draw
@given(snapshots(max_nodes=70, max_gpus=8, min_nodes=65))
def test_the_derived_free_state_is_what_its_definition_says(snapshot: ClusterSnapshot) -> None:
    arrays = pack.pack_snapshot(snapshot).arrays
    for key in ("free_mask", "free_count", "free_milli_sum", "bucket_of", "bucket_bits", "bucket_cpu_floor",
                "room_bits"):
        arrays[key][...] = 7  # stale values: every one must be written again
    derive_free_state(arrays, int(pack.UNTRACKED_BIG))
    want = expected_derived(arrays, int(pack.UNTRACKED_BIG))
    assert {k: arrays[k].tolist() for k in want} == want


def test_run_assignments_are_the_assignments_of_the_placed_pods() -> None:
    pods = [PodRequest("a", gpus=2), PodRequest("b", gpus=1, gpu_milli=300, gang="g"), PodRequest("c"),
            TaggedPod("d", gpus=1, gpu_milli=1000)]
    placed, made, failed = run_assignments(pods, [1, 0, -1, 1], [0b1100, 0b1, 0, 0b10], ["n0", "n1"])
    assert failed == [2]
    assert placed == [(pods[0], 1, 0b1100), (pods[1], 0, 0b1), (pods[3], 1, 0b10)]
    assert made == [Assignment("a", "n1", (2, 3)), Assignment("b", "n0", (0,), 300, "g"), Assignment("d", "n1", (1,))]
    assert run_assignments(pods[:1], [0], [1 << 63], ["n0"])[1] == [Assignment("a", "n0", (63,))]


# ----------------------------------------------------------------------------- a request's plain pods

_PLAIN_ENTRIES = st.lists(
    st.fixed_dictionaries(
        {"gpus": st.sampled_from([0, 1, 2, 8])},
        optional={
            "gpuMilli": st.integers(1, MILLI), "cpuMilli": st.integers(0, 10**6), "memoryMiB": st.integers(0, 10**6),
            "gpuMemoryMiB": st.integers(0, 80000), "priority": st.integers(-5, 5),
            "gpuModels": st.lists(st.sampled_from(["A100", "H100"]), max_size=2, unique=True),
            "nodeSelector": st.dictionaries(st.sampled_from(["pool", "zone"]), st.sampled_from(["a", "b"]), max_size=1),
            "resources": st.dictionaries(st.just("example.com/x"), st.integers(1, 3), max_size=1),
        },
    ),
    max_size=8,
)


@given(_PLAIN_ENTRIES)
def test_plain_entries_become_the_pods_they_describe(entries: list[dict[str, Any]]) -> None:
    entries = [{**e, "name": f"ns/p-{i}é"} for i, e in enumerate(entries)]
    for e in entries:
        if e.get("gpuMilli", MILLI) < MILLI:
            e["gpus"] = 1
    request = schema.request_from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": entries})
    assert list(request.pods) == [
        PodRequest(e["name"], e["gpus"], e.get("gpuMilli", MILLI), e.get("gpuMemoryMiB", 0), tuple(e.get("gpuModels", ())),
                   e.get("cpuMilli", 0), e.get("memoryMiB", 0), e.get("nodeSelector", {}), (), e.get("priority", 0),
                   resources=e.get("resources", {}))
        for e in entries
    ]


@pytest.mark.parametrize("name", ["p\u0007", "pöd\u0001", "p\u007f", "пoд\u001b"])
def test_a_control_character_in_a_plain_pod_name_is_refused_where_written(name: str) -> None:
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "ok"}, {"name": name, "gpus": 1}]}
    with pytest.raises(InvalidInputError) as info:
        schema.request_from_dict(doc)
    assert info.value.where == "pods[1].name" and "control characters" in info.value.what


@pytest.mark.parametrize("name", ["nœud\u0007", "n\u007f", "ノード\u0000"])
def test_a_control_character_in_a_node_name_is_refused_where_written(name: str) -> None:
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodeTypes": {"t": {"gpus": 2}},
           "nodes": [{"name": "ok", "type": "t"}, {"name": name, "type": "t"}]}
    with pytest.raises(InvalidInputError) as info:
        schema.snapshot_from_dict(doc)
    assert info.value.where == "nodes[1].name" and "control characters" in info.value.what


def test_names_in_other_scripts_are_names() -> None:
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodeTypes": {"t": {"gpus": 2}},
           "nodes": [{"name": "nœud", "type": "t", "pods": [{"name": "ポッド", "gpus": [1]}]}]}
    snapshot = schema.snapshot_from_dict(doc)
    assert snapshot.nodes[0].hardware.gpus == 2 and snapshot.nodes[0].pods[0].name == "ポッド"
    assert isinstance(snapshot.nodes[0].pods[0], RunningPod)


# ----------------------------------------------------------------------------- a request's pods as written

_NEAR_PLAIN_VALUE = st.one_of(
    st.integers(-3, 1003), st.sampled_from([True, False, None, 2**63, -(2**63) - 1, 2**53, 2**31, "1", 1.0]),
)
_NEAR_PLAIN_ENTRIES = st.lists(
    st.one_of(
        st.dictionaries(
            st.sampled_from(["name", "gpus", "gpuMilli", "gpuMemoryMiB", "cpuMilli", "memoryMiB", "priority", "gpu",
                             "replicas", "gang"]),
            st.one_of(_NEAR_PLAIN_VALUE, st.sampled_from(["p", "q", "", "p\u0007", "ポッド"])),
            max_size=5,
        ),
        st.sampled_from([None, [], "p"]),
    ),
    max_size=5,
)


def _outcome(build: Any, *args: Any) -> Any:
    """What ``build(*args)`` returns, or the (where, what) of the InvalidInputError it raises."""
    try:
        return build(*args)
    except InvalidInputError as e:
        return (e.where, e.what)


def _decoded(doc: dict[str, Any]) -> Any:
    """The request as the whole decoder builds it (no quick path), or its error."""
    from placer.schema.documents import LABELS, RequestDoc
    from placer.schema.files import decode_object
    from placer.schema.request import request_from_doc

    return _outcome(lambda: request_from_doc(decode_object(doc, RequestDoc, LABELS)))


@settings(max_examples=300)
@given(_NEAR_PLAIN_ENTRIES)
def test_pods_read_as_written_are_the_pods_the_decoder_builds(entries: list[Any]) -> None:
    from placer.schema.request import plain_pods

    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": entries}
    want = _decoded(doc)
    quick = plain_pods(entries)
    if quick is not None:  # taken only where the decoder takes the same pods
        assert not isinstance(want, tuple) and quick == list(want.pods)
    assert _outcome(schema.request_from_dict, doc) == want


def test_pods_read_as_written_take_only_plain_entries() -> None:
    from placer.schema.request import plain_pods

    plain = [{"name": "a", "gpus": 2, "cpuMilli": 1000}, {"name": "b", "gpus": 1, "gpuMilli": 250, "priority": -3}]
    assert plain_pods(plain) == [PodRequest("a", gpus=2, cpu_milli=1000),
                                 PodRequest("b", gpus=1, gpu_milli=250, priority=-3)]
    for odd in ({"name": "c", "gpus": True}, {"name": "c", "gpus": None}, {"name": "c", "gpus": 65},
                {"name": "c", "cpuMilli": 2**63}, {"name": "c", "replicas": 2}, {"name": "c", "gpu": 1},
                {"name": ""}, {"name": 3}, {"gpus": 1}, {"name": "a"}, {"name": "c", "gpuMilli": 500, "gpus": 2},
                {"name": "c\u0000"}, {1: "c"}):
        assert plain_pods([*plain, odd]) is None, odd
    assert plain_pods((*plain,)) is None  # a list as written, nothing else
    assert plain_pods([]) == []


def test_pods_read_as_written_stop_at_the_request_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from placer.schema import request

    monkeypatch.setattr(request, "MAX_REQUEST_PODS", 2)
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": f"p{i}"} for i in range(3)]}
    assert request.plain_pods(doc["pods"]) is None
    with pytest.raises(InvalidInputError) as info:
        schema.request_from_dict(doc)
    assert info.value.where == "pods" and "over the limit of 2" in info.value.what


def test_a_fault_beside_plain_pods_is_reported_where_written() -> None:
    doc = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "a"}], "seed": -1}
    with pytest.raises(InvalidInputError) as info:
        schema.request_from_dict(doc)
    assert info.value.where == "seed"
    with pytest.raises(InvalidInputError) as info:
        schema.request_from_dict({**doc, "seed": 0, "gangs": {"g": {}}})
    assert info.value.where == "gangs.g" and "no pods" in info.value.what


@given(st.lists(pod_requests(), max_size=6), st.data())
def test_the_request_scans_read_what_python_reads(pods: list[PodRequest], data: st.DataObject) -> None:
    pods = [TaggedPod(**{f: getattr(p, f) for f in p.__struct_fields__}) if data.draw(st.booleans()) else p
            for p in pods]
    assert pack.any_prioritized(pods) == any(p.priority for p in pods)
    assert pack.any_placed_apart(pods) == any(p.resources or p.mig is not None or p.gpu_slots for p in pods)
    held = {p.name: None for p in pods if data.draw(st.booleans())}
    assert pack.first_held(held, pods) == next((i for i, p in enumerate(pods) if p.name in held), -1)


@settings(max_examples=25, deadline=None)
@given(snapshots(max_nodes=6, max_gpus=8), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7), st.integers(1, 1000),
                                                               st.booleans()), max_size=12))
def test_binds_and_releases_keep_the_room_bitset(snapshot: ClusterSnapshot, changes: list[Any]) -> None:
    from placer.kernel._core import Kernel

    packed = pack.pack_snapshot(snapshot)
    arrays = packed.arrays
    kernel = Kernel(arrays, len(packed.model_names))
    done = []
    for node, gpu, milli, release in changes:
        if node >= packed.n_nodes or gpu >= int(arrays["gpu_count"][node]):
            continue
        free = int(arrays["gpu_free_milli"][node, gpu])
        if release and done:
            node, gpu, milli = done.pop()
            kernel.bind(node, milli, 0, 0, 0, 1 << gpu, -1, 0, True)
        elif 0 < milli <= free:
            kernel.bind(node, milli, 0, 0, 0, 1 << gpu, 1, 0, True)
            done.append((node, gpu, milli))
        want = expected_derived(arrays, int(pack.UNTRACKED_BIG))
        assert arrays["room_bits"].tolist() == want["room_bits"]
        assert arrays["bucket_bits"].tolist() == want["bucket_bits"]


# ----------------------------------------------------------------------------- a snapshot's nodes as written

_POD_ENTRY = st.one_of(
    st.dictionaries(
        st.sampled_from(["name", "gpus", "cpuMilli", "memoryMiB", "gpuShares", "gpu"]),
        st.one_of(_NEAR_PLAIN_VALUE, st.sampled_from(["r", "", "r\u0007"]),
                  st.lists(st.one_of(st.integers(-1, 9), st.sampled_from([True, None, 2**31])), max_size=3)),
        max_size=4,
    ),
    st.sampled_from([None, "p"]),
)
_NEAR_PLAIN_NODES = st.lists(
    st.one_of(
        st.dictionaries(
            st.sampled_from(["name", "type", "pods", "labels", "gpus"]),
            st.one_of(st.sampled_from(["n", "m", "", "t", "u", None, 1, True]), st.lists(_POD_ENTRY, max_size=3)),
            max_size=4,
        ),
        st.sampled_from([None, [], "n"]),
    ),
    max_size=4,
)


def _snapshot_decoded(doc: dict[str, Any]) -> Any:
    """The snapshot as the whole decoder builds it (no quick path), or its error."""
    from placer.schema.documents import LABELS, SnapshotDoc
    from placer.schema.files import decode_object
    from placer.schema.snapshot import snapshot_from_doc

    return _outcome(lambda: snapshot_from_doc(decode_object(doc, SnapshotDoc, LABELS)))


@settings(max_examples=300)
@given(_NEAR_PLAIN_NODES)
def test_nodes_read_as_written_are_the_nodes_the_decoder_builds(entries: list[Any]) -> None:
    import msgspec

    from placer.schema.documents import SnapshotDoc
    from placer.schema.snapshot import plain_nodes

    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodeTypes": {"t": {"gpus": 4, "cpuMilli": 8000}},
           "nodes": entries}
    quick = plain_nodes(entries)
    if quick is not None:  # taken only where msgspec takes the same nodes
        decoded = msgspec.convert(doc, SnapshotDoc, str_keys=True).nodes
        assert quick == decoded
        assert [type(n) for n in quick] == [Node] * len(quick)
        assert [type(p) for n in quick for p in n.pods] == [RunningPod] * sum(len(n.pods) for n in quick)
    assert _outcome(schema.snapshot_from_dict, doc) == _snapshot_decoded(doc)


def test_nodes_read_as_written_take_only_plain_entries() -> None:
    from placer.schema.snapshot import plain_nodes

    plain = [{"name": "a", "type": "t", "pods": [{"name": "p", "gpus": [0, 1], "cpuMilli": 10, "memoryMiB": 5}]},
             {"name": "b"}]
    got = plain_nodes(plain)
    assert got == [Node("a", type="t", pods=(RunningPod("p", gpus=(0, 1), cpu_milli=10, memory_mib=5),)), Node("b")]
    assert got[0].labels is Node("x").labels and got[1].pods == ()  # defaults as the class has them
    for odd in ({"name": "c", "labels": {}}, {"name": "c", "type": None}, {"name": ""}, {"type": "t"},
                {"name": "c", "pods": [{"name": "q", "gpus": [True]}]}, {"name": "c", "pods": [{"gpus": []}]},
                {"name": "c", "pods": [{"name": "q", "cpuMilli": 2**53}]}, {"name": "c", "pods": ({"name": "q"},)},
                {"name": "c", "pods": [{"name": "q", "gpus": (0,)}]}, {"name": "c", "pods": [{"name": "q", "priority": 1}]}):
        assert plain_nodes([*plain, odd]) is None, odd
    assert plain_nodes([]) == []


# ---------------------------------------------------------------------------------------
# The node columns the filters and the inter-pod rules share (PackedCluster.topology_column,
# tolerating_nodes) and the runs of alike pods, against per-node reads.

def _same_partition(codes: list[int], values: list[Any]) -> bool:
    """Whether ``codes`` number ``values`` (-1 exactly for None, equal codes for equal values)."""
    return all((c < 0) == (v is None) for c, v in zip(codes, values)) and all(
        (codes[i] == codes[j]) == (values[i] == values[j])
        for i in range(len(codes)) for j in range(len(codes)) if values[i] is not None and values[j] is not None
    )


@given(snapshots(max_nodes=10, label_keys=("zone", HOSTNAME)), st.sampled_from(["zone", HOSTNAME, "rack"]))
def test_a_topology_column_numbers_each_nodes_domain(snapshot: ClusterSnapshot, key: str) -> None:
    packed = pack.pack_snapshot(snapshot)
    codes, count = packed.topology_column(key)
    values = [topology_value(n, key) for n in snapshot.nodes]
    assert _same_partition(codes.tolist(), values)
    assert count == len({v for v in values if v is not None})
    assert sorted(set(codes.tolist()) - {-1}) == list(range(count))


def test_hostname_domains_are_the_nodes_whether_labelled_or_not() -> None:
    def packed(*nodes: tuple[str, dict[str, str]]) -> pack.PackedCluster:
        return pack.pack_snapshot(ClusterSnapshot(nodes=tuple(Node(name, NodeType(gpus=1), labels=labels)
                                                              for name, labels in nodes)))

    labelled = packed(*((f"n{i}", {HOSTNAME: f"n{i}"}) for i in range(4)))
    assert labelled.topology_column(HOSTNAME)[0].tolist() == [0, 1, 2, 3]
    # n2 has no label (its domain is its name, which n1's label also names); n3 labels n0's
    codes, count = packed(("n0", {HOSTNAME: "h0"}), ("n1", {HOSTNAME: "n2"}), ("n2", {}),
                          ("n3", {HOSTNAME: "h0"})).topology_column(HOSTNAME)
    assert count == 2 and codes[0] == codes[3] and codes[1] == codes[2] and codes[0] != codes[1]


@given(snapshots(max_nodes=10), st.data())
def test_tolerating_nodes_are_the_nodes_without_an_untolerated_taint(snapshot: ClusterSnapshot, data: st.DataObject) -> None:
    pod = data.draw(pod_requests())
    got = pack.pack_snapshot(snapshot).tolerating_nodes(pod.tolerations).tolist()
    assert got == [first_untolerated_taint(n.taints, pod.tolerations) is None for n in snapshot.nodes]


@given(st.lists(st.sampled_from(["a", "b", ("a",), None]), max_size=12))
def test_alike_runs_start_where_a_key_differs_from_the_one_before(keys: list[Any]) -> None:
    runs = pack.alike_runs(keys)
    assert runs == [0] + [j for j in range(1, len(keys)) if keys[j] != keys[j - 1]] + [len(keys)] if keys else [0]


def test_replicas_of_one_entry_share_their_eligibility_class() -> None:
    snapshot = ClusterSnapshot(nodes=tuple(Node(f"n{i}", NodeType(gpus=1), labels={"pool": "ab"[i % 2]})
                                           for i in range(4)))
    packed = pack.pack_snapshot(snapshot)
    a, b = PodRequest("a", node_selector={"pool": "a"}), PodRequest("b", node_selector={"pool": "b"})
    pods = [replace(a, name=f"a{i}") for i in range(3)] + [replace(b, name="b0"), replace(a, name="a3")]
    batch, classes, _ = pack.pack_pods(packed, pods)
    assert batch.klass.tolist() == [0, 0, 0, 1, 0]
    assert [classes[row] for row in batch.klass.tolist()] == [packed.eligibility(p) for p in pods]
