"""Kubernetes quantities and what a pod asks for, as placer counts them.

:func:`parse_quantity` reads a quantity by Kubernetes rules (``500m``, ``1Gi``, ``2e3``);
:func:`cpu_milli`, :func:`memory_mib`, :func:`count` and :func:`whole_units` turn one into
placer's units;
:func:`pod_amounts` sums a pod's containers (init containers, sidecars and the pod overhead
as kube-scheduler does, for every resource), and :func:`gpu_count`, :func:`pod_resources`
and :func:`cpu_memory` read what placer places of it. The snapshot importer
(:mod:`placer.adapters.kubernetes.snapshot`), the request importer and the Kueue importer
read their objects with these.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Mapping

from placer.limits import MAX_GPUS
from placer.adapters.kubernetes.documents import Document, field_list, field_map, show
from placer.exceptions import InvalidInputError

__all__ = [
    "GPU_RESOURCE", "CPU_RESOURCE", "MEMORY_RESOURCE", "EPHEMERAL_STORAGE_RESOURCE", "PODS_RESOURCE",
    "HUGEPAGES_PREFIX", "parse_quantity", "cpu_milli", "memory_mib", "count", "whole_units", "quantity_at",
    "pod_amounts", "gpu_count", "pod_resources", "extended_resources", "node_resource_units", "cpu_memory",
]

GPU_RESOURCE = "nvidia.com/gpu"
"""The device plugin's whole-GPU resource."""
CPU_RESOURCE = "cpu"
"""The CPU resource of a node's allocatable and a container's requests and limits."""
MEMORY_RESOURCE = "memory"
"""The memory resource of a node's allocatable and a container's requests and limits."""
EPHEMERAL_STORAGE_RESOURCE = "ephemeral-storage"
"""Local ephemeral storage, in bytes (requests, else limits, like cpu and memory)."""
PODS_RESOURCE = "pods"
"""A node's pod capacity (placer's ``maxPods``); no container asks for it."""
HUGEPAGES_PREFIX = "hugepages-"
"""The prefix of the huge page resources (``hugepages-2Mi``, ``hugepages-1Gi``), in bytes."""
_OVERCOMMITTABLE = (CPU_RESOURCE, MEMORY_RESOURCE, EPHEMERAL_STORAGE_RESOURCE)

_MIB = 1 << 20
_LIMIT = 1 << 63
_MAX_DIGITS = 40

_QUANTITY = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?[0-9]+)|(n|u|m|k|M|G|T|P|E))?"
)
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


_QUANTITY_CACHE: dict[str, Fraction] = {}
_QUANTITY_CACHE_SIZE = 4096


def parse_quantity(value: Any, where: str = "") -> Fraction:
    """Parse a Kubernetes resource quantity exactly.

    Accepted: a JSON/YAML number (``16``, ``0.5``) or a string of a signed decimal number
    (``"16"``, ``".5"``, ``"1."``) with at most one suffix: binary ``Ki Mi Gi Ti Pi Ei``
    (powers of 1024), decimal ``n u m k M G T P E`` (``m`` = 1/1000, ``E`` = 10^18), or a
    decimal exponent ``e<int>``/``E<int>`` (``"2e3"``). ``"8443296967"``, ``"32777408Ki"``,
    ``"500m"``, ``"1.5Gi"`` are quantities; ``"12Q"``, ``"1e"``, ``" 1"``, ``"Ki"`` are not.

    Parameters
    ----------
    value : str, int or float
        The quantity as it appears in the document.
    where : str
        Location used in the error.

    Returns
    -------
    fractions.Fraction
        The exact value (may be negative; the helpers below reject that).

    Raises
    ------
    InvalidInputError
        ``where`` = ``where`` for anything else, a non-finite float, more than 40 digits
        or an exponent beyond +-40, or a magnitude of 2^63 or more.
    """
    if value is True or value is False or not isinstance(value, (int, float, str)):
        raise InvalidInputError(
            where, f"expected a quantity (a number or a string like 500m, 4Gi), got {show(value)}"
        )
    if isinstance(value, str):
        q = _QUANTITY_CACHE.get(value)
        if q is not None:
            return q
    if isinstance(value, int):
        q = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(where, f"expected a finite quantity, got {show(value)}")
        q = Fraction(repr(value))
    else:
        m = _QUANTITY.fullmatch(value)
        if m is None:
            raise InvalidInputError(
                where,
                f"expected a Kubernetes quantity (like 16, 500m, 0.5, 32777408Ki, 4Gi, 2e3), "
                f"got {show(value)}",
            )
        sign, number, binary, exponent, decimal = m.groups()
        if len(number) > _MAX_DIGITS or (exponent is not None and len(exponent.lstrip("+-")) > 2):
            raise InvalidInputError(where, f"quantity {value!r} has too many digits")
        q = Fraction(number)
        if binary:
            q *= _BINARY[binary]
        elif exponent is not None:
            q *= Fraction(10) ** int(exponent)
        elif decimal:
            q *= _DECIMAL[decimal]
        if sign == "-":
            q = -q
    if abs(q) >= _LIMIT:
        raise InvalidInputError(where, f"quantity {show(value)} is out of range (at least 2^63)")
    if isinstance(value, str) and len(_QUANTITY_CACHE) < _QUANTITY_CACHE_SIZE:
        _QUANTITY_CACHE[value] = q
    return q


def _non_negative(value: Any, where: str) -> Fraction:
    q = parse_quantity(value, where)
    if q < 0:
        raise InvalidInputError(where, f"expected a quantity >= 0, got {show(value)}")
    return q


def cpu_milli(value: Any, where: str = "") -> int:
    """A CPU quantity in millicores (1000 = one core), rounded up as Kubernetes does.

    ``"16"`` -> 16000, ``"500m"`` -> 500, ``0.5`` -> 500, ``"1.5"`` -> 1500, ``"100u"`` -> 1.

    Raises
    ------
    InvalidInputError
        As :func:`parse_quantity`, or for a negative quantity.
    """
    return math.ceil(_non_negative(value, where) * 1000)


def memory_mib(value: Any, where: str = "", *, round_up: bool = False) -> int:
    """A byte quantity in MiB (2^20 bytes), rounded down (up with ``round_up``).

    ``"8443296967"`` -> 8052, ``"32777408Ki"`` -> 32009, ``"200Mi"`` -> 200,
    ``"1G"`` -> 953 (954 rounded up).

    Raises
    ------
    InvalidInputError
        As :func:`parse_quantity`, or for a negative quantity.
    """
    mib = _non_negative(value, where) / _MIB
    return math.ceil(mib) if round_up else math.floor(mib)


def count(value: Any, where: str = "") -> int:
    """A quantity that must be a whole number >= 0 (GPUs, pods, extended resources).

    ``"8"`` -> 8, ``4`` -> 4, ``"1k"`` -> 1000; ``"1.5"`` and ``"500m"`` are errors.

    Raises
    ------
    InvalidInputError
        As :func:`parse_quantity`, for a negative or a fractional quantity.
    """
    q = _non_negative(value, where)
    if q.denominator != 1:
        raise InvalidInputError(where, f"expected a whole number, got {show(value)}")
    return int(q)


def whole_units(value: Any, where: str = "") -> int:
    """A quantity >= 0 rounded up to a whole unit, as Kubernetes' ``Quantity.Value()`` does
    (bytes of ``ephemeral-storage`` and ``hugepages-<size>``).

    ``"10Gi"`` -> 10737418240, ``"1.5"`` -> 2, ``"500m"`` -> 1.

    Raises
    ------
    InvalidInputError
        As :func:`parse_quantity`, or for a negative quantity.
    """
    return math.ceil(_non_negative(value, where))


def quantity_at(doc: Document, path: tuple[Any, ...], v: Any, fn: Any, **kw: Any) -> Any:
    """``fn(v)`` (a reader of this module), its error reported at ``path`` of ``doc``."""
    try:
        return fn(v, "", **kw)
    except InvalidInputError as e:
        doc.fail(path, e.what)


def _amount_reader(name: Any) -> Any:
    """How a container's (or the overhead's) quantity of resource ``name`` is read: exactly
    (cpu, memory, ephemeral-storage, hugepages) or as a count (extended resources, names
    with ``/``); None for a name Kubernetes refuses in a container."""
    if not isinstance(name, str):
        return None
    if name in _OVERCOMMITTABLE or (name.startswith(HUGEPAGES_PREFIX) and len(name) > len(HUGEPAGES_PREFIX)):
        return _non_negative
    return count if "/" in name else None


def _container_amounts(doc: Document, path: tuple[Any, ...], c: Any) -> dict[str, Fraction]:
    """Requests of one container: cpu, memory and ephemeral-storage from requests, else
    limits; huge pages and extended resources from limits, else requests (both given must
    agree, as Kubernetes validates for resources it does not overcommit)."""
    c = field_map(doc, path, c)
    rpath = (*path, "resources")
    res = field_map(doc, rpath, c.get("resources"))
    req = field_map(doc, (*rpath, "requests"), res.get("requests"))
    lim = field_map(doc, (*rpath, "limits"), res.get("limits"))
    out: dict[str, Fraction] = {}
    for name in dict.fromkeys([*lim, *req]):
        reader = _amount_reader(name)
        if reader is None:
            side = "limits" if name in lim else "requests"
            doc.fail(
                (*rpath, side) if not isinstance(name, str) or not name else (*rpath, side, name),
                f"expected cpu, memory, {EPHEMERAL_STORAGE_RESOURCE}, {HUGEPAGES_PREFIX}<size> or an extended "
                f"resource (a name with /), got {show(name)}",
            )
        if name in _OVERCOMMITTABLE:
            side = "requests" if name in req else "limits"
            out[name] = quantity_at(doc, (*rpath, side, name), (req if side == "requests" else lim)[name], reader)
            continue
        side = "limits" if name in lim else "requests"
        n = quantity_at(doc, (*rpath, side, name), (lim if side == "limits" else req)[name], reader)
        if side == "limits" and name in req:
            other = quantity_at(doc, (*rpath, "requests", name), req[name], reader)
            if other != n:
                doc.fail(
                    (*rpath, "requests", name),
                    f"resource {name}: requests {show(req[name])} must equal limits {show(lim[name])}",
                )
        out[name] = Fraction(n)
    return out


def _is_pod_level(name: Any) -> bool:
    """Whether pod-level ``spec.resources`` may set ``name`` (kube's
    ``IsSupportedPodLevelResource``: cpu, memory, huge pages)."""
    return name in (CPU_RESOURCE, MEMORY_RESOURCE) or (isinstance(name, str) and name.startswith(HUGEPAGES_PREFIX))


def _pod_level_requests(
    doc: Document, path: tuple[Any, ...], v: Any, containers: Mapping[str, Fraction]
) -> dict[str, Fraction]:
    """The requests of a pod's pod-level ``spec.resources`` (PodLevelResources, on by default
    since Kubernetes 1.34), which take the place of the containers' sum for the resources
    they name, after the API server's defaulting: with limits given, a missing cpu or
    memory request is the containers' effective request, else the pod-level limit.

    Raises
    ------
    InvalidInputError
        At the field for a resource pod-level resources do not take or a bad quantity.
    """
    res = field_map(doc, path, v)
    given: dict[str, Fraction] = {}
    sides = {side: field_map(doc, (*path, side), res.get(side)) for side in ("requests", "limits")}
    for side, values in sides.items():
        for name, value in values.items():
            if not _is_pod_level(name):
                doc.fail((*path, side, name) if isinstance(name, str) and name else (*path, side),
                         f"expected cpu, memory or {HUGEPAGES_PREFIX}<size> (pod-level resources), got {show(name)}")
            q = quantity_at(doc, (*path, side, name), value, _non_negative)
            if side == "requests":
                given[name] = q
            elif name not in given and name not in sides["requests"]:
                given[name] = containers.get(name, q) if name in _OVERCOMMITTABLE else q
    return given


def pod_amounts(
    doc: Document, spath: tuple[Any, ...], spec: Mapping[str, Any], *, pod_level: bool = True
) -> dict[str, Fraction]:
    """Effective requests of a pod: max(sum over containers + sidecars, init peaks)
    plus ``overhead`` (restartable init containers count as sidecars).

    This is kube's ``PodRequests`` (component-helpers ``resource``) for every resource
    alike. Per container, cpu, memory and ephemeral-storage come from ``requests`` (else
    ``limits``), ``hugepages-<size>`` and extended resources (names with ``/``) from
    ``limits`` (else ``requests``; both given must agree); another resource name is an
    error, as Kubernetes' validation refuses it. Pod-level ``spec.resources`` (cpu,
    memory, huge pages) replace the containers' sum for what they name.

    Parameters
    ----------
    doc : Document
        The document the pod spec was read from.
    spath : tuple
        The path of ``spec`` in ``doc``.
    spec : Mapping
        The pod spec (``spec`` of a Pod, ``spec.template.spec`` of a workload).
    pod_level : bool
        Read pod-level ``spec.resources`` (else the containers' sum alone counts).

    Returns
    -------
    dict of str to Fraction
        ``cpu`` in cores, ``memory``, ``ephemeral-storage`` and ``hugepages-<size>`` in
        bytes, extended resources as counts; a resource no container asks for is left out.

    Raises
    ------
    InvalidInputError
        At the field for a malformed container, resource name or quantity, or huge page or
        extended resource requests that differ from its limits.
    """
    total: dict[str, Fraction] = {}
    cpath = (*spath, "containers")
    for j, c in enumerate(field_list(doc, cpath, spec.get("containers"))):
        for k, v in _container_amounts(doc, (*cpath, j), c).items():
            total[k] = total.get(k, Fraction(0)) + v
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    ipath = (*spath, "initContainers")
    for j, c in enumerate(field_list(doc, ipath, spec.get("initContainers"))):
        amounts = _container_amounts(doc, (*ipath, j), c)
        restartable = isinstance(c, dict) and c.get("restartPolicy") == "Always"
        for k in set(amounts) | set(sidecars):
            running = sidecars.get(k, Fraction(0)) + amounts.get(k, Fraction(0))
            peak[k] = max(peak.get(k, Fraction(0)), running)
        if restartable:
            for k, v in amounts.items():
                sidecars[k] = sidecars.get(k, Fraction(0)) + v
    for k, v in sidecars.items():
        total[k] = total.get(k, Fraction(0)) + v
    for k, v in peak.items():
        total[k] = max(total.get(k, Fraction(0)), v)
    if pod_level:
        total.update(_pod_level_requests(doc, (*spath, "resources"), spec.get("resources"), total))
    opath = (*spath, "overhead")
    overhead = field_map(doc, opath, spec.get("overhead"))
    for k, v in overhead.items():
        reader = _amount_reader(k)
        if reader is None:
            doc.fail(opath if not isinstance(k, str) or not k else (*opath, k),
                     f"expected a resource a container may ask for, got {show(k)}")
        total[k] = total.get(k, Fraction(0)) + quantity_at(doc, (*opath, k), v, reader)
    return total


def gpu_count(doc: Document, path: tuple[Any, ...], amounts: dict[str, Fraction]) -> int:
    """Take the :data:`GPU_RESOURCE` count out of a pod's ``amounts``.

    Parameters
    ----------
    doc : Document
        The document of the pod.
    path : tuple
        The pod's place in ``doc``, for errors.
    amounts : dict of str to Fraction
        As :func:`pod_amounts` returns; :data:`GPU_RESOURCE` is removed from it.

    Returns
    -------
    int
        The whole GPUs the pod asks for (0 for none).

    Raises
    ------
    InvalidInputError
        At ``path`` for more GPUs than placer takes in one pod.
    """
    gpus = int(amounts.pop(GPU_RESOURCE, 0))
    if gpus > MAX_GPUS:
        doc.fail(path, f"{gpus} {GPU_RESOURCE} in one pod, over placer's limit of {MAX_GPUS}")
    return gpus


def pod_resources(amounts: Mapping[str, Fraction]) -> dict[str, int]:
    """Every resource of a pod's ``amounts`` besides cpu and memory that it asks for, in
    whole units rounded up as ``Quantity.Value()`` (bytes for ephemeral-storage and huge
    pages, counts for extended resources): the ``resources`` of a placer pod.

    Parameters
    ----------
    amounts : Mapping of str to Fraction
        As :func:`pod_amounts` returns (after :func:`gpu_count` took the GPUs).

    Returns
    -------
    dict of str to int
    """
    return {
        k: math.ceil(v) for k, v in amounts.items() if k not in (CPU_RESOURCE, MEMORY_RESOURCE) and v > 0
    }


extended_resources = pod_resources
"""The former name of :func:`pod_resources` (it read extended resources only)."""


def node_resource_units(name: str) -> Any:
    """The reader of a node's capacity or allocatable quantity of resource ``name`` for its
    ``resources`` (:func:`count` for an extended resource, :func:`whole_units` else), or
    None for cpu, memory and pods, which are node fields of their own."""
    if name in (CPU_RESOURCE, MEMORY_RESOURCE, PODS_RESOURCE):
        return None
    return count if "/" in name else whole_units


def cpu_memory(amounts: Mapping[str, Fraction], *, round_up: bool) -> dict[str, int]:
    """``cpuMilli`` (rounded up) and ``memoryMiB`` (rounded down, up with ``round_up``) of
    a pod's amounts, each only when the pod asks for some.

    Parameters
    ----------
    amounts : Mapping of str to Fraction
        As :func:`pod_amounts` returns.
    round_up : bool
        Round memory up (a request) rather than down.

    Returns
    -------
    dict of str to int
        ``{"cpuMilli": ..., "memoryMiB": ...}``, keys left out for zero.
    """
    out: dict[str, int] = {}
    cpu = amounts.get(CPU_RESOURCE)
    if cpu:
        out["cpuMilli"] = math.ceil(cpu * 1000)
    mem = amounts.get(MEMORY_RESOURCE)
    if mem:
        out["memoryMiB"] = math.ceil(mem / _MIB) if round_up else math.floor(mem / _MIB)
    return out
