"""kprobe.aggregate.merge: the days' rollups merged into each output, on rollup rows written out by hand.

Two days of one endpoint (vantage `v`, cluster `c`, node 0 at b0:9092) unless a test says otherwise; a rollup
row of another kind beside the ones an output reads is left alone by it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

pytest.importorskip("pyspark")

from spark_frames import at, rows_of

from kprobe.aggregate import merge
from kprobe.aggregate.flatten import FAILURE_CLASSES

ENDPOINT = ("c", 0, "b0", 9092, "v")
DAY1, DAY2 = dt.date(2026, 11, 1), dt.date(2026, 11, 2)
FAILS = ", ".join(f"fail_{name} long" for name in FAILURE_CLASSES)
EV = (f"t string, cluster_id string, node_id long, host string, port long, vantage string, day date, "
      f"probes long, successes long, {FAILS}, dns_max_ms double, tcp_max_ms double, first_ts timestamp, "
      "last_ts timestamp, first_key long, last_key long, changes long, metric string, b int, n long, hi double")


def key(ts: dt.datetime, outcome: int) -> int:
    """A status key written out: microseconds since 1970 * 16 + the outcome (0 ok, 3 timeout)."""
    return int(ts.timestamp()) * 1_000_000 * 16 + outcome


def ev(day: dt.date, probes: int, successes: int, timeouts: int, first: tuple, last: tuple, changes: int) -> tuple:
    fails = tuple(timeouts if name == "timeout" else 0 for name in FAILURE_CLASSES)
    return ("ev", *ENDPOINT, day, probes, successes, *fails, 3.0, 2.0, first[0], last[0], key(*first), key(*last),
            changes, None, None, None, None)


def histogram(day: dt.date, metric: str, bucket: int, n: int, hi: float) -> tuple:
    return ("h", *ENDPOINT, day, *([None] * (9 + len(FAILURE_CLASSES))), metric, bucket, n, hi)


def test_endpoint_vantage_sums_the_days_counts_a_change_across_midnight_and_reads_percentiles(spark):
    """Day 1: ok at 10:00, timeout at 10:30 (one change); day 2: ok at 09:00, a change across midnight."""
    rollups = spark.createDataFrame([
        ev(DAY1, 2, 1, 1, (at(10), 0), (at(10, 30), 3), 1),
        ev(DAY2, 1, 1, 0, (at(9, day=2), 0), (at(9, day=2), 0), 0),
        histogram(DAY1, "dns", 0, 2, 1.0), histogram(DAY1, "dns", 55, 1, 3.0), histogram(DAY2, "tcp", 35, 3, 2.0)],
        EV)
    got = rows_of(merge.endpoint_vantage(rollups), "probes", "successes", "success_rate", "fail_timeout",
                  "dns_p50_ms", "dns_p95_ms", "dns_max_ms", "tcp_p50_ms", "tcp_p95_ms", "tcp_max_ms", "first_seen",
                  "last_seen", "last_status", "status_changes")
    assert got == Counter({(3, 2, 2 / 3, 1, 1.0, 3.0, 3.0, 2.0, 2.0, 2.0, "2026-11-01 10:00:00",
                            "2026-11-02 09:00:00", "ok", 2): 1})


def test_findings_by_day_sums_the_segments_of_a_day(spark):
    rollups = spark.createDataFrame([("f", "c", "v", DAY1, "X", "error", 2, 1), ("f", "c", "v", DAY1, "X", "error", 1, 1),
                                     ("fe", "c", "v", DAY1, "X", "error", 5, None)],
                                    "t string, cluster_id string, vantage string, day date, code string, "
                                    "severity string, occurrences long, findings long")
    assert rows_of(merge.findings_by_day(rollups), "day", "code", "occurrences", "findings") == Counter(
        {("2026-11-01", "X", 3, 2): 1})


def test_findings_by_endpoint_keeps_the_latest_words(spark):
    rollups = spark.createDataFrame([
        ("fe", *ENDPOINT, "X", "warning", 1, at(10), at(10), 7, "old words", "old fix"),
        ("fe", *ENDPOINT, "X", "warning", 2, at(9, day=2), at(11, day=2), 3, "new words", "new fix"),
        ("f", *ENDPOINT, "X", "warning", 9, at(8), at(8), 1, "not this one", "no")],
        "t string, cluster_id string, node_id long, host string, port long, vantage string, code string, "
        "severity string, occurrences long, first_ts timestamp, last_ts timestamp, last_rid long, message string, "
        "fix string")
    assert rows_of(merge.findings_by_endpoint(rollups), "code", "occurrences", "first_seen", "last_seen", "message",
                   "fix") == Counter({("X", 3, "2026-11-01 10:00:00", "2026-11-02 11:00:00", "new words",
                                       "new fix"): 1})


def test_hourly_sums_the_segments_of_an_hour(spark):
    rollups = spark.createDataFrame([("hr", "c", "v", at(10), 2, 1), ("hr", "c", "v", at(10), 2, 2),
                                     ("hr", "c", "v", at(11), 1, 0)],
                                    "t string, cluster_id string, vantage string, hour timestamp, probes long, "
                                    "successes long")
    assert rows_of(merge.hourly(rollups), "hour", "probes", "successes", "success_rate") == Counter({
        ("2026-11-01 10:00:00", 4, 3, 0.75): 1, ("2026-11-01 11:00:00", 1, 0, 0.0): 1})


def test_cluster_summary_has_the_latest_report_and_the_worst_finding(spark):
    rollups = spark.createDataFrame([
        ("cs", "c", "v", 2, at(10), None, at(10), 5, 3, 3, "ok", None, None, None),
        ("cs", "c", "v", 1, None, at(9, day=2), at(9, day=2), 6, 3, 2, "gap", None, None, None),
        ("f", "c", "v", None, None, None, None, None, None, None, None, "X", "warning", 4)],
        "t string, cluster_id string, vantage string, reports long, last_good timestamp, last_bad timestamp, "
        "last_ts timestamp, last_rid long, n_adv int, n_reach int, last_report_status string, code string, "
        "severity string, occurrences long")
    assert rows_of(merge.cluster_summary(rollups)) == Counter({
        ("c", "v", 3, 3, 2, "gap", "X", "warning", "2026-11-01 10:00:00", "2026-11-02 09:00:00"): 1})


def test_advertised_changes_are_those_within_a_day_and_across_midnight(spark):
    """Day 1: a -> b at 10:30 (a change within the day); day 2 starts at c: b -> c across midnight."""
    rollups = spark.createDataFrame([
        ("adv", "c", "v", "boot:9092", 0, DAY1, at(10), "a:9092", at(11), "b:9092", "r1", None, None, None),
        ("adv", "c", "v", "boot:9092", 0, DAY2, at(9, day=2), "c:9092", at(9, day=2), "c:9092", "r9", None, None,
         None),
        ("chg", "c", "v", "boot:9092", 0, DAY1, None, None, None, None, "r2", "a:9092", "b:9092", at(10, 30))],
        "t string, cluster_id string, vantage string, bootstrap string, node_id long, day date, first_ts timestamp, "
        "first_adv string, last_ts timestamp, last_adv string, report_id string, previous string, current string, "
        "changed_at timestamp")
    assert rows_of(merge.advertised_changes(rollups)) == Counter({
        ("c", "v", "boot:9092", 0, "a:9092", "b:9092", "2026-11-01 10:30:00", "r2"): 1,
        ("c", "v", "boot:9092", 0, "b:9092", "c:9092", "2026-11-02 09:00:00", "r9"): 1})
