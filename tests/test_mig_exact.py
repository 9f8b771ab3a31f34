"""``placer.mig.exact``: the CP-SAT optimum of placing MIG pods together, against a brute
force written here from the bundled table's raw JSON (start + size per placement); and the
online MIG choices against each other and against that optimum.
"""
from __future__ import annotations

import json
import random
from functools import lru_cache
from importlib import resources

import pytest
from ortools.sat.python import cp_model

import placer
from placer.exceptions import InvalidInputError
from placer.mig.exact import add_mig_pods, solve_mig
from placer.model import MigRequest, PodRequest

RAW = json.loads((resources.files("placer") / "data" / "mig_profiles.json").read_text())
MODEL = "A100-SXM4-40GB"
NODE_CPU = 8000


def node(name: str, gpus: int, mode: str = "dynamic", running=(), free=(), cpu: int = NODE_CPU,
         model: str = MODEL) -> dict:
    return {
        "name": name, "gpus": gpus, "gpuModel": model, "cpuMilli": cpu, "memoryMiB": 65536,
        "mig": {"gpus": "all", "mode": mode},
        "migInstances": [{"gpu": g, "profile": p, "start": s} for g, p, s in free],
        "pods": [{"name": f"{name}-run{k}", "mig": [{"gpu": g, "profile": p, "start": s}]}
                 for k, (g, p, s) in enumerate(running)],
    }


def snapshot(*nodes: dict) -> dict:
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": list(nodes)}


def pod(name: str, profile: str, count: int = 1, cpu: int = 1000) -> PodRequest:
    return PodRequest(name, cpu_milli=cpu, mig=MigRequest(profile=profile, count=count))


def raw_profile(name: str, model: str = MODEL) -> dict:
    return next(p for p in RAW[model]["profiles"] if p["name"] == name)


def raw_masks(name: str, model: str = MODEL) -> list[tuple[int, int]]:
    """(start, slice mask) of each valid placement, from the raw facts."""
    return [(pl["start"], ((1 << pl["size"]) - 1) << pl["start"]) for pl in raw_profile(name, model)["placements"]]


def brute_best_slices(nodes: list[dict], pods: list[PodRequest]) -> int:
    """The most memory slices the pods can take together, by trying every subset and layout."""
    gpus = [(i, g) for i, n in enumerate(nodes) for g in range(n["gpus"])]
    busy0, media0, count0, free0 = [], [], [], []
    for i, g in gpus:
        n = nodes[i]
        mine = [(m["profile"], m["start"], False) for m in n["migInstances"] if m["gpu"] == g]
        mine += [(m["profile"], m["start"], True) for p in n["pods"] for m in p["mig"] if m["gpu"] == g]
        busy0.append(sum(dict(raw_masks(p))[s] for p, s, _ in mine))
        media0.append(any(raw_profile(p)["mediaExtensions"] for p, _, _ in mine))
        count0.append(tuple(sorted(p for p, _, _ in mine)))
        free0.append(frozenset((p, s) for p, s, used in mine if not used))
    cpu0 = tuple(n["cpuMilli"] - 0 for n in nodes)

    def single(k: int, profile: str, busy, media, counts, free):
        """Every way one instance of ``profile`` goes on GPU k: (start, created)."""
        out = [(s, False) for p, s in free[k] if p == profile]
        if nodes[gpus[k][0]]["mig"]["mode"] == "dynamic":
            raw = raw_profile(profile)
            if not (raw["mediaExtensions"] and media[k]) and counts[k].count(profile) < raw["maxCount"]:
                out += [(s, True) for s, m in raw_masks(profile) if not m & busy[k]]
        return out

    @lru_cache(maxsize=None)
    def best(i: int, busy, media, counts, free, cpu) -> int:
        if i == len(pods):
            return 0
        p = pods[i]
        top = best(i + 1, busy, media, counts, free, cpu)  # left out
        profile, need = p.mig.profile, p.mig.count
        size = raw_profile(profile)["memorySlices"]

        def put(left: int, first_gpu: int, busy, media, counts, free, node: int) -> int:
            if left == 0:
                cpu2 = list(cpu)
                cpu2[node] -= p.cpu_milli
                return size * need + best(i + 1, busy, media, counts, free, tuple(cpu2))
            result = -1
            for k in range(first_gpu, len(gpus)):
                if gpus[k][0] != node:
                    continue
                for start, created in single(k, profile, busy, media, counts, free):
                    b, m, c, f = list(busy), list(media), list(counts), list(free)
                    if created:
                        b[k] |= dict(raw_masks(profile))[start]
                        m[k] = m[k] or raw_profile(profile)["mediaExtensions"]
                        c[k] = tuple(sorted(c[k] + (profile,)))
                    else:
                        f[k] = f[k] - {(profile, start)}
                    result = max(result, put(left - 1, k, tuple(b), tuple(m), tuple(c), tuple(f), node))
            return result

        for node in range(len(nodes)):
            if cpu[node] >= p.cpu_milli:
                top = max(top, put(need, 0, busy, media, counts, free, node))
        return top

    return best(0, tuple(busy0), tuple(media0), tuple(count0), tuple(free0), cpu0)


def random_case(seed: int) -> tuple[list[dict], list[PodRequest]]:
    rng = random.Random(seed)
    names = [p["name"] for p in RAW[MODEL]["profiles"]]
    nodes = []
    for i in range(rng.randint(1, 2)):
        gpus = rng.randint(1, 2)
        mode = rng.choice(["dynamic", "dynamic", "static"])
        running, free, busy = [], [], [0] * gpus
        media = [False] * gpus
        for _ in range(rng.randint(0, 3)):
            g, name = rng.randrange(gpus), rng.choice(names)
            start, mask = rng.choice(raw_masks(name))
            if busy[g] & mask or (raw_profile(name)["mediaExtensions"] and media[g]):
                continue
            busy[g] |= mask
            media[g] |= raw_profile(name)["mediaExtensions"]
            (running if rng.random() < 0.4 else free).append((g, name, start))
        nodes.append(node(f"n{i}", gpus, mode, running, free, cpu=rng.choice([3000, NODE_CPU])))
    pods = [pod(f"p{k}", rng.choice(names), rng.choice([1, 1, 1, 2])) for k in range(rng.randint(1, 4))]
    return nodes, pods


# ----------------------------------------------------------------------------- the optimum


@pytest.mark.parametrize("seed", range(40))
def test_optimum_matches_brute_force_and_is_a_valid_placement(seed):
    nodes, pods = random_case(seed)
    snap = snapshot(*nodes)
    solution = solve_mig(placer.Cluster(snap), pods, time_limit_s=10)
    assert solution.status == "optimal"
    assert solution.objective == solution.bound == solution.slices == brute_best_slices(nodes, pods)
    request = placer.PlacementRequest(pods=tuple(pods))
    assert placer.check_placement(snap, request, solution.result()) == []


def test_the_optimum_chooses_which_pods_to_leave_out():
    # a 1g.5gb first would break the 4g.20gb and the 3g.20gb both: the optimum drops it
    snap = snapshot(node("a", 1))
    pods = [pod("small", "1g.5gb"), pod("big", "4g.20gb"), pod("mid", "3g.20gb")]
    solution = solve_mig(placer.Cluster(snap), pods)
    assert (solution.status, solution.slices) == ("optimal", 8)
    assert set(solution.placed) == {"big", "mid"}
    by_pods = solve_mig(placer.Cluster(snap), pods, objective="pods")
    assert by_pods.objective == 2  # 1g + 3g or 4g + 3g: two pods either way


def test_cpu_and_count_all_or_nothing_on_one_node():
    snap = snapshot(node("a", 2, cpu=1500), node("b", 1))
    pods = [pod("pair", "3g.20gb", count=2), pod("one", "3g.20gb", cpu=1000)]
    solution = solve_mig(placer.Cluster(snap), pods)
    assert solution.placed["pair"][0] == "a" and len(solution.placed["pair"][1]) == 2
    assert solution.placed["one"][0] == "b"  # a's CPU is taken by the pair
    assert solution.slices == 12
    alone = solve_mig(placer.Cluster(snapshot(node("a", 1))), [pod("pair", "3g.20gb", count=3)])
    assert (alone.status, alone.placed, alone.slices) == ("optimal", {}, 0)  # all or nothing


def test_static_gpus_use_existing_free_instances_only():
    snap = snapshot(node("a", 1, mode="static", free=[(0, "1g.5gb", 0), (0, "2g.10gb", 4)]))
    pods = [pod("x", "1g.5gb"), pod("y", "1g.5gb"), pod("z", "2g.10gb")]
    solution = solve_mig(placer.Cluster(snap), pods)
    assert solution.slices == 3
    assert {n: [(u.start, u.create) for u in uses] for n, (_, uses) in solution.placed.items()} in (
        {"x": [(0, False)], "z": [(4, False)]}, {"y": [(0, False)], "z": [(4, False)]})


def test_the_model_builder_takes_a_gang_constraint_and_an_objective_of_the_caller():
    cluster = placer.Cluster(snapshot(node("a", 1)))
    pods = [pod("g0", "4g.20gb"), pod("g1", "4g.20gb"), pod("solo", "3g.20gb")]
    model = cp_model.CpModel()
    built = add_mig_pods(model, cluster.session, pods)
    model.Add(built.placed[0] == built.placed[1])  # g0 and g1: a gang, both or neither
    model.Maximize(sum(built.placed))
    solver = cp_model.CpSolver()
    assert solver.Solve(model) == cp_model.OPTIMAL
    assert [solver.BooleanValue(v) for v in built.placed] == [False, False, True]
    assert list(built.uses(solver)) == [2]


def test_solve_mig_refuses_bad_input():
    cluster = placer.Cluster(snapshot(node("a", 1)))
    with pytest.raises(InvalidInputError, match="objective"):
        solve_mig(cluster, [pod("x", "1g.5gb")], objective="gpus")
    with pytest.raises(InvalidInputError, match="MIG pods only"):
        solve_mig(cluster, [PodRequest("w", gpus=1)])
    with pytest.raises(InvalidInputError, match="unique"):
        solve_mig(cluster, [pod("x", "1g.5gb"), pod("x", "1g.5gb")])


# ----------------------------------------------------------------------------- online vs optimum

ARRIVALS = ("1g.10gb", "4g.40gb", "1g.10gb", "3g.40gb", "1g.20gb", "4g.40gb", "1g.10gb")
"""On two A100-80GB GPUs: first-fit puts the first 1g at slice 0, where the 4g must start."""


def allocated_slices(snap: dict, pods: list[PodRequest], policy: str) -> int:
    """Slices the pods' instances cover after placing them one at a time, checked."""
    request = placer.PlacementRequest(pods=tuple(pods), policy=policy)
    result = placer.place(snap, request)
    assert placer.check_placement(snap, request, result) == []
    table = placer.model.mig_profiles.table_for("A100-80GB")
    return sum(table.profile(u.profile).memory_slices for a in result.assignments for u in a.mig)


def test_aware_choice_allocates_at_least_what_first_fit_does_and_at_most_the_optimum():
    snap = snapshot(node("a", 2, model="NVIDIA-A100-SXM4-80GB", cpu=64000))
    pods = [pod(f"p{k}", name) for k, name in enumerate(ARRIVALS)]
    first_fit = allocated_slices(snap, pods, "first-fit")
    aware = allocated_slices(snap, pods, "fgd")
    best = solve_mig(placer.Cluster(snap), pods)
    assert best.status == "optimal"
    assert first_fit <= aware <= best.slices
    assert (first_fit, aware, best.slices) == (13, 16, 16)


@pytest.mark.parametrize("policy", ["first-fit", "best-fit", "fgd"])
def test_of_gpus_in_the_same_state_the_first_node_and_gpu_wins(policy):
    # the choice compares one candidate per busy mask: the first GPU of that mask
    busy = [(0, "3g.20gb", 0), (1, "3g.20gb", 0)]
    snap = snapshot(node("a", 2, running=busy[:1]), node("b", 3, running=busy))
    request = placer.PlacementRequest(pods=(pod("x", "3g.20gb"), pod("y", "3g.20gb")), policy=policy)
    result = placer.place(snap, request)
    assert placer.check_placement(snap, request, result) == []
    got = {a.pod: (a.node, a.mig[0].gpu, a.mig[0].start) for a in result.assignments}
    assert got["x"] == ("a", 0, 4)  # a's GPU 0 and b's GPUs 0 and 1 share a mask
    assert got["y"] == ("b", 0, 4) if policy != "first-fit" else ("a", 1, 0)
