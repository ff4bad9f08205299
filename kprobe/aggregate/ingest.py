"""The incremental state's side of the job: read what is new, keep it as flat records, roll up its days.

A run reads only the files and topic messages no earlier run read (kprobe.aggregate.state
keeps what they were), writes them as flat records under its own `run=N` directories, finds
the report ids that came more than once (`_dedupe`), rolls up the days it touched, in segments
when it can (`_roll_up`; beside the ids for a small increment: `_ids_and_rollups`), and commits
the manifest: from then on the run counts.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kprobe.aggregate import local
from kprobe.aggregate import state as st
from kprobe.aggregate.checks import is_local
from kprobe.aggregate.dedupe import only_kept_copies, winners
from kprobe.aggregate.flatten import QUARANTINE_DAY, clustered, flat_records
from kprobe.aggregate.parse import parse, quarantine_reason, split_records
from kprobe.aggregate.plan import InputFile, JobOptions, News, Progress, hidden, list_local, news
from kprobe.aggregate.rollups import day_rollups
from kprobe.errors import KprobeError


def list_inputs(spark: SparkSession, inputs: tuple[str, ...]) -> list[InputFile]:
    """Every file under the inputs (recursively), with its size and modification time.

    Local paths are walked by Python (`plan.list_local`); others (s3a, hdfs) through Hadoop's
    FileSystem, which also expands globs.
    """
    found: dict[str, InputFile] = {}
    for item in inputs:
        if is_local(item):
            found.update((f.path, f) for f in list_local(item))
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
                if not any(hidden(part) for part in path[len(base):].split("/") if part):
                    found[path] = InputFile(path, entry.getLen(), entry.getModificationTime() * 1_000_000)
    return [found[p] for p in sorted(found)]


# A record as read: its file (or topic partition and offset) and its text (none for an unsupported file).
RAW = T.StructType([T.StructField("file", T.StringType()), T.StructField("line", T.StringType())])


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
        parts.append(split_records(spark.read.text(whole, wholetext=True)
                                      .select(F.input_file_name().alias("file"), "value")))
    if others:
        parts.append(local.rows(spark, [(p, None) for p in others], RAW))
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
        return local.rows(spark, [], RAW)
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def _paths(root: Path, table: str, parts: list[tuple[int, str, str]]) -> list[str]:
    return [str(root / table / f"run={r}" / (f"kind={k}/d={d}" if k else f"d={d}")) for r, k, d in parts]


# A state table's schema as this process first read it (its files' columns, then the partition columns
# from the paths: `run`, `kind`, `d`, strings). Every run of one kprobe writes a table alike (a state of
# another FORMAT is refused before Spark starts), so later reads give it instead of inferring it again:
# Spark infers a Parquet schema with a job of its own (a task reading a footer), a dozen a run.
_SCHEMAS: dict[str, T.StructType] = {}


def _read(spark: SparkSession, table: str, *paths: str, base: str | None = None) -> DataFrame:
    """Parquet of a state table, its schema inferred once per process (see _SCHEMAS)."""
    reader = spark.read if base is None else spark.read.option("basePath", base)
    known = _SCHEMAS.get(table)
    df = (reader.schema(known) if known is not None else reader).parquet(*paths)
    _SCHEMAS.setdefault(table, df.schema)
    return df


# Parquet of the state under this many bytes is rolled up (or merged into the outputs) in one task:
# a small increment's segment or a few days of rollups. Spread over the shuffle partitions, each of the
# nine aggregations of `rollups.day_rollups` is a stage of its own (many Spark jobs for a segment, each a
# fixed cost in a new JVM); in one partition every grouping is already in place and none needs a shuffle,
# and the rollups need none of their broadcast lookups either (`one_task` there: a few jobs). Past a few MB
# the cores do more than that costs, and spread is faster.
ONE_TASK_BELOW = 8 << 20


def parquet_bytes(root: Path, table: str, parts: list[tuple[int, str, str]]) -> int:
    """The size on disk of these partitions of a state table (known before Spark reads them).

    A partition that cannot be listed counts nothing here: Spark's read of it says what is wrong.
    """
    total = 0
    for path in _paths(root, table, parts):
        try:
            with os.scandir(path) as found:
                total += sum(f.stat().st_size for f in found if f.is_file() and f.name.endswith(".parquet"))
        except OSError:
            continue
    return total


def small(df: DataFrame, size: int) -> DataFrame:
    """The DataFrame in one partition when its Parquet is under ONE_TASK_BELOW (see there), else as it is."""
    return df.coalesce(1) if size < ONE_TASK_BELOW else df


def read_parts(spark: SparkSession, root: Path, table: str, parts: list[tuple[int, str, str]]) -> DataFrame | None:
    """The partitions given of one state table (with `run`, `kind`, `d` from their paths), or None if none."""
    if not parts:
        return None
    df = _read(spark, table, *_paths(root, table, parts), base=str(root / table))
    return df.withColumn("run", F.col("run").cast("int"))


# How the state's records are written. A column of values that rarely repeat (hashes, times, a record's
# own text) gets no dictionary: Parquet would build one for each file until it outgrew a page, then
# write the values plainly anyway. And no column statistics: nothing filters the records by a value's
# range (their days are directories, and hashes span every range), so nothing would read them: writing
# the state is faster without both, the files no larger, the rollups read as fast.
PLAIN_COLUMNS = ("seq", "h", "rid", "ts", "report_id", "record")
RECORDS_WRITE = {**{f"parquet.enable.dictionary#{c}": "false" for c in PLAIN_COLUMNS},
                 "parquet.column.statistics.enabled": "false", "parquet.size.statistics.enabled": "false"}


def ingest(spark: SparkSession, options: JobOptions, root: Path, manifest: st.Manifest,
           progress: Progress) -> dict[str, int]:
    """Read what is new, keep it as flat records, roll up the days it touched; returns this batch's counts.

    The manifest is updated, not committed: the caller checks the accounting, then commits.
    """
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    # A partitioned write sorts each task's rows by partition unless it may keep a writer open per
    # partition; a pass touches few days, so a few writers spare the sort of every record.
    spark.conf.set("spark.sql.maxConcurrentOutputFileWriters", "32")
    run_no = manifest.run + 1
    found: News = news(list_inputs(spark, options.inputs), manifest, options.kafka)
    listed, new, changed, topics, messages = found.listed, found.new, found.changed, found.topics, found.messages
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
        flat = flat_records(quarantine_reason(parse(raw.observe(seen_in, F.count(F.lit(1)).alias("n")))))
        flat = flat.observe(split, F.count(F.when(F.col("kind") == "q", 1)).alias("q"),
                            F.count(F.when(F.col("rep"), 1)).alias("r"), F.count(F.when(F.col("o"), 1)).alias("o"))
        (clustered(flat).write.options(**RECORDS_WRITE).partitionBy("kind", "d")
         .parquet(str(root / "records" / f"run={run_no}")))
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
        moved, segments = _ids_and_rollups(spark, root, manifest, run_no, batch, days)
        if batch["quarantined"]:
            q = read_parts(spark, root, "records", [(run_no, "q", QUARANTINE_DAY)])
            assert q is not None
            reasons = manifest.counts["quarantine_reasons"]
            for row in q.groupBy("reason").count().collect():
                reasons[row["reason"]] = reasons.get(row["reason"], 0) + row["count"]
        for key in ("input_records", "quarantined", "usable"):
            manifest.counts[key] += batch[key]
        touched = days | moved
        progress("rollups", f"{len(touched)} days rolled up"
                 + (f" ({len(segments)} from this run's reports alone)" if segments else "")
                 + f"; {len(manifest.rollups)} days in all")
    for f in [*new, *changed]:
        manifest.files[f.path] = [f.size, f.mtime]
    for (bootstrap, topic), ranges in topics.items():
        done = manifest.topics.setdefault(f"{bootstrap}/{topic}", {})
        done.update({str(p): hi for p, (_, hi) in ranges.items()})
    manifest.run = run_no
    return batch


def _unread_part(spark: SparkSession, root: Path, manifest: st.Manifest, records: DataFrame) -> DataFrame:
    """The records of changed files that no earlier run read (a JSON Lines file that grew: its new lines).

    A record is its file and its text: as many copies of a text as earlier runs read from that
    file are skipped, the rest are new. A file rewritten in place keeps its earlier records.
    """
    records = records.withColumn("h", F.xxhash64("line"))
    parts = [(r, k, d) for r, k, d in manifest.records if k in ("r", "q")]
    old = read_parts(spark, root, "records", parts)
    if old is None:
        return records.drop("h")
    old = old.where(F.col("file").isNotNull())  # a record's first row (the others do not repeat its file)
    files = records.select("file").distinct()
    done = (old.join(F.broadcast(files), "file", "semi").groupBy("file", "h").agg(F.count(F.lit(1)).alias("done")))
    nth = F.row_number().over(Window.partitionBy("file", "h").orderBy(F.lit(1)))
    return (records.withColumn("nth", nth).join(done, ["file", "h"], "left")
            .where(F.col("done").isNull() | (F.col("nth") > F.col("done"))).select("file", "line"))


def _ids_and_rollups(spark: SparkSession, root: Path, manifest: st.Manifest, run_no: int, batch: dict[str, int],
                     days: set[str]) -> tuple[set[str], set[str]]:
    """The ids (`_dedupe`), then the rollups of the days touched (`_roll_up`); returns the days each gives.

    A small increment's two run at once, each in a thread of its own. Why: each is a few Spark jobs of one
    task in a new driver, planned and compiled in turn, and a small machine's cores would idle through
    them one after the other; the rollup depends on the ids only when a
    report came more than once (a kept copy may then move, and the rollup keeps one copy of each report),
    which the reports a scheduled run finds rarely do. So the rollup of the days this run's reports fall on
    is made beside the ids, with the copies as they were; when the ids find a report that came again (the
    copies change), that rollup is dropped and made again with their answer. A large increment runs them
    in turn: its jobs keep every core busy, and a rollup made again would cost more than it could save.
    """
    mine = [(run_no, "r", d) for d in sorted(days)]
    if not days or parquet_bytes(root, "records", mine) >= ONE_TASK_BELOW:
        moved = _dedupe(spark, root, manifest, run_no, batch)
        touched = days | moved
        return moved, _roll_up(spark, root, manifest, run_no, touched, moved) if touched else set()
    rollups, copies = {day: list(runs) for day, runs in manifest.rollups.items()}, manifest.copies
    # _roll_up reads which copies are kept while _dedupe may change them: it is made again whenever they change.
    with ThreadPoolExecutor(2, thread_name_prefix="kprobe-ingest") as pool:
        ids = pool.submit(_dedupe, spark, root, manifest, run_no, batch)
        rolled = pool.submit(_roll_up, spark, root, manifest, run_no, days, set())
        try:
            moved, segments = ids.result(), rolled.result()
        except BaseException:
            spark.sparkContext.cancelAllJobs()  # the other thread's job; leaving `with` waits for that thread
            raise
    if manifest.copies == copies and not moved:
        return moved, segments
    shutil.rmtree(root / "rollups" / f"run={run_no}", ignore_errors=True)
    manifest.rollups = rollups
    return moved, _roll_up(spark, root, manifest, run_no, days | moved, moved)


def _dedupe(spark: SparkSession, root: Path, manifest: st.Manifest, run_no: int, batch: dict[str, int]) -> set[str]:
    """Count this run's distinct report ids, find those that came more than once, choose their kept copy.

    Returns the days whose rollups change because a kept copy moved away from them. The distinct ids are
    counted here, apart from the dedupe itself (`dedupe.only_kept_copies`), so that the accounting catches a
    dedupe that loses or doubles a report.
    """
    if not batch["usable"]:
        return set()
    mine = [(run_no, k, d) for r, k, d in manifest.records if r == run_no and k == "r"]
    older = [(r, k, d) for r, k, d in manifest.records if r != run_no and k == "r"]
    now = read_parts(spark, root, "records", mine)
    assert now is not None
    mine_ids = now.where("rep").select("rid", "report_id")
    both = mine_ids.withColumn("old", F.lit(False))
    before = read_parts(spark, root, "records", older)
    if before is not None:
        # An increment's ids are few: broadcast, so history is scanned once and never shuffled; history's
        # rows of this run's ids join them in one aggregation (no distinct, and no join of its result).
        probe = F.broadcast(mine_ids) if batch["usable"] < 2_000_000 else mine_ids
        both = both.unionByName(before.where("rep").select("rid", "report_id").join(probe, ["rid", "report_id"], "semi")
                                .withColumn("old", F.lit(True)))
    ids = both.groupBy("rid", "report_id").agg(F.count(F.when(~F.col("old"), 1)).alias("n"),
                                               F.max("old").alias("known"))
    repeated = (F.col("n") > 1) | F.col("known")
    tally = ids.agg(F.count(F.lit(1)).alias("ids"), F.count(F.when(F.col("known"), 1)).alias("known"),
                    F.count(F.when(repeated, 1)).alias("again")).first()
    assert tally is not None
    manifest.counts["ids"] += tally["ids"] - tally["known"]
    if not tally["again"]:
        return set()
    again = ids.where(repeated).select("rid", "report_id")
    every = read_parts(spark, root, "records", [*older, *mine])
    assert every is not None
    # Every copy of the ids that came again (few rows; the columns dedupe.winners reads), read from history once for
    # the two uses below.
    copies = (every.where("rep").join(F.broadcast(again), ["rid", "report_id"], "semi")
              .select("rid", "report_id", "ts", "h", "run", "seq", "d").cache())
    try:
        chosen = winners(copies)
        # The kept copy is the earliest (dedupe.winners), so it moves only to a copy this run read, and only the
        # day it moves away from had it rolled up: a copy that comes after the kept one (a spool re-delivering
        # what was already read) changes no rollup, and its day keeps its segments.
        before = winners(copies.where(F.col("run") != run_no)).select(
            "rid", "report_id", *[F.col(c).alias(f"was_{c}") for c in ("run", "seq", "d")])
        lost = before.join(chosen, ["rid", "report_id"]).where(
            (F.col("was_run") != F.col("run")) | (F.col("was_seq") != F.col("seq")))
        touched = {row["was_d"] for row in lost.select("was_d").distinct().collect()}
        if manifest.copies is not None:
            previous = _read(spark, "copies", str(root / "copies" / f"run={manifest.copies}"))
            chosen = previous.join(again, ["rid", "report_id"], "anti").unionByName(chosen)
        chosen.write.parquet(str(root / "copies" / f"run={run_no}"))
    finally:
        copies.unpersist()
    manifest.copies = run_no
    return touched


def _copies(spark: SparkSession, root: Path, manifest: st.Manifest) -> DataFrame | None:
    return None if manifest.copies is None else _read(spark, "copies", str(root / "copies" / f"run={manifest.copies}"))


def read_kept(spark: SparkSession, root: Path, manifest: st.Manifest, days: set[str]) -> DataFrame | None:
    """The kept rows of usable reports on these days, read from every run that wrote some."""
    rows = read_parts(spark, root, "records", [(r, k, d) for r, k, d in manifest.records if k == "r" and d in days])
    return None if rows is None else only_kept_copies(rows, _copies(spark, root, manifest))


# The segments a day may have: the next run that touches a day with this many rolls the whole
# day up again, into one rollup (every output reads every segment, so their number stays small).
MAX_SEGMENTS = 8


def _roll_up(spark: SparkSession, root: Path, manifest: st.Manifest, run_no: int, days: set[str],
             moved: set[str]) -> set[str]:
    """Roll up the days this run touched; the manifest points at the rollups. Returns the days segmented.

    Why segments: a scheduled run adds the latest minutes of today, and re-rolling the whole day
    for them cost most of a rerun. A day that already has rollups gets a segment of this run's
    reports alone when they all come after the reports rolled up before them (per cluster and
    vantage), since segments then meet as consecutive days do (see `merge.endpoint_vantage`). The
    day is rolled up whole again when a report came late (it falls among those rolled up), when
    a kept copy moved (`moved`, from `_dedupe`), or when it has MAX_SEGMENTS segments already.
    """
    candidates = {d for d in days - moved if 0 < len(manifest.rollups.get(d, [])) < MAX_SEGMENTS}
    mine = read_parts(spark, root, "records", [(run_no, "r", d) for d in sorted(candidates)])
    segmented: set[str] = set()
    if mine is not None:
        copies = _copies(spark, root, manifest)  # read once: the order check's and the segment's
        segmented = candidates - _interleaved(spark, root, manifest, mine, copies, candidates)
    whole = days - segmented
    parts = []
    if segmented:
        assert mine is not None
        parts.append(only_kept_copies(mine.where(F.col("d").isin(*sorted(segmented))), copies))
    rows = read_kept(spark, root, manifest, whole) if whole else None
    if rows is not None:
        parts.append(rows)
    target = root / "rollups" / f"run={run_no}"
    if parts:
        every = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        read = [(r, k, d) for r, k, d in manifest.records
                if k == "r" and (d in whole or (r == run_no and d in segmented))]
        size = parquet_bytes(root, "records", read)
        every = small(every, size)
        # Small after aggregation: one file per day, not one per shuffle partition and rollup kind,
        # which every later run would open. Gathered by a shuffle of the rollups on the day, not by
        # coalescing: coalesce(1) would run each rollup's last stage (the ordering of a day's
        # observations among them) in that one task too; and by day, not into one partition, so
        # that the days of a first run are written on every core (each day in one task: one file).
        held: list[DataFrame] = []
        try:
            (day_rollups(every, one_task=size < ONE_TASK_BELOW, held=held)
             .repartition("d").write.partitionBy("d").parquet(str(target)))
        finally:
            for df in held:
                df.unpersist()
    done = {d for _, d in st.written(target)} if target.exists() else set()
    for day in days:
        if day in done:
            manifest.rollups[day] = [*manifest.rollups[day], run_no] if day in segmented else [run_no]
        elif day not in segmented:  # every report of it was a copy of one kept on another day
            manifest.rollups.pop(day, None)
        # else this run kept none of its reports of the day (each a copy of one rolled up before): its rollups stand
    return segmented


def _interleaved(spark: SparkSession, root: Path, manifest: st.Manifest, mine: DataFrame, copies: DataFrame | None,
                 days: set[str]) -> set[str]:
    """The days on which some report of this run (`mine`) is not later than every report rolled up before it.

    Per cluster and vantage, the only order the merge relies on; strictly later, because two
    segments that share a time could not be ordered the way the whole day orders them.
    """
    before = read_parts(spark, root, "rollups", [(r, "", d) for d in sorted(days) for r in manifest.rollups[d]])
    assert before is not None
    pair = ["cluster_id", "vantage", "d"]
    # One aggregation of both sides (no join of two): a pair with no report rolled up before has no `last`.
    # Only the kept copies count: a re-delivered copy of a report already rolled up is not this run's to add.
    reported = only_kept_copies(mine, copies).where("rep").select(
        *pair, F.col("ts").alias("first"), F.lit(None).cast("timestamp").alias("last"))
    rolled = before.where(F.col("t") == "cs").select(*pair, F.lit(None).cast("timestamp").alias("first"),
                                                     F.col("last_ts").alias("last"))
    ends = reported.unionByName(rolled).groupBy(*pair).agg(F.min("first").alias("first"), F.max("last").alias("last"))
    return {row["d"] for row in ends.where(F.col("first") <= F.col("last")).select("d").collect()}


