"""`kprobe show` and `kprobe diff`: saved reports read back, printed, compared."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from kprobe.cli.typed import takes
from kprobe.errors import EXIT_GAP, EXIT_OK, UsageError
from kprobe.option_table import NO_COLOR

ReportPathsArg = Annotated[
    list[str] | None,
    typer.Argument(help="Report files (.json, .jsonl, gzip too), directories written by --out, or - for standard "
                   "input.", show_default=False),
]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Only reports started at or after this time: RFC 3339, "
                                              "a date, or how long ago (90m, 2h, 7d).")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="Only reports started before this time (as --since).")]
ShowVantageOpt = Annotated[list[str], typer.Option("--vantage", help="Only reports from this vantage (repeatable).")]
StatusOpt = Annotated[list[str], typer.Option("--status", help="Only reports with this verdict: ok, gap, failed or "
                                              "interrupted (repeatable, or comma-separated).")]


def _filters(since: str | None, until: str | None, vantage: list[str], status: list[str]) -> Any:
    from kprobe.saved.reading import Filters, parse_when

    statuses = frozenset(word.strip().lower() for value in status for word in value.split(",") if word.strip())
    bad = sorted(statuses - {"ok", "gap", "failed", "interrupted"})
    if bad:
        raise UsageError(f"bad --status {bad[0]!r}: use ok, gap, failed or interrupted")
    return Filters(since=parse_when(since, "--since") if since else None,
                   until=parse_when(until, "--until") if until else None,
                   vantages=frozenset(vantage), statuses=statuses)


def _say_skips(readers: list[Any]) -> None:
    for reader in readers:
        message = reader.skips.message()
        if message:
            from kprobe.sanitize import safe

            sys.stderr.write(f"kprobe: {safe(message, limit=2000)}\n")


@takes("paths", "fmt", "json_out", "summary", "since", "until", "vantage", "status", NO_COLOR)
def show(
    paths: ReportPathsArg = None,
    fmt: Annotated[str | None, typer.Option("--format", help="text (as the probe printed it), json, markdown or "
                                            "prometheus (one report).")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Same as --format json.")] = False,
    summary: Annotated[bool, typer.Option("--summary", help="One line per report: when, vantage, cluster, verdict "
                                          "and the first finding.")] = False,
    since: SinceOpt = None,
    until: UntilOpt = None,
    vantage: ShowVantageOpt = [],  # noqa: B006
    status: StatusOpt = [],  # noqa: B006
    no_color: bool = False,
) -> None:
    """Print saved reports as the live run printed them (or in another format), one after another.

    Exit 0 when the reports were read, 2 when a path named is not a readable kprobe v1 report.
    """
    from kprobe.output.formats import SHOW, choose
    from kprobe.sanitize import use_color
    from kprobe.saved.show import ShowOptions
    from kprobe.saved.show import show as show_reports

    chosen = choose(fmt, json_out, SHOW)
    if summary and chosen != "text":
        raise UsageError("--summary prints one text line per report: leave out --format/--json")
    filters = _filters(since, until, vantage, status)
    options = ShowOptions(fmt=chosen, summary=summary, color=use_color(no_color), indent=sys.stdout.isatty())
    shown, reader = show_reports(paths or ["-"], filters, options, sys.stdout)
    _say_skips([reader])
    if not shown:
        if not reader.seen:
            raise UsageError(f"no kprobe report in {' '.join(paths or ['-'])}")
        sys.stderr.write(f"kprobe: none of the {reader.seen} reports matches the filters\n")


def diff(
    # A and B, as the help and the messages name them (`Missing argument 'B'`): never a lone `b`, which reads as -b.
    a: Annotated[str, typer.Argument(metavar="A", help="The first report (a file, a directory written by --out, "
                                     "or -); A@VANTAGE takes only that vantage's reports.", show_default=False)],
    b: Annotated[str, typer.Argument(metavar="B", help="The report to compare it with (a directory: the newest "
                                     "report of each cluster is compared); B@VANTAGE as for A, so one --out directory "
                                     "of several vantages reads `reports/@office reports/@vpn`.", show_default=False)],
    fmt: Annotated[str | None, typer.Option("--format", help="text, json or markdown.")] = None,
    json_out: Annotated[bool, typer.Option("--json", "-J", help="Same as --format json.")] = False,
    a_vantage: Annotated[str | None, typer.Option("--a-vantage", help="Only A's reports from this vantage (as "
                                                  "A@VANTAGE).")] = None,
    b_vantage: Annotated[str | None, typer.Option("--b-vantage", help="Only B's reports from this vantage (as "
                                                  "B@VANTAGE).")] = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    vantage: ShowVantageOpt = [],  # noqa: B006
    status: StatusOpt = [],  # noqa: B006
) -> None:
    """What differs between two reports: two vantages, or before and after a change.

    The filters choose among the reports of a directory or a stream, on both sides (a side's own
    vantage replaces --vantage); a side that is one report (a file, or one piped in) is compared as
    it is. Exit 0 when the verdicts agree, 1 when they differ (as diff does), 2 on bad input.
    """
    from kprobe.output.formats import DIFF, choose
    from kprobe.saved.show import diff_reports

    chosen = choose(fmt, json_out, tuple(DIFF))
    diffs, unpaired, readers = diff_reports(a, b, _filters(since, until, vantage, status), a_vantage=a_vantage,
                                            b_vantage=b_vantage)
    _say_skips(readers)
    sys.stdout.write(DIFF[chosen](diffs, [u.__dict__ for u in unpaired]))
    raise typer.Exit(EXIT_GAP if unpaired or any(d.differs for d in diffs) else EXIT_OK)


