"""``placer serve``: the extender verbs over HTTP (Starlette on uvicorn), with health and metrics.

Routes: ``POST /filter``, ``/prioritize``, ``/preempt``, ``/bind`` (kube-scheduler's extender
protocol, :mod:`placer.adapters.kube_extender`), ``GET /livez`` (the event loop answers),
``GET /readyz`` (kube's convention: 200 ``ok``, or 503 with a ``[-]check failed: why`` line
per failing check: a kind's watch failing or not listed yet, the state older than
``max_staleness_s``), ``GET /healthz`` (the state in JSON, always 200, as before: it says
nothing of the watch) and ``GET /metrics`` (Prometheus text: requests and latency per verb,
filter's reasons per node turned away, the state's gauges, the watch's errors and the
state's age).

While ``/readyz`` fails, the verbs do not decide on the state: ``filter`` and ``bind``
answer 200 with ``Error`` (kube-scheduler fails the pod's scheduling cycle, unless the
extender is ``ignorable``), ``prioritize`` and ``preempt``, whose results have no ``Error``
field, answer 503 (kube-scheduler ignores the scores, and preempts nothing).
A body that does not decode is answered 400 with the error in the result's ``Error``
field; a fault of placer's own is answered 500 the same way and logged with its
traceback. Either way nothing changed and the service keeps serving. Requests are served
one at a time on the event loop (the state is one cluster); watch events arrive from
other threads through a queue and are applied before the next verb.
"""
from __future__ import annotations

import logging
import queue
from collections import Counter
import time
from typing import Any, Awaitable, Callable

import msgspec

from placer.adapters.kube_live import WATCH_TIMEOUT_S, WatchEvent, WatchHealth
from placer.exceptions import InvalidInputError
from placer.adapters.kube_extender import Extender, RecordingBinder, RefusingBinder, StateNotCurrent, reason_label
from placer.schema.extender import (
    MAX_BODY_BYTES,
    decode_binding_args,
    decode_filter_args,
    decode_preemption_args,
)

__all__ = ["VERBS", "MAX_STALENESS_S", "create_app", "readiness", "not_ready", "require_server", "run"]

VERBS = ("filter", "prioritize", "preempt", "bind")

_log = logging.getLogger("placer.serve")
MAX_STALENESS_S = 2.0 * WATCH_TIMEOUT_S
"""Default bound of the state's age for ``/readyz`` (``--max-staleness``): a quiet
cluster's healthy watch answers at least every
:data:`~placer.adapters.kube_live.WATCH_TIMEOUT_S`."""
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def require_server() -> None:
    """Refuse, in one line, when the HTTP server packages are missing."""
    try:
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise InvalidInputError("serve", "the HTTP server is not installed: pip install 'placer[serve]'") from None


class _Metrics:
    """The service's Prometheus metrics, in a registry of its own."""

    def __init__(self, extender: Extender, watch: WatchHealth | None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "placer_extender_requests", "Extender requests by verb and HTTP status", ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "placer_extender_request_seconds", "Time to answer an extender request", ["verb"],
            buckets=_LATENCY_BUCKETS, registry=self.registry,
        )
        self.pending_reasons = Counter(
            "placer_extender_filter_failed_nodes", "Nodes filter turned a pod away from, by placer's reason "
            "(names left out)",
            ["reason"], registry=self.registry,
        )

        class _State:
            def collect(self) -> Any:
                for name, value in extender.state().items():
                    yield GaugeMetricFamily(f"placer_extender_{name}", f"The extender's {name.replace('_', ' ')}",
                                            value=value)

        self.registry.register(_State())  # type: ignore[arg-type]
        if watch is None:
            return

        class _Watch:
            def collect(self) -> Any:
                errors = CounterMetricFamily("placer_extender_watch_errors", "Failed lists and watches of the "
                                             "API server, by kind", labels=["kind"])
                for kind, count in watch.errors().items():
                    errors.add_metric([kind], count)
                yield errors
                yield GaugeMetricFamily("placer_extender_state_age_seconds", "Seconds since the API server's "
                                        "last news of the least recently heard kind", value=watch.age())

        self.registry.register(_Watch())  # type: ignore[arg-type]


def readiness(watch: WatchHealth | None, max_staleness_s: float) -> dict[str, str]:
    """The checks of ``/readyz``, each with why it fails ("" when it passes): per kind
    watched, ``watch-<kind>s`` (its watch failing, or not listed yet), and ``state-age``
    (the state older than ``max_staleness_s``). No checks without a watch: the state is
    what was given."""
    if watch is None:
        return {}
    checks = {f"watch-{kind.lower()}s": why for kind, why in watch.problems().items()}
    age = watch.age()
    checks["state-age"] = (
        f"the API server's last news is {age:.0f} s old, more than --max-staleness {max_staleness_s:g} s"
        if age > max_staleness_s else ""
    )
    return checks


def not_ready(watch: WatchHealth | None, max_staleness_s: float) -> str:
    """The failing checks of :func:`readiness` in one line ("" when ready)."""
    return "; ".join(f"{name}: {why}" for name, why in readiness(watch, max_staleness_s).items() if why)


def _binds(extender: Extender) -> str:
    """How binds are answered: ``posted`` (to the API server), ``dry-run`` (recorded, not
    posted) or ``refused`` (no API server and no ``--dry-run``)."""
    if isinstance(extender.binder, RefusingBinder):
        return "refused"
    return "dry-run" if isinstance(extender.binder, RecordingBinder) else "posted"


def create_app(
    extender: Extender, events: "queue.Queue[WatchEvent] | None" = None, *, watch: WatchHealth | None = None,
    max_staleness_s: float = MAX_STALENESS_S,
) -> Any:
    """The ASGI application of ``placer serve``.

    Parameters
    ----------
    extender : Extender
        The state and verbs.
    events : queue.Queue, optional
        Watch events put by other threads; drained before each verb.
    watch : WatchHealth, optional
        How the watch that puts ``events`` is doing, for ``/readyz`` and ``/metrics``.
    max_staleness_s : float
        ``/readyz`` fails when the watch's last news is older than this.

    With ``watch``, the extender decides only while ``/readyz`` passes (its ``not_current``).
    """
    require_server()
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    metrics = _Metrics(extender, watch)
    if watch is not None:
        extender.not_current = lambda: not_ready(watch, max_staleness_s)
    encoder = msgspec.json.Encoder()

    def json_response(data: Any, status: int = 200) -> Response:
        return Response(encoder.encode(data), status_code=status, media_type="application/json")

    def drain() -> None:
        if events is None:
            return
        got: list[WatchEvent] = []
        while True:
            try:
                got.append(events.get_nowait())
            except queue.Empty:
                break
        extender.queue(got)

    def verb(name: str, answer: Callable[[bytes, str], Any]) -> Callable[[Request], Awaitable[Response]]:
        source = f"POST /{name}"

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            status = 200
            try:
                length = request.headers.get("content-length")
                if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
                    raise InvalidInputError(source, f"body of {length} bytes, more than the {MAX_BODY_BYTES} read")
                raw = await request.body()
                drain()
                data = answer(raw, source)
            except InvalidInputError as e:
                status, data = 400, {"Error": str(e)}
            except StateNotCurrent as e:
                status, data = 503, {"Error": str(e)}
            except Exception as e:  # a fault of placer's: answer, log, keep serving
                _log.exception("%s failed", source)
                status, data = 500, {"Error": f"{source}: internal error: {type(e).__name__}: {e}"}
            metrics.requests.labels(name, str(status)).inc()
            metrics.latency.labels(name).observe(time.perf_counter() - started)
            return json_response(data, status)

        return endpoint

    def filter_answer(raw: bytes, source: str) -> Any:
        result = extender.filter(decode_filter_args(raw, source), source)
        counts = Counter(result["FailedNodes"].values())
        counts.update(result["FailedAndUnresolvableNodes"].values())
        for reason, count in counts.items():
            metrics.pending_reasons.labels(reason_label(reason)).inc(count)
        return result

    routes = [
        Route("/filter", verb("filter", filter_answer), methods=["POST"]),
        Route("/prioritize", verb("prioritize", lambda raw, s: extender.prioritize(decode_filter_args(raw, s), s)),
              methods=["POST"]),
        Route("/preempt", verb("preempt", lambda raw, s: extender.preempt(decode_preemption_args(raw, s), s)),
              methods=["POST"]),
        Route("/bind", verb("bind", lambda raw, s: extender.bind(decode_binding_args(raw, s), s)), methods=["POST"]),
    ]

    async def healthz(request: Request) -> Response:
        drain()
        extender.sync()
        return json_response({"status": "ok", **extender.state(), "binds": _binds(extender)})

    async def livez(request: Request) -> Response:
        return Response("ok", media_type="text/plain")

    async def readyz(request: Request) -> Response:
        checks = readiness(watch, max_staleness_s)
        ready = not any(checks.values())
        if ready and "verbose" not in request.query_params:
            return Response("ok", media_type="text/plain")
        lines = [f"[-]{name} failed: {why}" if why else f"[+]{name} ok" for name, why in checks.items()]
        lines.append(f"[+]binds ok: {_binds(extender)}")
        lines.append(f"readyz check {'passed' if ready else 'failed'}")
        return Response("\n".join(lines) + "\n", status_code=200 if ready else 503, media_type="text/plain")

    async def prometheus(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    routes.append(Route("/healthz", healthz, methods=["GET"]))
    routes.append(Route("/livez", livez, methods=["GET"]))
    routes.append(Route("/readyz", readyz, methods=["GET"]))
    routes.append(Route("/metrics", prometheus, methods=["GET"]))
    return Starlette(routes=routes)


def run(
    app: Any, host: str, port: int, *, ready: Callable[[int], None] | None = None,
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve ``app`` until interrupted; ``ready`` gets the port once it listens (port 0
    picks a free one). ``tls``: a certificate and its key (PEM files) to serve HTTPS, as
    kube-scheduler's ``enableHTTPS: true`` expects.

    Raises
    ------
    InvalidInputError
        At ``--port`` when the address cannot be listened on; at ``--tls-cert`` when the
        certificate and key cannot be loaded.
    """
    import socket
    import ssl

    import uvicorn

    if tls is not None:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(*tls)
        except (OSError, ssl.SSLError) as e:
            raise InvalidInputError("--tls-cert", f"cannot load {tls[0]} with key {tls[1]}: {e}") from None
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise InvalidInputError("--port", f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)  # connections wait in the backlog until the server accepts them
    if ready is not None:
        ready(sock.getsockname()[1])
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off",
        ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None,
    )
    uvicorn.Server(config).run(sockets=[sock])
