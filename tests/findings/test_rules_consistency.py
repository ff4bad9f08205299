"""Bootstraps compared with each other (kprobe/findings/consistency.py), proven on plain data.

One cluster, one broker set, one endpoint per node and one node per endpoint: each can only be
judged across several bootstrap answers, so each row gives the answers side by side. The
three-broker lab's PARTIAL (a listener on brokers 0 and 1 only) and TWIN (brokers 0 and 2
advertise one endpoint) listeners, a bootstrap list that mixes the three-broker cluster with the
teaching broker, and the metadata of a cloned broker config.
"""

from __future__ import annotations

import pytest
from observations import (
    KAFKA0_DOCKER_IP,
    OTHER_CLUSTER,
    Case,
    answers_as,
    boot,
    case,
    check,
    endpoint,
    is_node,
    params,
    topic,
)

CLIENT_SET = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "192.0.2.12", 9092)]
PARTIAL_SET = [(0, "192.0.2.10", 9096), (1, "192.0.2.11", 9096)]
TWIN_SET = [(0, "192.0.2.10", 9095), (1, "192.0.2.11", 9095), (2, "192.0.2.10", 9095)]


def client_endpoints(via: str) -> list:
    return [endpoint(n, h, p, via) for n, h, p in CLIENT_SET]


CASES: list[Case] = [
    case(
        "three-brokers-and-the-teaching-broker-in-one-bootstrap-list",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=CLIENT_SET),
         boot("kafka0:9092", connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "kafka0", 9092)], cluster_id=OTHER_CLUSTER)],
        [*client_endpoints("192.0.2.10:9092"), endpoint(0, "kafka0", 9092, "kafka0:9092", dns=[KAFKA0_DOCKER_IP])],
        # Only the mix: comparing broker sets or endpoints across two clusters means nothing.
        [("CLUSTER_ID_MISMATCH", "error", None, None)],
        says=[("CLUSTER_ID_MISMATCH", None, "message", "mixes 2 clusters"),
              ("CLUSTER_ID_MISMATCH", None, "message", f"{OTHER_CLUSTER}: kafka0:9092"),
              ("CLUSTER_ID_MISMATCH", None, "fix", "Keep one cluster's brokers in bootstrap.servers")],
    ),
    case(
        "listener-missing-on-broker-2",
        [boot("192.0.2.10:9096", connected_to="192.0.2.10", advertises=PARTIAL_SET),
         boot("192.0.2.11:9092", connected_to="192.0.2.11", advertises=CLIENT_SET)],
        [*[endpoint(n, h, p, "192.0.2.10:9096") for n, h, p in PARTIAL_SET], *client_endpoints("192.0.2.11:9092")],
        [("BROKER_SET_MISMATCH", "warning", None, None)],
        says=[("BROKER_SET_MISMATCH", None, "message", "[0, 1] via 192.0.2.10:9096"),
              ("BROKER_SET_MISMATCH", None, "message", "[0, 1, 2] via 192.0.2.11:9092"),
              ("BROKER_SET_MISMATCH", None, "fix", "a broker missing from one listener needs that listener added")],
    ),
    case(
        "two-bootstraps-of-the-partial-listener-agree",
        [boot("192.0.2.10:9096", connected_to="192.0.2.10", advertises=PARTIAL_SET),
         boot("192.0.2.11:9096", connected_to="192.0.2.11", advertises=PARTIAL_SET)],
        [endpoint(n, h, p, ["192.0.2.10:9096", "192.0.2.11:9096"]) for n, h, p in PARTIAL_SET],
        [],
    ),
    case(
        "bootstrap-answers-with-no-broker",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[])],
        [],
        [("NO_ADVERTISED_BROKERS", "error", None, None)],
        says=[("NO_ADVERTISED_BROKERS", None, "message", "192.0.2.10:9092 answered, but its metadata lists no broker"),
              ("NO_ADVERTISED_BROKERS", None, "fix", "registration with the controller")],
    ),
    case(
        "two-brokers-share-node-id-1",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10",
              advertises=[(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (1, "192.0.2.12", 9092)])],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092"), endpoint(1, "192.0.2.11", 9092, "192.0.2.10:9092"),
         endpoint(1, "192.0.2.12", 9092, "192.0.2.10:9092")],
        [("DUPLICATE_NODE_ID", "error", 1, None)],
        says=[("DUPLICATE_NODE_ID", 1, "message", "lists node id(s) 1 more than once"),
              ("DUPLICATE_NODE_ID", 1, "fix", "give every broker its own node.id")],
    ),
    case(
        "twin-brokers-0-and-2-advertise-one-endpoint",
        [boot("192.0.2.11:9095", connected_to="192.0.2.11", advertises=TWIN_SET, node_id=1)],
        [endpoint(0, "192.0.2.10", 9095, "192.0.2.11:9095", identity=is_node(0, "192.0.2.10", TWIN_SET)),
         endpoint(1, "192.0.2.11", 9095, "192.0.2.11:9095", identity=is_node(1, "192.0.2.11", TWIN_SET)),
         endpoint(2, "192.0.2.10", 9095, "192.0.2.11:9095", identity=answers_as(0, "192.0.2.10", TWIN_SET))],
        # Held against broker 2: broker 0 answers there, so its partitions work (usable as clients find it).
        [("DUPLICATE_ENDPOINT", "error", 2, "192.0.2.10:9095"), ("ENDPOINT_WRONG_BROKER", "error", 2, "192.0.2.10:9095")],
        says=[("DUPLICATE_ENDPOINT", 2, "message", "Brokers 0, 2 all advertise 192.0.2.10:9095"),
              ("DUPLICATE_ENDPOINT", 2, "message", "found broker 0 answering there"),
              ("DUPLICATE_ENDPOINT", 2, "fix", "advertised.listeners of brokers 0, 2")],
        concerns=[("DUPLICATE_ENDPOINT", (2,), ("192.0.2.10:9095",))],
    ),
    case(
        "one-endpoint-spelt-in-two-cases-is-still-one",
        # DNS names are case-insensitive: both land on the same socket.
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10",
              advertises=[(0, "Broker0.Kafka.example.com", 9092), (1, "broker0.kafka.example.com", 9092)])],
        [endpoint(0, "Broker0.Kafka.example.com", 9092, "broker0.kafka.example.com:9092", dns=["192.0.2.10"]),
         endpoint(1, "broker0.kafka.example.com", 9092, "broker0.kafka.example.com:9092", dns=["192.0.2.10"])],
        # Identity not checked: which one answers is unknown, so the finding names both, each as it advertised it.
        [("DUPLICATE_ENDPOINT", "error", None, "broker0.kafka.example.com:9092")],
        concerns=[("DUPLICATE_ENDPOINT", (0, 1), ("Broker0.Kafka.example.com:9092", "broker0.kafka.example.com:9092"))],
    ),
    # -- LISTENER_NOT_FOUND: what Kafka 4.1 answers through PARTIAL for partitions on broker 2 -------------
    case(
        "partition-led-by-a-broker-without-the-listener",
        # Measured: leader -1, error 72, replicas still naming broker 2.
        [boot("192.0.2.10:9096", connected_to="192.0.2.10", advertises=PARTIAL_SET,
              topics=[topic("orders", (-1, [2, 0], 72), (1, [1, 0], 0))])],
        [endpoint(n, h, p, "192.0.2.10:9096") for n, h, p in PARTIAL_SET],
        [("LISTENER_NOT_FOUND", "error", 2, None)],
        says=[("LISTENER_NOT_FOUND", 2, "message", "1 partition(s) are led by broker(s) 2"),
              ("LISTENER_NOT_FOUND", 2, "message", ": orders-0."),
              ("LISTENER_NOT_FOUND", 2, "message", "reached at 192.0.2.10:9096"),
              ("LISTENER_NOT_FOUND", 2, "fix", "Broker(s) 2 lack the listener 192.0.2.10:9096 reaches")],
        never_says=[("LISTENER_NOT_FOUND", 2, "message", "orders-1")],
    ),
    case(
        "leader-missing-from-the-broker-list-without-an-error-code",
        # An older broker or a proxy that rewrites metadata: the leader id names nobody listed.
        [boot("192.0.2.10:9096", connected_to="192.0.2.10", advertises=PARTIAL_SET,
              topics=[topic("orders", (7, [7], 0))])],
        [endpoint(n, h, p, "192.0.2.10:9096") for n, h, p in PARTIAL_SET],
        [("LISTENER_NOT_FOUND", "error", 7, None)],
        says=[("LISTENER_NOT_FOUND", 7, "message", "led by broker(s) 7")],
    ),
    case(
        "only-a-follower-lacks-the-listener",
        [boot("192.0.2.10:9096", connected_to="192.0.2.10", advertises=PARTIAL_SET,
              topics=[topic("orders", (0, [0, 2], 0), (1, [1, 0], 0))])],
        [endpoint(n, h, p, "192.0.2.10:9096") for n, h, p in PARTIAL_SET],
        [("LISTENER_NOT_FOUND", "warning", 2, None)],
        says=[("LISTENER_NOT_FOUND", 2, "message", "have replicas on broker(s) 2"),
              ("LISTENER_NOT_FOUND", 2, "message", "once such a replica becomes leader")],
    ),
    case(
        "two-bootstraps-of-one-listener-give-one-finding",
        [boot(f"192.0.2.1{i}:9096", connected_to=f"192.0.2.1{i}", advertises=PARTIAL_SET,
              topics=[topic("orders", (-1, [2], 72))]) for i in (0, 1)],
        [endpoint(n, h, p, ["192.0.2.10:9096", "192.0.2.11:9096"]) for n, h, p in PARTIAL_SET],
        [("LISTENER_NOT_FOUND", "error", 2, None)],
        says=[("LISTENER_NOT_FOUND", 2, "message", "reached at 192.0.2.10:9096, 192.0.2.11:9096")],
    ),
    case(
        "many-partitions-are-counted-and-named-up-to-ten",
        [boot("192.0.2.10:9096", connected_to="192.0.2.10", advertises=PARTIAL_SET,
              topics=[topic("big", *[(-1, [2], 72)] * 25)])],
        [endpoint(n, h, p, "192.0.2.10:9096") for n, h, p in PARTIAL_SET],
        [("LISTENER_NOT_FOUND", "error", 2, None)],
        says=[("LISTENER_NOT_FOUND", 2, "message", "25 partition(s)"),
              ("LISTENER_NOT_FOUND", 2, "message", "and 15 more")],
    ),
    case(
        "every-partition-on-listed-brokers-is-quiet",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=CLIENT_SET,
              topics=[topic("orders", (2, [2, 0, 1], 0), (0, [0, 1, 2], 0))])],
        client_endpoints("192.0.2.10:9092"),
        [],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_consistency_rules(row: Case):
    check(row)
