"""Who answers at each endpoint (kprobe/findings/identity.py), proven on plain data.

TCP alone says an endpoint works; the identity step (ApiVersions, Metadata, DescribeConfigs on a
connection of its own) says whether the advertised node answers there and what it advertises
from there. These rows are the three-broker lab's CROSSED, TWIN and IMPOSTOR listeners, a
proxy with no backend, and the AWS option-2 setup with the EXTERNAL listener advertising the
INTERNAL port, with the addresses a real network would have.
"""

from __future__ import annotations

import pytest
from observations import (
    AWS_PRIVATE,
    AWS_PRIVATE_IP,
    AWS_PUBLIC,
    AWS_PUBLIC_IP,
    Case,
    answers_as,
    boot,
    brokers,
    case,
    check,
    endpoint,
    is_node,
    params,
)

from kprobe.models import Identity
from kprobe.records import replace

# The three-broker lab, on documentation addresses: CLIENT on 9092, CROSSED on 9094 (broker 2
# advertises broker 0's CLIENT endpoint, as a wrong NAT rule would).
CLIENT_SET = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "192.0.2.12", 9092)]
CROSSED_SET = [(0, "192.0.2.10", 9094), (1, "192.0.2.11", 9094), (2, "192.0.2.10", 9092)]
CROSSED_BOOT = boot("192.0.2.10:9094", connected_to="192.0.2.10", advertises=CROSSED_SET, node_id=0)


def crossed(identities: bool) -> list:
    """CROSSED's three endpoints; with `identities`, each as the identity step saw it."""
    return [
        endpoint(0, "192.0.2.10", 9094, "192.0.2.10:9094",
                 identity=is_node(0, "192.0.2.10", CROSSED_SET) if identities else None),
        endpoint(1, "192.0.2.11", 9094, "192.0.2.10:9094",
                 identity=is_node(1, "192.0.2.11", CROSSED_SET) if identities else None),
        # Broker 2's endpoint leads to broker 0's CLIENT listener, which says it is node 0 and
        # advertises the CLIENT set.
        endpoint(2, "192.0.2.10", 9092, "192.0.2.10:9094",
                 identity=answers_as(0, "192.0.2.10", CLIENT_SET) if identities else None),
    ]


IMPOSTOR_SET = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "192.0.2.12", 8080)]
IMPOSTOR_BOOT = boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=IMPOSTOR_SET, node_id=0)


def impostor(identity: Identity) -> list:
    """Broker 2 advertises a port where something else holds the connection."""
    return [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092", identity=is_node(0, "192.0.2.10", IMPOSTOR_SET)),
            endpoint(1, "192.0.2.11", 9092, "192.0.2.10:9092", identity=is_node(1, "192.0.2.11", IMPOSTOR_SET)),
            endpoint(2, "192.0.2.12", 8080, "192.0.2.10:9092", identity=identity)]


# AWS option 2 gone wrong: EXTERNAL (9092) advertises the public name with INTERNAL's port 19092.
EXTERNAL_BOOT = boot(f"{AWS_PUBLIC}:9092", connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PUBLIC, 19092)], node_id=0)
INTERNAL_SET = [(0, AWS_PRIVATE, 19092)]
AWS_PRIVATE_1 = "ip-172-31-18-161.us-west-2.compute.internal"
AWS_PUBLIC_1 = "ec2-34-211-52-11.us-west-2.compute.amazonaws.com"
VPC_INTERNAL_SET = [(0, AWS_PRIVATE, 19092), (1, AWS_PRIVATE_1, 19092)]
VPC_EXTERNAL_SET = [(0, AWS_PRIVATE, 19092), (1, AWS_PUBLIC_1, 9092)]

CASES: list[Case] = [
    case(
        "healthy-three-brokers-each-is-who-it-says",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=CLIENT_SET, node_id=0)],
        [endpoint(n, h, p, "192.0.2.10:9092", identity=is_node(n, h, CLIENT_SET)) for n, h, p in CLIENT_SET],
        [],
    ),
    case(
        "crossed-broker-2-advertises-broker-0s-endpoint",
        [CROSSED_BOOT], crossed(identities=True),
        [("ENDPOINT_WRONG_BROKER", "error", 2, "192.0.2.10:9092"),
         # Broker 2's endpoint is the bootstrap's own address with another port: the NAT hint.
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 2, "192.0.2.10:9092"),
         # Broker 0's CLIENT listener (where 2's endpoint leads) advertises the CLIENT set, not CROSSED's.
         ("ENDPOINT_ADVERTISES_DIFFERENTLY", "warning", 2, "192.0.2.10:9092")],
        says=[("ENDPOINT_WRONG_BROKER", 2, "message", "(192.0.2.10) is node 0"),
              ("ENDPOINT_WRONG_BROKER", 2, "message", "NOT_LEADER_OR_FOLLOWER"),
              ("ENDPOINT_WRONG_BROKER", 2, "fix", "the port-forward / NAT / load-balancer rule"),
              ("ENDPOINT_ADVERTISES_DIFFERENTLY", 2, "message",
               "Through 192.0.2.10:9094 the cluster is 0=192.0.2.10:9094, 1=192.0.2.11:9094, 2=192.0.2.10:9092"),
              ("ENDPOINT_ADVERTISES_DIFFERENTLY", 2, "message",
               "is told 0=192.0.2.10:9092, 1=192.0.2.11:9092, 2=192.0.2.12:9092"),
              ("ENDPOINT_ADVERTISES_DIFFERENTLY", 2, "fix", "same port, same protocol")],
    ),
    case(
        "crossed-through-two-bootstraps-is-one-finding-per-endpoint",
        [CROSSED_BOOT, boot("192.0.2.11:9094", connected_to="192.0.2.11", advertises=CROSSED_SET, node_id=1)],
        [replace(e, endpoint=replace(e.endpoint, advertised_by=("192.0.2.10:9094", "192.0.2.11:9094")))
         for e in crossed(identities=True)],
        [("ENDPOINT_WRONG_BROKER", "error", 2, "192.0.2.10:9092"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 2, "192.0.2.10:9092"),
         ("ENDPOINT_ADVERTISES_DIFFERENTLY", "warning", 2, "192.0.2.10:9092")],
    ),
    case(
        "crossed-with-no-identity-says-nothing-of-identity",
        [CROSSED_BOOT], crossed(identities=False),
        [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 2, "192.0.2.10:9092")],
    ),
    case(
        "impostor-http-server-on-broker-2s-port",
        [IMPOSTOR_BOOT],
        impostor(Identity(status="not_kafka", detail="response size 1213486160 is not plausible",
                          address="192.0.2.12", ms=1.3)),
        [("ENDPOINT_NOT_KAFKA", "error", 2, "192.0.2.12:8080")],
        says=[("ENDPOINT_NOT_KAFKA", 2, "message", "it does not speak Kafka (response size 1213486160 is not"),
              ("ENDPOINT_NOT_KAFKA", 2, "fix", "check what else listens on 192.0.2.12:8080")],
    ),
    case(
        "proxy-with-no-backend-accepts-and-closes",
        [IMPOSTOR_BOOT],
        impostor(Identity(status="silent", address="192.0.2.12", ms=2.0,
                          detail="192.0.2.12:8080 accepted the connection but gave no Kafka answer: connection "
                                 "closed by the peer")),
        [("ENDPOINT_NOT_ANSWERING", "error", 2, "192.0.2.12:8080")],
        says=[("ENDPOINT_NOT_ANSWERING", 2, "message", "TCP checks pass"),
              ("ENDPOINT_NOT_ANSWERING", 2, "message", "(192.0.2.12:8080 accepted the connection but gave no Kafka"),
              ("ENDPOINT_NOT_ANSWERING", 2, "fix", "the listener on port 8080")],
        # Silence is not proof of an impostor: a dying broker does the same.
        never_says=[("ENDPOINT_NOT_ANSWERING", 2, "message", "does not speak Kafka")],
    ),
    case(
        "aws-external-listener-advertises-the-internal-port",
        [EXTERNAL_BOOT],
        [endpoint(0, AWS_PUBLIC, 19092, f"{AWS_PUBLIC}:9092", dns=[AWS_PUBLIC_IP],
                  identity=is_node(0, AWS_PUBLIC_IP, INTERNAL_SET))],
        [("ENDPOINT_ADVERTISES_DIFFERENTLY", "warning", 0, f"{AWS_PUBLIC}:19092"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 0, f"{AWS_PUBLIC}:19092")],
        says=[("ENDPOINT_ADVERTISES_DIFFERENTLY", 0, "message", f"is told 0={AWS_PRIVATE}:19092"),
              ("ENDPOINT_ADVERTISES_DIFFERENTLY", 0, "message", "flip between the two sets on every metadata refresh")],
    ),
    case(
        "metadata-read-but-node-unknown-still-compares-the-sets",
        # DescribeConfigs denied (no ACL): which node answers is unknown, what it advertises is not.
        [EXTERNAL_BOOT],
        [endpoint(0, AWS_PUBLIC, 19092, f"{AWS_PUBLIC}:9092", dns=[AWS_PUBLIC_IP],
                  identity=Identity(status="unchecked", address=AWS_PUBLIC_IP, advertised=brokers(*INTERNAL_SET),
                                    detail="not authorised to describe broker configs "
                                    "(CLUSTER_AUTHORIZATION_FAILED): grant DescribeConfigs on the cluster"))],
        [("ENDPOINT_ADVERTISES_DIFFERENTLY", "warning", 0, f"{AWS_PUBLIC}:19092"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 0, f"{AWS_PUBLIC}:19092"),
         ("IDENTITY_NOT_CHECKED", "info", None, None)],
    ),
    case(
        "inside-the-vpc-external-advertises-broker-0s-internal-endpoint",
        # Inside the VPC both names resolve (AWS answers the public name with the private address). Broker 0's
        # EXTERNAL listener advertises its INTERNAL endpoint; broker 1 is configured right.
        [boot(f"{AWS_PRIVATE}:19092", connected_to=AWS_PRIVATE_IP, advertises=VPC_INTERNAL_SET, node_id=0),
         boot(f"{AWS_PUBLIC}:9092", connected_to=AWS_PRIVATE_IP, advertises=VPC_EXTERNAL_SET, node_id=0)],
        [endpoint(0, AWS_PRIVATE, 19092, [f"{AWS_PRIVATE}:19092", f"{AWS_PUBLIC}:9092"], dns=[AWS_PRIVATE_IP],
                  identity=is_node(0, AWS_PRIVATE_IP, VPC_INTERNAL_SET)),
         endpoint(1, AWS_PRIVATE_1, 19092, f"{AWS_PRIVATE}:19092", dns=["172.31.18.161"],
                  identity=is_node(1, "172.31.18.161", VPC_INTERNAL_SET)),
         endpoint(1, AWS_PUBLIC_1, 9092, f"{AWS_PUBLIC}:9092", dns=["172.31.18.161"],
                  identity=is_node(1, "172.31.18.161", VPC_EXTERNAL_SET))],
        [("ENDPOINT_ADVERTISES_DIFFERENTLY", "warning", 0, f"{AWS_PRIVATE}:19092"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 0, f"{AWS_PRIVATE}:19092")],
        says=[("ENDPOINT_ADVERTISES_DIFFERENTLY", 0, "message", f"Through {AWS_PUBLIC}:9092 the cluster is"),
              ("PORT_DIFFERS_FROM_BOOTSTRAP", 0, "message", f"You bootstrapped through {AWS_PUBLIC}:9092")],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_identity_rules(row: Case):
    check(row)


def test_advertises_differently_names_the_bootstrap_whose_set_differs():
    """The listener to change is the one behind the bootstrap whose set differs, which need not be the
    endpoint's first source (the bootstrap most other findings name)."""
    found = check(CASES[[c.name for c in CASES].index("inside-the-vpc-external-advertises-broker-0s-internal-endpoint")])
    [differs] = [f for f in found if f.code == "ENDPOINT_ADVERTISES_DIFFERENTLY"]
    assert differs.bootstrap == f"{AWS_PUBLIC}:9092"
