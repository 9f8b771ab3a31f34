"""The placement policies: one record per policy, the single list of them.

Every other part of placer reads policies from :data:`REGISTRY`: the request decoder and
the command line check names with :func:`get`, :class:`placer.placement.cluster.Cluster` reads the
record's flags and passes its ``code`` to the kernel, ``placer simulate`` takes the FGD
study's policies from it. How to add one: ``docs/adding-a-policy.md``; what each policy
does: ``docs/placement-rules.md``.

This module imports nothing of placer but :mod:`placer.exceptions` and :mod:`placer.text.messages`: every other module
may import it.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from collections.abc import Mapping
from typing import Any

from placer.exceptions import InvalidInputError
from placer.text.messages import describe

__all__ = ["DEFAULT", "Policy", "REGISTRY", "names", "kernel_names", "get"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What placer knows about one placement policy.

    Parameters
    ----------
    name : str
        The name used in requests (``policy``) and on the command line (``--policy``).
    code : int
        The policy's value in the kernel's enum (:class:`placer.kernel.PolicyCode`).
    summary : str
        One line for documentation and command-line help.
    needs_workload : bool
        Scores fragmentation against a target workload (``Cluster.fragmentation``); the
        cluster sets the workload of the first pods placed with it when none is set.
    needs_packing_guide : bool
        Needs a :class:`placer.policies.packing.PackingGuide` (``Cluster.set_packing``); when none
        is set the cluster learns one (``Cluster.learn_packing``) from the workload told and
        the pods seen so far, never from pods still to be placed.
    ranked : bool
        Ties between nodes go to the seeded node order (``placer.placement.cluster.fgd_rank``), as
        in the FGD study; otherwise to the lowest node index.
    cached : bool
        The kernel may keep a node's score per pod shape within one batch until the node
        changes (the score depends only on the shape and the node, and the packing guide,
        whose change clears the cache).
    study_name : str or None
        The policy's name in the FGD study's published results (``05-BestFit``) when it is
        one of the study's six, which :mod:`placer.replay.simulate` compares with those values.
    simulate_rank : int or None
        Position in what ``placer simulate --policy all`` runs and in the order of its
        tables; ``None``: simulated only when asked for by name.
    mig_choice : str
        How the policy picks the GPU and start of a MIG instance
        (:data:`placer.kernel.mig.MIG_CHOICES`): ``first-fit``, ``best-fit`` (fewest free
        slices left), ``spread`` (most free slices left) or ``aware`` (least placeable
        capacity of the MIG demand destroyed).
    kube_scoring : str or None
        The policy scores nodes as kube-scheduler's default score plugins do
        (:mod:`placer.placement.kube_scores`), with this NodeResourcesFit strategy
        (``LeastAllocated``, ``MostAllocated``, ``RequestedToCapacityRatio``); ``code``
        is then the kernel policy that chooses the GPUs inside the chosen node and places
        what the kube scores do not (gangs, MIG and GPU-slot pods).
    """

    name: str
    code: int
    summary: str
    needs_workload: bool = False
    needs_packing_guide: bool = False
    ranked: bool = False
    cached: bool = False
    study_name: str | None = None
    simulate_rank: int | None = None
    mig_choice: str = "aware"
    kube_scoring: str | None = None

    @property
    def study(self) -> bool:
        """One of the FGD study's six policies (it has a ``study_name``)."""
        return self.study_name is not None

    @property
    def kernel(self) -> bool:
        """The kernel chooses the node itself (``code`` is this policy's own enum value)."""
        return self.kube_scoring is None


_POLICIES = (
    Policy(
        name="best-fit",
        code=1,
        summary="least CPU and GPU left on the node (the FGD study's BestFit); the default",
        study_name="05-BestFit",
        simulate_rank=2,
        mig_choice="best-fit",
    ),
    Policy(name="first-fit", code=0, summary="the lowest-indexed node that fits", mig_choice="first-fit"),
    Policy(
        name="spread",
        code=2,
        summary="most CPU and GPU left on the node (best-fit's cost, greatest wins)",
        mig_choice="spread",
    ),
    Policy(
        name="random",
        code=3,
        summary="a seeded SplitMix64 draw among the nodes that fit (the FGD study's Random)",
        study_name="01-Random",
        simulate_rank=6,
    ),
    Policy(
        name="fgd",
        code=4,
        summary="least growth of the GPU fragmentation of a target workload (the FGD study's FGD)",
        needs_workload=True,
        ranked=True,
        cached=True,
        study_name="06-FGD",
        simulate_rank=1,
    ),
    Policy(
        name="dot-product",
        code=5,
        summary="least product of free and requested CPU and GPU (the FGD study's DotProd)",
        ranked=True,
        study_name="02-DotProd",
        simulate_rank=5,
    ),
    Policy(
        name="gpu-packing",
        code=6,
        summary="partly used GPUs first, then nodes already using GPUs (the FGD study's GpuPacking)",
        ranked=True,
        study_name="04-GpuPacking",
        simulate_rank=3,
    ),
    Policy(
        name="gpu-clustering",
        code=7,
        summary="nodes holding pods of the same GPU shape (the FGD study's GpuClustering)",
        ranked=True,
        study_name="03-GpuClustering",
        simulate_rank=4,
    ),
    Policy(
        name="fgd-pack",
        code=8,
        summary="fgd plus stranded CPU, GPU-model pressure and share regret from a packing guide (placer's own)",
        needs_workload=True,
        needs_packing_guide=True,
        ranked=True,
        cached=True,
        simulate_rank=0,
    ),
    Policy(
        name="kube",
        code=1,
        summary="kube-scheduler's default scores: NodeResourcesFit LeastAllocated, BalancedAllocation, affinity, taints, spread",
        mig_choice="best-fit",
        kube_scoring="LeastAllocated",
    ),
    Policy(
        name="kube-most-allocated",
        code=1,
        summary="kube-scheduler's default scores with NodeResourcesFit MostAllocated",
        mig_choice="best-fit",
        kube_scoring="MostAllocated",
    ),
    Policy(
        name="kube-requested-to-capacity-ratio",
        code=1,
        summary="kube-scheduler's default scores with NodeResourcesFit RequestedToCapacityRatio (bin packing)",
        mig_choice="best-fit",
        kube_scoring="RequestedToCapacityRatio",
    ),
)

REGISTRY: Mapping[str, Policy] = MappingProxyType({p.name: p for p in _POLICIES})
"""Every placement policy by name, in the order error messages and help list them."""

DEFAULT = _POLICIES[0].name
"""The policy of a request that names none (``best-fit``)."""


def names() -> tuple[str, ...]:
    """The names of every policy, in :data:`REGISTRY` order.

    Returns
    -------
    tuple of str
    """
    return tuple(REGISTRY)


def kernel_names() -> tuple[str, ...]:
    """The names of the policies whose node choice is the kernel's own, in :data:`REGISTRY`
    order (every policy but the ``kube_scoring`` ones).

    Returns
    -------
    tuple of str
    """
    return tuple(p.name for p in _POLICIES if p.kernel)


def get(name: Any, where: str = "policy") -> Policy:
    """The record of the policy called ``name``: the one check of a policy name.

    Parameters
    ----------
    name : Any
        What the input gave as the policy (a request's ``policy``, ``--policy``, ...).
    where : str
        Location reported on error (a JSON path or a command-line option).

    Returns
    -------
    Policy

    Raises
    ------
    InvalidInputError
        ``expected one of best-fit, first-fit, ..., got 'x' (a string)`` when ``name`` is
        not the name of a policy.
    """
    if type(name) is str:
        found = REGISTRY.get(name)
        if found is not None:
            return found
    raise InvalidInputError(where, f"expected one of {', '.join(REGISTRY)}, got {describe(name)}")
