"""Run kprobe with a system resolver the test controls, and no packet leaving loopback.

The default probe path resolves through getaddrinfo, which reads /etc/hosts and
/etc/resolv.conf. A private mount namespace (`unshare -m`) bind-mounts test copies over both, so
the "system" resolver is a lab DNS server on port 53 and the hosts file is the test's. A resolver
line names no port, so each pytest-xdist worker serves on its own address (127.0.53.N).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from hermetic_dns import worker_number

from kprobe.lab.dns_server import DnsServer

_SCRIPT = 'mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'


@contextmanager
def system_network(
    tmp: Path, records: Mapping[str, Sequence[str]], hosts: Sequence[str] = ()
) -> Iterator[list[str]]:
    """A command prefix that runs its command with this DNS view as the system resolver."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespaces here: {probe.stderr.decode().strip()}")
    address = f"127.0.53.{(worker_number() or 0) + 1}"  # this process's own: workers' would collide
    try:
        server = DnsServer(records, address, 53, name="system").start()
    except OSError as exc:
        pytest.skip(f"cannot serve DNS on {address}:53: {exc}")
    resolv = tmp / "resolv.conf"
    resolv.write_text(f"nameserver {address}\noptions timeout:1 attempts:1\n")
    hosts_file = tmp / "hosts"
    hosts_file.write_text("127.0.0.1 localhost\n" + "".join(line + "\n" for line in hosts))
    try:
        yield ["unshare", "-m", "sh", "-c", _SCRIPT, "sh", str(resolv), str(hosts_file)]
    finally:
        server.stop()


def kprobe(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "kprobe", *args], capture_output=True, text=True,
                          timeout=60, check=False)
