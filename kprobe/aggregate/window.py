"""The window of a run (--since, --until) over the kept rows."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def within(df: DataFrame, since: str | None, until: str | None) -> DataFrame:
    """Rows with since <= ts < until (RFC 3339 or dates)."""
    if since:
        df = df.where(F.col("ts") >= F.to_timestamp(F.lit(since)))
    if until:
        df = df.where(F.col("ts") < F.to_timestamp(F.lit(until)))
    return df
