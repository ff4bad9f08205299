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

from kprobe.aggregate.schema import CORRUPT, KEPT_FINDING, READ, SUPPORTED, prune, read_schema, report_schema
from kprobe.models import CLIENTS_CONNECT

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
BOOT = "boot:"  # marks a bootstrap standing in for endpoints in flat_records
# Latency percentiles come from histograms that merge across days: bucket b holds the latencies
# in (e^((b-1)/K), e^(b/K)] ms, K = BUCKETS_PER_E, so a bucket is 2% wide; the percentile is the
# largest latency seen in the bucket where its rank falls, within 2% of the exact one.
BUCKETS_PER_E = 50
ZERO_BUCKET = -1_000_000  # latencies of 0 ms (or less): log() has no bucket for them

# The flat rows the job keeps, one per endpoint observation: `kind` r (a usable report) or q
# (quarantined). The report's own fields ride on its first row only (`rep`), so that one pass
# writes reports and observations without a row of its own for each report; a report with no
# observation (all unchecked) still has that one row, with `o` false. `concerns` holds, on an
# observation, the findings of its report about that endpoint (`concerning`), in the report's words.
CONCERN = T.StructType([T.StructField(n, T.StringType()) for n in ("code", "severity", "message", "fix")])
FLAT = T.StructType([
    T.StructField("kind", T.StringType()), T.StructField("d", T.StringType()),
    T.StructField("seq", T.LongType()), T.StructField("h", T.LongType()), T.StructField("rid", T.LongType()),
    T.StructField("ts", T.TimestampType()), T.StructField("day", T.DateType()),
    T.StructField("cluster_id", T.StringType()), T.StructField("vantage", T.StringType()),
    T.StructField("rep", T.BooleanType()), T.StructField("o", T.BooleanType()),
    T.StructField("node_id", T.LongType()), T.StructField("host", T.StringType()), T.StructField("port", T.LongType()),
    T.StructField("failure", T.StringType()), T.StructField("dns_ms", T.DoubleType()),
    T.StructField("tcp_ms", T.DoubleType()),
    T.StructField("file", T.StringType()), T.StructField("report_id", T.StringType()),
    T.StructField("status", T.StringType()), T.StructField("n_adv", T.IntegerType()),
    T.StructField("n_reach", T.IntegerType()),
    T.StructField("findings", prune(report_schema()["findings"].dataType, KEPT_FINDING)),
    T.StructField("concerns", T.ArrayType(CONCERN)),
    T.StructField("bootstraps", prune(report_schema()["bootstraps"].dataType, READ["bootstraps"])),
    T.StructField("reason", T.StringType()), T.StructField("record", T.StringType()),
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


def _failure(e: Column) -> Column:
    """An endpoint's failure class, or null for a success.

    A success is what a client connects to (`CLIENTS_CONNECT`: `degraded` is one, in no class) with a
    trusted TLS handshake and the right broker; `partial` is a failure of class `partial`, a gap as in
    the probe. `unchecked` gets no class here and is no observation (`o`).
    """
    tcp_statuses = e["tcp"]["status"]
    return (
        F.when(e["status"] == "unresolvable", F.lit("dns"))
        .when((e["status"] == "unreachable") & F.array_contains(tcp_statuses, "timeout"), F.lit("timeout"))
        .when((e["status"] == "unreachable") & (F.size(F.array_distinct(tcp_statuses)) == 1)
              & F.array_contains(tcp_statuses, "refused"), F.lit("refused"))
        .when(e["status"] == "unreachable", F.lit("unreachable"))
        .when(e["tls"]["status"].isin(*TLS_FAILURES), F.lit("tls"))
        .when(e["identity"]["status"].isin(*IDENTITY_FAILURES), F.lit("identity"))
        .when(~e["status"].isin(*CLIENTS_CONNECT, "unchecked"), F.lit("partial"))
    )


def _tcp_ms(e: Column) -> Column:
    """The fastest successful connect to an endpoint's addresses (one address: no lambda, which Spark interprets)."""
    tcp = e["tcp"]
    one = F.try_element_at(tcp, F.lit(1))
    return (F.when(F.size(tcp) == 1, F.when(one["status"] == "ok", one["ms"]))
            .when(F.size(tcp) > 1, F.array_min(F.transform(F.filter(tcp, lambda t: t["status"] == "ok"),
                                                           lambda t: t["ms"]))))


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

    Why positions and plain expressions rather than `transform` over the endpoints: Spark
    interprets lambdas row by row, while these compile; on a million observations that was
    most of the pass.
    """
    ids = F.col("r.bootstraps.cluster_id")
    # The first bootstrap's cluster id that is known (get() of a filter, for the rare report with
    # more than three bootstraps; a lambda Spark would otherwise run on every report).
    found = (F.when(F.size("r.bootstraps") <= 3, F.coalesce(*[F.try_element_at(ids, F.lit(i)) for i in (1, 2, 3)]))
             .otherwise(F.expr("get(filter(r.bootstraps, b -> b.cluster_id is not null), 0).cluster_id")))
    boot_key = F.concat(F.lit("bootstrap:"), F.array_join(F.sort_array("r.bootstraps.address"), ","))
    usable = F.col("reason").isNull()
    endpoint_type = read_schema()["endpoints"].dataType
    address = r"^\[?(.*?)\]?:(\d+)$"
    # Bootstraps standing in for endpoints (rare): endpoint-shaped, their status marked `boot:`.
    boots = F.transform("r.bootstraps", lambda x: F.struct(
        F.lit(BOOTSTRAP_NODE).cast("long").alias("node_id"), F.regexp_extract(x["address"], address, 1).alias("host"),
        F.regexp_extract(x["address"], address, 2).cast("long").alias("port"),
        F.concat(F.lit(BOOT), x["status"]).alias("status"),
        F.struct(F.lit(None).cast("string").alias("status"), F.lit(None).cast("double").alias("ms")).alias("dns"),
        F.array(F.struct(F.lit("ok").alias("status"), x["ms"].alias("ms"))).alias("tcp"),
        F.struct(F.lit(None).cast("string").alias("status")).alias("tls"),
        F.struct(F.lit(None).cast("string").alias("status")).alias("identity"))).cast(endpoint_type)
    base = records.select(
        F.when(usable, found).alias("found"), F.when(usable, F.to_timestamp("r.started_at")).alias("ts"),
        F.monotonically_increasing_id().alias("seq"), F.xxhash64("line").alias("h"), "file", "reason",
        F.when(~usable, F.substring("line", 1, 10_000)).alias("record"),
        F.when(usable, F.xxhash64("r.id")).alias("rid"),
        F.col("r.vantage.name").alias("vantage"), F.col("r.id").alias("report_id"),
        F.col("r.summary.status").alias("status"), F.size("r.endpoints").alias("n_adv"),
        # Counted without a lambda (Spark interprets those row by row; these compile): those a
        # client connects to (CLIENTS_CONNECT, as the report's summary.reachable) are what array_remove takes away.
        (F.size("r.endpoints.status") - F.size(_without("r.endpoints.status", CLIENTS_CONNECT))).alias("n_reach"),
        # Kept as parsed: the findings' weights and the advertised addresses are worked out per
        # day in `day_rollups`, on the few columns read back, not here on every parsed report.
        F.col("r.findings").alias("findings"), F.col("r.bootstraps").alias("bootstraps"),
        F.when(~usable, F.array().cast(endpoint_type)).when(F.col("found").isNull(), boots)
        .otherwise(F.col("r.endpoints")).alias("slots"),
        F.when(usable, F.coalesce(found, boot_key, F.lit("unknown"))).alias("cluster_id"),
    )
    rows = base.select("*", F.posexplode_outer("slots").alias("i", "e")).drop("slots")
    e = F.col("e")
    boot = e["status"].startswith(BOOT)
    first = F.col("i").isNull() | (F.col("i") == 0)
    observed = usable & e.isNotNull() & (e["status"] != "unchecked") & (e["status"] != BOOT + "unchecked")
    on_first = ("file", "report_id", "status", "n_adv", "n_reach", "bootstraps")
    findings = F.col("findings")
    kept_finding = FLAT["findings"].dataType
    columns = {
        # By position (arrays_zip, then a cast that names the fields): no lambda on every report.
        "findings": F.when(first, F.arrays_zip(*[findings[k] for k in KEPT_FINDING]).cast(kept_finding)),
        "concerns": F.when(observed & (F.size(findings) > 0),
                           concerning(findings, e["node_id"], e["host"], e["port"], boot)),
        "kind": F.when(usable, F.lit("r")).otherwise(F.lit("q")),
        "d": F.when(usable, F.date_format("ts", "yyyy-MM-dd")).otherwise(F.lit(QUARANTINE_DAY)),
        "day": F.to_date("ts"),
        "rep": usable & first,
        "o": observed,
        "node_id": e["node_id"], "host": e["host"], "port": e["port"],
        "failure": F.when(boot, _bootstrap_failure(F.substring(e["status"], len(BOOT) + 1, 100)))
        .otherwise(_failure(e)),
        "dns_ms": e["dns"]["ms"],
        "tcp_ms": _tcp_ms(e),
        **{k: F.when(first, F.col(k)) for k in on_first},
    }
    return rows.select(*[(columns[f.name] if f.name in columns else F.col(f.name)).cast(f.dataType).alias(f.name)
                         for f in FLAT.fields])


def clustered(flat: DataFrame) -> DataFrame:
    """FLAT rows with each task's rows in order of cluster and vantage, then endpoint, as the state keeps them.

    Why: the rollups aggregate by endpoint (or by cluster and vantage) in hash tables that at 10M
    observations hold hundreds of thousands of groups (a bucket per 2 % of latency, per endpoint
    and day). Rows as reports come, every vantage and cluster interleaved, land on a random group
    each, a cache miss each; an endpoint's rows together hit the same few. The order is one number
    (its halves hashes of the two keys: only rows of equal keys need to meet), so Spark sorts it by
    radix, without comparing strings. Nothing depends on the order but speed.
    """
    pair = F.xxhash64("cluster_id", "vantage")
    endpoint = F.xxhash64("node_id", "host", "port")
    return flat.sortWithinPartitions(F.shiftleft(pair, 32).bitwiseOR(endpoint.bitwiseAND(F.lit(0xFFFFFFFF))))


def hostport(host: Column, port: Column) -> Column:
    """`host:port` as reports write an endpoint (`kprobe.hostport.format_hostport`: an IPv6 literal bracketed)."""
    port = port.cast("string")
    return (F.when(host.contains(":") & ~host.startswith("["), F.concat(F.lit("["), host, F.lit("]:"), port))
            .otherwise(F.concat(host, F.lit(":"), port)))


def concerning(findings: Column, node_id: Column, host: Column, port: Column, boot: Column) -> Column:
    """The findings (code, severity, message, fix) of a report that concern one of its endpoints.

    The rule of `models.Finding.concerns`, which `kprobe show` and the terminal go by: the
    endpoint's `host:port` is in the finding's `endpoints` (or is its `endpoint`, in reports from
    before the list) and its node is in `node_ids` (or is `node_id`), or the finding names no node.
    A bootstrap standing in for endpoints (`flat_records`: no bootstrap answered) is concerned by the
    findings about that bootstrap (`bootstrap`, and no endpoint). Spark interprets these lambdas,
    so they run only on reports with findings, which are few.
    """
    at = hostport(host, port)

    def concerns(f: Column) -> Column:
        ends = F.when(F.size(f["endpoints"]) > 0, f["endpoints"]).when(f["endpoint"].isNotNull(),
                                                                         F.array(f["endpoint"]))
        nodes = F.when(F.size(f["node_ids"]) > 0, f["node_ids"]).when(f["node_id"].isNotNull(),
                                                                       F.array(f["node_id"]))
        advertised = F.array_contains(ends, at) & (nodes.isNull() | F.array_contains(nodes, node_id))
        of_bootstrap = (f["bootstrap"] == at) & ends.isNull()
        return F.coalesce(F.when(boot, of_bootstrap).otherwise(advertised), F.lit(False))

    return F.transform(F.filter(findings, concerns), lambda f: F.struct(
        *[f[k].cast("string").alias(k) for k in CONCERN.names]))


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
            .where(F.col("win_run").isNull()
                   | ((F.col("run") == F.col("win_run")) & (F.col("seq") == F.col("win_seq"))))
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


def _without(column: str, values: tuple[str, ...]) -> Column:
    """An array column without any of `values` (array_remove per value: compiled, no lambda)."""
    out = F.col(column)
    for value in values:
        out = F.array_remove(out, value)
    return out


def _success() -> Column:
    """An observation a client succeeds at: no failure class (`_failure` puts every gap, `partial` too, in one)."""
    return F.col("failure").isNull()


def _bucket(ms: Column) -> Column:
    return F.when(ms <= 0, F.lit(ZERO_BUCKET)).otherwise(F.ceil(F.log(ms) * BUCKETS_PER_E).cast("int"))


def _held(df: DataFrame, held: list[DataFrame] | None) -> DataFrame:
    """`df` cached and listed in `held` (the caller unpersists it), or as it is when there is no `held`."""
    if held is None:
        return df
    held.append(df.cache())
    return held[-1]


def day_rollups(rows: DataFrame, one_task: bool = False, held: list[DataFrame] | None = None) -> DataFrame:
    """Kept FLAT rows -> per-day partial aggregates, one table, `t` telling them apart.

    t = ev (per endpoint and vantage: counts, failure classes, maxima, first and last
    observation, status changes within the day), h (latency histogram buckets), hr (per cluster,
    vantage and hour), cs (per cluster and vantage: reports, last good and bad, latest report),
    f (findings), fe (findings per endpoint, in their words), adv (a bootstrap's first and last
    advertised address of a node) and chg (changes of it within the day). Each merges across days
    in the functions below.

    `one_task`: the rows are in one partition (a small increment: ingest.ONE_TASK_BELOW). Over many
    rows, the status changes, the latest report and the advertised addresses are each found by a
    small aggregation first and a broadcast lookup into the rows, which spares sorting every row (or
    aggregating a struct, which Spark does by sorting); in one task each of those lookups is a Spark
    job of its own, a fixed cost in a new driver, and sorting a few thousand rows costs nothing. There
    the rows are aggregated directly: the same rows come out (tests/test_aggregate.py compares them).

    `held`: spread, the aggregations those lookups are made from (per endpoint, per cluster and
    vantage, per address seen) are read by two or three parts each, and Spark computes each again for
    every reader (it keeps only the columns that reader needs, so their plans differ and no shuffle is
    reused), reading and aggregating every row again. With a list, they are cached and appended to it,
    computed once, as are the few advertised-address rows that two parts look up; the caller unpersists
    them once the rollups are written (with the histograms made per metric, the rollup of 10M
    observations 36 s instead of 48 s, docs/performance.md).
    """
    day = ("d", "day")
    reps = rows.where("rep")
    obs = rows.where("o")
    ob = obs.select(*KEYS, *day, "ts", "rid", "failure", "dns_ms", "tcp_ms", _success().alias("ok"))
    counts = [
        F.count(F.lit(1)).alias("probes"), F.sum(F.col("ok").cast("long")).alias("successes"),
        *[F.sum(F.when(F.col("failure") == name, 1).otherwise(0).cast("long")).alias(f"fail_{name}")
          for name in FAILURE_CLASSES],
        F.max("dns_ms").alias("dns_max_ms"), F.max("tcp_ms").alias("tcp_max_ms"),
        F.min(_status_key()).alias("first_key"), F.max(_status_key()).alias("last_key"),
    ]
    # Ordered as first_key and last_key order them (a tie in time: successes first), so that a day
    # rolled up in segments (see `endpoint_vantage`) counts the same changes as the whole day.
    w = Window.partitionBy(*KEYS, *day).orderBy(_status_key(), "rid")
    flips = F.sum((F.col("prev").isNotNull() & (F.col("prev") != F.col("ok"))).cast("long")).alias("changes")
    if one_task:
        ev = ob.withColumn("prev", F.lag("ok").over(w)).groupBy(*KEYS, *day).agg(*counts, flips)
    else:
        # Status changes need the day's observations in order, but only where both outcomes occur:
        # an endpoint always reachable (or never) that day changed 0 times, and is not sorted.
        ev = _held(ob.groupBy(*KEYS, *day).agg(*counts), held)
        mixed = ev.where((F.col("successes") > 0) & (F.col("successes") < F.col("probes"))).select(*KEYS, *day)
        changed = (ob.join(F.broadcast(mixed), [*KEYS, *day], "semi").withColumn("prev", F.lag("ok").over(w))
                   .groupBy(*KEYS, *day).agg(flips))
        ev = ev.join(changed, [*KEYS, *day], "left").withColumn("changes", F.coalesce("changes", F.lit(0)))
    ev = (ev.withColumn("first_ts", _key_ts("first_key")).withColumn("last_ts", _key_ts("last_key"))
          .withColumn("t", F.lit("ev")))
    # One aggregation per metric, not one of the rows exploded into a (metric, ms) pair each: the
    # same groups (the largest rollup, a bucket per 2 % of latency), without building twice the rows.
    hist = [ob.where(F.col(f"{m}_ms").isNotNull()).groupBy(*KEYS, *day, _bucket(F.col(f"{m}_ms")).alias("b"))
            .agg(F.count(F.lit(1)).alias("n"), F.max(f"{m}_ms").alias("hi"))
            .select(*KEYS, *day, F.lit(m).alias("metric"), "b", "n", "hi", F.lit("h").alias("t"))
            for m in ("dns", "tcp")]
    hourly = (ob.groupBy("cluster_id", "vantage", *day, F.date_trunc("hour", "ts").alias("hour"))
              .agg(F.count(F.lit(1)).alias("probes"), F.sum(F.col("ok").cast("long")).alias("successes"))
              .withColumn("t", F.lit("hr")))
    pair = ["cluster_id", "vantage", *day]
    reports = [F.count(F.lit(1)).alias("reports"),
               F.max(F.when(F.col("status") == "ok", F.col("ts"))).alias("last_good"),
               F.max(F.when(F.col("status") != "ok", F.col("ts"))).alias("last_bad")]
    # The latest report's picture: of the reports at the latest time (one, but for a tie), the largest hash.
    if one_task:
        cs = (reps.groupBy(*pair).agg(*reports, F.max(F.struct("ts", "rid", "n_adv", "n_reach", "status")).alias("l"))
              .select(*pair, "reports", "last_good", "last_bad", F.col("l.ts").alias("last_ts"),
                      F.col("l.rid").alias("last_rid"), F.col("l.n_adv").alias("n_adv"),
                      F.col("l.n_reach").alias("n_reach"), F.col("l.status").alias("last_report_status")))
    else:
        cs = _held(reps.groupBy(*pair).agg(*reports, F.max("ts").alias("last_ts")), held)
        latest = (reps.join(F.broadcast(cs.select(*pair, F.col("last_ts").alias("ts"))), [*pair, "ts"], "semi")
                  .groupBy(*pair).agg(F.max(F.struct("rid", "n_adv", "n_reach", "status")).alias("l")))
        cs = (cs.join(latest, pair, "left")
              .select("*", F.col("l.rid").alias("last_rid"), F.col("l.n_adv").alias("n_adv"),
                      F.col("l.n_reach").alias("n_reach"), F.col("l.status").alias("last_report_status"))
              .drop("l"))
    cs = cs.withColumn("t", F.lit("cs"))
    # A finding stands for every endpoint it concerns (findings[].endpoints, since findings were
    # merged across endpoints): `occurrences` counts one per endpoint (at least one per finding),
    # comparable with reports that wrote one finding per endpoint; `findings` counts them as written.
    f = F.col("f")
    weight = F.when(f["endpoints"].isNull() | (F.size(f["endpoints"]) < 1), F.lit(1)).otherwise(F.size(f["endpoints"]))
    found = (reps.select("cluster_id", "vantage", *day, F.explode("findings").alias("f"))
             .groupBy("cluster_id", "vantage", *day, f["code"].alias("code"), f["severity"].alias("severity"))
             .agg(F.sum(weight).cast("long").alias("occurrences"), F.count(F.lit(1)).alias("findings"))
             .withColumn("t", F.lit("f")))
    # Per endpoint, vantage and code: the findings about that endpoint (see `concerning`), with the
    # report's words of the latest (a tie in time: the larger report hash, the same in every run).
    c = F.col("c")
    said = obs.select(*KEYS, *day, "ts", "rid", F.explode("concerns").alias("c"))
    code: list[str | Column] = [*KEYS, *day, c["code"].alias("code"), c["severity"].alias("severity")]
    if one_task:
        own = said.groupBy(*code).agg(
            F.count(F.lit(1)).alias("occurrences"), F.min("ts").alias("first_ts"),
            F.max(F.struct("ts", "rid", c["message"].alias("message"), c["fix"].alias("fix"))).alias("z"))
    else:
        # A struct holding text is aggregated by sorting every finding. The words repeat from report to
        # report (a finding names the configuration, not a measurement), so they are keys of a hash
        # aggregation instead, with the latest (time, report hash) as one number (`_latest`); then a few
        # rows per code pick the latest words (at 10M observations 3.3 s instead of 5.2 s).
        words = (said.groupBy(*code, c["message"].alias("message"), c["fix"].alias("fix"))
                 .agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("first_ts"), F.max("ts").alias("ts"),
                      F.max(_latest()).alias("at")))
        own = (words.groupBy(*KEYS, *day, "code", "severity")
               .agg(F.sum("n").alias("occurrences"), F.min("first_ts").alias("first_ts"),
                    F.max(F.struct("at", "ts", "message", "fix")).alias("w"))
               .select("*", F.struct("w.ts", _rid_of(F.col("w.at")).alias("rid"), "w.message", "w.fix").alias("z")))
    own = (own.select(*KEYS, *day, "code", "severity", "occurrences", "first_ts", F.col("z.ts").alias("last_ts"),
                      F.col("z.rid").alias("last_rid"), "z.message", "z.fix")
           .withColumn("t", F.lit("fe")))
    boots = (reps.select("cluster_id", "vantage", *day, "ts", "rid", "report_id", F.explode("bootstraps").alias("b"))
             .where(F.col("b.status") == "ok"))
    brokers = boots.select("cluster_id", "vantage", *day, "ts", "rid", "report_id",
                           F.col("b.address").alias("bootstrap"), F.explode("b.brokers").alias("x")).select(
        "cluster_id", "vantage", *day, "ts", "rid", "report_id", "bootstrap", F.col("x.node_id").alias("node_id"),
        F.concat_ws(":", "x.host", F.col("x.port").cast("string")).alias("advertised"))
    # Ordered as `ends` orders them (a tie in time by address), so that segments of a day meet as the whole day does.
    order = Window.partitionBy(*ADV_KEYS, *day).orderBy("ts", "advertised", "report_id")
    if one_task:
        # The first address with the first report that gave it (named if a change is found where this
        # rollup meets the one before it: across midnight, or a segment of the same day), and the last.
        ends = (brokers.groupBy(*ADV_KEYS, *day).agg(F.min(F.struct("ts", "advertised", "report_id")).alias("a"),
                                                      F.max(F.struct("ts", "advertised")).alias("z"))
                .select(*ADV_KEYS, *day, F.col("a.ts").alias("first_ts"), F.col("a.advertised").alias("first_adv"),
                        F.col("z.ts").alias("last_ts"), F.col("z.advertised").alias("last_adv"),
                        F.col("a.report_id").alias("report_id")))
        moving = brokers  # a node with one address that day has no change: none is found
    else:
        # Per address seen: when first and last. One address a day (the rule) has no change inside the
        # day, and needs no ordering of its reports; only days with several are ordered.
        spans = brokers.groupBy(*ADV_KEYS, *day, "advertised").agg(F.min("ts").alias("a_ts"), F.max("ts").alias("z_ts"))
        ends = _held(spans.groupBy(*ADV_KEYS, *day).agg(  # small: one row per address seen
            F.min(F.struct("a_ts", "advertised")).alias("a"), F.max(F.struct("z_ts", "advertised")).alias("z"),
            F.count(F.lit(1)).alias("addresses")), held)
        ends = ends.select(*ADV_KEYS, *day, F.col("a.a_ts").alias("first_ts"), F.col("a.advertised").alias("first_adv"),
                           F.col("z.z_ts").alias("last_ts"), F.col("z.advertised").alias("last_adv"),
                           (F.col("addresses") > 1).alias("moved"))
        # What is read of the rows again, in one pass (held): the rows with the first address at its first
        # time, and every row of a day with a change (few: a node keeps its address).
        at_first = (F.col("ts") == F.col("first_ts")) & (F.col("advertised") == F.col("first_adv"))
        near = _held(brokers.join(F.broadcast(ends.select(*ADV_KEYS, *day, "first_ts", "first_adv", "moved")),
                                  [*ADV_KEYS, *day]).where(F.col("moved") | at_first), held)
        moving = near.where("moved").select(*brokers.columns)
        # The first report with the first address, first as `order` has it.
        firsts = near.where(at_first).groupBy(*ADV_KEYS, *day).agg(F.min("report_id").alias("report_id"))
        ends = ends.drop("moved").join(firsts, [*ADV_KEYS, *day], "left")
    ends = ends.withColumn("t", F.lit("adv"))
    changes = (moving.withColumn("previous", F.lag("advertised").over(order))
               .where(F.col("previous").isNotNull() & (F.col("previous") != F.col("advertised")))
               .select(*ADV_KEYS, *day, "previous", F.col("advertised").alias("current"),
                       F.col("ts").alias("changed_at"), "report_id").withColumn("t", F.lit("chg")))
    out = ev
    for part in (*hist, hourly, cs, found, own, changes, ends):
        out = out.unionByName(part, allowMissingColumns=True)
    return out


STATUSES = ("ok", *FAILURE_CLASSES)


def _decimal(n: int) -> Column:
    """A whole number past a long as a literal (a Python int this large does not pass to the JVM)."""
    return F.lit(str(n)).cast("decimal(38,0)")


def _latest() -> Column:
    """An observation's time and report hash as one number, ordered as (ts, rid): microseconds * 2**64 + rid + 2**63.

    Why a decimal: a maximum of it is a hash aggregation, where one of struct("ts", "rid") is a sort,
    and the two need up to 123 bits (a long holds 64, a decimal(38,0) 126): exact for any time Spark holds.
    """
    return (F.unix_micros("ts").cast("decimal(38,0)") * _decimal(2 ** 64)
            + (F.col("rid").cast("decimal(38,0)") + _decimal(2 ** 63)))


def _rid_of(latest: Column) -> Column:
    """The report hash back out of `_latest`."""
    return (F.pmod(latest, _decimal(2 ** 64)) - _decimal(2 ** 63)).cast("long")


def _status_key() -> Column:
    """An observation's time and outcome in one long, ts in microseconds * 16 + the outcome's index.

    Why: the first and last outcome of a day are then a min and a max of a number, which Spark
    aggregates in a hash table; a min of a struct would sort every observation. Two outcomes at
    the same microsecond are ordered by outcome, the same way in every run.
    """
    index = F.lit(0)
    for i, name in enumerate(FAILURE_CLASSES, start=1):
        index = F.when(F.col("failure") == name, F.lit(i)).otherwise(index)
    return F.unix_micros("ts") * 16 + index


def _key_ts(key: str) -> Column:
    return F.timestamp_micros(F.floor(F.col(key) / 16).cast("long"))


def _key_status(key: str) -> Column:
    return F.element_at(F.array(*[F.lit(s) for s in STATUSES]), (F.col(key) % 16 + 1).cast("int"))


def _key_ok(key: str) -> Column:
    return _key_status(key) == "ok"  # as `_success`: every failure class, `partial` too, is not ok


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
    # A day may be rolled up in segments that follow one another in time (job._roll_up): each
    # segment meets the next as one day meets the next.
    by_day = Window.partitionBy(*KEYS).orderBy("day", "first_ts")
    crossed = F.lag(_key_ok("last_key")).over(by_day)
    ev = ev.withColumn("crossed", (crossed.isNotNull() & (crossed != _key_ok("first_key"))).cast("long"))
    out = ev.groupBy(*KEYS).agg(
        F.sum("probes").alias("probes"), F.sum("successes").alias("successes"),
        *[F.sum(f"fail_{name}").alias(f"fail_{name}") for name in FAILURE_CLASSES],
        F.max("dns_max_ms").alias("dns_max_ms"), F.max("tcp_max_ms").alias("tcp_max_ms"),
        F.min("first_ts").alias("first_seen"), F.max("last_ts").alias("last_seen"),
        F.max("last_key").alias("last_key"),
        (F.sum("changes") + F.sum("crossed")).alias("status_changes"),
    ).join(percentiles(rollups), list(KEYS), "left")
    out = out.withColumn("success_rate", F.col("successes") / F.col("probes")).withColumn("last_status",
                                                                                           _key_status("last_key"))
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


def minutely(rows: DataFrame) -> DataFrame:
    """Kept FLAT rows -> per cluster, vantage and minute: probes and successes.

    Not an output and not kept in the state: the job computes it for the page only when all the
    data fall within an hour or two (`job._minutely`), so that an incident of an hour is drawn in
    minutes; over days, `hourly` is as fine as a plot can show.
    """
    return (rows.where("o").groupBy("cluster_id", "vantage", F.date_trunc("minute", "ts").alias("minute"))
            .agg(F.count(F.lit(1)).alias("probes"), F.sum(_success().cast("long")).alias("successes")))


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
