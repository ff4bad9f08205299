"""Findings that compare one observation with another: identity, consistency, TLS, DNS views.

Pure functions over the probe's results, like `kprobe.diagnose` (which calls them): each
finding says what a client will experience and which setting to change, and names only what
the evidence shows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from kprobe.models import BootstrapResult, EndpointResult, Finding, format_hostport

ERROR, WARNING, INFO = "error", "warning", "info"


def _source(result: EndpointResult) -> str | None:
    return result.endpoint.advertised_by[0] if result.endpoint.advertised_by else None


def identity_findings(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> list[Finding]:
    """ENDPOINT_WRONG_BROKER, ENDPOINT_NOT_KAFKA, ENDPOINT_NOT_ANSWERING, ENDPOINT_ADVERTISES_DIFFERENTLY."""
    ident = result.identity
    ep = result.endpoint
    if ident is None:
        return []
    out: list[Finding] = []
    where = ep.hostport
    if ident.status == "mismatch":
        out.append(Finding(
            "ENDPOINT_WRONG_BROKER", ERROR,
            f"Broker {ep.node_id} advertises {where}, but the Kafka broker answering there ({ident.address}) is "
            f"node {ident.node_id}. Clients send broker {ep.node_id}'s requests to node {ident.node_id}, which "
            f"refuses them (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION) or serves the wrong partitions.",
            f"Each broker must advertise an endpoint that reaches itself: fix broker {ep.node_id}'s "
            f"advertised.listeners, or the port-forward / NAT / load-balancer rule that sends {where} to node "
            f"{ident.node_id}.",
            ep.node_id, where, _source(result)))
    elif ident.status == "not_kafka":
        out.append(Finding(
            "ENDPOINT_NOT_KAFKA", ERROR,
            f"Broker {ep.node_id} advertises {where}, and something accepts connections there, but it does not "
            f"speak Kafka ({ident.detail}). Clients connect, then fail or hang on their first request.",
            f"Point broker {ep.node_id}'s advertised.listeners at its Kafka listener; check what else listens on "
            f"{where} (a proxy, another service, a TLS listener reached in plaintext or the reverse).",
            ep.node_id, where, _source(result)))
    elif ident.status == "silent":
        out.append(Finding(
            "ENDPOINT_NOT_ANSWERING", ERROR,
            f"Broker {ep.node_id} advertises {where}: connections to it are accepted, then closed or left "
            f"unanswered before any Kafka answer ({ident.detail}). TCP checks pass, yet clients connect and then "
            "fail or wait for their timeouts.",
            f"Find what holds {where}: a load balancer or proxy with no healthy backend, a broker shutting down or "
            f"too loaded to answer (its log, for the listener on port {ep.port}); clients need a broker answering "
            "there.",
            ep.node_id, where, _source(result)))
    if ident.advertised is not None and ident.status in ("match", "mismatch", "unchecked"):
        seen_here = {(b.node_id, b.host, b.port) for b in ident.advertised}
        for src in ep.advertised_by:
            b = bootstraps.get(src)
            if b is None or b.metadata is None:
                continue
            seen_boot = {(x.node_id, x.host, x.port) for x in b.metadata.brokers}
            if seen_here != seen_boot:
                here = ", ".join(f"{n}={format_hostport(h, p)}" for n, h, p in sorted(seen_here))
                boot = ", ".join(f"{n}={format_hostport(h, p)}" for n, h, p in sorted(seen_boot))
                out.append(Finding(
                    "ENDPOINT_ADVERTISES_DIFFERENTLY", WARNING,
                    f"Through {src} the cluster is {boot}; a client that then connects to broker {ep.node_id} at "
                    f"{where} is told {here}. The endpoint belongs to a listener that advertises differently, so "
                    "clients flip between the two sets on every metadata refresh.",
                    f"Make broker {ep.node_id} advertise, for the listener behind {src}, an endpoint on that same "
                    "listener (same port, same protocol).",
                    ep.node_id, where, src))
                break
    return out


def consistency_findings(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """CLUSTER_ID_MISMATCH, BROKER_SET_MISMATCH, DUPLICATE_ENDPOINT."""
    out: list[Finding] = []
    answered = [b for b in bootstraps if b.status == "ok" and b.metadata is not None]
    clusters: dict[str | None, list[str]] = defaultdict(list)
    for b in answered:
        assert b.metadata is not None
        clusters[b.metadata.cluster_id].append(b.address)
    if len(clusters) > 1:
        parts = "; ".join(f"{cid}: {', '.join(addrs)}" for cid, addrs in clusters.items())
        out.append(Finding(
            "CLUSTER_ID_MISMATCH", ERROR,
            f"The bootstrap list mixes {len(clusters)} clusters ({parts}). A client joins whichever answers "
            "first, so it sees different topics and offsets from run to run.",
            "Keep one cluster's brokers in bootstrap.servers.", bootstrap=answered[0].address))
        return out  # the other comparisons are meaningless across clusters
    sets: dict[frozenset[int], list[str]] = defaultdict(list)
    for b in answered:
        assert b.metadata is not None
        sets[frozenset(x.node_id for x in b.metadata.brokers)].append(b.address)
    if len(sets) > 1:
        parts = "; ".join(f"{sorted(ids)} via {', '.join(addrs)}" for ids, addrs in sets.items())
        out.append(Finding(
            "BROKER_SET_MISMATCH", WARNING,
            f"Bootstraps disagree on which brokers exist: {parts}. A broker is fenced or starting, or a "
            "listener exists on some brokers only; clients see partitions led by a broker they cannot reach.",
            "Check that every broker defines the same listener names and is registered (kafka-broker-api-versions, "
            "the controller's logs); a broker missing from one listener needs that listener added.",
            bootstrap=answered[0].address))
    for b in answered:
        assert b.metadata is not None
        if not b.metadata.brokers:
            out.append(Finding(
                "NO_ADVERTISED_BROKERS", ERROR,
                f"{b.address} answered, but its metadata lists no broker at all: clients have nowhere to send "
                "anything and retry until they time out.",
                "Check the brokers' registration with the controller (a broker that never finished starting, "
                "or a listener no broker defines).", bootstrap=b.address))
        ids = [x.node_id for x in b.metadata.brokers]
        twice = _dupes(ids)
        if twice:
            out.append(Finding(
                "DUPLICATE_NODE_ID", ERROR,
                f"{b.address} lists node id(s) {', '.join(map(str, twice[:20]))} more than once, with different "
                "endpoints. Clients keep one of them at random and send that node's requests there.",
                "Two brokers share a node.id (a cloned config or volume): give every broker its own node.id.",
                twice[0], bootstrap=b.address))
    owners: dict[tuple[str, int], set[int]] = defaultdict(set)
    for r in endpoints:
        owners[(r.endpoint.host.lower(), r.endpoint.port)].add(r.endpoint.node_id)
    for (host, port), owner_ids in sorted(owners.items()):
        if len(owner_ids) > 1:
            ids = sorted(owner_ids)
            where = format_hostport(host, port)
            out.append(Finding(
                "DUPLICATE_ENDPOINT", ERROR,
                f"Brokers {', '.join(str(i) for i in sorted(ids))} all advertise {where}. Only one broker can "
                "answer there: clients send the others' requests to it and fail with NOT_LEADER_OR_FOLLOWER.",
                f"Give each broker its own advertised endpoint (advertised.listeners of brokers "
                f"{', '.join(str(i) for i in sorted(ids))}).",
                min(ids), where))
    return out


def tls_findings(result: EndpointResult) -> list[Finding]:
    """TLS_UNTRUSTED, TLS_HOSTNAME_MISMATCH, TLS_EXPIRING, TLS_HANDSHAKE_FAILED."""
    tls = result.tls
    ep = result.endpoint
    if tls is None or tls.status in ("ok", "not_checked"):
        return []
    where = ep.hostport
    names = ", ".join(tls.names) or "no names"
    src = _source(result)
    if tls.status == "handshake_failed":
        return [Finding(
            "TLS_HANDSHAKE_FAILED", ERROR,
            f"Broker {ep.node_id} advertises {where} on a TLS listener, but the TLS handshake there fails "
            f"({tls.error}). Clients connect and fail before their first request.",
            f"Check that {where} is a TLS (SSL or SASL_SSL) listener: the advertised port may belong to a "
            "PLAINTEXT listener, or a proxy in between does not speak TLS.",
            ep.node_id, where, src)]
    if tls.status == "untrusted":
        spared = "" if tls.client_verifies_chain else (
            " Your settings skip this check (enable.ssl.certificate.verification=false), so these clients connect; "
            "every client that verifies certificates (the default) fails.")
        return [Finding(
            "TLS_UNTRUSTED", ERROR if tls.client_verifies_chain else WARNING,
            f"The certificate at {where} (subject {tls.subject}, names {names}, issuer {tls.issuer}) does not "
            f"verify against the trusted CAs (ssl.ca.location, or the system store without it): {tls.error}. "
            "Clients refuse the connection." + spared,
            "Give clients the CA that signed the broker certificates (ssl.ca.location), or have the brokers "
            "present a chain that ends at a CA clients trust (include intermediates in the keystore).",
            ep.node_id, where, src)]
    if tls.status == "hostname_mismatch":
        spared = "" if tls.client_verifies_name else (
            " Your settings skip the name check (ssl.endpoint.identification.algorithm=none), so these clients "
            "connect; every client with the default check fails.")
        return [Finding(
            "TLS_HOSTNAME_MISMATCH", ERROR if tls.client_verifies_name else WARNING,
            f"Broker {ep.node_id} advertises {ep.host}, but its certificate names {names}. Clients verify the "
            "advertised name (ssl.endpoint.identification.algorithm=https, librdkafka's default), so the "
            "bootstrap works and every connection to the advertised endpoint fails the handshake." + spared,
            f"Advertise a name the certificate holds ({names}) in advertised.listeners of this listener, or "
            f"issue the broker a certificate whose subjectAltName includes {ep.host}.",
            ep.node_id, where, src)]
    if tls.status == "expiring":
        severity = ERROR if (tls.days_left or 0) <= 0 else WARNING
        return [Finding(
            "TLS_EXPIRING", severity,
            f"The certificate at {where} (names {names}) expires {tls.not_after} ({tls.days_left} days left). "
            "After that every client handshake fails.",
            "Renew the broker certificate and reload it (dynamic ssl.keystore.location update, or a rolling "
            "restart) before it expires.",
            ep.node_id, where, src)]
    return []


def dns_view_findings(result: EndpointResult) -> list[Finding]:
    """DNS_VIEWS_DISAGREE: the primary resolver and a compared nameserver answer differently."""
    out: list[Finding] = []
    ep = result.endpoint
    mine = result.dns
    for other in result.compared_dns:
        a = set(mine.addresses) if mine.status == "ok" else set()
        b = set(other.addresses) if other.status == "ok" else set()
        if a == b and (mine.status == "ok") == (other.status == "ok"):
            continue
        primary = "the system resolver" if mine.source in ("system", "literal") else "the nameserver"
        out.append(Finding(
            "DNS_VIEWS_DISAGREE", WARNING,
            f"{ep.host} (broker {ep.node_id}) resolves to {_say(a, mine.status)} through {primary} but to "
            f"{_say(b, other.status)} through nameserver {other.server}. Clients on the two networks "
            "reach different places (split-horizon DNS): a fix that works from one fails from the other.",
            f"Decide which network each listener serves, and advertise on each listener a name that resolves "
            f"correctly there; {ep.host} cannot serve both if the views disagree.",
            ep.node_id, ep.hostport, _source(result)))
    return out


def _say(addresses: set[str], status: str) -> str:
    return ", ".join(sorted(addresses)) if addresses else status


def _dupes(ids: list[int]) -> list[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for i in ids:
        (twice if i in seen else seen).add(i)
    return sorted(twice)
