"""Hand-built probe reports for `kprobe fix`'s plan: what a vantage saw, in a few words per broker.

`report("host", boots={"localhost:29092": 0}, seen={(0, "kafka0", 29092): "unresolvable"})` is a report of
vantage `host` whose bootstrap localhost:29092 answered as node 0 and advertised kafka0:29092, which
failed there. Every bootstrap advertises every endpoint seen.
"""

from __future__ import annotations

from kprobe.models import (
    AdvertisedBroker,
    BootstrapResult,
    ClusterMetadata,
    DnsResult,
    Endpoint,
    EndpointResult,
    Remap,
    Report,
    Vantage,
)

# The seeds' Docker case in one Compose file: a KRaft broker that advertises only kafka0:29092, published on the
# Docker host, so the host's clients bootstrap and then meet a name their network cannot resolve.
COMPOSE = """services:
  kafka0:
    image: "confluentinc/cp-kafka:7.6.0"
    ports:
      - '29092:29092'
    environment:
      KAFKA_NODE_ID: 0
      KAFKA_PROCESS_ROLES: broker,controller
      KAFKA_CONTROLLER_QUORUM_VOTERS: 0@kafka0:29093
      KAFKA_LISTENERS: PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093
      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka0:29092
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
      KAFKA_CONTROLLER_LISTENER_NAMES: CONTROLLER
      KAFKA_INTER_BROKER_LISTENER_NAME: PLAINTEXT
"""


def report(vantage: str, *, boots: dict[str, int | None], seen: dict[tuple[int, str, int], str],
           remaps: dict[tuple[int, str, int], tuple[str, int, str]] | None = None) -> Report:
    """A report of `vantage`: bootstraps (address -> the node that answered, None: it did not) and endpoints."""
    remaps = remaps or {}
    brokers = tuple(AdvertisedBroker(node_id=n, host=h, port=p) for n, h, p in seen)
    metadata = ClusterMetadata(brokers=brokers, cluster_id="c1", controller_id=0)
    bootstraps = tuple(
        BootstrapResult(address=a, status="ok", node_id=n, metadata=metadata) if n is not None
        else BootstrapResult(address=a, status="refused", error="refused") for a, n in boots.items())
    endpoints = []
    for (n, h, p), status in seen.items():
        remap = remaps.get((n, h, p))
        endpoint = Endpoint(node_id=n, host=h, port=p, advertised_by=tuple(boots),
                            remap=Remap(host=remap[0], port=remap[1], option=remap[2]) if remap else None)  # type: ignore[arg-type]
        dns = DnsResult(host=h, status="nxdomain" if status == "unresolvable" else "ok")
        endpoints.append(EndpointResult(endpoint=endpoint, dns=dns, tcp=(), status=status))  # type: ignore[arg-type]
    ok = all(s == "reachable" for s in seen.values())
    return Report(id=f"r-{vantage}", started_at="2025-01-01T00:00:00Z", finished_at="2025-01-01T00:00:01Z",
                  vantage=Vantage(name=vantage, hostname=vantage, resolver_kind="system"), bootstraps=bootstraps,
                  endpoints=tuple(endpoints), findings=(), status="ok" if ok else "gap", duration_ms=1.0)
