"""SCRAM against PLAIN: what kprobe's own SCRAM costs a whole probe, side by side in one run.

    python bench/bench_sasl.py [--runs 30] [--timeout 2] [--dev]

Target: a healthy three-broker probe over SCRAM costs at most 1.3 x the same probe
over PLAIN. Why it could cost more: SCRAM derives its keys with PBKDF2 (4096 iterations; kprobe
caches the derived keys per process, `kprobe.kafka.sasl._keys`), and its exchange takes two
SaslAuthenticate round trips where PLAIN takes one, on the bootstrap connection and again on
every identity check (one connection per advertised endpoint).

The cluster: three real brokers (Kafka 4.x, native lab) on 127.0.0.65-67, each with a PLAIN, a
SCRAM-SHA-256 and a SCRAM-SHA-512 listener (SASL_PLAINTEXT, one mechanism each) advertising its
own address, and user alice. It is defined here, not in the lab's scenarios: it exists for this
comparison only, and the lab's `sasl` and `scram` scenarios are one broker each. The three
listeners live in the same three JVMs, so the mechanisms are compared on identical brokers.

What is timed, as bench/bench_probe.py does it: whole `kprobe probe --json` CLI runs of a wheel of
this checkout installed in its own venv (`--dev` runs the checkout instead), bootstrapping with
broker 0's IP literal (one bootstrap, three advertised endpoints, three identity checks: the
healthy case of bench_probe.py), then with all three brokers' (three bootstraps, three
endpoints). Runs are interleaved (PLAIN, SHA-256, SHA-512, the order rotating each round) after
one untimed warm-up run of each, and every run's report is checked (exit 0, three reachable
endpoints, identity `match` on each, metadata `via: kprobe`): a fast failure is no figure.
Medians are reported, with SCRAM / PLAIN.

Then where the time goes, in-process: one PBKDF2 derivation per hash; the healthy probe run by
`run_probe` with the key cache cleared before each run (as a fresh process has it) and with it
warm, and how many derivations one run makes (the cache's misses); one connection's SASL
exchange alone, keys warm (the extra round trip).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_probe import install_wheel

from kprobe.lab.native import NativeLab
from kprobe.lab.scenarios import ListenerSpec, NodeSpec, Scenario

MECHANISMS = {"PLAIN": "SASL_PLAIN", "SCRAM-SHA-256": "SASL_SCRAM_256", "SCRAM-SHA-512": "SASL_SCRAM_512"}
KPROBE = [sys.executable, "-m", "kprobe"]


def _node(node_id: int) -> NodeSpec:
    listeners = [ListenerSpec("INTERNAL", inter_broker=True, note="inter-broker, PLAINTEXT")]
    listeners += [ListenerSpec(name, protocol="SASL_PLAINTEXT", mechanism=mech, note=f"SASL/{mech}")
                  for mech, name in MECHANISMS.items()]
    return NodeSpec(node_id=node_id, address=f"127.0.0.{65 + node_id}", listeners=tuple(listeners))


SCENARIO = Scenario(
    name="sasl-three",
    summary="three brokers, each with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 listeners (bench only)",
    nodes=tuple(_node(i) for i in range(3)),
    users=("alice",),
)


def props(lab: NativeLab, mechanism: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": "alice",
            "sasl.password": lab.passwords["alice"]}


def cli_args(lab: NativeLab, mechanism: str, bootstraps: int, timeout: float) -> list[str]:
    """The CLI run; PLAINTEXT (the inter-broker listener, no SASL) is the reference without authentication."""
    listener = MECHANISMS.get(mechanism, "INTERNAL")
    boot = ",".join(lab.real_endpoint(listener, n) for n in range(bootstraps))
    cmd = [*KPROBE, "probe", "-b", boot, "--json", "--timeout", f"{timeout:g}"]
    if mechanism == "PLAINTEXT":
        return cmd
    # The password goes in a -F file: a command line is visible to every process on the machine.
    secrets_file = Path(lab.workdir) / f"bench-{mechanism}.properties"
    secrets_file.write_text("".join(f"{k}={v}\n" for k, v in props(lab, mechanism).items()))
    return [*cmd, "-F", str(secrets_file)]


def check(done: subprocess.CompletedProcess[str], bootstraps: int, mechanism: str) -> None:
    """A timed run counts only if it was the healthy probe it claims to be."""
    assert done.returncode == 0, (done.returncode, done.stderr[-500:], done.stdout[-1000:])
    report = json.loads(done.stdout)
    protocol = "PLAINTEXT" if mechanism == "PLAINTEXT" else "SASL_PLAINTEXT"
    assert [b["protocol"] for b in report["bootstraps"]] == [protocol] * bootstraps, report["bootstraps"]
    assert [b["via"] for b in report["bootstraps"]] == ["kprobe"] * bootstraps, report["bootstraps"]
    assert [(e["status"], e["identity"]["status"]) for e in report["endpoints"]] == [("reachable", "match")] * 3


def side_by_side(lab: NativeLab, runs: int, timeout: float, bootstraps: int) -> dict[str, tuple[float, float, float]]:
    """Per mechanism: median wall seconds, its interquartile range, and the median CPU seconds of the run.

    Runs are interleaved with the order rotating each round, so a machine that slows down for a
    while slows every mechanism alike. CPU time (user + system of the child, from getrusage) is
    shown beside the wall time because it is what SCRAM could add (PBKDF2, HMACs), and it is far
    less disturbed by other work on the machine than the wall time.
    """
    cmds = {mech: cli_args(lab, mech, bootstraps, timeout) for mech in (*MECHANISMS, "PLAINTEXT")}
    for mech, cmd in cmds.items():  # warm-up: the brokers' first connections of each listener, page cache
        check(subprocess.run(cmd, capture_output=True, text=True, check=False), bootstraps, mech)
    wall: dict[str, list[float]] = {mech: [] for mech in cmds}
    cpu: dict[str, list[float]] = {mech: [] for mech in cmds}
    order = list(cmds)
    for round_no in range(runs):
        shift = round_no % len(order)
        for mech in order[shift:] + order[:shift]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            done = subprocess.run(cmds[mech], capture_output=True, text=True, check=False)
            wall[mech].append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[mech].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            check(done, bootstraps, mech)
    out = {}
    for mech in cmds:
        q1, _, q3 = statistics.quantiles(wall[mech], n=4)
        out[mech] = (statistics.median(wall[mech]), q3 - q1, statistics.median(cpu[mech]))
    return out


def in_process(lab: NativeLab, runs: int, timeout: float, bootstraps: int) -> dict[str, tuple[float, float, int]]:
    """Per mechanism: median run_probe ms with a cold key cache, with a warm one, and derivations per cold run.

    The derivations are the cache's misses: one per run when every connection reuses the keys;
    more when connections that run at once each miss before the first has filled the cache.
    """
    from kprobe.kafka import sasl
    from kprobe.options import parse_address
    from kprobe.runs.probe import ProbeOptions, run_probe

    out = {}
    samples: dict[tuple[str, bool], list[float]] = {}
    misses: dict[str, list[int]] = {}
    for _ in range(runs):
        for mech, listener in MECHANISMS.items():
            boot = [parse_address(lab.real_endpoint(listener, n)) for n in range(bootstraps)]
            options = ProbeOptions(bootstraps=boot, props=props(lab, mech), timeout=timeout)
            for cold in (True, False):
                if cold:
                    sasl._keys.cache_clear()
                before = sasl._keys.cache_info().misses
                started = time.perf_counter()
                report = run_probe(options)
                samples.setdefault((mech, cold), []).append(time.perf_counter() - started)
                assert report.status == "ok", report.findings
                if cold:
                    misses.setdefault(mech, []).append(sasl._keys.cache_info().misses - before)
    for mech in MECHANISMS:
        out[mech] = (statistics.median(samples[(mech, True)]) * 1000, statistics.median(samples[(mech, False)]) * 1000,
                     max(misses[mech]))
    return out


def exchange_ms(lab: NativeLab, runs: int, timeout: float) -> dict[str, tuple[float, float]]:
    """Per mechanism: median ms of one connection's connect + ApiVersions, and of its SASL exchange alone.

    The keys are warm (one exchange before timing), so this is the protocol's own cost: PLAIN is one
    SaslAuthenticate round trip, SCRAM two plus a few HMACs on each side.
    """
    from kprobe.kafka.connection import KafkaConnection
    from kprobe.kafka.security import security_from

    out = {}
    for mech, listener in MECHANISMS.items():
        ip, port = lab.real_endpoint(listener, 0).rsplit(":", 1)
        security = security_from(props(lab, mech))
        opened, exchanged = [], []
        for i in range(runs + 1):
            with KafkaConnection(ip, int(port), timeout=timeout, security=security) as conn:
                started = time.perf_counter()
                conn.connect()
                conn.negotiate()
                middle = time.perf_counter()
                conn.authenticate()
                ended = time.perf_counter()
            if i:  # the first one warms the key cache and the broker's path
                opened.append(middle - started)
                exchanged.append(ended - middle)
        out[mech] = (statistics.median(opened) * 1000, statistics.median(exchanged) * 1000)
    return out


def pbkdf2_ms(runs: int) -> dict[str, float]:
    """One 4096-iteration derivation per hash, as a fresh process pays it (cache cleared)."""
    from kprobe.kafka import sasl

    out = {}
    for mech, hash_name in sasl.SCRAM_HASHES.items():
        values = []
        for i in range(runs):
            sasl._keys.cache_clear()
            started = time.perf_counter()
            sasl._keys(hash_name, b"a-password-of-the-usual-size", f"salt-{i}".encode(), 4096)
            values.append(time.perf_counter() - started)
        out[mech] = statistics.median(values) * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--dev", action="store_true", help="run this checkout as it is, not an installed wheel")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench/sasl"))
    args = parser.parse_args()
    if not args.dev:
        bin_dir = install_wheel(args.work)
        KPROBE[:] = [str(bin_dir / "kprobe")]
        print(f"kprobe: a wheel of this checkout installed in {bin_dir.parent}\n")
    else:
        print("kprobe: this checkout, as it is (--dev)\n")
    print(f"# SCRAM vs PLAIN ({os.cpu_count()} cores, timeout {args.timeout:g}s, median of {args.runs}, "
          "three-broker native lab)\n")
    with NativeLab(SCENARIO).start() as lab:
        print("| case | PLAINTEXT (no SASL) | PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | SHA-256 / PLAIN "
              "| SHA-512 / PLAIN |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for bootstraps, label in ((1, "1 bootstrap, 3 endpoints"), (3, "3 bootstraps, 3 endpoints")):
            med = side_by_side(lab, args.runs, args.timeout, bootstraps)
            for what, index, unit in (("wall", 0, "s"), ("CPU", 2, "s")):
                cells = [f"{med[m][index]:.3f}{unit}" + (f" (IQR {med[m][1] * 1000:.0f} ms)" if index == 0 else "")
                         for m in ("PLAINTEXT", *MECHANISMS)]
                plain = med["PLAIN"][index]
                print(f"| {label}, {what} | {' | '.join(cells)} | {med['SCRAM-SHA-256'][index] / plain:.2f}x | "
                      f"{med['SCRAM-SHA-512'][index] / plain:.2f}x |")
        print("\nin-process `run_probe`, 3 endpoints, identity on (median):\n")
        print("| case | mechanism | cold key cache | warm key cache | PBKDF2 derivations per cold run (most) |")
        print("| --- | --- | --- | --- | --- |")
        for bootstraps in (1, 3):
            for mech, (cold, warm, derivations) in in_process(lab, args.runs, args.timeout, bootstraps).items():
                print(f"| {bootstraps} bootstrap{'s' if bootstraps > 1 else ''} | {mech} | {cold:.1f} ms | "
                      f"{warm:.1f} ms | {derivations} |")
        print("\none connection to broker 0, keys warm (median):\n")
        print("| mechanism | connect + ApiVersions | SASL exchange |")
        print("| --- | --- | --- |")
        for mech, (opened, exchanged) in exchange_ms(lab, args.runs * 4, args.timeout).items():
            print(f"| {mech} | {opened:.2f} ms | {exchanged:.2f} ms |")
    print("\none PBKDF2 derivation (4096 iterations, hashlib):",
          ", ".join(f"{mech} {ms:.2f} ms" for mech, ms in pbkdf2_ms(args.runs * 4).items()))


if __name__ == "__main__":
    main()
