"""One probe run: bootstrap -> metadata -> endpoints -> resolve -> connect -> diagnose.

One deadline for the whole run is set here, once, and handed down; every step turns it into
per-call timeouts, so the run ends by the deadline whatever the network does, and reports
what it knows by then.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kprobe.config import security_from
from kprobe.connect import connect_all
from kprobe.diagnose import ERROR, diagnose
from kprobe.endpoints import collect, host_problem, port_problem
from kprobe.metadata import fetch_all, fetch_bootstrap
from kprobe.models import (
    BootstrapAddress,
    BootstrapResult,
    DnsResult,
    Endpoint,
    EndpointResult,
    Report,
    TcpResult,
    Vantage,
)
from kprobe.resolve import Resolver, resolve_all
from kprobe.secrets import redact
from kprobe.wire import Security

_LOG = logging.getLogger("kprobe.probe")


@dataclass(frozen=True)
class ProbeOptions:
    """Everything a probe run needs, already validated by `kprobe.config`."""

    bootstraps: Sequence[BootstrapAddress]
    props: Mapping[str, str] = field(default_factory=dict)
    nameservers: Sequence[tuple[str, int]] = ()
    timeout: float = 5.0
    deadline: float = 30.0
    vantage: str | None = None
    identity: bool = True
    tls_expiry_days: float = 30.0
    compare_nameservers: Sequence[tuple[str, int]] = ()


def now_rfc3339() -> str:
    """UTC with milliseconds, as the report contract says."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _endpoint_status(dns: DnsResult, tcp: Sequence[TcpResult]) -> str:
    """The verdict a client would meet; `unchecked` where the run stopped before an answer.

    Attempts the deadline cut short say nothing about the endpoint, so they count neither way:
    one address that connected still makes it reachable, none makes it unchecked, not unreachable.
    """
    if dns.unfinished:
        return "unchecked"
    if dns.status != "ok" or not dns.addresses:
        return "unresolvable"
    finished = [t for t in tcp if not t.unfinished]
    ok = sum(1 for t in finished if t.status == "ok")
    if len(finished) < len(tcp) and not ok:
        return "unchecked"
    if ok == len(finished) and finished:
        return "reachable"
    return "partial" if ok else "unreachable"


class ProbeRun:
    """A run whose partial state survives an interruption.

    The steps fill in `bootstraps` then `results`; if Ctrl-C arrives in between, `report()`
    still says everything learnt so far, with status `interrupted`.
    """

    def __init__(self, options: ProbeOptions) -> None:
        self.options = options
        self.started_at = now_rfc3339()
        self.t0 = time.monotonic()
        self.deadline = self.t0 + options.deadline
        self.resolver = Resolver(options.nameservers, timeout=options.timeout)
        self.bootstraps: list[BootstrapResult] | None = None
        self.endpoints: list[Endpoint] = []
        self.results: list[EndpointResult] | None = None
        self.interrupted = False
        self.on_phase: Callable[[str], None] | None = None
        # Called (from worker threads) as each bootstrap's answer or failure is in: a progress bar counts them.
        self.on_bootstrap: Callable[[BootstrapResult], None] | None = None

    def _phase(self, text: str) -> None:
        if self.on_phase is not None:
            self.on_phase(text)

    def _fetch_counted(self, *args: Any, **kwargs: Any) -> BootstrapResult:
        """fetch_bootstrap, then tell `on_bootstrap` that one more bootstrap is done."""
        result = fetch_bootstrap(*args, **kwargs)
        if self.on_bootstrap is not None:
            self.on_bootstrap(result)
        return result

    def run(self) -> Report:
        """Every step in order; never raises for the network."""
        opts = self.options
        self._phase(f"asking {len(opts.bootstraps)} bootstrap address(es) for metadata")
        self.bootstraps = fetch_all(opts.bootstraps, opts.props, self.resolver, timeout=opts.timeout,
                                    deadline=self.deadline, topics=[], identity=opts.identity,
                                    fetch=self._fetch_counted)
        self.endpoints = collect(self.bootstraps)
        _LOG.debug("%d distinct advertised endpoints after %.0f ms", len(self.endpoints),
                   (time.monotonic() - self.t0) * 1000)
        self._phase(f"resolving and connecting to {len(self.endpoints)} advertised endpoint(s)")
        security = {b.hostport: security_from(opts.props, b) for b in opts.bootstraps}
        checks = None
        if opts.identity:
            from kprobe.identity import IdentityChecks

            checks = IdentityChecks(opts.props, timeout=opts.timeout, deadline=self.deadline,
                                    protocols={hostport: sec.protocol for hostport, sec in security.items()})
        results = probe_endpoints(self.endpoints, self.resolver, timeout=opts.timeout, deadline=self.deadline,
                                  on_connected=checks.start if checks else None)
        if checks is not None:
            self._phase("checking who answers at each endpoint")
            results = checks.apply(results)
        results = self._deeper(results, security)
        self.results = results
        for r in self.results:
            _LOG.debug("endpoint %s (node %d): dns %s %s, tcp %s -> %s", r.endpoint.hostport, r.endpoint.node_id,
                       r.dns.status, ",".join(r.dns.addresses) or "-",
                       ",".join(f"{t.address}={t.status}" for t in r.tcp) or "-", r.status)
        return self.report()

    def _deeper(self, results: list[EndpointResult], security: Mapping[str, Security]) -> list[EndpointResult]:
        """TLS and compared DNS views: each only where it applies and was asked for.

        `security` is each bootstrap's (`host:port`) security settings.
        """
        opts = self.options
        tls_sources = {hostport for hostport, sec in security.items() if sec.uses_tls}
        if tls_sources:
            from kprobe.tls import check_all as check_tls

            indexes = [i for i, r in enumerate(results) if tls_sources.intersection(r.endpoint.advertised_by)]
            checked = check_tls([results[i] for i in indexes], opts.props, timeout=opts.timeout,
                                deadline=self.deadline, expiry_days=opts.tls_expiry_days)
            for i, result in zip(indexes, checked, strict=True):
                results[i] = result
        for ip, port in opts.compare_nameservers:
            other = Resolver([(ip, port)], timeout=opts.timeout)
            answers = resolve_all((r.endpoint.host for r in results if r.endpoint.host), other, self.deadline)
            results = [
                replace(r, compared_dns=(*r.compared_dns, replace(answers[r.endpoint.host], server=f"{ip}:{port}")))
                if r.endpoint.host in answers else r
                for r in results
            ]
        return results

    def report(self) -> Report:
        """The report of what is known now (the whole run, or up to an interruption)."""
        opts = self.options
        bootstraps = self.bootstraps or [
            BootstrapResult(a.hostport, "timeout", "interrupted before an answer") for a in opts.bootstraps
        ]
        results = self.results
        if results is None:
            pending = DnsResult("", "timeout", (), None, self.resolver.kind, error="interrupted before resolving",
                                unfinished=True)
            results = [EndpointResult(e, replace(pending, host=e.host), (), "unchecked") for e in self.endpoints]
        findings = diagnose(bootstraps, results)
        # A deadline is not an interruption: what did not answer by then is a timeout or unchecked,
        # and the verdict stands on what is known (an unchecked endpoint is never called ok).
        if self.interrupted:
            status = "interrupted"
        elif not any(b.status == "ok" for b in bootstraps):
            status = "failed"
        elif any(f.severity == ERROR for f in findings) or any(r.status != "reachable" for r in results):
            status = "gap"
        else:
            status = "ok"
        hostname = socket.gethostname()
        vantage = Vantage(opts.vantage or hostname, hostname, self.resolver.kind,
                          tuple(f"{ip}:{port}" for ip, port in opts.nameservers))
        return Report(
            id=str(uuid.uuid4()),
            started_at=self.started_at,
            finished_at=now_rfc3339(),
            vantage=vantage,
            bootstraps=tuple(bootstraps),
            endpoints=tuple(results),
            findings=tuple(findings),
            status=status,
            duration_ms=round((time.monotonic() - self.t0) * 1000, 3),
            deadline_reached=not self.interrupted and time.monotonic() >= self.deadline,
            settings={"timeout_s": opts.timeout, "deadline_s": opts.deadline, "identity": opts.identity,
                      "tls_expiry_days": opts.tls_expiry_days, "properties": redact(opts.props),
                      "compare_nameservers": [f"{ip}:{port}" for ip, port in opts.compare_nameservers]},
        )


def run_probe(options: ProbeOptions) -> Report:
    """Probe every bootstrap and every advertised endpoint from here."""
    return ProbeRun(options).run()


def probe_endpoints(
    endpoints: Sequence[Endpoint], resolver: Resolver, *, timeout: float, deadline: float,
    on_connected: Callable[[int, Endpoint, str], None] | None = None,
) -> list[EndpointResult]:
    """Resolve every distinct host, then connect to every address, all concurrently.

    `on_connected(index, endpoint, address)` hears of each address of endpoint number `index`
    that accepts a connection, as it happens, while other connects may still be waiting.
    """
    valid = [e for e in endpoints if host_problem(e) is None and port_problem(e) is None]
    valid_ids = {id(e) for e in valid}  # a set: `e in valid` is quadratic with 10,000 endpoints
    dns = resolve_all((e.host for e in valid), resolver, deadline)
    targets = [(addr, e.port) for e in valid for addr in dns[e.host].addresses if dns[e.host].status == "ok"]
    on_result = None
    if on_connected is not None:
        waiting: dict[tuple[str, int], list[int]] = {}  # several endpoints can share an address
        for index, e in enumerate(endpoints):
            if id(e) in valid_ids and dns[e.host].status == "ok":
                for addr in dns[e.host].addresses:
                    waiting.setdefault((addr, e.port), []).append(index)

        def on_result(target: tuple[str, int], result: TcpResult) -> None:
            if result.status == "ok":
                for index in waiting.get(target, ()):
                    on_connected(index, endpoints[index], target[0])

    tcp = connect_all(targets, timeout, deadline, on_result)
    results: list[EndpointResult] = []
    for e in endpoints:
        if id(e) not in valid_ids:
            why = host_problem(e) or port_problem(e) or "not a valid advertised endpoint"
            bad = DnsResult(e.host, "error", (), 0.0, resolver.kind, error=why)
            results.append(EndpointResult(e, bad, (), "unresolvable"))
            continue
        d = dns[e.host]
        attempts = tuple(tcp[(a, e.port)] for a in d.addresses if (a, e.port) in tcp) if d.status == "ok" else ()
        results.append(EndpointResult(e, d, attempts, _endpoint_status(d, attempts)))
    return results
