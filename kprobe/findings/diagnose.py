"""Every rule over one probe's results, in a stable order: the one entry point of the findings.

Pure: observations in, findings out, no network and no clock. Each finding says in plain words
what a client will experience and which listener setting to change; the codes are a public
contract (`kprobe.findings.catalogue`, docs/findings.md).

The rule modules for what a run may not have (TLS results, compared DNS views, controllers, a round
trip, a shape's failing or shared hosts) are imported only when the run has it: a healthy PLAINTEXT
probe is typed again and again, and its start-up is most of its time (tests/test_imports.py holds the
imports to it).
Each gate asks only for what its rules' first check asks, so the findings are the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kprobe.findings.advertised import advertised_findings, hosts_file_finding, working_bootstraps
from kprobe.findings.bootstrap import bootstrap_finding, path_mtu_finding
from kprobe.findings.catalogue import INFO, SEVERITY_ORDER, WARNING, finding
from kprobe.findings.common import Repeat, merge_repeats
from kprobe.findings.consistency import consistency_findings
from kprobe.findings.identity import identity_findings
from kprobe.hostport import is_loopback_ip, is_loopback_name
from kprobe.models import (
    Application,
    BootstrapResult,
    ControllerBootstrapResult,
    EndpointResult,
    Finding,
    Roundtrip,
)


def diagnose(
    bootstraps: Sequence[BootstrapResult], endpoints: Sequence[EndpointResult],
    controllers: Sequence[ControllerBootstrapResult] = (), controller_endpoints: Sequence[EndpointResult] = (),
    roundtrip: Roundtrip | None = None, application: Application | None = None,
    credentials: Mapping[str, str] | None = None,
) -> list[Finding]:
    """All findings of one probe, errors first, in a stable order.

    `controllers` and `controller_endpoints` are what --controllers found (KIP-919's admin path);
    the run-level findings (incomplete, remapped, identity not checked) cover them too. `roundtrip`
    (--roundtrip) is judged last, against the verdict every other rule gave; `application` (coordinators,
    internal topics, named topics: kprobe.probe.application) after the endpoints, whose verdict it reads.
    `credentials`: the keys the user gave the SASL username and password under, which an authentication
    failure's fix names (kprobe.findings.bootstrap.credentials_named).
    """
    by_address = {b.address: b for b in bootstraps}
    findings: list[Finding] = []
    answered = [b for b in bootstraps if b.status == "ok"]
    for b in bootstraps:
        if b.status != "ok":
            findings.append(bootstrap_finding(b, answered_any=bool(answered), credentials=credentials))
        elif b.full_metadata_lost:
            findings.append(path_mtu_finding(b))
    findings.extend(consistency_findings(bootstraps, endpoints))
    per_endpoint: list[Finding | Repeat] = []
    working = working_bootstraps(bootstraps, endpoints)  # a first fix where another listener already works
    tls, views = _tls_inputs(endpoints), _view_inputs(endpoints)
    if tls:
        from kprobe.findings.tls import client_certificate_findings, expiring_once, tls_findings
    if views:
        from kprobe.findings.dns import dns_view_findings
    for result in endpoints:
        per_endpoint.extend(advertised_findings(result, by_address, working))
        per_endpoint.extend(identity_findings(result, by_address))
        if tls:
            per_endpoint.extend(tls_findings(result))
            per_endpoint.extend(client_certificate_findings(result))
        if views:
            per_endpoint.extend(dns_view_findings(result))
    # What recurs at several endpoints with one cause and one fix is said once, naming them all.
    findings.extend(merge_repeats(per_endpoint))
    findings.extend(hosts_file_finding(endpoints))
    if tls:
        findings.extend(expiring_once(endpoints))
    if _shape_inputs(endpoints):
        from kprobe.findings.shapes import shape_findings

        findings.extend(shape_findings(bootstraps, endpoints))
    if controllers or controller_endpoints:
        from kprobe.findings.controllers import controllers_findings

        findings.extend(controllers_findings(controllers, controller_endpoints))
    if application is not None or _sees_nothing(bootstraps):
        from kprobe.findings.application import application_findings

        findings.extend(application_findings(application, bootstraps, endpoints, findings))
    if roundtrip is not None:
        from kprobe.findings.roundtrip import roundtrip_findings

        findings.extend(roundtrip_findings(roundtrip, endpoints, findings))
    every = (*endpoints, *controller_endpoints)
    findings.extend(_incomplete(every, roundtrip))
    findings.extend(_remapped(every))
    unchecked = sorted({r.identity.detail or "" for r in every if r.identity and r.identity.status == "unchecked"
                        and not r.identity.unfinished and not r.identity.kraft_controller
                        and r.identity.tls_failure is None})  # a refused client certificate has its own finding
    if unchecked:
        findings.append(finding(
            "IDENTITY_NOT_CHECKED", INFO,
            "Identity not checked: " + "; ".join(unchecked) + ". Which node answers at each endpoint is unknown, "
            "so a port-forward or NAT rule that leads to the wrong broker would go unseen.",
            "Nothing to fix for clients; grant DescribeConfigs on the cluster to the probe's principal to have "
            "endpoint identities checked, or pass --no-identity."))
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.node_id if f.node_id is not None else -1, f.code))
    return findings


def _sees_nothing(bootstraps: Sequence[BootstrapResult]) -> bool:
    """Whether NO_TOPICS_VISIBLE can apply: a SASL bootstrap's full listing with no topic in it."""
    return any(b.status == "ok" and b.metadata is not None and not b.metadata.topics and not b.full_metadata_lost
               and (b.protocol or "").startswith("SASL") for b in bootstraps)


def _tls_inputs(endpoints: Sequence[EndpointResult]) -> bool:
    """Whether a TLS rule (kprobe.findings.tls) can apply: each reads a TLS result, or a TLS alert at identity."""
    return any(r.tls is not None or (r.identity is not None and r.identity.tls_failure is not None) for r in endpoints)


def _view_inputs(endpoints: Sequence[EndpointResult]) -> bool:
    """Whether a DNS-view rule (kprobe.findings.dns) can apply: each compares the answers of other servers."""
    return any(r.compared_dns for r in endpoints)


def _shape_inputs(endpoints: Sequence[EndpointResult]) -> bool:
    """Whether a shape rule (kprobe.findings.shapes) can apply: each needs an endpoint that fails to resolve or
    connect (port-forward, private address), or one non-loopback host at two endpoints (shared address).
    """
    seen: set[str] = set()
    for r in endpoints:
        if r.status in ("unresolvable", "unreachable"):
            return True
        host = r.endpoint.host
        if not (is_loopback_name(host) or is_loopback_ip(host)):
            key = host.lower().rstrip(".")
            if key in seen:
                return True
            seen.add(key)
    return False


def _incomplete(endpoints: Sequence[EndpointResult], roundtrip: Roundtrip | None = None) -> list[Finding]:
    """RUN_INCOMPLETE: what the run's end cut off is unknown, and a report must say so, never pass it for ok."""
    not_checked = [r.endpoint.hostport for r in endpoints if r.status == "unchecked"]
    tls_cut = [r.endpoint.hostport for r in endpoints if r.tls is not None and r.tls.unfinished]
    identity_cut = [r.endpoint.hostport for r in endpoints if r.identity is not None and r.identity.unfinished]
    trip_cut = [str(p.partition) for p in roundtrip.partitions if p.status == "unfinished"] if roundtrip else []
    # Unfinished with no partitions at all: the run ended before the round trip began.
    trip_unstarted = roundtrip is not None and roundtrip.status == "unfinished" and not roundtrip.partitions
    if not not_checked and not tls_cut and not identity_cut and not trip_cut and not trip_unstarted:
        return []
    parts = []
    if not_checked:
        parts.append(f"The run stopped (its deadline, or Ctrl-C) before {len(not_checked)} advertised endpoint(s) "
                     f"answered: {', '.join(not_checked)}. Nothing is known of them yet, so this report cannot say "
                     "they work.")
    if tls_cut:
        parts.append(f"The run's deadline came before the TLS check of {len(tls_cut)} endpoint(s) ended: "
                     f"{', '.join(tls_cut)}. Their certificates were not checked, so this report cannot say clients "
                     "accept them.")
    if identity_cut:
        parts.append(f"The run's deadline came before kprobe learnt which broker answers at {len(identity_cut)} "
                     f"endpoint(s): {', '.join(identity_cut)}. A rule that leads them to the wrong broker would go "
                     "unseen.")
    if (trip_cut or trip_unstarted) and roundtrip is not None:
        which = ("every partition" if trip_unstarted else f"{len(trip_cut)} partition(s): "
                 + ", ".join(trip_cut[:20]) + (" ..." if len(trip_cut) > 20 else ""))
        parts.append(f"The run ended before the round trip on topic {roundtrip.topic!r} did, for {which}. Whether "
                     "a client gets through there is not known yet.")
    return [finding(
        "RUN_INCOMPLETE", WARNING, " ".join(parts),
        "Run again with a longer --deadline (at least the metadata time plus one --timeout), or with fewer "
        "bootstrap addresses.")]


def _remapped(endpoints: Sequence[EndpointResult]) -> list[Finding]:
    """REMAPPED_ENDPOINTS: a verdict reached through a "what if" mapping must say so, or it reads as today's truth."""
    mapped = [r.endpoint for r in endpoints if r.endpoint.remap is not None]
    if not mapped:
        return []
    parts = ", ".join(f"{e.hostport} -> {e.remap.hostport} ({e.remap.option})" for e in mapped if e.remap)
    return [finding(
        "REMAPPED_ENDPOINTS", INFO,
        f"{len(mapped)} advertised endpoint(s) were dialled elsewhere, as asked: {parts}. The verdict on them holds "
        "only where the network maps them so (a port-forward, a hosts entry, a DNS record, a NAT rule); clients "
        "without that mapping meet the advertised endpoints as they are.",
        "To make it true for every client: create that mapping where the clients run, or change advertised.listeners "
        "so the brokers advertise the mapped endpoints themselves; then probe again without --resolve/--connect-to.")]
