"""`kprobe list` output: kcat's text and `kcat -L -J` JSON, then what kprobe adds.

Text: every line kcat prints is printed the same way (`metadata_print` in kcat.c), so people
and scripts read it as before; kprobe's additions are extra lines, and with reachability a
suffix on broker lines. Host and topic names are escaped (kcat prints them raw, which lets a
hostile broker write escape sequences to the terminal).
JSON: a superset of `kcat -L -J` (same keys and nesting); additions under new keys.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from typing import Any

from kprobe.list_run import Listing, PartitionView
from kprobe.models import EndpointResult
from kprobe.output.json_report import endpoint_dict
from kprobe.output.sanitize import safe


@cache
def err2str(code: int) -> str:
    """Say a Kafka error code in librdkafka's wording (kcat prints it so)."""
    try:
        from confluent_kafka import KafkaError

        return str(KafkaError(code).str())
    except Exception:  # an unknown code: say its number
        return f"Broker: error {code}"


def _query(listing: Listing) -> str | None:
    return ",".join(listing.query) if listing.query else None


def _reach_suffix(result: EndpointResult | None) -> str:
    if result is None:
        return "  [not advertised]"
    remap = result.endpoint.remap
    if remap is not None:  # the verdict holds only with the mapping: say so on the broker's own line
        return _reach_suffix(replace(result, endpoint=replace(result.endpoint, remap=None)))[:-1] + (
            f"; dialled at {safe(remap.hostport)} by {remap.option}]")
    if result.status == "reachable":
        return "  [reachable from here]"
    if result.status == "degraded":
        return "  [reachable from here; some addresses fail]"
    if result.status == "partial":
        return "  [partly reachable from here]"
    if result.status == "unresolvable":
        return f"  [UNREACHABLE from here: does not resolve ({result.dns.status})]"
    if result.status == "unchecked":
        return "  [not checked: the run stopped first]"
    reasons = ",".join(sorted({t.status for t in result.tcp if t.status != "ok"})) or "no address"
    return f"  [UNREACHABLE from here: {reasons}]"


def _ids(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)


def _where(p: PartitionView) -> str:
    return f"{safe(p.topic)}/{p.info.partition}"


def render_text(listing: Listing) -> str:
    """Render kcat -L's text, line for line, then kprobe's additional lines."""
    b = listing.bootstrap
    meta = b.metadata
    assert meta is not None
    query = _query(listing)
    lines = [f"Metadata for {safe(query) if query else 'all topics'} "
             f"(from broker {b.answered_by_id}: {safe(b.answered_by_name)}):"]
    lines.append(f" {len(meta.brokers)} brokers:")
    for broker in meta.brokers:
        mark = " (controller)" if broker.node_id == meta.controller_id else ""
        suffix = _reach_suffix(listing.reachability.get(broker.node_id)) if listing.reachability is not None else ""
        lines.append(f"  broker {broker.node_id} at {safe(broker.host)}:{broker.port}{mark}{suffix}")
    lines.append(f" {len(listing.topics)} topics:")
    for topic in listing.topics:
        line = f'  topic "{safe(topic.name)}" with {len(topic.partitions)} partitions:'
        if topic.error_code:
            line += " " + err2str(topic.error_code)
            if topic.error_code == 5:
                line += " (try again)"
        lines.append(line)
        for p in topic.partitions:
            line = (f"    partition {p.partition}, leader {p.leader}, replicas: {_ids(p.replicas)}, "
                    f"isrs: {_ids(p.isrs)}")
            if p.error_code:
                line += ", " + err2str(p.error_code)
            lines.append(line)
    lines.extend(_additions(listing))
    return "\n".join(lines) + "\n"


def _additions(listing: Listing) -> list[str]:
    """Add kprobe's lines after kcat's, only when there is something to say."""
    out: list[str] = []
    missing = [p for p in listing.partitions if p.listener_not_found]
    offline = [p for p in listing.partitions if p.offline and not p.listener_not_found]
    under = [p for p in listing.partitions if p.under_replicated and not p.offline]
    unknown = [p for p in listing.partitions if not p.offline and not p.leader_known]
    if missing:
        # Not offline: the partition has a leader, on a broker that lacks the listener this bootstrap reached.
        out.append(f" {len(missing)} partitions led by a broker that lacks this listener (LISTENER_NOT_FOUND), "
                   "so producing to them fails through it: "
                   + ", ".join(f"{_where(p)} (replicas {_ids(p.info.replicas)})" for p in missing))
    if offline:
        out.append(f" {len(offline)} partitions offline (no leader): " + ", ".join(_where(p) for p in offline))
    if under:
        out.append(f" {len(under)} partitions under-replicated: " + ", ".join(_where(p) for p in under))
    if unknown:
        out.append(f" {len(unknown)} partitions led by a broker missing from the broker list: "
                   + ", ".join(f"{_where(p)} (leader {p.info.leader})" for p in unknown))
    unreachable = listing.unreachable_leaders
    if unreachable:
        out.append(f" {len(unreachable)} partitions led by brokers unreachable from here:")
        reach = listing.reachability or {}
        for p in unreachable:
            endpoint = reach.get(p.info.leader)
            where = safe(endpoint.endpoint.hostport) if endpoint else "not advertised"
            out.append(f"  producing to {_where(p)} will fail from this host (leader {p.info.leader} at {where})")
    return out


def to_dict(listing: Listing) -> dict[str, Any]:
    """`kcat -L -J`'s structure, plus kprobe's keys."""
    b = listing.bootstrap
    meta = b.metadata
    reach = listing.reachability
    views = {(p.topic, p.info.partition): p for p in listing.partitions}
    data: dict[str, Any] = {
        "originating_broker": {"id": b.answered_by_id, "name": b.answered_by_name} if meta else None,
        "query": {"topic": _query(listing) or "*"},
        "controllerid": meta.controller_id if meta else None,
        "brokers": [],
        "topics": [],
    }
    for broker in meta.brokers if meta else ():
        entry: dict[str, Any] = {"id": broker.node_id, "name": f"{broker.host}:{broker.port}", "rack": broker.rack}
        if reach is not None:
            result = reach.get(broker.node_id)
            entry["reachable"] = bool(result and result.status in ("reachable", "degraded", "partial"))
        data["brokers"].append(entry)
    for topic in listing.topics:
        t: dict[str, Any] = {"topic": topic.name}
        if topic.error_code:
            t["error"] = err2str(topic.error_code)
        t["partitions"] = []
        t["internal"] = topic.is_internal
        for p in topic.partitions:
            part: dict[str, Any] = {"partition": p.partition}
            if p.error_code:
                part["error"] = err2str(p.error_code)
            part["leader"] = p.leader
            part["replicas"] = [{"id": r} for r in p.replicas]
            part["isrs"] = [{"id": r} for r in p.isrs]
            part["offline_replicas"] = [{"id": r} for r in p.offline]
            view = views.get((topic.name, p.partition))
            # A leader id that is not in the broker list: clients cannot find where to send (kprobe's key).
            part["leader_known"] = view.leader_known if view else p.leader >= 0
            if reach is not None:
                part["leader_reachable"] = view.leader_reachable if view else None
            t["partitions"].append(part)
        data["topics"].append(t)
    data["cluster_id"] = meta.cluster_id if meta else None
    data["bootstraps"] = [
        {"address": a.address, "status": a.status, "error": a.error} for a in listing.attempts
    ]
    data["summary"] = {
        "status": listing.status,
        "brokers": len(meta.brokers) if meta else 0,
        "topics": len(listing.topics),
        "topics_in_error": len(listing.topic_errors),
        "partitions": len(listing.partitions),
        "offline_partitions": sum(1 for p in listing.partitions if p.offline and not p.listener_not_found),
        "listener_not_found_partitions": sum(1 for p in listing.partitions if p.listener_not_found),
        "unknown_leader_partitions": sum(1 for p in listing.partitions if not p.offline and not p.leader_known),
        # As the text counts them: an offline partition is counted as offline, not also as under-replicated.
        "under_replicated_partitions": sum(1 for p in listing.partitions if p.under_replicated and not p.offline),
        "unreachable_leader_partitions": len(listing.unreachable_leaders) if reach is not None else None,
    }
    if reach is not None:
        data["reachability"] = [endpoint_dict(r) for r in reach.values()]
    return data


def render_json(listing: Listing) -> str:
    """One JSON document, ASCII-only like the probe report."""
    return json.dumps(to_dict(listing), ensure_ascii=True) + "\n"
