"""Saved reports, found and read one at a time: files, `--out` directories, JSON Lines, gzip, stdin.

What `kprobe show` and `kprobe diff` read. A directory of a year of scheduled probes holds
hundreds of thousands of reports, so nothing here holds more than one report at a time: a
directory is listed (names only), sorted by the time its file names carry, and each file is
opened, parsed and handed on before the next. A file named on the command line must be a report
(or a stream of them), and anything else is one line and exit 2; a file found in a directory or a
line of a stream may be anything a person or a crash left there, so it is skipped and counted,
and the count is said at the end.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from kprobe.errors import BadReport, UsageError
from kprobe.output.json_load import check_schema
from kprobe.records import field, record

SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz")
# The most a report, or a line of a JSON Lines stream, may take once decompressed. The JSON report of
# a 200-broker cluster is 1.5 MB; a gzip file of 200 KB can hold 200 MB of
# zeros, and read whole it would take gigabytes once parsed. Past this, the file is refused.
MAX_REPORT_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
# What bytes.strip() strips: a line of only these is blank, and a run of them is skipped in one pass.
_BLANK_RUN = re.compile(rb"[ \t\n\r\x0b\x0c]*")
# `--out` names: <vantage>-<YYYYMMDDTHHMMSS.mmmZ>-<id>.json (kprobe.output.files.report_path).
_STAMP = re.compile(r"-(\d{8}T\d{6}(?:\.\d+)?Z)-[0-9a-f-]{36}\.json")
_GZIP_MAGIC = b"\x1f\x8b"


@record
class Saved:
    """One report as read: where it came from (`path`, `path:LINE`, `-:LINE`) and its JSON object.

    `named`: the user named this very report (a file holding just it), so a problem found later
    in it is bad input (exit 2); one found among many is skipped and counted instead.
    """

    source: str
    data: dict[str, Any]
    named: bool = False


@record
class Filters:
    """`--since`, `--until`, `--vantage`, `--status`: which reports to keep (all when empty)."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    vantages: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()

    def keeps(self, data: dict[str, Any]) -> bool:
        """Whether a report (already known to be one) passes every filter."""
        if self.since is not None or self.until is not None:
            at = instant(data.get("started_at"))
            if at is None or (self.since is not None and at < self.since) or (self.until is not None
                                                                              and at >= self.until):
                return False
        if self.vantages:
            vantage = data.get("vantage")
            if not isinstance(vantage, dict) or vantage.get("name") not in self.vantages:
                return False
        if self.statuses:
            summary = data.get("summary")
            if not isinstance(summary, dict) or summary.get("status") not in self.statuses:
                return False
        return True

    def may_keep_file(self, name: str) -> bool:
        """False when an `--out` file name's own time is outside --since/--until: skipped unread."""
        if self.since is None and self.until is None:
            return True
        match = _STAMP.search(name)
        if match is None:
            return True
        try:
            at = dt.datetime.strptime(match.group(1).replace("Z", "+0000"), "%Y%m%dT%H%M%S.%f%z")
        except ValueError:
            return True
        # A file name keeps milliseconds, as the report does: the same instant either way.
        return not ((self.since is not None and at < self.since) or (self.until is not None and at >= self.until))


def instant(value: object) -> dt.datetime | None:
    """A report's RFC 3339 time as an aware datetime; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.timezone.utc)


@record(frozen=False)
class Skips:
    """What was passed over, counted per kind, with the first reason of each to show."""

    files: int = 0
    lines: int = 0
    first: list[str] = field(default_factory=list)

    def add(self, kind: str, where: str, why: str) -> None:
        """Count one skipped file or line (`kind`), keeping the first few reasons."""
        if kind == "file":
            self.files += 1
        else:
            self.lines += 1
        if len(self.first) < 3:
            self.first.append(f"{where}: {why}")

    def message(self) -> str | None:
        """One line for stderr, or None when nothing was skipped."""
        if not self.files and not self.lines:
            return None
        parts = []
        if self.files:
            parts.append(f"{self.files} file{'s' if self.files != 1 else ''}")
        if self.lines:
            parts.append(f"{self.lines} line{'s' if self.lines != 1 else ''}")
        return (f"skipped {' and '.join(parts)} that {'is' if self.files + self.lines == 1 else 'are'} not a "
                f"kprobe v1 report (first: {'; '.join(self.first)})")


class Reader:
    """The reports under the given paths, in order, one at a time; `skips` says what was passed over.

    `-` is standard input. A directory is walked whole (hidden names skipped: the writer's
    temporary files start with a dot), its report files sorted by the time in their names.
    """

    def __init__(self, paths: Iterable[str], filters: Filters | None = None, *, stdin: IO[bytes] | None = None) -> None:
        self.paths = list(paths)
        self.filters = filters or Filters()
        self.stdin = stdin
        self.skips = Skips()
        self.seen = 0

    def __iter__(self) -> Iterator[Saved]:
        for path in self.paths:
            if path == "-":
                yield from self._kept(self._stream(self.stdin or sys.stdin.buffer, "-", named=True))
                continue
            p = Path(path)
            try:
                is_dir = p.is_dir()
                exists = is_dir or p.exists()
            except OSError as exc:
                raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
            if not exists:
                raise UsageError(f"cannot read {path}: no such file or directory")
            if is_dir:
                for file in self._listing(p):
                    yield from self._kept(self._file(file, named=False))
            else:
                yield from self._kept(self._file(p, named=True))

    def _kept(self, reports: Iterator[Saved]) -> Iterator[Saved]:
        for saved in reports:
            self.seen += 1
            if self.filters.keeps(saved.data):
                yield saved

    def _listing(self, root: Path) -> list[Path]:
        """Report files under a directory, oldest first by the time in their names, then by path."""
        found: list[tuple[str, str, Path]] = []
        for directory, subdirs, files in os.walk(root, onerror=self._walk_error):
            subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
            for name in files:
                if name.startswith(".") or not name.endswith(SUFFIXES):
                    continue
                if not self.filters.may_keep_file(name):
                    self.seen += 1  # a report, left unread: its name says the filters drop it
                    continue
                match = _STAMP.search(name)
                path = Path(directory, name)
                found.append((match.group(1) if match else "", str(path), path))
        found.sort(key=lambda item: (item[0], item[1]))
        return [path for _, _, path in found]

    def _walk_error(self, exc: OSError) -> None:
        self.skips.add("file", str(exc.filename or "?"), f"cannot read it ({exc.strerror or exc})")

    def _file(self, path: Path, *, named: bool) -> Iterator[Saved]:
        try:
            handle = path.open("rb")
        except OSError as exc:
            if named:
                raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
            self.skips.add("file", str(path), f"cannot read it ({exc.strerror or exc})")
            return
        with handle:
            yield from self._stream(handle, str(path), named=named)

    def _stream(self, raw: IO[bytes], where: str, *, named: bool) -> Iterator[Saved]:
        """One report (a JSON document, indented or not) or a stream of them (JSON Lines), gzip or not."""
        try:
            head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
            binary: IO[bytes] = raw
            if head == _GZIP_MAGIC or where.endswith(".gz"):
                import gzip  # only for gzip files: zlib is a few ms of every other start

                binary = gzip.GzipFile(fileobj=raw)  # type: ignore[assignment]
            # Bytes, not text: json.loads decodes UTF-8 in C, and a TextIOWrapper per file cost more than
            # parsing the report did.
            yield from self._documents(binary, where, named=named)
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            why = f"cannot read it ({getattr(exc, 'strerror', None) or exc})"
            if named:
                raise BadReport(f"{where}: {why}") from None
            self.skips.add("file", where, why)

    def _documents(self, text: IO[bytes], where: str, *, named: bool) -> Iterator[Saved]:
        """JSON Lines when the name says so or the first line is a whole JSON value; otherwise one document.

        Nothing is read past MAX_REPORT_BYTES of one report or one line (decompressed): a gzip bomb
        is refused after that much, in one line, and the other files go on.
        """
        lines = _Lines(text)
        if where.endswith((".jsonl", ".jsonl.gz")):
            yield from self._lines(lines, where, named=named)
            return
        try:
            first = next(lines, None)
        except _TooBig:
            self._bad(where, _too_big("it is"), named=named)
            return
        if first is None:
            self._bad(where, "it is empty", named=named)
            return
        try:
            _parse(first[1])
        except ValueError:  # an indented document, or a broken one: read it whole
            try:
                whole = b"\n" * (first[0] - 1) + first[1] + lines.rest(MAX_REPORT_BYTES - lines.consumed)
            except _TooBig:
                self._bad(where, _too_big("it is"), named=named)
                return
            try:
                value = _parse(whole)
            except ValueError as exc:
                self._bad(where, _json_problem(exc, whole), named=named)
                return
            if self._is_report(value, where, named=named):
                yield Saved(where, value, named=named)
            return
        yield from self._lines(itertools.chain([first], lines), where, named=named)

    def _lines(self, lines: Iterator[tuple[int, bytes]], where: str, *, named: bool) -> Iterator[Saved]:
        """JSON Lines (`watch --format json`, a topic dumped by a console consumer): bad lines skipped, counted.

        A stream of exactly one line is that report, named as its file is: a problem in it is then bad input.
        """
        good = 0
        bad: list[tuple[str, str]] = []
        pending: Saved | None = None  # held until a second line shows this is a stream of many
        while True:
            try:
                number, line = next(lines)
            except StopIteration:
                break
            except _TooBig as exc:  # the rest of the file is not read: a line this long is no report
                bad.append((f"{where}:{exc.number}", _too_big("the line is", rest=True)))
                break
            try:
                value: object = _parse(line)
                problem = _problem(value)
            except ValueError as exc:
                value, problem = None, _json_problem(exc, line)
            if problem is not None:
                bad.append((f"{where}:{number}", problem))
                continue
            assert isinstance(value, dict)
            good += 1
            if pending is not None:
                yield pending
            pending = Saved(f"{where}:{number}", value)
        if pending is not None:
            only = good == 1 and not bad
            yield Saved(where, pending.data, named=named) if only else pending
        if named and not good:  # nothing readable in a file the user named: bad input, not a skip
            if not bad:
                raise BadReport(f"{where}: it is empty")
            raise BadReport(f"{where}: no line is a kprobe v1 report ({bad[0][0]}: {bad[0][1]})" if len(bad) > 1
                            else f"{where}: {bad[0][1]}")
        for label, problem in bad:
            self.skips.add("line", label, problem)

    def _is_report(self, value: object, where: str, *, named: bool) -> bool:
        problem = _problem(value)
        if problem is not None:
            self._bad(where, problem, named=named)
            return False
        return True

    def _bad(self, where: str, why: str, *, named: bool) -> None:
        if named:
            raise BadReport(f"{where}: {why}")
        self.skips.add("file", where, why)


class _TooBig(Exception):
    """A report or a line past MAX_REPORT_BYTES; `number` is the line it starts on."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


class _TooDeep(ValueError):
    """JSON nested deeper than the parser's recursion allows (thousands of `[`): no report is."""


def _too_big(what: str, *, rest: bool = False) -> str:
    """The refusal of a report or line past MAX_REPORT_BYTES, in words."""
    unread = ", and the rest of the file is not read" if rest else ""
    return (f"{what} bigger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB once decompressed, more than any kprobe "
            f"report{unread} (a gzip bomb?): give a report kprobe wrote")


def _parse(data: bytes) -> Any:
    """json.loads, with a RecursionError (a document nested 20,000 deep) as a ValueError like any bad JSON."""
    try:
        return json.loads(data)
    except RecursionError:
        raise _TooDeep("nested too deep") from None


class _Lines:
    """The lines of a byte stream that are not blank, as (line number, bytes), none longer than MAX_REPORT_BYTES.

    Read in chunks: a run of blank lines is skipped by one regular-expression pass per chunk rather
    than a Python loop per line, and counts towards the line after it, so 200 MB of newlines is
    refused as one line too long instead of being read to its end. A line that grows past the bound
    raises _TooBig before more of it is read. `consumed` counts every byte handed out or skipped,
    so that a whole document can be held to the same bound (`rest`).
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.buf = b""
        self.pos = 0
        self.number = 1  # the line that starts at pos
        self.consumed = 0
        self.blank = 0  # blank bytes since the last line
        self.done = False

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self

    def _fill(self) -> bool:
        chunk = self.raw.read(_CHUNK)
        if not chunk:
            self.done = True
            return False
        self.buf, self.pos = chunk, 0
        return True

    def __next__(self) -> tuple[int, bytes]:
        while True:  # skip blank lines, counting them
            end = _BLANK_RUN.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            self.number += self.buf.count(b"\n", self.pos, end)
            self.consumed += end - self.pos
            self.blank += end - self.pos
            self.pos = end
            if self.blank > MAX_REPORT_BYTES:
                raise _TooBig(self.number)
            if self.pos < len(self.buf):
                break
            if self.done or not self._fill():
                raise StopIteration
        number = self.number
        newline = self.buf.find(b"\n", self.pos)
        if newline >= 0:
            line = self.buf[self.pos:newline + 1]
            self.pos = newline + 1
        else:
            parts = [self.buf[self.pos:]]
            size = self.blank + len(parts[0])
            self.buf, self.pos = b"", 0
            while size <= MAX_REPORT_BYTES and self._fill():
                newline = self.buf.find(b"\n")
                taken = self.buf if newline < 0 else self.buf[:newline + 1]
                parts.append(taken)
                size += len(taken)
                self.pos = len(taken)
                if newline >= 0:
                    break
            if size > MAX_REPORT_BYTES:  # refused before the parts are joined: no second copy
                raise _TooBig(number)
            line = b"".join(parts)
        self.consumed += len(line)
        if self.blank + len(line) > MAX_REPORT_BYTES:
            raise _TooBig(number)
        self.blank = 0
        self.number += 1
        return number, line

    def rest(self, limit: int) -> bytes:
        """Everything not yet read, as it is (blank lines kept); _TooBig past `limit` bytes."""
        parts = [self.buf[self.pos:]]
        size = len(parts[0])
        self.buf, self.pos = b"", 0
        while size <= limit and not self.done:
            chunk = self.raw.read(min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            parts.append(chunk)
            size += len(chunk)
        if size > limit:
            raise _TooBig(self.number)
        return b"".join(parts)


def _problem(value: object) -> str | None:
    """Why a parsed JSON value is not a readable report, or None when it is one."""
    try:
        check_schema(value)
    except BadReport as exc:
        return str(exc)
    return None


def _json_problem(exc: ValueError, text: bytes) -> str:
    """A JSON error in words: a document that stops early was most likely cut short (a full disk, a copy)."""
    if isinstance(exc, _TooDeep):
        return "not a report: its JSON is nested thousands of levels deep: give a report kprobe wrote"
    pos = getattr(exc, "pos", None)
    msg = str(getattr(exc, "msg", None) or exc)
    if msg.startswith("Unterminated string") or (isinstance(pos, int) and not text[pos:].strip()):
        return "cut short: the JSON stops before the report ends (a partial copy or a full disk?)"
    line = getattr(exc, "lineno", None)
    return f"not JSON ({msg}" + (f" at line {line})" if line else ")")


def parse_when(text: str, flag: str, now: dt.datetime | None = None) -> dt.datetime:
    """`--since`/`--until`: an RFC 3339 time, a date (midnight UTC), or how long ago (`90m`, `2h`, `7d`)."""
    value = instant(text)
    if value is not None:
        return value
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*", text or "")
    if match is None:
        raise UsageError(f"bad {flag} {text!r}: give an RFC 3339 time (2026-11-22T18:00:00Z), a date (2026-11-22) "
                         "or how long ago (90m, 2h, 7d)")
    seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return (now or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(seconds=seconds)
