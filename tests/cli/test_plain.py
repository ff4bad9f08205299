"""The fast reader (kprobe.cli.plain) reads `probe` and `list` command lines exactly as typer does, or leaves
them to typer.

Why: a plain `kprobe probe` or `kprobe list` runs without importing typer; typer still defines both
commands and reads every other line. Both are built from the same declarations (kprobe.option_table),
so their options agree by construction; what is left to prove is that they read a command line alike:
on a corpus of command lines (environment variables included) the values the fast reader hands the
command are the ones typer hands it, and the forms it leaves to typer are left, and typer still reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

from kprobe.cli import plain
from kprobe.cli.app import _app_for
from kprobe.cli.typed import command
from kprobe.option_table import FLAG, LIST, LIST_OPTIONS, PROBE, SWITCH, Option, defaults

NAMES: dict[str, tuple[Option, ...]] = {"probe": PROBE, "list": LIST_OPTIONS}
ENV = ("KPROBE_BOOTSTRAP", "KPROBE_CONFIG", "KPROBE_NAMESERVER", "KPROBE_TIMEOUT", "KPROBE_DEADLINE", "KPROBE_OUT",
       "KPROBE_PUBLISH", "KPROBE_SPOOL", "KPROBE_VANTAGE")
KINDS = {"list": "STR", "text": "STR", "duration": "STR", "flag": "BOOLEAN", "switch": "BOOLEAN", "int": "INT",
         "float": "FLOAT", "path": "PATH"}


def test_the_fast_reader_runs_the_commands_typer_runs() -> None:
    assert {name: table for name, (table, _) in plain.COMMANDS.items()} == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_typer_reads_each_kind_as_the_fast_reader_does(name: str) -> None:
    """The app's options are the declarations, each of a click type that reads its value as the fast reader does."""
    group = typer.main.get_command(_app_for([name]))
    params = {p.name: p for p in group.commands[name].params if p.name != "help"}  # type: ignore[attr-defined]
    table = NAMES[name]
    assert [o.param for o in table] == list(params), "the options in the declarations' order"
    for option in table:
        param = params[option.param]
        assert (set(param.opts) | set(param.secondary_opts)) == set(option.flags), option.param
        if option.kind == SWITCH:
            assert (param.opts, param.secondary_opts) == ([option.flags[0]], [option.flags[1]]), option.param
        assert param.envvar == option.envvar, option.param
        assert param.multiple == (option.kind == LIST), option.param
        assert param.is_flag == (option.kind in (FLAG, SWITCH)), option.param
        assert param.type.name.upper() == KINDS[option.kind], (option.param, param.type.name)
        assert (list(param.default) if option.kind == LIST else param.default) == option.value, option.param


def _typer_reads(name: str, words: list[str]) -> dict[str, Any]:
    """What typer hands the command for these words: the command built as the app builds it, run by a recorder."""
    seen: dict[str, Any] = {}

    def record(**given: Any) -> int:
        seen.update(given)
        return 0

    app = typer.Typer()
    app.command(name)(command(NAMES[name], record))
    app.command("other")(lambda: None)  # two commands: typer then takes the first word as the command's name
    assert app([name, *words], standalone_mode=False) == 0  # without standalone mode click returns Exit's code
    return seen


def _commands_reads(name: str, words: list[str], environ: dict[str, str]) -> dict[str, Any] | None:
    """What the fast reader hands the command: the options read, the rest their declared defaults."""
    given = plain.read(NAMES[name], words, environ)
    if given is None:
        return None
    return {**defaults(NAMES[name]), **given}


def _same(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Lists and tuples alike (typer passes a list or a tuple for a repeatable option), values otherwise equal."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in a.items()} == \
        {k: list(v) if isinstance(v, tuple) else v for k, v in b.items()}  # type: ignore[return-value]


PROBE_LINES = [
    [],
    ["-b", "h:1"],
    ["--bootstrap", "h:1,h:2", "-b", "x:2", "-X", "security.protocol=SSL", "-X", "a=b"],
    ["--timeout=2s", "--deadline", "9s", "-J", "--no-color", "-v"],
    ["--timeout", "1s", "--timeout", "2s", "--json", "-J"],
    ["-o", "out.json", "--out", "dir", "--prom-file", "p.prom", "--spool-max", "5", "--tls-expiry-days", "7.5"],
    ["--tls-expiry-days", "7", "--spool-max=12"],
    ["--format", "markdown", "--vantage", "v1", "--no-identity", "--resolve", "a=1.2.3.4", "--connect-to",
     "a:1=b:2", "--controllers", "c:9", "--roundtrip", "t", "--roundtrip-create", "--publish", "b:1/t",
     "--publish-property", "a=b", "--publish-create", "--spool", "s", "--compare-nameserver", "127.0.0.1",
     "-n", "127.0.0.1:53", "-F", "f.properties", "--command-config", "g.properties"],
    ["--output=o.json", "--format=json", "-m", "3s"],
]
LIST_LINES = [
    [],
    ["-b", "h:1", "-t", "x", "--topic", "y", "-J", "--reachability"],
    ["--no-reachability", "--no-internal", "--reachability", "-v", "--no-color", "-X", "a=b", "-F", "f"],
    ["--no-lookup", "-b", "h:1"],
    ["--resolve", "a=1.2.3.4", "--connect-to", "a:1=b:2", "-n", "127.0.0.1", "--timeout", "1s", "--deadline=4s"],
]
ENVIRONMENTS = [
    {},
    {"KPROBE_BOOTSTRAP": "a:1  b:2", "KPROBE_TIMEOUT": "3s", "KPROBE_OUT": "d", "KPROBE_VANTAGE": "vv",
     "KPROBE_CONFIG": "one.properties two.properties", "KPROBE_NAMESERVER": "127.0.0.1", "KPROBE_DEADLINE": "8s",
     "KPROBE_PUBLISH": "c:1/t", "KPROBE_SPOOL": "sp"},
    {"KPROBE_BOOTSTRAP": "", "KPROBE_TIMEOUT": ""},  # empty: unset, as click reads it
]


@pytest.mark.parametrize("environ", ENVIRONMENTS, ids=["no-env", "env", "empty-env"])
@pytest.mark.parametrize(("command", "words"), [("probe", w) for w in PROBE_LINES] + [("list", w) for w in LIST_LINES])
def test_both_readers_hand_the_command_the_same_values(command: str, words: list[str], environ: dict[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    ours = _commands_reads(command, words, environ)
    assert ours is not None, words
    theirs = _typer_reads(command, words)
    assert _same(ours, theirs), (ours, theirs)
    assert all(isinstance(v, Path) for k, v in ours.items() if k in ("output", "out_dir", "prom_file", "spool") and v)


# Lines the fast reader leaves to typer: help, typos, attached or combined short options, values that look like
# options, a flag given a value, positional words, `--`. Typer reads them (or refuses them in one line) as before.
LEFT = [
    ["--help"], ["-h"], ["-bh:1"], ["-Jv"], ["--json=1"], ["-b"], ["-b", "-J"], ["--tls-expiry-days", "-1"],
    ["--spool-max", "x"], ["--spool-max", "1e3"], ["--", "-b", "h"], ["h:1"], ["--bootstra", "h:1"],
    ["-b", ""], ["--version"], ["--reachability=yes"],
]


@pytest.mark.parametrize("words", LEFT, ids=lambda w: " ".join(w) or "-")
def test_other_forms_are_left_to_typer(words: list[str]) -> None:
    assert plain.read(PROBE, words, {}) is None
    assert plain.read(LIST_OPTIONS, words, {}) is None


def test_a_line_left_to_typer_still_runs() -> None:
    """`-Jb HOST` (combined short options) is typer's to read: the same values reach the same command."""
    assert plain.read(PROBE, ["-Jb", "h:1"], {}) is None
    seen = _typer_reads("probe", ["-Jb", "h:1"])
    assert seen["json_out"] is True and list(seen["bootstrap"]) == ["h:1"]
