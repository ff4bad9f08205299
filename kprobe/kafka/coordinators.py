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
    API_FIND_COORDINATOR,
    BATCHED_FROM,
    KEY_GROUP,
    KEY_TRANSACTION,
    LOAD_IN_PROGRESS,
    NOT_AVAILABLE,
    decode_find_coordinator,
    encode_find_coordinator,
    find_coordinator_version,
    is_flexible,
    partition_for,
)
from kprobe.kafka.wire import WireError
from kprobe.models import (
    INTERNAL_DEFAULTS,
    INTERNAL_SETTINGS,
    INTERNAL_TOPICS,
    OFFSETS_TOPIC,
    TRANSACTIONS_TOPIC,
    ApplicationAnswer,
    ApplicationQuestions,
    ClusterMetadata,
    CoordinatorReply,
    internal_trouble,
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
    coordinators = bool(questions.groups or questions.transactional_ids)
    need_settings = coordinators or internal_trouble(meta)
    if not (need_settings or by_name):
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
    except WireError as exc:
        errors.append(str(exc))
        groups = transactions = ()
    return ApplicationAnswer(groups=groups, transactions=transactions, settings=settings,
                             settings_error=settings_error, topics=topics, errors=tuple(errors))


def _settings(conn: KafkaConnection, node_id: int | None, meta: ClusterMetadata) -> tuple[dict[str, str], str | None]:
    """The internal topics' broker settings from the broker on this connection: (settings, why not read)."""
    if codec.API_DESCRIBE_CONFIGS not in conn.api_versions:
        return {}, "the broker does not offer DescribeConfigs"
    ask = node_id if node_id is not None else (meta.brokers[0].node_id if meta.brokers else 0)
    for _ in range(2):  # a guess at the node answered "expected N": ask N
        code, message, configs = conn.describe_broker(ask, INTERNAL_SETTINGS)
        if code == 0:
            return {k: v for k, v in configs.items() if k in INTERNAL_SETTINGS and v is not None}, None
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
    prefix = "offsets.topic" if topic == OFFSETS_TOPIC else "transaction.state.log"
    listed = next((t for t in meta.topics if t.name == topic), None)
    if listed is None:
        needed = settings.get(f"{prefix}.replication.factor", str(INTERNAL_DEFAULTS[f"{prefix}.replication.factor"]))
        creatable = needed.isdigit() and len(meta.brokers) >= int(needed)
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
                              is_flexible(version))
        replies.update((r.key, r) for r in decode_find_coordinator(reader, version, batch))
    return replies
