"""A PlacementResult in the forms the real systems take (``placer place --format ...``).

:data:`OUTPUT_FORMATS` maps each ``--format`` name to its writer (``json`` — :func:`to_json`,
the PlacementResult document itself, ``yaml`` — :func:`to_yaml`, the same document as
YAML — and the forms below); :func:`render` looks the name up there.

* ``k8s-binding`` — :func:`to_k8s_bindings` / :func:`render_k8s_bindings`: one
  Kubernetes ``v1`` ``Binding`` per assigned pod, as a YAML multi-document stream or a
  JSON ``List``;
* ``env`` — :func:`to_env`: one line per assigned pod with its ``NVIDIA_VISIBLE_DEVICES``;
* ``slurm`` — :func:`to_slurm`: per gang (and per pod outside a gang) the ``sbatch``/``srun``
  arguments (``--nodelist`` as a compressed hostlist, :func:`compress_hostlist`;
  ``--nodes``, ``--ntasks-per-node``, ``--gres``) and comments on what Slurm cannot be
  told (which GPU indices).

Unschedulable pods are left out of the bindings (:func:`left_out_note` says which, for
``placer place`` to print on stderr) and listed as comment lines
``# unschedulable: <pod>: <reason>`` after the lines of ``env`` and ``slurm``.

MIG assignments name their instances as ``<gpu>/<profile>/<start>`` (``+`` appended when
the instance must be created first) and, where the snapshot's ``migInstances`` carry the
instance's ``device`` (``MIG-<uuid>`` or ``MIG-GPU-<uuid>/<gi>/<ci>``, as ``placer import
nvidia-smi`` and ``placer import slurm`` know them), the device names: writers take the
snapshot as ``snapshot=`` for that. Without a device name for every instance of a pod,
its ``NVIDIA_VISIBLE_DEVICES`` is ``unknown`` (which the NVIDIA container runtime refuses,
rather than starting the pod on no or on another GPU).

The text formats are made of shell words: every word that needs it is quoted with
:func:`shlex.quote`, so ``eval "set -- $line"`` (or Python's :func:`shlex.split`) gives
the words back exactly; a word made only of letters, digits and ``@%+=:,./-`` stays as is.
"""

from __future__ import annotations

import shlex
from types import MappingProxyType
from typing import Any, Callable, Collection, Iterable, Mapping, NoReturn, Union

import yaml

from placer.text.files import dump_json, dump_yaml
from placer.exceptions import InvalidInputError
from placer.text.hostlist import compress_hostlist
from placer.text.hostlist import expand_hostlist as _expand_hostlist
from placer.model import Assignment, ClusterSnapshot, PlacementResult, load_result, load_snapshot
from placer.text.lines import some_of

__all__ = [
    "OUTPUT_FORMATS",
    "FORMATS",
    "GPUS_ANNOTATION",
    "binding_annotations",
    "GPU_MILLI_ANNOTATION",
    "GANG_ANNOTATION",
    "MIG_ANNOTATION",
    "MIG_DEVICES_ANNOTATION",
    "to_k8s_bindings",
    "render_k8s_bindings",
    "to_env",
    "to_slurm",
    "to_json",
    "to_yaml",
    "left_out_note",
    "compress_hostlist",
    "expand_hostlist",
    "render",
]

ResultLike = Union[PlacementResult, Mapping[str, Any], str]
SnapshotLike = Union[ClusterSnapshot, Mapping[str, Any], str, None]
Writer = Callable[..., str]

GPUS_ANNOTATION = "placer.io/gpus"
GPU_MILLI_ANNOTATION = "placer.io/gpu-milli"
GANG_ANNOTATION = "placer.io/gang"
NICS_ANNOTATION = "placer.io/nics"
MIG_ANNOTATION = "placer.io/mig"
"""The MIG instances of a pod: ``<gpu>/<profile>/<start>`` comma-separated (``+`` when created)."""
MIG_DEVICES_ANNOTATION = "placer.io/mig-devices"
"""The MIG device names of a pod's instances, when every one is known."""
UNKNOWN_DEVICES = "unknown"
DEFAULT_NAMESPACE = "default"


# ----------------------------------------------------------------------------- Kubernetes


def to_k8s_bindings(result: ResultLike, snapshot: SnapshotLike = None) -> list[dict[str, Any]]:
    """One Kubernetes ``v1`` ``Binding`` per assignment, in result order.

    For ``{"pod": "team-a/train-0", "node": "node-07", "gpus": [0, 1], "gang": "team-a/t"}``::

        {"apiVersion": "v1", "kind": "Binding",
         "metadata": {"name": "train-0", "namespace": "team-a",
                      "annotations": {"placer.io/gpus": "0,1", "placer.io/gang": "team-a/t"}},
         "target": {"apiVersion": "v1", "kind": "Node", "name": "node-07"}}

    The pod name ``<namespace>/<name>`` gives the metadata (no slash: namespace
    ``default``). Annotations (all string values): ``placer.io/gpus`` = the GPU indices,
    comma-separated, one per slot of ``gpuSlots`` (left out for a pod without GPUs); ``placer.io/gpu-milli`` = the
    share of a shared GPU; ``placer.io/gang`` for a gang member; ``placer.io/nics`` = the
    NICs, comma-separated, when the assignment names any; ``placer.io/mig`` = its MIG
    instances and ``placer.io/mig-devices`` = their device names when ``snapshot`` gives
    every one (module docs). A pod without annotations has no ``annotations`` key.
    Unschedulable pods get no binding.

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    snapshot : ClusterSnapshot, dict or path, optional
        The snapshot placed on, for MIG device names.

    Returns
    -------
    list of dict

    Raises
    ------
    InvalidInputError
        ``assignments[i].pod`` for a pod name with an empty namespace or name part
        (``/x``, ``ns/``) or more than one slash.
    """
    res = load_result(result)
    devices = _mig_devices(snapshot) if any(a.mig for a in res.assignments) else {}
    return [_binding(a, f"assignments[{i}].pod", devices) for i, a in enumerate(res.assignments)]


def render_k8s_bindings(result: ResultLike, fmt: str = "yaml", snapshot: SnapshotLike = None) -> str:
    """The bindings of :func:`to_k8s_bindings` as text for ``kubectl create -f -``.

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    fmt : {"yaml", "json"}
        ``yaml``: a multi-document stream, each document starting with ``---`` (empty
        text when nothing is assigned). ``json``: one ``{"apiVersion": "v1", "kind":
        "List", "items": [...]}`` indented by 2. Both end with a newline.
    snapshot : ClusterSnapshot, dict or path, optional
        As for :func:`to_k8s_bindings`.

    Returns
    -------
    str

    Raises
    ------
    InvalidInputError
        ``fmt`` for another format; as :func:`to_k8s_bindings`.
    """
    if fmt not in ("yaml", "json"):
        _fail("fmt", f"expected 'yaml' or 'json', got {fmt!r}")
    docs = to_k8s_bindings(result, snapshot)
    if fmt == "json":
        return dump_json({"apiVersion": "v1", "kind": "List", "items": docs})
    if not docs:
        return ""
    return yaml.safe_dump_all(
        docs, explicit_start=True, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def binding_annotations(a: Assignment, devices: Mapping[tuple[str, int, int], str] | None = None) -> dict[str, str]:
    """The annotations of ``a``'s Binding (:func:`to_k8s_bindings`): ``placer.io/gpus`` (one
    index per slot of a ``gpuSlots`` assignment, so ``0,0`` is two slots of GPU 0, as the
    Kubernetes importer reads it back), ``placer.io/gpu-milli``, ``placer.io/gang``,
    ``placer.io/nics``, ``placer.io/mig`` and ``placer.io/mig-devices`` (when ``devices``,
    keyed by (node, GPU, start), names every instance)."""
    annotations: dict[str, str] = {}
    if a.gpu_slots:
        annotations[GPUS_ANNOTATION] = _join(g for g, n in sorted(a.gpu_slots.items()) for _ in range(n))
    elif a.gpus:
        annotations[GPUS_ANNOTATION] = _join(a.gpus)
    if a.gpu_milli is not None and a.gpu_milli < 1000:
        annotations[GPU_MILLI_ANNOTATION] = str(a.gpu_milli)
    if a.gang is not None:
        annotations[GANG_ANNOTATION] = a.gang
    if a.nics:
        annotations[NICS_ANNOTATION] = ",".join(a.nics)
    if a.mig:
        annotations[MIG_ANNOTATION] = ",".join(_mig_names(a))
        named = _device_names(a, devices or {})
        if named != UNKNOWN_DEVICES:
            annotations[MIG_DEVICES_ANNOTATION] = named
    return annotations


def _binding(a: Assignment, where: str, devices: Mapping[tuple[str, int, int], str]) -> dict[str, Any]:
    namespace, name = _split_pod_name(a.pod, where)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    annotations = binding_annotations(a, devices)
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": a.node},
    }


def _split_pod_name(pod: str, where: str) -> tuple[str, str]:
    if "/" not in pod:
        return DEFAULT_NAMESPACE, pod
    namespace, _, name = pod.partition("/")
    if not namespace or not name or "/" in name:
        _fail(where, f"expected a pod name <namespace>/<name> (or <name>), got {pod!r}")
    return namespace, name


# ----------------------------------------------------------------------------- env


def to_env(result: ResultLike, snapshot: SnapshotLike = None) -> str:
    """One line per assigned pod: ``<pod> <node> NVIDIA_VISIBLE_DEVICES=<ids>``.

    ``<ids>`` are the GPU indices comma-separated (``NVIDIA_VISIBLE_DEVICES=0,1``; for a
    shared GPU its index), or ``none`` for a pod without GPUs (the NVIDIA container
    runtime's value for "no GPU"). A MIG pod gets its device names
    (``NVIDIA_VISIBLE_DEVICES=MIG-...``) when ``snapshot`` gives each, else ``unknown``,
    and a fourth word ``PLACER_MIG=<gpu>/<profile>/<start>[+],...`` (module docs). Lines follow the result's order; then one line
    ``# unschedulable: <pod>: <reason>`` per unschedulable pod (line breaks in a reason
    become spaces). Words are shell-quoted where needed (module docstring); the text
    ends with a newline, or is empty when the result has no pods.

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    snapshot : ClusterSnapshot, dict or path, optional
        The snapshot placed on, for MIG device names.

    Returns
    -------
    str
    """
    res = load_result(result)
    devices = _mig_devices(snapshot) if any(a.mig for a in res.assignments) else {}
    lines = []
    for a in res.assignments:
        if a.mig:
            lines.append(_words(a.pod, a.node, f"NVIDIA_VISIBLE_DEVICES={_device_names(a, devices)}",
                                f"PLACER_MIG={','.join(_mig_names(a))}"))
        else:
            lines.append(_words(a.pod, a.node, f"NVIDIA_VISIBLE_DEVICES={_join(a.gpus) if a.gpus else 'none'}"))
    return _text(lines + _unschedulable_comments(res))


# ----------------------------------------------------------------------------- Slurm


def to_slurm(result: ResultLike, snapshot: SnapshotLike = None) -> str:
    """Per gang (and per pod outside a gang) the arguments ``sbatch``/``srun`` take to run it
    where placer placed it, and what Slurm cannot be told.

    Line format (single spaces between words)::

        <job> --nodelist=<hostlist> --nodes=<n> [--ntasks-per-node=<k>] [--gres=gpu[:<type>]:<g>]

    * ``<job>``: the gang name, or the pod name for a pod outside a gang;
    * ``--nodelist``: the job's distinct nodes as a compressed Slurm hostlist
      (:func:`compress_hostlist`, e.g. ``node[01-03,07]``); ``--nodes``: how many;
    * ``--ntasks-per-node``: the job's pods per node, when every node has as many;
    * ``--gres=gpu:<g>``: the job's GPUs per node, when every node has as many (and some);
      with ``:<type>`` (the node's GPU model, as ``placer import slurm`` takes it from the
      GRES type) when ``snapshot`` is given and the job's nodes share one model.

    Then, for that job, comment lines for what the arguments cannot say:

    * ``# <job>: Slurm chooses the GPUs on each node (placer chose n01:0,1 ...); they cannot be
      imposed`` — unless the job takes every GPU of each of its nodes (known from
      ``snapshot``): Slurm sets ``CUDA_VISIBLE_DEVICES`` itself;
    * ``# <job>: pods per node differ (...)`` or ``GPUs per node differ (...)``: one
      ``--ntasks-per-node`` or ``--gres`` cannot say it (submit one job per node, or a
      heterogeneous job).

    Jobs follow the order of their first pod among the assignments; then one
    ``# unschedulable: <pod>: <reason>`` line per unschedulable pod. Words are shell-quoted
    where needed (``'--nodelist=n[01-03,07]'``: brackets are glob characters). The text ends
    with a newline, or is empty when the result has no pods.

    Example: a gang ``team-a/llm`` of two pods on ``n01`` and ``n02``, 8 GPUs each, on nodes
    of 8 ``a100`` GPUs, gives::

        team-a/llm '--nodelist=n[01-02]' --nodes=2 --ntasks-per-node=1 --gres=gpu:a100:8

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    snapshot : optional
        The cluster, for GRES types and whether a job's GPUs are whole nodes.

    Returns
    -------
    str
    """
    res = load_result(result)
    snap = load_snapshot(snapshot) if snapshot is not None else None
    hardware = {n.name: n.hardware for n in snap.nodes} if snap is not None else {}
    jobs: dict[tuple[bool, str], dict[str, list[Assignment]]] = {}
    for a in res.assignments:
        key = (True, a.gang) if a.gang is not None else (False, a.pod)
        jobs.setdefault(key, {}).setdefault(a.node, []).append(a)
    lines: list[str] = []
    for (_, job), by_node in jobs.items():
        order = _hostlist_order(by_node)
        gpus = {n: sorted({g for a in by_node[n] for g in a.gpus}) for n in order}
        tasks = {n: len(by_node[n]) for n in order}
        words = [job, f"--nodelist={compress_hostlist(order)}", f"--nodes={len(order)}"]
        notes = []
        if len(set(tasks.values())) == 1:
            words.append(f"--ntasks-per-node={tasks[order[0]]}")
        else:
            notes.append("pods per node differ (" + " ".join(f"{n}:{tasks[n]}" for n in order) + "): one "
                         "--ntasks-per-node cannot say it; submit one job per node or a heterogeneous job")
        counts = {len(g) for g in gpus.values()}
        if counts != {0}:
            if len(counts) == 1:
                models = {hardware[n].gpu_model if n in hardware else None for n in order}
                gres_type = f"{models.pop()}:" if len(models) == 1 and None not in models else ""
                words.append(f"--gres=gpu:{gres_type}{counts.pop()}")
            else:
                notes.append("GPUs per node differ (" + " ".join(f"{n}:{len(gpus[n])}" for n in order) + "): one "
                             "--gres cannot say it; submit one job per node or a heterogeneous job")
            whole = all(n in hardware and len(gpus[n]) == hardware[n].gpus for n in order)
            if not whole:
                chose = " ".join(f"{n}:{_join(gpus[n])}" for n in order if gpus[n])
                notes.append(f"Slurm chooses the GPUs on each node (placer chose {chose}); they cannot be imposed")
        lines.append(_words(*words))
        lines.extend(f"# {_one_line(job)}: {note}" for note in notes)
    return _text(lines + _unschedulable_comments(res))


# ----------------------------------------------------------------------------- hostlists


def expand_hostlist(hostlist: str) -> list[str]:
    """The host names of a Slurm hostlist, in its order: ``n[01-03,07]`` -> ``n01 n02 n03 n07``.

    The inverse of :func:`compress_hostlist`: ``""`` gives ``[]``; otherwise as
    :func:`placer.text.hostlist.expand_hostlist`, errors naming ``hostlist``.
    """
    if not hostlist:
        return []
    return _expand_hostlist(hostlist, "hostlist")


# ----------------------------------------------------------------------------- the registry


def to_json(result: ResultLike, snapshot: SnapshotLike = None) -> str:
    """The PlacementResult document as JSON text indented by 2, ending in a newline
    (``placer place``'s default output).

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    snapshot : optional
        Not used.

    Returns
    -------
    str
    """
    return dump_json(load_result(result).to_dict())


def to_yaml(result: ResultLike, snapshot: SnapshotLike = None) -> str:
    """The PlacementResult document of :func:`to_json` as a YAML document (block style, keys
    in the same order).

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    snapshot : optional
        Not used.

    Returns
    -------
    str
    """
    return dump_yaml(load_result(result).to_dict())


_LEFT_OUT_SHOWN = 20  # pod names a note lists before "and N more"


def left_out_note(result: ResultLike, fmt: str) -> str | None:
    """One line naming the pods the text of ``fmt`` leaves out without a word: the
    unschedulable pods of ``k8s-binding`` and ``k8s-binding-json`` (which have no binding).

    ``k8s-binding: 2 pod(s) left out (pending): ns/a, ns/b`` (the first 20 names, then
    ``and N more``); None for the other formats (they list every pod) or when every pod
    is placed.

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    fmt : str
        A name of :data:`OUTPUT_FORMATS`.

    Returns
    -------
    str or None
    """
    if fmt not in ("k8s-binding", "k8s-binding-json"):
        return None
    pending = [u.pod for u in load_result(result).unschedulable]
    if not pending:
        return None
    names = some_of([_one_line(p) for p in pending], _LEFT_OUT_SHOWN)
    return f"{fmt}: {len(pending)} pod(s) left out (pending): {names}"


def _k8s_binding_yaml(result: ResultLike, snapshot: SnapshotLike = None) -> str:
    return render_k8s_bindings(result, "yaml", snapshot)


def _k8s_binding_json(result: ResultLike, snapshot: SnapshotLike = None) -> str:
    return render_k8s_bindings(result, "json", snapshot)


OUTPUT_FORMATS: Mapping[str, Writer] = MappingProxyType(
    {
        "json": to_json,
        "yaml": to_yaml,
        "k8s-binding": _k8s_binding_yaml,
        "k8s-binding-json": _k8s_binding_json,
        "env": to_env,
        "slurm": to_slurm,
    }
)
"""The output formats of ``placer place --format``: name -> writer of a result's text.

``json`` (:func:`to_json`), ``yaml`` (:func:`to_yaml`), ``k8s-binding``
(:func:`render_k8s_bindings` as YAML),
``k8s-binding-json`` (the same as a JSON ``List``), ``env`` (:func:`to_env`) and
``slurm`` (:func:`to_slurm`). The command line takes its ``--format`` choices from here.
"""

FORMATS = tuple(OUTPUT_FORMATS)
"""The names of :data:`OUTPUT_FORMATS`, ``json`` first."""


def render(result: ResultLike, fmt: str, snapshot: SnapshotLike = None) -> str:
    """The text of ``placer place --format FMT``: the writer :data:`OUTPUT_FORMATS` has
    for ``fmt`` applied to ``result``.

    Parameters
    ----------
    result : PlacementResult, dict or path
        The placement.
    fmt : str
        A name of :data:`OUTPUT_FORMATS`.
    snapshot : ClusterSnapshot, dict or path, optional
        The snapshot placed on, for MIG device names.

    Returns
    -------
    str

    Raises
    ------
    InvalidInputError
        ``--format`` for another format name; as the writer.
    """
    writer = OUTPUT_FORMATS.get(fmt)
    if writer is None:
        _fail("--format", f"expected one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    return writer(result, snapshot=snapshot)


# ----------------------------------------------------------------------------- helpers


def _fail(where: str, what: str) -> NoReturn:
    raise InvalidInputError(where, what)


def _mig_devices(snapshot: SnapshotLike) -> dict[tuple[str, int, int], str]:
    """(node, GPU, start) -> device name of every instance whose device is known."""
    if snapshot is None:
        return {}
    snap = load_snapshot(snapshot)
    out: dict[tuple[str, int, int], str] = {}
    for n in snap.nodes:
        for m in (*n.mig_instances, *(m for p in n.pods for m in p.mig)):
            if m.device is not None:
                out[(n.name, m.gpu, m.start)] = m.device
    return out


def _mig_names(a: Assignment) -> list[str]:
    return [f"{m.gpu}/{m.profile}/{m.start}{'+' if m.create else ''}" for m in a.mig]


def _device_names(a: Assignment, devices: Mapping[tuple[str, int, int], str]) -> str:
    """The device names of ``a``'s instances, or ``unknown`` unless every one is known
    (a created instance never is)."""
    names = [None if m.create else devices.get((a.node, m.gpu, m.start)) for m in a.mig]
    return UNKNOWN_DEVICES if None in names else ",".join(n for n in names if n is not None)


def _join(gpus: Iterable[int]) -> str:
    return ",".join(str(g) for g in gpus)


def _words(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _one_line(text: str) -> str:
    return " ".join(text.split()) if ("\n" in text or "\r" in text) else text


def _unschedulable_comments(res: PlacementResult) -> list[str]:
    return [f"# unschedulable: {_one_line(u.pod)}: {_one_line(u.reason)}" for u in res.unschedulable]


def _hostlist_order(nodes: Collection[str]) -> list[str]:
    """The distinct names in the order ``expand_hostlist(compress_hostlist(names))`` gives
    (sorted, for names a hostlist cannot hold)."""
    if all(_plain_host(n) for n in nodes):
        return expand_hostlist(compress_hostlist(nodes))
    return sorted(set(nodes))


def _plain_host(name: str) -> bool:
    return bool(name) and not any(c in name for c in "[],")
