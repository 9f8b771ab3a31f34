"""Kueue's queueing objects to :mod:`placer.queues.model`: ResourceFlavor, ClusterQueue,
Cohort, LocalQueue and Kueue's ``Configuration``.

One function per kind reads one object, checks it as Kueue's CRD markers and webhooks do
(``apis/kueue/v1beta2/*_types.go``, ``pkg/webhooks/clusterqueue_webhook.go``,
``cohort_webhook.go``, ``resourceflavor_webhook.go``, ``pkg/config/validation.go``) and
returns the model object; what placer reads but does not model goes to ``notes``. The
checks that need every object (names given twice, cohort cycles, flavors no input
defines) are :func:`check_cohort_tree` and the assembly in :mod:`placer.adapters.kueue.objects`.
"""

from __future__ import annotations

from typing import Any, Mapping

from placer.adapters.kubernetes.documents import Document, field_list, field_map, show
from placer.adapters.kueue.fields import (
    amount,
    enum_field,
    fair_weight,
    label_key_field,
    labels_field,
    metadata_name,
    name_field,
    namespace_of,
    node_taints,
    tolerations,
)
from placer.queues.model import (
    FUNGIBILITY_POLICIES,
    PREEMPTION_POLICIES,
    QUEUEING_STRATEGIES,
    ClusterQueue,
    ClusterQueuePreemption,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
)

__all__ = [
    "MAX_RESOURCE_GROUPS",
    "MAX_GROUP_ITEMS",
    "MAX_TOTAL",
    "MAX_GROUP_COMBINATIONS",
    "MAX_FLAVOR_ITEMS",
    "FAIR_SHARING_STRATEGIES",
    "FairSharingConfig",
    "read_resource_flavor",
    "read_cluster_queue",
    "read_cohort",
    "read_local_queue",
    "read_configuration",
    "check_cohort_tree",
]

MAX_RESOURCE_GROUPS = 16
"""``resourceGroups`` of a ClusterQueue or Cohort (CRD ``MaxItems``)."""
MAX_GROUP_ITEMS = 64
"""``coveredResources`` and ``flavors`` of one group, ``resources`` of one flavor (CRD ``MaxItems``)."""
MAX_TOTAL = 256
"""Flavors, and covered resources, across all groups of a ClusterQueue (webhook)."""
MAX_GROUP_COMBINATIONS = 512
"""Flavor-resource pairs of one resource group (webhook)."""
MAX_FLAVOR_ITEMS = 8
"""``nodeLabels``, ``nodeTaints`` and ``tolerations`` of a ResourceFlavor (CRD)."""
FAIR_SHARING_STRATEGIES = (
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
)
"""The ``fairSharing.preemptionStrategies`` lists Kueue's configuration accepts."""
_DEFAULT_STRATEGIES = FAIR_SHARING_STRATEGIES[2]
_STOP_POLICIES = ("None", "Hold", "HoldAndDrain")
_PREFERENCES = ("BorrowingOverPreemption", "PreemptionOverBorrowing")
# v1beta1's Borrow and Preempt are MayStopSearch in v1beta2 (clusterqueue_conversion.go).
_V1BETA1_FUNGIBILITY = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}

Path = tuple[Any, ...]


class FairSharingConfig:
    """What a Kueue ``Configuration`` says about fair sharing.

    Attributes
    ----------
    enabled : bool
    strategies : tuple of str
        ``preemptionStrategies``, Kueue's default when fair sharing is on without them.
    where : str
        The Configuration's location, for a second one.
    """

    __slots__ = ("enabled", "strategies", "where")

    def __init__(self, enabled: bool, strategies: tuple[str, ...], where: str) -> None:
        self.enabled = enabled
        self.strategies = strategies
        self.where = where


# ----------------------------------------------------------------------------- ResourceFlavor


def read_resource_flavor(doc: Document, path: Path, obj: Mapping[str, Any]) -> ResourceFlavor:
    """A ResourceFlavor: ``spec.nodeLabels``, ``nodeTaints``, ``tolerations``, ``topologyName``.

    Raises
    ------
    InvalidInputError
        At the field: a bad name, more than 8 labels, taints or tolerations, a label,
        taint or toleration Kubernetes refuses, a topologyName without nodeLabels.
    """
    name = metadata_name(doc, path, obj, "ResourceFlavor")
    spath = (*path, "spec")
    spec = field_map(doc, spath, obj.get("spec"))
    labels = labels_field(doc, (*spath, "nodeLabels"), spec.get("nodeLabels"), "nodeLabels", MAX_FLAVOR_ITEMS)
    taints = node_taints(doc, (*spath, "nodeTaints"), spec.get("nodeTaints"), MAX_FLAVOR_ITEMS)
    tols = tolerations(doc, (*spath, "tolerations"), spec.get("tolerations"), MAX_FLAVOR_ITEMS)
    topology = None
    if spec.get("topologyName") is not None:
        topology = name_field(doc, (*spath, "topologyName"), spec["topologyName"], "a Topology name")
        if not labels:
            doc.fail((*spath, "topologyName"), "a flavor with a topologyName needs at least one nodeLabel")
    return ResourceFlavor(name=name, node_labels=labels, tolerations=tols, topology_name=topology, node_taints=taints)


# ----------------------------------------------------------------------------- resource groups


def _resource_groups(doc: Document, spath: Path, spec: Mapping[str, Any], *, parent: str | None,
                     cohort: bool) -> tuple[ResourceGroup, ...]:
    """``spec.resourceGroups`` of a ClusterQueue (``cohort`` False) or a Cohort.

    ``parent`` is None when the object has no cohort (no parent): then no limit may
    be set. A Cohort's lendingLimit may exceed its nominal quota; a ClusterQueue's may not.
    The totals across groups (256 flavors, 256 covered resources) are the ClusterQueue
    webhook's; a Cohort has none.
    """
    rpath = (*spath, "resourceGroups")
    groups = field_list(doc, rpath, spec.get("resourceGroups"))
    if len(groups) > MAX_RESOURCE_GROUPS:
        doc.fail(rpath, f"at most {MAX_RESOURCE_GROUPS} resource groups, got {len(groups)}")
    covered_in: dict[str, int] = {}
    flavor_in: dict[str, int] = {}
    out: list[ResourceGroup] = []
    total_flavors = total_covered = 0
    for i, group in enumerate(groups):
        gpath = (*rpath, i)
        group = field_map(doc, gpath, group, required=True)
        cpath = (*gpath, "coveredResources")
        covered_list = field_list(doc, cpath, group.get("coveredResources"))
        if not 1 <= len(covered_list) <= MAX_GROUP_ITEMS:
            doc.fail(cpath, f"expected 1 to {MAX_GROUP_ITEMS} covered resources, got {len(covered_list)}")
        covered: list[str] = []
        for j, r in enumerate(covered_list):
            resource = label_key_field(doc, (*cpath, j), r, "a resource name")
            if resource in covered_in:
                where = "this group" if covered_in[resource] == i else f"resourceGroups[{covered_in[resource]}]"
                doc.fail((*cpath, j), f"resource {resource} is covered twice (also by {where}); a resource "
                                      "belongs to one resource group")
            covered_in[resource] = i
            covered.append(resource)
        fpath = (*gpath, "flavors")
        flavor_list = field_list(doc, fpath, group.get("flavors"))
        if not 1 <= len(flavor_list) <= MAX_GROUP_ITEMS:
            doc.fail(fpath, f"expected 1 to {MAX_GROUP_ITEMS} flavors, got {len(flavor_list)}")
        flavors: list[FlavorQuotas] = []
        for k, fq in enumerate(flavor_list):
            flavors.append(_flavor_quotas(doc, (*fpath, k), fq, covered, flavor_in, i,
                                          parent=parent, cohort=cohort))
        if len(flavors) * len(covered) > MAX_GROUP_COMBINATIONS:
            doc.fail(gpath, f"{len(flavors) * len(covered)} flavor-resource combinations; at most "
                            f"{MAX_GROUP_COMBINATIONS} in one resource group")
        total_flavors += len(flavors)
        total_covered += len(covered)
        out.append(ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors)))
    if not cohort and total_flavors > MAX_TOTAL:
        doc.fail(rpath, f"{total_flavors} flavors across all resource groups; at most {MAX_TOTAL}")
    if not cohort and total_covered > MAX_TOTAL:
        doc.fail(rpath, f"{total_covered} covered resources across all resource groups; at most {MAX_TOTAL}")
    return tuple(out)


def _flavor_quotas(doc: Document, fp: Path, fq: Any, covered: list[str], flavor_in: dict[str, int], group: int,
                   *, parent: str | None, cohort: bool) -> FlavorQuotas:
    fq = field_map(doc, fp, fq, required=True)
    name = name_field(doc, (*fp, "name"), fq.get("name"), "a ResourceFlavor name")
    if name in flavor_in:
        where = "this group" if flavor_in[name] == group else f"resourceGroups[{flavor_in[name]}]"
        doc.fail((*fp, "name"), f"flavor {name} is listed twice (also in {where}); a flavor belongs to one "
                                "resource group")
    flavor_in[name] = group
    qpath = (*fp, "resources")
    quotas = field_list(doc, qpath, fq.get("resources"))
    if len(quotas) != len(covered):
        doc.fail(qpath, f"{len(quotas)} resource(s) for {len(covered)} covered resource(s) "
                        f"({', '.join(covered)}); a flavor gives a quota for each covered resource, in order")
    resources: dict[str, ResourceQuota] = {}
    for m, rq in enumerate(quotas):
        rp = (*qpath, m)
        rq = field_map(doc, rp, rq, required=True)
        resource = label_key_field(doc, (*rp, "name"), rq.get("name"), "a resource name")
        if resource != covered[m]:
            doc.fail((*rp, "name"), f"expected {covered[m]} (coveredResources[{m}]), got {resource}; a flavor's "
                                    "resources follow coveredResources in order")
        nominal = amount(doc, (*rp, "nominalQuota"), rq.get("nominalQuota"), resource)
        limits: dict[str, int | None] = {}
        for key in ("borrowingLimit", "lendingLimit"):
            if rq.get(key) is None:
                limits[key] = None
                continue
            value = amount(doc, (*rp, key), rq[key], resource)
            if parent is None:
                owner = "Cohort" if cohort else "ClusterQueue"
                what = "parentName" if cohort else "cohort"
                doc.fail((*rp, key), f"a {key} needs a {'parent' if cohort else 'cohort'}: this {owner} has no "
                                     f"{what}, so it neither borrows nor lends")
            limits[key] = value
        lending = limits["lendingLimit"]
        if not cohort and lending is not None and lending > nominal:
            doc.fail((*rp, "lendingLimit"), f"lendingLimit {show(rq['lendingLimit'])} exceeds nominalQuota "
                                            f"{show(rq['nominalQuota'])}; it must be less than or equal to it")
        resources[resource] = ResourceQuota(nominal=nominal, borrowing_limit=limits["borrowingLimit"],
                                            lending_limit=lending)
    return FlavorQuotas(name=name, resources=resources)


def _renamed_field(doc: Document, spath: Path, spec: Mapping[str, Any], version: str, fields: Mapping[str, str]) -> str:
    """The field name of this version among ``fields`` (version -> name); refuse another
    version's name, which this version would silently ignore."""
    mine = fields[version]
    for other_version, other in fields.items():
        if other != mine and other in spec and spec[other] is not None:
            doc.fail((*spath, other), f"{other} is the field of {other_version}; in {version} it is {mine}")
    return mine


# ----------------------------------------------------------------------------- ClusterQueue


def read_cluster_queue(doc: Document, path: Path, obj: Mapping[str, Any], version: str,
                       notes: list[str]) -> ClusterQueue:
    """A ClusterQueue: ``spec.cohort`` (v1beta1) / ``spec.cohortName`` (v1beta2),
    ``resourceGroups``, ``queueingStrategy``, ``preemption``, ``flavorFungibility``,
    ``fairSharing.weight``; amounts in Kueue's accounting units.

    ``namespaceSelector`` is not checked (placer has no namespace labels): a note says so
    unless it is ``{}`` (every namespace). A ``stopPolicy`` other than None is refused.
    Admission checks, ``admissionScope``, ``concurrentAdmissionPolicy`` and a fungibility
    ``preference`` are not modelled (a note each).

    Raises
    ------
    InvalidInputError
        At the field, for what Kueue's CRD or webhook refuses (see the module doc) and a
        stopped ClusterQueue.
    """
    name = metadata_name(doc, path, obj, "ClusterQueue")
    spath = (*path, "spec")
    spec = field_map(doc, spath, obj.get("spec"))
    cohort_key = _renamed_field(doc, spath, spec, version, {"v1beta1": "cohort", "v1beta2": "cohortName"})
    cohort_name = None
    if spec.get(cohort_key) not in (None, ""):
        cohort_name = name_field(doc, (*spath, cohort_key), spec[cohort_key], "a cohort name")
    groups = _resource_groups(doc, spath, spec, parent=cohort_name, cohort=False)
    strategy = enum_field(doc, (*spath, "queueingStrategy"), spec.get("queueingStrategy"), QUEUEING_STRATEGIES,
                          "BestEffortFIFO")
    stop = enum_field(doc, (*spath, "stopPolicy"), spec.get("stopPolicy"), _STOP_POLICIES, "None")
    if stop != "None":
        doc.fail((*spath, "stopPolicy"), f"ClusterQueue {name} is stopped ({stop}): it admits nothing; placer "
                                         "does not model a stopped queue, leave it out or set stopPolicy None")
    preemption = _preemption(doc, (*spath, "preemption"), spec.get("preemption"))
    fungibility = _fungibility(doc, (*spath, "flavorFungibility"), spec.get("flavorFungibility"), version, notes)
    weight = fair_weight(doc, (*spath, "fairSharing"), spec.get("fairSharing"))
    _namespace_selector_note(doc, spath, spec, name, notes)
    for key, what in (
        ("admissionChecks", "admission checks are not modelled: quota is reserved as if every check passed"),
        ("admissionChecksStrategy", "admission checks are not modelled: quota is reserved as if every check passed"),
        ("admissionScope", "admissionScope (admission fair sharing) is not modelled"),
        ("concurrentAdmissionPolicy", "concurrentAdmissionPolicy is not modelled: one flavor per workload"),
    ):
        if spec.get(key):
            notes.append(doc.note((*spath, key), what))
    return ClusterQueue(name=name, resource_groups=groups, cohort=cohort_name, queueing_strategy=strategy,
                        preemption=preemption, flavor_fungibility=fungibility, fair_weight=weight)


def _namespace_selector_note(doc: Document, spath: Path, spec: Mapping[str, Any], name: str, notes: list[str]) -> None:
    npath = (*spath, "namespaceSelector")
    if "namespaceSelector" not in spec or spec["namespaceSelector"] is None:
        notes.append(doc.note(spath, f"ClusterQueue {name} has no namespaceSelector: Kueue admits no workload "
                                     "to it (a null selector matches no namespace); placer takes every namespace, "
                                     "as namespaceSelector: {} does"))
        return
    selector = field_map(doc, npath, spec["namespaceSelector"])
    if selector.get("matchLabels") or selector.get("matchExpressions"):
        notes.append(doc.note(npath, "namespaceSelector is not checked (placer has no namespace labels): every "
                                     "namespace is taken as selected"))


def _preemption(doc: Document, ppath: Path, v: Any) -> ClusterQueuePreemption:
    p = field_map(doc, ppath, v)
    within = enum_field(doc, (*ppath, "withinClusterQueue"), p.get("withinClusterQueue"),
                        PREEMPTION_POLICIES["withinClusterQueue"], "Never")
    reclaim = enum_field(doc, (*ppath, "reclaimWithinCohort"), p.get("reclaimWithinCohort"),
                         PREEMPTION_POLICIES["reclaimWithinCohort"], "Never")
    bpath = (*ppath, "borrowWithinCohort")
    borrow = field_map(doc, bpath, p.get("borrowWithinCohort"))
    policy = enum_field(doc, (*bpath, "policy"), borrow.get("policy"), PREEMPTION_POLICIES["borrowWithinCohort"],
                        "Never")
    threshold = borrow.get("maxPriorityThreshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)
                                  or not -(2**31) <= threshold < 2**31):
        doc.fail((*bpath, "maxPriorityThreshold"), f"expected a priority (an int32), got {show(threshold)}")
    if reclaim == "Never" and policy != "Never":
        doc.fail(ppath, f"borrowWithinCohort.policy {policy} needs reclaimWithinCohort other than Never "
                        "(Kueue refuses reclaimWithinCohort=Never with borrowWithinCohort.policy!=Never)")
    return ClusterQueuePreemption(within_cluster_queue=within, reclaim_within_cohort=reclaim,
                                  borrow_within_cohort=policy, max_priority_threshold=threshold)


def _fungibility(doc: Document, fpath: Path, v: Any, version: str, notes: list[str]) -> FlavorFungibility:
    f = field_map(doc, fpath, v)
    values = {}
    for key, default in (("whenCanBorrow", "MayStopSearch"), ("whenCanPreempt", "TryNextFlavor")):
        allowed = FUNGIBILITY_POLICIES[key]
        if version != "v1beta1":
            allowed = tuple(a for a in allowed if a not in _V1BETA1_FUNGIBILITY)
        value = enum_field(doc, (*fpath, key), f.get(key), allowed, default)
        values[key] = _V1BETA1_FUNGIBILITY.get(value, value)
    preference = f.get("preference")
    if preference is not None:
        enum_field(doc, (*fpath, "preference"), preference, _PREFERENCES, "")
        if values["whenCanBorrow"] != "TryNextFlavor" or values["whenCanPreempt"] != "TryNextFlavor":
            doc.fail((*fpath, "preference"), f"preference {preference} requires both whenCanBorrow and "
                                             "whenCanPreempt to be TryNextFlavor")
        notes.append(doc.note((*fpath, "preference"), "flavorFungibility.preference is not modelled: flavors are "
                                                      "tried in order"))
    return FlavorFungibility(when_can_borrow=values["whenCanBorrow"], when_can_preempt=values["whenCanPreempt"])


# ----------------------------------------------------------------------------- Cohort, LocalQueue


def read_cohort(doc: Document, path: Path, obj: Mapping[str, Any], version: str) -> Cohort:
    """A Cohort: ``spec.parent`` (v1alpha1) / ``spec.parentName`` (v1beta1, v1beta2),
    ``resourceGroups`` (quota the cohort holds itself), ``fairSharing.weight``.

    Raises
    ------
    InvalidInputError
        At the field, as for a ClusterQueue's resource groups; a borrowingLimit or
        lendingLimit in a Cohort without a parent.
    """
    name = metadata_name(doc, path, obj, "Cohort")
    spath = (*path, "spec")
    spec = field_map(doc, spath, obj.get("spec"))
    parent_key = _renamed_field(doc, spath, spec, version,
                                {"v1alpha1": "parent", "v1beta1": "parentName", "v1beta2": "parentName"})
    parent = None
    if spec.get(parent_key) not in (None, ""):
        parent = name_field(doc, (*spath, parent_key), spec[parent_key], "a cohort name")
    groups = _resource_groups(doc, spath, spec, parent=parent, cohort=True)
    weight = fair_weight(doc, (*spath, "fairSharing"), spec.get("fairSharing"))
    return Cohort(name=name, parent=parent, resource_groups=groups, fair_weight=weight)


def read_local_queue(doc: Document, path: Path, obj: Mapping[str, Any]) -> LocalQueue:
    """A LocalQueue: its namespace (``default`` when absent), name and ``spec.clusterQueue``.

    Raises
    ------
    InvalidInputError
        At the field: a bad name or namespace, no clusterQueue, a stopPolicy other than None.
    """
    name = metadata_name(doc, path, obj, "LocalQueue")
    namespace = namespace_of(doc, path, obj)
    spath = (*path, "spec")
    spec = field_map(doc, spath, obj.get("spec"), required=True)
    cq = name_field(doc, (*spath, "clusterQueue"), spec.get("clusterQueue"), "a ClusterQueue name")
    stop = enum_field(doc, (*spath, "stopPolicy"), spec.get("stopPolicy"), _STOP_POLICIES, "None")
    if stop != "None":
        doc.fail((*spath, "stopPolicy"), f"LocalQueue {namespace}/{name} is stopped ({stop}): placer does not "
                                         "model a stopped queue, leave it out or set stopPolicy None")
    return LocalQueue(namespace=namespace, name=name, cluster_queue=cq)


# ----------------------------------------------------------------------------- Configuration


def read_configuration(doc: Document, path: Path, obj: Mapping[str, Any], version: str,
                       notes: list[str]) -> FairSharingConfig:
    """Kueue's ``Configuration`` (``config.kueue.x-k8s.io``): its ``fairSharing``.

    v1beta1: ``fairSharing.enable`` switches fair sharing on, ``preemptionStrategies``
    defaults to ``[LessThanOrEqualToFinalShare, LessThanInitialShare]``. v1beta2: fair
    sharing is on when ``fairSharing`` is given, and ``preemptionStrategies`` must be.

    Raises
    ------
    InvalidInputError
        At the field: a strategy list Kueue does not accept, ``enable`` that is no
        boolean (or given in v1beta2, which has none), v1beta2 without strategies.
    """
    fpath = (*path, "fairSharing")
    if obj.get("fairSharing") is None:
        enabled, given = False, []
    else:
        fs = field_map(doc, fpath, obj["fairSharing"])
        if version == "v1beta1":
            enable = fs.get("enable", False)
            if not isinstance(enable, bool):
                doc.fail((*fpath, "enable"), f"expected true or false, got {show(enable)}")
            enabled = enable
        else:
            if "enable" in fs:
                doc.fail((*fpath, "enable"), "v1beta2 has no fairSharing.enable: fair sharing is on when fairSharing "
                                             "is given; remove enable (or fairSharing)")
            enabled = True
        given = field_list(doc, (*fpath, "preemptionStrategies"), fs.get("preemptionStrategies"))
    strategies: tuple[str, ...] = _DEFAULT_STRATEGIES
    if enabled:
        if not given and version != "v1beta1":
            doc.fail((*fpath, "preemptionStrategies"), "must be given when fairSharing is")
        if given:
            if tuple(given) not in FAIR_SHARING_STRATEGIES:
                lists = "; ".join(", ".join(s) for s in FAIR_SHARING_STRATEGIES)
                doc.fail((*fpath, "preemptionStrategies"), f"expected one of the lists [{lists}], got "
                                                           f"[{', '.join(map(str, given))}]")
            strategies = tuple(str(s) for s in given)
    if obj.get("admissionFairSharing") is not None:
        notes.append(doc.note((*path, "admissionFairSharing"), "admission fair sharing is not modelled"))
    return FairSharingConfig(enabled, strategies, doc.where(path))


# ----------------------------------------------------------------------------- whole tree


def check_cohort_tree(cohorts: Mapping[str, Cohort], where: Mapping[str, tuple[Document, Path]]) -> None:
    """Refuse a cycle of cohort parents (Kueue keeps every cohort in it inactive).

    Parameters
    ----------
    cohorts : Mapping of str to Cohort
        Every cohort, by name (implicit ones without a parent).
    where : Mapping of str to (Document, tuple)
        The place of each Cohort object, for the error.

    Raises
    ------
    InvalidInputError
        At the parent field of the first cohort of a cycle (in input order).
    """
    done: set[str] = set()
    for start in cohorts:
        chain: list[str] = []
        name: str | None = start
        while name is not None and name not in done:
            if name in chain:
                cycle = chain[chain.index(name):] + [name]
                doc, path = where[name]
                spec = _spec_at(doc, path)
                key = "parent" if "parent" in spec else "parentName"
                doc.fail((*path, "spec", key), f"cohort parents form a cycle: {' -> '.join(cycle)}")
            chain.append(name)
            cohort = cohorts.get(name)
            name = cohort.parent if cohort is not None else None
        done.update(chain)


def _spec_at(doc: Document, path: Path) -> Mapping[str, Any]:
    """The ``spec`` mapping of the object at ``path`` (empty when there is none)."""
    obj: Any = doc.data
    for step in path:
        obj = obj[step]
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}
