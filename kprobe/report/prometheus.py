"""The Prometheus text exposition of a report, named like blackbox_exporter's probe metrics.

For node_exporter's textfile collector (`--prom-file`, written atomically) or any scraper of
`kprobe probe --format prometheus`. Gauges only: every run replaces the previous values.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from kprobe.models import Report


def _escape(value: object) -> str:
    text = str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, object]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def render(report: Report) -> str:
    """All metrics of one run; every series carries the vantage."""
    vantage = report.vantage.name
    out: list[str] = []

    def family(name: str, help_text: str) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} gauge")

    def sample(name: str, labels: Mapping[str, object], value: float) -> None:
        out.append(f"{name}{_labels(labels)} {value:g}")

    cluster = next((b.metadata.cluster_id for b in report.bootstraps if b.metadata), None) or ""
    family("kprobe_probe_success", "1 if the probe found no gap (status ok), else 0.")
    sample("kprobe_probe_success", {"vantage": vantage}, 1 if report.status == "ok" else 0)
    family("kprobe_probe_duration_seconds", "How long the whole probe took.")
    sample("kprobe_probe_duration_seconds", {"vantage": vantage}, report.duration_ms / 1000)
    family("kprobe_bootstrap_up", "1 if this bootstrap address answered with metadata.")
    for b in report.bootstraps:
        sample("kprobe_bootstrap_up", {"bootstrap": b.address, "cluster_id": cluster, "vantage": vantage},
               1 if b.status == "ok" else 0)
    family("kprobe_endpoint_up", "1 if the advertised endpoint resolves and accepts connections from this vantage.")
    for r in report.endpoints:
        e = r.endpoint
        sample("kprobe_endpoint_up", {"cluster_id": cluster, "node_id": e.node_id, "host": e.host,
                                      "port": e.port, "vantage": vantage},
               1 if r.status in ("reachable", "partial") else 0)
    family("kprobe_dns_lookup_seconds", "Time to resolve the advertised host.")
    for host, ms in {r.endpoint.host: r.dns.ms for r in report.endpoints if r.dns.ms is not None}.items():
        sample("kprobe_dns_lookup_seconds", {"host": host, "vantage": vantage}, (ms or 0) / 1000)
    family("kprobe_tcp_connect_seconds", "Time for a TCP connect to one resolved address (successful connects).")
    for r in report.endpoints:
        for t in r.tcp:
            if t.status == "ok" and t.ms is not None:
                sample("kprobe_tcp_connect_seconds", {"host": r.endpoint.host, "port": r.endpoint.port,
                                                      "address": t.address, "vantage": vantage}, t.ms / 1000)
    family("kprobe_findings", "Findings of this run by code and severity.")
    for (code, severity), count in sorted(Counter((f.code, f.severity) for f in report.findings).items()):
        sample("kprobe_findings", {"code": code, "severity": severity, "vantage": vantage}, count)
    return "\n".join(out) + "\n"
