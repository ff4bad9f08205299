"""The documentation site: generated pages are fresh, and mkdocs builds it strictly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import generate  # noqa: E402


def test_generated_pages_are_fresh(listeners_lab, cloud_lab):
    for name, text in generate.generate_all(listeners_lab, cloud_lab).items():
        committed = (ROOT / "docs" / name).read_text()
        assert committed == text, f"docs/{name} is stale: run python docs/generate.py"


def test_cli_reference_has_every_command_and_option():
    import typer.main

    from kprobe.cli import app

    page = (ROOT / "docs" / "cli.md").read_text()

    def walk(command, path):
        subs = getattr(command, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
            return
        assert f"## `{' '.join(path)}`" in page
        for param in command.params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("-"):
                    assert f"`{opt}`" in page, (path, opt)

    walk(typer.main.get_command(app), ["kprobe"])


def test_mkdocs_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "why" / "index.html").exists() and (tmp_path / "cli" / "index.html").exists()
