"""A MIG node from what ``nvidia-smi`` prints on it, and the ``-lgipp`` placement list.

:func:`parse_gpu_placements` reads ``nvidia-smi mig -lgipp`` (the valid placements of each
GPU instance profile, by profile id)::

    GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1
    GPU  0 Profile ID  5 Placement : {0}:4

:func:`mig_node_from_nvidia_smi` builds one snapshot node out of ``nvidia-smi mig -lgi``
(which instances exist: GPU, profile, ``Start:Size``), optionally ``nvidia-smi -L`` (the
GPU model and count, and the MIG device UUIDs), ``-lgip`` and ``-lgipp``. Every instance is
checked against the bundled table of the GPU model (profile matched by name and size,
start among the valid ones): one that is not there is an error at its line.

What the driver says about its profiles is compared with the bundled table, and each
difference is a finding (``NvidiaSmiMig.findings``); the bundled table stays the one placer
uses, since a snapshot has one table per model. When the driver refuses a start the table
allows (or lacks a profile the table has), the node's mode is ``static`` whatever was asked:
placer then never creates an instance, so it cannot create one where the driver would
refuse it. Starts the driver allows beyond the table only cost placer choices.

MIG device names: ``nvidia-smi -L`` lists each MIG device's UUID under its GPU and
profile but not its GPU instance. A device is tied to an instance when its UUID is the
``MIG-GPU-<uuid>/<gi>/<ci>`` form (the GI id of ``-lgi``), or when it is the only device of
its profile on its GPU and ``-lgi`` has one instance of that profile there. The tied
instances carry ``device`` (the UUID, what ``NVIDIA_VISIBLE_DEVICES`` takes); a finding
counts the devices left untied.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Sequence, Union

from placer.text.files import read_text
from placer.adapters.nvidia_smi.listing import ListedGpu, MigDevice
from placer.adapters.nvidia_smi.mig_tables import GpuInstance, MigProfile as LgipProfile
from placer.exceptions import InvalidInputError
from placer.model.mig_profiles import MigProfile as TableProfile, MigTable, table_for, tables
from placer.text.lines import TextLines

__all__ = [
    "ProfilePlacements",
    "NvidiaSmiMig",
    "parse_gpu_placements",
    "parse_gpu_placements_file",
    "mig_node_from_nvidia_smi",
]

PathLike = Union[str, "os.PathLike[str]"]

_LGIPP_LINE = re.compile(
    r"GPU\s+([0-9]{1,4})\s+Profile\s+ID\s+([0-9]{1,4})\s+Placements?\s*:\s*\{([0-9,\s]*)\}\s*:\s*([0-9]{1,2})"
)
_LEGACY_MIG_UUID = re.compile(r"MIG-(GPU-[0-9a-fA-F-]+)/([0-9]+)/([0-9]+)")
# A MIG device of a compute instance smaller than its GPU instance: 1c.3g.40gb.
_COMPUTE_SPLIT = re.compile(r"([0-9]{1,2})c\.(.+)")


@dataclass(frozen=True)
class ProfilePlacements:
    """One line of ``nvidia-smi mig -lgipp``: the starts where a profile may be placed.

    Attributes
    ----------
    gpu : int
        The GPU index.
    profile_id : int
        The GPU instance profile id (``-lgip``'s ``ID``).
    starts : tuple of int
        The valid start slices, as printed.
    size : int
        The memory slices an instance of the profile covers.
    where : str
        ``"<source>:<line>"``.
    """

    gpu: int
    profile_id: int
    starts: tuple[int, ...]
    size: int
    where: str = ""


def parse_gpu_placements(text: str, source: str = "<text>") -> tuple[ProfilePlacements, ...]:
    """Parse the output of ``nvidia-smi mig -lgipp``.

    Lines echoing the command (``$ sudo nvidia-smi mig -lgipp``) and blank lines are
    skipped; trailing blanks are fine.

    Parameters
    ----------
    text : str
        The output.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    tuple of ProfilePlacements
        One per line, in order.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a line that is not ``GPU <n> Profile ID <id>
        Placement[s]: {<starts>}:<size>``, an empty or repeated start list, a size of 0,
        the same profile twice on one GPU; the line after the last for no line at all.
    """
    output = TextLines(text, source)
    out: list[ProfilePlacements] = []
    seen: dict[tuple[int, int], str] = {}
    for number, line in enumerate(output.lines, 1):
        stripped = line.strip()
        if not stripped or ("nvidia-smi" in stripped and not stripped.startswith("GPU")):
            continue
        match = _LGIPP_LINE.fullmatch(stripped)
        if match is None:
            output.fail(number, f"expected `GPU <n> Profile ID <id> Placements: {{<starts>}}:<size>`, got {stripped[:80]!r}")
        gpu, pid, listed, size = int(match.group(1)), int(match.group(2)), match.group(3), int(match.group(4))
        parts = [p.strip() for p in listed.split(",")]
        if not all(p.isdigit() and len(p) <= 2 for p in parts) or size == 0:
            output.fail(number, f"expected start slices like {{0,2,4}} and a size >= 1, got {stripped[:80]!r}")
        starts = tuple(int(p) for p in parts)
        if len(set(starts)) != len(starts):
            output.fail(number, f"GPU {gpu} profile id {pid}: a start is listed twice")
        where = f"{source}:{number}"
        if (gpu, pid) in seen:
            output.fail(number, f"GPU {gpu} profile id {pid} is listed twice (first at {seen[(gpu, pid)]})")
        seen[(gpu, pid)] = where
        out.append(ProfilePlacements(gpu, pid, starts, size, where))
    if not out:
        output.fail(len(output.lines) + 1, "expected `nvidia-smi mig -lgipp` output, got no placement line")
    return tuple(out)


def parse_gpu_placements_file(path: PathLike) -> tuple[ProfilePlacements, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lgipp`` output (:func:`parse_gpu_placements`);
    error locations name the file by its base name."""
    name = os.path.basename(os.fspath(path))
    return parse_gpu_placements(read_text(path, source=name), name)


@dataclass(frozen=True)
class NvidiaSmiMig:
    """What :func:`mig_node_from_nvidia_smi` made of one node's ``nvidia-smi`` output.

    Attributes
    ----------
    node : dict
        The placer/v1 node: ``name``, ``gpus``, ``gpuModel``, ``mig``, ``migInstances``
        (with ``device`` where the MIG device UUID is known).
    findings : tuple of str
        Differences between the driver and the bundled table, and devices of ``-L``
        that could not be tied to an instance; one line each, starting with where.
    """

    node: dict[str, Any]
    findings: tuple[str, ...]


def mig_node_from_nvidia_smi(
    name: str,
    instances: Sequence[GpuInstance],
    gpu_list: Sequence[ListedGpu] | None = None,
    profiles: Sequence[LgipProfile] | None = None,
    placements: Sequence[ProfilePlacements] | None = None,
    gpu_model: str | None = None,
    mode: str = "static",
) -> NvidiaSmiMig:
    """One snapshot node with the MIG instances ``nvidia-smi mig -lgi`` lists.

    Parameters
    ----------
    name : str
        The node's name.
    instances : sequence of GpuInstance
        ``nvidia-smi mig -lgi`` (:func:`placer.adapters.nvidia_smi.listing.parse_gpu_instances`).
    gpu_list : sequence of ListedGpu, optional
        ``nvidia-smi -L``: gives the GPU count and model, and MIG device UUIDs.
    profiles : sequence of MigProfile, optional
        ``nvidia-smi mig -lgip``: profile ids and counts, compared with the table.
    placements : sequence of ProfilePlacements, optional
        ``nvidia-smi mig -lgipp``: valid starts, compared with the table.
    gpu_model : str, optional
        The GPU model when ``gpu_list`` is not given (or to override it).
    mode : {"static", "dynamic"}
        The node's MIG mode (static is forced when the driver refuses a start the
        table allows, see the module docs).

    Returns
    -------
    NvidiaSmiMig

    Raises
    ------
    InvalidInputError
        ``gpu_model`` when no model is given or known, it has no bundled MIG table, or it
        is another model than the one ``-L`` lists (when placer has a table for both);
        at an ``-lgi`` row for a GPU beyond ``-L``'s, a profile the table does not have
        (by name and size) or a start it does not allow; at an ``-L`` line for GPUs of
        different models, a model without a bundled MIG table while ``-lgi`` lists
        instances, or a MIG device no instance of ``-lgi`` can hold (its legacy UUID
        names a GPU instance ``-lgi`` lacks on its GPU, its profile has no instance
        there, or more devices than the instances of their profile hold). When ``-L``
        and ``-lgi`` cannot describe the same machine, the message names both files.
    """
    listed_model = None
    if gpu_list:
        models = {g.model for g in gpu_list}
        if len(models) > 1:
            raise InvalidInputError(gpu_list[0].where, f"GPUs of {len(models)} models on one node: {sorted(models)}")
        listed_model = gpu_list[0].model
    model = gpu_model or listed_model
    if model is None:
        raise InvalidInputError("gpu_model", "no GPU model: give the nvidia-smi -L output or the GPU model")
    table = table_for(model)
    if table is None:
        known = f"placer knows MIG on: {', '.join(sorted(tables()))}"
        if gpu_model is None and gpu_list and instances:
            raise InvalidInputError(
                gpu_list[0].where,
                f"nvidia-smi -L lists {model}, which has no bundled MIG table, but nvidia-smi mig -lgi "
                f"({instances[0].where}) lists MIG instances: not the same machine, or give the GPU model; {known}",
            )
        raise InvalidInputError("gpu_model", f"GPU model {model!r} has no bundled MIG table; {known}")
    listed_table = table_for(listed_model)
    if gpu_model is not None and gpu_list and listed_table is not None and listed_table is not table:
        raise InvalidInputError(
            "gpu_model", f"{gpu_model!r} is not the {listed_model} that nvidia-smi -L lists ({gpu_list[0].where})"
        )
    # Where the model came from, for errors about a profile the model lacks.
    model_origin = f" (the model nvidia-smi -L lists at {gpu_list[0].where})" if gpu_list and gpu_model is None else ""
    gpus = len(gpu_list) if gpu_list else 1 + max((i.gpu for i in instances), default=-1)
    findings: list[str] = []
    rows: list[dict[str, Any]] = []
    by_gi: dict[tuple[int, int], dict[str, Any]] = {}
    for row in instances:
        if row.gpu >= gpus:
            raise InvalidInputError(
                row.where,
                f"GPU {row.gpu} is not among the {gpus} GPU(s) nvidia-smi -L lists (GPU {gpus - 1} at "
                f"{gpu_list[-1].where}): the two outputs are not of the same machine"
                if gpu_list else f"GPU {row.gpu} is not among the node's {gpus} GPU(s)",
            )
        profile = table.profile(row.name, row.size)
        if profile is None or profile.memory_slices != row.size:  # the name alone matched another size
            raise InvalidInputError(
                row.where,
                f"no MIG profile {row.name} of {row.size} slice(s) on {table.model}{model_origin}; it has: "
                f"{', '.join(table.names())}",
            )
        if profile.mask_at(row.start) is None:
            raise InvalidInputError(
                row.where, f"{profile.name} cannot start at slice {row.start} on {table.model} (bundled table: "
                           f"{', '.join(map(str, profile.starts))})",
            )
        entry = {"gpu": row.gpu, "profile": profile.name, "start": row.start}
        rows.append(entry)
        by_gi[(row.gpu, row.instance_id)] = entry
    _check_devices_against_instances(gpu_list or (), instances, table)
    findings += _tie_devices(gpu_list or (), instances, by_gi, table)
    refused = _compare_profiles(table, profiles or (), findings)
    refused |= _compare_placements(table, placements or (), profiles or (), findings)
    if refused and mode == "dynamic":
        findings.append("mig.mode: static, not dynamic: the driver refuses what the bundled table allows (above)")
        mode = "static"
    mig_gpus = sorted({g.index for g in gpu_list or () if g.mig} | {r["gpu"] for r in rows})
    node: dict[str, Any] = {"name": name, "gpus": gpus, "gpuModel": model}
    node["mig"] = {"gpus": "all" if len(mig_gpus) == gpus else mig_gpus, "mode": mode}
    node["migInstances"] = sorted(rows, key=lambda r: (r["gpu"], r["start"]))
    return NvidiaSmiMig(node, tuple(findings))


def _check_devices_against_instances(
    gpu_list: Sequence[ListedGpu], instances: Sequence[GpuInstance], table: MigTable
) -> None:
    """Refuse MIG devices of ``-L`` that no GPU instance of ``-lgi`` can hold: a legacy UUID
    naming a GPU instance ``-lgi`` lacks, a profile ``-lgi`` has no instance of on that
    GPU, or more devices of a profile than its instances there hold."""
    lgi = instances[0].where.rsplit(":", 1)[0] if instances else "no instance at all"
    not_same = "the two outputs are not of the same machine"
    for gpu in gpu_list:
        on_gpu = [row for row in instances if row.gpu == gpu.index]
        devices_of: dict[TableProfile, list[MigDevice]] = {}
        compute_taken: dict[TableProfile, int] = {}
        for device in gpu.mig:
            legacy = _LEGACY_MIG_UUID.fullmatch(device.uuid)
            if legacy is not None and int(legacy.group(2)) not in {row.instance_id for row in on_gpu}:
                raise InvalidInputError(
                    device.where,
                    f"MIG device {device.uuid} of GPU {gpu.index} is in GPU instance {legacy.group(2)}, which "
                    f"nvidia-smi mig -lgi ({lgi}) does not list on GPU {gpu.index}: {not_same}",
                )
            split = _COMPUTE_SPLIT.fullmatch(device.profile)
            instance_profile = table.profile(split.group(2) if split else device.profile)
            if instance_profile is None:
                raise InvalidInputError(
                    device.where,
                    f"MIG device profile {device.profile} is not one of {table.model}: {', '.join(table.names())}",
                )
            devices_of.setdefault(instance_profile, []).append(device)
            taken = int(split.group(1)) if split else instance_profile.compute_slices
            compute_taken[instance_profile] = compute_taken.get(instance_profile, 0) + taken
        for instance_profile, devices in devices_of.items():
            held = sum(1 for row in on_gpu if table.profile(row.name, row.size) is instance_profile)
            if compute_taken[instance_profile] > held * instance_profile.compute_slices:
                lgi_holds = (
                    f"more than the {held} {instance_profile.name} GPU instance(s) nvidia-smi mig -lgi ({lgi}) "
                    "lists there hold" if held else
                    f"but nvidia-smi mig -lgi ({lgi}) lists no {instance_profile.name} GPU instance there"
                )
                raise InvalidInputError(
                    devices[0].where,
                    f"nvidia-smi -L lists {len(devices)} {instance_profile.name} MIG device(s) on GPU {gpu.index}, "
                    f"{lgi_holds}: {not_same}",
                )


def _tie_devices(
    gpu_list: Sequence[ListedGpu], instances: Sequence[GpuInstance],
    by_gi: dict[tuple[int, int], dict[str, Any]], table: MigTable,
) -> list[str]:
    findings = []
    for gpu in gpu_list:
        untied = 0
        for device in gpu.mig:
            legacy = _LEGACY_MIG_UUID.fullmatch(device.uuid)
            entry = by_gi.get((gpu.index, int(legacy.group(2)))) if legacy else None
            if entry is None and legacy is None:
                same = [r for r in instances if r.gpu == gpu.index and table.profile(r.name, r.size) is table.profile(device.profile)]
                devices = [d for d in gpu.mig if d.profile == device.profile]
                if len(same) == 1 and len(devices) == 1:
                    entry = by_gi[(gpu.index, same[0].instance_id)]
            if entry is None:
                untied += 1
            else:
                entry["device"] = device.uuid
        if untied:
            findings.append(
                f"{gpu.where}: {untied} MIG device(s) of GPU {gpu.index} not tied to an instance (nvidia-smi -L "
                "does not print the GPU instance id; several instances of one profile cannot be told apart)"
            )
    return findings


def _compare_profiles(table: MigTable, profiles: Sequence[LgipProfile], findings: list[str]) -> bool:
    """Findings for ``-lgip`` rows that differ from the table; True when the driver lacks
    something the table has."""
    names = set()
    for row in profiles:
        profile = table.profile(row.name)
        if profile is None:
            findings.append(f"{row.where}: the driver has profile {row.name}, the bundled {table.model} table does not")
            continue
        names.add((row.gpu, profile.name))
        if profile.profile_id is not None and profile.profile_id != row.profile_id:
            findings.append(f"{row.where}: {row.name} has profile id {row.profile_id}; the bundled table says {profile.profile_id}")
        if row.total != profile.max_count:
            findings.append(f"{row.where}: {row.name}: the driver allows {row.total} per GPU; the bundled table {profile.max_count}")
    gpus = {row.gpu for row in profiles}
    missing = [p.name for p in table.profiles for g in sorted(gpus) if (g, p.name) not in names]
    if missing and profiles:
        findings.append(f"{profiles[0].where}: the driver does not list {', '.join(sorted(set(missing)))} of the bundled table")
    return bool(missing)


def _compare_placements(
    table: MigTable, placements: Sequence[ProfilePlacements], profiles: Sequence[LgipProfile], findings: list[str]
) -> bool:
    """Findings for ``-lgipp`` lines that differ from the table; True when the driver
    refuses a start the table allows."""
    named = {(row.gpu, row.profile_id): row.name for row in profiles}
    refused = False
    for line in placements:
        name = named.get((line.gpu, line.profile_id))
        found = [p for p in table.profiles if (p.name == name if name else p.profile_id == line.profile_id)]
        if not found:
            findings.append(f"{line.where}: profile id {line.profile_id} is not in the bundled {table.model} table")
            continue
        profile = found[0]
        if line.size != profile.memory_slices:
            findings.append(f"{line.where}: {profile.name} covers {line.size} slice(s); the bundled table says {profile.memory_slices}")
        extra = sorted(set(line.starts) - set(profile.starts))
        lacking = sorted(set(profile.starts) - set(line.starts))
        if extra:
            findings.append(f"{line.where}: {profile.name} may start at {extra} per the driver; the bundled table does not allow it")
        if lacking:
            refused = True
            findings.append(f"{line.where}: {profile.name} may not start at {lacking} per the driver; the bundled table allows it")
    return refused
