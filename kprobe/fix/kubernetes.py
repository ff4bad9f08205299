"""`kprobe fix` for an operator's resource: a Strimzi `Kafka` (with its node pools) or Bitnami chart values.

The operator writes each broker's listener settings itself, so the change is to what it reads:
- a vantage bootstrapped by a cluster name stands inside the cluster, any other outside it (the client
  networks of `kprobe check` for Kubernetes);
- an external listener's per-broker address is replaced where the report shows the one that works
  (Strimzi: `configuration.brokers[].advertisedHost`/`advertisedPort`; Bitnami:
  `externalAccess.<role>.service.domain`/`nodePorts`/`loadBalancerIPs`);
- an internal listener, the pods' own names under the headless service, is never replaced (the cluster's
  clients and the operator rely on them): outside clients get an external listener added, of the type
  their way in today suggests (a node port: `nodeport`, advertising the node they reached at a new node
  port; anything else: `loadbalancer`, whose addresses the platform gives when it deploys), and the
  operator then makes its Services, said as a step.
The resource's namespace is often not in the file (it is the one the resource is applied to): it is
taken from the cluster names the reports saw, so their endpoints match the listeners.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kprobe.check.listeners import Broker, ClientNetwork, Deployment, Exposure, HostPort, Listener
from kprobe.findings.kubernetes import cluster_name
from kprobe.fix.model import Gap, ListenerEdit, Step, Unresolved, Use
from kprobe.hostport import format_hostport, is_loopback_ip, is_loopback_name
from kprobe.models import Report
from kprobe.records import replace

NAMESPACE = "<namespace>"
EXTERNAL_TYPES = ("nodeport", "loadbalancer", "route", "ingress")
NODE_PORTS = range(30000, 32768)
# Strimzi keeps these for itself (metrics, JMX) and takes no listener port below 9092.
_STRIMZI_RESERVED = (9404, 9999)
_POD = re.compile(r"-(?P<role>controller|broker)-(?P<index>\d+)$")


def network(dep: Deployment, bootstrap: str) -> ClientNetwork:
    """Inside the cluster when the report bootstrapped by a name only the cluster's DNS resolves."""
    host = _host(bootstrap).lower()
    return "cluster" if host in dep.internal_names or cluster_name(host) is not None else "outside"


def localize(dep: Deployment, reports: Sequence[tuple[str, Report]]) -> Deployment:
    """The deployment with `<namespace>` filled in from the cluster names the reports saw (unchanged if none)."""
    if dep.platform != "kubernetes":
        return dep
    seen = [r.endpoint.host for _, rep in reports for r in rep.endpoints]
    seen += [b.host for _, rep in reports for boot in rep.bootstraps for b in boot.brokers]
    templates = [lst.advertised.host for b in dep.brokers for lst in b.listeners
                 if lst.advertised is not None and NAMESPACE in lst.advertised.host]
    namespace = None
    for template in templates:
        pattern = re.compile(re.escape(template).replace(re.escape(NAMESPACE), "([a-z0-9-]+)") + r"\.?", re.I)
        namespace = next((m.group(1) for m in map(pattern.fullmatch, seen) if m), None)
        if namespace:
            break
    if namespace is None:
        return dep

    def fill(text: str) -> str:
        return text.replace(NAMESPACE, namespace)

    def listener(lst: Listener) -> Listener:
        adv = lst.advertised
        return replace(lst, advertised=HostPort(host=fill(adv.host), port=adv.port) if adv is not None else None,
                       bootstraps=tuple((n, fill(b)) for n, b in lst.bootstraps))

    brokers = tuple(replace(b, listeners=tuple(listener(x) for x in b.listeners),
                            own_names=tuple(fill(n) for n in b.own_names)) for b in dep.brokers)
    names = tuple((net, tuple(fill(n) for n in names)) for net, names in dep.network_names)
    return replace(dep, brokers=brokers, network_names=names)


def replaceable(dep: Deployment, lst: Listener, address: str) -> bool:
    """Only an external listener's address is the resource's to set, the pods' own names stay; and never to a
    cluster name (a bootstrap Service answers as any broker, and the cluster's clients have internal listeners).
    """
    host = _host(address).lower()
    return (lst.exposure in EXTERNAL_TYPES and not lst.inter_broker and host not in dep.internal_names
            and cluster_name(host) is None)


class Additions:
    """The listeners a change adds to one resource: one per network, shared by every broker (Strimzi's listeners
    and the chart's external access are the cluster's, not a broker's), each broker at its own address.
    """

    def __init__(self, taken: set[int], port: int | None, gaps: Sequence[Gap] = ()) -> None:
        # The ports the clients reach the brokers at today (node ports of Services already there) stay theirs.
        taken.update(_port(g.working) for g in gaps if g.working is not None)
        self.taken = taken
        self.port = port
        self.chosen: dict[tuple[str, ClientNetwork], tuple[str, int, Exposure]] = {}

    def add(self, dep: Deployment, broker: Broker, lst: Listener,
            entries: Sequence[tuple[Use, Gap | None]]) -> tuple[list[ListenerEdit], list[Unresolved]]:
        """The part of the added listeners that is this broker's, for the vantages whose gap needs one."""
        edits: list[ListenerEdit] = []
        unresolved: list[Unresolved] = []
        groups: dict[ClientNetwork, list[tuple[Use, Gap]]] = {}
        for use, gap in entries:
            if gap is not None and gap.working is not None:
                groups.setdefault(use.network, []).append((use, gap))
        for net, group in groups.items():
            vantages = tuple(dict.fromkeys(u.vantage for u, _ in group))
            working = group[0][1].working
            assert working is not None and lst.advertised is not None and broker.node_id is not None
            if net == "cluster" and dep.operator == "bitnami":
                boot = dict(next((x.bootstraps for b in dep.brokers for x in b.listeners if x.bootstraps
                                  and not x.inter_broker and x.exposure == "internal"), ())).get("cluster", "")
                unresolved += [Unresolved(vantage=v, node_id=broker.node_id, endpoint=lst.advertised.text,
                                          why=f"inside the cluster, clients use the chart's client listener: bootstrap "
                                              f"at {boot or 'the chart service'} rather than the external one")
                               for v in vantages]
                continue
            name, port, exposure = self._listener(dep, lst, net, [g.working for _, g in group if g.working])
            host, work_port = _host(working), _port(working)
            if exposure == "internal":
                new = format_hostport(broker.own_names[0], port)
            elif exposure == "nodeport":
                node_port = _free(work_port + 1, self.taken, NODE_PORTS)
                self.taken.add(node_port)
                new = format_hostport(host, node_port)
            else:
                lb_port = 9094 if dep.operator == "bitnami" else port
                new = f"<the loadbalancer address of broker {broker.node_id}>:{lb_port}"
            edits.append(ListenerEdit(
                source=dep.source, broker=broker.name, node_id=broker.node_id, listener=name, action="add", old=None,
                new=new, protocol=lst.protocol or "PLAINTEXT", vantages=vantages, via=working,
                replaces=lst.advertised.text, bind=f"0.0.0.0:{port}", exposure=exposure))
        return edits, unresolved

    def _listener(self, dep: Deployment, lst: Listener, net: ClientNetwork,
                  working: list[str]) -> tuple[str, int, Exposure]:
        """The added listener's Kafka name, port and type, chosen once per resource and network."""
        key = (dep.source, net)
        if key in self.chosen:
            return self.chosen[key]
        exposure: Exposure
        if net == "cluster":
            exposure = "internal"
        elif all(_port(w) in NODE_PORTS and not _loopback(_host(w)) for w in working):
            exposure = "nodeport"
        else:
            exposure = "loadbalancer"
        if dep.operator == "bitnami":
            chosen = ("EXTERNAL", 9095, exposure)  # the chart's external listener, enabled by its external access
        else:
            start = self.port if self.port is not None else max(9092, (lst.bind.port if lst.bind else 9092) + 1)
            port = _free(start, self.taken | set(_STRIMZI_RESERVED), range(9092, 65536))
            self.taken.add(port)
            used = {x.name.rsplit("-", 1)[0].lower() for b in dep.brokers for x in b.listeners}
            base = "internal" if exposure == "internal" else "external"
            name, count = base, 1
            while name in used or any(n.rsplit("-", 1)[0].lower() == name for n, _, _ in self.chosen.values()):
                count += 1
                name = f"{base}{count}"
            chosen = (f"{name.upper()}-{port}", port, exposure)
        self.chosen[key] = chosen
        return chosen


def steps(edits: Sequence[ListenerEdit], dep: Deployment) -> list[Step]:
    """What the operator then does itself, and what is left to the user: Services, node ports, certificates."""
    out: list[Step] = []
    added = [e for e in edits if e.action == "add"]
    by_listener: dict[str, list[ListenerEdit]] = {}
    for edit in added:
        by_listener.setdefault(edit.listener, []).append(edit)
    strimzi = dep.operator == "strimzi"
    apply = "applying the Kafka resource" if strimzi else "helm upgrade with these values"
    maker = "Strimzi" if strimzi else "the chart"
    for name, mine in by_listener.items():
        first = mine[0]
        vantages = ", ".join(dict.fromkeys(v for e in mine for v in e.vantages))
        resource = name.rsplit("-", 1)[0].lower() if strimzi else "external"
        if first.exposure == "internal":
            port = first.bind.rpartition(":")[2] if first.bind else ""
            out.append(Step(kind="bootstrap", text=(
                f"clients of {vantages}: bootstrap at the cluster's bootstrap Service on port {port} "
                f"(listener {resource}); {apply} rolls the brokers with it")))
            continue
        if first.exposure == "nodeport":
            ports = ", ".join(e.new.rpartition(":")[2] for e in mine)
            hosts = ", ".join(dict.fromkeys(e.new.rpartition(":")[0] for e in mine))
            out.append(Step(kind="service", text=(
                f"{apply} makes {maker} create a NodePort Service per broker for listener {resource} (node ports "
                f"{ports}) and roll the brokers: no Service to write by hand")))
            out.append(Step(kind="firewall", text=f"open node ports {ports} on the nodes ({hosts}) to the clients "
                                                  f"of {vantages}"))
            out.append(Step(kind="bootstrap", text=(
                f"clients of {vantages}: bootstrap at {first.new} (broker {first.node_id}'s new {resource} "
                f"listener; any broker's new address serves); {first.via} still answers with the old endpoints")))
        else:
            look = ("kubectl get kafka -o jsonpath='{.items[0].status.listeners}'" if strimzi
                    else "kubectl get svc")
            out.append(Step(kind="service", text=(
                f"{apply} makes {maker} create a LoadBalancer Service per broker for listener {resource} and roll the "
                f"brokers; their addresses are the platform's, known once deployed ({look}): then probe the new "
                f"listener from {vantages}")))
    for edit in edits:
        if edit.protocol in ("SSL", "SASL_SSL") and edit.exposure != "internal":
            where = ("Strimzi's own listener certificates name the advertised address themselves; a custom one "
                     "(configuration.brokerCertChainAndKey)" if strimzi else "the chart's TLS certificate (tls.*)")
            out.append(Step(kind="certificate", text=(
                f"{where} must name {_host(edit.new)} (a subjectAltName) for clients that verify the broker's "
                "name; reissue it before the change")))
    return list({(s.kind, s.text): s for s in out}.values())


def pod_of(broker: Broker) -> tuple[str, int]:
    """A Bitnami pod's role (`controller` or `broker`) and its index in that statefulset."""
    match = _POD.search(broker.name)
    if match is None:
        return "controller", 0
    return match.group("role"), int(match.group("index"))


def _free(start: int, taken: set[int], allowed: range) -> int:
    """The first port from `start` that is allowed and not taken (wrapping round the allowed range)."""
    candidates = [p for p in range(max(start, allowed.start), allowed.stop)] + list(range(allowed.start, start))
    return next((p for p in candidates if p not in taken and p in allowed), allowed.start)


def _loopback(host: str) -> bool:
    return is_loopback_name(host) or is_loopback_ip(host)


def _host(address: str) -> str:
    address = address.split("://", 1)[-1]
    return (address.rpartition(":")[0] if ":" in address else address).strip("[]")


def _port(address: str) -> int:
    tail = address.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0
