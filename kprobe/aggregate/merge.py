"""The rollups of every day in the window merged into the job's outputs, one function per output.

Each reads the rollup kinds it merges (`t`, see kprobe.aggregate.rollups) and returns the output's
rows; the job (kprobe.aggregate.outputs) writes them. No I/O and no SparkSession here.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from kprobe.aggregate.flatten import ADV_KEYS, FAILURE_CLASSES, KEYS
from kprobe.aggregate.ordering import key_ok, key_status


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
    # A day may be rolled up in segments that follow one another in time (ingest._roll_up): each
    # segment meets the next as one day meets the next.
    by_day = Window.partitionBy(*KEYS).orderBy("day", "first_ts")
    crossed = F.lag(key_ok("last_key")).over(by_day)
    ev = ev.withColumn("crossed", (crossed.isNotNull() & (crossed != key_ok("first_key"))).cast("long"))
    out = ev.groupBy(*KEYS).agg(
        F.sum("probes").alias("probes"), F.sum("successes").alias("successes"),
        *[F.sum(f"fail_{name}").alias(f"fail_{name}") for name in FAILURE_CLASSES],
        F.max("dns_max_ms").alias("dns_max_ms"), F.max("tcp_max_ms").alias("tcp_max_ms"),
        F.min("first_ts").alias("first_seen"), F.max("last_ts").alias("last_seen"),
        F.max("last_key").alias("last_key"),
        (F.sum("changes") + F.sum("crossed")).alias("status_changes"),
    ).join(percentiles(rollups), list(KEYS), "left")
    out = out.withColumn("success_rate", F.col("successes") / F.col("probes")).withColumn("last_status",
                                                                                           key_status("last_key"))
    latency = [f"{m}_{s}_ms" for m in ("dns", "tcp") for s in ("p50", "p95", "max")]
    return out.select(*KEYS, "probes", "successes", "success_rate", *[f"fail_{n}" for n in FAILURE_CLASSES],
                      *latency, "first_seen", "last_seen", "last_status", "status_changes")


def findings_by_day(rollups: DataFrame) -> DataFrame:
    """Finding codes by cluster, vantage and day: `occurrences` per endpoint concerned, `findings` as written."""
    return (rollups.where(F.col("t") == "f").groupBy("cluster_id", "vantage", "day", "code", "severity")
            .agg(F.sum("occurrences").alias("occurrences"), F.sum("findings").alias("findings")))


def findings_by_endpoint(rollups: DataFrame) -> DataFrame:
    """Per endpoint, vantage and finding code: how often the finding concerned that endpoint, in its words.

    `occurrences` counts the observations it concerned; `message` and `fix` are those of the latest
    (what `kprobe show` of that report prints), so the page says why each gap is one, with its fix.
    """
    z = F.max(F.struct("last_ts", "last_rid", "message", "fix")).alias("z")
    return (rollups.where(F.col("t") == "fe").groupBy(*KEYS, "code", "severity")
            .agg(F.sum("occurrences").alias("occurrences"), F.min("first_ts").alias("first_seen"), z)
            .select(*KEYS, "code", "severity", "occurrences", "first_seen", F.col("z.last_ts").alias("last_seen"),
                    "z.message", "z.fix"))


def hourly(rollups: DataFrame) -> DataFrame:
    """Per cluster, vantage and hour: probes and successes (the page's timelines)."""
    return (rollups.where(F.col("t") == "hr").groupBy("cluster_id", "vantage", "hour")
            .agg(F.sum("probes").alias("probes"), F.sum("successes").alias("successes"))
            .withColumn("success_rate", F.col("successes") / F.col("probes")))


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
    by_day = Window.partitionBy(*ADV_KEYS).orderBy("day", "first_ts")
    ends = rollups.where(F.col("t") == "adv").withColumn("previous", F.lag("last_adv").over(by_day))
    crossed = (ends.where(F.col("previous").isNotNull() & (F.col("previous") != F.col("first_adv")))
               .select(*ADV_KEYS, "previous", F.col("first_adv").alias("current"),
                       F.col("first_ts").alias("changed_at"), "report_id"))
    inside = rollups.where(F.col("t") == "chg").select(*ADV_KEYS, "previous", "current", "changed_at", "report_id")
    return inside.unionByName(crossed).select("cluster_id", "vantage", "bootstrap", "node_id", "previous", "current",
                                              "changed_at", "report_id")
