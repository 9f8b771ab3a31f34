"""Issue #34, items 1-3: NVIDIA's own MIG layouts placed one pod at a time and as one request.

**Layouts** (``--only layouts``): for every bundled GPU model, every mig-parted layout that
applies to it (:func:`placer.mig.named_layouts.layouts_for`; those naming a profile the
model's table lacks are left out and counted), placed on one node with one empty dynamic
MIG GPU in the written order, largest first, smallest first and ``--orders`` seeded random
orders: one pod per ``Cluster.schedule`` request (one at a time: no pod knows the next), and
all of them in one request (the result checked by ``placer.check_placement``). A layout is
completed when every pod of it is placed. Rules: each policy with the start choice of before
issue #34 (``MigState.lookahead = False``: the choice's keys alone, lowest start on ties)
and with the look-ahead; ``first-fit`` is HAMi's rule and has no look-ahead.

**openb** (``--only openb``): ``bench/bench_mig.py``'s trace replay (unallocated slices at
100 % arrived) per seed under ``best-fit`` and ``fgd``, previous rule against look-ahead,
on its three pod sets (all; shared; partial with slices only).

Run: ``python bench/bench_mig_layouts.py`` (``--only layouts`` or ``--only openb``,
``--seeds 42-51``, ``--orders 20``, ``--json out.json``).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

sys.path.insert(0, str(Path(__file__).parent))

import placer
from placer.kernel.mig import MigState
from placer.mig.named_layouts import NamedLayout, layouts_for
from placer.model.mig_profiles import MigTable, tables
from placer.replay.simulate import parse_seeds
from report import _markdown_table

RULES = ("previous", "look-ahead")
OPENB_SETS = (("all", False), ("shared", False), ("partial", True))
"""bench_mig.py's pod sets: (variant, slices only)."""


def applicable(table: MigTable) -> tuple[list[NamedLayout], int]:
    """The named layouts of ``table``'s model whose profiles it lists, and how many others apply."""
    names = set(table.names())
    found = layouts_for(table)
    usable = [lay for lay in found if all(name in names for name, _ in lay.counts)]
    return usable, len(found) - len(usable)


def orders(profiles: list[str], table: MigTable, randoms: int) -> Iterator[tuple[str, list[str]]]:
    """(name, order): written, largest first, smallest first, then ``randoms`` seeded shuffles."""
    size = {p.name: p.memory_slices for p in table.profiles}
    yield "written", list(profiles)
    yield "largest", sorted(profiles, key=lambda p: -size[p])
    yield "smallest", sorted(profiles, key=lambda p: size[p])
    for seed in range(randoms):
        shuffled = list(profiles)
        random.Random(seed).shuffle(shuffled)
        yield f"seed {seed}", shuffled


def snapshot(model: str) -> dict[str, Any]:
    """One node with one empty dynamic MIG GPU of ``model``."""
    node = {"name": "n", "gpus": 1, "gpuModel": model, "cpuMilli": 64000, "mig": {"gpus": "all", "mode": "dynamic"}}
    return {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [node]}


def request(profiles: Sequence[str], policy: str, first: int = 0) -> dict[str, Any]:
    pods = [{"name": f"p{first + i}", "mig": {"profile": p}} for i, p in enumerate(profiles)]
    return {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": policy, "pods": pods}


def one_at_a_time(model: str, profiles: Sequence[str], policy: str) -> bool:
    """Every pod placed, each in a request of its own on the same cluster."""
    cluster = placer.Cluster(snapshot(model))
    return all(not cluster.schedule(request([p], policy, i)).unschedulable for i, p in enumerate(profiles))


def as_one_request(model: str, profiles: Sequence[str], policy: str) -> bool:
    """Every pod placed by one request, the result passing ``placer.check_placement``."""
    snap, req = snapshot(model), request(profiles, policy)
    result = placer.place(snap, req)
    problems = placer.check_placement(snap, req, result)
    assert not problems, problems
    return not result.unschedulable


def layouts(randoms: int, policies: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (policy, rule, model, layout, order): completed one at a time, as one request."""
    rows = []
    for policy in policies:
        rules = ("first-fit",) if policy == "first-fit" else RULES
        for rule in rules:
            MigState.lookahead = rule == "look-ahead"
            started = time.perf_counter()
            for model, table in tables().items():
                for lay in applicable(table)[0]:
                    for name, order in orders(lay.profiles(), table, randoms):
                        rows.append({
                            "policy": policy, "rule": rule, "model": model, "config": lay.config, "order": name,
                            "one": one_at_a_time(model, order, policy), "batch": as_one_request(model, order, policy),
                        })
            print(f"{policy} {rule}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    MigState.lookahead = True
    return rows


def print_layouts(rows: list[dict[str, Any]]) -> None:
    keys = list(dict.fromkeys((r["policy"], r["rule"]) for r in rows))
    table = []
    for policy, rule in keys:
        mine = [r for r in rows if (r["policy"], r["rule"]) == (policy, rule)]
        balanced = [r for r in mine if r["config"] == "all-balanced"]

        def share(of: list[dict[str, Any]], key: str) -> str:
            return f"{sum(r[key] for r in of)} / {len(of)}"

        table.append([policy, rule, share(mine, "one"), share(balanced, "one"), share(mine, "batch"),
                      share(balanced, "batch")])
    _markdown_table("Layouts completed / tried", ["policy", "rule", "one at a time: all", "all-balanced",
                                                  "one request: all", "all-balanced"], {2, 3, 4, 5}, table)
    failed = sorted({(r["policy"], r["model"], r["config"]) for r in rows if r["rule"] == "look-ahead" and not r["one"]})
    print(f"\nLayouts failed one at a time under the look-ahead: {failed or 'none'}")


def openb(seeds: Sequence[int]) -> list[dict[str, Any]]:
    """bench_mig.py's replay per pod set, seed, policy and rule."""
    import bench_mig

    rows = []
    for variant, slices_only in OPENB_SETS:
        snap, pods = bench_mig.load(variant, slices_only)
        for seed in seeds:
            for policy in ("best-fit", "fgd"):
                for rule in RULES:
                    MigState.lookahead = rule == "look-ahead"
                    run = bench_mig.replay(snap, pods, policy, seed)
                    rows.append({"pods": variant, "policy": policy, "rule": rule, "seed": seed,
                                 "unallocated": run["curve"]["100"], "seconds": run["seconds"]})
                    print(f"{variant} {policy} {rule} seed {seed}: {run['curve']['100']:.2f} % "
                          f"({run['seconds']:.1f} s)", file=sys.stderr)
    MigState.lookahead = True
    return rows


def print_openb(rows: list[dict[str, Any]]) -> None:
    table = []
    for variant, _ in OPENB_SETS:
        for policy in ("best-fit", "fgd"):
            mine = {(r["seed"], r["rule"]): r["unallocated"] for r in rows if (r["pods"], r["policy"]) == (variant, policy)}
            seeds = sorted({s for s, _ in mine})
            deltas = [mine[s, "look-ahead"] - mine[s, "previous"] for s in seeds]
            table.append([variant, policy, " ".join(f"{mine[s, 'previous']:.2f}" for s in seeds),
                          " ".join(f"{mine[s, 'look-ahead']:.2f}" for s in seeds),
                          f"{max(deltas):+.2f}", str(sum(d < 0 for d in deltas)), str(sum(d > 0 for d in deltas))])
    _markdown_table("openb: unallocated slices % at 100 % arrived, per seed", ["pods", "policy",
                    "previous, per seed", "look-ahead, per seed", "worst Δ", "seeds better", "seeds worse"],
                    {4, 5, 6}, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("layouts", "openb"))
    parser.add_argument("--orders", type=int, default=20, help="seeded random orders per layout")
    parser.add_argument("--seeds", default="42-51", help="openb replay seeds")
    parser.add_argument("--policies", default=",".join(placer.policies.names()))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict[str, Any] = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    if args.only in (None, "layouts"):
        out["layouts"] = layouts(args.orders, args.policies.split(","))
    if args.only in (None, "openb"):
        out["openb"] = openb(parse_seeds(args.seeds))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    if out.get("layouts"):
        skipped = {m: applicable(t)[1] for m, t in tables().items() if applicable(t)[1]}
        print(f"Named layouts left out (a profile the table lacks): {skipped}\n")
        print_layouts(out["layouts"])
    if out.get("openb"):
        print_openb(out["openb"])


if __name__ == "__main__":
    main()
