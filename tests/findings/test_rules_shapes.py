"""Kubernetes shapes (kprobe/findings/shapes.py), proven on plain data: port-forwards, node ports, private ranges.

The names are the operators' own, as their documentation prints them:
- Strimzi: `my-cluster-kafka-0.my-cluster-kafka-brokers.myproject.svc` (strimzi-kafka-operator's
  documentation of `useServiceDnsDomain`, and its advertised.listeners examples: `PLAIN-9092://my-cluster-kafka-0.
  my-cluster-kafka-brokers.myproject.svc:9092`); here in namespace `kafka`, as Strimzi's quickstart installs it.
- Bitnami's chart (bitnami/charts, bitnami/kafka, NOTES.txt of the KRaft chart): `my-release-kafka-controller-0.
  my-release-kafka-controller-headless.default.svc.cluster.local:9092` for `helm install my-release`.
- A NodePort listener advertising the nodes' InternalIP (strimzi#2109, #3458; Strimzi's
  `preferredNodePortAddressType`), node ports in Kubernetes' default range 30000-32767.
Private, CGNAT and link-local addresses appear here only as data: no test ever dials one.
"""

from __future__ import annotations

import pytest
from observations import Case, boot, case, check, endpoint, failed, params, resolved

from kprobe.models import Remap

FORWARD = "127.0.0.1:9092"  # `kubectl port-forward svc/my-cluster-kafka-bootstrap 9092:9092`


def strimzi(n: int, ns: str = "kafka") -> str:
    return f"my-cluster-kafka-{n}.my-cluster-kafka-brokers.{ns}.svc"


def bitnami(n: int) -> str:
    return f"my-release-kafka-controller-{n}.my-release-kafka-controller-headless.kafka.svc.cluster.local"


def unresolvable(n: int, host: str, port: int, via: str) -> object:
    return endpoint(n, host, port, via, dns=failed(host, "nxdomain"))


STRIMZI_THREE = [(n, strimzi(n), 9092) for n in range(3)]
BITNAMI_THREE = [(n, bitnami(n), 9092) for n in range(3)]
UNRESOLVED = [("ADVERTISED_UNRESOLVABLE", "error", n, f"{strimzi(n)}:9092") for n in range(3)]

# A NodePort listener: the bootstrap node port and one node port per broker, on nodes seen from the internet.
NODE_A, NODE_A_IP = "node-a.k8s.example.com", "198.51.100.7"
NODE_BOOT = f"{NODE_A}:32100"
INTERNAL_IP = "10.0.1.12"  # the node's InternalIP, as `kubectl get nodes -o wide` lists it
PUBLIC_BOOT = "kafka.example.com:32100"

CASES: list[Case] = [
    # -- PORT_FORWARD_INCOMPLETE ----------------------------------------------------------------------
    case(
        "strimzi-port-forward-to-the-bootstrap-service",
        [boot(FORWARD, connected_to="127.0.0.1", advertises=STRIMZI_THREE)],
        [unresolvable(n, h, p, FORWARD) for n, h, p in STRIMZI_THREE],
        [("PORT_FORWARD_INCOMPLETE", "error", None, None), *UNRESOLVED],
        says=[("PORT_FORWARD_INCOMPLETE", None, "message", "a forward on this machine's loopback (127.0.0.1)"),
              ("PORT_FORWARD_INCOMPLETE", None, "message", "pod my-cluster-kafka-0 of Kafka cluster my-cluster"),
              ("PORT_FORWARD_INCOMPLETE", None, "message", "one forward cannot work"),
              ("PORT_FORWARD_INCOMPLETE", None, "message", "They all use port 9092"),
              # Three forwards on 9092 need three loopback addresses, and the hosts entries name them.
              ("PORT_FORWARD_INCOMPLETE", None, "fix",
               "`kubectl port-forward -n kafka --address 127.0.0.2 pod/my-cluster-kafka-0 9092:9092`"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix",
               "`kubectl port-forward -n kafka --address 127.0.0.4 pod/my-cluster-kafka-2 9092:9092`"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix", f"`127.0.0.3 {strimzi(1)}`"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix",
               f"`kprobe probe -b {FORWARD} --connect-to {strimzi(0)}:9092=127.0.0.1:19092 "
               f"--connect-to {strimzi(1)}:9092=127.0.0.1:19093"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix", "spec.kafka.listeners[] with `type: nodeport`"),
              ("ADVERTISED_UNRESOLVABLE", 1, "fix", "Strimzi's name for pod my-cluster-kafka-1"),
              ("ADVERTISED_UNRESOLVABLE", 1, "fix", "`configuration.brokers[].advertisedHost`"),
              # Strimzi before the generic listeners (0.20) named the same override differently.
              ("ADVERTISED_UNRESOLVABLE", 1, "fix", "`overrides.brokers[].advertisedHost` in Strimzi's older")],
        never_says=[("PORT_FORWARD_INCOMPLETE", None, "fix", "advertised.listeners"),
                    ("ADVERTISED_UNRESOLVABLE", 0, "fix", "Make the listener on port 9092 advertise")],
    ),
    case(
        "port-forward-to-pod-0-identified-proposes-no-listener-lines",
        # The forward leads to node 0 and DescribeConfigs says so: advertising 127.0.0.1:9092 would be wrong.
        [boot(FORWARD, connected_to="127.0.0.1", advertises=STRIMZI_THREE, node_id=0)],
        [unresolvable(n, h, p, FORWARD) for n, h, p in STRIMZI_THREE],
        [("PORT_FORWARD_INCOMPLETE", "error", None, None), *UNRESOLVED],
        never_says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "EXTERNAL://"),
                    ("ADVERTISED_UNRESOLVABLE", 0, "fix", "your bootstrap")],
    ),
    case(
        "bitnami-port-forward-names-the-charts-settings",
        [boot(FORWARD, connected_to="127.0.0.1", advertises=BITNAMI_THREE)],
        [unresolvable(n, h, p, FORWARD) for n, h, p in BITNAMI_THREE],
        [("PORT_FORWARD_INCOMPLETE", "error", None, None),
         *[("ADVERTISED_UNRESOLVABLE", "error", n, f"{bitnami(n)}:9092") for n in range(3)]],
        says=[("PORT_FORWARD_INCOMPLETE", None, "message", "pod my-release-kafka-controller-0 of release "
                                                           "my-release-kafka (controller pods)"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix", "--address 127.0.0.3 pod/my-release-kafka-controller-1"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix", "`externalAccess.enabled=true`"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix", "`externalAccess.controller.service.type=LoadBalancer`"),
              ("PORT_FORWARD_INCOMPLETE", None, "fix", "`externalAccess.autoDiscovery.enabled=true`"),
              ("ADVERTISED_UNRESOLVABLE", 2, "fix", "`externalAccess.controller.service.type=LoadBalancer`")],
        never_says=[("PORT_FORWARD_INCOMPLETE", None, "fix", "spec.kafka.listeners")],
    ),
    case(
        "port-forward-with-one-hosts-entry-lists-only-the-brokers-still-missing",
        # Broker 0's name already maps to the forward (a hosts entry); 1 and 2 do not resolve.
        [boot(FORWARD, connected_to="127.0.0.1", advertises=STRIMZI_THREE)],
        [endpoint(0, strimzi(0), 9092, FORWARD, dns=["127.0.0.1"]),
         *[unresolvable(n, strimzi(n), 9092, FORWARD) for n in (1, 2)]],
        [("PORT_FORWARD_INCOMPLETE", "error", None, None), *UNRESOLVED[1:]],
        says=[("PORT_FORWARD_INCOMPLETE", None, "fix", "--address 127.0.0.2 pod/my-cluster-kafka-1 9092:9092"),
              ("PORT_FORWARD_INCOMPLETE", None, "message", f"{strimzi(1)}:9092, {strimzi(2)}:9092.")],
        never_says=[("PORT_FORWARD_INCOMPLETE", None, "fix", "pod/my-cluster-kafka-0 ")],
    ),
    case(
        "port-forward-tried-with-connect-to-passes-and-says-it-is-a-mapping",
        [boot(FORWARD, connected_to="127.0.0.1", advertises=STRIMZI_THREE)],
        [endpoint(n, strimzi(n), 9092, FORWARD, dns=resolved("127.0.0.1", "127.0.0.1", source="literal"),
                  remap=Remap(host="127.0.0.1", port=19092 + n, option="--connect-to")) for n in range(3)],
        [("REMAPPED_ENDPOINTS", "info", None, None)],
    ),
    case(
        "cluster-internal-names-through-a-load-balancer-are-not-a-port-forward",
        # Bootstrapped at a public load balancer whose listener advertises the internal names (the plain listener's).
        [boot("kafka.example.com:9092", connected_to="203.0.113.20", advertises=STRIMZI_THREE)],
        [unresolvable(n, h, p, "kafka.example.com:9092") for n, h, p in STRIMZI_THREE],
        UNRESOLVED,
        says=[("ADVERTISED_UNRESOLVABLE", 0, "fix", "Kafka cluster my-cluster, namespace kafka"),
              ("ADVERTISED_UNRESOLVABLE", 0, "fix", "`kubectl port-forward -n kafka pod/my-cluster-kafka-0 19092:9092`")],
    ),
    case(
        "port-forward-to-a-broker-advertising-public-names-is-fine",
        [boot(FORWARD, connected_to="127.0.0.1", advertises=[(0, "broker0.kafka.example.com", 9092)])],
        [endpoint(0, "broker0.kafka.example.com", 9092, FORWARD, dns=failed("broker0.kafka.example.com", "nxdomain"))],
        [("ADVERTISED_UNRESOLVABLE", "error", 0, "broker0.kafka.example.com:9092")],
    ),
    # -- ADVERTISED_SHARED_ADDRESS --------------------------------------------------------------------
    case(
        "three-node-ports-on-one-node-reachable",
        [boot(NODE_BOOT, connected_to=NODE_A_IP, advertises=[(n, NODE_A, 31090 + n) for n in range(3)])],
        [endpoint(n, NODE_A, 31090 + n, NODE_BOOT, dns=[NODE_A_IP]) for n in range(3)],
        # The same port hint for the three: one finding naming them.
        [("ADVERTISED_SHARED_ADDRESS", "info", None, NODE_A), ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", None, None)],
        concerns=[("PORT_DIFFERS_FROM_BOOTSTRAP", (0, 1, 2), tuple(f"{NODE_A}:{31090 + n}" for n in range(3))),
                  ("ADVERTISED_SHARED_ADDRESS", (0, 1, 2), tuple(f"{NODE_A}:{31090 + n}" for n in range(3)))],
        says=[("PORT_DIFFERS_FROM_BOOTSTRAP", None, "message", f"advertise the same address with other ports: "
               f"{NODE_A}:31090 (broker 0), {NODE_A}:31091 (broker 1), {NODE_A}:31092 (broker 2)."),
              ("ADVERTISED_SHARED_ADDRESS", None, "message", "All 3 brokers advertise one host, node-a.k8s.example.com"),
              ("ADVERTISED_SHARED_ADDRESS", None, "message", "(31090, 31091, 31092)"),
              ("ADVERTISED_SHARED_ADDRESS", None, "message", "It works from here"),
              ("ADVERTISED_SHARED_ADDRESS", None, "fix", "Nothing to fix for clients here")],
    ),
    case(
        "node-ports-on-a-node-name-only-the-cluster-resolves",
        [boot(NODE_BOOT, connected_to=NODE_A_IP, advertises=[
            (0, NODE_A, 31190), (1, "node-b.k8s.internal", 31191), (2, "node-b.k8s.internal", 31192)])],
        [endpoint(0, NODE_A, 31190, NODE_BOOT, dns=[NODE_A_IP]),
         *[unresolvable(n, "node-b.k8s.internal", 31190 + n, NODE_BOOT) for n in (1, 2)]],
        [("ADVERTISED_SHARED_ADDRESS", "warning", None, "node-b.k8s.internal"),
         ("PORT_DIFFERS_FROM_BOOTSTRAP", "info", 0, f"{NODE_A}:31190"),
         ("ADVERTISED_UNRESOLVABLE", "error", None, None)],
        concerns=[("ADVERTISED_UNRESOLVABLE", (1, 2), ("node-b.k8s.internal:31191", "node-b.k8s.internal:31192"))],
        says=[("ADVERTISED_UNRESOLVABLE", None, "message", "advertise names under k8s.internal that do not resolve"),
              ("ADVERTISED_SHARED_ADDRESS", None, "message", "Brokers 1, 2 advertise one host, node-b.k8s.internal"),
              ("ADVERTISED_SHARED_ADDRESS", None, "message", "fails for broker(s) 1, 2"),
              ("ADVERTISED_SHARED_ADDRESS", None, "fix", "`configuration.preferredNodePortAddressType: ExternalIP`"),
              ("ADVERTISED_SHARED_ADDRESS", None, "fix", "`configuration.brokers[].advertisedHost` "
                                                         "(`overrides.brokers[].advertisedHost` in Strimzi's older"),
              ("ADVERTISED_SHARED_ADDRESS", None, "fix", "`externalAccess.broker.service.domain`")],
    ),
    case(
        "node-ports-named-with-the-operator-give-only-its-settings",
        # The plain listener's Strimzi names show the operator; the node-port addresses alone would not.
        [boot(PUBLIC_BOOT, connected_to="203.0.113.20", advertises=[(n, "node-b.k8s.internal", 31191 + n)
                                                                     for n in range(2)]),
         boot("my-cluster-kafka-bootstrap.kafka.svc:9092", connected_to="10.96.14.2", advertises=STRIMZI_THREE[:2])],
        [*[unresolvable(n, "node-b.k8s.internal", 31191 + n, PUBLIC_BOOT) for n in range(2)],
         *[endpoint(n, strimzi(n), 9092, "my-cluster-kafka-bootstrap.kafka.svc:9092", dns=[f"10.244.0.{10 + n}"])
           for n in range(2)]],
        [("ADVERTISED_SHARED_ADDRESS", "warning", None, "node-b.k8s.internal"),
         ("ADVERTISED_UNRESOLVABLE", "error", None, None)],
        concerns=[("ADVERTISED_UNRESOLVABLE", (0, 1), ("node-b.k8s.internal:31191", "node-b.k8s.internal:31192"))],
        says=[("ADVERTISED_SHARED_ADDRESS", None, "fix", "Strimzi: `configuration.preferredNodePortAddressType")],
        never_says=[("ADVERTISED_SHARED_ADDRESS", None, "fix", "Bitnami")],
    ),
    case(
        "every-broker-on-one-host-and-port-is-a-duplicate-not-node-ports",
        [boot(PUBLIC_BOOT, connected_to="203.0.113.20", advertises=[(n, "kafka.example.com", 32100) for n in range(3)])],
        [endpoint(n, "kafka.example.com", 32100, PUBLIC_BOOT, dns=["203.0.113.20"]) for n in range(3)],
        # Identity not checked: which broker answers is unknown, so the error names all three.
        [("DUPLICATE_ENDPOINT", "error", None, "kafka.example.com:32100")],
        concerns=[("DUPLICATE_ENDPOINT", (0, 1, 2), ("kafka.example.com:32100",))],
    ),
    case(
        "compose-published-ports-on-localhost-are-not-a-shape",
        [boot("localhost:9092", connected_to="127.0.0.1", advertises=[(n, "localhost", 9092 + n) for n in range(3)])],
        [endpoint(n, "localhost", 9092 + n, "localhost:9092", dns=["127.0.0.1"]) for n in range(3)],
        [("PORT_DIFFERS_FROM_BOOTSTRAP", "info", None, None)],
        concerns=[("PORT_DIFFERS_FROM_BOOTSTRAP", (1, 2), ("localhost:9093", "localhost:9094"))],
    ),
    # -- ADVERTISED_PRIVATE_ADDRESS -------------------------------------------------------------------
    case(
        "node-port-advertises-the-nodes-internal-ip",
        [boot(PUBLIC_BOOT, connected_to="203.0.113.20", advertises=[(0, INTERNAL_IP, 31090)])],
        [endpoint(0, INTERNAL_IP, 31090, PUBLIC_BOOT, connect="timeout")],
        [("ADVERTISED_TIMEOUT", "error", 0, f"{INTERNAL_IP}:31090"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 0, f"{INTERNAL_IP}:31090")],
        says=[("ADVERTISED_PRIVATE_ADDRESS", 0, "message", "Broker 0 advertises 10.0.1.12 on port 31090, in a private "
                                                           "range (RFC 1918"),
              ("ADVERTISED_PRIVATE_ADDRESS", 0, "message", "NodePort listener advertising the nodes' internal"),
              ("ADVERTISED_PRIVATE_ADDRESS", 0, "fix", "`configuration.preferredNodePortAddressType: ExternalIP`"),
              ("ADVERTISED_PRIVATE_ADDRESS", 0, "fix", "`externalAccess.broker.service.externalIPs`")],
    ),
    case(
        "a-cgnat-address-with-no-route",
        [boot(PUBLIC_BOOT, connected_to="203.0.113.20", advertises=[(1, "100.64.12.7", 9094)])],
        [endpoint(1, "100.64.12.7", 9094, PUBLIC_BOOT, connect="unreachable")],
        [("ADVERTISED_UNREACHABLE", "error", 1, "100.64.12.7:9094"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 1, "100.64.12.7:9094")],
        says=[("ADVERTISED_PRIVATE_ADDRESS", 1, "message", "the shared range 100.64.0.0/10 (RFC 6598)")],
    ),
    case(
        "a-name-resolving-to-a-link-local-address-from-a-port-forward",
        [boot(FORWARD, connected_to="127.0.0.1", advertises=[(2, "kafka-2.lan", 9092)])],
        [endpoint(2, "kafka-2.lan", 9092, FORWARD, dns=["169.254.20.5"], connect="timeout")],
        [("ADVERTISED_TIMEOUT", "error", 2, "kafka-2.lan:9092"),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", 2, "kafka-2.lan:9092")],
        says=[("ADVERTISED_PRIVATE_ADDRESS", 2, "message", "advertises kafka-2.lan (169.254.20.5) on port 9092, in a "
                                                           "link-local range")],
    ),
    case(
        "a-refused-private-address-was-reached",
        [boot(PUBLIC_BOOT, connected_to="203.0.113.20", advertises=[(0, INTERNAL_IP, 31090)])],
        [endpoint(0, INTERNAL_IP, 31090, PUBLIC_BOOT, connect="refused")],
        [("ADVERTISED_REFUSED", "error", 0, f"{INTERNAL_IP}:31090")],
    ),
    case(
        "a-private-address-failing-from-inside-a-private-network-is-a-firewall",
        [boot("10.0.1.10:9092", connected_to="10.0.1.10", advertises=[(0, "10.0.1.10", 9092), (1, "10.0.2.11", 9092)])],
        [endpoint(0, "10.0.1.10", 9092, "10.0.1.10:9092"), endpoint(1, "10.0.2.11", 9092, "10.0.1.10:9092",
                                                                    connect="timeout")],
        [("ADVERTISED_TIMEOUT", "error", 1, "10.0.2.11:9092")],
    ),
    case(
        "every-broker-on-one-internal-node-ip",
        [boot(PUBLIC_BOOT, connected_to="203.0.113.20", advertises=[(n, INTERNAL_IP, 31090 + n) for n in range(3)])],
        [endpoint(n, INTERNAL_IP, 31090 + n, PUBLIC_BOOT, connect="timeout") for n in range(3)],
        # One setting for the whole cluster, said once, listing every broker: the timeouts too.
        [("ADVERTISED_TIMEOUT", "error", None, None),
         ("ADVERTISED_PRIVATE_ADDRESS", "warning", None, None),
         ("ADVERTISED_SHARED_ADDRESS", "warning", None, INTERNAL_IP)],
        says=[("ADVERTISED_SHARED_ADDRESS", None, "message", "All 3 brokers advertise one host, 10.0.1.12"),
              ("ADVERTISED_PRIVATE_ADDRESS", None, "message", "Brokers 0, 1, 2 advertise 10.0.1.12 on port 31090; "
               "10.0.1.12 on port 31091; 10.0.1.12 on port 31092, in a private range"),
              ("ADVERTISED_PRIVATE_ADDRESS", None, "message", "connections to them fail from here"),
              ("ADVERTISED_TIMEOUT", None, "message", "The brokers advertise 10.0.1.12:31090 (broker 0), "
               "10.0.1.12:31091 (broker 1), 10.0.1.12:31092 (broker 2), but connections to them (10.0.1.12) time out"),
              ("ADVERTISED_TIMEOUT", None, "fix", "Open the advertised ports between this network and 10.0.1.12, or "
               "make the listener on port 32100 advertise addresses")],
        concerns=[("ADVERTISED_TIMEOUT", (0, 1, 2), tuple(f"{INTERNAL_IP}:{31090 + n}" for n in range(3))),
                  ("ADVERTISED_PRIVATE_ADDRESS", (0, 1, 2), tuple(f"{INTERNAL_IP}:{31090 + n}" for n in range(3)))],
    ),
]


@pytest.mark.parametrize("row", params(CASES))
def test_shape_rules(row: Case):
    check(row)


def test_the_port_forward_explanation_comes_before_the_symptoms():
    """Errors without a node sort first: the user reads why one forward cannot work before each name's failure."""
    found = check(CASES[0])
    assert [f.code for f in found][:2] == ["PORT_FORWARD_INCOMPLETE", "ADVERTISED_UNRESOLVABLE"]
    assert found[0].bootstrap == FORWARD
