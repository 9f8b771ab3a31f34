"""Properties of the queue engine over random small configurations and several cycles.

Random configurations: one cohort, two independent cohorts or a cohort nested in another
(cohorts with or without quota of their own, declared or only named), two to four
ClusterQueues with random nominal quota, borrowingLimit and lendingLimit on one or two
flavors (GPUs, sometimes CPU too), random preemption settings, queueing strategies, flavor
fungibility and fair sharing. Workloads arrive with random sizes and priorities (later
arrivals may outrank earlier ones) between cycles, and admitted ones finish at random.

After every cycle, checked against the cycle results alone (never through ``QuotaTree``):

(a) no ClusterQueue uses more than nominal + borrowingLimit of any flavor-resource;
(b) quota in the cohort trees, recomputed in plain Python from the admitted workloads'
    flavors and requests: every cohort root uses no more than its subtree quota, no node
    uses more than its subtree quota + borrowingLimit, no tree uses more than the nominal
    quota of all its nodes, and no ClusterQueue borrows more than the other nodes lend;
(c) a workload is admitted or pending, never both and never neither; the engine's usage of
    every ClusterQueue and cohort equals the recomputed one;
(d) with preemption ``Never`` everywhere, no workload is ever preempted, and (f) once only
    parked (inadmissible) workloads are left, none of them is admitted by a fresh engine
    holding the same admitted workloads;
(e) on a cluster of one or two 8-GPU nodes (one flavor per node), every admitted workload's
    pods are all placed, on nodes of their flavors, and all placed pods together pass
    :func:`placer.check_placement`;
(g) every victim follows Kueue's rules: ``InClusterQueue`` from the preemptor's own queue
    under its ``withinClusterQueue`` policy, the cohort reasons from another queue of the
    same cohort tree that was borrowing, under ``reclaimWithinCohort`` (and, while
    borrowing, ``borrowWithinCohort`` with its priority threshold).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from msgspec.structs import replace

import placer
from placer.queues import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    PodSet,
    QueueConfig,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    pod_for_requests,
)
from placer.queues.model import CPU, FUNGIBILITY_POLICIES, GPU, PREEMPTION_POLICIES, QUEUEING_STRATEGIES
from placer.queues.result import AdmissionResult
from placer.queues.scheduler import QueueScheduler

FR = tuple[str, str]
LABEL = "pool"
CPU_STEP = 1000
# the profile's example count (conftest: 60 by default, 600 under PLACER_HYPOTHESIS_PROFILE=thorough)
EXAMPLES = settings.default.max_examples
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NEVER = ClusterQueuePreemption()

# ---------------------------------------------------------------------------------- strategies


def _limit(draw: st.DrawFn, high: int) -> Optional[int]:
    return draw(st.one_of(st.none(), st.integers(0, high)))


def _quota(draw: st.DrawFn, resource: str, limits: bool) -> ResourceQuota:
    scale = CPU_STEP * 4 if resource == CPU else 1
    nominal = draw(st.integers(0, 8))
    if not limits:
        return ResourceQuota(nominal * scale)
    borrowing = _limit(draw, 8)
    lending = draw(st.one_of(st.none(), st.integers(0, nominal)))  # Kueue: lendingLimit <= nominalQuota
    return ResourceQuota(nominal * scale, None if borrowing is None else borrowing * scale,
                         None if lending is None else lending * scale)


def _group(draw: st.DrawFn, resources: tuple[str, ...], flavors: list[str], limits: bool) -> ResourceGroup:
    order = draw(st.permutations(flavors))
    return ResourceGroup(resources, tuple(FlavorQuotas(f, {r: _quota(draw, r, limits) for r in resources}) for f in order))


def _preemption(draw: st.DrawFn) -> ClusterQueuePreemption:
    return ClusterQueuePreemption(
        draw(st.sampled_from(PREEMPTION_POLICIES["withinClusterQueue"])),
        draw(st.sampled_from(PREEMPTION_POLICIES["reclaimWithinCohort"])),
        draw(st.sampled_from(PREEMPTION_POLICIES["borrowWithinCohort"])),
        draw(st.one_of(st.none(), st.integers(-1, 2))),
    )


@st.composite
def configs(draw: st.DrawFn, never: bool = False) -> QueueConfig:
    flavors = ["f0", "f1"][: draw(st.integers(1, 2))]
    resources = (GPU, CPU) if draw(st.booleans()) else (GPU,)
    shape = draw(st.sampled_from(["one", "two", "nested"]))
    cohort_names = ["c0"] if shape == "one" else ["c0", "c1"]
    cohorts = {}
    for name in cohort_names:
        parent = "c0" if shape == "nested" and name == "c1" else None
        groups = (_group(draw, resources, flavors, parent is not None),) if draw(st.booleans()) else ()
        if groups or parent is not None or draw(st.booleans()):
            cohorts[name] = Cohort(name, parent, groups, draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])))
    queues = {}
    for i in range(draw(st.integers(2, 4))):
        name = f"q{i}"
        cohort = draw(st.one_of(st.sampled_from(cohort_names), st.none())) if i >= 2 else cohort_names[i % len(cohort_names)]
        queues[name] = ClusterQueue(
            name, (_group(draw, resources, flavors, cohort is not None),), cohort,
            draw(st.sampled_from(QUEUEING_STRATEGIES)),
            NEVER if never else _preemption(draw),
            FlavorFungibility(draw(st.sampled_from(FUNGIBILITY_POLICIES["whenCanBorrow"])),
                              draw(st.sampled_from(FUNGIBILITY_POLICIES["whenCanPreempt"]))),
            draw(st.sampled_from([0.0, 0.5, 1.0, 2.0])))
    return QueueConfig(flavors={f: ResourceFlavor(f, {LABEL: f}) for f in flavors}, cluster_queues=queues,
                       cohorts=cohorts, fair_sharing=draw(st.booleans()))


def _covered(config: QueueConfig) -> set[str]:
    return {r for cq in config.cluster_queues.values() for g in cq.resource_groups for r in g.covered_resources}


@st.composite
def workloads(draw: st.DrawFn, config: QueueConfig, index: int, now: float, pods: bool) -> Workload:
    cq = draw(st.sampled_from(sorted(config.cluster_queues)))
    requests = {GPU: draw(st.integers(1, 3))}
    if CPU in _covered(config):
        requests[CPU] = draw(st.integers(0, 8)) * CPU_STEP
    count = draw(st.integers(1, 3))
    pod = pod_for_requests("main", requests) if pods else None
    return Workload(f"w{index}", (PodSet("main", count, requests, pod),), namespace=cq, cluster_queue=cq,
                    priority=draw(st.integers(0, 1 + int(now) // 10)), created=now + index / 1000)


@st.composite
def snapshots(draw: st.DrawFn, config: QueueConfig) -> dict[str, Any]:
    flavors = sorted(config.flavors)
    n = draw(st.integers(1, 2))
    pools = [flavors[i % len(flavors)] for i in range(n)] if draw(st.booleans()) else \
        [draw(st.sampled_from(flavors)) for _ in range(n)]
    return {
        "apiVersion": "placer/v1",
        "kind": "ClusterSnapshot",
        "nodeTypes": {"dgx": {"gpuModel": "A100-SXM4-80GB", "gpus": 8, "cpuMilli": 64000, "memoryMiB": 512000}},
        "nodes": [{"name": f"n{i}", "type": "dgx", "labels": {LABEL: pool}} for i, pool in enumerate(pools)],
    }


# ------------------------------------------------------------------ independent recomputation


@dataclass
class Tree:
    """The cohort forest of a config, recomputed in plain Python: quotas per node and the
    usage of every ClusterQueue from the admitted workloads."""

    config: QueueConfig
    parent: dict[str, Optional[str]] = field(default_factory=dict)  # node -> parent node
    quotas: dict[str, dict[FR, ResourceQuota]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, cohort in self.config.cohorts.items():
            self.parent[f"cohort:{name}"] = None if cohort.parent is None else f"cohort:{cohort.parent}"
            self.quotas[f"cohort:{name}"] = _flat(cohort.resource_groups)
        for name, cq in self.config.cluster_queues.items():
            self.parent[name] = None if cq.cohort is None else f"cohort:{cq.cohort}"
            self.quotas[name] = _flat(cq.resource_groups)
            if cq.cohort is not None:
                self.parent.setdefault(f"cohort:{cq.cohort}", None)
                self.quotas.setdefault(f"cohort:{cq.cohort}", {})

    def children(self, node: str) -> list[str]:
        return [n for n, p in self.parent.items() if p == node]

    def root(self, node: str) -> str:
        while self.parent[node] is not None:
            node = self.parent[node]  # type: ignore[assignment]
        return node

    def frs(self) -> set[FR]:
        return {fr for q in self.quotas.values() for fr in q}

    def subtree(self, node: str, fr: FR) -> int:
        own = self.quotas[node].get(fr, ResourceQuota(0)).nominal
        return own + sum(self.subtree(c, fr) - self.guaranteed(c, fr) for c in self.children(node))

    def guaranteed(self, node: str, fr: FR) -> int:
        """What a node keeps from its parent: its subtree beyond its lendingLimit."""
        lending = self.quotas[node].get(fr, ResourceQuota(0)).lending_limit
        return 0 if lending is None else max(0, self.subtree(node, fr) - lending)

    def usage(self, node: str, fr: FR, by_queue: Mapping[str, Mapping[FR, int]]) -> int:
        if node in self.config.cluster_queues:
            return by_queue.get(node, {}).get(fr, 0)
        return sum(max(0, self.usage(c, fr, by_queue) - self.guaranteed(c, fr)) for c in self.children(node))


def _flat(groups: tuple[ResourceGroup, ...]) -> dict[FR, ResourceQuota]:
    return {(f.name, r): q for g in groups for f in g.flavors for r, q in f.resources.items()}


def queue_usage(admitted: Mapping[str, tuple[str, Mapping[str, Mapping[str, str]]]],
                known: Mapping[str, Workload]) -> dict[str, dict[FR, int]]:
    """Per ClusterQueue, the sum of its admitted workloads' requests in their flavors."""
    out: dict[str, dict[FR, int]] = {}
    for key, (cq, flavors) in admitted.items():
        for ps in known[key].pod_sets:
            for resource, amount in ps.requests.items():
                if amount:
                    fr = (flavors[ps.name][resource], resource)
                    out.setdefault(cq, {})
                    out[cq][fr] = out[cq].get(fr, 0) + amount * ps.count
    return out


def check_quota(tree: Tree, by_queue: Mapping[str, Mapping[FR, int]]) -> None:
    config = tree.config
    for fr in tree.frs():
        for node in tree.parent:
            used = tree.usage(node, fr, by_queue)
            quota = tree.quotas[node].get(fr, ResourceQuota(0))
            subtree = tree.subtree(node, fr)
            if tree.parent[node] is None:
                # (a)/(b) a root (a cohort root or a ClusterQueue alone) uses at most its quota
                assert used <= subtree, (node, fr, used, subtree)
            elif quota.borrowing_limit is not None:
                # (a) a ClusterQueue (or nested cohort) borrows at most its borrowingLimit
                assert used <= subtree + quota.borrowing_limit, (node, fr, used, subtree, quota)
        for root in {tree.root(n) for n in tree.parent}:
            members = [n for n in tree.parent if tree.root(n) == root]
            queues = [n for n in members if n in config.cluster_queues]
            # (b) a tree uses no more than the nominal quota of all its nodes
            nominal = sum(tree.quotas[n].get(fr, ResourceQuota(0)).nominal for n in members)
            assert sum(by_queue.get(q, {}).get(fr, 0) for q in queues) <= nominal, (root, fr)
            # (b) a ClusterQueue borrows no more than the others' lendingLimits (and the cohorts' quota) let it
            for q in queues:
                if root == q:
                    continue
                lent = 0
                for other in members:
                    quota = tree.quotas[other].get(fr, ResourceQuota(0))
                    if other == q:
                        continue
                    if other in config.cluster_queues and quota.lending_limit is not None:
                        lent += min(quota.nominal, quota.lending_limit)
                    else:
                        lent += quota.nominal
                own = tree.quotas[q].get(fr, ResourceQuota(0)).nominal
                assert by_queue.get(q, {}).get(fr, 0) - own <= lent, (q, fr, by_queue.get(q), own, lent)


# ------------------------------------------------------------------------------------ the run


@dataclass
class Run:
    config: QueueConfig
    snapshot: Optional[dict[str, Any]] = None
    never: bool = False

    def __post_init__(self) -> None:
        self.scheduler = QueueScheduler(self.config, self.snapshot)
        self.tree = Tree(self.config)
        self.known: dict[str, Workload] = {}
        self.finished: set[str] = set()
        self.admitted: dict[str, tuple[str, Mapping[str, Mapping[str, str]]]] = {}
        self.preemptions = 0
        self.admissions = 0

    def submit(self, w: Workload) -> None:
        self.scheduler.submit(w)
        self.known[w.key] = w

    def finish(self, key: str) -> None:
        self.scheduler.finish(key)
        self.admitted.pop(key, None)
        self.finished.add(key)

    def cycle(self, now: float) -> AdmissionResult:
        before = dict(self.admitted)
        result = self.scheduler.cycle(now=now)
        admitted_now = [a.workload for a in result.admitted]
        preempted_now = [p.workload for p in result.preempted]
        assert len(set(admitted_now)) == len(admitted_now)
        assert len(set(preempted_now)) == len(preempted_now)
        for a in result.admitted:
            assert a.workload not in before, f"{a.workload} admitted twice"
            assert a.cluster_queue == self.known[a.workload].cluster_queue
            self.admitted[a.workload] = (a.cluster_queue, a.flavors)
        borrowing_before = self.borrowing(before)
        for p in result.preempted:
            assert p.workload in before, f"{p.workload} preempted without holding quota before the cycle"
            assert p.workload not in admitted_now
            self.check_victim(p.workload, p.by, p.reason, borrowing_before)
            del self.admitted[p.workload]
        self.admissions += len(admitted_now)
        self.preemptions += len(preempted_now)
        if self.never:
            assert result.preempted == ()  # (d)
        self.check(result)
        return result

    def borrowing(self, admitted: Mapping[str, tuple[str, Mapping[str, Mapping[str, str]]]]) -> set[str]:
        """The ClusterQueues that use more than their nominal quota of something."""
        return {cq for cq, usage in queue_usage(admitted, self.known).items()
                if any(v > self.tree.quotas[cq].get(fr, ResourceQuota(0)).nominal for fr, v in usage.items())}

    def check_victim(self, victim_key: str, by: str, reason: str, borrowing_before: set[str]) -> None:
        """(g) Kueue's rules for a victim: its reason, its ClusterQueue and its priority."""
        victim, preemptor = self.known[victim_key], self.known[by]
        assert by in self.known and by not in self.admitted, by
        policy = self.config.cluster_queues[preemptor.cluster_queue].preemption  # type: ignore[index]
        lower = victim.priority < preemptor.priority
        if reason == "InClusterQueue":
            assert victim.cluster_queue == preemptor.cluster_queue
            assert policy.within_cluster_queue != "Never"
            assert lower or (policy.within_cluster_queue == "LowerOrNewerEqualPriority"
                             and victim.priority == preemptor.priority and preemptor.created < victim.created)
            return
        assert reason in ("InCohortReclamation", "InCohortReclaimWhileBorrowing", "InCohortFairSharing"), reason
        assert victim.cluster_queue != preemptor.cluster_queue
        assert self.tree.root(victim.cluster_queue) == self.tree.root(preemptor.cluster_queue)  # type: ignore[arg-type]
        assert victim.cluster_queue in borrowing_before, f"{victim_key} reclaimed from a queue that did not borrow"
        assert policy.reclaim_within_cohort == "Any" or (policy.reclaim_within_cohort == "LowerPriority" and lower)
        assert reason != ("InCohortReclaimWhileBorrowing" if self.config.fair_sharing else "InCohortFairSharing")
        if reason == "InCohortReclaimWhileBorrowing":
            assert policy.borrow_within_cohort == "LowerPriority" and lower
            assert policy.max_priority_threshold is None or victim.priority <= policy.max_priority_threshold

    def check(self, result: AdmissionResult) -> None:
        s = self.scheduler
        live = set(self.known) - self.finished
        pending = [p.workload for p in result.pending]
        # (c) admitted xor pending, for every live workload
        assert len(set(pending)) == len(pending)
        assert set(pending) | set(self.admitted) == live
        assert not set(pending) & set(self.admitted)
        for key in live:
            assert s.is_admitted(key) == (key in self.admitted), key
        # flavors: one of the ClusterQueue's flavors for every requested resource
        for key, (cq, flavors) in self.admitted.items():
            group_flavors = {r: {f.name for f in g.flavors} for g in self.config.cluster_queues[cq].resource_groups
                             for r in g.covered_resources}
            for ps in self.known[key].pod_sets:
                for r, amount in ps.requests.items():
                    if amount:
                        assert flavors[ps.name][r] in group_flavors[r]
        by_queue = queue_usage(self.admitted, self.known)
        check_quota(self.tree, by_queue)  # (a), (b)
        # (c) the engine's bookkeeping matches the recomputation
        for name, node in s.tree.queues.items():
            assert {fr: v for fr, v in node.usage.items() if v} == by_queue.get(name, {}), name
        for name, node in s.tree.cohorts.items():
            expected = {fr: self.tree.usage(f"cohort:{name}", fr, by_queue) for fr in self.tree.frs()}
            assert {fr: v for fr, v in node.usage.items() if v} == {fr: v for fr, v in expected.items() if v}, name
        if self.snapshot is not None:
            self.check_cluster()

    def check_cluster(self) -> None:
        s = self.scheduler
        pods, assignments = [], []
        for key in set(self.known) - self.finished:
            placed = s.placed(key)
            if key not in self.admitted:
                assert placed == (), f"{key} holds pods without quota"
                continue
            _, flavors = self.admitted[key]
            (ps,) = self.known[key].pod_sets
            assert len(placed) == ps.count, f"{key}: {len(placed)} of {ps.count} pods placed"  # (e)
            selector = {LABEL: f for f in {flavors[ps.name][r] for r in ps.requests if ps.requests[r]}}
            assert len({flavors[ps.name][r] for r in ps.requests if ps.requests[r]}) == 1
            for a in placed:
                pod: dict[str, Any] = {"name": a.pod, "gpus": ps.requests.get(GPU, 0),
                                       "cpuMilli": ps.requests.get(CPU, 0), "nodeSelector": selector}
                if a.gang is not None:
                    pod["gang"] = a.gang
                pods.append(pod)
                assignments.append(a.to_dict())
        assert len({p["name"] for p in pods}) == len(pods)
        gangs = {p["gang"]: {} for p in pods if "gang" in p}
        report = placer.check_placement(
            self.snapshot, {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods, "gangs": gangs},
            {"apiVersion": "placer/v1", "kind": "PlacementResult", "assignments": assignments, "unschedulable": []})
        assert report == [], report


def play(data: st.DataObject, run: Run, pods: bool) -> Run:
    index = 0
    for step in range(data.draw(st.integers(2, 6), label="steps")):
        now = float(step * 10)
        for _ in range(data.draw(st.integers(0 if step else 2, 6), label="arrivals")):
            run.submit(data.draw(workloads(run.config, index, now, pods), label="workload"))
            index += 1
        if run.admitted:
            for key in data.draw(st.lists(st.sampled_from(sorted(run.admitted)), unique=True, max_size=2),
                                 label="finish"):
                run.finish(key)
        for _ in range(data.draw(st.integers(1, 3), label="cycles")):
            run.cycle(now)
    event(f"preemptions: {min(run.preemptions, 3)}")
    event(f"admissions: {min(run.admissions, 6)}")
    return run


@SETTINGS
@given(data=st.data())
def test_quota_invariants_hold_after_every_cycle(data: st.DataObject) -> None:
    play(data, Run(data.draw(configs(), label="config")), pods=False)


def check_parked_cannot_be_admitted(run: Run, now: float) -> None:
    """(f) Cycles until only parked workloads and StrictFIFO queues are left: each parked
    workload, alone with the admitted ones in a fresh engine, is not admitted either."""
    strict = {name for name, cq in run.config.cluster_queues.items() if cq.queueing_strategy == "StrictFIFO"}
    for _ in range(50):
        result = run.cycle(now)
        if not result.admitted and all(p.inadmissible or p.cluster_queue in strict for p in result.pending):
            break
    else:
        raise AssertionError("the engine does not settle")
    holding = [replace(run.known[key], cluster_queue=None, admission=Admission(cq, flavors))
               for key, (cq, flavors) in run.admitted.items()]
    for parked in [p.workload for p in result.pending if p.inadmissible]:
        alone = QueueScheduler(run.config)
        for w in holding + [run.known[parked]]:
            alone.submit(w)
        assert alone.cycle(now).admitted == (), f"{parked} parked but admissible"


@SETTINGS
@given(data=st.data())
def test_no_preemption_when_every_policy_is_never(data: st.DataObject) -> None:
    run = play(data, Run(data.draw(configs(never=True), label="config"), never=True), pods=False)
    check_parked_cannot_be_admitted(run, now=1000.0)
    assert run.preemptions == 0


@settings(SETTINGS, max_examples=max(1, EXAMPLES * 2 // 3))
@given(data=st.data())
def test_admitted_workloads_are_placed_validly(data: st.DataObject) -> None:
    config = data.draw(configs(), label="config")
    play(data, Run(config, data.draw(snapshots(config), label="snapshot")), pods=True)


@settings(SETTINGS, max_examples=max(1, EXAMPLES * 2 // 5))
@given(data=st.data())
def test_placement_without_preemption(data: st.DataObject) -> None:
    config = data.draw(configs(never=True), label="config")
    run = play(data, Run(config, data.draw(snapshots(config), label="snapshot"), never=True), pods=True)
    assert run.preemptions == 0
