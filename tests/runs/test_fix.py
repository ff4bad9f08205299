"""`kprobe fix` end to end on real brokers: the seeds' Docker case, fixed, applied, restaged and probed again; and the
what-if's client settings (a report's recorded ones, or -F/-X), which a SASL or TLS bootstrap needs.

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
from fix_reports import COMPOSE, report

from kprobe.check.deployments import read_files
from kprobe.check.listeners import Deployment
from kprobe.lab.from_config import forward_name, scenario_from
from kprobe.lab.native import NativeLab
from kprobe.records import replace
from kprobe.runs.fix import fix_run


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


@pytest.mark.lab
def test_the_seeds_docker_case_fixed_applied_and_probed_again(tmp_path):
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(COMPOSE)
    [dep] = read_files([str(compose)])
    lab = staged(dep, "fix-before")
    try:
        host_boot = f"localhost:{lab.forward_ports[forward_name(0, 29092)]}"
        host = probe(tmp_path, lab, "docker-host", host_boot, "host")
        inside = probe(tmp_path, lab, "compose-network", "kafka0:29092", "inside")
        assert host.returncode == 1, host.stdout  # the bootstrap answers, kafka0 does not resolve on the host
        assert inside.returncode == 0, inside.stdout
        (tmp_path / "host.json").write_text(host.stdout)
        (tmp_path / "inside.json").write_text(inside.stdout)
        # --verify with "here" the Docker host: the what-if probes through the docker-host view's nameserver. One
        # run gives the change ticket on stdout and the JSON document in fix.json.
        verified = run_cli(("fix", "host.json", "inside.json", "--config", "docker-compose.yml", "--verify",
                            "--vantage", "host", "-n", lab.nameserver("docker-host"), "--format", "markdown",
                            "-o", "fix.json"), cwd=tmp_path)
    finally:
        lab.stop()
    assert verified.returncode == 0, verified.stderr + verified.stdout
    document = json.loads((tmp_path / "fix.json").read_text())
    [edit] = document["edits"]
    assert (edit["action"], edit["listener"], edit["publish"]) == ("add", "HOST", int(edit["new"].rpartition(":")[2]))
    proofs = {v["vantage"]: v for v in document["vantages"]}
    assert document["verified"] and (proofs["host"]["before"], proofs["host"]["after"]) == ("gap", "closed")
    # The proof is a real probe from the view: the gap endpoint dialled at the address that works there today.
    assert f"the what-if probed from here (host): kafka0:29092 at {host_boot} reachable, ok" in proofs["host"]["how"]
    assert proofs["host"]["command"] == f"kprobe probe -b {host_boot} --connect-to kafka0:29092={host_boot}"
    # The new port is not open before the restart: said, with the probe to run after it.
    after_restart = f"after the restart run there: kprobe probe -b {edit['new']}"
    assert "not open before the restart" in proofs["host"]["how"] and after_restart in proofs["host"]["how"]
    # The Compose network is not here: not probed, its listener unchanged, and the exact command to run there.
    assert (proofs["inside"]["before"], proofs["inside"]["after"]) == ("ok", "ok")
    assert "not probed from here (host)" in proofs["inside"]["how"]
    assert proofs["inside"]["command"] == "kprobe probe -b kafka0:29092"
    # The change ticket carries the diff, the steps and the proof table.
    ticket = verified.stdout
    assert ticket.startswith("## kprobe fix\n")
    assert f"```diff\n{document['patch'].rstrip()}\n```" in ticket
    assert f"### Outside the files\n\n- clients of host: bootstrap at {edit['new']}" in ticket
    assert "| vantage | before | after | how | what-if there |" in ticket
    assert "| `host` | gap | closed | " in ticket and "| `inside` | ok | ok (unchanged) | " in ticket

    # From a vantage that is neither: the host's gap is not proven here, with its what-if command; exit 1.
    elsewhere = run_cli(("fix", "host.json", "inside.json", "--config", "docker-compose.yml", "--verify",
                         "--vantage", "laptop"), cwd=tmp_path)
    assert elsewhere.returncode == 1, elsewhere.stderr + elsewhere.stdout
    assert "host (on the Docker host): gap -> not proven here" in elsewhere.stdout
    assert f"what-if there: kprobe probe -b {host_boot} --connect-to kafka0:29092={host_boot}" in elsewhere.stdout

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
    # What --verify predicted is what the real probes meet: the host's gap closed (probed as the command said, at
    # the new endpoint), the Compose network kept.
    assert host_after.returncode == 0, host_after.stdout
    assert inside_after.returncode == 0, inside_after.stdout
    assert {"closed": "ok", "ok": "ok"}[proofs["host"]["after"]] == json.loads(host_after.stdout)["summary"]["status"]
    assert proofs["inside"]["after"] == json.loads(inside_after.stdout)["summary"]["status"]
    [endpoint] = json.loads(host_after.stdout)["endpoints"]
    assert (endpoint["host"], endpoint["status"]) == ("localhost", "reachable")


def sasl_reports() -> list[tuple[str, object]]:
    """The seeds' Docker case as a SASL client saw it: its recorded client settings, the password redacted."""
    host = replace(report("host", boots={"localhost:29092": 0}, seen={(0, "kafka0", 29092): "unresolvable"}),
                   settings={"properties": {"bootstrap.servers": "localhost:29092", "security.protocol": "SASL_PLAINTEXT",
                                            "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                                            "sasl.password": "[redacted]"}})
    inside = report("inside", boots={"kafka0:29092": 0}, seen={(0, "kafka0", 29092): "reachable"})
    return [("host.json", host), ("inside.json", inside)]


def test_the_what_if_of_a_report_probed_with_a_secret_needs_the_client_file(tmp_path):
    """A report never holds a secret, so the what-if of one probed with a password cannot run from the report
    alone: not proven, saying to give -F; given -F, its command carries it (and no secret)."""
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(COMPOSE)
    probed = []
    done = fix_run(sasl_reports(), [str(compose)], verify=True, vantage="host", probe=probed.append)
    proofs = {p.vantage: p for p in done.proofs}
    assert probed == [] and proofs["host"].after == "not proven"
    assert "probed with sasl.password, a secret a report never holds" in proofs["host"].how
    assert proofs["host"].command == ("kprobe probe -b localhost:29092 -X security.protocol=SASL_PLAINTEXT "
                                      "-X sasl.mechanism=PLAIN -X sasl.username=alice "
                                      "--connect-to kafka0:29092=localhost:29092")
    given = fix_run(sasl_reports(), [str(compose)], verify=True, vantage="laptop", prop_files=["client.properties"])
    command = {p.vantage: p.command for p in given.proofs}["host"]
    assert command == "kprobe probe -b localhost:29092 -F client.properties --connect-to kafka0:29092=localhost:29092"


def test_the_what_if_takes_the_reports_client_file_as_given_and_says_when_it_is_not_here(tmp_path, monkeypatch):
    """A report keeps its -F files and -X pairs as given: the what-if reads the same file again where it is (its
    secrets stay in it), and says to give -F where it is not."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docker-compose.yml").write_text(COMPOSE)
    (tmp_path / "client.properties").write_text("security.protocol=SASL_PLAINTEXT\nsasl.password=s3cret\n")
    [host, inside] = sasl_reports()
    given = {"properties": {"security.protocol": "SASL_PLAINTEXT", "sasl.password": "[redacted]",
                            "client.id": "app"},
             "properties_files": ["client.properties"], "properties_pairs": {"client.id": "app"}}
    reports = [(host[0], replace(host[1], settings=given)), inside]
    done = fix_run(reports, ["docker-compose.yml"], verify=True, vantage="laptop")
    command = {p.vantage: p.command for p in done.proofs}["host"]
    assert command == ("kprobe probe -b localhost:29092 -F client.properties -X client.id=app "
                       "--connect-to kafka0:29092=localhost:29092")
    (tmp_path / "client.properties").unlink()
    probed = []
    gone = fix_run(reports, ["docker-compose.yml"], verify=True, vantage="host", probe=probed.append)
    proof = {p.vantage: p for p in gone.proofs}["host"]
    assert probed == [] and proof.after == "not proven"
    assert "probed with -F client.properties, not found here" in proof.how
