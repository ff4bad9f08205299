"""`kprobe show` and `kprobe diff` as a command line (kprobe/cli/saved.py): what the help and the messages call
their arguments. Reading and comparing saved reports is tests/saved/'s."""

from __future__ import annotations

import re
from pathlib import Path

from cli_runner import run_cli

REPORT = str(Path(__file__).parent.parent / "data" / "reports" / "2026-11-23-7c779c2-blackholed.json")


def test_diff_names_its_arguments_a_and_b_as_its_help_does():
    """A missing report is B, as the usage line and the help list it: never `b`, which reads as the -b flag."""
    one = run_cli(["diff", REPORT])
    assert (one.returncode, one.stdout) == (2, "")
    assert one.stderr == "kprobe: error: Missing argument 'B'. (see `kprobe diff --help`)\n"
    none = run_cli(["diff"])
    assert none.returncode == 2 and "Missing argument 'A'." in none.stderr
    usage = run_cli(["diff", "--help"]).stdout
    assert re.search(r"^Usage: kprobe diff \[OPTIONS\] {?A}? {?B}?$", usage, re.M), usage
    assert "\n  A  The first report" in usage and "\n  B  The report to compare it with" in usage
