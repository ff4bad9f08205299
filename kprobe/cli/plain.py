"""`kprobe probe` and `kprobe list`: their command lines read, and the commands run, without typer.

Why: these are the commands people type again and again while they fix a listener, and typer
(with the click it carries, and the command it builds from every signature) is about a quarter of
a healthy probe's time. Typer still defines the CLI: kprobe.cli.app builds both commands from the
same declarations (kprobe.option_table), renders every help and every error, and runs every other
command. This module reads the plain command lines, the ones a user types: long and short options
with their values, flags, the environment variables they name. Anything else (help, an unknown or
misspelt option, a value that looks like an option, `-bHOST`, `--` ...) is left to typer, which
answers as it always has. tests/cli/test_plain.py holds both readers to the same values on a corpus
of command lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kprobe.option_table import FLAG, FLOAT, INT, LIST, LIST_OPTIONS, PATH, PROBE, SWITCH, Option

if TYPE_CHECKING:
    from pathlib import Path

_NUMBER = {INT: re.compile(r"[0-9]{1,9}"), FLOAT: re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?")}


def read(options: tuple[Option, ...], words: list[str],
         environ: os._Environ[str] | dict[str, str] = os.environ) -> dict[str, Any] | None:
    """The given options' values, as typer would pass them; None where typer must read the line.

    Only what a user types is read here; every other form returns None, and typer reads the line
    (and says what is wrong with it). Options not given keep the command's defaults, but for an
    environment variable set to a non-empty value: lists split on whitespace, as click does.
    """
    names: dict[str, tuple[Option, bool]] = {}
    for option in options:
        if option.kind == SWITCH:
            names[option.flags[0]], names[option.flags[1]] = (option, True), (option, False)
        else:
            names.update((name, (option, True)) for name in option.flags)
    given: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        found = names.get(name)
        if found is None:
            return None  # --help, a typo, a positional word, `--`, `-bHOST`, `-Jv`: typer's to read
        option, on = found
        param, kind = option.param, option.kind
        if kind in (FLAG, SWITCH):
            if eq:
                return None
            given[param] = on
            i += 1
            continue
        if eq:
            value = attached
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 1
        else:
            return None
        if not value or value.startswith("-"):
            return None  # click would take it as the value; typer's errors say it better
        if kind in _NUMBER and not _NUMBER[kind].fullmatch(value):
            return None
        if kind == LIST:
            given.setdefault(param, []).append(value)
        else:
            given[param] = int(value) if kind == INT else float(value) if kind == FLOAT else (
                _path(value) if kind == PATH else value)
        i += 1
    for option in options:
        if option.param in given or option.envvar is None or not environ.get(option.envvar):
            continue
        value = environ[option.envvar]
        given[option.param] = value.split() if option.kind == LIST else _path(value) if option.kind == PATH else value
    return given


def _path(value: str) -> Path:
    """A file option's value as typer gives it; pathlib loads only when a run names a file."""
    from pathlib import Path

    return Path(value)


def kcat_alias(argv: list[str]) -> list[str]:
    """For muscle memory from kcat: `kprobe -L -b host` and `kprobe -b host -L -J` mean `kprobe list`.

    Only where no command is named (the first word is an option), so `-L` never changes what
    an explicit command means.
    """
    if argv and "-L" in argv and argv[0].startswith("-"):
        return ["list", *(a for a in argv if a != "-L")]
    return argv


def _probe(**given: Any) -> int:
    from kprobe.cli.probe import probe_command

    return probe_command(**given)


def _list(**given: Any) -> int:
    from kprobe.cli.probe import list_command

    return list_command(**given)


COMMANDS: dict[str, tuple[tuple[Option, ...], Callable[..., int]]] = {
    "probe": (PROBE, _probe), "list": (LIST_OPTIONS, _list)}


def run_plain(argv: list[str]) -> None:
    """Run `probe` or `list` when its command line is a plain one (`read`); return to let typer read it."""
    args = kcat_alias(argv)
    if not args or args[0] not in COMMANDS:
        return
    options, command = COMMANDS[args[0]]
    given = read(options, args[1:])
    if given is None:
        return
    from kprobe.exits import guard, secrets_in

    guard(lambda: command(**given), secrets_in(argv))
