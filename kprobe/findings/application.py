"""Rules for what an application needs beyond reachable leaders: coordinators, internal topics, its topics.

Every consumer in a group and every transactional producer talks to a coordinator, the leader of
its key's partition of `__consumer_offsets` or `__transaction_state`. Where that topic cannot be
created (fewer live brokers than its replication factor), has partitions without a leader, or the
coordinator's endpoint fails from here, the application hangs while every other broker works:
consumers read nothing ("group coordinator is unavailable"), `initTransactions` times out. These
rules name the cause and the setting. Groups that cannot work are an error (most consumers use
one); transactions a warning unless a transactional id was named.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.findings.catalogue import ERROR, INFO, WARNING, finding
from kprobe.findings.common import listed
from kprobe.kafka.wire import error_name
from kprobe.models import (
    OFFSETS_TOPIC,
    RACK_AWARE,
    SETTINGS_PREFIX,
    TRANSACTIONS_TOPIC,
    Application,
    BootstrapResult,
    Coordinator,
    EndpointResult,
    Finding,
    InternalTopic,
    NamedTopic,
    Severity,
    endpoint_row,
    is_usable,
    reads_by_replica,
    verdict,
)

_CONSUMERS = ("consumers in a group (any client with a group.id) find no group coordinator "
              "(COORDINATOR_NOT_AVAILABLE; \"group coordinator is unavailable\") and read nothing, while producers "
              "work")
_TRANSACTIONS = "transactional producers time out in initTransactions(), while plain producers and consumers work"
_TOPIC_DENIED, _UNKNOWN_TOPIC = 29, 3  # TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION
# FindCoordinator's answer when the principal may not describe the key (group, transactional id authorization
# failed): no coordinator for it, whatever the internal topic's state.
_KEY_DENIED = (error_name(30), error_name(53))


def _env(setting: str) -> str:
    """A broker setting as the Apache and Confluent images read it from a Compose file's environment."""
    return "KAFKA_" + setting.upper().replace(".", "_")


def application_findings(application: Application | None, bootstraps: Sequence[BootstrapResult],
                         endpoints: Sequence[EndpointResult], findings: Sequence[Finding]) -> list[Finding]:
    """Every application finding; `findings` are the verdict's, which say whether a coordinator's endpoint works."""
    out = _no_topics_visible(bootstraps)
    if application is None:
        return out
    for topic in application.internal_topics:
        out.extend(_internal(topic, application))
    for coordinator in application.coordinators:
        out.extend(_coordinator(coordinator, application, endpoints, findings))
    for named in application.topics:
        out.extend(_named(named))
    out.extend(_protocols(application))
    out.extend(_racks(application, endpoints, findings))
    out.extend(_pinned(application, bootstraps))
    return out


def _pinned(application: Application, bootstraps: Sequence[BootstrapResult]) -> list[Finding]:
    """CLIENT_VERSIONS_REFUSED: librdkafka pinned to a pre-0.10 table of request versions these brokers refuse."""
    if application.pinned is None:
        return []
    from kprobe.kafka.client_versions import pinned_versions, refused

    pinned = pinned_versions({"api.version.request": "false", "broker.version.fallback": application.pinned})
    if pinned is None:
        return []
    fallback, table = pinned
    for b in bootstraps:
        if not b.api_versions:
            continue
        gone = refused(table, {name: (low, high) for name, low, high in b.api_versions})
        if not gone:
            continue
        said = "; ".join(f"{name} v{lo}-v{hi}" + (f" (it takes v{off[0]}-v{off[1]})" if off else " (it has none)")
                         for name, (lo, hi), off in gone)
        return [finding(
            "CLIENT_VERSIONS_REFUSED", ERROR,
            f"With api.version.request=false and broker.version.fallback={fallback}, librdkafka does not ask the "
            f"brokers which request versions they take: it uses its fixed table for Kafka {fallback}, and the broker "
            f"at {b.address} refuses these: {said}. Kafka 4.0 removed old request versions (KIP-896): such a client "
            "times out on every request the brokers no longer take (measured: fallback 0.9.0 against Kafka 4.1.1).",
            "Remove api.version.request=false (librdkafka's default asks the brokers), or set "
            "broker.version.fallback=0.10.0 or later. Other clients pin versions their own way (kafka-python's "
            "api_version, Sarama's Config.Version): let them negotiate, or pin a version these brokers take.",
            bootstrap=b.address)]
    return []


def _racks(application: Application, endpoints: Sequence[EndpointResult], findings: Sequence[Finding]) -> list[Finding]:
    """client.rack (KIP-392): a rack no broker is in, fetching left off by the brokers, a rack-local replica whose
    endpoint fails from here (the consumer then reads nothing from those partitions: measured with Java and
    librdkafka consumers, which follow the leader's choice of replica and do not fall back).
    """
    rack = application.client_rack
    if not rack:
        return []
    if rack not in application.broker_racks:
        known = ", ".join(application.broker_racks) or "none: no broker sets broker.rack"
        return [finding(
            "CLIENT_RACK_MATCHES_NO_BROKER", WARNING,
            f"The consumer sets client.rack={rack}, which is no broker's rack (brokers' racks: {known}): follower "
            "fetching does nothing, and every partition is read from its leader, across zones.",
            "Set client.rack to the rack of the brokers in the consumer's zone, as broker.rack names it. In a cloud, "
            "use the zone ID (use1-az1), not the zone name (us-east-1a): names map to different zones in different "
            "accounts, IDs do not.")]
    if application.replica_selector is not None and application.replica_selector != RACK_AWARE:
        return [finding(
            "FOLLOWER_FETCHING_OFF", INFO,
            f"The consumer sets client.rack={rack}, but the brokers' replica.selector.class is "
            f"{application.replica_selector}: every partition is read from its leader, whatever the rack.",
            f"Nothing to fix for the consumer; to read from replicas in its rack, set replica.selector.class="
            f"{RACK_AWARE} on the brokers.")]
    out: list[Finding] = []
    for replica, reads in reads_by_replica(application.rack_reads):
        result = endpoint_row(endpoints, replica, reads[0].endpoint)
        if result is None or is_usable(result, findings):
            continue
        shown = listed([f"{r.topic}-{r.partition} (leader {r.leader})" for r in reads], 10)
        out.append(finding(
            "FOLLOWER_FETCH_UNREACHABLE", ERROR,
            f"A consumer with client.rack={rack} reads {len(reads)} partition(s) from broker {replica}, the in-sync "
            f"replica in its rack that their leaders name (KIP-392): {shown}. Broker {replica}'s endpoint "
            f"{reads[0].endpoint} does not work from here ({verdict(result, findings)}), so those reads fail: the "
            "consumer gets nothing from them, although their leaders work.",
            f"Fix broker {replica}'s endpoint as its own finding says, or leave client.rack unset (or set it to a rack "
            "whose brokers work from here) until then.",
            node_id=replica, endpoint=reads[0].endpoint))
    return out


def _protocols(application: Application) -> list[Finding]:
    """GROUP_PROTOCOL_UNSUPPORTED and SHARE_GROUPS_UNSUPPORTED: the client's protocol, which the brokers refuse."""
    out: list[Finding] = []
    if application.consumer_protocol not in (None, "ok"):
        out.append(finding(
            "GROUP_PROTOCOL_UNSUPPORTED", ERROR,
            f"The consumer sets group.protocol=consumer (KIP-848), and {application.consumer_protocol}. The Java "
            "client fails with \"The cluster does not support the new CONSUMER group protocol\"; librdkafka's "
            "consumer errors likewise, and no member joins.",
            "Set group.protocol=classic on the consumer, or enable the protocol on the brokers (Kafka 4.0 and "
            "later: group.coordinator.rebalance.protocols=classic,consumer, its default)."))
    if application.share_protocol not in (None, "ok"):
        out.append(finding(
            "SHARE_GROUPS_UNSUPPORTED", ERROR,
            f"Share group {application.share_group!r} (KIP-932) cannot work here: {application.share_protocol}. A "
            "KafkaShareConsumer fails at its first poll.",
            "Enable share groups on the brokers (Kafka 4.0 and 4.1: group.share.enable=true; later: "
            "kafka-features.sh upgrade --feature share.version=1), or use a consumer group."))
    return out


def _severity(topic: InternalTopic, application: Application) -> Severity:
    if topic.name == OFFSETS_TOPIC:
        return ERROR
    return ERROR if application.transactional_id else WARNING


def _who(topic: InternalTopic) -> str:
    return _CONSUMERS if topic.name == OFFSETS_TOPIC else _TRANSACTIONS


def _settings_note(topic: InternalTopic, key: str, value: int | None) -> str:
    if topic.settings_read:
        return f"{key}={value}"
    return f"{key}={value} (Kafka's default: the brokers' setting could not be read from here)"


def _internal(topic: InternalTopic, application: Application) -> list[Finding]:
    prefix = SETTINGS_PREFIX[topic.name]
    severity = _severity(topic, application)
    rf_key = f"{prefix}.replication.factor"
    if topic.exists is False and not topic.can_create:
        code = "OFFSETS_TOPIC_UNCREATABLE" if topic.name == OFFSETS_TOPIC else "TRANSACTION_LOG_UNCREATABLE"
        lowest = [f"{rf_key}={topic.live_brokers}"]
        if topic.min_isr is not None and topic.min_isr > topic.live_brokers:
            lowest.append(f"{prefix}.min.isr={topic.live_brokers}")
        return [finding(
            code, severity,
            f"{topic.name} does not exist and the brokers cannot create it: "
            f"{_settings_note(topic, rf_key, topic.replication_factor)} asks for more replicas than the "
            f"{topic.live_brokers} live broker(s). So {_who(topic)}. The brokers try to create it at a client's first "
            "FindCoordinator, and fail every time.",
            f"Set {' and '.join(lowest)} on every broker ({_env(rf_key)} in a Compose file) and restart them, "
            f"or run at least {topic.replication_factor} brokers. The topic is created with the settings in force at "
            "the first coordinator lookup after that.")]
    if topic.exists is False and topic.min_isr is not None and topic.replication_factor is not None \
            and topic.min_isr > topic.replication_factor:
        return [finding(
            "TRANSACTION_LOG_UNDER_MIN_ISR", severity,
            f"{topic.name} does not exist yet and will be created with {rf_key}={topic.replication_factor} but "
            f"{prefix}.min.isr={topic.min_isr}: more in-sync replicas than it will have. Its writes will be refused "
            f"(NOT_ENOUGH_REPLICAS), so {_TRANSACTIONS}.",
            f"Set {prefix}.min.isr={topic.replication_factor} ({_env(prefix + '.min.isr')} in a Compose file), "
            f"or raise {rf_key}, on every broker, and restart them.")]
    out: list[Finding] = []
    if topic.offline:
        code = "OFFSETS_PARTITIONS_OFFLINE" if topic.name == OFFSETS_TOPIC else "TRANSACTION_LOG_OFFLINE"
        share = f"{len(topic.offline)} of {topic.partitions}"
        keys = "groups" if topic.name == OFFSETS_TOPIC else "transactional ids"
        named = application.group if topic.name == OFFSETS_TOPIC else application.transactional_id
        which = ("kprobe probe --group GROUP" if topic.name == OFFSETS_TOPIC
                 else "kprobe probe --transactional-id ID")
        out.append(finding(
            code, severity,
            f"{share} partitions of {topic.name} have no leader ({_numbers(topic.offline)}): the {keys} whose key "
            f"hashes there (about {share} of them) find no coordinator, so for them {_who(topic)}; the others work.",
            "Bring back the brokers that hold those partitions' replicas. A key's partition is "
            f"abs(hash(key)) % {topic.partitions}; {which} says whether a given one is affected"
            + (f" (for {named!r}, see its coordinator's finding)" if named else "")
            + f". With {rf_key} of 3 or more, one broker's loss takes no {keys} down."))
    if topic.under_min_isr:
        out.append(finding(
            "TRANSACTION_LOG_UNDER_MIN_ISR", severity,
            f"{len(topic.under_min_isr)} of {topic.partitions} partitions of {topic.name} have fewer in-sync "
            f"replicas than {prefix}.min.isr={topic.min_isr} ({_numbers(topic.under_min_isr)}): their writes are "
            f"refused (NOT_ENOUGH_REPLICAS), so for the transactional ids there {_TRANSACTIONS}.",
            "Bring the followers back in sync (start the brokers that are missing), or lower "
            f"{prefix}.min.isr to what the cluster keeps in sync (it applies when the topic is created; an existing "
            "topic's min.insync.replicas is changed with kafka-configs.sh --alter --entity-type topics)."))
    return out


def _coordinator(c: Coordinator, application: Application, endpoints: Sequence[EndpointResult],
                 findings: Sequence[Finding]) -> list[Finding]:
    what = {"group": f"group {c.key!r}", "transaction": f"transactional id {c.key!r}",
            "share": f"share group {c.key!r}"}[c.kind]
    topic = next((t for t in application.internal_topics if t.name == (
        TRANSACTIONS_TOPIC if c.kind == "transaction" else OFFSETS_TOPIC)), None)
    fails = (f"a producer with {what} times out in initTransactions()" if c.kind == "transaction"
             else f"consumers of {what} cannot join, commit or read committed offsets")
    if c.node_id is None and c.error is not None and c.error.startswith(_KEY_DENIED):
        # Refused before any coordinator is looked for: the internal topic is not the cause, and waiting is no fix.
        # A group's ACLs (share groups' too) are on the group; a transactional id's on the transactional id.
        operation, option = ("Write", "--transactional-id") if c.kind == "transaction" else ("Read", "--group")
        return [finding(
            "COORDINATOR_NOT_AVAILABLE", ERROR,
            f"No coordinator for {what}: the broker answered FindCoordinator with {c.error}. This principal may not "
            f"describe {what}, so {fails} with these credentials, from anywhere.",
            f"Grant this principal {operation} on it (which includes the Describe FindCoordinator needs): "
            f"kafka-acls.sh --add --allow-principal User:NAME --operation {operation} {option} {c.key}.")]
    if c.node_id is None:
        cause = _cause(c, topic)
        where = (f" Its key lives in partition {c.partition} of {topic.name}{cause[0]}."
                 if c.partition is not None and topic is not None else "")
        return [finding(
            "COORDINATOR_NOT_AVAILABLE", ERROR,
            f"No coordinator for {what}: the broker answered FindCoordinator with {c.error}.{where} So {fails}, "
            "from anywhere.",
            cause[1])]
    result = endpoint_row(endpoints, c.node_id, c.endpoint)
    if result is None or is_usable(result, findings):
        return []
    return [finding(
        "COORDINATOR_UNREACHABLE", ERROR,
        f"The coordinator of {what} is broker {c.node_id} (the Java client logs it as id {c.java_id}), at "
        f"{c.endpoint}, which does not work from here ({verdict(result, findings)}; its own finding says why). So "
        f"{fails} from here, even where every partition leader it uses works.",
        f"Fix broker {c.node_id}'s endpoint as its own finding says: the coordinator is that broker's advertised "
        f"listener. Until then, from here only the {'transactional ids' if c.kind == 'transaction' else 'groups'} "
        "whose partition another broker leads work.",
        node_id=c.node_id, endpoint=c.endpoint)]


def _cause(c: Coordinator, topic: InternalTopic | None) -> tuple[str, str]:
    """Why a FindCoordinator failed, from the internal topic's state: (clause for the message, fix)."""
    if topic is None:
        return "", "Run again; if it persists, look at the brokers' logs for the coordinator's errors."
    prefix = SETTINGS_PREFIX[topic.name]
    if topic.exists is False and not topic.can_create:
        return (f", which does not exist and cannot be created ({prefix}.replication.factor="
                f"{topic.replication_factor}, {topic.live_brokers} live broker(s))",
                f"Set {prefix}.replication.factor={topic.live_brokers} on every broker and restart them, or run at "
                f"least {topic.replication_factor} brokers.")
    if c.partition is not None and c.partition in topic.offline:
        return (", which has no leader",
                "Bring back the brokers that hold that partition's replicas.")
    if topic.exists is False:
        return (", which did not exist yet: this lookup has the brokers create it",
                "Run again in a few seconds: the coordinator is ready once the topic's partitions have leaders.")
    return ("", "Run again in a few seconds (a coordinator is loading after a leader change); if it persists, look at "
                "the coordinator's broker log.")


def _named(named: NamedTopic) -> list[Finding]:
    if named.status == "not_found":
        return [finding(
            "TOPIC_NOT_FOUND", ERROR,
            f"Topic {named.name!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION). Consumers subscribed to it read "
            "nothing; producers fail (\"Topic not present in metadata\") unless the brokers create topics on "
            "first use (auto.create.topics.enable).",
            f"Create it: kafka-topics.sh --create --topic {named.name} --partitions N --replication-factor R "
            "(or check its spelling against kprobe list).")]
    if named.status == "not_authorized":
        return [finding(
            "TOPIC_NOT_AUTHORIZED", ERROR,
            f"This principal may not describe topic {named.name!r} (TOPIC_AUTHORIZATION_FAILED): the client gets "
            "no metadata for it, so it can neither produce to it nor consume from it.",
            f"Grant this principal Describe (and Read or Write, as it needs) on topic {named.name}: "
            f"kafka-acls.sh --add --allow-principal User:NAME --operation Describe --operation Read "
            f"--topic {named.name}.")]
    if named.status == "no_leader":
        which = _numbers(named.leaderless) if named.leaderless else "all"
        return [finding(
            "TOPIC_WITHOUT_LEADER", ERROR,
            f"Topic {named.name!r} has partitions without a leader ({which}): records for them cannot be produced "
            "or consumed until a replica leads again.",
            "Bring back the brokers holding those partitions' replicas (kprobe list -t TOPIC names them).")]
    if named.status == "error":
        return [finding(
            "TOPIC_METADATA_ERROR", ERROR,
            f"The metadata for topic {named.name!r} came with an error: {named.error}. Clients cannot use it.",
            "Check the topic's name and state with kprobe list -t TOPIC, and the brokers' logs.")]
    return []


def _no_topics_visible(bootstraps: Sequence[BootstrapResult]) -> list[Finding]:
    """NO_TOPICS_VISIBLE: a SASL principal that sees no topic at all, and is refused the ones asked by name.

    An empty listing alone proves nothing: a new cluster has no topic yet, not even the internal
    ones, until a client's first coordinator lookup. What tells the two apart is the answer for the
    topics asked by name on that connection (the internal topics, those named with --topic): the
    broker says TOPIC_AUTHORIZATION_FAILED only to a principal without Describe on that name, and
    UNKNOWN_TOPIC_OR_PARTITION (or the topic) to one with it.
    """
    sasl = [b for b in bootstraps if b.status == "ok" and b.metadata is not None and b.via == "kprobe"
            and not b.full_metadata_lost and (b.protocol or "").startswith("SASL")]
    if not sasl or any(b.metadata is not None and b.metadata.topics for b in sasl):
        return []
    asked = [t for b in sasl if b.application is not None for t in b.application.topics]
    denied = list(dict.fromkeys(t.name for t in asked if t.error_code == _TOPIC_DENIED))
    if not denied or any(t.error_code in (0, _UNKNOWN_TOPIC) for t in asked):
        return []  # nothing refused, or a name this principal may describe: the cluster may simply have no topic
    return [finding(
        "NO_TOPICS_VISIBLE", WARNING,
        f"The metadata lists no topic at all for this principal ({sasl[0].address}), and asked by name, "
        f"{', '.join(denied)} answered TOPIC_AUTHORIZATION_FAILED. That is what a principal without Describe on any "
        "topic sees: its clients will get TOPIC_AUTHORIZATION_FAILED for every topic they name.",
        "Grant this principal Describe (and Read or Write) on the topics it uses, or name one with --topic to have "
        "kprobe ask for it.",
        bootstrap=sasl[0].address)]


def _numbers(values: Sequence[int]) -> str:
    return listed([str(v) for v in values], 20)
