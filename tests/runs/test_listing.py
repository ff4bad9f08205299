"""`kprobe list` against the lab's three brokers, side by side with Debian's kcat."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import time

import pytest
from cli_runner import run_cli
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import restart_settled, signal_when, topic_on

KCAT = shutil.which("kcat")
# CI installs kcat (.ci/run): there, a missing kcat fails these tests instead of skipping them quietly.
needs_kcat = pytest.mark.skipif(KCAT is None and not os.environ.get("CI"),
                                reason="Debian's kcat is not installed (apt-get install kcat)")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args))


@pytest.fixture(scope="module")
def topics(three_lab):
    """Topics made for these tests: several partitions, replication factor 3 and 1."""
    admin = AdminClient({"bootstrap.servers": three_lab.bootstrap_all("CLIENT")})
    wanted = {"orders": (6, 3), "payments": (3, 3), "scratch": (3, 1)}
    futures = admin.create_topics([NewTopic(n, p, r) for n, (p, r) in wanted.items()])
    for future in futures.values():
        future.result(timeout=30)
    # A group's first commit makes the brokers create __consumer_offsets, the internal topic
    # kcat lists (3 partitions in the lab, replicated like the rest).
    consumer = Consumer({"bootstrap.servers": three_lab.bootstrap_all("CLIENT"), "group.id": "kprobe-list-test"})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition("orders", 0, 0)], asynchronous=False)
                break
            except KafkaException:  # COORDINATOR_NOT_AVAILABLE while the topic is being created
                assert time.monotonic() < deadline, "no group coordinator"
                time.sleep(0.3)
    finally:
        consumer.close()
    wanted_ready = {**wanted, "__consumer_offsets": (3, 3)}
    while True:  # wait until every partition has a leader and a full ISR
        md = admin.list_topics(timeout=10)
        ready = all(
            name in md.topics and len(md.topics[name].partitions) == parts
            and all(p.leader >= 0 and len(p.isrs) == rf for p in md.topics[name].partitions.values())
            for name, (parts, rf) in wanted_ready.items()
        )
        if ready:
            return wanted
        assert time.monotonic() < deadline, "topics did not become ready"
        time.sleep(0.3)


def normalise(text: str) -> list[list[str]]:
    """Blocks (header, then one per topic) sorted by topic, without what legitimately differs.

    Differences allowed: which broker answered (kcat asks any broker, kprobe the bootstrap
    connection) and the `(controller)` mark (KRaft brokers name a random broker as controller,
    per response). Topic order follows each response; kcat and Kafka do not promise one.
    """
    lines = text.rstrip("\n").split("\n")
    lines[0] = re.sub(r"\(from broker .*\):$", "(from broker X):", lines[0])
    lines = [line.replace(" (controller)", "") for line in lines]
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line.startswith('  topic "'):
            blocks.append([])
        blocks[-1].append(line)
    return [blocks[0], *sorted(blocks[1:])]


@needs_kcat
def test_text_equals_kcat_line_for_line(three_lab, topics):
    bootstrap = three_lab.bootstrap("CLIENT", 0)
    ours = cli("list", "-b", bootstrap)
    theirs = subprocess.run([KCAT, "-b", bootstrap, "-L"], capture_output=True, text=True, timeout=30, check=True)
    assert ours.returncode == 0, ours.stderr
    assert normalise(ours.stdout) == normalise(theirs.stdout)
    assert ours.stdout.count(" (controller)") == 1
    assert ours.stdout.startswith(f"Metadata for all topics (from broker -1: {bootstrap}/bootstrap):\n")


@needs_kcat
def test_text_for_one_topic_equals_kcat(three_lab, topics):
    bootstrap = three_lab.bootstrap("CLIENT", 0)
    ours = cli("-b", bootstrap, "-L", "-t", "orders")  # kcat's own word order
    theirs = subprocess.run([KCAT, "-b", bootstrap, "-L", "-t", "orders"], capture_output=True, text=True,
                            timeout=30, check=True)
    assert ours.returncode == 0, ours.stderr
    assert normalise(ours.stdout) == normalise(theirs.stdout)
    assert ours.stdout.startswith("Metadata for orders (from broker -1:")


def _kcat_keys_agree(kcat: object, ours: object, path: str = "") -> None:
    """Every key kcat emits is in kprobe's JSON with the same value."""
    if isinstance(kcat, dict):
        assert isinstance(ours, dict), path
        for key, value in kcat.items():
            assert key in ours, f"{path}.{key} missing"
            _kcat_keys_agree(value, ours[key], f"{path}.{key}")
    elif isinstance(kcat, list):
        assert isinstance(ours, list) and len(ours) == len(kcat), path
        for i, (a, b) in enumerate(zip(kcat, ours, strict=True)):
            _kcat_keys_agree(a, b, f"{path}[{i}]")
    else:
        assert kcat == ours, f"{path}: kcat {kcat!r}, kprobe {ours!r}"


@needs_kcat
def test_json_is_a_superset_of_kcat(three_lab, topics):
    bootstrap = three_lab.bootstrap("CLIENT", 0)
    ours = json.loads(cli("list", "-b", bootstrap, "-J").stdout)
    theirs = json.loads(subprocess.run([KCAT, "-b", bootstrap, "-L", "-J"], capture_output=True, text=True,
                                       timeout=30, check=True).stdout)
    # Allowed differences, as in the text: who answered and the KRaft controller id.
    for data in (ours, theirs):
        data.pop("originating_broker")
        assert data.pop("controllerid") in {0, 1, 2}
        data["topics"].sort(key=lambda t: t["topic"])
        for t in data["topics"]:
            t["partitions"].sort(key=lambda p: p["partition"])
    _kcat_keys_agree(theirs, ours)
    assert ours["cluster_id"] == three_lab.cluster_id
    assert [b["rack"] for b in ours["brokers"]] == ["rack0", "rack1", "rack2"]
    assert ours["summary"]["offline_partitions"] == 0
    assert ours["summary"]["partitions"] >= 12


def test_missing_topic_is_reported_like_kcat_and_exits_non_zero(three_lab, topics):
    bootstrap = three_lab.bootstrap("CLIENT", 0)
    done = cli("list", "-b", bootstrap, "-t", "no-such-topic")
    assert done.returncode == 1
    assert '  topic "no-such-topic" with 0 partitions: Broker: Unknown topic or partition' in done.stdout
    if KCAT is not None:  # kcat's own lines for the same query, where it is installed (CI installs it)
        theirs = subprocess.run([KCAT, "-b", bootstrap, "-L", "-t", "no-such-topic"], capture_output=True,
                                text=True, timeout=30, check=False)
        assert normalise(done.stdout) == normalise(theirs.stdout)
    data = json.loads(cli("list", "-b", three_lab.bootstrap("CLIENT", 0), "-t", "no-such-topic", "-J").stdout)
    assert data["topics"] == [{"topic": "no-such-topic", "error": "Broker: Unknown topic or partition",
                               "partitions": [], "internal": False}]
    assert data["query"] == {"topic": "no-such-topic"}


@needs_kcat
def test_internal_topics_listed_like_kcat_and_hidden_on_request(three_lab, topics):
    bootstrap = three_lab.bootstrap("CLIENT", 0)
    listed = cli("list", "-b", bootstrap)
    assert '  topic "__consumer_offsets" with 3 partitions:' in listed.stdout
    theirs = subprocess.run([KCAT, "-b", bootstrap, "-L"], capture_output=True, text=True, timeout=30, check=True)
    assert '  topic "__consumer_offsets" with 3 partitions:' in theirs.stdout
    data = json.loads(cli("list", "-b", bootstrap, "-J").stdout)
    assert {t["topic"]: t["internal"] for t in data["topics"]}["__consumer_offsets"] is True
    hidden = cli("list", "-b", bootstrap, "--no-internal")
    assert hidden.returncode == 0, hidden.stderr
    assert "__consumer_offsets" not in hidden.stdout
    assert '  topic "orders" with 6 partitions:' in hidden.stdout
    shown = int(re.search(r"^ (\d+) topics:$", listed.stdout, re.M).group(1))
    assert re.search(rf"^ {shown - 1} topics:$", hidden.stdout, re.M), hidden.stdout
    data = json.loads(cli("list", "-b", bootstrap, "-J", "--no-internal").stdout)
    assert "__consumer_offsets" not in {t["topic"] for t in data["topics"]}


def test_reachability_marks_brokers_and_names_partitions(three_lab, topics):
    # Through BLACKHOLED, broker 2 is advertised at an endpoint that drops connections.
    done = cli("list", "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--reachability", "--timeout", "1",
               "-t", "orders")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any(re.match(r"  broker 2 at 127\.0\.0\.34:\d+( \(controller\))?  \[UNREACHABLE from here: timeout\]", ln)
               for ln in lines), done.stdout
    assert sum("[reachable from here]" in ln for ln in lines) == 2
    led_by_2 = [ln for ln in lines if re.match(r"    partition \d+, leader 2,", ln)]
    assert led_by_2, "orders should have partitions led by broker 2"
    for ln in led_by_2:
        part = ln.split(",")[0].split()[-1]
        assert f"  producing to orders/{part} will fail from this host (leader 2 at 127.0.0.34:" in done.stdout
    data = json.loads(cli("list", "-b", three_lab.real_endpoint("BLACKHOLED", 0), "--reachability", "-J",
                          "--timeout", "1", "-t", "orders").stdout)
    flags = {(p["leader"], p["leader_reachable"]) for p in data["topics"][0]["partitions"]}
    assert flags <= {(0, True), (1, True), (2, False)} and (2, False) in flags
    assert data["summary"]["unreachable_leader_partitions"] == len(led_by_2)


def test_partitions_led_outside_the_listener_are_named(three_lab):
    # Through PARTIAL (brokers 0 and 1 only), Kafka 4.1 answers partition 0, led by broker 2, with
    # LISTENER_NOT_FOUND: not an offline partition, one out of this listener's reach.
    name = topic_on(three_lab, "partial-list", [[2, 0], [0, 1]])
    done = cli("list", "-b", three_lab.real_endpoint("PARTIAL", 0), "--reachability", "--timeout", "2", "-t", name)
    assert done.returncode == 1, done.stderr
    assert (f" 1 partitions led by a broker that lacks this listener (LISTENER_NOT_FOUND), so producing to them "
            f"fails through it: {name}/0 (replicas 2,0)") in done.stdout, done.stdout
    assert "offline (no leader)" not in done.stdout
    data = json.loads(cli("list", "-b", three_lab.real_endpoint("PARTIAL", 0), "-J", "-t", name).stdout)
    assert data["summary"]["listener_not_found_partitions"] == 1
    assert data["summary"]["offline_partitions"] == 0
    assert data["topics"][0]["partitions"][0]["error"] == "Broker: No matching listener"  # librdkafka's words for error 72, as kcat prints
    through_client = cli("list", "-b", three_lab.bootstrap("CLIENT", 0), "--reachability", "--timeout", "2", "-t", name)
    assert through_client.returncode == 0, through_client.stdout
    assert "LISTENER_NOT_FOUND" not in through_client.stdout


def test_ctrl_c_still_prints_a_whole_json_document(three_lab, topics):
    done, _ = signal_when(["list", "-b", three_lab.real_endpoint("DARK", 0), "--reachability", "-J",
                           "--timeout", "20", "-t", "orders"], marker=": metadata v")
    assert done.returncode == 130, done.stderr
    data = json.loads(done.stdout)
    assert data["summary"]["status"] == "interrupted"
    assert [b["id"] for b in data["brokers"]] == [0, 1, 2]  # the metadata that had arrived stands
    assert data["topics"][0]["topic"] == "orders"
    assert done.stderr.endswith("kprobe: interrupted\n")
    assert "Traceback" not in done.stderr


def test_piped_output_has_no_reachability_by_default(three_lab, topics):
    done = cli("list", "-b", three_lab.real_endpoint("BLACKHOLED", 0), "-t", "orders")
    assert done.returncode == 0
    assert "reachable" not in done.stdout


def test_stopped_broker_shows_offline_and_under_replicated_partitions(three_lab, topics):
    bootstrap = three_lab.bootstrap("CLIENT", 0)
    three_lab.stop_node(2)
    try:
        # Right away broker 2 is still advertised: its partitions' leader is unreachable.
        early = cli("list", "-b", bootstrap, "--reachability", "--timeout", "2")
        assert early.returncode == 1
        assert re.search(r"  broker 2 at \S+( \(controller\))?  \[UNREACHABLE from here: refused\]", early.stdout)
        assert "will fail from this host (leader 2 at 127.0.0.33:" in early.stdout
        # Once the controller fences it, its RF=1 partitions go offline and the rest shrink.
        deadline = time.monotonic() + 40
        while True:
            data = json.loads(cli("list", "-b", bootstrap, "-J").stdout)
            if data["summary"]["offline_partitions"] > 0:
                break
            assert time.monotonic() < deadline, "broker 2 was never fenced"
            time.sleep(1)
        text = cli("list", "-b", bootstrap).stdout
        scratch = next(t for t in data["topics"] if t["topic"] == "scratch")
        offline = [p["partition"] for p in scratch["partitions"] if p["leader"] == -1]
        assert offline
        assert re.search(r"    partition \d+, leader -1, replicas: 2, isrs: 2?, Broker: Leader not available", text), text
        assert f" {data['summary']['offline_partitions']} partitions offline (no leader): " in text
        assert data["summary"]["under_replicated_partitions"] > 0
        assert "partitions under-replicated: " in text
        assert [b["id"] for b in data["brokers"]] == [0, 1]
    finally:
        restart_settled(three_lab, 2)


@pytest.mark.parametrize(
    "args",
    [
        ["list", "-b", "host:0"],
        ["list", "-b", "h:1", "--timeout", "-1"],
        ["list", "-b", "h:1", "-t", ""],
        ["list", "-b", "h:1", "-F", "/nonexistent"],
        ["list"],
        ["-L"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args):
    done = cli(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("kprobe: error: ")


def test_nothing_listens_exit_3():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = cli("list", "-b", f"127.0.0.1:{port}", "--timeout", "1")
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.startswith("kprobe: no bootstrap answered (127.0.0.1:")


# -- Big and irregular answers: the scripted broker of tests/support/hostile_broker.py, side by side with kcat --------
def _big_irregular_topics() -> list:
    """A cluster after a bad night: most topics healthy, some with ISRs shrunk on one broker (mixed
    shapes within a topic), partition and topic errors, leaderless and unsorted partitions."""
    from hostile_broker import Partition, Topic

    topics = []
    for t in range(150):
        partitions = []
        for p in range(100):
            leader = (t + p) % 3
            replicas = [leader, (leader + 1) % 3, (leader + 2) % 3]
            isrs = [r for r in replicas if r != 2 or leader == 2] if t % 3 == 0 else replicas
            partitions.append(Partition(p, leader, replicas, isrs))
        topics.append(Topic(f"topic-{t:03d}".encode(), partitions))
    topics += [
        Topic(b"missing", [], error=3),
        Topic(b"unsorted", [Partition(i, i % 3, [i % 3, (i + 1) % 3], [i % 3]) for i in (5, 3, 4, 0, 2, 1)]),
        Topic(b"troubled", [Partition(0, -1, [1, 2], [], error=5), Partition(1, 0, [0, 1], [0, 1], error=9),
                            Partition(2, 1, [1, 0], [1, 0], offline=[0]), Partition(3, 0, [0], [0])]),
        Topic(b"__consumer_offsets", [Partition(i, i % 3, [0, 1, 2], [0, 1, 2]) for i in range(50)], internal=True),
        Topic("caf\u00e9-\u65e5\u672c".encode(), [Partition(0, 1, [1], [1])]),
    ]
    return topics


@pytest.fixture(scope="module")
def big_broker():
    """One scripted broker advertising itself as three brokers; Metadata up to v12 for kprobe, v4 for kcat."""
    from hostile_broker import Broker, HostileBroker, Script

    broker = HostileBroker(Script())
    script = Script(brokers=[Broker(i, b"127.0.0.1", broker.port) for i in range(3)], topics=_big_irregular_topics(),
                    metadata_max=12)
    broker.answer_with(script)
    with broker:
        yield broker


@needs_kcat
def test_big_irregular_answer_equals_kcat_line_for_line(big_broker):
    ours = cli("list", "-b", big_broker.address)
    theirs = subprocess.run([KCAT, "-b", big_broker.address, "-L"], capture_output=True, text=True, timeout=60,
                            check=True)
    assert ours.returncode == 1, ours.stderr  # a topic in error, a partition without leader
    kprobe_lines = [ln for ln in ours.stdout.splitlines() if not re.match(r" \d+ partitions ", ln)]
    assert normalise("\n".join(kprobe_lines)) == normalise(theirs.stdout)
    assert '  topic "missing" with 0 partitions: Broker: Unknown topic or partition' in ours.stdout
    assert "    partition 0, leader -1, replicas: 1,2, isrs: , Broker: Leader not available\n" in ours.stdout
    unsorted = ours.stdout.split('  topic "unsorted" with 6 partitions:\n')[1].splitlines()[:6]
    assert [ln.split(",")[0] for ln in unsorted] == [f"    partition {i}" for i in range(6)]
    under = sum(len(p.isrs) < len(p.replicas) and p.leader >= 0 for t in _big_irregular_topics() for p in t.partitions)
    assert f"\n {under} partitions under-replicated: topic-000/0, topic-000/1, topic-000/3, " in ours.stdout


@needs_kcat
def test_big_irregular_json_is_a_superset_of_kcat_and_json_dumps_bytes(big_broker):
    ours = cli("list", "-b", big_broker.address, "-J")
    theirs = json.loads(subprocess.run([KCAT, "-b", big_broker.address, "-L", "-J"], capture_output=True, text=True,
                                       timeout=60, check=True).stdout)
    data = json.loads(ours.stdout)
    # Written a topic at a time, yet byte for byte what json.dumps makes of the whole document.
    assert ours.stdout == json.dumps(data, ensure_ascii=True) + "\n"
    for doc in (data, theirs):
        doc.pop("originating_broker")
    _kcat_keys_agree(theirs, data)
    troubled = next(t for t in data["topics"] if t["topic"] == "troubled")["partitions"]
    assert troubled[2]["offline_replicas"] == [{"id": 0}] and troubled[1]["error"] == "Broker: Replica not available"
    assert data["summary"]["partitions"] == 150 * 100 + 6 + 4 + 50 + 1
    assert data["summary"]["offline_partitions"] == 1 and data["summary"]["topics_in_error"] == 1


def test_every_metadata_version_lists_the_same(big_broker):
    """The bulk decoder reads plain and flexible encodings (v5 without the leader epoch, v8, v12): one listing."""
    from hostile_broker import HostileBroker, Script

    listed = {}
    for version in (5, 8, 12):
        with HostileBroker(Script()) as broker:
            broker.answer_with(dataclasses.replace(big_broker.script, metadata_max=version))
            text = cli("list", "-b", broker.address).stdout.replace(broker.address, "ADDR")
            data = cli("list", "-b", broker.address, "-J", "--reachability").stdout.replace(broker.address, "ADDR")
        reach = json.loads(data)
        assert reach["summary"]["unreachable_leader_partitions"] == 0 and "[reachable" not in text
        assert {b["reachable"] for b in reach["brokers"]} == {True}
        reach.pop("reachability")
        listed[version] = (text.replace(str(broker.port), "PORT"), reach)
    assert listed[5] == listed[8] == listed[12]


# -- without --reachability: one line on stderr where the advertised names alone show the gap ---

@needs_kcat
def test_a_gap_the_names_show_gets_one_line_after_kcats_listing(cloud_lab):
    internal = cloud_lab.real_endpoint("INTERNAL")  # an address: kcat needs no name to bootstrap either
    ours = cli("list", "-b", internal, "-n", cloud_lab.nameserver("internet"))  # piped: no reachability
    theirs = subprocess.run([KCAT, "-b", internal, "-L"], capture_output=True, text=True, timeout=30, check=True)
    assert ours.returncode == 0
    assert normalise(ours.stdout) == normalise(theirs.stdout)  # kcat's lines, nothing added to stdout
    advertised = cloud_lab.listener("INTERNAL").advertised
    assert ours.stderr == (f"kprobe: broker 0 advertises {advertised}, a cloud network's private DNS name, which "
                           "resolves only inside that network: clients here will bootstrap and then fail. This listing "
                           f"did not check it from here: add --reachability, or run `kprobe probe -b {internal}`\n")
    # Nothing known from the names: nothing said (EXTERNAL advertises the public name), and --reachability says it.
    healthy = cli("list", "-b", cloud_lab.bootstrap("EXTERNAL"), "-n", cloud_lab.nameserver("internet"))
    assert (healthy.returncode, healthy.stderr) == (0, "")
    checked = cli("list", "-b", internal, "-n", cloud_lab.nameserver("internet"), "--reachability")
    assert "UNREACHABLE from here: does not resolve" in checked.stdout and checked.stderr == ""


def test_what_the_names_alone_show():
    """The rules of that line, on plain data: only what needs no lookup, and never a remapped name."""
    from kprobe.models import AdvertisedBroker, BootstrapResult, ClusterMetadata
    from kprobe.runs.listing import Listing, unchecked_gap

    def listing(bootstrap: str, connected_to: str, *hosts: str) -> Listing:
        meta = ClusterMetadata(brokers=tuple(AdvertisedBroker(i, h, 9092) for i, h in enumerate(hosts)),
                               cluster_id="c", controller_id=0)
        b = BootstrapResult(address=bootstrap, status="ok", connected_to=connected_to, metadata=meta)
        return Listing(b, (b,), (), (), None)

    pods = [f"my-cluster-kafka-{i}.my-cluster-kafka-brokers.kafka.svc" for i in range(3)]
    outside = listing("kafka.example.com:9092", "203.0.113.5", *pods)
    assert unchecked_gap(outside, in_cluster=False) == (
        f"brokers 0, 1 and 2 advertise {pods[0]}:9092, {pods[1]}:9092, {pods[2]}:9092, each a Kubernetes "
        "cluster-internal name, which only the cluster's DNS resolves: clients here will bootstrap and then fail. This "
        "listing did not check them from here: add --reachability, or run `kprobe probe -b kafka.example.com:9092`")
    assert unchecked_gap(outside, in_cluster=True) is None  # in a pod the cluster's DNS answers
    assert unchecked_gap(outside, in_cluster=False, resolve={pods[0]: "127.0.0.2", pods[1]: "127.0.0.3",
                                                             pods[2]: "127.0.0.4"}) is None
    loopback = unchecked_gap(listing("203.0.113.5:9092", "203.0.113.5", "localhost", "203.0.113.6"), in_cluster=False)
    assert loopback is not None and loopback.startswith("broker 0 advertises localhost:9092, a loopback address")
    assert unchecked_gap(listing("localhost:9092", "127.0.0.1", "localhost"), in_cluster=False) is None
    aws = "ip-10-0-1-23.ec2.internal"
    assert unchecked_gap(listing(f"{aws}:9092", "10.0.1.23", aws), in_cluster=False) is None  # inside: it resolved
    mixed = unchecked_gap(listing("198.51.100.7:9092", "198.51.100.7", aws, "bad host"), in_cluster=False)
    assert mixed is not None and mixed.startswith(f"brokers 0 and 1 advertise {aws}:9092, bad host:9092, names or "
                                                  "addresses this machine cannot use as advertised")
    assert unchecked_gap(listing("198.51.100.7:9092", "198.51.100.7", "kafka.example.com"), in_cluster=False) is None


# -- without --reachability: one line on stderr where an advertised name does not resolve here --

def test_an_advertised_name_that_does_not_resolve_here_gets_one_line_after_kcats_listing(listeners_lab):
    """The seeds' Docker case: bootstrapped at the broker's address, which advertises its container's name
    kafka0. The host's DNS view does not resolve it, so clients here bootstrap and then fail: kcat's lines
    on stdout, byte for byte with and without the lookup; the line on stderr; the exit code kcat's."""
    bootstrap = listeners_lab.real_endpoint("LISTENER_BOB")
    advertised = listeners_lab.listener("LISTENER_BOB").advertised
    assert advertised.startswith("kafka0:")
    host = ["-b", bootstrap, "-n", listeners_lab.nameserver("host")]
    looked_up, skipped = cli("list", *host), cli("list", *host, "--no-lookup")
    assert (looked_up.returncode, skipped.returncode) == (0, 0), (looked_up.stderr, skipped.stderr)
    assert looked_up.stdout == skipped.stdout and f"  broker 0 at {advertised} (controller)\n" in looked_up.stdout
    assert skipped.stderr == ""
    assert looked_up.stderr == (
        f"kprobe: broker 0 advertises {advertised}, a name that does not resolve through --nameserver (no such "
        "name): clients here will bootstrap and then fail. Have the broker advertise a name or address this network "
        "resolves (advertised.listeners, or a listener of its own for this network), or add it to this machine's DNS "
        f"or hosts file; `kprobe probe -b {bootstrap}` says which, and checks the rest\n")
    # -J: the document as it was, nothing on stderr.
    documents = cli("list", *host, "-J"), cli("list", *host, "-J", "--no-lookup")
    assert documents[0].stdout == documents[1].stdout and json.loads(documents[0].stdout)["brokers"][0]["name"] == advertised
    assert [(d.returncode, d.stderr) for d in documents] == [(0, ""), (0, "")]
    # Inside the Docker network kafka0 resolves: nothing to say.
    docker = cli("list", "-b", bootstrap, "-n", listeners_lab.nameserver("docker"))
    assert (docker.returncode, docker.stdout, docker.stderr) == (0, looked_up.stdout, "")


def _listing_of(bootstrap: str, connected_to: str, *hosts: str):
    from kprobe.models import AdvertisedBroker, BootstrapResult, ClusterMetadata
    from kprobe.runs.listing import Listing

    meta = ClusterMetadata(brokers=tuple(AdvertisedBroker(i, h, 9092) for i, h in enumerate(hosts)),
                           cluster_id="c", controller_id=0)
    b = BootstrapResult(address=bootstrap, status="ok", connected_to=connected_to, metadata=meta)
    return Listing(b, (b,), (), (), None)


def test_the_names_are_looked_up_at_once_within_one_timeout():
    """24 names, a DNS server that answers none of them: one --timeout in all, not one per name."""
    import socket

    import dns.message
    import dns.resolver  # loaded before the clock starts: its import is not the lookups' time

    from kprobe.runs.listing import unresolved_gap

    names = [f"broker-{i}.kafka.example.test" for i in range(24)]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # takes every query, answers none
        silent.bind(("127.0.0.1", 0))
        started = time.monotonic()
        line = unresolved_gap(_listing_of("127.0.0.2:9092", "127.0.0.2", *names), nameservers=[silent.getsockname()],
                              timeout=1.0)
        took = time.monotonic() - started
        silent.setblocking(False)
        asked = set()
        with contextlib.suppress(BlockingIOError):
            while True:
                asked.add(dns.message.from_wire(silent.recv(4096)).question[0].name.to_text().rstrip("."))
    assert took < 2.5, took  # one after another: 24 s
    assert asked == set(names)  # every name was asked within that one timeout: side by side
    assert line is not None and line.startswith(
        f"brokers {', '.join(map(str, range(23)))} and 23 advertise {names[0]}:9092, {names[1]}:9092, {names[2]}:9092 "
        "and 21 more, names that do not resolve through --nameserver (no answer within --timeout 1s): clients here "
        "will bootstrap and then fail.")
    assert line.endswith("`kprobe probe -b 127.0.0.2:9092` says which, and checks the rest")


def test_what_is_looked_up_and_what_is_not():
    """A name that resolves is not named; remapped names, addresses, the bootstrap's own host and names whose
    shape the other line names are not even looked up."""
    from kprobe.lab.dns_server import DnsServer
    from kprobe.runs.listing import unchecked_gap, unresolved_gap

    with DnsServer({"kafka0": ("127.0.0.11",), "kafka1": ("127.0.0.12",)}, name="lookups") as server:
        ns = [server.address]
        assert unresolved_gap(_listing_of("127.0.0.2:9092", "127.0.0.2", "kafka0", "kafka1"), nameservers=ns,
                              timeout=2) is None
        line = unresolved_gap(_listing_of("127.0.0.2:9092", "127.0.0.2", "kafka0", "kafka2"), nameservers=ns,
                              timeout=2)
        assert line is not None and line.startswith(
            "broker 1 advertises kafka2:9092, a name that does not resolve through --nameserver (no such name): ")
        asked = server.queries
        pod = "my-cluster-kafka-0.my-cluster-kafka-brokers.kafka.svc"
        listing = _listing_of("kafka9:9092", "127.0.0.2", "kafka9", "127.0.0.3", "kafka7", pod)
        assert unresolved_gap(listing, nameservers=ns, timeout=2, resolve={"kafka7": "127.0.0.4"},
                              in_cluster=False) is None
        assert server.queries == asked  # nothing was asked
        assert unchecked_gap(listing, in_cluster=False, resolve={"kafka7": "127.0.0.4"}) is not None  # the pod's name
