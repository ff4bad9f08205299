"""--roundtrip on real brokers: a real client's produce and consume set beside kprobe's verdict.

The three-brokers lab gives a healthy listener (CLIENT), one where broker 2 advertises a black hole
(BLACKHOLED) and one where an HTTP server answers for broker 2 (IMPOSTOR); the sasl lab gives an
authorizer, so a principal that may describe a topic and not write to it meets a broker's refusal.
Every record kprobe writes is marked (key and run header): the tests read them back to check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
from acls import describe_granted
from cli_runner import run_cli
from report_check import validate

pytestmark = pytest.mark.labs("three-brokers")


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` in this process (tests/support/cli_runner.py): a child's output and exit code, without its start-up."""
    return run_cli(list(args))


def child(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m kprobe ARGS` as a process of its own: for the runs a deadline cuts, which must end the process
    with its round trip unfinished (an abandoned librdkafka producer would outlive an in-process run)."""
    return subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True, timeout=90,
                          check=False)


def probe_json(*args: str, run=kprobe) -> tuple[int, dict]:
    done = run("probe", "--json", *args)
    data = json.loads(done.stdout)
    validate(data)
    return done.returncode, data


@pytest.fixture(scope="module")
def canary(three_lab) -> tuple[str, dict]:
    """A topic --roundtrip-create makes (one partition per broker), and the JSON of the run that made it."""
    topic = f"canary-{uuid.uuid4().hex[:8]}"
    code, data = probe_json("-b", three_lab.bootstrap("CLIENT"), "--roundtrip", topic, "--roundtrip-create")
    assert code == 0, (data["findings"], data["roundtrip"])
    return topic, data


def test_create_then_every_partition_round_trips(canary, three_lab):
    topic, data = canary
    rt = data["roundtrip"]
    assert rt["created"] is True and rt["status"] == "ok" and rt["client"].startswith("librdkafka ")
    assert sorted(p["partition"] for p in rt["partitions"]) == [0, 1, 2]
    assert sorted(p["leader"] for p in rt["partitions"]) == [0, 1, 2]  # one partition led by each broker
    assert all(p["status"] == "ok" and p["roundtrip_ms"] >= p["produce_ms"] > 0 for p in rt["partitions"])
    assert data["summary"]["status"] == "ok" and data["findings"] == []
    # Again, on the topic as it now is: not created twice, and the text says the same in words.
    text = kprobe("probe", "-b", three_lab.bootstrap("CLIENT"), "--roundtrip", topic)
    assert text.returncode == 0, text.stdout
    assert f"Round trip on topic {topic} through librdkafka" in text.stdout
    assert "3/3 partitions produced and read back" in text.stdout
    assert "3/3 partitions round-tripped" in text.stdout.splitlines()[-1]
    assert "created by this run" not in text.stdout


def test_records_are_marked_as_kprobes(canary, three_lab):
    """A consumer of a shared canary topic must be able to tell kprobe's records and skip them."""
    from confluent_kafka import Consumer, TopicPartition

    topic, data = canary
    consumer = Consumer({"bootstrap.servers": three_lab.bootstrap("CLIENT"), "group.id": "t-" + uuid.uuid4().hex,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p["partition"], p["offset"]) for p in data["roundtrip"]["partitions"]])
        seen = {}
        end = time.monotonic() + 20
        while len(seen) < 3 and time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.setdefault(msg.partition(), msg)  # the record at the offset kprobe reported, not a later run's
    finally:
        consumer.close()
    assert sorted(seen) == [0, 1, 2]
    for partition, msg in seen.items():
        headers = dict(msg.headers())
        assert msg.key() == b"kprobe-roundtrip"
        assert headers["kprobe-run"] == data["id"].encode()
        assert json.loads(msg.value()) == {"kprobe": "roundtrip", "run": data["id"], "partition": partition}


def test_partial_cluster_names_the_failing_partition_and_agrees(canary, three_lab):
    """Broker 2 advertises a black hole: its partition fails, the others work, and the verdict already said so."""
    topic, _ = canary
    started = time.monotonic()
    code, data = probe_json("-b", three_lab.real_endpoint("BLACKHOLED", 0), "--timeout", "2", "--deadline", "5",
                            "--roundtrip", topic, run=child)
    assert code == 1
    by_partition = {p["leader"]: p for p in data["roundtrip"]["partitions"]}
    assert by_partition[2]["status"] == "produce_failed"
    # librdkafka's own timeout, or the deadline first (it scans for timed-out records once a second).
    assert any(why in by_partition[2]["error"] for why in ("Message timed out", "no acknowledgement before the run's"))
    assert "broker 2 at 127.0.0.34:" in by_partition[2]["error"]
    assert by_partition[0]["status"] == by_partition[1]["status"] == "ok"
    assert data["roundtrip"]["status"] == "failed"
    codes = {(f["code"], f["node_id"]) for f in data["findings"]}
    assert ("ADVERTISED_TIMEOUT", 2) in codes
    assert not any(code.startswith("ROUNDTRIP_") for code, _ in codes)  # agreement: nothing to add
    # The failing partition waits out the deadline, as a patient client would; the working ones do not wait.
    assert by_partition[0]["roundtrip_ms"] < 2000 and by_partition[1]["roundtrip_ms"] < 2000
    assert data["duration_ms"] < 5000 + 500 and time.monotonic() - started < 5 + 8


def test_deadline_shorter_than_the_round_trip_leaves_partitions_unfinished(canary, three_lab):
    """An HTTP server answers for broker 2: librdkafka retries until its message timeout, which the deadline cuts."""
    topic, _ = canary
    started = time.monotonic()
    code, data = probe_json("-b", three_lab.real_endpoint("IMPOSTOR", 0), "--timeout", "10", "--deadline", "3",
                            "--roundtrip", topic, run=child)
    elapsed = time.monotonic() - started
    assert code == 1
    rt = data["roundtrip"]
    by_leader = {p["leader"]: p for p in rt["partitions"]}
    assert by_leader[2]["status"] == "unfinished", json.dumps(by_leader[2])
    assert "deadline" in by_leader[2]["error"]
    assert by_leader[0]["status"] == by_leader[1]["status"] == "ok"
    assert rt["status"] == "unfinished"
    incomplete = [f for f in data["findings"] if f["code"] == "RUN_INCOMPLETE"]
    assert incomplete and f"round trip on topic '{topic}'" in incomplete[0]["message"]
    assert ("ENDPOINT_NOT_KAFKA", 2) in {(f["code"], f["node_id"]) for f in data["findings"]}
    assert data["duration_ms"] < 3000 + 500 and elapsed < 3 + 8  # the deadline holds (plus interpreter start)


def test_missing_topic_is_one_line_and_exit_2(three_lab):
    done = kprobe("probe", "-b", three_lab.bootstrap("CLIENT"), "--roundtrip", "no-such-topic-" + uuid.uuid4().hex[:6])
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("kprobe: error: --roundtrip: topic 'no-such-topic-") and "--roundtrip-create" in line


@pytest.mark.parametrize(("args", "says"), [
    (["--roundtrip", "bad topic"], "bad --roundtrip 'bad topic'"),
    (["--roundtrip-create"], "--roundtrip-create needs --roundtrip TOPIC"),
    (["--roundtrip", "t", "--nameserver", "127.0.0.1"], "cannot honour --nameserver, --resolve or --connect-to"),
    (["--roundtrip", "t", "--resolve", "kafka0=127.0.0.31"], "cannot honour --nameserver, --resolve or --connect-to"),
])
def test_bad_roundtrip_options_are_one_line(args, says):
    done = kprobe("probe", "-b", "127.0.0.1:1", *args)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert says in line


def test_watch_takes_the_round_trip_as_a_canary(canary, three_lab):
    topic, _ = canary
    # Each run's deadline is the interval (kprobe/delivery/watch.py): the probe and a round trip of three partitions,
    # which on a loaded machine can take longer than 1 s.
    done = kprobe("watch", "-b", three_lab.bootstrap("CLIENT"), "--every", "4s", "--count", "2", "--roundtrip", topic)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all("3/3 partitions round-tripped" in line and " OK:" in line for line in lines)
    prom = kprobe("probe", "-b", three_lab.bootstrap("CLIENT"), "--roundtrip", topic, "--format", "prometheus")
    assert f'kprobe_roundtrip_success{{topic="{topic}",vantage=' in prom.stdout
    ok = [ln for ln in prom.stdout.splitlines() if ln.startswith("kprobe_roundtrip_partition_ok{")]
    assert len(ok) == 3 and all(ln.endswith(" 1") for ln in ok)


@pytest.mark.labs("sasl")
def test_over_sasl_a_broker_refusal_is_its_own_finding_and_no_secret_leaks(sasl_lab):
    """alice creates the topic and lets bob describe it, not write: bob's produce meets the broker's refusal."""
    topic = f"sasl-canary-{uuid.uuid4().hex[:8]}"
    alice, bob = sasl_lab.passwords["alice"], sasl_lab.passwords["bob"]

    def sasl(user: str, password: str) -> list[str]:
        return ["-b", sasl_lab.bootstrap("SASL_PLAIN"), "-X", "security.protocol=SASL_PLAINTEXT", "-X",
                "sasl.mechanism=PLAIN", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]

    made = kprobe("probe", "--json", *sasl("alice", alice), "--roundtrip", topic, "--roundtrip-create")
    assert made.returncode == 0, made.stdout[-2000:]
    assert alice not in made.stdout + made.stderr
    assert json.loads(made.stdout)["roundtrip"]["status"] == "ok"
    partitions = len(json.loads(made.stdout)["roundtrip"]["partitions"])
    # The same successful round trip in every other output: the text, the metrics, and -v's log lines, with
    # librdkafka's own debug lines for its configuration and the SASL exchange (the likeliest to echo a secret).
    text = kprobe("probe", *sasl("alice", alice), "--roundtrip", topic)
    assert text.returncode == 0, text.stdout[-2000:]
    assert f"{partitions}/{partitions} partitions produced and read back" in text.stdout
    metrics = kprobe("probe", *sasl("alice", alice), "--roundtrip", topic, "--format", "prometheus")
    assert metrics.returncode == 0, metrics.stdout[-2000:]
    assert f'kprobe_roundtrip_success{{topic="{topic}",' in metrics.stdout
    verbose = kprobe("probe", *sasl("alice", alice), "-X", "debug=conf,security", "--roundtrip", topic, "-v")
    assert verbose.returncode == 0, verbose.stderr[-2000:]
    assert "kprobe: librdkafka: " in verbose.stderr and "SASL" in verbose.stderr  # the debug lines were there
    assert f"{partitions}/{partitions} partitions produced and read back" in verbose.stdout
    for done in (text, metrics, verbose):
        assert alice not in done.stdout and alice not in done.stderr, done.args
    # bob may not even describe it yet: to him the topic is not there.
    hidden = kprobe("probe", *sasl("bob", bob), "--roundtrip", topic)
    assert hidden.returncode == 2 and "may not describe it" in hidden.stderr and bob not in hidden.stderr
    with describe_granted(sasl_lab.bootstrap("SASL_PLAIN"), alice, topic, "bob", bob):
        deadline = time.monotonic() + 30
        while True:  # the ACL reaches the broker's authorizer through the metadata log, a moment later
            done = kprobe("probe", "--json", *sasl("bob", bob), "--roundtrip", topic, "--timeout", "3")
            if done.returncode != 2 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
    assert bob not in done.stdout + done.stderr
    data = json.loads(done.stdout)
    validate(data)
    assert done.returncode == 1
    [partition] = data["roundtrip"]["partitions"]
    assert partition["status"] == "produce_failed" and partition["broker_error"] is True
    assert "authorization" in partition["error"].lower()
    [failed] = [f for f in data["findings"] if f["code"] == "ROUNDTRIP_FAILED"]
    assert failed["severity"] == "error" and "Write and Read" in failed["fix"]
    assert "ROUNDTRIP_DISAGREES" not in {f["code"] for f in data["findings"]}
    assert data["settings"]["properties"]["sasl.password"] == "[redacted]"


def test_settings_librdkafka_refuses_are_not_run_not_a_disagreement(canary, three_lab):
    """A property librdkafka rejects (or a mechanism it lacks, AWS_MSK_IAM) tries no record: nothing to compare."""
    topic, _ = canary
    code, data = probe_json("-b", three_lab.bootstrap("CLIENT"), "-X", "compression.type=bogus", "--roundtrip", topic)
    assert code == 1  # a round trip asked for and not made is a gap
    rt = data["roundtrip"]
    assert rt["status"] == "not_run" and rt["partitions"] == []
    assert rt["error"].startswith("librdkafka refused the settings:") and "bogus" in rt["error"]
    # Nothing to set beside the verdict: the one round-trip finding says it did not run, and why.
    trips = [f for f in data["findings"] if f["code"].startswith("ROUNDTRIP_")]
    assert [f["code"] for f in trips] == ["ROUNDTRIP_NOT_RUN"] and "bogus" in trips[0]["message"]
