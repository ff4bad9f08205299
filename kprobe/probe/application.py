"""The application's view: from the bootstrap's answers and the endpoints judged, what its group,
transactions and topics will meet.

Pure: it reads what the bootstrap step brought back (the metadata, and the coordinator answers and
settings asked on the same connection: kprobe.kafka.coordinators) and what connecting to each
advertised endpoint gave, and says where each key lives, who coordinates it, and whether the
internal topics can serve. The rules (kprobe.findings.application) turn that into findings.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.hostport import format_hostport
from kprobe.kafka.coordinator_codec import partition_for, reply_error
from kprobe.kafka.wire import error_name
from kprobe.models import (
    INTERNAL_DEFAULTS,
    OFFSETS_TOPIC,
    RACK_AWARE,
    SELECTOR_KEY,
    SETTINGS_PREFIX,
    TRANSACTIONS_TOPIC,
    Application,
    ApplicationAnswer,
    ApplicationQuestions,
    BootstrapResult,
    ClusterMetadata,
    Coordinator,
    CoordinatorKind,
    CoordinatorReply,
    EndpointResult,
    InternalTopic,
    NamedTopic,
    NamedTopicStatus,
    RackRead,
    TopicInfo,
    endpoint_row,
    live_brokers,
)
from kprobe.models.partitions import LISTENER_NOT_FOUND, PartitionInfo

_UNKNOWN_TOPIC, _TOPIC_DENIED = 3, 29


def judge_application(bootstraps: Sequence[BootstrapResult], results: Sequence[EndpointResult],
                      questions: ApplicationQuestions) -> Application | None:
    """The report's application section, or None when there is nothing to say (no full answer, all well)."""
    source = _source(bootstraps)
    if source is None:
        return None
    meta = source.metadata
    assert meta is not None
    answer = source.application or ApplicationAnswer()
    settings = _settings(answer)
    internal = tuple(_internal(name, meta, answer, settings) for name in (OFFSETS_TOPIC, TRANSACTIONS_TOPIC))
    topics_by_name = {t.name: t for t in (*answer.topics, *meta.topics)}
    kinds: tuple[tuple[CoordinatorKind, InternalTopic, tuple[CoordinatorReply, ...]], ...] = (
        ("group", internal[0], answer.groups), ("transaction", internal[1], answer.transactions),
        ("share", internal[0], answer.shares))
    coordinators = tuple(_coordinator(kind, reply, meta, topic, results)
                         for kind, topic, replies in kinds for reply in replies)
    named = tuple(_named(name, topics_by_name.get(name)) for name in questions.topics)
    rack_reads: tuple[RackRead, ...] = ()
    if questions.client_rack and answer.settings.get(SELECTOR_KEY) == RACK_AWARE:
        read = [topics_by_name[n] for n in questions.topics if n in topics_by_name] or [
            t for t in meta.topics if not t.is_internal and not t.name.startswith("__")]
        rack_reads = _rack_reads(questions.client_rack, read, meta, results)
    if not questions and all(t.serves for t in internal):
        # Nothing named and nothing wrong (a cluster that never had a group can create its offsets topic): the
        # report stays as it was, and says the same of one cluster whatever its clients did before.
        return None
    return Application(group=questions.group, transactional_id=questions.transactional_id,
                       topics=named, internal_topics=internal, coordinators=coordinators,
                       group_protocol=questions.group_protocol, share_group=questions.share_group,
                       consumer_protocol=answer.consumer_protocol, share_protocol=answer.share_protocol,
                       client_rack=questions.client_rack,
                       broker_racks=tuple(sorted({b.rack for b in meta.brokers if b.rack})),
                       replica_selector=answer.settings.get(SELECTOR_KEY), rack_reads=rack_reads,
                       pinned=questions.pinned)


def _rack_reads(rack: str, topics: Sequence[TopicInfo], meta: ClusterMetadata,
                results: Sequence[EndpointResult]) -> tuple[RackRead, ...]:
    """Where a consumer in `rack` reads each partition that a follower serves it (KIP-392), as
    RackAwareReplicaSelector chooses: the leader when it is in the rack, else an in-sync replica in the
    rack (the lowest id where several are: the broker prefers the most caught up, which any may be), else
    the leader. Partitions read from their leader are left out: the endpoints say all there is of them.
    """
    racks = {b.node_id: b.rack for b in meta.brokers}
    endpoints = {b.node_id: format_hostport(b.host, b.port) for b in meta.brokers}
    reads = []
    for topic in topics:
        for p in topic.partitions:
            if p.leader < 0 or racks.get(p.leader) == rack:
                continue
            local = sorted(r for r in p.isrs if racks.get(r) == rack)
            if not local:
                continue
            replica = local[0]
            endpoint = endpoints.get(replica)
            row = endpoint_row(results, replica, endpoint)
            status = row.status if row is not None else None
            reads.append(RackRead(topic=topic.name, partition=p.partition, leader=p.leader, replica=replica,
                                  endpoint=endpoint, status=status))
    return tuple(reads)


def _source(bootstraps: Sequence[BootstrapResult]) -> BootstrapResult | None:
    """The bootstrap whose answer speaks for the cluster: a full listing from kprobe's own client, asked further."""
    full = [b for b in bootstraps if b.status == "ok" and b.metadata is not None and b.via == "kprobe"
            and not b.full_metadata_lost]
    return next((b for b in full if b.application is not None), full[0] if full else None)


def _settings(answer: ApplicationAnswer) -> dict[str, int]:
    """The settings the broker gave, as numbers (a value that is not one is left out: Kafka's default stands)."""
    return {k: int(v) for k, v in answer.settings.items() if k in INTERNAL_DEFAULTS and v.strip().isdigit()}


def _internal(name: str, meta: ClusterMetadata, answer: ApplicationAnswer, settings: dict[str, int]) -> InternalTopic:
    prefix = SETTINGS_PREFIX[name]
    rf_key, count_key = f"{prefix}.replication.factor", f"{prefix}.num.partitions"
    isr_key = f"{prefix}.min.isr" if name == TRANSACTIONS_TOPIC else None  # offsets' writes need no more
    read = rf_key in settings
    replication = settings.get(rf_key, INTERNAL_DEFAULTS[rf_key])
    min_isr = settings.get(isr_key, INTERNAL_DEFAULTS[isr_key]) if isr_key else None
    live = live_brokers(meta)
    topic = next((t for t in meta.topics if t.name == name), None)
    if topic is None:
        asked = next((t for t in answer.topics if t.name == name), None)
        if asked is not None and asked.error_code == 0:
            topic = asked  # there, though the full listing left it out
    if topic is None:
        # Not listed: absent where the broker said so by name; else not visible to this principal, or not asked.
        exists = False if asked is not None and asked.error_code == _UNKNOWN_TOPIC else None
        return InternalTopic(name=name, exists=exists, partitions=settings.get(count_key, INTERNAL_DEFAULTS[count_key]),
                             live_brokers=live, replication_factor=replication, min_isr=min_isr, settings_read=read)
    offline = tuple(p.partition for p in topic.partitions if _leaderless(p))
    under = tuple(p.partition for p in topic.partitions
                  if p.leader >= 0 and min_isr is not None and len(p.isrs) < min_isr) if isr_key and read else ()
    return InternalTopic(name=name, exists=True, partitions=len(topic.partitions), live_brokers=live,
                         replication_factor=replication, min_isr=min_isr, settings_read=read, offline=offline,
                         under_min_isr=under)


def _coordinator(kind: CoordinatorKind, reply: CoordinatorReply, meta: ClusterMetadata, topic: InternalTopic,
                 results: Sequence[EndpointResult]) -> Coordinator:
    partition = partition_for(reply.key, topic.partitions) if topic.partitions > 0 else None
    leader = None
    listed = next((t for t in meta.topics if t.name == topic.name), None)
    if listed is not None and partition is not None:
        leader = next((p.leader for p in listed.partitions if p.partition == partition and p.leader >= 0), None)
    error = reply_error(reply)
    if error is not None or reply.node_id < 0:
        return Coordinator(kind=kind, key=reply.key, partition=partition, partition_leader=leader,
                           error=error or "no coordinator named")
    endpoint = format_hostport(reply.host, reply.port)
    row = endpoint_row(results, reply.node_id, endpoint)
    status = row.status if row is not None else None
    return Coordinator(kind=kind, key=reply.key, partition=partition, partition_leader=leader, node_id=reply.node_id,
                       endpoint=endpoint, status=status)


def _leaderless(p: PartitionInfo) -> bool:
    """No leader: a partition whose leader lacks this listener (LISTENER_NOT_FOUND) has one, up and serving the
    clients of its other listeners; the listener gap is that partition's finding.
    """
    return p.leader < 0 and p.error_code != LISTENER_NOT_FOUND


def _named(name: str, topic: TopicInfo | None) -> NamedTopic:
    if topic is None:
        return NamedTopic(name=name, status="error", error="the broker's answer did not mention it")
    if topic.error_code == _UNKNOWN_TOPIC:
        return NamedTopic(name=name, status="not_found", error="UNKNOWN_TOPIC_OR_PARTITION")
    if topic.error_code == _TOPIC_DENIED:
        return NamedTopic(name=name, status="not_authorized", error="TOPIC_AUTHORIZATION_FAILED")
    leaderless = tuple(p.partition for p in topic.partitions if _leaderless(p))
    if topic.error_code not in (0, 5):  # LEADER_NOT_AVAILABLE is a leaderless topic, said by partition below
        return NamedTopic(name=name, status="error", error=error_name(topic.error_code))
    status: NamedTopicStatus = "no_leader" if leaderless or not topic.partitions else "ok"
    return NamedTopic(name=name, status=status, partitions=len(topic.partitions), leaderless=leaderless)
