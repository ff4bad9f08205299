"""An observation's time with its outcome, or with its report hash, as one number.

Why: the first and the latest of a group are then a min or a max of a number, which Spark aggregates
in a hash table; a min or max of a struct is aggregated by sorting every row. The rollups
(kprobe.aggregate.rollups) make these numbers and the merge (kprobe.aggregate.merge) reads them back.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from kprobe.aggregate.flatten import FAILURE_CLASSES

STATUSES = ("ok", *FAILURE_CLASSES)


def _decimal(n: int) -> Column:
    """A whole number past a long as a literal (a Python int this large does not pass to the JVM)."""
    return F.lit(str(n)).cast("decimal(38,0)")


def latest() -> Column:
    """An observation's time and report hash as one number, ordered as (ts, rid): microseconds * 2**64 + rid + 2**63.

    Why a decimal: a maximum of it is a hash aggregation, where one of struct("ts", "rid") is a sort,
    and the two need up to 123 bits (a long holds 64, a decimal(38,0) 126): exact for any time Spark holds.
    """
    return (F.unix_micros("ts").cast("decimal(38,0)") * _decimal(2 ** 64)
            + (F.col("rid").cast("decimal(38,0)") + _decimal(2 ** 63)))


def rid_of(number: Column) -> Column:
    """The report hash back out of a number `latest` made."""
    return (F.pmod(number, _decimal(2 ** 64)) - _decimal(2 ** 63)).cast("long")


def status_key() -> Column:
    """An observation's time and outcome in one long, ts in microseconds * 16 + the outcome's index.

    Why: the first and last outcome of a day are then a min and a max of a number, which Spark
    aggregates in a hash table; a min of a struct would sort every observation. Two outcomes at
    the same microsecond are ordered by outcome, the same way in every run.
    """
    index = F.lit(0)
    for i, name in enumerate(FAILURE_CLASSES, start=1):
        index = F.when(F.col("failure") == name, F.lit(i)).otherwise(index)
    return F.unix_micros("ts") * 16 + index


def key_ts(key: str) -> Column:
    """The time out of the `status_key` in column `key`."""
    return F.timestamp_micros(F.floor(F.col(key) / 16).cast("long"))


def key_status(key: str) -> Column:
    """The outcome (`ok` or a failure class) out of the `status_key` in column `key`."""
    return F.element_at(F.array(*[F.lit(s) for s in STATUSES]), (F.col(key) % 16 + 1).cast("int"))


def key_ok(key: str) -> Column:
    """Whether the `status_key` in column `key` is a success."""
    return key_status(key) == "ok"  # as `flatten.success`: every failure class, `partial` too, is not ok
