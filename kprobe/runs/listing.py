"""`kprobe list`: what `kcat -L` shows, plus what the gap does to each partition.

The metadata comes from the bootstrap connection itself (kprobe's wire client, see
`kprobe.kafka.connection`), so the listing works in exactly the broken-advertised case where librdkafka
clients time out. With reachability on, every advertised endpoint is resolved and connected to
as `kprobe probe` does, and each partition learns whether its leader is reachable from here.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from itertools import count, repeat
from typing import NamedTuple

from kprobe.findings.common import maybe_cluster_name
from kprobe.findings.consistency import LISTENER_NOT_FOUND
from kprobe.hostport import format_hostport, host_problem, is_ip_literal, is_loopback_ip, is_loopback_name
from kprobe.models import (
    CLIENTS_CONNECT,
    AdvertisedBroker,
    BootstrapResult,
    DnsStatus,
    EndpointResult,
    PartitionRun,
    PartitionTable,
    TopicInfo,
)
from kprobe.options import ListOptions
from kprobe.probe.bootstrap import fetch_all
from kprobe.probe.context import RunContext
from kprobe.probe.endpoints import collect
from kprobe.probe.reach import probe_endpoints
from kprobe.probe.resolve import Resolver, resolve_all
from kprobe.records import record, replace


class PartitionView(NamedTuple):
    """A partition the listing has something to say about (only those are made), as it sorts in the
    listing: by topic, then id, then where it stood in the broker's answer.
    """

    topic: str
    partition: int
    position: int
    leader: int
    run: PartitionRun
    row: int  # its place in `run`

    @property
    def offline(self) -> bool:
        """No leader: nobody can produce to or consume from it."""
        return self.leader < 0

    @property
    def replicas(self) -> tuple[int, ...]:
        """Its replica ids."""
        return self.run.info(self.row).replicas


@record
class Listing:
    """The answer of one bootstrap, and reachability of its advertised brokers if asked.

    Partitions stay in the topics' `PartitionTable`s; only those with something to say (offline,
    under-replicated, led from outside the listener or the broker list, unreachable) become
    `PartitionView`s, so a healthy 100,000-partition listing makes no object per partition.
    """

    bootstrap: BootstrapResult
    attempts: tuple[BootstrapResult, ...]
    topics: tuple[TopicInfo, ...]
    query: tuple[str, ...]
    reachability: dict[int, EndpointResult] | None
    partition_count: int = 0
    known: frozenset[int] = frozenset()  # the ids in the broker list
    # Partitions with no leader, those answered LISTENER_NOT_FOUND (Kafka's error 72) apart.
    offline: tuple[PartitionView, ...] = ()
    listener_not_found: tuple[PartitionView, ...] = ()
    under_replicated: tuple[PartitionView, ...] = ()  # of those with a leader
    unknown_leader: tuple[PartitionView, ...] = ()  # led by an id missing from the broker list
    unreachable_leaders: tuple[PartitionView, ...] = ()  # producing to them fails from here
    interrupted: bool = False

    @property
    def answered(self) -> bool:
        """Whether any bootstrap gave metadata."""
        return self.bootstrap.status == "ok"

    @property
    def topic_errors(self) -> tuple[TopicInfo, ...]:
        """Topics the broker reported in error (unknown, unauthorised, ...)."""
        return tuple(t for t in self.topics if t.error_code != 0)

    def leader_known(self, leader: int) -> bool:
        """Whether a leader id is in the broker list (clients know where to send)."""
        return leader in self.known

    def leader_reachable(self, leader: int) -> bool | None:
        """Whether this host reaches a leader; None without reachability, without a leader, or unchecked."""
        return _reachable(self.reachability, leader)

    @property
    def status(self) -> str:
        """ok, gap (topic errors, offline partitions, unreachable leaders), failed or interrupted."""
        if self.interrupted:
            return "interrupted"
        if not self.answered:
            return "failed"
        leaderless = self.offline or any(p.offline for p in self.listener_not_found)
        if self.topic_errors or self.unreachable_leaders or leaderless:
            return "gap"
        if self.reachability is not None and any(r.status not in CLIENTS_CONNECT for r in self.reachability.values()):
            return "gap"
        return "ok"


def _reachable(reach: dict[int, EndpointResult] | None, leader: int) -> bool | None:
    if reach is None or leader < 0:
        return None
    endpoint = reach.get(leader)
    if endpoint is None:
        return False
    if endpoint.status == "unchecked":  # cut off by the deadline: unknown, not unreachable
        return None
    # A `partial` leader is a gap, as in the probe: some clients (Java, when IPv4 fails) cannot produce to it.
    return endpoint.status in CLIENTS_CONNECT


def run_list(options: ListOptions) -> Listing:
    """Ask the first bootstrap that answers for metadata; optionally test its brokers.

    Ctrl-C still gives a Listing (status `interrupted`) with whatever metadata had arrived, so
    `-J` prints a whole document as `probe --json` does.
    """
    ctx = RunContext.start(options.bootstraps, options.props, timeout=options.timeout, run_for=options.deadline,
                           nameservers=options.nameservers, resolve=options.resolve, connect_to=options.connect_to)
    wanted = list(options.topics) or None
    try:
        attempts = fetch_all(options.bootstraps, ctx, topics=wanted)
    except KeyboardInterrupt:
        attempts = [BootstrapResult(address=a.hostport, status="timeout", error="interrupted before an answer")
                    for a in options.bootstraps]
        return Listing(attempts[0], tuple(attempts), (), tuple(options.topics), None, interrupted=True)
    try:
        return _listing(options, attempts, ctx)
    except KeyboardInterrupt:  # during the reachability check: the metadata stands, reachability unknown
        return replace(_listing(replace(options, reachability=False), attempts, ctx), interrupted=True)


def _listing(options: ListOptions, attempts: Sequence[BootstrapResult], ctx: RunContext) -> Listing:
    chosen = next((a for a in attempts if a.status == "ok"), attempts[0])
    meta = chosen.metadata
    # Tables list their partitions by id, as librdkafka sorts them and kcat's users read them.
    topics = tuple(replace(t, partitions=PartitionTable.of(t.partitions)) for t in meta.topics) if meta else ()
    if not options.internal:
        topics = tuple(t for t in topics if not t.is_internal)
    reach: dict[int, EndpointResult] | None = None
    if options.reachability and meta is not None:
        results = probe_endpoints(collect([chosen]), ctx)
        reach = {r.endpoint.node_id: r for r in results}
    known = frozenset(b.node_id for b in chosen.brokers)
    notable: dict[str, list[PartitionView]] = {k: [] for k in _NOTABLE}
    total = 0
    for topic in topics:
        table = topic.partitions
        assert isinstance(table, PartitionTable)
        found: dict[str, list[PartitionView]] = {k: [] for k in _NOTABLE}
        for run in table.runs:
            total += len(run)
            _notable(topic.name, run, known, reach, found)
        for kind, views in found.items():
            notable[kind] += sorted(views)  # a run gathers partitions from all over its topic
    return Listing(chosen, tuple(attempts), topics, tuple(options.topics), reach, partition_count=total, known=known,
                   offline=tuple(notable["offline"]), listener_not_found=tuple(notable["lnf"]),
                   under_replicated=tuple(notable["under"]), unknown_leader=tuple(notable["unknown"]),
                   unreachable_leaders=tuple(notable["unreachable"]))


_NOTABLE = ("offline", "lnf", "under", "unknown", "unreachable")
_VIEW = partial(tuple.__new__, PartitionView)


def _notable(topic: str, run: PartitionRun, known: frozenset[int], reach: dict[int, EndpointResult] | None,
             found: dict[str, list[PartitionView]]) -> None:
    """Add a run's partitions that have something to say, judged per leader id and per run, not
    per partition: a run shares its error code and its replica-list lengths, and has few leaders.
    """
    leaders = run.leaders
    bad = {leader for leader in set(leaders)
           if leader < 0 or leader not in known or _reachable(reach, leader) is False}
    lnf = run.error_code == LISTENER_NOT_FOUND
    under = run.isrs < run.replicas
    if not bad and not lnf and not under:
        return
    # tuple.__new__ is what PartitionView._make calls, minus a Python frame per partition.
    views = map(_VIEW, zip(repeat(topic), run.ids, run.positions, leaders, repeat(run), count()))
    if under and not bad and not lnf:  # every partition of the run, and nothing else to say
        found["under"] += views
        return
    for view in views:
        leader = view.leader
        if lnf:
            found["lnf"].append(view)
        elif leader < 0:
            found["offline"].append(view)
        if under and leader >= 0:
            found["under"].append(view)
        if leader >= 0 and leader not in known:
            found["unknown"].append(view)
        if leader in bad and _reachable(reach, leader) is False:
            found["unreachable"].append(view)


# Private DNS zones of cloud networks: only the network's own resolver answers for these names (AWS's
# <region>.compute.internal and us-east-1's ec2.internal, Google Cloud's zonal and project-wide
# .internal names, Azure's internal.cloudapp.net).
_PRIVATE_ZONE = re.compile(r"(^|\.)(compute\.internal|ec2\.internal|c\.[a-z0-9-]+\.internal|"
                           r"[a-z0-9-]+\.c\.[a-z0-9-]+\.internal|internal\.cloudapp\.net)\.?$")


def _known_problem(host: str, bootstrap_host: str, connected_to: str | None, in_cluster: bool) -> str | None:
    """Why clients here cannot use an advertised host, known from the names alone; None when only a probe can say."""
    if host_problem(host):
        return "not a usable host name"
    if (is_loopback_name(host) or is_loopback_ip(host)) and connected_to and not is_loopback_ip(connected_to):
        return "a loopback address, where every client connects to its own machine"
    if maybe_cluster_name(host) and not in_cluster:  # the Kubernetes rules load only for a name that may be one
        from kprobe.findings.kubernetes import cluster_name

        if cluster_name(host) is not None and cluster_name(bootstrap_host) is None:
            return "a Kubernetes cluster-internal name, which only the cluster's DNS resolves"
    if _PRIVATE_ZONE.search(host.lower()) and not _PRIVATE_ZONE.search(bootstrap_host.lower()):
        return "a cloud network's private DNS name, which resolves only inside that network"
    return None


def _unmapped(listing: Listing, resolve: Mapping[str, str] | None,
              connect_to: Mapping[tuple[str, int], tuple[str, int]] | None) -> Iterator[AdvertisedBroker]:
    """The bootstrap's brokers but those the user remapped (--resolve, --connect-to): those are the mapping's."""
    names, ends = resolve or {}, connect_to or {}
    for broker in listing.bootstrap.brokers:
        if broker.host.lower().rstrip(".") not in names and (broker.host.lower(), broker.port) not in ends:
            yield broker


def _in_cluster(in_cluster: bool | None) -> bool:
    """Whether this process runs in a Kubernetes pod, where the cluster's DNS answers its internal names."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) if in_cluster is None else in_cluster


def _bootstrap_host(listing: Listing) -> str:
    return listing.bootstrap.address.rpartition(":")[0].strip("[]")


def _advertise(hits: Sequence[tuple[int, str]]) -> tuple[str, str]:
    """`broker 1 advertises` / `brokers 0, 1 and 2 advertise`, and the endpoints (the first three, then a count)."""
    ids = [str(node) for node, _ in hits]
    who = (f"broker {ids[0]} advertises" if len(ids) == 1 else
           f"brokers {', '.join(ids[:-1])} and {ids[-1]} advertise")
    shown = ", ".join(e for _, e in hits[:3]) + (f" and {len(hits) - 3} more" if len(hits) > 3 else "")
    return who, shown


def unchecked_gap(listing: Listing, *, resolve: Mapping[str, str] | None = None,
                  connect_to: Mapping[tuple[str, int], tuple[str, int]] | None = None,
                  in_cluster: bool | None = None) -> str | None:
    """One line for a listing made without --reachability, when its names alone show a gap; else None.

    Without --reachability `list` prints kcat's lines and exits 0, as kcat does, even where every
    advertised endpoint is unusable from here. Resolving and connecting would be network
    work the user did not ask for; what the advertised names themselves say is free: a host no
    client can use, a loopback address handed to a client that came from elsewhere, a Kubernetes
    cluster-internal name outside a pod (KUBERNETES_SERVICE_HOST unset), a cloud network's private DNS
    name reached through a name outside that zone. Endpoints the user remapped are left to the mapping.
    """
    if listing.reachability is not None or not listing.answered:
        return None
    inside = _in_cluster(in_cluster)
    b = listing.bootstrap
    bootstrap_host = _bootstrap_host(listing)
    hits: list[tuple[int, str, str]] = []
    for broker in _unmapped(listing, resolve, connect_to):
        why = _known_problem(broker.host, bootstrap_host, b.connected_to, inside)
        if why is not None:
            hits.append((broker.node_id, format_hostport(broker.host, broker.port), why))
    if not hits:
        return None
    reasons = {why for _, _, why in hits}
    who, shown = _advertise([(node, end) for node, end, _ in hits])
    many = len(hits) > 1
    why = (("each " if many else "") + reasons.pop() if len(reasons) == 1
           else "names or addresses this machine cannot use as advertised")
    return (f"{who} {shown}, {why}: clients here will bootstrap and then fail. This listing did not check "
            f"{'them' if many else 'it'} from here: add --reachability, or run `kprobe probe -b {b.address}`")


# What a failed lookup is called in the line, by the resolver's status.
_NOT_RESOLVED: dict[DnsStatus, str] = {"nxdomain": "no such name", "no_answer": "no address for it",
                                       "servfail": "the DNS server failed", "error": "not resolvable"}


def unresolved_gap(listing: Listing, *, nameservers: Sequence[tuple[str, int]] = (), timeout: float,
                   resolve: Mapping[str, str] | None = None,
                   connect_to: Mapping[tuple[str, int], tuple[str, int]] | None = None,
                   in_cluster: bool | None = None) -> str | None:
    """One line for a listing made without --reachability whose advertised names do not resolve here; else None.

    The Docker case: the bootstrap is an address (a published port), the broker advertises its
    container's name, and kcat's lines show nothing wrong. Only a lookup can tell, so each advertised
    host is looked up once, all at once, through the resolver a probe would use (--nameserver
    honoured), and the whole of it ends within one --timeout. Names the user remapped, IP literals,
    the bootstrap's own host (it resolved: the listing came through it) and names whose shape
    `unchecked_gap` already names are not looked up.
    """
    if listing.reachability is not None or not listing.answered:
        return None
    inside = _in_cluster(in_cluster)
    b = listing.bootstrap
    bootstrap_host = _bootstrap_host(listing)
    brokers = [broker for broker in _unmapped(listing, resolve, connect_to)
               if not is_ip_literal(broker.host.strip("[]"))
               and broker.host.lower().rstrip(".") != bootstrap_host.lower().rstrip(".")
               and _known_problem(broker.host, bootstrap_host, b.connected_to, inside) is None]
    if not brokers:
        return None
    # whether each name resolves is all the hint says: getaddrinfo alone, no DNS detail (nor its import)
    looked_up = resolve_all((broker.host for broker in brokers), Resolver(nameservers, timeout=timeout, detail=False),
                            deadline=time.monotonic() + timeout)
    hits: list[tuple[int, str]] = []
    reasons: dict[str, None] = {}
    for broker in brokers:
        dns = looked_up[broker.host]
        if dns.status == "ok":
            continue
        hits.append((broker.node_id, format_hostport(broker.host, broker.port)))
        reasons[_NOT_RESOLVED.get(dns.status, f"no answer within --timeout {timeout:g}s")] = None
    if not hits:
        return None
    who, shown = _advertise(hits)
    many = len(hits) > 1
    where = "through --nameserver" if nameservers else "here"
    return (f"{who} {shown}, {'names that do' if many else 'a name that does'} not resolve {where} "
            f"({'; '.join(reasons)}): clients here will bootstrap and then fail. Have the broker advertise a name "
            f"or address this network resolves (advertised.listeners, or a listener of its own for this network), "
            f"or add {'them' if many else 'it'} to this machine's DNS or hosts file; "
            f"`kprobe probe -b {b.address}` says which, and checks the rest")
