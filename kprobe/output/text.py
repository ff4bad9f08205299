"""The human report: kcat's words for what was advertised, then the gap, then the fixes.

Every value that came off the network goes through `safe()`: a broker may advertise a host
name full of ANSI escapes, and printing it raw (as kcat does) lets a hostile broker write to
the user's terminal.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from kprobe.models import (
    OFFSETS_TOPIC,
    RACK_AWARE,
    TRANSACTIONS_TOPIC,
    Application,
    BootstrapResult,
    ControllerBootstrapResult,
    Coordinator,
    EndpointResult,
    Finding,
    InternalTopic,
    NamedTopic,
    Report,
    Roundtrip,
    TcpResult,
    coordinator_verdict,
    endpoint_row,
    reads_by_replica,
    verdict,
)
from kprobe.records import record
from kprobe.sanitize import safe

_COLORS = {"red": "31", "green": "32", "yellow": "33", "dim": "2", "bold": "1"}
_VERDICT_COLOR = {"usable": "green", "unusable": "red", "degraded": "yellow", "partial": "yellow", "unreachable": "red",
                  "unresolvable": "red", "unchecked": "yellow"}
_SEVERITY_COLOR = {"error": "red", "warning": "yellow", "info": "dim"}
_STATUS_COLOR = {"ok": "green", "gap": "red", "failed": "red", "interrupted": "yellow"}


class _Style:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, name: str | None) -> str:
        if not self.color or not name:
            return text
        return f"\x1b[{_COLORS[name]}m{text}\x1b[0m"


def _ms(value: float | None) -> str:
    """A duration as people read it, from the value the JSON report keeps (ms to 3 decimals).

    Rounded first as the report rounds it, so `kprobe show` of a saved report prints the same
    digits as the live run: 0.04996 would be "0.0ms" live and "0.1ms" read back from 0.05.
    """
    if value is None:
        return "-"
    value = round(value, 3)
    return f"{value:.1f}ms" if value < 1000 else f"{value / 1000:.2f}s"


def _bootstrap_lines(b: BootstrapResult, style: _Style) -> list[str]:
    if b.status != "ok" or b.metadata is None:
        return [f"Bootstrap {safe(b.address)}: {style(b.status, 'red')}: {safe(b.error or '')}", ""]
    meta = b.metadata
    who = f"{b.answered_by_id}: {safe(b.answered_by_name)}"
    via = f", via {b.via}" if b.via != "kprobe" else ""
    lines = [
        f"Metadata for all topics (from broker {who}):",
        f" {len(meta.brokers)} brokers:",
    ]
    for broker in meta.brokers:
        mark = " (controller)" if broker.node_id == meta.controller_id else ""
        lines.append(f"  broker {broker.node_id} at {safe(broker.host)}:{broker.port}{mark}")
    dialled = b.connected_to and b.connected_to != b.address.rsplit(":", 1)[0]
    connected = f" at {safe(b.connected_to)}" if dialled else ""
    lines.append(style(f" cluster {safe(meta.cluster_id)}, answered{connected} in {_ms(b.ms)}{via}", "dim"))
    lines.append("")
    return lines


def _tcp_cell(tcp: tuple[TcpResult, ...]) -> str:
    if not tcp:
        return "-"
    def cell(t: TcpResult) -> str:
        if t.status == "ok":
            return f"ok {_ms(t.ms)}"
        if t.status == "error" and t.error:  # which error: ECONNRESET says more than "error"
            return f"error {safe(t.error.split(':', 1)[0])}"
        return t.status

    return ", ".join(cell(t) for t in tcp)


def _identity_cell(r: EndpointResult) -> str:
    ident = r.identity
    if ident is not None and ident.kraft_controller and ident.node_id is not None:
        return f"controller {ident.node_id}"
    if ident is None or ident.status == "unchecked":
        return "-"
    if ident.status == "not_kafka":
        return "not kafka"
    if ident.status == "silent":
        return "no answer"
    return f"node {ident.node_id}" + ("" if ident.status == "match" else " (wrong)")


def _tls_cell(r: EndpointResult) -> str:
    if r.tls is None:
        return "-"
    return r.tls.status.replace("_", " ")


def endpoint_rows(results: Sequence[EndpointResult],
                  findings: Sequence[Finding]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The endpoint table's header and rows, each cell already safe: the text and Markdown tables share them."""
    with_tls = any(r.tls is not None for r in results)
    header: tuple[str, ...] = ("NODE", "ENDPOINT", "DNS", "ADDRESSES", "TCP", "ANSWERS")
    header += ("TLS", "VERDICT") if with_tls else ("VERDICT",)
    rows = []
    for r in results:
        dns: str = r.dns.status if r.dns.source != "literal" else "literal"
        if r.dns.status == "ok" and r.dns.source != "literal":
            dns += f" {_ms(r.dns.ms)}"
        row: tuple[str, ...] = (
            # A remapped endpoint shows where it was dialled: its verdict holds only with the mapping.
            str(r.endpoint.node_id), safe(r.endpoint.hostport) + (
                f" -> {safe(r.endpoint.remap.hostport)} ({r.endpoint.remap.option})" if r.endpoint.remap else ""), dns,
            ", ".join(safe(a) for a in r.dns.addresses) or "-", _tcp_cell(r.tcp), _identity_cell(r),
        )
        verdict_word = verdict(r, findings)
        row += (_tls_cell(r), verdict_word) if with_tls else (verdict_word,)
        rows.append(row)
    return header, rows


def _endpoint_table(results: tuple[EndpointResult, ...], findings: Sequence[Finding], style: _Style) -> list[str]:
    header, rows = endpoint_rows(results, findings)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)).rstrip()]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        lines.append("  " + "  ".join(cells) + "  " + style(row[-1], _VERDICT_COLOR.get(row[-1])))
    return lines


def _controller_lines(c: ControllerBootstrapResult, style: _Style) -> list[str]:
    """One --controllers address's answer, in the words of kafka-metadata-quorum.sh describe."""
    if c.status != "ok":
        return [f"Controllers from {safe(c.address)}: {style(c.status, 'red')}: {safe(c.error or '')}", ""]
    lines = [f"Controller quorum (from controller listener {safe(c.address)}, DescribeCluster "
             f"v{c.describe_cluster_version}):", f" {len(c.controllers)} controllers:"]
    for node in c.controllers:
        mark = " (active)" if node.node_id == c.active_controller_id else ""
        lines.append(f"  controller {node.node_id} at {safe(node.host)}:{node.port}{mark}")
    answered = f", answered by node {c.node_id}" if c.node_id is not None else ""
    lines.append(style(f" cluster {safe(c.cluster_id)}{answered}, in {_ms(c.ms)}", "dim"))
    lines.append("")
    return lines


def _controllers_summary(v: Verdict) -> str:
    """The summary's words on --controllers; nothing when it was not asked."""
    if v.controllers is None:
        return ""
    answered, addresses, usable, endpoints = v.controllers
    return (f"{answered}/{addresses} controller addresses answered, "
            f"{usable}/{endpoints} controller endpoints usable, ")


@record
class ApplicationRow:
    """One line of the application block: what it is about (`what` and the untrusted `name`), then its state.

    `parts` are already safe, each with the colour of what it says (None: plain); the text report
    joins them with ": ", Markdown puts them in one cell. `name` stays raw so that each output quotes
    it its own way (quotes in text, a code span in Markdown).
    """

    what: str  # "group", "transactional id", "topic", or "" for an internal topic
    name: str
    parts: tuple[tuple[str, str | None], ...]


# How a coordinator's key is named, by its kind (a kind this table lacks is named by its own word).
KEY_WORDS = {"group": "group", "transaction": "transactional id", "share": "share group"}
# Past this many partitions, a list of them ends in "and N more": a line, not a screen.
_NUMBERS_SHOWN = 10


def _numbers(values: Sequence[int]) -> str:
    shown = ", ".join(str(v) for v in values[:_NUMBERS_SHOWN])
    return shown + (f" and {len(values) - _NUMBERS_SHOWN} more" if len(values) > _NUMBERS_SHOWN else "")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _coordinator_row(c: Coordinator, report: Report) -> ApplicationRow:
    """Who coordinates the key, where its partition is, and what its endpoint gave from here."""
    topic = TRANSACTIONS_TOPIC if c.kind == "transaction" else OFFSETS_TOPIC
    internal = next((t for t in report.application.internal_topics if t.name == topic), None) \
        if report.application is not None else None
    leaderless = internal is not None and c.partition in internal.offline
    where = "" if c.partition is None else f"partition {c.partition} of {topic}" + (
        f" led by {c.partition_leader}" if c.partition_leader is not None
        else " (no leader)" if leaderless else "")
    word = coordinator_verdict(c, report.endpoints, report.findings)
    if word is None:
        parts = ((where, None),) if where else ()
        return ApplicationRow(what=KEY_WORDS.get(c.kind, c.kind), name=c.key,
                              parts=(*parts, (f"no coordinator ({safe(c.error or 'none named')})", "red")))
    # A consumer logs its coordinator under an id of its own; a producer logs the broker's id, said already.
    logs = f" (the Java client logs id {c.java_id})" if c.java_id != c.node_id else ""
    who = f"coordinator broker {c.node_id} at {safe(c.endpoint or '-')}{logs}"
    return ApplicationRow(what=KEY_WORDS.get(c.kind, c.kind), name=c.key,
                          parts=(((f"{who}, {where}" if where else who), None),
                                 (f"{word} from here", _VERDICT_COLOR.get(word, "red"))))


def _internal_row(t: InternalTopic, app: Application) -> ApplicationRow | None:
    """An internal topic that is missing or cannot serve every key; None for one that does (nothing to say).

    Groups that cannot work are an error, transactions a warning unless a transactional id was
    named: the colours follow the findings' severities.
    """
    bad = "red" if t.name == OFFSETS_TOPIC or app.transactional_id else "yellow"
    first = "consumer's" if t.name == OFFSETS_TOPIC else "transactional producer's"
    rf = "-" if t.replication_factor is None else str(t.replication_factor)
    assumed = "" if t.settings_read else " (Kafka's default: not readable from here)"
    if t.exists is False:
        if not t.can_create:
            return ApplicationRow(what="", name=t.name, parts=(
                ("missing; cannot be created", bad),
                (f"replication factor {rf}{assumed}, {_plural(t.live_brokers, 'live broker')}", None)))
        if t.min_isr is not None and t.replication_factor is not None and t.min_isr > t.replication_factor:
            return ApplicationRow(what="", name=t.name, parts=(
                ("missing; its writes will be refused", bad),
                (f"replication factor {rf}{assumed}, min.isr {t.min_isr}", None)))
        if not (app.group or app.transactional_id or app.share_group or app.topics):
            return None  # a fresh cluster that never had a group: nothing wrong, and nothing asked about it
        return ApplicationRow(what="", name=t.name, parts=(
            (f"missing, will be created at the first {first} coordinator lookup", "dim"),))
    problems = []
    if t.offline:
        problems.append(f"{len(t.offline)} of {_plural(t.partitions, 'partition')} without a leader: "
                        f"{_numbers(t.offline)}")
    if t.under_min_isr:
        problems.append(f"{len(t.under_min_isr)} of {_plural(t.partitions, 'partition')} below min.isr "
                        f"{t.min_isr}: {_numbers(t.under_min_isr)}")
    if not problems:
        return None
    return ApplicationRow(what="", name=t.name, parts=tuple((p, bad) for p in problems))


def _named_row(t: NamedTopic) -> ApplicationRow:
    if t.status == "ok":
        return ApplicationRow(what="topic", name=t.name, parts=((f"{_plural(t.partitions, 'partition')}, ok",
                                                                 "green"),))
    if t.status == "not_found":
        state = "not found"
    elif t.status == "not_authorized":
        state = "not authorized to describe it (TOPIC_AUTHORIZATION_FAILED)"
    elif t.status == "no_leader":
        state = (f"{_plural(t.partitions, 'partition')}, {len(t.leaderless)} without a leader: "
                 f"{_numbers(t.leaderless)}" if t.leaderless else "no partition has a leader")
    else:
        state = f"error: {safe(t.error or 'unknown')}"
    return ApplicationRow(what="topic", name=t.name, parts=((state, "red"),))


def application_rows(report: Report) -> list[ApplicationRow]:
    """The application block's lines, in the order a user checks them: coordinators, internal topics, topics.

    An internal topic is listed only when it is missing or does not serve every key: a healthy one
    adds nothing to the coordinator lines. The text and Markdown outputs share these rows.
    """
    app = report.application
    if app is None:
        return []
    rows = [_coordinator_row(c, report) for c in app.coordinators]
    for kind, named in (("group", app.group), ("transaction", app.transactional_id)):
        if named is not None and not any(c.kind == kind and c.key == named for c in app.coordinators):
            rows.append(ApplicationRow(what=KEY_WORDS[kind], name=named,
                                       parts=(("coordinator not known (no bootstrap answered the question)",
                                               "yellow"),)))
    rows += [row for t in app.internal_topics if (row := _internal_row(t, app)) is not None]
    rows += [_named_row(t) for t in app.topics]
    rows += _rack_rows(app, report)
    return rows


def _rack_rows(app: Application, report: Report) -> list[ApplicationRow]:
    """client.rack: the rack no broker is in, fetching the brokers leave off, or where each follower read goes."""
    rack = app.client_rack
    if not rack:
        return []
    if rack not in app.broker_racks:
        known = ", ".join(safe(r) for r in app.broker_racks) or "no broker sets broker.rack"
        return [ApplicationRow(what="client.rack", name=rack,
                               parts=((f"matches no broker's rack ({known}): read from leaders", "yellow"),))]
    if app.replica_selector is None:
        return [ApplicationRow(what="client.rack", name=rack,
                               parts=(("the brokers' replica.selector.class could not be read", "dim"),))]
    if app.replica_selector != RACK_AWARE:
        return [ApplicationRow(what="client.rack", name=rack, parts=(
            (f"read from leaders: replica.selector.class is {safe(app.replica_selector)}", "dim"),))]
    if not app.rack_reads:
        return [ApplicationRow(what="client.rack", name=rack,
                               parts=(("every partition is read from its leader", "green"),))]
    rows = []
    for replica, reads in reads_by_replica(app.rack_reads):
        result = endpoint_row(report.endpoints, replica, reads[0].endpoint)
        word = verdict(result, report.findings) if result is not None else "unchecked"
        rows.append(ApplicationRow(what="client.rack", name=rack, parts=(
            (f"{_plural(len(reads), 'partition')} read from broker {replica} at {safe(reads[0].endpoint or '-')}",
             None), (f"{word} from here", _VERDICT_COLOR.get(word, "red")))))
    return rows


def application_label(row: ApplicationRow) -> str:
    """The row's subject for a terminal: `group 'billing'`, `__consumer_offsets` (names made safe)."""
    return f"{row.what} '{safe(row.name)}'" if row.what else safe(row.name)


def _application_lines(report: Report, style: _Style) -> list[str]:
    """The application block: each subject, aligned, then its state; nothing when the report has no application."""
    rows = application_rows(report)
    if not rows:
        return []
    labels = [application_label(r) + ":" for r in rows]
    width = max(len(label) for label in labels)
    lines = [style(f"Application, from {safe(report.vantage.name)}:", "bold")]
    for label, row in zip(labels, rows, strict=True):
        lines.append(f"  {label.ljust(width)} " + ": ".join(style(text, color) for text, color in row.parts))
    lines.append("")
    return lines


_TRIP_COLOR = {"ok": "green", "produce_failed": "red", "consume_failed": "red", "unfinished": "yellow",
               "failed": "red", "not_run": "red"}
# Past this many partitions, the table lists only those that did not make it.
_TRIP_ROWS = 24


def _roundtrip_lines(rt: Roundtrip, style: _Style) -> list[str]:
    """--roundtrip: one line of outcome, then a row per partition (per failed one on a big topic)."""
    created = ", created by this run" if rt.created else ""
    head = f"Round trip on topic {safe(rt.topic)} through {safe(rt.client)}{created}:"
    if rt.status == "not_run" or (not rt.partitions and rt.error):
        return [style(head, "bold"), f"  {style(rt.status.replace('_', ' '), 'red')}: {safe(rt.error or '')}", ""]
    ok = [p for p in rt.partitions if p.status == "ok"]
    slowest = max((p.roundtrip_ms or 0.0 for p in ok), default=None)
    lines = [style(head, "bold"),
             f"  {len(ok)}/{len(rt.partitions)} partitions produced and read back"
             + (f", slowest {_ms(slowest)}" if slowest is not None else "") + f" ({_ms(rt.ms)} in all)"]
    shown = rt.partitions if len(rt.partitions) <= _TRIP_ROWS else [p for p in rt.partitions if p.status != "ok"]
    if shown:
        header = ("PARTITION", "LEADER", "PRODUCED", "READ BACK", "RESULT")
        rows = [(str(p.partition), "-" if p.leader is None else str(p.leader), _ms(p.produce_ms), _ms(p.roundtrip_ms),
                 p.status.replace("_", " ")) for p in shown]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)).rstrip())
        for p, row in zip(shown, rows, strict=False):
            cells = "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=False))
            why = f": {safe(p.error, limit=300)}" if p.error else ""
            lines.append(f"  {cells}  {style(row[-1], _TRIP_COLOR.get(p.status))}{why}")
    for step in (rt.group, rt.transaction):
        if step is not None:
            what = (f"group '{safe(step.key)}'" if step.kind == "group" else f"transactional id '{safe(step.key)}'")
            done = "joined, read back and committed" if step.kind == "group" else "transaction committed"
            word = done if step.status == "ok" else step.status.replace("_", " ")
            color = "green" if step.status == "ok" else "yellow" if step.status == "unfinished" else "red"
            why = f": {safe(step.error, limit=300)}" if step.error else ""
            lines.append(f"  {what} (as {safe(step.twin)}, partition {step.partition}): {style(word, color)}{why}")
    lines.append("")
    return lines


def _roundtrip_summary(v: Verdict) -> str:
    if v.roundtrip is None:
        return ""
    status, ok, partitions = v.roundtrip
    if status == "not_run":
        return "round trip not run, "
    return f"{ok}/{partitions} partitions round-tripped, "


def render(report: Report, *, color: bool = False, width: int = 100) -> str:
    """The whole text report."""
    style = _Style(color)
    lines: list[str] = []
    for b in report.bootstraps:
        lines.extend(_bootstrap_lines(b, style))
    v = report.vantage
    resolver = "the system resolver" if v.resolver_kind == "system" else "nameserver " + ", ".join(
        safe(n) for n in v.nameservers)
    if report.endpoints:
        lines.append(style(f"Advertised endpoints, from {safe(v.name)} ({resolver}):", "bold"))
        lines.extend(_endpoint_table(report.endpoints, report.findings, style))
        lines.append("")
    for c in report.controllers or ():
        lines.extend(_controller_lines(c, style))
    if report.controller_endpoints:
        lines.append(style(f"Advertised controller endpoints, from {safe(v.name)} ({resolver}):", "bold"))
        lines.extend(_endpoint_table(report.controller_endpoints, report.findings, style))
        lines.append("")
    lines.extend(_application_lines(report, style))
    if report.roundtrip is not None:
        lines.extend(_roundtrip_lines(report.roundtrip, style))
    if report.findings:
        lines.append(style("Findings:", "bold"))
        for f in report.findings:
            lines.append(f"  {style(f.severity.upper(), _SEVERITY_COLOR[f.severity])} {safe(f.code)}")
            for part, prefix in ((f.message, "    "), ("Fix: " + f.fix, "    ")):
                lines.extend(textwrap.wrap(
                    safe(part, limit=4000), width=width, initial_indent=prefix, subsequent_indent=prefix + "  ",
                    break_on_hyphens=False, break_long_words=False,
                ))
        lines.append("")
    summary = summary_line(report)
    lines.append(style(summary, _STATUS_COLOR.get(report.status)))
    return "\n".join(lines) + "\n"


def problem_glance(code: object, message: object, endpoints: Sequence[object] = ()) -> str:
    """`  CODE: message` for a one-line summary, the message cut at 100 characters: a glance, not the finding.

    `show --summary` (one line per saved report) and `watch` (one line per run) both name the first
    problem this way, so a run's line and its saved report's line read alike. The glance names the
    endpoint the finding concerns (`endpoints`: the finding's endpoint, or its list): in the message
    where the cut keeps it there, else beside the code, `CODE (host:port): ...`.
    """
    text = safe(message, limit=4000)
    if len(text) > 100:
        text = text[:97].rstrip() + "..."
    named = [safe(e, limit=300) for e in endpoints if e]
    where = ""
    if named and named[0] not in text:
        where = f" ({named[0]}" + (f" and {len(named) - 1} more" if len(named) > 1 else "") + ")"
    return f"  {safe(code, limit=64)}{where}: {text}"


@record
class Verdict:
    """A run's verdict in counts: what the one summary line says, from a Report or from a saved report's JSON.

    Why a value of its own: `watch` words each run and `show --summary` each saved report with the
    summary line the text report ends with (never words of their own), and
    `show --summary` reads thousands of reports a second from the JSON's `summary` without building
    the models (`verdict_of_saved`); both meet here, so the words and the counts are one.
    """

    status: str
    bootstraps_ok: int
    bootstraps: int
    usable: int
    endpoints: int
    errors: int
    warnings: int
    duration_ms: float
    deadline_reached: bool = False
    controllers: tuple[int, int, int, int] | None = None  # addresses answered, addresses, usable, endpoints
    roundtrip: tuple[str, int, int] | None = None  # status, partitions ok, partitions


def verdict_of(report: Report) -> Verdict:
    """The counts of a run (models.Report.usable: reached, and named by no error)."""
    rt = report.roundtrip
    return Verdict(
        status=report.status, bootstraps_ok=sum(1 for b in report.bootstraps if b.status == "ok"),
        bootstraps=len(report.bootstraps), usable=report.usable, endpoints=len(report.endpoints),
        errors=sum(1 for f in report.findings if f.severity == "error"),
        warnings=sum(1 for f in report.findings if f.severity == "warning"),
        duration_ms=report.duration_ms, deadline_reached=report.deadline_reached,
        controllers=None if report.controllers is None else (
            sum(1 for c in report.controllers if c.status == "ok"), len(report.controllers),
            report.usable_controllers, len(report.controller_endpoints)),
        roundtrip=None if rt is None else (rt.status, rt.partitions_ok, len(rt.partitions)))


def verdict_of_saved(data: Mapping[str, Any]) -> Verdict | None:
    """The counts a saved report's JSON already holds (its `summary`, written from the same models), else None.

    None for what the summary cannot say: a report from before `usable` and `bootstraps_ok`, or
    with --controllers (usable controller endpoints are judged on the findings, not summed): the
    caller builds the models then (`verdict_of`), so the line never counts differently.
    """
    s = data.get("summary")
    if not isinstance(s, dict) or data.get("controllers") is not None:
        return None
    findings = s.get("findings")
    duration = data.get("duration_ms")
    counts = [s.get(k) for k in ("bootstraps_ok", "bootstraps", "usable", "endpoints")]
    counts += [findings.get(k) for k in ("error", "warning")] if isinstance(findings, dict) else [None]
    ints = [n for n in counts if type(n) is int]  # bool is no count
    if len(ints) != 6 or type(duration) not in (int, float) or not isinstance(s.get("status"), str):
        return None
    rt = data.get("roundtrip")
    roundtrip = None
    if rt is not None:
        parts = rt.get("partitions") if isinstance(rt, dict) else None
        if not isinstance(parts, list) or not isinstance(rt.get("status"), str):
            return None
        roundtrip = (rt["status"], sum(1 for p in parts if isinstance(p, dict) and p.get("status") == "ok"),
                     len(parts))
    ok, boots, usable, endpoints, errors, warnings = ints
    return Verdict(status=s["status"], bootstraps_ok=ok, bootstraps=boots, usable=usable, endpoints=endpoints,
                   errors=errors, warnings=warnings, duration_ms=float(duration or 0),
                   deadline_reached=s.get("deadline_reached") is True, roundtrip=roundtrip)


def verdict_line(v: Verdict) -> str:
    """The one summary line: the text report's last line, each run of `watch`, each report of `show --summary`."""
    return (
        f"{v.status.upper()}: {v.bootstraps_ok}/{v.bootstraps} bootstraps answered, "
        f"{v.usable}/{v.endpoints} advertised endpoints usable from here, {_controllers_summary(v)}"
        f"{_roundtrip_summary(v)}"
        f"{v.errors} errors, {v.warnings} warnings ({_ms(v.duration_ms)}"
        + (", deadline reached)" if v.deadline_reached else ")")
    )


def summary_line(report: Report) -> str:
    """The last line: the run's verdict in counts, as `watch`, Markdown and `show --summary` repeat it."""
    return verdict_line(verdict_of(report))
