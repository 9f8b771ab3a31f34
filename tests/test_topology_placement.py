"""Topology-aware placement in a cluster: GPU sets from the tables, equally good nodes
ranked by their set's score, shared pods keeping connected groups whole, GPU + NIC."""
from __future__ import annotations

from pathlib import Path

import pytest

import placer
from placer.model import Assignment, PlacementResult
from placer.model import replace
from agreement import schedule_checked
from reference import reference_select
from topologies import UPSTREAM, upstream_topology

TOPO = Path(__file__).parent / "data" / "topo"
DGX1 = upstream_topology("DGX1Volta")


def node_type(topology=None, gpus=8, **extra):
    t = {"gpuModel": "V100", "gpus": gpus, "cpuMilli": 64000, "memoryMiB": 512000}
    if topology is not None:
        t["gpuTopology"] = topology
    t.update(extra)
    return t


def snapshot(types, nodes):
    return placer.ClusterSnapshot.from_dict(
        {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodeTypes": types, "nodes": nodes}
    )


def request(*pods, policy="best-fit"):
    return placer.PlacementRequest.from_dict(
        {"apiVersion": "placer/v1", "kind": "PlacementRequest", "policy": policy, "pods": list(pods)}
    )


DGX1_SPEC = {"matrix": [list(r) for r in DGX1.labels]}


def test_two_gpu_pod_gets_the_pair_of_the_best_split():
    # GPUs 1, 3, 6, 7 held: free 0, 2, 4, 5. Upstream's case: the answer is [4, 5].
    snap = snapshot(
        {"dgx1": node_type(DGX1_SPEC)},
        [{"name": "n0", "type": "dgx1", "pods": [{"name": "held", "gpus": [1, 3, 6, 7]}]}],
    )
    got = schedule_checked(snap, request({"name": "p", "gpus": 2}))
    assert got.assignments[0].gpus == (4, 5)
    assert (4, 5) == reference_select(DGX1.scores, [0, 2, 4, 5], 2)


@pytest.mark.parametrize("size", [2, 3, 4, 8])
def test_every_size_takes_the_tables_choice_on_a_free_node(size):
    snap = snapshot({"dgx1": node_type(DGX1_SPEC)}, [{"name": "n0", "type": "dgx1"}])
    got = schedule_checked(snap, request({"name": "p", "gpus": size}))
    assert got.assignments[0].gpus == reference_select(DGX1.scores, range(8), size)


def test_equal_nodes_are_ranked_by_their_best_set():
    pcie = {"matrix": [["X" if i == j else "SYS" for j in range(4)] for i in range(4)]}
    nvlink = {"matrix": [["X" if i == j else "NV2" for j in range(4)] for i in range(4)]}
    snap = snapshot(
        {"pcie": node_type(pcie, gpus=4), "nvl": node_type(nvlink, gpus=4)},
        [{"name": "a-pcie", "type": "pcie"}, {"name": "b-nvlink", "type": "nvl"}],
    )
    for policy in ("best-fit", "spread"):
        got = schedule_checked(snap, request({"name": "p", "gpus": 2}, policy=policy))
        assert got.assignments[0].node == "b-nvlink"
    # first-fit keeps its own rule: the lowest index
    got = schedule_checked(snap, request({"name": "p", "gpus": 2}, policy="first-fit"))
    assert got.assignments[0].node == "a-pcie"
    # one GPU: no pairs, so the index decides again
    got = schedule_checked(snap, request({"name": "p", "gpus": 1}))
    assert got.assignments[0].node == "a-pcie"


def test_single_gpus_and_shares_keep_connected_groups_whole():
    rows = [["X" if i == j else "SYS" for j in range(4)] for i in range(4)]
    rows[0][1] = rows[1][0] = "NV4"
    rows[2][3] = rows[3][2] = "PIX"
    snap = snapshot({"t": node_type({"matrix": rows}, gpus=4)}, [{"name": "n0", "type": "t"}])
    got = schedule_checked(
        snap,
        request(
            {"name": "one", "gpus": 1},
            {"name": "share-a", "gpus": 1, "gpuMilli": 300},
            {"name": "share-b", "gpus": 1, "gpuMilli": 600},
        ),
    )
    by_pod = {a.pod: a.gpus for a in got.assignments}
    assert by_pod["one"] == (2,)  # the PIX pair is weaker than the NVLink pair
    assert by_pod["share-a"] == (3,)  # then the GPU left alone, not one of the NVLink pair
    assert by_pod["share-b"] == (3,)  # best-fit share: the GPU already shared still fits


def test_nvidia_smi_text_drives_gpus_and_nics():
    text = (TOPO / "dgx-a100_mlx5x12_gengwg-cheatsheets.txt").read_text()
    snap = snapshot(
        {"dgx-a100": node_type({"nvidiaSmiTopo": text})},
        [{"name": "n0", "type": "dgx-a100", "pods": [{"name": "held", "gpus": [0, 1, 3]}]}],
    )
    hw = snap.nodes[0].hardware
    assert [n.name for n in hw.nic_list][:3] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    got = schedule_checked(snap, request({"name": "p", "gpus": 2, "nics": 2}))
    a = got.assignments[0]
    # NV12 everywhere: the NICs decide; each GPU is paired with a NIC behind its own
    # PCIe switch (PXB), and GPU 2, whose partner is taken, is used up first.
    assert a.gpus == (2, 4) and a.nics == ("mlx5_2", "mlx5_6")
    got = schedule_checked(snap, request({"name": "p", "gpus": 1, "nics": 1}))
    assert got.assignments[0].gpus == (2,) and got.assignments[0].nics == ("mlx5_2",)


def test_a_pod_asking_for_a_nic_goes_to_the_gpu_near_one():
    text = (TOPO / "issue_8x-rtx4090-pcie_2nic_go-gpuallocator-17.txt").read_text()
    snap = snapshot({"box": node_type({"nvidiaSmiTopo": text})}, [{"name": "n0", "type": "box"}])
    plain = schedule_checked(snap, request({"name": "p", "gpus": 1}))
    assert plain.assignments[0].gpus == (0,) and plain.assignments[0].nics == ()
    got = schedule_checked(snap, request({"name": "p", "gpus": 1, "nics": 1}))
    assert got.assignments[0].gpus == (6,) and got.assignments[0].nics == ("NIC0",)


def test_nics_listed_on_the_node_type_and_too_few_nics():
    nics = [
        {"name": "mlx5_0", "matrix": ["PIX", "PIX", "SYS", "SYS"]},
        {"name": "mlx5_1", "matrix": ["SYS", "SYS", "PIX", "PIX"]},
    ]
    snap = snapshot(
        {"t": node_type(gpus=4, nics=nics), "bare": node_type(gpus=4)},
        [
            {"name": "n0", "type": "t", "pods": [{"name": "held", "gpus": [0]}]},
            {"name": "n1", "type": "bare"},
        ],
    )
    got = schedule_checked(
        snap,
        request(
            {"name": "near", "gpus": 1, "nics": 1},
            {"name": "both", "gpus": 2, "nics": 2},
            {"name": "greedy", "gpus": 1, "nics": 3},
        ),
    )
    by_pod = {a.pod: a for a in got.assignments}
    assert by_pod["near"].gpus == (1,) and by_pod["near"].nics == ("mlx5_0",)
    assert by_pod["both"].node == "n0" and by_pod["both"].nics == ("mlx5_0", "mlx5_1")
    assert got.unschedulable[0].pod == "greedy"
    assert got.unschedulable[0].reason == "0/2 nodes are available: 2 Insufficient NICs."


def test_checker_flags_wrong_nics():
    nics = [{"name": "mlx5_0", "matrix": ["PIX", "SYS"]}]
    snap = snapshot({"t": node_type(gpus=2, nics=nics)}, [{"name": "n0", "type": "t"}])
    req = request({"name": "p", "gpus": 1, "nics": 1})
    good = placer.place(snap, req)
    assert placer.check_placement(snap, req, good) == []
    for nics, needle in [((), "got 0 NIC(s)"), (("eth9",), "no NIC 'eth9'")]:
        bad = PlacementResult(
            assignments=(replace(good.assignments[0], nics=nics),), unschedulable=(), gangs=()
        )
        assert any(needle in v for v in placer.check_placement(snap, req, bad))


def test_cluster_place_bind_release_with_topology():
    snap = snapshot({"dgx1": node_type(DGX1_SPEC)}, [{"name": "n0", "type": "dgx1"}])
    cluster = placer.Cluster(snap)
    first = cluster.place({"name": "a", "gpus": 4})
    assert isinstance(first.assignments[0], Assignment)
    cluster.bind(first)
    second = cluster.place({"name": "b", "gpus": 2})
    rest = [g for g in range(8) if g not in first.assignments[0].gpus]
    assert second.assignments[0].gpus == reference_select(DGX1.scores, rest, 2)
    cluster.release("a")
    again = cluster.place({"name": "c", "gpus": 4})
    assert again.assignments[0].gpus == first.assignments[0].gpus


def test_upstream_topologies_listed():
    assert set(UPSTREAM["topologies"]) == {"4xRTX8000", "DGX1Pascal", "DGX1Volta"}
