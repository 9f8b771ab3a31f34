"""The state a :class:`~placer.placement.cluster.Cluster`'s calls work on, in one record."""
from __future__ import annotations

from dataclasses import dataclass

from placer.kernel import KernelSession
from placer.model import ClusterSnapshot
from placer.model.domains import Domains
from placer.placement.binding import DecisionBook
from placer.schema import SnapshotFacts

__all__ = ["ClusterState"]


@dataclass(frozen=True)
class ClusterState:
    """One cluster's placement state.

    Attributes
    ----------
    snapshot : ClusterSnapshot
        The cluster as it started.
    session : KernelSession
        The packed state: what is free, who holds what (its lock is the cluster's).
    domains : Domains
        The snapshot's topology domains.
    facts : SnapshotFacts
        What requests are checked against (levels, the pods bound now).
    book : DecisionBook
        The decisions made, for :func:`placer.placement.binding.bind`.
    """

    snapshot: ClusterSnapshot
    session: KernelSession
    domains: Domains
    facts: SnapshotFacts
    book: DecisionBook
