"""kprobe aggregate on reports written by real probes of the lab, checked against hand counts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from kprobe.aggregate import transforms as tf  # noqa: E402
from kprobe.aggregate.job import JobOptions, read_records, run, session  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    s = session("local[2]", app="kprobe-tests")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def lab_reports(listeners_lab, tmp_path_factory) -> Path:
    """Reports from two vantages of one cluster: the docker network (no gap), the docker host (gap)."""
    root = tmp_path_factory.mktemp("reports")
    for view in ("docker", "host"):
        done = subprocess.run(
            [sys.executable, "-m", "kprobe", "watch", "-b", listeners_lab.real_endpoint("LISTENER_BOB"),
             "--nameserver", listeners_lab.nameserver(view), "--vantage", view, "--every", "0.2s", "--count", "3",
             "--out", str(root / view)], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
    return root


def load(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))]


def hand_endpoint_vantage(reports: list[dict]) -> dict[tuple, dict]:
    """The expected rows, computed from the report files alone."""
    rows: dict[tuple, dict] = defaultdict(lambda: {"probes": 0, "successes": 0, "fail_dns": 0, "times": [],
                                                   "dns_ms": []})
    for r in reports:
        cluster = next(b["cluster_id"] for b in r["bootstraps"] if b["cluster_id"])
        for e in r["endpoints"]:
            row = rows[(cluster, e["node_id"], e["host"], e["port"], r["vantage"]["name"])]
            row["probes"] += 1
            row["successes"] += e["status"] == "reachable"
            row["fail_dns"] += e["status"] == "unresolvable"
            row["times"].append(r["started_at"])
            row["dns_ms"].append(e["dns"]["ms"])
    return rows


def test_endpoint_vantage_matches_hand_counts(spark, lab_reports, listeners_lab):
    reps = tf.reports(tf.quarantine_reason(tf.parse(read_records(spark, (str(lab_reports),)))))
    got = {(r.cluster_id, r.node_id, r.host, r.port, r.vantage): r
           for r in tf.endpoint_vantage(tf.observations(reps)).collect()}
    expected = hand_endpoint_vantage(load(lab_reports))
    assert set(got) == set(expected) and len(got) == 2
    for key, want in expected.items():
        row = got[key]
        assert row.probes == want["probes"] == 3
        assert row.successes == want["successes"]
        assert row.success_rate == want["successes"] / want["probes"]
        assert row.fail_dns == want["fail_dns"]
        assert row.first_seen.isoformat()[:19] == min(want["times"])[:19]
        assert row.last_seen.isoformat()[:19] == max(want["times"])[:19]
        assert row.dns_max_ms == pytest.approx(max(want["dns_ms"]))
        assert row.status_changes == 0
    docker = got[(listeners_lab.cluster_id, 0, "kafka0", listeners_lab.listener("LISTENER_BOB").port, "docker")]
    host = got[(listeners_lab.cluster_id, 0, "kafka0", listeners_lab.listener("LISTENER_BOB").port, "host")]
    assert (docker.success_rate, docker.last_status) == (1.0, "ok")
    assert (host.success_rate, host.last_status, host.fail_dns) == (0.0, "dns", 3)


def test_cluster_summary_and_findings(spark, lab_reports, listeners_lab):
    reps = tf.reports(tf.quarantine_reason(tf.parse(read_records(spark, (str(lab_reports),)))))
    summary = {r.vantage: r for r in tf.cluster_summary(reps).collect()}
    reports = load(lab_reports)
    for vantage in ("docker", "host"):
        mine = [r for r in reports if r["vantage"]["name"] == vantage]
        row = summary[vantage]
        assert row.cluster_id == listeners_lab.cluster_id and row.reports == len(mine) == 3
        assert row.endpoints_advertised == 1
    assert summary["docker"].endpoints_reachable == 1 and summary["docker"].worst_finding is None
    assert summary["docker"].last_bad is None and summary["docker"].last_good is not None
    assert summary["host"].endpoints_reachable == 0
    assert (summary["host"].worst_finding, summary["host"].worst_severity) == ("ADVERTISED_UNRESOLVABLE", "error")
    assert summary["host"].last_good is None
    findings = tf.findings_by_day(reps).collect()
    assert [(f.vantage, f.code, f.occurrences) for f in findings] == [("host", "ADVERTISED_UNRESOLVABLE", 3)]


def test_advertised_drift(spark, lab_reports, tmp_path):
    reports = load(lab_reports / "docker")
    moved = json.loads(json.dumps(reports[-1]))
    moved["id"] = str(uuid.uuid4())
    moved["started_at"] = "2099-01-01T00:00:00.000Z"
    moved["bootstraps"][0]["brokers"][0]["host"] = "kafka0.moved"
    shutil.copytree(lab_reports, tmp_path / "in")
    (tmp_path / "in" / "moved.json").write_text(json.dumps(moved))
    reps = tf.reports(tf.quarantine_reason(tf.parse(read_records(spark, (str(tmp_path / "in"),)))))
    [change] = tf.advertised_changes(reps).collect()
    port = moved["bootstraps"][0]["brokers"][0]["port"]
    assert (change.vantage, change.node_id, change.previous, change.current) == (
        "docker", 0, f"kafka0:{port}", f"kafka0.moved:{port}")


def test_every_record_is_aggregated_or_quarantined(spark, lab_reports, tmp_path):
    inputs = tmp_path / "in"
    shutil.copytree(lab_reports, inputs)
    first = sorted(inputs.rglob("*.json"))[0]
    (inputs / "dup.json").write_text(first.read_text())  # re-delivered: counts once
    (inputs / "truncated.json").write_text(first.read_text()[:300])
    (inputs / "v2.jsonl").write_text(json.dumps({"schema": "kprobe.report/v2", "id": "x"}) + "\n")
    (inputs / "mixed.jsonl").write_text(
        json.dumps(json.loads(first.read_text())) + "\n" + "{not json\n" + json.dumps({"hello": 1}) + "\n")
    result = run(spark, JobOptions((str(inputs),), str(tmp_path / "out"), html=False))
    counts = result["counts"]
    assert counts["input_records"] == 6 + 1 + 1 + 1 + 3
    assert counts["quarantined"] == 4  # truncated, v2, not JSON, not a report
    assert counts["duplicates"] == 2  # dup.json and the first line of mixed.jsonl
    assert counts["reports"] == 6
    assert counts["reports"] + counts["duplicates"] + counts["quarantined"] == counts["input_records"]
    assert counts["quarantine_reasons"] == {
        "malformed JSON (truncated or not JSON)": 2,
        "unknown schema version kprobe.report/v2": 1,
        "not a kprobe report (no schema field)": 1,
    }
    quarantine = spark.read.parquet(str(tmp_path / "out" / "parquet" / "quarantine"))
    assert quarantine.count() == 4
    assert json.loads((tmp_path / "out" / "counts.json").read_text())["quarantined"] == 4


def test_cli_end_to_end_and_atomic_rerun(lab_reports, tmp_path):
    out = tmp_path / "out"
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "kprobe", "aggregate", str(lab_reports), "--out", str(out)],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == "6 records: 6 reports aggregated (6 in the window, 6 endpoint " \
                                          "observations), 0 duplicates, 0 quarantined"
    assert "0.0%  cluster" in done.stdout and "from host (3 probes, last dns)" in done.stdout
    assert sorted(p.name for p in out.iterdir()) == ["counts.json", "json", "parquet", "report.html"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging or old directory left
    page = (out / "report.html").read_text()
    assert "id='heatmap'" in page and page.count("data:image/png;base64,") >= 2
    rows = [json.loads(line) for f in (out / "json" / "endpoint_vantage").glob("*.json")
            for line in f.read_text().splitlines()]
    assert sorted(r["vantage"] for r in rows) == ["docker", "host"]


def test_without_pyspark_one_line_and_exit_2(tmp_path):
    code = ("import sys; sys.modules['pyspark'] = None; sys.argv = ['kprobe', 'aggregate', '.', '--out', 'x'];"
            "from kprobe.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr == "kprobe: error: kprobe aggregate needs PySpark: pip install 'kprobe[spark]'\n"


def test_spark_schema_is_derived_from_the_json_schema():
    from kprobe.aggregate.schema import report_schema
    from kprobe.report.json_report import schema

    spark_fields = {f.name for f in report_schema().fields}
    assert spark_fields >= set(schema()["required"])
    endpoint = next(f for f in report_schema().fields if f.name == "endpoints").dataType.elementType
    assert {"tcp", "dns", "identity", "tls", "status"} <= set(endpoint.names)


def test_reading_a_topic_gives_what_reading_the_files_gives(listeners_lab, collector_lab, tmp_path):
    """Reports published by real probes (--publish) and written by the same runs (--out)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    collector = collector_lab.bootstrap("CLIENT")
    topic = f"agg-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": collector})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    del admin
    for view in ("docker", "host"):
        for _ in range(2):
            done = subprocess.run(
                [sys.executable, "-m", "kprobe", "probe", "-b", listeners_lab.real_endpoint("LISTENER_BOB"),
                 "--nameserver", listeners_lab.nameserver(view), "--vantage", view, "--out", str(tmp_path / "files"),
                 "--publish", f"{collector}/{topic}", "--spool", str(tmp_path / "spool"), "--json"],
                capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode in (0, 1), done.stderr
    results = {}
    for name, extra in (("files", [str(tmp_path / "files")]), ("topic", ["--kafka", f"{collector}/{topic}"])):
        done = subprocess.run([sys.executable, "-m", "kprobe", "aggregate", *extra, "--out", str(tmp_path / name),
                               "--no-html"], capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        rows = [json.loads(line) for f in (tmp_path / name / "json" / "endpoint_vantage").glob("*.json")
                for line in f.read_text().splitlines()]
        results[name] = sorted(rows, key=lambda r: r["vantage"])
        assert done.stdout.startswith("4 records: 4 reports aggregated")
    assert results["files"] == results["topic"]
    assert [(r["vantage"], r["probes"], r["successes"]) for r in results["topic"]] == [("docker", 2, 2), ("host", 2, 0)]


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_report_html_renders_in_headless_chromium(tmp_path):
    from kprobe.aggregate.generate import reports, write_jsonl

    write_jsonl(tmp_path / "in", reports(vantages=3, clusters=2, hours=2))
    done = subprocess.run([sys.executable, "-m", "kprobe", "aggregate", str(tmp_path / "in"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    page = tmp_path / "out" / "report.html"
    shot = tmp_path / "shot.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--window-size=1400,2400"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="heatmap"' in dom.stdout and dom.stdout.count('class="timeline"') == 2
    assert "Uncaught" not in dom.stderr and ":CONSOLE(" not in dom.stderr
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120,
                   check=True)
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    colours = {tuple(round(float(c), 1) for c in px[:3]) for row in pixels[::20] for px in row[::20]}
    assert len(colours) > 10, "the screenshot is blank: the embedded plots did not render"
