"""The change that closes the reported gaps, decided from the reports and the files alone (no network).

The rules, in order:
- Each report is matched to the listener its bootstrap reached: the endpoints it saw against each
  listener's advertised `host:port` per node id. A report matching no listener of any file is of
  another cluster: bad input.
- For every broker whose endpoint on that listener a vantage cannot use, the address that works
  there today is a bootstrap of that report that answered as that node, or the `--connect-to`/
  `--resolve` mapping the report was probed with. None: the gap stays open, said with why (the
  broker down, a firewall: no configuration closes it).
- The listener's advertised address is replaced when the new address serves every vantage that uses
  the listener (a vantage working today keeps working only if it reaches the new address too);
  otherwise a listener is added for the network that needs it, named after it, on a port no file
  binds, bound on 0.0.0.0, with the bootstrap's protocol. The inter-broker listener is only replaced
  with an address the brokers themselves reach (never a loopback name, in Compose a Compose name).
- Controller listeners, `inter.broker.listener.name` and brokers that work from every vantage are
  never touched.
- An operator's resource (Strimzi, Bitnami) follows kprobe.fix.kubernetes: only an external listener's
  address is replaced, and a listener is added to the resource, one for all its brokers.
"""

from __future__ import annotations

from collections.abc import Sequence

from kprobe.check.listeners import OWN_HOSTNAME, Broker, ClientNetwork, Deployment, Listener
from kprobe.errors import UsageError
from kprobe.fix import kubernetes
from kprobe.fix.model import Gap, ListenerEdit, Plan, Step, Unresolved, Use
from kprobe.hostport import format_hostport, is_loopback_ip, is_loopback_name
from kprobe.models import BootstrapResult, EndpointResult, Report, is_usable

# The name of a listener added for a network, by the network the vantage stands on.
_NEW_NAMES: dict[ClientNetwork, str] = {"docker-host": "HOST", "here": "EXTERNAL", "outside": "EXTERNAL",
                                        "compose-network": "DOCKER", "cluster": "INTERNAL"}


def plan(reports: Sequence[tuple[str, Report]], deployments: Sequence[Deployment], *,
         port: int | None = None) -> Plan:
    """The change, from the reports (source, report) and the files' deployments."""
    deployments = [kubernetes.localize(d, reports) for d in deployments]
    uses = [_use(source, report, deployments) for source, report in reports]
    by_source = {d.source: d for d in deployments}
    gaps: list[Gap] = []
    unresolved: list[Unresolved] = []
    # (deployment, listener, node id) -> [(use, gap or None)]: every vantage that uses that broker's listener.
    users: dict[tuple[str, str, int], list[tuple[Use, Gap | None]]] = {}
    for use in uses:
        dep = by_source[use.deployment]
        known = {b.node_id for b in dep.brokers if b.node_id is not None}
        for seen in use.report.endpoints:
            if seen.endpoint.node_id not in known:
                unresolved.append(Unresolved(
                    vantage=use.vantage, node_id=seen.endpoint.node_id, endpoint=seen.endpoint.hostport,
                    why=f"broker {seen.endpoint.node_id} is advertised to this vantage but is in none of the files"))
        for broker in dep.brokers:
            lst = broker.listener(use.listener)
            if broker.node_id is None or lst is None or lst.advertised is None:
                continue
            row = _row(use.report, broker.node_id, lst)
            if row is None:
                continue
            key = (dep.source, lst.name, broker.node_id)
            if is_usable(row, use.report.findings) and row.endpoint.remap is None:
                users.setdefault(key, []).append((use, None))
                continue
            working = _working(use.report, broker.node_id, row)
            gap = Gap(vantage=use.vantage, node_id=broker.node_id, endpoint=row.endpoint.hostport, listener=lst.name,
                      working=working)
            gaps.append(gap)
            why = _why_open(row, working)
            if why is not None:
                unresolved.append(Unresolved(vantage=use.vantage, node_id=broker.node_id,
                                             endpoint=row.endpoint.hostport, why=why))
                continue
            users.setdefault(key, []).append((use, gap))
    edits: list[ListenerEdit] = []
    taken = _bound_ports(deployments)
    if port is not None and port in taken:
        raise UsageError(f"--port {port}: the files already bind or publish it; give a free port")
    names: dict[tuple[str, str, tuple[str, ...]], str] = {}
    next_port = [port]
    added = kubernetes.Additions(taken, port, gaps)
    for (source, name, node_id), entries in users.items():
        if all(gap is None for _, gap in entries):
            continue  # this broker works from every vantage on this listener: its lines stay
        dep = by_source[source]
        broker = next(b for b in dep.brokers if b.node_id == node_id)
        lst = broker.listener(name)
        assert lst is not None and lst.advertised is not None
        replacement = _replacement(dep, lst, node_id, entries)
        if replacement is not None:
            vantages = tuple(u.vantage for u, _ in entries)
            edits.append(ListenerEdit(source=source, broker=broker.name, node_id=node_id, listener=name,
                                      action="replace", old=lst.advertised.text, new=replacement,
                                      protocol=lst.protocol or "PLAINTEXT", vantages=vantages, via=replacement))
            continue
        if dep.platform == "kubernetes":
            more, still = added.add(dep, broker, lst, entries)
            edits += more
            unresolved += still
            continue
        # A listener per network that needs one: the gapped vantages grouped by the address that works there.
        groups: dict[str, list[Use]] = {}
        for use, open_gap in entries:
            if open_gap is not None and open_gap.working is not None:
                groups.setdefault(_host(open_gap.working).lower(), []).append(use)
        for group in groups.values():
            vantages = tuple(u.vantage for u in group)
            label = (source, name, vantages)
            if label not in names:
                names[label] = _new_name(dep, group[0].network, set(names.values()))
            chosen = _free_port(lst, taken, next_port)
            taken.add(chosen)
            working = next(g.working for u, g in entries if g is not None and u.vantage == vantages[0])
            assert working is not None
            host = _host(working)
            compose = dep.platform == "compose"
            edits.append(ListenerEdit(
                source=source, broker=broker.name, node_id=node_id, listener=names[label], action="add", old=None,
                new=format_hostport(host, chosen), protocol=lst.protocol or "PLAINTEXT", vantages=vantages,
                via=working, replaces=lst.advertised.text, bind=f"0.0.0.0:{chosen}", beside=name,
                publish=chosen if compose and group[0].network == "docker-host" else None))
    steps = _steps(edits, by_source)
    return Plan(uses=tuple(uses), gaps=tuple(gaps), edits=tuple(edits), steps=tuple(steps),
                unresolved=tuple(unresolved))


def _use(source: str, report: Report, deployments: Sequence[Deployment]) -> Use:
    """The listener the report's bootstrap reached: the one whose advertised endpoints it saw, most of them.

    Of the client's security protocol, where the report and the files say both: two listeners may advertise
    one endpoint (an SSL entry copied from the PLAINTEXT one, its port kept), and a bootstrap that answered
    in TLS was an SSL listener's, whatever endpoint it was handed.
    """
    seen = {(r.endpoint.node_id, r.endpoint.host.lower(), r.endpoint.port) for r in report.endpoints}
    for boot in report.bootstraps:
        seen.update((b.node_id, b.host.lower(), b.port) for b in boot.brokers)
    spoken = next((b.protocol for b in report.bootstraps if b.status == "ok" and b.protocol), None)
    best: tuple[bool, int, Deployment, str] | None = None
    for dep in deployments:
        counts: dict[str, int] = {}
        speaks: dict[str, bool] = {}
        for broker in dep.brokers:
            for lst in broker.listeners:
                if lst.controller or lst.advertised is None or broker.node_id is None:
                    continue
                host = lst.advertised.host.lower()
                if (broker.node_id, host, lst.advertised.port) in seen and host and host != OWN_HOSTNAME:
                    counts[lst.name] = counts.get(lst.name, 0) + 1
                    speaks[lst.name] = speaks.get(lst.name, True) and (
                        spoken is None or lst.protocol is None or lst.protocol == spoken)
        for name, count in counts.items():
            if best is None or (speaks[name], count) > best[:2]:
                best = (speaks[name], count, dep, name)
    if best is None:
        if not report.endpoints and not any(b.brokers for b in report.bootstraps):
            raise UsageError(f"{source}: no bootstrap answered with brokers, so nothing in it can be matched to the "
                             "files: probe from that vantage until the bootstrap answers")
        raise UsageError(f"{source}: none of its advertised endpoints is a listener of the files given: reports and "
                         "configuration of different clusters?")
    _, _, dep, name = best
    bootstrap = next((b.address for b in report.bootstraps if b.status == "ok"), report.bootstraps[0].address
                     if report.bootstraps else "")
    return Use(source=source, report=report, vantage=report.vantage.name, deployment=dep.source, listener=name,
               network=_network(dep, bootstrap), bootstrap=bootstrap)


def _network(dep: Deployment, bootstrap: str) -> ClientNetwork:
    """The client network the report's vantage stands for: in Compose, inside the network when it bootstrapped by a
    Compose name, on the Docker host otherwise.
    """
    if dep.platform == "compose":
        return "compose-network" if _host(bootstrap).lower() in dep.internal_names else "docker-host"
    if dep.platform == "kubernetes":
        return kubernetes.network(dep, bootstrap)
    return "here"


def _row(report: Report, node_id: int, lst: Listener) -> EndpointResult | None:
    """The report's row for this broker at the listener's advertised endpoint."""
    assert lst.advertised is not None
    want = lst.advertised.text.lower()
    return next((r for r in report.endpoints if r.endpoint.node_id == node_id and r.endpoint.hostport.lower() == want),
                None)


def _answered_as(boot: BootstrapResult) -> int | None:
    """The node a bootstrap that answered turned out to be: its identity, or the one broker its metadata lists."""
    if boot.status != "ok":
        return None
    brokers = boot.brokers
    return boot.node_id if boot.node_id is not None else (brokers[0].node_id if len(brokers) == 1 else None)


def reached_by_name(report: Report, host: str, node_id: int) -> str | None:
    """How the report's own network reached this broker by this host name (a bootstrap that answered as the node,
    or an endpoint used as advertised), in words; None when the report holds no such evidence.

    A server.properties says nothing of the networks its clients are on, so a name judged from this machine
    (`localhost` on the Docker host, a VPC's private name) can be wrong for the vantage that reported: what that
    vantage's own probe reached is the evidence for it.
    """
    want = host.lower()
    for boot in report.bootstraps:
        if _answered_as(boot) == node_id and _host(boot.address).lower() == want:
            return f"its bootstrap {boot.address} answered as broker {node_id}"
    for row in report.endpoints:
        end = row.endpoint
        if (end.node_id == node_id and end.host.lower() == want and end.remap is None
                and is_usable(row, report.findings)):
            return f"it used broker {node_id} at {end.hostport}"
    return None


def _working(report: Report, node_id: int, row: EndpointResult) -> str | None:
    """The address that reaches this broker from the report's vantage today: a bootstrap that answered as the
    node, or the mapping the report was probed with.
    """
    for boot in report.bootstraps:
        if _answered_as(boot) == node_id:
            return boot.address
    remap = row.endpoint.remap
    if remap is not None and is_usable(row, report.findings):
        if remap.option == "--connect-to":
            return remap.hostport
        return format_hostport(remap.host, row.endpoint.port)
    return None


def _why_open(row: EndpointResult, working: str | None) -> str | None:
    """Why no change of an address closes this gap, or None when one does."""
    if working is None:
        if row.status in ("unresolvable",):
            return (f"no address reached broker {row.endpoint.node_id} from this vantage: probe with a bootstrap "
                    "that reaches it (or --connect-to) so kprobe learns the address that works")
        return (f"broker {row.endpoint.node_id} answered at no address from this vantage ({row.status}): the "
                "broker is down or a firewall is in the way, which no configuration change closes")
    if working.lower() == row.endpoint.hostport.lower():
        return (f"the advertised address {row.endpoint.hostport} is the one that answers; what fails there "
                f"({row.status}, see the report's findings) is not the address")
    return None


def _replacement(dep: Deployment, lst: Listener, node_id: int,
                 entries: Sequence[tuple[Use, Gap | None]]) -> str | None:
    """The one address that serves every vantage of this listener, when the rules let it replace the advertised one."""
    candidates = list(dict.fromkeys(g.working for _, g in entries if g is not None and g.working is not None))
    for candidate in candidates:
        served = all((gap is not None and gap.working == candidate) or _answers_at(use.report, node_id, candidate)
                     for use, gap in entries)
        if served and _replaceable(dep, lst, candidate):
            return candidate
    return None


def _answers_at(report: Report, node_id: int, address: str) -> bool:
    """Whether the report bootstrapped at this address and the broker there answered as this node."""
    return any(b.status == "ok" and b.node_id == node_id and b.address.lower() == address.lower()
               for b in report.bootstraps)


def _replaceable(dep: Deployment, lst: Listener, address: str) -> bool:
    """The inter-broker listener's address is dialled by the brokers themselves: never a loopback one, and in
    Compose only a Compose name.
    """
    if dep.platform == "kubernetes":
        return kubernetes.replaceable(dep, lst, address)
    if not lst.inter_broker:
        return True
    host = _host(address)
    if is_loopback_name(host) or is_loopback_ip(host):
        return False
    return dep.platform != "compose" or host.lower() in dep.internal_names


def _host(address: str) -> str:
    """The host of `host:port` (brackets off an IPv6 literal), without a `PROTOCOL://` prefix."""
    address = address.split("://", 1)[-1]
    host = address.rpartition(":")[0] if ":" in address else address
    return host.strip("[]")


def _new_name(dep: Deployment, network: ClientNetwork, chosen: set[str]) -> str:
    """A listener name after the network, used by no broker of the file and by no other new listener."""
    used = {lst.name for b in dep.brokers for lst in b.listeners} | {n for b in dep.brokers for n in b.listener_names}
    used |= {n for b in dep.brokers for n in b.advertised_names} | {n for b in dep.brokers
                                                                    for n, _ in (b.protocol_map or ())}
    used |= chosen
    base = _NEW_NAMES[network]
    name, count = base, 1
    while name in used:
        count += 1
        name = f"{base}_{count}"
    return name


def _bound_ports(deployments: Sequence[Deployment]) -> set[int]:
    """Every port the files bind, advertise or publish: a new listener takes none of them."""
    ports: set[int] = set()
    for dep in deployments:
        for broker in dep.brokers:
            for lst in broker.listeners:
                for hp in (lst.bind, lst.advertised):
                    if hp is not None:
                        ports.add(hp.port)
                ports.update(p.host_port for p in lst.published)
    return ports


def _free_port(lst: Listener, taken: set[int], given: list[int | None]) -> int:
    """--port, then the ports after it; without it, the ports after the listener's own, first free."""
    start = given[0] if given[0] is not None else (lst.bind.port if lst.bind is not None else
                                                   lst.advertised.port if lst.advertised else 9092) + 1
    chosen = start
    while chosen in taken or chosen > 65535:
        chosen = chosen + 1 if chosen < 65535 else 1024
    if given[0] is not None:
        given[0] = chosen + 1
    return chosen


def _steps(edits: Sequence[ListenerEdit], by_source: dict[str, Deployment]) -> list[Step]:
    """What the change needs beyond the files, each said once."""
    steps: list[Step] = []
    for source, dep in by_source.items():
        if dep.platform == "kubernetes":
            steps += kubernetes.steps([e for e in edits if e.source == source], dep)
    for edit in edits:
        dep = by_source[edit.source]
        if dep.platform == "kubernetes":
            continue
        vantages = ", ".join(edit.vantages)
        if edit.action == "add":
            port = edit.new.rpartition(":")[2]
            if dep.platform == "compose":
                if edit.publish is None and not broker_named(dep, edit.broker).own_names:
                    steps.append(Step(kind="firewall", text=f"{edit.broker}: open port {port} to the clients of "
                                                            f"{vantages} (the service runs on the host's network)"))
            else:
                steps.append(Step(kind="container", text=(
                    f"{edit.broker}: if the broker runs in a container or behind NAT, publish or forward port {port} "
                    f"to it as {edit.via} is (the file cannot say how the machine is reached)")))
                steps.append(Step(kind="firewall", text=f"{edit.broker}: open port {port} to the clients of "
                                                        f"{vantages}"))
            steps.append(Step(kind="bootstrap", text=(
                f"clients of {vantages}: bootstrap at {edit.new} (broker {edit.node_id}'s new {edit.listener} "
                f"listener); the address used today, {edit.via}, still answers with the old listener's endpoints")))
        if edit.action == "add" and edit.beside is not None and edit.protocol != "PLAINTEXT":
            steps.append(Step(kind="listener-settings", text=_listener_settings(dep, edit, edit.beside)))
        host = _host(edit.new)
        if edit.protocol in ("SSL", "SASL_SSL") and host.lower() not in _tls_names(broker_named(dep, edit.broker)):
            steps.append(Step(kind="certificate", text=(
                f"{edit.broker} (broker {edit.node_id}): its certificate must name {host} (a subjectAltName), which "
                f"its {edit.listener} listener will advertise, for clients that verify the broker's name (the "
                f"default); reissue it with {host} before the restart")))
        if edit.action == "replace":
            lst = broker_named(dep, edit.broker).listener(edit.listener)
            if lst is not None and lst.inter_broker:
                steps.append(Step(kind="inter-broker", text=(
                    f"{edit.listener} is the inter-broker listener: the other brokers dial {edit.new} too; make "
                    "sure they reach it from their own network")))
    return list({(s.kind, s.text): s for s in steps}.values())


def _listener_settings(dep: Deployment, edit: ListenerEdit, beside: str) -> str:
    """The per-listener settings an added SASL or TLS listener needs, which the patch leaves to the user: Kafka reads
    a listener's SASL settings (and any TLS key store given per listener) under its own name, and those lines hold
    passwords, which kprobe never writes.
    """
    new, old = edit.listener.lower(), beside.lower()
    if dep.platform == "compose":
        new_key, old_key = f"KAFKA_LISTENER_NAME_{edit.listener.upper()}_", f"KAFKA_LISTENER_NAME_{beside.upper()}_"
    else:
        new_key, old_key = f"listener.name.{new}.", f"listener.name.{old}."
    if edit.protocol.startswith("SASL_"):
        what = (f"its SASL settings ({new_key}sasl.enabled.mechanisms and, per mechanism, its JAAS login), the same "
                f"as listener {beside}'s {old_key}* settings")
    else:
        what = (f"the same {new_key}ssl.* settings as listener {beside}'s {old_key}ssl.*, where the broker gives "
                "that listener its own key store (broker-wide ssl.* settings serve the new listener already)")
    return (f"{edit.broker}: the new {edit.listener} listener is {edit.protocol}: give it {what}; kprobe does not "
            "write them, as they hold passwords")


def _tls_names(broker: Broker) -> set[str]:
    """The hosts the broker's TLS listeners advertise today: its certificate names them already (clients that
    verify the name reach those listeners), so a change that keeps one needs no new certificate.
    """
    return {lst.advertised.host.lower() for lst in broker.listeners
            if lst.protocol in ("SSL", "SASL_SSL") and lst.advertised is not None and not lst.controller}


def broker_named(dep: Deployment, name: str) -> Broker:
    """The broker of that name in the deployment."""
    return next(b for b in dep.brokers if b.name == name)
