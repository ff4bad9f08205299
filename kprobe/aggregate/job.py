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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kprobe.aggregate import transforms as tf
from kprobe.errors import KprobeError

OUTPUTS = ("endpoint_vantage", "cluster_summary", "findings", "advertised_changes")


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
    builder = (builder.config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", os.environ.get("KPROBE_SPARK_DRIVER_MEMORY", "2g"))
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", os.environ.get("KPROBE_SHUFFLE_PARTITIONS", "8")))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_records(spark: SparkSession, inputs: tuple[str, ...],
                 kafka: tuple[tuple[str, str], ...] = ()) -> DataFrame:
    """Every input file as whole text, split into records (`file`, `line`), plus topic messages.

    A topic is read whole (earliest to latest offsets) as a batch: each message is one report,
    as `kprobe probe --publish` produces them.
    """
    parts: list[DataFrame] = []
    if inputs:
        reader = spark.read.option("recursiveFileLookup", "true")
        # .jsonl: JSON Lines, read line by line (files of any size); .json: one report per file
        # (what --out writes), or JSON Lines, told apart by split_records.
        lines = (reader.option("pathGlobFilter", "*.jsonl").text(list(inputs))
                 .select(F.input_file_name().alias("file"), F.col("value").alias("line"))
                 .where(F.trim(F.col("line")) != ""))
        files = (reader.option("pathGlobFilter", "*.json").text(list(inputs), wholetext=True)
                 .select(F.input_file_name().alias("file"), "value"))
        parts += [lines, tf.split_records(files)]
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


def run(spark: SparkSession, options: JobOptions) -> dict[str, Any]:
    """The whole job; returns the counts and the worst gaps."""
    raw = read_records(spark, options.inputs, options.kafka)
    records = tf.quarantine_reason(tf.parse(raw))
    # Parsed once, in one pass: each record's reason, and the slim report when it is usable; what
    # later steps re-read is this cache of flat columns, never the nested report structs.
    staged = tf.slim(records.withColumn("record", F.when(F.col("reason").isNotNull(), F.substring("line", 1, 10_000))),
                     keep=("file", "reason", "record")).cache()
    slim_all = staged.where(F.col("reason").isNull()).drop("file", "reason", "record")
    quarantined = staged.where(F.col("reason").isNotNull()).select("file", "reason", "record")
    all_reports = tf.dedupe(slim_all)
    reps = tf.within(all_reports, options.since, options.until).cache()
    obs = tf.observations(reps).cache()
    outputs = {
        "endpoint_vantage": tf.endpoint_vantage(obs),
        "cluster_summary": tf.cluster_summary(reps),
        "findings": tf.findings_by_day(reps),
        "advertised_changes": tf.advertised_changes(reps),
    }
    usable = slim_all.count()
    bad = quarantined.count()
    unique = all_reports.count()
    counts: dict[str, Any] = {
        "input_records": raw.count(),  # counted apart from the split below, so the check means something
        "quarantined": bad,
        "duplicates": usable - unique,
        "reports": unique,
        "reports_in_window": reps.count(),
        "observations": obs.count(),
    }
    if counts["reports"] + counts["duplicates"] + counts["quarantined"] != counts["input_records"]:
        raise KprobeError(f"record accounting does not add up: {counts}")
    counts["quarantine_reasons"] = {r["reason"]: r["n"] for r in
                                    quarantined.groupBy("reason").agg(F.count(F.lit(1)).alias("n")).collect()}
    worst = [row.asDict() for row in outputs["endpoint_vantage"].orderBy("success_rate", "cluster_id", "vantage",
                                                                          "node_id").limit(10).collect()]
    write(outputs, quarantined, counts, worst, options, obs)
    for cached in (staged, reps, obs):
        cached.unpersist()
    return {"counts": counts, "worst": worst}


def write(outputs: dict[str, DataFrame], quarantined: DataFrame, counts: dict[str, Any],
          worst: list[dict[str, Any]], options: JobOptions, observations: DataFrame | None = None) -> None:
    """Parquet and JSON through Spark's commit protocol, into a staging directory swapped in whole.

    On a local path the previous result is replaced only once the new one is complete; on
    other file systems (s3a, hdfs) Spark's overwrite is used and a reader may see the gap.
    """
    local = "://" not in options.out or options.out.startswith("file://")
    final = Path(options.out.removeprefix("file://")) if local else None
    staging = str(final.parent / f".{final.name}.staging-{uuid.uuid4().hex[:8]}") if final else options.out
    spark = quarantined.sparkSession
    for name, df in {**outputs, "quarantine": quarantined}.items():
        df.write.mode("overwrite").parquet(f"{staging}/parquet/{name}")
        # The JSON copy reads the small Parquet result back instead of recomputing it.
        spark.read.parquet(f"{staging}/parquet/{name}").coalesce(1).write.mode("overwrite").json(
            f"{staging}/json/{name}")
    if final is None:
        return
    Path(staging, "counts.json").write_text(json.dumps(counts, indent=2) + "\n")
    if options.html:
        from kprobe.aggregate.html import render_html

        Path(staging, "report.html").write_text(render_html(outputs, counts, worst, observations))
    old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
    if final.exists():
        final.rename(old)
    os.rename(staging, final)
    shutil.rmtree(old, ignore_errors=True)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """What the terminal shows: the counts, then the worst gaps first."""
    c = result["counts"]
    lines = [f"{c['input_records']} records: {c['reports']} reports aggregated ({c['reports_in_window']} in the "
             f"window, {c['observations']} endpoint observations), {c['duplicates']} duplicates, "
             f"{c['quarantined']} quarantined"]
    for reason, n in sorted(c.get("quarantine_reasons", {}).items()):
        lines.append(f"  quarantined {n}: {reason}")
    gaps = [w for w in result["worst"] if w["success_rate"] < 1]
    lines.append("worst gaps:" if gaps else "no gaps: every endpoint reachable from every vantage")
    for w in gaps:
        lines.append(f"  {w['success_rate']:6.1%}  cluster {w['cluster_id']} broker {w['node_id']} "
                     f"{w['host']}:{w['port']} from {w['vantage']} ({w['probes']} probes, last {w['last_status']})")
    return lines
