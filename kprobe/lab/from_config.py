"""A lab scenario from a parsed Compose file: the file's own listener settings on real brokers.

`kprobe check` predicts what each network meets; this builds the same set-up on loopback so a test
can observe it with `kprobe probe` and compare, automatically, without Docker. The mapping keeps what
a client meets and moves only what loopback needs moved:
- each broker service is a node on its own 127.0.0.x address, its Compose names (service, container
  name, aliases, and a made-up container id) in its JVM's hosts file;
- each listener binds the node's address on a port the lab chooses, and advertises the file's host with
  the lab's port wherever the file advertises the listener's own port (`kafka0:29092` becomes
  `kafka0:<BOB's port>`), or another listener's port where the file names that one's;
- each published port is a forward on 127.0.0.1 (the Docker host's loopback, where `docker run -p`
  listens), preferring the file's host port, to the listener's real endpoint; a loopback host advertised
  with a published port advertises that forward's port;
- two DNS views stand for the two networks: `compose-network` resolves the Compose names to the nodes and
  `localhost` to an address where nothing listens (localhost in a client's container is that container);
  `docker-host` resolves `localhost` only, as the Docker host resolves no Compose name.
Only PLAINTEXT listeners bound beyond loopback are staged; anything else is a LabError naming it.
"""

from __future__ import annotations

import hashlib

from kprobe.check.listeners import Broker, Deployment, Listener
from kprobe.errors import LabError
from kprobe.hostport import is_loopback_ip, is_loopback_name
from kprobe.lab.forwarder import ForwardSpec
from kprobe.lab.scenarios import ListenerSpec, NodeSpec, Scenario

# Where `localhost` goes for a client in another container: an address of loopback nothing listens on.
CONTAINER_LOOPBACK = "127.0.0.254"
FIRST_ADDRESS = 190  # clear of the scenarios' 127.0.0.11-142


def fake_container_id(service: str) -> str:
    """A 12-hex-digit name standing for the container id Docker would make up for this service."""
    return hashlib.sha256(service.encode()).hexdigest()[:12]


def forward_name(node_id: int, host_port: int) -> str:
    """The forward standing for one published port."""
    return f"pub-{node_id}-{host_port}"


def scenario_from(dep: Deployment, *, name: str = "from-config", first_address: int = FIRST_ADDRESS) -> Scenario:
    """The Compose deployment as a lab scenario (see the module's docstring)."""
    if dep.platform != "compose":
        raise LabError(f"{dep.source}: the lab stages Compose files; this is a {dep.kind} file")
    nodes = []
    forwards: dict[str, ForwardSpec] = {}
    compose_view: dict[str, tuple[str, ...]] = {"localhost": (CONTAINER_LOOPBACK,)}
    for i, broker in enumerate(dep.brokers):
        if broker.node_id is None:
            raise LabError(f"{dep.source}: broker {broker.name} has no node id")
        node_id = broker.node_id
        address = f"127.0.0.{first_address + i}"
        names = [n for n in broker.own_names if not n.startswith("<")] + [fake_container_id(broker.name)]
        for n in names:
            compose_view[n] = (address,)
        specs = []
        for lst in broker.listeners:
            if lst.controller:
                continue  # the lab runs its own CONTROLLER listener
            _stageable(dep, broker.name, lst)
            specs.append(ListenerSpec(lst.name, bind="{addr}", advertise=_advertise(broker, lst, node_id),
                                      inter_broker=lst.inter_broker, note=f"from {dep.source}"))
            for pub in lst.published:
                if pub.host_port:
                    forwards[forward_name(node_id, pub.host_port)] = ForwardSpec(
                        address="127.0.0.1", targets=(f"{{ep[{node_id}][{lst.name}]}}",), port=pub.host_port,
                        note=f"published {pub.text}")
        if not any(s.inter_broker for s in specs):
            raise LabError(f"{dep.source}: broker {broker.name} has no inter-broker listener the lab can stage")
        nodes.append(NodeSpec(node_id=node_id, address=address, hostnames=tuple(dict.fromkeys(names)),
                              listeners=tuple(specs)))
    return Scenario(
        name=name, summary=f"the listener settings of {dep.source}", nodes=tuple(nodes),
        views={"compose-network": compose_view, "docker-host": {"localhost": ("127.0.0.1",)}},
        forwards=forwards)


def _stageable(dep: Deployment, broker: str, lst: Listener) -> None:
    if (lst.protocol or "PLAINTEXT") != "PLAINTEXT":
        raise LabError(f"{dep.source}: {broker} listener {lst.name} is {lst.protocol}: the lab stages PLAINTEXT only")
    if lst.bind is None or lst.advertised is None:
        raise LabError(f"{dep.source}: {broker} listener {lst.name} is not both bound and advertised")
    if is_loopback_name(lst.bind.host) or is_loopback_ip(lst.bind.host):
        raise LabError(f"{dep.source}: {broker} listener {lst.name} binds loopback in its container")


def _advertise(broker: Broker, lst: Listener, node_id: int) -> str:
    """The advertised template: the file's host, with the lab's port standing for the file's."""
    assert lst.advertised is not None and lst.bind is not None
    host, port = lst.advertised.host, lst.advertised.port
    if host.startswith("<container id"):
        host = fake_container_id(broker.name)
    if is_loopback_name(host) or is_loopback_ip(host):
        for other in broker.listeners:
            if any(p.host_port == port for p in other.published):
                return f"{host}:{{fw[{forward_name(node_id, port)}]}}"
        return f"{host}:{port}"  # nothing published there: nothing listens there on the host either
    if port == lst.bind.port:
        return f"{host}:{{port}}"
    for other in broker.listeners:
        if other.bind is not None and other.bind.port == port and not other.controller:
            return f"{host}:{{pt[{node_id}][{other.name}]}}"
    return f"{host}:{port}"
