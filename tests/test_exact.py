"""The exact gang solver (CP-SAT) against a brute force, and its limits and statuses."""
from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ortools.sat.python import cp_model

from gang_brute import brute_feasible, brute_force, brute_force_detail
from placer.exact import gangs as exact
from placer.exact.gangs import (
    ExactSolution,
    GangNode,
    GangProblem,
    GangShape,
    check_counts,
    domains_used,
    objective_value,
    objective_weights,
    solve_gang,
)
from placer.exceptions import SolverError

# ---------------------------------------------------------------- tiny random problems

LEVEL_NAMES = ("block", "rack")
SHARES = (250, 300, 500, 700)


@st.composite
def tiny_nodes(draw, levels: tuple[str, ...]):
    count = draw(st.sampled_from((4, 5, 6, 3, 2, 1)))
    nodes = []
    for i in range(count):
        path: list[str | None] = []
        prefix = ""
        for li, _ in enumerate(levels):
            if draw(st.integers(0, 9)) == 0:
                path.append(None)
                prefix += "-/"
            else:
                name = draw(st.sampled_from(("a", "b") if li == 0 else ("x", "y")))
                prefix += name
                path.append(prefix)
                prefix += "/"
        ngpu = draw(st.sampled_from((4, 2, 4, 3, 1, 0)))
        milli = tuple(
            draw(st.sampled_from((1000, 1000, 500, 1000, 0, 1000, 300, 1000, 800)))
            for _ in range(ngpu)
        )
        tracked = draw(st.booleans())
        gmem = tuple(
            (draw(st.sampled_from((10, 20, 40))) if m < 1000 else 40) if tracked else None
            for m in milli
        )
        nodes.append(GangNode(
            name=f"n{i}",
            domains=tuple(path),
            cpu_free=draw(st.one_of(st.none(), st.integers(0, 12).map(lambda c: c * 1000))),
            memory_free=draw(st.one_of(st.none(), st.integers(0, 8))),
            pods_free=draw(st.one_of(st.none(), st.integers(0, 6))),
            gpu_free_milli=milli,
            gpu_free_memory=gmem,
            gpu_memory_total=draw(st.sampled_from((None, 40, 80))) if ngpu else None,
            model=draw(st.sampled_from(("A", "B"))) if ngpu else None,
        ))
    return tuple(nodes)


@st.composite
def tiny_shape(draw, kind: str, count: int, nnodes: int):
    eligible = frozenset(n for n in range(nnodes) if draw(st.integers(0, 6)) > 0)
    cpu = draw(st.sampled_from((0, 1000, 2000)))
    mem = draw(st.integers(0, 2))
    if kind == "cpu":
        return GangShape(count, 0, 1000, 0, max(cpu, 1000), mem, eligible)
    if kind == "whole":
        return GangShape(count, draw(st.sampled_from((1, 2, 1))), 1000,
                         draw(st.sampled_from((0, 40, 80))), cpu, mem, eligible)
    return GangShape(count, 1, draw(st.sampled_from(SHARES)),
                     draw(st.sampled_from((0, 10, 20))), cpu, mem, eligible)


@st.composite
def tiny_problems(draw) -> GangProblem:
    levels = LEVEL_NAMES[: draw(st.integers(0, 2))]
    nodes = draw(tiny_nodes(levels))
    nn = len(nodes)
    pattern = draw(st.sampled_from(("one", "sliced", "two", "launcher", "shared2")))
    slices: tuple[tuple[str, int], ...] = ()
    all_levels = levels + ("node",)
    if pattern == "launcher":  # one CPU launcher + GPU workers
        workers = draw(st.integers(1, 5))
        shapes = (draw(tiny_shape("cpu", 1, nn)),
                  draw(tiny_shape(draw(st.sampled_from(("whole", "shared"))), workers, nn)))
    elif pattern in ("two", "shared2"):
        a = draw(st.integers(1, 3))
        b = draw(st.integers(1, 6 - a))
        kinds = (("shared", "shared") if pattern == "shared2" else
                 (draw(st.sampled_from(("cpu", "whole", "shared"))),
                  draw(st.sampled_from(("whole", "shared")))))
        shapes = (draw(tiny_shape(kinds[0], a, nn)), draw(tiny_shape(kinds[1], b, nn)))
    else:
        kind = draw(st.sampled_from(("whole", "whole", "shared", "cpu")))
        count = draw(st.integers(1, 6))
        if pattern == "sliced":
            # slice layers, outermost first; each inner size divides the outer one
            chosen = sorted(draw(st.sets(st.sampled_from(all_levels), min_size=1, max_size=2)),
                            key=all_levels.index)
            outer = draw(st.sampled_from((2, 1, 3)))
            count = outer * draw(st.integers(1, 6 // outer))
            sizes = [outer]
            if len(chosen) == 2:
                sizes.append(draw(st.sampled_from([d for d in (1, 2, 3) if outer % d == 0])))
            slices = tuple(zip(chosen, sizes))
        shapes = (draw(tiny_shape(kind, count, nn)),)
    mode = draw(st.sampled_from(("required", "preferred", "unconstrained")))
    level = None if mode == "unconstrained" else draw(st.sampled_from(all_levels))
    return GangProblem(levels, nodes, shapes, mode, level, slices, draw(st.booleans()))


def _placed_per_shape(problem: GangProblem, counts) -> list[int]:
    return [sum(c for (s2, _), c in counts.items() if s2 == s) for s in range(len(problem.shapes))]


@given(tiny_problems())
@settings(deadline=None)  # examples: the profile of conftest.py (ci: 60)
def test_solver_matches_brute_force(problem: GangProblem) -> None:
    best, bcounts, bshared = brute_force_detail(problem)
    event("infeasible" if best is None else "feasible")
    event(f"mode={problem.mode}, slices={len(problem.slices)}")
    event("shapes: " + "+".join(
        "cpu" if sh.gpus == 0 else ("shared" if sh.shared else "whole") for sh in problem.shapes))
    if best is not None:  # the oracle agrees with the independent checker
        assert check_counts(problem, bcounts, bshared) == []
    sol = solve_gang(problem, time_limit_s=20.0, workers=1)
    if best is None:
        assert sol.status == "infeasible", (sol, problem)
        assert sol.counts == {} and sol.objective is None
        return
    assert sol.status == "optimal", (sol, best, bcounts, problem)
    assert sol.objective == best, (sol, best, bcounts, bshared, problem)
    assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    assert brute_feasible(problem, sol.counts)
    assert _placed_per_shape(problem, sol.counts) == [sh.count for sh in problem.shapes]
    assert all(c > 0 for c in sol.counts.values())
    assert sol.bound is not None and sol.bound <= sol.objective
    if problem.mode == "required" and problem.level != "node":
        assert len(domains_used(problem, sol.counts)[problem.level]) == 1
    # an optimal hint leaves the optimum where it is
    hinted = solve_gang(problem, workers=1, hint=bcounts, hint_shared_gpus=bshared)
    assert hinted.status == "optimal" and hinted.objective == best


# ---------------------------------------------------------------- fixtures for units


def _cluster(
    blocks: int, racks: int, nvls: int, per_nvl: int, seed: int = 0, busy: float = 0.3,
    models: tuple[str, ...] = ("H100",),
) -> tuple[GangNode, ...]:
    """A 3-level cluster of 8-GPU nodes, part of the GPUs busy or shared."""
    rng = random.Random(seed)
    nodes = []
    for b in range(blocks):
        for r in range(racks):
            model = models[(b * racks + r) % len(models)]
            for v in range(nvls):
                for i in range(per_nvl):
                    milli = tuple(
                        1000 if rng.random() > busy else rng.choice((0, 0, 500, 250))
                        for _ in range(8)
                    )
                    nodes.append(GangNode(
                        name=f"b{b}-r{r}-v{v}-n{i}",
                        domains=(f"b{b}", f"b{b}/r{r}", f"b{b}/r{r}/v{v}"),
                        cpu_free=rng.choice((64000, 128000, 224000)),
                        memory_free=2_000_000,
                        pods_free=110,
                        gpu_free_milli=milli,
                        gpu_free_memory=tuple(81559 * m // 1000 for m in milli),
                        gpu_memory_total=81559,
                        model=model,
                    ))
    return tuple(nodes)


LEVELS3 = ("block", "rack", "nvl")


def _mixed_gang(nodes, workers: int, shared: int = 0) -> tuple[GangShape, ...]:
    every = frozenset(range(len(nodes)))
    shapes = [
        GangShape(1, 0, 1000, 0, 8000, 16384, every),                 # launcher
        GangShape(workers, 4, 1000, 40000, 32000, 65536, every),      # GPU workers
    ]
    if shared:
        shapes.append(GangShape(shared, 1, 500, 20000, 4000, 8192, every))
    return tuple(shapes)


def _greedy_counts(problem: GangProblem) -> dict[tuple[int, int], int]:
    """First fit inside the first node's outermost domain and GPU model (a stand-in for
    the kernel's answer); a shared pod takes a whole-free GPU of its own."""
    first = problem.nodes[0]
    pool = [
        n for n, node in enumerate(problem.nodes)
        if node.domains[:1] == first.domains[:1] and node.model == first.model
    ]
    gpus = {n: problem.nodes[n].whole_free for n in pool}
    cpu = {n: problem.nodes[n].cpu_free for n in pool}
    counts: dict[tuple[int, int], int] = {}
    for s, shape in enumerate(problem.shapes):
        need = 1 if shape.shared else shape.gpus
        left = shape.count
        for n in pool:
            while left and n in shape.eligible and gpus[n] >= need and (
                cpu[n] is None or cpu[n] >= shape.cpu_milli
            ):
                counts[s, n] = counts.get((s, n), 0) + 1
                gpus[n] -= need
                if cpu[n] is not None:
                    cpu[n] -= shape.cpu_milli
                left -= 1
        assert left == 0
    return counts


# ---------------------------------------------------------------- unit tests


def test_weights_are_lexicographic() -> None:
    nodes = _cluster(2, 2, 2, 2)
    problem = GangProblem(LEVELS3, nodes, _mixed_gang(nodes, 4), "preferred", "rack")
    w = objective_weights(problem)
    pods = sum(s.count for s in problem.shapes)  # 5: each domain used holds one at least
    doms = [min(len({n.domains[li] for n in nodes}), pods) for li in range(3)] + [min(len(nodes), pods)]
    frag = 2 * sum(sorted((n.whole_free for n in nodes), reverse=True)[:pods])
    assert w[3] == frag + 1
    for li in range(3):
        inner_max = sum(w[lj] * doms[lj] for lj in range(li + 1, 4)) + frag
        assert w[li] > inner_max
    # at most one used domain per pod: a gang of 5 on 16 nodes weighs far less than 16 domains
    assert w[0] < objective_weights(dataclasses.replace(problem, shapes=problem.shapes * 4))[0]


def test_empty_gang_is_trivially_optimal() -> None:
    nodes = _cluster(1, 1, 1, 2)
    problem = GangProblem(LEVELS3, nodes, (GangShape(0, 8, 1000, 0, 0, 0, frozenset({0})),),
                          "required", "rack")
    sol = solve_gang(problem)
    assert sol.status == "optimal" and sol.counts == {} and sol.objective == 0


def test_required_single_rack_and_slices() -> None:
    # 2 racks × 2 nvl domains × 2 nodes with 8 free GPUs; 4 pods × 4 GPUs fit one nvl domain
    # (2 nodes × 2 pods), slices of 2 per nvl domain.
    nodes = tuple(
        GangNode(f"r{r}v{v}n{i}", ("b0", f"b0/r{r}", f"b0/r{r}/v{v}"), None, None, None,
                 (1000,) * 8, (None,) * 8, None, "H100")
        for r in range(2) for v in range(2) for i in range(2)
    )
    shape = GangShape(8, 4, 1000, 0, 0, 0, frozenset(range(len(nodes))))
    problem = GangProblem(LEVELS3, nodes, (shape,), "required", "rack",
                          slices=(("rack", 8), ("nvl", 2)))
    sol = solve_gang(problem)
    assert sol.status == "optimal"
    assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    used = domains_used(problem, sol.counts)
    assert len(used["rack"]) == 1 and len(used["nvl"]) == 2
    assert sorted(sol.counts.values()) == [2, 2, 2, 2]
    assert sol.objective == brute_force(problem)[0]


def _hint_is_model_feasible(problem: GangProblem, hint, hint_shared=None):
    """Solve with every hinted variable fixed to its hint: the counts, or None if rejected."""
    built = exact.build_gang_model(problem)
    exact.add_gang_hint(problem, built, hint, hint_shared)
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10.0
    status = solver.solve(built.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return {key: int(solver.value(v)) for key, v in built.x.items() if solver.value(v)}


def test_hint_is_accepted() -> None:
    nodes = _cluster(2, 4, 4, 4, seed=3)
    shapes = _mixed_gang(nodes, 6)
    problem = GangProblem(LEVELS3, nodes, shapes, "preferred", "rack")
    hint = _greedy_counts(problem)
    assert check_counts(problem, hint, {}) == []
    hinted_value = objective_value(problem, hint)
    assert _hint_is_model_feasible(problem, hint) == hint  # the model takes it as it is
    # A very short deterministic budget: the hint is at least as good as what comes back.
    sol = solve_gang(problem, deterministic_time_s=0.05, hint=hint)
    assert sol.found
    assert sol.objective <= hinted_value
    assert sol.bound is None or 0 < sol.bound <= sol.objective
    # no search at all: the hint comes back, without CP-SAT's trivial bound of 0.0
    at_once = solve_gang(problem, deterministic_time_s=0.0, hint=hint)
    assert (at_once.status, at_once.objective, at_once.bound) == ("feasible", hinted_value, None)
    assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    # An infeasible hint (too many pods) is only a hint: the solve still succeeds.
    bad = dict(hint)
    bad[next(iter(bad))] += 5
    sol2 = solve_gang(problem, time_limit_s=5.0, hint=bad)
    assert sol2.found and check_counts(problem, sol2.counts, sol2.shared_gpus) == []


def test_hint_on_identical_nodes_is_reordered() -> None:
    # 6 identical nodes: the model orders them, a hint on the last one is moved, not lost.
    node = GangNode("n", ("b0",), None, None, None, (1000,) * 4, (None,) * 4, None, "A")
    nodes = tuple(GangNode(f"n{i}", node.domains, None, None, None, node.gpu_free_milli,
                           node.gpu_free_memory, None, "A") for i in range(6))
    shape = GangShape(2, 2, 1000, 0, 0, 0, frozenset(range(6)))
    problem = GangProblem(("block",), nodes, (shape,), "required", "block")
    assert _hint_is_model_feasible(problem, {(0, 5): 2}) == {(0, 0): 2}
    sol = solve_gang(problem, hint={(0, 5): 2})
    assert sol.status == "optimal" and sol.objective == objective_value(problem, {(0, 5): 2})


def test_deterministic_with_one_worker() -> None:
    nodes = _cluster(2, 3, 3, 3, seed=5)
    problem = GangProblem(LEVELS3, nodes, _mixed_gang(nodes, 8, shared=3), "preferred", "nvl")
    a = solve_gang(problem, deterministic_time_s=0.5, workers=1, seed=7)
    b = solve_gang(problem, deterministic_time_s=0.5, workers=1, seed=7)
    assert a.status == b.status and a.counts == b.counts and a.shared_gpus == b.shared_gpus


def _big_problem() -> GangProblem:
    # 4 blocks × 5 racks × 5 nvl domains × 10 nodes = 1000 nodes, two GPU models; a launcher,
    # 24 workers of 4 GPUs and 6 half-GPU pods, all in one block.
    nodes = _cluster(4, 5, 5, 10, seed=1, busy=0.35, models=("H100", "A100"))
    assert len(nodes) == 1000
    return GangProblem(LEVELS3, nodes, _mixed_gang(nodes, 24, shared=6), "required", "block")


def test_time_limit_on_1k_nodes() -> None:
    problem = _big_problem()
    hint = _greedy_counts(problem)
    assert check_counts(problem, hint, exact.pack_shared_gpus(problem, hint)) == []
    limit = 4.0
    sol = solve_gang(problem, time_limit_s=limit, workers=1, hint=hint)
    assert sol.status in ("optimal", "feasible")
    assert sol.bound is not None and sol.bound <= sol.objective <= objective_value(
        problem, hint, exact.pack_shared_gpus(problem, hint))
    assert sol.wall_time_s < limit + 1.5  # CP-SAT overshoots a little in presolve
    assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    assert len(domains_used(problem, sol.counts)["block"]) == 1
    assert sol.num_variables > 1000 and sol.num_constraints > 1000


def test_short_time_limit_without_hint() -> None:
    problem = _big_problem()
    sol = solve_gang(problem, time_limit_s=1.0, workers=1)
    assert sol.status in ("unknown", "feasible", "optimal")
    assert sol.wall_time_s < 1.0 + 1.5
    if sol.found:
        assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    else:
        assert sol.counts == {} and sol.objective is None


@pytest.mark.slow
def test_1k_nodes_without_hint_finds_a_placement() -> None:
    sol = solve_gang(_big_problem(), time_limit_s=20.0, workers=1)
    assert sol.found and sol.bound is not None and sol.bound <= sol.objective


def test_oversubscribed_is_proven_infeasible() -> None:
    # Every rack has 4 nodes × 8 GPUs = 32 free GPUs; a gang of 9 × 4 GPUs needs 36 in one rack.
    nodes = tuple(
        GangNode(f"r{r}n{i}", (f"r{r}",), 224000, None, 110, (1000,) * 8, (None,) * 8, None,
                 "H100")
        for r in range(30) for i in range(4)
    )
    shape = GangShape(9, 4, 1000, 0, 16000, 0, frozenset(range(len(nodes))))
    problem = GangProblem(("rack",), nodes, (shape,), "required", "rack")
    sol = solve_gang(problem, time_limit_s=10.0)
    assert sol.status == "infeasible"
    assert sol.counts == {} and sol.objective is None and sol.bound is None
    # unconstrained it fits
    relaxed = GangProblem(("rack",), nodes, (shape,), "unconstrained", None)
    assert solve_gang(relaxed).status == "optimal"


def test_no_eligible_node_is_infeasible() -> None:
    nodes = _cluster(1, 1, 1, 2)
    shape = GangShape(1, 8, 1000, 0, 0, 0, frozenset())
    sol = solve_gang(GangProblem(LEVELS3, nodes, (shape,), "unconstrained", None))
    assert sol.status == "infeasible"


def test_same_gpu_model_mixes_nothing() -> None:
    # Two nodes of model A with 2 free GPUs each, one of B with 4: 4 single-GPU pods fit on
    # A+A or on B alone; mixing is forbidden.
    def mk(name, model, g):
        return GangNode(name, (), None, None, None, (1000,) * g, (None,) * g, None, model)

    nodes = (mk("a0", "A", 2), mk("a1", "A", 2), mk("b0", "B", 3))
    shape = GangShape(4, 1, 1000, 0, 0, 0, frozenset({0, 1, 2}))
    problem = GangProblem((), nodes, (shape,), "unconstrained", None)
    sol = solve_gang(problem)
    assert sol.status == "optimal" and set(sol.counts) == {(0, 0), (0, 1)}
    mixed = GangProblem((), nodes, (shape,), "unconstrained", None, same_gpu_model=False)
    sol2 = solve_gang(mixed)
    # without the rule the best answer uses 2 nodes and leaves the fewest whole GPUs
    assert sol2.status == "optimal" and len(sol2.counts) == 2
    assert sol2.objective == brute_force(mixed)[0]


def test_shared_pods_avoid_whole_gpus() -> None:
    # One GPU is already shared (500 free), three are whole-free: two 250-milli pods go to
    # the shared GPU and leave the whole-free GPUs whole.
    node = GangNode("n0", (), None, None, None, (500, 1000, 1000, 1000), (None,) * 4, None, "A")
    shape = GangShape(2, 1, 250, 0, 0, 0, frozenset({0}))
    problem = GangProblem((), (node,), (shape,), "unconstrained", None)
    sol = solve_gang(problem)
    assert sol.status == "optimal" and sol.shared_gpus == {(0, 0): (0, 0)}
    assert sol.objective == objective_weights(problem)[-1] + 3
    # breaking one whole GPU: 2 left whole + 2 × 1 broken
    assert objective_value(problem, sol.counts, {(0, 0): (1, 1)}) == sol.objective + 1
    with pytest.raises(ValueError, match="shared_gpus"):
        objective_value(problem, sol.counts)
    # three pods: 750 do not fit on GPU 0, so one whole-free GPU is opened for all three
    three = GangProblem((), (node,), (GangShape(3, 1, 250, 0, 0, 0, frozenset({0})),),
                        "unconstrained", None)
    sol3 = solve_gang(three)
    assert sol3.status == "optimal" and len(set(sol3.shared_gpus[0, 0])) == 1
    assert sol3.objective == brute_force(three)[0]


def test_two_shared_shapes_use_per_gpu_variables() -> None:
    # Two shared shapes: the per-GPU model. 700 + 300 fill one GPU exactly.
    node = GangNode("n0", ("b0",), None, None, None, (1000, 1000, 700), (40, 40, 10), 40, "A")
    shapes = (GangShape(1, 1, 700, 10, 0, 0, frozenset({0})),
              GangShape(2, 1, 300, 10, 0, 0, frozenset({0})))
    problem = GangProblem(("block",), (node,), shapes, "required", "block", same_gpu_model=True)
    sol = solve_gang(problem)
    best, _, _ = brute_force_detail(problem)
    assert sol.status == "optimal" and sol.objective == best
    assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    assert exact.build_gang_model(problem).gpus[0].y  # per-GPU variables, no classes


def test_two_whole_shapes_share_a_nodes_gpus() -> None:
    # 4 whole-free GPUs: one pod of 2 GPUs and two pods of 2 GPUs each fit alone, not together.
    node = GangNode("n0", (), None, None, None, (1000,) * 4, (None,) * 4, None, "A")
    shapes = (GangShape(1, 2, 1000, 0, 0, 0, frozenset({0})),
              GangShape(2, 2, 1000, 0, 0, 0, frozenset({0})))
    problem = GangProblem((), (node,), shapes, "unconstrained", None)
    assert solve_gang(problem).status == "infeasible"
    roomy = GangProblem((), (dataclasses.replace(node, gpu_free_milli=(1000,) * 6,
                                                 gpu_free_memory=(None,) * 6),),
                        shapes, "unconstrained", None)
    sol = solve_gang(roomy)
    assert sol.status == "optimal" and sol.counts == {(0, 0): 1, (1, 0): 2}


def test_feasible_hint_is_the_answer_when_cp_sat_stops_first() -> None:
    problem = _big_problem()
    hint = _greedy_counts(problem)
    sol = solve_gang(problem, deterministic_time_s=0.0, hint=hint)
    assert sol.solver_status == "UNKNOWN"  # CP-SAT itself found nothing
    assert sol.status == "feasible" and sol.counts == hint
    assert sol.objective == objective_value(problem, hint, sol.shared_gpus)
    assert check_counts(problem, sol.counts, sol.shared_gpus) == []
    # without a hint the same budget finds nothing
    assert solve_gang(problem, deterministic_time_s=0.0).status == "unknown"


def test_check_counts_reports_violations() -> None:
    node = GangNode("n0", ("b0",), 4000, None, 2, (1000, 1000), (None, None), 40, "A")
    shape = GangShape(3, 1, 1000, 80, 2000, 0, frozenset({0}))
    problem = GangProblem(("block",), (node,), (shape,), "unconstrained", None)
    msgs = check_counts(problem, {(0, 0): 3}, {})
    text = "\n".join(msgs)
    assert "cpu 6000 > free 4000" in text and "pods 3 > free 2" in text
    assert "80 MiB per GPU" in text and "3 whole GPUs needed" in text


def test_malformed_problems_raise_value_error() -> None:
    nodes = _cluster(1, 1, 1, 1)
    s = GangShape(1, 1, 1000, 0, 0, 0, frozenset({0}))
    with pytest.raises(ValueError, match="need a shape"):
        solve_gang(GangProblem(LEVELS3, nodes, (), "unconstrained", None, (("rack", 1),)))
    with pytest.raises(ValueError, match="unknown topology level"):
        solve_gang(GangProblem(LEVELS3, nodes, (s,), "required", "zone"))
    with pytest.raises(ValueError, match="does not divide"):
        solve_gang(GangProblem(LEVELS3, nodes, (s,), "unconstrained", None,
                               (("rack", 4), ("nvl", 3))))


def test_model_invalid_raises_solver_error() -> None:
    # Two shapes of 2**62 MiB on a node with 2**63 - 1 MiB: the memory row may overflow
    # int64, which CP-SAT's validation rejects (MODEL_INVALID).
    node = GangNode("n0", (), None, 2**63 - 1, None, (), (), None, None)
    shapes = (GangShape(1, 0, 1000, 0, 0, 2**62, frozenset({0})),
              GangShape(1, 0, 1000, 0, 0, 2**62, frozenset({0})))
    problem = GangProblem((), (node,), shapes, "unconstrained", None)
    with pytest.raises(SolverError, match="overflow"):
        solve_gang(problem)


def test_solution_is_a_value_object() -> None:
    sol = ExactSolution("infeasible", None, None, {}, {}, 0.0)
    assert not sol.found and sol.num_variables == 0
