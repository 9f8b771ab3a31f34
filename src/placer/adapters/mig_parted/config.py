"""An ``nvidia-mig-parted`` configuration file, decoded as ``nvidia-mig-parted`` reads it.

The format (``version: v1``; ``mig-configs``: per configuration name, a list of entries,
each with ``device-filter`` (a PCI id ``0x20B010DE`` or a list of them, optionally with a
``:0x...`` subsystem id; absent: every GPU), ``devices`` (``all`` or GPU indices),
``mig-enabled`` and ``mig-devices`` (instances per profile name)) and its rules follow
``nvidia-mig-parted``'s own decoder (``api/spec/v1/spec.go``): both ``devices`` and
``mig-enabled`` are required, ``mig-devices`` is required when MIG is enabled and refused
(unless empty) when it is not, counts are not negative and not all 0, a configuration has
at least one entry and unknown keys are refused. placer also refuses a count no GPU could
hold (more than :data:`placer.limits.MAX_MIG_SLICES` instances of a profile).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from msgspec import Meta, Struct, field

from placer.exceptions import InvalidInputError
from placer.limits import MAX_GPUS, MAX_MIG_SLICES
from placer.schema.errors import bad, listing
from placer.schema.files import PathLike, decode_source
from placer.text.files import source_name

__all__ = ["MigPartedEntry", "MigPartedConfig", "read_mig_parted", "parse_device_id"]

_DEVICES = "'all' or a list of GPU indices"
_FILTER = "a PCI device id (0x20B010DE) or a list of them"
_Count = Annotated[int, Meta(ge=0, le=MAX_MIG_SLICES)]
_Text = Annotated[str, Meta(min_length=1, max_length=253)]


class _EntryDoc(Struct, forbid_unknown_fields=True, rename="kebab"):
    # devices and device-filter take a string or a list: checked by _devices, _device_filter
    devices: Any
    mig_enabled: bool
    device_filter: Any = None
    mig_devices: Optional[dict[_Text, _Count]] = None


class _ConfigDoc(Struct, forbid_unknown_fields=True, rename="kebab"):
    version: Literal["v1"]
    mig_configs: dict[_Text, list[_EntryDoc]] = field(default_factory=dict)


@dataclass(frozen=True)
class MigPartedEntry:
    """One entry of a configuration: the GPUs it is for and what each one gets.

    Attributes
    ----------
    where : str
        Its path in the file (``mig-configs.all-balanced[2]``).
    device_filter : tuple of str or None
        The PCI ids it is for, as written; None: every GPU.
    devices : "all" or tuple of int
        The GPU indices it is for.
    mig_enabled : bool
    counts : tuple of (str, int)
        Instances per profile name, as written, counts of 0 left out.
    """

    where: str
    device_filter: tuple[str, ...] | None
    devices: Union[Literal["all"], tuple[int, ...]]
    mig_enabled: bool
    counts: tuple[tuple[str, int], ...]

    def matches_gpu(self, index: int) -> bool:
        """Whether ``devices`` names GPU ``index`` (``nvidia-mig-parted``'s ``MatchesDevices``)."""
        return self.devices == "all" or index in self.devices


@dataclass(frozen=True)
class MigPartedConfig:
    """A configuration file: per configuration name, its entries in file order."""

    source: str
    configs: dict[str, tuple[MigPartedEntry, ...]]

    def selected(self, name: str | None, where: str = "--config") -> tuple[str, tuple[MigPartedEntry, ...]]:
        """The configuration called ``name`` (None: the only one, as ``nvidia-mig-parted`` picks).

        Raises
        ------
        InvalidInputError
            At ``where`` when the file has no such configuration, or several and none is named.
        """
        if name is None:
            if len(self.configs) != 1:
                raise InvalidInputError(where, f"{self.source} has {len(self.configs)} configurations: name one of "
                                        + listing(self.configs))
            name = next(iter(self.configs))
        found = self.configs.get(name)
        if found is None:
            raise InvalidInputError(where, f"{self.source} has no configuration {name!r}; it has "
                                    + listing(self.configs))
        return name, found


def parse_device_id(text: str) -> tuple[int, int | None] | None:
    """A device filter's (device+vendor, subsystem or None) as numbers, or None when it is
    not one (``strconv.ParseUint(s, 0, 32)`` per part, as ``nvidia-mig-parted`` reads it)."""
    parts = text.strip().split(":")
    if len(parts) > 2:
        return None
    numbers = []
    for part in parts:
        try:
            value = int(part, 0)
        except ValueError:
            return None
        if not 0 <= value < 2**32:
            return None
        numbers.append(value)
    return numbers[0], (numbers[1] if len(numbers) == 2 else None)


def read_mig_parted(path: PathLike) -> MigPartedConfig:
    """Read an ``nvidia-mig-parted`` configuration file (YAML or JSON).

    Raises
    ------
    InvalidInputError
        Naming the file and the path as written (``config.yaml: mig-configs.all-balanced[2].mig-devices``).
    """
    name = source_name(path)
    doc, _ = decode_source(path, _ConfigDoc, {})
    if not doc.mig_configs:
        raise InvalidInputError(f"{name}: mig-configs", "expected at least one configuration")
    configs: dict[str, tuple[MigPartedEntry, ...]] = {}
    for config, entries in doc.mig_configs.items():
        where = f"mig-configs.{config}"
        if not entries:
            raise InvalidInputError(f"{name}: {where}", "expected at least one entry")
        configs[config] = tuple(_entry(name, f"{where}[{i}]", e) for i, e in enumerate(entries))
    return MigPartedConfig(name, configs)


def _entry(name: str, where: str, doc: _EntryDoc) -> MigPartedEntry:
    devices = doc.mig_devices
    if doc.mig_enabled and devices is None:
        raise InvalidInputError(f"{name}: {where}.mig-devices", "required when mig-enabled is true")
    if not doc.mig_enabled and devices:
        raise InvalidInputError(f"{name}: {where}.mig-devices", "MIG devices given while mig-enabled is false")
    if devices and not any(devices.values()):
        raise InvalidInputError(f"{name}: {where}.mig-devices", "every count is 0")
    return MigPartedEntry(
        where=where,
        device_filter=_device_filter(f"{name}: {where}.device-filter", doc.device_filter),
        devices=_devices(f"{name}: {where}.devices", doc.devices),
        mig_enabled=doc.mig_enabled,
        counts=tuple((p, n) for p, n in (devices or {}).items() if n > 0),
    )


def _devices(where: str, value: Any) -> Union[Literal["all"], tuple[int, ...]]:
    if value == "all":
        return "all"
    if not isinstance(value, list):
        raise bad(where, _DEVICES, value)
    for i, index in enumerate(value):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_GPUS:
            raise bad(f"{where}[{i}]", f"a GPU index in 0..{MAX_GPUS - 1}", index)
    return tuple(value)


def _device_filter(where: str, value: Any) -> tuple[str, ...] | None:
    if value is None or value == "":
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise bad(where, _FILTER, value)
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise bad(where if isinstance(value, str) else f"{where}[{i}]", _FILTER, item)
    return tuple(items)
