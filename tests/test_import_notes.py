"""Every command that reads foreign objects prints each note its reader records
(``placer: <command>: note: ...`` on stderr), and ``--strict`` makes a note an error: exit
2, one error line, no output file written."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from placer.cli import main

DATA = Path(__file__).parent / "data"
GPU = "nvidia.com/gpu"

Case = Callable[[Path], tuple[list[str], list[str]]]  # tmp dir -> (argv without -o, notes expected)


def _write_yaml(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    return path


def _pod(name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta},
            "spec": {**spec, "containers": containers}}


def kubernetes_request(tmp: Path) -> tuple[list[str], list[str]]:
    """Each field kube-scheduler reads and placer does not model, a short PodGroup, an
    object of a kind placer does not read."""
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "pg", "namespace": "default"},
             "spec": {"minMember": 3, "minResources": {"cpu": "4"}}}
    objects = [
        group,
        _pod("claims", {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
             labels={"scheduling.x-k8s.io/pod-group": "pg"}),
        _pod("volumes", {"volumes": [{"name": "cfg", "configMap": {"name": "x"}},
                                     {"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]}),
        _pod("gated", {"schedulingGates": [{"name": "example.com/quota"}]}),
        _pod("elsewhere", {"schedulerName": "my-scheduler"}),
        _pod("kata", {"runtimeClassName": "kata"}),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}},
    ]
    path = _write_yaml(tmp / "workloads.yaml", objects)
    return ["import", "kubernetes-request", str(path)], [
        "spec.resourceClaims (DRA) are not imported",
        "spec.volumes[1]: volume(s) data (persistentVolumeClaim): kube's VolumeBinding",
        "spec.schedulingGates: gated by example.com/quota: kube-scheduler does not place the pod",
        "spec.schedulerName: 'my-scheduler' places this pod, not kube-scheduler",
        "spec.runtimeClassName: RuntimeClass 'kata': its overhead and node selector are added when",
        "spec.minResources: PodGroup default/pg's minResources are not checked",
        "PodGroup default/pg needs minMember 3 but has 1 pod(s)",
        "left out 1 object(s) of kinds placer does not read: 1 ConfigMap",
    ]


def kubernetes(tmp: Path) -> tuple[list[str], list[str]]:
    """A running pod of a priority class the inputs lack."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}
    pod = _pod("web", {"nodeName": "n1", "priorityClassName": "team-high"})
    nodes = tmp / "nodes.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]}), encoding="utf-8")
    pods = tmp / "pods.json"
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod]}), encoding="utf-8")
    return ["import", "kubernetes", "--nodes", str(nodes), "--pods", str(pods)], [
        "spec.priorityClassName: priority class 'team-high' is not among the inputs; priority left at 0",
    ]


def slurm(tmp: Path) -> tuple[list[str], list[str]]:
    """Nodes no switch of topology.conf covers."""
    half = tmp / "topology.conf"
    half.write_text("SwitchName=leaf1 Nodes=gpu[01-02]\n", encoding="utf-8")
    nodes = DATA / "slurm" / "handmade-scontrol-d-show-node.txt"
    return ["import", "slurm", "--nodes", str(nodes), "--topology", str(half)], [
        "topology.conf: 4 of 6 node(s) are under no switch",
    ]


def nvidia_smi(tmp: Path) -> tuple[list[str], list[str]]:
    """A driver whose placements refuse a start the bundled table allows."""
    lgipp = DATA / "nvidia-smi" / "handmade-mig-lgipp_a100-80gb.txt"
    fewer = tmp / "lgipp.txt"
    fewer.write_text(lgipp.read_text(encoding="utf-8").replace(
        "GPU  1 Profile ID 15 Placements: {0,2,4,6}:2", "GPU  1 Profile ID 15 Placements: {0,2,4}:2"), encoding="utf-8")
    lgi = DATA / "nvidia-smi" / "nvidia-smi-mig-lgi_a100-80gb-mixed-profiles_dcgm-138_partial.txt"
    return ["import", "nvidia-smi", "--node", "dgx", "--lgi", str(lgi), "--lgipp", str(fewer),
            "--gpu-model", "A100-SXM4-80GB"], [
        "lgipp.txt:11: 1g.20gb may not start at [6] per the driver; the bundled table allows it",
    ]


def admit(tmp: Path) -> tuple[list[str], list[str]]:
    """A ClusterQueue without a namespaceSelector and a Namespace (neither is modelled)."""
    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot",
                "nodes": [{"name": "n1", "gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000}]}
    snap = tmp / "snap.json"
    snap.write_text(json.dumps(snapshot), encoding="utf-8")
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a"},
             "spec": {"resourceGroups": [{"coveredResources": [GPU], "flavors": [
                 {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": 4}]}]}]}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    local = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "jobs", "namespace": "team"},
             "spec": {"clusterQueue": "a"}}
    ported = {"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 80}],
              "resources": {"limits": {GPU: 1}}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
               "name": "serve", "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "jobs"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [ported]}}}}
    queues = _write_yaml(tmp / "queues.yaml", [flavor, queue, namespace, local])
    jobs = _write_yaml(tmp / "jobs.yaml", [job])
    return ["admit", str(snap), str(queues), str(jobs), "--format", "json"], [
        "ClusterQueue a has no namespaceSelector",
        "Namespace left out",
        "spec.template.spec: host port(s) TCP/80: Kueue admits the workload without them",
    ]


CASES: dict[str, Case] = {
    "import kubernetes-request": kubernetes_request,
    "import kubernetes": kubernetes,
    "import slurm": slurm,
    "import nvidia-smi": nvidia_smi,
    "admit": admit,
}


@pytest.mark.parametrize("command", CASES)
def test_each_note_reaches_stderr(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, expected = CASES[command](tmp_path)
    out = tmp_path / "out.json"
    assert main([*argv, "-o", str(out)]) == 0
    assert out.exists()
    err = capsys.readouterr().err.splitlines()
    prefix = f"placer: {command}: note: "
    assert err and all(line.startswith(prefix) for line in err), err
    for text in expected:
        assert sum(text in line for line in err) >= 1, (text, err)


@pytest.mark.parametrize("command", CASES)
def test_strict_makes_a_note_an_error(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, expected = CASES[command](tmp_path)
    out = tmp_path / "out.json"
    assert main([*argv, "--strict", "-o", str(out)]) == 2
    assert not out.exists()
    *noted, error = capsys.readouterr().err.splitlines()
    assert error.startswith(f"placer: error: --strict: {command}: {len(noted)} note(s), the first: ")
    assert error.endswith(noted[0].removeprefix(f"placer: {command}: note: "))
    assert all(any(text in line for line in noted) for text in expected)


def test_strict_without_notes_writes_the_output(tmp_path: Path) -> None:
    path = _write_yaml(tmp_path / "pod.yaml", [_pod("plain", {})])
    out = tmp_path / "request.json"
    assert main(["import", "kubernetes-request", str(path), "--strict", "-o", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["pods"] == [{"name": "default/plain", "cpuMilli": 1000}]


def test_fields_kube_scheduler_does_not_read_are_no_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """image, command, env, probes, volume mounts of local volumes, DNS, security: nothing to note."""
    container = {"name": "c", "image": "registry/x:1", "command": ["run"], "env": [{"name": "A", "value": "1"}],
                 "volumeMounts": [{"name": "scratch", "mountPath": "/s"}], "readinessProbe": {"exec": {"command": ["ok"]}},
                 "ports": [{"containerPort": 8080}], "resources": {"requests": {"cpu": "1"}}}
    spec = {"containers": [container], "volumes": [{"name": "scratch", "emptyDir": {}}], "dnsPolicy": "ClusterFirst",
            "securityContext": {"runAsUser": 1000}, "serviceAccountName": "runner", "restartPolicy": "Never",
            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30}
    path = _write_yaml(tmp_path / "pod.yaml", [_pod("quiet", spec)])
    assert main(["import", "kubernetes-request", str(path), "--strict", "-o", str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr().err == ""


def test_the_extender_logs_the_notes_of_a_pod_it_decodes(caplog: pytest.LogCaptureFixture) -> None:
    from placer.schema.extender import decode_filter_args
    from placer.serve.extender import Extender

    snapshot = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [{"name": "n1", "cpuMilli": 8000}]}
    pending = _pod("web", {"schedulingGates": [{"name": "example.com/quota"}]}, namespace="ml", uid="uid-web")
    body = json.dumps({"Pod": {**pending, "status": {"phase": "Pending"}}, "NodeNames": ["n1"]}).encode()
    with caplog.at_level(logging.WARNING, logger="placer.serve.app"):
        assert Extender(snapshot).filter(decode_filter_args(body, "POST /filter"))["NodeNames"] == ["n1"]
    assert [r.getMessage() for r in caplog.records] == [
        "note: POST /filter: Pod.spec.schedulingGates: gated by example.com/quota: kube-scheduler does not place "
        "the pod until every gate is removed (SchedulingGated); placer places it as if none were left"]
