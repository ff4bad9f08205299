"""Findings that compare what two resolvers answer for the same advertised name (split-horizon DNS)."""

from __future__ import annotations

from kprobe.findings.catalogue import WARNING, finding
from kprobe.findings.common import source_of
from kprobe.models import EndpointResult, Finding


def dns_view_findings(result: EndpointResult) -> list[Finding]:
    """DNS_VIEWS_DISAGREE: the primary resolver and a compared nameserver answer differently."""
    out: list[Finding] = []
    ep = result.endpoint
    mine = result.dns
    if mine.unfinished:  # cut by the run's end: no view to compare
        return out
    for other in result.compared_dns:
        if other.unfinished:
            continue
        a = set(mine.addresses) if mine.status == "ok" else set()
        b = set(other.addresses) if other.status == "ok" else set()
        if a == b and (mine.status == "ok") == (other.status == "ok"):
            continue
        primary = "the system resolver" if mine.source in ("system", "literal") else "the nameserver"
        out.append(finding(
            "DNS_VIEWS_DISAGREE", WARNING,
            f"{ep.host} (broker {ep.node_id}) resolves to {_say(a, mine.status)} through {primary} but to "
            f"{_say(b, other.status)} through nameserver {other.server}. Clients on the two networks "
            "reach different places (split-horizon DNS): a fix that works from one fails from the other.",
            f"Decide which network each listener serves, and advertise on each listener a name that resolves "
            f"correctly there; {ep.host} cannot serve both if the views disagree.",
            node_id=ep.node_id, endpoint=ep.hostport, bootstrap=source_of(result)))
    return out


def _say(addresses: set[str], status: str) -> str:
    return ", ".join(sorted(addresses)) if addresses else status
