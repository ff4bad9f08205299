"""`kprobe list` output: kcat's text and `kcat -L -J` JSON, then what kprobe adds.

Text: every line kcat prints is printed the same way (`metadata_print` in kcat.c), so people
and scripts read it as before; kprobe's additions are extra lines, and with reachability a
suffix on broker lines. Host and topic names are escaped (kcat prints them raw, which lets a
hostile broker write escape sequences to the terminal).
JSON: a superset of `kcat -L -J` (same keys and nesting); additions under new keys.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import cache, lru_cache, partial
from itertools import chain
from json.encoder import encode_basestring_ascii
from operator import itemgetter
from typing import Any, TextIO

from kprobe.models import EndpointResult, PartitionRun, PartitionTable, TopicInfo
from kprobe.records import replace
from kprobe.runs.listing import Listing, PartitionView
from kprobe.sanitize import safe


@cache
def err2str(code: int) -> str:
    """Say a Kafka error code in librdkafka's wording (kcat prints it so)."""
    try:
        from confluent_kafka import KafkaError

        return str(KafkaError(code).str())
    except Exception:  # an unknown code: say its number
        return f"Broker: error {code}"


def _json_str(text: str) -> str:
    """A JSON string as json.dumps(ensure_ascii=True) writes it (the same C function)."""
    return str(encode_basestring_ascii(text))


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


class _SafeNames(dict[str, str]):
    """Topic names escaped once each, however many of their partitions a line names."""

    def __missing__(self, name: str) -> str:
        self[name] = safe(name)
        return self[name]


def _where(p: PartitionView, names: _SafeNames) -> str:
    return f"{names[p.topic]}/{p.partition}"


def _ids_template(count: int, item: str, sep: str) -> str:
    return sep.join([item] * count)


@lru_cache(maxsize=256)
def _text_template(replicas: int, isrs: int, offline: int, error_code: int) -> str:
    """The partition line kcat prints, as a %-template over a run's values (offline replicas consumed unseen)."""
    line = (f"    partition %s, leader %s, replicas: {_ids_template(replicas, '%s', ',')}, "
            f"isrs: {_ids_template(isrs, '%s', ',')}" + "%.0s" * offline)
    if error_code:
        line += ", " + err2str(error_code).replace("%", "%%")
    return line


# A run's template repeated once per partition, so that one %-format renders the whole run in C.
@lru_cache(maxsize=64)
def _repeated(template: str, count: int, sep: str) -> str:
    return sep.join([template] * count)


def _run_text(run: PartitionRun) -> str:
    """The run's lines, without the last newline."""
    return _repeated(_text_template(run.replicas, run.isrs, run.offline, run.error_code), len(run), "\n") % run.values


def _in_id_order(table: PartitionTable, render: Callable[[PartitionRun, str], str], sep: str) -> str:
    """The table's partitions rendered a run at a time, joined with `sep` in id order.

    A table of stretches already in order (a healthy topic) is the runs one after the other; runs
    that gather partitions from all over the topic are rendered whole, then their lines merged by
    (id, position in the answer): sorting in C, not a loop per partition.
    """
    if table.in_order:
        return sep.join(render(run, sep) for run in table.runs)
    merged = sorted(chain.from_iterable(zip(run.ids, run.positions, render(run, "\n").split("\n"), strict=True)
                                        for run in table.runs))
    return sep.join(map(itemgetter(2), merged))


def write_text(listing: Listing, out: TextIO) -> None:
    """Write kcat -L's text, line for line, then kprobe's additional lines; a topic at a time."""
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
    out.write("\n".join(lines) + "\n")
    for topic in listing.topics:
        line = f'  topic "{safe(topic.name)}" with {len(topic.partitions)} partitions:'
        if topic.error_code:
            line += " " + err2str(topic.error_code)
            if topic.error_code == 5:
                line += " (try again)"
        body = _in_id_order(_table(topic), lambda run, _: _run_text(run), "\n")
        out.write(f"{line}\n{body}\n" if body else f"{line}\n")
    more = _additions(listing)
    if more:
        out.write("\n".join(more) + "\n")


def render_text(listing: Listing) -> str:
    """The text of kcat -L as one string (write_text streams it)."""
    out = io.StringIO()
    write_text(listing, out)
    return out.getvalue()


def _table(topic: TopicInfo) -> PartitionTable:
    return PartitionTable.of(topic.partitions)


def _additions(listing: Listing) -> list[str]:
    """Add kprobe's lines after kcat's, only when there is something to say."""
    out: list[str] = []
    names = _SafeNames()
    missing, offline, under, unknown = (listing.listener_not_found, listing.offline, listing.under_replicated,
                                        listing.unknown_leader)
    if missing:
        # Not offline: the partition has a leader, on a broker that lacks the listener this bootstrap reached.
        out.append(f" {len(missing)} partitions led by a broker that lacks this listener (LISTENER_NOT_FOUND), "
                   "so producing to them fails through it: "
                   + ", ".join(f"{_where(p, names)} (replicas {_ids(p.replicas)})" for p in missing))
    if offline:
        out.append(f" {len(offline)} partitions offline (no leader): " + ", ".join(_where(p, names) for p in offline))
    if under:
        out.append(f" {len(under)} partitions under-replicated: " + ", ".join(_where(p, names) for p in under))
    if unknown:
        out.append(f" {len(unknown)} partitions led by a broker missing from the broker list: "
                   + ", ".join(f"{_where(p, names)} (leader {p.leader})" for p in unknown))
    unreachable = listing.unreachable_leaders
    if unreachable:
        out.append(f" {len(unreachable)} partitions led by brokers unreachable from here:")
        reach = listing.reachability or {}
        for p in unreachable:
            endpoint = reach.get(p.leader)
            where = safe(endpoint.endpoint.hostport) if endpoint else "not advertised"
            out.append(f"  producing to {_where(p, names)} will fail from this host (leader {p.leader} at {where})")
    return out


_JSON_BOOL = {True: "true", False: "false", None: "null"}


@lru_cache(maxsize=256)
def _json_template(replicas: int, isrs: int, offline: int, error_code: int) -> str:
    """One partition of `kcat -L -J` (with kprobe's keys) as json.dumps writes it, as a %-template
    over a run's values, ending where the leader's own keys (`leader_known`, ...) follow.
    """
    error = f'"error": {_json_str(err2str(error_code))}, '.replace("%", "%%") if error_code else ""
    ids = '{"id": %s}'
    return (f'{{"partition": %s, {error}"leader": %s, "replicas": [{_ids_template(replicas, ids, ", ")}], '
            f'"isrs": [{_ids_template(isrs, ids, ", ")}], "offline_replicas": [{_ids_template(offline, ids, ", ")}]')


def _run_json(listing: Listing, run: PartitionRun, sep: str) -> str:
    """A run's partitions joined with `sep`: one %-format for the run when its leaders' keys agree."""
    reach = listing.reachability

    def leader_keys(leader: int) -> str:
        keys = f', "leader_known": {_JSON_BOOL[listing.leader_known(leader)]}'
        if reach is not None:
            keys += f', "leader_reachable": {_JSON_BOOL[listing.leader_reachable(leader)]}'
        return keys + "}"

    template = _json_template(run.replicas, run.isrs, run.offline, run.error_code)
    leaders = run.leaders
    tails = {leader: leader_keys(leader) for leader in set(leaders)}
    if len(set(tails.values())) == 1:
        (tail,) = set(tails.values())
        return _repeated(template + tail.replace("%", "%%"), len(run), sep) % run.values
    stride, values = run.stride, run.values
    return sep.join(template % values[i * stride:(i + 1) * stride] + tails[leader]
                    for i, leader in enumerate(leaders))


def _topic_json(listing: Listing, topic: TopicInfo) -> str:
    error = f', "error": {_json_str(err2str(topic.error_code))}' if topic.error_code else ""
    partitions = _in_id_order(_table(topic), partial(_run_json, listing), ", ")
    return (f'{{"topic": {_json_str(topic.name)}{error}, "partitions": [{partitions}], '
            f'"internal": {_JSON_BOOL[topic.is_internal]}}}')


def _head_and_tail(listing: Listing) -> tuple[dict[str, Any], dict[str, Any]]:
    """`kcat -L -J`'s keys before "topics" and kprobe's after them."""
    b = listing.bootstrap
    meta = b.metadata
    reach = listing.reachability
    head: dict[str, Any] = {
        "originating_broker": {"id": b.answered_by_id, "name": b.answered_by_name} if meta else None,
        "query": {"topic": _query(listing) or "*"},
        "controllerid": meta.controller_id if meta else None,
        "brokers": [],
    }
    for broker in meta.brokers if meta else ():
        entry: dict[str, Any] = {"id": broker.node_id, "name": f"{broker.host}:{broker.port}", "rack": broker.rack}
        if reach is not None:
            entry["reachable"] = bool(listing.leader_reachable(broker.node_id))  # one word with the text's leaders
        head["brokers"].append(entry)
    tail: dict[str, Any] = {
        "cluster_id": meta.cluster_id if meta else None,
        "bootstraps": [{"address": a.address, "status": a.status, "error": a.error} for a in listing.attempts],
        "summary": {
            "status": listing.status,
            "brokers": len(meta.brokers) if meta else 0,
            "topics": len(listing.topics),
            "topics_in_error": len(listing.topic_errors),
            "partitions": listing.partition_count,
            "offline_partitions": len(listing.offline),
            "listener_not_found_partitions": len(listing.listener_not_found),
            "unknown_leader_partitions": len(listing.unknown_leader),
            # As the text counts them: an offline partition is counted as offline, not also as under-replicated.
            "under_replicated_partitions": len(listing.under_replicated),
            "unreachable_leader_partitions": len(listing.unreachable_leaders) if reach is not None else None,
        },
    }
    if reach is not None:
        from kprobe.output.json_report import endpoint_dict  # the probe report's shape, for --reachability only

        tail["reachability"] = [endpoint_dict(r) for r in reach.values()]
    return head, tail


def write_json(listing: Listing, out: TextIO) -> None:
    """Write one JSON document, ASCII-only like the probe report, a topic at a time.

    `kcat -L -J`'s structure plus kprobe's keys, byte for byte what `json.dumps` makes of it (its
    default separators): the keys around "topics" go through json.dumps, the partitions through
    %-templates of that same text, so a 100,000-partition document is never whole in memory.
    """
    head, tail = _head_and_tail(listing)
    out.write(json.dumps(head, ensure_ascii=True)[:-1] + ', "topics": [')
    for i, topic in enumerate(listing.topics):
        out.write((", " if i else "") + _topic_json(listing, topic))
    out.write("], " + json.dumps(tail, ensure_ascii=True)[1:] + "\n")


def render_json(listing: Listing) -> str:
    """The JSON document as one string (write_json streams it)."""
    out = io.StringIO()
    write_json(listing, out)
    return out.getvalue()
