"""Scheduled probes: files, schedule, signals, Prometheus, and publishing with spool-and-forward.

The schedule's arithmetic is tested on a fake clock (kprobe.delivery.watch's Clock seam): time that
moves only when the watch waits, so waits cost nothing and every start is exact. Runs are real
probes of the lab's brokers throughout; where the interval is not the point, `kprobe watch` runs
in-process (tests/support/cli_runner.py) on the fake clock. A few runs keep the real clock in a process of
their own, end to end: three runs at --every 0.3s, a run longer than --every, the signals and kill -9.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import jsonschema
import pytest
from cli_runner import run_cli
from confluent_kafka import Consumer, TopicPartition
from conftest import new_topic, restart_settled, signal_when
from prometheus_client.parser import text_string_to_metric_families

from kprobe.delivery import watch as watch_module
from kprobe.output import json_report

SCHEMA = json_report.schema()


class FakeClock:
    """A clock for the schedule that moves only when the watch waits: a run takes no time on it.

    `waits` keeps every wait asked for; `now` is where the clock stands (it starts at 1000).
    """

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return stop.is_set()


@pytest.fixture
def fake_clock(monkeypatch) -> FakeClock:
    """Every `kprobe watch` this test runs in-process schedules on one FakeClock (the default clock swapped)."""
    clock = FakeClock()
    monkeypatch.setattr(watch_module, "SystemClock", lambda: clock)
    return clock


def watch_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe watch ARGS` by kprobe.cli.main in this process: with `fake_clock`, no wait takes real time."""
    return run_cli(["watch", *args])


def kprobe(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` by kprobe.cli.main in this process (tests/support/cli_runner.py), on the real clock."""
    return run_cli(args)


def kprobe_process(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`kprobe ARGS` as a process of its own, as users start it: the end-to-end runs on the real clock."""
    return subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def reports_in(directory: Path) -> list[dict]:
    files = sorted(directory.rglob("*.json"))
    assert not [p for p in directory.rglob("*") if p.name.startswith(".")], "temporary files left behind"
    out = []
    for path in files:
        data = json.loads(path.read_text())
        jsonschema.validate(data, SCHEMA)
        assert re.fullmatch(rf"{re.escape(data['vantage']['name'])}-\d{{8}}T\d{{6}}\.\d{{3}}Z-{data['id']}\.json",
                            path.name), path.name
        assert path.parent.name == data["started_at"][:10]
        out.append(data)
    return out


def test_watch_count_3_writes_3_reports(listeners_lab, tmp_path):
    # Each run's deadline is the interval (watch.py): long enough that a loaded machine's run still ends whole.
    done = kprobe_process("watch", "-b", listeners_lab.bootstrap("LISTENER_FRED"), "--every", "1s", "--count", "3",
                          "--out", str(tmp_path), "--vantage", "laptop")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3 and done.stdout.startswith("run 1 ")
    reports = reports_in(tmp_path)
    assert len(reports) == 3 and len({r["id"] for r in reports}) == 3
    assert all(r["summary"]["status"] == "ok" and r["vantage"]["name"] == "laptop" for r in reports)
    # the vantage records the local source address of its connections
    assert reports[0]["vantage"]["source_addresses"] == ["127.0.0.1"]
    assert reports[0]["endpoints"][0]["tcp"][0]["source"] == "127.0.0.1"


def test_the_summary_line_names_the_first_finding_as_show_summary_does(cloud_lab, tmp_path):
    """The line names the first finding. Its glance is show --summary's, the endpoint named beside the code
    where the message's first 100 characters leave it out (here they name only the bootstrap)."""
    endpoint = cloud_lab.listener("INTERNAL").advertised
    done = kprobe("watch", "-b", cloud_lab.bootstrap("INTERNAL"), "-n", cloud_lab.nameserver("internet"), "--count",
                  "1", "--timeout", "2", "--out", str(tmp_path), "--vantage", "internet")
    assert done.returncode == 1, done.stderr  # its one run found a gap
    [line] = done.stdout.splitlines()
    head, _, glance = line.partition(")  ADVERTISED_UNRESOLVABLE")
    assert re.fullmatch(r"run 1 \S+ internet GAP: 1/1 bootstraps answered, 0/1 advertised endpoints usable from here, 1 errors, "
                        r"\d+ warnings \([\d.]+m?s", head), line
    assert glance.startswith(f" ({endpoint}): You reached the cluster at {cloud_lab.bootstrap('INTERNAL')}, but")
    assert glance.endswith("...") and len(glance.split(": ", 1)[1]) == 100
    shown = kprobe("show", "--summary", str(tmp_path))
    # One summary line: show's, after its vantage and cluster, is watch's, after its run number and vantage.
    assert shown.stdout.endswith(line.split(" ", 4)[4] + "\n"), (shown.stdout, line)


def test_a_bounded_watch_exits_with_the_worst_verdict_and_each_line_names_its_vantage(listeners_lab, fake_clock):
    """LISTENER_BOB advertises kafka0: seen from the host's DNS it does not resolve (every run a gap, exit 1, as
    `kprobe probe` exits), from the Docker network's it does (exit 0). Two watches of one broker, their lines
    printed together, each saying which vantage it is."""
    bootstrap = listeners_lab.real_endpoint("LISTENER_BOB")
    done = {view: watch_in_process("-b", bootstrap, "--nameserver", listeners_lab.nameserver(view), "--vantage",
                                   f"{view}-view", "--every", "1s", "--count", "3", "--timeout", "2")
            for view in ("host", "docker")}
    assert (done["host"].returncode, done["docker"].returncode) == (1, 0), (done["host"].stderr, done["docker"].stderr)
    probe = kprobe("probe", "-b", bootstrap, "--nameserver", listeners_lab.nameserver("host"), "--timeout", "2")
    assert probe.returncode == done["host"].returncode  # one exit code table for both commands
    for view, verdict in (("host", "GAP"), ("docker", "OK")):
        lines = done[view].stdout.splitlines()
        assert [line.split(" ")[:2] for line in lines] == [["run", "1"], ["run", "2"], ["run", "3"]]
        assert all(re.match(rf"run \d \S+Z {view}-view {verdict}: 1/1 bootstraps answered", line) for line in lines), lines
    assert all("  ADVERTISED_UNRESOLVABLE" in line for line in done["host"].stdout.splitlines())


def test_a_bounded_watch_where_no_bootstrap_answers_exits_3(tmp_path):
    """The worst verdict is `failed`: the code `kprobe probe` gives when no bootstrap answered."""
    closed = _refusing_address()
    done = kprobe("watch", "-b", closed, "--every", "0.1s", "--count", "2", "--timeout", "0.5", "--vantage", "ci")
    assert done.returncode == 3, done.stderr
    assert [line.split(" ")[3:5] for line in done.stdout.splitlines()] == [["ci", "FAILED:"], ["ci", "FAILED:"]]


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([], None),
    (["ok", "ok"], "ok"),
    (["ok", "gap", "ok"], "gap"),
    (["gap", "failed", "ok"], "failed"),
    (["failed", "interrupted"], "interrupted"),
])
def test_the_worst_verdict_is_by_the_probe_s_own_order(verdicts, expected):
    assert watch_module.worst(verdicts) == expected


def test_two_vantages_differ_exactly_where_their_views_differ(listeners_lab, tmp_path, fake_clock):
    bootstrap = listeners_lab.real_endpoint("LISTENER_BOB")
    for view in ("docker", "host"):
        done = watch_in_process("-b", bootstrap, "--nameserver", listeners_lab.nameserver(view), "--vantage", view,
                                "--every", "1s", "--count", "2", "--out", str(tmp_path / view), "--json")
        assert done.returncode == {"docker": 0, "host": 1}[view], done.stderr  # the worst verdict of its runs
        assert len(done.stdout.splitlines()) == 2  # JSON Lines
    assert fake_clock.waits == [1.0, 1.0]  # each watch waited once, a whole --every (its runs took no clock time)
    docker, host = reports_in(tmp_path / "docker"), reports_in(tmp_path / "host")
    assert len(docker) == len(host) == 2
    for a, b in zip(docker, host, strict=True):
        assert [x["brokers"] for x in a["bootstraps"]] == [x["brokers"] for x in b["bootstraps"]]
        assert a["endpoints"][0]["host"] == b["endpoints"][0]["host"] == "kafka0"
        assert (a["endpoints"][0]["dns"]["status"], b["endpoints"][0]["dns"]["status"]) == ("ok", "nxdomain")
        assert (a["summary"]["status"], b["summary"]["status"]) == ("ok", "gap")
        assert [f["code"] for f in a["findings"]] == []
        assert [f["code"] for f in b["findings"]] == ["ADVERTISED_UNRESOLVABLE"]


@pytest.mark.parametrize(("bound", "code"), [
    ((), 0),  # a service stopped by its manager: a clean stop, whatever its runs found
    (("--count", "5"), 1),  # a bounded watch stopped early: the worst verdict of the runs it delivered
])
def test_sigterm_during_a_run_exits_cleanly(three_lab, tmp_path, bound, code):
    done, _ = signal_when(["watch", "-b", three_lab.real_endpoint("DARK", 0), "--timeout", "2", "--every", "30s",
                           *bound, "--out", str(tmp_path)], "distinct advertised endpoints after", signal.SIGTERM)
    out, err = done.stdout, done.stderr  # the signal came inside the run: waiting on the blackholed endpoints
    assert done.returncode == code, err
    assert "Traceback" not in err
    reports = reports_in(tmp_path)  # the run finished within the grace, whole
    assert len(reports) == 1 and reports[0]["summary"]["status"] == "gap"
    assert out.startswith("run 1 ")


def test_a_late_run_skips_slots(three_lab, tmp_path):
    done = kprobe_process("watch", "-b", three_lab.real_endpoint("DARK", 0), "--timeout", "1", "--every", "0.4s",
                          "--count", "2", "--out", str(tmp_path))
    assert done.returncode == 1, done.stderr  # the blackholed endpoints: both runs found a gap
    assert re.search(r"run 1 took \d+\.\ds, longer than --every 0\.4s: skipping \d+ slot", done.stderr)
    assert len(reports_in(tmp_path)) == 2


def test_memory_stays_flat_over_thousands_of_complete_runs(listeners_lab, capsys):
    """1,200 runs that really complete (status ok), in process, back to back: peak RSS stays flat from the
    100th to the last (a kilobyte kept per run would be over a megabyte).

    In process, so a run costs the probe and not a Python start-up; identity checks off and a
    deadline far above a run's length, so no run is cut short.
    """
    import logging

    from kprobe.delivery.deliver import Outputs
    from kprobe.delivery.watch import run_watch
    from kprobe.options import ProbeOptions, Schedule, parse_addresses

    runs = 1200
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("kprobe.delivery.watch")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    options = ProbeOptions(bootstraps=parse_addresses([listeners_lab.bootstrap("LISTENER_FRED")]), timeout=5,
                           deadline=10, identity=False, vantage="mem")
    started = time.monotonic()
    try:
        code = run_watch(options, Outputs(), Schedule(every=0.001, count=runs))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        signal.signal(signal.SIGTERM, saved[0])
        signal.signal(signal.SIGINT, saved[1])
    elapsed = time.monotonic() - started
    assert code == 0
    summaries = capsys.readouterr().out.splitlines()
    assert len(summaries) == runs
    statuses = [re.match(r"run \d+ \S+ mem (\w+): 1/1 bootstraps answered, (\d+)/(\d+) advertised endpoints usable", s)
                for s in summaries]
    assert all(m and m.group(1) == "OK" and m.group(2) == m.group(3) == "1" for m in statuses), \
        [s for s, m in zip(summaries, statuses, strict=True) if not (m and m.group(1) == "OK")][:3]
    rss = [float(m) for m in re.findall(r"peak RSS ([\d.]+) MB", "\n".join(lines))]
    assert len(rss) == runs
    print(f"{runs} runs in {elapsed:.1f}s; peak RSS after run 100: {rss[99]:.1f} MB, after run {runs}: {rss[-1]:.1f} MB")
    assert rss[-1] - rss[99] < 8


def test_prometheus_exposition_of_a_gap(listeners_lab, tmp_path):
    prom = tmp_path / "kprobe.prom"
    done = kprobe("probe", "-b", listeners_lab.real_endpoint("LISTENER_ALICE"), "--nameserver",
                  listeners_lab.nameserver("host"), "--format", "prometheus", "--prom-file", str(prom),
                  "--vantage", "office")
    assert done.returncode == 1
    assert prom.read_text() == done.stdout
    families = {f.name: f for f in text_string_to_metric_families(done.stdout)}
    assert set(families) >= {"kprobe_endpoint_up", "kprobe_dns_lookup_seconds", "kprobe_bootstrap_up",
                             "kprobe_findings", "kprobe_probe_duration_seconds", "kprobe_probe_success"}
    [up] = families["kprobe_endpoint_up"].samples
    port = listeners_lab.listener("LISTENER_ALICE").port
    assert up.labels == {"cluster_id": listeners_lab.cluster_id, "node_id": "0", "host": "never-gonna-give-you-up",
                         "port": str(port), "vantage": "office"}
    assert up.value == 0
    assert families["kprobe_probe_success"].samples[0].value == 0
    assert families["kprobe_bootstrap_up"].samples[0].value == 1
    [finding] = families["kprobe_findings"].samples
    assert finding.labels == {"code": "ADVERTISED_UNRESOLVABLE", "severity": "error", "vantage": "office"}
    assert finding.value == 1
    assert [p.name for p in tmp_path.iterdir()] == ["kprobe.prom"]


def _consume_ids(bootstrap: str, topic: str, timeout: float = 30) -> list[str]:
    """Every report id on the topic, read from the start to the end offsets it has now, so a duplicate shows
    as an id twice. Assigned, not subscribed: a consumer group's join took 3.7 s of the spool test."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # offset 0: the beginning
        ids: list[str] = []
        left = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            ids.append(json.loads(msg.value())["id"])
            if msg.offset() + 1 >= ends[msg.partition()]:
                left.discard(msg.partition())
        assert not left, f"partitions {sorted(left)} of {topic} not read to their end in {timeout} s"
        return ids
    finally:
        consumer.close()


def test_publish_spools_while_the_collector_is_down_and_loses_nothing(listeners_lab, collector_lab, tmp_path):
    collector = collector_lab.bootstrap("CLIENT")
    topic = new_topic(collector_lab, "kprobe-reports")
    spool = tmp_path / "spool"
    # The run's deadline is the publish's budget too: a collector broker just started (its lab started
    # for this test) took over 2 s for its first produce on a loaded machine, and the reports stayed
    # spooled. What the test proves does not hang on that deadline; refused connections come at once.
    base = ["probe", "-b", listeners_lab.bootstrap("LISTENER_FRED"), "--publish", f"{collector}/{topic}",
            "--spool", str(spool), "--json", "--vantage", "office"]
    args = [*base, "--timeout", "10"]
    sent_ids, said = [], []
    for _ in range(2):
        done = kprobe(*args)
        assert done.returncode == 0, done.stderr
        sent_ids.append(json.loads(done.stdout)["id"])
        said.append(done.stderr)
    assert list(spool.glob("*.json")) == [], said  # why a publish to a running collector kept its report

    collector_lab.stop_node(0)
    try:
        # The collector is down: runs go on, reports wait in the spool. Refused, the producer retries to the
        # run's deadline (a restarting collector takes the report in time), so these two runs get 4 s, not 10.
        down = [*base, "--timeout", "4"]
        for _ in range(2):
            done = kprobe(*down)
            assert done.returncode == 0
            assert re.search(r"collector \S+ not reachable \([^)]*refused[^)]*\); \d reports? stays? spooled", done.stderr)
            sent_ids.append(json.loads(done.stdout)["id"])
        assert len(list(spool.glob("*.json"))) == 2
        # a crash between spooling and sending: kill -9 while it waits for the collector
        proc = subprocess.Popen([sys.executable, "-m", "kprobe", *base, "--timeout", "20"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while len(list(spool.glob("*.json"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        assert len(list(spool.glob("*.json"))) == 3  # spooled before the send: nothing lost
        crashed = [json.loads(p.read_text())["id"] for p in spool.glob("*.json")]
        sent_ids.extend(i for i in crashed if i not in sent_ids)
    finally:
        # Back, and its partitions led again: what follows tests the spool's forwarding, not how soon a
        # restarted broker takes produce requests (under load, later than the run's 10 s).
        restart_settled(collector_lab, 0)

    done = kprobe(*args)  # back: the spool is forwarded oldest first, then this run's report
    assert done.returncode == 0, done.stderr
    sent_ids.append(json.loads(done.stdout)["id"])
    assert list(spool.glob("*.json")) == []
    received = _consume_ids(collector, topic)
    assert sorted(received) == sorted(sent_ids)  # every report exactly once, by id
    assert len(sent_ids) == 6


def test_progress_on_a_terminal_only(three_lab):
    import os
    import pty

    bootstraps = [three_lab.bootstrap("CLIENT", n) for n in (0, 1, 2)] + [three_lab.real_endpoint("PARTIAL", 0)]
    args = [sys.executable, "-m", "kprobe", "probe", "--json", *[a for b in bootstraps for a in ("-b", b)]]
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, env={**os.environ, "TERM": "xterm"})
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=60)
    os.close(master)
    assert json.loads(out)["summary"]["bootstraps"] == 4  # stdout stays clean JSON
    screen = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen)  # the bar's cursor movements and colours
    counts = [int(n) for n in re.findall(rb"bootstraps .*?(\d)/4", screen)]
    assert counts and counts[-1] == 4, screen[-400:]  # a bar counting bootstraps answered, up to all 4
    assert counts == sorted(counts)
    assert "\u2501".encode() in screen  # rich's bar glyph, not just a spinner line
    piped = kprobe("probe", "--json", *[a for b in bootstraps for a in ("-b", b)])
    assert piped.stderr == ""


# -- Prometheus: hostile label values, cluster ids, partial endpoints -----------------------------

def _control_bytes(data: bytes) -> set[int]:
    """Bytes a terminal would act on (everything below 0x20 but the newline, and DEL)."""
    return {b for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F}


def test_hostile_host_names_in_prometheus_output_are_escaped(tmp_path):
    from hostile_broker import Broker, HostileBroker, Script

    evil = b"\x1b[2J\x1b[31mpwned\x1b[0m\r\nbroker 9 at fake:1\x07"
    script = Script(brokers=[Broker(0, evil, 9092), Broker(1, b"kafka-\xff\xfe", 9092), Broker(2, b'q"uo\\te', 9)])
    prom = tmp_path / "kprobe.prom"
    watch_prom = tmp_path / "watch.prom"
    with HostileBroker(script) as broker:
        probe = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", broker.address, "--timeout", "2",
                                "--format", "prometheus", "--prom-file", str(prom), "--vantage", "office"],
                               capture_output=True, timeout=60, check=False)
        watch = subprocess.run([sys.executable, "-m", "kprobe", "watch", "-b", broker.address, "--timeout", "2",
                                "--every", "1s", "--count", "2", "--format", "prometheus", "--prom-file",
                                str(watch_prom)], capture_output=True, timeout=60, check=False)
    for done, codes in ((probe, {1}), (watch, {1})):
        assert done.returncode in codes, done.stderr[-500:]
        assert b"Traceback" not in done.stderr and b"internal error" not in done.stderr, done.stderr[-500:]
        assert b"kprobe: run" not in done.stderr  # no delivery failed
        assert not _control_bytes(done.stdout) and not _control_bytes(done.stderr)
        done.stdout.decode("utf-8")  # strict: no raw undecodable byte reaches stdout
    assert prom.read_bytes() == probe.stdout
    assert not _control_bytes(watch_prom.read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kprobe.prom", "watch.prom"]  # no temporary file left
    for text in (prom.read_text(encoding="utf-8"), watch_prom.read_text(encoding="utf-8")):
        families = {f.name: f for f in text_string_to_metric_families(text)}
        hosts = {s.labels["node_id"]: s.labels["host"] for s in families["kprobe_endpoint_up"].samples}
        # the same visible text the human report shows (tests/runs/test_hostile_brokers.py), never the raw bytes
        assert hosts == {"0": "\\x1b[2J\\x1b[31mpwned\\x1b[0m\\x0d\\x0abroker 9 at fake:1\\x07",
                         "1": "kafka-\\xff\\xfe", "2": 'q"uo\\\\te'}
        assert all(s.value == 0 for s in families["kprobe_endpoint_up"].samples)
        assert {s.labels["cluster_id"] for s in families["kprobe_endpoint_up"].samples} == {"hostile-cluster"}
        findings = {s.labels["code"]: s.value for s in families["kprobe_findings"].samples}
        assert findings["INVALID_ADVERTISED_HOST"] == 3


def test_cluster_id_is_per_bootstrap_and_per_endpoint(listeners_lab, three_lab):
    fred = listeners_lab.bootstrap("LISTENER_FRED")
    three = three_lab.real_endpoint("CLIENT", 0)
    done = kprobe("probe", "-b", fred, "-b", three, "--no-identity", "--format", "prometheus")
    assert done.returncode in (0, 1), done.stderr  # two clusters behind one run may be called a gap
    assert listeners_lab.cluster_id != three_lab.cluster_id
    families = {f.name: f for f in text_string_to_metric_families(done.stdout)}
    bootstrap_cluster = {s.labels["bootstrap"]: s.labels["cluster_id"] for s in families["kprobe_bootstrap_up"].samples}
    assert bootstrap_cluster == {fred: listeners_lab.cluster_id, three: three_lab.cluster_id}
    endpoint_cluster = {(s.labels["host"], s.labels["port"]): s.labels["cluster_id"]
                        for s in families["kprobe_endpoint_up"].samples}
    fred_port = str(listeners_lab.listener("LISTENER_FRED").port)
    expected = {("localhost", fred_port): listeners_lab.cluster_id}
    for node in (0, 1, 2):
        ip, port = three_lab.real_endpoint("CLIENT", node).rsplit(":", 1)
        expected[(ip, port)] = three_lab.cluster_id
    assert endpoint_cluster == expected


def test_a_partial_endpoint_is_down(listeners_lab, tmp_path):
    """kafka0 resolves to the broker's address and to one where nothing listens: partial, so up is 0."""
    from kprobe.lab.dns_server import DnsServer

    broker_ip = listeners_lab.real_endpoint("LISTENER_BOB").rsplit(":", 1)[0]
    report = tmp_path / "report.json"
    with DnsServer({"kafka0": (broker_ip, "127.0.0.12")}, name="split") as dns:
        done = kprobe("probe", "-b", listeners_lab.real_endpoint("LISTENER_BOB"), "--nameserver", dns.nameserver,
                      "--no-identity", "--timeout", "2", "--format", "prometheus", "-o", str(report))
    assert done.returncode == 1, done.stderr
    data = json.loads(report.read_text())
    assert [e["status"] for e in data["endpoints"]] == ["partial"]
    assert {t["address"]: t["status"] for t in data["endpoints"][0]["tcp"]} == {broker_ip: "ok", "127.0.0.12": "refused"}
    families = {f.name: f for f in text_string_to_metric_families(done.stdout)}
    [up] = families["kprobe_endpoint_up"].samples
    assert up.labels["host"] == "kafka0" and up.labels["cluster_id"] == listeners_lab.cluster_id
    assert up.value == 0
    assert [s.labels["address"] for s in families["kprobe_tcp_connect_seconds"].samples] == [broker_ip]


def test_cron_example_survives_cron_and_sh():
    """cron makes an unescaped % a newline and runs /bin/sh, which has no $RANDOM."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "scheduling.md").read_text()
    [line] = re.findall(r"```cron\n(.+?)\n```", docs, re.S)
    assert not re.search(r"(?<!\\)%", line)
    assert "RANDOM" not in line and line.startswith("* * * * * ")
    sleep = line[len("* * * * * "):].split(";")[0].replace("sleep", "echo", 1)
    values = {int(subprocess.run(["/bin/sh", "-c", sleep], capture_output=True, text=True, check=True).stdout)
              for _ in range(30)}
    assert values <= set(range(10)) and len(values) > 1


# -- files never overwritten, jitter, SIGTERM -----------------------------------------------------

def test_out_never_overwrites_an_existing_report(tmp_path):
    from kprobe.errors import KprobeError
    from kprobe.output.files import report_path, write_new

    path = report_path(tmp_path, "office", "2026-11-22T18:00:00.123Z", "5f2b")
    write_new(path, "first\n")
    try:
        write_new(path, "second\n")
    except KprobeError as exc:
        assert "already exists" in str(exc) and "never overwritten" in str(exc)
    else:
        raise AssertionError("an existing report was replaced")
    assert path.read_text() == "first\n"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_text_holding_undecodable_bytes_is_still_written(tmp_path):
    """A non-UTF-8 byte kept from the network (a lone surrogate) must not fail the write."""
    from kprobe.output.files import write_atomic

    path = tmp_path / "kprobe.prom"
    write_atomic(path, 'kprobe_endpoint_up{host="kafka-\udcff"} 0\n')
    assert path.read_bytes() == b'kprobe_endpoint_up{host="kafka-\\udcff"} 0\n'
    assert [p.name for p in tmp_path.iterdir()] == ["kprobe.prom"]


def test_jitter_is_applied_within_bounds(listeners_lab, fake_clock):
    """Six real runs on the fake clock: each starts exactly its jitter after its slot, slots --every apart.

    A long --every costs no time on the fake clock, and each run's deadline (the interval, on the real clock) stays
    past what a run takes on a loaded machine."""
    done = watch_in_process("-b", listeners_lab.bootstrap("LISTENER_FRED"), "--no-identity", "--every", "2s",
                            "--jitter", "0.4s", "--count", "6", "--verbose")
    assert done.returncode == 0, done.stderr
    seen = re.findall(r"run (\d+): jitter ([\d.]+)s of at most 0\.4s, starting ([\d.-]+)s after its slot", done.stderr)
    assert [int(n) for n, _, _ in seen] == [1, 2, 3, 4, 5, 6]
    jitters = [float(j) for _, j, _ in seen]
    offsets = [float(o) for _, _, o in seen]
    assert all(0 <= j <= 0.4 for j in jitters)
    assert len(set(jitters)) > 1  # random, not a constant delay
    assert offsets == jitters  # each run starts its jitter after its slot: no earlier, and (no run late) no later
    # The waits: to run 1's jitter, then from each run's start to the next slot plus the next jitter.
    assert fake_clock.waits == pytest.approx([jitters[0], *(2 - a + b for a, b in itertools.pairwise(jitters))],
                                             abs=0.0011)  # the jitters as logged, to the millisecond
    assert fake_clock.now == pytest.approx(1000 + 5 * 2 + jitters[-1], abs=0.0011)


@pytest.mark.parametrize(("slot", "now", "expected"), [
    (10.0, 10.3, (11.0, 0)),  # done within the interval: the next slot
    (10.0, 11.0, (11.0, 0)),  # done right at the next slot: not late
    (10.0, 11.001, (12.0, 1)),  # a moment late: that slot is skipped
    (10.0, 12.0, (12.0, 1)),  # a whole interval late: one slot skipped, the run after starts on the grid
    (10.0, 13.5, (14.0, 3)),  # three slots overrun: skipped, never made up back to back
])
def test_a_late_run_skips_the_slots_it_overran_and_keeps_the_grid(slot, now, expected):
    assert watch_module.next_slot(slot, 1.0, now) == expected


def test_the_schedule_on_a_fake_clock_starts_each_run_on_its_slot(listeners_lab, capsys):
    """run_watch, the library API, with a clock given: real runs, no jitter, starts exactly --every apart."""
    from kprobe.delivery.deliver import Outputs
    from kprobe.options import ProbeOptions, Schedule, parse_addresses

    clock = FakeClock()
    options = ProbeOptions(bootstraps=parse_addresses([listeners_lab.bootstrap("LISTENER_FRED")]), timeout=5,
                           deadline=10, identity=False, vantage="clock")
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        assert watch_module.run_watch(options, Outputs(), Schedule(every=60, count=4), clock) == 0
    finally:
        signal.signal(signal.SIGTERM, saved[0])
        signal.signal(signal.SIGINT, saved[1])
    assert clock.waits == [60.0, 60.0, 60.0] and clock.now == 1180.0  # three minutes of schedule, none of it waited
    assert [line.split()[:2] for line in capsys.readouterr().out.splitlines()] == [["run", str(n)] for n in (1, 2, 3, 4)]


def test_sigterm_abandons_a_long_run_and_leaves_no_file(three_lab, tmp_path):
    """A run still waiting on blackholed endpoints after the grace is abandoned: exit 0, nothing written."""
    out, prom = tmp_path / "out", tmp_path / "metrics" / "kprobe.prom"
    prom.parent.mkdir()
    # The signal comes inside the run: connects to the blackholed endpoints take 15 s.
    done, took = signal_when(["watch", "-b", three_lab.real_endpoint("DARK", 0), "--timeout", "15", "--every", "60s",
                              "--out", str(out), "--prom-file", str(prom)], "distinct advertised endpoints after",
                             signal.SIGTERM)
    stdout, stderr = done.stdout, done.stderr
    assert done.returncode == 0, stderr
    assert took < 9  # the 5 s grace, not the 15 s timeout
    assert "Traceback" not in stderr and stdout == ""
    assert not out.exists() or list(out.rglob("*")) == []
    assert list(prom.parent.iterdir()) == []


# -- publishing: a bounded spool, kill -9 of watch, no secret anywhere ---------------------------

def _refusing_address() -> str:
    """127.0.0.1 and a port nothing listens on: a collector that is down."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_full_spool_drops_the_oldest_loudly(listeners_lab, tmp_path, fake_clock):
    spool = tmp_path / "spool"
    done = watch_in_process("-b", listeners_lab.bootstrap("LISTENER_FRED"), "--no-identity", "--every", "2s",
                            "--count", "4", "--json", "--timeout", "1", "--publish", f"{_refusing_address()}/reports",
                            "--spool", str(spool), "--spool-max", "2")
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["id"] for line in done.stdout.splitlines()]
    assert len(ids) == 4
    full = re.findall(r"spool (\S+) is full \(2 reports\): dropped the (\d+) oldest unsent", done.stderr)
    assert full == [(str(spool), "1"), (str(spool), "1")]  # runs 3 and 4 each drop one
    remaining = sorted(p.name for p in spool.glob("*.json"))  # not the forwarders' .forward.lock
    assert [name.split("-", 1)[1] for name in remaining] == [f"{ids[2]}.json", f"{ids[3]}.json"]
    assert all(json.loads((spool / name).read_text())["id"] in ids[2:] for name in remaining)


def test_kill_9_of_watch_between_spool_and_send_loses_nothing(listeners_lab, collector_lab, tmp_path):
    collector = collector_lab.bootstrap("CLIENT")
    topic = new_topic(collector_lab, "kprobe-kill")
    spool = tmp_path / "spool"
    args = ["-b", listeners_lab.bootstrap("LISTENER_FRED"), "--no-identity", "--publish", f"{collector}/{topic}",
            "--spool", str(spool), "--json"]
    collector_lab.stop_node(0)
    try:
        # run 1 waits 2 s for an ack, gives up (stays spooled); run 2 spools and is killed while it waits
        proc = subprocess.Popen([sys.executable, "-m", "kprobe", "watch", *args, "--timeout", "2", "--every", "3s"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while len(list(spool.glob("*.json"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # inside run 2's wait for the collector
        proc.kill()
        stdout, stderr = proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert re.search(r"collector \S+ not reachable \([^)]*refused[^)]*\); 1 report stays spooled", stderr)
        printed = [json.loads(line)["id"] for line in stdout.splitlines()]
        spooled = [json.loads(p.read_text())["id"] for p in sorted(spool.glob("*.json"))]
        assert len(printed) == 1 and len(spooled) == 2 and spooled[0] == printed[0]  # run 2 only in the spool
    finally:
        collector_lab.start_node(0)
    done = kprobe("watch", *args, "--timeout", "15", "--every", "1s", "--count", "1")
    assert done.returncode == 0, done.stderr
    fresh = json.loads(done.stdout)["id"]
    assert list(spool.glob("*.json")) == []
    expected = [*spooled, fresh]
    received = _consume_ids(collector, topic)
    assert received == expected  # each report exactly once, oldest first


def test_no_sasl_secret_in_any_output_of_watch(sasl_lab, tmp_path, fake_clock):
    secret = sasl_lab.passwords["alice"].encode()
    auth = ["-b", sasl_lab.bootstrap("SASL_PLAIN"), "-X", "security.protocol=SASL_PLAINTEXT", "-X",
            "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", f"sasl.password={secret.decode()}"]
    runs = []
    for fmt in ("text", "json", "prometheus"):
        runs.append(watch_in_process(
            *auth, "--format", fmt, "--every", "1s", "--count", "2",
            "--verbose", "--timeout", "1", "--out", str(tmp_path / "out"), "--prom-file", str(tmp_path / f"{fmt}.prom"),
            "--publish", f"{_refusing_address()}/reports", "--publish-property", f"sasl.password={secret.decode()}",
            "--spool", str(tmp_path / "spool")))
    for run in runs:
        assert run.returncode == 0, run.stderr[-500:]
        assert secret.decode() not in run.stdout and secret.decode() not in run.stderr, run.args[5:]
    assert '"sasl.password": "[redacted]"' in runs[1].stdout
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(list((tmp_path / "out").rglob("*.json"))) == 6 and len(list((tmp_path / "spool").glob("*.json"))) == 6
    assert len([p for p in files if p.suffix == ".prom"]) == 3
    for path in files:
        assert secret not in path.read_bytes(), path
    reports = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")]
    assert all(r["summary"]["status"] == "ok" for r in reports)


# -- a run that raises is a bug: one line, exit 3, no more runs -----------------------

# The module whose `diagnose` a run calls: the tests below break that pure step (the real rules
# run, then raise) to provoke a bug without touching any network code.
RUN_MODULE = "kprobe.runs.probe"

_BUG_ON_RUN_2 = """
import importlib
import sys

run = importlib.import_module(sys.argv[1])
real = run.diagnose
calls = []


def diagnose(bootstraps, endpoints, *controllers):
    findings = real(bootstraps, endpoints, *controllers)  # the real rules on the real run's results, then a bug
    calls.append(len(findings))
    if len(calls) == 2:
        raise KeyError("advertised_by")
    return findings


run.diagnose = diagnose
sys.argv = ["kprobe", *sys.argv[2:]]
from kprobe.cli import main

main()
"""


def test_a_run_that_raises_ends_watch_with_one_line_and_exit_3(listeners_lab, tmp_path):
    """Run 1 is delivered; run 2 raises. The old watch took the empty result for "abandoned on a
    signal": exit 0 (a service manager's restart-on-failure never fired) and the worker thread's
    raw traceback on stderr.

    The real `kprobe watch` in its own process, against a real broker, with no --count: only the
    bug can end it, so a watch that swallowed the bug and went on would hit the timeout.
    """
    env = {k: v for k, v in os.environ.items() if k != "KPROBE_DEBUG"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _BUG_ON_RUN_2, RUN_MODULE, "watch", "-b",
                           listeners_lab.bootstrap("LISTENER_FRED"), "--no-identity", "--every", "2s",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False, env=env)
    elapsed = time.monotonic() - started
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])  # an internal error, never 0, 1 or 130
    assert "Traceback" not in done.stderr and "Exception in thread" not in done.stderr, done.stderr[-2000:]
    # Before it, at most a late run's warning, nothing else. Each run's deadline is the interval (watch.py): 2 s,
    # not 0.2 s, where a loaded suite run's bootstrap alone took 222 ms and run 1 stopped before its endpoint.
    *before, line = done.stderr.splitlines()
    assert all(re.fullmatch(r"kprobe: run \d+ took [\d.]+s, longer than --every 2s: skipping \d+ slot\(s\)", b)
               for b in before), done.stderr
    assert line.startswith("kprobe: internal error: KeyError: 'advertised_by'"), line
    assert "KPROBE_DEBUG=1" in line
    # Run 1 whole (its summary line and its file); nothing of run 2; no run 3.
    assert len(done.stdout.splitlines()) == 1 and done.stdout.startswith("run 1 "), done.stdout
    [report] = reports_in(tmp_path)
    assert report["summary"]["status"] == "ok"
    assert elapsed < 30, elapsed


def test_run_watch_raises_what_a_run_raised(listeners_lab, monkeypatch, capsys):
    """The library API: `run_watch` raises the run's exception instead of returning 0, and stops
    at the first run (of 3) that raised."""
    from kprobe.delivery.deliver import Outputs
    from kprobe.delivery.watch import run_watch
    from kprobe.options import ProbeOptions, Schedule, parse_addresses

    class RuleBug(Exception):
        pass

    run = importlib.import_module(RUN_MODULE)
    real = run.diagnose
    calls: list[int] = []

    def diagnose(bootstraps, endpoints, *controllers):
        calls.append(len(real(bootstraps, endpoints, *controllers)))
        raise RuleBug("a rule met data it did not expect")

    monkeypatch.setattr(run, "diagnose", diagnose)
    options = ProbeOptions(bootstraps=parse_addresses([listeners_lab.bootstrap("LISTENER_FRED")]), timeout=5,
                           deadline=10, identity=False, vantage="bug")
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(RuleBug, match="did not expect"):
            run_watch(options, Outputs(), Schedule(every=0.05, count=3))
    finally:
        signal.signal(signal.SIGTERM, saved[0])
        signal.signal(signal.SIGINT, saved[1])
    assert len(calls) == 1  # the first run raised, and no other run started
    assert capsys.readouterr().out == ""  # no summary for a run that has no report
