"""`kprobe list` against `kcat -L` on 100,000 partitions, side by side in one run.

    python bench/bench_list.py [--runs 15] [--dev] [--work DIR]

The brokers: three scripted brokers (tests/support/hostile_broker.py) on 127.0.0.61-63, each answering a
realistic Metadata response of 1,000 topics of 100 partitions (replicas and ISRs of 3, leaders
spread over the three, all three advertised), in the version each client asks: kcat's librdkafka
2.0 asks v4, kprobe v8 (the highest they offer). A real 100,000-partition cluster does not fit on
a 2-core machine; the answer's bytes are what a broker of that size sends.

Measured, each a whole run of the command with stdout redirected to a file, interleaved with the
order rotating each round after one untimed run of each: wall time, the child's own peak RSS and CPU time
(wait4). `kcat -L` against `kprobe list`, `kcat -L -J` against `kprobe list -J`, and each with
`--reachability`. Targets: kprobe within 2.5 x kcat's time and 3 x its peak RSS; 1.5 x its time.
A second table does the same on a degraded cluster (broker 2 out of every ISR it was in: two
partitions in three under-replicated, so each topic mixes partition shapes), without a target.
Before timing, each output is checked: the text equals kcat's line for line (but for who
answered), the JSON carries every key and value of kcat's.

kprobe runs as users run it: a wheel of this checkout installed into its own venv, byte-compiled
(bench_probe.py says why); `--dev` runs the checkout as it is. Prints Markdown for bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "bench"))

from hostile_broker import Broker, HostileBroker, Partition, Script, Topic  # noqa: E402

HOSTS = ("127.0.0.61", "127.0.0.62", "127.0.0.63")


def cluster(degraded: bool) -> list[Topic]:
    """1,000 topics of 100 partitions, replicas of 3 led round the brokers (as Kafka assigns them)."""
    topics = []
    for t in range(1000):
        partitions = []
        for p in range(100):
            leader = (t + p) % 3
            replicas = [leader, (leader + 1) % 3, (leader + 2) % 3]
            isrs = [r for r in replicas if r != 2] if degraded and leader != 2 else replicas
            partitions.append(Partition(p, leader, replicas, isrs))
        topics.append(Topic(f"topic-{t:04d}".encode(), partitions))
    return topics


class Cluster:
    """Three scripted brokers that advertise each other, serving one script."""

    def __init__(self, degraded: bool) -> None:
        self.brokers = [HostileBroker(Script(), host=h) for h in HOSTS]
        script = Script(brokers=[Broker(i, b.host.encode(), b.port) for i, b in enumerate(self.brokers)],
                        topics=cluster(degraded))
        first = self.brokers[0]
        first.answer_with(script)
        kcat_body = first._metadata(4)  # built once, shared: encoding 5 MB takes seconds in Python
        for b in self.brokers:
            b.script, b.metadata, b._other = script, first.metadata, {4: kcat_body}

    def __enter__(self) -> Cluster:
        for b in self.brokers:
            b.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for b in self.brokers:
            b.__exit__()

    @property
    def bootstrap(self) -> str:
        return self.brokers[0].address


# Each command starts from a small interpreter of its own (-I -S, about 9 MB), which times it and
# reads its peak RSS with wait4: a child forked from this process would inherit this process's
# high-water mark (hundreds of MB of scripted topics) as its own ru_maxrss.
SPAWN = """
import json, os, subprocess, sys, time
with open(sys.argv[1], "wb") as sink:
    started = time.perf_counter()
    child = subprocess.Popen(sys.argv[2:], stdout=sink, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
print(json.dumps([seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status),
                  usage.ru_utime + usage.ru_stime]))
"""


def run(cmd: list[str], out: Path) -> tuple[float, float, int, float]:
    """Wall seconds, the command's own peak RSS in MB, exit code, CPU seconds (user + system, all its threads);
    stdout into `out`. CPU time is what a machine busy with other work disturbs least."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", SPAWN, str(out), *cmd], capture_output=True, text=True,
                          check=True)
    seconds, rss, code, cpu = json.loads(done.stdout)
    return seconds, rss, code, cpu


def normalise(text: str) -> list[str]:
    """kcat's lines: it names the broker that answered; kprobe adds lines (" N partitions ...")."""
    lines = [line for line in text.splitlines() if not re.match(r" \d+ partitions ", line)]  # kprobe's own
    lines[0] = re.sub(r"\(from broker .*\):$", "(from broker X):", lines[0])
    return [line.replace(" (controller)", "") for line in lines]


def agree(kcat: object, ours: object, path: str = "") -> None:
    """Every key kcat's JSON has, kprobe's has with the same value (but who answered)."""
    if isinstance(kcat, dict):
        assert isinstance(ours, dict), path
        for key, value in kcat.items():
            if key != "originating_broker":
                agree(value, ours[key], f"{path}.{key}")
    elif isinstance(kcat, list):
        assert isinstance(ours, list) and len(ours) == len(kcat), path
        for i, (a, b) in enumerate(zip(kcat, ours, strict=True)):
            agree(a, b, f"{path}[{i}]")
    else:
        assert kcat == ours, f"{path}: kcat {kcat!r}, kprobe {ours!r}"


def check_outputs(cases: dict[str, list[str]], work: Path) -> None:
    """The outputs timed are the outputs promised: kcat's lines, and a superset of kcat's JSON."""
    outs = {}
    for label, cmd in cases.items():
        _, _, code, _ = run(cmd, work / "check.out")
        assert code in (0, 1), (label, code)
        outs[label] = (work / "check.out").read_text()
    assert normalise(outs["kprobe list"]) == normalise(outs["kcat -L"]), "text differs from kcat's"
    assert outs["kprobe list --reachability"].count("[reachable from here]") == 3
    theirs = json.loads(outs["kcat -L -J"])
    for label in ("kprobe list -J", "kprobe list -J --reachability"):
        agree(theirs, json.loads(outs[label]))


def measure(bootstrap: str, kprobe: list[str], runs: int, work: Path,
            baseline: list[str] | None = None) -> dict[str, tuple[float, float, float]]:
    """Median wall seconds, median peak RSS (MB) and median CPU seconds per command."""
    cases = {
        "kcat -L": ["kcat", "-b", bootstrap, "-L"],
        "kprobe list": [*kprobe, "list", "-b", bootstrap],
        "kcat -L -J": ["kcat", "-b", bootstrap, "-L", "-J"],
        "kprobe list -J": [*kprobe, "list", "-b", bootstrap, "-J"],
        "kprobe list --reachability": [*kprobe, "list", "-b", bootstrap, "--reachability"],
        "kprobe list -J --reachability": [*kprobe, "list", "-b", bootstrap, "-J", "--reachability"],
    }
    check_outputs(cases, work)
    if baseline:  # another kprobe, timed beside (before and after a change, in one run)
        cases["baseline: kprobe list"] = [*baseline, "list", "-b", bootstrap]
        cases["baseline: kprobe list -J"] = [*baseline, "list", "-b", bootstrap, "-J"]
    samples: dict[str, list[tuple[float, float, float]]] = {label: [] for label in cases}
    labels = list(cases)
    for i in range(runs):
        for label in labels[i % len(labels):] + labels[:i % len(labels)]:
            seconds, rss, _, cpu = run(cases[label], work / "out")
            samples[label].append((seconds, rss, cpu))
    return {label: (statistics.median(s for s, _, _ in got), statistics.median(r for _, r, _ in got),
                    statistics.median(c for _, _, c in got)) for label, got in samples.items()}


def table(results: dict[str, tuple[float, float, float]], targets: bool) -> None:
    peers = {"kprobe list": "kcat -L", "kprobe list -J": "kcat -L -J", "kprobe list --reachability": "kcat -L",
             "kprobe list -J --reachability": "kcat -L -J", "baseline: kprobe list": "kcat -L",
             "baseline: kprobe list -J": "kcat -L -J"}
    head = "| command | median wall | x kcat | median peak RSS | x kcat | median CPU | x kcat |"
    print(head + (" within 2.5 x time and 3 x RSS | within 1.5 x time |" if targets else ""))
    print("| --- " * (head.count("|") - 1 + 2 * targets) + "|")
    for label, (seconds, rss, cpu) in results.items():
        peer = peers.get(label)
        if peer is None:
            print(f"| `{label}` | {seconds:.3f} s | | {rss:.0f} MB | | {cpu:.3f} s | |" + (" | |" if targets else ""))
            continue
        t, m, c = seconds / results[peer][0], rss / results[peer][1], cpu / results[peer][2]
        verdict = ((" yes |" if t <= 2.5 and m <= 3 else " **no** |") + (" yes |" if t <= 1.5 else " **no** |")
                   if not label.startswith("baseline") else " | |") if targets else ""
        print(f"| `{label}` | {seconds:.3f} s | {t:.2f} | {rss:.0f} MB | {m:.2f} | {cpu:.3f} s | {c:.2f} |{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dev", action="store_true", help="run this checkout as it is, not an installed wheel")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench/list"))
    parser.add_argument("--no-degraded", action="store_true", help="skip the degraded cluster's table")
    parser.add_argument("--baseline", type=Path, help="another kprobe checkout, installed as a wheel and timed beside "
                        "(e.g. an export of the commit before a change)")
    args = parser.parse_args()
    if shutil.which("kcat") is None:
        raise SystemExit("kcat is needed as the peer: apt-get install kcat")
    from bench_probe import install_wheel

    if args.dev:
        kprobe = [sys.executable, "-m", "kprobe"]
        print("kprobe: this checkout, as it is (--dev)\n")
    else:
        kprobe = [str(install_wheel(args.work) / "kprobe")]
        print(f"kprobe: a wheel of this checkout installed in {args.work / 'venv'}\n")
    baseline = None
    if args.baseline:
        baseline = [str(install_wheel(args.work / "baseline", args.baseline.resolve()) / "kprobe")]
        print(f"baseline: a wheel of {args.baseline}\n")
    said = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False).stdout
    kcat = re.search(r"Version (\S+) .*?(librdkafka \S+)", said)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, median of {args.runs}, "
          f"kcat {' with '.join(kcat.groups()) if kcat else '(version unknown)'}\n")
    with tempfile.TemporaryDirectory() as tmp:
        for degraded in (False, True) if not args.no_degraded else (False,):
            with Cluster(degraded) as brokers:
                results = measure(brokers.bootstrap, kprobe, args.runs, Path(tmp), baseline)
            what = ("degraded: broker 2 out of the ISRs, 66,667 partitions under-replicated" if degraded
                    else "healthy")
            print(f"1,000 topics x 100 partitions, 3 brokers, {what}:\n")
            table(results, targets=not degraded)
            print()
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
