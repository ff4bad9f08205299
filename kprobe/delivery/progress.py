"""A probe run in the foreground of a terminal: a progress bar for long runs, Ctrl-C reports what is known.

Apart from the CLI so a command stays parse, call, print; apart from kprobe.runs.probe because
both concerns are the terminal's, not the run's (`kprobe watch` runs the same ProbeRun without
either). rich is imported only when a bar is drawn: most runs never pay for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from kprobe.models import Report
from kprobe.runs.probe import ProbeRun, RunThread

# Fewer bootstraps answer in about one --timeout: a bar would flash and vanish.
MIN_BOOTSTRAPS_FOR_A_BAR = 4


def run_in_foreground(run: ProbeRun) -> Report:
    """The run's report; on Ctrl-C, the report of what is known by then (status interrupted).

    The run works in a thread (RunThread says why) while this one waits, draws the bar, and
    takes the KeyboardInterrupt; an exception the run raised (a bug) is raised here.
    """
    with _bar(run):
        worker = RunThread(run)
        try:
            while not worker.wait(0.1):
                pass
        except KeyboardInterrupt:
            run.interrupted = True
            return run.report()
    report = worker.outcome()
    assert report is not None  # the run has ended
    return report


@contextmanager
def _bar(run: ProbeRun) -> Iterator[None]:
    """A transient bar on stderr while the run asks many bootstraps; silent otherwise.

    It counts bootstraps answered (or failed) out of all given, since asking many addresses is
    the part of a run whose length the user cannot guess; the description names the current
    phase. Only on a terminal: piped stderr stays free of control sequences.
    """
    total = len(run.options.bootstraps)
    if total < MIN_BOOTSTRAPS_FOR_A_BAR or not sys.stderr.isatty() or os.environ.get("TERM") == "dumb":
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("bootstraps"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("starting", total=total)
        run.on_phase = lambda text: bar.update(task, description=text)
        run.on_bootstrap = lambda _result: bar.advance(task)
        try:
            yield
        finally:
            run.on_phase = run.on_bootstrap = None
