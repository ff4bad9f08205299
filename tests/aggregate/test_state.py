"""kprobe aggregate's incremental state: runs that read only what is new give what a full run gives.

Days of crafted reports added run by run (a re-delivered copy, an earlier copy, a day rolled up in
segments), state that is foreign or corrupt refused before Spark starts, and a failure beside the other
thread leaving the state as it was.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from aggregate_runs import OUTPUTS, V1, crafted, endpoint, stamp, state_json  # noqa: E402

from kprobe.aggregate.checks import validate  # noqa: E402
from kprobe.aggregate.flatten import KEYS  # noqa: E402
from kprobe.aggregate.job import JobOptions, run  # noqa: E402
from kprobe.errors import KprobeError, UsageError  # noqa: E402

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
