"""Observations in, findings out: pure functions, no network, no clock.

Each finding says in plain words what a client will experience and which listener setting to
change. The codes are a public contract (docs/findings.md); add codes, never rename them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from kprobe.crosscheck import consistency_findings, dns_view_findings, identity_findings, tls_findings
from kprobe.endpoints import host_problem, port_problem
from kprobe.models import BootstrapResult, EndpointResult, Finding
from kprobe.resolve import is_loopback_name

ERROR, WARNING, INFO = "error", "warning", "info"

_AFTER_BOOTSTRAP = (
    "producers and consumers will bootstrap fine, then fail on every request after the first "
    "metadata response"
)


def _is_loopback_ip(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_loopback_host(host: str, addresses: Sequence[str]) -> bool:
    return is_loopback_name(host) or _is_loopback_ip(host) or (
        bool(addresses) and all(_is_loopback_ip(a) for a in addresses)
    )


def _listener_hint(result: EndpointResult) -> str:
    """Which listener to change: the one behind the bootstrap port that advertised this."""
    ports = sorted({b.split(":")[-1] for b in result.endpoint.advertised_by})
    if not ports:
        return "the listener"
    return "the listener on port " + "/".join(ports)


def diagnose(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """All findings of one probe, errors first, in a stable order."""
    by_address = {b.address: b for b in bootstraps}
    findings: list[Finding] = []
    answered = [b for b in bootstraps if b.status == "ok"]
    for b in bootstraps:
        if b.status != "ok":
            findings.append(_bootstrap_unreachable(b, answered_any=bool(answered)))
    findings.extend(consistency_findings(bootstraps, endpoints))
    for result in endpoints:
        findings.extend(_endpoint_findings(result, by_address))
        findings.extend(identity_findings(result, by_address))
        findings.extend(tls_findings(result))
        findings.extend(dns_view_findings(result))
    not_checked = [r.endpoint.hostport for r in endpoints if r.status == "unchecked"]
    if not_checked:
        findings.append(Finding(
            "RUN_INCOMPLETE", WARNING,
            f"The run stopped (its deadline, or Ctrl-C) before {len(not_checked)} advertised endpoint(s) answered: "
            f"{', '.join(not_checked)}. Nothing is known of them yet, so this report cannot say they work.",
            "Run again with a longer --deadline (at least the metadata time plus one --timeout), or with fewer "
            "bootstrap addresses."))
    unchecked = sorted({r.identity.detail or "" for r in endpoints if r.identity and r.identity.status == "unchecked"})
    if unchecked:
        findings.append(Finding(
            "IDENTITY_NOT_CHECKED", INFO,
            "Identity not checked: " + "; ".join(unchecked) + ". Which node answers at each endpoint is unknown, "
            "so a port-forward or NAT rule that leads to the wrong broker would go unseen.",
            "Nothing to fix for clients; grant DescribeConfigs on the cluster to the probe's principal to have "
            "endpoint identities checked, or pass --no-identity."))
    order = {ERROR: 0, WARNING: 1, INFO: 2}
    findings.sort(key=lambda f: (order[f.severity], f.node_id if f.node_id is not None else -1, f.code))
    return findings


def _bootstrap_unreachable(b: BootstrapResult, answered_any: bool) -> Finding:
    what = {
        "dns_failed": "its name does not resolve from here",
        "refused": "the connection was refused (nothing listens there)",
        "timeout": "it did not answer in time (a firewall, a wrong address, or an overloaded broker)",
        "auth_failed": "it refused the credentials",
    }.get(b.status, "the request failed")
    consequence = (
        "The other bootstrap addresses answered, so clients that try them will still start, but "
        "this one is dead weight in bootstrap.servers."
        if answered_any else "No client can start from here with this bootstrap list."
    )
    tls_problem = (b.error or "").startswith("TLS")
    if tls_problem:
        what = "the TLS handshake failed"
    fix = {
        "auth_failed": "Check sasl.mechanism, sasl.username and the password, and that the listener's "
        "protocol matches security.protocol.",
        "dns_failed": "Use a name this network resolves, or an IP address, in bootstrap.servers.",
    }.get(
        b.status,
        "Check the address and port against the broker's `listeners`, and that the port is open "
        "between here and the broker.",
    )
    if tls_problem:
        fix = ("Give the client the CA that signed the broker certificate (-X ssl.ca.location=...), and bootstrap "
               "with a name the certificate holds; check that the port is a TLS listener.")
    code = "AUTH_FAILED" if b.status == "auth_failed" else "BOOTSTRAP_UNREACHABLE"
    return Finding(code, ERROR,
                   f"Bootstrap {b.address} gave no metadata: {what} ({b.error}). {consequence}",
                   fix, bootstrap=b.address)


def _endpoint_findings(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> list[Finding]:
    ep = result.endpoint
    where = ep.hostport
    via = ", ".join(ep.advertised_by)
    listener = _listener_hint(result)
    out: list[Finding] = []

    def add(code: str, severity: str, message: str, fix: str) -> None:
        source = ep.advertised_by[0] if ep.advertised_by else None
        out.append(Finding(code, severity, message, fix, ep.node_id, where, source))

    bad_host, bad_port = host_problem(ep), port_problem(ep)
    if bad_host:
        add("INVALID_ADVERTISED_HOST", ERROR,
            f"Broker {ep.node_id} advertises {where} (via {via}), which is not a usable host: {bad_host}. "
            f"{_AFTER_BOOTSTRAP[0].upper()}{_AFTER_BOOTSTRAP[1:]}.",
            f"Fix advertised.listeners of {listener} on broker {ep.node_id}: a host name or IP address.")
    if bad_port:
        add("INVALID_ADVERTISED_PORT", ERROR,
            f"Broker {ep.node_id} advertises {where} (via {via}): {bad_port}. {_AFTER_BOOTSTRAP[0].upper()}"
            f"{_AFTER_BOOTSTRAP[1:]}.",
            f"Fix advertised.listeners of {listener} on broker {ep.node_id}: a port between 1 and 65535.")
    if bad_host or bad_port:
        return out

    proposal = _proposal(result, bootstraps)
    dns = result.dns
    ok_tcp = [t for t in result.tcp if t.status == "ok"]
    bad_tcp = [t for t in result.tcp if t.status != "ok"]
    came_from_elsewhere = any(
        (b := bootstraps.get(src)) is not None and b.connected_to is not None and not _is_loopback_ip(b.connected_to)
        for src in ep.advertised_by
    )
    if came_from_elsewhere and _is_loopback_host(ep.host, dns.addresses):
        add("ADVERTISED_LOOPBACK", ERROR,
            f"You reached the cluster at {via}, but broker {ep.node_id} advertises {where}, a loopback "
            "address: every client connects to its own machine instead of the broker, so "
            f"{_AFTER_BOOTSTRAP}.",
            proposal or (f"Make {listener} advertise a name or address that clients on this network reach "
                         "(advertised.listeners), not localhost."))

    if result.status == "unresolvable":
        reason = dns.error or f"{ep.host} does not resolve"
        add("ADVERTISED_UNRESOLVABLE", ERROR,
            f"You reached the cluster at {via}, but broker {ep.node_id} advertises {where}, which does "
            f"not resolve from here ({reason}): {_AFTER_BOOTSTRAP}.",
            proposal or (
                f"Make {listener} advertise a name this network can resolve (advertised.listeners), or add "
                "a listener for this network with its own advertised name; an /etc/hosts entry only fixes "
                "this one machine."))
    elif result.status == "unreachable":
        statuses = {t.status for t in bad_tcp}
        addresses = ", ".join(t.address for t in bad_tcp)
        if "timeout" in statuses:
            add("ADVERTISED_TIMEOUT", ERROR,
                f"Broker {ep.node_id} advertises {where} ({addresses}), but connections to it time out "
                f"from here (a firewall or security group dropping packets, or a private address): "
                f"{_AFTER_BOOTSTRAP}, after waiting for the timeout.",
                f"Open the port between this network and {addresses}, or make {listener} advertise an "
                "address this network can reach." + (f" {proposal}" if proposal else ""))
        elif statuses == {"refused"}:
            add("ADVERTISED_REFUSED", ERROR,
                f"Broker {ep.node_id} advertises {where} ({addresses}), but nothing accepts connections "
                f"there: the broker is down, or the advertised port is not the one it listens on. "
                f"Requests for partitions led by broker {ep.node_id} will fail.",
                f"Start broker {ep.node_id}, or make the port in advertised.listeners of {listener} "
                "match the port in `listeners` (or the published/forwarded port).")
        elif statuses <= {"unreachable"}:
            add("ADVERTISED_UNREACHABLE", ERROR,
                f"Broker {ep.node_id} advertises {where} ({addresses}), which this host has no route to: "
                f"{_AFTER_BOOTSTRAP}.",
                proposal or f"Make {listener} advertise an address routable from this network.")
        else:  # reset during the handshake, or another socket error: say which, not "no route"
            errors = "; ".join(f"{t.address}: {t.error or t.status}" for t in bad_tcp)
            add("ADVERTISED_UNREACHABLE", ERROR,
                f"Broker {ep.node_id} advertises {where}, but connecting to it fails from here ({errors}): "
                f"{_AFTER_BOOTSTRAP}.",
                proposal or f"Find what answers on {where} and why it drops the connection; make {listener} "
                "advertise an address where the broker accepts connections from this network.")
    elif result.status == "partial":
        add("ADVERTISED_PARTIAL", WARNING,
            f"{ep.host} resolves to {len(result.tcp)} addresses; "
            f"{', '.join(t.address for t in ok_tcp)} connect but "
            f"{', '.join(f'{t.address} ({t.status})' for t in bad_tcp)} do not. Clients that try a "
            "failing address first are slow to connect or fail, depending on their address family.",
            f"Remove the records for {', '.join(t.address for t in bad_tcp)} from {ep.host}, or make the "
            "broker listen on them.")

    if dns.in_hosts_file and dns.detail is not None and dns.detail.status != "ok" and not is_loopback_name(ep.host):
        add("RESOLVED_ONLY_VIA_HOSTS_FILE", WARNING,
            f"{ep.host} (broker {ep.node_id}) resolves here only through the hosts file; DNS says "
            f"{dns.detail.status}. Clients on other machines will not resolve it.",
            f"Publish {ep.host} in DNS, or make {listener} advertise a name DNS knows.")

    for src in ep.advertised_by:
        b = bootstraps.get(src)
        if b is None or b.connected_to is None:
            continue
        boot_port = int(src.rsplit(":", 1)[1])
        if b.connected_to in dns.addresses and ep.port != boot_port:
            severity = INFO if result.status == "reachable" else WARNING
            add("PORT_DIFFERS_FROM_BOOTSTRAP", severity,
                f"You bootstrapped through {src}, and broker {ep.node_id} advertises the same address with "
                f"port {ep.port}. That is normal for a second listener, but is also the mark of a NAT or "
                "port mapping that advertised.listeners does not know about.",
                f"If {src} is a mapped port, set advertised.listeners of that listener to the mapped "
                f"host:port ({src}).")
            break
    return out


def _proposal(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> str | None:
    """Listener lines, only where a bootstrap address is *known* to reach this very node.

    The evidence: the bootstrap answered from here, and DescribeConfigs on that connection said
    it is node N. Without it (identity not checked, or another node answered) no line is proposed.
    """
    ep = result.endpoint
    for src in ep.advertised_by:
        b = bootstraps.get(src)
        if b is None or b.status != "ok" or b.node_id != ep.node_id:
            continue
        host, _, port = src.rpartition(":")
        protocol = _protocol_of(b)
        return (
            f"From here broker {ep.node_id} answers at {src} (your bootstrap, identified as node {ep.node_id}). "
            f"Either make the listener on port {port} advertise {src} (in advertised.listeners, replace "
            f"{ep.hostport} with {src}), or keep {ep.hostport} for its own network and add a listener for this one: "
            f"`EXTERNAL://{host}:<free port>` in advertised.listeners, `EXTERNAL://0.0.0.0:<free port>` in "
            f"listeners and `EXTERNAL:{protocol}` in listener.security.protocol.map, then bootstrap with "
            f"{host}:<free port>."
        )
    return None


def _protocol_of(b: BootstrapResult) -> str:
    """The bootstrap's security protocol, as the report records it (PLAINTEXT when unsaid)."""
    return b.protocol or "PLAINTEXT"
