"""Every user-facing input check of placer.

Each check raises :class:`placer.exceptions.InvalidInputError` with ``where`` a JSON path
(``nodes[3].pods[0].gpus[1]``) or ``file:line``, and ``what`` naming the expectation and
what came instead. Unknown keys are ignored (forward compatibility); ``null`` is the same
as an absent key. Paths are built only when an error is raised: nested checks raise with a
path relative to their own object and callers put their prefix in front on the way out.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterable, NoReturn, TypeVar, Union

import yaml

from placer import policies
from placer._io import read_text
from placer.exceptions import InvalidInputError
from placer.topology import Nic, nics_from_spec, topology_from_spec
from placer.model import (
    API_VERSION,
    GANG_MODES,
    SOLVERS,
    TAINT_EFFECTS,
    Assignment,
    ClusterSnapshot,
    GangResult,
    GangSpec,
    Node,
    NodeType,
    PlacementRequest,
    PlacementResult,
    PodRequest,
    ResourceAmount,
    RunningPod,
    SliceSpec,
    Taint,
    Toleration,
    Unschedulable,
)

__all__ = [
    "MAX_GPUS",
    "MAX_SLICES",
    "SEED_MAX",
    "RESULT_SOLVERS",
    "RESULT_STATUSES",
    "load_document",
    "snapshot_from_dict",
    "request_from_dict",
    "result_from_dict",
    "coerce_snapshot",
    "coerce_request",
    "coerce_result",
    "check_request_against_snapshot",
    "check_policy",
    "check_gpu_request",
    "check_seed",
    "check_solver",
    "check_time_limit",
]

MAX_GPUS = 64
MAX_SLICES = 3
MILLI = 1000
SEED_MAX = 2**64 - 1
RESULT_SOLVERS = ("greedy", "cp-sat")
RESULT_STATUSES = ("optimal", "feasible", "infeasible", "unknown")
DEFAULT_GPU_MODEL = "gpu"
OPERATORS = ("Equal", "Exists")

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MISSING: Any = object()
_HW_KEY_SET = frozenset(
    ("gpuModel", "gpus", "gpuMemoryMiB", "cpuMilli", "memoryMiB", "maxPods", "gpuTopology", "nics")
)
_HW_INT_KEYS = frozenset(("gpus", "gpuMemoryMiB", "cpuMilli", "memoryMiB", "maxPods"))
_EMPTY_HW = NodeType()

PathLike = Union[str, "os.PathLike[str]"]
_T = TypeVar("_T")


# ----------------------------------------------------------------------------- messages


def _got(v: Any) -> str:
    if v is _MISSING or v is None:
        return "nothing" if v is _MISSING else "null"
    if v is True or v is False:
        return f"{str(v).lower()} (a boolean)"
    if isinstance(v, int):
        text = str(v)
        return text if len(text) <= 40 else f"{text[:20]}... (an integer of {len(text)} digits)"
    if isinstance(v, float):
        return f"{v!r} (a float)"
    if isinstance(v, str):
        if not v:
            return "an empty string"
        return f"{v[:60]!r}... (a string)" if len(v) > 60 else f"{v!r} (a string)"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        return "a list"
    return f"a {type(v).__name__}"


def _int_desc(lo: int | None, hi: int | None) -> str:
    if lo is None:
        return "an integer" if hi is None else f"an integer <= {hi}"
    if hi is None:
        return f"an integer >= {lo}"
    return f"an integer in {lo}..{hi}"


def _bad(where: str, expected: str, v: Any) -> InvalidInputError:
    return InvalidInputError(where, f"expected {expected}, got {_got(v)}")


def _one_of(choices: Iterable[str]) -> str:
    return "one of " + ", ".join(choices)


def _listing(names: Iterable[str], limit: int = 12) -> str:
    names = list(names)
    if not names:
        return "(none)"
    text = ", ".join(names[:limit])
    return text + f", ... ({len(names)} in all)" if len(names) > limit else text


def _nest(e: InvalidInputError, prefix: str) -> InvalidInputError:
    w = e.where
    if not w:
        where = prefix
    elif w[0] == "[":
        where = prefix + w
    else:
        where = prefix + "." + w
    return InvalidInputError(where, e.what)


class _GcPaused:
    """Pause the cyclic GC while building large acyclic structures (halves the time)."""

    __slots__ = ("was_enabled",)

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


_NODE_FIELDS = (
    "name",
    "hardware",
    "type",
    "overrides",
    "topology",
    "labels",
    "taints",
    "unschedulable",
    "unhealthy_gpus",
    "pods",
    "resources",
)
_POD_FIELDS = (
    "name",
    "gpus",
    "gpu_shares",
    "gpu_memory_mib",
    "cpu_milli",
    "memory_mib",
    "priority",
    "gpu_indices_known",
    "resources",
)


def _fast_constructor(cls: type[_T], names: tuple[str, ...]) -> Callable[..., _T]:
    """A constructor of ``cls`` taking every field positionally, in ``names`` order.

    Frozen dataclasses set each field through ``object.__setattr__``, a third of the
    time it takes to build a 100,000-node snapshot; this one sets the slots directly. If
    ``names`` no longer are ``cls``'s fields, or ``cls`` has a ``__post_init__``, it falls
    back to a plain keyword call.
    """
    if tuple(f.name for f in dataclasses.fields(cls)) != names or hasattr(cls, "__post_init__"):
        return lambda *args: cls(**dict(zip(names, args)))
    setters = tuple(getattr(cls, n).__set__ for n in names)
    new = object.__new__

    def make(*args: Any) -> _T:
        o = new(cls)
        for set_, v in zip(setters, args):
            set_(o, v)
        return o

    return make


_make_node = _fast_constructor(Node, _NODE_FIELDS)
_make_pod = _fast_constructor(RunningPod, _POD_FIELDS)


def _key(k: Any) -> str:
    return k if isinstance(k, str) else repr(k)


# ----------------------------------------------------------------------------- field readers
# Each reads ``d[key]`` (absent or null: the default) and raises with ``where == key``.


def _is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, Mapping)


def _is_list(v: Any) -> bool:
    return type(v) is list or isinstance(v, (list, tuple))


def _need_map(v: Any, where: str, what: str = "a mapping") -> Mapping[Any, Any]:
    if not _is_map(v):
        raise _bad(where, what, v)
    return v


def _need_list(v: Any, where: str, what: str = "a list") -> list[Any] | tuple[Any, ...]:
    if not _is_list(v):
        raise _bad(where, what, v)
    return v


def _int(
    d: Mapping[str, Any], key: str, default: Any = 0, lo: int | None = 0, hi: int | None = None
) -> Any:
    v = d.get(key)
    if v is None:
        return default
    if type(v) is int and (lo is None or v >= lo) and (hi is None or v <= hi):
        return v
    raise _bad(key, _int_desc(lo, hi), v)


def _str(
    d: Mapping[str, Any],
    key: str,
    default: Any = _MISSING,
    choices: tuple[str, ...] | None = None,
    empty: bool = False,
) -> Any:
    v = d.get(key)
    if v is None:
        if default is _MISSING:
            raise _bad(key, _one_of(choices) if choices else "a non-empty string", _MISSING)
        return default
    if type(v) is str and (v or empty):
        if choices is None or v in choices:
            return v
        raise _bad(key, _one_of(choices), v)
    raise _bad(
        key, _one_of(choices) if choices else ("a string" if empty else "a non-empty string"), v
    )


def _bool(d: Mapping[str, Any], key: str, default: bool) -> bool:
    v = d.get(key)
    if v is None:
        return default
    if v is True or v is False:
        return v
    raise _bad(key, "true or false", v)


def _finite(v: Any) -> float | None:
    """``v`` as a float if it is a finite int or float (not a bool), else None."""
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            return None
    if type(v) is float and math.isfinite(v):
        return v
    return None


def _positive_number(v: Any, where: str) -> float:
    x = _finite(v)
    if x is None or x <= 0:
        raise _bad(where, "a finite number > 0", v)
    return x


def _number(d: Mapping[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    x = _finite(v)
    if x is None:
        raise _bad(key, "a finite number", v)
    return x


def _str_map(v: Any, where: str, empty_values: bool = True) -> dict[str, str]:
    if v is None:
        return {}
    if not _is_map(v):
        raise _bad(where, "a mapping of strings to strings", v)
    for k, x in v.items():
        if type(k) is not str or not k:
            raise _bad(where, "non-empty string keys", k)
        if type(x) is not str or not (x or empty_values):
            raise _bad(f"{where}.{k}", "a string" if empty_values else "a non-empty string", x)
    return dict(v)


def _str_list(v: Any, where: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not _is_list(v):
        raise _bad(where, "a list of strings", v)
    for j, x in enumerate(v):
        if type(x) is not str or not x:
            raise _bad(f"{where}[{j}]", "a non-empty string", x)
    return tuple(v)


def _header(data: Any, kind: str) -> None:
    if not _is_map(data):
        raise _bad("", f"a {kind} mapping", data)
    v = data.get("apiVersion", _MISSING)
    if type(v) is not str or v != API_VERSION:
        raise _bad("apiVersion", repr(API_VERSION), v)
    v = data.get("kind", _MISSING)
    if type(v) is not str or v != kind:
        raise _bad("kind", repr(kind), v)


def _items(raw: Mapping[str, Any], key: str, build: Callable[[Any], _T]) -> list[_T]:
    """The mappings of the optional list ``raw[key]``, each built with ``build``."""
    v = raw.get(key)
    if v is None:
        return []
    if not _is_list(v):
        raise _bad(key, "a list", v)
    out = []
    for j, x in enumerate(v):
        try:
            if not _is_map(x):
                raise _bad("", "a mapping", x)
            out.append(build(x))
        except InvalidInputError as e:
            raise _nest(e, f"{key}[{j}]") from None
    return out


# ----------------------------------------------------------------------------- public checks


def check_policy(name: Any, where: str = "policy") -> str:
    """Return ``name`` if it is a placement policy (:func:`placer.policies.get`).

    Parameters
    ----------
    name : Any
        The policy name (a key of :data:`placer.policies.REGISTRY`).
    where : str
        Location reported on error (a JSON path or a command-line option).

    Returns
    -------
    str
        ``name``.

    Raises
    ------
    InvalidInputError
        If ``name`` is not a known policy.
    """
    return policies.get(name, where).name


def check_solver(name: Any, where: str = "solver") -> str:
    """Return ``name`` if it is a solver choice (one of :data:`placer.model.SOLVERS`).

    Raises
    ------
    InvalidInputError
        If ``name`` is not ``auto``, ``greedy`` or ``exact``.
    """
    if type(name) is str and name in SOLVERS:
        return name
    raise _bad(where, _one_of(SOLVERS), name)


def check_seed(value: Any, where: str = "seed") -> int:
    """Return a random seed as an int in ``0 .. 2**64-1``.

    Parameters
    ----------
    value : int or str
        The seed; a string of decimal digits (from the command line) is accepted.
    where : str
        Location reported on error.

    Raises
    ------
    InvalidInputError
        If ``value`` is not an integer in range (booleans and floats are refused).
    """
    v = value
    if type(v) is str and v.isascii() and v.isdigit():
        v = int(v)
    if type(v) is int and 0 <= v <= SEED_MAX:
        return v
    raise _bad(where, _int_desc(0, SEED_MAX), value)


def check_gpu_request(
    n_gpus: int, available: Any, size: Any, required: Any, objective: Any
) -> tuple[int, int]:
    """Check the arguments of a GPU-set choice on a node of ``n_gpus`` GPUs.

    Returns
    -------
    (int, int)
        The available and the required GPUs as bitmasks.

    Raises
    ------
    InvalidInputError
        Naming ``available``, ``size``, ``required`` or ``objective``: an index out of
        range or repeated, a required GPU that is not available, more required GPUs than
        ``size``, or fewer available GPUs than ``size``.
    """
    if objective != "tiling" and objective != "best-set":
        raise _bad("objective", '"tiling" or "best-set"', objective)
    if type(size) is not int or size < 1:
        raise _bad("size", "an integer >= 1", size)
    free, n_free = _gpu_mask(available, "available", n_gpus)
    need, n_need = _gpu_mask(required, "required", n_gpus) if required else (0, 0)
    if need & ~free:
        missing = [i for i in range(n_gpus) if (need & ~free) >> i & 1]
        raise InvalidInputError("required", f"GPU(s) {missing} are required but not available")
    if n_need > size:
        raise InvalidInputError("required", f"{n_need} GPUs are required, more than size {size}")
    if n_free < size:
        raise InvalidInputError("available", f"{n_free} GPU(s) available, fewer than size {size}")
    return free, need


def _gpu_mask(values: Any, name: str, n_gpus: int) -> tuple[int, int]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise _bad(name, "a list of GPU indices", values)
    mask = 0
    count = 0
    for j, i in enumerate(values):
        if type(i) is not int or not 0 <= i < n_gpus:
            raise _bad(f"{name}[{j}]", f"a GPU index in 0..{n_gpus - 1}", i)
        bit = 1 << i
        if mask & bit:
            raise InvalidInputError(f"{name}[{j}]", f"GPU {i} is listed twice")
        mask |= bit
        count += 1
    return mask, count


def check_time_limit(value: Any, where: str = "timeLimitS") -> float:
    """Return a solver time limit in seconds (a finite number > 0) as a float.

    Raises
    ------
    InvalidInputError
        If ``value`` is not a finite positive int or float.
    """
    if type(value) is str:
        try:
            value = float(value)
        except ValueError:
            pass
    return _positive_number(value, where)


# ----------------------------------------------------------------------------- files


def _parse_json(text: str, name: str) -> Any:
    try:
        with _GcPaused():
            return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(
            f"{name}:{e.lineno}", f"invalid JSON: {e.msg} (column {e.colno})"
        ) from None
    except RecursionError:
        raise InvalidInputError(name, "invalid JSON: nested too deeply") from None


def _parse_yaml(text: str, name: str) -> Any:
    try:
        with _GcPaused():
            return yaml.load(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = e.problem or e.context or "unparseable"
        raise InvalidInputError(f"{name}:{line}", f"invalid YAML: {problem}") from None
    except yaml.YAMLError as e:
        pos = getattr(e, "position", None)
        line = text.count("\n", 0, pos) + 1 if isinstance(pos, int) else 1
        raise InvalidInputError(f"{name}:{line}", f"invalid YAML: {e}") from None
    except RecursionError:
        raise InvalidInputError(name, "invalid YAML: nested too deeply") from None


def load_document(path: PathLike) -> Any:
    """Read a JSON or YAML document whose top level is a mapping.

    The format follows the extension (``.json``; ``.yaml``/``.yml``); any other extension
    is tried as JSON, then as YAML.

    Parameters
    ----------
    path : str or os.PathLike
        The file to read.

    Returns
    -------
    Mapping
        The parsed document.

    Raises
    ------
    InvalidInputError
        If the file is missing or unreadable (``where`` is the file name), empty or
        unparseable (``where`` is ``file:line``), or its top level is not a mapping.
    """
    name = os.fspath(path)
    p = Path(name)
    text = read_text(name)
    if not text.strip():
        raise InvalidInputError(f"{name}:1", "empty file, expected a JSON or YAML document")
    ext = p.suffix.lower()
    if ext == ".json":
        doc = _parse_json(text, name)
    elif ext in (".yaml", ".yml"):
        doc = _parse_yaml(text, name)
    else:
        try:
            doc = _parse_json(text, name)
        except InvalidInputError as json_error:
            try:
                doc = _parse_yaml(text, name)
            except InvalidInputError as yaml_error:
                raise (json_error if text.lstrip()[0] in "{[" else yaml_error) from None
    if doc is None:
        raise InvalidInputError(f"{name}:1", "empty document, expected a mapping")
    if not _is_map(doc):
        raise _bad(name, "a mapping at the top level", doc)
    return doc


def _coerce(source: Any, cls: type[_T], build: Callable[[Any], _T]) -> _T:
    if isinstance(source, cls):
        return source
    if isinstance(source, Mapping):
        return build(source)
    if isinstance(source, (str, os.PathLike)):
        doc = load_document(source)
        try:
            return build(doc)
        except InvalidInputError as e:
            raise e.within(os.fspath(source)) from None
    raise TypeError(
        f"expected a {cls.__name__}, a mapping or a file path, got {type(source).__name__}"
    )


def coerce_snapshot(source: Any) -> ClusterSnapshot:
    """Return a ClusterSnapshot from a ClusterSnapshot (as is), a mapping or a JSON/YAML path.

    Raises
    ------
    InvalidInputError
        If the document is invalid; errors from a file have its name before the path.
    TypeError
        If ``source`` is none of the accepted types.
    """
    return _coerce(source, ClusterSnapshot, snapshot_from_dict)


def coerce_request(source: Any) -> PlacementRequest:
    """Return a PlacementRequest from a PlacementRequest, a mapping or a JSON/YAML path.

    Raises
    ------
    InvalidInputError
        If the document is invalid; errors from a file have its name before the path.
    TypeError
        If ``source`` is none of the accepted types.
    """
    return _coerce(source, PlacementRequest, request_from_dict)


def coerce_result(source: Any) -> PlacementResult:
    """Return a PlacementResult from a PlacementResult, a mapping or a JSON/YAML path.

    Raises
    ------
    InvalidInputError
        If the document is invalid; errors from a file have its name before the path.
    TypeError
        If ``source`` is none of the accepted types.
    """
    return _coerce(source, PlacementResult, result_from_dict)


# ----------------------------------------------------------------------------- snapshot


def _hardware_fields(d: Mapping[str, Any]) -> dict[str, Any]:
    """The hardware fields (node type keys) given in ``d``, validated; nulls left out."""
    given: dict[str, Any] = {}
    for key, v in d.items():
        if v is None or key not in _HW_KEY_SET:
            continue
        if key in _HW_INT_KEYS:
            if type(v) is not int or v < 0 or (key == "gpus" and v > MAX_GPUS):
                raise _bad(key, _int_desc(0, MAX_GPUS if key == "gpus" else None), v)
        elif key == "gpuModel":
            if type(v) is not str or not v:
                raise _bad(key, "a non-empty string", v)
        elif key == "gpuTopology":
            v = dict(_need_map(v, key))
        else:
            _need_list(v, key, "a list of mappings")
            for j, n in enumerate(v):
                _need_map(n, f"{key}[{j}]")
            v = [dict(n) for n in v]
        given[key] = v
    return given


def _merge_hardware(base: NodeType, given: Mapping[str, Any]) -> NodeType:
    """``base`` with the hardware fields ``given`` (camelCase, validated) laid over it."""
    gpus = given.get("gpus", base.gpus)
    model = given.get("gpuModel", base.gpu_model)
    if model is None and gpus > 0:
        model = DEFAULT_GPU_MODEL
    return NodeType(
        gpus=gpus,
        gpu_model=model,
        gpu_memory_mib=given.get("gpuMemoryMiB", base.gpu_memory_mib),
        cpu_milli=given.get("cpuMilli", base.cpu_milli),
        memory_mib=given.get("memoryMiB", base.memory_mib),
        max_pods=given.get("maxPods", base.max_pods),
        gpu_topology=topology_from_spec(
            given["gpuTopology"] if "gpuTopology" in given else base.gpu_topology, gpus
        ),
        nics=_nics(given["nics"] if "nics" in given else base.nics, gpus),
    )


def _nics(v: Any, gpus: int) -> tuple[Nic, ...] | None:
    if v is None:
        return None
    if isinstance(v, tuple):
        if any(len(nic.labels) != gpus for nic in v):
            raise InvalidInputError("nics", f"the NICs describe links to a node of another GPU count than {gpus}")
        return v
    return nics_from_spec(v, gpus)


def _topology_levels(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    _need_list(v, "topologyLevels", "a list of level names")
    seen: dict[str, int] = {}
    for j, x in enumerate(v):
        where = f"topologyLevels[{j}]"
        if type(x) is not str or not x:
            raise _bad(where, "a non-empty string", x)
        if x == "node":
            raise InvalidInputError(
                where, "'node' is implicit (always the innermost level); leave it out"
            )
        if x in seen:
            raise InvalidInputError(
                where, f"duplicate level {x!r}, first at topologyLevels[{seen[x]}]"
            )
        seen[x] = j
    return tuple(v)


def _node_types(v: Any) -> dict[str, NodeType]:
    if v is None:
        return {}
    _need_map(v, "nodeTypes", "a mapping of type names to node types")
    types: dict[str, NodeType] = {}
    for name, t in v.items():
        if type(name) is not str or not name:
            raise _bad("nodeTypes", "non-empty string type names", name)
        try:
            _need_map(t, "")
            types[name] = _merge_hardware(_EMPTY_HW, _hardware_fields(t))
        except InvalidInputError as e:
            raise _nest(e, f"nodeTypes.{name}") from None
    return types


class _SnapshotState:
    __slots__ = ("types", "levels", "level_set", "pod_seen", "hw_cache", "taint_cache")

    def __init__(self, types: dict[str, NodeType], levels: tuple[str, ...]) -> None:
        self.types = types
        self.levels = levels
        self.level_set = frozenset(levels)
        self.pod_seen: dict[str, tuple[int, int]] = {}
        self.hw_cache: dict[Any, NodeType] = {}
        self.taint_cache: dict[tuple[str, str, str], Taint] = {}


def _gpu_index(v: Any, ngpus: int, where: str) -> NoReturn:
    """Raise for ``v`` not a GPU index of a node with ``ngpus`` GPUs (``v`` is known bad)."""
    if type(v) is not int:
        raise _bad(where, "a GPU index (an integer)", v)
    if ngpus == 0:
        raise InvalidInputError(where, f"GPU index {v} out of range: the node has no GPUs")
    raise InvalidInputError(where, f"GPU index {v} out of range 0..{ngpus - 1}")


def _share_key(k: Any, ngpus: int, where: str) -> int:
    if type(k) is int:
        idx = k
    elif type(k) is str and k.isascii() and k.isdigit():
        idx = int(k)
    else:
        raise _bad(where, "GPU index keys", k)
    if not 0 <= idx < ngpus:
        _gpu_index(idx, ngpus, where)
    return idx


def _taints(v: Any, cache: dict[tuple[str, str, str], Taint]) -> tuple[Taint, ...]:
    _need_list(v, "taints", "a list of taints")
    out = []
    for j, t in enumerate(v):
        try:
            _need_map(t, "")
            key = _str(t, "key")
            value = _str(t, "value", "", empty=True)
            effect = _str(t, "effect", choices=TAINT_EFFECTS)
        except InvalidInputError as e:
            raise _nest(e, f"taints[{j}]") from None
        k = (key, value, effect)
        taint = cache.get(k)
        if taint is None:
            taint = cache[k] = Taint(key=key, effect=effect, value=value)
        out.append(taint)
    return tuple(out)


def _running_pods(
    raw: Any, i: int, hw: NodeType, unhealthy: tuple[int, ...], pod_seen: dict[str, tuple[int, int]]
) -> tuple[RunningPod, ...]:
    _need_list(raw, "pods", "a list of pods")
    ngpus = hw.gpus
    cpu_cap = hw.cpu_milli
    mem_cap = hw.memory_mib
    gmem_cap = hw.gpu_memory_mib
    if hw.max_pods is not None and len(raw) > hw.max_pods:
        raise InvalidInputError("pods", f"{len(raw)} pods, over the node's maxPods {hw.max_pods}")
    whole: dict[int, str] = {}
    share: dict[int, int] = {}
    share_by: dict[int, str] = {}
    gmem: dict[int, int] = {}
    cpu_sum = mem_sum = 0
    out = []
    for j, p in enumerate(raw):
        try:
            if type(p) is not dict and not isinstance(p, Mapping):
                raise _bad("", "a mapping", p)
            name = p.get("name")
            if type(name) is not str or not name:
                raise _bad("name", "a non-empty string", name if name is not None else _MISSING)
            first = pod_seen.get(name)
            if first is not None:
                raise InvalidInputError(
                    "name",
                    f"duplicate pod name {name!r}, first at nodes[{first[0]}].pods[{first[1]}]",
                )
            pod_seen[name] = (i, j)

            g = p.get("gpus")
            gpus: tuple[int, ...] = ()
            if g is not None:
                if type(g) is not list and not isinstance(g, (list, tuple)):
                    raise _bad("gpus", "a list of GPU indices", g)
                for k, x in enumerate(g):
                    if type(x) is not int or not 0 <= x < ngpus:
                        _gpu_index(x, ngpus, f"gpus[{k}]")
                    if x in whole:
                        holder = whole[x]
                        raise InvalidInputError(
                            f"gpus[{k}]",
                            (
                                f"GPU {x} listed twice"
                                if holder == name
                                else f"GPU {x} is already held by pod {holder!r}"
                            ),
                        )
                    if x in share:
                        raise InvalidInputError(
                            f"gpus[{k}]", f"GPU {x} is already shared by pod {share_by[x]!r}"
                        )
                    if x in unhealthy:
                        raise InvalidInputError(
                            f"gpus[{k}]", f"GPU {x} is unhealthy and cannot be held"
                        )
                    whole[x] = name
                gpus = tuple(g)

            shares: dict[int, int] = {}
            s = p.get("gpuShares")
            if s is not None:
                if not _is_map(s):
                    raise _bad("gpuShares", "a mapping of GPU index to gpuMilli", s)
                for k, m in s.items():
                    where = f"gpuShares.{k}"
                    idx = _share_key(k, ngpus, where)
                    if type(m) is not int or not 1 <= m <= MILLI:
                        raise _bad(where, _int_desc(1, MILLI), m)
                    if idx in shares:
                        raise InvalidInputError(where, f"GPU {idx} listed twice")
                    if idx in whole:
                        raise InvalidInputError(
                            where, f"GPU {idx} is held whole by pod {whole[idx]!r}"
                        )
                    if idx in unhealthy:
                        raise InvalidInputError(where, f"GPU {idx} is unhealthy and cannot be held")
                    total = share.get(idx, 0) + m
                    if total > MILLI:
                        raise InvalidInputError(
                            where, f"GPU {idx} would hold {total} milli, over {MILLI}"
                        )
                    share[idx] = total
                    share_by.setdefault(idx, name)
                    shares[idx] = m

            mems: dict[int, int] = {}
            gm = p.get("gpuMemoryMiB")
            if gm is not None:
                if not _is_map(gm):
                    raise _bad("gpuMemoryMiB", "a mapping of GPU index to MiB", gm)
                for k, m in gm.items():
                    where = f"gpuMemoryMiB.{k}"
                    idx = _share_key(k, ngpus, where)
                    if type(m) is not int or m < 0:
                        raise _bad(where, "an integer >= 0", m)
                    if idx not in shares:
                        raise InvalidInputError(
                            where, f"GPU {idx} has no gpuShares entry in this pod"
                        )
                    if idx in mems:
                        raise InvalidInputError(where, f"GPU {idx} listed twice")
                    total = gmem.get(idx, 0) + m
                    if gmem_cap is not None and total > gmem_cap:
                        raise InvalidInputError(
                            where,
                            f"GPU {idx} would hold {total} MiB of GPU memory, over the node's gpuMemoryMiB {gmem_cap}",
                        )
                    gmem[idx] = total
                    mems[idx] = m

            c = p.get("cpuMilli")
            if c is None:
                c = 0
            elif type(c) is not int or c < 0:
                raise _bad("cpuMilli", "an integer >= 0", c)
            cpu_sum += c
            if cpu_cap is not None and cpu_sum > cpu_cap:
                raise InvalidInputError(
                    "cpuMilli",
                    f"the node's pods would hold {cpu_sum} cpuMilli, over its cpuMilli {cpu_cap}",
                )
            m = p.get("memoryMiB")
            if m is None:
                m = 0
            elif type(m) is not int or m < 0:
                raise _bad("memoryMiB", "an integer >= 0", m)
            mem_sum += m
            if mem_cap is not None and mem_sum > mem_cap:
                raise InvalidInputError(
                    "memoryMiB",
                    f"the node's pods would hold {mem_sum} memoryMiB, over its memoryMiB {mem_cap}",
                )
            prio = p.get("priority")
            if prio is None:
                prio = 0
            elif type(prio) is not int:
                raise _bad("priority", "an integer", prio)
            unknown = p.get("unknownGpus")
            if unknown is None:
                unknown = 0
            elif type(unknown) is not int or unknown < 0:
                raise _bad("unknownGpus", "an integer >= 0", unknown)
            res = _resource_counts(p.get("resources"), 0)
        except InvalidInputError as e:
            raise _nest(e, f"pods[{j}]") from None
        out.append([name, gpus, shares, mems, c, m, prio, unknown, res])
    taken = set(whole) | set(share) | set(unhealthy)
    spare = [g for g in range(ngpus - 1, -1, -1) if g not in taken]
    for j, row in enumerate(out):
        unknown = row[7]
        if unknown:
            if unknown > len(spare):
                raise InvalidInputError(
                    f"pods[{j}].unknownGpus",
                    f"{unknown} GPU(s) held, but only {len(spare)} healthy GPU(s) of the node are not "
                    "held by its other pods",
                )
            row[1], spare = tuple(sorted(spare[:unknown])), spare[unknown:]
        row[7] = not unknown
    return tuple(_make_pod(*row) for row in out)


def _resource_counts(raw: Any, least: int) -> dict[str, int]:
    """``{"nvidia.com/mig-1g.10gb": 1, ...}``: extended resource name to a count >= least."""
    if raw is None:
        return {}
    if not _is_map(raw):
        raise _bad("resources", "a mapping of resource name to count", raw)
    out = {}
    for k, v in raw.items():
        if type(k) is not str or not k:
            raise _bad("resources", "non-empty resource names", k)
        if type(v) is not int or v < least:
            raise _bad(f"resources.{k}", f"an integer >= {least}", v)
        out[k] = v
    return out


def _resource_amounts(raw: Any) -> dict[str, ResourceAmount]:
    """``{"nvidia.com/gpu": {"capacity": 8, "allocatable": 7}, ...}`` of a node."""
    if raw is None:
        return {}
    if not _is_map(raw):
        raise _bad("resources", "a mapping of resource name to {capacity, allocatable}", raw)
    out = {}
    for k, v in raw.items():
        if type(k) is not str or not k:
            raise _bad("resources", "non-empty resource names", k)
        if not _is_map(v):
            raise _bad(f"resources.{k}", "a mapping with capacity and allocatable", v)
        counts = []
        for field_name in ("capacity", "allocatable"):
            x = v.get(field_name)
            if type(x) is not int or x < 0:
                raise _bad(f"resources.{k}.{field_name}", "an integer >= 0", x if x is not None else _MISSING)
            counts.append(x)
        unknown = set(v) - {"capacity", "allocatable"}
        if unknown:
            raise InvalidInputError(f"resources.{k}", f"unknown field(s) {sorted(unknown)}")
        out[k] = ResourceAmount(counts[0], counts[1])
    return out


def _node(d: Any, i: int, st: _SnapshotState) -> Node:
    if type(d) is not dict and not isinstance(d, Mapping):
        raise _bad("", "a node mapping", d)
    name = d.get("name")
    if type(name) is not str or not name:
        raise _bad("name", "a non-empty string", name if name is not None else _MISSING)

    tname = d.get("type")
    if tname is None:
        hw = _EMPTY_HW
    else:
        hw = st.types.get(tname) if type(tname) is str else None
        if hw is None:
            if type(tname) is not str:
                raise _bad("type", "a node type name (a string)", tname)
            raise InvalidInputError(
                "type", f"unknown node type {tname!r}; nodeTypes has: {_listing(st.types)}"
            )
    overrides: dict[str, Any] = {}
    if not _HW_KEY_SET.isdisjoint(d):
        overrides = _hardware_fields(d)
        if overrides:
            if "gpuTopology" in overrides or "nics" in overrides:
                hw = _merge_hardware(hw, overrides)
            else:
                ck = (tname, *overrides.items())
                cached = st.hw_cache.get(ck)
                if cached is None:
                    cached = st.hw_cache[ck] = _merge_hardware(hw, overrides)
                hw = cached

    t = d.get("topology")
    if t is None:
        topology: dict[str, str] = {}
    else:
        if type(t) is not dict and not isinstance(t, Mapping):
            raise _bad("topology", "a mapping of level to domain name", t)
        level_set = st.level_set
        for k, v in t.items():
            if k not in level_set:
                raise InvalidInputError(
                    f"topology.{_key(k)}",
                    f"unknown topology level {k!r}; topologyLevels is: {_listing(st.levels)}",
                )
            if type(v) is not str or not v:
                raise _bad(f"topology.{k}", "a non-empty domain name", v)
        topology = dict(t)

    lb = d.get("labels")
    if lb is None:
        labels: dict[str, str] = {}
    else:
        if type(lb) is not dict and not isinstance(lb, Mapping):
            raise _bad("labels", "a mapping of strings to strings", lb)
        for k, v in lb.items():
            if type(k) is not str or not k:
                raise _bad("labels", "non-empty string keys", k)
            if type(v) is not str:
                raise _bad(f"labels.{k}", "a string", v)
        labels = dict(lb)

    tt = d.get("taints")
    taints = () if tt is None else _taints(tt, st.taint_cache)

    u = d.get("unschedulable")
    if u is None:
        u = False
    elif u is not True and u is not False:
        raise _bad("unschedulable", "true or false", u)

    uh = d.get("unhealthyGpus")
    unhealthy: tuple[int, ...] = ()
    if uh is not None:
        _need_list(uh, "unhealthyGpus", "a list of GPU indices")
        ngpus = hw.gpus
        seen: set[int] = set()
        for k, x in enumerate(uh):
            if type(x) is not int or not 0 <= x < ngpus:
                _gpu_index(x, ngpus, f"unhealthyGpus[{k}]")
            if x in seen:
                raise InvalidInputError(f"unhealthyGpus[{k}]", f"GPU {x} listed twice")
            seen.add(x)
        unhealthy = tuple(uh)

    pr = d.get("pods")
    pods = _running_pods(pr, i, hw, unhealthy, st.pod_seen) if pr is not None else ()
    resources = _resource_amounts(d.get("resources"))

    return _make_node(name, hw, tname, overrides, topology, labels, taints, u, unhealthy, pods, resources)


def snapshot_from_dict(data: Mapping[str, Any]) -> ClusterSnapshot:
    """Validate a ClusterSnapshot document (SPEC §1) and build it.

    Parameters
    ----------
    data : Mapping
        The parsed document.

    Returns
    -------
    ClusterSnapshot

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault.
    """
    _header(data, "ClusterSnapshot")
    levels = _topology_levels(data.get("topologyLevels"))
    st = _SnapshotState(_node_types(data.get("nodeTypes")), levels)
    raw = data.get("nodes")
    if raw is None:
        raise _bad("nodes", "a list of nodes", _MISSING)
    _need_list(raw, "nodes", "a list of nodes")
    nodes = []
    first_index: dict[str, int] = {}
    with _GcPaused():
        for i, d in enumerate(raw):
            try:
                node = _node(d, i, st)
            except InvalidInputError as e:
                raise _nest(e, f"nodes[{i}]") from None
            first = first_index.setdefault(node.name, i)
            if first != i:
                raise InvalidInputError(
                    f"nodes[{i}].name",
                    f"duplicate node name {node.name!r}, first at nodes[{first}]",
                )
            nodes.append(node)
    return ClusterSnapshot(nodes=tuple(nodes), node_types=st.types, topology_levels=levels)


# ----------------------------------------------------------------------------- request


def _toleration(t: Mapping[str, Any]) -> Toleration:
    key = _str(t, "key", "", empty=True)
    op = _str(t, "operator", "Equal", choices=OPERATORS)
    value = _str(t, "value", "", empty=True)
    effect = _str(t, "effect", "", choices=("",) + TAINT_EFFECTS)
    if op == "Exists" and value:
        raise InvalidInputError("value", f"operator Exists takes no value, got {value!r}")
    if op == "Equal" and not key:
        raise InvalidInputError("key", "an empty key (every taint) needs operator Exists")
    return Toleration(key=key, operator=op, value=value, effect=effect)


def _pod_request(p: Mapping[str, Any], gangs: Mapping[str, Any]) -> list[PodRequest]:
    if not _is_map(p):
        raise _bad("", "a pod mapping", p)
    name = _str(p, "name")
    replicas = _int(p, "replicas", None, 1)
    gpus = _int(p, "gpus", 0, 0, MAX_GPUS)
    gpu_milli = _int(p, "gpuMilli", MILLI, 1, MILLI)
    if gpu_milli < MILLI and gpus != 1:
        raise InvalidInputError(
            "gpuMilli", f"gpuMilli below {MILLI} (a shared GPU) needs gpus: 1, got gpus: {gpus}"
        )
    tol = p.get("tolerations")
    tolerations: tuple[Toleration, ...] = ()
    if tol is not None:
        _need_list(tol, "tolerations", "a list of tolerations")
        out = []
        for j, t in enumerate(tol):
            try:
                _need_map(t, "")
                out.append(_toleration(t))
            except InvalidInputError as e:
                raise _nest(e, f"tolerations[{j}]") from None
        tolerations = tuple(out)
    gang = p.get("gang")
    if gang is not None:
        if type(gang) is not str or not gang:
            raise _bad("gang", "a gang name (a non-empty string)", gang)
        if gang not in gangs:
            raise InvalidInputError("gang", f"unknown gang {gang!r}; gangs has: {_listing(gangs)}")
    fields = dict(
        gpus=gpus,
        gpu_milli=gpu_milli,
        gpu_memory_mib=_int(p, "gpuMemoryMiB"),
        gpu_models=_str_list(p.get("gpuModels"), "gpuModels"),
        cpu_milli=_int(p, "cpuMilli"),
        memory_mib=_int(p, "memoryMiB"),
        node_selector=_str_map(p.get("nodeSelector"), "nodeSelector"),
        tolerations=tolerations,
        priority=_int(p, "priority", 0, None),
        gang=gang,
        nics=_int(p, "nics"),
        resources=_resource_counts(p.get("resources"), 1),
    )
    if replicas is None:
        return [PodRequest(name=name, **fields)]
    return [
        PodRequest(
            name=f"{name}-{r}",
            **{**fields, "node_selector": dict(fields["node_selector"]), "resources": dict(fields["resources"])},
        )
        for r in range(replicas)
    ]


def _gang_spec(name: str, g: Mapping[str, Any]) -> GangSpec:
    topo = g.get("topology")
    mode, level = "unconstrained", None
    if topo is not None:
        try:
            _need_map(topo, "")
            mode = _str(topo, "mode", "unconstrained", choices=GANG_MODES)
            level = _str(topo, "level", None)
            if level is None and mode != "unconstrained":
                raise InvalidInputError(
                    "level", f"mode {mode!r} needs a level (a topology level name), got nothing"
                )
        except InvalidInputError as e:
            raise _nest(e, "topology") from None
    slices: list[SliceSpec] = []
    raw = g.get("slices")
    if raw is not None:
        _need_list(raw, "slices", "a list of slices")
        if len(raw) > MAX_SLICES:
            raise InvalidInputError(
                "slices", f"expected at most {MAX_SLICES} slice layers, got {len(raw)}"
            )
        for k, s in enumerate(raw):
            try:
                _need_map(s, "")
                slice_level = _str(s, "level")
                size = _int(s, "size", _MISSING, 1)
                if size is _MISSING:
                    raise _bad("size", "an integer >= 1", _MISSING)
                sl = SliceSpec(level=slice_level, size=size)
                if slices and slices[-1].size % sl.size:
                    raise InvalidInputError(
                        "size",
                        f"size {sl.size} does not divide the enclosing slice's size {slices[-1].size} (slices[{k - 1}])",
                    )
            except InvalidInputError as e:
                raise _nest(e, f"slices[{k}]") from None
            slices.append(sl)
    solver = g.get("solver")
    if solver is not None:
        check_solver(solver, "solver")
    tl = g.get("timeLimitS")
    return GangSpec(
        name=name,
        mode=mode,
        level=level,
        slices=tuple(slices),
        same_gpu_model=_bool(g, "sameGpuModel", True),
        solver=solver,
        time_limit_s=None if tl is None else _positive_number(tl, "timeLimitS"),
    )


def request_from_dict(data: Mapping[str, Any]) -> PlacementRequest:
    """Validate a PlacementRequest document (SPEC §2) and build it, expanding ``replicas``.

    Parameters
    ----------
    data : Mapping
        The parsed document.

    Returns
    -------
    PlacementRequest

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault (``pods[i]`` indexes the document's list).
    """
    _header(data, "PlacementRequest")
    v = data.get("policy")
    policy = "best-fit" if v is None else check_policy(v, "policy")
    seed = _int(data, "seed", 0, 0, SEED_MAX)
    v = data.get("solver")
    solver = "auto" if v is None else check_solver(v, "solver")
    v = data.get("timeLimitS")
    time_limit = 10.0 if v is None else _positive_number(v, "timeLimitS")

    raw_gangs = data.get("gangs")
    gangs: dict[str, GangSpec] = {}
    if raw_gangs is not None:
        _need_map(raw_gangs, "gangs", "a mapping of gang names to gangs")
        for name, g in raw_gangs.items():
            if type(name) is not str or not name:
                raise _bad("gangs", "non-empty string gang names", name)
            try:
                _need_map(g, "")
                gangs[name] = _gang_spec(name, g)
            except InvalidInputError as e:
                raise _nest(e, f"gangs.{name}") from None

    raw = data.get("pods")
    if raw is None:
        raise _bad("pods", "a list of pods", _MISSING)
    _need_list(raw, "pods", "a list of pods")
    pods: list[PodRequest] = []
    first_index: dict[str, int] = {}
    gang_size = dict.fromkeys(gangs, 0)
    with _GcPaused():
        for i, p in enumerate(raw):
            try:
                made = _pod_request(p, gangs)
            except InvalidInputError as e:
                raise _nest(e, f"pods[{i}]") from None
            for pod in made:
                first = first_index.setdefault(pod.name, i)
                if first != i:
                    raise InvalidInputError(
                        f"pods[{i}].name",
                        f"duplicate pod name {pod.name!r}, first at pods[{first}]",
                    )
                pods.append(pod)
                if pod.gang is not None:
                    gang_size[pod.gang] += 1

    for name, spec in gangs.items():
        n = gang_size[name]
        if n == 0:
            raise InvalidInputError(
                f"gangs.{name}", "the gang has no pods (no pod names it in `gang`)"
            )
        if spec.slices and n % spec.slices[0].size:
            raise InvalidInputError(
                f"gangs.{name}.slices[0].size",
                f"the gang has {n} pod(s), not a multiple of the outermost slice size {spec.slices[0].size}",
            )
    return PlacementRequest(
        pods=tuple(pods),
        gangs=gangs,
        policy=policy,
        seed=seed,
        solver=solver,
        time_limit_s=time_limit,
    )


def snapshot_gpu_models(snapshot: ClusterSnapshot) -> frozenset[str]:
    """The GPU models of the snapshot's nodes that have GPUs."""
    return frozenset(n.hardware.gpu_model for n in snapshot.nodes if n.hardware.gpus > 0 and n.hardware.gpu_model)


def check_request_against_snapshot(
    request: PlacementRequest, snapshot: ClusterSnapshot, gpu_models: frozenset[str] | None = None
) -> None:
    """Cross-check a request against the snapshot it is placed on.

    Checks that every ``gpuModels`` entry names a GPU model some node of the snapshot has,
    that no gang pod asks for extended ``resources`` (not placed in gangs yet), and that every gang's ``topology.level`` and slice level is a level of the snapshot
    (``topologyLevels`` or ``node``), slices going strictly inward.

    Parameters
    ----------
    request : PlacementRequest
    snapshot : ClusterSnapshot
    gpu_models : frozenset of str, optional
        The snapshot's GPU models (:func:`snapshot_gpu_models`), when already known.

    Raises
    ------
    InvalidInputError
        At ``pods[i].gpuModels[j]``, ``pods[i].resources`` (``i`` indexes the request's pods after ``replicas``
        expansion), ``gangs.<name>.topology.level`` or ``gangs.<name>.slices[k].level``.
    """
    models = snapshot_gpu_models(snapshot) if gpu_models is None else gpu_models
    for i, pod in enumerate(request.pods):
        if pod.resources and pod.gang is not None:
            raise InvalidInputError(
                f"pods[{i}].resources",
                f"pod {pod.name!r} of gang {pod.gang!r} asks for extended resources; gangs of such pods "
                "are not placed yet",
            )
        for j, m in enumerate(pod.gpu_models):
            if m not in models:
                raise InvalidInputError(
                    f"pods[{i}].gpuModels[{j}]",
                    f"unknown GPU model {m!r} (pod {pod.name!r}); the snapshot has: {_listing(sorted(models))}",
                )
    order = {lv: k for k, lv in enumerate((*snapshot.topology_levels, "node"))}
    known = _listing(order)
    for name, g in request.gangs.items():
        if g.level is not None and g.level not in order:
            raise InvalidInputError(
                f"gangs.{name}.topology.level",
                f"unknown topology level {g.level!r}; the snapshot has: {known}",
            )
        prev = -1
        for k, s in enumerate(g.slices):
            where = f"gangs.{name}.slices[{k}].level"
            if s.level not in order:
                raise InvalidInputError(
                    where, f"unknown topology level {s.level!r}; the snapshot has: {known}"
                )
            if order[s.level] <= prev:
                raise InvalidInputError(
                    where,
                    f"slice level {s.level!r} is not inside the enclosing slice's level "
                    f"{g.slices[k - 1].level!r}; slices go outermost first",
                )
            prev = order[s.level]


# ----------------------------------------------------------------------------- result


def _assignment(a: Mapping[str, Any]) -> Assignment:
    gpus = a.get("gpus")
    if gpus is None:
        gpus = ()
    else:
        _need_list(gpus, "gpus", "a list of GPU indices")
        for k, x in enumerate(gpus):
            if type(x) is not int or x < 0:
                raise _bad(f"gpus[{k}]", "a GPU index (an integer >= 0)", x)
    return Assignment(
        pod=_str(a, "pod"),
        node=_str(a, "node"),
        gpus=tuple(gpus),
        gpu_milli=_int(a, "gpuMilli", None, 1, MILLI),
        gang=_str(a, "gang", None),
        nics=_str_list(a.get("nics"), "nics"),
    )


def _unschedulable(u: Mapping[str, Any]) -> Unschedulable:
    return Unschedulable(pod=_str(u, "pod"), reason=_str(u, "reason", empty=True))


def _gang_result(g: Mapping[str, Any]) -> GangResult:
    placed = g.get("placed")
    if placed is not True and placed is not False:
        raise _bad("placed", "true or false", placed if placed is not None else _MISSING)
    domains: dict[str, tuple[str, ...]] = {}
    raw = g.get("domains")
    if raw is not None:
        _need_map(raw, "domains", "a mapping of level to domain names")
        for lv, names in raw.items():
            if type(lv) is not str or not lv:
                raise _bad("domains", "non-empty string level names", lv)
            domains[lv] = _str_list(names, f"domains.{lv}")
    return GangResult(
        name=_str(g, "name"),
        placed=placed,
        solver=_str(g, "solver", "greedy", choices=RESULT_SOLVERS),
        status=_str(g, "status", "feasible", choices=RESULT_STATUSES),
        domains=domains,
        objective=_number(g, "objective"),
        bound=_number(g, "bound"),
    )


def result_from_dict(data: Mapping[str, Any]) -> PlacementResult:
    """Validate a PlacementResult document (SPEC §3) structurally and build it.

    Whether it is a correct placement (every pod once, capacities, rules) is the
    checker's business, not this function's.

    Parameters
    ----------
    data : Mapping
        The parsed document.

    Returns
    -------
    PlacementResult

    Raises
    ------
    InvalidInputError
        At the JSON path of the first fault.
    """
    _header(data, "PlacementResult")
    return PlacementResult(
        assignments=tuple(_items(data, "assignments", _assignment)),
        unschedulable=tuple(_items(data, "unschedulable", _unschedulable)),
        gangs=tuple(_items(data, "gangs", _gang_result)),
    )


def request_for_pods(pods: Any, gang: Any, policy: Any, seed: Any) -> PlacementRequest:
    """The request behind ``Cluster.place``: one pod or a list, optionally forming ``gang``.

    Pods are PodRequest objects or pod mappings (SPEC §2); ``gang`` is a GangSpec or a
    gang mapping with a ``name``. Everything goes through :func:`request_from_dict`.
    """
    items = [pods] if isinstance(pods, (PodRequest, Mapping)) else list(pods)
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "PlacementRequest",
        "policy": policy,
        "seed": seed,
        "pods": [p.to_dict() if isinstance(p, PodRequest) else dict(_need_map(p, f"pods[{i}]"))
                 for i, p in enumerate(items)],
    }
    if gang is not None:
        if isinstance(gang, GangSpec):
            name, spec = gang.name, gang.to_dict()
        else:
            spec = dict(_need_map(gang, "gang"))
            name = _str(spec, "name") if "name" in spec else None
            if not name:
                raise InvalidInputError("gang.name", "a gang needs a name")
        doc["gangs"] = {name: spec}
        for p in doc["pods"]:
            p["gang"] = name
    else:
        for p in doc["pods"]:
            if p.get("gang") is not None:
                raise InvalidInputError("gang", f"pod {p.get('name')!r} names gang {p['gang']!r}; pass gang=")
    return request_from_dict(doc)
