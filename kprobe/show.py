"""`kprobe show` and `kprobe diff`: saved reports read back and printed as the live run printed them.

The renderers are the probe's own (text, JSON, Prometheus, Markdown), handed the models that
`json_load` rebuilds, so a report saved at 3 a.m. reads exactly as it would have on the terminal.
Reports stream: `show` holds one at a time (and, to know whether it is the only one, the rendered
text of the first until a second arrives); `diff` over directories keeps the newest report per
cluster, never the directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from kprobe.errors import BadReport, UsageError
from kprobe.models import Report
from kprobe.output.json_load import from_dict, summary_of
from kprobe.output.sanitize import safe
from kprobe.saved import Filters, Reader, Saved, instant

SHOW_FORMATS = ("text", "json", "markdown", "prometheus")
DIFF_FORMATS = ("text", "json", "markdown")
_STATUS_COLOR = {"ok": "32", "gap": "31", "failed": "31", "interrupted": "33"}


@dataclass(frozen=True)
class ShowOptions:
    """What `kprobe show` prints, checked."""

    fmt: str = "text"
    summary: bool = False
    color: bool = False
    indent: bool = False


def _models(reader: Reader, saved: Iterable[Saved]) -> Iterator[tuple[Saved, Report]]:
    """Each report as models; one broken deep inside is skipped and counted, unless it was named."""
    for item in saved:
        try:
            yield item, from_dict(item.data)
        except BadReport as exc:
            if item.named:
                raise BadReport(f"{item.source}: {exc}") from None
            reader.skips.add("line" if ":" in item.source.rsplit("/", 1)[-1] else "file", item.source, str(exc))


def summary_row(saved: Saved, color: bool = False) -> str:
    """`show --summary`'s line: when, from where, which cluster, the verdict, and the first problem."""
    s = summary_of(saved.data)
    status = s["status"].upper()
    if color:
        status = f"\x1b[{_STATUS_COLOR[s['status']]}m{status}\x1b[0m"
    first = s["first"]
    problem = ""
    if first is not None:
        message = safe(first.get("message"), limit=4000)
        if len(message) > 100:  # a glance, not the finding: `show` prints it whole
            message = message[:97].rstrip() + "..."
        problem = f"  {safe(first.get('code'), limit=64)}: {message}"
    clusters = ",".join(safe(c, limit=64) for c in s["clusters"]) or "-"
    return f"{safe(s['started_at'], limit=40)}  {safe(s['vantage'], limit=64)}  {clusters}  {status}{problem}"


def render_one(report: Report, saved: Saved, options: ShowOptions) -> str:
    """One report in the chosen format, as `kprobe probe` would have printed it."""
    if options.fmt == "json":
        # The report as saved (fields a newer kprobe added stay), one line unless a person is reading.
        return json.dumps(saved.data, indent=2 if options.indent else None, ensure_ascii=True) + "\n"
    if options.fmt == "markdown":
        from kprobe.output import markdown

        return markdown.render(report)
    if options.fmt == "prometheus":
        from kprobe.output import prometheus

        return prometheus.render(report)
    from kprobe.output import text

    return text.render(report, color=options.color)


def show(paths: list[str], filters: Filters, options: ShowOptions, out: IO[str],
         stdin: IO[bytes] | None = None) -> tuple[int, Reader]:
    """Print every kept report; returns how many were printed, and the reader (for its skips)."""
    reader = Reader(paths, filters, stdin=stdin)
    shown = 0
    if options.summary:
        for saved in reader:
            try:
                row = summary_row(saved, options.color)
            except BadReport as exc:
                if saved.named:
                    raise BadReport(f"{saved.source}: {exc}") from None
                reader.skips.add("file", saved.source, str(exc))
                continue
            out.write(row + "\n")
            shown += 1
        return shown, reader
    held: tuple[Saved, str] | None = None  # the first report, until a second says there are many
    for saved, report in _models(reader, reader):
        rendered = render_one(report, saved, options)
        shown += 1
        if shown == 1:
            held = (saved, rendered)
            continue
        if options.fmt == "prometheus":
            raise UsageError("--format prometheus shows one report, and more than one matches: name one file, or "
                             "narrow with --vantage, --since or --until")
        if held is not None:
            out.write(_many(held[0], held[1], options, first=True))
            held = None
        out.write(_many(saved, rendered, options, first=False))
    if held is not None:
        out.write(held[1])
    return shown, reader


def _many(saved: Saved, rendered: str, options: ShowOptions, *, first: bool) -> str:
    """One of several reports: JSON Lines stay one per line; text and Markdown get a header naming the file."""
    if options.fmt == "json":
        return json.dumps(saved.data, ensure_ascii=True) + "\n"
    if options.fmt == "markdown":
        return ("" if first else "\n---\n\n") + rendered
    return ("" if first else "\n") + f"==> {safe(saved.source, limit=300)} <==\n" + rendered


# --- diff -------------------------------------------------------------------------------------


def cluster_key(data: dict[str, Any]) -> str:
    """Which cluster a report is of: its bootstraps' cluster ids, or what it tried when none answered."""
    s = summary_of(data)
    if s["clusters"]:
        return ",".join(sorted(s["clusters"]))
    addresses = sorted(b.get("address", "?") for b in data.get("bootstraps", []) if isinstance(b, dict))
    return "no answer from " + ",".join(str(a) for a in addresses)


def latest_per_cluster(path: str, filters: Filters, stdin: IO[bytes] | None = None) -> tuple[dict[str, Saved],
                                                                                             Reader]:
    """The newest report of each cluster under a path (a file of one report gives just it)."""
    reader = Reader([path], filters, stdin=stdin)
    latest: dict[str, tuple[Any, Saved]] = {}
    for saved in reader:
        try:
            key = cluster_key(saved.data)
            at = instant(summary_of(saved.data)["started_at"])
        except BadReport as exc:
            if saved.named:
                raise BadReport(f"{saved.source}: {exc}") from None
            reader.skips.add("file", saved.source, str(exc))
            continue
        if key not in latest or (at is not None and (latest[key][0] is None or at >= latest[key][0])):
            latest[key] = (at, saved)
    if not latest:
        raise UsageError(f"no kprobe report in {path}" + (" matches the filters" if reader.seen else ""))
    return {k: v[1] for k, v in latest.items()}, reader


def _report(saved: Saved) -> Report:
    try:
        return from_dict(saved.data)
    except BadReport as exc:
        raise BadReport(f"{saved.source}: {exc}") from None


@dataclass(frozen=True)
class Unpaired:
    """A cluster only one side has a report of (directories compared)."""

    side: str
    cluster: str
    source: str


def diff_reports(a: str, b: str, filters: Filters,
                 stdin: IO[bytes] | None = None) -> tuple[list[Any], list[Unpaired], list[Reader]]:
    """Pair the two sides' reports (two files, or the newest per cluster of each) and compare each pair."""
    from kprobe.compare import Side, compare

    if a == "-" and b == "-":
        raise UsageError("standard input can be only one side of a diff: give a file or directory for the other")
    left, reader_a = latest_per_cluster(a, filters, stdin)
    right, reader_b = latest_per_cluster(b, filters, stdin)
    if len(left) == 1 and len(right) == 1:
        # Two reports: compared whatever their clusters (a different cluster is itself the answer).
        pairs = [(next(iter(left.values())), next(iter(right.values())))]
        unpaired: list[Unpaired] = []
    else:
        pairs = [(left[k], right[k]) for k in sorted(left.keys() & right.keys())]
        unpaired = [Unpaired("A", k, left[k].source) for k in sorted(left.keys() - right.keys())]
        unpaired += [Unpaired("B", k, right[k].source) for k in sorted(right.keys() - left.keys())]
    diffs = [compare(Side(source=x.source, report=_report(x)), Side(source=y.source, report=_report(y)))
             for x, y in pairs]
    return diffs, unpaired, [reader_a, reader_b]
