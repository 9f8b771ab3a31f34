"""Independent checking of placement results.

:func:`check_placement` re-derives every constraint of a placement from the documents
alone (it shares no code with the placement kernel), so it can vouch for any placer's
output, this project's included.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable, Mapping, Optional, Sequence

from placer.model import reasons as wording
from placer.model.affinity import namespace_of, required_terms, spread_rules
from placer.model.interpod import has_relations, node_included, topology_value
from placer.model.mig_profiles import table_for
from placer.model.ports import HostPort, port_key
from placer.model import (
    Assignment,
    ClusterSnapshot,
    GangSpec,
    Node,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    gang_shapes,
    load_request,
    load_result,
    load_snapshot,
    replace,
    first_untolerated_taint,
    tolerates_unschedulable,
)
from placer.model.affinity import node_affinity_matches

__all__ = ["check_placement"]


def _domain(node: Node, level: str, levels: Sequence[str]) -> tuple[str, ...] | None:
    """Domain path of ``node`` at ``level``; None when the node lacks a level on the way."""
    if level == "node":
        return (node.name,)
    if level not in levels:
        return None
    path: list[str] = []
    for lv in levels:
        value = node.topology.get(lv)
        if value is None:
            return None
        path.append(value)
        if lv == level:
            return tuple(path)
    return None  # pragma: no cover - level is in levels


def _fmt_domain(d: tuple[str, ...]) -> str:
    return "/".join(d)


def check_placement(
    snapshot: ClusterSnapshot | Mapping[str, Any] | str,
    request: PlacementRequest | Mapping[str, Any] | str,
    result: PlacementResult | Mapping[str, Any] | str,
) -> list[str]:
    """List every way ``result`` breaks the placement rules for ``request`` on ``snapshot``.

    Parameters
    ----------
    snapshot, request, result : model object, dict or file path
        The cluster before placement, what was asked, and the answer to check.

    Returns
    -------
    list of str
        Human-readable violations, each naming the pod and node concerned; empty when
        the result is valid.
    """
    if not isinstance(snapshot, ClusterSnapshot):
        snapshot = load_snapshot(snapshot)
    if not isinstance(request, PlacementRequest):
        request = load_request(request)
    if not isinstance(result, PlacementResult):
        result = load_result(result)
    return _Checker(snapshot, request, result).run()


class _Checker:
    def __init__(
        self, snapshot: ClusterSnapshot, request: PlacementRequest, result: PlacementResult
    ) -> None:
        self.snapshot = snapshot
        self.request = request
        self.result = result
        self.evicted = {name for p in result.preemptions for name in p.victims}
        self.nodes: dict[str, Node] = {
            n.name: replace(n, pods=tuple(p for p in n.pods if p.name not in self.evicted))
            if self.evicted and any(p.name in self.evicted for p in n.pods) else n
            for n in snapshot.nodes
        }
        self.assigned: dict[str, Assignment] = {}
        self.out: list[str] = []

    def run(self) -> list[str]:
        pods = self._check_coverage()
        self._check_preemptions(pods)
        on_node = self._check_assignments(pods)
        for node_name, items in on_node.items():
            self._check_node(self.nodes[node_name], items)
        self._check_gangs(pods)
        self._check_inter_pod(pods)
        self._check_host_ports(pods)
        return self.out

    # -- host ports (kube's NodePorts) ----------------------------------------------------

    def _check_host_ports(self, pods: dict[str, PodRequest]) -> None:
        """Each assigned pod with host ports, in the result's order, conflicts with no port
        held on its node by a running pod (not evicted) or a pod assigned before it."""
        if not any(p.host_ports for p in pods.values()):
            return
        held: dict[str, list[tuple[str, HostPort]]] = defaultdict(list)
        for n in self.nodes.values():
            for p in n.pods:
                held[n.name].extend((p.name, port) for port in p.host_ports)
        for a in self.result.assignments:
            pod = pods.get(a.pod)
            if pod is None or a.node not in self.nodes or self.assigned.get(a.pod) is not a:
                continue
            here = held[a.node]
            for port in pod.host_ports:
                holder = next((name for name, h in here if port.conflicts_with(h)), None)
                if holder is not None:
                    self.out.append(
                        f"pod {a.pod} on node {a.node}: {wording.PORTS} "
                        f"({port_key(port)} conflicts with a port pod {holder} holds)"
                    )
                    break
            here.extend((a.pod, port) for port in pod.host_ports)

    # -- inter-pod rules (InterPodReplay, below) ------------------------------------------

    def _check_inter_pod(self, pods: dict[str, PodRequest]) -> None:
        """Each assigned pod, in the result's order, passes its inter-pod rules and the
        running and earlier pods' anti-affinity among the pods before it."""
        if not any(map(has_relations, pods.values())) and not any(
            p.affinity is not None for n in self.nodes.values() for p in n.pods
        ):
            return
        replay = InterPodReplay(self.nodes.values())
        for a in self.result.assignments:
            pod, node = pods.get(a.pod), self.nodes.get(a.node)
            if pod is None or node is None or self.assigned.get(a.pod) is not a:
                continue
            why = replay.reason(pod, node)
            if why is not None:
                self.out.append(f"pod {a.pod} on node {a.node}: {why}")
            replay.add(node, pod)

    # -- every pod once -------------------------------------------------------------

    def _check_coverage(self) -> dict[str, PodRequest]:
        pods: dict[str, PodRequest] = {}
        for p in self.request.pods:
            if p.name in pods:
                self.out.append(f"pod {p.name}: requested more than once")
            pods[p.name] = p
        seen: dict[str, str] = {}
        for a in self.result.assignments:
            where = f"assigned to node {a.node}"
            if a.pod not in pods:
                self.out.append(f"pod {a.pod}: {where} but not in the request")
            elif a.pod in seen:
                self.out.append(f"pod {a.pod}: {where} but already {seen[a.pod]}")
            else:
                seen[a.pod] = where
                self.assigned[a.pod] = a
        for u in self.result.unschedulable:
            where = "reported unschedulable"
            if u.pod not in pods:
                self.out.append(f"pod {u.pod}: {where} but not in the request")
            elif u.pod in seen:
                self.out.append(f"pod {u.pod}: {where} but already {seen[u.pod]}")
            else:
                seen[u.pod] = where
            if not isinstance(u.reason, str) or not u.reason.strip():
                self.out.append(f"pod {u.pod}: unschedulable without a reason")
        for name in pods:
            if name not in seen:
                self.out.append(f"pod {name}: missing from the result (neither assigned nor unschedulable)")
        return pods

    # -- one assignment at a time ---------------------------------------------------

    def _check_assignments(self, pods: dict[str, PodRequest]) -> dict[str, list[tuple[PodRequest, Assignment]]]:
        on_node: dict[str, list[tuple[PodRequest, Assignment]]] = defaultdict(list)
        for a in self.assigned.values():
            pod = pods[a.pod]
            at = f"pod {a.pod} on node {a.node}"
            if a.gang != pod.gang:
                self.out.append(f"{at}: assignment names gang {a.gang!r}, the pod's gang is {pod.gang!r}")
            node = self.nodes.get(a.node)
            if node is None:
                self.out.append(f"{at}: no such node in the snapshot")
                continue
            hw = node.hardware
            if node.unschedulable and not tolerates_unschedulable(pod.tolerations):
                self.out.append(f"{at}: node is cordoned (unschedulable)")
            if pod.node_name is not None and pod.node_name != node.name:
                self.out.append(f"{at}: the pod's nodeName is {pod.node_name!r}")
            for t in node.taints:
                if first_untolerated_taint((t,), pod.tolerations) is not None:
                    shown = f"{t.key}={t.value}" if t.value else t.key
                    self.out.append(f"{at}: taint {shown}:{t.effect} is not tolerated")
            for k, v in pod.node_selector.items():
                if node.labels.get(k) != v:
                    self.out.append(
                        f"{at}: nodeSelector {k}={v} does not match the node's label "
                        f"{k}={node.labels.get(k)!r}"
                    )
            if not node_affinity_matches({}, pod.affinity, node.labels, node.name):
                self.out.append(f"{at}: the node matches no term of the pod's required node affinity")
            if pod.uses_gpus and pod.gpu_models and hw.gpu_model not in pod.gpu_models:
                self.out.append(
                    f"{at}: GPU model {hw.gpu_model!r} is not one of {list(pod.gpu_models)}"
                )
            if pod.gpu_slots or a.gpu_slots or (pod.gpus and hw.gpu_sharing is not None):
                self._check_slot_assignment(at, pod, a, node)
            if not pod.gpu_slots and len(a.gpus) != pod.gpus:
                self.out.append(f"{at}: got {len(a.gpus)} GPU(s) {list(a.gpus)}, the pod asks for {pod.gpus}")
            if len(set(a.gpus)) != len(a.gpus):
                self.out.append(f"{at}: GPU indices repeat: {list(a.gpus)}")
            unhealthy = set(node.unhealthy_gpus)
            for g in a.gpus:
                if not (0 <= g < hw.gpus):
                    self.out.append(f"{at}: GPU {g} out of range (node has {hw.gpus} GPU(s))")
                elif g in unhealthy:
                    self.out.append(f"{at}: GPU {g} is unhealthy")
            if pod.shared:
                if a.gpu_milli != pod.gpu_milli:
                    self.out.append(
                        f"{at}: shared pod assigned gpuMilli {a.gpu_milli}, it asks for {pod.gpu_milli}"
                    )
            else:
                if a.gpu_milli is not None and a.gpu_milli != 1000:
                    self.out.append(f"{at}: gpuMilli {a.gpu_milli} on a pod that takes whole GPUs")
                if (
                    pod.gpus >= 1
                    and hw.gpu_memory_mib is not None
                    and pod.gpu_memory_mib > hw.gpu_memory_mib
                ):
                    self.out.append(
                        f"{at}: needs {pod.gpu_memory_mib} MiB per GPU, the node's GPUs have "
                        f"{hw.gpu_memory_mib} MiB"
                    )
            if len(a.nics) != pod.nics:
                self.out.append(f"{at}: got {len(a.nics)} NIC(s) {list(a.nics)}, the pod asks for {pod.nics}")
            nic_names = {nic.name for nic in hw.nic_list}
            for nic in a.nics:
                if nic not in nic_names:
                    self.out.append(f"{at}: the node has no NIC {nic!r}")
            if len(set(a.nics)) != len(a.nics):
                self.out.append(f"{at}: NICs repeat: {list(a.nics)}")
            on_node[a.node].append((pod, a))
        return on_node

    def _check_slot_assignment(self, at: str, pod: PodRequest, a: Assignment, node: Node) -> None:
        """A pod of ``gpuSlots`` on a node that shares its GPUs, and nothing else there."""
        sharing = node.hardware.gpu_sharing
        if not pod.gpu_slots:
            if a.gpu_slots:
                self.out.append(f"{at}: gpuSlots {dict(a.gpu_slots)} on a pod that asks for no GPU slots")
            if pod.gpus and sharing is not None:
                self.out.append(
                    f"{at}: the node shares its GPUs ({sharing.strategy}); a pod of whole GPUs or a GPU "
                    "share cannot go there"
                )
            return
        if sharing is None:
            self.out.append(f"{at}: the node does not share its GPUs (no gpuSharing); the pod asks for GPU slots")
            return
        given = sum(a.gpu_slots.values()) if a.gpu_slots else len(a.gpus)
        if given != pod.gpu_slots:
            self.out.append(f"{at}: got {given} slot(s), the pod asks for {pod.gpu_slots}")
        if a.gpu_slots and sorted(a.gpu_slots) != sorted(a.gpus):
            self.out.append(f"{at}: gpus {list(a.gpus)} are not the GPUs of gpuSlots {sorted(a.gpu_slots)}")
        if sharing.strategy == "mps":
            if given > 1:
                self.out.append(f"{at}: {given} slots on an MPS-shared node, which gives one slot per pod")
            cap = node.hardware.gpu_memory_mib
            if cap is not None and pod.gpu_memory_mib > cap // sharing.replicas:
                self.out.append(
                    f"{at}: needs {pod.gpu_memory_mib} MiB of GPU memory, an MPS slot holds "
                    f"{cap // sharing.replicas} MiB"
                )

    def _check_slots(self, node: Node, items: list[tuple[PodRequest, Assignment]]) -> None:
        """Per GPU of a sharing node: slots held at most ``replicas``; under time-slicing,
        the GPU memory of every pod on it at most the GPU's."""
        sharing = node.hardware.gpu_sharing
        new = [(pod, a) for pod, a in items if pod.gpu_slots]
        if sharing is None or not new:
            return
        slots: dict[int, int] = defaultdict(int)
        memory: dict[int, int] = defaultdict(int)
        holders: dict[int, list[str]] = defaultdict(list)
        for rp in node.pods:
            for g, count in rp.gpu_slots.items():
                slots[g] += count
                holders[g].append(rp.name)
            for g, mib in rp.gpu_memory_mib.items():
                memory[g] += mib
        new_on: set[int] = set()
        for pod, a in new:
            held = dict(a.gpu_slots) if a.gpu_slots else {g: 1 for g in a.gpus}
            for g, count in held.items():
                if not 0 <= g < node.hardware.gpus:
                    continue  # reported with the assignment
                slots[g] += count
                memory[g] += pod.gpu_memory_mib
                holders[g].append(a.pod)
                new_on.add(g)
        cap = node.hardware.gpu_memory_mib
        for g in sorted(new_on):
            if slots[g] > sharing.replicas:
                self.out.append(
                    f"node {node.name} GPU {g}: {slots[g]} slots held > replicas {sharing.replicas} "
                    f"({', '.join(holders[g])})"
                )
            if sharing.strategy == "time-slicing" and cap is not None and memory[g] > cap:
                self.out.append(
                    f"node {node.name} GPU {g}: GPU memory {memory[g]} MiB > {cap} MiB shared by time-slicing "
                    f"with pod(s) {', '.join(holders[g])}"
                )

    # -- sums per node --------------------------------------------------------------

    def _check_node(self, node: Node, items: list[tuple[PodRequest, Assignment]]) -> None:
        hw = node.hardware
        names = ", ".join(a.pod for _, a in items)
        # kube's NodeResourcesFit: on a node its running pods over-commit, a new pod that asks
        # for none of a resource is no violation of it (every new pod takes a pod slot)
        for label, running, new, cap in (
            ("cpuMilli", sum(rp.cpu_milli for rp in node.pods), sum(p.cpu_milli for p, _ in items), hw.cpu_milli),
            ("memoryMiB", sum(rp.memory_mib for rp in node.pods), sum(p.memory_mib for p, _ in items), hw.memory_mib),
            ("pods", len(node.pods), len(items), hw.max_pods),
        ):
            used = running + new
            if cap is not None and new > 0 and used > cap:
                self.out.append(
                    f"node {node.name}: {label} over capacity ({used} > {cap}) with pod(s) {names}"
                )
        asked: dict[str, int] = defaultdict(int)
        for rp in node.pods:
            for name, n in rp.resources.items():
                asked[name] += n
        for p, _ in items:
            for name, n in p.resources.items():
                asked[name] += n
        for name in sorted({n for p, _ in items for n in p.resources}):
            offered = node.resources[name].allocatable if name in node.resources else 0
            if asked[name] > offered:
                self.out.append(
                    f"node {node.name}: {name} over allocatable ({asked[name]} > {offered}) with pod(s) {names}"
                )

        self._check_mig(node, items)
        self._check_slots(node, items)
        # Per GPU: who holds it whole, who holds a share (milli, memory), new or running.
        whole: dict[int, list[str]] = defaultdict(list)
        shares: dict[int, list[tuple[str, int]]] = defaultdict(list)
        gpu_mem: dict[int, int] = defaultdict(int)
        new_on: dict[int, list[str]] = defaultdict(list)
        for rp in node.pods:
            for g in rp.gpus:
                whole[g].append(rp.name)
            for g, m in rp.gpu_shares.items():
                shares[int(g)].append((rp.name, m))
            for g, m in rp.gpu_memory_mib.items():
                gpu_mem[int(g)] += m
        for pod, a in items:
            if pod.gpu_slots:
                continue  # slots: _check_slots
            for g in set(a.gpus):
                if not (0 <= g < hw.gpus):
                    continue
                new_on[g].append(a.pod)
                if pod.shared:
                    shares[g].append((a.pod, pod.gpu_milli))
                    gpu_mem[g] += pod.gpu_memory_mib
                else:
                    whole[g].append(a.pod)
        for g in sorted(new_on):
            holders = whole[g] + [name for name, _ in shares[g]]
            if whole[g] and len(holders) > 1:
                self.out.append(
                    f"node {node.name} GPU {g}: held whole by {whole[g][0]} and also by "
                    f"{', '.join(holders[1:])} (new here: {', '.join(new_on[g])})"
                )
                continue
            total = sum(m for _, m in shares[g])
            if total > 1000:
                self.out.append(
                    f"node {node.name} GPU {g}: shares add up to {total} milli > 1000 "
                    f"({', '.join(f'{n}={m}' for n, m in shares[g])})"
                )
            if shares[g] and hw.gpu_memory_mib is not None and gpu_mem[g] > hw.gpu_memory_mib:
                self.out.append(
                    f"node {node.name} GPU {g}: GPU memory {gpu_mem[g]} MiB > {hw.gpu_memory_mib} MiB "
                    f"with pod(s) {', '.join(n for n, _ in shares[g])}"
                )

    def _check_mig(self, node: Node, items: list[tuple[PodRequest, Assignment]]) -> None:
        """MIG instances: the profile asked for, at a valid start of it, on a MIG GPU;
        a used instance exists and is free, a created one only on a dynamic GPU and over
        free slices; no two instances overlap; one media instance per GPU."""
        hw = node.hardware
        table = table_for(hw.gpu_model) if hw.mig is not None else None
        mig_gpus = set(hw.mig_gpus) - set(node.unhealthy_gpus)
        existing: dict[tuple[int, int], tuple[str, str | None]] = {}  # (gpu, start) -> profile, user
        for m in node.mig_instances:
            existing[(m.gpu, m.start)] = (m.profile, None)
        for rp in node.pods:
            for m in rp.mig:
                existing[(m.gpu, m.start)] = (m.profile, rp.name)
        slices: dict[int, list[tuple[int, int, str]]] = defaultdict(list)  # gpu -> (start, end, what)
        media: dict[int, list[str]] = defaultdict(list)
        if table is not None:
            for (g, start), (name, _) in existing.items():
                prof = table.profile(name)
                if prof is not None:
                    slices[g].append((start, start + prof.memory_slices, f"{name} at {start} (existing)"))
                    if prof.media:
                        media[g].append(f"{name} at {start} (existing)")
        taken: dict[tuple[int, int], str] = {}
        for pod, a in items:
            at = f"pod {a.pod} on node {node.name}"
            if pod.mig is None:
                if a.mig:
                    self.out.append(f"{at}: MIG instances assigned to a pod that asks for none")
                continue
            if a.gpus:
                self.out.append(f"{at}: whole GPUs {list(a.gpus)} assigned to a MIG pod")
            if table is None:
                self.out.append(f"{at}: the node has no GPU in MIG mode")
                continue
            wanted = (table.profile(pod.mig.profile) if pod.mig.profile is not None
                      else table.smallest_holding(pod.mig.memory_mib or 0))
            if len(a.mig) != pod.mig.count:
                self.out.append(f"{at}: got {len(a.mig)} MIG instance(s), the pod asks for {pod.mig.count}")
            for use in a.mig:
                what = f"{use.profile} at GPU {use.gpu} slice {use.start}"
                prof = table.profile(use.profile)
                if prof is None or prof is not wanted:
                    self.out.append(
                        f"{at}: {what} is not the profile asked for ({wanted.name if wanted else 'none on the model'})"
                    )
                    continue
                if use.gpu not in mig_gpus:
                    self.out.append(f"{at}: GPU {use.gpu} is not a healthy GPU in MIG mode")
                    continue
                if use.start not in prof.starts:
                    self.out.append(f"{at}: {what}: not a valid start of {prof.name} ({list(prof.starts)})")
                    continue
                key = (use.gpu, use.start)
                if key in taken:
                    self.out.append(f"{at}: {what} is also used by {taken[key]}")
                taken[key] = a.pod
                if use.create:
                    if hw.mig is None or hw.mig.mode != "dynamic":
                        self.out.append(f"{at}: {what} is created on a static GPU")
                    slices[use.gpu].append((use.start, use.start + prof.memory_slices, f"{what} (new, {a.pod})"))
                    if prof.media:
                        media[use.gpu].append(f"{what} (new, {a.pod})")
                else:
                    found = existing.get(key)
                    if found is None or table.profile(found[0]) is not prof:
                        self.out.append(f"{at}: {what} does not exist (create is false)")
                    elif found[1] is not None:
                        self.out.append(f"{at}: {what} is in use by running pod {found[1]}")
        for g, spans in sorted(slices.items()):
            spans.sort()
            reach, widest = -1, ""
            for start, end, what in spans:
                if start < reach:
                    self.out.append(f"node {node.name} GPU {g}: MIG instances overlap: {widest} and {what}")
                if end > reach:
                    reach, widest = end, what
        for g, names in sorted(media.items()):
            if len(names) > 1:
                self.out.append(f"node {node.name} GPU {g}: more than one media (+me) instance: {', '.join(names)}")

    # -- preemption -----------------------------------------------------------------

    def _check_preemptions(self, pods: dict[str, PodRequest]) -> None:
        """Victims run now, once each, are preemptible, of lower priority than their
        preemptor, and take their running gang whole; preemptors may preempt and are
        nominated; nominated pods have a preemption."""
        running = {p.name: (p, n.name) for n in self.snapshot.nodes for p in n.pods}
        gang_pods: dict[str, set[str]] = defaultdict(set)
        for p, _ in running.values():
            if p.gang is not None:
                gang_pods[p.gang].add(p.name)
        listed: dict[str, str] = {}
        preemptors: set[str] = set()
        for pre in self.result.preemptions:
            members = [p for p in pods.values() if p.name == pre.for_ or p.gang == pre.for_]
            what = f"preemption for {pre.for_}"
            if not members:
                self.out.append(f"{what}: no requested pod or gang of this name")
                continue
            preemptors.update(p.name for p in members)
            priority = max(p.priority for p in members)
            if any(p.preemption_policy == "Never" for p in members):
                self.out.append(f"{what}: preemptionPolicy Never, yet it evicts {', '.join(pre.victims)}")
            for victim in pre.victims:
                if victim in listed:
                    self.out.append(f"{what}: victim {victim} is listed again (first for {listed[victim]})")
                listed[victim] = pre.for_
                found = running.get(victim)
                if found is None:
                    self.out.append(f"{what}: victim {victim} is not a running pod")
                    continue
                pod, node = found
                if pod.priority >= priority:
                    self.out.append(f"{what}: victim {victim} on node {node} has priority {pod.priority} >= {priority}")
                if not pod.preemptible:
                    self.out.append(f"{what}: victim {victim} on node {node} is not preemptible")
                if pod.gang is not None:
                    left = gang_pods[pod.gang] - set(pre.victims)
                    if left:
                        self.out.append(
                            f"{what}: victim {victim} belongs to running gang {pod.gang}, whose "
                            f"{', '.join(sorted(left))} would keep running (a gang is evicted whole)"
                        )
        if not self.result.preemptions:
            return  # a pod placed after moves is nominated too (placer.preemption.moves checks those)
        moved_for = {r.for_ for r in self.result.rooms if r.moves} | {m.for_ for m in self.result.moves}
        for a in self.assigned.values():
            if a.nominated and a.pod not in preemptors and a.pod not in moved_for:
                self.out.append(f"pod {a.pod} on node {a.node}: nominated, but nothing is preempted or moved for it")

    # -- gangs ----------------------------------------------------------------------

    def _check_gangs(self, pods: dict[str, PodRequest]) -> None:
        members: dict[str, list[PodRequest]] = defaultdict(list)
        for p in pods.values():
            if p.gang is not None:
                members[p.gang].append(p)
        levels = self.snapshot.topology_levels
        placed_flag: dict[str, bool] = {}
        for gname, gpods in members.items():
            spec = self.request.gangs.get(gname) or GangSpec(gname)
            got = [(p, self.assigned[p.name]) for p in gpods if p.name in self.assigned]
            placed_flag[gname] = len(got) == len(gpods)
            if got and len(got) < len(gpods):
                missing = [p.name for p in gpods if p.name not in self.assigned]
                where = ", ".join(f"{a.pod} on node {a.node}" for _, a in got)
                self.out.append(
                    f"gang {gname}: only {len(got)} of {len(gpods)} pod(s) assigned ({where}); "
                    f"not assigned: {', '.join(missing)}"
                )
                continue
            if not got:
                continue
            located = [(p, a, self.nodes.get(a.node)) for p, a in got]
            if spec.mode == "required" and spec.level is not None:
                self._check_same_domain(gname, f"required {spec.level}", spec.level, located, levels)
            sliced = [located[i] for i in gang_shapes(gpods)[0]] if spec.slices else []
            for sl in spec.slices:
                if sl.size <= 0:
                    continue
                for start in range(0, len(sliced), sl.size):
                    chunk = sliced[start : start + sl.size]
                    self._check_same_domain(
                        gname, f"slice {start // sl.size} ({sl.level}, size {sl.size})", sl.level, chunk, levels
                    )
            if spec.same_gpu_model:
                models: dict[str | None, list[str]] = defaultdict(list)
                for p, a, node in located:
                    if p.gpus >= 1 and node is not None:
                        models[node.hardware.gpu_model].append(f"{a.pod} on node {a.node}")
                if len(models) > 1:
                    desc = "; ".join(f"{m}: {', '.join(w)}" for m, w in models.items())
                    self.out.append(f"gang {gname}: sameGpuModel broken, GPU models used: {desc}")
        for gr in self.result.gangs:
            if gr.name not in placed_flag:
                self.out.append(f"gang {gr.name}: reported in the result but no requested pod is in it")
            elif gr.placed != placed_flag[gr.name]:
                self.out.append(
                    f"gang {gr.name}: reported placed={gr.placed} but its pods are "
                    f"{'all' if placed_flag[gr.name] else 'not all'} assigned"
                )

    def _check_same_domain(
        self,
        gname: str,
        what: str,
        level: str,
        located: list[tuple[PodRequest, Assignment, Node | None]],
        levels: Sequence[str],
    ) -> None:
        first: tuple[str, ...] | None = None
        first_at = ""
        for _, a, node in located:
            if node is None:
                continue  # reported as an unknown node already
            at = f"{a.pod} on node {a.node}"
            d = _domain(node, level, levels)
            if d is None:
                self.out.append(f"gang {gname} {what}: pod {at}: the node is in no {level} domain")
                continue
            if first is None:
                first, first_at = d, at
            elif d != first:
                self.out.append(
                    f"gang {gname} {what}: pod {at} is in {level} {_fmt_domain(d)}, pod {first_at} "
                    f"in {_fmt_domain(first)}"
                )


# -- inter-pod rules: the pods before each assignment, counted from the documents --------


class InterPodReplay:
    """The pods on the nodes, and whether one more pod may go to a node under the rules.

    Parameters
    ----------
    nodes : iterable of Node
        The cluster's nodes, with the pods running on them (evicted ones left out).
    """

    def __init__(self, nodes: Iterable[Node]) -> None:
        self.nodes = list(nodes)
        self.on: list[tuple[Node, Any]] = [(n, p) for n in self.nodes for p in n.pods]

    def add(self, node: Node, pod: Any) -> None:
        """``pod`` runs on ``node`` from now on."""
        self.on.append((node, pod))

    def reason(self, pod: PodRequest, node: Node) -> Optional[str]:
        """kube-scheduler's reason ``node`` turns ``pod`` away for its inter-pod rules; None
        when it passes them."""
        ns = namespace_of(pod.name)
        rules = spread_rules(pod.topology_spread_constraints, pod.labels)
        for rule in rules:
            here = topology_value(node, rule.topology_key)
            if here is None:
                return wording.SPREAD_MISSING_LABEL
            counts: dict[str, int] = {}
            for n in self.nodes:
                if all(topology_value(n, r.topology_key) is not None for r in rules) and node_included(n, pod, rule):
                    counts.setdefault(topology_value(n, rule.topology_key), 0)  # type: ignore[arg-type]
            for n, other in self.on:
                value = topology_value(n, rule.topology_key)
                if value in counts and node_included(n, pod, rule) and all(
                    topology_value(n, r.topology_key) is not None for r in rules
                ) and rule.counts(namespace_of(other.name), ns, other.labels, getattr(other, "terminating", False)):
                    counts[value] += 1  # type: ignore[index]
            least = min(counts.values()) if len(counts) >= rule.min_domains else 0
            if counts.get(here, 0) + int(rule.self_match) - least > rule.max_skew:
                return wording.SPREAD
        affinity, anti = required_terms(pod.affinity, pod.name, pod.labels)
        if affinity:
            matching = [(n, o) for n, o in self.on if all(t.matches(namespace_of(o.name), o.labels) for t in affinity)]
            values = [topology_value(node, t.topology_key) for t in affinity]
            if any(v is None for v in values):
                return wording.POD_AFFINITY
            found = all(any(topology_value(n, t.topology_key) == v for n, _ in matching) for t, v in zip(affinity, values))
            if not found:
                none_yet = not any(topology_value(n, t.topology_key) is not None for n, _ in matching for t in affinity)
                if not (none_yet and all(t.matches(ns, pod.labels) for t in affinity)):
                    return wording.POD_AFFINITY
        for term in anti:
            here = topology_value(node, term.topology_key)
            if here is not None and any(
                topology_value(n, term.topology_key) == here and term.matches(namespace_of(o.name), o.labels)
                for n, o in self.on
            ):
                return wording.POD_ANTI_AFFINITY
        for n, other in self.on:
            for term in required_terms(other.affinity, other.name, other.labels)[1]:
                here = topology_value(node, term.topology_key)
                if here is not None and topology_value(n, term.topology_key) == here and term.matches(ns, pod.labels):
                    return wording.EXISTING_ANTI_AFFINITY
        return None
