"""A lab scenario from a cluster's server.properties files: each file's own listener settings on real brokers.

`kprobe fix` proposes an edit of these files; a proof of the edit is to run the cluster from the files
before and after, and probe both from every network its clients are on. This stages the files on loopback
the way kprobe.lab.from_config stages a Compose file, keeping what a client meets:
- each broker file is a node on its own 127.0.0.x address;
- each client listener binds the node's address on the file's own port where that is free (the lab's
  choice otherwise: `StagedCluster.ports` keeps the mapping), and advertises the file's host with the lab's
  port wherever the file advertises the listener's own port, or another listener's where it names that
  one's; a port no listener binds (a typo) is advertised as written, and nothing listens there;
- the file's controller listener, quorum and storage lines are the lab's own: the lab runs the quorum;
- the networks the clients are on are DNS views the test names: which host name resolves to which broker
  there (a Docker network resolving kafka0, the Docker host resolving only localhost, a VPC resolving its
  private names); a name given no broker resolves to an address where nothing listens (localhost in a
  container is the container itself). Every name a view gives a broker is also in the brokers' own hosts
  file, so the cluster's inter-broker traffic finds its nodes.
- an SSL listener presents the node's certificate, signed by the lab's CA (`StagedCluster.ca_file`, what
  clients trust). Which names it holds is the operator's choice, not in the files: a parameter (node id ->
  the names), by default the names the node's file advertises. The files' `ssl.*` lines (key stores,
  trust stores, passwords, client authentication) are not staged: the lab writes its own key stores.
Only what loopback can stage: PLAINTEXT and SSL client listeners, with a PLAINTEXT inter-broker listener
(the lab's brokers do not trust its CA), advertising a name or a loopback address; anything else (SASL,
an SSL inter-broker listener, an IP address outside loopback, the machine's own name, a wildcard) is a
LabError naming it.

`StagedCluster.restage` runs the cluster again from other files of the same brokers (a patched copy):
the same nodes on the same addresses, the same views, each listener on its file's port again, so a
listener the patch adds is reached where its file says. The brokers keep their certificates' names
unless the restage reissues them (the step a fix that advertises a new TLS name asks for).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kprobe.check.deployments import read_files
from kprobe.check.listeners import Broker, Deployment, Listener
from kprobe.errors import LabError
from kprobe.hostport import is_loopback_ip, is_loopback_name
from kprobe.lab.certs import CertSpec
from kprobe.lab.from_config import CONTAINER_LOOPBACK
from kprobe.lab.native import NativeLab
from kprobe.lab.scenarios import ListenerSpec, NodeSpec, Scenario

# Clear of the scenarios' addresses and of from_config's (190 on); a test staging several clusters at once
# gives each its own block.
FIRST_ADDRESS = 210

# A view: host name -> the node id it resolves to, or None for an address where nothing listens.
Views = Mapping[str, Mapping[str, "int | None"]]
# The names each node's certificate holds: node id -> names (subjectAltName entries, as kprobe.lab.certs writes them).
Certificates = Mapping[int, Sequence[str]]
# The client listener protocols the lab stages from a file.
STAGED_PROTOCOLS = ("PLAINTEXT", "SSL")


def read_cluster(paths: Sequence[str | Path]) -> Deployment:
    """The server.properties files as one cluster, read as `kprobe check` and `kprobe fix` read them."""
    deployments = read_files([str(p) for p in paths])
    if len(deployments) != 1 or deployments[0].kind != "properties":
        kinds = ", ".join(d.kind for d in deployments)
        raise LabError(f"the lab stages a cluster's server.properties files; these are {kinds}")
    return deployments[0]


def scenario_from_properties(dep: Deployment, views: Views, *, name: str = "from-properties",
                             addresses: Mapping[int, str] | None = None,
                             first_address: int = FIRST_ADDRESS,
                             certificates: Certificates | None = None) -> Scenario:
    """The cluster of server.properties files as a lab scenario (see the module's docstring).

    `addresses` pins each node id to its address (a restaged cluster keeps its nodes' addresses);
    without it, the brokers take `first_address` on, in the files' order. `certificates` gives the names
    a node's certificate holds (`certificate_names` for a node it leaves out).
    """
    if dep.kind != "properties":
        raise LabError(f"{dep.source}: the lab stages server.properties files here; this is a {dep.kind} file")
    brokers = [b for b in dep.brokers if b.is_broker]
    if not brokers:
        raise LabError(f"{dep.source}: no broker among the files (process.roles has no broker)")
    where: dict[int, str] = {}
    for i, broker in enumerate(brokers):
        if broker.node_id is None:
            raise LabError(f"{broker.source}: no node.id or broker.id: the lab names its nodes by id")
        if broker.node_id in where:
            raise LabError(f"{broker.source}: node id {broker.node_id} is another file's too")
        where[broker.node_id] = (addresses or {}).get(broker.node_id) or f"127.0.0.{first_address + i}"
    strangers = sorted(set(certificates or {}) - set(where))
    if strangers:
        raise LabError(f"{dep.source}: certificates for nodes {strangers}, which no file is (nodes {sorted(where)})")
    view_records: dict[str, dict[str, tuple[str, ...]]] = {}
    names: dict[int, list[str]] = {node_id: [] for node_id in where}
    for view, records in views.items():
        view_records[view] = {}
        for host, node_id in records.items():
            if node_id is None:
                view_records[view][host] = (CONTAINER_LOOPBACK,)
                continue
            if node_id not in where:
                raise LabError(f"view {view}: {host} resolves to node {node_id}, which no file is "
                               f"(nodes {sorted(where)})")
            view_records[view][host] = (where[node_id],)
            if not is_loopback_name(host):
                names[node_id].append(host)
    nodes = []
    certs: dict[str, CertSpec] = {}
    for broker in brokers:
        assert broker.node_id is not None
        node_id = broker.node_id
        specs = []
        for lst in broker.listeners:
            if lst.controller:
                continue  # the lab runs its own CONTROLLER listener and quorum
            _stageable(broker, lst)
            assert lst.bind is not None
            protocol = lst.protocol or "PLAINTEXT"
            cert = None
            if protocol == "SSL":
                cert = f"node{node_id}"
                held = (certificates or {}).get(node_id) or certificate_names(broker)
                certs[cert] = CertSpec(tuple(held))
            specs.append(ListenerSpec(lst.name, bind="{addr}", advertise=_advertise(broker, lst, node_id),
                                      port=lst.bind.port, inter_broker=lst.inter_broker, protocol=protocol,
                                      certificate=cert, note=f"from {broker.source}"))
            if lst.advertised is not None and not _is_loopback(lst.advertised.host):
                names[node_id].append(lst.advertised.host)
        if not any(s.inter_broker for s in specs):
            raise LabError(f"{broker.source}: no inter-broker listener the lab can stage "
                           f"(inter.broker.listener.name {broker.inter_broker_name})")
        nodes.append(NodeSpec(node_id=node_id, address=where[node_id],
                              hostnames=tuple(dict.fromkeys(names[node_id])), listeners=tuple(specs)))
    return Scenario(name=name, summary=f"the listener settings of {dep.source}", nodes=tuple(nodes),
                    views=view_records, certificates=certs)


def certificate_names(broker: Broker) -> tuple[str, ...]:
    """The names a broker's certificate holds unless told otherwise: every host its client listeners advertise.

    What an operator who issued the certificate for the file as it is would have put in it.
    """
    hosts = [lst.advertised.host for lst in broker.listeners if not lst.controller and lst.advertised is not None]
    return tuple(dict.fromkeys(h for h in hosts if h and not h.startswith("<")))


def _is_loopback(host: str) -> bool:
    return is_loopback_name(host) or is_loopback_ip(host)


def _stageable(broker: Broker, lst: Listener) -> None:
    """A LabError naming what loopback cannot stand for."""
    where = f"{broker.source}: listener {lst.name}"
    protocol = lst.protocol or "PLAINTEXT"
    if protocol not in STAGED_PROTOCOLS:
        raise LabError(f"{where} is {lst.protocol}: the lab stages PLAINTEXT and SSL listeners only")
    if lst.inter_broker and protocol != "PLAINTEXT":
        raise LabError(f"{where} is the inter-broker listener, and {protocol}: the lab's brokers talk to each other "
                       "in PLAINTEXT only (they do not trust the lab's CA)")
    if lst.bind is None:
        raise LabError(f"{where} is advertised but not in listeners (Kafka refuses that)")
    if lst.advertised is None:
        raise LabError(f"{where} is not advertised")
    if _is_loopback(lst.bind.host):
        raise LabError(f"{where} binds {lst.bind.host}: a client of another machine could not reach it, and the "
                       "lab's networks are its nodes' addresses")
    host = lst.advertised.host
    if host.startswith("<") or not host:
        raise LabError(f"{where} advertises the machine's own host name, which the lab cannot know")
    if host in ("0.0.0.0", "::"):
        raise LabError(f"{where} advertises the wildcard {host} (Kafka refuses that)")
    try:
        import ipaddress

        ip = ipaddress.ip_address(host)
    except ValueError:
        return
    if not ip.is_loopback:
        raise LabError(f"{where} advertises the address {host}, which loopback cannot stand for: advertise a name")


def _advertise(broker: Broker, lst: Listener, node_id: int) -> str:
    """The advertised template: the file's host, with the lab's port standing for the file's."""
    assert lst.advertised is not None and lst.bind is not None
    host, port = lst.advertised.host, lst.advertised.port
    if ":" in host:
        host = f"[{host}]"
    if port == lst.bind.port:
        return f"{host}:{{port}}"
    for other in broker.listeners:
        if other.bind is not None and other.bind.port == port and not other.controller:
            return f"{host}:{{pt[{node_id}][{other.name}]}}"
    return f"{host}:{port}"  # no listener of this broker binds it: nothing listens there


class StagedCluster:
    """A cluster of server.properties files running on the lab, and how to reach it from each view.

    `ports` maps each node's file ports to the lab's (node id -> {file port: lab port}); where the file's
    port was free on the node's address they are equal, and the brokers advertise exactly what the files say.
    `certificates` names what each node's certificate holds (node id -> names; by default the names its file
    advertises), `ca_file` is the CA clients of its SSL listeners trust.
    """

    def __init__(self, paths: Sequence[str | Path], views: Views, *, name: str = "from-properties",
                 first_address: int = FIRST_ADDRESS, certificates: Certificates | None = None) -> None:
        self.views = {view: dict(records) for view, records in views.items()}
        self.paths = [Path(p) for p in paths]
        self.deployment = read_cluster(self.paths)
        self.lab = NativeLab(scenario_from_properties(self.deployment, self.views, name=name,
                                                      first_address=first_address, certificates=certificates))
        self.certificates = self._held(certificates or {})

    def _held(self, given: Certificates) -> dict[int, tuple[str, ...]]:
        """The names each node's certificate holds in the staged cluster (nodes without an SSL listener: none)."""
        held = {}
        for broker in self.deployment.brokers:
            node_id = broker.node_id
            if node_id is None or not any(lst.protocol == "SSL" and not lst.controller for lst in broker.listeners):
                continue
            held[node_id] = tuple(given.get(node_id) or certificate_names(broker))
        return held

    def start(self) -> StagedCluster:
        """Start the brokers; a failed start stops what it started."""
        self.lab.start()
        return self

    def stop(self) -> None:
        """Stop every broker, DNS view and port the lab holds; safe to call twice."""
        self.lab.stop()

    def __enter__(self) -> StagedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def restage(self, paths: Sequence[str | Path], certificates: Certificates | None = None) -> None:
        """Run the same brokers from other files (a patched copy): stop them, take the files' listeners, start.

        The nodes keep their addresses and the views their names; the brokers' set must be the same. A
        fresh cluster rather than a restart on the old storage: a KRaft broker restarted at once is refused
        by the controller until its old registration's session expires, longer than a new cluster takes.
        Each certificate keeps its names, as an edit of the files leaves the operator's certificates as they
        are; `certificates` reissues those of the nodes it names (node id -> the names the new one holds).
        A node with no certificate before gets one naming what its new file advertises.
        """
        deployment = read_cluster(paths)
        old = {n.node_id: n.address for n in self.lab.scenario.nodes}
        new = {b.node_id for b in deployment.brokers if b.is_broker}
        if new != set(old):
            raise LabError(f"{deployment.source}: brokers {sorted(i for i in new if i is not None)} are not the "
                           f"staged cluster's ({sorted(old)})")
        held = {**self.certificates, **(certificates or {})}
        scenario = scenario_from_properties(deployment, self.views, name=self.lab.scenario.name, addresses=old,
                                            certificates={n: names for n, names in held.items() if n in old})
        self.lab.stop()
        self.lab = NativeLab(scenario).start()
        self.paths = [Path(p) for p in paths]
        self.deployment = deployment
        self.certificates = self._held(held)

    @property
    def ca_file(self) -> str:
        """The lab CA's PEM file, which clients of the SSL listeners trust (`-X ssl.ca.location=`); made at each
        start, so a restaged cluster has another. Empty when no listener is SSL.
        """
        return self.lab.ca_file

    @property
    def ports(self) -> dict[int, dict[int, int]]:
        """Node id -> {the file's port of a listener: the port it is bound on in the lab}."""
        out: dict[int, dict[int, int]] = {}
        for broker in self.deployment.brokers:
            if broker.node_id is None or broker.node_id not in self.lab.nodes:
                continue
            node = self.lab.nodes[broker.node_id]
            out[broker.node_id] = {lst.bind.port: node.listeners[lst.name].port for lst in broker.listeners
                                   if lst.bind is not None and lst.name in node.listeners}
        return out

    @property
    def moved(self) -> dict[int, dict[int, int]]:
        """The ports the lab could not keep as the files have them (node id -> {file port: lab port})."""
        return {n: {f: p for f, p in ports.items() if f != p} for n, ports in self.ports.items()
                if any(f != p for f, p in ports.items())}

    def node_of(self, view: str, host: str) -> int | None:
        """The node a view resolves a host name to (None: nowhere, or an address where nothing listens)."""
        return self.views.get(view, {}).get(host)

    def endpoint(self, view: str, hostport: str) -> str:
        """`host:port` as a client of that view types it from the files (`localhost:9092`, `SSL://kafka1:9093`,
        a protocol prefix kept), on the lab's port.
        """
        scheme, sep, rest = hostport.rpartition("://")
        host, _, port = rest.rpartition(":")
        node_id = self.node_of(view, host)
        if node_id is None:
            return hostport
        return f"{scheme}{sep}{host}:{self.ports.get(node_id, {}).get(int(port), int(port))}"

    def nameserver(self, view: str) -> str:
        """The `ip:port` of the DNS server standing for that view's network (for `--nameserver`)."""
        return self.lab.nameserver(view)

    def advertised(self, node_id: int) -> dict[str, str]:
        """What each client listener of a node advertises on the lab: listener name -> `host:port`."""
        return {name: rl.advertised for name, rl in self.lab.nodes[node_id].listeners.items()}

