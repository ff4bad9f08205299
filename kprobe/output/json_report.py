"""The versioned JSON report (`kprobe.report/v1`), the contract scripts and Spark read.

Names are stable within a version: add fields, never rename or remove them. The JSON Schema
shipped beside this module (`schema.json`, printed by `kprobe schema`) is the reference.
"""

from __future__ import annotations

import json
from typing import Any

from kprobe import __version__
from kprobe.models import (
    Application,
    BootstrapResult,
    ControllerBootstrapResult,
    DnsResult,
    EndpointResult,
    Finding,
    Report,
    Roundtrip,
    RoundtripStep,
)

SCHEMA_ID = "kprobe.report/v1"


def _dns(d: DnsResult) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": d.status,
        "addresses": list(d.addresses),
        "ms": _round(d.ms),
        "source": d.source,
        "error": d.error,
        "cname_chain": list(d.cname_chain),
        "ttl": d.ttl,
        "in_hosts_file": d.in_hosts_file,
    }
    if d.detail is not None:
        out["detail"] = _dns(d.detail)
    if d.server is not None:
        out["server"] = d.server
    return out


def _round(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 3)


def _bootstrap(b: BootstrapResult) -> dict[str, Any]:
    meta = b.metadata
    return {
        "address": b.address,
        "status": b.status,
        "error": b.error,
        "answered_by": None if b.answered_by_id is None else {"node_id": b.answered_by_id, "name": b.answered_by_name},
        "connected_to": b.connected_to,
        "source": meta.local_address if meta else None,
        "cluster_id": meta.cluster_id if meta else None,
        "controller_id": meta.controller_id if meta else None,
        "brokers": [
            {"node_id": br.node_id, "host": br.host, "port": br.port, "rack": br.rack} for br in b.brokers
        ],
        "ms": _round(b.ms),
        "via": b.via,
        "metadata_version": meta.api_version if meta else None,
        "node_id": b.node_id,
        "identity_note": b.identity_note,
        "protocol": b.protocol,
        "tls_failure": b.tls_failure,
        "speaks_tls": b.speaks_tls,
        "sasl_mechanisms": list(b.sasl_mechanisms),
        "sasl_mechanism": b.sasl_mechanism,
        "token_unavailable": b.token_unavailable,
        # Additive in v1: a KRaft controller listener answered here, not a broker's.
        "kraft_controller": b.kraft_controller,
        # Additive in v1: the security.protocol the listener wants, as it answered a second connection; and
        # the TLS alert with which it refused the client's certificate side.
        "wanted_protocol": b.wanted_protocol,
        "tls_alert": b.tls_alert,
        # Additive in v1: the full Metadata answer was lost on the path, a brokers-only one of this size arrived.
        "full_metadata_lost": b.full_metadata_lost,
        "largest_answer_bytes": b.largest_answer_bytes,
        # Additive in v1: the versions this broker takes of each request clients send (KIP-896 removed old ones).
        "api_versions": {name: [low, high] for name, low, high in b.api_versions},
        # Additive in v1: the answering node's own listener settings, read on the identity request.
        "listener_settings": dict(b.listener_settings),
    }


def _controller(c: ControllerBootstrapResult) -> dict[str, Any]:
    """One --controllers address's answer (additive in v1)."""
    return {
        "address": c.address,
        "status": c.status,
        "error": c.error,
        "connected_to": c.connected_to,
        "cluster_id": c.cluster_id,
        "active_controller_id": c.active_controller_id,
        "controllers": [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in c.controllers],
        "ms": _round(c.ms),
        "node_id": c.node_id,
        "identity_note": c.identity_note,
        "protocol": c.protocol,
        "describe_cluster_version": c.describe_cluster_version,
    }


def endpoint_dict(r: EndpointResult) -> dict[str, Any]:
    """One endpoint as the report (and `kprobe list --json`'s reachability) writes it."""
    e = r.endpoint
    return {
        "node_id": e.node_id,
        "host": e.host,
        "port": e.port,
        "rack": e.rack,
        "advertised_by": list(e.advertised_by),
        # Additive in v1: where --resolve or --connect-to sent this endpoint; null when dialled as advertised.
        "remapped": None if e.remap is None else {"to": e.remap.hostport, "host": e.remap.host,
                                                  "port": e.remap.port, "option": e.remap.option},
        "dns": _dns(r.dns),
        "tcp": [{"address": t.address, "status": t.status, "ms": _round(t.ms), "error": t.error, "source": t.source}
                for t in r.tcp],
        "status": r.status,
        "identity": None if r.identity is None else {
            "status": r.identity.status, "node_id": r.identity.node_id, "detail": r.identity.detail,
            "address": r.identity.address, "ms": _round(r.identity.ms),
            "kraft_controller": r.identity.kraft_controller, "tls_failure": r.identity.tls_failure,
            "advertised": None if r.identity.advertised is None else [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in r.identity.advertised
            ],
        },
        "tls": None if r.tls is None else {
            "status": r.tls.status, "address": r.tls.address, "subject": r.tls.subject, "names": list(r.tls.names),
            "sans": list(r.tls.sans), "issuer": r.tls.issuer, "not_after": r.tls.not_after,
            "days_left": r.tls.days_left,
            "trusted": r.tls.trusted, "hostname_ok": r.tls.hostname_ok, "error": r.tls.error, "ms": _round(r.tls.ms),
            "client_verifies": {"chain": r.tls.client_verifies_chain, "name": r.tls.client_verifies_name},
        },
        "compared_dns": [_dns(d) for d in r.compared_dns],
    }


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code, "severity": f.severity, "node_id": f.node_id, "endpoint": f.endpoint,
        "bootstrap": f.bootstrap, "message": f.message, "fix": f.fix,
        # Additive in v1: every endpoint and broker the finding concerns (one finding may stand for several).
        "endpoints": list(f.endpoints), "node_ids": list(f.node_ids),
    }


def finding_dict(f: Finding) -> dict[str, Any]:
    """One finding as every kprobe JSON document writes it (`kprobe check`'s reuses it)."""
    return _finding(f)


def _roundtrip(rt: Roundtrip) -> dict[str, Any]:
    """--roundtrip's outcome (additive in v1)."""
    return {
        "topic": rt.topic, "client": rt.client, "status": rt.status, "created": rt.created, "error": rt.error,
        "topic_missing": rt.topic_missing, "ms": _round(rt.ms),
        "partitions": [{"partition": p.partition, "leader": p.leader, "status": p.status, "offset": p.offset,
                        "produce_ms": _round(p.produce_ms), "roundtrip_ms": _round(p.roundtrip_ms),
                        "error": p.error, "broker_error": p.broker_error} for p in rt.partitions],
        "group": _step(rt.group), "transaction": _step(rt.transaction),
    }


def _step(step: RoundtripStep | None) -> dict[str, Any] | None:
    if step is None:
        return None
    return {"key": step.key, "twin": step.twin, "partition": step.partition, "status": step.status,
            "error": step.error, "ms": _round(step.ms)}


def application_dict(app: Application) -> dict[str, Any]:
    """The application section (additive in v1): internal topics, coordinators, named topics."""
    return {
        "group": app.group, "transactional_id": app.transactional_id, "group_protocol": app.group_protocol,
        "share_group": app.share_group, "consumer_protocol": app.consumer_protocol,
        "share_protocol": app.share_protocol, "client_rack": app.client_rack, "pinned": app.pinned,
        "broker_racks": list(app.broker_racks), "replica_selector": app.replica_selector,
        "rack_reads": [{"topic": r.topic, "partition": r.partition, "leader": r.leader, "replica": r.replica,
                        "endpoint": r.endpoint, "status": r.status} for r in app.rack_reads],
        "topics": [{"name": t.name, "status": t.status, "partitions": t.partitions, "leaderless": list(t.leaderless),
                    "error": t.error} for t in app.topics],
        "internal_topics": [{"name": t.name, "exists": t.exists, "partitions": t.partitions,
                             "live_brokers": t.live_brokers, "replication_factor": t.replication_factor,
                             "min_isr": t.min_isr, "settings_read": t.settings_read, "offline": list(t.offline),
                             "under_min_isr": list(t.under_min_isr), "can_create": t.can_create, "serves": t.serves}
                            for t in app.internal_topics],
        "coordinators": [{"kind": c.kind, "key": c.key, "partition": c.partition,
                          "partition_leader": c.partition_leader, "node_id": c.node_id, "java_id": c.java_id,
                          "endpoint": c.endpoint, "status": c.status, "error": c.error} for c in app.coordinators],
    }


def to_dict(report: Report) -> dict[str, Any]:
    """The report as plain JSON-ready data."""
    severities = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    return {
        "schema": SCHEMA_ID,
        "id": report.id,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "duration_ms": report.duration_ms,
        "tool": {"name": "kprobe", "version": __version__},
        "vantage": {
            "name": report.vantage.name,
            "hostname": report.vantage.hostname,
            "resolver": {"kind": report.vantage.resolver_kind, "nameservers": list(report.vantage.nameservers)},
            "source_addresses": sorted(
                {t.source for r in report.endpoints for t in r.tcp if t.source}
                | {b.metadata.local_address for b in report.bootstraps if b.metadata and b.metadata.local_address}
            ),
        },
        "settings": report.settings,
        "bootstraps": [_bootstrap(b) for b in report.bootstraps],
        "endpoints": [endpoint_dict(r) for r in report.endpoints],
        "findings": [_finding(f) for f in report.findings],
        # Additive in v1: --controllers (KIP-919's admin path); null when not asked.
        "controllers": None if report.controllers is None else {
            "bootstraps": [_controller(c) for c in report.controllers],
            "endpoints": [endpoint_dict(r) for r in report.controller_endpoints],
        },
        # Additive in v1: --roundtrip, a real client's produce and consume on every partition; null when not asked.
        "roundtrip": None if report.roundtrip is None else _roundtrip(report.roundtrip),
        # Additive in v1: the application's view; null when nothing was named and the internal topics serve.
        "application": None if report.application is None else application_dict(report.application),
        "summary": {
            "status": report.status,
            "bootstraps": len(report.bootstraps),
            "bootstraps_ok": sum(1 for b in report.bootstraps if b.status == "ok"),
            "endpoints": len(report.endpoints),
            "reachable": report.reachable,
            # Additive in v1: reachable, and named by no error (another broker answering, a failing certificate).
            "usable": report.usable,
            "unchecked": sum(1 for e in report.endpoints if e.status == "unchecked"),
            "deadline_reached": report.deadline_reached,
            "findings": severities,
        },
    }


def render(report: Report, *, indent: int | None = 2) -> str:
    """JSON, ASCII-only so hostile bytes in names arrive escaped, never raw.

    `indent=None` gives one line: the stdlib encodes that in C, where indenting runs in Python,
    which tells on a large cluster's report (every endpoint's identity repeats what it advertises).
    """
    return json.dumps(to_dict(report), indent=indent, ensure_ascii=True) + "\n"


def schema_text() -> str:
    """The shipped JSON Schema, as text."""
    from importlib import resources  # tempfile, zipfile and more: only `kprobe schema` reads a shipped file

    return resources.files("kprobe.output").joinpath("schema.json").read_text(encoding="utf-8")


def schema() -> dict[str, Any]:
    """The shipped JSON Schema, parsed."""
    loaded: dict[str, Any] = json.loads(schema_text())
    return loaded
