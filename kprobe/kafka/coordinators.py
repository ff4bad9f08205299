"""The application's questions, asked on the bootstrap connection after its Metadata answer.

Which broker coordinates the user's group or transactional id (FindCoordinator), the settings the
internal topics are created with (DescribeConfigs), and named topics the full listing lacked
(Metadata by name, so that the broker says why: unknown, or not authorised). Each is asked only
when there is something to learn: a healthy cluster probed without an application named costs
nothing here. A failure is recorded in the answer, never raised: the bootstrap answered, and what
it said of the cluster stands.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kprobe.kafka import codec
from kprobe.kafka.coordinator_codec import (
    BATCHED_FROM,
    KEY_GROUP,
    KEY_TRANSACTION,
    LOAD_IN_PROGRESS,
    NOT_AVAILABLE,
    UNSUPPORTED_VERSION,
    decode_find_coordinator,
    decode_heartbeat_error,
    encode_empty_heartbeat,
    encode_find_coordinator,
    find_coordinator_version,
    partition_for,
)
from kprobe.kafka.wire import (
    API_CONSUMER_GROUP_HEARTBEAT,
    API_FIND_COORDINATOR,
    API_SHARE_GROUP_HEARTBEAT,
    WireError,
    is_flexible,
)
from kprobe.models import (
    ASKED_SETTINGS,
    INTERNAL_DEFAULTS,
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    SETTINGS_PREFIX,
    TRANSACTIONS_TOPIC,
    ApplicationAnswer,
    ApplicationQuestions,
    ClusterMetadata,
    CoordinatorReply,
    internal_trouble,
    live_brokers,
)

if TYPE_CHECKING:
    from kprobe.kafka.connection import KafkaConnection

_PASSING = (LOAD_IN_PROGRESS, NOT_AVAILABLE)


def ask_application(conn: KafkaConnection, meta: ClusterMetadata, node_id: int | None,
                    questions: ApplicationQuestions | None) -> ApplicationAnswer | None:
    """The application's answers on an open connection that has just answered Metadata; None if none was needed."""
    questions = questions or ApplicationQuestions()
    listed = {t.name for t in meta.topics}
    by_name = [t for t in (*questions.topics, *INTERNAL_TOPICS) if t not in listed]
    coordinators = bool(questions.groups or questions.transactional_ids or questions.share_groups)
    need_settings = coordinators or bool(questions.client_rack) or internal_trouble(meta)
    if not (need_settings or by_name or questions.group_protocol == "consumer"):
        return None
    errors: list[str] = []
    settings: dict[str, str] = {}
    settings_error: str | None = None
    topics: tuple = ()
    try:
        if by_name:
            # Without auto-creation: a diagnostic creates nothing (the broker answers UNKNOWN_TOPIC_OR_PARTITION).
            topics = conn.metadata(list(dict.fromkeys(by_name))).topics
        if need_settings:
            settings, settings_error = _settings(conn, node_id, meta)
        groups = _find(conn, KEY_GROUP, questions.groups, errors, _settles(meta, settings, OFFSETS_TOPIC))
        transactions = _find(conn, KEY_TRANSACTION, questions.transactional_ids, errors,
                             _settles(meta, settings, TRANSACTIONS_TOPIC))
        # A share group's members heartbeat to its group coordinator, found as any group's (key type SHARE is
        # the brokers' own, for share-partition state: "group:topicId:partition" keys).
        shares = _find(conn, KEY_GROUP, questions.share_groups, errors, _settles(meta, settings, OFFSETS_TOPIC))
        consumer = (_protocol(conn, API_CONSUMER_GROUP_HEARTBEAT) if questions.group_protocol == "consumer"
                    else None)
        share = _protocol(conn, API_SHARE_GROUP_HEARTBEAT) if questions.share_groups else None
    except WireError as exc:
        errors.append(str(exc))
        groups = transactions = shares = ()
        consumer = share = None
    return ApplicationAnswer(groups=groups, transactions=transactions, shares=shares, consumer_protocol=consumer,
                             share_protocol=share, settings=settings, settings_error=settings_error, topics=topics,
                             errors=tuple(errors))


_PROTOCOLS = {
    API_CONSUMER_GROUP_HEARTBEAT: ("ConsumerGroupHeartbeat", "Kafka 3.7 and later (GA in 4.0)",
                                   "group.coordinator.rebalance.protocols lacks consumer"),
    API_SHARE_GROUP_HEARTBEAT: ("ShareGroupHeartbeat", "Kafka 4.0 and later",
                                "share groups are not enabled: group.share.enable=true in Kafka 4.0 and 4.1, the "
                                "share.version feature later"),
}


def _protocol(conn: KafkaConnection, api_key: int) -> str:
    """"ok" where the brokers take the heartbeat's protocol, else why not (an empty group's heartbeat tells)."""
    name, since, off = _PROTOCOLS[api_key]
    if api_key not in conn.api_versions:
        return f"the broker offers no {name} ({since})"
    version = conn.api_versions[api_key][1]
    reader = conn.request(api_key, version, encode_empty_heartbeat(api_key, version), is_flexible(api_key, version))
    code, _ = decode_heartbeat_error(reader)
    return f"the broker answers {name} with UNSUPPORTED_VERSION: {off}" if code == UNSUPPORTED_VERSION else "ok"


def _settings(conn: KafkaConnection, node_id: int | None, meta: ClusterMetadata) -> tuple[dict[str, str], str | None]:
    """The internal topics' broker settings from the broker on this connection: (settings, why not read)."""
    if codec.API_DESCRIBE_CONFIGS not in conn.api_versions:
        return {}, "the broker does not offer DescribeConfigs"
    ask = node_id if node_id is not None else (meta.brokers[0].node_id if meta.brokers else 0)
    for _ in range(2):  # a guess at the node answered "expected N": ask N
        code, message, configs = conn.describe_broker(ask, ASKED_SETTINGS)
        if code == 0:
            return {k: v for k, v in configs.items() if k in ASKED_SETTINGS and v is not None}, None
        answered, why = codec.node_from_describe(ask, code, message, configs)
        if answered is None or answered == ask:
            return {}, why or f"DescribeConfigs answered {codec.error_name(code)}"
        ask = answered
    return {}, "the broker did not say which node it is"


def _settles(meta: ClusterMetadata, settings: dict[str, str], topic: str) -> Callable[[str], bool]:
    """Whether a key's missing coordinator is a moment's state worth waiting out, as a client does.

    A first lookup has the brokers create the internal topic, and a new leader loads its partition:
    both answer COORDINATOR_NOT_AVAILABLE (or _LOAD_IN_PROGRESS) for a moment, and clients retry. A
    topic that cannot be created, or a partition without a leader, answers so for good: asking again
    would only spend the run's time.
    """
    prefix = SETTINGS_PREFIX[topic]
    listed = next((t for t in meta.topics if t.name == topic), None)
    if listed is None:
        needed = settings.get(f"{prefix}.replication.factor", str(INTERNAL_DEFAULTS[f"{prefix}.replication.factor"]))
        creatable = needed.isdigit() and live_brokers(meta) >= int(needed)
        return lambda key: creatable
    leaders = {p.partition: p.leader for p in listed.partitions}
    return lambda key: leaders.get(partition_for(key, len(leaders)), -1) >= 0 if leaders else False


def _find(conn: KafkaConnection, key_type: int, keys: Sequence[str], errors: list[str],
          settles: Callable[[str], bool]) -> tuple[CoordinatorReply, ...]:
    """FindCoordinator for `keys` of one type: all at once from v4, one by one before; a passing
    COORDINATOR_NOT_AVAILABLE asked again, within the request timeout, where `settles` says it passes.
    """
    if not keys:
        return ()
    version = find_coordinator_version(conn.api_versions, key_type)
    what = "group" if key_type == KEY_GROUP else "transactional id"
    if version is None:
        low, high = conn.api_versions.get(API_FIND_COORDINATOR, (0, -1))
        errors.append(f"the broker offers FindCoordinator v{low}-v{high}, none of which can look up a {what}")
        return ()
    replies = ask_coordinators(conn, version, key_type, keys)
    end = time.monotonic() + conn.timeout
    pause = 0.1
    while True:
        waiting = [k for k, r in replies.items() if r.error_code in _PASSING and settles(k)]
        if not waiting or time.monotonic() + pause > min(end, conn.deadline):
            return tuple(replies[k] for k in keys)
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
        replies.update(ask_coordinators(conn, version, key_type, waiting))


def ask_coordinators(conn: KafkaConnection, version: int, key_type: int,
                     keys: Sequence[str]) -> dict[str, CoordinatorReply]:
    """One FindCoordinator round (a request per key before v4): each key's reply, by key."""
    batches = [list(keys)] if version >= BATCHED_FROM else [[k] for k in keys]
    replies: dict[str, CoordinatorReply] = {}
    for batch in batches:
        reader = conn.request(API_FIND_COORDINATOR, version, encode_find_coordinator(version, key_type, batch),
                              is_flexible(API_FIND_COORDINATOR, version))
        replies.update((r.key, r) for r in decode_find_coordinator(reader, version, batch))
    return replies
