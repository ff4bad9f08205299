"""`kprobe diff` in words, in JSON for scripts, and in Markdown for a ticket.

The table puts one endpoint's two verdicts on one line, so "works from the office, not over the
VPN" reads straight across; the application's coordinators and internal topics whose state changed
read the same way; the findings only one side has follow, with their fixes; the last line says
whether the verdicts agree, as the exit code does.

The words follow the question (`ReportDiff.before_after`): one vantage before and after a change
reads in time ("run gap -> ok", "1 finding went away"); two vantages read side by side ("run gap
at A, ok at B", "1 finding only at A"), since neither came first.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from typing import Any

from kprobe.models import Finding
from kprobe.models.compare import ApplicationChange, EndpointRow, ReportDiff, Side
from kprobe.output.text import KEY_WORDS
from kprobe.sanitize import safe

_CHANGE_WORDS = {"same": "", "changed": "changed", "moved": "moved", "only_a": "only in A", "only_b": "only in B"}
_SIDE_BY_SIDE_WORDS = {"same": "", "changed": "differs", "moved": "other endpoint", "only_a": "only at A",
                       "only_b": "only at B"}
# What the last line counts, (change, one, many), in time and side by side.
_COUNTS_IN_TIME = (("changed", "verdict changed", "verdicts changed"), ("moved", "endpoint moved", "endpoints moved"),
                   ("only_a", "endpoint only in A", "endpoints only in A"),
                   ("only_b", "endpoint only in B", "endpoints only in B"),
                   ("coordinator", "coordinator changed", "coordinators changed"),
                   ("internal_topic", "internal topic changed", "internal topics changed"),
                   ("findings_a", "finding went away", "findings went away"),
                   ("findings_b", "finding appeared", "findings appeared"))
_COUNTS_SIDE_BY_SIDE = (("changed", "verdict differs", "verdicts differ"),
                        ("moved", "node advertised at another endpoint", "nodes advertised at other endpoints"),
                        ("only_a", "endpoint only at A", "endpoints only at A"),
                        ("only_b", "endpoint only at B", "endpoints only at B"),
                        ("coordinator", "coordinator differs", "coordinators differ"),
                        ("internal_topic", "internal topic differs", "internal topics differ"),
                        ("findings_a", "finding only at A", "findings only at A"),
                        ("findings_b", "finding only at B", "findings only at B"))


def _side_line(label: str, side: Side) -> str:
    r = side.report
    v = r.vantage
    resolver = "system resolver" if v.resolver_kind == "system" else "nameserver " + ", ".join(
        safe(n) for n in v.nameservers)
    return (f"{label}: {safe(side.source, limit=300)}: {r.status.upper()} from {safe(v.name)} ({resolver}) at "
            f"{safe(r.started_at, limit=40)}")


def _cluster_lines(diff: ReportDiff) -> list[str]:
    a, b = diff.a, diff.b
    lines = []
    if diff.clusters_differ:
        lines.append(f"Cluster: A {', '.join(safe(c) for c in a.clusters) or 'none answered'}, "
                     f"B {', '.join(safe(c) for c in b.clusters) or 'none answered'}")
    elif a.clusters:
        lines.append(f"Cluster {', '.join(safe(c) for c in a.clusters)} on both sides")
    if diff.brokers_differ:
        lines.append(f"Brokers: A {_ids(a.brokers)}, B {_ids(b.brokers)}")
    elif a.brokers:
        lines.append(f"Brokers {_ids(a.brokers)} on both sides")
    return lines


def _ids(ids: tuple[int, ...]) -> str:
    return ", ".join(str(i) for i in ids) or "none"


def _cells(row: EndpointRow, *, before_after: bool = True) -> tuple[str, ...]:
    """One table row; side by side, a node advertised apart reads `A vs B`, not `A -> B`."""
    if row.change == "moved":
        endpoint = f"{safe(row.endpoint_a)} {'->' if before_after else 'vs'} {safe(row.endpoint_b)}"
    else:
        endpoint = safe(row.endpoint_a or row.endpoint_b)
    words = _CHANGE_WORDS if before_after else _SIDE_BY_SIDE_WORDS
    return (str(row.node_id), endpoint, row.verdict_a or "-", row.verdict_b or "-", words[row.change])


def _finding_titles(diff: ReportDiff, name: Callable[[str], str] = safe) -> tuple[str, str]:
    """The titles over each side's own findings: gone and new in time, only at a vantage side by side."""
    if diff.before_after:
        return "Findings only in A (gone in B)", "Findings only in B (new in B)"
    return (f"Findings only at A ({name(diff.a.report.vantage.name)})",
            f"Findings only at B ({name(diff.b.report.vantage.name)})")


_HEADER = ("NODE", "ENDPOINT", "A", "B", "")
_APPLICATION_HEADER = ("PART", "A", "B")


def _application_subject(change: ApplicationChange, code: Callable[[str], str] | None = None) -> str:
    """`group 'billing'`, `transactional id 'tx'` or the internal topic; with `code`, names as Markdown code spans."""
    name = code(change.name) if code is not None else safe(change.name)
    if change.part == "internal_topic":
        return name
    quoted = name if code is not None else f"'{name}'"
    return f"{KEY_WORDS.get(change.kind or '', change.kind)} {quoted}"


def _finding_lines(f: Finding, width: int) -> list[str]:
    brokers = ("broker " if len(f.node_ids) == 1 else "brokers ") + ", ".join(str(n) for n in f.node_ids[:10])
    where = ", ".join(x for x in (brokers if f.node_ids else "", ", ".join(safe(e) for e in f.endpoints[:10])) if x)
    lines = [f"  {f.severity.upper()} {safe(f.code, limit=64)}" + (f" ({where})" if where else "")]
    for part in (f.message, "Fix: " + f.fix):
        lines.extend(textwrap.wrap(safe(part, limit=4000), width=width, initial_indent="    ",
                                   subsequent_indent="      ", break_on_hyphens=False, break_long_words=False))
    return lines


def verdict_line(diff: ReportDiff) -> str:
    """The last line: whether the verdicts agree, and what differs in counts."""
    if not diff.differs:
        return "SAME: the verdicts agree"
    parts = []
    a, b = diff.a.report.status, diff.b.report.status
    if diff.status_changed:
        parts.append(f"run {a} -> {b}" if diff.before_after else f"run {a} at A, {b} at B")
    found = {"findings_a": len(diff.only_a), "findings_b": len(diff.only_b),
             "coordinator": sum(1 for c in diff.application if c.part == "coordinator"),
             "internal_topic": sum(1 for c in diff.application if c.part == "internal_topic")}
    for change, one, many in _COUNTS_IN_TIME if diff.before_after else _COUNTS_SIDE_BY_SIDE:
        n = found.get(change, sum(1 for r in diff.rows if r.change == change))
        if n:
            parts.append(f"{n} {one if n == 1 else many}")
    if diff.clusters_differ:
        parts.append("another cluster")
    elif diff.brokers_differ:
        parts.append("another broker set")
    return "DIFFERENT: " + ", ".join(parts)


def render_text(diffs: list[ReportDiff], *, width: int = 100) -> str:
    """Each pair's comparison, in words."""
    out: list[str] = []
    for diff in diffs:
        lines = [_side_line("A", diff.a), _side_line("B", diff.b), *_cluster_lines(diff), ""]
        if diff.rows:
            rows = [_cells(r, before_after=diff.before_after) for r in diff.rows]
            widths = [max(len(row[i]) for row in [_HEADER, *rows]) for i in range(len(_HEADER))]
            lines.append("Advertised endpoints, as each side saw them:")
            for row in [_HEADER, *rows]:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            lines.append("")
        if diff.application:
            rows = [(_application_subject(c), safe(c.state_a), safe(c.state_b)) for c in diff.application]
            widths = [max(len(row[i]) for row in [_APPLICATION_HEADER, *rows]) for i in range(3)]
            lines.append("Coordinators and internal topics that changed:" if diff.before_after
                         else "Coordinators and internal topics that differ:")
            for row in [_APPLICATION_HEADER, *rows]:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            lines.append("")
        for title, findings in zip(_finding_titles(diff), (diff.only_a, diff.only_b), strict=True):
            if findings:
                lines.append(title + ":")
                for f in findings:
                    lines.extend(_finding_lines(f, width))
                lines.append("")
        lines.append(verdict_line(diff))
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _side_dict(side: Side) -> dict[str, Any]:
    r = side.report
    return {"source": side.source, "id": r.id, "started_at": r.started_at, "vantage": r.vantage.name,
            "status": r.status, "clusters": list(side.clusters), "brokers": list(side.brokers)}


def _finding_dict(f: Finding) -> dict[str, Any]:
    return {"code": f.code, "severity": f.severity, "node_id": f.node_id, "endpoint": f.endpoint,
            "endpoints": list(f.endpoints), "node_ids": list(f.node_ids), "bootstrap": f.bootstrap,
            "message": f.message, "fix": f.fix}


def to_dict(diff: ReportDiff) -> dict[str, Any]:
    """One comparison as plain data (`kprobe diff --json`)."""
    return {
        "a": _side_dict(diff.a), "b": _side_dict(diff.b), "differs": diff.differs,
        "before_after": diff.before_after, "verdict": verdict_line(diff),
        "status_changed": diff.status_changed, "clusters_differ": diff.clusters_differ,
        "brokers_differ": diff.brokers_differ,
        "endpoints": [{"node_id": r.node_id, "a": r.endpoint_a, "b": r.endpoint_b, "verdict_a": r.verdict_a,
                       "verdict_b": r.verdict_b, "addresses_a": list(r.addresses_a),
                       "addresses_b": list(r.addresses_b), "change": r.change} for r in diff.rows],
        "application": [{"part": c.part, "kind": c.kind, "name": c.name, "a": c.state_a, "b": c.state_b}
                        for c in diff.application],
        "findings_only_a": [_finding_dict(f) for f in diff.only_a],
        "findings_only_b": [_finding_dict(f) for f in diff.only_b],
    }


def render_json(diffs: list[ReportDiff], unpaired: list[dict[str, Any]] | None = None) -> str:
    """JSON for scripts: one object with every comparison (ASCII only, like the report)."""
    return json.dumps({"schema": "kprobe.diff/v1", "differs": any(d.differs for d in diffs) or bool(unpaired),
                       "comparisons": [to_dict(d) for d in diffs], "unpaired": unpaired or []},
                      ensure_ascii=True) + "\n"


def _commands(diff: ReportDiff) -> list[str]:
    """Each side's probe as a command to run again, in one console block (one line when both ran the same).

    Rebuilt from each report's settings, as `probe --format markdown` does (never argv: no secret);
    a comment names the side, so the block pastes back into a shell as it is.
    """
    from kprobe.output import markdown  # the markdown format's own helpers: not loaded for text or JSON

    line_a, line_b = markdown.command_line(diff.a.report), markdown.command_line(diff.b.report)
    commands = [f"$ {line_a}  # A and B"] if line_a == line_b else [f"$ {line_a}  # A", f"$ {line_b}  # B"]
    text = "\n".join(commands)
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return [f"{fence}console", *commands, fence]


def render_markdown(diffs: list[ReportDiff]) -> str:
    """Each comparison as a ticket-ready summary: both sides, each side's command line, the table, the findings."""
    from kprobe.output import markdown

    out: list[str] = []
    for diff in diffs:
        lines = [f"#### kprobe diff: {markdown.prose(verdict_line(diff))}", ""]
        for label, side in (("A", diff.a), ("B", diff.b)):
            r = side.report
            lines.append(f"- **{label}**: {markdown.code(side.source, limit=300)}, **{r.status.upper()}** from "
                         f"{markdown.code(r.vantage.name)} at {markdown.code(r.started_at, limit=40)}")
        lines += [f"- {markdown.prose(line, is_safe=True)}" for line in _cluster_lines(diff)]
        lines += ["", "Each side's probe, to run it again from its vantage:", "", *_commands(diff), ""]
        if diff.rows:
            rows = [[str(r.node_id), markdown.code(c[1], is_safe=True), markdown.prose(c[2], is_safe=True),
                     markdown.prose(c[3], is_safe=True), f"**{c[4]}**" if c[4] else ""]
                    for r, c in ((r, _cells(r, before_after=diff.before_after)) for r in diff.rows)]
            lines += [*markdown.table(["Node", "Endpoint", "A", "B", "Change"], rows), ""]
        if diff.application:
            cells = [[_application_subject(c, markdown.code), markdown.prose(c.state_a), markdown.prose(c.state_b)]
                     for c in diff.application]
            lines += [*markdown.table(["Part", "A", "B"], cells), ""]
        for title, findings in zip(_finding_titles(diff, markdown.code), (diff.only_a, diff.only_b), strict=True):
            if findings:
                lines += [f"**{title}**", ""]
                for f in findings:
                    lines += markdown.finding_lines(f)
                lines.append("")
        out.append("\n".join(lines).rstrip("\n"))
    return "\n\n".join(out) + "\n"
