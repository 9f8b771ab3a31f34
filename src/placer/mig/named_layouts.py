"""NVIDIA's own named MIG layouts (mig-parted's default configuration) per GPU model.

``data/mig_layouts.json`` holds, as facts with their source, every named configuration of
``nvidia-mig-parted``'s default file that enables MIG: per name, its entries, each with a
PCI device filter (or none: every GPU) and the instances of each profile one GPU gets, in
the order the file writes them. :func:`layouts_for` gives the layouts that apply to a GPU
model: an entry whose filter names one of the model's PCI device ids, or an unfiltered
entry whose profiles the model's table lists by name. These are the layouts a cluster's
operators actually apply, so every one of them must place in any order its pods arrive.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from placer.model.mig_profiles import MigTable

__all__ = ["NamedLayout", "named_layouts", "pci_ids", "layouts_for"]


@dataclass(frozen=True, slots=True)
class NamedLayout:
    """One entry of a named mig-parted configuration: what one GPU is split into.

    ``counts`` lists (profile name, instances) in the order the configuration writes them;
    ``device_filter`` is the PCI device ids the entry is for (None: every GPU).
    """

    config: str
    device_filter: tuple[str, ...] | None
    counts: tuple[tuple[str, int], ...]

    def profiles(self) -> list[str]:
        """One profile name per instance, in the written order (``1g.5gb`` twice for 2)."""
        return [name for name, count in self.counts for _ in range(count)]


@lru_cache(maxsize=1)
def named_layouts() -> tuple[NamedLayout, ...]:
    """Every entry of the bundled mig-parted configurations, in file order."""
    text = (resources.files("placer") / "data" / "mig_layouts.json").read_text(encoding="utf-8")
    out: list[NamedLayout] = []
    for config, entries in json.loads(text)["configs"].items():
        for entry in entries:
            found = entry.get("deviceFilter")
            out.append(
                NamedLayout(
                    config=config,
                    device_filter=None if found is None else tuple(found),
                    counts=tuple((name, int(n)) for name, n in entry["migDevices"].items()),
                )
            )
    return tuple(out)


def pci_ids(table: MigTable) -> frozenset[str]:
    """The PCI device ids (``0x20B010DE``) the bundled table says its model has."""
    return frozenset(i.split()[0].upper().replace("0X", "0x") for i in table.pci_device_ids if i.startswith("0x"))


def layouts_for(table: MigTable) -> list[NamedLayout]:
    """The named layouts that apply to ``table``'s GPU model (see the module docstring)."""
    ids = pci_ids(table)
    names = set(table.names())
    out = []
    for layout in named_layouts():
        if layout.device_filter is not None:
            if ids & set(layout.device_filter):
                out.append(layout)
        elif all(name in names for name, _ in layout.counts):
            out.append(layout)
    return out
