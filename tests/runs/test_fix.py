"""`kprobe fix` end to end on real brokers: the seeds' Docker case, fixed, applied, restaged and probed again.

A Compose file whose broker advertises only its Compose name (kafka0:29092) with that port published: clients
in the Compose network work, clients on the Docker host bootstrap through the published port and then fail on
the name. Both networks are staged by kprobe.lab.from_config (a DNS view each, the published port a forward on
127.0.0.1), each probes, `kprobe fix` writes the change from the two reports, `patch -p0` applies it, the
patched file is staged again and both networks probe again: the host's gap closed, the Compose network kept.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli

from kprobe.check.deployments import read_files
from kprobe.check.listeners import Deployment
from kprobe.lab.from_config import forward_name, scenario_from
from kprobe.lab.native import NativeLab
from kprobe.records import replace

pytestmark = pytest.mark.lab

COMPOSE = """services:
  kafka0:
    image: "confluentinc/cp-kafka:7.6.0"
    ports:
      - '29092:29092'
    environment:
      KAFKA_NODE_ID: 0
      KAFKA_PROCESS_ROLES: broker,controller
      KAFKA_CONTROLLER_QUORUM_VOTERS: 0@kafka0:29093
      KAFKA_LISTENERS: PLAINTEXT://0.0.0.0:29092,CONTROLLER://kafka0:29093
      KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka0:29092
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
      KAFKA_CONTROLLER_LISTENER_NAMES: CONTROLLER
      KAFKA_INTER_BROKER_LISTENER_NAME: PLAINTEXT
"""


def staged(dep: Deployment, name: str) -> NativeLab:
    """The deployment on the lab, each listener on the file's own port (so the reports' endpoints are the file's)."""
    scenario = scenario_from(dep, name=name)
    ports = {(b.node_id, lst.name): lst.bind.port for b in dep.brokers for lst in b.listeners if lst.bind}
    nodes = tuple(replace(node, listeners=tuple(replace(spec, port=ports[(node.node_id, spec.name)])
                                                for spec in node.listeners)) for node in scenario.nodes)
    return NativeLab(replace(scenario, nodes=nodes)).start()


def probe(cwd: Path, lab: NativeLab, view: str, bootstrap: str, vantage: str) -> subprocess.CompletedProcess[str]:
    return run_cli(("probe", "-b", bootstrap, "--nameserver", lab.nameserver(view), "--vantage", vantage, "--json",
                    "--timeout", "3s"), cwd=cwd)


def test_the_seeds_docker_case_fixed_applied_and_probed_again(tmp_path):
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(COMPOSE)
    [dep] = read_files([str(compose)])
    lab = staged(dep, "fix-before")
    try:
        host_boot = f"localhost:{lab.forward_ports[forward_name(0, 29092)]}"
        host = probe(tmp_path, lab, "docker-host", host_boot, "host")
        inside = probe(tmp_path, lab, "compose-network", "kafka0:29092", "inside")
    finally:
        lab.stop()
    assert host.returncode == 1, host.stdout  # the bootstrap answers, kafka0 does not resolve on the host
    assert inside.returncode == 0, inside.stdout
    (tmp_path / "host.json").write_text(host.stdout)
    (tmp_path / "inside.json").write_text(inside.stdout)

    done = run_cli(("fix", "host.json", "inside.json", "--config", "docker-compose.yml", "--json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    document = json.loads(done.stdout)
    [edit] = document["edits"]
    assert (edit["action"], edit["listener"], edit["publish"]) == ("add", "HOST", int(edit["new"].rpartition(":")[2]))
    subprocess.run(["patch", "-p0"], input=document["patch"], text=True, cwd=tmp_path, check=True,
                   capture_output=True)

    [patched] = read_files([str(compose)])
    lab = staged(patched, "fix-after")
    try:
        new_port = edit["publish"]
        host_after = probe(tmp_path, lab, "docker-host", f"localhost:{lab.forward_ports[forward_name(0, new_port)]}",
                           "host")
        inside_after = probe(tmp_path, lab, "compose-network", "kafka0:29092", "inside")
    finally:
        lab.stop()
    assert host_after.returncode == 0, host_after.stdout  # the host's gap closed
    assert inside_after.returncode == 0, inside_after.stdout  # the Compose network kept
    [endpoint] = json.loads(host_after.stdout)["endpoints"]
    assert (endpoint["host"], endpoint["status"]) == ("localhost", "reachable")
