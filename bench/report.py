"""Turn a pytest-benchmark JSON of the bench/ files into the Markdown tables of RESULTS.md.

``test_bench_place.py`` (issue #2): kernel vs reference per pod.
``test_bench_gpusets.py`` (issue #3): select_gpus vs brute force, table build, cluster with
and without a GPU topology. ``--details`` adds the per-size tables of issue #3.
"""
from __future__ import annotations

import json
import statistics
import sys


def main(path: str, details: bool = False) -> None:
    data = json.load(open(path))
    kernel, reference, other = {}, {}, []
    gpusets: dict[str, list[tuple[dict, dict]]] = {}
    for b in data["benchmarks"]:
        info = b["extra_info"]
        median = b["stats"]["median"]
        if info.get("kind") in ("kernel", "reference"):
            key = (info["nodes"], info["shape"], info["policy"])
            (kernel if info["kind"] == "kernel" else reference)[key] = (median / info["pods"], info)
        elif info.get("kind") in ("select", "brute", "tables", "cluster", "cluster-paired"):
            gpusets.setdefault(info["kind"], []).append((info, b["stats"]))
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


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--details"]
    main(args[0], details="--details" in sys.argv[1:])
