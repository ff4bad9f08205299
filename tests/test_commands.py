"""kprobe.commands reads `probe` and `list` command lines exactly as typer does, or leaves them to typer.

Why: a plain `kprobe probe` or `kprobe list` no longer imports typer (issue 33); typer still defines
both commands (kprobe.cli) and reads every other line. Two readers of one command line must never
disagree: the option tables are held equal to typer's options, and on a corpus of command lines
(environment variables included) the values kprobe.commands reads are the ones typer hands the
command. The forms it leaves to typer are left, and typer still reads them.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import typer.main

from kprobe import cli, commands

NAMES = {"probe": ("probe", commands.PROBE, commands.probe_command),
         "list": ("list_", commands.LIST_OPTIONS, commands.list_command)}
ENV = ("KPROBE_BOOTSTRAP", "KPROBE_CONFIG", "KPROBE_NAMESERVER", "KPROBE_TIMEOUT", "KPROBE_DEADLINE", "KPROBE_OUT",
       "KPROBE_PUBLISH", "KPROBE_SPOOL", "KPROBE_VANTAGE")
KINDS = {"list": "STR", "text": "STR", "flag": "BOOLEAN", "switch": "BOOLEAN", "int": "INT", "float": "FLOAT",
         "path": "PATH"}


def _click_command(name: str) -> Any:
    group = typer.main.get_command(cli._app_for([name]))
    return group.commands[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", NAMES)
def test_the_tables_are_typer_s_options(command: str) -> None:
    """Every option typer declares is in the table with its names, kind, environment variable and default."""
    function, table, run = NAMES[command]
    params = {p.name: p for p in _click_command(command).params if p.name != "help"}
    assert [o[0] for o in table] == [p for p in params], "the options in typer's order"
    defaults = {k: v.default for k, v in inspect.signature(run).parameters.items()}
    typer_defaults = {k: v.default for k, v in inspect.signature(getattr(cli, function)).parameters.items()}
    assert defaults == typer_defaults
    for param, kind, names, envvar in table:
        option = params[param]
        assert (set(option.opts) | set(option.secondary_opts)) == set(names), param
        if kind == commands.SWITCH:
            assert (option.opts, option.secondary_opts) == ([names[0]], [names[1]]), param
        assert option.envvar == envvar, param
        assert option.multiple == (kind == commands.LIST), param
        assert option.is_flag == (kind in (commands.FLAG, commands.SWITCH)), param
        assert option.type.name.upper() == KINDS[kind], (param, option.type.name)


def _typer_reads(command: str, words: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What typer hands the command for these words (the run itself replaced by a recorder)."""
    seen: dict[str, Any] = {}

    def record(**given: Any) -> int:
        seen.update(given)
        return 0

    monkeypatch.setattr(cli, f"{command}_command", record)
    assert cli._run_typer([command, *words], []) == 0
    return seen


def _commands_reads(command: str, words: list[str], environ: dict[str, str]) -> dict[str, Any] | None:
    """What kprobe.commands hands the command: the options read, the rest the command's defaults."""
    _, table, run = NAMES[command]
    given = commands.read(table, words, environ)
    if given is None:
        return None
    defaults = {k: v.default for k, v in inspect.signature(run).parameters.items()}
    return {**defaults, **given}


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
    theirs = _typer_reads(command, words, monkeypatch)
    assert _same(ours, theirs), (ours, theirs)
    assert all(isinstance(v, Path) for k, v in ours.items() if k in ("output", "out_dir", "prom_file", "spool") and v)


# Lines kprobe.commands leaves to typer: help, typos, attached or combined short options, values that look like
# options, a flag given a value, positional words, `--`. Typer reads them (or refuses them in one line) as before.
LEFT = [
    ["--help"], ["-h"], ["-bh:1"], ["-Jv"], ["--json=1"], ["-b"], ["-b", "-J"], ["--tls-expiry-days", "-1"],
    ["--spool-max", "x"], ["--spool-max", "1e3"], ["--", "-b", "h"], ["h:1"], ["--bootstra", "h:1"],
    ["-b", ""], ["--version"], ["--reachability=yes"],
]


@pytest.mark.parametrize("words", LEFT, ids=lambda w: " ".join(w) or "-")
def test_other_forms_are_left_to_typer(words: list[str]) -> None:
    assert commands.read(commands.PROBE, words, {}) is None
    assert commands.read(commands.LIST_OPTIONS, words, {}) is None


def test_a_line_left_to_typer_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """`-Jb HOST` (combined short options) is typer's to read: the same values reach the same command."""
    assert commands.read(commands.PROBE, ["-Jb", "h:1"], {}) is None
    seen = _typer_reads("probe", ["-Jb", "h:1"], monkeypatch)
    assert seen["json_out"] is True and list(seen["bootstrap"]) == ["h:1"]
