"""`kprobe aggregate`: reports from many vantages, aggregated with PySpark (kprobe.aggregate)."""

from __future__ import annotations

from typing import Annotated

import typer


def aggregate(
    out: Annotated[str, typer.Option("--out", help="Output directory (replaced whole on success).")],
    inputs: Annotated[
        list[str] | None, typer.Argument(help="Report files or directories (local, s3a://, hdfs://).")
    ] = None,
    kafka: Annotated[
        list[str], typer.Option("--kafka", help="Also read reports from BOOTSTRAP/TOPIC (Spark's Kafka source).")
    ] = [],  # noqa: B006
    master: Annotated[str, typer.Option("--master", help="Spark master.")] = "local[*]",
    since: Annotated[str | None, typer.Option("--since", help="Only reports at or after (RFC 3339 or date).")] = None,
    until: Annotated[str | None, typer.Option("--until", help="Only reports before (RFC 3339 or date).")] = None,
    no_html: Annotated[bool, typer.Option("--no-html", help="Skip report.html.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Recompute everything from the inputs (by default a run "
                                       "reads only the files and messages no earlier run read).")] = False,
    state: Annotated[str | None, typer.Option("--state", help="Directory of the job's state between runs "
                                              "(default: OUT/.state).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Spark's and the JVM's own lines "
                                          "(kept in a log file otherwise).")] = False,
    keep_warm: Annotated[str | None, typer.Option("--keep-warm", help="Run the job in a warm Spark driver kept "
                                                  "for the next run, which exits after this long without one "
                                                  "(e.g. 10m: a schedule's period and some); local masters.")]
    = None,
) -> None:
    """Aggregate reports from many vantages with PySpark.

    Reachability per endpoint and vantage, cluster summaries, findings by day, advertised-endpoint
    drift, quarantine of bad records, and report.html.
    """
    # The same checks as `python -m kprobe.aggregate` (pyspark and Java present, times, Kafka
    # targets, inputs, and an --out whose replacement cannot delete inputs or others' files).
    from kprobe.aggregate.checks import keep_warm_seconds, validate

    inputs = inputs or []
    topics = validate(inputs, out, kafka, since, until, state, full)
    warm = keep_warm_seconds(keep_warm)
    from kprobe.aggregate.entry import command
    from kprobe.aggregate.plan import JobOptions

    # With nothing new: one line, and PySpark is never imported (kprobe.aggregate.plan.current).
    options = JobOptions(tuple(inputs), out, master, since, until, not no_html, topics, full=full, state=state)
    typer.echo("\n".join(command(options, verbose=verbose, where=True, keep_warm=warm)))

