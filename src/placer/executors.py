"""Where independent runs of a study go: local processes or a Ray cluster (SPEC §10).

:func:`run_tasks` runs ``fn(shared, *args)`` for every task and hands each result back as it
arrives. ``shared`` (the cluster, the trace) is sent once: to each worker process when it
starts (``local``), or into Ray's object store once for all tasks (``ray``). A task that raises
is tried once more; if it fails again it is reported by its key in :attr:`TaskFailure`, and the
other tasks' results are kept. ``fn`` must be a module-level function (it is pickled by
reference).

Ray is an optional extra (``pip install 'placer[ray]'``); asking for it without Ray installed
is an :class:`~placer.exceptions.InvalidInputError` naming the extra.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, Optional, Sequence

from placer.exceptions import InvalidInputError

__all__ = ["EXECUTORS", "TaskFailure", "TaskResult", "run_tasks", "require_ray", "progress_bar"]

EXECUTORS = ("local", "ray")
ATTEMPTS = 2
"""A failing task is run this many times in all before it is reported."""


@dataclass(frozen=True)
class TaskFailure:
    """A task that failed on every attempt: its key and the last error, as one line."""

    key: Hashable
    error: str


@dataclass(frozen=True)
class TaskResult:
    """One task's outcome: ``value`` or, when it failed, ``failure``."""

    key: Hashable
    value: Any = None
    failure: Optional[TaskFailure] = None


def progress_bar(total: int, desc: str, enabled: bool = True) -> Any:
    """A tqdm bar over ``total`` runs on stderr, shown only when stderr is a terminal."""
    from tqdm import tqdm

    show = enabled and sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, disable=not show, leave=False)


def require_ray(where: str = "--executor") -> Any:
    """The ``ray`` module, or a clear error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise InvalidInputError(where, "ray is not installed: pip install 'placer[ray]'") from None
    return ray


def run_tasks(
    fn: Callable[..., Any],
    shared: Any,
    tasks: Sequence[tuple[Hashable, tuple[Any, ...]]],
    *,
    executor: str = "local",
    jobs: Optional[int] = None,
    address: Optional[str] = None,
) -> Iterator[TaskResult]:
    """Run ``fn(shared, *args)`` for each ``(key, args)`` of ``tasks``; yield results as they end.

    Parameters
    ----------
    fn : callable
        A module-level function.
    shared : object
        What every task reads (picklable); sent once, not with each task.
    tasks : sequence of (key, args)
        Keys are unique; they name a task in its result and in a failure.
    executor : {"local", "ray"}
        ``local``: worker processes on this machine (``jobs`` of them; 1 runs here, in this
        process). ``ray``: one Ray task each, on the cluster at ``address`` (``ray.init``;
        a local Ray instance when None, with ``jobs`` CPUs when given).
    jobs : int, optional
        Local worker processes (default: the CPU count), or the CPUs of a local Ray.
    address : str, optional
        A running Ray cluster (``ray://host:10001`` or ``auto``); only with ``ray``.

    Yields
    ------
    TaskResult
        In the order tasks end (sort by key for a stable order).

    Raises
    ------
    InvalidInputError
        An unknown executor, a bad ``jobs``, ``address`` without ``ray``, duplicate keys,
        or Ray not installed.
    """
    if executor not in EXECUTORS:
        raise InvalidInputError("--executor", f"expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InvalidInputError("--jobs", f"expected an integer >= 1, got {jobs!r}")
    if address is not None and executor != "ray":
        raise InvalidInputError("--address", "is for --executor ray")
    keys = [key for key, _ in tasks]
    if len(set(keys)) != len(keys):
        raise InvalidInputError("tasks", "task keys must be unique")
    if not tasks:
        return iter(())
    if executor == "ray":
        return _run_ray(require_ray(), fn, shared, tasks, jobs, address)
    return _run_local(fn, shared, tasks, jobs)


# ---------------------------------------------------------------------- local processes

_SHARED: dict[str, Any] = {}


def _init_local(shared: Any) -> None:
    _die_with_parent()
    _SHARED["value"] = shared


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_forked_from = [os.getpid()]  # the pid of the process that forked this one, noted before each fork
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _forked_from.__setitem__(0, os.getpid()))


def _die_with_parent() -> None:
    """End this worker when the process that started it ends, even by ``kill -9``: Linux
    sends it SIGKILL (``PR_SET_PDEATHSIG``); elsewhere a thread watches the parent's pid."""
    parent = _forked_from[0] if _forked_from[0] != os.getpid() else os.getppid()  # spawned: no fork noted
    asked = False
    if sys.platform.startswith("linux"):
        try:
            asked = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            asked = False
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)
    if not asked:
        threading.Thread(target=_exit_without, args=(parent,), daemon=True, name="placer-parent-watch").start()


def _exit_without(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _call_local(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return fn(_SHARED["value"], *args)


def _failure(key: Hashable, error: BaseException) -> TaskResult:
    lines = str(error).strip().splitlines()
    return TaskResult(key, failure=TaskFailure(key, f"{type(error).__name__}: {lines[0] if lines else ''}".strip()))


def _run_local(fn: Callable[..., Any], shared: Any, tasks: Sequence[tuple[Hashable, tuple[Any, ...]]],
               jobs: Optional[int]) -> Iterator[TaskResult]:
    workers = min(jobs or os.cpu_count() or 1, len(tasks))
    if workers == 1:
        for key, args in tasks:
            for attempt in range(ATTEMPTS):
                try:
                    value = fn(shared, *args)
                except Exception as error:  # a failed run is reported, the others go on
                    if attempt == ATTEMPTS - 1:
                        yield _failure(key, error)
                else:
                    yield TaskResult(key, value)
                    break
        return
    with ProcessPoolExecutor(max_workers=workers, initializer=_init_local, initargs=(shared,)) as pool:
        attempts = {key: 1 for key, _ in tasks}
        arguments = dict(tasks)
        pending: dict[Future[Any], Hashable] = {pool.submit(_call_local, fn, args): key for key, args in tasks}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    key = pending.pop(future)
                    error = future.exception()
                    if error is None:
                        yield TaskResult(key, future.result())
                    elif attempts[key] < ATTEMPTS:
                        attempts[key] += 1
                        pending[pool.submit(_call_local, fn, arguments[key])] = key
                    else:
                        yield _failure(key, error)
        finally:
            for future in pending:
                future.cancel()


# ---------------------------------------------------------------------- Ray

def _run_ray(ray: Any, fn: Callable[..., Any], shared: Any, tasks: Sequence[tuple[Hashable, tuple[Any, ...]]],
             jobs: Optional[int], address: Optional[str]) -> Iterator[TaskResult]:
    started_here = not ray.is_initialized()
    if started_here:
        options: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False,
                                   "configure_logging": False}
        if address is None and jobs is not None:
            options["num_cpus"] = jobs
        ray.init(**options)
    try:
        remote = ray.remote(max_retries=ATTEMPTS - 1, retry_exceptions=True)(_call_ray)
        shared_ref = ray.put(shared)  # once, in the object store
        # Inside a list the reference reaches the task unresolved: each worker process fetches
        # and unpickles the shared data once (_worker_shared), not once per task.
        refs = {remote.remote(fn, [shared_ref], args): key for key, args in tasks}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for ref in ready:
                key = refs.pop(ref)
                try:
                    yield TaskResult(key, ray.get(ref))
                except Exception as error:  # RayTaskError wraps the task's own exception
                    cause = getattr(error, "cause", None) or error
                    yield _failure(key, cause)
    finally:
        if started_here:
            ray.shutdown()


_WORKER_SHARED: dict[str, Any] = {}


def _worker_shared(ref: Any) -> Any:
    """The shared data of a sweep in this Ray worker process, fetched once."""
    import ray

    key = ref.hex()
    if key not in _WORKER_SHARED:
        _WORKER_SHARED.clear()  # one sweep at a time
        _WORKER_SHARED[key] = ray.get(ref)
    return _WORKER_SHARED[key]


def _call_ray(fn: Callable[..., Any], shared_ref: list[Any], args: tuple[Any, ...]) -> Any:
    return fn(_worker_shared(shared_ref[0]), *args)
