"""`kprobe fix`'s formats: the text is a patch file first, the Markdown a change ticket, secrets scrubbed from both."""

from __future__ import annotations

from fix_reports import report

from kprobe.output.fix import render_markdown, render_text
from kprobe.records import replace
from kprobe.runs.fix import fix_run

COMPOSE = """services:
  kafka0:
    image: "confluentinc/cp-kafka:7.6.0"
    ports:
      - '29092:29092'
    environment:
      KAFKA_NODE_ID: 0
      KAFKA_PROCESS_ROLES: broker,controller
      KAFKA_LISTENERS: PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093
      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka0:29092
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
      KAFKA_CONTROLLER_LISTENER_NAMES: CONTROLLER
      KAFKA_INTER_BROKER_LISTENER_NAME: PLAINTEXT
"""


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
