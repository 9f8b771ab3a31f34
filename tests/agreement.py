"""placer's result for a request, held to the reference and the checker."""
from __future__ import annotations

from placer import check_placement
from placer.placement.cluster import Cluster
from placer.model import ClusterSnapshot, PlacementRequest, PlacementResult
from reference import ReferenceCluster


def schedule_checked(snapshot: ClusterSnapshot, request: PlacementRequest, whole: bool = True) -> PlacementResult:
    """The kernel's result, after asserting that the reference places and turns away the
    same pods (``whole``: gives the same result, gang reports included) and that
    :func:`placer.check_placement` finds nothing wrong with it."""
    got = Cluster(snapshot).schedule(request)
    want = ReferenceCluster(snapshot).schedule(request)
    if whole:
        assert got == want
    assert got.assignments == want.assignments
    assert got.unschedulable == want.unschedulable
    assert check_placement(snapshot, request, got) == []
    return got


def placed_gpus(
    snapshot: ClusterSnapshot, request: PlacementRequest, whole: bool = False
) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Pod → (node, GPUs) of :func:`schedule_checked`."""
    return {a.pod: (a.node, a.gpus) for a in schedule_checked(snapshot, request, whole).assignments}
