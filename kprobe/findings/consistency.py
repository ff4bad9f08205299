"""Findings that compare bootstraps with each other: one cluster, one broker set, one endpoint per node."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.findings.common import unique
from kprobe.hostport import format_hostport
from kprobe.models import BootstrapResult, EndpointResult, Finding, Severity
from kprobe.models.partitions import LISTENER_NOT_FOUND


def consistency_findings(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """CLUSTER_ID_MISMATCH, BROKER_SET_MISMATCH, NO_ADVERTISED_BROKERS, DUPLICATE_NODE_ID, LISTENER_NOT_FOUND,
    DUPLICATE_ENDPOINT.
    """
    out: list[Finding] = []
    answered = [b for b in bootstraps if b.status == "ok" and b.metadata is not None]
    clusters: dict[str | None, list[str]] = defaultdict(list)
    for b in answered:
        assert b.metadata is not None
        clusters[b.metadata.cluster_id].append(b.address)
    if len(clusters) > 1:
        parts = "; ".join(f"{cid}: {', '.join(addrs)}" for cid, addrs in clusters.items())
        out.append(finding(
            "CLUSTER_ID_MISMATCH", ERROR,
            f"The bootstrap list mixes {len(clusters)} clusters ({parts}). A client joins whichever answers "
            "first, so it sees different topics and offsets from run to run.",
            "Keep one cluster's brokers in bootstrap.servers.", bootstrap=answered[0].address))
        return out  # the other comparisons are meaningless across clusters
    sets: dict[frozenset[int], list[str]] = defaultdict(list)
    for b in answered:
        assert b.metadata is not None
        sets[frozenset(x.node_id for x in b.metadata.brokers)].append(b.address)
    if len(sets) > 1:
        parts = "; ".join(f"{sorted(ids)} via {', '.join(addrs)}" for ids, addrs in sets.items())
        out.append(finding(
            "BROKER_SET_MISMATCH", WARNING,
            f"Bootstraps disagree on which brokers exist: {parts}. A broker is fenced or starting, or a "
            "listener exists on some brokers only; clients see partitions led by a broker they cannot reach.",
            "Check that every broker defines the same listener names and is registered (kafka-broker-api-versions, "
            "the controller's logs); a broker missing from one listener needs that listener added.",
            bootstrap=answered[0].address))
    for b in answered:
        assert b.metadata is not None
        if not b.metadata.brokers:
            out.append(finding(
                "NO_ADVERTISED_BROKERS", ERROR,
                f"{b.address} answered, but its metadata lists no broker at all: clients have nowhere to send "
                "anything and retry until they time out.",
                "Check the brokers' registration with the controller (a broker that never finished starting, "
                "or a listener no broker defines).", bootstrap=b.address))
        ids = [x.node_id for x in b.metadata.brokers]
        twice = _dupes(ids)
        if twice:
            out.append(finding(
                "DUPLICATE_NODE_ID", ERROR,
                f"{b.address} lists node id(s) {', '.join(map(str, twice[:20]))} more than once, with different "
                "endpoints. Clients keep one of them at random and send that node's requests there.",
                "Two brokers share a node.id (a cloned config or volume): give every broker its own node.id.",
                node_id=twice[0], node_ids=tuple(twice), bootstrap=b.address))
    out.extend(listener_not_found(answered))
    out.extend(duplicate_endpoints(endpoints))
    return out


def duplicate_endpoints(endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """DUPLICATE_ENDPOINT: several brokers advertise one host:port, so only one of them is reached there.

    The finding names every broker that does not answer there, and each of their endpoints (every
    spelling: DNS names are case-insensitive), so none of them is counted usable under it. The broker
    the identity check found answering serves its own partitions (real clients do), so it stays usable;
    when identity was not checked, which one answers is unknown and none is counted usable: a verdict
    of "usable" must never stand under an error naming that endpoint.
    """
    owners: dict[tuple[str, int], list[EndpointResult]] = defaultdict(list)
    for r in endpoints:
        owners[(r.endpoint.host.lower(), r.endpoint.port)].append(r)
    out: list[Finding] = []
    for (host, port), results in sorted(owners.items()):
        ids = sorted({r.endpoint.node_id for r in results})
        if len(ids) < 2:
            continue
        answering = sorted({r.endpoint.node_id for r in results
                            if r.identity is not None and r.identity.status == "match"})
        others = [i for i in ids if i not in answering] or ids
        where = format_hostport(host, port)
        brokers = ", ".join(map(str, ids))
        if not answering:
            who = (" Which of them answers there is unknown (identity not checked, or another node answers), so "
                   "none of them is counted usable from here.")
        elif others != ids:
            who = (f" The identity check found broker {', '.join(map(str, answering))} answering there: its own "
                   f"partitions work, those of broker(s) {', '.join(map(str, others))} do not.")
        else:
            who = ""
        out.append(finding(
            "DUPLICATE_ENDPOINT", ERROR,
            f"Brokers {brokers} all advertise {where}. Only one broker can answer there: clients send the others' "
            f"requests to it and fail with NOT_LEADER_OR_FOLLOWER.{who}",
            f"Give each broker its own advertised endpoint (advertised.listeners of brokers {brokers}).",
            node_id=others[0] if len(others) == 1 else None, endpoint=where, node_ids=tuple(others),
            # Each named broker's endpoint as it advertised it (the spellings may differ in case).
            endpoints=tuple(unique(r.endpoint.hostport for r in results if r.endpoint.node_id in others))))
    return out


# How many partitions a message names: a cluster-wide gap must not make a report megabytes long.
_NAMED = 10


def listener_not_found(answered: Sequence[BootstrapResult]) -> list[Finding]:
    """LISTENER_NOT_FOUND: partitions whose leader (error) or replicas (warning) lack the bootstrap's listener.

    A broker registers only the listeners it defines, so through a listener that some brokers lack,
    Metadata lists the others only and answers error 72 (or names an unlisted leader) for the
    partitions those brokers lead: the bootstrap works, every request for those partitions fails.
    Kafka 4.1 answers so in the three-broker lab (tests/findings/test_findings_lab.py). Bootstraps of one
    listener say the same thing, so identical findings are merged and name every such bootstrap.
    """
    merged: dict[tuple[Severity, tuple[int, ...], tuple[str, ...]], list[str]] = defaultdict(list)
    for b in answered:
        assert b.metadata is not None
        listed = {x.node_id for x in b.metadata.brokers}
        led: list[str] = []
        followed: list[str] = []
        missing_leaders: set[int] = set()
        missing_followers: set[int] = set()
        for t in b.metadata.topics:
            for p in t.partitions:
                absent = {r for r in (*p.replicas, *p.isrs) if r not in listed}
                if p.error_code == LISTENER_NOT_FOUND or (p.leader >= 0 and p.leader not in listed):
                    led.append(f"{t.name}-{p.partition}")
                    missing_leaders |= absent | ({p.leader} if p.leader >= 0 and p.leader not in listed else set())
                elif absent:
                    followed.append(f"{t.name}-{p.partition}")
                    missing_followers |= absent
        if led:
            merged[(ERROR, tuple(sorted(missing_leaders)), tuple(sorted(led)))].append(b.address)
        if followed:
            merged[(WARNING, tuple(sorted(missing_followers)), tuple(sorted(followed)))].append(b.address)
    out: list[Finding] = []
    for (severity, missing, parts), addresses in merged.items():
        who = f"broker(s) {', '.join(map(str, missing))}" if missing else "brokers"
        named = ", ".join(parts[:_NAMED]) + (f" and {len(parts) - _NAMED} more" if len(parts) > _NAMED else "")
        via = ", ".join(addresses)
        if severity == ERROR:
            text = (f"Through the listener reached at {via}, {len(parts)} partition(s) are led by {who}, missing from "
                    f"that listener's broker list: {named}. Those brokers lack the listener (Kafka answers their "
                    "partitions with LISTENER_NOT_FOUND). The bootstrap works, "
                    "but every producer and consumer of those partitions fails through this listener.")
        else:
            text = (f"Through the listener reached at {via}, {len(parts)} partition(s) have replicas on {who}, "
                    f"missing from that listener's broker list: {named}. Clients work today; once such a replica "
                    "becomes leader, its partitions fail with LISTENER_NOT_FOUND.")
        out.append(finding(
            "LISTENER_NOT_FOUND", severity, text,
            f"{who[0].upper()}{who[1:]} lack the listener {via} reaches: define it (the same listener name in "
            "listeners, advertised.listeners and listener.security.protocol.map) on every broker, then restart "
            "them one at a time.",
            node_id=missing[0] if missing else None, node_ids=missing, bootstrap=addresses[0]))
    return out


def _dupes(ids: list[int]) -> list[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for i in ids:
        (twice if i in seen else seen).add(i)
    return sorted(twice)
