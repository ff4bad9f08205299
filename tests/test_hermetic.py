"""The guard of tests/hermetic_dns.py holds: what the session resolves is asked on loopback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hermetic_dns


def test_the_system_resolver_of_the_session_is_on_loopback():
    resolv = Path("/etc/resolv.conf").read_text()
    nameservers = [line.split()[1] for line in resolv.splitlines() if line.startswith("nameserver")]
    assert nameservers == ["127.0.0.1"], resolv


def test_a_subprocess_lookup_goes_to_the_loopback_stub():
    before = hermetic_dns.stub_queries()
    code = ("import socket\ntry:\n    socket.getaddrinfo('never-gonna-give-you-up', 9092)\n"
            "except socket.gaierror as exc:\n    print(exc.errno)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == str(__import__("socket").EAI_NONAME)  # NXDOMAIN, as the world would say
    assert hermetic_dns.stub_queries() > before
