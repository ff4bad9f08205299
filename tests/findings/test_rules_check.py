"""`kprobe check`'s rules (kprobe/findings/check.py), proven on plain data: settings in, findings out.

Each row is a configuration as a user writes it (server.properties lines, a Compose service, a
Strimzi listener), read by kprobe's own readers (pure: text in, `Deployment` out), the names this
machine's resolver answers, and the findings expected. The row's resolver is a dict: no DNS, no
clock. The seeds' teaching broker and Kafka's own Compose examples supply the shapes; rows for the
settings Kafka refuses at start stage each refusal alone. The internal topics' rows give each reader a
single broker left at Kafka's defaults, one set right, three brokers at the defaults and a file that does
not say how many brokers there are; the rows about listeners set their internal topics to fit, as Kafka's
own examples do, so each row's findings stay its own.

`covered()` (tests/support/observations.py) reads these rows' `expect` like every other table's,
so tests/findings/test_catalogue.py holds each config code, at each severity it allows, to a row here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
import yaml

from kprobe.check.deployments.bitnami import read_bitnami
from kprobe.check.deployments.compose import read_compose
from kprobe.check.deployments.properties import read_properties
from kprobe.check.deployments.strimzi import read_strimzi
from kprobe.check.listeners import Deployment
from kprobe.findings.check import check_deployments, names_to_resolve
from kprobe.models import DnsResult

Expected = tuple[str, str, "int | None", "str | None"]


@dataclass(frozen=True)
class ConfigCase:
    """One configuration and the findings it must give (code, severity, node id, endpoint)."""

    name: str
    kind: str
    files: tuple[str, ...]
    expect: tuple[Expected, ...]
    resolves: tuple[str, ...] = ()
    says: tuple[tuple[str, str, str], ...] = ()  # (code, "message" or "fix", text)
    reach: tuple[tuple[str, str, str], ...] = ()  # (listener, vantage, status)
    xfail: str | None = None


def row(name: str, kind: str, *files: str, expect: list[Expected], resolves: tuple[str, ...] = (),
        says: list[tuple[str, str, str]] | None = None, reach: list[tuple[str, str, str]] | None = None) -> ConfigCase:
    """A row from lists, so the table reads without tuple noise."""
    return ConfigCase(name, kind, files, tuple(expect), resolves, tuple(says or ()), tuple(reach or ()))


def deployments(case: ConfigCase) -> list[Deployment]:
    """The row's files through kprobe's own readers."""
    if case.kind == "properties":
        return [read_properties([(f"broker{i}.properties", text) for i, text in enumerate(case.files)])]
    out = []
    for i, text in enumerate(case.files):
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        path = f"{case.kind}{i}.yaml"
        if case.kind == "compose":
            out.append(read_compose(path, docs[0]))
        elif case.kind == "strimzi":
            out.append(read_strimzi(path, docs))
        else:
            out.append(read_bitnami(path, docs[0]))
    return out


def resolver_answers(deps: list[Deployment], resolves: tuple[str, ...]) -> dict[str, DnsResult]:
    """What this machine's resolver answers: the row's names resolve (to a public address), the rest NXDOMAIN."""
    return {name: (DnsResult(host=name, status="ok", addresses=("192.0.2.10",)) if name in resolves else
                   DnsResult(host=name, status="nxdomain", error=f"{name}: Name or service not known"))
            for name in names_to_resolve(deps)}


SEEDS = """
services:
  kafka0:
    image: confluentinc/cp-enterprise-kafka:5.2.1
    ports: ["9092:9092", "29094:29094"]
    environment:
      KAFKA_BROKER_ID: 0
      KAFKA_LISTENERS: LISTENER_BOB://kafka0:29092,LISTENER_FRED://kafka0:9092,LISTENER_ALICE://kafka0:29094
      KAFKA_ADVERTISED_LISTENERS: LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,LISTENER_ALICE://never-gonna-give-you-up:29094
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: LISTENER_BOB:PLAINTEXT,LISTENER_FRED:PLAINTEXT,LISTENER_ALICE:PLAINTEXT
      KAFKA_INTER_BROKER_LISTENER_NAME: LISTENER_BOB
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1
"""

KAFKA_EXAMPLE = """
services:
  broker:
    image: apache/kafka:4.1.1
    hostname: broker
    ports: ['{published}']
    environment:
      KAFKA_NODE_ID: 1
      KAFKA_PROCESS_ROLES: 'broker,controller'
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT'
      KAFKA_LISTENERS: 'CONTROLLER://:29093,PLAINTEXT_HOST://:9092,PLAINTEXT://:19092'
      KAFKA_ADVERTISED_LISTENERS: '{advertised}'
      KAFKA_INTER_BROKER_LISTENER_NAME: 'PLAINTEXT'
      KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER'
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1
"""


def kafka_example(published: str = "9092:9092",
                  advertised: str = "PLAINTEXT_HOST://localhost:9092,PLAINTEXT://broker:19092") -> str:
    """Kafka's own single-node Compose example, with one thing changed."""
    return KAFKA_EXAMPLE.replace("{published}", published).replace("{advertised}", advertised)


def two_brokers(advertised0: str, advertised1: str) -> str:
    """Two apache/kafka services of one Compose network, each with one listener, not published."""
    service = """
  kafka{i}:
    image: apache/kafka:4.1.1
    environment:
      KAFKA_NODE_ID: {i}
      KAFKA_PROCESS_ROLES: broker
      KAFKA_LISTENERS: PLAINTEXT://:9092
      KAFKA_ADVERTISED_LISTENERS: {adv}
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 2
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 2
"""
    return "services:" + "".join(service.replace("{i}", str(i)).replace("{adv}", adv)
                                 for i, adv in enumerate((advertised0, advertised1)))


STRIMZI = """
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaNodePool
metadata: {name: dual-role, labels: {strimzi.io/cluster: my-cluster}}
spec: {replicas: 2, roles: [controller, broker]}
---
apiVersion: kafka.strimzi.io/v1beta2
kind: Kafka
metadata: {name: my-cluster, namespace: kafka}
spec:
  kafka:
    config: {offsets.topic.replication.factor: 2, transaction.state.log.replication.factor: 2}
    listeners:
      - {name: plain, port: 9092, type: internal, tls: false}
      - {name: external, port: 9094, type: loadbalancer, tls: true{brokers}}
"""

# Two brokers' internal topics at two replicas: rows about listeners keep their internal topics creatable.
TWO_REPLICAS = "offsets.topic.replication.factor=2\ntransaction.state.log.replication.factor=2\n"


def brokers(count: int, image: str = "apache/kafka:4.1.1", env: str = "") -> str:
    """`count` combined KRaft nodes of one Compose file, as tutorials write them; `env` adds lines to each.

    Bitnami's image reads KAFKA_CFG_ names, the others KAFKA_ ones; the listeners are right, so a row's
    findings are the internal topics' alone.
    """
    prefix = "KAFKA_CFG_" if image.startswith("bitnami/") else "KAFKA_"
    voters = ",".join(f"{i}@kafka{i}:9093" for i in range(count))
    service = f"""
  kafka{{i}}:
    image: {image}
    environment:
      {prefix}NODE_ID: {{i}}
      {prefix}PROCESS_ROLES: broker,controller
      {prefix}CONTROLLER_QUORUM_VOTERS: {voters}
      {prefix}LISTENERS: PLAINTEXT://:9092,CONTROLLER://:9093
      {prefix}ADVERTISED_LISTENERS: PLAINTEXT://kafka{{i}}:9092
      {prefix}LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
      {prefix}CONTROLLER_LISTENER_NAMES: CONTROLLER
"""
    lines = "".join(f"      {line.strip()}\n" for line in env.splitlines() if line.strip())
    return "services:" + "".join(service.replace("{i}", str(i)) + lines for i in range(count))


# One KRaft node that is the whole cluster (its quorum is itself), and one broker of a larger cluster.
ONE_NODE = ("node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@localhost:9093\n"
            "controller.listener.names=CONTROLLER\nlisteners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
            "advertised.listeners=PLAINTEXT://localhost:9092\n")
RF_ONE = ("offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
          "transaction.state.log.min.isr=1\n")
STRIMZI_POOL = """
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaNodePool
metadata: {name: dual-role, labels: {strimzi.io/cluster: my-cluster}}
spec: {replicas: REPLICAS, roles: [controller, broker]}
---
apiVersion: kafka.strimzi.io/v1beta2
kind: Kafka
metadata: {name: my-cluster, namespace: kafka}
spec:
  kafka:
    listeners: [{name: plain, port: 9092, type: internal, tls: false}]
"""
UNCREATABLE = [("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "error", None, None),
               ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "warning", None, None)]

CASES: list[ConfigCase] = [
    # -- judged for the clients each listener is meant for ---------------------------------------------------
    row("seeds-alice-advertises-a-name-nobody-resolves", "compose", SEEDS,
        expect=[("ADVERTISED_UNRESOLVABLE", "error", 0, "never-gonna-give-you-up:29094")],
        says=[("ADVERTISED_UNRESOLVABLE", "message", "listener LISTENER_ALICE advertises never-gonna-give-you-up:29094 "
               "to clients on the Docker host"),
              ("ADVERTISED_UNRESOLVABLE", "message", "bootstrap at localhost:29094"),
              ("ADVERTISED_UNRESOLVABLE", "fix", "KAFKA_ADVERTISED_LISTENERS")],
        reach=[("LISTENER_BOB", "compose-network", "works"), ("LISTENER_BOB", "docker-host", "no_bootstrap"),
               ("LISTENER_FRED", "docker-host", "works"), ("LISTENER_FRED", "compose-network", "unreachable"),
               ("LISTENER_ALICE", "docker-host", "unresolvable")]),
    row("a-correct-compose-file-passes-on-the-docker-host-whose-resolver-knows-no-compose-name", "compose",
        kafka_example(), expect=[],
        reach=[("PLAINTEXT", "compose-network", "works"), ("PLAINTEXT_HOST", "docker-host", "works"),
               ("PLAINTEXT", "docker-host", "no_bootstrap"), ("PLAINTEXT_HOST", "compose-network", "unreachable")]),
    row("a-service-name-on-a-published-port-with-no-other-listener-for-the-host", "compose",
        kafka_example(published="19092:19092", advertised="PLAINTEXT_HOST://broker:9092,PLAINTEXT://broker:19092"),
        expect=[("ADVERTISED_INTERNAL_NAME", "error", 1, "broker:19092")],
        says=[("ADVERTISED_INTERNAL_NAME", "message", "a name only the Compose network resolves"),
              ("ADVERTISED_INTERNAL_NAME", "fix", "advertise localhost:19092")]),
    row("a-service-name-on-a-published-port-beside-a-listener-for-the-host", "compose",
        kafka_example().replace("ports: ['9092:9092']", "ports: ['9092:9092', '19092:19092']"),
        expect=[("ADVERTISED_INTERNAL_NAME", "warning", 1, "broker:19092")],
        says=[("ADVERTISED_INTERNAL_NAME", "message", "have listener PLAINTEXT_HOST (bootstrap localhost:9092)")]),
    row("the-container-id-an-empty-advertised-host-gets", "compose",
        kafka_example(advertised="PLAINTEXT_HOST://:9092,PLAINTEXT://broker:19092").replace(
            "    hostname: broker\n", ""),
        expect=[("ADVERTISED_INTERNAL_NAME", "error", 1, "<container id of broker>:9092")],
        reach=[("PLAINTEXT_HOST", "docker-host", "unresolvable")]),
    row("published-on-another-port-than-advertised", "compose",
        kafka_example(published="29092:9092"),
        expect=[("PUBLISHED_PORT_DIFFERS", "error", 1, "localhost:9092")],
        says=[("PUBLISHED_PORT_DIFFERS", "message", "0.0.0.0:29092->9092"),
              ("PUBLISHED_PORT_DIFFERS", "fix", "PLAINTEXT_HOST://localhost:29092")]),
    row("published-on-another-port-and-advertised-so-as-kafkas-cluster-examples-do", "compose",
        kafka_example(published="29092:9092",
                      advertised="PLAINTEXT_HOST://localhost:29092,PLAINTEXT://broker:19092"), expect=[]),
    row("localhost-on-a-listener-only-the-compose-network-reaches", "compose",
        two_brokers("PLAINTEXT://localhost:9092", "PLAINTEXT://kafka1:9092"),
        expect=[("ADVERTISED_LOOPBACK", "error", 0, "localhost:9092")],
        says=[("ADVERTISED_LOOPBACK", "fix", "PLAINTEXT://kafka0:9092")]),
    row("a-compose-name-at-a-port-nothing-listens-on", "compose",
        two_brokers("PLAINTEXT://kafka0:9999", "PLAINTEXT://kafka1:9092"),
        expect=[("ADVERTISED_REFUSED", "error", 0, "kafka0:9999")],
        says=[("ADVERTISED_REFUSED", "message", "nothing listens on port 9999")]),
    row("two-brokers-one-endpoint", "compose",
        two_brokers("PLAINTEXT://kafka0:9092", "PLAINTEXT://kafka0:9092"),
        expect=[("DUPLICATE_ENDPOINT", "error", None, "kafka0:9092")]),
    row("two-server-properties-one-localhost-port", "properties",
        "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:9092\nadvertised.listeners=PLAINTEXT://localhost:9092\n" + TWO_REPLICAS,
        "node.id=2\nlisteners=PLAINTEXT://127.0.0.1:9092\nadvertised.listeners=PLAINTEXT://localhost:9092\n" + TWO_REPLICAS,
        expect=[("DUPLICATE_ENDPOINT", "error", None, "localhost:9092")]),
    row("server-properties-advertising-localhost-while-binding-every-interface", "properties",
        "node.id=1\nlisteners=PLAINTEXT://0.0.0.0:9092\nadvertised.listeners=PLAINTEXT://localhost:9092\n",
        expect=[("ADVERTISED_LOOPBACK", "error", 1, "localhost:9092")]),
    row("server-properties-bound-to-loopback-advertising-localhost-is-for-its-own-machine", "properties",
        "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:9092\nadvertised.listeners=PLAINTEXT://localhost:9092\n",
        expect=[], reach=[("PLAINTEXT", "here", "works")]),
    row("the-cloud-fix-internal-beside-external-judges-external-from-here", "properties",
        "node.id=0\nlisteners=INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092\n"
        "advertised.listeners=INTERNAL://ip-172-31-18-160.us-west-2.compute.internal:19092,"
        "EXTERNAL://ec2-34-211-52-10.us-west-2.compute.amazonaws.com:9092\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\ninter.broker.listener.name=INTERNAL\n",
        resolves=("ec2-34-211-52-10.us-west-2.compute.amazonaws.com",), expect=[],
        reach=[("INTERNAL", "here", "unresolvable"), ("EXTERNAL", "here", "resolves")]),
    row("the-classic-one-listener-advertising-a-vpc-name", "properties",
        "node.id=0\nlisteners=PLAINTEXT://0.0.0.0:9092\n"
        "advertised.listeners=PLAINTEXT://ip-172-31-18-160.us-west-2.compute.internal:9092\n",
        expect=[("ADVERTISED_UNRESOLVABLE", "error", 0, "ip-172-31-18-160.us-west-2.compute.internal:9092")]),
    # -- what Kafka refuses at start -----------------------------------------------------------------------------
    row("advertised-listeners-unset-and-listeners-on-the-wildcard", "properties",
        "node.id=1\nlisteners=PLAINTEXT://0.0.0.0:9092\n",
        expect=[("ADVERTISED_WILDCARD", "error", 1, "0.0.0.0:9092")],
        says=[("ADVERTISED_WILDCARD", "message", "derived from listeners")]),
    row("a-listener-the-protocol-map-does-not-name", "properties",
        "node.id=1\nlisteners=PLAINTEXT://:9092,EXTERNAL://:9094\nadvertised.listeners=PLAINTEXT://kafka1:9092,"
        "EXTERNAL://kafka1:9094\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT\n", resolves=("kafka1",),
        expect=[("LISTENER_NOT_IN_PROTOCOL_MAP", "error", 1, "kafka1:9094")],
        says=[("LISTENER_NOT_IN_PROTOCOL_MAP", "fix", "Add EXTERNAL:PLAINTEXT")]),
    row("a-listener-only-advertised", "properties",
        "node.id=1\nlisteners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://kafka1:9092,SSL://kafka1:9093\n",
        resolves=("kafka1",), expect=[("ADVERTISED_LISTENER_UNDEFINED", "error", 1, "kafka1:9093")]),
    row("the-inter-broker-listener-not-advertised", "properties",
        "node.id=1\nlisteners=INTERNAL://:19092,EXTERNAL://:9092\nadvertised.listeners=EXTERNAL://kafka1:9092\n"
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\ninter.broker.listener.name=INTERNAL\n",
        resolves=("kafka1",), expect=[("INTER_BROKER_NOT_ADVERTISED", "error", 1, None)]),
    row("the-default-inter-broker-listener-plaintext-missing", "properties",
        "node.id=1\nprocess.roles=broker\nlisteners=EXTERNAL://:9092\nadvertised.listeners=EXTERNAL://kafka1:9092\n"
        "listener.security.protocol.map=EXTERNAL:PLAINTEXT\n", resolves=("kafka1",),
        expect=[("INTER_BROKER_NOT_ADVERTISED", "error", 1, None)],
        says=[("INTER_BROKER_NOT_ADVERTISED", "message", "security.inter.broker.protocol (PLAINTEXT by default)")]),
    row("a-broker-advertising-its-controller-listener", "properties",
        "node.id=1\nprocess.roles=broker,controller\ncontroller.listener.names=CONTROLLER\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "advertised.listeners=PLAINTEXT://kafka1:9092,CONTROLLER://kafka1:9093\n", resolves=("kafka1",),
        expect=[("CONTROLLER_LISTENER_ADVERTISED", "info", 1, "kafka1:9093")],
        says=[("CONTROLLER_LISTENER_ADVERTISED", "message", "from Kafka 3.9 on that is the controller's own endpoint")]),
    row("a-broker-only-node-advertising-the-controller-listener", "properties",
        "node.id=1\nprocess.roles=broker\ncontroller.listener.names=CONTROLLER\n"
        "listeners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://kafka1:9092,CONTROLLER://kafka1:9093\n",
        resolves=("kafka1",), expect=[("CONTROLLER_LISTENER_ADVERTISED", "error", 1, "kafka1:9093"),
                                      ("ADVERTISED_LISTENER_UNDEFINED", "error", 1, "kafka1:9093")]),
    # -- operators ------------------------------------------------------------------------------------------------
    row("strimzi-internal-listeners-serve-the-cluster", "strimzi", STRIMZI.replace("{brokers}", "").replace(
        "      - {name: external, port: 9094, type: loadbalancer, tls: true}\n", ""), expect=[],
        reach=[("PLAIN-9092", "cluster", "works"), ("PLAIN-9092", "outside", "no_bootstrap")]),
    row("strimzi-load-balancer-addresses-are-decided-at-deploy-time", "strimzi", STRIMZI.replace("{brokers}", ""),
        expect=[("ADVERTISED_AT_DEPLOY", "info", None, None)],
        reach=[("EXTERNAL-9094", "outside", "unknown")]),
    row("strimzi-advertised-hosts-given-per-broker-are-judged-from-here", "strimzi", STRIMZI.replace(
        "{brokers}", ", configuration: {brokers: [{broker: 0, advertisedHost: kafka-0.example.com}, "
                     "{broker: 1, advertisedHost: kafka-1.example.com}]}"),
        resolves=("kafka-0.example.com",),
        expect=[("ADVERTISED_UNRESOLVABLE", "error", 1, "kafka-1.example.com:9094")]),
    row("strimzi-external-listener-advertising-a-cluster-internal-name", "strimzi", STRIMZI.replace(
        "{brokers}", ", configuration: {brokers: [{broker: 0, advertisedHost: my-cluster-dual-role-0.my-cluster-kafka-"
                     "brokers.kafka.svc}, {broker: 1, advertisedHost: kafka-1.example.com}]}"),
        resolves=("kafka-1.example.com",),
        expect=[("ADVERTISED_INTERNAL_NAME", "error", 0,
                 "my-cluster-dual-role-0.my-cluster-kafka-brokers.kafka.svc:9094")],
        says=[("ADVERTISED_INTERNAL_NAME", "fix", "Strimzi's name for pod my-cluster-dual-role-0 of Kafka cluster "
               "my-cluster"), ("ADVERTISED_INTERNAL_NAME", "fix", "add an external listener to the Kafka resource")]),
    row("bitnami-defaults-serve-the-cluster", "bitnami", "controller: {replicaCount: 3}\n", expect=[]),
    # -- the internal topics: replication factors against the brokers the file runs -----------------------------
    row("compose-one-apache-broker-left-at-kafkas-defaults", "compose", brokers(1), expect=UNCREATABLE,
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "__consumer_offsets can never be created: "
               "offsets.topic.replication.factor=3 (Kafka's default: the file leaves it unset) asks for more "
               "replicas than the 1 broker this Compose file runs (kafka0)"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "consumers in a group"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "time out in initTransactions()"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "kprobe probe reports it as OFFSETS_TOPIC_"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "Set KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1 in "
               "service kafka0's environment"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1 "
               "and KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1")]),
    row("compose-one-broker-with-its-internal-topics-at-one-replica", "compose",
        brokers(1, env="KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1\nKAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1\n"
                       "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1"), expect=[]),
    row("compose-three-brokers-at-kafkas-defaults", "compose", brokers(3), expect=[]),
    row("compose-apache-image-with-no-variable-runs-its-own-server-properties", "compose",
        "services:\n  kafka:\n    image: apache/kafka:4.1.1\n    ports: ['9092:9092']\n", expect=[]),
    row("compose-confluent-broker-with-only-the-offsets-topic-at-one-replica", "compose",
        brokers(1, image="confluentinc/cp-kafka:7.9.0", env="KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1"),
        expect=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "warning", None, None)],
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "__transaction_state can never be created")]),
    row("compose-bitnami-broker-starts-from-kafkas-own-server-properties", "compose",
        brokers(1, image="bitnami/kafka:3.9"), expect=[]),
    row("compose-bitnami-broker-asking-three-replicas", "compose",
        brokers(1, image="bitnami/kafka:3.9", env="KAFKA_CFG_OFFSETS_TOPIC_REPLICATION_FACTOR: 3"),
        expect=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "error", None, None)],
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "offsets.topic.replication.factor=3 asks"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "KAFKA_CFG_OFFSETS_TOPIC_REPLICATION_FACTOR=1")]),
    row("compose-bitnamis-legacy-name-wins-over-its-cfg-twin", "compose",
        brokers(1, image="bitnami/kafka:3.9", env="KAFKA_CFG_OFFSETS_TOPIC_REPLICATION_FACTOR: 1\n"
                                                  "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 3"),
        expect=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "error", None, None)]),
    row("compose-min-isr-left-at-two-above-one-replica", "compose",
        brokers(1, env="KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1\nKAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1"),
        expect=[("TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION", "warning", None, None)],
        says=[("TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION", "message", "transaction.state.log.replication.factor=1 but "
               "transaction.state.log.min.isr=2 (Kafka's default: the file leaves it unset)"),
              ("TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION", "message", "NOT_ENOUGH_REPLICAS"),
              ("TRANSACTION_LOG_MIN_ISR_ABOVE_REPLICATION", "fix", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1")]),
    row("compose-a-value-kafka-would-not-take-predicts-nothing", "compose",
        brokers(1, env="KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: three\n"
                       "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1\nKAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1"),
        expect=[]),
    row("server-properties-one-node-kraft-left-at-kafkas-defaults", "properties", ONE_NODE, expect=UNCREATABLE,
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "one broker of this one-node KRaft cluster"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "Set offsets.topic.replication.factor=1 in "
               "broker0.properties")]),
    row("server-properties-one-node-kraft-whose-quorum-bootstrap-is-itself", "properties",
        ONE_NODE.replace("controller.quorum.voters=1@localhost:9093", "controller.quorum.bootstrap.servers=localhost:9093"),
        expect=UNCREATABLE),
    row("server-properties-one-node-kraft-at-one-replica", "properties", ONE_NODE + RF_ONE, expect=[]),
    row("server-properties-broker-of-a-cluster-the-file-does-not-size", "properties",
        ONE_NODE.replace("process.roles=broker,controller", "process.roles=broker").replace(
            ",CONTROLLER://127.0.0.1:9093", ""), expect=[]),
    row("server-properties-combined-node-of-a-three-voter-quorum", "properties",
        ONE_NODE.replace("1@localhost:9093", "1@localhost:9093,2@kafka2:9093,3@kafka3:9093"), expect=[]),
    row("server-properties-two-files-at-kafkas-defaults", "properties",
        "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:9092\nadvertised.listeners=PLAINTEXT://localhost:9092\n",
        "node.id=2\nlisteners=PLAINTEXT://127.0.0.2:9092\nadvertised.listeners=PLAINTEXT://127.0.0.2:9092\n",
        expect=UNCREATABLE, says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "in every server.properties")]),
    row("server-properties-three-files-at-kafkas-defaults", "properties",
        *(f"node.id={i}\nlisteners=PLAINTEXT://127.0.0.{i}:9092\nadvertised.listeners=PLAINTEXT://127.0.0.{i}:9092\n"
          for i in (1, 2, 3)), expect=[]),
    row("strimzi-one-broker-pool-left-at-kafkas-defaults", "strimzi", STRIMZI_POOL.replace("REPLICAS", "1"),
        expect=UNCREATABLE,
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "the 1 broker this Kafka resource runs"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "offsets.topic.replication.factor: 1 in "
               "spec.kafka.config of the Kafka resource")]),
    row("strimzi-one-replica-without-node-pools", "strimzi",
        STRIMZI_POOL.split("---")[1].replace("    listeners:", "    replicas: 1\n    listeners:"), expect=UNCREATABLE),
    row("strimzi-one-broker-at-one-replica", "strimzi", STRIMZI_POOL.replace("REPLICAS", "1").replace(
        "    listeners:", "    config: {offsets.topic.replication.factor: 1, transaction.state.log.replication.factor: 1,"
                         " transaction.state.log.min.isr: 1}\n    listeners:"), expect=[]),
    row("strimzi-three-brokers-at-kafkas-defaults", "strimzi", STRIMZI_POOL.replace("REPLICAS", "3"), expect=[]),
    row("bitnami-one-controller-eligible-node-left-at-kafkas-defaults", "bitnami", "controller: {replicaCount: 1}\n",
        expect=UNCREATABLE,
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "message", "the 1 broker these chart values run"),
              ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "offsets.topic.replication.factor: 1 under "
               "overrideConfiguration (the chart from version 32, Kafka 4; in earlier charts, "
               "offsets.topic.replication.factor=1 in extraConfig)")]),
    row("bitnami-one-node-with-extra-config-at-one-replica", "bitnami",
        "controller: {replicaCount: 1}\nextraConfig: |\n  offsets.topic.replication.factor=1\n"
        "  transaction.state.log.replication.factor=1\n  transaction.state.log.min.isr=1\n", expect=[]),
    row("bitnami-one-node-with-override-configuration-at-one-replica", "bitnami",
        "controller: {replicaCount: 1}\noverrideConfiguration: {offsets.topic.replication.factor: 1, "
        "transaction.state.log.replication.factor: 1, transaction.state.log.min.isr: 1}\n", expect=[]),
    row("bitnami-fix-spelt-in-the-extra-config-the-values-use", "bitnami",
        "controller: {replicaCount: 1}\nextraConfig: |\n  transaction.state.log.replication.factor=1\n"
        "  transaction.state.log.min.isr=1\n",
        expect=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "error", None, None)],
        says=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "fix", "offsets.topic.replication.factor=1 in extraConfig")]),
    row("bitnami-broker-only-pods-count-beside-dedicated-controllers", "bitnami",
        "controller: {replicaCount: 3, controllerOnly: true}\nbroker: {replicaCount: 1}\n", expect=UNCREATABLE),
    row("bitnami-one-controller-and-two-brokers-are-three", "bitnami",
        "controller: {replicaCount: 1}\nbroker: {replicaCount: 2}\n", expect=[]),
    row("bitnami-a-helm-template-predicts-nothing-for-its-setting", "bitnami",
        "controller: {replicaCount: 1}\nextraConfig: |\n  offsets.topic.replication.factor={{ .Values.rf }}\n",
        expect=[("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "warning", None, None)]),
    row("bitnami-external-access-by-load-balancer", "bitnami",
        "externalAccess: {enabled: true, autoDiscovery: {enabled: true}}\n",
        expect=[("ADVERTISED_AT_DEPLOY", "info", None, None)]),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_config_rule(case: ConfigCase):
    deps = deployments(case)
    checks, found = check_deployments(deps, resolver_answers(deps, case.resolves))
    got = Counter((f.code, f.severity, f.node_id, f.endpoint) for f in found)
    assert got == Counter(case.expect), [(f.code, f.message) for f in found]
    for code, field, text in case.says:
        texts = [getattr(f, field) for f in found if f.code == code]
        assert any(text in t for t in texts), (code, field, text, texts)
    for listener, vantage, status in case.reach:
        reaches = [r.status for c in checks if c.listener.name == listener for r in c.reach if r.vantage == vantage]
        assert reaches and set(reaches) == {status}, (listener, vantage, reaches)


def test_names_to_resolve_skips_addresses_loopback_and_placeholders():
    deps = deployments(row("n", "compose", kafka_example(
        advertised="PLAINTEXT_HOST://localhost:9092,PLAINTEXT://broker:19092"), expect=[]))
    assert names_to_resolve(deps) == ["broker"]
    deps = deployments(row("n", "strimzi", STRIMZI.replace("{brokers}", ""), expect=[]))
    assert names_to_resolve(deps) == []  # cluster names and load balancers: never this machine's resolver's
