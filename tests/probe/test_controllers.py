"""`kprobe probe --controllers` against a real separate KRaft quorum (the `controllers` lab, Kafka 4.1).

Controller 9 advertises its CONTROLLER listener as controller-0.kraft.internal, which only the
`inside` DNS view resolves; broker 1's CONTROLLER_LEAK listener advertises the controller's
endpoint to clients. Each shape is named by its code and gives its exit code: healthy 0, a gap 1,
nothing to start from 3, bad input 2.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_runner import run_cli
from report_check import validate

from kprobe.lab.native import NativeLab


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(["probe", "--timeout", "2", *args])


def probe_json(*args: str) -> tuple[int, dict]:
    done = probe("--json", *args)
    assert done.stderr == "", done.stderr
    return done.returncode, validate(json.loads(done.stdout))


def controller(lab: NativeLab):
    return next(n for n in lab.nodes.values() if n.spec.role == "controller")


def codes(report: dict) -> list[tuple[str, str, int | None]]:
    return [(f["code"], f["severity"], f["node_id"]) for f in report["findings"]]


def test_healthy_from_inside_the_cluster(controllers_lab: NativeLab):
    """Brokers and quorum both work where the controller's name resolves: exit 0, every output says so."""
    ctl = controller(controllers_lab)
    args = ("-b", controllers_lab.bootstrap_all("CLIENT"), "--controllers", ctl.controller_endpoint,
            "-n", controllers_lab.nameserver("inside"))
    code, report = probe_json(*args)
    assert (code, report["summary"]["status"], report["findings"]) == (0, "ok", [])
    [answer] = report["controllers"]["bootstraps"]
    assert (answer["status"], answer["active_controller_id"], answer["node_id"]) == ("ok", 9, 9)
    assert [(c["node_id"], f"{c['host']}:{c['port']}") for c in answer["controllers"]] == [
        (9, ctl.controller_advertised)]
    [endpoint] = report["controllers"]["endpoints"]
    assert endpoint["status"] == "reachable" and endpoint["dns"]["addresses"] == ["127.0.0.140"]
    assert (endpoint["identity"]["node_id"], endpoint["identity"]["kraft_controller"]) == (9, True)
    assert report["settings"]["controllers"] == [ctl.controller_endpoint]
    text = probe(*args)
    assert text.returncode == 0 and "controller 9 at controller-0.kraft.internal" in text.stdout
    assert "1/1 controller endpoints usable" in text.stdout
    metrics = probe("--format", "prometheus", *args).stdout
    assert 'kprobe_controller_endpoint_up{node_id="9",host="controller-0.kraft.internal"' in metrics


def test_controller_name_unresolvable_from_outside(controllers_lab: NativeLab):
    """--controllers alone (no -b), seen from a network that does not know the controller's name: exit 1."""
    ctl = controller(controllers_lab)
    code, report = probe_json("--controllers", ctl.controller_endpoint, "-n", controllers_lab.nameserver("outside"))
    assert code == 1 and report["bootstraps"] == []
    assert codes(report) == [("CONTROLLER_ENDPOINT_UNRESOLVABLE", "error", 9)]
    assert report["controllers"]["endpoints"][0]["dns"]["status"] == "nxdomain"
    # The hosts entry that would fix it, tried first with --resolve: exit 0, the endpoint marked as mapped.
    name = ctl.controller_advertised.rsplit(":", 1)[0]
    code, report = probe_json("--controllers", ctl.controller_endpoint, "-n", controllers_lab.nameserver("outside"),
                              "--resolve", f"{name}={ctl.spec.address}")
    assert code == 0, report["findings"]
    [endpoint] = report["controllers"]["endpoints"]
    assert (endpoint["status"], endpoint["remapped"]["option"]) == ("reachable", "--resolve")
    assert endpoint["identity"]["node_id"] == 9
    assert [f["code"] for f in report["findings"]] == ["REMAPPED_ENDPOINTS"]


def test_bootstrap_that_is_a_controller(controllers_lab: NativeLab):
    """-b given the controller's listener: no client can bootstrap there (exit 3), and kprobe says why."""
    ctl = controller(controllers_lab)
    code, report = probe_json("-b", ctl.controller_endpoint)
    assert code == 3 and codes(report) == [("BOOTSTRAP_IS_CONTROLLER", "error", None)]
    [boot] = report["bootstraps"]
    assert (boot["kraft_controller"], boot["node_id"]) == (True, 9)
    assert "--controllers" in report["findings"][0]["fix"]


def test_broker_advertising_a_controller_endpoint(controllers_lab: NativeLab):
    """CONTROLLER_LEAK: broker 1 hands clients the controller's listener (KAFKA-16612): exit 1."""
    code, report = probe_json("-b", controllers_lab.bootstrap_all("CONTROLLER_LEAK"))
    assert code == 1 and codes(report) == [("ENDPOINT_IS_CONTROLLER", "error", 1)]
    leak = next(e for e in report["endpoints"] if e["node_id"] == 1)
    assert f"{leak['host']}:{leak['port']}" == controller(controllers_lab).controller_endpoint
    assert (leak["identity"]["kraft_controller"], leak["identity"]["node_id"]) == (True, 9)


def test_controllers_given_a_broker(controllers_lab: NativeLab):
    """A broker listener passed to --controllers answers MISMATCHED_ENDPOINT_TYPE, as the admin client meets it."""
    code, report = probe_json("--controllers", controllers_lab.bootstrap("CLIENT", 1))
    assert code == 3 and codes(report) == [("CONTROLLER_IS_BROKER", "error", None)]
    assert "MISMATCHED_ENDPOINT_TYPE" in report["controllers"]["bootstraps"][0]["error"]


@pytest.mark.parametrize(("value", "says"), [
    ("", "bad --controllers '': give a controller listener as host:port"),
    ("controller-0:abc", "bad port in 'controller-0:abc'"),
    ("controller 0:9093", "bad --controllers address 'controller 0:9093'"),
    ("::1:9093", "bad --controllers address '::1:9093': write IPv6 addresses in brackets"),
    ("controller-0", "bad --controllers address 'controller-0': give the controller listener's port"),
    ("SSL://[::1]", "bad --controllers address 'SSL://[::1]': give the controller listener's port"),
])
def test_bad_controllers_input_is_one_line_and_exit_2(value, says):
    done = probe("--controllers", value)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr
