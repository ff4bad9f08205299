"""`kprobe fix` on a Strimzi Kafka resource: the per-broker advertised overrides or a listener added, the patch
applied with `patch -p0` and `git apply -p0`, and `kprobe check` on the result serving the reported networks.

No lab: the lab stages Compose and server.properties brokers, not a Kubernetes operator.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli
from fix_apply import changed_lines, fix_apply, reach
from fix_reports import report

from kprobe.output.json_report import render

ROOT = Path(__file__).resolve().parents[2]
STRIMZI = ROOT / "tests" / "data" / "configs" / "strimzi"
POD = "my-cluster-kafka-{}.my-cluster-kafka-brokers.kafka.svc"

# An external listener whose brokers advertise their cluster-internal names: Strimzi's nodeport listener with
# the override pointing back inside (a copy-paste from the internal listener), which outside clients cannot resolve.
NODEPORT = """apiVersion: kafka.strimzi.io/v1beta2
kind: Kafka
metadata:
  name: my-cluster
  namespace: kafka
spec:
  kafka:
    replicas: 3
    listeners:
      - name: plain
        port: 9092
        type: internal
        tls: false
      # for the laptops on the office network
      - name: external
        port: 9094
        type: nodeport
        tls: false
        configuration:
          brokers:
            - broker: 0
              advertisedHost: {h0}
              advertisedPort: {p0}   # node port of broker 0
            - broker: 1
              advertisedHost: {h1}
              advertisedPort: {p1}
            - broker: 2
              advertisedHost: {h2}
              advertisedPort: {p2}
    config:
      offsets.topic.replication.factor: 3
"""


def nodeport(hosts: list[str], ports: list[int]) -> str:
    return NODEPORT.format(h0=hosts[0], h1=hosts[1], h2=hosts[2], p0=ports[0], p1=ports[1], p2=ports[2])


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_an_external_listener_advertising_cluster_names_gets_the_node_address(tmp_path, tool):
    names = [POD.format(i) for i in range(3)]
    (tmp_path / "kafka.yaml").write_text(nodeport(names, [32000, 32001, 32002]))
    outside = report("laptop", boots={f"192.0.2.10:{32000 + i}": i for i in range(3)},
                     seen={(i, names[i], 32000 + i): "unresolvable" for i in range(3)})
    inside = report("pod", boots={"my-cluster-kafka-bootstrap.kafka.svc:9092": 0},
                    seen={(i, names[i], 9092): "reachable" for i in range(3)})
    done, document, patched, checked = fix_apply(tmp_path, "kafka.yaml", {"laptop.json": outside, "pod.json": inside},
                                                 tool=tool)
    assert done.returncode == 0, done.stdout
    assert [(e["action"], e["node_id"], e["new"]) for e in document["edits"]] == [
        ("replace", i, f"192.0.2.10:{32000 + i}") for i in range(3)]
    old, new = changed_lines(nodeport(names, [32000, 32001, 32002]), patched)
    assert old == [f"              advertisedHost: {n}" for n in names]
    assert new == ["              advertisedHost: 192.0.2.10"] * 3  # the ports, the comment and the order stay
    assert set(reach(checked, "EXTERNAL-9094", "outside").values()) == {"resolves"}
    assert set(reach(checked, "PLAIN-9092", "cluster").values()) == {"works"}
    assert {v["vantage"]: v["after"] for v in document["vantages"]} == {"laptop": "closed", "pod": "ok"}


def test_one_brokers_advertised_port_typo_is_the_one_line_changed(tmp_path):
    hosts = ["192.0.2.10"] * 3
    original = nodeport(hosts, [32000, 32011, 32002])
    (tmp_path / "kafka.yaml").write_text(original)
    seen = {(0, "192.0.2.10", 32000): "reachable", (1, "192.0.2.10", 32011): "unreachable",
            (2, "192.0.2.10", 32002): "reachable"}
    outside = report("laptop", boots={"192.0.2.10:32000": 0, "192.0.2.10:32001": 1}, seen=seen)
    done, document, patched, checked = fix_apply(tmp_path, "kafka.yaml", {"laptop.json": outside})
    assert done.returncode == 0, done.stdout
    assert changed_lines(original, patched) == (["              advertisedPort: 32011"],
                                                ["              advertisedPort: 32001"])
    [change] = document["files"][0]["changes"]
    assert (change["setting"], change["old"], change["new"]) == (
        "spec.kafka.listeners[external].configuration.brokers[broker=1].advertisedPort", "32011", "32001")
    assert reach(checked, "EXTERNAL-9094", "outside")["my-cluster-kafka-1"] == "resolves"


@pytest.mark.parametrize("tool", ["patch", "git"])
def test_an_internal_only_cluster_reached_from_outside_gets_a_nodeport_listener(tmp_path, tool):
    shutil.copy(STRIMZI / "kafka-persistent.yaml", tmp_path / "kafka.yaml")
    pod = "my-cluster-broker-{}.my-cluster-kafka-brokers.kafka.svc"  # the file has no namespace: the reports say it
    outside = report("laptop", boots={f"192.0.2.10:{31000 + i}": 3 + i for i in range(3)},
                     seen={(3 + i, pod.format(3 + i), 9092): "unresolvable" for i in range(3)})
    inside = report("pod", boots={"my-cluster-kafka-bootstrap.kafka.svc:9092": 3},
                    seen={(3 + i, pod.format(3 + i), 9092): "reachable" for i in range(3)})
    done, document, patched, checked = fix_apply(tmp_path, "kafka.yaml", {"laptop.json": outside, "pod.json": inside},
                                                 tool=tool)
    assert done.returncode == 0, done.stdout
    original = (STRIMZI / "kafka-persistent.yaml").read_text()
    old, new = changed_lines(original, patched)
    assert old == []
    assert new[:4] == ["      - name: external", "        port: 9094", "        type: nodeport", "        tls: false"]
    # New node ports after the ones the clients use today (31000-31002 stay the hand-made Services').
    assert [e["new"] for e in document["edits"]] == ["192.0.2.10:31003", "192.0.2.10:31004", "192.0.2.10:31005"]
    assert set(reach(checked, "EXTERNAL-9094", "outside").values()) == {"resolves"}
    assert set(reach(checked, "PLAIN-9092", "cluster").values()) == {"works"}
    kinds = {s["kind"] for s in document["steps"]}
    assert {"service", "firewall", "bootstrap"} <= kinds
    service = next(s["text"] for s in document["steps"] if s["kind"] == "service")
    assert "NodePort Service per broker" in service and "31003, 31004, 31005" in service
    assert {v["vantage"]: v["after"] for v in document["vantages"]} == {"laptop": "closed", "pod": "ok"}


def test_a_tls_listener_added_keeps_its_authentication_and_names_the_certificate_step(tmp_path):
    shutil.copy(STRIMZI / "scram-sha-512-auth-kafka.yaml", tmp_path / "kafka.yaml")
    pod = "my-cluster-broker-{}.my-cluster-kafka-brokers.kafka.svc"
    outside = report("laptop", boots={f"192.0.2.10:{31000 + i}": 3 + i for i in range(3)},
                     seen={(3 + i, pod.format(3 + i), 9093): "unresolvable" for i in range(3)})
    done, document, patched, checked = fix_apply(tmp_path, "kafka.yaml", {"laptop.json": outside})
    assert done.returncode == 0, done.stdout
    _, new = changed_lines((STRIMZI / "scram-sha-512-auth-kafka.yaml").read_text(), patched)
    assert new[:6] == ["      - name: external", "        port: 9094", "        type: nodeport", "        tls: true",
                       "        authentication:", "          type: scram-sha-512"]
    checked_protocols = {lst["name"]: lst["protocol"] for lst in checked["deployments"][0]["brokers"][3]["listeners"]}
    assert checked_protocols["EXTERNAL-9094"] == "SASL_SSL"
    assert any(s["kind"] == "certificate" and "192.0.2.10" in s["text"] for s in document["steps"])


def test_reached_through_a_port_forward_adds_a_loadbalancer_not_proven_from_the_files(tmp_path):
    shutil.copy(STRIMZI / "kafka-with-dual-role-nodes.yaml", tmp_path / "kafka.yaml")
    pod = "my-cluster-dual-role-{}.my-cluster-kafka-brokers.kafka.svc"
    outside = report("laptop", boots={"localhost:9092": 0}, seen={(0, pod.format(0), 9092): "unresolvable"})
    done, document, patched, _ = fix_apply(tmp_path, "kafka.yaml", {"laptop.json": outside})
    assert done.returncode == 1, done.stdout  # the load balancers' addresses are the platform's, known when deployed
    assert "        type: loadbalancer" in patched
    [proof] = document["vantages"]
    assert proof["after"] == "not proven" and "decided when it deploys" in proof["how"]
    assert any(s["kind"] == "service" and "LoadBalancer Service per broker" in s["text"] for s in document["steps"])


def test_a_report_of_another_cluster_is_one_line_exit_2(tmp_path):
    shutil.copy(STRIMZI / "kafka-persistent.yaml", tmp_path / "kafka.yaml")
    other = report("laptop", boots={"x.example:9092": 7}, seen={(7, "x.example", 9092): "reachable"})
    (tmp_path / "other.json").write_text(render(other))
    done = run_cli(("fix", "other.json", "--config", "kafka.yaml"), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "different clusters" in done.stderr


def test_a_listeners_list_in_flow_style_is_refused_in_one_line(tmp_path):
    (tmp_path / "kafka.yaml").write_text(
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: Kafka\nmetadata: {name: my-cluster}\n"
        "spec:\n  kafka:\n    replicas: 1\n    listeners: [{name: plain, port: 9092, type: internal, tls: false}]\n")
    outside = report("laptop", boots={"192.0.2.10:31000": 0},
                     seen={(0, "my-cluster-kafka-0.my-cluster-kafka-brokers.kafka.svc", 9092): "unresolvable"})
    (tmp_path / "laptop.json").write_text(render(outside))
    done = run_cli(("fix", "laptop.json", "--config", "kafka.yaml"), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "spec.kafka.listeners" in done.stderr and "by hand" in done.stderr


def test_a_pod_failing_on_an_external_listener_gets_an_internal_one_not_the_bootstrap_service_advertised(tmp_path):
    text = (nodeport(["192.0.2.10"] * 3, [32000, 32001, 32002])
            .replace("replicas: 3", "replicas: 1")
            .replace("      - name: plain\n        port: 9092\n        type: internal\n        tls: false\n", ""))
    (tmp_path / "kafka.yaml").write_text(text)
    # A bootstrap Service answers as any broker: advertising it as broker 0's address would send clients anywhere.
    pod = report("pod", boots={"my-cluster-kafka-bootstrap.kafka.svc:9094": 0},
                 seen={(0, "192.0.2.10", 32000): "unreachable"})
    done, document, patched, checked = fix_apply(tmp_path, "kafka.yaml", {"pod.json": pod})
    assert done.returncode == 0, done.stdout
    [edit] = document["edits"]
    assert (edit["action"], edit["listener"], edit["new"]) == (
        "add", "INTERNAL-9095", "my-cluster-kafka-0.my-cluster-kafka-brokers.kafka.svc:9095")
    assert changed_lines(text, patched)[1] == ["      - name: internal", "        port: 9095", "        type: internal",
                                               "        tls: false"]
    assert reach(checked, "INTERNAL-9095", "cluster") == {"my-cluster-kafka-0": "works"}
