"""Findings on the TLS step's results: trust, the advertised name, expiry, the handshake itself."""

from __future__ import annotations

from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.findings.common import source_of
from kprobe.models import EndpointResult, Finding


def tls_findings(result: EndpointResult) -> list[Finding]:
    """TLS_UNTRUSTED, TLS_HOSTNAME_MISMATCH, TLS_EXPIRING, TLS_HANDSHAKE_FAILED."""
    tls = result.tls
    ep = result.endpoint
    if tls is None or tls.status in ("ok", "not_checked"):
        return []
    where = ep.hostport
    names = ", ".join(tls.names) or "no names"
    src = source_of(result)
    if tls.status == "handshake_failed":
        return [finding(
            "TLS_HANDSHAKE_FAILED", ERROR,
            f"Broker {ep.node_id} advertises {where} on a TLS listener, but the TLS handshake there fails "
            f"({tls.error}). Clients connect and fail before their first request.",
            f"Check that {where} is a TLS (SSL or SASL_SSL) listener: the advertised port may belong to a "
            "PLAINTEXT listener, or a proxy in between does not speak TLS.",
            node_id=ep.node_id, endpoint=where, bootstrap=src)]
    if tls.status == "untrusted":
        spared = "" if tls.client_verifies_chain else (
            " Your settings skip this check (enable.ssl.certificate.verification=false), so these clients connect; "
            "every client that verifies certificates (the default) fails.")
        return [finding(
            "TLS_UNTRUSTED", ERROR if tls.client_verifies_chain else WARNING,
            f"The certificate at {where} (subject {tls.subject}, names {names}, issuer {tls.issuer}) does not "
            f"verify against the trusted CAs (ssl.ca.location, or the system store without it): {tls.error}. "
            "Clients refuse the connection." + spared,
            "Give clients the CA that signed the broker certificates (ssl.ca.location), or have the brokers "
            "present a chain that ends at a CA clients trust (include intermediates in the keystore).",
            node_id=ep.node_id, endpoint=where, bootstrap=src)]
    if tls.status == "hostname_mismatch":
        spared = "" if tls.client_verifies_name else (
            " Your settings skip the name check (ssl.endpoint.identification.algorithm=none), so these clients "
            "connect; every client with the default check fails.")
        return [finding(
            "TLS_HOSTNAME_MISMATCH", ERROR if tls.client_verifies_name else WARNING,
            f"Broker {ep.node_id} advertises {ep.host}, but its certificate names {names}. Clients verify the "
            "advertised name (ssl.endpoint.identification.algorithm=https, librdkafka's default), so the "
            "bootstrap works and every connection to the advertised endpoint fails the handshake." + spared,
            f"Advertise a name the certificate holds ({names}) in advertised.listeners of this listener, or "
            f"issue the broker a certificate whose subjectAltName includes {ep.host}.",
            node_id=ep.node_id, endpoint=where, bootstrap=src)]
    if tls.status == "expiring":
        severity = ERROR if (tls.days_left or 0) <= 0 else WARNING
        return [finding(
            "TLS_EXPIRING", severity,
            f"The certificate at {where} (names {names}) expires {tls.not_after} ({tls.days_left} days left). "
            "After that every client handshake fails.",
            "Renew the broker certificate and reload it (dynamic ssl.keystore.location update, or a rolling "
            "restart) before it expires.",
            node_id=ep.node_id, endpoint=where, bootstrap=src)]
    return []
