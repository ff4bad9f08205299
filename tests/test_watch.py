"""Scheduled probes: files, schedule, signals, Prometheus, and publishing with spool-and-forward."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import jsonschema
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from kprobe.report import json_report

SCHEMA = json_report.schema()


def kprobe(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
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
    done = kprobe("watch", "-b", listeners_lab.bootstrap("LISTENER_FRED"), "--every", "0.3s", "--count", "3",
                  "--out", str(tmp_path), "--vantage", "laptop")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3 and done.stdout.startswith("run 1 ")
    reports = reports_in(tmp_path)
    assert len(reports) == 3 and len({r["id"] for r in reports}) == 3
    assert all(r["summary"]["status"] == "ok" and r["vantage"]["name"] == "laptop" for r in reports)
    # the vantage records the local source address of its connections
    assert reports[0]["vantage"]["source_addresses"] == ["127.0.0.1"]
    assert reports[0]["endpoints"][0]["tcp"][0]["source"] == "127.0.0.1"


def test_two_vantages_differ_exactly_where_their_views_differ(listeners_lab, tmp_path):
    bootstrap = listeners_lab.real_endpoint("LISTENER_BOB")
    for view in ("docker", "host"):
        done = kprobe("watch", "-b", bootstrap, "--nameserver", listeners_lab.nameserver(view), "--vantage", view,
                      "--every", "0.2s", "--count", "2", "--out", str(tmp_path / view), "--json")
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 2  # JSON Lines
    docker, host = reports_in(tmp_path / "docker"), reports_in(tmp_path / "host")
    assert len(docker) == len(host) == 2
    for a, b in zip(docker, host, strict=True):
        assert [x["brokers"] for x in a["bootstraps"]] == [x["brokers"] for x in b["bootstraps"]]
        assert a["endpoints"][0]["host"] == b["endpoints"][0]["host"] == "kafka0"
        assert (a["endpoints"][0]["dns"]["status"], b["endpoints"][0]["dns"]["status"]) == ("ok", "nxdomain")
        assert (a["summary"]["status"], b["summary"]["status"]) == ("ok", "gap")
        assert [f["code"] for f in a["findings"]] == []
        assert [f["code"] for f in b["findings"]] == ["ADVERTISED_UNRESOLVABLE"]


def test_sigterm_during_a_run_exits_cleanly(three_lab, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "kprobe", "watch", "-b", three_lab.real_endpoint("DARK", 0),
                             "--timeout", "2", "--every", "30s", "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)  # inside the run: waiting on the blackholed endpoints
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    reports = reports_in(tmp_path)  # the run finished within the grace, whole
    assert len(reports) == 1 and reports[0]["summary"]["status"] == "gap"
    assert out.startswith("run 1 ")


def test_a_late_run_skips_slots(three_lab, tmp_path):
    done = kprobe("watch", "-b", three_lab.real_endpoint("DARK", 0), "--timeout", "1", "--every", "0.4s",
                  "--count", "2", "--out", str(tmp_path))
    assert done.returncode == 0
    assert re.search(r"run 1 took \d+\.\ds, longer than --every 0\.4s: skipping \d+ slot", done.stderr)
    assert len(reports_in(tmp_path)) == 2


def test_memory_stays_flat_over_many_runs(listeners_lab):
    done = kprobe("watch", "-b", listeners_lab.bootstrap("LISTENER_FRED"), "--every", "0.01s", "--count", "1000",
                  "--verbose", timeout=600)
    assert done.returncode == 0
    rss = [float(m) for m in re.findall(r"peak RSS ([\d.]+) MB", done.stderr)]
    assert len(rss) == 1000
    print(f"peak RSS after run 50: {rss[49]:.1f} MB, after run 1000: {rss[-1]:.1f} MB")
    assert rss[-1] - rss[49] < 8


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


def _consume_ids(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> list[str]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    ids: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                if len(ids) >= expected and msg is None:
                    break
                continue
            ids.append(json.loads(msg.value())["id"])
    finally:
        consumer.close()
    return ids


def test_publish_spools_while_the_collector_is_down_and_loses_nothing(listeners_lab, collector_lab, tmp_path):
    collector = collector_lab.bootstrap("CLIENT")
    topic = "kprobe-reports"
    admin = AdminClient({"bootstrap.servers": collector})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    del admin  # its background connections would log while the collector is down
    spool = tmp_path / "spool"
    args = ["probe", "-b", listeners_lab.bootstrap("LISTENER_FRED"), "--publish", f"{collector}/{topic}",
            "--spool", str(spool), "--json", "--timeout", "2", "--vantage", "office"]
    sent_ids = []
    for _ in range(2):
        done = kprobe(*args)
        assert done.returncode == 0, done.stderr
        sent_ids.append(json.loads(done.stdout)["id"])
    assert list(spool.glob("*.json")) == []

    collector_lab.stop_node(0)
    try:
        for _ in range(2):  # the collector is down: runs go on, reports wait in the spool
            done = kprobe(*args)
            assert done.returncode == 0
            assert "reports stay spooled" in done.stderr
            sent_ids.append(json.loads(done.stdout)["id"])
        assert len(list(spool.glob("*.json"))) == 2
        # a crash between spooling and sending: kill -9 while it waits for the collector
        proc = subprocess.Popen([sys.executable, "-m", "kprobe", *args[:-4], "--timeout", "20",
                                 "--vantage", "office"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while len(list(spool.glob("*.json"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        assert len(list(spool.glob("*.json"))) == 3  # spooled before the send: nothing lost
        crashed = [json.loads(p.read_text())["id"] for p in spool.glob("*.json")]
        sent_ids.extend(i for i in crashed if i not in sent_ids)
    finally:
        collector_lab.start_node(0)

    done = kprobe(*args)  # back: the spool is forwarded oldest first, then this run's report
    assert done.returncode == 0, done.stderr
    sent_ids.append(json.loads(done.stdout)["id"])
    assert list(spool.glob("*.json")) == []
    received = _consume_ids(collector, topic, expected=len(sent_ids))
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
    assert b"asking 4 bootstrap address(es) for metadata" in seen or b"checking who answers" in seen
    piped = kprobe("probe", "--json", *[a for b in bootstraps for a in ("-b", b)])
    assert piped.stderr == ""
