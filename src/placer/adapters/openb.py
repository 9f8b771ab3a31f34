"""Reader for the CSV files of Alibaba's GPU trace ``cluster-trace-gpu-v2023`` ("openb").

Two kinds of file:

* a **node list** (``openb_node_list_*.csv``), columns ``sn, cpu_milli, memory_mib, gpu,
  model``, read by :func:`read_nodes` into a :class:`~placer.model.ClusterSnapshot`;
* a **pod list** (``openb_pod_list_*.csv``), columns ``name, cpu_milli, memory_mib,
  num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
  scheduled_time`` (the ``multigpu`` variants have only the first five), read by
  :func:`read_pods` into :class:`~placer.model.PodRequest` objects.

The FGD study's simulator uses only CPU, memory and the GPU fields of a pod; so does
:func:`read_pods` (``qos``, ``pod_phase`` and the time columns are not read, not even
checked). :func:`read_timed_pods` reads them too, for the replay over time (SPEC §9): each
pod with its ``qos``, ``pod_phase`` and the three times, as a :class:`TimedPod`.
The default trace (the 1213 GPU nodes and the default pod list) is bundled with the
package: :func:`load_default`.

Both readers write the placer/v1 document of what they read and decode it once with
:mod:`placer.schema` (:func:`~placer.schema.snapshot_from_dict`,
:func:`~placer.schema.request_from_dict`), so a value the schema refuses (more than 64 GPUs
on a node, a name with a control character, a quantity over placer's limits) is refused
here too.

Any input this reader cannot take raises :class:`placer.exceptions.InvalidInputError`
with ``where`` = ``"<source>:<line>"`` (1-based, the line on which the CSV record ends);
for a value the schema refuses, the message ends with the placer/v1 path in parentheses.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any, Mapping, NoReturn, Optional, Sequence, Union

from msgspec import Struct

from placer.text.files import bundled_file, read_text
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot, PodRequest
from placer.schema import request_from_dict, snapshot_from_dict
from placer.schema.errors import has_control

__all__ = [
    "NODE_COLUMNS",
    "POD_COLUMNS",
    "POD_COLUMNS_SHORT",
    "MAX_PODS",
    "DEFAULT_NODES",
    "DEFAULT_PODS",
    "STUDY_WORKLOADS",
    "trace_path",
    "QOS_CLASSES",
    "TimedPod",
    "read_nodes",
    "read_pods",
    "read_timed_pods",
    "load_default",
    "data_path",
    "node_type_name",
]

PathLike = Union[str, "os.PathLike[str]"]

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
POD_COLUMNS_SHORT = POD_COLUMNS[:5]
"""The columns of the ``multigpu`` pod lists (no ``gpu_spec``, qos, phase or times)."""

MAX_PODS = 1001
"""Allocatable pods per node in the study's simulator (its node YAML says ``pods: 1001``)."""

QOS_CLASSES = ("LS", "Guaranteed", "Burstable", "BE")
"""The ``qos`` values of the openb pod lists (latency-sensitive, Kubernetes' Guaranteed and
Burstable, best-effort)."""

_TIME_COLUMNS = POD_COLUMNS[6:]
"""``qos, pod_phase, creation_time, deletion_time, scheduled_time``: what the 11-column
lists add to the five of the ``multigpu`` lists."""

DEFAULT_NODES = "openb_node_list_gpu_node.csv"
DEFAULT_PODS = "openb_pod_list_default.csv"
STUDY_WORKLOADS = (
    "default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare40", "gpushare60", "gpushare80", "gpushare100",
    "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30", "multigpu40", "multigpu50",
)
"""The 17 workloads of the FGD study's experiments, all bundled (:func:`trace_path`)."""

_NO_SPEC = ("", "nan")
_DATA_DIR = "openb"


def data_path(name: str) -> Path:
    """The path of a bundled openb file (``DEFAULT_NODES``, ``DEFAULT_PODS``,
    ``fgd_expected_unalloc_summary.csv``, ``fgd_expected_frag_summary.csv``, ``README.md``).

    Raises
    ------
    InvalidInputError
        ``where`` = ``name`` when no such file is bundled.
    """
    path = bundled_file(_DATA_DIR, name)
    if path is None:
        raise InvalidInputError(name, "no such bundled openb file")
    return path


def trace_path(workload: str) -> Path:
    """The bundled pod list of one of the FGD study's workloads by name (``default``,
    ``cpu050``, ``gpushare40``, …: :data:`STUDY_WORKLOADS`).

    Raises
    ------
    InvalidInputError
        ``where`` = ``workload`` when no such trace is bundled.
    """
    for suffix in (".csv", ".csv.gz"):
        path = bundled_file(_DATA_DIR, f"openb_pod_list_{workload}{suffix}")
        if path is not None:
            return path
    raise InvalidInputError(workload, f"no bundled openb trace of that name; bundled: {', '.join(STUDY_WORKLOADS)}")


def load_default() -> tuple[ClusterSnapshot, list[PodRequest]]:
    """The bundled default trace: the 1213 GPU nodes and the 8152 pods of the default list.

    Returns
    -------
    (ClusterSnapshot, list of PodRequest)
        As :func:`read_nodes` and :func:`read_pods` return them, pods in file order.
    """
    return read_nodes(data_path(DEFAULT_NODES)), read_pods(data_path(DEFAULT_PODS))


def node_type_name(cpu_milli: int, memory_mib: int, gpus: int, model: str | None) -> str:
    """The key under which :func:`read_nodes` interns a node shape, e.g.
    ``G2-8gpu-96000m-393216Mi`` (``cpu-...`` for a node without GPUs)."""
    prefix = f"{model}-{gpus}gpu" if gpus else "cpu"
    return f"{prefix}-{cpu_milli}m-{memory_mib}Mi"


class TimedPod(Struct, frozen=True, gc=False):
    """A pod of an 11-column openb pod list with its class and its times (seconds from the
    trace's origin).

    ``scheduled_time`` is ``None`` for a pod that never ran (``pod_phase`` Pending leaves it
    empty); ``deletion_time`` is ``None`` when the field is empty.
    """

    pod: PodRequest
    qos: str
    phase: str
    creation_time: int
    deletion_time: Optional[int]
    scheduled_time: Optional[int]

    @property
    def lifetime(self) -> Optional[int]:
        """``deletion_time − scheduled_time`` in seconds, ``None`` when either is missing
        (may be zero or negative: the caller decides what such a pod means)."""
        if self.deletion_time is None or self.scheduled_time is None:
            return None
        return self.deletion_time - self.scheduled_time


def read_nodes(path_or_text: PathLike, source: str | None = None) -> ClusterSnapshot:
    """Read an openb node list into a snapshot of empty nodes.

    Every node is named by its ``sn`` and refers to an interned node type, one per
    distinct (``cpu_milli``, ``memory_mib``, ``gpu``, ``model``), named by
    :func:`node_type_name`; types appear in ``node_types`` in order of first use. A type
    has ``gpus`` = ``gpu``, ``gpuModel`` = ``model`` (none when ``gpu`` is 0),
    ``cpuMilli``, ``memoryMiB`` and ``maxPods`` = :data:`MAX_PODS`; GPU memory is not
    tracked. There are no topology levels.

    Parameters
    ----------
    path_or_text : str or os.PathLike
        A file path, or the CSV text itself: a ``str`` that contains a newline is taken as
        text, any other ``str`` (and any ``os.PathLike``) as a path.
    source : str, optional
        Name used in error locations; defaults to the file's base name, or ``<text>``.

    Returns
    -------
    ClusterSnapshot
        Decoded once by :func:`placer.schema.snapshot_from_dict` from the document of
        these node types and nodes.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a header other than ``sn,cpu_milli,memory_mib,gpu,model``,
        a row with another number of fields, an empty or repeated ``sn``, a value that is
        not a non-negative integer (``cpu_milli``, ``memory_mib``, ``gpu``), a node with
        GPUs but no model or with a model but no GPUs, a value the schema refuses (more
        than 64 GPUs, a quantity over placer's limit, a control character in ``sn`` or
        ``model``; at the row that introduced it), or no node at all; the path with
        ``"no such file"`` when a file is missing.
    """
    text, src = _text_and_source(path_or_text, source)
    _, rows = _rows(text, src, (NODE_COLUMNS,), "node list")
    types: dict[str, dict[str, Any]] = {}
    type_lines: dict[str, int] = {}
    nodes: list[dict[str, Any]] = []
    node_lines: list[int] = []
    seen: dict[str, int] = {}
    for line, fields in rows:
        where = f"{src}:{line}"
        name = _unique_name(fields[0], where, line, seen, "sn (the node name)", "node")
        cpu = _nonneg_int(fields[1], where, "cpu_milli")
        mem = _nonneg_int(fields[2], where, "memory_mib")
        gpus = _nonneg_int(fields[3], where, "gpu")
        model = fields[4].strip()
        if gpus and not model:
            _fail(where, f"model is empty for a node with {gpus} GPU(s)")
        if not gpus and model:
            _fail(where, f"model is {model!r} for a node without GPUs (gpu is 0)")
        key = node_type_name(cpu, mem, gpus, model or None)
        if key not in types:
            hw: dict[str, Any] = {"gpus": gpus}
            if model:
                hw["gpuModel"] = model
            hw.update(cpuMilli=cpu, memoryMiB=mem, maxPods=MAX_PODS)
            types[key] = hw
            type_lines[key] = line
        nodes.append({"name": name, "type": key})
        node_lines.append(line)
    if not nodes:
        _fail(f"{src}:{_last_line(text) + 1}", "no nodes after the header")
    document = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodeTypes": types, "nodes": nodes}
    try:
        return snapshot_from_dict(document)
    except InvalidInputError as e:
        raise _at_row(e, src, "nodes", node_lines, type_lines) from None


def read_pods(path_or_text: PathLike, source: str | None = None) -> list[PodRequest]:
    """Read an openb pod list (11 columns, or the 5 of the ``multigpu`` lists).

    Each row becomes ``PodRequest(name, cpu_milli, memory_mib, gpus=num_gpu,
    gpu_milli=gpu_milli, gpu_models=...)``, in file order:

    * ``num_gpu`` = 0 (``gpu_milli`` must be 0): a CPU-only pod, ``gpus`` 0 (its
      ``gpu_milli`` is left at the contract's default 1000, which means nothing without
      GPUs) and no GPU models (a ``gpu_spec`` on a CPU-only pod is ignored);
    * ``num_gpu`` >= 1: ``gpu_milli`` per GPU in 1..1000, below 1000 only with
      ``num_gpu`` = 1 (a shared GPU);
    * ``gpu_models`` = ``tuple(gpu_spec.split("|"))`` as written (order and any repeated
      name kept, as the simulator keys pod types by the raw string), or ``()`` when
      ``gpu_spec`` is empty or ``nan``.

    Parameters
    ----------
    path_or_text : str or os.PathLike
        A file path or the CSV text (as in :func:`read_nodes`).
    source : str, optional
        Name used in error locations; defaults to the file's base name, or ``<text>``.

    Returns
    -------
    list of PodRequest
        Empty when the file has a header and no rows. The pods of a request document
        decoded once by :func:`placer.schema.request_from_dict`.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a header that is neither the 11 nor the 5 openb pod
        columns, a row with another number of fields, an empty or repeated name, a value
        that is not a non-negative integer, the GPU rules above broken, an empty model
        name inside ``gpu_spec`` (``A||B``), or a value the schema refuses (more than 64
        GPUs, a quantity over placer's limit, a control character in a name).
    """
    text, src = _text_and_source(path_or_text, source)
    _, rows = _rows(text, src, (POD_COLUMNS, POD_COLUMNS_SHORT), "pod list")
    return _decode_pods(src, rows, _pod_documents(src, rows))


def read_timed_pods(path_or_text: PathLike, source: str | None = None) -> list[TimedPod]:
    """Read an 11-column openb pod list with each pod's ``qos``, phase and times.

    The pod of each :class:`TimedPod` is the one :func:`read_pods` returns for the row (same
    rules, same errors). Besides:

    * ``qos`` must be one of :data:`QOS_CLASSES`;
    * ``creation_time`` must be a non-negative integer (seconds);
    * ``deletion_time`` and ``scheduled_time`` must be non-negative integers or empty
      (``None``); a pod that never ran has no ``scheduled_time``;
    * ``pod_phase`` is kept as written, not checked.

    Parameters
    ----------
    path_or_text : str or os.PathLike
        A file path or the CSV text (as in :func:`read_nodes`).
    source : str, optional
        Name used in error locations; defaults to the file's base name, or ``<text>``.

    Returns
    -------
    list of TimedPod
        In file order; empty when the file has a header and no rows.

    Raises
    ------
    InvalidInputError
        As :func:`read_pods`; and ``"<source>:<line>"`` for a ``qos`` outside
        :data:`QOS_CLASSES` or a time that is not a non-negative integer (an empty
        ``creation_time`` included), or, at the header, for a 5-column (``multigpu``) list,
        naming the columns it lacks.
    """
    text, src = _text_and_source(path_or_text, source)
    header, rows = _rows(text, src, (POD_COLUMNS, POD_COLUMNS_SHORT), "pod list")
    if header != POD_COLUMNS:
        _fail(
            f"{src}:{_header_line(text)}",
            f"the pod list lacks the columns {', '.join(_TIME_COLUMNS)} (it is a 5-column multigpu list); "
            "a replay over time needs the 11-column openb pod list",
        )
    times: list[tuple[str, str, int, Optional[int], Optional[int]]] = []
    documents = _pod_documents(src, rows, times)
    pods = _decode_pods(src, rows, documents)
    return [
        TimedPod(pod=pod, qos=qos, phase=phase, creation_time=created, deletion_time=deleted, scheduled_time=scheduled)
        for pod, (qos, phase, created, deleted, scheduled) in zip(pods, times)
    ]


def _header_line(text: str) -> int:
    """The 1-based line of the first non-blank line of ``text`` (the CSV header)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip(" \t,"):
            return number
    return 1


def _pod_documents(
    src: str,
    rows: list[tuple[int, list[str]]],
    times: list[tuple[str, str, int, Optional[int], Optional[int]]] | None = None,
) -> list[dict[str, Any]]:
    """The placer/v1 pod of each row, checked as :func:`read_pods` documents; with
    ``times``, also each row's (qos, phase, creation, deletion, scheduled), appended there
    and checked on the row's own turn so that the first bad row is the one reported."""
    pods: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for line, fields in rows:
        where = f"{src}:{line}"
        name = _unique_name(fields[0], where, line, seen, "name", "pod")
        cpu = _nonneg_int(fields[1], where, "cpu_milli")
        mem = _nonneg_int(fields[2], where, "memory_mib")
        num_gpu = _nonneg_int(fields[3], where, "num_gpu")
        milli = _nonneg_int(fields[4], where, "gpu_milli")
        if num_gpu == 0:
            if milli != 0:
                _fail(where, f"gpu_milli is {milli} for a pod without GPUs (num_gpu is 0); expected 0")
            pods.append({"name": name, "cpuMilli": cpu, "memoryMiB": mem})
        else:
            pods.append(_gpu_pod(name, cpu, mem, num_gpu, milli, fields, where))
        if times is not None:
            times.append(_times(fields, where))
    return pods


def _gpu_pod(name: str, cpu: int, mem: int, num_gpu: int, milli: int, fields: list[str], where: str) -> dict[str, Any]:
    if not 1 <= milli <= 1000:
        _fail(where, f"gpu_milli must be 1..1000 for a pod with GPUs, got {milli}")
    if milli < 1000 and num_gpu != 1:
        _fail(
            where,
            f"gpu_milli {milli} (a GPU share) with num_gpu {num_gpu}; a share below 1000 "
            "needs num_gpu 1",
        )
    models: tuple[str, ...] = ()
    if len(fields) > 5:
        spec = fields[5].strip()
        if spec not in _NO_SPEC:
            models = tuple(m.strip() for m in spec.split("|"))
            if not all(models):
                _fail(where, f"gpu_spec {spec!r} has an empty GPU model name")
    return {
        "name": name,
        "gpus": num_gpu,
        "gpuMilli": milli,
        "gpuModels": models,
        "cpuMilli": cpu,
        "memoryMiB": mem,
    }


def _times(fields: list[str], where: str) -> tuple[str, str, int, Optional[int], Optional[int]]:
    """(qos, phase, creation_time, deletion_time, scheduled_time) of an 11-column row."""
    qos = fields[6].strip()
    if qos not in QOS_CLASSES:
        _fail(where, f"qos must be one of {', '.join(QOS_CLASSES)}, got {qos!r}")
    phase = fields[7].strip()
    created = _nonneg_int(fields[8], where, "creation_time")
    deleted = _optional_nonneg_int(fields[9], where, "deletion_time")
    scheduled = _optional_nonneg_int(fields[10], where, "scheduled_time")
    return qos, phase, created, deleted, scheduled


def _decode_pods(src: str, rows: list[tuple[int, list[str]]], pods: list[dict[str, Any]]) -> list[PodRequest]:
    document = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": pods}
    try:
        return list(request_from_dict(document).pods)
    except InvalidInputError as e:
        raise _at_row(e, src, "pods", [line for line, _ in rows]) from None


# ----------------------------------------------------------------------------- helpers


def _unique_name(raw: str, where: str, line: int, seen: dict[str, int], column: str, what: str) -> str:
    """The row's name, checked non-empty and not seen before (then remembered)."""
    name = raw.strip()
    if not name:
        _fail(where, f"{column} is empty")
    if name in seen:
        _fail(where, f"{what} {name!r} is listed twice (first on line {seen[name]})")
    seen[name] = line
    return name


def _fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)


def _at_row(
    e: InvalidInputError, src: str, items: str, lines: Sequence[int], type_lines: Mapping[str, int] | None = None
) -> InvalidInputError:
    """A fault of the decoded document (``nodes[i]...``, ``pods[i]...``, ``nodeTypes...``)
    moved to the CSV row it came from, its placer/v1 path kept in the message; other
    faults as they are."""
    line: int | None = None
    type_lines = type_lines or {}
    m = re.match(rf"{items}\[(\d+)\]", e.where)
    if m is not None:
        line = lines[int(m.group(1))]
    elif e.where == "nodeTypes":  # a type name with a control character
        line = next((n for key, n in type_lines.items() if has_control(key)), None)
    else:
        line = next((n for key, n in type_lines.items() if e.where.startswith(f"nodeTypes.{key}.")), None)
    if line is None:
        return e
    return InvalidInputError(f"{src}:{line}", f"{e.what} (placer/v1 {e.where})")


def _text_and_source(path_or_text: PathLike, source: str | None) -> tuple[str, str]:
    if isinstance(path_or_text, str) and "\n" in path_or_text:
        return path_or_text, source or "<text>"
    if not isinstance(path_or_text, (str, os.PathLike)):
        raise TypeError(f"expected a path or CSV text, got {type(path_or_text).__name__}")
    name = source or os.path.basename(os.fspath(path_or_text))
    return read_text(path_or_text, source=name), name


def _last_line(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _rows(
    text: str, src: str, headers: tuple[tuple[str, ...], ...], what: str
) -> tuple[tuple[str, ...], list[tuple[int, list[str]]]]:
    """The header (one of ``headers``) and the CSV records after it, with the line each
    record ends on; blank lines are skipped."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    out: list[tuple[int, list[str]]] = []
    expected: tuple[str, ...] | None = None
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if expected is None:
                got = tuple(f.strip() for f in fields)
                if got not in headers:
                    wanted = " or ".join(",".join(h) for h in headers)
                    _fail(f"{src}:{line}", f"expected the openb {what} header {wanted}, got {','.join(fields)!r}")
                expected = got
                continue
            if len(fields) != len(expected):
                _fail(
                    f"{src}:{line}",
                    f"expected {len(expected)} fields ({','.join(expected)}), got {len(fields)}",
                )
            out.append((line, fields))
    except csv.Error as e:
        _fail(f"{src}:{reader.line_num}", f"malformed CSV: {e}")
    if expected is None:
        wanted = " or ".join(",".join(h) for h in headers)
        _fail(f"{src}:1", f"expected the openb {what} header {wanted}, got an empty file")
    return expected, out


def _nonneg_int(value: str, where: str, column: str) -> int:
    s = value.strip()
    if not s.isascii() or not s.isdigit():
        shown = repr(value) if value else "an empty field"
        _fail(where, f"{column} must be a non-negative integer, got {shown}")
    return int(s)


def _optional_nonneg_int(value: str, where: str, column: str) -> Optional[int]:
    """``None`` for an empty field, else as :func:`_nonneg_int`."""
    return None if not value.strip() else _nonneg_int(value, where, column)
