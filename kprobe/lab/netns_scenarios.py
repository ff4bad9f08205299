"""The namespace lab's scenarios: networks between a client and real brokers, as data.

Each scenario is a cluster of real Kafka brokers (the native launcher's `Scenario`, on private
addresses 198.18.1.1N inside the "cluster" namespace), the vantages that look at it (each a
namespace of its own with the routes it has) and the nftables ruleset of the router namespace
between them. Design notes section 9 records what each one measured; tests/lab/test_netns.py keeps
kprobe saying so.

Address plan (every address is in 198.18.0.0/15, RFC 2544's benchmarking range, so nothing here
can be confused with a real network; `kprobe.lab.netns` refuses any other):
- 198.18.0.0/30: router <-> cluster link; 198.18.0.4k/30: router <-> vantage k (k from 1);
- 198.18.1.1N: broker N's private address, on the cluster namespace's `lo`;
- 198.19.0.10: the load balancer's public address, 198.19.0.1N: broker N's public (NATed) address.
  Nothing holds the public addresses: the router DNATs them in prerouting, as a cloud NAT does;
- fd6b:7072:6f62:100::1N: broker N's IPv6 (ULA) address, in scenarios with `ipv6` (a CLIENT6
  listener on port 9093 advertises it; IPv6 needs no NAT, so it is routed as it is);
- 198.18.2.10: the collector broker of the "monitoring" network (a scenario with `monitoring` has
  a namespace of its own for it, linked to the router after the vantages), where vantages publish.

Templates in `rules` are `str.format` strings with `{lan}` (the router's interface toward the
cluster) and `{if[VANTAGE]}` (its interface toward a vantage).
"""

from __future__ import annotations

from kprobe.errors import UsageError
from kprobe.lab.scenarios import ListenerSpec, NodeSpec, Scenario
from kprobe.records import field, record

PORT = 9092  # every broker's client listener, on its own address
PRIVATE_NET = "198.18.1.0/24"
PUBLIC_NET = "198.19.0.0/24"
LB = "198.19.0.10"
MONITORING_NET = "198.18.2.0/24"
COLLECTOR = "198.18.2.10"
COLLECTOR_NAME = "collector.example.test"
REPORTS_TOPIC = "kprobe-reports"
CLUSTER6_NET = "fd6b:7072:6f62:100::/64"
PORT6 = 9093  # Kafka refuses two listeners of one broker on one port, whatever their hosts


def private(node_id: int) -> str:
    """Broker `node_id`'s address inside the cluster network (no route to it from the internet)."""
    return f"198.18.1.{10 + node_id}"


def private6(node_id: int) -> str:
    """Broker `node_id`'s IPv6 address in the cluster network (the lab's ULA prefix)."""
    return f"fd6b:7072:6f62:100::{10 + node_id}"


def public(node_id: int) -> str:
    """Broker `node_id`'s public address, DNATed to `private(node_id)` by the router."""
    return f"198.19.0.{10 + node_id}"


@record
class ClientNamespace:
    """A client's network: a namespace with a link to the router and the routes it has.

    What the lab's scenarios and `kprobe lab exec` call a vantage; not kprobe.models.Vantage (the
    machine a report was made on), though a probe run inside one reports from it.

    `routes` are destinations reached through the router ("default" for everything): a laptop on
    the internet routes only the public range, a host in the VPC (or behind its VPN) everything.
    `hosts` is the vantage's own /etc/hosts (name -> address), bind-mounted for `kprobe lab exec`.
    `bootstrap` is what a client there types.
    """

    name: str
    bootstrap: str
    routes: tuple[str, ...] = ("default",)
    hosts: dict[str, str] = field(default_factory=dict)
    note: str = ""
    # A host in the brokers' own network (linked to the cluster namespace, not to the router): reaching the brokers'
    # public addresses from there takes the router's NAT back into the network it came from (hairpin NAT).
    in_cluster: bool = False


@record
class NetnsScenario:
    """Brokers, vantages and the router's rules: one staged network problem."""

    name: str
    summary: str
    cluster: Scenario
    vantages: tuple[ClientNamespace, ...]
    rules: str = ""
    story: str = ""
    # A "monitoring" network with its own collector broker (and its reports topic, made at start since
    # brokers never create topics on first use): where `kprobe watch --publish` in the vantages reports to.
    monitoring: Scenario | None = None
    # Brokers also on IPv6 (`private6`), routed by the router; a vantage's routes may then name CLUSTER6_NET.
    ipv6: bool = False

    def hosts_of(self, name: str) -> dict[str, str]:
        """The names known in a vantage, or in the monitoring network ("monitoring"), for `lab exec` there."""
        if name == "monitoring" and self.monitoring is not None:
            return {COLLECTOR_NAME: COLLECTOR}
        return self.vantage(name).hosts

    def vantage(self, name: str) -> ClientNamespace:
        """The vantage of that name, or a usage error naming the ones there are."""
        for vantage in self.vantages:
            if vantage.name == name:
                return vantage
        raise UsageError(f"scenario {self.name} has no vantage {name!r} (has "
                         f"{', '.join(v.name for v in self.vantages)})")


def _cluster(name: str, brokers: int, advertise_public: bool, topics: int = 0, ipv6: bool = False) -> Scenario:
    """Brokers 1..N: INTERNAL (inter-broker, private) and CLIENT on :9092, advertising private or public;
    with `ipv6`, CLIENT6 on the broker's ULA address, port 9093, advertising that address.
    """
    nodes = []
    for node_id in range(1, brokers + 1):
        advertise = f"{public(node_id)}:{PORT}" if advertise_public else "{addr}:{port}"
        v6 = (ListenerSpec("CLIENT6", bind=private6(node_id), advertise=f"[{private6(node_id)}]:{PORT6}", port=PORT6,
                           note="IPv6: the broker's own ULA address, routed without NAT"),) if ipv6 else ()
        nodes.append(NodeSpec(
            node_id=node_id, address=private(node_id),
            listeners=(
                ListenerSpec("INTERNAL", inter_broker=True, note="between the brokers, inside the cluster network"),
                ListenerSpec("CLIENT", advertise=advertise, port=PORT,
                             note="advertises the public (NATed) address" if advertise_public
                             else "advertises the private address"),
                *v6,
            ),
        ))
    return Scenario(name=f"netns-{name}", summary=name, nodes=tuple(nodes),
                    topics={f"topic-{i:02d}": 1 for i in range(topics)})


def _collector() -> Scenario:
    """The monitoring network's one broker, with the reports topic (2 partitions) made at start."""
    node = NodeSpec(node_id=1, address=COLLECTOR, hostnames=(COLLECTOR_NAME,), listeners=(
        ListenerSpec("INTERNAL", inter_broker=True, note="the collector's own"),
        ListenerSpec("CLIENT", port=PORT, note="where vantages publish their reports"),
    ))
    return Scenario(name="netns-monitoring", summary="the collector", nodes=(node,), topics={REPORTS_TOPIC: 2})


# nftables fragments (braces doubled: `rules` is a template). Tables are made in the router namespace only.
def _dnat(lb_to: int | None, per_broker: tuple[int, ...]) -> str:
    """The router's DNAT: the load balancer to one broker, and each public address to its broker."""
    lines = []
    if lb_to is not None:
        lines.append(f"    ip daddr {LB} tcp dport {PORT} dnat to {private(lb_to)}:{PORT}")
    lines.extend(f"    ip daddr {public(n)} tcp dport {PORT} dnat to {private(n)}:{PORT}" for n in per_broker)
    return ("\ntable ip kprobe_nat {{\n  chain prerouting {{\n"
            "    type nat hook prerouting priority dstnat; policy accept;\n" + "\n".join(lines) + "\n  }}\n}}\n")


# Hairpin NAT ("NAT loopback"): what comes from the cluster network and goes back into it after DNAT is also
# masqueraded, so the broker answers the router, which undoes both translations. Without it the broker answers the
# client directly, from its private address, and the client (which called the public one) resets it: a timeout.
_HAIRPIN = ("\ntable ip kprobe_hairpin {{\n  chain postrouting {{\n"
            "    type nat hook postrouting priority srcnat; policy accept;\n"
            '    iifname "{lan}" oifname "{lan}" masquerade\n  }}\n}}\n')


def _filter(hook: str, priority: str, rule: str) -> str:
    """A filter table with one chain on `hook` holding `rule` (drops before DNAT sit at priority -150)."""
    return ("\ntable ip kprobe_filter {{\n  chain " + hook + " {{\n    type filter hook " + hook + " priority "
            + priority + "; policy accept;\n    " + rule + "\n  }}\n}}\n")


_LAPTOP_PUBLIC = ClientNamespace("laptop", f"{LB}:{PORT}", routes=(PUBLIC_NET,), hosts={"kafka.example.test": LB},
                                 note="on the internet: routes only the public range")
_VPC = ClientNamespace("vpc", f"{private(1)}:{PORT}", note="inside the VPC: routes everything")

_LB_PRIVATE = NetnsScenario(
    name="lb-private",
    summary="a load balancer DNATs to brokers that advertise private addresses: no route from the laptop",
    story="The laptop reaches the load balancer (198.19.0.10 DNAT to broker 1); every broker advertises its "
          "198.18.1.x address, which the internet has no route to: connect() fails at once (ENETUNREACH).",
    cluster=_cluster("lb-private", 2, advertise_public=False),
    vantages=(ClientNamespace("laptop", f"kafka.example.test:{PORT}", routes=(PUBLIC_NET,),
                              hosts={"kafka.example.test": LB}, note="on the internet: routes only the public range"),
              _VPC),
    rules=_dnat(1, ()),
)

_SG_LB_ONLY = NetnsScenario(
    name="sg-lb-only",
    summary="brokers behind per-broker NAT, but the security group opens only the load balancer: timeouts; "
            "and no hairpin NAT for a host in the brokers' own network",
    story="Every broker advertises its public address (198.19.0.1N, DNAT to it); the laptop's packets to any "
          "of them are dropped silently, only 198.19.0.10 is let in: connects time out. A host in the brokers' "
          "own network (vpc-app) bootstraps at broker 1's private address and is sent the public ones; the router "
          "DNATs them back into that network without masquerading (no hairpin NAT), the broker answers from its "
          "private address and the host resets it: those connects time out too.",
    cluster=_cluster("sg-lb-only", 2, advertise_public=True),
    vantages=(_LAPTOP_PUBLIC, ClientNamespace("vpc", f"{LB}:{PORT}", note="inside the VPC: the group lets it in"),
              ClientNamespace("vpc-app", f"{private(1)}:{PORT}", in_cluster=True,
                              note="in the brokers' own network, bootstraps at a private address; no hairpin NAT")),
    rules=_dnat(1, (1, 2)) + _filter("prerouting", "-150", f'iifname "{{if[laptop]}}" ip daddr != {LB} drop'),
)

_WATCHED = {"kafka.example.test": LB, COLLECTOR_NAME: COLLECTOR}

_REJECT_ONE = NetnsScenario(
    name="reject-one",
    summary="per-broker NAT, but a firewall rejects broker 2 with ICMP admin-prohibited; three vantages watch "
            "it and publish to a collector on a monitoring network",
    story="Brokers advertise their public addresses and the router NATs each; a rule rejects the laptop's "
          "packets to broker 2 with ICMP administratively prohibited: EHOSTUNREACH at once, for broker 2 only. "
          "Each vantage can also reach the monitoring network (198.18.2.0/24), where a collector broker holds "
          f"the topic {REPORTS_TOPIC}: the multi-vantage pipeline of docs/scheduling.md.",
    cluster=_cluster("reject-one", 2, advertise_public=True),
    vantages=(ClientNamespace("laptop", f"kafka.example.test:{PORT}", routes=(PUBLIC_NET, MONITORING_NET),
                              hosts=_WATCHED,
                              note="on the internet: routes the public range and the monitoring network"),
              ClientNamespace("vpc", f"{LB}:{PORT}", hosts=_WATCHED, note="inside the VPC: routes everything"),
              ClientNamespace("branch", f"kafka.example.test:{PORT}", routes=(PUBLIC_NET, MONITORING_NET),
                              hosts=_WATCHED, note="a branch office whose link to the monitoring network can be cut")),
    monitoring=_collector(),
    rules=_dnat(1, (1, 2)) + _filter(
        "forward", "filter", f'iifname "{{if[laptop]}}" ip daddr {private(2)} reject with icmp type admin-prohibited'),
)

_NAT_OK = NetnsScenario(
    name="nat-ok",
    summary="per-broker NAT done right: each broker advertises its own public address (healthy); "
            "an IPv6-only office reaches the brokers' ULA addresses across the router",
    story="The load balancer for bootstrap, a public address per broker, each DNATed to that broker, and "
          "listeners advertising the public addresses: every client works from the internet and the VPC. "
          "The brokers also listen on IPv6 (CLIENT6, fd6b:7072:6f62:100::1N port 9093, no NAT); an office "
          "with only an IPv6 route to that prefix bootstraps there and reaches every advertised IPv6 endpoint. "
          "A host in the brokers' own network (vpc-app) uses the public addresses too: the router masquerades what "
          "it DNATs back into that network (hairpin NAT), so the answers come back through it.",
    cluster=_cluster("nat-ok", 2, advertise_public=True, ipv6=True),
    vantages=(_LAPTOP_PUBLIC, ClientNamespace("vpc", f"{LB}:{PORT}"),
              ClientNamespace("office6", f"[{private6(1)}]:{PORT6}", routes=(CLUSTER6_NET,),
                              note="IPv6 only: routes the cluster's ULA prefix, nothing else"),
              ClientNamespace("vpc-app", f"{LB}:{PORT}", in_cluster=True,
                              note="in the brokers' own network, through the public addresses: hairpin NAT")),
    rules=_dnat(1, (1, 2)) + _HAIRPIN,
    ipv6=True,
)

MTU_LIMIT = 1000  # bytes: larger packets toward the VPN vantage vanish, with no ICMP

_MTU_VPN = NetnsScenario(
    name="mtu-vpn",
    summary="a VPN that silently drops packets over 1000 bytes toward the office (path-MTU black hole)",
    story="The office reaches the VPC through a tunnel that loses every packet over 1000 bytes and sends no "
          "ICMP back. Connects and small answers (ApiVersions) arrive; a Metadata answer listing all 30 topics "
          "does not. The VPC itself sees a healthy cluster.",
    cluster=_cluster("mtu-vpn", 2, advertise_public=False, topics=30),
    vantages=(ClientNamespace("office-vpn", f"{private(1)}:{PORT}", note="behind the VPN: routes everything"), _VPC),
    # In forward, toward the vantage: what a tunnel with a smaller MTU and no ICMP does to the brokers' answers.
    rules=_filter("forward", "filter", f'oifname "{{if[office-vpn]}}" meta length > {MTU_LIMIT} drop'),
)

NETNS_SCENARIOS: dict[str, NetnsScenario] = {
    s.name: s for s in (_LB_PRIVATE, _SG_LB_ONLY, _REJECT_ONE, _NAT_OK, _MTU_VPN)
}


def get_netns_scenario(name: str) -> NetnsScenario:
    """The namespace scenario of that name, or a usage error listing them."""
    try:
        return NETNS_SCENARIOS[name]
    except KeyError:
        known = ", ".join(sorted(NETNS_SCENARIOS))
        raise UsageError(f"unknown namespace scenario {name!r}: choose one of {known}") from None
