"""The aggregation's speed, as ratios measured in one run.

    python bench/bench_aggregate.py [--sizes 300000,600000,1200000] [--work /tmp/kprobe-bench]

For each size (endpoint observations; 3 per report): the whole job (kprobe.aggregate.job.run,
html off) versus Spark's bare read of the same input with the same schema
(`spark.read.schema(S).json(path).count()`), both on local[*], plus the same per-endpoint
counts in plain Python on one core as the single-machine reference. The growth exponent is
the slope of log(time) against log(size).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import time
from collections import Counter
from pathlib import Path

from kprobe.aggregate.generate import reports, write_jsonl
from kprobe.aggregate.job import JobOptions, run, session
from kprobe.aggregate.schema import report_schema


def plain_python(directory: Path) -> float:
    started = time.perf_counter()
    probes: Counter[tuple] = Counter()
    ok: Counter[tuple] = Counter()
    for path in sorted(directory.glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                r = json.loads(line)
                cluster = r["bootstraps"][0]["cluster_id"]
                for e in r["endpoints"]:
                    key = (cluster, e["node_id"], e["host"], e["port"], r["vantage"]["name"])
                    probes[key] += 1
                    ok[key] += e["status"] == "reachable"
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="300000,600000,1200000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench"))
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
        job_started = time.perf_counter()
        result = run(spark, JobOptions((str(data),), str(args.work / f"out-{size}"), html=False))
        job = time.perf_counter() - job_started
        python = plain_python(data)
        observations = result["counts"]["observations"]
        rows.append((observations, job, bare, python))
        shutil.rmtree(args.work / f"out-{size}", ignore_errors=True)
    print("| observations | job | bare read | job / bare | obs/s (job) | plain Python, 1 core |")
    print("| --- | --- | --- | --- | --- | --- |")
    for obs, job, bare, python in rows:
        print(f"| {obs:,} | {job:.1f} s | {bare:.1f} s | {job / bare:.2f} | {obs / job:,.0f} | {python:.1f} s |")
    if len(rows) > 1:
        xs = [math.log(r[0]) for r in rows]
        ys = [math.log(r[1]) for r in rows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        print(f"\ngrowth exponent of the job's time: {slope:.2f} (1.0 = linear)")
    spark.stop()


if __name__ == "__main__":
    main()
