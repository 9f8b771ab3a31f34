"""Reading Kueue's own objects (SPEC §8): every kind in v1beta1 and v1beta2, Lists and
multi-document YAML, labelled Jobs/JobSets/Pods, and each rule of Kueue's validation refused
at the file and JSON path of the fault.

Expected model objects are written out by hand from the manifests in tests/data/kueue
(``handmade-*``: a GPU platform with flavors h100/a100, two teams' ClusterQueues in a
cohort; ``site-*``: byte-exact copies of Kueue's own examples, each with a ``.src``).
Amounts are Kueue's accounting units: cpu millicores, memory bytes, others counts.
"""
from __future__ import annotations

import copy
import datetime
import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from placer.adapters.kueue.queues import FAIR_SHARING_STRATEGIES
from placer.exceptions import InvalidInputError
from placer.limits import MAX_QUANTITY
from placer.model import MigRequest, Taint, Toleration
from placer.queues import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    load_queues,
    load_workloads,
    read_kueue,
)

DATA = Path(__file__).parent / "data" / "kueue"
PLATFORM_V1BETA2 = DATA / "handmade-gpu-platform-v1beta2.yaml"
PLATFORM_V1BETA1 = DATA / "handmade-gpu-platform-v1beta1-list.yaml"
WORKLOADS_V1BETA2 = DATA / "handmade-workloads-v1beta2.yaml"
WORKLOADS_V1BETA1 = DATA / "handmade-workloads-v1beta1-list.json"
JOBS = DATA / "handmade-jobs.yaml"
GI = 1 << 30
MI = 1 << 20
GPU = "nvidia.com/gpu"
GPU_TOLERATION = Toleration(key=GPU, operator="Exists", effect="NoSchedule")

# ----------------------------------------------------------------------------- the platform


def expected_platform() -> QueueConfig:
    """handmade-gpu-platform-v1beta2.yaml, worked out by hand."""
    h100 = ResourceFlavor(
        name="h100",
        node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "cloud.example.com/topology-block": "block-a"},
        tolerations=(GPU_TOLERATION,),
        topology_name="gpu-topology",
        node_taints=(Taint(key=GPU, value="present", effect="NoSchedule"),),
    )
    a100 = ResourceFlavor(name="a100", node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                          tolerations=(GPU_TOLERATION,))
    team_a = ClusterQueue(
        name="team-a",
        cohort="ml-platform",
        resource_groups=(ResourceGroup(
            covered_resources=("cpu", "memory", GPU),
            flavors=(
                FlavorQuotas("h100", {"cpu": ResourceQuota(96_000, borrowing_limit=32_000),
                                      "memory": ResourceQuota(1536 * GI),
                                      GPU: ResourceQuota(16, borrowing_limit=8, lending_limit=4)}),
                FlavorQuotas("a100", {"cpu": ResourceQuota(500), "memory": ResourceQuota(GI // 2),
                                      GPU: ResourceQuota(8)}),
            ),
        ),),
        queueing_strategy="BestEffortFIFO",
        preemption=ClusterQueuePreemption("LowerPriority", "Any", "LowerPriority", 100),
        flavor_fungibility=FlavorFungibility("TryNextFlavor", "MayStopSearch"),
        fair_weight=0.5,
    )
    team_b = ClusterQueue(
        name="team-b",
        cohort="ml-platform",
        resource_groups=(
            ResourceGroup((GPU,), (FlavorQuotas("a100", {GPU: ResourceQuota(8, lending_limit=0)}),)),
            ResourceGroup(("cpu", "memory"), (FlavorQuotas("cpu-only", {"cpu": ResourceQuota(64_000),
                                                                        "memory": ResourceQuota(256 * GI)}),)),
        ),
        queueing_strategy="StrictFIFO",
    )
    return QueueConfig(
        flavors={"h100": h100, "a100": a100, "cpu-only": ResourceFlavor(name="cpu-only")},
        cluster_queues={"team-a": team_a, "team-b": team_b},
        cohorts={
            "org": Cohort(name="org", fair_weight=2.0),
            "ml-platform": Cohort(name="ml-platform", parent="org", resource_groups=(
                ResourceGroup((GPU,), (FlavorQuotas("a100", {GPU: ResourceQuota(8, lending_limit=16)}),)),
            )),
        },
        local_queues={"team-a/training": LocalQueue("team-a", "training", "team-a"),
                      "team-b/inference": LocalQueue("team-b", "inference", "team-b")},
        fair_sharing=True,
        preemption_strategies=("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
    )


def test_v1beta2_platform_reads_as_worked_out_by_hand() -> None:
    queues, workloads, notes = read_kueue(PLATFORM_V1BETA2)
    assert queues == expected_platform()
    assert workloads == []
    # team-b's namespaceSelector selects by label, which placer cannot check.
    assert len(notes) == 1 and "namespaceSelector is not checked" in notes[0]
    assert notes[0].startswith(f"{PLATFORM_V1BETA2}:") and "spec.namespaceSelector" in notes[0]


def test_v1beta1_list_is_the_same_platform() -> None:
    # cohort (not cohortName), whenCanPreempt Preempt (v1beta1's MayStopSearch), a v1beta1
    # Configuration with enable: true and Kueue's default strategies, all in one List.
    assert load_queues(PLATFORM_V1BETA1) == expected_platform()


def test_json_and_parsed_objects_read_alike(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(PLATFORM_V1BETA2.read_text(encoding="utf-8")))
    as_json = tmp_path / "platform.json"
    as_json.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}), encoding="utf-8")
    assert load_queues(as_json) == expected_platform()
    assert load_queues(docs) == expected_platform()
    assert load_queues([{"apiVersion": "v1", "kind": "List", "items": docs}]) == expected_platform()


def test_exports_from_placer_queues() -> None:
    import placer.queues as q

    assert {"load_queues", "load_workloads", "read_kueue"} <= set(q.__all__)


# ----------------------------------------------------------------------------- workloads


def by_key(workloads: list) -> dict:
    out = {w.key: w for w in workloads}
    assert len(out) == len(workloads)
    return out


def test_v1beta2_workloads() -> None:
    queues, workloads, notes = read_kueue([PLATFORM_V1BETA2, WORKLOADS_V1BETA2])
    got = by_key(workloads)
    # old-sweep is Finished: left out; preempted-batch (Evicted, admission cleared) is pending again.
    assert list(got) == ["team-a/llm-finetune", "team-a/nightly-eval", "team-b/preempted-batch"]
    pending = got["team-a/llm-finetune"]
    assert (pending.queue, pending.cluster_queue, pending.priority) == ("training", "team-a", 100)
    assert pending.created == 1740819600.0  # 2025-03-01T09:00:00Z
    assert pending.admission is None
    launcher, workers = pending.pod_sets
    assert (launcher.name, launcher.count, dict(launcher.requests)) == ("launcher", 1, {"cpu": 500, "memory": GI})
    assert (workers.name, workers.count) == ("workers", 4)
    assert dict(workers.requests) == {"cpu": 16_000, "memory": 200 * GI, GPU: 8}
    assert workers.required_level == "cloud.example.com/topology-block" and workers.preferred_level is None
    pod = workers.pod
    assert pod is not None and (pod.gpus, pod.cpu_milli, pod.memory_mib) == (8, 16_000, 200 * 1024)
    assert dict(pod.node_selector) == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod.tolerations == (GPU_TOLERATION,) and pod.priority == 100

    admitted = got["team-a/nightly-eval"]
    assert admitted.admission == Admission("team-a", {"main": {"cpu": "h100", "memory": "h100", GPU: "h100"}},
                                           reserved_at=utc(2025, 3, 1, 7, 30, 5))  # QuotaReserved's time
    assert admitted.cluster_queue == "team-a" and admitted.priority == 50
    assert dict(admitted.pod_sets[0].requests) == {"cpu": 4000, "memory": 32 * GI, GPU: 2}

    requeued = got["team-b/preempted-batch"]
    # A Workload's priority is its spec.priority: the template's priorityClassName is not consulted.
    assert (requeued.priority, requeued.cluster_queue, requeued.pod_sets[0].count) == (0, "team-b", 3)
    assert requeued.pod_sets[0].name == "main"
    assert any("old-sweep left out: finished" in n for n in notes)
    assert any("preempted-batch was evicted and is pending again" in n for n in notes)


def test_v1beta1_workloads_json_list() -> None:
    queues, workloads, notes = read_kueue([PLATFORM_V1BETA2, WORKLOADS_V1BETA1])
    got = by_key(workloads)
    canary = got["team-b/job-serve-canary-7f2c1"]
    # containers 1 cpu + sidecar 100m = 1.1 < init peak 2; memory 16Gi + 128Mi > init 8Gi.
    assert dict(canary.pod_sets[0].requests) == {"cpu": 2000, "memory": 16 * GI + 128 * MI, GPU: 1}
    assert canary.priority == 1000 and canary.admission == Admission(
        "team-b", {"main": {GPU: "a100", "cpu": "cpu-only", "memory": "cpu-only"}}, reserved_at=utc(2025, 3, 1, 10, 0, 2))
    embeddings = got["team-b/job-embeddings-2b9d0"]
    # priorityClassName batch-low from scheduling.k8s.io (value 10), no spec.priority.
    assert (embeddings.priority, embeddings.cluster_queue) == (10, "team-b")
    sweep = got["team-a/jobset-sweep-91aa"]
    # Partially admitted: 2 of 4 pods hold quota, so the pod set is taken at 2.
    assert sweep.pod_sets[0].count == 2 and dict(sweep.pod_sets[0].requests) == {"cpu": 2000, GPU: 1}
    wl_file = str(WORKLOADS_V1BETA1)
    assert f"{wl_file}: items[2].status.admission.podSetAssignments[0].count: pod set trial admitted with 2" in "\n".join(notes)
    assert any(n.startswith(f"{wl_file}: items[2].spec.podSets[0].minCount") for n in notes)


def test_labelled_jobs_become_workloads() -> None:
    queues, workloads, notes = read_kueue([PLATFORM_V1BETA2, JOBS])
    got = by_key(workloads)
    assert list(got) == ["team-a/bert-pretrain", "team-a/llama-70b", "team-b/notebook", "team-b/vllm-0", "team-b/vllm-1"]
    bert = got["team-a/bert-pretrain"]
    assert (bert.queue, bert.cluster_queue, bert.priority, bert.created) == ("training", "team-a", 100, 1740826800.0)
    (main,) = bert.pod_sets
    assert (main.name, main.count, dict(main.requests)) == ("main", 4, {"cpu": 8000, "memory": 64 * GI, GPU: 2})
    llama = got["team-a/llama-70b"]
    driver, worker = llama.pod_sets
    assert (driver.name, driver.count) == ("driver", 1)
    assert (worker.name, worker.count) == ("workers", 8)  # 2 replicas x parallelism 4
    assert worker.preferred_level == "cloud.example.com/topology-block" and worker.required_level is None
    assert llama.priority == 10  # the first template naming a PriorityClass: batch-low
    notebook = got["team-b/notebook"]
    assert dict(notebook.pod_sets[0].requests) == {"cpu": 2000, "memory": 4 * GI, "nvidia.com/mig-1g.10gb": 1}
    assert notebook.pod_sets[0].pod.mig == MigRequest(profile="1g.10gb", count=1)
    for i in range(2):  # a Deployment: one Workload per pod, each at its WorkloadPriorityClass
        vllm = got[f"team-b/vllm-{i}"]
        assert (vllm.priority, vllm.pod_sets[0].count, vllm.cluster_queue) == (1000, 1, "team-b")
    assert any("Job team-a/unmanaged left out: no kueue.x-k8s.io/queue-name label" in n for n in notes)


def test_kueue_site_examples() -> None:
    queues, workloads, notes = read_kueue([
        DATA / "site-admin-single-clusterqueue-setup.yaml", DATA / "site-jobs-sample-job.yaml",
        DATA / "site-jobs-sample-jobset.yaml", DATA / "site-pods-kueue-kueue-pod-group.yaml",
    ])
    cq = queues.cluster_queues["cluster-queue"]
    assert cq.resource_groups == (ResourceGroup(("cpu", "memory"), (
        FlavorQuotas("default-flavor", {"cpu": ResourceQuota(9000), "memory": ResourceQuota(36 * GI)}),)),)
    assert queues.flavors == {"default-flavor": ResourceFlavor(name="default-flavor")}
    got = by_key(workloads)
    job = got["default/sample-job"]  # generateName sample-job-
    assert (job.cluster_queue, job.pod_sets[0].count, dict(job.pod_sets[0].requests)) == (
        "cluster-queue", 3, {"cpu": 1000, "memory": 200 * MI})
    jobset = got["default/sleep-job"]
    assert [(p.name, p.count, p.requests["cpu"]) for p in jobset.pod_sets] == [("workers", 1, 1000), ("driver", 1, 2000)]
    group = got["default/sample-group"]  # two pods alike: one pod set of 2
    assert [(p.name, p.count, dict(p.requests)) for p in group.pod_sets] == [("main", 2, {"cpu": 3000})]
    assert notes == ()


def test_site_flavor_taints_and_shared_quota() -> None:
    taints = load_queues(DATA / "site-admin-resource-flavor-taints.yaml")
    assert taints.flavors["spot"] == ResourceFlavor(
        name="spot", node_labels={"instance-type": "spot"},
        node_taints=(Taint(key="spot", value="true", effect="NoSchedule"),))
    shared = load_queues(DATA / "site-admin-shared-quota-setup.yaml")
    groups = shared.cluster_queues["team-cluster-queue"].resource_groups
    assert [g.covered_resources for g in groups] == [("cpu",), ("cpu_credits",)]
    assert groups[1].flavors[0].resources["cpu_credits"] == ResourceQuota(14)


def test_load_workloads_resolves_through_the_config_given() -> None:
    config = QueueConfig(local_queues={"team-a/training": LocalQueue("team-a", "training", "elsewhere")})
    got = by_key(load_workloads(WORKLOADS_V1BETA2, config=config))
    assert got["team-a/llm-finetune"].cluster_queue == "elsewhere"
    # Admitted ones keep their admission's ClusterQueue.
    assert got["team-a/nightly-eval"].cluster_queue == "team-a"
    # Without a config and without LocalQueues among the inputs, nothing is resolved.
    assert by_key(load_workloads(WORKLOADS_V1BETA2))["team-a/llm-finetune"].cluster_queue is None


# ----------------------------------------------------------------------------- notes


def cq(name: str = "cq", **spec: Any) -> dict[str, Any]:
    spec.setdefault("namespaceSelector", {})
    spec.setdefault("resourceGroups", [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}])
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def rf(name: str = "a100", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, version: str = "v1beta2", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def lq(name: str = "q", namespace: str = "ns", cluster_queue: str = "cq") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue}}


def pod_template(**resources: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": resources or {"cpu": "1"}}}]}}


def workload(name: str = "w", version: str = "v1beta2", **spec: Any) -> dict[str, Any]:
    spec.setdefault("queueName", "q")
    spec.setdefault("podSets", [{"name": "main", "count": 1, "template": pod_template()}])
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def test_notes_for_what_is_not_modelled() -> None:
    no_selector = cq("bare")
    del no_selector["spec"]["namespaceSelector"]
    queues, _, notes = read_kueue([no_selector, lq(cluster_queue="missing")])
    text = "\n".join(notes)
    assert "objects[0]: spec: ClusterQueue bare has no namespaceSelector: Kueue admits no workload" in text
    # The flavor no ResourceFlavor defines is taken without node labels.
    assert queues.flavors == {"a100": ResourceFlavor(name="a100")}
    assert "ResourceFlavor a100 is not among the inputs" in text
    assert "objects[1]: LocalQueue ns/q points to ClusterQueue missing" in text


def test_implicit_cohorts_are_made() -> None:
    queues = load_queues([rf(), cq(cohortName="eng"), cohort("child", parentName="root")])
    assert queues.cohorts == {"child": Cohort("child", parent="root"), "eng": Cohort("eng"), "root": Cohort("root")}


def test_v1alpha1_cohort_takes_parent() -> None:
    assert load_queues([cohort("c", "v1alpha1", parent="p")]).cohorts["c"] == Cohort("c", parent="p")


def test_workload_in_an_unknown_local_queue_is_noted() -> None:
    _, workloads, notes = read_kueue([rf(), cq(), lq(), workload(queueName="other")])
    assert workloads[0].cluster_queue is None
    assert any("LocalQueue ns/other is not among the inputs" in n for n in notes)


def test_job_whose_workload_is_given_is_left_out() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"template": pod_template()}}
    wl = workload("job-train-1a2b3")
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u"}]
    _, workloads, notes = read_kueue([rf(), cq(), lq(), job, wl])
    assert [w.key for w in workloads] == ["ns/job-train-1a2b3"]
    assert any("Job ns/train left out: its Workload is given" in n for n in notes)


def test_running_job_and_pod_are_left_out() -> None:
    labels = {"kueue.x-k8s.io/queue-name": "q"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "running", "namespace": "ns", "labels": labels},
           "spec": {"suspend": False, "template": pod_template()}, "status": {"active": 1}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": labels},
           "spec": pod_template()["spec"], "status": {"phase": "Running"}}
    _, workloads, notes = read_kueue([job, pod])
    assert workloads == []
    assert any("Job ns/running left out: running" in n for n in notes)
    assert any("Pod ns/p left out: the pod is not waiting (Running)" in n for n in notes)


def test_evicted_while_admitted_and_deactivated_are_left_out() -> None:
    evicted = workload("evicted")
    evicted["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {}}]},
                         "conditions": [{"type": "Evicted", "status": "True"}]}
    inactive = workload("inactive", active=False)
    _, workloads, notes = read_kueue([rf(), cq(), lq(), evicted, inactive])
    assert workloads == []
    assert any("ns/evicted left out: being evicted" in n for n in notes)
    assert any("ns/inactive left out: deactivated" in n for n in notes)


# ----------------------------------------------------------------------------- refusals


def refused(objects: list[dict[str, Any]], where: str, what: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        read_kueue(objects)
    assert info.value.where == where, info.value
    assert what in info.value.what, info.value


def groups_of(n_groups: int, flavors: int, covered: int) -> list[dict[str, Any]]:
    out = []
    for g in range(n_groups):
        names = [f"r{g}-{c}.example.com/x" for c in range(covered)]
        out.append({"coveredResources": names, "flavors": [
            {"name": f"f{g}-{k}", "resources": [{"name": r, "nominalQuota": 1} for r in names]}
            for k in range(flavors)]})
    return out


def mutate(obj: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    change(obj)
    return obj


def quota(obj: dict[str, Any], **fields: Any) -> None:
    obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update(fields)


GPU_AND_CPU = [{"coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [
    {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}, {"name": "cpu", "nominalQuota": 8}]}]}]
Q0 = "spec.resourceGroups[0].flavors[0].resources[0]"

CLUSTER_QUEUE_CASES = [
    ("name not DNS-1123", cq("Team_A"), "metadata.name", "a ClusterQueue name must be a DNS-1123 subdomain"),
    ("control character", cq("team\x07a"), "metadata.name", "DNS-1123"),
    ("cohort not DNS-1123", cq(cohortName="ML"), "spec.cohortName", "a cohort name"),
    ("v1beta1 field in v1beta2", cq(cohort="ml"), "spec.cohort", "in v1beta2 it is cohortName"),
    ("17 resource groups", cq(resourceGroups=groups_of(17, 1, 1)), "spec.resourceGroups", "at most 16 resource groups"),
    ("65 covered resources", cq(resourceGroups=groups_of(1, 1, 65)), "spec.resourceGroups[0].coveredResources",
     "expected 1 to 64 covered resources, got 65"),
    ("no covered resources", cq(resourceGroups=[{"coveredResources": [], "flavors": []}]),
     "spec.resourceGroups[0].coveredResources", "expected 1 to 64 covered resources, got 0"),
    ("65 flavors in a group", cq(resourceGroups=groups_of(1, 65, 1)), "spec.resourceGroups[0].flavors",
     "expected 1 to 64 flavors, got 65"),
    ("257 flavors in all", cq(resourceGroups=groups_of(5, 52, 1)), "spec.resourceGroups",
     "260 flavors across all resource groups; at most 256"),
    ("257 covered resources in all", cq(resourceGroups=groups_of(5, 1, 52)), "spec.resourceGroups",
     "260 covered resources across all resource groups; at most 256"),
    ("513 flavor-resource pairs", cq(resourceGroups=groups_of(1, 57, 9)), "spec.resourceGroups[0]",
     "513 flavor-resource combinations"),
    ("flavor misses a resource", mutate(cq(resourceGroups=GPU_AND_CPU),
                                        lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()),
     "spec.resourceGroups[0].flavors[0].resources", "1 resource(s) for 2 covered resource(s)"),
    ("resources out of order", mutate(cq(resourceGroups=GPU_AND_CPU),
                                      lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"].reverse()),
     f"{Q0}.name", "expected nvidia.com/gpu (coveredResources[0]), got cpu"),
    ("resource in two groups", cq(resourceGroups=[*GPU_AND_CPU, {"coveredResources": ["cpu"], "flavors": [
        {"name": "cpu-only", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]),
     "spec.resourceGroups[1].coveredResources[0]", "resource cpu is covered twice (also by resourceGroups[0])"),
    ("flavor in two groups", cq(resourceGroups=[*GPU_AND_CPU, {"coveredResources": ["memory"], "flavors": [
        {"name": "a100", "resources": [{"name": "memory", "nominalQuota": 1}]}]}]),
     "spec.resourceGroups[1].flavors[0].name", "flavor a100 is listed twice (also in resourceGroups[0])"),
    ("borrowingLimit without cohort", mutate(cq(), lambda o: quota(o, borrowingLimit=2)), f"{Q0}.borrowingLimit",
     "a borrowingLimit needs a cohort"),
    ("lendingLimit without cohort", mutate(cq(), lambda o: quota(o, lendingLimit=2)), f"{Q0}.lendingLimit",
     "a lendingLimit needs a cohort"),
    ("lendingLimit over nominal", mutate(cq(cohortName="c"), lambda o: quota(o, lendingLimit=9)), f"{Q0}.lendingLimit",
     "lendingLimit 9 exceeds nominalQuota 8"),
    ("negative nominal", mutate(cq(), lambda o: quota(o, nominalQuota="-1")), f"{Q0}.nominalQuota",
     "must be greater than or equal to 0"),
    ("negative borrowingLimit", mutate(cq(cohortName="c"), lambda o: quota(o, borrowingLimit=-2)),
     f"{Q0}.borrowingLimit", "must be greater than or equal to 0"),
    ("no nominal", mutate(cq(), lambda o: quota(o, nominalQuota=None)), f"{Q0}.nominalQuota", "expected a quantity"),
    ("not a quantity", mutate(cq(), lambda o: quota(o, nominalQuota="8 GPUs")), f"{Q0}.nominalQuota",
     "expected a Kubernetes quantity"),
    ("huge quota", mutate(cq(), lambda o: quota(o, nominalQuota="9Pi")), f"{Q0}.nominalQuota",
     f"over placer's limit of {MAX_QUANTITY}"),
    ("bad resource name", cq(resourceGroups=[{"coveredResources": ["gpu!"], "flavors": []}]),
     "spec.resourceGroups[0].coveredResources[0]", "a resource name must be a qualified name"),
    ("queueingStrategy", cq(queueingStrategy="FIFO"), "spec.queueingStrategy", "expected StrictFIFO or BestEffortFIFO"),
    ("withinClusterQueue Any", cq(preemption={"withinClusterQueue": "Any"}), "spec.preemption.withinClusterQueue",
     "expected one of Never, LowerPriority, LowerOrNewerEqualPriority, got 'Any'"),
    ("reclaimWithinCohort", cq(preemption={"reclaimWithinCohort": "Sometimes"}), "spec.preemption.reclaimWithinCohort",
     "expected one of Never, LowerPriority, Any"),
    ("borrowWithinCohort policy", cq(preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "Any"}}),
     "spec.preemption.borrowWithinCohort.policy", "expected Never or LowerPriority"),
    ("maxPriorityThreshold", cq(preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {
        "policy": "LowerPriority", "maxPriorityThreshold": 2**31}}),
     "spec.preemption.borrowWithinCohort.maxPriorityThreshold", "expected a priority (an int32)"),
    ("reclaim Never with borrowWithinCohort", cq(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
     "spec.preemption", "needs reclaimWithinCohort other than Never"),
    ("v1beta1 fungibility in v1beta2", cq(flavorFungibility={"whenCanBorrow": "Borrow"}),
     "spec.flavorFungibility.whenCanBorrow", "expected MayStopSearch or TryNextFlavor, got 'Borrow'"),
    ("preference without TryNextFlavor", cq(flavorFungibility={"preference": "BorrowingOverPreemption"}),
     "spec.flavorFungibility.preference", "requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"),
    ("negative weight", cq(fairSharing={"weight": "-1"}), "spec.fairSharing.weight", "must be greater than or equal to 0"),
    ("collapsing weight", cq(fairSharing={"weight": "1n"}), "spec.fairSharing.weight", "more than 1e-9"),
    ("stopPolicy value", cq(stopPolicy="Pause"), "spec.stopPolicy", "expected one of None, Hold, HoldAndDrain"),
    ("stopped queue", cq(stopPolicy="Hold"), "spec.stopPolicy", "is stopped (Hold): it admits nothing"),
]


@pytest.mark.parametrize("obj,path,what", [c[1:] for c in CLUSTER_QUEUE_CASES], ids=[c[0] for c in CLUSTER_QUEUE_CASES])
def test_cluster_queue_refusals(obj: dict[str, Any], path: str, what: str) -> None:
    refused([obj], f"objects[0]: {path}", what)


@pytest.mark.parametrize("n_groups, flavors, covered", [(16, 1, 1), (1, 1, 64), (4, 64, 1), (1, 64, 8)])
def test_cluster_queue_limits_at_the_boundary_are_accepted(n_groups: int, flavors: int, covered: int) -> None:
    # 16 groups, 64 covered resources and 64 flavors in a group, 256 in all, 512 pairs.
    groups = load_queues([cq(resourceGroups=groups_of(n_groups, flavors, covered))]).cluster_queues["cq"].resource_groups
    assert [(len(g.flavors), len(g.covered_resources)) for g in groups] == [(flavors, covered)] * n_groups
    assert {len(f.resources) for g in groups for f in g.flavors} == {covered}
    # The totals across groups are the ClusterQueue webhook's: a Cohort has none.
    load_queues([cohort("c", resourceGroups=groups_of(5, 52, 1))])
    load_queues([cq(cohortName="c", resourceGroups=[{"coveredResources": ["cpu"], "flavors": [
        {"name": "x", "resources": [{"name": "cpu", "nominalQuota": 2, "lendingLimit": 2, "borrowingLimit": 0}]}]}])])


def test_v1beta1_fungibility_converts_like_kueue() -> None:
    obj = cq(flavorFungibility={"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"})
    obj["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    assert load_queues([obj]).cluster_queues["cq"].flavor_fungibility == FlavorFungibility("MayStopSearch", "MayStopSearch")


OTHER_CASES = [
    ("cohort limit without parent", [cohort("c", resourceGroups=[{"coveredResources": ["cpu"], "flavors": [
        {"name": "x", "resources": [{"name": "cpu", "nominalQuota": 1, "lendingLimit": 1}]}]}])],
     f"objects[0]: {Q0}.lendingLimit", "a lendingLimit needs a parent"),
    ("cohort cycle", [cohort("a", parentName="b"), cohort("b", parentName="c"), cohort("c", parentName="a")],
     "objects[0]: spec.parentName", "cohort parents form a cycle: a -> b -> c -> a"),
    ("cohort its own parent", [cohort("a", parentName="a")], "objects[0]: spec.parentName", "a -> a"),
    ("v1alpha1 field in v1beta2 cohort", [cohort("a", parent="b")], "objects[0]: spec.parent", "it is parentName"),
    ("two ClusterQueues of one name", [cq(), cq()], "objects[1]: metadata.name",
     "ClusterQueue cq is given twice (first at objects[0])"),
    ("two flavors of one name", [rf(), rf()], "objects[1]: metadata.name", "ResourceFlavor a100 is given twice"),
    ("two LocalQueues of one name", [lq(), lq()], "objects[1]: metadata.name", "LocalQueue ns/q is given twice"),
    ("9 node labels", [rf(nodeLabels={f"l{i}": "v" for i in range(9)})], "objects[0]: spec.nodeLabels",
     "at most 8 nodeLabels, got 9"),
    ("bad label value", [rf(nodeLabels={"gpu": "A100 80GB"})], "objects[0]: spec.nodeLabels.gpu", "a label value"),
    ("taint without effect", [rf(nodeTaints=[{"key": "spot"}])], "objects[0]: spec.nodeTaints[0].effect",
     "expected one of NoSchedule, PreferNoSchedule, NoExecute, got nothing"),
    ("taint twice", [rf(nodeTaints=[{"key": "a", "effect": "NoSchedule"}, {"key": "a", "value": "x",
                                                                           "effect": "NoSchedule"}])],
     "objects[0]: spec.nodeTaints[1]", "taint a:NoSchedule given twice"),
    ("toleration Exists with value", [rf(tolerations=[{"key": "a", "operator": "Exists", "value": "x"}])],
     "objects[0]: spec.tolerations[0].value", "operator Exists takes no value"),
    ("tolerationSeconds without NoExecute", [rf(tolerations=[{"key": "a", "operator": "Exists",
                                                              "tolerationSeconds": 30}])],
     "objects[0]: spec.tolerations[0].tolerationSeconds", "needs effect NoExecute"),
    ("topologyName without nodeLabels", [rf(topologyName="default")], "objects[0]: spec.topologyName",
     "needs at least one nodeLabel"),
    ("LocalQueue without clusterQueue", [mutate(lq(), lambda o: o["spec"].clear())],
     "objects[0]: spec.clusterQueue", "expected a non-empty string, got nothing"),
    ("namespace not a DNS label", [lq(namespace="Team-A")], "objects[0]: metadata.namespace",
     "a namespace must be a DNS-1123 label"),
    ("stopped LocalQueue", [mutate(lq(), lambda o: o["spec"].update(stopPolicy="HoldAndDrain"))],
     "objects[0]: spec.stopPolicy", "is stopped (HoldAndDrain)"),
    ("unknown Kueue version", [mutate(cq(), lambda o: o.update(apiVersion="kueue.x-k8s.io/v1"))],
     "objects[0]: apiVersion", "expected kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2"),
    ("v1alpha1 ClusterQueue", [mutate(cq(), lambda o: o.update(apiVersion="kueue.x-k8s.io/v1alpha1"))],
     "objects[0]: apiVersion", "expected kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2"),
    ("unknown Kueue kind", [mutate(cq(), lambda o: o.update(kind="ClusterQueueSet"))], "objects[0]: kind",
     "got 'ClusterQueueSet'"),
    ("a ConfigMap", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}], "objects[0]: kind",
     "expected Kueue objects"),
    ("no kind", [{"apiVersion": "v1"}], "objects[0]: kind", "expected a Kubernetes object with a kind"),
]


@pytest.mark.parametrize("objects,where,what", [c[1:] for c in OTHER_CASES], ids=[c[0] for c in OTHER_CASES])
def test_flavor_cohort_local_queue_and_kind_refusals(objects: list[dict[str, Any]], where: str, what: str) -> None:
    refused(objects, where, what)


def config(version: str = "v1beta1", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **fields}


@pytest.mark.parametrize("strategies", [list(s) for s in FAIR_SHARING_STRATEGIES])
def test_configuration_strategies(strategies: list[str]) -> None:
    got = load_queues([config(fairSharing={"enable": True, "preemptionStrategies": strategies})])
    assert got.fair_sharing and got.preemption_strategies == tuple(strategies)
    got = load_queues([config("v1beta2", fairSharing={"preemptionStrategies": strategies})])
    assert got.fair_sharing and got.preemption_strategies == tuple(strategies)


def test_configuration_inside_kueues_config_map(tmp_path: Path) -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kueue-manager-config\n  namespace: kueue-system\n"
            "data:\n  controller_manager_config.yaml: |\n    apiVersion: config.kueue.x-k8s.io/v1beta1\n"
            "    kind: Configuration\n    health:\n      healthProbeBindAddress: :8081\n"
            "    fairSharing:\n      enable: true\n      preemptionStrategies: [STRATEGIES]\n")
    good = tmp_path / "kueue-manager-config.yaml"
    good.write_text(text.replace("STRATEGIES", "LessThanInitialShare"), encoding="utf-8")
    got = load_queues(good)
    assert got.fair_sharing and got.preemption_strategies == ("LessThanInitialShare",)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("STRATEGIES", "LessThanInitialShare, LessThanOrEqualToFinalShare"), encoding="utf-8")
    with pytest.raises(InvalidInputError) as info:
        load_queues(bad)
    assert info.value.where == f"{bad}:7 (data.controller_manager_config.yaml): fairSharing.preemptionStrategies"
    assert info.value.what.endswith("got [LessThanInitialShare, LessThanOrEqualToFinalShare]")
    other = tmp_path / "other.yaml"
    other.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="expected Kueue objects"):
        load_queues(other)


def test_configuration_off() -> None:
    assert not load_queues([config(fairSharing={"enable": False})]).fair_sharing
    assert not load_queues([config()]).fair_sharing
    assert not load_queues([cq()]).fair_sharing


CONFIG_CASES = [
    ("strategies reversed", [config(fairSharing={"enable": True, "preemptionStrategies": [
        "LessThanInitialShare", "LessThanOrEqualToFinalShare"]})], "objects[0]: fairSharing.preemptionStrategies",
     "expected one of the lists"),
    ("enable in v1beta2", [config("v1beta2", fairSharing={"enable": False})], "objects[0]: fairSharing.enable",
     "v1beta2 has no fairSharing.enable"),
    ("v1beta2 without strategies", [config("v1beta2", fairSharing={})], "objects[0]: fairSharing.preemptionStrategies",
     "must be given"),
    ("enable not a bool", [config(fairSharing={"enable": "yes"})], "objects[0]: fairSharing.enable",
     "expected true or false"),
    ("two Configurations", [config(), config()], "objects[1]: kind", "a second Kueue Configuration"),
    ("other config kind", [{"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Settings"}], "objects[0]: kind",
     "expected Configuration"),
]


@pytest.mark.parametrize("objects,where,what", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_configuration_refusals(objects: list[dict[str, Any]], where: str, what: str) -> None:
    refused(objects, where, what)


def podsets(*sets: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": s.get("name", "main"), "count": s.get("count", 1), "template": s.get("template", pod_template()),
             **{k: v for k, v in s.items() if k not in ("name", "count", "template")}} for s in sets]


def admitted(obj: dict[str, Any], **admission: Any) -> dict[str, Any]:
    obj["status"] = {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {}}],
                                   **admission}}
    return obj


WORKLOAD_CASES = [
    ("no pod sets", workload(podSets=[]), "spec.podSets", "expected 1 to 18 pod sets, got 0"),
    ("19 pod sets", workload(podSets=podsets(*({"name": f"p{i}"} for i in range(19)))), "spec.podSets",
     "expected 1 to 18 pod sets, got 19"),
    ("two pod sets of one name", workload(podSets=podsets({"name": "w"}, {"name": "w"})), "spec.podSets[1].name",
     "pod set w is given twice"),
    ("negative count", workload(podSets=podsets({"count": -1})), "spec.podSets[0].count", "expected an integer 0.."),
    ("pod set name", workload(podSets=podsets({"name": "Main"})), "spec.podSets[0].name", "a pod set name must be a "
                                                                                          "DNS-1123 label"),
    ("no template", mutate(workload(), lambda o: o["spec"]["podSets"][0].pop("template")), "spec.podSets[0].template",
     "expected a mapping, got nothing"),
    ("pods requested", workload(podSets=podsets({"template": pod_template(pods="1")})),
     "spec.podSets[0].template.spec.containers[0].resources.requests.pods", "reserved for Kueue"),
    ("negative request", workload(podSets=podsets({"template": pod_template(cpu="-1")})),
     "spec.podSets[0].template.spec.containers[0].resources.requests.cpu", "expected a quantity >= 0"),
    ("too many GPUs", workload(podSets=podsets({"template": pod_template(**{GPU: "65"})})),
     "spec.podSets[0].template.spec", "over placer's limit of 64"),
    ("two MIG profiles", workload(podSets=podsets({"template": pod_template(
        **{"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-2g.20gb": "1"})})), "spec.podSets[0].template.spec",
     "placer takes one profile per pod"),
    ("required and preferred", workload(podSets=podsets({"topologyRequest": {"required": "rack", "preferred": "block"}})),
     "spec.podSets[0].topologyRequest.preferred", "a required or a preferred topology level, not both"),
    ("request and annotation disagree", workload(podSets=podsets({"topologyRequest": {"required": "rack"}, "template": {
        "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": "block"}}, **pod_template()}})),
     "spec.podSets[0].topologyRequest.required", "disagrees with the annotation's block"),
    ("queueName", workload(queueName="Q"), "spec.queueName", "a LocalQueue name"),
    ("v1beta1 priority field in v1beta2", workload(priorityClassName="high"), "spec.priorityClassName",
     "in v1beta2 it is priorityClassRef"),
    ("v1beta2 priority field in v1beta1", workload(version="v1beta1", priorityClassRef={"name": "high"}),
     "spec.priorityClassRef", "in v1beta1 it is priorityClassName"),
    ("priorityClassRef group and kind", workload(priorityClassRef={
        "group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}),
     "spec.priorityClassRef.kind", "only the PriorityClass kind is allowed for the scheduling.k8s.io group"),
    ("priorityClassSource", workload(version="v1beta1", priorityClassName="high", priorityClassSource="kueue"),
     "spec.priorityClassSource", "expected one of kueue.x-k8s.io/workloadpriorityclass"),
    ("priority out of int32", workload(priority=2**31), "spec.priority", "expected an integer"),
    ("admission of an unknown pod set", admitted(workload(), podSetAssignments=[{"name": "other", "flavors": {}}]),
     "status.admission.podSetAssignments[0].name", "no pod set 'other' in spec.podSets (main)"),
    ("admission count over count", admitted(workload(), podSetAssignments=[{"name": "main", "count": 2, "flavors": {}}]),
     "status.admission.podSetAssignments[0].count", "admits 2 pods of pod set main, which has 1"),
    ("admission flavor name", admitted(workload(), podSetAssignments=[{"name": "main", "flavors": {"cpu": "A100"}}]),
     "status.admission.podSetAssignments[0].flavors.cpu", "a ResourceFlavor name"),
    ("QuotaReserved without admission", mutate(workload(), lambda o: o.update(status={"conditions": [
        {"type": "QuotaReserved", "status": "True"}]})), "status.admission",
     "must be set while the QuotaReserved condition is true"),
    ("creation time", mutate(workload(), lambda o: o["metadata"].update(creationTimestamp="yesterday")),
     "metadata.creationTimestamp", "expected an RFC 3339 time"),
    ("quota reservation time", mutate(admitted(workload()), lambda o: o["status"].update(conditions=[
        {"type": "Admitted", "status": "True"},
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "soon"}])),
     "status.conditions[1].lastTransitionTime", "expected an RFC 3339 time"),
]


def utc(*fields: int) -> float:
    return datetime.datetime(*fields, tzinfo=datetime.timezone.utc).timestamp()


def test_the_quota_reservation_time_orders_victims() -> None:
    obj = admitted(workload())
    obj["metadata"]["creationTimestamp"] = "2025-03-01T12:00:00Z"
    obj["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True",
                                    "lastTransitionTime": "2025-03-01T13:30:00Z"}]
    _, (w,), _ = read_kueue([rf(), cq(), obj])
    assert w.admission is not None and w.admission.reserved_at - w.created == 5400
    del obj["status"]["conditions"]
    _, (w,), _ = read_kueue([rf(), cq(), obj])
    assert w.admission is not None and w.admission.reserved_at is None


@pytest.mark.parametrize("obj,path,what", [c[1:] for c in WORKLOAD_CASES], ids=[c[0] for c in WORKLOAD_CASES])
def test_workload_refusals(obj: dict[str, Any], path: str, what: str) -> None:
    refused([obj], f"objects[0]: {path}", what)


def test_workload_refusals_that_need_other_objects() -> None:
    refused([workload(), workload()], "objects[1]", "workload ns/w is given twice (first at objects[0])")
    refused([rf(), cq(), admitted(workload(), clusterQueue="gone")], "objects[2]: status.admission.clusterQueue",
            "admitted to ClusterQueue gone, which is not among the inputs")
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "hi"}}
    refused([wpc], "objects[0]: value", "expected an integer, got nothing")
    refused([{**wpc, "value": 1}, {**wpc, "value": 2}], "objects[1]: metadata.name", "WorkloadPriorityClass hi is given twice")
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
        "name": "big", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"replicatedJobs": [
            {"name": f"r{i}", "template": {"spec": {"template": pod_template()}}} for i in range(19)]}}
    refused([jobset], "objects[0]: spec", "19 pod sets; a Kueue Workload has at most 18")


def test_priority_classes_resolve() -> None:
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
           "value": 7}
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 3}
    ref = workload("a", priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"})
    pod_ref = workload("b", priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"})
    given = workload("c", priority=11, priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                                         "name": "high"})
    v1 = workload("d", version="v1beta1", priorityClassName="high", priorityClassSource="scheduling.k8s.io/priorityclass")
    missing = workload("e", priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "nope"})
    _, workloads, notes = read_kueue([ref, pod_ref, given, v1, missing, wpc, pc])  # classes after their users
    assert [w.priority for w in workloads] == [7, 3, 11, 3, 0]
    assert any("objects[4]: spec.priorityClassRef.name: WorkloadPriorityClass nope is not among the inputs" in n
               for n in notes)


def test_pod_group_with_two_roles_and_missing_pods() -> None:
    def pod(name: str, cpu: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "q",
                                                        "kueue.x-k8s.io/pod-group-name": "g"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "4"}}, "spec": pod_template(cpu=cpu)["spec"]}

    _, workloads, notes = read_kueue([pod("lead", "1"), pod("w0", "2"), pod("w1", "2")])
    (group,) = workloads
    assert [(p.name, p.count, dict(p.requests)) for p in group.pod_sets] == [
        ("role-0", 1, {"cpu": 1000}), ("role-1", 2, {"cpu": 2000})]
    assert any("pod group ns/g has 3 of its 4 pods" in n for n in notes)


# ----------------------------------------------------------------------------- files: lines and paths


def test_yaml_fault_is_at_its_line(tmp_path: Path) -> None:
    text = PLATFORM_V1BETA2.read_text(encoding="utf-8").replace("nominalQuota: 1536Gi", "nominalQuota: -1536Gi")
    bad = tmp_path / "platform.yaml"
    bad.write_text(text, encoding="utf-8")
    line = text.splitlines().index("        nominalQuota: -1536Gi") + 1
    with pytest.raises(InvalidInputError) as info:
        load_queues(bad)
    assert info.value.where == f"{bad}:{line}"
    assert info.value.what.startswith("spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: must be greater")


def test_json_list_fault_names_the_item_path(tmp_path: Path) -> None:
    doc = json.loads(WORKLOADS_V1BETA1.read_text(encoding="utf-8"))
    doc["items"][1]["spec"]["podSets"][0]["count"] = -3
    bad = tmp_path / "workloads.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(InvalidInputError) as info:
        load_workloads(bad)
    assert info.value.where == f"{bad}: items[1].spec.podSets[0].count"


def test_multi_document_yaml_second_document(tmp_path: Path) -> None:
    bad = tmp_path / "two.yaml"
    bad.write_text(yaml.safe_dump(rf()) + "---\n" + yaml.safe_dump(mutate(cq(), lambda o: o["spec"].update(
        queueingStrategy="LIFO"))), encoding="utf-8")
    with pytest.raises(InvalidInputError) as info:
        load_queues(bad)
    line = bad.read_text(encoding="utf-8").splitlines().index("  queueingStrategy: LIFO") + 1
    assert info.value.where == f"{bad}:{line}" and info.value.what.startswith("spec.queueingStrategy:")


def test_not_a_source() -> None:
    with pytest.raises(TypeError):
        load_queues([42])  # type: ignore[list-item]
