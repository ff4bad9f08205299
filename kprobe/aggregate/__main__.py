"""Entry point for spark-submit: `spark-submit --py-files kprobe.zip -m kprobe.aggregate ...`,
or `python -m kprobe.aggregate`. The master comes from spark-submit unless --master is given.
"""

from __future__ import annotations

import argparse
import os
import sys

from kprobe.aggregate.job import JobOptions, run, session, summary_lines


def main(argv: list[str] | None = None) -> int:
    """Parse, run, print the summary."""
    parser = argparse.ArgumentParser(prog="kprobe.aggregate", description=__doc__)
    parser.add_argument("inputs", nargs="*", help="report files or directories (any path Spark reads)")
    parser.add_argument("--kafka", action="append", default=[], help="BOOTSTRAP/TOPIC to read reports from")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--since", default=None)
    parser.add_argument("--until", default=None)
    parser.add_argument("--no-html", action="store_true")
    args = parser.parse_args(argv)
    # Under spark-submit the JVM gateway exists and carries spark-submit's master: keep it.
    master = args.master or (None if os.environ.get("PYSPARK_GATEWAY_PORT") else "local[*]")
    topics = tuple(tuple(k.rsplit("/", 1)) for k in args.kafka)
    if not args.inputs and not topics:
        parser.error("give report files or directories, or --kafka BOOTSTRAP/TOPIC")
    spark = session(master, kafka=bool(topics))
    result = run(spark, JobOptions(tuple(args.inputs), args.out, master, args.since, args.until, not args.no_html,
                                   topics))
    print("\n".join(summary_lines(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
