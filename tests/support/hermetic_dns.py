"""No DNS query of the test session leaves loopback.

kprobe's default path resolves through the system resolver, and so do librdkafka and the JVMs.
On the development and CI machines `/etc/resolv.conf` names a resolver off loopback, so a test
that probes `never-gonna-give-you-up` or an `ip-172-31-...internal` name would send a query there.
The test session therefore runs in a private mount namespace whose `/etc/resolv.conf` names a
loopback DNS server that knows no name (NXDOMAIN, as the real world answers for these names).
Every subprocess (kprobe, kcat, the brokers, Spark) inherits it.

Maven needs the real resolver to reach Maven Central (allowed traffic), so the jars the
session needs are resolved into kprobe's cache first, before the namespace closes.

Each process that runs tests (the session, or each pytest-xdist worker) closes its own namespace
around a stub of its own: 127.0.0.1 alone, or 127.0.54.N for worker gwN, since a resolver line
names no port and two stubs cannot share 127.0.0.1:53.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from kprobe.lab.dns_server import DnsServer

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def worker_number() -> int | None:
    """N on pytest-xdist worker gwN, None in a session of one process: whose port-53 addresses these are."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return int(worker.removeprefix("gw")) if worker else None


_WORKER = worker_number()
STUB = ("127.0.0.1", 53) if _WORKER is None else (f"127.0.54.{_WORKER + 1}", 53)

_server: DnsServer | None = None
_folder: Path | None = None  # the session's resolv.conf lives here


def _warm_jar_caches() -> None:
    """Resolve, while DNS still reaches Maven Central, every jar a test may start."""
    from kprobe.lab import jars

    jars.kafka_classpath()
    from real_group_clients import OLD_JAVA_CLIENTS, old_clients_classpath

    for version in OLD_JAVA_CLIENTS:  # one Maven at a time: two at once share ~/.m2 badly
        old_clients_classpath(version)
    try:
        import pyspark

        from kprobe.aggregate.kafka_source import connector_jars
    except ImportError:  # no spark extra: the aggregate tests skip anyway
        return
    connector_jars(pyspark.__version__)


def _mount(libc: ctypes.CDLL, source: bytes | None, target: bytes, flags: int) -> None:
    if libc.mount(source, target, None, flags, None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target.decode()}: {os.strerror(errno)}")


def enter() -> str | None:
    """Close the session's DNS over loopback; the reason it could not, or None when done."""
    global _server
    if os.geteuid() != 0:
        return "not root: cannot make a private mount namespace"
    _warm_jar_caches()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        return f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}"
    try:
        _mount(libc, b"none", b"/", MS_REC | MS_PRIVATE)  # nothing mounted here leaks to the host
        global _folder
        _folder = Path(tempfile.mkdtemp(prefix="kprobe-tests-dns-"))
        resolv = _folder / "resolv.conf"
        resolv.write_text(f"nameserver {STUB[0]}\noptions timeout:1 attempts:1\n")
        _mount(libc, str(resolv).encode(), b"/etc/resolv.conf", MS_BIND)
    except OSError as exc:
        return str(exc)
    try:
        _server = DnsServer({}, *STUB, name="tests-stub").start()
    except OSError as exc:  # the namespace still holds: queries to a closed port fail at once
        return f"no stub DNS server on {STUB[0]}:{STUB[1]} ({exc}); queries fail fast instead"
    return None


def setup() -> None:
    """Called once from conftest before any test: warn loudly where the guard could not hold."""
    reason = enter()
    if reason is not None:
        warnings.warn(f"DNS queries of this test session may leave loopback: {reason}", stacklevel=2)


def teardown() -> None:
    """At the session's end: the stub stopped and its resolv.conf's folder removed (the mount goes with the process)."""
    global _server, _folder
    if _server is not None:
        _server.stop()
        _server = None
    if _folder is not None:
        shutil.rmtree(_folder, ignore_errors=True)
        _folder = None


def stub_queries() -> int:
    """Queries the loopback stub answered so far (the guard's own test reads it)."""
    return _server.queries if _server is not None else -1
