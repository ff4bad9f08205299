"""`kprobe serve`: what a scrape adds to the probe itself, and memory under 50 scrapes a second.

    python bench/bench_serve.py [--scrapes 30] [--rate 50] [--seconds 60]

On the lab's three-brokers cluster (CLIENT listener, healthy), in one run:
1. Latency. `--scrapes` scrapes of /probe one after another: each scrape's wall time against the
   probe's own duration in its answer (`kprobe_probe_duration_seconds`), and the peer a cron job
   would use, `kprobe probe --format prometheus` as a whole process. Target: a scrape
   within 50 ms of the probe's own duration.
2. Memory. `--rate` scrapes a second for `--seconds` (a thread per in-flight scrape, paced), with the
   exporter's resident memory read from /proc every 5 s. Target: flat.
Results print as Markdown to paste into bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from kprobe.lab import start_lab

KPROBE = [sys.executable, "-m", "kprobe"]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def scrape(url: str) -> tuple[float, float]:
    """(wall seconds, the probe's own seconds) of one scrape."""
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read().decode()
    wall = time.perf_counter() - started
    match = re.search(r"^kprobe_probe_duration_seconds\{[^}]*\} (\S+)$", body, re.M)
    assert match, body[:500]
    return wall, float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scrapes", type=int, default=30)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    lab = start_lab("three-brokers", backend="native")
    serve = subprocess.Popen([*KPROBE, "serve", "--listen", "127.0.0.1:0", "--allow-target", "127.0.0.3*:*",
                              "--max-concurrent", "64"], stderr=subprocess.PIPE, text=True)
    try:
        assert serve.stderr is not None
        base = re.search(r"http://\S+", serve.stderr.readline()).group(0)  # type: ignore[union-attr]
        target = lab.bootstrap("CLIENT")
        url = f"{base}/probe?target={target}"
        scrape(url)  # warm: the first probe imports the probe path
        pairs = [scrape(url) for _ in range(args.scrapes)]
        cli = []
        for _ in range(max(3, args.scrapes // 3)):
            started = time.perf_counter()
            subprocess.run([*KPROBE, "probe", "-b", target, "--format", "prometheus"], capture_output=True, check=False)
            cli.append(time.perf_counter() - started)
        over = [wall - own for wall, own in pairs]
        print("| what | median | p90 |\n| --- | --- | --- |")
        own = statistics.median(o for _, o in pairs)
        print(f"| the probe's own duration (in the answer) | {own * 1000:.1f} ms | |")
        print(f"| a scrape of /probe, wall | {statistics.median(w for w, _ in pairs) * 1000:.1f} ms | "
              f"{sorted(w for w, _ in pairs)[int(0.9 * len(pairs))] * 1000:.1f} ms |")
        print(f"| scrape over the probe's own duration | {statistics.median(over) * 1000:.1f} ms | "
              f"{sorted(over)[int(0.9 * len(over))] * 1000:.1f} ms |")
        print(f"| `kprobe probe --format prometheus`, a process per probe (peer) | {statistics.median(cli) * 1000:.1f} "
              f"ms | |")
        samples: list[tuple[float, float]] = []
        done = failed = 0
        lock = threading.Lock()

        def one() -> None:
            nonlocal done, failed
            try:
                scrape(url)
                ok = True
            except Exception:
                ok = False
            with lock:
                done += ok
                failed += not ok

        started = time.monotonic()
        next_sample = started
        with ThreadPoolExecutor(max_workers=64) as pool:
            n = 0
            while (now := time.monotonic()) < started + args.seconds:
                if now >= next_sample:
                    samples.append((now - started, rss_mb(serve.pid)))
                    next_sample += 5
                due = started + n / args.rate
                if now < due:
                    time.sleep(min(due - now, 0.01))
                    continue
                pool.submit(one)
                n += 1
        samples.append((time.monotonic() - started, rss_mb(serve.pid)))
        elapsed = time.monotonic() - started
        print(f"\n{done} scrapes answered ({failed} failed) in {elapsed:.0f} s: {done / elapsed:.1f} a second; "
              "exporter RSS:\n")
        print("| second | RSS |\n| --- | --- |")
        for at, mb in samples:
            print(f"| {at:.0f} | {mb:.1f} MB |")
    finally:
        serve.terminate()
        serve.wait(timeout=15)
        lab.stop()


if __name__ == "__main__":
    main()
