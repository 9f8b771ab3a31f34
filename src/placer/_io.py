"""File helpers: reading text with located errors, JSON text, all-or-nothing writes and the
data files bundled with the package."""
from __future__ import annotations

import gzip
import json
import os
import stat
import sys
import tempfile
import zlib
from importlib import resources
from pathlib import Path
from typing import Any, Union

from placer.exceptions import InvalidInputError

__all__ = [
    "STDIN",
    "bundled_file",
    "dump_json",
    "dump_yaml",
    "read_text",
    "read_utf8",
    "source_name",
    "write_bytes_atomic",
    "write_text_atomic",
]

PathLike = Union[str, "os.PathLike[str]"]

STDIN = "-"
"""The file name that stands for standard input (read once, then the same bytes again)."""
STDIN_NAME = "<stdin>"
"""How errors name standard input."""
_stdin_read: tuple[Any, bytes] | None = None  # (sys.stdin, its bytes) once read


def source_name(path: PathLike) -> str:
    """How errors name a file: its path, or ``<stdin>`` for :data:`STDIN`."""
    name = os.fspath(path)
    return STDIN_NAME if name == STDIN else name


def _read_stdin() -> bytes:
    """Standard input's bytes: a command reading ``-`` twice (a snapshot loaded again for
    its MIG device names) gets the same document both times."""
    global _stdin_read
    stream = sys.stdin
    if stream is None:
        raise InvalidInputError(STDIN_NAME, "no standard input to read")
    if _stdin_read is None or _stdin_read[0] is not stream:
        binary = getattr(stream, "buffer", None)  # absent from a text stream put in its place
        _stdin_read = (stream, binary.read() if binary is not None else stream.read().encode("utf-8"))
    return _stdin_read[1]


def read_text(path: PathLike, source: str | None = None) -> str:
    """The UTF-8 text of a file (a leading byte-order mark dropped).

    Raises :class:`InvalidInputError` naming the path when the file is missing or
    unreadable, and ``source:line`` (``source`` defaults to the path) for bytes that are
    not UTF-8.
    """
    return read_utf8(path, source).decode("utf-8")


def read_utf8(path: PathLike, source: str | None = None) -> bytes:
    """The bytes of a file that holds UTF-8 text (a leading byte-order mark dropped); a
    name ending in ``.gz`` is read through gzip, :data:`STDIN` (``-``) is standard input.

    Raises as :func:`read_text` does (standard input named ``<stdin>``).
    """
    given = os.fspath(path)
    name = source_name(given)
    try:
        if given == STDIN:
            raw = _read_stdin()
        elif name.endswith(".gz"):
            with gzip.open(name, "rb") as f:
                raw = f.read()
        else:
            with open(name, "rb") as f:
                raw = f.read()
    except FileNotFoundError:
        raise InvalidInputError(name, "no such file") from None
    except IsADirectoryError:
        raise InvalidInputError(name, "expected a file, got a directory") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise InvalidInputError(name, f"not a complete gzip file: {e}") from None
    except OSError as e:
        raise InvalidInputError(name, f"cannot read the file: {e.strerror or e}") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw.count(b"\n", 0, e.start) + 1
            raise InvalidInputError(
                f"{source or name}:{line}", f"expected UTF-8 text, got byte 0x{raw[e.start]:02x}"
            ) from None
    return raw


def bundled_file(*parts: str) -> Path | None:
    """The path of a data file bundled with placer, ``placer/data/<parts...>``.

    Parameters
    ----------
    *parts : str
        The path below the package's ``data`` directory, one name per part
        (``"openb", "openb_pod_list_default.csv"``).

    Returns
    -------
    pathlib.Path or None
        ``None`` when no such file is bundled, or a part holds a path separator.
    """
    if any(not part or os.sep in part or "/" in part for part in parts):
        return None
    entry = resources.files("placer").joinpath("data", *parts)
    return Path(str(entry)) if entry.is_file() else None


def dump_json(obj: Any) -> str:
    """Return ``obj`` as JSON text indented by 2, ending in a newline."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def dump_yaml(obj: Any) -> str:
    """Return ``obj`` (plain JSON data) as a YAML document in block style, keys in their
    order, ending in a newline."""
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _is_special(path: str) -> bool:
    """Whether ``path`` exists and is not a regular file (a device, a pipe, a socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one.

    The text goes to a temporary file in the same directory, is flushed to disk and then
    renamed over ``path``. On any failure the temporary file is removed and ``path`` is
    left as it was. A device or pipe (``/dev/stdout``) is written in place.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    text : str
        Its new content (written as is, no newline translation).
    encoding : str
        Text encoding.

    Raises
    ------
    OSError
        If the directory is missing or not writable, or the rename fails.
    """
    write_bytes_atomic(path, text.encode(encoding))


def write_bytes_atomic(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` all or nothing, as :func:`write_text_atomic` does.

    A ``path`` that is no regular file (``/dev/stdout``, a named pipe, ``/dev/full``) is
    written in place: renaming over it would replace the device with a file.
    """
    target = os.fspath(path)
    if _is_special(target):
        with open(target, "wb") as f:
            f.write(data)
            f.flush()
        return
    directory = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
