"""``placer.replay.simulate`` and ``placer simulate``: the FGD study's trace replay (FGD_NOTES §4)."""
from __future__ import annotations

import csv
import io
import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from placer.adapters import openb
from placer.cli import main
from placer.exceptions import InvalidInputError
from placer.model import PodRequest
from placer.replay.simulate import (
    arrival_order,
    available_policies,
    curve_metrics,
    gpu_capacity_milli,
    parse_seeds,
    pod_gpu_milli,
    run_replay,
    simulate,
    workload_name_from_path,
)
from placer.replay.study import Curve, load_published
from placer.replay.study_report import CSV_COLUMNS, table_markdown
from placer.model import replace

NODES_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def nodes_csv(*gpus: int, model: str = "V100") -> str:
    rows = [f"node-{i},64000,262144,{g},{model if g else ''}\n" for i, g in enumerate(gpus)]
    return NODES_HEADER + "".join(rows)


def mixed_pods() -> list[PodRequest]:
    """CPU-only, shared, 1-, 2- and 8-GPU pods; 5.5 GPUs requested in all."""
    return [
        PodRequest("p-cpu", cpu_milli=1000),
        PodRequest("p-share", gpus=1, gpu_milli=500, cpu_milli=1000),
        PodRequest("p-one", gpus=1, cpu_milli=1000),
        PodRequest("p-two", gpus=2, cpu_milli=1000),
        PodRequest("p-eight", gpus=8, cpu_milli=1000),
    ]


def total_milli(pods: list[PodRequest]) -> int:
    return sum(pod_gpu_milli(p) for p in pods)


def next_draw(pods: list[PodRequest], seed: int, clones: int) -> PodRequest:
    """The pod the inflation drew after its last clone (documented stream: shuffle, then
    one randrange per draw)."""
    original = sorted(pods, key=lambda p: p.name)
    rng = random.Random(seed)
    rng.shuffle(list(original))
    for _ in range(clones):
        rng.randrange(len(original))
    return original[rng.randrange(len(original))]


# ----------------------------------------------------------------------- inflation


@pytest.mark.parametrize("seed", [0, 1, 42, 7])
def test_inflation_stops_at_the_bound_with_the_total_test(seed: int) -> None:
    pods = mixed_pods()
    cap = 16_000  # two 8-GPU nodes; bound 20 800
    order = arrival_order(pods, seed, cap, stop="total")
    clones = order[len(pods):]
    assert total_milli(order) <= 1.3 * cap
    nxt = next_draw(pods, seed, len(clones))
    assert total_milli(order) + pod_gpu_milli(nxt) > 1.3 * cap


@pytest.mark.parametrize("seed", [0, 1, 42, 7])
def test_inflation_in_a_demand_of_the_callers(seed: int) -> None:
    """MIG slices instead of GPU milli: the same stream, the bound in the caller's unit."""
    slices = {"p-cpu": 0, "p-share": 4, "p-one": 8, "p-two": 16, "p-eight": 64}

    def demand(pod: PodRequest) -> int:
        return slices[pod.name.split("-tuned-")[0]]

    pods = mixed_pods()
    order = arrival_order(pods, seed, 128, stop="total", demand=demand)
    clones = order[len(pods):]
    total = sum(map(demand, order))
    assert total <= 1.3 * 128 < total + demand(next_draw(pods, seed, len(clones)))
    with pytest.raises(InvalidInputError, match="stop='total'"):
        arrival_order(pods, seed, 128, demand=demand)


@pytest.mark.parametrize("seed", [0, 1, 42, 7])
def test_inflation_stop_test_uses_the_per_gpu_milli_by_default(seed: int) -> None:
    """The simulator's quirk: total + per-GPU milli of the drawn pod against the bound."""
    pods = mixed_pods()
    cap = 16_000
    order = arrival_order(pods, seed, cap)
    clones = order[len(pods):]
    total = total_milli(order)
    nxt = next_draw(pods, seed, len(clones))
    # (A CPU-only draw stops it too once a multi-GPU clone has taken the total past the bound.)
    assert total + (nxt.gpu_milli if nxt.gpus else 0) > 1.3 * cap
    # Each accepted clone passed the per-GPU test before adding its whole request.
    running = total_milli(pods)
    for c in clones:
        per_gpu = c.gpu_milli if c.gpus else 0
        assert running + per_gpu <= 1.3 * cap
        running += pod_gpu_milli(c)
    assert running == total
    assert total <= 1.3 * cap + 7 * 1000


def test_inflation_of_same_size_pods_ends_within_one_pod_of_the_bound() -> None:
    pods = [PodRequest(f"g{i:02d}", gpus=1) for i in range(10)] + [PodRequest("c", cpu_milli=5)]
    cap = 40_000  # bound 52 000: exactly 42 one-GPU clones
    for seed in range(5):
        order = arrival_order(pods, seed, cap)
        assert total_milli(order) == 52_000
        assert sum(1 for p in order[len(pods):] if p.gpus) == 42


def test_clone_names_and_originals_first() -> None:
    pods = mixed_pods()
    by_name = {p.name: p for p in pods}
    order = arrival_order(pods, 3, 16_000)
    assert sorted(p.name for p in order[: len(pods)]) == sorted(by_name)
    clones = order[len(pods):]
    assert clones, "the pods request far less than 1.3 x capacity: clones expected"
    for i, c in enumerate(clones):
        base, sep, idx = c.name.rpartition("-tuned-")
        assert sep and idx == str(i) and base in by_name
        assert c == replace(by_name[base], name=c.name)


def test_order_is_deterministic_per_seed_and_differs_between_seeds() -> None:
    snapshot, pods = openb.load_default()
    cap = gpu_capacity_milli(snapshot)
    assert cap == 6_212_000
    a = [p.name for p in arrival_order(pods, 42, cap)]
    b = [p.name for p in arrival_order(pods, 42, cap)]
    c = [p.name for p in arrival_order(pods, 43, cap)]
    assert a == b
    assert a != c and a[: len(pods)] != c[: len(pods)]
    assert len(a) == len(set(a))
    # FGD_NOTES §4: the default trace (98 % of capacity) gets about 2.7k clones, ~10.8k pods.
    assert 2_400 < len(a) - len(pods) < 3_000


def test_inflation_edge_cases() -> None:
    pods = [PodRequest("a", gpus=4), PodRequest("b", gpus=4), PodRequest("c", gpus=4)]
    # Over the bound already: random pods are removed until the total fits (tuneDownPods).
    down = arrival_order(pods, 5, 4_000)
    assert total_milli(down) <= 5_200 and len(down) == 1
    # Exactly at the bound: nothing added.
    assert len(arrival_order(pods, 5, 12_000, ratio=1.0)) == 3
    with pytest.raises(InvalidInputError, match="no pod requests a GPU"):
        arrival_order([PodRequest("c", cpu_milli=1)], 1, 8_000)
    with pytest.raises(InvalidInputError, match="empty"):
        arrival_order([], 1, 8_000)
    with pytest.raises(InvalidInputError):
        arrival_order(pods, 1, 8_000, stop="sometimes")


# ------------------------------------------------------------------------- metrics


def test_curve_metrics_by_hand() -> None:
    cap = 100_000  # 1 % = 1000 milli
    arrived = [0, 1_000, 1_000, 2_400, 4_600, 5_000]  # rounded %: 0, 1, 1, 2, 5, 5
    allocated = [0, 1_000, 1_000, 1_000, 3_000, 5_000]
    frag = [10_000, 9_000, 8_000, 8_000, 6_000, 4_000]
    k, u, f = curve_metrics(np.array(arrived), np.array(allocated), np.array(frag), cap)
    # k 3 has none: mean of k 2 and 4 -> only k 2; k 4: k 3 and 5 -> k 5's two samples;
    # k 6: k 5 and 7 -> k 5; k 7 and up: nothing.
    assert k.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert u.tolist() == pytest.approx([100.0, 99.0, 99.0, 99.0, 96.0, 96.0, 96.0])
    assert f.tolist() == pytest.approx([10.0, 8.5, 8.0, 8.0, 5.0, 5.0, 5.0])


def test_curve_metrics_rounds_half_to_even_and_stops_at_130() -> None:
    cap = 1_000
    arrived = [5, 15, 1_305, 1_325]  # 0.5 -> 0, 1.5 -> 2, 130.5 -> 130, 132.5 -> 132
    k, u, _ = curve_metrics(np.array(arrived), np.zeros(4), np.zeros(4), cap)
    assert k.tolist() == [0, 1, 2, 3, 129, 130]
    assert u.tolist() == [100.0] * 6


def simple_fit(order: list[PodRequest], gpus: int) -> list[bool]:
    """One node of ``gpus`` whole GPUs, no sharing: a pod fits iff its GPUs are free."""
    free = gpus
    out = []
    for p in order:
        ok = p.gpus <= free
        free -= p.gpus if ok else 0
        out.append(ok)
    return out


@pytest.mark.parametrize("policy", ["best-fit", "fgd", "random"])
@pytest.mark.parametrize("seed", [0, 4, 5])  # orders a c b, c b a, a b c
def test_run_replay_on_one_node_by_hand(policy: str, seed: int) -> None:
    snapshot = openb.read_nodes(nodes_csv(4))
    pods = [PodRequest("a", gpus=2), PodRequest("b", gpus=2), PodRequest("c", gpus=4)]
    # ratio 2 = exactly the 8 GPUs asked for: no inflation, the order is a shuffle of a, b, c.
    curve = run_replay(snapshot, pods, policy, seed, ratio=2.0, name="tiny")
    order = arrival_order(pods, seed, 4_000, ratio=2.0)
    assert sorted(p.name for p in order) == ["a", "b", "c"]
    fits = simple_fit(order, 4)
    arrived_pct, unalloc = [0], [100.0]
    a = used = 0
    for p, ok in zip(order, fits):
        a += 100 * p.gpus // 4
        used += p.gpus if ok else 0
        arrived_pct.append(a)
        unalloc.append(100.0 - 100.0 * used / 4)
    expected = {}
    for k in range(131):
        hits = [u for x, u in zip(arrived_pct, unalloc) if x == k] or [
            u for x, u in zip(arrived_pct, unalloc) if abs(x - k) == 1
        ]
        if hits:
            expected[k] = sum(hits) / len(hits)
    assert curve.arrived_pct.tolist() == sorted(expected)
    assert curve.unallocated_pct.tolist() == pytest.approx([expected[k] for k in sorted(expected)])
    assert curve.at(100) == pytest.approx(expected.get(100, math.nan), nan_ok=True)
    assert math.isnan(curve.at(130))
    assert (curve.workload, curve.policy, curve.seed) == ("tiny", policy, seed)
    assert (curve.capacity_milli, curve.original_pods, curve.arrived_pods) == (4_000, 3, 3)
    assert curve.placed_pods == sum(fits)
    assert np.all((curve.frag_pct >= 0) & (curve.frag_pct <= 100))


def test_run_replay_refuses_an_unknown_policy() -> None:
    snapshot = openb.read_nodes(nodes_csv(4))
    with pytest.raises(InvalidInputError):
        run_replay(snapshot, [PodRequest("a", gpus=1)], "tetris", 1)


def test_simulate_in_processes_matches_one_process() -> None:
    snapshot = openb.read_nodes(nodes_csv(8, 8, 4, 2))
    pods = [PodRequest(f"p{i:02d}", gpus=1 + i % 2, gpu_milli=1000, cpu_milli=1000) for i in range(12)]
    pods += [PodRequest(f"s{i:02d}", gpus=1, gpu_milli=300 + 100 * i, cpu_milli=500) for i in range(5)]
    one = simulate(snapshot, pods, ["fgd", "best-fit"], [1, 2], jobs=1, progress=False, name="w")
    two = simulate(snapshot, pods, ["fgd", "best-fit"], [1, 2], jobs=2, progress=False, name="w")
    assert [(c.policy, c.seed) for c in one] == [("fgd", 1), ("fgd", 2), ("best-fit", 1), ("best-fit", 2)]
    for x, y in zip(one, two):
        assert (x.policy, x.seed) == (y.policy, y.seed)
        assert x.arrived_pct.tolist() == y.arrived_pct.tolist()
        assert x.unallocated_pct.tolist() == y.unallocated_pct.tolist()
        assert x.frag_pct.tolist() == y.frag_pct.tolist()


# ---------------------------------------------------------------- published, helpers


def test_published_values_are_the_bundled_summary() -> None:
    pub = load_published()
    assert pub[("default", "fgd")][100][0] == pytest.approx(4.77, abs=0.005)
    assert pub[("default", "best-fit")][100][0] == pytest.approx(7.14, abs=0.005)
    assert pub[("default", "random")][100][1] == pytest.approx(13.75, abs=0.005)
    assert len({w for w, _ in pub}) == 17


def test_table_shows_ours_beside_published() -> None:
    curve = Curve(
        workload="default", policy="fgd", seed=1, arrived_pct=np.array([99, 100, 101]),
        unallocated_pct=np.array([5.0, 4.5, 4.4]), frag_pct=np.array([4.0, 4.0, 4.0]),
        capacity_milli=6_212_000, original_pods=8152, arrived_pods=10_000, placed_pods=9_000,
    )
    text = table_markdown([curve])
    assert "| fgd | 4.50 | 4.50 | 4.77 | 4.77 | -0.27 |" in text
    assert "| fgd | 90 | – | – | 10.02 | 10.01 |" in text


def test_workload_name_and_seed_parsing() -> None:
    assert workload_name_from_path("/x/openb_pod_list_gpushare40.csv") == "gpushare40"
    assert workload_name_from_path("my_pods.csv") == "my_pods"
    assert parse_seeds("42-51") == list(range(42, 52))
    assert parse_seeds("1,2,3") == [1, 2, 3]
    assert parse_seeds(" 1-3 , 7 ") == [1, 2, 3, 7]
    for bad in ("", "5-1", "a", "1,,2", "-3", "1.5", "1,1"):
        with pytest.raises(InvalidInputError) as exc:
            parse_seeds(bad)
        assert exc.value.where == "--seeds"


# --------------------------------------------------------------------------- CLI


def write_subsample(tmp_path: Path) -> tuple[Path, Path]:
    """60 of the bundled nodes and 400 of the default pods (every 20th row of each)."""
    node_lines = openb.data_path(openb.DEFAULT_NODES).read_text().splitlines(keepends=True)
    pod_lines = openb.data_path(openb.DEFAULT_PODS).read_text().splitlines(keepends=True)
    nodes = tmp_path / "nodes.csv"
    pods = tmp_path / "sub_pods.csv"
    nodes.write_text(node_lines[0] + "".join(node_lines[1::20][:60]))
    pods.write_text(pod_lines[0] + "".join(pod_lines[1::20][:400]))
    return nodes, pods


def test_cli_end_to_end_on_a_subsample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes, pods = write_subsample(tmp_path)
    out = tmp_path / "out"
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1,2", "--jobs", "1",
            "--out", str(out), "--quiet"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    ran = ["fgd-pack", "fgd", "best-fit", "random", "gpu-packing", "gpu-clustering", "dot-product"]
    assert set(ran) <= set(available_policies())
    assert captured.err.splitlines() == []
    assert "sub_pods" in captured.out and all(p in captured.out for p in ran)

    assert sorted(x.name for x in out.iterdir()) == ["curves.csv", "curves.png", "table.md"]
    rows = list(csv.DictReader(io.StringIO((out / "curves.csv").read_text())))
    with (out / "curves.csv").open() as f:
        assert tuple(next(csv.reader(f))) == CSV_COLUMNS
    runs = Counter((r["workload"], r["policy"], r["seed"]) for r in rows)
    assert set(runs) == {("sub_pods", p, s) for p in ran for s in ("1", "2")}
    for key in runs:
        ks = [int(r["arrived_pct"]) for r in rows if (r["workload"], r["policy"], r["seed"]) == key]
        assert ks == sorted(set(ks)) and ks[0] == 0 and 125 <= ks[-1] <= 130
        for r in rows:
            if (r["workload"], r["policy"], r["seed"]) == key:
                assert 0.0 <= float(r["unallocated_pct"]) <= 100.0
                assert 0.0 <= float(r["frag_pct"]) <= 100.0
    table = (out / "table.md").read_text()
    assert all(f"| {p} |" in table for p in ran)
    assert "312 GPUs" in table
    assert (out / "curves.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(
    "extra, where",
    [
        (["--seeds", "5-1"], "--seeds"),
        (["--seeds", "x"], "--seeds"),
        (["--seeds", ""], "--seeds"),
        (["--policy", "no-such"], "--policy"),
        (["--policy", "fgd,fgd"], "--policy"),
        (["--jobs", "0"], "--jobs"),
        (["--executor", "spark"], "--executor"),
        (["--address", "auto"], "--address"),
    ],
)
def test_cli_bad_input_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], where: str
) -> None:
    nodes, pods = write_subsample(tmp_path)
    out = tmp_path / "out"
    assert main(["simulate", "--nodes", str(nodes), "--pods", str(pods), "--out", str(out), "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"placer: error: {where}: ")
    assert not out.exists()


def test_cli_unknown_policy_by_name_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["simulate", "--policy", "tetris", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placer: error: ") and err.count("\n") == 1
    assert not out.exists()


def test_cli_bad_csv_and_bad_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "openb_pod_list_bad.csv"
    bad.write_text("name,cpu_milli\nx,1\n")
    out = tmp_path / "out"
    assert main(["simulate", "--pods", str(bad), "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("placer: error: openb_pod_list_bad.csv:1: ")
    assert not out.exists()
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["simulate", "--seeds", "1", "--out", str(afile), "--quiet"]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert afile.read_text() == "x"


def _flat_curve(policy: str, seed: int, level: float) -> Curve:
    k = np.arange(131)
    return Curve("w", policy, seed, k, np.full(131, level), np.full(131, level / 2), 8000, 10, 13, 9)


def test_the_plot_has_one_legend_below_its_axes_that_counts_seeds_in_words() -> None:
    import matplotlib.pyplot as plt

    from placer.replay.study_report import plot_figure

    names = ["fgd-pack", "fgd", "best-fit", "random", "gpu-packing", "gpu-clustering", "dot-product", "spread"]
    curves = [_flat_curve(p, 1, 5.0 + i) for i, p in enumerate(names)]
    fig = plot_figure(curves, published={})
    try:
        assert all(ax.get_legend() is None for ax in fig.axes)  # nothing drawn over the curves
        (legend,) = fig.legends
        labels = [t.get_text() for t in legend.get_texts()]
        assert sorted(labels) == sorted(f"{p} (median of 1 seed)" for p in names)
        fig.canvas.draw()
        legend_top = legend.get_window_extent().y1
        assert all(ax.get_window_extent().y0 > legend_top for ax in fig.axes)
    finally:
        plt.close(fig)


def test_cli_no_plot_writes_the_table_and_csv_only(tmp_path: Path) -> None:
    nodes, pods = write_subsample(tmp_path)
    out = tmp_path / "out"
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--policy", "best-fit",
            "--jobs", "1", "--out", str(out), "--quiet", "--no-plot"]
    assert main(argv) == 0
    assert sorted(x.name for x in out.iterdir()) == ["curves.csv", "table.md"]


def test_cli_a_failed_run_is_named_and_the_others_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import placer.replay.simulate as module

    real = module.run_replay

    def breaks_on_seed_2(snapshot, pods, policy, seed, *args, **kwargs):  # type: ignore[no-untyped-def]
        if seed == 2:
            raise MemoryError("out of memory")
        return real(snapshot, pods, policy, seed, *args, **kwargs)

    monkeypatch.setattr(module, "run_replay", breaks_on_seed_2)
    nodes, pods = write_subsample(tmp_path)
    out = tmp_path / "out"
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--out", str(out), "--quiet", "--no-plot",
            "--policy", "best-fit", "--seeds", "1-3", "--jobs", "1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "run " in err and " best-fit seed 2 failed twice: MemoryError: out of memory" in err
    seeds = {row["seed"] for row in csv.DictReader(io.StringIO((out / "curves.csv").read_text()))}
    assert seeds == {"1", "3"}


def test_fgd_pack_weights_reach_the_kernel() -> None:
    snapshot, pods = openb.load_default()
    default = run_replay(snapshot, pods, "fgd-pack", 42)
    assert run_replay(snapshot, pods, "fgd-pack", 42, packing_weights=(30.0, 0.5)).at(100) == default.at(100)
    assert run_replay(snapshot, pods, "fgd-pack", 42, packing_weights=(0.0, 0.0)).at(100) != default.at(100)
    with pytest.raises(InvalidInputError, match="regretWeight"):
        run_replay(snapshot, pods, "fgd-pack", 42, packing_weights=(-1.0, 0.5))


def test_cli_ctrl_c_writes_the_finished_replays_and_says_how_many(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import placer.replay.simulate as module

    real = module.run_replay

    def ctrl_c_on_seed_3(snapshot, pods, policy, seed, *args, **kwargs):  # type: ignore[no-untyped-def]
        if seed == 3:
            raise KeyboardInterrupt
        return real(snapshot, pods, policy, seed, *args, **kwargs)

    monkeypatch.setattr(module, "run_replay", ctrl_c_on_seed_3)
    nodes, pods = write_subsample(tmp_path)
    out = tmp_path / "out"
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--out", str(out), "--quiet", "--no-plot",
            "--policy", "best-fit", "--seeds", "1-4", "--jobs", "1"]
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "placer: interrupted; 2 of 4 runs kept\n")
    seeds = {row["seed"] for row in csv.DictReader(io.StringIO((out / "curves.csv").read_text()))}
    assert seeds == {"1", "2"}


def test_cli_no_plot_removes_the_plot_of_an_earlier_run_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = write_subsample(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "curves.png").write_bytes(b"\x89PNG of another run")
    argv = ["simulate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--policy", "best-fit",
            "--jobs", "1", "--out", str(out), "--quiet", "--no-plot"]
    assert main(argv) == 0
    assert sorted(x.name for x in out.iterdir()) == ["curves.csv", "table.md"]
    assert f"placer: simulate: note: removed {out / 'curves.png'} of an earlier run" in capsys.readouterr().err


def test_a_plot_that_fails_leaves_no_plot_of_an_earlier_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import placer.replay.study_report as module

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no backend")

    nodes, pods = write_subsample(tmp_path)
    curves = simulate(openb.read_nodes(nodes), openb.read_pods(pods), ["best-fit"], [1], jobs=1, progress=False)
    (tmp_path / "curves.png").write_bytes(b"\x89PNG of another run")
    monkeypatch.setattr(module, "write_plot", broken)
    with pytest.raises(RuntimeError, match="no backend"):
        module.write_outputs(curves, tmp_path)
    assert not (tmp_path / "curves.png").exists() and (tmp_path / "curves.csv").exists()
