"""Findings that recur at several endpoints with one cause and one fix are one finding.

Three brokers advertising `localhost`, or three names of one zone this network cannot see, are one
setting to change. For each code that can recur so, a row with one endpoint (one finding, its node and
endpoint set, as before) and a row with several (one finding, node and endpoint left empty, the message
naming each endpoint, `endpoints` and `node_ids` listing them all); and rows where the cause or the fix
differs, which must stay apart: a fix that names one broker (listener lines proposed for the node that
answered) is that broker's alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from observations import Case, boot, case, check, endpoint, failed, params, resolved

from kprobe.findings.diagnose import diagnose
from kprobe.models import BootstrapResult, DnsStatus, EndpointResult, TlsResult

PUBLIC_BOOT = "kafka.example.com:9092"
PUBLIC_IP = "203.0.113.20"
ZONE = "eu-west-1.compute.internal"


def three(port: int = 9092) -> list[tuple[int, str, int]]:
    """Three brokers on localhost, one port each."""
    return [(n, "localhost", port + n) for n in range(3)]


def on(brokers: Sequence[tuple[int, str, int]], *, node_id: int | None = None) -> BootstrapResult:
    """The public bootstrap advertising `brokers` (identified as `node_id` when given)."""
    return boot(PUBLIC_BOOT, connected_to=PUBLIC_IP, advertises=brokers, node_id=node_id)


def names(n: int, zone: str = ZONE) -> list[tuple[int, str, int]]:
    return [(i, f"ip-10-0-0-{10 + i}.{zone}", 9092) for i in range(n)]


def unresolvable(brokers: Sequence[tuple[int, str, int]], status: DnsStatus = "nxdomain") -> list[EndpointResult]:
    return [endpoint(n, h, p, PUBLIC_BOOT, dns=failed(h, status)) for n, h, p in brokers]


def untrusted(n: int, issuer: str, *, verifies: bool = True) -> TlsResult:
    subject = f"broker{n}.kafka.example.com"
    return TlsResult(status="untrusted", address=f"192.0.2.{10 + n}", subject=subject, names=(subject,),
                     sans=(f"DNS:{subject}",), issuer=issuer, not_after="Nov 23 12:00:00 2028 GMT", days_left=731.0,
                     trusted=False, hostname_ok=True, client_verifies_chain=verifies,
                     error="[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer "
                           "certificate")


def tls_brokers(n: int, issuer: str | None = None, *,
                verifies: bool = True) -> tuple[list[BootstrapResult], list[EndpointResult]]:
    brokers = [(i, f"broker{i}.kafka.example.com", 9093) for i in range(n)]
    b = boot("broker0.kafka.example.com:9093", connected_to="192.0.2.10", advertises=brokers, protocol="SSL")
    eps = [endpoint(i, h, p, "broker0.kafka.example.com:9093", dns=[f"192.0.2.{10 + i}"],
                    tls=untrusted(i, issuer or f"CN={h}", verifies=verifies)) for i, h, p in brokers]
    return [b], eps


def dual(n: int, host: str = "kafka.example.com") -> list[EndpointResult]:
    """`n` brokers advertising one name whose IPv6 address refuses beside a working IPv4 one."""
    return [endpoint(i, host, 9092 + i, "bootstrap.example.com:9092", dns=resolved(host, "2001:db8::10", "192.0.2.10"),
                     connect={"2001:db8::10": "refused", "192.0.2.10": "ok"}) for i in range(n)]


def half(n: int) -> list[EndpointResult]:
    """`n` brokers advertising one name with two IPv4 addresses, one refusing (no address family explains it)."""
    return [endpoint(i, "kafka.example.com", 9092 + i, "bootstrap.example.com:9092",
                     dns=resolved("kafka.example.com", "192.0.2.10", "192.0.2.11"),
                     connect={"192.0.2.10": "ok", "192.0.2.11": "refused"}) for i in range(n)]


DUAL_BOOT = boot("bootstrap.example.com:9092", connected_to="192.0.2.99",
                 advertises=[(i, "kafka.example.com", 9092 + i) for i in range(3)])


def split(n: int, servers: Sequence[str] = ("192.0.2.53",)) -> list[EndpointResult]:
    """`n` brokers whose names resolve to private addresses here and to public ones through `servers`."""
    return [endpoint(i, f"b{i}.kafka.example.com", 9092, PUBLIC_BOOT, dns=[f"10.0.0.{10 + i}"], compared=[
        resolved(f"b{i}.kafka.example.com", f"198.51.100.{10 + i}", source="nameserver", server=s) for s in servers])
        for i in range(n)]


def same_host(ports: Sequence[int], *, refused: Sequence[int] = ()) -> list[EndpointResult]:
    """Brokers on the bootstrap's own address with other ports (the NAT hint); those in `refused` fail."""
    return [endpoint(i, "192.0.2.10", port, "192.0.2.10:9092", connect="refused" if port in refused else "ok")
            for i, port in enumerate(ports, start=1)]


def endpoints_of(brokers: Sequence[tuple[int, str, int]]) -> tuple[str, ...]:
    return tuple(f"{h}:{p}" for _, h, p in brokers)


CASES: list[Case] = [
    # -- ADVERTISED_LOOPBACK ------------------------------------------------------------------------------
    case("loopback-one-broker", [on(three()[:1])],
         [endpoint(0, "localhost", 9092, PUBLIC_BOOT, dns=["127.0.0.1"])],
         [("ADVERTISED_LOOPBACK", "error", 0, "localhost:9092")],
         says=[("ADVERTISED_LOOPBACK", 0, "message", "but broker 0 advertises localhost:9092, a loopback address")]),
    case("loopback-three-brokers-one-finding", [on(three())],
         [endpoint(n, h, p, PUBLIC_BOOT, dns=["127.0.0.1"]) for n, h, p in three()],
         [("ADVERTISED_LOOPBACK", "error", None, None)],
         says=[("ADVERTISED_LOOPBACK", None, "message", "You reached the cluster at kafka.example.com:9092, but the "
                "brokers advertise loopback addresses, localhost:9092 (broker 0), localhost:9093 (broker 1), "
                "localhost:9094 (broker 2): every client connects to its own machine"),
               ("ADVERTISED_LOOPBACK", None, "fix", "Make the listener on port 9092 advertise a name or address")],
         concerns=[("ADVERTISED_LOOPBACK", (0, 1, 2), endpoints_of(three()))]),
    case("loopback-listener-lines-for-the-identified-node-stay-its-own", [on(three(), node_id=1)],
         [endpoint(n, h, p, PUBLIC_BOOT, dns=["127.0.0.1"]) for n, h, p in three()],
         [("ADVERTISED_LOOPBACK", "error", 1, "localhost:9093"), ("ADVERTISED_LOOPBACK", "error", None, None)],
         says=[("ADVERTISED_LOOPBACK", 1, "fix", "(your bootstrap, identified as node 1)")],
         never_says=[("ADVERTISED_LOOPBACK", None, "fix", "your bootstrap")],
         concerns=[("ADVERTISED_LOOPBACK", (0, 2), ("localhost:9092", "localhost:9094")),
                   ("ADVERTISED_LOOPBACK", (1,), ("localhost:9093",))]),
    # -- ADVERTISED_UNRESOLVABLE ----------------------------------------------------------------------------
    case("unresolvable-one-name", [on(names(1))], unresolvable(names(1)),
         [("ADVERTISED_UNRESOLVABLE", "error", 0, f"ip-10-0-0-10.{ZONE}:9092")],
         says=[("ADVERTISED_UNRESOLVABLE", 0, "message", f"broker 0 advertises ip-10-0-0-10.{ZONE}:9092, which does "
                f"not resolve from here (ip-10-0-0-10.{ZONE}: Name or service not known)")]),
    case("unresolvable-three-names-of-one-zone-one-finding", [on(names(3))], unresolvable(names(3)),
         [("ADVERTISED_UNRESOLVABLE", "error", None, None)],
         says=[("ADVERTISED_UNRESOLVABLE", None, "message", f"the brokers advertise names under {ZONE} that do not "
                f"resolve from here (Name or service not known): ip-10-0-0-10.{ZONE}:9092 (broker 0), "
                f"ip-10-0-0-11.{ZONE}:9092 (broker 1), ip-10-0-0-12.{ZONE}:9092 (broker 2)."),
               ("ADVERTISED_UNRESOLVABLE", None, "fix", "Make the listener on port 9092 advertise a name this network")],
         concerns=[("ADVERTISED_UNRESOLVABLE", (0, 1, 2), endpoints_of(names(3)))]),
    case("unresolvable-names-of-two-zones-are-two-causes",
         [on([*names(2), (2, "kafka2.corp.example.com", 9092)])],
         unresolvable([*names(2), (2, "kafka2.corp.example.com", 9092)]),
         [("ADVERTISED_UNRESOLVABLE", "error", None, None),
          ("ADVERTISED_UNRESOLVABLE", "error", 2, "kafka2.corp.example.com:9092")],
         concerns=[("ADVERTISED_UNRESOLVABLE", (0, 1), endpoints_of(names(2)))]),
    case("unresolvable-nxdomain-and-timeout-are-two-causes", [on(names(2))],
         [unresolvable(names(1))[0], unresolvable(names(2)[1:], "timeout")[0]],
         [("ADVERTISED_UNRESOLVABLE", "error", 0, f"ip-10-0-0-10.{ZONE}:9092"),
          ("ADVERTISED_UNRESOLVABLE", "error", 1, f"ip-10-0-0-11.{ZONE}:9092")]),
    # -- ADVERTISED_TIMEOUT and ADVERTISED_UNREACHABLE (no route) ----------------------------------------------
    case("timeout-one-address", [on([(0, "198.51.100.10", 9092)])],
         [endpoint(0, "198.51.100.10", 9092, PUBLIC_BOOT, connect="timeout")],
         [("ADVERTISED_TIMEOUT", "error", 0, "198.51.100.10:9092")],
         says=[("ADVERTISED_TIMEOUT", 0, "fix", "Open the port between this network and 198.51.100.10")]),
    case("timeout-three-addresses-one-finding", [on([(n, f"198.51.100.{10 + n}", 9092) for n in range(3)])],
         [endpoint(n, f"198.51.100.{10 + n}", 9092, PUBLIC_BOOT, connect="timeout") for n in range(3)],
         [("ADVERTISED_TIMEOUT", "error", None, None)],
         says=[("ADVERTISED_TIMEOUT", None, "message", "but connections to them (198.51.100.10, 198.51.100.11, "
                "198.51.100.12) time out from here"),
               ("ADVERTISED_TIMEOUT", None, "fix", "Open the advertised ports between this network and 198.51.100.10, "
                "198.51.100.11, 198.51.100.12, or make the listener on port 9092 advertise addresses")],
         concerns=[("ADVERTISED_TIMEOUT", (0, 1, 2), tuple(f"198.51.100.{10 + n}:9092" for n in range(3)))]),
    case("unreachable-three-addresses-one-finding", [on([(n, f"198.51.100.{10 + n}", 9092) for n in range(3)])],
         [endpoint(n, f"198.51.100.{10 + n}", 9092, PUBLIC_BOOT, connect="unreachable") for n in range(3)],
         [("ADVERTISED_UNREACHABLE", "error", None, None)],
         says=[("ADVERTISED_UNREACHABLE", None, "message", "which this host has no route to (198.51.100.10, "
                "198.51.100.11, 198.51.100.12)")],
         concerns=[("ADVERTISED_UNREACHABLE", (0, 1, 2), tuple(f"198.51.100.{10 + n}:9092" for n in range(3)))]),
    case("unreachable-one-address", [on([(0, "198.51.100.10", 9092)])],
         [endpoint(0, "198.51.100.10", 9092, PUBLIC_BOOT, connect="unreachable")],
         [("ADVERTISED_UNREACHABLE", "error", 0, "198.51.100.10:9092")]),
    # -- ADVERTISED_ONE_FAMILY_FAILS and ADVERTISED_PARTIAL: one name, several brokers --------------------------
    case("one-family-one-broker", [DUAL_BOOT], dual(1),
         [("ADVERTISED_ONE_FAMILY_FAILS", "warning", 0, "kafka.example.com:9092")],
         says=[("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "kafka.example.com resolves to IPv4 192.0.2.10")]),
    case("one-family-three-brokers-one-finding", [DUAL_BOOT], dual(3),
         # (All of the run's brokers on one host, a port each: the shape finding says so beside it.)
         [("ADVERTISED_ONE_FAMILY_FAILS", "warning", None, None),
          ("ADVERTISED_SHARED_ADDRESS", "info", None, "kafka.example.com")],
         says=[("ADVERTISED_ONE_FAMILY_FAILS", None, "message", "The brokers advertise one name, kafka.example.com: "
                "kafka.example.com:9092 (broker 0), kafka.example.com:9093 (broker 1), kafka.example.com:9094 "
                "(broker 2). kafka.example.com resolves to IPv4 192.0.2.10")],
         concerns=[("ADVERTISED_ONE_FAMILY_FAILS", (0, 1, 2), tuple(f"kafka.example.com:{9092 + n}" for n in range(3)))]),
    case("one-family-two-names-are-two-findings", [DUAL_BOOT], [*dual(1), *dual(2, "kafka-b.example.com")[1:]],
         [("ADVERTISED_ONE_FAMILY_FAILS", "warning", 0, "kafka.example.com:9092"),
          ("ADVERTISED_ONE_FAMILY_FAILS", "warning", 1, "kafka-b.example.com:9093")]),
    case("partial-one-broker", [DUAL_BOOT], half(1),
         [("ADVERTISED_PARTIAL", "warning", 0, "kafka.example.com:9092")]),
    case("partial-three-brokers-one-finding", [DUAL_BOOT], half(3),
         [("ADVERTISED_PARTIAL", "warning", None, None),
          ("ADVERTISED_SHARED_ADDRESS", "warning", None, "kafka.example.com")],
         says=[("ADVERTISED_PARTIAL", None, "message", "The brokers advertise one name, kafka.example.com: "
                "kafka.example.com:9092 (broker 0), kafka.example.com:9093 (broker 1), kafka.example.com:9094 "
                "(broker 2). kafka.example.com resolves to 2 addresses")],
         concerns=[("ADVERTISED_PARTIAL", (0, 1, 2), tuple(f"kafka.example.com:{9092 + n}" for n in range(3)))]),
    # -- PORT_DIFFERS_FROM_BOOTSTRAP ------------------------------------------------------------------------
    case("port-differs-one-broker", [boot("192.0.2.10:9092", connected_to="192.0.2.10",
                                          advertises=[(1, "192.0.2.10", 9093)])], same_host([9093]),
         [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 1, "192.0.2.10:9093")]),
    case("port-differs-three-brokers-one-finding",
         [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[(n, "192.0.2.10", 9092 + n)
                                                                         for n in (1, 2, 3)])],
         same_host([9093, 9094, 9095]),
         [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", None, None), ("ADVERTISED_SHARED_ADDRESS", "info", None, "192.0.2.10")],
         says=[("PORT_DIFFERS_FROM_BOOTSTRAP", None, "message", "You bootstrapped through 192.0.2.10:9092, and the "
                "brokers advertise the same address with other ports: 192.0.2.10:9093 (broker 1), 192.0.2.10:9094 "
                "(broker 2), 192.0.2.10:9095 (broker 3).")],
         concerns=[("PORT_DIFFERS_FROM_BOOTSTRAP", (1, 2, 3), ("192.0.2.10:9093", "192.0.2.10:9094", "192.0.2.10:9095"))]),
    case("port-differs-a-failing-one-is-a-warning-apart",
         [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[(n, "192.0.2.10", 9092 + n)
                                                                         for n in (1, 2, 3)])],
         same_host([9093, 9094, 9095], refused=[9095]),
         [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", None, None), ("PORT_DIFFERS_FROM_BOOTSTRAP", "warning", 3,
                                                                "192.0.2.10:9095"),
          ("ADVERTISED_REFUSED", "error", 3, "192.0.2.10:9095"),
          ("ADVERTISED_SHARED_ADDRESS", "warning", None, "192.0.2.10")],
         concerns=[("PORT_DIFFERS_FROM_BOOTSTRAP", (1, 2), ("192.0.2.10:9093", "192.0.2.10:9094"))]),
    # -- DNS_VIEWS_DISAGREE ---------------------------------------------------------------------------------
    case("views-disagree-one-name", [on([(0, "b0.kafka.example.com", 9092)])], split(1),
         [("DNS_VIEWS_DISAGREE", "warning", 0, "b0.kafka.example.com:9092")],
         says=[("DNS_VIEWS_DISAGREE", 0, "fix", "b0.kafka.example.com cannot serve both")]),
    case("views-disagree-three-names-one-finding", [on([(n, f"b{n}.kafka.example.com", 9092) for n in range(3)])],
         split(3),
         [("DNS_VIEWS_DISAGREE", "warning", None, None)],
         says=[("DNS_VIEWS_DISAGREE", None, "message", "Advertised names resolve differently through the system "
                "resolver and through nameserver 192.0.2.53, in that order: b0.kafka.example.com (broker 0) to "
                "10.0.0.10 and 198.51.100.10, b1.kafka.example.com (broker 1)"),
               ("DNS_VIEWS_DISAGREE", None, "fix", "b0.kafka.example.com, b1.kafka.example.com, b2.kafka.example.com "
                "cannot serve both")],
         concerns=[("DNS_VIEWS_DISAGREE", (0, 1, 2), tuple(f"b{n}.kafka.example.com:9092" for n in range(3)))]),
    case("views-disagree-with-two-servers-one-finding-each",
         [on([(n, f"b{n}.kafka.example.com", 9092) for n in range(2)])], split(2, ("192.0.2.53", "192.0.2.54")),
         [("DNS_VIEWS_DISAGREE", "warning", None, None)] * 2,
         says=[("DNS_VIEWS_DISAGREE", None, "message", "through nameserver 192.0.2.54, in that order")]),
    # -- TLS_UNTRUSTED --------------------------------------------------------------------------------------
    case("untrusted-one-certificate", *tls_brokers(1, "CN=Example Internal CA"),
         [("TLS_UNTRUSTED", "error", 0, "broker0.kafka.example.com:9093")]),
    case("untrusted-three-certificates-of-one-issuer-one-finding", *tls_brokers(3, "CN=Example Internal CA"),
         [("TLS_UNTRUSTED", "error", None, None)],
         says=[("TLS_UNTRUSTED", None, "message", "The certificates at broker0.kafka.example.com:9093 (subject "
                "broker0.kafka.example.com), broker1.kafka.example.com:9093 (subject broker1.kafka.example.com), "
                "broker2.kafka.example.com:9093 (subject broker2.kafka.example.com), all issued by CN=Example "
                "Internal CA, do not verify"),
               ("TLS_UNTRUSTED", None, "fix", "Give clients the CA that signed the broker certificates")],
         concerns=[("TLS_UNTRUSTED", (0, 1, 2), tuple(f"broker{n}.kafka.example.com:9093" for n in range(3)))]),
    case("untrusted-self-signed-certificates-stay-apart", *tls_brokers(2),
         [("TLS_UNTRUSTED", "error", 0, "broker0.kafka.example.com:9093"),
          ("TLS_UNTRUSTED", "error", 1, "broker1.kafka.example.com:9093")]),
    case("untrusted-unverified-three-certificates-one-warning",
         *tls_brokers(3, "CN=Example Internal CA", verifies=False),
         [("TLS_UNTRUSTED", "warning", None, None)],
         says=[("TLS_UNTRUSTED", None, "message", "Your settings skip this check")]),
]


@pytest.mark.parametrize("row", params(CASES))
def test_repeats_are_said_once(row: Case):
    check(row)


def test_a_long_list_names_ten_and_counts_the_rest():
    """Twelve brokers under one zone: the message names ten and says how many more; `endpoints` has all twelve."""
    brokers = names(12)
    [found] = diagnose([on(brokers)], unresolvable(brokers))
    assert found.code == "ADVERTISED_UNRESOLVABLE" and (found.node_id, found.endpoint) == (None, None)
    assert f"ip-10-0-0-19.{ZONE}:9092 (broker 9) and 2 more." in found.message
    assert "ip-10-0-0-20" not in found.message and "ip-10-0-0-21" not in found.message
    assert found.endpoints == endpoints_of(brokers) and found.node_ids == tuple(range(12))
