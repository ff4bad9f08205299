"""kprobe.aggregate.flatten: parsed records into the flat rows the state keeps."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pyspark")

from aggregate_reports import endpoint, report
from pyspark.sql import functions as F
from spark_frames import rows_of

from kprobe.aggregate.flatten import BOOTSTRAP_NODE, clustered, flat_records, hostport
from kprobe.aggregate.parse import parse, quarantine_reason

TIMEOUT = {"code": "ADVERTISED_TIMEOUT", "severity": "error", "endpoints": ["b1:9092"], "node_ids": [1],
           "message": "b1 times out", "fix": "open 9092"}


def test_a_report_is_a_row_per_observation_a_quarantined_record_one_row_and_a_dead_bootstrap_stands_in(spark):
    """The report's own row is its first observation (`rep`); a finding rides on the endpoint it concerns; a
    report whose bootstraps all failed is keyed by its bootstrap, observed as node BOOTSTRAP_NODE."""
    lines = [("a.jsonl", report("r1", [endpoint(0), endpoint(1, "unreachable", tcp="timeout")], [TIMEOUT])),
             ("a.jsonl", "{not json"),
             ("a.jsonl", report("r3", [], boot_status="refused"))]
    records = quarantine_reason(parse(spark.createDataFrame(lines, "file string, line string")))
    flat = flat_records(records).withColumn("codes", F.transform("concerns", lambda c: c["code"]))
    assert rows_of(flat, "kind", "d", "rep", "o", "cluster_id", "node_id", "host", "port", "failure", "tcp_ms",
                   "codes", "reason") == Counter({
        ("r", "2026-11-01", True, True, "c", 0, "b0", 9092, None, 2.0, (), None): 1,
        ("r", "2026-11-01", False, True, "c", 1, "b1", 9092, "timeout", None, ("ADVERTISED_TIMEOUT",), None): 1,
        ("q", "none", False, False, None, None, None, None, None, None, None, "malformed JSON (truncated or not JSON)"): 1,
        ("r", "2026-11-01", True, True, "bootstrap:boot:9092", BOOTSTRAP_NODE, "boot", 9092, "refused", 1.5, None,
         None): 1})


def test_hostport_brackets_an_ipv6_literal_only(spark):
    df = spark.createDataFrame([("b0", 9092), ("::1", 9093), ("[::1]", 9094)], "host string, port long")
    assert rows_of(df.select(hostport(F.col("host"), F.col("port")).alias("at"))) == Counter(
        {("b0:9092",): 1, ("[::1]:9093",): 1, ("[::1]:9094",): 1})


def test_clustered_puts_an_endpoints_rows_together_and_keeps_every_row(spark):
    rows = [("c", "v1", 0), ("c", "v2", 0), ("c", "v1", 0)]
    df = spark.createDataFrame([(c, v, n, "h", 9092) for c, v, n in rows],
                               "cluster_id string, vantage string, node_id long, host string, port long")
    ordered = [tuple(r)[:3] for r in clustered(df.coalesce(1)).collect()]
    assert Counter(ordered) == Counter(rows)
    assert ordered.index(("c", "v2", 0)) in (0, 2)  # the two v1 rows of node 0 side by side
