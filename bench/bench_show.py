"""`kprobe show`: start-up on a 200-broker report, and `--summary`'s pace over 10,000 saved reports.

    python bench/bench_show.py [--runs 10] [--reports 10000]

1. Start-up. A real report of a 200-broker cluster: `kprobe probe -o` against a scripted broker
   that advertises 200 brokers (half answering Kafka, half blackholed, as bench_probe.py does).
   Timed: `kprobe --help` (the CLI's own start), `kprobe show` of a three-broker report and of
   the 200-broker one. Target: the 200-broker `show` at most 50 ms over `kprobe --help`.
2. Pace. 10,000 copies of a recorded three-broker report (tests/data/reports) in `--out`'s layout,
   with their own ids and times. Timed: `kprobe show DIR --summary`, and the peer a person would
   reach for, jq printing the same fields from the same files (`find -exec jq {} +`). Target: at
   least 5,000 reports a second.
Results print as Markdown to paste into bench/NOTES.md.

kprobe runs as users run it: a wheel of this checkout in its own venv, byte-compiled by pip
(bench_probe.install_wheel; `--dev` runs the checkout instead, which, where PYTHONDONTWRITEBYTECODE
is set, compiles every module from source on every start).
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))

from kprobe.output.files import report_path  # noqa: E402

KPROBE = [sys.executable, "-m", "kprobe"]
RECORDED = ROOT / "tests" / "data" / "reports" / "2026-11-23-7c779c2-blackholed.json"


def timed(cmd: list[str], runs: int) -> float:
    """Median wall seconds of `runs` runs (after one warm-up)."""
    subprocess.run(cmd, capture_output=True, check=True)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def big_report(path: Path, count: int = 200) -> None:
    """A real `kprobe probe -o` report of a cluster advertising `count` brokers."""
    from bench_probe import advertising_cluster

    with advertising_cluster(count) as address:
        subprocess.run([*KPROBE, "probe", "-b", address, "--timeout", "0.5", "--deadline", "5", "-o", str(path)],
                       capture_output=True, check=False)
    assert len(json.loads(path.read_text())["endpoints"]) == count


def out_dir(root: Path, n: int) -> None:
    """n copies of the recorded report in --out's layout, each with its own id and minute."""
    base = json.loads(RECORDED.read_text())
    for i in range(n):
        report = copy.deepcopy(base)
        report["id"] = str(uuid.UUID(int=i + 1))
        report["started_at"] = f"2026-11-{1 + i // 1440:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00.000Z"
        report["vantage"]["name"] = ("office", "vpn", "dc1", "dc2")[i % 4]
        path = report_path(root, report["vantage"]["name"], report["started_at"], report["id"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--reports", type=int, default=10_000)
    parser.add_argument("--dev", action="store_true", help="run this checkout as it is, not an installed wheel")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench/show"))
    args = parser.parse_args()
    if not args.dev:
        from bench_probe import install_wheel

        bin_dir = install_wheel(args.work)
        KPROBE[:] = [str(bin_dir / "kprobe")]
        print(f"kprobe: a wheel of this checkout installed in {bin_dir.parent}\n")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        big = work / "big.json"
        big_report(big)
        cli = timed([*KPROBE, "--help"], args.runs)
        small = timed([*KPROBE, "show", str(RECORDED)], args.runs)
        large = timed([*KPROBE, "show", str(big)], args.runs)
        print("| command | median wall time | over `kprobe --help` |\n| --- | --- | --- |")
        print(f"| `kprobe --help` | {cli * 1000:.0f} ms | |")
        print(f"| `kprobe show` of a 3-broker report | {small * 1000:.0f} ms | {(small - cli) * 1000:+.0f} ms |")
        print(f"| `kprobe show` of a 200-broker report ({big.stat().st_size // 1024} KiB) | {large * 1000:.0f} ms | "
              f"{(large - cli) * 1000:+.0f} ms |")
        root = work / "out"
        out_dir(root, args.reports)
        runs = max(3, args.runs // 3)
        show = timed([*KPROBE, "show", str(root), "--summary"], runs)
        rows = [("`kprobe show DIR --summary`", show)]
        if shutil.which("jq"):
            jq = timed(["find", str(root), "-name", "*.json", "-exec", "jq", "-r",
                        "[.started_at, .vantage.name, .summary.status] | @tsv", "{}", "+"], runs)
            rows.append(("`find DIR -name '*.json' -exec jq -r '[.started_at, .vantage.name, .summary.status] | "
                         "@tsv' {} +`", jq))
        print(f"\n{args.reports} reports in `--out`'s layout:\n")
        print("| command | median wall time | reports per second | ratio to kprobe |\n| --- | --- | --- | --- |")
        for label, seconds in rows:
            print(f"| {label} | {seconds:.2f} s | {args.reports / seconds:,.0f} | {seconds / show:.2f} |")


if __name__ == "__main__":
    main()
