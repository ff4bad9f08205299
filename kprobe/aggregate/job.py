"""The aggregation job's edges: read inputs, call the transforms, write the outputs.

Runs the same under `kprobe aggregate` (local[*] by default) and `spark-submit` (the master
comes from spark-submit; `python -m kprobe.aggregate` is the entry). Every input record ends up
aggregated, a duplicate of an aggregated report, or quarantined with its reason, and the counts
(printed and written to `counts.json`) add up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
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
from kprobe.output.sanitize import safe
from kprobe.paths import cache_root

# Report files by name: JSON Lines (read line by line, any size), and single documents (or JSON
# Lines, told apart by split_records); gzipped copies are decompressed by Spark's codecs. Any other
# file is not skipped silently: it becomes one quarantined record, so the counts still cover it.
LINE_FILES = "*.{jsonl,ndjson,jsonl.gz,ndjson.gz}"
WHOLE_FILES = "*.{json,json.gz}"
SUPPORTED_NAME = r"(?i)\.(jsonl|ndjson|json)(\.gz)?$"
# Log files of quiet runs kept under kprobe's cache (see `session`): enough to look back at the
# last few failures, few enough that scheduled runs do not fill the disk.
LOGS_KEPT = 20
_jvm_log: Path | None = None


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


def session(master: str | None, app: str = "kprobe-aggregate", kafka: bool = False,
            verbose: bool = False) -> SparkSession:
    """A session; under spark-submit the master is already set and `master` is None.

    With `kafka`, the Kafka source's jars are resolved (cached) and put on the session.

    Quiet unless `verbose`. The JVM that PySpark starts inherits the terminal, and writes its own
    start-up lines (`WARNING: Using incubator modules`, log4j's profile and default-level notes,
    `WARN NativeCodeLoader`) before any log level applies, so no log level hides them. So it is
    started with its stdout and stderr on a log file it keeps for life (`spark_log()`, named in
    any failure), where Spark logs at WARN: the detail behind a failure (an executor's stack
    trace) is kept, off the terminal, where it would bury kprobe's one-line error. With
    `verbose` the JVM writes to the terminal, as Spark's own tools do.
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
    global _jvm_log
    log = None if verbose or not _starts_jvm() else _new_log()
    try:
        with _jvm_output_to(log):
            if log is not None:
                _jvm_log = log
            spark = builder.getOrCreate()
    except PySparkException as exc:  # the JVM exited at once (a bad memory size or master, broken Java)
        cause = _log_cause(log) if log is not None else None
        raise KprobeError(f"Spark did not start: {cause or _first_line(str(exc))}{_log_hint()}") from None
    except Py4JError as exc:  # the JVM started, the SparkContext did not (its driver could not bind, ...)
        raise KprobeError(f"Spark did not start: {_java_cause(exc)}{_log_hint()}") from None
    # Where Spark's lines go to the terminal (spark-submit's own JVM, or no log file could be
    # made) they are off, so they cannot bury the one-line error; into a log file (or with
    # `verbose`) they come at WARN. KPROBE_SPARK_LOG_LEVEL chooses either way.
    default = "WARN" if verbose or _jvm_log is not None else "OFF"
    spark.sparkContext.setLogLevel(os.environ.get("KPROBE_SPARK_LOG_LEVEL", default))
    if not verbose:
        try:
            from pyspark.logger import PySparkLogger
        except ImportError:  # PySpark 3.5: no such loggers
            return spark
        # PySpark logs a failed query's context itself (as JSON on Python's stderr, the terminal).
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).disabled = True
    return spark


def spark_log() -> Path | None:
    """The log file of the JVM that `session` started quietly in this process, if it did."""
    return _jvm_log


def _log_hint() -> str:
    return f" (Spark's log: {_jvm_log})" if _jvm_log is not None else ""


# What a JVM that starts writes before it fails, none of it the reason: Java's and log4j's
# notices, Spark's timestamped log lines, stack frames.
_NOISE = re.compile(r"WARNING: Using incubator modules|Using Spark's default log4j profile|Setting default log level"
                    r"|To adjust logging level|\d\d/\d\d/\d\d \d\d:\d\d:\d\d |\s|Error: A fatal exception")


def _log_cause(log: Path) -> str | None:
    """The first line of a JVM's log that says why it stopped (`Invalid maximum heap size`, ...).

    Only for a JVM that exited before PySpark could reach it: PySpark then knows nothing more
    than that it exited, and the reason is in the log, which a quiet run keeps off the terminal.
    """
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    line = next((t for t in lines if t.strip() and not _NOISE.match(t)), None)
    return safe(line.removeprefix('Exception in thread "main" '), 300) if line else None


def _starts_jvm() -> bool:
    """Whether getOrCreate will launch a JVM: not under spark-submit, not a second session."""
    from pyspark import SparkContext

    # `_gateway` is PySpark's handle on the JVM it launched, kept across sessions of one
    # process; should it ever be renamed, a log file is made that stays empty, no more.
    return "PYSPARK_GATEWAY_PORT" not in os.environ and getattr(SparkContext, "_gateway", None) is None


def _new_log() -> Path | None:
    """A new log file for this run's JVM under kprobe's cache (else the temp dir); older ones pruned.

    One file per run: parallel runs (tests, two terminals) must not write into one another's.
    """
    name = f"spark-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    mine = cache_root() / "aggregate"
    for path in (mine / name, Path(tempfile.gettempdir()) / f"kprobe-{name}"):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        except OSError:
            continue
        if path.parent == mine:
            for old in sorted(mine.glob("spark-*.log"))[:-LOGS_KEPT]:
                old.unlink(missing_ok=True)
        return path
    return None  # nowhere to write: the JVM's lines reach the terminal, as with `verbose`


@contextmanager
def _jvm_output_to(log: Path | None) -> Iterator[None]:
    """File descriptors 1 and 2 on `log` inside the block, Python's own again after it.

    A child started inside (PySpark's gateway JVM, through spark-submit) inherits the file as
    its stdout and stderr and keeps it. Whatever Python itself wrote meanwhile would land in the
    log too; getOrCreate writes nothing. Why not PySpark's `launch_gateway(popen_kwargs=...)`:
    it means building the SparkContext by hand, around the builder, on PySpark internals.
    """
    if log is None:
        yield
        return
    _flush()
    target = os.open(log, os.O_WRONLY | os.O_APPEND)
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        _flush()  # what Python wrote inside goes to the log now, not to the terminal later
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (target, *saved):
            os.close(fd)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


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
    with staged(raw) as st:
        reps = tf.within(st.reports, options.since, options.until)
        obs = tf.observations(reps).cache()
        try:
            counts: dict[str, Any] = {
                "input_records": input_records,
                "quarantined": st.quarantined_count,
                "duplicates": st.duplicates,
                "reports": st.reports.count(),
                "reports_in_window": reps.count(),
                "observations": obs.count(),
            }
            error = accounting_error(counts)
            if error:
                raise KprobeError(error)
            counts["quarantine_reasons"] = {r["reason"]: r["n"] for r in st.quarantined.groupBy("reason").agg(
                F.count(F.lit(1)).alias("n")).collect()}
            outputs = {
                "endpoint_vantage": tf.endpoint_vantage(obs),
                "cluster_summary": tf.cluster_summary(reps),
                "findings": tf.findings_by_day(reps),
                "advertised_changes": tf.advertised_changes(reps),
            }
            worst = write(outputs, st.quarantined, counts, options, obs)
        finally:
            obs.unpersist()
    return {"counts": counts, "worst": worst}


@dataclass(frozen=True)
class Staged:
    """The input records parsed once and split: usable reports, one row per id, and the rejects.

    What the job aggregates is `reports`, whichever way the dedupe went; the tests take their
    reports from here too, so they check the rows the job uses.
    """

    reports: DataFrame  # slim (tf.slim), one row per report id, cached
    quarantined: DataFrame  # file, reason, record
    quarantined_count: int
    usable: int  # usable records, a re-delivered report counted each time
    ids: int  # distinct report ids among them

    @property
    def duplicates(self) -> int:
        """Usable records beyond the first of their id."""
        return self.usable - self.ids

    @property
    def deduped(self) -> bool:
        """Whether the dedupe ran: only when some id repeats, since it costs a shuffle."""
        return self.usable != self.ids


@contextmanager
def staged(raw: DataFrame) -> Iterator[Staged]:
    """The records (`file`, `line`) parsed, split and deduped; the caches are dropped on exit.

    Parsed once, in one pass: each record's reason, and the slim report when it is usable; what
    later steps re-read is this cache of flat columns, never the nested report structs.
    """
    records = tf.quarantine_reason(tf.parse(raw))
    cache = tf.slim(records.withColumn("record", F.when(F.col("reason").isNotNull(), F.substring("line", 1, 10_000))),
                    keep=("file", "reason", "record")).cache()
    frames = [cache]
    try:
        slim_all = cache.where(F.col("reason").isNull()).drop("file", "reason", "record")
        # One pass over the cache for the split (this pass fills it); the distinct ids are counted
        # here, apart from the dedupe, so that a dedupe losing or keeping too much fails the check.
        split = cache.agg(
            F.count("reason").alias("quarantined"),
            F.count(F.when(F.col("reason").isNull(), F.lit(1))).alias("usable"),
            F.count_distinct(F.when(F.col("reason").isNull(), F.col("report_id"))).alias("ids"),
        ).first()
        assert split is not None
        # No id seen twice (the usual case): the dedupe would keep every row, so its shuffle is skipped.
        reports = (slim_all if split["usable"] == split["ids"] else tf.dedupe(slim_all)).cache()
        frames.append(reports)
        yield Staged(reports, cache.where(F.col("reason").isNotNull()).select("file", "reason", "record"),
                     split["quarantined"], split["usable"], split["ids"])
    finally:
        for frame in frames:
            frame.unpersist()


def worst_gaps(endpoint_vantage: DataFrame, limit: int = 10) -> list[dict[str, Any]]:
    """The rows with the lowest success rate, for the terminal and the page."""
    return [row.asDict() for row in endpoint_vantage.orderBy(
        "success_rate", "cluster_id", "vantage", "node_id", "host", "port").limit(limit).collect()]


@contextmanager
def _spark_errors(out: str) -> Iterator[None]:
    """Spark's failures (a Java stack trace) as one line that names the cause, and the log with the rest."""
    try:
        yield
    except PySparkException as exc:
        condition = exc.getCondition() or ""
        text = _first_line(str(exc))
        if condition.startswith("PATH_NOT_FOUND"):
            raise UsageError(f"cannot read the input: {text}; give report files or directories") from None
        raise KprobeError(f"the Spark job failed: {text}; the previous output in {out} is unchanged"
                          f"{_log_hint()}") from None
    except Py4JError as exc:
        raise KprobeError(f"the Spark job failed: {_java_cause(exc)}; the previous output in {out} is unchanged"
                          f"{_log_hint()}") from None


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
            from kprobe.aggregate.page import render_html

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
