"""The namespace lab: real brokers behind routers, seen from vantages that are network namespaces.

Why: kprobe's verdicts on routed networks (no route, a security group that drops, an ICMP reject,
NAT, a VPN that loses large packets) were measured once by hand (design notes, section 9); these
tests keep them so, with kprobe run inside each vantage exactly as a user would
(`kprobe lab exec VANTAGE -- kprobe probe ...`). And the lab itself must be safe: it never changes
the root namespace and leaves no namespace behind, even after `kill -9`.

Every packet stays inside namespaces the test made (198.18.0.0/15); the suite's fence lets those
addresses through only from inside a lab namespace (tests/fence/loopback_fence.py). Needs root,
`ip` and `nft` (CI has them: .ci/run installs nftables).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kprobe.kafka import pathmtu
from kprobe.lab import netns
from kprobe.lab.netns_scenarios import (
    COLLECTOR_NAME,
    MONITORING_NET,
    MTU_LIMIT,
    NETNS_SCENARIOS,
    PORT,
    REPORTS_TOPIC,
    get_netns_scenario,
    public,
)

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"),
                       reason="the namespace lab needs root, ip and nft"),
    # One unit (one at a time, on one worker, even when the other worker takes it rather than idle): the
    # module's in-process labs (the `lab` fixture's nat-ok among them) and the root-namespace test's
    # `lab up --netns nat-ok` overlapped across workers, and its `lab exec --scenario nat-ok`, which takes
    # the newest lab of the scenario, once entered the other's.
    pytest.mark.serial("netns-lab"),
]

KPROBE = [sys.executable, "-m", "kprobe"]
TIMEOUT = "2s"  # kprobe's per-request timeout: a dropped SYN costs this once

# scenario -> vantage -> (exit code, {finding code: the node ids it names}), as design notes section 9 measured.
EXPECTED: dict[str, dict[str, tuple[int, dict[str, set[int | None]]]]] = {
    # No route from the internet to the advertised private addresses: ENETUNREACH at once, every broker.
    "lb-private": {"laptop": (1, {"ADVERTISED_UNREACHABLE": {1, 2}}), "vpc": (0, {})},
    # The security group drops all but the load balancer: the advertised endpoints time out.
    # No hairpin NAT for a host in the brokers' own network: the public addresses time out there too.
    "sg-lb-only": {"laptop": (1, {"ADVERTISED_TIMEOUT": {1, 2}}), "vpc": (0, {}),
                   "vpc-app": (1, {"ADVERTISED_TIMEOUT": {1, 2}})},
    # ICMP admin-prohibited for broker 2: EHOSTUNREACH at once, broker 2 alone. (The branch is the pipeline's
    # third vantage, healthy: the one that loses its route to the monitoring network.)
    "reject-one": {"laptop": (1, {"ADVERTISED_UNREACHABLE": {2}}), "vpc": (0, {}), "branch": (0, {})},
    # Per-broker NAT with listeners advertising the public addresses: healthy from everywhere, and from an office
    # that has only an IPv6 route (the brokers' CLIENT6 listeners, their ULA addresses judged across the router).
    # And from a host in the brokers' own network through the public addresses, which the router's hairpin NAT serves.
    "nat-ok": {"laptop": (0, {}), "vpc": (0, {}), "office6": (0, {}), "vpc-app": (0, {})},
    # The path-MTU black hole: the full Metadata answer never arrives, a brokers-only one does; exit 1 with the
    # path named (it read "no bootstrap answered", exit 3, the one disagreement section 9 recorded). Each broker's
    # endpoint is still judged through its small answers, and reachable.
    "mtu-vpn": {"office-vpn": (1, {"PATH_MTU_BLACKHOLE": {None}}), "vpc": (0, {})},
}
CASES = [(scenario, vantage) for scenario, vantages in EXPECTED.items() for vantage in vantages]


def _probe(argv_prefix: list[str], bootstrap: str) -> tuple[int, dict]:
    done = subprocess.run([*argv_prefix, *KPROBE, "probe", "-b", bootstrap, "-m", TIMEOUT, "--json"],
                          capture_output=True, text=True, timeout=60, check=False)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"no JSON report (exit {done.returncode}): {done.stdout[-500:]} {done.stderr[-500:]}") from None
    return done.returncode, report


def _findings(report: dict) -> dict[str, set[int | None]]:
    found: dict[str, set[int | None]] = {}
    for finding in report.get("findings", []):
        found.setdefault(finding["code"], set()).add(finding.get("node_id"))
    return found


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def lab(request: pytest.FixtureRequest) -> Iterator[netns.NetnsLab]:
    """One start per scenario, shared by its vantages' tests."""
    started = netns.NetnsLab(get_netns_scenario(request.param)).start()
    try:
        yield started
    finally:
        started.stop()


def test_the_table_covers_every_scenario() -> None:
    assert set(EXPECTED) == set(NETNS_SCENARIOS)
    for name, vantages in EXPECTED.items():
        assert set(vantages) == {v.name for v in NETNS_SCENARIOS[name].vantages}, name


def test_kprobe_in_each_vantage_gives_the_measured_verdict(lab: netns.NetnsLab) -> None:
    """kprobe inside each vantage: the exit code and exactly the failing brokers section 9 measured.

    (One test per scenario, each vantage checked and every mismatch named: scenarios have two to four vantages, and
    a test per vantage index would be a skip wherever a scenario has fewer.)
    """
    wrong = []
    for vantage in lab.scenario.vantages:
        code, findings = EXPECTED[lab.scenario.name][vantage.name]
        started = time.monotonic()
        exit_code, report = _probe(lab.exec_argv(vantage.name, []), vantage.bootstrap)
        if (exit_code, _findings(report)) != (code, findings):
            wrong.append((vantage.name, exit_code, report["findings"]))
        if "PATH_MTU_BLACKHOLE" in findings:
            _check_path_mtu_bound(report)
        # A probe costs what it costs on loopback plus the scenario's own delay (one dropped SYN's timeout).
        assert time.monotonic() - started < 10, vantage.name
    assert not wrong, (lab.scenario.name, wrong)


def _check_path_mtu_bound(report: dict) -> None:
    """The largest answer that arrived bounds the tunnel's MTU within one step of the ladder (an IPv4 packet
    carries an answer's bytes plus 52 of IP and TCP headers), for two timeouts in all: the full Metadata's stall
    and the lost rung's (at most 2 in a black-hole run)."""
    [bootstrap] = report["bootstraps"]
    largest = bootstrap["largest_answer_bytes"]
    assert MTU_LIMIT - 52 - pathmtu.STEP - 8 < largest <= MTU_LIMIT - 52, bootstrap
    seconds = float(TIMEOUT.rstrip("s"))
    assert report["duration_ms"] < (2 * seconds + 2) * 1000, report["duration_ms"]


def test_lab_network_is_made_and_only_in_its_ranges(lab: netns.NetnsLab) -> None:
    """Every address inside the lab's own ranges. How long the network takes to make is said by `lab up`
    and is no test's business (the machine's load moves it); a minute would be a hang."""
    assert 0 < lab.network_seconds < 60
    for namespace in netns.lab_namespaces():
        if not namespace.startswith(f"{netns.PREFIX}{lab.lab_id}-"):
            continue
        out = subprocess.run(["ip", "-n", namespace, "-j", "addr"], capture_output=True, text=True, timeout=10,
                             check=True).stdout
        for link in json.loads(out):
            for info in link.get("addr_info", []):
                if link["ifname"] == "lo" and info["local"] in ("127.0.0.1", "::1"):
                    continue
                netns.check_address(info["local"])  # raises for anything else (a link-local address, say)


def test_root_namespace_is_untouched_by_a_lab_run() -> None:
    """Addresses, routes (v4, v6) and the nftables ruleset of the root namespace, before and after a lab run."""
    def snapshot() -> list[str]:
        commands = (["ip", "-j", "addr"], ["ip", "-j", "route"], ["ip", "-6", "-j", "route"],
                    ["nft", "-j", "list", "ruleset"])
        return [subprocess.run(c, capture_output=True, text=True, timeout=10, check=True).stdout for c in commands]

    before = snapshot()
    up = subprocess.run([*KPROBE, "lab", "up", "--netns", "nat-ok", "--detach"], capture_output=True, text=True,
                        timeout=200, check=False)
    try:
        assert up.returncode == 0, up.stderr
        code, report = _probe([*KPROBE, "lab", "exec", "laptop", "--scenario", "nat-ok", "--"],
                              "kafka.example.test:9092")  # the name from the vantage's hosts file and DNS server
        assert code == 0, report["findings"]
    finally:
        down = subprocess.run([*KPROBE, "lab", "down", "nat-ok"], capture_output=True, text=True, timeout=60, check=False)
    assert down.returncode == 0 and "stopped namespace lab nat-ok" in down.stdout, down.stdout + down.stderr
    assert snapshot() == before
    pid = up.stdout.rsplit("(pid ", 1)[1].split(")", 1)[0]
    assert not [ns for ns in netns.lab_namespaces() if ns.startswith(f"{netns.PREFIX}{pid}-")]


def _start_in_background() -> tuple[subprocess.Popen[bytes], str]:
    """`kprobe lab up --netns lb-private` in the foreground of a child, once its brokers are starting.

    (Another scenario than the root-namespace test's nat-ok: under xdist the two may run at once, and each
    `lab down NAME` stops only its own.)
    """
    proc = subprocess.Popen([*KPROBE, "lab", "up", "--netns", "lb-private"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    mine = f"{netns.PREFIX}{proc.pid}-"
    deadline = time.monotonic() + 30
    # Mid-run: the topology is up and the brokers are starting (something runs in the cluster namespace).
    while not subprocess.run(["ip", "netns", "pids", f"{mine}cluster"], capture_output=True, text=True,
                             timeout=10, check=False).stdout.strip():
        assert proc.poll() is None and time.monotonic() < deadline, "the lab never reached its brokers' start"
        time.sleep(0.05)
    return proc, mine


def _kill_9(proc: subprocess.Popen[bytes], mine: str) -> set[int]:
    """SIGKILL the lab's process; the pids still inside its namespaces (its brokers' launcher, DNS servers)."""
    inside = {int(p) for ns in netns.lab_namespaces() if ns.startswith(mine)
              for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10,
                                      check=False).stdout.split()}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert [ns for ns in netns.lab_namespaces() if ns.startswith(mine)], "nothing to clean: the test proves nothing"
    return inside


@pytest.mark.parametrize("cleaner", ["lab down", "next start"])
def test_kill_9_leaves_nothing_once_down_or_the_next_start_ran(cleaner: str) -> None:
    """`kill -9` of `lab up --netns` mid-start: the next start or `lab down` removes its namespaces and processes."""
    proc, mine = _start_in_background()
    inside = _kill_9(proc, mine)
    killed = [mine]
    if cleaner == "next start":
        second, second_ns = _start_in_background()  # got as far as its brokers: past its clean-up of stale ones
        try:
            assert not [ns for ns in netns.lab_namespaces() if ns.startswith(mine)]
        finally:
            inside |= _kill_9(second, second_ns)  # and then that one is killed too, for `lab down` to clean
            killed.append(second_ns)
    down = subprocess.run([*KPROBE, "lab", "down", "lb-private"], capture_output=True, text=True, timeout=60,
                          check=True)
    assert "stale lab namespace" in down.stdout
    assert not [ns for ns in netns.lab_namespaces() if ns.startswith(tuple(killed))]
    assert not netns.workdir_for(str(proc.pid)).exists()
    end = time.monotonic() + 10
    while any(_alive(pid) for pid in inside) and time.monotonic() < end:
        time.sleep(0.1)
    assert not [pid for pid in inside if _alive(pid)], "processes of the killed lab still run"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False
    return True


def test_without_root_it_says_so_in_one_line_and_exits_2() -> None:
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *KPROBE, "lab", "up",
                           "--netns", "nat-ok"], capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, "HOME": "/tmp"})
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "needs root" in done.stderr


def test_addresses_outside_the_lab_ranges_are_refused() -> None:
    for address in ("198.18.0.1/30", "198.19.255.254", "fd6b:7072:6f62:1::2/64"):
        netns.check_address(address)
    for address in ("10.0.0.1/8", "192.168.1.1", "127.0.0.2", "fe80::1/64", "fd00::1", "198.20.0.1"):
        with pytest.raises(Exception, match="refusing address"):
            netns.check_address(address)


def test_the_fence_refuses_the_lab_ranges_outside_lab_namespaces() -> None:
    """From the root namespace a connect to 198.18.0.0/15 is refused before any packet is sent."""
    import socket

    from fence.loopback_fence import FENCE, inside_lab_namespace

    if not FENCE.installed:
        pytest.skip("the fence is not installed in this process")
    assert not inside_lab_namespace()
    with FENCE.expecting() as seen, socket.socket() as sock, pytest.raises(PermissionError):
        sock.settimeout(0.5)
        sock.connect(("198.18.0.1", 9092))
    assert seen == ["socket.connect to 198.18.0.1:9092"]


_CREATE_TOPIC = r"""
import sys
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, name = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
new = NewTopic(name, num_partitions=2, replica_assignment=[[1], [2]])
admin.create_topics([new], request_timeout=30)[name].result(40)
"""
# Findings about the path, not about a broker: the clients' one-topic metadata and small records fit through.
_PATH_ONLY = {"PATH_MTU_BLACKHOLE"}
CLIENT_BUDGET_MS = 10000


def test_real_clients_in_each_vantage_agree_with_kprobe(lab: netns.NetnsLab,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """The Java client and librdkafka, inside the vantage, produce one record to a partition led by each broker
    and read it back: they lose exactly the partitions of the brokers kprobe names there (the agreement
    test). On the MTU black hole they lose nothing (one topic's metadata and small records fit through) while
    kprobe names the path: what breaks there is large answers, which `kcat -L` and big fetches meet."""
    from real_clients import java_round_trip, librdkafka_round_trip

    from kprobe.lab.jars import kafka_classpath

    inside = next(v for v in lab.scenario.vantages if EXPECTED[lab.scenario.name][v.name][0] == 0)
    topic = f"agree-{os.getpid()}"
    subprocess.run([*lab.exec_argv(inside.name, []), sys.executable, "-c", _CREATE_TOPIC, inside.bootstrap, topic],
                   check=True, capture_output=True, timeout=90)
    classpath = kafka_classpath()
    # Every vantage's two clients at once: a client that cannot reach a broker waits out its budget, and those
    # waits overlap instead of adding up (sg-lb-only: 73 s one after another). 10 s each, as tests/runs/test_probe_agreement.py's
    # nine concurrent clients have: a working Java client on a saturated machine needs that much room.
    with ThreadPoolExecutor(max_workers=2 * len(lab.scenario.vantages)) as pool:
        runs = [(vantage, pool.submit(java_round_trip, lab.exec_argv(vantage.name, []), classpath,
                                      tmp_path_factory.mktemp("clients"), vantage.bootstrap, topic, 2,
                                      budget_ms=CLIENT_BUDGET_MS),
                 pool.submit(librdkafka_round_trip, lab.exec_argv(vantage.name, []), vantage.bootstrap, topic, 2,
                             budget_ms=CLIENT_BUDGET_MS))
                for vantage in lab.scenario.vantages]
        outcomes = [(vantage, java.result(), rd.result()) for vantage, java, rd in runs]
    disagree = []
    for vantage, java, rd in outcomes:
        _, findings = EXPECTED[lab.scenario.name][vantage.name]
        named = {node for code, nodes in findings.items() if code not in _PATH_ONLY for node in nodes}
        lost_expected = {1, 2} if None in named else named
        for outcome in (java, rd):
            lost = {broker for index, broker in enumerate((1, 2)) if index not in outcome.ok_partitions}
            if lost != lost_expected:
                disagree.append((vantage.name, outcome.client, sorted(lost), sorted(lost_expected), outcome.error))
    assert not disagree, (lab.scenario.name, disagree)


# -- many networks, one aggregation (the story of docs/scheduling.md) ---------------------------
_CONNECTS = r"""
import json, socket, sys
reach = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        reach[target] = True
    except OSError:
        reach[target] = False
print(json.dumps(reach))
"""
WATCH_RUNS = 3
# A watch run's deadline is its interval, and a run's probe plus its publishing to the collector took up to 2.6 s
# beside the suite's other labs: the interval leaves them room, the test being about the cut, not the pace.
EVERY = "4s"


def _read_run(proc: subprocess.Popen[str], vantage: str) -> dict:
    """The next report a `watch --json` prints (one JSON line a run, after that run's delivery)."""
    line = proc.stdout.readline() if proc.stdout else ""
    assert line, f"watch in {vantage} ended early: {proc.stderr.read() if proc.stderr else ''}"
    return json.loads(line)


def _spooled(spool: Path) -> list[str]:
    return sorted(json.loads(f.read_text())["id"] for f in spool.glob("*.json"))


@pytest.mark.parametrize("lab", ["reject-one"], indirect=True)  # the scenario's own start, shared with its tests
def test_three_vantages_watch_publish_through_a_cut_and_aggregate_each_report_once(
        lab: netns.NetnsLab, tmp_path: Path) -> None:
    """`kprobe watch` in three vantage namespaces publishes to the collector on the monitoring network; the
    branch loses its route there for its second run (the report is spooled) and forwards it with its third;
    `kprobe aggregate --kafka`, run on the monitoring network, gives the vantage-by-endpoint matrix, which must
    equal what each namespace reaches with a plain connect(), every report counted once."""
    endpoints = [f"{public(n)}:{PORT}" for n in (1, 2)]
    names = [v.name for v in lab.scenario.vantages]
    # What each namespace can reach, by the kernel's own word (a bare connect, no kprobe involved).
    reach = {v: json.loads(subprocess.run([*lab.exec_argv(v, []), sys.executable, "-c", _CONNECTS, *endpoints],
                                          capture_output=True, text=True, timeout=30, check=True).stdout)
             for v in names}
    assert reach == {"laptop": {endpoints[0]: True, endpoints[1]: False},
                     "vpc": {endpoints[0]: True, endpoints[1]: True},
                     "branch": {endpoints[0]: True, endpoints[1]: True}}

    spools = {v: tmp_path / f"spool-{v}" for v in names}
    watches = {v.name: subprocess.Popen(
        [*lab.exec_argv(v.name, []), *KPROBE, "watch", "-b", v.bootstrap, "--vantage", v.name, "--every", EVERY,
         "--count", str(WATCH_RUNS), "-m", TIMEOUT, "--json", "--publish", f"{COLLECTOR_NAME}:{PORT}/{REPORTS_TOPIC}",
         "--spool", str(spools[v.name])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for v in lab.scenario.vantages}
    reports: dict[str, list[dict]] = {v: [] for v in names}
    try:
        # The branch's route to the monitoring network goes after its first run and comes back after its second:
        # each watch prints a run's report once its delivery is done, so the cut falls between two runs.
        reports["branch"].append(_read_run(watches["branch"], "branch"))
        assert _spooled(spools["branch"]) == []  # published at once
        lab.set_route("branch", MONITORING_NET, present=False)
        reports["branch"].append(_read_run(watches["branch"], "branch"))
        assert _spooled(spools["branch"]) == [reports["branch"][1]["id"]]  # kept, not lost
        lab.set_route("branch", MONITORING_NET, present=True)
        for vantage, proc in watches.items():
            while len(reports[vantage]) < WATCH_RUNS:
                reports[vantage].append(_read_run(proc, vantage))
            _, stderr = proc.communicate(timeout=60)
            # --count: the worst verdict of its runs (the laptop has no route to broker 2: a gap each run).
            assert proc.returncode == (1 if vantage == "laptop" else 0), (vantage, stderr)
            assert ("1 report stays spooled" in stderr) == (vantage == "branch"), (vantage, stderr)
    finally:
        for proc in watches.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert all(_spooled(spool) == [] for spool in spools.values())  # the third run forwarded the second's report

    # Hand counts from the reports the watches printed: 3 vantages x 3 runs, 9 distinct reports, and per
    # (vantage, endpoint) the runs that found it reachable, which must be all or none, as connect() said.
    ids = [r["id"] for runs in reports.values() for r in runs]
    assert len(ids) == len(set(ids)) == len(names) * WATCH_RUNS
    hand = {(v, f"{e['host']}:{e['port']}"): (0, 0) for v in names for e in reports[v][0]["endpoints"]}
    for vantage, runs in reports.items():
        for report in runs:
            for e in report["endpoints"]:
                probes, ok = hand[(vantage, f"{e['host']}:{e['port']}")]
                hand[(vantage, f"{e['host']}:{e['port']}")] = (probes + 1, ok + (e["status"] == "reachable"))
    assert hand == {(v, e): (WATCH_RUNS, WATCH_RUNS if reach[v][e] else 0) for v in names for e in endpoints}

    # The aggregation, on the monitoring network (the only place the topic is reachable from).
    out = tmp_path / "aggregate"
    done = subprocess.run([*lab.exec_argv("monitoring", []), *KPROBE, "aggregate", "--kafka",
                           f"{COLLECTOR_NAME}:{PORT}/{REPORTS_TOPIC}", "--out", str(out)],
                          capture_output=True, text=True, timeout=280, check=False,
                          env={**os.environ, "KPROBE_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("9 records: 9 reports aggregated (9 in the window, 18 endpoint observations), "
                                  "0 duplicates, 0 quarantined"), done.stdout
    # Quiet (defect 6): not a line on the terminal from a run that worked, not even the JVM's start-up
    # lines (its Kafka source's among them), which are in the run's log, not lost.
    assert done.stderr == ""
    [log] = (tmp_path / "cache" / "aggregate").glob("spark-*.log")
    assert "Using Spark's default log4j profile" in log.read_text()
    rows = [json.loads(line) for f in (out / "json" / "endpoint_vantage").glob("*.json")
            for line in f.read_text().splitlines()]
    matrix = {(r["vantage"], f"{r['host']}:{r['port']}"): (r["probes"], r["successes"]) for r in rows}
    assert matrix == hand
    assert {r["cluster_id"] for r in rows} == {reports["vpc"][0]["bootstraps"][0]["cluster_id"]}
    # report.html draws the same matrix (its cells: endpoint index, vantage index, probes, successes, ...).
    page = (out / "report.html").read_text()
    data = json.loads(page.split('<script type="application/json" id="kprobe-data">', 1)[1].split("</script>", 1)[0])
    [cluster] = data["clusters"]
    drawn = {(cluster["vantages"][cell[1]], cluster["endpoints"][cell[0]][1]): (cell[2], cell[3])
             for cell in cluster["cells"]}
    assert drawn == hand
    assert data["counts"]["reports"] == 9 and data["counts"]["duplicates"] == 0
