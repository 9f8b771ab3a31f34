"""``placer serve --kubeconfig`` as the extender of a real kube-scheduler, against a real
kube-apiserver (``tests/kube_control_plane.py``): single pods of whole GPUs, MIG instances
and shared GPUs bound through placer's ``bind`` verb, a PriorityClass preemption through its
``preempt`` verb, a cordon and a deletion seen through the watch, and a restart of placer
that recovers its holdings from the API.

One control plane and one kube-scheduler serve the module; each test has nodes of its own
(label ``placer-test``) and its pods select them."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from kube_control_plane import ApiError, ControlPlane, missing, node, scheduled_condition, wait_until
from serve_process import Server

pytestmark = pytest.mark.kube

DOCS = Path(__file__).resolve().parent.parent / "docs" / "extender.md"
GROUP = "placer-test"
NAMESPACE = "default"
MIG_RESOURCES = ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb")
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def documented_extender(url: str) -> dict[str, Any]:
    """The extender entry of docs/extender.md's KubeSchedulerConfiguration, pointed at ``url``,
    managing the MIG resources too."""
    config = yaml.safe_load(re.search(r"```yaml\n(.*?)```", DOCS.read_text(), re.S).group(1))
    (extender,) = config["extenders"]
    managed = extender["managedResources"]
    managed += [{"name": name, "ignoredByScheduler": False} for name in MIG_RESOURCES]
    return {**extender, "urlPrefix": url}


class Loop:
    """The control plane, kube-scheduler with placer as its extender, and ``placer serve``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.plane = ControlPlane.start(folder)
        self.placer: Server | None = None
        try:
            self.placer = self.start_placer()
            self.plane.start_scheduler([documented_extender(f"http://127.0.0.1:{self.placer.port}")])
        except BaseException:
            self.stop()
            raise

    def start_placer(self, *extra: str) -> Server:
        """A ``placer serve --kubeconfig`` of this control plane, once it has listed everything."""
        folder = self.folder / "placer"
        folder.mkdir(exist_ok=True)
        empty = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": []}
        placer = Server(folder, "--kubeconfig", str(self.plane.kubeconfig), "--sync-interval", "0", *extra,
                              document=empty)
        wait_until(lambda: placer.request("GET", "/readyz")[0] == 200, "placer's first lists", 60)
        return placer

    def stop(self) -> None:
        try:
            if self.placer is not None:
                self.placer.stop()
        finally:
            self.plane.stop()


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    reason = missing("etcd", "kube-apiserver", "kube-scheduler")
    if reason is not None:
        pytest.skip(f"no real control plane: {reason}")
    pytest.importorskip("kubernetes")
    pytest.importorskip("uvicorn")
    running = Loop(tmp_path_factory.mktemp("kube-serve"))
    yield running
    running.stop()


def gpu_pod(name: str, test: str, resources: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A pending Pod of ``resources`` (limits) for the nodes of ``test``; deleted at once
    without a kubelet (``terminationGracePeriodSeconds: 0``)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": resources}}],
                 "nodeSelector": {GROUP: test}, "tolerations": TOLERATE_GPU,
                 "terminationGracePeriodSeconds": 0, **spec},
    }


def bound(loop: Loop, name: str, timeout_s: float = 60) -> dict[str, Any]:
    """The pod once kube-scheduler has bound it."""
    return wait_until(lambda: (p := loop.plane.api.pod(NAMESPACE, name))["spec"].get("nodeName") and p,
                      f"pod {name} bound", timeout_s)


def test_a_gpu_pod_is_bound_through_placer_with_its_gpus(loop):
    api = loop.plane.api
    api.create(node("whole-0", gpus=8, labels={GROUP: "whole"}))
    api.create(gpu_pod("whole-a", "whole", {"nvidia.com/gpu": "3"}))
    pod = bound(loop, "whole-a")
    assert pod["spec"]["nodeName"] == "whole-0"
    assert pod["metadata"]["annotations"]["placer.io/gpus"] == "0,1,2"
    # the test's kubeconfig skips the certificate check: said once at start, not on every request
    assert any("has insecure-skip-tls-verify: the API server's certificate is not checked" in n
               for n in loop.placer.notes), loop.placer.notes
    assert "InsecureRequestWarning" not in loop.placer.written()



H100 = "NVIDIA-H100-80GB-HBM3"


def pending_reason(loop: Loop, name: str, timeout_s: float = 60) -> str:
    """The message of the pod's ``PodScheduled`` condition once kube-scheduler gave up on it."""
    def unschedulable() -> str:
        pod = loop.plane.api.pod(NAMESPACE, name)
        assert not pod["spec"].get("nodeName"), f"{name} was bound to {pod['spec']['nodeName']}"
        condition = scheduled_condition(pod) or {}
        return condition.get("reason") == "Unschedulable" and condition["message"]

    return wait_until(unschedulable, f"pod {name} found unschedulable", timeout_s)


def test_mig_pods_are_bound_to_distinct_instances_and_one_too_many_is_kept_pending(loop):
    api = loop.plane.api
    labels = {GROUP: "mig", "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": H100,
              "nvidia.com/gpu.count": "2"}  # GPU 0: seven 1g.10gb; GPU 1: two 3g.40gb
    api.create(node("mig-0", gpus=0, labels=labels,
                    extended={"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"}))
    asked = {f"mig-small-{i}": ("1g.10gb", 2) for i in range(3)} | {"mig-big": ("3g.40gb", 1)}
    for name, (profile, count) in asked.items():
        api.create(gpu_pod(name, "mig", {f"nvidia.com/mig-{profile}": str(count)}))
    instances: list[str] = []
    for name, (profile, count) in asked.items():
        pod = bound(loop, name)
        assert pod["spec"]["nodeName"] == "mig-0"
        held = pod["metadata"]["annotations"]["placer.io/mig"].split(",")
        assert len(held) == count and all(i.split("/")[1] == profile for i in held), (name, held)
        instances += held
    assert len(set(instances)) == len(instances) == 7, instances  # no instance bound twice
    api.create(gpu_pod("mig-over", "mig", {"nvidia.com/mig-1g.10gb": "2"}))  # one 1g.10gb is left
    message = pending_reason(loop, "mig-over")  # kube's own count turns it away before placer is asked
    assert "1 Insufficient nvidia.com/mig-1g.10gb" in message, message
    # the first pod's instances go back; the pending one takes instances no bound pod's annotation names
    freed = set(bound(loop, "mig-small-0")["metadata"]["annotations"]["placer.io/mig"].split(","))
    api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/mig-small-0")
    again = set(bound(loop, "mig-over")["metadata"]["annotations"]["placer.io/mig"].split(","))
    assert len(again) == 2 and again <= freed | (set(f"0/1g.10gb/{s}" for s in range(7)) - set(instances))
    still = {i for name in asked if name != "mig-small-0"
             for i in api.pod(NAMESPACE, name)["metadata"]["annotations"]["placer.io/mig"].split(",")}
    assert not again & still
    # a pod of two profiles: placer's error, not kube-scheduler's "code 400", is in its condition
    api.create(gpu_pod("mig-two", "mig", {"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-3g.40gb": "1"}))
    condition = wait_until(lambda: (scheduled_condition(api.pod(NAMESPACE, "mig-two")) or {}).get("message"),
                           "mig-two's scheduling failure")
    assert "asks for MIG instances of 2 profiles (1g.10gb, 3g.40gb); placer takes one profile per pod" in condition


def test_pods_of_shared_gpus_are_bound_to_slots_and_one_too_many_is_kept_pending(loop):
    api = loop.plane.api
    labels = {GROUP: "shared", "nvidia.com/gpu.product": H100 + "-SHARED", "nvidia.com/gpu.count": "2",
              "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    api.create(node("shared-0", gpus=8, labels=labels))  # 2 GPUs x 4 slots: nvidia.com/gpu 8
    asked = {"shared-a": 1, "shared-b": 3, "shared-c": 4}
    for name, slots in asked.items():
        api.create(gpu_pod(name, "shared", {"nvidia.com/gpu": str(slots)}))
    per_gpu: dict[str, int] = {}
    for name, slots in asked.items():
        pod = bound(loop, name)
        assert pod["spec"]["nodeName"] == "shared-0"
        gpus = pod["metadata"]["annotations"]["placer.io/gpus"].split(",")
        assert len(gpus) == slots and set(gpus) <= {"0", "1"}, (name, gpus)
        for gpu in gpus:
            per_gpu[gpu] = per_gpu.get(gpu, 0) + 1
    assert per_gpu == {"0": 4, "1": 4}  # every slot held once
    api.create(gpu_pod("shared-over", "shared", {"nvidia.com/gpu": "1"}))
    message = pending_reason(loop, "shared-over")
    assert "1 Insufficient nvidia.com/gpu" in message, message
    # under MPS a pod takes one slot: kube counts 4 free nvidia.com/gpu, placer refuses 2
    mps = {**labels, GROUP: "mps", "nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "mps"}
    api.create(node("mps-0", gpus=4, labels=mps))
    api.create(gpu_pod("mps-one", "mps", {"nvidia.com/gpu": "1"}))
    assert bound(loop, "mps-one")["metadata"]["annotations"]["placer.io/gpus"] in ("0", "1")
    api.create(gpu_pod("mps-two", "mps", {"nvidia.com/gpu": "2"}))
    message = pending_reason(loop, "mps-two")
    assert "1 node(s) share their GPUs by MPS: one slot per pod" in message, message


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def events_of(loop: Loop, name: str) -> list[dict[str, Any]]:
    found = loop.plane.api.get(f"/api/v1/namespaces/{NAMESPACE}/events?fieldSelector=involvedObject.name%3D{name}")
    return found["items"]


def gone(loop: Loop, name: str) -> bool:
    try:
        loop.plane.api.pod(NAMESPACE, name)
    except ApiError as error:
        if error.status == 404:
            return True
        raise
    return False


def gpus_of(pod: dict[str, Any]) -> set[int]:
    return {int(g) for g in pod["metadata"]["annotations"]["placer.io/gpus"].split(",")}


def served(loop: Loop, verb: str) -> float:
    """How many calls of ``verb`` placer answered 200 (its /metrics)."""
    text = loop.placer.request("GET", "/metrics")[2]
    counted = re.findall(r"^placer_extender_requests_total\{(.*)\} (\S+)$", text, re.M)
    return sum(float(n) for labels, n in counted if f'verb="{verb}"' in labels and 'code="200"' in labels)


def test_a_higher_priority_pod_preempts_through_placers_preempt_verb(loop):
    api = loop.plane.api
    for name, value in (("placer-low", 100), ("placer-mid", 500), ("placer-high", 1000)):
        api.create(priority_class(name, value))
    for i in range(2):
        api.create(node(f"preempt-{i}", gpus=8, labels={GROUP: "preempt"}))
    # preempt-0: low pods of 2, 2 and 4 GPUs; preempt-1: two mid pods of 4. Every GPU is held.
    held = {"low-a": ("placer-low", "preempt-0", 2), "low-b": ("placer-low", "preempt-0", 2),
            "low-c": ("placer-low", "preempt-0", 4), "mid-0": ("placer-mid", "preempt-1", 4),
            "mid-1": ("placer-mid", "preempt-1", 4)}
    for name, (klass, where, gpus) in held.items():
        api.create(gpu_pod(name, "preempt", {"nvidia.com/gpu": str(gpus)}, priorityClassName=klass,
                           nodeSelector={GROUP: "preempt", "kubernetes.io/hostname": where}))
    before = {name: bound(loop, name) for name in held}
    assert before["low-a"]["spec"]["priority"] == 100  # the Priority admission plugin read the class
    vip = gpu_pod("vip", "preempt", {"nvidia.com/gpu": "4"}, priorityClassName="placer-high")
    # placer's own victims for such a pod, asked as kube-scheduler asks (every lower pod of a node proposed)
    asked = {**vip, "metadata": {**vip["metadata"], "uid": "uid-vip-probe"}, "spec": {**vip["spec"], "priority": 1000}}
    proposed = {n: {"Pods": [p for p in before.values() if p["spec"]["nodeName"] == n], "NumPDBViolations": 0}
                for n in ("preempt-0", "preempt-1")}
    status, answer = loop.placer.post("preempt", {"Pod": asked, "NodeNameToVictims": proposed})
    assert status == 200 and "preempt-0" in answer["NodeNameToMetaVictims"], answer
    uids = {p["metadata"]["uid"]: name for name, p in before.items()}
    victims = {uids[v["UID"]] for v in answer["NodeNameToMetaVictims"]["preempt-0"]["Pods"]}
    assert victims and all(held[v][1] == "preempt-0" for v in victims)
    calls = served(loop, "preempt")
    api.create(vip)
    wait_until(lambda: all(gone(loop, v) for v in victims), f"placer's victims {sorted(victims)} deleted")
    preemptor = bound(loop, "vip")
    assert served(loop, "preempt") > calls  # kube-scheduler asked placer for the victims
    assert preemptor["spec"]["nodeName"] == "preempt-0"  # the node of the lowest victims
    freed = set().union(*(gpus_of(before[v]) for v in victims))
    assert gpus_of(preemptor) <= freed  # the victims' GPUs, none a pod still running holds
    for name in set(held) - victims:  # only placer's victims were deleted
        assert api.pod(NAMESPACE, name)["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert not gpus_of(preemptor) & gpus_of(before[name]) or before[name]["spec"]["nodeName"] != "preempt-0"
    for victim in victims:
        (preempted,) = [e for e in events_of(loop, victim) if e["reason"] == "Preempted"]
        assert preemptor["metadata"]["uid"] in preempted["message"] and "preempt-0" in preempted["message"]


def filtered_by(placer: Server, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """``placer``'s own answer to ``filter`` for ``pod`` (as kube-scheduler would send it)."""
    status, result = placer.post("filter", {"Pod": pod, "NodeNames": names})
    assert status == 200, result
    return result


def filtered(loop: Loop, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return filtered_by(loop.placer, pod, names)


def test_a_cordon_and_a_deletion_reach_placer_through_the_watch(loop):
    api = loop.plane.api
    names = ["watch-0", "watch-1"]
    for name in names:
        api.create(node(name, gpus=8, labels={GROUP: "watch"}))
    api.create(gpu_pod("watch-a", "watch", {"nvidia.com/gpu": "8"}))
    first = bound(loop, "watch-a")["spec"]["nodeName"]
    other = next(n for n in names if n != first)
    api.patch(f"/api/v1/nodes/{other}", {"spec": {"unschedulable": True}})
    probe = {**gpu_pod("watch-probe", "watch", {"nvidia.com/gpu": "1"}), "status": {"phase": "Pending"}}
    probe["metadata"]["uid"] = "uid-watch-probe"

    def cordon_seen() -> bool:
        result = filtered(loop, probe, names)
        return result["FailedAndUnresolvableNodes"].get(other) == "node(s) were unschedulable" and result

    result = wait_until(cordon_seen, f"placer to see {other} cordoned")
    assert result["NodeNames"] == [] and result["FailedNodes"] == {first: "Insufficient nvidia.com/gpu"}
    api.create(gpu_pod("watch-b", "watch", {"nvidia.com/gpu": "8"}))
    assert "1 node(s) were unschedulable" in pending_reason(loop, "watch-b")
    # the first pod's deletion gives its GPUs back in placer's state: placer binds watch-b there
    api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/watch-a")
    again = bound(loop, "watch-b")
    assert again["spec"]["nodeName"] == first and gpus_of(again) == set(range(8))
    api.patch(f"/api/v1/nodes/{other}", {"spec": {"unschedulable": None}})
    wait_until(lambda: filtered(loop, probe, names)["NodeNames"] == [other], f"placer to see {other} uncordoned")


def test_a_dry_run_watches_the_api_and_posts_no_binding(loop):
    api = loop.plane.api
    api.create(node("dry-0", gpus=8, labels={GROUP: "dry"}))
    api.create(gpu_pod("dry-a", "dry", {"nvidia.com/gpu": "2"}, schedulerName="nobody"))  # no scheduler takes it
    dry = loop.start_placer("--dry-run")
    try:
        pod = api.pod(NAMESPACE, "dry-a")
        assert filtered_by(dry, pod, ["dry-0"])["NodeNames"] == ["dry-0"]
        binding = {"PodName": "dry-a", "PodNamespace": NAMESPACE, "PodUID": pod["metadata"]["uid"], "Node": "dry-0"}
        assert dry.post("bind", binding) == (200, {"Error": ""})
        assert dry.request("GET", "/healthz")[1]["binds"] == "dry-run"
    finally:
        dry.stop()
    assert not api.pod(NAMESPACE, "dry-a")["spec"].get("nodeName")  # nothing was posted


def test_a_restarted_placer_recovers_its_binds_from_the_api_and_holds_no_gpu_twice(loop):
    api = loop.plane.api
    api.create(node("restart-0", gpus=8, labels={GROUP: "restart"}))
    api.create(gpu_pod("restart-a", "restart", {"nvidia.com/gpu": "3"}))
    first = gpus_of(bound(loop, "restart-a"))
    port = loop.placer.port
    loop.placer.stop()
    api.create(gpu_pod("restart-b", "restart", {"nvidia.com/gpu": "5"}))  # kube-scheduler cannot call placer now
    loop.placer = loop.start_placer("--port", str(port))
    status, ready, _ = loop.placer.request("GET", "/readyz?verbose")
    assert status == 200 and "watch-podgroups" not in ready  # no PodGroup API here: not waited for
    second = bound(loop, "restart-b", timeout_s=90)
    health = loop.placer.request("GET", "/healthz")[1]
    assert health["events_refused"] == 0 and health["awaiting_node"] == 0, health  # every bound pod held
    assert second["spec"]["nodeName"] == "restart-0"
    assert first | gpus_of(second) == set(range(8)) and not first & gpus_of(second)
    api.create(gpu_pod("restart-c", "restart", {"nvidia.com/gpu": "1"}))
    assert "Insufficient nvidia.com/gpu" in pending_reason(loop, "restart-c")
