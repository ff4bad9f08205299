"""The probe's data: frozen value classes (kprobe.records) that flow from one step to the next.

Every step of the pipeline (bootstrap -> metadata -> endpoints -> resolve -> connect ->
diagnose -> report) takes and returns these plain values. A failure is data (a status and
an error text), never an exception, so a report can always say how far a probe got.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from kprobe.hostport import format_hostport

# What an application needs beyond reachable leaders (coordinators, internal topics) lives apart too.
from kprobe.models.application import (  # noqa: F401
    ASKED_SETTINGS,
    INTERNAL_DEFAULTS,
    INTERNAL_SETTINGS,
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    RACK_AWARE,
    SELECTOR_KEY,
    SETTINGS_PREFIX,
    TRANSACTIONS_TOPIC,
    Application,
    ApplicationAnswer,
    ApplicationQuestions,
    Coordinator,
    CoordinatorKind,
    CoordinatorReply,
    InternalTopic,
    NamedTopic,
    NamedTopicStatus,
    RackRead,
    asks_anything,
    internal_trouble,
    live_brokers,
    questions_from,
    reads_by_replica,
)

# What a Metadata answer says of the cluster, apart so that the application's records can name it too.
from kprobe.models.metadata import AdvertisedBroker, ClusterMetadata, TopicInfo  # noqa: F401

# The partition table lives apart (built for speed, not reading) and is named from here.
from kprobe.models.partitions import (  # noqa: F401
    RUN_MAX,
    RUN_VALUES_MAX,
    PartitionInfo,
    PartitionRun,
    PartitionTable,
    RunBuilder,
    run_limit,
)
from kprobe.records import field, record

# The vocabularies of the report contract (docs/report.md), as types: the JSON report and the
# models share one spelling, mypy (strict equality) rejects a comparison with a word outside
# them, and tests/test_vocabulary.py holds each equal to its enum in the shipped JSON Schema.
# Literal strings rather than enums: they serialise as themselves and format the same on every
# Python version (a str-mixin Enum prints as `Class.MEMBER` in f-strings from 3.12 on).
BootstrapStatus = Literal["ok", "dns_failed", "refused", "timeout", "auth_failed", "error"]
DnsStatus = Literal["ok", "nxdomain", "no_answer", "timeout", "servfail", "error"]
DnsSource = Literal["literal", "system", "nameserver", "dns"]
TcpStatus = Literal["ok", "refused", "timeout", "unreachable", "error"]
EndpointStatus = Literal["reachable", "unresolvable", "unreachable", "partial", "unchecked", "degraded"]
"""What a client with default settings does at an advertised endpoint, one word per state.

- `reachable`: every address accepts; the client connects.
- `degraded`: some addresses fail, yet the client connects: an IPv6 family fails beside a working
  IPv4 one, and librdkafka moves to the next address while Java prefers IPv4 (kprobe.net.dualstack).
  Only a client pinned to the failing family fails. It counts as connecting everywhere.
- `partial`: some addresses fail and no family explains it, or the failing family is the one a
  default client dials (IPv4 for Java): some clients, or some attempts, fail. A gap everywhere.
- `unreachable`: the name resolves and no address accepts; every client fails.
- `unresolvable`: the name does not resolve; every client fails before dialling.
- `unchecked`: the run's deadline (or Ctrl-C) came first; nothing is known, so it is neither a
  success nor a failure and no count takes it in.

Every output counts with the sets below and nothing else, so one endpoint is never usable in the
probe, reachable in `list` and a failure in the aggregation: the probe's summary and
`reachable`/`usable` counts, `list --reachability`'s leaders and kcat JSON's `reachable`, `check
--probe`'s "works", and the aggregation's successes and `endpoints_reachable` (Spark columns take
`isin(*CLIENTS_CONNECT)` of the same tuple).
"""
# The client connects (default settings): `reachable` and `degraded`. Not a gap.
CLIENTS_CONNECT: tuple[EndpointStatus, ...] = ("reachable", "degraded")
# Some addresses accept and others fail (what kprobe.net.dualstack explains, or cannot).
SOME_ADDRESSES_FAIL: tuple[EndpointStatus, ...] = ("degraded", "partial")
# The name resolved, whatever connecting then gave: what `check`'s prediction "resolves" is borne out by.
RESOLVED: tuple[EndpointStatus, ...] = ("reachable", "degraded", "partial", "unreachable")
# Nothing seen fails there: the client connects, or the deadline came before anything was known.
NO_FAILURE_SEEN: tuple[EndpointStatus, ...] = (*CLIENTS_CONNECT, "unchecked")
IdentityStatus = Literal["match", "mismatch", "not_kafka", "silent", "unchecked"]
TlsStatus = Literal["ok", "untrusted", "hostname_mismatch", "expiring", "handshake_failed", "not_checked"]
Severity = Literal["error", "warning", "info"]
RunStatus = Literal["ok", "gap", "failed", "interrupted"]
ResolverKind = Literal["system", "nameserver"]
Via = Literal["kprobe", "librdkafka"]
Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
# `client_certificate_required` / `_refused`: the broker's side refused the client (a listener with
# ssl.client.auth=required got no certificate, or one it does not trust), told by its TLS alert.
TlsFailure = Literal["hostname_mismatch", "untrusted", "expired", "handshake_failed", "client_certificate_required",
                     "client_certificate_refused"]
# What a --controllers address gave: the quorum (`ok`), a reason it could not, or what it is instead:
# `broker` (a broker listener: DescribeCluster for controllers is refused or absent), `unsupported` (a
# controller without DescribeCluster for controllers: Kafka before 3.7, or metadata.version below 3.7),
# `denied` (DescribeCluster on a controller needs ALTER on CLUSTER).
# --roundtrip: the whole round trip, and each partition's. `unfinished`: the run's deadline came first, so
# nothing is known (never called a failure); `not_run`: there was nothing to try (no bootstrap answered,
# the topic does not exist, it could not be created).
RoundtripStatus = Literal["ok", "failed", "unfinished", "not_run"]
PartitionRoundtripStatus = Literal["ok", "produce_failed", "consume_failed", "unfinished"]
ControllerStatus = Literal["ok", "dns_failed", "refused", "timeout", "auth_failed", "broker", "unsupported",
                           "denied", "error"]




@record
class BootstrapAddress:
    """One address the user gave with -b, normalised.

    `protocol` keeps a `SSL://` style prefix so a listener copied from a broker config
    selects the right security protocol.
    """

    host: str
    port: int
    protocol: Protocol | None = None

    @property
    def hostport(self) -> str:
        """The `host:port` form used as the bootstrap's identity in reports."""
        return format_hostport(self.host, self.port)


@record(kw_only=True)
class BootstrapResult:
    """The outcome of asking one bootstrap address for metadata.

    `answered_by_id` and `answered_by_name` follow kcat and librdkafka: a bootstrap
    connection has no node id yet, so it is -1 and named `host:port/bootstrap`.
    """

    address: str
    status: BootstrapStatus
    error: str | None = None
    answered_by_id: int | None = None
    answered_by_name: str | None = None
    connected_to: str | None = None
    metadata: ClusterMetadata | None = None
    ms: float | None = None
    via: Via = "kprobe"
    node_id: int | None = None
    identity_note: str | None = None
    # The answering node's own listener settings (kprobe.kafka.codec.LISTENER_KEYS, those set), read on the
    # identity request: which listener the bootstrap reached, and which is the inter-broker one. A fix names them.
    listener_settings: tuple[tuple[str, str], ...] = ()
    protocol: Protocol | None = None
    # Why a TLS handshake with the bootstrap failed, when one did.
    tls_failure: TlsFailure | None = None
    # Whether the listener itself speaks TLS, learnt when the protocol the client chose did not work.
    speaks_tls: bool | None = None
    # The mechanisms the listener enabled, when it refused the one sent (SaslHandshake's answer).
    sasl_mechanisms: tuple[str, ...] = ()
    # The SASL mechanism sent, on a SASL listener: an authentication failure's fix depends on it.
    sasl_mechanism: str | None = None
    # OAUTHBEARER: the token endpoint gave no token, so the broker never saw one.
    token_unavailable: bool = False
    # A KRaft controller listener answered (raft RPCs, no Metadata): no client bootstraps there.
    kraft_controller: bool = False
    # The full Metadata answer (every topic) never arrived where ApiVersions did, and a brokers-only one did:
    # the path loses large packets (a path-MTU black hole). `metadata` is that small answer, so the brokers and
    # endpoints are still judged; `largest_answer_bytes` the largest answer that arrived (kprobe.kafka.pathmtu).
    full_metadata_lost: bool = False
    largest_answer_bytes: int | None = None
    # The security.protocol the listener wants, learnt when the one sent did not work: asked on a new
    # connection (SaslHandshake lists a SASL listener's mechanisms in `sasl_mechanisms`; a listener
    # without SASL answers it with ILLEGAL_SASL_STATE). None: not learnt.
    wanted_protocol: Protocol | None = None
    # The TLS alert the broker ended the connection with ("bad certificate", "certificate unknown"), when
    # it refused the client's side of TLS (tls_failure client_certificate_required or _refused).
    tls_alert: str | None = None
    # What the same connection answered about the application after its Metadata: coordinators, the internal
    # topics' settings, named topics (None: nothing was asked, every internal topic there and online).
    application: ApplicationAnswer | None = None
    # The versions this broker takes of the requests clients send (kprobe.kafka.client_versions.CLIENT_APIS), as
    # its ApiVersions answer gave them: (request name, lowest, highest).
    api_versions: tuple[tuple[str, int, int], ...] = ()

    @property
    def brokers(self) -> tuple[AdvertisedBroker, ...]:
        """Advertised brokers, empty when the bootstrap did not answer."""
        return self.metadata.brokers if self.metadata else ()


@record(kw_only=True)
class DnsResult:
    """How a host name resolved from this vantage point.

    `source` says who answered: `literal` (no lookup), `system` (getaddrinfo, as the
    clients on this machine resolve) or `nameserver` (dnspython against given servers).
    `detail` carries dnspython's view beside the system resolver's, because getaddrinfo
    only says "failed" where DNS can say NXDOMAIN, no answer, SERVFAIL or timeout.
    """

    host: str
    status: DnsStatus
    addresses: tuple[str, ...] = ()
    ms: float | None = None
    source: DnsSource = "system"
    error: str | None = None
    cname_chain: tuple[str, ...] = ()
    ttl: int | None = None
    in_hosts_file: bool = False
    detail: DnsResult | None = None
    server: str | None = None
    # Cut off by the run's deadline or Ctrl-C before any answer: nothing is known, nothing is concluded.
    unfinished: bool = False


@record(kw_only=True)
class TcpResult:
    """One TCP connect attempt to one resolved address."""

    address: str
    port: int
    status: TcpStatus
    ms: float | None = None
    error: str | None = None
    source: str | None = None
    # Stopped by the run's deadline before the connect timeout: not a timeout a client would see.
    unfinished: bool = False


@record(kw_only=True)
class Remap:
    """Where the user asked kprobe to send an advertised endpoint instead (`--resolve`, `--connect-to`).

    A "what if": the network as it would be with a port-forward, a hosts entry or a planned
    listener change, so a fix can be tried before it is made. `host` is resolved as any name.
    """

    host: str
    port: int
    option: Literal["--resolve", "--connect-to"]

    @property
    def hostport(self) -> str:
        """The `host:port` the endpoint is dialled at."""
        return format_hostport(self.host, self.port)


@record(kw_only=True)
class Endpoint:
    """A distinct advertised endpoint and the bootstraps that advertised it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    advertised_by: tuple[str, ...] = ()
    # Set when a --resolve or --connect-to mapping sends this endpoint elsewhere: the verdict holds only with it.
    remap: Remap | None = None

    @property
    def hostport(self) -> str:
        """The `host:port` form used in messages."""
        return format_hostport(self.host, self.port)

    @property
    def dial_host(self) -> str:
        """The name or address resolved and connected to: the advertised host unless remapped."""
        return self.remap.host if self.remap else self.host

    @property
    def dial_port(self) -> int:
        """The port connected to: the advertised port unless remapped."""
        return self.remap.port if self.remap else self.port


@record(kw_only=True)
class Identity:
    """Who really answers at an endpoint, and what it advertises from there.

    `status`: `match` (the advertised node answers), `mismatch` (another node does),
    `not_kafka` (something answers that does not speak Kafka), `silent` (the connection is closed
    or left unanswered before any Kafka answer), `unchecked` (`detail` says why).
    """

    status: IdentityStatus
    node_id: int | None = None
    detail: str | None = None
    address: str | None = None
    advertised: tuple[AdvertisedBroker, ...] | None = None
    ms: float | None = None
    # Cut off by the run's deadline: nothing is known of who answers (not a permission problem).
    unfinished: bool = False
    # What answers is a KRaft controller listener (its ApiVersions lists raft RPCs and no Metadata).
    kraft_controller: bool = False
    # The listener refused the client's side of TLS (client_certificate_required or _refused): with TLS 1.3
    # the broker's alert comes only at the first request, after a handshake the TLS check saw succeed.
    tls_failure: TlsFailure | None = None


@record(kw_only=True)
class TlsResult:
    """A TLS handshake to one endpoint, judged against the *advertised* name."""

    status: TlsStatus
    address: str
    subject: str | None = None
    names: tuple[str, ...] = ()
    # The subjectAltName entries with their type (`DNS:x`, `IP:x`): clients match on the type, which `names` drops.
    sans: tuple[str, ...] = ()
    issuer: str | None = None
    not_after: str | None = None
    days_left: float | None = None
    trusted: bool | None = None
    hostname_ok: bool | None = None
    error: str | None = None
    # What the client's own settings check: with a check off, its failure hurts other clients only.
    client_verifies_chain: bool = True
    client_verifies_name: bool = True
    # Cut off by the run's deadline before the handshake ended: nothing is known of the certificate.
    unfinished: bool = False
    # How long the handshake took (or failed after): the TLS phase's duration.
    ms: float | None = None


@record(kw_only=True)
class EndpointResult:
    """An endpoint with what resolving and connecting to it found."""

    endpoint: Endpoint
    dns: DnsResult
    tcp: tuple[TcpResult, ...]
    status: EndpointStatus
    identity: Identity | None = None
    tls: TlsResult | None = None
    compared_dns: tuple[DnsResult, ...] = ()


@record(kw_only=True)
class ControllerBootstrapResult:
    """What one --controllers address said of the controller quorum (DescribeCluster, KIP-919).

    As an admin client with `bootstrap.controllers` asks it: `controllers` are the endpoints the
    quorum advertises for this controller listener, `active_controller_id` the raft leader (-1
    when unknown), `node_id` the controller that answered at the address.
    """

    address: str
    status: ControllerStatus
    error: str | None = None
    connected_to: str | None = None
    cluster_id: str | None = None
    active_controller_id: int | None = None
    controllers: tuple[AdvertisedBroker, ...] = ()
    ms: float | None = None
    node_id: int | None = None
    identity_note: str | None = None
    protocol: Protocol | None = None
    describe_cluster_version: int | None = None


@record(kw_only=True)
class PartitionRoundtrip:
    """One partition of --roundtrip: a record produced to it by a real client, and read back."""

    partition: int
    # The leader when the round trip began, from the bootstrap's metadata: whose endpoint the client used.
    leader: int | None
    status: PartitionRoundtripStatus
    offset: int | None = None
    produce_ms: float | None = None
    roundtrip_ms: float | None = None
    error: str | None = None
    # The broker answered with an error (authorization, replicas, ...): the endpoint worked, the request not.
    broker_error: bool = False


@record(kw_only=True)
class RoundtripStep:
    """--roundtrip's step for the application's group or transactional id: joined and committed, or a
    transaction committed, through the same coordinator and internal partition as the application's own.

    `key` is the application's id; `twin` the id kprobe used, placed on the same partition of
    `__consumer_offsets` or `__transaction_state` (`partition`): the same coordinator and the same path,
    and the application's live group is never rebalanced, its live producer never fenced.
    """

    kind: Literal["group", "transaction"]
    key: str
    twin: str
    partition: int | None
    status: RoundtripStatus
    error: str | None = None
    ms: float | None = None


@record(kw_only=True)
class Roundtrip:
    """--roundtrip TOPIC: what a real client (librdkafka) did from here, to set beside the prediction."""

    topic: str
    client: str
    status: RoundtripStatus
    partitions: tuple[PartitionRoundtrip, ...] = ()
    created: bool = False
    error: str | None = None
    # Set when the topic does not exist and --roundtrip-create was not given: bad input, said in one line.
    topic_missing: bool = False
    ms: float | None = None
    # The application's own path, when it names a group or a transactional id (None: not named).
    group: RoundtripStep | None = None
    transaction: RoundtripStep | None = None

    @property
    def partitions_ok(self) -> int:
        """Partitions whose record was acknowledged and read back: the count every summary shows."""
        return sum(1 for p in self.partitions if p.status == "ok")


@record(kw_only=True)
class Finding:
    """A diagnosis: what a client will experience and which setting to change."""

    code: str
    severity: Severity
    message: str
    fix: str
    node_id: int | None = None
    endpoint: str | None = None
    bootstrap: str | None = None
    # Every advertised endpoint (`host:port`, as advertised) and every broker the finding concerns. One finding
    # may stand for several endpoints with one cause and one fix (merged repeats), where `endpoint` and `node_id`
    # can name only one: these lists are what `is_usable` reads, so an error merged over three brokers still
    # marks all three unusable. Filled from `endpoint` and `node_id` when not given.
    endpoints: tuple[str, ...] = ()
    node_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        """One spelling for one endpoint: a finding built with `endpoint` alone lists it in `endpoints` too."""
        if not self.endpoints and self.endpoint is not None:
            object.__setattr__(self, "endpoints", (self.endpoint,))
        if not self.node_ids and self.node_id is not None:
            object.__setattr__(self, "node_ids", (self.node_id,))

    def concerns(self, endpoint: Endpoint) -> bool:
        """Whether this finding is about `endpoint`: its `host:port` is listed, and so is its node (or none is).

        Nodes and endpoints are two lists, not pairs: a finding over brokers 1 and 2 at `a:1` and `b:2` would
        also name broker 1 at `b:2`, which only exists when two brokers advertise one endpoint, and that
        endpoint is then unusable anyway (DUPLICATE_ENDPOINT).
        """
        return endpoint.hostport in self.endpoints and (not self.node_ids or endpoint.node_id in self.node_ids)


@record(kw_only=True)
class Vantage:
    """Where the probe ran from and which resolver it used."""

    name: str
    hostname: str
    resolver_kind: ResolverKind
    nameservers: tuple[str, ...] = ()


@record(kw_only=True)
class Report:
    """One probe run: the unit written to stdout, files and topics."""

    id: str
    started_at: str
    finished_at: str
    vantage: Vantage
    bootstraps: tuple[BootstrapResult, ...]
    endpoints: tuple[EndpointResult, ...]
    findings: tuple[Finding, ...]
    status: RunStatus
    duration_ms: float
    settings: dict[str, object] = field(default_factory=dict)
    deadline_reached: bool = False
    # --controllers: each address's answer and each advertised controller endpoint as checked (None: not asked).
    controllers: tuple[ControllerBootstrapResult, ...] | None = None
    controller_endpoints: tuple[EndpointResult, ...] = ()
    # --roundtrip (None: not asked).
    roundtrip: Roundtrip | None = None
    # The application's view: its coordinators, the internal topics behind them, its topics (None: nothing to say,
    # as in reports written before kprobe judged applications).
    application: Application | None = None

    @property
    def reachable(self) -> int:
        """How many endpoints a client with default settings can connect to from here (`degraded` counts)."""
        return sum(1 for e in self.endpoints if e.status in CLIENTS_CONNECT)

    @property
    def usable(self) -> int:
        """How many endpoints a client can use from here: reached, and no error found there.

        A TCP connect is not the client's experience: another broker answering, a certificate that
        fails, something that is not Kafka all leave the port open and every request failing. The
        rules judge those, so an endpoint an error names is never counted usable, and a summary
        can never say "3/3 usable" above an error about one of them.
        """
        return sum(1 for e in self.endpoints if is_usable(e, self.findings))

    @property
    def usable_controllers(self) -> int:
        """Controller endpoints an admin client can use from here, by the same rule."""
        return sum(1 for e in self.controller_endpoints if is_usable(e, self.findings))


def is_usable(result: EndpointResult, findings: Sequence[Finding]) -> bool:
    """A client connects there (default settings) and no error finding concerns that node's endpoint.

    Membership, not equality with `Finding.endpoint`: a finding that stands for several endpoints (or
    several brokers at one endpoint) leaves `endpoint` or `node_id` empty, and each of them must still
    count as unusable, or "N/M usable" could sit above an error naming them.
    """
    if result.status not in CLIENTS_CONNECT:
        return False
    ep = result.endpoint
    return not any(f.severity == "error" and f.concerns(ep) for f in findings)


# The words of `verdict` for an endpoint clients use (`is_usable`): every other word is a gap.
USABLE_VERDICTS = ("usable", "degraded")


def verdict(result: EndpointResult, findings: Sequence[Finding]) -> str:
    """What a client can do at an endpoint, in one word: `usable`, `degraded`, or why not.

    An endpoint that accepts connections and is named by an error (another broker answers, the
    certificate fails) is `unusable`: the findings say why. The text table, Markdown and `kprobe
    diff` all say it in this word, so two reports compare on what clients experience.
    """
    if result.status in CLIENTS_CONNECT:
        if not is_usable(result, findings):
            return "unusable"
        return "usable" if result.status == "reachable" else result.status
    return result.status


def endpoint_row(endpoints: Sequence[EndpointResult], node_id: int, hostport: str | None) -> EndpointResult | None:
    """The row of broker `node_id` at `hostport` (as advertised): where a coordinator or a follower read goes."""
    return next((r for r in endpoints if r.endpoint.node_id == node_id and r.endpoint.hostport == hostport), None)


def coordinator_verdict(coordinator: Coordinator, endpoints: Sequence[EndpointResult],
                        findings: Sequence[Finding]) -> str | None:
    """The coordinator's endpoint in the endpoint table's word (`usable`, `refused`, ...), None with no coordinator.

    A coordinator is one of the advertised endpoints, so it is judged as that row is: the text
    report, Markdown and `kprobe diff` then never call usable a coordinator the table calls
    unusable. Where the report has no such row (an edited file), the connect status it kept stands.
    """
    if coordinator.node_id is None:
        return None
    row = endpoint_row(endpoints, coordinator.node_id, coordinator.endpoint)
    return verdict(row, findings) if row is not None else coordinator.status or "unchecked"
