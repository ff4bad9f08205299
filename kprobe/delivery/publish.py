"""Reports to a Kafka topic, spooled first so that nothing is lost.

Each report is written to the spool directory (atomically) before any send, produced with an
idempotent producer (acks=all), and its spool file is removed only after the broker's ack. When
the collector cluster is unreachable the spool keeps growing and is forwarded oldest first on
the next run; a crash at any point leaves the report in the spool.

Exactly-once on the wire is not promised: a crash after the ack and before the spool file is
removed, or a delivery that lands after a flush timed out, sends the report again on the next run.
Such a duplicate carries the same report `id`, so downstream deduplication by id (as
`kprobe aggregate` does) makes it harmless. The message key is `<cluster id>/<vantage>`, so one
vantage's reports of one cluster stay ordered within a partition.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from kprobe.errors import UsageError
from kprobe.logs import logger
from kprobe.records import record

_LOG = logger("kprobe.delivery.publish")
# What --publish-create makes, and what the missing-topic line tells an operator to make (docs/scheduling.md):
# six partitions, so that a growing fleet of vantages spreads over a growing collector (the key keeps one
# vantage's reports of one cluster in one partition, in order); three replicas where the collector has three
# brokers (fewer where it has fewer), and with three, min.insync.replicas=2, so that an acks=all report
# survives one broker's loss and publishing goes on through one broker down.
REPORTS_PARTITIONS = 6
# Kafka error codes the collector's answers carry (Kafka's protocol, `Errors`).
_UNKNOWN_TOPIC = 3
_TOPIC_DENIED = 29


@record
class Target:
    """`BOOTSTRAP/TOPIC` as given to --publish."""

    bootstrap: str
    topic: str


def parse_target(text: str, flag: str = "--publish") -> Target:
    """Split `host:port[,host:port]/topic`; a usage error names the expected form and the option."""
    bootstrap, sep, topic = text.rpartition("/")
    if not sep or not bootstrap or not topic:
        raise UsageError(f"bad {flag} {text!r}: write it as BOOTSTRAP/TOPIC, e.g. collector:9092/kprobe-reports")
    if len(topic) > 249 or not all(c.isalnum() or c in "._-" for c in topic):
        raise UsageError(f"bad {flag} topic {topic!r}: use letters, digits, '.', '_' and '-' (at most 249)")
    from kprobe.options import parse_addresses

    try:
        parse_addresses([bootstrap])
    except UsageError as exc:
        raise UsageError(f"bad {flag} {text!r}: {exc}") from None
    return Target(bootstrap, topic)


class Spool:
    """A directory of reports waiting to be sent, oldest first, bounded in count."""

    def __init__(self, directory: Path, max_files: int) -> None:  # --spool-max (kprobe.delivery.deliver)
        self.directory = directory
        self.max_files = max_files
        directory.mkdir(parents=True, exist_ok=True)

    def put(self, report: Mapping[str, Any]) -> Path:
        """Spool one report; past the bound the oldest are dropped, loudly."""
        pending = self.pending()
        excess = len(pending) + 1 - self.max_files
        if excess > 0:
            for old in pending[:excess]:
                old.unlink(missing_ok=True)
            _LOG.warning("spool %s is full (%d reports): dropped the %d oldest unsent", self.directory,
                         self.max_files, excess)
        name = f"{time.time_ns():020d}-{report['id']}.json"
        path = self.directory / name
        from kprobe.output.files import write_atomic  # tempfile: only a run that publishes pays for it

        # Private (0600): only kprobe reads its spool, and a report is deleted once the collector has it.
        write_atomic(path, json.dumps(report, ensure_ascii=True), private=True)
        return path

    def pending(self) -> list[Path]:
        """Spooled reports, oldest first (names start with a nanosecond timestamp)."""
        return sorted(p for p in self.directory.glob("*.json") if not p.name.startswith("."))


def _key(report: Any) -> bytes:
    """`<cluster id>/<vantage>`; ValueError for a document without a vantage name, which is no report to send."""
    vantage = report.get("vantage") if isinstance(report, dict) else None
    name = vantage.get("name") if isinstance(vantage, dict) else None
    if not isinstance(name, str):
        raise ValueError("no vantage name")
    bootstraps = report.get("bootstraps")
    cluster = next((b.get("cluster_id") for b in bootstraps if isinstance(b, dict) and b.get("cluster_id")),
                   None) if isinstance(bootstraps, list) else None
    return f"{cluster or 'unknown'}/{name}".encode()


def _set_aside(path: Path, why: str) -> None:
    """Move a spooled file that can never be sent out of the spool (`.broken`), saying so once.

    Left in place it would stop every later run at the same file, and the spool would never drain; renamed,
    it is out of the spool's listing and kept for a person to look at.
    """
    broken = path.with_suffix(".broken")
    try:
        path.rename(broken)
    except FileNotFoundError:  # removed meanwhile (by hand, or by another kprobe): nothing left to set aside
        return
    except OSError as exc:
        _LOG.warning("spooled report %s is %s and cannot be moved aside (%s): remove it", path.name, why,
                     exc.strerror or type(exc).__name__)
        return
    _LOG.warning("spooled report %s is %s; moved aside to %s", path.name, why, broken.name)


def reports_topic(brokers: int) -> tuple[int, int, dict[str, str]]:
    """Partitions, replication factor and topic settings of a reports topic on a collector of `brokers` brokers."""
    replication = max(1, min(3, brokers))
    config = {"min.insync.replicas": "2"} if replication >= 3 else {}
    return REPORTS_PARTITIONS, replication, config


def create_command(target: Target, brokers: int, props: Mapping[str, str]) -> str:
    """The `kafka-topics.sh` line that makes the reports topic as --publish-create would."""
    partitions, replication, config = reports_topic(brokers)
    settings = "".join(f" --config {key}={value}" for key, value in config.items())
    secured = " --command-config <your client.properties>" if _secured(props) else ""
    return (f"kafka-topics.sh --bootstrap-server {target.bootstrap} --create --topic {target.topic} "
            f"--partitions {partitions} --replication-factor {replication}{settings}{secured}")


def _secured(props: Mapping[str, str]) -> bool:
    return props.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT"


@record
class Collector:
    """What the collector's bootstrap answered about the topic, asked before anything is produced.

    `state`: `ok` (the topic is there, or being created on first use), `missing` (no such topic, and the
    collector will not create it on first use), `denied` (the principal may not even describe it),
    `unanswered` (no bootstrap gave metadata: `reason` says why). `brokers` is how many the metadata listed.
    """

    state: Literal["ok", "missing", "denied", "unanswered"]
    brokers: int = 0
    reason: str = ""
    refused: bool = False  # unanswered because connections were refused: a restarting broker may be back soon


def ask_collector(target: Target, props: Mapping[str, str], *, timeout: float) -> Collector:
    """The topic as the collector's metadata has it, within `timeout`; never raises for network trouble.

    Asked on the bootstrap connection itself with kprobe's wire client, as `probe` asks, and not with
    librdkafka: a collector whose advertised endpoints are broken would otherwise look unreachable
    (design notes, section 7), and a missing topic would look like a timeout. The topic is asked for as
    a producer asks (allow_auto_topic_creation), so a collector that creates topics on first use does so
    here, and only one that will not answers UNKNOWN_TOPIC_OR_PARTITION.
    """
    from kprobe.options import parse_addresses
    from kprobe.probe.bootstrap import fetch_bootstrap
    from kprobe.probe.context import RunContext

    addresses = parse_addresses([target.bootstrap])
    ctx = RunContext.start(addresses, props, timeout=timeout, run_for=timeout)
    reasons: list[str] = []
    refused = True
    for address in addresses:
        if time.monotonic() >= ctx.deadline:
            break
        result = fetch_bootstrap(address, ctx, topics=[target.topic], auto_create=True)
        if result.status != "ok" or result.metadata is None:
            reasons.append(result.error or result.status if len(addresses) == 1
                           else f"{address.hostport}: {result.error or result.status}")
            refused = refused and result.status == "refused"
            continue
        brokers = len(result.metadata.brokers)
        topic = next((t for t in result.metadata.topics if t.name == target.topic), None)
        code = topic.error_code if topic is not None else 0
        if code == _UNKNOWN_TOPIC:
            return Collector("missing", brokers)
        if code == _TOPIC_DENIED:
            return Collector("denied", brokers)
        # LEADER_NOT_AVAILABLE (being created on first use, or a leader moving) and the rest: the producer
        # waits for a leader within its timeout, and its delivery report says what went wrong.
        return Collector("ok", brokers)
    return Collector("unanswered", reason="; ".join(reasons) or "no time left to ask",
                     refused=refused and bool(reasons))


def forward(spool: Spool, target: Target, props: Mapping[str, str], *, timeout: float,
            create: bool = False) -> tuple[int, int]:
    """Send every spooled report, oldest first; returns (sent, still pending).

    Stops at the first report that is not acknowledged within `timeout`, so order is kept and
    an unreachable collector costs one timeout per run, not one per report. `create`
    (--publish-create) makes the topic when the collector has none (reports_topic).
    """
    with _forwarding(spool, timeout) as mine:
        if not mine:
            left = len(spool.pending())
            _LOG.warning("another kprobe is forwarding spool %s; %s", spool.directory, stay_spooled(left))
            return 0, left
        return _forward(spool, target, props, timeout=timeout, create=create)


def stay_spooled(count: int) -> str:
    """The words "N reports stay spooled", for every line that gives up on publishing for now."""
    return f"{count} report stays spooled" if count == 1 else f"{count} reports stay spooled"


@contextmanager
def _forwarding(spool: Spool, timeout: float) -> Iterator[bool]:
    """One forwarder per spool at a time, waiting at most `timeout` for another to finish.

    Runs that share a spool (two schedules on one machine, `watch` beside a cron job) would
    otherwise both send a report listed by both (a duplicate), and one would find a file the
    other had just removed. A waiting run forwards everything pending once it holds the lock,
    its own report included. The lock is an flock, so a killed holder releases it with its life.
    """
    import fcntl

    fd = os.open(spool.directory / ".forward.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        give_up = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= give_up:
                    yield False
                    return
                time.sleep(0.05)
        yield True
    finally:
        os.close(fd)  # releases the lock


def _before_producing(target: Target, props: Mapping[str, str], timeout: float, create: bool,
                      pending: int) -> tuple[Collector, str | None]:
    """Ask the collector first; the line to log instead of producing, when producing cannot work."""
    collector = ask_collector(target, props, timeout=timeout)
    where = f"collector {target.bootstrap}"
    if collector.state == "missing" and create:
        problem = _create(target, props, collector.brokers, timeout)
        if problem is None:
            partitions, replication, _ = reports_topic(collector.brokers)
            _LOG.warning("created topic %s on %s (--publish-create: %d partitions, replication factor %d)",
                         target.topic, where, partitions, replication)
            return Collector("ok", collector.brokers), None
        return collector, f"{problem}; {stay_spooled(pending)}"
    if collector.state == "missing":
        command = create_command(target, collector.brokers, props)
        return collector, (f"topic {target.topic} does not exist on {where}, which does not create topics on first "
                           f"use (auto.create.topics.enable=false): create it with `{command}`, or add "
                           f"--publish-create; {stay_spooled(pending)}")
    if collector.state == "denied":
        return collector, (f"not authorized to describe topic {target.topic} on {where} (TOPIC_AUTHORIZATION_FAILED): "
                           f"grant the principal of --publish-property DESCRIBE and WRITE on topic {target.topic}; "
                           f"{stay_spooled(pending)}")
    if collector.state == "unanswered" and not collector.refused:
        # A name that does not resolve, a timeout, refused credentials: the producer would only wait out its timeout.
        return collector, f"{where} not reachable ({collector.reason}); {stay_spooled(pending)}"
    # Refused connections go on to the producer, which retries within its timeout: a collector broker that is
    # restarting (a rolling restart) takes the report when it is back in time.
    return collector, None


def _create(target: Target, props: Mapping[str, str], brokers: int, timeout: float) -> str | None:
    """--publish-create: the reports topic as reports_topic says; None when made (or made meanwhile)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    partitions, replication, config = reports_topic(brokers)
    conf: dict[str, Any] = {**props, "bootstrap.servers": target.bootstrap, "client.id": "kprobe-publish",
                            "logger": _quiet_logger()}
    try:
        admin = AdminClient(conf)
        futures = admin.create_topics([NewTopic(target.topic, num_partitions=partitions,
                                                replication_factor=replication, config=config)],
                                      request_timeout=timeout, operation_timeout=timeout)
        futures[target.topic].result(timeout=timeout + 0.5)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return None
        reason = err.str() if isinstance(err, KafkaError) else str(exc)
        return (f"--publish-create could not create topic {target.topic} on collector {target.bootstrap} "
                f"({reason}): create it with `{create_command(target, brokers, props)}`")
    except Exception as exc:  # the future's own timeout (concurrent.futures.TimeoutError)
        return (f"--publish-create could not create topic {target.topic} on collector {target.bootstrap} within "
                f"{timeout:g}s ({type(exc).__name__})")
    return None


def _quiet_logger() -> logging.Logger:
    """The logger librdkafka's lines go to, kept off stderr (once per process: `watch` forwards every run)."""
    logger = logging.getLogger("kprobe.librdkafka.publish")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def _forward(spool: Spool, target: Target, props: Mapping[str, str], *, timeout: float,
             create: bool = False) -> tuple[int, int]:
    from confluent_kafka import KafkaException, Producer

    pending = spool.pending()
    if not pending:
        return 0, 0
    collector, problem = _before_producing(target, props, timeout, create, len(pending))
    if problem is not None:
        _LOG.warning("%s", problem)
        return 0, len(pending)
    conf: dict[str, Any] = {
        **props,
        "bootstrap.servers": target.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": max(1000, int(timeout * 1000)),
        "client.id": "kprobe-publish",
        "logger": _quiet_logger(),
    }
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        raise UsageError(f"bad publishing properties: {exc.args[0].str() if exc.args else exc}") from None
    sent = aside = 0
    try:
        for path in pending:
            try:
                text = path.read_text(encoding="utf-8")
                report = json.loads(text)
            except FileNotFoundError:  # removed by hand (or by a kprobe that ignores the lock): nothing to send
                continue
            except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested past the parser's depth
                _set_aside(path, "unreadable")
                aside += 1
                continue
            try:
                key = _key(report)
            except ValueError:
                _set_aside(path, "not a kprobe report (it has no vantage name)")
                aside += 1
                continue
            outcome: list[Any] = []

            def on_delivery(err: Any, msg: Any, box: list[Any] = outcome) -> None:
                box.append(err)

            value = text.encode()
            local = False
            try:
                producer.produce(target.topic, value=value, key=key, on_delivery=on_delivery)
            except KafkaException as exc:  # refused before sending: larger than message.max.bytes, say
                outcome.append(exc.args[0] if exc.args else exc)
                local = True
            else:
                try:
                    producer.flush(timeout)
                except Exception as exc:
                    # A fatal error (an idempotent producer refused its producer id: CLUSTER_AUTHORIZATION_FAILED)
                    # comes out of flush() as a SystemError whose cause is the KafkaException: keep its error.
                    outcome[:] = [_kafka_error(exc)]
            if not outcome or outcome[0] is not None:
                error = outcome[0] if outcome else None
                problem = delivery_problem(error, target, collector, len(value), props, timeout, local=local)
                _LOG.warning("%s; %s", problem, stay_spooled(len(pending) - sent - aside))
                break
            os.unlink(path)  # acknowledged: only now is it safe to forget
            sent += 1
    finally:
        producer.purge()  # never let a half-sent report go out after we gave up on it
        producer.flush(0)
        # Its threads stop now, not whenever the object is collected: an in-process caller (`watch`, a
        # test) would otherwise hear it retry a collector long gone. close() came in confluent-kafka 2.x.
        getattr(producer, "close", lambda: None)()
    return sent, len(spool.pending())


def _kafka_error(exc: BaseException) -> Any:
    """The KafkaError in an exception or its causes; the exception itself when none carries one."""
    from confluent_kafka import KafkaError, KafkaException

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KafkaException) and seen.args and isinstance(seen.args[0], KafkaError):
            return seen.args[0]
        seen = seen.__cause__ or seen.__context__
    return exc


def delivery_problem(error: Any, target: Target, collector: Collector, size: int, props: Mapping[str, str],
                     timeout: float, *, local: bool = False) -> str:
    """Why a report was not acknowledged, told from its delivery error code, with what to change.

    `error` is librdkafka's KafkaError (None: no delivery report in time); `local` when produce() itself
    refused it (librdkafka uses MSG_SIZE_TOO_LARGE for its own message.max.bytes as for the broker's). The
    codes that name a cause the user can act on get their own words; any other is quoted as librdkafka words it.
    """
    from confluent_kafka import KafkaError

    where = f"collector {target.bootstrap}"
    code = error.code() if isinstance(error, KafkaError) else None
    reason = error.str() if isinstance(error, KafkaError) else "no acknowledgement in time"
    if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
        # The idempotent producer's id (InitProducerId) needs WRITE on some topic from Kafka 2.8 on (KIP-679),
        # IDEMPOTENT_WRITE on the cluster before: without either it fails with CLUSTER_AUTHORIZATION_FAILED.
        also = ("" if code == KafkaError.TOPIC_AUTHORIZATION_FAILED else
                " (which also gives the idempotent producer its producer id; before Kafka 2.8, grant IDEMPOTENT_WRITE "
                "on the cluster too)")
        return (f"not authorized to write to topic {target.topic} on {where} ({reason}): grant the principal of "
                f"--publish-property WRITE on topic {target.topic}{also}")
    if code == KafkaError.MSG_SIZE_TOO_LARGE:
        fix = (f"raise the producer's limit with --publish-property message.max.bytes={size + 1024}" if local else
               f"raise the topic's limit: kafka-configs.sh --bootstrap-server {target.bootstrap} --alter --entity-type "
               f"topics --entity-name {target.topic} --add-config max.message.bytes={size + 1024}")
        return (f"a report of {size} bytes is larger than {'the producer' if local else f'topic {target.topic}'} "
                f"accepts ({reason}): {fix}, or compress with --publish-property compression.type=zstd")
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
        return (f"topic {target.topic} does not exist on {where} ({reason}): create it with "
                f"`{create_command(target, max(1, collector.brokers), props)}`, or add --publish-create")
    if code in (KafkaError._MSG_TIMED_OUT, None) or (code == KafkaError._TRANSPORT):
        if collector.state == "unanswered":
            return f"{where} not reachable ({collector.reason})"
        # The bootstrap answered, the partition's leader did not: the collector's own advertised listeners.
        return (f"{where} answered, but no broker acknowledged the report within {timeout:g}s ({reason}): its "
                f"advertised endpoints may not be reachable from here (`kprobe probe -b {target.bootstrap}` says)")
    return f"publishing to {where}/{target.topic} failed ({reason})"
