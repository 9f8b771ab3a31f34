"""A gang whose pods are created ungated, one at a time (as a Job or JobSet controller creates
them), bound promptly through ``placer serve --kubeconfig`` as the extender of a real
kube-scheduler and kube-apiserver (``tests/kube_control_plane.py``).

Each early member is filtered as it comes and turned away ("waits for its pods"), so
kube-scheduler parks it among its unschedulable pods; the last member's creation is no event
that retries them. When the last member's filter reserves the gang, placer writes
``placer.io/reserved-node`` on each other member (``KubeBinder.wake``): an update of a parked
pod, which kube-scheduler retries. Without it the early members would wait for its
5-minute flush (``--pod-max-in-unschedulable-pods-duration``).

4 nodes of 8 GPUs in 2 racks; a 2-GPU pod runs on rack-a; a PodGroup of minMember 4, pods of
4 GPUs that require one rack: only rack-b holds them. Then a gang of 2 whose PodGroup is
created after its pods: kube-scheduler, which watches no PodGroup, would not retry them;
placer reserves the gang when its watch brings the PodGroup and wakes both (in rack-a, the
room left).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("kubernetes")
pytest.importorskip("uvicorn")

import kube_control_plane as kube  # noqa: E402
from serve_process import Server  # noqa: E402

pytestmark = pytest.mark.kube

NAMESPACE = "train"
RACK_LABEL = "topology.kubernetes.io/rack"
RACKS = ("rack-a", "rack-b")
GANG = "bert"
MEMBERS = 4
GANG_GPUS = 4
RESERVED_NODE = "placer.io/reserved-node"


def rack_nodes() -> list[dict[str, Any]]:
    return [kube.node(f"gpu-{rack}-{k}", gpus=8, labels={RACK_LABEL: rack}) for rack in RACKS for k in range(2)]


def pod(name: str, gpus: int, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, **meta},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                {"name": "main", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def member(k: int, gang: str = GANG) -> dict[str, Any]:
    return pod(f"{gang}-{k}", GANG_GPUS, labels={"scheduling.x-k8s.io/pod-group": gang},
               annotations={"kueue.x-k8s.io/podset-required-topology": RACK_LABEL})


class GangLoop:
    """The control plane, ``placer serve`` and kube-scheduler with placer as its extender."""

    def __init__(self, folder: Path) -> None:
        self.plane = kube.ControlPlane.start(folder)
        self.placer: Server | None = None
        api = self.plane.api
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for obj in rack_nodes():
            api.create(obj)
        api.create({**pod("running", 2), "spec": {**pod("running", 2)["spec"], "nodeName": "gpu-rack-a-0"}})
        kube.create_podgroups(api, [kube.podgroup(NAMESPACE, GANG, MEMBERS)])
        empty = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": []}
        self.placer = Server(folder, "--kubeconfig", str(self.plane.kubeconfig), "--level", f"rack={RACK_LABEL}",
                             "--sync-interval", "0", document=empty)
        kube.wait_until(lambda: self.placer.request("GET", "/readyz")[0] == 200, "placer's first lists", 30)
        self.plane.start_scheduler([kube.documented_extender(self.placer.port)])

    def stop(self) -> None:
        kube.stop_with(self.placer, self.plane)


def turned_away(api: kube.Api, name: str, why: str = "") -> dict[str, Any] | None:
    """The pod once kube-scheduler found it unschedulable, for a reason holding ``why`` (it
    is then parked), else None."""
    found = api.pod(NAMESPACE, name)
    condition = kube.scheduled_condition(found)
    if condition and condition.get("reason") == "Unschedulable" and why in condition.get("message", ""):
        return found
    return None


def all_bound(api: kube.Api, gang: str, members: int) -> list[dict[str, Any]]:
    """The gang's pods once all are bound, else []."""
    pods = [api.pod(NAMESPACE, f"{gang}-{k}") for k in range(members)]
    return pods if all(p["spec"].get("nodeName") for p in pods) else []


@pytest.fixture(scope="module")
def gang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GangLoop, list[dict[str, Any]]]]:
    """The loop, and the gang's pods once all are bound: created one by one, each after
    kube-scheduler turned the previous one away."""
    reason = kube.missing("etcd", "kube-apiserver", "kube-scheduler")
    if reason:
        pytest.skip(f"no real control plane: {reason}")
    loop = GangLoop(tmp_path_factory.mktemp("kube-gang-wake"))
    try:
        api = loop.plane.api
        for k in range(MEMBERS):
            api.create(member(k))
            if k < MEMBERS - 1:
                kube.wait_until(lambda: turned_away(api, f"{GANG}-{k}"), f"kube-scheduler to park {GANG}-{k}", 30)
        yield loop, kube.wait_until(lambda: all_bound(api, GANG, MEMBERS), "kube-scheduler to bind the whole gang", 60)
    except BaseException:
        kube.print_logs(loop.plane, loop.placer)
        raise
    finally:
        loop.stop()


def gpus_of(pod: dict[str, Any]) -> list[int]:
    return [int(g) for g in pod["metadata"]["annotations"]["placer.io/gpus"].split(",")]


def test_a_gang_created_one_pod_at_a_time_binds_whole_through_placer_in_the_rack_that_holds_it(gang):
    _, pods = gang
    assert {p["spec"]["nodeName"] for p in pods} == {"gpu-rack-b-0", "gpu-rack-b-1"}
    held: dict[str, list[int]] = {}
    for p in pods:  # placer's Binding wrote the GPUs: 4 each, none held twice
        assert len(gpus_of(p)) == GANG_GPUS
        held.setdefault(p["spec"]["nodeName"], []).extend(gpus_of(p))
    assert all(sorted(gpus) == list(range(8)) for gpus in held.values()), held


def test_placer_woke_each_member_kube_scheduler_had_parked_and_its_state_settles(gang):
    loop, pods = gang
    annotations = [p["metadata"]["annotations"] for p in pods]
    # the early members carry the node placer reserved them; the last, filtered as placer reserved, none
    assert [a.get(RESERVED_NODE) for a in annotations[:-1]] == [p["spec"]["nodeName"] for p in pods[:-1]]
    assert RESERVED_NODE not in annotations[-1]

    def settled() -> dict[str, Any]:
        state = loop.placer.request("GET", "/healthz")[1]
        return state if state["reserved"] == 0 and state["pods"] == MEMBERS + 1 else {}

    state = kube.wait_until(settled, "placer's watch to see the gang bound", 30)
    assert (state["pending"], state["events_refused"], state["awaiting_node"]) == (0, 0, 0)
    metrics = loop.placer.request("GET", "/metrics")[2]
    assert f'placer_extender_requests_total{{code="200",verb="bind"}} {float(MEMBERS)}' in metrics
    assert "could not wake" not in loop.placer.written()


LATE_GANG = "late"


@pytest.fixture(scope="module")
def late_gang(gang) -> list[dict[str, Any]]:
    """The 2 pods of a gang whose PodGroup is created once kube-scheduler turned both away,
    once both are bound."""
    loop, _ = gang
    api = loop.plane.api
    for k in range(2):
        api.create(member(k, LATE_GANG))
    for k in range(2):
        kube.wait_until(lambda: turned_away(api, f"{LATE_GANG}-{k}", "PodGroup not known to placer"),
                        f"kube-scheduler to park {LATE_GANG}-{k}", 30)
    api.call("POST", f"{kube.PODGROUP_API}/namespaces/{NAMESPACE}/podgroups", kube.podgroup(NAMESPACE, LATE_GANG, 2))
    return kube.wait_until(lambda: all_bound(api, LATE_GANG, 2), "kube-scheduler to bind the late gang", 60)


def test_a_gang_whose_podgroup_comes_after_its_pods_binds_once_placers_watch_brings_it(late_gang):
    assert {p["spec"]["nodeName"] for p in late_gang} <= {"gpu-rack-a-0", "gpu-rack-a-1"}
    for p in late_gang:  # no member was being filtered when placer reserved them: both woken
        assert p["metadata"]["annotations"][RESERVED_NODE] == p["spec"]["nodeName"]
        assert len(gpus_of(p)) == GANG_GPUS
