"""--publish against a real collector broker that creates no topic on first use (the lab's `collector`).

Each trouble a collector can give gets its own words, asked of the collector before producing and read
from the delivery error after: a topic that does not exist (with the command that makes it), a report
larger than the topic takes, a collector that cannot be reached at all, a principal not allowed to
write. The report stays spooled in each case; --publish-create makes the topic and publishes. A spooled
file that can never be sent is moved aside, without a broker.
"""

from __future__ import annotations

import gc
import json
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from acls import describe_granted
from cli_runner import run_cli
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args))


@pytest.fixture(autouse=True)
def _clients_destroyed() -> Iterator[None]:
    """Destroy the test's Kafka clients when it ends, as a process's exit does.

    An AdminClient whose futures still hold it lives on in a reference cycle, and once its broker stops,
    librdkafka writes `Connect ... failed` lines straight to file descriptor 2, into whatever kprobe run
    this process captures next (tests/support/cli_runner.py).
    """
    yield
    gc.collect()


def client_threads() -> list[str]:
    """librdkafka's threads in this process (`rdk:main`, `rdk:broker...`), by name."""
    import os

    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
        except OSError:  # a thread that ended meanwhile
            continue
    return sorted(name for name in names if name.startswith("rdk:"))


def published(bootstrap: str, topic: str, expected: int, *, props: dict | None = None,
              timeout: float = 20) -> list[str]:
    """The report ids on every partition of `topic`, read from the start (assigned: no group to join)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}", "enable.auto.commit": False,
                         **(props or {})})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # offset 0: the beginning
        ids: list[str] = []
        deadline = time.monotonic() + timeout
        while len(ids) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                ids.append(json.loads(msg.value())["id"])
        return ids
    finally:
        consumer.close()


def topics_of(bootstrap: str, props: dict | None = None) -> dict:
    return AdminClient({"bootstrap.servers": bootstrap, **(props or {})}).list_topics(timeout=10).topics


# The --timeout of a run whose time is asserted: a publishing failure said "at once" must come well inside
# it, and the run's own start-up (an interpreter, the probe of the collector) must too, on a machine whose
# four xdist workers share two CPUs.
ASKED_AT_ONCE = 6


def probe_publishing(collector: str, target: str, spool: Path, *extra: str,
                     timeout: int = 2) -> tuple[subprocess.CompletedProcess[str], float]:
    """One probe of the collector itself (a quick, healthy report) that publishes to `target`."""
    started = time.monotonic()
    done = kprobe("probe", "-b", collector, "--no-identity", "--json", "--timeout", str(timeout), "--publish", target,
                  "--spool", str(spool), *extra)
    return done, time.monotonic() - started


def test_a_missing_topic_says_how_to_create_it_and_publish_create_makes_it(collector_lab, tmp_path):
    collector = collector_lab.bootstrap("CLIENT")
    topic = f"kprobe-missing-{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool"
    done, took = probe_publishing(collector, f"{collector}/{topic}", spool, timeout=ASKED_AT_ONCE)
    assert done.returncode == 0, done.stderr  # the probe's verdict: publishing trouble never fails the run
    first = json.loads(done.stdout)["id"]
    assert done.stderr == (
        f"kprobe: topic {topic} does not exist on collector {collector}, which does not create topics on first use "
        f"(auto.create.topics.enable=false): create it with `kafka-topics.sh --bootstrap-server {collector} --create "
        f"--topic {topic} --partitions 6 --replication-factor 1`, or add --publish-create; 1 report stays spooled\n")
    assert [json.loads(p.read_text())["id"] for p in spool.glob("*.json")] == [first]
    assert took < ASKED_AT_ONCE  # told by the collector's metadata at once, not after the producer's timeout
    assert topic not in topics_of(collector)  # asking as a producer asks created nothing

    made, _ = probe_publishing(collector, f"{collector}/{topic}", spool, "--publish-create")
    assert made.returncode == 0, made.stderr
    second = json.loads(made.stdout)["id"]
    assert made.stderr == (f"kprobe: created topic {topic} on collector {collector} (--publish-create: 6 partitions, "
                           "replication factor 1)\n")
    assert list(spool.glob("*.json")) == []
    assert len(topics_of(collector)[topic].partitions) == 6
    assert sorted(published(collector, topic, 2)) == sorted([first, second])  # the spooled report went too


def test_the_labs_reports_topic_takes_reports(collector_lab, tmp_path):
    collector = collector_lab.bootstrap("CLIENT")
    assert (f"topic kprobe-reports (6 partitions, replication factor 1), made at start: publish with --publish "
            f"{collector}/kprobe-reports") in collector_lab.describe()
    assert "auto.create.topics.enable=false" in (collector_lab.node_dir(0) / "server.properties").read_text()
    done, _ = probe_publishing(collector, f"{collector}/kprobe-reports", tmp_path / "spool")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert list((tmp_path / "spool").glob("*.json")) == []
    report = json.loads(done.stdout)["id"]
    deadline = time.monotonic() + 20
    while report not in published(collector, "kprobe-reports", 1, timeout=1):  # other runs may publish there too
        assert time.monotonic() < deadline, "the report never reached kprobe-reports"


def test_a_report_larger_than_the_topic_takes_and_an_unknown_collector(collector_lab, tmp_path):
    collector = collector_lab.bootstrap("CLIENT")
    topic = f"kprobe-small-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": collector})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "200"})])[topic].result(30)
    spool = tmp_path / "spool"
    done, _ = probe_publishing(collector, f"{collector}/{topic}", spool)
    assert done.returncode == 0
    size = len(next(spool.glob("*.json")).read_bytes())
    assert done.stderr == (
        f"kprobe: a report of {size} bytes is larger than topic {topic} accepts (Broker: Message size too large): "
        f"raise the topic's limit: kafka-configs.sh --bootstrap-server {collector} --alter --entity-type topics "
        f"--entity-name {topic} --add-config max.message.bytes={size + 1024}, or compress with --publish-property "
        "compression.type=zstd; 1 report stays spooled\n")

    # A collector whose name does not resolve: said at once, in the resolver's words, never "timed out".
    nowhere, took = probe_publishing(collector, "collector.invalid:9092/kprobe-reports", spool, timeout=ASKED_AT_ONCE)
    assert nowhere.returncode == 0
    assert re.fullmatch(r"kprobe: collector collector\.invalid:9092 not reachable \(collector\.invalid: [^\n]+\); "
                        r"2 reports stay spooled\n", nowhere.stderr), nowhere.stderr
    assert took < ASKED_AT_ONCE and len(list(spool.glob("*.json"))) == 2


@pytest.mark.labs("sasl")
def test_not_authorized_to_describe_then_to_write(sasl_lab, tmp_path):
    """bob has no ACL: the topic is hidden from him; allowed to describe it and no more, he may not write."""

    alice, bob = sasl_lab.passwords["alice"], sasl_lab.passwords["bob"]
    bootstrap = sasl_lab.bootstrap("SASL_PLAIN")
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    topic = f"kprobe-guarded-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl, "sasl.username": "alice", "sasl.password": alice})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    as_bob = [f"--publish-property={k}={v}" for k, v in {**sasl, "sasl.username": "bob", "sasl.password": bob}.items()]
    spool = tmp_path / "spool"
    target = f"{bootstrap}/{topic}"

    hidden, _ = probe_publishing(bootstrap, target, spool, *as_bob, "-X", "security.protocol=SASL_PLAINTEXT",
                                 "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X",
                                 f"sasl.password={alice}")
    assert hidden.stderr == (f"kprobe: not authorized to describe topic {topic} on collector {bootstrap} "
                             "(TOPIC_AUTHORIZATION_FAILED): grant the principal of --publish-property DESCRIBE and "
                             f"WRITE on topic {topic}; 1 report stays spooled\n")

    del admin
    with describe_granted(bootstrap, alice, topic, "bob", bob):
        gc.collect()
        before = client_threads()
        deadline = time.monotonic() + 20
        gc.disable()  # the producer's threads must stop with the run, not when a collection finds it in a cycle
        try:
            while True:  # the ACL reaches the authorizer through the metadata log, a moment later
                denied, _ = probe_publishing(bootstrap, target, spool, *as_bob, "-X",
                                             "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN", "-X",
                                             "sasl.username=alice", "-X", f"sasl.password={alice}")
                if "not authorized to describe" not in denied.stderr or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert client_threads() == before  # it kept retrying the collector, after the run, until collected
        finally:
            gc.enable()
    # Kafka 4 refuses the idempotent producer its id first (InitProducerId needs WRITE on some topic, KIP-679).
    assert denied.stderr == (
        f"kprobe: not authorized to write to topic {topic} on collector {bootstrap} (Failed to acquire idempotence "
        f"PID from broker sasl_plaintext://{bootstrap}/0: Broker: Cluster authorization failed): grant the principal "
        f"of --publish-property WRITE on topic {topic} (which also gives the idempotent producer its producer id; "
        "before Kafka 2.8, grant IDEMPOTENT_WRITE on the cluster too); 2 reports stay spooled\n")
    for done in (hidden, denied):
        assert alice not in done.stdout + done.stderr and bob not in done.stdout + done.stderr
    assert len(list(spool.glob("*.json"))) == 2


def test_publish_create_without_publish_is_bad_usage(tmp_path):
    for command in ("probe", "watch"):
        done = kprobe(command, "-b", "127.0.0.1:9", "--publish-create", "--out", str(tmp_path / "out"))
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == ("kprobe: error: --publish-create needs --publish BOOTSTRAP/TOPIC: it creates that topic "
                               "when it is missing\n")
        assert not (tmp_path / "out").exists()  # refused before anything was written
    bad = kprobe("probe", "-b", "127.0.0.1:9", "--publish", "127.0.0.1:9/t", "--publish-property",
                 "security.protocol=FOO", "--spool", str(tmp_path / "spool"))
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == ("kprobe: error: --publish-property: bad security.protocol 'FOO': use one of PLAINTEXT, SSL, "
                          "SASL_PLAINTEXT, SASL_SSL\n")


def test_a_spooled_file_that_is_no_report_is_moved_aside_once_and_the_spool_goes_on(tmp_path):
    """Files a forwarder cannot send (no vantage name for the key, not a JSON object) are set aside as `.broken`,
    each said once, and the reports after them are tried: left in place they stopped every run at the same file.

    No broker: the collector is a closed loopback port, and refused connections go on to the producer (a
    restarting collector may be back in time), whose loop reads every spooled file in turn.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sock.getsockname()[1]}"
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    # Older than any report a run spools (names start with a nanosecond timestamp): the first ones reached.
    no_vantage, not_object = spool / f"{1:020d}-no-vantage.json", spool / f"{2:020d}-not-an-object.json"
    no_vantage.write_text('{"id": "r-1", "bootstraps": [{"cluster_id": "c"}]}')
    not_object.write_text("[1, 2]")
    refused = f"kprobe: collector {closed} not reachable (connect to {closed}: Connection refused)"

    first = kprobe("probe", "-b", closed, "--no-identity", "--json", "--timeout", "1", "--publish",
                   f"{closed}/kprobe-reports", "--spool", str(spool))
    assert first.returncode == 3  # the probe's own verdict on a closed bootstrap; publishing never fails a run
    assert first.stderr == (
        f"kprobe: spooled report {no_vantage.name} is not a kprobe report (it has no vantage name); moved aside to "
        f"{no_vantage.stem}.broken\n"
        f"kprobe: spooled report {not_object.name} is not a kprobe report (it has no vantage name); moved aside to "
        f"{not_object.stem}.broken\n"
        f"{refused}; 1 report stays spooled\n")
    assert sorted(p.name for p in spool.glob("*.broken")) == [f"{no_vantage.stem}.broken", f"{not_object.stem}.broken"]
    assert [json.loads(p.read_text())["id"] for p in spool.glob("*.json")] == [json.loads(first.stdout)["id"]]

    again = kprobe("probe", "-b", closed, "--no-identity", "--timeout", "1", "--publish", f"{closed}/kprobe-reports",
                   "--spool", str(spool))
    assert again.stderr == f"{refused}; 2 reports stay spooled\n"  # said once: the broken files are out of the spool
