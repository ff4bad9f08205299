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
