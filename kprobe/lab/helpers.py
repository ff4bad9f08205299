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
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kprobe.errors import LabError
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


# Every port a lab in this process has handed out, on whatever address. Two labs (two runs of
# free_port with their own `taken`) on different addresses could otherwise both get port N: a
# page normalised over several labs (docs/generate.py) then names one lab's port by the other's
# listener, about once in a dozen runs.
_ISSUED: set[int] = set()
_ISSUED_LOCK = threading.Lock()


def claim_port(port: int) -> bool:
    """Record `port` as handed out; False when some lab of this process already has it."""
    with _ISSUED_LOCK:
        if port in _ISSUED:
            return False
        _ISSUED.add(port)
        return True


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
        if port == 0 and not claim_port(int(sock.getsockname()[1])):
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
