"""Kubernetes shapes against real brokers: `kubectl port-forward`s and node ports, relayed by a real HAProxy.

The `port-forward` lab's brokers advertise Strimzi's cluster-internal names; a laptop bootstraps through the
forward to broker 0 and names the shape (PORT_FORWARD_INCOMPLETE, exit 1); the same probe with each name sent
to its own broker's forward (--connect-to, what per-broker forwards and hosts entries would do) passes, and the
report marks every endpoint as remapped. The `nodeport` lab's brokers advertise node addresses with node ports;
one listener puts brokers 1 and 2 on a node name only the inside view resolves (ADVERTISED_SHARED_ADDRESS, exit
1), which --resolve fixes. Every address dialled is in 127.0.0.0/8.
"""

from __future__ import annotations

import json

from cli_runner import run_cli
from report_check import validate

from kprobe.lab.helpers import running_helpers


def probe(*args: str) -> tuple[int, dict]:
    done = run_cli(["probe", "--json", "--timeout", "2", *args])
    return done.returncode, validate(json.loads(done.stdout))


def codes(data: dict) -> list[tuple[str, str, int | None]]:
    return sorted((f["code"], f["severity"], f["node_id"]) for f in data["findings"])


def test_one_port_forward_names_its_shape(port_forward_lab):
    lab = port_forward_lab
    forward = lab.forwards.endpoint("pod0")
    code, data = probe("-b", forward, "--nameserver", lab.nameserver("laptop"))
    assert code == 1
    [boot] = data["bootstraps"]
    assert boot["status"] == "ok" and boot["node_id"] == 0  # the forward leads to broker 0, and it says so
    assert codes(data) == [("ADVERTISED_UNRESOLVABLE", "error", n) for n in range(3)] + [
        ("PORT_FORWARD_INCOMPLETE", "error", None)]
    [shape] = [f for f in data["findings"] if f["code"] == "PORT_FORWARD_INCOMPLETE"]
    assert shape["bootstrap"] == forward
    port = lab.listener("PLAIN", 1).port
    assert (f"`kubectl port-forward -n kafka --address 127.0.0.3 pod/my-cluster-kafka-1 {port}:{port}`"
            in shape["fix"])
    assert "`127.0.0.3 my-cluster-kafka-1.my-cluster-kafka-brokers.kafka.svc`" in shape["fix"]


def test_a_forward_per_broker_fixes_it_and_says_it_is_a_mapping(port_forward_lab):
    lab = port_forward_lab
    mapping = [arg for i in range(3) for arg in (
        "--connect-to", f"{lab.listener('PLAIN', i).advertised}={lab.forwards.endpoint(f'pod{i}')}")]
    code, data = probe("-b", lab.forwards.endpoint("pod0"), "--nameserver", lab.nameserver("laptop"), *mapping)
    assert code == 0, data["findings"]
    assert codes(data) == [("REMAPPED_ENDPOINTS", "info", None)]
    rows = {e["node_id"]: (e["status"], e["remapped"], e["identity"]["node_id"]) for e in data["endpoints"]}
    assert rows == {i: ("reachable", {"to": lab.forwards.endpoint(f"pod{i}"), "host": f"127.0.0.{113 + i}",
                                      "port": lab.forwards.ports[f"pod{i}"], "option": "--connect-to"}, i)
                    for i in range(3)}


def test_node_ports_on_one_node_work_and_are_named(nodeport_lab):
    lab = nodeport_lab
    code, data = probe("-b", lab.bootstrap("NODEPORT"), "--nameserver", lab.nameserver("laptop"))
    assert code == 0, data["findings"]
    assert ("ADVERTISED_SHARED_ADDRESS", "info", None) in codes(data)
    assert {(e["host"], e["port"], e["status"]) for e in data["endpoints"]} == {
        ("node-a.k8s.internal", lab.forwards.ports[f"a-{i}"], "reachable") for i in range(3)}


def test_a_node_only_the_cluster_resolves_is_named_and_resolve_fixes_it(nodeport_lab):
    lab = nodeport_lab
    args = ("-b", lab.bootstrap("NODEPORT_INTERNAL"), "--nameserver", lab.nameserver("laptop"))
    code, data = probe(*args)
    assert code == 1
    # Brokers 1 and 2 advertise one name this network cannot resolve, with one fix: one finding naming both.
    assert [c for c in codes(data) if c[0] != "PORT_DIFFERS_FROM_BOOTSTRAP"] == [
        ("ADVERTISED_SHARED_ADDRESS", "warning", None), ("ADVERTISED_UNRESOLVABLE", "error", None)]
    [unresolved] = [f for f in data["findings"] if f["code"] == "ADVERTISED_UNRESOLVABLE"]
    assert unresolved["node_ids"] == [1, 2]
    assert unresolved["endpoints"] == [f"node-b.k8s.internal:{lab.forwards.ports[f'b-int-{i}']}"
                                       for i in (1, 2)]
    assert all(f"{hostport} (broker {i})" in unresolved["message"]
               for i, hostport in zip((1, 2), unresolved["endpoints"], strict=True))
    assert data["summary"]["usable"] == 1
    [shape] = [f for f in data["findings"] if f["code"] == "ADVERTISED_SHARED_ADDRESS"]
    assert shape["endpoint"] == "node-b.k8s.internal" and "preferredNodePortAddressType" in shape["fix"]

    code, data = probe(*args, "--resolve", "node-b.k8s.internal=127.0.0.126")
    assert code == 0, data["findings"]
    remapped = {e["node_id"]: e["remapped"] for e in data["endpoints"]}
    assert remapped == {0: None, **{i: {"to": lab.forwards.endpoint(f"b-int-{i}"), "host": "127.0.0.126",
                                        "port": lab.forwards.ports[f"b-int-{i}"], "option": "--resolve"}
                                    for i in (1, 2)}}
    assert "REMAPPED_ENDPOINTS" in {f["code"] for f in data["findings"]}


def test_the_forwards_are_one_helper_and_lab_up_says_how_to_use_them(port_forward_lab):
    lab = port_forward_lab
    assert len(running_helpers(lab.lab_id)) == 1  # one HAProxy for the three forwards; the session counts leftovers
    lines = lab.describe()
    assert any(line.startswith("forward pod1 at 127.0.0.114:") and "pod/my-cluster-kafka-1" in line for line in lines)
    tries = [line for line in lines if line.startswith("try: ")]
    assert any(f"--connect-to {lab.listener('PLAIN', 2).advertised}={lab.forwards.endpoint('pod2')}" in line
               for line in tries)
