"""Benchmarks for `kprobe probe`, as ratios against peers measured in the same run.

    python bench/bench_probe.py [--runs 5] [--timeout 2] [--only-concurrency]

1. Side by side on the lab's three-brokers cluster: `kprobe probe` versus what people do by
   hand, `kcat -L` then `nc -z -w T` on each advertised endpoint (Debian's kcat and netcat),
   healthy (CLIENT listener) and with one blackholed endpoint (BLACKHOLED listener).
2. Concurrency: a full `kprobe probe` CLI run (interpreter start-up, metadata, resolve,
   connect, identity, report) against a broker that really advertises 200 brokers, half of
   them blackholed; reported as wall time / connect timeout (the floor is 1.0). The broker is
   the hostile-test fake broker (tests/support/hostile_broker.py) answering one Metadata with 200
   brokers: 100 at local listening sockets (the kernel completes the handshake; nothing ever
   answers a Kafka request) and 100 at blackholes (design notes, section 7). A real 200-broker
   cluster does not fit on a 2-core machine. Run with and without identity: with it, the 100
   silent listeners make the identity step wait one more timeout, by design. The old in-process
   figure (metadata from the lab + `probe_endpoints`, no start-up) is kept beside it.
3. Start-up: `kprobe --help` and the import of the probe path, next to the bare interpreter.

kprobe runs as users run it: a wheel of this checkout installed into its own venv and
byte-compiled by pip (`--dev` runs the checkout instead). A development checkout imports
through setuptools' editable finder and, where PYTHONDONTWRITEBYTECODE is set (this machine
sets it), compiles every kprobe module from source on every start: about 50 ms no user pays.
The venv borrows this one's dependencies through a .pth line, so nothing is downloaded.

Results print as a Markdown table to paste into bench/NOTES.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kprobe.kafka.exchanges import fetch_and_identify
from kprobe.lab import start_lab
from kprobe.lab.decoys import Blackhole
from kprobe.models import Endpoint
from kprobe.probe.context import RunContext
from kprobe.probe.reach import probe_endpoints
from kprobe.probe.resolve import Resolver

REPO = Path(__file__).resolve().parent.parent
# How kprobe is started: [python, flags] and the `kprobe` command; main() may switch to a wheel.
PYTHON = [sys.executable]
KPROBE = [sys.executable, "-m", "kprobe"]


def install_wheel(work: Path, repo: Path = REPO) -> Path:
    """A venv holding a wheel of this checkout, or of `repo` (pip byte-compiles it); returns its bin directory."""
    shutil.rmtree(work, ignore_errors=True)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "wheel"), str(repo)],
                   check=True)
    wheel = next((work / "wheel").glob("kprobe-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True)
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", where],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "zz_bench_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def timed(cmd: list[str] | str, runs: int, shell: bool = False) -> float:
    """Median wall time of a command, in seconds."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, shell=shell, capture_output=True, check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def manual_loop(bootstrap: str, timeout: float) -> str:
    """The by-hand check: kcat -L, then nc -z on every `broker N at host:port` line."""
    return (
        f"kcat -b {bootstrap} -L -m {timeout:g} | "
        "sed -n 's/^  broker [0-9]* at \\([^ ]*\\).*/\\1/p' | "
        f"while IFS=: read -r h p; do nc -z -w {timeout:g} \"$h\" \"$p\"; done"
    )


def identity_cost(lab: object, runs: int) -> tuple[float, float]:
    """Median in-process probe time of the healthy 3-broker cluster, with and without identity."""
    from kprobe.options import ProbeOptions, parse_address
    from kprobe.runs.probe import run_probe

    bootstrap = [parse_address(lab.real_endpoint("CLIENT", 0))]  # type: ignore[attr-defined]
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(runs * 4):
        for identity in (True, False):
            started = time.perf_counter()
            report = run_probe(ProbeOptions(bootstraps=bootstrap, timeout=2, identity=identity))
            times[identity].append(time.perf_counter() - started)
            assert report.status == "ok"
    return statistics.median(times[True]), statistics.median(times[False])


IDENTITY: list[tuple[float, float]] = []


def side_by_side(runs: int, timeout: float) -> list[tuple[str, float, float]]:
    rows = []
    kprobe = [*KPROBE, "probe", "--timeout", f"{timeout:g}", "--no-color"]
    with start_lab("three-brokers") as lab:
        IDENTITY.append(identity_cost(lab, runs))
        cases = (("healthy (3 endpoints)", "CLIENT"), ("1 of 3 blackholed", "BLACKHOLED"),
                 ("3 of 3 blackholed", "DARK"))
        for label, listener in cases:
            bootstrap = lab.real_endpoint(listener, 0)
            ours = timed([*kprobe, "-b", bootstrap], runs)
            theirs = timed(manual_loop(bootstrap, timeout), runs, shell=True)
            rows.append((label, ours, theirs))
    return rows


def concurrency(timeout: float, count: int = 200) -> tuple[float, float]:
    """Seconds for metadata + 200-endpoint resolve/connect, and the ratio to the timeout."""
    listeners, holes = [], []
    try:
        for i in range(count // 2):
            sock = socket.socket()
            sock.bind((f"127.0.1.{1 + i % 250}", 0))
            sock.listen(64)
            listeners.append(sock)
            holes.append(Blackhole(f"127.0.2.{1 + i % 250}"))
        endpoints = [Endpoint(node_id=i, host=s.getsockname()[0], port=s.getsockname()[1], advertised_by=("bench",))
                     for i, s in enumerate(listeners)]
        endpoints += [Endpoint(node_id=1000 + i, host=h.host, port=h.port, advertised_by=("bench",))
                      for i, h in enumerate(holes)]
        with start_lab("listeners") as lab:
            ip, port = lab.real_endpoint("LISTENER_FRED").rsplit(":", 1)
            started = time.perf_counter()
            fetch_and_identify(ip, int(port), timeout=timeout, identity=False)
            ctx = RunContext(timeout=timeout, deadline=time.monotonic() + 10 * timeout,
                             resolver=Resolver(timeout=timeout))
            results = probe_endpoints(endpoints, ctx)
            elapsed = time.perf_counter() - started
        assert sum(r.status == "reachable" for r in results) == count // 2
        assert sum(r.status == "unreachable" for r in results) == count // 2
        return elapsed, elapsed / timeout
    finally:
        for sock in listeners:
            sock.close()
        for hole in holes:
            hole.close()


@contextmanager
def advertising_cluster(count: int = 200) -> Iterator[str]:
    """A scripted broker advertising `count` brokers, half of them answering Kafka, half blackholed; its address.

    The answering half are scripted brokers that answer ApiVersions and Metadata, so an identity check
    meets brokers, as in a real cluster, not mute sockets (bench_show.py reuses it for its big report).
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
    from hostile_broker import Broker, HostileBroker, Script

    listeners: list[HostileBroker] = []
    holes = []
    try:
        for i in range(count // 2):
            listeners.append(HostileBroker(Script(brokers=[]), host=f"127.0.1.{1 + i % 250}"))
            holes.append(Blackhole(f"127.0.2.{1 + i % 250}"))
        places = [(b.host, b.port) for b in listeners] + [(h.host, h.port) for h in holes]
        script = Script(brokers=[Broker(i, host.encode(), port) for i, (host, port) in enumerate(places)])
        for listener in listeners:
            listener.answer_with(script)
            listener.__enter__()
        with HostileBroker(script) as broker:
            yield broker.address
    finally:
        for listener in listeners:
            listener.__exit__()
        for hole in holes:
            hole.close()


def concurrency_cli(timeout: float, count: int = 200) -> list[tuple[str, float, dict[str, int]]]:
    """Wall seconds of whole `kprobe probe` runs against a broker advertising `count` brokers.

    Why the CLI and a broker that advertises them: the figure users feel includes start-up,
    the metadata decode of a 200-broker answer, diagnosis and rendering, not only connects.
    """
    rows = []
    with advertising_cluster(count) as address:
        for label, flags in (("identity on (default)", []), ("--no-identity", ["--no-identity"])):
            cmd = [*KPROBE, "probe", "-b", address, "--json",
                   "--timeout", f"{timeout:g}", "--deadline", f"{10 * timeout:g}", *flags]
            started = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            elapsed = time.perf_counter() - started
            report = json.loads(done.stdout)
            verdicts: dict[str, int] = {}
            for endpoint in report["endpoints"]:
                verdicts[endpoint["status"]] = verdicts.get(endpoint["status"], 0) + 1
            assert report["summary"]["endpoints"] == count, report["summary"]
            assert verdicts.get("reachable") == count // 2, verdicts
            rows.append((label, elapsed, verdicts))
    return rows


def startup(runs: int) -> list[tuple[str, float]]:
    python = [*PYTHON, "-c", "pass"]
    imports = [*PYTHON, "-c", "import kprobe.cli.app, kprobe.runs.probe, kprobe.output.text"]
    # A run that resolves a host name (not an IP literal) also loads dnspython for the DNS detail.
    with_dns = [*PYTHON, "-c", "import kprobe.cli.app, kprobe.runs.probe, kprobe.output.text, kprobe.probe.resolve, "
                "dns.resolver, dns.nameserver"]
    help_cmd = [*KPROBE, "--help"]
    return [("python -c pass", timed(python, runs)), ("import of the probe path", timed(imports, runs)),
            ("import of the probe path with dnspython (advertised host names)", timed(with_dns, runs)),
            ("kprobe --help", timed(help_cmd, runs))]


def concurrency_report(timeout: float) -> None:
    """Both concurrency figures: the full CLI run (what users feel) and the in-process phase."""
    print(f"\n200 advertised endpoints, 100 blackholed, full `kprobe probe` run (timeout {timeout:g}s):\n")
    print("| run | wall | wall / timeout | endpoint verdicts |")
    print("| --- | --- | --- | --- |")
    for label, elapsed, verdicts in concurrency_cli(timeout):
        shown = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
        print(f"| {label} | {elapsed:.3f}s | {elapsed / timeout:.2f} x | {shown} |")
    elapsed, ratio = concurrency(timeout)
    print(f"\nin-process resolve+connect phase only (after a real lab metadata fetch): {elapsed:.3f}s = "
          f"{ratio:.2f} x the connect timeout (a sequential nc loop: about {100 * timeout + 100 * 0.001:.0f}s"
          " = ~100 x)\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--only-concurrency", action="store_true",
                        help="run only the 200-endpoint concurrency benchmark (no kcat/nc needed)")
    parser.add_argument("--dev", action="store_true", help="run this checkout as it is, not an installed wheel")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench/probe"))
    args = parser.parse_args()
    if not args.dev:
        bin_dir = install_wheel(args.work)
        # -I: the interpreter must not put the current directory (this checkout) first on sys.path.
        PYTHON[:] = [str(bin_dir / "python"), "-I"]
        KPROBE[:] = [str(bin_dir / "kprobe")]
        print(f"kprobe: a wheel of this checkout installed in {bin_dir.parent}\n")
    else:
        print("kprobe: this checkout, as it is (--dev)\n")
    if args.only_concurrency:
        concurrency_report(args.timeout)
        return
    for tool in ("kcat", "nc"):
        if not shutil.which(tool):
            sys.exit(f"bench needs {tool}: apt-get install kcat netcat-openbsd")
    print(f"# kprobe benchmarks ({os.cpu_count()} cores, timeout {args.timeout:g}s, median of {args.runs})\n")
    print("| case | kprobe probe | kcat -L + nc -z loop | kprobe - loop | loop / kprobe |")
    print("| --- | --- | --- | --- | --- |")
    for label, ours, theirs in side_by_side(args.runs, args.timeout):
        print(f"| {label} | {ours:.3f}s | {theirs:.3f}s | {ours - theirs:+.3f}s | {theirs / ours:.2f}x |")
    with_id, without_id = IDENTITY[0]
    print(f"\nidentity check (3 endpoints, in-process, median): {with_id * 1000:.1f} ms with, "
          f"{without_id * 1000:.1f} ms without (+{(with_id - without_id) * 1000:.1f} ms)")
    concurrency_report(args.timeout)
    print("| start-up | median |")
    print("| --- | --- |")
    for label, seconds in startup(args.runs * 2):
        print(f"| {label} | {seconds * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
