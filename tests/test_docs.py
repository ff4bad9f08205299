"""The README's promises: its two commands, and CI running exactly the test one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.+?)\n```", text)[:2]


def test_readme_starts_with_demo_then_tests():
    demo, tests = readme_commands()
    assert demo.endswith("kprobe demo")
    assert "pytest" in tests and "[test]" in tests
    head = (ROOT / "README.md").read_text().split("```")[0]
    assert head.strip() == "# kprobe"


def test_ci_runs_exactly_the_readme_test_command():
    _, tests = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == tests


def test_every_command_is_documented():
    docs = (ROOT / "README.md").read_text() + "".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for command in ("kprobe probe", "kprobe list", "kprobe -L", "kprobe watch", "kprobe aggregate", "kprobe demo", "kprobe schema", "kprobe lab up", "kprobe lab down", "kprobe lab list", "kprobe show", "kprobe diff", "kprobe serve", "kprobe check", "kprobe schema --check"):
        assert command in docs, command


def test_playground_lab_table_is_the_scenarios_declaration():
    """docs/playground.md's lab commands and results are what `kprobe lab up listeners` prints under each view.

    Both come from the listeners scenario's `expect` declarations; tests/lab/test_base.py runs the printed
    commands on the lab and holds the lab to them. A row per listener and view, the wrong network's included.
    """
    from kprobe.lab.scenarios import get_scenario

    page = (ROOT / "docs" / "playground.md").read_text()
    rows = {(view, listener): (command, gives) for view, listener, command, gives in re.findall(
        r"^\| `(\w+)` \| `(LISTENER_\w+)` \| `(kprobe probe [^`]+)` \| (.+) \|$", page, re.M)}
    scenario = get_scenario("listeners")
    declared = {}
    for node in scenario.nodes:
        for spec in node.listeners:
            # The page's placeholders for what `lab up` chooses at each start: the port, the view's nameserver.
            port = f"<{spec.name.removeprefix('LISTENER_')} port>"
            for view, expect in spec.expect.items():
                bootstrap = (expect.bootstrap or spec.bootstrap).format(addr=node.address, port=port)
                said = ", ".join(part for part in (expect.verdict, f"exit {expect.exit_code}",
                                                   f"`{expect.finding}`" if expect.finding else "") if part)
                declared[(view, spec.name)] = (f"kprobe probe -b {bootstrap} -n <{view} nameserver>", said)
    assert set(declared) == {(view, name) for view in scenario.views for name in scenario.client_listeners}
    assert set(rows) == set(declared)
    for key, (command, said) in declared.items():
        assert rows[key][0] == command, key
        assert rows[key][1] == said or rows[key][1].startswith(said + ":"), key
