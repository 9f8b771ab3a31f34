"""The ``placer`` command line (SPEC §4).

Exit status: 0 done, 1 ``check`` found violations (or, with ``--fail-on-pending``, pods
were left pending), 2 bad input or usage (one line on stderr, ``placer: error: <where>:
<what>``, no partial output file). The kernel
(:mod:`placer.placement.cluster`, :mod:`placer.placement.place`) is imported only by the commands that place.

This module parses arguments and prints; the work is the library's: output formats come
from :data:`placer.formats.OUTPUT_FORMATS`, the ``gpus``/``topo`` FILE and report from
:mod:`placer.diagnostics.topology`, the importers from :mod:`placer.adapters`.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Collection, NoReturn, Sequence

from placer import __version__, policies
from placer.text.files import STDIN, dump_json, dump_yaml, read_text, source_name, write_text_atomic
from placer.exceptions import InvalidInputError, PlacerError
from placer.replay.executors import RunsInterrupted
from placer.formats import OUTPUT_FORMATS
from placer.text.messages import bounded, closest
from placer.model import PREEMPTION_MODES
from placer.text.lines import COLOR_CHOICES, aligned, color_wanted

if TYPE_CHECKING:
    from placer.model import PlacementResult
    from placer.diagnostics.topology import LoadedTopology

__all__ = ["main"]

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_PENDING = 1  # with --fail-on-pending, as ``kubectl wait`` fails on a timeout
EXIT_BAD_INPUT = 2
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130


_POLICY_CHOICES = ", ".join(policies.names())  # --policy accepts these (placer.policies.REGISTRY)


class _UsageError(Exception):
    """A command-line usage error, reported like bad input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self._where()}: {message} (see '{self.prog} --help')")

    def _where(self) -> str:
        return self.prog.partition(" ")[2] or "command line"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # An option's value outside its choices is bad input named by the option, worded
        # as every other input error: "--format: expected text or json, got 'xml'".
        if action.option_strings and action.choices is not None and value not in action.choices:
            raise InvalidInputError(action.option_strings[-1], f"expected {_one_of(action.choices)}, got {value!r}")
        if action.choices is not None and value not in action.choices:  # a command's name
            meant = closest(value, action.choices)
            if meant is not None:
                raise _UsageError(f"{self._where()}: invalid choice {value!r} (did you mean {meant!r}?)")
            self.error(f"invalid choice {value!r} (choose from {', '.join(action.choices)})")
        super()._check_value(action, value)


def _one_of(choices: Collection[str]) -> str:
    names = list(choices)
    return " or ".join(names) if len(names) <= 2 else "one of " + ", ".join(names)


_TEXT_OR_DOCUMENT = ("text", "json", "yaml")
_DOCUMENT_FORMATS = ("json", "yaml")
_EXPLAIN_FORMATS = (*_TEXT_OR_DOCUMENT, "mig-parted")
_FORMAT_WORDS = ("json", "yaml", "wide")  # kubectl's -o words, refused as file names
_INPUT_FILES = {  # argument dest -> its name on the command line, for every file read
    "snapshot": "SNAPSHOT", "request": "REQUEST", "result": "RESULT", "file": "FILE", "queues": "QUEUES",
    "workloads": "WORKLOADS", "manifests": "FILE", "spec": "SPEC", "workload": "--workload",
    "topology": "--topology", "nodes": "--nodes", "pods": "--pods", "priority_classes": "--priority-classes",
    "pdbs": "--pdbs", "lgi": "--lgi", "list": "--list", "lgip": "--lgip", "lgipp": "--lgipp", "gres": "--gres",
    "jobs": "--jobs", "gpus": "--gpus", "apps": "--apps", "watch_file": "--watch-file", "podgroups": "--podgroups",
}
_EXIT_STATUS_EPILOG = """\
exit status: 0 done (pods may be left pending), 1 with --fail-on-pending when any pod or
gang is left pending (the output is written all the same), 2 bad input or usage.
"""


def _add_output(parser: argparse.ArgumentParser, what: str = "") -> None:
    """``-o/--output FILE``: written all or nothing (``-``: stdout)."""
    parser.add_argument("-o", "--output", metavar="FILE", help=f"write {what or 'it'} here instead of stdout")


def _add_document_format(parser: argparse.ArgumentParser) -> None:
    """``--format json|yaml`` of a command that writes a JSON document."""
    parser.add_argument("--format", metavar="FMT", default="json", choices=_DOCUMENT_FORMATS,
                        help="json (default) or yaml")


def _add_fail_on_pending(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fail-on-pending", action="store_true",
                        help="exit 1 when any pod or gang is left pending (the output is still written)")


def _document(doc: Any, fmt: str) -> str:
    """A JSON document's text in ``--format`` ``json`` (indented by 2) or ``yaml``."""
    return dump_yaml(doc) if fmt == "yaml" else dump_json(doc)


def _build_parser() -> argparse.ArgumentParser:
    from placer.adapters.kubernetes.workloads import MISSING_PODGROUP
    from placer.diagnostics.topology import ALL_SIZES_MAX_GPUS, LARGE_NODE_MAX_SIZE

    parser = _Parser(
        prog="placer",
        description="GPU placement for AI clusters: place pods and gangs, check placements.",
    )
    parser.add_argument("--version", action="version", version=f"placer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "place", help="place a request's pods on a snapshot; write a PlacementResult",
        description=(
            "Place the pods of REQUEST on the cluster of SNAPSHOT, by priority then in request order,\n"
            "gangs all or nothing, and write a PlacementResult: each pod's node and GPU indices, or\n"
            "why it cannot be placed. The snapshot does not change; see 'placer check' to verify."
        ),
        epilog=_EXIT_STATUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _placement_arguments(p)
    p.add_argument(
        "--preemption", metavar="MODE", choices=PREEMPTION_MODES,
        help="override the request's preemption mode: none, greedy, exact or auto",
    )
    p.set_defaults(handler=_cmd_place)

    pr = sub.add_parser(
        "preempt", help="place with preemption on: evict lower-priority pods where that makes room",
        description=(
            "Place REQUEST on SNAPSHOT as 'placer place' does, but a pod or gang that does not fit\n"
            "evicts running pods of lower priority when that makes it fit (the request's preemption\n"
            "mode, auto when it says none): PodDisruptionBudgets are honoured where they can be,\n"
            "running gangs go whole. The result lists the preemptions (victims, nodes, PDB\n"
            "violations) and marks the preemptors' assignments nominated."
        ),
        epilog=_EXIT_STATUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _placement_arguments(pr)
    pr.set_defaults(handler=_cmd_preempt)

    c = sub.add_parser(
        "check", help="verify a PlacementResult independently; exit 1 on violations",
        description=(
            "Check RESULT against SNAPSHOT and REQUEST without the placement code: every pod once,\n"
            "filters, resources, GPU indices, gangs and their topology. Prints each violation;\n"
            "exit 0 when there is none, 1 when there are, 2 on unreadable input."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    c.add_argument("request", metavar="REQUEST", help="PlacementRequest file (JSON or YAML)")
    c.add_argument("result", metavar="RESULT", help="PlacementResult file (JSON or YAML)")
    _add_output(c, "the violations (or the OK line)")
    c.set_defaults(handler=_cmd_check)

    g = sub.add_parser(
        "gpus",
        help="the best set of GPUs inside one node, from its link topology",
        description=(
            "Choose SIZE GPUs among the available ones of one node by the pair scores of its links;\n"
            "print {gpus, size, objective, setScore} as one JSON line."
        ),
        epilog=_GPUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument(
        "--topology", metavar="FILE", required=True,
        help="nvidia-smi topo -m output ('-' for stdin), or a .json/.yaml/.yml gpuTopology document",
    )
    g.add_argument("--available", metavar="LIST", help="free GPU indices, comma-separated (default: all)")
    g.add_argument("--size", metavar="N", required=True, help="GPUs wanted (at least 1)")
    g.add_argument(
        "--required", metavar="LIST", default="", help="GPU indices the set must hold, comma-separated"
    )
    g.add_argument(
        "--objective", metavar="OBJ", default="tiling", help="tiling (default) or best-set, see below"
    )
    g.add_argument("--format", metavar="FMT", default="json", choices=_DOCUMENT_FORMATS,
                   help="json (default: one line) or yaml")
    _add_output(g)
    g.set_defaults(handler=_cmd_gpus)

    t = sub.add_parser(
        "topo",
        help="the parsed link matrix of nvidia-smi topo -m, its NVLink islands, best set per size",
        description=(
            "Print the GPU link matrix (and NICs) read from FILE, its NVLink islands, and for each\n"
            "set size the best set of GPUs under both objectives when every GPU is free."
        ),
        epilog=_TOPO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument(
        "file", metavar="FILE",
        help="nvidia-smi topo -m output ('-' for stdin), or a .json/.yaml/.yml gpuTopology document",
    )
    t.add_argument("--format", metavar="FMT", default="text", choices=_TEXT_OR_DOCUMENT,
                   help="text (default), json or yaml")
    _add_output(t)
    t.add_argument(
        "--max-size", metavar="N",
        help=f"largest set size to show (default: every size up to {ALL_SIZES_MAX_GPUS} GPUs, "
        f"else at most {LARGE_NODE_MAX_SIZE})",
    )
    t.set_defaults(handler=_cmd_topo)

    e = sub.add_parser(
        "explain", help="why each pod or gang of a request that cannot be placed cannot",
        description=(
            "Place REQUEST on SNAPSHOT and, for each pod or gang left pending, say why: the cause\n"
            "class (registration, too large, filters, fragmentation, topology, capacity), what is\n"
            "short and by how much, and the nodes counted per reason. A MIG pod is explained per\n"
            "MIG GPU, with the idle static GPUs a re-split would place it on (--format mig-parted\n"
            "writes them as an nvidia-mig-parted configuration)."
        ),
        epilog=_EXIT_STATUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    e.add_argument("request", metavar="REQUEST", help="PlacementRequest file (JSON or YAML)")
    e.add_argument(
        "--format", metavar="FMT", default="text", choices=_EXPLAIN_FORMATS,
        help="text (default), json, yaml, or mig-parted (an nvidia-mig-parted configuration re-splitting the "
        "idle static MIG GPUs that would place the pending MIG pods; GPUs with an instance in use never listed)",
    )
    _add_output(e)
    _add_fail_on_pending(e)
    _add_color_option(e)
    e.set_defaults(handler=_cmd_explain)

    r = sub.add_parser(
        "report", help="schedulable pods per request shape, fragmentation and findings of a snapshot",
        description=(
            "For each request shape, how many pods of it still fit on SNAPSHOT and how many of the\n"
            "free GPUs they can use; the FGD fragment of the free GPUs; findings (unhealthy GPUs,\n"
            "cordoned, drained and tainted nodes, GPUs not registered, pods whose GPUs are unknown)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    r.add_argument(
        "--workload", metavar="W",
        help="pods whose shapes to report and to measure fragmentation against: a PlacementRequest "
        "(JSON or YAML) or an openb pod CSV (default: 1, 2, 4, 8, 0.5 and 0.25 GPU)",
    )
    r.add_argument("--format", metavar="FMT", default="text", choices=_TEXT_OR_DOCUMENT,
                   help="text (default), json or yaml")
    r.add_argument(
        "--nodes", action="store_true",
        help="instead, one row per node (like sinfo -N): state, GPUs free/total, MIG instances free/total, "
        "pods; with --format json a \"nodes\" list",
    )
    _add_output(r)
    _add_color_option(r)
    r.set_defaults(handler=_cmd_report)

    im = sub.add_parser(
        "import", help="a ClusterSnapshot or PlacementRequest from kubectl or Slurm output",
        description=(
            "Turn what a cluster's own tools print into placer's documents: 'kubernetes' and\n"
            "'slurm' (and 'nvidia-smi' for one MIG node) write a ClusterSnapshot,\n"
            "'kubernetes-request' a PlacementRequest. What is read but not carried over is one\n"
            "note line on stderr. 'placer import SOURCE --help' tells more."
        ),
        epilog=_IMPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    isub = im.add_subparsers(dest="source", metavar="SOURCE", required=True)
    ik = isub.add_parser(
        "kubernetes", help="kubectl get nodes/pods -o json (or YAML) to a ClusterSnapshot",
        description=(
            "A ClusterSnapshot from kubectl's output: the nodes (GPUs, MIG, time-slicing and MPS\n"
            "from the NVIDIA GPU operator's labels, allocatable CPU and memory, taints,\n"
            "cordons), the pods running on them (their GPUs, requests, priority), priority\n"
            "classes and PodDisruptionBudgets; --level maps node labels to topology levels."
        ),
        epilog=(
            "examples:\n"
            "  kubectl get nodes -o json > nodes.json\n"
            "  kubectl get pods -A -o json > pods.json\n"
            "  placer import kubernetes --nodes nodes.json --pods pods.json -o cluster.json\n"
            "  placer import kubernetes --nodes nodes.json --pods pods.json \\\n"
            "      --priority-classes classes.json --pdbs pdbs.json --level rack=example.com/rack -o cluster.json\n"
            "  kubectl get nodes -o json | placer import kubernetes --nodes - --format yaml"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ik.add_argument("--nodes", metavar="FILE", required=True, help="kubectl get nodes -o json")
    ik.add_argument("--pods", metavar="FILE", help="kubectl get pods -A -o json (running pods)")
    ik.add_argument(
        "--priority-classes", metavar="FILE",
        help="kubectl get priorityclasses -o json: priorities of pods that name a class only",
    )
    ik.add_argument("--pdbs", metavar="FILE", help="kubectl get pdb -A -o json: PodDisruptionBudgets")
    ik.add_argument(
        "--level", metavar="NAME=LABEL", action="append", default=[],
        help="a topology level and the node label giving it, outermost first (repeat)",
    )
    ik.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    _add_document_format(ik)
    ik.set_defaults(handler=_cmd_import_kubernetes)
    iw = isub.add_parser(
        "kubernetes-request",
        help="Pods, Jobs, JobSets, PodGroups, Volcano and Kueue manifests to a PlacementRequest",
        description=(
            "A PlacementRequest from workload manifests or kubectl get pods output: Pods (the\n"
            "pending ones), Jobs, JobSets, Deployments and other pod templates, scheduler-plugins\n"
            "and Volcano PodGroups (gangs), Volcano Jobs, Kueue topology annotations. Priority\n"
            "class names become pod priorities (classes in the files or --priority-classes)."
        ),
        epilog=(
            "examples:\n"
            "  placer import kubernetes-request job.yaml jobset.yaml --level rack=example.com/rack -o request.json\n"
            "  kubectl get pods -A -o json > pods.json\n"
            "  kubectl get priorityclasses -o json > classes.json\n"
            "  placer import kubernetes-request pods.json --priority-classes classes.json -o request.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    iw.add_argument("manifests", metavar="FILE", nargs="+", help="YAML or JSON manifests")
    iw.add_argument("--level", metavar="NAME=LABEL", action="append", default=[], help="as for import kubernetes")
    iw.add_argument(
        "--priority-classes", metavar="FILE",
        help="kubectl get priorityclasses -o json: priorities of pods that name a class only",
    )
    iw.add_argument("--policy", metavar="P", help=f"the request's policy: {_POLICY_CHOICES}")
    iw.add_argument(
        "--all-phases", action="store_true",
        help="import every Pod object; by default only pending pods not bound to a node and owned by "
        "no DaemonSet (Running, Succeeded, Failed, bound and DaemonSet pods are skipped and counted)",
    )
    iw.add_argument(
        "--missing-podgroup", metavar="HOW", default=MISSING_PODGROUP[0], choices=MISSING_PODGROUP,
        help="pods naming a PodGroup the files lack: error (default) or gang-of-present-pods "
        "(the pods present form the gang)",
    )
    iw.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    _add_document_format(iw)
    iw.set_defaults(handler=_cmd_import_kubernetes_request)
    ins = isub.add_parser(
        "nvidia-smi", help="nvidia-smi mig -lgi (and -L, -lgip, -lgipp) of one node to a ClusterSnapshot with its MIG instances",
        description=(
            "A ClusterSnapshot of one node and its MIG instances, from nvidia-smi run on it: the\n"
            "GPU instances (mig -lgi), the GPUs and MIG device UUIDs (-L), and the profiles and\n"
            "placements (mig -lgip, -lgipp) checked against placer's bundled table."
        ),
        epilog=(
            "examples:\n"
            "  nvidia-smi mig -lgi > lgi.txt; nvidia-smi -L > list.txt\n"
            "  placer import nvidia-smi --node dgx-01 --lgi lgi.txt --list list.txt -o dgx-01.json\n"
            "  nvidia-smi mig -lgi | placer import nvidia-smi --node dgx-01 --lgi - --gpu-model A100-SXM4-40GB"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ins.add_argument("--node", metavar="NAME", required=True, help="the node's name")
    ins.add_argument("--lgi", metavar="FILE", required=True, help="nvidia-smi mig -lgi output: the instances")
    ins.add_argument("--list", metavar="FILE", help="nvidia-smi -L output: GPU count and model, MIG device UUIDs")
    ins.add_argument("--lgip", metavar="FILE", help="nvidia-smi mig -lgip output, compared with the bundled table")
    ins.add_argument("--lgipp", metavar="FILE", help="nvidia-smi mig -lgipp output, compared with the bundled table")
    ins.add_argument("--gpu-model", metavar="MODEL", help="the GPU model (else from --list)")
    ins.add_argument("--mode", choices=("static", "dynamic"), default="static", help="the node's MIG mode (default static)")
    ins.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    _add_document_format(ins)
    ins.set_defaults(handler=_cmd_import_nvidia_smi)
    isl = isub.add_parser(
        "slurm", help="scontrol -d show node, gres.conf and topology.conf to a ClusterSnapshot",
        description=(
            "A ClusterSnapshot of a Slurm cluster: nodes, GPUs and their use from scontrol -d show\n"
            "node, GPU links from gres.conf, the switch tree or blocks from topology.conf (or\n"
            "scontrol show topology), running jobs from scontrol show job; --live asks scontrol."
        ),
        epilog=(
            "examples:\n"
            "  scontrol -d show node > nodes.txt\n"
            "  placer import slurm --nodes nodes.txt --gres gres.conf --topology topology.conf -o cluster.json\n"
            "  placer import slurm --nodes nodes.txt --jobs <(scontrol show job) -o cluster.json\n"
            "  placer import slurm --live -o cluster.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    isl.add_argument("--nodes", metavar="FILE", help="scontrol -d show node output (or --live)")
    isl.add_argument(
        "--live", action="store_true",
        help="run scontrol (-d show node, show topology, show job) on the cluster this machine's Slurm "
        "configuration names instead of reading --nodes, --topology and --jobs",
    )
    isl.add_argument("--gres", metavar="FILE", help="gres.conf (Links= give GPU topology)")
    isl.add_argument(
        "--topology", metavar="FILE",
        help="topology.conf (tree or block) or scontrol show topology output (tree)",
    )
    isl.add_argument(
        "--jobs", metavar="FILE",
        help="scontrol show job output: running jobs as pods with their priority and start time (for preemption)",
    )
    isl.add_argument(
        "--mig-model", metavar="MODEL",
        help="GPU model of nodes whose GRES types are MIG profiles (gpu:1g.10gb), when not told by them",
    )
    isl.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    _add_document_format(isl)
    isl.set_defaults(handler=_cmd_import_slurm)

    from placer.diagnostics.reconcile import DEFAULT_INTERVAL_S

    rc = sub.add_parser(
        "reconcile", help="GPUs busy without a live pod (zombies) and GPUs held but idle, on one node",
        description=(
            "Compare what SNAPSHOT says the pods of NODE hold with what nvidia-smi sees on it: GPUs\n"
            "with processes but no pod holding them (zombies keeping a job pending) and GPUs held\n"
            "by a pod but running nothing. The nvidia-smi output comes from the files --gpus and\n"
            "--apps, or, without them, from running the two queries here (on NODE).\n\n"
            "--watch repeats this every --interval seconds, reading SNAPSHOT again each round, and\n"
            "prints one JSON line per round ({\"round\", \"time\" in UTC, \"node\", \"zombies\", \"idle\",\n"
            "...}). A round that fails (nvidia-smi, or SNAPSHOT caught half-written) prints one\n"
            "error line on stderr and the watch goes on; Ctrl-C ends it.\n\n"
            "exit status: 0 done (with --watch: every round succeeded), 1 some --watch round\n"
            "failed, 2 bad input or usage (nvidia-smi not found, a bad option)."
        ),
        epilog=(
            "examples:\n"
            "  placer reconcile cluster.json --node dgx-01 --gpus gpus.csv --apps apps.csv\n"
            "  placer reconcile cluster.json --node dgx-01                # runs nvidia-smi\n"
            "  placer reconcile cluster.json --node dgx-01 --watch --interval 60"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rc.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    rc.add_argument("--node", metavar="NAME", required=True, help="the node the nvidia-smi output comes from")
    rc.add_argument(
        "--gpus", metavar="CSV",
        help="nvidia-smi --query-gpu=index,uuid --format=csv output (with --apps; default: run it)",
    )
    rc.add_argument(
        "--apps", metavar="CSV",
        help="nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv output "
             "(with --gpus; default: run it)",
    )
    rc.add_argument(
        "--nvidia-smi", metavar="PATH", dest="nvidia_smi",
        help="the nvidia-smi to run (default: nvidia-smi on the PATH)",
    )
    rc.add_argument(
        "--watch", action="store_true",
        help="reconcile every --interval seconds, one JSON line per round, until Ctrl-C or --rounds",
    )
    rc.add_argument(
        "--interval", metavar="SECONDS",
        help=f"with --watch: seconds from one round to the next, > 0 (default: {DEFAULT_INTERVAL_S:g})",
    )
    rc.add_argument("--rounds", metavar="N", help="with --watch: stop after N rounds (default: never)")
    rc.add_argument("--format", metavar="FMT", default="json", choices=_DOCUMENT_FORMATS,
                    help="json (default) or yaml; not with --watch (one JSON line per round)")
    _add_output(rc, "the findings (not with --watch)")
    rc.set_defaults(handler=_cmd_reconcile)

    d = sub.add_parser("demo", help="place the bundled example cluster and print what happened")
    d.add_argument(
        "--policy", metavar="P", default=policies.DEFAULT, help=f"placement policy: {_POLICY_CHOICES} (default: {policies.DEFAULT})"
    )
    d.set_defaults(handler=_cmd_demo)

    s = sub.add_parser(
        "simulate",
        help="replay an openb trace per policy and seed; unallocated GPUs beside the FGD study",
        description=(
            "Replay a GPU trace the FGD study's way (Weng et al., USENIX ATC '23): per seed, shuffle the pods,\n"
            "inflate them to 130 % of the cluster's GPU capacity, place them one at a time; write\n"
            "DIR/curves.csv, DIR/table.md (unallocated GPU % at 90..130 % arrived beside the\n"
            "published values) and DIR/curves.png. The protocol: placer.replay.simulate's docstring and the\n"
            "README, \"Fragmentation and trace replay\"."
        ),
        epilog=_SIMULATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--nodes", metavar="CSV", help="openb node list (default: the bundled 1213 GPU nodes)")
    s.add_argument(
        "--pods", metavar="CSV",
        help="openb pod list (default: the bundled default trace); workload name from "
        "openb_pod_list_<name>.csv, else the file's stem",
    )
    s.add_argument(
        "--policy", metavar="P", default="all",
        help=f"a policy, a comma-separated list, or all (default: fgd-pack and the study's six); "
        f"policies: {_POLICY_CHOICES}",
    )
    s.add_argument("--seeds", metavar="LIST", default="42-51", help="42-51 (default) or 1,2,3")
    s.add_argument("--out", metavar="DIR", default="simulate-out", help="output directory (default: ./simulate-out)")
    s.add_argument("--jobs", metavar="N", help="worker processes (default: the CPU count; with --executor ray and "
                   "no --address, the CPUs of the local Ray)")
    s.add_argument("--executor", metavar="E", default="local",
                   help="local (default: processes on this machine) or ray (pip install 'placer[ray]')")
    s.add_argument("--address", metavar="ADDR",
                   help="the Ray cluster for --executor ray (e.g. ray://head:10001; default: a local Ray)")
    _connect_timeout_argument(s)
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument("--no-plot", action="store_true", help="skip curves.png (and importing matplotlib)")
    t = s.add_argument_group(
        "replay over time (--timeline)",
        "jobs arrive and leave (openb creation time, lifetime = deletion - scheduled time), wait in Kueue "
        "ClusterQueues and run where placer places them; writes DIR/timeline.csv, DIR/queues.md and a plot",
    )
    t.add_argument("--timeline", action="store_true", help="replay over time through queues instead of the FGD replay")
    t.add_argument("--load", metavar="LIST", default="0.9",
                   help="offered GPU load(s), e.g. 0.9 or 0.7,0.9,1.1 (default: 0.9)")
    t.add_argument("--queues", metavar="SETUP", default="qos",
                   help="qos (inference: LS+Guaranteed, training: BE+Burstable; default) or teams:N")
    t.add_argument("--strategy", metavar="S", default="BestEffortFIFO",
                   help="queueing strategy, a list allowed: BestEffortFIFO (default), StrictFIFO")
    t.add_argument("--preemption", metavar="ON", default="on", help="on (default), off, or on,off")
    t.add_argument("--horizon", metavar="T", default="6h", help="length of the replay: 3600, 90m, 6h, 1d (default: 6h)")
    t.add_argument("--shrink", metavar="F", default="1", help="keep this fraction of the nodes (default: 1)")
    s.set_defaults(handler=_cmd_simulate)
    _add_defrag_parser(sub)
    _add_admit_parser(sub)
    _add_sweep_parser(sub)
    _add_serve_parser(sub)
    return parser


def _placement_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments ``place`` and ``preempt`` share: the two files, output, overrides."""
    parser.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    parser.add_argument("request", metavar="REQUEST", help="PlacementRequest file (JSON or YAML)")
    parser.add_argument("-o", "--output", metavar="RESULT", help="write the result here instead of stdout")
    parser.add_argument("--policy", metavar="P", help=f"override the request's policy: {_POLICY_CHOICES}")
    parser.add_argument("--seed", metavar="N", help="override the request's seed")
    parser.add_argument(
        "--format", metavar="FMT", default="json", choices=tuple(OUTPUT_FORMATS),
        help="json (a PlacementResult, default), yaml (the same as YAML), k8s-binding (YAML Binding "
        "objects of the placed pods; the pending ones named on stderr), k8s-binding-json, env (NVIDIA_VISIBLE_DEVICES per pod) or slurm "
        "(sbatch/srun --nodelist, --nodes, --ntasks-per-node and --gres per job; the GPU indices placer "
        "chose, which Slurm cannot be told, as comments)",
    )
    _add_fail_on_pending(parser)


def _add_defrag_parser(sub: Any) -> None:
    df = sub.add_parser(
        "defrag", help="make room by moving movable running pods; write a PlacementResult with moves",
        description=(
            "Place the pods of REQUEST on SNAPSHOT as 'place' does; for a pod that does not fit, find\n"
            "the fewest moves of running pods marked movable (then the least GPU moved) after which it\n"
            "fits. Writes a PlacementResult with \"moves\" ({pod, from, to, gpus}, in the order to make\n"
            "them) and \"rooms\" (per such pod: moves, gpuMilliMoved, status). The snapshot does not\n"
            "change; 'placer check' verifies the moves and the placement."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    df.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    df.add_argument("request", metavar="REQUEST", help="PlacementRequest file (JSON or YAML)")
    df.add_argument("-o", "--output", metavar="OUT", help="write the result here instead of stdout")
    _add_document_format(df)
    df.add_argument("--max-moves", metavar="K", help="moves allowed for the whole request (default: no limit)")
    df.add_argument("--policy", metavar="P", help=f"override the request's policy: {_POLICY_CHOICES}")
    df.add_argument("--seed", metavar="N", help="override the request's seed")
    df.set_defaults(handler=_cmd_defrag)


_IMPORT_EXAMPLES = """\
examples:
  placer import kubernetes --nodes nodes.json --pods pods.json -o cluster.json
  placer import kubernetes-request pods.json --priority-classes classes.json -o request.json
  placer import slurm --nodes nodes.txt --gres gres.conf -o cluster.json
  placer import nvidia-smi --node dgx-01 --lgi lgi.txt --list list.txt -o dgx-01.json
"""

_ADMIT_EPILOG = """\
QUEUES and WORKLOADS are Kueue's own objects (kueue.x-k8s.io v1beta1 or v1beta2, JSON or
YAML, single objects, multi-document YAML or kubectl's List): ResourceFlavors,
ClusterQueues, Cohorts, LocalQueues, WorkloadPriorityClasses and Kueue's Configuration
(fair sharing); Workloads (admitted ones carry status.admission) and Jobs, JobSets, Pods
labelled kueue.x-k8s.io/queue-name. Any file may hold any of them.

examples:
  placer admit cluster.json queues.yaml workloads.yaml
  placer admit cluster.json queues.yaml jobs/*.yaml --format json -o cycle.json
  kubectl get clusterqueues,cohorts,resourceflavors,localqueues -A -o yaml > queues.yaml
  kubectl get workloads -A -o yaml > workloads.yaml
  placer admit cluster.json queues.yaml workloads.yaml --policy best-fit
"""


def _add_sweep_parser(sub: Any) -> None:
    sw = sub.add_parser(
        "sweep", help="a grid of replays from one spec, locally or on Ray; resumable",
        description=(
            "Run every combination of a Sweep spec's workloads, policies, seeds (and, for the\n"
            "timeline replay, loads, queue set-ups, strategies and preemption; for fgd-pack its\n"
            "weights). Writes DIR/results.csv (one row per run, grid values then figures),\n"
            "DIR/summary.md (medians and spreads over the seeds) and DIR/summary.png. Runs already\n"
            "in DIR/results.csv are not run again."
        ),
        epilog="examples:\n  placer sweep fgd-study --out fgd-study/          # the bundled FGD grid, 1,020 runs\n"
               "  placer sweep my-sweep.yaml --out out/ --executor ray --address ray://head:10001",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sw.add_argument("spec", metavar="SPEC", help="a Sweep spec (JSON or YAML), or a bundled one by name: fgd-study")
    sw.add_argument("--out", metavar="DIR", required=True, help="output directory (created; reused to resume)")
    sw.add_argument("--executor", metavar="E", default="local", help="local (default) or ray")
    sw.add_argument("--address", metavar="ADDR", help="the Ray cluster for --executor ray (default: a local Ray)")
    _connect_timeout_argument(sw)
    sw.add_argument("--jobs", metavar="N", help="worker processes (default: the CPU count), or a local Ray's CPUs")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.add_argument("--no-plot", action="store_true", help="skip summary.png")
    sw.set_defaults(handler=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from placer.replay.sweep import bundled_sweep, run_sweep

    spec = args.spec
    if spec != STDIN and not os.path.exists(spec) and os.sep not in spec and "." not in spec:
        spec = str(bundled_sweep(spec))
    jobs = _positive_int(args.jobs, "--jobs") if args.jobs is not None else None
    executor = _executor(args)
    _check_out_dir(args.out)
    failed: list[Any] = []
    outcome = run_sweep(spec, args.out, executor=executor, jobs=jobs, address=args.address,
                        progress=not args.quiet, plot=not args.no_plot, on_failure=failed.append,
                        connect_timeout=args.connect_timeout, on_removed=_removed_note("sweep"))
    for failure in failed:
        sys.stderr.write(f"placer: sweep: run {' '.join(v for v in failure.key if v)} failed twice: {failure.error}\n")
    _emit(
        f"{outcome.ran} run(s) done, {outcome.skipped} already in results.csv, {len(failed)} failed, "
        f"{outcome.wall_s:.1f} s\nwrote " + ", ".join(str(p) for p in outcome.paths) + "\n"
    )
    return EXIT_VIOLATIONS if failed else EXIT_OK


def _add_serve_parser(sub: Any) -> None:
    sv = sub.add_parser(
        "serve", help="a kube-scheduler extender: filter, prioritize, preempt and bind over HTTP",
        description=(
            "Serve kube-scheduler's extender verbs on SNAPSHOT's cluster: POST /filter, /prioritize,\n"
            "/preempt, /bind (k8s.io/kube-scheduler/extender/v1), GET /livez, /readyz (503 while the\n"
            "watch fails or the state is older than --max-staleness), /healthz and /metrics\n"
            "(Prometheus). Binds keep the state current; so do watch events, from the API server\n"
            "(--kubeconfig) or recorded (--watch-file: kubectl get pods -w -o json output).\n"
            "bind posts the Binding through --kubeconfig; without it, bind is refused unless\n"
            "--dry-run (binds recorded in placer's state, nothing posted).\n"
            "Pods of a PodGroup wait in filter until the whole gang fits.\n"
            "Callers authenticate by a client certificate (--client-ca, with --tls-cert: what\n"
            "kube-scheduler's tlsConfig sends) or a bearer token (--token-file, for other callers;\n"
            "the GET probes and /metrics stay open). Beyond loopback one of them is required, or\n"
            "--insecure. docs/extender.md has a KubeSchedulerConfiguration and the security model."
        ),
        epilog="examples:\n  placer serve --snapshot cluster.json --port 8888 --dry-run\n"
               "  placer serve --snapshot cluster.json --kubeconfig ~/.kube/config --level rack=topology.kubernetes.io/rack\n"
               "  placer serve --snapshot cluster.json --kubeconfig ~/.kube/config --host 0.0.0.0 \\\n"
               "      --tls-cert server.crt --tls-key server.key --client-ca ca.crt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sv.add_argument("--snapshot", metavar="FILE", required=True,
                    help="ClusterSnapshot (JSON or YAML), e.g. placer import kubernetes output")
    sv.add_argument("--kubeconfig", metavar="FILE", help="watch nodes, pods and PodGroups and bind through this cluster")
    sv.add_argument("--watch-file", metavar="FILE", action="append", default=[],
                    help="recorded watch events to apply at start (kubectl get pods -w -o json); repeatable")
    sv.add_argument("--podgroups", metavar="FILE", action="append", default=[],
                    help="PodGroup objects (kubectl get podgroups -A -o json); repeatable")
    sv.add_argument("--level", metavar="NAME=LABEL", action="append", default=[],
                    help="topology level of watched nodes and gangs, outermost first; repeatable")
    sv.add_argument("--policy", metavar="P", default=policies.DEFAULT,
                    help=f"placement policy: {_POLICY_CHOICES} (default: {policies.DEFAULT})")
    sv.add_argument("--dry-run", action="store_true",
                    help="answer bind by holding the GPUs in placer's state, posting no Binding")
    sv.add_argument("--max-staleness", metavar="SECONDS",
                    help="with --kubeconfig: /readyz fails when the API server's last news is older "
                         "(default: 600, twice the watch's timeout)")
    sv.add_argument("--pending-ttl", metavar="SECONDS",
                    help="forget a pod seen only through filter this long after its last filter (default: 300)")
    sv.add_argument("--max-pending", metavar="N",
                    help="remember at most N pods seen only through filter, oldest forgotten first (default: 10000)")
    sv.add_argument("--sync-interval", metavar="SECONDS", default="1",
                    help="apply watch events at most this often (default: 1; 0: before every verb)")
    sv.add_argument("--host", metavar="ADDR", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    sv.add_argument("--port", metavar="N", default="8888", help="port (default: 8888; 0: any free port)")
    sv.add_argument("--probe-port", metavar="N",
                    help="also serve GET /livez and /readyz alone on this port of --host, in plain HTTP and "
                         "without auth: for kubelet's httpGet probes under --client-ca (0: any free port)")
    sv.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (with --tls-key)")
    sv.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    sv.add_argument("--client-ca", metavar="PEM",
                    help="require of every connection a client certificate signed by one of these CAs "
                         "(mutual TLS; with --tls-cert)")
    sv.add_argument("--token-file", metavar="FILE",
                    help="require 'Authorization: Bearer <the file's token>' for the verbs (not for GET "
                         "/livez, /readyz, /healthz, /metrics); kube-scheduler cannot send one: use --client-ca")
    sv.add_argument("--insecure", action="store_true",
                    help="allow listening beyond loopback without --client-ca or --token-file (warned at start)")
    _add_serve_limits(sv)
    sv.set_defaults(handler=_cmd_serve)


def _add_serve_limits(sv: argparse.ArgumentParser) -> None:
    # the defaults are placer.serve.app.Limits' and kube_live.API_TIMEOUT_S (not imported here: every command builds
    # this parser); a test compares
    sv.add_argument("--api-timeout", metavar="SECONDS",
                    help="the most a Binding call or a list of the watch may take; then bind answers an error, "
                         "the list is retried (default: 10)")
    sv.add_argument("--max-body-bytes", metavar="N",
                    help="a larger request body is answered 413 (default: 67108864, 64 MiB; at most 256 MiB)")
    sv.add_argument("--header-timeout", metavar="SECONDS",
                    help="close a connection whose request headers take longer, or that idles that long after "
                         "an answer (default: 10)")
    sv.add_argument("--body-timeout", metavar="SECONDS",
                    help="answer 408 to a body not read whole in this time (default: 30)")
    sv.add_argument("--max-connections", metavar="N",
                    help="past this many open connections, requests are answered 503 (default: 256)")


def _serve_limits(args: argparse.Namespace) -> Any:
    """The :class:`placer.serve.app.Limits` of ``placer serve``'s options (its defaults for those not given)."""
    from placer.schema.extender import MAX_BODY_BYTES
    from placer.serve.app import Limits

    given: dict[str, Any] = {}
    if args.max_body_bytes is not None:
        given["max_body_bytes"] = _positive_int(args.max_body_bytes, "--max-body-bytes")
        if given["max_body_bytes"] > MAX_BODY_BYTES:
            raise InvalidInputError("--max-body-bytes", f"expected at most {MAX_BODY_BYTES} (256 MiB), got "
                                    f"{args.max_body_bytes}")
    if args.header_timeout is not None:
        given["header_timeout_s"] = _seconds(args.header_timeout, "--header-timeout", positive=True)
    if args.body_timeout is not None:
        given["body_timeout_s"] = _seconds(args.body_timeout, "--body-timeout", positive=True)
    if args.max_connections is not None:
        given["max_connections"] = _positive_int(args.max_connections, "--max-connections")
    return Limits(**given)


def _cmd_serve(args: argparse.Namespace) -> int:
    import queue
    import threading

    from placer.adapters.kubernetes import live as kube_live
    from placer.serve.extender import (
        MAX_PENDING, PENDING_TTL_S, Binder, Extender, RecordingBinder, RefusingBinder,
    )
    from placer.serve.app import (
        MAX_STALENESS_S, create_app, create_probe_app, exposure_warning, read_token, require_server, run,
    )

    require_server()
    port = _port(args.port)
    probe_port = _port(args.probe_port, "--probe-port") if args.probe_port is not None else None
    if probe_port is not None and probe_port == port != 0:
        raise InvalidInputError("--probe-port", f"expected a port other than --port {port}: the probes get a "
                                                "listener of their own")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise InvalidInputError("--tls-cert", "give both --tls-cert and --tls-key, or neither")
    tls = (args.tls_cert, args.tls_key) if args.tls_cert is not None else None
    scheme = "https" if tls else "http"
    if args.client_ca is not None and args.token_file is not None:
        raise InvalidInputError("--token-file", "give --client-ca or --token-file, not both: with --client-ca every "
                                                "caller has a certificate, and kube-scheduler sends no token")
    token = read_token(args.token_file) if args.token_file is not None else None
    warning = exposure_warning(args.host, tls=tls is not None, client_ca=args.client_ca is not None,
                               token=token is not None, insecure=args.insecure)
    policy = policies.get(args.policy, "--policy").name
    podgroups = [pg for f in args.podgroups for pg in kube_live.read_podgroups(f)]
    events = [e for f in args.watch_file for e in kube_live.read_watch_file(f)]
    client = kube_live.api_client(args.kubeconfig) if args.kubeconfig else None
    api_timeout = kube_live.API_TIMEOUT_S
    if args.api_timeout is not None:
        api_timeout = _seconds(args.api_timeout, "--api-timeout", positive=True)
    limits = _serve_limits(args)
    binder: Binder = (
        RecordingBinder() if args.dry_run
        else kube_live.KubeBinder(client, timeout_s=api_timeout) if client is not None else RefusingBinder()
    )
    interval = _seconds(args.sync_interval, "--sync-interval")
    pending_ttl = PENDING_TTL_S
    if args.pending_ttl is not None:
        pending_ttl = _seconds(args.pending_ttl, "--pending-ttl", positive=True)
    max_pending = MAX_PENDING if args.max_pending is None else _count(args.max_pending, "--max-pending", least=1)
    max_staleness = MAX_STALENESS_S
    if args.max_staleness is not None:
        max_staleness = _seconds(args.max_staleness, "--max-staleness", positive=True)
    notes = []
    if args.dry_run:
        notes.append("--dry-run: binds are held in placer's memory only: no Binding is posted, and a restart "
                     "forgets them")
    if args.max_staleness is not None and client is None:
        notes.append("--max-staleness has no effect without --kubeconfig (no watch to go stale)")
    if args.insecure and warning is None:
        notes.append("--insecure has no effect: " + ("callers authenticate" if args.client_ca or token else
                                                     f"{args.host} is loopback"))
    if args.api_timeout is not None and client is None:
        notes.append("--api-timeout has no effect without --kubeconfig (no API server is called)")
    extender = Extender(args.snapshot, policy=policy, levels=args.level, podgroups=podgroups, binder=binder,
                        sync_interval_s=interval, pending_ttl_s=pending_ttl, max_pending=max_pending)
    extender.queue(events)
    extender.sync(now=True)
    _notes("serve", notes)
    if warning is not None:
        sys.stderr.write(f"placer: serve: warning: {warning}\n")
    feed: queue.Queue[kube_live.WatchEvent | kube_live.Listing] = queue.Queue()
    stop = threading.Event()
    watch = kube_live.WatchHealth() if client is not None else None
    state = extender.state()

    def ready(bound: int, probe_port: int | None = None) -> None:
        probes = f"; /livez, /readyz also on http://{args.host}:{probe_port}" if probe_port is not None else ""
        sys.stderr.write(
            f"placer serve: listening on {scheme}://{args.host}:{bound} ({state['nodes']} nodes, {state['pods']} pods, "
            f"policy {policy}{', watching ' + args.kubeconfig if client is not None else ''}{probes})\n"
        )
        sys.stderr.flush()
        if client is not None:  # after the banner: its failures are logged below it
            kube_live.watch_cluster(client, feed.put, stop, health=watch, request_timeout_s=api_timeout)

    try:
        app = create_app(extender, feed, watch=watch, max_staleness_s=max_staleness, token=token, limits=limits)
        probe_app = None if probe_port is None else create_probe_app(extender, watch=watch,
                                                                     max_staleness_s=max_staleness)
        run(app, args.host, port, ready=ready, tls=tls, client_ca=args.client_ca, limits=limits,
            probe_app=probe_app, probe_port=probe_port or 0)
    finally:
        stop.set()
    return EXIT_OK


def _port(text: str, option: str = "--port") -> int:
    if not text.isdigit() or int(text) > 65535:
        raise InvalidInputError(option, f"expected a port from 0 to 65535, got {text!r}")
    return int(text)


def _add_admit_parser(sub: Any) -> None:
    ad = sub.add_parser(
        "admit", help="one Kueue scheduling cycle: which workloads are admitted, wait, or are preempted",
        description=(
            "Run one Kueue scheduling cycle on the ClusterQueues of QUEUES and the workloads of QUEUES\n"
            "and WORKLOADS: which pending workloads are admitted (flavor per pod set, and where their\n"
            "pods go on SNAPSHOT), which stay pending and why (quota or topology), which admitted\n"
            "workloads are preempted. Nothing is changed; the result is printed."
        ),
        epilog=_ADMIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ad.add_argument("snapshot", metavar="SNAPSHOT", help="ClusterSnapshot file (JSON or YAML)")
    ad.add_argument("queues", metavar="QUEUES", help="Kueue objects: ClusterQueues, flavors, cohorts, LocalQueues, ...")
    ad.add_argument("workloads", metavar="WORKLOADS", nargs="*", help="more Kueue objects: Workloads, labelled Jobs, ...")
    ad.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    ad.add_argument("--format", metavar="FMT", default="text", choices=_TEXT_OR_DOCUMENT,
                    help="text (default), json or yaml")
    ad.add_argument("--policy", metavar="P", help=f"placement policy for admitted pods: {_POLICY_CHOICES}")
    ad.set_defaults(handler=_cmd_admit)


def _cmd_admit(args: argparse.Namespace) -> int:
    from placer.model import load_snapshot
    from placer.queues import read_kueue
    from placer.queues.report import admission_text

    policy = policies.get(args.policy, "--policy").name if args.policy is not None else None
    snapshot = load_snapshot(args.snapshot)
    queues, workloads, notes = read_kueue([args.queues, *args.workloads])
    from placer.queues.scheduler import admit  # the engine, imported once the input is known good

    result = admit(snapshot, queues, workloads, policy=policy)
    if args.format == "text":
        text = admission_text(result, config=queues, workloads=workloads)
    else:
        text = _document(result.to_dict(), args.format)
    _emit(text, args.output)
    _notes("admit", notes)
    return EXIT_OK


def _emit(text: str, output: str | None = None) -> None:
    """Write a command's output to the file ``-o`` names (all or nothing), else stdout."""
    if output is None or output == STDIN:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            where = _stdout_name()
            _silence_stdout()  # else the interpreter's last flush fails again, on a second line
            raise InvalidInputError(where, exc.strerror or str(exc)) from None
        return
    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise InvalidInputError(output, exc.strerror or str(exc)) from None


def _stdout_name() -> str:
    """The file stdout goes to (``/dev/full``), where the system says (Linux), else ``<stdout>``."""
    try:
        target = os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")
    except (OSError, ValueError, AttributeError):
        return "<stdout>"
    return target if target.startswith("/") else "<stdout>"


def _cmd_place(args: argparse.Namespace) -> int:
    from functools import partial

    from placer.placement.place import place

    return _placement(args, partial(place, preemption=args.preemption), args.request)


def _cmd_preempt(args: argparse.Namespace) -> int:
    from placer.placement.place import preempt

    return _placement(args, preempt, args.request)


def _placement(args: argparse.Namespace, run: Callable[..., PlacementResult], request: Any) -> int:
    """Run ``place`` or ``preempt`` on the command's files and write the result as asked."""
    from placer import schema
    from placer.formats import left_out_note, render

    policy = policies.get(args.policy, "--policy") if args.policy is not None else None
    seed = schema.check_seed(args.seed, "--seed") if args.seed is not None else None
    result = run(args.snapshot, request, policy=policy, seed=seed)
    _emit(render(result, args.format, args.snapshot), args.output)
    note = left_out_note(result, args.format)
    _notes(args.command, [note] if note is not None else [])
    return _pending_status(args, result)


def _pending_status(args: argparse.Namespace, result: PlacementResult) -> int:
    """The exit status of a command that places: 1 for pending pods under ``--fail-on-pending``."""
    return EXIT_PENDING if args.fail_on_pending and result.unschedulable else EXIT_OK


def _cmd_defrag(args: argparse.Namespace) -> int:
    from placer import schema
    from placer.placement.place import defrag

    policy = policies.get(args.policy, "--policy") if args.policy is not None else None
    seed = schema.check_seed(args.seed, "--seed") if args.seed is not None else None
    max_moves = _count(args.max_moves, "--max-moves") if args.max_moves is not None else None
    result = defrag(args.snapshot, args.request, max_moves=max_moves, policy=policy, seed=seed)
    _emit(_document(result.to_dict(), args.format), args.output)
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from placer.diagnostics.check import check_placement
    from placer.model import load_request, load_result, load_snapshot
    from placer.preemption.moves import check_moves

    snapshot = load_snapshot(args.snapshot)
    request = load_request(args.request)
    result = load_result(args.result)
    check = check_moves if result.moves or result.rooms else check_placement
    violations = check(snapshot, request, result)
    if violations:
        _emit("".join(f"{v}\n" for v in violations), args.output)
        return EXIT_VIOLATIONS
    _emit(
        f"OK: {len(result.assignments)} assignment(s), {len(result.unschedulable)} unschedulable, "
        "no violations\n",
        args.output,
    )
    return EXIT_OK


def _add_color_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--color", metavar="WHEN", default="auto", choices=COLOR_CHOICES,
        help="colour causes and findings: auto (default: on a terminal, unless NO_COLOR is set), always, never",
    )


def _colored(args: argparse.Namespace) -> bool:
    """Whether the command's text goes to stdout coloured (``--color``; never into a file)."""
    to_file = getattr(args, "output", None) not in (None, "-")
    return not to_file and color_wanted(args.color, sys.stdout)


def _cmd_explain(args: argparse.Namespace) -> int:
    from placer.diagnostics.explain import explain
    from placer.mig.plans import render_mig_parted
    from placer.model import load_snapshot

    result = explain(load_snapshot(args.snapshot), args.request)  # the request checked against the snapshot
    if args.format == "mig-parted":
        text = render_mig_parted(result.relayout)
    else:
        text = result.to_text(_colored(args)) if args.format == "text" else _document(result.to_dict(), args.format)
    _emit(text, args.output)
    return _pending_status(args, result.result)


def _cmd_import_kubernetes(args: argparse.Namespace) -> int:
    from placer.adapters.kubernetes.snapshot import import_kubernetes, parse_levels

    try:
        imported = import_kubernetes(
            args.nodes, args.pods, parse_levels(args.level, "--level"),
            priority_classes=args.priority_classes, pdbs=args.pdbs,
        )
    except InvalidInputError as e:  # levels[i]: name the option as given
        index = e.where[len("levels["):-1] if e.where.startswith("levels[") else ""
        if not index.isdigit():
            raise
        raise InvalidInputError(f"--level {args.level[int(index)]}", e.what) from None
    _emit(_document(imported.snapshot.to_dict(), args.format), args.output)
    _notes("import kubernetes", imported.notes)
    return EXIT_OK


def _removed_note(command: str) -> Callable[["os.PathLike[str]"], None]:
    """The note for an output of an earlier run removed because this run does not write it."""
    return lambda path: _notes(command, [f"removed {path} of an earlier run (this run draws none)"])


def _notes(command: str, notes: Sequence[str]) -> None:
    """Print what an importer read but did not carry over, one line each, on stderr."""
    for note in notes:
        sys.stderr.write(f"placer: {command}: note: {bounded(note)}\n")
    sys.stderr.flush()


def _cmd_import_kubernetes_request(args: argparse.Namespace) -> int:
    from placer.adapters.kubernetes.snapshot import parse_levels
    from placer.adapters.kubernetes.workloads import import_workloads

    policy = policies.get(args.policy, "--policy").name if args.policy is not None else None
    imported = import_workloads(
        args.manifests, parse_levels(args.level, "--level"), policy,
        all_phases=args.all_phases, missing_podgroup=args.missing_podgroup,
        priority_classes=args.priority_classes,
    )
    # The document, not imported.request.to_dict(): it keeps one entry with replicas per
    # workload, and no policy, seed or gang field that was not given.
    _emit(_document(imported.document, args.format), args.output)
    if imported.skipped_pods:
        counts = ", ".join(f"{n} {why}" for why, n in imported.skipped_pods.items())
        sys.stderr.write(
            f"placer: import kubernetes-request: skipped {sum(imported.skipped_pods.values())} pod(s) "
            f"not waiting to be scheduled: {counts} (--all-phases imports them)\n"
        )
        sys.stderr.flush()
    _notes("import kubernetes-request", imported.notes)
    return EXIT_OK


def _cmd_import_nvidia_smi(args: argparse.Namespace) -> int:
    from placer.adapters.nvidia_smi.listing import parse_gpu_instances_file, parse_gpu_list_file, parse_mig_profiles_file
    from placer.adapters.nvidia_smi.mig import mig_node_from_nvidia_smi, parse_gpu_placements_file
    from placer.schema import snapshot_from_dict

    try:
        imported = mig_node_from_nvidia_smi(
            args.node,
            parse_gpu_instances_file(args.lgi),
            parse_gpu_list_file(args.list) if args.list else None,
            parse_mig_profiles_file(args.lgip) if args.lgip else None,
            parse_gpu_placements_file(args.lgipp) if args.lgipp else None,
            gpu_model=args.gpu_model,
            mode=args.mode,
        )
    except InvalidInputError as e:
        if e.where != "gpu_model":
            raise
        raise InvalidInputError("--gpu-model", e.what) from None
    document = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [imported.node]}
    _emit(_document(snapshot_from_dict(document).to_dict(), args.format), args.output)
    _notes("import nvidia-smi", imported.findings)
    return EXIT_OK


def _cmd_import_slurm(args: argparse.Namespace) -> int:
    from placer.adapters.slurm.importer import import_slurm
    from placer.adapters.slurm.live import import_slurm_live

    if args.live:
        for flag, value in (("--nodes", args.nodes), ("--jobs", args.jobs)):
            if value is not None:
                raise InvalidInputError(flag, "not with --live: scontrol is asked")
        imported = import_slurm_live(args.gres, args.topology, args.mig_model)
    elif args.nodes is None:
        raise InvalidInputError("--nodes", "expected scontrol -d show node output (a file), or --live")
    else:
        imported = import_slurm(args.nodes, args.gres, args.topology, args.mig_model, args.jobs)
    # The document, not imported.snapshot.to_dict(), which leaves out unschedulable: false.
    _emit(_document(imported.document, args.format), args.output)
    _notes("import slurm", imported.notes)
    return EXIT_OK


def _cmd_reconcile(args: argparse.Namespace) -> int:
    from placer.adapters.nvidia_smi.live import find_nvidia_smi, query_node
    from placer.adapters.nvidia_smi.query import parse_compute_apps_file, parse_query_gpu_file
    from placer.model import load_snapshot
    from placer.diagnostics.reconcile import DEFAULT_INTERVAL_S, reconcile, watch

    if not args.watch:
        for flag, value in (("--interval", args.interval), ("--rounds", args.rounds)):
            if value is not None:
                raise InvalidInputError(flag, "only with --watch")
    else:
        for flag, refused in (("--output", args.output is not None), ("--format", args.format != "json")):
            if refused:
                raise InvalidInputError(flag, "not with --watch: each round is one JSON line on stdout")
    if args.gpus is not None or args.apps is not None:
        for flag, value, other in (("--gpus", args.gpus, "--apps"), ("--apps", args.apps, "--gpus")):
            if value is None:
                raise InvalidInputError(flag, f"expected a file with {other} (or neither: nvidia-smi is run)")
        if args.watch:
            raise InvalidInputError("--watch", "not with --gpus/--apps: files do not change, nvidia-smi is run each round")
        if args.nvidia_smi is not None:
            raise InvalidInputError("--nvidia-smi", "not with --gpus/--apps: the files are read instead")
        snapshot = load_snapshot(args.snapshot)
        found = reconcile(snapshot, args.node, parse_query_gpu_file(args.gpus), parse_compute_apps_file(args.apps))
        _emit(_document(found.to_dict(), args.format), args.output)
        return EXIT_OK

    nvidia_smi = args.nvidia_smi or "nvidia-smi"
    if not args.watch:
        snapshot = load_snapshot(args.snapshot)
        gpus, apps = query_node(nvidia_smi)
        _emit(_document(reconcile(snapshot, args.node, gpus, apps).to_dict(), args.format), args.output)
        return EXIT_OK

    interval = DEFAULT_INTERVAL_S if args.interval is None else _seconds(args.interval, "--interval", positive=True)
    rounds = None if args.rounds is None else _positive_int(args.rounds, "--rounds")
    try:
        watched = watch(args.snapshot, args.node, lambda: query_node(nvidia_smi), interval, rounds)
    except InvalidInputError as e:
        raise InvalidInputError("--" + e.where, e.what) from None
    find_nvidia_smi(nvidia_smi)  # not there: exit 2 now rather than a failed round forever
    some_round_failed = False
    try:
        for done in watched:
            if not done.ok:
                some_round_failed = True
                _fail(f"round {done.number} ({done.timestamp}): {done.error}")
                continue
            # Built whole and written at once: Ctrl-C never leaves half a line.
            _emit(json.dumps(done.to_dict(), ensure_ascii=False) + "\n")
    except KeyboardInterrupt:
        pass
    return 1 if some_round_failed else EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    from placer.workload.fragmentation import target_workload
    from placer.model import load_request, load_snapshot
    from placer.diagnostics.report import cluster_report, node_rows, nodes_text

    snapshot = load_snapshot(args.snapshot)
    if args.nodes:
        rows = node_rows(snapshot)
        text = (nodes_text(rows, _colored(args)) if args.format == "text"
                else _document({"nodes": [r.to_dict() for r in rows]}, args.format))
        _emit(text, args.output)
        return EXIT_OK
    workload = source = None
    pods: list[Any] = []
    if args.workload is not None:
        if args.workload.lower().endswith(".csv"):
            from placer.adapters import openb

            pods = openb.read_pods(args.workload)
        else:
            pods = list(load_request(args.workload).pods)
        if not pods:
            raise InvalidInputError(args.workload, "the workload has no pods")
        workload, source = target_workload(pods), os.path.basename(args.workload)
    report = cluster_report(snapshot, workload, source, pods)
    text = report.to_text(_colored(args)) if args.format == "text" else _document(report.to_dict(), args.format)
    _emit(text, args.output)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from placer.cli.demo import run_demo

    _emit(run_demo(policy=policies.get(args.policy, "--policy").name))
    return EXIT_OK


# ------------------------------------------------------------------ simulate

_SIMULATED = sorted(policies.REGISTRY.values(), key=lambda p: (p.simulate_rank is None, p.simulate_rank or 0))
_SIMULATE_EPILOG = f"""\
policies: all runs {', '.join(p.name for p in _SIMULATED if p.simulate_rank is not None)};
published values: {', '.join(p.name for p in _SIMULATED if p.study)} (the FGD study's);
by name only: {', '.join(p.name for p in _SIMULATED if p.simulate_rank is None)}.

examples:
  placer simulate                                   # default trace, all policies, seeds 42-51
  placer simulate --policy fgd,best-fit --seeds 42-44 --out /tmp/sim
  placer simulate --pods openb_pod_list_gpushare40.csv --jobs 4
"""


def _simulate_policies(text: str) -> tuple[list[str], list[str]]:
    """The policies to run and, for ``all``, the study's policies skipped as unavailable."""
    from placer.replay.simulate import ALL_POLICIES, available_policies

    ready = available_policies()
    if text.strip() == "all":
        return [p for p in ALL_POLICIES if p in ready], [p for p in ALL_POLICIES if p not in ready]
    chosen: list[str] = []
    for item in text.split(","):
        name = policies.get(item.strip(), "--policy").name
        if name not in ready:
            raise InvalidInputError(
                "--policy", f"policy {name!r} is not available yet (available: {', '.join(ready)}, or all)"
            )
        if name in chosen:
            raise InvalidInputError("--policy", f"policy {name!r} is listed twice")
        chosen.append(name)
    return chosen, []


def _check_out_dir(path: str) -> None:
    """Refuse an output directory that cannot be made, before any replay runs."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise InvalidInputError("--out", f"{path} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InvalidInputError("--out", f"{path} is not writable")
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInputError("--out", f"cannot create {path}: {parent} is not a writable directory")


def _cmd_timeline(args: argparse.Namespace) -> int:
    from itertools import product

    from placer.adapters import openb
    from placer.replay.metrics import at_least
    from placer.replay.timeline import (
        TimelineSpec,
        parse_choices,
        parse_duration,
        parse_fractions,
        parse_queue_setup,
        run_specs,
        write_timeline_outputs,
    )
    from placer.replay.simulate import parse_seeds

    loads = parse_fractions(args.load, "--load", 10.0)
    (shrink,) = parse_fractions(args.shrink, "--shrink", 1.0)
    horizon = parse_duration(args.horizon, "--horizon")
    strategies = parse_choices(args.strategy, "--strategy", {"BestEffortFIFO": "BestEffortFIFO", "StrictFIFO": "StrictFIFO"})
    preemption = parse_choices(args.preemption, "--preemption", {"on": True, "off": False})
    placement = [policies.REGISTRY[policies.DEFAULT].name] if args.policy == "all" else [
        policies.get(p.strip(), "--policy").name for p in args.policy.split(",")]
    seeds = parse_seeds("42" if args.seeds == "42-51" else args.seeds, "--seeds")
    parse_queue_setup(args.queues)
    jobs, executor, nodes_path, pods_path = _replay_options(args)
    snapshot = openb.read_nodes(nodes_path)
    trace = openb.read_timed_pods(pods_path)
    specs = [
        TimelineSpec(load=load, seed=seed, policy=policy, queues=args.queues, strategy=strategy,
                     preemption=preempt, horizon_s=horizon, shrink=shrink)
        for policy, strategy, preempt, load, seed in product(placement, strategies, preemption, loads, seeds)
    ]
    failed: list[Any] = []
    try:
        runs = run_specs(snapshot, trace, specs, executor=executor, jobs=jobs, address=args.address,
                         on_failure=failed.append, progress=not args.quiet, connect_timeout=args.connect_timeout)
    except RunsInterrupted as stop:
        if stop.results:
            write_timeline_outputs(stop.results, args.out, plot=not args.no_plot)
        raise
    for failure in failed:
        sys.stderr.write(f"placer: simulate: run {failure.key[1]} failed twice: {failure.error}\n")
    if not runs:
        sys.stderr.write("placer: simulate: every run failed; nothing written\n")
        return EXIT_VIOLATIONS
    paths = write_timeline_outputs(runs, args.out, plot=not args.no_plot)
    lines = []
    for run in runs:
        m = run.outcome.metrics
        lines.append(f"{run.spec.title}: {run.arrivals_summary}")
        rows = []
        for q in (*m.queues, m.cluster):
            p50 = "-" if q.delay_p50_s is None else at_least(q.delay_p50_lower_bound, f"{q.delay_p50_s:.0f} s")
            p99 = "-" if q.delay_p99_s is None else at_least(q.delay_p99_lower_bound, f"{q.delay_p99_s:.0f} s")
            if q.never_admitted:
                p99 += f" ({q.never_admitted} of {q.delay_jobs} never admitted)"
            rows.append([
                q.queue,
                f"delay p50 {p50:>8}, p99 {p99:>8}; mean GPUs {q.mean_running_gpus:8.1f}; "
                f"unallocated while waiting {q.unallocated_gpu_hours_while_waiting:8.1f} GPU-h; "
                f"borrowing {100 * q.borrowing_fraction:5.1f} %; preempted {q.preemptions_suffered}",
            ])
        lines += aligned(rows, indent="  ")
    lines.append("wrote " + ", ".join(str(p) for p in paths))
    _emit("\n".join(lines) + "\n")
    return EXIT_VIOLATIONS if failed else EXIT_OK


def _cmd_simulate(args: argparse.Namespace) -> int:
    import math

    if args.timeline:
        return _cmd_timeline(args)

    from placer.adapters import openb
    from placer.replay.simulate import parse_seeds, simulate, summary_rows, workload_name_from_path, write_outputs

    seeds = parse_seeds(args.seeds, "--seeds")
    policies, skipped = _simulate_policies(args.policy)
    jobs, executor, nodes_path, pods_path = _replay_options(args)
    snapshot = openb.read_nodes(nodes_path)
    pods = openb.read_pods(pods_path)
    name = workload_name_from_path(pods_path)
    if not policies:
        raise InvalidInputError("--policy", "none of the study's policies is available yet")
    if skipped:
        sys.stderr.write(f"placer: simulate: skipped {', '.join(skipped)} (not available yet)\n")
        sys.stderr.flush()
    failed: list[Any] = []
    try:
        curves = simulate(snapshot, pods, policies, seeds, jobs=jobs, progress=not args.quiet, name=name,
                          executor=executor, address=args.address, on_failure=failed.append,
                          connect_timeout=args.connect_timeout)
    except RunsInterrupted as stop:
        if stop.results:
            write_outputs(stop.results, args.out, plot=not args.no_plot)
        raise
    for failure in failed:
        workload, policy, seed = failure.key
        sys.stderr.write(f"placer: simulate: run {workload} {policy} seed {seed} failed twice: {failure.error}\n")
    if not curves:
        sys.stderr.write("placer: simulate: every run failed; nothing written\n")
        return EXIT_VIOLATIONS
    paths = write_outputs(curves, args.out, plot=not args.no_plot, on_removed=_removed_note("simulate"))

    def cell(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.2f}"

    first = curves[0]
    lines = [
        f"workload {name}: {len(snapshot.nodes)} nodes, {first.capacity_milli // 1000} GPUs, "
        f"{first.original_pods} pods inflated to 130 % of GPU capacity; {len(seeds)} seed(s)",
        "unallocated GPU % at 100 % arrived (ours over the seeds; published: the FGD study, 10 seeds):",
    ]
    rows = [["policy", "median", "mean", "sd", "published mean", "published median"]]
    for r in summary_rows(curves):
        rows.append(
            [r["policy"], cell(r["median"]), cell(r["mean"]), cell(r["sd"]),
             cell(r["published_mean"]), cell(r["published_median"])]
        )
    lines += aligned(rows, right=frozenset((1, 2, 3, 4, 5)), indent="  ")
    lines.append("wrote " + ", ".join(str(p) for p in paths))
    _emit("\n".join(lines) + "\n")
    return EXIT_VIOLATIONS if failed else EXIT_OK


def _replay_options(args: argparse.Namespace) -> tuple[Any, str, Any, Any]:
    """``--jobs`` and ``--executor`` checked, ``--out`` usable, and the openb node and pod
    files (the bundled ones by default)."""
    from placer.adapters import openb

    jobs = _positive_int(args.jobs, "--jobs") if args.jobs is not None else None
    executor = _executor(args)
    _check_out_dir(args.out)
    nodes_path = args.nodes if args.nodes is not None else openb.data_path(openb.DEFAULT_NODES)
    pods_path = args.pods if args.pods is not None else openb.data_path(openb.DEFAULT_PODS)
    return jobs, executor, nodes_path, pods_path


def _executor(args: argparse.Namespace) -> str:
    """``--executor`` checked with ``--address`` and ``--connect-timeout`` (made a number of
    seconds): Ray importable when asked for, and the cluster at ``--address`` answering."""
    from placer.replay.executors import EXECUTORS, check_ray_address, require_ray

    if args.executor not in EXECUTORS:
        raise InvalidInputError("--executor", f"expected one of {', '.join(EXECUTORS)}, got {args.executor!r}")
    if args.address is not None and args.executor != "ray":
        raise InvalidInputError("--address", "is for --executor ray")
    args.connect_timeout = _seconds(args.connect_timeout, "--connect-timeout", positive=True)
    if args.executor == "ray":
        require_ray(address=args.address)
        check_ray_address(args.address, args.connect_timeout)
    return str(args.executor)


def _connect_timeout_argument(parser: argparse.ArgumentParser) -> None:
    from placer.replay.executors import DEFAULT_CONNECT_TIMEOUT_S

    parser.add_argument("--connect-timeout", metavar="SECONDS", default=str(DEFAULT_CONNECT_TIMEOUT_S),
                        help=f"give up when the Ray cluster at --address has not answered within this many "
                        f"seconds (default: {DEFAULT_CONNECT_TIMEOUT_S:g})")


# ------------------------------------------------------------------ gpus and topo

_OBJECTIVE_HELP = """\
objectives:
  tiling    highest set score + best split of the GPUs left free into same-size sets (default)
  best-set  highest set score alone, whatever it leaves free
"""
_SCORE_HELP = """\
scores: a GPU pair scores 100 per NVLink plus its PCIe relation (PIX 50, PXB 40, PHB 30,
NODE 20, SYS 10); a set scores the sum of its pairs (setScore); an NVSwitch pair scores 1800.
"""
_FILE_HELP = """\
FILE: the text of `nvidia-smi topo -m` (any name), or a JSON/YAML document (.json, .yaml,
.yml) holding a gpuTopology form ({"matrix": [[...]]}, {"nvidiaSmiTopo": "..."} or
{"nvswitch": true, "gpus": 8}) or a node type ({"gpus": 8, "gpuTopology": {...}}).
"""
_GPUS_EPILOG = _OBJECTIVE_HELP + "\n" + _SCORE_HELP + "\n" + _FILE_HELP + """
example:
  placer gpus --topology topo.txt --available 0,2,4,5 --size 2
"""
_TOPO_EPILOG = _OBJECTIVE_HELP + "\n" + _SCORE_HELP + "\n" + _FILE_HELP + """
example:
  nvidia-smi topo -m | placer topo -
"""
_OPTION_WHERES = ("available", "required", "size", "objective")


def _read_topology(path: str) -> LoadedTopology:
    """FILE of ``gpus``/``topo``: ``-`` is ``nvidia-smi topo -m`` text on stdin."""
    from placer.diagnostics.topology import load_topology, topology_from_nvidia_smi

    if path == STDIN:
        return topology_from_nvidia_smi(read_text(path), source_name(path))
    return load_topology(path)


def _index_list(text: str | None, option: str) -> list[int]:
    """A comma-separated list of GPU indices; each item must be a plain decimal integer."""
    if text is None or not text.strip():
        return []
    out = []
    for j, item in enumerate(text.split(",")):
        s = item.strip()
        if not (s.isascii() and s.isdigit()):
            raise InvalidInputError(
                f"{option}[{j}]", f"expected a GPU index (an integer >= 0, comma-separated), got {item!r}"
            )
        out.append(int(s))
    return out


def _positive_int(text: str, option: str) -> int:
    return _count(text, option, least=1)


def _seconds(text: str, option: str, *, positive: bool = False) -> float:
    """An option's duration in seconds: a finite number >= 0 (> 0 when ``positive``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value < math.inf) or (positive and value == 0):
        raise InvalidInputError(option, f"expected a number of seconds {'>' if positive else '>='} 0, got {text!r}")
    return value


def _count(text: str, option: str, least: int = 0) -> int:
    """An option's integer value, at least ``least`` (digits only, no sign)."""
    s = text.strip()
    if not (s.isascii() and s.isdigit()) or int(s) < least:
        raise InvalidInputError(option, f"expected an integer >= {least}, got {text!r}")
    return int(s)


def _as_option(exc: InvalidInputError) -> InvalidInputError:
    """An error of :func:`placer.select_gpus` named by its command-line option."""
    for name in _OPTION_WHERES:
        if exc.where == name or exc.where.startswith(name + "["):
            return InvalidInputError("--" + exc.where, exc.what)
    return exc


def _cmd_gpus(args: argparse.Namespace) -> int:
    from placer.placement.gpusets import OBJECTIVES, select_gpus

    if args.objective not in OBJECTIVES:
        raise InvalidInputError("--objective", f"expected tiling or best-set, got {args.objective!r}")
    size = _positive_int(args.size, "--size")
    available = _index_list(args.available, "--available") if args.available is not None else None
    required = _index_list(args.required, "--required")
    topology = _read_topology(args.topology).topology
    n = topology.gpus
    if size > n:
        raise InvalidInputError("--size", f"expected at most {n} (the GPUs of the node), got {size}")
    if available is None:
        available = list(range(n))
    try:
        chosen = select_gpus(topology, available, size, required=required, objective=args.objective)
    except InvalidInputError as exc:
        raise _as_option(exc) from None
    doc = {"gpus": chosen, "size": size, "objective": args.objective, "setScore": topology.set_score(chosen)}
    _emit(dump_yaml(doc) if args.format == "yaml" else json.dumps(doc) + "\n", args.output)
    return EXIT_OK


def _dump_rows_inline(obj: Any) -> str:
    """JSON indented by 2 like :func:`dump_json`, but each list of plain values on one line."""

    def emit(v: Any, depth: int) -> str:
        pad, inner = "  " * depth, "  " * (depth + 1)
        if isinstance(v, dict) and v:
            items = [f"{inner}{json.dumps(k)}: {emit(x, depth + 1)}" for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
            return "[\n" + ",\n".join(inner + emit(x, depth + 1) for x in v) + "\n" + pad + "]"
        return json.dumps(v, ensure_ascii=False)

    return emit(obj, 0) + "\n"


def _set_text(gpus: list[int]) -> str:
    return "[" + ",".join(map(str, gpus)) + "]"


def _topo_text(report: dict[str, Any], source: str) -> str:
    from placer.model.topology import NVSWITCH_POINTS

    n = report["gpus"]
    nics = report["nics"]
    lines = [f"{source}: {n} GPU{'s' if n != 1 else ''}, {len(nics)} NIC{'s' if len(nics) != 1 else ''}", ""]
    head = [""] + [f"GPU{j}" for j in range(n)]
    if report["matrix"] is not None:
        rows = [head] + [[f"GPU{i}"] + row for i, row in enumerate(report["matrix"])]
        rows += [[nic["name"]] + nic["labels"] for nic in nics]
        lines += aligned(rows)
    else:
        if report["nvswitch"]:
            lines.append(f"NVSwitch: every pair of GPUs fully connected (pair score {NVSWITCH_POINTS})")
        else:
            lines.append("no link matrix given: every pair of GPUs alike (pair score 0)")
        if nics:
            lines += [""] + aligned([head] + [[nic["name"]] + nic["labels"] for nic in nics])
    lines.append("")
    if report["islands"]:
        text = " ".join(_set_text(g) for g in report["islands"])
        if report["withoutNvlink"]:
            text += " (no NVLink: " + ", ".join(f"GPU{i}" for i in report["withoutNvlink"]) + ")"
        lines.append(f"NVLink islands: {text}")
    else:
        lines.append("NVLink islands: none (no NVLink)")
    lines.append("")
    if report["bestSets"]:
        lines.append("Best set per size, all GPUs free (score = sum of its pair scores):")
        rows = [["size", "tiling", "score", "best-set", "score"]]
        for e in report["bestSets"]:
            row = [str(e["size"])]
            for key in ("tiling", "bestSet"):
                row += [_set_text(e[key]["gpus"]), str(e[key]["setScore"])]
            rows.append(row)
        lines += aligned(rows, right=frozenset((0, 2, 4)), indent="  ")
        shown = report["bestSets"][-1]["size"]
        if shown < n:
            lines.append(f"  (sizes above {shown} not shown; see --max-size)")
    else:
        lines.append("Best set per size: none (fewer than 2 GPUs)")
    return "\n".join(lines) + "\n"


def _cmd_topo(args: argparse.Namespace) -> int:
    from placer.diagnostics.topology import topology_report

    max_size = _positive_int(args.max_size, "--max-size") if args.max_size is not None else None
    loaded = _read_topology(args.file)
    report = topology_report(loaded.topology, loaded.nics, max_size)
    if args.format == "json":
        text = _dump_rows_inline(report)
    elif args.format == "yaml":
        text = dump_yaml(report)
    else:
        text = _topo_text(report, source_name(args.file))
    _emit(text, args.output)
    return EXIT_OK


def _fail(message: str) -> int:
    sys.stderr.write("placer: error: " + bounded(" ".join(message.split("\n"))) + "\n")
    return EXIT_BAD_INPUT


def _tolerate_unencodable() -> None:
    """Write what stdout and stderr cannot encode (an em dash under ``PYTHONIOENCODING=ascii``
    or a C locale) as ``\\u2014`` escapes rather than fail on it."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already in use in a way that forbids it
                pass


def _check_files(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or written: standard input (``-``) given for two
    inputs, ``-o`` naming a format (kubectl's ``-o yaml``) or one of the command's inputs."""
    inputs = [
        (name, value)
        for dest, name in _INPUT_FILES.items()
        for value in _file_values(getattr(args, dest, None))
    ]
    from_stdin = [name for name, value in inputs if value == STDIN]
    if len(from_stdin) > 1:
        raise InvalidInputError(
            STDIN, f"standard input given for both {from_stdin[0]} and {from_stdin[1]}; only one input can be read from it"
        )
    output = getattr(args, "output", None)
    if output is None or output == STDIN:
        return
    if output in _FORMAT_WORDS:
        hint = f"use --format {output}" if output != "wide" else "see --format"
        raise InvalidInputError("-o", f"{output!r} is a format, not a file; {hint} (-o FILE writes to FILE)")
    for name, value in inputs:
        if value != STDIN and _same_file(output, value):
            raise InvalidInputError(
                "-o", f"{output} is the input {value} ({name}); write the output to another file"
            )


def _file_values(value: Any) -> list[str]:
    """The file names an argument holds: one, a list (``nargs``, ``append``) or none."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _same_file(output: str, path: str) -> bool:
    """Whether writing ``output`` would overwrite the file ``path`` (a device is never an input's
    copy: ``-o /dev/stdout`` with ``/dev/stdin`` may be one terminal)."""
    try:
        if not os.path.isfile(output):
            return not os.path.exists(output) and os.path.realpath(output) == os.path.realpath(path)
        return os.path.samefile(output, path)
    except (OSError, ValueError):
        return False


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placer`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 done; 1 violations found by ``check``, pods left pending under
        ``--fail-on-pending``, a failed run of ``simulate``/``sweep`` or a failed round of
        ``reconcile --watch``; 2 bad input or usage; 130 interrupted (Ctrl-C: one line on
        stderr, with the runs kept of a grid).
    """
    _tolerate_unencodable()
    try:
        parser = _build_parser()
        args = parser.parse_args(argv)
        _check_files(args)
        return int(args.handler(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_BAD_INPUT)
    except _UsageError as exc:
        return _fail(str(exc))
    except PlacerError as exc:
        return _fail(str(exc))
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if exc.filename is None:
            return _fail(str(exc.strerror or exc))
        return _fail(f"{os.fsdecode(exc.filename)}: {exc.strerror or exc}")
    except KeyboardInterrupt as exc:
        kept = f"; {exc.kept} of {exc.total} runs kept" if isinstance(exc, RunsInterrupted) else ""
        sys.stderr.write(f"placer: interrupted{kept}\n")
        return EXIT_INTERRUPTED
