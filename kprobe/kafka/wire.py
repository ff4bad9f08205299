"""Kafka's wire format, below any one request: frames, headers, primitive types, error codes, `WireError`.

Pure, no sockets. Decoding is strict and bounded: every length is checked against the bytes
actually present, so a hostile or broken peer gets a `WireError("protocol", ...)`, never an
exception from deep inside or an allocation sized by the peer. The requests themselves are
`kprobe.kafka.codec`'s (Metadata: `kprobe.kafka.metadata_codec`).
"""

from __future__ import annotations

import struct

from kprobe.models import Protocol, TlsFailure

API_METADATA = 3
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
API_DESCRIBE_CONFIGS = 32
API_DESCRIBE_CLUSTER = 60
API_FIND_COORDINATOR = 10
API_CONSUMER_GROUP_HEARTBEAT = 68
API_SHARE_GROUP_HEARTBEAT = 76

MAX_FRAME = 256 * 1024 * 1024

# The few Kafka error codes kprobe names in its own words; the rest print as numbers.
ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR",
    0: "NO_ERROR",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    5: "LEADER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    19: "NOT_ENOUGH_REPLICAS",
    24: "INVALID_GROUP_ID",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    33: "UNSUPPORTED_SASL_MECHANISM",
    34: "ILLEGAL_SASL_STATE",
    35: "UNSUPPORTED_VERSION",
    42: "INVALID_REQUEST",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
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
    if api_key == API_FIND_COORDINATOR:
        return version >= 3
    # Flexible from v0: DescribeCluster, and KIP-848's and KIP-932's heartbeats.
    return api_key in (API_DESCRIBE_CLUSTER, API_CONSUMER_GROUP_HEARTBEAT, API_SHARE_GROUP_HEARTBEAT)


def response_header(reader: Reader, api_key: int, flexible: bool, correlation_id: int) -> None:
    """Check the correlation id; skip the tagged fields of header v1.

    ApiVersions responses always use header v0, whatever the request version.
    """
    if reader.int32() != correlation_id:
        raise WireError("protocol", "response does not match the request (correlation id)")
    if flexible and api_key != API_API_VERSIONS:
        reader.tagged_fields()
