"""Run `kprobe fix` on a configuration in a directory, apply its diff with the real tool, and `kprobe check` the result.

The proof `kprobe fix` promises for an operator's resource is that the patch applies as given (`patch -p0`,
`git apply -p0`) and that `kprobe check` on the patched file predicts each reported network served; this
does the three steps as a user would, in `tmp_path`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cli_runner import run_cli

from kprobe.models import Report
from kprobe.output.json_report import render


def fix_apply(tmp_path: Path, config: str, reports: dict[str, Report], *, tool: str = "patch",
              extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], str, dict[str, Any]]:
    """(kprobe fix --json's run, its document, the patched file's text, kprobe check --json of it)."""
    for name, rep in reports.items():
        (tmp_path / name).write_text(render(rep))
    done = run_cli(("fix", *reports, "--config", config, "--json", *extra), cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr + done.stdout
    document = json.loads(done.stdout)
    (tmp_path / "change.patch").write_text(document["patch"])
    if tool == "patch":
        subprocess.run(["patch", "-p0", "-i", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    else:
        if not (tmp_path / ".git").exists():
            subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        subprocess.run(["git", "apply", "-p0", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    checked = run_cli(("check", config, "--json"), cwd=tmp_path)
    assert checked.returncode in (0, 1), checked.stderr
    return done, document, (tmp_path / config).read_text(), json.loads(checked.stdout)


def reach(checked: dict[str, Any], listener: str, network: str) -> dict[str, str]:
    """Per broker, the prediction of `kprobe check` for one listener from one client network."""
    out = {}
    for broker in checked["deployments"][0]["brokers"]:
        for lst in broker["listeners"]:
            if lst["name"] == listener:
                out[broker["name"]] = {r["vantage"]: r["status"] for r in lst["reach"]}[network]
    return out


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines only the old text has and the lines only the new one has, in order."""
    import difflib

    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [x[2:] for x in diff if x.startswith("- ")], [x[2:] for x in diff if x.startswith("+ ")]
