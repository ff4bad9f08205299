"""Parsed records -> the flat rows the job keeps (`FLAT`), one pass over every record.

Every input record becomes flat typed rows: one per quarantined record, one per usable report, one
per endpoint observation. Those rows are what the job keeps (its state, partitioned by day), so a
later run parses only new records; the rollups (kprobe.aggregate.rollups) read them, never the
reports again. No I/O and no SparkSession here.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kprobe.aggregate.schema import KEPT_FINDING, READ, prune, read_schema, report_schema
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
QUARANTINE_DAY = "none"  # the `d` partition of quarantined records, which have no usable time
BOOT = "boot:"  # marks a bootstrap standing in for endpoints in flat_records

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


def _without(column: str, values: tuple[str, ...]) -> Column:
    """An array column without any of `values` (array_remove per value: compiled, no lambda)."""
    out = F.col(column)
    for value in values:
        out = F.array_remove(out, value)
    return out


def success() -> Column:
    """An observation a client succeeds at: no failure class (`_failure` puts every gap, `partial` too, in one)."""
    return F.col("failure").isNull()


def flat_records(records: DataFrame) -> DataFrame:
    """Parsed records (`file`, `line`, `r`, `reason`) -> FLAT rows, in one pass.

    Each record gets `seq` (unique within the pass) and `h`, a hash of its text: together with the
    run that read it they tell copies of one report apart (see `dedupe.only_kept_copies`). An endpoint that a run's
    deadline (or Ctrl-C) cut short is `unchecked`: nothing was seen of it, so it is no
    observation at all, neither a success nor a failure.

    A report whose bootstraps all failed has no cluster id and no advertised endpoints. It is the
    worst gap of all (the vantage cannot reach the cluster at all), so it is keyed by its
    bootstrap addresses and each bootstrap becomes an observation (node BOOTSTRAP_NODE), instead
    of the report vanishing from the outputs.

    Why positions and plain expressions rather than `transform` over the endpoints: Spark
    interprets lambdas row by row, while these compile, and this projection runs on every record.
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

    Why: the rollups aggregate by endpoint (or by cluster and vantage) in hash tables that hold
    many groups over large inputs (a bucket per 2 % of latency, per endpoint and day). Rows as
    reports come, every vantage and cluster interleaved, land on a random group each, a cache miss
    each; an endpoint's rows together hit the same few. The order is one number
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
