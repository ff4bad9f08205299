"""What `kprobe lab up` prints under each DNS view (kprobe/lab/base.py) is what the lab gives.

The expectations are the scenario's declarations (ListenerSpec.expect), never a probe run again: each
command is read from the printout, checked to state what the scenario declares, then run as printed,
in this process (tests/support/cli_runner.py), and its exit code, verdict and findings compared.
"""

from __future__ import annotations

import re
import shlex

from cli_runner import run_cli

from kprobe.lab.scenarios import Expect, get_scenario

VIEW = re.compile(r"DNS view (\S+) +nameserver ")
COMMAND = re.compile(r" {4}(?P<listener>\S+): (?P<command>kprobe probe .+)")
SAYS = re.compile(r" {6}expect (?P<verdict>OK|GAP|FAILED), exit (?P<exit>\d+)(?:, (?P<finding>[A-Z][A-Z0-9_]+))?"
                  r"(?:: .+)?")
FINDING = re.compile(r" {2}(?:ERROR|WARNING|INFO) ([A-Z][A-Z0-9_]+)")  # the text report's finding headings


def printed_commands(lines: list[str]) -> dict[tuple[str, str], tuple[str, str, int, str]]:
    """(view, listener) -> (command, verdict, exit code, finding) as the printout states them."""
    found: dict[tuple[str, str], tuple[str, str, int, str]] = {}
    view = ""
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        if (heading := VIEW.match(line)) is not None:
            view = heading.group(1)
        elif (command := COMMAND.fullmatch(line)) is not None:
            says = SAYS.fullmatch(after)
            assert view and says is not None, (line, after)
            key = (view, command["listener"])
            assert key not in found, key
            found[key] = (command["command"], says["verdict"], int(says["exit"]), says["finding"] or "")
    return found


def test_every_printed_command_gives_what_lab_up_says(listeners_lab):
    scenario = get_scenario("listeners")
    declared: dict[tuple[str, str], Expect] = {(view, spec.name): expect for node in scenario.nodes
                                               for spec in node.listeners for view, expect in spec.expect.items()}
    printed = printed_commands(listeners_lab.describe())
    # Every listener from every view, the wrong network's included.
    assert set(printed) == set(declared) == {(view, name) for view in scenario.views
                                             for name in scenario.client_listeners}
    for key, (command, verdict, exit_code, finding) in printed.items():
        expect = declared[key]
        assert (verdict, exit_code, finding) == (expect.verdict, expect.exit_code, expect.finding), key
        argv = shlex.split(command)
        assert argv[:2] == ["kprobe", "probe"], command
        done = run_cli(argv[1:])
        report = done.stdout.splitlines()
        assert done.returncode == exit_code, (key, command, done.stdout, done.stderr)
        assert report[-1].startswith(f"{verdict}: "), (key, command, report[-1])
        named = [m.group(1) for line in report if (m := FINDING.fullmatch(line)) is not None]
        assert named == ([finding] if finding else []), (key, command, done.stdout)
