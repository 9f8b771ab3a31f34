"""The ``placer`` command line (SPEC §4).

Exit status: 0 done, 1 ``check`` found violations (or, with ``--fail-on-pending``, pods
were left pending), 2 bad input or usage (one line on stderr, ``placer: error: <where>:
<what>``, no partial output file).

The modules parse arguments and print; the work is the library's. :mod:`.program` holds
the command list, the parser and :func:`main`; :mod:`.options` and :mod:`.output` what the
commands share (options and their values; output files, notes, exit statuses). One module
per group of commands, imported only when one of its commands runs: :mod:`.place`
(``place``, ``preempt``, ``defrag``, ``check``), :mod:`.topology` (``gpus``, ``topo``),
:mod:`.explain` (``explain``, ``report``), :mod:`.imports` (``import SOURCE``),
:mod:`.reconcile`, :mod:`.queues` (``admit``), :mod:`.replay` (``simulate``, ``sweep``),
:mod:`.serve` and :mod:`.demo`.
"""
from __future__ import annotations

from placer.cli.output import (
    EXIT_BAD_INPUT,
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_VIOLATIONS,
)
from placer.cli.program import build_parser, main

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_VIOLATIONS",
    "build_parser",
    "main",
]
