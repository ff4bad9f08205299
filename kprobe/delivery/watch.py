"""`kprobe watch`: the probe on a schedule, in one long-lived process.

One run at a time: each run's deadline is at most the interval, and a run that still ends late
skips the slots it overran instead of starting runs back to back. SIGTERM (or Ctrl-C) lets the
current run finish within a short grace, delivers it, and ends; an abandoned run writes
nothing, and every file is written atomically, so nothing is ever half-written.

A watch bounded by --count is a question with an answer, as `kprobe probe` is: it exits with the
worst verdict of its runs, by `kprobe probe`'s exit codes. An unbounded one is a service: stopped
by SIGTERM it exits 0 (a service manager's clean stop), by Ctrl-C 130.
"""

from __future__ import annotations

import math
import random
import resource
import signal
import sys
import threading
import time
from types import FrameType
from typing import Protocol, get_args

from kprobe.delivery.deliver import Outputs, deliver
from kprobe.errors import EXIT_INTERRUPTED, EXIT_OK, KprobeError, UsageError
from kprobe.exits import STATUS_EXIT
from kprobe.logs import logger
from kprobe.models import Report, RunStatus
from kprobe.options import ProbeOptions, Schedule
from kprobe.runs.probe import ProbeRun, RunThread

GRACE = 5.0
_LOG = logger("kprobe.delivery.watch")


class Clock(Protocol):
    """The time the schedule reads and the waits between runs: the system's, or a test's (a fake clock).

    Only the schedule goes through it. A run's own timeouts and deadline, and the grace a signal
    gives it, are the probe's, always on the system clock.
    """

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait up to `seconds` for `stop`; True if it was set (a signal came), as Event.wait returns."""
        ...


class SystemClock:
    """time.monotonic, and Event.wait: what `kprobe watch` runs on."""

    def monotonic(self) -> float:
        """time.monotonic()."""
        return time.monotonic()

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """stop.wait(seconds): a signal ends the wait at once."""
        return stop.wait(seconds)


def next_slot(slot: float, every: float, now: float) -> tuple[float, int]:
    """The slot of the next run after one whose slot was `slot`, ending at `now`; and how many slots it overran.

    Slots stay on the grid `slot + k * every`: a run that ends late skips the slots it overran
    rather than starting runs back to back, and the schedule never drifts by the runs' lengths.
    """
    slot += every
    late = now - slot
    if late <= 0:
        return slot, 0
    skipped = math.ceil(late / every)
    return slot + skipped * every, skipped


# The verdicts best first, as kprobe.models declares them: the order in which kprobe.runs.probe lets one
# override another (interrupted over failed over gap over ok), and the order of their exit codes.
_VERDICTS: tuple[RunStatus, ...] = get_args(RunStatus)


def worst(statuses: list[RunStatus]) -> RunStatus | None:
    """The worst of some runs' verdicts, by the probe's own order of them; None for no run."""
    return max(statuses, key=_VERDICTS.index, default=None)


def _summary(report: Report, number: int) -> str:
    """One run in one line: its number, start and vantage, the text report's summary line (as `show --summary`
    prints it), then the first problem.

    The words are `text.summary_line`'s, never this module's own, so that a run's line and a
    saved report's line never word one thing two ways. The vantage is there as `show --summary` has it,
    so that the lines of two watches on one terminal (or in one log) tell their vantages apart.
    """
    from kprobe.output.text import problem_glance, summary_line
    from kprobe.sanitize import safe

    # Findings are sorted errors first; the first error or warning is what `show --summary` names too.
    first = next((f for f in report.findings if f.severity in ("error", "warning")), None)
    problem = problem_glance(first.code, first.message, first.endpoints) if first is not None else ""
    return f"run {number} {report.started_at} {safe(report.vantage.name, limit=64)} {summary_line(report)}{problem}"


def _stdout_text(report: Report, number: int, fmt: str) -> str:
    """A summary line per run, or JSON Lines (one report per line, kprobe.output.formats), or the metrics."""
    if fmt == "text":
        return _summary(report, number) + "\n"
    from kprobe.output.formats import REPORT, Style

    return REPORT[fmt](report, Style(indent=False))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_watch(options: ProbeOptions, outputs: Outputs, schedule: Schedule, clock: Clock | None = None) -> int:
    """Run until --count runs are done or a signal arrives; returns the exit code.

    Ctrl-C: 130, as `kprobe probe` interrupted. Otherwise a watch with --count exits as `kprobe probe`
    would with the worst verdict of the runs it delivered (SIGTERM before the count included: what was
    seen stands), and one without it 0. `clock` (default the system's) is what the schedule reads and
    waits on: tests give a fake one.
    """
    clock = clock or SystemClock()
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    next_start = clock.monotonic()
    done = 0
    verdicts: list[RunStatus] = []
    while not stop.is_set() and (schedule.count is None or done < schedule.count):
        jitter = random.uniform(0, schedule.jitter) if schedule.jitter else 0.0
        delay = next_start + jitter - clock.monotonic()
        if delay > 0 and clock.wait(stop, delay):
            break
        if schedule.jitter:
            _LOG.debug("run %d: jitter %.3fs of at most %gs, starting %.3fs after its slot", done + 1, jitter,
                       schedule.jitter, clock.monotonic() - next_start)
        started = clock.monotonic()
        report = _one_run(options, stop)
        if report is None:
            break  # abandoned on a signal: nothing written
        if done == 0 and report.roundtrip is not None and report.roundtrip.topic_missing:
            # A canary set up on a topic that is not there is a set-up error: say so now, as probe does. Later
            # (the topic deleted under a running watch) each run reports it, and the watch goes on.
            raise UsageError(f"--roundtrip: {report.roundtrip.error}")
        done += 1
        verdicts.append(report.status)
        _deliver_run(report, outputs, done, options.timeout)
        _LOG.debug("run %d took %.2fs, peak RSS %.1f MB", done, clock.monotonic() - started, _rss_mb())
        next_start, skipped = next_slot(next_start, schedule.every, clock.monotonic())
        if skipped:
            _LOG.warning("run %d took %.1fs, longer than --every %gs: skipping %d slot(s)", done,
                         clock.monotonic() - started, schedule.every, skipped)
    if received and received[0] == signal.SIGINT:
        return EXIT_INTERRUPTED
    seen = worst(verdicts)
    if schedule.count is None or seen is None:
        return EXIT_OK
    return STATUS_EXIT[seen]


def _deliver_run(report: Report, outputs: Outputs, number: int, timeout: float) -> None:
    """Files, topic, then stdout; a failure costs this run's delivery, never the loop.

    A long-lived watch must survive what a one-shot probe may die of (a full disk, a report
    a hostile broker made unencodable): the trouble is logged by class and reason, never with
    the report's content, and the next run goes ahead.
    """
    try:
        deliver(report, outputs, timeout=timeout, stdout=False)
    except KprobeError as exc:
        _LOG.warning("run %d: %s", number, exc)
    except Exception as exc:  # a bug must cost one run's delivery, not the watch
        _LOG.warning("run %d: delivery failed (internal error: %s)", number, exc.__class__.__name__)
    try:
        sys.stdout.write(_stdout_text(report, number, outputs.fmt))
        sys.stdout.flush()
    except UnicodeError as exc:
        _LOG.warning("run %d: cannot print the report (%s)", number, exc.__class__.__name__)


def _one_run(options: ProbeOptions, stop: threading.Event) -> Report | None:
    """One probe in a worker thread; on a signal, wait a short grace, else abandon it (None).

    A run that raised is a bug, not an abandoned run: its exception goes up to the CLI, which
    prints one line and exits non-zero, so a service manager's restart-on-failure fires.
    """
    worker = RunThread(ProbeRun(options))
    while not worker.wait(0.05):  # returns as soon as the run ends; a signal is seen within 50 ms
        if stop.is_set():
            worker.wait(GRACE)
            break
    return worker.outcome()
