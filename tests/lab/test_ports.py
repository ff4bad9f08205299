"""The lab's port numbers: its own ones outside the ephemeral range and claimed machine-wide, every
number handed out once among the labs of a process.

Why: a lab chooses a broker's port seconds before the JVM binds it. In between, another process
could take the number: another lab picking the same one (a test worker, a detached lab's
supervisor), or any process that binds port 0 or connects out and is handed it by the kernel. And
two labs of one process on different addresses could share a number, which a page normalised over
several labs (docs/generate.py) then names after the wrong listener.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from kprobe.lab.base import free_port
from kprobe.lab.decoys import Blackhole, Impostor
from kprobe.lab.helpers import PortClaims, claims_dir, listening_socket
from kprobe.lab.native import NativeLab
from kprobe.lab.scenarios import get_scenario

# A process of its own that is handed a lab port: only `argv[1]` may be chosen (the range narrowed
# to it), so "none" means the number was refused. With "hold" it keeps the claim until killed.
_CHILD = """
import sys
from kprobe.lab import base
from kprobe.lab.helpers import PortClaims

port, mode = int(sys.argv[1]), sys.argv[2]
base.lab_port_range = lambda: (port, port)
claims = PortClaims()
try:
    got = base.free_port("127.0.0.203", set(), claims)
except RuntimeError:
    got = "none"
print(got, flush=True)
if mode == "hold":
    sys.stdin.read()
claims.release()
"""


def _ephemeral() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def _child(port: int, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(port), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _handed_to_a_child(port: int) -> str:
    """What a fresh process is handed when the only number it may choose is `port`."""
    out, _ = _child(port, "once").communicate(timeout=60)
    return out.strip()


def _unheld_number() -> int:
    """A lab number this process may claim and no process holds now (claimed, then released)."""
    claims = PortClaims()
    port = free_port("127.0.0.201", set(), claims)
    claims.release()
    return port


def test_a_labs_own_ports_are_outside_the_ephemeral_range() -> None:
    low, high = _ephemeral()
    with socket.socket() as sock:  # the range is the kernel's: a bind to port 0 lands in it
        sock.bind(("127.0.0.200", 0))
        assert low <= sock.getsockname()[1] <= high
    claims = PortClaims()
    taken: set[tuple[str, int]] = set()
    try:
        ports = [free_port(f"127.0.0.{200 + n % 4}", taken, claims) for n in range(60)]
    finally:
        claims.release()
    assert len(set(ports)) == 60
    inside = [port for port in ports if low <= port <= high]
    assert not inside, f"ephemeral range {low}-{high}: {inside}"


def test_a_port_one_process_holds_is_never_handed_to_another() -> None:
    claims = PortClaims()
    port = free_port("127.0.0.201", set(), claims)
    try:
        assert port in claims
        assert _handed_to_a_child(port) == "none"  # its only choice, and free to bind: refused for the claim
    finally:
        claims.release()
    assert _handed_to_a_child(port) == str(port)  # released: the same number is handed out


def test_a_claim_is_released_when_its_holder_is_killed() -> None:
    port = _unheld_number()
    holder = _child(port, "hold")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == str(port)
        assert not PortClaims().claim(port)  # held by the child
        assert (claims_dir() / str(port)).exists()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    mine = PortClaims()
    try:
        assert mine.claim(port)  # the kernel dropped the dead holder's lock: nothing to clean up
    finally:
        mine.release()
    assert not (claims_dir() / str(port)).exists()  # a released claim leaves no file


def test_a_preferred_port_and_a_labs_own_port_never_share_a_number_in_one_process() -> None:
    claims, other = PortClaims(), PortClaims()
    own = free_port("127.0.0.201", set(), claims)
    try:
        # Preferred by another lab on another address, where it is free to bind: moved off all the same.
        assert free_port("127.0.0.202", set(), other, preferred=own) != own
        with listening_socket("127.0.0.204", own) as sock:
            assert sock.getsockname()[1] != own
    finally:
        claims.release()
        other.release()
    preferred = _unheld_number()
    with listening_socket("127.0.0.204", preferred) as sock:
        assert sock.getsockname()[1] == preferred  # a preferred port is taken where it is free, as ever
        assert not PortClaims().claim(preferred)  # and is no lab's own number after that


def test_ports_are_unique_across_labs_and_helpers() -> None:
    seen: list[int] = []
    holders = []
    labs = []
    try:
        for round_ in range(40):
            claims = PortClaims()  # a new lab each round, on its own addresses
            labs.append(claims)
            seen.append(free_port(f"127.0.0.{200 + round_ % 20}", set(), claims))
            imp = Impostor(f"127.0.0.{230 + round_ % 10}")
            sock = listening_socket(f"127.0.0.{240 + round_ % 10}")
            holders += [imp, sock]
            seen += [imp.port, int(sock.getsockname()[1])]
            if round_ % 8 == 0:  # a black hole waits out its last filler connect (0.3 s): a few suffice
                hole = Blackhole(f"127.0.0.{220 + round_ % 10}")
                holders.append(hole)
                seen.append(hole.port)
    finally:
        for holder in holders:
            holder.close()
        for claims in labs:
            claims.release()
    assert len(seen) == len(set(seen)), sorted(p for p in seen if seen.count(p) > 1)


def test_a_lab_holds_its_own_ports_from_their_choice_until_it_stops() -> None:
    low, high = _ephemeral()
    lab = NativeLab(get_scenario("listeners")).start()
    try:
        node = lab.nodes[0]
        own = {node.controller_port, *(rl.port for rl in node.listeners.values() if not rl.spec.port)}
        assert own == lab.port_claims.ports
        assert not [port for port in own if low <= port <= high]
        for port in own:
            assert _handed_to_a_child(port) == "none"
    finally:
        lab.stop()
    assert lab.port_claims.ports == set()
    for port in own:
        assert not (claims_dir() / str(port)).exists()
