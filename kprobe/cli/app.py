"""Typer's app: every command registered, help and errors rendered by click, run by kprobe.cli.main.

The commands live one group to a module (probe/watch/list in kprobe.cli.probe, built from the
options' declarations; show/diff, serve, aggregate, check, schema/demo, lab); each parses, calls the
library and prints. Heavy modules are imported inside commands, so `kprobe --help` stays fast and
`kprobe probe` never imports pyspark.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from kprobe import __version__
from kprobe.cli import aggregate, check, extras, fix, saved, serve
from kprobe.cli.lab import lab_app
from kprobe.cli.probe import list_command, probe_command, watch_command
from kprobe.cli.typed import command
from kprobe.errors import EXIT_OK
from kprobe.option_table import LIST_OPTIONS, PROBE, WATCH

_APP_SETTINGS: dict[str, Any] = dict(
    name="kprobe",
    help="Why a Kafka client that reaches the bootstrap broker still fails: probe every advertised "
    "endpoint from here.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app = typer.Typer(**_APP_SETTINGS)
app.add_typer(lab_app, name="lab")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kprobe {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool | None,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """kprobe: tells a Kafka user, from where they stand, why a client that reaches the bootstrap
    broker still fails.
    """


# The commands, in the order `kprobe --help` lists them; probe, watch and list from the options' declarations.
for _name, _options, _run in (("probe", PROBE, probe_command), ("watch", WATCH, watch_command),
                              ("list", LIST_OPTIONS, list_command)):
    app.command(_name)(command(_options, _run))
for _command in (saved.show, saved.diff, serve.serve, aggregate.aggregate, check.check, fix.fix, extras.schema,
                 extras.demo):
    app.command()(_command)


def _interruptible(callback: Callable[..., Any]) -> Callable[..., Any]:
    """The command, its Ctrl-C turned into click's Abort, which kprobe.cli.errors says in one line.

    Why: typer catches KeyboardInterrupt around every command and returns a bare exit code 130,
    without a word (`guard` never sees it), which a user cannot tell from a crash; and 130 alone
    cannot be told apart afterwards from a command's own "interrupted" status (a probe's partial
    report). The signature is the command's (`functools.wraps`): typer reads its options from it.
    """
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except KeyboardInterrupt:
            sys.stderr.write("\n")  # as `guard` does: the line starts below the terminal's ^C
            raise typer.Abort() from None
    return run


for _group in (app, lab_app):
    for _info in _group.registered_commands:
        if _info.callback is not None:
            _info.callback = _interruptible(_info.callback)


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command the arguments name, when they name one.

    Typer turns every registered command into a click command before running any, evaluating
    each signature's annotations: for every command, a large part of each run's start-up.
    A run needs one. `kprobe --help`, `kprobe lab ...`, a typo'd
    command and anything else get the whole app, so listings and suggestions stay complete.
    """
    if not args:
        return app
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else "")
        if name == args[0]:
            lean = typer.Typer(**_APP_SETTINGS)
            lean.registered_callback = app.registered_callback
            lean.registered_commands = [info]
            return lean
    return app


def run(args: list[str]) -> int:
    """The app on these arguments: its exit code (what click refuses, kprobe.cli.errors.guard says)."""
    # Without standalone mode, click returns an Exit's code instead of raising it.
    code = _app_for(args)(args=args, standalone_mode=False, prog_name="kprobe")
    return code if isinstance(code, int) else EXIT_OK
