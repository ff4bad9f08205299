"""The aggregation's speed, as ratios measured side by side in one run.

    .venv/bin/pip install -e '.[bench]'   # duckdb: the single-machine reference (never a product dependency)
    python bench/bench_aggregate.py [--sizes 1000000,4000000] [--repeat 3] [--work /tmp/kprobe-bench] [--drop-inputs]

For each size (endpoint observations; 3 per report, 20 vantages x 10 clusters of 3 brokers, one
report per vantage and cluster a minute), `--repeat` times, in this order:

- Spark's parsing scan of the input: `spark.read.schema(S).json(path)` summing the endpoint
  arrays' sizes, which forces the parse a job cannot avoid (a bare `count()` parses nothing);
- the whole job, from scratch (`--full`, html off: every output, Parquet and JSON, and its state);
- the parsing scan again (the job is compared with the mean of the scans on either side of it,
  so that a load change on a shared machine moves both);
- the incremental run: the same input plus 1% new reports (the next 1% of the period), which
  reads only the new files and rolls up only the days they fall on;
- DuckDB computing the endpoint_vantage table from the same files (dedupe by report id, counts,
  success rate, failure classes, first/last seen, exact DNS and TCP percentiles, status changes).

Medians over the repeats are printed as a Markdown table. The growth exponent is the slope of
log(time) against log(size) of the whole job.

With `--processes`, every figure is a whole process, as a scheduler runs the job:

    python bench/bench_aggregate.py --processes [--sizes 1000000] [--repeat 3]

- the parsing scan: a process that starts a Spark session and does the scan above;
- the first `kprobe aggregate` (html off) into a new --out;
- the rerun with 1% new reports (a separate process, the state kept in --out), twice: with
  `--keep-warm` (the first run, started with it too, left a warm driver that runs it:
  kprobe.aggregate.warm) and without, in a driver of its own, on a copy of the first run's output;
- its peer, a bare Spark process doing that rerun's reading and writing (`bare_process`);
- the run after it, with nothing new (no JVM: kprobe.aggregate.plan);

side by side in each round, medians of the rounds. The warm driver is stopped at the end of each
round (its sockets under a directory of the bench's own), so each round's first run starts cold.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kprobe.aggregate.generate import START, reports, write_jsonl
from kprobe.aggregate.schema import report_schema
from kprobe.aggregate.state import STATE_NAME

VANTAGES, CLUSTERS = 20, 10

DUCKDB_COLUMNS = {
    "id": "VARCHAR", "started_at": "TIMESTAMP", "vantage": "STRUCT(name VARCHAR)",
    "bootstraps": "STRUCT(cluster_id VARCHAR)[]",
    "endpoints": "STRUCT(node_id BIGINT, host VARCHAR, port BIGINT, status VARCHAR, dns STRUCT(ms DOUBLE), "
                 "tcp STRUCT(status VARCHAR, ms DOUBLE)[], tls STRUCT(status VARCHAR), "
                 "identity STRUCT(status VARCHAR))[]",
}

DUCKDB_QUERY = """
WITH r AS (SELECT * FROM read_json({paths}, format = 'newline_delimited', columns = {columns})),
d AS (SELECT * FROM r QUALIFY row_number() OVER (PARTITION BY id ORDER BY started_at) = 1),
o AS (SELECT coalesce(list_filter(bootstraps, lambda b: b.cluster_id IS NOT NULL)[1].cluster_id, 'unknown')
                 AS cluster_id, vantage.name AS vantage, started_at AS ts, id, unnest(endpoints) AS e FROM d),
f AS (SELECT cluster_id, e.node_id AS node_id, e.host AS host, e.port AS port, vantage, ts, id,
             CASE WHEN e.status = 'unresolvable' THEN 'dns'
                  WHEN e.status = 'unreachable' AND list_contains(list_transform(e.tcp, lambda t: t.status), 'timeout')
                       THEN 'timeout'
                  WHEN e.status = 'unreachable' AND list_unique(list_transform(e.tcp, lambda t: t.status)) = 1
                       AND list_contains(list_transform(e.tcp, lambda t: t.status), 'refused') THEN 'refused'
                  WHEN e.status = 'unreachable' THEN 'unreachable'
                  WHEN e.tls.status IN ('untrusted', 'hostname_mismatch', 'handshake_failed') THEN 'tls'
                  WHEN e.identity.status IN ('mismatch', 'not_kafka', 'silent') THEN 'identity'
                  WHEN e.status IN ('partial', 'degraded') THEN 'partial' END AS failure,
             e.dns.ms AS dns_ms,
             list_min(list_transform(list_filter(e.tcp, lambda t: t.status = 'ok'), lambda t: t.ms)) AS tcp_ms
      FROM o WHERE e.status <> 'unchecked'),
g AS (SELECT *, failure IS NULL OR failure = 'partial' AS ok FROM f),
w AS (SELECT *, lag(ok) OVER (PARTITION BY cluster_id, node_id, host, port, vantage ORDER BY ts, id) AS prev FROM g)
SELECT cluster_id, node_id, host, port, vantage, count(*) AS probes, sum(ok::INT) AS successes,
       sum(ok::INT) / count(*) AS success_rate,
       count(*) FILTER (failure = 'dns') AS fail_dns, count(*) FILTER (failure = 'refused') AS fail_refused,
       count(*) FILTER (failure = 'timeout') AS fail_timeout,
       count(*) FILTER (failure = 'unreachable') AS fail_unreachable,
       quantile_disc(dns_ms, 0.5) AS dns_p50_ms, quantile_disc(dns_ms, 0.95) AS dns_p95_ms, max(dns_ms) AS dns_max_ms,
       quantile_disc(tcp_ms, 0.5) AS tcp_p50_ms, quantile_disc(tcp_ms, 0.95) AS tcp_p95_ms, max(tcp_ms) AS tcp_max_ms,
       min(ts) AS first_seen, max(ts) AS last_seen, arg_max(coalesce(failure, 'ok'), ts) AS last_status,
       sum((prev IS NOT NULL AND prev <> ok)::INT) AS status_changes
FROM w GROUP BY ALL
"""


def duckdb_endpoint_vantage(paths: list[Path]) -> tuple[float, int]:
    """Seconds DuckDB takes for the endpoint_vantage table from these JSON Lines directories, and its rows."""
    import duckdb

    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in DUCKDB_COLUMNS.items()) + "}"
    files = "[" + ", ".join(f"'{p}/*.jsonl'" for p in paths) + "]"
    started = time.perf_counter()
    with duckdb.connect() as db:
        rows = db.sql(DUCKDB_QUERY.format(paths=files, columns=columns)).fetchall()
    return time.perf_counter() - started, len(rows)


def parsing_scan(spark: Any, data: list[Path]) -> float:
    """Spark reading the same files with the same schema *and parsing every endpoint*.

    `count()` alone prunes every column, so Spark never parses a record; summing the endpoint
    arrays' sizes forces the parse a job cannot avoid, which is the floor that matters.
    """
    started = time.perf_counter()
    spark.read.schema(report_schema()).json([str(p) for p in data]).selectExpr("sum(size(endpoints))").collect()
    return time.perf_counter() - started


def prepare(work: Path, size: int) -> tuple[Path, Path]:
    """The input for `size` observations, and the 1% a later run adds (the period that follows)."""
    per_hour = VANTAGES * CLUSTERS * 60
    hours = size / 3 / per_hour
    base, more = work / f"in-{size}", work / f"in-{size}-more"
    if not base.exists():
        write_jsonl(base, reports(VANTAGES, CLUSTERS, hours))
    if not more.exists():
        later = START + dt.timedelta(hours=hours)
        # 1% of the reports, in whole minutes (one report per vantage and cluster a minute): at small
        # sizes a bare hours / 100 rounds down to fewer minutes than 1%.
        minutes = max(1, round(hours * 60 / 100))
        write_jsonl(more, reports(VANTAGES, CLUSTERS, minutes / 60, seed=8, start=later), per_file=5_000)
    return base, more


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _clean_up(args: argparse.Namespace, out: Path, base: Path, more: Path) -> None:
    """A size's output, and with --drop-inputs its inputs too: the next size needs the disk."""
    shutil.rmtree(out, ignore_errors=True)
    if args.drop_inputs:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(more, ignore_errors=True)


def timed(argv: list[str]) -> tuple[float, str]:
    """Seconds a whole process takes, and its standard output; a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout


def scan_process(path: Path) -> None:
    """The parsing scan as its own process (what `--processes` times): session start, then the scan."""
    from kprobe.aggregate.job import session

    spark = session("local[*]", app="kprobe-bench-scan")
    parsing_scan(spark, [path])
    spark.stop()


def bare_process(more: Path, state: Path) -> None:
    """The +1% rerun's peer, as its own process: what any Spark job doing that rerun's I/O pays in a new driver.

    The same light driver JVM (kprobe.aggregate.entry.LIGHT_BELOW) parses the new reports, writes their
    endpoints as Parquet, reads them back and aggregates them once into Parquet, then makes six small
    tables from the stored rollups, each written as Parquet and collected as JSON. The rerun does all of
    that and kprobe's own work besides: the ids against history, the order against the day's rollups,
    nine kinds of rollup, the merges of the outputs. What the rerun takes over this peer is that work.
    """
    import tempfile

    from pyspark.sql import functions as F

    from kprobe.aggregate.job import session

    spark = session("local[*]", app="kprobe-bench-bare", light=True)
    out = Path(tempfile.mkdtemp(prefix="kprobe-bench-bare-"))
    try:
        new = spark.read.schema(report_schema()).json(str(more))
        (new.select("id", F.col("vantage.name").alias("vantage"), "started_at", F.explode("endpoints").alias("e"))
         .select("id", "vantage", "started_at", "e.*").write.parquet(str(out / "records")))
        records = spark.read.parquet(str(out / "records"))
        records.groupBy("host", "port").agg(F.count(F.lit(1)).alias("n")).coalesce(1).write.parquet(str(out / "rollup"))
        rollups = spark.read.parquet(str(state / "rollups")).coalesce(1)
        for kind in ("ev", "h", "hr", "cs", "f", "fe"):
            table = rollups.where(F.col("t") == kind).groupBy("cluster_id", "vantage").agg(F.count(F.lit(1)).alias("n"))
            table.write.parquet(str(out / kind))
            spark.read.schema(table.schema).parquet(str(out / kind)).select(F.to_json(F.struct("*"))).collect()
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)


def stop_warm_drivers(runtime: Path) -> None:
    """The warm drivers whose sockets are under `runtime` stopped (SIGTERM: each stops its session), and waited for."""
    import os
    import signal

    def drivers() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
            except OSError:
                continue
            if b"kprobe.aggregate.warm" in args and any(a.startswith(str(runtime).encode()) for a in args):
                found.append(int(entry.name))
        return found

    for pid in drivers():
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while drivers() and time.monotonic() < deadline:
        time.sleep(0.2)


def processes(args: argparse.Namespace) -> None:
    """Scan, first run, +1% warm and cold, nothing new: each a separate process, side by side per round; medians."""
    import os
    import tempfile

    aggregate = [sys.executable, "-m", "kprobe", "aggregate", "--no-html"]
    warm = ["--keep-warm", "10m"]
    runtime = Path(tempfile.mkdtemp(prefix="kb-"))  # the bench's own warm drivers, stopped after each round
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    table = []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            base, more = prepare(args.work, size)
            out, cold = args.work / f"out-{size}", args.work / f"out-{size}-cold"
            runs: list[dict[str, float]] = []
            observations = 0
            for _ in range(args.repeat):
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(cold, ignore_errors=True)
                scan = timed([sys.executable, __file__, "--scan", str(base)])[0]
                first, text = timed([*aggregate, *warm, str(base), "--out", str(out)])
                observations = int(text.split(" endpoint observations")[0].rsplit("(", 1)[1].split()[-1])
                shutil.copytree(out, cold, symlinks=True)
                more_s, text = timed([*aggregate, *warm, str(base), str(more), "--out", str(out)])
                more_cold, cold_text = timed([*aggregate, str(base), str(more), "--out", str(cold)])
                assert cold_text == text.replace(str(out), str(cold)), (text, cold_text)
                bare = timed([sys.executable, __file__, "--bare", str(more), str(out / STATE_NAME)])[0]
                nothing, quiet = timed([*aggregate, str(base), str(more), "--out", str(out)])
                assert quiet.startswith("nothing new"), quiet
                stop_warm_drivers(runtime)
                runs.append({"scan": scan, "first": first, "more": more_s, "cold": more_cold, "bare": bare,
                             "nothing": nothing})
                print(f"{observations:,} observations: scan {scan:.1f} s, first run {first:.1f} s "
                      f"({first / scan:.2f} x scan), +1% {more_s:.1f} s warm ({more_s / first:.2f} of the first), "
                      f"{more_cold:.1f} s cold (its bare peer {bare:.1f} s), nothing new {nothing:.2f} s", flush=True)
            table.append((observations, _medians(runs)))
            shutil.rmtree(cold, ignore_errors=True)
            _clean_up(args, out, base, more)
    finally:
        stop_warm_drivers(runtime)
        shutil.rmtree(runtime, ignore_errors=True)
    print(f"\nmedians of {args.repeat} rounds, every figure a whole process:")
    print("| observations | parsing scan | first run | first / scan | +1% new, warm | +1% / first | +1% new, cold | "
          "bare +1% | cold / bare | nothing new |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for obs, m in table:
        print(f"| {obs:,} | {m['scan']:.1f} s | {m['first']:.1f} s | {m['first'] / m['scan']:.2f} "
              f"| {m['more']:.1f} s | {m['more'] / m['first']:.2f} | {m['cold']:.1f} s | {m['bare']:.1f} s "
              f"| {m['cold'] / m['bare']:.2f} | {m['nothing']:.2f} s |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000000,4000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench"))
    parser.add_argument("--drop-inputs", action="store_true", help="delete each size's input after measuring it")
    parser.add_argument("--no-duckdb", action="store_true")
    parser.add_argument("--processes", action="store_true", help="every figure a whole process")
    parser.add_argument("--scan", type=Path, help=argparse.SUPPRESS)  # one parsing scan, as its own process
    parser.add_argument("--bare", type=Path, nargs=2, help=argparse.SUPPRESS)  # the +1% peer: NEW_INPUT STATE
    args = parser.parse_args()
    if args.scan:
        scan_process(args.scan)
        return
    if args.bare:
        bare_process(*args.bare)
        return
    if args.processes:
        processes(args)
        return
    from kprobe.aggregate.job import JobOptions, run, session

    spark = session("local[*]", app="kprobe-bench")
    table = []
    for size in (int(s) for s in args.sizes.split(",")):
        base, more = prepare(args.work, size)
        out = args.work / f"out-{size}"
        runs: list[dict[str, float]] = []
        for _ in range(args.repeat):
            before = parsing_scan(spark, [base])
            started = time.perf_counter()
            result = run(spark, JobOptions((str(base),), str(out), html=False, full=True))
            job = time.perf_counter() - started
            after = parsing_scan(spark, [base])
            started = time.perf_counter()
            again = run(spark, JobOptions((str(base), str(more)), str(out), html=False))
            incremental = time.perf_counter() - started
            duck = duckdb_endpoint_vantage([base])[0] if not args.no_duckdb else math.nan
            scan = (before + after) / 2
            runs.append({"job": job, "scan": scan, "ratio": job / scan, "incremental": incremental,
                         "incr_ratio": incremental / job, "duckdb": duck})
            observations = result["counts"]["observations"]
            print(f"{observations:,} observations: job {job:.1f} s, parsing scan {before:.1f} / {after:.1f} s "
                  f"(job / scan {job / scan:.2f}), +1% ({again['counts']['new_records']:,} reports) "
                  f"{incremental:.1f} s ({incremental / job:.2f} of the job), DuckDB {duck:.1f} s", flush=True)
        table.append((observations, _medians(runs)))
        _clean_up(args, out, base, more)
    print(f"\nmedians of {args.repeat} runs:")
    print("| observations | whole job | parsing scan | job / parsing scan | incremental (+1%) | incremental / job "
          "| DuckDB, endpoint_vantage | observations/s (job) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for obs, m in table:
        print(f"| {obs:,} | {m['job']:.1f} s | {m['scan']:.1f} s | {m['ratio']:.2f} | {m['incremental']:.1f} s "
              f"| {m['incr_ratio']:.2f} | {m['duckdb']:.1f} s | {obs / m['job']:,.0f} |")
    if len(table) > 1:
        xs = [math.log(obs) for obs, _ in table]
        ys = [math.log(m["job"]) for _, m in table]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        print(f"\ngrowth exponent of the job's time: {slope:.2f} (1.0 = linear)")
    spark.stop()


if __name__ == "__main__":
    main()
