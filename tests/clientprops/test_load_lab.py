"""A Java client.properties against a real SCRAM broker: the file as the user has it works, and no
output of any kind holds a secret from it, `sasl.jaas.config` included.

Before, kprobe ignored the file's bootstrap.servers and its sasl.jaas.config without a word, so the right
credentials gave AUTH_FAILED. The Java client's own verdict on the same file is tests/runs/test_probe_agreement.py's.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli
from system_network import kprobe as kprobe_in
from system_network import system_network

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def java_file(tmp_path: Path, name: str, bootstrap: str, user: str, password: str) -> Path:
    path = tmp_path / name
    path.write_text(f"bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f"sasl.jaas.config={SCRAM} required \\\n    username=\"{user}\" \\\n    password=\"{password}\";\n"
                    "acks=all\n")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`kprobe probe ARGS` in this process (tests/support/cli_runner.py): a child's output, without its start-up."""
    return run_cli(["probe", *args])


@pytest.mark.labs("scram")
def test_java_file_as_it_is_and_no_secret_anywhere(scram_lab, tmp_path):
    user = "alice"
    password = scram_lab.passwords[user]
    ns = ["--nameserver", scram_lab.nameserver("clients"), "--timeout", "2"]
    good = java_file(tmp_path, "good.properties", scram_lab.bootstrap("SCRAM_GOOD"), user, password)
    wrong = java_file(tmp_path, "wrong.properties", scram_lab.bootstrap("SCRAM_GOOD"), user, password + "-x")
    runs = []
    for fmt in ("--json", "--no-color", "--format=prometheus"):
        out = tmp_path / f"good{fmt[2:6]}.json"
        runs.append(run("--command-config", str(good), *ns, fmt, "-v", "-o", str(out)))
    done = runs[0]
    report = json.loads(done.stdout)
    assert done.returncode == 0, report["findings"]
    assert [b["status"] for b in report["bootstraps"]] == ["ok"]
    assert report["settings"]["properties"]["sasl.jaas.config"] == "[redacted]"
    assert "acks is not used by kprobe" in done.stderr  # named, once, on stderr
    # kprobe list takes the same file (its listing through kprobe's own client, as kcat -L -F would)
    listed = run_cli(["list", "--command-config", str(good), *ns, "--json"])
    assert listed.returncode == 0, listed.stderr
    assert [b["id"] for b in json.loads(listed.stdout)["brokers"]] == [0]
    runs.append(listed)
    bad = run("-F", str(wrong), *ns, "--json", "-v", "-o", str(tmp_path / "wrong.json"))
    bad_report = json.loads(bad.stdout)
    assert bad.returncode == 3 and [f["code"] for f in bad_report["findings"]] == ["AUTH_FAILED"]
    # The fix names the key the file holds the credentials under, not librdkafka's sasl.username it never had.
    assert bad_report["findings"][0]["fix"].startswith("Check the username and password in sasl.jaas.config: ")
    runs.append(bad)
    secrets = [password, password + "-x", good.read_text().split("sasl.jaas.config=")[1][:40]]
    for needle in secrets:
        for done in runs:
            assert needle not in done.stdout and needle not in done.stderr, done.args
        for saved in tmp_path.glob("*.json"):
            assert needle.encode() not in saved.read_bytes(), saved


@pytest.mark.labs("scram")
def test_canonical_bootstrap_lookup_as_the_java_client(scram_lab, tmp_path):
    """client.dns.lookup=resolve_canonical_bootstrap_servers_only: a load balancer's name becomes the name its
    address maps back to (here the hosts file's first name for it, as getCanonicalHostName reads it)."""
    port = scram_lab.bootstrap("SCRAM_GOOD").rsplit(":", 1)[1]
    address = scram_lab.real_endpoint("SCRAM_GOOD").rsplit(":", 1)[0]
    password = scram_lab.passwords["alice"]
    path = java_file(tmp_path, "lb.properties", f"kafka-lb.kprobe.test:{port}", "alice", password)
    path.write_text(path.read_text() + "client.dns.lookup=resolve_canonical_bootstrap_servers_only\n")
    with system_network(tmp_path, {}, hosts=[f"{address} kafka-scram.kprobe.test kafka-lb.kprobe.test"]) as ns:
        done = kprobe_in(ns, "probe", "--command-config", str(path), "--json", "--timeout", "2")
    report = json.loads(done.stdout)
    assert [b["address"] for b in report["bootstraps"]] == [f"kafka-scram.kprobe.test:{port}"]
    assert done.returncode == 0, report["findings"]
    assert (f"bootstrap kafka-lb.kprobe.test:{port} becomes kafka-scram.kprobe.test:{port} (each address's "
            "canonical name") in done.stderr
