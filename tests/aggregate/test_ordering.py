"""kprobe.aggregate.ordering: a time with an outcome, or with a report hash, as one number that orders as the pair."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import functions as F
from spark_frames import at, rows_of

from kprobe.aggregate.ordering import key_ok, key_status, key_ts, latest, rid_of, status_key


def test_a_status_key_gives_back_its_time_and_outcome_and_orders_ok_first_at_one_time(spark):
    df = spark.createDataFrame([(at(10), None), (at(10), "timeout"), (at(11, 30), "partial")],
                               "ts timestamp, failure string").select(status_key().alias("k"))
    back = df.select(key_ts("k").alias("ts"), key_status("k").alias("status"), key_ok("k").alias("ok"))
    assert rows_of(back) == Counter({("2026-11-01 10:00:00", "ok", True): 1,
                                     ("2026-11-01 10:00:00", "timeout", False): 1,
                                     ("2026-11-01 11:30:00", "partial", False): 1})
    first, last = df.agg(F.min("k"), F.max("k")).select(key_status("min(k)"), key_status("max(k)")).first()
    assert (first, last) == ("ok", "partial")


def test_the_latest_time_and_report_hash_as_one_number_order_as_the_pair(spark):
    """Findings per endpoint pick their latest words by the maximum of `latest` (a hash aggregation), where
    the one-task rollup takes the maximum of (ts, rid): the same pick at every edge of both, ties in time
    broken by the report hash, and the hash read back whole (years 1000 to 9999: near year 1, PySpark's conversion
    of a datetime leaves Python's range)."""
    utc = dt.timezone.utc
    times = [dt.datetime(1000, 1, 1, tzinfo=utc), dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
             dt.datetime(1970, 1, 1, tzinfo=utc), dt.datetime(2026, 11, 27, 12, 0, 0, 1, tzinfo=utc),
             dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=utc)]
    hashes = [-(2 ** 63), -1, 0, 1, 2 ** 63 - 1]
    # A group per time (ties in time, every hash), and one of everything.
    every = [(t, r) for t in times for r in hashes]
    groups = {g: [(t, r) for r in hashes] for g, t in enumerate(times)} | {len(times): every}
    df = spark.createDataFrame([(g, t, r) for g, pairs in groups.items() for t, r in pairs],
                               "g int, ts timestamp, rid long")
    picked = {row.g: row.rid for row in df.groupBy("g").agg(rid_of(F.max(latest())).alias("rid")).collect()}
    assert picked == {g: max(pairs)[1] for g, pairs in groups.items()}
    ordered = [row.rid for row in df.where(F.col("g") == len(times)).orderBy(latest()).collect()]
    assert ordered == [r for _, r in sorted(every)]
