"""Turn a pytest-benchmark JSON of the bench/ files into the Markdown tables of RESULTS.md.

``test_bench_place.py`` (issue #2): kernel vs reference per pod.
``test_bench_gpusets.py`` (issue #3): select_gpus vs brute force, table build, cluster with
and without a GPU topology. ``--details`` adds the per-size tables of issue #3.
``test_bench_gangs.py`` (issue #4): greedy gangs on 10k nodes vs independent pods, CP-SAT
on 1k nodes, greedy vs exact objective over seeded instances (``--details``: per instance).
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import Counter


def main(path: str, details: bool = False) -> None:
    data = json.load(open(path))
    kernel, reference, other = {}, {}, []
    gpusets: dict[str, list[tuple[dict, dict]]] = {}
    gang_runs: dict[str, list[tuple[dict, dict]]] = {}
    for b in data["benchmarks"]:
        info = b["extra_info"]
        median = b["stats"]["median"]
        if info.get("kind") in ("kernel", "reference"):
            key = (info["nodes"], info["shape"], info["policy"])
            (kernel if info["kind"] == "kernel" else reference)[key] = (median / info["pods"], info)
        elif info.get("kind") in ("select", "brute", "tables", "cluster", "cluster-paired"):
            gpusets.setdefault(info["kind"], []).append((info, b["stats"]))
        elif info.get("kind") in GANG_KINDS + LIMIT_KINDS:
            gang_runs.setdefault(info["kind"], []).append((info, b["stats"]))
        else:
            other.append((info, median))
    if kernel:
        print("| nodes | shape | policy | kernel µs/pod | reference µs/pod | speed-up | placed (kernel, of 10k) |")
        print("|---:|---|---|---:|---:|---:|---:|")
        for key in sorted(kernel):
            k, kinfo = kernel[key]
            r = reference.get(key, (float("nan"), {}))[0]
            print(f"| {key[0]:,} | {key[1]} | {key[2]} | {k * 1e6:.2f} | {r * 1e6:.1f} | {r / k:,.0f}× | {kinfo['placed']:,} |")
        print()
    for info, median in other:
        extra = ", ".join(f"{k}={v}" for k, v in info.items() if k != "kind")
        print(f"- {info['kind']}: median {median:.3f} s ({extra})")
    if gpusets:
        gpusets_report(gpusets, details)
    if gang_runs:
        gangs_report(gang_runs, details)
        limits_report(gang_runs)


TOPOLOGY_ORDER = ["dgx1-v100", "pcie-tree-16", "bridged-pairs-16", "dgx2-nvswitch"]


def _torder(name: str) -> int:
    return TOPOLOGY_ORDER.index(name) if name in TOPOLOGY_ORDER else len(TOPOLOGY_ORDER)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}" if seconds >= 1e-3 else f"{seconds * 1e3:.3f}"


def gpusets_report(runs: dict[str, list[tuple[dict, dict]]], details: bool) -> None:
    select = {(i["topology"], i["mask"], i["objective"], i["size"]): (i, s) for i, s in runs.get("select", [])}
    brute = {(i["topology"], i["mask"], i["objective"], i["size"]): (i, s) for i, s in runs.get("brute", [])}

    if select:
        print("### select_gpus per call vs brute force (medians)\n")
        print("| topology | free mask | objective | sizes | select_gpus µs/call: median over sizes (max) "
              "| brute force ms/call: median (max) | speed-up: min – max | same answers |")
        print("|---|---|---|---:|---:|---:|---:|---|")
        groups: dict[tuple, list[tuple]] = {}
        for key in select:
            groups.setdefault(key[:3], []).append(key)
        for g in sorted(groups, key=lambda g: (_torder(g[0]), g[1] != "random", g[2])):
            keys = sorted(groups[g], key=lambda k: k[3])
            sel = [select[k][1]["median"] for k in keys]
            br = [brute[k][1]["median"] for k in keys if k in brute]
            ratios = [brute[k][1]["median"] / select[k][1]["median"] for k in keys if k in brute]
            same = all(select[k][0]["answer"] == brute[k][0]["answer"] for k in keys if k in brute)
            info = select[keys[0]][0]
            bf = f"{_ms(statistics.median(br))} ({_ms(max(br))})" if br else "—"
            ratio = f"{min(ratios):,.0f}× – {max(ratios):,.0f}×" if ratios else "—"
            print(f"| {g[0]} | {g[1]} ({info['free']}/{info['gpus']} free) | {g[2]} | 1–{keys[-1][3]} "
                  f"| {statistics.median(sel) * 1e6:.2f} ({max(sel) * 1e6:.2f}) | {bf} | {ratio} "
                  f"| {'yes' if same and len(br) == len(keys) else 'NO' if not same else f'{len(br)} of {len(keys)}'} |")
        print()
        if details:
            print("<details><summary>Per size</summary>\n")
            print("| topology | mask | size | tiling µs | brute ms | speed-up | best-set µs | brute ms | speed-up | tiling answer (set score / with split) |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
            sizes = sorted({k[:2] + (k[3],) for k in select}, key=lambda k: (_torder(k[0]), k[1] != "random", k[2]))
            for t, m, size in sizes:
                cells = []
                for obj in ("tiling", "best-set"):
                    k = (t, m, obj, size)
                    s = select[k][1]["median"]
                    b = brute[k][1]["median"] if k in brute else None
                    cells += [f"{s * 1e6:.2f}", _ms(b) if b else "—", f"{b / s:,.0f}×" if b else "—"]
                i = select[(t, m, "tiling", size)][0]
                ans = "".join(f"{g:x}" for g in i["answer"])
                print(f"| {t} | {m} | {size} | {' | '.join(cells)} | {ans} ({i['set_score']} / {i['tiling_total']}) |")
            print("\n</details>\n")

    tables = runs.get("tables", [])
    if tables:
        print("### Table build on a fresh cache (medians)\n")
        print("| topology | GPUs | sizes | build ms: median over sizes | slowest size (ms) | all sizes, sum (ms) "
              "| tables per size | subset scores (shared) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        by: dict[str, list] = {}
        for i, s in tables:
            by.setdefault(i["topology"], []).append((i, s))
        for t in sorted(by, key=_torder):
            rows = sorted(by[t], key=lambda r: r[0]["size"])
            med = [s["median"] for _, s in rows]
            worst = max(rows, key=lambda r: r[1]["median"])
            print(f"| {t} | {rows[0][0]['gpus']} | 1–{rows[-1][0]['size']} | {_ms(statistics.median(med))} "
                  f"| {_ms(worst[1]['median'])} (size {worst[0]['size']}) | {_ms(sum(med))} "
                  f"| {max(i['tables_bytes'] for i, _ in rows) / 1024:,.0f} KiB "
                  f"| {rows[0][0]['subset_score_bytes'] / 1024:,.0f} KiB |")
        print()
        if details:
            print("<details><summary>Per size</summary>\n")
            print("| topology | size | build ms (median) | min | max | tables KiB | + subset scores + pairs KiB |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for i, s in sorted(tables, key=lambda r: (_torder(r[0]["topology"]), r[0]["size"])):
                print(f"| {i['topology']} | {i['size']} | {_ms(s['median'])} | {_ms(s['min'])} | {_ms(s['max'])} "
                      f"| {i['tables_bytes'] / 1024:,.0f} | {i['total_bytes'] / 1024:,.0f} |")
            print("\n</details>\n")

    clusters = runs.get("cluster", [])
    if clusters:
        print("### Whole cluster, 10,000 pods per `Cluster.schedule`, with vs without a GPU topology (medians)\n")
        paired = {(i["nodes"], i["shape"], i["policy"]): i for i, _ in runs.get("cluster-paired", [])}
        print("| nodes | shape | policy | uniform µs/pod | DGX-1 topology µs/pod | ratio | paired rounds: "
              "uniform → topology µs/pod, ratio | placed | mean DGX-1 set score: uniform → topology "
              "| all-NVLink sets: uniform → topology | same node as uniform |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        by2: dict[tuple, dict] = {}
        for i, s in clusters:
            by2.setdefault((i["nodes"], i["shape"], i["policy"]), {})[i["variant"]] = (i, s)
        shapes = ["1gpu", "2gpu", "4gpu", "8gpu", "shared"]
        for key in sorted(by2, key=lambda k: (k[0], shapes.index(k[1]) if k[1] in shapes else 9, k[2])):
            v = by2[key]
            if "uniform" not in v or "dgx1-topology" not in v:
                continue
            (ui, us), (ti, ts) = v["uniform"], v["dgx1-topology"]
            u, t = us["median"] / ui["pods"], ts["median"] / ti["pods"]

            def q(a, b, pct=False):
                if a is None:
                    return "—"
                return f"{a * 100:.0f}% → {b * 100:.0f}%" if pct else f"{a} → {b}"

            p = paired.get(key)
            pc = (f"{p['uniform_s_per_pod'] * 1e6:.2f} → {p['topology_s_per_pod'] * 1e6:.2f}, "
                  f"{p['median_pair_ratio']:.2f}×" if p else "—")
            print(f"| {key[0]:,} | {key[1]} | {key[2]} | {u * 1e6:.2f} | {t * 1e6:.2f} | {t / u:.2f}× | {pc} "
                  f"| {ti['placed']:,} | {q(ui['mean_set_score_dgx1'], ti['mean_set_score_dgx1'])} "
                  f"| {q(ui['all_nvlink_share'], ti['all_nvlink_share'], True)} | {ti['same_node_as_uniform']:,} |")
        print()


# --- issue #4 ------------------------------------------------------------------------------

GANG_KINDS = ("gang-greedy", "gang-baseline", "gang-paired", "gang-auto", "exact", "quality-greedy",
              "quality-exact")


def _dom(d: dict, levels=("block", "rack", "nvlDomain", "node")) -> str:
    return " / ".join(f"{d[lv]:,}" for lv in levels if lv in d) if d else "—"


def _lex(v) -> str:
    return "/".join(f"{x:,}" for x in v) if v else "—"


def _bound(b, obj) -> str:
    """A decoded bound up to the first component below the objective's (later ones say nothing)."""
    if not b:
        return "—"
    if not obj:
        return _lex(b)
    out = []
    for x, y in zip(b, obj):
        out.append(f"{x:,}")
        if x != y:
            return "/".join(out) + ("/…" if len(out) < len(b) else "")
    return "/".join(out)


def _pct(x) -> str:
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if abs(x) < 1e-4:
        return f"{'<' if x > 0 else '>-'}0.01%"
    return f"{x * 100:.2f}%" if abs(x) < 0.01 else f"{x * 100:.1f}%"


def gangs_report(runs: dict[str, list[tuple[dict, dict]]], details: bool) -> None:
    greedy = {(i["occupancy"], i["gang"], i["mode"]): (i, s) for i, s in runs.get("gang-greedy", [])}
    base = {(i["occupancy"], i["gang"]): (i, s) for i, s in runs.get("gang-baseline", [])}
    paired = {(i["occupancy"], i["gang"], i["mode"]): i for i, _ in runs.get("gang-paired", [])}
    if greedy:
        print("### Greedy gang vs the same pods without a gang, `Cluster.place` on 10,000 nodes (medians)\n")
        print("| GPUs held | gang | mode | gang ms | independent pods ms | ratio | paired rounds: gang → "
              "independent ms, ratio | placed | domains used: block / rack / nvlDomain / node "
              "| independent pods: block / rack / nvlDomain / node |")
        print("|---|---|---|---:|---:|---:|---:|---|---:|---:|")
        for key in sorted(greedy, key=lambda k: (k[0] != "free", k[1], k[2] != "required-block")):
            i, s = greedy[key]
            bi, bs = base.get(key[:2], ({}, None))
            p = paired.get(key)
            ratio = f"{s['median'] / bs['median']:.2f}×" if bs else "—"
            pc = (f"{p['gang_s'] * 1e3:.2f} → {p['baseline_s'] * 1e3:.2f}, {p['median_pair_ratio']:.2f}×"
                  if p else "—")
            held = "none" if key[0] == "free" else "30 %"
            placed = "yes" if i["placed"] else "no"
            print(f"| {held} | {i['pods']} × {i['gpus_per_pod']} GPUs | {key[2]} | {s['median'] * 1e3:.2f} "
                  f"| {bs['median'] * 1e3:.2f} | {ratio} | {pc} | {placed} | {_dom(i['domains'])} "
                  f"| {_dom(bi.get('domains', {}))} |" if bs else "")
        print()
        for key, (i, _) in sorted(greedy.items()):
            if not i["placed"]:
                print(f"- not placed ({key[0]}, {key[1]}, {key[2]}): {i['reason']}")
        for i, s in runs.get("gang-auto", []):
            print(f"- `solver=auto` on the same gang ({i['occupancy']}, {i['gang']}, {i['mode']}): "
                  f"median {s['median'] * 1e3:,.0f} ms (min {s['min'] * 1e3:,.0f}, max {s['max'] * 1e3:,.0f}), "
                  f"{i['solver']} status {i['status']}")
        print()

    ex = runs.get("exact", [])
    if ex:
        print("### CP-SAT on 1,000 nodes, 2 s limit, 1 worker (medians)\n")
        print("| gang | mode | variant | median s (max) | × greedy | statuses (rounds) | objective: block / rack "
              "/ nvlDomain / node / frag | bound, decoded the same way | gap (obj − bound) / obj "
              "| variables / constraints |")
        print("|---|---|---|---:|---:|---|---|---|---:|---:|")
        by = {(i["gang"], i["mode"], i["variant"]): (i, s) for i, s in ex}
        order = ["greedy", "cluster-exact", "solve-gang", "solve-gang+hint"]
        for key in sorted(by, key=lambda k: (k[0], k[1] != "required-block", order.index(k[2]))):
            i, s = by[key]
            g = by.get(key[:2] + ("greedy",))
            times = f"{s['median']:.3f} ({s['max']:.3f})" if s["median"] >= 0.1 else f"{s['median'] * 1e3:.2f} ms"
            ratio = f"{s['median'] / g[1]['median']:,.0f}×" if g and key[2] != "greedy" else "1×"
            statuses = ", ".join(f"{c} {st}" for st, c in sorted(Counter(i["statuses"]).items()))
            size = (f"{i['num_variables']:,} / {i['num_constraints']:,}" if "num_variables" in i else "—")
            gaps = i.get("gaps") or [i["gap"]]
            gap = _pct(max((x for x in gaps if x is not None), default=None)) if any(
                x is not None for x in gaps) else "—"
            print(f"| {key[0]} | {key[1]} | {key[2]} | {times} | {ratio} | {statuses} | {_lex(i['decoded'])} "
                  f"| {_bound(i['bound_decoded'], i['decoded'] or i['greedy_decoded'])} | {gap} | {size} |")
        print()

    qe = {i["seed"]: i for i, _ in runs.get("quality-exact", [])}
    qg = {i["seed"]: (i, s) for i, s in runs.get("quality-greedy", [])}
    qes = {i["seed"]: s for i, s in runs.get("quality-exact", [])}
    if qe:
        print(f"### Greedy vs CP-SAT over {len(qe)} seeded instances (2 s limit, 1 worker)\n")
        print("| shape | instances | exact: optimal / feasible / infeasible / unknown | greedy placed | greedy fails, "
              "exact places | both place | greedy optimal | greedy gap: mean (worst) | first difference |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---|")
        groups: dict[str, list[dict]] = {}
        for i in qe.values():
            groups.setdefault(i["shape_kind"], []).append(i)
        for name in sorted(groups) + ["all"]:
            rows = list(qe.values()) if name == "all" else groups[name]
            st = Counter(i["status"] for i in rows)
            both = [i for i in rows if i["greedy_placed"] and i["status"] in ("optimal", "feasible")]
            opt_both = [i for i in both if i["status"] == "optimal"]
            gaps = [i["greedy_gap"] for i in both if i["greedy_gap"] is not None]
            first = Counter(i["first_difference"] for i in both if i["first_difference"])
            fd = ", ".join(f"{k} {v}" for k, v in sorted(first.items(), key=lambda kv: -kv[1])) or "—"
            gap = f"{_pct(statistics.mean(gaps))} ({_pct(max(gaps))})" if gaps else "—"
            label = f"**{name}**" if name == "all" else name
            print(f"| {label} | {len(rows)} | {st['optimal']} / {st['feasible']} / {st['infeasible']} / {st['unknown']} "
                  f"| {sum(i['greedy_placed'] for i in rows)} "
                  f"| {sum(1 for i in rows if not i['greedy_placed'] and i['status'] in ('optimal', 'feasible'))} "
                  f"| {len(both)} | {sum(i['greedy_optimal'] for i in opt_both)} of {len(opt_both)} | {gap} | {fd} |")
        print()
        # mean excess of the greedy per component, where both placed
        names = ["block", "rack", "nvlDomain", "node", "fragmentation"]
        excess: dict[str, list[int]] = {n: [] for n in names}
        for i in qe.values():
            if not (i["greedy_placed"] and i["exact_decoded"]):
                continue
            comp = ["block", "rack", "nvlDomain"][: i["levels"]] + ["node", "fragmentation"]
            for n, a, b in zip(comp, i["greedy_decoded"], i["exact_decoded"]):
                excess[n].append(a - b)
        cells = [f"{n}: {statistics.mean(v):+.2f} (max {max(v):+d})" for n, v in excess.items() if v]
        print("Greedy minus exact per component, mean over instances where both place (max): " + "; ".join(cells) + ".\n")
        gt = [s["median"] for _, s in qg.values()]
        et = [s["median"] for s in qes.values()]
        if gt and et:
            print(f"Time per instance: greedy median {statistics.median(gt) * 1e3:.2f} ms (max {max(gt) * 1e3:.1f}), "
                  f"CP-SAT median {statistics.median(et) * 1e3:.1f} ms (max {max(et) * 1e3:,.0f}); "
                  f"ratio of medians {statistics.median(et) / statistics.median(gt):,.0f}×. "
                  f"Instances: {min(i['nodes'] for i in qe.values())}–{max(i['nodes'] for i in qe.values())} nodes, "
                  f"{min(i['pods'] for i in qe.values())}–{max(i['pods'] for i in qe.values())} pods, "
                  f"models of up to {max(i['num_variables'] for i in qe.values()):,} variables.\n")
        if details:
            print("<details><summary>Per instance</summary>\n")
            print("| seed | nodes | levels | shape | pods | mode | level | slices | greedy ms | exact ms | status "
                  "| greedy: domains… / node / frag | exact | gap |")
            print("|---:|---:|---:|---|---:|---|---|---|---:|---:|---|---|---|---:|")
            for seed in sorted(qe):
                i = qe[seed]
                gs = qg.get(seed, (None, None))[1]
                sl = ", ".join(f"{lv} {n}" for lv, n in i["slices"]) or "—"
                print(f"| {seed} | {i['nodes']} | {i['levels']} | {i['shape_kind']} | {i['pods']} | {i['mode']} "
                      f"| {i['level']} | {sl} | {gs['median'] * 1e3:.2f} | {qes[seed]['median'] * 1e3:.1f} "
                      f"| {i['status']} | {_lex(i['greedy_decoded'])} | {_lex(i['exact_decoded'])} "
                      f"| {_pct(i['greedy_gap'])} |" if gs else "")
            print("\n</details>\n")


LIMIT_KINDS = ("gang-counts", "gang-time-limit", "gang-pairs")


def _slash(values) -> str:
    return "—" if values is None else "/".join(str(v) for v in values)


def _markdown_table(title: str, headers: list[str], right: set[int], rows: list[list[str]]) -> None:
    print(f"### {title}\n")
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---:" if k in right else "---" for k in range(len(headers))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def limits_report(runs: dict[str, list[tuple[dict, dict]]]) -> None:
    """Issue #12: the greedy's domain counts against CP-SAT at 10k nodes; timeLimitS at 50k."""
    counts = runs.get("gang-counts", [])
    if counts:
        rows = []
        for i, st in counts:
            same = "—" if not i["cp_sat_counts"] or not i["greedy_placed"] else (
                "yes" if i["cp_sat_counts"] == i["greedy_counts"] else "no")
            rows.append([i["occupancy"], i["gang"], i["mode"], f"{st['median'] * 1e3:.2f}",
                         _slash(i["greedy_counts"]) if i["greedy_placed"] else "—", _slash(i["greedy_bounds"]),
                         i["greedy_status"], _slash(i["cp_sat_counts"]), i["cp_sat_status"], str(i["cp_sat_s"]), same])
        _markdown_table(
            "Domains per level (block / rack / nvlDomain / node), greedy vs CP-SAT, 10,000 nodes",
            ["occupancy", "gang", "mode", "greedy ms", "greedy: counts", "bounds", "status",
             "CP-SAT (30 s, hint): counts", "status", "s", "greedy = CP-SAT"], {3, 9}, rows)
    for i, _ in runs.get("gang-pairs", []):
        print(f"Competing gang pairs: {i['instances']} instances, both gangs fit in some order in "
              f"{i['both_fit_in_some_order']}; request order loses one in {i['request_order_loses_one']}, "
              f"`joint` in {i['joint_loses_one']}; median ms per request {i['plain_median_ms']} (in order), "
              f"{i['joint_median_ms']} (joint).\n")
    limits = runs.get("gang-time-limit", [])
    if limits:
        rows = [[i["case"], str(i["exact_median_s"]), str(i["exact_max_s"]), str(i["greedy_median_s"]),
                 f"{i['solver']} / {i['status']}", _slash(i["counts"])] for i, _ in limits]
        _markdown_table(
            "`timeLimitS: 1`, `solver: exact`, 50,000 nodes (30 % held), 5 rounds",
            ["gang", "exact: median s", "max s", "greedy alone: median s", "solver / status", "counts"],
            {1, 2, 3}, rows)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--details"]
    main(args[0], details="--details" in sys.argv[1:])
