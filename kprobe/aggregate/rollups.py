"""Kept FLAT rows -> per-day partial aggregates that merge across days (kprobe.aggregate.merge).

A rollup is one table, `t` telling its kinds apart, one function here per kind:

    ev   `endpoint_day`            per endpoint and vantage: counts, failure classes, maxima, first and last
                                   observation, status changes within the day
    h    `latency_day`             latency histogram buckets, per metric
    hr   `hourly_day`              per cluster, vantage and hour
    cs   `cluster_day`             per cluster and vantage: reports, last good and bad, the latest report
    f    `findings_day`            findings by code
    fe   `endpoint_findings_day`   findings per endpoint, in their words
    adv  `advertised_day`          a bootstrap's first and last advertised address of a node
    chg  `advertised_changes_day`  changes of that address within the day

Sums, minima and maxima, first and last values with their times, latency histograms: each merges
across days, so a run recomputes the rollups of the days that got new records and merges every
day's, and an incremental run's outputs equal a full run's over the same records.

Two strategies make the same rows (tests/aggregate/test_job.py compares them). Rows in one partition (a
small increment: ingest.ONE_TASK_BELOW) are aggregated directly, sorting where an order is needed.
Spread over many rows, the status changes, the latest report and the advertised addresses are each
found by a small aggregation first and a broadcast lookup into the rows, which spares sorting every
row (or aggregating a struct, which Spark does by sorting); in one task each of those lookups is a
Spark job of its own, a fixed cost in a new driver, and sorting a few thousand rows costs nothing.
The kinds that differ have a `_spread` function beside theirs; `day_rollups` alone chooses.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from kprobe.aggregate.flatten import ADV_KEYS, FAILURE_CLASSES, KEYS, success
from kprobe.aggregate.ordering import key_ts, latest, rid_of, status_key

# Latency percentiles come from histograms that merge across days: bucket b holds the latencies
# in (e^((b-1)/K), e^(b/K)] ms, K = BUCKETS_PER_E, so a bucket is 2% wide; the percentile is the
# largest latency seen in the bucket where its rank falls, within 2% of the exact one.
BUCKETS_PER_E = 50
ZERO_BUCKET = -1_000_000  # latencies of 0 ms (or less): log() has no bucket for them
DAY = ("d", "day")
PAIR = ["cluster_id", "vantage", *DAY]


class Lookups:
    """The spread strategy's small aggregations that several parts read, each made once.

    Spark computes a DataFrame again for every reader (it keeps only the columns that reader needs,
    so their plans differ and no shuffle is reused), reading and aggregating every row again. With a
    `held` list, each is cached and appended to it, computed once; the caller unpersists them once the
    rollups are written. Without one, they are plain DataFrames, made once here all the same.
    """

    def __init__(self, held: list[DataFrame] | None) -> None:
        self.held = held
        self._made: dict[str, DataFrame] = {}

    def hold(self, df: DataFrame) -> DataFrame:
        """`df` cached and listed in `held` (the caller unpersists it), or as it is when there is no `held`."""
        if self.held is None:
            return df
        self.held.append(df.cache())
        return self.held[-1]

    def once(self, name: str, make: Callable[[], DataFrame]) -> DataFrame:
        """The held aggregation `name`, made by `make` on first use."""
        if name not in self._made:
            self._made[name] = self.hold(make())
        return self._made[name]


def day_rollups(rows: DataFrame, one_task: bool = False, held: list[DataFrame] | None = None) -> DataFrame:
    """Kept FLAT rows -> per-day partial aggregates, one table, `t` telling them apart.

    `one_task`: the rows are in one partition, and are aggregated directly (see the module's docstring).
    `held`: spread, the aggregations the lookups are made from are cached and appended to it (`Lookups`).
    """
    if one_task:
        parts = [endpoint_day(rows), latency_day(rows, "dns"), latency_day(rows, "tcp"), hourly_day(rows),
                 cluster_day(rows), findings_day(rows), endpoint_findings_day(rows), advertised_changes_day(rows),
                 advertised_day(rows)]
    else:
        lookups = Lookups(held)
        parts = [endpoint_day_spread(rows, lookups), latency_day(rows, "dns"), latency_day(rows, "tcp"),
                 hourly_day(rows), cluster_day_spread(rows, lookups), findings_day(rows),
                 endpoint_findings_day_spread(rows), advertised_changes_day_spread(rows, lookups),
                 advertised_day_spread(rows, lookups)]
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part, allowMissingColumns=True)
    return out


def _bucket(ms: Column) -> Column:
    return F.when(ms <= 0, F.lit(ZERO_BUCKET)).otherwise(F.ceil(F.log(ms) * BUCKETS_PER_E).cast("int"))


def _observations(rows: DataFrame) -> DataFrame:
    """The observations' columns the endpoint, latency and hourly rollups read, with `ok`."""
    return rows.where("o").select(*KEYS, *DAY, "ts", "rid", "failure", "dns_ms", "tcp_ms", success().alias("ok"))


def _counts() -> list[Column]:
    return [
        F.count(F.lit(1)).alias("probes"), F.sum(F.col("ok").cast("long")).alias("successes"),
        *[F.sum(F.when(F.col("failure") == name, 1).otherwise(0).cast("long")).alias(f"fail_{name}")
          for name in FAILURE_CLASSES],
        F.max("dns_ms").alias("dns_max_ms"), F.max("tcp_ms").alias("tcp_max_ms"),
        F.min(status_key()).alias("first_key"), F.max(status_key()).alias("last_key"),
    ]


def _in_order() -> WindowSpec:
    """An endpoint's observations of a day, ordered as first_key and last_key order them (a tie in time:
    successes first), so that a day rolled up in segments (see `merge.endpoint_vantage`) counts the same
    changes as the whole day.
    """
    return Window.partitionBy(*KEYS, *DAY).orderBy(status_key(), "rid")


def _flips() -> Column:
    return F.sum((F.col("prev").isNotNull() & (F.col("prev") != F.col("ok"))).cast("long")).alias("changes")


def _with_ends(ev: DataFrame) -> DataFrame:
    return (ev.withColumn("first_ts", key_ts("first_key")).withColumn("last_ts", key_ts("last_key"))
            .withColumn("t", F.lit("ev")))


def endpoint_day(rows: DataFrame) -> DataFrame:
    """ev: per endpoint, vantage and day, its counts, failure classes, maxima, first and last outcome, and
    its status changes, counted over the day's observations in order.
    """
    ob = _observations(rows)
    return _with_ends(ob.withColumn("prev", F.lag("ok").over(_in_order())).groupBy(*KEYS, *DAY)
                      .agg(*_counts(), _flips()))


def endpoint_day_spread(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """ev, spread: status changes need the day's observations in order, but only where both outcomes occur:
    an endpoint always reachable (or never) that day changed 0 times, and is not sorted.
    """
    ob = _observations(rows)
    ev = lookups.hold(ob.groupBy(*KEYS, *DAY).agg(*_counts()))
    mixed = ev.where((F.col("successes") > 0) & (F.col("successes") < F.col("probes"))).select(*KEYS, *DAY)
    changed = (ob.join(F.broadcast(mixed), [*KEYS, *DAY], "semi").withColumn("prev", F.lag("ok").over(_in_order()))
               .groupBy(*KEYS, *DAY).agg(_flips()))
    ev = ev.join(changed, [*KEYS, *DAY], "left").withColumn("changes", F.coalesce("changes", F.lit(0)))
    return _with_ends(ev)


def latency_day(rows: DataFrame, metric: str) -> DataFrame:
    """h: one metric's (`dns` or `tcp`) latency histogram per endpoint, vantage and day.

    One aggregation per metric, not one of the rows exploded into a (metric, ms) pair each: the same
    groups (the largest rollup, a bucket per 2 % of latency), without building twice the rows.
    """
    ms = f"{metric}_ms"
    return (_observations(rows).where(F.col(ms).isNotNull())
            .groupBy(*KEYS, *DAY, _bucket(F.col(ms)).alias("b"))
            .agg(F.count(F.lit(1)).alias("n"), F.max(ms).alias("hi"))
            .select(*KEYS, *DAY, F.lit(metric).alias("metric"), "b", "n", "hi", F.lit("h").alias("t")))


def hourly_day(rows: DataFrame) -> DataFrame:
    """hr: probes and successes per cluster, vantage and hour."""
    return (_observations(rows).groupBy("cluster_id", "vantage", *DAY, F.date_trunc("hour", "ts").alias("hour"))
            .agg(F.count(F.lit(1)).alias("probes"), F.sum(F.col("ok").cast("long")).alias("successes"))
            .withColumn("t", F.lit("hr")))


def _reports() -> list[Column]:
    return [F.count(F.lit(1)).alias("reports"),
            F.max(F.when(F.col("status") == "ok", F.col("ts"))).alias("last_good"),
            F.max(F.when(F.col("status") != "ok", F.col("ts"))).alias("last_bad")]


def cluster_day(rows: DataFrame) -> DataFrame:
    """cs: per cluster, vantage and day, its reports, the last good and bad, and the latest report's picture
    (of the reports at the latest time, one but for a tie, the largest hash).
    """
    return (rows.where("rep").groupBy(*PAIR)
            .agg(*_reports(), F.max(F.struct("ts", "rid", "n_adv", "n_reach", "status")).alias("l"))
            .select(*PAIR, "reports", "last_good", "last_bad", F.col("l.ts").alias("last_ts"),
                    F.col("l.rid").alias("last_rid"), F.col("l.n_adv").alias("n_adv"),
                    F.col("l.n_reach").alias("n_reach"), F.col("l.status").alias("last_report_status"))
            .withColumn("t", F.lit("cs")))


def cluster_day_spread(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """cs, spread: the latest time per cluster and vantage first, then the reports at that time looked up."""
    reps = rows.where("rep")
    cs = lookups.hold(reps.groupBy(*PAIR).agg(*_reports(), F.max("ts").alias("last_ts")))
    at_last = (reps.join(F.broadcast(cs.select(*PAIR, F.col("last_ts").alias("ts"))), [*PAIR, "ts"], "semi")
               .groupBy(*PAIR).agg(F.max(F.struct("rid", "n_adv", "n_reach", "status")).alias("l")))
    return (cs.join(at_last, PAIR, "left")
            .select("*", F.col("l.rid").alias("last_rid"), F.col("l.n_adv").alias("n_adv"),
                    F.col("l.n_reach").alias("n_reach"), F.col("l.status").alias("last_report_status"))
            .drop("l").withColumn("t", F.lit("cs")))


def findings_day(rows: DataFrame) -> DataFrame:
    """f: findings by cluster, vantage, day and code.

    A finding stands for every endpoint it concerns (findings[].endpoints, since findings were
    merged across endpoints): `occurrences` counts one per endpoint (at least one per finding),
    comparable with reports that wrote one finding per endpoint; `findings` counts them as written.
    """
    f = F.col("f")
    weight = F.when(f["endpoints"].isNull() | (F.size(f["endpoints"]) < 1), F.lit(1)).otherwise(F.size(f["endpoints"]))
    return (rows.where("rep").select("cluster_id", "vantage", *DAY, F.explode("findings").alias("f"))
            .groupBy("cluster_id", "vantage", *DAY, f["code"].alias("code"), f["severity"].alias("severity"))
            .agg(F.sum(weight).cast("long").alias("occurrences"), F.count(F.lit(1)).alias("findings"))
            .withColumn("t", F.lit("f")))


def _concerns(rows: DataFrame) -> DataFrame:
    """Per observation, the findings about its endpoint (see `flatten.concerning`), one row each."""
    return rows.where("o").select(*KEYS, *DAY, "ts", "rid", F.explode("concerns").alias("c"))


def _code() -> list[str | Column]:
    c = F.col("c")
    return [*KEYS, *DAY, c["code"].alias("code"), c["severity"].alias("severity")]


def _endpoint_findings(own: DataFrame) -> DataFrame:
    return (own.select(*KEYS, *DAY, "code", "severity", "occurrences", "first_ts", F.col("z.ts").alias("last_ts"),
                       F.col("z.rid").alias("last_rid"), "z.message", "z.fix")
            .withColumn("t", F.lit("fe")))


def endpoint_findings_day(rows: DataFrame) -> DataFrame:
    """fe: per endpoint, vantage, day and code, the findings about that endpoint, with the report's words of
    the latest (a tie in time: the larger report hash, the same in every run).
    """
    c = F.col("c")
    return _endpoint_findings(_concerns(rows).groupBy(*_code()).agg(
        F.count(F.lit(1)).alias("occurrences"), F.min("ts").alias("first_ts"),
        F.max(F.struct("ts", "rid", c["message"].alias("message"), c["fix"].alias("fix"))).alias("z")))


def endpoint_findings_day_spread(rows: DataFrame) -> DataFrame:
    """fe, spread: a struct holding text is aggregated by sorting every finding. The words repeat from report
    to report (a finding names the configuration, not a measurement), so they are keys of a hash aggregation
    instead, with the latest (time, report hash) as one number (`ordering.latest`); then a few rows per code
    pick the latest words.
    """
    c = F.col("c")
    words = (_concerns(rows).groupBy(*_code(), c["message"].alias("message"), c["fix"].alias("fix"))
             .agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("first_ts"), F.max("ts").alias("ts"),
                  F.max(latest()).alias("at")))
    own = (words.groupBy(*KEYS, *DAY, "code", "severity")
           .agg(F.sum("n").alias("occurrences"), F.min("first_ts").alias("first_ts"),
                F.max(F.struct("at", "ts", "message", "fix")).alias("w"))
           .select("*", F.struct("w.ts", rid_of(F.col("w.at")).alias("rid"), "w.message", "w.fix").alias("z")))
    return _endpoint_findings(own)


def _brokers(rows: DataFrame) -> DataFrame:
    """Per report and bootstrap that answered, one row per broker it advertised: `advertised` is its host:port."""
    boots = (rows.where("rep")
             .select("cluster_id", "vantage", *DAY, "ts", "rid", "report_id", F.explode("bootstraps").alias("b"))
             .where(F.col("b.status") == "ok"))
    return boots.select("cluster_id", "vantage", *DAY, "ts", "rid", "report_id",
                        F.col("b.address").alias("bootstrap"), F.explode("b.brokers").alias("x")).select(
        "cluster_id", "vantage", *DAY, "ts", "rid", "report_id", "bootstrap", F.col("x.node_id").alias("node_id"),
        F.concat_ws(":", "x.host", F.col("x.port").cast("string")).alias("advertised"))


def advertised_day(rows: DataFrame) -> DataFrame:
    """adv: per bootstrap, node and day, the first address with the first report that gave it (named if a
    change is found where this rollup meets the one before it: across midnight, or a segment of the same
    day), and the last.
    """
    return (_brokers(rows).groupBy(*ADV_KEYS, *DAY).agg(F.min(F.struct("ts", "advertised", "report_id")).alias("a"),
                                                         F.max(F.struct("ts", "advertised")).alias("z"))
            .select(*ADV_KEYS, *DAY, F.col("a.ts").alias("first_ts"), F.col("a.advertised").alias("first_adv"),
                    F.col("z.ts").alias("last_ts"), F.col("z.advertised").alias("last_adv"),
                    F.col("a.report_id").alias("report_id"))
            .withColumn("t", F.lit("adv")))


def _address_ends(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """Spread: per bootstrap, node and day, the first and last address, and whether it `moved` that day.

    Per address seen: when first and last. One address a day (the rule) has no change inside the day,
    and needs no ordering of its reports; only days with several are ordered.
    """
    def make() -> DataFrame:
        spans = (_brokers(rows).groupBy(*ADV_KEYS, *DAY, "advertised")
                 .agg(F.min("ts").alias("a_ts"), F.max("ts").alias("z_ts")))
        return spans.groupBy(*ADV_KEYS, *DAY).agg(  # small: one row per address seen
            F.min(F.struct("a_ts", "advertised")).alias("a"), F.max(F.struct("z_ts", "advertised")).alias("z"),
            F.count(F.lit(1)).alias("addresses"))

    ends = lookups.once("address ends", make)
    return ends.select(*ADV_KEYS, *DAY, F.col("a.a_ts").alias("first_ts"), F.col("a.advertised").alias("first_adv"),
                       F.col("z.z_ts").alias("last_ts"), F.col("z.advertised").alias("last_adv"),
                       (F.col("addresses") > 1).alias("moved"))


def _at_first() -> Column:
    return (F.col("ts") == F.col("first_ts")) & (F.col("advertised") == F.col("first_adv"))


def _near(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """Spread: what is read of the advertised rows again, in one pass: the rows with the first address at its
    first time, and every row of a day with a change (few: a node keeps its address).
    """
    def make() -> DataFrame:
        ends = _address_ends(rows, lookups)
        return (_brokers(rows).join(F.broadcast(ends.select(*ADV_KEYS, *DAY, "first_ts", "first_adv", "moved")),
                                    [*ADV_KEYS, *DAY]).where(F.col("moved") | _at_first()))

    return lookups.once("near", make)


def advertised_day_spread(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """adv, spread: the ends per address seen, and the first report with the first address, first as
    `advertised_changes_day` orders them.
    """
    firsts = (_near(rows, lookups).where(_at_first()).groupBy(*ADV_KEYS, *DAY)
              .agg(F.min("report_id").alias("report_id")))
    return (_address_ends(rows, lookups).drop("moved").join(firsts, [*ADV_KEYS, *DAY], "left")
            .withColumn("t", F.lit("adv")))


def _changes(moving: DataFrame) -> DataFrame:
    # Ordered as `advertised_day` orders them (a tie in time by address), so that segments of a day meet as the
    # whole day does.
    order = Window.partitionBy(*ADV_KEYS, *DAY).orderBy("ts", "advertised", "report_id")
    return (moving.withColumn("previous", F.lag("advertised").over(order))
            .where(F.col("previous").isNotNull() & (F.col("previous") != F.col("advertised")))
            .select(*ADV_KEYS, *DAY, "previous", F.col("advertised").alias("current"),
                    F.col("ts").alias("changed_at"), "report_id").withColumn("t", F.lit("chg")))


def advertised_changes_day(rows: DataFrame) -> DataFrame:
    """chg: each change of a bootstrap's advertised address of a node between consecutive reports of a day."""
    return _changes(_brokers(rows))


def advertised_changes_day_spread(rows: DataFrame, lookups: Lookups) -> DataFrame:
    """chg, spread: only the days with a change are ordered (a node with one address that day has none)."""
    brokers = _brokers(rows)
    return _changes(_near(rows, lookups).where("moved").select(*brokers.columns))


def per_minute(rows: DataFrame) -> DataFrame:
    """Kept FLAT rows -> per cluster, vantage and minute: probes and successes.

    Not an output and not kept in the state: the job computes it for the page only when all the
    data fall within an hour or two (`outputs.page_minutes`), so that an incident of an hour is drawn in
    minutes; over days, `hourly` is as fine as a plot can show.
    """
    return (rows.where("o").groupBy("cluster_id", "vantage", F.date_trunc("minute", "ts").alias("minute"))
            .agg(F.count(F.lit(1)).alias("probes"), F.sum(success().cast("long")).alias("successes")))
