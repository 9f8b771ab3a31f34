"""``placer serve``: the HTTP layer and the kube-scheduler extender service it runs.
"""
from __future__ import annotations

# The names of the module this package replaced (placer.serve), kept where users import them.
from placer.serve.app import (  # noqa: F401
    VERBS,
    OPEN_PATHS,
    MAX_STALENESS_S,
    DEFAULT_MAX_BODY_BYTES,
    Limits,
    check_certificates,
    create_app,
    create_probe_app,
    exposure_warning,
    is_loopback,
    listening_socket,
    not_ready,
    read_token,
    readiness,
    require_server,
    server,
    run,
)

__all__ = ['VERBS', 'OPEN_PATHS', 'MAX_STALENESS_S', 'DEFAULT_MAX_BODY_BYTES', 'Limits', 'check_certificates', 'create_app', 'create_probe_app', 'exposure_warning', 'is_loopback', 'listening_socket', 'not_ready', 'read_token', 'readiness', 'require_server', 'server', 'run']
