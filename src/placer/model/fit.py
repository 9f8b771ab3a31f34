"""kube-scheduler's NodeResourcesFit comparison of one resource, shared by every reader of
free amounts (the kernel's Python side, the gang solvers, the checker, explain).

A node's free amount goes below 0 when its running pods hold more than it offers (static
pods, a kubelet restart that shrank allocatable): kube keeps placing there the pods that do
not ask for that resource, and none that do.
"""
from __future__ import annotations

from typing import Any

__all__ = ["short_of"]


def short_of(free: Any, need: Any) -> Any:
    """Whether ``need`` of a resource does not fit in ``free`` (kube: a request above 0 and
    above what is free); ``free`` may be a number or a numpy array of them.

    Parameters
    ----------
    free : int or numpy.ndarray
        What is free (below 0 on an over-committed node).
    need : int
        What the pod asks for.

    Returns
    -------
    bool or numpy.ndarray of bool
    """
    return (free < need) & (need > 0)
