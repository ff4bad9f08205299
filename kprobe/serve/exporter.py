"""The HTTP side of `kprobe serve`: `/probe`, `/metrics`, `/-/healthy`, and nothing a request can break.

Why the standard library's HTTP handler and a thread per request: one probe is one request for the
length of the probe (milliseconds on a healthy cluster, the scrape's timeout on a dead one), and the
run itself already works in threads, so no framework is needed. A thread is given only to a request
whose head is whole (kprobe.serve.connections), never to a client still sending it.
What must hold whatever a client sends:

- Only what may be probed is probed: each target must match an allowed `host:port` pattern
  (`--allow-target`, the config's `targets:`; kprobe.serve.allow matches them on the parsed host and
  port), or the answer is 403. With no pattern at all nothing may be probed: an exporter that dials
  wherever a URL says is a request-forgery tool. One /probe names at most MAX_BOOTSTRAPS bootstraps.
- The URL cannot change how a cluster is reached: a `PROTOCOL://` prefix on a target is refused
  unless it is the module's own security.protocol (a prefix would otherwise turn SASL on under a
  module that sets none, and send its password in cleartext).
- A probe never outlives its scrape: its deadline is Prometheus' X-Prometheus-Scrape-Timeout-Seconds
  less a margin (blackbox_exporter's 0.5 s), or the module's, whichever is shorter.
- Probes at once are bounded (`--max-concurrent`); one more is answered 503 at once, not queued
  behind slow ones. A bad target or module is 400 with one line; a bug inside a probe is 500 with
  one line and a count in /metrics; the server goes on.
- No secret is in a URL, a label, a log line or an error: modules hold them (kprobe.serve.modules).
- Slow clients cost a socket, not a thread, and are cut at a whole-head deadline; open connections
  are bounded (--max-connections); kprobe.serve.connections says how.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kprobe import __version__
from kprobe.errors import UsageError
from kprobe.logs import logger
from kprobe.records import record
from kprobe.serve.allow import TargetPattern, target_problem
from kprobe.serve.connections import HeadFirstHandler, Server
from kprobe.serve.modules import ServeConfig, target_hostports

_LOG = logger("kprobe.serve")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Prometheus tells the exporter how long it will wait; the probe ends this much sooner, so the
# answer (rendered and sent) arrives in time. blackbox_exporter's default timeout_offset.
SCRAPE_MARGIN = 0.5
# Bootstrap addresses one /probe may name: one cluster's list, not a sweep. blackbox_exporter takes one
# target per request; a Kafka client takes a few bootstraps of one cluster, so kprobe takes up to this.
MAX_BOOTSTRAPS = 16


@record
class ServeOptions:
    """The command line of `kprobe serve`, checked."""

    host: str
    port: int
    config: ServeConfig
    allow: tuple[TargetPattern, ...] = ()
    max_concurrent: int = 16
    vantage: str | None = None
    max_connections: int = 256  # open at once; past it the oldest slow one is closed, or the new one refused
    head_timeout: float = 5.0  # from accept to the end of the headers, in all


class Metrics:
    """The exporter's own metrics (`/metrics`): probes by module and outcome, rejections, durations."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        disable_created_metrics()  # `*_created` series double every counter and no dashboard reads them
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.probes = Counter("kprobe_exporter_probes", "Probes run, by module and the run's verdict (ok, gap, "
                              "failed, interrupted) or error (a bug: one line in the log).", ["module", "outcome"],
                              registry=self.registry)
        self.rejected = Counter("kprobe_exporter_requests_rejected", "Requests answered without a probe: "
                                "bad_request (400, 431), forbidden (403), busy (503), not_found (404), timeout "
                                "(408: headers not sent in time), too_many_connections (503: refused or closed at "
                                "--max-connections).", ["reason"], registry=self.registry)
        self.duration = Histogram("kprobe_exporter_probe_duration_seconds", "Wall time of each probe, by module.",
                                  ["module"], registry=self.registry,
                                  buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.in_flight = Gauge("kprobe_exporter_probes_in_flight", "Probes running now.", registry=self.registry)
        self.connections = Gauge("kprobe_exporter_connections_open", "HTTP connections open now: requests being "
                                 "read or served (at most --max-connections).", registry=self.registry)

    def exposition(self) -> bytes:
        """The text exposition of the exporter's own metrics."""
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


class Exporter:
    """The state every request shares: options, the concurrency bound, the metrics."""

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.slots = threading.BoundedSemaphore(options.max_concurrent)
        self.metrics = Metrics()
        self.secrets: set[str] = set()
        self.refresh_secrets()

    def refresh_secrets(self) -> None:
        """The secret values the modules hold now: scrubbed from every line the exporter writes or answers.

        The probe never writes one; this catches the other way in, a secret pasted into a URL (a module
        name, a target) that an error or the access log would otherwise repeat.
        """
        found = set()
        for module in self.options.config.modules.values():
            for ref in module.secrets:
                try:
                    found.add(ref.read())
                except UsageError:
                    continue
        self.secrets = {s for s in found if len(s) >= 4}

    def scrub(self, text: str) -> str:
        """`text` with every secret the modules hold replaced."""
        from kprobe.redaction import REDACTED

        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, REDACTED)
        return text

    def probe(self, query: dict[str, list[str]], scrape_timeout: str | None) -> tuple[int, str]:
        """One /probe request: (HTTP status, body). The body of a refusal is one line saying why."""
        from kprobe.output import prometheus
        from kprobe.runs.probe import ProbeRun

        unknown = sorted(set(query) - {"target", "module"})
        if unknown:
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST,
                                f"unknown parameter {unknown[0]!r}: /probe takes target and module")
        targets = [t.strip() for value in query.get("target", []) for t in value.split(",") if t.strip()]
        if not targets:
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST,
                                "missing target: /probe?target=HOST:PORT[,HOST:PORT]&module=NAME")
        if len(targets) > MAX_BOOTSTRAPS:
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST,
                                f"{len(targets)} targets: one /probe takes at most {MAX_BOOTSTRAPS} bootstrap "
                                "addresses of one cluster; give each cluster its own scrape target")
        modules = query.get("module", [])
        if len(modules) > 1:
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST, "give one module")
        name = modules[0] if modules else "default"
        module = self.options.config.modules.get(name)
        if module is None:
            known = ", ".join(sorted(self.options.config.modules))
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST,
                                f"unknown module {name[:64]!r}: this exporter has {known}")
        budget = _budget(scrape_timeout, module.deadline)
        if budget is None:
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST,
                                "bad X-Prometheus-Scrape-Timeout-Seconds header: give a number of seconds")
        from kprobe.options import parse_address

        try:
            parsed = [(text, parse_address(text)) for text in targets]
        except UsageError as exc:
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST, f"bad target: {exc}")
        for _, address in parsed:
            problem = target_problem(address)
            if problem:
                return self._refuse("bad_request", HTTPStatus.BAD_REQUEST, f"bad target: {problem}")
        if module.secrets:
            self.refresh_secrets()  # a rotated secret file: its new value is scrubbed too
        try:
            options = module.options(targets, deadline=budget, vantage=self.options.vantage)
        except UsageError as exc:  # a secret's file gone since start-up, say: the module's fault, not the URL's
            return self._refuse("bad_request", HTTPStatus.BAD_REQUEST, f"module {name}: {exc}")
        own = options.props.get("security.protocol")
        protocol = (own or "PLAINTEXT").upper()
        for text, address in parsed:
            if address.protocol is not None and address.protocol != protocol:
                ref = next((r for r in module.secrets if r.key == "security.protocol"), None)
                has = (f"sets security.protocol from {ref.source}" if ref else  # a value read is never echoed
                       f"has security.protocol {protocol}" if own else "sets no security.protocol (PLAINTEXT)")
                return self._refuse("bad_request", HTTPStatus.BAD_REQUEST, (
                    f"target {text}: a scrape cannot choose the security protocol: module {name} {has}; drop the "
                    f"{address.protocol}:// prefix, or set security.protocol: {address.protocol} in a module and "
                    "scrape with that module="))
        refused = [a.hostport for a in options.bootstraps
                   if not self.options.config.allowed(a, self.options.allow)]
        if refused:
            return self._refuse("forbidden", HTTPStatus.FORBIDDEN, (
                f"target {refused[0]} is not allowed: start kprobe serve with --allow-target PATTERN or list it in "
                "the config's targets:" if self.options.allow or self.options.config.targets else
                "no target is allowed yet: start kprobe serve with --allow-target 'HOST:PORT' (patterns, "
                "repeatable) or list targets: in --config"))
        if not self.slots.acquire(blocking=False):
            return self._refuse("busy", HTTPStatus.SERVICE_UNAVAILABLE,
                                f"busy: {self.options.max_concurrent} probes are running (--max-concurrent)")
        started = time.monotonic()
        self.metrics.in_flight.inc()
        try:
            report = ProbeRun(options).run()
            body = prometheus.render(report)
        except Exception as exc:  # a bug: one line, counted, and the server goes on
            self.metrics.probes.labels(module=name, outcome="error").inc()
            _LOG.error("probe of %s (module %s) failed: internal error %s", ",".join(targets)[:200], name,
                       exc.__class__.__name__)
            return HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error in the probe ({exc.__class__.__name__}); " \
                                                     "see the exporter's log\n"
        finally:
            self.slots.release()
            self.metrics.in_flight.dec()
        elapsed = time.monotonic() - started
        self.metrics.probes.labels(module=name, outcome=report.status).inc()
        self.metrics.duration.labels(module=name).observe(elapsed)
        _LOG.info("probe of %s (module %s): %s in %.3fs", ",".join(target_hostports(options))[:200], name,
                  report.status, elapsed)
        return HTTPStatus.OK, body

    def _refuse(self, reason: str, status: HTTPStatus, message: str) -> tuple[int, str]:
        self.metrics.rejected.labels(reason=reason).inc()
        from kprobe.sanitize import safe

        line = self.scrub(safe(message, limit=500))
        _LOG.info("refused (%d): %s", status, line)
        return status, line + "\n"


def _budget(header: str | None, module_deadline: float) -> float | None:
    """The probe's deadline: the module's, cut to the scrape's timeout less a margin; None for a bad header."""
    if header is None:
        return module_deadline
    try:
        scrape = float(header)
    except ValueError:
        return None
    if not scrape > 0:
        return None
    # Short scrape timeouts keep half of themselves for the answer rather than a fixed 0.5 s.
    usable = scrape - SCRAPE_MARGIN if scrape > 2 * SCRAPE_MARGIN else scrape / 2
    return min(module_deadline, usable)


_INDEX = """<html><head><title>kprobe serve</title></head><body>
<h1>kprobe serve</h1>
<p>Probes a Kafka cluster's advertised endpoints from here:
<a href="/probe?target=HOST:PORT">/probe?target=HOST:PORT&amp;module=NAME</a>.</p>
<p><a href="/metrics">/metrics</a> (the exporter's own), <a href="/-/healthy">/-/healthy</a></p>
</body></html>
"""


def handler_for(exporter: Exporter) -> type[HeadFirstHandler]:
    """A request handler bound to one exporter; the server hands it requests whose head is whole."""

    class Handler(HeadFirstHandler):
        server_version = f"kprobe-serve/{__version__}"
        # http.server's own refusals (414 for a request line over 64 KiB, 431, 400 for a broken request line) are
        # one line of text too, not its HTML page.
        error_message_format = "%(code)d %(message)s\n"
        error_content_type = "text/plain; charset=utf-8"

        def version_string(self) -> str:
            return self.server_version  # the base class appends " Python/x.y" (or " " and a trailing blank)

        def do_GET(self) -> None:
            try:
                url = urlsplit(self.path)
                if url.path == "/probe":
                    query = parse_qs(url.query, keep_blank_values=False, max_num_fields=16)
                    status, body = exporter.probe(query, self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
                    self._send(status, body.encode("utf-8"), CONTENT_TYPE if status == 200 else None)
                elif url.path == "/metrics":
                    self._send(200, exporter.metrics.exposition(), CONTENT_TYPE)
                elif url.path == "/-/healthy":
                    self._send(200, b"Healthy\n")
                elif url.path == "/":
                    self._send(200, _INDEX.encode(), "text/html; charset=utf-8")
                else:
                    exporter.metrics.rejected.labels(reason="not_found").inc()
                    self._send(404, b"not found: /probe, /metrics, /-/healthy\n")
            except ValueError as exc:  # parse_qs: too many fields, a broken query
                exporter.metrics.rejected.labels(reason="bad_request").inc()
                self._send(400, f"bad request: {exc.__class__.__name__}\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # Prometheus gave up on this scrape: nobody to answer

        def do_POST(self) -> None:
            self._send(405, b"use GET\n")

        do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST

        def _send(self, status: int, body: bytes, content_type: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type or "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Access lines only with -v: a request's path may carry anything a client wrote."""
            from kprobe.sanitize import safe

            _LOG.debug("%s %s", self.address_string(), exporter.scrub(safe(format % args, limit=300)))

    return Handler


class _Scrubber(logging.Filter):
    """On the log's handlers: no line of any kprobe logger carries a secret the modules hold."""

    def __init__(self, exporter: Exporter) -> None:
        super().__init__()
        self.exporter = exporter

    def filter(self, record: logging.LogRecord) -> bool:
        if self.exporter.secrets:
            record.msg, record.args = self.exporter.scrub(record.getMessage()), None
        return True


def make_server(options: ServeOptions) -> tuple[Server, Exporter]:
    """The bound server (port 0 picks a free one) and its exporter; UsageError when it cannot bind."""
    import socket

    exporter = Exporter(options)
    for handler in logging.getLogger("kprobe").handlers:
        handler.addFilter(_Scrubber(exporter))
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    metrics = exporter.metrics
    try:
        server = Server((options.host, options.port), handler_for(exporter), family=family,
                        max_connections=options.max_connections, head_timeout=options.head_timeout,
                        on_event=lambda reason: metrics.rejected.labels(reason=reason).inc(),
                        on_count=metrics.connections.set)
    except OSError as exc:
        raise UsageError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}") from None
    return server, exporter


def serve(options: ServeOptions, *, on_ready: Any = None, stop: threading.Event | None = None) -> None:
    """Serve until `stop` is set (SIGTERM or Ctrl-C in the CLI); probes in flight end by their deadlines."""
    server, _ = make_server(options)
    stop = stop or threading.Event()
    worker = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    worker.start()
    if on_ready is not None:
        on_ready(server.server_address)
    try:
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()


def parse_listen(text: str) -> tuple[str, int]:
    """`--listen HOST:PORT` (`[v6]:port` too); UsageError otherwise."""
    from kprobe.options import parse_port

    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise UsageError(f"bad --listen {text!r}: give HOST:PORT, e.g. 127.0.0.1:9464")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host, parse_port(port, "--listen") if port != "0" else 0


def is_loopback(host: str) -> bool:
    """Whether a listen address is reachable from this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__: Sequence[str] = ("Exporter", "ServeOptions", "make_server", "parse_listen", "serve")
