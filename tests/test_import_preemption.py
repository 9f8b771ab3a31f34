"""What the Kubernetes importers carry over for preemption.

Running pods (``placer import kubernetes``): priority (resolved through PriorityClasses),
start time, labels, gang, whether they may be evicted, terminating and disruption state;
PodDisruptionBudgets (``--pdbs``). Pending pods (``placer import kubernetes-request``):
priority, ``preemptionPolicy`` and ``nominatedNodeName``. The inputs are the handmade
kubectl outputs of tests/data/k8s: ``handmade-pods-preemption.json`` (pods running on the
nodes of ``handmade-nodes.json``), ``handmade-priorityclasses.yaml``,
``handmade-pdbs.yaml`` and ``handmade-pods-pending-priority.yaml``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import placer
from placer.adapters.kubernetes.snapshot import import_kubernetes
from placer.adapters.kubernetes.workloads import import_workloads
from placer.cli import main
from placer.exceptions import InvalidInputError

DATA = Path(__file__).parent / "data" / "k8s"
NODES = DATA / "handmade-nodes.json"
RUNNING = DATA / "handmade-pods-preemption.json"
CLASSES = DATA / "handmade-priorityclasses.yaml"
PDBS = DATA / "handmade-pdbs.yaml"
PENDING = DATA / "handmade-pods-pending-priority.yaml"
NOT_READY_NOTE = (  # the one node of NODES whose Ready condition is Unknown
    f"{NODES}: items[2].status.conditions: node 'dgx-h100-2': Ready is Unknown; added the node lifecycle "
    "controller's taint(s) node.kubernetes.io/unreachable:NoSchedule, node.kubernetes.io/unreachable:NoExecute"
)


def _pods(imported) -> dict:
    return {p["name"]: p for n in imported.document["nodes"] for p in n.get("pods", [])}


@pytest.fixture(scope="module")
def imported():
    return import_kubernetes(NODES, RUNNING, priority_classes=CLASSES, pdbs=PDBS)


def test_priorities_follow_the_priority_classes(imported):
    pods = _pods(imported)
    priority = {name: p.get("priority", 0) for name, p in pods.items()}
    assert priority == {
        "kube-system/coredns-5d78c9869d-x7k2q": 2000000000,
        "team-a/llama-pretrain-0": 100,
        "team-b/infer-0": 10,
        "team-b/infer-1": 10,
        "team-a/llama-pretrain-1": 100,
        "team-c/notebook-0": 10,  # spec.priorityClassName batch-low only
        "team-c/notebook-1": 100,  # no class: the globalDefault research-default
        "team-d/sweep-3-worker-0-0-x2b9f": 0,  # class spot: not among the inputs
        "team-e/vc-train-worker-0": 0,
    }
    assert imported.notes == (
        NOT_READY_NOTE,
        f"{RUNNING}: items[7].spec.priorityClassName: priority class 'spot' is not among the inputs; "
        "priority left at 0",
    )


def test_without_the_classes_a_named_class_is_zero_and_noted():
    alone = import_kubernetes(NODES, RUNNING)
    pods = _pods(alone)
    assert "priority" not in pods["team-c/notebook-0"] and "priority" not in pods["team-c/notebook-1"]
    assert pods["team-a/llama-pretrain-0"]["priority"] == 100  # spec.priority needs no class
    assert [note.split(": ")[1] for note in alone.notes] == [
        "items[2].status.conditions", "items[5].spec.priorityClassName", "items[7].spec.priorityClassName"]


def test_system_critical_pods_are_not_preemptible(imported):
    pods = _pods(imported)
    assert [name for name, p in pods.items() if p.get("preemptible") is False] == [
        "kube-system/coredns-5d78c9869d-x7k2q"]
    snapshot = imported.snapshot
    assert {p.name: p.preemptible for n in snapshot.nodes for p in n.pods}["team-b/infer-0"] is True


def test_start_times_labels_and_disruption_state(imported):
    pods = _pods(imported)
    assert pods["team-a/llama-pretrain-0"]["startTime"] == "2025-06-10T08:00:05Z"
    running = {p.name: p for n in imported.snapshot.nodes for p in n.pods}
    assert running["team-a/llama-pretrain-0"].started_at == 1749542405.0
    assert running["team-b/infer-0"].labels == {"app": "infer", "pod-template-hash": "7c9d5f6b8"}
    assert (running["team-b/infer-1"].terminating, running["team-b/infer-1"].disruption_target) == (
        True, "EvictionByEvictionAPI")
    assert (running["team-b/infer-0"].terminating, running["team-b/infer-0"].disruption_target) == (False, None)


def test_gangs_from_podgroup_jobset_and_volcano(imported):
    gangs = {p.name: p.gang for n in imported.snapshot.nodes for p in n.pods if p.gang is not None}
    assert gangs == {
        "team-a/llama-pretrain-0": "team-a/llama-pretrain",  # scheduling.x-k8s.io/pod-group
        "team-a/llama-pretrain-1": "team-a/llama-pretrain",
        "team-d/sweep-3-worker-0-0-x2b9f": "team-d/sweep-3",  # jobset.sigs.k8s.io/jobset-name
        "team-e/vc-train-worker-0": "team-e/vc-train",  # scheduling.k8s.io/group-name
    }


def test_a_running_gang_has_the_name_the_workload_importer_gives_its_pods(tmp_path):
    running = json.loads(RUNNING.read_text())["items"][1]
    pending = {"apiVersion": "v1", "kind": "Pod", "metadata": {**running["metadata"], "name": "llama-pretrain-2"},
               "spec": {k: v for k, v in running["spec"].items() if k != "nodeName"}, "status": {"phase": "Pending"}}
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "llama-pretrain", "namespace": "team-a"}, "spec": {"minMember": 1}}
    path = tmp_path / "pending.yaml"
    path.write_text(yaml.safe_dump_all([pending, group]))
    request = import_workloads(path).request
    assert [p.gang for p in request.pods] == ["team-a/llama-pretrain"]


def test_pod_disruption_budgets(imported):
    assert imported.document["podDisruptionBudgets"] == [
        {"name": "coredns", "namespace": "kube-system", "selector": {"k8s-app": "kube-dns"}, "maxUnavailable": 1,
         "disruptionsAllowed": 0},
        {"name": "llama-pretrain", "namespace": "team-a", "selector": {"app": "llama-pretrain"},
         "minAvailable": "100%"},
        {"name": "infer", "namespace": "team-b", "selector": {"app": "infer"}, "maxUnavailable": "50%",
         "disruptionsAllowed": 0, "disruptedPods": ["team-b/infer-1"]},
    ]
    budgets = {b.name: b for b in imported.snapshot.pod_disruption_budgets}
    infer = [p for n in imported.snapshot.nodes for p in n.pods if p.name == "team-b/infer-0"][0]
    assert budgets["infer"].matches(infer) and not budgets["coredns"].matches(infer)


def _budget_file(tmp_path: Path, spec: dict, name: str = "pdb.yaml") -> Path:
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "b", "namespace": "team-a"}, "spec": spec}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(budget, sort_keys=False) if name.endswith(".yaml") else json.dumps(budget))
    return path


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ({"selector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["x"]}]}},
         "pdb.yaml:9: spec.selector.matchExpressions[0]: placer selects pods by label equality only: "
         "key 'app', operator 'NotIn', values ['x'] is none"),
        ({"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}},
         "key 'app', operator 'In', values ['x', 'y'] is none; use matchLabels or operator In with one value"),
        ({"selector": {"matchLabels": {"app": "x"}}, "minAvailable": "150%"},
         "pdb.yaml:1: expected a count or a percentage such as '50%', got '150%'"),
        ({"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1, "maxUnavailable": 1},
         "give minAvailable or maxUnavailable, not both"),
        ({"selector": {"matchLabels": {"app": "x"}}, "minAvailable": 1.5},
         "spec.minAvailable: expected a count or a percentage"),
    ],
)
def test_budget_errors_name_the_file_and_place(tmp_path, spec, fragment):
    with pytest.raises(InvalidInputError) as info:
        import_kubernetes(NODES, pdbs=_budget_file(tmp_path, spec))
    assert fragment in str(info.value)


def test_budget_errors_in_json_name_the_path(tmp_path):
    spec = {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}
    path = _budget_file(tmp_path, spec, "pdb.json")
    with pytest.raises(InvalidInputError) as info:
        import_kubernetes(NODES, pdbs=path)
    assert info.value.where == f"{path}: spec.selector.matchExpressions[0]"


def test_an_empty_selector_covers_nothing_and_is_noted(tmp_path):
    result = import_kubernetes(NODES, pdbs=_budget_file(tmp_path, {"selector": {}, "maxUnavailable": 0}))
    assert result.snapshot.pod_disruption_budgets[0].selector == {}
    assert result.notes == (NOT_READY_NOTE, f"{tmp_path / 'pdb.yaml'}:7: spec.selector: PodDisruptionBudget team-a/b selects no "
                            "pods (kube-scheduler's preemption ignores an empty selector)",)


@pytest.mark.parametrize("option", ["pdbs", "priority_classes"])
def test_other_kinds_are_refused(option):
    with pytest.raises(InvalidInputError) as info:
        import_kubernetes(NODES, **{option: RUNNING})
    assert info.value.where == f"{RUNNING}: items[0].kind"
    assert "got 'Pod'" in info.value.what


def test_an_unquoted_yaml_start_time_is_read(tmp_path):
    pods = json.loads(RUNNING.read_text())
    pods["items"] = pods["items"][2:3]
    text = yaml.safe_dump(pods).replace("startTime: '2025-06-10T10:15:00Z'", "startTime: 2025-06-10T10:15:00Z")
    assert "startTime: 2025-06-10T10:15:00Z" in text
    path = tmp_path / "pods.yaml"
    path.write_text(text)
    pod = import_kubernetes(NODES, path).snapshot.nodes[0].pods[0]
    assert pod.started_at == 1749550500.0


def test_pending_pods_carry_priority_policy_and_nominated_node():
    pods = {p["name"]: p for p in import_workloads([PENDING, CLASSES]).document["pods"]}
    assert pods["team-x/urgent-eval"]["priority"] == 500
    assert pods["team-x/urgent-eval"]["nominatedNodeName"] == "dgx-h100-1"
    assert "preemptionPolicy" not in pods["team-x/urgent-eval"]
    # the class gives priority and preemptionPolicy: Never
    assert (pods["team-x/serve-canary"]["priority"], pods["team-x/serve-canary"]["preemptionPolicy"]) == (
        1000000, "Never")
    request = import_workloads([PENDING, CLASSES]).request
    assert {p.name: (p.preemption_policy, p.nominated_node) for p in request.pods} == {
        "team-x/urgent-eval": ("PreemptLowerPriority", "dgx-h100-1"),
        "team-x/serve-canary": ("Never", None),
    }


def test_a_pending_pods_own_preemption_policy_wins(tmp_path):
    pods = yaml.safe_load(PENDING.read_text())
    pods["items"][1]["spec"]["preemptionPolicy"] = "PreemptLowerPriority"
    path = tmp_path / "pending.yaml"
    path.write_text(yaml.safe_dump(pods))
    canary = import_workloads([path, CLASSES]).document["pods"][1]
    assert canary["priority"] == 1000000 and "preemptionPolicy" not in canary
    pods["items"][1]["spec"]["preemptionPolicy"] = "Sometimes"
    path.write_text(yaml.safe_dump(pods))
    with pytest.raises(InvalidInputError, match="spec.preemptionPolicy: expected PreemptLowerPriority or Never"):
        import_workloads([path, CLASSES])


def test_import_and_preempt_from_the_command_line(tmp_path, capsys):
    cluster, request = tmp_path / "cluster.json", tmp_path / "request.json"
    assert main(["import", "kubernetes", "--nodes", str(NODES), "--pods", str(RUNNING), "--priority-classes",
                 str(CLASSES), "--pdbs", str(PDBS), "-o", str(cluster)]) == 0
    assert "priority class 'spot' is not among the inputs" in capsys.readouterr().err
    assert main(["import", "kubernetes-request", str(PENDING), str(CLASSES), "-o", str(request)]) == 0
    capsys.readouterr()
    assert main(["preempt", str(cluster), str(request)]) == 0
    result = json.loads(capsys.readouterr().out)
    # dgx-h100-1 frees 4 GPUs without touching the pretraining gang: the notebook and
    # two lower-priority one-pod gangs go; serve-canary may not preempt and waits
    assert result["preemptions"] == [{
        "for": "team-x/urgent-eval", "nodes": ["dgx-h100-1"], "pdbViolations": 0, "solver": "greedy",
        "status": "feasible",
        "victims": ["team-c/notebook-0", "team-d/sweep-3-worker-0-0-x2b9f", "team-e/vc-train-worker-0"]}]
    assert [(a["pod"], a["node"], a["nominated"]) for a in result["assignments"]] == [
        ("team-x/urgent-eval", "dgx-h100-1", True)]
    assert [u["pod"] for u in result["unschedulable"]] == ["team-x/serve-canary"]


def test_imported_budgets_count_in_preemption(imported):
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [
        {"name": "team-x/big", "gpus": 8, "priority": 500,
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}]}
    # Either node must lose the pretraining gang (whole: a pod on each node), which breaks
    # its minAvailable 100%; on dgx-h100-0 the infer pods would go too, and infer allows
    # no disruption: with the budgets imported dgx-h100-1 breaks fewer.
    with_budgets = placer.preempt(imported.snapshot, request)
    without = placer.preempt(import_kubernetes(NODES, RUNNING, priority_classes=CLASSES).snapshot, request)
    gang = ("team-a/llama-pretrain-0", "team-a/llama-pretrain-1")
    assert [(a.node, p.victims, p.pdb_violations) for a, p in zip(with_budgets.assignments, with_budgets.preemptions)] == [
        ("dgx-h100-1", (*gang, "team-c/notebook-0", "team-d/sweep-3-worker-0-0-x2b9f", "team-e/vc-train-worker-0"), 1)]
    assert [(a.node, p.victims, p.pdb_violations) for a, p in zip(without.assignments, without.preemptions)] == [
        ("dgx-h100-0", (*gang, "team-b/infer-0", "team-b/infer-1"), 0)]
