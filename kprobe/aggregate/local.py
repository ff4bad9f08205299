"""DataFrames of rows the driver already holds, made in the JVM alone.

Why not `spark.createDataFrame(rows, schema)`: PySpark ships Python rows as a Python RDD, and the
first job that reads one starts a Python worker process, about a second of a run's time (the
empty quarantine of a small increment was the slowest output to write). These rows are few (an
empty table, the page's chosen vantages, the names of unsupported files), so they travel as
literals in the query itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T


def rows(spark: SparkSession, data: Sequence[Sequence[Any]], schema: T.StructType) -> DataFrame:
    """`data` (tuples in `schema`'s field order) as a DataFrame of `schema`'s names and types."""
    if not data:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
    fields = schema.fields
    structs = [F.struct(*[F.lit(v).cast(f.dataType).alias(f.name) for v, f in zip(row, fields, strict=True)])
               for row in data]
    return spark.range(1).select(F.inline(F.array(*structs)))
