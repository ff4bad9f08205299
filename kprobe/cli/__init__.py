"""The `kprobe` command: parse, call the library, print, exit with a meaningful code.

Light on purpose: the console entry (kprobe/__main__.py) imports this package for every run, and a
plain `kprobe probe` or `kprobe list` runs from the fast reader (kprobe.cli.plain) without typer;
typer's app (kprobe.cli.app) loads only for the other command lines. Errors become one line and an
exit code in kprobe.exits and only there.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point: one line per error, never a traceback, never a secret (kprobe.exits.guard)."""
    from kprobe.cli.plain import kcat_alias, run_plain
    from kprobe.exits import guard, secrets_in

    argv = sys.argv[1:]
    run_plain(argv)  # a plain `probe` or `list` runs there, without typer; it returns for everything else
    args = kcat_alias(argv)
    secrets = secrets_in(argv)

    def run() -> int:
        from kprobe.cli.app import run as run_app

        return run_app(args)

    guard(run, secrets)
