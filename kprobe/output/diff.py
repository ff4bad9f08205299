"""`kprobe diff` in words, in JSON for scripts, and in Markdown for a ticket.

The table puts one endpoint's two verdicts on one line, so "works from the office, not over the
VPN" reads straight across; the findings only one side has follow, with their fixes; the last
line says whether the verdicts agree, as the exit code does.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from kprobe.compare import EndpointRow, ReportDiff, Side
from kprobe.models import Finding
from kprobe.output import markdown
from kprobe.output.sanitize import safe

_CHANGE_WORDS = {"same": "", "changed": "changed", "moved": "moved", "only_a": "only in A", "only_b": "only in B"}


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


def _cells(row: EndpointRow) -> tuple[str, ...]:
    if row.change == "moved":
        endpoint = f"{safe(row.endpoint_a)} -> {safe(row.endpoint_b)}"
    else:
        endpoint = safe(row.endpoint_a or row.endpoint_b)
    return (str(row.node_id), endpoint, row.verdict_a or "-", row.verdict_b or "-", _CHANGE_WORDS[row.change])


_HEADER = ("NODE", "ENDPOINT", "A", "B", "")


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
    if diff.status_changed:
        parts.append(f"run {diff.a.report.status} -> {diff.b.report.status}")
    counts = [(sum(1 for r in diff.rows if r.change == change), one, many) for change, one, many in
              (("changed", "verdict changed", "verdicts changed"), ("moved", "endpoint moved", "endpoints moved"),
               ("only_a", "endpoint only in A", "endpoints only in A"),
               ("only_b", "endpoint only in B", "endpoints only in B"))]
    counts += [(len(diff.only_a), "finding went away", "findings went away"),
               (len(diff.only_b), "finding appeared", "findings appeared")]
    parts += [f"{n} {one if n == 1 else many}" for n, one, many in counts if n]
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
            rows = [_cells(r) for r in diff.rows]
            widths = [max(len(row[i]) for row in [_HEADER, *rows]) for i in range(len(_HEADER))]
            lines.append("Advertised endpoints, as each side saw them:")
            for row in [_HEADER, *rows]:
                lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
            lines.append("")
        for title, findings in (("Findings only in A (gone in B):", diff.only_a),
                                ("Findings only in B (new in B):", diff.only_b)):
            if findings:
                lines.append(title)
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
        "status_changed": diff.status_changed, "clusters_differ": diff.clusters_differ,
        "brokers_differ": diff.brokers_differ,
        "endpoints": [{"node_id": r.node_id, "a": r.endpoint_a, "b": r.endpoint_b, "verdict_a": r.verdict_a,
                       "verdict_b": r.verdict_b, "addresses_a": list(r.addresses_a),
                       "addresses_b": list(r.addresses_b), "change": r.change} for r in diff.rows],
        "findings_only_a": [_finding_dict(f) for f in diff.only_a],
        "findings_only_b": [_finding_dict(f) for f in diff.only_b],
    }


def render_json(diffs: list[ReportDiff], unpaired: list[dict[str, Any]] | None = None) -> str:
    """JSON for scripts: one object with every comparison (ASCII only, like the report)."""
    return json.dumps({"schema": "kprobe.diff/v1", "differs": any(d.differs for d in diffs) or bool(unpaired),
                       "comparisons": [to_dict(d) for d in diffs], "unpaired": unpaired or []},
                      ensure_ascii=True) + "\n"


def render_markdown(diffs: list[ReportDiff]) -> str:
    """Each comparison as a ticket-ready summary: both sides, the endpoint table, the findings."""
    out: list[str] = []
    for diff in diffs:
        lines = [f"#### kprobe diff: {markdown.prose(verdict_line(diff))}", ""]
        for label, side in (("A", diff.a), ("B", diff.b)):
            r = side.report
            lines.append(f"- **{label}**: {markdown.code(side.source, limit=300)}, **{r.status.upper()}** from "
                         f"{markdown.code(r.vantage.name)} at {markdown.code(r.started_at, limit=40)}")
        lines += [f"- {markdown.prose(line, is_safe=True)}" for line in _cluster_lines(diff)]
        lines.append("")
        if diff.rows:
            rows = [[str(r.node_id), markdown.code(c[1], is_safe=True), markdown.prose(c[2], is_safe=True),
                     markdown.prose(c[3], is_safe=True), f"**{c[4]}**" if c[4] else ""]
                    for r, c in ((r, _cells(r)) for r in diff.rows)]
            lines += [*markdown.table(["Node", "Endpoint", "A", "B", "Change"], rows), ""]
        for title, findings in (("Findings only in A (gone in B)", diff.only_a),
                                ("Findings only in B (new in B)", diff.only_b)):
            if findings:
                lines += [f"**{title}**", ""]
                for f in findings:
                    lines += markdown.finding_lines(f)
                lines.append("")
        out.append("\n".join(lines).rstrip("\n"))
    return "\n\n".join(out) + "\n"
