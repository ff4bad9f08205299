"""docker/: what can be checked without a Docker engine (there is none here).

The Compose playground must be the lab's `listeners` scenario: same listener names, same
protocols, same inter-broker listener, same advertised hosts, bound where the lab binds them.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from kprobe.lab.scenarios import get_scenario

DOCKER = Path(__file__).resolve().parent.parent / "docker"


def _pairs(text: str) -> dict[str, str]:
    return dict(item.split("://", 1) if "://" in item else item.split(":", 1) for item in text.split(","))


def test_compose_playground_is_the_listeners_scenario():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    env = compose["services"]["kafka0"]["environment"]
    scenario = get_scenario("listeners")
    [node] = scenario.nodes
    advertised = _pairs(env["KAFKA_ADVERTISED_LISTENERS"])
    protocols = _pairs(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"])
    assert set(advertised) == {lst.name for lst in node.listeners}
    for lst in node.listeners:
        assert advertised[lst.name].rsplit(":", 1)[0] == lst.advertise.rsplit(":", 1)[0]
        assert protocols[lst.name] == lst.protocol
        if lst.inter_broker:
            assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == lst.name
    assert compose["services"]["kafka0"]["hostname"] == node.hostnames[0] == "kafka0"
    # FRED's and ALICE's ports are published on the host's loopback, as the lab binds FRED on 127.0.0.1
    assert "127.0.0.1:9092:9092" in compose["services"]["kafka0"]["ports"]
    assert compose["services"]["kprobe"]["build"]["target"] == "kprobe"


def test_kubernetes_manifest_parses():
    docs = list(yaml.safe_load_all((DOCKER / "k8s" / "cronjob.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["CronJob", "PersistentVolumeClaim"]
    job = docs[0]["spec"]
    assert job["concurrencyPolicy"] == "Forbid"
    container = job["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["probe", "-b"] and "--publish" in container["args"]


def test_dockerfile_targets():
    text = (DOCKER / "Dockerfile").read_text()
    assert "FROM python:3.12-slim AS kprobe" in text and "AS aggregate" in text
    assert "USER 10001" in text and 'ENTRYPOINT ["kprobe"]' in text
