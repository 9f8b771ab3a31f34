"""``placer import SOURCE``: a ClusterSnapshot or PlacementRequest from what kubectl, Slurm
or nvidia-smi print; what is read but not carried over is one note line on stderr."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from placer.cli.options import POLICY_CHOICES, TEXT_OR_DOCUMENT, add_document_format, add_strict, policy_name
from placer.cli.output import EXIT_OK, EXIT_VIOLATIONS, document, emit, emit_noted, notes
from placer.exceptions import InvalidInputError

_IMPORT_EXAMPLES = """\
examples:
  placer import kubernetes --nodes nodes.json --pods pods.json -o cluster.json
  placer import kubernetes-request pods.json --priority-classes classes.json -o request.json
  placer import slurm --nodes nodes.txt --gres gres.conf -o cluster.json
  placer import nvidia-smi --node dgx-01 --lgi lgi.txt --list list.txt -o dgx-01.json
  placer import mig-parted config.yaml
  placer import mig-parted config.yaml --snapshot cluster.json --config all-balanced -o after.json
"""


def add_import(sub: Any, summary: str) -> None:
    """``placer import`` and its sources."""
    im = sub.add_parser(
        "import", help=summary,
        description=(
            "Turn what a cluster's own tools print into placer's documents: 'kubernetes' and\n"
            "'slurm' (and 'nvidia-smi' for one MIG node) write a ClusterSnapshot,\n"
            "'kubernetes-request' a PlacementRequest, 'mig-parted' checks an nvidia-mig-parted\n"
            "configuration (or applies one to a snapshot). What is read but not carried over is one\n"
            "note line on stderr (--strict: an error). 'placer import SOURCE --help' tells more."
        ),
        epilog=_IMPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    isub = im.add_subparsers(dest="source", metavar="SOURCE", required=True)
    for add_source in (_add_kubernetes, _add_kubernetes_request, _add_mig_parted, _add_nvidia_smi, _add_slurm):
        add_source(isub)


PARSERS: dict[str, Callable[[Any, str], None]] = {"import": add_import}


def _add_document_output(parser: argparse.ArgumentParser) -> None:
    """``-o OUT`` and ``--format json|yaml`` of the document an importer writes, and
    ``--strict`` (its notes are errors)."""
    parser.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    add_document_format(parser)
    add_strict(parser)


def _add_kubernetes(isub: Any) -> None:
    """``placer import kubernetes``."""
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
    _add_document_output(ik)
    ik.set_defaults(handler=run_import_kubernetes)


def _add_kubernetes_request(isub: Any) -> None:
    """``placer import kubernetes-request``."""
    from placer.adapters.kubernetes.workloads import MISSING_PODGROUP

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
    iw.add_argument("--policy", metavar="P", help=f"the request's policy: {POLICY_CHOICES}")
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
    _add_document_output(iw)
    iw.set_defaults(handler=run_import_kubernetes_request)


def _add_nvidia_smi(isub: Any) -> None:
    """``placer import nvidia-smi``."""
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
    _add_document_output(ins)
    ins.set_defaults(handler=run_import_nvidia_smi)


def _add_mig_parted(isub: Any) -> None:
    """``placer import mig-parted``."""
    imp = isub.add_parser(
        "mig-parted", help="check an nvidia-mig-parted configuration against the MIG tables, or apply it to a snapshot",
        description=(
            "Read an nvidia-mig-parted configuration file (version: v1, mig-configs) and check\n"
            "every entry of every configuration on each bundled GPU model it applies to: valid,\n"
            "invalid and why, or unchecked (a device filter or profiles placer has no table for).\n"
            "With --snapshot: write the snapshot after nvidia-mig-parted applies --config on its\n"
            "nodes (idle static MIG GPUs get the entry's instances; a GPU in use is left)."
        ),
        epilog=(
            "examples:\n"
            "  placer import mig-parted config.yaml --format json\n"
            "  placer import mig-parted config.yaml --snapshot cluster.json --config all-balanced \\\n"
            "      --nodes n1,n2 -o after.json\n"
            "exit status: checking: 0 when no entry is invalid, 1 when one is (the report is written\n"
            "all the same), 2 bad input or usage. Applying: 0 done, 1 when a GPU in use to change kept\n"
            "the run from changing (nothing written; --per-node changes the other nodes), 2 bad input."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("file", metavar="FILE", help="the nvidia-mig-parted configuration (YAML or JSON)")
    imp.add_argument("--snapshot", metavar="SNAPSHOT", help="apply --config to this ClusterSnapshot instead of checking")
    imp.add_argument("--config", metavar="NAME", help="the configuration to apply (default: the file's only one)")
    imp.add_argument("--nodes", metavar="N1,N2", help="apply on these nodes only (default: every node)")
    imp.add_argument("--per-node", action="store_true",
                     help="leave only the nodes with a GPU in use to change, not the whole run")
    imp.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    imp.add_argument("--format", metavar="FMT", choices=TEXT_OR_DOCUMENT,
                     help="checking: text (default), json or yaml; applying: json (default) or yaml")
    add_strict(imp)
    imp.set_defaults(handler=run_import_mig_parted)


def _add_slurm(isub: Any) -> None:
    """``placer import slurm``."""
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
    _add_document_output(isl)
    isl.set_defaults(handler=run_import_slurm)


def run_import_kubernetes(args: argparse.Namespace) -> int:
    """Run ``placer import kubernetes``."""
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
    emit_noted("import kubernetes", document(imported.snapshot.to_dict(), args.format), args.output,
               imported.notes, args.strict)
    return EXIT_OK


def run_import_kubernetes_request(args: argparse.Namespace) -> int:
    """Run ``placer import kubernetes-request``."""
    from placer.adapters.kubernetes.snapshot import parse_levels
    from placer.adapters.kubernetes.workloads import import_workloads

    policy = policy_name(args.policy)
    imported = import_workloads(
        args.manifests, parse_levels(args.level, "--level"), policy,
        all_phases=args.all_phases, missing_podgroup=args.missing_podgroup,
        priority_classes=args.priority_classes,
    )
    # The document, not imported.request.to_dict(): it keeps one entry with replicas per
    # workload, and no policy, seed or gang field that was not given.
    text = document(imported.document, args.format)
    if imported.skipped_pods:
        counts = ", ".join(f"{n} {why}" for why, n in imported.skipped_pods.items())
        sys.stderr.write(
            f"placer: import kubernetes-request: skipped {sum(imported.skipped_pods.values())} pod(s) "
            f"not waiting to be scheduled: {counts} (--all-phases imports them)\n"
        )
        sys.stderr.flush()
    emit_noted("import kubernetes-request", text, args.output, imported.notes, args.strict)
    return EXIT_OK


def run_import_nvidia_smi(args: argparse.Namespace) -> int:
    """Run ``placer import nvidia-smi``."""
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
    doc = {"apiVersion": "placer/v1", "kind": "ClusterSnapshot", "nodes": [imported.node]}
    text = document(snapshot_from_dict(doc).to_dict(), args.format)
    emit_noted("import nvidia-smi", text, args.output, imported.findings, args.strict)
    return EXIT_OK


def run_import_mig_parted(args: argparse.Namespace) -> int:
    """Run ``placer import mig-parted``: check the file, or apply it with ``--snapshot``."""
    from placer.adapters.mig_parted.check import INVALID, check_mig_parted, render_checks
    from placer.adapters.mig_parted.config import read_mig_parted

    config = read_mig_parted(args.file)
    if args.snapshot is not None:
        return _apply_mig_parted(args, config)
    for flag in ("config", "nodes"):
        if getattr(args, flag) is not None:
            raise InvalidInputError(f"--{flag}", "only with --snapshot (applying a configuration)")
    checks = check_mig_parted(config)
    if args.format in (None, "text"):
        text = render_checks(checks)
    else:
        text = document({"file": config.source, "checks": [c.to_dict() for c in checks]}, args.format)
    emit(text, args.output)
    return EXIT_VIOLATIONS if any(c.status == INVALID for c in checks) else EXIT_OK


def _apply_mig_parted(args: argparse.Namespace, config: Any) -> int:
    """``placer import mig-parted --snapshot``: the snapshot after the configuration."""
    from placer.adapters.mig_parted.apply import RESPLIT, apply_mig_parted
    from placer.schema import coerce_snapshot

    if args.format == "text":
        raise InvalidInputError("--format", "with --snapshot: json or yaml (a ClusterSnapshot is written)")
    nodes = None if args.nodes is None else [n for n in args.nodes.split(",") if n]
    applied = apply_mig_parted(coerce_snapshot(args.snapshot), config, args.config, nodes, args.per_node)
    command = "import mig-parted"
    lines = list(applied.notes) + [f"{g.to_text()}, left" for g in applied.in_use()]
    if not applied.complete and not args.per_node:
        notes(command, lines)
        sys.stderr.write(f"placer: {command}: {len(applied.in_use())} GPU(s) in use would change: "
                         "nothing written (--per-node changes the other nodes)\n")
        return EXIT_VIOLATIONS
    changed = [g for g in applied.gpus if g.status == RESPLIT]
    emit_noted(command, document(applied.snapshot.to_dict(), args.format or "json"), args.output, lines, args.strict)
    sys.stderr.write(f"placer: {command}: re-split {len(changed)} GPU(s) on {len({g.node for g in changed})} node(s)\n")
    return EXIT_OK


def run_import_slurm(args: argparse.Namespace) -> int:
    """Run ``placer import slurm``."""
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
    emit_noted("import slurm", document(imported.document, args.format), args.output, imported.notes, args.strict)
    return EXIT_OK


