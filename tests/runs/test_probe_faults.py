"""Faults during a run: each reported as what it is, within the deadline, no partial files."""

from __future__ import annotations

import json
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
from cli_runner import run_cli
from conftest import restart_settled
from hostile_broker import Broker, HostileBroker, Script

from kprobe.lab.decoys import Blackhole
from kprobe.lab.dns_server import DnsServer
from kprobe.options import ProbeOptions, parse_address, parse_nameserver
from kprobe.output import json_report
from kprobe.runs.probe import ProbeRun

SCHEMA = json_report.schema()


def kprobe(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True, timeout=60,
                          check=False, **kw)


def run_in_process(bootstrap: str, on_phase, *, nameserver: str | None = None, timeout: float = 2.0,
                   deadline: float = 10.0) -> tuple[dict, float]:
    """Run the real probe in this process, so a fault can be injected at an exact phase.

    A subprocess and a sleep would race the probe's own progress; `ProbeRun.on_phase` fires
    between steps, which makes "after metadata, before resolving" a fact rather than a guess.
    """
    options = ProbeOptions(bootstraps=[parse_address(bootstrap)],
                           nameservers=[parse_nameserver(nameserver)] if nameserver else [],
                           timeout=timeout, deadline=deadline)
    run = ProbeRun(options)
    run.on_phase = on_phase
    started = time.monotonic()
    report = run.run()
    elapsed = time.monotonic() - started
    data = json_report.to_dict(report)
    jsonschema.validate(data, SCHEMA)
    return data, elapsed


def test_broker_killed_mid_probe(three_lab, monkeypatch):
    """Broker 1 accepted the TCP connect, then dies before kprobe asks who it is.

    The kill happens exactly between broker 1's connect and its identity check (which starts
    as soon as that connect succeeds, while broker 2's blackholed connect still waits), so the
    only honest outcome is "connect refused" on the identity check: never a match (that would
    be a lie about a dead broker) and never ENDPOINT_NOT_KAFKA (a dead broker is not an impostor).
    """
    import kprobe.probe.identity

    killed: list[float] = []
    real_check = kprobe.probe.identity.check_identity

    def kill_then_check(endpoint, address, props, **kwargs):
        if endpoint.node_id == 1 and not killed:
            three_lab.stop_node(1)
            killed.append(time.monotonic())
        return real_check(endpoint, address, props, **kwargs)

    monkeypatch.setattr(kprobe.probe.identity, "check_identity", kill_then_check)

    connects_done: list[float] = []

    def note_connect_step_end(phase: str) -> None:
        if phase.startswith("checking who answers"):
            connects_done.append(time.monotonic())

    try:
        data, elapsed = run_in_process(three_lab.real_endpoint("BLACKHOLED", 0), note_connect_step_end, timeout=3,
                                       deadline=20)
    finally:
        restart_settled(three_lab, 1)
    assert killed, "the probe never reached the identity step"
    # Pipelined: broker 1's identity check ran while broker 2's blackholed connect still waited.
    assert connects_done and killed[0] < connects_done[0] - 1, (killed, connects_done)
    node1 = next(e for e in data["endpoints"] if e["node_id"] == 1)
    node2 = next(e for e in data["endpoints"] if e["node_id"] == 2)
    assert node2["tcp"][0]["status"] == "timeout"
    assert node1["tcp"][0]["status"] == "ok"  # it was alive for the connect step
    identity = node1["identity"]
    assert identity["status"] == "unchecked", identity
    assert "refused" in identity["detail"].lower(), identity
    codes = {f["code"] for f in data["findings"]}
    assert "ENDPOINT_NOT_KAFKA" not in codes, data["findings"]
    assert data["summary"]["status"] == "gap"
    # 3 s for the blackholed connect, then a refused connect: nowhere near the 20 s deadline.
    assert elapsed < 3 + 3, elapsed


def test_dns_server_stops_mid_run(listeners_lab):
    """The lab's DNS view answers the bootstrap name, then stops before endpoints are resolved."""
    server = DnsServer({"kafka0": ("127.0.0.11",)}).start()
    stopped: list[str] = []

    def stop_dns_after_metadata(phase: str) -> None:
        if phase.startswith("resolving") and not stopped:
            server.stop()
            stopped.append(phase)

    try:
        data, elapsed = run_in_process(listeners_lab.bootstrap("LISTENER_BOB"), stop_dns_after_metadata,
                                       nameserver=server.nameserver, timeout=2, deadline=8)
    finally:
        server.stop()
    assert stopped
    # The bootstrap name was resolved through the server while it ran...
    assert data["bootstraps"][0]["status"] == "ok", data["bootstraps"]
    # ...and the same name, advertised back, found no server any more: a timeout, said plainly.
    [endpoint] = data["endpoints"]
    dns = endpoint["dns"]
    assert dns["status"] == "timeout", dns
    assert dns["error"] == "kafka0: no DNS answer within 2s", dns
    assert [f["code"] for f in data["findings"]] == ["ADVERTISED_UNRESOLVABLE"]
    assert data["summary"]["status"] == "gap"
    assert elapsed < 8, elapsed


def test_endpoint_that_accepts_and_resets():
    resetter = socket.socket()
    resetter.bind(("127.0.0.1", 0))
    resetter.listen(8)
    port = resetter.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        resetter.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = resetter.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # RST

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with HostileBroker(Script(brokers=[Broker(0, b"127.0.0.1", port)])) as broker:
            started = time.monotonic()
            # In this process (tests/support/cli_runner.py): a child's output without a child's start-up to wait for.
            done = run_cli(["probe", "-b", broker.address, "--json", "--timeout", "2"])
            elapsed = time.monotonic() - started
            text = run_cli(["probe", "-b", broker.address, "--no-color", "--timeout", "2"])
    finally:
        stop.set()
        thread.join(1)
        resetter.close()
    data = json.loads(done.stdout)
    jsonschema.validate(data, SCHEMA)
    [tcp] = data["endpoints"][0]["tcp"]
    identity = data["endpoints"][0]["identity"]
    # Which step meets the reset is a race the kernel decides: the RST can land before the
    # connect step reads the socket's status (tcp error) or after it (the identity check
    # then meets it). Either way the reset is named, and the run is a gap: no client can use it.
    codes = {f["code"] for f in data["findings"]}
    if tcp["status"] == "ok":
        assert identity["status"] == "silent", identity
        assert "reset" in identity["detail"].lower(), identity
        assert "ENDPOINT_NOT_ANSWERING" in codes, codes
    else:
        assert tcp["status"] == "error" and "ECONNRESET" in tcp["error"], tcp
        assert identity is None
        [finding] = [f for f in data["findings"] if f["code"] == "ADVERTISED_UNREACHABLE"]
        assert "ECONNRESET" in finding["message"] and "no route" not in finding["message"]
    assert done.returncode == 1 and data["summary"]["status"] == "gap"
    assert "Traceback" not in done.stderr
    # The text run races the same way; whichever step met the reset, the text names it.
    assert text.returncode == 1 and "Traceback" not in text.stderr and "\x1b" not in text.stdout
    assert "no answer" in text.stdout or "error ECONNRESET" in text.stdout, text.stdout
    # A reset is immediate: no waiting out the 2 s timeout, let alone the 30 s deadline.
    assert elapsed < 2 + 3, elapsed


def small_disk() -> None:
    """A 512-byte file-size limit in the child: the report's write fails as on a full disk."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))


def test_full_disk_leaves_no_partial_report(listeners_lab, tmp_path):
    target = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", listeners_lab.bootstrap("LISTENER_FRED"),
                           "-o", str(target), "--no-color"], capture_output=True, text=True, timeout=60,
                          check=False, preexec_fn=small_disk)
    assert done.returncode == 1
    assert done.stderr.startswith(f"kprobe: error: cannot write {target}: File too large")
    assert len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_full_disk_for_out_dir_leaves_no_partial_report(listeners_lab, tmp_path):
    """`--out DIR` writes DIR/<date>/<name>.json through a temporary file: neither may survive."""
    out = tmp_path / "reports"
    out.mkdir()
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", listeners_lab.bootstrap("LISTENER_FRED"),
                           "--out", str(out), "--json"], capture_output=True, text=True, timeout=60,
                          check=False, preexec_fn=small_disk)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"kprobe: error: cannot write {out}/") and lines[0].endswith(": File too large")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""  # the files come first: stdout never shows a report that was not saved
    assert [p for p in out.rglob("*") if p.is_file()] == []
    assert elapsed < 15, elapsed


def test_many_blackholed_bootstraps_end_by_the_deadline():
    # Made at once: each waits out a 0.3 s connect to know its accept queue is full (6 s one after another).
    with ThreadPoolExecutor(max_workers=20) as pool:
        holes = list(pool.map(lambda i: Blackhole(f"127.0.0.{60 + i}"), range(20)))
    try:
        started = time.monotonic()
        done = kprobe("probe", *[a for h in holes for a in ("-b", h.endpoint)], "--json", "--timeout", "30",
                      "--deadline", "2")
        elapsed = time.monotonic() - started
    finally:
        for hole in holes:
            hole.close()
    data = json.loads(done.stdout)
    jsonschema.validate(data, SCHEMA)
    # The deadline is not Ctrl-C: no bootstrap answered, so the run failed (exit 3), each
    # bootstrap a timeout; `interrupted` and exit 130 are for SIGINT only.
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert data["summary"]["status"] == "failed"
    assert {b["status"] for b in data["bootstraps"]} == {"timeout"}
    assert len(data["bootstraps"]) == 20
    # The run ends at its deadline (its own clock, from its start), and the process with it: not after the
    # 30 s connects still waiting. The wall clock also holds the interpreter's start and exit, which three
    # xdist workers on two CPUs stretch (2.6 to 3.5 s in all, against 4.5 s allowed before).
    assert data["duration_ms"] < 2000 + 1500, data["duration_ms"]
    assert elapsed < 2 + 6, elapsed
