"""What runs on this machine's GPUs, read by running ``nvidia-smi`` (``placer reconcile``
without ``--gpus``/``--apps``, SPEC §11).

The two queries of the ``placer reconcile`` contract are run and their output goes through
the parsers of the CSV files (:mod:`placer.adapters.nvidia_smi.query`), with the command
as the source of error locations (``nvidia-smi --query-gpu=index,uuid --format=csv:3``).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import NamedTuple, Sequence

from placer.adapters.nvidia_smi.query import ComputeApp, GpuInfo, parse_compute_apps, parse_query_gpu
from placer.exceptions import InvalidInputError

__all__ = ["TIMEOUT_S", "GPU_QUERY", "APPS_QUERY", "NodeQuery", "find_nvidia_smi", "run_nvidia_smi", "query_node"]

TIMEOUT_S = 30.0
"""How long one ``nvidia-smi`` call may take."""

GPU_QUERY = ("--query-gpu=index,uuid", "--format=csv")
"""Arguments of the query that maps GPU UUIDs to indices."""

APPS_QUERY = ("--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv")
"""Arguments of the query that lists the processes on the GPUs."""


class NodeQuery(NamedTuple):
    """The parsed output of both queries, as :func:`placer.diagnostics.reconcile.reconcile` takes it."""

    gpus: tuple[GpuInfo, ...]
    apps: tuple[ComputeApp, ...]


def find_nvidia_smi(nvidia_smi: str = "nvidia-smi") -> str:
    """The path of the ``nvidia-smi`` executable: ``nvidia_smi`` looked up on the PATH,
    or, when it is a path (``/usr/bin/nvidia-smi``, ``./fake``), checked as given.

    Raises
    ------
    InvalidInputError
        No such executable; ``where`` is ``nvidia_smi``.
    """
    found = shutil.which(nvidia_smi)
    if found is None:
        place = "an executable file" if os.path.dirname(nvidia_smi) else "on the PATH"
        raise InvalidInputError(
            nvidia_smi,
            f"not {place}: run on a node with the NVIDIA driver, or give the files (--gpus CSV --apps CSV)",
        )
    return found


def run_nvidia_smi(args: Sequence[str], nvidia_smi: str = "nvidia-smi", timeout: float = TIMEOUT_S) -> str:
    """The standard output of ``nvidia-smi ARGS``.

    Raises
    ------
    InvalidInputError
        ``nvidia-smi`` not found (:func:`find_nvidia_smi`), not started, no answer within
        ``timeout``, or a non-zero exit; ``where`` is the command, ``what`` the first line
        nvidia-smi wrote on stderr (on stdout when stderr is empty: the driver errors go
        there).
    """
    command = _command(nvidia_smi, args)
    found = find_nvidia_smi(nvidia_smi)
    try:
        done = subprocess.run([found, *args], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise InvalidInputError(command, f"no answer within {timeout:g} s: is the GPU driver hung?") from None
    except OSError as e:
        raise InvalidInputError(command, f"cannot run {found}: {e.strerror or e}") from None
    if done.returncode != 0:
        said = _first_line(done.stderr) or _first_line(done.stdout)
        status = f"exit status {done.returncode}"
        raise InvalidInputError(command, f"{said} ({status})" if said else status)
    return done.stdout


def query_node(nvidia_smi: str = "nvidia-smi", timeout: float = TIMEOUT_S) -> NodeQuery:
    """Run both queries of ``placer reconcile`` (:data:`GPU_QUERY`, then
    :data:`APPS_QUERY`) and parse what they print.

    Parameters
    ----------
    nvidia_smi : str
        The command to run (another name or a path, e.g. for a test).
    timeout : float
        Seconds each call may take.

    Raises
    ------
    InvalidInputError
        A call that fails (:func:`run_nvidia_smi`), or output the parsers refuse, at
        ``<command>:<line>``.
    """
    gpu_text = run_nvidia_smi(GPU_QUERY, nvidia_smi, timeout)
    gpus = parse_query_gpu(gpu_text, _command(nvidia_smi, GPU_QUERY))
    apps_text = run_nvidia_smi(APPS_QUERY, nvidia_smi, timeout)
    apps = parse_compute_apps(apps_text, _command(nvidia_smi, APPS_QUERY))
    return NodeQuery(gpus, apps)


def _command(nvidia_smi: str, args: Sequence[str]) -> str:
    return " ".join([os.path.basename(nvidia_smi), *args])


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
