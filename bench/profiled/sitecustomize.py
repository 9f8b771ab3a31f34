"""Profiles a whole Python process, every thread, when ``PLACER_BENCH_PROFILE`` names a file:
imported at start by a Python whose ``PYTHONPATH`` has this folder first
(``bench_kube_extender.py --profile``: ``placer serve``, whose verbs run in worker threads).

Each thread gets its own ``cProfile.Profile``; at exit their stats are merged and written to
the file (``pstats`` format)."""
from __future__ import annotations

import atexit
import cProfile
import os
import pstats
import threading

_PATH = os.environ.get("PLACER_BENCH_PROFILE")

if _PATH:
    _profiles: list[cProfile.Profile] = []
    _thread_run = threading.Thread.run

    def _profiled_run(self: threading.Thread) -> None:
        profile = cProfile.Profile()
        _profiles.append(profile)
        profile.enable()
        try:
            _thread_run(self)
        finally:
            profile.disable()

    def _write() -> None:
        main.disable()
        stats = pstats.Stats(main)
        for profile in _profiles[1:]:
            try:
                stats.add(profile)
            except (TypeError, ValueError):  # a thread that recorded nothing
                pass
        stats.dump_stats(_PATH)

    threading.Thread.run = _profiled_run  # type: ignore[method-assign]
    main = cProfile.Profile()
    _profiles.append(main)
    atexit.register(_write)
    main.enable()
