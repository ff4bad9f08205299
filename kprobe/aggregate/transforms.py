"""Pure DataFrame -> DataFrame transformations of the aggregation job.

No I/O and no SparkSession here: each function takes and returns DataFrames, so each is tested
alone on a local session, and the job (`kprobe.aggregate.job`) only reads, calls these, writes.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kprobe.aggregate.schema import CORRUPT, SUPPORTED, report_schema

FAILURE_CLASSES = ("dns", "refused", "timeout", "unreachable", "tls", "identity", "auth", "partial")
TLS_FAILURES = ("untrusted", "hostname_mismatch", "handshake_failed")
IDENTITY_FAILURES = ("mismatch", "not_kafka", "silent")
KEYS = ("cluster_id", "node_id", "host", "port", "vantage")
# The node id of a bootstrap address in the outputs: a report whose bootstraps all failed has no
# cluster id and no advertised endpoints, so its bootstraps stand in for them (see `slim`).
BOOTSTRAP_NODE = -1
BOOTSTRAP_FAILURES = {"dns_failed": "dns", "refused": "refused", "timeout": "timeout", "auth_failed": "auth"}
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
    """Add `r`, the parsed report (all fields null, `_corrupt_record` set, for non-JSON)."""
    return records.withColumn("r", F.from_json("line", report_schema(), {"columnNameOfCorruptRecord": CORRUPT}))


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


def slim(good: DataFrame, keep: tuple[str, ...] = ()) -> DataFrame:
    """Usable reports reduced to what the outputs read: flat columns and small arrays.

    This is what the job caches: nested report structs are costly to cache and re-read, these
    few fields are not.
    """
    # get(), not [0]: with ANSI SQL (Spark 4's default) indexing an empty array fails the whole
    # job, and a report whose bootstraps all failed has no bootstrap with a cluster id.
    cluster = F.expr("get(filter(r.bootstraps, b -> b.cluster_id is not null), 0).cluster_id")
    endpoints = F.transform("r.endpoints", lambda e: F.struct(
        e["node_id"].alias("node_id"), e["host"].alias("host"), e["port"].alias("port"),
        e["status"].alias("status"), e["dns"]["status"].alias("dns_status"), e["dns"]["ms"].alias("dns_ms"),
        F.array_min(F.transform(F.filter(e["tcp"], lambda t: t["status"] == "ok"), lambda t: t["ms"])).alias("tcp_ms"),
        _failure(e).alias("failure"),
    ))
    # No bootstrap answered: no cluster id, no endpoints. Such a report is the worst gap of all
    # (the vantage cannot reach the cluster at all), so it is keyed by its bootstrap addresses
    # and each bootstrap becomes an observation, instead of the report vanishing from the outputs.
    failed_boots = F.transform("r.bootstraps", lambda b: F.struct(
        F.lit(BOOTSTRAP_NODE).cast("long").alias("node_id"),
        F.regexp_extract(b["address"], r"^\[?(.*?)\]?:(\d+)$", 1).alias("host"),
        F.regexp_extract(b["address"], r"^\[?(.*?)\]?:(\d+)$", 2).cast("long").alias("port"),
        b["status"].alias("status"), F.lit(None).cast("string").alias("dns_status"),
        F.lit(None).cast("double").alias("dns_ms"), b["ms"].cast("double").alias("tcp_ms"),
        _bootstrap_failure(b["status"]).alias("failure"),
    ))
    boot_key = F.concat(F.lit("bootstrap:"), F.array_join(F.array_sort(F.transform("r.bootstraps",
                                                                                  lambda b: b["address"])), ","))
    brokers = F.flatten(F.transform(
        F.filter("r.bootstraps", lambda b: b["status"] == "ok"),
        lambda b: F.transform(b["brokers"], lambda br: F.struct(
            b["address"].alias("bootstrap"), br["node_id"].alias("node_id"),
            F.concat_ws(":", br["host"], br["port"].cast("string")).alias("advertised")))))
    return good.select(
        *keep,
        F.col("r.id").alias("report_id"),
        F.coalesce(cluster, boot_key, F.lit("unknown")).alias("cluster_id"),
        F.col("r.vantage.name").alias("vantage"),
        F.to_timestamp("r.started_at").alias("ts"),
        F.col("r.summary.status").alias("status"),
        endpoints.alias("endpoints"),
        F.transform("r.findings", lambda f: F.struct(f["code"].alias("code"), f["severity"].alias("severity")))
        .alias("findings"),
        brokers.alias("brokers"),
        F.when(cluster.isNull(), failed_boots).otherwise(F.array().cast(failed_boots_type())).alias("bootstrap_gaps"),
    )


def failed_boots_type() -> str:
    """The type of `bootstrap_gaps`: the fields of `endpoints` that observations read."""
    return ("array<struct<node_id:bigint,host:string,port:bigint,status:string,dns_status:string,"
            "dns_ms:double,tcp_ms:double,failure:string>>")


def _bootstrap_failure(status: Column) -> Column:
    out = F.when(status == "ok", F.lit(None).cast("string"))
    for raw, name in BOOTSTRAP_FAILURES.items():
        out = out.when(status == raw, F.lit(name))
    return out.otherwise(F.lit("unreachable"))


def dedupe(reps: DataFrame) -> DataFrame:
    """One row per report id: the first (by time) of each duplicated id, everything else as is.

    Duplicates are rare (re-deliveries), so only their ids are shuffled and broadcast back; a
    dropDuplicates over whole rows would shuffle every report with its arrays.
    """
    twice = reps.groupBy("report_id").count().where(F.col("count") > 1).select("report_id")
    marked = reps.join(F.broadcast(twice.withColumn("dup", F.lit(True))), "report_id", "left")
    single = marked.where(F.col("dup").isNull()).drop("dup")
    order = Window.partitionBy("report_id").orderBy("ts")
    first = (marked.where(F.col("dup")).drop("dup").withColumn("rn", F.row_number().over(order))
             .where("rn = 1").drop("rn"))
    return single.unionByName(first)


def within(df: DataFrame, since: str | None, until: str | None) -> DataFrame:
    """Reports with since <= ts < until (RFC 3339 or dates)."""
    if since:
        df = df.where(F.col("ts") >= F.to_timestamp(F.lit(since)))
    if until:
        df = df.where(F.col("ts") < F.to_timestamp(F.lit(until)))
    return df


def _failure(e: Column) -> Column:
    tcp_statuses = F.transform(e["tcp"], lambda t: t["status"])
    return (
        F.when(e["status"] == "unresolvable", F.lit("dns"))
        .when((e["status"] == "unreachable") & F.array_contains(tcp_statuses, "timeout"), F.lit("timeout"))
        .when((e["status"] == "unreachable") & (F.size(F.array_distinct(tcp_statuses)) == 1)
              & F.array_contains(tcp_statuses, "refused"), F.lit("refused"))
        .when(e["status"] == "unreachable", F.lit("unreachable"))
        .when(e["tls"]["status"].isin(*TLS_FAILURES), F.lit("tls"))
        .when(e["identity"]["status"].isin(*IDENTITY_FAILURES), F.lit("identity"))
        .when(e["status"].isin("partial", "degraded"), F.lit("partial"))
    )


def observations(reps: DataFrame) -> DataFrame:
    """One row per (report, advertised endpoint): what this vantage saw of it at that time.

    An endpoint the run's deadline (or Ctrl-C) cut short is `unchecked`: nothing was seen of it,
    so it is no observation at all, neither a success nor a failure.
    """
    seen = F.concat("endpoints", F.coalesce(F.col("bootstrap_gaps"), F.array().cast(failed_boots_type())))
    obs = reps.select("report_id", "cluster_id", "vantage", "ts", F.explode(seen).alias("e")).select(
        "report_id", "cluster_id", "vantage", "ts", "e.node_id", "e.host", "e.port",
        F.col("e.status").alias("endpoint_status"), "e.dns_status", "e.dns_ms", "e.tcp_ms", "e.failure",
    ).where(F.col("endpoint_status") != "unchecked")
    return obs.withColumn("success", F.col("failure").isNull() | (F.col("failure") == "partial"))


def endpoint_vantage(obs: DataFrame) -> DataFrame:
    """One row per (cluster, node, advertised host:port, vantage): its reachability over time."""
    order = Window.partitionBy(*KEYS).orderBy("ts", "report_id")
    flagged = obs.withColumn("changed", (F.lag("success").over(order).isNotNull()
                                         & (F.lag("success").over(order) != F.col("success"))).cast("int"))
    aggs = [
        F.count(F.lit(1)).alias("probes"),
        F.sum(F.col("success").cast("int")).alias("successes"),
    ]
    aggs += [F.sum((F.col("failure") == name).cast("int")).alias(f"fail_{name}") for name in FAILURE_CLASSES]
    for col, name in (("dns_ms", "dns"), ("tcp_ms", "tcp")):
        aggs += [
            F.percentile_approx(col, 0.5).alias(f"{name}_p50_ms"),
            F.percentile_approx(col, 0.95).alias(f"{name}_p95_ms"),
            F.max(col).alias(f"{name}_max_ms"),
        ]
    aggs += [
        F.min("ts").alias("first_seen"),
        F.max("ts").alias("last_seen"),
        F.max_by(F.coalesce(F.col("failure"), F.lit("ok")), F.struct("ts", "report_id")).alias("last_status"),
        F.sum("changed").alias("status_changes"),
    ]
    out = flagged.groupBy(*KEYS).agg(*aggs)
    out = out.withColumn("success_rate", F.col("successes") / F.col("probes"))
    for name in FAILURE_CLASSES:
        out = out.withColumn(f"fail_{name}", F.coalesce(F.col(f"fail_{name}"), F.lit(0)))
    first = [*KEYS, "probes", "successes", "success_rate"]
    return out.select(*first, *[c for c in out.columns if c not in first])


def _severity_rank() -> Column:
    return F.when(F.col("severity") == "error", 0).when(F.col("severity") == "warning", 1).otherwise(2)


def findings_by_day(reps: DataFrame) -> DataFrame:
    """Finding codes by cluster, vantage and day."""
    return (reps.select("cluster_id", "vantage", F.to_date("ts").alias("day"), F.explode("findings").alias("f"))
            .groupBy("cluster_id", "vantage", "day", F.col("f.code").alias("code"),
                     F.col("f.severity").alias("severity"))
            .agg(F.count(F.lit(1)).alias("occurrences")))


def cluster_summary(reps: DataFrame) -> DataFrame:
    """Per cluster and vantage: the latest picture, the worst finding, the last good and bad times."""
    latest = Window.partitionBy("cluster_id", "vantage").orderBy(F.col("ts").desc(), F.col("report_id").desc())
    last = (reps.withColumn("rn", F.row_number().over(latest)).where("rn = 1").select(
        "cluster_id", "vantage",
        F.size("endpoints").alias("endpoints_advertised"),
        F.size(F.filter("endpoints", lambda e: e["status"] == "reachable")).alias("endpoints_reachable"),
        F.col("status").alias("last_report_status"),
    ))
    times = reps.groupBy("cluster_id", "vantage").agg(
        F.count(F.lit(1)).alias("reports"),
        F.max(F.when(F.col("status") == "ok", F.col("ts"))).alias("last_good"),
        F.max(F.when(F.col("status") != "ok", F.col("ts"))).alias("last_bad"),
    )
    counts = findings_by_day(reps).groupBy("cluster_id", "vantage", "code", "severity").agg(
        F.sum("occurrences").alias("n"))
    rank = Window.partitionBy("cluster_id", "vantage").orderBy(_severity_rank(), F.col("n").desc(), "code")
    worst = (counts.withColumn("rn", F.row_number().over(rank)).where("rn = 1")
             .select("cluster_id", "vantage", F.col("code").alias("worst_finding"),
                     F.col("severity").alias("worst_severity")))
    return (times.join(last, ["cluster_id", "vantage"]).join(worst, ["cluster_id", "vantage"], "left")
            .select("cluster_id", "vantage", "reports", "endpoints_advertised", "endpoints_reachable",
                    "last_report_status", "worst_finding", "worst_severity", "last_good", "last_bad"))


def advertised_changes(reps: DataFrame) -> DataFrame:
    """When a bootstrap's advertised host:port for a node changed between consecutive reports (drift)."""
    rows = reps.select("report_id", "cluster_id", "vantage", "ts", F.explode("brokers").alias("x")).select(
        "report_id", "cluster_id", "vantage", "ts", "x.bootstrap", "x.node_id", "x.advertised")
    order = Window.partitionBy("cluster_id", "vantage", "bootstrap", "node_id").orderBy("ts", "report_id")
    return (rows.withColumn("previous", F.lag("advertised").over(order))
            .where(F.col("previous").isNotNull() & (F.col("previous") != F.col("advertised")))
            .select("cluster_id", "vantage", "bootstrap", "node_id", "previous",
                    F.col("advertised").alias("current"), F.col("ts").alias("changed_at"), "report_id"))
