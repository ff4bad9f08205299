"""`kprobe show` and `kprobe diff`: saved reports read back and printed as the live run printed them.

The renderers are the probe's own (text, JSON, Prometheus, Markdown), handed the models that
`json_load` rebuilds, so a report saved at 3 a.m. reads exactly as it would have on the terminal.
Reports stream: `show` holds one at a time (and, to know whether it is the only one, the rendered
text of the first until a second arrives); `diff` over directories keeps the newest report per
cluster and vantage, never the directory.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
from collections.abc import Iterable, Iterator
from typing import IO, Any

from kprobe.errors import BadReport, UsageError
from kprobe.models import Report
from kprobe.output.json_load import from_dict, summary_of
from kprobe.records import field, record, replace
from kprobe.sanitize import safe
from kprobe.saved.reading import Filters, Reader, Saved, instant

_STATUS_COLOR = {"ok": "32", "gap": "31", "failed": "31", "interrupted": "33"}


@record
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
    """`show --summary`'s line: when, from where, which cluster, the verdict in counts, and the first problem.

    The verdict is the text report's summary line (`text.verdict_line`, as `watch` prints it), read
    from the saved `summary` where it holds every count, else from the models built in full.
    """
    from kprobe.output.text import verdict_line, verdict_of, verdict_of_saved

    s = summary_of(saved.data)
    counts = verdict_of_saved(saved.data)
    if counts is None:
        counts = verdict_of(from_dict(saved.data))
    status, colon, rest = verdict_line(counts).partition(":")
    if color:
        status = f"\x1b[{_STATUS_COLOR[s['status']]}m{status}\x1b[0m"
    first = s["first"]
    problem = ""
    if first is not None:  # a glance, not the finding: `show` prints it whole; `watch` words it the same
        from kprobe.output.text import problem_glance

        ends = first.get("endpoints")  # reports before endpoints lists have `endpoint` alone
        problem = problem_glance(first.get("code"), first.get("message"),
                                 ends if isinstance(ends, list) and ends else [first.get("endpoint")])
    clusters = ",".join(safe(c, limit=64) for c in s["clusters"]) or "-"
    return (f"{safe(s['started_at'], limit=40)}  {safe(s['vantage'], limit=64)}  {clusters}  "
            f"{status}{colon}{rest}{problem}")


def render_one(report: Report, saved: Saved, options: ShowOptions) -> str:
    """One report in the chosen format, as `kprobe probe` would have printed it."""
    if options.fmt == "json":
        # The report as saved (fields a newer kprobe added stay), one line unless a person is reading.
        return json.dumps(saved.data, indent=2 if options.indent else None, ensure_ascii=True) + "\n"
    from kprobe.output.formats import REPORT, Style

    return REPORT[options.fmt](report, Style(color=options.color))


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


@record
class DiffSide:
    """One side of `kprobe diff` as given: its label (A or B), a path or `-`, and the vantage asked of it.

    `given` is the argument as typed, for messages. `vantage` (from `PATH@VANTAGE` or
    `--a-vantage`/`--b-vantage`) chooses this side's reports and no other's: the layout the docs
    recommend puts every vantage in one `--out` directory, so the two sides of "office against VPN"
    are often one directory read twice.
    """

    label: str
    given: str
    path: str
    vantage: str | None = None

    @property
    def flag(self) -> str:
        """The option that gives this side its own vantage."""
        return f"--{self.label.lower()}-vantage"


def diff_side(label: str, given: str, vantage: str | None = None) -> DiffSide:
    """A side from its argument (`PATH`, `PATH@VANTAGE`, `-`, `-@VANTAGE`) and its `--a-vantage`/`--b-vantage`.

    A path that exists as typed is a path, `@` and all (a file may be named `alice@laptop.json`).
    Otherwise the first `@` of its last part that follows an existing path (or `-`) starts the
    vantage, so a vantage named `alice@laptop` still reads `reports/@alice@laptop`.
    """
    if vantage is not None and not vantage.strip():
        raise UsageError(f"bad --{label.lower()}-vantage {vantage!r}: give a vantage name")
    path, at = _split_at(given)
    if at is not None and vantage is not None and at != vantage:
        raise UsageError(f"{label}'s vantage is given twice ({given} and --{label.lower()}-vantage {vantage}): "
                         "give it once")
    return DiffSide(label=label, given=given, path=path, vantage=at if at is not None else vantage)


def _split_at(given: str) -> tuple[str, str | None]:
    if given == "-" or os.path.exists(given):
        return given, None
    head, slash, last = given.rpartition("/")
    starts = [i for i, c in enumerate(last) if c == "@"]
    if not starts:
        return given, None  # a path that is missing: the reader says so
    for i in starts:
        path = head + slash + last[:i]
        if path == "-" or (path and os.path.exists(path)):
            return _at_parts(given, path, last[i + 1:])
    return _at_parts(given, head + slash + last[:starts[0]], last[starts[0] + 1:])


def _at_parts(given: str, path: str, vantage: str) -> tuple[str, str]:
    if not path:
        raise UsageError(f"bad {given!r}: give a report file or directory before the @, as reports/{given}")
    if not vantage:
        raise UsageError(f"bad {given!r}: give a vantage after the @, as {path}@VANTAGE")
    return path, vantage


def _at(path: str, vantage: str) -> str:
    """`PATH@VANTAGE` as a shell word, for a hint to copy."""
    return shlex.quote(f"{path}@{vantage}")


@record(frozen=False)
class _Chosen:
    """One side read: the newest report per (cluster, vantage), and what the messages need."""

    side: DiffSide
    reader: Reader
    latest: dict[tuple[str, str], tuple[dt.datetime | None, Saved]] = field(default_factory=dict)
    vantages: set[str] = field(default_factory=set)  # of the reports the other filters kept
    named: bool = False  # the side is one report the user named: compared as it is

    def only(self) -> Saved:
        """The side's one report (when it has one)."""
        return next(iter(self.latest.values()))[1]

    def spread(self) -> tuple[str, list[str]] | None:
        """A cluster whose newest reports here come from several vantages, and those vantages."""
        by_cluster: dict[str, list[str]] = {}
        for cluster, vantage in sorted(self.latest):
            by_cluster.setdefault(cluster, []).append(vantage)
        return next(((cluster, names) for cluster, names in by_cluster.items() if len(names) > 1), None)


def _choose(side: DiffSide, filters: Filters, stdin: IO[bytes] | None) -> _Chosen:
    """The newest report of each cluster and vantage on one side.

    Filters choose among reports, so they apply to a directory and to a stream of several. A side
    that is one report the user named (a file, or `-` piping one in) is compared as it is: in
    `kprobe diff - reports/ --vantage vpc`, `--vantage` can only mean the directory's reports, and
    read on both sides it failed with "no kprobe report in - matches the filters". The side's own
    vantage (`-@vpc`) is still held against it: the user said what that report is.
    """
    is_dir = side.path != "-" and os.path.isdir(side.path)
    others = replace(filters, vantages=frozenset())
    reader = Reader([side.path], others if is_dir else Filters(), stdin=stdin)
    wanted = frozenset([side.vantage]) if side.vantage is not None else filters.vantages
    chosen = _Chosen(side=side, reader=reader)
    for saved in reader:
        try:
            summary = summary_of(saved.data)
            key = cluster_key(saved.data)
        except BadReport as exc:
            if saved.named:
                raise BadReport(f"{saved.source}: {exc}") from None
            reader.skips.add("file", saved.source, str(exc))
            continue
        vantage = summary["vantage"]
        if saved.named:
            if side.vantage is not None and vantage != side.vantage:
                raise UsageError(f"{side.label} is {side.given}, a report from vantage {vantage!r}, not "
                                 f"{side.vantage!r}")
            chosen.named = True
        elif not is_dir and not others.keeps(saved.data):
            continue
        chosen.vantages.add(vantage)
        if not saved.named and wanted and vantage not in wanted:
            continue
        at = instant(summary["started_at"])
        held = chosen.latest.get((key, vantage))
        if held is None or (at is not None and (held[0] is None or at >= held[0])):
            chosen.latest[(key, vantage)] = (at, saved)
    if not chosen.latest:
        raise UsageError(_nothing_in(side, chosen, wanted, others))
    return chosen


def _nothing_in(side: DiffSide, chosen: _Chosen, wanted: frozenset[str], others: Filters) -> str:
    """Why a side holds no report: none there, none of the vantage asked (naming those there), or the filters."""
    if not chosen.reader.seen:
        return f"no kprobe report in {side.path}"
    if wanted and chosen.vantages:
        names = sorted(chosen.vantages)
        there = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        asked = " or ".join(repr(v) for v in sorted(wanted))
        if others == Filters():
            return f"no kprobe report in {side.path} is from vantage {asked}: its reports are from {there}"
        return (f"no kprobe report in {side.path} is from vantage {asked} and matches the filters: those that "
                f"match are from {there}")
    return f"no kprobe report in {side.path} matches the filters"


def _report(saved: Saved) -> Report:
    try:
        return from_dict(saved.data)
    except BadReport as exc:
        raise BadReport(f"{saved.source}: {exc}") from None


@record
class Unpaired:
    """A cluster (of a vantage, when both sides hold several) only one side has a report of."""

    side: str
    cluster: str
    source: str
    vantage: str | None = None


def _pairs(left: _Chosen, right: _Chosen) -> tuple[list[tuple[Saved, Saved]], list[Unpaired]]:
    """Which report of A is compared with which of B.

    One report a side: those two, whatever their clusters (another cluster is itself the answer).
    Otherwise by cluster, the newest of each. When a side's newest reports of one cluster come from
    several vantages, the newest "of the cluster" would be whichever vantage ran last: with several
    on both sides (before/ and after/ of every vantage) each vantage is paired with itself; with
    several on one side only, which to compare is the user's to say, so kprobe asks.
    """
    if len(left.latest) == 1 and len(right.latest) == 1:
        return [(left.only(), right.only())], []
    spread_a, spread_b = left.spread(), right.spread()
    if spread_a is not None and spread_b is not None:
        a_by = {k: v[1] for k, v in left.latest.items()}
        b_by = {k: v[1] for k, v in right.latest.items()}
        unpaired = [Unpaired("A", c, a_by[c, v].source, v) for c, v in sorted(a_by.keys() - b_by.keys())]
        unpaired += [Unpaired("B", c, b_by[c, v].source, v) for c, v in sorted(b_by.keys() - a_by.keys())]
        return [(a_by[k], b_by[k]) for k in sorted(a_by.keys() & b_by.keys())], unpaired
    if spread_a is not None or spread_b is not None:
        many, one = (left, right) if spread_a is not None else (right, left)
        cluster, names = spread_a or spread_b  # type: ignore[misc]
        side = many.side
        # The hint names a vantage the other side is not from: comparing across vantages is the likelier ask.
        hint = next((n for n in names if n not in one.vantages), names[0])
        raise UsageError(f"{side.label} ({side.path}) holds reports of cluster {cluster} from {len(names)} vantages "
                         f"({', '.join(names[:10])}) and {one.side.label} from one: say which {side.label} is, as "
                         f"{_at(side.path, hint)} or {side.flag} {shlex.quote(hint)}")
    a_one = {k[0]: v[1] for k, v in left.latest.items()}
    b_one = {k[0]: v[1] for k, v in right.latest.items()}
    unpaired = [Unpaired("A", k, a_one[k].source) for k in sorted(a_one.keys() - b_one.keys())]
    unpaired += [Unpaired("B", k, b_one[k].source) for k in sorted(b_one.keys() - a_one.keys())]
    return [(a_one[k], b_one[k]) for k in sorted(a_one.keys() & b_one.keys())], unpaired


def _refuse_itself(left: _Chosen, right: _Chosen, x: Saved, y: Saved) -> None:
    """A report is never compared with itself unless the user named it twice: `diff reports/ reports/` asks for sides.

    Such a comparison says SAME whatever the network did; it is what `diff DIR DIR` gave when
    DIR held several vantages. Picking two of them (the newest of each?) would guess which is A,
    and with three vantages, which two: the user says, in one line they can copy.
    """
    if left.named and right.named:
        return  # `kprobe diff r.json r.json`: asked for, and a fair check that nothing differs
    if x.data.get("id") != y.data.get("id") or x.data.get("started_at") != y.data.get("started_at"):
        return
    names = sorted(left.vantages | right.vantages)
    if len(names) > 1:
        there = f"{left.side.path} holds" if left.side.path == right.side.path else "the two sides hold"
        raise UsageError(f"A and B would both be {x.source}: {there} reports from {len(names)} vantages "
                         f"({', '.join(names[:10])}): pick one per side, as kprobe diff "
                         f"{_at(left.side.path, names[0])} {_at(right.side.path, names[1])}")
    raise UsageError(f"A and B would both be {x.source}: name two different reports or directories to compare")


def diff_reports(a: str, b: str, filters: Filters, stdin: IO[bytes] | None = None, *, a_vantage: str | None = None,
                 b_vantage: str | None = None) -> tuple[list[Any], list[Unpaired], list[Reader]]:
    """Pair the two sides' reports (two files, or the newest per cluster of each) and compare each pair.

    `a_vantage`/`b_vantage` (or `A@VANTAGE`) choose one side's reports; `filters.vantages` chooses
    both sides' where a side has no vantage of its own.
    """
    from kprobe.models.compare import Side, compare

    side_a, side_b = diff_side("A", a, a_vantage), diff_side("B", b, b_vantage)
    if side_a.path == "-" and side_b.path == "-":
        raise UsageError("standard input can be only one side of a diff: give a file or directory for the other")
    left, right = _choose(side_a, filters, stdin), _choose(side_b, filters, stdin)
    pairs, unpaired = _pairs(left, right)
    for x, y in pairs:
        _refuse_itself(left, right, x, y)
    diffs = [compare(Side(source=x.source, report=_report(x)), Side(source=y.source, report=_report(y)))
             for x, y in pairs]
    return diffs, unpaired, [left.reader, right.reader]
