"""`kprobe fix`'s plan on hand-built reports and files: replace or add, never the inter-broker name or a controller."""

from __future__ import annotations

from pathlib import Path

import pytest
from fix_reports import COMPOSE, report

from kprobe.check.deployments import read_files
from kprobe.errors import UsageError
from kprobe.fix.plan import plan, reached_by_name
from kprobe.models import Finding, Report
from kprobe.records import replace


def properties(tmp_path: Path, brokers: dict[int, str]) -> list[str]:
    """One server.properties per broker: node id -> its advertised.listeners value (CLIENT on 9092, INTERNAL on 9091)."""
    paths = []
    for node, advertised in brokers.items():
        path = tmp_path / f"broker{node}.properties"
        path.write_text(
            f"node.id={node}\nprocess.roles=broker\n"
            "listeners=INTERNAL://0.0.0.0:9091,CLIENT://0.0.0.0:9092\n"
            f"advertised.listeners=INTERNAL://b{node}.internal:9091,{advertised}\n"
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
            "inter.broker.listener.name=INTERNAL\ncontroller.listener.names=CONTROLLER\n")
        paths.append(str(path))
    return paths


def test_docker_name_advertised_to_the_host_adds_a_published_listener(tmp_path):
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE)
    deps = read_files([str(path)])
    host = report("host", boots={"localhost:29092": 0}, seen={(0, "kafka0", 29092): "unresolvable"})
    inside = report("inside", boots={"kafka0:29092": 0}, seen={(0, "kafka0", 29092): "reachable"})
    result = plan([("host.json", host), ("inside.json", inside)], deps)
    [edit] = result.edits
    assert (edit.action, edit.listener, edit.new, edit.bind, edit.publish, edit.via) == (
        "add", "HOST", "localhost:29094", "0.0.0.0:29094", 29094, "localhost:29092")  # 29093 is the controller's
    assert {u.vantage: u.network for u in result.uses} == {"host": "docker-host", "inside": "compose-network"}
    assert not result.unresolved


def test_only_the_host_vantage_still_adds_a_listener_since_the_inter_broker_one_keeps_its_compose_name(tmp_path):
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE)
    host = report("host", boots={"localhost:29092": 0}, seen={(0, "kafka0", 29092): "unresolvable"})
    [edit] = plan([("host.json", host)], read_files([str(path)])).edits
    assert edit.action == "add"  # localhost on the inter-broker listener would send the brokers to themselves


def test_one_brokers_port_typo_is_replaced_and_the_others_untouched(tmp_path):
    paths = properties(tmp_path, {1: "CLIENT://b1.example:9092", 2: "CLIENT://b2.example:9093"})
    seen = {(1, "b1.example", 9092): "reachable", (2, "b2.example", 9093): "unreachable"}
    here = report("here", boots={"b1.example:9092": 1, "b2.example:9092": 2}, seen=seen)
    result = plan([("here.json", here)], read_files(paths))
    [edit] = result.edits
    assert (edit.node_id, edit.listener, edit.action, edit.old, edit.new) == (2, "CLIENT", "replace", "b2.example:9093",
                                                                             "b2.example:9092")


def test_localhost_advertised_to_a_remote_client_is_replaced(tmp_path):
    paths = properties(tmp_path, {1: "CLIENT://localhost:9092"})
    remote = report("laptop", boots={"b1.example:9092": 1}, seen={(1, "localhost", 9092): "unreachable"})
    [edit] = plan([("laptop.json", remote)], read_files(paths)).edits
    assert (edit.action, edit.old, edit.new) == ("replace", "localhost:9092", "b1.example:9092")


def test_a_cloud_private_name_is_replaced_for_outside_clients_alone_and_added_beside_inside_ones(tmp_path):
    private = "ip-172-31-5-9.eu-west-1.compute.internal"
    paths = properties(tmp_path, {1: f"CLIENT://{private}:9092"})
    outside = report("outside", boots={"ec2-1-2-3-4.compute.amazonaws.com:9092": 1},
                     seen={(1, private, 9092): "unresolvable"})
    [alone] = plan([("o.json", outside)], read_files(paths)).edits
    assert (alone.action, alone.new) == ("replace", "ec2-1-2-3-4.compute.amazonaws.com:9092")
    inside = report("vpc", boots={f"{private}:9092": 1}, seen={(1, private, 9092): "reachable"})
    [both] = plan([("o.json", outside), ("i.json", inside)], read_files(paths)).edits
    assert (both.action, both.listener, both.new) == ("add", "EXTERNAL", "ec2-1-2-3-4.compute.amazonaws.com:9093")


def test_two_networks_sharing_one_listener_get_a_listener_added(tmp_path):
    paths = properties(tmp_path, {1: "CLIENT://kafka1.lan:9092"})
    lan = report("lan", boots={"kafka1.lan:9092": 1}, seen={(1, "kafka1.lan", 9092): "reachable"})
    vpn = report("vpn", boots={"10.8.0.5:9092": 1}, seen={(1, "kafka1.lan", 9092): "unresolvable"})
    [edit] = plan([("lan.json", lan), ("vpn.json", vpn)], read_files(paths)).edits
    assert (edit.action, edit.new, edit.vantages) == ("add", "10.8.0.5:9093", ("vpn",))


def test_a_broker_that_works_everywhere_and_the_inter_broker_and_controller_listeners_are_untouched(tmp_path):
    paths = properties(tmp_path, {1: "CLIENT://b1.example:9092", 2: "CLIENT://localhost:9092"})
    seen = {(1, "b1.example", 9092): "reachable", (2, "localhost", 9092): "unreachable"}
    here = report("here", boots={"b1.example:9092": 1, "b2.example:9092": 2}, seen=seen)
    result = plan([("here.json", here)], read_files(paths))
    assert [(e.node_id, e.listener) for e in result.edits] == [(2, "CLIENT")]


def test_a_broker_down_stays_unresolved_with_why(tmp_path):
    paths = properties(tmp_path, {0: "CLIENT://b0.example:9092", 1: "CLIENT://b1.example:9092"})
    here = report("here", boots={"b1.example:9092": None, "b0.example:9092": 0},
                  seen={(1, "b1.example", 9092): "unreachable"})
    result = plan([("here.json", here)], read_files(paths))
    assert not result.edits
    [open_gap] = result.unresolved
    assert open_gap.node_id == 1 and "down or a firewall" in open_gap.why


def test_a_connect_to_the_report_was_probed_with_is_the_address_that_works(tmp_path):
    paths = properties(tmp_path, {1: "CLIENT://b1.internal:9092"})
    here = report("here", boots={"b1.internal:9092": None}, seen={(1, "b1.internal", 9092): "reachable"},
                  remaps={(1, "b1.internal", 9092): ("203.0.113.7", 19092, "--connect-to")})
    [edit] = plan([("here.json", here)], read_files(paths)).edits
    assert (edit.action, edit.new) == ("replace", "203.0.113.7:19092")


def test_reports_of_another_cluster_are_bad_input(tmp_path):
    paths = properties(tmp_path, {1: "CLIENT://b1.example:9092"})
    other = report("here", boots={"x.example:9092": 7}, seen={(7, "x.example", 9092): "reachable"})
    with pytest.raises(UsageError, match="different clusters"):
        plan([("other.json", other)], read_files(paths))


def test_the_what_if_command_leaves_out_a_bootstrap_that_failed_there(tmp_path):
    from kprobe.runs.fix import what_if_command

    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE)
    host = report("host", boots={"localhost:29092": 0, "localhost:9999": None}, seen={(0, "kafka0", 29092): "unresolvable"})
    decided = plan([("host.json", host)], read_files([str(path)]))
    assert what_if_command(decided.uses[0], decided) == (
        "kprobe probe -b localhost:29092 --connect-to kafka0:29092=localhost:29092")


def test_a_name_is_judged_by_what_the_reporting_network_reached_by_it():
    """The proof of a server.properties fix judges a name from the report's own network: its bootstrap by that name
    answered as the broker, or it used the broker at that name; a failed row or another broker is no evidence."""
    seen = report("host", boots={"localhost:9092": 0}, seen={(0, "kafka0", 9092): "unresolvable"})
    assert reached_by_name(seen, "LOCALHOST", 0) == "its bootstrap localhost:9092 answered as broker 0"
    assert reached_by_name(seen, "localhost", 1) is None
    assert reached_by_name(seen, "kafka0", 0) is None
    used = report("docker", boots={"kafka0:29092": 0}, seen={(0, "kafka0", 9092): "reachable"})
    assert reached_by_name(used, "kafka0", 0) == "its bootstrap kafka0:29092 answered as broker 0"
    other = report("docker", boots={"10.0.0.1:9092": None}, seen={(0, "kafka0", 9092): "reachable"})
    assert reached_by_name(other, "kafka0", 0) == "it used broker 0 at kafka0:9092"


def test_a_sasl_listener_added_beside_another_names_the_settings_it_needs_without_writing_them(tmp_path):
    """Kafka reads a listener's SASL settings under its own name: the added listener needs listener.name.<new>.*,
    a step (the lines hold passwords, so the patch never writes them)."""
    path = tmp_path / "broker.properties"
    path.write_text("node.id=1\nprocess.roles=broker\nlisteners=VPC://0.0.0.0:9092\n"
                    "advertised.listeners=VPC://ip-10-0-0-1.ec2.internal:9092\n"
                    "listener.security.protocol.map=VPC:SASL_SSL,CONTROLLER:PLAINTEXT\n"
                    "inter.broker.listener.name=VPC\ncontroller.listener.names=CONTROLLER\n"
                    "listener.name.vpc.scram-sha-512.sasl.jaas.config=secret-line\n")
    seen = report("internet", boots={"broker.example.com:9092": 1},
                  seen={(1, "ip-10-0-0-1.ec2.internal", 9092): "unresolvable"})
    inside = report("vpc", boots={"ip-10-0-0-1.ec2.internal:9092": 1},
                    seen={(1, "ip-10-0-0-1.ec2.internal", 9092): "reachable"})
    done = plan([("internet.json", seen), ("vpc.json", inside)], read_files([str(path)]))
    [edit] = done.edits
    assert (edit.action, edit.protocol, edit.beside) == ("add", "SASL_SSL", "VPC")
    [step] = [s for s in done.steps if s.kind == "listener-settings"]
    assert f"listener.name.{edit.listener.lower()}.sasl.enabled.mechanisms" in step.text
    assert "listener.name.vpc.*" in step.text and "secret-line" not in step.text
    assert any(s.kind == "certificate" and "broker.example.com" in s.text for s in done.steps)


def tls(report_: Report, *, mismatch: tuple[int, str] | None = None) -> Report:
    """The report as an SSL client's (its bootstraps answered in TLS), with TLS_HANDSHAKE_FAILED at `mismatch`."""
    boots = tuple(replace(b, protocol="SSL") for b in report_.bootstraps)
    found = () if mismatch is None else (Finding(
        code="TLS_HANDSHAKE_FAILED", severity="error", message="the TLS handshake there fails", fix="a TLS port",
        node_id=mismatch[0], endpoint=mismatch[1]),)
    return replace(report_, bootstraps=boots, findings=found)


def broker_with_tls(tmp_path: Path, advertised: str, name: str = "kafka1.properties") -> list[str]:
    """A broker with a PLAINTEXT listener on 9092 (inter-broker) and an SSL one on 9093, advertised as given."""
    path = tmp_path / name
    path.write_text("node.id=1\nprocess.roles=broker\n"
                    "listeners=PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093\n"
                    f"advertised.listeners={advertised}\n"
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT\n"
                    "inter.broker.listener.name=PLAINTEXT\ncontroller.listener.names=CONTROLLER\n")
    return [str(path)]


def test_an_ssl_entry_advertising_the_plaintext_port_is_the_tls_clients_listener_and_gets_its_own_port(tmp_path):
    # Both listeners advertise k1.example:9092: the TLS client's bootstrap answered in TLS, so it reached SSL.
    paths = broker_with_tls(tmp_path, "PLAINTEXT://k1.example:9092,SSL://k1.example:9092")
    plain = report("apps", boots={"k1.example:9092": 1}, seen={(1, "k1.example", 9092): "reachable"})
    secure = tls(report("tls", boots={"k1.example:9093": 1}, seen={(1, "k1.example", 9092): "reachable"}),
                 mismatch=(1, "k1.example:9092"))
    result = plan([("apps.json", plain), ("tls.json", secure)], read_files(paths))
    assert {u.vantage: u.listener for u in result.uses} == {"apps": "PLAINTEXT", "tls": "SSL"}
    [edit] = result.edits
    assert (edit.listener, edit.action, edit.old, edit.new, edit.protocol) == (
        "SSL", "replace", "k1.example:9092", "k1.example:9093", "SSL")
    assert not result.unresolved
    # the certificate names k1.example already (the TLS bootstrap verified it there): no step asks for it
    assert [s.kind for s in result.steps if s.kind == "certificate"] == []


def test_a_tls_listener_added_under_a_new_name_asks_for_that_name_in_the_brokers_certificate(tmp_path):
    private, public = "ip-10-0-0-5.ec2.internal", "ec2-203-0-113-5.compute.amazonaws.com"
    paths = broker_with_tls(tmp_path, f"PLAINTEXT://{private}:9092,SSL://{private}:9093")
    vpc = tls(report("vpc", boots={f"{private}:9093": 1}, seen={(1, private, 9093): "reachable"}))
    outside = tls(report("internet", boots={f"{public}:9093": 1}, seen={(1, private, 9093): "unresolvable"}))
    result = plan([("vpc.json", vpc), ("internet.json", outside)], read_files(paths))
    [edit] = result.edits
    assert (edit.action, edit.listener, edit.new, edit.protocol) == ("add", "EXTERNAL", f"{public}:9094", "SSL")
    [step] = [s for s in result.steps if s.kind == "certificate"]
    assert step.text.startswith(f"kafka1.properties (broker 1): its certificate must name {public} ")
    assert f"reissue it with {public} before the restart" in step.text
