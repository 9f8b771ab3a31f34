"""Reading Kueue's objects into the queue model: the public entry points.

The readers live in :mod:`placer.adapters.kueue.objects` (imported when called, so importing
:mod:`placer.queues` stays light and the adapters may import the queue model).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from placer.adapters.kueue.objects import KueueObjects, Source
    from placer.queues.model import QueueConfig, Workload

__all__ = ["read_kueue", "load_queues", "load_workloads"]


def read_kueue(sources: "Source | Iterable[Source]", *, config: "QueueConfig | None" = None) -> "KueueObjects":
    """Kueue's queue configuration, workloads and notes from files or parsed objects.

    Parameters
    ----------
    sources : path, dict, or an iterable of them
        JSON/YAML files (single objects, multi-document YAML, ``kind: List``) or parsed
        objects, queue objects and workloads mixed.
    config : QueueConfig, optional
        The LocalQueues to resolve workloads through, instead of those read.

    Returns
    -------
    KueueObjects
        Unpacks as ``(queues, workloads, notes)``.

    Raises
    ------
    InvalidInputError
        At the file and JSON path of the first fault; see
        :func:`placer.adapters.kueue.objects.read_kueue` for what is refused.
    """
    from placer.adapters.kueue.objects import read_kueue as read

    return read(sources, config=config)


def load_queues(path_or_objects: "Source | Iterable[Source]") -> "QueueConfig":
    """The :class:`~placer.queues.QueueConfig` of Kueue objects (ResourceFlavors,
    ClusterQueues, Cohorts, LocalQueues, a Configuration) in files or parsed dicts.

    Raises
    ------
    InvalidInputError
        As :func:`read_kueue`.
    """
    return read_kueue(path_or_objects).queues


def load_workloads(paths_or_objects: "Source | Iterable[Source]",
                   config: "QueueConfig | None" = None) -> "list[Workload]":
    """The :class:`~placer.queues.Workload` objects of Kueue Workloads and labelled Jobs,
    JobSets, Pods, ... in files or parsed dicts; pending ones resolved to their
    ClusterQueue through ``config``'s LocalQueues when given (else those among the inputs).

    Raises
    ------
    InvalidInputError
        As :func:`read_kueue`.
    """
    return read_kueue(paths_or_objects, config=config).workloads
