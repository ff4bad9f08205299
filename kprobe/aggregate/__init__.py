"""`kprobe aggregate`: a PySpark job over reports from many vantages (needs the `spark` extra).

schema.py derives the Spark schema from the report's JSON Schema. The pure DataFrame functions, each
module one step: parse.py (records, and why one is quarantined), flatten.py (the flat rows the state
keeps), dedupe.py (one copy of each report), window.py (--since, --until), rollups.py (per-day partial
aggregates, ordering.py their one-number keys) and merge.py (every day's rollups into the outputs);
plan.py decides without Spark whether a run has anything to do, job.py runs
it (jvm.py the session, ingest.py the incremental state, outputs.py the writing), page.py draws
report.html, generate.py makes synthetic reports for tests and benchmarks. Nothing here is
imported by `kprobe probe`.
"""
