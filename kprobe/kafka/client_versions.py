"""The request versions clients use, and the ones a client pins when it does not ask the broker.

A client that asks ApiVersions (the Java client since 0.10, librdkafka by default) picks what both
sides speak, so Kafka 4.0's removal of old versions (KIP-896) leaves it working: Java clients 0.11 to
2.1 produce and consume in a group against Kafka 4.1.1 (measured). A client that pins its versions
instead does not adapt: librdkafka with `api.version.request=false` and `broker.version.fallback`
below 0.10 takes a fixed table of versions (librdkafka's src/rdkafka_feature.c, copied below), and
against Kafka 4.1.1 it times out on every request the brokers no longer take.
"""

from __future__ import annotations

from collections.abc import Mapping

# The requests an ordinary producer, consumer and group member send: what the report lists per broker.
CLIENT_APIS: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups",
    16: "ListGroups", 18: "ApiVersions", 22: "InitProducerId",
}

# librdkafka's tables for brokers older than 0.10 (rd_kafka_ApiVersion_0_9_0 and earlier, src/rdkafka_feature.c),
# matched on the fallback's prefix as librdkafka matches it; any other fallback (0.10.0 and later) is "queryable":
# librdkafka then relies on what the broker says.
_LEGACY: tuple[tuple[str, dict[int, tuple[int, int]]], ...] = (
    ("0.9.0", {0: (0, 1), 1: (0, 1), 2: (0, 0), 3: (0, 0), 8: (0, 2), 9: (0, 1), 10: (0, 0), 11: (0, 0),
               12: (0, 0), 13: (0, 0), 14: (0, 0), 15: (0, 0), 16: (0, 0)}),
    ("0.8.2", {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (0, 0), 8: (0, 1), 9: (0, 1), 10: (0, 0)}),
    ("0.8.1", {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (0, 0), 8: (0, 1), 9: (0, 0)}),
    ("0.8.0", {0: (0, 0), 1: (0, 0), 2: (0, 0), 3: (0, 0)}),
)


def pinned_versions(props: Mapping[str, str]) -> tuple[str, dict[int, tuple[int, int]]] | None:
    """(the fallback, its table) where librdkafka's settings pin request versions, else None.

    Only `api.version.request=false` pins, and only a fallback below 0.10: librdkafka's table for
    0.10.0 and later lists ApiVersions alone, and what the broker answers then decides.
    """
    if (props.get("api.version.request") or "true").strip().lower() != "false":
        return None
    fallback = (props.get("broker.version.fallback") or "0.10.0").strip()
    for prefix, table in _LEGACY:
        if fallback.startswith(prefix):
            return fallback, table
    return None


def refused(table: Mapping[int, tuple[int, int]],
            offered: Mapping[str, tuple[int, int]]) -> list[tuple[str, tuple[int, int], tuple[int, int] | None]]:
    """Each pinned request the broker does not take at any pinned version: (name, pinned range, offered range).

    `offered` is the broker's answer by request name, as the report keeps it.
    """
    out = []
    for key, (low, high) in sorted(table.items()):
        name = CLIENT_APIS.get(key, f"API {key}")
        broker = offered.get(name)
        if broker is None or high < broker[0] or low > broker[1]:
            out.append((name, (low, high), broker))
    return out
