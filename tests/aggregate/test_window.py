"""kprobe.aggregate.window: the rows of a run's --since and --until."""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("pyspark")

from spark_frames import at, rows_of

from kprobe.aggregate.window import within


def test_within_keeps_since_up_to_until(spark):
    df = spark.createDataFrame([("a", at(9)), ("b", at(10)), ("c", at(11))], "name string, ts timestamp")
    # Since included, until not; a date is its midnight; no bound, every row.
    windows = {"b": within(df, "2026-11-01T10:00:00Z", "2026-11-01T11:00:00Z"), "c": within(df, "2026-11-01T10:00:01Z", None),
               "none": within(df, None, "2026-11-01"), "all": within(df, None, None)}
    tagged = [rows.selectExpr(f"'{tag}' as tag", "name") for tag, rows in windows.items()]
    union = tagged[0].unionByName(tagged[1]).unionByName(tagged[2]).unionByName(tagged[3])
    assert rows_of(union) == Counter({("b", "b"): 1, ("c", "c"): 1, ("all", "a"): 1, ("all", "b"): 1,
                                      ("all", "c"): 1})
