"""Findings on the TLS step's results: trust, the advertised name, expiry, the handshake itself, and
two certificates that mislead: an ingress controller's default one, and an IP held as a name.

An ingress or router in front of Kafka passes each TLS connection through to the broker its SNI
names; a name it has no route for gets the controller's own default certificate instead. Read
as "untrusted" or "hostname mismatch", that sends people to their CA files, when what is missing
is a route: so a recognised default certificate is its own finding, and replaces those.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from kprobe.findings.bootstrap import CLIENT_KEY_FIX
from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.findings.common import Repeat, about, listed, source_of
from kprobe.models import EndpointResult, Finding, TlsResult

# The certificates ingress controllers and routers present when no route has the SNI a client
# sent, recognised by the common name of their subject or issuer (exactly, so a certificate that
# merely mentions an ingress is not taken for one): who presents it, and the route that is missing.
_DEFAULT_CERTIFICATES: tuple[tuple[str, str, re.Pattern[str], str], ...] = (
    # ingress-nginx makes it at start when no --default-ssl-certificate is given (O=Acme Co).
    ("the NGINX Ingress Controller's (ingress-nginx)", "subject",
     re.compile(r"Kubernetes Ingress Controller Fake Certificate"),
     "an Ingress rule with host {host} and the annotation nginx.ingress.kubernetes.io/ssl-passthrough: \"true\" "
     "(on a controller started with --enable-ssl-passthrough), to broker {node}'s TLS listener"),
    # The Ingress Operator's own CA signs the *.apps wildcard every router serves by default.
    ("the OpenShift router's", "issuer", re.compile(r"(cluster-)?ingress-operator@\d+"),
     "a passthrough Route (spec.tls.termination: passthrough) with spec.host {host}, to broker {node}'s service"),
    ("Traefik's", "subject", re.compile(r"TRAEFIK DEFAULT CERT"),
     "an IngressRouteTCP with the rule HostSNI(`{host}`) and tls.passthrough: true, to broker {node}'s service"),
)


def ingress_default(tls: TlsResult) -> tuple[str, str] | None:
    """(whose default certificate, which route it lacks) when `tls` shows one, else None."""
    for owner, where, pattern, route in _DEFAULT_CERTIFICATES:
        name = tls.subject if where == "subject" else tls.issuer
        if name is not None and pattern.fullmatch(name.strip()):
            return owner, route
    return None


def ip_held_as_text(host: str, tls: TlsResult) -> str | None:
    """How the certificate holds advertised IP `host` when not as an IP entry: `DNS:x` or `CN=x`, else None.

    Only an IP host can be held so: an `IP:` entry's text is always an address, so a host with the
    same text is an IP literal too, and matches it. (The CN counts only where it spells the address.)
    """
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None

    def same(text: str) -> bool:
        try:
            return ipaddress.ip_address(text.strip().strip("[]")) == ip
        except ValueError:
            return False

    if any(san.startswith("IP:") and same(san[3:]) for san in tls.sans):
        return None  # held as an address after all: whatever fails, it is not the type
    held = next((san for san in tls.sans if san.startswith("DNS:") and same(san[4:])), None)
    if held is None and tls.subject is not None and same(tls.subject):
        held = f"CN={tls.subject}"
    return held


def client_certificate_findings(result: EndpointResult) -> list[Finding]:
    """CLIENT_CERTIFICATE_REQUIRED or _REFUSED at an advertised endpoint, from the identity request's TLS alert.

    The TLS check only completes a handshake, and with TLS 1.3 a listener with ssl.client.auth=required
    completes it too: its alert comes at the first request, which the identity check makes. A bootstrap
    that takes no client certificate may so advertise endpoints that require one (another listener's
    port, a --connect-to target): clients bootstrap, then fail every connection to that broker.
    """
    identity = result.identity
    if identity is None or identity.tls_failure not in ("client_certificate_required", "client_certificate_refused"):
        return []
    ep = result.endpoint
    where = ep.hostport
    if identity.tls_failure == "client_certificate_required":
        return [finding(
            "CLIENT_CERTIFICATE_REQUIRED", ERROR,
            f"Broker {ep.node_id} advertises {where}, whose listener requires a client certificate "
            f"(ssl.client.auth=required), and the client sent none ({identity.detail}). Clients bootstrap, then fail "
            f"every connection to broker {ep.node_id}, often as a closed connection rather than a TLS error.",
            f"{CLIENT_KEY_FIX} Or, if that listener should not require them, set its ssl.client.auth to none "
            "(listener.name.<listener>.ssl.client.auth), or advertise a listener that takes this client as it is.",
            node_id=ep.node_id, endpoint=where, bootstrap=source_of(result))]
    return [finding(
        "CLIENT_CERTIFICATE_REFUSED", ERROR,
        f"Broker {ep.node_id} advertises {where}, whose listener refused the client certificate sent "
        f"({identity.detail}): its CA is not in that listener's truststore, or it has expired or is not meant for "
        f"clients. Clients bootstrap, then fail every connection to broker {ep.node_id}.",
        "Use a client certificate signed by a CA that listener trusts, or add its CA to the listener's truststore "
        "(listener.name.<listener>.ssl.truststore.location) and reload it.",
        node_id=ep.node_id, endpoint=where, bootstrap=source_of(result))]


def tls_findings(result: EndpointResult) -> list[Finding | Repeat]:
    """TLS_INGRESS_DEFAULT_CERTIFICATE, TLS_UNTRUSTED, TLS_SAN_TYPE_MISMATCH, TLS_HOSTNAME_MISMATCH, TLS_EXPIRING,
    TLS_HANDSHAKE_FAILED: at most one per endpoint, the one that names the cause. TLS_UNTRUSTED comes as a
    `Repeat`: brokers whose certificates one untrusted CA issued are one CA to hand clients, said once.
    """
    tls = result.tls
    ep = result.endpoint
    if tls is None or tls.status == "not_checked":
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
    default = ingress_default(tls)
    if default is not None:  # whatever else fails about it, the cause is the missing route
        owner, route = default
        return [finding(
            "TLS_INGRESS_DEFAULT_CERTIFICATE", ERROR,
            f"Broker {ep.node_id} advertises {where}, but the TLS server there presents {owner} default "
            f"certificate (subject {tls.subject}, names {names}, issuer {tls.issuer}), not a broker's: the ingress "
            f"or router in front of the brokers has no route for {ep.host}, the server name (SNI) clients send, so "
            f"it answered the connection itself instead of passing it through to broker {ep.node_id}. Clients "
            "bootstrap, then fail every connection to this broker: unless they trust that certificate the "
            "handshake fails (Java: SSL handshake failed; librdkafka: certificate verify failed), and past it is "
            "the proxy's default server, which speaks HTTP, not Kafka.",
            f"Add a route for {ep.host}: " + route.format(host=ep.host, node=ep.node_id) + "; or make broker "
            f"{ep.node_id}'s listener advertise a name that already has a route.",
            node_id=ep.node_id, endpoint=where, bootstrap=src)]
    if tls.status == "ok":
        return []
    if tls.status == "untrusted":
        spared = "" if tls.client_verifies_chain else (
            " Your settings skip this check (enable.ssl.certificate.verification=false), so these clients connect; "
            "every client that verifies certificates (the default) fails.")
        fix = ("Give clients the CA that signed the broker certificates (ssl.ca.location), or have the brokers "
               "present a chain that ends at a CA clients trust (include intermediates in the keystore).")
        alone = finding(
            "TLS_UNTRUSTED", ERROR if tls.client_verifies_chain else WARNING,
            f"The certificate at {where} (subject {tls.subject}, names {names}, issuer {tls.issuer}) does not "
            f"verify against the trusted CAs (ssl.ca.location, or the system store without it): {tls.error}. "
            "Clients refuse the connection." + spared, fix,
            node_id=ep.node_id, endpoint=where, bootstrap=src)
        issuer, error = tls.issuer, tls.error

        def together(group: Sequence[Repeat]) -> tuple[str, str]:
            return (f"The certificates at {listed([r.detail for r in group])}, all issued by {issuer}, do not "
                    "verify against the trusted CAs (ssl.ca.location, or the system store without it): "
                    f"{error}. Clients refuse the connections." + spared, fix)

        # One issuer and one verification error: one CA clients lack, however many brokers present it.
        return [Repeat((issuer, error), result, alone, together, detail=f"{where} (subject {tls.subject})")]
    if tls.status == "hostname_mismatch":
        spared = "" if tls.client_verifies_name else (
            " Your settings skip the name check (ssl.endpoint.identification.algorithm=none), so these clients "
            "connect; every client with the default check fails.")
        held = ip_held_as_text(ep.host, tls)
        if held is not None:
            kind = "a DNS-type subjectAltName entry" if held.startswith("DNS:") else "its subject common name"
            dns = ", ".join(san[4:] for san in tls.sans if san.startswith("DNS:") and san != held) or "none"
            return [finding(
                "TLS_SAN_TYPE_MISMATCH", ERROR if tls.client_verifies_name else WARNING,
                f"Broker {ep.node_id} advertises the IP address {ep.host}, and its certificate holds {ep.host} only "
                f"as {kind} ({held}), not as an IP address entry (IP:{ep.host}). Clients match an IP address "
                "only against IP-type entries (Java's HostnameChecker, OpenSSL's X509_check_ip_asc), so the text "
                f"does not count: a Java client fails with \"No subject alternative names matching IP address "
                f"{ep.host} found\", librdkafka with \"certificate verify failed\" and advice to check "
                "ssl.ca.location, which misleads. The bootstrap can work by name; every connection to this "
                "endpoint fails the handshake." + spared,
                f"Issue the broker a certificate with IP:{ep.host} in its subjectAltName (openssl "
                f"subjectAltName=IP:{ep.host}; keytool -ext SAN=ip:{ep.host}; cert-manager spec.ipAddresses, not "
                f"dnsNames), or advertise a DNS name the certificate holds (DNS names: {dns}).",
                node_id=ep.node_id, endpoint=where, bootstrap=src)]
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
        if severity == WARNING:
            return []  # said once per certificate, for every endpoint that presents it: expiring_once()
        return [finding(
            "TLS_EXPIRING", severity,
            f"The certificate at {where} (names {names}) expires {tls.not_after} ({tls.days_left} days left). "
            "After that every client handshake fails.",
            "Renew the broker certificate and reload it (dynamic ssl.keystore.location update, or a rolling "
            "restart) before it expires.",
            node_id=ep.node_id, endpoint=where, bootstrap=src)]
    return []


def expiring_once(results: Sequence[EndpointResult]) -> list[Finding]:
    """TLS_EXPIRING warnings, one per certificate: a cluster's brokers often share one (a wildcard).

    Three endpoints presenting the certificate that expires Friday are one renewal to do.
    An expired certificate stays an error per endpoint: it makes that endpoint unusable, and an
    error that names no endpoint could not say which.
    """
    groups: dict[tuple[str, tuple[str, ...]], list[EndpointResult]] = {}
    for r in results:
        tls = r.tls
        if tls is not None and tls.status == "expiring" and (tls.days_left or 0) > 0:
            groups.setdefault((str(tls.not_after), tuple(tls.names)), []).append(r)
    out = []
    for (not_after, names), hit in groups.items():
        first = hit[0]
        assert first.tls is not None
        out.append(about(
            "TLS_EXPIRING", WARNING,
            f"The certificate at {listed([r.endpoint.hostport for r in hit])} (names {', '.join(names) or 'no names'}) "
            f"expires {not_after} ({first.tls.days_left} days left). After that every client handshake fails.",
            "Renew the broker certificate and reload it (dynamic ssl.keystore.location update, or a rolling "
            "restart) before it expires.", hit))
    return out
