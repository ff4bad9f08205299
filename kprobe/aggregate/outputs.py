"""The job's outputs: the window's rollups merged into each table, written and swapped in whole.

Every output is rebuilt from the state's per-day rollups (small: rows per endpoint and vantage,
per day, per hour), written as Parquet and JSON into a staging directory, with report.html and
counts.json, and the staging directory replaces --out whole (on a local path) once complete.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kprobe.aggregate import local
from kprobe.aggregate import state as st
from kprobe.aggregate.checks import MARKER, is_local
from kprobe.aggregate.flatten import FLAT
from kprobe.aggregate.ingest import parquet_bytes, read_kept, read_parts, small
from kprobe.aggregate.plan import JobOptions, Progress, write_stamp
from kprobe.aggregate.rollups import day_rollups, per_minute
from kprobe.aggregate.window import within


def _bounds(since: str | None, until: str | None) -> tuple[dt.datetime | None, dt.datetime | None]:
    def at(value: str | None) -> dt.datetime | None:
        if value is None:
            return None
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
    return at(since), at(until)


def rollups(spark: SparkSession, root: Path, manifest: st.Manifest, since: str | None,
            until: str | None) -> DataFrame:
    """The current rollups of the days in [since, until): stored for whole days, made now for the edge days.

    With rollups made now, the whole is cached: every output reads them, and they come from
    records. Stored rollups alone are not: each output reads its few columns from their Parquet
    faster than Spark fills a cache of all of them.
    """
    start, end = _bounds(since, until)
    whole, edges = [], set()
    for day in manifest.rollups:
        first = dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)
        last = first + dt.timedelta(days=1)
        if (start and last <= start) or (end and first >= end):
            continue
        if (start and first < start) or (end and last > end):
            edges.add(day)
        else:
            whole += [(r, "", day) for r in manifest.rollups[day]]
    stored = read_parts(spark, root, "rollups", whole)
    if edges:
        rows = read_kept(spark, root, manifest, edges)
        assert rows is not None
        made = day_rollups(within(rows, since, until))
        stored = made if stored is None else stored.drop("run").unionByName(made, allowMissingColumns=True)
        return stored.cache()
    if stored is None:
        return day_rollups(local.rows(spark, [], FLAT))
    return small(stored, parquet_bytes(root, "rollups", whole))


# Data spanning at most this much (from the first hour to the last in `hourly`) get a per-minute
# timeline on the page: an incident of an hour is then minutes, not one point.
MINUTELY_SPAN = dt.timedelta(hours=1)


def page_minutes(spark: SparkSession, root: Path, manifest: st.Manifest, options: JobOptions,
             window: DataFrame) -> DataFrame | None:
    """Per-minute probes and successes for the page, when the window's data span an hour or so; else None.

    Why from the kept records and only then: the rollups stop at the hour, and a per-minute rollup
    kept for every day would be 60 times `hourly`. When every observation falls in one or two
    hours, those days' records are few, and reading them again is cheap.
    """
    hours = window.where(F.col("t") == "hr")
    span = hours.agg(F.min("hour").alias("a"), F.max("hour").alias("z"), F.collect_set("d").alias("days")).first()
    if span is None or span["a"] is None or span["z"] - span["a"] > MINUTELY_SPAN:
        return None
    rows = read_kept(spark, root, manifest, set(span["days"]))
    return None if rows is None else per_minute(within(rows, options.since, options.until))


def total_of(rollups: DataFrame, kind: str, column: str) -> int:
    """The sum of one column over one kind of rollup row (`cs`: cluster summaries, ...)."""
    row = rollups.where(F.col("t") == kind).agg(F.sum(column).alias("n")).first()
    return int(row["n"] or 0) if row is not None else 0


def worst_gaps(endpoint_vantage: DataFrame, limit: int = 10) -> list[dict[str, Any]]:
    """The rows with the lowest success rate, for the terminal and the page."""
    return [row.asDict() for row in endpoint_vantage.orderBy(
        "success_rate", "cluster_id", "vantage", "node_id", "host", "port").limit(limit).collect()]


def write(spark: SparkSession, outputs: dict[str, Callable[[], DataFrame]], counts: dict[str, Any],
          options: JobOptions, progress: Progress, state: Path,
          minutely: DataFrame | None = None) -> list[dict[str, Any]]:
    """Parquet and JSON through Spark's commit protocol, into a staging directory swapped in whole.

    Each table is computed once, into Parquet; the JSON copy, the worst gaps and the page read
    that small result back instead of computing it again. Returns the worst gaps. `minutely`
    (see `page_minutes`) only makes the page's timelines finer; it is not an output. Each output is
    given as the function that plans it, called in the thread that writes it (OUTPUT_THREADS):
    planning is a new driver's work too, about a second for the seven.

    On a local path the previous result is replaced only once the new one is complete (a failed
    write removes the staging directory and leaves the previous result alone); on other file
    systems (s3a, hdfs) Spark's overwrite of each output is used and a reader may see the gap.
    The state, when it lives in --out (the default), moves into the new output just before the
    swap (`state.recover` finishes a swap a kill interrupted).
    """
    final = Path(options.out.removeprefix("file://")).resolve() if is_local(options.out) else None
    staging = str(final.parent / f".{final.name}.staging-{uuid.uuid4().hex[:8]}") if final else options.out
    try:
        written: dict[str, DataFrame] = {}
        totals: dict[str, int] = {}
        json_here = final is not None
        with ThreadPoolExecutor(OUTPUT_THREADS, thread_name_prefix="kprobe-output") as pool:
            try:
                made = pool.map(lambda item: _table(spark, staging, item[0], item[1], json_here), outputs.items())
                for name, (back, lines) in zip(outputs, made, strict=True):
                    written[name] = back
                    if lines is None:
                        if progress.enabled:
                            progress(name, f"{back.count():,} rows")
                        continue
                    _write_json(Path(staging, "json", name), lines)
                    if name == "endpoint_vantage":
                        rows = [json.loads(line) for line in lines]
                        totals[name] = sum(r["probes"] for r in rows)
                        worst = _worst(rows)
                    if name == "cluster_summary":
                        totals[name] = sum(json.loads(line)["reports"] for line in lines)
                    progress(name, f"{len(lines):,} rows")
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)  # the outputs not started: none starts now
                spark.sparkContext.cancelAllJobs()  # and the other thread's job, which the pool waits for
                raise
        if "endpoint_vantage" not in totals:
            worst = worst_gaps(written["endpoint_vantage"])
        counts["observations"] = totals.get("endpoint_vantage") or _total(written["endpoint_vantage"], "probes")
        counts["reports_in_window"] = totals.get("cluster_summary") or _total(written["cluster_summary"], "reports")
        if final is None:
            return worst
        Path(staging, "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
        if options.html:
            from kprobe.aggregate.page import render_html

            Path(staging, "report.html").write_text(render_html(written, counts, worst, minutely))
            progress("report.html", "written")
        # What lets a later run replace this directory (checks.check_out refuses one without it).
        Path(staging, MARKER).write_text("written by kprobe aggregate; the next run replaces this directory\n")
        write_stamp(Path(staging), options, state)  # last: it lists every file above
    except BaseException:
        if final is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    inside = final / st.STATE_NAME
    if state == inside and inside.exists():
        os.rename(inside, Path(staging, st.STATE_NAME))
    old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
    if final.exists():
        final.rename(old)
    os.rename(staging, final)
    shutil.rmtree(old, ignore_errors=True)
    return worst


# Outputs written at once: each is a few small Spark jobs (one task each for a few days' rollups: see
# ingest.ONE_TASK_BELOW) that a new JVM plans and runs slowly, so two keep both cores of a small machine
# busy.
OUTPUT_THREADS = 2


def _table(spark: SparkSession, staging: str, name: str, plan: Callable[[], DataFrame],
           json_here: bool) -> tuple[DataFrame, list[str] | None]:
    """One output into staging: its Parquet, read back, and its JSON lines (None: Spark wrote its JSON).

    The quarantine (any size) and any output off this machine get Spark's JSON writer; the merged
    outputs are small (rows per endpoint and vantage, per day, per hour), so their JSON is Spark's own
    `to_json` collected, written in one file by the caller: a Spark job fewer per output.
    """
    df = plan()
    df.write.mode("overwrite").parquet(f"{staging}/parquet/{name}")
    # Read back with the schema it was written with: inferring it again is a Spark job of its own.
    back = spark.read.schema(df.schema).parquet(f"{staging}/parquet/{name}")
    if name == "quarantine" or not json_here:
        back.coalesce(1).write.mode("overwrite").json(f"{staging}/json/{name}")
        return back, None
    return back, [row[0] for row in back.select(F.to_json(F.struct("*"))).collect()]


def _worst(rows: list[dict[str, Any]], limit: int = 10) -> list[dict[str, Any]]:
    """worst_gaps over the rows already in hand (as JSON: times are RFC 3339 strings); no Spark job."""
    order = ("success_rate", "cluster_id", "vantage", "node_id", "host", "port")
    return sorted(rows, key=lambda r: tuple((r.get(k) is not None, r.get(k)) for k in order))[:limit]


def _write_json(directory: Path, lines: list[str]) -> None:
    """JSON Lines as Spark's writer lays them out: a part file and `_SUCCESS`."""
    directory.mkdir(parents=True, exist_ok=True)
    # A new name each run, as Spark's writer gives: a reader that lists the directory never mixes runs.
    part = directory / f"part-00000-{uuid.uuid4()}-c000.json"
    part.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (directory / "_SUCCESS").write_text("")


def _total(df: DataFrame, column: str) -> int:
    row = df.agg(F.sum(column).alias("n")).first()
    return int(row["n"] or 0) if row is not None else 0


