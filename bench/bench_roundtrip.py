"""What --roundtrip adds to a probe, against kcat doing the same round trip by hand, in one run.

    python bench/bench_roundtrip.py [--runs 10]

On the lab's three-brokers cluster (CLIENT listener, healthy) and a topic with one partition led by
each broker: `kprobe probe` without and with `--roundtrip`, each a whole CLI run, and the peer a
person would type: per partition, `kcat -P -p N` one record, then `kcat -C -p N -o -1 -c 1 -e` to
read it back (Debian's kcat). The target is at most 1 s added to the probe.
Results print as a Markdown table to paste into bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
import uuid

from kprobe.lab import start_lab

KPROBE = [sys.executable, "-m", "kprobe"]


def timed(cmd: list[str], stdin: str | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return seconds


def kcat_round_trip(bootstrap: str, topic: str, partitions: int) -> float:
    started = time.perf_counter()
    for p in range(partitions):
        timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", str(p)], stdin="kcat-roundtrip\n")
        timed(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(p), "-o", "-1", "-c", "1", "-e", "-q"])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is needed as the peer: apt-get install kcat")
    lab = start_lab("three-brokers", backend="native")
    try:
        bootstrap = lab.bootstrap("CLIENT")
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        timed([*KPROBE, "probe", "-b", bootstrap, "--roundtrip", topic, "--roundtrip-create"])  # also warms up
        plain, trip, peer = [], [], []
        for _ in range(args.runs):  # interleaved, so a slow moment of the machine hits all three alike
            plain.append(timed([*KPROBE, "probe", "-b", bootstrap]))
            trip.append(timed([*KPROBE, "probe", "-b", bootstrap, "--roundtrip", topic]))
            peer.append(kcat_round_trip(bootstrap, topic, 3))
    finally:
        lab.stop()
    p, t, k = (statistics.median(x) for x in (plain, trip, peer))
    print(f"| case (three-brokers lab, CLIENT, 3 partitions, median of {args.runs}) | seconds |")
    print("| --- | --- |")
    print(f"| `kprobe probe` | {p:.3f} |")
    print(f"| `kprobe probe --roundtrip` | {t:.3f} |")
    print(f"| added by --roundtrip | +{t - p:.3f} (target: at most +1 s) |")
    print(f"| kcat by hand: produce and read back each partition (6 runs) | {k:.3f} |")
    print(f"| kcat by hand / the round trip kprobe adds | {k / max(t - p, 1e-6):.1f} x |")


if __name__ == "__main__":
    main()
