"""The application's view on real brokers: kprobe's verdict beside real group consumers and transactional producers.

Every endpoint works in these cases, or the one that fails leads nothing the application produces
to, and still an application hangs: its group's coordinator cannot be found or reached, its
transactions cannot start. kprobe is given the application's own properties file (`-F`, with its
`group.id` and `transactional.id`); the Java client and librdkafka load the same file and run as the
application would (tests/support/real_group_clients.py). A case agrees when kprobe names the cause exactly
where the applications fail, and says nothing where they work.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import new_topic, restart_settled, topic_on
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from real_clients import librdkafka_round_trip
from real_group_clients import (
    OLD_JAVA_CLIENTS,
    AppOutcome,
    java_app,
    librdkafka_app,
    old_clients_classpath,
    old_java_app,
)

from kprobe.kafka.connection import KafkaConnection
from kprobe.kafka.coordinator_codec import KEY_GROUP, KEY_TRANSACTION, partition_for
from kprobe.kafka.coordinators import ask_coordinators, find_coordinator_version
from kprobe.lab.native import NativeLab

BUDGET_MS = 8000  # how long an application expected to fail waits: a working group reads its record in a second here
# An application expected to work returns at its first record, so its budget only bounds a failure: long enough
# for a Java consumer's start, join and fetch on a machine whose two CPUs the rest of the suite keeps busy.
WORKING_MS = 45000
OFFSETS, TRANSACTIONS = "__consumer_offsets", "__transaction_state"


def _probe(*args: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-m", "2s", "--json", *args], capture_output=True,
                          text=True, timeout=60, check=False)
    try:
        return done.returncode, json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"no report (exit {done.returncode}): {done.stderr[-1000:]}") from None


def _codes(report: dict) -> dict[str, list[tuple[str, int | None]]]:
    found: dict[str, list[tuple[str, int | None]]] = {}
    for f in report["findings"]:
        found.setdefault(f["code"], []).append((f["severity"], f.get("node_id")))
    return found


def _properties(tmp_path: Path, name: str, bootstrap: str, **settings: str) -> Path:
    path = tmp_path / f"{name}.properties"
    lines = [f"bootstrap.servers={bootstrap}", *(f"{k.replace('_', '.')}={v}" for k, v in settings.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _produce(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    for p in range(partitions):
        producer.produce(topic, value=b"for the group", partition=p)
    assert producer.flush(15) == 0, "the test's own records were not delivered"


def _apps(lab: NativeLab, tmp_path: Path, runs: list[tuple[str, str, Path, Path, bool]],
          budget_ms: int = BUDGET_MS) -> list[AppOutcome]:
    """Each (mode, topic, the Java client's properties, librdkafka's, whether it should work) by both clients, all at
    once: their waits overlap. Each client has a file (a group) of its own: two members of one group would share its
    partitions. One expected to fail waits `budget_ms`, one expected to work WORKING_MS (it stops at its record).
    """
    def wait(works: bool) -> int:
        return max(budget_ms, WORKING_MS) if works else budget_ms

    with ThreadPoolExecutor(max_workers=2 * len(runs)) as pool:
        futures = [pool.submit(java_app, mode, lab.classpath, tmp_path, topic, java, wait(works))
                   for mode, topic, java, _, works in runs]
        futures += [pool.submit(librdkafka_app, mode, topic, rd, wait(works)) for mode, topic, _, rd, works in runs]
        return [f.result() for f in futures]


def _leaders(lab: NativeLab, topic: str) -> dict[int, int]:
    """A topic's partition leaders as broker 0 answers (-1: none)."""
    ip, port = lab.real_endpoint("CLIENT", 0).rsplit(":", 1)
    with KafkaConnection(ip, int(port), timeout=5) as conn:
        conn.open()
        topics = {t.name: t for t in conn.metadata([topic]).topics}
    return {p.partition: p.leader for p in topics[topic].partitions} if topic in topics else {}


def _internal_ready(lab: NativeLab, topic: str = OFFSETS) -> dict[int, int]:
    """An internal topic made by a first coordinator lookup (kprobe's, as a first client's) and led everywhere."""
    option = "--group" if topic == OFFSETS else "--transactional-id"
    _, report = _probe("-b", lab.bootstrap("CLIENT"), option, "warm-up")
    assert report["application"]["coordinators"][0]["node_id"] is not None, report["findings"]
    deadline = time.monotonic() + 30
    while not (leaders := _leaders(lab, topic)) or min(leaders.values()) < 0:
        assert time.monotonic() < deadline, f"{topic} not led everywhere: {leaders}"
        time.sleep(0.1)
    return leaders


def _groups_led_by(leaders: dict[int, int], node: int, prefix: str) -> tuple[str, str, str]:
    """Three group ids whose coordinator is `node`: kprobe's, the Java client's and librdkafka's."""
    found = [g for g in (f"{prefix}-{i}" for i in range(1000)) if leaders[partition_for(g, len(leaders))] == node]
    return found[0], found[1], found[2]


def test_one_broker_with_kafkas_defaults_groups_and_transactions_cannot_work(defaults_lab, tmp_path: Path) -> None:
    """offsets.topic.replication.factor and transaction.state.log.* at Kafka's defaults on one broker."""
    bootstrap = defaults_lab.bootstrap("CLIENT")
    _produce(bootstrap, "orders", 2)  # producers work: the endpoints are fine
    app = _properties(tmp_path, "app", bootstrap, group_id="orders-app", transactional_id="orders-tx")
    java = _properties(tmp_path, "java", bootstrap, group_id="orders-java", transactional_id="orders-tx-java")
    rd = _properties(tmp_path, "rd", bootstrap, group_id="orders-rd", transactional_id="orders-tx-rd")

    code, plain = _probe("-b", bootstrap)
    assert code == 1
    assert _codes(plain) == {"OFFSETS_TOPIC_UNCREATABLE": [("error", None)],
                             "TRANSACTION_LOG_UNCREATABLE": [("warning", None)]}
    message = next(f["message"] for f in plain["findings"] if f["code"] == "OFFSETS_TOPIC_UNCREATABLE")
    assert "offsets.topic.replication.factor=3" in message and "1 live broker" in message

    code, named = _probe("-F", str(app))
    assert code == 1
    assert _codes(named) == {"OFFSETS_TOPIC_UNCREATABLE": [("error", None)],
                             "TRANSACTION_LOG_UNCREATABLE": [("error", None)],
                             "COORDINATOR_NOT_AVAILABLE": [("error", None), ("error", None)]}
    assert [c["error"] for c in named["application"]["coordinators"]] == ["COORDINATOR_NOT_AVAILABLE"] * 2

    outcomes = _apps(defaults_lab, tmp_path, [("consume", "orders", java, rd, False),
                                              ("transact", "orders", java, rd, False)])
    assert [o.ok for o in outcomes] == [False] * 4, outcomes


def test_a_group_whose_coordinator_is_behind_the_broken_listener(groups_lab, tmp_path: Path) -> None:
    """Broker 2 advertises a closed port on BROKEN2; the topic lives on brokers 0 and 1 only."""
    topic = topic_on(groups_lab, "billing", [[0], [1]])
    _produce(groups_lab.bootstrap("CLIENT"), topic, 2)
    leaders = _internal_ready(groups_lab)
    stuck, works = _groups_led_by(leaders, 2, "billing"), _groups_led_by(leaders, 0, "billing")
    bootstrap = groups_lab.bootstrap("BROKEN2", 0)
    files = {g: _properties(tmp_path, g, bootstrap, group_id=g) for g in (*stuck, *works)}

    code, report = _probe("-F", str(files[stuck[0]]), "-t", topic)
    assert code == 1
    codes = _codes(report)
    assert codes["COORDINATOR_UNREACHABLE"] == [("error", 2)] and codes["ADVERTISED_REFUSED"] == [("error", 2)]
    coordinator = report["application"]["coordinators"][0]
    assert (coordinator["node_id"], coordinator["java_id"], coordinator["status"]) == (2, 2147483645, "unreachable")
    assert coordinator["partition_leader"] == 2 and coordinator["endpoint"].endswith(":1")
    code, report = _probe("-F", str(files[works[0]]), "-t", topic)
    assert "COORDINATOR_UNREACHABLE" not in _codes(report) and "COORDINATOR_NOT_AVAILABLE" not in _codes(report)
    assert report["application"]["coordinators"][0]["node_id"] == 0

    outcomes = _apps(groups_lab, tmp_path, [("consume", topic, files[stuck[1]], files[stuck[2]], False),
                                            ("consume", topic, files[works[1]], files[works[2]], True)])
    assert [(o.client, o.ok) for o in outcomes] == [("java", False), ("java", True), ("librdkafka", False),
                                                    ("librdkafka", True)], outcomes


def test_an_offsets_partition_offline_after_its_broker_stops(groups_lab, tmp_path: Path) -> None:
    """offsets.topic.replication.factor=1 and broker 2 stopped: its groups hang, the others work."""
    topic = topic_on(groups_lab, "ledger", [[0], [1]])
    _produce(groups_lab.bootstrap("CLIENT"), topic, 2)
    leaders = _internal_ready(groups_lab)
    stuck, works = _groups_led_by(leaders, 2, "ledger"), _groups_led_by(leaders, 0, "ledger")
    bootstrap = groups_lab.bootstrap("CLIENT", 0)
    files = {g: _properties(tmp_path, g, bootstrap, group_id=g) for g in (*stuck, *works)}
    on_two = sorted(p for p, leader in leaders.items() if leader == 2)
    groups_lab.stop_node(2)
    try:
        deadline = time.monotonic() + 30
        while any(_leaders(groups_lab, OFFSETS)[p] >= 0 for p in on_two):
            assert time.monotonic() < deadline, "broker 2's offsets partitions kept a leader"
            time.sleep(0.2)
        code, report = _probe("-b", bootstrap)
        assert code == 1
        offline = next(f for f in report["findings"] if f["code"] == "OFFSETS_PARTITIONS_OFFLINE")
        assert offline["severity"] == "error" and f"{len(on_two)} of 12 partitions" in offline["message"]
        assert next(t for t in report["application"]["internal_topics"] if t["name"] == OFFSETS)["offline"] == on_two

        code, report = _probe("-F", str(files[stuck[0]]))
        assert _codes(report)["COORDINATOR_NOT_AVAILABLE"] == [("error", None)]
        assert "which has no leader" in next(f["message"] for f in report["findings"]
                                             if f["code"] == "COORDINATOR_NOT_AVAILABLE")
        code, report = _probe("-F", str(files[works[0]]))
        assert "COORDINATOR_NOT_AVAILABLE" not in _codes(report)

        outcomes = _apps(groups_lab, tmp_path, [("consume", topic, files[stuck[1]], files[stuck[2]], False),
                                                ("consume", topic, files[works[1]], files[works[2]], True)])
        assert [(o.client, o.ok) for o in outcomes] == [("java", False), ("java", True), ("librdkafka", False),
                                                        ("librdkafka", True)], outcomes
    finally:
        restart_settled(groups_lab, 2)


KEYS = st.text(min_size=1, max_size=40)


@pytest.fixture(scope="module")
def placed(groups_lab) -> Iterator[dict[str, object]]:
    """One connection to broker 0 and both internal topics' leaders, made by a first lookup of each kind."""
    offsets, txn = _internal_ready(groups_lab), _internal_ready(groups_lab, TRANSACTIONS)
    ip, port = groups_lab.real_endpoint("CLIENT", 0).rsplit(":", 1)
    conn = KafkaConnection(ip, int(port), timeout=5)
    conn.open()
    yield {"conn": conn, OFFSETS: offsets, TRANSACTIONS: txn}
    conn.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(KEYS, min_size=1, max_size=8, unique=True))
def test_keys_are_placed_as_the_broker_places_them(placed: dict, keys: list[str]) -> None:
    """abs(javaHash(key)) % partitions, held to the broker's own FindCoordinator answers, for any text."""
    conn = placed["conn"]
    for key_type, topic in ((KEY_GROUP, OFFSETS), (KEY_TRANSACTION, TRANSACTIONS)):
        version = find_coordinator_version(conn.api_versions, key_type)
        assert version is not None
        answers = ask_coordinators(conn, version, key_type, keys)
        leaders = placed[topic]
        assert {k: answers[k].node_id for k in keys} == {k: leaders[partition_for(k, len(leaders))] for k in keys}


def test_new_group_protocols_where_the_brokers_take_them_and_where_not(defaults_lab, groups_lab, three_lab,
                                                                       tmp_path: Path) -> None:
    """KIP-848's consumer protocol and KIP-932's share groups: Kafka 4.1's defaults (consumer on, share off) on
    `defaults`, the reverse on `groups`; real consumers with group.protocol=consumer agree where the groups work."""
    code, report = _probe("-b", defaults_lab.bootstrap("CLIENT"), "-X", "group.protocol=consumer",
                          "--share-group", "shared")
    app = report["application"]
    assert (app["consumer_protocol"], app["group_protocol"]) == ("ok", "consumer")
    assert "UNSUPPORTED_VERSION" in app["share_protocol"]
    assert "GROUP_PROTOCOL_UNSUPPORTED" not in _codes(report)
    assert _codes(report)["SHARE_GROUPS_UNSUPPORTED"] == [("error", None)]

    topic = topic_on(groups_lab, "kip848", [[0], [1]])
    _produce(groups_lab.bootstrap("CLIENT"), topic, 2)
    _internal_ready(groups_lab)
    refused, refused_java, refused_rd = (
        _properties(tmp_path, f"refused-{who}", groups_lab.bootstrap("CLIENT", 0), group_id=f"kip848-{who}",
                    group_protocol="consumer") for who in ("app", "java", "rd"))
    code, report = _probe("-F", str(refused), "--share-group", "shared")
    assert code == 1 and _codes(report)["GROUP_PROTOCOL_UNSUPPORTED"] == [("error", None)]
    assert "SHARE_GROUPS_UNSUPPORTED" not in _codes(report)
    kinds = {c["kind"]: c for c in report["application"]["coordinators"]}
    assert kinds["share"]["node_id"] is not None and kinds["group"]["node_id"] is not None

    healthy = three_lab.bootstrap("CLIENT")
    three_topic = new_topic(three_lab, "kip848")
    _produce(healthy, three_topic, 1)
    works, works_java, works_rd = (_properties(tmp_path, f"works-{who}", healthy, group_id=f"kip848-{who}",
                                               group_protocol="consumer") for who in ("app", "java", "rd"))
    code, report = _probe("-F", str(works))
    assert "GROUP_PROTOCOL_UNSUPPORTED" not in _codes(report) and report["application"]["consumer_protocol"] == "ok"

    # KIP-848's Java consumer gets its assignment at its second heartbeat, 5 s (the brokers' default interval)
    # after joining: within WORKING_MS, the budget of a consumer expected to work.
    outcomes = _apps(groups_lab, tmp_path, [("consume", topic, refused_java, refused_rd, False),
                                            ("consume", three_topic, works_java, works_rd, True)])
    assert [(o.client, o.ok) for o in outcomes] == [("java", False), ("java", True), ("librdkafka", False),
                                                    ("librdkafka", True)], outcomes


def test_a_consumer_that_reads_from_the_replica_in_its_rack(groups_lab, tmp_path: Path) -> None:
    """client.rack with RackAwareReplicaSelector (KIP-392): the leader sends a consumer in rack2 to broker 2,
    whose BROKEN2 endpoint refuses; a consumer in rack0 reads from the leader, broker 0."""
    topic = topic_on(groups_lab, "racked", [[0, 1, 2]])
    _produce(groups_lab.bootstrap("CLIENT"), topic, 1)
    leaders = _internal_ready(groups_lab)
    bootstrap = groups_lab.bootstrap("BROKEN2", 0)
    # Groups coordinated by broker 0 or 1: only the read, not the coordinator, goes through broker 2.
    groups = [g for g in (f"racked-{i}" for i in range(1000)) if leaders[partition_for(g, len(leaders))] != 2][:4]
    far = [_properties(tmp_path, f"far-{g}", bootstrap, group_id=g, client_rack="rack2") for g in groups[:2]]
    near = [_properties(tmp_path, f"near-{g}", bootstrap, group_id=g, client_rack="rack0") for g in groups[2:]]

    code, report = _probe("-F", str(far[0]), "-t", topic)
    assert code == 1
    assert _codes(report)["FOLLOWER_FETCH_UNREACHABLE"] == [("error", 2)]
    reads = report["application"]["rack_reads"]
    assert [(r["topic"], r["partition"], r["leader"], r["replica"]) for r in reads] == [(topic, 0, 0, 2)]
    code, report = _probe("-F", str(near[0]), "-t", topic)
    assert "FOLLOWER_FETCH_UNREACHABLE" not in _codes(report) and report["application"]["rack_reads"] == []
    code, report = _probe("-b", bootstrap, "--client-rack", "us-east-1a", "-t", topic)
    assert _codes(report)["CLIENT_RACK_MATCHES_NO_BROKER"] == [("warning", None)]

    outcomes = _apps(groups_lab, tmp_path, [("consume", topic, far[0], far[1], False),
                                            ("consume", topic, near[0], near[1], True)])
    assert [(o.client, o.ok) for o in outcomes] == [("java", False), ("java", True), ("librdkafka", False),
                                                    ("librdkafka", True)], outcomes


def test_the_round_trip_takes_the_applications_own_path(groups_lab, defaults_lab) -> None:
    """--roundtrip with a group and a transactional id: the records read back through a group placed as the
    application's (joined, committed), a transaction committed through an id placed as the application's."""
    topic = topic_on(groups_lab, "trip", [[0], [1]])
    leaders = _internal_ready(groups_lab)
    stuck, works = _groups_led_by(leaders, 2, "trip")[0], _groups_led_by(leaders, 0, "trip")[0]
    broken = groups_lab.bootstrap("BROKEN2", 0)

    code, report = _probe("-b", broken, "--group", stuck, "--roundtrip", topic, "--deadline", "10s")
    assert code == 1
    trip = report["roundtrip"]
    assert [p["status"] for p in trip["partitions"]] == ["ok", "ok"], trip
    step = trip["group"]
    assert step["status"] == "failed" and step["key"] == stuck and step["twin"] != stuck, step
    assert step["partition"] == partition_for(stuck, 12)
    assert {"COORDINATOR_UNREACHABLE", "ROUNDTRIP_STEP_FAILED"} <= set(_codes(report))
    assert "The findings above say why" in next(f["message"] for f in report["findings"]
                                                if f["code"] == "ROUNDTRIP_STEP_FAILED")

    # A transactional id whose coordinator is broker 0 too: through BROKEN2, one on broker 2 fails (rightly).
    txn = _internal_ready(groups_lab, TRANSACTIONS)
    tx_id = next(t for t in (f"trip-tx-{i}" for i in range(1000)) if txn[partition_for(t, len(txn))] == 0)
    code, report = _probe("-b", broken, "--group", works, "--transactional-id", tx_id, "--roundtrip", topic)
    assert code == 1  # broker 2's endpoint, still
    trip = report["roundtrip"]
    assert (trip["group"]["status"], trip["transaction"]["status"]) == ("ok", "ok"), (trip["group"], trip["transaction"])
    assert "ROUNDTRIP_STEP_FAILED" not in _codes(report)

    code, report = _probe("-b", defaults_lab.bootstrap("CLIENT"), "--transactional-id", "orders-tx", "--roundtrip",
                          "orders", "--deadline", "10s")
    assert code == 1
    step = report["roundtrip"]["transaction"]
    assert step["status"] == "failed" and "initTransactions" in step["error"], step
    assert {"TRANSACTION_LOG_UNCREATABLE", "ROUNDTRIP_STEP_FAILED"} <= set(_codes(report))


def test_librdkafka_pinned_below_0_10_against_kafka_4(three_lab) -> None:
    """api.version.request=false with an old broker.version.fallback (KIP-896): kprobe's verdict beside librdkafka's."""
    topic = new_topic(three_lab, "pinned")
    bootstrap = three_lab.bootstrap("CLIENT")
    old = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]
    new = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.10.2"]
    code, report = _probe("-b", bootstrap, *old)
    assert code == 1 and _codes(report)["CLIENT_VERSIONS_REFUSED"] == [("error", None)]
    code, report = _probe("-b", bootstrap, *new)
    assert "CLIENT_VERSIONS_REFUSED" not in _codes(report)
    assert report["bootstraps"][0]["api_versions"]["Fetch"][0] >= 4  # KIP-896: Fetch v0-v3 gone
    pinned = {"api.version.request": "false", "socket.timeout.ms": "6000"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(librdkafka_round_trip, [], bootstrap, topic, 1, budget_ms=6000,
                            props={**pinned, "broker.version.fallback": fallback}) for fallback in ("0.9.0", "0.10.2")]
        outcomes = [r.result() for r in runs]
    assert [o.ok for o in outcomes] == [False, True], outcomes


def test_java_clients_that_ask_work_against_kafka_4(three_lab, tmp_path: Path) -> None:
    """Kafka 4.0 removed old request versions (KIP-896); clients that ask ApiVersions keep working, and kprobe,
    given no pinning setting, says nothing of versions: Java kafka-clients 0.11 to 2.1 produce, consume in a
    group and commit against Kafka 4.1.1."""
    topic = new_topic(three_lab, "old-clients")
    bootstrap = three_lab.bootstrap("CLIENT")
    code, report = _probe("-b", bootstrap)
    assert code == 0 and "CLIENT_VERSIONS_REFUSED" not in _codes(report)
    paths = {v: old_clients_classpath(v) for v in OLD_JAVA_CLIENTS}  # resolved before the session's DNS closed
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {v: pool.submit(old_java_app, paths[v], tmp_path, bootstrap, topic, f"old-{v}")
                for v in OLD_JAVA_CLIENTS}
        outcomes = {v: r.result() for v, r in runs.items()}
    assert {v: o.ok for v, o in outcomes.items()} == dict.fromkeys(OLD_JAVA_CLIENTS, True), outcomes
