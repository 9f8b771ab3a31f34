"""A running Slurm's view of its cluster, read by running its client commands
(``placer import slurm --live``, SPEC §11).

``scontrol -d show node`` gives the nodes and the GPU indices in use (``GresUsed=``),
``scontrol show topology`` the switch tree (when the ``topology/tree`` plugin is on) and
``scontrol show job`` the jobs holding them; the texts go through the same parsers as the
files of ``placer import slurm`` (:func:`placer.adapters.slurm.importer.import_slurm_texts`).
``gres.conf`` (for NVLink ``Links=``) and ``topology.conf`` are read from files when given.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional, Sequence

from placer.text.files import PathLike, read_text
from placer.adapters.slurm.importer import SlurmImport, import_slurm_texts
from placer.exceptions import InvalidInputError

__all__ = ["TIMEOUT_S", "run_scontrol", "import_slurm_live"]

TIMEOUT_S = 30.0
"""How long one ``scontrol`` call may take."""


def run_scontrol(args: Sequence[str], scontrol: str = "scontrol", timeout: float = TIMEOUT_S) -> str:
    """The standard output of ``scontrol ARGS``.

    Raises
    ------
    InvalidInputError
        ``scontrol`` not on the PATH, no answer within ``timeout``, or a non-zero exit
        (the message is scontrol's first line on stderr); ``where`` is the command.
    """
    command = " ".join([os.path.basename(scontrol), *args])
    found = shutil.which(scontrol)
    if found is None:
        raise InvalidInputError(command, f"{scontrol} is not on the PATH: install Slurm's client commands, "
                                         "or give the files (--nodes FILE)")
    try:
        done = subprocess.run([found, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise InvalidInputError(command, f"no answer within {timeout:g} s: is slurmctld running?") from None
    if done.returncode != 0:
        said = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "")
        raise InvalidInputError(command, said or f"exit status {done.returncode}")
    return done.stdout


def import_slurm_live(
    gres: Optional[PathLike] = None,
    topology: Optional[PathLike] = None,
    mig_model: Optional[str] = None,
    *,
    scontrol: str = "scontrol",
) -> SlurmImport:
    """The running cluster's snapshot, as :func:`placer.adapters.slurm.importer.import_slurm` reads files.

    Parameters
    ----------
    gres : path, optional
        ``gres.conf`` (for the GPUs' ``Links=``).
    topology : path, optional
        ``topology.conf``; without it, ``scontrol show topology`` (nothing when Slurm has no
        switch tree).
    mig_model : str, optional
        As in :func:`import_slurm`.
    scontrol : str
        The command to run (another name or path, e.g. for a test).

    Raises
    ------
    InvalidInputError
        A command that fails (:func:`run_scontrol`), or output the parsers refuse, at
        ``scontrol -d show node:<line>`` and the like.
    """
    nodes = (run_scontrol(["-d", "show", "node"], scontrol), "scontrol -d show node")
    if topology is not None:
        name = os.path.basename(os.fspath(topology))
        tree = (read_text(topology, source=name), name)
    else:
        shown = run_scontrol(["show", "topology"], scontrol)
        tree = (shown, "scontrol show topology") if "SwitchName=" in shown else None
    jobs_text = run_scontrol(["show", "job"], scontrol)
    jobs = (jobs_text, "scontrol show job") if "JobId=" in jobs_text else None
    gres_text = None
    if gres is not None:
        name = os.path.basename(os.fspath(gres))
        gres_text = (read_text(gres, source=name), name)
    return import_slurm_texts(nodes, gres_text, tree, mig_model, jobs)
