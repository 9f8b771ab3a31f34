"""``placer schema``: the JSON Schema of a placer/v1 document (:mod:`placer.schema.json_schema`)."""
from __future__ import annotations

import argparse
from typing import Any, Callable

from placer.cli.output import EXIT_OK, document, emit
from placer.schema import DOCUMENT_KINDS, document_schema


def add_schema(sub: Any, summary: str) -> None:
    """``placer schema snapshot|request|result [-o FILE]``."""
    s = sub.add_parser("schema", help=summary, description=summary)
    s.add_argument("kind", choices=list(DOCUMENT_KINDS), help="the document: ClusterSnapshot, PlacementRequest "
                   "or PlacementResult")
    s.add_argument("-o", "--output", metavar="FILE", help="write the schema to FILE (default: stdout)")
    s.set_defaults(handler=run_schema)


PARSERS: dict[str, Callable[[Any, str], None]] = {"schema": add_schema}


def run_schema(args: argparse.Namespace) -> int:
    """Print (or write) the schema of ``args.kind`` as indented JSON."""
    emit(document(document_schema(args.kind), "json"), args.output)
    return EXIT_OK
