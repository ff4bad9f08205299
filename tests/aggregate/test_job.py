"""kprobe aggregate on real reports recorded from the lab (tests/data/reports), checked against hand counts.

Built for speed without losing a guarantee: the in-session tests share one Spark session and a
few module-wide runs; the separate processes are the ones that prove something of a process (the
entry points, verbose output, kill -9, a run with nothing new that starts no JVM). The incremental
state's runs are test_state.py's and the warm driver's test_warm.py's, so that the suite's workers
share the Spark work.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from aggregate_runs import (  # noqa: E402
    HIDDEN,
    OUTPUTS,
    T0,
    V1,
    command_line,
    crafted,
    descendants,
    endpoint,
    state_json,
)
from conftest import new_topic  # noqa: E402

from kprobe.aggregate.checks import MARKER, validate  # noqa: E402
from kprobe.aggregate.entry import LIGHT_BELOW  # noqa: E402
from kprobe.aggregate.job import (  # noqa: E402
    JobOptions,
    accounting_error,
    run,
    spark_log,
    summary_lines,
)
from kprobe.aggregate.parse import UNSUPPORTED_FILE  # noqa: E402
from kprobe.aggregate.plan import MESSAGE_BYTES, Progress, current, new_input_bytes, survey  # noqa: E402
from kprobe.errors import KprobeError, UsageError  # noqa: E402
from kprobe.models import CLIENTS_CONNECT  # noqa: E402

UTC = dt.timezone.utc
RECORDED = sorted((Path(__file__).parents[1] / "data" / "reports").glob("*.json"))


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def as_utc(value: dt.datetime) -> dt.datetime:
    """PySpark hands timestamps back as naive datetimes in the driver's local zone (TZ)."""
    return value.astimezone(UTC)


def load(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("*.json"))]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """Two vantages of one cluster, three reports each, from the reports recorded from the lab.

    `client` reaches all three brokers; `blackholed` cannot reach broker 2 (its TCP connect times
    out) and carries ADVERTISED_TIMEOUT. The vantage is named after the recording's bootstrap.
    """
    root = tmp_path_factory.mktemp("recorded")
    for path in RECORDED:
        kind = path.stem.rsplit("-", 1)[1]
        folder = root / kind
        folder.mkdir(exist_ok=True)
        if len(list(folder.iterdir())) < 3:
            report = json.loads(path.read_text())
            report["vantage"]["name"] = kind
            (folder / path.name).write_text(json.dumps(report))
    assert sorted(p.parent.name for p in root.rglob("*.json")) == ["blackholed"] * 3 + ["client"] * 3
    return root


def outputs_in(spark, out: Path) -> dict:
    return {name: spark.read.parquet(str(out / "parquet" / name)) for name in OUTPUTS}


@pytest.fixture(scope="module")
def plain_run(spark, recorded, tmp_path_factory) -> tuple[dict, dict]:
    """The job over the recorded reports as they are (html off): its result and its outputs."""
    out = tmp_path_factory.mktemp("plain") / "out"
    return run(spark, JobOptions((str(recorded),), str(out), html=False)), outputs_in(spark, out)


def moved_copies(recorded: Path) -> list[dict]:
    """A new vantage, `mover`, with two reports: a client report as it is, and one in 2099 whose bootstrap
    advertises broker 0 under another name (same port): one advertised change."""
    first = json.loads(sorted((recorded / "client").glob("*.json"))[0].read_text())
    before = {**json.loads(json.dumps(first)), "id": str(uuid.uuid4())}
    before["vantage"]["name"] = "mover"
    after = {**json.loads(json.dumps(before)), "id": str(uuid.uuid4()), "started_at": "2099-01-01T00:00:00.000Z"}
    after["bootstraps"][0]["brokers"][0]["host"] = "broker0.moved"
    return [before, after]


@pytest.fixture(scope="module")
def mixed_run(spark, recorded, tmp_path_factory) -> tuple[dict, dict, Path, list[dict]]:
    """One job over the recorded reports plus every kind of trouble the inputs can hold.

    Re-deliveries (a copy of a report; another a day later under another vantage name, same id; a
    JSON Lines file whose first line is a copy), a truncated file, an unknown schema version, a
    line that is not JSON, one that is not a report, and a vantage whose advertised address
    moved. Returns the result, the outputs, the inputs and the distinct reports they hold.
    """
    root = tmp_path_factory.mktemp("mixed")
    inputs = root / "in"
    shutil.copytree(recorded, inputs)
    first, second = sorted(inputs.rglob("*.json"))[:2]
    (inputs / "again.json").write_text(first.read_text())
    later = json.loads(second.read_text())
    later["started_at"] = (parse_time(later["started_at"]) + dt.timedelta(days=1)).isoformat().replace("+00:00", "Z")
    later["vantage"]["name"] = "ghost"
    (inputs / "later.json").write_text(json.dumps(later))
    movers = moved_copies(recorded)
    (inputs / "mover.jsonl").write_text("".join(json.dumps(r) + "\n" for r in movers))
    (inputs / "truncated.json").write_text(first.read_text()[:300])
    (inputs / "v2.jsonl").write_text(json.dumps({"schema": "kprobe.report/v2", "id": "x"}) + "\n")
    (inputs / "mixed.jsonl").write_text(
        json.dumps(json.loads(first.read_text())) + "\n" + "{not json\n" + json.dumps({"hello": 1}) + "\n")
    result = run(spark, JobOptions((str(inputs),), str(root / "out"), html=False))
    return result, outputs_in(spark, root / "out"), root / "out", [*load(recorded), *movers]


def hand_endpoint_vantage(reports: list[dict]) -> dict[tuple, dict]:
    """The expected rows, computed from the report files alone."""
    rows: dict[tuple, dict] = defaultdict(lambda: {"probes": 0, "successes": 0, "fail_dns": 0, "fail_timeout": 0,
                                                   "times": [], "dns_ms": []})
    for r in reports:
        cluster = next(b["cluster_id"] for b in r["bootstraps"] if b["cluster_id"])
        for e in r["endpoints"]:
            row = rows[(cluster, e["node_id"], e["host"], e["port"], r["vantage"]["name"])]
            row["probes"] += 1
            row["successes"] += e["status"] in CLIENTS_CONNECT
            row["fail_dns"] += e["status"] == "unresolvable"
            row["fail_timeout"] += e["status"] == "unreachable" and any(t["status"] == "timeout" for t in e["tcp"])
            row["times"].append(r["started_at"])
            row["dns_ms"].append(e["dns"]["ms"])
    return rows


def check_hand_counts(rows: list, reports: list[dict]) -> dict[tuple, object]:
    got = {(r.cluster_id, r.node_id, r.host, r.port, r.vantage): r for r in rows}
    expected = hand_endpoint_vantage(reports)
    assert set(got) == set(expected)
    for key, want in expected.items():
        row = got[key]
        assert (row.probes, row.successes, row.fail_dns, row.fail_timeout) == (
            want["probes"], want["successes"], want["fail_dns"], want["fail_timeout"]), key
        assert row.success_rate == want["successes"] / want["probes"]
        assert as_utc(row.first_seen) == min(map(parse_time, want["times"]))
        assert as_utc(row.last_seen) == max(map(parse_time, want["times"]))
        assert row.dns_max_ms == pytest.approx(max(want["dns_ms"]))
        assert row.status_changes == 0
    return got


def test_endpoint_vantage_matches_hand_counts(plain_run, recorded):
    result, outputs = plain_run
    assert result["counts"]["duplicates"] == 0
    got = check_hand_counts(outputs["endpoint_vantage"].collect(), load(recorded))
    assert len(got) == 6
    by_vantage = defaultdict(list)
    for (_, node, _, _, vantage), row in got.items():
        by_vantage[vantage].append((node, row.success_rate, row.last_status, row.fail_timeout))
    assert sorted(by_vantage["client"]) == [(0, 1.0, "ok", 0), (1, 1.0, "ok", 0), (2, 1.0, "ok", 0)]
    assert sorted(by_vantage["blackholed"]) == [(0, 1.0, "ok", 0), (1, 1.0, "ok", 0), (2, 0.0, "timeout", 3)]


def test_redelivered_reports_count_once_and_drift_is_seen(mixed_run):
    """One report comes twice, another again a day later under another vantage name (same id), and a JSON
    Lines file starts with a copy: the dedupe keeps the first of each, so the hand counts of the distinct
    reports still hold and no "ghost" row appears. The mover's advertised address changed once."""
    result, outputs, _, reports = mixed_run
    assert result["counts"]["duplicates"] == 3
    got = check_hand_counts(outputs["endpoint_vantage"].collect(), reports)
    assert len(got) == 9 and not [k for k in got if k[4] == "ghost"]
    [change] = outputs["advertised_changes"].collect()
    port = reports[-1]["bootstraps"][0]["brokers"][0]["port"]
    host = reports[-2]["bootstraps"][0]["brokers"][0]["host"]  # the mover's first report's
    assert (change.vantage, change.node_id, change.previous, change.current) == (
        "mover", 0, f"{host}:{port}", f"broker0.moved:{port}")


def test_cluster_summary_and_findings(plain_run, recorded):
    _, outputs = plain_run
    summary = {r.vantage: r for r in outputs["cluster_summary"].collect()}
    reports = load(recorded)
    rank = {"error": 0, "warning": 1, "info": 2}
    for vantage in ("client", "blackholed"):
        mine = sorted((r for r in reports if r["vantage"]["name"] == vantage), key=lambda r: r["started_at"])
        row = summary[vantage]
        assert row.cluster_id == mine[0]["bootstraps"][0]["cluster_id"] and row.reports == len(mine) == 3
        assert row.endpoints_advertised == len(mine[-1]["endpoints"]) == 3
        assert row.endpoints_reachable == sum(e["status"] in CLIENTS_CONNECT for e in mine[-1]["endpoints"])
        good = [parse_time(r["started_at"]) for r in mine if r["summary"]["status"] == "ok"]
        bad = [parse_time(r["started_at"]) for r in mine if r["summary"]["status"] != "ok"]
        assert (as_utc(row.last_good) if row.last_good else None) == (max(good) if good else None)
        assert (as_utc(row.last_bad) if row.last_bad else None) == (max(bad) if bad else None)
        seen = Counter()
        for r in mine:
            for f in r["findings"]:
                seen[(f["code"], f["severity"])] += weight(f)
        worst = min(seen, key=lambda k: (rank[k[1]], -seen[k], k[0])) if seen else (None, None)
        assert (row.worst_finding, row.worst_severity) == worst
    assert (summary["client"].endpoints_reachable, summary["blackholed"].endpoints_reachable) == (3, 2)
    assert (summary["blackholed"].worst_finding, summary["blackholed"].worst_severity) == ("ADVERTISED_TIMEOUT", "error")
    findings = outputs["findings"].collect()
    by_hand, written = Counter(), Counter()
    for r in reports:
        for f in r["findings"]:
            by_hand[(r["vantage"]["name"], r["started_at"][:10], f["code"])] += weight(f)
            written[(r["vantage"]["name"], r["started_at"][:10], f["code"])] += 1
    assert {(f.vantage, f.day.isoformat(), f.code): f.occurrences for f in findings} == dict(by_hand)
    assert {(f.vantage, f.day.isoformat(), f.code): f.findings for f in findings} == dict(written)
    assert by_hand[("blackholed", reports[0]["started_at"][:10], "ADVERTISED_TIMEOUT")] >= 1


def weight(finding: dict) -> int:
    """A finding counts once per endpoint it concerns (findings merged across endpoints), at least once."""
    return max(1, len(finding.get("endpoints") or []))


def test_every_record_is_aggregated_or_quarantined(spark, mixed_run):
    result, outputs, out, _ = mixed_run
    counts = result["counts"]
    # 6 recorded + again + later + 2 movers + truncated + v2 + 3 lines of mixed.jsonl
    assert counts["input_records"] == 6 + 1 + 1 + 2 + 1 + 1 + 3
    assert counts["quarantined"] == 4  # truncated, v2, not JSON, not a report
    assert counts["duplicates"] == 3  # again.json, later.json and the first line of mixed.jsonl
    assert counts["reports"] == 8
    assert counts["reports"] + counts["duplicates"] + counts["quarantined"] == counts["input_records"]
    assert counts["quarantine_reasons"] == {
        "malformed JSON (truncated or not JSON)": 2,
        "unknown schema version kprobe.report/v2": 1,
        "not a kprobe report (no schema field)": 1,
    }
    assert outputs["quarantine"].count() == 4
    assert json.loads((out / "counts.json").read_text())["quarantined"] == 4


# What the JVM and Spark print as they start, before any log level applies: a quiet run keeps
# them off the terminal (in its log), `-v` shows them.
STARTUP_LINES = ("Using incubator modules", "Using Spark's default log4j profile", "Setting default log level",
                 "WARN NativeCodeLoader")


def nothing_new_run(argv: list[str]) -> tuple[str, set[str], float]:
    """A run expected to find nothing new, watched from outside: its output, every child process seen, its CPU s.

    Its environment points JAVA_HOME nowhere and leaves on PATH only the interpreter's directory:
    a JVM it started would fail loudly too. `-X importtime` lists every module it imported:
    PySpark must not be one. Its CPU time (not wall time, which a loaded machine stretches) is
    what the 3 s the issue gives the whole run are checked against.
    """
    env = {**os.environ, "JAVA_HOME": "/nonexistent-java", "PATH": str(Path(sys.executable).parent)}
    before = cpu_seconds_of_children()
    proc = subprocess.Popen([sys.executable, "-X", "importtime", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    seen: set[str] = set()
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < 60:
        seen |= set(descendants(proc.pid).values())
        time.sleep(0.005)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")]
    assert not [m for m in imported if m.startswith(("pyspark", "py4j"))], "PySpark imported"
    assert not [line for line in stderr.splitlines() if not line.startswith("import time:")], stderr[-2000:]
    return stdout, seen, cpu_seconds_of_children() - before


def cpu_seconds_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime





def test_kill_9_then_rerun_counts_once_then_nothing_new_starts_no_jvm(spark, tmp_path, capsys):
    """The life of a scheduled job: runs killed, rerun and found current, on the state they leave on disk.

    1. A run (`kprobe aggregate -v`: the JVM's start-up lines on the terminal) is killed (SIGKILL,
       JVM and all) after writing its records but before committing.
    2. The next run reads those files again, counts each record once, and replaces the output whole.
       It is the job in this session's JVM, with the progress lines a terminal gets: what it proves is
       on disk (the killed process's files, its lock released by the kernel), and a second driver of
       its own cost 25 s here. A whole run in a JVM of its own is tests/lab/test_netns.py's pipeline test's
       (`kprobe aggregate --kafka`, quiet on the terminal, the JVM's lines in its log) and
       tests/aggregate/test_spark_submit.py's (spark-submit of `kprobe/aggregate/__main__.py`).
    3. The run after it, by either entry point, finds nothing new: one line, no JVM started (no
       `java` child seen; JAVA_HOME points nowhere), PySpark never imported.
    4. A damaged output, or other options, is work again (checked without a process: `current`).
    """
    import signal

    from kprobe.aggregate.generate import reports, write_jsonl

    inputs, out = tmp_path / "in", tmp_path / "out"
    items = list(reports(vantages=2, clusters=2, hours=2, every_s=600))
    write_jsonl(inputs / "a", iter(items[: len(items) // 2]), per_file=10)
    run(spark, JobOptions((str(inputs),), str(out), html=False))
    first_parts = {p.name for p in (out / "json" / "endpoint_vantage").glob("part-*")}
    write_jsonl(inputs / "b", iter(items[len(items) // 2:]), per_file=10)
    (inputs / "b" / "again.jsonl").write_text(json.dumps(items[0]) + "\n")  # a re-delivered report
    argv = [str(inputs), "--out", str(out), "--no-html"]
    noise = tmp_path / "killed.stderr"
    # Started as a user starts it (no PYSPARK_SUBMIT_ARGS, which the suite sets for its own JVMs): a small
    # increment gets the light JVM (kprobe.aggregate.entry.LIGHT_BELOW), seen on the driver's command line.
    # Its own cache: no class-data archive yet, so the driver is told to write one as it exits (it never does).
    plain = {**{k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"},
             "KPROBE_CACHE_DIR": str(tmp_path / "cache")}
    with noise.open("w") as stderr:
        victim = subprocess.Popen([sys.executable, "-m", "kprobe", "aggregate", "-v", *argv], env=plain,
                                  stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        written = out / ".state" / "records" / "run=2" / "_SUCCESS"
        deadline = time.monotonic() + 240
        driver: list[str] = []
        while not written.exists() and victim.poll() is None and time.monotonic() < deadline:
            if not driver:  # the driver, not spark-class's launcher (also a java, before it)
                driver = next((args for pid, name in descendants(victim.pid).items() if name == "java"
                               and "org.apache.spark.deploy.SparkSubmit" in (args := command_line(pid))
                               and "org.apache.spark.launcher.Main" not in args), [])
            time.sleep(0.01)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=60)
    assert written.exists(), "the run ended before its records were written"
    assert "-XX:TieredStopAtLevel=1" in driver and "-XX:+UseSerialGC" in driver, driver
    dumps = [arg for arg in driver if arg.startswith("-XX:ArchiveClassesAtExit=")]
    assert len(dumps) == 1 and Path(dumps[0].split("=", 1)[1]).parent == tmp_path / "cache" / "aggregate", driver
    assert not list((tmp_path / "cache" / "aggregate").glob("driver-*.jsa"))  # killed: no archive, not half of one
    assert state_json(out)["run"] == 1, "killed too late: the run had committed"
    assert [line for line in STARTUP_LINES if line in noise.read_text()], noise.read_text()[-2000:]  # -v

    capsys.readouterr()
    result = run(spark, JobOptions((str(inputs),), str(out), html=False, progress=True))
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("[") for line in lines), lines  # its progress lines, nothing else
    stages = [line.split("] ", 1)[1].split(":", 1)[0] for line in lines]
    assert stages[:3] == ["reading", "observations", "rollups"] and set(OUTPUTS) <= set(stages[3:]), lines
    assert state_json(out)["run"] == 2 and not (out / ".state" / "records" / "run=3").exists()
    # Every record once (the killed run's records were read again, not added twice); that the outputs
    # then equal a full run's is test_incremental_run_equals_a_full_run's to show.
    counts = json.loads((out / "counts.json").read_text())
    assert (counts["input_records"], counts["reports"], counts["duplicates"], counts["quarantined"]) == (
        len(items) + 1, len(items), 1, 0)
    assert counts["observations"] == sum(len(r["endpoints"]) for r in items)
    assert summary_lines(result)[0] == (f"{len(items) + 1} records: {len(items)} reports aggregated ({len(items)} in "
                                        f"the window, {counts['observations']} endpoint observations), 1 duplicates, "
                                        "0 quarantined")
    # Replaced whole: none of the first output's part files is left, nor a staging or old directory.
    assert first_parts and not first_parts & {p.name for p in (out / "json" / "endpoint_vantage").glob("part-*")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "in", "killed.stderr", "out"]

    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    for entry in (["-m", "kprobe", "aggregate"], ["-m", "kprobe.aggregate"]):
        stdout, children, cpu = nothing_new_run([*entry, *argv])
        assert stdout == (f"nothing new: {len(list(inputs.rglob('*.jsonl')))} input files as run 2 left them; "
                          f"the outputs in {out} are current\n")
        assert "java" not in children, children
        assert cpu < 3.0, f"{cpu:.2f} s of CPU"
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before  # not a file touched

    options = JobOptions((str(inputs),), str(out), html=False)
    assert current(options) is not None
    assert current(JobOptions((str(inputs),), str(out), html=False, since="2026-11-01")) is None  # other window
    assert current(JobOptions((str(inputs),), str(out), html=True)) is None  # a page it did not write
    [part] = (out / "json" / "hourly").glob("part-*")
    part.write_text(part.read_text()[:-10])  # an output damaged (cut short)
    assert current(options) is None
    part.unlink()
    assert current(options) is None
    (inputs / "a" / "reports-00000.jsonl").touch()  # an input touched: read again (its lines counted once)
    assert current(options) is None


def test_progress_lines_by_default_on_a_terminal_only(monkeypatch):
    """A run's progress lines (the kill -9 test's rerun shows them) go to stderr when it is a terminal, else nowhere."""
    import io
    import pty

    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w") as terminal:
            monkeypatch.setattr(sys, "stderr", terminal)
            shown = Progress()
            shown("reading", "1 new and 0 changed files of 1")
        assert shown.enabled and os.read(leader, 4096).decode().endswith("] reading: 1 new and 0 changed files of 1\r\n")
    finally:
        os.close(leader)
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    quiet = Progress()
    quiet("reading", "1 new and 0 changed files of 1")
    assert not quiet.enabled and piped.getvalue() == ""


def test_reading_a_topic_gives_what_reading_the_files_gives(spark, collector_lab, recorded, tmp_path):
    """The recorded reports published to a topic of a real broker, and the same reports as files.

    Both are read by the job in this session (its JVM has the Kafka source's jars: conftest's
    `spark`), which is the same `run` the CLI calls. Then, by the real CLI: a run that finds the
    topic's offsets where that run left them (asked with librdkafka) is one line, no JVM. The CLI
    reading a topic in a JVM of its own, quiet, with its log kept, is tests/lab/test_netns.py's pipeline
    test (`kprobe aggregate --kafka` on the monitoring network).
    """
    from confluent_kafka import Producer

    collector = collector_lab.bootstrap("CLIENT")
    topic = new_topic(collector_lab, "agg", partitions=2)
    producer = Producer({"bootstrap.servers": collector})
    for path in sorted(recorded.rglob("*.json")):
        producer.produce(topic, path.read_bytes())
    assert producer.flush(30) == 0

    def rows_of(out: Path) -> list[dict]:
        rows = [json.loads(line) for f in (out / "json" / "endpoint_vantage").glob("*.json")
                for line in f.read_text().splitlines()]
        return sorted(rows, key=lambda r: (r["vantage"], r["node_id"]))

    argv = ["-m", "kprobe", "aggregate", "--kafka", f"{collector}/{topic}", "--out", str(tmp_path / "agg-topic")]
    # The CLI's options for that command line (the nothing-new run below checks they are).
    on_topic = JobOptions((), str(tmp_path / "agg-topic"), kafka=((collector, topic),))
    # Six new messages, counted before Spark starts (end offsets asked of the broker): a light JVM's work.
    assert new_input_bytes(on_topic) == 6 * MESSAGE_BYTES < LIGHT_BELOW
    counts = run(spark, on_topic)["counts"]
    assert (counts["input_records"], counts["reports"], counts["quarantined"]) == (6, 6, 0)
    page = (tmp_path / "agg-topic" / "report.html").read_text()
    # The page carries the topic run's own data (tests/aggregate/test_page.py draws it in Chromium).
    data = json.loads(page.split('<script type="application/json" id="kprobe-data">', 1)[1].split("</script>", 1)[0])
    assert data["counts"]["reports"] == 6 and sum(len(c["cells"]) for c in data["clusters"]) == len(rows_of(
        tmp_path / "agg-topic"))
    counts = run(spark, JobOptions((str(recorded),), str(tmp_path / "agg-files"), html=False))["counts"]
    assert (counts["input_records"], counts["reports"], counts["quarantined"]) == (6, 6, 0)
    results = {"files": rows_of(tmp_path / "agg-files"), "topic": rows_of(tmp_path / "agg-topic")}
    assert results["files"] == results["topic"]
    assert [(r["vantage"], r["probes"], r["successes"]) for r in results["topic"]] == [
        ("blackholed", 3, 3), ("blackholed", 3, 3), ("blackholed", 3, 0), ("client", 3, 3), ("client", 3, 3),
        ("client", 3, 3)]

    stdout, children, _ = nothing_new_run(argv)
    assert stdout == f"nothing new: 0 input files and 1 topic as run 1 left them; the outputs in " \
                     f"{tmp_path / 'agg-topic'} are current\n"
    assert "java" not in children, children
    assert new_input_bytes(on_topic) == 0  # where the run left the topic
    producer.produce(topic, sorted(recorded.rglob("*.json"))[0].read_bytes())  # one more message: work again
    assert producer.flush(30) == 0
    assert current(on_topic) is None and new_input_bytes(on_topic) == MESSAGE_BYTES
    line, found = survey(on_topic)  # as the entry points size a run: from what the nothing-new check found
    assert line is None and found is not None and new_input_bytes(on_topic, found) == MESSAGE_BYTES
    # A topic the broker does not have: librdkafka's words and where to look, before any JVM starts.
    missing = JobOptions((), str(tmp_path / "agg-missing"), kafka=((collector, "kprobe-no-such-topic"),))
    with pytest.raises(KprobeError) as refused:
        new_input_bytes(missing)
    assert str(refused.value) == (f"cannot read the topic 'kprobe-no-such-topic' at {collector}: Broker: Unknown "
                                  f"topic or partition (`kprobe list -b {collector}` lists the topics there)")


def test_without_pyspark_one_line_and_exit_2(tmp_path):
    code = ("import sys; sys.modules['pyspark'] = None; sys.argv = ['kprobe', 'aggregate', '.', '--out', 'x'];"
            "from kprobe.cli import main; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr == "kprobe: error: kprobe aggregate needs PySpark: pip install 'kprobe[spark]'\n"


def test_rows_the_driver_holds_become_a_dataframe_of_their_schema(spark):
    """local.rows: the driver's few rows as a DataFrame of the given names and types, none as well."""
    from pyspark.sql import types as T

    from kprobe.aggregate import local

    schema = T.StructType([T.StructField("file", T.StringType()), T.StructField("n", T.LongType())])
    made = local.rows(spark, [("a.bin", 1), ("b.txt", None)], schema)
    assert [(f.name, f.dataType) for f in made.schema.fields] == [("file", T.StringType()), ("n", T.LongType())]
    assert sorted(tuple(r) for r in made.collect()) == [("a.bin", 1), ("b.txt", None)]
    empty = local.rows(spark, [], schema)
    assert empty.schema.simpleString() == made.schema.simpleString() and empty.count() == 0


def test_spark_schema_is_derived_from_the_json_schema():
    from kprobe.aggregate.schema import report_schema
    from kprobe.output.json_report import schema

    spark_fields = {f.name for f in report_schema().fields}
    assert spark_fields >= set(schema()["required"])
    endpoint = next(f for f in report_schema().fields if f.name == "endpoints").dataType.elementType
    assert {"tcp", "dns", "identity", "tls", "status"} <= set(endpoint.names)


# --- Crafted reports: small, exact inputs whose expected rows are worked out by hand below. ---

# The window is [2026-11-01, 2026-11-01T04:00Z): the reports at -1 h and +5 h are outside it.
SINCE, UNTIL = "2026-11-01", "2026-11-01T04:00:00Z"
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
    assert counts["quarantine_reasons"] == {UNSUPPORTED_FILE: 1}
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
    assert gaps[0].endswith("0.0% of 1 probe succeeded  cluster bootstrap:boot.c1:9092 bootstrap boot.c1:9092 "
                            "from v3 (last timeout)")
    assert "from v2\\x1b[2J\\x1b]0;pwned\\x07 (last dns)" in gaps[1]
    assert "33.3% of 3 probes succeeded" in gaps[2]
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


def test_an_output_that_fails_leaves_no_staging_and_no_job_running(spark, tmp_path):
    """The outputs are written two at a time (outputs.OUTPUT_THREADS): when one fails, the error is the
    caller's, the other's job is stopped, and nothing of the new output is left beside --out."""
    from pyspark.sql import functions as F

    from kprobe.aggregate.outputs import write
    from kprobe.aggregate.plan import Progress

    good = spark.range(50).select(F.col("id").alias("n"))
    bad = spark.range(50).select(F.when(F.col("id") >= 0, F.raise_error(F.lit("boom in the output")))
                                 .otherwise(F.col("id")).alias("n"))
    outputs = {"findings": lambda: good, "hourly": lambda: bad, "advertised_changes": lambda: good,
               "findings_by_endpoint": lambda: good}
    options = JobOptions((str(tmp_path / "in"),), str(tmp_path / "out"), html=False)
    with pytest.raises(Exception, match="boom in the output"):
        write(spark, outputs, {}, options, Progress(False), tmp_path / "out" / ".state")
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.lab  # a JVM of its own
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


@pytest.mark.parametrize("where", ["cache", "temp"])
def test_a_link_planted_where_the_spark_log_goes_is_never_followed(tmp_path, monkeypatch, where):
    """The JVM's log file is made by `mkstemp` under the cache, or in the temp directory when the cache
    cannot be written: a link planted at the name a run of this pid would take this second (or the next
    few) is left alone, and the file it points to is not truncated. Opened again for the JVM, a log that
    has become a link is refused in one line rather than written through."""
    import tempfile

    from kprobe.aggregate import jvm

    victim = tmp_path / "victim"
    victim.write_text("root's own secrets\n")
    victim.chmod(0o600)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    if where == "cache":
        monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
        folder, prefix = tmp_path / "cache" / "aggregate", "spark"
        folder.mkdir(parents=True)
    else:
        (tmp_path / "cache").write_text("not a directory")  # the cache cannot be made: the temp directory
        monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
        folder, prefix = temp, "kprobe-spark"
    now = time.time()
    links = [folder / f"{prefix}-{time.strftime('%Y%m%dT%H%M%S', time.localtime(now + s))}-{os.getpid()}.log"
             for s in range(4)]
    for link in links:
        link.symlink_to(victim)
    log = jvm._new_log()
    assert victim.read_text() == "root's own secrets\n"
    assert all(link.is_symlink() for link in links)
    assert log is not None and log.parent == folder and log not in links
    assert not log.is_symlink() and log.stat().st_mode & 0o777 == 0o600 and log.read_bytes() == b""
    log.unlink()
    log.symlink_to(victim)  # replaced between its making and the JVM's start
    with pytest.raises(KprobeError, match="cannot write Spark's log"), jvm._jvm_output_to(log):
        pass
    assert victim.read_text() == "root's own secrets\n"


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
    (["in", "--out", "o", "--keep-warm", "0"], "kprobe: error: bad --keep-warm '0': must be more than 0 and at "
                                               "most 24h: give a duration like 5, 2.5s, 500ms or 2m\n"),
])
def test_module_entry_point_checks_like_the_cli(tmp_path, argv, expected):
    (tmp_path / "in").mkdir()
    done = subprocess.run([sys.executable, "-m", "kprobe.aggregate", *argv], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
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


def test_what_a_run_will_read_is_known_before_spark_starts(tmp_path):
    """The size of the new input (kprobe.aggregate.plan.new_input_bytes) chooses the JVM: the files no run has
    read, or read at another size or time (a topic's new messages: the topic test); nothing for inputs the
    plan cannot list (s3a)."""
    from kprobe.aggregate import state as st

    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("x" * 100)
    (inputs / "b.jsonl").write_text("y" * 30)
    options = JobOptions((str(inputs),), str(out), html=False)
    assert new_input_bytes(options) == 130  # no state yet: everything
    root = out / ".state"
    st.prepare(root, full=False)
    read = {str(p): [p.stat().st_size, p.stat().st_mtime_ns] for p in inputs.iterdir()}
    st.commit(root, st.Manifest(run=1, files=read))
    assert new_input_bytes(options) == 0
    with (inputs / "b.jsonl").open("a") as grown:
        grown.write("z" * 20)
    (inputs / "c.jsonl").write_text("w" * 7)
    assert new_input_bytes(options) == 50 + 7  # the grown file whole, and the new one
    assert new_input_bytes(JobOptions((str(inputs),), str(out), html=False, full=True)) == 157
    assert new_input_bytes(JobOptions(("s3a://bucket/reports",), str(out), html=False)) is None


def test_the_light_and_heavy_jvms_keep_the_driver_options_of_spark_defaults(tmp_path, monkeypatch):
    """A --conf replaces spark-defaults.conf's value: a light or heavy run's flags come after the user's (a proxy,
    say), never instead of them."""
    from kprobe.aggregate import jvm
    from kprobe.aggregate.jvm import HEAVY_JVM, LIGHT_JVM, driver_options

    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
    archive = jvm.driver_archive()
    assert archive is not None and archive.parent == tmp_path / "cache" / "aggregate"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"an archive")  # as a light run leaves it (the class-data archive: below)
    mapped = f"-XX:SharedArchiveFile={archive}"
    assert driver_options(light=True) == f"{LIGHT_JVM} {mapped}"  # no spark-defaults.conf
    (tmp_path / "spark-defaults.conf").write_text(
        "# site settings\nspark.driver.memory 4g\nspark.driver.extraJavaOptions   -Dhttp.proxyHost=p -Dx=y\n")
    assert driver_options(light=True) == f"-Dhttp.proxyHost=p -Dx=y {LIGHT_JVM} {mapped}"
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions=-Dhttps.proxyPort=3128\n")
    assert driver_options(light=True) == f"-Dhttps.proxyPort=3128 {LIGHT_JVM} {mapped}"
    # A value continued on the next line, as java.util.Properties (and so Spark) reads it.
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Da=1 \\\n    -Db=2\n")
    assert driver_options(light=True) == f"-Da=1 -Db=2 {LIGHT_JVM} {mapped}"
    assert driver_options(light=False) == f"-Da=1 -Db=2 {HEAVY_JVM} {mapped}"  # a heavy run maps the same archive
    # The user's own flags win over kprobe's, and their collector replaces kprobe's (two stop the JVM: below).
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.driver.extraJavaOptions -XX:+UseG1GC -XX:FreqInlineSize=200 -XX:-DontCompileHugeMethods\n")
    heavy = driver_options(light=False).split()
    assert heavy[:3] == ["-XX:+UseG1GC", "-XX:FreqInlineSize=200", "-XX:-DontCompileHugeMethods"]
    assert heavy[3:] == [o for o in HEAVY_JVM.split() if not o.startswith(("-XX:+UseParallelGC", "-XX:FreqInlineSize",
                                                                         "-XX:-DontCompileHugeMethods"))] + [mapped]
    light = driver_options(light=True).split()
    assert light == heavy[:3] + [o for o in LIGHT_JVM.split() if o != "-XX:+UseSerialGC"] + [mapped]
    assert "-XX:+UseSerialGC" in LIGHT_JVM.split() and "-XX:+UseParallelGC" in HEAVY_JVM.split()
    # A flag that only ends in GC chooses no collector: kprobe's stays.
    (tmp_path / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -XX:+UseMaximumCompactionOnSystemGC\n")
    assert driver_options(light=False) == f"-XX:+UseMaximumCompactionOnSystemGC {HEAVY_JVM} {mapped}"


@pytest.mark.lab  # a JVM of its own
def test_the_driver_options_are_ones_this_java_starts_with():
    """A flag this JVM does not know stops it before Spark starts (`Unrecognized VM option`), and no Spark JVM
    of the suite starts with HEAVY_JVM (its sessions take LIGHT_JVM): so each set is started here, for a moment."""
    from kprobe.aggregate.jvm import GENERATED_CLASSES, HEAVY_JVM, LIGHT_JVM, _java, leaving_theirs

    java = _java()
    assert java is not None

    def starts(options: str) -> subprocess.CompletedProcess:
        return subprocess.run([java, *options.split(), "-version"], capture_output=True, text=True, timeout=60)

    assert starts("-XX:Tier4InvocationThreshhold=1").returncode != 0  # a misspelt flag is caught so
    for options in (LIGHT_JVM, HEAVY_JVM):
        done = starts(options)
        assert done.returncode == 0, f"{options}: {done.stderr.strip()}"
    # And each flag is what the JVM runs with: one that a later option or the JVM's own choices overrode would
    # start as well and change nothing.
    given = {}
    for option in HEAVY_JVM.split():
        flag = re.fullmatch(r"-XX:(?:([+-])(\w+)|(\w+)=(\d+))", option)
        if flag:
            given[flag[2] or flag[3]] = ("true" if flag[1] == "+" else "false") if flag[2] else flag[4]
    final = starts(f"{HEAVY_JVM} -XX:+PrintFlagsFinal").stdout
    running = {m[1]: m[2] for m in re.finditer(r"^\s*\S+ (\w+)\s+= (\S+).*\{command line\}", final, re.M)}
    assert given and {name: running.get(name) for name in given} == given, final
    # A compile command the JVM cannot parse is only a line on its output, and `quiet` silences it: without
    # `quiet`, each one the JVM took is echoed, and a misspelt one is not.
    loud = HEAVY_JVM.replace("-XX:CompileCommand=quiet", "")
    assert "-XX:CompileCommand=quiet" in HEAVY_JVM and "CompileCommand=" in loud
    echoed = starts(loud).stdout
    assert f"CompileCommand: MaxNodeLimit {GENERATED_CLASSES} intx MaxNodeLimit = 2000" in echoed, echoed
    assert "error" not in echoed.lower(), echoed
    assert "error" in starts("-XX:CompileCommand=MaxNodeLimt,a/B.*,2000").stdout.lower()
    # A collector of the user's own (spark-defaults.conf) beside kprobe's would stop the JVM: it replaces kprobe's.
    assert starts(f"-XX:+UseG1GC {HEAVY_JVM}").returncode != 0
    for options in (LIGHT_JVM, HEAVY_JVM):
        done = starts(f"-XX:+UseG1GC {leaving_theirs(options, '-XX:+UseG1GC')}")
        assert done.returncode == 0, done.stderr


def test_the_compile_command_names_the_classes_spark_generates(spark):
    """HEAVY_JVM keeps C2 off the classes Spark generates by their name (`jvm.GENERATED_CLASSES`): the class of
    this Spark's whole-stage code, compiled as a query's is, has to be one of them."""
    from fnmatch import fnmatchcase

    from kprobe.aggregate.jvm import GENERATED_CLASSES

    codegen = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    kept = {key: spark.conf.get(key) for key in codegen}  # off in the test session (conftest), on in a run
    try:
        for key, value in codegen.items():
            spark.conf.set(key, value)
        plan = spark.range(3).selectExpr("id * 2 AS x")._jdf.queryExecution().executedPlan()
    finally:
        for key, value in kept.items():
            spark.conf.set(key, value)
    assert plan.getClass().getSimpleName() == "WholeStageCodegenExec"
    compiled = spark._jvm.org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator.compile(plan.doCodeGen()._2())
    name = compiled._1().getClass().getName().replace(".", "/")
    assert fnmatchcase(f"{name}.processNext", GENERATED_CLASSES), name
    assert fnmatchcase(f"{name}$GeneratedIteratorForCodegenStage1.processNext", GENERATED_CLASSES)


def test_a_light_driver_without_an_archive_writes_one_and_it_is_put_in_place_whole(tmp_path, monkeypatch):
    """The first light run's driver writes its class-data archive as it exits, under a name of its own;
    `keep_archive` waits for that exit and renames it, so no driver ever maps a file still being written."""
    import subprocess

    from pyspark import SparkContext

    from kprobe.aggregate import jvm

    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / "cache"))
    archive = jvm.driver_archive()
    assert archive is not None
    archive.parent.mkdir(parents=True)
    stray = archive.parent / ".driver-0123456789abcdef.jsa.999999999"  # a run gone before it could rename its own
    stray.write_bytes(b"half")
    option = jvm.archive_option()
    assert not stray.exists()
    written = archive.with_name(f".{archive.name}.{os.getpid()}")
    assert option == f"-XX:ArchiveClassesAtExit={written}" and not archive.exists()
    # A stand-in for the driver, which writes the file as it exits on its standard input's end.
    script = f"import sys; sys.stdin.read(); open({str(written)!r}, 'wb').write(b'classes')"
    driver = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE)
    monkeypatch.setattr(SparkContext, "_gateway", type("Gateway", (), {"proc": driver}), raising=False)
    # The archive of this Spark's previous install (its jars' times in its name's last part), which the JVM
    # refuses now; and another Spark's, which it still maps.
    superseded = archive.with_name(f"{archive.stem.rpartition('-')[0]}-00000000.jsa")
    other_spark = archive.with_name("driver-0123456789abcdef-00000000.jsa")
    for kept_before in (superseded, other_spark):
        kept_before.write_bytes(b"classes before")
    jvm.keep_archive(timeout=30)
    assert driver.returncode == 0 and archive.read_bytes() == b"classes" and not written.exists()
    assert not superseded.exists() and other_spark.exists()
    assert jvm.archive_option() == f"-XX:SharedArchiveFile={archive}"
    jvm.keep_archive()  # nothing asked for: nothing to do
