"""The lab's scenarios: classic listener set-ups, as data.

A scenario names its nodes (each on its own 127.0.0.x address, with the host names its
JVM resolves through a private hosts file), each node's listeners (where it binds, what it
advertises, how a client bootstraps to it) and DNS views (which names resolve where, standing
for different networks). Adding a scenario is adding an entry to `SCENARIOS`.

Templates in `bind`, `advertise` and `bootstrap` are `str.format` strings with:
`{addr}` the node's address, `{port}` this listener's port, `{bh[NAME]}` a blackhole
endpoint `host:port` kept by the lab, `{imp[NAME]}` an endpoint where a non-Kafka (HTTP)
server answers, `{ep[NODE][LISTENER]}` another listener's real endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kprobe.errors import UsageError
from kprobe.lab.certs import CertSpec


@dataclass(frozen=True)
class ListenerSpec:
    """One listener of one node.

    `bootstrap` is the `host:port` a client would type to reach this listener (kept apart
    from `advertise`, because the gap between the two is the whole subject).
    """

    name: str
    bind: str = "{addr}"
    advertise: str = "{addr}:{port}"
    bootstrap: str = "{addr}:{port}"
    protocol: str = "PLAINTEXT"
    inter_broker: bool = False
    note: str = ""
    certificate: str | None = None
    mechanism: str | None = None


@dataclass(frozen=True)
class NodeSpec:
    """A combined broker+controller JVM on its own loopback address."""

    node_id: int
    address: str
    hostnames: tuple[str, ...] = ()
    listeners: tuple[ListenerSpec, ...] = ()
    rack: str | None = None


@dataclass(frozen=True)
class Scenario:
    """A named cluster set-up with the networks (DNS views) it is seen from."""

    name: str
    summary: str
    nodes: tuple[NodeSpec, ...]
    views: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    blackholes: dict[str, str] = field(default_factory=dict)
    story: str = ""
    impostors: dict[str, str] = field(default_factory=dict)
    certificates: dict[str, CertSpec] = field(default_factory=dict)
    users: tuple[str, ...] = ()
    # Broker settings beyond the listeners (an authorizer, say), the same on every node.
    broker_config: dict[str, str] = field(default_factory=dict)

    def node(self, node_id: int) -> NodeSpec:
        """The node with this id; a typo in a test should say which ids exist."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"scenario {self.name} has no node {node_id} (has {[n.node_id for n in self.nodes]})")

    @property
    def client_listeners(self) -> tuple[str, ...]:
        """Listener names in node order; a listener may exist on some nodes only (PARTIAL)."""
        return tuple(dict.fromkeys(spec.name for node in self.nodes for spec in node.listeners))


_LISTENERS = Scenario(
    name="listeners",
    summary="the seeds' broker: LISTENER_BOB (Docker network), FRED (Docker host), ALICE (nobody)",
    story=(
        "One broker in a 'Docker network'. LISTENER_BOB advertises kafka0, which resolves only "
        "inside that network; LISTENER_FRED advertises localhost, right for a client on the "
        "Docker host through a published port; LISTENER_ALICE advertises "
        "never-gonna-give-you-up, which resolves nowhere."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.11",
            hostnames=("kafka0",),
            listeners=(
                ListenerSpec(
                    "LISTENER_BOB", bind="kafka0", advertise="kafka0:{port}", bootstrap="kafka0:{port}",
                    inter_broker=True,
                    note="for clients inside the Docker network",
                ),
                ListenerSpec(
                    "LISTENER_FRED", bind="127.0.0.1", advertise="localhost:{port}",
                    bootstrap="localhost:{port}",
                    note="for clients on the Docker host, through a published port",
                ),
                ListenerSpec(
                    "LISTENER_ALICE", bind="kafka0", advertise="never-gonna-give-you-up:{port}",
                    note="advertises a name nobody can resolve",
                ),
            ),
        ),
    ),
    views={
        "docker": {"kafka0": ("127.0.0.11",), "localhost": ("127.0.0.1",)},
        "host": {"localhost": ("127.0.0.1",)},
    },
)

_INTERNAL_NAME = "ip-172-31-18-160.us-west-2.compute.internal"
_PUBLIC_NAME = "ec2-34-211-52-10.us-west-2.compute.amazonaws.com"

_CLOUD = Scenario(
    name="cloud",
    summary="an EC2 broker advertising its VPC-internal name; EXTERNAL listener as the fix",
    story=(
        "A broker on EC2. Clients bootstrap with the public name, which resolves on the "
        "internet and inside the VPC. The INTERNAL listener advertises the private "
        "ip-172-31-...compute.internal name, which resolves only inside the VPC: from the "
        "internet, bootstrap succeeds and every request after it fails. The EXTERNAL listener "
        "(option 2 of the classic fix) advertises the public name."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.21",
            hostnames=(_INTERNAL_NAME, _PUBLIC_NAME),
            listeners=(
                ListenerSpec(
                    "INTERNAL", advertise=_INTERNAL_NAME + ":{port}",
                    bootstrap=_PUBLIC_NAME + ":{port}", inter_broker=True,
                    note="advertises the VPC-internal name (the classic mistake from outside)",
                ),
                ListenerSpec(
                    "EXTERNAL", advertise=_PUBLIC_NAME + ":{port}",
                    bootstrap=_PUBLIC_NAME + ":{port}",
                    note="advertises the public name (the fix for clients outside the VPC)",
                ),
            ),
        ),
    ),
    views={
        "internet": {_PUBLIC_NAME: ("127.0.0.21",)},
        "vpc": {_PUBLIC_NAME: ("127.0.0.21",), _INTERNAL_NAME: ("127.0.0.21",)},
    },
)


def _three_node(node_id: int, address: str) -> NodeSpec:
    listeners = [
        ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker traffic"),
        ListenerSpec("CLIENT", note="healthy: every broker advertises its own address"),
        ListenerSpec(
            "BLACKHOLED",
            advertise="{bh[bh2]}" if node_id == 2 else "{addr}:{port}",
            note="broker 2 advertises an endpoint that never completes a connection",
        ),
        ListenerSpec(
            "DARK",
            advertise=f"{{bh[dark{node_id}]}}",
            note="every broker advertises an endpoint that drops connections (a firewalled private address)",
        ),
        ListenerSpec(
            "CROSSED",
            advertise="{ep[0][CLIENT]}" if node_id == 2 else "{addr}:{port}",
            note="broker 2 advertises broker 0's CLIENT endpoint (a wrong NAT or port-forward)",
        ),
        ListenerSpec(
            "TWIN",
            advertise="{ep[0][TWIN]}" if node_id == 2 else "{addr}:{port}",
            note="brokers 0 and 2 advertise one endpoint",
        ),
        ListenerSpec(
            "IMPOSTOR",
            advertise="{imp[http2]}" if node_id == 2 else "{addr}:{port}",
            note="broker 2 advertises an endpoint where an HTTP server answers",
        ),
    ]
    if node_id != 2:
        listeners.append(ListenerSpec("PARTIAL", note="a listener brokers 0 and 1 have, and broker 2 lacks"))
    return NodeSpec(node_id=node_id, address=address, hostnames=(f"kafka{node_id}",),
                    listeners=tuple(listeners), rack=f"rack{node_id}")


_THREE = Scenario(
    name="three-brokers",
    summary="three healthy brokers; extra listeners advertise a blackholed and a crossed endpoint",
    story=(
        "Three brokers on 127.0.0.31-33. Through CLIENT every broker advertises its own address. "
        "Through BLACKHOLED broker 2 advertises an endpoint that drops connections (a firewall), "
        "through DARK all three do; "
        "through CROSSED broker 2 advertises broker 0's endpoint. Stop a broker to see it refused."
    ),
    nodes=tuple(_three_node(i, f"127.0.0.{31 + i}") for i in range(3)),
    views={
        "lan": {f"kafka{i}": (f"127.0.0.{31 + i}",) for i in range(3)},
    },
    blackholes={"bh2": "127.0.0.34", **{f"dark{i}": "127.0.0.35" for i in range(3)}},
    impostors={"http2": "127.0.0.36"},
)

_TLS_NAME = "broker.tls.kprobe.test"
_TLS_INTERNAL = "kafka-tls.internal.kprobe.test"

_TLS = Scenario(
    name="tls",
    summary="SSL listeners: a good one, a certificate naming another host, expiring, untrusted, not TLS",
    story=(
        "One broker with TLS listeners, certificates from a lab CA made at start (kprobe lab up prints "
        "the CA file). SSL_GOOD is right. SSL_INTERNAL_NAME advertises the internal name while the "
        "certificate names the external one (the classic mistake). SSL_EXPIRING's certificate expires in "
        "5 days. SSL_FORWARD is trusted at bootstrap but advertises a listener whose certificate comes "
        "from another CA. SSL_TO_PLAIN advertises a PLAINTEXT port."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.41",
            hostnames=(_TLS_INTERNAL, _TLS_NAME),
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
                ListenerSpec("SSL_GOOD", protocol="SSL", certificate="main", advertise=_TLS_NAME + ":{port}",
                             bootstrap=_TLS_NAME + ":{port}", note="certificate names the advertised host"),
                ListenerSpec("SSL_INTERNAL_NAME", protocol="SSL", certificate="main",
                             advertise=_TLS_INTERNAL + ":{port}", bootstrap=_TLS_NAME + ":{port}",
                             note="advertises a name the certificate does not hold"),
                ListenerSpec("SSL_EXPIRING", protocol="SSL", certificate="expiring",
                             advertise=_TLS_NAME + ":{port}", bootstrap=_TLS_NAME + ":{port}",
                             note="certificate expires in 5 days"),
                ListenerSpec("SSL_OTHER_CA", protocol="SSL", certificate="other",
                             note="certificate from a CA clients do not trust"),
                ListenerSpec("SSL_FORWARD", protocol="SSL", certificate="main", advertise="{ep[0][SSL_OTHER_CA]}",
                             bootstrap=_TLS_NAME + ":{port}",
                             note="trusted at bootstrap, advertises SSL_OTHER_CA's endpoint"),
                ListenerSpec("SSL_TO_PLAIN", protocol="SSL", certificate="main", advertise="{ep[0][INTERNAL]}",
                             bootstrap=_TLS_NAME + ":{port}", note="advertises a PLAINTEXT listener's port"),
            ),
        ),
    ),
    views={"clients": {_TLS_NAME: ("127.0.0.41",), _TLS_INTERNAL: ("127.0.0.41",)}},
    certificates={
        "main": CertSpec((_TLS_NAME, "127.0.0.41")),
        "expiring": CertSpec((_TLS_NAME, "127.0.0.41"), days=5),
        "other": CertSpec((_TLS_NAME, "127.0.0.41"), ca="other-ca"),
    },
)

_SASL_NAME = "kafka-sasl"

_SASL = Scenario(
    name="sasl",
    summary="SASL listeners (PLAIN, SCRAM-SHA-256, PLAIN over TLS) behind an authorizer; users alice and bob",
    story=(
        "One broker with SASL listeners. SASL_PLAIN takes PLAIN, SASL_SCRAM takes SCRAM-SHA-256, "
        "SASL_SSL_PLAIN takes PLAIN inside TLS (certificate from the lab CA). An authorizer is on: alice is "
        "a super user, bob has no ACL, so he may read metadata but not describe broker configs (kprobe "
        "then cannot check which node answers). Passwords are made at start and printed by kprobe lab up."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.51",
            hostnames=("kafka-sasl",),
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
                ListenerSpec("SASL_PLAIN", protocol="SASL_PLAINTEXT", mechanism="PLAIN", note="SASL/PLAIN"),
                ListenerSpec("SASL_SCRAM", protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-256",
                             note="SASL/SCRAM-SHA-256"),
                ListenerSpec("SASL_SSL_PLAIN", protocol="SASL_SSL", mechanism="PLAIN", certificate="main",
                             advertise=_SASL_NAME + ":{port}", bootstrap=_SASL_NAME + ":{port}",
                             note="SASL/PLAIN inside TLS"),
            ),
        ),
    ),
    views={"clients": {_SASL_NAME: ("127.0.0.51",)}},
    certificates={"main": CertSpec((_SASL_NAME, "127.0.0.51"))},
    users=("alice", "bob"),
    broker_config={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # Inter-broker and controller traffic is PLAINTEXT (User:ANONYMOUS); alice may do anything.
        "super.users": "User:ANONYMOUS;User:alice",
        "allow.everyone.if.no.acl.found": "false",
    },
)

_COLLECTOR = Scenario(
    name="collector",
    summary="one plain broker that collects reports (kprobe probe --publish), for the scheduling tests",
    story="A single broker on 127.0.0.71 whose topic receives the reports of scheduled probes.",
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.71",
            hostnames=("collector",),
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker"),
                ListenerSpec("CLIENT", note="where probes publish their reports"),
            ),
        ),
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (_LISTENERS, _CLOUD, _THREE, _TLS, _SASL, _COLLECTOR)}


def get_scenario(name: str) -> Scenario:
    """The scenario of that name, or a usage error listing the ones that exist."""
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(sorted(SCENARIOS))
        raise UsageError(f"unknown lab scenario {name!r}: choose one of {known} (see `kprobe lab list`)") from None
