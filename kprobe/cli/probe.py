"""`kprobe probe`, `kprobe watch` and `kprobe list`: the options as typed -> the run -> its outputs -> the exit code.

Without typer: the fast reader (kprobe.cli.plain) and typer's commands (kprobe.cli.app) both call
these with the options by parameter (kprobe.option_table), those not given taking their defaults.
Their docstrings are the commands' help.
"""

from __future__ import annotations

import sys
from typing import Any

from kprobe.errors import UsageError
from kprobe.exits import STATUS_EXIT
from kprobe.option_table import LIST_OPTIONS, OUTPUTS, PROBE, RUN, SCHEDULE, WATCH, defaults


def setup_logging(verbose: bool, *, lazy: bool = False) -> None:
    """--verbose: kprobe's progress and captured client log lines on stderr, never on stdout.

    Warnings (a full spool, a late run) always reach stderr. `lazy` (a plain probe or listing, not
    verbose) installs the handler before the first warning rather than now: most such runs never
    log, and `logging` is a few milliseconds of their start (kprobe.logs).
    """
    from kprobe.logs import configure_on_first_use

    if verbose or not lazy:
        configure_on_first_use(None)
        _stderr_handler(verbose=verbose)
    else:
        configure_on_first_use(lambda: _stderr_handler(verbose=False))


def _stderr_handler(*, verbose: bool) -> None:
    import logging

    from kprobe.sanitize import safe

    class _SafeFormatter(logging.Formatter):
        """Log lines quote advertised names and broker errors: escape them like the report does."""

        def format(self, record: logging.LogRecord) -> str:
            return safe(super().format(record), limit=4000)

    logger = logging.getLogger("kprobe")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_SafeFormatter("kprobe: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)


def _outputs(typed: dict[str, Any], **names: Any) -> Any:
    """The run's outputs from the output options (kprobe.delivery.deliver.outputs_from checks them together)."""
    from kprobe.delivery.deliver import outputs_from

    return outputs_from(**{p: typed[p] for p in OUTPUTS if p in typed and p != "verbose"}, **names)


def probe_command(**given: Any) -> int:
    """Bootstrap against each address separately, then resolve and connect to every endpoint the
    brokers advertise, from here. With --controllers, the KRaft controllers too, as admin tools reach them.

    Exit 0 no gap, 1 gap, 2 bad input, 3 no bootstrap (or controller) answered or an internal error,
    130 interrupted.
    """
    from kprobe.delivery.deliver import deliver
    from kprobe.delivery.progress import run_in_foreground
    from kprobe.options import probe_options
    from kprobe.runs.probe import ProbeRun

    typed = {**defaults(PROBE), **given}
    setup_logging(typed["verbose"], lazy=True)
    options = probe_options(**{o.param: typed[o.param] for o in RUN})
    outputs = _outputs(typed)
    report = run_in_foreground(ProbeRun(options))
    if report.roundtrip is not None and report.roundtrip.topic_missing:
        # Bad input like a mistyped option: one line, no report of a run that could not do what was asked.
        raise UsageError(f"--roundtrip: {report.roundtrip.error}")
    deliver(report, outputs, timeout=options.timeout)
    return STATUS_EXIT[report.status]


def watch_command(**given: Any) -> int:
    """Probe on a schedule in one long-lived process, one run at a time.

    A late run skips slots instead of piling up; each report goes to --out / --publish / --prom-file,
    one summary line per run on stdout (its number, start, vantage and verdict; --json: a JSON line).

    Exit with --count: the worst verdict of its runs, as `kprobe probe` exits for it (0 no gap, 1 gap, 3 no
    bootstrap answered), also when SIGTERM stops it early. Without --count: 0 when SIGTERM ends it.
    Either way: 2 bad input, 3 an internal error, 130 interrupted (Ctrl-C).
    """
    from kprobe.delivery.watch import run_watch
    from kprobe.options import probe_options, watch_options
    from kprobe.output.formats import WATCH as WATCH_FORMATS

    typed = {**defaults(WATCH), **given}
    setup_logging(typed["verbose"])
    options, schedule = watch_options(probe_options(**{o.param: typed[o.param] for o in RUN}),
                                      **{o.param: typed[o.param] for o in SCHEDULE})
    outputs = _outputs(typed, names=WATCH_FORMATS)
    return run_watch(options, outputs, schedule)


def list_command(**given: Any) -> int:
    """The `kcat -L` listing (brokers, topics, partitions), and which partitions the gap breaks from here.

    Exit 0 ok, 1 topic errors / offline partitions / unreachable leaders, 2 bad input, 3 no bootstrap
    answered or an internal error, 130 interrupted.
    """
    from kprobe.options import list_options
    from kprobe.output.formats import LISTING
    from kprobe.runs.listing import run_list

    typed = {**defaults(LIST_OPTIONS), **given}
    # kcat's listing has no colours to turn off: --no-color is taken so that probe's command lines work.
    setup_logging(typed["verbose"], lazy=True)
    options = list_options(
        bootstrap=typed["bootstrap"], topics=typed["topics"], props=typed["props"], prop_files=typed["prop_files"],
        nameservers=typed["nameservers"], timeout=typed["timeout"], deadline=typed["deadline"],
        reachability=typed["reachability"], internal=not typed["no_internal"], resolve=typed["resolve"],
        connect_to=typed["connect_to"])
    listing = run_list(options)
    if typed["json_out"]:
        LISTING["json"](listing, sys.stdout)
    elif listing.answered:
        LISTING["text"](listing, sys.stdout)
        from kprobe.runs.listing import unchecked_gap, unresolved_gap
        from kprobe.sanitize import safe

        sys.stdout.flush()  # kcat's lines are read while the names are looked up
        gaps = [unchecked_gap(listing, resolve=options.resolve, connect_to=options.connect_to)]
        if not typed["no_lookup"]:
            gaps.append(unresolved_gap(listing, nameservers=options.nameservers, timeout=options.timeout,
                                       resolve=options.resolve, connect_to=options.connect_to))
        for gap in gaps:  # after kcat's lines, on stderr: a script reading stdout gets kcat's bytes
            if gap is not None:
                sys.stderr.write(f"kprobe: {safe(gap, limit=2000)}\n")
    elif listing.status != "interrupted":
        from kprobe.sanitize import safe

        errors = "; ".join(f"{a.address}: {a.error}" for a in listing.attempts)
        sys.stderr.write(f"kprobe: no bootstrap answered ({safe(errors, limit=2000)}); are the brokers reachable? "
                         "try a longer --timeout\n")
    if listing.status == "interrupted":
        sys.stderr.write("kprobe: interrupted\n")
    return STATUS_EXIT[listing.status]
