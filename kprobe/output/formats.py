"""Output formats: one registry of names to renderers, and one rule for `--json` against `--format`.

Why one module: so that five commands check a format name against one list and say "--json and
--format disagree" in one set of words. Here each kind of
document (a probe report, a `list` listing, a `check` report, a `diff`) maps its format names to
the function that renders it, and each command's choice of names is a tuple taken from those maps;
`choose` settles the two options for every command, with one message. A command then calls the
renderer it got: no `if fmt == ...` chain anywhere else.

Renderers import their module when called, so a command that prints text never imports the JSON,
Markdown or Prometheus code (the CLI's start-up time is part of its contract).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from kprobe.errors import UsageError
from kprobe.records import record

if TYPE_CHECKING:
    from kprobe.check.listeners import CheckReport
    from kprobe.models import Report
    from kprobe.models.compare import ReportDiff
    from kprobe.runs.listing import Listing


@record
class Style:
    """How a renderer prints: `color` for a terminal, `indent` for JSON a person reads (a terminal, not a pipe)."""

    color: bool = False
    indent: bool = False


# -- a probe report (probe, watch, show) -------------------------------------------------------

def _report_text(report: Report, style: Style) -> str:
    from kprobe.output import text

    return text.render(report, color=style.color)


def _report_json(report: Report, style: Style) -> str:
    from kprobe.output import json_report

    # Indented for a person at a terminal, one line for a pipe or a file (as gh does; kcat -J is always
    # one line): jq reads either, and a script does not wait for indentation.
    return json_report.render(report, indent=2 if style.indent else None)


def _report_prometheus(report: Report, style: Style) -> str:
    from kprobe.output import prometheus

    return prometheus.render(report)


def _report_markdown(report: Report, style: Style) -> str:
    from kprobe.output import markdown

    return markdown.render(report)


REPORT: Mapping[str, Callable[[Report, Style], str]] = {
    "text": _report_text, "json": _report_json, "prometheus": _report_prometheus, "markdown": _report_markdown,
}
# The names each command takes, in the order its help and its message list them.
PROBE = ("text", "json", "prometheus", "markdown")
# `watch` prints a summary line per run, not a report: a ticket's Markdown has no place there.
WATCH = ("text", "json", "prometheus")
SHOW = ("text", "json", "markdown", "prometheus")


# -- a listing (`kprobe list`): streamed, a topic at a time --------------------------------------

def _listing_text(listing: Listing, out: TextIO) -> None:
    from kprobe.output import kcat

    kcat.write_text(listing, out)


def _listing_json(listing: Listing, out: TextIO) -> None:
    from kprobe.output import kcat

    kcat.write_json(listing, out)


LISTING: Mapping[str, Callable[[Listing, TextIO], None]] = {"text": _listing_text, "json": _listing_json}


# -- a check report (`kprobe check`) ---------------------------------------------------------------

def _check_text(report: CheckReport, style: Style) -> str:
    from kprobe.output import check

    return check.render_text(report, color=style.color)


def _check_json(report: CheckReport, style: Style) -> str:
    from kprobe.output import check

    return check.render_json(report, indent=style.indent)


def _check_markdown(report: CheckReport, style: Style) -> str:
    from kprobe.output import check

    return check.render_markdown(report)


CHECK: Mapping[str, Callable[[CheckReport, Style], str]] = {
    "text": _check_text, "json": _check_json, "markdown": _check_markdown,
}


# -- a diff (`kprobe diff`): the comparisons, and the clusters only one side has --------------------

Unpaired = Mapping[str, Any]  # side, cluster, source, vantage (kprobe.saved.show.Unpaired as a dict)


def _only_in(unpaired: Sequence[Unpaired]) -> str:
    """`Only in A: cluster ...` lines, after the text and the Markdown alike."""
    from kprobe.sanitize import safe

    out = []
    for u in unpaired:
        of = f" from vantage {safe(u['vantage'])}" if u.get("vantage") is not None else ""
        out.append(f"Only in {u['side']}: cluster {safe(u['cluster'])}{of} ({safe(u['source'], limit=300)})\n")
    return "".join(out)


def _diff_text(diffs: list[ReportDiff], unpaired: Sequence[Unpaired]) -> str:
    from kprobe.output import diff

    return diff.render_text(diffs) + _only_in(unpaired)


def _diff_json(diffs: list[ReportDiff], unpaired: Sequence[Unpaired]) -> str:
    from kprobe.output import diff

    return diff.render_json(diffs, [dict(u) for u in unpaired])


def _diff_markdown(diffs: list[ReportDiff], unpaired: Sequence[Unpaired]) -> str:
    from kprobe.output import diff

    return diff.render_markdown(diffs) + _only_in(unpaired)


DIFF: Mapping[str, Callable[[list[ReportDiff], Sequence[Unpaired]], str]] = {
    "text": _diff_text, "json": _diff_json, "markdown": _diff_markdown,
}


# -- --json against --format ----------------------------------------------------------------------

def choose(fmt: str | None, json_out: bool, names: Sequence[str]) -> str:
    """The format a command prints, from its `--format` and `--json`: the one place both are settled.

    `--json` is `--format json`; given with another `--format`, the two disagree and the user says
    which. A name outside `names` is refused with the names listed, in the command's order.
    """
    chosen = (fmt or ("json" if json_out else "text")).lower()
    if chosen not in names:
        raise UsageError(f"bad --format {fmt!r}: use {', '.join(names[:-1])} or {names[-1]}")
    if json_out and chosen != "json":
        raise UsageError("--json and --format disagree: give one of them")
    return chosen
