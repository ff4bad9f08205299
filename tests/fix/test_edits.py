"""`kprobe fix`'s edits on real configuration files: the diff applies with `patch -p0` and `git apply -p0`, it
changes only the listener lines, and `kprobe check` on the result predicts the gap closed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli
from fix_reports import report

from kprobe.output.json_report import render

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "data" / "configs" / "rmoff-kafka-listeners" / "docker-compose.yml"


def fix(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(("fix", *args), cwd=cwd)


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_the_seeds_compose_fix_applies_and_check_predicts_the_host_served(tmp_path, tool):
    shutil.copy(SEEDS, tmp_path / "docker-compose.yml")
    # BOB (kafka0:29092) is the seeds' inter-broker listener; the Docker host reaches it through a published port
    # only when one is: FRED's published 9092 answers as node 0, so the host's clients have a way in today.
    host = report("host", boots={"localhost:9092": 0}, seen={(0, "localhost", 9092): "reachable"})
    alice = report("outside", boots={"localhost:29094": 0}, seen={(0, "never-gonna-give-you-up", 29094): "unresolvable"})
    (tmp_path / "host.json").write_text(render(host))
    (tmp_path / "outside.json").write_text(render(alice))
    done = fix(tmp_path, "host.json", "outside.json", "--config", "docker-compose.yml", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    document = json.loads(done.stdout)
    import jsonschema

    jsonschema.validate(document, json.loads(run_cli(("schema", "--fix"), cwd=tmp_path).stdout))
    [edit] = document["edits"]
    assert (edit["listener"], edit["action"], edit["old"], edit["new"]) == (
        "LISTENER_ALICE", "replace", "never-gonna-give-you-up:29094", "localhost:29094")
    (tmp_path / "change.patch").write_text(document["patch"])
    original = SEEDS.read_text()
    if tool == "patch":
        subprocess.run(["patch", "-p0", "-i", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    else:
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        subprocess.run(["git", "apply", "-p0", "change.patch"], cwd=tmp_path, check=True, capture_output=True)
    patched = (tmp_path / "docker-compose.yml").read_text()
    changed = [(a, b) for a, b in zip(original.splitlines(), patched.splitlines(), strict=True) if a != b]
    assert changed == [(
        "      KAFKA_ADVERTISED_LISTENERS: LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,"
        "LISTENER_ALICE://never-gonna-give-you-up:29094",
        "      KAFKA_ADVERTISED_LISTENERS: LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,"
        "LISTENER_ALICE://localhost:29094")]
    checked = json.loads(run_cli(("check", "docker-compose.yml", "--json"), cwd=tmp_path).stdout)
    [broker] = checked["deployments"][0]["brokers"]
    alice_reach = next(lst for lst in broker["listeners"] if lst["name"] == "LISTENER_ALICE")["reach"]
    assert {r["vantage"]: r["status"] for r in alice_reach}["docker-host"] == "works"


def test_server_properties_add_keeps_comments_and_writes_the_default_map(tmp_path):
    (tmp_path / "server.properties").write_text(
        "# broker 1\nnode.id=1\nprocess.roles=broker\n"
        "listeners=PLAINTEXT://0.0.0.0:9092\n"
        "# what clients are told\nadvertised.listeners=PLAINTEXT://kafka1.lan:9092\n"
        "controller.listener.names=CONTROLLER\n")
    lan = report("lan", boots={"kafka1.lan:9092": 1}, seen={(1, "kafka1.lan", 9092): "reachable"})
    vpn = report("vpn", boots={"10.8.0.5:9092": 1}, seen={(1, "kafka1.lan", 9092): "unresolvable"})
    (tmp_path / "lan.json").write_text(render(lan))
    (tmp_path / "vpn.json").write_text(render(vpn))
    done = fix(tmp_path, "lan.json", "vpn.json", "--config", "server.properties", "--port", "19092")
    assert done.returncode == 0, done.stderr + done.stdout
    subprocess.run(["patch", "-p0"], input=done.stdout, text=True, cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "server.properties").read_text() == (
        "# broker 1\nnode.id=1\nprocess.roles=broker\n"
        "listeners=PLAINTEXT://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092\n"
        "# what clients are told\nadvertised.listeners=PLAINTEXT://kafka1.lan:9092,EXTERNAL://10.8.0.5:19092\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
        "CONTROLLER:PLAINTEXT,EXTERNAL:PLAINTEXT\n"
        "controller.listener.names=CONTROLLER\n")
    assert "open port 19092" in done.stdout and "what-if there: kprobe probe -b 10.8.0.5:9092" in done.stdout


def test_no_gap_is_an_empty_diff_and_exit_0(tmp_path):
    shutil.copy(SEEDS, tmp_path / "docker-compose.yml")
    fine = report("host", boots={"localhost:9092": 0}, seen={(0, "localhost", 9092): "reachable"})
    (tmp_path / "host.json").write_text(render(fine))
    done = fix(tmp_path, "host.json", "--config", "docker-compose.yml")
    assert done.returncode == 0 and done.stdout.startswith("# The reports show no gap"), done.stdout


def test_not_a_report_and_another_cluster_are_one_line_exit_2(tmp_path):
    shutil.copy(SEEDS, tmp_path / "docker-compose.yml")
    (tmp_path / "junk.json").write_text('{"hello": 1}')
    done = fix(tmp_path, "junk.json", "--config", "docker-compose.yml")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    other = report("x", boots={"x.example:9092": 5}, seen={(5, "x.example", 9092): "reachable"})
    (tmp_path / "other.json").write_text(render(other))
    done = fix(tmp_path, "other.json", "--config", "docker-compose.yml")
    assert done.returncode == 2 and "different clusters" in done.stderr and "Traceback" not in done.stderr
