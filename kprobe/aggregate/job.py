"""The aggregation job's edges: read inputs, call the transforms, write the outputs.

Runs the same under `kprobe aggregate` (local[*] by default) and `spark-submit` (the master
comes from spark-submit; `python -m kprobe.aggregate` is the entry). Every input record ends up
aggregated, a duplicate of an aggregated report, or quarantined with its reason, and the counts
(printed and written to `counts.json`) add up.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kprobe.aggregate import transforms as tf
from kprobe.aggregate.checks import MARKER, check_out, is_local
from kprobe.errors import KprobeError, UsageError
from kprobe.report.text import safe

OUTPUTS = ("endpoint_vantage", "cluster_summary", "findings", "advertised_changes")
# Report files by name: JSON Lines (read line by line, any size), and single documents (or JSON
# Lines, told apart by split_records); gzipped copies are decompressed by Spark's codecs. Any other
# file is not skipped silently: it becomes one quarantined record, so the counts still cover it.
LINE_FILES = "*.{jsonl,ndjson,jsonl.gz,ndjson.gz}"
WHOLE_FILES = "*.{json,json.gz}"
SUPPORTED_NAME = r"(?i)\.(jsonl|ndjson|json)(\.gz)?$"


@dataclass(frozen=True)
class JobOptions:
    """What to read, where to write, which window."""

    inputs: tuple[str, ...]
    out: str
    master: str | None = "local[*]"
    since: str | None = None
    until: str | None = None
    html: bool = True
    kafka: tuple[tuple[str, str], ...] = ()  # (bootstrap, topic)


def session(master: str | None, app: str = "kprobe-aggregate", kafka: bool = False) -> SparkSession:
    """A session; under spark-submit the master is already set and `master` is None.

    With `kafka`, the Kafka source's jars are resolved (cached) and put on the session.
    """
    builder = SparkSession.builder.appName(app)
    if kafka:
        import pyspark

        from kprobe.aggregate.kafka_source import connector_jars

        builder = builder.config("spark.jars", ",".join(connector_jars(pyspark.__version__)))
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # One machine: the driver on loopback. Left alone, Spark picks the first non-loopback
        # interface when the hostname maps to 127.0.0.1, sends its own traffic through it, and
        # stalls about 30 s on start-up looking that address up.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1"))
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", os.environ.get("KPROBE_SPARK_DRIVER_MEMORY", "2g"))
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", os.environ.get("KPROBE_SHUFFLE_PARTITIONS", "8")))
    spark = builder.getOrCreate()
    # Spark's own log lines (an executor's stack trace on a failed task) would bury the one-line
    # error kprobe prints with the cause; KPROBE_SPARK_LOG_LEVEL=WARN brings them back.
    level = os.environ.get("KPROBE_SPARK_LOG_LEVEL", "OFF")
    spark.sparkContext.setLogLevel(level)
    if level == "OFF":
        from pyspark.logger import PySparkLogger

        # PySpark logs a failed query's context itself (as JSON on stderr) when the error is shown.
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).disabled = True
    return spark


def read_records(spark: SparkSession, inputs: tuple[str, ...],
                 kafka: tuple[tuple[str, str], ...] = ()) -> DataFrame:
    """Every input file as whole text, split into records (`file`, `line`), plus topic messages.

    A topic is read whole (earliest to latest offsets) as a batch: each message is one report,
    as `kprobe probe --publish` produces them.
    """
    parts: list[DataFrame] = []
    if inputs:
        # A fresh reader per source: DataFrameReader.option mutates the reader it is called on.
        def reader() -> Any:
            return spark.read.option("recursiveFileLookup", "true")

        lines = (reader().option("pathGlobFilter", LINE_FILES).text(list(inputs))
                 .select(F.input_file_name().alias("file"), F.col("value").alias("line"))
                 .where(F.trim(F.col("line")) != ""))
        files = (reader().option("pathGlobFilter", WHOLE_FILES).text(list(inputs), wholetext=True)
                 .select(F.input_file_name().alias("file"), "value"))
        # Only the listing is read here (no `content` column is selected, so no file is opened).
        others = (reader().format("binaryFile").load(list(inputs))
                  .where(~F.col("path").rlike(SUPPORTED_NAME))
                  .select(F.col("path").alias("file"), F.lit(None).cast("string").alias("line")))
        parts += [lines, tf.split_records(files), others]
    for bootstrap, topic in kafka:
        messages = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).option("startingOffsets", "earliest")
                    .option("endingOffsets", "latest").option("failOnDataLoss", "false").load())
        parts.append(messages.select(
            F.concat(F.lit(f"kafka://{bootstrap}/{topic}/"), F.col("partition").cast("string"), F.lit("@"),
                     F.col("offset").cast("string")).alias("file"),
            F.col("value").cast("string").alias("line")))
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def accounting_error(counts: dict[str, Any]) -> str | None:
    """Why the counts do not cover every input record, or None when they add up.

    `input_records` is counted on the records as read, before parsing; `reports` is what the
    dedupe kept, `duplicates` comes from counting distinct ids apart from the dedupe, and
    `quarantined` from the rejected rows. A record lost or doubled anywhere shows up here.
    """
    total = counts["reports"] + counts["duplicates"] + counts["quarantined"]
    if total == counts["input_records"]:
        return None
    return (f"record accounting does not add up: {counts['input_records']} records read, but {counts['reports']} "
            f"reports + {counts['duplicates']} duplicates + {counts['quarantined']} quarantined = {total} "
            "(were input files changing while the job read them?)")


def run(spark: SparkSession, options: JobOptions) -> dict[str, Any]:
    """The whole job; returns the counts and the worst gaps.

    The output checks run again here (not only in the entry points) because `run` is what
    replaces `options.out`: no caller can reach the swap without them. A failing Spark job is
    reported in one line and leaves the previous output as it was.
    """
    check_out(options.out, options.inputs)
    with _spark_errors(options.out):
        return _run(spark, options)


def _run(spark: SparkSession, options: JobOptions) -> dict[str, Any]:
    raw = read_records(spark, options.inputs, options.kafka)
    input_records = raw.count()  # the records as read, before any parsing or splitting into outcomes
    records = tf.quarantine_reason(tf.parse(raw))
    # Parsed once, in one pass: each record's reason, and the slim report when it is usable; what
    # later steps re-read is this cache of flat columns, never the nested report structs.
    staged = tf.slim(records.withColumn("record", F.when(F.col("reason").isNotNull(), F.substring("line", 1, 10_000))),
                     keep=("file", "reason", "record")).cache()
    cached = [staged]
    try:
        slim_all = staged.where(F.col("reason").isNull()).drop("file", "reason", "record")
        quarantined = staged.where(F.col("reason").isNotNull()).select("file", "reason", "record")
        # One pass over the cache for the split (this pass fills it); the distinct ids are counted
        # here, apart from the dedupe, so that a dedupe losing or keeping too much fails the check.
        split = staged.agg(
            F.count("reason").alias("quarantined"),
            F.count(F.when(F.col("reason").isNull(), F.lit(1))).alias("usable"),
            F.count_distinct(F.when(F.col("reason").isNull(), F.col("report_id"))).alias("ids"),
        ).first()
        assert split is not None
        # No id seen twice (the usual case): the dedupe would keep every row, so its shuffle is skipped.
        all_reports = (slim_all if split["usable"] == split["ids"] else tf.dedupe(slim_all)).cache()
        reps = tf.within(all_reports, options.since, options.until)
        obs = tf.observations(reps).cache()
        cached += [all_reports, obs]
        counts: dict[str, Any] = {
            "input_records": input_records,
            "quarantined": split["quarantined"],
            "duplicates": split["usable"] - split["ids"],
            "reports": all_reports.count(),
            "reports_in_window": reps.count(),
            "observations": obs.count(),
        }
        error = accounting_error(counts)
        if error:
            raise KprobeError(error)
        counts["quarantine_reasons"] = {r["reason"]: r["n"] for r in
                                        quarantined.groupBy("reason").agg(F.count(F.lit(1)).alias("n")).collect()}
        outputs = {
            "endpoint_vantage": tf.endpoint_vantage(obs),
            "cluster_summary": tf.cluster_summary(reps),
            "findings": tf.findings_by_day(reps),
            "advertised_changes": tf.advertised_changes(reps),
        }
        worst = write(outputs, quarantined, counts, options, obs)
    finally:
        for frame in cached:
            frame.unpersist()
    return {"counts": counts, "worst": worst}


def worst_gaps(endpoint_vantage: DataFrame, limit: int = 10) -> list[dict[str, Any]]:
    """The rows with the lowest success rate, for the terminal and the page."""
    return [row.asDict() for row in endpoint_vantage.orderBy(
        "success_rate", "cluster_id", "vantage", "node_id", "host", "port").limit(limit).collect()]


@contextmanager
def _spark_errors(out: str) -> Iterator[None]:
    """Spark's failures (a Java stack trace) as one line that names the cause."""
    try:
        yield
    except PySparkException as exc:
        condition = exc.getCondition() or ""
        text = _first_line(str(exc))
        if condition.startswith("PATH_NOT_FOUND"):
            raise UsageError(f"cannot read the input: {text}; give report files or directories") from None
        raise KprobeError(f"the Spark job failed: {text}; the previous output in {out} is unchanged") from None
    except Py4JError as exc:
        raise KprobeError(f"the Spark job failed: {_java_cause(exc)}; the previous output in {out} is unchanged"
                          ) from None


def _first_line(text: str, limit: int = 300) -> str:
    line = next((t.strip() for t in text.splitlines() if t.strip()), "unknown error")
    return safe(line, limit)


def _java_cause(exc: Py4JError) -> str:
    """The Spark error's headline and its root cause, without the stack frames."""
    lines = [t.strip() for t in str(exc).splitlines()]
    head = next((t.removeprefix(": ") for t in lines if t.startswith(": ")), lines[0] if lines else "")
    causes = [t.removeprefix("Caused by: ") for t in lines if t.startswith("Caused by: ")]
    text = head + (f" (caused by {causes[-1]})" if causes and causes[-1] not in head else "")
    return safe(text or "unknown error", 400)


def write(outputs: dict[str, DataFrame], quarantined: DataFrame, counts: dict[str, Any],
          options: JobOptions, observations: DataFrame | None = None) -> list[dict[str, Any]]:
    """Parquet and JSON through Spark's commit protocol, into a staging directory swapped in whole.

    Each table is computed once, into Parquet; the JSON copy, the worst gaps and the page read
    that small result back instead of computing it again. Returns the worst gaps.

    On a local path the previous result is replaced only once the new one is complete (a failed
    write removes the staging directory and leaves the previous result alone); on other file
    systems (s3a, hdfs) Spark's overwrite of each output is used and a reader may see the gap.
    """
    final = Path(options.out.removeprefix("file://")).resolve() if is_local(options.out) else None
    staging = str(final.parent / f".{final.name}.staging-{uuid.uuid4().hex[:8]}") if final else options.out
    spark = quarantined.sparkSession
    try:
        written: dict[str, DataFrame] = {}
        for name, df in {**outputs, "quarantine": quarantined}.items():
            df.write.mode("overwrite").parquet(f"{staging}/parquet/{name}")
            written[name] = spark.read.parquet(f"{staging}/parquet/{name}")
            written[name].coalesce(1).write.mode("overwrite").json(f"{staging}/json/{name}")
        worst = worst_gaps(written["endpoint_vantage"])
        if final is None:
            return worst
        Path(staging, "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
        if options.html:
            from kprobe.aggregate.html import render_html

            Path(staging, "report.html").write_text(render_html(written, counts, worst, observations))
        # What lets a later run replace this directory (checks.check_out refuses one without it).
        Path(staging, MARKER).write_text("written by kprobe aggregate; the next run replaces this directory\n")
    except BaseException:
        if final is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
    if final.exists():
        final.rename(old)
    os.rename(staging, final)
    shutil.rmtree(old, ignore_errors=True)
    return worst


def summary_lines(result: dict[str, Any]) -> list[str]:
    """What the terminal shows: the counts, then the worst gaps first."""
    c = result["counts"]
    lines = [f"{c['input_records']} records: {c['reports']} reports aggregated ({c['reports_in_window']} in the "
             f"window, {c['observations']} endpoint observations), {c['duplicates']} duplicates, "
             f"{c['quarantined']} quarantined"]
    for reason, n in sorted(c.get("quarantine_reasons", {}).items()):
        lines.append(f"  quarantined {n}: {safe(reason, 200)}")
    gaps = [w for w in result["worst"] if w["success_rate"] < 1]
    lines.append("worst gaps:" if gaps else "no gaps: every endpoint reachable from every vantage")
    for w in gaps:
        # Names come from reports, i.e. from brokers and hosts: escaped, never raw terminal input.
        who = "bootstrap" if w["node_id"] == tf.BOOTSTRAP_NODE else f"broker {w['node_id']}"
        lines.append(f"  {w['success_rate']:6.1%}  cluster {safe(w['cluster_id'], 80)} {who} "
                     f"{safe(w['host'], 120)}:{w['port']} from {safe(w['vantage'], 80)} ({w['probes']} probes, "
                     f"last {safe(w['last_status'], 40)})")
    return lines
