"""Small helpers every rule module shares: naming the endpoints a finding concerns, boundedly."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kprobe.findings.catalogue import finding
from kprobe.models import EndpointResult, Finding, Severity

# How many endpoints (or names, or addresses) a message names before "and N more": a finding about a
# 200-broker cluster must stay a paragraph. The finding's `endpoints` list keeps every one of them.
NAMED = 10


def source_of(result: EndpointResult) -> str | None:
    """The first bootstrap that advertised this endpoint: the one a finding names."""
    return result.endpoint.advertised_by[0] if result.endpoint.advertised_by else None


def listed(items: Sequence[str], limit: int = NAMED) -> str:
    """`a, b and c`; past `limit` items, the first `limit` and "and N more"."""
    if len(items) > limit:
        return ", ".join(items[:limit]) + f" and {len(items) - limit} more"
    if len(items) > 1:
        return ", ".join(items[:-1]) + f" and {items[-1]}"
    return "".join(items)


def unique(items: Iterable[str]) -> list[str]:
    """`items` without repeats, in their first order: messages list what differs, once."""
    return list(dict.fromkeys(items))


def at_brokers(results: Sequence[EndpointResult]) -> str:
    """`h:p (broker 1), h:p (broker 2) and ...`: the endpoints of a merged finding, as its message names them."""
    return listed([f"{r.endpoint.hostport} (broker {r.endpoint.node_id})" for r in results])


def about(code: str, severity: Severity, message: str, fix: str, results: Sequence[EndpointResult]) -> Finding:
    """A finding about every endpoint of `results`: `endpoints` and `node_ids` list them all (what
    models.Finding.concerns reads); `endpoint` and `node_id` are set only where there is one of each.
    """
    nodes = tuple(sorted({r.endpoint.node_id for r in results}))
    hostports = tuple(unique(r.endpoint.hostport for r in results))
    return finding(code, severity, message, fix, node_id=nodes[0] if len(nodes) == 1 else None,
                   endpoint=hostports[0] if len(hostports) == 1 else None, endpoints=hostports, node_ids=nodes,
                   bootstrap=source_of(results[0]) if results else None)
