"""`kprobe check`'s report in three formats: text, the versioned JSON (`kprobe.check/v1`) and Markdown.

The same conventions as `kprobe probe`'s: the text leads with each broker's listeners (where each
binds, what it advertises, its protocol, for whom it is meant, and how each vantage fares), then the
findings with their fixes, then the verdict; the JSON has a schema of its own shipped beside this
module (`check_schema.json`, printed by `kprobe schema --check`), names stable within v1; the Markdown
uses `kprobe.output.markdown`'s escaping, since a Compose file is someone else's text too. Every value
from a file goes through `safe()`, and every secret the files hold is scrubbed from the finished text,
whichever format: a JAAS line or a password variable is never printed, even inside a message.
"""

from __future__ import annotations

import json
from typing import Any

from kprobe import __version__
from kprobe.check.listeners import CLIENT_NETWORK_WORDS, CheckReport, Deployment, ListenerCheck, Observation
from kprobe.models import Finding
from kprobe.redaction import REDACTED
from kprobe.sanitize import safe

SCHEMA_ID = "kprobe.check/v1"
_COLORS = {"red": "31", "green": "32", "yellow": "33", "dim": "2", "bold": "1"}
_REACH_COLOR = {"works": "green", "resolves": "green", "unresolvable": "red", "unreachable": "red",
                "no_bootstrap": "dim", "unknown": "yellow"}
_SEVERITY_COLOR = {"error": "red", "warning": "yellow", "info": "dim"}
_STATUS_COLOR = {"ok": "green", "gap": "red", "failed": "red"}
_AUDIENCE_WORDS = {"compose-network": "the Compose network", "docker-host": "the Docker host",
                   "cluster": "the cluster", "outside": "clients outside the cluster", "here": "clients here"}
_REACH_WORDS = {"works": "works", "resolves": "resolves", "unresolvable": "unresolvable", "unreachable": "fails",
                "no_bootstrap": "no way in", "unknown": "at deploy"}


def scrub(text: str, report: CheckReport) -> str:
    """The text with every secret of the files replaced (longest first, so a secret inside another goes too)."""
    for secret in sorted({s for s in report.secrets if len(s) >= 3}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


# -- text ---------------------------------------------------------------------------------------------------

def _style(color: bool) -> Any:
    def paint(text: str, name: str | None) -> str:
        if not color or not name:
            return text
        return f"\x1b[{_COLORS[name]}m{text}\x1b[0m"
    return paint


def _listener_line(check: ListenerCheck) -> str:
    lst = check.listener
    binds = f"binds {safe(lst.bind.text)}" if lst.bind else "not bound"
    advertises = f"advertises {safe(lst.advertised.text)}" if lst.advertised else "not advertised"
    roles = [r for r, on in (("inter-broker", lst.inter_broker), ("controller", lst.controller)) if on]
    if lst.exposure and lst.exposure != "internal":
        roles.append(lst.exposure)
    published = ", ".join(p.text for p in lst.published)
    extra = [f"published {published}"] if published else []
    if lst.advertised_from == "listeners" and lst.advertised:
        extra.append("advertised.listeners unset: derived")
    meant = ("for " + " and ".join(_AUDIENCE_WORDS[a] for a in check.audiences)) if check.audiences else ""
    words = ", ".join(x for x in [*roles, *extra, meant] if x)
    return (f"  {safe(lst.name):<18} {safe(lst.protocol or '(no protocol)'):<14} {binds}, {advertises}"
            + (f"  ({words})" if words else ""))


def _deployment_lines(dep: Deployment, checks: list[ListenerCheck], paint: Any) -> list[str]:
    what = {"properties": "server.properties", "compose": "Compose file", "strimzi": "Strimzi Kafka resource",
            "bitnami": "Bitnami chart values"}[dep.kind]
    lines = [paint(f"{safe(dep.source, limit=500)} ({what})", "bold")]
    lines.extend(paint(f"  note: {safe(n, limit=500)}", "dim") for n in dep.notes)
    for broker in dep.brokers:
        node = f"node {broker.node_id}, " if broker.node_id is not None else ""
        lines.append(f" {safe(broker.name)} ({node}{'+'.join(broker.roles)})")
        for check in (c for c in checks if c.source == dep.source and c.broker == broker.name):
            lines.append(_listener_line(check))
            for reach in check.reach:
                status = _REACH_WORDS[reach.status]
                meant = "*" if reach.vantage in check.audiences else " "
                boot = f"bootstrap {safe(reach.bootstrap)}: " if reach.bootstrap else ""
                lines.append(f"    {meant} {CLIENT_NETWORK_WORDS[reach.vantage]:<27} "
                             f"{paint(f'{status:<12}', _REACH_COLOR[reach.status])} {boot}{safe(reach.why, limit=400)}")
    lines.append("")
    return lines


def _finding_lines(f: Finding, paint: Any) -> list[str]:
    where = " ".join(x for x in (f"node {f.node_id}" if f.node_id is not None else "",
                                 safe(f.endpoint) if f.endpoint else "") if x)
    return [f"{paint(f.severity.upper(), _SEVERITY_COLOR[f.severity])} {f.code}" + (f"  {where}" if where else ""),
            f"  {safe(f.message, limit=4000)}", f"  fix: {safe(f.fix, limit=4000)}", ""]


def _observation_lines(observations: tuple[Observation, ...], paint: Any) -> list[str]:
    lines = [paint("Prediction and observation, probed from here:", "bold")]
    for o in observations:
        mark = {True: paint("agrees", "green"), False: paint("DIFFERS", "red"), None: paint("no comparison", "dim")}
        lines.append(f"  {safe(o.broker)} {safe(o.listener):<18} bootstrap {safe(o.bootstrap):<28} predicted "
                     f"{_REACH_WORDS[o.predicted]:<12} observed {o.observed:<16} {mark[o.agrees]}: "
                     f"{safe(o.detail, limit=400)}")
    lines.append("")
    return lines


def summary_line(report: CheckReport) -> str:
    """The verdict in one line: status, counts, exit code."""
    errors = sum(f.severity == "error" for f in report.findings)
    warnings = sum(f.severity == "warning" for f in report.findings)
    listeners = sum(1 for c in report.checks if c.listener.advertised is not None)
    brokers = sum(1 for d in report.deployments for b in d.brokers if b.is_broker)
    code = {"ok": 0, "gap": 1, "failed": 3}[report.status]
    extra = ""
    if report.observations is not None:
        differ = sum(o.agrees is False for o in report.observations)
        extra = f", {len(report.observations)} listener(s) probed, {differ} differing from the prediction"
    return (f"{report.status}: {brokers} broker(s), {listeners} advertised listener(s), {errors} error(s), "
            f"{warnings} warning(s){extra} (exit {code})")


def render_text(report: CheckReport, *, color: bool = False) -> str:
    """The human report."""
    paint = _style(color)
    resolver = ("the system resolver" if report.resolver_kind == "system"
                else "nameserver " + ", ".join(report.nameservers))
    lines = [f"kprobe check: names resolved through {resolver}; * marks the clients each listener is meant for", ""]
    for dep in report.deployments:
        lines.extend(_deployment_lines(dep, list(report.checks), paint))
    if report.observations is not None:
        lines.extend(_observation_lines(report.observations, paint))
    for f in report.findings:
        lines.extend(_finding_lines(f, paint))
    if not report.findings:
        lines.extend(["No finding: every listener works for the clients it is meant for.", ""])
    lines.append(paint(summary_line(report), _STATUS_COLOR[report.status]))
    return scrub("\n".join(lines) + "\n", report)


# -- JSON ---------------------------------------------------------------------------------------------------

def to_dict(report: CheckReport) -> dict[str, Any]:
    """The `kprobe.check/v1` document (see check_schema.json)."""
    from kprobe.output.json_report import finding_dict
    from kprobe.output.json_report import to_dict as probe_dict

    deployments = []
    for dep in report.deployments:
        brokers = []
        for broker in dep.brokers:
            listeners = []
            for check in (c for c in report.checks if c.source == dep.source and c.broker == broker.name):
                lst = check.listener
                listeners.append({
                    "name": lst.name, "protocol": lst.protocol,
                    "bind": None if lst.bind is None else {"host": lst.bind.host, "port": lst.bind.port},
                    "advertised": None if lst.advertised is None else {"host": lst.advertised.host,
                                                                        "port": lst.advertised.port},
                    "advertised_from": lst.advertised_from, "inter_broker": lst.inter_broker,
                    "controller": lst.controller, "exposure": lst.exposure, "deploy_time": lst.deploy_time,
                    "published": [{"host_ip": p.host_ip, "host_port": p.host_port,
                                   "container_port": p.container_port} for p in lst.published],
                    "audiences": list(check.audiences),
                    "reach": [{"vantage": r.vantage, "status": r.status, "bootstrap": r.bootstrap, "why": r.why}
                              for r in check.reach],
                })
            brokers.append({"name": broker.name, "node_id": broker.node_id, "roles": list(broker.roles),
                            "listeners": listeners})
        deployments.append({"source": dep.source, "kind": dep.kind, "platform": dep.platform,
                            "operator": dep.operator, "notes": list(dep.notes), "brokers": brokers})
    return {
        "schema": SCHEMA_ID,
        "id": report.id,
        "started_at": report.started_at,
        "finished_at": report.finished_at,
        "tool": {"name": "kprobe", "version": __version__},
        "vantage": {"name": report.vantage_name, "hostname": report.hostname,
                    "resolver": {"kind": report.resolver_kind, "nameservers": list(report.nameservers)}},
        "files": list(report.files),
        "deployments": deployments,
        "findings": [finding_dict(f) for f in report.findings],
        "observations": None if report.observations is None else [
            {"source": o.source, "broker": o.broker, "listener": o.listener, "vantage": o.vantage,
             "bootstrap": o.bootstrap, "predicted": o.predicted, "observed": o.observed, "advertised": o.advertised,
             "agrees": o.agrees, "detail": o.detail} for o in report.observations],
        "probe": None if report.probe is None else probe_dict(report.probe),
        "summary": {
            "status": report.status,
            "brokers": sum(1 for d in report.deployments for b in d.brokers if b.is_broker),
            "listeners": sum(1 for c in report.checks if c.listener.advertised is not None),
            "errors": sum(f.severity == "error" for f in report.findings),
            "warnings": sum(f.severity == "warning" for f in report.findings),
        },
    }


def render_json(report: CheckReport, *, indent: bool = False) -> str:
    """The JSON document as one line (or indented), secrets scrubbed."""
    text = json.dumps(to_dict(report), indent=2 if indent else None, ensure_ascii=False)
    return scrub(text, report) + "\n"


def schema_text() -> str:
    """The shipped JSON Schema of `kprobe.check/v1`, as text."""
    from importlib import resources  # tempfile, zipfile and more: only `kprobe schema` reads a shipped file

    return resources.files("kprobe.output").joinpath("check_schema.json").read_text(encoding="utf-8")


# -- Markdown -----------------------------------------------------------------------------------------------

def render_markdown(report: CheckReport) -> str:
    """A summary for a ticket: the verdict, a table per file, each finding with its fix."""
    from kprobe.output.markdown import code, message, prose, table

    out = [f"## kprobe check: {prose(report.status)}", "", prose(summary_line(report)), ""]
    for dep in report.deployments:
        out += [f"### {code(dep.source, limit=500)} ({prose(dep.kind)})", ""]
        out += [f"- {prose(n, limit=500)}" for n in dep.notes]
        if dep.notes:
            out.append("")
        rows = []
        for check in (c for c in report.checks if c.source == dep.source):
            lst = check.listener
            for reach in check.reach or ():
                rows.append([code(check.broker), code(lst.name), code(lst.protocol or "-"),
                             code(lst.bind.text if lst.bind else "-"),
                             code(lst.advertised.text if lst.advertised else "-"),
                             prose(CLIENT_NETWORK_WORDS[reach.vantage])
                             + (" (meant for)" if reach.vantage in check.audiences else ""),
                             prose(reach.status), prose(reach.why, limit=400)])
        out += table(["broker", "listener", "protocol", "binds", "advertises", "client", "prediction", "why"], rows)
        out.append("")
    if report.observations:
        out += ["### Probed from here", ""]
        out += table(["broker", "listener", "bootstrap", "predicted", "observed", "agrees", "detail"],
                     [[code(o.broker), code(o.listener), code(o.bootstrap), prose(o.predicted), prose(o.observed),
                       prose({True: "yes", False: "no", None: "-"}[o.agrees]), prose(o.detail, limit=400)]
                      for o in report.observations])
        out.append("")
    if report.findings:
        out += ["### Findings", ""]
        for f in report.findings:
            where = f" at {code(f.endpoint)}" if f.endpoint else ""
            out += [f"- **{prose(f.severity)}** {code(f.code)}{where}: {message(f.message)}",
                    f"  - fix: {message(f.fix)}"]
        out.append("")
    out.append(f"<sub>kprobe {prose(__version__)} check, {prose(report.finished_at)}</sub>")
    return scrub("\n".join(out) + "\n", report)
