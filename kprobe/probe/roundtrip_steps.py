"""--roundtrip's steps for the application's group and transactional id: its coordinators' path, proven.

The partitions' round trip proves the leaders. An application in a group also joins it and commits
through the group coordinator, and a transactional producer registers with the transaction
coordinator and commits there: paths of their own, through one partition of `__consumer_offsets` or
`__transaction_state` and the broker leading it.

Each step runs with an id of kprobe's own placed on the very partition the application's id hashes
to (a twin), so it takes the same coordinator, the same internal partition and the same endpoints,
while the application's live group is never rebalanced by a stranger joining it and its live
producer is never fenced by a second one with its transactional id. The twin is stable per vantage,
so repeated runs reuse one group and one transactional id rather than leave new ones behind.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kprobe.kafka.coordinator_codec import partition_for
from kprobe.models import (
    INTERNAL_DEFAULTS,
    OFFSETS_TOPIC,
    SETTINGS_PREFIX,
    TRANSACTIONS_TOPIC,
    BootstrapResult,
    RoundtripStatus,
    RoundtripStep,
)
from kprobe.probe.context import RunContext
from kprobe.probe.marks import KEY, RUN_HEADER, describe_error

# Waiting less than this for a group's assignment or a transaction's start proves nothing either way: the
# deadline came first (unfinished). Past it, a coordinator that never answered is a failure, as the
# application meets it (measured: consumers with no coordinator wait forever; initTransactions times out).
_FAIR_WAIT = 5.0
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def twin(key: str, partitions: int, kind: str, vantage: str) -> tuple[str, int]:
    """A kprobe id on the partition `key` hashes to: `kprobe-<kind>-<vantage>-<n>`, the first n that lands there."""
    target = partition_for(key, partitions)
    base = f"kprobe-{kind}-{_SAFE.sub('-', vantage)[:40] or 'vantage'}"
    for n in range(max(1000, 40 * partitions)):
        candidate = f"{base}-{n}"
        if partition_for(candidate, partitions) == target:
            return candidate, target
    return f"{base}-x", partition_for(f"{base}-x", partitions)  # a partition count no hash fills: not the same


def _partitions(topic: str, answered: Sequence[BootstrapResult]) -> int:
    """The internal topic's partition count: listed in a bootstrap's answer, else the brokers' setting, else Kafka's."""
    for b in answered:
        for t in b.metadata.topics if b.metadata else ():
            if t.name == topic and t.partitions:
                return len(t.partitions)
    key = f"{SETTINGS_PREFIX[topic]}.num.partitions"
    for b in answered:
        value = b.application.settings.get(key, "") if b.application else ""
        if value.isdigit() and int(value) > 0:
            return int(value)
    return INTERNAL_DEFAULTS[key]


def group_step(key: str, topic: str, offsets: Mapping[int, int], answered: Sequence[BootstrapResult],
               conf: Mapping[str, Any], ctx: RunContext, *, run_id: str, vantage: str) -> RoundtripStep:
    """Join a group placed as `key`, read back the round trip's records through it, and commit them."""
    from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition

    name, partition = twin(key, _partitions(OFFSETS_TOPIC, answered), "roundtrip-group", vantage)
    started = time.monotonic()

    def step(status: RoundtripStatus, error: str | None = None) -> RoundtripStep:
        return RoundtripStep(kind="group", key=key, twin=name, partition=partition, status=status, error=error,
                             ms=(time.monotonic() - started) * 1000)

    if not offsets:
        return step("not_run", "no record was acknowledged, so none could be read back through the group")
    incremental = ("cooperative" in str(conf.get("partition.assignment.strategy", ""))
                   or str(conf.get("group.protocol", "")).lower() == "consumer")
    state: dict[str, Any] = {"assigned": False, "error": None}

    def on_assign(consumer: Any, parts: list[Any]) -> None:
        wanted = [TopicPartition(topic, tp.partition, offsets.get(tp.partition, OFFSET_END)) for tp in parts]
        (consumer.incremental_assign if incremental else consumer.assign)(wanted)
        state["assigned"] = True

    try:
        consumer = Consumer({**conf, "group.id": name, "enable.auto.commit": False, "auto.offset.reset": "latest",
                             "fetch.wait.max.ms": 50, "enable.partition.eof": False})
    except KafkaException as exc:
        return step("not_run", f"librdkafka refused the settings: {describe_error(exc)[0]}")
    marker = run_id.encode()
    seen: set[int] = set()
    try:
        consumer.subscribe([topic], on_assign=on_assign)
        while time.monotonic() < ctx.deadline and not set(offsets) <= seen:
            msg = consumer.poll(0.05)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                text, by_broker = describe_error(err)
                if by_broker:  # the broker refused (an ACL on the group or the topic): it will not change
                    state["error"] = text
                    break
                continue
            part = msg.partition()
            if msg.key() == KEY and (RUN_HEADER, marker) in (msg.headers() or []) and part is not None:
                seen.add(part)
        waited = time.monotonic() - started
        if state["error"] is not None:
            return step("failed", state["error"])
        if not state["assigned"]:
            if waited < _FAIR_WAIT:
                return step("unfinished", "the run's deadline came before the group gave an assignment")
            return step("failed", f"no assignment from the group coordinator in {waited:.1f} s: the group was "
                                  "never joined")
        if not seen:
            return step("failed", f"joined, but read none of the round trip's records back in {waited:.1f} s")
        try:
            consumer.commit(offsets=[TopicPartition(topic, p, offsets[p] + 1) for p in sorted(seen)],
                            asynchronous=False)
        except KafkaException as exc:
            return step("failed", f"joined and read back, but the commit failed: {describe_error(exc)[0]}")
        missing = sorted(set(offsets) - seen)
        if missing:
            return step("unfinished" if waited < _FAIR_WAIT else "failed",
                        f"partition(s) {', '.join(map(str, missing[:20]))} not read back through the group")
        return step("ok")
    finally:
        consumer.close()


def transaction_step(key: str, topic: str, partitions: Sequence[int], answered: Sequence[BootstrapResult],
                     conf: Mapping[str, Any], ctx: RunContext, *, run_id: str, vantage: str) -> RoundtripStep:
    """Commit one transaction, with one marked record, through a transactional id placed as `key`."""
    from confluent_kafka import KafkaException, Producer

    name, partition = twin(key, _partitions(TRANSACTIONS_TOPIC, answered), "roundtrip-tx", vantage)
    started = time.monotonic()

    def step(status: RoundtripStatus, error: str | None = None) -> RoundtripStep:
        return RoundtripStep(kind="transaction", key=key, twin=name, partition=partition, status=status,
                             error=error, ms=(time.monotonic() - started) * 1000)

    budget = ctx.deadline - time.monotonic()
    if budget < 0.5:
        return step("unfinished", "the run's deadline came before the transaction could start")
    try:
        producer = Producer({**conf, "transactional.id": name, "linger.ms": 0,
                             "transaction.timeout.ms": max(1000, int(budget * 1000) + 1000)})
    except KafkaException as exc:
        return step("not_run", f"librdkafka refused the settings: {describe_error(exc)[0]}")
    what = "initTransactions"
    try:
        producer.init_transactions(max(0.1, ctx.deadline - time.monotonic()))
        what = "the transaction"
        producer.begin_transaction()
        value = json.dumps({"kprobe": "roundtrip", "run": run_id, "transaction": True}).encode()
        producer.produce(topic, value=value, key=KEY, partition=min(partitions) if partitions else -1,
                         headers=[(RUN_HEADER, run_id.encode())])
        producer.commit_transaction(max(0.1, ctx.deadline - time.monotonic()))
    except KafkaException as exc:
        waited = time.monotonic() - started
        text = describe_error(exc)[0]
        if waited < _FAIR_WAIT and "timed out" in text.lower():
            return step("unfinished", f"the run's deadline came before {what} completed")
        return step("failed", f"{what} failed after {waited:.1f} s: {text}")
    finally:
        getattr(producer, "close", lambda: None)()
    return step("ok")
