"""The lab's scenarios: classic listener set-ups, as data.

A scenario names its nodes (each on its own 127.0.0.x address, with the host names its
JVM resolves through a private hosts file), each node's listeners (where it binds, what it
advertises, how a client bootstraps to it) and DNS views (which names resolve where, standing
for different networks). Adding a scenario is adding an entry to `SCENARIOS`.

Templates in `bind`, `advertise` and `bootstrap` are `str.format` strings with:
`{addr}` the node's address, `{port}` this listener's port, `{bh[NAME]}` a blackhole
endpoint `host:port` kept by the lab, `{imp[NAME]}` an endpoint where a non-Kafka (HTTP)
server answers, `{ep[NODE][LISTENER]}` another listener's real endpoint (`{pt[NODE][LISTENER]}`
its port alone), `{px[NAME]}` the port of SNI proxy NAME (443 where the lab can bind it),
`{ctl[NODE]}` the real endpoint of a quorum member's CONTROLLER listener.
"""

from __future__ import annotations

from typing import Literal

from kprobe.errors import UsageError
from kprobe.exits import STATUS_EXIT
from kprobe.lab.certs import CertSpec
from kprobe.lab.forwarder import ForwardSpec
from kprobe.lab.idp import IdpSpec
from kprobe.lab.sni_proxy import ProxySpec
from kprobe.records import field, record

Verdict = Literal["OK", "GAP", "FAILED"]


@record
class Expect:
    """What `kprobe probe` through a listener shows from one view's network (`kprobe lab up` prints it).

    Declared with the scenario rather than observed, so a reader knows what to expect before running it, and
    tests/lab/test_base.py runs every printed command on a started lab and holds the lab to the declaration.
    `verdict` is the report's last line (OK, GAP, FAILED) and gives the exit code; `finding` the error the report
    names, empty for OK. `bootstrap` is the `-b`, a template as ListenerSpec's; empty, the listener's own.
    `note` says why, and where the lab cannot stage what the same command meets in a real deployment, says so.
    """

    verdict: Verdict
    finding: str = ""
    bootstrap: str = ""
    note: str = ""

    @property
    def exit_code(self) -> int:
        """The exit code that goes with the verdict, as every probe run maps it (kprobe.exits)."""
        return STATUS_EXIT[self.verdict.lower()]


@record
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
    # OAUTHBEARER only: "jwks" checks tokens against the scenario's identity provider (KIP-768),
    # "unsecured" leaves Kafka's default validator of unsigned (alg none) tokens.
    token_validator: str | None = None
    # The port to bind where the node's address has it free (Kubernetes' 9092 for every broker), else a free one.
    port: int = 0
    # TLS listeners only: the broker's ssl.client.auth for this listener ("required", "requested"), trusting
    # the CA of the listener's own certificate; clients present the lab's client certificate (lab.client_cert_file).
    client_auth: str | None = None
    # View -> what a probe through this listener shows from that view's network (`kprobe lab up` prints each).
    expect: dict[str, Expect] = field(default_factory=dict)


NodeRole = Literal["combined", "broker", "controller"]


@record
class NodeSpec:
    """One KRaft JVM on its own loopback address.

    `role` is `combined` (broker and controller in one JVM, the default), `broker` (a broker of a
    separate controller quorum) or `controller` (a quorum member only: no client listeners, its
    CONTROLLER listener advertised as `controller_advertise`, the way KIP-919 clients see it).
    """

    node_id: int
    address: str
    hostnames: tuple[str, ...] = ()
    listeners: tuple[ListenerSpec, ...] = ()
    rack: str | None = None
    role: NodeRole = "combined"
    controller_advertise: str = "{addr}:{port}"

    @property
    def is_controller(self) -> bool:
        """Whether the node is a quorum voter (combined or controller-only)."""
        return self.role != "broker"

    @property
    def is_broker(self) -> bool:
        """Whether the node serves clients (combined or broker-only)."""
        return self.role != "controller"


@record
class Scenario:
    """A named cluster set-up with the networks (DNS views) it is seen from."""

    name: str
    summary: str
    nodes: tuple[NodeSpec, ...]
    views: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    blackholes: dict[str, str] = field(default_factory=dict)
    # name -> (host, node id, listener): a blackhole on `host` at that listener's own port, so one
    # name with two addresses times out on one of them (the dual-stack scenario's ::1).
    shadow_blackholes: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    story: str = ""
    impostors: dict[str, str] = field(default_factory=dict)
    certificates: dict[str, CertSpec] = field(default_factory=dict)
    users: tuple[str, ...] = ()
    # Broker settings beyond the listeners (an authorizer, say), the same on every node.
    broker_config: dict[str, str] = field(default_factory=dict)
    # An OAuth identity provider the lab runs beside the brokers (token endpoint, JWKS).
    idp: IdpSpec | None = None
    # SNI-routing TLS passthrough proxies (HAProxy) in front of the brokers, as an ingress is.
    proxies: dict[str, ProxySpec] = field(default_factory=dict)
    # TCP forwards in front of brokers (a `kubectl port-forward`, a node port): `{fw[NAME]}` is a forward's port.
    forwards: dict[str, ForwardSpec] = field(default_factory=dict)
    # How to use the lab, printed by `kprobe lab up`: templates with `{fwe[NAME]}` (a forward's `address:port`),
    # `{ns[VIEW]}` (a view's nameserver) and `{adv[NODE][LISTENER]}` (an advertised endpoint).
    usage: tuple[str, ...] = ()
    # Topics the lab creates once every broker serves clients (name -> partitions; replication factor: the
    # brokers, up to 3). Brokers never create topics on first use (auto.create.topics.enable=false), as
    # production clusters usually run: a topic a scenario's story needs is made here, as an operator would.
    topics: dict[str, int] = field(default_factory=dict)

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
                    expect={
                        "docker": Expect("OK", note="BOB's own network, where kafka0 resolves"),
                        # kafka0 resolves nowhere on the host: the seeds' client reaches BOB by its address.
                        "host": Expect("GAP", "ADVERTISED_UNRESOLVABLE", bootstrap="{addr}:{port}",
                                       note="the seeds' mistake, BOB's port reached by address from the host, "
                                            "where the kafka0 it advertises does not resolve"),
                    },
                ),
                ListenerSpec(
                    "LISTENER_FRED", bind="127.0.0.1", advertise="localhost:{port}",
                    bootstrap="localhost:{port}",
                    note="for clients on the Docker host, through a published port",
                    expect={
                        "docker": Expect("FAILED", "BOOTSTRAP_UNREACHABLE", bootstrap="kafka0:{port}",
                                         note="the lab cannot stage FRED from inside the Docker network "
                                              "(ADVERTISED_LOOPBACK under Docker Compose, docs/playground.md): "
                                              "here FRED binds 127.0.0.1 alone, as its published port, so "
                                              "kafka0 refuses the port"),
                        "host": Expect("OK", note="FRED's own network, where localhost is the published port"),
                    },
                ),
                ListenerSpec(
                    "LISTENER_ALICE", bind="kafka0", advertise="never-gonna-give-you-up:{port}",
                    note="advertises a name nobody can resolve",
                    expect={
                        view: Expect("GAP", "ADVERTISED_UNRESOLVABLE",
                                     note="never-gonna-give-you-up resolves in no network")
                        for view in ("docker", "host")
                    },
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
    summary="SSL listeners: a good one, a certificate naming another host, expiring, untrusted, not TLS, "
            "an IP held as a DNS name, one requiring a client certificate",
    story=(
        "One broker with TLS listeners, certificates from a lab CA made at start (kprobe lab up prints "
        "the CA file). SSL_GOOD is right. SSL_INTERNAL_NAME advertises the internal name while the "
        "certificate names the external one (the classic mistake). SSL_EXPIRING's certificate expires in "
        "5 days. SSL_FORWARD is trusted at bootstrap but advertises a listener whose certificate comes "
        "from another CA. SSL_TO_PLAIN advertises a PLAINTEXT port. SSL_IP_AS_DNS advertises the broker's IP "
        "address, which its certificate holds as a DNS name (DNS:127.0.0.41) and not as an IP entry. SSL_MTLS "
        "requires a client certificate from the lab CA (ssl.client.auth=required); kprobe lab up prints the "
        "client certificate and key files, and one from another CA, which it refuses."
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
                ListenerSpec("SSL_IP_AS_DNS", protocol="SSL", certificate="ip-as-dns", advertise="{addr}:{port}",
                             bootstrap=_TLS_NAME + ":{port}",
                             note="advertises its IP address, which the certificate holds only as a DNS name"),
                ListenerSpec("SSL_MTLS", protocol="SSL", certificate="main", client_auth="required",
                             advertise=_TLS_NAME + ":{port}", bootstrap=_TLS_NAME + ":{port}",
                             note="requires a client certificate from the lab CA: ssl.client.auth=required"),
            ),
        ),
    ),
    views={"clients": {_TLS_NAME: ("127.0.0.41",), _TLS_INTERNAL: ("127.0.0.41",)}},
    certificates={
        "main": CertSpec((_TLS_NAME, "127.0.0.41")),
        "expiring": CertSpec((_TLS_NAME, "127.0.0.41"), days=5),
        "other": CertSpec((_TLS_NAME, "127.0.0.41"), ca="other-ca"),
        # The address as a DNS-type entry (DNS:127.0.0.41), as cert-manager's dnsNames makes it: no client
        # matches an IP against it.
        "ip-as-dns": CertSpec((_TLS_NAME, "DNS:127.0.0.41")),
        # Client certificates (clientAuth): the lab CA's, which SSL_MTLS takes, and another CA's, which it refuses.
        "client": CertSpec(("kprobe-lab-client",), client=True),
        "client-other-ca": CertSpec(("kprobe-lab-client",), ca="other-ca", client=True),
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

_SCRAM_NAME = "kafka-scram.kprobe.test"
# A cloud-internal name (an EC2 instance's private DNS name) that no view resolves.
_SCRAM_UNRESOLVABLE = "ip-10-0-1-23.ec2.internal"

_SCRAM = Scenario(
    name="scram",
    summary="SCRAM-SHA-512 listeners: one healthy, one advertising a name no client resolves; users alice, mallory",
    story=(
        "One broker behind SCRAM-SHA-512, as managed clusters usually are (Amazon MSK's 9096). "
        "SCRAM_GOOD advertises kafka-scram.kprobe.test, which the clients view resolves. SCRAM_BROKEN is "
        "reached at the same name but advertises ip-10-0-1-23.ec2.internal, which resolves nowhere: the "
        "client authenticates, bootstraps, and every connection after it fails. Each listener enables "
        "SCRAM-SHA-512 only, so a client sending SCRAM-SHA-256 or PLAIN is told the one mechanism it "
        "takes. Passwords are made at start and printed by kprobe lab up."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.61",
            hostnames=(_SCRAM_NAME,),
            listeners=(
                # PLAINTEXT: inter-broker traffic, and where the docker backend creates the SCRAM users.
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
                ListenerSpec("SCRAM_GOOD", protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512",
                             advertise=_SCRAM_NAME + ":{port}", bootstrap=_SCRAM_NAME + ":{port}",
                             note="SASL/SCRAM-SHA-512, advertises a name clients resolve"),
                ListenerSpec("SCRAM_BROKEN", protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512",
                             advertise=_SCRAM_UNRESOLVABLE + ":{port}", bootstrap=_SCRAM_NAME + ":{port}",
                             note="SASL/SCRAM-SHA-512, advertises a cloud-internal name nobody resolves"),
            ),
        ),
    ),
    views={"clients": {_SCRAM_NAME: ("127.0.0.61",)}},
    # mallory has an account too: a wrong password must meet a real user, not an unknown one.
    users=("alice", "mallory"),
)

_OAUTH_NAME = "kafka-oauth.kprobe.test"
_IDP_ADDRESS = "127.0.0.82"

_OAUTH = Scenario(
    name="oauth",
    summary="OAUTHBEARER listeners: JWTs from the lab's OAuth server (client credentials, JWKS), and unsecured tokens",
    story=(
        "One broker behind OAUTHBEARER, as Confluent Cloud, Strimzi or a Keycloak-backed cluster is. The lab runs an "
        "OAuth server on 127.0.0.82: a token endpoint over HTTPS (certificate from the lab CA) that grants client "
        "credentials, and the JWKS the broker checks signatures with. OAUTH_OIDC and OAUTH_SSL (OAUTHBEARER inside "
        "TLS) take its tokens for the audience kafka: client kprobe-app gets one, client billing-app gets a valid "
        "token for another audience, which the broker refuses. OAUTH_UNSECURED takes unsigned tokens (librdkafka's "
        "enable.sasl.oauthbearer.unsecure.jwt, for development only). Client secrets are made at start and printed "
        "by kprobe lab up."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.81",
            hostnames=(_OAUTH_NAME,),
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
                ListenerSpec("OAUTH_OIDC", protocol="SASL_PLAINTEXT", mechanism="OAUTHBEARER", token_validator="jwks",
                             note="OAUTHBEARER, JWTs checked against the lab OAuth server's JWKS"),
                ListenerSpec("OAUTH_SSL", protocol="SASL_SSL", mechanism="OAUTHBEARER", token_validator="jwks",
                             certificate="broker", advertise=_OAUTH_NAME + ":{port}",
                             bootstrap=_OAUTH_NAME + ":{port}", note="OAUTHBEARER inside TLS, JWTs checked as above"),
                ListenerSpec("OAUTH_UNSECURED", protocol="SASL_PLAINTEXT", mechanism="OAUTHBEARER",
                             token_validator="unsecured",
                             note="OAUTHBEARER with unsigned tokens (Kafka's default validator; development only)"),
            ),
        ),
    ),
    views={"clients": {_OAUTH_NAME: ("127.0.0.81",)}},
    certificates={"broker": CertSpec((_OAUTH_NAME, "127.0.0.81")), "idp": CertSpec((_IDP_ADDRESS,))},
    idp=IdpSpec(address=_IDP_ADDRESS, clients=(("kprobe-app", "kafka"), ("billing-app", "billing-api")),
                audience="kafka", certificate="idp"),
)

_INGRESS_ADDRESS = "127.0.0.100"
_INGRESS_DOMAIN = "kafka.apps.kprobe.test"
_PARTNERS_DOMAIN = "partners.kafka.apps.kprobe.test"
_INGRESS_NAMES = tuple(f"{host}.{domain}" for domain in (_INGRESS_DOMAIN, _PARTNERS_DOMAIN)
                       for host in ("bootstrap", "broker-0", "broker-1", "broker-2"))


def _ingress_node(node_id: int) -> NodeSpec:
    """A broker whose TLS listeners are reached only through the SNI proxy, under a name of its own."""
    def behind_proxy(name: str, domain: str, note: str) -> ListenerSpec:
        return ListenerSpec(name, protocol="SSL", certificate="brokers",
                            advertise=f"broker-{node_id}.{domain}:{{px[ingress]}}",
                            bootstrap=f"bootstrap.{domain}:{{px[ingress]}}", note=note)

    return NodeSpec(
        node_id=node_id,
        address=f"127.0.0.{101 + node_id}",
        listeners=(
            ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
            behind_proxy("INGRESS", _INGRESS_DOMAIN, "behind the ingress; every broker's name has a route"),
            behind_proxy("ROUTE_MISSING", _PARTNERS_DOMAIN,
                         "behind the ingress; brokers 0 and 1 have routes, broker 2's name has none"),
        ),
    )


_SNI_INGRESS = Scenario(
    name="sni-ingress",
    summary="three TLS brokers behind one SNI-routing proxy on :443 (a Kubernetes ingress / OpenShift route)",
    story=(
        "Three brokers on 127.0.0.101-103 reached only through an SNI-routing TLS passthrough proxy (HAProxy) on "
        "127.0.0.100:443, as a Kubernetes ingress with ssl-passthrough or an OpenShift passthrough route puts them: "
        "each broker advertises a name of its own on the proxy's port, every name resolves to the proxy, and the "
        "proxy picks the broker from the SNI of the ClientHello. Through INGRESS every name has a route. "
        "ROUTE_MISSING is a second listener whose ingress rules were written for brokers 0 and 1 only: broker 2's "
        "name reaches the proxy's default server, which presents the NGINX Ingress Controller's self-signed "
        "'Kubernetes Ingress Controller Fake Certificate' and answers HTTP. Clients trust the lab CA."
    ),
    nodes=tuple(_ingress_node(i) for i in range(3)),
    views={"internet": {name: (_INGRESS_ADDRESS,) for name in _INGRESS_NAMES}},
    certificates={
        "brokers": CertSpec(_INGRESS_NAMES),
        # What ingress-nginx makes when no default certificate is configured (internal/net/ssl).
        "ingress-default": CertSpec(("ingress.local",), subject="/O=Acme Co/CN=Kubernetes Ingress Controller Fake "
                                    "Certificate", self_signed=True, days=365),
    },
    proxies={"ingress": ProxySpec(
        address=_INGRESS_ADDRESS,
        default_certificate="ingress-default",
        routes={
            f"bootstrap.{_INGRESS_DOMAIN}": tuple(f"{{ep[{i}][INGRESS]}}" for i in range(3)),
            **{f"broker-{i}.{_INGRESS_DOMAIN}": (f"{{ep[{i}][INGRESS]}}",) for i in range(3)},
            f"bootstrap.{_PARTNERS_DOMAIN}": tuple(f"{{ep[{i}][ROUTE_MISSING]}}" for i in range(3)),
            # No route for broker-2.partners...: the mistake this listener stages.
            **{f"broker-{i}.{_PARTNERS_DOMAIN}": (f"{{ep[{i}][ROUTE_MISSING]}}",) for i in range(2)},
        },
        note="an ingress controller with ssl-passthrough",
    )},
)

_COLLECTOR = Scenario(
    name="collector",
    summary="one plain broker that collects reports (kprobe probe --publish), for the scheduling tests",
    story="A single broker on 127.0.0.71 whose topic kprobe-reports, made at start, receives the reports of "
          "scheduled probes (--publish). It creates no topic on first use (auto.create.topics.enable=false).",
    topics={"kprobe-reports": 6},
    # Tests stop and restart this broker to show the spool at work, and nobody probes it while it
    # is down: a short session lets the restarted broker register again in 3 s, not 10.
    broker_config={"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"},
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

_DEFAULTS = Scenario(
    name="defaults",
    summary="one broker whose internal topics keep Kafka's defaults (replication factor 3): groups and "
            "transactions cannot work",
    story="A single broker on 127.0.0.150, set up as many Compose files and tutorials leave it: "
          "offsets.topic.replication.factor and transaction.state.log.replication.factor at Kafka's default of 3, "
          "transaction.state.log.min.isr at 2. Every endpoint works and producers produce, but __consumer_offsets "
          "and __transaction_state can never be created: consumers in a group read nothing, transactional "
          "producers time out in initTransactions. Topic orders is made at start.",
    topics={"orders": 2},
    broker_config={"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
                   "transaction.state.log.min.isr": "2"},
    nodes=(
        NodeSpec(
            node_id=0,
            address="127.0.0.150",
            hostnames=("kafka",),
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker"),
                ListenerSpec("CLIENT", note="healthy: the broker's own address"),
            ),
        ),
    ),
)


def _groups_node(node_id: int) -> NodeSpec:
    return NodeSpec(
        node_id=node_id,
        address=f"127.0.0.{151 + node_id}",
        hostnames=(f"kafka{node_id}",),
        listeners=(
            ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker"),
            ListenerSpec("CLIENT", note="healthy: every broker advertises its own address"),
            ListenerSpec("BROKEN2", advertise="{addr}:1" if node_id == 2 else "{addr}:{port}",
                         note="broker 2 advertises a port where nothing listens; the groups it coordinates fail"),
        ),
        rack=f"rack{node_id}",
    )


_GROUPS = Scenario(
    name="groups",
    summary="three brokers, __consumer_offsets with one replica per partition; broker 2's BROKEN2 endpoint refuses",
    story="Three brokers on 127.0.0.151-153. __consumer_offsets has 12 partitions of one replica each, so each "
          "broker coordinates the groups whose id hashes to its partitions, and stopping a broker takes its groups "
          "down. Through BROKEN2 broker 2 advertises a port where nothing listens: the groups it coordinates cannot "
          "consume from there, the others can. Consumers with group.protocol=consumer (KIP-848) are refused; share "
          "groups (KIP-932) are on. The brokers are in racks rack0-rack2 and serve consumers from the replica in "
          "their rack (RackAwareReplicaSelector): a consumer with client.rack=rack2 reads through broker 2. Topic "
          "billing is made at start.",
    topics={"billing": 3},
    broker_config={"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "12",
                   "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                   # The consumer protocol (KIP-848) switched off and share groups (KIP-932) on: the reverse of
                   # Kafka 4.1's defaults, which the defaults scenario keeps.
                   "group.coordinator.rebalance.protocols": "classic", "group.share.enable": "true",
                   # Follower fetching (KIP-392): a consumer with client.rack reads from the replica in its rack.
                   "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"},
    nodes=tuple(_groups_node(i) for i in range(3)),
    views={"lan": {f"kafka{i}": (f"127.0.0.{151 + i}",) for i in range(3)}},
)

_KRAFT_CONTROLLER_NAME = "controller-0.kraft.internal"
_KRAFT_CONTROLLER_ID = 9


def _kraft_broker(node_id: int) -> NodeSpec:
    """A broker of the separate quorum; broker 1 hands the controller's listener to clients."""
    return NodeSpec(
        node_id=node_id,
        address=f"127.0.0.{140 + node_id}",
        role="broker",
        listeners=(
            ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
            ListenerSpec("CLIENT", note="healthy: every broker advertises its own address"),
            ListenerSpec(
                "CONTROLLER_LEAK",
                advertise=f"{{ctl[{_KRAFT_CONTROLLER_ID}]}}" if node_id == 1 else "{addr}:{port}",
                note="broker 1 advertises the KRaft controller's listener to clients (KAFKA-16612)",
            ),
        ),
    )


_CONTROLLERS = Scenario(
    name="controllers",
    summary="two brokers and a separate KRaft controller whose endpoint only the inside view resolves",
    story=(
        "A KRaft cluster with its own controller quorum, as production clusters run it: brokers 1 and 2 on "
        "127.0.0.141-142 (process.roles=broker) and controller 9 on 127.0.0.140 (process.roles=controller). "
        f"The controller advertises its CONTROLLER listener as {_KRAFT_CONTROLLER_NAME}, which only the inside "
        "view resolves: admin tools that bootstrap to controllers (bootstrap.controllers, KIP-919) work inside "
        "and fail outside. Through CLIENT every broker advertises its own address; through CONTROLLER_LEAK "
        "broker 1 advertises the controller's listener, where clients meet a node that does not serve Metadata."
    ),
    nodes=(
        _kraft_broker(1),
        _kraft_broker(2),
        NodeSpec(node_id=_KRAFT_CONTROLLER_ID, address="127.0.0.140", role="controller",
                 hostnames=(_KRAFT_CONTROLLER_NAME,), controller_advertise=_KRAFT_CONTROLLER_NAME + ":{port}"),
    ),
    views={
        "inside": {_KRAFT_CONTROLLER_NAME: ("127.0.0.140",)},
        "outside": {},
    },
)

_DUAL_NAME = "kafka.dual.kprobe.test"
_DUAL_DARK_NAME = "kafka-dark.dual.kprobe.test"
_DUAL_ADDRESS = "127.0.0.130"

_DUAL_STACK = Scenario(
    name="dual-stack",
    summary="an IPv4-only broker advertised under names that also resolve to ::1 (refused, or timing out)",
    story=(
        f"One broker on {_DUAL_ADDRESS}, listening on IPv4 only, as most brokers do. Its listeners advertise names "
        "with an A record for the broker and an AAAA record for ::1, a stale or hopeful IPv6 record: through DUAL "
        "nothing listens on [::1] at that port, so connects there are refused; through DUAL_DARK a blackhole on "
        "[::1] at the broker's port drops them, so they time out; LOCALHOST advertises localhost, which the view "
        "resolves to ::1 and the broker's address, as /etc/hosts does with `::1 localhost` on most machines. "
        "Real clients with default settings work against all three (docs/dual-stack.md has the measurements)."
    ),
    nodes=(
        NodeSpec(
            node_id=0,
            address=_DUAL_ADDRESS,
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT"),
                ListenerSpec("DUAL", advertise=_DUAL_NAME + ":{port}",
                             note="advertises a name with AAAA ::1, refused there, and A for the broker"),
                ListenerSpec("DUAL_DARK", advertise=_DUAL_DARK_NAME + ":{port}",
                             note="advertises a name with AAAA ::1, where connects time out, and A for the broker"),
                ListenerSpec("LOCALHOST", advertise="localhost:{port}",
                             note="advertises localhost, resolved to ::1 (refused) first and the broker's address"),
            ),
        ),
    ),
    views={
        "dual": {name: ("::1", _DUAL_ADDRESS) for name in (_DUAL_NAME, _DUAL_DARK_NAME, "localhost")},
    },
    shadow_blackholes={"dark6": ("::1", 0, "DUAL_DARK")},
)

# -- Kubernetes shapes: names as Strimzi makes them, node ports as kube-proxy serves them ------------
# Strimzi's per-broker names (its documentation's `my-cluster-kafka-0.my-cluster-kafka-brokers.myproject.svc`),
# in namespace kafka as its quickstart installs it; the bootstrap service `my-cluster-kafka-bootstrap`.
_STRIMZI_BOOTSTRAP = "my-cluster-kafka-bootstrap.kafka.svc"


def _strimzi_pod(i: int) -> str:
    return f"my-cluster-kafka-{i}.my-cluster-kafka-brokers.kafka.svc"


def _forwarded_node(i: int) -> NodeSpec:
    return NodeSpec(
        node_id=i,
        address=f"127.0.0.{110 + i}",
        hostnames=(_strimzi_pod(i),),
        listeners=(
            ListenerSpec("REPLICATION", inter_broker=True, note="inter-broker (Strimzi's REPLICATION-9091)"),
            ListenerSpec("PLAIN", port=9092, advertise=_strimzi_pod(i) + ":{port}",
                         bootstrap=_STRIMZI_BOOTSTRAP + ":{port}",
                         note="Strimzi's internal `plain` listener: advertises the pod's name under the headless "
                              "service"),
        ),
    )


_PORT_FORWARD = Scenario(
    name="port-forward",
    summary="three brokers advertising Strimzi's cluster-internal names, reached through `kubectl port-forward`s",
    story=(
        "A Strimzi cluster my-cluster in namespace kafka: brokers on 127.0.0.110-112 whose plain listener "
        "advertises my-cluster-kafka-N.my-cluster-kafka-brokers.kafka.svc on 9092 (where the address has it free). "
        "The cluster view resolves those names, as pods do; the laptop view resolves none, as a laptop does. A "
        "forward on 127.0.0.113-115 relays to each broker, as `kubectl port-forward --address 127.0.0.11x "
        "pod/my-cluster-kafka-N 9092:9092` would: bootstrapping through broker 0's forward answers, and every "
        "advertised name then fails from the laptop, until each name is mapped to its own forward."
    ),
    nodes=tuple(_forwarded_node(i) for i in range(3)),
    views={
        "cluster": {_STRIMZI_BOOTSTRAP: ("127.0.0.110",),
                    **{_strimzi_pod(i): (f"127.0.0.{110 + i}",) for i in range(3)}},
        "laptop": {},
    },
    forwards={f"pod{i}": ForwardSpec(address=f"127.0.0.{113 + i}", targets=(f"{{ep[{i}][PLAIN]}}",), port=9092,
                                     note=f"kubectl port-forward -n kafka --address 127.0.0.{113 + i} "
                                          f"pod/my-cluster-kafka-{i} 9092:9092")
              for i in range(3)},
    usage=(
        "the gap, from the laptop: kprobe probe -b {fwe[pod0]} --nameserver {ns[laptop]}",
        "the fix, tried first: kprobe probe -b {fwe[pod0]} --nameserver {ns[laptop]} "
        "--connect-to {adv[0][PLAIN]}={fwe[pod0]} --connect-to {adv[1][PLAIN]}={fwe[pod1]} "
        "--connect-to {adv[2][PLAIN]}={fwe[pod2]}",
        "from inside the cluster: kprobe probe -b {adv[0][PLAIN]} --nameserver {ns[cluster]}",
    ),
)

_NODE_A, _NODE_A_ADDRESS = "node-a.k8s.internal", "127.0.0.125"
_NODE_B, _NODE_B_ADDRESS = "node-b.k8s.internal", "127.0.0.126"


def _nodeport_node(i: int) -> NodeSpec:
    """A broker pod; its client listeners advertise node addresses with node ports, as Strimzi's nodeport type does."""
    return NodeSpec(
        node_id=i,
        address=f"127.0.0.{120 + i}",
        listeners=(
            ListenerSpec("REPLICATION", inter_broker=True, note="inter-broker"),
            ListenerSpec("NODEPORT", advertise=f"{_NODE_A}:{{fw[a-{i}]}}", bootstrap=_NODE_A + ":{fw[a-bootstrap]}",
                         note="every broker's node port on node-a (advertisedHost set to one node for all)"),
            ListenerSpec("NODEPORT_INTERNAL",
                         advertise=(f"{_NODE_A}:{{fw[a-int-{i}]}}" if i == 0 else f"{_NODE_B}:{{fw[b-int-{i}]}}"),
                         bootstrap=_NODE_A + ":{fw[a-int-bootstrap]}",
                         note="broker 0 on node-a, brokers 1 and 2 on node-b, whose name only the inside view "
                              "resolves (a node's InternalDNS)"),
        ),
    )


def _node_port(name: str, address: str, port: int, *targets: str) -> ForwardSpec:
    return ForwardSpec(address=address, targets=targets, port=port, note=f"node port {name}, as kube-proxy serves it")


_NODEPORT = Scenario(
    name="nodeport",
    summary="three brokers behind Kubernetes node ports: all on one node address, or partly on a node only the "
            "inside view resolves",
    story=(
        "Three broker pods on 127.0.0.120-122 exposed through NodePort services: node-a.k8s.internal "
        "(127.0.0.125) and node-b.k8s.internal (127.0.0.126) relay their node ports (31090-31092, 31190-31192 and "
        "the bootstrap's 32100 and 32200 where free) to the brokers, as kube-proxy does. Through NODEPORT every "
        "broker advertises node-a with a port of its own, which works from both views. Through NODEPORT_INTERNAL "
        "brokers 1 and 2 advertise node-b, a name only the inside view resolves, as a listener advertising the "
        "nodes' InternalDNS names does (Strimzi's preferredNodePortAddressType)."
    ),
    nodes=tuple(_nodeport_node(i) for i in range(3)),
    views={
        "laptop": {_NODE_A: (_NODE_A_ADDRESS,)},
        "inside": {_NODE_A: (_NODE_A_ADDRESS,), _NODE_B: (_NODE_B_ADDRESS,)},
    },
    forwards={
        "a-bootstrap": _node_port("a-bootstrap", _NODE_A_ADDRESS, 32100, *(f"{{ep[{i}][NODEPORT]}}" for i in range(3))),
        **{f"a-{i}": _node_port(f"a-{i}", _NODE_A_ADDRESS, 31090 + i, f"{{ep[{i}][NODEPORT]}}") for i in range(3)},
        "a-int-bootstrap": _node_port("a-int-bootstrap", _NODE_A_ADDRESS, 32200,
                                      *(f"{{ep[{i}][NODEPORT_INTERNAL]}}" for i in range(3))),
        "a-int-0": _node_port("a-int-0", _NODE_A_ADDRESS, 31190, "{ep[0][NODEPORT_INTERNAL]}"),
        **{f"b-int-{i}": _node_port(f"b-int-{i}", _NODE_B_ADDRESS, 31190 + i, f"{{ep[{i}][NODEPORT_INTERNAL]}}")
           for i in (1, 2)},
    },
    usage=(
        "node ports on one node, working: kprobe probe -b node-a.k8s.internal:{fw[a-bootstrap]} "
        "--nameserver {ns[laptop]}",
        "the gap, node-b unknown outside: kprobe probe -b node-a.k8s.internal:{fw[a-int-bootstrap]} "
        "--nameserver {ns[laptop]}",
        "the fix, tried first: add --resolve node-b.k8s.internal=127.0.0.126",
    ),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (_LISTENERS, _CLOUD, _THREE, _TLS, _SASL, _SCRAM, _OAUTH, _SNI_INGRESS, _COLLECTOR,
                        _CONTROLLERS, _DUAL_STACK, _PORT_FORWARD, _NODEPORT, _DEFAULTS, _GROUPS)
}


def get_scenario(name: str) -> Scenario:
    """The scenario of that name, or a usage error listing the ones that exist."""
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join(sorted(SCENARIOS))
        raise UsageError(f"unknown lab scenario {name!r}: choose one of {known} (see `kprobe lab list`)") from None
