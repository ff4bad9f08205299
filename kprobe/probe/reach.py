"""Resolve every advertised endpoint and connect to every address it resolves to, all at once.

The two steps run as one so that each connect can be reported the moment it ends: the identity
check of an endpoint that connected starts then, while other connects still wait on blackholes.
The verdict per endpoint is the one a client would meet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kprobe.hostport import host_problem, port_problem
from kprobe.models import DnsResult, Endpoint, EndpointResult, EndpointStatus, TcpResult
from kprobe.net.dualstack import family_split
from kprobe.probe.connect import connect_all
from kprobe.probe.context import RunContext
from kprobe.probe.resolve import resolve_all


def endpoint_status(dns: DnsResult, tcp: Sequence[TcpResult]) -> EndpointStatus:
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
    if not ok:
        return "unreachable"
    # Real clients with default settings get through when only IPv6 fails (kprobe.net.dualstack): not a gap.
    split = family_split(tcp)
    return "degraded" if split is not None and split.default_clients_work else "partial"


def probe_endpoints(
    endpoints: Sequence[Endpoint], ctx: RunContext, *, on_connected: Callable[[int, Endpoint, str], None] | None = None,
) -> list[EndpointResult]:
    """Resolve every distinct host, then connect to every address, all concurrently.

    `on_connected(index, endpoint, address)` hears of each address of endpoint number `index`
    that accepts a connection, as it happens, while other connects may still be waiting.
    """
    endpoints = [ctx.remap(e) for e in endpoints]
    valid = [e for e in endpoints if host_problem(e.dial_host) is None and port_problem(e.dial_port) is None]
    valid_ids = {id(e) for e in valid}  # a set: `e in valid` is quadratic with 10,000 endpoints
    resolver = ctx.resolver
    # dial_host/dial_port: the advertised endpoint, or where a --resolve or --connect-to mapping sends it.
    dns = resolve_all((e.dial_host for e in valid), resolver, ctx.deadline)
    targets = [(addr, e.dial_port) for e in valid for addr in dns[e.dial_host].addresses
               if dns[e.dial_host].status == "ok"]
    on_result = None
    if on_connected is not None:
        waiting: dict[tuple[str, int], list[int]] = {}  # several endpoints can share an address
        for index, e in enumerate(endpoints):
            if id(e) in valid_ids and dns[e.dial_host].status == "ok":
                for addr in dns[e.dial_host].addresses:
                    waiting.setdefault((addr, e.dial_port), []).append(index)

        def on_result(target: tuple[str, int], result: TcpResult) -> None:
            if result.status == "ok":
                for index in waiting.get(target, ()):
                    on_connected(index, endpoints[index], target[0])

    tcp = connect_all(targets, ctx.timeout, ctx.deadline, on_result)
    results: list[EndpointResult] = []
    for e in endpoints:
        if id(e) not in valid_ids:
            why = host_problem(e.dial_host) or port_problem(e.dial_port) or "not a valid advertised endpoint"
            bad = DnsResult(host=e.host, status="error", ms=0.0, source=resolver.kind, error=why)
            results.append(EndpointResult(endpoint=e, dns=bad, tcp=(), status="unresolvable"))
            continue
        d = dns[e.dial_host]
        attempts = (tuple(tcp[(a, e.dial_port)] for a in d.addresses if (a, e.dial_port) in tcp)
                    if d.status == "ok" else ())
        results.append(EndpointResult(endpoint=e, dns=d, tcp=attempts, status=endpoint_status(d, attempts)))
    return results
