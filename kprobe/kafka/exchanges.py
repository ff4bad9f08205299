"""The probe's exchanges with a broker: each a short conversation on a connection of its own.

Metadata then which node answered (the bootstrap, every endpoint's identity), a brokers-only Metadata
that sizes a path losing large packets, what a controller listener says of the quorum, and which
security.protocol a listener wants. Apart from `kprobe.kafka.connection`, which only moves the bytes
and classifies what goes wrong: these decide what to ask, in which order, and what an answer means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kprobe.kafka import codec
from kprobe.kafka.connection import ILLEGAL_SASL_STATE, KafkaConnection
from kprobe.kafka.security import Security
from kprobe.kafka.wire import WireError
from kprobe.models import ClusterMetadata, Protocol
from kprobe.records import record, replace

# SaslHandshake's answers from a SASL listener: success, or the mechanism refused; both list the enabled ones.
_SASL_ANSWERS = (0, 33)

def identify(conn: KafkaConnection, expected: int) -> tuple[int | None, str | None]:
    """Which node answers on this connection: (node id, None) or (None, why not known)."""
    node_id, why, _ = identify_with_listeners(conn, expected)
    return node_id, why


def identify_with_listeners(
    conn: KafkaConnection, expected: int,
) -> tuple[int | None, str | None, tuple[tuple[str, str], ...]]:
    """Which node answers on this connection, and its listener settings: (node id, why not known, settings).

    One DescribeConfigs request for the BROKER resource `expected`; `codec.node_from_describe`
    reads the node, `codec.listener_settings` the settings (only a node's answer for its own id has them).
    Version 1, which every broker from Kafka 1.1 to 4.x takes; a broker whose ApiVersions leaves it out is
    not asked.
    """
    low, high = conn.api_versions.get(codec.API_DESCRIBE_CONFIGS, (0, -1))
    if high < 0:
        return None, "the broker does not offer DescribeConfigs", ()
    if not low <= 1 <= high:
        return None, f"the broker offers DescribeConfigs v{low}-v{high}, not v1", ()
    try:
        code, message, configs = conn.describe_broker(expected, codec.IDENTITY_KEYS)
    except WireError as exc:
        return None, f"DescribeConfigs failed: {exc}", ()
    node_id, why = codec.node_from_describe(expected, code, message, configs)
    return node_id, why, codec.listener_settings(code, configs)


def fetch_and_identify(
    address: str,
    port: int,
    *,
    timeout: float,
    deadline: float | None = None,
    security: Security | None = None,
    server_hostname: str | None = None,
    topics: Sequence[str] | None = None,
    identity: bool = True,
    expected: int | None = None,
    auto_create: bool = False,
    then: Callable[[KafkaConnection, ClusterMetadata, int | None], None] | None = None,
) -> tuple[ClusterMetadata, int | None, str | None, tuple[tuple[str, str], ...]]:
    """Metadata, then (if asked) which node answered and its listener settings, on one connection.

    `expected` is the node id to ask about; by default the first advertised broker. `auto_create`: ask
    for `topics` as a producer does (codec.encode_metadata_request says when that is wanted). `then` is
    called last with the open connection, the answer and the node id, for the questions that follow
    the metadata on the same connection (kprobe.kafka.coordinators).
    """
    sec = security or Security()
    with KafkaConnection(
        address, port, timeout=timeout, deadline=deadline, security=sec,
        server_hostname=server_hostname,
    ) as conn:
        conn.open()
        if codec.is_controller_listener(conn.api_versions):
            # A Metadata request would only get the connection closed: say what answers instead.
            node_id, _ = identify(conn, expected if expected is not None else 0) if identity else (None, None)
            raise WireError("controller", "a KRaft controller listener answers here"
                            + (f" (node {node_id})" if node_id is not None else "")
                            + ": it offers no Metadata, so clients fail with \"The node does not support METADATA\"",
                            awaiting_response=True, node_id=node_id)
        try:
            meta = conn.metadata(topics, auto_create)
        except WireError as exc:
            if exc.kind == "closed" and not sec.uses_sasl:
                exc.closed_without_sasl = True  # a SASL listener does this: the caller may ask it (ask_listener)
            if exc.kind == "timeout" and exc.awaiting_response and not exc.deadline:
                exc.metadata_stalled = True  # ApiVersions (and SASL) answered here: only this answer is missing
            raise
        meta = replace(meta, local_address=conn.local_address())
        node_id, why = None, None
        settings: tuple[tuple[str, str], ...] = ()
        if identity:
            ask = _guess(meta, expected, address, server_hostname, port)
            node_id, why, settings = identify_with_listeners(conn, ask)
        if then is not None:
            then(conn, meta, node_id)
        return meta, node_id, why, settings


def _guess(meta: ClusterMetadata, expected: int | None, address: str, server_hostname: str | None, port: int) -> int:
    """The node to ask about: `expected`, else the broker advertised at the address dialled, else the first.

    Kafka answers a DescribeConfigs only for its own id, and only that answer carries the node's settings:
    a right guess saves a bootstrap's listener settings, at no round trip more.
    """
    if expected is not None:
        return expected
    dialled = {address.lower(), (server_hostname or "").lower()}
    here = next((br.node_id for br in meta.brokers if br.port == port and br.host.lower() in dialled), None)
    if here is not None:
        return here
    return meta.brokers[0].node_id if meta.brokers else 0


def small_metadata(
    address: str,
    port: int,
    *,
    timeout: float,
    deadline: float | None = None,
    security: Security | None = None,
    server_hostname: str | None = None,
) -> tuple[ClusterMetadata, int]:
    """Brokers-only Metadata on a fresh connection: (the answer, the largest response read, in bytes).

    Asked after a full Metadata answer stalled where ApiVersions answered: a Metadata request for no
    topic is a few hundred bytes, so when it arrives and the full one does not, the path loses large
    packets (a path-MTU black hole), and the brokers it lists are still what clients connect to. Then
    `pathmtu.climb` asks for larger answers on the same connection until one is lost, so the size
    returned bounds the path MTU (at most one more timeout).
    """
    from kprobe.kafka.pathmtu import climb

    sec = security or Security()
    with KafkaConnection(address, port, timeout=timeout, deadline=deadline, security=sec,
                         server_hostname=server_hostname) as conn:
        conn.open()
        meta = conn.metadata([])
        largest = climb(conn)
        return replace(meta, local_address=conn.local_address()), largest


def fetch_controllers(
    address: str,
    port: int,
    *,
    timeout: float,
    deadline: float | None = None,
    security: Security | None = None,
    server_hostname: str | None = None,
    identity: bool = True,
    expected: int | None = None,
) -> tuple[codec.DescribedCluster | None, dict[int, tuple[int, int]], int | None, str | None]:
    """What a controller listener says of the quorum (KIP-919), on one connection, as an admin client asks it.

    ApiVersions, SASL when configured, DescribeCluster for controllers, then (if asked) which node
    answered: (the answer, or None when the node offers no DescribeCluster v1; the ApiVersions map;
    node id; why the node is unknown). `expected` is
    the node id to ask about; by default the first controller described.
    """
    sec = security or Security()
    with KafkaConnection(
        address, port, timeout=timeout, deadline=deadline, security=sec, server_hostname=server_hostname,
    ) as conn:
        versions = conn.open()
        if codec.describe_cluster_version(versions) is None:
            # Nothing to ask (None): the caller tells a pre-3.7 controller from a broker by the map.
            return None, versions, None, None
        described = conn.describe_cluster(codec.ENDPOINT_TYPE_CONTROLLERS)
        if not identity:
            return described, versions, None, None
        ask = expected if expected is not None else (described.nodes[0].node_id if described.nodes else 0)
        node_id, why = identify(conn, ask)
        return described, versions, node_id, why


@record
class ListenerAnswer:
    """What a listener said of itself on a connection of its own: which security.protocol it wants.

    `protocol` is None when it answered ApiVersions but not SaslHandshake in a way that tells;
    `mechanisms` are the SASL mechanisms it enabled (a SASL listener lists them).
    """

    protocol: Protocol | None
    mechanisms: tuple[str, ...] = ()


def ask_listener(
    address: str,
    port: int,
    *,
    timeout: float,
    deadline: float,
    security: Security,
    server_hostname: str | None = None,
) -> ListenerAnswer | None:
    """Ask a listener which security.protocol it wants: ApiVersions, then SaslHandshake v1 for PLAIN.

    Only for a bootstrap whose first try failed in a way a protocol mismatch explains, on a new
    connection (the failed one is closed): `security` decides only whether to speak TLS first. A
    SASL listener answers SaslHandshake with its enabled mechanisms (success, or
    UNSUPPORTED_SASL_MECHANISM and the list); a listener without SASL with ILLEGAL_SASL_STATE.
    Nothing is authenticated: the connection is closed after the answer. None: no Kafka answer at
    all (the connection, TLS or ApiVersions failed). Bounded by `timeout` per request and `deadline`.
    """
    tls = security.uses_tls
    with KafkaConnection(address, port, timeout=timeout, deadline=deadline, security=security,
                         server_hostname=server_hostname) as conn:
        try:
            conn.connect()
            conn.negotiate()
        except WireError:
            return None
        try:
            code, offered = conn.sasl_handshake("PLAIN")
        except WireError:
            return ListenerAnswer(None)
    if code in _SASL_ANSWERS and offered:
        return ListenerAnswer("SASL_SSL" if tls else "SASL_PLAINTEXT", tuple(offered))
    if code == ILLEGAL_SASL_STATE:
        return ListenerAnswer("SSL" if tls else "PLAINTEXT")
    return ListenerAnswer(None)
