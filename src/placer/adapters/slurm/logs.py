"""Readers of what Slurm's daemons log about GPUs.

* the ``GRES[gpu] ...`` device lines of a slurmd log or of ``slurmd -G`` (what
  ``AutoDetect`` found): :func:`parse_slurmd_gpus`;
* the GRES errors of a slurmctld (or slurmd) log: :func:`find_gres_errors`.

Errors are :class:`placer.exceptions.InvalidInputError` with ``where`` =
``"<source>:<line>"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from placer.adapters.slurm.records import COUNT, CommandOutput, fail
from placer.adapters.slurm.values import number_list
from placer.text.lines import clip

__all__ = ["MAX_CORES", "SlurmdGpu", "parse_slurmd_gpus", "GresLogError", "find_gres_errors"]

MAX_CORES = 65_536
"""Largest core count (the ``N`` of ``Cores(N):``) :func:`parse_slurmd_gpus` accepts."""


# ----------------------------------------------------------------- slurmd GRES devices


@dataclass(frozen=True)
class SlurmdGpu:
    """One GPU (or MIG device) slurmd listed in its log or in ``slurmd -G`` output.

    Attributes
    ----------
    line : int
        1-based line in the log.
    type : str or None
        ``Type:``; ``None`` for ``(null)`` (what AutoDetect gives a MIG device whose
        profile matched no configured type).
    count : int
        ``Count:``.
    core_count : int or None
        The ``N`` of ``Cores(N):`` (``CoreCnt=``): the size of the core bitmap that
        ``cores`` indexes (the node's cores as slurmd counted them).
    cores : tuple of int or None
        The cores the device is close to (``0-63`` expanded); ``None`` for ``(null)`` or
        when not shown.
    links : tuple of int or None
        ``Links:``: ``-1`` at the device's own position, else the link count to the
        device at that position (0 = none; MIG peers are 0); ``None`` for ``(null)``.
    flags : tuple of str
        ``Flags:`` (``HAS_FILE``, ``ENV_NVML``, ...).
    files : tuple of str
        ``File:`` split at its commas (a MIG device lists its parent ``/dev/nvidiaN``
        and its ``/dev/nvidia-caps/...`` files); ``()`` for ``(null)``.
    unique_id : str or None
        ``UniqueId:`` (``MIG-GPU-<uuid>/<gi>/<ci>`` or ``MIG-<uuid>`` for MIG).
    parent_uuid : str or None
        For ``MIG-GPU-<uuid>/<gi>/<ci>``: ``GPU-<uuid>``, the GPU the device is part of.
    gpu_instance : int or None
        For ``MIG-GPU-<uuid>/<gi>/<ci>``: the GPU instance id ``gi``.
    compute_instance : int or None
        For ``MIG-GPU-<uuid>/<gi>/<ci>``: the compute instance id ``ci``.
    heading : str or None
        The nearest log message above the line that is not a device line (slurmd
        prints device lists under headings such as ``WARNING: The following
        autodetected GPUs are being ignored:``); ``None`` when the log starts with it.
    ignored : bool
        ``heading`` says the devices below it are ignored or discarded: Slurm does not
        use them.
    """

    line: int
    type: str | None
    count: int
    core_count: int | None
    cores: tuple[int, ...] | None
    links: tuple[int, ...] | None
    flags: tuple[str, ...]
    files: tuple[str, ...]
    unique_id: str | None
    parent_uuid: str | None
    gpu_instance: int | None
    compute_instance: int | None
    heading: str | None
    ignored: bool

    @property
    def is_mig(self) -> bool:
        """The device is a MIG slice (a ``MIG-`` unique id or ``nvidia-caps`` files)."""
        return (self.unique_id or "").startswith("MIG-") or any(
            "/nvidia-caps/" in path for path in self.files
        )


_GRES_LINE = re.compile(r"(?<![A-Za-z_])GRES\[")
_GRES_NAME_LINE = re.compile(r"(?:^|\s)Gres Name=")
_TIMESTAMP_PREFIX = re.compile(r"^\s*\[[^\]]*\]")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_MIG_LEGACY = re.compile(rf"MIG-GPU-({_UUID})/([0-9]{{1,9}})/([0-9]{{1,9}})")
_MIG_NEW = re.compile(rf"MIG-{_UUID}")
_LINK = re.compile(r"-1|[0-9]{1,3}")
_CORE_RANGE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")
_IGNORED = re.compile(r"being ignored|discarding|ignoring it", re.IGNORECASE)
_GRES_FIELDS = ("Type", "Count", "Cores", "Links", "Flags", "File")


def parse_slurmd_gpus(text: str, source: str = "<text>") -> list[SlurmdGpu]:
    """Read the GPU device lines of a slurmd log (``AutoDetect=nvml``) or ``slurmd -G``.

    Two line forms are read, wherever they start on the line (after a ``[timestamp]``
    or ``slurmd:`` prefix):

    * ``GRES[gpu] Type:<t> Count:<n> Cores(<N>):<ranges>  Links:<v> Flags:<f>
      File:<a>,<b> UniqueId:<id>`` -- the fields in this order, ``UniqueId:`` optional
      (older Slurm), ``(null)`` for an unset value;
    * ``Gres Name=gpu Type=<t> Count=<n> [Index=..] [ID=..] [File=..] [Cores=..]
      [CoreCnt=..] [Links=..] [Flags=..]``.

    Lines of other GRES (``GRES[mps]``, ``Gres Name=shard``) are checked the same way
    and skipped, ``GRES_PARSABLE[...]`` lines are skipped; all other lines are log
    messages and only serve as ``heading``. A log
    lists a device again under each heading that concerns it (system list, matched,
    final), so the same device may come back on several rows.

    A log copied in part (the stored copy of deepops#1214 keeps 4 of the MIG devices
    whose ``Links:`` vectors have 7 positions) gives the rows that are there; a line cut
    inside gives an error at that line.

    Parameters
    ----------
    text : str
        The log.
    source : str
        Name used in error locations (a file name).

    Returns
    -------
    list of SlurmdGpu
        One per GPU device line, in log order; ``[]`` when the log lists none (what
        slurmd prints when AutoDetect found no GPU).

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for a device line whose fields are missing
        or out of order (a line cut short ends before ``File:``), an unknown word, a
        count or core count that is not a whole number (core count at most
        :data:`MAX_CORES`), a core range beyond ``Cores(N)``, a ``Links:`` value that is
        not a comma list of integers with at most one ``-1``, an empty ``File:`` element,
        a ``UniqueId:`` starting ``MIG-`` that is not ``MIG-GPU-<uuid>/<gi>/<ci>`` or
        ``MIG-<uuid>``, or a MIG device (``nvidia-caps`` files) without ``UniqueId:``
        (the line ends after ``File:``: cut).
    """
    gpus: list[SlurmdGpu] = []
    heading: str | None = None
    for line_no, where, raw in CommandOutput(text, source).numbered():
        found = _GRES_LINE.search(raw)
        if found is not None:
            fields = _gres_bracket_fields(raw[found.start():].rstrip(), where)
        else:
            found = _GRES_NAME_LINE.search(raw)
            if found is None:
                if "GRES_PARSABLE[" in raw:  # test39.18's form of the same records
                    continue
                message = _TIMESTAMP_PREFIX.sub("", raw).strip()
                if message:
                    heading = message
                continue
            fields = _gres_name_fields(raw[found.end() - len("Name="):].rstrip(), where)
        if fields["name"] != "gpu":
            continue
        gpus.append(_slurmd_gpu(fields, line_no, heading, where))
    return gpus


def _gres_bracket_fields(rest: str, where: str) -> dict[str, str | None]:
    """``GRES[gpu] Type:... File:... UniqueId:...`` into raw field values."""
    match = re.match(r"GRES\[([^\]\s]*)\]", rest)
    if match is None or not match.group(1):
        fail(where, f"expected GRES[<name>] Type:..., got {clip(rest)!r}")
    fields: dict[str, str | None] = {"name": match.group(1).lower()}
    words = rest[match.end():].split()
    position = 0
    for key in _GRES_FIELDS:
        previous = f"after {_GRES_FIELDS[_GRES_FIELDS.index(key) - 1]}:" if key != "Type" \
            else f"after GRES[{match.group(1)}]"
        if position >= len(words):
            fail(where, f"expected {key}: {previous}, got the end of the line (cut short?)")
        word = words[position]
        if key == "Cores":
            cores = re.fullmatch(r"Cores\(([^()]*)\):(.*)", word)
            if cores is None:
                fail(where, f"expected Cores(<N>):<ranges> {previous}, got {clip(word)!r}")
            fields["core_count"], fields["cores"] = cores.group(1), cores.group(2)
        else:
            if not word.startswith(f"{key}:"):
                fail(where, f"expected {key}: {previous}, got {clip(word)!r}")
            fields[key.lower()] = word[len(key) + 1:]
        position += 1
    rest_words = words[position:]
    if rest_words:
        if not rest_words[0].startswith("UniqueId:"):
            fail(where, f"expected UniqueId: or the end of the line after File:, "
                         f"got {clip(rest_words[0])!r}")
        if len(rest_words) > 1:
            fail(where, f"expected the end of the line after UniqueId:, "
                         f"got {clip(rest_words[1])!r}")
        fields["uniqueid"] = rest_words[0][len("UniqueId:"):]
    elif "/nvidia-caps/" in (fields.get("file") or ""):
        fail(where, "expected UniqueId: after File: for a MIG device (nvidia-caps files), "
                     "got the end of the line (cut short?)")
    return fields


_NAME_KEYS = {"name": "name", "type": "type", "count": "count", "index": None, "id": None,
              "file": "file", "cores": "cores", "corecnt": "core_count", "links": "links",
              "flags": "flags", "uniqueid": "uniqueid"}


def _gres_name_fields(rest: str, where: str) -> dict[str, str | None]:
    """``Name=gpu Type=a100 Count=1 Index=0 ID=... File=... Links=...`` into raw values."""
    fields: dict[str, str | None] = {}
    seen: set[str] = set()
    for word in rest.split():
        if word == "(null)":  # Links printed as a bare %s when unset
            continue
        key, sep, value = word.partition("=")
        canonical = key.lower()
        if not sep or canonical not in _NAME_KEYS:
            fail(where, f"expected Key=Value words ({', '.join(sorted(_NAME_KEYS))}) after "
                         f"Gres, got {clip(word)!r}")
        if canonical in seen:
            fail(where, f"expected each key once, got {key}= again")
        seen.add(canonical)
        target = _NAME_KEYS[canonical]
        if target is not None:
            fields[target] = value
    if not fields.get("name"):
        fail(where, "expected Gres Name=<name>, got an empty name")
    fields["name"] = (fields["name"] or "").lower()
    if "count" not in fields:
        fail(where, "expected Count= after Gres Name= (cut short?)")
    return fields


def _null(value: str | None) -> str | None:
    return None if value is None or value in ("(null)", "") else value


def _slurmd_gpu(
    fields: dict[str, str | None], line: int, heading: str | None, where: str
) -> SlurmdGpu:
    count_text = fields.get("count") or ""
    if not COUNT.fullmatch(count_text):
        fail(where, f"expected Count as a whole number, got {count_text!r}")
    core_count: int | None = None
    cc_text = _null(fields.get("core_count"))
    if cc_text is not None:
        if not COUNT.fullmatch(cc_text) or int(cc_text) > MAX_CORES:
            fail(where, f"expected the core count as a whole number up to {MAX_CORES}, "
                         f"got {cc_text!r}")
        core_count = int(cc_text)
    cores = _cpu_ids(_null(fields.get("cores")), core_count, where)

    links: tuple[int, ...] | None = None
    links_text = _null(fields.get("links"))
    if links_text is not None:
        parts = links_text.split(",")
        if not all(_LINK.fullmatch(part) for part in parts):
            fail(where, f"expected Links as comma-separated integers (-1 for the device "
                         f"itself), got {links_text!r}")
        links = tuple(int(part) for part in parts)
        if links.count(-1) > 1:
            fail(where, f"expected at most one -1 (the device itself) in Links, "
                         f"got {links_text!r}")

    flags_text = _null(fields.get("flags"))
    flags = () if flags_text is None else tuple(flags_text.split(","))
    if any(not flag for flag in flags):
        fail(where, f"expected Flags as a comma list, got {flags_text!r}")

    files_text = _null(fields.get("file"))
    files: tuple[str, ...] = () if files_text is None else tuple(_split_files(files_text))
    if any(not path for path in files):
        fail(where, f"expected File as comma-separated paths, got {files_text!r} (an empty "
                     "element: cut short?)")

    unique_id = _null(fields.get("uniqueid"))
    parent = gi = ci = None
    if unique_id is not None and unique_id.startswith("MIG-"):
        legacy = _MIG_LEGACY.fullmatch(unique_id)
        if legacy is not None:
            parent, gi, ci = f"GPU-{legacy.group(1)}", int(legacy.group(2)), int(legacy.group(3))
        elif not _MIG_NEW.fullmatch(unique_id):
            fail(where, f"expected UniqueId as MIG-GPU-<uuid>/<gi>/<ci> or MIG-<uuid>, "
                         f"got {unique_id!r} (cut short?)")
    type_text = _null(fields.get("type"))
    return SlurmdGpu(
        line=line,
        type=type_text,
        count=int(count_text),
        core_count=core_count,
        cores=cores,
        links=links,
        flags=flags,
        files=files,
        unique_id=unique_id,
        parent_uuid=parent,
        gpu_instance=gi,
        compute_instance=ci,
        heading=heading,
        ignored=heading is not None and _IGNORED.search(heading) is not None,
    )


def _cpu_ids(text: str | None, limit: int | None, where: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    below = f"below Cores({limit})" if limit is not None else f"below {MAX_CORES}"
    return tuple(number_list(
        text, where, MAX_CORES if limit is None else limit,
        f"expected the cores as ranges like 0-63,128-191, got {text!r}",
        lambda element: f"expected the core range {element!r} to run upwards",
        lambda hi: f"expected core ids {below}, got {hi} in {text!r}",
        _CORE_RANGE,
    ))


def _split_files(text: str) -> list[str]:
    """Split at the commas outside ``[...]`` (``/dev/nvidia[0,2]`` stays whole)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


# ------------------------------------------------------------------- GRES log errors


@dataclass(frozen=True)
class GresLogError:
    """An error or fatal line of a Slurm daemon log that concerns GRES/GPUs.

    Attributes
    ----------
    line : int
        1-based line in the log.
    where : str
        ``"<source>:<line>"``, for showing to a user.
    timestamp : str or None
        The ``[...]`` prefix without brackets, ``None`` when the line has none.
    level : str
        ``error`` or ``fatal``.
    function : str or None
        The Slurm function that logged it (``_node_config_validate``), when shown.
    message : str
        The text after ``error:``/``fatal:``.
    gres : str or None
        The GRES named as ``gres/<name>`` (``gpu``).
    node : str or None
        The node named in the message (``on node node01``, ``node=node01``).
    core_spec : str or None
        For ``invalid GRES core specification (<spec>)``: the ``Cores=``/``CPUs=`` value
        slurmctld rejected.
    hint : str or None
        What the message usually means, for the messages this module knows.
    """

    line: int
    where: str
    timestamp: str | None
    level: str
    function: str | None
    message: str
    gres: str | None
    node: str | None
    core_spec: str | None
    hint: str | None


_LEVEL = re.compile(r"(?:^|\s)(error|fatal):\s*(.*)$", re.IGNORECASE)
_ABOUT_GRES = re.compile(r"\b(?:gres|gpus?|nvml|rsmi)\b", re.IGNORECASE)
_FUNCTION = re.compile(r"(_?[A-Za-z][A-Za-z0-9_]*):\s")
_GRES_NAME = re.compile(r"\bgres/([A-Za-z][A-Za-z0-9_]*)")
_NODE_IN = re.compile(r"\bon node\s+([A-Za-z0-9_.\-]+)|\bnode=([A-Za-z0-9_.\-]+)"
                      r"|\b[Nn]ode\s+([A-Za-z0-9_.\-]*[0-9][A-Za-z0-9_.\-]*)")
_CORE_SPEC = re.compile(r"invalid GRES core specification\s*\(([^()]*)\)\s+on node\s+"
                        r"([A-Za-z0-9_.\-]+)")
_CORE_SPEC_START = re.compile(r"invalid GRES core specification", re.IGNORECASE)
_HINTS = (
    (_CORE_SPEC_START,
     "gres.conf Cores= (or its deprecated alias CPUs=) names cores the node does not "
     "have: it takes core ids (0 to the node's cores - 1), not logical CPU ids such as "
     "hyperthread siblings; slurmctld does not accept the GPU record as configured"),
    (re.compile(r"count (?:reported|too) low", re.IGNORECASE),
     "slurmd found fewer GPUs than slurm.conf Gres= says (AutoDetect found none, or a "
     "device is missing); slurmctld drains the node"),
    (re.compile(r"autodetect nvml functionality", re.IGNORECASE),
     "this Slurm was built without NVML; AutoDetect=nvml cannot work (list the GPUs in "
     "gres.conf or use a build with NVML)"),
)


def find_gres_errors(text: str, source: str = "<text>") -> list[GresLogError]:
    """Find the ``error:``/``fatal:`` lines of a Slurm log that concern GRES or GPUs.

    A line counts when it has ``error:`` or ``fatal:`` and its message has the word
    ``gres``, ``gpu``, ``gpus``, ``nvml`` or ``rsmi`` (any case; ``gres/gpu`` and
    ``gres.conf`` count, a node named ``gpu07`` does not). They tell why a node's GPUs
    are not registered, e.g. ``error: _node_config_validate: gres/gpu: invalid GRES
    core specification (48-63,176-191) on node node01``. Every such line is returned,
    repeats included (slurmctld logs the error once per record and registration).
    Other lines are not read.

    Parameters
    ----------
    text : str
        The log (slurmctld or slurmd; ``[timestamp]``, syslog or bare lines).
    source : str
        Name used in error locations and in :attr:`GresLogError.where`.

    Returns
    -------
    list of GresLogError
        In log order; ``[]`` when there is none.

    Raises
    ------
    InvalidInputError
        With ``where`` = ``"<source>:<line>"`` for an ``invalid GRES core
        specification`` line that does not go on to ``(<spec>) on node <name>`` (the
        line was cut).
    """
    found: list[GresLogError] = []
    for line_no, where, raw in CommandOutput(text, source).numbered():
        level_match = _LEVEL.search(raw)
        if level_match is None:
            continue
        message = level_match.group(2).strip()
        if not _ABOUT_GRES.search(message):
            continue
        stamp = re.match(r"\s*\[([^\]]*)\]", raw)
        function = _FUNCTION.match(message)
        gres = _GRES_NAME.search(message)
        node_match = _NODE_IN.search(message)
        node = None
        if node_match is not None:
            node = next(group for group in node_match.groups() if group is not None)
            node = node.rstrip(".-") or None
        core_spec = None
        if _CORE_SPEC_START.search(message):
            spec = _CORE_SPEC.search(message)
            if spec is None:
                fail(where, "expected 'invalid GRES core specification (<spec>) on node "
                             f"<name>', got {clip(message, 100)!r} (cut short?)")
            core_spec, node = spec.group(1), spec.group(2)
        hint = next((advice for pattern, advice in _HINTS if pattern.search(message)), None)
        found.append(
            GresLogError(
                line=line_no,
                where=where,
                timestamp=None if stamp is None else stamp.group(1),
                level=level_match.group(1).lower(),
                function=None if function is None else function.group(1),
                message=message,
                gres=None if gres is None else gres.group(1),
                node=node,
                core_spec=core_spec,
                hint=hint,
            )
        )
    return found
