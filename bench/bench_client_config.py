"""A Java client.properties with a JKS truststore against the same settings as librdkafka names: what reading
the Java file costs a whole probe, side by side in one run.

    python bench/bench_client_config.py [--runs 15] [--dev] [--work /tmp/kprobe-bench/client-config]

Target: reading a Java properties file with a JKS truststore adds at most 30 ms to a probe.

The cluster: the lab's `tls` scenario (one real Kafka 4.x broker, native), its SSL_GOOD listener. Both runs
probe it over TLS with the lab CA trusted and the broker name resolved through the lab's DNS view:
  - librdkafka names: `-X security.protocol=SSL -X ssl.ca.location=CA.pem -b BOOTSTRAP`;
  - Java: `--command-config client.properties` holding bootstrap.servers, security.protocol=SSL and a JKS
    truststore made by keytool with a password (so the integrity check runs), as MSK's guide makes one.
Whole `kprobe probe --json` CLI runs of a wheel of this checkout installed in its own venv (byte code, as
users run it; `--dev` runs the checkout), interleaved after one untimed warm-up of each; every run's
report is checked (exit 0, the endpoint reachable and its TLS ok): a fast failure is no figure. Then the
in-process cost of `kprobe.clientprops.load.load()` on the Java file alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_probe import install_wheel

from kprobe.lab.native import NativeLab
from kprobe.lab.scenarios import get_scenario


def run(cmd: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    report = json.loads(done.stdout)
    endpoints = report["endpoints"]
    if done.returncode != 0 or not endpoints or any(e["status"] != "reachable" or e["tls"]["status"] != "ok"
                                                    for e in endpoints):
        raise SystemExit(f"a run did not probe the broker healthily: {done.returncode} {report['findings']}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dev", action="store_true", help="run this checkout as it is, not an installed wheel")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kprobe-bench/client-config"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    kprobe = [sys.executable, "-m", "kprobe"] if args.dev else [str(install_wheel(args.work / "wheel") / "kprobe")]
    with NativeLab(get_scenario("tls")).start() as lab:
        bootstrap = lab.bootstrap("SSL_GOOD")
        store = args.work / "truststore.jks"
        store.unlink(missing_ok=True)
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "CARoot", "-file", lab.ca_file, "-keystore",
                        str(store), "-storetype", "JKS", "-storepass", "changeit"], check=True, capture_output=True)
        java = args.work / "client.properties"
        java.write_text(f"bootstrap.servers={bootstrap}\nsecurity.protocol=SSL\nssl.truststore.location={store}\n"
                        "ssl.truststore.type=JKS\nssl.truststore.password=changeit\n")
        common = ["probe", "--json", "--nameserver", lab.nameserver("clients"), "--timeout", "2"]
        variants = {
            "librdkafka names (-X, PEM CA)": [*kprobe, *common, "-b", bootstrap, "-X", "security.protocol=SSL",
                                              "-X", f"ssl.ca.location={lab.ca_file}"],
            "Java client.properties (JKS)": [*kprobe, *common, "--command-config", str(java)],
        }
        for cmd in variants.values():
            run(cmd)  # warm-up: page cache, the broker's first TLS handshakes
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.runs):
            for name, cmd in variants.items():
                samples[name].append(run(cmd))
        medians = {name: statistics.median(values) for name, values in samples.items()}
        for name, value in medians.items():
            print(f"{name:34s} median {value * 1000:7.1f} ms over {args.runs} runs")
        added = (medians["Java client.properties (JKS)"] - medians["librdkafka names (-X, PEM CA)"]) * 1000
        print(f"reading the Java file with its JKS truststore adds {added:+.1f} ms to a probe (target: at most 30 ms)")
    from kprobe.clientprops.load import load

    load([str(java)])  # imports
    started = time.perf_counter()
    for _ in range(100):
        load([str(java)])
    print(f"in-process: load() of the Java file with its JKS truststore {(time.perf_counter() - started) * 10:.2f} ms")


if __name__ == "__main__":
    main()
