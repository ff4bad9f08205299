"""One copy of each report: the same report id read more than once (re-delivered, a file read twice) counts once.

No I/O and no SparkSession here: the job (kprobe.aggregate.ingest) reads the state's rows and the
copies it recorded, and these choose and keep one copy of each report.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def only_kept_copies(rows: DataFrame, copies: DataFrame | None) -> DataFrame:
    """Rows (r or o, with their `run`) of the copy of each report id that the job keeps.

    `copies` lists the ids that came more than once (re-delivered by a spool-and-forward
    publisher, or a file read twice) with the copy kept: the earliest by time (then by text and
    order of reading, which only decide between identical copies). Duplicates are rare, so this
    is a broadcast join of a small table, never a shuffle of every report.
    """
    if copies is None:
        return rows
    winner = F.broadcast(copies.select("rid", F.col("run").alias("win_run"), F.col("seq").alias("win_seq")))
    return (rows.join(winner, "rid", "left")
            .where(F.col("win_run").isNull()
                   | ((F.col("run") == F.col("win_run")) & (F.col("seq") == F.col("win_seq"))))
            .drop("win_run", "win_seq"))


def winners(copies: DataFrame) -> DataFrame:
    """All the records (r rows with `run`) of ids that came more than once -> one row per id: the kept copy."""
    order = F.struct("ts", "h", "run", "seq")
    return (copies.groupBy("rid", "report_id")
            .agg(F.min_by(F.struct("run", "seq", "d"), order).alias("w"), F.count(F.lit(1)).alias("copies"))
            .select("rid", "report_id", "w.run", "w.seq", "w.d", "copies"))
