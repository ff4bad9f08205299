"""Findings on who answers at an endpoint: the identity step's results judged.

An endpoint that accepts TCP is not yet one a client can use: the Kafka broker answering there
must be the node advertised, and must advertise the same cluster as the bootstrap's listener.
"""

from __future__ import annotations

from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.findings.common import source_of
from kprobe.hostport import format_hostport
from kprobe.models import BootstrapResult, EndpointResult, Finding


def identity_findings(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> list[Finding]:
    """ENDPOINT_IS_CONTROLLER, ENDPOINT_WRONG_BROKER, ENDPOINT_NOT_KAFKA, ENDPOINT_NOT_ANSWERING, and
    ENDPOINT_ADVERTISES_DIFFERENTLY.
    """
    ident = result.identity
    ep = result.endpoint
    if ident is None:
        return []
    out: list[Finding] = []
    where = ep.hostport
    if ident.kraft_controller:
        # Which node it is matters less than what it is: no client request is served there.
        node = f" (node {ident.node_id})" if ident.node_id is not None else ""
        return [finding(
            "ENDPOINT_IS_CONTROLLER", ERROR,
            f"Broker {ep.node_id} advertises {where} to clients, but a KRaft controller listener answers there"
            f"{node}, at {ident.address}: it offers no Metadata, Produce or Fetch for clients, so every client "
            f"request to broker {ep.node_id} fails (Java: \"The node does not support METADATA\", KAFKA-16612). "
            "Clients also send metadata requests there, so records for other brokers' partitions can fail too "
            "(the Java producer with UnsupportedVersionException, librdkafka with timeouts).",
            f"Fix broker {ep.node_id}'s advertised.listeners so the client listener advertises the broker's own "
            "host:port, not a controller's (controller.listener.names belong to the quorum; never list a controller "
            "listener in a broker's advertised.listeners).",
            node_id=ep.node_id, endpoint=where, bootstrap=source_of(result))]
    if ident.status == "mismatch":
        out.append(finding(
            "ENDPOINT_WRONG_BROKER", ERROR,
            f"Broker {ep.node_id} advertises {where}, but the Kafka broker answering there ({ident.address}) is "
            f"node {ident.node_id}. Clients send broker {ep.node_id}'s requests to node {ident.node_id}, which "
            f"refuses them (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION) or serves the wrong partitions.",
            f"Each broker must advertise an endpoint that reaches itself: fix broker {ep.node_id}'s "
            f"advertised.listeners, or the port-forward / NAT / load-balancer rule that sends {where} to node "
            f"{ident.node_id}.",
            node_id=ep.node_id, endpoint=where, bootstrap=source_of(result)))
    elif ident.status == "not_kafka":
        out.append(finding(
            "ENDPOINT_NOT_KAFKA", ERROR,
            f"Broker {ep.node_id} advertises {where}, and something accepts connections there, but it does not "
            f"speak Kafka ({ident.detail}). Clients connect, then fail or hang on their first request.",
            f"Point broker {ep.node_id}'s advertised.listeners at its Kafka listener; check what else listens on "
            f"{where} (a proxy, another service, a TLS listener reached in plaintext or the reverse).",
            node_id=ep.node_id, endpoint=where, bootstrap=source_of(result)))
    elif ident.status == "silent":
        out.append(finding(
            "ENDPOINT_NOT_ANSWERING", ERROR,
            f"Broker {ep.node_id} advertises {where}: connections to it are accepted, then closed or left "
            f"unanswered before any Kafka answer ({ident.detail}). TCP checks pass, yet clients connect and then "
            "fail or wait for their timeouts.",
            f"Find what holds {where}: a load balancer or proxy with no healthy backend, a broker shutting down or "
            f"too loaded to answer (its log, for the listener on port {ep.port}); clients need a broker answering "
            "there.",
            node_id=ep.node_id, endpoint=where, bootstrap=source_of(result)))
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
                out.append(finding(
                    "ENDPOINT_ADVERTISES_DIFFERENTLY", WARNING,
                    f"Through {src} the cluster is {boot}; a client that then connects to broker {ep.node_id} at "
                    f"{where} is told {here}. The endpoint belongs to a listener that advertises differently, so "
                    "clients flip between the two sets on every metadata refresh.",
                    f"Make broker {ep.node_id} advertise, for the listener behind {src}, an endpoint on that same "
                    "listener (same port, same protocol).",
                    node_id=ep.node_id, endpoint=where, bootstrap=src))
                break
    return out
