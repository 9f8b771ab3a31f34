"""``placer serve``: the extender verbs over HTTP (Starlette on uvicorn), with health and metrics.

Routes: ``POST /filter``, ``/prioritize``, ``/preempt``, ``/bind`` (kube-scheduler's extender
protocol, :mod:`placer.serve.extender`), ``GET /livez`` (the event loop answers),
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
traceback. Either way nothing changed and the service keeps serving.

The event loop only reads requests and writes answers. Each verb's decoding and decision
run in a worker thread, one verb at a time (the state is one cluster; an ``asyncio.Lock``
serialises them). A bind's Binding call (the API server's round trip) runs beside the state,
the pod's GPUs already held, and the bind is finished holding the state again
(:meth:`~placer.serve.extender.Extender.begin_bind`, ``finish_bind``): kube-scheduler's next
pod is filtered meanwhile. A body over 1 MiB is decoded first, in a worker thread
of its own beside the state (one such body at a time). So the probes answer while a verb
works: ``/healthz`` (``busy``: the verb) and ``/metrics`` then give the state as they last
read it. Watch events arrive from other threads through a queue and are applied before the
next verb, and every :data:`IDLE_APPLY_S` while none comes (from the first request on).
:class:`Limits` bounds what one client can hold: the body (413 once it passes the cap, read
chunk by chunk, ``Content-Length`` or chunked), the time to send the headers and the body,
the connections; every accepted connection has ``TCP_NODELAY``.

Authentication (docs/extender.md, "Security model"): with a client CA (``--client-ca``)
the TLS handshake refuses every connection without a certificate that CA signed; with a
token (``--token-file``) every route but the GET probes and metrics (:data:`OPEN_PATHS`)
needs ``Authorization: Bearer <token>``. :func:`exposure_warning` refuses to listen beyond
loopback without either; :func:`check_certificates` refuses expired and weak certificates.
Under ``--client-ca``, kubelet's ``httpGet`` probes (which present no certificate) go to
``--probe-port``: :func:`create_probe_app`, served by :func:`run` in plain HTTP beside the
main server.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime
import hmac
import ipaddress
import logging
import queue
import socket
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec

from placer.adapters.kubernetes.live import WATCH_TIMEOUT_S, WatchEvent, WatchHealth
from placer.exceptions import InvalidInputError
from placer.serve.extender import (
    Extender, PendingBind, RecordingBinder, RefusingBinder, StateNotCurrent, reason_label,
)
from placer.schema.extender import (
    decode_binding_args,
    decode_filter_args,
    decode_preemption_args,
)

__all__ = [
    "VERBS", "OPEN_PATHS", "MAX_STALENESS_S", "DEFAULT_MAX_BODY_BYTES", "Limits", "check_certificates", "create_app",
    "create_probe_app",
    "exposure_warning", "is_loopback", "listening_socket", "not_ready", "read_token", "readiness", "require_server",
    "server", "run",
]

VERBS = ("filter", "prioritize", "preempt", "bind")
OPEN_PATHS = ("/livez", "/readyz", "/healthz", "/metrics")
"""The routes a GET reaches without the ``--token-file`` token: kubelet's probes and
Prometheus's scrape. They change nothing and tell the state's counts only."""
MIN_RSA_BITS = 2048
MIN_EC_BITS = 256
WEAK_SIGNATURE_HASHES = {"md5": "MD5", "sha1": "SHA-1"}
"""Signature hashes refused in a certificate (collisions can be made), by cryptography's name."""
_MIN_TOKEN_CHARS = 16

_log = logging.getLogger("placer.serve.app")
MAX_STALENESS_S = 2.0 * WATCH_TIMEOUT_S
"""Default bound of the state's age for ``/readyz`` (``--max-staleness``): a quiet
cluster's healthy watch answers at least every
:data:`~placer.adapters.kubernetes.live.WATCH_TIMEOUT_S`."""
IDLE_APPLY_S = 1.0
"""How often ``placer serve`` applies the watch's events while no verb comes."""
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_LARGE_BODY_BYTES = 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
"""Default of ``--max-body-bytes``: a NodeList of 5,000 full Node objects (about 50 MB)
fits; kube-scheduler with ``nodeCacheCapable`` sends names only (70 KB for 5,000)."""


@dataclass(frozen=True)
class Limits:
    """What one client can hold of ``placer serve`` (its options of the same names).

    Parameters
    ----------
    max_body_bytes : int
        ``--max-body-bytes``: a larger body is answered 413 as soon as its
        ``Content-Length`` says so, or its bytes read pass it (at most
        :data:`~placer.schema.extender.MAX_BODY_BYTES`).
    header_timeout_s : float
        ``--header-timeout``: a connection is closed when a request's headers have not all
        come this long after it opened, after the request's first byte, or after the last
        answer (an idle keep-alive connection).
    body_timeout_s : float
        ``--body-timeout``: a body not read whole this long after its headers is answered
        408 and the connection closed.
    max_connections : int
        ``--max-connections``: past this many open connections (or requests in progress),
        requests are answered 503.
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 256


def require_server() -> None:
    """Refuse, in one line, when the HTTP server packages are missing."""
    try:
        import prometheus_client  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise InvalidInputError("serve", "the HTTP server is not installed: pip install 'placer[serve]'") from None


class _Metrics:
    """The service's Prometheus metrics, in a registry of its own; ``state`` gives the
    extender's state (:meth:`_StateGate.current`'s)."""

    def __init__(self, state: Callable[[], dict[str, Any]], watch: WatchHealth | None) -> None:
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
                for name, value in state().items():
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


class _BodyRefused(InvalidInputError):
    """A request body refused before it is decoded, with the HTTP status of the answer."""

    def __init__(self, where: str, what: str, status: int) -> None:
        super().__init__(where, what)
        self.status = status


async def _read_body(request: Any, source: str, limits: Limits) -> bytes:
    """The request's body, read chunk by chunk: refused (413) as soon as its
    ``Content-Length`` or the bytes read pass ``limits.max_body_bytes``, and (408) when not
    read whole within ``limits.body_timeout_s``."""
    import anyio
    from starlette.requests import ClientDisconnect

    cap = limits.max_body_bytes
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        raise _BodyRefused(source, f"body of {length} bytes, more than the {cap} read (--max-body-bytes)", 413)
    chunks: list[bytes] = []
    total = 0
    try:
        with anyio.fail_after(limits.body_timeout_s):
            async for chunk in request.stream():
                total += len(chunk)
                if total > cap:
                    raise _BodyRefused(source, f"body of more than {cap} bytes, the most read (--max-body-bytes)",
                                       413)
                chunks.append(chunk)
    except TimeoutError:
        raise _BodyRefused(source, f"the body did not come whole within {limits.body_timeout_s:g} s "
                           f"(--body-timeout); {total} bytes came", 408) from None
    except ClientDisconnect:
        raise _BodyRefused(source, f"the client closed the connection after {total} bytes of the body", 400) from None
    return b"".join(chunks)


class _StateGate:
    """The one way to the extender's state: a verb's work runs in a worker thread while it
    holds :attr:`lock`, one at a time. The probes sync and read the state when it is free;
    while a verb holds it they answer at once with :attr:`state`, as they last read it."""

    def __init__(self, extender: Extender, events: "queue.Queue[WatchEvent] | None") -> None:
        self.extender = extender
        self.events = events
        self.lock = asyncio.Lock()
        self.holder = ""  # the verb working on the state, "" when none
        self.posting = 0  # binds posting their Binding, beside the state
        self.state: dict[str, Any] = extender.state()
        self._applier: asyncio.Task[None] | None = None

    def _drain(self) -> None:
        if self.events is None:
            return
        got: list[WatchEvent] = []
        while True:
            try:
                got.append(self.events.get_nowait())
            except queue.Empty:
                break
        self.extender.queue(got)

    async def run(self, holder: str, work: Callable[[], Any]) -> Any:
        """``work()`` in a worker thread, holding the state, the watch events that came
        meanwhile handed to the extender first (its verbs apply them)."""
        from starlette.concurrency import run_in_threadpool

        if self._applier is None and self.events is not None:  # the first request: the event loop runs
            self._applier = asyncio.get_running_loop().create_task(self._apply_while_idle())

        def locked() -> Any:
            self._drain()
            return work()

        async with self.lock:
            self.holder = holder
            try:
                return await run_in_threadpool(locked)
            finally:
                self.holder = ""

    async def _apply_while_idle(self) -> None:
        """Every :data:`IDLE_APPLY_S`, apply the watch events that came while no verb did:
        what they change on placer's side alone acts without waiting for kube-scheduler's
        next call (a gang's PodGroup, which it does not watch: :meth:`Extender.sync`)."""
        while True:
            await asyncio.sleep(IDLE_APPLY_S)
            if self.lock.locked() or not (self.extender.queued or not self.events.empty()):
                continue
            try:
                await self.current()
            except Exception:  # a fault of placer's: logged, and the next verb meets it again
                _log.exception("applying the watch's events while no verb came failed")

    async def current(self) -> tuple[dict[str, Any], str]:
        """The state, synced now unless a verb holds it; and the verb at work: the one
        holding the state, else ``bind`` while a Binding is posted ("" when none)."""
        if self.lock.locked():
            return self.state, self.holder
        if self.posting:
            return self.state, "bind"

        def synced() -> dict[str, Any]:
            self.extender.sync()
            self.state = self.extender.state()
            return self.state

        return await self.run("healthz", synced), ""


def create_app(
    extender: Extender, events: "queue.Queue[WatchEvent] | None" = None, *, watch: WatchHealth | None = None,
    max_staleness_s: float = MAX_STALENESS_S, token: str | None = None, limits: Limits = Limits(),
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
    token : str, optional
        The bearer token every request needs but a GET of :data:`OPEN_PATHS`
        (``--token-file``); refused ones are answered 401 and counted in ``/metrics``.

    limits : Limits
        The body cap and the body's read timeout (the others are :func:`server`'s).

    With ``watch``, the extender decides only while ``/readyz`` passes (its ``not_current``).
    """
    require_server()
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    gate = _StateGate(extender, events)
    metrics = _Metrics(lambda: gate.state, watch)
    if watch is not None:
        extender.not_current = lambda: not_ready(watch, max_staleness_s)
    encoder = msgspec.json.Encoder()

    def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        body = data if isinstance(data, bytes) else encoder.encode(data)
        return Response(body, status_code=status, media_type="application/json", headers=headers)

    decoding_large = asyncio.Lock()  # decoded, a body takes many times its size

    def encoded(result: Any) -> Any:
        return result if isinstance(result, PendingBind) else msgspec.json.encode(result)

    def verb(
        name: str, decode: Callable[[bytes, str], Any], decide: Callable[[Any, str], Any],
    ) -> Callable[[Request], Awaitable[Response]]:
        source = f"POST /{name}"

        async def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            status, headers = 200, None
            try:
                raw = await _read_body(request, source, limits)
                if len(raw) > _LARGE_BODY_BYTES:  # decoded beside the state, one at a time: a verb decides meanwhile
                    async with decoding_large:
                        args = await run_in_threadpool(decode, raw, source)
                    data = await gate.run(name, lambda: encoded(decide(args, source)))
                else:  # one worker thread's call for all of it
                    data = await gate.run(name, lambda: encoded(decide(decode(raw, source), source)))
                if isinstance(data, PendingBind):  # the API server's round trip, the state free for other verbs
                    gate.posting += 1
                    try:
                        error = await run_in_threadpool(data.post)
                    finally:
                        gate.posting -= 1
                    data = await gate.run(name, lambda: msgspec.json.encode(extender.finish_bind(data, error)))
            except _BodyRefused as e:  # the rest of the body is not read: the connection cannot be reused
                status, data, headers = e.status, {"Error": str(e)}, {"Connection": "close"}
            except InvalidInputError as e:
                status, data = 400, {"Error": str(e)}
            except StateNotCurrent as e:
                status, data = 503, {"Error": str(e)}
            except Exception as e:  # a fault of placer's: answer, log, keep serving
                _log.exception("%s failed", source)
                status, data = 500, {"Error": f"{source}: internal error: {type(e).__name__}: {e}"}
            metrics.requests.labels(name, str(status)).inc()
            metrics.latency.labels(name).observe(time.perf_counter() - started)
            return json_response(data, status, headers)

        return endpoint

    def filter_answer(args: Any, source: str) -> Any:
        result = extender.filter(args, source)
        counts = Counter(result["FailedNodes"].values())
        counts.update(result["FailedAndUnresolvableNodes"].values())
        for reason, count in counts.items():
            metrics.pending_reasons.labels(reason_label(reason)).inc(count)
        return result

    routes = [
        Route("/filter", verb("filter", decode_filter_args, filter_answer), methods=["POST"]),
        Route("/prioritize", verb("prioritize", decode_filter_args, extender.prioritize), methods=["POST"]),
        Route("/preempt", verb("preempt", decode_preemption_args, extender.preempt), methods=["POST"]),
        Route("/bind", verb("bind", decode_binding_args, extender.begin_bind), methods=["POST"]),
    ]

    async def healthz(request: Request) -> Response:
        state, busy = await gate.current()
        return json_response({"status": "ok", **state, "binds": _binds(extender), "busy": busy})

    async def prometheus(request: Request) -> Response:
        await gate.current()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    routes.append(Route("/healthz", healthz, methods=["GET"]))
    routes += _probe_routes(extender, watch, max_staleness_s)
    routes.append(Route("/metrics", prometheus, methods=["GET"]))
    app = Starlette(routes=routes)
    if token is None:
        return app

    def refused(path: str) -> None:
        if path.lstrip("/") in VERBS:
            metrics.requests.labels(path.lstrip("/"), "401").inc()

    return _require_token(app, token, refused)


def _probe_routes(extender: Extender, watch: WatchHealth | None, max_staleness_s: float) -> list[Any]:
    """The routes of kubelet's probes: ``GET /livez`` (the event loop answers) and
    ``GET /readyz`` (:func:`readiness`; ``?verbose`` lists every check)."""
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

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

    return [Route("/livez", livez, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]


def create_probe_app(
    extender: Extender, *, watch: WatchHealth | None = None, max_staleness_s: float = MAX_STALENESS_S,
) -> Any:
    """The ASGI application of ``--probe-port``: ``GET`` (and ``HEAD``) ``/livez`` and
    ``/readyz`` as :func:`create_app` answers them, every other path 404. It needs no
    credentials (kubelet's ``httpGet`` probes present none): it tells only ``ok`` or the
    failing checks of :func:`readiness` (the watch's errors, the state's age), no pod or
    node names, and changes nothing.

    Parameters
    ----------
    extender : Extender
        The service's extender (``/readyz?verbose`` says how it binds).
    watch : WatchHealth, optional
        The watch of :func:`create_app`'s ``watch``.
    max_staleness_s : float
        As :func:`create_app`'s.
    """
    require_server()
    from starlette.applications import Starlette

    return Starlette(routes=_probe_routes(extender, watch, max_staleness_s))


def read_token(path: str) -> str:
    """The bearer token of ``--token-file``: the file's one line of at least 16 visible
    ASCII characters (RFC 6750's token characters), its surrounding whitespace dropped.

    Raises
    ------
    InvalidInputError
        At ``--token-file`` when the file cannot be read or holds no such token.
    """
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError("--token-file", f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    if len(token) < _MIN_TOKEN_CHARS or not all("!" <= c <= "~" for c in token):
        raise InvalidInputError(
            "--token-file", f"{path}: expected one line of at least {_MIN_TOKEN_CHARS} visible ASCII characters, no "
            f"spaces (e.g. openssl rand -hex 32 > {path}), got {len(token)} characters"
            + (" with spaces, control or non-ASCII characters" if len(token) >= _MIN_TOKEN_CHARS else "")
        )
    return token


def _token_problem(headers: list[tuple[bytes, bytes]], expected: bytes) -> str | None:
    """Why a request's headers do not carry the bearer token ``expected`` (None when they
    do); the token is compared in constant time."""
    given = [value for name, value in headers if name == b"authorization"]
    if not given:
        return "no Authorization header: send 'Authorization: Bearer <token>' with the token of --token-file"
    if len(given) > 1:
        return f"{len(given)} Authorization headers: send one"
    scheme, _, credentials = given[0].partition(b" ")
    if scheme.lower() != b"bearer":
        return "the Authorization header is not 'Bearer <token>'"
    if not hmac.compare_digest(credentials.strip(), expected):
        return "the bearer token is not the one of --token-file"
    return None


def _require_token(app: Any, token: str, refused: Callable[[str], None]) -> Any:
    """``app`` behind a bearer token: every HTTP request but a GET (or HEAD) of
    :data:`OPEN_PATHS` needs it; the others are answered 401 ``{"Error": ...}`` and their
    path is given to ``refused``."""
    expected = token.encode()

    async def guarded(scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]
                      ) -> None:
        if scope["type"] != "http" or (scope["method"] in ("GET", "HEAD") and scope["path"] in OPEN_PATHS):
            await app(scope, receive, send)
            return
        why = _token_problem(scope["headers"], expected)
        if why is None:
            await app(scope, receive, send)
            return
        refused(scope["path"])
        verb = scope["path"].lstrip("/")
        source = f"{scope['method']} /{verb}: " if verb in VERBS else ""
        body = msgspec.json.encode({"Error": f"{source}unauthorized: {why}"})
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="placer serve"'),
        ]})
        await send({"type": "http.response.body", "body": body})

    return guarded


def is_loopback(host: str) -> bool:
    """Whether ``host`` (``--host``) is a loopback address: ``localhost``, 127.0.0.0/8 or ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def exposure_warning(host: str, *, tls: bool, client_ca: bool, token: bool, insecure: bool) -> str | None:
    """Whether ``placer serve`` may listen on ``host`` so, and the warning to print if so.

    Loopback is always allowed. Beyond it, callers must authenticate: by a client
    certificate (``client_ca``), or by a token over TLS (``token`` and ``tls``; over plain
    HTTP the token can be read off the network). Otherwise only ``insecure`` allows it, and
    the warning returned says what that exposes.

    Raises
    ------
    InvalidInputError
        At ``--host`` when callers beyond loopback would not authenticate and ``insecure``
        is not given; the message names ``--insecure``.
    """
    if is_loopback(host) or client_ca or (token and tls):
        return None
    why = ("the --token-file token travels in plain HTTP (add --tls-cert and --tls-key)" if token
           else "no --client-ca or --token-file")
    risk = (f"listening on {host}, beyond loopback, with {why}: whoever reaches it can call bind and the other "
            "verbs as kube-scheduler")
    if not insecure:
        raise InvalidInputError("--host", f"{risk}; require client certificates (--client-ca) or a token "
                                          "(--token-file), or accept it with --insecure")
    return f"--insecure: {risk}"


def _certificate_problem(certificate: Any, now: datetime.datetime) -> str | None:
    """What makes one X.509 certificate unfit to serve or trust (None when nothing does)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, rsa

    if certificate.not_valid_after_utc < now:
        return f"expired on {certificate.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    if certificate.not_valid_before_utc > now:
        return f"not valid before {certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
    try:
        signature_hash = certificate.signature_hash_algorithm
    except UnsupportedAlgorithm:
        return f"signed with an algorithm placer cannot check ({certificate.signature_algorithm_oid.dotted_string})"
    if signature_hash is not None and signature_hash.name in WEAK_SIGNATURE_HASHES:
        return (f"signed with {WEAK_SIGNATURE_HASHES[signature_hash.name]}, which can be forged: issue it signed "
                "with SHA-256")
    key = certificate.public_key()
    if isinstance(key, (rsa.RSAPublicKey, dsa.DSAPublicKey)) and key.key_size < MIN_RSA_BITS:
        kind = "RSA" if isinstance(key, rsa.RSAPublicKey) else "DSA"
        return f"{kind} key of {key.key_size} bits, fewer than {MIN_RSA_BITS}"
    if isinstance(key, ec.EllipticCurvePublicKey) and key.curve.key_size < MIN_EC_BITS:
        return f"elliptic-curve key of {key.curve.key_size} bits ({key.curve.name}), fewer than {MIN_EC_BITS}"
    return None


def check_certificates(path: str, where: str, *, now: datetime.datetime | None = None) -> None:
    """Refuse a PEM file's certificates that are out of their validity period, signed with
    MD5 or SHA-1, or hold an RSA or DSA key under 2048 bits (an elliptic-curve key under
    256); every certificate of the file is checked (a chain, a CA bundle).

    Parameters
    ----------
    path : str
        The PEM file (``--tls-cert``, ``--client-ca``).
    where : str
        The option the file came from, for the error.
    now : datetime, optional
        The time to check validity at (default: now, UTC).

    Raises
    ------
    InvalidInputError
        At ``where``, naming the file, the certificate's subject and what is wrong.
    """
    try:
        from cryptography import x509
    except ImportError:
        raise InvalidInputError(where, "checking certificates needs the cryptography package: "
                                       "pip install 'placer[serve]'") from None
    try:
        certificates = x509.load_pem_x509_certificates(Path(path).read_bytes())
    except OSError as e:
        raise InvalidInputError(where, f"cannot read {path}: {e.strerror}") from None
    except ValueError:
        raise InvalidInputError(where, f"cannot load {path}: it holds no PEM certificate that can be read") from None
    now = now or datetime.datetime.now(datetime.timezone.utc)
    for number, certificate in enumerate(certificates, 1):
        problem = _certificate_problem(certificate, now)
        if problem is not None:
            subject = certificate.subject.rfc4514_string() or "no subject"
            raise InvalidInputError(where, f"{path}: certificate {number} ({subject}): {problem}")


def _ssl_options(tls: tuple[str, str] | None, client_ca: str | None) -> dict[str, Any]:
    """uvicorn's TLS settings: the certificate and key of ``tls`` and, with ``client_ca``,
    a client certificate that CA signed required in every handshake; each file loaded and
    its certificates checked (:func:`check_certificates`) first."""
    import ssl

    if tls is None:
        if client_ca is not None:
            raise InvalidInputError("--client-ca", "give --tls-cert and --tls-key too: client certificates are "
                                                   "asked for in the TLS handshake")
        return {}
    check_certificates(tls[0], "--tls-cert")  # first: OpenSSL's own refusals name no certificate
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(*tls)
    except (OSError, ssl.SSLError) as e:
        raise InvalidInputError("--tls-cert", f"cannot load {tls[0]} with key {tls[1]}: {e}") from None
    options: dict[str, Any] = {"ssl_certfile": tls[0], "ssl_keyfile": tls[1]}
    if client_ca is None:
        return options
    check_certificates(client_ca, "--client-ca")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(client_ca)
    except (OSError, ssl.SSLError) as e:
        raise InvalidInputError("--client-ca", f"cannot load {client_ca}: {e}") from None
    return {**options, "ssl_ca_certs": client_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}


def listening_socket(host: str, port: int, where: str = "--port") -> socket.socket:
    """A TCP socket listening on ``host:port`` (port 0 picks a free one). It is made with
    ``IPPROTO_TCP``: the connections it accepts inherit that, and asyncio sets
    ``TCP_NODELAY`` only on sockets that say TCP (a socket of protocol 0 gets Nagle's delay
    on every small answer: about 40 ms with the client's delayed ACK).

    Raises
    ------
    InvalidInputError
        At ``where`` (the port's option) when the address cannot be listened on.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise InvalidInputError(where, f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(2048)  # connections wait in the backlog until the server accepts them
    return sock


def _header_deadline_protocol() -> type:
    """uvicorn's HTTP/1.1 protocol (h11) that also closes a connection whose request
    headers do not all come within its ``timeout_keep_alive``, counted from the connection's
    start or the request's first byte (uvicorn itself times only the idle wait after an
    answer)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _headers_due: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is h11.IDLE:  # the next request's headers are not all here
                self._await_headers()
            else:
                self._headers_came()

        def connection_lost(self, exc: Exception | None) -> None:
            self._headers_came()
            super().connection_lost(exc)

        def _await_headers(self) -> None:
            if self._headers_due is None and not self.transport.is_closing():
                self._headers_due = self.loop.call_later(self.timeout_keep_alive, self._headers_late)

        def _headers_came(self) -> None:
            if self._headers_due is not None:
                self._headers_due.cancel()
                self._headers_due = None

        def _headers_late(self) -> None:
            self._headers_due = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol


def server(
    app: Any, *, limits: Limits = Limits(), tls: tuple[str, str] | None = None, client_ca: str | None = None,
    follows: Any = None,
) -> Any:
    """The ``uvicorn.Server`` of ``app`` under ``limits``: headers within
    ``header_timeout_s`` (also the idle keep-alive bound), at most ``max_connections``;
    HTTPS with ``tls``, client certificates required with ``client_ca`` (:func:`run`).
    With ``follows`` (another such server, in the same event loop), it captures no signals
    and stops when that one stops."""
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", http=_header_deadline_protocol(),
        timeout_keep_alive=limits.header_timeout_s,  # type: ignore[arg-type]  # uvicorn takes any number
        limit_concurrency=limits.max_connections, **_ssl_options(tls, client_ca),
    )
    if follows is None:
        return uvicorn.Server(config)

    class FollowingServer(uvicorn.Server):
        # uvicorn.Server sets its handlers with signal.signal: a second server's would replace the first's
        def capture_signals(self) -> Any:
            return contextlib.nullcontext()

        async def on_tick(self, counter: int) -> bool:
            self.should_exit = self.should_exit or follows.should_exit
            self.force_exit = self.force_exit or follows.force_exit
            return await super().on_tick(counter)

    return FollowingServer(config)


def run(
    app: Any, host: str, port: int, *, ready: Callable[..., None] | None = None,
    tls: tuple[str, str] | None = None, client_ca: str | None = None, limits: Limits = Limits(),
    probe_app: Any = None, probe_port: int = 0,
) -> None:
    """Serve ``app`` until interrupted; ``ready`` gets the port once it listens (port 0
    picks a free one). ``tls``: a certificate and its key (PEM files) to serve HTTPS, as
    kube-scheduler's ``enableHTTPS: true`` expects. ``client_ca``: a PEM bundle of CAs;
    with it (and ``tls``) every connection must present a certificate one of them signed
    (kube-scheduler's ``tlsConfig.certFile``/``keyFile``). ``limits``: see :class:`Limits`.
    ``probe_app`` (:func:`create_probe_app`): served too, over plain HTTP on ``host`` and
    ``probe_port`` (``--probe-port``), in the same event loop; SIGINT and SIGTERM stop
    both, and ``ready`` gets its port as ``probe_port=``.

    Raises
    ------
    InvalidInputError
        At ``--port`` (``--probe-port``) when the address cannot be listened on; at
        ``--tls-cert`` or ``--client-ca`` when a file cannot be loaded or a certificate is
        expired or weak (:func:`check_certificates`).
    """
    running = server(app, limits=limits, tls=tls, client_ca=client_ca)  # certificates checked before listening
    sock = listening_socket(host, port)
    if probe_app is None:
        if ready is not None:
            ready(sock.getsockname()[1])
        running.run(sockets=[sock])
        return
    probing = server(probe_app, limits=limits, follows=running)
    try:
        probe_sock = listening_socket(host, probe_port, "--probe-port")
    except InvalidInputError:
        sock.close()
        raise
    if ready is not None:
        ready(sock.getsockname()[1], probe_port=probe_sock.getsockname()[1])

    async def both() -> None:
        await asyncio.gather(running.serve(sockets=[sock]), probing.serve(sockets=[probe_sock]))

    if not hasattr(asyncio, "Runner"):  # Python 3.10: the default loop
        asyncio.run(both())
        return
    with asyncio.Runner(loop_factory=running.config.get_loop_factory()) as runner:  # uvloop when uvicorn uses it
        runner.run(both())
