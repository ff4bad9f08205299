"""Input files -> records -> parsed reports, each with why it is quarantined (or null: a usable report).

No I/O and no SparkSession here: DataFrame -> DataFrame functions, which the job (kprobe.aggregate.ingest)
applies to what it read, before `flatten.flat_records` turns each record into the rows the state keeps.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kprobe.aggregate.schema import CORRUPT, SUPPORTED, read_schema

UNSUPPORTED_FILE = "unsupported file type (kprobe reads *.json, *.jsonl, *.ndjson, optionally gzipped)"


def split_records(files: DataFrame) -> DataFrame:
    """Whole files (`file`, `value`) -> one row per record (`file`, `line`).

    A file is JSON Lines when every line starts a document (what `watch --json` and topics
    give); otherwise it is one document, pretty-printed (what `--out` writes). A truncated
    pretty file so stays one record, quarantined once, not one per line.
    """
    jsonl = ~F.col("value").rlike("\n[ \t}\\]\"]")
    parts = F.when(jsonl, F.split(F.col("value"), "\r?\n")).otherwise(F.array(F.col("value")))
    return (files.select("file", F.explode(parts).alias("line"))
            .where(F.trim(F.col("line")) != ""))


def parse(records: DataFrame) -> DataFrame:
    """Add `r`, the parsed report (all fields null, `_corrupt_record` set, for non-JSON).

    Only the fields the outputs read are materialized (schema.READ); the parser still reads
    every character, so a record broken anywhere is still malformed JSON.
    """
    return records.withColumn("r", F.from_json("line", read_schema(), {"columnNameOfCorruptRecord": CORRUPT}))


def quarantine_reason(parsed: DataFrame) -> DataFrame:
    """Add `reason`: null for a usable report, else why it is quarantined."""
    r = F.col("r")
    reason = (
        F.when(F.col("line").isNull(), F.lit(UNSUPPORTED_FILE))
        .when(r.isNull() | r[CORRUPT].isNotNull(), F.lit("malformed JSON (truncated or not JSON)"))
        .when(r["schema"].isNull(), F.lit("not a kprobe report (no schema field)"))
        .when(~r["schema"].isin(*SUPPORTED), F.concat(F.lit("unknown schema version "), r["schema"]))
        .when(r["id"].isNull() | r["started_at"].isNull(), F.lit("missing id or started_at"))
        .when(F.to_timestamp(r["started_at"]).isNull(), F.lit("started_at is not a timestamp"))
        .when(r["vantage"]["name"].isNull(), F.lit("missing vantage name"))
    )
    return parsed.withColumn("reason", reason)
