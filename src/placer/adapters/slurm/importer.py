"""The Slurm importer: a placer/v1 snapshot out of what Slurm prints and reads.

:func:`build_snapshot` makes a placer/v1 ClusterSnapshot document out of the parsed
records; :func:`snapshot_from_slurm` reads the three files and returns the
:class:`placer.ClusterSnapshot` that document decodes to (decoded once by
:func:`placer.schema.snapshot_from_dict`, every check of the schema included), and
:func:`import_slurm` returns it with the document (:class:`SlurmImport`), which
``placer import slurm`` writes.

Each grammar has its module, whose names this one re-exports:

* ``gres.conf``: :mod:`placer.adapters.slurm.gres` (:func:`parse_gres_conf`,
  :func:`gres_links_matrix`).
* ``scontrol -d show node`` and ``sinfo -O GresUsed,NodeList`` output:
  :mod:`placer.adapters.slurm.nodes` (:func:`parse_scontrol_nodes`,
  :func:`parse_sinfo_gres_used`).
* ``topology.conf`` (tree and block forms) and ``scontrol show topology`` output (tree):
  :mod:`placer.adapters.slurm.topology` (:func:`parse_topology_conf`).
* Slurm hostlist expressions (``tux[0-3,7]``, ``n[001-010]``): :func:`expand_hostlist`,
  from :mod:`placer.text.hostlist`.

Only what placement needs is read. Errors are :class:`placer.exceptions.InvalidInputError`
with ``where`` = ``"<source>:<line>"``; a fault the schema finds in a node of the document
is reported at the node's ``NodeName=`` line, its placer/v1 path in parentheses after the
message.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any, Union

from placer.text.files import read_text
from placer.limits import MAX_GPUS
from placer.exceptions import InvalidInputError
from placer.model import ClusterSnapshot
from placer.schema import snapshot_from_dict
from placer.adapters.slurm.jobs import SlurmJob, job_pods, parse_scontrol_jobs
from placer.text.hostlist import MAX_HOSTLIST_NAMES, expand_hostlist
from placer.mig.layout import fewest_gpus, layout_instances
from placer.model.mig_profiles import MigTable, model_key, tables
from placer.model.labels import SLURM_REASON_LABEL, SLURM_STATE_LABEL
from placer.schema.errors import without_control
from placer.text.lines import some_of
from placer.adapters.slurm.records import fail
from placer.adapters.slurm.gres import GresGpu, gres_links_matrix, parse_gres_conf
from placer.adapters.slurm.nodes import UNSCHEDULABLE_STATES, SlurmNode, parse_scontrol_nodes, parse_sinfo_gres_used
from placer.adapters.slurm.topology import SlurmTopology, parse_topology_conf

__all__ = [
    "GresGpu",
    "parse_gres_conf",
    "gres_links_matrix",
    "MAX_HOSTLIST_NAMES",
    "UNSCHEDULABLE_STATES",
    "SlurmNode",
    "SlurmTopology",
    "expand_hostlist",
    "parse_scontrol_nodes",
    "parse_topology_conf",
    "parse_sinfo_gres_used",
    "build_snapshot",
    "SlurmImport",
    "import_slurm",
    "import_slurm_texts",
    "snapshot_from_slurm",
]

PathLike = Union[str, "os.PathLike[str]"]


def build_snapshot(
    nodes: list[SlurmNode],
    gres: list[GresGpu] | None = None,
    topology: SlurmTopology | None = None,
    gres_source: str = "gres.conf",
    mig_model: str | None = None,
    jobs: list[SlurmJob] | None = None,
) -> dict[str, Any]:
    """Make a placer/v1 ClusterSnapshot document out of parsed Slurm descriptions.

    Per node (in the order of ``nodes``): ``cpuMilli`` = CPUs x 1000, ``memoryMiB``,
    ``gpus``, ``gpuModel`` (only when the node has one GPU type), ``unschedulable``,
    labels ``slurm.partitions``, ``slurm.features`` and ``slurm.state`` (when shown), and
    one running pod ``slurm/<node>/gres-used`` holding everything Slurm has allocated on
    the node (GPU indices of ``GresUsed``, ``unknownGpus`` for GPUs at unknown indices,
    ``cpuMilli``, ``memoryMiB``); the pod is left out when nothing is allocated.

    ``gres``: the records that apply to a node (no ``NodeName=``, or a hostlist naming
    it) give its ``gpuTopology`` matrix through their ``Links=`` (see
    :func:`gres_links_matrix`), after putting them in Slurm's GPU order (the position of
    ``-1``). Records without ``Links=`` give nothing; ``Cores=`` is not read. Nodes
    without GPUs ignore gres.conf.

    ``topology``: ``topologyLevels`` and each listed node's ``topology``; nodes the file
    does not list get none, and names that are not among ``nodes`` are ignored.

    MIG (GPU types that are MIG profiles, ``Gres=gpu:1g.10gb:4,gpu:3g.40gb:1``): Slurm
    counts instances, not GPUs, and does not say where they are. The node gets the
    whole GPUs of its other types plus the fewest GPUs the instances can be laid out on
    (the MIG GPUs first), ``mig`` static, ``migInstances`` laid out by
    :func:`placer.mig.layout.layout_instances`, and its ``gpuModel``: the one bundled
    table that has every profile, else the one of those a word of its features names
    (``h100``, ``a100-80gb``), else ``mig_model``. The running pod holds the first instances of each profile of
    ``mig_used``; whole GPUs in use become ``unknownGpus`` (Slurm's ``IDX:`` numbers all
    GRES devices, MIG ones included). gres.conf gives no ``Links=`` matrix to a MIG node.

    Parameters
    ----------
    nodes : list of SlurmNode
        From :func:`parse_scontrol_nodes`.
    gres : list of GresGpu, optional
        From :func:`parse_gres_conf`.
    topology : SlurmTopology, optional
        From :func:`parse_topology_conf`.
    gres_source : str
        Name of the gres.conf file in error locations.
    mig_model : str, optional
        The GPU model of the nodes with MIG types, when their profiles and features do
        not tell it.
    jobs : list of SlurmJob, optional
        Running jobs (:func:`placer.adapters.slurm.jobs.parse_scontrol_jobs`): a node
        they run on gets one pod per job with its priority and start time, a job on
        several nodes being a running gang, and ``slurm/<node>/gres-used`` keeps only
        what they do not account for (:func:`placer.adapters.slurm.jobs.job_pods`).

    Returns
    -------
    dict
        The document; :meth:`placer.ClusterSnapshot.from_dict` accepts it.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<gres_source>:<line>"`` for a bad ``NodeName=`` hostlist, a
        ``Links=`` matrix :func:`gres_links_matrix` rejects, or one whose size is not the
        node's GPU count; ``nodes[i]`` for a MIG node whose model is not known or whose
        instances cannot be laid out, whose jobs hold more than Slurm allocated on it,
        or that is a MIG node running a job of ``jobs``; ``jobs`` for a job on a node not
        among ``nodes`` (at the job's ``JobId=`` line).
    """
    on_node = _jobs_by_node(jobs or [], {node.name for node in nodes})
    applies: list[tuple[GresGpu, set[str] | None]] = []
    expanded: dict[str, set[str]] = {}
    for record in gres or ():
        if record.node_names is None:
            applies.append((record, None))
            continue
        names = expanded.get(record.node_names)
        if names is None:
            names = expanded[record.node_names] = set(
                expand_hostlist(record.node_names, f"{gres_source}:{record.line}")
            )
        applies.append((record, names))
    matrices: dict[tuple[int, ...], list[list[str]] | None] = {}

    levels = topology.levels if topology is not None else ()
    placed = topology.nodes if topology is not None else {}
    doc_nodes: list[dict[str, Any]] = []
    for i, node in enumerate(nodes):
        doc: dict[str, Any] = {"name": node.name, "gpus": node.gpus}
        if node.gpu_model is not None:
            doc["gpuModel"] = node.gpu_model
        if node.mig:
            _mig_node(doc, node, mig_model, f"nodes[{i}]")
        if node.cpus is not None:
            doc["cpuMilli"] = node.cpus * 1000
        if node.memory_mib is not None:
            doc["memoryMiB"] = node.memory_mib
        if node.gpus and applies and not node.mig:
            mine = tuple(i for i, (_, names) in enumerate(applies)
                         if names is None or node.name in names)
            if mine not in matrices:
                matrices[mine] = _links_matrix([applies[i][0] for i in mine], gres_source)
            matrix = matrices[mine]
            if matrix is not None:
                if len(matrix) != node.gpus:
                    fail(f"{gres_source}:{applies[mine[0]][0].line}",
                          f"expected Links= for the {node.gpus} GPUs of node {node.name} "
                          f"(scontrol Gres=), got {len(matrix)}")
                doc["gpuTopology"] = {"matrix": matrix}
        if node.name in placed:
            doc["topology"] = dict(placed[node.name])
        labels = {}
        if node.partitions is not None:
            labels["slurm.partitions"] = node.partitions
        if node.features is not None:
            labels["slurm.features"] = node.features
        if node.state is not None:
            labels[SLURM_STATE_LABEL] = node.state
        if node.reason is not None:
            labels[SLURM_REASON_LABEL] = without_control(node.reason)
        if labels:
            doc["labels"] = labels
        doc["unschedulable"] = node.unschedulable
        pod: dict[str, Any] = {"name": f"slurm/{node.name}/gres-used"}
        if node.used_gpus and not node.mig:
            pod["gpus"] = sorted(node.used_gpus)
        unknown = node.used_unknown_gpus + (len(node.used_gpus) if node.mig else 0)
        if unknown:
            pod["unknownGpus"] = unknown
        if node.mig_used:
            pod["mig"] = _held(doc, node, f"nodes[{i}]")
        if node.alloc_cpus:
            pod["cpuMilli"] = node.alloc_cpus * 1000
        if node.alloc_memory_mib:
            pod["memoryMiB"] = node.alloc_memory_mib
        if node.name in on_node:
            if node.mig:
                fail(f"nodes[{i}]", f"node {node.name} is a MIG node: placer does not split its MIG GRES by job")
            doc["pods"] = job_pods(node.name, pod, on_node[node.name], f"nodes[{i}]")
        elif len(pod) > 1:
            doc["pods"] = [pod]
        doc_nodes.append(doc)
    out: dict[str, Any] = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot"}
    if levels:
        out["topologyLevels"] = list(levels)
    out["nodes"] = doc_nodes
    return out


def _jobs_by_node(jobs: list[SlurmJob], names: set[str]) -> dict[str, list[SlurmJob]]:
    """The jobs running on each node; a node not in ``names`` is an error at the job."""
    on_node: dict[str, list[SlurmJob]] = {}
    for job in jobs:
        for name in job.nodes:
            if name not in names:
                fail(job.where, f"job {job.job_id} runs on node {name}, which scontrol show node does "
                                          "not list")
            on_node.setdefault(name, []).append(job)
    return on_node


def _mig_node(doc: dict[str, Any], node: SlurmNode, mig_model: str | None, where: str) -> None:
    """Make ``doc`` the MIG node of ``node`` (see :func:`build_snapshot`)."""
    table = _mig_table(node, mig_model, where)
    wanted: dict[Any, int] = {}
    for name, count in node.mig:
        profile = table.profile(name)
        if profile is None:
            fail(where, f"node {node.name}: no MIG profile {name} on {table.model}; it has: {', '.join(table.names())}")
        wanted[profile] = wanted.get(profile, 0) + count
    whole = node.gpus - sum(wanted.values())
    mig_gpus = fewest_gpus(table, wanted, MAX_GPUS - whole)
    if mig_gpus is None:
        fail(where, f"node {node.name}: its MIG GRES cannot be laid out on {MAX_GPUS - whole} {table.model} GPUs")
    laid = layout_instances(table, wanted, range(mig_gpus))
    assert laid is not None
    doc["gpus"] = whole + mig_gpus
    doc["gpuModel"] = table.model
    doc["mig"] = {"gpus": "all" if not whole else list(range(mig_gpus)), "mode": "static"}
    doc["migInstances"] = [{"gpu": g, "profile": p.name, "start": s} for g, p, s in laid]


def _mig_table(node: SlurmNode, mig_model: str | None, where: str) -> MigTable:
    """The MIG table of a node with MIG GRES types (see :func:`build_snapshot`)."""
    known = tables()
    names = {name for name, _ in node.mig}
    fits = [t for t in known.values() if names <= set(t.names())]
    if len(fits) > 1:
        named = {model_key(w) for w in re.split(r"[\s,]+", node.features or "") if w}
        fits = [t for t in fits if t.model in named] or fits
    if len(fits) == 1:
        return fits[0]
    if mig_model is not None:
        key = model_key(mig_model)
        if key is None:
            fail("--mig-model", f"GPU model {mig_model!r} has no bundled MIG table; placer knows MIG on: "
                                 f"{', '.join(sorted(known))}")
        return known[key]
    which = ", ".join(t.model for t in fits) if fits else "no bundled table"
    fail(where, f"node {node.name}: MIG GRES types {', '.join(sorted(names))} fit {which}: give the GPU "
                 "model (--mig-model)")


def _held(doc: dict[str, Any], node: SlurmNode, where: str) -> list[dict[str, Any]]:
    """The first instances of each profile of ``node.mig_used`` in ``doc``'s layout."""
    out = []
    for name, count in node.mig_used:
        free = [m for m in doc["migInstances"] if m["profile"] == name and m not in out]
        if len(free) < count:
            fail(where, f"node {node.name}: GresUsed holds {count} gpu:{name}, Gres= has {len(free)}")
        out.extend(free[:count])
    return out


def _links_matrix(records: list[GresGpu], source: str) -> list[list[str]] | None:
    """The ``Links=`` matrix of one node's records in Slurm's order, None without Links=."""
    if not records or all(record.links is None for record in records):
        return None

    def order(item: tuple[int, GresGpu]) -> int:
        position, record = item
        links = record.links
        return links.index(-1) if links is not None and -1 in links else len(records) + position

    ordered = [dataclasses.replace(record, node_names=None)
               for _, record in sorted(enumerate(records), key=order)]
    return [list(row) for row in gres_links_matrix(ordered, source)]


_NODE_PATH = re.compile(r"nodes\[(\d+)\]")


@dataclass(frozen=True)
class SlurmImport:
    """What :func:`import_slurm` made of Slurm's files.

    Attributes
    ----------
    snapshot : ClusterSnapshot
        The snapshot, decoded once from :attr:`document`.
    document : dict
        The placer/v1 ClusterSnapshot document of :func:`build_snapshot`, which
        ``placer import slurm`` writes. It gives every node's ``unschedulable``,
        ``false`` included; ``snapshot.to_dict()`` is the same document without
        ``unschedulable: false`` (the default).
    notes : tuple of str
        What the files leave out that placer cannot model, one line each (the nodes that
        no switch or block of ``topology.conf`` covers).
    """

    snapshot: ClusterSnapshot
    document: dict[str, Any]
    notes: tuple[str, ...] = ()


def import_slurm(
    nodes: PathLike,
    gres: PathLike | None = None,
    topology: PathLike | None = None,
    mig_model: str | None = None,
    jobs: PathLike | None = None,
) -> SlurmImport:
    """Read Slurm's view of a cluster from files into a ClusterSnapshot and its document.

    The files are parsed (:func:`parse_scontrol_nodes`, :func:`parse_gres_conf`,
    :func:`parse_topology_conf`), :func:`build_snapshot` makes the placer/v1 document and
    :func:`placer.schema.snapshot_from_dict` decodes it, once, with every check of the
    schema.

    Parameters
    ----------
    nodes : str or os.PathLike
        ``scontrol -d show node`` output (without ``-d`` the GPU indices in use are not
        known: GPUs allocated per ``AllocTRES`` become ``unknownGpus``).
    gres : str or os.PathLike, optional
        ``gres.conf``, for the NVLink matrices of its ``Links=``.
    topology : str or os.PathLike, optional
        ``topology.conf`` (tree or block), or ``scontrol show topology`` output (tree).
    mig_model : str, optional
        The GPU model of nodes with MIG GRES types (see :func:`build_snapshot`).
    jobs : str or os.PathLike, optional
        ``scontrol show job`` output: the running jobs as pods with their priority and
        start time (see :func:`build_snapshot`).

    Returns
    -------
    SlurmImport
        The snapshot and the document it was decoded from.

    Raises
    ------
    InvalidInputError
        ``where`` = the path for a file that cannot be read; ``"<name>:<line>"`` (``name``
        the file's base name) for text that is not UTF-8 or does not parse, and for a
        node the schema refuses (at its ``NodeName=`` line, e.g. a label holding a control
        character or ``RealMemory=`` over placer's limit; the message ends with the
        placer/v1 path in parentheses).
    """
    def text(path: PathLike | None) -> tuple[str, str] | None:
        if path is None:
            return None
        name = os.path.basename(os.fspath(path))
        return read_text(path, source=name), name

    nodes_text = text(nodes)
    assert nodes_text is not None
    return import_slurm_texts(nodes_text, text(gres), text(topology), mig_model, text(jobs))


def import_slurm_texts(
    nodes: tuple[str, str],
    gres: tuple[str, str] | None = None,
    topology: tuple[str, str] | None = None,
    mig_model: str | None = None,
    jobs: tuple[str, str] | None = None,
) -> SlurmImport:
    """:func:`import_slurm` on texts already read: each a ``(text, source name)`` pair, the
    name used in errors (``scontrol -d show node:12``)."""
    nodes_name = nodes[1]
    parsed_nodes = parse_scontrol_nodes(*nodes)
    parsed_gres = None
    gres_name = "gres.conf"
    if gres is not None:
        gres_name = gres[1]
        parsed_gres = parse_gres_conf(*gres)
    parsed_topology = parse_topology_conf(*topology) if topology is not None else None
    parsed_jobs = parse_scontrol_jobs(*jobs) if jobs is not None else None
    try:
        document = build_snapshot(parsed_nodes, parsed_gres, parsed_topology, gres_name, mig_model, parsed_jobs)
        snapshot = snapshot_from_dict(document)
    except InvalidInputError as e:
        m = _NODE_PATH.match(e.where)
        if m is None:
            raise
        line = parsed_nodes[int(m.group(1))].line
        raise InvalidInputError(f"{nodes_name}:{line}", f"{e.what} (placer/v1 {e.where})") from None
    notes = ()
    if topology is not None and parsed_topology is not None:
        notes = uncovered_notes(parsed_nodes, parsed_topology, topology[1])
    return SlurmImport(snapshot=snapshot, document=document, notes=notes)


def uncovered_notes(nodes: list[SlurmNode], topology: SlurmTopology, source: str) -> tuple[str, ...]:
    """A note naming the nodes that no switch or block of ``topology`` covers (none when
    every node is covered, or the file has neither)."""
    if topology.form == "none":
        return ()
    outside = [node.name for node in nodes if node.name not in topology.nodes]
    if not outside:
        return ()
    what = "switch" if topology.form == "tree" else "block"
    return (f"{source}: {len(outside)} of {len(nodes)} node(s) are under no {what}: {some_of(outside)}; "
            f"they get no topology, so a gang that requires a topology level is not placed on them",)


def snapshot_from_slurm(
    nodes: PathLike,
    gres: PathLike | None = None,
    topology: PathLike | None = None,
) -> ClusterSnapshot:
    """Read Slurm's view of a cluster from files into a ClusterSnapshot.

    Parameters
    ----------
    nodes : str or os.PathLike
        ``scontrol -d show node`` output.
    gres : str or os.PathLike, optional
        ``gres.conf``.
    topology : str or os.PathLike, optional
        ``topology.conf`` (tree or block), or ``scontrol show topology`` output (tree).

    Returns
    -------
    ClusterSnapshot
        The snapshot of :func:`import_slurm`, decoded from the placer/v1 document of
        :func:`build_snapshot` (``placer import slurm`` writes that document;
        ``to_dict()`` gives it back without ``unschedulable: false``).

    Raises
    ------
    InvalidInputError
        As :func:`import_slurm`.
    """
    return import_slurm(nodes, gres, topology).snapshot
