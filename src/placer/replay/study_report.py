"""What ``placer simulate`` writes of its replays: the curves as CSV, the summary table in
Markdown beside the study's published figures, and the figure (matplotlib, imported when a
plot is drawn). :func:`write_outputs` writes all three.
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from placer.text.files import PathLike, remove_stale, write_bytes_atomic, write_text_atomic
from placer.replay.study import (
    ALL_POLICIES, MAX_ARRIVED, PUBLISHED_FILE, PUBLISHED_SEEDS, STUDY_POLICIES, TABLE_ARRIVED, TUNE_RATIO, Curve,
    Published, load_published,
)

__all__ = [
    "CSV_COLUMNS", "curves_csv", "summary_rows", "table_markdown", "write_curves_csv", "write_table_md", "write_plot",
    "plot_figure", "write_outputs",
]

CSV_COLUMNS = ("workload", "policy", "seed", "arrived_pct", "unallocated_pct", "frag_pct")
"""The columns of ``curves.csv``, one row per (workload, policy, seed, arrived %)."""


def curves_csv(curves: Sequence[Curve]) -> str:
    """``curves.csv``: one row per curve and integer arrived %."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in curves:
        for k, u, f in zip(c.arrived_pct.tolist(), c.unallocated_pct.tolist(), c.frag_pct.tolist()):
            w.writerow((c.workload, c.policy, c.seed, k, f"{u:.4f}", f"{f:.4f}"))
    return buf.getvalue()


def _groups(curves: Sequence[Curve]) -> dict[str, dict[str, list[Curve]]]:
    out: dict[str, dict[str, list[Curve]]] = {}
    for c in curves:
        out.setdefault(c.workload, {}).setdefault(c.policy, []).append(c)
    return out


def _stats(values: list[float]) -> tuple[float, float, float, int]:
    """(median, mean, sample sd, n) over the values that are not NaN."""
    v = np.array([x for x in values if not math.isnan(x)])
    if v.size == 0:
        return math.nan, math.nan, math.nan, 0
    sd = float(v.std(ddof=1)) if v.size > 1 else math.nan
    return float(np.median(v)), float(v.mean()), sd, int(v.size)


def _num(x: float, digits: int = 2) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _mean_sd(mean: float, sd: float) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.2f} ± {sd:.2f}" if not math.isnan(sd) else f"{mean:.2f}"


def _seed_text(seeds: list[int]) -> str:
    s = sorted(set(seeds))
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}–{s[-1]} ({len(s)})"
    return ", ".join(map(str, s)) + f" ({len(s)})"


def _policy_order(policies: Iterable[str]) -> list[str]:
    rank = {p: i for i, p in enumerate(ALL_POLICIES)}
    return sorted(set(policies), key=lambda p: (rank.get(p, len(rank)), p))


def summary_rows(
    curves: Sequence[Curve], published: Published | None = None, arrived: int = 100
) -> list[dict[str, Any]]:
    """Per workload and policy: our median / mean / sd at ``arrived`` % and the published
    mean / median (NaN when unknown)."""
    if published is None:
        published = load_published()
    rows = []
    for workload, by_policy in _groups(curves).items():
        for policy in _policy_order(by_policy):
            med, mean, sd, n = _stats([c.at(arrived) for c in by_policy[policy]])
            pub = published.get((workload, policy), {}).get(arrived)
            rows.append(
                {
                    "workload": workload,
                    "policy": policy,
                    "median": med,
                    "mean": mean,
                    "sd": sd,
                    "n": n,
                    "published_mean": pub[0] if pub else math.nan,
                    "published_median": pub[1] if pub else math.nan,
                }
            )
    return rows


def table_markdown(
    curves: Sequence[Curve],
    published: Published | None = None,
) -> str:
    """``table.md``: per workload, unallocated GPU % at 90…130 % arrived, ours beside the study's."""
    if published is None:
        published = load_published()
    lines = ["# Trace replay: unallocated GPU % by arrived GPU %", ""]
    lines += [
        "Ours: median and mean ± sd over the seeds of each run's value at that arrived % "
        "(as the FGD study reports its runs). Published: the FGD study's simulator, 10 seeds "
        f"{PUBLISHED_SEEDS} (`{PUBLISHED_FILE}`), for the 1213-node, 6212-GPU openb cluster. "
        "Our seeds draw other arrival orders than the study's (Python's `random`, not Go's "
        "`math/rand`), so only the statistics over seeds compare. Δ = our mean − published mean.",
        "",
    ]
    for workload, by_policy in _groups(curves).items():
        policies = _policy_order(by_policy)
        first = by_policy[policies[0]][0]
        gpus = first.capacity_milli // 1000
        seeds = sorted({c.seed for cs in by_policy.values() for c in cs})
        lines += [f"## Workload `{workload}`", ""]
        lines.append(
            f"Cluster: {gpus} GPUs. Pods: {first.original_pods} in the trace, inflated to "
            f"{TUNE_RATIO:g} × GPU capacity. Seeds: {_seed_text(seeds)}."
        )
        if gpus != 6212:
            lines.append("")
            lines.append(
                f"Note: this cluster has {gpus} GPUs, not the study's 6212; the published values "
                "are for the full cluster."
            )
        lines.append("")
        lines += [
            "### At 100 % arrived",
            "",
            "| policy | ours median | ours mean ± sd | published mean | published median | Δ mean |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in summary_rows([c for p in policies for c in by_policy[p]], published):
            delta = row["mean"] - row["published_mean"]
            lines.append(
                f"| {row['policy']} | {_num(row['median'])} | {_mean_sd(row['mean'], row['sd'])} | "
                f"{_num(row['published_mean'])} | {_num(row['published_median'])} | "
                f"{'–' if math.isnan(delta) else f'{delta:+.2f}'} |"
            )
        lines += [
            "",
            "### By arrived %",
            "",
            "| policy | arrived % | ours median | ours mean ± sd | published mean | published median |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for policy in policies:
            pub = published.get((workload, policy), {})
            for k in TABLE_ARRIVED:
                med, mean, sd, _ = _stats([c.at(k) for c in by_policy[policy]])
                pm, pmed, _ = pub.get(k, (math.nan, math.nan, math.nan))
                lines.append(
                    f"| {policy} | {k} | {_num(med)} | {_mean_sd(mean, sd)} | {_num(pm)} | {_num(pmed)} |"
                )
        missing = [p for p in STUDY_POLICIES if p not in by_policy]
        if missing:
            lines += ["", f"Not run (not available yet or not asked for): {', '.join(missing)}."]
        lines.append("")
    return "\n".join(lines)


def write_curves_csv(curves: Sequence[Curve], path: PathLike) -> None:
    """Write ``curves.csv`` atomically."""
    write_text_atomic(path, curves_csv(curves))


def write_table_md(
    curves: Sequence[Curve],
    path: PathLike,
    published: Published | None = None,
) -> None:
    """Write ``table.md`` atomically."""
    write_text_atomic(path, table_markdown(curves, published))


def _matrix(curves: Sequence[Curve]) -> np.ndarray:
    """Seeds × (0..130) unallocated %, NaN where a curve has no value."""
    m = np.full((len(curves), MAX_ARRIVED + 1), np.nan)
    for i, c in enumerate(curves):
        m[i, c.arrived_pct] = c.unallocated_pct
    return m


def write_plot(
    curves: Sequence[Curve],
    path: PathLike,
    published: Published | None = None,
) -> None:
    """Write ``curves.png``: per workload, unallocated % vs arrived % per policy (median over
    seeds with the 25–75 % band), full range and 80–130 % zoomed, published means as marks;
    one legend for the figure, below the plots."""
    import matplotlib.pyplot as plt

    fig = plot_figure(curves, published)
    try:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=110)
        write_bytes_atomic(path, png.getvalue())
    finally:
        plt.close(fig)


def plot_figure(curves: Sequence[Curve], published: Published | None = None) -> Any:
    """The matplotlib figure of :func:`write_plot` (matplotlib is imported here, on first use)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if published is None:
        published = load_published()
    groups = _groups(curves)
    fig, axes = plt.subplots(len(groups), 2, figsize=(12, 4.2 * len(groups)), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x = np.arange(MAX_ARRIVED + 1)
    legend: dict[str, Any] = {}
    try:
        for row, (workload, by_policy) in enumerate(groups.items()):
            for i, policy in enumerate(_policy_order(by_policy)):
                color = colors[i % len(colors)]
                m = _matrix(by_policy[policy])
                has = ~np.all(np.isnan(m), axis=0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    med = np.nanmedian(m[:, has], axis=0)
                    lo, hi = np.nanpercentile(m[:, has], [25, 75], axis=0)
                pub = published.get((workload, policy), {})
                seeds = m.shape[0]
                for ax in axes[row]:
                    label = f"{policy} (median of {seeds} seed{'s' if seeds != 1 else ''})"
                    legend.setdefault(label, ax.plot(x[has], med, color=color, lw=1.4)[0])
                    ax.fill_between(x[has], lo, hi, color=color, alpha=0.25, lw=0)
                    if pub:
                        ks = sorted(pub)
                        marks = ax.plot(ks, [pub[k][0] for k in ks], ls="none", marker="x", ms=6, color=color)
                        legend.setdefault(f"{policy} published mean", marks[0])
            full, zoom = axes[row]
            full.set_title(f"{workload}: unallocated GPU % vs arrived")
            zoom.set_title(f"{workload}: arrived 80–130 %")
            for ax in (full, zoom):
                ax.set_xlabel("arrived GPU request, % of GPU capacity")
                ax.set_ylabel("unallocated GPU %")
                ax.grid(True, alpha=0.3)
            full.set_xlim(0, MAX_ARRIVED)
            full.set_ylim(0, 100)
            zoom.set_xlim(80, MAX_ARRIVED)
            vals = [
                v
                for p in by_policy
                for v in _matrix(by_policy[p])[:, 80:].ravel().tolist()
                if not math.isnan(v)
            ] + [pub_v[0] for p in by_policy for pub_v in published.get((workload, p), {}).values()]
            if vals:
                top = float(np.percentile(vals, 98)) if len(vals) > 10 else max(vals)
                zoom.set_ylim(0, min(100.0, max(top * 1.15, 1.0)))
        columns = 4
        rows = -(-len(legend) // columns)
        below = (0.3 + 0.22 * rows) / fig.get_figheight()  # the legend's share of the height
        fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=columns, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, below, 1, 1))
    except BaseException:
        plt.close(fig)
        raise
    return fig


def write_outputs(
    curves: Sequence[Curve],
    out_dir: PathLike,
    published: Published | None = None,
    plot: bool = True,
    on_removed: Callable[[Path], None] | None = None,
) -> list[Path]:
    """Create ``out_dir`` if needed and write ``curves.csv``, ``table.md`` and (``plot``)
    ``curves.png``. Without ``plot``, a ``curves.png`` of an earlier run is removed (it
    would not show these curves), and handed to ``on_removed``; so is it when drawing the
    plot fails.

    Returns the paths written.
    """
    if published is None:
        published = load_published()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "curves.csv", out / "table.md"]
    write_curves_csv(curves, paths[0])
    write_table_md(curves, paths[1], published)
    if plot:
        paths.append(out / "curves.png")
        try:
            write_plot(curves, paths[2], published)
        except BaseException:
            remove_stale(paths[2])  # an old plot must not sit beside the new curves
            raise
    elif remove_stale(out / "curves.png") and on_removed is not None:
        on_removed(out / "curves.png")
    return paths
