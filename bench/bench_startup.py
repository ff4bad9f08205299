"""Start-up: `kprobe probe` beside kcat and nc, `kprobe --version` and `--help`, side by side in one run.

    python bench/bench_startup.py [--runs 5] [--timeout 2] [--baseline DIR] [--dev]

A probe of a healthy cluster is mostly start-up: the network work on loopback is a few milliseconds.
Measured on the lab's three-brokers cluster (real Kafka brokers, native), CLIENT listener, whole
commands, interleaved with the order rotating each round after one untimed run of each:

- `kprobe probe -b BOOTSTRAP` against what people do by hand, `kcat -L` then `nc -z` on every
  advertised endpoint (bench_probe.py's loop). Target: at most 0.06 s more than the loop.
- `kprobe --version`. Target: at most 40 ms. And `kprobe --help`, untargeted.
- The venv's bare interpreter (`python -I -c pass`), the floor under all of them.
- With --baseline DIR, another checkout's kprobe (a wheel of it) timed beside: before and after.

Each command's CPU time (user + system, its children's included) is given beside its wall time: on
a machine busy with other work, wall time includes waiting for a core, CPU time much less so.

Before timing, the healthy probe's JSON report is checked (exit 0, every endpoint reachable and its
identity checked) and, with a baseline, its findings and endpoint verdicts equal the baseline's: a
faster start must not change what the probe finds. The modules the healthy probe imported are
counted and the Kubernetes, TLS and SASL code checked absent (tests/test_imports.py holds the
cheap commands to their lists; this is the one with brokers).

kprobe runs as users run it: a wheel of the checkout installed into its own venv, byte-compiled
(bench_probe.py says why); `--dev` runs this checkout as it is. Prints Markdown for docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_probe import install_wheel, manual_loop

from kprobe.lab import start_lab

# Must not load for a PLAINTEXT probe of a healthy cluster.
ABSENT = ("kprobe.findings.kubernetes", "kprobe.findings.shapes", "kprobe.findings.tls", "kprobe.kafka.certs",
          "kprobe.kafka.tlscontext", "kprobe.kafka.sasl", "kprobe.kafka.oauth", "kprobe.kafka.oauth_settings",
          "kprobe.kafka.msk", "kprobe.clientprops.load", "kprobe.delivery.publish", "ssl", "cryptography",
          # nor the standard modules it does without (tests/test_imports.py; pathlib only an installed kprobe)
          "dataclasses", "inspect", "logging", "uuid", "platform", "pathlib")
_RUNNER = ("import json, runpy, sys; argv = sys.argv[1:]; sys.argv = ['kprobe', *argv]\n"
           "try:\n    runpy.run_module('kprobe', run_name='__main__', alter_sys=True)\nexcept SystemExit:\n    pass\n"
           "sys.stderr.write('MODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n")


def interleaved(cases: dict[str, tuple[list[str] | str, bool]], runs: int) -> dict[str, tuple[float, float]]:
    """Median wall seconds and median CPU seconds (user + system, the command and its children) of each case;
    rounds interleave the cases, the order rotating each round.

    CPU time is the figure a busy machine disturbs least: wall time there includes waiting for a core.
    """
    names = list(cases)
    samples: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # untimed: page cache, the lab's first connections
        cmd, shell = cases[name]
        subprocess.run(cmd, shell=shell, capture_output=True, check=False)
    for round_ in range(runs):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            cmd, shell = cases[name]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run(cmd, shell=shell, capture_output=True, check=False)
            samples[name].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {n: (statistics.median(samples[n]), statistics.median(cpu[n])) for n in names}


def probe_json(kprobe: list[str], bootstrap: str, timeout: float) -> dict:
    done = subprocess.run([*kprobe, "probe", "-b", bootstrap, "--timeout", f"{timeout:g}", "-J"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return json.loads(done.stdout)


def verdicts(report: dict) -> tuple[list, list]:
    """What must not change: every finding (code, severity, text, fix) and every endpoint's verdict."""
    findings = [(f["code"], f["severity"], f["message"], f["fix"]) for f in report["findings"]]
    endpoints = sorted((e["node_id"], e["host"], e["port"], e["status"], (e.get("identity") or {}).get("status"))
                       for e in report["endpoints"])
    return findings, endpoints


def imported(python: list[str], bootstrap: str, timeout: float) -> list[str]:
    done = subprocess.run([*python, "-c", _RUNNER, "probe", "-b", bootstrap, "--timeout", f"{timeout:g}"],
                          capture_output=True, text=True, check=False)
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    return list(json.loads(line[len("MODULES "):]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--dev", action="store_true", help="run this checkout as it is, not an installed wheel")
    parser.add_argument("--baseline", type=Path, help="another kprobe checkout, installed as a wheel and timed beside")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench/startup"))
    args = parser.parse_args()
    for tool in ("kcat", "nc"):
        if not shutil.which(tool):
            sys.exit(f"bench needs {tool}: apt-get install kcat netcat-openbsd")
    if args.dev:
        python, kprobe = [sys.executable], [sys.executable, "-m", "kprobe"]
        print("kprobe: this checkout, as it is (--dev)\n")
    else:
        bin_dir = install_wheel(args.work / "current")
        python, kprobe = [str(bin_dir / "python"), "-I"], [str(bin_dir / "kprobe")]
        print(f"kprobe: a wheel of this checkout installed in {bin_dir.parent}\n")
    baseline = None
    if args.baseline:
        baseline = [str(install_wheel(args.work / "baseline", args.baseline.resolve()) / "kprobe")]
        print(f"baseline: a wheel of {args.baseline}\n")
    load = os.getloadavg()
    with start_lab("three-brokers") as lab:
        bootstrap = lab.real_endpoint("CLIENT", 0)
        report = probe_json(kprobe, bootstrap, args.timeout)
        assert report["summary"]["status"] == "ok", report["summary"]
        assert all(e["status"] == "reachable" and e["identity"]["status"] == "match" for e in report["endpoints"])
        if baseline:
            assert verdicts(report) == verdicts(probe_json(baseline, bootstrap, args.timeout)), "findings differ"
        modules = imported(python, bootstrap, args.timeout)
        loaded = sorted(m for m in ABSENT if m in modules)
        assert not loaded, f"a healthy PLAINTEXT probe imported {loaded}"
        probe = [*kprobe, "probe", "-b", bootstrap, "--timeout", f"{args.timeout:g}", "--no-color"]
        cases: dict[str, tuple[list[str] | str, bool]] = {
            "kprobe probe (healthy, 3 endpoints)": (probe, False),
            "kcat -L + nc -z per endpoint": (manual_loop(bootstrap, args.timeout), True),
            "kprobe --version": ([*kprobe, "--version"], False),
            "kprobe --help": ([*kprobe, "--help"], False),
            "python -I -c pass (the venv's interpreter)": ([*python[:1], "-I", "-c", "pass"], False),
        }
        if baseline:
            cases["baseline: kprobe probe"] = ([*baseline, *probe[len(kprobe):]], False)
            cases["baseline: kprobe --version"] = ([*baseline, "--version"], False)
            cases["baseline: kprobe --help"] = ([*baseline, "--help"], False)
        times = interleaved(cases, args.runs)
    load = (*load, *os.getloadavg())
    print(f"# start-up ({os.cpu_count()} cores, median of {args.runs}, load average {min(load):.1f} to "
          f"{max(load):.1f})\n")
    print(f"healthy probe: {len(report['endpoints'])} endpoints reachable, identities ok, "
          f"{len([m for m in modules if m.startswith('kprobe')])} kprobe modules and {len(modules)} in all imported, "
          f"none of {', '.join(ABSENT)}" + (" ; findings and verdicts equal the baseline's" if baseline else "") + "\n")
    loop, loop_cpu = times["kcat -L + nc -z per endpoint"]
    print("| command | median wall | median CPU | target | met (wall; CPU) |")
    print("| --- | --- | --- | --- | --- |")
    for name, (seconds, cpu) in times.items():
        target, met = "", ""
        if name.endswith("probe (healthy, 3 endpoints)") or name == "baseline: kprobe probe":
            target = "loop + 0.06 s"
            met = f"{_met(seconds <= loop + 0.06)} ({seconds - loop:+.3f} s); {_met(cpu <= loop_cpu + 0.06)} " \
                  f"({cpu - loop_cpu:+.3f} s)"
        elif name.endswith("kprobe --version"):
            target, met = "40 ms", f"{_met(seconds <= 0.040)}; {_met(cpu <= 0.040)}"
        print(f"| {name} | {seconds * 1000:.1f} ms | {cpu * 1000:.1f} ms | {target} | {met} |")


def _met(ok: bool) -> str:
    return "yes" if ok else "**no**"


if __name__ == "__main__":
    main()
