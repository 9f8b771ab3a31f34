"""Parsers for ``nvidia-smi -L`` and the MIG tables of ``nvidia-smi mig -lgip/-lgi/-lci``.

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

``nvidia-smi mig -lgip`` (GPU instance profiles), ``mig -lgi`` (GPU instances) and
``mig -lci`` (compute instances) print a boxed table::

    +-----------------------------------------------------------------------------+
    | GPU instance profiles:                                                      |
    | GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
    |                              Free/Total   GiB              CE    JPEG  OFA  |
    |=============================================================================|
    |   0  MIG 1g.10gb       19     0/7        9.50       No     14     0     0   |
    |                                                             1     0     0   |
    +-----------------------------------------------------------------------------+

Every row of ``-lgip`` takes two physical lines (the second holds CE, JPEG and OFA), rows
of ``-lgi``/``-lci`` one; each row is closed by a ``+---+`` border. The parsers read the
cells by whitespace, not by column position (the table width differs between drivers),
check the title and the header words (so that output of another command, or of a driver
whose columns differ, is refused rather than misread), and check the rows:

* ``Free/Total`` is the number of instances of that profile that can still be created /
  could be created on an empty GPU (``0/7`` on a fully partitioned GPU) - current
  availability, not capability;
* the memory in a profile name is not its memory (``1g.23gb`` has 20.50 GiB on B200):
  :attr:`MigProfile.memory_gib` is the ``Memory`` column;
* ``Start:Size`` placements are in memory slices (``-lgi``) or in compute slices of the
  GPU instance (``-lci``); instances on one GPU (GPU instance) may not overlap, and GI/CI
  ids are unique per GPU (GPU instance) but need not be contiguous or ordered.

A real table always ends with its ``+---+`` border. Text that ends right after a complete
row without it is a cut copy; by default that is an error at the line where the border
should be, and with ``allow_cut=True`` the complete rows are returned. A row cut in its
middle (the first line of a ``-lgip`` row without its second, a line without its closing
``|``) is always an error. ``No GPU instances found`` / ``No compute instances found`` /
``No MIG-enabled devices found`` (optionally followed by ``: <reason>``) as the only line
mean no rows; other messages of ``nvidia-smi`` (``Failed to display compute instances:
Insufficient Permissions``, ``NVIDIA-SMI has failed ...``) are errors.

Everything that does not parse raises :class:`placer.exceptions.InvalidInputError` with
``where`` = ``"<source>:<line>"`` (1-based; the line after the last one when the text
ends too early).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, NoReturn, Sequence, TypeVar, Union

from placer.text.files import read_text
from placer.exceptions import InvalidInputError
from placer.text.lines import TextLines

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

PathLike = Union[str, "os.PathLike[str]"]

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""Prefix of the Kubernetes extended resource of a MIG profile (``mig`` strategy mixed)."""

_HEX_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_UUID = re.compile(rf"GPU-{_HEX_UUID}")
# MIG-<uuid> (driver >= 470) or MIG-GPU-<gpu uuid>/<gi>/<ci> (older drivers).
_MIG_UUID = re.compile(rf"MIG-(?:{_HEX_UUID}|(GPU-{_HEX_UUID})/[0-9]{{1,6}}/[0-9]{{1,6}})")
# 1g.10gb, 1g.10gb+me, 1g.24gb+gfx, 1g.23gb+me.all, 1g.23gb-me, 1c.3g.20gb (a CI profile).
_PROFILE = re.compile(r"(?:[0-9]{1,2}c\.)?[0-9]{1,2}g\.[0-9]{1,4}gb(?:[+-][a-z][a-z0-9]*(?:\.[a-z0-9]+)*)*")

_GPU_LINE = re.compile(
    r"GPU[ \t]+([0-9]{1,4})[ \t]*:[ \t]*(.*?)[ \t]+\(UUID:[ \t]*([^()\s]*)[ \t]*\)"
)
_GPU_LINE_OPEN = re.compile(r"GPU[ \t]+[0-9]{1,4}[ \t]*:.*\(UUID:[ \t]*[^()\s]+")
_MIG_LINE = re.compile(
    r"MIG[ \t]+(\S+)[ \t]+Device[ \t]+([0-9]{1,4})[ \t]*:[ \t]*\(UUID:[ \t]*([^()\s]*)[ \t]*\)"
)
_MIG_LINE_OPEN = re.compile(r"MIG[ \t]+\S+[ \t]+Device[ \t]+[0-9]{1,4}[ \t]*:[ \t]*\(UUID:[ \t]*[^()\s]+")
_NO_DEVICES = "No devices were found"
_NONE_FOUND = re.compile(r"No (?:GPU instances|compute instances|MIG-enabled devices) found\.?(?::.*)?")
_FAILURES = re.compile(r"NVIDIA-SMI has failed|Failed to |Unable to |Insufficient Permissions|No .*found")

_BORDER = re.compile(r"\+-{3,}\+")
_RULE = re.compile(r"\|={3,}\|")
_BOXED = re.compile(r"\|(.*)\|")
_INT = re.compile(r"[0-9]{1,6}")
_FREE_TOTAL = re.compile(r"([0-9]{1,4})/([0-9]{1,4})")
_GIB = re.compile(r"[0-9]{1,6}\.[0-9]{2}")  # always printed with two decimals
_PLACEMENT = re.compile(r"([0-9]{1,4}):([0-9]{1,4})")
_MAX_INDEX = 4096


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
    output = _Output(text, source)
    fail = output.fail
    start = output.start("`nvidia-smi -L` output (GPU <n>: <model> (UUID: GPU-...))")
    body = [(number, line.strip()) for number, line in enumerate(output.lines[start:], start + 1) if line.strip()]
    if body[0][1] == _NO_DEVICES:
        if len(body) > 1:
            fail(body[1][0], f"expected nothing after {_NO_DEVICES!r}, got {_show(body[1][1])}")
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
        if _FAILURES.match(line) or line == _NO_DEVICES:
            fail(number, f"nvidia-smi reported an error instead of a GPU list: {_show(line)}")
        if line.startswith("GPU"):
            match = output.whole(number, line, _GPU_LINE, _GPU_LINE_OPEN, "GPU", "GPU <index>: <model> (UUID: GPU-<uuid>)")
            index, model, uuid = int(match.group(1)), match.group(2), match.group(3)
            expected = parent.index + 1 if parent is not None else 0
            if index != expected:
                fail(number, f"expected GPU {expected} (GPUs are listed 0, 1, 2, ... in order), got GPU {index}")
            if not model:
                fail(number, f"GPU {index}: expected a model name before '(UUID:', got none")
            if not _GPU_UUID.fullmatch(uuid):
                fail(number, f"GPU {index}: expected a UUID GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, got {_show(uuid)}")
            _once(seen_uuid, uuid, where)
            close()
            parent, devices = ListedGpu(index, model, uuid, (), where), []
        elif line.startswith("MIG"):
            match = output.whole(
                number, line, _MIG_LINE, _MIG_LINE_OPEN, "MIG device", "MIG <profile> Device <n>: (UUID: MIG-<uuid>)"
            )
            if parent is None:
                fail(number, "MIG device line before any GPU line (MIG devices are listed under their GPU)")
            profile, device, uuid = match.group(1), int(match.group(2)), match.group(3)
            if not _PROFILE.fullmatch(profile):
                fail(number, f"expected a MIG profile like 1g.10gb, got {_show(profile)}")
            if devices and device <= devices[-1].device:
                fail(
                    number,
                    f"MIG device {device} of GPU {parent.index} after device {devices[-1].device} "
                    f"(at {devices[-1].where}): expected increasing device indices",
                )
            uuid_match = _MIG_UUID.fullmatch(uuid)
            if uuid_match is None:
                fail(number, f"expected a MIG UUID (MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci>), got {_show(uuid)}")
            if uuid_match.group(1) is not None and uuid_match.group(1) != parent.uuid:
                fail(number, f"MIG device {uuid} names another GPU than GPU {parent.index} ({parent.uuid}) it is listed under")
            _once(seen_uuid, uuid, where)
            devices.append(MigDevice(profile, device, uuid, where))
        else:
            fail(
                number,
                f"expected `GPU <index>: <model> (UUID: GPU-...)` or `MIG <profile> Device <n>: "
                f"(UUID: MIG-...)`, got {_show(line)}",
            )
    close()
    return tuple(gpus)


def parse_gpu_list_file(path: PathLike) -> tuple[ListedGpu, ...]:
    """Read a UTF-8 file of ``nvidia-smi -L`` output and parse it (:func:`parse_gpu_list`).

    Error locations name the file by its base name; a missing file raises
    :class:`InvalidInputError` with ``where`` = the path and ``what`` = ``"no such file"``.
    """
    return _parse_file(parse_gpu_list, path)


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


# ---------------------------------------------------------------- nvidia-smi mig tables


@dataclass(frozen=True)
class MigProfile:
    """One GPU instance profile of ``nvidia-smi mig -lgip`` (two physical lines).

    Attributes
    ----------
    gpu : int
        The GPU index.
    name : str
        The profile name without ``MIG`` (``1g.10gb``, ``1g.10gb+me``).
    profile_id : int
        The GPU instance profile id (``ID``; what ``nvidia-smi mig -cgi`` takes).
    free, total : int
        ``Instances Free/Total``: how many instances of the profile can be created now /
        on an empty GPU.
    memory_gib : float
        ``Memory`` in GiB (not the size in the profile name).
    p2p : bool
        ``P2P`` (``Yes``/``No``).
    sm, dec, enc : int
        Streaming multiprocessors, video decoders, video encoders.
    ce, jpeg, ofa : int
        Copy engines, JPEG decoders, optical flow accelerators (the second line).
    where : str
        ``"<source>:<line>"`` of the row's first line; ``""`` for rows not read from text.
    """

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int
    where: str = ""


@dataclass(frozen=True)
class GpuInstance:
    """One GPU instance of ``nvidia-smi mig -lgi``.

    Attributes
    ----------
    gpu : int
        The GPU index.
    name : str
        The profile name without ``MIG`` (``3g.40gb``).
    profile_id : int
        The GPU instance profile id.
    instance_id : int
        The GPU instance id (unique per GPU, not contiguous, not ordered by placement).
    start, size : int
        ``Placement Start:Size`` in memory slices of the GPU.
    where : str
        ``"<source>:<line>"`` of the row; ``""`` for rows not read from text.
    """

    gpu: int
    name: str
    profile_id: int
    instance_id: int
    start: int
    size: int
    where: str = ""


@dataclass(frozen=True)
class ComputeInstance:
    """One compute instance of ``nvidia-smi mig -lci``.

    Attributes
    ----------
    gpu : int
        The GPU index.
    gpu_instance_id : int
        The GPU instance the compute instance lives in.
    name : str
        The profile name without ``MIG`` (``1g.5gb``, ``1c.3g.20gb``).
    profile_id : int
        The compute instance profile id (not the GPU instance profile id).
    instance_id : int
        The compute instance id (unique per GPU instance).
    start, size : int
        ``Placement Start:Size`` in compute slices of the GPU instance.
    where : str
        ``"<source>:<line>"`` of the row; ``""`` for rows not read from text.
    """

    gpu: int
    gpu_instance_id: int
    name: str
    profile_id: int
    instance_id: int
    start: int
    size: int
    where: str = ""


@dataclass(frozen=True)
class _Table:
    command: str
    title: str
    header: tuple[tuple[str, ...], ...]
    # Per physical line of a row, its columns as (name, reader): a method of _Cells that
    # gives the column's value(s); "MIG" is a literal column that gives none.
    columns: tuple[tuple[tuple[str, str], ...], ...]
    # The row's type, built from the values of its columns in order and ``where``.
    row: Callable[..., Any]
    # Functions of a row giving (key, what): no two rows may share a key (``what`` names it).
    unique: tuple[Callable[[Any], tuple[object, str]], ...]
    # The ``No <empty> found`` message that means no rows (as ``No MIG-enabled devices found`` does).
    empty: str | None = None

    @property
    def lines_per_row(self) -> int:
        return len(self.columns)


_LGIP = _Table(
    "nvidia-smi mig -lgip",
    "GPU instance profiles:",
    (
        ("GPU", "Name", "ID", "Instances", "Memory", "P2P", "SM", "DEC", "ENC"),
        ("Free/Total", "GiB", "CE", "JPEG", "OFA"),
    ),
    (
        (
            ("GPU", "index"), ("MIG", "MIG"), ("Name", "profile"), ("ID", "integer"),
            ("Free/Total", "free_total"), ("Memory", "gib"), ("P2P", "yes_no"),
            ("SM", "integer"), ("DEC", "integer"), ("ENC", "integer"),
        ),
        (("CE", "integer"), ("JPEG", "integer"), ("OFA", "integer")),
    ),
    MigProfile,
    (
        lambda row: ((row.gpu, row.profile_id), f"GPU {row.gpu}: profile id {row.profile_id}"),
        lambda row: ((row.gpu, row.name), f"GPU {row.gpu}: profile {row.name}"),
    ),
)
_LGI = _Table(
    "nvidia-smi mig -lgi",
    "GPU instances:",
    (("GPU", "Name", "Profile", "Instance", "Placement"), ("ID", "ID", "Start:Size")),
    (
        (
            ("GPU", "index"), ("MIG", "MIG"), ("Name", "profile"), ("Profile ID", "integer"),
            ("Instance ID", "integer"), ("Start:Size", "placement"),
        ),
    ),
    GpuInstance,
    (lambda row: ((row.gpu, row.instance_id), f"GPU {row.gpu}: GPU instance {row.instance_id}"),),
    "GPU instances",
)
_LCI = _Table(
    "nvidia-smi mig -lci",
    "Compute instances:",
    (
        ("GPU", "GPU", "Name", "Profile", "Instance", "Placement"),
        ("Instance", "ID", "ID", "Start:Size"),
        ("ID",),
    ),
    (
        (
            ("GPU", "index"), ("GPU Instance ID", "integer"), ("MIG", "MIG"), ("Name", "profile"),
            ("Profile ID", "integer"), ("Instance ID", "integer"), ("Start:Size", "placement"),
        ),
    ),
    ComputeInstance,
    (
        lambda row: (
            (row.gpu, row.gpu_instance_id, row.instance_id),
            f"GPU {row.gpu} GPU instance {row.gpu_instance_id}: compute instance {row.instance_id}",
        ),
    ),
    "compute instances",
)
_TABLES = (_LGIP, _LGI, _LCI)


def parse_mig_profiles(text: str, source: str = "<text>", *, allow_cut: bool = False) -> tuple[MigProfile, ...]:
    """Parse the output of ``nvidia-smi mig -lgip`` (GPU instance profiles).

    Parameters
    ----------
    text : str
        The output as printed, optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).
    allow_cut : bool
        Accept text that ends right after a complete row without the closing border (a
        copy cut at a row boundary) and return the complete rows. Default: an error.

    Returns
    -------
    tuple of MigProfile
        One per profile row, in order; empty for ``No MIG-enabled devices found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` for a table that is not a ``-lgip`` table (other title or
        header words), a line outside the box, a row without its second line or with
        another number of cells, a cell that is not what its column holds, ``Free`` above
        ``Total``, the same profile id or name twice on one GPU, a missing border (see
        ``allow_cut``), text after the table, or a message of ``nvidia-smi`` itself.
    """
    return tuple(_TableReader(text, source, _LGIP).rows(allow_cut))


def parse_gpu_instances(text: str, source: str = "<text>", *, allow_cut: bool = False) -> tuple[GpuInstance, ...]:
    """Parse the output of ``nvidia-smi mig -lgi`` (GPU instances).

    Parameters
    ----------
    text : str
        The output as printed, optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).
    allow_cut : bool
        As for :func:`parse_mig_profiles`.

    Returns
    -------
    tuple of GpuInstance
        One per row, in order; empty for ``No GPU instances found`` or ``No MIG-enabled
        devices found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` as for :func:`parse_mig_profiles`, and for the same
        instance id twice on one GPU, a placement of size 0 or overlapping another
        instance's on the same GPU, or one profile name with two profile ids (or the
        reverse) on one GPU.
    """
    out = _TableReader(text, source, _LGI).rows(allow_cut)
    _check_profiles(out)
    _check_overlaps(out, lambda row: (row.gpu,), lambda key: f"GPU {key[0]}")
    return tuple(out)


def parse_compute_instances(
    text: str, source: str = "<text>", *, allow_cut: bool = False
) -> tuple[ComputeInstance, ...]:
    """Parse the output of ``nvidia-smi mig -lci`` (compute instances).

    Parameters
    ----------
    text : str
        The output as printed, optionally after lines echoing the command.
    source : str
        Name used in error locations (a file name).
    allow_cut : bool
        As for :func:`parse_mig_profiles`.

    Returns
    -------
    tuple of ComputeInstance
        One per row, in order; empty for ``No compute instances found`` or ``No
        MIG-enabled devices found``.

    Raises
    ------
    InvalidInputError
        ``"<source>:<line>"`` as for :func:`parse_mig_profiles`, and for the same compute
        instance id twice in one GPU instance, or a placement of size 0 or overlapping
        another compute instance's in the same GPU instance.
    """
    out = _TableReader(text, source, _LCI).rows(allow_cut)
    _check_overlaps(
        out, lambda row: (row.gpu, row.gpu_instance_id),
        lambda key: f"GPU {key[0]} GPU instance {key[1]}",
    )
    return tuple(out)


def parse_mig_profiles_file(path: PathLike, *, allow_cut: bool = False) -> tuple[MigProfile, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lgip`` output and parse it
    (:func:`parse_mig_profiles`); errors as :func:`parse_gpu_list_file`."""
    return _parse_file(parse_mig_profiles, path, allow_cut=allow_cut)


def parse_gpu_instances_file(path: PathLike, *, allow_cut: bool = False) -> tuple[GpuInstance, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lgi`` output and parse it
    (:func:`parse_gpu_instances`); errors as :func:`parse_gpu_list_file`."""
    return _parse_file(parse_gpu_instances, path, allow_cut=allow_cut)


def parse_compute_instances_file(path: PathLike, *, allow_cut: bool = False) -> tuple[ComputeInstance, ...]:
    """Read a UTF-8 file of ``nvidia-smi mig -lci`` output and parse it
    (:func:`parse_compute_instances`); errors as :func:`parse_gpu_list_file`."""
    return _parse_file(parse_compute_instances, path, allow_cut=allow_cut)


# ----------------------------------------------------------------------------- helpers

_Placed = TypeVar("_Placed", GpuInstance, ComputeInstance)
_Parsed = TypeVar("_Parsed")


def _show(value: str) -> str:
    if value == "":
        return "an empty line"
    return repr(value) if len(value) <= 80 else repr(value[:80]) + "..."


def _is_echo(line: str) -> bool:
    """A line that echoes the command (``nvidia-smi -L``, ``$ sudo nvidia-smi mig -lgi``)."""
    return "nvidia-smi" in line and not line.lstrip().startswith(("GPU", "MIG", "|", "+"))


def _once(seen: dict, key: object, where: str, what: str | None = None) -> None:
    """Record ``key`` as seen at ``where``; an error if it was seen before."""
    if key in seen:
        raise InvalidInputError(where, f"{what or key} is listed twice (first at {seen[key]})")
    seen[key] = where


def _parse_file(parse: Callable[..., _Parsed], path: PathLike, **options: bool) -> _Parsed:
    """``parse`` the UTF-8 file ``path``; error locations name it by its base name."""
    name = os.path.basename(os.fspath(path))
    return parse(read_text(path, source=name), name, **options)


class _Output(TextLines):
    """The lines of an ``nvidia-smi -L`` or ``nvidia-smi mig`` output, errors at ``<source>:<line>``."""

    def start(self, expected: str) -> int:
        """The index of the first line that is neither blank nor an echo of the command;
        when there is none, an error ``expected <expected>, got ...`` after the last line."""
        start = 0
        while start < len(self.lines) and (not self.lines[start].strip() or _is_echo(self.lines[start])):
            start += 1
        if start == len(self.lines):
            got = "only the command line" if any(line.strip() for line in self.lines) else "an empty text"
            self.fail(len(self.lines) + 1, f"expected {expected}, got {got}")
        return start

    def whole(
        self, number: int, line: str, pattern: re.Pattern[str], cut: re.Pattern[str], kind: str, form: str
    ) -> re.Match[str]:
        """``line`` (line ``number``) matched by ``pattern``; an error naming it a ``kind`` line cut
        short when ``cut`` matches it instead, else one expecting ``form``."""
        match = pattern.fullmatch(line)
        if match is None:
            if cut.fullmatch(line):
                self.fail(number, f"{kind} line without the closing ')' after the UUID (a copy cut short?): {_show(line)}")
            self.fail(number, f"expected `{form}`, got {_show(line)}")
        return match


class _TableReader(_Output):
    """The (stripped) lines of an ``nvidia-smi mig`` output read as the boxed ``table``."""

    def __init__(self, text: str, source: str, table: _Table) -> None:
        super().__init__(text, source)
        self.lines = [line.strip() for line in self.lines]
        self.table = table

    def rows(self, allow_cut: bool) -> list[Any]:
        """The rows as ``table.row`` objects, each checked cell by cell and for repeated keys."""
        table = self.table
        out: list[Any] = []
        seen: list[dict[object, str]] = [{} for _ in table.unique]
        for number, lines in self.row_cells(allow_cut):
            values: list[object] = []
            for offset, (columns, cells) in enumerate(zip(table.columns, lines)):
                values.extend(_Cells(self, number + offset, columns, cells).values())
            where = f"{self.source}:{number}"
            row = table.row(*values, where=where)
            for keys, unique in zip(seen, table.unique):
                key, what = unique(row)
                _once(keys, key, where, what)
            out.append(row)
        return out

    def row_cells(self, allow_cut: bool) -> list[tuple[int, tuple[list[str], ...]]]:
        """The rows of the table as (line of the row, cells per line)."""
        table, lines, fail = self.table, self.lines, self.fail
        count = len(lines)
        end = count + 1  # the line number of "end of input"
        i = self.start(f"`{table.command}` output (a table starting with '+---+')")
        first = lines[i]
        if _NONE_FOUND.fullmatch(first):
            if first.startswith("No MIG-enabled") or (table.empty is not None and first.startswith(f"No {table.empty}")):
                for later in range(i + 1, count):
                    if lines[later]:
                        fail(later + 1, f"expected nothing after {first!r}, got {_show(lines[later])}")
                return []
        if _FAILURES.match(first) or _NONE_FOUND.fullmatch(first):
            fail(i + 1, f"nvidia-smi reported an error instead of the `{table.command}` table: {_show(first)}")
        if not _BORDER.fullmatch(first):
            fail(i + 1, f"expected the top border '+---...---+' of the `{table.command}` table, got {_show(first)}")
        i += 1

        title = self.boxed(i, f"the title {table.title!r}")
        if title != table.title:
            other = [t for t in _TABLES if t.title == title]
            hint = f" (that is `{other[0].command}` output)" if other else ""
            fail(i + 1, f"expected the title {table.title!r} of `{table.command}`, got {title!r}{hint}")
        i += 1
        for words in table.header:
            got = self.boxed(i, f"the header line {' '.join(words)!r}")
            if _RULE.fullmatch(lines[i]) or tuple(got.split()) != words:
                fail(
                    i + 1,
                    f"expected the header line {' '.join(words)!r} of `{table.command}`, got "
                    f"{_show(lines[i])} (another nvidia-smi version or command?)",
                )
            i += 1
        if i >= count:
            fail(end, "expected the rule '|===...===|' below the header, got end of input")
        if not _RULE.fullmatch(lines[i]):
            fail(i + 1, f"expected the rule '|===...===|' below the header, got {_show(lines[i])}")
        i += 1

        rows: list[tuple[int, tuple[list[str], ...]]] = []
        while True:
            # A row (or the end of the table after a border).
            if i >= count or not lines[i]:
                if rows or allow_cut:
                    self.only_blank(i)
                    return rows
                got = "end of input" if i >= count else "an empty line"
                fail(i + 1, f"expected the first row of the `{table.command}` table, got {got}")
            start = i + 1
            cells: list[list[str]] = []
            for part in range(table.lines_per_row):
                what = (
                    f"the {_ordinal(part + 1)} line of the row started at line {start}"
                    if part else "a row"
                )
                if i < count and (_BORDER.fullmatch(lines[i]) or _RULE.fullmatch(lines[i])):
                    fail(i + 1, f"expected {what}, got the border {_show(lines[i])}")
                if i < count and not lines[i]:
                    fail(i + 1, f"expected {what}, got an empty line")
                cells.append(self.boxed(i, what).split())
                i += 1
            rows.append((start, tuple(cells)))
            # The border that closes each row.
            if i >= count or not lines[i]:
                if allow_cut:
                    self.only_blank(i)
                    return rows
                got = "end of input" if i >= count else "an empty line"
                fail(
                    i + 1,
                    f"expected the border '+---...---+' that closes the row at line {start}, got {got} "
                    "(the table is cut short: give the command's whole output)",
                )
            if not _BORDER.fullmatch(lines[i]):
                fail(i + 1, f"expected the border '+---...---+' that closes the row at line {start}, got {_show(lines[i])}")
            i += 1

    def boxed(self, at: int, what: str) -> str:
        """The text between the ``|`` of line index ``at``, for ``what``."""
        if at >= len(self.lines):
            self.fail(len(self.lines) + 1, f"expected {what}, got end of input")
        match = _BOXED.fullmatch(self.lines[at])
        if match is None:
            self.fail(at + 1, f"expected {what} (a table line between '|' and '|'), got {_show(self.lines[at])}")
        return match.group(1).strip()

    def only_blank(self, start: int) -> None:
        for at in range(start, len(self.lines)):
            if self.lines[at]:
                self.fail(at + 1, f"expected nothing after the `{self.table.command}` table, got {_show(self.lines[at])}")


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


class _Cells:
    """The whitespace-separated cells of one physical table line, read column by column."""

    def __init__(self, output: TextLines, line: int, columns: tuple[tuple[str, str], ...], cells: list[str]) -> None:
        self.output, self.line, self.cells = output, line, cells
        self.names = tuple(name for name, _ in columns)
        self.readers = tuple(reader for _, reader in columns)
        if len(cells) != len(columns):
            output.fail(
                line,
                f"expected {len(columns)} cells ({', '.join(self.names)}), got {len(cells)}: {_show(' '.join(cells))}",
            )

    def values(self) -> list[object]:
        """The value of each column in order, by its reader (a pair for a pair column, none
        for the literal ``MIG``)."""
        out: list[object] = []
        for at, reader in enumerate(self.readers):
            if reader == "MIG":
                self.literal(at, "MIG")
                continue
            value = getattr(self, reader)(at)
            out.extend(value if isinstance(value, tuple) else (value,))
        return out

    def bad(self, at: int, expected: str) -> NoReturn:
        self.output.fail(self.line, f"column {self.names[at]}: expected {expected}, got {_show(self.cells[at])}")

    def literal(self, at: int, word: str) -> None:
        if self.cells[at] != word:
            self.bad(at, repr(word))

    def integer(self, at: int) -> int:
        if not _INT.fullmatch(self.cells[at]):
            self.bad(at, "an integer")
        return int(self.cells[at])

    def index(self, at: int) -> int:
        value = self.integer(at)
        if value >= _MAX_INDEX:
            self.bad(at, f"a GPU index 0..{_MAX_INDEX - 1}")
        return value

    def profile(self, at: int) -> str:
        if not _PROFILE.fullmatch(self.cells[at]):
            self.bad(at, "a MIG profile name like 1g.10gb")
        return self.cells[at]

    def placement(self, at: int) -> tuple[int, int]:
        match = _PLACEMENT.fullmatch(self.cells[at])
        if match is None or int(match.group(2)) == 0:
            self.bad(at, "a placement start:size with size >= 1, like 0:2")
        return int(match.group(1)), int(match.group(2))

    def free_total(self, at: int) -> tuple[int, int]:
        match = _FREE_TOTAL.fullmatch(self.cells[at])
        if match is None:
            self.bad(at, "free/total instance counts like 0/7")
        free, total = int(match.group(1)), int(match.group(2))
        if free > total:
            self.bad(at, "free/total with free <= total")
        return free, total

    def gib(self, at: int) -> float:
        if not _GIB.fullmatch(self.cells[at]):
            self.bad(at, "a size in GiB with two decimals, like 9.50")
        return float(self.cells[at])

    def yes_no(self, at: int) -> bool:
        if self.cells[at] not in ("Yes", "No"):
            self.bad(at, "Yes or No")
        return self.cells[at] == "Yes"


def _check_profiles(rows: Sequence[GpuInstance]) -> None:
    """One profile name per profile id and the reverse, per GPU."""
    by_id: dict[tuple[int, int], GpuInstance] = {}
    by_name: dict[tuple[int, str], GpuInstance] = {}
    for row in rows:
        first = by_id.setdefault((row.gpu, row.profile_id), row)
        if first.name != row.name:
            raise InvalidInputError(
                row.where,
                f"GPU {row.gpu}: profile id {row.profile_id} is {row.name}, but {first.name} at {first.where}",
            )
        first = by_name.setdefault((row.gpu, row.name), row)
        if first.profile_id != row.profile_id:
            raise InvalidInputError(
                row.where,
                f"GPU {row.gpu}: profile {row.name} has id {row.profile_id}, but {first.profile_id} at {first.where}",
            )


def _check_overlaps(
    rows: Sequence[_Placed],
    key: Callable[[_Placed], tuple[int, ...]],
    describe: Callable[[tuple[int, ...]], str],
) -> None:
    """No two placements of one GPU (GPU instance) share a slice."""
    placed: dict[tuple[int, ...], list[_Placed]] = {}
    for row in rows:
        group = placed.setdefault(key(row), [])
        for other in group:
            if row.start < other.start + other.size and other.start < row.start + row.size:
                raise InvalidInputError(
                    row.where,
                    f"{describe(key(row))}: placement {row.start}:{row.size} overlaps "
                    f"{other.start}:{other.size} at {other.where}",
                )
        group.append(row)
