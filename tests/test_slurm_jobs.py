"""``placer import slurm --jobs``: running Slurm jobs as pods with priority and start time.

``handmade-scontrol-show-job.txt`` is written in the layout of ``scontrol show job``
(Slurm 23.11: ``ReqTRES``/``AllocTRES``, keys such as ``CPUs/Task`` and ``AllocNode:Sid``):
job 4242 runs on gpu01 of ``handmade-scontrol-d-show-node.txt`` and holds all that node's
allocation; job 4250 is pending.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import placer
from placer.adapters.slurm.importer import import_slurm
from placer.adapters.slurm.jobs import parse_scontrol_jobs
from placer.cli import main
from placer.exceptions import InvalidInputError

DATA = Path(__file__).parent / "data" / "slurm"
NODES = DATA / "handmade-scontrol-d-show-node.txt"
JOBS = DATA / "handmade-scontrol-show-job.txt"

TWO_NODES = """\
NodeName=n1 CPUAlloc=72 CPUTot=128 RealMemory=1000000 AllocMem=512000
   Gres=gpu:h100:8 GresUsed=gpu:h100:8(IDX:0-7) State=ALLOCATED
NodeName=n2 CPUAlloc=64 CPUTot=128 RealMemory=1000000 AllocMem=500000
   Gres=gpu:h100:8 GresUsed=gpu:h100:8(IDX:0-7) State=ALLOCATED
"""
JOB_7 = """\
JobId=7 JobName=pretrain
   Priority=100 Nice=0 Account=ml QOS=normal
   JobState=RUNNING Reason=None Dependency=(null)
   StartTime=2024-04-01T08:00:00 EndTime=2024-04-04T08:00:00 Deadline=N/A
   NodeList=n[1-2]
   NumNodes=2 NumCPUs=128 NumTasks=16 CPUs/Task=8 ReqB:S:C:T=0:0:*:*
   AllocTRES=cpu=128,mem=1000000M,node=2,billing=128,gres/gpu=16
"""
JOB_9 = "JobId=9 JobName=prep Priority=50 JobState=RUNNING StartTime=2024-04-01T09:30:00 NodeList=n1 " \
        "NumNodes=1 TRES=cpu=8,mem=12000M,node=1\n"  # --oneliner, and TRES= of Slurm before 23.02


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_running_jobs_only():
    jobs = parse_scontrol_jobs(JOBS.read_text(), "jobs.txt")
    assert [(j.job_id, j.where, j.priority, j.start_time, j.nodes, j.cpus, j.memory_mib, j.gpus) for j in jobs] == [
        ("4242", "jobs.txt:1", 5000, "2024-03-31T05:49:16Z", ("gpu01",), 48, 262144, 3)]


def test_a_job_holding_a_nodes_whole_allocation_takes_its_gpu_indices():
    imported = import_slurm(NODES, jobs=JOBS)
    nodes = {n["name"]: n for n in imported.document["nodes"]}
    assert nodes["gpu01"]["pods"] == [{
        "name": "job/4242", "gpus": [0, 1, 3], "cpuMilli": 48000, "memoryMiB": 262144, "priority": 5000,
        "startTime": "2024-03-31T05:49:16Z"}]
    # nodes no listed job runs on keep Slurm's allocation as one pod
    assert [p["name"] for p in nodes["gpu04"]["pods"]] == ["slurm/gpu04/gres-used"]
    assert import_slurm(NODES).document["nodes"][0]["pods"][0]["name"] == "slurm/gpu01/gres-used"


def test_a_job_on_several_nodes_is_a_running_gang(tmp_path):
    nodes = _write(tmp_path, "nodes.txt", TWO_NODES)
    jobs = _write(tmp_path, "jobs.txt", JOB_7 + "\n" + JOB_9)
    pods = {n["name"]: n["pods"] for n in import_slurm(nodes, jobs=jobs).document["nodes"]}
    gang = {"priority": 100, "startTime": "2024-04-01T08:00:00Z", "gang": "job/7", "cpuMilli": 64000,
            "memoryMiB": 500000}
    # n2 runs job 7 alone: it holds the GresUsed indices; on n1 two jobs share them: unknown
    assert pods["n2"] == [{"name": "job/7/n2", "gpus": list(range(8)), **gang}]
    assert pods["n1"] == [
        {"name": "job/7/n1", "unknownGpus": 8, **gang},
        {"name": "job/9", "cpuMilli": 8000, "memoryMiB": 12000, "priority": 50, "startTime": "2024-04-01T09:30:00Z"},
    ]


def test_preemption_evicts_a_multi_node_job_whole(tmp_path):
    nodes = _write(tmp_path, "nodes.txt", TWO_NODES)
    jobs = _write(tmp_path, "jobs.txt", JOB_7 + "\n" + JOB_9)
    snapshot = import_slurm(nodes, jobs=jobs).snapshot
    request = {"apiVersion": "placer/v1", "kind": "PlacementRequest", "pods": [{"name": "urgent", "gpus": 4, "priority": 1000}]}
    result = placer.preempt(snapshot, request)
    assert [(a.pod, a.nominated) for a in result.assignments] == [("urgent", True)]
    assert [(p.victims, p.nodes) for p in result.preemptions] == [(("job/7/n1", "job/7/n2"), ("n1", "n2"))]


@pytest.mark.parametrize(
    "jobs, where, fragment",
    [
        (JOB_7.replace("gres/gpu=16", "gres/gpu=15"), "jobs.txt:7",
         "expected the gres/gpu of AllocTRES= (15) to divide evenly over the job's 2 nodes"),
        (JOB_7.replace("n[1-2]", "n[1-3]"), "jobs.txt:6", "expected NumNodes= to count the 3 node(s) of NodeList=, got 2"),
        (JOB_7.replace("   Priority=100 Nice=0 Account=ml QOS=normal\n", ""), "jobs.txt:1",
         "expected Priority= in the record of running job 7"),
        (JOB_7.replace("2024-04-01T08:00:00 End", "yesterday End"), "jobs.txt:4", "expected StartTime= like"),
        (JOB_7 + JOB_7, "jobs.txt:8", "expected each job once, got JobId=7 again (line 1)"),
        ("squeue\n" + JOB_7, "jobs.txt:1", "expected a job record starting JobId="),
        ("", "jobs.txt:1", "expected scontrol show job output (JobId= records), got none"),
        (JOB_7.replace("n[1-2]", "n[1,3]"), "jobs.txt:1", "job 7 runs on node n3, which scontrol show node does not list"),
        (JOB_7.replace("cpu=128", "cpu=256"), "nodes.txt:1",
         "node n1: the jobs of --jobs hold more cpuMilli than Slurm allocated on it (job 7)"),
    ],
)
def test_job_errors_name_the_file_and_line(tmp_path, jobs, where, fragment):
    nodes = _write(tmp_path, "nodes.txt", TWO_NODES)
    with pytest.raises(InvalidInputError) as info:
        import_slurm(nodes, jobs=_write(tmp_path, "jobs.txt", jobs))
    assert info.value.where == where
    assert fragment in info.value.what


def test_cli_import_slurm_jobs(tmp_path, capsys):
    out = tmp_path / "cluster.json"
    assert main(["import", "slurm", "--nodes", str(NODES), "--jobs", str(JOBS), "-o", str(out)]) == 0
    pods = json.loads(out.read_text())["nodes"][0]["pods"]
    assert [(p["name"], p["priority"]) for p in pods] == [("job/4242", 5000)]
    assert main(["import", "slurm", "--nodes", str(NODES), "--jobs", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err


def test_priority_basic_priorities_are_shifted_into_placers_range_in_order():
    # Slurm's priority/basic gives the first job 4294901759 (0xFFFEFFFF), the next one less.
    text = JOB_9.replace("Priority=50", "Priority=4294901759") + JOB_9.replace("JobId=9", "JobId=10").replace(
        "Priority=50", "Priority=4294901758")
    first, second = parse_scontrol_jobs(text, "jobs.txt")
    assert (first.priority, second.priority) == (4294901759 - 2**31, 4294901758 - 2**31)
    assert first.priority > second.priority and first.priority <= 2**31 - 1
    with pytest.raises(InvalidInputError, match="at most 4294967295"):
        parse_scontrol_jobs(JOB_9.replace("Priority=50", "Priority=4294967296"), "jobs.txt")


@pytest.mark.parametrize("per_node, gpus", [("gres:gpu:a100:3", 3), ("gres:gpu:2", 2), ("gres/gpu=4", 4),
                                            ("gres/gpu:h100=1,gres/shard=2", 1)])
def test_gpus_come_from_tres_per_node_when_tres_has_none(per_node: str, gpus: int) -> None:
    # Slurm 22.05 without AccountingStorageTRES=gres/gpu: TRES=cpu=2,mem=2000M,node=2 and
    # TresPerNode=gres:gpu:2 (as a live 22.05 prints for sbatch -N 2 --gres=gpu:2).
    text = ("JobId=2 JobName=wrap Priority=7 JobState=RUNNING StartTime=2024-04-01T09:30:00 "
            f"NodeList=n[1-2] NumNodes=2 TRES=cpu=2,mem=2000M,node=2,billing=2 TresPerNode={per_node}\n")
    (job,) = parse_scontrol_jobs(text, "jobs.txt")
    assert (job.nodes, job.gpus, job.cpus) == (("n1", "n2"), gpus, 1)
    with pytest.raises(InvalidInputError, match="expected a GPU count in TresPerNode="):
        parse_scontrol_jobs(text.replace(per_node, "gres:gpu:a100:x"), "jobs.txt")
