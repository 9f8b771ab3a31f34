"""The queue model's conversions: Kueue requests to the pod placer places, results to JSON."""
from __future__ import annotations

from placer.model import Assignment, MigRequest
from placer.queues import PodSet, Workload, pod_for_requests
from placer.queues.result import AdmissionResult, AdmittedWorkload, PendingWorkload, PreemptedWorkload


def test_requests_map_to_placer_units() -> None:
    pod = pod_for_requests(
        "w", {"cpu": 1500, "memory": (3 << 30) + 1, "nvidia.com/gpu": 2, "pods": 1, "example.com/nic": 1}
    )
    assert (pod.cpu_milli, pod.memory_mib, pod.gpus) == (1500, 3073, 2)  # memory rounds up to MiB
    assert dict(pod.resources) == {"example.com/nic": 1}


def test_mig_resource_becomes_a_mig_request() -> None:
    pod = pod_for_requests("w", {"nvidia.com/mig-3g.40gb": 1})
    assert pod.mig == MigRequest(profile="3g.40gb", count=1) and pod.gpus == 0


def test_workload_totals_and_key() -> None:
    w = Workload("train", (PodSet("workers", 4, {"nvidia.com/gpu": 8}), PodSet("launcher", 1, {"cpu": 500})), "team-a")
    assert w.key == "team-a/train"
    assert w.total_requests() == {"workers": {"nvidia.com/gpu": 32}, "launcher": {"cpu": 500}}


def test_result_document_follows_spec() -> None:
    result = AdmissionResult(
        admitted=(AdmittedWorkload("ns/a", "cq", {"main": {"nvidia.com/gpu": "a100"}}, True,
                                   (Assignment(pod="a-0", node="n1", gpus=(0, 1)),)),),
        pending=(PendingWorkload("ns/b", "insufficient quota", "cq", inadmissible=True),),
        preempted=(PreemptedWorkload("ns/c", "ns/a", "InCohortReclamation"),),
    )
    d = result.to_dict()
    assert d["admitted"][0]["flavors"] == {"main": {"nvidia.com/gpu": "a100"}}
    assert d["admitted"][0]["borrowing"] is True and d["admitted"][0]["assignments"][0]["node"] == "n1"
    assert d["pending"] == [{"workload": "ns/b", "reason": "insufficient quota", "clusterQueue": "cq", "inadmissible": True}]
    assert d["preempted"] == ["ns/c"]
