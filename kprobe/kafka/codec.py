"""The bytes of the few Kafka requests kprobe sends and of their answers: pure, no sockets.

Kept apart from the connection so every decoder can be tested on recorded bytes and on hostile
ones without a peer, and so a request's version is always a parameter: the connection picks
it from the broker's ApiVersions answer (Kafka 1.1 to 4.x speak different ranges).

The one name for them all: the wire primitives (`kprobe.kafka.wire`) and the Metadata request
(`kprobe.kafka.metadata_codec`) are re-exported here, so `codec.X` reaches every request.

Decoding is strict and bounded: every length is checked against the bytes actually present, so
a hostile or broken peer gets a `WireError("protocol", ...)`, never an exception from deep inside
or an allocation sized by the peer.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

from kprobe.kafka.metadata_codec import (
    METADATA_MAX,
    METADATA_MIN,
    decode_metadata,
    encode_metadata_request,
    metadata_version,
)
from kprobe.kafka.wire import (
    API_API_VERSIONS,
    API_DESCRIBE_CLUSTER,
    API_DESCRIBE_CONFIGS,
    API_METADATA,
    API_SASL_AUTHENTICATE,
    API_SASL_HANDSHAKE,
    ERROR_NAMES,
    MAX_FRAME,
    Reader,
    WireError,
    enc_string,
    error_name,
    is_flexible,
    looks_like_tls,
    request_header,
    response_header,
    uvarint,
)
from kprobe.models import AdvertisedBroker
from kprobe.records import record

__all__ = [
    "API_API_VERSIONS", "API_DESCRIBE_CLUSTER", "API_DESCRIBE_CONFIGS", "API_METADATA", "API_SASL_AUTHENTICATE",
    "API_SASL_HANDSHAKE", "CONTROLLER_ONLY_APIS", "DESCRIBE_CLUSTER_MAX", "DESCRIBE_CLUSTER_MIN",
    "ENDPOINT_TYPE_BROKERS", "ENDPOINT_TYPE_CONTROLLERS", "ERROR_NAMES", "IDENTITY_KEYS", "LISTENER_KEYS",
    "MAX_FRAME", "METADATA_MAX", "METADATA_MIN", "RESOURCE_BROKER", "DescribedCluster", "Reader", "WireError",
    "decode_api_versions", "decode_describe_broker", "decode_describe_cluster", "decode_metadata",
    "decode_sasl_authenticate", "decode_sasl_handshake", "describe_cluster_version", "enc_string",
    "encode_describe_broker", "encode_describe_cluster", "encode_metadata_request", "encode_sasl_authenticate",
    "encode_sasl_handshake", "error_name", "is_controller_listener", "is_flexible", "listener_settings",
    "looks_like_tls", "metadata_version", "node_from_describe", "request_header", "response_header", "uvarint",
]

RESOURCE_BROKER = 4

# DescribeCluster's EndpointType (v1+, KIP-919): which endpoints to describe.
ENDPOINT_TYPE_BROKERS, ENDPOINT_TYPE_CONTROLLERS = 1, 2
DESCRIBE_CLUSTER_MIN, DESCRIBE_CLUSTER_MAX = 1, 2  # v0 cannot ask for controllers
# Requests only a KRaft controller listener offers (the raft and registration RPCs). A controller
# listener lists them and not Metadata (seen on Kafka 4.1: it offers neither Produce nor Metadata,
# and closes the connection on a Metadata request), which is how clients meet it: Java's
# "The node does not support METADATA" (KAFKA-16612).
CONTROLLER_ONLY_APIS = frozenset({52, 53, 54, 62, 63, 70})  # Vote, Begin/EndQuorumEpoch, Broker/ControllerRegistration


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

# The listener settings asked beside node.id on the identity request: which listener a connection reached,
# whether it is the inter-broker one and which names are taken, so that a fix names the listener it changes
# and proposes a new one under a free name. The same request, so no round trip more.
LISTENER_KEYS = ("listeners", "advertised.listeners", "inter.broker.listener.name", "security.inter.broker.protocol",
                 "listener.security.protocol.map", "controller.listener.names")
IDENTITY_KEYS = ("node.id", *LISTENER_KEYS)


def listener_settings(code: int, configs: dict[str, str | None]) -> tuple[tuple[str, str], ...]:
    """The listener settings of a DescribeConfigs answer for the node itself, in LISTENER_KEYS' order.

    Only a node's answer for its own id carries them; a setting left unset (null) is left out.
    """
    if code != 0:
        return ()
    return tuple((k, v) for k in LISTENER_KEYS if (v := configs.get(k)) is not None)


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


@record(kw_only=True)
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
