"""kube-scheduler's own decision over given objects: ``kube-oracle`` (``kube/cmd/kube-oracle``)
run on a batch of cases in one process.

A case is ``{"nodes": [Node...], "pods": [bound Pod...], "pod": pending Pod}`` and optionally
``"scoringStrategy"`` (NodeResourcesFitArgs' ``scoringStrategy`` as the v1 configuration
writes it). kube-oracle applies the API server's defaulting, runs the default profile's
PreFilter and Filter plugins over every node, then PreScore and Score over the feasible ones,
and answers per case ``{"feasible": [names], "message": "0/N nodes are available: ..." or "",
"statuses": {node: {plugin, code, reasons}}, "scores": {node: {total, plugins}}}``.

The binary is ``$PLACER_KUBE_ORACLE`` when set, else ``kube-oracle`` beside the control
plane's binaries (:data:`kube_control_plane.BIN`).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Optional, Sequence

import kube_control_plane

ORACLE = Path(os.environ.get("PLACER_KUBE_ORACLE") or kube_control_plane.BIN / "kube-oracle")


class OracleError(AssertionError):
    """kube-oracle failed, or refused a case."""


def missing() -> Optional[str]:
    """Why kube-oracle cannot run here (None: it can)."""
    if "PLACER_KUBE_ORACLE" in os.environ:
        return None if ORACLE.exists() else f"PLACER_KUBE_ORACLE={ORACLE} does not exist"
    return kube_control_plane.missing("kube-oracle")


def decide(cases: Sequence[dict[str, Any]], timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """kube's decision for each case, in order, from one run of kube-oracle.

    Raises
    ------
    OracleError
        When kube-oracle exits non-zero, answers other than one result per case, or reports
        an error for a case (the case is quoted).
    """
    run = subprocess.run([str(ORACLE)], input=json.dumps(list(cases)).encode(), capture_output=True,
                         timeout=timeout_s)
    if run.returncode != 0:
        raise OracleError(f"{ORACLE} exited with {run.returncode}: {run.stderr.decode(errors='replace')[-2000:]}")
    results = json.loads(run.stdout)
    if not isinstance(results, list) or len(results) != len(cases):
        raise OracleError(f"{ORACLE} gave {len(results) if isinstance(results, list) else results!r} "
                          f"result(s) for {len(cases)} case(s)")
    for i, result in enumerate(results):
        if result.get("error"):
            raise OracleError(f"case {i}: {result['error']}\n{json.dumps(cases[i])}")
    return results
