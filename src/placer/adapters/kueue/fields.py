"""Fields of Kueue's objects, checked as Kueue's API server would check them.

The readers of :mod:`placer.adapters.kueue.objects` share these: the API groups and versions
placer reads, names (DNS-1123, label keys and values), quantities in Kueue's accounting
units, fair-sharing weights, creation times, taints and tolerations, enum values. Each
fails at the field, through :meth:`Document.fail`, with what Kueue's CRD markers or
webhooks would say (``pkg/webhooks``, ``apis/kueue/v1beta2``).
"""

from __future__ import annotations

import datetime
import math
import re
from fractions import Fraction
from typing import Any, Mapping, Sequence

import msgspec

from placer.adapters.kubernetes.quantities import parse_quantity
from placer.adapters.kubernetes.documents import Document, field_list, field_map, field_string, show
from placer.adapters.kubernetes.templates import pod_tolerations
from placer.exceptions import InvalidInputError
from placer.limits import MAX_QUANTITY
from placer.model import TAINT_EFFECTS, Taint, Toleration

__all__ = [
    "KUEUE_GROUP",
    "CONFIG_GROUP",
    "KUEUE_VERSIONS",
    "QUEUE_NAME_LABEL",
    "PRIORITY_CLASS_LABEL",
    "is_dns_subdomain",
    "is_dns_label",
    "is_label_key",
    "is_label_value",
    "api_of",
    "metadata_name",
    "namespace_of",
    "name_field",
    "label_key_field",
    "labels_field",
    "enum_field",
    "amount",
    "fair_weight",
    "creation_time",
    "timestamp",
    "node_taints",
    "tolerations",
]

KUEUE_GROUP = "kueue.x-k8s.io"
CONFIG_GROUP = "config.kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta1", "v1beta2")
"""The versions of Kueue's API (``kueue.x-k8s.io``) placer reads; ``v1alpha1`` also for Cohort."""
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""The label (or, formerly, annotation) naming the LocalQueue of a Job, JobSet, Pod, ..."""
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
"""The label naming the WorkloadPriorityClass of a Job, JobSet, Pod, ..."""

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME_PART_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_NANO = Fraction(1, 10**9)


def is_dns_subdomain(s: str) -> bool:
    """Whether ``s`` is a DNS-1123 subdomain (an object name): lowercase letters, digits,
    ``-`` and ``.``, starting and ending alphanumeric, at most 253 characters."""
    return len(s) <= 253 and _DNS_SUBDOMAIN_RE.fullmatch(s) is not None


def is_dns_label(s: str) -> bool:
    """Whether ``s`` is a DNS-1123 label (a namespace, a pod set name): as a subdomain
    without ``.``, at most 63 characters."""
    return len(s) <= 63 and _DNS_LABEL_RE.fullmatch(s) is not None


def is_label_key(s: str) -> bool:
    """Whether ``s`` is a qualified name (a label key, a resource name): an optional
    DNS-subdomain prefix and ``/``, then at most 63 letters, digits, ``-``, ``_``, ``.``
    starting and ending alphanumeric."""
    prefix, slash, name = s.rpartition("/")
    if slash and not (prefix and is_dns_subdomain(prefix)):
        return False
    return len(name) <= 63 and _NAME_PART_RE.fullmatch(name) is not None


def is_label_value(s: str) -> bool:
    """Whether ``s`` is a label value: empty, or at most 63 letters, digits, ``-``, ``_``,
    ``.`` starting and ending alphanumeric."""
    return len(s) <= 63 and _LABEL_VALUE_RE.fullmatch(s) is not None


def api_of(doc: Document, path: tuple[Any, ...], obj: Any) -> tuple[str, str, str]:
    """``(group, version, kind)`` of an object (group ``""`` for the core API).

    Raises
    ------
    InvalidInputError
        At the object when it is no mapping, at ``kind`` or ``apiVersion`` when missing.
    """
    if not isinstance(obj, dict):
        doc.fail(path, f"expected a Kubernetes object (a mapping), got {show(obj)}")
    api = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        doc.fail((*path, "kind"), f"expected a Kubernetes object with a kind, got kind {show(kind)}")
    if not isinstance(api, str) or not api:
        doc.fail((*path, "apiVersion"), f"expected an apiVersion, got {show(api)}")
    group, _, version = api.rpartition("/")
    return group, version, kind


def name_field(doc: Document, path: tuple[Any, ...], v: Any, what: str, *, label: bool = False) -> str:
    """A required name that must be a DNS-1123 subdomain (``label``: a DNS-1123 label).

    Parameters
    ----------
    doc, path, v
        Where the name is, and the value.
    what : str
        What names it, for the message (``"a ClusterQueue name"``).
    label : bool
        Check a DNS-1123 label (at most 63 characters, no ``.``) instead.

    Raises
    ------
    InvalidInputError
        At ``path`` for a missing name or one Kubernetes would refuse.
    """
    name = field_string(doc, path, v, required=True)
    assert name is not None
    ok = is_dns_label(name) if label else is_dns_subdomain(name)
    if not ok:
        limit = "a DNS-1123 label: at most 63" if label else "a DNS-1123 subdomain: at most 253"
        doc.fail(path, f"{what} must be {limit} lowercase letters, digits, '-'{'' if label else ' or .'}, "
                       f"starting and ending alphanumeric; got {show(name)}")
    return name


def metadata_name(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any], kind: str) -> str:
    """``metadata.name`` of a Kueue object, a DNS-1123 subdomain.

    Raises
    ------
    InvalidInputError
        At ``metadata`` or ``metadata.name``.
    """
    meta = field_map(doc, (*path, "metadata"), obj.get("metadata"), required=True)
    return name_field(doc, (*path, "metadata", "name"), meta.get("name"), f"a {kind} name")


def namespace_of(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any]) -> str:
    """``metadata.namespace`` of an object, ``default`` when absent; a DNS-1123 label.

    Raises
    ------
    InvalidInputError
        At ``metadata.namespace``.
    """
    meta = field_map(doc, (*path, "metadata"), obj.get("metadata"), required=True)
    v = meta.get("namespace")
    if v is None:
        return "default"
    return name_field(doc, (*path, "metadata", "namespace"), v, "a namespace", label=True)


def label_key_field(doc: Document, path: tuple[Any, ...], v: Any, what: str) -> str:
    """A required label key or resource name (a qualified name).

    Raises
    ------
    InvalidInputError
        At ``path`` for anything else.
    """
    key = field_string(doc, path, v, required=True)
    assert key is not None
    if not is_label_key(key):
        doc.fail(path, f"{what} must be a qualified name (an optional DNS prefix and '/', then at most 63 "
                       f"letters, digits, '-', '_' or '.', starting and ending alphanumeric); got {show(key)}")
    return key


def labels_field(doc: Document, path: tuple[Any, ...], v: Any, what: str, most: int | None = None) -> dict[str, str]:
    """A mapping of label keys to label values (``nodeLabels``), at most ``most`` entries.

    Raises
    ------
    InvalidInputError
        At ``path`` or the entry: not a mapping, too many entries, a bad key or value.
    """
    m = field_map(doc, path, v)
    if most is not None and len(m) > most:
        doc.fail(path, f"at most {most} {what}, got {len(m)}")
    out: dict[str, str] = {}
    for k, x in m.items():
        if not isinstance(k, str):
            doc.fail(path, f"expected {what} with string keys, got key {show(k)}")
        label_key_field(doc, (*path, k), k, f"key {k!r}")
        if not isinstance(x, str):
            doc.fail((*path, k), f"expected a string (quote it), got {show(x)}")
        if not is_label_value(x):
            doc.fail((*path, k), f"a label value must be at most 63 letters, digits, '-', '_' or '.', starting "
                                 f"and ending alphanumeric; got {show(x)}")
        out[k] = x
    return out


def enum_field(doc: Document, path: tuple[Any, ...], v: Any, allowed: Sequence[str], default: str) -> str:
    """One of ``allowed``; ``default`` when missing.

    Raises
    ------
    InvalidInputError
        At ``path`` for anything else.
    """
    if v is None:
        return default
    if v not in allowed:
        choices = " or ".join(allowed) if len(allowed) <= 2 else "one of " + ", ".join(allowed)
        doc.fail(path, f"expected {choices}, got {show(v)}")
    return str(v)


def amount(doc: Document, path: tuple[Any, ...], v: Any, resource: str) -> int:
    """A quantity of ``resource`` in Kueue's accounting units: ``cpu`` in millicores, every
    other resource in whole units, rounded up (Kueue's ``ResourceValue``).

    Raises
    ------
    InvalidInputError
        At ``path`` for no quantity, a negative one (Kueue: must be greater than or equal
        to 0), or more than :data:`placer.limits.MAX_QUANTITY` units.
    """
    if v is None:
        doc.fail(path, "expected a quantity, got nothing")
    try:
        q = parse_quantity(v, "")
    except InvalidInputError as e:
        doc.fail(path, e.what)
    if q < 0:
        doc.fail(path, f"must be greater than or equal to 0, got {show(v)}")
    units = math.ceil(q * 1000) if resource == "cpu" else math.ceil(q)
    if units > MAX_QUANTITY:
        unit = "millicores" if resource == "cpu" else "units"
        doc.fail(path, f"{show(v)} is {units} {unit}, over placer's limit of {MAX_QUANTITY}")
    return units


def fair_weight(doc: Document, path: tuple[Any, ...], fair_sharing: Any) -> float:
    """``fairSharing.weight`` (a quantity such as ``"0.5"``) as a float; 1 when absent.

    Raises
    ------
    InvalidInputError
        At ``fairSharing`` or its ``weight``: a negative weight, or one in (0, 1e-9] (Kueue:
        when not 0, weight must be > 10e-9).
    """
    fs = field_map(doc, path, fair_sharing)
    v = fs.get("weight")
    if v is None:
        return 1.0
    wpath = (*path, "weight")
    try:
        q = parse_quantity(v, "")
    except InvalidInputError as e:
        doc.fail(wpath, e.what)
    if q < 0:
        doc.fail(wpath, f"must be greater than or equal to 0, got {show(v)}")
    if 0 < q <= _NANO:
        doc.fail(wpath, f"when not 0, a weight must be more than 1e-9, got {show(v)}")
    return float(q)


def creation_time(doc: Document, path: tuple[Any, ...], obj: Mapping[str, Any]) -> float:
    """``metadata.creationTimestamp`` in seconds since the epoch; 0 when absent.

    Raises
    ------
    InvalidInputError
        At the field for a time that is no RFC 3339 timestamp.
    """
    meta = field_map(doc, (*path, "metadata"), obj.get("metadata"))
    v = meta.get("creationTimestamp")
    if v is None:
        return 0.0
    return timestamp(doc, (*path, "metadata", "creationTimestamp"), v)


def timestamp(doc: Document, path: tuple[Any, ...], v: Any) -> float:
    """An RFC 3339 time (a YAML timestamp too) in seconds since the epoch, UTC unless it
    says otherwise.

    Raises
    ------
    InvalidInputError
        At ``path`` for anything else.
    """
    if isinstance(v, datetime.datetime):
        t = v
    elif isinstance(v, str):
        try:
            t = datetime.datetime.fromisoformat(v)
        except ValueError:
            doc.fail(path, f"expected an RFC 3339 time such as 2025-01-31T12:00:00Z, got {show(v)}")
    else:
        doc.fail(path, f"expected an RFC 3339 time such as 2025-01-31T12:00:00Z, got {show(v)}")
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.timestamp()


def node_taints(doc: Document, path: tuple[Any, ...], v: Any, most: int) -> tuple[Taint, ...]:
    """A ResourceFlavor's ``nodeTaints``: key (a label key), value (a label value),
    effect (required); unique by key and effect; at most ``most``.

    Raises
    ------
    InvalidInputError
        At the taint's field.
    """
    items = field_list(doc, path, v)
    if len(items) > most:
        doc.fail(path, f"at most {most} taints, got {len(items)}")
    out: list[Taint] = []
    seen: dict[tuple[str, str], int] = {}
    for j, t in enumerate(items):
        tp = (*path, j)
        t = field_map(doc, tp, t)
        key = label_key_field(doc, (*tp, "key"), t.get("key"), "a taint key")
        value = field_string(doc, (*tp, "value"), t.get("value"), empty=True) or ""
        if not is_label_value(value):
            doc.fail((*tp, "value"), f"a taint value must be a label value (at most 63 letters, digits, '-', '_' "
                                     f"or '.', starting and ending alphanumeric); got {show(value)}")
        effect = enum_field(doc, (*tp, "effect"), t.get("effect"), TAINT_EFFECTS, "")
        if not effect:
            doc.fail((*tp, "effect"), f"expected one of {', '.join(TAINT_EFFECTS)}, got nothing")
        if (key, effect) in seen:
            doc.fail(tp, f"taint {key}:{effect} given twice (first as taint {seen[key, effect]}); "
                         "taints are unique by key and effect")
        seen[key, effect] = j
        out.append(Taint(key=key, value=value, effect=effect))  # type: ignore[arg-type]
    return tuple(out)


def tolerations(doc: Document, path: tuple[Any, ...], v: Any, most: int | None = None) -> tuple[Toleration, ...]:
    """Tolerations (of a ResourceFlavor or a pod template) as Kubernetes and Kueue's CRD
    check them: operator Equal or Exists, an empty key only with Exists, no value with
    Exists, ``tolerationSeconds`` only with effect NoExecute, a key that is a label key.

    Raises
    ------
    InvalidInputError
        At the toleration's field.
    """
    items = field_list(doc, path, v)
    if most is not None and len(items) > most:
        doc.fail(path, f"at most {most} tolerations, got {len(items)}")
    out: list[Toleration] = []
    for j, entry in enumerate(pod_tolerations(doc, path, items)):
        tp = (*path, j)
        if "key" in entry:
            label_key_field(doc, (*tp, "key"), entry["key"], "a toleration key")
        out.append(msgspec.convert(entry, Toleration))
    return tuple(out)
