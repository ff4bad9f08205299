"""One probe run: bootstrap -> metadata -> endpoints -> resolve -> connect -> identity -> tls -> diagnose.

One `RunContext` for the whole run is built here, once, and handed to every step: one deadline
(each step turns it into per-call timeouts, so the run ends by the deadline whatever the network
does, and reports what it knows by then), one resolver, each bootstrap's security settings.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

from kprobe.findings.catalogue import ERROR
from kprobe.findings.diagnose import diagnose
from kprobe.logs import logger
from kprobe.models import (
    CLIENTS_CONNECT,
    ApplicationQuestions,
    BootstrapResult,
    ControllerBootstrapResult,
    DnsResult,
    Endpoint,
    EndpointResult,
    Report,
    Roundtrip,
    RunStatus,
    Vantage,
    questions_from,
)
from kprobe.options import ProbeOptions, report_settings
from kprobe.probe.bootstrap import fetch_all
from kprobe.probe.context import RunContext
from kprobe.probe.endpoints import collect
from kprobe.probe.reach import probe_endpoints
from kprobe.probe.resolve import Resolver, resolve_all
from kprobe.records import replace
from kprobe.runs import now_rfc3339, report_id

_LOG = logger("kprobe.probe")


class ProbeRun:
    """A run whose partial state survives an interruption.

    The steps fill in `bootstraps` then `results`; if Ctrl-C arrives in between, `report()`
    still says everything learnt so far, with status `interrupted`.
    """

    def __init__(self, options: ProbeOptions) -> None:
        self.options = options
        self.started_at = now_rfc3339()
        self.t0 = time.monotonic()
        self.ctx = RunContext.start(options.bootstraps, options.props, timeout=options.timeout,
                                    run_for=options.deadline, nameservers=options.nameservers,
                                    resolve=options.resolve, connect_to=options.connect_to,
                                    controllers=options.controllers)
        # --controllers: filled in by a worker thread that runs beside the brokers' steps, on the same deadline.
        self.controllers: tuple[list[ControllerBootstrapResult], list[EndpointResult]] | None = None
        self.bootstraps: list[BootstrapResult] | None = None
        self.endpoints: list[Endpoint] = []
        self.results: list[EndpointResult] | None = None
        # --roundtrip: filled in after the checks, on what is left of the deadline.
        self.roundtrip: Roundtrip | None = None
        self.run_id = report_id()
        self.questions = ApplicationQuestions()
        self.interrupted = False
        self.on_phase: Callable[[str], None] | None = None
        # Called (from worker threads) as each bootstrap's answer or failure is in: a progress bar counts them.
        self.on_bootstrap: Callable[[BootstrapResult], None] | None = None

    def _phase(self, text: str) -> None:
        if self.on_phase is not None:
            self.on_phase(text)

    def _bootstrap_done(self, result: BootstrapResult) -> None:
        if self.on_bootstrap is not None:
            self.on_bootstrap(result)

    def run(self) -> Report:
        """Every step in order; never raises for the network (an exception is a bug)."""
        opts, ctx = self.options, self.ctx
        controller_thread = None
        if opts.controllers:
            # Beside the brokers' steps, not after them: both are bounded by the one deadline.
            controller_thread = threading.Thread(target=self._check_controllers, daemon=True)
            controller_thread.start()
        bootstraps = list(opts.bootstraps)
        if ctx.props.get("client.dns.lookup") == "resolve_canonical_bootstrap_servers_only":
            from kprobe.probe.canonical import canonical_bootstraps

            bootstraps, changes = canonical_bootstraps(bootstraps, ctx.resolver)
            for line in changes:
                _LOG.warning("%s", line)
        self._phase(f"asking {len(bootstraps)} bootstrap address(es) for metadata")
        # Every topic's metadata, not brokers only: partitions led by a broker that lacks the bootstrap's
        # listener (LISTENER_NOT_FOUND) show only there. One response per bootstrap, bounded like any request
        # by --timeout, the run's deadline and the codec's frame limit; tens of thousands of partitions
        # make a few megabytes, which a probe every minute can afford.
        # The application's questions ride on each bootstrap connection after its metadata; asked only where
        # there is something to learn (kprobe.kafka.coordinators), so a healthy plain probe pays nothing.
        self.questions = questions_from(ctx.props, group=opts.group, transactional_id=opts.transactional_id,
                                        topics=opts.topics, share_group=opts.share_group,
                                        client_rack=opts.client_rack)
        self.bootstraps = fetch_all(bootstraps, ctx, topics=None, identity=opts.identity,
                                    on_done=self._bootstrap_done, application=self.questions)
        _proxy_note(self.bootstraps)
        self.endpoints = [ctx.remap(e) for e in collect(self.bootstraps)]
        _LOG.debug("%d distinct advertised endpoints after %.0f ms", len(self.endpoints),
                   (time.monotonic() - self.t0) * 1000)
        self._phase(f"resolving and connecting to {len(self.endpoints)} advertised endpoint(s)")
        checks = None
        if opts.identity:
            from kprobe.probe.identity import IdentityChecks

            checks = IdentityChecks(ctx)
        results = probe_endpoints(self.endpoints, ctx, on_connected=checks.start if checks else None)
        if checks is not None:
            self._phase("checking who answers at each endpoint")
            results = checks.apply(results)
        results = self._deeper(results)
        self.results = results
        if controller_thread is not None:
            self._phase("checking the KRaft controllers")
            controller_thread.join(max(0.0, ctx.deadline - time.monotonic()) + 1.0)
        if opts.roundtrip is not None:
            from kprobe.probe.roundtrip import round_trip

            self._phase(f"producing to and consuming from every partition of {opts.roundtrip}")
            self.roundtrip = round_trip(opts.roundtrip, opts.roundtrip_create, opts.bootstraps, self.bootstraps, ctx,
                                        run_id=self.run_id, vantage=opts.vantage or socket.gethostname(),
                                        application=self.questions)
        for r in self.results:
            _LOG.debug("endpoint %s (node %d): dns %s %s, tcp %s -> %s", r.endpoint.hostport, r.endpoint.node_id,
                       r.dns.status, ",".join(r.dns.addresses) or "-",
                       ",".join(f"{t.address}={t.status}" for t in r.tcp) or "-", r.status)
        return self.report()

    def _check_controllers(self) -> None:
        """The --controllers step (in its own thread): each address's quorum, then each controller endpoint."""
        from kprobe.probe.controllers import check_controllers

        self.controllers = check_controllers(self.options.controllers, self.ctx, identity=self.options.identity)

    def _controller_results(self) -> tuple[tuple[ControllerBootstrapResult, ...] | None, tuple[EndpointResult, ...]]:
        """What --controllers found, or (if the run ended first) each address as unanswered."""
        if not self.options.controllers:
            return None, ()
        if self.controllers is None:
            why = "interrupted before an answer" if self.interrupted else "no answer before the run's deadline"
            return tuple(ControllerBootstrapResult(address=a.hostport, status="timeout", error=why)
                         for a in self.options.controllers), ()
        answers, endpoints = self.controllers
        return tuple(answers), tuple(endpoints)

    def _deeper(self, results: list[EndpointResult]) -> list[EndpointResult]:
        """TLS and compared DNS views: each only where it applies and was asked for."""
        opts, ctx = self.options, self.ctx
        if ctx.uses_tls:
            from kprobe.probe.tls import check_all as check_tls

            results = check_tls(results, ctx, expiry_days=opts.tls_expiry_days)
        for ip, port in opts.compare_nameservers:
            other = Resolver([(ip, port)], timeout=opts.timeout)
            # The name dialled (a --resolve or --connect-to target when remapped), so both views judge one name.
            answers = resolve_all((r.endpoint.dial_host for r in results if r.endpoint.dial_host), other, ctx.deadline)
            results = [
                replace(r, compared_dns=(*r.compared_dns,
                                         replace(answers[r.endpoint.dial_host], server=f"{ip}:{port}")))
                if r.endpoint.dial_host in answers else r
                for r in results
            ]
        return results

    def report(self) -> Report:
        """The report of what is known now (the whole run, or up to an interruption)."""
        opts = self.options
        resolver = self.ctx.resolver
        bootstraps = self.bootstraps or [
            BootstrapResult(address=a.hostport, status="timeout", error="interrupted before an answer")
            for a in opts.bootstraps
        ]
        results = self.results
        if results is None:
            pending = DnsResult(host="", status="timeout", source=resolver.kind, error="interrupted before resolving",
                                unfinished=True)
            results = [EndpointResult(endpoint=e, dns=replace(pending, host=e.host), tcp=(), status="unchecked")
                       for e in self.endpoints]
        controllers, controller_endpoints = self._controller_results()
        roundtrip = self.roundtrip
        if opts.roundtrip is not None and roundtrip is None:
            roundtrip = Roundtrip(topic=opts.roundtrip, client="librdkafka", status="unfinished",
                                  error="interrupted before the round trip ended" if self.interrupted
                                  else "the run ended before the round trip")
        application = None
        if self.results is not None and (self.questions or any(b.application for b in bootstraps)):
            from kprobe.probe.application import judge_application

            application = judge_application(bootstraps, results, self.questions)
        findings = diagnose(bootstraps, results, controllers or (), controller_endpoints, roundtrip, application,
                            opts.credentials)
        # A deadline is not an interruption: what did not answer by then is a timeout or unchecked,
        # and the verdict stands on what is known (what is unchecked is never called ok).
        status: RunStatus
        if self.interrupted:
            status = "interrupted"
        elif not any(b.status == "ok" for b in bootstraps) and not any(c.status == "ok" for c in controllers or ()):
            status = "failed"
        elif (any(f.severity == ERROR or f.code == "RUN_INCOMPLETE" for f in findings)
              or any(r.status not in CLIENTS_CONNECT for r in (*results, *controller_endpoints))
              # A round trip asked for and not made whole is a gap, whatever the verdict says.
              or (roundtrip is not None and roundtrip.status != "ok")):
            status = "gap"
        else:
            status = "ok"
        hostname = socket.gethostname()
        vantage = Vantage(name=opts.vantage or hostname, hostname=hostname, resolver_kind=resolver.kind,
                          nameservers=tuple(f"{ip}:{port}" for ip, port in opts.nameservers))
        return Report(
            id=self.run_id,
            started_at=self.started_at,
            finished_at=now_rfc3339(),
            vantage=vantage,
            bootstraps=tuple(bootstraps),
            endpoints=tuple(results),
            findings=tuple(findings),
            status=status,
            duration_ms=round((time.monotonic() - self.t0) * 1000, 3),
            deadline_reached=not self.interrupted and time.monotonic() >= self.ctx.deadline,
            controllers=controllers,
            controller_endpoints=controller_endpoints,
            roundtrip=roundtrip,
            application=application,
            # Every option with a report key, as the run used it (the application's ids as the questions resolved
            # them from the options and the properties).
            settings=report_settings(opts, self.questions),
        )


_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _proxy_note(bootstraps: list[BootstrapResult]) -> None:
    """One line when no bootstrap connected and an HTTP proxy is set: Kafka clients never use one.

    People behind a corporate proxy expect it to carry every client; a Kafka client (Java, librdkafka,
    kprobe) opens plain TCP to the brokers and ignores these variables, so the proxy is no way in.
    """
    if not bootstraps or any(b.status == "ok" for b in bootstraps):
        return
    if not any(b.status in ("timeout", "refused", "dns_failed", "error") for b in bootstraps):
        return
    names = [name for name in _PROXY_VARIABLES if os.environ.get(name)]
    if names:
        _LOG.warning("%s is set, but Kafka clients do not use HTTP proxies: they connect to the brokers directly "
                     "(TCP), so the proxy cannot carry them; a TCP forward (ssh -L, kubectl port-forward) with "
                     "--connect-to can stand in for a path", " and ".join(dict.fromkeys(n.upper() for n in names)))


def run_probe(options: ProbeOptions) -> Report:
    """Probe every bootstrap and every advertised endpoint from here."""
    return ProbeRun(options).run()


class RunThread:
    """A probe run in a daemon worker thread, so the caller's thread stays free for signals.

    Why a thread: Ctrl-C or SIGTERM must be able to stop the *waiting* (and report what is known,
    or abandon the run) while a connect or a getaddrinfo that cannot be cancelled goes on. Both
    `kprobe probe` and `kprobe watch` use it, so both tell a run that raised (a bug, re-raised
    here by `outcome()`) from one that was abandoned.
    """

    def __init__(self, run: ProbeRun) -> None:
        self.run = run
        self._box: list[Report | BaseException] = []
        self._thread = threading.Thread(target=self._work, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._box.append(self.run.run())
        except BaseException as exc:  # handed to the caller's thread by outcome()
            self._box.append(exc)

    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds`; whether the run has ended."""
        self._thread.join(seconds)
        return not self._thread.is_alive()

    def outcome(self) -> Report | None:
        """The report of an ended run, None if it has not ended; raises what the run raised."""
        if not self._box:
            return None
        value = self._box[0]
        if isinstance(value, BaseException):
            raise value
        return value
