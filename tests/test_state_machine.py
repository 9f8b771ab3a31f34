"""Cluster against the pure-Python reference: identical decisions and state after every step."""
from __future__ import annotations


import hypothesis.strategies as st
from hypothesis import event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from placer import policies
from placer.placement.cluster import Cluster
from placer.diagnostics.check import check_placement
from placer.model import PlacementRequest
from placer.testing import pod_requests, snapshots
from placer.model import replace
from reference import ReferenceCluster

POLICIES = policies.kernel_names()  # every policy the reference implements (kube ones: test_kube_scores.py)


def _free_as_dict(free) -> dict:
    return {
        "cpu_milli": free.cpu_milli,
        "memory_mib": free.memory_mib,
        "pods": free.pods,
        "gpu_milli": tuple(free.gpu_milli),
        "gpu_memory_mib": tuple(free.gpu_memory_mib),
    }


class ClusterMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.counter = 0
        self.bound_names: set[str] = set()

    @initialize(snapshot=snapshots(max_nodes=6))
    def start(self, snapshot) -> None:
        self.snapshot = snapshot
        self.cluster = Cluster(snapshot)
        self.reference = ReferenceCluster(snapshot)
        self.models = sorted({n.hardware.gpu_model for n in snapshot.nodes if n.hardware.gpus})
        self.running = [p.name for n in snapshot.nodes for p in n.pods]

    def _named(self, pod):
        self.counter += 1
        return replace(pod, name=f"sm-{self.counter}", gang=None)

    @rule(data=st.data(), policy=st.sampled_from(POLICIES), seed=st.integers(0, 2**32), bind=st.booleans())
    def place(self, data, policy, seed, bind) -> None:
        pod = self._named(data.draw(pod_requests(models=self.models)))
        got = self.cluster.place(pod, policy=policy, seed=seed)
        want = self.reference.place(pod, policy=policy, seed=seed)
        assert got.assignments == want.assignments
        assert got.unschedulable == want.unschedulable
        request = PlacementRequest(pods=(pod,), policy=policy, seed=seed)
        assert check_placement(self.cluster.to_snapshot(), request, got) == []
        event("placed" if got.assignments else "unschedulable")
        if bind and got.assignments:
            self.cluster.bind(got)
            self.reference.bind(want)
            self.bound_names.add(pod.name)

    @precondition(lambda self: bool(self.bound_names) or bool(self.running))
    @rule(data=st.data())
    def release(self, data) -> None:
        names = sorted(self.bound_names) + list(self.running)
        name = data.draw(st.sampled_from(names))
        event("release of a running pod" if name in self.running else "release of a bound pod")
        self.cluster.release(name)
        self.reference.release(name)
        self.bound_names.discard(name)
        if name in self.running:
            self.running.remove(name)

    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "cluster"):
            return
        for node in self.snapshot.nodes:
            assert _free_as_dict(self.cluster.node_free(node.name)) == dict(self.reference.node_free(node.name))


ClusterMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestClusterMachine = ClusterMachine.TestCase
