"""The documentation site: generated pages are fresh, and mkdocs builds it strictly."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))

import generate  # noqa: E402
from conftest import start_once  # noqa: E402


@pytest.mark.labs(*generate.DOC_LABS)
def test_generated_pages_are_fresh(lab_factory):
    """The labs are the session's own (conftest.start_once): a lab another test started is not started again."""
    labs = {name: start_once(lab_factory, name) for name in generate.DOC_LABS}
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("kprobe-docs-*"))
    pages = generate.generate_all(labs)
    assert set(temp.glob("kprobe-docs-*")) == before, "the generator left its password files behind"
    for name, text in pages.items():
        committed = (ROOT / "docs" / name).read_text()
        if committed != text:
            import difflib

            diff = "".join(difflib.unified_diff(committed.splitlines(True), text.splitlines(True), "committed",
                                                "generated", n=1))
            raise AssertionError(f"docs/{name} is stale: run python docs/generate.py\n{diff[:6000]}")


def test_a_lab_port_is_named_only_where_a_port_is_written():
    """A lab draws its ports at random from 20000 up, so one can be a number kprobe's own texts hold.

    Drawn as 30000, a listener's port must not turn the NodePort range "30000-32767" in a finding into
    "<PLAIN port>-32767", nor a client's documented default of 30000 ms into a port.
    """
    from types import SimpleNamespace

    node = SimpleNamespace(controller_port=31192, listeners={"PLAIN": SimpleNamespace(port=30000)})
    lab = SimpleNamespace(cluster_id="abc", dns={}, nodes={1: node}, blackholes={}, impostors={},
                          scenario=SimpleNamespace(name="kubernetes"))
    text = ('node ports (30000-32767 by default); default 30000); "port": 30000, node-a:30000, [::1]:30000, '
            "port 30000, port 31192/30000, each with a port of its own (30000, 31192)")
    assert generate.normalise(text, [lab]) == (
        'node ports (30000-32767 by default); default 30000); "port": <PLAIN port>, node-a:<PLAIN port>, '
        "[::1]:<PLAIN port>, port <PLAIN port>, port <controller port>/<PLAIN port>, each with a port of its own "
        "(<PLAIN port>, <controller port>)")


def test_findings_examples_name_every_code():
    """Every code kprobe can emit is on the examples page, staged or listed as not stageable.

    The codes are read from the modules that emit them, so a new code fails here until the page
    (regenerated) shows it.
    """
    import re

    page = (ROOT / "docs" / "findings-examples.md").read_text()
    # The rule modules, kprobe/findings/.
    source = "".join(p.read_text() for p in sorted((ROOT / "kprobe" / "findings").glob("*.py"))
                     if p.name not in ("__init__.py", "catalogue.py"))
    codes = set(re.findall(r'"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"', source))
    assert len(codes) >= 25, codes  # the pattern still finds the codes
    staged = set(re.findall(r"^## `([A-Z_0-9]+)`$", page, re.M))
    listed = set(re.findall(r"^\| `([A-Z_0-9]+)` \|", page, re.M))
    assert codes == staged | listed, (codes - staged - listed, (staged | listed) - codes)
    assert not staged & listed
    for code in staged:  # each staged code shows its finding object, with the command that produced it
        section = page.split(f"## `{code}`", 1)[1].split("\n## ", 1)[0]
        assert "$ kprobe probe " in section and f'"code": "{code}"' in section, code


def test_cli_reference_has_every_command_and_option():
    import typer.main

    from kprobe.cli.app import app

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
