"""Every entry of an ``nvidia-mig-parted`` configuration file checked against placer's
bundled MIG tables: for each GPU model it applies to, whether one GPU can hold its instances.

An entry applies to a model when its device filter names one of the model's PCI ids
(:attr:`placer.model.mig_profiles.MigTable.pci_device_ids`; device and vendor compared, a
subsystem id is not known to placer), or, without a filter (``nvidia-mig-parted`` then
applies it to every GPU), when the model's table lists at least one of its profile names.
It is **valid** there when some layout of the model (:func:`placer.mig.plans.layout_table`:
each instance at one of its profile's starts, none overlapping, at most ``maxCount`` of a
profile, one media instance, compute slices within the GPU's) holds exactly its instances;
**invalid** with the first reason found: a profile the table lacks, a count over a profile's
``maxCount``, more than one media (``+me``) instance, more compute or memory slices than
the GPU has, or no valid starts for them together. An entry placer cannot check (a filter
naming no bundled model, profiles no table lists) is **unchecked**. MIG disabled, or
enabled with no instances, is valid on every GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from placer.adapters.mig_parted.config import MigPartedConfig, MigPartedEntry, parse_device_id
from placer.mig.plans import layout_table
from placer.model.mig_profiles import MigTable, tables
from placer.schema.errors import listing
from placer.text.lines import aligned

__all__ = ["VALID", "INVALID", "UNCHECKED", "EntryCheck", "check_mig_parted", "entry_models",
           "why_not_valid", "render_checks", "table_ids"]

VALID, INVALID, UNCHECKED = "valid", "invalid", "unchecked"


@dataclass(frozen=True)
class EntryCheck:
    """One entry of one configuration on one GPU model (None: on none, or on every GPU)."""

    config: str
    entry: MigPartedEntry
    model: str | None
    status: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        return {
            "config": self.config,
            "entry": e.where,
            "deviceFilter": None if e.device_filter is None else list(e.device_filter),
            "devices": e.devices if e.devices == "all" else list(e.devices),
            "migDevices": dict(e.counts),
            "gpuModel": self.model,
            "status": self.status,
            "reason": self.reason,
        }


def table_ids(table: MigTable) -> frozenset[int]:
    """The PCI device+vendor ids of a bundled table, as numbers."""
    found = (parse_device_id(text.split()[0]) for text in table.pci_device_ids if text.startswith("0x"))
    return frozenset(parsed[0] for parsed in found if parsed is not None)


def entry_models(entry: MigPartedEntry, known: Mapping[str, MigTable]) -> tuple[list[MigTable], list[str], list[str]]:
    """The bundled models ``entry`` applies to (see the module notes), the filter ids that
    name none of them, and the filter ids that are not PCI ids."""
    if entry.device_filter is None:
        names = {n for n, _ in entry.counts}
        return [t for t in known.values() if names & set(t.names())], [], []
    unknown, malformed, hit = [], [], set()
    for text in entry.device_filter:
        parsed = parse_device_id(text)
        if parsed is None:
            malformed.append(text)
            continue
        models = [m for m, t in known.items() if parsed[0] in table_ids(t)]
        if not models:
            unknown.append(text)
        hit.update(models)
    return [t for m, t in known.items() if m in hit], unknown, malformed


def why_not_valid(table: MigTable, counts: Sequence[tuple[str, int]]) -> str | None:
    """Why one GPU of ``table`` cannot hold ``counts`` (profile name, instances); None when it can."""
    by_name = {p.name: p for p in table.profiles}
    missing = [n for n, _ in counts if n not in by_name]
    if missing:
        return f"no profile {listing(missing)} in {table.model}'s table (it has {listing(by_name)})"
    for name, n in counts:
        if n > by_name[name].max_count:
            return f"{n} x {name}: at most {by_name[name].max_count} per GPU"
    media = sum(n for name, n in counts if by_name[name].media)
    if media > 1:
        return f"{media} media (+me) instances: a GPU has one media unit"
    compute = sum(n * by_name[name].compute_slices for name, n in counts)
    if compute > table.compute_slices:
        return f"{compute} compute slices: the GPU has {table.compute_slices}"
    memory = sum(n * by_name[name].memory_slices for name, n in counts)
    if memory > table.slices:
        return f"{memory} memory slices: the GPU has {table.slices}"
    layouts = layout_table(table)
    wanted = np.zeros(len(table.profiles), dtype=np.int64)
    for name, n in counts:
        wanted[by_name[name].index] = n
    if not (layouts.counts == wanted).all(axis=1).any():
        return f"no valid starts hold them together ({memory} of {table.slices} slices)"
    return None


def check_mig_parted(config: MigPartedConfig, known: Mapping[str, MigTable] | None = None) -> list[EntryCheck]:
    """Every entry of every configuration of ``config`` on the models it applies to.

    Parameters
    ----------
    config : MigPartedConfig
    known : mapping of str to MigTable, optional
        The tables to check against (default: every bundled table).

    Returns
    -------
    list of EntryCheck
        By configuration and entry in file order, then model in table order.
    """
    known = tables() if known is None else known
    return [c for name, entries in config.configs.items() for e in entries for c in _entry_checks(name, e, known)]


def _entry_checks(config: str, entry: MigPartedEntry, known: Mapping[str, MigTable]) -> Iterator[EntryCheck]:
    if not entry.mig_enabled or not entry.counts:
        yield EntryCheck(config, entry, None, VALID, "MIG disabled" if not entry.mig_enabled else "no instances")
        return
    models, unknown, malformed = entry_models(entry, known)
    if malformed:
        yield EntryCheck(config, entry, None, INVALID, f"device filter {listing(malformed)}: not a PCI id (0x20B010DE)")
    for table in models:
        reason = why_not_valid(table, entry.counts)
        yield EntryCheck(config, entry, table.model, VALID if reason is None else INVALID, reason or "")
    if unknown:
        yield EntryCheck(config, entry, None, UNCHECKED, f"device filter {listing(unknown)} names no bundled model")
    elif not models and not malformed:
        yield EntryCheck(config, entry, None, UNCHECKED,
                         f"no bundled table lists {listing(n for n, _ in entry.counts)}")


def render_checks(checks: Sequence[EntryCheck]) -> str:
    """The checks as a table a person reads, then one line of totals."""
    rows = [["CONFIG", "ENTRY", "GPU MODEL", "INSTANCES", "STATUS", "WHY"]]
    for c in checks:
        instances = ", ".join(f"{n}x{name}" for name, n in c.entry.counts) or "-"
        rows.append([c.config, c.entry.where.rsplit("[", 1)[-1].rstrip("]"), c.model or "-", instances,
                     c.status, c.reason])
    totals = {s: sum(c.status == s for c in checks) for s in (VALID, INVALID, UNCHECKED)}
    return "\n".join(aligned(rows) + [", ".join(f"{n} {s}" for s, n in totals.items())]) + "\n"
