"""kube-scheduler's own filters and scores as the oracle (issue #33, §3).

Hypothesis draws Kubernetes objects within the rules of issue #32: Nodes (cpu, memory, pods,
``nvidia.com/gpu``, ``example.com/nic``, ``ephemeral-storage``; hostname, zone, rack, rank and
GPU product labels; taints of every effect; cordons), running Pods bound by ``spec.nodeName``
(requests, labels, namespaces, pod (anti-)affinity of their own, host ports, some
terminating) and one pending Pod (requests, ``nodeSelector``, required and preferred node
affinity with every operator and ``matchFields``, tolerations, required and preferred pod
(anti-)affinity with namespaces, ``namespaceSelector: {}`` and match/mismatch label keys,
topology spread of both kinds with ``minDomains``, the node inclusion policies and
``matchLabelKeys``, host ports, ``nodeName``). Each case goes to placer through its own
Kubernetes importers (:func:`placer.adapters.kubernetes.import_kubernetes`,
:func:`placer.adapters.kubernetes.workloads.import_workloads`) and to kube-scheduler v1.36.3's
default profile through ``kube-oracle`` (:mod:`kube_oracle`, one process per batch), and
for every case:

* placer's feasible nodes (``Cluster.node_scores``, what ``placer serve``'s filter passes)
  are kube's, and the reason placer gives each other node (``KernelSession.node_reasons``,
  the extender's ``FailedNodes`` entry) is one of the reasons kube's first failing plugin
  gives it;
* when none is, placer's line (``placer explain``'s and the extender's) is kube's
  ``FitError`` message;
* else, under the kube-scored policy drawn (``kube``, ``kube-most-allocated``,
  ``kube-requested-to-capacity-ratio``, kube's NodeResourcesFit configured alike), placer's
  total per feasible node is kube's (ImageLocality and VolumeBinding, which placer leaves
  out, are 0 or absent there), and the node placer chooses is one of kube's top nodes.

The count of cases compared is printed at the end of the module (``-s``): about 600 by
default (about 80 s); the ``thorough`` Hypothesis profile (``PLACER_HYPOTHESIS_PROFILE=thorough``)
compared 5,861 (1,868 scored), all equal.
"""
from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import kube_oracle
import placer
from placer.adapters.kubernetes import GPU_PRODUCT_LABEL as PRODUCT
from placer.adapters.kubernetes import GPU_RESOURCE as GPU
from placer.adapters.kubernetes import HOSTNAME_LABEL as HOSTNAME
from placer.adapters.kubernetes import import_kubernetes
from placer.adapters.kubernetes.workloads import import_workloads
from placer.placement.cluster import Cluster

pytestmark = pytest.mark.kube

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
RANK = "example.com/rank"
NIC = "example.com/nic"
TAINT_KEYS = ("dedicated", "gpu")
NAMESPACES = ("default", "team")
LABEL_KEYS = ("app", "tier")
NO_SCORE = np.iinfo(np.int64).min
UNMODELLED_SCORES = ("ImageLocality", "VolumeBinding")
"""kube score plugins placer leaves out (docs/placement-rules.md): 0 without images and volumes."""
SCORING: dict[str, dict[str, Any] | None] = {
    "kube": None,
    "kube-most-allocated": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1},
                                                                   {"name": "memory", "weight": 1}]},
    "kube-requested-to-capacity-ratio": {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}],
        "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]},
    },
}
"""NodeResourcesFit's ``scoringStrategy`` of each kube-scored policy (placer.placement.kube_scores.STRATEGIES)."""

compared = {"cases": 0, "unschedulable": 0, "scored": 0}


@pytest.fixture(scope="module", autouse=True)
def oracle_present() -> Iterator[None]:
    reason = kube_oracle.missing()
    if reason:
        pytest.skip(reason)
    yield
    print(f"\nkube-oracle: {compared['cases']} generated cases compared "
          f"({compared['unschedulable']} unschedulable, {compared['scored']} scored)")


# ---------------------------------------------------------------------- objects

values = st.sampled_from(["a", "b"])
label_keys = st.sampled_from(LABEL_KEYS)
topology_keys = st.sampled_from([HOSTNAME, ZONE, RACK])
pod_labels = st.dictionaries(label_keys, values, max_size=2)


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws (Hypothesis leans to the first choice, False)."""
    return st.sampled_from([False] * (n - 1) + [True])


@st.composite
def nodes(draw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        name = f"n{i}"
        labels = {HOSTNAME: name}
        for key, choices in ((ZONE, ["z0", "z1"]), (RACK, ["r0", "r1", "r2"]), (RANK, ["1", "5", "10", "x"]),
                             (PRODUCT, ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"])):
            if not draw(one_in(4)):
                labels[key] = draw(st.sampled_from(choices))
        resources = {"cpu": draw(st.sampled_from(["2", "4", "8", "1500m"])),
                     "memory": draw(st.sampled_from(["4Gi", "8Gi", "16Gi", "3000Mi"])),
                     "pods": draw(st.sampled_from(["2", "10", "110"]))}
        gpus = draw(st.sampled_from([0, 0, 2, 4, 8]))
        if gpus:
            resources[GPU] = str(gpus)
        if draw(st.booleans()):
            resources[NIC] = str(draw(st.integers(0, 2)))
        if draw(st.booleans()):
            resources["ephemeral-storage"] = draw(st.sampled_from(["10Gi", "100Gi"]))
        spec: dict[str, Any] = {}
        taints = {}
        for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
            key = draw(st.sampled_from(TAINT_KEYS))
            effect = draw(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule", "PreferNoSchedule"]))
            taint = {"key": key, "effect": effect}
            value = draw(st.sampled_from(["", "a", "b"]))
            if value:
                taint["value"] = value
            taints[(key, effect)] = taint  # kube's validation: one taint per key and effect
        if taints:
            spec["taints"] = list(taints.values())
        if draw(one_in(8)):
            spec["unschedulable"] = True
        out.append({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
            "status": {"capacity": dict(resources), "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
    return out


@st.composite
def selector(draw: Any) -> dict[str, Any]:
    """A label selector over the pods' labels (matchLabels, matchExpressions or both)."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["matchLabels"] = {draw(label_keys): draw(values)}
    if not out or draw(st.booleans()):
        key = draw(label_keys)
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
        expr: dict[str, Any] = {"key": key, "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = sorted(draw(st.sets(values, min_size=1)))
        out["matchExpressions"] = [expr]
    return out


@st.composite
def pod_term(draw: Any, label_keys_too: bool) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": draw(topology_keys)}
    if not draw(one_in(6)):
        term["labelSelector"] = draw(selector())
    scope = draw(st.sampled_from(["own", "own", "namespaces", "all"]))
    if scope == "namespaces":
        term["namespaces"] = sorted(draw(st.sets(st.sampled_from(NAMESPACES), min_size=1)))
    elif scope == "all":
        term["namespaceSelector"] = {}
    if label_keys_too and "labelSelector" in term and draw(st.booleans()):
        used = {*term["labelSelector"].get("matchLabels", {}),
                *(e["key"] for e in term["labelSelector"].get("matchExpressions", []))}
        free = [k for k in LABEL_KEYS if k not in used]
        if free:
            term[draw(st.sampled_from(["matchLabelKeys", "mismatchLabelKeys"]))] = [draw(st.sampled_from(free))]
    return term


@st.composite
def pod_affinity(draw: Any, pending: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        # a required term is seldom met by chance: drawn in one case of three
        required = draw(st.lists(pod_term(pending), max_size=2 if pending else 1)) if draw(one_in(3)) else []
        preferred = [{"weight": draw(st.integers(1, 100)), "podAffinityTerm": t}
                     for t in draw(st.lists(pod_term(pending), max_size=2))]
        rules: dict[str, Any] = {}
        if required:
            rules["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred:
            rules["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if rules:
            out[kind] = rules
    return out


def container(requests: dict[str, str], ports: list[dict[str, Any]]) -> dict[str, Any]:
    """One container; extended resources (GPUs, NICs) are limits as well, as kube requires."""
    c: dict[str, Any] = {"name": "c", "image": "x"}
    if requests:
        c["resources"] = {"requests": dict(requests),
                          "limits": {k: v for k, v in requests.items() if "/" in k}}
    if ports:
        c["ports"] = ports
    return c


@st.composite
def host_ports(draw: Any) -> list[dict[str, Any]]:
    ports = {}
    for _ in range(draw(st.integers(0, 2))):
        port = draw(st.sampled_from([80, 8080]))
        protocol = draw(st.sampled_from(["TCP", "UDP"]))
        entry = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if draw(one_in(4)):
            entry["hostIP"] = draw(st.sampled_from(["0.0.0.0", "10.0.0.1"]))
        ports[(port, protocol, entry.get("hostIP"))] = entry
    return list(ports.values())


@st.composite
def running_pods(draw: Any, the_nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    gpus_left = {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, 0)) for n in the_nodes}
    out = []
    for k in range(draw(st.integers(0, 8))):
        node = draw(st.sampled_from(the_nodes))["metadata"]["name"]
        requests = {"cpu": draw(st.sampled_from(["500m", "1", "2"])), "memory": draw(st.sampled_from(["1Gi", "2Gi"]))}
        # a pod holding more GPUs than its node has is a malformed record placer refuses
        # (docs/placement-rules.md, "Over-committed nodes and unhealthy GPUs")
        gpus = draw(st.integers(0, min(2, gpus_left[node])))
        if gpus:
            requests[GPU] = str(gpus)
            gpus_left[node] -= gpus
        if draw(one_in(4)):
            requests[NIC] = "1"
        metadata: dict[str, Any] = {"name": f"r{k}", "namespace": draw(st.sampled_from(NAMESPACES)),
                                    "labels": draw(pod_labels), "uid": f"uid-r{k}"}
        if draw(one_in(6)):
            metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        spec: dict[str, Any] = {"nodeName": node, "containers": [container(requests, draw(host_ports()))]}
        affinity = draw(pod_affinity(False))
        if affinity:
            spec["affinity"] = affinity
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                    "status": {"phase": "Running"}})
    return out


@st.composite
def node_selector_term(draw: Any, names: list[str]) -> dict[str, Any]:
    term: dict[str, Any] = {}
    expressions = []
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from([ZONE, RACK, RANK, PRODUCT]))
        op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
        expr: dict[str, Any] = {"key": key, "operator": op}
        if op in ("In", "NotIn"):
            expr["values"] = sorted(draw(st.sets(st.sampled_from(["z0", "z1", "r0", "r1", "5", "NVIDIA-A100-SXM4-80GB"]),
                                                 min_size=1, max_size=2)))
        elif op in ("Gt", "Lt"):
            expr["values"] = [draw(st.sampled_from(["1", "5", "7"]))]
        expressions.append(expr)
    if expressions:
        term["matchExpressions"] = expressions
    if not expressions or draw(st.booleans()):
        term["matchFields"] = [{"key": "metadata.name", "operator": draw(st.sampled_from(["In", "NotIn"])),
                                "values": [draw(st.sampled_from([*names, "elsewhere"]))]}]
    return term


@st.composite
def tolerations(draw: Any) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(["", *TAINT_KEYS, "node.kubernetes.io/unschedulable"]))
        toleration: dict[str, Any] = {}
        if key:
            toleration["key"] = key
        if not key or draw(st.booleans()):
            toleration["operator"] = "Exists"  # kube's validation: an empty key only with Exists
        else:
            toleration["operator"] = draw(st.sampled_from(["Equal", None]))
            if toleration["operator"] is None:
                del toleration["operator"]
            value = draw(st.sampled_from(["", "a", "b"]))
            if value:
                toleration["value"] = value
        effect = draw(st.sampled_from(["", "NoSchedule", "NoExecute", "PreferNoSchedule"]))
        if effect:
            toleration["effect"] = effect
        out.append(toleration)
    return out


@st.composite
def spread_constraints(draw: Any) -> list[dict[str, Any]]:
    out = {}
    for _ in range(draw(st.integers(0, 2))):
        when = draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))
        c: dict[str, Any] = {"maxSkew": draw(st.integers(1, 2)), "topologyKey": draw(topology_keys),
                             "whenUnsatisfiable": when}
        if not draw(one_in(5)):
            c["labelSelector"] = {"matchExpressions": [{"key": "tier", "operator": draw(st.sampled_from(["Exists", "In"])),
                                                        **({"values": [draw(values)]} if draw(st.booleans()) else {})}]}
            if c["labelSelector"]["matchExpressions"][0]["operator"] == "Exists":
                c["labelSelector"]["matchExpressions"][0].pop("values", None)
            elif "values" not in c["labelSelector"]["matchExpressions"][0]:
                c["labelSelector"]["matchExpressions"][0]["values"] = ["a"]
            if draw(st.booleans()):
                c["matchLabelKeys"] = ["app"]  # kube's validation: no key of the selector
        if when == "DoNotSchedule" and draw(st.booleans()):
            c["minDomains"] = draw(st.integers(1, 3))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if draw(st.booleans()):
                c[policy] = draw(st.sampled_from(["Honor", "Ignore"]))
        out[(c["topologyKey"], when)] = c  # kube's validation: one per key and action
    return list(out.values())


@st.composite
def pending_pod(draw: Any, the_nodes: list[dict[str, Any]]) -> dict[str, Any]:
    names = [n["metadata"]["name"] for n in the_nodes]
    requests: dict[str, str] = {}
    for key, choices in (("cpu", ["100m", "1", "3", "6"]), ("memory", ["512Mi", "2Gi", "6Gi"]), (GPU, ["1", "2", "4"]),
                         (NIC, ["1", "2"]), ("ephemeral-storage", ["1Gi", "50Gi"])):
        if draw(st.booleans()) if key in ("cpu", "memory") else draw(one_in(4)):
            requests[key] = draw(st.sampled_from(choices))
    spec: dict[str, Any] = {"containers": [container(requests, draw(host_ports()))]}
    if draw(one_in(4)):
        spec["nodeSelector"] = {draw(st.sampled_from([ZONE, RACK, PRODUCT])): draw(st.sampled_from(
            ["z0", "r1", "NVIDIA-H100-80GB-HBM3"]))}
    affinity = draw(pod_affinity(True))
    if draw(st.booleans()):
        node_affinity: dict[str, Any] = {}
        if draw(one_in(3)):
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": draw(st.lists(node_selector_term(names), min_size=1, max_size=2))}
        preferred = [{"weight": draw(st.integers(1, 100)), "preference": t}
                     for t in draw(st.lists(node_selector_term(names), max_size=2))]
        if preferred:
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if node_affinity:
            affinity["nodeAffinity"] = node_affinity
    if affinity:
        spec["affinity"] = affinity
    spec["tolerations"] = draw(tolerations())
    spec["topologySpreadConstraints"] = draw(spread_constraints())
    if draw(one_in(8)):
        spec["nodeName"] = draw(st.sampled_from([*names, "elsewhere"]))
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": draw(st.sampled_from(NAMESPACES)), "labels": draw(pod_labels),
                        "uid": "uid-p"},
           "spec": {k: v for k, v in spec.items() if v}}
    return admitted(pod)


def admitted(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as the API server stores it: ``matchLabelKeys`` / ``mismatchLabelKeys`` merged
    into the selectors (kube's pod strategy, ``mutatePodAffinity`` and
    ``mutateTopologySpreadConstraints``), which kube-oracle, running no admission, needs."""
    pod = copy.deepcopy(pod)
    labels = pod["metadata"]["labels"]

    def merge(selector: dict[str, Any] | None, keys: list[str], operator: str) -> None:
        if selector is None:
            return
        for key in keys:
            if key in labels:
                selector.setdefault("matchExpressions", []).append({"key": key, "operator": operator, "values": [labels[key]]})

    affinity = pod["spec"].get("affinity", {})
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind, {})
        terms = [*rules.get("requiredDuringSchedulingIgnoredDuringExecution", []),
                 *(w["podAffinityTerm"] for w in rules.get("preferredDuringSchedulingIgnoredDuringExecution", []))]
        for term in terms:
            merge(term.get("labelSelector"), term.get("matchLabelKeys", []), "In")
            merge(term.get("labelSelector"), term.get("mismatchLabelKeys", []), "NotIn")
    for constraint in pod["spec"].get("topologySpreadConstraints", []):
        merge(constraint.get("labelSelector"), constraint.get("matchLabelKeys", []), "In")
    return pod


@st.composite
def cases(draw: Any) -> dict[str, Any]:
    the_nodes = draw(nodes())
    policy = draw(st.sampled_from(sorted(SCORING)))
    case = {"nodes": the_nodes, "pods": draw(running_pods(the_nodes)), "pod": draw(pending_pod(the_nodes))}
    if SCORING[policy] is not None:
        case["scoringStrategy"] = SCORING[policy]
    return {"policy": policy, "case": case}


# ---------------------------------------------------------------------- placer's side


def placer_decision(case: dict[str, Any], policy: str, folder: Path) -> dict[str, Any]:
    """What placer decides for ``case`` from the objects, through ``placer import``'s readers."""
    for name in ("nodes", "pods"):
        (folder / f"{name}.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": case[name]}))
    (folder / "pod.json").write_text(json.dumps(case["pod"]))
    snapshot = import_kubernetes(folder / "nodes.json", folder / "pods.json").snapshot
    # all_phases: a pending pod with spec.nodeName is still the pod to place
    request = import_workloads([folder / "pod.json"], policy=policy, all_phases=True).request
    cluster = Cluster(snapshot)
    pod = request.pods[0]
    scores = dict(zip(cluster.node_names, cluster.node_scores(pod, policy=policy).tolist()))
    result = placer.place(snapshot, request)
    turned = [name for name, score in scores.items() if score == NO_SCORE]
    at = [cluster.session.node_index[name] for name in turned]
    return {
        "feasible": sorted(name for name, score in scores.items() if score != NO_SCORE),
        "totals": {name: score for name, score in scores.items() if score != NO_SCORE},
        "node": result.assignments[0].node if result.assignments else None,
        "message": result.unschedulable[0].reason if result.unschedulable else "",
        "reasons": dict(zip(turned, cluster.session.node_reasons(pod, at))) if at else {},
    }


def disagreement(kube: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """What placer and kube decide differently for one case, or None."""
    if ours["feasible"] != kube["feasible"]:
        return "feasible nodes differ"
    for node, reason in ours["reasons"].items():  # the extender's FailedNodes entry
        if reason not in kube["statuses"][node]["reasons"]:
            return f"placer's reason on {node} is none of kube's"
    if not kube["feasible"]:
        return None if ours["message"] == kube["message"] and ours["node"] is None else "messages differ"
    totals = {}
    for node, score in kube["scores"].items():
        unmodelled = {p: score["plugins"][p] for p in UNMODELLED_SCORES if p in score["plugins"]}
        if any(unmodelled.values()):
            return f"kube scores {unmodelled} on {node}, which placer leaves out"
        totals[node] = score["total"]
    if ours["totals"] != totals:
        return "totals differ"
    top = max(totals.values())
    if ours["node"] not in {n for n, t in totals.items() if t == top}:
        return "placer's node is not one of kube's top nodes"
    return None


@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(st.lists(cases(), min_size=8, max_size=20))
def test_placer_decides_as_kube_scheduler_does(drawn: list[dict[str, Any]]) -> None:
    """Feasible nodes, the reason line and the kube policies' totals equal kube-scheduler's.

    One kube-oracle run per batch of cases (its start is the cost); no shrinking, which
    would run it again per step: the failure quotes the one case, kube's and placer's answers."""
    kube = kube_oracle.decide([d["case"] for d in drawn])
    with tempfile.TemporaryDirectory(prefix="placer-oracle-") as tmp:
        for d, k in zip(drawn, kube):
            ours = placer_decision(d["case"], d["policy"], Path(tmp))
            why = disagreement(k, ours)
            assert why is None, (
                f"{why} under {d['policy']}:\nkube: {json.dumps(k, sort_keys=True)}\n"
                f"placer: {json.dumps(ours, sort_keys=True)}\ncase: {json.dumps(d['case'])}"
            )
            compared["cases"] += 1
            compared["unschedulable" if not k["feasible"] else "scored"] += 1
