"""Write synthetic kprobe reports as JSON Lines, for the aggregation's tests and benchmarks.

    python bench/generate_reports.py OUT_DIR --vantages 20 --clusters 10 --hours 24
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kprobe.aggregate.generate import reports, write_jsonl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--vantages", type=int, default=20)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--hours", type=float, default=24)
    parser.add_argument("--every", type=int, default=60, help="seconds between runs of one vantage")
    args = parser.parse_args()
    n = write_jsonl(args.out, reports(args.vantages, args.clusters, args.hours, args.every))
    print(f"{n} reports ({3 * n} endpoint observations) in {args.out}")


if __name__ == "__main__":
    main()
