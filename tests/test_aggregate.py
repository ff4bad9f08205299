"""kprobe aggregate on reports written by real probes of the lab, checked against hand counts."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import new_topic  # noqa: E402

from kprobe.aggregate import transforms as tf  # noqa: E402
from kprobe.aggregate.checks import MARKER, validate  # noqa: E402
from kprobe.aggregate.job import (  # noqa: E402
    JobOptions,
    accounting_error,
    run,
    spark_log,
    summary_lines,
)
from kprobe.errors import KprobeError, UsageError  # noqa: E402

UTC = dt.timezone.utc


OUTPUTS = ("endpoint_vantage", "cluster_summary", "findings", "advertised_changes", "hourly", "quarantine")


@pytest.fixture
def job_outputs(spark, tmp_path):
    """The job run over some inputs (html off): its counts and its outputs as read back from Parquet."""
    made = iter(range(1000))

    def outputs(path: Path, **options) -> tuple[dict, dict]:
        out = tmp_path / f"out-{next(made)}"
        result = run(spark, JobOptions((str(path),), str(out), html=False, **options))
        return result, {name: spark.read.parquet(str(out / "parquet" / name)) for name in OUTPUTS}
    return outputs


@pytest.fixture(scope="module")
def lab_reports(listeners_lab, tmp_path_factory) -> Path:
    """Reports from two vantages of one cluster: the docker network (no gap), the docker host (gap)."""
    root = tmp_path_factory.mktemp("reports")
    # The two vantages watch side by side, as two machines would.
    watches = [subprocess.Popen(
        [sys.executable, "-m", "kprobe", "watch", "-b", listeners_lab.real_endpoint("LISTENER_BOB"),
         "--nameserver", listeners_lab.nameserver(view), "--vantage", view, "--every", "2s", "--count", "3",
         "--out", str(root / view)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for view in ("docker", "host")]
    for proc in watches:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    # Every run whole: the hand counts below assume it. (With --every 0.2s, the run's deadline, a
    # loaded machine once cut a bootstrap short and every count was off by one.)
    for report in load(root):
        assert not report["summary"]["deadline_reached"] and report["summary"]["bootstraps_ok"] == 1, report["summary"]
    return root


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def as_utc(value: dt.datetime) -> dt.datetime:
    """PySpark hands timestamps back as naive datetimes in the driver's local zone (TZ)."""
    return value.astimezone(UTC)


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


@pytest.mark.parametrize("delivery", ["once", "redelivered"])
def test_endpoint_vantage_matches_hand_counts(job_outputs, lab_reports, listeners_lab, tmp_path, delivery):
    """Once: every id is unique. Redelivered: one report comes twice, and another again a day later under
    another vantage name (same id): the dedupe must keep the first of each, so the hand counts of the
    original files still hold and no "ghost" row appears."""
    inputs = lab_reports
    if delivery == "redelivered":
        inputs = tmp_path / "in"
        shutil.copytree(lab_reports, inputs)
        first, second = sorted(inputs.rglob("*.json"))[:2]
        (inputs / "again.json").write_text(first.read_text())
        later = json.loads(second.read_text())
        later["started_at"] = (parse_time(later["started_at"]) + dt.timedelta(days=1)).isoformat().replace("+00:00", "Z")
        later["vantage"]["name"] = "ghost"
        (inputs / "later.json").write_text(json.dumps(later))
    result, outputs = job_outputs(inputs)
    assert result["counts"]["duplicates"] == (0 if delivery == "once" else 2)
    got = {(r.cluster_id, r.node_id, r.host, r.port, r.vantage): r for r in outputs["endpoint_vantage"].collect()}
    expected = hand_endpoint_vantage(load(lab_reports))
    assert set(got) == set(expected) and len(got) == 2
    for key, want in expected.items():
        row = got[key]
        assert row.probes == want["probes"] == 3
        assert row.successes == want["successes"]
        assert row.success_rate == want["successes"] / want["probes"]
        assert row.fail_dns == want["fail_dns"]
        assert as_utc(row.first_seen) == min(map(parse_time, want["times"]))
        assert as_utc(row.last_seen) == max(map(parse_time, want["times"]))
        assert row.dns_max_ms == pytest.approx(max(want["dns_ms"]))
        assert row.status_changes == 0
    docker = got[(listeners_lab.cluster_id, 0, "kafka0", listeners_lab.listener("LISTENER_BOB").port, "docker")]
    host = got[(listeners_lab.cluster_id, 0, "kafka0", listeners_lab.listener("LISTENER_BOB").port, "host")]
    assert (docker.success_rate, docker.last_status) == (1.0, "ok")
    assert (host.success_rate, host.last_status, host.fail_dns) == (0.0, "dns", 3)


def test_cluster_summary_and_findings(job_outputs, lab_reports, listeners_lab):
    _, outputs = job_outputs(lab_reports)
    summary = {r.vantage: r for r in outputs["cluster_summary"].collect()}
    reports = load(lab_reports)
    for vantage in ("docker", "host"):
        mine = [r for r in reports if r["vantage"]["name"] == vantage]
        row = summary[vantage]
        assert row.cluster_id == listeners_lab.cluster_id and row.reports == len(mine) == 3
        assert row.endpoints_advertised == 1
    assert summary["docker"].endpoints_reachable == 1 and summary["docker"].last_bad is None
    assert summary["docker"].last_good is not None
    assert summary["host"].endpoints_reachable == 0
    assert summary["host"].last_good is None
    rank = {"error": 0, "warning": 1, "info": 2}
    for vantage in ("docker", "host"):
        seen = Counter()
        for r in reports:
            for f in r["findings"] if r["vantage"]["name"] == vantage else []:
                seen[(f["code"], f["severity"])] += weight(f)
        worst = min(seen, key=lambda k: (rank[k[1]], -seen[k], k[0])) if seen else (None, None)
        assert (summary[vantage].worst_finding, summary[vantage].worst_severity) == worst
    assert (summary["host"].worst_finding, summary["host"].worst_severity) == ("ADVERTISED_UNRESOLVABLE", "error")
    findings = outputs["findings"].collect()
    by_hand, written = Counter(), Counter()
    for r in reports:
        for f in r["findings"]:
            by_hand[(r["vantage"]["name"], r["started_at"][:10], f["code"])] += weight(f)
            written[(r["vantage"]["name"], r["started_at"][:10], f["code"])] += 1
    assert {(f.vantage, f.day.isoformat(), f.code): f.occurrences for f in findings} == dict(by_hand)
    assert {(f.vantage, f.day.isoformat(), f.code): f.findings for f in findings} == dict(written)
    assert by_hand[("host", reports[0]["started_at"][:10], "ADVERTISED_UNRESOLVABLE")] >= 1


def weight(finding: dict) -> int:
    """A finding counts once per endpoint it concerns (findings merged across endpoints), at least once."""
    return max(1, len(finding.get("endpoints") or []))


def test_advertised_drift(job_outputs, lab_reports, tmp_path):
    reports = load(lab_reports / "docker")
    moved = json.loads(json.dumps(reports[-1]))
    moved["id"] = str(uuid.uuid4())
    moved["started_at"] = "2099-01-01T00:00:00.000Z"
    moved["bootstraps"][0]["brokers"][0]["host"] = "kafka0.moved"
    shutil.copytree(lab_reports, tmp_path / "in")
    (tmp_path / "in" / "moved.json").write_text(json.dumps(moved))
    [change] = job_outputs(tmp_path / "in")[1]["advertised_changes"].collect()
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


# What the JVM and Spark print as they start, before any log level applies: a quiet run keeps
# them off the terminal (in its log), `-v` shows them.
STARTUP_LINES = ("Using incubator modules", "Using Spark's default log4j profile", "Setting default log level",
                 "WARN NativeCodeLoader")


def test_module_entry_verbose_replaces_an_output_whole(spark, lab_reports, tmp_path):
    """`python -m kprobe.aggregate -v` over an --out a run already wrote: replaced whole, start-up lines shown.

    The first output comes from the job in this session (the `run` the CLI calls); the quiet CLI's
    side of defect 6 (nothing on the terminal, all in its log) is held by the topic test's CLI run.
    """
    out = tmp_path / "out"
    run(spark, JobOptions((str(lab_reports),), str(out)))
    first = {p.name for p in (out / "json" / "endpoint_vantage").iterdir()}
    done = subprocess.run([sys.executable, "-m", "kprobe.aggregate", "-v", str(lab_reports), "--out", str(out),
                           "--no-html"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == "6 records: 6 reports aggregated (6 in the window, 6 endpoint " \
                                          "observations), 0 duplicates, 0 quarantined"
    assert "0.0%  cluster" in done.stdout and "from host (3 probes, last dns)" in done.stdout
    assert [line for line in STARTUP_LINES if line in done.stderr], done.stderr[-2000:]  # -v: the JVM's own lines
    # Replaced whole: the first run's page is gone with it (this one made none), and its part files too.
    assert sorted(p.name for p in out.iterdir()) == [MARKER, ".state", "counts.json", "json", "parquet"]
    assert not first & {p.name for p in (out / "json" / "endpoint_vantage").iterdir() if p.name.startswith("part-")}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging or old directory left
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
    from kprobe.output.json_report import schema

    spark_fields = {f.name for f in report_schema().fields}
    assert spark_fields >= set(schema()["required"])
    endpoint = next(f for f in report_schema().fields if f.name == "endpoints").dataType.elementType
    assert {"tcp", "dns", "identity", "tls", "status"} <= set(endpoint.names)


def test_reading_a_topic_gives_what_reading_the_files_gives(spark, listeners_lab, collector_lab, tmp_path):
    """Reports published by real probes (--publish) and written by the same runs (--out).

    The topic is read by the real CLI (its own JVM, with the Kafka source's jars); the files by
    the job in this session, which is the same `run` the CLI calls, without a second JVM start.
    """

    collector = collector_lab.bootstrap("CLIENT")
    topic = new_topic(collector_lab, "agg", partitions=2)
    probes = [subprocess.Popen(
        [sys.executable, "-m", "kprobe", "probe", "-b", listeners_lab.real_endpoint("LISTENER_BOB"),
         "--nameserver", listeners_lab.nameserver(view), "--vantage", view, "--out", str(tmp_path / "files"),
         "--publish", f"{collector}/{topic}", "--spool", str(tmp_path / "spool"), "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for view in ("docker", "host") for _ in range(2)]
    for proc in probes:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1), stderr

    def rows_of(out: Path) -> list[dict]:
        rows = [json.loads(line) for f in (out / "json" / "endpoint_vantage").glob("*.json")
                for line in f.read_text().splitlines()]
        return sorted(rows, key=lambda r: r["vantage"])

    # Each its own --out: the files' directory as --out would be refused (it is the input).
    cache = tmp_path / "cache"  # where the quiet run's Spark log goes
    done = subprocess.run([sys.executable, "-m", "kprobe", "aggregate", "--kafka", f"{collector}/{topic}", "--out",
                           str(tmp_path / "agg-topic")], capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "KPROBE_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("4 records: 4 reports aggregated")
    # Quiet by default (defect 6): not a line on the terminal from a run that worked, not even the
    # JVM's start-up lines, which are in the run's log, not lost (-v shows them: the test above).
    assert done.stderr == ""
    [log] = (cache / "aggregate").glob("spark-*.log")
    assert [line for line in STARTUP_LINES if line in log.read_text()]
    page = (tmp_path / "agg-topic" / "report.html").read_text()
    # The page carries the topic run's own data (tests/test_aggregate_page.py draws it in Chromium).
    data = json.loads(page.split('<script type="application/json" id="kprobe-data">', 1)[1].split("</script>", 1)[0])
    assert data["counts"]["reports"] == 4 and sum(len(c["cells"]) for c in data["clusters"]) == len(rows_of(
        tmp_path / "agg-topic"))
    counts = run(spark, JobOptions((str(tmp_path / "files"),), str(tmp_path / "agg-files"), html=False))["counts"]
    assert (counts["input_records"], counts["reports"], counts["quarantined"]) == (4, 4, 0)
    results = {"files": rows_of(tmp_path / "agg-files"), "topic": rows_of(tmp_path / "agg-topic")}
    assert results["files"] == results["topic"]
    assert [(r["vantage"], r["probes"], r["successes"]) for r in results["topic"]] == [("docker", 2, 2), ("host", 2, 0)]


# --- Crafted reports: small, exact inputs whose expected rows are worked out by hand below. ---

T0 = dt.datetime(2026, 11, 1, tzinfo=UTC)
HIDDEN = "v2\x1b[2J\x1b]0;pwned\x07"  # a vantage name that would clear the screen and retitle the terminal


def stamp(hours: float) -> str:
    return (T0 + dt.timedelta(hours=hours)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def endpoint(node: int, outcome: str, dns_ms: float, tcp_ms: float = 1.0) -> dict:
    """An advertised endpoint b<node>.c1:9092 as a probe writes it: ok, refused, timeout, nxdomain or unchecked."""
    host, ip = f"b{node}.c1", f"10.0.0.{node + 1}"
    dns = {"status": "ok", "addresses": [ip], "ms": dns_ms, "source": "system", "error": None}
    if outcome == "unchecked":  # the run's deadline came first: nothing is known of it
        dns = {**dns, "status": "timeout", "addresses": [], "ms": None, "error": f"{host}: not resolved before the run's deadline"}
        tcp, status = [], "unchecked"
    elif outcome == "nxdomain":
        dns = {**dns, "status": "nxdomain", "addresses": [], "error": f"{host}: no such name (NXDOMAIN)"}
        tcp, status = [], "unresolvable"
    elif outcome == "ok":
        tcp, status = [{"address": ip, "status": "ok", "ms": tcp_ms, "error": None}], "reachable"
    else:
        tcp, status = [{"address": ip, "status": outcome, "ms": 5.0, "error": outcome}], "unreachable"
    return {"node_id": node, "host": host, "port": 9092, "rack": None, "advertised_by": ["boot.c1:9092"],
            "dns": dns, "tcp": tcp, "status": status, "identity": None, "tls": None}


def crafted(vantage: str, hours: float, endpoints: list[dict], boot_status: str = "ok") -> dict:
    ok = boot_status == "ok"
    return {
        "schema": "kprobe.report/v1", "id": str(uuid.uuid4()), "started_at": stamp(hours),
        "finished_at": stamp(hours), "duration_ms": 10.0, "tool": {"name": "kprobe", "version": "0.1.0"},
        "vantage": {"name": vantage, "hostname": vantage, "resolver": {"kind": "system", "nameservers": []}},
        "bootstraps": [{"address": "boot.c1:9092", "status": boot_status, "error": None if ok else boot_status,
                        "answered_by": {"node_id": -1, "name": "boot.c1:9092/bootstrap"} if ok else None,
                        "cluster_id": "cluster-1" if ok else None, "controller_id": 0 if ok else None,
                        "brokers": [{"node_id": e["node_id"], "host": e["host"], "port": 9092, "rack": None}
                                    for e in endpoints], "ms": 2.0}],
        "endpoints": endpoints, "findings": [],
        "summary": {"status": "ok" if ok and all(e["status"] == "reachable" for e in endpoints) else "gap",
                    "bootstraps": 1, "endpoints": len(endpoints),
                    "reachable": sum(e["status"] == "reachable" for e in endpoints)},
    }


# The window is [2026-11-01, 2026-11-01T04:00Z): the reports at -1 h and +5 h are outside it.
SINCE, UNTIL = "2026-11-01", "2026-11-01T04:00:00Z"
V1 = [
    crafted("v1", -1, [endpoint(0, "refused", 50.0), endpoint(1, "refused", 50.0)]),  # before --since
    crafted("v1", 1, [endpoint(0, "ok", 5.0), endpoint(1, "timeout", 2.0)]),
    crafted("v1", 2, [endpoint(0, "refused", 1.0), endpoint(1, "timeout", 2.0), endpoint(2, "unchecked", 0.0)]),
    crafted("v1", 3, [endpoint(0, "ok", 3.0), endpoint(1, "ok", 2.0)]),
    crafted("v1", 5, [endpoint(0, "refused", 90.0), endpoint(1, "refused", 90.0)]),  # at/after --until
]
V2 = [crafted(HIDDEN, 1.5, [endpoint(0, "nxdomain", 1.0)])]
NO_BOOTSTRAP = [crafted("v3", 2.5, [], boot_status="timeout")]  # no cluster id, no endpoints


@pytest.fixture(scope="module")
def crafted_run(spark, tmp_path_factory) -> tuple[dict, Path, Path]:
    """One job over the crafted reports, spread over every file kind the job reads, plus a stray file."""
    root = tmp_path_factory.mktemp("crafted")
    inputs = root / "in"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "v1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in V1[:3]))
    (inputs / "sub" / "v1.ndjson").write_text("".join(json.dumps(r) + "\n" for r in V1[3:]))
    (inputs / "v2.json").write_text(json.dumps(V2[0], indent=2))
    with gzip.open(inputs / "sub" / "v3.jsonl.gz", "wt") as handle:
        handle.write(json.dumps(NO_BOOTSTRAP[0]) + "\n")
    (inputs / "notes.txt").write_text("reports from the v1 host, see ticket 42\n")  # not a report file
    result = run(spark, JobOptions((str(inputs),), str(root / "out"), since=SINCE, until=UNTIL, html=False))
    return result, inputs, root / "out"


def ev_rows(spark, out: Path) -> dict[tuple, object]:
    rows = spark.read.parquet(str(out / "parquet" / "endpoint_vantage")).collect()
    return {(r.vantage, r.node_id): r for r in rows}


def test_every_file_is_read_or_quarantined_with_its_reason(crafted_run):
    result, _, out = crafted_run
    counts = result["counts"]
    # 5 + 1 + 1 reports in .jsonl, .ndjson, .json and .jsonl.gz files, and notes.txt as one record.
    assert counts["input_records"] == 8
    assert (counts["reports"], counts["duplicates"], counts["quarantined"]) == (7, 0, 1)
    assert counts["quarantine_reasons"] == {tf.UNSUPPORTED_FILE: 1}
    assert counts["reports_in_window"] == 5  # the reports at -1 h and +5 h are outside [since, until)
    assert (out / MARKER).exists()


def test_window_flapping_failure_classes_and_latency(spark, crafted_run):
    rows = ev_rows(spark, crafted_run[2])
    b0, b1 = rows[("v1", 0)], rows[("v1", 1)]
    # In the window, v1 saw b0: ok (dns 5 ms), refused (1 ms), ok (3 ms); b1: timeout, timeout, ok.
    assert (b0.probes, b0.successes, b0.fail_refused, b0.fail_timeout) == (3, 2, 1, 0)
    assert b0.status_changes == 2  # ok -> refused -> ok
    assert (b0.dns_max_ms, b0.dns_p50_ms) == (5.0, 3.0)  # the 90 and 50 ms outside the window do not count
    assert (b1.probes, b1.successes, b1.fail_refused, b1.fail_timeout, b1.status_changes) == (3, 1, 0, 2, 1)
    assert (b0.last_status, b1.last_status) == ("ok", "ok")
    assert as_utc(b0.first_seen) == T0 + dt.timedelta(hours=1)  # whatever TZ the test runs in
    assert as_utc(b0.last_seen) == T0 + dt.timedelta(hours=3)
    # b2 was only ever cut short by a deadline: no observation, so no row (neither success nor failure).
    assert ("v1", 2) not in rows


def test_report_with_no_bootstrap_answer_is_a_gap_keyed_by_bootstrap(spark, crafted_run):
    row = ev_rows(spark, crafted_run[2])[("v3", -1)]
    assert (row.cluster_id, row.host, row.port) == ("bootstrap:boot.c1:9092", "boot.c1", 9092)
    assert (row.probes, row.successes, row.fail_timeout, row.last_status) == (1, 0, 1, "timeout")
    assert any(w["vantage"] == "v3" for w in crafted_run[0]["worst"])


def test_summary_worst_first_and_escaped(crafted_run):
    lines = summary_lines(crafted_run[0])
    gaps = lines[lines.index("worst gaps:") + 1:]
    # By hand: v3 and HIDDEN never succeed (0%; ties ordered by cluster id, "bootstrap:..." before
    # "cluster-1"), v1's b1 1 of 3, v1's b0 2 of 3.
    assert [g.split()[0] for g in gaps] == ["0.0%", "0.0%", "33.3%", "66.7%"]
    assert "b1.c1:9092 from v1" in gaps[2] and "b0.c1:9092 from v1" in gaps[3]
    assert "cluster bootstrap:boot.c1:9092 bootstrap boot.c1:9092 from v3 (1 probes, last timeout)" in gaps[0]
    assert "from v2\\x1b[2J\\x1b]0;pwned\\x07 (1 probes, last dns)" in gaps[1]
    assert not any(ch in "".join(lines) for ch in "\x1b\x07")


def test_accounting_check_fails_when_counts_do_not_add_up():
    assert accounting_error({"input_records": 8, "reports": 7, "duplicates": 0, "quarantined": 1}) is None
    error = accounting_error({"input_records": 8, "reports": 6, "duplicates": 0, "quarantined": 1})
    assert error is not None and "8 records read" in error and "= 7" in error


def test_failed_run_leaves_the_previous_output(spark, crafted_run, tmp_path):
    _, inputs, out = crafted_run
    previous = tmp_path / "out"
    shutil.copytree(out, previous)
    before = {p.relative_to(previous): p.read_bytes() for p in previous.rglob("*") if p.is_file()}
    broken = tmp_path / "in"
    shutil.copytree(inputs, broken)
    (broken / "late.jsonl.gz").write_bytes(b"not gzip at all")  # fails only when a task reads it
    with pytest.raises(KprobeError) as failure:
        run(spark, JobOptions((str(broken),), str(previous), html=False))
    message = str(failure.value)
    assert "late.jsonl.gz" in message and "\n" not in message and "unchanged" in message
    # The executor's stack trace is kept off the terminal, in the log the message names.
    log = spark_log()
    assert log is not None and message.endswith(f"(Spark's log: {log})") and "late.jsonl.gz" in log.read_text()
    after = {p.relative_to(previous): p.read_bytes() for p in previous.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]  # no staging directory left


def test_spark_that_cannot_start_is_one_line_naming_its_log(tmp_path):
    """A quiet run keeps the JVM's words in its log; when the JVM dies at once they are the reason, so
    the one line quotes them (PySpark alone only knows that the gateway exited)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "r.json").write_text(json.dumps(V1[1]))
    env = {**os.environ, "KPROBE_CACHE_DIR": str(tmp_path / "cache"), "KPROBE_SPARK_DRIVER_MEMORY": "bogus"}
    done = subprocess.run([sys.executable, "-m", "kprobe", "aggregate", str(tmp_path / "in"), "--out",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120, check=False)
    [log] = (tmp_path / "cache" / "aggregate").glob("spark-*.log")
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("kprobe: error: Spark did not start: ") and done.stderr.count("\n") == 1, done.stderr
    assert "-Xmxbogus" in done.stderr and done.stderr.endswith(f" (Spark's log: {log})\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", ["same", "parent", "child", "foreign", "file"])
def test_out_that_would_delete_data_is_refused(tmp_path, case):
    inputs = tmp_path / "reports"
    (inputs / "day").mkdir(parents=True)
    (inputs / "day" / "r.json").write_text(json.dumps(V2[0]))
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work\n")
    (tmp_path / "file").write_text("x")
    out, source = {"same": (inputs, inputs), "parent": (tmp_path, inputs / "day"),
                   "child": (inputs / "day" / "agg", inputs), "foreign": (foreign, inputs),
                   "file": (tmp_path / "file", inputs)}[case]
    with pytest.raises(UsageError, match="bad --out"):
        validate([str(source)], str(out), [], None, None)
    for argv in (["-m", "kprobe", "aggregate"], ["-m", "kprobe.aggregate"]):
        done = subprocess.run([sys.executable, *argv, str(source), "--out", str(out)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("kprobe: error: bad --out") and done.stderr.count("\n") == 1, done.stderr
    assert (foreign / "thesis.tex").read_text() == "years of work\n"
    assert (inputs / "day" / "r.json").exists()


def test_out_written_by_kprobe_or_empty_is_accepted(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours" / "counts.json").write_text("{}")
    (tmp_path / "ours" / MARKER).write_text("")
    for out in ("empty", "ours", "new"):
        assert validate([str(tmp_path / "in")], str(tmp_path / out), [], None, None) == ()


@pytest.mark.parametrize(("argv", "expected"), [
    (["in", "--out", "o", "--kafka", "collector9092"], "kprobe: error: bad --kafka 'collector9092': write it as "
                                                       "BOOTSTRAP/TOPIC, e.g. collector:9092/kprobe-reports\n"),
    (["in", "--out", "o", "--since", "yesterday"], "kprobe: error: bad --since 'yesterday': give an RFC 3339 "
                                                   "time or a date, e.g. 2026-11-22T18:00:00Z\n"),
    (["--out", "o"], "kprobe: error: nothing to aggregate: give report files or directories, or --kafka "
                     "BOOTSTRAP/TOPIC\n"),
    (["in"], "kprobe: error: the following arguments are required: --out (see `python -m kprobe.aggregate --help`)\n"),
])
def test_module_entry_point_checks_like_the_cli(tmp_path, argv, expected):
    (tmp_path / "in").mkdir()
    done = subprocess.run([sys.executable, "-m", "kprobe.aggregate", *argv], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert (done.returncode, done.stderr) == (2, expected)
    assert not (tmp_path / "o").exists()


def test_generated_reports_follow_the_shipped_schema():
    import jsonschema

    from kprobe.aggregate.generate import reports
    from kprobe.output.json_report import schema as shipped_schema

    schema = shipped_schema()  # the one the package ships, wherever it lives
    validator = jsonschema.validators.validator_for(schema)(schema)
    # 2 clusters x 4 vantages over 3 h at 30 min: (v + c) % 4 == 0 gives DNS gaps, the middle hour an outage.
    sample = list(reports(vantages=4, clusters=2, hours=3, every_s=1800))
    assert len(sample) == 6 * 2 * 4
    for report in sample:
        errors = sorted(validator.iter_errors(report), key=str)
        assert not errors, f"{report['vantage']['name']} {report['started_at']}: {errors[0].message}"
    codes = {f["code"] for r in sample for f in r["findings"]}
    assert codes == {"ADVERTISED_UNRESOLVABLE", "ADVERTISED_TIMEOUT"}
    assert all(len(f["message"]) > 40 and f["fix"] != "..." for r in sample for f in r["findings"])


# --- Incremental runs: state kept under --out, only new records read, outputs equal to a full run. ---

def day_reports(day: int, vantage: str, outcomes: list[str], at: float = 1.0) -> dict:
    """A crafted report on day `day` (1 = 2026-11-01) at hour `at`, with b0, b1... seeing `outcomes`."""
    return crafted(vantage, 24 * (day - 1) + at, [endpoint(n, o, 1.0 + n + at) for n, o in enumerate(outcomes)])


def outputs_of(spark, out: Path) -> dict[str, list]:
    """Every output, row by row, in an order that does not depend on Spark's partitioning."""
    return {name: sorted((tuple(r) for r in spark.read.parquet(str(out / "parquet" / name)).collect()), key=repr)
            for name in OUTPUTS}


COMPARED = ("input_records", "reports", "duplicates", "quarantined", "quarantine_reasons", "observations",
            "reports_in_window")


def test_incremental_run_equals_a_full_run(spark, tmp_path):
    """Days 1-2, then day 3 added (with a re-delivered day-1 report, an earlier copy of a day-2 report, and
    lines appended to a file already read): the rerun reads only the new records, and its outputs equal a
    full run's over the same files, row by row; the counts count every record once."""
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    day1 = [day_reports(1, "v1", ["ok", "refused"], at=h) for h in (1, 2, 3)] + [day_reports(1, "v2", ["nxdomain"])]
    day2 = [day_reports(2, "v1", ["timeout", "ok"], at=h) for h in (1, 2)]
    (inputs / "day1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in day1))
    (inputs / "day2.json").write_text(json.dumps(day2[0], indent=2))
    (inputs / "day2b.jsonl").write_text(json.dumps(day2[1]) + "\n")
    first = run(spark, JobOptions((str(inputs),), str(out), html=False))["counts"]
    assert (first["input_records"], first["reports"], first["duplicates"]) == (6, 6, 0)

    day3 = [day_reports(3, "v1", ["ok", "ok"], at=h) for h in (1, 2)]
    earlier = {**day2[1], "started_at": stamp(5), "vantage": {**day2[1]["vantage"], "name": "v3"}}  # same id, day 1
    (inputs / "sub").mkdir()
    (inputs / "sub" / "day3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*day3, day1[0], earlier]))
    with (inputs / "day1.jsonl").open("a") as grown:  # a JSON Lines file that grew: only its new lines are new
        grown.write(json.dumps(day_reports(3, "v2", ["ok"], at=4)) + "\n{truncated\n")
    again = run(spark, JobOptions((str(inputs),), str(out), html=False))["counts"]
    full = run(spark, JobOptions((str(inputs),), str(tmp_path / "full"), html=False, full=True))["counts"]
    assert again["new_records"] == 6 and full["new_records"] == 12
    assert {k: again[k] for k in COMPARED} == {k: full[k] for k in COMPARED}
    # 12 records: 8 reports kept, the re-delivered day-1 report and the later copy of day2[1] are duplicates.
    assert (again["input_records"], again["reports"], again["duplicates"], again["quarantined"]) == (12, 9, 2, 1)
    assert outputs_of(spark, out) == outputs_of(spark, tmp_path / "full")
    rows = {(r.vantage, r.node_id): r for r in spark.read.parquet(str(out / "parquet" / "endpoint_vantage")).collect()}
    assert rows[("v3", 1)].probes == 1  # the earlier copy is the one kept, under its own vantage
    assert rows[("v1", 1)].probes == 3 + 1 + 2  # day 2's b1 lost the report that moved to v3
    assert rows[("v1", 0)].status_changes == 2  # ok on day 1, timeout on day 2, ok on day 3: across midnight
    # Nothing new: nothing read, the same outputs.
    unchanged = run(spark, JobOptions((str(inputs),), str(out), html=False))["counts"]
    assert unchanged["new_records"] == 0 and {k: unchanged[k] for k in COMPARED} == {k: full[k] for k in COMPARED}
    assert outputs_of(spark, out) == outputs_of(spark, tmp_path / "full")


def state_json(out: Path) -> dict:
    return json.loads((out / ".state" / "state.json").read_text())


def at_hour(vantage: str, hour: float, outcomes: list[str], n: int, moved: str | None = None) -> dict:
    """A day-1 report with a fixed id (so a run orders ties the same way each time); `moved`: node 1 advertises it."""
    report = {**day_reports(1, vantage, outcomes, at=hour), "id": f"00000000-0000-4000-8000-{n:012d}"}
    if moved:
        report["bootstraps"][0]["brokers"][1]["host"] = moved
    return report


def test_a_day_rolled_up_in_segments_equals_a_full_run(spark, tmp_path, monkeypatch):
    """Scheduled reruns add the latest reports of today: each adds a segment of its own reports to the day's
    rollups instead of rolling the whole day up again, and the outputs stay equal to a full run's, row by
    row. A late report (not after those rolled up), and a day at its segment limit, re-roll the whole day.

    The reports of each increment end with a tie (two reports of one vantage at one time, different
    outcomes and advertised addresses): segments must meet where the whole day's order puts them."""
    from kprobe.aggregate import job

    monkeypatch.setattr(job, "MAX_SEGMENTS", 2)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    made = iter(range(1, 1000))

    def add(name: str, reports: list[dict], compare: bool = True) -> list:
        (inputs / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
        run(spark, JobOptions((str(inputs),), str(out), html=False))
        if compare:
            full = tmp_path / f"full-{name}"
            run(spark, JobOptions((str(inputs),), str(full), html=False, full=True))
            assert outputs_of(spark, out) == outputs_of(spark, full), name
            shutil.rmtree(full)
        return state_json(out)["rollups"]["2026-11-01"]

    def hours(start: float, vantage: str = "v1") -> list[dict]:
        return [at_hour(vantage, start, ["ok", "ok"], next(made)),
                at_hour(vantage, start + 0.5, ["ok", "refused"], next(made)),
                at_hour(vantage, start + 0.5, ["refused", "ok"], next(made), moved="b1.moved"),
                at_hour("v2", start + 0.25, ["timeout"], next(made))]

    assert add("a", hours(1.0), compare=False) == [1]  # a first run is a full run
    # Two segments meeting at a tie; v3 is new to the day (nothing of it rolled up): not late.
    assert add("b", [*hours(2.0), at_hour("v3", 1.5, ["ok"], next(made))]) == [1, 2]
    # A third segment at MAX_SEGMENTS=2, a report at the time of the last v2 report, one before it: the whole
    # day rolled up again each time, by the code of a full run (so not compared with one again).
    assert add("c", hours(3.0), compare=False) == [3]
    assert add("d", [*hours(4.0), at_hour("v2", 3.25, ["ok"], next(made))], compare=False) == [4]
    assert add("e", [*hours(5.0), at_hour("v1", 2.25, ["ok", "ok"], next(made))], compare=False) == [5]
    ev = {(r.vantage, r.node_id): r for r in spark.read.parquet(str(out / "parquet" / "endpoint_vantage")).collect()}
    assert ev[("v1", 0)].probes == 3 * 5 + 1 and ev[("v1", 0)].status_changes > 5
    changes = spark.read.parquet(str(out / "parquet" / "advertised_changes")).collect()
    assert {(c.previous, c.current) for c in changes} == {("b1.c1:9092", "b1.moved:9092"), ("b1.moved:9092", "b1.c1:9092")}


def test_state_survives_kill_9_mid_run(spark, tmp_path):
    """A run killed (SIGKILL, JVM and all) after writing its records but before committing: the next run
    reads those files again, counts each record once, and says on a terminal what it does, stage by stage."""
    import pty
    import signal
    import time

    from kprobe.aggregate.generate import reports, write_jsonl

    inputs, out = tmp_path / "in", tmp_path / "out"
    items = list(reports(vantages=3, clusters=2, hours=12, every_s=300))
    write_jsonl(inputs / "a", iter(items[: len(items) // 2]), per_file=200)
    run(spark, JobOptions((str(inputs),), str(out), html=False))
    write_jsonl(inputs / "b", iter(items[len(items) // 2:]), per_file=200)
    (inputs / "b" / "again.jsonl").write_text(json.dumps(items[0]) + "\n")  # a re-delivered report
    argv = [sys.executable, "-m", "kprobe", "aggregate", str(inputs), "--out", str(out), "--no-html"]
    victim = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    written = out / ".state" / "records" / "run=2" / "_SUCCESS"
    deadline = time.monotonic() + 240
    while not written.exists() and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=60)
    assert written.exists(), "the run ended before its records were written"
    assert state_json(out)["run"] == 1, "killed too late: the run had committed"

    leader, follower = pty.openpty()  # a terminal: progress lines on
    survivor = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    assert survivor.wait(timeout=300) == 0, screen.decode()[-3000:]
    os.close(leader)
    lines = screen.decode().replace("\r\n", "\n").splitlines()
    stages = [line.split("] ", 1)[1].split(":", 1)[0] for line in lines if line.startswith("[")]
    assert stages == ["reading", "observations", "rollups", *OUTPUTS], lines
    assert not [line for line in lines if any(s in line for s in (*STARTUP_LINES, "WARN", "INFO", "Warning"))], lines
    assert state_json(out)["run"] == 2 and not (out / ".state" / "records" / "run=3").exists()

    # Every record once (the killed run's records were read again, not added twice); that the outputs
    # then equal a full run's is test_incremental_run_equals_a_full_run's to show.
    counts = json.loads((out / "counts.json").read_text())
    assert (counts["input_records"], counts["reports"], counts["duplicates"], counts["quarantined"]) == (
        len(items) + 1, len(items), 1, 0)
    assert counts["observations"] == sum(len(r["endpoints"]) for r in items)
    assert lines[[i for i, line in enumerate(lines) if line.startswith("[")][-1] + 1].startswith(
        f"{len(items) + 1} records: {len(items)} reports aggregated")


@pytest.mark.parametrize("case", ["foreign", "corrupt", "missing", "other format"])
def test_foreign_or_corrupt_state_is_one_line_and_exit_2(tmp_path, case):
    """Before Spark starts: never written into (foreign), never replaced by a silent full or partial result."""
    from kprobe.aggregate import state as st

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "r.json").write_text(json.dumps(V1[1]))
    out, state = tmp_path / "out", tmp_path / "state"
    state.mkdir()
    if case == "foreign":
        (state / "notes.txt").write_text("mine\n")
    else:
        (state / st.MARK).write_text("")
        manifest = st.Manifest(run=1, records=[[1, "r", "2026-11-01"]])
        text = {"corrupt": "{not json", "missing": manifest.to_json(),
                "other format": manifest.to_json().replace(st.FORMAT, "kprobe.aggregate.state/9")}[case]
        (state / st.MANIFEST).write_text(text)
    before = sorted(p.name for p in state.iterdir())
    for extra in ([], ["--full"]):
        if extra and case != "foreign":  # --full rebuilds a damaged state of kprobe's: it passes the checks
            validate([str(tmp_path / "in")], str(out), [], None, None, str(state), True)
            continue
        done = subprocess.run([sys.executable, "-m", "kprobe", "aggregate", str(tmp_path / "in"), "--out", str(out),
                               "--state", str(state), *extra], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("kprobe: error: "), done.stderr
        assert ("bad --state" if case == "foreign" else "is unreadable") in done.stderr
        assert "--full" in done.stderr or case == "foreign"
    assert sorted(p.name for p in state.iterdir()) == before and not out.exists()


@pytest.mark.parametrize(("stored", "expected"), [(1, [1]), ([1, 2], [1, 2]), ("1", None), ([], None), ([True], None)])
def test_a_days_rollups_in_the_manifest_read_or_refused(tmp_path, stored, expected):
    """A day's rollups are a list of runs (segments); a bare run, as states written before segments have it,
    is read as a list of one; anything else is a damaged state: one line, never a guess."""
    from kprobe.aggregate import state as st

    (tmp_path / st.MARK).write_text("")
    for r in (1, 2):
        (tmp_path / "rollups" / f"run={r}" / "d=2026-11-01").mkdir(parents=True)
    text = st.Manifest(run=2).to_json().replace('"rollups": {}', f'"rollups": {{"2026-11-01": {json.dumps(stored)}}}')
    (tmp_path / st.MANIFEST).write_text(text)
    if expected is None:
        with pytest.raises(UsageError, match=r"is unreadable .*not a list of runs"):
            st.load(tmp_path)
    else:
        assert st.load(tmp_path).rollups == {"2026-11-01": expected}
