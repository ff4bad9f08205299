"""The listener lines a probe's fix proposes, under the rules `kprobe check` follows: no network is broken.

An advertised endpoint that fails from here usually works for someone else. `kafka0:29092` is what the
clients inside a Docker network dial, often the inter-broker listener too; a VPC-private name is what the
instances in the VPC resolve. Replacing it with the address that works here would move the failure to
them. So where the advertised host is not the address this vantage reached the broker at, the fix leads
with a listener of this network's own (its three lines, its published port, the bootstrap to use after),
and offers the replacement second, under the condition that keeps it harmless. Where the advertised host
is that very address and only the port differs (a typo), the replacement breaks no one and comes first.

The listener is named from the bootstrap broker's own settings, read on the identity request
(`BootstrapResult.listener_settings`): a Metadata answer lists every broker's endpoint of the listener the
request came in on, so the bootstrap's listener is the listener of every endpoint it advertises.
"""

from __future__ import annotations

from kprobe.hostport import address_class, format_hostport, is_ip_literal, is_loopback_ip, is_loopback_name
from kprobe.models import BootstrapResult
from kprobe.records import record

NEW_LISTENER = "EXTERNAL"
# Where each kind of platform publishes a listener's port: without it, the new listener is bound and unreachable.
PUBLISH = "publish its port (ports: in Compose, a Service in Kubernetes) if the broker runs in a container"


@record(kw_only=True)
class ReachedListener:
    """The listener a bootstrap connection reached, as the broker's own settings name it.

    `inter_broker`: whether it is the inter-broker listener (None: the settings do not say). `taken`: every
    listener name the broker's settings use, which a new listener must not take. `others`: the broker's
    other advertised client listeners, as `NAME://host:port`.
    """

    name: str | None
    inter_broker: bool | None
    taken: frozenset[str]
    others: tuple[str, ...]


def _entries(text: str) -> list[tuple[str, str, int]]:
    """`NAME://host:port,...` as (NAME, host, port); an entry Kafka would not accept is left out."""
    out = []
    for item in text.split(","):
        name, sep, rest = item.strip().partition("://")
        host, colon, port = rest.rpartition(":")
        if sep and colon and name and port.lstrip("-").isdigit():
            out.append((name.upper(), host.strip("[]"), int(port)))
    return out


def _names(text: str | None, pairs: bool = False) -> set[str]:
    """Listener names of a comma-separated list (`NAME` or, with `pairs`, `NAME:PROTOCOL`)."""
    items = (part.strip() for part in (text or "").split(","))
    return {(item.partition(":")[0] if pairs else item).strip().upper() for item in items if item}


def reached_listener(bootstrap: BootstrapResult) -> ReachedListener | None:
    """Which listener `bootstrap` reached, from its broker's settings; None where the report has none."""
    settings = dict(bootstrap.listener_settings)
    own = next((br for br in bootstrap.brokers if br.node_id == bootstrap.node_id), None)
    if not settings or own is None:
        return None
    advertised = _entries(settings.get("advertised.listeners") or settings.get("listeners") or "")
    exact = [n for n, h, p in advertised if h.lower() == own.host.lower() and p == own.port]
    by_port = [n for n, _, p in advertised if p == own.port]
    found = exact or by_port
    name = found[0] if len(set(found)) == 1 else None
    inter = (settings.get("inter.broker.listener.name") or settings.get("security.inter.broker.protocol") or "").upper()
    controllers = _names(settings.get("controller.listener.names"))
    taken = ({n for n, _, _ in advertised} | {n for n, _, _ in _entries(settings.get("listeners") or "")}
             | _names(settings.get("listener.security.protocol.map"), pairs=True) | controllers | ({inter} - {""}))
    # The broker's other client listeners: not the inter-broker one, whose clients are the brokers themselves.
    others = tuple(f"{n}://{format_hostport(h, p)}" for n, h, p in advertised
                   if n not in (name, inter) and n not in controllers)
    return ReachedListener(name=name, inter_broker=(name == inter) if name and inter else None,
                           taken=frozenset(taken), others=others)


def new_listener_name(reached: ReachedListener | None) -> str:
    """EXTERNAL, or the first EXTERNAL_N the broker's settings do not use."""
    taken = reached.taken if reached is not None else frozenset()
    n = 2
    name = NEW_LISTENER
    while name in taken:
        name, n = f"{NEW_LISTENER}_{n}", n + 1
    return name


def other_network(host: str) -> str:
    """Whom an advertised host serves, when it is not the address this vantage reached the broker at."""
    name = host.lower().rstrip(".")
    if is_loopback_name(name) or is_loopback_ip(name):
        return "a loopback address, which serves only clients on the broker's own machine"
    if is_ip_literal(name):
        if address_class(name) in ("private", "cgnat", "link-local"):
            return "a private address, which serves the clients inside its own network"
        return "an address other than the one you reached the broker at, which may serve another network's clients"
    if name.endswith((".svc", ".svc.cluster.local", ".pod.cluster.local")):
        return "a Kubernetes cluster-internal name, which serves the clients inside the cluster"
    if name.endswith((".compute.internal", ".ec2.internal", ".internal", ".internal.cloudapp.net")):
        return "a cloud provider's private name, which serves the clients inside its VPC or virtual network"
    if "." not in name:
        return ("a single-label name like a Docker or Compose service's, which serves the clients inside that "
                "container network")
    return "a name other than the one you reached the broker at, which may serve another network's clients"


def listener_words(reached: ReachedListener | None, hostport: str) -> str:
    """`listener NAME` where the settings name it, else `the listener that advertises HOST:PORT`."""
    if reached is not None and reached.name:
        return f"listener {reached.name}"
    return f"the listener that advertises {hostport}"


def add_listener(name: str, host: str, protocol: str) -> str:
    """A new listener's three lines, its published port and the bootstrap to use after (`host` as a URL has it)."""
    port = "<free port>"
    return (f"`{name}://0.0.0.0:{port}` in listeners, `{name}://{host}:{port}` in advertised.listeners and "
            f"`{name}:{protocol}` in listener.security.protocol.map; {PUBLISH}; then bootstrap with {host}:{port}")


def keep_and_add(*, node_id: int, advertised: str, advertised_host: str, source: str, protocol: str,
                 reached: ReachedListener | None) -> str:
    """The fix where the advertised host serves another network: a listener of this one first, replacing second."""
    host = source.rpartition(":")[0]
    listener = listener_words(reached, advertised)
    name = new_listener_name(reached)
    who = f"Its {listener}" if reached is not None and reached.name else "It"
    head = (f"From here broker {node_id} answers at {source} (your bootstrap, identified as node {node_id}). "
            f"{who} advertises {advertised}, {other_network(advertised_host)}")
    if reached is not None and reached.name and reached.inter_broker:
        head += f"; {reached.name} is also the inter-broker listener"
    text = (f"{head}. Keep it for them, and add a listener for this network: {add_listener(name, host, protocol)}.")
    if reached is not None and reached.others:
        which = "it serves" if len(reached.others) == 1 else "one of those serves"
        text += (f" The broker also advertises {', '.join(reached.others[:3])}: if {which} this network, bootstrap "
                 "there and change nothing.")
    if reached is not None and reached.name and reached.inter_broker:
        return (f"{text} Do not replace {advertised} with {source}: the other brokers dial {reached.name}, the "
                "inter-broker listener, from their own network.")
    if reached is not None and reached.name and reached.inter_broker is False:
        condition = f"only if no other network's clients use {reached.name} ({advertised})"
    else:
        which = reached.name if reached is not None and reached.name else "the listener that advertises it"
        condition = f"only if no other network's clients use {advertised} and {which} is not the inter-broker listener"
    return f"{text} Or, {condition}, replace {advertised} with {source} in advertised.listeners."


def replace_port(*, node_id: int, advertised: str, source: str, reached: ReachedListener | None) -> str:
    """The fix where the broker advertises the address this vantage reached it at, with another port: a typo."""
    listener = listener_words(reached, advertised)
    return (f"From here broker {node_id} answers at {source} (your bootstrap, identified as node {node_id}), the "
            f"address {listener} advertises with another port: in advertised.listeners, replace {advertised} with "
            f"{source}. The same host for every client, so no network loses it; if {source} is a port published or "
            "forwarded to the broker, keep the port it binds in listeners.")
