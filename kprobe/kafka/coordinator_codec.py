"""FindCoordinator (v0-v6) and where Kafka places a group or a transactional id: pure, no sockets.

A consumer group, a transactional producer and a share group each talk to one broker of their
own, the coordinator: the leader of the partition of an internal topic (`__consumer_offsets`,
`__transaction_state`) that the key hashes to. A client asks any broker which one with
FindCoordinator, then connects to the endpoint named in the answer, so that endpoint must work
from where the client runs even when every partition leader it produces to does.

The version is chosen from the broker's ApiVersions answer: Kafka 4.0 removed v0 (KIP-896), v4
(Kafka 3.0, KIP-699) asks for many keys at once, v6 (Kafka 4.0, KIP-932) adds share groups.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kprobe.kafka.wire import (
    API_FIND_COORDINATOR,
    API_SHARE_GROUP_HEARTBEAT,
    Reader,
    WireError,
    enc_string,
    error_name,
    is_flexible,
    uvarint,
)
from kprobe.models.application import CoordinatorReply

FIND_COORDINATOR_MAX = 6
KEY_GROUP, KEY_TRANSACTION, KEY_SHARE = 0, 1, 2
BATCHED_FROM = 4  # KIP-699: a list of keys per request
LOAD_IN_PROGRESS, NOT_AVAILABLE = 14, 15  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
# The Java client logs a coordinator as a node of its own, `Integer.MAX_VALUE - nodeId`, on a connection apart
# from the broker's ("Discovered group coordinator host:9092 (id: 2147483646 rack: null)").
JAVA_COORDINATOR_BASE = 2147483647


def java_hash(text: str) -> int:
    """Java's `String.hashCode()`: over UTF-16 code units, wrapping at 32 bits, as the broker computes it."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, partitions: int) -> int:
    """The internal topic's partition that holds `key`: `Utils.abs(key.hashCode()) % partitions`.

    Kafka's `Utils.abs` maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative); the group
    coordinator (`GroupCoordinatorService.partitionFor`) and the transaction coordinator place keys
    this way, each with its own topic's partition count.
    """
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def find_coordinator_version(api_versions: dict[int, tuple[int, int]], key_type: int) -> int | None:
    """The highest FindCoordinator version both sides speak that can ask for `key_type`; None if none can."""
    low, high = api_versions.get(API_FIND_COORDINATOR, (0, -1))
    version = min(high, FIND_COORDINATOR_MAX)
    lowest = {KEY_GROUP: 0, KEY_TRANSACTION: 1, KEY_SHARE: 6}[key_type]
    return version if version >= max(low, lowest) else None


def encode_find_coordinator(version: int, key_type: int, keys: Sequence[str]) -> bytes:
    """The request body: one key before v4, every key at once from v4."""
    if version < BATCHED_FROM:
        if len(keys) != 1:
            raise ValueError("FindCoordinator before v4 asks for one key")
        if version == 0:
            return enc_string(keys[0], False)
        flexible = is_flexible(API_FIND_COORDINATOR, version)
        body = enc_string(keys[0], flexible) + struct.pack(">b", key_type)
        return body + b"\x00" if flexible else body
    body = struct.pack(">b", key_type) + uvarint(len(keys) + 1)
    return body + b"".join(enc_string(k, True) for k in keys) + b"\x00"


def reply_error(reply: CoordinatorReply) -> str | None:
    """A reply's error in Kafka's words (its name, then the broker's message when it gave one); None if none."""
    if reply.error_code == 0:
        return None
    name = error_name(reply.error_code)
    return f"{name}: {reply.error_message}" if reply.error_message else name


# KIP-848's and KIP-932's heartbeats (flexible from v0). Offered in ApiVersions whether or not the protocol is
# switched on (measured on Kafka 4.1.1): only an answer tells, UNSUPPORTED_VERSION where it is off.
UNSUPPORTED_VERSION = 35


def encode_empty_heartbeat(api_key: int, version: int) -> bytes:
    """A heartbeat for the empty group id, which no broker accepts: it says whether the protocol is on, and
    joins nothing (the broker refuses the request before any group is looked up).
    """
    empty, null = enc_string("", True), enc_string(None, True)
    if api_key == API_SHARE_GROUP_HEARTBEAT:
        # group id, member id, member epoch, rack id, subscribed topic names (null), tagged fields
        return empty + empty + struct.pack(">i", 0) + null + b"\x00" + b"\x00"
    body = empty + empty + struct.pack(">i", 0) + null + null + struct.pack(">i", 30000) + b"\x00"
    if version >= 1:
        body += null  # subscribed topic regex (KIP-848's v1)
    return body + null + b"\x00" + b"\x00"  # server assignor, topic partitions (null), tagged fields


def decode_heartbeat_error(reader: Reader) -> tuple[int, str | None]:
    """A heartbeat answer's error code and message (the rest is for members, which kprobe never is)."""
    reader.int32()  # throttle_time_ms
    return reader.int16(), reader.string(True, nullable=True)


def decode_find_coordinator(reader: Reader, version: int, keys: Sequence[str]) -> list[CoordinatorReply]:
    """The answer for `keys`, in their order; a key the broker did not answer for is a protocol error."""
    flexible = is_flexible(API_FIND_COORDINATOR, version)
    if version >= 1:
        reader.int32()  # throttle_time_ms
    if version < BATCHED_FROM:
        code = reader.int16()
        message = reader.string(flexible, nullable=True) if version >= 1 else None
        node_id, host, port = reader.int32(), reader.string(flexible) or "", reader.int32()
        if flexible:
            reader.tagged_fields()
        replies = [CoordinatorReply(key=keys[0], node_id=node_id, host=host, port=port, error_code=code,
                                    error_message=message)]
    else:
        replies = []
        for _ in range(reader.array_len(True, 14)):
            key = reader.string(True) or ""
            node_id, host, port = reader.int32(), reader.string(True) or "", reader.int32()
            code = reader.int16()
            message = reader.string(True, nullable=True)
            reader.tagged_fields()
            replies.append(CoordinatorReply(key=key, node_id=node_id, host=host, port=port, error_code=code,
                                            error_message=message))
        reader.tagged_fields()
    if reader.pos != len(reader.data):
        raise WireError("protocol", f"FindCoordinator response has {len(reader.data) - reader.pos} unexpected "
                        "trailing bytes")
    by_key = {r.key: r for r in replies}
    missing = [k for k in keys if k not in by_key]
    if missing:
        raise WireError("protocol", f"FindCoordinator answered no coordinator for {missing[0]!r}")
    return [by_key[k] for k in keys]
