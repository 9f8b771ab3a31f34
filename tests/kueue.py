"""Convert Kueue TAS conformance cases (tests/data/conformance/kueue_tas.json) to placer.

Each case of Kueue's ``TestFindTopologyAssignments`` (see the file's ``schema_doc``) becomes
a placer/v1 ``ClusterSnapshot`` and ``PlacementRequest`` (plain dicts), plus what is
needed to compare placer's answer with Kueue's:

- ``levels`` -> ``topologyLevels``: each label key gets a short level name (its last path
  segment without a ``topology-`` prefix: ``cloud.com/topology-rack`` -> ``rack``).
  ``kubernetes.io/hostname`` as the last level is the node itself, placer's implicit
  innermost level ``node``, so it is left out of ``topologyLevels``.
- Capacities: ``cpu`` -> ``cpuMilli``; ``pods`` -> ``maxPods``; one extended resource
  (``nvidia.com/gpu``, ``example.com/gpu``, ...) -> ``gpus`` (whole devices, GPU model
  :data:`GPU_MODEL`); ``memory`` (bytes) -> ``memoryMiB`` in a unit that keeps every
  memory figure of the case an exact integer (see :func:`memory_unit`).
- Kueue counts a resource missing from a node's allocatable as 0 available (a pod that
  requests it fits 0 times), while placer treats a missing capacity as untracked. So every
  resource some pod of the case requests (and ``pods``, which every pod consumes) is given
  on every node, 0 where the node lacks it.
- Not ready or cordoned nodes -> ``unschedulable: true``; taints -> taints; the flavor's
  ``flavor_node_labels`` and a podset's ``node_selector`` -> a ``nodeSelector`` on its pods;
  ``existing_non_tas_pods`` -> running pods on their nodes (one pod slot each).
- Each podset -> one pod entry with ``replicas`` = count; each podset is its own gang, in
  order, except podsets sharing a ``group`` (Kueue's leader + workers), which form one
  gang. Gang ``topology`` = the podset's mode and mapped level (``null`` -> no level);
  ``slice_layers`` -> ``slices`` (hostname -> ``node``).

Where a case cannot be expressed exactly, :class:`NotExpressible` says why.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

HOSTNAME = "kubernetes.io/hostname"
GPU_MODEL = "KUEUE-GPU"
MIB = 1 << 20
_BASIC = ("cpu", "memory", "pods")
_BLOCKING = ("NoSchedule", "NoExecute")
_TERMINATED = ("Succeeded", "Failed")


class NotExpressible(Exception):
    """The case has a feature placer's formats cannot express exactly (the message says which)."""


@dataclass
class PodSetInfo:
    """One Kueue podset and the placer pods it became."""

    name: str
    gang: str
    pod_names: list[str]
    count: int
    expected: Mapping[str, Any]
    mode: str
    level: str | None  # placer level name (None: unconstrained without level)
    slice_size: int  # outermost slice size (1 without slices)


@dataclass
class Converted:
    """A converted case: placer documents plus what the comparison needs."""

    case_id: str
    snapshot: dict[str, Any]
    request: dict[str, Any]
    podsets: list[PodSetInfo]
    gangs: dict[str, list[PodSetInfo]]  # gang name -> its podsets, in order
    kueue_levels: list[str]  # label keys, outermost first (hostname included if given)
    level_names: dict[str, str]  # label key -> placer level name (hostname -> "node")
    lowest_is_hostname: bool
    node_path: dict[str, tuple[str, ...]]  # placer node name -> Kueue level values
    hostname_to_node: dict[str, str]
    memory_unit_bytes: int | None  # bytes per placer "memoryMiB" unit (None: no memory)
    kueue_invisible: list[str] = field(default_factory=list)
    # nodes in the placer snapshot that Kueue's TAS snapshot never contains (not ready,
    # cordoned, or not matching the flavor's node labels): placer counts them in its
    # "0/N nodes", Kueue's "Total nodes" does not.
    notes: list[str] = field(default_factory=list)

    @property
    def placer_levels(self) -> list[str]:
        """Kueue's levels as placer level names, outermost first (``node`` for hostname)."""
        return [self.level_names[k] for k in self.kueue_levels]


# ----------------------------------------------------------------------------- helpers


def level_name(key: str) -> str:
    """Short placer level name of a label key (``cloud.com/topology-block`` -> ``block``)."""
    if key == HOSTNAME:
        return "node"
    short = key.rsplit("/", 1)[-1]
    if short.startswith("topology-"):
        short = short[len("topology-"):]
    return short


def memory_unit(figures: Iterable[int]) -> int:
    """Bytes per placer ``memoryMiB`` unit that keep every memory figure exact.

    One MiB when every figure is a whole number of MiB; otherwise the greatest common
    divisor of the figures (1024 for Kueue's ``memory: 1024`` per-pod requests next to
    1 GiB nodes, i.e. KiB). Fit is linear (sum of requests <= capacity), so dividing every
    figure of a case by the same factor keeps every fit / no-fit decision exact.
    """
    g = 0
    for f in figures:
        g = math.gcd(g, int(f))
    if g == 0 or g % MIB == 0:
        return MIB
    return g


def _resolve_nodes(case: Mapping[str, Any], fixtures: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "nodes" in case:
        return list(case["nodes"])
    name = case.get("nodes_fixture")
    if name is None or name not in fixtures:
        raise NotExpressible(f"case has no nodes and no known nodes_fixture ({name!r})")
    return list(fixtures[name])


def _count_in(requests: Mapping[str, int], free: Mapping[str, int]) -> int:
    """Kueue's ``Requests.CountIn``: how many times ``requests`` fits in ``free``
    (a resource missing from ``free`` has 0; ``pods`` is part of ``requests``)."""
    best: int | None = None
    for r, q in requests.items():
        if q <= 0:
            continue
        n = max(free.get(r, 0), 0) // q
        best = n if best is None else min(best, n)
    return best if best is not None else 1 << 30


# ----------------------------------------------------------------------------- convert


def convert(case: Mapping[str, Any], fixtures: Mapping[str, Any]) -> Converted:
    """Build the placer snapshot and request of one Kueue case.

    Raises
    ------
    NotExpressible
        When the case uses something placer's formats cannot represent exactly.
    """
    cid = case["id"]
    levels: list[str] = list(case["levels"])
    if not levels:
        raise NotExpressible("no topology levels")
    if HOSTNAME in levels[:-1]:
        raise NotExpressible(
            f"{HOSTNAME} is a level above the lowest; placer's node level is always innermost"
        )
    lowest_is_hostname = levels[-1] == HOSTNAME
    level_names: dict[str, str] = {}
    used_names: set[str] = set()
    for k in levels:
        n = level_name(k)
        if n in used_names or (n == "node" and k != HOSTNAME) or not n:
            raise NotExpressible(f"level key {k!r} maps to a clashing placer level name {n!r}")
        used_names.add(n)
        level_names[k] = n
    outer_levels = [k for k in levels if k != HOSTNAME]

    podsets = list(case["podsets"])
    if not podsets:
        raise NotExpressible("no podsets")

    # ---- resources requested by some podset; one extended resource at most -> gpus
    requested: set[str] = {"pods"}
    extended: set[str] = set()
    for ps in podsets:
        for r, q in ps["per_pod_requests"].items():
            if r == "pods":
                raise NotExpressible("a podset requests 'pods' explicitly; placer counts one slot per pod")
            if q:
                requested.add(r)
            if r not in _BASIC:
                extended.add(r)
    nodes_in = _resolve_nodes(case, fixtures)
    existing = list(case.get("existing_non_tas_pods") or [])
    for p in existing:
        extended.update(r for r in p.get("requests", {}) if r not in _BASIC)
    extended_req = {r for r in extended if r in requested}
    if len(extended_req) > 1:
        raise NotExpressible(
            f"pods request several extended resources {sorted(extended_req)}; placer has one "
            "device count (gpus)"
        )
    gpu_res = next(iter(extended_req), None)
    if gpu_res is None and len(extended) == 1:
        gpu_res = next(iter(extended))  # present but not requested: harmless either way
    for r in requested:
        if r not in _BASIC and r != gpu_res:
            raise NotExpressible(f"resource {r!r} has no placer equivalent")

    # ---- memory unit
    mem_figures: list[int] = []
    for n in nodes_in:
        if "memory" in n.get("allocatable", {}):
            mem_figures.append(n["allocatable"]["memory"])
    for p in existing:
        if "memory" in p.get("requests", {}):
            mem_figures.append(p["requests"]["memory"])
    for ps in podsets:
        if "memory" in ps["per_pod_requests"]:
            mem_figures.append(ps["per_pod_requests"]["memory"])
    mem_unit = memory_unit(mem_figures) if mem_figures else None
    notes: list[str] = []
    if mem_unit is not None and mem_unit != MIB:
        notes.append(
            f"memory figures are not whole MiB; memoryMiB holds units of {mem_unit} bytes "
            "(every memory figure of the case divided by the same factor: fit is unchanged)"
        )

    def mem(v: int) -> int:
        assert mem_unit is not None and v % mem_unit == 0
        return v // mem_unit

    # ---- flavor labels, pod selectors, tolerations
    flavor_labels: dict[str, str] = dict(case.get("flavor_node_labels") or {})
    if not lowest_is_hostname:
        # Kueue matches taints and pod nodeSelectors only when the lowest level is the
        # hostname (matchNode under isLowestLevelNode); above that, leaves aggregate
        # capacity and tainted / unselected nodes still count.
        for ps in podsets:
            if ps.get("node_selector"):
                raise NotExpressible(
                    "pod node_selector with a lowest level above hostname: Kueue ignores it "
                    "there, placer cannot"
                )
        for n in nodes_in:
            if any(t.get("effect") in _BLOCKING for t in n.get("taints") or []):
                raise NotExpressible(
                    f"node {n['name']} has a blocking taint while the lowest level is not the "
                    "hostname: Kueue ignores taints there, placer cannot"
                )

    # ---- nodes
    hostname_to_node: dict[str, str] = {}
    node_path: dict[str, tuple[str, ...]] = {}
    invisible: list[str] = []
    out_nodes: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    gpu_next: dict[str, int] = {}
    for n in nodes_in:
        labels = dict(n.get("labels") or {})
        values = [labels.get(k) for k in levels]
        if any(v is None for v in values):
            # Kueue's nodes cache only holds nodes carrying every level label.
            notes.append(f"node {n['name']} lacks a topology label: left out, as Kueue does")
            continue
        if lowest_is_hostname:
            h = labels[HOSTNAME]
            if h in hostname_to_node:
                raise NotExpressible(f"two nodes share hostname label {h!r} (one Kueue leaf)")
            hostname_to_node[h] = n["name"]
        node_path[n["name"]] = tuple(values)  # type: ignore[arg-type]
        alloc = dict(n.get("allocatable") or {})
        for r in alloc:
            if r not in _BASIC and r != gpu_res:
                notes.append(f"node {n['name']}: allocatable {r!r} not requested by any pod, ignored")
        d: dict[str, Any] = {"name": n["name"]}
        if outer_levels:
            d["topology"] = {level_names[k]: labels[k] for k in outer_levels}
        if labels:
            d["labels"] = labels

        def cap(r: str) -> int | None:
            if r in alloc:
                return int(alloc[r])
            return 0 if r in requested else None  # Kueue: missing allocatable = 0

        c = cap("cpu")
        if c is not None:
            d["cpuMilli"] = c
        m = cap("memory")
        if m is not None:
            d["memoryMiB"] = mem(m)
        p = cap("pods")
        d["maxPods"] = p if p is not None else 0
        if gpu_res is not None:
            g = cap(gpu_res)
            if g:
                if g > 64:
                    raise NotExpressible(f"node {n['name']}: {g} {gpu_res} is over placer's 64 GPUs per node")
                d["gpus"] = g
                d["gpuModel"] = GPU_MODEL
        taints = []
        for t in n.get("taints") or []:
            tt = {"key": t["key"], "effect": t["effect"]}
            if t.get("value"):
                tt["value"] = t["value"]
            taints.append(tt)
        if taints:
            d["taints"] = taints
        cordoned = not n.get("ready", True) or bool(n.get("unschedulable", False))
        if cordoned:
            d["unschedulable"] = True
        if cordoned or any(labels.get(k) != v for k, v in flavor_labels.items()):
            invisible.append(n["name"])
        out_nodes.append(d)
        by_name[n["name"]] = d

    # ---- existing non-TAS pods: their requests and one pod slot each
    for i, p in enumerate(existing):
        if p.get("phase") in _TERMINATED:
            continue  # Kueue's non-TAS usage cache skips terminated pods
        d = by_name.get(p["node"])
        if d is None:
            notes.append(f"existing pod {p['name']} is on node {p['node']}, not in the snapshot")
            continue
        rp: dict[str, Any] = {"name": f"non-tas/{p['name']}-{i}"}
        req = p.get("requests") or {}
        for r, q in req.items():
            if r == "cpu":
                rp["cpuMilli"] = int(q)
            elif r == "memory":
                rp["memoryMiB"] = mem(int(q))
            elif r == gpu_res:
                start = gpu_next.get(d["name"], 0)
                rp["gpus"] = list(range(start, start + int(q)))
                gpu_next[d["name"]] = start + int(q)
            elif r == "pods":
                raise NotExpressible("an existing pod requests 'pods' explicitly")
            else:
                notes.append(f"existing pod {p['name']}: request {r!r} ignored (no pod requests it)")
        d.setdefault("pods", []).append(rp)
    # Kueue lets non-TAS usage exceed allocatable (free < 0: nothing fits); placer rejects
    # such a snapshot, so raise the capacity to the usage (free 0: nothing that asks fits).
    for d in out_nodes:
        pods = d.get("pods") or []
        for key, used in (
            ("cpuMilli", sum(rp.get("cpuMilli", 0) for rp in pods)),
            ("memoryMiB", sum(rp.get("memoryMiB", 0) for rp in pods)),
            ("maxPods", len(pods)),
        ):
            if key in d and used > d[key]:
                notes.append(f"node {d['name']}: non-TAS usage {used} over {key} {d[key]}: capacity raised to it (free 0)")
                d[key] = used
        gused = gpu_next.get(d["name"], 0)
        if gused > d.get("gpus", 0):
            notes.append(f"node {d['name']}: non-TAS pods hold more {gpu_res} than allocatable: capacity raised (free 0)")
            d["gpus"] = gused
            d["gpuModel"] = GPU_MODEL

    # ---- aggregated leaves (lowest level above hostname) must pack like their nodes
    if not lowest_is_hostname:
        _check_leaf_aggregation(podsets, nodes_in, node_path, existing, gpu_res)

    # ---- pods and gangs
    pods_out: list[dict[str, Any]] = []
    gangs_out: dict[str, dict[str, Any]] = {}
    infos: list[PodSetInfo] = []
    gang_members: dict[str, list[PodSetInfo]] = {}
    used_pod_names: set[str] = set()
    for idx, ps in enumerate(podsets):
        ps_name = ps.get("name") or f"ps{idx}"
        if ps_name in used_pod_names:
            ps_name = f"{ps_name}-{idx}"
        used_pod_names.add(ps_name)
        group = ps.get("group")
        gang = f"{cid}/{group}" if group else (f"{cid}/{ps_name}" if len(podsets) > 1 else cid)
        topo = ps.get("topology") or {"mode": "unconstrained", "level": None}
        mode = topo.get("mode", "unconstrained")
        if mode not in ("required", "preferred", "unconstrained"):
            raise NotExpressible(f"podset {ps_name}: topology mode {mode!r}")
        lvl_key = topo.get("level")
        if lvl_key is not None and lvl_key not in level_names:
            raise NotExpressible(f"podset {ps_name}: level {lvl_key!r} is not a level of the topology")
        level = level_names[lvl_key] if lvl_key is not None else None
        slices = []
        for sl in topo.get("slice_layers") or []:
            if sl["level"] not in level_names:
                raise NotExpressible(f"podset {ps_name}: slice level {sl['level']!r} unknown")
            slices.append({"level": level_names[sl["level"]], "size": int(sl["size"])})
        gang_topo: dict[str, Any] = {"mode": mode}
        if level is not None:
            gang_topo["level"] = level
        spec: dict[str, Any] = {"topology": gang_topo}
        if slices:
            spec["slices"] = slices
        if gang in gangs_out:
            prev = gangs_out[gang]
            if prev != spec:
                raise NotExpressible(
                    f"grouped podsets of gang {gang} ask for different topologies {prev} vs {spec}"
                )
            if slices:
                raise NotExpressible(
                    "grouped podsets with slices: placer's slices run over the whole gang, "
                    "Kueue's over the workers only"
                )
        else:
            gangs_out[gang] = spec

        reqs = ps["per_pod_requests"]
        pod: dict[str, Any] = {"name": ps_name, "replicas": int(ps["count"]), "gang": gang}
        if reqs.get("cpu"):
            pod["cpuMilli"] = int(reqs["cpu"])
        if reqs.get("memory"):
            pod["memoryMiB"] = mem(int(reqs["memory"]))
        if gpu_res is not None and reqs.get(gpu_res):
            pod["gpus"] = int(reqs[gpu_res])
        selector = dict(flavor_labels)
        for k, v in (ps.get("node_selector") or {}).items():
            if k in selector and selector[k] != v:
                raise NotExpressible(f"podset {ps_name}: nodeSelector {k}={v} contradicts the flavor's {selector[k]}")
            selector[k] = v
        if selector:
            pod["nodeSelector"] = selector
        tols = list(ps.get("tolerations") or []) + list(case.get("flavor_tolerations") or [])
        if tols:
            pod["tolerations"] = tols
        pods_out.append(pod)
        info = PodSetInfo(
            name=ps_name,
            gang=gang,
            pod_names=[f"{ps_name}-{r}" for r in range(int(ps["count"]))],
            count=int(ps["count"]),
            expected=ps["expected"],
            mode=mode,
            level=level,
            slice_size=slices[0]["size"] if slices else 1,
        )
        infos.append(info)
        gang_members.setdefault(gang, []).append(info)

    # Grouped podsets must sit next to each other so the gang's pods keep their order.
    order = [p["gang"] for p in pods_out]
    for g in gang_members:
        first = order.index(g)
        if order[first : first + len(gang_members[g])] != [g] * len(gang_members[g]):
            raise NotExpressible(f"podsets of group {g} are not adjacent")

    snapshot: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot"}
    if outer_levels:
        snapshot["topologyLevels"] = [level_names[k] for k in outer_levels]
    snapshot["nodes"] = out_nodes
    request = {
        "apiVersion": "placer/v1",
        "kind": "PlacementRequest",
        "policy": "best-fit",
        "seed": 0,
        "pods": pods_out,
        "gangs": gangs_out,
    }
    return Converted(
        case_id=cid,
        snapshot=snapshot,
        request=request,
        podsets=infos,
        gangs=gang_members,
        kueue_levels=levels,
        level_names=level_names,
        lowest_is_hostname=lowest_is_hostname,
        node_path=node_path,
        hostname_to_node=hostname_to_node,
        memory_unit_bytes=mem_unit,
        kueue_invisible=invisible,
        notes=notes,
    )


def _check_leaf_aggregation(
    podsets: Sequence[Mapping[str, Any]],
    nodes_in: Sequence[Mapping[str, Any]],
    node_path: Mapping[str, tuple[str, ...]],
    existing: Sequence[Mapping[str, Any]],
    gpu_res: str | None,
) -> None:
    """When the lowest level is above the hostname, Kueue sums its nodes' capacity into one
    leaf and fits pods into the sum; placer fits pods into nodes. The case is exact only
    if, for every podset's request, the sum over a leaf's nodes of what fits per node equals
    what fits into the summed capacity."""
    free: dict[str, dict[str, int]] = {}
    for n in nodes_in:
        if n["name"] not in node_path or not n.get("ready", True) or n.get("unschedulable"):
            continue
        free[n["name"]] = {r: int(v) for r, v in (n.get("allocatable") or {}).items()}
    for p in existing:
        if p.get("phase") in _TERMINATED or p["node"] not in free:
            continue
        f = free[p["node"]]
        for r, q in (p.get("requests") or {}).items():
            f[r] = f.get(r, 0) - int(q)
        f["pods"] = f.get("pods", 0) - 1
    leaves: dict[tuple[str, ...], list[str]] = {}
    for name in free:
        leaves.setdefault(node_path[name], []).append(name)
    for ps in podsets:
        req = {r: int(q) for r, q in ps["per_pod_requests"].items() if q}
        req["pods"] = 1
        for leaf, names in leaves.items():
            agg: dict[str, int] = {}
            for nm in names:
                for r, v in free[nm].items():
                    agg[r] = agg.get(r, 0) + v
            per_node = sum(_count_in(req, free[nm]) for nm in names)
            whole = _count_in(req, agg)
            if per_node != whole:
                raise NotExpressible(
                    f"leaf {'/'.join(leaf)}: Kueue fits {whole} pod(s) of podset "
                    f"{ps.get('name') or '?'} into the leaf's summed capacity, its nodes hold "
                    f"only {per_node}; placer places pods on nodes"
                )


# ----------------------------------------------------------------------------- assignments


def kueue_full_paths(conv: Converted, expected: Mapping[str, Any]) -> dict[tuple[str, ...], int]:
    """Kueue's expected assignment as full topology paths (all levels) -> pod count.

    Kueue gives only the hostname when the hostname is the lowest level: the outer values
    are then read from that node's labels.
    """
    exp_levels = list(expected["levels"])
    out: dict[tuple[str, ...], int] = {}
    for dom in expected["domains"]:
        values = tuple(dom["values"])
        if exp_levels == [HOSTNAME] and conv.lowest_is_hostname:
            node = conv.hostname_to_node[values[0]]
            path = conv.node_path[node]
        elif exp_levels == conv.kueue_levels:
            path = values
        else:
            raise NotExpressible(f"expected assignment in levels {exp_levels}, topology {conv.kueue_levels}")
        out[path] = out.get(path, 0) + int(dom["count"])
    return out


def placer_full_paths(conv: Converted, result: Any, pod_names: Iterable[str]) -> dict[tuple[str, ...], int]:
    """Placer's assignments of ``pod_names`` summed per full topology path (all levels)."""
    wanted = set(pod_names)
    out: dict[tuple[str, ...], int] = {}
    for a in result.assignments:
        if a.pod in wanted:
            path = conv.node_path[a.node]
            out[path] = out.get(path, 0) + 1
    return out


def in_kueue_form(conv: Converted, full: Mapping[tuple[str, ...], int]) -> list[tuple[tuple[str, ...], int]]:
    """Full paths -> Kueue's output form (hostname only, or all levels), sorted by path."""
    rows = sorted(full.items())
    if conv.lowest_is_hostname:
        return [((path[-1],), c) for path, c in rows]
    return [(path, c) for path, c in rows]


def placer_assignment(conv: Converted, result: Any, pod_names: Iterable[str]) -> list[tuple[tuple[str, ...], int]]:
    """Placer's assignment per domain in the form of Kueue's expected answer."""
    return in_kueue_form(conv, placer_full_paths(conv, result, pod_names))


def domains_per_level(conv: Converted, full: Mapping[tuple[str, ...], int]) -> list[tuple[str, int]]:
    """Distinct domains used at each level, outermost first: ``[(level name, count), ...]``."""
    out = []
    for i, key in enumerate(conv.kueue_levels):
        used = {path[: i + 1] for path, c in full.items() if c > 0}
        out.append((conv.level_names[key], len(used)))
    return out


# ----------------------------------------------------------------------------- reasons

_FIT_NONE = re.compile(r"topology \"(?P<topo>[^\"]*)\" doesn't allow to fit any of (?P<n>\d+) (?P<unit>pod|slice)\(s\)")
_FIT_SOME = re.compile(
    r"topology \"(?P<topo>[^\"]*)\" allows to fit only (?P<k>\d+) out of (?P<n>\d+) (?P<unit>pod|slice)\(s\)"
)
_TOTAL = re.compile(r"Total nodes: (?P<total>\d+); excluded: (?P<excluded>.*)$")
_EXCL_PLAIN = re.compile(r"(?<![\w\"])(nodeSelector|affinity|topologyDomain): (\d+)")
_EXCL_ARG = re.compile(r"(taint|resource) \"([^\"]*)\": (\d+)")


@dataclass
class KueueFailure:
    """What a Kueue failure message says."""

    fit: int | None  # slices/pods that fit (0 for "doesn't allow to fit any")
    total: int | None
    unit: str | None  # "pod" or "slice"
    total_nodes: int | None
    excluded: dict[tuple[str, str | None], int]  # (kind, argument) -> node count


def parse_kueue_reason(reason: str) -> KueueFailure:
    """Parse Kueue's ``notFitMessage``:
    ``topology "t" doesn't allow to fit any of N pod(s)`` /
    ``topology "t" allows to fit only K out of N pod(s)``, optionally followed by
    ``. Total nodes: T; excluded: nodeSelector: 2, resource "cpu": 1, taint "k=v:E": 1``.
    The multi-layer message (``...; a/b slice(s) fit on level X``) has no overall count.
    """
    fit = total = None
    unit = None
    m = _FIT_NONE.search(reason)
    if m:
        fit, total, unit = 0, int(m["n"]), m["unit"]
    else:
        m = _FIT_SOME.search(reason)
        if m:
            fit, total, unit = int(m["k"]), int(m["n"]), m["unit"]
    total_nodes = None
    excluded: dict[tuple[str, str | None], int] = {}
    t = _TOTAL.search(reason)
    if t:
        total_nodes = int(t["total"])
        text = t["excluded"]
        for kind, arg, cnt in _EXCL_ARG.findall(text):
            excluded[(kind, arg)] = int(cnt)
        stripped = _EXCL_ARG.sub("", text)
        for kind, cnt in _EXCL_PLAIN.findall(stripped):
            excluded[(kind, None)] = int(cnt)
    return KueueFailure(fit, total, unit, total_nodes, excluded)


def parse_kube_counts(reason: str) -> tuple[int | None, dict[str, int]]:
    """From placer's ``0/N nodes are available: 2 phrase, 1 phrase.`` the N and the
    count of each phrase (the counts may follow other text on the same line)."""
    m = re.search(r"0/(\d+) nodes are available:?(.*)", reason)
    if not m:
        return None, {}
    body = m.group(2).strip().rstrip(".")
    counts: dict[str, int] = {}
    for part in re.split(r",\s+(?=\d+ )", body):
        pm = re.match(r"(\d+) (.+)$", part.strip())
        if pm:
            counts[pm.group(2).strip().rstrip(".")] = counts.get(pm.group(2).strip().rstrip("."), 0) + int(pm.group(1))
    return int(m.group(1)), counts
