"""What an application needs beyond reachable partition leaders: its coordinators and the internal topics behind them.

A consumer in a group commits to, and a transactional producer registers with, one broker of its
own: the coordinator, which a FindCoordinator answer names. That broker must be reachable from
where the application runs, and the partition of `__consumer_offsets` (or `__transaction_state`)
it leads must exist and be online, or the application hangs while every leader it produces to
works. These are the values the bootstrap step brings back and the report carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from kprobe.records import field, record

if TYPE_CHECKING:
    from kprobe.models.metadata import ClusterMetadata, TopicInfo

CoordinatorKind = Literal["group", "transaction", "share"]
# A topic the application named (--topic), as the metadata answered for it.
NamedTopicStatus = Literal["ok", "not_found", "not_authorized", "no_leader", "error"]

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
# Kafka's defaults for the settings that decide whether the internal topics can be created and written
# (KafkaConfig / GroupCoordinatorConfig / TransactionLogConfig): what a broker that did not say runs with.
INTERNAL_DEFAULTS: dict[str, int] = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 50,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 50,
}
INTERNAL_SETTINGS = tuple(INTERNAL_DEFAULTS)
# The prefix of each internal topic's settings: `<prefix>.replication.factor`, `.num.partitions` (and `.min.isr`).
SETTINGS_PREFIX = {OFFSETS_TOPIC: "offsets.topic", TRANSACTIONS_TOPIC: "transaction.state.log"}
# Which replica a consumer with client.rack reads from (KIP-392): the broker's choice, LeaderSelector by default.
SELECTOR_KEY = "replica.selector.class"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
ASKED_SETTINGS = (*INTERNAL_SETTINGS, SELECTOR_KEY)
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTIONS_TOPIC)
# The client properties that name the application (the same keys in Java's and librdkafka's files).
GROUP_KEY, TRANSACTIONAL_KEY, PROTOCOL_KEY = "group.id", "transactional.id", "group.protocol"
RACK_KEY = "client.rack"


@record(kw_only=True)
class ApplicationQuestions:
    """What the user's application is (from -F's group.id and transactional.id, or options), for the bootstrap step."""

    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    # group.protocol as the consumer's configuration has it: "consumer" is KIP-848's, whose brokers must take it.
    group_protocol: str | None = None
    share_groups: tuple[str, ...] = ()  # KIP-932 share groups (--share-group)
    client_rack: str | None = None  # the consumer's client.rack: which replica it reads from (KIP-392)
    # librdkafka's broker.version.fallback where api.version.request=false pins request versions below 0.10.
    pinned: str | None = None

    def __bool__(self) -> bool:
        return bool(self.groups or self.transactional_ids or self.topics or self.share_groups
                    or self.group_protocol == "consumer" or self.client_rack or self.pinned)

    @property
    def group(self) -> str | None:
        """The group the report names (the first: one consumer's configuration has one)."""
        return self.groups[0] if self.groups else None

    @property
    def transactional_id(self) -> str | None:
        """The transactional id the report names."""
        return self.transactional_ids[0] if self.transactional_ids else None

    @property
    def share_group(self) -> str | None:
        """The share group the report names."""
        return self.share_groups[0] if self.share_groups else None


def questions_from(props: Mapping[str, str], *, group: str | None = None, transactional_id: str | None = None,
                   topics: Sequence[str] = (), share_group: str | None = None,
                   client_rack: str | None = None) -> ApplicationQuestions:
    """The application as the user's own configuration names it; an option wins over the file's key."""
    group = group or props.get(GROUP_KEY) or None
    transactional_id = transactional_id or props.get(TRANSACTIONAL_KEY) or None
    protocol = (props.get(PROTOCOL_KEY) or "").strip().lower() or None
    rack = client_rack or (props.get(RACK_KEY) or "").strip() or None
    pinned = None
    if (props.get("api.version.request") or "").strip().lower() == "false":
        pinned = (props.get("broker.version.fallback") or "0.10.0").strip()
    return ApplicationQuestions(groups=(group,) if group else (),
                                transactional_ids=(transactional_id,) if transactional_id else (),
                                topics=tuple(dict.fromkeys(topics)), group_protocol=protocol,
                                share_groups=(share_group,) if share_group else (), client_rack=rack,
                                pinned=pinned)


def internal_trouble(meta: ClusterMetadata) -> bool:
    """Whether the metadata leaves an internal topic in doubt: not listed, a partition without a leader, or
    fewer than two replicas in sync (the transaction log's writes may then be refused: its min.isr is 2 by
    default), so that its settings are worth asking for.
    """
    listed = {t.name: t for t in meta.topics}
    for name in INTERNAL_TOPICS:
        topic = listed.get(name)
        if topic is None:
            return True
        if any(p.leader < 0 or len(p.isrs) < len(p.replicas) for p in topic.partitions):
            return True
        if name == TRANSACTIONS_TOPIC and any(len(p.isrs) < INTERNAL_DEFAULTS["transaction.state.log.min.isr"]
                                              for p in topic.partitions):
            return True
    return False


def live_brokers(meta: ClusterMetadata) -> int:
    """How many brokers are alive, as far as one listener's answer shows: those it lists, and every broker in
    some partition's in-sync replicas (a broker without this listener is listed by no answer on it, yet it
    serves, and can hold an internal topic's replicas).
    """
    alive = {b.node_id for b in meta.brokers}
    for topic in meta.topics:
        for p in topic.partitions:
            alive.update(p.isrs)
    return len(alive)


def asks_anything(meta: ClusterMetadata, questions: ApplicationQuestions) -> bool:
    """Whether the bootstrap connection has anything to ask after the metadata: a healthy cluster probed
    with no application named asks nothing (and loads none of the code that would ask).
    """
    return bool(questions.groups or questions.transactional_ids or questions.share_groups or questions.client_rack
                or questions.group_protocol == "consumer") or internal_trouble(meta) or any(
        name not in {t.name for t in meta.topics} for name in questions.topics)


@record(kw_only=True)
class CoordinatorReply:
    """One key's FindCoordinator answer: the coordinator's node and endpoint, or the error that came instead."""

    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None = None


@record(kw_only=True)
class ApplicationAnswer:
    """What one bootstrap connection answered about the application, after its Metadata.

    `settings` are the internal topics' broker settings (`INTERNAL_SETTINGS`) as DescribeConfigs gave
    them, empty when they were not needed (every internal topic there and online) or could not be read
    (`settings_error` says why); `topics` the named topics the full listing lacked, asked by name so that
    the broker says why (unknown, not authorised); `errors` the requests that failed, in words.
    """

    groups: tuple[CoordinatorReply, ...] = ()
    transactions: tuple[CoordinatorReply, ...] = ()
    shares: tuple[CoordinatorReply, ...] = ()
    # Whether the brokers take KIP-848's consumer protocol and KIP-932's share groups: "ok", or why not (None:
    # not asked). Asked with a heartbeat no broker can act on (an empty group id), so no group is touched.
    consumer_protocol: str | None = None
    share_protocol: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    settings_error: str | None = None
    topics: tuple[TopicInfo, ...] = ()
    errors: tuple[str, ...] = ()


@record(kw_only=True)
class InternalTopic:
    """`__consumer_offsets` or `__transaction_state` as seen from here, and whether it can serve.

    `replication_factor` and `min_isr` are the broker settings the topic is (or would be) created with;
    `settings_read` is False where they could not be read and Kafka's defaults are assumed. `offline`
    lists partitions without a leader, `under_min_isr` those whose in-sync replicas are fewer than
    `min_isr` (transactions only: their writes need that many).
    """

    name: str
    exists: bool | None  # None: not visible to this principal (or not asked), so not known
    partitions: int
    live_brokers: int
    replication_factor: int | None = None
    min_isr: int | None = None
    settings_read: bool = False
    offline: tuple[int, ...] = ()
    under_min_isr: tuple[int, ...] = ()

    @property
    def can_create(self) -> bool:
        """Whether the brokers can create it (enough live brokers for its replication factor)."""
        return self.replication_factor is None or self.live_brokers >= self.replication_factor

    @property
    def serves(self) -> bool:
        """Whether every key can be served: it exists (or can be made), each partition led, enough in sync.

        Where its existence is not known, nothing says it cannot.
        """
        if self.exists is None:
            return True
        if not self.exists:  # it will be created, and written to, only with enough replicas for its min.isr
            short = self.min_isr is not None and self.replication_factor is not None \
                and self.min_isr > self.replication_factor
            return self.can_create and not short
        return not self.offline and not self.under_min_isr


@record(kw_only=True)
class Coordinator:
    """A group's or transactional id's coordinator: where the key lives, who the broker says serves it.

    `partition` is computed as the broker computes it; `partition_leader` is that partition's leader in
    the metadata (None where the topic or the leader is missing), which the answer's `node_id` should
    match. `endpoint` and `status` are the coordinator's advertised endpoint and what connecting to it
    gave from here (`EndpointStatus`), `error` the FindCoordinator error when there was no coordinator.
    """

    kind: CoordinatorKind
    key: str
    partition: int | None = None
    partition_leader: int | None = None
    node_id: int | None = None
    endpoint: str | None = None
    status: str | None = None
    error: str | None = None

    @property
    def java_id(self) -> int | None:
        """The id the Java client logs for this coordinator, so that a user can find it in their logs.

        A consumer keeps its coordinator as a node of its own, `Integer.MAX_VALUE - nodeId`
        (AbstractCoordinator, CoordinatorRequestManager: "Discovered group coordinator host:port (id:
        2147483645 ...)"), on a connection apart from the broker's; a transactional producer logs the
        broker's own id (TransactionManager: "Discovered transaction coordinator host:port (id: 2 ...)").
        """
        if self.node_id is None:
            return None
        return self.node_id if self.kind == "transaction" else 2147483647 - self.node_id


@record(kw_only=True)
class NamedTopic:
    """A topic the application uses (--topic), as the metadata answered for it here."""

    name: str
    status: NamedTopicStatus
    partitions: int = 0
    leaderless: tuple[int, ...] = ()
    error: str | None = None


@record(kw_only=True)
class RackRead:
    """Where a consumer with client.rack reads one partition: the replica the leader names (KIP-392), and
    whether that replica's endpoint works from here (`status`: its verdict word, as the endpoint table's).
    """

    topic: str
    partition: int
    leader: int
    replica: int
    endpoint: str | None = None
    status: str | None = None


def reads_by_replica(reads: Sequence[RackRead]) -> list[tuple[int, list[RackRead]]]:
    """Follower reads grouped by the replica they go to, in node order: one finding or line per broker."""
    grouped: dict[int, list[RackRead]] = {}
    for read in reads:
        grouped.setdefault(read.replica, []).append(read)
    return sorted(grouped.items())


@record(kw_only=True)
class Application:
    """The report's application section: what was named, the internal topics, the coordinators."""

    group: str | None = None
    transactional_id: str | None = None
    topics: tuple[NamedTopic, ...] = ()
    internal_topics: tuple[InternalTopic, ...] = ()
    coordinators: tuple[Coordinator, ...] = ()
    group_protocol: str | None = None
    share_group: str | None = None
    # "ok", or why the brokers do not take it (None: not asked): KIP-848's consumer protocol, KIP-932's share groups.
    consumer_protocol: str | None = None
    share_protocol: str | None = None
    # client.rack (KIP-392): the brokers' racks, their replica.selector.class (None: not read), and where each
    # partition the consumer reads is fetched from when that is not its leader.
    client_rack: str | None = None
    broker_racks: tuple[str, ...] = ()
    replica_selector: str | None = None
    rack_reads: tuple[RackRead, ...] = ()
    # librdkafka's broker.version.fallback, where api.version.request=false pins the request versions.
    pinned: str | None = None
