"""A snapshot re-laid-out to a named ``nvidia-mig-parted`` configuration: the cluster as it
would be after ``nvidia-mig-parted apply -c NAME`` on its nodes.

For each static MIG GPU of a chosen node, the configuration's entry for it is the last one
whose device filter names the node's GPU model (:func:`.check.entry_models`) and whose
``devices`` name the GPU (``nvidia-mig-parted`` applies the entries in order, so a later one
wins). A GPU whose instances already have the entry's counts is left as it is
(``nvidia-mig-parted`` applies counts, not starts); an idle GPU (no pod holds one of its
instances) gets the entry's instances at valid starts (:func:`placer.mig.layout.layout_instances`:
largest profile first, lowest start); a GPU in use is left and reported. By default the run is
all or nothing: one GPU in use to change and the snapshot is not changed at all;
``per_node`` leaves only the nodes with such a GPU. What is not carried over (dynamic MIG
nodes, GPUs no entry names, an entry that turns MIG off or on) is a note.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace as replace_gpu
from typing import Any, Mapping, Sequence

from placer.adapters.mig_parted.check import entry_models, why_not_valid
from placer.adapters.mig_parted.config import MigPartedConfig, MigPartedEntry
from placer.exceptions import InvalidInputError
from placer.mig.layout import layout_instances
from placer.mig.plans import MigLayout
from placer.model import ClusterSnapshot, MigInstance, Node, replace
from placer.model.mig_profiles import MigTable, table_for, tables

__all__ = ["RESPLIT", "UNCHANGED", "IN_USE", "HELD_BACK", "AppliedGpu", "MigPartedApplied", "apply_mig_parted"]

RESPLIT, UNCHANGED, IN_USE, HELD_BACK = "re-split", "unchanged", "in use", "held back by a GPU in use"


@dataclass(frozen=True)
class AppliedGpu:
    """What the configuration does to one MIG GPU: ``status`` is :data:`RESPLIT`,
    :data:`UNCHANGED` (it has the counts already), :data:`IN_USE` (left: a pod holds one
    of its instances) or :data:`HELD_BACK` (an idle GPU left because a GPU in use kept the
    run, or its node, from changing); ``after`` is what it would get."""

    node: str
    gpu: int
    model: str
    entry: str
    before: MigLayout
    after: MigLayout
    status: str

    def to_text(self) -> str:
        return f"{self.node} GPU {self.gpu} ({self.entry}): {self.before.to_text()} -> {self.after.to_text()}: {self.status}"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "gpu": self.gpu, "gpuModel": self.model, "entry": self.entry,
                "before": self.before.to_list(), "after": self.after.to_list(), "status": self.status}


@dataclass(frozen=True)
class MigPartedApplied:
    """The snapshot after the configuration, the GPUs it names and the notes.

    ``complete`` is False when a GPU in use kept the run (all or nothing) or its node
    (``per_node``) from changing; ``snapshot`` then holds only the changes made.
    """

    snapshot: ClusterSnapshot
    gpus: tuple[AppliedGpu, ...]
    notes: tuple[str, ...]
    complete: bool

    def in_use(self) -> tuple[AppliedGpu, ...]:
        """The GPUs left because a pod holds one of their instances."""
        return tuple(g for g in self.gpus if g.status == IN_USE)


def apply_mig_parted(
    snapshot: ClusterSnapshot,
    config: MigPartedConfig,
    name: str | None = None,
    nodes: Sequence[str] | None = None,
    per_node: bool = False,
) -> MigPartedApplied:
    """``snapshot`` as it would be after configuration ``name`` of ``config`` (module notes).

    Parameters
    ----------
    snapshot : ClusterSnapshot
    config : MigPartedConfig
    name : str, optional
        The configuration (None: the file's only one).
    nodes : sequence of str, optional
        The nodes it is applied on (default: every node).
    per_node : bool
        Leave only the nodes with a GPU in use to change, instead of the whole run.

    Raises
    ------
    InvalidInputError
        At ``--config`` for a configuration the file lacks, ``--nodes`` for a node the
        snapshot lacks, or the entry (``config.yaml: mig-configs.NAME[i]``) when one GPU it
        is applied to cannot hold its instances.
    """
    name, entries = config.selected(name)
    known = tables()
    wanted = _chosen_nodes(snapshot, nodes)
    out_nodes: list[Node] = []
    gpus: list[AppliedGpu] = []
    notes: list[str] = []
    kept_back = False
    for node in snapshot.nodes:
        if node.name not in wanted:
            out_nodes.append(node)
            continue
        done = _apply_node(node, config.source, name, entries, known, notes)
        busy = any(g.status == IN_USE for g in done)
        kept_back = kept_back or busy
        gpus.extend(_held_back(done) if busy else done)
        out_nodes.append(node if busy else _resplit(node, done))
    if kept_back and not per_node:
        return MigPartedApplied(snapshot, _held_back(gpus), tuple(notes), False)
    return MigPartedApplied(replace(snapshot, nodes=tuple(out_nodes)), tuple(gpus), tuple(notes), not kept_back)


def _held_back(gpus: Sequence[AppliedGpu]) -> tuple[AppliedGpu, ...]:
    return tuple(replace_gpu(g, status=HELD_BACK) if g.status == RESPLIT else g for g in gpus)


def _chosen_nodes(snapshot: ClusterSnapshot, nodes: Sequence[str] | None) -> set[str]:
    names = [n.name for n in snapshot.nodes]
    if nodes is None:
        return set(names)
    missing = [n for n in nodes if n not in names]
    if missing:
        raise InvalidInputError("--nodes", f"no node {', '.join(missing)} in the snapshot")
    return set(nodes)


def _apply_node(node: Node, source: str, name: str, entries: Sequence[MigPartedEntry],
                known: Mapping[str, MigTable], notes: list[str]) -> list[AppliedGpu]:
    hw = node.hardware
    assert hw is not None
    table = table_for(hw.gpu_model)
    if table is None:
        notes.append(f"{node.name}: GPU model {hw.gpu_model!r} has no bundled MIG table: left")
        return []
    if hw.mig is not None and hw.mig.mode == "dynamic":
        notes.append(f"{node.name}: dynamic MIG (placer creates its instances): left")
        return []
    mig_gpus = set(hw.mig_gpus)
    held = {m.gpu for p in node.pods for m in p.mig}
    done = []
    for gpu in range(hw.gpus):
        entry = next((e for e in reversed(entries) if e.matches_gpu(gpu) and _for_model(e, table, known)), None)
        if entry is None:
            if gpu in mig_gpus:
                notes.append(f"{node.name} GPU {gpu}: no entry of {name} names it: left")
            continue
        if not entry.mig_enabled or gpu not in mig_gpus:
            if entry.mig_enabled != (gpu in mig_gpus):
                turn = "off" if gpu in mig_gpus else "on"
                notes.append(f"{node.name} GPU {gpu}: {entry.where} turns MIG {turn}, which placer does not: left")
            continue
        reason = why_not_valid(table, entry.counts)
        if reason is not None:
            raise InvalidInputError(f"{source}: {entry.where}", f"{reason} (for {node.name} GPU {gpu}, {table.model})")
        before = _gpu_layout(node, gpu)
        after = _entry_layout(table, entry, gpu)
        status = (UNCHANGED if Counter(before.counts()) == Counter(after.counts())
                  else IN_USE if gpu in held else RESPLIT)
        done.append(AppliedGpu(node.name, gpu, table.model, entry.where, before,
                               before if status == UNCHANGED else after, status))
    return done


def _for_model(entry: MigPartedEntry, table: MigTable, known: Mapping[str, MigTable]) -> bool:
    """Whether the entry applies to a GPU of ``table`` (unfiltered: every GPU)."""
    if entry.device_filter is None:
        return True
    models, _, _ = entry_models(entry, known)
    return any(t.model == table.model for t in models)


def _gpu_layout(node: Node, gpu: int) -> MigLayout:
    found = {(m.start, m.profile) for m in node.mig_instances if m.gpu == gpu}
    found |= {(m.start, m.profile) for p in node.pods for m in p.mig if m.gpu == gpu}
    return MigLayout(tuple((profile, start) for start, profile in sorted(found)))


def _entry_layout(table: MigTable, entry: MigPartedEntry, gpu: int) -> MigLayout:
    by_name = {p.name: p for p in table.profiles}
    laid = layout_instances(table, {by_name[n]: c for n, c in entry.counts}, [gpu])
    assert laid is not None  # why_not_valid found a layout of these counts
    return MigLayout(tuple((p.name, start) for _, p, start in sorted(laid, key=lambda x: x[2])))


def _resplit(node: Node, done: Sequence[AppliedGpu]) -> Node:
    changed = {g.gpu: g for g in done if g.status == RESPLIT}
    if not changed:
        return node
    kept = [m for m in node.mig_instances if m.gpu not in changed]
    made = [MigInstance(gpu=g.gpu, profile=p, start=s) for g in changed.values() for p, s in g.after.instances]
    return replace(node, mig_instances=tuple(sorted(kept + made, key=lambda m: (m.gpu, m.start))))
