"""File helpers: reading text with located errors, JSON text, all-or-nothing writes and the
data files bundled with the package."""
from __future__ import annotations

import errno
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
    "remove_stale",
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
    except InvalidInputError:
        raise
    except ValueError:  # open() refuses a NUL in the name
        raise InvalidInputError(repr(name), "no such file: a file name holds no NUL character") from None
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


def remove_stale(path: PathLike) -> bool:
    """Remove an output an earlier run left that this run does not write (a plot now
    skipped), so that no old file sits beside new ones; whether there was one."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


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

    On Linux the text goes to an unnamed file in the same directory (``O_TMPFILE``), is
    flushed to disk and only then given a name: a process killed while writing (even by
    ``SIGKILL``) leaves nothing behind. Where ``O_TMPFILE`` is missing (another system, a
    filesystem without it) a hidden temporary file is written, flushed and renamed over
    ``path``, and removed on any failure Python sees. A device or pipe (``/dev/stdout``) is
    written in place.

    Replacing an existing file needs a name to rename from: the complete file is linked as a
    hidden ``.<name>.<random>.tmp`` beside it and renamed over ``path`` at once; a kill
    between those two calls (microseconds) leaves that complete copy, never a partial one.

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
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    if not _write_unnamed(directory, target, data, mode):
        _write_named(directory, target, data, mode)
    _sync_directory(directory)


def _write_all(fd: int, data: bytes, mode: int) -> None:
    """``data`` into the open file ``fd``, flushed to disk, with permissions ``mode``."""
    with os.fdopen(fd, "wb", closefd=False) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.fchmod(fd, mode)


def _hidden_name(directory: str, target: str) -> str:
    return os.path.join(directory, f".{os.path.basename(target)}.{os.urandom(6).hex()}.tmp")


def _write_unnamed(directory: str, target: str, data: bytes, mode: int) -> bool:
    """Write through an ``O_TMPFILE`` file named only once complete; False when the system
    or the directory's filesystem has no ``O_TMPFILE`` (nothing was written)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return False
    try:
        fd = os.open(directory, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):  # EISDIR: a kernel before 3.11
            return False
        raise
    try:
        _write_all(fd, data, mode)
        # linkat(AT_SYMLINK_FOLLOW) names the open file; Python calls linkat only with a dir fd
        unnamed, parent = f"/proc/self/fd/{fd}", os.open(directory, os.O_RDONLY)
        try:
            try:
                os.link(unnamed, os.path.basename(target), dst_dir_fd=parent)
                return True
            except FileExistsError:
                pass
            while True:
                hidden = _hidden_name(directory, target)
                try:
                    os.link(unnamed, os.path.basename(hidden), dst_dir_fd=parent)
                    break
                except FileExistsError:
                    continue
        finally:
            os.close(parent)
        try:
            os.replace(hidden, target)
        except BaseException:
            _remove(hidden)
            raise
        return True
    finally:
        os.close(fd)


def _write_named(directory: str, target: str, data: bytes, mode: int) -> None:
    """Write a hidden temporary file and rename it over ``target``."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        try:
            _write_all(fd, data, mode)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _sync_directory(directory: str) -> None:
    """Flush the directory's entry of a new name to disk (where the system allows it)."""
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
