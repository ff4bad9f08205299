"""The bytes of the few Kafka requests kprobe sends and of their answers: pure, no sockets.

Kept apart from the connection so every decoder can be tested on recorded bytes and on hostile
ones without a peer, and so a request's version is always a parameter: the connection picks
it from the broker's ApiVersions answer (Kafka 1.1 to 4.x speak different ranges).

Decoding is strict and bounded: every length is checked against the bytes actually present, so
a hostile or broken peer gets a `WireError("protocol", ...)`, never an exception from deep inside
or an allocation sized by the peer.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import chain

from kprobe.models import (
    RUN_MAX,
    AdvertisedBroker,
    ClusterMetadata,
    PartitionRun,
    PartitionTable,
    Protocol,
    RunBuilder,
    TlsFailure,
    TopicInfo,
    run_limit,
)

API_METADATA = 3
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
API_DESCRIBE_CONFIGS = 32
API_DESCRIBE_CLUSTER = 60
RESOURCE_BROKER = 4

# DescribeCluster's EndpointType (v1+, KIP-919): which endpoints to describe.
ENDPOINT_TYPE_BROKERS, ENDPOINT_TYPE_CONTROLLERS = 1, 2
DESCRIBE_CLUSTER_MIN, DESCRIBE_CLUSTER_MAX = 1, 2  # v0 cannot ask for controllers
# Requests only a KRaft controller listener offers (the raft and registration RPCs). A controller
# listener lists them and not Metadata (seen on Kafka 4.1: it offers neither Produce nor Metadata,
# and closes the connection on a Metadata request), which is how clients meet it: Java's
# "The node does not support METADATA" (KAFKA-16612).
CONTROLLER_ONLY_APIS = frozenset({52, 53, 54, 62, 63, 70})  # Vote, Begin/EndQuorumEpoch, Broker/ControllerRegistration

METADATA_MIN, METADATA_MAX = 4, 12
MAX_FRAME = 256 * 1024 * 1024

# The few Kafka error codes kprobe names in its own words; the rest print as numbers.
ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR",
    0: "NO_ERROR",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    5: "LEADER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE",
    19: "NOT_ENOUGH_REPLICAS",
    29: "TOPIC_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    33: "UNSUPPORTED_SASL_MECHANISM",
    34: "ILLEGAL_SASL_STATE",
    35: "UNSUPPORTED_VERSION",
    58: "SASL_AUTHENTICATION_FAILED",
    114: "MISMATCHED_ENDPOINT_TYPE",
    115: "UNSUPPORTED_ENDPOINT_TYPE",
}


def error_name(code: int) -> str:
    """Name a Kafka error code the way the broker's logs and kcat do."""
    return ERROR_NAMES.get(code, f"KAFKA_ERROR_{code}")


class WireError(Exception):
    """A request that failed, classified for the report.

    `kind` is one of: dns_failed, refused, timeout, unreachable, closed, protocol, tls,
    auth_failed, controller (a KRaft controller listener answered where a broker was expected;
    `node_id` says which node, when it said), error. The message never contains credentials.
    `deadline` says the run's own deadline cut the request short (which proves nothing about the
    broker, unlike its own timeout); `awaiting_response` says the request had been sent (the connection worked).
    """

    def __init__(
        self, kind: str, message: str, *, deadline: bool = False, awaiting_response: bool = False,
        mechanisms: tuple[str, ...] = (), tls_failure: TlsFailure | None = None, speaks_tls: bool | None = None,
        token_unavailable: bool = False, node_id: int | None = None, wanted_protocol: Protocol | None = None,
        tls_alert: str | None = None, closed_without_sasl: bool = False,
    ) -> None:
        super().__init__(message)
        self.node_id = node_id  # kind "controller": the node that answered, learnt from DescribeConfigs
        self.kind = kind
        self.deadline = deadline
        self.awaiting_response = awaiting_response
        self.mechanisms = mechanisms  # a refused SaslHandshake: the mechanisms the listener enabled
        self.tls_failure = tls_failure  # with kind "tls": which check failed
        self.speaks_tls = speaks_tls  # the peer answered in TLS (True) where Kafka was expected
        self.token_unavailable = token_unavailable  # OAUTHBEARER: no token could be had; the broker saw none
        self.wanted_protocol = wanted_protocol  # the security.protocol the listener's answer shows it wants
        self.tls_alert = tls_alert  # the TLS alert the broker refused the client with ("certificate required")
        # A connection without SASL closed at its first request after ApiVersions: what a SASL listener does
        # to a client that skips SaslHandshake (worth asking the listener, on a new connection).
        self.closed_without_sasl = closed_without_sasl
        # The Metadata request itself timed out on a connection whose earlier answers arrived: the answer
        # may be too large for the path (a path-MTU black hole), worth asking again for a small one.
        self.metadata_stalled = False


class Reader:
    """Bounds-checked decoding of a Kafka response body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        """The next `n` bytes, or a protocol error if the response is shorter."""
        if n < 0 or self.pos + n > len(self.data):
            raise WireError("protocol", f"truncated response: wanted {n} bytes at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        """A signed byte."""
        return int(struct.unpack(">b", self.take(1))[0])

    def int16(self) -> int:
        """A big-endian int16."""
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        """A big-endian int32."""
        return int(struct.unpack(">i", self.take(4))[0])

    def boolean(self) -> bool:
        """A one-byte boolean."""
        return self.take(1) != b"\x00"

    def uvarint(self) -> int:
        """An unsigned varint, at most 5 bytes (a longer one is hostile)."""
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise WireError("protocol", "varint too long")

    def string(self, flexible: bool, nullable: bool = False) -> str | None:
        """A (compact when `flexible`) string; None only where the field is nullable."""
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            if nullable or n == -1:
                return None
            raise WireError("protocol", "negative string length")
        # surrogateescape keeps undecodable bytes recoverable: the report can show them exactly.
        return self.take(n).decode("utf-8", "surrogateescape")

    def array_len(self, flexible: bool, min_item: int = 1) -> int:
        """An array's length, refused when `min_item`-byte items could not fit in what is left."""
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise WireError("protocol", "a required array is null")
        if n * min_item > len(self.data) - self.pos:
            raise WireError("protocol", f"array of {n} items does not fit in the response")
        return n

    def int32_array(self, flexible: bool) -> tuple[int, ...]:
        """An array of int32 (replicas, ISRs)."""
        n = self.array_len(flexible, 4)
        raw = self.take(4 * n)
        return struct.unpack(f">{n}i", raw) if n else ()

    def tagged_fields(self) -> None:
        """Skip a flexible version's tagged fields: kprobe reads none of them."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def enc_string(value: str | None, flexible: bool) -> bytes:
    """A (compact when `flexible`) nullable string."""
    if value is None:
        return b"\x00" if flexible else struct.pack(">h", -1)
    raw = value.encode()
    return (uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def request_header(api_key: int, version: int, correlation_id: int, client_id: str, flexible: bool) -> bytes:
    """Request header v1, or v2 (with empty tagged fields) for flexible versions."""
    header = struct.pack(">hhi", api_key, version, correlation_id) + enc_string(client_id, False)
    return header + b"\x00" if flexible else header


def looks_like_tls(size_bytes: bytes) -> bool:
    """A TLS record header (alert 0x15 or handshake 0x16, version 3.x) where a Kafka frame size was expected.

    A TLS listener that receives plaintext Kafka answers with an alert; read as a frame size it
    is some 350 MB, which clients report as a failed request to "an old broker". Seen here, it
    means: this listener wants TLS.
    """
    return len(size_bytes) >= 2 and size_bytes[0] in (0x15, 0x16) and size_bytes[1] == 0x03


def is_flexible(api_key: int, version: int) -> bool:
    """Whether a request of this version uses the flexible (compact, tagged) encoding, headers included."""
    if api_key == API_METADATA:
        return version >= 9
    return api_key == API_DESCRIBE_CLUSTER  # flexible from v0


def response_header(reader: Reader, api_key: int, flexible: bool, correlation_id: int) -> None:
    """Check the correlation id; skip the tagged fields of header v1.

    ApiVersions responses always use header v0, whatever the request version.
    """
    if reader.int32() != correlation_id:
        raise WireError("protocol", "response does not match the request (correlation id)")
    if flexible and api_key != API_API_VERSIONS:
        reader.tagged_fields()


def decode_api_versions(reader: Reader) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: which versions of each request this broker speaks."""
    code = reader.int16()
    versions: dict[int, tuple[int, int]] = {}
    for _ in range(reader.array_len(False, 6)):
        key, low, high = reader.int16(), reader.int16(), reader.int16()
        versions[key] = (low, high)
    if code != 0:
        raise WireError("protocol", f"ApiVersions failed: {error_name(code)}")
    return versions


def metadata_version(api_versions: dict[int, tuple[int, int]]) -> int:
    """The highest Metadata version both sides speak, within what kprobe decodes."""
    low, high = api_versions.get(API_METADATA, (METADATA_MIN, METADATA_MAX))
    version = min(high, METADATA_MAX)
    if version < max(low, METADATA_MIN):
        raise WireError("protocol", f"broker speaks Metadata v{low}-v{high}, kprobe needs v4-v12")
    return version


def encode_metadata_request(version: int, topics: Sequence[str] | None, auto_create: bool = False) -> bytes:
    """Metadata for `topics` ([] = brokers only, None = all topics).

    A diagnostic never creates a topic. `auto_create` asks what a producer asks (librdkafka's and Java's
    producers set it), so that --publish learns before producing whether the collector would create its
    topic on first use (auto.create.topics.enable): it answers UNKNOWN_TOPIC_OR_PARTITION only where it will not.
    """
    flexible = version >= 9
    body = bytearray()
    if topics is None:
        body += b"\x00" if flexible else struct.pack(">i", -1)
    else:
        body += uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
        for name in topics:
            if version >= 10:
                body += b"\x00" * 16  # topic id: none, ask by name
            body += enc_string(name, flexible)
            if flexible:
                body += b"\x00"
    body += b"\x01" if auto_create else b"\x00"  # allow_auto_topic_creation
    if 8 <= version <= 10:
        body += b"\x00"  # include_cluster_authorized_operations
    if version >= 8:
        body += b"\x00"  # include_topic_authorized_operations
    if flexible:
        body += b"\x00"
    return bytes(body)


def decode_metadata(reader: Reader, version: int) -> ClusterMetadata:
    """Decode a Metadata response body (v4-v12).

    Partitions decode in bulk (`_partitions`): a big cluster's answer is mostly partitions.
    """
    flexible = version >= 9
    reader.int32()  # throttle_time_ms
    brokers = []
    for _ in range(reader.array_len(flexible, 10)):
        node_id = reader.int32()
        host = reader.string(flexible) or ""
        port = reader.int32()
        rack = reader.string(flexible, nullable=True)
        if flexible:
            reader.tagged_fields()
        brokers.append(AdvertisedBroker(node_id, host, port, rack))
    cluster_id = reader.string(flexible, nullable=True)
    controller_id = reader.int32()
    topics = []
    for _ in range(reader.array_len(flexible, 4)):
        code = reader.int16()
        name = reader.string(flexible, nullable=True) or ""
        if version >= 10:
            reader.take(16)  # topic id
        internal = reader.boolean()
        partitions = _partitions(reader, version, reader.array_len(flexible, 14))
        if version >= 8:
            reader.int32()  # topic authorized operations
        if flexible:
            reader.tagged_fields()
        topics.append(TopicInfo(name, partitions, code, internal))
    if 8 <= version <= 10:
        reader.int32()  # cluster authorized operations
    if flexible:
        reader.tagged_fields()
    if reader.pos != len(reader.data):
        raise WireError("protocol", f"Metadata response has {len(reader.data) - reader.pos} unexpected trailing bytes")
    return ClusterMetadata(brokers=tuple(brokers), cluster_id=cluster_id, controller_id=controller_id,
                           topics=tuple(topics), api_version=version)


# How a partition is laid out in Metadata vN, for the bulk decoder: the bytes before the replica
# count (error 2, index 4, leader 4, and the leader epoch 4 from v7), whether there are offline
# replicas (v5+), and whether counts are one-byte compact varints with a tagged-fields byte (v9+).
def _layout(version: int) -> tuple[int, bool, bool]:
    return (14 if version >= 7 else 10), version >= 5, version >= 9


def _formats(version: int, replicas: int, isrs: int, offline: int) -> tuple[str, str]:
    """Two `struct` formats for one partition of this shape in the plain encoding: one reads its
    error code, counts (and tagged-fields byte) to check the shape, the other its id, leader and
    replica ids, skipping the rest.
    """
    head, has_offline, flexible = _layout(version)
    epoch = f"{head - 10}x"  # the leader epoch, from v7
    if flexible:
        return (f"h{head - 2}xB{4 * replicas}xB{4 * isrs}xB{4 * offline}xB",
                f"2xii{epoch}x{replicas}ix{isrs}ix{offline}ix")
    if has_offline:
        return (f"h{head - 2}xi{4 * replicas}xi{4 * isrs}xi{4 * offline}x",
                f"2xii{epoch}4x{replicas}i4x{isrs}i4x{offline}i")
    return f"h{head - 2}xi{4 * replicas}xi{4 * isrs}x", f"2xii{epoch}4x{replicas}i4x{isrs}i"


# A compiled format holds an entry per value, so one for a whole run of 1,024 partitions takes a few
# hundred KB: few are kept (topics of a cluster share a handful of partition counts and shapes).
@lru_cache(maxsize=32)
def _run_structs(version: int, replicas: int, isrs: int, offline: int, count: int) -> tuple[struct.Struct, ...]:
    """The check and values formats of `_formats` for `count` partitions at once."""
    return tuple(struct.Struct(">" + f * count) for f in _formats(version, replicas, isrs, offline))


@lru_cache(maxsize=256)
def _one_struct(version: int, replicas: int, isrs: int, offline: int) -> struct.Struct:
    """The values format of `_formats` for one partition."""
    return struct.Struct(">" + _formats(version, replicas, isrs, offline)[1])


@lru_cache(maxsize=256)
def _check_struct(version: int, replicas: int, isrs: int, offline: int) -> struct.Struct:
    """The check format of `_formats` for one partition: it spans the whole partition."""
    return struct.Struct(">" + _formats(version, replicas, isrs, offline)[0])


def _partitions(reader: Reader, version: int, count: int) -> PartitionTable:
    """A topic's `count` partitions, as runs of columns.

    Brokers send a topic's partitions mostly alike (same replication factor, full ISR, no error),
    so each chunk of up to RUN_MAX partitions is first read as if all had the first one's shape:
    one `struct` call checks that they do, one more reads them (C, not a loop per field). A chunk
    that is not uniform is scanned partition by partition (`_scan`). Either way every length is
    checked against the bytes present: a broken answer is a protocol error, as everywhere here.
    """
    builder = RunBuilder()
    left = count
    while left:
        chunk = min(left, RUN_MAX)
        run = _uniform(reader, version, chunk, builder.added)
        if run is None:
            _scan(reader, version, chunk, builder)
        else:
            builder.append(run)
            chunk = len(run)
        left -= chunk
    return builder.table()


_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


def _shape(data: bytes, pos: int, version: int) -> tuple[int, int, int, int, int] | None:
    """(error code, replicas, isrs, offline, size) of the partition at `pos` if it is in the plain
    encoding (non-negative counts; from v9 one-byte counts and no tagged field) and whole; else None.
    """
    head, has_offline, flexible = _layout(version)
    try:
        if flexible:
            at = pos + head
            replicas = data[at] - 1
            at += 1 + 4 * replicas
            isrs = data[at] - 1
            at += 1 + 4 * isrs
            offline = data[at] - 1
            at += 1 + 4 * offline
            if min(replicas, isrs, offline) < 0 or max(replicas, isrs, offline) >= 0x7F or data[at] != 0:
                return None
            end = at + 1
        else:
            (replicas,) = _INT32.unpack_from(data, pos + head)
            at = pos + head + 4 + 4 * replicas
            (isrs,) = _INT32.unpack_from(data, at)
            at += 4 + 4 * isrs
            offline = 0
            if has_offline:
                (offline,) = _INT32.unpack_from(data, at)
                at += 4 + 4 * offline
            if min(replicas, isrs, offline) < 0:
                return None
            end = at
    except (IndexError, struct.error):  # runs past the end
        return None
    if end > len(data):
        return None
    (error,) = _INT16.unpack_from(data, pos)
    return error, replicas, isrs, offline, end - pos


def _uniform(reader: Reader, version: int, count: int, start: int) -> PartitionRun | None:
    """Up to `count` partitions shaped like the first (as many as one run holds), read in bulk;
    None (nothing consumed) if they are not all alike.
    """
    data, pos = reader.data, reader.pos
    first = _shape(data, pos, version)
    if first is None:
        return None
    error, replicas, isrs, offline, size = first
    count = min(count, run_limit(replicas, isrs, offline))
    if pos + size * count > len(data):
        return None
    check, values = _run_structs(version, replicas, isrs, offline, count)
    seen = check.unpack_from(data, pos)
    width = len(seen) // count
    if seen != seen[:width] * count:
        return None
    reader.pos = pos + size * count
    return PartitionRun(error, replicas, isrs, offline, values.unpack_from(data, pos), start=start)


def _scan(reader: Reader, version: int, count: int, builder: RunBuilder) -> None:
    """`count` partitions of mixed shapes (a topic whose ISRs shrank): same-shaped partitions are
    gathered into one run each, read record by record in C; a partition in any other encoding
    (multi-byte counts, tagged fields, or broken) is read field by field.

    A topic has few shapes: each partition is first checked against the shapes already met (one
    `struct` call each, the check of `_formats`, which reads the counts where that shape has them:
    all equal means that shape), and measured field by field only when none fits.
    """
    data = reader.data
    pos = reader.pos
    first = builder.added
    # Per shape met: its check format, the values the check reads, its size, where its partitions are
    # (in the bytes and in the answer's order), and how many one run holds.
    shapes: list[tuple[struct.Struct, tuple[int, ...], int, list[int], list[int], int]] = []
    odd: list[PartitionRun] = []
    for k in range(count):
        for shape in shapes:
            try:
                if shape[0].unpack_from(data, pos) == shape[1]:
                    break
            except struct.error:  # runs past the end: not this shape
                pass
        else:
            measured = _shape(data, pos, version)
            if measured is None:
                reader.pos = pos
                odd.append(_one_partition(reader, version, first + k))
                pos = reader.pos
                continue
            check = _check_struct(version, *measured[1:4])
            shape = (check, check.unpack_from(data, pos), measured[4], [], [], run_limit(*measured[1:4]))
            shapes.append(shape)
        shape[3].append(pos)
        shape[4].append(first + k)
        pos += shape[2]
        if len(shape[3]) == shape[5]:  # as many as one run holds
            builder.append(_gathered(data, version, shape[1], shape[3], shape[4]))
            shape[3].clear()
            shape[4].clear()
    reader.pos = pos
    for _, checked, _, at, order, _ in shapes:
        if at:
            builder.append(_gathered(data, version, checked, at, order))
    for run in odd:
        builder.append(run)


def _gathered(data: bytes, version: int, checked: tuple[int, ...], at: list[int], order: list[int]) -> PartitionRun:
    """The run of the same-shaped partitions at `at`, which stood at `order` in the answer."""
    error, replicas, isrs, offline = _counts(version, checked)
    read = partial(_one_struct(version, replicas, isrs, offline).unpack_from, data)
    return PartitionRun(error, replicas, isrs, offline, tuple(chain.from_iterable(map(read, at))), order=tuple(order))


def _counts(version: int, checked: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(error code, replicas, isrs, offline) from what a check format read."""
    if version >= 9:
        return checked[0], checked[1] - 1, checked[2] - 1, checked[3] - 1
    return checked[0], checked[1], checked[2], checked[3] if version >= 5 else 0


def _one_partition(reader: Reader, version: int, position: int) -> PartitionRun:
    """One partition field by field: any valid encoding, and the exact error for a broken one."""
    flexible = version >= 9
    p_code = reader.int16()
    index = reader.int32()
    leader = reader.int32()
    if version >= 7:
        reader.int32()  # leader epoch
    replicas = reader.int32_array(flexible)
    isrs = reader.int32_array(flexible)
    offline = reader.int32_array(flexible) if version >= 5 else ()
    if flexible:
        reader.tagged_fields()
    return PartitionRun(p_code, len(replicas), len(isrs), len(offline), (index, leader, *replicas, *isrs, *offline),
                        order=(position,))


def encode_sasl_handshake(mechanism: str) -> bytes:
    """SaslHandshake v1: the mechanism the client will use."""
    return enc_string(mechanism, False)


def decode_sasl_handshake(reader: Reader) -> tuple[int, list[str]]:
    """(error code, the mechanisms the listener enabled)."""
    code = reader.int16()
    offered = [reader.string(False) or "" for _ in range(reader.array_len(False, 2))]
    return code, offered


def encode_sasl_authenticate(token: bytes) -> bytes:
    """SaslAuthenticate v0/v1: the mechanism's bytes, length-prefixed."""
    return struct.pack(">i", len(token)) + token


def decode_sasl_authenticate(reader: Reader, version: int) -> tuple[int, str | None, bytes]:
    """(error code, the broker's error message, the mechanism's bytes from the server)."""
    code = reader.int16()
    message = reader.string(False, nullable=True)
    size = reader.int32()
    auth_bytes = reader.take(size) if size > 0 else b""
    if version >= 1:
        reader.take(8)  # session_lifetime_ms: re-authentication is a long-lived client's business
    return code, message, auth_bytes


def encode_describe_broker(node_id: int, keys: Sequence[str]) -> bytes:
    """DescribeConfigs v1 for the BROKER resource `node_id`, asking only for `keys`."""
    body = struct.pack(">i", 1) + struct.pack(">b", RESOURCE_BROKER) + enc_string(str(node_id), False)
    body += struct.pack(">i", len(keys)) + b"".join(enc_string(k, False) for k in keys)
    return body + b"\x00"  # include_synonyms


def decode_describe_broker(reader: Reader) -> tuple[int, str | None, dict[str, str | None]]:
    """DescribeConfigs v1's first resource: (error code, message, configs)."""
    reader.int32()  # throttle
    count = reader.array_len(False, 9)
    if count < 1:
        raise WireError("protocol", "DescribeConfigs answered no resource")
    code = reader.int16()
    message = reader.string(False, nullable=True)
    reader.int8()
    reader.string(False)
    configs: dict[str, str | None] = {}
    for _ in range(reader.array_len(False, 6)):
        name = reader.string(False) or ""
        value = reader.string(False, nullable=True)
        reader.boolean()
        reader.int8()
        reader.boolean()
        for _ in range(reader.array_len(False, 5)):
            reader.string(False)
            reader.string(False, nullable=True)
            reader.int8()
        configs[name] = value
    return code, message, configs


_UNEXPECTED_ID = re.compile(r"expected (-?\d+)")


def node_from_describe(
    expected: int, code: int, message: str | None, configs: dict[str, str | None]
) -> tuple[int | None, str | None]:
    """Which node answered a DescribeConfigs for BROKER `expected`: (node id, None) or (None, why not known).

    Kafka answers only for its own id; another broker refuses with INVALID_REQUEST and
    'Unexpected broker id, expected N ...', naming itself (Kafka's ConfigHelper). That is how
    kprobe learns which node really answers at an endpoint (a Metadata response does not say).
    """
    if code == 0:
        reported = configs.get("node.id")
        if reported is not None and reported.lstrip("-").isdigit():
            return int(reported), None
        return expected, None
    match = _UNEXPECTED_ID.search(message or "")
    if code == 42 and match:
        return int(match.group(1)), None
    if code in (29, 31):
        return None, (f"not authorised to describe broker configs ({error_name(code)}): "
                      "grant DescribeConfigs on the cluster")
    return None, f"DescribeConfigs answered {error_name(code)}: {message or ''}".rstrip(": ")


def is_controller_listener(api_versions: dict[int, tuple[int, int]]) -> bool:
    """Whether an ApiVersions answer is a KRaft controller listener's: raft RPCs, no Metadata.

    A broker listener always offers Metadata; a controller listener never does, so a client that
    bootstraps there can fetch no metadata at all.
    """
    return API_METADATA not in api_versions and bool(CONTROLLER_ONLY_APIS & api_versions.keys())


def describe_cluster_version(api_versions: dict[int, tuple[int, int]]) -> int | None:
    """The DescribeCluster version to ask controllers with (v1+), or None when the node has none.

    Controllers answer DescribeCluster since Kafka 3.7 (KIP-919); brokers since 2.8 (v0 only until 3.7).
    """
    low, high = api_versions.get(API_DESCRIBE_CLUSTER, (0, -1))
    version = min(high, DESCRIBE_CLUSTER_MAX)
    return version if version >= max(low, DESCRIBE_CLUSTER_MIN) else None


def encode_describe_cluster(version: int, endpoint_type: int) -> bytes:
    """DescribeCluster v0-v2: no authorised operations, the endpoint type (v1+), no fenced brokers (v2)."""
    body = b"\x00" + (struct.pack(">b", endpoint_type) if version >= 1 else b"")
    if version >= 2:
        body += b"\x00"  # include_fenced_brokers: a fenced node serves nobody
    return body + b"\x00"


@dataclass(frozen=True, kw_only=True)
class DescribedCluster:
    """A DescribeCluster answer: the nodes of the asked endpoint type, or the error that came instead."""

    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str | None
    controller_id: int
    nodes: tuple[AdvertisedBroker, ...]


def decode_describe_cluster(reader: Reader, version: int) -> DescribedCluster:
    """Decode a DescribeCluster response body (v0-v2; always flexible)."""
    reader.int32()  # throttle_time_ms
    code = reader.int16()
    message = reader.string(True, nullable=True)
    endpoint_type = reader.int8() if version >= 1 else ENDPOINT_TYPE_BROKERS
    cluster_id = reader.string(True)
    controller_id = reader.int32()
    nodes = []
    for _ in range(reader.array_len(True, 8)):
        node_id = reader.int32()
        host = reader.string(True) or ""
        port = reader.int32()
        rack = reader.string(True, nullable=True)
        if version >= 2:
            reader.boolean()  # is_fenced: never asked for, so always false
        reader.tagged_fields()
        nodes.append(AdvertisedBroker(node_id, host, port, rack))
    reader.int32()  # cluster authorized operations
    reader.tagged_fields()
    if reader.pos != len(reader.data):
        raise WireError("protocol", f"DescribeCluster response has {len(reader.data) - reader.pos} unexpected "
                        "trailing bytes")
    return DescribedCluster(error_code=code, error_message=message, endpoint_type=endpoint_type,
                            cluster_id=cluster_id, controller_id=controller_id, nodes=tuple(nodes))
