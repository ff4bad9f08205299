"""TLS at each advertised endpoint (kprobe/findings/tls.py), proven on plain data.

The TLS lab stages a good certificate, a SAN mismatch, an untrusted chain, a certificate five days
from expiry, a plaintext port and an IP address held as a DNS name; it cannot stage an *expired*
certificate kept in service, and each severity that depends on the client's own settings needs
both settings. The certificates here are the TLS lab's (broker.tls.kprobe.test, issued by the
kprobe test CA), and the default certificates ingress controllers present where the sni-ingress
lab's proxy has no route (ingress-nginx's, which the lab makes; OpenShift's and Traefik's, which
it cannot run).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from observations import Case, Expected, Phrase, boot, case, check, endpoint, params

from kprobe.models import EndpointResult, Identity, TcpStatus, TlsResult, TlsStatus

BOOT = "broker.tls.kprobe.test:9093"
GOOD_NAMES = ("broker.tls.kprobe.test",)


def tls_endpoint(host: str, tls: TlsResult, connect: TcpStatus) -> EndpointResult:
    """The one broker of the TLS lab, advertised as `host`, with its TLS check."""
    return endpoint(0, host, 9093, BOOT, dns=["192.0.2.30"], tls=tls, connect=connect)


def cert(status: TlsStatus, **fields: object) -> TlsResult:
    """A TLS result for the lab's certificate, with what the row changes."""
    base: dict[str, object] = dict(address="192.0.2.30", subject="broker.tls.kprobe.test", names=GOOD_NAMES,
                                   sans=tuple(f"DNS:{n}" for n in GOOD_NAMES), issuer="kprobe test CA", not_after="Nov 23 12:00:00 2028 GMT", days_left=731.0,
                                   trusted=True, hostname_ok=True)
    base.update(fields)
    return TlsResult(status=status, **base)


def tls_case(name: str, host: str, tls: TlsResult, expect: list[Expected], *, connect: TcpStatus = "ok",
             says: Sequence[Phrase] = (), never_says: Sequence[Phrase] = ()) -> Case:
    """A row with the TLS lab's bootstrap, and its one endpoint advertised as `host`."""
    b = boot(BOOT, connected_to="192.0.2.30", advertises=[(0, host, 9093)], node_id=0, protocol="SSL")
    return case(name, [b], [tls_endpoint(host, tls, connect)], expect, says=says, never_says=never_says)


INTERNAL = "kafka-tls.internal.kprobe.test"

# Behind an ingress (the sni-ingress lab): every name resolves to the proxy, which routes on SNI.
INGRESS_BOOT = "bootstrap.partners.kafka.apps.kprobe.test:443"
INGRESS_IP = "192.0.2.80"
UNROUTED = "broker-2.partners.kafka.apps.kprobe.test"
NGINX_FAKE = "Kubernetes Ingress Controller Fake Certificate"
# An OpenShift cluster's passthrough route hosts (Strimzi's pattern), under the router's *.apps wildcard.
OCP_BROKER = "my-cluster-kafka-3-kafka.apps.ocp.example.com"


def ingress_case(name: str, host: str, tls: TlsResult, expect: list[Expected], *, says: Sequence[Phrase] = (),
                 never_says: Sequence[Phrase] = ()) -> Case:
    """A row where broker 2 is advertised behind the ingress as `host`, on the proxy's port 443."""
    b = boot(INGRESS_BOOT, connected_to=INGRESS_IP, advertises=[(2, host, 443)], node_id=0, protocol="SSL")
    ep = endpoint(2, host, 443, INGRESS_BOOT, dns=[INGRESS_IP], tls=tls)
    return case(name, [b], [ep], expect, says=says, never_says=never_says)


def default_cert(status: TlsStatus, subject: str, issuer: str, names: tuple[str, ...], **fields: object) -> TlsResult:
    """What the proxy's default server presents, as the TLS step records it."""
    return TlsResult(status=status, address=INGRESS_IP, subject=subject, names=names,
                     sans=tuple(f"DNS:{n}" for n in names), issuer=issuer, not_after="Nov 23 12:00:00 2027 GMT",
                     days_left=365.0, trusted=status != "untrusted", hostname_ok=status == "ok", **fields)


def ip_case(name: str, host: str, tls: TlsResult, expect: list[Expected], *, says: Sequence[Phrase] = (),
            never_says: Sequence[Phrase] = ()) -> Case:
    """A row where the TLS lab's broker is advertised by its IP address (bootstrapped by name)."""
    b = boot(BOOT, connected_to="192.0.2.30", advertises=[(0, host, 9093)], node_id=0, protocol="SSL")
    return case(name, [b], [endpoint(0, host, 9093, BOOT, tls=tls)], expect, says=says, never_says=never_says)


def ip_cert(host: str, sans: tuple[str, ...], **fields: object) -> TlsResult:
    """The TLS lab's certificate with these subjectAltName entries, refused for advertised IP `host`."""
    base: dict[str, object] = dict(address=host, subject="broker.tls.kprobe.test", issuer="kprobe test CA",
                                   names=tuple(s.split(":", 1)[1] for s in sans), sans=sans,
                                   not_after="Nov 23 12:00:00 2028 GMT", days_left=731.0, trusted=True,
                                   hostname_ok=False)
    base.update(fields)
    return TlsResult(status="hostname_mismatch", **base)

def refused_client(host: str, failure: str, alert: str) -> Case:
    """The endpoint's TLS check passed (TLS 1.3), then its identity request met the broker's alert."""
    b = boot(BOOT, connected_to="192.0.2.30", advertises=[(0, host, 9093)], node_id=0, protocol="SSL")
    detail = f'the broker ended TLS with the alert "{alert}": [SSL] (_ssl.c:2580)'
    ep = endpoint(0, host, 9093, BOOT, dns=["192.0.2.30"], tls=cert("ok"),
                  identity=Identity(status="unchecked", detail=detail, address="192.0.2.30", tls_failure=failure))
    code = "CLIENT_CERTIFICATE_REQUIRED" if failure == "client_certificate_required" else "CLIENT_CERTIFICATE_REFUSED"
    return case(f"endpoint-{failure}", [b], [ep], [(code, "error", 0, f"{host}:9093")],
                says=[(code, 0, "message", f'alert "{alert}"'), (code, 0, "message", "Clients bootstrap, then fail")],
                never_says=[(code, 0, "fix", "DescribeConfigs")])


CASES: list[Case] = [
    tls_case("good-certificate", "broker.tls.kprobe.test", cert("ok"), []),
    # A listener requiring (or refusing) the client certificate behind a bootstrap that takes the client as it is:
    # its own finding, and no IDENTITY_NOT_CHECKED with a DescribeConfigs fix.
    refused_client("broker.tls.kprobe.test", "client_certificate_required", "bad certificate"),
    refused_client("broker.tls.kprobe.test", "client_certificate_refused", "certificate unknown"),
    tls_case(
        "certificate-names-another-host",
        INTERNAL, cert("hostname_mismatch", hostname_ok=False),
        [("TLS_HOSTNAME_MISMATCH", "error", 0, f"{INTERNAL}:9093")],
        says=[("TLS_HOSTNAME_MISMATCH", 0, "message", f"advertises {INTERNAL}, but its certificate names "
                                                       "broker.tls.kprobe.test"),
              ("TLS_HOSTNAME_MISMATCH", 0, "message", "the bootstrap works and every connection"),
              ("TLS_HOSTNAME_MISMATCH", 0, "fix", f"subjectAltName includes {INTERNAL}")],
        never_says=[("TLS_HOSTNAME_MISMATCH", 0, "message", "Your settings skip")],
    ),
    tls_case(
        "certificate-names-another-host-and-these-settings-skip-the-name-check",
        INTERNAL, cert("hostname_mismatch", hostname_ok=False, client_verifies_name=False),
        [("TLS_HOSTNAME_MISMATCH", "warning", 0, f"{INTERNAL}:9093")],
        says=[("TLS_HOSTNAME_MISMATCH", 0, "message", "ssl.endpoint.identification.algorithm=none"),
              ("TLS_HOSTNAME_MISMATCH", 0, "message", "every client with the default check fails")],
    ),
    tls_case(
        "chain-from-another-ca-behind-a-trusted-bootstrap",
        "broker.tls.kprobe.test",
        cert("untrusted", trusted=False, issuer="other-ca", error="unable to get local issuer certificate"),
        [("TLS_UNTRUSTED", "error", 0, "broker.tls.kprobe.test:9093")],
        says=[("TLS_UNTRUSTED", 0, "message", "issuer other-ca"),
              ("TLS_UNTRUSTED", 0, "message", "unable to get local issuer certificate"),
              ("TLS_UNTRUSTED", 0, "fix", "ssl.ca.location")],
        never_says=[("TLS_UNTRUSTED", 0, "message", "Your settings skip")],
    ),
    tls_case(
        "chain-from-another-ca-and-these-settings-skip-verification",
        "broker.tls.kprobe.test",
        cert("untrusted", trusted=False, issuer="other-ca", error="unable to get local issuer certificate",
             client_verifies_chain=False),
        [("TLS_UNTRUSTED", "warning", 0, "broker.tls.kprobe.test:9093")],
        says=[("TLS_UNTRUSTED", 0, "message", "enable.ssl.certificate.verification=false"),
              ("TLS_UNTRUSTED", 0, "message", "every client that verifies certificates (the default) fails")],
    ),
    tls_case(
        "certificate-five-days-from-expiry",
        "broker.tls.kprobe.test", cert("expiring", not_after="Nov 28 12:00:00 2026 GMT", days_left=4.5),
        [("TLS_EXPIRING", "warning", 0, "broker.tls.kprobe.test:9093")],
        says=[("TLS_EXPIRING", 0, "message", "expires Nov 28 12:00:00 2026 GMT (4.5 days left)"),
              ("TLS_EXPIRING", 0, "fix", "Renew the broker certificate")],
    ),
    case(
        # Three brokers presenting one wildcard certificate are one renewal, said once.
        "three-brokers-share-one-expiring-certificate",
        [boot("b0.kafka.example.com:9093", connected_to="192.0.2.30", node_id=0, protocol="SSL",
              advertises=[(n, f"b{n}.kafka.example.com", 9093) for n in range(3)])],
        [endpoint(n, f"b{n}.kafka.example.com", 9093, "b0.kafka.example.com:9093", dns=[f"192.0.2.{30 + n}"],
                  tls=cert("expiring", address=f"192.0.2.{30 + n}", names=("*.kafka.example.com",),
                           not_after="Nov 28 12:00:00 2026 GMT", days_left=4.5)) for n in range(3)],
        [("TLS_EXPIRING", "warning", None, None)],
        says=[("TLS_EXPIRING", None, "message", "The certificate at b0.kafka.example.com:9093, b1.kafka.example.com:9093, "
               "b2.kafka.example.com:9093 (names *.kafka.example.com) expires Nov 28 12:00:00 2026 GMT")],
    ),
    tls_case(
        "certificate-expired-two-days-ago",
        "broker.tls.kprobe.test", cert("expiring", not_after="Nov 21 12:00:00 2026 GMT", days_left=-2.0),
        [("TLS_EXPIRING", "error", 0, "broker.tls.kprobe.test:9093")],
        says=[("TLS_EXPIRING", 0, "message", "every client handshake fails")],
    ),
    tls_case(
        "advertised-port-is-a-plaintext-listener",
        "broker.tls.kprobe.test",
        TlsResult(status="handshake_failed", address="192.0.2.30",
                  error="TLS handshake with 192.0.2.30:9093 failed: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred "
                        "in violation of protocol (_ssl.c:1006)"),
        [("TLS_HANDSHAKE_FAILED", "error", 0, "broker.tls.kprobe.test:9093")],
        says=[("TLS_HANDSHAKE_FAILED", 0, "message", "UNEXPECTED_EOF_WHILE_READING"),
              ("TLS_HANDSHAKE_FAILED", 0, "fix", "PLAINTEXT listener")],
    ),
    ingress_case(
        "ingress-nginx-default-certificate-where-the-advertised-name-has-no-route",
        UNROUTED, default_cert("untrusted", NGINX_FAKE, NGINX_FAKE, ("ingress.local",),
                               error="self-signed certificate"),
        [("TLS_INGRESS_DEFAULT_CERTIFICATE", "error", 2, f"{UNROUTED}:443")],
        says=[("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "message", f"has no route for {UNROUTED}"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "message", f"subject {NGINX_FAKE}, names ingress.local, issuer "
                                                                f"{NGINX_FAKE}"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "message", "NGINX Ingress Controller's (ingress-nginx)"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "fix", f"Ingress rule with host {UNROUTED}"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "fix", "nginx.ingress.kubernetes.io/ssl-passthrough"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "fix", "advertise a name that already has a route")],
    ),
    ingress_case(
        "openshift-router-default-certificate-even-when-the-client-trusts-it",
        # The client trusts the cluster's ingress CA and the wildcard covers the name: TLS passes, Kafka does not.
        OCP_BROKER, default_cert("ok", "*.apps.ocp.example.com", "ingress-operator@1636389644",
                                 ("*.apps.ocp.example.com",)),
        [("TLS_INGRESS_DEFAULT_CERTIFICATE", "error", 2, f"{OCP_BROKER}:443")],
        says=[("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "message", "the OpenShift router's default certificate"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "fix", f"passthrough Route (spec.tls.termination: passthrough) "
                                                            f"with spec.host {OCP_BROKER}")],
    ),
    ingress_case(
        "openshift-router-default-certificate-from-a-newer-ingress-operator",
        UNROUTED, default_cert("untrusted", "*.apps.ocp.example.com", "cluster-ingress-operator@1700000000",
                               ("*.apps.ocp.example.com",), error="unable to get local issuer certificate"),
        [("TLS_INGRESS_DEFAULT_CERTIFICATE", "error", 2, f"{UNROUTED}:443")],
        says=[("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "message", "issuer cluster-ingress-operator@1700000000")],
    ),
    ingress_case(
        "traefik-default-certificate",
        UNROUTED, default_cert("untrusted", "TRAEFIK DEFAULT CERT", "TRAEFIK DEFAULT CERT",
                               ("9c1a6a0a1e4f.b2e1f7a0c3d5.traefik.default",), error="self-signed certificate"),
        [("TLS_INGRESS_DEFAULT_CERTIFICATE", "error", 2, f"{UNROUTED}:443")],
        says=[("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "message", "Traefik's default certificate"),
              ("TLS_INGRESS_DEFAULT_CERTIFICATE", 2, "fix", f"HostSNI(`{UNROUTED}`)")],
    ),
    ingress_case(
        "a-ca-merely-named-like-the-ingress-operator-is-an-untrusted-chain-not-a-default-certificate",
        UNROUTED, default_cert("untrusted", UNROUTED, "ingress-operator@example.com", (UNROUTED,),
                               error="unable to get local issuer certificate"),
        [("TLS_UNTRUSTED", "error", 2, f"{UNROUTED}:443")],
    ),
    ip_case(
        "advertised-ip-held-only-as-a-dns-name",
        "192.0.2.30", ip_cert("192.0.2.30", ("DNS:broker.tls.kprobe.test", "DNS:192.0.2.30")),
        [("TLS_SAN_TYPE_MISMATCH", "error", 0, "192.0.2.30:9093")],
        says=[("TLS_SAN_TYPE_MISMATCH", 0, "message", "only as a DNS-type subjectAltName entry (DNS:192.0.2.30), not "
                                                      "as an IP address entry (IP:192.0.2.30)"),
              ("TLS_SAN_TYPE_MISMATCH", 0, "message", "No subject alternative names matching IP address 192.0.2.30 "
                                                      "found"),
              ("TLS_SAN_TYPE_MISMATCH", 0, "message", "certificate verify failed"),
              ("TLS_SAN_TYPE_MISMATCH", 0, "fix", "subjectAltName=IP:192.0.2.30"),
              ("TLS_SAN_TYPE_MISMATCH", 0, "fix", "spec.ipAddresses, not dnsNames"),
              ("TLS_SAN_TYPE_MISMATCH", 0, "fix", "(DNS names: broker.tls.kprobe.test)")],
        never_says=[("TLS_SAN_TYPE_MISMATCH", 0, "message", "Your settings skip")],
    ),
    ip_case(
        "advertised-ip-held-only-as-a-dns-name-and-these-settings-skip-the-name-check",
        "192.0.2.30", ip_cert("192.0.2.30", ("DNS:broker.tls.kprobe.test", "DNS:192.0.2.30"),
                              client_verifies_name=False),
        [("TLS_SAN_TYPE_MISMATCH", "warning", 0, "192.0.2.30:9093")],
        says=[("TLS_SAN_TYPE_MISMATCH", 0, "message", "ssl.endpoint.identification.algorithm=none")],
    ),
    ip_case(
        "advertised-ip-held-only-as-the-subject-cn-of-a-certificate-without-san",
        "192.0.2.30", ip_cert("192.0.2.30", (), subject="192.0.2.30", names=("192.0.2.30",)),
        [("TLS_SAN_TYPE_MISMATCH", "error", 0, "192.0.2.30:9093")],
        says=[("TLS_SAN_TYPE_MISMATCH", 0, "message", "only as its subject common name (CN=192.0.2.30)"),
              ("TLS_SAN_TYPE_MISMATCH", 0, "fix", "(DNS names: none)")],
    ),
    ip_case(
        "advertised-ipv6-held-as-a-dns-name-spelt-out-in-full",
        "2001:db8::30", ip_cert("2001:db8::30", ("DNS:broker.tls.kprobe.test", "DNS:2001:db8:0:0:0:0:0:30")),
        [("TLS_SAN_TYPE_MISMATCH", "error", 0, "[2001:db8::30]:9093")],
        says=[("TLS_SAN_TYPE_MISMATCH", 0, "message", "(DNS:2001:db8:0:0:0:0:0:30)")],
    ),
    ip_case(
        "advertised-ip-the-certificate-lacks-in-any-form-is-a-plain-name-mismatch",
        "192.0.2.31", ip_cert("192.0.2.31", ("DNS:broker.tls.kprobe.test", "IP:192.0.2.30")),
        [("TLS_HOSTNAME_MISMATCH", "error", 0, "192.0.2.31:9093")],
    ),
    tls_case(
        "not-checked-for-want-of-a-connecting-address-adds-nothing",
        "broker.tls.kprobe.test",
        TlsResult(status="not_checked", address="", error="no address accepts connections"),
        [("ADVERTISED_REFUSED", "error", 0, "broker.tls.kprobe.test:9093")], connect="refused",
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_tls_rules(row: Case):
    check(row)
