"""What every lab backend shares: rendering a scenario into broker settings, DNS views,
its decoys (kprobe.lab.decoys), and the handle tests and the CLI use.

The backends (native JVMs, testcontainers) differ only in how a node's process starts and
stops; the listener layout, advertised endpoints and DNS views come from here, so both
backends serve the same scenario byte for byte.
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kprobe.errors import LabError
from kprobe.lab.certs import CertFiles, make_cert
from kprobe.lab.decoys import Blackhole, Impostor
from kprobe.lab.dns_server import DnsServer, start_views
from kprobe.lab.forwarder import Forwarders
from kprobe.lab.helpers import PortClaims, lab_port_range, share_port
from kprobe.lab.idp import IdentityProvider
from kprobe.lab.scenarios import Expect, ListenerSpec, NodeSpec, Scenario
from kprobe.lab.sni_proxy import SniProxy
from kprobe.records import field, record


@record(frozen=False)
class RenderedListener:
    """A listener with its port chosen and templates filled in."""

    spec: ListenerSpec
    bind_host: str
    bind_ip: str
    port: int
    advertised: str = ""
    bootstrap: str = ""
    # View -> the `-b` of the probe the listener's expectation for that view is about (ListenerSpec.expect).
    expect_bootstraps: dict[str, str] = field(default_factory=dict)


@record
class ViewCommand:
    """One command `kprobe lab up` prints under a view, and what the scenario says it shows."""

    listener: str
    command: str
    expect: Expect

    def lines(self) -> list[str]:
        """The command on a line of its own (to copy), the expectation under it."""
        said = ", ".join(part for part in (self.expect.verdict, f"exit {self.expect.exit_code}", self.expect.finding)
                         if part)
        return [f"    {self.listener}: {self.command}",
                f"      expect {said}" + (f": {self.expect.note}" if self.expect.note else "")]


@record(frozen=False)
class RenderedNode:
    """A node with concrete listeners and its controller port."""

    spec: NodeSpec
    controller_port: int
    listeners: dict[str, RenderedListener] = field(default_factory=dict)
    # What a quorum member advertises for its CONTROLLER listener (what DescribeCluster hands KIP-919 clients).
    controller_advertised: str = ""

    @property
    def controller_endpoint(self) -> str:
        """The CONTROLLER listener's real `ip:port` (a quorum member's; a broker-only node has none)."""
        return f"{self.spec.address}:{self.controller_port}"

    @property
    def node_id(self) -> int:
        """Shorthand used everywhere a node is looked up."""
        return self.spec.node_id


def free_port(host: str, taken: set[tuple[str, int]], claims: PortClaims, preferred: int = 0) -> int:
    """A port for a JVM to bind on `host`: `preferred` where it is free, else one of the lab's own, held in `claims`.

    `preferred` (a listener's `port`, Kubernetes' 9092) is taken where it is free on `host` and not yet
    handed out on that host; several nodes may each have it, on their own addresses, as pods do. A lab's
    own port is chosen outside the ephemeral range and claimed machine-wide (helpers.lab_port_range,
    helpers.PortClaims): the JVM binds it seconds later, and until then no other process may get it.
    `taken` avoids handing one out twice in the lab.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # the namespace lab's IPv6 listeners
    if preferred and (host, preferred) not in taken:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # As Kafka and HAProxy bind it: connections of a lab that just stopped (TIME_WAIT) must not
            # push the port elsewhere, or the run after a run gets another port than the one before.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, preferred))
            except OSError:
                pass
            else:
                if share_port(preferred):
                    taken.add((host, preferred))
                    return preferred
    low, high = lab_port_range()
    for _ in range(200):
        # secrets, not random: pytest-randomly seeds `random` alike in every worker, which would then all
        # try the same numbers in the same order.
        port = low + secrets.randbelow(high - low + 1)
        # Kafka refuses two listeners on one port, whatever their hosts: unique in the lab.
        if any(p == port for _, p in taken) or not claims.claim(port):
            continue
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError as exc:
                claims.drop(port)
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise  # not an address of this machine (EADDRNOTAVAIL): no number will do
                continue  # a program that is no lab has it
        taken.add((host, port))
        return port
    raise RuntimeError(f"no free port on {host}")


def render(
    scenario: Scenario, blackholes: dict[str, Blackhole], impostors: dict[str, Impostor] | None = None,
    proxy_ports: dict[str, int] | None = None, forward_ports: dict[str, int] | None = None,
    claims: PortClaims | None = None,
) -> dict[int, RenderedNode]:
    """Choose ports and fill in every template of the scenario.

    `proxy_ports` are the ports the SNI proxies got (`{px[NAME]}`), `forward_ports` the forwards'
    (`{fw[NAME]}`); without them, the ports they prefer. `claims` holds the lab's own ports until the
    lab stops (RunningLab.port_claims); without it they are held only while rendering (for a rendering
    that nothing runs).
    """
    taken: set[tuple[str, int]] = set()
    nodes: dict[int, RenderedNode] = {}
    held = claims if claims is not None else PortClaims()
    try:
        for spec in scenario.nodes:
            names = {name: spec.address for name in spec.hostnames}
            node = RenderedNode(spec, free_port(spec.address, taken, held))
            for lst in spec.listeners:
                bind_host = lst.bind.format(addr=spec.address)
                bind_ip = names.get(bind_host, bind_host)
                port = free_port(bind_ip, taken, held, lst.port)
                node.listeners[lst.name] = RenderedListener(lst, bind_host, bind_ip, port)
            nodes[spec.node_id] = node
    finally:
        if claims is None:
            held.release()
    real = {
        n.node_id: {name: f"{rl.bind_ip}:{rl.port}" for name, rl in n.listeners.items()}
        for n in nodes.values()
    }
    holes = {name: bh.endpoint for name, bh in blackholes.items()}
    fakes = {name: imp.endpoint for name, imp in (impostors or {}).items()}
    proxies = {**{name: spec.port for name, spec in scenario.proxies.items()}, **(proxy_ports or {})}
    controllers = {n.node_id: f"{n.spec.address}:{n.controller_port}" for n in nodes.values() if n.spec.is_controller}
    forwards = {**{name: spec.port for name, spec in scenario.forwards.items()}, **(forward_ports or {})}
    ports = {n.node_id: {name: rl.port for name, rl in n.listeners.items()} for n in nodes.values()}
    for node in nodes.values():
        for rl in node.listeners.values():
            values: dict[str, Any] = {"addr": node.spec.address, "port": rl.port, "bh": holes, "ep": real,
                                      "imp": fakes, "px": proxies, "ctl": controllers, "fw": forwards, "pt": ports}
            rl.advertised = rl.spec.advertise.format(**values)
            rl.bootstrap = rl.spec.bootstrap.format(**values)
            rl.expect_bootstraps = {view: expect.bootstrap.format(**values) if expect.bootstrap else rl.bootstrap
                                    for view, expect in rl.spec.expect.items()}
        node.controller_advertised = node.spec.controller_advertise.format(addr=node.spec.address,
                                                                           port=node.controller_port)
    return nodes


def server_properties(
    scenario: Scenario,
    nodes: dict[int, RenderedNode],
    node_id: int,
    data_dir: str,
    certs: dict[str, CertFiles] | None = None,
    passwords: dict[str, str] | None = None,
    idp_settings: Mapping[str, str] | None = None,
) -> str:
    """The node's server.properties (KRaft: combined broker + controller, broker only or controller only).

    A controller-only node has only its CONTROLLER listener, advertised as the scenario says (KIP-919
    clients are handed that); a broker-only node has no CONTROLLER listener and finds the quorum
    through the voters. `idp_settings` are what an OAUTHBEARER listener validating JWTs is told of the
    lab's identity provider (`IdentityProvider.broker_settings`: JWKS URL, expected audience and issuer).
    """
    node = nodes[node_id]
    voters = ",".join(f"{n.node_id}@{n.spec.address}:{n.controller_port}" for n in nodes.values()
                      if n.spec.is_controller)
    listeners = [f"{name}://[{rl.bind_host}]:{rl.port}" if ":" in rl.bind_host else f"{name}://{rl.bind_host}:{rl.port}"
                 for name, rl in node.listeners.items()]  # an IPv6 bind address in brackets, as Kafka parses it
    advertised = [f"{name}://{rl.advertised}" for name, rl in node.listeners.items()]
    if node.spec.is_controller:
        listeners.append(f"CONTROLLER://{node.spec.address}:{node.controller_port}")
    if node.spec.role == "controller":
        advertised.append(f"CONTROLLER://{node.controller_advertised}")
    protocols = [f"{name}:{rl.spec.protocol}" for name, rl in node.listeners.items()]
    protocols.append("CONTROLLER:PLAINTEXT")
    replication = min(3, sum(1 for n in nodes.values() if n.spec.is_broker))
    roles = {"combined": "broker,controller", "broker": "broker", "controller": "controller"}[node.spec.role]
    lines = {
        "process.roles": roles,
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": data_dir,
        "num.partitions": "1",
        "offsets.topic.replication.factor": str(replication),
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # A killed broker stays registered (and advertised) until this expires, and a restarted
        # one cannot re-register before: long enough for a test to probe the refused endpoint,
        # short enough for a quick restart.
        "broker.session.timeout.ms": "10000",
        "auto.create.topics.enable": "false",
        "log.segment.bytes": str(16 * 1024 * 1024),
        # One network thread per listener and one request handler: a lab's clients are a few at a time, and
        # each idle thread wakes several times a second (a sixth of an idle broker's CPU went to the second ones).
        "num.network.threads": "1",
        "num.io.threads": "1",
        "background.threads": "2",
        # The active controller's no-op record (KIP-835) every 5 s, not every 0.5 s: each one is
        # written, fetched by every other node and applied, a third of an idle lab's CPU. It feeds the metadata-lag
        # metrics, which no lab reads; fencing is the heartbeats' (broker.session.timeout.ms).
        "metadata.max.idle.interval.ms": "5000",
    }
    if node.spec.is_broker:
        lines["inter.broker.listener.name"] = next(name for name, rl in node.listeners.items()
                                                   if rl.spec.inter_broker)
    if node.spec.rack:
        lines["broker.rack"] = node.spec.rack
    lines.update(scenario.broker_config)
    mechanisms = sorted({rl.spec.mechanism for rl in node.listeners.values() if rl.spec.mechanism})
    if mechanisms:
        lines["sasl.enabled.mechanisms"] = ",".join(mechanisms)
    for name, rl in node.listeners.items():
        prefix = f"listener.name.{name.lower()}."
        if rl.spec.certificate and certs is not None:
            files = certs[rl.spec.certificate]
            lines[prefix + "ssl.keystore.type"] = "PEM"
            lines[prefix + "ssl.keystore.location"] = str(files.keystore)
            if rl.spec.client_auth:  # mutual TLS: clients' certificates must come from this listener's own CA
                lines[prefix + "ssl.client.auth"] = rl.spec.client_auth
                lines[prefix + "ssl.truststore.type"] = "PEM"
                lines[prefix + "ssl.truststore.location"] = str(files.ca)
        if rl.spec.mechanism:
            mech = rl.spec.mechanism
            lines[prefix + "sasl.enabled.mechanisms"] = mech
            if mech == "PLAIN":
                users = " ".join(f'user_{u}="{p}"' for u, p in (passwords or {}).items())
                lines[prefix + "plain.sasl.jaas.config"] = (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
                )
            elif mech == "OAUTHBEARER":
                lines[prefix + "oauthbearer.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
                )
                # Without a handler Kafka validates unsigned tokens (its unsecured default); "jwks"
                # checks signatures, audience and issuer against the identity provider (KIP-768).
                if rl.spec.token_validator == "jwks":
                    lines[prefix + "oauthbearer.sasl.server.callback.handler.class"] = (
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
                    )
                    for key, value in (idp_settings or {}).items():
                        lines[prefix + key] = value
            else:
                lines[prefix + f"{mech.lower()}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def _resolves_in(hostport: str, names: set[str]) -> bool:
    """Whether a bootstrap's host is one of a view's names, or an address (which needs no name)."""
    host = hostport.rpartition(":")[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.lower() in names
    return True


class RunningLab(ABC):
    """A started scenario: where to bootstrap, which nameserver stands for which network.

    Backends subclass it and implement `_stop_processes`, `stop_node` and `start_node`.
    """

    backend = "base"

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.blackholes: dict[str, Blackhole] = {}
        self.impostors: dict[str, Impostor] = {}
        self.certs: dict[str, CertFiles] = {}
        # Made fresh at each start, so tests can search every output for a secret nobody typed.
        self.passwords: dict[str, str] = {user: f"{user}-pw-{secrets.token_hex(8)}" for user in scenario.users}
        self.dns: dict[str, DnsServer] = {}
        self.proxies: dict[str, SniProxy] = {name: SniProxy(name, spec) for name, spec in scenario.proxies.items()}
        self.forwards = Forwarders(scenario.forwards)
        self.idp: IdentityProvider | None = None
        # JVM system properties every broker gets (`-Dkey=value`), e.g. Kafka's OAuth URL allow list.
        self.jvm_properties: dict[str, str] = {}
        self.nodes: dict[int, RenderedNode] = {}
        self.cluster_id = ""
        self.started_at = time.time()
        # The lab's own ports, held from their choice (render) until stop(), against every other lab.
        self.port_claims = PortClaims()
        self._stopped = False

    def _start_network(self) -> None:
        for name, host in self.scenario.blackholes.items():
            self.blackholes[name] = Blackhole(host)
        for name, host in self.scenario.impostors.items():
            self.impostors[name] = Impostor(host)
        for proxy in self.proxies.values():  # ports first: advertised listeners name them
            proxy.reserve_ports()
        self.forwards.reserve_ports()
        self.dns = start_views(self.scenario.views)

    def _start_shadows(self) -> None:
        """Blackholes on another address at a rendered listener's own port (after `render`).

        A name with an A and an AAAA record is dialled at one port on both addresses: to make the
        AAAA one time out while the broker answers on IPv4, the blackhole needs the broker's port.
        """
        for name, (host, node_id, listener) in self.scenario.shadow_blackholes.items():
            self.blackholes[name] = Blackhole(host, self.nodes[node_id].listeners[listener].port)

    @property
    def forward_ports(self) -> dict[str, int]:
        """Each forward's port, for `render` (`{fw[NAME]}`)."""
        return dict(self.forwards.ports)

    def _start_forwards(self, directory: Path, lab_id: str) -> None:
        """Run the scenario's TCP forwards (one HAProxy), relaying to the rendered brokers."""
        real = {n.node_id: {name: f"{rl.bind_ip}:{rl.port}" for name, rl in n.listeners.items()}
                for n in self.nodes.values()}
        self.forwards.start(real, directory, lab_id)

    @property
    def proxy_ports(self) -> dict[str, int]:
        """Each SNI proxy's port, for `render` (`{px[NAME]}`)."""
        return {name: proxy.port for name, proxy in self.proxies.items()}

    def _start_proxies(self, directory: Path, lab_id: str) -> None:
        """Run the scenario's SNI proxies, routing to the rendered brokers (after the certificates)."""
        real = {n.node_id: {name: f"{rl.bind_ip}:{rl.port}" for name, rl in n.listeners.items()}
                for n in self.nodes.values()}
        for proxy in self.proxies.values():
            proxy.start(real, self.certs[proxy.spec.default_certificate].keystore, directory, lab_id)

    def _make_certs(self, directory: Path) -> None:
        for name, spec in self.scenario.certificates.items():
            self.certs[name] = make_cert(directory, name, spec)

    def _start_idp(self, directory: Path) -> None:
        """The scenario's OAuth identity provider, after the certificates (its HTTPS needs one)."""
        spec = self.scenario.idp
        if spec is None:
            return
        self.idp = IdentityProvider(spec, directory, self.certs[spec.certificate])
        self.jvm_properties.update(self.idp.jvm_properties())

    @property
    def idp_settings(self) -> dict[str, str]:
        """What the brokers' JWT-validating listeners are told of the identity provider (none without one)."""
        return self.idp.broker_settings() if self.idp is not None else {}

    @property
    def ca_file(self) -> str:
        """The lab CA's PEM file (for `-X ssl.ca.location=`); empty when the scenario has no TLS."""
        for files in self.certs.values():
            if files.ca.name == "lab-ca.pem":
                return str(files.ca)
        return ""

    @property
    def client_cert_file(self) -> str:
        """The lab's client certificate (PEM, signed by the lab CA), for listeners with ssl.client.auth.

        `-X ssl.certificate.location=` with `client_key_file` as `-X ssl.key.location=`; empty when the
        scenario makes none.
        """
        files = self.certs.get("client")
        return str(files.certificate) if files is not None else ""

    @property
    def client_key_file(self) -> str:
        """The private key of `client_cert_file` (PEM, unencrypted); empty when the scenario makes none."""
        files = self.certs.get("client")
        return str(files.key) if files is not None and files.key is not None else ""

    @property
    def client_keystore_file(self) -> str:
        """The client key and certificate chain in one PEM file, as a Java client's `ssl.keystore.type=PEM` reads it."""
        files = self.certs.get("client")
        return str(files.keystore) if files is not None else ""

    def listener(self, name: str, node_id: int | None = None) -> RenderedListener:
        """A node's rendered listener (first node by default)."""
        node = self.nodes[node_id if node_id is not None else self.scenario.nodes[0].node_id]
        try:
            return node.listeners[name]
        except KeyError:
            raise KeyError(f"no listener {name} (have {', '.join(node.listeners)})") from None

    def bootstrap(self, listener: str, node_id: int | None = None) -> str:
        """The `host:port` a client on the listener's intended network would bootstrap with."""
        return self.listener(listener, node_id).bootstrap

    def real_endpoint(self, listener: str, node_id: int | None = None) -> str:
        """The listener's actual bound `ip:port`, reachable whatever it advertises."""
        rl = self.listener(listener, node_id)
        return f"{rl.bind_ip}:{rl.port}"

    def bootstrap_all(self, listener: str) -> str:
        """Comma list of the bootstraps of every node that has the listener (some are on a few only)."""
        return ",".join(dict.fromkeys(  # behind a proxy every node's bootstrap is the same name
            self.bootstrap(listener, n) for n, node in self.nodes.items() if listener in node.listeners
        ))

    def nameserver(self, view: str) -> str:
        """`ip:port` of the DNS server standing for that network."""
        return self.dns[view].nameserver

    def _topic_listener(self) -> RenderedListener | None:
        """A PLAINTEXT client listener to make topics through and publish to (the inter-broker one last)."""
        plain = [rl for node in self.nodes.values() for rl in node.listeners.values()
                 if rl.spec.protocol == "PLAINTEXT"]
        plain.sort(key=lambda rl: rl.spec.inter_broker)
        return plain[0] if plain else None

    @property
    def replication(self) -> int:
        """The replication factor of the topics the lab makes: the brokers, up to 3."""
        return max(1, min(3, sum(1 for n in self.nodes.values() if n.spec.is_broker)))

    def _create_topics(self, timeout: float = 30.0) -> None:
        """Make the scenario's topics (after every broker serves clients), through a PLAINTEXT listener.

        confluent-kafka's admin client over the listener's real endpoint, as the tests make theirs
        (tests/conftest.py `new_topic`); the docker backend runs `kafka-topics.sh` in a container instead.
        """
        if not self.scenario.topics:
            return
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        listener = self._topic_listener()
        if listener is None:
            raise LabError(f"scenario {self.scenario.name} has topics but no PLAINTEXT listener to make them through")
        admin = AdminClient({"bootstrap.servers": f"{listener.bind_ip}:{listener.port}"})
        futures = admin.create_topics([NewTopic(name, partitions, self.replication)
                                       for name, partitions in self.scenario.topics.items()],
                                      request_timeout=timeout, operation_timeout=timeout)
        for name, future in futures.items():
            try:
                future.result(timeout=timeout)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise LabError(f"creating topic {name} failed: {exc}") from None

    def describe(self) -> list[str]:
        """Lines for `kprobe lab up`: what runs where and how to reach it."""
        lines = [f"scenario {self.scenario.name} ({self.backend}): {self.scenario.summary}",
                 f"cluster id {self.cluster_id}"]
        for node in self.nodes.values():
            if node.spec.role == "controller":
                lines.append(f"controller {node.node_id} on {node.spec.address}: CONTROLLER listener "
                             f"{node.controller_endpoint} advertises {node.controller_advertised} "
                             "(for --controllers, as bootstrap.controllers)")
                continue
            role = " (broker only; separate controller quorum)" if node.spec.role == "broker" else ""
            lines.append(f"broker {node.node_id} on {node.spec.address}{role}")
            for name, rl in node.listeners.items():
                lines.append(
                    f"  {name:<15} bootstrap {rl.bootstrap:<28} advertises {rl.advertised}"
                    + (f"  ({rl.spec.note})" if rl.spec.note else "")
                )
        for view, server in self.dns.items():
            names = ", ".join(sorted(self.scenario.views[view])) or "nothing"
            lines.append(f"DNS view {view:<9} nameserver {server.nameserver:<16} resolves {names}")
            lines.extend(self._view_usage(view, server.nameserver))
        listener = self._topic_listener()
        for name, partitions in self.scenario.topics.items():
            where = f"{self.bootstrap_all(listener.spec.name)}/{name}" if listener is not None else name
            lines.append(f"topic {name} ({partitions} partitions, replication factor {self.replication}), made at "
                         f"start: publish with --publish {where}")
        for name, hole in self.blackholes.items():
            lines.append(f"blackhole {name} at {hole.endpoint}")
        for name, imp in self.impostors.items():
            lines.append(f"impostor {name} (HTTP, not Kafka) at {imp.endpoint}")
        for proxy in self.proxies.values():
            lines.extend(proxy.describe())
        lines.extend(self.forwards.describe())
        lines.extend(f"try: {line}" for line in self.usage())
        if self.ca_file:
            lines.append(f"TLS: clients trust the lab CA with -X ssl.ca.location={self.ca_file}")
        if self.client_cert_file:
            lines.append(f"mutual TLS: clients present the lab's client certificate with -X ssl.certificate.location="
                         f"{self.client_cert_file} -X ssl.key.location={self.client_key_file}")
        other = self.certs.get("client-other-ca")
        if other is not None:
            lines.append(f"mutual TLS: a client certificate from another CA, which listeners refuse: "
                         f"{other.certificate} (key {other.key})")
        for user, password in self.passwords.items():
            lines.append(f"SASL user {user}, password {password} (made for this run)")
        if self.idp is not None:
            lines.append(f"OAuth token endpoint {self.idp.token_url} (trust it with -X https.ca.location="
                         f"{self.idp_ca_file}); JWKS {self.idp.jwks_url}")
            for client, secret in self.idp.client_secrets.items():
                lines.append(f"OAuth client {client}, secret {secret} (made for this run), tokens for audience "
                             f"{dict(self.idp.spec.clients)[client]}")
        return lines

    def view_commands(self, view: str) -> list[ViewCommand]:
        """The probes the scenario declares for this view (ListenerSpec.expect), with this run's ports and -n.

        One per listener and view, the wrong network's included: a reader sees each listener from each
        network, and what the lab shows where it cannot stage what a real deployment would.
        """
        nameserver = self.nameserver(view)
        commands = [ViewCommand(name, f"kprobe probe -b {rl.expect_bootstraps[view]} -n {nameserver}",
                                rl.spec.expect[view])
                    for node in self.nodes.values() for name, rl in node.listeners.items() if view in rl.spec.expect]
        return list(dict.fromkeys(commands))  # a listener on several nodes behind one bootstrap: said once

    def _view_usage(self, view: str, nameserver: str) -> list[str]:
        """How to probe as a host on the view's network would: the exact -n, with bootstraps that resolve there.

        A view stands for another network, so its names must be asked of its server: without -n the
        system resolver is asked about the lab's names, which resolve nowhere on this machine or, like
        the `cloud` scenario's ec2-...amazonaws.com, somewhere real on the internet (docs/lab.md). Where
        the scenario declares what each listener shows from this view, every such command is printed
        with its expectation; else one bootstrap that resolves there.
        """
        commands = self.view_commands(view)
        if commands:
            return [f"  as a host on the {view} network: -n {nameserver} (--nameserver); without -n, this machine's "
                    "resolver is asked instead. Each listener from here:",
                    *(line for command in commands for line in command.lines())]
        known = {name.lower() for name in self.scenario.views[view]}
        bootstrap = next((rl.bootstrap for node in self.nodes.values() for rl in node.listeners.values()
                          if _resolves_in(rl.bootstrap, known)), None)
        example = f": kprobe probe -b {bootstrap} -n {nameserver}" if bootstrap else ""
        return [f"  as a host on the {view} network: -n {nameserver} (--nameserver){example}; without -n, this "
                "machine's resolver is asked instead"]

    def usage(self) -> list[str]:
        """The scenario's usage lines with this run's ports, nameservers and advertised endpoints filled in."""
        values: dict[str, Any] = {
            "fw": self.forward_ports,
            "fwe": {name: self.forwards.endpoint(name) for name in self.forwards.ports},
            "ns": {view: server.nameserver for view, server in self.dns.items()},
            "adv": {n.node_id: {name: rl.advertised for name, rl in n.listeners.items()} for n in self.nodes.values()},
        }
        return [line.format(**values) for line in self.scenario.usage]

    @property
    def idp_ca_file(self) -> str:
        """The CA of the identity provider's HTTPS certificate (for `-X https.ca.location=`)."""
        spec = self.scenario.idp
        return str(self.certs[spec.certificate].ca) if spec is not None and spec.certificate in self.certs else ""

    def to_state(self) -> dict[str, Any]:
        """What `kprobe lab down` and other processes need to find this lab."""
        return {
            "scenario": self.scenario.name,
            "backend": self.backend,
            "cluster_id": self.cluster_id,
            "bootstraps": {
                name: self.bootstrap_all(name) for name in self.scenario.client_listeners
            },
            "nameservers": {view: s.nameserver for view, s in self.dns.items()},
        }

    @abstractmethod
    def stop_node(self, node_id: int) -> None:
        """Stop one broker (its endpoints then refuse connections)."""

    @abstractmethod
    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start a stopped broker again."""

    @abstractmethod
    def _stop_processes(self) -> None:
        """Stop every broker process the backend started."""

    def stop(self) -> None:
        """Stop everything; safe to call twice and after a failed start."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._stop_processes()
        finally:
            self.port_claims.release()  # first: a helper that fails to stop must not keep them held
            self.forwards.stop()
            for proxy in self.proxies.values():
                proxy.stop()
            for server in self.dns.values():
                server.stop()
            if self.idp is not None:
                self.idp.close()
            for hole in self.blackholes.values():
                hole.close()
            for imp in self.impostors.values():
                imp.close()

    def __enter__(self) -> RunningLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
