"""`kprobe aggregate`: reports from many vantages, aggregated with PySpark (kprobe.aggregate)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kprobe.cli.typed import takes
from kprobe.option_table import AGGREGATE


@takes(AGGREGATE[0], "inputs", *AGGREGATE[1:])
def aggregate(
    inputs: Annotated[
        list[str] | None, typer.Argument(help="Report files or directories (local, s3a://, hdfs://).")
    ] = None,
    **options: Any,
) -> None:
    """Aggregate reports from many vantages with PySpark.

    Reachability per endpoint and vantage, cluster summaries, findings by day, advertised-endpoint
    drift, quarantine of bad records, and report.html.
    """
    from kprobe.aggregate.entry import run_command

    typer.echo("\n".join(run_command(inputs or [], where=True, **options)))
