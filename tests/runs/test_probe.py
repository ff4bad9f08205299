"""`kprobe probe` against the lab's real brokers and DNS views."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time

import pytest
from cli_runner import run_cli
from conftest import restart_settled, signal_when
from report_check import validate

from kprobe.models import Report
from kprobe.options import ProbeOptions, parse_address, parse_nameserver
from kprobe.output import json_report
from kprobe.runs.probe import run_probe


def valid(report: Report) -> dict:
    """Every report a test produces is checked against the shipped schema."""
    data = json.loads(json_report.render(report))
    validate(data)
    return data


def probe(bootstrap: str, nameserver: str | None = None, timeout: float = 2.0, deadline: float = 20.0) -> Report:
    return run_probe(ProbeOptions(
        bootstraps=[parse_address(b) for b in bootstrap.split(",")],
        nameservers=[parse_nameserver(nameserver)] if nameserver else [],
        timeout=timeout,
        deadline=deadline,
        vantage="test",
    ))


def codes(report: Report) -> set[str]:
    return {f.code for f in report.findings}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` run by kprobe.cli.main in this process (tests/support/cli_runner.py), its output and exit code as a
    child's. What needs a process of its own (a signal, a terminal, a fresh interpreter's modules) starts one."""
    return run_cli(args)


# -- listeners: the seeds' BOB / FRED / ALICE broker ------------------------------------------

def test_fred_is_ok_for_a_caller_on_this_host(listeners_lab):
    bootstrap = listeners_lab.bootstrap("LISTENER_FRED")
    report = probe(bootstrap)  # the system resolver: localhost comes from /etc/hosts
    data = valid(report)
    assert report.status == "ok", report.findings
    [endpoint] = report.endpoints
    assert (endpoint.endpoint.host, endpoint.endpoint.port) == ("localhost", listeners_lab.listener("LISTENER_FRED").port)
    assert endpoint.status == "reachable"
    assert data["bootstraps"][0]["answered_by"] == {"node_id": -1, "name": f"{bootstrap}/bootstrap"}
    assert data["bootstraps"][0]["cluster_id"] == listeners_lab.cluster_id
    assert data["summary"] == {"status": "ok", "bootstraps": 1, "bootstraps_ok": 1, "endpoints": 1,
                               "reachable": 1, "usable": 1, "unchecked": 0, "deadline_reached": False,
                               "findings": {"error": 0, "warning": 0, "info": 0}}


def test_fred_text_report_line_by_line(listeners_lab):
    bootstrap = listeners_lab.bootstrap("LISTENER_FRED")
    port = listeners_lab.listener("LISTENER_FRED").port
    done = cli("probe", "-b", bootstrap, "--vantage", "laptop", "--no-color")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    # The cluster id is random base64 that may hold a "2s" of its own: set it aside before times become T.
    text = done.stdout.replace(listeners_lab.cluster_id, "CLUSTER")
    lines = [re.sub(r"(?<=[ (])\d+(\.\d+)?m?s\b", "T", ln) for ln in text.splitlines()]
    header = ["NODE", "ENDPOINT", "DNS", "ADDRESSES", "TCP", "ANSWERS", "VERDICT"]
    assert lines[0] == f"Metadata for all topics (from broker -1: {bootstrap}/bootstrap):"
    assert lines[1] == " 1 brokers:"
    assert lines[2] == f"  broker 0 at localhost:{port} (controller)"
    assert lines[3] == " cluster CLUSTER, answered at 127.0.0.1 in T"
    assert lines[4] == ""
    assert lines[5] == "Advertised endpoints, from laptop (the system resolver):"
    assert lines[6].split() == header
    assert lines[7].split() == ["0", f"localhost:{port}", "ok", "T", "127.0.0.1", "ok", "T", "node", "0", "usable"]
    assert lines[8] == ""
    assert lines[9] == "OK: 1/1 bootstraps answered, 1/1 advertised endpoints usable from here, 0 errors, 0 warnings (T)"
    assert len(lines) == 10


def test_alice_advertises_a_name_nobody_resolves(listeners_lab):
    bootstrap = listeners_lab.real_endpoint("LISTENER_ALICE")
    done = cli("probe", "-b", bootstrap, "--nameserver", listeners_lab.nameserver("host"), "--json")
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    validate(data)
    [endpoint] = data["endpoints"]
    assert endpoint["host"] == "never-gonna-give-you-up"
    assert endpoint["dns"]["status"] == "nxdomain"
    assert endpoint["status"] == "unresolvable"
    [finding] = data["findings"]
    assert finding["code"] == "ADVERTISED_UNRESOLVABLE"
    assert finding["severity"] == "error"
    # The broker's own settings, read on the identity request, name the listener the bootstrap reached.
    assert "Its listener LISTENER_ALICE advertises never-gonna-give-you-up:" in finding["fix"]
    assert bootstrap.rsplit(":", 1)[1] in finding["fix"]
    assert data["bootstraps"][0]["listener_settings"]["inter.broker.listener.name"] == "LISTENER_BOB"
    assert data["summary"]["status"] == "gap"


def test_bob_resolves_in_the_docker_view_only(listeners_lab):
    bootstrap = listeners_lab.real_endpoint("LISTENER_BOB")
    inside = probe(bootstrap, listeners_lab.nameserver("docker"))
    outside = probe(bootstrap, listeners_lab.nameserver("host"))
    valid(inside)
    valid(outside)
    assert inside.status == "ok"
    assert inside.endpoints[0].dns.addresses == ("127.0.0.11",)
    assert inside.endpoints[0].dns.source == "nameserver"
    assert outside.status == "gap"
    assert codes(outside) == {"ADVERTISED_UNRESOLVABLE"}
    assert outside.endpoints[0].dns.status == "nxdomain"


def test_a_name_with_one_dead_address_is_partial(listeners_lab):
    """kafka0 resolves to BOB's address and to one where nothing listens (a stale record)."""
    from kprobe.lab.dns_server import DnsServer

    bootstrap = listeners_lab.real_endpoint("LISTENER_BOB")
    [bob_ip] = probe(bootstrap, listeners_lab.nameserver("docker")).endpoints[0].dns.addresses
    with DnsServer({"kafka0": (bob_ip, "127.0.0.98")}, name="stale") as stale:
        report = probe(bootstrap, stale.nameserver)
    valid(report)
    [endpoint] = report.endpoints
    assert endpoint.status == "partial"
    assert {(t.address, t.status) for t in endpoint.tcp} == {(bob_ip, "ok"), ("127.0.0.98", "refused")}
    assert codes(report) == {"ADVERTISED_PARTIAL"}
    [finding] = report.findings
    assert finding.severity == "warning" and "127.0.0.98 (refused)" in finding.message
    assert "127.0.0.98" in finding.fix
    assert report.status == "gap"


# -- cloud: the AWS internal-hostname case ------------------------------------------------------

def test_cloud_internal_name_is_a_gap_from_the_internet_only(cloud_lab):
    bootstrap = cloud_lab.bootstrap("INTERNAL")
    assert bootstrap.startswith("ec2-")
    internet = probe(bootstrap, cloud_lab.nameserver("internet"))
    vpc = probe(bootstrap, cloud_lab.nameserver("vpc"))
    valid(internet)
    valid(vpc)
    assert internet.bootstraps[0].status == "ok"  # bootstrap works...
    assert internet.status == "gap"  # ...and the client still fails
    assert codes(internet) == {"ADVERTISED_UNRESOLVABLE"}
    assert internet.endpoints[0].endpoint.host == "ip-172-31-18-160.us-west-2.compute.internal"
    assert vpc.status == "ok" and not vpc.findings


def test_cloud_external_listener_is_the_fix(cloud_lab):
    report = probe(cloud_lab.bootstrap("EXTERNAL"), cloud_lab.nameserver("internet"))
    valid(report)
    assert report.status == "ok"
    assert report.endpoints[0].endpoint.host.startswith("ec2-")


def test_cloud_bootstrap_name_resolves_through_the_given_nameserver_only(cloud_lab):
    # The vpc-internal name as a bootstrap, seen from the internet: nothing answers.
    internal = cloud_lab.nodes[0].listeners["INTERNAL"]
    bootstrap = f"ip-172-31-18-160.us-west-2.compute.internal:{internal.port}"
    report = probe(bootstrap, cloud_lab.nameserver("internet"))
    valid(report)
    assert report.status == "failed"
    assert report.bootstraps[0].status == "dns_failed"
    assert codes(report) == {"BOOTSTRAP_UNREACHABLE"}


# -- three brokers: healthy, blackholed, stopped -------------------------------------------------

def test_three_brokers_healthy(three_lab):
    report = probe(three_lab.bootstrap_all("CLIENT"))
    data = valid(report)
    assert report.status == "ok"
    assert [e.endpoint.node_id for e in report.endpoints] == [0, 1, 2]
    assert all(e.status == "reachable" for e in report.endpoints)
    # each endpoint is attributed to all three bootstraps
    assert all(len(e["advertised_by"]) == 3 for e in data["endpoints"])
    assert [e["rack"] for e in data["endpoints"]] == ["rack0", "rack1", "rack2"]
    assert report.findings == ()  # no PORT_DIFFERS_FROM_BOOTSTRAP, PARTIAL or anything else when all is well


def test_blackholed_endpoint_times_out_within_one_connect_timeout(three_lab):
    timeout = 1.5
    started = time.monotonic()
    healthy = probe(three_lab.bootstrap("CLIENT", 0), timeout=timeout)
    healthy_s = time.monotonic() - started
    started = time.monotonic()
    report = probe(three_lab.real_endpoint("BLACKHOLED", 0), timeout=timeout)
    blackholed_s = time.monotonic() - started
    valid(report)
    assert healthy.status == "ok"
    assert report.status == "gap"
    by_node = {e.endpoint.node_id: e for e in report.endpoints}
    assert by_node[2].status == "unreachable"
    assert by_node[2].tcp[0].status == "timeout"
    assert by_node[0].status == by_node[1].status == "reachable"
    assert [f.code for f in report.findings] == ["ADVERTISED_TIMEOUT"]
    assert report.findings[0].node_id == 2
    # One connect timeout, not one per endpoint: the physical floor plus a margin.
    assert blackholed_s < healthy_s + timeout + 1.0


def test_stopped_broker_is_refused_and_exit_code_is_1(three_lab):
    three_lab.stop_node(2)
    try:
        done = cli("probe", "-b", three_lab.bootstrap("CLIENT", 0), "-b", three_lab.bootstrap("CLIENT", 2),
                   "--json", "--timeout", "2")
        assert done.returncode == 1, done.stderr
        data = json.loads(done.stdout)
        validate(data)
        by_node = {e["node_id"]: e for e in data["endpoints"]}
        assert by_node[2]["status"] == "unreachable"
        assert by_node[2]["tcp"][0]["status"] == "refused"
        assert by_node[0]["status"] == by_node[1]["status"] == "reachable"
        found = {(f["code"], f["node_id"]) for f in data["findings"]}
        assert ("ADVERTISED_REFUSED", 2) in found
        assert ("BOOTSTRAP_UNREACHABLE", None) in found  # the -b pointing at broker 2 itself
        assert [b["status"] for b in data["bootstraps"]] == ["ok", "refused"]
    finally:
        restart_settled(three_lab, 2)


# -- no bootstrap answers -----------------------------------------------------------------------

def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listens_exit_3_within_the_timeout():
    started = time.monotonic()
    done = cli("probe", "-b", f"127.0.0.1:{_dead_port()}", "--json", "--timeout", "2")
    elapsed = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    data = json.loads(done.stdout)
    validate(data)
    assert data["summary"]["status"] == "failed"
    assert data["bootstraps"][0]["status"] == "refused"
    assert [f["code"] for f in data["findings"]] == ["BOOTSTRAP_UNREACHABLE"]
    assert elapsed < 10


def test_output_file_is_written_atomically(listeners_lab, tmp_path):
    target = tmp_path / "report.json"
    done = cli("probe", "-b", listeners_lab.bootstrap("LISTENER_FRED"), "-o", str(target), "--no-color")
    assert done.returncode == 0, done.stderr
    data = json.loads(target.read_text())
    validate(data)
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left behind
    assert done.stdout.startswith("Metadata for all topics")


@pytest.mark.parametrize(
    "args",
    [
        ["probe", "-b", "host:99999"],
        ["probe", "-b", "[::1"],
        ["probe", "-b", "h:1", "--timeout", "soon"],
        ["probe", "-b", "h:1", "-X", "novalue"],
        ["probe", "-b", "h:1", "-F", "/nonexistent/client.properties"],
        ["probe", "-b", "h:1", "--nameserver", "dns.example.com"],
        ["probe", "-b", "h:1", "-X", "security.protocol=TLS"],
        ["probe", "-b", "h:1", "-o", "/nonexistent-dir/report.json"],
        ["probe", "--no-such-option"],
        ["probe"],
        ["lab", "up", "no-such-scenario"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args):
    done = cli(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("kprobe: error: ")
    assert "Traceback" not in done.stderr


# -- deadlines and Ctrl-C -------------------------------------------------------------------------

def test_deadline_ends_the_run_and_reports_what_is_known(three_lab):
    started = time.monotonic()
    done = cli("probe", "-b", three_lab.real_endpoint("DARK", 0), "--json", "--timeout", "10", "--deadline", "1.5")
    elapsed = time.monotonic() - started
    # A deadline is not Ctrl-C: the verdict stands on what is known (exit 1, never "ok"), and what
    # was cut short is unchecked, not called a timeout a client would see.
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    validate(data)
    assert data["summary"]["status"] == "gap"
    assert data["summary"]["deadline_reached"] is True and data["summary"]["unchecked"] == 3
    assert data["bootstraps"][0]["status"] == "ok"
    assert {e["status"] for e in data["endpoints"]} == {"unchecked"}
    assert {t["status"] for e in data["endpoints"] for t in e["tcp"]} == {"timeout"}
    assert {t["error"] for e in data["endpoints"] for t in e["tcp"]} == {"stopped at the run's deadline"}
    assert [f["code"] for f in data["findings"]] == ["RUN_INCOMPLETE"]
    text = cli("probe", "-b", three_lab.real_endpoint("DARK", 0), "--timeout", "10", "--deadline", "1.5").stdout
    assert text.rstrip().endswith(", deadline reached)"), text
    # The deadline on the run's own clock; the wall clock adds the interpreter's start and exit, and must stay
    # short of the 10 s timeout the connects were given.
    assert data["duration_ms"] < 1500 + 1500, data["duration_ms"]
    assert elapsed < 1.5 + 6, elapsed


def test_ctrl_c_prints_the_partial_report_and_exits_130(three_lab):

    done, _ = signal_when(["probe", "-b", three_lab.real_endpoint("DARK", 0), "--json", "--timeout", "20"],
                          marker="distinct advertised endpoints after")
    out, err = done.stdout, done.stderr
    assert done.returncode == 130, err
    data = json.loads(out)
    validate(data)
    assert data["summary"]["status"] == "interrupted"
    assert data["bootstraps"][0]["status"] == "ok"
    assert len(data["endpoints"]) == 3
    # Cut off mid-connect: unknown, not "unresolvable" (they are IP literals that never needed DNS).
    assert {e["status"] for e in data["endpoints"]} == {"unchecked"}
    assert data["summary"]["unchecked"] == 3 and data["summary"]["deadline_reached"] is False
    codes = {f["code"] for f in data["findings"]}
    assert "RUN_INCOMPLETE" in codes and "ADVERTISED_UNRESOLVABLE" not in codes, codes
    assert "Traceback" not in err


def test_verbose_goes_to_stderr_only(listeners_lab):
    bootstrap = listeners_lab.bootstrap("LISTENER_FRED")
    quiet = cli("probe", "-b", bootstrap, "--json")
    loud = cli("probe", "-b", bootstrap, "--json", "--verbose")
    assert quiet.stderr == ""
    assert f"kprobe: bootstrap {bootstrap}: metadata v" in loud.stderr
    assert "-> reachable" in loud.stderr
    assert json.loads(loud.stdout)["summary"] == json.loads(quiet.stdout)["summary"]


# -- the terminal and the environment ----------------------------------------------------------

def on_a_terminal(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run kprobe with stdout on a pseudo-terminal, as a person at a shell sees it."""
    import os
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: kprobe itself, its stdout and stderr on the terminal
        os.execve(sys.executable, [sys.executable, "-m", "kprobe", *args], {**os.environ, **(env or {})})
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")


def test_colours_on_a_terminal_only_and_never_with_no_color(listeners_lab):
    alice = listeners_lab.bootstrap("LISTENER_ALICE")
    code, screen = on_a_terminal(["probe", "-b", alice, "--timeout", "2"])
    assert code == 1
    assert "\x1b[31m" in screen and "ADVERTISED_UNRESOLVABLE" in screen  # the gap in red
    for env, flag in (({"NO_COLOR": "1"}, []), ({}, ["--no-color"])):
        code, screen = on_a_terminal(["probe", "-b", alice, "--timeout", "2", *flag], env)
        assert code == 1 and "ADVERTISED_UNRESOLVABLE" in screen
        assert "\x1b[" not in screen, (env, flag)
    piped = cli("probe", "-b", alice, "--timeout", "2")
    assert "ADVERTISED_UNRESOLVABLE" in piped.stdout and "\x1b[" not in piped.stdout


def test_environment_defaults_stand_in_for_options(listeners_lab, tmp_path):
    import os

    alice = listeners_lab.bootstrap("LISTENER_ALICE")
    props = tmp_path / "client.properties"
    props.write_text("client.id=kprobe-env-test\n")
    env = {**os.environ, "KPROBE_BOOTSTRAP": alice, "KPROBE_CONFIG": str(props), "KPROBE_TIMEOUT": "2s",
           "KPROBE_NAMESERVER": listeners_lab.nameserver("docker")}
    done = run_cli(["probe", "--json"], env=env)
    data = validate(json.loads(done.stdout))
    assert [b["address"] for b in data["bootstraps"]] == [alice]
    assert data["vantage"]["resolver"] == {"kind": "nameserver", "nameservers": [listeners_lab.nameserver("docker")]}
    assert data["settings"]["timeout_s"] == 2 and data["settings"]["properties"] == {"client.id": "kprobe-env-test"}
    # The docker view does not know never-gonna-give-you-up either: the gap, through the environment alone.
    assert done.returncode == 1 and {f["code"] for f in data["findings"]} == {"ADVERTISED_UNRESOLVABLE"}


def test_a_real_probe_run_never_imports_pyspark(listeners_lab):
    code = (
        "import sys\n"
        "from kprobe.cli import main\n"
        f"sys.argv = ['kprobe', 'probe', '-b', {listeners_lab.bootstrap('LISTENER_FRED')!r}, '--json']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stderr.write('EXIT %s LOADED %s' % (code, ','.join(m for m in ('pyspark', 'testcontainers', 'docker')"
        " if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.stderr.strip().endswith("EXIT 0 LOADED"), done.stderr
    assert json.loads(done.stdout)["summary"]["status"] == "ok"
