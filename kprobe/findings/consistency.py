"""Findings that compare bootstraps with each other: one cluster, one broker set, one endpoint per node."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from kprobe.addresses import format_hostport
from kprobe.findings.catalogue import ERROR, WARNING, finding
from kprobe.models import BootstrapResult, EndpointResult, Finding


def consistency_findings(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """CLUSTER_ID_MISMATCH, BROKER_SET_MISMATCH, DUPLICATE_ENDPOINT."""
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
                node_id=twice[0], bootstrap=b.address))
    owners: dict[tuple[str, int], set[int]] = defaultdict(set)
    for r in endpoints:
        owners[(r.endpoint.host.lower(), r.endpoint.port)].add(r.endpoint.node_id)
    for (host, port), owner_ids in sorted(owners.items()):
        if len(owner_ids) > 1:
            ids = sorted(owner_ids)
            where = format_hostport(host, port)
            out.append(finding(
                "DUPLICATE_ENDPOINT", ERROR,
                f"Brokers {', '.join(str(i) for i in sorted(ids))} all advertise {where}. Only one broker can "
                "answer there: clients send the others' requests to it and fail with NOT_LEADER_OR_FOLLOWER.",
                f"Give each broker its own advertised endpoint (advertised.listeners of brokers "
                f"{', '.join(str(i) for i in sorted(ids))}).",
                node_id=min(ids), endpoint=where))
    return out


def _dupes(ids: list[int]) -> list[int]:
    seen: set[int] = set()
    twice: set[int] = set()
    for i in ids:
        (twice if i in seen else seen).add(i)
    return sorted(twice)
