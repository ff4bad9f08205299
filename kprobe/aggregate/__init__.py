"""`kprobe aggregate`: a PySpark job over reports from many vantages (needs the `spark` extra).

schema.py derives the Spark schema from the report's JSON Schema, transforms.py holds the pure
DataFrame functions; plan.py decides without Spark whether a run has anything to do, job.py runs
it (jvm.py the session, ingest.py the incremental state, outputs.py the writing), page.py draws
report.html, generate.py makes synthetic reports for tests and benchmarks. Nothing here is
imported by `kprobe probe`.
"""
