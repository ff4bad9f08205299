"""The guards hold: what the session resolves is asked on loopback (tests/support/hermetic_dns.py), and no process of
the session sends a packet off loopback (tests/fence/loopback_fence.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hermetic_dns
import pytest


def test_the_system_resolver_of_the_session_is_on_loopback():
    resolv = Path("/etc/resolv.conf").read_text()
    nameservers = [line.split()[1] for line in resolv.splitlines() if line.startswith("nameserver")]
    assert nameservers == [hermetic_dns.STUB[0]], resolv
    assert hermetic_dns.STUB[0].startswith("127."), hermetic_dns.STUB


def test_a_subprocess_lookup_goes_to_the_loopback_stub():
    before = hermetic_dns.stub_queries()
    code = ("import socket\ntry:\n    socket.getaddrinfo('never-gonna-give-you-up', 9092)\n"
            "except socket.gaierror as exc:\n    print(exc.errno)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == str(__import__("socket").EAI_NONAME)  # NXDOMAIN, as the world would say
    assert hermetic_dns.stub_queries() > before


# -- the packet fence (tests/fence/loopback_fence.py) ------------------------------------------------

def test_the_fence_refuses_a_connect_off_loopback_in_this_process():
    """A connect off loopback raises with the address; loopback, a name for loopback and AF_UNIX pass."""
    import socket

    from fence.loopback_fence import FENCE

    with FENCE.expecting() as crossed:
        for target, family in ((("192.0.2.1", 9), socket.AF_INET), (("2001:db8::1", 9), socket.AF_INET6)):
            with socket.socket(family) as sock, pytest.raises(PermissionError, match="outside loopback"):
                sock.connect(target)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, pytest.raises(PermissionError):
            udp.sendto(b"x", ("198.51.100.7", 53))
        for target, family in ((("127.0.0.1", 9), socket.AF_INET), (("::1", 9), socket.AF_INET6),
                               (("localhost", 9), socket.AF_INET)):
            with socket.socket(family) as sock, pytest.raises(ConnectionRefusedError):
                sock.connect(target)  # refused by the kernel, not the fence: nothing listens there
        with socket.socket(socket.AF_UNIX) as unix, pytest.raises(FileNotFoundError):
            unix.connect("/nonexistent/kprobe-fence.sock")
    assert crossed == ["socket.connect to 192.0.2.1:9", "socket.connect to [2001:db8::1]:9",
                       "socket.sendto to 198.51.100.7:53"]


def test_a_kprobe_child_inherits_the_fence(tmp_path):
    """kprobe started as the tests start it refuses too, says so on stderr, and logs it where conftest looks.

    The child logs to a file of this test's own (its crossing is the point here, not a failure).
    """
    import json
    import os

    from fence.loopback_fence import ENV

    log = tmp_path / "fence.log"
    env = {**os.environ, ENV: str(log)}
    done = subprocess.run([sys.executable, "-m", "kprobe", "probe", "-b", "192.0.2.1:9092", "--timeout", "1",
                           "--json"], capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 3, done.stderr
    line = "kprobe test fence: socket.connect to 192.0.2.1:9092 refused"
    assert line in done.stderr and line in log.read_text()
    [boot] = json.loads(done.stdout)["bootstraps"]
    assert boot["status"] != "ok"
    # Lookups through the session's loopback stub still work in a child, and a lookup-refusing child says so.
    lookup = "import socket\ntry:\n    socket.getaddrinfo('kafka.example.com', 9092)\nexcept OSError as e:\n    print(e)"
    quiet = subprocess.run([sys.executable, "-c", lookup], capture_output=True, text=True, timeout=30, env=env,
                           check=True)
    assert "fence" not in quiet.stdout + quiet.stderr
    strict = subprocess.run([sys.executable, "-c", lookup], capture_output=True, text=True, timeout=30,
                            env={**env, "KPROBE_TEST_FENCE_LOOKUPS": "1"}, check=True)
    assert "socket.getaddrinfo kafka.example.com refused" in strict.stderr
