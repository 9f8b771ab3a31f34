"""What the CP-SAT models share: the names of the solver's statuses.

OR-Tools is imported only where a model is built or a status is named (``import placer``
loads neither it nor the pandas it pulls in); the modules that build models import
``cp_model`` inside those functions and name its types under ``TYPE_CHECKING``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = ["STATUS_NAMES", "status_name"]

STATUS_NAMES = ("optimal", "feasible", "infeasible", "invalid", "unknown")
"""What :func:`status_name` returns: ``invalid`` when CP-SAT refused the model, ``unknown``
when it stopped with no answer (the limits ran out)."""


def status_name(code: cp_model.CpSolverStatus) -> str:
    """placer's name of a CP-SAT status code.

    Parameters
    ----------
    code
        What ``CpSolver.solve`` returned.

    Returns
    -------
    str
        One of :data:`STATUS_NAMES`.
    """
    from ortools.sat.python import cp_model  # noqa: F811 (the module itself, at run time)

    names = {
        cp_model.OPTIMAL: "optimal",
        cp_model.FEASIBLE: "feasible",
        cp_model.INFEASIBLE: "infeasible",
        cp_model.MODEL_INVALID: "invalid",
    }
    return names.get(code, "unknown")
