"""A deliberately small Kafka protocol client: ApiVersions, Metadata and SASL/PLAIN.

Why not confluent-kafka here: since librdkafka 2.10 a client drops the bootstrap broker once
a Metadata response lists only brokers it cannot reach, so `list_topics()` mostly times out in
exactly the case kprobe exists for (design notes, section 7). kprobe needs the answer of *this*
connection, deterministically and within a timeout, so it speaks the few requests it needs on
the bootstrap socket itself. Mechanisms it does not speak (SCRAM, GSSAPI, OAUTHBEARER) fall back
to confluent-kafka in `kprobe.metadata`.

Decoding is strict and bounded: every length is checked against the bytes actually present, so
a hostile or broken peer gets a `WireError("protocol", ...)`, never an exception from deep inside
or an allocation sized by the peer.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from dataclasses import dataclass, replace

from kprobe.models import AdvertisedBroker, ClusterMetadata, PartitionInfo, TopicInfo

API_METADATA = 3
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
API_DESCRIBE_CONFIGS = 32
RESOURCE_BROKER = 4

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
}


def error_name(code: int) -> str:
    """Name a Kafka error code the way the broker's logs and kcat do."""
    return ERROR_NAMES.get(code, f"KAFKA_ERROR_{code}")


class WireError(Exception):
    """A request that failed, classified for the report.

    `kind` is one of: dns_failed, refused, timeout, unreachable, closed, protocol, tls,
    auth_failed, error. The message never contains credentials. `deadline` says the run's own
    deadline cut the request short (which proves nothing about the broker, unlike its own
    timeout); `awaiting_response` says the request had been sent (the connection worked).
    """

    def __init__(self, kind: str, message: str, *, deadline: bool = False, awaiting_response: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.deadline = deadline
        self.awaiting_response = awaiting_response


@dataclass(frozen=True)
class Security:
    """The subset of librdkafka's security properties the wire client can honour."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_verify_hostname: bool = True
    ssl_verify: bool = True

    @property
    def uses_tls(self) -> bool:
        """Whether the listener expects a TLS handshake first."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """Whether the listener expects SASL before any other request."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __repr__(self) -> str:  # never let a password reach a log through repr()
        return f"Security(protocol={self.protocol!r}, sasl_mechanism={self.sasl_mechanism!r})"


class _Reader:
    """Bounds-checked decoding of a Kafka response body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError("protocol", f"truncated response: wanted {n} bytes at offset {self.pos}")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def boolean(self) -> bool:
        return self._take(1) != b"\x00"

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise WireError("protocol", "varint too long")

    def string(self, flexible: bool, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            if nullable or n == -1:
                return None
            raise WireError("protocol", "negative string length")
        # surrogateescape keeps undecodable bytes recoverable: the report can show them exactly.
        return self._take(n).decode("utf-8", "surrogateescape")

    def array_len(self, flexible: bool, min_item: int = 1) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise WireError("protocol", "a required array is null")
        if n * min_item > len(self.data) - self.pos:
            raise WireError("protocol", f"array of {n} items does not fit in the response")
        return n

    def int32_array(self, flexible: bool) -> tuple[int, ...]:
        n = self.array_len(flexible, 4)
        raw = self._take(4 * n)
        return struct.unpack(f">{n}i", raw) if n else ()

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def _enc_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else struct.pack(">h", -1)
    raw = value.encode()
    return (_uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _classify_os_error(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
        return "closed"  # accepted, then dropped by the peer: not a refusal
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timeout"
    if isinstance(exc, OSError) and exc.errno in (101, 113, 99):  # ENETUNREACH EHOSTUNREACH
        return "unreachable"
    return "error"


class KafkaConnection:
    """One connection to one broker address, speaking just enough Kafka.

    Every blocking call is bounded by `timeout` per request and by the absolute `deadline`
    (a `time.monotonic()` value) for the whole conversation.
    """

    def __init__(
        self,
        address: str,
        port: int,
        *,
        timeout: float,
        deadline: float | None = None,
        security: Security | None = None,
        server_hostname: str | None = None,
        client_id: str = "kprobe",
    ) -> None:
        self.address = address
        self.port = port
        self.timeout = timeout
        self.deadline = deadline if deadline is not None else time.monotonic() + 3600
        self.security = security or Security()
        self.server_hostname = server_hostname or address
        self.client_id = client_id
        self.sock: socket.socket | None = None
        self.correlation_id = 0
        self.api_versions: dict[int, tuple[int, int]] = {}

    def _remaining(self, bound: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WireError("timeout", "run deadline reached", deadline=True)
        return min(bound, left)

    def connect(self) -> None:
        """Open TCP (and TLS); classify failures as refused, timeout, unreachable or tls."""
        family = socket.AF_INET6 if ":" in self.address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.settimeout(self._remaining(self.timeout))
            sock.connect((self.address, self.port))
        except WireError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            kind = _classify_os_error(exc)
            text = "timed out" if kind == "timeout" else (exc.strerror or str(exc))
            raise WireError(kind, f"connect to {self.address}:{self.port}: {text}") from None
        if self.security.uses_tls:
            sock = self._wrap_tls(sock)
        self.sock = sock

    def _wrap_tls(self, sock: socket.socket) -> socket.socket:
        import ssl  # 10 ms of start-up that a PLAINTEXT run never needs

        sec = self.security
        try:
            ctx = ssl.create_default_context(cafile=sec.ssl_cafile)
            if not sec.ssl_verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            else:
                ctx.check_hostname = sec.ssl_verify_hostname
            if sec.ssl_certfile:
                ctx.load_cert_chain(sec.ssl_certfile, sec.ssl_keyfile, password=sec.ssl_key_password)
            sock.settimeout(self._remaining(self.timeout))
            return ctx.wrap_socket(sock, server_hostname=self.server_hostname)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            from kprobe.tls import describe_peer

            seen = describe_peer(self.address, self.port, self.server_hostname, self._remaining(self.timeout))
            raise WireError("tls", f"TLS certificate not accepted: {exc.verify_message}"
                            + (f" ({seen})" if seen else "")) from None
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            kind = "timeout" if isinstance(exc, (TimeoutError, socket.timeout)) else "tls"
            raise WireError(kind, f"TLS handshake failed: {exc}") from None

    def close(self) -> None:
        """Close quietly; closing is never what a report is about."""
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int, request_deadline: float) -> bytes:
        assert self.sock is not None
        chunks = bytearray()
        # Which bound a wait ends on decides what its end proves: the request's own timeout (the
        # broker did not answer in time) or the run's deadline (nothing about the broker).
        cut_by_deadline = self.deadline < request_deadline
        waited = ("stopped at the run's deadline waiting for the response" if cut_by_deadline
                  else "timed out waiting for the response")
        while len(chunks) < n:
            left = min(request_deadline, self.deadline) - time.monotonic()
            if left <= 0:
                raise WireError("timeout", waited, deadline=cut_by_deadline, awaiting_response=True)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(n - len(chunks), 1 << 20))
            except TimeoutError:
                raise WireError("timeout", waited, deadline=cut_by_deadline, awaiting_response=True) from None
            except OSError as exc:
                raise WireError("closed", f"connection failed mid-response: {exc}", awaiting_response=True) from None
            if not chunk:
                raise WireError("closed", "connection closed by the broker before a full response",
                                awaiting_response=True)
            chunks += chunk
        return bytes(chunks)

    def request(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> _Reader:
        """Send one request and return a reader positioned after the response header."""
        if self.sock is None:
            self.connect()
        assert self.sock is not None
        self.correlation_id += 1
        header = struct.pack(">hhi", api_key, version, self.correlation_id) + _enc_string(
            self.client_id, False
        )
        if flexible:
            header += b"\x00"
        frame = header + body
        request_deadline = time.monotonic() + self.timeout
        try:
            self.sock.settimeout(self._remaining(self.timeout))
            self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        except TimeoutError:
            raise WireError("timeout", "timed out sending the request") from None
        except OSError as exc:
            raise WireError("closed", f"connection failed while sending: {exc}") from None
        size = struct.unpack(">i", self._recv_exact(4, request_deadline))[0]
        if size < 4 or size > MAX_FRAME:
            raise WireError("protocol", f"response size {size} is not plausible")
        reader = _Reader(self._recv_exact(size, request_deadline))
        if reader.int32() != self.correlation_id:
            raise WireError("protocol", "response does not match the request (correlation id)")
        # ApiVersions responses always use header v0, whatever the request version.
        if flexible and api_key != API_API_VERSIONS:
            reader.tagged_fields()
        return reader

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v0: which request versions this broker speaks."""
        reader = self.request(API_API_VERSIONS, 0, b"")
        code = reader.int16()
        versions: dict[int, tuple[int, int]] = {}
        for _ in range(reader.array_len(False, 6)):
            key, low, high = reader.int16(), reader.int16(), reader.int16()
            versions[key] = (low, high)
        if code != 0:
            raise WireError("protocol", f"ApiVersions failed: {error_name(code)}")
        self.api_versions = versions
        return versions

    def authenticate_plain(self) -> None:
        """SASL/PLAIN: SaslHandshake v1 then SaslAuthenticate v0 or v1."""
        sec = self.security
        mechanism = (sec.sasl_mechanism or "PLAIN").upper()
        reader = self.request(API_SASL_HANDSHAKE, 1, _enc_string(mechanism, False))
        code = reader.int16()
        offered = [reader.string(False) or "" for _ in range(reader.array_len(False, 2))]
        if code != 0:
            raise WireError(
                "auth_failed",
                f"broker does not accept SASL mechanism {mechanism} (offers {', '.join(offered)})",
            )
        token = b"\x00" + (sec.sasl_username or "").encode() + b"\x00"
        token += (sec.sasl_password or "").encode()
        version = 1 if self.api_versions.get(API_SASL_AUTHENTICATE, (0, 0))[1] >= 1 else 0
        reader = self.request(API_SASL_AUTHENTICATE, version, struct.pack(">i", len(token)) + token)
        code = reader.int16()
        message = reader.string(False, nullable=True)
        if code != 0:
            raise WireError("auth_failed", f"SASL authentication failed: {message or error_name(code)}")

    def describe_broker(
        self, node_id: int, keys: tuple[str, ...] = ("node.id",)
    ) -> tuple[int, str | None, dict[str, str | None]]:
        """DescribeConfigs v1 for the BROKER resource `node_id`: (error code, message, configs).

        Kafka answers only for its own id; another broker refuses with INVALID_REQUEST and
        'Unexpected broker id, expected N ...', naming itself. That is how kprobe learns which
        node really answers at an endpoint (a Metadata response does not say).
        """
        body = struct.pack(">i", 1) + struct.pack(">b", RESOURCE_BROKER) + _enc_string(str(node_id), False)
        body += struct.pack(">i", len(keys)) + b"".join(_enc_string(k, False) for k in keys)
        body += b"\x00"  # include_synonyms
        reader = self.request(API_DESCRIBE_CONFIGS, 1, body)
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

    def metadata_version(self) -> int:
        """The highest Metadata version both sides speak, within what kprobe decodes."""
        low, high = self.api_versions.get(API_METADATA, (METADATA_MIN, METADATA_MAX))
        version = min(high, METADATA_MAX)
        if version < max(low, METADATA_MIN):
            raise WireError("protocol", f"broker speaks Metadata v{low}-v{high}, kprobe needs v4-v12")
        return version

    def metadata(self, topics: list[str] | None = None) -> ClusterMetadata:
        """Metadata for `topics` ([] = brokers only, None = all topics)."""
        version = self.metadata_version()
        flexible = version >= 9
        body = bytearray()
        if topics is None:
            body += b"\x00" if flexible else struct.pack(">i", -1)
        else:
            body += _uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
            for name in topics:
                if version >= 10:
                    body += b"\x00" * 16  # topic id: none, ask by name
                body += _enc_string(name, flexible)
                if flexible:
                    body += b"\x00"
        body += b"\x00"  # allow_auto_topic_creation: a diagnostic must not create topics
        if 8 <= version <= 10:
            body += b"\x00"  # include_cluster_authorized_operations
        if version >= 8:
            body += b"\x00"  # include_topic_authorized_operations
        if flexible:
            body += b"\x00"
        reader = self.request(API_METADATA, version, bytes(body), flexible)
        return decode_metadata(reader, version)


def decode_metadata(reader: _Reader, version: int) -> ClusterMetadata:
    """Decode a Metadata response body (v4-v12)."""
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
            reader._take(16)  # topic id
        internal = reader.boolean()
        partitions = []
        for _ in range(reader.array_len(flexible, 14)):
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
            partitions.append(PartitionInfo(index, leader, replicas, isrs, offline, p_code))
        if version >= 8:
            reader.int32()  # topic authorized operations
        if flexible:
            reader.tagged_fields()
        topics.append(TopicInfo(name, tuple(partitions), code, internal))
    if 8 <= version <= 10:
        reader.int32()  # cluster authorized operations
    if flexible:
        reader.tagged_fields()
    if reader.pos != len(reader.data):
        raise WireError("protocol", f"Metadata response has {len(reader.data) - reader.pos} unexpected trailing bytes")
    return ClusterMetadata(tuple(brokers), cluster_id, controller_id, tuple(topics), version)


_UNEXPECTED_ID = re.compile(r"expected (-?\d+)")


def identify(conn: KafkaConnection, expected: int) -> tuple[int | None, str | None]:
    """Which node answers on this connection: (node id, None) or (None, why not known).

    One DescribeConfigs request for the BROKER resource `expected`: success means it is that
    node; 'Unexpected broker id, expected N' names the node that answered instead.
    """
    if API_DESCRIBE_CONFIGS not in conn.api_versions:
        return None, "the broker does not offer DescribeConfigs"
    try:
        code, message, configs = conn.describe_broker(expected)
    except WireError as exc:
        return None, f"DescribeConfigs failed: {exc}"
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


def fetch_metadata(
    address: str,
    port: int,
    *,
    timeout: float,
    deadline: float | None = None,
    security: Security | None = None,
    server_hostname: str | None = None,
    topics: list[str] | None = None,
) -> ClusterMetadata:
    """Connect to one resolved address, negotiate, authenticate, ask for metadata, close."""
    return fetch_and_identify(address, port, timeout=timeout, deadline=deadline, security=security,
                              server_hostname=server_hostname, topics=topics, identity=False)[0]


def fetch_and_identify(
    address: str,
    port: int,
    *,
    timeout: float,
    deadline: float | None = None,
    security: Security | None = None,
    server_hostname: str | None = None,
    topics: list[str] | None = None,
    identity: bool = True,
    expected: int | None = None,
) -> tuple[ClusterMetadata, int | None, str | None]:
    """Metadata, then (if asked) which node answered, on one connection.

    `expected` is the node id to ask about; by default the first advertised broker.
    """
    sec = security or Security()
    with KafkaConnection(
        address, port, timeout=timeout, deadline=deadline, security=sec,
        server_hostname=server_hostname,
    ) as conn:
        conn.connect()
        conn.negotiate()
        if sec.uses_sasl:
            conn.authenticate_plain()
        meta = conn.metadata(topics)
        try:
            local = str(conn.sock.getsockname()[0]) if conn.sock is not None else None
        except OSError:
            local = None
        meta = replace(meta, local_address=local)
        if not identity:
            return meta, None, None
        ask = expected if expected is not None else (meta.brokers[0].node_id if meta.brokers else 0)
        node_id, why = identify(conn, ask)
        return meta, node_id, why
