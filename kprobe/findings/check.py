"""Findings from listener settings alone, before anything is deployed (`kprobe check`).

Pure: the parsed settings (`kprobe.check.listeners.Deployment`) and what this machine's resolver answered
for the advertised names go in; a prediction per listener and vantage, and findings with fixes, come
out. No network, no clock.

How a listener is judged: first, for whom it is meant (its audiences). A Compose listener that is not
published, or that advertises a Compose name, serves the Compose network; a published one serves the
Docker host. An operator's internal listener serves the cluster, an external one the outside. A
server.properties says nothing of networks, so its listeners serve "here" (the machine kprobe runs on,
or the network --nameserver stands for), except a broker's inter-broker listener beside others (the
brokers' own network, as INTERNAL beside EXTERNAL) and a listener bound to loopback (the broker's own
machine). Then, for each vantage, what a client there meets, judged by that network's own names: a
Compose name works inside the Compose network whatever this machine's resolver says, so a correct
Compose file passes on the Docker host. A finding is raised only where a listener fails for a client it
is meant for; the prediction table shows the rest (FRED's localhost fails inside the Compose network,
and it is not meant for it).

The settings Kafka itself refuses at start (a wildcard advertised, a listener missing from the protocol
map, an advertised listener that is not bound, the inter-broker listener not advertised, a controller
listener advertised by a broker) are findings whatever the audience: the broker would not start.
Codes that mean what they mean in a live probe are reused (ADVERTISED_LOOPBACK, ADVERTISED_UNRESOLVABLE,
ADVERTISED_REFUSED, DUPLICATE_ENDPOINT), so a prediction and a probe read alike.

The internal topics are judged too (`kprobe.findings.check_topics`), since the settings that decide them
sit in the same files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from kprobe.check.listeners import (
    CLIENT_NETWORK_WORDS,
    WILDCARDS,
    Broker,
    ClientNetwork,
    Deployment,
    Listener,
    ListenerCheck,
    Reach,
)
from kprobe.findings.catalogue import ERROR, INFO, SEVERITY_ORDER, WARNING, finding
from kprobe.findings.check_topics import internal_topic_findings
from kprobe.findings.kubernetes import cluster_name
from kprobe.findings.shapes import describe_name, external_access
from kprobe.hostport import is_ip_literal, is_loopback_ip, is_loopback_name
from kprobe.models import DnsResult, Finding, Severity

_FAILS = ("unresolvable", "unreachable")


def names_to_resolve(deployments: Sequence[Deployment]) -> list[str]:
    """The advertised names whose fate depends on this machine's resolver, each once.

    Addresses, loopback names, wildcards, placeholders (a container's id, a load balancer's address
    decided at deploy time) never go to a resolver.
    """
    names = []
    for dep in deployments:
        for broker in dep.brokers:
            for lst in broker.listeners:
                host = lst.advertised.host if lst.advertised else ""
                if dep.platform == "kubernetes" and host.lower() in dep.internal_names:
                    continue  # the cluster's DNS answers those; from outside, the listener has no bootstrap anyway
                if (host and "<" not in host and not lst.deploy_time and host not in WILDCARDS
                        and not is_ip_literal(host) and not is_loopback_name(host)):
                    names.append(host)
    return list(dict.fromkeys(names))


def check_deployments(
    deployments: Sequence[Deployment], resolved: Mapping[str, DnsResult],
) -> tuple[list[ListenerCheck], list[Finding]]:
    """Every listener judged, and the findings of all deployments, errors first, in a stable order."""
    checks: list[ListenerCheck] = []
    findings: list[Finding] = []
    for dep in deployments:
        mine = [_check(dep, broker, lst, resolved) for broker in dep.brokers for lst in broker.listeners]
        checks.extend(mine)
        findings.extend(_static(dep))
        findings.extend(_duplicates(dep))
        for check in mine:
            findings.extend(_audience_findings(dep, check, mine))
        findings.extend(internal_topic_findings(dep))
    order = {id(f): i for i, f in enumerate(findings)}
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], order[id(f)]))
    return checks, findings


# -- predictions ------------------------------------------------------------------------------------------

def _check(dep: Deployment, broker: Broker, lst: Listener, resolved: Mapping[str, DnsResult]) -> ListenerCheck:
    reach = tuple(_reach(dep, broker, lst, v, resolved) for v in dep.client_networks) if lst.advertised else ()
    return ListenerCheck(source=dep.source, broker=broker.name, node_id=broker.node_id, listener=lst,
                         audiences=audiences(dep, broker, lst), reach=reach)


def audiences(dep: Deployment, broker: Broker, lst: Listener) -> tuple[ClientNetwork, ...]:
    """The vantages a listener is meant for (see the module's docstring); a controller's serves none."""
    if lst.controller or lst.advertised is None or lst.bind is None:
        return ()
    if dep.platform == "compose":
        out: list[ClientNetwork] = []
        names = dep.names_on(broker.networks)
        if not lst.published or lst.inter_broker or lst.advertised.host.lower() in names:
            out.append("compose-network")
        if lst.published:
            out.append("docker-host")
        return tuple(out)
    if dep.platform == "kubernetes":
        if lst.exposure in (None, "internal", "cluster-ip") or lst.inter_broker:
            return ("cluster",)
        return ("outside",)
    if _loopback(lst.bind.host):
        return ()  # the broker's own machine: only the loopback rules concern it
    clients = [x for x in broker.listeners if not x.controller and x.advertised is not None]
    if lst.inter_broker and len(clients) > 1:
        return ()  # the brokers' own network (INTERNAL beside EXTERNAL): nothing here says what resolves there
    return ("here",)


def _reach(dep: Deployment, broker: Broker, lst: Listener, vantage: ClientNetwork,
           resolved: Mapping[str, DnsResult]) -> Reach:
    if dep.platform == "compose":
        return _compose_reach(dep, broker, lst, vantage, resolved)
    if dep.platform == "kubernetes":
        return _cluster_reach(dep, lst, vantage, resolved)
    return _host_reach(lst, resolved)


def _loopback(host: str) -> bool:
    return is_loopback_name(host) or is_loopback_ip(host)


def _here(host: str, resolved: Mapping[str, DnsResult]) -> tuple[str, str]:
    """How this machine's resolver fares with a name: (`ok`/`loopback`/`fail`/`literal`, words)."""
    if is_ip_literal(host):
        return ("loopback" if is_loopback_ip(host) else "literal"), host
    if is_loopback_name(host):
        return "loopback", f"{host} is this machine"
    result = resolved.get(host)
    if result is None or result.status != "ok":
        why = (result.error or result.status) if result is not None else "not resolved"
        return "fail", f"{host} does not resolve from here ({why.removeprefix(host + ': ')})"
    addresses = ", ".join(result.addresses)
    if result.addresses and all(is_loopback_ip(a) for a in result.addresses):
        return "loopback", f"{host} resolves to this machine ({addresses})"
    return "ok", f"{host} resolves from here to {addresses}"


def _compose_reach(dep: Deployment, broker: Broker, lst: Listener, vantage: ClientNetwork,
                   resolved: Mapping[str, DnsResult]) -> Reach:
    assert lst.advertised is not None
    host, port = lst.advertised.host, lst.advertised.port
    names = dep.names_on(broker.networks)
    if vantage == "compose-network":
        if lst.bind is None:
            return Reach(vantage=vantage, status="no_bootstrap", bootstrap=None, why="the listener is not bound")
        if _loopback(lst.bind.host):
            return Reach(vantage=vantage, status="no_bootstrap", bootstrap=None,
                         why=f"bound to {lst.bind.host}, the container's own loopback")
        boot = f"{broker.name}:{lst.bind.port}"
        if host in WILDCARDS:
            return Reach(vantage=vantage, status="unreachable", bootstrap=boot, cause="wildcard",
                         why=f"{host} is no address to connect to")
        if _loopback(host):
            return Reach(vantage=vantage, status="unreachable", bootstrap=boot, cause="loopback",
                         why=f"{host} in a client's container is that container, not {broker.name}")
        if host.lower() in names:
            target = _broker_named(dep, host, broker)
            if target is not None and not any(x.bind and x.bind.port == port and not _loopback(x.bind.host)
                                              for x in target.listeners):
                return Reach(vantage=vantage, status="unreachable", bootstrap=boot, cause="refused",
                             why=f"{host} is service {target.name}, where nothing listens on port {port}")
            return Reach(vantage=vantage, status="works", bootstrap=boot,
                         why=f"{host} is a name the Compose network resolves")
        if broker.hostname and host.lower() == broker.hostname.lower():
            return Reach(vantage=vantage, status="unresolvable", bootstrap=boot, cause="internal-name",
                         why=f"{host} is the container's hostname:, which only the container itself resolves")
        return _by_resolver(vantage, boot, host, resolved, internal=False)
    # the Docker host, through published ports
    published = [p for p in lst.published]
    if lst.bind is None or not published:
        return Reach(vantage=vantage, status="no_bootstrap", bootstrap=None,
                     why="not published: no port of the Docker host leads to it")
    if _loopback(lst.bind.host):
        return Reach(vantage=vantage, status="no_bootstrap", bootstrap=None,
                     why=f"bound to {lst.bind.host} in the container: a published port cannot reach it")
    first = published[0]
    shown_ip = first.host_ip if first.host_ip not in ("", "0.0.0.0", "::", "127.0.0.1") else "localhost"
    boot = f"{shown_ip}:{first.host_port}" if first.host_port else f"{shown_ip}:<a random port>"
    if host in WILDCARDS:
        return Reach(vantage=vantage, status="unreachable", bootstrap=boot, cause="wildcard",
                     why=f"{host} is no address to connect to")
    kind, _ = _here(host, resolved)
    if kind == "loopback":
        for other in broker.listeners:
            for pub in other.published:
                if pub.host_port == port and pub.host_ip in ("", "0.0.0.0", "::", "127.0.0.1", "localhost"):
                    via = "" if other.name == lst.name else f" (listener {other.name})"
                    return Reach(vantage=vantage, status="works", bootstrap=boot,
                                 why=f"{host}:{port} is published to {broker.name}:{pub.container_port}{via}")
        ports = ", ".join(str(p.host_port) for p in published if p.host_port) or "a random port"
        return Reach(vantage=vantage, status="unreachable", bootstrap=boot, cause="port",
                     why=f"{host}:{port} is the Docker host, where no port {port} leads to {broker.name} "
                         f"(the listener is published on {ports})")
    internal = host.lower() in names or (broker.hostname or "").lower() == host.lower() or host.startswith("<")
    return _by_resolver(vantage, boot, host, resolved, internal=internal)


def _broker_named(dep: Deployment, host: str, default: Broker) -> Broker | None:
    """The broker a Compose name belongs to (None: a service that is no broker)."""
    for b in dep.brokers:
        if host.lower() in (n.lower() for n in b.own_names):
            return b
    return None if host.lower() not in (n.lower() for n in default.own_names) else default


def _by_resolver(vantage: ClientNetwork, boot: str | None, host: str, resolved: Mapping[str, DnsResult], *,
                 internal: bool) -> Reach:
    """A name judged by this machine's resolver (the Compose network's and the cluster's DNS forward to it too)."""
    if host.startswith("<"):
        return Reach(vantage=vantage, status="unresolvable", bootstrap=boot, cause="internal-name",
                     why=f"{host} is known only inside the container network")
    kind, words = _here(host, resolved)
    if kind == "fail":
        return Reach(vantage=vantage, status="unresolvable", bootstrap=boot,
                     cause="internal-name" if internal else "name",
                     why=words)
    if kind == "loopback":
        return Reach(vantage=vantage, status="unreachable", bootstrap=boot, cause="loopback", why=words)
    return Reach(vantage=vantage, status="resolves", bootstrap=boot, why=words)


def _host_reach(lst: Listener, resolved: Mapping[str, DnsResult]) -> Reach:
    """A server.properties listener from here."""
    assert lst.advertised is not None
    host, port = lst.advertised.host, lst.advertised.port
    if lst.bind is None:
        return Reach(vantage="here", status="no_bootstrap", bootstrap=None, why="the listener is not bound")
    bind_host = lst.bind.host
    boot: str | None = f"{host}:{lst.bind.port}" if bind_host in ("", *WILDCARDS) else f"{bind_host}:{lst.bind.port}"
    if bind_host in ("", *WILDCARDS) and (host in WILDCARDS or host.startswith("<")):
        boot = None
    if host in WILDCARDS:
        return Reach(vantage="here", status="unreachable", bootstrap=boot, cause="wildcard",
                     why=f"{host} is no address to connect to")
    if host.startswith("<"):
        return Reach(vantage="here", status="unknown", bootstrap=boot,
                     why="the broker advertises its machine's own name, which the file does not say")
    kind, words = _here(host, resolved)
    if kind == "loopback" and not _loopback(host):
        # A name this machine resolves to itself (a hosts entry, or kprobe running on the broker's machine): the
        # clients here reach it; other machines resolve the name their own way, which the file does not say.
        return Reach(vantage="here", status="resolves", bootstrap=boot, why=words + f"; port {port}")
    if kind == "loopback":
        if _loopback(bind_host):
            return Reach(vantage="here", status="works", bootstrap=boot,
                         why=f"{words}: right for clients on the broker's own machine, where it binds")
        return Reach(vantage="here", status="unreachable", bootstrap=boot, cause="loopback",
                     why=f"{host} is each client's own machine, unless the client runs on the broker's")
    if kind == "fail":
        return Reach(vantage="here", status="unresolvable", bootstrap=boot, cause="name", why=words)
    return Reach(vantage="here", status="resolves", bootstrap=boot, why=words + f"; port {port}")


def _cluster_reach(dep: Deployment, lst: Listener, vantage: ClientNetwork, resolved: Mapping[str, DnsResult]) -> Reach:
    """An operator's listener from inside the cluster or outside it."""
    assert lst.advertised is not None
    host = lst.advertised.host
    boot = dict(lst.bootstraps).get(vantage)
    # The operator's own names, or any `.svc` name (an advertisedHost override pointing inside the cluster).
    internal = host.lower() in dep.internal_names or cluster_name(host) is not None
    if vantage == "cluster":
        if lst.deploy_time:
            return Reach(vantage=vantage, status="unknown", bootstrap=boot,
                         why="the address is the platform's, decided when it deploys")
        if internal:
            return Reach(vantage=vantage, status="works", bootstrap=boot,
                         why=f"{host} is a name the cluster's DNS resolves")
        return _by_resolver(vantage, boot, host, resolved, internal=False)
    if boot is None:
        return Reach(vantage=vantage, status="no_bootstrap", bootstrap=None,
                     why="an internal listener: only the cluster reaches its services")
    if lst.deploy_time:
        return Reach(vantage=vantage, status="unknown", bootstrap=boot,
                     why="the address is the platform's, decided when it deploys: probe it then")
    return _by_resolver(vantage, boot, host, resolved, internal=internal)


# -- findings for the clients a listener is meant for ---------------------------------------------------------

def _audience_findings(dep: Deployment, check: ListenerCheck, siblings: Sequence[ListenerCheck]) -> list[Finding]:
    """Where a listener fails for a vantage it is meant for: one finding per cause."""
    out: list[Finding] = []
    lst = check.listener
    if lst.advertised is None:
        return out
    broker = next(b for b in dep.brokers if b.name == check.broker)
    seen: set[str] = set()
    for vantage in check.audiences:
        reach = check.reach_of(vantage)
        if reach is None or reach.status not in _FAILS or reach.cause in (None, "wildcard"):
            continue
        made = _audience_finding(dep, broker, check, reach, siblings)
        if made is not None and made.code not in seen:
            seen.add(made.code)
            out.append(made)
    return out


def _who(check: ListenerCheck) -> str:
    node = f" (node {check.node_id})" if check.node_id is not None else ""
    return f"Broker {check.broker}{node}, listener {check.listener.name}"


def _advertised_setting(dep: Deployment, broker: Broker) -> str:
    if dep.platform == "kubernetes":
        return "the listener's advertised address in the operator's resource"
    return broker.setting("advertised.listeners")


def _audience_finding(dep: Deployment, broker: Broker, check: ListenerCheck, reach: Reach,
                      siblings: Sequence[ListenerCheck]) -> Finding | None:
    lst = check.listener
    assert lst.advertised is not None
    endpoint = lst.advertised.text
    where = CLIENT_NETWORK_WORDS[reach.vantage]
    setting = _advertised_setting(dep, broker)
    head = f"{_who(check)} advertises {endpoint}"
    after = ("clients there bootstrap" + (f" at {reach.bootstrap}" if reach.bootstrap else "")
             + ", then fail on every request after the first metadata response")

    def make(code: str, severity: Severity, message: str, fix: str) -> Finding:
        return finding(code, severity, message, fix, node_id=check.node_id, endpoint=endpoint,
                       bootstrap=reach.bootstrap)

    if reach.cause == "loopback":
        return make("ADVERTISED_LOOPBACK", ERROR,
                    f"{head}, a loopback address, and is meant for clients {where}: {reach.why}, so {after}.",
                    _loopback_fix(dep, broker, lst, reach.vantage, setting))
    if reach.cause == "port":
        pubs = ", ".join(p.text for p in lst.published)
        return make("PUBLISHED_PORT_DIFFERS", ERROR,
                    f"{head} to clients on the Docker host, but the port published for it is {pubs}: {reach.why}. "
                    f"Clients on the host bootstrap through the published port, then dial port "
                    f"{lst.advertised.port} and fail.",
                    f"Advertise the published host port: in {setting}, "
                    f"{lst.name}://{lst.advertised.host}:{_first_host_port(lst)}; or publish "
                    f"\"{lst.advertised.port}:{lst.bind.port if lst.bind else lst.advertised.port}\" in the "
                    f"service's ports: so the two agree.")
    if reach.cause == "refused":
        return make("ADVERTISED_REFUSED", ERROR,
                    f"{head}, meant for clients {where}: {reach.why}, so {after}.",
                    f"Make the port in {setting} the port the listener binds in "
                    f"{broker.setting('listeners')} ({lst.bind.port if lst.bind else '?'}).")
    if reach.cause == "internal-name":
        others = [c for c in siblings if c.broker == check.broker and c.listener.name != lst.name
                  and reach.vantage in c.audiences and (r := c.reach_of(reach.vantage)) is not None
                  and r.status in ("works", "resolves")]
        severity: Severity = WARNING if others else ERROR
        alternative = (f" Clients {where} have listener {others[0].listener.name} "
                       f"(bootstrap {others[0].reach_of(reach.vantage).bootstrap}): the gap is for whoever "  # type: ignore[union-attr]
                       "bootstraps here." if others else "")
        platform = "the cluster" if dep.platform == "kubernetes" else "the Compose network"
        return make("ADVERTISED_INTERNAL_NAME", severity,
                    f"{head}, a name only {platform} resolves ({reach.why}), and the listener is meant for clients "
                    f"{where}: {after}.{alternative}",
                    _internal_fix(dep, broker, lst, reach.vantage, setting))
    if reach.cause == "name":
        return make("ADVERTISED_UNRESOLVABLE", ERROR,
                    f"{head} to clients {where}, but {reach.why}: {after}.",
                    f"Advertise a name clients {where} resolve in {setting} (or publish {lst.advertised.host} in "
                    "their DNS); an /etc/hosts entry only fixes one machine.")
    return None


def _first_host_port(lst: Listener) -> str:
    return next((str(p.host_port) for p in lst.published if p.host_port), "<the published port>")


def _loopback_fix(dep: Deployment, broker: Broker, lst: Listener, vantage: ClientNetwork, setting: str) -> str:
    assert lst.advertised is not None
    if dep.platform == "compose":
        return (f"Advertise the service's name to the Compose network: in {setting}, "
                f"{lst.name}://{broker.name}:{lst.bind.port if lst.bind else lst.advertised.port}; keep localhost only "
                "on a listener published for the Docker host (another listener with its own port).")
    return (f"Advertise a name or address clients reach in {setting} (not localhost), or bind the listener to "
            f"127.0.0.1 in {broker.setting('listeners')} if it is meant for the broker's own machine only.")


def _internal_fix(dep: Deployment, broker: Broker, lst: Listener, vantage: ClientNetwork, setting: str) -> str:
    assert lst.advertised is not None
    if dep.platform == "kubernetes":
        name = cluster_name(lst.advertised.host)
        what = f"{lst.advertised.host} is {describe_name(name)}. " if name is not None else ""
        return f"{what}For clients outside the cluster, {external_access(dep.operator, name)}."
    host_port = _first_host_port(lst)
    return (f"For clients on the Docker host, a listener of their own: advertise localhost:{host_port} for it in "
            f"{setting} (and publish it), and keep {lst.advertised.host} on a listener for the Compose network, as "
            "PLAINTEXT_HOST beside PLAINTEXT in Kafka's own Compose examples. Or leave this port unpublished if "
            "only containers use it.")


# -- what Kafka refuses at start, and one endpoint for two brokers ----------------------------------------------

def _static(dep: Deployment) -> list[Finding]:
    out: list[Finding] = []
    for broker in dep.brokers:
        who = f"Broker {broker.name}" + (f" (node {broker.node_id})" if broker.node_id is not None else "")
        for lst in broker.listeners:
            adv = lst.advertised
            if adv is not None and adv.host in WILDCARDS and not lst.controller:
                derived = (" (derived from listeners, since advertised.listeners is unset)"
                           if lst.advertised_from == "listeners" else "")
                out.append(finding(
                    "ADVERTISED_WILDCARD", ERROR,
                    f"{who} advertises {adv.text} for listener {lst.name}{derived}: 0.0.0.0 is where a broker binds, "
                    "not an address a client can dial. Kafka refuses to start (advertised.listeners cannot use the "
                    "nonroutable meta-address).",
                    f"Set {broker.setting('advertised.listeners')} to a name clients resolve, e.g. "
                    f"{lst.name}://{_own_name(broker)}:{adv.port}; keep 0.0.0.0 in {broker.setting('listeners')} only.",
                    node_id=broker.node_id, endpoint=adv.text))
            if lst.protocol is None:
                mapped = ", ".join(f"{n}:{p}" for n, p in broker.protocol_map or ())
                out.append(finding(
                    "LISTENER_NOT_IN_PROTOCOL_MAP", ERROR,
                    f"{who} has listener {lst.name}, which {broker.setting('listener.security.protocol.map')} does not "
                    f"name ({mapped or 'unset: only PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL are known'}). "
                    "Kafka refuses to start: no security protocol is defined for that listener.",
                    f"Add {lst.name}:PLAINTEXT (or SSL, SASL_PLAINTEXT, SASL_SSL) to "
                    f"{broker.setting('listener.security.protocol.map')}.",
                    node_id=broker.node_id, endpoint=adv.text if adv else None))
        undefined = [n for n in broker.advertised_names if n not in broker.listener_names]
        for name in undefined:
            adv_of = broker.listener(name)
            out.append(finding(
                "ADVERTISED_LISTENER_UNDEFINED", ERROR,
                f"{who} advertises listener {name}, which {broker.setting('listeners')} does not define "
                f"({', '.join(broker.listener_names) or 'none'}). Kafka refuses to start: advertised listeners must be "
                "listeners the broker binds.",
                f"Add {name}://<host>:<port> to {broker.setting('listeners')}, or remove it from "
                f"{broker.setting('advertised.listeners')}.",
                node_id=broker.node_id, endpoint=adv_of.advertised.text if adv_of and adv_of.advertised else None))
        if broker.is_broker and broker.inter_broker_name:
            advertised = [x.name for x in broker.listeners if x.advertised is not None]
            if broker.inter_broker_name not in advertised:
                named = ("security.inter.broker.protocol (PLAINTEXT by default), as inter.broker.listener.name is "
                         "unset" if broker.inter_broker_default else broker.setting("inter.broker.listener.name"))
                out.append(finding(
                    "INTER_BROKER_NOT_ADVERTISED", ERROR,
                    f"{who}'s inter-broker listener is {broker.inter_broker_name} ({named}), which it does not "
                    f"advertise ({', '.join(advertised) or 'nothing'}). Kafka refuses to start: brokers find each "
                    "other through the advertised endpoint of that listener.",
                    f"Set {broker.setting('inter.broker.listener.name')} to one of "
                    f"{', '.join(advertised) or 'the advertised listeners'}, or advertise {broker.inter_broker_name} "
                    f"in {broker.setting('advertised.listeners')}.",
                    node_id=broker.node_id))
        if broker.is_broker:
            for lst in broker.listeners:
                if lst.controller and lst.advertised is not None and lst.advertised_from == "advertised.listeners":
                    out.append(_controller_advertised(broker, lst, who))
    out.extend(_at_deploy(dep))
    return out


def _controller_advertised(broker: Broker, lst: Listener, who: str) -> Finding:
    """A controller listener in a broker's advertised.listeners. On a combined node from Kafka 3.9 on, it is the
    controller's own endpoint for the quorum (KIP-853; Kafka's own quickstart file advertises it), which brokers
    never hand to clients; Kafka 3.3 to 3.8 refuse to start such a node. A broker-only node does not bind its
    controller listener, so advertising it is refused whatever the version.
    """
    assert lst.advertised is not None
    setting = broker.setting("advertised.listeners")
    if "controller" in broker.roles:
        return finding(
            "CONTROLLER_LISTENER_ADVERTISED", INFO,
            f"{who}, a combined broker and controller, advertises its controller listener {lst.name} "
            f"({lst.advertised.text}) in {setting}: from Kafka 3.9 on that is the controller's own endpoint for the "
            "quorum (KIP-853), which brokers never hand to clients; Kafka 3.3 to 3.8 refuse to start with it.",
            f"Nothing on Kafka 3.9 and later. On 3.3 to 3.8, remove {lst.name} from {setting}.",
            node_id=broker.node_id, endpoint=lst.advertised.text)
    return finding(
        "CONTROLLER_LISTENER_ADVERTISED", ERROR,
        f"{who} advertises its controller listener {lst.name} ({lst.advertised.text}) in {setting}, which a node "
        "with the broker role alone does not bind: Kafka refuses to start, and a client sent there would meet a "
        "controller, which serves no Metadata or Produce.",
        f"Remove {lst.name} from {setting} (brokers find controllers through controller.quorum.voters or "
        "controller.quorum.bootstrap.servers).",
        node_id=broker.node_id, endpoint=lst.advertised.text)


def _at_deploy(dep: Deployment) -> list[Finding]:
    """ADVERTISED_AT_DEPLOY, once per listener: one setting of the resource, however many brokers it covers."""
    if dep.platform != "kubernetes":
        return []
    by_listener: dict[str, list[tuple[Broker, Listener]]] = defaultdict(list)
    for broker in dep.brokers:
        for lst in broker.listeners:
            if lst.deploy_time and lst.advertised is not None:
                by_listener[lst.name].append((broker, lst))
    out = []
    for name, owners in by_listener.items():
        one = len(owners) == 1
        broker, lst = owners[0]
        assert lst.advertised is not None
        who = (f"Broker {broker.name}" if one else f"Brokers {', '.join(b.name for b, _ in owners)}")
        out.append(finding(
            "ADVERTISED_AT_DEPLOY", INFO,
            f"{who}, listener {name} ({lst.exposure}): {'it advertises' if one else 'each advertises'} an address the "
            f"platform decides when it deploys ({lst.advertised.host}). No file says it, so kprobe cannot predict "
            "whether clients outside the cluster reach it.",
            "Once deployed, run kprobe check again with --probe, or kprobe probe against the listener's bootstrap "
            "address; or set the addresses in the resource yourself (Strimzi: configuration.brokers[].advertisedHost; "
            "the Bitnami chart: externalAccess.*.service.loadBalancerIPs, or domain with nodePorts).",
            node_id=broker.node_id if one else None, endpoint=lst.advertised.text if one else None))
    return out


def _own_name(broker: Broker) -> str:
    """A name to propose for a broker: its hostname where the file sets one, else its service's or file's name."""
    if broker.hostname and not broker.hostname.startswith("<"):
        return broker.hostname
    return broker.name


def _duplicates(dep: Deployment) -> list[Finding]:
    """DUPLICATE_ENDPOINT: one advertised host:port for two brokers (Kafka's own start-up check, across files)."""
    seen: dict[tuple[str, int], list[tuple[Broker, Listener]]] = defaultdict(list)
    for broker in dep.brokers:
        for lst in broker.listeners:
            adv = lst.advertised
            if adv is None or lst.deploy_time or not adv.host or adv.host.startswith("<") or adv.host in WILDCARDS:
                continue
            seen[(adv.host.lower(), adv.port)].append((broker, lst))
    out = []
    for (_, _), owners in seen.items():
        brokers = list(dict.fromkeys(b.name for b, _ in owners))
        if len(brokers) < 2:
            continue
        endpoint = owners[0][1].advertised.text  # type: ignore[union-attr]
        listed = ", ".join(f"{b.name} ({lst.name})" for b, lst in owners)
        loop = _loopback(owners[0][1].advertised.host)  # type: ignore[union-attr]
        out.append(finding(
            "DUPLICATE_ENDPOINT", ERROR,
            f"{len(brokers)} brokers advertise {endpoint}: {listed}. Only one of them answers there, so requests meant "
            "for the others reach the wrong broker (NOT_LEADER_OR_FOLLOWER); Kafka refuses a second broker with an "
            "endpoint already registered." + (" On one Docker host, localhost with one port is one endpoint."
                                               if loop else ""),
            "Give each broker its own advertised endpoint: its own name, or for localhost its own published port "
            "(localhost:29092, localhost:39092, ... as Kafka's cluster examples do).",
            endpoint=endpoint))
    return out


