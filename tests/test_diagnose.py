"""`diagnose()` is pure (observations in, findings out), so the cases the loopback-only lab
cannot stage are checked on plain data here.

ADVERTISED_LOOPBACK needs a client that bootstrapped through a non-loopback address, and this
machine may send traffic to loopback only; the lab runs never see it fire, and these cases pin
both sides of the rule.
"""

from __future__ import annotations

from kprobe.findings.diagnose import diagnose
from kprobe.models import (
    AdvertisedBroker,
    BootstrapResult,
    ClusterMetadata,
    DnsResult,
    Endpoint,
    EndpointResult,
    TcpResult,
)


def bootstrap(address: str, connected_to: str, advertised: tuple[str, int]) -> BootstrapResult:
    meta = ClusterMetadata(brokers=(AdvertisedBroker(0, *advertised),), cluster_id="cluster-1", controller_id=0)
    return BootstrapResult(address=address, status="ok", answered_by_id=-1, answered_by_name=f"{address}/bootstrap",
                           connected_to=connected_to, metadata=meta, node_id=0)


def endpoint(host: str, port: int, source: str, addresses: tuple[str, ...], tcp_status: str) -> EndpointResult:
    dns = DnsResult(host=host, status="ok", addresses=addresses, ms=0.1, source="system")
    tcp = tuple(TcpResult(address=a, port=port, status=tcp_status, ms=0.2) for a in addresses)
    status = "reachable" if tcp_status == "ok" else "unreachable"
    return EndpointResult(endpoint=Endpoint(node_id=0, host=host, port=port, rack=None, advertised_by=(source,)), dns=dns, tcp=tcp, status=status)


def codes(findings: list) -> list[str]:
    return [f.code for f in findings]


def test_localhost_advertised_to_a_remote_client_is_loopback():
    boot = bootstrap("broker.example.test:9092", "192.0.2.10", ("localhost", 9092))
    # From the client's machine, localhost:9092 is its own port 9092: refused (or, worse, something else).
    result = endpoint("localhost", 9092, boot.address, ("127.0.0.1",), "refused")
    findings = diagnose([boot], [result])
    assert codes(findings)[0] == "ADVERTISED_LOOPBACK"
    loopback = findings[0]
    assert loopback.severity == "error" and "a loopback address" in loopback.message
    # The bootstrap was identified as node 0, so the fix proposes advertising what the client used.
    assert "advertise broker.example.test:9092" in loopback.fix


def test_localhost_advertised_to_a_client_on_the_broker_host_is_fine():
    boot = bootstrap("localhost:9092", "127.0.0.1", ("localhost", 9092))
    result = endpoint("localhost", 9092, boot.address, ("127.0.0.1",), "ok")
    assert diagnose([boot], [result]) == []


def test_mapped_port_is_port_differs_from_bootstrap():
    # Docker publishes 19092 -> 9092, and the listener still advertises 9092.
    boot = bootstrap("192.0.2.10:19092", "192.0.2.10", ("192.0.2.10", 9092))
    result = endpoint("192.0.2.10", 9092, boot.address, ("192.0.2.10",), "refused")
    findings = diagnose([boot], [result])
    assert "PORT_DIFFERS_FROM_BOOTSTRAP" in codes(findings) and "ADVERTISED_REFUSED" in codes(findings)
    differs = next(f for f in findings if f.code == "PORT_DIFFERS_FROM_BOOTSTRAP")
    assert differs.severity == "warning"  # the endpoint fails, so the hint matters
    assert "(192.0.2.10:19092)" in differs.fix
