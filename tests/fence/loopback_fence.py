"""No test sends a packet outside 127.0.0.0/8 and ::1: an audit hook judges every connect and sendto.

Why: the project's rule is that tests talk to loopback only (the lab's brokers, DNS servers,
proxies and OAuth server all live on 127.0.0.x). tests/support/hermetic_dns.py keeps the session's DNS
queries there, but nothing stopped a connect to an address off loopback: a DNS view or a
`--resolve` mapping pointing at a private address, a signer that reaches for AWS, a typo. The
hook sees the destination of every `socket.connect`, `socket.sendto` and `socket.sendmsg` of an
AF_INET or AF_INET6 socket (other families, AF_UNIX above all, never leave the machine) and
refuses one that is not loopback (198.18.0.0/15 and the lab's ULA prefix pass only from inside a
namespace of kprobe/lab/netns.py, /run/netns/kpl-*): the call raises PermissionError naming the address, one line
goes to stderr, and the line is appended to the session's log, which tests/conftest.py reads
after every test. So a crossing fails its test even where the code under test swallowed the
error (a refused connect is, to kprobe, just an unreachable endpoint).

The pytest process installs it from tests/conftest.py. Every Python child that inherits the
session's environment installs it from tests/fence/sitecustomize.py: conftest puts that folder
first on PYTHONPATH and names the log in KPROBE_TEST_FENCE. Name lookups are not judged (the
session's resolver is the loopback stub, and lookups must work); `refusing_lookups()`, or
KPROBE_TEST_FENCE_LOOKUPS=1 in a child, refuses those of names off loopback too, for code that
must not even try (AWS's signer in tests/kafka/test_msk.py). The brokers' JVMs, the Java client,
librdkafka and kcat are not Python and are not fenced by it.

Nothing here is imported at start-up beyond `os`: the hook imports `socket` only once a socket
exists, so a child's start-up (which tests/cli/test_app.py measures by what it loads) is unchanged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "KPROBE_TEST_FENCE"  # the log file's path; set: every Python child fences itself
ENV_LOOKUPS = "KPROBE_TEST_FENCE_LOOKUPS"  # set: lookups of names off loopback are refused too
_PACKETS = frozenset(("socket.connect", "socket.sendto", "socket.sendmsg"))
_EVENTS = _PACKETS | {"socket.getaddrinfo"}


def _literal_is_loopback(host: str) -> bool | None:
    """True or False for an IP literal (127.0.0.0/8, ::1, ::ffff:127.x.y.z), None for a name."""
    import socket

    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            packed = socket.inet_pton(family, host.split("%", 1)[0])
        except OSError:
            continue
        if family == socket.AF_INET:
            return packed[0] == 127
        return packed == bytes(15) + b"\x01" or (packed[:12] == bytes(10) + b"\xff\xff" and packed[12] == 127)
    return None


def is_loopback(host: str) -> bool:
    """Whether every address `host` stands for is loopback (a name is resolved, as connect() would)."""
    import socket

    literal = _literal_is_loopback(host)
    if literal is not None:
        return literal
    if not host:
        return False  # '' is INADDR_ANY to Python, '<broadcast>' the broadcast address: not loopback
    try:
        answers = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return True  # nothing to connect to: the connect fails on its own, no packet leaves
    return all(_literal_is_loopback(str(a[4][0])) for a in answers)


# The namespace lab's ranges and prefix (kprobe/lab/netns.py): allowed only inside its namespaces.
LAB_RANGES = ("198.18.0.0/15", "fd6b:7072:6f62::/48")
LAB_PREFIX = "kpl-"


def _in_lab_range(host: str) -> bool:
    """Whether `host` is an address literal in the namespace lab's ranges (a name never is)."""
    import ipaddress

    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net) for net in LAB_RANGES)


def inside_lab_namespace() -> bool:
    """Whether this process's network namespace is one the lab made (/run/netns/kpl-*): its packets
    then cannot leave the lab's veths, whose other ends are lab namespaces too."""
    try:
        mine = os.stat("/proc/self/ns/net")
        return any((st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
                   for st in (os.stat(e.path) for e in os.scandir("/run/netns") if e.name.startswith(LAB_PREFIX)))
    except OSError:
        return False


class Fence:
    """The hook and what it has refused; one per process (FENCE)."""

    def __init__(self) -> None:
        self.installed = False
        self.log: str | None = None
        self.lookups = 0  # depth of refusing_lookups(), or 1 from the environment
        self._expected: list[list[str]] = []  # crossings a test of the fence itself provokes

    def install(self, log: str | None, *, lookups: bool = False) -> None:
        """Add the audit hook (once: an audit hook cannot be removed) and log crossings to `log`."""
        self.log = log
        self.lookups += int(lookups)
        if not self.installed:
            sys.addaudithook(self.hook)
            self.installed = True

    def hook(self, event: str, args: tuple) -> None:
        if event not in _EVENTS:
            return
        if event == "socket.getaddrinfo":
            host = args[0]
            if self.lookups and host is not None:
                name = host.decode() if isinstance(host, bytes) else str(host)
                if name != "localhost" and not _literal_is_loopback(name):
                    self._cross(f"{event} {name}")
            return
        import socket

        sock, address = args[0], args[1]
        if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
            return  # AF_UNIX, netlink, or sendmsg without an address (a connected socket, already judged)
        host = address[0].decode() if isinstance(address[0], bytes) else str(address[0])
        if not is_loopback(host) and not (_in_lab_range(host) and inside_lab_namespace()):
            where = f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
            self._cross(f"{event} to {where}")

    def _cross(self, what: str) -> None:
        if self._expected:
            self._expected[-1].append(what)
        else:
            line = (f"kprobe test fence: {what} refused (pid {os.getpid()}): tests send packets only to "
                    "127.0.0.0/8 and ::1 (tests/fence/loopback_fence.py)\n")
            os.write(2, line.encode())
            if self.log:
                with open(self.log, "a") as log:
                    log.write(line)
        raise PermissionError(13, f"kprobe test fence: {what} refused: outside loopback")

    @contextmanager
    def expecting(self) -> Iterator[list[str]]:
        """Crossings in the block are the test's own business: listed here, not logged as failures."""
        seen: list[str] = []
        self._expected.append(seen)
        try:
            yield seen
        finally:
            self._expected.remove(seen)

    @contextmanager
    def refusing_lookups(self) -> Iterator[None]:
        """In the block, looking up a name that is not loopback is refused like a connect."""
        self.lookups += 1
        try:
            yield
        finally:
            self.lookups -= 1


FENCE = Fence()
