"""A broker's listener settings as data, read from a configuration file before anything runs, and
what `kprobe check` makes of them.

`kprobe check` predicts the gap from the settings themselves: what each listener binds, what it
advertises, under which protocol, and from which networks a client reaches it. The readers
(`kprobe.check.deployments`) turn server.properties files, Compose files, a Strimzi `Kafka` resource
and Bitnami chart values into these records; the rules (`kprobe.findings.check`) judge them, and
the formats print them. Kept apart from both, below the rules, because the lab builds a scenario
from the same data (`kprobe.lab.from_config`), so a prediction and a real broker share one reading
of the file.

Why a model of our own rather than a dict of properties: the same listener is spelt four ways
(`advertised.listeners`, `KAFKA_ADVERTISED_LISTENERS`, `KAFKA_CFG_ADVERTISED_LISTENERS`, a Strimzi
`listeners[]` entry) and completed by four sets of defaults (Kafka's, the apache/kafka image's,
Confluent's, the operator's); the rules must see one thing, with where each value came from.
"""

from __future__ import annotations

import re
from typing import Literal

from kprobe.errors import UsageError
from kprobe.models import INTERNAL_DEFAULTS, Finding, Report
from kprobe.records import field, record

Kind = Literal["properties", "compose", "strimzi", "bitnami"]
Platform = Literal["host", "compose", "kubernetes"]
# The network a client stands on, for which a listener's reach is predicted (the "vantage" of a prediction in
# check's JSON; not the report's vantage in kprobe.models, the machine a probe ran on). `here` is this machine for a
# server.properties (its network is not in the file); `docker-host` is the machine running Compose,
# reaching containers through published ports.
ClientNetwork = Literal["compose-network", "docker-host", "cluster", "outside", "here"]
# A prediction for one listener from one client network:
#   works         kprobe knows the client reaches the broker (a Compose or cluster name, a published port)
#   resolves      the advertised name resolves from here; whether it connects is for --probe to see
#   unresolvable  the advertised name does not resolve there
#   unreachable   it resolves, and the connection goes elsewhere (localhost in a container, a port not published)
#   no_bootstrap  that vantage cannot reach the listener at all (not published, a cluster-internal service)
#   unknown       decided when deployed (a load balancer's address, a node port's node)
ReachStatus = Literal["works", "resolves", "unresolvable", "unreachable", "no_bootstrap", "unknown"]
Exposure = Literal["internal", "nodeport", "loadbalancer", "route", "ingress", "cluster-ip"]

CLIENT_NETWORKS: dict[Platform, tuple[ClientNetwork, ...]] = {
    "host": ("here",),
    "compose": ("compose-network", "docker-host"),
    "kubernetes": ("cluster", "outside"),
}
CLIENT_NETWORK_WORDS: dict[ClientNetwork, str] = {
    "compose-network": "inside the Compose network",
    "docker-host": "on the Docker host",
    "cluster": "inside the Kubernetes cluster",
    "outside": "outside the cluster",
    "here": "from here",
}
# Kafka's default listener.security.protocol.map: a listener named after a protocol needs no entry.
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WILDCARDS = ("0.0.0.0", "::", "[::]")
# A host Kafka fills in itself when a listener's host is empty: the machine's canonical name.
OWN_HOSTNAME = "<the broker's own host name>"

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[^\]]*\]|[^:/\[\]]*):(?P<port>-?[0-9]{1,9})\Z")


@record(kw_only=True)
class HostPort:
    """One `host:port` of a listener; `host` is empty where Kafka fills in the machine's name."""

    host: str
    port: int

    @property
    def text(self) -> str:
        """As Kafka prints it: brackets around an IPv6 literal."""
        host = self.host or ""
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{host}:{self.port}"


@record(kw_only=True)
class Publish:
    """A Compose `ports:` entry that reaches this listener: `host_ip:host_port` on the Docker host."""

    host_ip: str
    host_port: int
    container_port: int

    @property
    def text(self) -> str:
        """As `docker ps` shows it."""
        return f"{self.host_ip or '0.0.0.0'}:{self.host_port}->{self.container_port}"


@record(kw_only=True)
class Listener:
    """One listener of one broker, with where each of its values came from.

    `bind` is None for a name only `advertised.listeners` has (Kafka refuses that); `advertised` is
    None for a listener that is not advertised (a controller's, or one left out of
    `advertised.listeners`). `advertised_from` says whether the broker's own setting gave it or Kafka
    derived it from `listeners` (the setting unset). `exposure` is the Kubernetes service type of an
    operator's listener; `deploy_time` marks an advertised address the platform decides when it deploys
    (a load balancer's), which no reading of the file can know.
    """

    name: str
    protocol: str | None
    bind: HostPort | None
    advertised: HostPort | None
    advertised_from: Literal["advertised.listeners", "listeners", "operator"] = "advertised.listeners"
    inter_broker: bool = False
    controller: bool = False
    published: tuple[Publish, ...] = ()
    exposure: Exposure | None = None
    deploy_time: bool = False
    # How a client of this vantage reaches the listener first, where the platform says (the operator's
    # bootstrap service, a load balancer); None: the bind address, or the published port.
    bootstraps: tuple[tuple[ClientNetwork, str], ...] = ()


# The broker settings that decide whether __consumer_offsets and __transaction_state can be created and
# written: a replication factor above the cluster's brokers leaves the topic uncreatable, a min ISR above
# the replication factor refuses its writes. Their partition counts decide nothing of the kind.
INTERNAL_TOPIC_SETTINGS = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                           "transaction.state.log.min.isr")


@record(kw_only=True)
class InternalTopicSettings:
    """One broker's settings for the internal topics, as its configuration gives them.

    A broker creates a missing internal topic with its own settings when a client first asks it for a
    coordinator, so whether groups and transactions can work is written in each broker's file before
    anything runs. `values` are the settings the configuration sets (the file's, or the platform's own
    defaults where it has some: the apache/kafka image's server.properties, Bitnami's); a setting absent
    from them runs at Kafka's default. `unreadable` are settings given a value Kafka would not take (a
    template, an empty variable): nothing is predicted from them.
    """

    values: tuple[tuple[str, int], ...] = ()
    unreadable: tuple[str, ...] = ()

    def value(self, prop: str) -> int | None:
        """The value the configuration sets, or None where Kafka's default applies."""
        return dict(self.values).get(prop)

    def effective(self, prop: str) -> int:
        """What the broker runs with: the configured value, else Kafka's default."""
        given = self.value(prop)
        return INTERNAL_DEFAULTS[prop] if given is None else given


@record(kw_only=True)
class Broker:
    """One Kafka node as its settings describe it.

    `own_names` are the names the platform's network resolves to this node (a Compose service, its
    container name and aliases; a pod's name under its headless service); `hostname` is what the node
    calls itself, which Kafka advertises for a listener with an empty host. `networks` are the Compose
    networks it is on. The raw name lists (`advertised_names`, `listener_names`) keep what the settings
    said, so the rules can tell a listener that is advertised but not bound.
    """

    name: str
    source: str
    node_id: int | None = None
    roles: tuple[str, ...] = ("broker", "controller")
    listeners: tuple[Listener, ...] = ()
    own_names: tuple[str, ...] = ()
    hostname: str | None = None
    networks: tuple[str, ...] = ()
    listener_names: tuple[str, ...] = ()
    advertised_names: tuple[str, ...] = ()
    protocol_map: tuple[tuple[str, str], ...] | None = None
    inter_broker_name: str | None = None
    inter_broker_default: bool = False
    controller_names: tuple[str, ...] = ()
    # How the file spells a setting: "" for properties (advertised.listeners), "KAFKA_" or "KAFKA_CFG_" for a
    # container's environment (KAFKA_ADVERTISED_LISTENERS); an operator's listeners are its own resource's.
    settings_prefix: str = ""
    internal_topics: InternalTopicSettings = InternalTopicSettings()

    def setting(self, prop: str) -> str:
        """The name the user edits for a Kafka property, as this file spells it."""
        if not self.settings_prefix:
            return prop
        return self.settings_prefix + prop.upper().replace(".", "_")

    @property
    def is_broker(self) -> bool:
        """Whether it serves clients (process.roles has broker, or ZooKeeper mode)."""
        return "broker" in self.roles

    def listener(self, name: str) -> Listener | None:
        """The listener of that name, if any."""
        return next((lst for lst in self.listeners if lst.name == name), None)


@record(kw_only=True)
class Deployment:
    """What one file (or a set of server.properties files, one cluster) says about the brokers.

    `network_names` maps each network to the names it resolves: a Compose network's service and
    container names and aliases; the cluster's pod and service names. `secrets` are values the file
    holds under secret keys (a JAAS line, a password variable), kept only to scrub them from any text
    kprobe prints; they are never printed themselves. `notes` say what kprobe assumed.

    `broker_count` is how many brokers the cluster has where the file says it (a Compose file's Kafka
    services, an operator's replicas, several server.properties files, one that is a one-node KRaft
    cluster), None where it does not (one server.properties of a larger cluster): whether an internal
    topic's replication factor exceeds the brokers is predicted only when known. `settings_block` is where
    the file sets a broker setting that is no listener's (Strimzi's `spec.kafka.config`, the Bitnami
    chart's `overrideConfiguration`, `extraConfig` or `config`), so a fix is spelt as the file spells it;
    None where each broker's own settings are (server.properties, a container's environment:
    `Broker.setting`), or where the chart values use none of the keys.
    """

    source: str
    kind: Kind
    platform: Platform
    brokers: tuple[Broker, ...]
    network_names: tuple[tuple[str, tuple[str, ...]], ...] = ()
    operator: Literal["strimzi", "bitnami"] | None = None
    notes: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)
    broker_count: int | None = None
    settings_block: str | None = None

    @property
    def client_networks(self) -> tuple[ClientNetwork, ...]:
        """The client networks a prediction is made for, by platform."""
        return CLIENT_NETWORKS[self.platform]

    def names_on(self, networks: tuple[str, ...]) -> frozenset[str]:
        """Every name resolvable on any of these networks (lower case)."""
        return frozenset(n.lower() for net, names in self.network_names if net in networks for n in names)

    @property
    def internal_names(self) -> frozenset[str]:
        """Every name only the platform's own network resolves."""
        return frozenset(n.lower() for _, names in self.network_names for n in names)


@record(kw_only=True)
class Reach:
    """How a client at one vantage fares with one listener (see ReachStatus)."""

    vantage: ClientNetwork
    status: ReachStatus
    bootstrap: str | None
    why: str
    # What makes it fail, for the rules: loopback, port (nothing published there), wildcard, internal-name
    # (only the platform's network resolves it), name (resolves nowhere from here), refused (nothing bound).
    cause: Literal["loopback", "port", "wildcard", "internal-name", "name", "refused"] | None = None


@record(kw_only=True)
class ListenerCheck:
    """One listener of one broker, judged: for whom it is meant, and how each vantage fares."""

    source: str
    broker: str
    node_id: int | None
    listener: Listener
    audiences: tuple[ClientNetwork, ...]
    reach: tuple[Reach, ...]

    def reach_of(self, vantage: ClientNetwork) -> Reach | None:
        """The prediction for one vantage, if made."""
        return next((r for r in self.reach if r.vantage == vantage), None)


def parse_listeners(text: str, where: str) -> list[tuple[str, HostPort]]:
    """`NAME://host:port,...` as Kafka reads `listeners` and `advertised.listeners`, in order.

    An empty value is no listener; a malformed entry is bad input, said in one line with where it is.
    """
    out = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        match = _LISTENER.match(item)
        if not match:
            raise UsageError(f"{where}: bad listener {item[:120]!r}: give NAME://HOST:PORT (HOST may be empty)")
        host = match.group("host")
        out.append((match.group("name").upper(), HostPort(host=host.strip("[]") if host.startswith("[") else host,
                                                          port=int(match.group("port")))))
    return out


def parse_protocol_map(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """`NAME:PROTOCOL,...` (listener.security.protocol.map) as pairs; a malformed pair is bad input."""
    pairs = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise UsageError(f"{where}: bad listener.security.protocol.map entry {item[:120]!r}: give NAME:PROTOCOL")
        pairs.append((name.strip().upper(), protocol.strip().upper()))
    return tuple(pairs)


def protocol_of(name: str, protocol_map: tuple[tuple[str, str], ...] | None) -> str | None:
    """A listener's protocol: from the map, or Kafka's default map (a listener named after a protocol)."""
    mapping = dict(protocol_map) if protocol_map is not None else {p: p for p in PROTOCOLS}
    return mapping.get(name.upper())


def names_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of listener names (controller.listener.names), upper case."""
    return tuple(part.strip().upper() for part in text.split(",") if part.strip())


ObservedStatus = Literal["reachable", "unresolvable", "unreachable", "partial", "degraded", "unchecked",
                         "bootstrap_failed", "not_advertised"]


@record(kw_only=True)
class Observation:
    """What `kprobe check --probe` saw for one listener, beside what was predicted for this vantage.

    `agrees` is None where no comparison holds (nothing predicted, or the bootstrap did not answer);
    `advertised` is what the broker really advertised, which may differ from the file (the file is not
    what runs).
    """

    source: str
    broker: str
    listener: str
    vantage: ClientNetwork
    bootstrap: str
    predicted: ReachStatus
    observed: ObservedStatus
    advertised: str | None
    agrees: bool | None
    detail: str


@record(kw_only=True)
class CheckReport:
    """One `kprobe check`: the files, each listener judged, the findings, and with --probe what was seen.

    `probe` is the whole `kprobe.report/v1` report of the probe run (a `kprobe.models.Report`), kept as
    that type's instance so every format can embed it as `kprobe probe` would print it.
    """

    id: str
    started_at: str
    finished_at: str
    vantage_name: str
    hostname: str
    resolver_kind: Literal["system", "nameserver"]
    nameservers: tuple[str, ...]
    files: tuple[str, ...]
    deployments: tuple[Deployment, ...]
    checks: tuple[ListenerCheck, ...]
    findings: tuple[Finding, ...]
    observations: tuple[Observation, ...] | None = None
    probe: Report | None = None

    @property
    def status(self) -> Literal["ok", "gap", "failed"]:
        """gap: an error finding or an observation that contradicts a working prediction; failed: --probe, and
        no bootstrap answered.
        """
        if self.probe is not None and self.observations is not None and self.observations and all(
                o.observed == "bootstrap_failed" for o in self.observations):
            return "failed"
        if any(f.severity == "error" for f in self.findings):
            return "gap"
        if self.observations and any(o.agrees is False for o in self.observations):
            return "gap"
        return "ok"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret value the files hold, to scrub from output (never printed)."""
        return tuple(s for d in self.deployments for s in d.secrets)
