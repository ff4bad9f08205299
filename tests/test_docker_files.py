"""docker/: what can be checked without running a container (tests/test_docker_images.py runs them on podman).

The Compose playground must be the lab's `listeners` scenario: same listener names, same
protocols, same inter-broker listener, same advertised hosts, bound where the lab binds them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kprobe.lab.scenarios import get_scenario

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"


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
    assert compose["services"]["kprobe"]["build"]["target"] == "kprobe"


def test_compose_ports_and_binds_are_the_seeds_and_the_labs():
    """Ports: the seeds' classic ones, the same the docs show for the lab's (docs/generate.py maps them)."""
    import importlib.util

    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    kafka = compose["services"]["kafka0"]
    env = kafka["environment"]
    binds = {name: hostport.rsplit(":", 1) for name, hostport in _pairs(env["KAFKA_LISTENERS"]).items()}
    advertised = {name: hostport.rsplit(":", 1) for name, hostport in _pairs(env["KAFKA_ADVERTISED_LISTENERS"]).items()}
    spec = importlib.util.spec_from_file_location("docs_generate", DOCKER.parent / "docs" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for name in ("LISTENER_BOB", "LISTENER_FRED", "LISTENER_ALICE"):
        port = str(generate.CLASSIC_PORTS[("listeners", name)])
        # Each listener binds the port it advertises: no mapping hides inside the container.
        assert advertised[name][1] == binds[name][1] == port, name
    # BOB serves the Docker network only (the lab binds it on kafka0's address) and is not published.
    assert binds["LISTENER_BOB"][0] == "kafka0"
    # FRED and ALICE are published on the host's loopback under their own port, as the lab binds
    # FRED on 127.0.0.1: `localhost:9092` on the Docker host is the broker, as FRED advertises.
    fred, alice = (str(generate.CLASSIC_PORTS[("listeners", n)]) for n in ("LISTENER_FRED", "LISTENER_ALICE"))
    assert sorted(kafka["ports"]) == sorted([f"127.0.0.1:{fred}:{fred}", f"127.0.0.1:{alice}:{alice}"])
    assert binds["LISTENER_FRED"][0] == binds["LISTENER_ALICE"][0] == "0.0.0.0"  # reachable through publishing
    # The controller listener is internal to the container, on kafka0 like the voters say.
    assert binds["CONTROLLER"][0] == "kafka0" and env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"0@kafka0:{binds['CONTROLLER'][1]}"


def test_kubernetes_manifest_parses():
    docs = list(yaml.safe_load_all((DOCKER / "k8s" / "cronjob.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["CronJob", "PersistentVolumeClaim"]
    job = docs[0]["spec"]
    assert job["concurrencyPolicy"] == "Forbid"
    container = job["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:2] == ["probe", "-b"] and "--publish" in container["args"]


def dockerfile_stages(text: str) -> dict[str, list[tuple[str, str]]]:
    """Stage name -> (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            name = args.split(" AS ")[-1].strip() if " AS " in args else str(len(stages))
            current = stages.setdefault(name, [])
        current.append((instruction.upper(), args.strip()))
    return stages


def test_dockerfile_targets():
    stages = dockerfile_stages((DOCKER / "Dockerfile").read_text())
    assert list(stages) == ["kprobe", "aggregate"]
    for name, instructions in stages.items():
        base = instructions[0][1].split()[0]
        # Debian's own Python on a pinned release: on Docker Hub for users, made by debootstrap where no registry answers.
        assert base == "debian:bookworm-slim", f"{name}: pin a Debian release, got {base}"
        users = [args for ins, args in instructions if ins == "USER"]
        assert users and users[-1] not in ("0", "root"), f"{name} runs as root"
    probe = dict(stages["kprobe"])
    assert probe["ENTRYPOINT"] == '["kprobe"]'
    # No pyspark unless asked: the install names the EXTRAS build argument, empty by default.
    assert [args for ins, args in stages["kprobe"] if ins == "ARG"] == ['EXTRAS=""', 'PIP_INDEX_OPTIONS=""']
    install = " ".join(args for ins, args in stages["kprobe"] if ins == "RUN")
    assert "python3-venv" in install and "--python /opt/kprobe/bin/python install" in install
    assert "${PIP_INDEX_OPTIONS}" in install
    assert 'requirements.py "$EXTRAS"' in install and "spark" not in install
    agg = dict(stages["aggregate"])
    assert agg["ENTRYPOINT"] == '["kprobe", "aggregate"]'
    runs = " ".join(args for ins, args in stages["aggregate"] if ins == "RUN")
    assert "openjdk-17-jre-headless" in runs and "requirements.py spark" in runs and "maven" in runs
    assert "HOME=/home/kprobe" in agg["ENV"].split()  # Maven and Spark cache jars under a writable home
    for name, instructions in stages.items():
        # The dependencies in a layer before kprobe's code, which comes in a layer of its own, installed alone;
        # the venv keeps no pip (a throwaway environment's installs into it).
        order = [(ins, args) for ins, args in instructions if ins in ("COPY", "RUN")]
        assert "venv --without-pip /opt/kprobe" in " ".join(args for ins, args in order), name
        code = order.index(("COPY", "kprobe ./kprobe"))
        assert any("-r requirements.txt" in args for ins, args in order[:code]), name
        assert [args for ins, args in order[code + 1:] if " install " in args] == [
            args for ins, args in order[code + 1:] if "install --no-cache-dir --no-deps" in args] != [], name


@pytest.mark.parametrize("extras", ["", "serve", "spark,serve"])
def test_the_images_requirements_are_pyprojects(extras):
    tomllib = pytest.importorskip("tomllib", reason="docker/requirements.py runs on the images' Python, 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    done = subprocess.run([sys.executable, str(DOCKER / "requirements.py"), extras], cwd=ROOT, capture_output=True,
                          text=True, timeout=30, check=True)
    named = [dep for name in extras.split(",") if name for dep in project["optional-dependencies"][name]]
    assert done.stdout.splitlines() == project["dependencies"] + named


def test_the_images_requirements_refuse_an_unknown_extra():
    tomllib = pytest.importorskip("tomllib", reason="docker/requirements.py runs on the images' Python, 3.11")
    known = ", ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    done = subprocess.run([sys.executable, str(DOCKER / "requirements.py"), "serve,sparkk"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1 and not done.stdout
    assert done.stderr == f"no extra sparkk in pyproject.toml: give one of {known}\n"


def test_compose_names_its_broker_image_through_a_variable():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert compose["services"]["kafka0"]["image"] == "${KAFKA_IMAGE:-apache/kafka:4.1.1}"


def test_broker_image_entrypoint_names_properties_as_the_lab_does():
    """docker/kafka/run turns KAFKA_* variables into keys the way kprobe.lab.containers.env_name expects."""
    import subprocess

    from kprobe.lab.containers import env_name

    keys = ["listener.name.sasl_plain.sasl.enabled.mechanisms", "x.y-z_w", "node.id"]
    script = (DOCKER / "kafka" / "run").read_text()
    loop = script[script.index("properties=()"):script.index("if ((${#properties[@]}))")]
    out = subprocess.run(["bash", "-c", 'set -euo pipefail\nnot_properties=" KAFKA_OPTS "\n' + loop
                          + 'printf "%s\\n" "${properties[@]}"'],
                         env={env_name(k): "v" for k in keys} | {"KAFKA_OPTS": "-Dx", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    assert sorted(out.split()) == sorted(f"{k}=v" for k in keys)
