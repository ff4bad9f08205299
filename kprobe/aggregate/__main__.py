"""Entry point for spark-submit: `spark-submit --py-files kprobe.zip -m kprobe.aggregate ...`,
or `python -m kprobe.aggregate`. The master comes from spark-submit unless --master is given.

Runs the same checks as `kprobe aggregate` (kprobe.aggregate.checks) and fails the same way, through
the CLI's one error mapping (kprobe.exits.guard): one line `kprobe: error: ...` and exit 2 for
bad input, never a traceback, no secret from the command line (a --kafka address may carry one).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from kprobe.errors import UsageError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is kprobe's one line rather than argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `python -m kprobe.aggregate --help`)")


def main(argv: list[str] | None = None) -> NoReturn:
    """Parse, check, run, print the summary; exit with its code, errors in one line (kprobe.exits)."""
    from kprobe.exits import guard, secrets_in

    guard(lambda: _main(argv), secrets_in(sys.argv[1:] if argv is None else argv))


def _main(argv: list[str] | None) -> int:
    from kprobe.option_table import AGGREGATE, FLAG, LIST, declared

    parser = _Parser(prog="python -m kprobe.aggregate", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="*", help="Report files or directories (any path Spark reads).")
    for option in AGGREGATE:  # the options `kprobe aggregate` takes, declared once
        settings: dict[str, Any] = {"dest": option.param, "help": option.help.replace("%", "%%")}
        if option.kind == LIST:
            settings.update(action="append", default=[])
        elif option.kind == FLAG:
            settings.update(action="store_true")
        else:
            settings.update(default=option.default, required=option.required)
        parser.add_argument(*option.flags, **settings)
    parser.set_defaults(master=None)  # told apart from a --master given: spark-submit's own may stand
    args = vars(parser.parse_args(argv))
    if args["master"] is None and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        # Under spark-submit the JVM gateway exists and carries spark-submit's master: keep it; else the CLI's.
        args["master"] = declared("master", AGGREGATE).default
    from kprobe.aggregate.entry import run_command

    # With nothing new, `command` prints one line and never imports PySpark (kprobe.aggregate.plan).
    print("\n".join(run_command(args.pop("inputs"), **args)))
    return 0


if __name__ == "__main__":
    main()
