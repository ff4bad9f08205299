"""`kprobe fix`'s result in three formats: text (the diff, the steps, the proof), JSON (`kprobe.fix/v1`), Markdown.

The text leads with the diff exactly as `patch -p0` takes it, so `kprobe fix ... > change.patch` is a patch
file; what follows the last hunk is prose both `patch` and `git apply` pass over. The JSON has its schema
beside this module (`fix_schema.json`, printed by `kprobe schema --fix`). The Markdown is for a change
ticket: what changes, why, and the proof. Every secret the files hold is scrubbed from every format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from kprobe import __version__
from kprobe.check.listeners import CLIENT_NETWORK_WORDS
from kprobe.fix.model import FixReport
from kprobe.redaction import REDACTED
from kprobe.sanitize import safe

SCHEMA_ID = "kprobe.fix/v1"
_AFTER_WORDS = {"ok": "ok (unchanged)", "closed": "closed", "gap": "GAP", "not proven": "not proven here"}


def scrub(text: str, report: FixReport) -> str:
    """The text with every secret of the files replaced (longest first)."""
    for secret in sorted({s for s in report.secrets if len(s) >= 3}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def summary_line(report: FixReport) -> str:
    """One line: what was found and whether it is proven."""
    plan = report.plan
    if not plan.gaps:
        return "The reports show no gap: nothing to change."
    if not plan.edits:
        return f"{len(plan.gaps)} gap(s) in the reports, none of which a change of these files closes."
    brokers = len({(e.source, e.node_id) for e in plan.edits})
    proven = "proven to close every reported gap" if report.status == "ok" else "some gap stays open or unproven"
    return f"A change of {brokers} broker(s) in {len(report.files)} file(s): {proven}."


def render_text(report: FixReport, *, color: bool = False) -> str:
    """The diff, then the steps outside the files, what stays open, and the proof per vantage."""
    del color  # the diff is a patch file's text: no escapes in it
    out = [report.patch]
    notes = [f"# {summary_line(report)}"]
    if report.plan.steps:
        notes.append("# Outside the files:")
        notes += [f"#   - {safe(s.text)}" for s in report.plan.steps]
    if report.plan.unresolved:
        notes.append("# Not closed by configuration:")
        notes += [f"#   - {safe(u.vantage)}: {safe(u.endpoint or '')} {safe(u.why)}".replace("  ", " ")
                  for u in report.plan.unresolved]
    if report.proofs:
        notes.append("# Per vantage, before -> after:")
        for proof in report.proofs:
            notes.append(f"#   {safe(proof.vantage)} ({CLIENT_NETWORK_WORDS[proof.network]}): {proof.before} -> "
                         f"{_AFTER_WORDS[proof.after]}")
            # One line per clause: a clause ends in the command to run, which must print whole.
            notes += [f"#     {safe(part, limit=1024)}" for part in proof.how.split("; ")]
            if proof.command:
                label = "what-if there" if "--connect-to" in proof.command else "run there after the restart"
                notes.append(f"#     {label}: {safe(proof.command, limit=1024)}")
    text = out[0] + ("\n" if out[0] else "") + "\n".join(notes) + "\n"
    return scrub(text, report)


def to_dict(report: FixReport) -> dict[str, Any]:
    """The `kprobe.fix/v1` document."""
    plan = report.plan
    return {
        "schema": SCHEMA_ID,
        "tool": {"name": "kprobe", "version": __version__},
        "status": report.status,
        "summary": summary_line(report),
        "reports": list(report.reports),
        "configs": list(report.configs),
        "patch": report.patch,
        "files": [{"path": f.path, "kind": f.kind,
                   "changes": [{"broker": c.broker, "node_id": c.node_id, "listener": c.listener, "action": c.action,
                                "setting": c.setting, "old": c.old, "new": c.new} for c in f.changes]}
                  for f in report.files],
        "edits": [{"file": e.source, "broker": e.broker, "node_id": e.node_id, "listener": e.listener,
                   "action": e.action, "old": e.old, "new": e.new, "protocol": e.protocol, "via": e.via,
                   "bind": e.bind, "publish": e.publish, "vantages": list(e.vantages)} for e in plan.edits],
        "steps": [{"kind": s.kind, "text": s.text} for s in plan.steps],
        "vantages": [{"vantage": p.vantage, "report": p.source, "network": p.network, "before": p.before,
                      "after": p.after, "how": p.how, "command": p.command} for p in report.proofs],
        "unresolved": [{"vantage": u.vantage, "node_id": u.node_id, "endpoint": u.endpoint, "why": u.why}
                       for u in plan.unresolved],
        "verified": report.verified,
    }


def render_json(report: FixReport, *, indent: bool = False) -> str:
    """The JSON document, secrets scrubbed."""
    return scrub(json.dumps(to_dict(report), indent=2 if indent else None, ensure_ascii=False), report) + "\n"


def render_markdown(report: FixReport) -> str:
    """A change ticket: the summary, the changes per broker, the patch, the steps and the proof."""
    from kprobe.output.markdown import code, prose, table

    lines = ["## kprobe fix", "", prose(summary_line(report)), ""]
    if report.plan.edits:
        lines += ["### Changes", ""]
        lines += table(["file", "broker", "listener", "action", "advertised before", "advertised after"],
                       [[code(e.source), code(e.broker), code(e.listener), e.action, code(e.old or e.replaces or ""),
                         code(e.new)] for e in report.plan.edits])
        lines += ["", "```diff", report.patch.rstrip("\n"), "```", ""]
    if report.plan.steps:
        lines += ["### Outside the files", ""] + [f"- {prose(s.text)}" for s in report.plan.steps] + [""]
    if report.plan.unresolved:
        lines += ["### Not closed by configuration", ""]
        lines += [f"- {prose(u.vantage)}: {prose(u.why)}" for u in report.plan.unresolved] + [""]
    if report.proofs:
        lines += ["### Proof", ""]
        lines += table(["vantage", "before", "after", "how", "what-if there"],
                       [[code(p.vantage), p.before, _AFTER_WORDS[p.after], prose(p.how),
                         code(p.command, limit=1024) if p.command else ""] for p in report.proofs])
        lines.append("")
    return scrub("\n".join(lines) + "\n", report)


def schema_text() -> str:
    """The shipped JSON Schema of `kprobe.fix/v1`, as text."""
    from importlib import resources

    return resources.files("kprobe.output").joinpath("fix_schema.json").read_text(encoding="utf-8")


FIX: Mapping[str, Callable[[FixReport, bool], str]] = {
    "text": lambda r, indent: render_text(r),
    "json": lambda r, indent: render_json(r, indent=indent),
    "markdown": lambda r, indent: render_markdown(r),
}
