"""kprobe aggregate on real reports recorded from the lab (tests/data/reports), checked against hand counts.

Built for speed without losing a guarantee: the in-session tests share one Spark session and a
few module-wide runs; the separate processes are the ones that prove something of a process (the
entry points, verbose output, kill -9, a run with nothing new that starts no JVM).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from conftest import new_topic  # noqa: E402

from kprobe.aggregate.checks import MARKER, validate  # noqa: E402
from kprobe.aggregate.entry import LIGHT_BELOW  # noqa: E402
from kprobe.aggregate.flatten import KEYS  # noqa: E402
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
OUTPUTS = ("endpoint_vantage", "cluster_summary", "findings", "findings_by_endpoint", "advertised_changes", "hourly",
           "quarantine")


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


def descendants(pid: int) -> dict[int, str]:
    """The processes below `pid` now, by pid, with their command names (from /proc)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        parents[int(entry.name)], names[int(entry.name)] = int(rest[1]), name
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = names[child]
                todo.append(child)
    return found


def command_line(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:  # gone meanwhile
        return []


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


def state_json(out: Path) -> dict:
    return json.loads((out / ".state" / "state.json").read_text())


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


# --- Incremental runs: state kept under --out, only new records read, outputs equal to a full run. ---

def day_reports(day: int, vantage: str, outcomes: list[str], at: float = 1.0) -> dict:
    """A crafted report on day `day` (1 = 2026-11-01) at hour `at`, with b0, b1... seeing `outcomes`.

    Each failed endpoint has its finding, in words that differ per report (findings_by_endpoint keeps the latest's).
    """
    report = crafted(vantage, 24 * (day - 1) + at, [endpoint(n, o, 1.0 + n + at) for n, o in enumerate(outcomes)])
    report["findings"] = [{"code": f"ADVERTISED_{o.upper()}", "severity": "error", "node_id": n, "endpoint": f"b{n}.c1:9092",
                           "bootstrap": "boot.c1:9092", "message": f"b{n} {o} at {report['started_at']}", "fix": "open it"}
                          for n, o in enumerate(outcomes) if o != "ok"]
    return report


def outputs_of(out: Path) -> dict[str, list]:
    """Every output, row by row, in an order that does not depend on Spark's partitioning.

    Read from its JSON Lines, which the job writes from the Parquet it read back: every row and value, without
    a Spark job per table.
    """
    return {name: sorted((line for part in sorted((out / "json" / name).glob("part-*"))
                          for line in part.read_text(encoding="utf-8").splitlines() if line), key=repr)
            for name in OUTPUTS}


COMPARED = ("input_records", "reports", "duplicates", "quarantined", "quarantine_reasons", "observations",
            "reports_in_window")


def test_incremental_run_equals_a_full_run(spark, tmp_path, monkeypatch):
    """Days 1-2, then day 3 added (with a re-delivered day-1 report, an earlier copy of a day-2 report, and
    lines appended to a file already read), then a re-delivered copy alone: each rerun reads only the new records,
    and its outputs equal a full run's over the same files, row by row; the counts count every record once."""
    from kprobe.aggregate import ingest

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
    # This small increment's rollup is made beside its ids (ingest._ids_and_rollups); the ids find reports that
    # came again, so it is made again with the copies they chose.
    rolled: list[tuple[str, set[str]]] = []
    roll_up = ingest._roll_up
    monkeypatch.setattr(ingest, "_roll_up",
                        lambda *a: rolled.append((threading.current_thread().name, set(a[4]))) or roll_up(*a))
    again = run(spark, JobOptions((str(inputs),), str(out), html=False))["counts"]
    monkeypatch.undo()
    (beside, first_days), (after, days) = rolled  # the second with day 2 too: the kept copy moved from it
    assert beside.startswith("kprobe-ingest") and after == threading.current_thread().name and first_days < days
    # Day 1 is not rolled up again whole for the re-delivered copy of its report (the first copy stays the kept
    # one, so no rollup of day 1 changes): this run's one new report of it (`earlier`) is a segment.
    from kprobe.aggregate import state as st

    assert st.load(out / st.STATE_NAME).rollups["2026-11-01"] == [1, 2]
    full = run(spark, JobOptions((str(inputs),), str(tmp_path / "full"), html=False, full=True))["counts"]
    assert again["new_records"] == 6 and full["new_records"] == 12
    assert {k: again[k] for k in COMPARED} == {k: full[k] for k in COMPARED}
    # 12 records: 8 reports kept, the re-delivered day-1 report and the later copy of day2[1] are duplicates.
    assert (again["input_records"], again["reports"], again["duplicates"], again["quarantined"]) == (12, 9, 2, 1)
    assert outputs_of(out) == outputs_of(tmp_path / "full")
    # A run that reads only a copy of a report already rolled up (a spool re-delivering it): the copy counts as
    # a duplicate and day 3's rollup stands as it was, neither made again nor dropped.
    (inputs / "redelivered.jsonl").write_text(json.dumps(day3[0]) + "\n")
    third = run(spark, JobOptions((str(inputs),), str(out), html=False))["counts"]
    assert (third["new_records"], third["duplicates"]) == (1, 3)
    assert st.load(out / st.STATE_NAME).rollups["2026-11-03"] == [2]
    # The full run to compare with is spread over the shuffle partitions, as larger inputs are (these small ones
    # are rolled up and merged in one task, ingest.ONE_TASK_BELOW): the same rows come out either way.
    monkeypatch.setattr(ingest, "ONE_TASK_BELOW", 0)
    full = run(spark, JobOptions((str(inputs),), str(tmp_path / "full"), html=False, full=True))["counts"]
    assert {k: third[k] for k in COMPARED} == {k: full[k] for k in COMPARED}
    assert outputs_of(out) == outputs_of(tmp_path / "full")
    # The aggregations the spread rollup cached, to compute each once (rollups.day_rollups' `held`), are released.
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()
    monkeypatch.undo()
    rows = {(r.vantage, r.node_id): r for r in spark.read.parquet(str(out / "parquet" / "endpoint_vantage")).collect()}
    assert rows[("v3", 1)].probes == 1  # the earlier copy is the one kept, under its own vantage
    assert rows[("v1", 1)].probes == 3 + 1 + 2  # day 2's b1 lost the report that moved to v3
    assert rows[("v1", 0)].status_changes == 2  # ok on day 1, timeout on day 2, ok on day 3: across midnight
    # The state's records as ingest.RECORDS_WRITE has them written (option names Parquet would ignore silently if
    # wrong): no dictionary for values that rarely repeat, one for those that repeat (Parquet's choice, here
    # the clusters and vantages); no column statistics.
    written = sorted((out / st.STATE_NAME / "records").glob("run=1/kind=r/*/*.parquet"))  # a file per day
    part = written[0]
    jvm = spark._jvm
    reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(jvm.org.apache.parquet.hadoop.util.HadoopInputFile
                                                                   .fromPath(jvm.org.apache.hadoop.fs.Path(str(part)),
                                                                             spark._jsc.hadoopConfiguration()))
    try:
        chunks = {c.getPath().toDotString(): c for c in reader.getFooter().getBlocks().get(0).getColumns()}
    finally:
        reader.close()
    dictionary = {name for name, c in chunks.items() if c.getEncodingStats().hasDictionaryEncodedPages()}
    assert not dictionary & set(ingest.PLAIN_COLUMNS) and {"cluster_id", "vantage"} <= dictionary
    assert all(c.getStatistics().isEmpty() for c in chunks.values())
    # And in each file an endpoint's rows together (flatten.clustered), where the reports came interleaved (day 1:
    # a report of nodes 0 and 1 each hour).
    for part in written:
        keys = [tuple(r) for r in spark.read.parquet(str(part)).select(*KEYS).collect()]
        runs = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
        assert len(runs) == len(set(runs)), keys
    # Nothing new: nothing read, the same outputs.
    unchanged = run(spark, JobOptions((str(inputs),), str(out), html=False))["counts"]
    assert unchanged["new_records"] == 0 and {k: unchanged[k] for k in COMPARED} == {k: full[k] for k in COMPARED}
    assert outputs_of(out) == outputs_of(tmp_path / "full")


def test_a_failure_beside_the_other_thread_is_the_one_reported_and_leaves_the_state(spark, tmp_path, monkeypatch):
    """A small increment's ids and rollup run at once (ingest._ids_and_rollups): when either fails, its error is
    the run's, the other's Spark job is stopped or done before the run ends, and the state, the output and the
    state's directories are as the previous run left them."""
    from pyspark.sql import functions as F

    from kprobe.aggregate import ingest

    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    (inputs / "day1.jsonl").write_text("".join(json.dumps(day_reports(1, "v1", ["ok", "refused"], at=h)) + "\n"
                                               for h in (1, 2)))
    run(spark, JobOptions((str(inputs),), str(out), html=False))
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (inputs / "day1b.jsonl").write_text(json.dumps(day_reports(1, "v1", ["ok", "ok"], at=3)) + "\n")

    def dedupe(*args: object) -> set[str]:
        raise KprobeError("boom in the ids")

    day_rollups = ingest.day_rollups
    failing = {"ids": (ingest, "_dedupe", dedupe),
               "rollup": (ingest, "day_rollups", lambda rows, **kw: day_rollups(rows, **kw).withColumn(
                   "t", F.when(F.col("t").isNotNull(), F.raise_error(F.lit("boom in the rollup"))).otherwise(F.col("t"))))}
    for side, (module, name, broken) in failing.items():
        monkeypatch.setattr(module, name, broken)
        with pytest.raises(KprobeError, match=f"boom in the {side}"):
            run(spark, JobOptions((str(inputs),), str(out), html=False))
        monkeypatch.undo()
        assert spark.sparkContext.statusTracker().getActiveJobsIds() == [], side
        assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before, side
        assert not list((out / ".state").rglob("run=2")) and sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]


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
    from kprobe.aggregate import ingest

    monkeypatch.setattr(ingest, "MAX_SEGMENTS", 2)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    made = iter(range(1, 1000))

    def add(name: str, reports: list[dict], compare: bool = True) -> list:
        (inputs / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
        run(spark, JobOptions((str(inputs),), str(out), html=False))
        if compare:
            full = tmp_path / f"full-{name}"
            run(spark, JobOptions((str(inputs),), str(full), html=False, full=True))
            assert outputs_of(out) == outputs_of(full), name
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
    # A small increment's rows are rolled up in one task without the broadcast lookups (`one_task`): over this
    # day's rows (ties, mixed outcomes, moved addresses) every kind of rollup row is the same as spread.
    from kprobe.aggregate import state as st
    from kprobe.aggregate.rollups import day_rollups

    root = out / st.STATE_NAME
    rows = ingest.read_kept(spark, root, st.load(root), {"2026-11-01"})
    held: list = []
    one, spread = day_rollups(rows.coalesce(1), one_task=True), day_rollups(rows)
    cached = day_rollups(rows, held=held)  # spread, its lookups' aggregations each computed once
    try:  # released even if a collect fails: a later test checks that nothing stays cached
        one_rows, spread_rows, cached_rows = (sorted((tuple(r) for r in df.collect()), key=repr)
                                              for df in (one, spread, cached))
    finally:
        for df in held:
            df.unpersist()
    assert one.schema == spread.schema == cached.schema and one_rows == spread_rows == cached_rows and len(held) == 4
    kind = one.schema.names.index("t")
    assert {row[kind] for row in one_rows} == {"ev", "h", "hr", "cs", "f", "fe", "adv", "chg"}


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
    jvm.keep_archive(timeout=30)
    assert driver.returncode == 0 and archive.read_bytes() == b"classes" and not written.exists()
    assert jvm.archive_option() == f"-XX:SharedArchiveFile={archive}"
    jvm.keep_archive()  # nothing asked for: nothing to do


# --- A warm driver (--keep-warm): the runs of a schedule handed to one driver process. ---

def warm_drivers(runtime: Path) -> list[int]:
    """The warm drivers whose sockets are under `runtime`, by pid."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            args = command_line(int(entry.name))
            if "kprobe.aggregate.warm" in args and any(a.startswith(str(runtime)) for a in args):
                found.append(int(entry.name))
    return found


def listening_ports(pid: int) -> list[int]:
    """The TCP ports process `pid` listens on: its sockets (/proc/PID/fd) found listening in /proc/PID/net/tcp*."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    ports = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def spark_request(port: int, body: bytes) -> tuple[int, bytes] | None:
    """What a Spark transport server on 127.0.0.1:`port` answers one RpcRequest carrying `body`, sent as any
    local user could, with no authentication: (message type, message), or None when no Spark frame answers
    (another protocol's port: Py4J's)."""
    import socket
    import struct

    frame = struct.pack(">qbqi", 8 + 1 + 8 + 4 + len(body), 3, 42, len(body)) + body  # 3: RpcRequest, id 42
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
        conn.sendall(frame)
        with contextlib.suppress(OSError):
            while len(data) < 8 or len(data) < struct.unpack(">q", data[:8])[0]:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
    if len(data) < 9 or len(data) != struct.unpack(">q", data[:8])[0]:
        return None
    return data[8], data[9:]


def unauthenticated_spark_answers(pid: int) -> dict[int, list[tuple[int, bytes]]]:
    """What each Spark port of the JVM `pid` answers to two requests of a local user without the secret.

    To the driver's RPC: a message to its `endpoint-verifier` whose content is a Java-serialized string
    (Spark deserializes a message's content, and answers in a Java-serialized RpcResponse). To the block
    manager: OpenBlocks of a block that does not exist (Spark looks it up, and answers it is not found).
    """
    import struct

    def utf(text: str) -> bytes:
        return struct.pack(">H", len(text)) + text.encode()

    def string(text: str) -> bytes:
        return struct.pack(">i", len(text)) + text.encode()

    answers = {}
    for port in listening_ports(pid):
        rpc = (b"\x00" + b"\x01" + utf("127.0.0.1") + struct.pack(">i", port) + utf("endpoint-verifier")
               + b"\xac\xed\x00\x05\x74" + utf("kprobe-probe"))
        open_blocks = b"\x00" + string("app") + string("driver") + struct.pack(">i", 1) + string("rdd_999_0")
        replies = [spark_request(port, rpc), spark_request(port, open_blocks)]
        if any(replies):
            answers[port] = [r for r in replies if r is not None]
    return answers


def watched(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, set[str], int]:
    """A run as its own process, the names of every process seen below it while it ran, and its pid."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    while proc.poll() is None:
        seen |= set(descendants(proc.pid).values())
        time.sleep(0.01)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr), seen, proc.pid


@pytest.mark.lab  # a JVM of its own
def test_a_warm_driver_takes_the_next_runs_and_cancels_a_killed_one(tmp_path):
    """`kprobe aggregate --keep-warm`, as a schedule runs it: every run a process of its own.

    1. The first run starts a driver (a process of its own session, its socket 0600 in a 0700 directory)
       and prints what a run prints. A caller that sends garbage is closed and the driver goes on. Its
       JVM's ports on loopback refuse a peer that does not authenticate (spark.authenticate).
    2. The next run, interrupted (Ctrl-C) after its records are written, says so in one line, and the
       driver cancels its job, which leaves nothing committed, and goes on.
    3. The rerun counts every record once (that a driver's runs equal a full run is the job's own: the same
       `job.run`, test_incremental_run_equals_a_full_run). A run started while the rerun's job holds the
       state waits its turn in the driver (no process of its own below it: no JVM; PySpark not imported),
       which then finds nothing new (its log says so, by the run's pid). It asks for 1 s of idle time: the
       driver stops after it, its socket and its JVM gone.
    """
    import fcntl
    import signal
    import socket
    import tempfile

    from kprobe.aggregate.generate import reports, write_jsonl
    from kprobe.aggregate.jvm import LIGHT_JVM
    from kprobe.aggregate.warm import LINE_MAX

    runtime = Path(tempfile.mkdtemp(prefix="kw-"))  # short: a Unix socket's path has at most 107 bytes
    # The driver runs as the suite's own session does (interpreted, two shuffle partitions: a few dozen
    # reports), since what is proved here is how runs reach it, not Spark's generated code.
    submit = (f"--driver-java-options '{LIGHT_JVM}' --conf spark.sql.codegen.wholeStage=false "
              "--conf spark.sql.codegen.factoryMode=NO_CODEGEN pyspark-shell")
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "KPROBE_CACHE_DIR": str(tmp_path / "cache"),
           "PYSPARK_SUBMIT_ARGS": submit, "KPROBE_SHUFFLE_PARTITIONS": "2"}
    inputs, out = tmp_path / "in", tmp_path / "out"
    items = list(reports(vantages=2, clusters=2, hours=2, every_s=600))
    third = len(items) // 3
    argv = [sys.executable, "-m", "kprobe", "aggregate", str(inputs), "--out", str(out), "--no-html",
            "--keep-warm", "2m"]
    try:
        write_jsonl(inputs / "a", iter(items[:third]), per_file=10)
        first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
        assert first.returncode == 0, first.stderr[-3000:]
        assert first.stdout.startswith(f"{third} records: {third} reports aggregated"), first.stdout
        assert first.stdout.rstrip().endswith(f"outputs in {out}")
        [driver] = warm_drivers(runtime)
        folder = runtime / f"kprobe-{os.getuid()}"
        [sock] = folder.glob("*.sock")
        assert (folder.stat().st_mode & 0o777, sock.stat().st_mode & 0o777) == (0o700, 0o600)
        assert os.getsid(driver) == driver  # its own session: the caller's end does not end it
        jvms = [pid for pid, name in descendants(driver).items() if name == "java"]
        assert jvms, descendants(driver)
        with socket.socket(socket.AF_UNIX) as hostile:
            hostile.connect(str(sock))
            hostile.sendall(b"not json\n")
            hostile.settimeout(10)
            assert hostile.recv(100) == b""  # closed on it
        with socket.socket(socket.AF_UNIX) as endless:  # a line past warm.LINE_MAX is not read to its end:
            endless.connect(str(sock))  # closed at once, not when the driver's 10 s for a request run out
            endless.settimeout(5)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                endless.sendall(b"x" * (LINE_MAX + 1000))
            with contextlib.suppress(ConnectionResetError):
                assert endless.recv(100) == b""
        # Spark's ports on loopback (the driver's RPC, its block manager) answer a local user without the
        # session's secret with a refusal only (RpcFailure, "Expected SaslMessage"): without
        # authentication the driver deserialized the first request's content and answered it, the block
        # manager looked the block up.
        spark_ports = unauthenticated_spark_answers(jvms[0])
        assert len(spark_ports) >= 2, spark_ports
        for port, replies in spark_ports.items():
            assert len(replies) == 2, (port, replies)
            for kind, message in replies:
                assert kind == 5 and b"Expected SaslMessage" in message, (port, kind, message[:300])
        assert warm_drivers(runtime) == [driver]

        write_jsonl(inputs / "b", iter(items[third:2 * third]), per_file=10)
        victim = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        written = out / ".state" / "records" / "run=2" / "_SUCCESS"
        deadline = time.monotonic() + 120
        while not written.exists() and victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        victim.send_signal(signal.SIGINT)  # Ctrl-C; a SIGKILL closes its end of the socket alike
        assert (victim.wait(timeout=60), victim.communicate()[1]) == (130, "\nkprobe: interrupted\n")
        assert written.exists(), "the run ended before its records were written"
        lock = os.open(out / ".state" / ".lock", os.O_RDWR)
        try:  # the driver lets go of the state once the cancelled job has unwound
            deadline = time.monotonic() + 60
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the killed run's job still holds the state"
                    time.sleep(0.05)
        finally:
            os.close(lock)
        assert state_json(out)["run"] == 1, "the killed run's job was not cancelled: it committed"
        assert not (out / ".state" / "records" / "run=2").exists()  # removed as the job failed
        assert warm_drivers(runtime) == [driver]

        write_jsonl(inputs / "c", iter(items[2 * third:]), per_file=10)
        rerun = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        running = out / ".state" / "records" / "run=2"  # its job holds the state from before it writes here
        deadline = time.monotonic() + 120
        while not running.exists() and rerun.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert running.exists(), "the rerun ended before its job was seen running"
        # Started now, a run finds the state held by that job: it waits its turn in the driver, which then
        # finds nothing new (the rerun read it all). It is the one that asks for 1 s of idle time.
        last, children, pid = watched([sys.executable, "-X", "importtime", *argv[1:-1], "1s"], env)
        stdout, stderr = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, stderr[-3000:]
        assert stdout.startswith(f"{len(items)} records: {len(items)} reports aggregated"), stdout
        assert last.returncode == 0, last.stderr[-3000:]
        assert last.stdout == (f"nothing new: {len(list(inputs.rglob('*.jsonl')))} input files as run 2 left them; "
                               f"the outputs in {out} are current\n")
        [log] = (tmp_path / "cache" / "aggregate").glob("warm-*.log")
        assert f"job of pid {pid} on {out}: nothing new" in log.read_text(), log.read_text()[-2000:]
        assert not children, children  # no JVM, nothing: the driver ran it
        imported = [line.rsplit("|", 1)[-1].strip() for line in last.stderr.splitlines() if line.startswith("import time:")]
        assert not [m for m in imported if m.startswith(("pyspark", "py4j"))], "PySpark imported by the caller"
        counts = json.loads((out / "counts.json").read_text())
        assert (counts["input_records"], counts["reports"], counts["duplicates"], counts["quarantined"]) == (
            len(items), len(items), 0, 0)
        assert counts["observations"] == sum(len(r["endpoints"]) for r in items)
        assert state_json(out)["run"] == 2

        deadline = time.monotonic() + 60
        while warm_drivers(runtime) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not warm_drivers(runtime), "the driver outlived its idle time"
        assert not list(folder.glob("*.sock"))
        assert not [pid for pid in jvms if Path(f"/proc/{pid}").exists()], "its JVM outlived it"
    finally:
        for pid in warm_drivers(runtime):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(runtime, ignore_errors=True)


def test_only_local_runs_without_verbose_go_to_a_warm_driver(monkeypatch):
    """A warm driver takes runs on a local master and local paths, Spark's lines not wanted on the terminal;
    the others (a cluster, s3a or hdfs paths whose credentials come from the environment, -v, spark-submit)
    run in their own process."""
    from kprobe.aggregate.warm import can_serve

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    local = JobOptions(("/data/in", "file:///data/more"), "/data/out", state="/data/state")
    assert can_serve(local, verbose=False)
    assert not can_serve(local, verbose=True)
    assert not can_serve(JobOptions(("/data/in",), "/data/out", master="spark://127.0.0.1:7077"), verbose=False)
    assert not can_serve(JobOptions(("s3a://bucket/in",), "/data/out"), verbose=False)
    assert not can_serve(JobOptions(("/data/in",), "/data/out", state="hdfs://nn/state"), verbose=False)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert not can_serve(local, verbose=False)


def test_a_socket_directory_others_could_write_is_not_used(tmp_path, monkeypatch, capsys):
    """The warm driver's socket lives in a directory of the user's alone: one that others could write (or a
    link) is refused, in one line, and the run goes on in its own process. A runtime directory too long for
    a socket's path gives way to the cache's, and that, too long as well, to the temp directory."""
    import tempfile

    from kprobe.aggregate import warm

    short = Path(tempfile.mkdtemp(prefix="kw-"))  # a Unix socket's path has at most 107 bytes
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 80)))
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(short / "cache"))
    assert warm._socket_dir() == short / "cache" / f"warm-{os.getuid()}"
    monkeypatch.setenv("KPROBE_CACHE_DIR", str(tmp_path / ("c" * 80)))
    assert warm._socket_dir() == short / f"kprobe-{os.getuid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short))
    folder = short / f"kprobe-{os.getuid()}"
    folder.rmdir()
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    options = JobOptions((str(tmp_path / "in"),), str(tmp_path / "out"))
    assert warm.run(options, light=True, keep_warm=60) is None
    assert capsys.readouterr().err == (f"kprobe: no warm driver ({folder} is open to other users (mode 777): remove "
                                       "it, or chmod 700 it, and try again); running the job in this process\n")
    folder.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    folder.symlink_to(tmp_path / "elsewhere")
    assert warm.run(options, light=True, keep_warm=60) is None
    assert capsys.readouterr().err == (f"kprobe: no warm driver ({folder} is not a directory of its own (a link or a "
                                       "file): remove it and try again); running the job in this process\n")
    shutil.rmtree(short)


def test_without_a_runtime_directory_the_sockets_go_under_the_cache(tmp_path, monkeypatch):
    """Without XDG_RUNTIME_DIR (cron sets none) the driver's sockets are under kprobe's cache, not the temp
    directory, where another user (uid 65534 here) can make `kprobe-UID` first and send every warm run to a
    cold one. The cache's directory is checked as the others are: made 0700, refused when it is another
    user's, open to others, or a link."""
    import tempfile

    from kprobe.aggregate import warm
    from kprobe.private import UnsafePath

    short = Path(tempfile.mkdtemp(prefix="kw-"))  # a Unix socket's path has at most 107 bytes
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short))
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        monkeypatch.setenv("KPROBE_CACHE_DIR", str(short / "cache"))
        taken = short / f"kprobe-{os.getuid()}"
        taken.mkdir(mode=0o755)
        os.chown(taken, 65534, 65534)  # another user's, made before any run of ours
        folder = warm._socket_dir()
        info = folder.lstat()
        assert (folder, info.st_mode & 0o777, info.st_uid) == (short / "cache" / f"warm-{os.getuid()}", 0o700,
                                                               os.getuid())
        assert warm._socket_dir() == folder  # every run the same: the next run finds the driver
        assert not list(taken.iterdir())
        os.chown(folder, 65534, 65534)
        with pytest.raises(UnsafePath, match=f"^{re.escape(str(folder))} belongs to uid 65534, not to this user"):
            warm._socket_dir()
        os.chown(folder, os.getuid(), os.getgid())
        folder.chmod(0o770)
        with pytest.raises(UnsafePath, match=r"is open to other users \(mode 770\): remove it, or chmod 700 it"):
            warm._socket_dir()
        folder.rmdir()
        folder.symlink_to(tmp_path)
        with pytest.raises(UnsafePath, match=r"is not a directory of its own \(a link or a file\)"):
            warm._socket_dir()
    finally:
        shutil.rmtree(short)


def test_a_request_nested_thousands_deep_or_with_no_real_idle_time_is_closed(monkeypatch):
    """A line nested 100,000 deep (RecursionError in the JSON parser), or with an idle time of NaN, Infinity
    or a negative number (JSON parses them all), is closed at once, not queued, and the driver goes on: the
    next good request is queued."""
    import socket

    from kprobe.aggregate import warm

    driver = warm._Driver()
    good = {"options": warm._portable(JobOptions(("/data/in",), "/data/out")), "light": True, "keep_warm": 60}
    bad = [b"[" * 100_000 + b"\n", b'{"options": ' + b"[" * 100_000 + b"\n",
           *(json.dumps({**good, "keep_warm": value}).encode() + b"\n"
             for value in (float("nan"), float("inf"), -1, 0))]
    for line in bad:
        ours, theirs = socket.socketpair()
        with ours:
            ours.sendall(line)
            warm._receive(theirs, driver)  # returns: nothing queued, nothing to watch
            ours.settimeout(5)
            assert ours.recv(100) == b"", line[:40]
            assert driver.jobs.empty(), line[:40]
    ours, theirs = socket.socketpair()
    with ours:
        ours.sendall(json.dumps(good).encode() + b"\n")
        watching = threading.Thread(target=warm._receive, args=(theirs, driver), daemon=True)
        watching.start()
        caller = driver.jobs.get(timeout=5)
        assert (caller.options.out, caller.keep_warm) == ("/data/out", 60.0)
        caller.close()
        watching.join(5)
        assert not watching.is_alive()


@pytest.mark.parametrize(("keep_warm", "max_age"), [("nan", None), ("-5", None), ("inf", None), ("3600", "1")])
def test_the_driver_stops_on_an_idle_time_that_is_no_time_and_at_its_age(keep_warm, max_age):
    """The driver's own guard, past the flag's parser: an idle time of NaN (which had it wait forever) or a
    negative one (which stopped it with a ValueError) means no wait, and no idle wait reaches past MAX_AGE
    (one second here, instead of 12 hours)."""
    import tempfile

    runtime = Path(tempfile.mkdtemp(prefix="kw-"))  # a Unix socket's path has at most 107 bytes
    sock = runtime / "k.sock"
    setup = f"w.MAX_AGE = {max_age}; " if max_age else ""
    code = f"import sys; import kprobe.aggregate.warm as w; {setup}sys.exit(w.main(sys.argv[1:]))"
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", code, str(sock), keep_warm], capture_output=True, text=True,
                              timeout=30, cwd=runtime, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    finally:
        shutil.rmtree(runtime)
    took = time.monotonic() - started
    assert (done.returncode, done.stderr) == (0, "")
    assert took < (10 if max_age else 5), took
