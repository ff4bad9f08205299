"""The pure codec on bytes a real broker sent (tests/data/kafka_responses.json, recorded by
tests/data/record_kafka.py from the lab's Apache Kafka): no broker runs here.

What each decoder must find comes from the lab's configuration at recording time (the advertised
host and port, the topic made with 3 partitions), never from the decoder itself. Every prefix
of every recorded answer must fail as a protocol error, never as some other exception: a peer
that stops mid-answer is the commonest hostile input there is.

FindCoordinator's answers are built by hand from the protocol's own message definitions (the
lab's recordings hold none yet), and where a key lives is checked against Java's own hashes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kprobe.kafka import codec
from kprobe.kafka import coordinator_codec as fc
from kprobe.kafka.wire import Reader, WireError
from kprobe.models import CoordinatorReply

DATA = json.loads((Path(__file__).parents[1] / "data" / "kafka_responses.json").read_text(encoding="utf-8"))
RECORDS = {r["name"]: r for r in DATA["records"]}


def body(name: str) -> Reader:
    """A reader past the response header, which is checked on the way."""
    record = RECORDS[name]
    reader = Reader(bytes.fromhex(record["response"]))
    flexible = codec.is_flexible(record["api_key"], record["version"])
    codec.response_header(reader, record["api_key"], flexible, record["correlation_id"])
    return reader


def test_api_versions_and_the_metadata_version_chosen_from_them():
    versions = codec.decode_api_versions(body("api_versions"))
    assert versions[codec.API_METADATA][0] == 0 and versions[codec.API_METADATA][1] >= 12
    assert codec.API_DESCRIBE_CONFIGS in versions and codec.API_SASL_HANDSHAKE in versions
    assert codec.metadata_version(versions) == codec.METADATA_MAX
    # A broker of Kafka 1.1 speaks Metadata up to v5: that is the version kprobe must choose.
    assert codec.metadata_version({codec.API_METADATA: (0, 5)}) == 5
    with pytest.raises(WireError, match="kprobe needs v4-v12"):
        codec.metadata_version({codec.API_METADATA: (0, 3)})


@pytest.mark.parametrize("version", [4, 7, 8, 9, 10, 12])
def test_metadata_every_version(version):
    meta = codec.decode_metadata(body(f"metadata_v{version}"), version)
    host, port = DATA["advertised"]
    assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(DATA["node_id"], host, port)]
    assert meta.controller_id == DATA["node_id"] and meta.cluster_id and meta.api_version == version
    topic = next(t for t in meta.topics if t.name == DATA["topic"])
    assert sorted(p.partition for p in topic.partitions) == list(range(DATA["partitions"]))
    assert all(p.leader == DATA["node_id"] and p.replicas == (DATA["node_id"],) and p.error_code == 0
               for p in topic.partitions)
    assert not topic.is_internal and topic.error_code == 0


def test_metadata_brokers_only():
    meta = codec.decode_metadata(body("metadata_v12_brokers_only"), 12)
    assert len(meta.brokers) == 1 and meta.topics == ()


def test_describe_configs_names_the_node_that_answers():
    code, message, configs = codec.decode_describe_broker(body("describe_self"))
    assert (code, configs.get("node.id")) == (0, str(DATA["node_id"]))
    assert codec.node_from_describe(0, code, message, configs) == (DATA["node_id"], None)
    # Asked about node 7, the broker refuses and names itself (Kafka's ConfigHelper).
    code, message, configs = codec.decode_describe_broker(body("describe_other"))
    assert code == 42 and "Unexpected broker id" in (message or "")
    assert codec.node_from_describe(7, code, message, configs) == (DATA["node_id"], None)


def test_listener_settings_come_only_from_the_nodes_own_answer():
    """The identity request asks for the listener settings too; unset ones (null) and another node's refusal give none."""
    assert codec.IDENTITY_KEYS[0] == "node.id" and set(codec.LISTENER_KEYS) < set(codec.IDENTITY_KEYS)
    configs: dict[str, str | None] = {"node.id": "1", "advertised.listeners": "PLAINTEXT://kafka0:9092",
                                      "inter.broker.listener.name": None, "listeners": "PLAINTEXT://:9092"}
    assert codec.listener_settings(0, configs) == (("listeners", "PLAINTEXT://:9092"),
                                                   ("advertised.listeners", "PLAINTEXT://kafka0:9092"))
    assert codec.listener_settings(42, configs) == ()


@pytest.mark.parametrize(("code", "message", "why"), [
    (31, None, "not authorised to describe broker configs (CLUSTER_AUTHORIZATION_FAILED)"),
    (29, None, "not authorised to describe broker configs (TOPIC_AUTHORIZATION_FAILED)"),
    (42, "some other complaint", "DescribeConfigs answered INVALID_REQUEST: some other complaint"),
    (-1, None, "DescribeConfigs answered UNKNOWN_SERVER_ERROR"),
])
def test_describe_configs_refusals_say_why(code, message, why):
    node, text = codec.node_from_describe(3, code, message, {})
    assert node is None and text is not None and text.startswith(why)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_truncation_is_a_protocol_error(name):
    record = RECORDS[name]
    raw = bytes.fromhex(record["response"])
    version, api_key = record["version"], record["api_key"]
    decode = {
        codec.API_API_VERSIONS: codec.decode_api_versions,
        codec.API_DESCRIBE_CONFIGS: codec.decode_describe_broker,
        codec.API_METADATA: lambda r: codec.decode_metadata(r, version),
        codec.API_DESCRIBE_CLUSTER: lambda r: codec.decode_describe_cluster(r, version),
    }[api_key]
    for cut in range(len(raw)):
        reader = Reader(raw[:cut])
        with pytest.raises(WireError) as caught:
            codec.response_header(reader, api_key, codec.is_flexible(api_key, version), record["correlation_id"])
            decode(reader)
        assert caught.value.kind == "protocol"


def test_request_encodings():
    """The bytes of the requests whose answers were recorded: the broker accepted exactly these."""
    assert codec.encode_metadata_request(4, None) == b"\xff\xff\xff\xff\x00"
    assert codec.encode_metadata_request(12, []) == b"\x01\x00\x00\x00"
    # v9: compact array and string, topic tags, auto-create, cluster and topic authorised ops, request tags
    assert codec.encode_metadata_request(9, ["t"]) == b"\x02\x02t" + b"\x00" * 5
    assert codec.request_header(3, 12, 7, "kprobe", True) == b"\x00\x03\x00\x0c\x00\x00\x00\x07\x00\x06kprobe\x00"
    assert codec.uvarint(300) == b"\xac\x02" and Reader(b"\xac\x02").uvarint() == 300


# -- DescribeCluster, from the `controllers` lab: two brokers beside a separate KRaft controller --------
CONTROLLERS = DATA["controllers"]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_from_a_broker_every_version(version):
    described = codec.decode_describe_cluster(body(f"describe_cluster_v{version}_brokers"), version)
    assert described.error_code == 0 and described.endpoint_type == codec.ENDPOINT_TYPE_BROKERS
    assert [[n.node_id, n.host, n.port] for n in described.nodes] == CONTROLLERS["brokers"]
    assert described.cluster_id and described.controller_id in [b[0] for b in CONTROLLERS["brokers"]]


@pytest.mark.parametrize("version", [1, 2])
def test_describe_cluster_from_a_controller_names_the_quorum(version):
    """What KIP-919's admin client is handed: the controller's advertised endpoint, and the active one."""
    described = codec.decode_describe_cluster(body(f"describe_cluster_v{version}_controllers"), version)
    assert described.error_code == 0 and described.endpoint_type == codec.ENDPOINT_TYPE_CONTROLLERS
    assert [[n.node_id, n.host, n.port] for n in described.nodes] == [CONTROLLERS["controller"]]
    assert described.controller_id == CONTROLLERS["controller"][0]


def test_describe_cluster_at_the_wrong_endpoint_type_is_an_answer_not_a_failure():
    asked_broker = codec.decode_describe_cluster(body("describe_cluster_v1_broker_asked_for_controllers"), 1)
    assert asked_broker.error_code == 114 and codec.error_name(114) == "MISMATCHED_ENDPOINT_TYPE"
    assert "type BROKER" in (asked_broker.error_message or "") and asked_broker.nodes == ()
    asked_controller = codec.decode_describe_cluster(body("describe_cluster_v2_controller_asked_for_brokers"), 2)
    assert asked_controller.error_code == 114 and "type CONTROLLER" in (asked_controller.error_message or "")


def test_a_controller_listener_is_told_from_a_broker_by_its_api_versions():
    """Kafka 4.1's controller offers raft RPCs and no Metadata; a broker offers Metadata (KAFKA-16612)."""
    controller = codec.decode_api_versions(body("controller_api_versions"))
    broker = codec.decode_api_versions(body("api_versions"))
    assert codec.is_controller_listener(controller) and not codec.is_controller_listener(broker)
    assert codec.API_METADATA not in controller and 0 not in controller  # no Metadata, no Produce
    assert codec.describe_cluster_version(controller) == codec.DESCRIBE_CLUSTER_MAX
    # A controller before 3.7 has no DescribeCluster; a broker of 2.8-3.6 has only v0: neither can be asked.
    assert codec.describe_cluster_version({k: v for k, v in controller.items() if k != 60}) is None
    assert codec.describe_cluster_version({**broker, 60: (0, 0)}) is None


def test_a_controller_names_itself_to_describe_configs():
    code, message, configs = codec.decode_describe_broker(body("controller_describe_other"))
    assert codec.node_from_describe(0, code, message, configs) == (CONTROLLERS["controller"][0], None)


def test_describe_cluster_request_encodings():
    """The bytes the controller and the broker accepted: flags, endpoint type (v1+), fenced brokers (v2), tags."""
    assert codec.encode_describe_cluster(0, 2) == b"\x00\x00"
    assert codec.encode_describe_cluster(1, 2) == b"\x00\x02\x00"
    assert codec.encode_describe_cluster(2, 2) == b"\x00\x02\x00\x00"
    assert codec.is_flexible(codec.API_DESCRIBE_CLUSTER, 0) and not codec.is_flexible(codec.API_METADATA, 8)


# -- Partitions in bulk: scripted answers of every version (tests/support/hostile_broker.py encodes them) ------
# What the decoder must find is the script itself. The bulk decoder reads uniform stretches with one
# struct call and falls back partition by partition; these answers mix both, in every version.
def _scripted_topics() -> list:
    from hostile_broker import Partition, Topic

    uniform = [Partition(p, p % 3, [p % 3, (p + 1) % 3, (p + 2) % 3], [p % 3, (p + 1) % 3, (p + 2) % 3])
               for p in range(2500)]  # more than one run of RUN_MAX
    mixed = [Partition(p, -1 if p % 7 == 0 else p % 3, [0, 1, 2][: 1 + p % 3], [0, 1, 2][: p % 2],
                       [2] if p % 5 == 0 else [], error=5 if p % 7 == 0 else 0) for p in range(300)]
    odd = [Partition(0, 1, list(range(130)), [1]),  # a count of two varint bytes from v9
           Partition(1, 1, [1], [1], tags=b"\x01\x05\x02hi"),  # a tagged field the decoder skips
           Partition(2, 2, [2], [2])]
    return [Topic(b"uniform", uniform), Topic(b"mixed", mixed), Topic(b"odd", odd), Topic(b"missing", [], error=3),
            Topic(b"__consumer_offsets", uniform[:50], internal=True), Topic(b"empty-lists", [Partition(0, -1, [], [])])]


def _expected(topic, version: int) -> list[tuple]:
    return [(p.index, p.leader, tuple(p.replicas), tuple(p.isrs), tuple(p.offline) if version >= 5 else (), p.error)
            for p in topic.partitions]


@pytest.mark.parametrize("version", range(4, 13))
def test_scripted_metadata_decodes_to_the_script_in_every_version(version):
    from hostile_broker import Broker, Script, metadata_body

    script = Script(brokers=[Broker(0, b"b0", 9092, b"r0"), Broker(1, b"b1", 9093)], topics=_scripted_topics())
    meta = codec.decode_metadata(Reader(metadata_body(script, version)), version)
    assert [(b.node_id, b.host, b.port, b.rack) for b in meta.brokers] == [(0, "b0", 9092, "r0"), (1, "b1", 9093, None)]
    assert [(t.name, t.error_code, t.is_internal) for t in meta.topics] == [
        (t.name.decode(), t.error, t.internal) for t in script.topics]
    for ours, theirs in zip(meta.topics, script.topics, strict=True):
        got = [(p.partition, p.leader, p.replicas, p.isrs, p.offline, p.error_code) for p in ours.partitions]
        assert got == _expected(theirs, version), theirs.name
        assert len(ours.partitions) == len(theirs.partitions)
    # The uniform topic is read in bulk: runs of RUN_MAX partitions, not one per partition.
    assert [len(run) for run in meta.topics[0].partitions.runs] == [1024, 1024, 452]


@pytest.mark.parametrize("version", [4, 8, 9, 12])
def test_every_truncation_of_a_scripted_answer_is_a_protocol_error(version):
    from hostile_broker import Broker, Partition, Script, Topic, metadata_body

    script = Script(brokers=[Broker(0, b"b0", 9092)], topics=[
        Topic(b"a", [Partition(p, 0, [0, 1], [0, 1] if p != 3 else [0]) for p in range(6)]),
        Topic(b"b", [Partition(0, 1, list(range(130)), [1], tags=b"\x01\x05\x02hi")])])
    raw = metadata_body(script, version)
    codec.decode_metadata(Reader(raw), version)
    for cut in range(len(raw)):
        with pytest.raises(WireError) as caught:
            codec.decode_metadata(Reader(raw[:cut]), version)
        assert caught.value.kind == "protocol"


@pytest.mark.parametrize("version", [8, 12])
def test_hostile_counts_in_partitions_are_protocol_errors(version):
    """Counts a broker could lie with: null (-1, or 0 in a compact array) and bigger than the answer."""
    from hostile_broker import Broker, Partition, Script, Topic, metadata_body

    script = Script(brokers=[Broker(0, b"b0", 9092)], topics=[Topic(b"a", [Partition(0, 0, [0], [0])] * 3)])
    raw = metadata_body(script, version)
    # The first partition's replica count: after the topic's name, (id,) internal flag, partition
    # count, then error, index, leader and epoch.
    name_end = raw.index(b"\x02a" if version >= 9 else b"\x00\x01a") + (2 if version >= 9 else 3)
    replicas_at = name_end + (16 + 1 + 1 if version >= 9 else 1 + 4) + 14
    assert raw[replicas_at:replicas_at + 5] == (b"\x02\x00\x00\x00\x00" if version >= 9 else b"\x00\x00\x00\x01\x00")
    for count, said in ((struct.pack(">i", -1), "null"), (struct.pack(">i", 2**30), "does not fit")) if version < 9 else (
            (b"\x00", "null"), (b"\xff\xff\xff\x7f", "does not fit")):
        broken = raw[:replicas_at] + count + raw[replicas_at + (4 if version < 9 else 1):]
        with pytest.raises(WireError, match=said) as caught:
            codec.decode_metadata(Reader(broken), version)
        assert caught.value.kind == "protocol"


def test_partition_table_reads_in_id_order_as_librdkafka_lists_them():
    from kprobe.models import PartitionInfo, PartitionTable

    infos = [PartitionInfo(partition=i, leader=i % 3, replicas=(0, 1), isrs=(0,) if i == 5 else (0, 1))
             for i in (3, 1, 2, 0, 5, 4)]
    table = PartitionTable.of(infos)
    ordered = sorted(infos, key=lambda p: p.partition)
    assert not table.in_order and len(table) == 6
    assert list(table) == ordered and table == tuple(ordered)
    assert table[4] == ordered[4] and table[-1] == ordered[-1] and table[1:3] == tuple(ordered[1:3])
    assert PartitionTable.of(ordered).in_order and PartitionTable.of(table) is table
    with pytest.raises(IndexError):
        table[6]


@pytest.mark.parametrize("version", [8, 12])
def test_mixed_shapes_are_gathered_into_few_runs_and_read_in_id_order(version):
    """A topic whose ISRs shrank on one broker alternates shapes: a run per shape, not per stretch."""
    from hostile_broker import Broker, Partition, Script, Topic, metadata_body

    partitions = [Partition(p, p % 3, [p % 3, (p + 1) % 3, (p + 2) % 3],
                            [r for r in (p % 3, (p + 1) % 3, (p + 2) % 3) if r != 2 or p % 3 == 2]) for p in range(90)]
    partitions[10], partitions[20] = partitions[20], partitions[10]  # and not quite in id order
    script = Script(brokers=[Broker(0, b"b0", 9092)], topics=[Topic(b"t", partitions)])
    [topic] = codec.decode_metadata(Reader(metadata_body(script, version)), version).topics
    assert sorted(len(run) for run in topic.partitions.runs) == [30, 60]
    assert [(p.partition, p.leader, p.isrs) for p in topic.partitions] == [
        (p.index, p.leader, tuple(p.isrs)) for p in sorted(partitions, key=lambda p: p.index)]


@pytest.mark.parametrize("version", [8, 12])
def test_runs_stay_bounded_whatever_the_replica_lists(version):
    """A run's compiled formats and templates grow with its values: long replica lists make short runs."""
    from hostile_broker import Broker, Partition, Script, Topic, metadata_body

    from kprobe.models import RUN_VALUES_MAX

    wide = [Partition(p, 0, list(range(100)), list(range(100 - p % 2))) for p in range(300)]
    script = Script(brokers=[Broker(0, b"b0", 9092)], topics=[Topic(b"wide", wide)])
    [topic] = codec.decode_metadata(Reader(metadata_body(script, version)), version).topics
    runs = topic.partitions.runs
    assert all(len(run.values) <= RUN_VALUES_MAX for run in runs) and sum(len(run) for run in runs) == 300
    assert len(runs) <= 8  # gathered by shape, two shapes: a few runs, not one per partition
    assert [(p.partition, len(p.isrs)) for p in topic.partitions] == [(p, 100 - p % 2) for p in range(300)]


# -- FindCoordinator: where a group or transactional id lives, and who coordinates it ----------------------
# The answers below are built by hand from Kafka's FindCoordinatorResponse.json, field by field: v0 (error,
# node, host, port), v1-v2 (throttle and an error message first), v3 (the same, flexible: compact strings and
# tagged fields), v4-v6 (one entry per key asked, each with its own error). The hashes are Java's own
# (`String.hashCode()` printed by JDK 17), never kprobe's.
PORT_9092 = b"\x00\x00\x23\x84"
NO_NODE = b"\xff\xff\xff\xff"


@pytest.mark.parametrize(("key", "java"), [
    ("", 0),
    ("a", 97),
    ("billing-0", 1828025694),
    ("payments-tx", -1539523292),  # wraps past 2**31: negative, as in Java
    ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE exactly
    ("gr\u00fc\u00dfe", 98768023),  # Latin-1 letters outside ASCII: one UTF-16 unit each
    ("\u4e2d\u6587-group", -340409364),
    ("a\U0001f600b", 57849694),  # outside the BMP: hashed as its two surrogates, as Java's UTF-16 string holds it
    ("\ud800", 55296),  # a lone surrogate, which Java strings can hold and Python's UTF-16 codec refuses
])
def test_java_hash_is_javas_string_hashcode(key, java):
    assert fc.java_hash(key) == java


@pytest.mark.parametrize(("key", "partitions", "partition"), [
    ("polygenelubricants", 50, 0),  # Utils.abs(Integer.MIN_VALUE) is 0; Math.abs would leave it negative
    ("polygenelubricants", 7, 0),
    ("payments-tx", 50, 42),  # abs first: Python's -1539523292 % 50 would be 8
    ("payments-tx", 3, 2),
    ("billing-0", 50, 44), ("billing-0", 3, 0), ("billing-1", 3, 1), ("billing-2", 3, 2),
    ("a", 50, 47), ("", 50, 0), ("gr\u00fc\u00dfe", 50, 23), ("a\U0001f600b", 50, 44), ("\u4e2d\u6587-group", 50, 14),
    ("anything", 1, 0),
])
def test_partition_for_places_keys_as_the_broker_does(key, partitions, partition):
    """`Utils.abs(key.hashCode()) % partitions`, the coordinators' own placement (JDK 17 computed each expectation)."""
    assert fc.partition_for(key, partitions) == partition


def test_find_coordinator_version_from_api_versions():
    """The highest both sides speak, and none where the key type needs a version the broker lacks."""
    kafka_41 = {fc.API_FIND_COORDINATOR: (1, 6)}  # Kafka 4.0 removed v0 (KIP-896)
    assert fc.find_coordinator_version(kafka_41, fc.KEY_GROUP) == 6
    assert fc.find_coordinator_version({fc.API_FIND_COORDINATOR: (0, 9)}, fc.KEY_TRANSACTION) == fc.FIND_COORDINATOR_MAX
    assert fc.find_coordinator_version({fc.API_FIND_COORDINATOR: (0, 2)}, fc.KEY_TRANSACTION) == 2  # Kafka 2.x
    assert fc.find_coordinator_version({fc.API_FIND_COORDINATOR: (0, 0)}, fc.KEY_GROUP) == 0  # before transactions
    assert fc.find_coordinator_version({fc.API_FIND_COORDINATOR: (0, 0)}, fc.KEY_TRANSACTION) is None
    assert fc.find_coordinator_version({fc.API_FIND_COORDINATOR: (0, 5)}, fc.KEY_SHARE) is None  # share groups: v6
    assert fc.find_coordinator_version({}, fc.KEY_GROUP) is None  # not offered at all
    assert [codec.is_flexible(fc.API_FIND_COORDINATOR, v) for v in range(7)] == [False, False, False, True, True, True,
                                                                                   True]


def test_find_coordinator_request_encodings():
    """Byte for byte, as FindCoordinatorRequest.json lays them out."""
    # v0: the key alone (a group: v0 knew no other kind)
    assert fc.encode_find_coordinator(0, fc.KEY_GROUP, ["billing-0"]) == b"\x00\x09billing-0"
    # The length counts UTF-8 bytes, not characters: u and sharp s are two bytes each.
    assert fc.encode_find_coordinator(0, fc.KEY_GROUP, ["gr\u00fc\u00dfe"]) == b"\x00\x07gr\xc3\xbc\xc3\x9fe"
    # v1: key, then key type
    assert fc.encode_find_coordinator(1, fc.KEY_GROUP, ["billing-0"]) == b"\x00\x09billing-0\x00"
    assert fc.encode_find_coordinator(1, fc.KEY_TRANSACTION, ["payments-tx"]) == b"\x00\x0bpayments-tx\x01"
    # v3: flexible: compact key (length + 1), key type, empty tagged fields
    assert fc.encode_find_coordinator(3, fc.KEY_TRANSACTION, ["payments-tx"]) == b"\x0cpayments-tx\x01\x00"
    # v4: key type first, then a compact array of compact keys, then tagged fields
    assert fc.encode_find_coordinator(4, fc.KEY_GROUP, ["billing-0", "billing-1"]) == (
        b"\x00" + b"\x03" + b"\x0abilling-0" + b"\x0abilling-1" + b"\x00")
    assert fc.encode_find_coordinator(6, fc.KEY_SHARE, ["g"]) == b"\x02\x02\x02g\x00"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_before_v4_asks_one_key(version):
    with pytest.raises(ValueError, match="one key"):
        fc.encode_find_coordinator(version, fc.KEY_GROUP, ["billing-0", "billing-1"])


# Answers for ["billing-0"] (v0-v3) or ["billing-1", "billing-0"] (v4), and what each must decode to.
ANSWERS: dict[str, tuple[int, list[str], bytes, list[CoordinatorReply]]] = {
    "v0-found": (0, ["billing-0"],
                 b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x07kafka-2" + PORT_9092,
                 [CoordinatorReply(key="billing-0", node_id=2, host="kafka-2", port=9092, error_code=0)]),
    "v2-not-available": (2, ["billing-0"],
                         b"\x00\x00\x00\x00" + b"\x00\x0f" + b"\xff\xff" + NO_NODE + b"\x00\x00" + NO_NODE,
                         [CoordinatorReply(key="billing-0", node_id=-1, host="", port=-1, error_code=15)]),
    "v2-found-with-throttle": (2, ["billing-0"],
                               b"\x00\x00\x00\x64" + b"\x00\x00" + b"\xff\xff" + b"\x00\x00\x00\x01"
                               + b"\x00\x07kafka-1" + PORT_9092,
                               [CoordinatorReply(key="billing-0", node_id=1, host="kafka-1", port=9092, error_code=0)]),
    "v3-found": (3, ["billing-0"],
                 b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x00" + b"\x00\x00\x00\x03" + b"\x08kafka-3" + PORT_9092
                 + b"\x00",
                 [CoordinatorReply(key="billing-0", node_id=3, host="kafka-3", port=9092, error_code=0)]),
    "v3-denied-with-message": (3, ["billing-0"],
                               b"\x00\x00\x00\x00" + b"\x00\x1e" + b"\x0fNot authorized" + NO_NODE + b"\x01" + NO_NODE
                               + b"\x00",
                               [CoordinatorReply(key="billing-0", node_id=-1, host="", port=-1, error_code=30,
                                                 error_message="Not authorized")]),
    # The broker answers in its own order (billing-0 first), with a tagged field (tag 5, two bytes) to skip;
    # the decoder hands them back in the order asked.
    "v4-two-keys": (4, ["billing-1", "billing-0"],
                    b"\x00\x00\x00\x00" + b"\x03"
                    + b"\x0abilling-0" + b"\x00\x00\x00\x01" + b"\x08kafka-1" + PORT_9092 + b"\x00\x00" + b"\x00"
                    + b"\x01\x05\x02hi"
                    + b"\x0abilling-1" + NO_NODE + b"\x01" + NO_NODE + b"\x00\x0e" + b"\x08loading" + b"\x00"
                    + b"\x00",
                    [CoordinatorReply(key="billing-1", node_id=-1, host="", port=-1, error_code=14,
                                      error_message="loading"),
                     CoordinatorReply(key="billing-0", node_id=1, host="kafka-1", port=9092, error_code=0)]),
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_find_coordinator_answers(name):
    version, keys, raw, expected = ANSWERS[name]
    assert fc.decode_find_coordinator(Reader(raw), version, keys) == expected


def test_find_coordinator_errors_in_kafkas_words():
    """What the report shows for a refused lookup: Kafka's name for the error, then the broker's own message."""
    [loading, found] = ANSWERS["v4-two-keys"][3]
    assert fc.reply_error(loading) == "COORDINATOR_LOAD_IN_PROGRESS: loading"
    assert fc.reply_error(found) is None
    assert fc.reply_error(ANSWERS["v2-not-available"][3][0]) == "COORDINATOR_NOT_AVAILABLE"
    assert fc.reply_error(ANSWERS["v3-denied-with-message"][3][0]) == "GROUP_AUTHORIZATION_FAILED: Not authorized"


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_every_truncation_of_a_find_coordinator_answer_is_a_protocol_error(name):
    version, keys, raw, _ = ANSWERS[name]
    for cut in range(len(raw)):
        with pytest.raises(WireError) as caught:
            fc.decode_find_coordinator(Reader(raw[:cut]), version, keys)
        assert caught.value.kind == "protocol", (cut, caught.value)


V4_HEAD = b"\x00\x00\x00\x00"  # throttle


def _v4_entry(key: bytes, tags: bytes = b"\x00") -> bytes:
    return key + b"\x00\x00\x00\x01" + b"\x08kafka-1" + PORT_9092 + b"\x00\x00" + b"\x00" + tags


@pytest.mark.parametrize(("version", "keys", "raw", "said"), [
    pytest.param(0, ["billing-0"], ANSWERS["v0-found"][2] + b"\x00", "1 unexpected trailing bytes", id="v0-trailing"),
    pytest.param(4, ["billing-1", "billing-0"], ANSWERS["v4-two-keys"][2] + b"\x00\x00", "2 unexpected trailing",
                 id="v4-trailing"),
    pytest.param(4, ["billing-0", "billing-9"], V4_HEAD + b"\x02" + _v4_entry(b"\x0abilling-0") + b"\x00",
                 "no coordinator for 'billing-9'", id="v4-a-key-not-answered"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\x02" + _v4_entry(b"\x0abilling-X") + b"\x00",
                 "no coordinator for 'billing-0'", id="v4-another-key-answered"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\x01" + b"\x00", "no coordinator for 'billing-0'", id="v4-empty"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\x02" + _v4_entry(b"\x0abilling-\xff") + b"\x00",
                 "no coordinator for 'billing-0'", id="v4-key-not-utf8"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\x00" + b"\x00", "a required array is null", id="v4-null-array"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\xff\xff\xff\x7f" + _v4_entry(b"\x0abilling-0") + b"\x00",
                 "does not fit", id="v4-count-beyond-the-answer"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\xff\xff\xff\xff\xff\x01", "varint too long", id="v4-varint-too-long"),
    pytest.param(4, ["billing-0"], V4_HEAD + b"\x02" + _v4_entry(b"\x0abilling-0", b"\x01\x05\xff\xff\xff\x0f")
                 + b"\x00", "truncated", id="v4-tagged-field-longer-than-the-answer"),
    pytest.param(0, ["billing-0"], b"\x00\x00" + b"\x00\x00\x00\x02" + b"\xff\xfe" + b"kafka-2" + PORT_9092,
                 "negative string length", id="v0-host-length-negative"),
    pytest.param(2, ["billing-0"], b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x7f\xff" + b"x", "truncated",
                 id="v2-message-longer-than-the-answer"),
])
def test_hostile_find_coordinator_answers_are_protocol_errors(version, keys, raw, said):
    with pytest.raises(WireError, match=said) as caught:
        fc.decode_find_coordinator(Reader(raw), version, keys)
    assert caught.value.kind == "protocol"


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_find_coordinator_answer_altered_anywhere_decodes_or_fails_as_a_protocol_error(name):
    """Every byte of every answer set to each of the values that move a decoder most (zero, the sign bit, the
    varint continuation bit, all ones), and random answers of every short length: an answer, or a protocol
    error, never another exception."""
    import random

    version, keys, raw, _ = ANSWERS[name]
    altered = [raw[:i] + bytes([v]) + raw[i + 1:] for i in range(len(raw)) for v in (0x00, 0x01, 0x7F, 0x80, 0xFF)]
    rng = random.Random(name)
    altered += [rng.randbytes(rng.randrange(64)) for _ in range(500)]
    for data in altered:
        try:
            replies = fc.decode_find_coordinator(Reader(data), version, keys)
        except WireError as exc:
            assert exc.kind == "protocol", (data, exc)
        else:
            assert [r.key for r in replies] == keys
