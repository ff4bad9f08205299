"""Findings on each advertised endpoint as resolved and connected to from here.

The heart of kprobe: the bootstrap answered, and what it advertises does not work from where
the user stands. Fixes propose concrete listener lines only where the evidence supports them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from kprobe.findings.catalogue import ERROR, INFO, WARNING, finding
from kprobe.findings.common import Repeat, about, at_brokers, listed, maybe_cluster_name, source_of, unique
from kprobe.hostport import format_hostport, host_problem, is_loopback_ip, is_loopback_name, port_problem
from kprobe.models import (
    CLIENTS_CONNECT,
    NO_FAILURE_SEEN,
    SOME_ADDRESSES_FAIL,
    BootstrapResult,
    EndpointResult,
    Finding,
    Severity,
)
from kprobe.net.dualstack import JAVA_SETUP_TIMEOUT, LIBRDKAFKA_SETUP_TIMEOUT, FamilySplit, family_split

_AFTER_BOOTSTRAP = (
    "producers and consumers will bootstrap fine, then fail on every request after the first "
    "metadata response"
)



def _is_loopback_host(host: str, addresses: Sequence[str]) -> bool:
    return is_loopback_name(host) or is_loopback_ip(host) or (
        bool(addresses) and all(is_loopback_ip(a) for a in addresses)
    )


def _listener_hint(result: EndpointResult, bootstraps: Mapping[str, BootstrapResult]) -> str:
    """Which listener to change: the one behind the bootstrap that advertised this, by name where the report has it.

    A Metadata answer lists the endpoints of the listener the request came in on, so the bootstrap broker's
    listener name is every advertised endpoint's (listener names are per cluster, not per broker).
    """
    for src in result.endpoint.advertised_by:
        b = bootstraps.get(src)
        if b is None or not b.listener_settings:
            continue
        from kprobe.findings.listener_fix import reached_listener  # only where a report carries the settings

        reached = reached_listener(b)
        if reached is not None and reached.name:
            return f"listener {reached.name}"
    ports = sorted({b.split(":")[-1] for b in result.endpoint.advertised_by})
    if not ports:
        return "the listener"
    return "the listener on port " + "/".join(ports)


# Where an endpoint that passed TCP still fails a client, the identity and TLS rules say so: such an
# endpoint does not make its bootstrap one that "works from here".
_SOUND_IDENTITY = ("match", "unchecked")
_SOUND_TLS = ("ok", "expiring", "not_checked")


def _works(result: EndpointResult) -> bool:
    """A client connects there as advertised (no --resolve or --connect-to needed), to the node it expects."""
    identity = result.identity
    return (result.status in CLIENTS_CONNECT and result.endpoint.remap is None
            and (identity is None or (identity.status in _SOUND_IDENTITY and not identity.kraft_controller
                                      and identity.tls_failure is None))
            and (result.tls is None or result.tls.status in _SOUND_TLS))


def working_bootstraps(bootstraps: Sequence[BootstrapResult],
                       endpoints: Sequence[EndpointResult]) -> dict[str, tuple[str, ...]]:
    """Per cluster id, the bootstraps (in the order given) through which clients work from here.

    A bootstrap works when it answered with the cluster's id and every endpoint it advertises works
    (`_works`). Why: probing two listeners of one cluster, one advertising a name that does not resolve
    here and the other usable, the fix that changes nothing on the brokers is to bootstrap with the
    usable one; a listener change comes second.
    """
    results = {(src, r.endpoint.node_id, r.endpoint.host, r.endpoint.port): r
               for r in endpoints for src in r.endpoint.advertised_by}
    found: dict[str, list[str]] = {}
    for b in bootstraps:
        meta = b.metadata
        if b.status != "ok" or meta is None or not meta.cluster_id or not meta.brokers:
            continue
        mine = [results.get((b.address, br.node_id, br.host, br.port)) for br in meta.brokers]
        if all(r is not None and _works(r) for r in mine):
            found.setdefault(meta.cluster_id, []).append(b.address)
    return {cluster: tuple(addresses) for cluster, addresses in found.items()}


def _works_elsewhere(result: EndpointResult, bootstraps: dict[str, BootstrapResult],
                     working: Mapping[str, Sequence[str]]) -> str | None:
    """The first fix where another bootstrap of this endpoint's cluster works from here, else None."""
    ep = result.endpoint
    clusters = {b.metadata.cluster_id for src in ep.advertised_by
                if (b := bootstraps.get(src)) is not None and b.metadata is not None and b.metadata.cluster_id}
    others = unique(a for cluster in sorted(clusters) for a in working.get(cluster, ()) if a not in ep.advertised_by)
    if not others:
        return None
    advertised = unique(format_hostport(br.host, br.port) for a in others for br in bootstraps[a].brokers)
    return (f"Bootstrap with {listed(others, 3, ' or ')}, which works from here: the same cluster "
            f"({listed(sorted(clusters), 2)}) answers there, and every endpoint it advertises "
            f"({listed(advertised, 3)}) resolves and connects from here, so clients on this network need no change "
            f"on the brokers. Only if they must use {', '.join(ep.advertised_by)}, change that listener too.")


def advertised_findings(result: EndpointResult, bootstraps: dict[str, BootstrapResult],
                        working: Mapping[str, Sequence[str]] | None = None) -> list[Finding | Repeat]:
    """What fails for a client at one advertised endpoint: resolution, connection, loopback, hosts file, port.

    Findings whose cause and fix other endpoints may share come as `Repeat`s (common.merge_repeats):
    three brokers advertising `localhost` are one listener setting, said once. `working` (from
    `working_bootstraps`) names the bootstraps of each cluster that work from here: where one of this
    endpoint's cluster does, using it is the first fix of a failing endpoint, and the listener change
    comes second.
    """
    ep = result.endpoint
    where = ep.hostport
    via = ", ".join(ep.advertised_by)
    listener = _listener_hint(result, bootstraps)
    out: list[Finding | Repeat] = []
    elsewhere = _works_elsewhere(result, bootstraps, working or {})

    def first(fix: str) -> str:
        """The listener change `fix`, after bootstrapping elsewhere where that already works."""
        return f"{elsewhere} {fix}" if elsewhere else fix

    def alone(code: str, severity: Severity, message: str, fix: str) -> Finding:
        return finding(code, severity, message, fix, node_id=ep.node_id, endpoint=where, bootstrap=source_of(result))

    def add(code: str, severity: Severity, message: str, fix: str) -> None:
        out.append(alone(code, severity, message, fix))

    def repeat(key: tuple[object, ...], together: Callable[[Sequence[Repeat]], tuple[str, str]], code: str,
               severity: Severity, message: str, fix: str) -> None:
        out.append(Repeat(key, result, alone(code, severity, message, fix), together))

    bad_host, bad_port = host_problem(ep.host), port_problem(ep.port)
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
    # A Kubernetes cluster-internal name: an operator owns the listeners, so its settings are the fix, never
    # listener lines (the operator rewrites server.properties), and never "advertise your port-forward".
    if maybe_cluster_name(ep.host):  # the Kubernetes rules load only for a name that may be one
        from kprobe.findings.kubernetes import cluster_name
        from kprobe.findings.shapes import cluster_internal_fix

        k8s = cluster_name(ep.host)
        if k8s is not None:
            proposal = cluster_internal_fix(k8s, ep.port)
    dns = result.dns
    ok_tcp = [t for t in result.tcp if t.status == "ok"]
    bad_tcp = [t for t in result.tcp if t.status != "ok"]
    came_from_elsewhere = any(
        (b := bootstraps.get(src)) is not None and b.connected_to is not None and not is_loopback_ip(b.connected_to)
        for src in ep.advertised_by
    )
    # A loopback address the user mapped to (a port-forward tried with --connect-to) is not one the broker advertises.
    if came_from_elsewhere and ep.remap is None and _is_loopback_host(ep.host, dns.addresses):
        fix = first(proposal or (f"Make {listener} advertise a name or address that clients on this network reach "
                                 "(advertised.listeners), not localhost."))
        repeat((fix,), _loopback_together(fix), "ADVERTISED_LOOPBACK", ERROR,
               f"You reached the cluster at {via}, but broker {ep.node_id} advertises {where}, a loopback "
               "address: every client connects to its own machine instead of the broker, so "
               f"{_AFTER_BOOTSTRAP}.", fix)

    if result.status == "unresolvable":
        reason = dns.error or f"{ep.host} does not resolve"
        fix = first(proposal or (
            f"Make {listener} advertise a name this network can resolve (advertised.listeners), or add "
            "a listener for this network with its own advertised name; an /etc/hosts entry only fixes "
            "this one machine."))
        # One cause: names of one zone that fail alike (every *.compute.internal name, say), with one fix.
        repeat((fix, dns.status, _zone(ep.host)), _unresolvable_together(fix), "ADVERTISED_UNRESOLVABLE", ERROR,
               f"You reached the cluster at {via}, but broker {ep.node_id} advertises {where}, which does "
               f"not resolve from here ({reason}): {_AFTER_BOOTSTRAP}.", fix)
    elif result.status == "unreachable":
        statuses = {t.status for t in bad_tcp}
        addresses = ", ".join(t.address for t in bad_tcp)
        if "timeout" in statuses:
            repeat((listener, proposal, elsewhere), _timeout_together(listener, proposal, first), "ADVERTISED_TIMEOUT",
                   ERROR,
                   f"Broker {ep.node_id} advertises {where} ({addresses}), but connections to it time out "
                   f"from here (a firewall or security group dropping packets, or a private address): "
                   f"{_AFTER_BOOTSTRAP}, after waiting for the timeout.",
                   first(f"Open the port between this network and {addresses}, or make {listener} advertise an "
                         "address this network can reach." + (f" {proposal}" if proposal else "")))
        elif statuses == {"refused"}:
            add("ADVERTISED_REFUSED", ERROR,
                f"Broker {ep.node_id} advertises {where} ({addresses}), but nothing accepts connections "
                f"there: the broker is down, or the advertised port is not the one it listens on. "
                f"Requests for partitions led by broker {ep.node_id} will fail.",
                first(_typo_proposal(result, bootstraps)
                      or f"Start broker {ep.node_id}, or make the port in advertised.listeners of {listener} "
                      "match the port in `listeners` (or the published/forwarded port)."))
        elif statuses <= {"unreachable"}:
            fix = first(proposal or f"Make {listener} advertise an address routable from this network.")
            repeat((fix, "no route"), _no_route_together(fix), "ADVERTISED_UNREACHABLE", ERROR,
                   f"Broker {ep.node_id} advertises {where} ({addresses}), which this host has no route to: "
                   f"{_AFTER_BOOTSTRAP}.", fix)
        else:  # reset during the handshake, or another socket error: say which, not "no route"
            errors = "; ".join(f"{t.address}: {t.error or t.status}" for t in bad_tcp)
            add("ADVERTISED_UNREACHABLE", ERROR,
                f"Broker {ep.node_id} advertises {where}, but connecting to it fails from here ({errors}): "
                f"{_AFTER_BOOTSTRAP}.",
                first(proposal or f"Find what answers on {where} and why it drops the connection; make {listener} "
                      "advertise an address where the broker accepts connections from this network."))
    elif result.status in SOME_ADDRESSES_FAIL and (split := family_split(result.tcp)) is not None:
        # The message and fix speak of the name and its addresses only: brokers sharing the name share both.
        message, fix = _one_family(result, split, listener)
        repeat((message, fix), _one_name_together(message, fix), "ADVERTISED_ONE_FAMILY_FAILS",
               WARNING if split.default_clients_work else ERROR, message, fix)
    elif result.status in SOME_ADDRESSES_FAIL:
        message = (f"{ep.host} resolves to {len(result.tcp)} addresses; "
                   f"{', '.join(t.address for t in ok_tcp)} connect but "
                   f"{', '.join(f'{t.address} ({t.status})' for t in bad_tcp)} do not. Clients that try a "
                   "failing address first are slow to connect or fail, depending on their address family.")
        fix = (f"Remove the records for {', '.join(t.address for t in bad_tcp)} from {ep.host}, or make the "
               "broker listen on them.")
        repeat((message, fix), _one_name_together(message, fix), "ADVERTISED_PARTIAL", WARNING, message, fix)

    for src in ep.advertised_by:
        b = bootstraps.get(src)
        if b is None or b.connected_to is None:
            continue
        boot_port = int(src.rsplit(":", 1)[1])
        if b.connected_to in dns.addresses and ep.port != boot_port:
            # A warning only where the endpoint fails; one the deadline cut has shown nothing yet.
            severity: Severity = INFO if result.status in NO_FAILURE_SEEN else WARNING
            fix = (f"If {src} is a mapped port, set advertised.listeners of that listener to the mapped "
                   f"host:port ({src}).")
            repeat((fix,), _port_together(src, fix), "PORT_DIFFERS_FROM_BOOTSTRAP", severity,
                   f"You bootstrapped through {src}, and broker {ep.node_id} advertises the same address with "
                   f"port {ep.port}. That is normal for a second listener, but is also the mark of a NAT or "
                   "port mapping that advertised.listeners does not know about.", fix)
            break
    return out


# -- the same finding at several endpoints, said once (common.merge_repeats) ---------------------------

def _vias(group: Sequence[Repeat]) -> str:
    return listed(unique(b for r in group for b in r.result.endpoint.advertised_by))


def _results(group: Sequence[Repeat]) -> list[EndpointResult]:
    return [r.result for r in group]


def _loopback_together(fix: str) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        return (f"You reached the cluster at {_vias(group)}, but the brokers advertise loopback addresses, "
                f"{at_brokers(_results(group))}: every client connects to its own machine instead of the broker, "
                f"so {_AFTER_BOOTSTRAP}.", fix)
    return together


def _zone(host: str) -> str:
    """The DNS zone a name sits in (all but its first label): names of one zone fail alike, for one reason."""
    return host.lower().rstrip(".").partition(".")[2]


def _reason(result: EndpointResult) -> str:
    """Why the name failed, without the name itself (the message lists the names)."""
    error = result.dns.error or "does not resolve"
    head = f"{result.endpoint.host}: "
    return error[len(head):] if error.startswith(head) else error


def _unresolvable_together(fix: str) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        results = _results(group)
        zone = _zone(results[0].endpoint.host)
        names = f"names under {zone}" if zone else "names"
        return (f"You reached the cluster at {_vias(group)}, but the brokers advertise {names} that do not resolve "
                f"from here ({listed(unique(_reason(r) for r in results), 3)}): {at_brokers(results)}. "
                f"{_AFTER_BOOTSTRAP[0].upper()}{_AFTER_BOOTSTRAP[1:]}.", fix)
    return together


def _failing_addresses(group: Sequence[Repeat]) -> list[str]:
    return unique(t.address for r in group for t in r.result.tcp if t.status != "ok")


def _timeout_together(listener: str, proposal: str | None,
                      first: Callable[[str], str]) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        addresses = listed(_failing_addresses(group))
        return (f"The brokers advertise {at_brokers(_results(group))}, but connections to them ({addresses}) time "
                "out from here (a firewall or security group dropping packets, or private addresses): "
                f"{_AFTER_BOOTSTRAP}, after waiting for the timeout.",
                first(f"Open the advertised ports between this network and {addresses}, or make {listener} "
                      "advertise addresses this network can reach." + (f" {proposal}" if proposal else "")))
    return together


def _no_route_together(fix: str) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        return (f"The brokers advertise {at_brokers(_results(group))}, which this host has no route to "
                f"({listed(_failing_addresses(group))}): {_AFTER_BOOTSTRAP}.", fix)
    return together


def _one_name_together(message: str, fix: str) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    """Brokers advertising one name (ports apart): the name's finding, once, naming them."""
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        return (f"The brokers advertise one name, {group[0].result.endpoint.host}: "
                f"{at_brokers(_results(group))}. {message}", fix)
    return together


def _port_together(src: str, fix: str) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        return (f"You bootstrapped through {src}, and the brokers advertise the same address with other ports: "
                f"{at_brokers(_results(group))}. That is normal for second listeners, but is also the mark of a "
                "NAT or port mapping that advertised.listeners does not know about.", fix)
    return together


def _odds(failing: int, total: int) -> str:
    """A draw's chance of a failing address, as people say it ("1 in 2", "2 in 3"): what a wait costs on average."""
    common = math.gcd(failing, total)
    return f"{failing // common} in {total // common}"


def _one_family(result: EndpointResult, split: FamilySplit, listener: str) -> tuple[str, str]:
    """Message and fix when one address family fails: which real clients fail or slow down, and by which setting.

    The client behaviour is measured (kprobe.net.dualstack, docs/dual-stack.md), not guessed.
    """
    ep = result.endpoint
    working = ", ".join(t.address for t in result.tcp if t.status == "ok")
    failing = ", ".join(f"{t.address} ({t.status})" for t in split.failed)
    bad = ", ".join(t.address for t in split.failed)
    head = (f"{ep.host} resolves to {split.working} {working}, which connect{'s' if ',' not in working else ''}, "
            f"and {split.failing} {failing}, which fail{'s' if len(split.failed) == 1 else ''}.")
    # Measured (docs/dual-stack.md): librdkafka resolves the name afresh for nearly every attempt (its address
    # list lives broker.address.ttl, 1 s; with no broker left up, 2.10 and later re-bootstrap and drop the
    # connection they were making), so each attempt is a new draw from the shuffled addresses.
    odds = _odds(len(split.failed), len(result.tcp))
    draws = (f"librdkafka draws an address at random for every connection attempt (it resolves the name afresh "
             f"each time), and draws an {split.failing} one {odds} times")
    if split.slow:
        librdkafka = (f"{draws}; each such draw waits out {LIBRDKAFKA_SETUP_TIMEOUT}, then it draws again: a "
                      f"connection over {split.working} after no wait, one or several; slow connections, not "
                      "failures")
    else:
        librdkafka = (f"{draws}; after each such draw it draws again, a second or so later (its reconnect back-off, "
                      "or a re-bootstrap when no broker is left up), which added up to a few seconds when "
                      f"measured, then it connects over {split.working}")
    if split.default_clients_work:
        message = (
            f"{head} Clients with default settings still work: the Java client uses IPv4 addresses only (Java "
            f"lists IPv4 first, and Kafka's client keeps the first address's family); {librdkafka}. Clients pinned "
            "to IPv6 fail outright: librdkafka with broker.address.family=v6, the Java client with "
            "-Djava.net.preferIPv6Addresses=true or =system.")
        if split.slow:
            message += (f" A Java client that prefers IPv6 would also wait out {JAVA_SETUP_TIMEOUT} per attempt "
                        "before failing.")
        where = "/etc/hosts' ::1 line" if is_loopback_name(ep.host) else "DNS"
        fix = (f"Remove the IPv6 addresses ({bad}) of {ep.host} from {where}, or make the broker listen on IPv6 "
               f"too ({listener} bound to [::] in `listeners`). Until then, librdkafka clients avoid the "
               "wasted attempts with broker.address.family=v4.")
    else:
        message = (
            f"{head} The Java client with default settings fails outright: Java lists IPv4 addresses first, and "
            "Kafka's client keeps only the first address's family, so it never tries IPv6 (Expiring ... "
            f"record(s)). {librdkafka[0].upper()}{librdkafka[1:]}, unless pinned with broker.address.family=v4.")
        fix = (f"Make the broker listen on {bad} ({listener} bound to 0.0.0.0 in `listeners`), or remove the "
               f"IPv4 addresses of {ep.host}. Until then, Java clients work with -Djava.net.preferIPv6Addresses=true.")
    return message, fix


def _proposal(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> str | None:
    """Listener lines, only where a bootstrap address is *known* to reach this very node.

    The evidence: the bootstrap answered from here, and DescribeConfigs on that connection said
    it is node N. Without it (identity not checked, or another node answered) no line is proposed.
    Which lines come first follows the rule `kprobe check` keeps (kprobe.findings.listener_fix): a
    listener of this network's own where the advertised host serves another network, the replacement
    first only where the advertised host is the address reached from here.
    """
    ep = result.endpoint
    for src in ep.advertised_by:
        b = bootstraps.get(src)
        if b is None or b.status != "ok" or b.node_id != ep.node_id:
            continue
        from kprobe.findings.listener_fix import keep_and_add, reached_listener, replace_port  # where lines are due

        reached = reached_listener(b)
        if _same_address(result, b):
            if ep.hostport == src:
                return None  # the very address that answered: no line to change
            return replace_port(node_id=ep.node_id, advertised=ep.hostport, source=src, reached=reached)
        return keep_and_add(node_id=ep.node_id, advertised=ep.hostport, advertised_host=ep.host, source=src,
                            protocol=_protocol_of(b), reached=reached)
    return None


def _same_address(result: EndpointResult, b: BootstrapResult) -> bool:
    """Whether the endpoint's host is the address the bootstrap reached its broker at: by name, or by address."""
    host = b.address.rpartition(":")[0].strip("[]").lower()
    return result.endpoint.host.lower() == host or (b.connected_to is not None
                                                    and b.connected_to in result.dns.addresses)


def _typo_proposal(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> str | None:
    """The proposal where the endpoint is the bootstrap's own address with another port, else None."""
    ep = result.endpoint
    if any((b := bootstraps.get(src)) is not None and b.node_id == ep.node_id and _same_address(result, b)
           for src in ep.advertised_by):
        return _proposal(result, bootstraps)
    return None


def _protocol_of(b: BootstrapResult) -> str:
    """The bootstrap's security protocol, as the report records it (PLAINTEXT when unsaid)."""
    return b.protocol or "PLAINTEXT"


def _hosts_file_only(result: EndpointResult) -> bool:
    dns = result.dns
    return (dns.in_hosts_file and dns.detail is not None and dns.detail.status != "ok"
            and not is_loopback_name(result.endpoint.host))


def hosts_file_finding(endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """RESOLVED_ONLY_VIA_HOSTS_FILE, once for every name it concerns: one cause, one fix, however many brokers.

    Three brokers named in this machine's hosts file are one set-up to change, not three problems:
    a finding per endpoint would say the same thing three times. A single endpoint keeps its
    node and endpoint; several are listed in the message.
    """
    hit = sorted((r for r in endpoints if _hosts_file_only(r)), key=lambda r: (r.endpoint.node_id, r.endpoint.host))
    if not hit:
        return []
    names = sorted({r.endpoint.host for r in hit})
    statuses = sorted({r.dns.detail.status for r in hit if r.dns.detail is not None})
    listeners = sorted({_listener_hint(r, {}) for r in hit})
    who = listed([f"{r.endpoint.host} (broker {r.endpoint.node_id})" for r in hit])
    one = len(hit) == 1
    return [about(
        "RESOLVED_ONLY_VIA_HOSTS_FILE", WARNING,
        f"{who} {'resolves' if one else 'resolve'} here only through the hosts file; DNS says "
        f"{'/'.join(statuses)}. Clients on other machines will not resolve {'it' if one else 'them'}.",
        f"Publish {listed(names)} in DNS, or make {' and '.join(listeners)} advertise "
        f"{'a name' if one else 'names'} DNS knows.", hit)]
