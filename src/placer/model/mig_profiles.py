"""MIG profiles per GPU model: names, slices and the starts where an instance may sit.

The facts come from the bundled ``data/mig_profiles.json`` (NVIDIA's MIG user guide and
real ``nvidia-smi mig -lgip/-lgipp`` outputs, each table with its sources). Some tables'
placements were read from a real ``-lgipp`` output; others are inferred from a sibling
model: :attr:`MigTable.placements_confirmed` says which, and ``placer report`` shows it.

An instance of a profile covers ``memory_slices`` consecutive memory slices from its start;
two instances conflict iff their slices overlap. A GPU's state is a bitmask of its busy
slices (bit ``s`` = slice ``s``), so a profile fits at a start iff ``mask & busy == 0``.
``+me`` (media extension) profiles also take the GPU's one media unit: at most one per GPU.

Profiles are matched by name and slices, never by the memory in the name alone: drivers
renamed ``3g.40gb`` to ``3g.39gb`` on the same hardware.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")

__all__ = [
    "per_model",
    "MigProfile",
    "MigTable",
    "PROFILE_NAME",
    "tables",
    "table_for",
    "model_key",
    "parse_profile_name",
]

PROFILE_NAME = re.compile(r"^(\d+)g\.(\d+)gb(\+me)?$")
"""A MIG profile name as ``nvidia-smi`` and the device plugin print it: ``3g.40gb``, ``1g.10gb+me``."""


def parse_profile_name(name: str) -> tuple[int, int, bool] | None:
    """(compute slices, GB in the name, media extension) of a profile name, or None."""
    m = PROFILE_NAME.match(name.strip().lower())
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3) is not None


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU-instance profile of one GPU model.

    ``starts`` are the memory slices where an instance may start; ``masks[i]`` is the
    bitmask of slices an instance started at ``starts[i]`` covers.
    """

    name: str
    index: int
    memory_slices: int
    compute_slices: int
    memory_mib: int | None
    media: bool
    max_count: int
    profile_id: int | None
    starts: tuple[int, ...]
    masks: tuple[int, ...]

    def mask_at(self, start: int) -> int | None:
        """The slices an instance at ``start`` covers, or None when ``start`` is not valid."""
        try:
            return self.masks[self.starts.index(start)]
        except ValueError:
            return None


@dataclass(frozen=True)
class MigTable:
    """The MIG profiles of one GPU model.

    ``placements_confirmed`` is True when the valid starts were read from a real
    ``nvidia-smi mig -lgipp`` output of this model, False when inferred from a sibling.
    """

    model: str
    slices: int
    compute_slices: int
    profiles: tuple[MigProfile, ...]
    aliases: tuple[str, ...]
    placements_confirmed: bool
    sources: Mapping[str, str] = field(default_factory=dict)
    pci_device_ids: tuple[str, ...] = ()

    @property
    def full_mask(self) -> int:
        """Every slice of the GPU."""
        return (1 << self.slices) - 1

    def names(self) -> list[str]:
        """The profile names, in table order."""
        return [p.name for p in self.profiles]

    def profile(self, name: str, memory_slices: int | None = None) -> MigProfile | None:
        """The profile called ``name`` on this model, or None.

        The exact name wins. Otherwise a profile with the same compute slices and media
        extension matches when it has ``memory_slices`` (when given, as ``-lgip`` and GFD's
        ``slices.gi`` labels tell), else when its slices are those the name's memory stands
        for as a share of the full GPU's (``1g.20gb`` of ``7g.80gb``: 2 of 8 slices;
        ``3g.39gb``: 4), within a quarter.
        """
        key = name.strip().lower()
        for p in self.profiles:
            if p.name == key:
                return p
        parsed = parse_profile_name(key)
        if parsed is None:
            return None
        compute, gb, media = parsed
        kind = [p for p in self.profiles if p.compute_slices == compute and p.media == media]
        if memory_slices is not None:
            kind = [p for p in kind if p.memory_slices == memory_slices]
            return kind[0] if len(kind) == 1 else None
        full = self.profiles_by_slices(self.slices)
        full_gb = parse_profile_name(full[0].name)[1] if full else 0  # type: ignore[index]
        if not kind or not full_gb:
            return None
        share = gb / full_gb * self.slices  # the slices the name's memory stands for
        best = min(kind, key=lambda p: abs(p.memory_slices - share))
        return best if 0.75 <= share / best.memory_slices <= 1.34 else None

    def profiles_by_slices(self, memory_slices: int) -> list[MigProfile]:
        """Profiles that cover ``memory_slices`` slices."""
        return [p for p in self.profiles if p.memory_slices == memory_slices]

    def smallest_holding(self, memory_mib: int) -> MigProfile | None:
        """The profile with the fewest slices (then compute slices) whose memory holds
        ``memory_mib``; media profiles are never chosen this way."""
        fits = [p for p in self.profiles if not p.media and p.memory_mib is not None and p.memory_mib >= memory_mib]
        if not fits:
            return None
        return min(fits, key=lambda p: (p.memory_slices, p.compute_slices, p.memory_mib))


def _table(model: str, raw: Mapping[str, Any]) -> MigTable:
    profiles = []
    for i, p in enumerate(raw["profiles"]):
        starts = tuple(int(pl["start"]) for pl in p["placements"])
        size = int(p["memorySlices"])
        profiles.append(
            MigProfile(
                name=p["name"],
                index=i,
                memory_slices=size,
                compute_slices=int(p["computeSlices"]),
                memory_mib=p.get("memoryMiB"),
                media=bool(p.get("mediaExtensions")),
                max_count=int(p["maxCount"]),
                profile_id=p["id"] if p.get("id") is not None else p.get("idAssumed"),
                starts=starts,
                masks=tuple(((1 << size) - 1) << s for s in starts),
            )
        )
    confirmed = raw.get("confirmed", {}).get("placements")
    aliases = tuple(a.split(" (")[0].strip() for a in raw.get("aliases", ()))
    sources = {k: str(v) for k, v in raw.get("sources", {}).items()}
    return MigTable(
        model=model,
        slices=int(raw["slices"]),
        compute_slices=int(raw["computeSlicesTotal"]),
        profiles=tuple(profiles),
        aliases=aliases,
        placements_confirmed=confirmed is True,
        sources=sources,
        pci_device_ids=tuple(str(i) for i in raw.get("pciDeviceIds", ())),
    )


@lru_cache(maxsize=1)
def tables() -> Mapping[str, MigTable]:
    """Every bundled MIG table, by GPU model name."""
    text = (resources.files("placer") / "data" / "mig_profiles.json").read_text(encoding="utf-8")
    raw = json.loads(text)
    return {model: _table(model, t) for model, t in raw.items() if not model.startswith("_")}


def model_key(model: str) -> str | None:
    """The bundled table's model name for a GPU model as nodes report it, or None.

    Takes the names of the tables and their aliases, ``nvidia-smi`` product names
    (``NVIDIA A100-SXM4-80GB``), GFD ``nvidia.com/gpu.product`` values
    (``NVIDIA-H100-80GB-HBM3``, with ``-SHARED`` or ``-MIG-…`` suffixes) and Slurm types.
    """
    known = tables()
    if model in known:
        return model
    text = re.sub(r"[\s_]+", "-", model.strip().upper())
    text = re.sub(r"-(SHARED|MIG-.*)$", "", text)
    text = re.sub(r"^NVIDIA-", "", text)
    for name, table in known.items():
        if text == name.upper() or text in (a.upper().replace(" ", "-") for a in table.aliases):
            return name
    tokens = set(re.split(r"[-.]", text))

    def has(*words: str) -> bool:
        return any(w in tokens or any(t.startswith(w) for t in tokens) for w in words)

    if has("GH200"):
        return "GH200-144GB" if has("144GB", "144G", "HBM3E") else "GH200-96GB"
    if has("H200", "H20"):
        return "H200-141GB"
    if has("H100", "H800"):
        return "H100-NVL-94GB" if has("NVL", "94GB") else ("GH200-96GB" if has("96GB") else "H100-80GB")
    if has("A100", "A800"):
        return "A100-80GB" if has("80GB") else ("A100-SXM4-40GB" if has("40GB") else None)
    if has("B200", "GB200"):
        return "B200-180GB"
    if has("A30"):
        return "A30-24GB"
    return None


def per_model(build: Callable[[MigTable], T]) -> Callable[[MigTable], T]:
    """``build`` cached per GPU model: what is worked out once from a table (lookups,
    layouts) is shared by every node of the model."""
    cache: dict[str, T] = {}

    def cached(table: MigTable) -> T:
        found = cache.get(table.model)
        if found is None:
            found = cache[table.model] = build(table)
        return found

    cached.__doc__ = build.__doc__
    return cached


def table_for(model: str | None) -> MigTable | None:
    """The MIG table of a GPU model as nodes report it (see :func:`model_key`), or None."""
    if not model:
        return None
    key = model_key(model)
    return None if key is None else tables()[key]
