"""Profiles a whole Python process, every thread, when ``PLACER_BENCH_PROFILE`` names a file:
imported at start by a Python whose ``PYTHONPATH`` has this folder first
(``bench_kube_extender.py --profile``: ``placer serve``, whose verbs run in worker threads).

Each thread gets its own ``cProfile.Profile``; on ``SIGUSR1`` their stats so far are merged
and written to the file (``pstats`` format), then the process carries on (at exit is too late:
a process stopped by a signal may not get there)."""
from __future__ import annotations

import cProfile
import os
import pstats
import signal
import threading

_PATH = os.environ.get("PLACER_BENCH_PROFILE")

if _PATH:
    _profiles: list[cProfile.Profile] = []
    _bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def _profiled_bootstrap(self: threading.Thread) -> None:
        # every thread starts here, whatever its class's run (anyio's worker threads have their own)
        profile = cProfile.Profile()
        _profiles.append(profile)
        profile.enable()
        try:
            _bootstrap(self)
        finally:
            profile.disable()

    def _write(signum: int, frame: object) -> None:
        stats = pstats.Stats()
        for profile in _profiles:
            try:
                stats.add(profile)
            except (TypeError, ValueError):  # a thread that recorded nothing
                pass
        stats.dump_stats(_PATH + ".part")
        os.replace(_PATH + ".part", _PATH)  # whole when it appears

    threading.Thread._bootstrap_inner = _profiled_bootstrap  # type: ignore[attr-defined]
    main = cProfile.Profile()
    _profiles.append(main)
    signal.signal(signal.SIGUSR1, _write)
    main.enable()
