"""Staging server.properties files as a lab scenario: what each listener binds and advertises, and what is refused.

No broker runs here: the scenario is data, and its rendering chooses ports only. tests/runs/test_fix_lab.py
runs the seeded clusters on real brokers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kprobe.errors import LabError
from kprobe.lab.base import render, server_properties
from kprobe.lab.certs import CertFiles
from kprobe.lab.from_config import CONTAINER_LOOPBACK
from kprobe.lab.from_properties import read_cluster, scenario_from_properties

SEEDED = Path(__file__).resolve().parents[1] / "data" / "seeded"
BASE = """process.roles=broker,controller
node.id={node}
controller.listener.names=CONTROLLER
controller.quorum.voters={node}@kafka{node}:9093
"""


def cluster(tmp_path: Path, *bodies: str):
    """server.properties files of brokers 0, 1, ... with these listener lines, read as one cluster."""
    paths = []
    for node, body in enumerate(bodies):
        path = tmp_path / f"kafka{node}.properties"
        path.write_text(BASE.format(node=node) + body)
        paths.append(path)
    return read_cluster(paths)


def test_each_file_is_a_node_and_each_listener_keeps_its_files_port():
    dep = read_cluster(sorted((SEEDED / "port-typo").glob("*.properties")))
    views = {"clients": {"kafka0": 0, "kafka1": 1, "kafka2": 2, "localhost": None}}
    scenario = scenario_from_properties(dep, views, first_address=240)
    assert [(n.node_id, n.address, n.hostnames) for n in scenario.nodes] == [
        (0, "127.0.0.240", ("kafka0",)), (1, "127.0.0.241", ("kafka1",)), (2, "127.0.0.242", ("kafka2",))]
    assert [[(s.name, s.bind, s.port, s.advertise, s.inter_broker) for s in n.listeners] for n in scenario.nodes] == [
        [("PLAINTEXT", "{addr}", 9092, "kafka0:{port}", True)],
        [("PLAINTEXT", "{addr}", 9092, "kafka1:{port}", True)],
        [("PLAINTEXT", "{addr}", 9092, "kafka2:9029", True)],  # the typo: no listener binds 9029
    ]
    assert scenario.views == {"clients": {"kafka0": ("127.0.0.240",), "kafka1": ("127.0.0.241",),
                                          "kafka2": ("127.0.0.242",), "localhost": (CONTAINER_LOOPBACK,)}}


def test_the_controller_is_the_labs_and_a_loopback_name_stays_out_of_the_hosts_file():
    dep = read_cluster(sorted((SEEDED / "docker-name-to-host").glob("*.properties")))
    views = {"docker": {"kafka0": 0, "localhost": None}, "host": {"localhost": 0}}
    [node] = scenario_from_properties(dep, views, first_address=240).nodes
    assert [(s.name, s.port, s.advertise, s.inter_broker) for s in node.listeners] == [
        ("INTERNAL", 29092, "kafka0:{port}", True), ("EXTERNAL", 9092, "kafka0:{port}", False)]
    assert node.hostnames == ("kafka0",)
    fixed = read_cluster(sorted((SEEDED / "docker-name-to-host" / "fixed").glob("*.properties")))
    [node] = scenario_from_properties(fixed, views, first_address=240).nodes
    assert [s.advertise for s in node.listeners] == ["kafka0:{port}", "localhost:{port}"]
    assert node.hostnames == ("kafka0",)


def test_another_listeners_port_is_advertised_as_that_listeners_lab_port(tmp_path):
    dep = cluster(tmp_path, "listeners=INTERNAL://:19092,EXTERNAL://:19093,CONTROLLER://:9093\n"
                            "advertised.listeners=INTERNAL://kafka0:19092,EXTERNAL://kafka0:19092\n"
                            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                            "inter.broker.listener.name=INTERNAL\n")
    scenario = scenario_from_properties(dep, {"net": {"kafka0": 0}}, first_address=246)
    assert [s.advertise for s in scenario.nodes[0].listeners] == ["kafka0:{port}", "kafka0:{pt[0][INTERNAL]}"]
    node = render(scenario, {})[0]
    internal, external = node.listeners["INTERNAL"], node.listeners["EXTERNAL"]
    assert external.advertised == f"kafka0:{internal.port}"
    assert internal.advertised == f"kafka0:{internal.port}"
    assert (internal.bind_ip, external.bind_ip) == ("127.0.0.246", "127.0.0.246")


def test_pinned_addresses_keep_a_restaged_node_where_it_was(tmp_path):
    dep = cluster(tmp_path, "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\nadvertised.listeners=PLAINTEXT://kafka0:9092\n",
                  "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\nadvertised.listeners=PLAINTEXT://kafka1:9092\n")
    scenario = scenario_from_properties(dep, {}, addresses={1: "127.0.0.233"}, first_address=240)
    assert [(n.node_id, n.address) for n in scenario.nodes] == [(0, "127.0.0.240"), (1, "127.0.0.233")]


TLS = ("listeners=PLAINTEXT://:9092,SSL://:9093,CONTROLLER://:9094\n"
       "advertised.listeners=PLAINTEXT://kafka{node}.lan:9092,SSL://kafka{node}.example.com:9093\n"
       "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT\n"
       "inter.broker.listener.name=PLAINTEXT\n"
       "ssl.keystore.location=/etc/kafka/secrets/kafka.keystore.p12\nssl.keystore.password=not-staged\n")


def test_an_ssl_listener_presents_a_lab_certificate_naming_what_its_file_advertises(tmp_path):
    dep = cluster(tmp_path, TLS.format(node=0), TLS.format(node=1))
    scenario = scenario_from_properties(dep, {}, first_address=246)
    assert [[(s.name, s.protocol, s.certificate, s.advertise) for s in n.listeners] for n in scenario.nodes] == [
        [("PLAINTEXT", "PLAINTEXT", None, "kafka0.lan:{port}"), ("SSL", "SSL", "node0", "kafka0.example.com:{port}")],
        [("PLAINTEXT", "PLAINTEXT", None, "kafka1.lan:{port}"), ("SSL", "SSL", "node1", "kafka1.example.com:{port}")],
    ]
    # every name the node's file advertises, signed by the lab's CA; the file's key store is not staged
    assert {name: (c.names, c.ca) for name, c in scenario.certificates.items()} == {
        "node0": (("kafka0.lan", "kafka0.example.com"), "lab-ca"), "node1": (("kafka1.lan", "kafka1.example.com"), "lab-ca")}
    lines = server_properties(scenario, render(scenario, {}), 0, "/data", certs={
        name: CertFiles(tmp_path / f"{name}.keystore.pem", tmp_path / f"{name}.pem", tmp_path / "lab-ca.pem")
        for name in scenario.certificates})
    assert f"listener.name.ssl.ssl.keystore.location={tmp_path / 'node0.keystore.pem'}" in lines.splitlines()
    assert "/etc/kafka/secrets" not in lines and "not-staged" not in lines


def test_the_certificates_names_are_the_operators_to_give_per_node(tmp_path):
    dep = cluster(tmp_path, TLS.format(node=0), TLS.format(node=1))
    scenario = scenario_from_properties(dep, {}, certificates={1: ["kafka1.example.com", "kafka.example.com"]})
    assert {name: c.names for name, c in scenario.certificates.items()} == {
        "node0": ("kafka0.lan", "kafka0.example.com"), "node1": ("kafka1.example.com", "kafka.example.com")}
    with pytest.raises(LabError, match=r"certificates for nodes \[7\], which no file is \(nodes \[0, 1\]\)"):
        scenario_from_properties(dep, {}, certificates={7: ["kafka7"]})
    plain = cluster(tmp_path, "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
                              "advertised.listeners=PLAINTEXT://kafka0:9092\n")
    assert scenario_from_properties(plain, {}).certificates == {}  # no TLS listener, no certificate


@pytest.mark.parametrize(("lines", "views", "said"), [
    ("listeners=SSL://:9092,CONTROLLER://:9093\nsecurity.inter.broker.protocol=SSL\n", {},
     "listener SSL is the inter-broker listener, and SSL: the lab's brokers talk to each other in PLAINTEXT only"),
    ("listeners=PLAINTEXT://:9092,SASL_SSL://:9094,CONTROLLER://:9093\n"
     "advertised.listeners=PLAINTEXT://kafka0:9092,SASL_SSL://kafka0:9094\n", {},
     "listener SASL_SSL is SASL_SSL: the lab stages PLAINTEXT and SSL listeners only"),
    ("listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093\n", {}, "listener PLAINTEXT binds 127.0.0.1"),
    ("listeners=PLAINTEXT://:9092,CONTROLLER://:9093\nadvertised.listeners=PLAINTEXT://10.0.0.5:9092\n", {},
     "advertises the address 10.0.0.5, which loopback cannot stand for"),
    ("listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n", {}, "advertises the machine's own host name"),
    ("listeners=PLAINTEXT://:9092,CONTROLLER://:9093\nadvertised.listeners=PLAINTEXT://kafka0:9092\n",
     {"net": {"kafka7": 7}}, "view net: kafka7 resolves to node 7, which no file is (nodes [0])"),
    ("listeners=PLAINTEXT://:9092,CONTROLLER://:9093\nadvertised.listeners=PLAINTEXT://kafka0:9092,"
     "EXTRA://kafka0:9094\n", {}, "listener EXTRA is advertised but not in listeners"),
])
def test_what_loopback_cannot_stage_is_a_lab_error_naming_it(tmp_path, lines, views, said):
    dep = cluster(tmp_path, lines)
    with pytest.raises(LabError) as caught:
        scenario_from_properties(dep, views)
    assert said in str(caught.value)
    assert str(caught.value).startswith((str(tmp_path / "kafka0.properties"), "view "))  # where it is, first


def test_a_file_without_a_node_id_and_a_compose_file_are_refused(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("listeners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://kafka0:9092\n")
    with pytest.raises(LabError, match=r"no node\.id or broker\.id"):
        scenario_from_properties(read_cluster([path]), {})
    compose = Path(__file__).resolve().parents[1] / "data" / "configs" / "rmoff-kafka-listeners" / "docker-compose.yml"
    with pytest.raises(LabError, match=r"the lab stages a cluster's server\.properties files; these are compose"):
        read_cluster([compose])


def test_a_staged_cluster_knows_its_certificates_and_keeps_a_bootstraps_protocol(tmp_path):
    from kprobe.lab.from_properties import StagedCluster

    cluster(tmp_path, TLS.format(node=0), TLS.format(node=1))
    paths = sorted(tmp_path.glob("kafka*.properties"))
    staged = StagedCluster(paths, {"net": {"kafka0.example.com": 0}}, first_address=246,
                           certificates={0: ["kafka0.example.com"]})  # not started: no broker runs here
    assert staged.certificates == {0: ("kafka0.example.com",), 1: ("kafka1.lan", "kafka1.example.com")}
    assert staged.endpoint("net", "SSL://kafka0.example.com:9093") == "SSL://kafka0.example.com:9093"
    assert staged.ca_file == ""  # made when the lab starts
