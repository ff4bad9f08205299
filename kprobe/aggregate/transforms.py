"""Pure DataFrame -> DataFrame transformations of the aggregation job.

No I/O and no SparkSession here: each function takes and returns DataFrames, so each is tested
alone on a local session, and the job (`kprobe.aggregate.job`) only reads, calls these, writes.

The shape of the work, and why: every input record is parsed once, in one pass, into flat typed
rows (`flat_records`): one per quarantined record, one per usable report, one per endpoint
observation. Those rows are what the job keeps (its state, partitioned by day), so a later run
parses only new records. Per day, they are rolled up (`day_rollups`) into small partial
aggregates that merge across days (`endpoint_vantage`, `cluster_summary`, ...): sums, minima
and maxima, first and last values with their times, latency histograms. A run recomputes the
rollups of the days that got new records and merges every day's; the same code makes a full run,
so an incremental run's outputs equal a full run's over the same records.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kprobe.aggregate.schema import CORRUPT, SUPPORTED, read_schema

FAILURE_CLASSES = ("dns", "refused", "timeout", "unreachable", "tls", "identity", "auth", "partial")
TLS_FAILURES = ("untrusted", "hostname_mismatch", "handshake_failed")
IDENTITY_FAILURES = ("mismatch", "not_kafka", "silent")
KEYS = ("cluster_id", "node_id", "host", "port", "vantage")
ADV_KEYS = ("cluster_id", "vantage", "bootstrap", "node_id")
# The node id of a bootstrap address in the outputs: a report whose bootstraps all failed has no
# cluster id and no advertised endpoints, so its bootstraps stand in for them (see `flat_records`).
BOOTSTRAP_NODE = -1
BOOTSTRAP_FAILURES = {"dns_failed": "dns", "refused": "refused", "timeout": "timeout", "auth_failed": "auth"}
UNSUPPORTED_FILE = "unsupported file type (kprobe reads *.json, *.jsonl, *.ndjson, optionally gzipped)"
QUARANTINE_DAY = "none"  # the `d` partition of quarantined records, which have no usable time
# Latency percentiles come from histograms that merge across days: bucket b holds the latencies
# in (e^((b-1)/K), e^(b/K)] ms, K = BUCKETS_PER_E, so a bucket is 2% wide; the percentile is the
# largest latency seen in the bucket where its rank falls, within 2% of the exact one.
BUCKETS_PER_E = 50
ZERO_BUCKET = -1_000_000  # latencies of 0 ms (or less): log() has no bucket for them

# The flat rows the job keeps: `kind` r (usable report), o (endpoint observation) or q (quarantined).
# Every kind has every column (null where it does not apply), so that one pass writes them all.
FLAT = T.StructType([
    T.StructField("kind", T.StringType()), T.StructField("d", T.StringType()),
    T.StructField("seq", T.LongType()), T.StructField("file", T.StringType()), T.StructField("h", T.LongType()),
    T.StructField("rid", T.LongType()), T.StructField("ts", T.TimestampType()), T.StructField("day", T.DateType()),
    T.StructField("report_id", T.StringType()), T.StructField("cluster_id", T.StringType()),
    T.StructField("vantage", T.StringType()), T.StructField("status", T.StringType()),
    T.StructField("n_adv", T.IntegerType()), T.StructField("n_reach", T.IntegerType()),
    T.StructField("findings", T.ArrayType(T.StructType([
        T.StructField("code", T.StringType()), T.StructField("severity", T.StringType()),
        T.StructField("weight", T.IntegerType())]))),
    T.StructField("brokers", T.ArrayType(T.StructType([
        T.StructField("bootstrap", T.StringType()), T.StructField("node_id", T.LongType()),
        T.StructField("advertised", T.StringType())]))),
    T.StructField("node_id", T.LongType()), T.StructField("host", T.StringType()), T.StructField("port", T.LongType()),
    T.StructField("failure", T.StringType()), T.StructField("dns_ms", T.DoubleType()),
    T.StructField("tcp_ms", T.DoubleType()), T.StructField("reason", T.StringType()),
    T.StructField("record", T.StringType()),
])


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


def _row(**columns: Column) -> Column:
    """One FLAT row as a struct: the columns given, typed nulls for the rest (every kind one type)."""
    unknown = set(columns) - set(FLAT.names)
    assert not unknown, unknown
    return F.struct(*[(columns[f.name] if f.name in columns else F.lit(None)).cast(f.dataType).alias(f.name)
                      for f in FLAT.fields])


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


def _bootstrap_failure(status: Column) -> Column:
    out = F.when(status == "ok", F.lit(None).cast("string"))
    for raw, name in BOOTSTRAP_FAILURES.items():
        out = out.when(status == raw, F.lit(name))
    return out.otherwise(F.lit("unreachable"))


def flat_records(records: DataFrame) -> DataFrame:
    """Parsed records (`file`, `line`, `r`, `reason`) -> FLAT rows, in one pass.

    Each record gets `seq` (unique within the pass) and `h`, a hash of its text: together with the
    run that read it they tell copies of one report apart (see `kept`). An endpoint that a run's
    deadline (or Ctrl-C) cut short is `unchecked`: nothing was seen of it, so it is no
    observation at all, neither a success nor a failure.

    A report whose bootstraps all failed has no cluster id and no advertised endpoints. It is the
    worst gap of all (the vantage cannot reach the cluster at all), so it is keyed by its
    bootstrap addresses and each bootstrap becomes an observation (node BOOTSTRAP_NODE), instead
    of the report vanishing from the outputs.
    """
    # get(), not [0]: with ANSI SQL (Spark 4's default) indexing an empty array fails the whole
    # job, and a report whose bootstraps all failed has no bootstrap with a cluster id.
    found = F.expr("get(filter(r.bootstraps, b -> b.cluster_id is not null), 0).cluster_id")
    boot_key = F.concat(F.lit("bootstrap:"), F.array_join(F.array_sort(
        F.transform("r.bootstraps", lambda b: b["address"])), ","))
    base = records.select(
        "file", "line", "r", "reason", F.monotonically_increasing_id().alias("seq"), F.xxhash64("line").alias("h"),
        found.alias("found_cluster"),
        F.to_timestamp("r.started_at").alias("ts"),
    ).select("*", F.coalesce("found_cluster", boot_key, F.lit("unknown")).alias("cluster"),
             F.xxhash64("r.id").alias("rid"), F.to_date("ts").alias("day"),
             F.date_format("ts", "yyyy-MM-dd").alias("d"))
    common = {"seq": F.col("seq"), "file": F.col("file"), "h": F.col("h"), "rid": F.col("rid"), "ts": F.col("ts"),
              "day": F.col("day"), "d": F.col("d"), "cluster_id": F.col("cluster"), "vantage": F.col("r.vantage.name")}
    seen = F.filter("r.endpoints", lambda e: e["status"] != "unchecked")
    observed = F.transform(seen, lambda e: _row(
        kind=F.lit("o"), **common, node_id=e["node_id"], host=e["host"], port=e["port"], failure=_failure(e),
        dns_ms=e["dns"]["ms"],
        tcp_ms=F.array_min(F.transform(F.filter(e["tcp"], lambda t: t["status"] == "ok"), lambda t: t["ms"]))))
    address = r"^\[?(.*?)\]?:(\d+)$"
    gaps = F.transform(F.filter("r.bootstraps", lambda b: b["status"] != "unchecked"), lambda b: _row(
        kind=F.lit("o"), **common, node_id=F.lit(BOOTSTRAP_NODE), host=F.regexp_extract(b["address"], address, 1),
        port=F.regexp_extract(b["address"], address, 2), failure=_bootstrap_failure(b["status"]),
        tcp_ms=b["ms"]))
    brokers = F.flatten(F.transform(
        F.filter("r.bootstraps", lambda b: b["status"] == "ok"),
        lambda b: F.transform(b["brokers"], lambda br: F.struct(
            b["address"].alias("bootstrap"), br["node_id"].alias("node_id"),
            F.concat_ws(":", br["host"], br["port"].cast("string")).alias("advertised")))))
    # A finding now stands for every endpoint it concerns (findings[].endpoints); `weight` counts
    # them, so that occurrences stay comparable with reports that wrote one finding per endpoint.
    findings = F.transform("r.findings", lambda f: F.struct(
        f["code"].alias("code"), f["severity"].alias("severity"),
        F.greatest(F.coalesce(F.size(f["endpoints"]), F.lit(1)), F.lit(1)).alias("weight")))
    report = _row(kind=F.lit("r"), **common, report_id=F.col("r.id"), status=F.col("r.summary.status"),
                  n_adv=F.size("r.endpoints"),
                  n_reach=F.size(F.filter("r.endpoints", lambda e: e["status"] == "reachable")),
                  findings=findings, brokers=brokers)
    quarantined = _row(kind=F.lit("q"), seq=F.col("seq"), file=F.col("file"), h=F.col("h"),
                       d=F.lit(QUARANTINE_DAY), reason=F.col("reason"), record=F.substring("line", 1, 10_000))
    rows = (F.when(F.col("reason").isNotNull(), F.array(quarantined))
            .when(F.col("found_cluster").isNull(), F.concat(F.array(report), gaps))
            .otherwise(F.concat(F.array(report), observed)))
    return base.select(F.explode(rows).alias("x")).select("x.*")


def kept(rows: DataFrame, copies: DataFrame | None) -> DataFrame:
    """Rows (r or o, with their `run`) of the copy of each report id that the job keeps.

    `copies` lists the ids that came more than once (re-delivered by a spool-and-forward
    publisher, or a file read twice) with the copy kept: the earliest by time (then by text and
    order of reading, which only decide between identical copies). Duplicates are rare, so this
    is a broadcast join of a small table, never a shuffle of every report.
    """
    if copies is None:
        return rows
    winner = F.broadcast(copies.select("rid", F.col("run").alias("win_run"), F.col("seq").alias("win_seq")))
    return (rows.join(winner, "rid", "left")
            .where(F.col("win_run").isNull() | ((F.col("run") == F.col("win_run")) & (F.col("seq") == F.col("win_seq"))))
            .drop("win_run", "win_seq"))


def winners(copies: DataFrame) -> DataFrame:
    """All the records (r rows with `run`) of ids that came more than once -> one row per id: the kept copy."""
    order = F.struct("ts", "h", "run", "seq")
    return (copies.groupBy("rid", "report_id")
            .agg(F.min_by(F.struct("run", "seq", "d"), order).alias("w"), F.count(F.lit(1)).alias("copies"))
            .select("rid", "report_id", "w.run", "w.seq", "w.d", "copies"))


def within(df: DataFrame, since: str | None, until: str | None) -> DataFrame:
    """Rows with since <= ts < until (RFC 3339 or dates)."""
    if since:
        df = df.where(F.col("ts") >= F.to_timestamp(F.lit(since)))
    if until:
        df = df.where(F.col("ts") < F.to_timestamp(F.lit(until)))
    return df


def _success() -> Column:
    return F.col("failure").isNull() | (F.col("failure") == "partial")


def _bucket(ms: Column) -> Column:
    return F.when(ms <= 0, F.lit(ZERO_BUCKET)).otherwise(F.ceil(F.log(ms) * BUCKETS_PER_E).cast("int"))


def day_rollups(reps: DataFrame, obs: DataFrame) -> DataFrame:
    """Kept reports and observations -> per-day partial aggregates, one table, `t` telling them apart.

    t = ev (per endpoint and vantage: counts, failure classes, maxima, first and last
    observation, status changes within the day), h (latency histogram buckets), hr (per cluster,
    vantage and hour), cs (per cluster and vantage: reports, last good and bad, latest report),
    f (findings), adv (a bootstrap's first and last advertised address of a node) and chg
    (changes of it within the day). Each merges across days in the functions below.
    """
    day = ("d", "day")
    w = Window.partitionBy(*KEYS, *day).orderBy("ts", "rid")
    ob = obs.select(*KEYS, *day, "ts", "rid", "failure", "dns_ms", "tcp_ms", _success().alias("ok"))
    ev = (ob.withColumn("prev", F.lag("ok").over(w)).groupBy(*KEYS, *day).agg(
        F.count(F.lit(1)).alias("probes"), F.sum(F.col("ok").cast("long")).alias("successes"),
        *[F.sum((F.col("failure") == name).cast("long")).alias(f"fail_{name}") for name in FAILURE_CLASSES],
        F.max("dns_ms").alias("dns_max_ms"), F.max("tcp_ms").alias("tcp_max_ms"),
        F.min(F.struct("ts", "rid", "ok")).alias("first"),
        F.max(F.struct("ts", "rid", "ok", F.coalesce("failure", F.lit("ok")).alias("status"))).alias("last"),
        F.sum((F.col("prev").isNotNull() & (F.col("prev") != F.col("ok"))).cast("long")).alias("changes"),
    ).select("*", F.col("first.ts").alias("first_ts"), F.col("first.rid").alias("first_rid"),
             F.col("first.ok").alias("first_ok"), F.col("last.ts").alias("last_ts"),
             F.col("last.rid").alias("last_rid"), F.col("last.ok").alias("last_ok"),
             F.col("last.status").alias("last_status")).drop("first", "last").withColumn("t", F.lit("ev")))
    lat = ob.select(*KEYS, *day, F.explode(F.array(
        F.struct(F.lit("dns").alias("metric"), F.col("dns_ms").alias("ms")),
        F.struct(F.lit("tcp").alias("metric"), F.col("tcp_ms").alias("ms")))).alias("x")).where("x.ms is not null")
    hist = (lat.groupBy(*KEYS, *day, F.col("x.metric").alias("metric"), _bucket(F.col("x.ms")).alias("b"))
            .agg(F.count(F.lit(1)).alias("n"), F.max("x.ms").alias("hi")).withColumn("t", F.lit("h")))
    hourly = (ob.groupBy("cluster_id", "vantage", *day, F.date_trunc("hour", "ts").alias("hour"))
              .agg(F.count(F.lit(1)).alias("probes"), F.sum(F.col("ok").cast("long")).alias("successes"))
              .withColumn("t", F.lit("hr")))
    cs = reps.groupBy("cluster_id", "vantage", *day).agg(
        F.count(F.lit(1)).alias("reports"),
        F.max(F.when(F.col("status") == "ok", F.col("ts"))).alias("last_good"),
        F.max(F.when(F.col("status") != "ok", F.col("ts"))).alias("last_bad"),
        F.max(F.struct("ts", "rid", "n_adv", "n_reach", "status")).alias("l"),
    ).select("*", F.col("l.ts").alias("last_ts"), F.col("l.rid").alias("last_rid"), F.col("l.n_adv").alias("n_adv"),
             F.col("l.n_reach").alias("n_reach"), F.col("l.status").alias("last_report_status")
             ).drop("l").withColumn("t", F.lit("cs"))
    found = (reps.select("cluster_id", "vantage", *day, F.explode("findings").alias("f"))
             .groupBy("cluster_id", "vantage", *day, F.col("f.code").alias("code"), F.col("f.severity").alias("severity"))
             .agg(F.sum("f.weight").cast("long").alias("occurrences"), F.count(F.lit(1)).alias("findings"))
             .withColumn("t", F.lit("f")))
    brokers = reps.select("cluster_id", "vantage", *day, "ts", "rid", "report_id", F.explode("brokers").alias("x")).select(
        "cluster_id", "vantage", *day, "ts", "rid", "report_id", "x.bootstrap", "x.node_id", "x.advertised")
    order = Window.partitionBy(*ADV_KEYS, *day).orderBy("ts", "rid")
    changes = (brokers.withColumn("previous", F.lag("advertised").over(order))
               .where(F.col("previous").isNotNull() & (F.col("previous") != F.col("advertised")))
               .select(*ADV_KEYS, *day, "previous", F.col("advertised").alias("current"),
                       F.col("ts").alias("changed_at"), "report_id").withColumn("t", F.lit("chg")))
    ends = brokers.groupBy(*ADV_KEYS, *day).agg(
        F.min(F.struct("ts", "rid", "advertised", "report_id")).alias("a"),
        F.max(F.struct("ts", "rid", "advertised")).alias("z"),
    ).select(*ADV_KEYS, *day, F.col("a.ts").alias("first_ts"), F.col("a.rid").alias("first_rid"),
             F.col("a.advertised").alias("first_adv"), F.col("a.report_id").alias("report_id"),
             F.col("z.ts").alias("last_ts"), F.col("z.rid").alias("last_rid"), F.col("z.advertised").alias("last_adv")
             ).withColumn("t", F.lit("adv"))
    out = ev
    for part in (hist, hourly, cs, found, changes, ends):
        out = out.unionByName(part, allowMissingColumns=True)
    return out


def _rank(n: Column, percent: int) -> Column:
    """The rank (1-based) of the `percent`th percentile among n values: ceil(n * percent / 100), in integers."""
    return F.greatest(F.lit(1), ((n * percent + 99) / 100).cast("long"))


def percentiles(rollups: DataFrame) -> DataFrame:
    """Per endpoint and vantage: p50 and p95 of DNS and TCP latency, from the merged day histograms."""
    group = [*KEYS, "metric"]
    h = rollups.where(F.col("t") == "h").groupBy(*group, "b").agg(F.sum("n").alias("n"), F.max("hi").alias("hi"))
    upto = Window.partitionBy(*group).orderBy("b").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    h = (h.withColumn("cum", F.sum("n").over(upto)).withColumn("tot", F.sum("n").over(Window.partitionBy(*group))))
    p = h.groupBy(*group).agg(*[F.min(F.when(F.col("cum") >= _rank(F.col("tot"), q), F.struct("b", "hi")))["hi"]
                                .alias(f"p{q}") for q in (50, 95)])
    return p.groupBy(*KEYS).agg(*[F.max(F.when(F.col("metric") == m, F.col(f"p{q}"))).alias(f"{m}_p{q}_ms")
                                  for m in ("dns", "tcp") for q in (50, 95)])


def endpoint_vantage(rollups: DataFrame) -> DataFrame:
    """One row per (cluster, node, advertised host:port, vantage): its reachability over time."""
    ev = rollups.where(F.col("t") == "ev")
    by_day = Window.partitionBy(*KEYS).orderBy("day")
    crossed = F.lag("last_ok").over(by_day)
    ev = ev.withColumn("crossed", (crossed.isNotNull() & (crossed != F.col("first_ok"))).cast("long"))
    out = ev.groupBy(*KEYS).agg(
        F.sum("probes").alias("probes"), F.sum("successes").alias("successes"),
        *[F.sum(f"fail_{name}").alias(f"fail_{name}") for name in FAILURE_CLASSES],
        F.max("dns_max_ms").alias("dns_max_ms"), F.max("tcp_max_ms").alias("tcp_max_ms"),
        F.min("first_ts").alias("first_seen"), F.max("last_ts").alias("last_seen"),
        F.max(F.struct("last_ts", "last_rid", "last_status"))["last_status"].alias("last_status"),
        (F.sum("changes") + F.sum("crossed")).alias("status_changes"),
    ).join(percentiles(rollups), list(KEYS), "left")
    out = out.withColumn("success_rate", F.col("successes") / F.col("probes"))
    latency = [f"{m}_{s}_ms" for m in ("dns", "tcp") for s in ("p50", "p95", "max")]
    return out.select(*KEYS, "probes", "successes", "success_rate", *[f"fail_{n}" for n in FAILURE_CLASSES],
                      *latency, "first_seen", "last_seen", "last_status", "status_changes")


def findings_by_day(rollups: DataFrame) -> DataFrame:
    """Finding codes by cluster, vantage and day: `occurrences` per endpoint concerned, `findings` as written."""
    return rollups.where(F.col("t") == "f").select("cluster_id", "vantage", "day", "code", "severity", "occurrences",
                                                    "findings")


def hourly(rollups: DataFrame) -> DataFrame:
    """Per cluster, vantage and hour: probes and successes (the page's timelines)."""
    return (rollups.where(F.col("t") == "hr")
            .select("cluster_id", "vantage", "hour", "probes", "successes",
                    (F.col("successes") / F.col("probes")).alias("success_rate")))


def _severity_rank() -> Column:
    return F.when(F.col("severity") == "error", 0).when(F.col("severity") == "warning", 1).otherwise(2)


def cluster_summary(rollups: DataFrame) -> DataFrame:
    """Per cluster and vantage: the latest picture, the worst finding, the last good and bad times."""
    pair = ["cluster_id", "vantage"]
    cs = rollups.where(F.col("t") == "cs").groupBy(*pair).agg(
        F.sum("reports").alias("reports"), F.max("last_good").alias("last_good"), F.max("last_bad").alias("last_bad"),
        F.max(F.struct("last_ts", "last_rid", "n_adv", "n_reach", "last_report_status")).alias("l"))
    counts = rollups.where(F.col("t") == "f").groupBy(*pair, "code", "severity").agg(F.sum("occurrences").alias("n"))
    rank = Window.partitionBy(*pair).orderBy(_severity_rank(), F.col("n").desc(), "code")
    worst = (counts.withColumn("rn", F.row_number().over(rank)).where("rn = 1")
             .select(*pair, F.col("code").alias("worst_finding"), F.col("severity").alias("worst_severity")))
    return (cs.join(worst, pair, "left")
            .select(*pair, "reports", F.col("l.n_adv").alias("endpoints_advertised"),
                    F.col("l.n_reach").alias("endpoints_reachable"),
                    F.col("l.last_report_status").alias("last_report_status"), "worst_finding", "worst_severity",
                    "last_good", "last_bad"))


def advertised_changes(rollups: DataFrame) -> DataFrame:
    """When a bootstrap's advertised host:port for a node changed between consecutive reports (drift).

    Changes within a day come from the day's rollup; a change across midnight is the last address
    of one day against the first of the next day that has one.
    """
    by_day = Window.partitionBy(*ADV_KEYS).orderBy("day")
    ends = rollups.where(F.col("t") == "adv").withColumn("previous", F.lag("last_adv").over(by_day))
    crossed = (ends.where(F.col("previous").isNotNull() & (F.col("previous") != F.col("first_adv")))
               .select(*ADV_KEYS, "previous", F.col("first_adv").alias("current"), F.col("first_ts").alias("changed_at"),
                       "report_id"))
    inside = rollups.where(F.col("t") == "chg").select(*ADV_KEYS, "previous", "current", "changed_at", "report_id")
    return inside.unionByName(crossed).select("cluster_id", "vantage", "bootstrap", "node_id", "previous", "current",
                                              "changed_at", "report_id")


def observations(obs: DataFrame) -> DataFrame:
    """Kept observation rows (kind o) as the page reads them: with `success`, without the bookkeeping."""
    return obs.select("cluster_id", "vantage", "node_id", "host", "port", "ts", "rid", "failure", "dns_ms", "tcp_ms",
                      _success().alias("success"))
