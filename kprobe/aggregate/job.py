"""The aggregation job: read what is new into the state, commit, rebuild the outputs from the state.

Runs the same under `kprobe aggregate` (local[*] by default) and `spark-submit` (the master
comes from spark-submit; `python -m kprobe.aggregate` is the entry). Every input record ends up
aggregated, a duplicate of an aggregated report, or quarantined with its reason, and the counts
(printed and written to `counts.json`) add up, across runs too: a run reads only the files and
topic messages no earlier run read (kprobe.aggregate.state), rolls up the days they fall on,
and merges every day's rollups into the outputs.

The job's parts, each its own module: plan.py decides without Spark whether there is anything
to do; jvm.py starts the session and turns Spark's failures into one line; ingest.py keeps the
incremental state; outputs.py writes. The names below are the ones callers import from here.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from kprobe.aggregate import local, merge
from kprobe.aggregate import state as st
from kprobe.aggregate.checks import check_out, is_local
from kprobe.aggregate.ingest import ingest, list_inputs, read_parts, read_records
from kprobe.aggregate.jvm import session, spark_errors, spark_log
from kprobe.aggregate.outputs import page_minutes, rollups, total_of, worst_gaps, write
from kprobe.aggregate.plan import InputFile, JobOptions, Progress, state_dir, summary_lines, topic_ranges
from kprobe.errors import KprobeError, UsageError

# The quarantine output's columns: the file, why, and the record's text (its first 10,000 characters).
QUARANTINE = T.StructType([T.StructField(n, T.StringType()) for n in ("file", "reason", "record")])

__all__ = ["InputFile", "JobOptions", "Progress", "accounting_error", "list_inputs", "read_records", "run",
           "session", "spark_log", "state_dir", "summary_lines", "topic_ranges", "worst_gaps"]


def run(spark: SparkSession, options: JobOptions) -> dict[str, Any]:
    """The whole job; returns the counts and the worst gaps.

    The output checks run again here (not only in the entry points) because `run` is what
    replaces `options.out`: no caller can reach the swap without them. A failing Spark job is
    reported in one line and leaves the previous output and state as they were.
    """
    check_out(options.out, options.inputs, options.state)
    if options.state is None and is_local(options.out):
        st.recover(Path(options.out.removeprefix("file://")).resolve())
    root = state_dir(options)
    if not is_local(root):
        raise UsageError(f"bad --state {root!r}: the state needs a path on this machine's file system "
                         "(a shared mount on a cluster); give one with --state")
    state_root = Path(root.removeprefix("file://")).resolve()
    st.check(state_root, options.full)
    with st.locked(state_root), spark_errors(options.out, state_root):
        return _run(spark, options, state_root, Progress(options.progress))


def accounting_error(counts: dict[str, Any]) -> str | None:
    """Why the counts do not cover every input record, or None when they add up.

    `input_records` is counted on the records as read, before parsing; `reports` is what the
    dedupe kept (the sum of the per-day rollups), `duplicates` comes from counting distinct ids
    apart from the dedupe, and `quarantined` from the rejected rows. A record lost or doubled
    anywhere shows up here.
    """
    total = counts["reports"] + counts["duplicates"] + counts["quarantined"]
    if total == counts["input_records"]:
        return None
    return (f"record accounting does not add up: {counts['input_records']} records read, but {counts['reports']} "
            f"reports + {counts['duplicates']} duplicates + {counts['quarantined']} quarantined = {total} "
            "(were input files changing while the job read them?)")



def _commit(spark: SparkSession, root: Path, manifest: st.Manifest, options: JobOptions,
            progress: Progress) -> tuple[dict[str, Any], dict[str, int]]:
    """Read what is new into the state and commit it, once the counts add up; returns the counts and the batch's.

    What an uncommitted run wrote is nobody's: removed at once on a failure (a kill leaves it to
    the next run's garbage collection).
    """
    run_no = manifest.run + 1
    try:
        batch = ingest(spark, options, root, manifest, progress)
        manifest.run = run_no
        counts: dict[str, Any] = {
            "input_records": manifest.counts["input_records"],
            "quarantined": manifest.counts["quarantined"],
            "duplicates": manifest.counts["usable"] - manifest.counts["ids"],
            "reports": total_of(rollups(spark, root, manifest, None, None), "cs", "reports"),
        }
        error = accounting_error(counts)
        if error:
            raise KprobeError(error)
        st.commit(root, manifest)  # the run counts from here on; the outputs are rebuilt from the state
    except BaseException:
        for table in ("records", "rollups", "copies"):
            shutil.rmtree(root / table / f"run={run_no}", ignore_errors=True)
        raise
    return counts, batch


def _quarantine(spark: SparkSession, root: Path, manifest: st.Manifest) -> DataFrame:
    """The quarantined records of every run, as the `quarantine` output has them."""
    parts = [(r, k, d) for r, k, d in manifest.records if k == "q"]
    quarantined = read_parts(spark, root, "records", parts)
    if quarantined is None:
        return local.rows(spark, [], QUARANTINE)
    return quarantined.select("file", "reason", "record")


def _run(spark: SparkSession, options: JobOptions, root: Path, progress: Progress) -> dict[str, Any]:
    manifest = st.prepare(root, options.full)
    st.collect_garbage(root, manifest)
    counts, batch = _commit(spark, root, manifest, options, progress)
    st.collect_garbage(root, manifest)
    window = rollups(spark, root, manifest, options.since, options.until)  # small; every output merges it
    merged = {"endpoint_vantage": merge.endpoint_vantage, "cluster_summary": merge.cluster_summary,
              "findings": merge.findings_by_day, "findings_by_endpoint": merge.findings_by_endpoint,
              "advertised_changes": merge.advertised_changes, "hourly": merge.hourly}
    outputs: dict[str, Callable[[], DataFrame]] = {name: partial(make, window) for name, make in merged.items()}
    outputs["quarantine"] = partial(_quarantine, spark, root, manifest)
    counts["quarantine_reasons"] = dict(sorted(manifest.counts["quarantine_reasons"].items()))
    counts["new_records"] = batch["input_records"]
    try:
        minutes = page_minutes(spark, root, manifest, options, window) if options.html else None
        worst = write(spark, outputs, counts, options, progress, root, minutes)
    finally:
        window.unpersist()
    return {"counts": counts, "worst": worst}
