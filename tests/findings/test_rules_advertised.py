"""What fails at each advertised endpoint (kprobe/findings/advertised.py), proven on plain data.

The heart of kprobe: the bootstrap answered and what it advertises does not work from here. The
lab sends traffic to loopback only, so it can never show a client that bootstrapped through a
non-loopback address (ADVERTISED_LOOPBACK), a NAT'd port, a no-route or a reset; these rows can.
Listener lines are proposed only on evidence (the bootstrap answered from here *and* was
identified as the failing node): rows with the evidence check the lines, rows without check
that none is proposed.
"""

from __future__ import annotations

import pytest
from observations import (
    AWS_PRIVATE,
    AWS_PRIVATE_IP,
    AWS_PUBLIC,
    AWS_PUBLIC_IP,
    CLUSTER,
    KAFKA0_DOCKER_IP,
    OTHER_CLUSTER,
    Case,
    boot,
    case,
    check,
    endpoint,
    failed,
    invalid_endpoint,
    params,
    resolved,
)

from kprobe.models import Remap

AWS_BOOT = f"{AWS_PUBLIC}:9092"
AWS_ENDPOINT = f"{AWS_PRIVATE}:9092"
FRED_INSIDE = "kafka0:9092"  # LISTENER_FRED reached from inside the Docker network
ALICE = "kafka0:29094"  # LISTENER_ALICE, advertising never-gonna-give-you-up:29094
BOB = "kafka0:29092"  # LISTENER_BOB, for clients inside the Docker network
THREE = [(0, "192.0.2.10", 9092), (1, "192.0.2.11", 9092), (2, "192.0.2.12", 9092)]


def aws_unresolvable(node_id: int | None, protocol: str | None = None) -> tuple[list, list]:
    """The classic: the public name answers, the broker advertises its VPC-private name."""
    b = boot(AWS_BOOT, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PRIVATE, 9092)], node_id=node_id,
             protocol=protocol)  # type: ignore[arg-type]
    e = endpoint(0, AWS_PRIVATE, 9092, AWS_BOOT, dns=failed(AWS_PRIVATE, "nxdomain"))
    return [b], [e]


AWS_INTERNAL = f"{AWS_PUBLIC}:19092"  # the INTERNAL listener, reached through the public name
AWS_EXTERNAL = f"{AWS_PUBLIC}:9092"  # the EXTERNAL listener, advertising the public name


def two_listeners(*, external_cluster: str = CLUSTER, external_connect: str = "ok",
                  external_remap: Remap | None = None) -> tuple[list, list]:
    """The cloud lab's cluster probed through both listeners from the internet: INTERNAL advertises the VPC name."""
    boots = [boot(AWS_INTERNAL, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PRIVATE, 19092)], node_id=0),
             boot(AWS_EXTERNAL, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PUBLIC, 9092)], node_id=0,
                  cluster_id=external_cluster)]
    ends = [endpoint(0, AWS_PRIVATE, 19092, AWS_INTERNAL, dns=failed(AWS_PRIVATE, "nxdomain")),
            endpoint(0, AWS_PUBLIC, 9092, AWS_EXTERNAL, dns=[AWS_PUBLIC_IP], connect=external_connect,  # type: ignore[arg-type]
                     remap=external_remap)]
    return boots, ends


# The seeds' broker as its DescribeConfigs answers: LISTENER_BOB (the Docker network, inter-broker), LISTENER_FRED
# (the Docker host), a controller listener.
SEEDS_SETTINGS = {
    "listeners": "LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,CONTROLLER://kafka0:29093",
    "advertised.listeners": "LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092",
    "inter.broker.listener.name": "LISTENER_BOB",
    "listener.security.protocol.map": "LISTENER_BOB:PLAINTEXT,LISTENER_FRED:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
}
SEEDS_BOOT = "localhost:29092"  # the Docker host, through the port published for LISTENER_BOB


def seeds_on_the_host(settings: dict[str, str] | None) -> tuple[list, list]:
    """The seeds' Docker case: the host bootstraps through the published port, the broker advertises kafka0."""
    b = boot(SEEDS_BOOT, connected_to="127.0.0.1", advertises=[(0, "kafka0", 29092)], node_id=0,
             listener_settings=settings)
    return [b], [endpoint(0, "kafka0", 29092, SEEDS_BOOT, dns=failed("kafka0", "nxdomain"))]


# A new listener's lines for the Docker host, as every fix that adds one words them.
SEEDS_NEW_LISTENER = ("add a listener for this network: `EXTERNAL://0.0.0.0:<free port>` in listeners, "
                      "`EXTERNAL://localhost:<free port>` in advertised.listeners and `EXTERNAL:PLAINTEXT` in "
                      "listener.security.protocol.map; publish its port (ports: in Compose, a Service in Kubernetes) "
                      "if the broker runs in a container; then bootstrap with localhost:<free port>.")
STRIMZI_POD = "my-cluster-kafka-0.my-cluster-kafka-brokers.kafka.svc"

NO_PROPOSAL = [("ADVERTISED_UNRESOLVABLE", 0, "fix", "EXTERNAL://"),
               ("ADVERTISED_UNRESOLVABLE", 0, "fix", "your bootstrap")]

CASES: list[Case] = [
    # -- ADVERTISED_UNRESOLVABLE ---------------------------------------------------------------------
    case(
        "alice-advertises-a-name-nobody-resolves",
        [boot(ALICE, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "never-gonna-give-you-up", 29094)])],
        [endpoint(0, "never-gonna-give-you-up", 29094, ALICE, dns=failed("never-gonna-give-you-up", "nxdomain"))],
        [("ADVERTISED_UNRESOLVABLE", "error", 0, "never-gonna-give-you-up:29094")],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "message", "You reached the cluster at kafka0:29094"),
              ("ADVERTISED_UNRESOLVABLE", 0, "message", "(never-gonna-give-you-up: Name or service not known)"),
              ("ADVERTISED_UNRESOLVABLE", 0, "message", "bootstrap fine, then fail on every request"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "Make the listener on port 29094 advertise a name this network"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "an /etc/hosts entry only fixes this one machine")],
        never_says=NO_PROPOSAL,
    ),
    case(
        "aws-private-name-without-identity-proposes-no-lines",
        *aws_unresolvable(node_id=None),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, AWS_ENDPOINT)],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "message", f"broker 0 advertises {AWS_ENDPOINT}, which does not resolve")],
        never_says=NO_PROPOSAL,
    ),
    case(
        "aws-private-name-with-the-bootstrap-identified-proposes-lines",
        *aws_unresolvable(node_id=0),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, AWS_ENDPOINT)],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix",
               f"From here broker 0 answers at {AWS_BOOT} (your bootstrap, identified as node 0)"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", f"replace {AWS_ENDPOINT} with {AWS_BOOT}"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", f"`EXTERNAL://{AWS_PUBLIC}:<free port>` in advertised.listeners"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "`EXTERNAL://0.0.0.0:<free port>` in listeners"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "`EXTERNAL:PLAINTEXT` in listener.security.protocol.map")],
    ),
    case(
        "aws-private-name-over-sasl-ssl-proposes-that-protocol",
        *aws_unresolvable(node_id=0, protocol="SASL_SSL"),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, AWS_ENDPOINT)],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "`EXTERNAL:SASL_SSL` in listener.security.protocol.map")],
    ),
    case(
        "aws-three-brokers-lines-only-for-the-node-that-answered",
        [boot("ec2-34-211-52-11.us-west-2.compute.amazonaws.com:9092", connected_to="34.211.52.11", node_id=1,
              advertises=[(0, AWS_PRIVATE, 9092), (1, "ip-172-31-18-161.us-west-2.compute.internal", 9092),
                          (2, "ip-172-31-18-162.us-west-2.compute.internal", 9092)])],
        [endpoint(n, host, 9092, "ec2-34-211-52-11.us-west-2.compute.amazonaws.com:9092", dns=failed(host, "nxdomain"))
         for n, host in ((0, AWS_PRIVATE), (1, "ip-172-31-18-161.us-west-2.compute.internal"),
                         (2, "ip-172-31-18-162.us-west-2.compute.internal"))],
        # Broker 1's fix is its own (listener lines for the node that answered); brokers 0 and 2 share a cause (names
        # of one zone, NXDOMAIN) and a fix, so they are one finding naming both.
        [("ADVERTISED_UNRESOLVABLE", "error", None, None),
         ("ADVERTISED_UNRESOLVABLE", "error", 1, "ip-172-31-18-161.us-west-2.compute.internal:9092")],
        says=[("ADVERTISED_UNRESOLVABLE", 1, "fix", "(your bootstrap, identified as node 1)"),
              ("ADVERTISED_UNRESOLVABLE", None, "message", "advertise names under us-west-2.compute.internal that do "
               "not resolve from here (Name or service not known): ip-172-31-18-160.us-west-2.compute.internal:9092 "
               "(broker 0), ip-172-31-18-162.us-west-2.compute.internal:9092 (broker 2)")],
        # The bootstrap is node 1: proposing it as broker 0's or 2's address would send their requests to node 1.
        never_says=[("ADVERTISED_UNRESOLVABLE", None, "fix", "your bootstrap")],
        concerns=[("ADVERTISED_UNRESOLVABLE", (0, 2), (AWS_ENDPOINT, "ip-172-31-18-162.us-west-2.compute.internal:9092")),
                  ("ADVERTISED_UNRESOLVABLE", (1,), ("ip-172-31-18-161.us-west-2.compute.internal:9092",))],
    ),
    case(
        "seeds-docker-name-to-the-host-adds-a-named-listener-and-never-replaces-the-inter-broker-one",
        *seeds_on_the_host(SEEDS_SETTINGS),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, "kafka0:29092")],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "message", "You reached the cluster at localhost:29092, but broker 0 "
               "advertises kafka0:29092, which does not resolve from here"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "From here broker 0 answers at localhost:29092 (your bootstrap, "
               "identified as node 0). Its listener LISTENER_BOB advertises kafka0:29092, a single-label name like "
               "a Docker or Compose service's, which serves the clients inside that container network; "
               "LISTENER_BOB is also the inter-broker listener. Keep it for them, and " + SEEDS_NEW_LISTENER),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "The broker also advertises LISTENER_FRED://localhost:9092: if it "
               "serves this network, bootstrap there and change nothing."),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "Do not replace kafka0:29092 with localhost:29092: the other "
               "brokers dial LISTENER_BOB, the inter-broker listener, from their own network.")],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "Or, only if"),
                    ("ADVERTISED_UNRESOLVABLE", 0, "fix", "the listener on port"),
                    ("ADVERTISED_UNRESOLVABLE", 0, "fix", "CONTROLLER://")],
    ),
    case(
        "seeds-docker-name-without-listener-settings-adds-first-and-replaces-only-on-condition",
        *seeds_on_the_host(None),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, "kafka0:29092")],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "(your bootstrap, identified as node 0). It advertises "
               "kafka0:29092, a single-label name like a Docker or Compose service's, which serves the "
               "clients inside that container network. Keep it for them, and " + SEEDS_NEW_LISTENER),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "Or, only if no other network's clients use kafka0:29092 and the "
               "listener that advertises it is not the inter-broker listener, replace kafka0:29092 with "
               "localhost:29092 in advertised.listeners.")],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "Either make")],
    ),
    case(
        "cloud-private-name-names-its-listener-and-a-free-new-one-replaces-on-condition",
        [boot(AWS_BOOT, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PRIVATE, 9092)], node_id=0, protocol="SSL",
              listener_settings={
                  "listeners": "CLIENT://0.0.0.0:9092,REPLICATION://0.0.0.0:9093",
                  "advertised.listeners": f"CLIENT://{AWS_PRIVATE}:9092,REPLICATION://{AWS_PRIVATE}:9093",
                  "inter.broker.listener.name": "REPLICATION",
                  "listener.security.protocol.map": "CLIENT:SSL,REPLICATION:SSL,EXTERNAL:SSL"})],
        [endpoint(0, AWS_PRIVATE, 9092, AWS_BOOT, dns=failed(AWS_PRIVATE, "nxdomain"))],
        [("ADVERTISED_UNRESOLVABLE", "error", 0, AWS_ENDPOINT)],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", f"Its listener CLIENT advertises {AWS_ENDPOINT}, a cloud "
               "provider's private name, which serves the clients inside its VPC or virtual network. Keep it for "
               "them, and add a listener for this network: `EXTERNAL_2://0.0.0.0:<free port>` in listeners, "
               f"`EXTERNAL_2://{AWS_PUBLIC}:<free port>` in advertised.listeners and `EXTERNAL_2:SSL` in "
               "listener.security.protocol.map; publish its port"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", f"Or, only if no other network's clients use CLIENT "
               f"({AWS_ENDPOINT}), replace {AWS_ENDPOINT} with {AWS_BOOT} in advertised.listeners.")],
        # EXTERNAL is in the protocol map; the inter-broker listener is no bootstrap for clients.
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "`EXTERNAL:"),
                    ("ADVERTISED_UNRESOLVABLE", 0, "fix", "also advertises")],
    ),
    case(
        "kubernetes-name-through-a-load-balancer-takes-the-operators-way-never-a-replacement",
        [boot("192.0.2.50:9094", connected_to="192.0.2.50", advertises=[(0, STRIMZI_POD, 9092)], node_id=0,
              listener_settings={"advertised.listeners": f"REPLICATION-9091://{STRIMZI_POD}:9091,"
                                                         f"PLAIN-9092://{STRIMZI_POD}:9092",
                                 "inter.broker.listener.name": "REPLICATION-9091"})],
        [endpoint(0, STRIMZI_POD, 9092, "192.0.2.50:9094", dns=failed(STRIMZI_POD, "nxdomain"))],
        [("ADVERTISED_UNRESOLVABLE", "error", 0, f"{STRIMZI_POD}:9092")],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "For clients outside, add an external listener to the Kafka "
               "resource my-cluster")],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "replace"),
                    ("ADVERTISED_UNRESOLVABLE", 0, "fix", "listener.security.protocol.map")],
    ),
    case(
        "port-typo-on-the-brokers-own-address-replaces-first",
        [boot("broker0.example.test:9092", connected_to="192.0.2.10", advertises=[(0, "broker0.example.test", 9093)],
              node_id=0, listener_settings={"listeners": "PLAINTEXT://0.0.0.0:9092",
                                            "advertised.listeners": "PLAINTEXT://broker0.example.test:9093"})],
        [endpoint(0, "broker0.example.test", 9093, "broker0.example.test:9092", dns=["192.0.2.10"],
                  connect="refused")],
        [("ADVERTISED_REFUSED", "error", 0, "broker0.example.test:9093"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "warning", 0, "broker0.example.test:9093")],
        says=[("ADVERTISED_REFUSED", 0, "fix", "From here broker 0 answers at broker0.example.test:9092 (your "
               "bootstrap, identified as node 0), the address listener PLAINTEXT advertises with another port: in "
               "advertised.listeners, replace broker0.example.test:9093 with broker0.example.test:9092.")],
        never_says=[("ADVERTISED_REFUSED", 0, "fix", "add a listener"),
                    ("ADVERTISED_REFUSED", 0, "fix", "Start broker 0")],
    ),
    case(
        "dns-servfail-is-unresolvable-with-its-reason",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10",
              advertises=[(0, "broker0.kafka.internal.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.internal.example.com", 9092, "broker0.kafka.example.com:9092",
                  dns=failed("broker0.kafka.internal.example.com", "servfail",
                             "broker0.kafka.internal.example.com: SERVFAIL from 192.0.2.53"))],
        [("ADVERTISED_UNRESOLVABLE", "error", 0, "broker0.kafka.internal.example.com:9092")],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "message", "SERVFAIL from 192.0.2.53")],
    ),
    # -- ADVERTISED_LOOPBACK --------------------------------------------------------------------------
    case(
        "fred-advertises-localhost-to-a-client-in-the-docker-network",
        [boot(FRED_INSIDE, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "localhost", 9092)])],
        # From the client's container, localhost:9092 is its own port 9092: refused.
        [endpoint(0, "localhost", 9092, FRED_INSIDE, dns=["::1", "127.0.0.1"], connect="refused")],
        [("ADVERTISED_LOOPBACK", "error", 0, "localhost:9092"), ("ADVERTISED_REFUSED", "error", 0, "localhost:9092")],
        says=[("ADVERTISED_LOOPBACK", 0, "message", "You reached the cluster at kafka0:9092"),
              ("ADVERTISED_LOOPBACK", 0, "message", "a loopback address"),
              ("ADVERTISED_LOOPBACK", 0, "message", "connects to its own machine"),
              ("ADVERTISED_LOOPBACK", 0, "fix", "Make the listener on port 9092 advertise"),
              ("ADVERTISED_LOOPBACK", 0, "fix", "not localhost")],
        never_says=[("ADVERTISED_LOOPBACK", 0, "fix", "your bootstrap")],
    ),
    case(
        "localhost-advertised-to-a-remote-client-identified-proposes-its-bootstrap",
        [boot("broker.example.test:9092", connected_to="192.0.2.10", advertises=[(0, "localhost", 9092)], node_id=0)],
        [endpoint(0, "localhost", 9092, "broker.example.test:9092", dns=["127.0.0.1"], connect="refused")],
        [("ADVERTISED_LOOPBACK", "error", 0, "localhost:9092"), ("ADVERTISED_REFUSED", "error", 0, "localhost:9092")],
        says=[("ADVERTISED_LOOPBACK", 0, "message", "a loopback address"),
              # The bootstrap was identified as node 0, so the fix proposes a listener for what the client used, and
              # the replacement second: localhost may serve clients on the broker's own machine.
              ("ADVERTISED_LOOPBACK", 0, "fix", "It advertises localhost:9092, a loopback address, which serves only "
               "clients on the broker's own machine. Keep it for them, and add a listener for this network"),
              ("ADVERTISED_LOOPBACK", 0, "fix", "`EXTERNAL://broker.example.test:<free port>` in advertised.listeners"),
              ("ADVERTISED_LOOPBACK", 0, "fix", "Or, only if no other network's clients use localhost:9092 and the "
               "listener that advertises it is not the inter-broker listener, replace localhost:9092 with "
               "broker.example.test:9092 in advertised.listeners.")],
    ),
    case(
        "loopback-ip-literal-advertised-to-a-remote-client",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10", advertises=[(0, "127.0.0.1", 9092)])],
        [endpoint(0, "127.0.0.1", 9092, "broker0.kafka.example.com:9092", connect="refused")],
        [("ADVERTISED_LOOPBACK", "error", 0, "127.0.0.1:9092"), ("ADVERTISED_REFUSED", "error", 0, "127.0.0.1:9092")],
    ),
    case(
        "ipv6-loopback-advertised-and-something-local-answers",
        # Worse than refused: a local service on that port accepts, so only the loopback rule sees it.
        [boot("[2001:db8::10]:9092", connected_to="2001:db8::10", advertises=[(0, "::1", 9092)])],
        [endpoint(0, "::1", 9092, "[2001:db8::10]:9092")],
        [("ADVERTISED_LOOPBACK", "error", 0, "[::1]:9092")],
        says=[("ADVERTISED_LOOPBACK", 0, "message", "advertises [::1]:9092, a loopback address")],
    ),
    case(
        "name-mapped-to-loopback-in-this-machines-hosts-file",
        [boot("192.0.2.20:29092", connected_to="192.0.2.20", advertises=[(0, "kafka0", 29092)])],
        [endpoint(0, "kafka0", 29092, "192.0.2.20:29092", connect="refused",
                  dns=resolved("kafka0", "127.0.0.1", in_hosts_file=True,
                               detail=failed("kafka0", "nxdomain", source="dns")))],
        [("ADVERTISED_LOOPBACK", "error", 0, "kafka0:29092"), ("ADVERTISED_REFUSED", "error", 0, "kafka0:29092"),
         ("RESOLVED_ONLY_VIA_HOSTS_FILE", "warning", 0, "kafka0:29092")],
    ),
    case(
        "fred-from-the-docker-host-localhost-is-fine",
        [boot("localhost:9092", connected_to="127.0.0.1", advertises=[(0, "localhost", 9092)], node_id=0)],
        [endpoint(0, "localhost", 9092, "localhost:9092", dns=["127.0.0.1"])],
        [],
    ),
    case(
        "fred-from-the-docker-host-localhost-in-the-hosts-file-is-fine",
        # What the real probe records for localhost: the hosts file answers, DNS does not know it.
        [boot("localhost:9092", connected_to="127.0.0.1", advertises=[(0, "localhost", 9092)], node_id=0)],
        [endpoint(0, "localhost", 9092, "localhost:9092",
                  dns=resolved("localhost", "127.0.0.1", in_hosts_file=True,
                               detail=failed("localhost", "nxdomain", source="dns")))],
        [],
    ),
    case(
        "loopback-bootstrap-whose-advertised-localhost-is-down-is-refused-not-loopback",
        [boot("localhost:9092", connected_to="127.0.0.1", advertises=[(0, "localhost", 9092)])],
        [endpoint(0, "localhost", 9092, "localhost:9092", dns=["127.0.0.1"], connect="refused")],
        [("ADVERTISED_REFUSED", "error", 0, "localhost:9092")],
    ),
    case(
        "librdkafka-bootstrap-that-does-not-say-where-it-connected-claims-no-loopback",
        [boot("kafka-sasl:9094", connected_to=None, advertises=[(0, "localhost", 9094)])],
        [endpoint(0, "localhost", 9094, "kafka-sasl:9094", dns=["127.0.0.1"], connect="refused")],
        [("ADVERTISED_REFUSED", "error", 0, "localhost:9094")],
    ),
    # -- ADVERTISED_REFUSED / TIMEOUT / UNREACHABLE -------------------------------------------------------
    case(
        "three-brokers-one-stopped",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=THREE, node_id=0)],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092"), endpoint(1, "192.0.2.11", 9092, "192.0.2.10:9092"),
         endpoint(2, "192.0.2.12", 9092, "192.0.2.10:9092", connect="refused")],
        [("ADVERTISED_REFUSED", "error", 2, "192.0.2.12:9092")],
        says=[("ADVERTISED_REFUSED", 2, "message", "nothing accepts connections there"),
              ("ADVERTISED_REFUSED", 2, "message", "Requests for partitions led by broker 2 will fail"),
              ("ADVERTISED_REFUSED", 2, "fix", "Start broker 2")],
    ),
    case(
        "aws-private-ip-advertised-to-the-internet-times-out",
        [boot(AWS_BOOT, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PRIVATE_IP, 9092)])],
        [endpoint(0, AWS_PRIVATE_IP, 9092, AWS_BOOT, connect="timeout")],
        # The VPC-private range is the why (kprobe/findings/shapes.py), beside the timeout that is the symptom.
        [("ADVERTISED_TIMEOUT", "error", 0, f"{AWS_PRIVATE_IP}:9092"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 0, f"{AWS_PRIVATE_IP}:9092")],
        says=[("ADVERTISED_TIMEOUT", 0, "message", f"({AWS_PRIVATE_IP}), but connections to it time out"),
              ("ADVERTISED_TIMEOUT", 0, "fix", f"Open the port between this network and {AWS_PRIVATE_IP}")],
        never_says=[("ADVERTISED_TIMEOUT", 0, "fix", "your bootstrap")],
    ),
    case(
        "aws-private-ip-times-out-with-the-bootstrap-identified-adds-lines",
        [boot(AWS_BOOT, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PRIVATE_IP, 9092)], node_id=0)],
        [endpoint(0, AWS_PRIVATE_IP, 9092, AWS_BOOT, connect="timeout")],
        # The VPC-private range is the why (kprobe/findings/shapes.py), beside the timeout that is the symptom.
        [("ADVERTISED_TIMEOUT", "error", 0, f"{AWS_PRIVATE_IP}:9092"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 0, f"{AWS_PRIVATE_IP}:9092")],
        says=[("ADVERTISED_TIMEOUT", 0, "fix", "Open the port"),
              ("ADVERTISED_TIMEOUT", 0, "fix", "(your bootstrap, identified as node 0)")],
    ),
    case(
        "one-address-refused-one-blackholed-is-a-timeout",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10",
              advertises=[(0, "broker0.kafka.example.com", 9092), (1, "broker1.kafka.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.example.com", 9092, "broker0.kafka.example.com:9092", dns=["192.0.2.10"]),
         endpoint(1, "broker1.kafka.example.com", 9092, "broker0.kafka.example.com:9092",
                  dns=["192.0.2.11", "198.51.100.11"], connect={"192.0.2.11": "refused", "198.51.100.11": "timeout"})],
        [("ADVERTISED_TIMEOUT", "error", 1, "broker1.kafka.example.com:9092")],
        says=[("ADVERTISED_TIMEOUT", 1, "message", "(192.0.2.11, 198.51.100.11)")],
    ),
    case(
        "no-route-to-the-advertised-address",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10", advertises=[(0, "10.0.12.7", 9092)])],
        [endpoint(0, "10.0.12.7", 9092, "broker0.kafka.example.com:9092", connect="unreachable")],
        [("ADVERTISED_UNREACHABLE", "error", 0, "10.0.12.7:9092"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 0, "10.0.12.7:9092")],
        says=[("ADVERTISED_UNREACHABLE", 0, "message", "which this host has no route to"),
              ("ADVERTISED_UNREACHABLE", 0, "fix", "advertise an address routable from this network")],
    ),
    case(
        "connection-reset-names-the-error-not-no-route",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10", advertises=[(0, "10.0.12.7", 9092)])],
        [endpoint(0, "10.0.12.7", 9092, "broker0.kafka.example.com:9092", connect="error")],
        [("ADVERTISED_UNREACHABLE", "error", 0, "10.0.12.7:9092")],
        says=[("ADVERTISED_UNREACHABLE", 0, "message",
               "connecting to it fails from here (10.0.12.7: ECONNRESET: Connection reset by peer)"),
              ("ADVERTISED_UNREACHABLE", 0, "fix", "Find what answers on 10.0.12.7:9092")],
        never_says=[("ADVERTISED_UNREACHABLE", 0, "message", "no route")],
    ),
    # -- ADVERTISED_PARTIAL ------------------------------------------------------------------------------
    case(
        "stale-a-record-beside-a-working-a-record",
        # Both addresses IPv4: no address family explains the split, so it stays a gap.
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10",
              advertises=[(0, "broker0.kafka.example.com", 9092), (1, "broker1.kafka.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.example.com", 9092, "broker0.kafka.example.com:9092", dns=["192.0.2.10"]),
         endpoint(1, "broker1.kafka.example.com", 9092, "broker0.kafka.example.com:9092",
                  dns=["192.0.2.99", "192.0.2.11"], connect={"192.0.2.99": "refused", "192.0.2.11": "ok"})],
        [("ADVERTISED_PARTIAL", "warning", 1, "broker1.kafka.example.com:9092")],
        says=[("ADVERTISED_PARTIAL", 1, "message", "resolves to 2 addresses"),
              ("ADVERTISED_PARTIAL", 1, "message", "192.0.2.11 connect but 192.0.2.99 (refused) do not"),
              ("ADVERTISED_PARTIAL", 1, "fix", "Remove the records for 192.0.2.99")],
    ),
    # -- ADVERTISED_ONE_FAMILY_FAILS (measured with real clients: docs/dual-stack.md) ------------------------
    case(
        "dead-aaaa-record-beside-a-working-a-record",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10",
              advertises=[(0, "broker0.kafka.example.com", 9092), (1, "broker1.kafka.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.example.com", 9092, "broker0.kafka.example.com:9092", dns=["192.0.2.10"]),
         endpoint(1, "broker1.kafka.example.com", 9092, "broker0.kafka.example.com:9092",
                  dns=["2001:db8::11", "192.0.2.11"], connect={"2001:db8::11": "unreachable", "192.0.2.11": "ok"})],
        [("ADVERTISED_ONE_FAMILY_FAILS", "warning", 1, "broker1.kafka.example.com:9092")],
        says=[("ADVERTISED_ONE_FAMILY_FAILS", 1, "message", "IPv4 192.0.2.11, which connects, and IPv6 "
                                                            "2001:db8::11 (unreachable), which fails"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 1, "message", "Clients with default settings still work"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 1, "message", "draws an IPv6 one 1 in 2 times; after each such draw it "
                                                            "draws again, a second or so later"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 1, "message", "librdkafka with broker.address.family=v6"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 1, "message", "-Djava.net.preferIPv6Addresses=true or =system"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 1, "fix", "Remove the IPv6 addresses (2001:db8::11) of "
                                                        "broker1.kafka.example.com from DNS")],
        never_says=[("ADVERTISED_ONE_FAMILY_FAILS", 1, "message", "socket.connection.setup.timeout.ms")],
    ),
    case(
        "aaaa-record-dropping-packets-beside-a-working-a-record",
        [boot("broker0.kafka.example.com:9092", connected_to="192.0.2.10",
              advertises=[(0, "broker0.kafka.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.example.com", 9092, "broker0.kafka.example.com:9092",
                  dns=["192.0.2.10", "2001:db8::10"], connect={"2001:db8::10": "timeout", "192.0.2.10": "ok"})],
        [("ADVERTISED_ONE_FAMILY_FAILS", "warning", 0, "broker0.kafka.example.com:9092")],
        says=[("ADVERTISED_ONE_FAMILY_FAILS", 0, "message",
               "draws an IPv6 one 1 in 2 times; each such draw waits out socket.connection.setup.timeout.ms "
               "(librdkafka, default 30000)"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "resolves the name afresh each time"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "slow connections, not failures"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "socket.connection.setup.timeout.ms (Java client, "
                                                            "default 10000"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "fix", "broker.address.family=v4")],
    ),
    case(
        "localhost-resolves-to-ipv6-loopback-first-broker-on-ipv4-only",
        # The classic (kcat#102, confluent-kafka-python#229): /etc/hosts says `::1 localhost` first.
        [boot("localhost:9092", connected_to="127.0.0.1", advertises=[(0, "localhost", 9092)])],
        [endpoint(0, "localhost", 9092, "localhost:9092", dns=["::1", "127.0.0.1"],
                  connect={"::1": "refused", "127.0.0.1": "ok"})],
        [("ADVERTISED_ONE_FAMILY_FAILS", "warning", 0, "localhost:9092")],
        says=[("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "IPv6 ::1 (refused)"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "fix", "from /etc/hosts' ::1 line")],
    ),
    case(
        "dead-a-record-beside-a-working-aaaa-record",
        # The reverse: Java lists IPv4 first and Kafka's client keeps that family only, so it fails.
        [boot("[2001:db8::10]:9092", connected_to="2001:db8::10",
              advertises=[(0, "broker0.kafka.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.example.com", 9092, "[2001:db8::10]:9092",
                  dns=["2001:db8::10", "192.0.2.10"], connect={"2001:db8::10": "ok", "192.0.2.10": "refused"})],
        [("ADVERTISED_ONE_FAMILY_FAILS", "error", 0, "broker0.kafka.example.com:9092")],
        says=[("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "The Java client with default settings fails outright"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "message", "unless pinned with broker.address.family=v4"),
              ("ADVERTISED_ONE_FAMILY_FAILS", 0, "fix", "-Djava.net.preferIPv6Addresses=true")],
    ),
    # -- INVALID_ADVERTISED_HOST / PORT --------------------------------------------------------------------
    case(
        "escape-sequences-in-the-advertised-host",
        # kcat prints these raw (a terminal-injection hole); kprobe never resolves them.
        [boot(BOB, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "\x1b[31mkafka0\x1b[0m", 29092)])],
        [invalid_endpoint(0, "\x1b[31mkafka0\x1b[0m", 29092, BOB,
                          "the host contains characters no host name or address has")],
        [("INVALID_ADVERTISED_HOST", "error", 0, "\x1b[31mkafka0\x1b[0m:29092")],
        says=[("INVALID_ADVERTISED_HOST", 0, "message", "the host contains characters no host name or address has"),
              ("INVALID_ADVERTISED_HOST", 0, "fix", "a host name or IP address")],
    ),
    case(
        "empty-advertised-host",
        [boot(BOB, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "", 29092)])],
        [invalid_endpoint(0, "", 29092, BOB, "the host is empty")],
        [("INVALID_ADVERTISED_HOST", "error", 0, ":29092")],
        says=[("INVALID_ADVERTISED_HOST", 0, "message", "the host is empty")],
    ),
    case(
        "advertised-port-zero",
        [boot(BOB, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "kafka0", 0)])],
        [invalid_endpoint(0, "kafka0", 0, BOB, "port 0 is outside 1-65535")],
        [("INVALID_ADVERTISED_PORT", "error", 0, "kafka0:0")],
        says=[("INVALID_ADVERTISED_PORT", 0, "message", "port 0 is outside 1-65535"),
              ("INVALID_ADVERTISED_PORT", 0, "fix", "a port between 1 and 65535")],
    ),
    case(
        "bad-host-and-bad-port-are-both-named",
        [boot(BOB, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "kafka 0", 70000)])],
        [invalid_endpoint(0, "kafka 0", 70000, BOB, "the host contains characters no host name or address has")],
        [("INVALID_ADVERTISED_HOST", "error", 0, "kafka 0:70000"), ("INVALID_ADVERTISED_PORT", "error", 0, "kafka 0:70000")],
        says=[("INVALID_ADVERTISED_PORT", 0, "message", "port 70000 is outside 1-65535")],
    ),
    # -- RESOLVED_ONLY_VIA_HOSTS_FILE ----------------------------------------------------------------------
    case(
        "kafka0-in-this-machines-hosts-file-only",
        [boot("192.0.2.20:29092", connected_to="192.0.2.20", advertises=[(0, "kafka0", 29092)])],
        [endpoint(0, "kafka0", 29092, "192.0.2.20:29092",
                  dns=resolved("kafka0", "192.0.2.20", in_hosts_file=True,
                               detail=failed("kafka0", "nxdomain", source="dns")))],
        [("RESOLVED_ONLY_VIA_HOSTS_FILE", "warning", 0, "kafka0:29092")],
        says=[("RESOLVED_ONLY_VIA_HOSTS_FILE", 0, "message", "resolves here only through the hosts file; DNS says "
               "nxdomain"),
              ("RESOLVED_ONLY_VIA_HOSTS_FILE", 0, "fix", "Publish kafka0 in DNS")],
    ),
    case(
        # Three brokers in this machine's hosts file are one set-up to change, said once.
        "three-brokers-in-the-hosts-file-only-are-one-finding",
        [boot("192.0.2.20:29092", connected_to="192.0.2.20",
              advertises=[(0, "kafka0", 29092), (1, "kafka1", 29092), (2, "kafka2", 29092)])],
        [endpoint(n, f"kafka{n}", 29092, "192.0.2.20:29092",
                  dns=resolved(f"kafka{n}", f"192.0.2.{20 + n}", in_hosts_file=True,
                               detail=failed(f"kafka{n}", "nxdomain", source="dns"))) for n in range(3)],
        [("RESOLVED_ONLY_VIA_HOSTS_FILE", "warning", None, None)],
        says=[("RESOLVED_ONLY_VIA_HOSTS_FILE", None, "message",
               "kafka0 (broker 0), kafka1 (broker 1), kafka2 (broker 2) resolve here only through the hosts file"),
              ("RESOLVED_ONLY_VIA_HOSTS_FILE", None, "fix", "Publish kafka0, kafka1, kafka2 in DNS")],
    ),
    case(
        "name-in-the-hosts-file-that-dns-also-knows",
        [boot("192.0.2.20:29092", connected_to="192.0.2.20", advertises=[(0, "kafka0.example.com", 29092)])],
        [endpoint(0, "kafka0.example.com", 29092, "192.0.2.20:29092",
                  dns=resolved("kafka0.example.com", "192.0.2.20", in_hosts_file=True,
                               detail=resolved("kafka0.example.com", "192.0.2.20", source="dns")))],
        [],
    ),
    # -- PORT_DIFFERS_FROM_BOOTSTRAP -----------------------------------------------------------------------
    case(
        "fred-advertising-bobs-port-reachable-is-info",
        [boot(FRED_INSIDE, connected_to=KAFKA0_DOCKER_IP, advertises=[(0, "kafka0", 29092)])],
        [endpoint(0, "kafka0", 29092, FRED_INSIDE, dns=[KAFKA0_DOCKER_IP])],
        [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 0, "kafka0:29092")],
        says=[("PORT_DIFFERS_FROM_BOOTSTRAP", 0, "message", "You bootstrapped through kafka0:9092"),
              ("PORT_DIFFERS_FROM_BOOTSTRAP", 0, "message", "with port 29092"),
              ("PORT_DIFFERS_FROM_BOOTSTRAP", 0, "message", "normal for a second listener")],
    ),
    case(
        "docker-published-port-not-advertised-is-a-warning",
        # Docker publishes 19092 -> 9092, and the listener still advertises 9092.
        [boot("192.0.2.10:19092", connected_to="192.0.2.10", advertises=[(0, "192.0.2.10", 9092)], node_id=0)],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:19092", connect="refused")],
        [("PORT_DIFFERS_FROM_BOOTSTRAP", "warning", 0, "192.0.2.10:9092"),
         ("ADVERTISED_REFUSED", "error", 0, "192.0.2.10:9092")],
        says=[("PORT_DIFFERS_FROM_BOOTSTRAP", 0, "fix", "(192.0.2.10:19092)"),
              ("PORT_DIFFERS_FROM_BOOTSTRAP", 0, "message", "NAT or port mapping")],
    ),
    case(
        "same-address-same-port-is-no-port-hint",
        [boot("192.0.2.10:9092", connected_to="192.0.2.10", advertises=[(0, "192.0.2.10", 9092)])],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:9092")],
        [],
    ),
    case(
        "port-hint-on-an-endpoint-the-deadline-cut-concludes-nothing",
        [boot("192.0.2.10:19092", connected_to="192.0.2.10", advertises=[(0, "192.0.2.10", 9092)])],
        [endpoint(0, "192.0.2.10", 9092, "192.0.2.10:19092", connect="timeout", unfinished=["192.0.2.10"])],
        [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 0, "192.0.2.10:9092"), ("RUN_INCOMPLETE", "warning", None, None)],
    ),
    # -- another bootstrap of the same cluster works from here: using it is the first fix ----
    case(
        "aws-internal-and-external-probed-together-bootstrap-with-external-first",
        *two_listeners(),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, f"{AWS_PRIVATE}:19092")],
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", f"Bootstrap with {AWS_EXTERNAL}, which works from here: the same "
               f"cluster (MkU3OEVBNTcwNTJENDM2Qk) answers there, and every endpoint it advertises ({AWS_EXTERNAL}) "
               "resolves and connects from here, so clients on this network need no change on the brokers. Only if "
               f"they must use {AWS_INTERNAL}, change that listener too. From here broker 0 answers at {AWS_INTERNAL}"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", f"`EXTERNAL://{AWS_PUBLIC}:<free port>` in advertised.listeners")],
    ),
    case(
        "a-working-bootstrap-of-another-cluster-is-no-fix",
        *two_listeners(external_cluster=OTHER_CLUSTER),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, f"{AWS_PRIVATE}:19092"), ("CLUSTER_ID_MISMATCH", "error", None, None)],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "Bootstrap with")],
    ),
    case(
        "a-bootstrap-whose-own-endpoint-fails-is-no-fix",
        *two_listeners(external_connect="timeout"),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, f"{AWS_PRIVATE}:19092"),
         ("ADVERTISED_TIMEOUT", "error", 0, AWS_EXTERNAL)],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "Bootstrap with"),
                    ("ADVERTISED_TIMEOUT", 0, "fix", "Bootstrap with")],
    ),
    case(
        "a-bootstrap-reached-only-through-a-mapping-is-no-fix",
        *two_listeners(external_remap=Remap(host=AWS_PUBLIC_IP, port=9092, option="--resolve")),
        [("ADVERTISED_UNRESOLVABLE", "error", 0, f"{AWS_PRIVATE}:19092"), ("REMAPPED_ENDPOINTS", "info", None, None)],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "Bootstrap with")],
    ),
    case(
        "a-timeout-behind-one-listener-while-the-other-works",
        [boot(AWS_INTERNAL, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PRIVATE_IP, 19092)]),
         boot(AWS_EXTERNAL, connected_to=AWS_PUBLIC_IP, advertises=[(0, AWS_PUBLIC, 9092)])],
        [endpoint(0, AWS_PRIVATE_IP, 19092, AWS_INTERNAL, connect="timeout"),
         endpoint(0, AWS_PUBLIC, 9092, AWS_EXTERNAL, dns=[AWS_PUBLIC_IP])],
        [("ADVERTISED_TIMEOUT", "error", 0, f"{AWS_PRIVATE_IP}:19092"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 0, f"{AWS_PRIVATE_IP}:19092")],
        says=[("ADVERTISED_TIMEOUT", 0, "fix", f"Bootstrap with {AWS_EXTERNAL}, which works from here"),
              ("ADVERTISED_TIMEOUT", 0, "fix", "change that listener too. Open the port between this network")],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_advertised_rules(row: Case):
    check(row)


def test_loopback_comes_first_among_the_errors_of_one_node():
    """Errors sort by node, then code: the loopback finding, the cause, is read before its refused symptom."""
    found = check(CASES[[c.name for c in CASES].index("localhost-advertised-to-a-remote-client-identified-proposes"
                                                        "-its-bootstrap")])
    assert [f.code for f in found] == ["ADVERTISED_LOOPBACK", "ADVERTISED_REFUSED"]


def test_the_seeds_fix_leads_with_the_new_listener():
    """What keeps every network working comes first: the replacement, where offered, only after the new listener."""
    for name in ("seeds-docker-name-without-listener-settings-adds-first-and-replaces-only-on-condition",
                 "cloud-private-name-names-its-listener-and-a-free-new-one-replaces-on-condition"):
        [found] = check(CASES[[c.name for c in CASES].index(name)])
        assert -1 < found.fix.index("add a listener for this network") < found.fix.index("replace "), name


def test_an_endpoint_finding_names_the_bootstrap_that_advertised_it():
    """`bootstrap` tells a user with several -b addresses which listener to change."""
    found = check(CASES[[c.name for c in CASES].index("three-brokers-one-stopped")])
    assert [f.bootstrap for f in found] == ["192.0.2.10:9092"]
