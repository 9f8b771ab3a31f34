"""The kube-scheduler extender wire format (``k8s.io/kube-scheduler/extender/v1``), decoded strictly.

The Go types have no JSON tags: field names on the wire are the Go names (``Pod``,
``NodeNames``, ``PodUID``) and Go decodes them case-insensitively, so ``nodenames`` is
``NodeNames`` here too. The objects inside (a Pod, the Nodes of a NodeList) are core/v1
objects in their own lowerCamel JSON and are read by :mod:`placer.adapters.kubernetes.snapshot`.

Every fault is an :class:`~placer.exceptions.InvalidInputError` whose ``where`` is the verb's
path and the JSON path as written (``POST /filter: NodeNames[3]``): a body that is not JSON
or larger than :data:`MAX_BODY_BYTES`, nested more than
:data:`~placer.schema.files.MAX_NESTING` levels deep, a key repeated (also in another case), an
unknown field (naming the known one it resembles), a value of the wrong type, a name with
control characters, a count beyond int32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, NoReturn

from placer.exceptions import InvalidInputError
from placer.text.messages import describe, unknown_field
from placer.schema.errors import control_error, has_control
from placer.schema.files import decode_json_generic

__all__ = [
    "MAX_BODY_BYTES",
    "ExtenderArgs",
    "BindingArgs",
    "PreemptionArgs",
    "decode_filter_args",
    "decode_binding_args",
    "decode_preemption_args",
    "pod_key",
    "same_json_value",
]

MAX_BODY_BYTES = 256 * 1024 * 1024
"""The largest request body decoded (a NodeList of 5,000 full Node objects is about 50 MB),
and so the most ``placer serve --max-body-bytes`` takes; the service itself refuses a body
past its own cap (64 MiB by default) while reading it, before it is decoded."""

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class ExtenderArgs:
    """The body of ``filter`` and ``prioritize``: the pod, and the candidate nodes as
    ``NodeNames`` (``nodeCacheCapable``) or as full Node objects (``Nodes``)."""

    pod: Mapping[str, Any]
    node_names: tuple[str, ...] | None
    nodes: tuple[Mapping[str, Any], ...] | None

    @property
    def names(self) -> tuple[str, ...]:
        """The candidate node names, from whichever form was sent."""
        if self.node_names is not None:
            return self.node_names
        return tuple(n["metadata"]["name"] for n in self.nodes or ())


@dataclass(frozen=True)
class BindingArgs:
    """The body of ``bind``."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str

    @property
    def key(self) -> str:
        """``<namespace>/<name>``, the pod's name in a placer snapshot."""
        return f"{self.pod_namespace or 'default'}/{self.pod_name}"


@dataclass(frozen=True)
class PreemptionArgs:
    """The body of ``preempt``: per candidate node, the UIDs of the victims kube-scheduler
    chose (from ``NodeNameToMetaVictims``, or from the Pods of ``NodeNameToVictims``) and
    its PDB violations count; ``victim_pods``: the full victim Pods when sent."""

    pod: Mapping[str, Any]
    victims: Mapping[str, tuple[str, ...]]
    pdb_violations: Mapping[str, int]
    victim_pods: tuple[Mapping[str, Any], ...]


def pod_key(pod: Mapping[str, Any]) -> str:
    """``<namespace>/<name>`` of a Pod object already checked by a decoder here."""
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def same_json_value(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are the same: equal, object keys in any order, and
    of the same type everywhere (``==`` alone takes ``1``, ``1.0`` and ``true`` as equal,
    which a decoder refusing one of them must not)."""
    return a is b or (a == b and _same_types(a, b))


def _same_types(a: Any, b: Any) -> bool:
    """Whether equal JSON values ``a`` and ``b`` have the same type at every place."""
    if type(a) is dict:
        a_items, b_items = list(a.values()), list(map(b.__getitem__, a))
    elif type(a) is list:
        a_items, b_items = a, b
    else:
        return type(a) is type(b)
    if type(a) is not type(b) or list(map(type, a_items)) != list(map(type, b_items)):
        return False
    for x, y in zip(a_items, b_items):
        if (type(x) is dict or type(x) is list) and not _same_types(x, y):
            return False
    return True


class _Body:
    """One request body being decoded; ``source`` (``POST /filter``) starts every error."""

    def __init__(self, raw: bytes, source: str) -> None:
        self.source = source
        if len(raw) > MAX_BODY_BYTES:
            self.fail("", f"body of {len(raw)} bytes, more than the {MAX_BODY_BYTES} read")
        self.data = decode_json_generic(raw, source)

    def fail(self, path: str, what: str) -> NoReturn:
        raise InvalidInputError(f"{self.source}: {path}" if path else self.source, what)

    def fields(self, v: Any, path: str, known: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
        """The fields of a Go struct, keys matched case-insensitively; None is absent."""
        if not isinstance(v, dict):
            self.fail(path, f"expected an object, got {describe(v)}")
        folded = {name.lower(): name for name in known}
        out: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        for key, value in v.items():
            name = folded.get(key.lower())
            at = f"{path}.{key}" if path else key
            if name is None:
                self.fail(at, unknown_field(key, known))
            if name in spelled:
                self.fail(at, f"field {name} given twice (as {spelled[name]!r} and {key!r})")
            spelled[name] = key
            if value is not None:
                out[name] = value
        for name in required:
            if name not in out:
                self.fail(path, f"missing field {name}")
        return out

    def name(self, v: Any, path: str, *, empty: bool = False) -> str:
        if not isinstance(v, str) or (not v and not empty):
            self.fail(path, f"expected a name, got {describe(v)}")
        if has_control(v):
            e = control_error(path, v)
            self.fail(e.where, e.what)
        return v

    def pod(self, v: Any, path: str) -> Mapping[str, Any]:
        """A Pod object: a mapping with ``metadata.name`` (its other fields are read by the
        Kubernetes adapter, which names the path in its errors)."""
        if not isinstance(v, dict):
            self.fail(path, f"expected a Pod object, got {describe(v)}")
        meta = v.get("metadata")
        if not isinstance(meta, dict):
            self.fail(f"{path}.metadata", f"expected an object with the pod's name, got {describe(meta)}")
        self.name(meta.get("name"), f"{path}.metadata.name")
        if meta.get("namespace") is not None:
            self.name(meta["namespace"], f"{path}.metadata.namespace")
        return v

    def count(self, v: Any, path: str) -> int:
        if type(v) is not int or not 0 <= v <= _INT32_MAX:
            self.fail(path, f"expected an integer from 0 to {_INT32_MAX}, got {describe(v)}")
        return v


def decode_filter_args(raw: bytes, source: str) -> ExtenderArgs:
    """``ExtenderArgs`` (the body of ``filter`` and ``prioritize``).

    Raises
    ------
    InvalidInputError
        As the module says; also when neither ``NodeNames`` nor ``Nodes`` is given, or a
        node name is listed twice.
    """
    body = _Body(raw, source)
    f = body.fields(body.data, "", ("Pod", "Nodes", "NodeNames"), ("Pod",))
    pod = body.pod(f["Pod"], "Pod")
    names: tuple[str, ...] | None = None
    nodes: tuple[Mapping[str, Any], ...] | None = None
    if "NodeNames" in f:
        listed = f["NodeNames"]
        if not isinstance(listed, list):
            body.fail("NodeNames", f"expected a list of node names, got {describe(listed)}")
        if _plain_names(listed):
            names = tuple(listed)  # the common case, checked at once
        else:
            names = tuple(body.name(n, f"NodeNames[{i}]") for i, n in enumerate(listed))
            _unique(body, names, "NodeNames")
    elif "Nodes" in f:
        node_list = f["Nodes"]
        if not isinstance(node_list, dict):
            body.fail("Nodes", f"expected a NodeList object, got {describe(node_list)}")
        items = node_list.get("items") or []
        if not isinstance(items, list):
            body.fail("Nodes.items", f"expected a list of Node objects, got {describe(items)}")
        for i, node in enumerate(items):
            body.pod(node, f"Nodes.items[{i}]")  # the same shape: metadata.name
        nodes = tuple(items)
        _unique(body, tuple(n["metadata"]["name"] for n in nodes), "Nodes.items", ".metadata.name")
    else:
        body.fail("", "missing field NodeNames (nodeCacheCapable: true) or Nodes")
    return ExtenderArgs(pod, names, nodes)


def _plain_names(listed: list[Any]) -> bool:
    """Whether every item is a distinct non-empty string without control characters."""
    if set(map(type, listed)) - {str}:
        return False
    unique = set(listed)
    return len(unique) == len(listed) and "" not in unique and not has_control("".join(listed))


def _unique(body: _Body, names: tuple[str, ...], path: str, suffix: str = "") -> None:
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            body.fail(f"{path}[{i}]{suffix}", f"node {name!r} listed twice (first at {path}[{seen[name]}])")
        seen[name] = i


def decode_binding_args(raw: bytes, source: str) -> BindingArgs:
    """``ExtenderBindingArgs`` (the body of ``bind``): ``PodName``, ``PodNamespace``,
    ``PodUID``, ``Node``; the name and the node are required."""
    body = _Body(raw, source)
    f = body.fields(body.data, "", ("PodName", "PodNamespace", "PodUID", "Node"), ("PodName", "Node"))
    return BindingArgs(
        pod_name=body.name(f["PodName"], "PodName"),
        pod_namespace=body.name(f.get("PodNamespace", ""), "PodNamespace", empty=True),
        pod_uid=body.name(f.get("PodUID", ""), "PodUID", empty=True),
        node=body.name(f["Node"], "Node"),
    )


def decode_preemption_args(raw: bytes, source: str) -> PreemptionArgs:
    """``ExtenderPreemptionArgs`` (the body of ``preempt``): ``Pod`` and the victims per
    node as ``NodeNameToMetaVictims`` (UIDs) or ``NodeNameToVictims`` (Pods)."""
    body = _Body(raw, source)
    f = body.fields(body.data, "", ("Pod", "NodeNameToVictims", "NodeNameToMetaVictims"), ("Pod",))
    pod = body.pod(f["Pod"], "Pod")
    victims: dict[str, tuple[str, ...]] = {}
    violations: dict[str, int] = {}
    victim_pods: list[Mapping[str, Any]] = []
    meta = "NodeNameToMetaVictims" in f
    field = "NodeNameToMetaVictims" if meta else "NodeNameToVictims"
    per_node = f.get(field)
    if per_node is None:
        body.fail("", "missing field NodeNameToMetaVictims or NodeNameToVictims")
    if not isinstance(per_node, dict):
        body.fail(field, f"expected an object of node names, got {describe(per_node)}")
    for node, v in per_node.items():
        path = f"{field}.{body.name(node, field)}"
        entry = body.fields(v, path, ("Pods", "NumPDBViolations"), ())
        pods = entry.get("Pods", [])
        if not isinstance(pods, list):
            body.fail(f"{path}.Pods", f"expected a list, got {describe(pods)}")
        uids: list[str] = []
        for i, p in enumerate(pods):
            at = f"{path}.Pods[{i}]"
            if meta:
                uids.append(body.name(body.fields(p, at, ("UID",), ("UID",))["UID"], f"{at}.UID"))
            else:
                victim = body.pod(p, at)
                uid = victim["metadata"].get("uid")
                uids.append(body.name(uid, f"{at}.metadata.uid"))
                victim_pods.append(victim)
        victims[node] = tuple(uids)
        violations[node] = body.count(entry.get("NumPDBViolations", 0), f"{path}.NumPDBViolations")
    return PreemptionArgs(pod, victims, violations, tuple(victim_pods))
