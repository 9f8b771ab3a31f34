"""``placer gpus`` and ``placer topo``: one node's GPU links, read from ``nvidia-smi topo -m``
or a gpuTopology document, and the best sets of GPUs in it."""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Callable

from placer.cli.options import DOCUMENT_FORMATS, TEXT_OR_DOCUMENT, TOPOLOGY_FILE_HELP, add_output, index_list, positive_int
from placer.cli.output import EXIT_OK, emit
from placer.exceptions import InvalidInputError
from placer.text.files import STDIN, dump_yaml, read_text, source_name
from placer.text.lines import aligned

if TYPE_CHECKING:
    from placer.diagnostics.topology import LoadedTopology

_OBJECTIVE_HELP = """\
objectives:
  tiling    highest set score + best split of the GPUs left free into same-size sets (default)
  best-set  highest set score alone, whatever it leaves free
"""
_SCORE_HELP = """\
scores: a GPU pair scores 100 per NVLink plus its PCIe relation (PIX 50, PXB 40, PHB 30,
NODE 20, SYS 10); a set scores the sum of its pairs (setScore); an NVSwitch pair scores 1800.
"""
_FILE_HELP = """\
FILE: the text of `nvidia-smi topo -m` (any name), or a JSON/YAML document (.json, .yaml,
.yml) holding a gpuTopology form ({"matrix": [[...]]}, {"nvidiaSmiTopo": "..."} or
{"nvswitch": true, "gpus": 8}) or a node type ({"gpus": 8, "gpuTopology": {...}}).
"""
_GPUS_EPILOG = _OBJECTIVE_HELP + "\n" + _SCORE_HELP + "\n" + _FILE_HELP + """
example:
  placer gpus --topology topo.txt --available 0,2,4,5 --size 2
"""
_TOPO_EPILOG = _OBJECTIVE_HELP + "\n" + _SCORE_HELP + "\n" + _FILE_HELP + """
example:
  nvidia-smi topo -m | placer topo -
"""
_OPTION_WHERES = ("available", "required", "size", "objective")


def add_gpus(sub: Any, summary: str) -> None:
    """``placer gpus``."""
    g = sub.add_parser(
        "gpus", help=summary,
        description=(
            "Choose SIZE GPUs among the available ones of one node by the pair scores of its links;\n"
            "print {gpus, size, objective, setScore} as one JSON line."
        ),
        epilog=_GPUS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("--topology", metavar="FILE", required=True, help=TOPOLOGY_FILE_HELP)
    g.add_argument("--available", metavar="LIST", help="free GPU indices, comma-separated (default: all)")
    g.add_argument("--size", metavar="N", required=True, help="GPUs wanted (at least 1)")
    g.add_argument(
        "--required", metavar="LIST", default="", help="GPU indices the set must hold, comma-separated"
    )
    g.add_argument(
        "--objective", metavar="OBJ", default="tiling", help="tiling (default) or best-set, see below"
    )
    g.add_argument("--format", metavar="FMT", default="json", choices=DOCUMENT_FORMATS,
                   help="json (default: one line) or yaml")
    add_output(g)
    g.set_defaults(handler=run_gpus)


def add_topo(sub: Any, summary: str) -> None:
    """``placer topo``."""
    from placer.diagnostics.topology import ALL_SIZES_MAX_GPUS, LARGE_NODE_MAX_SIZE

    t = sub.add_parser(
        "topo", help=summary,
        description=(
            "Print the GPU link matrix (and NICs) read from FILE, its NVLink islands, and for each\n"
            "set size the best set of GPUs under both objectives when every GPU is free."
        ),
        epilog=_TOPO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("file", metavar="FILE", help=TOPOLOGY_FILE_HELP)
    t.add_argument("--format", metavar="FMT", default="text", choices=TEXT_OR_DOCUMENT,
                   help="text (default), json or yaml")
    add_output(t)
    t.add_argument(
        "--max-size", metavar="N",
        help=f"largest set size to show (default: every size up to {ALL_SIZES_MAX_GPUS} GPUs, "
        f"else at most {LARGE_NODE_MAX_SIZE})",
    )
    t.set_defaults(handler=run_topo)


PARSERS: dict[str, Callable[[Any, str], None]] = {"gpus": add_gpus, "topo": add_topo}


def _read_topology(path: str) -> LoadedTopology:
    """FILE of ``gpus``/``topo``: ``-`` is ``nvidia-smi topo -m`` text on stdin."""
    from placer.diagnostics.topology import load_topology, topology_from_nvidia_smi

    if path == STDIN:
        return topology_from_nvidia_smi(read_text(path), source_name(path))
    return load_topology(path)


def _as_option(exc: InvalidInputError) -> InvalidInputError:
    """An error of :func:`placer.select_gpus` named by its command-line option."""
    for name in _OPTION_WHERES:
        if exc.where == name or exc.where.startswith(name + "["):
            return InvalidInputError("--" + exc.where, exc.what)
    return exc


def run_gpus(args: argparse.Namespace) -> int:
    """Run ``placer gpus``."""
    from placer.placement.gpusets import OBJECTIVES, select_gpus

    if args.objective not in OBJECTIVES:
        raise InvalidInputError("--objective", f"expected tiling or best-set, got {args.objective!r}")
    size = positive_int(args.size, "--size")
    available = index_list(args.available, "--available") if args.available is not None else None
    required = index_list(args.required, "--required")
    topology = _read_topology(args.topology).topology
    n = topology.gpus
    if size > n:
        raise InvalidInputError("--size", f"expected at most {n} (the GPUs of the node), got {size}")
    if available is None:
        available = list(range(n))
    try:
        chosen = select_gpus(topology, available, size, required=required, objective=args.objective)
    except InvalidInputError as exc:
        raise _as_option(exc) from None
    doc = {"gpus": chosen, "size": size, "objective": args.objective, "setScore": topology.set_score(chosen)}
    emit(dump_yaml(doc) if args.format == "yaml" else json.dumps(doc) + "\n", args.output)
    return EXIT_OK


def run_topo(args: argparse.Namespace) -> int:
    """Run ``placer topo``."""
    from placer.diagnostics.topology import topology_report

    max_size = positive_int(args.max_size, "--max-size") if args.max_size is not None else None
    loaded = _read_topology(args.file)
    report = topology_report(loaded.topology, loaded.nics, max_size)
    if args.format == "json":
        text = _dump_rows_inline(report)
    elif args.format == "yaml":
        text = dump_yaml(report)
    else:
        text = _topo_text(report, source_name(args.file))
    emit(text, args.output)
    return EXIT_OK


def _dump_rows_inline(obj: Any) -> str:
    """JSON indented by 2 like :func:`placer.text.files.dump_json`, but each list of plain
    values on one line."""

    def emit_value(v: Any, depth: int) -> str:
        pad, inner = "  " * depth, "  " * (depth + 1)
        if isinstance(v, dict) and v:
            items = [f"{inner}{json.dumps(k)}: {emit_value(x, depth + 1)}" for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
            return "[\n" + ",\n".join(inner + emit_value(x, depth + 1) for x in v) + "\n" + pad + "]"
        return json.dumps(v, ensure_ascii=False)

    return emit_value(obj, 0) + "\n"


def _set_text(gpus: list[int]) -> str:
    return "[" + ",".join(map(str, gpus)) + "]"


def _topo_text(report: dict[str, Any], source: str) -> str:
    from placer.model.topology import NVSWITCH_POINTS

    n = report["gpus"]
    nics = report["nics"]
    lines = [f"{source}: {n} GPU{'s' if n != 1 else ''}, {len(nics)} NIC{'s' if len(nics) != 1 else ''}", ""]
    head = [""] + [f"GPU{j}" for j in range(n)]
    if report["matrix"] is not None:
        rows = [head] + [[f"GPU{i}"] + row for i, row in enumerate(report["matrix"])]
        rows += [[nic["name"]] + nic["labels"] for nic in nics]
        lines += aligned(rows)
    else:
        if report["nvswitch"]:
            lines.append(f"NVSwitch: every pair of GPUs fully connected (pair score {NVSWITCH_POINTS})")
        else:
            lines.append("no link matrix given: every pair of GPUs alike (pair score 0)")
        if nics:
            lines += [""] + aligned([head] + [[nic["name"]] + nic["labels"] for nic in nics])
    lines.append("")
    if report["islands"]:
        text = " ".join(_set_text(g) for g in report["islands"])
        if report["withoutNvlink"]:
            text += " (no NVLink: " + ", ".join(f"GPU{i}" for i in report["withoutNvlink"]) + ")"
        lines.append(f"NVLink islands: {text}")
    else:
        lines.append("NVLink islands: none (no NVLink)")
    lines.append("")
    if report["bestSets"]:
        lines.append("Best set per size, all GPUs free (score = sum of its pair scores):")
        rows = [["size", "tiling", "score", "best-set", "score"]]
        for e in report["bestSets"]:
            row = [str(e["size"])]
            for key in ("tiling", "bestSet"):
                row += [_set_text(e[key]["gpus"]), str(e[key]["setScore"])]
            rows.append(row)
        lines += aligned(rows, right=frozenset((0, 2, 4)), indent="  ")
        shown = report["bestSets"][-1]["size"]
        if shown < n:
            lines.append(f"  (sizes above {shown} not shown; see --max-size)")
    else:
        lines.append("Best set per size: none (fewer than 2 GPUs)")
    return "\n".join(lines) + "\n"
