"""--resolve and --connect-to against the real teaching broker: a fix tried before it is made.

LISTENER_ALICE advertises `never-gonna-give-you-up`, which resolves nowhere: the probe names the
gap (exit 1). The same probe with the mapping that a hosts entry or a port-forward would give
passes (exit 0), and every output marks the endpoint as remapped, so a passing "what if" is
never mistaken for today's truth. Every mapping points into 127.0.0.0/8.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator

import pytest
from cli_runner import run_cli
from real_clients import Relay
from report_check import validate

ALICE_NAME = "never-gonna-give-you-up"


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["probe", "--timeout", "2", *args])


def probe_json(*args: str) -> tuple[int, dict]:
    done = probe("--json", *args)
    data = json.loads(done.stdout)
    validate(data)
    return done.returncode, data


@pytest.fixture
def alice(listeners_lab) -> tuple[str, str, int]:
    """(bootstrap, ALICE's real ip, ALICE's port): the port is advertised unchanged."""
    real = listeners_lab.real_endpoint("LISTENER_ALICE")
    ip, port = real.rsplit(":", 1)
    return real, ip, int(port)


@pytest.fixture
def forward(alice) -> Iterator[Relay]:
    """A forward on 127.0.0.1 to ALICE, as `kubectl port-forward` or `ssh -L` gives."""
    fwd = Relay(("127.0.0.1", 0), (alice[1], alice[2]))
    yield fwd
    fwd.close()


def test_without_a_mapping_alice_is_a_gap(alice):
    code, data = probe_json("-b", alice[0])
    assert code == 1
    assert "ADVERTISED_UNRESOLVABLE" in {f["code"] for f in data["findings"]}
    assert [e["remapped"] for e in data["endpoints"]] == [None]


def test_resolve_maps_the_name_and_the_report_says_so(alice):
    real, ip, port = alice
    code, data = probe_json("-b", real, "--resolve", f"{ALICE_NAME}={ip}")
    assert code == 0, data["findings"]
    (endpoint,) = data["endpoints"]
    assert (endpoint["host"], endpoint["port"], endpoint["status"]) == (ALICE_NAME, port, "reachable")
    assert endpoint["remapped"] == {"to": f"{ip}:{port}", "host": ip, "port": port, "option": "--resolve"}
    assert endpoint["identity"]["status"] == "match"  # the broker itself answers there
    assert data["settings"]["resolve"] == {ALICE_NAME: ip}
    (remapped,) = [f for f in data["findings"] if f["code"] == "REMAPPED_ENDPOINTS"]
    assert remapped["severity"] == "info"
    assert f"{ALICE_NAME}:{port} -> {ip}:{port} (--resolve)" in remapped["message"]
    assert "holds only where the network maps them so" in remapped["message"]
    text = probe("-b", real, "--resolve", f"{ALICE_NAME.upper()}={ip}")  # names match case-insensitively
    assert text.returncode == 0, text.stdout
    assert f"{ALICE_NAME}:{port} -> {ip}:{port} (--resolve)" in text.stdout
    assert "REMAPPED_ENDPOINTS" in text.stdout
    prom = probe("-b", real, "--resolve", f"{ALICE_NAME}={ip}", "--format", "prometheus")
    assert prom.returncode == 0
    (up,) = [ln for ln in prom.stdout.splitlines() if ln.startswith("kprobe_endpoint_up{")]
    assert f'host="{ALICE_NAME}"' in up and f'remapped_to="{ip}:{port}"' in up and up.endswith(" 1")


def test_connect_to_a_port_forward(alice, forward):
    # The port-forward case: another port on another loopback address leads to the broker.
    real, _, port = alice
    target = f"127.0.0.1:{forward.port}"
    code, data = probe_json("-b", real, "--connect-to", f"{ALICE_NAME}:{port}={target}")
    assert code == 0, data["findings"]
    (endpoint,) = data["endpoints"]
    assert endpoint["remapped"] == {"to": target, "host": "127.0.0.1", "port": forward.port,
                                    "option": "--connect-to"}
    assert [(t["address"], t["status"]) for t in endpoint["tcp"]] == [("127.0.0.1", "ok")]
    assert endpoint["identity"]["status"] == "match"  # identity went through the forward too
    assert forward.wait_accepted(2) >= 2  # the TCP check and the identity check both dialled the forward
    assert data["settings"]["connect_to"] == {f"{ALICE_NAME}:{port}": target}
    assert "REMAPPED_ENDPOINTS" in {f["code"] for f in data["findings"]}


def test_connect_to_a_closed_port_stays_a_gap(alice):
    # A mapping that does not work is judged like any endpoint: the "what if" fails.
    real, _, port = alice
    with socket.create_server(("127.0.0.1", 0)) as closed:
        free = closed.getsockname()[1]
    code, data = probe_json("-b", real, "--connect-to", f"{ALICE_NAME}:{port}=127.0.0.1:{free}")
    assert code == 1
    assert "ADVERTISED_REFUSED" in {f["code"] for f in data["findings"]}
    assert data["endpoints"][0]["remapped"]["to"] == f"127.0.0.1:{free}"


def test_a_mapping_for_another_endpoint_changes_nothing(alice):
    real, ip, port = alice
    code, data = probe_json("-b", real, "--connect-to", f"{ALICE_NAME}:1={ip}:{port}",
                            "--resolve", f"someone-else={ip}")
    assert code == 1
    assert data["endpoints"][0]["remapped"] is None
    assert "REMAPPED_ENDPOINTS" not in {f["code"] for f in data["findings"]}
    prom = probe("-b", real, "--resolve", f"someone-else={ip}", "--format", "prometheus")
    assert 'remapped_to="' not in prom.stdout and "kprobe_endpoint_up{" in prom.stdout


def test_list_takes_the_mappings_and_marks_the_broker_line(alice, forward):
    """`kprobe list --reachability` dials what probe would: the mapped address, said on the broker's line."""
    real, _, port = alice
    args = ["list", "-b", real, "--reachability", "--timeout", "2"]
    before = run_cli(args)
    assert before.returncode == 1 and "[UNREACHABLE from here: does not resolve" in before.stdout, before.stdout
    target = f"127.0.0.1:{forward.port}"
    after = run_cli([*args, "--connect-to", f"{ALICE_NAME}:{port}={target}"])
    assert after.returncode == 0, after.stdout + after.stderr
    assert f"  broker 0 at {ALICE_NAME}:{port}" in after.stdout
    assert f"[reachable from here; dialled at {target} by --connect-to]" in after.stdout
    assert forward.wait_accepted(1) >= 1  # through the forward, not around it
    listing = json.loads(run_cli([*args, "-J", "--connect-to", f"{ALICE_NAME}:{port}={target}"]).stdout)
    [reach] = listing["reachability"]
    assert reach["remapped"]["to"] == target and reach["status"] == "reachable"
