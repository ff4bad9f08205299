"""Findings that compare what two resolvers answer for the same advertised name (split-horizon DNS)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kprobe.findings.catalogue import WARNING, finding
from kprobe.findings.common import Repeat, listed, source_of, unique
from kprobe.models import EndpointResult, Finding


def dns_view_findings(result: EndpointResult) -> list[Finding | Repeat]:
    """DNS_VIEWS_DISAGREE: the primary resolver and a compared nameserver answer differently.

    A `Repeat` per compared server: names that two resolvers answer differently are one split-horizon
    set-up between the same two views, said once for all of them.
    """
    out: list[Finding | Repeat] = []
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
        here, there = _say(a, mine.status), _say(b, other.status)
        alone = finding(
            "DNS_VIEWS_DISAGREE", WARNING,
            f"{ep.host} (broker {ep.node_id}) resolves to {here} through {primary} but to "
            f"{there} through nameserver {other.server}. Clients on the two networks "
            "reach different places (split-horizon DNS): a fix that works from one fails from the other.",
            f"Decide which network each listener serves, and advertise on each listener a name that resolves "
            f"correctly there; {ep.host} cannot serve both if the views disagree.",
            node_id=ep.node_id, endpoint=ep.hostport, bootstrap=source_of(result))
        out.append(Repeat((primary, other.server), result, alone, _together(primary, other.server),
                          detail=f"{ep.host} (broker {ep.node_id}) to {here} and {there}"))
    return out


def _together(primary: str, server: str | None) -> Callable[[Sequence[Repeat]], tuple[str, str]]:
    def together(group: Sequence[Repeat]) -> tuple[str, str]:
        hosts = unique(r.result.endpoint.host for r in group)
        return (f"Advertised names resolve differently through {primary} and through nameserver {server}, in that "
                f"order: {listed(unique(r.detail for r in group))}. Clients on the two networks reach different places "
                "(split-horizon DNS): a fix that works from one fails from the other.",
                "Decide which network each listener serves, and advertise on each listener names that resolve "
                f"correctly there; {listed(hosts)} cannot serve both if the views disagree.")
    return together


def _say(addresses: set[str], status: str) -> str:
    return ", ".join(sorted(addresses)) if addresses else status
