"""kube-scheduler's inter-pod filters as placer applies them (issue #32): InterPodAffinity
(required affinity, anti-affinity, existing pods' anti-affinity) and PodTopologySpread
(``DoNotSchedule``), in the kernel, the reference oracle and ``check_placement``.

The rows are those of kube's ``interpodaffinity/filtering_test.go`` and
``podtopologyspread/filtering_test.go`` (v1.36.3) in placer's format: a pod named
``namespace/name`` (``default`` without one), running pods with labels and affinity, nodes
with labels, and per node the status kube's Filter gives (None: passes, else its reason).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placer
from placer import policies
from placer.diagnostics.check import check_placement
from placer.exceptions import InvalidInputError
from placer.kernel import KernelSession
from placer.model import ClusterSnapshot, PlacementRequest, PodRequest
from placer.model import reasons as wording
from reference import ReferenceCluster

AFF = wording.POD_AFFINITY
ANTI = wording.POD_ANTI_AFFINITY
EXIST = wording.EXISTING_ANTI_AFFINITY
SPREAD = wording.SPREAD
LABEL = wording.SPREAD_MISSING_LABEL
SELECTOR = wording.SELECTOR
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def term(key: str, op: str, values: list[str] | None, topology: str, **more: Any) -> dict[str, Any]:
    """One pod (anti-)affinity term: a selector of one expression and a topology key."""
    expr: dict[str, Any] = {"key": key, "operator": op}
    if values is not None:
        expr["values"] = values
    return {"labelSelector": {"matchExpressions": [expr]}, "topologyKey": topology, **more}


def affinity(aff: list[dict] = (), anti: list[dict] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    out: dict[str, Any] = {}
    if aff:
        out["podAffinity"] = {REQ: list(aff)}
    if anti:
        out["podAntiAffinity"] = {REQ: list(anti)}
    return out


def spread(skew: int, key: str, selector: dict | None, **more: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **more}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def snapshot(nodes: list[dict[str, str]], running: list[tuple[int, dict]] = ()) -> ClusterSnapshot:  # type: ignore[assignment]
    docs = [{"name": f"node{i}", "cpuMilli": 64000, "memoryMiB": 65536, "labels": labels, "pods": []}
            for i, labels in enumerate(nodes)]
    for i, pod in running:
        docs[i]["pods"].append(pod)
    return ClusterSnapshot.from_dict({"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": docs})


def pod_request(pod: dict[str, Any]) -> PlacementRequest:
    return PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [pod]})


def statuses(nodes: list[dict[str, str]], running: list[tuple[int, dict]], pod: dict[str, Any]) -> list[str | None]:
    """Per node, kube's Filter status of ``pod``: placed on that node alone, or its reason."""
    snap = snapshot(nodes, running)
    request = pod_request(pod)
    out: list[str | None] = []
    for i in range(len(nodes)):
        session = KernelSession(snap)
        only = np.zeros(len(nodes), dtype=bool)
        only[i] = True
        run = session.place(list(request.pods), policies.get("first-fit"), np.zeros(1, dtype=np.uint64),
                            only=session.nodes_bitset(only))
        if run.nodes[0] >= 0:
            out.append(None)
        else:
            (reason,) = run.reasons(0)
            out.append(reason)
    return out


RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}

# (row, nodes, running pods as (node, pod), the incoming pod, status per node)
INTERPOD_ROWS = [
    pytest.param(
        [RG_CHINA, RG_CHINA_AZ1, RG_INDIA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "In", ["securityscan", "value2"], "region")])},
        [None, None, AFF], id="affinity In matches the existing pod's region"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "NotIn", ["securityscan3", "value3"], "region")])},
        [None], id="affinity NotIn matches the existing pod"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "In", ["securityscan"], "region", namespaces=["DiffNameSpace"])])},
        [AFF], id="affinity in another namespace"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "In", ["antivirusscan", "value2"], "region")])},
        [AFF], id="affinity selector matches no existing pod"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([{"labelSelector": {"matchExpressions": [
            {"key": "service", "operator": "Exists"}, {"key": "wrongkey", "operator": "DoesNotExist"}]},
            "topologyKey": "region"}, term("service", "In", ["securityscan"], "region")])},
        [None], id="affinity of several terms and operators, all matched"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([{"labelSelector": {"matchExpressions": [
            {"key": "service", "operator": "Exists"}, {"key": "wrongkey", "operator": "In", "values": ["x"]}]},
            "topologyKey": "region"}])},
        [AFF], id="the expressions of a selector are ANDed"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "In", ["securityscan"], "region")],
                                           [term("service", "In", ["antivirusscan"], "node")])},
        [None], id="affinity and anti-affinity both satisfied"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "In", ["securityscan"], "region")],
                                           [term("service", "In", ["securityscan"], "region")])},
        [ANTI], id="affinity satisfied, anti-affinity not"),
    pytest.param(
        [RG_CHINA], [(0, {"name": "p1", "labels": {"service": "securityscan"},
                          "affinity": affinity(anti=[term("security", "In", ["S1"], "region")])})],
        {"name": "p", "labels": {"security": "S1"},
         "affinity": affinity([term("service", "In", ["securityscan"], "region")])},
        [EXIST], id="the existing pod's anti-affinity repels the incoming pod (symmetry)"),
    pytest.param(
        [RG_CHINA, RG_CHINA_AZ1], [(0, {"name": "p1", "labels": {"foo": "bar"}})],
        {"name": "p", "labels": {"foo": "bar", "service": "securityscan"},
         "affinity": affinity([term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")])},
        [AFF, AFF], id="the first pod of a series still needs the topology keys"),
    pytest.param(
        [{"zone": "az1"}, {"zone": "az2"}], [(0, {"name": "p1", "labels": {"foo": "bar"}})],
        {"name": "p", "labels": {"foo": "bar", "service": "securityscan"},
         "affinity": affinity([term("foo", "In", ["bar"], "zone"), term("service", "In", ["securityscan"], "zone")])},
        [None, None], id="the first pod of a series that matches its own terms goes anywhere"),
    pytest.param(
        [{"region": "r1", "hostname": "nodeA"}, {"region": "r1", "hostname": "nodeB"}],
        [(0, {"name": "p1", "labels": {"foo": "abc"}})],
        {"name": "p", "affinity": affinity(anti=[term("foo", "In", ["abc"], "region")])},
        [ANTI, ANTI], id="anti-affinity covers the whole region"),
    pytest.param(
        [RG_CHINA, RG_CHINA_AZ1, RG_INDIA],
        [(0, {"name": "NS1/a", "labels": {"foo": "bar"}}),
         (2, {"name": "NS2/c", "affinity": affinity(anti=[term("foo", "In", ["123"], "region")])})],
        {"name": "NS1/p", "labels": {"foo": "123"}, "affinity": affinity(anti=[term("foo", "In", ["bar"], "region")])},
        [ANTI, ANTI, None], id="an existing pod's anti-affinity in its own namespace only"),
    pytest.param(
        [{"region": "r1", "zone": "z1", "hostname": "nodeA"}, {"region": "r1", "zone": "z1", "hostname": "nodeB"}],
        [(0, {"name": "p1", "affinity": affinity(anti=[
            {"labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
             "topologyKey": "invalid-node-label"}])})],
        {"name": "p", "labels": {"foo": ""}},
        [None, None], id="an existing pod's term of a key no node has repels nothing"),
    pytest.param(
        [{"region": "r1", "zone": "z1", "hostname": "nodeA"}, {"region": "r1", "zone": "z2", "hostname": "nodeB"}],
        [(0, {"name": "pod1", "labels": {"foo": ""}}), (1, {"name": "pod2", "labels": {"bar": ""}})],
        {"name": "p", "affinity": affinity([term("foo", "Exists", None, "region"), term("bar", "Exists", None, "zone")])},
        [AFF, AFF], id="all affinity terms must match the same pod"),
    pytest.param(
        [{"region": "r1", "zone": "z1", "hostname": "nodeA"}, {"region": "r1", "zone": "z1", "hostname": "nodeB"}],
        [(0, {"name": "pod1", "labels": {"foo": "", "bar": ""}})],
        {"name": "p", "affinity": affinity([term("foo", "Exists", None, "region"), term("bar", "Exists", None, "zone")])},
        [None, None], id="one pod matching all terms satisfies them"),
    pytest.param(
        [RG_CHINA, RG_INDIA], [(0, {"name": "team/p1", "labels": {"service": "securityscan"}})],
        {"name": "p", "affinity": affinity([term("service", "In", ["securityscan"], "region", namespaceSelector={})])},
        [None, AFF], id="an empty namespaceSelector means every namespace"),
    pytest.param(
        [RG_CHINA, RG_INDIA], [(0, {"name": "p1", "labels": {"app": "web", "version": "v1"}})],
        {"name": "p", "labels": {"app": "web", "version": "v2"},
         "affinity": affinity(anti=[term("app", "In", ["web"], "region", matchLabelKeys=["version"])])},
        [None, None], id="matchLabelKeys narrows anti-affinity to the pod's own version"),
    pytest.param(
        [RG_CHINA, RG_INDIA], [(0, {"name": "p1", "labels": {"app": "web", "version": "v1"}})],
        {"name": "p", "labels": {"app": "web", "version": "v2"},
         "affinity": affinity(anti=[term("app", "In", ["web"], "region", mismatchLabelKeys=["version"])])},
        [ANTI, None], id="mismatchLabelKeys keeps away from other versions"),
    pytest.param(
        [RG_CHINA, RG_INDIA], [(0, {"name": "p1", "labels": {"app": "web"}, "terminating": True})],
        {"name": "p", "affinity": affinity(anti=[term("app", "In", ["web"], "region")])},
        [ANTI, None], id="a terminating pod still counts for anti-affinity"),
]


@pytest.mark.parametrize("nodes, running, pod, want", INTERPOD_ROWS)
def test_interpod_rows(nodes, running, pod, want) -> None:
    assert statuses(nodes, running, pod) == want


ZONES4 = [{"zone": "zone1", "node": "node-a"}, {"zone": "zone1", "node": "node-b"},
          {"zone": "zone2", "node": "node-x"}, {"zone": "zone2", "node": "node-y"}]
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}


def foo_pods(*where: tuple[int, str]) -> list[tuple[int, dict]]:
    return [(i, {"name": name, "labels": {"foo": ""}}) for i, name in where]


SPREAD_ROWS = [
    pytest.param(ZONES4, [], {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", FOO)]},
                 [None] * 4, id="no existing pods"),
    pytest.param(ZONES4, [], {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", BAR)]},
                 [None] * 4, id="the incoming pod doesn't match itself"),
    pytest.param(ZONES4, [(0, {"name": "ns1/p-a1", "labels": {"foo": ""}}), (0, {"name": "ns2/p-b1", "labels": {"foo": ""}})]
                 + foo_pods((2, "p-x1"), (3, "p-y1")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", FOO)]},
                 [None, None, SPREAD, SPREAD], id="pods of another namespace do not count"),
    pytest.param(ZONES4, foo_pods((2, "p-x1"), (3, "p-y1")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", None)]},
                 [None] * 4, id="no selector counts no pod"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (0, "a2"), (1, "b1"), (3, "y1"), (3, "y2"), (3, "y3")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", FOO)]},
                 [None] * 4, id="3/3 across zones"),
    pytest.param([ZONES4[0], {"zon": "zone1", "node": "node-b"}, ZONES4[2], ZONES4[3]],
                 foo_pods((0, "a1"), (1, "b1"), (2, "x1"), (3, "y1")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", FOO)]},
                 [None, LABEL, SPREAD, SPREAD], id="1/2 for a node without the zone label"),
    pytest.param([ZONES4[0], ZONES4[2]], [],
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "rack", FOO)]},
                 [LABEL, LABEL], id="no node has the key"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (0, "a2"), (1, "b1"), (3, "y1"), (3, "y2"), (3, "y3")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "node", FOO)]},
                 [SPREAD, SPREAD, None, SPREAD], id="2/1/0/3 across nodes, only node-x"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (0, "a2"), (1, "b1"), (3, "y1"), (3, "y2"), (3, "y3")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(2, "node", FOO)]},
                 [SPREAD, None, None, SPREAD], id="2/1/0/3 across nodes, maxSkew 2"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (1, "b1"), (2, "x1"), (2, "x2")),
                 {"name": "p", "labels": {"foo": ""}, "nodeSelector": {"zone": "zone1"},
                  "topologySpreadConstraints": [spread(1, "zone", FOO)]},
                 [None, None, SELECTOR, SELECTOR], id="nodeAffinityPolicy Honor: only the selected zone counts"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (0, "a2"), (2, "x1")),
                 {"name": "p", "labels": {"foo": ""}, "nodeSelector": {"zone": "zone1"},
                  "topologySpreadConstraints": [spread(1, "zone", FOO, nodeAffinityPolicy="Ignore")]},
                 [SPREAD, SPREAD, SELECTOR, SELECTOR], id="nodeAffinityPolicy Ignore: every zone counts"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (1, "b1")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", FOO, minDomains=3)]},
                 [SPREAD, SPREAD, None, None], id="minDomains above the domains: the minimum is 0"),
    pytest.param(ZONES4, foo_pods((0, "a1")) + [(2, {"name": "x1", "labels": {"foo": ""}, "terminating": True})],
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [spread(1, "zone", FOO)]},
                 [SPREAD, SPREAD, None, None], id="terminating pods do not count"),
    pytest.param(ZONES4, [(0, {"name": "a1", "labels": {"foo": "", "v": "1"}}), (0, {"name": "a2", "labels": {"foo": "", "v": "1"}})],
                 {"name": "p", "labels": {"foo": "", "v": "2"},
                  "topologySpreadConstraints": [spread(1, "zone", FOO, matchLabelKeys=["v"])]},
                 [None] * 4, id="matchLabelKeys counts the pod's own version only"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (2, "x1"), (2, "x2")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [
                     spread(1, "zone", FOO), spread(1, "node", FOO)]},
                 [SPREAD, None, SPREAD, SPREAD], id="two constraints, both must hold"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (0, "a2"), (1, "b1"), (3, "y1"), (3, "y2"), (3, "y3")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [
                     spread(1, "zone", FOO), spread(1, "node", FOO)]},
                 [SPREAD, SPREAD, None, SPREAD], id="zone and node, spreads 3/3 and 2/1/0/3"),
    pytest.param(ZONES4, foo_pods((0, "a1"), (0, "a2"), (1, "b1"), (3, "y1"), (3, "y2"), (3, "y3"), (3, "y4")),
                 {"name": "p", "labels": {"foo": ""}, "topologySpreadConstraints": [
                     spread(1, "zone", FOO), spread(1, "node", FOO)]},
                 [SPREAD, SPREAD, SPREAD, SPREAD], id="zone and node, spreads 3/4 and 2/1/0/4: no node"),
]


@pytest.mark.parametrize("nodes, running, pod, want", SPREAD_ROWS)
def test_spread_rows(nodes, running, pod, want) -> None:
    assert statuses(nodes, running, pod) == want


@pytest.mark.parametrize("nodes, running, pod, want", INTERPOD_ROWS + SPREAD_ROWS)
def test_rows_agree_with_reference_and_checker(nodes, running, pod, want) -> None:
    """The whole cluster: placer, the reference and the checker agree with the row."""
    snap = snapshot(nodes, running)
    request = pod_request(pod)
    got = placer.place(snap, request)
    ref = ReferenceCluster(snap).schedule(request)
    assert got.to_dict() == ref.to_dict()
    assert check_placement(snap, request, got) == []
    assert bool(got.assignments) == any(w is None for w in want)


def test_batch_sees_its_own_pods_and_gives_back_a_failed_group() -> None:
    """Pods of one request see those placed before them; a failed all-or-nothing group's
    pods are taken back out of the counts."""
    nodes = [{"zone": "a"}, {"zone": "b"}]
    web = {"name": "web", "replicas": 3, "labels": {"app": "web"},
           "affinity": affinity(anti=[term("app", "In", ["web"], "zone")])}
    snap = snapshot(nodes)
    request = PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [web]})
    got = placer.place(snap, request)
    assert [a.pod for a in got.assignments] == ["web-0", "web-1"]
    assert got.unschedulable[0].reason == f"0/2 nodes are available: 2 {ANTI}."
    session = KernelSession(snap)
    pods = list(request.pods)
    run = session.place(pods[:2], policies.get("first-fit"), np.zeros(1, dtype=np.uint64), [2, 2])
    assert run.nodes == [0, 1]
    run = session.place(pods[2:], policies.get("first-fit"), np.zeros(1, dtype=np.uint64))
    assert run.nodes == [-1]
    session.give_back_all([(pods[0], 0, 0), (pods[1], 1, 0)])
    run = session.place(pods[2:], policies.get("first-fit"), np.zeros(1, dtype=np.uint64))
    assert run.nodes == [0]


def test_failed_group_is_taken_out_of_the_counts() -> None:
    nodes = [{"zone": "a"}, {"zone": "b"}]
    web = {"name": "web", "replicas": 3, "labels": {"app": "web"},
           "affinity": affinity(anti=[term("app", "In", ["web"], "zone")])}
    pods = list(pod_request(web).pods)
    session = KernelSession(snapshot(nodes))
    run = session.place(pods, policies.get("first-fit"), np.zeros(1, dtype=np.uint64), [3, 3, 3])
    assert run.nodes == [-1, -1, -1] and run.failed_at == [2, 2, 2]
    run = session.place(pods[:2], policies.get("first-fit"), np.zeros(1, dtype=np.uint64))
    assert run.nodes == [0, 1]


def test_non_empty_namespace_selector_is_refused() -> None:
    pod = {"name": "p", "affinity": affinity([term("a", "Exists", None, "zone",
                                                   namespaceSelector={"matchLabels": {"team": "x"}})])}
    with pytest.raises(InvalidInputError, match=r"pods\[0\]\.affinity\.podAffinity\..*\[0\]\.namespaceSelector"):
        pod_request(pod)


def test_node_reasons_name_the_rule() -> None:
    snap = snapshot([{"zone": "a"}, {"zone": "b"}], [(0, {"name": "w", "labels": {"app": "web"}})])
    pod = pod_request({"name": "p", "affinity": affinity(anti=[term("app", "In", ["web"], "zone")])}).pods[0]
    assert KernelSession(snap).node_reasons(pod, [0]) == [ANTI]


def test_node_scores_leave_out_the_nodes_the_inter_pod_rules_turn_away() -> None:
    """What ``placer serve``'s filter passes (``Cluster.node_scores``) honours the rules as
    placement does: a node failing the pod's affinity or a running pod's anti-affinity
    scores no node (found by kube-oracle, tests/test_kube_oracle.py)."""
    snap = snapshot([{"zone": "a"}, {"zone": "b"}, {"zone": "c"}],
                    [(0, {"name": "w", "labels": {"app": "web"}}),
                     (1, {"name": "db", "labels": {"app": "db"}, "affinity": affinity(anti=[term("app", "In", ["x"], "zone")])})])
    pod = {"name": "p", "labels": {"app": "x"}, "affinity": affinity(aff=[term("app", "In", ["web", "db"], "zone")])}
    for policy in ("first-fit", "kube"):
        scores = placer.Cluster(snap).node_scores(pod, policy=policy)
        assert (scores > np.iinfo(np.int64).min).tolist() == [True, False, False]
        assert [a.node for a in placer.place(snap, _request_doc([pod], policy=policy)).assignments] == ["node0"]


# --- the property: kernel == reference, the checker accepts, reasons alike -------------------

_LABEL_VALUES = st.sampled_from(["a", "b"])
_POD_LABELS = st.dictionaries(st.sampled_from(["app", "tier"]), _LABEL_VALUES, max_size=2)
_KEYS = st.sampled_from(["zone", "kubernetes.io/hostname", "rack"])


@st.composite
def _selector(draw) -> dict[str, Any]:
    key = draw(st.sampled_from(["app", "tier"]))
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    expr: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = [draw(_LABEL_VALUES)]
    return {"matchExpressions": [expr]}


@st.composite
def _term(draw) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": draw(_selector()), "topologyKey": draw(_KEYS)}
    if draw(st.booleans()) and draw(st.booleans()):
        t["namespaces"] = [draw(st.sampled_from(["default", "team"]))]
    return t


@st.composite
def _rules(draw, running: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    aff = draw(st.lists(_term(), max_size=0 if running else 2))
    anti = draw(st.lists(_term(), max_size=2))
    if aff or anti:
        out["affinity"] = affinity(aff, anti)
    if not running and draw(st.booleans()):
        out["topologySpreadConstraints"] = [
            spread(draw(st.integers(1, 2)), draw(_KEYS), draw(st.one_of(st.none(), _selector())),
                   **({"minDomains": draw(st.integers(1, 4))} if draw(st.booleans()) else {}))
            for _ in range(draw(st.integers(1, 2)))
        ]
    return out


@st.composite
def _scenario(draw) -> tuple[ClusterSnapshot, PlacementRequest]:
    n = draw(st.integers(1, 6))
    nodes = []
    for i in range(n):
        labels = {"zone": f"z{draw(st.integers(0, 2))}"}
        if draw(st.booleans()):
            labels["rack"] = f"r{draw(st.integers(0, 1))}"
        nodes.append(labels)
    running = []
    for k in range(draw(st.integers(0, 4))):
        pod = {"name": f"{draw(st.sampled_from(['default', 'team']))}/run{k}", "cpuMilli": 100,
               "labels": draw(_POD_LABELS), "terminating": draw(st.booleans()) and draw(st.booleans())}
        pod.update(draw(_rules(True)))
        running.append((draw(st.integers(0, n - 1)), pod))
    pods = []
    for k in range(draw(st.integers(1, 6))):
        pod = {"name": f"{draw(st.sampled_from(['default', 'team']))}/p{k}", "cpuMilli": 1000 * draw(st.integers(1, 40)),
               "labels": draw(_POD_LABELS)}
        pod.update(draw(_rules(False)))
        pods.append(pod)
    snap = snapshot(nodes, running)
    request = PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest",
                                          "policy": draw(st.sampled_from(["first-fit", "best-fit", "spread", "random", "fgd", "dot-product"])),
                                          "pods": pods})
    return snap, request


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_scenario())
def test_kernel_matches_reference(scenario) -> None:
    snap, request = scenario
    got = placer.place(snap, request)
    ref = ReferenceCluster(snap).schedule(request)
    assert got.to_dict() == ref.to_dict()  # the same nodes, and the same reason lines (counts)
    assert check_placement(snap, request, got) == []


def test_pod_request_carries_rules() -> None:
    """The request's fields reach the PodRequest as the rules read them."""
    pod = pod_request({"name": "team/p", "labels": {"app": "web"},
                       "topologySpreadConstraints": [spread(1, "zone", FOO)]}).pods[0]
    assert isinstance(pod, PodRequest)
    assert pod.labels == {"app": "web"} and pod.topology_spread_constraints[0].max_skew == 1


def test_explain_names_the_rule_class_and_its_nodes() -> None:
    from placer.diagnostics.explain import explain

    snap = snapshot([{"zone": "a"}, {"zone": "a"}, {"zone": "b"}])
    web = {"name": "web", "replicas": 3, "cpuMilli": 100, "labels": {"app": "web"},
           "affinity": affinity(anti=[term("app", "In", ["web"], "zone")])}
    request = PlacementRequest.from_dict({"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [web]})
    (pending,) = explain(snap, request).pending
    assert pending.cause == "anti-affinity"
    assert f"{ANTI} on node0, node1" in pending.detail or f"{EXIST} on node0, node1" in pending.detail
    assert sum(pending.node_reasons.values()) == 3
    spread_pod = {"name": "s", "cpuMilli": 100, "labels": {"foo": ""},
                  "topologySpreadConstraints": [spread(1, "rack", FOO)]}
    (pending,) = explain(snap, pod_request(spread_pod)).pending
    assert pending.cause == "spread" and LABEL in pending.detail


def _request_doc(pods: list[dict], **more: Any) -> dict[str, Any]:
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods, **more}


WEB_ANTI = {"labels": {"app": "web"}, "affinity": affinity(anti=[term("app", "In", ["web"], "zone")])}


def test_a_gang_honours_the_rules_and_refuses_the_exact_solver() -> None:
    snap = snapshot([{"zone": "a"}, {"zone": "a"}, {"zone": "b"}])
    gang = [{"name": f"w{i}", "cpuMilli": 100, "gang": "g", **WEB_ANTI} for i in range(2)]
    got = placer.place(snap, PlacementRequest.from_dict(_request_doc(gang, gangs={"g": {}})))
    assert sorted(a.node for a in got.assignments) == ["node0", "node2"]
    too_many = gang + [{"name": "w2", "cpuMilli": 100, "gang": "g", **WEB_ANTI}]
    request = PlacementRequest.from_dict(_request_doc(too_many, gangs={"g": {}}))
    got = placer.place(snap, request)  # auto: the greedy's answer, no CP-SAT retry
    assert not got.assignments and check_placement(snap, request, got) == []
    exact = PlacementRequest.from_dict(_request_doc(gang, gangs={"g": {"solver": "exact"}}))
    with pytest.raises(InvalidInputError, match=r"gangs\.g\.solver"):
        placer.place(snap, exact)


def test_preemption_is_not_attempted_for_a_pod_with_rules() -> None:
    snap = snapshot([{"zone": "a"}], [(0, {"name": "low", "cpuMilli": 64000, "priority": -1})])
    pod = {"name": "p", "cpuMilli": 1000, "priority": 5, **WEB_ANTI}
    got = placer.place(snap, PlacementRequest.from_dict(_request_doc([pod], preemption="greedy")))
    assert not got.preemptions and "preemption not attempted" in got.unschedulable[0].reason
    plain = {"name": "p", "cpuMilli": 1000, "priority": 5}
    got = placer.place(snap, PlacementRequest.from_dict(_request_doc([plain], preemption="greedy")))
    assert got.preemptions  # the same pod without rules preempts


def test_a_running_pods_anti_affinity_survives_preemption() -> None:
    """The victims' node is refused when a running pod's anti-affinity repels the preemptor."""
    guard = {"name": "guard", "affinity": affinity(anti=[term("app", "In", ["web"], "zone")])}
    snap = snapshot([{"zone": "a"}], [(0, guard), (0, {"name": "low", "cpuMilli": 64000, "priority": -1})])
    pod = {"name": "p", "cpuMilli": 1000, "priority": 5, "labels": {"app": "web"}}
    request = PlacementRequest.from_dict(_request_doc([pod], preemption="greedy"))
    got = placer.place(snap, request)
    assert not got.assignments and not got.preemptions
    assert check_placement(snap, request, got) == []


def test_gpu_slot_pods_with_rules_are_refused() -> None:
    snap = snapshot([{"zone": "a"}])
    with pytest.raises(InvalidInputError, match=r"pods\[0\].*gpuSlots"):
        placer.place(snap, PlacementRequest.from_dict(_request_doc([{"name": "s", "gpuSlots": 1, **WEB_ANTI}])))
