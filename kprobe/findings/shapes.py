"""Findings that name the shape of a set-up, where the endpoint findings only see its symptoms.

A user who runs `kubectl port-forward` to one broker pod, or exposes brokers through node ports, meets
the same errors as anyone else (a name that does not resolve, a connect that times out), but the cause
and the fix are the set-up's: one forward can never serve a cluster whose brokers advertise their
cluster-internal names, a node port advertised under the node's internal address reaches no one outside,
and with an operator the fix is the operator's setting, never server.properties (which the operator
rewrites). These rules read the names and addresses (kprobe.findings.kubernetes, kprobe.hostport) and explain.

Severities keep the exit code honest: a shape finding appears only beside the endpoint errors it
explains (PORT_FORWARD_INCOMPLETE, an error, only when cluster-internal names fail), or as a warning
next to them, or as info when the shape works from here. None of them turns a passing run into a gap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from kprobe.findings.catalogue import ERROR, INFO, WARNING, finding
from kprobe.findings.common import about, listed, source_of, unique
from kprobe.findings.kubernetes import ClusterName, Operator, cluster_name
from kprobe.hostport import AddressClass, address_class, is_loopback_ip, is_loopback_name
from kprobe.models import BootstrapResult, EndpointResult, Finding, Severity

_FAILED = ("unresolvable", "unreachable")
# The first local address handed to a per-broker forward: 127.0.0.1 usually holds the bootstrap's own.
_FIRST_FORWARD_ADDRESS = 2
_FIRST_LOCAL_PORT = 19092
_MAX_COMMANDS = 6  # beyond this many brokers, the pattern is clear and the rest is elided

_RANGES: dict[AddressClass, str] = {
    "private": "a private range (RFC 1918, or IPv6's fc00::/7), reachable only inside its own network: a VPC, a "
               "data centre, a Kubernetes node network",
    "cgnat": "the shared range 100.64.0.0/10 (RFC 6598), reachable only inside the carrier-grade NAT, cloud or VPN "
             "overlay that hands it out",
    "link-local": "a link-local range (169.254.0.0/16 or fe80::/10), valid on one network link only and never "
                  "routed: a host that got no address from DHCP, or an address internal to a node",
}


def shape_findings(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """PORT_FORWARD_INCOMPLETE, ADVERTISED_SHARED_ADDRESS and ADVERTISED_PRIVATE_ADDRESS over one probe."""
    operator = run_operator(bootstraps, endpoints)
    by_address = {b.address: b for b in bootstraps}
    out = _port_forward(bootstraps, endpoints)
    out.extend(_shared_address(endpoints, operator))
    out.extend(_private_addresses(endpoints, by_address, operator))
    return out


def run_operator(bootstraps: Iterable[BootstrapResult], endpoints: Iterable[EndpointResult]) -> ClusterName | None:
    """The first name of the run that shows its operator (advertised hosts first, then bootstrap hosts).

    A node port or a load balancer advertises addresses that name no operator; the brokers' other names,
    or the bootstrap service's, may.
    """
    hosts = [r.endpoint.host for r in endpoints] + [b.address.rsplit(":", 1)[0] for b in bootstraps]
    for host in hosts:
        name = cluster_name(host)
        if name is not None and name.operator is not None:
            return name
    return None


# -- what each operator calls its settings ------------------------------------------------------------

def describe_name(name: ClusterName) -> str:
    """`my-cluster-kafka-0...svc` as a reader of `kubectl get pods` knows it."""
    where = f"namespace {name.namespace}"
    if name.operator == "strimzi":
        pool = "" if name.pool in (None, "kafka") else f", node pool {name.pool}"
        who = (f"Strimzi's name for pod {name.pod} of Kafka cluster {name.cluster}{pool}" if name.pod
               else f"Strimzi's bootstrap service of Kafka cluster {name.cluster}")
        return f"{who}, {where}"
    if name.operator == "bitnami":
        role = f" ({name.pool} pods)" if name.pool else ""
        return f"the Bitnami chart's name for pod {name.pod} of release {name.cluster}{role}, {where}"
    if name.pod:
        return f"pod {name.pod} behind the headless service {name.service}, {where}"
    if name.service:
        return f"service {name.service}, {where}"
    return f"a pod's address name in {where}"


def external_access(operator: Operator | None, name: ClusterName | None = None) -> str:
    """How clients outside the cluster get endpoints of their own, in the operator's words."""
    if operator == "strimzi":
        cluster = name.cluster if name and name.cluster else "<cluster>"
        return (f"add an external listener to the Kafka resource {cluster}: an entry in spec.kafka.listeners[] with "
                "`type: nodeport`, `loadbalancer`, `route` (OpenShift) or `ingress`, for which Strimzi advertises "
                "each broker at an address outside clients reach (override one with "
                "`configuration.brokers[].advertisedHost` / `advertisedPort`, or `overrides.brokers[].advertisedHost` "
                "in Strimzi's older `listeners.external` format); then bootstrap with the address "
                f"`kubectl get kafka {cluster} -o jsonpath='{{.status.listeners}}'` gives for it. Not "
                "server.properties: the operator rewrites it")
    if operator == "bitnami":
        role = name.pool if name and name.pool else None
        scope = f"externalAccess.{role}.service" if role else "externalAccess.broker.service"
        extra = " (and externalAccess.controller.service.* while the controllers also serve clients)" \
            if role == "broker" else ""
        return ("set the chart's external access: `externalAccess.enabled=true`, "
                f"`{scope}.type=LoadBalancer` (or NodePort){extra}, and either "
                "`externalAccess.autoDiscovery.enabled=true` (with `rbac.create=true`) or the addresses yourself "
                f"(`{scope}.loadBalancerIPs`, `{scope}.domain`); the chart then gives each broker an EXTERNAL "
                "listener advertising its own address. Not server.properties: the chart renders it")
    return ("give clients outside the cluster a listener of their own: one Service per broker (type NodePort or "
            "LoadBalancer) and a listener advertising each broker's external address; with an operator, through "
            "its settings (Strimzi: spec.kafka.listeners[] of type nodeport or loadbalancer; the Bitnami chart: "
            "externalAccess.*), not server.properties, which the operator rewrites")


def node_address_fix(operator: Operator | None) -> str:
    """How to make a node-port listener advertise an address clients reach, in the operator's words."""
    strimzi = ("Strimzi: `configuration.preferredNodePortAddressType: ExternalIP` (or ExternalDNS) on the nodeport "
               "listener, or an address per broker in `configuration.brokers[].advertisedHost` "
               "(`overrides.brokers[].advertisedHost` in Strimzi's older `listeners.external` format)")
    bitnami = ("the Bitnami chart: `externalAccess.broker.service.domain` (an address every client reaches) or one "
               "address per broker in `externalAccess.broker.service.externalIPs`, rather than `useHostIPs`")
    if operator == "strimzi":
        return strimzi
    if operator == "bitnami":
        return bitnami
    return f"{strimzi}; {bitnami}"


def cluster_internal_fix(name: ClusterName, port: int) -> str:
    """The fix of an endpoint whose cluster-internal name fails from here: the operator's way out, and a test."""
    return (f"{name.host} is {describe_name(name)}: only the cluster's DNS resolves it, so only clients in the "
            f"cluster can use it. For clients outside, {external_access(name.operator, name)}. To try it from this "
            f"machine first: `kubectl port-forward -n {name.namespace} {name.kubectl_target} "
            f"{_FIRST_LOCAL_PORT}:{port}` and `kprobe probe ... --connect-to {name.host}:{port}=127.0.0.1:"
            f"{_FIRST_LOCAL_PORT}`.")


# -- PORT_FORWARD_INCOMPLETE ----------------------------------------------------------------------------

def _port_forward(bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """A bootstrap reached on loopback (a port-forward) whose brokers advertise names only the cluster resolves."""
    out = []
    for b in bootstraps:
        if b.status != "ok" or b.connected_to is None or not is_loopback_ip(b.connected_to):
            continue
        failing = [(r, name) for r in endpoints if b.address in r.endpoint.advertised_by and r.endpoint.remap is None
                   and r.status in _FAILED and (name := cluster_name(r.endpoint.host)) is not None]
        if not failing:
            continue
        failing.sort(key=lambda pair: pair[0].endpoint.node_id)
        first = failing[0][1]
        names = ", ".join(r.endpoint.hostport for r, _ in failing)
        ports = {r.endpoint.port for r, _ in failing}
        same_port = (f"They all use port {next(iter(ports))}, so each forward needs a loopback address of its own."
                     if len(ports) == 1 and len(failing) > 1 else "")
        message = (
            f"You reached the cluster at {b.address}, a forward on this machine's loopback ({b.connected_to}), as "
            f"`kubectl port-forward` gives, but the brokers advertise names only the cluster's DNS resolves "
            f"({describe_name(first)}): {names}. A client uses the bootstrap only for metadata; every later "
            "request goes to the advertised name and port of the broker that leads the partition, so one forward "
            "cannot work: producers and consumers bootstrap, then fail with `Failed to resolve` (librdkafka) or "
            "time out (Java). " + same_port).rstrip()
        out.append(finding("PORT_FORWARD_INCOMPLETE", ERROR, message, _forward_fix(b.address, failing),
                           bootstrap=b.address, endpoints=tuple(unique(r.endpoint.hostport for r, _ in failing)),
                           node_ids=tuple(sorted({r.endpoint.node_id for r, _ in failing}))))
    return out


def _forward_fix(bootstrap: str, failing: list[tuple[EndpointResult, ClusterName]]) -> str:
    """One forward and one hosts entry per broker, each on its own loopback address; and kprobe's test of it."""
    shown = failing[:_MAX_COMMANDS]
    more = f" (and likewise for the other {len(failing) - len(shown)})" if len(failing) > len(shown) else ""
    forwards, hosts, tries, local = [], [], [], []
    for i, (r, name) in enumerate(shown):
        address = f"127.0.0.{_FIRST_FORWARD_ADDRESS + i}"
        port = r.endpoint.port
        forwards.append(f"`kubectl port-forward -n {name.namespace} --address {address} {name.kubectl_target} "
                        f"{port}:{port}`")
        hosts.append(f"`{address} {r.endpoint.host}`")
        local.append(f"`kubectl port-forward -n {name.namespace} {name.kubectl_target} "
                     f"{_FIRST_LOCAL_PORT + i}:{port}`")
        tries.append(f"--connect-to {r.endpoint.host}:{port}=127.0.0.1:{_FIRST_LOCAL_PORT + i}")
    return (
        "For a client on this machine: one forward per broker, each on its own loopback address and the advertised "
        f"port, {', '.join(forwards)}{more}, and a line per name in /etc/hosts: {', '.join(hosts)} (on macOS, add "
        "each address first: `sudo ifconfig lo0 alias 127.0.0.2`). Try it before touching /etc/hosts: forward each "
        f"broker to a local port ({', '.join(local)}) and run `kprobe probe -b {bootstrap} {' '.join(tries)}`. "
        f"For clients that stay outside the cluster, {external_access(failing[0][1].operator, failing[0][1])}.")


# -- ADVERTISED_SHARED_ADDRESS ----------------------------------------------------------------------------

def _shared_address(endpoints: Sequence[EndpointResult], operator: ClusterName | None) -> list[Finding]:
    """Several brokers on one host with a port each: node ports on one node, or one load balancer for all.

    A warning where some of them fail from here (the shape explains it); info where all of the run's
    brokers share the host and it works (a single point of failure); nothing for a working subset.

    Loopback hosts are left out: on one machine, one address with a port per broker is the ordinary
    local set-up (a Compose file's published ports), not a network shape.
    """
    groups: dict[str, list[EndpointResult]] = defaultdict(list)
    for r in endpoints:
        host = r.endpoint.host
        if not (is_loopback_name(host) or is_loopback_ip(host)):
            groups[host.lower().rstrip(".")].append(r)
    brokers_in_run = {r.endpoint.node_id for r in endpoints}
    out = []
    for _, results in sorted(groups.items()):
        nodes = sorted({r.endpoint.node_id for r in results})
        ports = sorted({r.endpoint.port for r in results})
        if len(nodes) < 2 or len(ports) < 2:
            continue  # one broker, or one port (several brokers on one host:port is DUPLICATE_ENDPOINT's)
        failing = sorted({r.endpoint.node_id for r in results if r.status in (*_FAILED, "partial")})
        if not failing and set(nodes) != brokers_in_run:
            continue  # some brokers on one working host is common and harmless; all of them is one point of failure
        who = f"All {len(nodes)} brokers" if set(nodes) == brokers_in_run else \
            f"Brokers {', '.join(map(str, nodes))}"
        head = (f"{who} advertise one host, {results[0].endpoint.host}, each with a port of its own "
                f"({', '.join(map(str, ports))}): the shape of Kubernetes NodePort services on one node (or of one "
                "load balancer with a port per broker).")
        severity: Severity
        name = operator.operator if operator else None
        if failing:
            severity = WARNING
            message = (f"{head} From here it fails for broker(s) {', '.join(map(str, failing))}: if it is a node's "
                       "address, it is one this network cannot reach (a node's InternalIP or InternalDNS), or the "
                       "node ports (30000-32767 by default) are closed between here and the node.")
            fix = (f"Advertise a node address clients reach, {node_address_fix(name)}; and open the node ports from "
                   "the clients' network (firewall, security group).")
        else:
            severity = INFO
            message = (f"{head} It works from here. Every client reaches those brokers through that one address, so "
                       "it is a single point of failure: if it is a node's address, all of them stop with that node, "
                       "even though kube-proxy serves a node port on every node.")
            fix = ("Nothing to fix for clients here. For resilience, advertise each broker at the address of the node "
                   "it runs on (Strimzi's nodeport listener does so unless `advertisedHost` overrides it), or give "
                   "each broker a load balancer of its own (Strimzi: `type: loadbalancer`; the Bitnami chart: "
                   "`externalAccess.broker.service.type=LoadBalancer`).")
        # `endpoint` is the shared host (no port: it is the host they share); `endpoints` every host:port on it.
        out.append(finding("ADVERTISED_SHARED_ADDRESS", severity, message, fix,
                           endpoint=results[0].endpoint.host, bootstrap=source_of(results[0]),
                           endpoints=tuple(unique(r.endpoint.hostport for r in results)), node_ids=tuple(nodes)))
    return out


# -- ADVERTISED_PRIVATE_ADDRESS ---------------------------------------------------------------------------

def _private_class(result: EndpointResult, bootstraps: dict[str, BootstrapResult]) -> list[AddressClass] | None:
    """The private, CGNAT or link-local classes of an advertised address that does not connect from here.

    Only where every address failed to connect without an answer (a timeout or no route: a refusal means
    the address is reached), and only when the bootstrap was reached at an address of another class: a
    private address failing from inside a private network is a firewall, which ADVERTISED_TIMEOUT says.
    """
    ep = result.endpoint
    if ep.remap is not None or result.status != "unreachable" or not result.tcp:
        return None
    if any(t.status not in ("timeout", "unreachable") for t in result.tcp):
        return None
    classes = {address_class(t.address) for t in result.tcp}
    if not classes <= set(_RANGES):
        return None
    reached = {address_class(b.connected_to) for src in ep.advertised_by
               if (b := bootstraps.get(src)) is not None and b.connected_to is not None}
    if classes & reached:
        return None
    return sorted(c for c in classes if c is not None)


def _private_addresses(endpoints: Sequence[EndpointResult], bootstraps: dict[str, BootstrapResult],
                       operator: ClusterName | None) -> list[Finding]:
    """ADVERTISED_PRIVATE_ADDRESS, once for every broker it concerns: node ports advertising the nodes'
    internal addresses are one setting for the whole cluster, not a problem per broker.
    """
    hit = [(r, kinds) for r in endpoints if (kinds := _private_class(r, bootstraps)) is not None]
    if not hit:
        return []
    kinds = sorted({k for _, ks in hit for k in ks})
    ranges = "; and ".join(_RANGES[k] for k in kinds)
    shown = []
    for r, _ in hit:
        ep = r.endpoint
        addresses = ", ".join(t.address for t in r.tcp)
        where = ep.host if ep.host == addresses else f"{ep.host} ({addresses})"
        shown.append(f"{where} on port {ep.port}")
    every = listed(unique(t.address for r, _ in hit for t in r.tcp))
    one = len(hit) == 1
    who = (f"Broker {hit[0][0].endpoint.node_id} advertises {shown[0]}" if one else
           f"Brokers {listed([str(r.endpoint.node_id) for r, _ in hit])} advertise {listed(shown, sep='; ')}")
    message = (f"{who}, in {ranges}, and connections to {'it' if one else 'them'} fail from here. That is why the "
               "connect fails: this vantage is outside that network. In Kubernetes, the mark of a NodePort listener "
               "advertising the nodes' internal addresses, or of an internal-only load balancer.")
    name = operator.operator if operator else None
    fix = (f"Advertise an address this network reaches: for node ports, {node_address_fix(name)}; for a load "
           "balancer, one that is not internal-only (the cloud's internal-load-balancer annotation removed). "
           "Outside Kubernetes, a listener for this network (advertised.listeners), or a route (VPN, peering) "
           f"to {every}.")
    return [about("ADVERTISED_PRIVATE_ADDRESS", WARNING, message, fix, [r for r, _ in hit])]
