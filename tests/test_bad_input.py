"""Bad user input: one line naming the problem and the fix, exit code 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kprobe.config import parse_address, parse_duration, parse_nameserver, parse_properties
from kprobe.errors import UsageError

B = ["-b", "127.0.0.1:9"]
CASES = [
    # addresses
    ["probe", "-b", ""], ["probe", "-b", ","], ["probe", "-b", "host:"], ["probe", "-b", "host:0"],
    ["probe", "-b", "host:65536"], ["probe", "-b", "host:-1"], ["probe", "-b", "host:9092x"],
    ["probe", "-b", "::1:9092"], ["probe", "-b", "[::1"], ["probe", "-b", "[nope]:1"], ["probe", "-b", "[::1]x"],
    ["probe", "-b", "bad host"], ["probe", "-b", "a..b:1"], ["probe", "-b", "ho$t:1"], ["probe", "-b", "x" * 300],
    ["probe", "-b", "-dash:1"], ["probe", "-b", "9://x:1"],
    # durations
    ["probe", *B, "--timeout", "soon"], ["probe", *B, "--timeout", "0"], ["probe", *B, "--timeout", "-5"],
    ["probe", *B, "--timeout", "25h"], ["probe", *B, "--deadline", "1d"], ["probe", *B, "--deadline", ""],
    # properties and files
    ["probe", *B, "-X", "novalue"], ["probe", *B, "-X", "=x"], ["probe", *B, "-X", "security.protocol=TLS"],
    ["probe", *B, "-F", "/nonexistent/client.properties"], ["probe", *B, "-F", "/"],
    ["probe", *B, "--nameserver", "dns.example.com"], ["probe", *B, "--nameserver", "127.0.0.1:99999"],
    ["probe", *B, "--compare-nameserver", "nope"],
    # output
    ["probe", *B, "-o", "/nonexistent-dir/report.json"], ["probe", *B, "-o", "/"],
    # options
    ["probe", "--no-such-option"], ["probe"], ["probe", *B, "--tls-expiry-days", "many"], ["probe", *B, "extra"],
    # list
    ["list"], ["list", "-b", "host:0"], ["list", *B, "-t", ""], ["list", *B, "--timeout", "x"],
    ["list", *B, "-F", "/nonexistent"], ["-L"], ["-L", "-b", "[::1"],
    # watch
    ["watch"], ["watch", *B, "--every", "never"], ["watch", *B, "--every", "0"], ["watch", *B, "--count", "0"],
    ["watch", *B, "--jitter", "x"], ["watch", *B, "--out", "/proc/version"], ["watch", *B, "--format", "xml"],
    ["watch", *B, "--publish", "no-topic"], ["watch", *B, "--publish", "h:1/bad topic"],
    ["watch", *B, "--spool-max", "0"], ["watch", *B, "--json", "--format", "prometheus"],
    # aggregate
    ["aggregate", "--out", "/tmp/x"], ["aggregate", "/nonexistent/reports", "--out", "/tmp/x"],
    ["aggregate", ".", "--out", "/tmp/x", "--since", "yesterday"], ["aggregate", ".", "--out", "/proc/version"],
    ["aggregate", ".", "--out", "/tmp/x", "--kafka", "nobroker"],
    # lab
    ["lab", "up", "no-such-scenario"], ["lab", "up"], ["lab", "up", "listeners", "--backend", "vm"],
    ["lab", "nope"],
]


def test_there_are_at_least_40_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a)[:40] for a in CASES])
def test_one_line_exit_2(args, tmp_path):
    if args[-2:] == ["-F", "/"]:
        args = [*args[:-1], str(tmp_path)]
    done = subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kprobe: error: "), done.stderr
    assert "Traceback" not in done.stderr


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_address_parser_fuzz(text):
    try:
        address = parse_address(text)
    except UsageError as exc:
        assert "\n" not in str(exc)
        return
    assert 1 <= address.port <= 65535 and address.host


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_duration_parser_fuzz(text):
    try:
        value = parse_duration(text, "--timeout")
    except UsageError as exc:
        assert "--timeout" in str(exc)
        return
    assert 0 < value <= 86400


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_nameserver_and_properties_fuzz(text):
    for parse in (parse_nameserver, lambda t: parse_properties([t])):
        try:
            parse(text)
        except UsageError:
            pass
