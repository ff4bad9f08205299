"""`kprobe fix`'s formats: the text is a patch file first, the Markdown a change ticket, secrets scrubbed from both."""

from __future__ import annotations

from fix_reports import COMPOSE, report

from kprobe.output.fix import render_markdown, render_text
from kprobe.records import replace
from kprobe.runs.fix import fix_run


def result(tmp_path):
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE)
    host = report("host", boots={"localhost:29092": 0}, seen={(0, "kafka0", 29092): "unresolvable"})
    inside = report("inside", boots={"kafka0:29092": 0}, seen={(0, "kafka0", 29092): "reachable"})
    return fix_run([("host.json", host), ("inside.json", inside)], [str(path)])


def test_text_is_the_patch_then_prose_lines(tmp_path):
    text = render_text(result(tmp_path))
    patch, _, prose = text.partition("\n# ")
    assert patch.startswith(f"--- {tmp_path}/docker-compose.yml\n+++ ")
    assert "+      - '29094:29094'" in patch
    assert "host (on the Docker host): gap -> closed" in prose and "inside (inside the Compose network): ok" in prose


def test_markdown_is_a_change_ticket_with_secrets_scrubbed(tmp_path):
    fixed = replace(result(tmp_path), secrets=("kafka0:29092",))
    markdown = render_markdown(fixed)
    assert markdown.startswith("## kprobe fix\n")
    assert "### Changes" in markdown and "```diff" in markdown and "### Proof" in markdown
    assert "kafka0:29092" not in markdown
