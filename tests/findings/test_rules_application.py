"""The application's view (kprobe/findings/application.py), proven on plain data.

A client that reaches every partition leader can still hang: its group's or transactional id's
coordinator is the leader of one partition of `__consumer_offsets` or `__transaction_state`, which
may not exist (a single broker left at Kafka's default replication factor of 3), may have no leader
(the broker holding it stopped), may be short of in-sync replicas, or may be led by a broker whose
endpoint fails from here. Each row builds what the bootstrap connection answered (its Metadata, then
the coordinators, the internal topics' settings and the topics asked by name: an ApplicationAnswer)
and has kprobe.probe.application.judge_application turn it into the report's application section,
as the probe does, so the rows prove the judging (which partition a key hashes to, which settings
stand where none could be read) as well as the rules.

The shapes are the ones users meet, measured against Kafka 4.1.1 brokers: the Compose single broker
left at Kafka's defaults, three brokers with `offsets.topic.replication.factor=1` and one stopped, a
coordinator on a broken listener, a SASL principal that may describe nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from observations import Case, answers_as, boot, case, check, endpoint, params

from kprobe.models import (
    OFFSETS_TOPIC,
    RACK_AWARE,
    TRANSACTIONS_TOPIC,
    Application,
    ApplicationAnswer,
    ApplicationQuestions,
    Coordinator,
    CoordinatorReply,
    InternalTopic,
    PartitionInfo,
    Protocol,
    TopicInfo,
)
from kprobe.probe.application import judge_application
from kprobe.records import replace

ONE = [(1, "192.0.2.10", 9092)]
THREE = [(1, "192.0.2.11", 9092), (2, "192.0.2.12", 9092), (3, "192.0.2.13", 9092)]
TWO_LEFT = THREE[:2]  # broker 3 stopped: the metadata lists live brokers only
# What the consistency rules say of a stopped broker's replicas: Metadata lists a stopped broker and one without
# the listener alike (neither among the brokers, both among a partition's offline replicas).
STOPPED_3 = ("LISTENER_NOT_FOUND", "warning", 3, None)
OFFSETS_OFFLINE = ("OFFSETS_PARTITIONS_OFFLINE", "error", None, None)
NO_COORDINATOR = ("COORDINATOR_NOT_AVAILABLE", "error", None, None)
# Broker 3's listener refuses, and it coordinates the row's key.
REFUSED_3 = [("ADVERTISED_REFUSED", "error", 3, "192.0.2.13:9092"),
             ("COORDINATOR_UNREACHABLE", "error", 3, "192.0.2.13:9092")]

# The brokers' settings as DescribeConfigs gives them, at Kafka's defaults.
DEFAULTS = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "50",
            "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
            "transaction.state.log.num.partitions": "50"}
# Replication factor 1 for both internal topics, as the Compose files that work on one broker set them.
SINGLE = {**DEFAULTS, "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
          "transaction.state.log.min.isr": "1"}
RACKS = {1: "a", 2: "b", 3: "c"}
# Kafka 4.1.1's ApiVersions answer for the requests clients send (measured on the lab's broker).
KAFKA_41 = (("Produce", 0, 13), ("Fetch", 4, 18), ("ListOffsets", 1, 10), ("Metadata", 0, 13), ("OffsetCommit", 2, 9),
            ("OffsetFetch", 1, 9), ("FindCoordinator", 0, 6), ("JoinGroup", 0, 9), ("Heartbeat", 0, 4),
            ("LeaveGroup", 0, 5), ("SyncGroup", 0, 5), ("DescribeGroups", 0, 6), ("ListGroups", 0, 5),
            ("ApiVersions", 0, 4), ("InitProducerId", 0, 5))
NOT_AUTHORISED = "not authorised to describe broker configs (CLUSTER_AUTHORIZATION_FAILED)"

# Keys whose partitions were computed by Java's String.hashCode (`Utils.abs(hash) % partitions`), not by kprobe:
# billing-N lands on partition N of 3; payments-tx hashes negative (-1539523292): partition 2 of 3, 42 of 50
# (Python's own % would say 8); orders-app: partition 5 of 50.
ORDERS_APP, PAYMENTS = "orders-app", "payments-tx"


def internal(name: str, *partitions: tuple[int, Sequence[int], Sequence[int]]) -> TopicInfo:
    """An internal topic from (leader, replicas, in-sync replicas) per partition, numbered in order.

    A partition without a leader (-1) carries LEADER_NOT_AVAILABLE, as Kafka 4.1 answers it.
    """
    return TopicInfo(name, tuple(
        PartitionInfo(partition=i, leader=leader, replicas=tuple(replicas), isrs=tuple(isrs),
                      error_code=5 if leader < 0 else 0)
        for i, (leader, replicas, isrs) in enumerate(partitions)), is_internal=True)


def spread(name: str) -> TopicInfo:
    """Three partitions on three brokers, replication factor 3, all in sync: partition N is led by broker N+1."""
    return internal(name, *((n, (n, n % 3 + 1, (n + 1) % 3 + 1), (n, n % 3 + 1, (n + 1) % 3 + 1)) for n in (1, 2, 3)))


def user_topic(name: str, *leaders: int) -> TopicInfo:
    """An application's topic, one replica per partition, from each partition's leader (-1: none)."""
    return TopicInfo(name, tuple(
        PartitionInfo(partition=i, leader=leader, replicas=(leader,) if leader >= 0 else (3,),
                      isrs=(leader,) if leader >= 0 else (3,), error_code=5 if leader < 0 else 0)
        for i, leader in enumerate(leaders)))


def missing(name: str) -> TopicInfo:
    """A topic asked by name that does not exist, to a principal that may describe it."""
    return TopicInfo(name, (), error_code=3)


def denied(name: str) -> TopicInfo:
    """A topic asked by name that this principal may not describe."""
    return TopicInfo(name, (), error_code=29)


def found(key: str, node_id: int, host: str, port: int = 9092) -> CoordinatorReply:
    """A FindCoordinator answer that names the coordinator."""
    return CoordinatorReply(key=key, node_id=node_id, host=host, port=port, error_code=0)


def refused(key: str, code: int = 15) -> CoordinatorReply:
    """A FindCoordinator answer with an error instead (COORDINATOR_NOT_AVAILABLE unless told), as Kafka sends it."""
    return CoordinatorReply(key=key, node_id=-1, host="", port=-1, error_code=code)


HEALTHY = (spread(OFFSETS_TOPIC), spread(TRANSACTIONS_TOPIC))
# Broker 3 stopped with both internal topics at replication factor 1: partition 2 of each was on broker 3.
ONE_REPLICA_EACH = ((1, (1,), (1,)), (2, (2,), (2,)))
OFFSETS_ONE_OFFLINE = internal(OFFSETS_TOPIC, *ONE_REPLICA_EACH, (-1, (3,), (3,)))
TRANSACTIONS_ONE_OFFLINE = internal(TRANSACTIONS_TOPIC, *ONE_REPLICA_EACH, (-1, (3,), (3,)))
# The transaction log with partition 1's followers out of sync: only its leader, broker 2, is.
TRANSACTIONS_SHORT = internal(TRANSACTIONS_TOPIC, (1, (1, 2, 3), (1, 2, 3)), (2, (2, 3, 1), (2,)),
                              (3, (3, 1, 2), (3, 1, 2)))


def probed(
    name: str, advertises: Sequence[tuple[int, str, int]], expect, *, topics: Sequence[TopicInfo] = HEALTHY,
    answer: ApplicationAnswer | None = None, refused_node: int | None = None, group: str | None = None,
    transactional_id: str | None = None, named: Sequence[str] = (), protocol: Protocol | None = None,
    endpoints=None, says=(), never_says=(), group_protocol: str | None = None, share_group: str | None = None,
    client_rack: str | None = None, racks: dict[int, str] | None = None, pinned: str | None = None,
    api_versions: tuple[tuple[str, int, int], ...] = (),
) -> Case:
    """A row from one bootstrap's answers, its application section judged as the probe judges it.

    The bootstrap is the first advertised broker; each advertised endpoint connects, except
    `refused_node`'s (or `endpoints`, given whole).
    """
    node, host, port = advertises[0]
    address = f"{host}:{port}"
    b = boot(address, connected_to=host, advertises=advertises, node_id=node, topics=topics, application=answer,
             protocol=protocol)
    if api_versions:
        b = replace(b, api_versions=api_versions)
    if racks and b.metadata is not None:  # broker.rack, as the Metadata answer carries it
        b = replace(b, metadata=replace(b.metadata, brokers=tuple(replace(x, rack=racks.get(x.node_id))
                                                                  for x in b.metadata.brokers)))
    if endpoints is None:
        endpoints = [endpoint(n, h, p, address, connect="refused" if n == refused_node else "ok")
                     for n, h, p in advertises]
    questions = ApplicationQuestions(groups=(group,) if group else (),
                                     transactional_ids=(transactional_id,) if transactional_id else (),
                                     topics=tuple(named), group_protocol=group_protocol,
                                     share_groups=(share_group,) if share_group else (), client_rack=client_rack,
                                     pinned=pinned)
    return case(name, [b], endpoints, expect, says=says, never_says=never_says,
                application=judge_application([b], endpoints, questions))


def absent(settings: dict[str, str] | None = None, *, error: str | None = None, **kw) -> ApplicationAnswer:
    """The answer where neither internal topic exists yet: both asked by name, UNKNOWN_TOPIC_OR_PARTITION."""
    return ApplicationAnswer(topics=(missing(OFFSETS_TOPIC), missing(TRANSACTIONS_TOPIC), *kw.pop("topics", ())),
                             settings=settings or {}, settings_error=error, **kw)


UNCREATABLE_ON_ONE = [("OFFSETS_TOPIC_UNCREATABLE", "error", None, None),
                      ("TRANSACTION_LOG_UNCREATABLE", "warning", None, None)]

CASES: list[Case] = [
    # -- OFFSETS_TOPIC_UNCREATABLE / TRANSACTION_LOG_UNCREATABLE: the single broker left at Kafka's defaults -----
    probed(
        # The commonest single-broker mistake: consumers in a group read nothing, producers work.
        "one-broker-internal-topics-at-kafkas-replication-factor", ONE, UNCREATABLE_ON_ONE, topics=(),
        answer=absent(DEFAULTS),
        says=[("OFFSETS_TOPIC_UNCREATABLE", None, "message", "offsets.topic.replication.factor=3 asks for more "
               "replicas than the 1 live broker(s)"),
              ("OFFSETS_TOPIC_UNCREATABLE", None, "message", "group coordinator is unavailable"),
              ("OFFSETS_TOPIC_UNCREATABLE", None, "fix", "Set offsets.topic.replication.factor=1 on every broker "
               "(KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR in a Compose file)"),
              ("TRANSACTION_LOG_UNCREATABLE", None, "message", "transaction.state.log.replication.factor=3"),
              ("TRANSACTION_LOG_UNCREATABLE", None, "message", "initTransactions()"),
              # min.isr 2 above the one broker too: lowering only the replication factor would not do.
              ("TRANSACTION_LOG_UNCREATABLE", None, "fix", "Set transaction.state.log.replication.factor=1 and "
               "transaction.state.log.min.isr=1 on every broker (KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR")],
        never_says=[("OFFSETS_TOPIC_UNCREATABLE", None, "message", "Kafka's default")],
    ),
    probed(
        # A principal that may not DescribeConfigs: Kafka's defaults stand in, and the finding says so.
        "one-broker-settings-unreadable-assumes-kafkas-default", ONE, UNCREATABLE_ON_ONE, topics=(),
        answer=absent(error=NOT_AUTHORISED),
        says=[("OFFSETS_TOPIC_UNCREATABLE", None, "message", "offsets.topic.replication.factor=3 (Kafka's default: "
               "the brokers' setting could not be read from here)"),
              ("TRANSACTION_LOG_UNCREATABLE", None, "message", "transaction.state.log.replication.factor=3 (Kafka's "
               "default")],
    ),
    probed(
        "one-broker-named-group-finds-no-coordinator", ONE,
        [*UNCREATABLE_ON_ONE, NO_COORDINATOR], topics=(),
        answer=absent(DEFAULTS, groups=(refused(ORDERS_APP),)), group=ORDERS_APP,
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "group 'orders-app'"),
              ("COORDINATOR_NOT_AVAILABLE", None, "message", "answered FindCoordinator with COORDINATOR_NOT_AVAILABLE"),
              ("COORDINATOR_NOT_AVAILABLE", None, "message", "partition 5 of __consumer_offsets, which does not exist "
               "and cannot be created (offsets.topic.replication.factor=3, 1 live broker(s))"),
              ("COORDINATOR_NOT_AVAILABLE", None, "fix", "Set offsets.topic.replication.factor=1")],
    ),
    probed(
        # A transactional id named: transactions that cannot work are now the user's own error.
        "one-broker-named-transactional-id-makes-the-log-an-error", ONE,
        [("OFFSETS_TOPIC_UNCREATABLE", "error", None, None), ("TRANSACTION_LOG_UNCREATABLE", "error", None, None),
         NO_COORDINATOR], topics=(),
        answer=absent(DEFAULTS, transactions=(refused(PAYMENTS),)), transactional_id=PAYMENTS,
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "transactional id 'payments-tx'"),
              ("COORDINATOR_NOT_AVAILABLE", None, "message", "partition 42 of __transaction_state, which does not "
               "exist and cannot be created (transaction.state.log.replication.factor=3"),
              ("COORDINATOR_NOT_AVAILABLE", None, "message", "times out in initTransactions()")],
    ),
    probed(
        "three-brokers-missing-offsets-topic-can-be-created", THREE, [], topics=(), answer=absent(DEFAULTS),
    ),
    probed(
        # The first FindCoordinator has the brokers create the topic; the client waits it out.
        "three-brokers-named-group-while-its-offsets-topic-is-being-created", THREE,
        [NO_COORDINATOR], topics=(),
        answer=absent(DEFAULTS, groups=(refused("billing-0"),)), group="billing-0",
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "which did not exist yet: this lookup has the brokers "
               "create it"),
              ("COORDINATOR_NOT_AVAILABLE", None, "fix", "Run again in a few seconds")],
    ),
    probed(
        # A principal that may describe neither internal topic: whether they exist is not known, so nothing is said,
        # even on one broker, where Kafka's defaults would not let them be created.
        "one-broker-internal-topics-invisible-to-the-principal", ONE, [], topics=(user_topic("orders", 1),),
        protocol="SASL_SSL",
        answer=ApplicationAnswer(topics=(denied(OFFSETS_TOPIC), denied(TRANSACTIONS_TOPIC)),
                                 settings_error=NOT_AUTHORISED),
    ),
    # -- OFFSETS_PARTITIONS_OFFLINE: three brokers at replication factor 1, one stopped ---------------------------
    probed(
        "a-third-of-the-offsets-partitions-offline", TWO_LEFT, [OFFSETS_OFFLINE, STOPPED_3],
        topics=(OFFSETS_ONE_OFFLINE, internal(TRANSACTIONS_TOPIC, *ONE_REPLICA_EACH, (1, (1,), (1,)))),
        answer=ApplicationAnswer(settings=SINGLE),
        says=[("OFFSETS_PARTITIONS_OFFLINE", None, "message", "1 of 3 partitions of __consumer_offsets have no leader "
               "(2)"),
              ("OFFSETS_PARTITIONS_OFFLINE", None, "message", "(about 1 of 3 of them)"),
              ("OFFSETS_PARTITIONS_OFFLINE", None, "fix", "abs(hash(key)) % 3"),
              ("OFFSETS_PARTITIONS_OFFLINE", None, "fix", "kprobe probe --group GROUP says whether a given one is "
               "affected"),
              ("OFFSETS_PARTITIONS_OFFLINE", None, "fix", "offsets.topic.replication.factor of 3 or more")],
    ),
    probed(
        "offline-offsets-partition-holds-the-named-group", TWO_LEFT,
        [OFFSETS_OFFLINE, NO_COORDINATOR, STOPPED_3],
        topics=(OFFSETS_ONE_OFFLINE, internal(TRANSACTIONS_TOPIC, *ONE_REPLICA_EACH, (1, (1,), (1,)))),
        answer=ApplicationAnswer(settings=SINGLE, groups=(refused("billing-2"),)), group="billing-2",
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "partition 2 of __consumer_offsets, which has no leader"),
              ("COORDINATOR_NOT_AVAILABLE", None, "fix", "Bring back the brokers"),
              ("OFFSETS_PARTITIONS_OFFLINE", None, "fix", "(for 'billing-2', see its coordinator's finding)")],
    ),
    probed(
        # Another group, whose partition broker 1 leads, works: only the share offline is said.
        "named-group-on-a-led-offsets-partition-works", TWO_LEFT, [OFFSETS_OFFLINE, STOPPED_3],
        topics=(OFFSETS_ONE_OFFLINE, internal(TRANSACTIONS_TOPIC, *ONE_REPLICA_EACH, (1, (1,), (1,)))),
        answer=ApplicationAnswer(settings=SINGLE, groups=(found("billing-0", 1, "192.0.2.11"),)), group="billing-0",
    ),
    probed(
        # Broker 3 is up but lacks the listener this bootstrap reached (the lab's PARTIAL): Kafka answers its
        # partitions with leader -1 and LISTENER_NOT_FOUND. They have a leader; the listener gap is the finding,
        # and a real client fails on broker 3's partitions alone, so no internal topic is said to be offline.
        "offsets-partition-led-by-a-broker-without-the-listener-is-not-offline", TWO_LEFT,
        [("LISTENER_NOT_FOUND", "error", 3, None)],
        topics=(TopicInfo(OFFSETS_TOPIC, (
            PartitionInfo(partition=0, leader=1, replicas=(1,), isrs=(1,)),
            PartitionInfo(partition=1, leader=2, replicas=(2,), isrs=(2,)),
            PartitionInfo(partition=2, leader=-1, replicas=(3,), isrs=(3,), error_code=72)), is_internal=True),
            internal(TRANSACTIONS_TOPIC, *ONE_REPLICA_EACH, (1, (1,), (1,))),
            TopicInfo("orders", (PartitionInfo(partition=0, leader=-1, replicas=(3,), isrs=(3,), error_code=72),))),
        answer=ApplicationAnswer(settings=SINGLE), named=("orders",),
        says=[("LISTENER_NOT_FOUND", 3, "message", "__consumer_offsets-2"),
              ("LISTENER_NOT_FOUND", 3, "message", "orders-0")],
    ),
    # -- TRANSACTION_LOG_OFFLINE ------------------------------------------------------------------------------------
    probed(
        "transaction-log-partition-offline-without-a-transactional-id", TWO_LEFT,
        [("TRANSACTION_LOG_OFFLINE", "warning", None, None), STOPPED_3],
        topics=(internal(OFFSETS_TOPIC, *ONE_REPLICA_EACH, (1, (1,), (1,))), TRANSACTIONS_ONE_OFFLINE),
        answer=ApplicationAnswer(settings=SINGLE),
        says=[("TRANSACTION_LOG_OFFLINE", None, "message", "1 of 3 partitions of __transaction_state have no leader"),
              ("TRANSACTION_LOG_OFFLINE", None, "message", "the transactional ids whose key hashes there"),
              ("TRANSACTION_LOG_OFFLINE", None, "fix", "kprobe probe --transactional-id ID")],
    ),
    probed(
        "transaction-log-partition-offline-holds-the-transactional-id", TWO_LEFT,
        [("TRANSACTION_LOG_OFFLINE", "error", None, None), NO_COORDINATOR, STOPPED_3],
        topics=(internal(OFFSETS_TOPIC, *ONE_REPLICA_EACH, (1, (1,), (1,))), TRANSACTIONS_ONE_OFFLINE),
        answer=ApplicationAnswer(settings=SINGLE, transactions=(refused(PAYMENTS),)), transactional_id=PAYMENTS,
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "partition 2 of __transaction_state, which has no leader"),
              ("TRANSACTION_LOG_OFFLINE", None, "fix", "(for 'payments-tx', see its coordinator's finding)")],
    ),
    # -- TRANSACTION_LOG_UNDER_MIN_ISR: a topic short of in-sync replicas, and one that would be created so ----------
    probed(
        "transaction-log-partition-below-its-min-isr", THREE,
        [("TRANSACTION_LOG_UNDER_MIN_ISR", "warning", None, None)],
        topics=(spread(OFFSETS_TOPIC), TRANSACTIONS_SHORT), answer=ApplicationAnswer(settings=DEFAULTS),
        says=[("TRANSACTION_LOG_UNDER_MIN_ISR", None, "message", "1 of 3 partitions of __transaction_state have fewer "
               "in-sync replicas than transaction.state.log.min.isr=2 (1)"),
              ("TRANSACTION_LOG_UNDER_MIN_ISR", None, "message", "NOT_ENOUGH_REPLICAS")],
    ),
    probed(
        # Its coordinator, broker 3, works: the log's writes are what fail.
        "transaction-log-below-its-min-isr-with-a-transactional-id", THREE,
        [("TRANSACTION_LOG_UNDER_MIN_ISR", "error", None, None)], topics=(spread(OFFSETS_TOPIC), TRANSACTIONS_SHORT),
        answer=ApplicationAnswer(settings=DEFAULTS, transactions=(found(PAYMENTS, 3, "192.0.2.13"),)),
        transactional_id=PAYMENTS,
    ),
    probed(
        # Without the setting, a replica short of in sync proves nothing: a topic of one replica per partition is
        # what a cluster whose transaction settings were lowered together (as on one broker) makes.
        "transaction-log-short-of-replicas-with-min-isr-unread-says-nothing", ONE, [],
        topics=(internal(OFFSETS_TOPIC, *[(1, (1,), (1,))] * 3), internal(TRANSACTIONS_TOPIC, *[(1, (1,), (1,))] * 3)),
        answer=ApplicationAnswer(settings_error=NOT_AUTHORISED),
    ),
    probed(
        "transaction-log-would-be-created-below-its-min-isr", THREE,
        [("TRANSACTION_LOG_UNDER_MIN_ISR", "warning", None, None)], topics=(spread(OFFSETS_TOPIC),),
        answer=ApplicationAnswer(topics=(missing(TRANSACTIONS_TOPIC),),
                                 settings={**DEFAULTS, "transaction.state.log.replication.factor": "1"}),
        says=[("TRANSACTION_LOG_UNDER_MIN_ISR", None, "message", "will be created with "
               "transaction.state.log.replication.factor=1 but transaction.state.log.min.isr=2"),
              ("TRANSACTION_LOG_UNDER_MIN_ISR", None, "fix", "Set transaction.state.log.min.isr=1 "
               "(KAFKA_TRANSACTION_STATE_LOG_MIN_ISR in a Compose file)")],
    ),
    probed(
        "transaction-log-would-be-created-below-its-min-isr-with-a-transactional-id", THREE,
        [("TRANSACTION_LOG_UNDER_MIN_ISR", "error", None, None)], topics=(spread(OFFSETS_TOPIC),),
        answer=ApplicationAnswer(topics=(missing(TRANSACTIONS_TOPIC),),
                                 settings={**DEFAULTS, "transaction.state.log.replication.factor": "1"},
                                 transactions=(found(PAYMENTS, 3, "192.0.2.13"),)),
        transactional_id=PAYMENTS,
    ),
    # -- COORDINATOR_UNREACHABLE: the coordinator's own endpoint fails from here -------------------------------------
    probed(
        # billing-2's partition is broker 3's, whose listener refuses: the group cannot consume, billing-0 can.
        "named-group-coordinated-behind-a-refused-listener", THREE,
        REFUSED_3,
        answer=ApplicationAnswer(groups=(found("billing-2", 3, "192.0.2.13"),)), refused_node=3, group="billing-2",
        says=[("COORDINATOR_UNREACHABLE", 3, "message", "The coordinator of group 'billing-2' is broker 3 (the Java "
               "client logs it as id 2147483644), at 192.0.2.13:9092"),
              ("COORDINATOR_UNREACHABLE", 3, "message", "(unreachable; its own finding says why)"),
              ("COORDINATOR_UNREACHABLE", 3, "message", "consumers of group 'billing-2' cannot join"),
              ("COORDINATOR_UNREACHABLE", 3, "fix", "Fix broker 3's endpoint")],
    ),
    probed(
        "transactional-id-coordinated-behind-a-refused-listener", THREE,
        REFUSED_3,
        answer=ApplicationAnswer(transactions=(found(PAYMENTS, 3, "192.0.2.13"),)), refused_node=3,
        transactional_id=PAYMENTS,
        says=[("COORDINATOR_UNREACHABLE", 3, "message", "a producer with transactional id 'payments-tx' times out in "
               "initTransactions()"),
              ("COORDINATOR_UNREACHABLE", 3, "fix", "only the transactional ids whose partition another broker leads")],
    ),
    probed(
        # The endpoint connects, but broker 1 answers there: unusable all the same, and said in the table's word.
        "named-group-coordinator-endpoint-answered-by-another-broker", THREE,
        [("ENDPOINT_WRONG_BROKER", "error", 3, "192.0.2.13:9092"),
         ("COORDINATOR_UNREACHABLE", "error", 3, "192.0.2.13:9092")],
        answer=ApplicationAnswer(groups=(found("billing-2", 3, "192.0.2.13"),)), group="billing-2",
        endpoints=[*(endpoint(n, h, p, "192.0.2.11:9092") for n, h, p in THREE[:2]),
                   endpoint(3, "192.0.2.13", 9092, "192.0.2.11:9092", identity=answers_as(1, "192.0.2.13", THREE))],
        says=[("COORDINATOR_UNREACHABLE", 3, "message", "(unusable; its own finding says why)")],
    ),
    probed(
        "named-group-coordinated-by-a-working-broker-while-another-is-refused", THREE,
        [("ADVERTISED_REFUSED", "error", 3, "192.0.2.13:9092")],
        answer=ApplicationAnswer(groups=(found("billing-0", 1, "192.0.2.11"),)), refused_node=3, group="billing-0",
    ),
    probed(
        "healthy-named-group-and-transactional-id-give-nothing", THREE, [],
        answer=ApplicationAnswer(groups=(found("billing-1", 2, "192.0.2.12"),),
                                 transactions=(found(PAYMENTS, 3, "192.0.2.13"),)),
        group="billing-1", transactional_id=PAYMENTS,
    ),
    # -- COORDINATOR_NOT_AVAILABLE: refused for this principal -------------------------------------------------------
    probed(
        # The principal may not describe the group: no coordinator, whatever the topic; waiting is no fix.
        "named-group-not-authorised", THREE, [NO_COORDINATOR], protocol="SASL_SSL",
        answer=ApplicationAnswer(groups=(refused("billing-0", 30),)), group="billing-0",
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "GROUP_AUTHORIZATION_FAILED"),
              ("COORDINATOR_NOT_AVAILABLE", None, "message", "may not describe group 'billing-0'"),
              ("COORDINATOR_NOT_AVAILABLE", None, "fix", "--operation Read --group billing-0")],
        never_says=[("COORDINATOR_NOT_AVAILABLE", None, "fix", "Run again")],
    ),
    probed(
        "named-transactional-id-not-authorised", THREE, [NO_COORDINATOR],
        protocol="SASL_SSL", answer=ApplicationAnswer(transactions=(refused(PAYMENTS, 53),)), transactional_id=PAYMENTS,
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
              ("COORDINATOR_NOT_AVAILABLE", None, "fix", "--operation Write --transactional-id payments-tx")],
        never_says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "Its key lives in")],
    ),
    case(
        # Built whole: a coordinator whose key's partition is not known (no internal topic to place it in) says
        # what the broker answered, and no empty place.
        "coordinator-without-a-known-partition",
        [boot("192.0.2.11:9092", connected_to="192.0.2.11", advertises=THREE, node_id=1, topics=HEALTHY)],
        [endpoint(n, h, p, "192.0.2.11:9092") for n, h, p in THREE],
        [NO_COORDINATOR],
        application=Application(group="billing-0", coordinators=(
            Coordinator(kind="group", key="billing-0", error="COORDINATOR_NOT_AVAILABLE"),)),
        says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "answered FindCoordinator with COORDINATOR_NOT_AVAILABLE. "
               "So consumers of group 'billing-0'")],
        never_says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "lives in")],
    ),
    case(
        # Built whole: an offsets topic of zero partitions (not a shape a broker makes) places no key.
        "internal-topic-without-partitions-places-no-key",
        [boot("192.0.2.11:9092", connected_to="192.0.2.11", advertises=THREE, node_id=1, topics=HEALTHY)],
        [endpoint(n, h, p, "192.0.2.11:9092") for n, h, p in THREE],
        [NO_COORDINATOR],
        application=Application(group="g", internal_topics=(
            InternalTopic(name=OFFSETS_TOPIC, exists=True, partitions=0, live_brokers=3),),
            coordinators=(Coordinator(kind="group", key="g", error="COORDINATOR_LOAD_IN_PROGRESS"),)),
        never_says=[("COORDINATOR_NOT_AVAILABLE", None, "message", "lives in")],
    ),
    # -- TOPIC_*: the topics the application names (--topic) -------------------------------------------------------
    probed(
        "named-topic-does-not-exist", THREE, [("TOPIC_NOT_FOUND", "error", None, None)],
        answer=ApplicationAnswer(topics=(missing("orders"),)), named=["orders"],
        says=[("TOPIC_NOT_FOUND", None, "message", "Topic 'orders' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"),
              ("TOPIC_NOT_FOUND", None, "fix", "kafka-topics.sh --create --topic orders")],
    ),
    probed(
        "named-topic-not-authorised", THREE, [("TOPIC_NOT_AUTHORIZED", "error", None, None)], protocol="SASL_SSL",
        topics=(*HEALTHY, user_topic("public", 1)), answer=ApplicationAnswer(topics=(denied("payments"),)),
        named=["payments"],
        says=[("TOPIC_NOT_AUTHORIZED", None, "message", "may not describe topic 'payments' "
               "(TOPIC_AUTHORIZATION_FAILED)"),
              ("TOPIC_NOT_AUTHORIZED", None, "fix", "--topic payments")],
    ),
    probed(
        "named-topic-with-a-partition-without-leader", THREE, [("TOPIC_WITHOUT_LEADER", "error", None, None)],
        topics=(*HEALTHY, user_topic("orders", 1, -1, 2)), named=["orders"],
        says=[("TOPIC_WITHOUT_LEADER", None, "message", "Topic 'orders' has partitions without a leader (1)")],
    ),
    probed(
        "named-topic-with-no-leader-at-all", THREE, [("TOPIC_WITHOUT_LEADER", "error", None, None)],
        answer=ApplicationAnswer(topics=(TopicInfo("orders", (), error_code=5),)), named=["orders"],
        says=[("TOPIC_WITHOUT_LEADER", None, "message", "without a leader (all)")],
    ),
    probed(
        "named-topic-metadata-error", THREE, [("TOPIC_METADATA_ERROR", "error", None, None)],
        answer=ApplicationAnswer(topics=(TopicInfo("orders", (), error_code=-1),)), named=["orders"],
        says=[("TOPIC_METADATA_ERROR", None, "message", "topic 'orders' came with an error: UNKNOWN_SERVER_ERROR")],
    ),
    probed(
        "named-topic-the-broker-did-not-mention", THREE, [("TOPIC_METADATA_ERROR", "error", None, None)],
        answer=ApplicationAnswer(), named=["orders"],
        says=[("TOPIC_METADATA_ERROR", None, "message", "the broker's answer did not mention it")],
    ),
    probed(
        "named-topic-healthy-gives-nothing", THREE, [], topics=(*HEALTHY, user_topic("orders", 1, 2, 3)),
        named=["orders"],
    ),
    # -- NO_TOPICS_VISIBLE: a SASL principal that may describe nothing ---------------------------------------------
    probed(
        "sasl-principal-sees-no-topic-and-is-refused-the-internal-ones", THREE,
        [("NO_TOPICS_VISIBLE", "warning", None, None)], topics=(), protocol="SASL_SSL",
        answer=ApplicationAnswer(topics=(denied(OFFSETS_TOPIC), denied(TRANSACTIONS_TOPIC)),
                                 settings_error=NOT_AUTHORISED),
        says=[("NO_TOPICS_VISIBLE", None, "message", "lists no topic at all for this principal (192.0.2.11:9092)"),
              ("NO_TOPICS_VISIBLE", None, "message", "__consumer_offsets, __transaction_state answered "
               "TOPIC_AUTHORIZATION_FAILED"),
              ("NO_TOPICS_VISIBLE", None, "fix", "Grant this principal Describe")],
    ),
    probed(
        "sasl-principal-sees-no-topic-and-is-refused-its-own", THREE,
        [("NO_TOPICS_VISIBLE", "warning", None, None), ("TOPIC_NOT_AUTHORIZED", "error", None, None)], topics=(),
        protocol="SASL_PLAINTEXT", named=["orders"],
        answer=ApplicationAnswer(topics=(denied("orders"), denied(OFFSETS_TOPIC), denied(TRANSACTIONS_TOPIC)),
                                 settings_error=NOT_AUTHORISED),
    ),
    probed(
        # A new cluster: no topic yet, not even the internal ones, which this principal may describe (UNKNOWN, not
        # refused). Nothing hides anything, and three brokers can create both internal topics.
        "sasl-new-cluster-without-any-topic-yet-says-nothing", THREE, [], topics=(), protocol="SASL_SSL",
        answer=absent(DEFAULTS),
    ),
    probed(
        # Nothing asked by name (a report of another kind): an empty listing alone does not tell.
        "sasl-empty-listing-nothing-asked-says-nothing", THREE, [], topics=(), protocol="SASL_SSL",
    ),
    probed(
        # Bootstrapped through a listener broker 3 lacks: the answer lists brokers 1 and 2 alone, yet broker 3 is
        # in a partition's in-sync replicas, so three brokers serve and can create the offsets topic (RF 3).
        "listener-two-brokers-have-while-three-serve-can-create", TWO_LEFT, [("LISTENER_NOT_FOUND", "warning", 3, None)],
        topics=(user_topic("orders", 1), internal(TRANSACTIONS_TOPIC, (1, (1, 2, 3), (1, 2, 3)))),
        answer=ApplicationAnswer(topics=(missing(OFFSETS_TOPIC),), settings=DEFAULTS),
    ),
    # -- client.rack (KIP-392): which replica a consumer in a rack reads from ---------------------------------------
    probed(
        # Racks a, b, c; the leader in rack a names broker 2 (rack b) for a consumer in rack b, and broker 2's
        # endpoint refuses from here: the consumer reads nothing from that partition (measured: Java, librdkafka).
        "client-rack-reads-from-a-follower-whose-endpoint-fails", THREE,
        [*REFUSED_3[:1], ("FOLLOWER_FETCH_UNREACHABLE", "error", 3, "192.0.2.13:9092")],
        client_rack="c", racks=RACKS, refused_node=3, named=["orders"],
        topics=(*HEALTHY, TopicInfo("orders", (PartitionInfo(partition=0, leader=1, replicas=(1, 2, 3),
                                                             isrs=(1, 2, 3)),))),
        answer=ApplicationAnswer(settings={**DEFAULTS, "replica.selector.class": RACK_AWARE}),
        says=[("FOLLOWER_FETCH_UNREACHABLE", 3, "message", "client.rack=c reads 1 partition(s) from broker 3"),
              ("FOLLOWER_FETCH_UNREACHABLE", 3, "message", "orders-0 (leader 1)"),
              ("FOLLOWER_FETCH_UNREACHABLE", 3, "fix", "leave client.rack unset")],
    ),
    probed(
        # The same consumer in the leader's own rack reads from the leader: nothing new to say.
        "client-rack-in-the-leaders-rack-reads-the-leader", THREE, REFUSED_3[:1],
        client_rack="a", racks=RACKS, refused_node=3, named=["orders"],
        topics=(*HEALTHY, TopicInfo("orders", (PartitionInfo(partition=0, leader=1, replicas=(1, 2, 3),
                                                             isrs=(1, 2, 3)),))),
        answer=ApplicationAnswer(settings={**DEFAULTS, "replica.selector.class": RACK_AWARE}),
    ),
    probed(
        # An AWS zone name where the brokers name zone IDs.
        "client-rack-that-no-broker-is-in", THREE, [("CLIENT_RACK_MATCHES_NO_BROKER", "warning", None, None)],
        client_rack="us-east-1a", racks={1: "use1-az1", 2: "use1-az2", 3: "use1-az4"},
        answer=ApplicationAnswer(settings={**DEFAULTS, "replica.selector.class": RACK_AWARE}),
        says=[("CLIENT_RACK_MATCHES_NO_BROKER", None, "message", "use1-az1, use1-az2, use1-az4"),
              ("CLIENT_RACK_MATCHES_NO_BROKER", None, "fix", "zone ID")],
    ),
    probed(
        "client-rack-with-the-default-selector", THREE, [("FOLLOWER_FETCHING_OFF", "info", None, None)],
        client_rack="b", racks=RACKS,
        answer=ApplicationAnswer(settings={**DEFAULTS,
                                           "replica.selector.class": "org.apache.kafka.common.replica.LeaderSelector"}),
        says=[("FOLLOWER_FETCHING_OFF", None, "fix", RACK_AWARE)],
    ),
    # -- CLIENT_VERSIONS_REFUSED: librdkafka pinned below 0.10 against Kafka 4.1.1's ApiVersions (measured) --------
    probed(
        "librdkafka-pinned-to-0.9.0-against-kafka-4", THREE, [("CLIENT_VERSIONS_REFUSED", "error", None, None)],
        pinned="0.9.0", api_versions=KAFKA_41,
        says=[("CLIENT_VERSIONS_REFUSED", None, "message", "Fetch v0-v1 (it takes v4-v18)"),
              ("CLIENT_VERSIONS_REFUSED", None, "message", "ListOffsets v0-v0 (it takes v1-v10)"),
              ("CLIENT_VERSIONS_REFUSED", None, "fix", "broker.version.fallback=0.10.0 or later")],
    ),
    probed(
        # 0.10.0 and later are "queryable" in librdkafka's tables: what the broker answers decides.
        "librdkafka-pinned-to-0.10.2-asks-anyway", THREE, [], pinned="0.10.2", api_versions=KAFKA_41,
    ),
    # -- GROUP_PROTOCOL_UNSUPPORTED / SHARE_GROUPS_UNSUPPORTED: the client's protocol, which the brokers refuse ----
    probed(
        # Kafka 4.1 with group.coordinator.rebalance.protocols=classic: ConsumerGroupHeartbeat offered, refused.
        "consumer-protocol-switched-off-on-the-brokers", THREE, [("GROUP_PROTOCOL_UNSUPPORTED", "error", None, None)],
        group=ORDERS_APP, group_protocol="consumer",
        answer=ApplicationAnswer(groups=(found(ORDERS_APP, 3, "192.0.2.13"),), settings=DEFAULTS,
                                 consumer_protocol="the broker answers ConsumerGroupHeartbeat with UNSUPPORTED_VERSION: "
                                                   "group.coordinator.rebalance.protocols lacks consumer"),
        says=[("GROUP_PROTOCOL_UNSUPPORTED", None, "message", "does not support the new CONSUMER group protocol"),
              ("GROUP_PROTOCOL_UNSUPPORTED", None, "message", "rebalance.protocols lacks consumer"),
              ("GROUP_PROTOCOL_UNSUPPORTED", None, "fix", "group.protocol=classic")],
    ),
    probed(
        "consumer-protocol-taken-says-nothing", THREE, [], group=ORDERS_APP, group_protocol="consumer",
        answer=ApplicationAnswer(groups=(found(ORDERS_APP, 3, "192.0.2.13"),), settings=DEFAULTS,
                                 consumer_protocol="ok"),
    ),
    probed(
        # Kafka 4.1's default: share groups off.
        "share-groups-off-on-the-brokers", THREE, [("SHARE_GROUPS_UNSUPPORTED", "error", None, None)],
        share_group="shared-work",
        answer=ApplicationAnswer(shares=(found("shared-work", 1, "192.0.2.11"),), settings=DEFAULTS,
                                 share_protocol="the broker answers ShareGroupHeartbeat with UNSUPPORTED_VERSION: "
                                                "share groups are not enabled"),
        says=[("SHARE_GROUPS_UNSUPPORTED", None, "message", "'shared-work'"),
              ("SHARE_GROUPS_UNSUPPORTED", None, "fix", "group.share.enable=true")],
    ),
    probed(
        # A share group's coordinator is its group coordinator: a broken endpoint there is the same failure.
        "share-group-coordinated-behind-a-refused-endpoint", THREE, REFUSED_3, share_group="shared-work",
        refused_node=3,
        answer=ApplicationAnswer(shares=(found("shared-work", 3, "192.0.2.13"),), settings=DEFAULTS,
                                 share_protocol="ok"),
        says=[("COORDINATOR_UNREACHABLE", 3, "message", "share group 'shared-work'")],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_application_rules(row: Case):
    check(row)
