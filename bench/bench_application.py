"""What the application's view costs a probe: this checkout against an earlier one, in the same run.

    python bench/bench_application.py [--baseline REF] [--runs 31]

A plain probe of a healthy cluster asks nothing more than before: the internal topics are in the
metadata it already fetches. A probe of a cluster whose `__consumer_offsets` was never created asks
two more small requests on the bootstrap connection (the topic by name, the brokers' settings), and a
probe with `--group` one FindCoordinator. This measures each against the checkout at REF (default:
the last commit before the application's view), both installed as wheels in venvs of their own and
byte-compiled, as users run them, alternating run by run on one lab so that the machine's drift
falls on both alike.

The lab: `groups` (three brokers). "healthy": its __consumer_offsets and __transaction_state made and
led everywhere; "fresh": the same cluster's `three-brokers` twin, whose internal topics were never
made. Results print as a Markdown table to paste into bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_probe import REPO, install_wheel

from kprobe.lab import start_lab

BEFORE = "54004bb"  # the last commit before the application's view


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _pairs(a: list[str], b: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall times of `a` and `b`, alternated run by run after one warm-up each."""
    for cmd in (a, b):
        subprocess.run(cmd, capture_output=True, check=False)
    ta, tb = [], []
    for _ in range(runs):
        for cmd, out in ((a, ta), (b, tb)):
            started = time.perf_counter()
            subprocess.run(cmd, capture_output=True, check=False)
            out.append(time.perf_counter() - started)
    return ta, tb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BEFORE, help="the earlier commit to compare with")
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kprobe-bench-app-") as tmp:
        work = Path(tmp)
        old_tree = work / "old-tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(old_tree), args.baseline],
                       check=True)
        try:
            new_bin = install_wheel(work / "new")
            old_bin = install_wheel(work / "old", old_tree)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(old_tree)], check=False)
        rows = []
        with start_lab("groups") as groups, start_lab("three-brokers") as fresh:
            healthy = groups.bootstrap("CLIENT")
            # Both internal topics made and led, as on any cluster that has had a consumer and a transaction.
            subprocess.run([str(new_bin / "kprobe"), "probe", "-b", healthy, "--group", "warm-up",
                            "--transactional-id", "warm-up"], capture_output=True, check=False)
            time.sleep(2)
            cases = [
                ("healthy cluster, nothing named", healthy, []),
                ("cluster that never had a group, nothing named", fresh.bootstrap("CLIENT"), []),
            ]
            for label, bootstrap, extra in cases:
                new, old = _pairs([str(new_bin / "kprobe"), "probe", "-b", bootstrap, *extra],
                                  [str(old_bin / "kprobe"), "probe", "-b", bootstrap, *extra], args.runs)
                rows.append((label, _median_ms(old), _median_ms(new)))
            plain, named = _pairs([str(new_bin / "kprobe"), "probe", "-b", healthy],
                                  [str(new_bin / "kprobe"), "probe", "-b", healthy, "--group", "billing"], args.runs)
            rows.append(("healthy cluster, --group billing (against no group, this checkout)", _median_ms(plain),
                         _median_ms(named)))
    print(f"| probe ({args.runs} runs each, medians) | before | now | difference |")
    print("| --- | --- | --- | --- |")
    for label, before, now in rows:
        print(f"| {label} | {before:.1f} ms | {now:.1f} ms | {now - before:+.1f} ms |")


if __name__ == "__main__":
    main()
