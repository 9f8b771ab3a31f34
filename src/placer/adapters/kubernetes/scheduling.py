"""What Kubernetes says about a pod besides its resources: priority, preemption, gang, disruption.

Both Kubernetes importers read these the same way: :mod:`placer.adapters.kubernetes.snapshot` for
running pods (priority, start time, gang, whether they may be evicted, PodDisruptionBudgets)
and :mod:`placer.adapters.kubernetes.workloads` for pending ones (priority, preemption
policy, gang). One definition each:

* :class:`PriorityClasses`: ``scheduling.k8s.io/v1`` PriorityClass objects and how a pod's
  priority and preemption policy follow from them, as the Priority admission plugin sets
  them (``spec.priority`` wins; else the class of ``spec.priorityClassName``; else the
  ``globalDefault`` class; else 0).
* :func:`named_group`, :func:`kueue_group`, :func:`jobset_group`: the gang a pod belongs to
  by its labels and annotations (scheduler-plugins coscheduling, Volcano, Kueue, JobSet).
* :func:`disruption_budgets`: ``policy/v1`` PodDisruptionBudgets as placer/v1 entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from placer.adapters.kubernetes.documents import (
    Document,
    document_objects,
    field_integer,
    field_list,
    field_map,
    field_str_map,
    field_string,
    show,
)

__all__ = [
    "SYSTEM_PRIORITY_CLASSES",
    "SYSTEM_CRITICAL_PRIORITY",
    "POD_GROUP_LABELS",
    "VOLCANO_GROUP_ANNOTATION",
    "KUEUE_POD_GROUP",
    "JOBSET_NAME_LABEL",
    "PRIORITY_RANGE",
    "GroupRef",
    "PriorityClasses",
    "named_group",
    "kueue_group",
    "jobset_group",
    "disruption_budgets",
]

SYSTEM_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
"""The PriorityClasses every cluster has built in, and their values."""
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
"""Kubernetes' ``SystemCriticalPriority``: pods at or above it are not preempted by placer."""
PRIORITY_RANGE = (-(2**31), 2**31 - 1)
"""The values a priority (an int32) may take."""

POD_GROUP_LABELS = ("scheduling.x-k8s.io/pod-group", "pod-group.scheduling.sigs.k8s.io")
"""Labels naming a scheduler-plugins (coscheduling) PodGroup, newer first."""
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
"""The annotation naming a pod's Volcano PodGroup."""
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"
"""The label grouping plain pods into one Kueue workload."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The label the JobSet controller puts on the pods of a JobSet."""

_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


@dataclass(frozen=True)
class GroupRef:
    """The gang a pod's metadata names.

    Attributes
    ----------
    name : str
        The gang: ``<namespace>/<group>``, as the workload importer names it.
    label : str
        What the gang is, for messages (``PodGroup team-a/pg1``).
    field : str
        ``labels`` or ``annotations``: where the pod names it.
    key : str
        The label or annotation key.
    """

    name: str
    label: str
    field: str
    key: str


def named_group(namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> GroupRef | None:
    """The PodGroup a pod names: label :data:`POD_GROUP_LABELS` (coscheduling), else the
    Volcano annotation :data:`VOLCANO_GROUP_ANNOTATION`; None for neither."""
    for key in POD_GROUP_LABELS:
        if key in labels:
            name = f"{namespace}/{labels[key]}"
            return GroupRef(name, f"PodGroup {name}", "labels", key)
    if VOLCANO_GROUP_ANNOTATION in annotations:
        name = f"{namespace}/{annotations[VOLCANO_GROUP_ANNOTATION]}"
        return GroupRef(name, f"Volcano PodGroup {name}", "annotations", VOLCANO_GROUP_ANNOTATION)
    return None


def kueue_group(namespace: str, labels: Mapping[str, str]) -> GroupRef | None:
    """The Kueue pod group of a plain pod (label :data:`KUEUE_POD_GROUP`), or None."""
    group = labels.get(KUEUE_POD_GROUP)
    if not group:
        return None
    name = f"{namespace}/{group}"
    return GroupRef(name, f"Kueue pod group {name}", "labels", KUEUE_POD_GROUP)


def jobset_group(namespace: str, labels: Mapping[str, str]) -> GroupRef | None:
    """The JobSet a running pod belongs to (label :data:`JOBSET_NAME_LABEL`), or None: all
    pods of a JobSet form one gang, as the workload importer makes it of a JobSet object."""
    jobset = labels.get(JOBSET_NAME_LABEL)
    if not jobset:
        return None
    name = f"{namespace}/{jobset}"
    return GroupRef(name, f"JobSet {name}", "labels", JOBSET_NAME_LABEL)


@dataclass
class PriorityClasses:
    """PriorityClass objects by name, and the pod priorities they give.

    Attributes
    ----------
    values : dict of str to int
        ``value`` per class (the system classes need not be listed).
    policies : dict of str to str
        ``preemptionPolicy`` per class that gives one.
    default : str or None
        The class with ``globalDefault: true`` (the last one read, as the API server
        would refuse a second).
    """

    values: dict[str, int] = field(default_factory=dict)
    policies: dict[str, str] = field(default_factory=dict)
    default: str | None = None

    @staticmethod
    def is_priority_class(obj: Any) -> bool:
        """Whether ``obj`` is a ``scheduling.k8s.io`` PriorityClass."""
        if not isinstance(obj, dict) or obj.get("kind") != "PriorityClass":
            return False
        api = obj.get("apiVersion")
        return isinstance(api, str) and api.startswith("scheduling.k8s.io/")

    def add(self, doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any]) -> None:
        """Read one PriorityClass (``metadata.name``, ``value``, ``globalDefault``,
        ``preemptionPolicy``).

        Raises
        ------
        InvalidInputError
            At the field: no name, a value that is no int32, a bad ``preemptionPolicy``.
        """
        meta = field_map(doc, (*path, "metadata"), obj.get("metadata"), required=True)
        name = field_string(doc, (*path, "metadata", "name"), meta.get("name"), required=True)
        assert name is not None
        value = field_integer(doc, (*path, "value"), obj.get("value"), *PRIORITY_RANGE)
        if value is None:
            doc.fail((*path, "value"), "expected an integer, got nothing")
        self.values[name] = value
        policy = obj.get("preemptionPolicy")
        if policy is not None:
            if policy not in _PREEMPTION_POLICIES:
                doc.fail((*path, "preemptionPolicy"), f"expected {' or '.join(_PREEMPTION_POLICIES)}, got {show(policy)}")
            self.policies[name] = policy
        if obj.get("globalDefault") is True:
            self.default = name

    def read(self, doc: Document) -> int:
        """Add every PriorityClass of ``doc``; refuse any other object.

        Returns
        -------
        int
            How many were read.

        Raises
        ------
        InvalidInputError
            At an object's ``kind`` when it is no PriorityClass, or as :meth:`add`.
        """
        read = 0
        for path, obj in document_objects(doc):
            if not self.is_priority_class(obj):
                kind = obj.get("kind") if isinstance(obj, dict) else obj
                doc.fail((*path, "kind"), f"expected a PriorityClass (scheduling.k8s.io/v1), got {show(kind)}")
            self.add(doc, path, obj)
            read += 1
        return read

    def class_of(self, doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> str | None:
        """The class a pod spec names, else the ``globalDefault`` class (None for neither)."""
        named = field_string(doc, (*spath, "priorityClassName"), spec.get("priorityClassName"))
        return named if named is not None else self.default

    def priority(
        self, doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], notes: list[str]
    ) -> int:
        """A pod's priority: ``spec.priority``, else the value of its class (a system class
        has its built-in value), else 0; a class the inputs lack gives 0 and a note.

        Parameters
        ----------
        doc, spath : Document, tuple
            Where the pod spec is.
        spec : Mapping
            The pod spec.
        notes : list of str
            Gets a line for a class the inputs lack.

        Returns
        -------
        int
        """
        given = field_integer(doc, (*spath, "priority"), spec.get("priority"), *PRIORITY_RANGE)
        if given is not None:
            return given
        name = self.class_of(doc, spath, spec)
        if name is None:
            return 0
        value = self.values.get(name, SYSTEM_PRIORITY_CLASSES.get(name))
        if value is None:
            notes.append(doc.note((*spath, "priorityClassName"),
                                  f"priority class {name!r} is not among the inputs; priority left at 0"))
            return 0
        return value

    def preemption_policy(self, doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> str:
        """A pod's ``spec.preemptionPolicy``, else its class's, else ``PreemptLowerPriority``."""
        given = spec.get("preemptionPolicy")
        if given is not None:
            if given not in _PREEMPTION_POLICIES:
                doc.fail((*spath, "preemptionPolicy"),
                         f"expected {' or '.join(_PREEMPTION_POLICIES)}, got {show(given)}")
            return str(given)
        name = self.class_of(doc, spath, spec)
        return self.policies.get(name, _PREEMPTION_POLICIES[0]) if name is not None else _PREEMPTION_POLICIES[0]

    def preemptible(self, doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], priority: int) -> bool:
        """Whether placer may evict a running pod: not one of a system class or of a
        priority at or above :data:`SYSTEM_CRITICAL_PRIORITY` (cluster and node critical
        pods: DNS, device plugins, CNI)."""
        return priority < SYSTEM_CRITICAL_PRIORITY and self.class_of(doc, spath, spec) not in SYSTEM_PRIORITY_CLASSES


def disruption_budgets(doc: Document, notes: list[str]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The ``policy/v1`` PodDisruptionBudgets of a document as placer/v1 entries.

    Per budget: ``name``, ``namespace`` (``default`` when absent), ``selector`` =
    ``spec.selector.matchLabels`` plus each ``matchExpressions`` entry of operator ``In``
    with one value (the same as a label; any other expression is refused, placer's
    selectors being label equalities), ``minAvailable``/``maxUnavailable`` (a count or a
    percentage string, as given), ``disruptionsAllowed`` = ``status.disruptionsAllowed``
    (the controller's live count, which then decides) and ``disruptedPods`` = the keys of
    ``status.disruptedPods`` as ``<namespace>/<pod>``. A budget without a selector (or an
    empty one) covers no pod in kube-scheduler's preemption; it is imported so and noted.

    Parameters
    ----------
    doc : Document
        ``kubectl get pdb -A -o json`` (or YAML) output, a List or single objects.
    notes : list of str
        Gets a line per budget that covers nothing.

    Returns
    -------
    list of (tuple, dict)
        Each budget's path in ``doc`` and its placer/v1 entry, in file order.

    Raises
    ------
    InvalidInputError
        At the field: an object that is no PodDisruptionBudget, a bad name, selector,
        budget or status field, an expression other than ``In`` with one value.
    """
    out: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for path, obj in document_objects(doc):
        kind = obj.get("kind") if isinstance(obj, dict) else obj
        api = obj.get("apiVersion") if isinstance(obj, dict) else None
        if kind != "PodDisruptionBudget" or not (isinstance(api, str) and api.startswith("policy/")):
            doc.fail((*path, "kind"), f"expected a PodDisruptionBudget (policy/v1), got {show(kind)}")
        mpath = (*path, "metadata")
        meta = field_map(doc, mpath, obj.get("metadata"), required=True)
        name = field_string(doc, (*mpath, "name"), meta.get("name"), required=True)
        namespace = field_string(doc, (*mpath, "namespace"), meta.get("namespace")) or "default"
        spath = (*path, "spec")
        spec = field_map(doc, spath, obj.get("spec"))
        entry: dict[str, Any] = {"name": name, "namespace": namespace, "selector": _selector(doc, spath, spec)}
        if not entry["selector"]:
            notes.append(doc.note((*spath, "selector"), f"PodDisruptionBudget {namespace}/{name} selects no "
                                  "pods (kube-scheduler's preemption ignores an empty selector)"))
        for key in ("minAvailable", "maxUnavailable"):
            value = spec.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, (int, str)):
                    doc.fail((*spath, key), f"expected a count or a percentage such as '50%', got {show(value)}")
                entry[key] = value
        status = field_map(doc, (*path, "status"), obj.get("status"))
        allowed = field_integer(doc, (*path, "status", "disruptionsAllowed"), status.get("disruptionsAllowed"), 0)
        if allowed is not None:
            entry["disruptionsAllowed"] = allowed
        disrupted = field_map(doc, (*path, "status", "disruptedPods"), status.get("disruptedPods"))
        if disrupted:
            entry["disruptedPods"] = [f"{namespace}/{pod}" for pod in disrupted]
        out.append((path, entry))
    return out


def _selector(doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> dict[str, str]:
    """``spec.selector`` of a budget as label equalities (see :func:`disruption_budgets`)."""
    path = (*spath, "selector")
    selector = field_map(doc, path, spec.get("selector"))
    pairs = dict(field_str_map(doc, (*path, "matchLabels"), selector.get("matchLabels"), "matchLabels"))
    epath = (*path, "matchExpressions")
    for j, expression in enumerate(field_list(doc, epath, selector.get("matchExpressions"))):
        expression = field_map(doc, (*epath, j), expression)
        key = field_string(doc, (*epath, j, "key"), expression.get("key"), required=True)
        operator = expression.get("operator")
        values = field_list(doc, (*epath, j, "values"), expression.get("values"))
        if operator != "In" or len(values) != 1 or not isinstance(values[0], str):
            doc.fail(
                (*epath, j),
                f"placer selects pods by label equality only: key {key!r}, operator {operator!r}, values "
                f"{values!r} is none; use matchLabels or operator In with one value",
            )
        assert key is not None
        if pairs.get(key, values[0]) != values[0]:
            doc.fail((*epath, j), f"label {key} must equal both {pairs[key]!r} and {values[0]!r}: selects no pod")
        pairs[key] = values[0]
    return pairs
