"""`kprobe list`: what `kcat -L` shows, plus what the gap does to each partition.

The metadata comes from the bootstrap connection itself (kprobe's wire client, see
`kprobe.kafka.connection`), so the listing works in exactly the broken-advertised case where librdkafka
clients time out. With reachability on, every advertised endpoint is resolved and connected to
as `kprobe probe` does, and each partition learns whether its leader is reachable from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kprobe.config import ListOptions
from kprobe.findings.consistency import LISTENER_NOT_FOUND
from kprobe.models import CLIENTS_CONNECT, BootstrapResult, EndpointResult, PartitionInfo, TopicInfo
from kprobe.probe.bootstrap import fetch_all
from kprobe.probe.context import RunContext
from kprobe.probe.endpoints import collect
from kprobe.probe.reach import probe_endpoints


@dataclass(frozen=True)
class PartitionView:
    """A partition with what the listing derives from it."""

    topic: str
    info: PartitionInfo
    leader_known: bool
    leader_reachable: bool | None

    @property
    def offline(self) -> bool:
        """No leader: nobody can produce to or consume from it."""
        return self.info.leader < 0

    @property
    def listener_not_found(self) -> bool:
        """Led by a broker that lacks the listener asked (Kafka's error 72): not offline, out of its reach."""
        return self.info.error_code == LISTENER_NOT_FOUND

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than replicas."""
        return len(self.info.isrs) < len(self.info.replicas)


@dataclass(frozen=True)
class Listing:
    """The answer of one bootstrap, and reachability of its advertised brokers if asked."""

    bootstrap: BootstrapResult
    attempts: tuple[BootstrapResult, ...]
    topics: tuple[TopicInfo, ...]
    query: tuple[str, ...]
    reachability: dict[int, EndpointResult] | None
    partitions: tuple[PartitionView, ...]
    interrupted: bool = False

    @property
    def answered(self) -> bool:
        """Whether any bootstrap gave metadata."""
        return self.bootstrap.status == "ok"

    @property
    def topic_errors(self) -> tuple[TopicInfo, ...]:
        """Topics the broker reported in error (unknown, unauthorised, ...)."""
        return tuple(t for t in self.topics if t.error_code != 0)

    @property
    def unreachable_leaders(self) -> tuple[PartitionView, ...]:
        """Partitions whose leader this host cannot reach: producing to them fails from here."""
        return tuple(p for p in self.partitions if p.leader_reachable is False)

    @property
    def status(self) -> str:
        """ok, gap (topic errors, offline partitions, unreachable leaders), failed or interrupted."""
        if self.interrupted:
            return "interrupted"
        if not self.answered:
            return "failed"
        if self.topic_errors or self.unreachable_leaders or any(p.offline for p in self.partitions):
            return "gap"
        if self.reachability is not None and any(r.status not in CLIENTS_CONNECT for r in self.reachability.values()):
            return "gap"
        return "ok"


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
        return Listing(attempts[0], tuple(attempts), (), tuple(options.topics), None, (), interrupted=True)
    try:
        return _listing(options, attempts, ctx)
    except KeyboardInterrupt:  # during the reachability check: the metadata stands, reachability unknown
        return replace(_listing(replace(options, reachability=False), attempts, ctx), interrupted=True)


def _listing(options: ListOptions, attempts: Sequence[BootstrapResult], ctx: RunContext) -> Listing:
    chosen = next((a for a in attempts if a.status == "ok"), attempts[0])
    meta = chosen.metadata
    # librdkafka sorts partitions by id, and kcat's users read them so.
    topics = tuple(
        replace(t, partitions=tuple(sorted(t.partitions, key=lambda p: p.partition))) for t in meta.topics
    ) if meta else ()
    if not options.internal:
        topics = tuple(t for t in topics if not t.is_internal)
    reach: dict[int, EndpointResult] | None = None
    if options.reachability and meta is not None:
        results = probe_endpoints(collect([chosen]), ctx)
        reach = {r.endpoint.node_id: r for r in results}
    known = {b.node_id for b in chosen.brokers}
    views = []
    for topic in topics:
        for p in topic.partitions:
            reachable = None
            if reach is not None and p.leader >= 0:
                endpoint = reach.get(p.leader)
                if endpoint is None:
                    reachable = False
                elif endpoint.status != "unchecked":  # cut off by the deadline: unknown, not unreachable
                    reachable = endpoint.status in ("reachable", "degraded", "partial")
            views.append(PartitionView(topic.name, p, p.leader in known, reachable))
    return Listing(chosen, tuple(attempts), topics, tuple(options.topics), reach, tuple(views))
