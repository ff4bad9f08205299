"""Observations for the pure rule tests, and the one check every table row goes through.

The findings are pure (observations in, findings out), so each code is proven here on plain
data built with the models, no broker and no packet: situations the loopback-only lab cannot
stage (a client on another network, a NAT, an expired certificate, split-horizon DNS) are as easy
as the ones it can. The values follow the seeds' scenarios (the design notes, sections 1 and 5):
the teaching broker's LISTENER_BOB / FRED / ALICE, the AWS `ip-172-31-18-160` case, the
three-broker lab's CROSSED / TWIN / IMPOSTOR listeners, the TLS lab's certificates.

Builders keep a row short; everything a row's verdict depends on is spelt out in the row.
Error texts copy what the probe steps write (kprobe/probe/*.py), so the messages read as in a
real report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pytest

from kprobe.findings.diagnose import diagnose
from kprobe.hostport import is_ip_literal
from kprobe.models import (
    AdvertisedBroker,
    Application,
    ApplicationAnswer,
    BootstrapResult,
    BootstrapStatus,
    ClusterMetadata,
    ControllerBootstrapResult,
    DnsResult,
    DnsSource,
    DnsStatus,
    Endpoint,
    EndpointResult,
    Finding,
    Identity,
    PartitionInfo,
    Protocol,
    Remap,
    Roundtrip,
    TcpResult,
    TcpStatus,
    TlsFailure,
    TlsResult,
    TopicInfo,
)
from kprobe.probe.reach import endpoint_status

# Kafka's own example cluster id (the quickstart's), and a second one for a mixed bootstrap list.
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"
OTHER_CLUSTER = "5L6g3nShT-eMCtK--X86sw"

# What a Docker network, a VPC and the internet look like from the client.
KAFKA0_DOCKER_IP = "172.18.0.2"                       # the teaching broker's container
AWS_PUBLIC = "ec2-34-211-52-10.us-west-2.compute.amazonaws.com"
AWS_PUBLIC_IP = "34.211.52.10"
AWS_PRIVATE = "ip-172-31-18-160.us-west-2.compute.internal"
AWS_PRIVATE_IP = "172.31.18.160"

Expected = tuple[str, str, int | None, str | None]  # (code, severity, node_id, endpoint)
# (code, node_ids, endpoints): every broker and endpoint one finding of that code concerns (Finding.concerns).
Concerns = tuple[str, tuple[int, ...], tuple[str, ...]]
Phrase = tuple[str, int | None, Literal["message", "fix"], str]  # (code, node_id, field, text)


def brokers(*triples: tuple[int, str, int]) -> tuple[AdvertisedBroker, ...]:
    """Advertised brokers from (node_id, host, port)."""
    return tuple(AdvertisedBroker(n, h, p) for n, h, p in triples)


def boot(
    address: str, *, connected_to: str | None, advertises: Sequence[tuple[int, str, int]] = (),
    node_id: int | None = None, cluster_id: str | None = CLUSTER, protocol: Protocol | None = None,
    topics: Sequence[TopicInfo] = (), application: ApplicationAnswer | None = None,
    listener_settings: Mapping[str, str] | None = None,
) -> BootstrapResult:
    """A bootstrap that answered: it connected to `connected_to` and advertises `advertises`.

    `node_id` is what DescribeConfigs on that very connection said (None: not checked), the
    evidence a proposed listener line needs; `listener_settings` what the same answer said of the
    node's listeners. `application` is what the same connection answered after its metadata
    (coordinators, the internal topics' settings, topics asked by name).
    """
    meta = ClusterMetadata(brokers=brokers(*advertises), cluster_id=cluster_id, controller_id=1, topics=tuple(topics))
    return BootstrapResult(address=address, status="ok", answered_by_id=-1, answered_by_name=f"{address}/bootstrap",
                           connected_to=connected_to, metadata=meta, ms=3.1, node_id=node_id, protocol=protocol,
                           application=application, listener_settings=tuple((listener_settings or {}).items()))


def topic(name: str, *partitions: tuple[int, Sequence[int], int]) -> TopicInfo:
    """A topic from (leader, replicas, error code) per partition, numbered in order, as Metadata lists it.

    Replicas missing from the answering listener's broker list are also offline, as Kafka 4.1 says.
    """
    return TopicInfo(name, tuple(
        PartitionInfo(partition=i, leader=leader, replicas=tuple(replicas), isrs=tuple(replicas), error_code=code)
        for i, (leader, replicas, code) in enumerate(partitions)))


def dead_boot(
    address: str, status: BootstrapStatus, error: str, *, protocol: Protocol | None = None,
    tls_failure: TlsFailure | None = None, speaks_tls: bool | None = None, sasl_mechanisms: Sequence[str] = (),
    sasl_mechanism: str | None = None, token_unavailable: bool = False, wanted_protocol: Protocol | None = None,
    tls_alert: str | None = None,
) -> BootstrapResult:
    """A bootstrap that gave no metadata, as kprobe.probe.bootstrap records it."""
    return BootstrapResult(address=address, status=status, error=error, ms=2000.4, protocol=protocol,
                           tls_failure=tls_failure, speaks_tls=speaks_tls, sasl_mechanisms=tuple(sasl_mechanisms),
                           sasl_mechanism=sasl_mechanism, token_unavailable=token_unavailable,
                           wanted_protocol=wanted_protocol, tls_alert=tls_alert)


def resolved(host: str, *addresses: str, source: DnsSource = "system", in_hosts_file: bool = False,
             detail: DnsResult | None = None, server: str | None = None) -> DnsResult:
    """A name that resolved (an IP literal resolves to itself, with no lookup)."""
    return DnsResult(host=host, status="ok", addresses=addresses, ms=0.8, source=source, in_hosts_file=in_hosts_file,
                     detail=detail, server=server)


def failed(host: str, status: DnsStatus, error: str | None = None, *, source: DnsSource = "system",
           server: str | None = None, unfinished: bool = False) -> DnsResult:
    """A name that did not resolve; `error` defaults to what getaddrinfo says for NXDOMAIN."""
    return DnsResult(host=host, status=status, ms=12.0, source=source, server=server, unfinished=unfinished,
                     error=error if error is not None else f"{host}: Name or service not known")


_ERRNO_TEXT = {"refused": "ECONNREFUSED: Connection refused", "timeout": "timed out",
               "unreachable": "EHOSTUNREACH: No route to host", "error": "ECONNRESET: Connection reset by peer"}


def endpoint(
    node_id: int, host: str, port: int, via: str | Sequence[str], *,
    dns: DnsResult | Sequence[str] = (), connect: TcpStatus | dict[str, TcpStatus] = "ok",
    unfinished: Iterable[str] = (), identity: Identity | None = None,
    tls: TlsResult | None = None, compared: Sequence[DnsResult] = (), remap: Remap | None = None,
) -> EndpointResult:
    """One advertised endpoint as the probe leaves it.

    `dns`: a DnsResult, or the addresses the name resolved to (an IP literal: itself, by default).
    `connect`: one TCP status for every address, or one per address; addresses in `unfinished`
    were cut by the run's deadline. The endpoint's status is the probe's own verdict on those
    (kprobe.probe.reach.endpoint_status), so a row cannot hold a combination the probe never makes.
    """
    if not isinstance(dns, DnsResult):
        if dns:
            dns = resolved(host, *dns)
        elif is_ip_literal(host):
            dns = resolved(host, host, source="literal")
        else:
            raise ValueError(f"{host} is a name: give the addresses it resolves to")
    per_address = connect if isinstance(connect, dict) else dict.fromkeys(dns.addresses, connect)
    cut = set(unfinished)
    tcp = tuple(
        TcpResult(address=a, port=port, status=per_address[a], ms=None if a in cut else 0.4, unfinished=a in cut,
                  error=None if per_address[a] == "ok" else _ERRNO_TEXT.get(per_address[a]))
        for a in dns.addresses
    ) if dns.status == "ok" else ()
    via = (via,) if isinstance(via, str) else tuple(via)
    return EndpointResult(
        endpoint=Endpoint(node_id=node_id, host=host, port=port, advertised_by=via, remap=remap), dns=dns, tcp=tcp,
        status=endpoint_status(dns, tcp), identity=identity, tls=tls, compared_dns=tuple(compared),
    )


def invalid_endpoint(node_id: int, host: str, port: int, via: str, why: str) -> EndpointResult:
    """An endpoint never sent to a resolver (kprobe.probe.reach: a host or port no client can use)."""
    dns = DnsResult(host=host, status="error", ms=0.0, source="system", error=why)
    return EndpointResult(endpoint=Endpoint(node_id=node_id, host=host, port=port, advertised_by=(via,)), dns=dns,
                          tcp=(), status="unresolvable")


def is_node(node_id: int, address: str, advertised: Sequence[tuple[int, str, int]]) -> Identity:
    """The identity check's answer when the broker there says it is `node_id`."""
    return Identity(status="match", node_id=node_id, address=address, advertised=brokers(*advertised), ms=4.2)


def answers_as(node_id: int, address: str, advertised: Sequence[tuple[int, str, int]]) -> Identity:
    """The identity check's answer when *another* node answers (DescribeConfigs named it)."""
    return Identity(status="mismatch", node_id=node_id, address=address, advertised=brokers(*advertised), ms=4.2)


@dataclass(frozen=True)
class Case:
    """One row: a named situation, what the probe observed, and every finding it must give.

    `expect` is the whole multiset of (code, severity, node_id, endpoint): a finding the row does
    not name fails it, so each row is also the negative for every other code. `says` and
    `never_says` pin key phrases of one finding's message or fix, by (code, node_id).
    """

    name: str
    bootstraps: tuple[BootstrapResult, ...]
    endpoints: tuple[EndpointResult, ...]
    expect: tuple[Expected, ...]
    says: tuple[Phrase, ...] = ()
    never_says: tuple[Phrase, ...] = ()
    xfail: str | None = None  # a known wrong verdict of a rule, with why; strict: fixing it fails the row
    # --controllers: each address's answer and each advertised controller endpoint (KIP-919's admin path).
    controllers: tuple[ControllerBootstrapResult, ...] = ()
    controller_endpoints: tuple[EndpointResult, ...] = ()
    # --roundtrip: what the real client did, to be set beside the verdict.
    roundtrip: Roundtrip | None = None
    concerns: tuple[Concerns, ...] = ()
    # The report's application section (kprobe.probe.application), judged from the row's observations.
    application: Application | None = None


def case(name: str, bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult],
         expect: Sequence[Expected], *, says: Sequence[Phrase] = (), never_says: Sequence[Phrase] = (),
         xfail: str | None = None, controllers: Sequence[ControllerBootstrapResult] = (),
         controller_endpoints: Sequence[EndpointResult] = (), roundtrip: Roundtrip | None = None,
         concerns: Sequence[Concerns] = (), application: Application | None = None) -> Case:
    """A Case from lists, so rows read without tuple noise."""
    return Case(name, tuple(bootstraps), tuple(endpoints), tuple(expect), tuple(says), tuple(never_says), xfail,
                tuple(controllers), tuple(controller_endpoints), roundtrip, tuple(concerns), application)


def params(cases: Sequence[Case]) -> list[object]:
    """pytest parameters named after their rows, so a failure says which situation broke."""
    names = [c.name for c in cases]
    duplicated = {n for n in names if names.count(n) > 1}
    assert not duplicated, f"two rows share a name: {duplicated}"
    return [
        pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)] if c.xfail else [])
        for c in cases
    ]


def check(c: Case) -> list[Finding]:
    """Run diagnose() on the row's observations and hold its findings to the row.

    Messages are built here rather than left to assertion rewriting: this module is a helper,
    not a test module, and a failing row must say what was missing and what was extra.
    """
    found = diagnose(c.bootstraps, c.endpoints, c.controllers, c.controller_endpoints, c.roundtrip, c.application)
    got = Counter((f.code, f.severity, f.node_id, f.endpoint) for f in found)
    want = Counter(c.expect)
    if got != want:
        raise AssertionError(f"{c.name}: missing {sorted(want - got, key=str)}, unexpected "
                             f"{sorted(got - want, key=str)}\nall findings: {[(f.code, f.message) for f in found]}")
    for code, nodes, hostports in c.concerns:
        lists = [(f.node_ids, f.endpoints) for f in found if f.code == code]
        if (nodes, hostports) not in lists:
            raise AssertionError(f"{c.name}: no {code} concerns brokers {nodes} at {hostports}; they concern {lists}")
    for code, node, field, text in c.says:
        texts = [getattr(f, field) for f in found if f.code == code and f.node_id == node]
        if not any(text in t for t in texts):
            raise AssertionError(f"{c.name}: no {code} (node {node}) {field} says {text!r}; they say {texts}")
    for code, node, field, text in c.never_says:
        texts = [getattr(f, field) for f in found if f.code == code and f.node_id == node]
        if not texts:
            raise AssertionError(f"{c.name}: never_says names {code} (node {node}), which the row does not find")
        if any(text in t for t in texts):
            raise AssertionError(f"{c.name}: {code} (node {node}) {field} says {text!r}, which it must not: {texts}")
    return found


def covered(cases: Iterable[Case]) -> set[tuple[str, str]]:
    """The (code, severity) pairs the rows expect, from the rows themselves (rows marked xfail excluded)."""
    return {(code, severity) for c in cases if not c.xfail for code, severity, _, _ in c.expect}
