"""`kprobe check` as users run it: real configuration files in, a report and an exit code out.

The corpus (tests/data/configs/, sources in its README) holds files from Kafka's, Confluent's,
Strimzi's, Bitnami's and the seeds' repositories; the README's table says what each must give, and
this test reads the table, so the expectation sits beside the source it is about. The session's
resolver knows no name (tests/support/hermetic_dns.py): names resolve from "here" as they would on a Docker
host that knows no Compose name.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from cli_runner import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "configs"
SECRET = "s3cr3t-Pa55w0rd-9f1c"


def kprobe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` from the repository's root, in-process (tests/support/cli_runner.py): `check` reads files and prints,
    so what it proves is what main prints and returns, and a child's interpreter start-up proves nothing more."""
    return run_cli(args, cwd=ROOT, env=env)


def corpus() -> list[tuple[str, list[tuple[str, str]], int]]:
    """(file, [(code, severity)], exit) from the corpus README's table."""
    rows = []
    for line in (CONFIGS / "README.md").read_text().splitlines():
        match = re.match(r"^\| `([^`]+)` \| [^|]+ \| `[^`]+` \| [0-9a-f]{40} \| ([^|]+) \| (\d) \|$", line)
        if match:
            found = [] if match.group(2).strip() == "none" else [
                tuple(part.strip().split()) for part in match.group(2).split(",")]
            rows.append((match.group(1), found, int(match.group(3))))
    return rows  # type: ignore[return-value]


def test_the_corpus_table_is_read():
    rows = corpus()
    assert len(rows) >= 15
    assert {p.relative_to(CONFIGS).as_posix() for p in CONFIGS.rglob("*") if p.is_file() and p.name != "README.md"} \
        == {f for f, _, _ in rows}, "every corpus file has a row, every row a file"


@pytest.mark.parametrize(("name", "findings", "code"), corpus(), ids=[r[0] for r in corpus()])
def test_corpus_file_gives_its_expected_findings(name, findings, code):
    done = kprobe("check", str(CONFIGS / name), "--json")
    assert done.returncode == code, done.stdout + done.stderr
    report = json.loads(done.stdout)
    jsonschema.validate(report, json.loads(kprobe("schema", "--check").stdout))
    assert Counter((f["code"], f["severity"]) for f in report["findings"]) == Counter(map(tuple, findings))
    assert report["summary"]["status"] == ("gap" if code else "ok")


def test_the_seeds_broker_in_text():
    """The seeds' teaching broker: each listener, for whom it is meant, each network's fate, ALICE's fix."""
    done = kprobe("check", str(CONFIGS / "rmoff-kafka-listeners" / "docker-compose.yml"), "--no-color")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "LISTENER_BOB       PLAINTEXT      binds kafka0:29092, advertises kafka0:29092  (inter-broker, for " \
           "the Compose network)" in out
    assert "LISTENER_FRED      PLAINTEXT      binds kafka0:9092, advertises localhost:9092  (published " \
           "0.0.0.0:9092->9092, for the Docker host)" in out
    assert re.search(r"\* on the Docker host +works +bootstrap localhost:9092", out)
    assert re.search(r"  inside the Compose network +fails +bootstrap kafka0:9092: localhost in a client's", out)
    assert "ERROR ADVERTISED_UNRESOLVABLE  node 0 never-gonna-give-you-up:29094" in out
    # The file sets KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR only: __transaction_state keeps three replicas on one broker.
    assert "WARNING INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS\n  __transaction_state can never be created" in out
    assert out.rstrip().endswith("gap: 1 broker(s), 3 advertised listener(s), 1 error(s), 1 warning(s) (exit 1)")


def test_this_repositorys_playground_is_the_seeds_broker():
    """docker/compose.yaml stages the same three listeners on apache/kafka: the same one finding, and CONTROLLER
    (bound inside the container, never advertised) judged for nobody."""
    done = kprobe("check", "docker/compose.yaml", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert [(f["code"], f["endpoint"]) for f in report["findings"]] == [
        ("ADVERTISED_UNRESOLVABLE", "never-gonna-give-you-up:29094")]
    [broker] = report["deployments"][0]["brokers"]
    by_name = {lst["name"]: lst for lst in broker["listeners"]}
    assert by_name["CONTROLLER"]["advertised"] is None and by_name["CONTROLLER"]["audiences"] == []
    assert by_name["LISTENER_FRED"]["published"] == [{"host_ip": "127.0.0.1", "host_port": 9092,
                                                       "container_port": 9092}]


SINGLE_BROKER = """services:
  kafka:
    image: apache/kafka:4.1.1
    ports: ["9092:9092"]
    environment:
      KAFKA_NODE_ID: 1
      KAFKA_PROCESS_ROLES: broker,controller
      KAFKA_CONTROLLER_QUORUM_VOTERS: 1@kafka:9093
      KAFKA_LISTENERS: PLAINTEXT://:19092,PLAINTEXT_HOST://:9092,CONTROLLER://:9093
      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka:19092,PLAINTEXT_HOST://localhost:9092
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT,CONTROLLER:PLAINTEXT
      KAFKA_CONTROLLER_LISTENER_NAMES: CONTROLLER
      KAFKA_INTER_BROKER_LISTENER_NAME: PLAINTEXT
"""


def test_a_single_compose_broker_left_at_kafkas_defaults(tmp_path):
    """The common Compose mistake: every listener right, the internal topics at Kafka's three replicas on one broker."""
    compose = tmp_path / "compose.yaml"
    compose.write_text(SINGLE_BROKER)
    done = kprobe("check", str(compose), "--no-color")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "ERROR INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS\n  __consumer_offsets can never be created: " \
           "offsets.topic.replication.factor=3 (Kafka's default: the file leaves it unset)" in out
    assert "fix: Set KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1 in service kafka's environment" in out
    assert "WARNING INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS\n  __transaction_state can never be created" in out
    assert out.rstrip().endswith("gap: 1 broker(s), 2 advertised listener(s), 1 error(s), 1 warning(s) (exit 1)")
    compose.write_text(SINGLE_BROKER + "".join(f"      KAFKA_{s}: 1\n" for s in (
        "OFFSETS_TOPIC_REPLICATION_FACTOR", "TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "TRANSACTION_STATE_LOG_MIN_ISR")))
    assert kprobe("check", str(compose)).returncode == 0  # as Kafka's own single-node example sets them


@pytest.mark.parametrize(("scenario", "expected"), [
    ("defaults", [("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "error"),
                  ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "warning")]),
    ("listeners", [("ADVERTISED_UNRESOLVABLE", "error")]),
])
def test_the_labs_own_server_properties_predict_what_their_probes_observe(tmp_path, scenario, expected):
    """A lab broker's own server.properties, rendered without starting it: the `defaults` lab (one broker, the
    internal topics at Kafka's defaults) is where tests/probe/test_application.py sees OFFSETS_TOPIC_UNCREATABLE
    (error) and TRANSACTION_LOG_UNCREATABLE (warning) live, and check predicts both from the file alone; the
    `listeners` lab sizes its internal topics to its one broker, so only ALICE's listener is predicted to fail."""
    from kprobe.lab.base import render, server_properties
    from kprobe.lab.scenarios import get_scenario

    lab = get_scenario(scenario)
    props = tmp_path / "server.properties"
    props.write_text(server_properties(lab, render(lab, {}), 0, str(tmp_path / "data")))
    report = json.loads(kprobe("check", str(props), "--json").stdout)
    assert Counter((f["code"], f["severity"]) for f in report["findings"]) == Counter(expected)


def test_several_server_properties_are_one_cluster(tmp_path):
    one, two = tmp_path / "a.properties", tmp_path / "b.properties"
    one.write_text("node.id=1\nlisteners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://kafka:9092\n")
    two.write_text("node.id=2\nlisteners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://kafka:9092\n")
    done = kprobe("check", str(one), str(two), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1
    assert ("DUPLICATE_ENDPOINT", None, "kafka:9092") in [(f["code"], f["node_id"], f["endpoint"])
                                                          for f in report["findings"]]
    assert len(report["deployments"]) == 1 and len(report["deployments"][0]["brokers"]) == 2


def test_markdown_is_a_ticket_summary():
    done = kprobe("check", str(CONFIGS / "rmoff-kafka-listeners" / "docker-compose.yml"), "--format", "markdown")
    assert done.returncode == 1
    md = done.stdout
    assert md.startswith("## kprobe check: gap\n")
    assert "| `kafka0` | `LISTENER_ALICE` | `PLAINTEXT` | `kafka0:29094` | `never-gonna-give-you-up:29094` | on the " \
           "Docker host (meant for) | unresolvable |" in md
    assert "- **error** `ADVERTISED_UNRESOLVABLE` at `never-gonna-give-you-up:29094`: " in md
    assert "LISTENER\\_ALICE" in md  # prose is escaped: an underscore is no emphasis


def test_json_to_a_file_as_well(tmp_path):
    out = tmp_path / "check.json"
    done = kprobe("check", "docker/compose.yaml", "-o", str(out))
    assert done.returncode == 1 and "ADVERTISED_UNRESOLVABLE" in done.stdout
    assert json.loads(out.read_text())["schema"] == "kprobe.check/v1"


def test_schema_check_prints_the_check_schema():
    done = kprobe("schema", "--check")
    schema = json.loads(done.stdout)
    assert schema["properties"]["schema"] == {"const": "kprobe.check/v1"}
    jsonschema.Draft202012Validator.check_schema(schema)
    assert json.loads(kprobe("schema").stdout)["$id"].endswith("report/v1.json")  # the probe's, unchanged


# -- no secret in any output --------------------------------------------------------------------------------

SECRET_COMPOSE = f"""
services:
  kafka:
    image: bitnami/kafka:3.7
    ports: ["9092:9092"]
    environment:
      KAFKA_CFG_NODE_ID: "0"
      KAFKA_CFG_PROCESS_ROLES: broker,controller
      KAFKA_CFG_LISTENERS: SASL_PLAINTEXT://:9092,CONTROLLER://:9093
      KAFKA_CFG_ADVERTISED_LISTENERS: SASL_PLAINTEXT://kafka.example.invalid:9092
      KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP: SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
      KAFKA_CFG_CONTROLLER_LISTENER_NAMES: CONTROLLER
      KAFKA_CFG_INTER_BROKER_LISTENER_NAME: SASL_PLAINTEXT
      KAFKA_CLIENT_PASSWORDS: {SECRET}
      KAFKA_CFG_SASL_JAAS_CONFIG: org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="{SECRET}";
"""

SECRET_PROPERTIES = f"""node.id=3
listeners=SASL_SSL://0.0.0.0:9093
advertised.listeners=SASL_SSL://kafka-3.example.invalid:9093
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="admin" password="{SECRET}" user_admin="{SECRET}";
ssl.keystore.password={SECRET}
inter.broker.listener.name=SASL_SSL
"""


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_no_secret_in_any_output(tmp_path, fmt):
    compose = tmp_path / "compose.yaml"
    compose.write_text(SECRET_COMPOSE)
    props = tmp_path / "server.properties"
    props.write_text(SECRET_PROPERTIES)
    out = tmp_path / "report.json"
    done = kprobe("check", str(compose), str(props), "--format", fmt, "-o", str(out))
    assert done.returncode == 1, done.stderr  # both advertise names that resolve nowhere
    assert "ADVERTISED_UNRESOLVABLE" in done.stdout
    for text in (done.stdout, done.stderr, out.read_text()):
        assert SECRET not in text


def test_the_corpus_properties_keep_their_keystore_passwords():
    """Kafka's own file-input example holds `ssl.keystore.password=abcdefgh`: never printed."""
    path = str(CONFIGS / "apache-kafka" / "file-input" / "server.properties")
    for fmt in ("text", "json", "markdown"):
        assert "abcdefgh" not in kprobe("check", path, "--format", fmt).stdout


# -- bad input: one line, exit 2 ------------------------------------------------------------------------------

BAD = {
    "malformed.yaml": ("services:\n  kafka: [unclosed\n", r"malformed YAML at line \d+, column \d+"),
    "unknown-image.yaml": ("services:\n  kafka:\n    image: wurstmeister/kafka:2.13\n    environment:\n"
                           "      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka:9092\n",
                           r"image wurstmeister/kafka:2.13 sets KAFKA_ADVERTISED_LISTENERS but is none kprobe check "
                           r"knows"),
    "old-strimzi.yaml": ("apiVersion: kafka.strimzi.io/v1beta1\nkind: Kafka\nmetadata: {name: old}\n"
                         "spec: {kafka: {listeners: {plain: {}}}}\n",
                         r"Kafka old has apiVersion kafka.strimzi.io/v1beta1: kprobe check reads "
                         r"kafka.strimzi.io/v1beta2 and kafka.strimzi.io/v1"),
    "deployment.yaml": ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
                        r"a Kubernetes Deployment: kprobe check reads server.properties"),
    "no-broker.yaml": ("services:\n  web:\n    image: nginx\n", r"no Kafka broker service"),
    "bad-listener.properties": ("listeners=PLAINTEXT:/kafka:9092\n", r"bad listener 'PLAINTEXT:/kafka:9092'"),
    "client.properties": ("bootstrap.servers=kafka:9092\nsecurity.protocol=SSL\n", r"no broker settings"),
    "empty.yaml": ("# nothing\n", r"empty: no settings to read"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_file_one_line_exit_2(tmp_path, name):
    text, message = BAD[name]
    path = tmp_path / name
    path.write_text(text)
    done = kprobe("check", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kprobe: error: {path}: "), done.stderr
    assert re.search(message, lines[0]), lines[0]


@pytest.mark.parametrize(("args", "message"), [
    (["check", "/nonexistent/compose.yaml"], "/nonexistent/compose.yaml: no such file"),
    (["check", "tests"], "tests: a directory; name the configuration files in it"),
    (["check", "docker/compose.yaml", "--format", "yaml"], "bad --format 'yaml': use text, json or markdown"),
    (["check", "docker/compose.yaml", "-X", "sasl.mechanism=PLAIN"], "-X sets client settings for --probe"),
    (["check", "docker/compose.yaml", "--nameserver", "dns.example"], "bad --nameserver 'dns.example'"),
    (["check", "tests/data/configs/strimzi/kafka-persistent.yaml", "--probe"],
     "--probe: no listener has a bootstrap address from here to probe"),
])
def test_bad_usage_one_line_exit_2(args, message):
    done = kprobe(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_compose_variables_are_substituted(tmp_path):
    """`${IMAGE}` and `${PORT:-9092}` as Compose substitutes them, the environment over the .env file."""
    (tmp_path / ".env").write_text("IMAGE=apache/kafka:4.1.1\nHOST_PORT=19092\n")
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  kafka:\n    image: ${IMAGE}\n    ports: ['${HOST_PORT}:9092']\n    environment:\n"
                       "      KAFKA_LISTENERS: PLAINTEXT://:19093,HOST://:9092,CONTROLLER://:9093\n"
                       "      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka:19093,HOST://localhost:${ADV_PORT:-9092}\n"
                       "      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT,"
                       "CONTROLLER:PLAINTEXT\n      KAFKA_CONTROLLER_LISTENER_NAMES: CONTROLLER\n"
                       "      KAFKA_PROCESS_ROLES: broker,controller\n"
                       "      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: ${RF:-1}\n"
                       "      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: ${RF:-1}\n"
                       "      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: ${RF:-1}\n")
    report = json.loads(kprobe("check", str(compose), "--json").stdout)
    assert [f["code"] for f in report["findings"]] == ["PUBLISHED_PORT_DIFFERS"]  # 19092 published, 9092 advertised
    import os

    env = {**os.environ, "ADV_PORT": "19092"}
    done = kprobe("check", str(compose), "--json", env=env)
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["deployments"][0]["notes"] == []
    done = kprobe("check", str(compose), "--json", env={**env, "RF": "3"})  # the internal topics' settings too
    assert [(f["code"], f["severity"]) for f in json.loads(done.stdout)["findings"]] == [
        ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "error"), ("INTERNAL_TOPIC_REPLICATION_ABOVE_BROKERS", "warning")]


# -- any shape of file: bad input, never a traceback ----------------------------------------------------------

_KEYS = ["name", "port", "type", "tls", "configuration", "brokers", "bootstrap", "listeners", "image", "environment",
         "ports", "networks", "spec", "metadata", "kafka", "replicas", "roles", "authentication", "advertisedHost",
         "target", "published", "aliases", "client", "controller", "interbroker", "external", "enabled", "service",
         "replicaCount", "loadBalancerIPs", "nodePorts", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.text(max_size=12),
                     st.sampled_from(["PLAINTEXT://:9092", "kafka:9092", "0.0.0.0", "internal", "loadbalancer",
                                      "9092:9092", "broker,controller"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)), max_leaves=12)


def _read_any(documents: list) -> None:
    """Each document through detection and its reader, in-process: a UsageError, or deployments."""
    import tempfile

    import yaml

    from kprobe.check.deployments import read_files
    from kprobe.errors import UsageError

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "config.yaml"
        path.write_text(yaml.safe_dump_all(documents))
        try:
            read_files([str(path)])
        except UsageError:
            pass


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_VALUES)
def test_any_shape_of_compose_file_is_bad_input_or_read(value):
    _read_any([{"services": {"kafka": {"image": "apache/kafka", "ports": value,
                                       "environment": {"KAFKA_LISTENERS": "PLAINTEXT://:9092"}}}}])
    _read_any([{"services": {"kafka": value}}])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_VALUES, _VALUES)
def test_any_shape_of_strimzi_resource_is_bad_input_or_read(listener, spec):
    _read_any([{"apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka", "metadata": {"name": "c"},
                "spec": {"kafka": {"replicas": 1, "listeners": [listener]}}}])
    _read_any([{"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "KafkaNodePool", "metadata": spec, "spec": spec},
               {"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka", "metadata": {"name": "c"}, "spec": spec}])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_VALUES)
def test_any_shape_of_bitnami_values_is_bad_input_or_read(value):
    _read_any([{"listeners": value}])
    _read_any([{"externalAccess": value, "controller": {"replicaCount": 1}}])
    _read_any([{"controller": value}])


def test_probe_with_nothing_deployed_fails_with_exit_3(tmp_path):
    """--probe before anything runs: no bootstrap answers, so there is no observation to compare (exit 3)."""
    import socket

    with socket.socket() as sock:  # a port nothing listens on: bound, never listening, closed at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    compose = tmp_path / "compose.yaml"
    compose.write_text(f"services:\n  kafka:\n    image: apache/kafka:4.1.1\n    ports: ['127.0.0.1:{port}:9092']\n"
                       "    environment:\n      KAFKA_LISTENERS: PLAINTEXT://:19092,HOST://:9092\n"
                       f"      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka:19092,HOST://localhost:{port}\n"
                       "      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,HOST:PLAINTEXT\n"
                       "      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1\n"
                       "      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 1\n"
                       "      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1\n")
    done = kprobe("check", str(compose), "--probe", "--json", "--timeout", "2s")
    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["summary"]["status"] == "failed" and report["findings"] == []
    [observation] = report["observations"]
    assert (observation["bootstrap"], observation["observed"], observation["agrees"]) == (
        f"localhost:{port}", "bootstrap_failed", None)
    assert report["probe"]["schema"] == "kprobe.report/v1"
