"""The aggregation's speed, as ratios measured in one run.

    python bench/bench_aggregate.py [--sizes 1000000,4000000,10000000] [--work /tmp/kprobe-bench] [--drop-inputs]

For each size (endpoint observations; 3 per report): the whole job (kprobe.aggregate.job.run,
html off) versus Spark's bare read of the same input with the same schema
(`spark.read.schema(S).json(path).count()`, which prunes every column and parses nothing) and
a scan that parses the endpoints, all on local[*], plus the endpoint_vantage table computed in
plain Python on one core as the single-machine reference. The growth exponent is the slope of
log(time) against log(size).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

from kprobe.aggregate.generate import reports, write_jsonl
from kprobe.aggregate.job import JobOptions, run, session
from kprobe.aggregate.schema import report_schema

TLS_FAILURES = {"untrusted", "hostname_mismatch", "handshake_failed"}
IDENTITY_FAILURES = {"mismatch", "not_kafka", "silent"}


def _failure(e: dict) -> str | None:
    """The job's failure class of one endpoint observation (kprobe.aggregate.transforms._failure)."""
    status = e["status"]
    tcp = {t["status"] for t in e["tcp"]}
    if status == "unresolvable":
        return "dns"
    if status == "unreachable":
        return "timeout" if "timeout" in tcp else "refused" if tcp == {"refused"} else "unreachable"
    if (e.get("tls") or {}).get("status") in TLS_FAILURES:
        return "tls"
    if (e.get("identity") or {}).get("status") in IDENTITY_FAILURES:
        return "identity"
    return "partial" if status == "partial" else None


def _pct(values: list[float], q: float) -> float | None:
    """Spark's percentile_approx on exact data: the smallest value with rank >= q * n."""
    if not values:
        return None
    values.sort()
    return values[max(0, math.ceil(q * len(values)) - 1)]


def plain_python(directory: Path) -> float:
    """The endpoint_vantage table (every column the job writes) in plain Python on one core.

    The single-machine reference: same dedup by report id, same observations (deadline-cut
    endpoints skipped), same failure classes, percentiles, first/last seen, last status and
    status changes. It keeps everything in memory, which is what stops it scaling past a machine.
    """
    started = time.perf_counter()
    seen_ids: set[str] = set()
    obs: dict[tuple, list[tuple]] = defaultdict(list)
    for path in sorted(directory.glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                r = json.loads(line)
                if r["id"] in seen_ids:
                    continue
                seen_ids.add(r["id"])
                cluster = next((b["cluster_id"] for b in r["bootstraps"] if b.get("cluster_id")), "unknown")
                ts, vantage = r["started_at"], r["vantage"]["name"]
                for e in r["endpoints"]:
                    if e["status"] == "unchecked":
                        continue
                    tcp_ok = [t["ms"] for t in e["tcp"] if t["status"] == "ok" and t["ms"] is not None]
                    failure = _failure(e)
                    obs[(cluster, e["node_id"], e["host"], e["port"], vantage)].append(
                        (ts, r["id"], failure in (None, "partial"), failure, e["dns"]["ms"], min(tcp_ok, default=None)))
    rows = []
    for key, items in obs.items():
        items.sort(key=lambda o: (o[0], o[1]))
        fails = Counter(o[3] for o in items if o[3])
        dns = [o[4] for o in items if o[4] is not None]
        tcp = [o[5] for o in items if o[5] is not None]
        changes = sum(1 for a, b in pairwise(items) if a[2] != b[2])
        successes = sum(o[2] for o in items)
        rows.append((*key, len(items), successes, successes / len(items), dict(fails),
                     _pct(dns, 0.5), _pct(dns, 0.95), max(dns, default=None),
                     _pct(tcp, 0.5), _pct(tcp, 0.95), max(tcp, default=None),
                     items[0][0], items[-1][0], items[-1][3] or "ok", changes))
    assert rows, "no observations: the generator wrote nothing?"
    return time.perf_counter() - started


def parsing_scan(spark: object, data: Path) -> float:
    """Spark reading the same files with the same schema *and parsing every endpoint*.

    `count()` alone prunes every column, so Spark never parses a record; summing the endpoint
    arrays' sizes forces the parse a job cannot avoid, which is the floor that matters.
    """
    started = time.perf_counter()
    spark.read.schema(report_schema()).json(str(data)).selectExpr("sum(size(endpoints))").collect()  # type: ignore[attr-defined]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000000,4000000,10000000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench"))
    parser.add_argument("--drop-inputs", action="store_true", help="delete each size's input after measuring it")
    args = parser.parse_args()
    spark = session("local[*]", app="kprobe-bench")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        reports_needed = size // 3
        vantages, clusters = 20, 10
        hours = reports_needed / (vantages * clusters * 60)
        data = args.work / f"in-{size}"
        if not data.exists():
            write_jsonl(data, reports(vantages, clusters, hours))
        bare_started = time.perf_counter()
        spark.read.schema(report_schema()).json(str(data)).count()
        bare = time.perf_counter() - bare_started
        parsed = parsing_scan(spark, data)
        job_started = time.perf_counter()
        result = run(spark, JobOptions((str(data),), str(args.work / f"out-{size}"), html=False))
        job = time.perf_counter() - job_started
        python = plain_python(data)
        observations = result["counts"]["observations"]
        rows.append((observations, job, bare, parsed, python))
        shutil.rmtree(args.work / f"out-{size}", ignore_errors=True)
        if args.drop_inputs:
            shutil.rmtree(data, ignore_errors=True)
        print(f"{observations:,} observations: job {job:.1f} s, bare {bare:.1f} s, parsing scan {parsed:.1f} s, "
              f"python {python:.1f} s", flush=True)
    print("| observations | job | bare read (count) | parsing scan | job / bare | job / parsing scan | obs/s (job) "
          "| plain Python, 1 core, same table |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for obs, job, bare, parsed, python in rows:
        print(f"| {obs:,} | {job:.1f} s | {bare:.1f} s | {parsed:.1f} s | {job / bare:.1f} | {job / parsed:.2f} "
              f"| {obs / job:,.0f} | {python:.1f} s |")
    if len(rows) > 1:
        xs = [math.log(r[0]) for r in rows]
        ys = [math.log(r[1]) for r in rows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        print(f"\ngrowth exponent of the job's time: {slope:.2f} (1.0 = linear)")
    spark.stop()


if __name__ == "__main__":
    main()
