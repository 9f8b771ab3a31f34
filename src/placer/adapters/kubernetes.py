"""Kubernetes objects to a placer snapshot, and what reading them needs.

:func:`snapshot_from_kubernetes` turns ``kubectl get nodes -o json`` (and optionally
``kubectl get pods -A -o json``) into a placer/v1 ``ClusterSnapshot`` document, a plain
dict that :meth:`placer.ClusterSnapshot.from_dict` accepts (the importer validates its
own output and reports a fault at the Kubernetes object it came from). Workload
manifests become requests in :mod:`placer.adapters.kubernetes_workloads`, which reads
them with this module's document reader, quantities and pod resources.

Input files are JSON or YAML, in any of the shapes ``kubectl`` writes or people keep
manifests in: a ``List`` (``kind: List``, ``NodeList``, ...) with ``items``, a single
object, or a multi-document YAML stream (``---``). ``.json`` files are read as JSON (a
repeated key: the last one counts, as Go's encoding/json does), ``.yaml``/``.yml`` as YAML
(a repeated key is an error), other names as JSON when they start with ``{`` or ``[``.
Template files (``.tftpl``, ``.tpl``, ``.j2``, ...) holding ``${...}`` or ``{{`` and an
unquoted ``${...}`` in any YAML are refused at their line. Quantities follow Kubernetes
rules (:func:`parse_quantity`).

Errors are :class:`placer.exceptions.InvalidInputError`. ``where`` is ``"<file>:<line>"``
for YAML input (the message then starts with the JSON path inside the document, e.g.
``items[3].status.allocatable.cpu: ...``) and ``"<file>: <JSON path>"`` for JSON input
(``nodes.json: items[3].status.allocatable.cpu``); a JSON or YAML syntax error always
gives ``"<file>:<line>"``. Other locations: ``levels[i]`` for a bad level, ``policy``.
"""

from __future__ import annotations

import json
import math
import os
import re
from fractions import Fraction
from typing import Any, Iterable, Iterator, Mapping, NoReturn, Sequence, Union

import yaml

from placer._io import read_text
from placer.limits import MAX_GPUS
from placer.schema import snapshot_from_dict
from placer.schema.errors import describe
from placer.schema.files import gc_paused
from placer.exceptions import InvalidInputError
from placer.model import TAINT_EFFECTS

__all__ = [
    "GPU_RESOURCE",
    "GPU_PRODUCT_LABEL",
    "GPU_MEMORY_LABEL",
    "CLIQUE_LABEL",
    "CLIQUE_LEVEL",
    "HOSTNAME_LABEL",
    "GPUS_ANNOTATION",
    "parse_quantity",
    "cpu_milli",
    "memory_mib",
    "count",
    "parse_levels",
    "snapshot_from_kubernetes",
]

PathLike = Union[str, "os.PathLike[str]"]
LevelSpec = Union[str, Sequence[str]]

GPU_RESOURCE = "nvidia.com/gpu"
"""The device plugin's whole-GPU resource."""
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""GPU feature discovery's product label (the node's ``gpuModel``)."""
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
"""GPU feature discovery's memory label, MiB of one full GPU (``gpuMemoryMiB``)."""
CLIQUE_LABEL = "nvidia.com/gpu.clique"
"""GPU feature discovery's multi-node NVLink domain label (``<ClusterUUID>.<CliqueID>``)."""
CLIQUE_LEVEL = "clique"
"""The level added for :data:`CLIQUE_LABEL` when no given level uses that label."""
HOSTNAME_LABEL = "kubernetes.io/hostname"
"""A topology label that means the node itself (placer's implicit level ``node``)."""
GPUS_ANNOTATION = "placer.io/gpus"
"""Pod annotation with the GPU indices a pod holds (``"0,1"``), as placer's binding writes."""

_CPU = "cpu"
_MEMORY = "memory"
_MIB = 1 << 20
_LIMIT = 1 << 63
_MAX_DIGITS = 40
_TERMINATED = ("Succeeded", "Failed")
_TEMPLATE_SUFFIXES = (".tftpl", ".tpl", ".tmpl", ".gotmpl", ".j2", ".jinja", ".jinja2")
_TEMPLATE_MARK = re.compile(r"(?<!\$)\$\{[^}\n]{0,60}\}?|\{\{[^\n]{0,60}?\}\}|\{\{")
_LEVEL_NAME = re.compile(r"[^\s=]+")

# ----------------------------------------------------------------------------- quantities

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


def _show(v: Any) -> str:
    """A short description of a value for error messages (as :func:`placer.schema.describe`,
    but an integer is written out whole up to 200 bits)."""
    if isinstance(v, int) and v is not True and v is not False:
        return str(v) if v.bit_length() < 200 else "a huge integer"
    return describe(v)


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
            where, f"expected a quantity (a number or a string like 500m, 4Gi), got {_show(value)}"
        )
    if isinstance(value, str):
        q = _QUANTITY_CACHE.get(value)
        if q is not None:
            return q
    if isinstance(value, int):
        q = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(where, f"expected a finite quantity, got {_show(value)}")
        q = Fraction(repr(value))
    else:
        m = _QUANTITY.fullmatch(value)
        if m is None:
            raise InvalidInputError(
                where,
                f"expected a Kubernetes quantity (like 16, 500m, 0.5, 32777408Ki, 4Gi, 2e3), "
                f"got {_show(value)}",
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
        raise InvalidInputError(where, f"quantity {_show(value)} is out of range (at least 2^63)")
    if isinstance(value, str) and len(_QUANTITY_CACHE) < _QUANTITY_CACHE_SIZE:
        _QUANTITY_CACHE[value] = q
    return q


def _non_negative(value: Any, where: str) -> Fraction:
    q = parse_quantity(value, where)
    if q < 0:
        raise InvalidInputError(where, f"expected a quantity >= 0, got {_show(value)}")
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
        raise InvalidInputError(where, f"expected a whole number, got {_show(value)}")
    return int(q)


# ----------------------------------------------------------------------------- reading


class _Placeholder(Exception):
    def __init__(self, line: int, text: str) -> None:
        super().__init__(text)
        self.line = line
        self.text = text


class _BadScalar(Exception):
    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


_YAML_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_YAML_BASE):  # type: ignore[misc, valid-type]
    """Safe YAML loader that remembers the line of every mapping key and list item,
    refuses duplicate keys and unquoted ``${...}`` template placeholders."""

    spans: dict[int, tuple[Any, int, Any]]


def _line(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _construct_map(loader: Any, node: Any) -> Iterator[dict[Any, Any]]:
    data: dict[Any, Any] = {}
    yield data
    seen: dict[tuple[str, str], int] = {}
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            k = (key_node.tag, key_node.value)
            if k in seen:
                raise _BadScalar(
                    _line(key_node),
                    f"duplicate key {key_node.value!r} (first on line {seen[k]})",
                )
            seen[k] = _line(key_node)
    loader.flatten_mapping(node)
    lines: dict[Any, int] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=False)
        try:
            hash(key)
        except TypeError:
            raise _BadScalar(_line(key_node), "a mapping key must be a plain value") from None
        data[key] = loader.construct_object(value_node, deep=False)
        lines[key] = _line(key_node)
    loader.spans[id(data)] = (data, _line(node), lines)


def _construct_seq(loader: Any, node: Any) -> Iterator[list[Any]]:
    data: list[Any] = []
    yield data
    data.extend(loader.construct_object(child, deep=False) for child in node.value)
    loader.spans[id(data)] = (data, _line(node), [_line(child) for child in node.value])


def _construct_str(loader: Any, node: Any) -> str:
    value = loader.construct_scalar(node)
    if not node.style and "${" in value:
        raise _Placeholder(_line(node), value)
    return value


def _construct_int(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:
        raise _BadScalar(_line(node), f"not a usable integer: {node.value[:40]!r}") from None


def _construct_float(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_float(loader, node)
    except ValueError:
        raise _BadScalar(_line(node), f"not a usable number: {node.value[:40]!r}") from None


def _construct_timestamp(loader: Any, node: Any) -> Any:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError):
        return loader.construct_scalar(node)


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)
_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


def _path_str(path: Sequence[Any]) -> str:
    out: list[str] = []
    for step in path:
        if isinstance(step, int):
            out.append(f"[{step}]")
        else:
            out.append(f".{step}" if out else str(step))
    return "".join(out)


class _Doc:
    """One parsed document of a file, and how to name a place in it."""

    __slots__ = ("source", "data", "spans", "line")

    def __init__(
        self, source: str, data: Any, spans: dict[int, tuple[Any, int, Any]] | None, line: int
    ) -> None:
        self.source = source
        self.data = data
        self.spans = spans
        self.line = line

    def _line_of(self, path: Sequence[Any]) -> int:
        assert self.spans is not None
        line = self.line
        obj = self.data
        for step in path:
            entry = self.spans.get(id(obj))
            if entry is None or entry[0] is not obj:
                break
            line = entry[1]
            sub = entry[2]
            try:
                if isinstance(step, int):
                    if not isinstance(sub, list) or not 0 <= step < len(sub):
                        break
                    line = sub[step]
                else:
                    if not isinstance(sub, dict) or step not in sub:
                        break
                    line = sub[step]
                obj = obj[step]
            except (KeyError, IndexError, TypeError):
                break
        return line

    def where(self, path: Sequence[Any]) -> str:
        if self.spans is None:
            return f"{self.source}: {_path_str(path)}" if path else f"{self.source}:{self.line}"
        return f"{self.source}:{self._line_of(path)}"

    def error(self, path: Sequence[Any], what: str) -> InvalidInputError:
        if self.spans is not None and path:
            what = f"{_path_str(path)}: {what}"
        return InvalidInputError(self.where(path), what)

    def fail(self, path: Sequence[Any], what: str) -> NoReturn:
        raise self.error(path, what)

    def note(self, path: Sequence[Any], what: str) -> str:
        e = self.error(path, what)
        return f"{e.where}: {e.what}"


def _parse_yaml(text: str, source: str) -> list[_Doc]:
    loader = _Loader(text)
    loader.spans = {}
    docs: list[_Doc] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = loader.construct_document(node)
            if data is not None:
                docs.append(_Doc(source, data, loader.spans, _line(node)))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise InvalidInputError(
            f"{source}:{line}", f"invalid YAML: {e.problem or e.context or 'unparseable'}"
        ) from None
    except yaml.YAMLError as e:
        pos = getattr(e, "position", None)
        line = text.count("\n", 0, pos) + 1 if isinstance(pos, int) else 1
        raise InvalidInputError(f"{source}:{line}", f"invalid YAML: {e}") from None
    except _Placeholder as e:
        raise InvalidInputError(
            f"{source}:{e.line}",
            f"unrendered template placeholder in {e.text[:60]!r}; render the template first "
            "and import its output",
        ) from None
    except _BadScalar as e:
        raise InvalidInputError(f"{source}:{e.line}", f"invalid YAML: {e.what}") from None
    except RecursionError:
        raise InvalidInputError(f"{source}:1", "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return docs


def _parse_json(text: str, source: str) -> list[_Doc]:
    # Plain json.loads (a repeated key: the last one counts, as in encoding/json);
    # kubectl output can be hundreds of MB, so no per-object hook.
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{source}:{e.lineno}", f"invalid JSON: {e.msg} (column {e.colno})") from None
    except (ValueError, RecursionError) as e:
        raise InvalidInputError(f"{source}:1", f"invalid JSON: {e}") from None
    return [] if data is None else [_Doc(source, data, None, 1)]


def _read_documents(path: PathLike) -> list[_Doc]:
    """The non-empty documents of a JSON or YAML file.

    ``.json`` files are read as JSON; ``.yaml``/``.yml`` as (multi-document) YAML; any
    other name as JSON when it starts with ``{`` or ``[``, else as YAML. Template files
    (``.tftpl``, ``.tpl``, ``.j2``, ...) with a ``${...}`` or ``{{`` placeholder are
    refused at the placeholder's line, as is an unquoted ``${...}`` in any YAML.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"expected a file path, got {type(path).__name__}")
    source = os.fspath(path)
    text = read_text(source)
    if not text.strip():
        raise InvalidInputError(f"{source}:1", "empty file, expected Kubernetes objects (JSON or YAML)")
    ext = os.path.splitext(source)[1].lower()
    if ext in _TEMPLATE_SUFFIXES:
        m = _TEMPLATE_MARK.search(text)
        if m is not None:
            line = text.count("\n", 0, m.start()) + 1
            raise InvalidInputError(
                f"{source}:{line}",
                f"a {ext} template with placeholder {m.group(0)!r}; render the template first "
                "and import its output",
            )
    if ext == ".json":
        return _parse_json(text, source)
    if ext in (".yaml", ".yml") or text.lstrip()[0] not in "{[":
        return _parse_yaml(text, source)
    try:
        return _parse_json(text, source)
    except InvalidInputError as json_error:
        try:
            return _parse_yaml(text, source)
        except InvalidInputError:
            raise json_error from None


def _objects(doc: _Doc) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """``(path, object)`` for each object of a document, looking inside Lists."""

    def walk(path: tuple[Any, ...], obj: Any, depth: int) -> Iterator[tuple[tuple[Any, ...], Any]]:
        if isinstance(obj, list) and depth == 0:
            for i, x in enumerate(obj):
                yield from walk((*path, i), x, depth + 1)
            return
        if isinstance(obj, dict) and depth < 3:
            kind = obj.get("kind")
            items = obj.get("items")
            is_list = kind is None or (isinstance(kind, str) and kind.endswith("List"))
            if isinstance(items, list) and is_list:
                for i, x in enumerate(items):
                    yield from walk((*path, "items", i), x, depth + 1)
                return
        yield path, obj

    yield from walk((), doc.data, 0)


# ----------------------------------------------------------------------------- field access


def _map(doc: _Doc, path: tuple[Any, ...], v: Any, required: bool = False) -> dict[Any, Any]:
    if v is None:
        if required:
            doc.fail(path, "expected a mapping, got nothing")
        return {}
    if not isinstance(v, dict):
        doc.fail(path, f"expected a mapping, got {_show(v)}")
    return v


def _list(doc: _Doc, path: tuple[Any, ...], v: Any) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        doc.fail(path, f"expected a list, got {_show(v)}")
    return v


def _string(
    doc: _Doc, path: tuple[Any, ...], v: Any, required: bool = False, empty: bool = False
) -> str | None:
    if v is None:
        if required:
            doc.fail(path, "expected a non-empty string, got nothing")
        return None
    if not isinstance(v, str) or (not v and not empty):
        doc.fail(path, f"expected a {'' if empty else 'non-empty '}string, got {_show(v)}")
    return v


def _integer(
    doc: _Doc, path: tuple[Any, ...], v: Any, lo: int | None = None, hi: int | None = None
) -> int | None:
    if v is None:
        return None
    out_of_range = isinstance(v, int) and ((lo is not None and v < lo) or (hi is not None and v > hi))
    if isinstance(v, bool) or not isinstance(v, int) or out_of_range:
        bounds = f" >= {lo}" if lo is not None and hi is None else f" {lo}..{hi}" if lo is not None else ""
        doc.fail(path, f"expected an integer{bounds}, got {_show(v)}")
    return v


def _str_map(doc: _Doc, path: tuple[Any, ...], v: Any, what: str) -> dict[str, str]:
    m = _map(doc, path, v)
    for k, x in m.items():
        if not isinstance(k, str) or not k:
            doc.fail(path, f"expected {what} with non-empty string keys, got key {_show(k)}")
        if not isinstance(x, str):
            doc.fail((*path, k), f"expected a string (quote it), got {_show(x)}")
    return m


def _quantity(doc: _Doc, path: tuple[Any, ...], v: Any, fn: Any, **kw: Any) -> Any:
    try:
        return fn(v, "", **kw)
    except InvalidInputError as e:
        doc.fail(path, e.what)


# ----------------------------------------------------------------------------- levels


def parse_levels(levels: Iterable[LevelSpec], where: str = "levels") -> list[tuple[str, str]]:
    """Check topology levels given as ``(name, label)`` pairs or ``"name=label"`` strings.

    Parameters
    ----------
    levels : iterable
        Outermost first, e.g. ``[("block", "cloud.google.com/gce-topology-block"),
        "rack=cloud.google.com/gce-topology-subblock"]``.
    where : str
        How errors name the list (``levels``, or ``--level`` on the command line).

    Returns
    -------
    list of (str, str)

    Raises
    ------
    InvalidInputError
        ``where`` = ``levels[i]`` (``<where>[i]``) for a malformed entry, an empty, ``node`` or repeated
        level name, or a label used twice.
    """
    out: list[tuple[str, str]] = []
    names: dict[str, int] = {}
    labels: dict[str, int] = {}
    if isinstance(levels, (str, bytes)):
        raise InvalidInputError(where, "expected a list of (name, label) pairs, got a string")
    base = where
    for i, spec in enumerate(levels):
        where = f"{base}[{i}]"
        if isinstance(spec, str):
            name, sep, label = spec.partition("=")
            if not sep:
                raise InvalidInputError(where, f"expected NAME=LABEL, got {spec!r}")
        elif isinstance(spec, (tuple, list)) and len(spec) == 2:
            name, label = spec
        else:
            raise InvalidInputError(where, f"expected a (name, label) pair, got {_show(spec)}")
        if not isinstance(name, str) or not _LEVEL_NAME.fullmatch(name):
            raise InvalidInputError(where, f"expected a level name without spaces or '=', got {_show(name)}")
        if not isinstance(label, str) or not label or label != label.strip():
            raise InvalidInputError(where, f"expected a node label key, got {_show(label)}")
        if name == "node":
            raise InvalidInputError(where, "'node' is placer's implicit innermost level; choose another name")
        if name in names:
            raise InvalidInputError(where, f"level {name!r} given twice (first at {base}[{names[name]}])")
        if label in labels:
            raise InvalidInputError(where, f"label {label!r} given twice (first at {base}[{labels[label]}])")
        names[name] = i
        labels[label] = i
        out.append((name, label))
    return out


# ----------------------------------------------------------------------------- pod resources


def _container_amounts(doc: _Doc, path: tuple[Any, ...], c: Any) -> dict[str, Fraction]:
    """Requests of one container: cpu and memory (requests, else limits) and extended
    resources (limits, else requests; both given must agree)."""
    c = _map(doc, path, c)
    rpath = (*path, "resources")
    res = _map(doc, rpath, c.get("resources"))
    req = _map(doc, (*rpath, "requests"), res.get("requests"))
    lim = _map(doc, (*rpath, "limits"), res.get("limits"))
    out: dict[str, Fraction] = {}
    for name in dict.fromkeys([*lim, *req]):
        if not isinstance(name, str) or not name:
            doc.fail(rpath, f"expected resource names (strings), got {_show(name)}")
        if name in (_CPU, _MEMORY):
            side = "requests" if name in req else "limits"
            value = (req if side == "requests" else lim)[name]
            out[name] = _quantity(doc, (*rpath, side, name), value, _non_negative)
        elif "/" in name:
            side = "limits" if name in lim else "requests"
            n = _quantity(doc, (*rpath, side, name), (lim if side == "limits" else req)[name], count)
            if side == "limits" and name in req:
                other = _quantity(doc, (*rpath, "requests", name), req[name], count)
                if other != n:
                    doc.fail(
                        (*rpath, "requests", name),
                        f"extended resource {name}: requests {other} must equal limits {n}",
                    )
            out[name] = Fraction(n)
    return out


def _pod_amounts(doc: _Doc, spath: tuple[Any, ...], spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """Effective requests of a pod: max(sum over containers + sidecars, init peaks)
    plus ``overhead`` (restartable init containers count as sidecars)."""
    total: dict[str, Fraction] = {}
    cpath = (*spath, "containers")
    for j, c in enumerate(_list(doc, cpath, spec.get("containers"))):
        for k, v in _container_amounts(doc, (*cpath, j), c).items():
            total[k] = total.get(k, Fraction(0)) + v
    sidecars: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}
    ipath = (*spath, "initContainers")
    for j, c in enumerate(_list(doc, ipath, spec.get("initContainers"))):
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
    opath = (*spath, "overhead")
    overhead = _map(doc, opath, spec.get("overhead"))
    for k, v in overhead.items():
        if not isinstance(k, str):
            doc.fail(opath, f"expected resource names (strings), got {_show(k)}")
        if k in (_CPU, _MEMORY):
            total[k] = total.get(k, Fraction(0)) + _quantity(doc, (*opath, k), v, _non_negative)
        elif "/" in k:
            total[k] = total.get(k, Fraction(0)) + _quantity(doc, (*opath, k), v, count)
    return total


def _gpu_count(doc: _Doc, path: tuple[Any, ...], amounts: dict[str, Fraction]) -> int:
    gpus = int(amounts.pop(GPU_RESOURCE, 0))
    if gpus > MAX_GPUS:
        doc.fail(path, f"{gpus} {GPU_RESOURCE} in one pod, over placer's limit of {MAX_GPUS}")
    return gpus


def _extended(amounts: Mapping[str, Fraction]) -> dict[str, int]:
    return {k: int(v) for k, v in amounts.items() if "/" in k and v > 0}


def _cpu_memory(amounts: Mapping[str, Fraction], *, round_up: bool) -> dict[str, int]:
    """``cpuMilli`` (rounded up) and ``memoryMiB`` (rounded down, up with ``round_up``) of
    a pod's amounts, each only when the pod asks for some."""
    out: dict[str, int] = {}
    cpu = amounts.get(_CPU)
    if cpu:
        out["cpuMilli"] = math.ceil(cpu * 1000)
    mem = amounts.get(_MEMORY)
    if mem:
        out["memoryMiB"] = math.ceil(mem / _MIB) if round_up else math.floor(mem / _MIB)
    return out


def _gpu_indices(doc: _Doc, path: tuple[Any, ...], v: Any, gpus: int) -> list[int]:
    text = _string(doc, path, v, empty=True)
    assert text is not None
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    out: list[int] = []
    for p in parts:
        if not p.isascii() or not p.isdigit() or len(p) > 4:
            doc.fail(path, f"expected comma-separated GPU indices like \"0,1\", got {text!r}")
        out.append(int(p))
    if len(out) != gpus:
        doc.fail(path, f"lists {len(out)} GPU(s) but the pod holds {gpus} {GPU_RESOURCE}")
    return out


# ----------------------------------------------------------------------------- snapshot


def _node_entry(
    doc: _Doc, path: tuple[Any, ...], obj: Any, levels: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    if not isinstance(obj, dict):
        doc.fail(path, f"expected a Node object (a mapping), got {_show(obj)}")
    kind = obj.get("kind")
    if kind is not None and kind != "Node":
        doc.fail((*path, "kind"), f"expected a Node, got kind {_show(kind)}")
    if kind is None and "metadata" not in obj:
        keys = ", ".join(str(k) for k in list(obj)[:4])
        doc.fail(path, f"expected a Node object (kind, metadata, spec, status), got a mapping of {keys}")
    mpath = (*path, "metadata")
    meta = _map(doc, mpath, obj.get("metadata"), required=True)
    name = _string(doc, (*mpath, "name"), meta.get("name"), required=True)
    labels = _str_map(doc, (*mpath, "labels"), meta.get("labels"), "labels")
    spec = _map(doc, (*path, "spec"), obj.get("spec"))
    spath = (*path, "status")
    status = _map(doc, spath, obj.get("status"))
    cap = _map(doc, (*spath, "capacity"), status.get("capacity"))
    alloc = _map(doc, (*spath, "allocatable"), status.get("allocatable"))

    def amount(key: str) -> tuple[Any, tuple[Any, ...]] | None:
        if key in alloc:
            return alloc[key], (*spath, "allocatable", key)
        if key in cap:
            return cap[key], (*spath, "capacity", key)
        return None

    node: dict[str, Any] = {"name": name}
    got = amount(GPU_RESOURCE)
    if got is not None:
        gpus = _quantity(doc, got[1], got[0], count)
        if gpus > MAX_GPUS:
            doc.fail(
                got[1],
                f"{gpus} GPUs on one node, over placer's limit of {MAX_GPUS} (a time-sliced or "
                "MPS-shared nvidia.com/gpu is not imported)",
            )
        if gpus:
            node["gpus"] = gpus
    model = labels.get(GPU_PRODUCT_LABEL)
    if model:
        node["gpuModel"] = model
    gmem = labels.get(GPU_MEMORY_LABEL)
    if gmem is not None:
        if not gmem.isascii() or not gmem.isdigit() or len(gmem) > 12:
            doc.fail((*mpath, "labels", GPU_MEMORY_LABEL), f"expected an integer (MiB), got {_show(gmem)}")
        node["gpuMemoryMiB"] = int(gmem)
    got = amount(_CPU)
    if got is not None:
        node["cpuMilli"] = _quantity(doc, got[1], got[0], cpu_milli)
    got = amount(_MEMORY)
    if got is not None:
        node["memoryMiB"] = _quantity(doc, got[1], got[0], memory_mib)
    got = amount("pods")
    if got is not None:
        node["maxPods"] = _quantity(doc, got[1], got[0], count)

    topology = {lv: labels[lb] for lv, lb in levels if labels.get(lb)}
    if topology:
        node["topology"] = topology
    if labels:
        node["labels"] = dict(labels)

    tpath = (*path, "spec", "taints")
    taints = []
    for j, t in enumerate(_list(doc, tpath, spec.get("taints"))):
        t = _map(doc, (*tpath, j), t)
        key = _string(doc, (*tpath, j, "key"), t.get("key"), required=True)
        value = _string(doc, (*tpath, j, "value"), t.get("value"), empty=True)
        effect = t.get("effect")
        if effect not in TAINT_EFFECTS:
            doc.fail(
                (*tpath, j, "effect"), f"expected one of {', '.join(TAINT_EFFECTS)}, got {_show(effect)}"
            )
        taint: dict[str, Any] = {"key": key}
        if value:
            taint["value"] = value
        taint["effect"] = effect
        taints.append(taint)
    if taints:
        node["taints"] = taints

    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        doc.fail((*path, "spec", "unschedulable"), f"expected true or false, got {_show(unschedulable)}")
    conditions = status.get("conditions")
    if conditions is not None:
        ready = None
        cpath = (*spath, "conditions")
        for j, c in enumerate(_list(doc, cpath, conditions)):
            c = _map(doc, (*cpath, j), c)
            if c.get("type") == "Ready":
                ready = c.get("status")
        if ready != "True":
            unschedulable = True
    if unschedulable:
        node["unschedulable"] = True

    resources: dict[str, dict[str, int]] = {}
    for side, values in (("capacity", cap), ("allocatable", alloc)):
        for k, v in values.items():
            if isinstance(k, str) and "/" in k:
                n = _quantity(doc, (*spath, side, k), v, count)
                resources.setdefault(k, {"capacity": 0, "allocatable": 0})[side] = n
    if resources:
        node["resources"] = resources
    return node


def _running_pod(doc: _Doc, path: tuple[Any, ...], obj: dict[str, Any]) -> dict[str, Any]:
    mpath = (*path, "metadata")
    meta = _map(doc, mpath, obj.get("metadata"), required=True)
    name = _string(doc, (*mpath, "name"), meta.get("name"), required=True)
    namespace = _string(doc, (*mpath, "namespace"), meta.get("namespace")) or "default"
    annotations = _str_map(doc, (*mpath, "annotations"), meta.get("annotations"), "annotations")
    spath = (*path, "spec")
    spec = _map(doc, spath, obj.get("spec"), required=True)
    amounts = _pod_amounts(doc, spath, spec)
    pod: dict[str, Any] = {"name": f"{namespace}/{name}"}
    gpus = _gpu_count(doc, spath, amounts)
    if GPUS_ANNOTATION in annotations:
        apath = (*mpath, "annotations", GPUS_ANNOTATION)
        pod["gpus"] = _gpu_indices(doc, apath, annotations[GPUS_ANNOTATION], gpus)
    elif gpus:
        pod["unknownGpus"] = gpus
    pod.update(_cpu_memory(amounts, round_up=False))
    prio = _integer(doc, (*spath, "priority"), spec.get("priority"))
    if prio:
        pod["priority"] = prio
    res = _extended(amounts)
    if res:
        pod["resources"] = res
    return pod


_NESTED = re.compile(r"nodes\[(\d+)\](?:\.pods\[(\d+)\])?")


def snapshot_from_kubernetes(
    nodes: PathLike, pods: PathLike | None = None, levels: Iterable[LevelSpec] = ()
) -> dict[str, Any]:
    """A placer/v1 ClusterSnapshot document from ``kubectl get nodes`` / ``get pods`` output.

    Nodes (each becomes one snapshot node with inline hardware, in file order):

    * ``gpus`` = allocatable ``nvidia.com/gpu`` (left out when 0 or absent), ``gpuModel``
      = label ``nvidia.com/gpu.product``, ``gpuMemoryMiB`` = label ``nvidia.com/gpu.memory``,
      ``cpuMilli``/``memoryMiB``/``maxPods`` = allocatable ``cpu``/``memory``/``pods``
      (memory rounded down to MiB). A resource missing from ``allocatable`` is taken from
      ``capacity``; missing from both, it is left out (untracked).
    * ``resources``: every extended resource (a name with ``/``: ``nvidia.com/gpu``,
      ``nvidia.com/mig-1g.10gb``, ``rdma/...``) of capacity or allocatable, as
      ``{"capacity": n, "allocatable": n}`` (a side missing is 0).
    * ``labels`` (all), ``taints`` (key, value, effect); ``unschedulable: true`` when
      ``spec.unschedulable`` is true, or ``status.conditions`` is given and its ``Ready``
      condition is missing or not ``"True"`` (a node without ``status.conditions`` is
      taken as ready).
    * ``topology``: each level's label value, levels the node has no (or an empty) label
      for left out. ``topologyLevels`` = the level names, plus :data:`CLIQUE_LEVEL` as the
      innermost level when some node has label ``nvidia.com/gpu.clique`` and no level
      uses that label (not added when a given level is already named ``clique``).

    Pods with ``spec.nodeName`` and a phase other than Succeeded/Failed run on that node:
    name ``<namespace>/<name>``; ``cpuMilli`` (rounded up) and ``memoryMiB`` (rounded down)
    = effective requests (the larger of the containers' sum and the init containers' peak,
    restartable init containers counted as sidecars, plus ``spec.overhead``; a container's
    cpu/memory request defaults to its limit); ``unknownGpus`` = its ``nvidia.com/gpu``
    (limits, else requests), or ``gpus`` = the indices of annotation ``placer.io/gpus``;
    other extended resources -> ``resources``; ``priority`` = ``spec.priority``.

    Parameters
    ----------
    nodes : str or os.PathLike
        ``kubectl get nodes -o json`` (or ``-o yaml``) output: a List, one Node, or a
        multi-document YAML of Nodes (items of kind other than Node are refused).
    pods : str or os.PathLike, optional
        ``kubectl get pods -A -o json`` output, in the same shapes.
    levels : iterable of (name, label) or "name=label"
        Topology levels, outermost first (see :func:`parse_levels`).

    Returns
    -------
    dict
        The ClusterSnapshot document, already checked by
        :meth:`placer.ClusterSnapshot.from_dict`.

    Raises
    ------
    InvalidInputError
        At the file location (see the module docs) of the first fault: syntax errors, a
        bad quantity or field, no nodes, a node name given twice, a pod bound to a node not
        in the node list (``<pods file>: items[i].spec.nodeName``), a node whose pods hold
        more than it has (at the pod).
    """
    level_list = parse_levels(levels)
    with gc_paused():  # large acyclic structures: the cyclic GC only costs time here
        return _snapshot(nodes, pods, level_list)


def _snapshot(nodes: PathLike, pods: PathLike | None, level_list: list[tuple[str, str]]) -> dict[str, Any]:
    node_docs = _read_documents(nodes)
    entries: list[dict[str, Any]] = []
    node_src: list[tuple[_Doc, tuple[Any, ...]]] = []
    index: dict[str, int] = {}
    for doc in node_docs:
        for path, obj in _objects(doc):
            entry = _node_entry(doc, path, obj, level_list)
            if entry["name"] in index:
                first = node_src[index[entry["name"]]]
                doc.fail(
                    (*path, "metadata", "name"),
                    f"node {entry['name']!r} listed twice (first at {first[0].where(first[1])})",
                )
            index[entry["name"]] = len(entries)
            entries.append(entry)
            node_src.append((doc, path))
    if not entries:
        raise InvalidInputError(f"{os.fspath(nodes)}:1", "no Node objects in the file")

    level_names = [name for name, _ in level_list]
    if CLIQUE_LEVEL not in level_names and all(lb != CLIQUE_LABEL for _, lb in level_list):
        if any(e.get("labels", {}).get(CLIQUE_LABEL) for e in entries):
            level_names.append(CLIQUE_LEVEL)
            for e in entries:
                clique = e.get("labels", {}).get(CLIQUE_LABEL)
                if clique:
                    e.setdefault("topology", {})[CLIQUE_LEVEL] = clique

    pod_src: dict[tuple[int, int], tuple[_Doc, tuple[Any, ...]]] = {}
    if pods is not None:
        for doc in _read_documents(pods):
            for path, obj in _objects(doc):
                if not isinstance(obj, dict):
                    doc.fail(path, f"expected a Pod object (a mapping), got {_show(obj)}")
                kind = obj.get("kind")
                if kind is not None and kind != "Pod":
                    doc.fail((*path, "kind"), f"expected a Pod, got kind {_show(kind)}")
                spec = _map(doc, (*path, "spec"), obj.get("spec"), required=True)
                node_name = _string(doc, (*path, "spec", "nodeName"), spec.get("nodeName"))
                status = _map(doc, (*path, "status"), obj.get("status"))
                phase = status.get("phase")
                if not node_name or phase in _TERMINATED:
                    continue
                i = index.get(node_name)
                if i is None:
                    doc.fail(
                        (*path, "spec", "nodeName"),
                        f"pod runs on node {node_name!r}, which is not in the node list {os.fspath(nodes)}",
                    )
                node_pods = entries[i].setdefault("pods", [])
                pod_src[(i, len(node_pods))] = (doc, path)
                node_pods.append(_running_pod(doc, path, obj))

    document: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot"}
    if level_names:
        document["topologyLevels"] = level_names
    document["nodes"] = entries
    try:
        snapshot_from_dict(document)
    except InvalidInputError as e:
        m = _NESTED.match(e.where)
        if m is None:
            raise
        i = int(m.group(1))
        if m.group(2) is not None and (i, int(m.group(2))) in pod_src:
            doc, path = pod_src[(i, int(m.group(2)))]
        else:
            doc, path = node_src[i]
        raise doc.error(path, f"{e.what} (placer/v1 {e.where})") from None
    return document
