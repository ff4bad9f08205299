"""Entry point for spark-submit: `spark-submit --py-files kprobe.zip -m kprobe.aggregate ...`,
or `python -m kprobe.aggregate`. The master comes from spark-submit unless --master is given.

Runs the same checks as `kprobe aggregate` (kprobe.aggregate.checks) and fails the same way, through
the CLI's one error mapping (kprobe.cli.errors.guard): one line `kprobe: error: ...` and exit 2 for
bad input, never a traceback, no secret from the command line (a --kafka address may carry one).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from kprobe.aggregate.checks import keep_warm_seconds, validate
from kprobe.errors import UsageError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is kprobe's one line rather than argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `python -m kprobe.aggregate --help`)")


def main(argv: list[str] | None = None) -> NoReturn:
    """Parse, check, run, print the summary; exit with its code, errors in one line (kprobe.cli.errors)."""
    from kprobe.cli.errors import guard, secrets_in

    guard(lambda: _main(argv), secrets_in(sys.argv[1:] if argv is None else argv))


def _main(argv: list[str] | None) -> int:
    parser = _Parser(prog="python -m kprobe.aggregate", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", help="report files or directories (any path Spark reads)")
    parser.add_argument("--kafka", action="append", default=[], help="BOOTSTRAP/TOPIC to read reports from")
    parser.add_argument("--out", required=True, help="output directory (replaced whole on success)")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--since", default=None, help="only reports at or after (RFC 3339 or date)")
    parser.add_argument("--until", default=None, help="only reports before (RFC 3339 or date)")
    parser.add_argument("--no-html", action="store_true", help="skip report.html")
    parser.add_argument("--full", action="store_true",
                        help="recompute everything from the inputs (by default only new files and messages are read)")
    parser.add_argument("--state", default=None,
                        help="directory of the job's state between runs (default: OUT/.state)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="Spark's own output on stderr (by default it goes to a log file, named on failure)")
    parser.add_argument("--keep-warm", default=None, metavar="DURATION",
                        help="run the job in a warm Spark driver kept for the next run, which exits after this "
                             "long without one (e.g. 10m); local masters")
    args = parser.parse_args(argv)
    topics = validate(args.inputs, args.out, args.kafka, args.since, args.until, args.state, args.full)
    keep_warm = keep_warm_seconds(args.keep_warm)
    from kprobe.aggregate.entry import command
    from kprobe.aggregate.plan import JobOptions

    # Under spark-submit the JVM gateway exists and carries spark-submit's master: keep it.
    master = args.master or (None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]")
    # With nothing new, `command` prints one line and never imports PySpark (kprobe.aggregate.plan).
    print("\n".join(command(JobOptions(tuple(args.inputs), args.out, master, args.since, args.until,
                                       not args.no_html, topics, full=args.full, state=args.state),
                            verbose=args.verbose, keep_warm=keep_warm)))
    return 0


if __name__ == "__main__":
    main()
