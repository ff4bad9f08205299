"""The testcontainers backend: its configuration here, the real thing where a Docker engine answers.

The engine is the machine's Docker where one answers, else the project's podman (.ci/podman.sh) with the
broker image it builds: tests/support/podman_env.py says why the real tests skip where neither is there.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from podman_env import podman_engine  # noqa: F401  (a fixture)

from kprobe.errors import LabError
from kprobe.lab.base import render
from kprobe.lab.certs import CertFiles
from kprobe.lab.containers import (
    DATA_DIR,
    SECRETS_DIR,
    ContainerLab,
    address_unavailable,
    container_properties,
    docker_available,
    engine_is_local,
    env_name,
    environment,
    port_bindings,
    property_name,
)
from kprobe.lab.decoys import Blackhole, Impostor
from kprobe.lab.native import HEAP_OPTS, PERFORMANCE_OPTS
from kprobe.lab.scenarios import SCENARIOS, get_scenario

DOCKER = docker_available()


@pytest.fixture
def engine(request):
    """The machine's Docker engine where one answers, else podman's (which skips, saying why, where it is not set up)."""
    if DOCKER:
        yield None
    else:
        yield request.getfixturevalue("podman_engine")


def rendered(name: str):
    """A scenario with ports chosen, as `ContainerLab.start` renders it (blackholes are real)."""
    scenario = get_scenario(name)
    holes = {n: Blackhole(h) for n, h in scenario.blackholes.items()}
    fakes = {n: Impostor(h) for n, h in scenario.impostors.items()}
    try:
        return scenario, render(scenario, holes, fakes)
    finally:
        for hole in holes.values():
            hole.close()
        for fake in fakes.values():
            fake.close()


def entries(value: str) -> dict[str, str]:
    """`NAME://host:port,...` as {NAME: host:port}."""
    return dict(item.split("://", 1) for item in value.split(","))


# -- configuration (no Docker needed) ------------------------------------------------------
def test_listeners_inside_a_container():
    scenario, nodes = rendered("listeners")
    node = nodes[0]
    props = container_properties(scenario, nodes, 0)
    fred = node.listeners["LISTENER_FRED"].port
    alice = node.listeners["LISTENER_ALICE"].port
    bob = node.listeners["LISTENER_BOB"].port
    controller = node.controller_port

    assert entries(props["listeners"]) == {
        "LISTENER_BOB": f"0.0.0.0:{bob}", "LISTENER_FRED": f"0.0.0.0:{fred}",
        "LISTENER_ALICE": f"0.0.0.0:{alice}", "CONTROLLER": f"0.0.0.0:{controller}",
    }
    assert entries(props["advertised.listeners"]) == {
        "LISTENER_BOB": f"kafka0:{bob}",  # inter-broker: the Docker name
        "LISTENER_FRED": f"localhost:{fred}",  # client listeners: as rendered
        "LISTENER_ALICE": f"never-gonna-give-you-up:{alice}",
        "CONTROLLER": f"kafka0:{controller}",  # else Kafka derives 0.0.0.0 and refuses to start
    }
    assert props["controller.quorum.voters"] == f"0@kafka0:{controller}"
    assert props["inter.broker.listener.name"] == "LISTENER_BOB"
    assert props["log.dirs"] == DATA_DIR
    assert props["node.id"] == "0"


def test_three_brokers_use_docker_names_among_themselves():
    scenario, nodes = rendered("three-brokers")
    for node_id in (0, 1, 2):
        props = container_properties(scenario, nodes, node_id)
        voters = props["controller.quorum.voters"].split(",")
        assert voters == [f"{i}@kafka{i}:{nodes[i].controller_port}" for i in (0, 1, 2)]
        advertised = entries(props["advertised.listeners"])
        assert advertised["INTERNAL"] == f"kafka{node_id}:{nodes[node_id].listeners['INTERNAL'].port}"
        assert advertised["CLIENT"] == f"127.0.0.{31 + node_id}:{nodes[node_id].listeners['CLIENT'].port}"
        assert all(ep.startswith("0.0.0.0:") for ep in entries(props["listeners"]).values())
        assert "0.0.0.0" not in props["advertised.listeners"]
    # What broker 2 advertises through its odd listeners is untouched: the scenario's subject.
    crossed = entries(container_properties(scenario, nodes, 2)["advertised.listeners"])["CROSSED"]
    assert crossed == f"127.0.0.31:{nodes[0].listeners['CLIENT'].port}"


def test_ports_are_published_where_the_native_lab_binds():
    _, nodes = rendered("listeners")
    node = nodes[0]
    bindings = port_bindings(node)
    assert bindings[f"{node.listeners['LISTENER_FRED'].port}/tcp"] == ("127.0.0.1", node.listeners["LISTENER_FRED"].port)
    assert bindings[f"{node.listeners['LISTENER_BOB'].port}/tcp"] == ("127.0.0.11", node.listeners["LISTENER_BOB"].port)
    assert f"{node.controller_port}/tcp" not in bindings  # only the other containers use it
    assert {ip for ip, _ in port_bindings(node, "127.0.0.1").values()} == {"127.0.0.1"}


def test_environment_follows_the_images_convention():
    scenario, nodes = rendered("listeners")
    props = container_properties(scenario, nodes, 0)
    env = environment(props, "abc", "lab123")
    assert env["KAFKA_ADVERTISED_LISTENERS"] == props["advertised.listeners"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == props["controller.quorum.voters"]
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].startswith("LISTENER_BOB:PLAINTEXT")
    assert env["KAFKA_LOG_DIRS"] == DATA_DIR
    assert env["CLUSTER_ID"] == "abc"
    assert env["KAFKA_HEAP_OPTS"] == "-Xms64m -Xmx320m"
    assert env["KAFKA_JVM_PERFORMANCE_OPTS"] == " ".join(PERFORMANCE_OPTS)
    assert env["KAFKA_OPTS"] == "-Dkprobe.lab=lab123"


def test_env_names_decode_back_in_the_image():
    assert env_name("a.b.c") == "KAFKA_A_B_C"
    assert env_name("listener.name.sasl_plain.sasl.enabled.mechanisms") == (
        "KAFKA_LISTENER_NAME_SASL__PLAIN_SASL_ENABLED_MECHANISMS"
    )
    assert property_name(env_name("x.y-z_w")) == "x.y-z_w"
    with pytest.raises(ValueError):
        env_name("Upper.Case")
    with pytest.raises(ValueError):
        env_name("heap.opts")  # the image hands KAFKA_HEAP_OPTS to the JVM, not to the broker


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_survives_the_trip_through_the_environment(name):
    scenario, nodes = rendered(name)
    certs = {
        cert: CertFiles(Path(f"/host/tls/{cert}.keystore.pem"), Path(f"/host/tls/{cert}.pem"), Path("/host/tls/ca.pem"))
        for cert in scenario.certificates
    }
    passwords = {user: f"{user}-pw" for user in scenario.users}
    for node_id in nodes:
        props = container_properties(scenario, nodes, node_id, certs, passwords)
        env = environment(props, "cid", "lab")
        decoded = {property_name(k): v for k, v in env.items() if k.startswith("KAFKA_") and k not in (
            "KAFKA_HEAP_OPTS", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_OPTS")}
        assert decoded == props
        for key, value in props.items():
            if key.endswith("ssl.keystore.location"):
                assert value.startswith(SECRETS_DIR + "/") and value.endswith(".keystore.pem")
            if key.endswith("ssl.truststore.location"):  # a listener with ssl.client.auth (tls: SSL_MTLS)
                assert value == f"{SECRETS_DIR}/ca.pem"


def test_publishing_fallback_only_for_a_missing_address():
    assert address_unavailable(Exception(
        "Ports are not available: exposing port TCP 127.0.0.11:9092 -> 0.0.0.0:0: listen tcp 127.0.0.11:9092: "
        "bind: can't assign requested address"))
    assert address_unavailable(Exception("listen tcp4 127.0.0.31:4000: bind: cannot assign requested address"))
    assert not address_unavailable(Exception("listen tcp4 127.0.0.11:9092: bind: address already in use"))


def test_only_a_local_engine_publishes_on_this_machine():
    for host in (None, "unix:///var/run/docker.sock", "npipe:////./pipe/docker_engine", "tcp://127.0.0.1:2375",
                 "tcp://localhost:2376", "http+unix:///run/user/1000/docker.sock"):
        assert engine_is_local(host), host
    for host in ("tcp://docker:2375", "tcp://10.0.0.5:2376", "ssh://builder@ci.example.com"):
        assert not engine_is_local(host), host


# -- engine detection ----------------------------------------------------------------------
def test_docker_available_is_quick_and_never_raises():
    started = time.monotonic()
    assert isinstance(docker_available(), bool)
    assert time.monotonic() - started < 3


def test_docker_available_false_without_an_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-such.sock'}")
    started = time.monotonic()
    assert docker_available() is False
    assert time.monotonic() - started < 3


def test_docker_available_does_not_hang_on_a_silent_engine(monkeypatch):
    hole = Blackhole("127.0.0.1")  # accepts no connection: a connect just waits
    try:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://{hole.endpoint}")
        started = time.monotonic()
        assert docker_available() is False
        assert time.monotonic() - started < 3
    finally:
        hole.close()


def test_importing_the_backend_loads_neither_sdk():
    code = "import sys, kprobe.lab, kprobe.lab.containers; print(sorted({'docker', 'testcontainers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(DOCKER, reason="needs a machine without a Docker engine")
def test_start_without_an_engine_says_so_and_cleans_up():
    lab = ContainerLab(get_scenario("listeners"))
    with pytest.raises(LabError, match="Docker engine"):
        lab.start()
    assert lab.containers == {} and lab.network is None
    lab.stop()  # idempotent after a failed start


# -- the real thing ------------------------------------------------------------------------
def _labelled(lab_id: str) -> tuple[list, list]:
    from testcontainers.core.docker_client import DockerClient

    client = DockerClient().client
    try:
        selector = {"label": f"kprobe.lab={lab_id}"}
        return client.containers.list(all=True, filters=selector), client.networks.list(filters=selector)
    finally:
        client.close()


def _refused(endpoint: str, within: float = 10.0) -> bool:
    host, _, port = endpoint.rpartition(":")
    deadline = time.monotonic() + within
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
        except ConnectionRefusedError:
            return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


@pytest.mark.docker
def test_listeners_scenario_on_docker(engine):
    from confluent_kafka.admin import AdminClient

    with ContainerLab(get_scenario("listeners")).start() as lab:
        assert len(_labelled(lab.lab_id)[0]) == 1
        bootstrap = lab.bootstrap("LISTENER_FRED")
        port = lab.listener("LISTENER_FRED").port
        md = AdminClient({"bootstrap.servers": bootstrap, "client.id": "kprobe-test"}).list_topics(timeout=10)
        assert {(b.id, b.host, b.port) for b in md.brokers.values()} == {(0, "localhost", port)}
        assert md.cluster_id == lab.cluster_id
        # The image hands the broker's JVM the native lab's options (its PID 1, after the start script's exec).
        jvm = lab.containers[0].exec(["cat", "/proc/1/cmdline"]).output.decode().split("\0")
        assert {*HEAP_OPTS, *PERFORMANCE_OPTS} <= set(jvm) and "kafka.Kafka" in jvm
        endpoints = [lab.real_endpoint(name) for name in lab.scenario.client_listeners]
        lab_id = lab.lab_id
    assert _labelled(lab_id) == ([], [])
    assert all(_refused(ep) for ep in endpoints)


@pytest.mark.docker
def test_three_brokers_on_docker_stop_and_start_a_node(engine):
    from confluent_kafka.admin import AdminClient

    with ContainerLab(get_scenario("three-brokers")).start() as lab:
        admin = AdminClient({"bootstrap.servers": lab.bootstrap_all("CLIENT"), "client.id": "kprobe-test"})
        md = admin.list_topics(timeout=10)
        assert {b.id for b in md.brokers.values()} == {0, 1, 2}
        assert {b.host for b in md.brokers.values()} == {"127.0.0.31", "127.0.0.32", "127.0.0.33"}

        lab.stop_node(2)
        assert _refused(lab.real_endpoint("CLIENT", 2))
        lab.start_node(2)
        socket.create_connection(("127.0.0.33", lab.listener("CLIENT", 2).port), timeout=5).close()
        lab_id = lab.lab_id
    assert _labelled(lab_id) == ([], [])


@pytest.mark.docker
def test_failed_start_leaves_nothing(engine, monkeypatch):
    monkeypatch.setenv("KPROBE_KAFKA_IMAGE", "kprobe-test/no-such-image:0")
    lab = ContainerLab(get_scenario("listeners"))
    with pytest.raises(LabError, match="no-such-image"):
        lab.start()
    assert _labelled(lab.lab_id) == ([], [])
