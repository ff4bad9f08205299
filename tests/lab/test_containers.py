"""The testcontainers backend: its configuration here, the real thing where Docker answers."""

from __future__ import annotations

import time

import pytest

from kprobe.lab.base import Blackhole, Impostor, render
from kprobe.lab.containers import container_properties, docker_available, environment
from kprobe.lab.scenarios import get_scenario

DOCKER = docker_available()
needs_docker = pytest.mark.skipif(not DOCKER, reason="no Docker engine answers (testcontainers backend needs one)")


def rendered(name: str):
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


def test_listeners_inside_a_container():
    scenario, nodes = rendered("listeners")
    props = container_properties(scenario, nodes, 0)
    fred = nodes[0].listeners["LISTENER_FRED"].port
    alice = nodes[0].listeners["LISTENER_ALICE"].port
    bob = nodes[0].listeners["LISTENER_BOB"].port
    assert all("://0.0.0.0:" in listener for listener in props["listeners"].split(","))
    advertised = props["advertised.listeners"].split(",")
    assert f"LISTENER_FRED://localhost:{fred}" in advertised
    assert f"LISTENER_ALICE://never-gonna-give-you-up:{alice}" in advertised
    assert f"LISTENER_BOB://kafka0:{bob}" in advertised
    assert props["controller.quorum.voters"] == f"0@kafka0:{nodes[0].controller_port}"
    env = environment(props, "abc")
    assert env["KAFKA_ADVERTISED_LISTENERS"] == props["advertised.listeners"]
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].startswith("LISTENER_BOB:PLAINTEXT")
    assert env["CLUSTER_ID"] == "abc"


def test_three_brokers_use_docker_names_among_themselves():
    scenario, nodes = rendered("three-brokers")
    for node_id in (0, 1, 2):
        props = container_properties(scenario, nodes, node_id)
        voters = props["controller.quorum.voters"].split(",")
        assert [v.split("@")[1].split(":")[0] for v in voters] == ["kafka0", "kafka1", "kafka2"]
        internal = next(a for a in props["advertised.listeners"].split(",") if a.startswith("INTERNAL://"))
        assert internal == f"INTERNAL://kafka{node_id}:{nodes[node_id].listeners['INTERNAL'].port}"
        client = next(a for a in props["advertised.listeners"].split(",") if a.startswith("CLIENT://"))
        assert client == f"CLIENT://127.0.0.{31 + node_id}:{nodes[node_id].listeners['CLIENT'].port}"


def test_docker_available_is_quick_and_never_raises():
    started = time.monotonic()
    assert docker_available() in (True, False)
    assert time.monotonic() - started < 5


@pytest.mark.docker
@needs_docker
def test_listeners_scenario_on_docker():
    from confluent_kafka.admin import AdminClient

    from kprobe.lab.containers import ContainerLab

    with ContainerLab(get_scenario("listeners")).start() as lab:
        bootstrap = lab.bootstrap("LISTENER_FRED")
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
        port = lab.listener("LISTENER_FRED").port
        assert {(b.id, b.host, b.port) for b in md.brokers.values()} == {(0, "localhost", port)}
        lab_id = lab.lab_id
    import docker

    client = docker.from_env()
    assert client.containers.list(all=True, filters={"label": f"kprobe.lab={lab_id}"}) == []


@pytest.mark.docker
@needs_docker
def test_three_brokers_on_docker():
    from kprobe.lab.containers import ContainerLab
    from kprobe.wire import fetch_metadata

    with ContainerLab(get_scenario("three-brokers")).start() as lab:
        ip, port = lab.real_endpoint("CLIENT", 0).rsplit(":", 1)
        meta = fetch_metadata(ip, int(port), timeout=10)
        assert sorted(b.node_id for b in meta.brokers) == [0, 1, 2]
