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

import jsonschema
from hostile_broker import Broker, HostileBroker, Script

from kprobe.lab.base import Blackhole
from kprobe.lab.dns_server import DnsServer
from kprobe.report import json_report

SCHEMA = json_report.schema()


def kprobe(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kprobe", *args], capture_output=True, text=True, timeout=60,
                          check=False, **kw)


def test_broker_killed_mid_probe(three_lab):
    """Broker 1 dies while the probe waits on broker 2's blackholed endpoint."""
    proc = subprocess.Popen([sys.executable, "-m", "kprobe", "probe", "-b", three_lab.real_endpoint("BLACKHOLED", 0),
                             "--json", "--timeout", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.2)
    three_lab.stop_node(1)
    try:
        out, err = proc.communicate(timeout=30)
        assert "Traceback" not in err
        data = json.loads(out)
        jsonschema.validate(data, SCHEMA)
        assert proc.returncode == 1
        node1 = next(e for e in data["endpoints"] if e["node_id"] == 1)
        node2 = next(e for e in data["endpoints"] if e["node_id"] == 2)
        assert node2["tcp"][0]["status"] == "timeout"
        # Connected before the kill; the identity check afterwards found it gone.
        assert node1["identity"]["status"] in ("unchecked", "not_kafka", "match")
        if node1["identity"]["status"] != "match":
            assert node1["identity"]["detail"]
    finally:
        three_lab.start_node(1)


def test_dns_server_gone(listeners_lab):
    server = DnsServer({"kafka0": ("127.0.0.11",)}).start()
    nameserver = server.nameserver
    server.stop()  # it existed when the user looked, it is gone when the probe asks
    started = time.monotonic()
    done = kprobe("probe", "-b", listeners_lab.real_endpoint("LISTENER_BOB"), "--nameserver", nameserver,
                  "--json", "--timeout", "2")
    elapsed = time.monotonic() - started
    data = json.loads(done.stdout)
    jsonschema.validate(data, SCHEMA)
    dns = data["endpoints"][0]["dns"]
    assert dns["status"] in ("servfail", "timeout", "error") and dns["error"]
    assert [f["code"] for f in data["findings"]] == ["ADVERTISED_UNRESOLVABLE"]
    assert done.returncode == 1 and elapsed < 10


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
            done = kprobe("probe", "-b", broker.address, "--json", "--timeout", "2")
    finally:
        stop.set()
        thread.join(1)
        resetter.close()
    data = json.loads(done.stdout)
    identity = data["endpoints"][0]["identity"]
    assert identity["status"] in ("not_kafka", "unchecked") and identity["detail"]
    assert done.returncode == 1 and "Traceback" not in done.stderr


def test_full_disk_leaves_no_partial_report(listeners_lab, tmp_path):
    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    target = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", listeners_lab.bootstrap("LISTENER_FRED"),
                           "-o", str(target), "--no-color"], capture_output=True, text=True, timeout=60,
                          check=False, preexec_fn=small_disk)
    assert done.returncode == 1
    assert done.stderr.startswith(f"kprobe: error: cannot write {target}: File too large")
    assert len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_many_blackholed_bootstraps_end_by_the_deadline():
    holes = [Blackhole(f"127.0.0.{60 + i}") for i in range(20)]
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
    assert done.returncode == 130
    assert data["summary"]["status"] == "interrupted"
    assert {b["status"] for b in data["bootstraps"]} == {"timeout"}
    assert len(data["bootstraps"]) == 20
    assert elapsed < 2 + 2.5
