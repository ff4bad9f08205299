"""The aggregation's transform tests' few hand-written rows as DataFrames, and their rows read back in any order.

Every test here takes conftest's session-scoped `spark` fixture (local[2]): the scheduler runs them on the
worker that already holds the suite's Spark session, so they start no JVM of their own.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

UTC = dt.timezone.utc


def at(hour: int, minute: int = 0, day: int = 1) -> dt.datetime:
    """A time of November 2026, in UTC."""
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def flat(spark: Any, rows: list[dict[str, Any]]) -> Any:
    """FLAT rows (kprobe.aggregate.flatten) from dicts; a field not given is null."""
    from kprobe.aggregate.flatten import FLAT

    return spark.createDataFrame([tuple(row.get(f.name) for f in FLAT.fields) for row in rows], FLAT)


def _hashable(value: Any) -> Any:
    return tuple(map(_hashable, value)) if isinstance(value, list) else value


def rows_of(df: Any, *columns: str) -> Counter:
    """The rows of `columns` as a multiset of tuples, times as UTC text (`2026-11-01 10:00:00`), arrays as tuples."""
    df = df.select(*columns) if columns else df
    text = [F.col(f.name).cast("string").alias(f.name) if isinstance(f.dataType, (T.TimestampType, T.DateType))
            else F.col(f.name) for f in df.schema.fields]
    return Counter(tuple(map(_hashable, row)) for row in df.select(*text).collect())
