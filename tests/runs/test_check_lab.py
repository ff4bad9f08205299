"""`kprobe check`'s predictions against real brokers: what it says before deployment is what clients meet.

Two proofs, both on the native lab's real Kafka brokers:
- The seeds' Compose file and this repository's docker/compose.yaml run on the lab with their own
  listener settings (kprobe.lab.from_config: each service a node on 127.0.0.x, its Compose names in a
  DNS view standing for the Compose network, each published port a forward on the host's loopback
  standing for the Docker host). For each network and each listener a client there can bootstrap to,
  the prediction `kprobe check` prints equals the endpoint status `kprobe probe` observes from a client
  on that network: no hand-written expectation in between.
- `kprobe check --probe` on a running broker's own server.properties sets each prediction beside what
  its own probe run observed, and they agree.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest
from cli_runner import run_cli

from kprobe.check.deployments import read_files
from kprobe.lab.from_config import forward_name, scenario_from
from kprobe.lab.native import NativeLab, running_jvms

pytestmark = pytest.mark.lab  # each proof starts real brokers

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = {
    "seeds": ROOT / "tests" / "data" / "configs" / "rmoff-kafka-listeners" / "docker-compose.yml",
    "playground": ROOT / "docker" / "compose.yaml",
}
# A prediction and the probe's endpoint status that bears it out.
OBSERVED = {"works": "reachable", "unresolvable": "unresolvable", "unreachable": "unreachable"}


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` from the repository's root, run by kprobe.cli.main in this process (tests/support/cli_runner.py)."""
    return run_cli(args, cwd=ROOT)


def lab_bootstrap(lab: NativeLab, vantage: str, broker: str, node_id: int, listener: dict) -> str:
    """Where a client of that network bootstraps on the lab: the Compose name and the listener's lab port, or
    the forward standing for the published port on the Docker host."""
    if vantage == "compose-network":
        return f"{broker}:{lab.listener(listener['name'], node_id).port}"
    publish = listener["published"][0]
    return f"localhost:{lab.forward_ports[forward_name(node_id, publish['host_port'])]}"


@pytest.mark.parametrize("name", sorted(COMPOSE_FILES))
def test_predictions_per_network_are_what_a_probe_observes(name):
    path = COMPOSE_FILES[name]
    [deployment] = read_files([str(path)])
    lab = NativeLab(scenario_from(deployment, name=f"from-{name}")).start()
    try:
        compared = []
        # The Docker host's resolver (its view knows localhost, no Compose name) is "here" for the prediction.
        here = lab.nameserver("docker-host")
        done = kprobe("check", str(path), "--nameserver", here, "--json")
        assert done.returncode == 1, done.stderr  # LISTENER_ALICE, in both files
        report = json.loads(done.stdout)
        [broker] = report["deployments"][0]["brokers"]
        for listener in broker["listeners"]:
            for reach in listener["reach"]:
                if reach["status"] == "no_bootstrap":
                    continue  # no client of that network can reach this listener: nothing to observe
                vantage = reach["vantage"]
                boot = lab_bootstrap(lab, vantage, broker["name"], broker["node_id"], listener)
                probe = kprobe("probe", "-b", boot, "--nameserver", lab.nameserver(vantage), "--json",
                               "--timeout", "3s")
                observed = json.loads(probe.stdout)
                [bootstrap] = observed["bootstraps"]
                assert bootstrap["status"] == "ok", (vantage, listener["name"], bootstrap)
                [endpoint] = [e for e in observed["endpoints"] if e["node_id"] == broker["node_id"]]
                compared.append((listener["name"], vantage, reach["status"], endpoint["status"]))
        mismatched = [c for c in compared if OBSERVED.get(c[2]) != c[3]]
        assert not mismatched, f"predicted vs observed (listener, network, predicted, observed): {compared}"
        # Every listener a client can reach was compared, on both networks where it has a way in.
        assert {(c[0], c[1]) for c in compared} == {
            ("LISTENER_BOB", "compose-network"), ("LISTENER_FRED", "compose-network"),
            ("LISTENER_ALICE", "compose-network"), ("LISTENER_FRED", "docker-host"),
            ("LISTENER_ALICE", "docker-host")}
        assert ("LISTENER_FRED", "docker-host", "works", "reachable") in compared
        assert ("LISTENER_FRED", "compose-network", "unreachable", "unreachable") in compared
    finally:
        lab.stop()
    assert running_jvms(lab.lab_id) == []


@pytest.mark.labs("listeners")
def test_check_probe_sets_prediction_beside_observation(listeners_lab):
    """The lab broker's own server.properties, checked and probed through the Docker network's view."""
    props = listeners_lab.node_dir(0) / "server.properties"
    view = listeners_lab.nameserver("docker")
    done = kprobe("check", str(props), "--probe", "--nameserver", view, "--json", "--timeout", "3s")
    assert done.returncode == 1, done.stderr  # ALICE's name resolves nowhere: predicted, then seen
    report = json.loads(done.stdout)
    jsonschema.validate(report, json.loads(kprobe("schema", "--check").stdout))
    jsonschema.validate(report["probe"], json.loads(kprobe("schema").stdout))
    seen = {o["listener"]: o for o in report["observations"]}
    assert set(seen) == {"LISTENER_BOB", "LISTENER_FRED", "LISTENER_ALICE"}
    assert all(o["agrees"] is True for o in seen.values()), seen
    assert (seen["LISTENER_ALICE"]["predicted"], seen["LISTENER_ALICE"]["observed"]) == ("unresolvable",
                                                                                         "unresolvable")
    assert seen["LISTENER_FRED"]["observed"] == "reachable"
    assert seen["LISTENER_BOB"]["advertised"] == listeners_lab.listener("LISTENER_BOB").advertised
    assert [f["code"] for f in report["findings"]] == ["ADVERTISED_UNRESOLVABLE"]
    text = kprobe("check", str(props), "--probe", "--nameserver", view, "--no-color", "--timeout", "3s").stdout
    assert "Prediction and observation, probed from here:" in text
    assert "LISTENER_ALICE" in text and "agrees" in text and "DIFFERS" not in text
