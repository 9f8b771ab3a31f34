"""``placer admit``: one Kueue scheduling cycle on Kueue's own objects, printed."""
from __future__ import annotations

import argparse
from typing import Any, Callable

from placer.cli.options import POLICY_CHOICES, TEXT_OR_DOCUMENT, add_input_files, add_strict, policy_name
from placer.cli.output import EXIT_OK, document, emit_noted

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


def add_admit(sub: Any, summary: str) -> None:
    """``placer admit``."""
    ad = sub.add_parser(
        "admit", help=summary,
        description=(
            "Run one Kueue scheduling cycle on the ClusterQueues of QUEUES and the workloads of QUEUES\n"
            "and WORKLOADS: which pending workloads are admitted (flavor per pod set, and where their\n"
            "pods go on SNAPSHOT), which stay pending and why (quota or topology), which admitted\n"
            "workloads are preempted. Nothing is changed; the result is printed."
        ),
        epilog=_ADMIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_files(ad, "snapshot")
    ad.add_argument("queues", metavar="QUEUES", help="Kueue objects: ClusterQueues, flavors, cohorts, LocalQueues, ...")
    ad.add_argument("workloads", metavar="WORKLOADS", nargs="*", help="more Kueue objects: Workloads, labelled Jobs, ...")
    ad.add_argument("-o", "--output", metavar="OUT", help="write here instead of stdout")
    ad.add_argument("--format", metavar="FMT", default="text", choices=TEXT_OR_DOCUMENT,
                    help="text (default), json or yaml")
    ad.add_argument("--policy", metavar="P", help=f"placement policy for admitted pods: {POLICY_CHOICES}")
    add_strict(ad)
    ad.set_defaults(handler=run_admit)


PARSERS: dict[str, Callable[[Any, str], None]] = {"admit": add_admit}


def run_admit(args: argparse.Namespace) -> int:
    """Run ``placer admit``: one admission cycle, printed."""
    from placer.model import load_snapshot
    from placer.queues import read_kueue
    from placer.queues.report import admission_text

    policy = policy_name(args.policy)
    snapshot = load_snapshot(args.snapshot)
    queues, workloads, read_notes = read_kueue([args.queues, *args.workloads])
    from placer.queues.scheduler import admit  # the engine, imported once the input is known good

    result = admit(snapshot, queues, workloads, policy=policy)
    if args.format == "text":
        text = admission_text(result, config=queues, workloads=workloads)
    else:
        text = document(result.to_dict(), args.format)
    emit_noted("admit", text, args.output, read_notes, args.strict)
    return EXIT_OK
