"""The distinct advertised endpoints, and which bootstraps advertised each.

An endpoint is (node id, host, port): the same node advertised differently through two
listeners is two endpoints, because a client reaching either listener gets only that one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kprobe.models import BootstrapResult, Endpoint

_HOST_CHARS = re.compile(r"^[A-Za-z0-9._:\[\]-]+$")


def port_problem(endpoint: Endpoint) -> str | None:
    """Why an advertised port cannot be connected to, or None."""
    if not 0 < endpoint.port < 65536:
        return f"port {endpoint.port} is outside 1-65535"
    return None


def host_problem(endpoint: Endpoint) -> str | None:
    """Why an advertised host cannot be a name or address a client resolves, or None.

    Such hosts are never sent to a resolver: a broker's metadata is untrusted input.
    """
    host = endpoint.host
    if not host:
        return "the host is empty"
    if len(host) > 253:
        return f"the host is {len(host)} characters long (a DNS name has at most 253)"
    if not _HOST_CHARS.match(host):
        return "the host contains characters no host name or address has"
    return None


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
        Endpoint(node_id, host, port, racks[(node_id, host, port)], tuple(seen[(node_id, host, port)]))
        for node_id, host, port in sorted(seen, key=lambda k: (k[0], k[1], k[2]))
    ]
