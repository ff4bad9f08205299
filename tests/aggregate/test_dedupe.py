"""kprobe.aggregate.dedupe: one copy of each report id, the earliest."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pyspark")

from spark_frames import at, rows_of

from kprobe.aggregate.dedupe import only_kept_copies, winners

COPY = "rid long, report_id string, ts timestamp, h long, run int, seq long, d string"


def test_the_kept_copy_is_the_earliest_then_the_smallest_text_hash(spark):
    copies = spark.createDataFrame([(7, "r7", at(10), 5, 2, 1, "2026-11-01"),
                                    (7, "r7", at(9), 9, 3, 0, "2026-11-01"),
                                    (7, "r7", at(9), 4, 1, 8, "2026-11-01")], COPY)
    assert rows_of(winners(copies)) == Counter({(7, "r7", 1, 8, "2026-11-01", 3): 1})


def test_only_the_kept_copy_of_a_repeated_id_stays_and_other_ids_all_do(spark):
    rows = spark.createDataFrame([(7, 1, 8, "kept"), (7, 2, 1, "copy"), (9, 2, 3, "once")],
                                 "rid long, run int, seq long, name string")
    copies = spark.createDataFrame([(7, 1, 8)], "rid long, run int, seq long")
    assert rows_of(only_kept_copies(rows, copies), "name") == Counter({("kept",): 1, ("once",): 1})
    assert rows_of(only_kept_copies(rows, None), "name") == Counter({("kept",): 1, ("copy",): 1, ("once",): 1})
