"""The default path: resolving as the clients on this machine do (getaddrinfo + hosts file).

Each test runs kprobe in a private mount namespace whose /etc/resolv.conf points at a lab DNS
server on loopback and whose /etc/hosts is the test's (see tests/support/system_network.py).
"""

from __future__ import annotations

import json

from report_check import validate
from system_network import kprobe, system_network


def run(prefix: list[str], *args: str) -> tuple[int, dict]:
    done = kprobe(prefix, "probe", "--json", "--timeout", "2", *args)
    data = json.loads(done.stdout)
    validate(data)
    return done.returncode, data


def test_system_resolver_says_nxdomain(listeners_lab, tmp_path):
    with system_network(tmp_path, {"kafka0": ("127.0.0.11",)}) as prefix:
        code, data = run(prefix, "-b", listeners_lab.real_endpoint("LISTENER_ALICE"))
    assert code == 1
    dns = data["endpoints"][0]["dns"]
    assert data["vantage"]["resolver"]["kind"] == "system"
    assert dns["source"] == "system" and dns["status"] == "nxdomain"
    assert dns["detail"]["status"] == "nxdomain"  # dnspython, through the same resolv.conf
    assert [f["code"] for f in data["findings"]] == ["ADVERTISED_UNRESOLVABLE"]


def test_system_resolver_resolves_through_dns(listeners_lab, tmp_path):
    with system_network(tmp_path, {"kafka0": ("127.0.0.11",)}) as prefix:
        code, data = run(prefix, "-b", listeners_lab.real_endpoint("LISTENER_BOB"))
    assert code == 0, data["findings"]
    dns = data["endpoints"][0]["dns"]
    assert dns["addresses"] == ["127.0.0.11"] and dns["detail"]["ttl"] == 60
    assert dns["in_hosts_file"] is False


def test_resolved_only_via_hosts_file(listeners_lab, tmp_path):
    with system_network(tmp_path, {}, hosts=["127.0.0.11 kafka0"]) as prefix:
        code, data = run(prefix, "-b", listeners_lab.real_endpoint("LISTENER_BOB"))
    assert code == 0  # it works, here
    dns = data["endpoints"][0]["dns"]
    assert dns["in_hosts_file"] and dns["addresses"] == ["127.0.0.11"] and dns["detail"]["status"] == "nxdomain"
    assert [(f["code"], f["severity"]) for f in data["findings"]] == [("RESOLVED_ONLY_VIA_HOSTS_FILE", "warning")]


def test_three_names_only_in_the_hosts_file_are_one_finding(nodeport_lab, tmp_path):
    """One set-up (this machine's hosts file) to change, said once, listing every name."""
    lab = nodeport_lab
    with system_network(tmp_path, {}, hosts=["127.0.0.125 node-a.k8s.internal",
                                             "127.0.0.126 node-b.k8s.internal"]) as prefix:
        code, data = run(prefix, "-b", lab.bootstrap("NODEPORT_INTERNAL"))
    assert code == 0, data["findings"]
    [found] = [f for f in data["findings"] if f["code"] == "RESOLVED_ONLY_VIA_HOSTS_FILE"]
    assert found["node_id"] is None and found["endpoint"] is None
    assert found["message"].startswith("node-a.k8s.internal (broker 0), node-b.k8s.internal (broker 1), "
                                       "node-b.k8s.internal (broker 2) resolve here only through the hosts file")
    assert "Publish node-a.k8s.internal, node-b.k8s.internal in DNS" in found["fix"]


def test_system_and_a_given_nameserver_disagree(listeners_lab, tmp_path):
    with system_network(tmp_path, {"kafka0": ("127.0.0.11",)}) as prefix:
        code, data = run(prefix, "-b", listeners_lab.real_endpoint("LISTENER_BOB"),
                         "--compare-nameserver", listeners_lab.nameserver("host"))
        _, agree = run(prefix, "-b", listeners_lab.real_endpoint("LISTENER_BOB"),
                       "--compare-nameserver", listeners_lab.nameserver("docker"))
    assert code == 0
    assert [f["code"] for f in data["findings"]] == ["DNS_VIEWS_DISAGREE"]
    assert "through the system resolver" in data["findings"][0]["message"]
    assert agree["findings"] == []
