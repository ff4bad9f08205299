"""--roundtrip TOPIC: a real client produces one record to every partition and reads each back.

kprobe's verdict is a prediction; this is the experiment that tests it, from the same vantage and
with the same settings. It runs librdkafka (confluent-kafka), the client most tools here are built
on, after the probe, on what is left of the run's deadline. Each record is marked as kprobe's (key
`kprobe-roundtrip`, headers naming the run and the vantage), so a consumer of a shared canary topic
can skip them. Opt-in only: it writes to the cluster.

Each partition's leader is read from the bootstrap's own metadata (kprobe's wire client), not
from librdkafka's: a failed partition is then named with the broker whose endpoint the client
used, and the rules can set it beside the verdict on that endpoint.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from kprobe.hostport import format_hostport
from kprobe.logs import logger
from kprobe.models import (
    ApplicationQuestions,
    BootstrapAddress,
    BootstrapResult,
    PartitionRoundtrip,
    PartitionRoundtripStatus,
    Roundtrip,
    RoundtripStatus,
    TopicInfo,
)
from kprobe.probe.context import RunContext
from kprobe.probe.marks import KEY, RUN_HEADER, describe_error
from kprobe.records import field, record

_LOG = logger("kprobe.roundtrip")

# How often the read-back consumer refreshes its topics' metadata (ms). librdkafka looks up the leaders
# of an assigned partition only if its topic was known when the consumer's first connection came up, or
# on its one-second scan of leaderless topics: a record acked just after that connection sat unread for
# up to a second (1 run in 10 on the lab; librdkafka 2.16, seen with debug=metadata). The consumer is
# kprobe's instrument, not the client under test, so it asks again sooner, unless the user's -X says.
CONSUMER_REFRESH_MS = 200
# The application's own ids: its round trip uses ids of kprobe's (kprobe.probe.roundtrip_steps), never these.
APPLICATION_IDS = ("group.id", "group.instance.id", "transactional.id")
# Below this, a round trip cannot even connect: say the deadline came first rather than fail.
_MIN_BUDGET = 0.2
# librdkafka's lines name the broker as `host:port/ID: ...` (`/bootstrap` before its id is known).
_BROKER_LINE = re.compile(r"(?:^|\s)\S+/(\d+): (.+)$")


class _NotRun(Exception):
    """The round trip could not be tried at all; the message says why."""


@record(frozen=False)
class _Trip:
    """The state one round trip builds up; what is in it when the deadline comes is what is reported."""

    topic: str
    leaders: dict[int, int | None]
    # Each broker's endpoint as the bootstrap advertised it: where the client went for that leader.
    advertised: dict[int, str] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    acked: dict[int, tuple[Any, int | None, float]] = field(default_factory=dict)
    read_back: dict[int, float] = field(default_factory=dict)
    consume_errors: dict[int, tuple[str, bool]] = field(default_factory=dict)
    broker_errors: dict[int, str] = field(default_factory=dict)
    closed: bool = False


def client_name() -> str:
    """The client that makes the round trip, with its version: a disagreement report needs it."""
    from confluent_kafka import libversion

    return f"librdkafka {libversion()[0]}"


def round_trip(topic_name: str, create: bool, addresses: Sequence[BootstrapAddress],
               bootstraps: Sequence[BootstrapResult], ctx: RunContext, *, run_id: str, vantage: str,
               application: ApplicationQuestions | None = None) -> Roundtrip:
    """Produce to every partition of the topic, then read every record back, within the run's deadline.

    With the application's group or transactional id named, the same records are then read back through a
    group placed as the application's (joined, read, committed), and a transaction is committed through a
    transactional id placed as the application's: the path its coordinators take.
    """
    started = time.monotonic()
    client = client_name()
    answered = [b for b in bootstraps if b.status == "ok" and b.metadata is not None]

    def not_run(error: str, *, missing: bool = False, created: bool = False) -> Roundtrip:
        return Roundtrip(topic=topic_name, client=client, status="not_run", error=error, topic_missing=missing,
                         created=created, ms=(time.monotonic() - started) * 1000)

    if not answered:
        return not_run("no bootstrap answered: a client gets no further either")
    topic = _topic(topic_name, answered)
    created = False
    if topic is None:
        if not create:
            return not_run(f"topic {topic_name!r} is not in the cluster's metadata (it does not exist, or this "
                           "principal may not describe it): create it, or add --roundtrip-create", missing=True)
        error = _create(topic_name, addresses, answered, ctx)
        if error is not None:
            return not_run(error)
        created = True
        topic = _await_topic(topic_name, addresses, ctx)
        if topic is None:
            return not_run(f"topic {topic_name!r} was created, but no bootstrap listed its partitions with "
                           "leaders before the run's deadline", created=True)
    if topic.is_internal:
        return not_run(f"topic {topic_name!r} is internal to Kafka: give a topic of your own")
    advertised = {br.node_id: format_hostport(br.host, br.port) for res in reversed(answered) for br in res.brokers}
    trip = _Trip(topic_name, {p.partition: (p.leader if p.leader >= 0 else None) for p in topic.partitions},
                 advertised)
    try:
        result = _run(trip, addresses, ctx, run_id=run_id, vantage=vantage)
    except _NotRun as exc:
        return not_run(str(exc), created=created)
    group = transaction = None
    if application is not None and (application.group or application.transactional_id):
        from kprobe.probe.roundtrip_steps import group_step, transaction_step

        conf = _conf(addresses, ctx, trip.broker_errors)
        offsets = {p: off for p, (err, off, _) in trip.acked.items() if err is None and off is not None and off >= 0}
        if application.group:
            group = group_step(application.group, topic_name, offsets, answered, conf, ctx, run_id=run_id,
                               vantage=vantage)
        if application.transactional_id:
            transaction = transaction_step(application.transactional_id, topic_name, sorted(trip.leaders),
                                           answered, conf, ctx, run_id=run_id, vantage=vantage)
    status = _overall(result)
    if status == "ok" and any(s is not None and s.status != "ok" for s in (group, transaction)):
        status = "failed" if any(s is not None and s.status == "failed" for s in (group, transaction)) else "unfinished"
    return Roundtrip(topic=topic_name, client=client, status=status, partitions=result, created=created,
                     ms=(time.monotonic() - started) * 1000, group=group, transaction=transaction)


def _topic(name: str, answered: Sequence[BootstrapResult]) -> TopicInfo | None:
    for b in answered:
        assert b.metadata is not None
        for topic in b.metadata.topics:
            if topic.name == name and topic.error_code == 0 and topic.partitions:
                return topic
    return None


def _conf(addresses: Sequence[BootstrapAddress], ctx: RunContext, trip_errors: dict[int, str]) -> dict[str, Any]:
    """The user's librdkafka properties, as a client of theirs would have them.

    Their request timeout too (`socket.timeout.ms`, librdkafka's 60 s unless they set one), not
    --timeout: a broker slow to answer a produce (loaded, a leader moving) is waited for as their
    client waits for it, and the run's deadline bounds every wait anyway (`_run`). With --timeout as
    the request timeout, a broker answering in a little more than it was never waited for: each
    retry timed out, reconnected and asked again, where their client gets its answer.

    librdkafka's log lines go to a logger of kprobe's (shown with -v), never to stderr raw; its
    errors per broker (`host:port/2: Failed to resolve ...`) are kept to explain a failed partition.
    """
    logger = _BrokerLines(trip_errors)

    def on_error(err: Any) -> None:
        _keep(trip_errors, str(err.str()))

    # The application's own group and transactional id are not the round trip's: a transactional producer
    # produces nothing before initTransactions(), and the round trip's consumer reads with a group of its own.
    conf: dict[str, Any] = _own_settings(ctx)
    conf.update({"bootstrap.servers": ",".join(a.hostport for a in addresses), "client.id": "kprobe-roundtrip",
                 "logger": logger, "error_cb": on_error})
    protocols = {a.protocol for a in addresses if a.protocol}
    if len(protocols) == 1 and "security.protocol" not in ctx.props:
        conf["security.protocol"] = protocols.pop()
    return conf


def _own_settings(ctx: RunContext) -> dict[str, Any]:
    """The user's librdkafka properties without the application's own ids (APPLICATION_IDS)."""
    return {k: v for k, v in ctx.props.items() if k not in APPLICATION_IDS}


def _keep(trip_errors: dict[int, str], text: str) -> None:
    """Remember the last failure librdkafka reported for each broker, to explain its partitions."""
    _LOG.debug("librdkafka: %s", text)
    match = _BROKER_LINE.search(text)
    if match and any(word in match.group(2).lower() for word in ("fail", "timed out", "refused", "error")):
        trip_errors[int(match.group(1))] = match.group(2).split(" (after ")[0]


class _BrokerLines:
    """librdkafka's log lines, for -v, and their per-broker failures for the partitions' errors.

    confluent-kafka only calls `log(level, format, *args)` on its `logger`: this object is enough,
    and one per round trip registers nothing in `logging` (a watch running for weeks leaks no loggers).
    """

    def __init__(self, trip_errors: dict[int, str]) -> None:
        self.trip_errors = trip_errors

    def log(self, level: int, message: str, *args: object) -> None:
        _keep(self.trip_errors, message % args if args else message)


def _create(name: str, addresses: Sequence[BootstrapAddress], answered: Sequence[BootstrapResult],
            ctx: RunContext) -> str | None:
    """--roundtrip-create: one partition per broker (so every broker leads one), the broker's replication."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = max(len(b.brokers) for b in answered)
    wait = ctx.remaining(ctx.timeout)
    conf = _conf(addresses, ctx, {})
    try:
        admin = AdminClient(conf)
        futures = admin.create_topics([NewTopic(name, num_partitions=max(1, brokers), replication_factor=-1)],
                                      request_timeout=wait, operation_timeout=wait)
        futures[name].result(timeout=wait + 0.5)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if err is not None and hasattr(err, "code") and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return None  # made meanwhile by someone else: as good
        return f"could not create topic {name!r}: {describe_error(exc)[0]}"
    except Exception as exc:  # the future's own timeout (concurrent.futures.TimeoutError)
        return f"could not create topic {name!r} before the run's deadline ({type(exc).__name__})"
    return None


def _await_topic(name: str, addresses: Sequence[BootstrapAddress], ctx: RunContext) -> TopicInfo | None:
    """The new topic's partitions and leaders, asked of the bootstraps until every partition has a leader."""
    from kprobe.probe.bootstrap import fetch_bootstrap

    while time.monotonic() < ctx.deadline - _MIN_BUDGET:
        for address in addresses:
            result = fetch_bootstrap(address, ctx, topics=[name], identity=False)
            topic = _topic(name, [result]) if result.status == "ok" and result.metadata else None
            if topic is not None and all(p.leader >= 0 for p in topic.partitions):
                return topic
        time.sleep(0.05)
    return None


def _run(trip: _Trip, addresses: Sequence[BootstrapAddress], ctx: RunContext, *, run_id: str,
         vantage: str) -> tuple[PartitionRoundtrip, ...]:
    """Produce to every partition and read each record back; every wait bounded by --timeout and the deadline."""
    from confluent_kafka import Consumer, KafkaException, Producer

    budget = ctx.deadline - time.monotonic()
    if budget < _MIN_BUDGET:
        return _results(trip, produce_cut=True)
    # What is left of the deadline, not --timeout: a real client waits minutes for an acknowledgement
    # (librdkafka's message.timeout.ms 300 s, Java's delivery.timeout.ms 120 s), so a record that needs a
    # retry or two (an address family refused first, a leader moving) must not be called lost after 5 s.
    # Only where the deadline left less than one --timeout is what it cut `unfinished`.
    produce_wait = budget
    conf = _conf(addresses, ctx, trip.broker_errors)
    try:
        producer = Producer({**conf, "linger.ms": 0, "message.timeout.ms": max(1, int((produce_wait - 0.15) * 1000))})
        # Made now, not after the produce: it bootstraps and connects while the records travel.
        consumer = Consumer({**conf, "group.id": f"kprobe-roundtrip-{run_id}", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 50, "enable.partition.eof": False,
                             "topic.metadata.refresh.interval.ms": CONSUMER_REFRESH_MS,
                             **_own_settings(ctx)})
    except KafkaException as exc:
        # Not the cluster's doing (a mechanism librdkafka lacks, AWS_MSK_IAM, or a bad property): no record
        # was tried, so nothing is set beside the verdict.
        raise _NotRun(f"librdkafka refused the settings: {describe_error(exc)[0]}") from None
    headers: list[tuple[str, str | bytes | None]] = [(RUN_HEADER, run_id.encode()),
                                                     ("kprobe-vantage", vantage.encode("utf-8", "replace"))]
    trip.started = time.monotonic()
    for partition in sorted(trip.leaders):
        value = json.dumps({"kprobe": "roundtrip", "run": run_id, "partition": partition}).encode()

        def on_delivery(err: Any, msg: Any, p: int = partition) -> None:
            if not trip.closed:  # the purge at the end reports every record it drops: not an outcome
                trip.acked[p] = (err, msg.offset() if err is None else None, time.monotonic())

        try:
            producer.produce(trip.topic, value=value, key=KEY, partition=partition, headers=headers,
                             on_delivery=on_delivery)
        except (KafkaException, BufferError) as exc:
            trip.acked[partition] = (exc, None, time.monotonic())
    try:
        _exchange(trip, producer, consumer, run_id, produce_until=trip.started + produce_wait, ctx=ctx)
    finally:
        trip.closed = True
        producer.purge()  # a record given up on must not go out later
        producer.flush(0)
        getattr(producer, "close", lambda: None)()  # its threads stop now, not when it is collected
        consumer.close()
    # What the deadline cut short of one --timeout is unfinished: the client might still have made it.
    cut_reads = {p for p, (_, _, at) in trip.acked.items() if ctx.deadline < at + ctx.timeout}
    return _results(trip, produce_cut=produce_wait < ctx.timeout, cut_reads=cut_reads)


def _exchange(trip: _Trip, producer: Any, consumer: Any, run_id: str, *, produce_until: float,
              ctx: RunContext) -> None:
    """Serve the producer and the consumer in one loop: each record is read back as soon as it is acknowledged.

    A partition that fails (its leader's endpoint broken) then holds up only itself, and nothing waits
    past the run's deadline. No consumer group is joined and no offset is committed: the consumer is
    assigned each record's own offset.
    """
    from confluent_kafka import TopicPartition

    marker = run_id.encode()
    assigned: set[int] = set()
    while (now := time.monotonic()) < ctx.deadline:
        producer.poll(0)  # delivery reports
        fresh = [TopicPartition(trip.topic, p, offset) for p, (err, offset, _) in trip.acked.items()
                 if err is None and offset is not None and offset >= 0 and p not in assigned]
        if fresh:
            consumer.incremental_assign(fresh)
            assigned.update(tp.partition for tp in fresh)
        unacked = [p for p in trip.leaders if p not in trip.acked]
        reading = [p for p in assigned if p not in trip.read_back and p not in trip.consume_errors]
        if not reading and (not unacked or now >= produce_until + 0.2):
            return  # every partition settled, or the unacknowledged ones have had their wait
        if not assigned:
            producer.poll(0.02)
            continue
        msg = consumer.poll(0.02)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if msg.partition() is not None and msg.partition() >= 0:
                trip.consume_errors[msg.partition()] = (str(err.str()), err.code() > 0)
            continue
        if msg.key() == KEY and (RUN_HEADER, marker) in (msg.headers() or []):
            trip.read_back.setdefault(msg.partition(), time.monotonic())


def _results(trip: _Trip, *, produce_cut: bool, cut_reads: set[int] | None = None) -> tuple[PartitionRoundtrip, ...]:
    """Each partition's outcome; what the deadline cut is `unfinished`, never a failure."""
    out = []
    for partition, leader in sorted(trip.leaders.items()):
        context = ""
        if leader is not None:
            why = trip.broker_errors.get(leader)
            at = f" at {trip.advertised[leader]}" if leader in trip.advertised else ""
            context = f" (broker {leader}{at}" + (f": {why})" if why else ")")
        status: PartitionRoundtripStatus
        acked = trip.acked.get(partition)
        error, broker_error = None, False
        produce_ms = roundtrip_ms = offset = None
        if acked is None and not produce_cut:
            status, error = "produce_failed", "no acknowledgement before the run's deadline" + context
        elif acked is None or (acked[0] is not None and _timed_out(acked[0]) and produce_cut):
            status = "unfinished"
            error = "the run's deadline came before the broker acknowledged the record" + context
        elif acked[0] is not None:
            status = "produce_failed"
            error, broker_error = describe_error(acked[0])
            error += "" if broker_error else context
        else:
            offset, produce_ms = acked[1], (acked[2] - trip.started) * 1000
            if partition in trip.read_back:
                status, roundtrip_ms = "ok", (trip.read_back[partition] - trip.started) * 1000
            elif partition in trip.consume_errors:
                status = "consume_failed"
                error, broker_error = trip.consume_errors[partition]
            elif cut_reads is None or partition in cut_reads:
                status, error = "unfinished", "the run's deadline came before the record was read back" + context
            else:
                status, error = "consume_failed", "the record was not read back before the run's deadline" + context
        out.append(PartitionRoundtrip(partition=partition, leader=leader, status=status, offset=offset,
                                      produce_ms=produce_ms, roundtrip_ms=roundtrip_ms, error=error,
                                      broker_error=broker_error))
    return tuple(out)


def _timed_out(err: Any) -> bool:
    from confluent_kafka import KafkaError

    return hasattr(err, "code") and err.code() == KafkaError._MSG_TIMED_OUT


def _overall(partitions: Sequence[PartitionRoundtrip]) -> RoundtripStatus:
    if any(p.status in ("produce_failed", "consume_failed") for p in partitions):
        return "failed"
    if any(p.status == "unfinished" for p in partitions):
        return "unfinished"
    return "ok"
