"""The aggregation job's edges: read inputs, call the transforms, keep the state, write the outputs.

Runs the same under `kprobe aggregate` (local[*] by default) and `spark-submit` (the master
comes from spark-submit; `python -m kprobe.aggregate` is the entry). Every input record ends up
aggregated, a duplicate of an aggregated report, or quarantined with its reason, and the counts
(printed and written to `counts.json`) add up, across runs too: a run reads only the files and
topic messages no earlier run read (kprobe.aggregate.state), rolls up the days they fall on,
and merges every day's rollups into the outputs.
"""

from __future__ import annotations

import datetime as dt
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
from pyspark.sql import DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kprobe.aggregate import state as st
from kprobe.aggregate import transforms as tf
from kprobe.aggregate.checks import MARKER, check_out, is_local
from kprobe.errors import KprobeError, UsageError
from kprobe.output.sanitize import safe
from kprobe.paths import cache_root

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
    full: bool = False  # recompute everything: the state is emptied and rebuilt from the inputs
    state: str | None = None  # the state directory; None: OUT/.state
    progress: bool | None = None  # one line per stage on stderr; None: when stderr is a terminal


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


@dataclass(frozen=True)
class InputFile:
    """One input file as listed: a file whose size or modification time changed is read again."""

    path: str
    size: int
    mtime: int

    @property
    def kind(self) -> str:
        """Lines (JSON Lines), whole (one document or JSON Lines) or other (quarantined unread)."""
        name = self.path.rsplit("/", 1)[-1].lower().removesuffix(".gz")
        if name.endswith((".jsonl", ".ndjson")):
            return "lines"
        return "whole" if name.endswith(".json") else "other"


def _hidden(name: str) -> bool:
    """Spark's rule: names starting with `.` or `_` (`_SUCCESS`, `.crc` files, a `.state`) are not data."""
    return name.startswith((".", "_"))


def list_inputs(spark: SparkSession, inputs: tuple[str, ...]) -> list[InputFile]:
    """Every file under the inputs (recursively), with its size and modification time.

    Local paths are walked by Python (no Spark job, no JVM round trip per file); others (s3a,
    hdfs) through Hadoop's FileSystem, which also expands globs.
    """
    found: dict[str, InputFile] = {}
    for item in inputs:
        if is_local(item):
            root = Path(item.removeprefix("file://")).resolve()
            if root.is_file():
                st = root.stat()
                found[str(root)] = InputFile(str(root), st.st_size, st.st_mtime_ns)
                continue
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not _hidden(d))
                for name in files:
                    if not _hidden(name):
                        path = os.path.join(folder, name)
                        st = os.stat(path)
                        found[path] = InputFile(path, st.st_size, st.st_mtime_ns)
            continue
        jvm: Any = spark.sparkContext._jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path(item)
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        for status in fs.globStatus(hadoop_path) or []:
            listing = fs.listFiles(status.getPath(), True)
            base = status.getPath().toString()
            while listing.hasNext():
                entry = listing.next()
                path = entry.getPath().toString()
                if not any(_hidden(part) for part in path[len(base):].split("/") if part):
                    found[path] = InputFile(path, entry.getLen(), entry.getModificationTime() * 1_000_000)
    return [found[p] for p in sorted(found)]


def topic_ranges(bootstrap: str, topic: str, done: dict[str, int]) -> dict[int, tuple[int, int]]:
    """Per partition of a topic: (first offset not yet read, end offset now), for the partitions with news.

    The ends are fixed before Spark reads, so what a run read is known exactly and the next run
    starts there (a message published meanwhile waits for the next run, it is not lost).
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kprobe-aggregate", "enable.auto.commit": False,
                         "socket.timeout.ms": 10000, "log_level": 0})
    try:
        meta = consumer.list_topics(topic, timeout=15)
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            raise KprobeError(f"cannot read the topic {topic!r} at {bootstrap}: {info.error if info else 'not found'}")
        ranges = {}
        for partition in sorted(info.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
            start = max(low, done.get(str(partition), low))
            if start < high:
                ranges[partition] = (start, high)
        return ranges
    except KafkaException as exc:
        raise KprobeError(f"cannot read the topic {topic!r} at {bootstrap}: {exc.args[0]}") from None
    finally:
        consumer.close()


def read_records(spark: SparkSession, files: list[InputFile],
                 topics: dict[tuple[str, str], dict[int, tuple[int, int]]] | None = None) -> DataFrame:
    """Records (`file`, `line`) of these files and of these topic offset ranges, as one DataFrame.

    JSON Lines are read line by line (any size); `*.json` files whole, then split (split_records);
    any other file is one record with no text, quarantined as unsupported, so the counts cover it.
    """
    parts: list[DataFrame] = []
    lines = [f.path for f in files if f.kind == "lines"]
    whole = [f.path for f in files if f.kind == "whole"]
    others = [Path(f.path).as_uri() if is_local(f.path) else f.path for f in files if f.kind == "other"]
    if lines:
        parts.append(spark.read.text(lines).select(F.input_file_name().alias("file"), F.col("value").alias("line"))
                     .where(F.trim(F.col("line")) != ""))
    if whole:
        parts.append(tf.split_records(spark.read.text(whole, wholetext=True)
                                      .select(F.input_file_name().alias("file"), "value")))
    if others:
        parts.append(spark.createDataFrame([(p, None) for p in others], "file string, line string"))
    for (bootstrap, topic), ranges in (topics or {}).items():
        if not ranges:
            continue
        start = json.dumps({topic: {str(p): r[0] for p, r in ranges.items()}})
        end = json.dumps({topic: {str(p): r[1] for p, r in ranges.items()}})
        messages = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                    # assign, not subscribe: only the partitions with news, each from where the last run stopped
                    .option("assign", json.dumps({topic: sorted(ranges)}))
                    .option("startingOffsets", start).option("endingOffsets", end)
                    .option("failOnDataLoss", "false").load())
        parts.append(messages.select(
            F.concat(F.lit(f"kafka://{bootstrap}/{topic}/"), F.col("partition").cast("string"), F.lit("@"),
                     F.col("offset").cast("string")).alias("file"),
            F.col("value").cast("string").alias("line")))
    if not parts:
        return spark.createDataFrame([], "file string, line string")
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def accounting_error(counts: dict[str, Any]) -> str | None:
    """Why the counts do not cover every input record, or None when they add up.

    `input_records` is counted on the records as read, before parsing; `reports` is what the
    dedupe kept (the sum of the per-day rollups), `duplicates` comes from counting distinct ids
    apart from the dedupe, and `quarantined` from the rejected rows. A record lost or doubled
    anywhere shows up here.
    """
    total = counts["reports"] + counts["duplicates"] + counts["quarantined"]
    if total == counts["input_records"]:
        return None
    return (f"record accounting does not add up: {counts['input_records']} records read, but {counts['reports']} "
            f"reports + {counts['duplicates']} duplicates + {counts['quarantined']} quarantined = {total} "
            "(were input files changing while the job read them?)")


class Progress:
    """One line per stage on a terminal (stderr), nothing otherwise: scheduled runs log only the summary."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.monotonic()

    def __call__(self, stage: str, detail: str) -> None:
        """Print `[elapsed] stage: detail` if on."""
        if self.enabled:
            sys.stderr.write(f"[{time.monotonic() - self.started:6.1f}s] {stage}: {detail}\n")
            sys.stderr.flush()


def state_dir(options: JobOptions) -> str:
    """Where the state lives: --state, else inside --out."""
    return options.state or st.default_dir(options.out)


def run(spark: SparkSession, options: JobOptions) -> dict[str, Any]:
    """The whole job; returns the counts and the worst gaps.

    The output checks run again here (not only in the entry points) because `run` is what
    replaces `options.out`: no caller can reach the swap without them. A failing Spark job is
    reported in one line and leaves the previous output and state as they were.
    """
    check_out(options.out, options.inputs, options.state)
    if options.state is None and is_local(options.out):
        st.recover(Path(options.out.removeprefix("file://")).resolve())
    root = state_dir(options)
    if not is_local(root):
        raise UsageError(f"bad --state {root!r}: the state needs a path on this machine's file system "
                         "(a shared mount on a cluster); give one with --state")
    state_root = Path(root.removeprefix("file://")).resolve()
    st.check(state_root, options.full)
    with st.locked(state_root), _spark_errors(options.out, state_root):
        return _run(spark, options, state_root, Progress(options.progress))


def _paths(root: Path, table: str, parts: list[tuple[int, str, str]]) -> list[str]:
    return [str(root / table / f"run={r}" / (f"kind={k}/d={d}" if k else f"d={d}")) for r, k, d in parts]


def _read(spark: SparkSession, root: Path, table: str, parts: list[tuple[int, str, str]],
          schema: T.StructType | None = None) -> DataFrame | None:
    """The partitions given of one state table (with `run`, `kind`, `d` from their paths), or None if none."""
    if not parts:
        return None
    df = spark.read.option("basePath", str(root / table)).parquet(*_paths(root, table, parts))
    return df.withColumn("run", F.col("run").cast("int"))


def _ingest(spark: SparkSession, options: JobOptions, root: Path, manifest: st.Manifest,
            progress: Progress) -> tuple[dict[str, Any], dict[str, int]]:
    """Read what is new, keep it as flat records, roll up the days it touched, commit; returns the counts."""
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    # A partitioned write sorts each task's rows by partition unless it may keep a writer open per
    # partition; a pass touches few days, so a few writers spare the sort of every record.
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", "32")
    run_no = manifest.run + 1
    listed = list_inputs(spark, options.inputs)
    seen = manifest.files
    new = [f for f in listed if f.path not in seen]
    changed = [f for f in listed if f.path in seen and seen[f.path] != [f.size, f.mtime]]
    topics = {(b, t): topic_ranges(b, t, manifest.topics.get(f"{b}/{t}", {})) for b, t in options.kafka}
    messages = sum(hi - lo for ranges in topics.values() for lo, hi in ranges.values())
    progress("reading", f"{len(new)} new and {len(changed)} changed files of {len(listed)}"
             + (f", {messages} new topic messages" if options.kafka else "")
             + (" (--full: everything again)" if options.full else ""))
    batch = {"input_records": 0, "quarantined": 0, "usable": 0, "observations": 0}
    days: set[str] = set()
    if new or changed or messages:
        raw = read_records(spark, new, topics)
        if changed:
            raw = raw.unionByName(_unread_part(spark, root, manifest, read_records(spark, changed)))
        seen_in = Observation("read")
        split = Observation("split")
        flat = tf.flat_records(tf.quarantine_reason(tf.parse(raw.observe(seen_in, F.count(F.lit(1)).alias("n")))))
        flat = flat.observe(split, F.count(F.when(F.col("kind") == "q", 1)).alias("q"),
                            F.count(F.when(F.col("rep"), 1)).alias("r"), F.count(F.when(F.col("o"), 1)).alias("o"))
        flat.write.partitionBy("kind", "d").parquet(str(root / "records" / f"run={run_no}"))
        counted = split.get
        batch = {"input_records": seen_in.get["n"], "quarantined": counted["q"], "usable": counted["r"],
                 "observations": counted["o"]}
        parts = st.written(root / "records" / f"run={run_no}")
        manifest.records += [[run_no, k, d] for k, d in parts]
        days = {d for k, d in parts if k == "r"}
        progress("observations", f"{batch['input_records']:,} records read: {batch['usable']:,} reports "
                 f"({batch['observations']:,} endpoint observations), {batch['quarantined']:,} quarantined; "
                 f"{len(days)} days to roll up")
        if batch["input_records"] != batch["usable"] + batch["quarantined"]:
            raise KprobeError(f"record accounting does not add up: {batch['input_records']} records read, but "
                              f"{batch['usable']} usable + {batch['quarantined']} quarantined")
        moved = _dedupe(spark, root, manifest, run_no, batch)
        if batch["quarantined"]:
            q = _read(spark, root, "records", [(run_no, "q", tf.QUARANTINE_DAY)])
            assert q is not None
            reasons = manifest.counts["quarantine_reasons"]
            for row in q.groupBy("reason").count().collect():
                reasons[row["reason"]] = reasons.get(row["reason"], 0) + row["count"]
        for key in ("input_records", "quarantined", "usable"):
            manifest.counts[key] += batch[key]
        touched = days | moved
        segments = _roll_up(spark, root, manifest, run_no, touched, moved) if touched else set()
        progress("rollups", f"{len(touched)} days rolled up"
                 + (f" ({len(segments)} from this run's reports alone)" if segments else "")
                 + f"; {len(manifest.rollups)} days in all")
    for f in [*new, *changed]:
        manifest.files[f.path] = [f.size, f.mtime]
    for (bootstrap, topic), ranges in topics.items():
        done = manifest.topics.setdefault(f"{bootstrap}/{topic}", {})
        done.update({str(p): hi for p, (_, hi) in ranges.items()})
    manifest.run = run_no
    every = _rollups(spark, root, manifest, None, None)
    reports = _sum(every, "cs", "reports")
    counts: dict[str, Any] = {
        "input_records": manifest.counts["input_records"],
        "quarantined": manifest.counts["quarantined"],
        "duplicates": manifest.counts["usable"] - manifest.counts["ids"],
        "reports": reports,
    }
    error = accounting_error(counts)
    if error:
        raise KprobeError(error)
    st.commit(root, manifest)  # the run counts from here on; the outputs below are rebuilt from the state
    return counts, batch


def _run(spark: SparkSession, options: JobOptions, root: Path, progress: Progress) -> dict[str, Any]:
    manifest = st.prepare(root, options.full)
    st.collect_garbage(root, manifest)
    run_no = manifest.run + 1
    try:
        counts, batch = _ingest(spark, options, root, manifest, progress)
    except BaseException:
        # Not committed: what this run wrote is nobody's; removed now rather than by the next run.
        for table in ("records", "rollups", "copies"):
            shutil.rmtree(root / table / f"run={run_no}", ignore_errors=True)
        raise
    st.collect_garbage(root, manifest)
    window = _rollups(spark, root, manifest, options.since, options.until)  # small; every output merges it
    outputs = {
        "endpoint_vantage": tf.endpoint_vantage(window),
        "cluster_summary": tf.cluster_summary(window),
        "findings": tf.findings_by_day(window),
        "advertised_changes": tf.advertised_changes(window),
        "hourly": tf.hourly(window),
    }
    q_parts = [(r, k, d) for r, k, d in manifest.records if k == "q"]
    quarantined = _read(spark, root, "records", q_parts)
    outputs["quarantine"] = (quarantined.select("file", "reason", "record") if quarantined is not None
                             else spark.createDataFrame([], "file string, reason string, record string"))
    counts["quarantine_reasons"] = dict(sorted(manifest.counts["quarantine_reasons"].items()))
    counts["new_records"] = batch["input_records"]
    try:
        minutes = _minutely(spark, root, manifest, options, window) if options.html else None
        worst = write(outputs, counts, options, progress, root, minutes)
    finally:
        window.unpersist()
    return {"counts": counts, "worst": worst}


def _unread_part(spark: SparkSession, root: Path, manifest: st.Manifest, records: DataFrame) -> DataFrame:
    """The records of changed files that no earlier run read (a JSON Lines file that grew: its new lines).

    A record is its file and its text: as many copies of a text as earlier runs read from that
    file are skipped, the rest are new. A file rewritten in place keeps its earlier records.
    """
    records = records.withColumn("h", F.xxhash64("line"))
    parts = [(r, k, d) for r, k, d in manifest.records if k in ("r", "q")]
    old = _read(spark, root, "records", parts)
    if old is None:
        return records.drop("h")
    old = old.where(F.col("file").isNotNull())  # a record's first row (the others do not repeat its file)
    files = records.select("file").distinct()
    done = (old.join(F.broadcast(files), "file", "semi").groupBy("file", "h").agg(F.count(F.lit(1)).alias("done")))
    nth = F.row_number().over(Window.partitionBy("file", "h").orderBy(F.lit(1)))
    return (records.withColumn("nth", nth).join(done, ["file", "h"], "left")
            .where(F.col("done").isNull() | (F.col("nth") > F.col("done"))).select("file", "line"))


def _dedupe(spark: SparkSession, root: Path, manifest: st.Manifest, run_no: int, batch: dict[str, int]) -> set[str]:
    """Count this run's distinct report ids, find those that came more than once, choose their kept copy.

    Returns the days whose rollups change because a kept copy moved. The distinct ids are
    counted here, apart from the dedupe itself (`tf.kept`), so that the accounting catches a
    dedupe that loses or doubles a report.
    """
    if not batch["usable"]:
        return set()
    mine = [(run_no, k, d) for r, k, d in manifest.records if r == run_no and k == "r"]
    older = [(r, k, d) for r, k, d in manifest.records if r != run_no and k == "r"]
    now = _read(spark, root, "records", mine)
    assert now is not None
    ids = now.where("rep").groupBy("rid", "report_id").agg(F.count(F.lit(1)).alias("n"))
    before = _read(spark, root, "records", older)
    if before is not None:
        mine_ids = ids.select("rid", "report_id")
        # An increment's ids are few: broadcast, so history is scanned once and never shuffled.
        probe = F.broadcast(mine_ids) if batch["usable"] < 2_000_000 else mine_ids
        known = (before.where("rep").select("rid", "report_id").join(probe, ["rid", "report_id"], "semi")
                 .distinct().withColumn("known", F.lit(1)))
        ids = ids.join(known, ["rid", "report_id"], "left")
    else:
        ids = ids.withColumn("known", F.lit(None).cast("int"))
    tally = ids.agg(F.count(F.lit(1)).alias("ids"), F.count("known").alias("known"),
                    F.count(F.when((F.col("n") > 1) | F.col("known").isNotNull(), 1)).alias("again")).first()
    assert tally is not None
    manifest.counts["ids"] += tally["ids"] - tally["known"]
    if not tally["again"]:
        return set()
    again = ids.where((F.col("n") > 1) | F.col("known").isNotNull()).select("rid", "report_id")
    every = _read(spark, root, "records", [*older, *mine])
    assert every is not None
    copies = every.where("rep").join(F.broadcast(again), ["rid", "report_id"], "semi")
    touched = {row["d"] for row in copies.select("d").distinct().collect()}
    chosen = tf.winners(copies)
    if manifest.copies is not None:
        previous = spark.read.parquet(str(root / "copies" / f"run={manifest.copies}"))
        chosen = previous.join(again, ["rid", "report_id"], "anti").unionByName(chosen)
    chosen.write.parquet(str(root / "copies" / f"run={run_no}"))
    manifest.copies = run_no
    return touched


def _copies(spark: SparkSession, root: Path, manifest: st.Manifest) -> DataFrame | None:
    return None if manifest.copies is None else spark.read.parquet(str(root / "copies" / f"run={manifest.copies}"))


def _kept(spark: SparkSession, root: Path, manifest: st.Manifest, days: set[str]) -> DataFrame | None:
    """The kept rows of usable reports on these days, read from every run that wrote some."""
    rows = _read(spark, root, "records", [(r, k, d) for r, k, d in manifest.records if k == "r" and d in days])
    return None if rows is None else tf.kept(rows, _copies(spark, root, manifest))


# The segments a day may have: the next run that touches a day with this many rolls the whole
# day up again, into one rollup (every output reads every segment, so their number stays small).
MAX_SEGMENTS = 8


def _roll_up(spark: SparkSession, root: Path, manifest: st.Manifest, run_no: int, days: set[str],
             moved: set[str]) -> set[str]:
    """Roll up the days this run touched; the manifest points at the rollups. Returns the days segmented.

    Why segments: a scheduled run adds the latest minutes of today, and re-rolling the whole day
    for them cost most of a rerun. A day that already has rollups gets a segment of this run's
    reports alone when they all come after the reports rolled up before them (per cluster and
    vantage), since segments then meet as consecutive days do (see `tf.endpoint_vantage`). The
    day is rolled up whole again when a report came late (it falls among those rolled up), when
    a kept copy moved (`moved`, from `_dedupe`), or when it has MAX_SEGMENTS segments already.
    """
    candidates = {d for d in days - moved if 0 < len(manifest.rollups.get(d, [])) < MAX_SEGMENTS}
    mine = _read(spark, root, "records", [(run_no, "r", d) for d in sorted(candidates)])
    segmented = candidates - _interleaved(spark, root, manifest, mine, candidates) if mine is not None else set()
    whole = days - segmented
    parts = []
    if segmented:
        assert mine is not None
        parts.append(tf.kept(mine.where(F.col("d").isin(*sorted(segmented))), _copies(spark, root, manifest)))
    rows = _kept(spark, root, manifest, whole) if whole else None
    if rows is not None:
        parts.append(rows)
    target = root / "rollups" / f"run={run_no}"
    if parts:
        every = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        # Small after aggregation: one file per day, not one per shuffle partition and rollup kind,
        # which every later run would open.
        tf.day_rollups(every).coalesce(1).write.partitionBy("d").parquet(str(target))
    done = {d for _, d in st.written(target)} if target.exists() else set()
    for day in days:
        if day in done:
            manifest.rollups[day] = [*manifest.rollups[day], run_no] if day in segmented else [run_no]
        else:  # every report of it was a copy of one kept on another day
            manifest.rollups.pop(day, None)
    return segmented


def _interleaved(spark: SparkSession, root: Path, manifest: st.Manifest, mine: DataFrame, days: set[str]) -> set[str]:
    """The days on which some report of this run (`mine`) is not later than every report rolled up before it.

    Per cluster and vantage, the only order the merge relies on; strictly later, because two
    segments that share a time could not be ordered the way the whole day orders them.
    """
    before = _read(spark, root, "rollups", [(r, "", d) for d in sorted(days) for r in manifest.rollups[d]])
    assert before is not None
    pair = ["cluster_id", "vantage", "d"]
    first = mine.where("rep").groupBy(*pair).agg(F.min("ts").alias("first"))
    last = before.where(F.col("t") == "cs").groupBy(*pair).agg(F.max("last_ts").alias("last"))
    late = first.join(last, pair).where(F.col("first") <= F.col("last")).select("d").distinct()
    return {row["d"] for row in late.collect()}


def _bounds(since: str | None, until: str | None) -> tuple[dt.datetime | None, dt.datetime | None]:
    def at(value: str | None) -> dt.datetime | None:
        if value is None:
            return None
        t = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
    return at(since), at(until)


def _rollups(spark: SparkSession, root: Path, manifest: st.Manifest, since: str | None,
             until: str | None) -> DataFrame:
    """The current rollups of the days in [since, until): stored for whole days, made now for the edge days.

    With rollups made now, the whole is cached: every output reads them, and they come from
    records. Stored rollups alone are not: each output reads its few columns from their Parquet
    faster than Spark fills a cache of all of them (the five merged outputs at 4M observations:
    4.7 to 5.6 s, against 7.2 to 7.7 s with the cache; docs/performance.md).
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
    stored = _read(spark, root, "rollups", whole)
    if edges:
        rows = _kept(spark, root, manifest, edges)
        assert rows is not None
        made = tf.day_rollups(tf.within(rows, since, until))
        stored = made if stored is None else stored.drop("run").unionByName(made, allowMissingColumns=True)
        return stored.cache()
    if stored is None:
        return tf.day_rollups(spark.createDataFrame([], tf.FLAT))
    return stored


# Data spanning at most this much (from the first hour to the last in `hourly`) get a per-minute
# timeline on the page: an incident of an hour is then minutes, not one point.
MINUTELY_SPAN = dt.timedelta(hours=1)


def _minutely(spark: SparkSession, root: Path, manifest: st.Manifest, options: JobOptions,
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
    rows = _kept(spark, root, manifest, set(span["days"]))
    return None if rows is None else tf.minutely(tf.within(rows, options.since, options.until))


def _sum(rollups: DataFrame, kind: str, column: str) -> int:
    row = rollups.where(F.col("t") == kind).agg(F.sum(column).alias("n")).first()
    return int(row["n"] or 0) if row is not None else 0


def worst_gaps(endpoint_vantage: DataFrame, limit: int = 10) -> list[dict[str, Any]]:
    """The rows with the lowest success rate, for the terminal and the page."""
    return [row.asDict() for row in endpoint_vantage.orderBy(
        "success_rate", "cluster_id", "vantage", "node_id", "host", "port").limit(limit).collect()]


@contextmanager
def _spark_errors(out: str, state: Path | None = None) -> Iterator[None]:
    """Spark's failures (a Java stack trace) as one line that names the cause, and the log with the rest.

    A file of the state that Spark cannot read (truncated, deleted by hand) is a damaged state:
    one line and exit 2, like a damaged manifest, never a partial result.
    """
    try:
        yield
    except PySparkException as exc:
        condition = exc.getCondition() or ""
        text = _first_line(str(exc))
        if condition.startswith("PATH_NOT_FOUND") and not (state and str(state) in str(exc)):
            raise UsageError(f"cannot read the input: {text}; give report files or directories") from None
        if state and str(state) in str(exc):
            raise UsageError(f"the state in {state} is unreadable ({text}): run with --full to rebuild it from "
                             f"the inputs{_log_hint()}") from None
        raise KprobeError(f"the Spark job failed: {text}; the previous output in {out} is unchanged"
                          f"{_log_hint()}") from None
    except Py4JError as exc:
        cause = _java_cause(exc)
        if state and str(state) in str(exc):
            raise UsageError(f"the state in {state} is unreadable ({cause}): run with --full to rebuild it from "
                             f"the inputs{_log_hint()}") from None
        raise KprobeError(f"the Spark job failed: {cause}; the previous output in {out} is unchanged"
                          f"{_log_hint()}") from None


def write(outputs: dict[str, DataFrame], counts: dict[str, Any], options: JobOptions,
          progress: Progress, state: Path, minutely: DataFrame | None = None) -> list[dict[str, Any]]:
    """Parquet and JSON through Spark's commit protocol, into a staging directory swapped in whole.

    Each table is computed once, into Parquet; the JSON copy, the worst gaps and the page read
    that small result back instead of computing it again. Returns the worst gaps. `minutely`
    (see `_minutely`) only makes the page's timelines finer; it is not an output.

    On a local path the previous result is replaced only once the new one is complete (a failed
    write removes the staging directory and leaves the previous result alone); on other file
    systems (s3a, hdfs) Spark's overwrite of each output is used and a reader may see the gap.
    The state, when it lives in --out (the default), moves into the new output just before the
    swap (`state.recover` finishes a swap a kill interrupted).
    """
    final = Path(options.out.removeprefix("file://")).resolve() if is_local(options.out) else None
    staging = str(final.parent / f".{final.name}.staging-{uuid.uuid4().hex[:8]}") if final else options.out
    spark = next(iter(outputs.values())).sparkSession
    try:
        written: dict[str, DataFrame] = {}
        totals: dict[str, int] = {}
        for name, df in outputs.items():
            df.write.mode("overwrite").parquet(f"{staging}/parquet/{name}")
            written[name] = spark.read.parquet(f"{staging}/parquet/{name}")
            if name == "quarantine" or final is None:  # any size, or not on this machine: Spark writes it
                written[name].coalesce(1).write.mode("overwrite").json(f"{staging}/json/{name}")
                if progress.enabled:
                    progress(name, f"{written[name].count():,} rows")
                continue
            # The merged outputs are small (rows per endpoint and vantage, per day, per hour): their
            # JSON is Spark's own (to_json, as its writer makes it), written here in one file: a
            # Spark job fewer per output.
            lines = [row[0] for row in written[name].select(F.to_json(F.struct("*"))).collect()]
            _write_json(Path(staging, "json", name), lines)
            if name == "endpoint_vantage":
                rows = [json.loads(line) for line in lines]
                totals[name] = sum(r["probes"] for r in rows)
                worst = _worst(rows)
            if name == "cluster_summary":
                totals[name] = sum(json.loads(line)["reports"] for line in lines)
            progress(name, f"{len(lines):,} rows")
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
