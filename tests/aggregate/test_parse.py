"""kprobe.aggregate.parse: files into records, records into reports, and why a record is quarantined."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pyspark")

from aggregate_reports import endpoint, report
from spark_frames import rows_of

from kprobe.aggregate.parse import UNSUPPORTED_FILE, parse, quarantine_reason, split_records


def test_json_lines_split_into_records_and_a_pretty_document_stays_one(spark):
    files = spark.createDataFrame([("a.jsonl", '{"n": 1}\n\n{"n": 2}\n'),
                                   ("b.json", '{\n  "n": 3\n}\n'),
                                   ("c.json", '{"n": 4}')], "file string, value string")
    assert rows_of(split_records(files)) == Counter({("a.jsonl", '{"n": 1}'): 1, ("a.jsonl", '{"n": 2}'): 1,
                                                     ("b.json", '{\n  "n": 3\n}\n'): 1, ("c.json", '{"n": 4}'): 1})


def test_each_record_is_a_usable_report_or_quarantined_with_its_reason(spark):
    lines = [("ok.jsonl", report("r1", [endpoint(0)])),
             ("cut.jsonl", report("r2", [endpoint(0)])[:40]),
             ("old.jsonl", '{"schema": "kprobe.report/v0", "id": "r3", "started_at": "2026-11-01T10:00:00Z"}'),
             ("notes.txt", None)]
    parsed = quarantine_reason(parse(spark.createDataFrame(lines, "file string, line string")))
    assert rows_of(parsed, "file", "r.id", "reason") == Counter({
        ("ok.jsonl", "r1", None): 1,
        ("cut.jsonl", None, "malformed JSON (truncated or not JSON)"): 1,
        ("old.jsonl", "r3", "unknown schema version kprobe.report/v0"): 1,
        ("notes.txt", None, UNSUPPORTED_FILE): 1})
