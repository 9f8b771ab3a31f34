"""Reader of Slurm's network topology: ``topology.conf`` (tree and block forms) and
``scontrol show topology`` output (tree), :func:`parse_topology_conf`, to a
:class:`SlurmTopology`.

Errors are :class:`placer.exceptions.InvalidInputError` with ``where`` = ``"<source>:<line>"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from placer.adapters.slurm.values import whole
from placer.text.hostlist import expand_hostlist
from placer.text.lines import some_of
from placer.adapters.slurm.records import (
    ANY_KEY, NODE_NAME, SCONTROL_ECHO, fail, logical_lines, record_fields, refuse_other_file,
)

__all__ = ["SlurmTopology", "parse_topology_conf"]


@dataclass(frozen=True)
class SlurmTopology:
    """What ``topology.conf`` (or ``scontrol show topology``) says about where nodes sit.

    Attributes
    ----------
    form : str
        ``"tree"`` (``SwitchName=`` lines), ``"block"`` (``BlockName=``/``BlockSizes=``)
        or ``"none"`` (no such line).
    levels : tuple of str
        Topology levels, outermost first: ``switch1`` (the top switches) ... ``switch<D>``
        (the leaf switches) for a tree of depth ``D``; ``("block",)`` for blocks.
    nodes : mapping of str to mapping of str to str
        Per node, its switch or block name at each level.
    block_sizes : tuple of int
        ``BlockSizes=`` (validated, not turned into levels).
    """

    form: str
    levels: tuple[str, ...]
    nodes: Mapping[str, Mapping[str, str]]
    block_sizes: tuple[int, ...] = ()


_TOPOLOGY_KEYS = {
    "switchname": "SwitchName",
    "switches": "Switches",
    "nodes": "Nodes",
    "linkspeed": "LinkSpeed",
    "level": "Level",
    "blockname": "BlockName",
    "blocksizes": "BlockSizes",
}
_LINE_KINDS = {
    "switchname": frozenset(("switchname", "switches", "nodes", "linkspeed", "level")),
    "blockname": frozenset(("blockname", "nodes")),
    "blocksizes": frozenset(("blocksizes",)),
}


def parse_topology_conf(text: str, source: str = "<text>") -> SlurmTopology:
    """Parse Slurm's ``topology.conf`` (topology/tree or topology/block), or the output of
    ``scontrol show topology`` for a tree.

    Tree form: ``SwitchName=<name>`` with either ``Nodes=<hostlist>`` (a leaf switch) or
    ``Switches=<hostlist>`` (its child switches), optional ``LinkSpeed=<n>`` (checked,
    unused). Levels run from the top switches down: ``switch1``, ``switch2``, ...; a
    node's innermost level is always its leaf switch: in a tree whose branches differ in
    depth, a node of a shorter branch repeats its leaf switch on the deeper levels, so
    every node has every level. A switch (or node) listed under several parents keeps
    the first parent in file order (Slurm's own examples list every leaf under every
    spine of a fat tree; the spines are alike, so any one stands for them); the other
    parents stay in the file but no node's path goes through them.

    ``scontrol show topology`` prints each switch as ``SwitchName=<name> Level=<n>
    LinkSpeed=<n>`` then ``Nodes=`` and, above the leaves, ``Switches=``: a line with
    ``Level=`` is read that way. ``Level=0`` is a leaf switch (``Nodes=``, empty for a
    switch without nodes); a higher switch must list ``Switches=`` (the tree comes from
    them, as in topology.conf), and its ``Nodes=``, when shown, must be exactly the nodes
    under those switches. ``Level=`` and ``LinkSpeed=`` are checked, not used. A line
    echoing the command (``root@login:~# scontrol show topology``) is skipped.

    Block form: ``BlockName=<name> Nodes=<hostlist>`` lines and one ``BlockSizes=<n>,...``
    line; one level, ``block``. A node may be in one block only.

    Keys are case-insensitive, ``#`` starts a comment, ``\\`` at the end of a line
    continues it.

    Parameters
    ----------
    text : str
        The file content.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    SlurmTopology

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a word that is not ``Key=Value``, an
        unknown key, a line that is none of the three kinds, tree and block lines in one
        file, a repeated switch or block name, a name that is a list, a switch with both
        or neither of ``Nodes=``/``Switches=``, a child switch that is not defined, a
        switch that is its own ancestor, a node in two blocks, a bad hostlist, a
        non-numeric ``LinkSpeed=``, ``Level=`` or ``BlockSizes=``, a topology.yaml
        document, a line of another Slurm file (gres.conf's ``Name=``/``AutoDetect=``, the
        records of ``scontrol show node`` or ``show job``), naming the option that reads
        it; in ``scontrol show topology`` output, a leaf (``Level=0``) without
        ``Nodes=`` or with ``Switches=``, a higher switch without ``Switches=`` (a line cut
        short), or one whose ``Nodes=`` differ from the nodes under its switches.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    text = "\n".join(
        "" if SCONTROL_ECHO.fullmatch(raw.strip()) else raw for raw in text.split("\n")
    )
    switches: dict[str, tuple[int, dict[str, str]]] = {}
    shown_nodes: dict[str, tuple[int, str]] = {}  # switch above the leaves -> its Nodes=
    blocks: dict[str, int] = {}
    block_of: dict[str, tuple[str, int]] = {}
    block_sizes: tuple[int, ...] | None = None
    sizes_line = 0
    form = "none"
    form_line = 0
    for line_no, record in logical_lines(text):
        where = f"{source}:{line_no}"
        first = record.split()[0]
        if first in ("-", "---") or first.endswith(":"):
            fail(where, "expected topology.conf Key=Value lines, got YAML "
                         "(topology.yaml is not read; give topology.conf)")
        refuse_other_file(ANY_KEY.findall(record), where, "--topology",
                           "topology.conf (SwitchName= or BlockName= lines)")
        fields = record_fields(record, where)
        kinds = [kind for kind in _LINE_KINDS if kind in fields]
        if len(kinds) != 1:
            got = "none of them" if not kinds else " and ".join(
                f"{_TOPOLOGY_KEYS[k]}=" for k in kinds)
            fail(where, "expected one of SwitchName=, BlockName= or BlockSizes= per line, "
                         f"got {got}")
        kind = kinds[0]
        for key in fields:
            if key not in _LINE_KINDS[kind]:
                shown = _TOPOLOGY_KEYS.get(key, key)
                allowed = ", ".join(f"{_TOPOLOGY_KEYS[k]}=" for k in sorted(_LINE_KINDS[kind]))
                fail(where, f"expected only {allowed} "
                             f"on a {_TOPOLOGY_KEYS[kind]}= line, got {shown}=")
        line_form = "tree" if kind == "switchname" else "block"
        if form == "none":
            form, form_line = line_form, line_no
        elif form != line_form:
            fail(where, f"expected only {form} lines (topology/{form}, from line {form_line}), "
                         f"got a {_TOPOLOGY_KEYS[kind]}= line")
        if kind == "blocksizes":
            if block_sizes is not None:
                fail(where, f"expected BlockSizes= once, got it again (line {sizes_line})")
            block_sizes = tuple(
                _positive(part, where, "BlockSizes=") for part in fields["blocksizes"].split(",")
            )
            sizes_line = line_no
            continue
        name = _single_name(fields[kind], where, _TOPOLOGY_KEYS[kind])
        if kind == "blockname":
            if name in blocks:
                fail(where, f"expected each block once, got BlockName={name} again "
                             f"(line {blocks[name]})")
            blocks[name] = line_no
            if "nodes" not in fields:
                fail(where, "expected Nodes= on a BlockName= line")
            for node in expand_hostlist(fields["nodes"], where):
                other = block_of.get(node)
                if other is not None and other[0] != name:
                    fail(where, f"expected each node in one block, got {node} in {name} and in "
                                 f"{other[0]} (line {other[1]})")
                block_of[node] = (name, line_no)
            continue
        if name in switches:
            fail(where, f"expected each switch once, got SwitchName={name} again "
                         f"(line {switches[name][0]})")
        if "level" in fields:
            _shown_switch(fields, where)
            if "switches" in fields and "nodes" in fields:
                shown_nodes[name] = (line_no, fields.pop("nodes"))
        elif ("nodes" in fields) == ("switches" in fields):
            both = "both" if "nodes" in fields else "neither"
            fail(where, "expected either Nodes= (a leaf switch) or Switches= on a SwitchName= "
                         f"line, got {both}")
        if "linkspeed" in fields:
            whole(fields["linkspeed"], where, "LinkSpeed=")
        switches[name] = (line_no, fields)

    if form == "block":
        return SlurmTopology(
            "block", ("block",), {node: {"block": b} for node, (b, _) in block_of.items()},
            block_sizes or (),
        )
    if form == "none":
        return SlurmTopology("none", (), {})
    topology = _tree(switches, source)
    for name, (line_no, listed) in shown_nodes.items():
        _check_nodes_below(name, listed, line_no, switches, source)
    return topology


def _shown_switch(fields: dict[str, str], where: str) -> None:
    """Check a ``SwitchName=`` line of ``scontrol show topology`` (one with ``Level=``)."""
    level = whole(fields["level"], where, "Level=")
    if level == 0:
        if "switches" in fields:
            fail(where, "expected Nodes= and no Switches= on a switch of Level=0 "
                         "(a leaf switch), got Switches=")
        if "nodes" not in fields:
            fail(where, "expected Nodes= on a switch of Level=0 (a leaf switch)")
    elif "switches" not in fields:
        fail(where, f"expected Switches= on a switch of Level={level} (cut short?)")


def _check_nodes_below(
    name: str,
    listed: str,
    line: int,
    switches: dict[str, tuple[int, dict[str, str]]],
    source: str,
) -> None:
    """Fail at ``line`` unless ``listed`` (a hostlist) names the nodes under switch ``name``
    (the child switches are known to be defined)."""
    below: set[str] = set()
    seen = {name}
    stack = [name]
    while stack:
        line_no, fields = switches[stack.pop()]
        at = f"{source}:{line_no}"
        if "switches" in fields:
            for child in expand_hostlist(fields["switches"], at):
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        elif fields["nodes"]:
            below.update(expand_hostlist(fields["nodes"], at))
    where = f"{source}:{line}"
    shown = set(expand_hostlist(listed, where)) if listed else set()
    if shown != below:
        wrong = [f"{some_of(sorted(shown - below))} too"] if shown - below else []
        wrong += [f"{some_of(sorted(below - shown))} missing"] if below - shown else []
        fail(where, f"expected Nodes= of SwitchName={name} to be the {len(below)} nodes under "
                     f"Switches=, got {' and '.join(wrong)}")


def _tree(switches: dict[str, tuple[int, dict[str, str]]], source: str) -> SlurmTopology:
    parent: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    for name, (line_no, fields) in switches.items():
        where = f"{source}:{line_no}"
        if "switches" in fields:
            for child in expand_hostlist(fields["switches"], where):
                if child not in switches:
                    fail(where, f"expected defined switches in Switches=, got {child!r} "
                                 "(no SwitchName= line)")
                if child == name:
                    fail(where, f"expected child switches, got {name} itself")
                parent.setdefault(child, name)
        elif fields["nodes"] or "level" not in fields:  # scontrol shows an empty leaf as Nodes=
            for node in expand_hostlist(fields["nodes"], where):
                leaf_of.setdefault(node, name)
    paths: dict[str, tuple[str, ...]] = {}  # switch -> switches from its top down to it
    for name in switches:
        chain = [name]
        while chain[-1] not in paths and chain[-1] in parent:
            up = parent[chain[-1]]
            if up in chain:
                cycle = " -> ".join(chain[chain.index(up):] + [up])
                fail(f"{source}:{switches[up][0]}",
                      f"expected a tree, got switch {up} among its own ancestors "
                      f"(child -> parent: {cycle})")
            chain.append(up)
        path = paths.get(chain[-1], (chain[-1],))
        paths[chain[-1]] = path
        for below in reversed(chain[:-1]):
            path = path + (below,)
            paths[below] = path
    depth = max((len(paths[leaf]) for leaf in set(leaf_of.values())), default=0)
    levels = tuple(f"switch{i}" for i in range(1, depth + 1))
    nodes: dict[str, dict[str, str]] = {}
    for node, leaf in leaf_of.items():
        path = paths[leaf]
        path = path + (leaf,) * (depth - len(path))
        nodes[node] = dict(zip(levels, path))
    return SlurmTopology("tree", levels, nodes)


def _single_name(value: str, where: str, key: str) -> str:
    if not NODE_NAME.fullmatch(value):
        fail(where, f"expected one name (letters, digits, _ . -) in {key}=, got {value!r}")
    return value


def _positive(value: str, where: str, what: str) -> int:
    number = whole(value.strip(), where, f"the sizes of {what}")
    if number < 1:
        fail(where, f"expected the sizes of {what} to be at least 1, got {number}")
    return number
