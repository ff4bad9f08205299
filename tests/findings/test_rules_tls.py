"""TLS at each advertised endpoint (kprobe/findings/tls.py), proven on plain data.

The TLS lab stages a good certificate, a SAN mismatch, an untrusted chain, a certificate five days
from expiry and a plaintext port; it cannot stage an *expired* certificate kept in service, and
each severity that depends on the client's own settings needs both settings. The certificates
here are the TLS lab's (broker.tls.kprobe.test, issued by the kprobe test CA).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from observations import Case, Expected, Phrase, boot, case, check, endpoint, params

from kprobe.models import EndpointResult, TcpStatus, TlsResult, TlsStatus

BOOT = "broker.tls.kprobe.test:9093"
GOOD_NAMES = ("broker.tls.kprobe.test",)


def tls_endpoint(host: str, tls: TlsResult, connect: TcpStatus) -> EndpointResult:
    """The one broker of the TLS lab, advertised as `host`, with its TLS check."""
    return endpoint(0, host, 9093, BOOT, dns=["192.0.2.30"], tls=tls, connect=connect)


def cert(status: TlsStatus, **fields: object) -> TlsResult:
    """A TLS result for the lab's certificate, with what the row changes."""
    base: dict[str, object] = dict(address="192.0.2.30", subject="broker.tls.kprobe.test", names=GOOD_NAMES,
                                   issuer="kprobe test CA", not_after="Nov 23 12:00:00 2028 GMT", days_left=731.0,
                                   trusted=True, hostname_ok=True)
    base.update(fields)
    return TlsResult(status=status, **base)


def tls_case(name: str, host: str, tls: TlsResult, expect: list[Expected], *, connect: TcpStatus = "ok",
             says: Sequence[Phrase] = (), never_says: Sequence[Phrase] = ()) -> Case:
    """A row with the TLS lab's bootstrap, and its one endpoint advertised as `host`."""
    b = boot(BOOT, connected_to="192.0.2.30", advertises=[(0, host, 9093)], node_id=0, protocol="SSL")
    return case(name, [b], [tls_endpoint(host, tls, connect)], expect, says=says, never_says=never_says)


INTERNAL = "kafka-tls.internal.kprobe.test"

CASES: list[Case] = [
    tls_case("good-certificate", "broker.tls.kprobe.test", cert("ok"), []),
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
