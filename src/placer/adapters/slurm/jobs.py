"""Running Slurm jobs as running pods: ``scontrol show job`` output, for preemption.

``placer import slurm`` records what Slurm allocated on a node as one pod
(``slurm/<node>/gres-used``); given ``--jobs`` it splits that allocation by job, so that
preemption sees each job with its priority and start time. :func:`parse_scontrol_jobs`
reads the records, :func:`job_pods` makes a node's pods of them.

Slurm prints times in the cluster's local time without an offset; placer reads them as
UTC. Preemption only compares start times with each other, so a shared offset changes
nothing (a daylight-saving change between two starts can reorder them by an hour).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from placer.adapters.slurm.records import fail
from placer.adapters.slurm.values import NO_VALUE, mem_mib, tres, tres_gpus, whole
from placer.text.hostlist import expand_hostlist
from placer.text.lines import TextLines, clip

__all__ = ["SLURM_MAX_PRIORITY", "PLACER_MAX_PRIORITY", "SlurmJob", "parse_scontrol_jobs", "job_pods"]

SLURM_MAX_PRIORITY = 2**32 - 1
PLACER_MAX_PRIORITY = 2**31 - 1

_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z][A-Za-z0-9_/:]*)=")
_ECHO = re.compile(r"(?:\S*[$#>%]\s*)?scontrol(?:\s.*)?")
_JOB_ID = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class SlurmJob:
    """One running job of ``scontrol show job`` output.

    Attributes
    ----------
    job_id : str
        ``JobId=``.
    where : str
        ``"<source>:<line>"`` of ``JobId=``.
    priority : int
        ``Priority=``; Slurm's is unsigned 32-bit, placer's signed: a priority of 2³¹ and
        above (``priority/basic`` gives jobs 4294901759 and down) has 2³¹ taken off, which
        keeps the order of the jobs of one cluster.
    start_time : str or None
        ``StartTime=`` as RFC 3339 in UTC (see the module notes), None when not known.
    nodes : tuple of str
        ``NodeList=`` expanded.
    cpus, memory_mib, gpus : int
        The job's share on each of its nodes: the ``cpu``, ``mem`` and GPUs of its
        ``AllocTRES=`` (``TRES=`` before Slurm 23.02) divided by its node count; GPUs from
        ``TresPerNode=`` when the TRES list has none (Slurm lists ``gres/gpu`` there only
        when accounting tracks it).
    """

    job_id: str
    where: str
    priority: int
    start_time: str | None
    nodes: tuple[str, ...]
    cpus: int
    memory_mib: int
    gpus: int

    @property
    def names(self) -> dict[str, str]:
        """Pod name per node: ``job/<JobId>``, or ``job/<JobId>/<node>`` for a job on
        several nodes (a running gang named ``job/<JobId>``)."""
        if len(self.nodes) == 1:
            return {self.nodes[0]: f"job/{self.job_id}"}
        return {node: f"job/{self.job_id}/{node}" for node in self.nodes}


def parse_scontrol_jobs(text: str, source: str = "<text>") -> list[SlurmJob]:
    """The running jobs of ``scontrol show job`` output (``-d`` and ``--oneliner`` too).

    A record starts at a line beginning ``JobId=`` and runs to the next one; its lines
    hold ``Key=Value`` pairs (keys may hold ``/`` and ``:``, as ``CPUs/Task=`` and
    ``AllocNode:Sid=``). Only records with ``JobState=RUNNING`` are kept; others (pending,
    completed, suspended) hold nothing. Read: ``Priority``, ``StartTime``
    (``2025-06-10T08:00:05``), ``NodeList``, ``NumNodes`` and ``AllocTRES`` (else
    ``TRES``): ``cpu``, ``mem`` and ``gres/gpu`` (else the sum of ``gres/gpu:<type>``).

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of SlurmJob
        In the order of the output.

    Raises
    ------
    InvalidInputError
        At ``"<source>:<line>"``: text outside a record, a running job without
        ``Priority=``, ``NodeList=`` or a TRES list, a value that does not parse, a node
        count that disagrees with ``NodeList=``, amounts that do not divide evenly over
        the nodes, a job given twice, or no record at all (line 1).
    """
    lines = TextLines(text, source)
    records: list[tuple[int, dict[str, tuple[str, int]]]] = []
    for line_no, _, raw in lines.numbered():
        stripped = raw.strip()
        if stripped.startswith("JobId="):
            records.append((line_no, {}))
        elif not records:
            if _ECHO.fullmatch(stripped):
                continue
            lines.fail(line_no, f"expected a job record starting JobId=, got {clip(stripped)!r}")
        record = records[-1][1]
        for key, value in _pairs(stripped, lines, line_no):
            record.setdefault(key, (value, line_no))
    if not records:
        lines.fail(1, "expected scontrol show job output (JobId= records), got none")
    jobs: list[SlurmJob] = []
    seen: dict[str, int] = {}
    for line_no, record in records:
        job_id = record["JobId"][0]
        if not _JOB_ID.fullmatch(job_id):
            lines.fail(line_no, f"expected a numeric JobId=, got {job_id!r}")
        if job_id in seen:
            lines.fail(line_no, f"expected each job once, got JobId={job_id} again (line {seen[job_id]})")
        seen[job_id] = line_no
        if record.get("JobState", ("",))[0] == "RUNNING":
            jobs.append(_job(record, line_no, source))
    return jobs


def _pairs(line: str, lines: TextLines, line_no: int) -> list[tuple[str, str]]:
    matches = list(_KEY.finditer(line))
    if not matches or matches[0].start() != 0:
        lines.fail(line_no, f"expected Key=Value at the start of the line, got {clip(line)!r}")
    ends = [m.start() for m in matches[1:]] + [len(line)]
    return [(m.group(1), line[m.end():end].strip()) for m, end in zip(matches, ends)]


_GRES_GPU = re.compile(r"gres[:/]gpu(?::[^:=,]+)?[:=]([0-9]+)")


def _gpus_per_node(value: str, where: str) -> int:
    """The GPUs of ``TresPerNode=`` (``gres:gpu:a100:3`` in Slurm 22.05, ``gres/gpu=3``
    later; several items comma-separated)."""
    total = 0
    for item in value.split(","):
        item = item.strip()
        if not item.startswith(("gres:gpu", "gres/gpu")):
            continue
        m = _GRES_GPU.fullmatch(item)
        if m is None:
            fail(where, f"expected a GPU count in TresPerNode= such as gres:gpu:a100:3, got {item!r}")
        total += int(m.group(1))
    return total


def _job(record: Mapping[str, tuple[str, int]], line: int, source: str) -> SlurmJob:
    def need(key: str) -> tuple[str, str]:
        if key not in record:
            fail(f"{source}:{line}", f"expected {key}= in the record of running job {record['JobId'][0]}")
        value, at = record[key]
        return value, f"{source}:{at}"

    priority = whole(*need("Priority"), "Priority=")
    if priority > SLURM_MAX_PRIORITY:
        fail(need("Priority")[1], f"expected Priority= at most {SLURM_MAX_PRIORITY}, got {priority}")
    if priority > PLACER_MAX_PRIORITY:
        # priority/basic starts jobs just under 2**32, beyond placer's int32: shifted, in order.
        priority -= PLACER_MAX_PRIORITY + 1
    node_text, node_where = need("NodeList")
    nodes = tuple(expand_hostlist(node_text, node_where))
    if "NumNodes" in record:
        value, at = record["NumNodes"]
        count = whole(value.split("-")[0], f"{source}:{at}", "NumNodes=")
        if count != len(nodes):
            fail(f"{source}:{at}", f"expected NumNodes= to count the {len(nodes)} node(s) of NodeList=, got {value}")
    key = "AllocTRES" if "AllocTRES" in record else "TRES"
    listed, tres_where = need(key)
    amounts = tres(listed, tres_where, key)
    cpus = whole(amounts["cpu"], tres_where, f"cpu of {key}=") if "cpu" in amounts else 0
    memory = mem_mib(amounts["mem"], tres_where, f"mem of {key}=") if "mem" in amounts else 0
    gpus = tres_gpus(amounts, tres_where, key) or 0
    if not gpus and "TresPerNode" in record:
        # GPUs are in TRES only where accounting tracks gres/gpu (AccountingStorageTRES).
        value, at = record["TresPerNode"]
        gpus = _gpus_per_node(value, f"{source}:{at}") * len(nodes)
    for what, total in (("cpu", cpus), ("mem", memory), ("gres/gpu", gpus)):
        if total % len(nodes):
            fail(tres_where, f"expected the {what} of {key}= ({total}) to divide evenly over the job's "
                              f"{len(nodes)} nodes; placer cannot tell each node's share")
    start = record.get("StartTime")
    return SlurmJob(
        job_id=record["JobId"][0],
        where=f"{source}:{line}",
        priority=priority,
        start_time=None if start is None else _utc(start[0], f"{source}:{start[1]}"),
        nodes=nodes,
        cpus=cpus // len(nodes),
        memory_mib=memory // len(nodes),
        gpus=gpus // len(nodes),
    )


def _utc(text: str, where: str) -> str | None:
    """``StartTime=`` as RFC 3339 (read as UTC); None for ``Unknown``/``None``."""
    if text in NO_VALUE or text in ("Unknown", "None"):
        return None
    try:
        moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        fail(where, f"expected StartTime= like 2025-06-10T08:00:05, got {text!r}")
    return moment.isoformat() + "Z"


def job_pods(node: str, allocated: Mapping[str, Any], jobs: list[SlurmJob], where: str) -> list[dict[str, Any]]:
    """The pods of ``node``: one per job running there, and what else Slurm allocated.

    Parameters
    ----------
    node : str
        The node's name.
    allocated : Mapping
        The node's ``slurm/<node>/gres-used`` pod (everything allocated on it).
    jobs : list of SlurmJob
        The jobs running on ``node``.
    where : str
        The node's location, for errors.

    Returns
    -------
    list of dict
        Per job a pod (see :attr:`SlurmJob.names`) with ``priority``, ``startTime``,
        ``cpuMilli``, ``memoryMiB``, its GPUs and, for a job on several nodes, ``gang``;
        then ``allocated`` less the jobs, when anything is left. A job holds the node's
        ``GresUsed=`` indices when it is the node's only job and holds all its GPUs;
        otherwise its GPUs are ``unknownGpus`` (and so are the rest's): ``scontrol show
        job`` does not say which GPUs a job holds.

    Raises
    ------
    InvalidInputError
        At ``where`` when the jobs hold more CPU, memory or GPUs than Slurm allocated on
        the node.
    """
    used_gpus = len(allocated.get("gpus", ())) + allocated.get("unknownGpus", 0)
    left = {"cpuMilli": allocated.get("cpuMilli", 0), "memoryMiB": allocated.get("memoryMiB", 0), "gpus": used_gpus}
    sole = len(jobs) == 1 and jobs[0].gpus == used_gpus and "gpus" in allocated and not allocated.get("unknownGpus")
    pods = []
    for job in jobs:
        pod: dict[str, Any] = {"name": job.names[node]}
        if job.gpus:
            pod["gpus" if sole else "unknownGpus"] = allocated["gpus"] if sole else job.gpus
        for key, amount in (("cpuMilli", job.cpus * 1000), ("memoryMiB", job.memory_mib), ("gpus", job.gpus)):
            left[key] -= amount
            if left[key] < 0:
                fail(where, f"node {node}: the jobs of --jobs hold more {key} than Slurm allocated on it "
                             f"(job {job.job_id})")
            if amount and key != "gpus":
                pod[key] = amount
        if job.priority:
            pod["priority"] = job.priority
        if job.start_time is not None:
            pod["startTime"] = job.start_time
        if len(job.nodes) > 1:
            pod["gang"] = f"job/{job.job_id}"
        pods.append(pod)
    rest: dict[str, Any] = {"name": allocated["name"]}
    if left["gpus"]:
        rest["unknownGpus"] = left["gpus"]
    rest.update((key, left[key]) for key in ("cpuMilli", "memoryMiB") if left[key])
    return pods + [rest] if len(rest) > 1 else pods
