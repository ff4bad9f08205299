"""Helper processes beside the brokers: a program that reads a rendered config file, started and
stopped with the lab.

Why a module of its own: some set-ups are only real with a real third program in the path (an
ingress controller's SNI-routing proxy, say), and a Python stand-in would prove only that kprobe
agrees with its author. What every such program needs from the lab is the same: find the binary
(or say which Debian package has it), write its config, start it in its own process group so it
dies with the lab (PR_SET_PDEATHSIG, as the brokers' JVMs do), wait a bounded time until it
accepts connections where it should (or report its own last words), and stop it. The program and
its config are the caller's business (`kprobe.lab.sni_proxy` renders HAProxy's).

Leftovers are countable: the config file's name carries the lab's id, and it is on the helper's
command line, so `running_helpers(lab_id)` finds any process a crashed run left behind.

The lab's port numbers are chosen here too, for the brokers and for these helpers alike: a number
is handed out once among the labs of a process, and a lab's own numbers (PortClaims) once among
every process of the user, since a JVM binds its port seconds after the lab chose it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kprobe.errors import LabError
from kprobe.private import UnsafePath, private_dir
from kprobe.records import record

READY_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


def die_with_parent() -> Callable[[], None] | None:
    """A preexec hook asking Linux to SIGKILL the child when the lab's process dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None

    def hook() -> None:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return hook


def marker(lab_id: str) -> str:
    """The text a helper's config file name carries, so its command line names the lab."""
    return f"kprobe-helper-{lab_id}"


@record
class HelperCommand:
    """What to run: `program args...` with `{config}` in `args` replaced by the config file's path.

    `package` is the Debian package that has `program`, named in the error when it is missing.
    The helper counts as started when every `listens` address accepts TCP connections, or, with
    `ready`, when that check returns None (else it returns what it still waits for: a helper
    handed listening sockets through `pass_fds` accepts connections before it runs, so it needs
    a check that it answers). `pass_fds` are inherited under their own numbers, so the config can
    name them (HAProxy's `bind fd@N`).
    """

    name: str
    program: str
    package: str
    args: tuple[str, ...]
    config: str
    listens: tuple[tuple[str, int], ...] = ()
    ready: Callable[[], str | None] | None = None
    pass_fds: tuple[int, ...] = ()


class HelperProcess:
    """One running helper; `start()` returns once it is ready, `stop()` is safe to call twice."""

    def __init__(self, command: HelperCommand, directory: Path, lab_id: str) -> None:
        self.command = command
        self.directory = directory
        self.lab_id = lab_id
        self.proc: subprocess.Popen[bytes] | None = None
        self.config_path = directory / f"{command.name}.{marker(lab_id)}.cfg"
        self.log_path = directory / f"{command.name}.log"

    def start(self, timeout: float = READY_TIMEOUT) -> HelperProcess:
        """Start the program and wait until it is ready, at most `timeout` seconds; a LabError says why not."""
        cmd = self.command
        # Daemons live in sbin, which a non-root user's PATH often lacks (Debian's default one does).
        binary = shutil.which(cmd.program) or shutil.which(cmd.program, path="/usr/local/sbin:/usr/sbin:/sbin")
        if binary is None:
            raise LabError(f"the lab's {cmd.name} needs the {cmd.program} command, which is neither on PATH nor in "
                           f"/usr/sbin: install it (apt-get install {cmd.package})")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(cmd.config)
        args = [binary, *(a.replace("{config}", str(self.config_path)) for a in cmd.args)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=die_with_parent(), pass_fds=cmd.pass_fds)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()
                raise LabError(f"the lab's {cmd.name} ({cmd.program}) exited with {code} at start: "
                               f"{self._last_words()} (config {self.config_path})")
            waiting = self._waiting_for()
            if not waiting:
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise LabError(f"the lab's {cmd.name} ({cmd.program}) was not ready within {timeout:g}s (waiting for "
                               f"{waiting}): {self._last_words()} (config {self.config_path})")
            time.sleep(0.05)

    def _waiting_for(self) -> str | None:
        if self.command.ready is not None:
            return self.command.ready()
        silent = [f"{h}:{p}" for h, p in self.command.listens if not _accepts(h, p)]
        return f"{', '.join(silent)} to accept connections" if silent else None

    @property
    def pid(self) -> int | None:
        """The helper's pid while it runs."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def stop(self) -> None:
        """SIGTERM the helper's process group, SIGKILL it if it lingers, and reap it."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def _last_words(self) -> str:
        try:
            lines = [ln.strip() for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no output"
        alerts = [ln for ln in lines if "ALERT" in ln or "rror" in ln]
        return " / ".join((alerts or lines)[-2:])[:400] or "no output"


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


# Every port number a lab of this process has bound to port 0 (decoys, proxies, forwards), on whatever
# address. Two labs on different addresses could otherwise both get port N: a page normalised over
# several labs (docs/generate.py) then names one lab's port by the other's listener.
_ISSUED: set[int] = set()
# Preferred numbers (a listener's or a forward's 9092, 443, node ports) some lab of this process has: shared
# among preferred ports (pods each have 9092, on their own addresses), never a lab's own number.
_SHARED: set[int] = set()
# The numbers this process holds claims on (PortClaims), each a lab's own.
_HELD: set[int] = set()
_PORTS_LOCK = threading.Lock()


def claim_port(port: int) -> bool:
    """Record `port` as handed out; False when some lab of this process already has it."""
    with _PORTS_LOCK:
        if port in _ISSUED or port in _HELD:
            return False
        _ISSUED.add(port)
        return True


def share_port(port: int) -> bool:
    """Record `port` as a preferred one a lab of this process has.

    False when a lab of this process holds it as its own: one number means one thing among the labs
    of a process.
    """
    with _PORTS_LOCK:
        if port in _HELD:
            return False
        _SHARED.add(port)
        return True


# Where a lab's own ports start: below it are the registered services (Kafka's 9092 among them).
LAB_PORTS_FROM = 20000
_ENOUGH = 1000  # the numbers a span outside the ephemeral range needs to be chosen from
_EPHEMERAL_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_IANA_EPHEMERAL = (49152, 65535)  # macOS's, and the default where the kernel does not say


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives a bind to port 0 and an outgoing connection (Linux's ip_local_port_range)."""
    try:
        low, high = (int(word) for word in _EPHEMERAL_FILE.read_text().split())
    except (OSError, ValueError):
        return _IANA_EPHEMERAL
    return low, high


def lab_port_range() -> tuple[int, int]:
    """Where a lab chooses its own ports: below the ephemeral range, else above it.

    Why outside it: the kernel hands an ephemeral port to any process that binds port 0 or connects
    out (a Spark executor, a Kafka client), and it may hand out a number a lab has chosen and its JVM
    has not bound yet. Outside the range only a process that names the number can take it, and the
    labs' claims (PortClaims) keep kprobe's own processes off it. A machine whose range leaves no
    room outside it gets every number from LAB_PORTS_FROM up, ephemeral ones and that race included.
    """
    low, high = ephemeral_range()
    if low - LAB_PORTS_FROM >= _ENOUGH:
        return LAB_PORTS_FROM, low - 1
    if 65535 - high >= _ENOUGH:
        return high + 1, 65535
    return LAB_PORTS_FROM, 65535


def claims_dir() -> Path:
    """The directory of this user's port claims, in the temp directory.

    The temp directory, not kprobe's cache: every process of the user must find the same one, and
    runs and tests point KPROBE_CACHE_DIR elsewhere. private_dir makes it this user's alone, so no
    other user can plant a file there or hold one of its locks.
    """
    path = Path(tempfile.gettempdir(), f"kprobe-ports-{os.geteuid()}")
    try:
        return private_dir(path)
    except UnsafePath as exc:
        raise LabError(f"the lab will not claim ports in {path}: {exc}") from None


def _lock(path: Path) -> int | None:
    """A descriptor holding an exclusive flock on the file at `path`, or None when another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        mine, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
    except (BlockingIOError, FileNotFoundError):
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    if (mine.st_dev, mine.st_ino) != (now.st_dev, now.st_ino):
        os.close(fd)  # its holder removed it between our open and our lock: the claim is the new file's
        return None
    return fd


class PortClaims:
    """The port numbers one lab holds against every process of this user on the machine, for the lab's life.

    Why: a lab chooses its brokers' ports before their JVMs bind them, and in between another lab (a
    test worker, a detached lab's supervisor) could choose the same number and bind it first. A claim
    is an flock on a file named for the number (claims_dir), which the kernel drops when the holding
    process dies, so a lab killed with SIGKILL leaves none behind; `release()` (the lab's stop) drops
    them all. A released claim's file is removed before its lock is dropped, so the directory keeps
    only the files of held claims (and of killed holders, which the next claim of the number reuses).
    """

    def __init__(self) -> None:
        self._held: dict[int, tuple[int, Path]] = {}

    def __contains__(self, port: object) -> bool:
        return port in self._held

    @property
    def ports(self) -> set[int]:
        """The numbers held."""
        return set(self._held)

    def claim(self, port: int) -> bool:
        """Hold `port`; False when a lab anywhere holds it, or a lab of this process has it (preferred or bound)."""
        with _PORTS_LOCK:
            if port in _HELD or port in _SHARED or port in _ISSUED:
                return False
            path = claims_dir() / str(port)
            fd = _lock(path)
            if fd is None:
                return False
            self._held[port] = (fd, path)
            _HELD.add(port)
            return True

    def drop(self, port: int) -> None:
        """Release one claim (a number its lab could not bind after all)."""
        with _PORTS_LOCK:
            held = self._held.pop(port, None)
            if held is None:
                return
            _HELD.discard(port)
            fd, path = held
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # before the lock goes: _lock then refuses a descriptor of the old file
            os.close(fd)

    def release(self) -> None:
        """Release every claim; safe to call twice."""
        for port in list(self._held):
            self.drop(port)


def bind_unclaimed(sock_factory: Any, host: str) -> socket.socket:
    """A socket bound on `host` to an ephemeral port no lab of this process holds yet."""
    for _ in range(50):
        sock = sock_factory()
        sock.bind((host, 0))
        if claim_port(int(sock.getsockname()[1])):
            return sock
        sock.close()
    raise RuntimeError(f"no free port on {host}")


def listening_socket(host: str, preferred: int = 0) -> socket.socket:
    """A socket listening on `host`, on `preferred` where it can be bound (443 needs root or a lowered
    net.ipv4.ip_unprivileged_port_start, and must be free), else on a free port.

    Held from the moment the port is chosen and handed to the helper (`pass_fds`), so no other
    process can take the port in between: every lab of a scenario prefers the same port, and two
    test sessions on one machine must not end up sharing one proxy. No SO_REUSEPORT, for the same
    reason; SO_REUSEADDR, so a previous lab's connection in TIME_WAIT does not push this one off.
    """
    for port in ([preferred] if preferred else []) + [0] * 50:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError:
            sock.close()
            continue
        if not (claim_port(int(sock.getsockname()[1])) if port == 0 else share_port(port)):
            sock.close()  # another lab of this process has that number, on another address
            continue
        return sock
    raise LabError(f"no free port on {host}")


def processes_where(matches: Callable[[list[bytes]], bool]) -> list[int]:
    """PIDs of the processes whose command line (its arguments) `matches`: a lab's leak accounting."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if matches(cmdline.split(b"\0")):
            pids.append(int(entry.name))
    return sorted(pids)


def running_helpers(lab_id: str) -> list[int]:
    """PIDs of helper processes whose command line names the lab's config files (for leak accounting)."""
    mark = marker(lab_id).encode()
    return processes_where(lambda args: any(mark in arg for arg in args))
