"""Parser for ``nvidia-smi -L``; the MIG tables of ``nvidia-smi mig -lgip/-lgi/-lci`` are read by
:mod:`placer.adapters.nvidia_smi.mig_tables` (its names are re-exported here).

``nvidia-smi -L`` prints one line per GPU and, under a GPU in MIG mode, one indented line
per MIG device::

    GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16)
      MIG 1g.10gb     Device  0: (UUID: MIG-feb88891-0321-5fef-9c87-d4af3b54259e)
    GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95)

Old drivers print the product name without the ``NVIDIA`` prefix (``GeForce GTX 1660
Ti``), drivers before 470 print MIG UUIDs as ``MIG-GPU-<gpu uuid>/<gi>/<ci>``. Both are
read; the model is kept as printed. Lines before the first GPU line that are blank or echo
the command (``nvidia-smi -L``, ``$ nvidia-smi -L``, ``user@host:~# sudo nvidia-smi -L``)
are skipped, blank lines anywhere are skipped, and ``No devices were found`` as the only
line means no GPUs. A line cut short (no closing ``)`` after the UUID, as in hand copies)
is an error: the parser never guesses where a line ended.

Everything that does not parse raises :class:`placer.exceptions.InvalidInputError` with
``where`` = ``"<source>:<line>"`` (1-based; the line after the last one when the text
ends too early).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from placer.adapters.nvidia_smi.output import (
    FAILURE_LINE, MIG_PROFILE_NAME, NvidiaSmiOutput, PathLike, parse_file, record_once, show_value,
)
from placer.adapters.nvidia_smi.mig_tables import (
    ComputeInstance, GpuInstance, MigProfile, parse_compute_instances, parse_compute_instances_file,
    parse_gpu_instances, parse_gpu_instances_file, parse_mig_profiles, parse_mig_profiles_file,
)

__all__ = [
    "MigDevice",
    "ListedGpu",
    "MigProfile",
    "GpuInstance",
    "ComputeInstance",
    "MIG_RESOURCE_PREFIX",
    "parse_gpu_list",
    "parse_gpu_list_file",
    "parse_mig_profiles",
    "parse_mig_profiles_file",
    "parse_gpu_instances",
    "parse_gpu_instances_file",
    "parse_compute_instances",
    "parse_compute_instances_file",
    "mig_resources",
]

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""Prefix of the Kubernetes extended resource of a MIG profile (``mig`` strategy mixed)."""

_HEX_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_UUID = re.compile(rf"GPU-{_HEX_UUID}")
# MIG-<uuid> (driver >= 470) or MIG-GPU-<gpu uuid>/<gi>/<ci> (older drivers).
_MIG_UUID = re.compile(rf"MIG-(?:{_HEX_UUID}|(GPU-{_HEX_UUID})/[0-9]{{1,6}}/[0-9]{{1,6}})")

_GPU_LINE = re.compile(
    r"GPU[ \t]+([0-9]{1,4})[ \t]*:[ \t]*(.*?)[ \t]+\(UUID:[ \t]*([^()\s]*)[ \t]*\)"
)
_GPU_LINE_OPEN = re.compile(r"GPU[ \t]+[0-9]{1,4}[ \t]*:.*\(UUID:[ \t]*[^()\s]+")
_MIG_LINE = re.compile(
    r"MIG[ \t]+(\S+)[ \t]+Device[ \t]+([0-9]{1,4})[ \t]*:[ \t]*\(UUID:[ \t]*([^()\s]*)[ \t]*\)"
)
_MIG_LINE_OPEN = re.compile(r"MIG[ \t]+\S+[ \t]+Device[ \t]+[0-9]{1,4}[ \t]*:[ \t]*\(UUID:[ \t]*[^()\s]+")
_NO_DEVICES = "No devices were found"


# ------------------------------------------------------------------------ nvidia-smi -L


@dataclass(frozen=True)
class MigDevice:
    """One MIG device line of ``nvidia-smi -L`` (``  MIG 1g.10gb  Device  0: (UUID: ...)``).

    Attributes
    ----------
    profile : str
        The MIG profile as printed after ``MIG`` (``1g.10gb``, ``1c.3g.20gb``,
        ``1g.10gb+me``).
    device : int
        The MIG device index on its GPU (``Device N``). The devices of one GPU must be
        listed with increasing indices; a gap is accepted (NVML's MIG device indices can
        have holes, and a line missing from a copy cannot be told from one).
    uuid : str
        ``MIG-<uuid>``, or ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` from drivers before 470.
    where : str
        ``"<source>:<line>"`` of the line; ``""`` for devices not read from text.
    """

    profile: str
    device: int
    uuid: str
    where: str = ""

    @property
    def resource_name(self) -> str:
        """The Kubernetes extended resource this device is counted under.

        ``nvidia.com/mig-<profile>`` with ``+`` attributes dropped: the NVIDIA device
        plugin counts ``1g.10gb+me`` devices as ``nvidia.com/mig-1g.10gb``
        (NVIDIA/k8s-device-plugin#1462). Other suffixes are kept as printed.
        """
        return MIG_RESOURCE_PREFIX + self.profile.split("+", 1)[0]


@dataclass(frozen=True)
class ListedGpu:
    """One GPU of ``nvidia-smi -L`` with the MIG devices listed under it.

    Attributes
    ----------
    index : int
        The GPU index (``GPU N:``); the GPUs of one listing are 0, 1, 2, ... in order.
    model : str
        The product name as printed (``NVIDIA A100-SXM4-80GB``; old drivers print it
        without ``NVIDIA``: ``GeForce GTX 1660 Ti``).
    uuid : str
        ``GPU-<uuid>``.
    mig : tuple of MigDevice
        The MIG devices listed under the GPU, in order; empty for a GPU without MIG
        devices (MIG mode off, or on without instances - ``-L`` does not tell them apart).
    where : str
        ``"<source>:<line>"`` of the GPU line; ``""`` for GPUs not read from text.
    """

    index: int
    model: str
    uuid: str
    mig: tuple[MigDevice, ...] = ()
    where: str = ""


def parse_gpu_list(text: str, source: str = "<text>") -> tuple[ListedGpu, ...]:
    """Parse the output of ``nvidia-smi -L``.

    Parameters
    ----------
    text : str
        The output as printed (CRLF line endings, tabs, trailing blanks and a leading
        byte-order mark are fine), optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    tuple of ListedGpu
        One per GPU line, in order; empty for ``No devices were found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a line that is neither a GPU line nor a MIG device line
        (including one cut short before its closing ``)``), a GPU index out of order (not
        0, 1, 2, ... without gaps or repeats), a MIG line before any GPU line, MIG device
        indices of one GPU not increasing, a malformed or repeated UUID, a
        ``MIG-GPU-<uuid>/...`` UUID naming another GPU than the one it is listed under, or
        a message of ``nvidia-smi`` itself; the line after the last one for text without
        any GPU line.
    """
    output = NvidiaSmiOutput(text, source)
    fail = output.fail
    start = output.start("`nvidia-smi -L` output (GPU <n>: <model> (UUID: GPU-...))")
    body = [(number, line.strip()) for number, line in enumerate(output.lines[start:], start + 1) if line.strip()]
    if body[0][1] == _NO_DEVICES:
        if len(body) > 1:
            fail(body[1][0], f"expected nothing after {_NO_DEVICES!r}, got {show_value(body[1][1])}")
        return ()

    gpus: list[ListedGpu] = []
    devices: list[MigDevice] = []
    parent: ListedGpu | None = None
    seen_uuid: dict[str, str] = {}

    def close() -> None:
        if parent is not None:
            gpus.append(ListedGpu(parent.index, parent.model, parent.uuid, tuple(devices), parent.where))

    for number, line in body:
        where = f"{source}:{number}"
        if FAILURE_LINE.match(line) or line == _NO_DEVICES:
            fail(number, f"nvidia-smi reported an error instead of a GPU list: {show_value(line)}")
        if line.startswith("GPU"):
            match = output.whole(number, line, _GPU_LINE, _GPU_LINE_OPEN, "GPU", "GPU <index>: <model> (UUID: GPU-<uuid>)")
            index, model, uuid = int(match.group(1)), match.group(2), match.group(3)
            expected = parent.index + 1 if parent is not None else 0
            if index != expected:
                fail(number, f"expected GPU {expected} (GPUs are listed 0, 1, 2, ... in order), got GPU {index}")
            if not model:
                fail(number, f"GPU {index}: expected a model name before '(UUID:', got none")
            if not _GPU_UUID.fullmatch(uuid):
                fail(number, f"GPU {index}: expected a UUID GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, got {show_value(uuid)}")
            record_once(seen_uuid, uuid, where)
            close()
            parent, devices = ListedGpu(index, model, uuid, (), where), []
        elif line.startswith("MIG"):
            match = output.whole(
                number, line, _MIG_LINE, _MIG_LINE_OPEN, "MIG device", "MIG <profile> Device <n>: (UUID: MIG-<uuid>)"
            )
            if parent is None:
                fail(number, "MIG device line before any GPU line (MIG devices are listed under their GPU)")
            profile, device, uuid = match.group(1), int(match.group(2)), match.group(3)
            if not MIG_PROFILE_NAME.fullmatch(profile):
                fail(number, f"expected a MIG profile like 1g.10gb, got {show_value(profile)}")
            if devices and device <= devices[-1].device:
                fail(
                    number,
                    f"MIG device {device} of GPU {parent.index} after device {devices[-1].device} "
                    f"(at {devices[-1].where}): expected increasing device indices",
                )
            uuid_match = _MIG_UUID.fullmatch(uuid)
            if uuid_match is None:
                fail(number, f"expected a MIG UUID (MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>), got {show_value(uuid)}")
            if uuid_match.group(1) is not None and uuid_match.group(1) != parent.uuid:
                fail(number, f"MIG device {uuid} names another GPU than GPU {parent.index} ({parent.uuid}) it is listed under")
            record_once(seen_uuid, uuid, where)
            devices.append(MigDevice(profile, device, uuid, where))
        else:
            fail(
                number,
                f"expected `GPU <index>: <model> (UUID: GPU-...)` or `MIG <profile> Device <n>: "
                f"(UUID: MIG-...)`, got {show_value(line)}",
            )
    close()
    return tuple(gpus)


def parse_gpu_list_file(path: PathLike) -> tuple[ListedGpu, ...]:
    """Read a UTF-8 file of ``nvidia-smi -L`` output and parse it (:func:`parse_gpu_list`).

    Error locations name the file by its base name; a missing file raises
    :class:`InvalidInputError` with ``where`` = the path and ``what`` = ``"no such file"``.
    """
    return parse_file(parse_gpu_list, path)


def mig_resources(gpus: Sequence[ListedGpu]) -> dict[str, int]:
    """Count the MIG devices of an ``nvidia-smi -L`` listing per Kubernetes resource.

    Parameters
    ----------
    gpus : sequence of ListedGpu
        The GPUs of one node (:func:`parse_gpu_list`).

    Returns
    -------
    dict of str to int
        ``{"nvidia.com/mig-1g.10gb": 7, ...}`` (see :attr:`MigDevice.resource_name`),
        keys sorted; what the NVIDIA device plugin with MIG strategy ``mixed`` reports as
        the node's capacity. GPUs without MIG devices are not counted (``-L`` cannot tell
        a whole GPU from a MIG-mode GPU without instances, so ``nvidia.com/gpu`` is left
        to the caller).
    """
    counts: dict[str, int] = {}
    for gpu in gpus:
        for device in gpu.mig:
            counts[device.resource_name] = counts.get(device.resource_name, 0) + 1
    return dict(sorted(counts.items()))

