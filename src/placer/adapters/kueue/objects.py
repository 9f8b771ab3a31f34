"""Kueue's own objects to placer's queue model (SPEC §8).

:func:`read_kueue` reads files (JSON or YAML: single objects, multi-document YAML, and
``kind: List`` as ``kubectl get -o yaml`` prints) or already-parsed objects, and splits
them into a :class:`placer.queues.QueueConfig` and a list of
:class:`placer.queues.Workload`:

* ``kueue.x-k8s.io/v1beta1`` and ``v1beta2`` ResourceFlavor, ClusterQueue, Cohort (also
  ``v1alpha1``), LocalQueue (:mod:`placer.adapters.kueue.queues`), Workload and
  WorkloadPriorityClass (:mod:`placer.adapters.kueue.workloads`);
* ``config.kueue.x-k8s.io`` ``Configuration``: ``fairSharing`` (enable, preemptionStrategies),
  also inside the ConfigMap Kueue is installed with (``kueue-manager-config``);
* Jobs, JobSets, Pods and other pod workloads labelled ``kueue.x-k8s.io/queue-name``, with
  ``scheduling.k8s.io`` PriorityClasses for their priority;
* Kueue kinds placer does not need (AdmissionCheck, Topology, MultiKueue*,
  ProvisioningRequestConfig) and Namespaces are left out with a note; anything else is
  refused at its ``kind``.

Every fault is an :class:`placer.exceptions.InvalidInputError` at ``"<file>:<line>"`` (YAML,
the message starting with the JSON path) or ``"<file>: <JSON path>"`` (JSON; an object
given as a dict is ``objects[i]``), for what Kueue's own validation would reject (see the
reader of each kind) and placer's limits. Kubernetes fields placer does not read are
ignored, as the other Kubernetes importers do; a field of another API version (v1beta1's
``cohort`` in a v1beta2 ClusterQueue, ...) is refused, since it would be silently ignored.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, NamedTuple, Sequence, Union

from msgspec.structs import replace

from placer.adapters.kubernetes.documents import Document, document_objects, read_documents, show
from placer.adapters.kueue.fields import CONFIG_GROUP, KUEUE_GROUP, KUEUE_VERSIONS, api_of
from placer.adapters.kueue.queues import (
    FairSharingConfig,
    check_cohort_tree,
    read_cluster_queue,
    read_cohort,
    read_configuration,
    read_local_queue,
    read_resource_flavor,
)
from placer.adapters.kueue.workloads import WorkloadReader
from placer.exceptions import InvalidInputError
from placer.queues.model import ClusterQueue, Cohort, LocalQueue, QueueConfig, ResourceFlavor, Workload
from placer.schema.files import yaml_generic

__all__ = ["KueueObjects", "Source", "read_kueue"]

PathLike = Union[str, "os.PathLike[str]"]
Source = Union[PathLike, Mapping[str, Any]]
"""A file, or one already-parsed object (a dict, also a ``List``)."""

_SKIPPED_KUEUE_KINDS = frozenset((
    "AdmissionCheck", "Topology", "MultiKueueCluster", "MultiKueueConfig", "ProvisioningRequestConfig",
))
_EXPECTED = ("expected Kueue objects (ResourceFlavor, ClusterQueue, Cohort, LocalQueue, Workload, "
             "WorkloadPriorityClass, Configuration), PriorityClasses, or workloads labelled kueue.x-k8s.io/queue-name")


class KueueObjects(NamedTuple):
    """What :func:`read_kueue` read: unpacks as ``(queues, workloads, notes)``.

    Attributes
    ----------
    queues : QueueConfig
    workloads : list of Workload
        In input order; pending ones with their ClusterQueue resolved through the
        LocalQueues, admitted ones at the ClusterQueue of their admission.
    notes : tuple of str
        What was read but not carried over, one line each starting with its location.
    """

    queues: QueueConfig
    workloads: list[Workload]
    notes: tuple[str, ...]


class _ObjectDocument(Document):
    """An object given as a dict: named ``objects[i]`` (and ``objects[i]: <JSON path>``)."""

    __slots__ = ()

    def where(self, path: Sequence[Any]) -> str:
        return super().where(path) if path else self.source


class _Config:
    """The queue objects of one :func:`read_kueue` run, with where each came from."""

    def __init__(self) -> None:
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.where: dict[tuple[str, str], tuple[Document, tuple[Any, ...]]] = {}
        self.fair_sharing: FairSharingConfig | None = None

    def put(self, doc: Document, path: tuple[Any, ...], kind: str, key: str, table: dict[str, Any], value: Any) -> None:
        first = self.where.get((kind, key))
        if first is not None:
            doc.fail((*path, "metadata", "name"), f"{kind} {key} is given twice (first at {first[0].where(first[1])})")
        self.where[kind, key] = (doc, path)
        table[key] = value


def _documents(sources: Source | Iterable[Source]) -> list[Document]:
    if isinstance(sources, (str, os.PathLike, Mapping)):
        sources = [sources]
    docs: list[Document] = []
    for i, source in enumerate(sources):
        if isinstance(source, Mapping):
            docs.append(_ObjectDocument(f"objects[{i}]", dict(source), None, 1))
        elif isinstance(source, (str, os.PathLike)):
            docs.extend(read_documents(source))
        else:
            raise TypeError(f"expected a file path or a Kubernetes object (a dict), got {type(source).__name__}")
    return docs


def read_kueue(sources: Source | Iterable[Source], *, config: QueueConfig | None = None) -> KueueObjects:
    """Kueue's queue configuration and workloads from files or parsed objects.

    Parameters
    ----------
    sources : path, dict, or an iterable of them
        JSON/YAML files (one object, a multi-document stream, a ``List``) or parsed
        objects; queue objects and workloads may be mixed in any of them.
    config : QueueConfig, optional
        The LocalQueues to resolve workloads' ClusterQueues through, instead of those read.

    Returns
    -------
    KueueObjects
        ``(queues, workloads, notes)``. ``queues`` holds every ResourceFlavor, ClusterQueue,
        Cohort (also the implicit ones ClusterQueues and cohorts name without a Cohort
        object) and LocalQueue, and the fair-sharing settings of the ``Configuration``.
        A flavor a ClusterQueue names without a ResourceFlavor among the inputs is taken
        as a flavor without node labels (a note says so; Kueue keeps that ClusterQueue
        inactive). Workloads: see :class:`placer.adapters.kueue.workloads.WorkloadReader`;
        a Workload object that is finished, deactivated, being evicted or in no queue is
        left out with a note, one evicted and no longer admitted is pending again.

    Raises
    ------
    InvalidInputError
        At the field, for what Kueue refuses: names that are not DNS-1123 (or label keys
        for resources and levels), more than 16 resource groups, 64 covered resources,
        flavors or resources per group, 256 flavors or covered resources per
        ClusterQueue, 512 flavor-resource pairs per group; a flavor's resources not
        matching coveredResources in order; a resource covered by two groups, a flavor in
        two groups; a borrowingLimit or lendingLimit without a cohort (parent); a
        ClusterQueue's lendingLimit over its nominal quota; negative quantities; values
        outside an enum; reclaimWithinCohort Never with borrowWithinCohort other than
        Never; a fungibility preference without TryNextFlavor twice; a fair-sharing
        weight below 0 or in (0, 1e-9]; cohort parents in a cycle; two objects of a kind
        with one name; a Workload without pod sets, with more than 18, with two of one
        name, a negative count, an admission naming an unknown pod set; the resource
        ``pods`` in a pod; a stopped ClusterQueue or LocalQueue (not modelled);
        fair-sharing strategies Kueue does not accept. Placer's limits: quantities over
        :data:`placer.limits.MAX_QUANTITY` units, more GPUs in one pod than
        :data:`placer.limits.MAX_GPUS`. An unknown ``apiVersion`` of Kueue's groups, or
        an object of a kind placer does not read, is refused at its ``apiVersion`` or
        ``kind``.
    TypeError
        For a source that is neither a path nor a dict.
    """
    notes: list[str] = []
    docs = _documents(sources)
    objects = []
    reader = WorkloadReader(notes)
    for doc in docs:
        for path, obj in document_objects(doc):
            group, version, kind = api_of(doc, path, obj)
            _check_version(doc, path, group, version, kind)
            reader.collect(doc, path, obj, group, version, kind)
            objects.append((doc, path, obj, group, version, kind))
    read = _Config()
    for doc, path, obj, group, version, kind in objects:
        if group == KUEUE_GROUP:
            _kueue_object(doc, path, obj, version, kind, read, reader, notes)
        elif group == CONFIG_GROUP:
            _configuration(doc, path, obj, version, read, notes)
        elif group == "" and kind == "ConfigMap" and (embedded := _embedded_configuration(doc, path, obj)):
            inner_doc, inner = embedded
            inner_group, inner_version, _ = api_of(inner_doc, (), inner)
            _check_version(inner_doc, (), inner_group, inner_version, "Configuration")
            _configuration(inner_doc, (), inner, inner_version, read, notes)
        elif group == "scheduling.k8s.io" and kind == "PriorityClass":
            pass  # read by reader.collect
        elif group == "" and kind == "Namespace":
            notes.append(doc.note(path, "Namespace left out (namespaceSelectors are not checked)"))
        elif not reader.add_labelled(doc, path, obj, group, kind):
            doc.fail((*path, "kind"), f"{_EXPECTED}; got {show(kind)} ({obj['apiVersion']})")
    queues = _assemble(read, notes)
    workloads = reader.finish()
    resolver = config if config is not None else queues
    if config is not None or read.local_queues or read.cluster_queues:
        workloads = _resolve(workloads, resolver, reader, notes)
    return KueueObjects(queues, workloads, tuple(notes))


def _configuration(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any], version: str, read: _Config,
                   notes: list[str]) -> None:
    fs = read_configuration(doc, path, obj, version, notes)
    if read.fair_sharing is not None:
        doc.fail((*path, "kind"), f"a second Kueue Configuration (first at {read.fair_sharing.where})")
    read.fair_sharing = fs


def _embedded_configuration(doc: Document, path: tuple[Any, ...],
                            obj: Mapping[str, Any]) -> tuple[Document, dict[str, Any]] | None:
    """The Kueue Configuration a ConfigMap holds (``kueue-manager-config``'s
    ``controller_manager_config.yaml``), as a document named by its data key; None when
    no value of ``data`` is one."""
    data = obj.get("data")
    for key, text in (data.items() if isinstance(data, dict) else ()):
        if not isinstance(text, str) or CONFIG_GROUP not in text:
            continue
        where = doc.where((*path, "data", key))
        try:
            inner = yaml_generic(text, "the embedded Kueue Configuration")
        except InvalidInputError as e:
            doc.fail((*path, "data", key), f"{e.where}: {e.what}")
        if isinstance(inner, dict) and inner.get("kind") == "Configuration":
            source = where if doc.spans is None else f"{where} ({'.'.join(map(str, (*path, 'data', key)))})"
            return _ObjectDocument(source, inner, None, 1), inner
    return None


def _check_version(doc: Document, path: tuple[Any, ...], group: str, version: str, kind: str) -> None:
    if group == KUEUE_GROUP:
        allowed = (*KUEUE_VERSIONS, "v1alpha1") if kind in ("Cohort", "Topology") else KUEUE_VERSIONS
    elif group == CONFIG_GROUP:
        allowed = KUEUE_VERSIONS
    else:
        return
    if version not in allowed:
        doc.fail((*path, "apiVersion"), f"expected {' or '.join(f'{group}/{v}' for v in allowed)}, got "
                                        f"{show(f'{group}/{version}')}")
    if group == CONFIG_GROUP and kind != "Configuration":
        doc.fail((*path, "kind"), f"expected Configuration ({group}), got {show(kind)}")


def _kueue_object(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any], version: str, kind: str,
                  read: _Config, reader: WorkloadReader, notes: list[str]) -> None:
    if kind == "ResourceFlavor":
        rf = read_resource_flavor(doc, path, obj)
        read.put(doc, path, kind, rf.name, read.flavors, rf)
    elif kind == "ClusterQueue":
        cq = read_cluster_queue(doc, path, obj, version, notes)
        read.put(doc, path, kind, cq.name, read.cluster_queues, cq)
    elif kind == "Cohort":
        cohort = read_cohort(doc, path, obj, version)
        read.put(doc, path, kind, cohort.name, read.cohorts, cohort)
    elif kind == "LocalQueue":
        lq = read_local_queue(doc, path, obj)
        read.put(doc, path, kind, f"{lq.namespace}/{lq.name}", read.local_queues, lq)
    elif kind == "Workload":
        reader.add_workload(doc, path, obj, version)
    elif kind == "WorkloadPriorityClass":
        pass  # read by reader.collect
    elif kind in _SKIPPED_KUEUE_KINDS:
        notes.append(doc.note(path, f"{kind} left out (not modelled)"))
    else:
        doc.fail((*path, "kind"), f"{_EXPECTED}; got {show(kind)} ({KUEUE_GROUP})")


def _assemble(read: _Config, notes: list[str]) -> QueueConfig:
    """The QueueConfig of what was read: implicit cohorts added, cohort cycles refused,
    flavors no ResourceFlavor defines added with a note, LocalQueues of unknown
    ClusterQueues noted."""
    cohorts = dict(read.cohorts)
    named = [cq.cohort for cq in read.cluster_queues.values()] + [c.parent for c in read.cohorts.values()]
    for name in named:
        if name is not None and name not in cohorts:
            cohorts[name] = Cohort(name=name)
    check_cohort_tree(cohorts, {name: read.where["Cohort", name] for name in read.cohorts})
    flavors = dict(read.flavors)
    for owner_kind, table in (("ClusterQueue", read.cluster_queues), ("Cohort", read.cohorts)):
        for owner in table.values():
            for group in owner.resource_groups:
                for fq in group.flavors:
                    if fq.name not in flavors:
                        doc, path = read.where[owner_kind, owner.name]
                        notes.append(doc.note(path, f"ResourceFlavor {fq.name} is not among the inputs: taken as a "
                                                    "flavor without node labels (Kueue keeps the queue inactive "
                                                    "until it exists)"))
                        flavors[fq.name] = ResourceFlavor(name=fq.name)
    if read.cluster_queues:
        for key, lq in read.local_queues.items():
            if lq.cluster_queue not in read.cluster_queues:
                doc, path = read.where["LocalQueue", key]
                notes.append(doc.note(path, f"LocalQueue {key} points to ClusterQueue {lq.cluster_queue}, which is "
                                            "not among the inputs: its workloads are not admitted"))
    fs = read.fair_sharing
    return QueueConfig(
        flavors=flavors, cluster_queues=dict(read.cluster_queues), cohorts=cohorts,
        local_queues=dict(read.local_queues), fair_sharing=fs.enabled if fs is not None else False,
        preemption_strategies=fs.strategies if fs is not None else QueueConfig().preemption_strategies,
    )


def _resolve(workloads: list[Workload], config: QueueConfig, reader: WorkloadReader,
             notes: list[str]) -> list[Workload]:
    """Set each pending workload's ClusterQueue through its LocalQueue; check an admitted
    workload's ClusterQueue exists."""
    out = []
    for w in workloads:
        doc, path = reader.where(w.key)
        if w.admission is not None:
            if config.cluster_queues and w.admission.cluster_queue not in config.cluster_queues:
                doc.fail((*path, "status", "admission", "clusterQueue"),
                         f"admitted to ClusterQueue {w.admission.cluster_queue}, which is not among the inputs")
        elif w.queue is not None:
            lq = config.local_queues.get(f"{w.namespace}/{w.queue}")
            if lq is None:
                notes.append(doc.note(path, f"LocalQueue {w.namespace}/{w.queue} is not among the inputs: Kueue does "
                                            f"not admit {w.key} until it exists"))
            else:
                w = replace(w, cluster_queue=lq.cluster_queue)
        out.append(w)
    return out
