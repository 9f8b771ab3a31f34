"""``placer serve``: the kube-scheduler extender over HTTP (:mod:`placer.serve`), with its
listeners, authentication, limits and the watch of the API server set from the options."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from placer import policies
from placer.cli.options import POLICY_CHOICES, count, port, positive_int, seconds
from placer.cli.output import EXIT_OK, notes
from placer.exceptions import InvalidInputError


def add_serve(sub: Any, summary: str) -> None:
    """``placer serve``."""
    sv = sub.add_parser(
        "serve", help=summary,
        description=(
            "Serve kube-scheduler's extender verbs on SNAPSHOT's cluster: POST /filter, /prioritize,\n"
            "/preempt, /bind (k8s.io/kube-scheduler/extender/v1), GET /livez, /readyz (503 while the\n"
            "watch fails or the state is older than --max-staleness), /healthz and /metrics\n"
            "(Prometheus). Binds keep the state current; so do watch events, from the API server\n"
            "(--kubeconfig) or recorded (--watch-file: kubectl get pods -w -o json output).\n"
            "bind posts the Binding through --kubeconfig; without it, bind is refused unless\n"
            "--dry-run (binds recorded in placer's state, nothing posted).\n"
            "Pods of a PodGroup wait in filter until the whole gang fits.\n"
            "Callers authenticate by a client certificate (--client-ca, with --tls-cert: what\n"
            "kube-scheduler's tlsConfig sends) or a bearer token (--token-file, for other callers;\n"
            "the GET probes and /metrics stay open). Beyond loopback one of them is required, or\n"
            "--insecure. docs/extender.md has a KubeSchedulerConfiguration and the security model."
        ),
        epilog="examples:\n  placer serve --snapshot cluster.json --port 8888 --dry-run\n"
               "  placer serve --snapshot cluster.json --kubeconfig ~/.kube/config --level rack=topology.kubernetes.io/rack\n"
               "  placer serve --snapshot cluster.json --kubeconfig ~/.kube/config --host 0.0.0.0 \\\n"
               "      --tls-cert server.crt --tls-key server.key --client-ca ca.crt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sv.add_argument("--snapshot", metavar="FILE", required=True,
                    help="ClusterSnapshot (JSON or YAML), e.g. placer import kubernetes output")
    sv.add_argument("--kubeconfig", metavar="FILE", help="watch nodes, pods and PodGroups and bind through this cluster")
    sv.add_argument("--watch-file", metavar="FILE", action="append", default=[],
                    help="recorded watch events to apply at start (kubectl get pods -w -o json); repeatable")
    sv.add_argument("--podgroups", metavar="FILE", action="append", default=[],
                    help="PodGroup objects (kubectl get podgroups -A -o json); repeatable")
    sv.add_argument("--level", metavar="NAME=LABEL", action="append", default=[],
                    help="topology level of watched nodes and gangs, outermost first; repeatable")
    sv.add_argument("--policy", metavar="P", default=policies.DEFAULT,
                    help=f"placement policy: {POLICY_CHOICES} (default: {policies.DEFAULT})")
    sv.add_argument("--dry-run", action="store_true",
                    help="answer bind by holding the GPUs in placer's state, posting no Binding")
    sv.add_argument("--max-staleness", metavar="SECONDS",
                    help="with --kubeconfig: /readyz fails when the API server's last news is older "
                         "(default: 600, twice the watch's timeout)")
    sv.add_argument("--pending-ttl", metavar="SECONDS",
                    help="forget a pod seen only through filter this long after its last filter (default: 300)")
    sv.add_argument("--max-pending", metavar="N",
                    help="remember at most N pods seen only through filter, oldest forgotten first (default: 10000)")
    sv.add_argument("--sync-interval", metavar="SECONDS", default="1",
                    help="apply watch events at most this often (default: 1; 0: before every verb)")
    sv.add_argument("--host", metavar="ADDR", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    sv.add_argument("--port", metavar="N", default="8888", help="port (default: 8888; 0: any free port)")
    sv.add_argument("--probe-port", metavar="N",
                    help="also serve GET /livez and /readyz alone on this port of --host, in plain HTTP and "
                         "without auth: for kubelet's httpGet probes under --client-ca (0: any free port)")
    sv.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS with this certificate (with --tls-key)")
    sv.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    sv.add_argument("--client-ca", metavar="PEM",
                    help="require of every connection a client certificate signed by one of these CAs "
                         "(mutual TLS; with --tls-cert)")
    sv.add_argument("--token-file", metavar="FILE",
                    help="require 'Authorization: Bearer <the file's token>' for the verbs (not for GET "
                         "/livez, /readyz, /healthz, /metrics); kube-scheduler cannot send one: use --client-ca")
    sv.add_argument("--insecure", action="store_true",
                    help="allow listening beyond loopback without --client-ca or --token-file (warned at start)")
    _add_serve_limits(sv)
    sv.set_defaults(handler=run_serve)


PARSERS: dict[str, Callable[[Any, str], None]] = {"serve": add_serve}


def _add_serve_limits(sv: argparse.ArgumentParser) -> None:
    # the defaults are placer.serve.app.Limits' and kube_live.API_TIMEOUT_S, not imported here: 'placer serve --help'
    # loads neither the HTTP server nor the Kubernetes client; a test compares
    sv.add_argument("--api-timeout", metavar="SECONDS",
                    help="the most a Binding call or a list of the watch may take; then bind answers an error, "
                         "the list is retried (default: 10)")
    sv.add_argument("--max-body-bytes", metavar="N",
                    help="a larger request body is answered 413 (default: 67108864, 64 MiB; at most 256 MiB)")
    sv.add_argument("--header-timeout", metavar="SECONDS",
                    help="close a connection whose request headers take longer, or that idles that long after "
                         "an answer (default: 10)")
    sv.add_argument("--body-timeout", metavar="SECONDS",
                    help="answer 408 to a body not read whole in this time (default: 30)")
    sv.add_argument("--max-connections", metavar="N",
                    help="past this many open connections, requests are answered 503 (default: 256)")


def _serve_limits(args: argparse.Namespace) -> Any:
    """The :class:`placer.serve.app.Limits` of ``placer serve``'s options (its defaults for those not given)."""
    from placer.schema.extender import MAX_BODY_BYTES
    from placer.serve.app import Limits

    given: dict[str, Any] = {}
    if args.max_body_bytes is not None:
        given["max_body_bytes"] = positive_int(args.max_body_bytes, "--max-body-bytes")
        if given["max_body_bytes"] > MAX_BODY_BYTES:
            raise InvalidInputError("--max-body-bytes", f"expected at most {MAX_BODY_BYTES} (256 MiB), got "
                                    f"{args.max_body_bytes}")
    if args.header_timeout is not None:
        given["header_timeout_s"] = seconds(args.header_timeout, "--header-timeout", positive=True)
    if args.body_timeout is not None:
        given["body_timeout_s"] = seconds(args.body_timeout, "--body-timeout", positive=True)
    if args.max_connections is not None:
        given["max_connections"] = positive_int(args.max_connections, "--max-connections")
    return Limits(**given)


def run_serve(args: argparse.Namespace) -> int:
    """Run ``placer serve`` until stopped."""
    import queue
    import threading

    from placer.adapters.kubernetes import live as kube_live
    from placer.serve.extender import (
        MAX_PENDING, PENDING_TTL_S, Binder, Extender, RecordingBinder, RefusingBinder,
    )
    from placer.serve.app import (
        MAX_STALENESS_S, create_app, create_probe_app, exposure_warning, read_token, require_server, run,
    )

    require_server()
    listen_port = port(args.port)
    probe_port = port(args.probe_port, "--probe-port") if args.probe_port is not None else None
    if probe_port is not None and probe_port == listen_port != 0:
        raise InvalidInputError("--probe-port", f"expected a port other than --port {listen_port}: the probes get a "
                                                "listener of their own")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise InvalidInputError("--tls-cert", "give both --tls-cert and --tls-key, or neither")
    tls = (args.tls_cert, args.tls_key) if args.tls_cert is not None else None
    scheme = "https" if tls else "http"
    if args.client_ca is not None and args.token_file is not None:
        raise InvalidInputError("--token-file", "give --client-ca or --token-file, not both: with --client-ca every "
                                                "caller has a certificate, and kube-scheduler sends no token")
    token = read_token(args.token_file) if args.token_file is not None else None
    warning = exposure_warning(args.host, tls=tls is not None, client_ca=args.client_ca is not None,
                               token=token is not None, insecure=args.insecure)
    policy = policies.get(args.policy, "--policy").name
    podgroups = [pg for f in args.podgroups for pg in kube_live.read_podgroups(f)]
    events = [e for f in args.watch_file for e in kube_live.read_watch_file(f)]
    client = kube_live.api_client(args.kubeconfig) if args.kubeconfig else None
    api_timeout = kube_live.API_TIMEOUT_S
    if args.api_timeout is not None:
        api_timeout = seconds(args.api_timeout, "--api-timeout", positive=True)
    limits = _serve_limits(args)
    binder: Binder = (
        RecordingBinder() if args.dry_run
        else kube_live.KubeBinder(client, timeout_s=api_timeout) if client is not None else RefusingBinder()
    )
    interval = seconds(args.sync_interval, "--sync-interval")
    pending_ttl = PENDING_TTL_S
    if args.pending_ttl is not None:
        pending_ttl = seconds(args.pending_ttl, "--pending-ttl", positive=True)
    max_pending = MAX_PENDING if args.max_pending is None else count(args.max_pending, "--max-pending", least=1)
    max_staleness = MAX_STALENESS_S
    if args.max_staleness is not None:
        max_staleness = seconds(args.max_staleness, "--max-staleness", positive=True)
    start_notes = []
    if args.dry_run:
        start_notes.append("--dry-run: binds are held in placer's memory only: no Binding is posted, and a restart "
                     "forgets them")
    if args.max_staleness is not None and client is None:
        start_notes.append("--max-staleness has no effect without --kubeconfig (no watch to go stale)")
    if args.insecure and warning is None:
        start_notes.append("--insecure has no effect: " + ("callers authenticate" if args.client_ca or token else
                                                     f"{args.host} is loopback"))
    if args.api_timeout is not None and client is None:
        start_notes.append("--api-timeout has no effect without --kubeconfig (no API server is called)")
    if client is not None and not kube_live.verifies_the_api_server(client):
        start_notes.append(f"--kubeconfig: {args.kubeconfig} has insecure-skip-tls-verify: the API server's "
                           "certificate is not checked")
    try:
        extender = Extender(args.snapshot, policy=policy, levels=args.level, podgroups=podgroups, binder=binder,
                            sync_interval_s=interval, pending_ttl_s=pending_ttl, max_pending=max_pending)
    except InvalidInputError as e:
        if e.where.startswith("levels"):
            raise InvalidInputError("--level" + e.where.removeprefix("levels"), e.what) from None
        raise
    extender.queue(events)
    extender.sync(now=True)
    notes("serve", start_notes)
    if warning is not None:
        sys.stderr.write(f"placer: serve: warning: {warning}\n")
    feed: queue.Queue[kube_live.WatchEvent | kube_live.Listing] = queue.Queue()
    stop = threading.Event()
    watch = kube_live.WatchHealth() if client is not None else None
    state = extender.state()

    def ready(bound: int, probe_port: int | None = None) -> None:
        probes = f"; /livez, /readyz also on http://{args.host}:{probe_port}" if probe_port is not None else ""
        sys.stderr.write(
            f"placer serve: listening on {scheme}://{args.host}:{bound} ({state['nodes']} nodes, {state['pods']} pods, "
            f"policy {policy}{', watching ' + args.kubeconfig if client is not None else ''}{probes})\n"
        )
        sys.stderr.flush()
        if client is not None:  # after the banner: its failures are logged below it
            kube_live.watch_cluster(client, feed.put, stop, health=watch, request_timeout_s=api_timeout)

    try:
        app = create_app(extender, feed, watch=watch, max_staleness_s=max_staleness, token=token, limits=limits)
        probe_app = None if probe_port is None else create_probe_app(extender, watch=watch,
                                                                     max_staleness_s=max_staleness)
        run(app, args.host, listen_port, ready=ready, tls=tls, client_ca=args.client_ca, limits=limits,
            probe_app=probe_app, probe_port=probe_port or 0)
    finally:
        stop.set()
    return EXIT_OK
