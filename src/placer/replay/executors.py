"""Where independent runs of a study go: local processes or a Ray cluster (SPEC §10).

:func:`run_tasks` runs ``fn(shared, *args)`` for every task and hands each result back as it
arrives. ``shared`` (the cluster, the trace) is sent once: to each worker process when it
starts (``local``), or into Ray's object store once for all tasks (``ray``). A task that raises
is tried once more; if it fails again it is reported by its key in :attr:`TaskFailure`, and the
other tasks' results are kept. ``fn`` must be a module-level function (it is pickled by
reference).

Ray is an optional extra (``pip install 'placer[ray]'``, which brings Ray's client for
``ray://`` addresses); asking for it without Ray (or a ``ray://`` address without the client)
installed is an :class:`~placer.exceptions.InvalidInputError` naming the extra. A cluster that
does not answer within ``connect_timeout`` seconds is one too, Ray's retry log silenced.

Ctrl-C ends the runs: local worker processes ignore it and are stopped by the caller's
process, and a grid runner that keeps what finished raises :class:`RunsInterrupted`.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import sys
import threading
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Generator, Hashable, Iterator, Optional, Sequence

from placer.exceptions import InvalidInputError

__all__ = ["EXECUTORS", "DEFAULT_CONNECT_TIMEOUT_S", "TaskFailure", "TaskResult", "RunsInterrupted", "run_tasks",
           "grid_results", "local_workers", "interrupts_deferred", "require_ray", "check_ray_address", "progress_bar"]

EXECUTORS = ("local", "ray")
ATTEMPTS = 2
"""A failing task is run this many times in all before it is reported."""
DEFAULT_CONNECT_TIMEOUT_S = 30.0
"""How long a Ray cluster at ``--address`` has to answer."""
_RAY_CLIENT_SCHEME = "ray://"


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


class RunsInterrupted(KeyboardInterrupt):
    """Ctrl-C during a grid of runs, raised by the grid's runner once it has kept what finished.

    Parameters
    ----------
    kept : int
        Runs whose results are kept (written, or in ``results``).
    total : int
        Runs of the whole grid.
    results : sequence, optional
        The finished runs' results, in grid order, for a caller that writes them.
    """

    def __init__(self, kept: int, total: int, results: Sequence[Any] = ()) -> None:
        super().__init__(f"{kept} of {total} runs kept")
        self.kept = kept
        self.total = total
        self.results = list(results)


def progress_bar(total: int, desc: str, enabled: bool = True, **options: Any) -> Any:
    """A tqdm bar over ``total`` runs on stderr (with its rate and time left), shown only when
    stderr is a terminal; ``options`` go to tqdm (``unit``, ``bar_format``, ``position``)."""
    from tqdm import tqdm

    show = enabled and sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    settings: dict[str, Any] = {"unit": "run", "leave": False, **options}
    return tqdm(total=total, desc=desc, file=sys.stderr, disable=not show, **settings)


def require_ray(where: str = "--executor", address: Optional[str] = None) -> Any:
    """The ``ray`` module, or a clear error naming the extra that installs it (also when a
    ``ray://`` ``address`` needs Ray's client and it is missing)."""
    try:
        import ray
    except ImportError:
        raise InvalidInputError(where, "ray is not installed: pip install 'placer[ray]'") from None
    if address is not None and address.startswith(_RAY_CLIENT_SCHEME):
        try:
            import grpc  # noqa: F401  (what Ray's client needs beyond Ray)
        except ImportError:
            raise InvalidInputError(f"--address {address}", "Ray's client is not installed: "
                                    "pip install 'placer[ray]' (or 'ray[client]')") from None
    return ray


def _unanswered(address: str, timeout: float) -> InvalidInputError:
    return InvalidInputError(f"--address {address}", f"no Ray cluster answered within {timeout:g} s")


def check_ray_address(address: Optional[str], timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """Wait until something listens at a Ray ``address`` (``ray://host:port`` or ``host:port``),
    trying a TCP connection until ``timeout`` seconds have passed.

    ``None`` and addresses without a port (``auto``, ``local``) are Ray's to resolve and are
    not checked.

    Raises
    ------
    InvalidInputError
        Nothing answered in time, or a port that is not a number.
    """
    if address is None:
        return
    host, colon, port_text = address.removeprefix(_RAY_CLIENT_SCHEME).rpartition(":")
    if not colon:
        return
    if not port_text.isdigit():
        raise InvalidInputError("--address", f"expected ray://host:port or host:port, got {address!r}")
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host.strip("[]"), int(port_text)), timeout=max(left, 0.01)):
                return
        except OSError:
            if left <= 0:
                raise _unanswered(address, timeout) from None
            time.sleep(min(0.2, max(left, 0.0)))


def run_tasks(
    fn: Callable[..., Any],
    shared: Any,
    tasks: Sequence[tuple[Hashable, tuple[Any, ...]]],
    *,
    executor: str = "local",
    jobs: Optional[int] = None,
    address: Optional[str] = None,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
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
    connect_timeout : float
        Seconds the cluster at ``address`` has to answer.

    Yields
    ------
    TaskResult
        In the order tasks end (sort by key for a stable order).

    Raises
    ------
    InvalidInputError
        An unknown executor, a bad ``jobs``, ``address`` without ``ray``, duplicate keys,
        Ray (or its client, for ``ray://``) not installed, or no cluster answering at ``address``.
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
        return _run_ray(require_ray(address=address), fn, shared, tasks, jobs, address, connect_timeout)
    return _run_local(fn, shared, tasks, jobs)


def grid_results(
    fn: Callable[..., Any],
    shared: Any,
    tasks: Sequence[tuple[Hashable, tuple[Any, ...]]],
    desc: str,
    progress: bool = True,
    **placement: Any,
) -> Iterator[TaskResult]:
    """:func:`run_tasks` under a :func:`progress_bar` over the tasks (its time left is the
    grid's ETA); ``placement`` is ``executor``, ``jobs``, ``address``, ``connect_timeout``.
    When the caller stops reading (Ctrl-C), the runs under way are stopped."""
    results = run_tasks(fn, shared, tasks, **placement)
    with progress_bar(len(tasks), desc, progress) as bar:
        try:
            for result in results:
                bar.update(1)
                yield result
        finally:
            if isinstance(results, Generator):
                results.close()


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C back until the block has ended (files it writes together stay together),
    then raise it as the handler before would have; outside the main thread, nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)


def local_workers(jobs: Optional[int], tasks: int) -> int:
    """The worker processes :func:`run_tasks` starts for ``tasks`` tasks (1: none, it runs them here)."""
    return min(jobs or os.cpu_count() or 1, tasks)


# ---------------------------------------------------------------------- local processes

_SHARED: dict[str, Any] = {}


def _init_local(shared: Any) -> None:
    # Ctrl-C reaches the whole process group: the parent stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
    if local_workers(jobs, len(tasks)) == 1:
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
    pool = ProcessPoolExecutor(max_workers=local_workers(jobs, len(tasks)), initializer=_init_local, initargs=(shared,))
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
        # Interrupted, or the caller stopped reading: the runs under way are not waited for.
        if pending:
            _stop_workers(pool)
        pool.shutdown(wait=not pending, cancel_futures=True)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


# ---------------------------------------------------------------------- Ray

@contextmanager
def _ray_client_attempts_within(seconds: float) -> Iterator[None]:
    """Ray's client makes 3 attempts to connect, of 5, 10 and 15 s (``INITIAL_TIMEOUT_SEC``
    and ``MAX_TIMEOUT_SEC`` of ``ray.util.client.worker``, read when it connects): here each
    takes a third of ``seconds``."""
    try:
        from ray.util.client import worker
    except ImportError:
        yield
        return
    names = [name for name in ("INITIAL_TIMEOUT_SEC", "MAX_TIMEOUT_SEC") if hasattr(worker, name)]
    saved = {name: getattr(worker, name) for name in names}
    for name in names:
        setattr(worker, name, max(seconds / 3, 0.1))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(worker, name, value)


def _connect_ray(ray: Any, jobs: Optional[int], address: Optional[str], timeout: float) -> None:
    """``ray.init`` on ``address`` once it answers, all within ``timeout`` seconds, Ray's own
    retry log and warnings silenced."""
    started = time.monotonic()
    check_ray_address(address, timeout)
    options: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False,
                               "configure_logging": False}
    if address is None and jobs is not None:
        options["num_cpus"] = jobs
    ray_log = logging.getLogger("ray")
    level = ray_log.level
    ray_log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), _ray_client_attempts_within(timeout - (time.monotonic() - started)):
            warnings.simplefilter("ignore")
            ray.init(**options)
    except ConnectionError:
        ray.shutdown()  # a failed ray:// connection leaves Ray's client mode on in this process
        if address is None:
            raise
        raise _unanswered(address, timeout) from None
    finally:
        ray_log.setLevel(level)


def _run_ray(ray: Any, fn: Callable[..., Any], shared: Any, tasks: Sequence[tuple[Hashable, tuple[Any, ...]]],
             jobs: Optional[int], address: Optional[str], connect_timeout: float) -> Iterator[TaskResult]:
    started_here = not ray.is_initialized()
    if started_here:
        _connect_ray(ray, jobs, address, connect_timeout)
    refs: dict[Any, Hashable] = {}
    try:
        remote = ray.remote(max_retries=ATTEMPTS - 1, retry_exceptions=True)(_call_ray)
        shared_ref = ray.put(shared)  # once, in the object store
        # Inside a list the reference reaches the task unresolved: each worker process fetches
        # and unpickles the shared data once (_worker_shared), not once per task.
        refs.update({remote.remote(fn, [shared_ref], args): key for key, args in tasks})
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
        for ref in refs:  # interrupted, or the caller stopped reading
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already ended, or the cluster went away: nothing left to stop
                pass
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
