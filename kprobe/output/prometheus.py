r"""The Prometheus text exposition of a report, named like blackbox_exporter's probe metrics.

For node_exporter's textfile collector (`--prom-file`, written atomically) or any scraper of
`kprobe probe --format prometheus`. Gauges only: every run replaces the previous values.

Label values come off the network (a broker chooses its advertised host), so each one goes
through `text.safe()` first: control characters (ANSI escapes, CR, ...) and bytes that were not
UTF-8 become visible `\xNN` text. A hostile broker can then neither write to a terminal showing
the exposition nor make the file unencodable, and the parsed label value is the same text the
human report shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from kprobe.models import CLIENTS_CONNECT, EndpointResult, Report, coordinator_verdict, is_usable
from kprobe.sanitize import safe

LABEL_LIMIT = 1024
"""Longest label value kept whole: long enough for any real host name, bounded for a hostile one."""


def escape_label(value: object) -> str:
    r"""A label value as it goes between the quotes: printable, then escaped per the exposition format.

    After `safe()` no control character is left (a newline is already `\x0a` text); the
    exposition's own escaping then doubles backslashes and escapes quotes, so a parser hands
    back exactly the `safe()` text.
    """
    text = safe(value, limit=LABEL_LIMIT)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: Mapping[str, object]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items()) + "}"


def endpoint_up(result: EndpointResult) -> int:
    """1 when clients with default settings connect to this endpoint, as the run's verdict says.

    `reachable` (every address accepts) and `degraded` (an IPv6 family fails beside a working IPv4
    one, which real clients with default settings get past: kprobe.net.dualstack) are 1. `partial`
    (some resolved addresses accept, some do not, in a way that fails real clients) is 0, a gap
    worth an alert. `kprobe_tcp_connect_seconds` still shows which addresses answered.
    """
    return 1 if result.status in CLIENTS_CONNECT else 0


def phase_durations(report: Report) -> dict[str, float]:
    """Each step's slowest duration (ms), as `kprobe serve` and `--format prometheus` expose them.

    blackbox_exporter's phases follow one another for one target; kprobe's run each step over many
    bootstraps and endpoints at once, so a phase is its slowest instance: the one the run waited for.
    Only the steps that ran: a run without TLS has no `tls` phase.
    """
    answered = [b.ms for b in report.bootstraps if b.status == "ok" and b.ms is not None]
    tried = [b.ms for b in report.bootstraps if b.ms is not None]
    candidates = {
        "metadata": answered or tried,
        "dns": [r.dns.ms for r in report.endpoints if r.dns.ms is not None and r.dns.source != "literal"],
        "connect": [t.ms for r in report.endpoints for t in r.tcp if t.status == "ok" and t.ms is not None],
        "tls": [r.tls.ms for r in report.endpoints if r.tls is not None and r.tls.ms is not None],
        "identity": [r.identity.ms for r in report.endpoints if r.identity is not None and r.identity.ms is not None],
        "roundtrip": [report.roundtrip.ms] if report.roundtrip is not None and report.roundtrip.ms is not None else [],
    }
    return {phase: max(values) for phase, values in candidates.items() if values}


def _not_after(text: str | None) -> float | None:
    """A certificate's notAfter (OpenSSL's `Nov 24 10:00:00 2027 GMT`) as Unix time; None when unreadable."""
    if not text:
        return None
    import ssl

    try:
        return float(ssl.cert_time_to_seconds(text))
    except ValueError:
        return None


def _seconds(ms: float) -> float:
    """Seconds from the milliseconds the JSON report keeps (3 decimals): a saved report gives the same value."""
    return round(ms, 3) / 1000


def _cluster_ids(report: Report) -> dict[str, str]:
    """Map each bootstrap address to the cluster id that bootstrap answered with ("" when none)."""
    return {b.address: (b.metadata.cluster_id or "") if b.metadata else "" for b in report.bootstraps}


def _endpoint_cluster(result: EndpointResult, clusters: Mapping[str, str]) -> str:
    """The cluster id(s) of the bootstraps that advertised this endpoint.

    Normally one; two bootstraps of different clusters advertising the same endpoint (a real
    misconfiguration) give both, sorted and comma-separated, rather than picking one silently.
    """
    ids = sorted({clusters.get(b, "") for b in result.endpoint.advertised_by} - {""})
    return ",".join(ids)


def render(report: Report) -> str:
    """All metrics of one run; every series carries the vantage."""
    vantage = report.vantage.name
    out: list[str] = []

    def family(name: str, help_text: str) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} gauge")

    def sample(name: str, labels: Mapping[str, object], value: float) -> None:
        out.append(f"{name}{_labels(labels)} {value:g}")

    clusters = _cluster_ids(report)
    family("kprobe_probe_success", "1 if the probe found no gap (status ok), else 0.")
    sample("kprobe_probe_success", {"vantage": vantage}, 1 if report.status == "ok" else 0)
    family("kprobe_probe_duration_seconds", "How long the whole probe took.")
    sample("kprobe_probe_duration_seconds", {"vantage": vantage}, _seconds(report.duration_ms))
    family("kprobe_bootstrap_up", "1 if this bootstrap address answered with metadata.")
    for b in report.bootstraps:
        sample("kprobe_bootstrap_up", {"bootstrap": b.address, "cluster_id": clusters[b.address],
                                       "vantage": vantage}, 1 if b.status == "ok" else 0)
    family("kprobe_endpoint_up",
           "1 if clients with default settings connect to the advertised endpoint from this vantage: every "
           "resolved address accepts (reachable), or only an IPv6 family fails beside a working IPv4 one "
           "(degraded); partial is 0; a remapped_to label marks one dialled through --resolve or --connect-to.")
    usable: list[tuple[dict[str, object], int]] = []
    for r in report.endpoints:
        e = r.endpoint
        labels: dict[str, object] = {"cluster_id": _endpoint_cluster(r, clusters), "node_id": e.node_id,
                                     "host": e.host, "port": e.port, "vantage": vantage}
        if e.remap is not None:
            # Only on a remapped endpoint: a "what if" series must not pass for the real one, and an
            # unmapped series keeps the label set it always had.
            labels["remapped_to"] = e.remap.hostport
        sample("kprobe_endpoint_up", labels, endpoint_up(r))
        usable.append((labels, 1 if is_usable(r, report.findings) else 0))
    family("kprobe_endpoint_usable",
           "1 if a client can use the advertised endpoint from this vantage: up, and named by no error finding "
           "(another broker answering there, a failing certificate, something that is not Kafka).")
    for labels, value in usable:
        sample("kprobe_endpoint_usable", labels, value)
    if report.controllers is not None:
        # Only with --controllers: a run without it keeps the families it always had.
        family("kprobe_controller_bootstrap_up",
               "1 if this --controllers address described the KRaft controller quorum (DescribeCluster, KIP-919).")
        for c in report.controllers:
            sample("kprobe_controller_bootstrap_up", {"bootstrap": c.address, "cluster_id": c.cluster_id or "",
                                                      "vantage": vantage}, 1 if c.status == "ok" else 0)
        family("kprobe_controller_endpoint_up",
               "1 if every resolved address of the advertised controller endpoint accepts connections from this "
               "vantage (partial is 0).")
        for r in report.controller_endpoints:
            e = r.endpoint
            controller_labels: dict[str, object] = {"node_id": e.node_id, "host": e.host, "port": e.port,
                                                    "vantage": vantage}
            if e.remap is not None:
                controller_labels["remapped_to"] = e.remap.hostport
            sample("kprobe_controller_endpoint_up", controller_labels, endpoint_up(r))
    if report.roundtrip is not None:
        # Only with --roundtrip: the canary's own series, per partition so an alert names the failing ones.
        rt = report.roundtrip
        family("kprobe_roundtrip_success", "1 if --roundtrip produced to and read back from every partition of the "
               "topic from this vantage (a real client, librdkafka), else 0.")
        sample("kprobe_roundtrip_success", {"topic": rt.topic, "vantage": vantage}, 1 if rt.status == "ok" else 0)
        family("kprobe_roundtrip_partition_ok", "1 if --roundtrip's record to this partition was acknowledged and "
               "read back; leader is the broker the bootstrap named when the round trip began.")
        for p in rt.partitions:
            sample("kprobe_roundtrip_partition_ok", {"topic": rt.topic, "partition": p.partition,
                                                     "leader": "" if p.leader is None else p.leader,
                                                     "vantage": vantage}, 1 if p.status == "ok" else 0)
        family("kprobe_roundtrip_partition_seconds", "From produce to the record read back (partitions that made it).")
        for p in rt.partitions:
            if p.status == "ok" and p.roundtrip_ms is not None:
                sample("kprobe_roundtrip_partition_seconds", {"topic": rt.topic, "partition": p.partition,
                                                              "vantage": vantage}, _seconds(p.roundtrip_ms))
    if report.application is not None:
        # Only when the report has an application section (an application named, or an internal topic missing
        # or failing): a plain probe of a healthy cluster keeps the families it always had.
        app = report.application
        family("kprobe_internal_topic_serves", "1 if the internal topic (__consumer_offsets: groups; "
               "__transaction_state: transactions) can serve every key: it exists or the brokers can create it, "
               "and each partition has a leader and enough in-sync replicas.")
        for internal in app.internal_topics:
            sample("kprobe_internal_topic_serves", {"topic": internal.name, "vantage": vantage},
                   1 if internal.serves else 0)
        if app.coordinators:
            family("kprobe_coordinator_usable", "1 if FindCoordinator named a coordinator for the group "
                   "(kind=group) or transactional id (kind=transaction) and its endpoint is usable from this "
                   "vantage, as kprobe_endpoint_usable judges it.")
            for coordinator in app.coordinators:
                word = coordinator_verdict(coordinator, report.endpoints, report.findings)
                sample("kprobe_coordinator_usable", {"kind": coordinator.kind, "key": coordinator.key,
                                                     "vantage": vantage},
                       1 if word == "usable" or word in CLIENTS_CONNECT else 0)
    family("kprobe_dns_lookup_seconds", "Time to resolve the advertised host.")
    for host, ms in {r.endpoint.host: r.dns.ms for r in report.endpoints if r.dns.ms is not None}.items():
        sample("kprobe_dns_lookup_seconds", {"host": host, "vantage": vantage}, _seconds(ms or 0))
    family("kprobe_tcp_connect_seconds", "Time for a TCP connect to one resolved address (successful connects).")
    for r in report.endpoints:
        for t in r.tcp:
            if t.status == "ok" and t.ms is not None:
                sample("kprobe_tcp_connect_seconds", {"host": r.endpoint.host, "port": r.endpoint.port,
                                                      "address": t.address, "vantage": vantage}, _seconds(t.ms))
    phases = phase_durations(report)
    if phases:
        family("kprobe_probe_phase_duration_seconds",
               "The slowest of each step of the run (each runs concurrently over the bootstraps and endpoints): "
               "metadata from a bootstrap, a DNS lookup, a TCP connect, a TLS handshake, an identity check, "
               "the round trip.")
        for phase, ms in phases.items():
            sample("kprobe_probe_phase_duration_seconds", {"phase": phase, "vantage": vantage}, _seconds(ms))
    expiries = [(r, _not_after(r.tls.not_after)) for r in report.endpoints if r.tls is not None and r.tls.not_after]
    if any(at is not None for _, at in expiries):
        family("kprobe_tls_not_after_timestamp_seconds",
               "When the certificate an advertised endpoint presents expires (Unix time), as blackbox_exporter's "
               "probe_ssl_earliest_cert_expiry: alert on it minus time().")
        for r, at in expiries:
            if at is not None:
                sample("kprobe_tls_not_after_timestamp_seconds", {"node_id": r.endpoint.node_id,
                                                                  "host": r.endpoint.host, "port": r.endpoint.port,
                                                                  "vantage": vantage}, at)
    family("kprobe_findings", "Findings of this run by code and severity.")
    for (code, severity), count in sorted(Counter((f.code, f.severity) for f in report.findings).items()):
        sample("kprobe_findings", {"code": code, "severity": severity, "vantage": vantage}, count)
    return "\n".join(out) + "\n"
