"""Small helpers every rule module shares, and the one way a finding comes to stand for several endpoints.

A cluster's brokers are usually set up alike, so what fails at one endpoint often fails at all of
them for the same reason: three brokers advertising `localhost`, three names under a zone this
network cannot see, three certificates from one untrusted CA. That is one setting to change, and
the same finding three times buries the other findings. The per-endpoint rules hand
such a finding over as a `Repeat` whose key is its cause and fix; `merge_repeats` makes one finding
of the repeats that share a key, listing every endpoint. A fix that names one broker (a proposed
listener line, "start broker 2") is part of the key, so such findings stay one per broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kprobe.findings.catalogue import finding
from kprobe.models import EndpointResult, Finding, Severity
from kprobe.records import record

# How many endpoints (or names, or addresses) a message names before "and N more": a finding about a
# 200-broker cluster must stay a paragraph. The finding's `endpoints` list keeps every one of them.
NAMED = 10


# The suffixes only a Kubernetes cluster's DNS serves (kprobe.findings.kubernetes reads the names under them).
# Here, apart from those rules: a host without one is no cluster name, so a run of such hosts never loads them.
CLUSTER_SUFFIXES = (".svc", ".svc.cluster.local", ".pod.cluster.local")


def maybe_cluster_name(host: str) -> bool:
    """Whether `host` ends like a Kubernetes cluster-internal name (kprobe.findings.kubernetes says what it is)."""
    return host.lower().rstrip(".").endswith(CLUSTER_SUFFIXES)


def source_of(result: EndpointResult) -> str | None:
    """The first bootstrap that advertised this endpoint: the one a finding names."""
    return result.endpoint.advertised_by[0] if result.endpoint.advertised_by else None


def listed(items: Sequence[str], limit: int = NAMED, sep: str = ", ") -> str:
    """`a, b, c`; past `limit` items, the first `limit` and "and N more"."""
    return sep.join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def unique(items: Iterable[str]) -> list[str]:
    """`items` without repeats, in their first order: messages list what differs, once."""
    return list(dict.fromkeys(items))


def at_brokers(results: Sequence[EndpointResult]) -> str:
    """`h:p (broker 1), h:p (broker 2), ...`: the endpoints of a merged finding, as its message names them."""
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


@record
class Repeat:
    """One endpoint's share of a finding that may recur at other endpoints with the same cause and fix.

    `alone` is the finding as it reads for this endpoint by itself: a single endpoint keeps its node,
    endpoint and words. Shares whose `alone` has the same code and severity and whose `key` (the
    cause and the fix, as the rule defines them) is equal become one finding, worded by `together`
    from all the shares (message, fix); `detail` is this endpoint's own part of that wording.
    """

    key: tuple[object, ...]
    result: EndpointResult
    alone: Finding
    together: Callable[[Sequence[Repeat]], tuple[str, str]]
    detail: str = ""


def merge_repeats(items: Iterable[Finding | Repeat]) -> list[Finding]:
    """Findings as given, then one finding per group of repeats with one code, severity and key."""
    out: list[Finding] = []
    groups: dict[tuple[object, ...], list[Repeat]] = {}
    for item in items:
        if isinstance(item, Repeat):
            groups.setdefault((item.alone.code, item.alone.severity, *item.key), []).append(item)
        else:
            out.append(item)
    for group in groups.values():
        first = group[0].alone
        if len(group) == 1:
            out.append(first)
            continue
        group.sort(key=lambda r: (r.result.endpoint.node_id, r.result.endpoint.hostport))
        message, fix = group[0].together(group)
        out.append(about(first.code, first.severity, message, fix, [r.result for r in group]))
    return out
