"""Allows `python -m kprobe`, which some hosts prefer to a console script on PATH; also the console script's
entry (pyproject.toml), so that `kprobe --version` answers here, and a plain `kprobe probe` or `kprobe list`
runs (kprobe.cli.plain), before typer is imported: typer and click are most of `--version`'s time and
about a quarter of a healthy probe's (docs/performance.md).
"""

import os
import sys


def main() -> None:
    """`kprobe --version` (or `-V`) alone: typer's line, without typer; a plain probe or list: run without
    typer; anything else: the CLI (kprobe.cli).
    """
    if sys.argv[1:] in (["--version"], ["-V"]):
        from kprobe import __version__
        from kprobe.errors import EXIT_ERROR, EXIT_OK

        try:
            if sys.stdout is not None:  # as click.echo: a closed stdout is no error
                sys.stdout.write(f"kprobe {__version__}\n")
                sys.stdout.flush()
        except BrokenPipeError:  # as kprobe.exits.guard: the reader left, stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_ERROR)
        sys.exit(EXIT_OK)
    from kprobe.cli import main as cli_main

    cli_main()  # a plain probe or list without typer, anything else with it


if __name__ == "__main__":
    main()
