"""Exceptions raised by placer."""
from __future__ import annotations

from placer.text.messages import bounded

__all__ = ["PlacerError", "InvalidInputError", "SolverError"]


class PlacerError(Exception):
    """Base class of every error placer raises on purpose."""


class InvalidInputError(PlacerError, ValueError):
    """Input that does not follow the placer/v1 contract.

    Parameters
    ----------
    where : str
        The JSON path (``nodes[3].pods[0].gpus[1]``) or ``file:line`` of the fault,
        optionally prefixed by the file it came from (``cluster.json: nodes[3]``).
    what : str
        What is wrong, naming the expectation and what came instead.

    Both are kept to a bounded length (:func:`placer.text.messages.bounded`): a value of
    megabytes echoed in either is cut to its first characters and its length.
    """

    def __init__(self, where: str, what: str) -> None:
        self.where = bounded(where)
        self.what = bounded(what)
        super().__init__(f"{self.where}: {self.what}" if self.where else self.what)

    def within(self, prefix: str) -> "InvalidInputError":
        """Return the same error with ``prefix`` (a file name) put before its location."""
        where = f"{prefix}: {self.where}" if self.where else prefix
        return InvalidInputError(where, self.what)


class SolverError(PlacerError, RuntimeError):
    """The exact solver failed for a reason other than the instance itself."""
