"""A real Slurm on this machine for the tests: munged, slurmctld and four slurmd in a temporary
folder (Debian's slurm-wlm 22.05; any 8 device files stand in for each node's GPUs).

``SlurmCluster.start(folder)`` writes the configuration (``slurm.conf`` with
``select/cons_tres``, ``topology/tree`` and ``SlurmdParameters=config_overrides``, a
``gres.conf`` of 8 ``a100`` GPUs per node, a ``topology.conf`` of two switches under one) on
free loopback ports and starts the daemons; ``stop()`` ends every process it started, by the
pids they wrote. Commands run with ``env`` (``SLURM_CONF`` set).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from loopback import free_ports

NODES = ("gpu01", "gpu02", "gpu03", "gpu04")
SWITCHES = {"s1": ("gpu01", "gpu02"), "s2": ("gpu03", "gpu04")}
DAEMONS = ("munged", "slurmctld", "slurmd")


def missing() -> Optional[str]:
    """Why a Slurm cannot be started here (None: it can)."""
    absent = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    if absent:
        return (f"{', '.join(absent)} not installed (apt-get install slurm-wlm munge; .ci/run installs them "
                "when it runs as root)")
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root"
    return None


def _daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class SlurmCluster:
    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    pid_files: list[Path] = field(default_factory=list)

    @classmethod
    def start(cls, folder: Path) -> "SlurmCluster":
        cluster = cls(folder)
        try:
            cluster._start()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _start(self) -> None:
        f = self.folder
        for sub in ("state", "log", *(f"spool/{n}" for n in NODES)):
            (f / sub).mkdir(parents=True, exist_ok=True)
        key = f / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = f / "munge.sock"
        self.pid_files.append(f / "munged.pid")
        subprocess.run([_daemon("munged"), "--force", f"--key-file={key}", f"--socket={sock}",
                        f"--pid-file={f / 'munged.pid'}", f"--log-file={f / 'log/munged.log'}",
                        f"--seed-file={f / 'munged.seed'}"], check=True, capture_output=True, timeout=30)
        ctld_port, *node_ports = free_ports(1 + len(NODES))
        node_lines = "".join(
            f"NodeName={n} NodeHostname=localhost Port={p} CPUs=16 RealMemory=64000 Gres=gpu:a100:8 State=UNKNOWN\n"
            for n, p in zip(NODES, node_ports))
        (f / "slurm.conf").write_text(
            f"ClusterName=placertest\nSlurmctldHost=localhost\nSlurmUser=root\nSlurmdUser=root\n"
            f"SlurmctldPort={ctld_port}\nAuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\n"
            f"StateSaveLocation={f / 'state'}\nSlurmdSpoolDir={f / 'spool'}/%n\n"
            f"SlurmctldPidFile={f / 'slurmctld.pid'}\nSlurmdPidFile={f / 'slurmd-%n.pid'}\n"
            f"SlurmctldLogFile={f / 'log/slurmctld.log'}\nSlurmdLogFile={f / 'log/slurmd-%n.log'}\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
            "MpiDefault=none\nReturnToService=2\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\n"
            "SelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=1000\nGresTypes=gpu\nTopologyPlugin=topology/tree\n"
            "SlurmdParameters=config_overrides\n" + node_lines
            + f"PartitionName=gpu Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP\n")
        (f / "gres.conf").write_text("NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/tty[0-7]\n")
        (f / "topology.conf").write_text("".join(f"SwitchName={s} Nodes={','.join(ns)}\n" for s, ns in SWITCHES.items())
                                         + "SwitchName=top Switches=s[1-2]\n")
        self.env = {**os.environ, "SLURM_CONF": str(f / "slurm.conf")}
        self.pid_files.append(f / "slurmctld.pid")
        subprocess.run([_daemon("slurmctld"), "-c", "-f", str(f / "slurm.conf")], check=True, env=self.env,
                       capture_output=True, timeout=60)
        for n in NODES:
            self.pid_files.append(f / f"slurmd-{n}.pid")
            subprocess.run([_daemon("slurmd"), "-N", n, "-f", str(f / "slurm.conf")], check=True, env=self.env,
                           capture_output=True, timeout=60)
        self.wait_for(lambda: self.run("sinfo", "-h", "-o", "%T %D").split() == ["idle", "4"], "4 idle nodes")

    def run(self, *command: str, check: bool = True) -> str:
        """A Slurm command's standard output."""
        done = subprocess.run(list(command), env=self.env, capture_output=True, text=True, timeout=60, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
        return done.stdout

    def wait_for(self, condition, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm: no {what} after {timeout:g} s; logs in {self.folder / 'log'}")
            time.sleep(0.5)

    def stop(self) -> None:
        """End every daemon started here, by its pid file, and wait for them to go."""
        pids = []
        for path in reversed(self.pid_files):
            try:
                pid = int(path.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 20
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False
