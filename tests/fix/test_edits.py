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


def apply(tool: str, cwd: Path, patch: str) -> None:
    """The patch applied by the real tool, in the directory the paths are relative to."""
    (cwd / "change.patch").write_text(patch)
    if tool == "patch":
        subprocess.run(["patch", "-p0", "-i", "change.patch"], cwd=cwd, check=True, capture_output=True)
    else:
        subprocess.run(["git", "init", "-q"], cwd=cwd, check=True)
        subprocess.run(["git", "apply", "-p0", "change.patch"], cwd=cwd, check=True, capture_output=True)


def reach(cwd: Path, path: str) -> dict[str, dict[str, str]]:
    """`kprobe check` on the file: listener -> network -> status, over every broker (one broker in these files)."""
    checked = json.loads(run_cli(("check", path, "--json"), cwd=cwd).stdout)
    return {lst["name"]: {r["vantage"]: r["status"] for r in lst["reach"]}
            for dep in checked["deployments"] for b in dep["brokers"] for lst in b["listeners"]}


def docker_reports(cwd: Path, name: str, port: int, host_boot: str) -> None:
    """The seeds' Docker case as two reports: the Compose network works on name:port, the host bootstraps at
    host_boot and fails on the name."""
    host = report("host", boots={host_boot: 0}, seen={(0, name, port): "unresolvable"})
    inside = report("inside", boots={f"{name}:{port}": 0}, seen={(0, name, port): "reachable"})
    (cwd / "host.json").write_text(render(host))
    (cwd / "inside.json").write_text(render(inside))


LIST_FORM = """services:
  kafka0:
    image: confluentinc/cp-kafka:7.6.0
    ports: ["29092:29092"]
    environment:
      - KAFKA_NODE_ID=0
      - KAFKA_PROCESS_ROLES=broker,controller
      - KAFKA_CONTROLLER_QUORUM_VOTERS=0@kafka0:29093
      - KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093
      - KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka0:29092
      - KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
      - KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER
      - KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT
"""


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_a_list_form_environment_and_a_one_line_ports_list_are_edited_in_their_own_form(tmp_path, tool):
    (tmp_path / "docker-compose.yml").write_text(LIST_FORM)
    docker_reports(tmp_path, "kafka0", 29092, "localhost:29092")
    done = fix(tmp_path, "host.json", "inside.json", "--config", "docker-compose.yml")
    assert done.returncode == 0, done.stderr + done.stdout
    apply(tool, tmp_path, done.stdout)
    patched = (tmp_path / "docker-compose.yml").read_text()
    changed = [(a, b) for a, b in zip(LIST_FORM.splitlines(), patched.splitlines(), strict=True) if a != b]
    assert changed == [
        ('    ports: ["29092:29092"]', '    ports: ["29092:29092", "29094:29094"]'),
        ("      - KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093",
         "      - KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093,HOST://0.0.0.0:29094"),
        ("      - KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka0:29092",
         "      - KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://kafka0:29092,HOST://localhost:29094"),
        ("      - KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
         "      - KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,HOST:PLAINTEXT")]
    seen = reach(tmp_path, "docker-compose.yml")
    assert seen["HOST"]["docker-host"] == "works" and seen["PLAINTEXT"]["compose-network"] == "works"


BITNAMI = """services:
  kafka:
    image: bitnami/kafka:3.7
    environment:
      - KAFKA_CFG_NODE_ID=0
      - KAFKA_CFG_PROCESS_ROLES=broker,controller
      - KAFKA_CFG_CONTROLLER_QUORUM_VOTERS=0@kafka:9093
      - "KAFKA_CFG_LISTENERS=PLAINTEXT://:9092,CONTROLLER://:9093"
      - "KAFKA_CFG_ADVERTISED_LISTENERS=PLAINTEXT://kafka:9092"  # the Compose name
      - KAFKA_CFG_CONTROLLER_LISTENER_NAMES=CONTROLLER
  app:
    image: alpine
"""


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_bitnamis_kafka_cfg_names_quoted_and_a_service_without_ports_gets_one(tmp_path, tool):
    # No port published: the host reaches the broker through a forward of its own (socat, ssh -L) on 19092.
    (tmp_path / "docker-compose.yml").write_text(BITNAMI)
    docker_reports(tmp_path, "kafka", 9092, "localhost:19092")
    done = fix(tmp_path, "host.json", "inside.json", "--config", "docker-compose.yml", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    document = json.loads(done.stdout)
    assert {c["setting"] for c in document["files"][0]["changes"]} == {
        "KAFKA_CFG_LISTENERS", "KAFKA_CFG_ADVERTISED_LISTENERS", "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP", "ports"}
    apply(tool, tmp_path, document["patch"])
    patched = (tmp_path / "docker-compose.yml").read_text()
    assert '    ports:\n      - "9094:9094"\n    image: bitnami/kafka:3.7\n' in patched
    assert '      - "KAFKA_CFG_LISTENERS=PLAINTEXT://:9092,CONTROLLER://:9093,HOST://0.0.0.0:9094"\n' in patched
    assert ('      - "KAFKA_CFG_ADVERTISED_LISTENERS=PLAINTEXT://kafka:9092,HOST://localhost:9094"  # the Compose '
            'name\n') in patched
    # The map Bitnami's image leaves to Kafka's default is spelt out, the new listener added, in the list's form.
    assert ("      - KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT,HOST:PLAINTEXT\n") in patched
    seen = reach(tmp_path, "docker-compose.yml")
    assert seen["HOST"]["docker-host"] == "works" and seen["PLAINTEXT"]["compose-network"] == "works"


# Bitnami's legacy names: its start script copies KAFKA_LISTENERS and the like over their KAFKA_CFG_ twins.
BITNAMI_LEGACY = """services:
  kafka0:
    image: bitnami/kafka:3.7
    ports:
      - '29092:29092'
    environment:
      KAFKA_CFG_NODE_ID: 0
      KAFKA_CFG_PROCESS_ROLES: broker,controller
      KAFKA_CFG_CONTROLLER_QUORUM_VOTERS: 0@kafka0:29093
      KAFKA_LISTENERS: PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093
      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka0:29092
      KAFKA_CFG_ADVERTISED_LISTENERS: PLAINTEXT://ignored:1
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
      KAFKA_CFG_CONTROLLER_LISTENER_NAMES: CONTROLLER
      KAFKA_CFG_INTER_BROKER_LISTENER_NAME: PLAINTEXT
"""


def test_bitnamis_legacy_variables_are_read_and_edited_where_the_service_sets_them(tmp_path):
    """The legacy KAFKA_ADVERTISED_LISTENERS wins over KAFKA_CFG_ADVERTISED_LISTENERS (Bitnami's libkafka.sh copies
    it over): the report matches its listener, the patch edits it, and its twin stays as it was."""
    (tmp_path / "docker-compose.yml").write_text(BITNAMI_LEGACY)
    docker_reports(tmp_path, "kafka0", 29092, "localhost:29092")
    done = fix(tmp_path, "host.json", "inside.json", "--config", "docker-compose.yml", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    document = json.loads(done.stdout)
    assert {c["setting"] for c in document["files"][0]["changes"]} == {
        "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "ports"}
    apply("patch", tmp_path, document["patch"])
    patched = (tmp_path / "docker-compose.yml").read_text()
    assert "      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka0:29092,HOST://localhost:29094\n" in patched
    assert "      KAFKA_CFG_ADVERTISED_LISTENERS: PLAINTEXT://ignored:1\n" in patched
    seen = reach(tmp_path, "docker-compose.yml")
    assert seen["HOST"]["docker-host"] == "works" and seen["PLAINTEXT"]["compose-network"] == "works"


# A broker whose listener values are continued over lines, with the clients' JAAS login (a password) between the
# listener lines, one line away from each.
CONTINUED = """node.id=1
process.roles=broker
listeners=INTERNAL://0.0.0.0:9091,\\
          CLIENT://0.0.0.0:9092
advertised.listeners=INTERNAL://b1.internal:9091,\\
    CLIENT://kafka1.lan:9092
# SASL for clients
listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="admin" \\
    password="s3cr3t-pw";
sasl.enabled.mechanisms=PLAIN
listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
"""


def lan_and_vpn(cwd: Path) -> None:
    lan = report("lan", boots={"kafka1.lan:9092": 1}, seen={(1, "kafka1.lan", 9092): "reachable"})
    vpn = report("vpn", boots={"10.8.0.5:9092": 1}, seen={(1, "kafka1.lan", 9092): "unresolvable"})
    (cwd / "lan.json").write_text(render(lan))
    (cwd / "vpn.json").write_text(render(vpn))


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_continued_values_stay_continued_and_a_secret_stays_out_of_the_diffs_context(tmp_path, tool):
    (tmp_path / "server.properties").write_text(CONTINUED)
    lan_and_vpn(tmp_path)
    args = ("lan.json", "vpn.json", "--config", "server.properties")
    outputs = [fix(tmp_path, *args, "--format", fmt) for fmt in ("text", "json", "markdown")]
    assert [o.returncode for o in outputs] == [0, 0, 0], [o.stderr for o in outputs]
    for output in outputs:
        assert "s3cr3t" not in output.stdout and "admin" not in output.stdout and "PlainLoginModule" not in output.stdout
    apply(tool, tmp_path, outputs[0].stdout)
    assert (tmp_path / "server.properties").read_text() == CONTINUED.replace(
        "          CLIENT://0.0.0.0:9092\n", "          CLIENT://0.0.0.0:9092,\\\n          EXTERNAL://0.0.0.0:9093\n"
    ).replace("    CLIENT://kafka1.lan:9092\n", "    CLIENT://kafka1.lan:9092,\\\n    EXTERNAL://10.8.0.5:9093\n").replace(
        "CONTROLLER:PLAINTEXT\n", "CONTROLLER:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT\n")
    assert reach(tmp_path, "server.properties")["EXTERNAL"]["here"] in ("works", "resolves")


def test_a_port_typo_inside_a_continued_value_is_edited_on_its_own_line(tmp_path):
    text = ("node.id=1\nprocess.roles=broker\nlisteners=INTERNAL://0.0.0.0:9091,CLIENT://0.0.0.0:9092\n"
            "advertised.listeners=INTERNAL://b1.internal:9091,\\\n    CLIENT://192.0.2.10:9029\n"
            "inter.broker.listener.name=INTERNAL\ncontroller.listener.names=CONTROLLER\n")
    (tmp_path / "server.properties").write_text(text)
    lan = report("lan", boots={"192.0.2.10:9092": 1}, seen={(1, "192.0.2.10", 9029): "unreachable"})
    (tmp_path / "lan.json").write_text(render(lan))
    done = fix(tmp_path, "lan.json", "--config", "server.properties")
    assert done.returncode == 0, done.stderr + done.stdout
    apply("patch", tmp_path, done.stdout)
    assert (tmp_path / "server.properties").read_text() == text.replace("192.0.2.10:9029", "192.0.2.10:9092")


def test_a_secret_right_next_to_an_edited_line_is_refused_naming_its_key(tmp_path):
    # No context can leave it out (a patch needs one line of context each side): one line, exit 2, no secret.
    (tmp_path / "server.properties").write_text(CONTINUED.replace("sasl.enabled.mechanisms=PLAIN\n", ""))
    lan_and_vpn(tmp_path)
    done = fix(tmp_path, "lan.json", "vpn.json", "--config", "server.properties")
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "line 10 (listener.name.client.plain.sasl.jaas.config) holds a secret right next to" in done.stderr
    assert "s3cr3t" not in done.stderr and "admin" not in done.stderr
