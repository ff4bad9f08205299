"""kprobe.aggregate.rollups: each kind of day rollup, by both strategies, on three observations of one endpoint.

The day (vantage `v`, cluster `c`, node 0 at b0:9092, bootstrap boot:9092): report a at 10:00 ok, report b at
10:30 timed out (with a finding about b0, and node 0 advertised as b0.moved), report c at 11:00 ok again.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

pytest.importorskip("pyspark")

from spark_frames import at, flat, rows_of

from kprobe.aggregate import rollups
from kprobe.aggregate.flatten import FAILURE_CLASSES, KEYS

DAY = dt.date(2026, 11, 1)
ENDPOINT = ("c", 0, "b0", 9092, "v")
DAY_COLUMNS = ("d", "day")
CONCERN = {"code": "ADVERTISED_TIMEOUT", "severity": "error", "message": "b0 times out", "fix": "open 9092"}


def observation(rid: int, minute: int, failure: str | None, dns_ms: float, tcp_ms: float | None,
                advertised: str) -> dict:
    finding = [{"code": CONCERN["code"], "severity": "error", "endpoints": ["b0:9092"]}] if failure else []
    return {"kind": "r", "d": "2026-11-01", "day": DAY, "rid": rid, "report_id": "abc"[rid - 1],
            "ts": at(10 + minute // 60, minute % 60), "cluster_id": "c", "vantage": "v", "rep": True, "o": True,
            "node_id": 0, "host": "b0", "port": 9092, "failure": failure, "dns_ms": dns_ms, "tcp_ms": tcp_ms,
            "status": "gap" if failure else "ok", "n_adv": 1, "n_reach": 0 if failure else 1,
            "findings": finding, "concerns": [CONCERN] if failure else [],
            "bootstraps": [{"address": "boot:9092", "status": "ok", "cluster_id": "c", "ms": 1.0,
                            "brokers": [{"node_id": 0, "host": advertised, "port": 9092}]}]}


def day(spark):
    return flat(spark, [observation(1, 0, None, 1.0, 2.0, "b0"), observation(2, 30, "timeout", 3.0, None, "b0.moved"),
                        observation(3, 60, None, 1.0, 4.0, "b0")])


@pytest.fixture
def one_task(spark):
    """The day's rows in one partition, for the kinds that have one strategy only."""
    return day(spark).coalesce(1), None


@pytest.fixture(params=["one task", "spread"])
def rows(request, spark):
    """The day's rows, and the strategy: in one partition (one_task), or spread with its lookups held."""
    df = day(spark)
    if request.param == "one task":
        yield df.coalesce(1), None
        return
    lookups = rollups.Lookups([])
    yield df, lookups
    for held in lookups.held or []:
        held.unpersist()


def made(kind: str, rows: tuple, *args: object) -> object:
    """The rollup of that kind by the strategy of `rows`."""
    df, lookups = rows
    if lookups is None:
        return getattr(rollups, kind)(df, *args)
    spread = getattr(rollups, f"{kind}_spread", None)
    if spread is None:
        return getattr(rollups, kind)(df, *args)
    return spread(df, lookups) if kind != "endpoint_findings_day" else spread(df)


def test_endpoint_day_counts_outcomes_maxima_ends_and_changes(rows):
    fails = tuple(f"fail_{name}" for name in FAILURE_CLASSES)
    columns = (*KEYS, *DAY_COLUMNS, "probes", "successes", *fails, "dns_max_ms", "tcp_max_ms", "first_ts",
               "last_ts", "changes", "t")
    counts = tuple(1 if name == "timeout" else 0 for name in FAILURE_CLASSES)
    assert rows_of(made("endpoint_day", rows), *columns) == Counter({
        (*ENDPOINT, "2026-11-01", "2026-11-01", 3, 2, *counts, 3.0, 4.0, "2026-11-01 10:00:00",
         "2026-11-01 11:00:00", 2, "ev"): 1})


@pytest.mark.parametrize(("metric", "buckets"), [("dns", {(0, 2, 1.0), (55, 1, 3.0)}),  # ceil(50 ln ms)
                                                 ("tcp", {(35, 1, 2.0), (70, 1, 4.0)})])
def test_latency_day_is_a_histogram_per_metric(one_task, metric, buckets):
    got = rows_of(made("latency_day", one_task, metric), *KEYS, "metric", "b", "n", "hi", "t")
    assert got == Counter({(*ENDPOINT, metric, *bucket, "h"): 1 for bucket in buckets})


def test_hourly_day_counts_probes_and_successes_per_hour(one_task):
    assert rows_of(made("hourly_day", one_task), "cluster_id", "vantage", "hour", "probes", "successes", "t") == Counter({
        ("c", "v", "2026-11-01 10:00:00", 2, 1, "hr"): 1, ("c", "v", "2026-11-01 11:00:00", 1, 1, "hr"): 1})


def test_cluster_day_has_the_reports_the_last_good_and_bad_and_the_latest_report(rows):
    columns = ("cluster_id", "vantage", "reports", "last_good", "last_bad", "last_ts", "last_rid", "n_adv", "n_reach",
               "last_report_status", "t")
    assert rows_of(made("cluster_day", rows), *columns) == Counter({
        ("c", "v", 3, "2026-11-01 11:00:00", "2026-11-01 10:30:00", "2026-11-01 11:00:00", 3, 1, 1, "ok", "cs"): 1})


def test_findings_day_counts_a_finding_once_per_endpoint_it_names(one_task):
    columns = ("cluster_id", "vantage", "code", "severity", "occurrences", "findings", "t")
    assert rows_of(made("findings_day", one_task), *columns) == Counter({
        ("c", "v", "ADVERTISED_TIMEOUT", "error", 1, 1, "f"): 1})


def test_endpoint_findings_day_keeps_the_latest_words(rows):
    columns = (*KEYS, "code", "severity", "occurrences", "first_ts", "last_ts", "last_rid", "message", "fix", "t")
    assert rows_of(made("endpoint_findings_day", rows), *columns) == Counter({
        (*ENDPOINT, "ADVERTISED_TIMEOUT", "error", 1, "2026-11-01 10:30:00", "2026-11-01 10:30:00", 2,
         "b0 times out", "open 9092", "fe"): 1})


def test_advertised_day_has_the_first_and_last_address_and_the_first_report(rows):
    columns = ("cluster_id", "vantage", "bootstrap", "node_id", "first_ts", "first_adv", "last_ts", "last_adv",
               "report_id", "t")
    assert rows_of(made("advertised_day", rows), *columns) == Counter({
        ("c", "v", "boot:9092", 0, "2026-11-01 10:00:00", "b0:9092", "2026-11-01 11:00:00", "b0:9092", "a",
         "adv"): 1})


def test_advertised_changes_day_has_each_change_between_consecutive_reports(rows):
    columns = ("cluster_id", "vantage", "bootstrap", "node_id", "previous", "current", "changed_at", "report_id", "t")
    assert rows_of(made("advertised_changes_day", rows), *columns) == Counter({
        ("c", "v", "boot:9092", 0, "b0:9092", "b0.moved:9092", "2026-11-01 10:30:00", "b", "chg"): 1,
        ("c", "v", "boot:9092", 0, "b0.moved:9092", "b0:9092", "2026-11-01 11:00:00", "c", "chg"): 1})


def test_day_rollups_is_every_kind_and_the_spread_lookups_are_each_held_once(rows):
    df, lookups = rows
    out = rollups.day_rollups(df, one_task=lookups is None, held=None if lookups is None else lookups.held)
    kinds = Counter(t for (t,) in rows_of(out, "t").elements())
    assert kinds == Counter({"ev": 1, "h": 4, "hr": 2, "cs": 1, "f": 1, "fe": 1, "adv": 1, "chg": 2})
    assert lookups is None or len(lookups.held or []) == 4


def test_per_minute_counts_probes_and_successes_per_minute(one_task):
    assert rows_of(rollups.per_minute(one_task[0]), "cluster_id", "vantage", "minute", "probes", "successes") == Counter({
        ("c", "v", "2026-11-01 10:00:00", 1, 1): 1, ("c", "v", "2026-11-01 10:30:00", 1, 0): 1,
        ("c", "v", "2026-11-01 11:00:00", 1, 1): 1})
