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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kprobe.errors import UsageError

_LOG = logging.getLogger("kprobe.publish")
DEFAULT_SPOOL_MAX = 10_000


@dataclass(frozen=True)
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
    from kprobe.config import parse_addresses

    try:
        parse_addresses([bootstrap])
    except UsageError as exc:
        raise UsageError(f"bad {flag} {text!r}: {exc}") from None
    return Target(bootstrap, topic)


class Spool:
    """A directory of reports waiting to be sent, oldest first, bounded in count."""

    def __init__(self, directory: Path, max_files: int = DEFAULT_SPOOL_MAX) -> None:
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

        write_atomic(path, json.dumps(report, ensure_ascii=True))
        return path

    def pending(self) -> list[Path]:
        """Spooled reports, oldest first (names start with a nanosecond timestamp)."""
        return sorted(p for p in self.directory.glob("*.json") if not p.name.startswith("."))


def _key(report: Mapping[str, Any]) -> bytes:
    cluster = next((b.get("cluster_id") for b in report.get("bootstraps", []) if b.get("cluster_id")), None)
    return f"{cluster or 'unknown'}/{report['vantage']['name']}".encode()


def forward(spool: Spool, target: Target, props: Mapping[str, str], *, timeout: float) -> tuple[int, int]:
    """Send every spooled report, oldest first; returns (sent, still pending).

    Stops at the first report that is not acknowledged within `timeout`, so order is kept and
    an unreachable collector costs one timeout per run, not one per report.
    """
    with _forwarding(spool, timeout) as mine:
        if not mine:
            left = len(spool.pending())
            _LOG.warning("another kprobe is forwarding spool %s; %d reports stay spooled", spool.directory, left)
            return 0, left
        return _forward(spool, target, props, timeout=timeout)


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


def _forward(spool: Spool, target: Target, props: Mapping[str, str], *, timeout: float) -> tuple[int, int]:
    from confluent_kafka import KafkaException, Producer

    pending = spool.pending()
    if not pending:
        return 0, 0
    logger = logging.getLogger("kprobe.librdkafka.publish")
    logger.propagate = False
    if not logger.handlers:  # once per process: `watch` forwards every run, handlers must not pile up
        logger.addHandler(logging.NullHandler())
    conf: dict[str, Any] = {
        **props,
        "bootstrap.servers": target.bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": max(1000, int(timeout * 1000)),
        "client.id": "kprobe-publish",
        "logger": logger,
    }
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        raise UsageError(f"bad publishing properties: {exc.args[0].str() if exc.args else exc}") from None
    sent = 0
    try:
        for path in pending:
            try:
                text = path.read_text(encoding="utf-8")
                report = json.loads(text)
            except FileNotFoundError:  # removed by hand (or by a kprobe that ignores the lock): nothing to send
                continue
            except (OSError, ValueError):
                _LOG.warning("spooled report %s is unreadable; moved aside", path.name)
                path.rename(path.with_suffix(".broken"))
                continue
            outcome: list[Any] = []

            def on_delivery(err: Any, msg: Any, box: list[Any] = outcome) -> None:
                box.append(err)

            producer.produce(target.topic, value=text.encode(), key=_key(report), on_delivery=on_delivery)
            producer.flush(timeout)
            if not outcome or outcome[0] is not None:
                reason = outcome[0].str() if outcome and outcome[0] is not None else "no acknowledgement in time"
                _LOG.warning("collector %s/%s not reachable (%s): %d reports stay spooled", target.bootstrap,
                             target.topic, reason, len(pending) - sent)
                break
            os.unlink(path)  # acknowledged: only now is it safe to forget
            sent += 1
    finally:
        producer.purge()  # never let a half-sent report go out after we gave up on it
        producer.flush(0)
    return sent, len(spool.pending())
