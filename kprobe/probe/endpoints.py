"""The distinct advertised endpoints, and which bootstraps advertised each.

An endpoint is (node id, host, port): the same node advertised differently through two
listeners is two endpoints, because a client reaching either listener gets only that one.
"""

from __future__ import annotations

from collections.abc import Iterable

from kprobe.models import BootstrapResult, Endpoint


def collect(bootstraps: Iterable[BootstrapResult]) -> list[Endpoint]:
    """Endpoints in node-id order, each with the bootstraps (in input order) that named it."""
    seen: dict[tuple[int, str, int], list[str]] = {}
    racks: dict[tuple[int, str, int], str | None] = {}
    for result in bootstraps:
        for broker in result.brokers:
            key = (broker.node_id, broker.host, broker.port)
            sources = seen.setdefault(key, [])
            if result.address not in sources:
                sources.append(result.address)
            racks.setdefault(key, broker.rack)
    return [
        Endpoint(node_id=node_id, host=host, port=port, rack=racks[(node_id, host, port)],
                 advertised_by=tuple(seen[(node_id, host, port)]))
        for node_id, host, port in sorted(seen, key=lambda k: (k[0], k[1], k[2]))
    ]
