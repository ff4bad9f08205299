"""docker/'s images built and run (on podman: .ci/podman.sh builds them), and the seeds' playground for real.

- the probe image runs as a non-root user and stays under 200 MB; the aggregate target runs;
- the playground (docker/compose.yaml under podman-compose, on the local broker image) gives kprobe, on the
  host and in a container on the compose network, the verdicts real clients get in the same two places:
  librdkafka in the kprobe image, the Java client (the broker image's own tools) in a container beside it.

Every podman command runs in podman's network namespace and the test thread enters it
(tests/support/podman_env.py says why), so "the host" here is that namespace's loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import podman_env
import pytest

pytestmark = pytest.mark.docker

COMPOSE = str(podman_env.ROOT / "docker" / "compose.yaml")
PROBE_LIMIT = 200 * 1000 * 1000  # bytes, as `podman images` counts them
# librdkafka in the kprobe image: metadata, then one record produced and acknowledged, as an application does.
LIBRDKAFKA = """
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
conf = {"bootstrap.servers": sys.argv[1], "socket.timeout.ms": 5000, "message.timeout.ms": 8000}
admin = AdminClient(conf)
admin.create_topics([NewTopic(sys.argv[2], 1, 1)])[sys.argv[2]].result(10)
producer = Producer(conf)
errors = []
producer.produce(sys.argv[2], b"x", on_delivery=lambda err, msg: errors.append(err))
producer.flush(10)
sys.exit(0 if errors == [None] else 1)
"""


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    reason = podman_env.unavailable()
    if reason:
        pytest.skip(reason)
    settings = podman_env.load()
    assert settings is not None
    yield settings


def test_probe_image_runs_as_non_root_and_is_small(env):
    image = env["KPROBE_PROBE_IMAGE"]
    [info] = json.loads(podman_env.podman(env, "image", "inspect", image).stdout)
    assert info["Config"]["User"] == "10001"
    size = int(info["Size"])
    print(f"{image}: {size / 1e6:.0f} MB")
    assert size < PROBE_LIMIT, f"{image} is {size / 1e6:.0f} MB"
    run = podman_env.podman(env, "run", "--rm", "--entrypoint", "id", image)
    assert run.stdout.startswith("uid=10001(kprobe)")
    assert podman_env.podman(env, "run", "--rm", image, "--version").stdout.startswith("kprobe ")


def test_aggregate_image_runs(env):
    image = env["KPROBE_AGGREGATE_IMAGE"]
    [info] = json.loads(podman_env.podman(env, "image", "inspect", image).stdout)
    assert info["Config"]["User"] == "10001"
    out = podman_env.podman(env, "run", "--rm", image, "--help").stdout
    assert "Aggregate reports" in out
    java = podman_env.podman(env, "run", "--rm", "--entrypoint", "java", image, "-version")
    assert "17." in java.stderr


@pytest.fixture(scope="module")
def playground(env) -> Iterator[tuple[dict[str, str], str]]:
    """`podman-compose up -d kafka0` on the local broker image; yields the compose network's name."""
    project = f"kprobe-pg-{uuid.uuid4().hex[:8]}"
    compose_env = {"CONTAINERS_CONF": env["CONTAINERS_CONF"], "KAFKA_IMAGE": env["KPROBE_KAFKA_IMAGE"]}

    def compose(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["nsenter", f"--net={env['KPROBE_PODMAN_NETNS']}", "podman-compose", "-p", project, "-f", COMPOSE,
                *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=check,
                              env={**os.environ, **compose_env})

    try:
        compose("up", "-d", "kafka0")
        container = f"{project}_kafka0_1"
        deadline = time.monotonic() + 120
        while "Kafka Server started" not in podman_env.podman(env, "logs", container).stdout:
            assert time.monotonic() < deadline, podman_env.podman(env, "logs", container).stdout[-2000:]
            time.sleep(1)
        yield env, f"{project}_default"
    finally:
        compose("down", check=False)
        podman_env.podman(env, "network", "rm", "-f", f"{project}_default", check=False)  # podman-compose 1.0.3 keeps it


def host_probe(env, bootstrap: str) -> subprocess.CompletedProcess[str]:
    with podman_env.inside(env):
        return subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", bootstrap, "--deadline", "30s",
                               "--json"], capture_output=True, text=True, timeout=90, check=False)


def network_probe(env, network: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return podman_env.podman(env, "run", "--rm", "--network", network, env["KPROBE_PROBE_IMAGE"], "probe", "-b",
                             bootstrap, "--deadline", "30s", "--json", check=False)


def librdkafka(env, network: str, bootstrap: str) -> bool:
    topic = f"t-{uuid.uuid4().hex[:6]}"
    run = podman_env.podman(env, "run", "--rm", "--network", network, "--entrypoint", "python3",
                            env["KPROBE_PROBE_IMAGE"], "-c", LIBRDKAFKA, bootstrap, topic, check=False, timeout=120)
    return run.returncode == 0


def java_client(env, network: str, bootstrap: str) -> bool:
    """Kafka's own admin client (kafka-broker-api-versions) from a container beside the broker: every broker answers.

    The tool lists each broker the metadata names, with "-> ERROR: ..." for one it cannot reach.
    """
    run = podman_env.podman(env, "run", "--rm", "--network", network, "--entrypoint",
                            "/opt/kafka/bin/kafka-broker-api-versions.sh", env["KPROBE_KAFKA_IMAGE"],
                            "--bootstrap-server", bootstrap, "--command-config", "/dev/null", check=False,
                            timeout=120)
    return run.returncode == 0 and "(id: 0 rack: null" in run.stdout and "-> ERROR" not in run.stdout


def test_playground_from_the_host(playground):
    env, _ = playground
    fred = host_probe(env, "localhost:9092")
    assert fred.returncode == 0, fred.stdout[-1500:] + fred.stderr[-500:]
    alice = host_probe(env, "localhost:29094")  # advertises a name nobody resolves
    assert alice.returncode != 0
    assert "never-gonna-give-you-up" in alice.stdout and "ADVERTISED_UNRESOLVABLE" in alice.stdout


def test_playground_from_the_compose_network_matches_real_clients(playground):
    env, network = playground
    bob = network_probe(env, network, "kafka0:29092")
    assert bob.returncode == 0, bob.stdout[-1500:] + bob.stderr[-500:]
    assert librdkafka(env, network, "kafka0:29092")
    assert java_client(env, network, "kafka0:29092")
    fred = network_probe(env, network, "kafka0:9092")  # advertises localhost: the client's own container
    assert fred.returncode != 0
    assert "ADVERTISED_LOOPBACK" in fred.stdout
    assert not librdkafka(env, network, "kafka0:9092")
    assert not java_client(env, network, "kafka0:9092")
